"""Find a switch's P4Runtime address or a host's agent by name: in a topology file, or in the
status of a running controller (asked over its northbound) (``mrc shell SWITCH``, ``mrc host ev HOST``). Several fabrics can
run at once, each with its own controller; a name two of them have is an error unless the
caller names the fabric."""

from __future__ import annotations

from pathlib import Path

from ..errors import MrcError
from ..topology import load_topology
from . import client
from .targets import DEFAULT_DEVICE_ID, SwitchTarget


def looks_like_address(text: str) -> bool:
    """``unix:/path``, ``host:port`` or ``[v6]:port`` rather than a switch name (names have no ':')."""
    return ":" in text


def running_fabrics(run_dir: str | Path | None = None) -> dict[str, dict]:
    """The status of every controller that answers on a socket in ``run_dir`` (default
    :data:`mrckit.control.client.RUN_DIR`, read at call time), by name (the fabric's name for a
    fabric brought up by ``mrc fabric up``); stale sockets are left out."""
    run_dir = client.RUN_DIR if run_dir is None else run_dir
    out = {}
    for path in sorted(Path(run_dir).glob("*.sock")):
        try:
            with client.ControllerClient(f"unix:{path}", timeout_s=5.0) as ctl:
                out[path.stem] = ctl.status()
        except MrcError:
            continue
    return out


def _locate(kind: str, name: str, run_dir: str | Path | None, fabric: str | None) -> tuple[str, dict]:
    """The (fabric, status entry) of the switch or host ``name`` (``kind``: ``switches`` or
    ``hosts``) among the running controllers: the one in ``fabric`` if given, else the only one.

    Raises:
        MrcError: ``fabric`` is not running or lacks ``name``; no running controller has it; or
            several do (the error names them and says to choose with ``--fabric``).
    """
    noun = {"switches": "switch", "hosts": "host"}[kind]
    run_dir = client.RUN_DIR if run_dir is None else run_dir
    running = running_fabrics(run_dir)
    if fabric is not None:
        status = running.get(fabric)
        if status is None:
            raise MrcError(f"no running fabric named {fabric!r} (sockets in {run_dir}); running: "
                           f"{', '.join(running) or 'none'}")
        entry = status.get(kind, {}).get(name)
        if not entry:
            raise MrcError(f"fabric {fabric!r} has no {noun} named {name!r}")
        return fabric, entry
    found = {fab: st[kind][name] for fab, st in running.items()
             if st.get(kind, {}).get(name)}
    if len(found) > 1:
        raise MrcError(f"{noun} {name!r} is in {len(found)} running fabrics: {', '.join(found)}; "
                       f"choose one with --fabric NAME")
    if not found:
        raise LookupError(name)
    return next(iter(found.items()))


def locate_switch(name: str, topo: str | Path | None = None, run_dir: str | Path | None = None,
                  fabric: str | None = None) -> tuple[str | None, SwitchTarget]:
    """``(fabric, target)`` of switch ``name``: from ``topo`` (its ``p4runtime:`` field; fabric
    None) when given, else from the running controller (sockets in ``run_dir``) that
    manages it: the one called ``fabric`` if given, else the only one that has the name.

    Raises:
        MrcError: the switch is not found, has no address, or is in several running fabrics
            and ``fabric`` is None, saying where it looked or which fabrics have it.
    """
    if topo is not None:
        sw = load_topology(str(topo)).switch(name)
        if sw.p4runtime is None:
            raise MrcError(f"switch {name} has no p4runtime address in {topo}")
        ep = sw.p4runtime
        return None, SwitchTarget(name, ep.address, DEFAULT_DEVICE_ID if ep.device_id is None else ep.device_id,
                                  ep.tls)
    try:
        fab, entry = _locate("switches", name, run_dir, fabric)
    except LookupError:
        raise MrcError(f"no running controller (sockets in {run_dir or client.RUN_DIR}) manages a switch named {name!r}; "
                       f"give its address (unix:/path or host:port) or --topo TOPO") from None
    return fab, SwitchTarget(name, entry["address"], int(entry["device_id"]))


def resolve_switch(name: str, topo: str | Path | None = None, run_dir: str | Path | None = None,
                   fabric: str | None = None) -> SwitchTarget:
    """The target of switch ``name``; see :func:`locate_switch` (same arguments and errors)."""
    return locate_switch(name, topo, run_dir, fabric)[1]


def locate_host(name: str, run_dir: str | Path | None = None, fabric: str | None = None) -> tuple[str, str]:
    """``(fabric, agent address)`` of host ``name`` from the running controller (asked over
    its socket in ``run_dir``) that configures it: the one called ``fabric`` if given, else the only one
    that has the name. This is how ``mrc host ev h0-0`` finds a fabric's agent, whose socket is
    ``/run/mrckit/<fabric>/host-<name>.sock`` rather than the standalone default.

    Raises:
        MrcError: no running controller knows the host, the host has no agent address, or it
            is in several running fabrics and ``fabric`` is None (naming them).
    """
    try:
        fab, entry = _locate("hosts", name, run_dir, fabric)
    except LookupError:
        raise MrcError(f"no agent named {name!r}: no socket at /run/mrckit/host-{name}.sock and no running "
                       f"controller (sockets in {run_dir or client.RUN_DIR}) configures it; give its address "
                       f"(unix:/path or host:port)") from None
    if not entry.get("address"):
        raise MrcError(f"host {name!r} of fabric {fab!r} has no agent address in its controller's status")
    return fab, entry["address"]


def resolve_host(name: str, run_dir: str | Path | None = None, fabric: str | None = None) -> str:
    """The agent address of host ``name``; see :func:`locate_host` (same arguments and errors)."""
    return locate_host(name, run_dir, fabric)[1]
