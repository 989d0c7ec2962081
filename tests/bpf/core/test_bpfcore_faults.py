"""mrc_fault.bpf.c + mrckit.fabric.faults: loss, blackhole, duplicate and reorder on a real
veth link between two namespaces, counted by the fault program and by the receiver."""

import contextlib
import ctypes
import hashlib
import os
import select
import socket
import struct
import time

import pytest
from scapy.layers.l2 import Ether

from support.bpfcore_helpers import PktStats, mac_of, send_frames
from mrckit import bpf, netns
from mrckit.errors import MrcError
from mrckit.fabric import faults as F

ETH_P_PROBE = 0x88B5  # local experimental EtherType: nothing but our probes carries it
KIND_PROBE = 0xB5


@pytest.fixture
def link(veth_pair):
    """A veth link whose sender side (va) has IPv6 off, so only our probes cross it."""
    ns_a, va, ns_b, vb = veth_pair
    netns.run(["sysctl", "-qw", f"net.ipv6.conf.{va}.disable_ipv6=1"], ns=ns_a)
    yield veth_pair
    for ns in (ns_a, ns_b):
        F.detach_all(ns)


@pytest.fixture
def resident(link):
    """xdp_count attached natively on the receiver vb: the program a fault must chain to."""
    _, _, ns_b, vb = link
    with bpf.BpfObject.open("test_maps") as obj:
        obj.load()
        with netns.enter(ns_b):
            bpf.xdp_attach(vb, obj.program("xdp_count"))
        yield obj
        with netns.enter(ns_b):
            bpf.xdp_detach(vb)


def probe_frames(link, n):
    ns_a, va, ns_b, vb = link
    head = bytes(Ether(dst=mac_of(ns_b, vb), src=mac_of(ns_a, va), type=ETH_P_PROBE))
    return [head + struct.pack("!I", i) + b"z" * 46 for i in range(n)]


def resident_count(obj):
    return obj.map("stats", key_type=ctypes.c_uint32, value_type=PktStats).lookup_sum(KIND_PROBE).packets


class Receiver:
    """An AF_PACKET socket in ``ns`` bound to the probe EtherType on ``ifname``. It sees a
    packet after tc ingress ran (type-specific taps come after the ingress hook)."""

    def __init__(self, ns, ifname):
        with netns.enter(ns):
            self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_PROBE))
            self.sock.bind((ifname, ETH_P_PROBE))
        self.sock.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE: hold every probe

    def seqs(self, expect, wait_s=2.0):
        """Sequence numbers received, in order; stops at ``expect`` or after ``wait_s`` of silence."""
        got = []
        while len(got) < expect and select.select([self.sock], [], [], wait_s)[0]:
            frame = self.sock.recv(2048)
            got.append(struct.unpack("!I", frame[14:18])[0])
        return got

    def close(self):
        self.sock.close()


def test_ctypes_mirrors_equal_the_c_structs(need_bpf):
    assert bpf.layout_mismatches(F.FaultCfg, bpf.btf_struct_layout("mrc_fault", "fault_cfg")) == []
    assert bpf.layout_mismatches(F.FaultStatsC, bpf.btf_struct_layout("mrc_fault", "fault_stats")) == []
    assert bpf.layout_mismatches(F.FaultMarkC, bpf.btf_struct_layout("mrc_fault", "fault_mark")) == []


