"""Find a switch's P4Runtime address by name: in a topology file, or in the status of a running
controller (``mrc shell SWITCH``)."""

from __future__ import annotations

from pathlib import Path

from ..errors import MrcError
from ..topology import load_topology
from .status import STATUS_DIR, read_status
from .targets import DEFAULT_DEVICE_ID, SwitchTarget


def looks_like_address(text: str) -> bool:
    """``unix:/path``, ``host:port`` or ``[v6]:port`` rather than a switch name (names have no ':')."""
    return ":" in text


def resolve_switch(name: str, topo: str | Path | None = None, status_dir: str | Path = STATUS_DIR) -> SwitchTarget:
    """The target of switch ``name``: from ``topo`` (its ``p4runtime:`` field) when given, else
    from the first running controller (status files in ``status_dir``) that manages it.

    Raises:
        MrcError: the switch is not found, or has no address, saying where it looked.
    """
    if topo is not None:
        sw = load_topology(str(topo)).switch(name)
        if sw.p4runtime is None:
            raise MrcError(f"switch {name} has no p4runtime address in {topo}")
        ep = sw.p4runtime
        return SwitchTarget(name, ep.address, DEFAULT_DEVICE_ID if ep.device_id is None else ep.device_id, ep.tls)
    files = sorted(Path(status_dir).glob("*.json"))
    for path in files:
        try:
            status = read_status(path)
        except MrcError:
            continue
        entry = status.get("switches", {}).get(name)
        if status["running"] and entry:
            return SwitchTarget(name, entry["address"], int(entry["device_id"]))
    raise MrcError(f"no running controller (status in {status_dir}) manages a switch named {name!r}; "
                   f"give its address (unix:/path or host:port) or --topo TOPO")


def resolve_host(name: str, status_dir: str | Path = STATUS_DIR) -> str:
    """The agent address of host ``name`` from the first running controller (status files in
    ``status_dir``) that configures it: how ``mrc host ev h0-0`` finds a fabric's agent, whose
    socket is ``/run/mrckit/<fabric>/host-<name>.sock`` rather than the standalone default.

    Raises:
        MrcError: no running controller knows the host, saying where it looked.
    """
    for path in sorted(Path(status_dir).glob("*.json")):
        try:
            status = read_status(path)
        except MrcError:
            continue
        entry = status.get("hosts", {}).get(name)
        if status["running"] and entry and entry.get("address"):
            return entry["address"]
    raise MrcError(f"no agent named {name!r}: no socket at /run/mrckit/host-{name}.sock and no running "
                   f"controller (status in {status_dir}) configures it; give its address (unix:/path or host:port)")
