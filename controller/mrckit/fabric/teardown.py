"""Removing fabrics: one by its state, or everything under a prefix (``mrc fabric down --all``).

Order matters: flap processes and faults first (so no fault pin outlives its interface),
then the processes (agents detach their own programs on SIGTERM), then the switch pins and
bmv2 folders, then the namespaces (which takes every veth and attachment with it and kills
whatever still runs inside), then the state folder. Every step tolerates what is already
gone, so teardown is idempotent and may be repeated after a crash.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

from .. import netns
from ..errors import MrcError
from ..switch import bmv2
from ..switch.ebpf_target import pinned_switches, remove_pins
from . import faults, nodes
from .state import DEFAULT_PREFIX, FabricState, list_fabrics, state_dir


def teardown(state: FabricState) -> None:
    """Remove everything fabric ``state`` made. Idempotent."""
    ns_prefix = state.prefix + state.name + "-"
    nodes.stop_all(state)
    faults.detach_all(ns_prefix)
    for ns in state.nodes.values():
        netns.delete(ns)
    netns.cleanup_prefix(ns_prefix)
    # Also without a controller of ours (`program_once` leaves a saved status): a later
    # controller of this name would take over its links reported down.
    forget_controller(state.name)
    shutil.rmtree(state.dir, ignore_errors=True)


def forget_controller(name: str) -> bool:
    """Remove what controller ``name`` left in its run folder (saved status, stale socket)
    unless it still runs there (it owns them). Returns whether anything was removed."""
    from ..control.client import controller_address, read_status, unix_path
    from ..control.status import saved_status_path

    left = [p for p in (saved_status_path(name), unix_path(controller_address(name))) if p and p.exists()]
    if not left:
        return False
    try:
        read_status(name)
        return False  # it answers: running
    except MrcError:
        pass
    for path in left:
        path.unlink(missing_ok=True)
    return True


def stale_controllers() -> list[str]:
    """Forget every controller in the run folder that is not running; their names."""
    from ..control.client import RUN_DIR

    folder = Path(RUN_DIR)
    names = sorted({p.name.removesuffix(suffix) for suffix in (".state.json", ".sock")
                    for p in folder.glob("*" + suffix)} if folder.is_dir() else set())
    return [name for name in names if forget_controller(name)]


def down(name: str) -> bool:
    """Tear down fabric ``name`` from its state file; False if no such fabric was up.
    A fabric whose state file is damaged is removed by prefix instead."""
    try:
        state = FabricState.load(name)
    except Exception:  # noqa: BLE001 - a damaged state file must not block removal
        if not state_dir(name).exists():
            return forget_controller(name)  # only a controller's saved status left behind
        down_prefix(DEFAULT_PREFIX + name + "-")
        shutil.rmtree(state_dir(name), ignore_errors=True)
        forget_controller(name)
        return True
    teardown(state)
    return True


def down_all(prefix: str = DEFAULT_PREFIX) -> dict[str, list[str]]:
    """Tear down every fabric whose namespace prefix starts with ``prefix`` (or whose state
    file is damaged), then anything left whose name starts with ``prefix``: namespaces,
    switch pins, fault pins, bmv2 folders, P4Runtime servers. Returns what was removed, by
    kind."""
    removed: dict[str, list[str]] = {"fabrics": []}
    for name in list_fabrics():
        try:
            ours = FabricState.load(name).prefix.startswith(prefix)
        except Exception:  # noqa: BLE001 - damaged: removed by prefix below
            ours = prefix == DEFAULT_PREFIX
        if ours and down(name):
            removed["fabrics"].append(name)
    for kind, names in down_prefix(prefix).items():
        removed[kind] = names
    stale = stale_controllers()
    if stale:
        removed["controller states"] = stale
    return removed


def down_prefix(prefix: str) -> dict[str, list[str]]:
    """Remove leftovers named ``prefix...`` that no state file describes any more."""
    out = {"processes": [str(pid) for pid in _kill_servers(prefix)]}
    out["faults"] = [f"{ns}/{ifname}/{hook}" for ns, ifname, hook in faults.detach_all(prefix)]
    out["namespaces"] = netns.cleanup_prefix(prefix)
    out["pins"] = pinned_switches_of(prefix)
    for pin in out["pins"]:
        remove_pins(pin)
    out["bmv2"] = sorted(p.name for p in bmv2.RUN_ROOT.glob(prefix + "*")) if bmv2.RUN_ROOT.is_dir() else []
    for name in out["bmv2"]:
        shutil.rmtree(bmv2.RUN_ROOT / name, ignore_errors=True)
    return {k: v for k, v in out.items() if v}


def pinned_switches_of(prefix: str) -> list[str]:
    """eBPF switch pin names that start with ``prefix``."""
    return [p for p in pinned_switches() if p.startswith(prefix)]


def _kill_servers(prefix: str) -> list[int]:
    # P4Runtime servers of root-namespace mode run outside every namespace: find them by the
    # switch pin name on their command line.
    killed = []
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit() or int(pid_dir.name) == os.getpid():
            continue
        try:
            argv = (pid_dir / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"mrckit.switch.p4runtime" in argv and any(
                a.startswith(prefix.encode()) and argv[i - 1] == b"--switch" for i, a in enumerate(argv) if i):
            try:
                os.kill(int(pid_dir.name), signal.SIGKILL)
                killed.append(int(pid_dir.name))
            except ProcessLookupError:
                pass
    return killed
