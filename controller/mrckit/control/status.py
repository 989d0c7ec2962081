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


def _process_start_ns(pid: int) -> int | None:
    """Wall-clock start time of process ``pid`` (ns, to about a second: boot time is in whole
    seconds), or None if it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = next(int(ln.split()[1]) for ln in Path("/proc/stat").read_text().splitlines()
                    if ln.startswith("btime "))
    except (OSError, StopIteration, ValueError):
        return None
    ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22; comm may hold spaces
    return boot * 1_000_000_000 + ticks * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def check_not_running(path: Path) -> None:
    """Refuse to start a second controller under the name of ``path``'s status file.

    A controller runs there if the file's pid is alive, is not this process, and started
    before the file was last written (so a pid reused since a crash does not count).

    Raises:
        MrcError: naming the running controller's pid.
    """
    try:
        status = json.loads(Path(path).read_text())
        pid, updated = int(status.get("pid") or 0), int(status.get("updated_ns") or 0)
    except (OSError, ValueError, TypeError, AttributeError):
        return  # no file, or one we cannot read: nothing to protect
    if pid <= 0 or pid == os.getpid() or not pid_alive(pid):
        return
    started = _process_start_ns(pid)
    if started is not None and started > updated + 2_000_000_000:
        return  # that pid belongs to a newer process: the controller died without a word
    name = Path(path).stem
    raise MrcError(f"controller {name!r} is already running (pid {pid}, status {path}); a second one "
                   f"would take the switches over from it: stop it first (kill {pid}), or use another --name")


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
