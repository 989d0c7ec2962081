"""The link speed of an experiment: the drain rate of every switch port's virtual queue
(the eBPF switch's queue model, design section 4; ``mrckit.switch.queues``), set well below
what this machine forwards, so that the emulated links and not the CPU limit the traffic.

A packet that finds its egress queue at ``trim_threshold`` packets is trimmed (and at
``ecn_threshold``, ECN-marked), as a switch with a port of that speed would do; the queue
counts packets, whatever their size. The virtual queue delays nothing, though: a sender whose
NIC were faster than the links would send bursts at CPU speed, see no queueing delay, and meet
trims and ECN marks on every path at once. So each host's NIC port toward each plane sends at
the same link speed, through a token bucket (``tc qdisc tbf``) on the port, as a NIC of that
speed would: its queue delays packets, which the sender's congestion window sees.

Rates are reported as a fraction of the line rate :func:`line_rate_bps`.
"""

from __future__ import annotations

from ...errors import MrcError
from ...topology.model import DEFAULT_MTU
from ...switch.queues import MAX_QUEUE_RATE_PPS
from ...wire.constants import DEFAULT_PAYLOAD_LEN

DEFAULT_LINK_SPEED_PPS = 5000
"""Per port, packets/s: at 2048 B of payload, 82 Mb/s. Every packet crosses three switches
(T0, T1, T0), and this 2-core machine forwards about 300 kpps through XDP in all, shared with
the endpoints and agents: one host at full speed on two planes is 10 kpps, 30 kpps of
forwarding."""


def set_link_speed(fab, pps: int) -> int:
    """Set the drain rate of every port of every eBPF switch of ``fab`` (a running
    :class:`mrckit.fabric.Fabric`) to ``pps`` packets/s, through the switches' pinned maps
    (``SwitchTables.queues``), and read it back. Returns the number of ports set.

    Raises:
        MrcError: a bmv2 fabric, a rate outside 1..``MAX_QUEUE_RATE_PPS``, a switch without
            pins, or a port that did not take the rate.
    """
    from ...switch.ebpf_target import SwitchTables

    if fab.state.target != "ebpf":
        raise MrcError("a link speed is set on the eBPF target's queue model; this fabric runs bmv2")
    if not isinstance(pps, int) or not 1 <= pps <= MAX_QUEUE_RATE_PPS:
        raise MrcError(f"link speed {pps!r} pps: use 1..{MAX_QUEUE_RATE_PPS}")
    count = 0
    for sw in fab.compiled.switches():
        tables = SwitchTables.open_pinned(fab.state.pins[sw.name])
        try:
            for port in sw.ports:
                tables.queues.set_rate(port.number, pps)
                tables.queues.reset([port.number])
                if tables.queues.rate(port.number) != pps:
                    raise MrcError(f"switch {sw.name} port {port.number} did not take the rate {pps} pps")
                count += 1
        finally:
            tables.close()
    return count


WIRE_BYTES = DEFAULT_PAYLOAD_LEN + 160
"""A full data packet on the wire: the payload and its headers (Ethernet, outer and inner IPv6,
UDP, BTH, RETH, TSETH, ICRC; 160 bytes rounds them up). The NIC's token bucket lets
``link_speed_pps`` of these through per second."""
NIC_BURST_BYTES = 2 * DEFAULT_MTU
"""The token bucket's depth: two frames of the fabric MTU (tbf needs one at least)."""
NIC_QUEUE_MS = 100
"""How long a packet may wait in the NIC port's queue before tbf drops it: long enough that the
sender's window, not the queue's length, holds it back (a real NIC never drops its own
packets; a drop here looks like a lossy path to the host dataplane, which retires its EVs)."""


def shape_nics(fab, pps: int) -> int:
    """Make every host's port toward every plane of ``fab`` send at ``pps`` full data packets
    per second (:data:`WIRE_BYTES` each): a ``tbf`` root qdisc on the port, which the host
    dataplane's tc egress redirect goes through. Returns the number of ports shaped; they go
    with the fabric's namespaces.

    Raises:
        MrcError: ``tc`` refused.
    """
    count = 0
    for name in fab.hosts():
        host = fab.host(name)
        for port in fab.compiled.host(name).ports:
            cmd = ["tc", "qdisc", "replace", "dev", port.ifname, "root", "tbf", "rate", f"{pps * WIRE_BYTES * 8}bit",
                   "burst", str(NIC_BURST_BYTES), "latency", f"{NIC_QUEUE_MS}ms"]
            host.run(cmd)  # MrcError with tc's message if it refuses
            count += 1
    return count


def line_rate_bps(link_speed_pps: int, planes: int, payload: int = DEFAULT_PAYLOAD_LEN) -> float:
    """A host's line rate in payload bits/s: one port per plane, each draining
    ``link_speed_pps`` packets of ``payload`` bytes (a QP's goodput cannot exceed it)."""
    return link_speed_pps * planes * payload * 8.0


def fraction(gbps: float | None, link_speed_pps: int, planes: int) -> float | None:
    """``gbps`` (payload Gb/s) as a fraction of a host's line rate (None stays None)."""
    return None if gbps is None else gbps * 1e9 / line_rate_bps(link_speed_pps, planes)
