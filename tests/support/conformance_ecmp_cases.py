"""The EV-hash (ECMP) mode cases: ``ipv6_fib`` and the ``ecmp_selector`` groups of
docs/ecmp-mode.md, beside the uN tables of design section 4, one frame each.

The switch is a T0 in EV-hash mode with the uN tables of ``conformance_cases`` as well (both
modes coexist in one program). Ports 0 and 1 face T1s, ports 2 and 3 hosts.

- Members of ``ecmp_selector``: id port + 1 -> set_egress(port) for every port, and
  ``DROP_MEMBER`` -> drop(). Every case keeps them all, so one bmv2 creates them once, in
  ascending id order (docs/ecmp-mode.md, "The hash").
- Groups: ``UPLINKS`` {1, 2} (ports 0, 1), ``THREE`` {1, 2, 3} (ports 0, 1, 2),
  ``WITH_DROP`` {1, 2, DROP_MEMBER}.
- Routes (``ipv6_fib``, longest prefix wins):
  ``2001:db8:100::/48`` -> member of port 0; ``2001:db8:100:0::3/128`` -> member of port 3;
  ``2001:db8:100:1::/64`` -> UPLINKS; ``2001:db8:100:1::7/128`` -> member of port 2;
  ``2001:db8:100:2::/64`` -> THREE; ``2001:db8:100:3::/64`` -> WITH_DROP;
  ``2001:db8:100:9::/64`` -> DROP_MEMBER. Nothing covers ``fcbb:bb00::/32`` or
  ``2001:db8:999::/48``, so those miss and take the uN path; cases that route SRv6 frames
  through ipv6_fib add a ``fcbb:bb00::/32`` (or longer) route of their own.

The egress port of a frame sent to a group is ``mrckit.wire.ecmp.ecmp_member`` of the group's
member ids and the frame's flow label and UDP source port (None without a UDP header): the
Python reference predicts, both targets must agree.
"""

from __future__ import annotations

import random

from mrckit.topology.entries import ActionProfileGroup, ActionProfileMember, TableEntry
from mrckit.wire.constants import DropReason, Dscp, Ecn, Opcode
from mrckit.wire.ecmp import ecmp_member

from support import conformance_frames as F
from support.conformance_cases import FACES_HOST, MY_USID, T0, base_tables, congest, dropped, fwd, into, out_frame
from support.conformance_harness import Case
from mrckit.testing import PORTS, Tables, tables_of

MEMBER = {port: port + 1 for port in PORTS}
DROP_MEMBER = 100
UPLINKS, THREE, WITH_DROP = 1, 2, 3
GROUPS = {UPLINKS: (MEMBER[0], MEMBER[1]), THREE: (MEMBER[0], MEMBER[1], MEMBER[2]),
          WITH_DROP: (MEMBER[0], MEMBER[1], DROP_MEMBER)}
AGGREGATE = "2001:db8:100::/48"
HOST_ROUTE = "2001:db8:100:0::3/128"
LEAF1 = "2001:db8:100:1::/64"
LEAF1_HOST = "2001:db8:100:1::7/128"
LEAF2 = "2001:db8:100:2::/64"
LEAF3 = "2001:db8:100:3::/64"
BLACKHOLE = "2001:db8:100:9::/64"
ENCAP_ROUTE = "fcbb:bb00::/32"
"""Not in the base tables: cases that add it send SRv6 frames through ipv6_fib."""
ROUTES = {AGGREGATE: ("member", MEMBER[0]), HOST_ROUTE: ("member", MEMBER[3]),
          LEAF1: ("group", UPLINKS), LEAF1_HOST: ("member", MEMBER[2]),
          LEAF2: ("group", THREE), LEAF3: ("group", WITH_DROP), BLACKHOLE: ("member", DROP_MEMBER)}
SEED = 11
"""Seeds the EVs of the group cases."""


def route(prefix: str, kind: str, ref: int) -> TableEntry:
    """One ``ipv6_fib`` entry: ``prefix`` to member or group (``kind``) ``ref``."""
    return TableEntry.route(prefix, **{kind: ref})


def ecmp_base_tables() -> Tables:
    """The uN base tables plus the members, groups and routes of the module docstring."""
    return base_tables() | tables_of(
        *(ActionProfileMember(member, "set_egress", {"port": port}) for port, member in MEMBER.items()),
        ActionProfileMember(DROP_MEMBER, "drop"),
        *(ActionProfileGroup(group, members) for group, members in GROUPS.items()),
        *(route(prefix, kind, ref) for prefix, (kind, ref) in ROUTES.items()))


def member_port(member: int) -> int | None:
    """The egress port of a member; None for DROP_MEMBER."""
    return None if member == DROP_MEMBER else member - 1


