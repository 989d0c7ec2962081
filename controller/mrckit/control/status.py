"""The running controller's status file, read by ``mrc controller status``.

The controller rewrites ``/run/mrckit/controller/<name>.json`` (atomically: write, then
rename) whenever its state changes and at least every few seconds. It holds the controller's
pid, so a reader can tell a live controller from a stale file. Chosen over a status RPC: no
extra server to secure, readable with ``cat``, and it survives the controller for a post-mortem.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import MrcError

STATUS_DIR = Path("/run/mrckit/controller")


def status_path(name: str, directory: Path | str = STATUS_DIR) -> Path:
    """Where the controller called ``name`` keeps its status: ``directory/<name>.json``.

    Raises:
        MrcError: ``name`` is empty, holds a ``/`` or starts with ``.`` (it would leave
            ``directory`` or hide the file).
    """
    if not name or "/" in name or name.startswith("."):
        raise MrcError(f"controller name {name!r}: use letters, digits, '-' or '_'")
    return Path(directory) / f"{name}.json"


def write_status(path: Path, status: dict) -> None:
    """Atomically replace ``path`` with ``status`` as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(status, indent=1, sort_keys=True))
    os.replace(tmp, path)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_status(path: Path) -> dict:
    """The status at ``path``, with ``running`` set from its pid.

    Raises:
        MrcError: no such file (no controller ran under that name) or a corrupt one.
    """
    try:
        status = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise MrcError(f"no controller status at {path}: is `mrc controller run` running (see --name)?") from None
    except (OSError, ValueError) as exc:
        raise MrcError(f"{path}: unreadable controller status: {exc}") from None
    status["running"] = pid_alive(int(status.get("pid", 0))) if status.get("pid") else False
    return status
