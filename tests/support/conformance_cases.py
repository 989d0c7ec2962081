"""The conformance cases: every rule of design section 4, one frame each.

The switch is a T1 of plane 0 (uSID 0x0801). Ports 0 and 1 lead to T0s (fabric ports), ports 2
and 3 to hosts (faces_host = 1). Base tables:

- my_usid: T1(0, 1) = 0x0801 -> usid_un;
- usid_fib: T0 0x0400 -> port 0, T0 0x0401 -> port 1, DOWN 0x0C00 -> port 2, DOWN 0x0C01 -> port 3;
- port_config: every port, MACs 02:00:00:00:0a:0N (ours) and 02:00:00:00:0b:0N (neighbour),
  thresholds out of reach unless a case lowers them.
"""

from __future__ import annotations

import struct

from mrckit.topology.entries import TableEntry
from mrckit.wire.constants import DropReason, Dscp, Ecn, Opcode

from support import conformance_frames as F
from support.conformance_harness import Case
from mrckit.testing import PORTS, Tables, tables_of

MY_USID = 0x0801
T0 = {0: 0x0400, 1: 0x0401}
DOWN = {2: 0x0C00, 3: 0x0C01}
FACES_HOST = {0: 0, 1: 0, 2: 1, 3: 1}
NEVER = 1_000_000
"""A threshold in packets that no test queue reaches."""


def port_mac(port: int) -> str:
    return f"02:00:00:00:0a:{port:02x}"


def neighbour_mac(port: int) -> str:
    return f"02:00:00:00:0b:{port:02x}"


def mac_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


def port_entry(port: int, *, trim: int = NEVER, ecn: int = NEVER, faces_host: int | None = None) -> TableEntry:
    return TableEntry.exact("port_config", port, "set_port", {
        "src_mac": mac_int(port_mac(port)), "dst_mac": mac_int(neighbour_mac(port)),
        "faces_host": FACES_HOST[port] if faces_host is None else faces_host,
        "trim_threshold": trim, "ecn_threshold": ecn})


def base_tables() -> Tables:
    return tables_of(TableEntry.exact("my_usid", F.prefix48(MY_USID), "usid_un"),
                     *(TableEntry.exact("usid_fib", F.prefix48(usid), "set_egress", {"port": port})
                       for port, usid in {**T0, **DOWN}.items()),
                     *(port_entry(port) for port in PORTS))


def into(frame: bytes, port: int) -> bytes:
    """``frame`` addressed to the MAC of ingress ``port`` (a kernel switch needs that)."""
    return bytes.fromhex(port_mac(port).replace(":", "")) + frame[6:]


def out_frame(frame: bytes, port: int, *, shift: bool = False, mac: bool = True) -> bytes:
    return F.forwarded(frame, src_mac=port_mac(port) if mac else None,
                       dst_mac=neighbour_mac(port) if mac else None, shift=shift)


def fwd(inp: int, out: int, *, trim: bool = False, ecn: bool = False) -> dict:
    counts = {("rx_port", inp): 1, ("tx_port", out): 1}
    if trim:
        counts[("trim_port", out)] = 1
    if ecn:
        counts[("ecn_port", out)] = 1
    return counts


def dropped(inp: int, reason: DropReason, at: int | None = None) -> dict:
    """Drops before the FIB count against the ingress port; congestion against the egress."""
    return {("rx_port", inp): 1, ("drop_port", inp if at is None else at): 1, ("drop_reason", int(reason)): 1}


def congest(port: int, **kw) -> dict:
    return tables_of(port_entry(port, **kw))


# --- 1. drops before the FIB ---

def drop_cases() -> list[Case]:
    da = F.container(T0[0])
    return [
        Case("not_ipv6", into(F.ipv4_frame(), 1), 1, {}, dropped(1, DropReason.NOT_IPV6)),
        Case("malformed_short_ipv6", into(F.short_ipv6_frame(), 1), 1, {}, dropped(1, DropReason.MALFORMED)),
        Case("hop_limit_1", into(F.mrc_frame(da, hlim=1), 1), 1, {}, dropped(1, DropReason.HOP_LIMIT)),
        Case("hop_limit_0", into(F.mrc_frame(da, hlim=0), 1), 1, {}, dropped(1, DropReason.HOP_LIMIT)),
    ]


# --- 2-4. uN, FIB, hop limit, MACs ---