@pytest.mark.parametrize("hook", ["xdp", "tc-ingress"])
def test_first_drop_is_stamped_once_and_rearming_resets_it(link, resident, hook):
    """Armed -> the first dropped packet stamps the kernel clock; later drops leave the stamp;
    configure (re-applying a fault) clears it for the next drop; passed packets never stamp."""
    ns_a, va, ns_b, vb = link
    F.attach(ns_b, vb, F.Fault(), hook=hook)  # armed with nothing to drop
    send_frames(ns_a, va, probe_frames(link, 20))
    assert F.read_stats(ns_b, vb, hook=hook).passed == 20 and F.first_drop_ns(ns_b, vb, hook=hook) is None
    before = time.monotonic_ns()  # CLOCK_MONOTONIC: bpf_ktime_get_ns()'s clock
    F.configure(ns_b, vb, F.Fault(blackhole=True), hook=hook)
    send_frames(ns_a, va, probe_frames(link, 1))
    first = F.first_drop_ns(ns_b, vb, hook=hook)
    assert first is not None and before <= first <= time.monotonic_ns()
    send_frames(ns_a, va, probe_frames(link, 30))  # later drops
    assert F.read_stats(ns_b, vb, hook=hook).dropped_blackhole == 31
    assert F.first_drop_ns(ns_b, vb, hook=hook) == first
    F.configure(ns_b, vb, F.Fault(loss_ppm=F.PPM_ONE), hook=hook)  # re-applied: reset
    assert F.first_drop_ns(ns_b, vb, hook=hook) is None
    rearmed = time.monotonic_ns()
    send_frames(ns_a, va, probe_frames(link, 5))
    again = F.first_drop_ns(ns_b, vb, hook=hook)
    assert again is not None and first < rearmed <= again
    F.detach(ns_b, vb, hook=hook)
    with pytest.raises(MrcError):
        F.first_drop_ns(ns_b, vb, hook=hook)


def test_xdp_loss_chains_to_the_resident_program_and_detach_restores_it(link, resident):
    ns_a, va, ns_b, vb = link
    resident_id = resident.program("xdp_count").id
    sent = 2000
    F.attach(ns_b, vb, F.Fault(loss_ppm=F.percent_to_ppm(50)))
    with netns.enter(ns_b):
        assert bpf.xdp_query(vb).prog_id != resident_id  # the fault program is in front
    send_frames(ns_a, va, probe_frames(link, sent))
    c = F.read_stats(ns_b, vb)
    assert c.seen == sent and c.passed + c.dropped_loss == sent
    assert c.no_next == 0 and c.dropped_blackhole == 0
    assert resident_count(resident) == c.passed  # every passed packet reached the resident
    assert 700 < c.dropped_loss < 1300  # binomial(2000, 0.5): 13 standard deviations apart
    assert F.detach(ns_b, vb) is True
    with netns.enter(ns_b):
        assert bpf.xdp_query(vb).prog_id == resident_id
    assert not os.path.exists(F.fault_dir(ns_b, vb))
    assert F.list_faults() == [] or all(f[0] != ns_b for f in F.list_faults())


def test_xdp_blackhole_then_clear(link, resident):
    ns_a, va, ns_b, vb = link
    F.attach(ns_b, vb, F.Fault(blackhole=True))
    send_frames(ns_a, va, probe_frames(link, 50))
    assert F.read_stats(ns_b, vb).dropped_blackhole == 50
    assert resident_count(resident) == 0
    F.clear(ns_b, vb)
    assert F.read_config(ns_b, vb) == F.Fault()
    send_frames(ns_a, va, probe_frames(link, 30))
    c = F.read_stats(ns_b, vb)
    assert (c.seen, c.passed, c.dropped_blackhole) == (80, 30, 50)
    assert resident_count(resident) == 30


def test_xdp_fault_without_a_resident_passes_to_the_stack(link):
    ns_a, va, ns_b, vb = link
    rx = Receiver(ns_b, vb)
    try:
        with F.injected(ns_b, vb, F.Fault(loss_ppm=F.percent_to_ppm(20))):
            send_frames(ns_a, va, probe_frames(link, 400))
            c = F.read_stats(ns_b, vb)
            got = rx.seqs(c.passed)
            with netns.enter(ns_b):
                assert bpf.xdp_query(vb).mode == "native"
        with netns.enter(ns_b):
            assert bpf.xdp_query(vb).mode is None  # nothing was there before: nothing after
    finally:
        rx.close()
    assert c.seen == 400 and c.no_next == c.passed and c.dropped_loss == 400 - c.passed
    assert len(got) == c.passed and len(set(got)) == len(got)  # the survivors, once each
    assert 0 < c.dropped_loss < 400


