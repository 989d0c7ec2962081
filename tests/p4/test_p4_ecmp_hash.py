"""EV-hash (ECMP) mode on real bmv2 (docs/ecmp-mode.md, "Switch pipeline"): the action selector
``ecmp_selector`` of table ``ipv6_fib`` sends every frame to exactly the member that the Python
reference ``mrckit.wire.ecmp.ecmp_member`` predicts, with and without a UDP header; and a write
with no outer header is trimmed to 94 B (+ TSETH/ImmDt) with its IPv6 payload length and UDP
length fixed.

One bmv2 switch with ports 0..3 (the conformance suite's wiring, tests/conformance); frames go in
on port 0 and are captured on every port of the tester namespace. The fuller EV-hash conformance
cases (both targets) live in tests/conformance.
"""

from __future__ import annotations

import os
import random
import struct
import time

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from mrckit import netns
from mrckit.wire.constants import Dscp, Ecn, Opcode
from mrckit.wire.ecmp import ecmp_member
from mrckit.wire.layers import METH, RETH, ImmDt, MrcBTH, TSETH
from mrckit.wire.packet import mrc_frame
from mrckit.wire.pipeline import EGRESS_PORT_FIELD, THRESHOLD_NONE
from mrckit import testing as CT
from mrckit.testing.targets import Bmv2Target

from support.conformance_frames import forwarded

RUN_PREFIX = f"mrct{os.getpid() % 100000}"
"""tests/conftest.py's run prefix, so its session-end cleanup covers our namespaces too."""

IN_PORT = 0
PORT_MACS = {p: (f"02:00:00:00:0{p}:01", f"02:00:00:00:0{p}:02") for p in CT.PORTS}   # (src, dst)
HOST_A = "2001:db8:100:0::1"

MEMBERS = {10: 1, 20: 2, 30: 3}      # member id -> egress port (set_egress)
DROP_MEMBER = 40                     # drop(): no_route
TRIM_MEMBER = 50                     # set_egress(0); port 0 trims and marks CE always
GROUPS = {1: (30, 10, 20), 2: (30, 10)}   # written unsorted on purpose: bmv2 orders by member
ROUTES = {                                # prefix -> ("group" | "member", id)
    "2001:db8:100:1::/64": ("group", 1),
    "2001:db8:100:2::/64": ("group", 2),
    "2001:db8:100:1::9/128": ("member", 20),   # longer prefix beats the group's /64
    "2001:db8:100:3::/64": ("member", DROP_MEMBER),
    "2001:db8:100:4::/64": ("member", TRIM_MEMBER),
}
BATCH = 64                 # frames in flight at once: well inside the AF_PACKET receive buffers
SEND_GAP = 0.002           # s between frames: bmv2 reads ports through libpcap rings that an
                           # unpaced burst overflows (mrckit.apps.pairwise paces the same way)
ARRIVAL_TIMEOUT = 5.0      # s to wait for a batch's frames (bmv2 logs every packet)
SETTLE = 0.3               # s to keep listening after the last expected frame, for extras
DROP_REASON_NO_ROUTE = 2
DROP_REASON_CONGESTION = 3


def _skip_reason() -> str | None:
    from mrckit.switch.bmv2 import DEFAULT_JSON, DEFAULT_P4INFO, find_tool
    if os.geteuid() != 0:
        return "needs root: network namespaces and raw sockets"
    if find_tool("simple_switch_grpc") is None:
        return "bmv2: simple_switch_grpc not found on PATH or in /opt/p4tools/bin"
    if not (DEFAULT_JSON.is_file() and DEFAULT_P4INFO.is_file()):
        return "p4src/build/ has no bmv2 JSON or P4Info (run `make p4`)"
    return None