def covering_fields(members: tuple[int, ...], count: int, *, udp: bool, wide: bool,
                    rng: random.Random) -> list[tuple[int, int | None]]:
    """``count`` (flow label, UDP source port or None) pairs, drawn from ``rng``, that between
    them make the group pick every one of its members at least once. ``wide``: 20-bit flow
    labels (bits 19..16 set too); otherwise 16 bits, as an MRC EV fills them."""
    picks: list[tuple[int, int | None]] = []
    missing = set(members)
    while len(picks) < count:
        flow_label = rng.getrandbits(20 if wide else 16)
        sport = rng.getrandbits(16) if udp else None
        chosen = ecmp_member(members, flow_label, sport)
        if chosen in missing or len(picks) + len(missing) < count:
            picks.append((flow_label, sport))
            missing.discard(chosen)
    return picks


def _group_case(name: str, da: str, group: int, flow_label: int, sport: int | None, in_port: int) -> Case:
    frame = into(F.ecmp_frame(da, flow_label=flow_label, udp_sport=sport), in_port)
    port = member_port(ecmp_member(GROUPS[group], flow_label, sport))
    tag = f"fl{flow_label:05x}_" + ("noudp" if sport is None else f"sport{sport:04x}")
    if port is None:
        return Case(f"{name}_{tag}_drop", frame, in_port, {}, dropped(in_port, DropReason.NO_ROUTE))
    return Case(f"{name}_{tag}_port{port}", frame, in_port, {port: [out_frame(frame, port)]}, fwd(in_port, port))


# --- routes to members and groups, longest prefix ---

GROUP_RUNS = (
    # (name, DA, group, ingress port, frames, with UDP, 20-bit flow labels)
    ("ev_group3_udp", "2001:db8:100:2::5", THREE, 3, 6, True, False),
    ("ev_group3", "2001:db8:100:2::5", THREE, 3, 3, False, True),
    ("ev_uplinks_udp", "2001:db8:100:1::9", UPLINKS, 2, 3, True, True),
    ("ev_group_with_drop_member", "2001:db8:100:3::1", WITH_DROP, 3, 3, True, False),
)


def group_picks() -> list[tuple[str, str, int, int, list[tuple[int, int | None]]]]:
    """Each run of GROUP_RUNS with its seeded (flow label, UDP source port) pairs."""
    rng = random.Random(SEED)
    return [(name, da, group, in_port, covering_fields(GROUPS[group], n, udp=udp, wide=wide, rng=rng))
            for name, da, group, in_port, n, udp, wide in GROUP_RUNS]


def group_cases() -> list[Case]:
    return [_group_case(name, da, group, fl, sport, in_port)
            for name, da, group, in_port, picks in group_picks() for fl, sport in picks]


def encapsulated_group_cases() -> list[Case]:
    """An SRv6 frame whose outer DA an ipv6_fib route sends to a group: the selector hashes the
    outer flow label and the UDP source port after the inner IPv6 header (docs/ecmp-mode.md,
    "The hash"), and the uN tables are skipped (no shift)."""
    cases = []
    rng = random.Random(SEED + 1)
    for fl, sport in covering_fields(GROUPS[THREE], 3, udp=True, wide=True, rng=rng):
        frame = F.with_selector_fields(F.mrc_frame(F.container(MY_USID, T0[1])), fl, sport, off_udp=F.OFF_UDP)
        frame = into(frame, 3)
        port = member_port(ecmp_member(GROUPS[THREE], fl, sport))
        cases.append(Case(f"ev_group3_encapsulated_fl{fl:05x}_sport{sport:04x}_port{port}", frame, 3,
                          {port: [out_frame(frame, port)]}, fwd(3, port),
                          tables=tables_of(route(ENCAP_ROUTE, "group", THREE))))
    return cases


TRUNCATED_UDP_HEAD = bytes.fromhex("c0011297")
"""Source port 0xc001 and destination port 4791, then the frame ends."""


def truncated_udp_picks() -> list[int]:
    """Flow labels for which hashing the 4 bytes as a UDP source port would pick another member
    than the flow label alone, so a target that hashes a truncated UDP header fails."""
    rng, sport, picks = random.Random(SEED + 3), int.from_bytes(TRUNCATED_UDP_HEAD[:2], "big"), []
    while len(picks) < 2:
        fl = rng.getrandbits(20)
        if ecmp_member(GROUPS[THREE], fl, None) != ecmp_member(GROUPS[THREE], fl, sport):
            picks.append(fl)
    return picks


def truncated_udp_cases() -> list[Case]:
    cases = []
    for fl in truncated_udp_picks():
        frame = into(F.truncated_udp_frame("2001:db8:100:2::5", flow_label=fl, udp_head=TRUNCATED_UDP_HEAD), 3)
        port = member_port(ecmp_member(GROUPS[THREE], fl, None))
        cases.append(Case(f"ev_group3_truncated_udp_fl{fl:05x}_port{port}", frame, 3,
                          {port: [out_frame(frame, port)]}, fwd(3, port)))
    return cases


