"""Golden BPF_PROG_TEST_RUN tests of EV-hash (ECMP) mode in ``mrc_switch.bpf.c``
(docs/ecmp-mode.md): ipv6_fib, its members and groups, the EV hash, and trim/ECN/hop
limit on frames with no outer header.

Expected frames are built from the contract by hand; the member a group picks is predicted by
the Python reference ``mrckit.wire.ecmp``, never read from the program.
"""

import random
import re
import zlib
from pathlib import Path

import pytest
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from support.switch_frames import HOST_B, SWITCH_MAC, container, ecmp_frame, mrc_frame
from support.switch_harness import (DOWN_2, FABRIC_PORT, HOST_PORT, T0_0, T1_5, XDP_DROP, XDP_REDIRECT,
                            expect_counters, leaf, mac, port_config)

from mrckit.wire.constants import Dscp, Ecn, Opcode
from mrckit.wire.ecmp import ecmp_member, ev_member
from mrckit.wire.pipeline import THRESHOLD_NONE
from mrckit.topology.entries import ActionProfileGroup, ActionProfileMember, TableEntry

ROOT = Path(__file__).resolve().parents[3]
# The contract's fabric shape (section 6): member id = port + 1, action set_egress(port).
PORTS = range(6)
UPLINK_MEMBERS = (2, 3, 4, 5)  # ports 1..4
GROUP = 10
HOST_PREFIX = "2001:db8:100:1::/64"


def member_port(member_id: int) -> int:
    return member_id - 1


def ecmp_leaf(sw, *, trim=THRESHOLD_NONE, ecn=THRESHOLD_NONE, group_members=UPLINK_MEMBERS):
    """A T0 in EV-hash mode: ports 0..5 (0 and 5 face hosts), one member per port, group 10 of
    ``group_members`` routing HOST_PREFIX."""
    sw.wire_ports(PORTS)
    sw.set_ingress(HOST_PORT)
    for port in PORTS:
        port_config(sw, port, faces_host=port in (0, 5), trim=trim, ecn=ecn)
        sw.tables.ecmp.write_member(ActionProfileMember(port + 1, "set_egress", {"port": port}))
    sw.tables.ecmp.write_group(ActionProfileGroup(GROUP, tuple(group_members)))
    sw.tables.ecmp.write_route(TableEntry.route(HOST_PREFIX, group=GROUP))


def out_port(out: bytes) -> int:
    """The egress port of a forwarded frame: its source MAC is that port's (port_config)."""
    return int(Ether(out).src.split(":")[-1], 16) - 0xA0


# --- the hash ----------------------------------------------------------------------------------

def test_crc32_table_is_zlibs():
    """ebpf/include/mrc_crc32.h holds the reflected CRC-32 table of zlib, entry by entry."""
    text = (ROOT / "ebpf/include/mrc_crc32.h").read_text()
    table = [int(v, 16) for v in re.findall(r"0x[0-9a-f]{8}", text.split("mrc_crc32_table[256]")[1])[:256]]
    assert table == [zlib.crc32(bytes([n]), 0xFFFFFFFF) ^ 0xFFFFFFFF for n in range(256)]


def test_group_member_follows_the_reference_with_udp(switch):
    """400 packets of random flow labels (20 bits) and source ports: each leaves on the member
    mrckit.wire.ecmp predicts, and every member is used."""
    ecmp_leaf(switch)
    rng = random.Random(11)
    seen = set()
    for _ in range(400):
        fl, sport = rng.randrange(1 << 20), rng.randrange(1 << 16)
        rc, out = switch.run(ecmp_frame(fl=fl, sport=sport, payload=8))
        want = ecmp_member(UPLINK_MEMBERS, fl, sport)
        assert rc == XDP_REDIRECT and out_port(out) == member_port(want), (hex(fl), hex(sport))
        seen.add(want)
    assert seen == set(UPLINK_MEMBERS)


def test_group_member_of_mrc_evs(switch):
    """MRC EVs (flow label = EV 15..0, source port = EV 31..16) on a 3-member group created out
    of order: the members are taken ascending."""
    ecmp_leaf(switch, group_members=(4, 2, 3))
    rng = random.Random(12)
    for _ in range(200):
        ev = rng.randrange(1 << 32)
        rc, out = switch.run(ecmp_frame(fl=ev & 0xFFFF, sport=ev >> 16, payload=0, icrc=False))
        assert rc == XDP_REDIRECT and out_port(out) == member_port(ev_member([2, 3, 4], ev)), hex(ev)


