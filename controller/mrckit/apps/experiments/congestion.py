"""The switch queues of a congestion experiment: every port's trim threshold (``port_config``,
design section 4; ``THRESHOLD_NONE`` turns trimming off) and its data queue's capacity (the
eBPF switch's tail drop, ``mrckit.switch.queues``), set on a running fabric through the
switches' pinned maps, and the switches' trims, ECN marks and congestion drops, read the same
way, per switch.

The controller writes ``port_config`` when it connects to a switch and then only on a reroute,
so a threshold set here holds for the run; :func:`trim_thresholds` reads it back.
"""

from __future__ import annotations

import json

from ...errors import MrcError
from ...topology.entries import TableEntry
from ...wire import pipeline as P
from ...wire.constants import DropReason

SwitchCounts = dict[str, dict[str, int]]
"""switch name -> {"trimmed", "ecn_marked", "congestion_drops", "drops", "trimmed_to_hosts",
"dropped_to_hosts": packets}; ``drops`` counts every reason (a failed link's too); the
``_to_hosts`` counts are those of its host-facing ports (a T0's last hop)."""


def _each_switch(fab, fn) -> dict:
    """``{switch: fn(tables, switch)}`` over the eBPF switches of ``fab``, pins closed after."""
    from ...switch.ebpf_target import SwitchTables

    if fab.state.target != "ebpf":
        raise MrcError("the congestion settings are set through the eBPF target's maps; this fabric runs bmv2")
    out = {}
    for sw in fab.compiled.switches():
        tables = SwitchTables.open_pinned(fab.state.pins[sw.name])
        try:
            out[sw.name] = fn(tables, sw)
        finally:
            tables.close()
    return out


def set_trim_threshold(fab, packets: int) -> int:
    """Set the trim threshold of every ``port_config`` entry of every switch of ``fab`` to
    ``packets`` (``THRESHOLD_NONE``: never trim), keeping its other parameters. Returns the
    number of ports set.

    Raises:
        MrcError: a bmv2 fabric, or a threshold outside 0..THRESHOLD_NONE.
    """
    if not isinstance(packets, int) or not 0 <= packets <= P.THRESHOLD_NONE:
        raise MrcError(f"trim threshold {packets!r}: use 0..{P.THRESHOLD_NONE} packets")

    def one(tables, _sw) -> int:
        entries = tables.direct.read(P.PORT_CONFIG)
        for e in entries:
            tables.direct.write(TableEntry(e.table, e.match, e.action, {**e.params, "trim_threshold": packets}))
        return len(entries)

    return sum(_each_switch(fab, one).values())


def trim_thresholds(fab) -> set[int]:
    """The distinct trim thresholds of every ``port_config`` entry of every switch of ``fab``."""
    found = _each_switch(fab, lambda t, _sw: {e.params["trim_threshold"] for e in t.direct.read(P.PORT_CONFIG)})
    return set().union(*found.values())


def set_queue_capacity(fab, packets: int) -> int:
    """Let every port's data queue of every switch of ``fab`` hold ``packets`` whole data
    packets (0: unbounded); returns the number of ports set.

    Raises:
        MrcError: a bmv2 fabric, or a capacity the switch refuses.
    """
    def one(tables, sw) -> int:
        for port in sw.ports:
            tables.queues.set_capacity(port.number, packets)
        return len(sw.ports)

    return sum(_each_switch(fab, one).values())


def switch_counts(fab) -> SwitchCounts:
    """Every switch's trims, ECN marks, congestion drops and drops for any reason so far
    (packets, summed over ports and CPUs)."""
    def one(tables, sw) -> dict[str, int]:
        c = tables.counters
        reasons, trims, drops = c.nonzero("drop_reason"), c.nonzero("trim_port"), c.nonzero("drop_port")
        to_hosts = {p.number for p in sw.ports if p.faces_host}
        return dict(trimmed=sum(p for p, _ in trims.values()),
                    ecn_marked=sum(p for p, _ in c.nonzero("ecn_port").values()),
                    congestion_drops=reasons.get(int(DropReason.CONGESTION), (0, 0))[0],
                    drops=sum(p for p, _ in reasons.values()),
                    trimmed_to_hosts=sum(p for port, (p, _) in trims.items() if port in to_hosts),
                    dropped_to_hosts=sum(p for port, (p, _) in drops.items() if port in to_hosts))

    return _each_switch(fab, one)


def nic_drops(fab) -> dict[str, int]:
    """Packets each host's NIC ports dropped so far: the token buckets of the link speed
    (``linkspeed.shape_nics``) drop what waits longer than their queue allows, which the
    switch counters do not see. Host name -> packets, summed over its ports.

    Raises:
        MrcError: ``tc`` refused, or printed no JSON.
    """
    out = {}
    for name in fab.hosts():
        proc = fab.host(name).run(["tc", "-s", "-j", "qdisc", "show"])
        try:
            qdiscs = json.loads(proc.stdout or b"[]")
        except ValueError:
            raise MrcError(f"host {name}: tc -s -j qdisc show printed no JSON") from None
        out[name] = sum(q.get("drops", 0) for q in qdiscs if q.get("kind") == "tbf")
    return out


def counts_since(before: SwitchCounts, after: SwitchCounts) -> SwitchCounts:
    """What each switch counted between two :func:`switch_counts` readings; switches that
    counted nothing are left out."""
    out = {}
    for name, now in after.items():
        delta = {k: v - before.get(name, {}).get(k, 0) for k, v in now.items()}
        if any(delta.values()):
            out[name] = delta
    return out


def total(counts: SwitchCounts, key: str) -> int:
    """``key`` summed over the switches of ``counts``."""
    return sum(c.get(key, 0) for c in counts.values())
