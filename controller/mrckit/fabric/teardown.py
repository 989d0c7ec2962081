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
    # Also without a controller of ours: `program_once` (mrc controller run --once) leaves one.
    controller_status(state.name).unlink(missing_ok=True)
    # Link reports (the faults') would tell a later fabric of this name of links down.
    remove_reports(state.name)
    shutil.rmtree(state.dir, ignore_errors=True)


def remove_reports(name: str) -> bool:
    """Remove the link-report file of controller ``name`` unless a controller of that name is
    running (it owns it). Returns whether a file was removed."""
    from ..control.reports import reports_path
    from ..control.status import read_status, status_path

    path = reports_path(name)
    if not path.exists():
        return False
    try:
        if read_status(status_path(name))["running"]:
            return False
    except MrcError:
        pass  # no status file: nobody reads the reports
    path.unlink(missing_ok=True)
    return True


def stale_reports() -> list[str]:
    """Remove every link-report file whose controller is not running; their names."""
    from ..control.status import STATUS_DIR

    folder = Path(STATUS_DIR)
    names = sorted(p.name[: -len(".links.jsonl")] for p in folder.glob("*.links.jsonl")) if folder.is_dir() else []
    return [name for name in names if remove_reports(name)]


def controller_status(name: str) -> Path:
    """The status file that ``mrc controller run --name NAME`` keeps."""
    from ..control.status import status_path

    return status_path(name)


def down(name: str) -> bool:
    """Tear down fabric ``name`` from its state file; False if no such fabric was up.
    A fabric whose state file is damaged is removed by prefix instead."""
    try:
        state = FabricState.load(name)
    except Exception:  # noqa: BLE001 - a damaged state file must not block removal
        if not state_dir(name).exists():
            return remove_reports(name)  # only a report file left behind (mrc controller link)
        down_prefix(DEFAULT_PREFIX + name + "-")
        shutil.rmtree(state_dir(name), ignore_errors=True)
        remove_reports(name)
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
    reports = stale_reports()
    if reports:
        removed["link reports"] = reports
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