@pytest.mark.parametrize("udp_bytes", [0, 7], ids=["no-udp-bytes", "udp-cut-short"])
def test_group_member_without_udp_header(switch, udp_bytes):
    """A frame whose UDP header is not entirely inside it hashes the flow label alone (3 bytes),
    as bmv2 does with an invalid hdr.udp."""
    ecmp_leaf(switch)
    rng = random.Random(13)
    for _ in range(100):
        fl = rng.randrange(1 << 20)
        frame = ecmp_frame(fl=fl, sport=rng.randrange(1 << 16))[:54 + udp_bytes]
        rc, out = switch.run(frame)
        assert rc == XDP_REDIRECT and out_port(out) == member_port(ecmp_member(UPLINK_MEMBERS, fl, None))
        assert len(out) == 54 + udp_bytes


def test_group_member_of_other_next_header(switch):
    """Next header 59 (no next header): no UDP header, flow label alone."""
    ecmp_leaf(switch)
    for fl in range(0, 1 << 20, 9973):
        frame = bytes(Ether(src="02:00:00:00:01:01", dst=SWITCH_MAC) /
                      IPv6(src="2001:db8::1", dst=HOST_B, nh=59, fl=fl) /
                      (b"\x00" * 16))
        rc, out = switch.run(frame)
        assert rc == XDP_REDIRECT and out_port(out) == member_port(ecmp_member(UPLINK_MEMBERS, fl, None))


def test_encapsulated_frame_hashes_inner_udp_port(switch):
    """An encapsulated frame that hits ipv6_fib hashes the first header's flow label with the
    inner UDP source port (hdr.udp after hdr.inner_ipv6); cut inside the inner header, without."""
    ecmp_leaf(switch)
    rng = random.Random(14)
    for _ in range(100):
        sport = rng.randrange(1 << 16)
        frame = mrc_frame(HOST_B, sport=sport)  # outer flow label 0x1234
        rc, out = switch.run(frame)
        assert rc == XDP_REDIRECT and out_port(out) == member_port(ecmp_member(UPLINK_MEMBERS, 0x1234, sport))
    rc, out = switch.run(mrc_frame(HOST_B)[:90])
    assert rc == XDP_REDIRECT and out_port(out) == member_port(ecmp_member(UPLINK_MEMBERS, 0x1234, None))


def test_group_modify_moves_packets(switch):
    """Shrinking a group re-spreads its packets over the members left (the fabric's reroute)."""
    ecmp_leaf(switch)
    switch.tables.ecmp.write_group(ActionProfileGroup(GROUP, (2, 5)), modify=True)
    for fl in range(0, 1 << 20, 65537):
        rc, out = switch.run(ecmp_frame(fl=fl, sport=fl & 0xFFFF))
        assert out_port(out) == member_port(ecmp_member((2, 5), fl, fl & 0xFFFF))


# --- routes: member, LPM, miss, drop -------------------------------------------------------------

def test_route_to_member_bytes_exact(switch):
    ecmp_leaf(switch)
    switch.tables.ecmp.write_route(TableEntry.route("2001:db8:100:1::2/128", member=6))
    frame = ecmp_frame(HOST_B, ecn=Ecn.ECT0)
    rc, out = switch.run(frame)
    assert rc == XDP_REDIRECT
    assert out == ecmp_frame(HOST_B, ecn=Ecn.ECT0, hlim=63, src=mac(5), dst=mac(5, True))
    n = len(frame)
    expect_counters(switch, rx_port={HOST_PORT: (1, n)}, tx_port={5: (1, n)})


def test_longest_prefix_wins(switch):
    ecmp_leaf(switch)
    switch.tables.ecmp.write_route(TableEntry.route("2001:db8::/32", member=2))
    switch.tables.ecmp.write_route(TableEntry.route("2001:db8:100:1::2/128", member=6))
    switch.tables.ecmp.write_route(TableEntry.route("2001:db8:100:1:8000::/65", member=3))
    cases = {"2001:db8:7::1": 1, "2001:db8:100:1::2": 5, "2001:db8:100:1:8000::2": 2}
    for da, port in cases.items():
        rc, out = switch.run(ecmp_frame(da))
        assert rc == XDP_REDIRECT and out_port(out) == port, da
    # The /64 (group) catches the rest of its prefix.
    rc, out = switch.run(ecmp_frame("2001:db8:100:1::3", fl=5, sport=6))
    assert out_port(out) == member_port(ecmp_member(UPLINK_MEMBERS, 5, 6))
    switch.tables.ecmp.delete_route(TableEntry.route("2001:db8:100:1::2/128"))
    rc, out = switch.run(ecmp_frame(HOST_B, fl=5, sport=6))
    assert out_port(out) == member_port(ecmp_member(UPLINK_MEMBERS, 5, 6))