class EcmpSwitch:
    """bmv2 with the EV-hash tables of this module installed, and the tester's sockets."""

    def __init__(self):
        self.wiring = CT.build_wiring(RUN_PREFIX, kernel_switch=False)
        self.target = self.tester = None
        try:
            self.target = Bmv2Target(self.wiring, netns.unique_name("mrcecmp"))
            self.tester = CT.Tester(self.wiring.tester, {p: self.wiring.tester_if(p) for p in CT.PORTS})
            self._install()
        except BaseException:
            self.close()
            raise

    def _install(self) -> None:
        fy, client = self.target.fy, self.target.client
        updates = []
        for port, (src, dst) in PORT_MACS.items():
            threshold = 0 if port == 0 else THRESHOLD_NONE
            updates.append(+fy.P4TableEntry(
                "port_config", match=fy.P4TableMatch({EGRESS_PORT_FIELD: port}),
                action=fy.P4TableAction("set_port", src_mac=src, dst_mac=dst, faces_host=0,
                                        trim_threshold=threshold, ecn_threshold=threshold)))
        actions = {m: fy.P4TableAction("set_egress", port=p) for m, p in MEMBERS.items()}
        actions[DROP_MEMBER] = fy.P4TableAction("drop")
        actions[TRIM_MEMBER] = fy.P4TableAction("set_egress", port=0)
        # Ascending member ids: bmv2's member handles then follow the ids (contract section 3).
        for member_id in sorted(actions):
            updates.append(+fy.P4ActionProfileMember("ecmp_selector", member_id=member_id,
                                                     action=actions[member_id]))
        for group_id, members in GROUPS.items():
            updates.append(+fy.P4ActionProfileGroup(
                "ecmp_selector", group_id=group_id, members=[fy.P4Member(m, weight=1) for m in members]))
        for prefix, (kind, ref) in ROUTES.items():
            action = fy.P4IndirectAction(group_id=ref) if kind == "group" else fy.P4IndirectAction(member_id=ref)
            updates.append(+fy.P4TableEntry(
                "ipv6_fib", match=fy.P4TableMatch({"hdr.outer_ipv6.dst_addr": prefix}), action=action))
        client.call(client.switch.write(updates))

    def counter(self, name: str, index: int) -> int:
        cells = self.target.client.read(self.target.fy.P4CounterEntry(name, index=index))
        return sum(c.packet_count for c in cells)

    def exchange(self, frames: list[bytes]) -> dict[int, list[bytes]]:
        """Send ``frames`` on IN_PORT in batches; every frame received on each port."""
        got: dict[int, list[bytes]] = {p: [] for p in CT.PORTS}
        self.tester.drain()
        for start in range(0, len(frames), BATCH):
            batch = frames[start:start + BATCH]
            for frame in batch:
                self.tester.send(IN_PORT, frame)
                time.sleep(SEND_GAP)
            self._collect(got, sum(map(len, got.values())) + len(batch))
        return got

    def _collect(self, got: dict[int, list[bytes]], wanted: int) -> None:
        deadline = time.monotonic() + ARRIVAL_TIMEOUT
        while sum(map(len, got.values())) < wanted and time.monotonic() < deadline:
            for port, frames in self.tester.collect(0.05).items():
                got[port] += frames
        for port, frames in self.tester.collect(SETTLE).items():
            got[port] += frames

    def close(self) -> None:
        try:
            if self.tester is not None:
                self.tester.close()
            if self.target is not None:
                self.target.close()
        finally:
            CT.remove_wiring(self.wiring)


@pytest.fixture(scope="module")
def switch():
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    sw = EcmpSwitch()
    yield sw
    sw.close()


# --- frames ---

def _write(opcode: int = Opcode.WRITE_ONLY, *, ts: bool = False, payload: int = 64):
    """BTH | METH | [TSETH] | RETH | [ImmDt] | payload of an RDMA write (design section 3.2)."""
    stack = MrcBTH(opcode=opcode, dqpn=0x123, psn=7, ts=int(ts)) / METH(rqmsn=1, msn=2)
    if ts:
        stack = stack / TSETH(tx_timestamp=0x1234)
    stack = stack / RETH(va=0x1000, rkey=0xABCD, dma_len=4096)
    if opcode in (Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY_IMM):
        stack = stack / ImmDt(imm=0xDEADBEEF)
    return stack / Raw(bytes((i * 7) & 0xFF for i in range(payload)))


def ev_mode_frame(dst: str, flow_label: int, sport: int, **kw) -> bytes:
    """An EV-hash mode frame (contract section 1): no outer header, EV in flow label and sport."""
    pkt = mrc_frame(_write(**kw.pop("write", {})), ev=(sport << 16) | flow_label, inner_src=HOST_A,
                    inner_dst=dst, **kw)
    return bytes(pkt)


