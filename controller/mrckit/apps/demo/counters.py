"""Switch counters over P4Runtime, for the demo report (design section 4: ``rx_port``,
``tx_port``, ``trim_port``, ``ecn_port``, ``drop_port``, ``drop_reason``).

A P4Runtime Read of counter entries needs no arbitration (P4Runtime spec 1.4 section 11), so
this reads beside the running controller without disturbing it, on either target: the eBPF
target's server and bmv2 answer the same request.
"""

from __future__ import annotations

import grpc
from finsy.proto import p4r, p4r_grpc

from ...errors import MrcError
from ...topology import Role, Topology
from ...wire.constants import DropReason
from .report import SpineCount, SwitchCounts

COUNTERS = ("tx_port", "trim_port", "ecn_port", "drop_reason")
READ_TIMEOUT_S = 10


def read_counters(address: str, device_id: int, schema, names=COUNTERS) -> dict[str, dict[int, int]]:
    """``{counter: {index: packets}}`` of switch ``address`` (gRPC target, e.g.
    ``unix:/run/mrckit/x/sw-p0-t1-0.sock``), for the counters ``names`` of P4Info ``schema``
    (a finsy ``P4Schema``).

    Raises:
        MrcError: the switch refused or did not answer (naming it and the gRPC status).
    """
    ids = {schema.counters[name].id: name for name in names}
    out: dict[str, dict[int, int]] = {name: {} for name in names}
    request = p4r.ReadRequest(device_id=device_id, entities=[
        p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=cid)) for cid in ids])
    try:
        with grpc.insecure_channel(address) as channel:
            for response in p4r_grpc.P4RuntimeStub(channel).Read(request, timeout=READ_TIMEOUT_S):
                for entity in response.entities:
                    c = entity.counter_entry
                    out[ids[c.counter_id]][c.index.index] = c.data.packet_count
    except grpc.RpcError as exc:
        raise MrcError(f"P4Runtime Read of counters at {address}: {exc.code().name}: {exc.details()}") from None
    return out


def fabric_counts(topology: Topology, read) -> SwitchCounts:
    """The report's :class:`SwitchCounts` from ``read(switch_name) -> {counter: {index: packets}}``
    over every switch of ``topology``: packets each spine (T1) forwarded (``tx_port``), their
    sum per plane, and trims, ECN marks and drops by reason over all switches."""
    counts = SwitchCounts()
    dropped = {r.name.lower(): 0 for r in DropReason}
    for sw in topology.switches:
        c = read(sw.name)
        counts.trimmed += sum(c.get("trim_port", {}).values())
        counts.ecn_marked += sum(c.get("ecn_port", {}).values())
        for index, n in c.get("drop_reason", {}).items():
            name = DropReason(index).name.lower() if index in DropReason._value2member_map_ else str(index)
            dropped[name] = dropped.get(name, 0) + n
        if sw.role == Role.T1:
            packets = sum(c.get("tx_port", {}).values())
            counts.per_spine.append(SpineCount(switch=sw.name, plane=sw.plane, spine=sw.index, packets=packets))
            counts.per_plane[str(sw.plane)] = counts.per_plane.get(str(sw.plane), 0) + packets
    counts.dropped = dropped
    return counts