def test_xdp_fault_chains_to_an_xdp_frags_program(link):
    """A jumbo-capable (xdp.frags) resident needs the fault's xdp.frags variant: the kernel
    refuses to tail-call across the two kinds, and attach picks the one that fits."""
    ns_a, va, ns_b, vb = link
    rx = Receiver(ns_b, vb)
    with bpf.BpfObject.open("test_xdp_frags_pass") as obj:
        resident = obj.load().program("xdp_frags_pass")
        with netns.enter(ns_b):
            bpf.xdp_attach(vb, resident)
        try:
            with F.injected(ns_b, vb, F.Fault(loss_ppm=F.percent_to_ppm(10))):
                with bpf.Program.from_pin(os.path.join(F.fault_dir(ns_b, vb), "prog")) as ours:
                    assert ours.name == "mrc_fault_xdp_f"  # kernel names stop at 15 chars
                send_frames(ns_a, va, probe_frames(link, 200))
                c = F.read_stats(ns_b, vb)
                got = rx.seqs(c.passed)
            with netns.enter(ns_b):
                assert bpf.xdp_query(vb).prog_id == resident.id
        finally:
            rx.close()
            with netns.enter(ns_b):
                bpf.xdp_detach(vb)
    assert c.seen == 200 and c.no_next == 0  # every passed frame went through the tail call
    assert len(got) == c.passed == 200 - c.dropped_loss


@pytest.mark.parametrize("hook", ["tc-ingress", "tc-egress"])
def test_tc_duplicate(link, hook):
    ns_a, va, ns_b, vb = link
    ns, ifname = (ns_b, vb) if hook == "tc-ingress" else (ns_a, va)
    sent = 300
    rx = Receiver(ns_b, vb)
    try:
        with F.injected(ns, ifname, F.Fault(duplicate_ppm=F.percent_to_ppm(30)), hook=hook):
            send_frames(ns_a, va, probe_frames(link, sent))
            c = F.read_stats(ns, ifname, hook=hook)
            got = rx.seqs(sent + c.duplicated)
        assert "clsact" not in netns.run(["tc", "qdisc", "show", "dev", ifname], ns=ns).stdout.decode()
    finally:
        rx.close()
    assert c.seen == sent and c.passed + c.duplicated == sent and c.clone_failed == 0
    assert 0 < c.duplicated < sent
    assert len(got) == sent + c.duplicated  # each duplicate arrives as a second copy
    assert sorted(set(got)) == list(range(sent))
    assert sum(got.count(i) == 2 for i in range(sent)) == c.duplicated


def test_tc_egress_loss_and_blackhole(link):
    ns_a, va, ns_b, vb = link
    rx = Receiver(ns_b, vb)
    try:
        with F.injected(ns_a, va, F.Fault(loss_ppm=F.percent_to_ppm(25)), hook="tc-egress"):
            accepted = send_frames(ns_a, va, probe_frames(link, 400))
            lossy = F.read_stats(ns_a, va, hook="tc-egress")
            got = rx.seqs(400 - lossy.dropped_loss)
            F.configure(ns_a, va, F.Fault(blackhole=True), hook="tc-egress")
            assert send_frames(ns_a, va, probe_frames(link, 20)) == 0
            after = F.read_stats(ns_a, va, hook="tc-egress")
            assert rx.seqs(1, wait_s=0.3) == []  # nothing crosses a blackhole
    finally:
        rx.close()
    assert len(got) == accepted == 400 - lossy.dropped_loss and 0 < lossy.dropped_loss < 400
    assert after.dropped_blackhole == 20


