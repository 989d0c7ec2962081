"""Where mrckit finds the files it ships: package data, never the repository around it.

An installed wheel and an editable install of a clone look the same from here: the BPF objects
(``mrckit/bpf/obj/*.bpf.o``), the native endpoint library (``mrckit/endpoint/native/libmrcep.so``)
and p4c's outputs for ``p4src/mrc_switch.p4`` (``mrckit/p4/``) are all files inside the
``mrckit`` package. The build step (``setup.py``, docs/packaging.md) compiles the first two and
copies the third; in a clone, ``controller/mrckit/p4`` is a link to ``p4src/build``, so
``make p4`` updates what an editable install serves.

Developer tools that rewrite the sources (``mrc wire gen``, the pipeline ids in
docs/p4runtime.md) need the checkout itself: :func:`checkout_root` finds it from the current
directory, and says so when there is none.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from .errors import MrcError

P4_JSON = "mrc_switch.json"
"""p4c's bmv2 JSON of mrc_switch.p4 (the ``p4_device_config`` of every pipeline push)."""
P4_P4INFO = "mrc_switch.p4info.txtpb"
"""p4c's P4Info of mrc_switch.p4 (text proto)."""


def package_dir() -> Path:
    """The directory of the imported ``mrckit`` package (site-packages, or ``controller/mrckit``
    of an editable clone)."""
    return Path(str(resources.files("mrckit"))).resolve()


def package_parent() -> Path:
    """The directory that holds the ``mrckit`` package: what a child process needs on
    PYTHONPATH to import this same mrckit."""
    return package_dir().parent


def p4_build_dir() -> Path:
    """The shipped p4c outputs of ``p4src/mrc_switch.p4``: :data:`P4_JSON` and :data:`P4_P4INFO`."""
    return package_dir() / "p4"


def child_pythonpath(env: dict[str, str]) -> str:
    """``env``'s PYTHONPATH with this mrckit's parent directory first (for child processes)."""
    root = str(package_parent())
    return root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")


CHECKOUT_MARKERS = ("p4src/mrc_switch.p4", "ebpf/include", "controller/mrckit")


def checkout_root(start: Path | None = None) -> Path:
    """The mrckit source checkout that holds ``start`` (default: the current directory), found
    by walking up to a directory with :data:`CHECKOUT_MARKERS`.

    Raises:
        MrcError: ``start`` is not inside a checkout (these tools rewrite source files).
    """
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if all((folder / marker).exists() for marker in CHECKOUT_MARKERS):
            return folder
    raise MrcError(f"{here} is not inside an mrckit source checkout (run this from the clone)")