def test_miss_falls_through_to_un(switch):
    """With ipv6_fib entries installed, an SRv6 frame (DA outside them) takes the uN path byte
    for byte; an EV-hash frame outside every prefix and uSID is no_route."""
    leaf(switch, T0_0)
    switch.tables.ecmp.write_member(ActionProfileMember(2, "set_egress", {"port": 1}))
    switch.tables.ecmp.write_route(TableEntry.route("2001:db8::/32", member=2))
    rc, out = switch.run(mrc_frame(container(T0_0, T1_5, DOWN_2)))
    assert rc == XDP_REDIRECT
    assert out == mrc_frame(container(T1_5, DOWN_2), hlim=63, src=mac(1), dst=mac(1, True))
    frame = ecmp_frame("2001:db9::1")
    assert switch.run(frame)[0] == XDP_DROP
    assert switch.tables.counters.nonzero("drop_reason") == {2: (1, len(frame))}


def test_hit_skips_un(switch):
    """A route covering a uSID DA decides alone: no shift, usid_fib not consulted."""
    leaf(switch, T0_0)
    switch.tables.ecmp.write_member(ActionProfileMember(4, "set_egress", {"port": 3}))
    switch.tables.ecmp.write_route(TableEntry.route("fcbb:bb00::/32", member=4))
    rc, out = switch.run(mrc_frame(container(T0_0, T1_5)))
    assert rc == XDP_REDIRECT
    assert out == mrc_frame(container(T0_0, T1_5), hlim=63, src=mac(3), dst=mac(3, True))


@pytest.mark.parametrize("how", ["drop-member", "drop-in-group", "empty-group"])
def test_drop_counts_no_route(switch, how):
    ecmp_leaf(switch)
    switch.tables.ecmp.write_member(ActionProfileMember(100, "drop"))
    if how == "drop-member":
        switch.tables.ecmp.write_route(TableEntry.route("2001:db8:100:1::2/128", member=100))
    elif how == "drop-in-group":
        switch.tables.ecmp.write_group(ActionProfileGroup(GROUP, (100,)), modify=True)
    else:
        switch.tables.ecmp.write_group(ActionProfileGroup(GROUP, ()), modify=True)
    frame = ecmp_frame(HOST_B)
    assert switch.run(frame)[0] == XDP_DROP
    n = len(frame)
    expect_counters(switch, rx_port={HOST_PORT: (1, n)}, drop_port={HOST_PORT: (1, n)},
                    drop_reason={2: (1, n)})


def test_member_on_port_without_device_is_no_route(switch):
    ecmp_leaf(switch)
    switch.tables.ecmp.write_member(ActionProfileMember(50, "set_egress", {"port": 49}))
    switch.tables.ecmp.write_route(TableEntry.route("2001:db8:100:1::2/128", member=50))
    frame = ecmp_frame(HOST_B)
    assert switch.run(frame)[0] == XDP_DROP
    assert switch.tables.counters.nonzero("drop_reason") == {2: (1, len(frame))}


# --- hop limit, trim, ECN on frames with no outer header ----------------------------------------

@pytest.mark.parametrize("hlim,rc_want", [(0, XDP_DROP), (1, XDP_DROP), (2, XDP_REDIRECT)])
def test_hop_limit(switch, hlim, rc_want):
    ecmp_leaf(switch)
    switch.tables.ecmp.write_route(TableEntry.route("2001:db8:100:1::2/128", member=2))
    frame = ecmp_frame(HOST_B, hlim=hlim)
    rc, out = switch.run(frame)
    assert rc == rc_want
    if rc == XDP_REDIRECT:
        assert out == ecmp_frame(HOST_B, hlim=1, src=mac(1), dst=mac(1, True))
    else:
        assert switch.tables.counters.nonzero("drop_reason") == {1: (1, len(frame))}


# (opcode, ts, frame length after the trim): 14 Ethernet + 40 IPv6 + 8 UDP + 12 BTH + 4 METH
# + [4 TSETH] + 16 RETH + [4 ImmDt] = 94 / 98 / 102 (docs/ecmp-mode.md).
TRIM_CASES = [
    (Opcode.WRITE_ONLY, False, 94),
    (Opcode.WRITE_FIRST, False, 94),
    (Opcode.WRITE_MIDDLE, False, 94),
    (Opcode.WRITE_LAST, False, 94),
    (Opcode.WRITE_ONLY_IMM, False, 98),
    (Opcode.WRITE_LAST_IMM, False, 98),
    (Opcode.WRITE_ONLY, True, 98),
    (Opcode.WRITE_ONLY_IMM, True, 102),
    (Opcode.WRITE_LAST_IMM, True, 102),
]