@contextlib.contextmanager
def one_cpu():
    """Run the calling thread on one CPU: holding is per CPU, so the swap pattern is exact."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


@pytest.mark.parametrize("hook", ["tc-ingress", "tc-egress"])
def test_tc_reorder_swaps_each_held_packet_with_its_successor(link, hook):
    ns_a, va, ns_b, vb = link
    ns, ifname = (ns_b, vb) if hook == "tc-ingress" else (ns_a, va)
    rx = Receiver(ns_b, vb)
    try:
        with F.injected(ns, ifname, F.Fault(reorder_ppm=F.PPM_ONE), hook=hook), one_cpu():
            send_frames(ns_a, va, probe_frames(link, 9))
            got = rx.seqs(8)
            c = F.read_stats(ns, ifname, hook=hook)
    finally:
        rx.close()
    # Every other packet is held and sent just behind the next one; the 9th waits.
    assert got == [1, 0, 3, 2, 5, 4, 7, 6]
    assert (c.seen, c.reordered, c.passed, c.released, c.held_now) == (9, 5, 4, 4, 1)


def test_tc_ingress_reorder_under_batched_traffic(link, need_bpf):
    """Frames from the live-frames generator reach vb in NAPI batches (vb has an XDP
    program); some are held and arrive late, and none is lost or duplicated."""
    ns_a, va, ns_b, vb = link
    sent = 200
    frame = probe_frames(link, 1)[0]
    rx = Receiver(ns_b, vb)
    with bpf.BpfObject.open("test_xdp_seqgen") as gen, bpf.BpfObject.open("test_xdp_pass") as napi:
        gen.load(), napi.load()
        try:
            with netns.enter(ns_b):
                bpf.xdp_attach(vb, napi.program("xdp_pass"))
            with F.injected(ns_b, vb, F.Fault(reorder_ppm=F.percent_to_ppm(10)), hook="tc-ingress"):
                with netns.enter(ns_a):
                    gen.map("tx_port").update(0, bpf.ifindex_of(va))
                    gen.program("xdp_seqgen").test_run(
                        frame, repeat=sent, flags=bpf.BPF_F_TEST_XDP_LIVE_FRAMES,
                        ctx=bpf.XdpMd(data_end=len(frame), ingress_ifindex=1))
                c = F.read_stats(ns_b, vb, hook="tc-ingress")
                got = rx.seqs(sent - c.held_now)
        finally:
            rx.close()
            with netns.enter(ns_b):
                bpf.xdp_detach(vb)
    assert c.seen == sent and c.reordered + c.passed == sent and c.reordered > 0
    assert c.reordered == c.released + c.held_now and c.release_failed == 0
    assert len(got) == len(set(got)) == sent - c.held_now  # nothing lost or duplicated
    assert set(got) <= set(range(sent))
    assert any(got[i] < got[i - 1] for i in range(1, len(got)))  # some arrived late


@pytest.fixture
def udp_link(veth_pair):
    """The veth pair with 2001:db8::1 (va) and 2001:db8::2 (vb) and static neighbours."""
    ns_a, va, ns_b, vb = veth_pair
    for ns, ifname, addr, peer_ns, peer_if, peer_addr in (
            (ns_a, va, "2001:db8::1", ns_b, vb, "2001:db8::2"),
            (ns_b, vb, "2001:db8::2", ns_a, va, "2001:db8::1")):
        netns.run(["ip", "-6", "addr", "add", f"{addr}/64", "dev", ifname, "nodad"], ns=ns)
        peer_mac = mac_of(peer_ns, peer_if).hex(":")
        netns.run(["ip", "-6", "neigh", "replace", peer_addr, "lladdr", peer_mac, "dev", ifname,
                   "nud", "permanent"], ns=ns)
    yield veth_pair
    for ns in (ns_a, ns_b):
        F.detach_all(ns)


def udp_payload(seq):
    return struct.pack("!I", seq) + hashlib.sha256(struct.pack("!I", seq)).digest() * 8


def test_udp_datagrams_survive_loss_duplicate_and_reorder_intact(udp_link):
    """Real UDP sockets between two namespaces, all three faults at once on vb's ingress:
    every datagram that arrives is intact (UDP checksum and content), duplicates and
    losses match the counters, and the order is disturbed."""
    ns_a, va, ns_b, vb = udp_link
    sent = 600
    fault = F.Fault(loss_ppm=F.percent_to_ppm(10), duplicate_ppm=F.percent_to_ppm(10),
                    reorder_ppm=F.percent_to_ppm(10))
    with netns.enter(ns_b):
        rx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        rx.bind(("2001:db8::2", 9000))
    rx.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE
    got = []
    try:
        with F.injected(ns_b, vb, fault, hook="tc-ingress"):
            with netns.enter(ns_a), socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as tx:
                for seq in range(sent):
                    tx.sendto(udp_payload(seq), ("2001:db8::2", 9000))
            while select.select([rx], [], [], 1.0)[0]:
                got.append(rx.recv(4096))
            c = F.read_stats(ns_b, vb, hook="tc-ingress")
    finally:
        rx.close()
    seqs = [struct.unpack("!I", d[:4])[0] for d in got]
    assert all(d == udp_payload(q) for d, q in zip(got, seqs))  # no datagram was corrupted
    counts = {q: seqs.count(q) for q in set(seqs)}
    assert set(counts) <= set(range(sent)) and max(counts.values()) <= 2
    # The fault program also saw the kernel's own packets, so its counters bound ours.
    assert 0 < sum(n == 2 for n in counts.values()) <= c.duplicated
    assert 0 < sent - len(counts) <= c.dropped_loss + c.held_now
    assert any(seqs[i] < seqs[i - 1] for i in range(1, len(seqs)))
    assert c.seen == (c.passed + c.dropped_loss + c.dropped_blackhole + c.duplicated
                      + c.reordered + c.clone_failed)
    assert c.reordered == c.released + c.held_now + c.release_failed and c.release_failed == 0


def test_bad_requests_leave_nothing(link, resident):
    ns_a, va, ns_b, vb = link
    with pytest.raises(ValueError, match="need a tc hook"):
        F.attach(ns_b, vb, F.Fault(duplicate_ppm=10))
    with pytest.raises(ValueError, match="loss_ppm"):
        F.attach(ns_b, vb, F.Fault(loss_ppm=2_000_000))
    with pytest.raises(ValueError, match="0..100"):
        F.percent_to_ppm(120)
    with pytest.raises(ValueError, match="fault hook"):
        F.attach(ns_b, vb, hook="netem")
    with pytest.raises(bpf.BpfError, match="no interface 'nope0'"):
        F.attach(ns_b, "nope0")
    assert not os.path.exists(os.path.join(F.FAULT_PIN_ROOT, ns_b))
    with pytest.raises(F.MrcError, match="does not exist"):
        F.attach("mrcnonexistent", vb)
    with pytest.raises(F.MrcError, match="no xdp fault attached"):
        F.read_stats(ns_b, vb)
    F.attach(ns_b, vb)
    with pytest.raises(F.MrcError, match="already attached"):
        F.attach(ns_b, vb)
    assert [f for f in F.list_faults() if f[0] in (ns_a, ns_b)] == [(ns_b, vb, "xdp")]
    F.detach(ns_b, vb)
    with netns.enter(ns_b):
        assert bpf.xdp_query(vb).prog_id == resident.program("xdp_count").id
    assert F.detach(ns_b, vb) is False


def test_detach_leaves_a_program_that_replaced_ours_alone(link, resident):
    _, _, ns_b, vb = link
    F.attach(ns_b, vb)
    with bpf.BpfObject.open("test_xdp_pass") as other:
        other.load()
        with netns.enter(ns_b):
            bpf.xdp_attach(vb, other.program("xdp_pass"), replace=True)
        F.detach(ns_b, vb)
        with netns.enter(ns_b):
            assert bpf.xdp_query(vb).prog_id == other.program("xdp_pass").id


def test_pins_of_a_deleted_namespace_are_cleaned(make_netns, need_bpf):
    ns_a, ns_b = make_netns(), make_netns()
    netns.veth(ns_a, "va", ns_b, "vb")
    F.attach(ns_b, "vb", F.Fault(blackhole=True))
    netns.delete(ns_b)
    assert (ns_b, "vb", "xdp") in F.list_faults()
    assert F.detach_all(ns_b) == [(ns_b, "vb", "xdp")]
    assert not os.path.exists(os.path.join(F.FAULT_PIN_ROOT, ns_b))