MODIFIED_THREE = (MEMBER[0], MEMBER[2])
"""Group THREE without its port-1 member."""


def modified_picks() -> list[tuple[int, int | None]]:
    return covering_fields(MODIFIED_THREE, 3, udp=True, wide=False, rng=random.Random(SEED + 2))


def modified_group_cases() -> list[Case]:
    """Group THREE modified to {port 0, port 2} (how the controller drops a dead uplink,
    docs/ecmp-mode.md, "Compilation and control"): frames hash over the two members left."""
    members = MODIFIED_THREE
    cases = []
    for fl, sport in modified_picks():
        frame = into(F.ecmp_frame("2001:db8:100:2::5", flow_label=fl, udp_sport=sport), 3)
        port = member_port(ecmp_member(members, fl, sport))
        cases.append(Case(f"ev_group3_modified_fl{fl:05x}_sport{sport:04x}_port{port}", frame, 3,
                          {port: [out_frame(frame, port)]}, fwd(3, port),
                          tables=tables_of(ActionProfileGroup(THREE, tuple(members)))))
    return cases


def lpm_cases() -> list[Case]:
    def to(name: str, da: str, in_port: int, port: int, **kw) -> Case:
        frame = into(F.ecmp_frame(da, flow_label=0x5A5A, udp_sport=0xC001, **kw), in_port)
        return Case(name, frame, in_port, {port: [out_frame(frame, port)]}, fwd(in_port, port))

    fl, sport = 0x5A5A, 0xC001
    leaf1_port = member_port(ecmp_member(GROUPS[UPLINKS], fl, sport))
    return [
        to("ev_route_to_member_host", "2001:db8:100:0::3", 0, 3),
        to("ev_lpm_48_only", "2001:db8:100:7::1", 2, 0),
        to("ev_lpm_128_beats_64_group", "2001:db8:100:1::7", 3, 2),
        to("ev_lpm_64_group_beats_48", "2001:db8:100:1::8", 3, leaf1_port),
        to("ev_lpm_128_beats_48", "2001:db8:100:0::3", 1, 3),
        to("ev_hop_limit_2_forwarded", "2001:db8:100:0::3", 0, 3, hlim=2),
        to("ev_non_mrc_udp", "2001:db8:100:0::3", 0, 3, dport=5000, payload=40),
    ]


def miss_and_drop_cases() -> list[Case]:
    cases = []
    frame = into(F.ecmp_frame("2001:db8:100:9::1", flow_label=1, udp_sport=2), 2)
    cases.append(Case("ev_drop_member_no_route", frame, 2, {}, dropped(2, DropReason.NO_ROUTE)))
    frame = into(F.mrc_frame(F.container(MY_USID, T0[1])), 0)
    cases.append(Case("ev_fib_miss_srv6_takes_un_path", frame, 0, {1: [out_frame(frame, 1, shift=True)]},
                      fwd(0, 1)))
    frame = into(F.ecmp_frame("2001:db8:999::1", flow_label=1, udp_sport=2), 2)
    cases.append(Case("ev_fib_miss_usid_fib_miss_no_route", frame, 2, {}, dropped(2, DropReason.NO_ROUTE)))
    frame = into(F.mrc_frame(F.container(MY_USID, T0[1])), 0)
    cases.append(Case("ev_fib_hit_skips_un", frame, 0, {2: [out_frame(frame, 2)]}, fwd(0, 2),
                      tables=tables_of(route(ENCAP_ROUTE, "member", MEMBER[2]))))
    frame = into(F.mrc_frame(F.container(MY_USID, T0[1])), 0)
    cases.append(Case("ev_fib_hit_drop_member_skips_un", frame, 0, {}, dropped(0, DropReason.NO_ROUTE),
                      tables=tables_of(route("fcbb:bb00:800::/40", "member", DROP_MEMBER))))
    for hlim in (1, 0):
        frame = into(F.ecmp_frame("2001:db8:100:0::3", flow_label=1, udp_sport=2, hlim=hlim), 0)
        cases.append(Case(f"ev_hop_limit_{hlim}_dropped", frame, 0, {}, dropped(0, DropReason.HOP_LIMIT)))
    return cases


# --- trim, congestion and ECN on packets without an outer header ---

