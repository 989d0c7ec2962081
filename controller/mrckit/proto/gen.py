"""Regenerate the gRPC stubs of ``host_agent.proto`` and ``controller.proto`` with grpcio-tools.

``python -m mrckit.proto.gen`` writes ``<name>_pb2.py`` and ``<name>_pb2_grpc.py`` beside each
.proto; ``generate(out_dir)`` writes them elsewhere (the staleness test does).
"""

from __future__ import annotations

import sys
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
ROOT = PROTO_DIR.parent.parent
"""The folder that holds the mrckit package (``controller/`` in a clone, site-packages in an
install), protoc's include root: imports in the stubs read "from mrckit.proto ..."."""
PROTOS = ("host_agent.proto", "controller.proto")


def generate(out_root: Path = ROOT) -> list[Path]:
    """Run protoc on every .proto here, writing under ``out_root/mrckit/proto/``.

    Raises:
        RuntimeError: grpcio-tools is not installed or protoc failed.
    """
    try:
        from grpc_tools import protoc
    except ImportError as exc:
        raise RuntimeError("grpcio-tools is missing: pip install 'grpcio-tools>=1.60'") from exc
    import grpc_tools

    include = Path(grpc_tools.__file__).parent / "_proto"
    out_root.mkdir(parents=True, exist_ok=True)
    written = []
    for name in PROTOS:
        rel = f"mrckit/proto/{name}"
        rc = protoc.main(["protoc", f"-I{ROOT}", f"-I{include}", f"--python_out={out_root}",
                          f"--grpc_python_out={out_root}", rel])
        if rc != 0:
            raise RuntimeError(f"protoc failed on {rel} (exit {rc})")
        stem = name.removesuffix(".proto")
        written += [out_root / "mrckit/proto" / f"{stem}_pb2.py",
                    out_root / "mrckit/proto" / f"{stem}_pb2_grpc.py"]
    return written


if __name__ == "__main__":
    for path in generate():
        print(path)
    sys.exit(0)
