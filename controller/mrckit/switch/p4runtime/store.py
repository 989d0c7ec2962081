"""The pipeline a switch was given, kept on disk so a restarted server answers as before.

bpffs holds only BPF objects, so the file lives in a state directory of its own
(default ``/run/mrckit/switch/<switch>/pipeline.bin``), next to the pins in spirit: it records
the backend's identity (the ids of the pinned maps), and a file written for other maps is
ignored. The file is a ``p4.v1.ForwardingPipelineConfig`` (P4Info, device config and cookie,
untouched) preceded by one line with the identity. Design section 7.

The maps do not hold an action profile group's ``max_size`` either, so the groups created with
one are kept beside it in ``group_sizes.json`` (``{"identity": ..., "max_size": {group id:
max_size}}``), rewritten after each Write that changes them; so are the table entries'
``metadata`` and ``controller_metadata`` (P4Runtime spec 9.1: a Read returns them), in
``entry_metadata.json`` (``{"identity": ..., "entries": [[table, key, metadata hex,
controller_metadata], ...]}``, keys as JSON lists).
"""

import json
import os
from pathlib import Path

from finsy.proto import p4r

STATE_ROOT = "/run/mrckit/switch"
FILE_NAME = "pipeline.bin"
SIZES_NAME = "group_sizes.json"
METADATA_NAME = "entry_metadata.json"


def default_dir(switch: str) -> Path:
    """The state directory of switch ``switch``."""
    return Path(STATE_ROOT) / switch


def save(directory: Path, identity: str, config: p4r.ForwardingPipelineConfig) -> None:
    """Write ``config`` for the maps named by ``identity``, atomically (rename over the old file)."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / (FILE_NAME + ".tmp")
    tmp.write_bytes(identity.encode() + b"\n" + config.SerializeToString())
    os.replace(tmp, directory / FILE_NAME)


def load(directory: Path, identity: str) -> p4r.ForwardingPipelineConfig | None:
    """The stored config if one exists for these maps (same ``identity``), else None."""
    path = directory / FILE_NAME
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    stored_identity, _, body = data.partition(b"\n")
    if stored_identity.decode(errors="replace") != identity:
        return None
    config = p4r.ForwardingPipelineConfig()
    config.ParseFromString(body)
    return config


def remove(directory: Path) -> None:
    """Forget the stored pipeline and group sizes (the switch was torn down)."""
    (directory / FILE_NAME).unlink(missing_ok=True)
    (directory / SIZES_NAME).unlink(missing_ok=True)
    (directory / METADATA_NAME).unlink(missing_ok=True)


def save_group_sizes(directory: Path, identity: str, sizes: dict[int, int]) -> None:
    """Write {group id: max_size} for the maps named by ``identity``, atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / (SIZES_NAME + ".tmp")
    tmp.write_text(json.dumps({"identity": identity, "max_size": {str(k): v for k, v in sorted(sizes.items())}}))
    os.replace(tmp, directory / SIZES_NAME)


def load_group_sizes(directory: Path, identity: str) -> dict[int, int]:
    """The stored {group id: max_size} for these maps, or {} (none stored, or for other maps)."""
    try:
        data = json.loads((directory / SIZES_NAME).read_text())
    except (FileNotFoundError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("identity") != identity:
        return {}
    return {int(k): int(v) for k, v in data.get("max_size", {}).items()}


def save_metadata(directory: Path, identity: str, metadata: dict[tuple[str, tuple], tuple[bytes, int]]) -> None:
    """Write {(table, key): (metadata, controller_metadata)} for the maps named by ``identity``,
    atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = [[table, list(key), meta.hex(), cookie] for (table, key), (meta, cookie) in sorted(metadata.items(), key=repr)]
    tmp = directory / (METADATA_NAME + ".tmp")
    tmp.write_text(json.dumps({"identity": identity, "entries": rows}))
    os.replace(tmp, directory / METADATA_NAME)


def load_metadata(directory: Path, identity: str) -> dict[tuple[str, tuple], tuple[bytes, int]]:
    """The stored entry metadata for these maps, or {} (none stored, for other maps, or unreadable)."""
    try:
        data = json.loads((directory / METADATA_NAME).read_text())
        if not isinstance(data, dict) or data.get("identity") != identity:
            return {}
        return {(table, _tuple(key)): (bytes.fromhex(meta), int(cookie)) for table, key, meta, cookie in data["entries"]}
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return {}


def _tuple(value):
    """JSON lists back to the key's tuples (recursively)."""
    return tuple(_tuple(v) for v in value) if isinstance(value, list) else value