def trim_cases() -> list[Case]:
    cases = []
    for opcode, ts in ((Opcode.WRITE_FIRST, False), (Opcode.WRITE_MIDDLE, True),
                       (Opcode.WRITE_LAST_IMM, False), (Opcode.WRITE_ONLY_IMM, True)):
        frame = into(F.ecmp_frame("2001:db8:100:7::1", flow_label=3, udp_sport=4, opcode=opcode, ts=ts), 1)
        want = F.ecmp_trimmed(out_frame(frame, 0), F.ecmp_trimmed_length(opcode, ts=ts), lasthop=False)
        cases.append(Case(f"ev_trim_{opcode.name.lower()}{'_ts' if ts else ''}", frame, 1, {0: [want]},
                          fwd(1, 0, trim=True), tables=congest(0, trim=0)))
    frame = into(F.ecmp_frame("2001:db8:100:0::3", flow_label=3, udp_sport=4, dscp=Dscp.TRIMMABLE_RETX), 0)
    want = F.ecmp_trimmed(out_frame(frame, 3), 94, lasthop=True)
    cases.append(Case("ev_trim_lasthop_retx", frame, 0, {3: [want]}, fwd(0, 3, trim=True),
                      tables=congest(3, trim=1)))
    fl, sport = 0x0BEEF, 0x7001
    port = member_port(ecmp_member(GROUPS[THREE], fl, sport))
    frame = into(F.ecmp_frame("2001:db8:100:2::5", flow_label=fl, udp_sport=sport), 3)
    want = F.ecmp_trimmed(out_frame(frame, port), 94, lasthop=bool(FACES_HOST[port]))
    cases.append(Case(f"ev_trim_after_group_choice_port{port}", frame, 3, {port: [want]},
                      fwd(3, port, trim=True), tables={**congest(0, trim=0), **congest(1, trim=0),
                                                       **congest(2, trim=0)}))
    drops = {
        "ev_congested_no_trim_dropped": F.ecmp_frame("2001:db8:100:7::1", flow_label=3, udp_sport=4,
                                                     dscp=Dscp.NO_TRIM),
        "ev_congested_non_mrc_dropped": F.ecmp_frame("2001:db8:100:7::1", flow_label=3, udp_sport=4,
                                                     dport=5000, payload=40),
        "ev_congested_no_udp_dropped": F.ecmp_frame("2001:db8:100:7::1", flow_label=3, udp_sport=None),
    }
    for name, frame in drops.items():
        frame = into(frame, 1)
        cases.append(Case(name, frame, 1, {}, dropped(1, DropReason.CONGESTION, at=0), tables=congest(0, trim=0)))
    frame = into(F.ecmp_frame("2001:db8:100:7::1", flow_label=3, udp_sport=4, dscp=Dscp.CONTROL,
                              opcode=Opcode.SACK), 1)
    cases.append(Case("ev_congested_control_passes", frame, 1, {0: [out_frame(frame, 0)]}, fwd(1, 0),
                      tables=congest(0, trim=0)))
    return cases


def ecn_cases() -> list[Case]:
    cases = []
    for ecn in (Ecn.ECT0, Ecn.ECT1):
        frame = into(F.ecmp_frame("2001:db8:100:7::1", flow_label=5, udp_sport=6, dscp=Dscp.NO_TRIM, ecn=ecn), 1)
        cases.append(Case(f"ev_ecn_{ecn.name.lower()}_marked_ce", frame, 1,
                          {0: [F.with_tclass(out_frame(frame, 0), ecn=Ecn.CE)]}, fwd(1, 0, ecn=True),
                          tables=congest(0, ecn=1)))
    frame = into(F.ecmp_frame("2001:db8:100:7::1", flow_label=5, udp_sport=6, dscp=Dscp.NO_TRIM), 1)
    cases.append(Case("ev_ecn_not_ect_unchanged", frame, 1, {0: [out_frame(frame, 0)]}, fwd(1, 0),
                      tables=congest(0, ecn=0)))
    frame = into(F.ecmp_frame("2001:db8:100:0::3", flow_label=5, udp_sport=6, ecn=Ecn.ECT0), 0)
    cases.append(Case("ev_ecn_host_port_never_marks", frame, 0, {3: [out_frame(frame, 3)]}, fwd(0, 3),
                      tables=congest(3, ecn=0)))
    frame = into(F.ecmp_frame("2001:db8:100:7::1", flow_label=5, udp_sport=6, ecn=Ecn.ECT1), 1)
    want = F.with_tclass(F.ecmp_trimmed(out_frame(frame, 0), 94, lasthop=False), ecn=Ecn.CE)
    cases.append(Case("ev_ecn_and_trim_together", frame, 1, {0: [want]}, fwd(1, 0, trim=True, ecn=True),
                      tables=congest(0, trim=0, ecn=0)))
    return cases


def ecmp_cases() -> list[Case]:
    return (group_cases() + encapsulated_group_cases() + truncated_udp_cases() + modified_group_cases()
            + lpm_cases() + miss_and_drop_cases() + trim_cases() + ecn_cases())