def no_udp_frame(dst: str, flow_label: int, kind: str) -> bytes:
    """IPv6 without a (complete) UDP header: next header 59, or 17 with only 6 bytes of UDP."""
    if kind == "nh59":
        ip = IPv6(src=HOST_A, dst=dst, nh=59, fl=flow_label, tc=Dscp.NO_TRIM << 2) / Raw(b"no udp here")
    else:
        ip = IPv6(src=HOST_A, dst=dst, nh=17, fl=flow_label, tc=Dscp.NO_TRIM << 2, plen=6) / \
             Raw(struct.pack("!HHH", 0xC000, 4791, 6))
    return bytes(Ether(src="02:00:00:00:00:ee", dst="02:00:00:00:00:aa") / ip)


def encapsulated_frame(outer_dst: str, outer_fl: int, sport: int) -> bytes:
    """An SRv6-shaped frame whose outer DA hits ipv6_fib: the selector reads the outer flow label
    and the inner UDP source port (the inner flow label differs on purpose)."""
    pkt = (Ether(src="02:00:00:00:00:ee", dst="02:00:00:00:00:aa") /
           IPv6(src="2001:db8:200::1", dst=outer_dst, nh=41, fl=outer_fl, tc=Dscp.NO_TRIM << 2) /
           IPv6(src=HOST_A, dst="2001:db8:100:7::2", nh=17, fl=outer_fl ^ 0x5A5A5) /
           UDP(sport=sport, dport=4791, chksum=0) / _write())
    return bytes(pkt)


def out_frame(frame: bytes, port: int) -> bytes:
    """Design section 4 steps 4: hop limit - 1 and the MACs of the egress port's port_config."""
    src, dst = PORT_MACS[port]
    return forwarded(frame, src_mac=src, dst_mac=dst)


def _check_spread(switch: EcmpSwitch, cases: list[tuple[bytes, int]]) -> None:
    """Send every (frame, expected port); each must leave on exactly that port, as predicted."""
    got = switch.exchange([frame for frame, _ in cases])
    wrong = []
    for port in CT.PORTS:
        want = sorted(out_frame(f, p) for f, p in cases if p == port)
        have = sorted(got[port])
        if want != have:
            wrong.append(f"port {port}: expected {len(want)} frames, got {len(have)}, "
                         f"{len(set(want) - set(have))} predicted frames missing there")
    assert not wrong, "bmv2 disagrees with mrckit.wire.ecmp: " + "; ".join(wrong)
    used = {p for _, p in cases}
    assert len(used) > 1, "every EV hashed to one member: the test proves nothing"


def _expected_port(group: int, flow_label: int, sport: int | None) -> int:
    return MEMBERS[ecmp_member(GROUPS[group], flow_label, sport)]


# --- tests ---

def test_hash_with_udp_picks_the_reference_member(switch):
    rng = random.Random(11)
    evs = [0, 0xFFFFFFFF, 0x00010000, 0x00000001] + [rng.getrandbits(32) for _ in range(380)]
    cases = []
    for i, ev in enumerate(evs):
        group = 1 if i % 2 == 0 else 2
        fl, sport = ev & 0xFFFF, ev >> 16
        frame = ev_mode_frame(f"2001:db8:100:{group}::{i % 7 + 1}", fl, sport, dscp=Dscp.NO_TRIM)
        cases.append((frame, _expected_port(group, fl, sport)))
    _check_spread(switch, cases)


def test_hash_uses_all_20_flow_label_bits(switch):
    """The selector field is the whole 20-bit flow label, not only the EV's 16 bits."""
    rng = random.Random(12)
    cases = []
    for _ in range(128):
        fl, sport = rng.getrandbits(20) | 0x10000, rng.getrandbits(16)
        frame = bytearray(ev_mode_frame("2001:db8:100:1::2", 0, sport, dscp=Dscp.NO_TRIM))
        frame[15] = (frame[15] & 0xF0) | (fl >> 16)          # mrc_frame takes 16-bit EV halves
        frame[16:18] = (fl & 0xFFFF).to_bytes(2, "big")
        cases.append((bytes(frame), _expected_port(1, fl, sport)))
    _check_spread(switch, cases)