def route_cases() -> list[Case]:
    cases = []
    frame = into(F.mrc_frame(F.container(MY_USID, T0[1], DOWN[2])), 0)
    cases.append(Case("un_shift_to_fabric", frame, 0, {1: [out_frame(frame, 1, shift=True)]}, fwd(0, 1),
                      kernel=True))
    frame = into(F.mrc_frame(F.container(MY_USID, DOWN[3])), 1)
    cases.append(Case("un_shift_to_host", frame, 1, {3: [out_frame(frame, 3, shift=True)]}, fwd(1, 3),
                      kernel=True))
    frame = into(F.mrc_frame(F.container(MY_USID, T0[0], 0x0805, 0x0C02, 0x0403, 0x0C04)), 1)
    cases.append(Case("un_shift_full_container", frame, 1, {0: [out_frame(frame, 0, shift=True)]}, fwd(1, 0),
                      kernel=True))
    frame = into(F.mrc_frame(F.container(T0[1], DOWN[2])), 0)
    cases.append(Case("transit_no_shift", frame, 0, {1: [out_frame(frame, 1)]}, fwd(0, 1), kernel=True))
    frame = into(F.ipv6_udp_frame(F.container(MY_USID, T0[0])), 1)
    cases.append(Case("un_non_mrc_ipv6", frame, 1, {0: [out_frame(frame, 0, shift=True)]}, fwd(1, 0),
                      kernel=True))
    frame = into(F.mrc_frame(F.container(T0[0]), hlim=2), 1)
    cases.append(Case("hop_limit_2_forwarded", frame, 1, {0: [out_frame(frame, 0)]}, fwd(1, 0), kernel=True))
    frame = into(F.mrc_frame(F.container(MY_USID, MY_USID, T0[0])), 1)
    cases.append(Case("un_at_most_once", frame, 1, {}, dropped(1, DropReason.NO_ROUTE)))
    frame = into(F.mrc_frame(F.container(0x0999, T0[0])), 1)
    cases.append(Case("no_route", frame, 1, {}, dropped(1, DropReason.NO_ROUTE)))
    frame = into(F.mrc_frame(F.container(MY_USID)), 1)
    cases.append(Case("empty_container_after_shift", frame, 1, {}, dropped(1, DropReason.NO_ROUTE)))
    frame = into(F.mrc_frame(F.container(T0[0])), 1)
    cases.append(Case("fib_drop_action", frame, 1, {}, dropped(1, DropReason.NO_ROUTE),
                      tables=tables_of(TableEntry.exact("usid_fib", F.prefix48(T0[0]), "drop"))))
    frame = into(F.mrc_frame(F.container(T0[0]), dscp=Dscp.TRIMMABLE), 1)
    cases.append(Case("no_port_config_no_rewrite_never_congested", frame, 1, {0: [out_frame(frame, 0, mac=False)]},
                      fwd(1, 0), tables={("port_config", 0): None}))
    return cases


# --- 5. trimming and congestion drops ---

def trim_cases() -> list[Case]:
    cases = []
    for opcode in (Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST, Opcode.WRITE_LAST_IMM,
                   Opcode.WRITE_ONLY, Opcode.WRITE_ONLY_IMM):
        for ts in (False, True):
            frame = into(F.mrc_frame(F.container(T0[0]), opcode=opcode, ts=ts), 1)
            want = F.trimmed(out_frame(frame, 0), F.trimmed_length(opcode, ts=ts), lasthop=False)
            cases.append(Case(f"trim_{opcode.name.lower()}{'_ts' if ts else ''}", frame, 1, {0: [want]},
                              fwd(1, 0, trim=True), tables=congest(0, trim=0)))
    frame = into(F.mrc_frame(F.container(MY_USID, DOWN[2]), dscp=Dscp.TRIMMABLE_RETX), 1)
    want = F.trimmed(out_frame(frame, 2, shift=True), 134, lasthop=True)
    cases.append(Case("trim_lasthop_retx_after_shift", frame, 1, {2: [want]}, fwd(1, 2, trim=True),
                      tables=congest(2, trim=1)))
    frame = into(F.mrc_frame(F.container(T0[0])), 1)
    cases.append(Case("threshold_1_counts_this_packet", frame, 1,
                      {0: [F.trimmed(out_frame(frame, 0), 134, lasthop=False)]}, fwd(1, 0, trim=True),
                      tables=congest(0, trim=1)))
    cases.append(Case("threshold_2_empty_queue_not_congested", frame, 1, {0: [out_frame(frame, 0)]},
                      fwd(1, 0), tables=congest(0, trim=2)))
    for name, dscp in (("control", Dscp.CONTROL), ("trimmed", Dscp.TRIMMED),
                       ("trimmed_lasthop", Dscp.TRIMMED_LASTHOP)):
        frame = into(F.mrc_frame(F.container(T0[0]), dscp=dscp), 1)
        cases.append(Case(f"congested_{name}_passes", frame, 1, {0: [out_frame(frame, 0)]}, fwd(1, 0),
                          tables=congest(0, trim=0)))
    frame = into(F.mrc_frame(F.container(T0[0]), opcode=Opcode.SACK, dscp=Dscp.CONTROL), 1)
    cases.append(Case("congested_sack_control_passes", frame, 1, {0: [out_frame(frame, 0)]}, fwd(1, 0),
                      tables=congest(0, trim=0)))
    drops = {
        "congested_no_trim_dropped": F.mrc_frame(F.container(T0[0]), dscp=Dscp.NO_TRIM),
        "congested_trimmable_sack_dropped": F.mrc_frame(F.container(T0[0]), opcode=Opcode.SACK),
        "congested_trimmable_non_mrc_dropped": F.ipv6_udp_frame(F.container(T0[0]), dscp=Dscp.TRIMMABLE),
        "congested_incomplete_write_dropped": F.mrc_frame(F.container(T0[0]), payload=0)[:120],
        "congested_imm_without_immdt_dropped": _without_immdt(),
    }
    for name, frame in drops.items():
        frame = into(_fix_lengths(frame), 1)
        cases.append(Case(name, frame, 1, {}, dropped(1, DropReason.CONGESTION, at=0),
                          tables=congest(0, trim=0)))
    frame = into(_fix_lengths(F.mrc_frame(F.container(T0[0]), payload=0)[:120]), 1)
    cases.append(Case("incomplete_write_uncongested_forwarded", frame, 1, {0: [out_frame(frame, 0)]}, fwd(1, 0)))
    return cases


