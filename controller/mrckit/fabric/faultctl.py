"""Faults on a running fabric: ``mrc fail link|switch`` and ``mrc restore`` .

This kernel has no netem (design section 9), so:

- ``down``: both ends of the veth pair ``ip link set down`` (the host agents see the carrier go);
  a bmv2 port drops every frame instead (``mrckit.fabric.linkstate`` says why). On the eBPF
  target a blackhole fault program is put on both ends first, as a cut link stops frames
  before any PHY notices: its first drop stamps when the link died in the dataplane's clock
  (:func:`first_drop_ns`), and restore removes it;
- ``flap HZ``: a small process (``python -m mrckit.fabric.flap``) toggles both ends, down for
  half a period and up for the other half, until restored; ``fail`` returns once it flaps
  (its greeting is in its log), so a caller's fault starts when the link's does;
- ``loss PCT`` and ``blackhole``: the fault XDP program of ``mrckit.fabric.faults`` in front
  of the switch or host program on BOTH ends (each end faults the traffic it receives), so
  both directions lose;
- in both forwarding modes, a fault that takes a link's carrier down (``down``, each down and
  up of ``flap``, every link of a failed switch) is reported to the fabric's controller over
  its northbound (``mrckit.control.report_link``, gRPC), as a real switch's PHY would tell it,
  and reported up on restore. A report no controller answers is dropped (with a warning when
  the fabric runs its own controller): the fault stands either way. The controller then acts at once: in EV-hash (ecmp) mode it takes the link out of
  the ECMP groups, in SRv6 mode it DENIES the link on every host. ``loss`` and ``blackhole``
  leave the link up: no PHY sees them, nothing is reported, and the hosts' evidence must find
  them (design 7);
- ``fail switch S``: the switch's dataplane is detached: on the eBPF target its XDP program
  leaves every port (its pinned tables stay, so restore re-attaches the same state); on bmv2
  the process is stopped (SIGSTOP) and continued on restore.

Every fault and restore is appended, with a UTC timestamp and the link name of design 3.3 (what
the controller reports), to ``/run/mrckit/<fabric>/faults.log``, e.g.
``2026-11-30T02:24:52.942506+00:00 fail link p0-t0-0 p0-t1-0 loss 50 % [p0/t0-0/t1-0]``, and
recorded in the state file, so ``mrc restore`` in another process undoes it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import sys

from .. import netns
from ..bpf.attach import xdp_detach
from ..errors import MrcError
from ..switch.ebpf_target import EbpfSwitch
from . import faults, linkstate, procs
from .flap import GREETING as FLAP_GREETING
from .flap import STOP_TIMEOUT_S as FLAP_STOP_S
from .state import FabricState, now_iso

log = logging.getLogger(__name__)

LINK_KINDS = ("down", "flap", "loss", "blackhole")
MAX_FLAP_HZ = 50.0
"""Each toggle runs iproute2 twice; faster flapping would measure process start-up."""
FLAP_START_S = 30.0
"""How long ``fail --flap`` waits for the flap process to start (a Python start-up, seconds on
a busy machine) before it gives up and stops it."""


def find_link(state: FabricState, a: str, b: str) -> tuple[str, str, str, str]:
    """The link between nodes ``a`` and ``b`` as ``(a, if_a, b, if_b)``.

    Raises:
        MrcError: an unknown node, or no link between them (naming the neighbours of ``a``).
    """
    for node in (a, b):
        if node not in state.nodes:
            raise MrcError(f"fabric {state.name} has no node {node!r}")
    neighbours = []
    for na, ia, nb, ib in state.links:
        if (na, nb) == (a, b):
            return na, ia, nb, ib
        if (na, nb) == (b, a):
            return nb, ib, na, ia
        if a in (na, nb):
            neighbours.append(nb if na == a else na)
    raise MrcError(f"no link between {a} and {b}; {a} links to {', '.join(sorted(neighbours))}")


def link_key(a: str, b: str) -> str:
    """State key of link a–b (order-free)."""
    return "link:" + ":".join(sorted((a, b)))


def fail_link(state: FabricState, a: str, b: str, kind: str, value: float | None = None) -> str:
    """Put fault ``kind`` on link a–b: ``down``, ``flap`` (``value`` Hz, 0 < Hz <= 50),
    ``loss`` (``value`` percent, 0 < % <= 100) or ``blackhole``. Returns the fault-log line.

    Raises:
        MrcError: unknown nodes or link, a fault already on the link (restore it first), a
            loss/blackhole on a port of a failed switch, or the kernel refused (nothing stays).
        ValueError: a bad kind or value.
    """
    na, ia, nb, ib = find_link(state, a, b)
    key = link_key(a, b)
    _check_kind(kind, value)
    if key in state.faults:
        raise MrcError(f"link {a} {b} already has a fault ({_describe(state.faults[key])}); "
                       f"`mrc restore link {a} {b}` first")
    ends = [(state.nodes[na], ia), (state.nodes[nb], ib)]
    if kind in ("loss", "blackhole"):
        failed = [n for n in (na, nb) if f"switch:{n}" in state.faults]
        if failed:
            raise MrcError(f"switch {failed[0]} is failed (no dataplane to chain a fault to); "
                           f"`mrc restore switch {failed[0]}` first")
        _attach_faults(ends, faults.Fault(loss_ppm=faults.percent_to_ppm(value or 0.0)) if kind == "loss"
                       else faults.Fault(blackhole=True))
    elif kind == "down":
        armed = state.target == "ebpf" and not any(f"switch:{n}" in state.faults for n in (na, nb))
        if armed:
            _attach_faults(ends, faults.Fault(blackhole=True))
        _set_links(ends, up=False)
        _report(state, key, up=False)
    else:
        argv = [sys.executable, "-m", "mrckit.fabric.flap", *ends[0], *ends[1], str(value)]
        if state.link_names.get(key):
            argv += [state.name, state.link_names[key]]
        proc, info = procs.start(argv, state.dir / f"flap-{na}-{nb}.log", ns=None, address="")
        try:  # return once the link flaps: its first down follows the process's greeting
            procs.wait_ready({f"flap {na}-{nb}": (proc, info)}, FLAP_GREETING, FLAP_START_S)
        except MrcError:
            procs.stop(info)
            raise
        state.flappers[key] = info
    link = state.link_names.get(key, "")
    state.faults[key] = {"kind": kind, "value": value, "a": na, "b": nb, "link": link, "since": now_iso()}
    if kind == "down":
        state.faults[key]["armed"] = armed
    line = state.log_fault(f"fail link {na} {nb} {_describe(state.faults[key])} [{link}]")
    state.save()
    return line


def _report(state: FabricState, key: str, *, up: bool, source: str = "fault") -> None:
    """Tell the fabric's controller that the link's carrier went down or came back, in both
    modes (see the module docstring). Never raises: the fault is in place already."""
    link = state.link_names.get(key)
    if not link:
        return
    from ..control.client import report_link

    try:
        report_link(state.name, link, up=up, source=source)
    except MrcError as exc:
        if state.controller:  # a fabric without a controller of its own has nobody to tell
            log.warning("link %s %s: the controller was not told: %s", link, "up" if up else "down", exc)


def _switch_links(state: FabricState, name: str) -> list[str]:
    """State keys of the links of switch ``name``."""
    return [link_key(a, b) for a, _, b, _ in state.links if name in (a, b)]


def _still_down(state: FabricState, key: str, *, but: str = "") -> bool:
    """Whether link ``key`` has a carrier-down fault (``down``, ``flap``) or a failed switch
    at one end (other than ``but``)."""
    fault = state.faults.get(key)
    if fault and fault["kind"] in ("down", "flap"):
        return True
    ends = key.split(":")[1:]
    return any(f"switch:{end}" in state.faults for end in ends if end != but)


def _check_kind(kind: str, value: float | None) -> None:
    if kind not in LINK_KINDS:
        raise ValueError(f"link fault {kind!r}: use one of {', '.join(LINK_KINDS)}")
    if kind == "flap" and (value is None or not 0 < value <= MAX_FLAP_HZ or not math.isfinite(value)):
        raise ValueError(f"--flap {value!r} Hz: must be within (0, {MAX_FLAP_HZ:g}]")
    if kind == "loss" and (value is None or not 0 < value <= 100):
        raise ValueError(f"--loss {value!r} %: must be within (0, 100]")


def _describe(fault: dict) -> str:
    unit = {"flap": " Hz", "loss": " %"}.get(fault["kind"], "")
    return fault["kind"] + (f" {fault['value']:g}{unit}" if fault.get("value") is not None else "")


def _attach_faults(ends: list[tuple[str, str]], fault: faults.Fault) -> None:
    done = []
    try:
        for ns, ifname in ends:
            faults.attach(ns, ifname, fault)
            done.append((ns, ifname))
    except BaseException:
        for ns, ifname in done:
            faults.detach(ns, ifname)
        raise


def _set_links(ends: list[tuple[str, str]], *, up: bool) -> None:
    for ns, ifname in ends:
        linkstate.set_end(ns, ifname, up)  # a bmv2 port drops frames instead of going down


def restore_link(state: FabricState, a: str, b: str) -> str:
    """Undo the fault on link a–b. Returns the fault-log line.

    Raises:
        MrcError: no such link, or it has no fault.
    """
    na, ia, nb, ib = find_link(state, a, b)
    key = link_key(a, b)
    fault = state.faults.get(key)
    if fault is None:
        raise MrcError(f"link {a} {b} has no fault to restore")
    ends = [(state.nodes[na], ia), (state.nodes[nb], ib)]
    if fault["kind"] in ("loss", "blackhole"):
        for ns, ifname in ends:
            faults.detach(ns, ifname)
    else:
        if key in state.flappers:
            procs.stop(state.flappers.pop(key), timeout=FLAP_STOP_S)
        if fault.get("armed"):  # before the carrier comes back, so nothing drops after
            for ns, ifname in ends:
                faults.detach(ns, ifname)
        _set_links(ends, up=True)
        del state.faults[key]
        if not _still_down(state, key):  # a failed switch at one end keeps it down
            _report(state, key, up=True)
    state.faults.pop(key, None)
    line = state.log_fault(f"restore link {na} {nb} ({_describe(fault)}) [{fault.get('link', '')}]")
    state.save()
    return line


def flap_window(state: FabricState, a: str, b: str):
    """What the last flap of link a–b did (``flap.FlapWindow``: flaps, first down, last up in
    CLOCK_MONOTONIC ns), from its process's log once it has stopped; None if the link never
    flapped or its flapper still runs.

    Raises:
        MrcError: no such link.
    """
    from .flap import read_window

    na, _, nb, _ = find_link(state, a, b)
    try:
        return read_window((state.dir / f"flap-{na}-{nb}.log").read_text(errors="replace"))
    except FileNotFoundError:
        return None


def first_drop_ns(state: FabricState, a: str, b: str) -> int | None:
    """When the fault on link a–b dropped its first packet, in ``bpf_ktime_get_ns()`` ns
    (CLOCK_MONOTONIC, the clock of the host dataplane's EV timestamps): the earlier of its two
    ends' fault programs. None when nothing was dropped yet, or the fault has no program (flap,
    a down fault on bmv2 or on a failed switch's link).

    Raises:
        MrcError: no such link.
    """
    na, ia, nb, ib = find_link(state, a, b)
    stamps: list[int | None] = []
    for node, ifname in ((na, ia), (nb, ib)):
        try:
            stamps.append(faults.first_drop_ns(state.nodes[node], ifname))
        except MrcError:
            continue  # no program on this end
    found = [t for t in stamps if t]
    return min(found) if found else None


def fail_switch(state: FabricState, compiled, name: str) -> str:
    """Detach switch ``name``'s dataplane (see the module docstring). Returns the log line.

    Raises:
        MrcError: not a switch, already failed, or a loss/blackhole fault sits on one of its
            links (restore that first: its program chains the switch's).
    """
    if name not in state.switches:
        raise MrcError(f"fabric {state.name} has no switch {name!r}")
    key = f"switch:{name}"
    if key in state.faults:
        raise MrcError(f"switch {name} is failed already; `mrc restore switch {name}` first")
    chained = [f["a"] + " " + f["b"] for f in state.faults.values()
               if f["kind"] in ("loss", "blackhole") and name in (f.get("a"), f.get("b"))]
    if chained:
        raise MrcError(f"link {chained[0]} has a {state.faults[link_key(*chained[0].split())]['kind']} fault "
                       f"chained to {name}'s program; `mrc restore link {chained[0]}` first")
    if state.target == "ebpf":
        with netns.enter(state.nodes[name]):
            for port in compiled.switch(name).ports:
                xdp_detach(port.ifname)
    else:
        os.kill(state.switches[name].pid, signal.SIGSTOP)
    for link in _switch_links(state, name):  # every port of a dead switch is down
        _report(state, link, up=False, source=f"switch {name} failed")
    state.faults[key] = {"kind": "switch", "value": None, "switch": name, "since": now_iso()}
    line = state.log_fault(f"fail switch {name} (dataplane detached)")
    state.save()
    return line


def restore_switch(state: FabricState, compiled, name: str) -> str:
    """Re-attach switch ``name``'s dataplane with its tables as they were. Returns the log line.

    Raises:
        MrcError: not a switch, or not failed.
    """
    if name not in state.switches:
        raise MrcError(f"fabric {state.name} has no switch {name!r}")
    if f"switch:{name}" not in state.faults:
        raise MrcError(f"switch {name} is not failed")
    if state.target == "ebpf":
        sw = EbpfSwitch(state.pins[name], state.nodes[name], compiled.switch(name).port_map())
        sw.setup()
        if sw._obj is not None:
            sw._obj.close()  # the pins keep it; this process need not
    else:
        os.kill(state.switches[name].pid, signal.SIGCONT)
    del state.faults[f"switch:{name}"]
    for link in _switch_links(state, name):
        if not _still_down(state, link):
            _report(state, link, up=True, source=f"switch {name} restored")
    line = state.log_fault(f"restore switch {name}")
    state.save()
    return line


def restore_all(state: FabricState, compiled) -> list[str]:
    """Undo every fault; returns the fault-log lines."""
    lines = []
    for fault in list(state.faults.values()):
        if fault["kind"] == "switch":
            lines.append(restore_switch(state, compiled, fault["switch"]))
        else:
            lines.append(restore_link(state, fault["a"], fault["b"]))
    return lines


def status(state: FabricState) -> dict:
    """A JSON-able summary: namespaces, processes (``processes``: node -> running;
    ``process_list``: one row per process with its kind, pid and address), links with each
    end's state, faults, the last fault-log lines."""
    oper = {node: _operstate(ns) for node, ns in state.nodes.items()}
    infos = {node: ("switch", info) for node, info in state.switches.items()}
    infos |= {node: ("host agent", info) for node, info in state.hosts.items()}
    if state.controller:
        infos["controller"] = ("controller", procs.ProcInfo(**state.controller))
    procs_alive = {node: info.alive() for node, (_, info) in infos.items()}
    return {
        "process_list": [{"node": node, "kind": kind, "pid": info.pid, "running": procs_alive[node],
                          "address": info.address} for node, (kind, info) in infos.items()],
        "name": state.name, "target": state.target, "mode": state.mode, "created": state.created,
        "namespaces": {node: {"ns": ns, "exists": netns.exists(ns)} for node, ns in state.nodes.items()},
        "processes": procs_alive,
        "addresses": {node: info.address for node, info in {**state.switches, **state.hosts}.items()},
        "links": [{"a": a, "if_a": ia, "b": b, "if_b": ib, "state_a": oper[a].get(ia, "absent"),
                   "state_b": oper[b].get(ib, "absent")} for a, ia, b, ib in state.links],
        "faults": state.faults,
        "fault_log": state.fault_log()[-20:],
    }


def _operstate(ns: str) -> dict[str, str]:
    if not netns.exists(ns):
        return {}
    out = netns.run(["ip", "-j", "link", "show"], ns=ns, check=False).stdout
    try:
        return {link["ifname"]: link.get("operstate", "UNKNOWN") for link in json.loads(out or b"[]")}
    except json.JSONDecodeError:
        return {}