@pytest.mark.parametrize("kind", ["nh59", "short_udp"])
def test_hash_without_udp_header_uses_the_flow_label_only(switch, kind):
    rng = random.Random(13)
    cases = []
    for _ in range(192):
        fl = rng.getrandbits(20)
        cases.append((no_udp_frame("2001:db8:100:1::3", fl, kind), _expected_port(1, fl, None)))
    _check_spread(switch, cases)


def test_encapsulated_frame_hashes_outer_flow_label_and_inner_sport(switch):
    rng = random.Random(14)
    cases = []
    for _ in range(192):
        fl, sport = rng.getrandbits(20), rng.getrandbits(16)
        cases.append((encapsulated_frame("2001:db8:100:1::4", fl, sport), _expected_port(1, fl, sport)))
    _check_spread(switch, cases)


def test_longest_prefix_wins_over_the_group(switch):
    cases = [(ev_mode_frame("2001:db8:100:1::9", fl, fl * 3, dscp=Dscp.NO_TRIM), MEMBERS[20])
             for fl in range(1, 40)]
    _check_spread_to_one_port(switch, cases)


def _check_spread_to_one_port(switch, cases):
    got = switch.exchange([f for f, _ in cases])
    port = cases[0][1]
    assert sorted(got[port]) == sorted(out_frame(f, port) for f, _ in cases)
    assert all(not got[p] for p in CT.PORTS if p != port)


def test_drop_member_and_fib_miss_count_no_route(switch):
    before = switch.counter("drop_reason", DROP_REASON_NO_ROUTE)
    frames = [ev_mode_frame("2001:db8:100:3::1", 5, 6, dscp=Dscp.NO_TRIM),   # member drop()
              ev_mode_frame("2001:db8:999::1", 5, 6, dscp=Dscp.NO_TRIM)]     # ipv6_fib and usid_fib miss
    got = switch.exchange(frames)
    assert all(not frames_out for frames_out in got.values())
    assert switch.counter("drop_reason", DROP_REASON_NO_ROUTE) - before == 2


def trimmed_ev_frame(frame: bytes, length: int) -> bytes:
    """Design section 4.5 on a frame with no outer header: cut to ``length``, IPv6 payload length
    and UDP length = length - 54, DSCP TRIMMED and CE (port 0 faces a switch, thresholds 0)."""
    out = bytearray(out_frame(frame, 0)[:length])
    struct.pack_into("!H", out, 14 + 4, length - 54)
    struct.pack_into("!H", out, 54 + 4, length - 54)
    tclass = (Dscp.TRIMMED << 2) | Ecn.CE
    out[14] = 0x60 | (tclass >> 4)
    out[15] = (out[15] & 0x0F) | ((tclass & 0x0F) << 4)
    return bytes(out)


@pytest.mark.parametrize("opcode,ts,length", [
    (Opcode.WRITE_ONLY, False, 94), (Opcode.WRITE_FIRST, True, 98),
    (Opcode.WRITE_ONLY_IMM, False, 98), (Opcode.WRITE_LAST_IMM, True, 102)])
def test_write_without_outer_header_is_trimmed(switch, opcode, ts, length):
    frame = ev_mode_frame("2001:db8:100:4::1", 0x1234, 0x1003, dscp=Dscp.TRIMMABLE, ecn=Ecn.ECT0,
                          write={"opcode": opcode, "ts": ts, "payload": 256})
    trims, marks = switch.counter("trim_port", 0), switch.counter("ecn_port", 0)
    got = switch.exchange([frame])
    assert got[0] == [trimmed_ev_frame(frame, length)]
    assert all(not got[p] for p in CT.PORTS if p != 0)
    assert (switch.counter("trim_port", 0) - trims, switch.counter("ecn_port", 0) - marks) == (1, 1)


def test_untrimmable_write_without_outer_header_is_a_congestion_drop(switch):
    frame = ev_mode_frame("2001:db8:100:4::1", 0x1234, 0x1003, dscp=Dscp.NO_TRIM)
    before = switch.counter("drop_reason", DROP_REASON_CONGESTION)
    got = switch.exchange([frame])
    assert all(not frames_out for frames_out in got.values())
    assert switch.counter("drop_reason", DROP_REASON_CONGESTION) - before == 1