def _without_immdt() -> bytes:
    """A WRITE_ONLY_IMM cut right after its RETH: the ImmDt is missing."""
    return F.mrc_frame(F.container(T0[0]), opcode=Opcode.WRITE_ONLY_IMM, payload=0)[:134]


def _fix_lengths(frame: bytes) -> bytes:
    """Make the IPv6 and UDP lengths agree with a frame that we cut short."""
    out = bytearray(frame)
    struct.pack_into("!H", out, F.OFF_OUTER + 4, len(out) - F.OFF_INNER)
    if out[F.OFF_OUTER + 6] == 41 and len(out) >= F.OFF_UDP + 8:
        struct.pack_into("!H", out, F.OFF_INNER + 4, len(out) - F.OFF_UDP)
        struct.pack_into("!H", out, F.OFF_UDP + 4, len(out) - F.OFF_UDP)
    return bytes(out)


# --- 6. ECN ---

def ecn_cases() -> list[Case]:
    cases = []
    for ecn in (Ecn.ECT0, Ecn.ECT1):
        frame = into(F.mrc_frame(F.container(T0[0]), dscp=Dscp.NO_TRIM, ecn=ecn), 1)
        cases.append(Case(f"ecn_{ecn.name.lower()}_marked_ce", frame, 1,
                          {0: [F.with_tclass(out_frame(frame, 0), ecn=Ecn.CE)]}, fwd(1, 0, ecn=True),
                          tables=congest(0, ecn=1)))
    for ecn in (Ecn.NOT_ECT, Ecn.CE):
        frame = into(F.mrc_frame(F.container(T0[0]), dscp=Dscp.NO_TRIM, ecn=ecn), 1)
        cases.append(Case(f"ecn_{ecn.name.lower()}_unchanged", frame, 1, {0: [out_frame(frame, 0)]}, fwd(1, 0),
                          tables=congest(0, ecn=0)))
    frame = into(F.mrc_frame(F.container(DOWN[2]), ecn=Ecn.ECT0), 1)
    cases.append(Case("ecn_host_port_never_marks", frame, 1, {2: [out_frame(frame, 2)]}, fwd(1, 2),
                      tables=congest(2, ecn=0)))
    frame = into(F.mrc_frame(F.container(T0[0]), ecn=Ecn.ECT0), 1)
    cases.append(Case("ecn_threshold_2_empty_queue_unmarked", frame, 1, {0: [out_frame(frame, 0)]}, fwd(1, 0),
                      tables=congest(0, ecn=2)))
    want = F.with_tclass(F.trimmed(out_frame(frame, 0), 134, lasthop=False), ecn=Ecn.CE)
    cases.append(Case("ecn_and_trim_together", frame, 1, {0: [want]}, fwd(1, 0, trim=True, ecn=True),
                      tables=congest(0, trim=0, ecn=0)))
    return cases


def all_cases() -> list[Case]:
    return drop_cases() + route_cases() + trim_cases() + ecn_cases()
