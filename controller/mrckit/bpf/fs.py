"""bpffs: mounting it and the folder under which mrckit pins its maps and programs.

Pins live under :data:`PIN_ROOT`. bpffs belongs to the mount namespace, not the network
namespace, so a thread inside ``mrckit.netns.enter(ns)`` sees the same pins (design section 9).
"""

from __future__ import annotations

import os
import subprocess

from .errors import BpfError

BPFFS = "/sys/fs/bpf"
PIN_ROOT = f"{BPFFS}/mrckit"


def bpffs_mounted(path: str = BPFFS) -> bool:
    """Whether a bpf filesystem is mounted exactly at ``path`` (read from /proc/self/mounts)."""
    with open("/proc/self/mounts") as mounts:
        return any(line.split()[1] == path and line.split()[2] == "bpf" for line in mounts)


def ensure_bpffs(path: str = BPFFS) -> str:
    """Mount bpffs at ``path`` if it is not mounted, and create :data:`PIN_ROOT`.

    Returns :data:`PIN_ROOT`.

    Raises:
        BpfError: mounting failed (not root?); the message gives the manual command.
    """
    if not bpffs_mounted(path):
        proc = subprocess.run(["mount", "-t", "bpf", "bpf", path], capture_output=True, text=True)
        if proc.returncode != 0:
            raise BpfError(f"cannot mount bpffs at {path}: {proc.stderr.strip()}; "
                           f"run as root: mount -t bpf bpf {path} (or: make bpffs)")
    os.makedirs(PIN_ROOT, exist_ok=True)
    return PIN_ROOT


def pin_path(*parts: str) -> str:
    """``PIN_ROOT/part/part...``; each part must be a plain name (no ``/`` or ``..``).

    Raises:
        ValueError: a part is empty, ``.``/``..`` or contains ``/``.
    """
    for part in parts:
        if not part or part in (".", "..") or "/" in part:
            raise ValueError(f"pin path part {part!r}: must be a plain name without '/'")
    return os.path.join(PIN_ROOT, *parts)


def unpin(path: str) -> bool:
    """Remove the pin at ``path``; True if it existed. The object lives on while referenced.

    Raises:
        BpfError: ``path`` is not under bpffs, or unlink failed for another reason.
    """
    if not os.path.realpath(path).startswith(BPFFS + "/"):
        raise BpfError(f"refusing to unpin {path}: not under {BPFFS}")
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise BpfError(f"unpin {path}: {exc.strerror}", errno=exc.errno or 0) from None
    return True
