"""The controller's saved status: ``<run dir>/<name>.state.json``.

The controller rewrites it (atomically: write, then rename) whenever its state changes, at most
every ``STATUS_MIN_GAP_S``, and marks it stopped when it exits. Nobody polls it: clients ask
the running controller over its northbound (``client.py``). It exists for the controller's
successor under the same name, which takes over the timeline and the links reported down from
it (a controller killed and restarted under traffic), and for a post-mortem.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import MrcError
from .client import RUN_DIR, check_name


def saved_status_path(name: str, run_dir: Path | str = RUN_DIR) -> Path:
    """Where the controller called ``name`` saves its status: ``run_dir/<name>.state.json``.

    Raises:
        MrcError: a bad controller name (:func:`mrckit.control.client.check_name`).
    """
    return Path(run_dir) / f"{check_name(name)}.state.json"


def write_status(path: Path, status: dict) -> None:
    """Atomically replace ``path`` with ``status`` as JSON. Raises OSError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(status, indent=1, sort_keys=True))
    os.replace(tmp, path)


def load_saved_status(path: Path) -> dict | None:
    """The status saved at ``path``, or None if there is none (a fresh controller).

    Raises:
        MrcError: the file exists but is not a status (one line naming it).
    """
    try:
        status = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise MrcError(f"{path}: unreadable saved controller status: {exc}") from None
    if not isinstance(status, dict):
        raise MrcError(f"{path}: unreadable saved controller status: not an object")
    return status