@pytest.mark.parametrize("opcode,ts,length", TRIM_CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("dscp", [Dscp.TRIMMABLE, Dscp.TRIMMABLE_RETX])
def test_trim_of_no_encap_write(switch, opcode, ts, length, dscp):
    ecmp_leaf(switch, trim=0)
    switch.tables.ecmp.write_route(TableEntry.route("2001:db8:100:1::2/128", member=2))
    frame = ecmp_frame(HOST_B, opcode=opcode, ts=ts, dscp=dscp, ecn=Ecn.ECT1, payload=300)
    rc, out = switch.run(frame)
    assert rc == XDP_REDIRECT and len(out) == length
    # Hand-written lengths: IPv6 payload = UDP length = length - 54.
    assert int.from_bytes(out[18:20], "big") == length - 54
    assert int.from_bytes(out[58:60], "big") == length - 54
    assert out == ecmp_frame(HOST_B, opcode=opcode, ts=ts, dscp=Dscp.TRIMMED, ecn=Ecn.ECT1, payload=0,
                             icrc=False, hlim=63, src=mac(1), dst=mac(1, True))
    expect_counters(switch, rx_port={HOST_PORT: (1, len(frame))}, tx_port={1: (1, length)},
                    trim_port={1: (1, length)})


def test_trim_on_host_port_is_lasthop(switch):
    ecmp_leaf(switch, trim=1)
    switch.tables.ecmp.write_route(TableEntry.route("2001:db8:100:1::2/128", member=6))
    rc, out = switch.run(ecmp_frame(HOST_B, opcode=Opcode.WRITE_LAST_IMM, ts=True))
    assert rc == XDP_REDIRECT
    assert out == ecmp_frame(HOST_B, opcode=Opcode.WRITE_LAST_IMM, ts=True, dscp=Dscp.TRIMMED_LASTHOP,
                             payload=0, icrc=False, hlim=63, src=mac(5), dst=mac(5, True))


@pytest.mark.parametrize("case", ["no-trim-class", "not-mrc-port", "not-a-write", "short-headers"])
def test_congested_no_encap_non_trimmable_is_dropped(switch, case):
    ecmp_leaf(switch, trim=0)
    switch.tables.ecmp.write_route(TableEntry.route("2001:db8:100:1::2/128", member=2))
    frame = {
        "no-trim-class": lambda: ecmp_frame(HOST_B, dscp=Dscp.NO_TRIM),
        "not-mrc-port": lambda: ecmp_frame(HOST_B, dport=4792),
        "not-a-write": lambda: ecmp_frame(HOST_B, opcode=Opcode.ACK),
        "short-headers": lambda: ecmp_frame(HOST_B, opcode=Opcode.WRITE_ONLY_IMM, ts=True)[:101],
    }[case]()
    assert switch.run(frame)[0] == XDP_DROP
    n = len(frame)
    expect_counters(switch, rx_port={HOST_PORT: (1, n)}, drop_port={FABRIC_PORT: (1, n)},
                    drop_reason={3: (1, n)})


@pytest.mark.parametrize("ecn_in,ecn_out", [(Ecn.ECT0, Ecn.CE), (Ecn.ECT1, Ecn.CE),
                                            (Ecn.NOT_ECT, Ecn.NOT_ECT), (Ecn.CE, Ecn.CE)])
def test_ecn_on_no_encap_frame(switch, ecn_in, ecn_out):
    ecmp_leaf(switch, ecn=0)
    switch.tables.ecmp.write_route(TableEntry.route("2001:db8:100:1::2/128", member=2))
    frame = ecmp_frame(HOST_B, ecn=ecn_in, fl=0xABCDE)
    rc, out = switch.run(frame)
    assert rc == XDP_REDIRECT
    assert out == ecmp_frame(HOST_B, ecn=ecn_out, fl=0xABCDE, hlim=63, src=mac(1), dst=mac(1, True))
    marked = {1: (1, len(frame))} if ecn_in in (Ecn.ECT0, Ecn.ECT1) else {}
    expect_counters(switch, rx_port={HOST_PORT: (1, len(frame))}, tx_port={1: (1, len(frame))},
                    ecn_port=marked)


def test_trimmed_and_ce_together(switch):
    ecmp_leaf(switch, trim=0, ecn=0)
    switch.tables.ecmp.write_route(TableEntry.route("2001:db8:100:1::2/128", member=2))
    rc, out = switch.run(ecmp_frame(HOST_B, ecn=Ecn.ECT0))
    assert rc == XDP_REDIRECT and len(out) == 94
    assert Ether(out)[IPv6].tc == (Dscp.TRIMMED << 2) | Ecn.CE
    assert switch.tables.counters.nonzero("ecn_port") == {1: (1, 94)}
