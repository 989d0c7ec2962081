"""The forwarding pipeline the controller pushes: P4Info + p4_device_config + cookie.

Both targets get the same ForwardingPipelineConfig (design section 4): the P4Info that p4c
makes of ``p4src/mrc_switch.p4`` and the bmv2 JSON as ``p4_device_config``. The eBPF target
checks the P4Info against its program and stores the rest untouched. The cookie is finsy's:
a 64-bit hash of the P4Info and the device config, so it changes exactly when either does and
a restarted controller computes the same value (design section 7).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import finsy as fy
from finsy.proto import p4i
from google.protobuf import text_format

from ..errors import MrcError
from ..resources import P4_JSON, P4_P4INFO, p4_build_dir

BUILD_DIR = p4_build_dir()
"""p4c's outputs of ``p4src/mrc_switch.p4``, shipped as package data (:mod:`mrckit.resources`)."""
DEFAULT_P4INFO = BUILD_DIR / P4_P4INFO
DEFAULT_DEVICE_CONFIG = BUILD_DIR / P4_JSON


@dataclass(frozen=True)
class Pipeline:
    """A P4 program for P4Runtime.

    Attributes:
        schema: finsy's P4Schema (P4Info lookups by name or id, entity encoding).
        device_config: the ``p4_device_config`` bytes (bmv2 JSON).
        p4info_path: where the P4Info came from (for messages).
    """

    schema: fy.P4Schema
    device_config: bytes
    p4info_path: str

    @property
    def cookie(self) -> int:
        """The 64-bit pipeline cookie sent with the config and compared on connect."""
        return self.schema.p4cookie

    def config(self):
        """The ``p4.v1.ForwardingPipelineConfig`` message (P4Info, device config, cookie)."""
        return self.schema.get_pipeline_config()


def load_pipeline(p4info: str | Path | None = None, device_config: str | Path | bytes | None = None) -> Pipeline:
    """Load a pipeline: a P4Info text file and a device config (path or bytes).

    Defaults: ``p4src/build/mrc_switch.p4info.txtpb`` and ``p4src/build/mrc_switch.json`` of the
    source checkout (p4c's committed outputs).

    Raises:
        MrcError: a missing or unparsable file, naming it.
    """
    p4info_path = Path(p4info) if p4info is not None else DEFAULT_P4INFO
    if device_config is None:
        device_config = DEFAULT_DEVICE_CONFIG
    try:
        text = p4info_path.read_text()
    except OSError as exc:
        hint = " (p4c's output: run `make p4`, or give --p4info)" if p4info is None else ""
        raise MrcError(f"P4Info {p4info_path}: {exc.strerror or exc}{hint}") from None
    try:
        info = text_format.Parse(text, p4i.P4Info())
    except text_format.ParseError as exc:
        raise MrcError(f"P4Info {p4info_path}: not a P4Info text proto: {exc}") from None
    if isinstance(device_config, bytes):
        blob = device_config
    else:
        try:
            blob = Path(device_config).read_bytes()
        except OSError as exc:
            raise MrcError(f"device config {device_config}: {exc.strerror or exc}") from None
    return Pipeline(fy.P4Schema(info, blob), blob, str(p4info_path))
