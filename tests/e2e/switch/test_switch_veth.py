"""The eBPF switch on real veths: a 3-port switch namespace and three host namespaces.

h0 sends MRC frames (AF_PACKET) through the switch to h2. h2 checks every frame byte for byte
and, through an End.DT6 decap route, receives the inner datagrams on a UDP socket: trimmed
packets (a drain rate of 1 packet/s makes the queue fill) must be accepted by its UDP stack
with their corrected lengths. Teardown leaves nothing attached or pinned, even on failure.
"""

import os
import socket

import pytest
from support.switch_afpacket import RawPort, is_mrc
from support.switch_frames import container, mrc_headers, mrc_frame, prefix48
from support.switch_harness import T0_0

from mrckit import netns
from mrckit.bpf.attach import xdp_query
from mrckit.bpf.fs import BPFFS
from mrckit.errors import MrcError
from mrckit.switch.ebpf_target import MAP_TYPES, EbpfSwitch, SwitchTables, pinned_switches, switch_pin_dir
from mrckit.topology.entries import TableEntry
from mrckit.wire.constants import DropReason, Dscp, Opcode
from mrckit.wire.pipeline import DA_PREFIX_FIELD, EGRESS_PORT_FIELD, THRESHOLD_NONE

DOWN = [0x0C00, 0x0C01, 0x0C02]
H2_NIC = "2001:db8:100:0::3"
UDP_NO_CHECK6_RX = 102  # linux/udp.h: RoCEv2 sends UDP checksum 0 (design section 3.1)
MTU = 1540  # 1500 + the 40-byte outer header (design section 9)
PAYLOAD = 200
SENT = 10
TRIM_THRESHOLD = 4


def host_mac(i):
    return f"02:00:00:00:0f:{i:02x}"


def port_mac(i):
    return f"02:00:00:00:0a:{i:02x}"


def mac_int(mac):
    return int(mac.replace(":", ""), 16)


@pytest.fixture
def fabric(make_netns, request):
    """Namespaces: switch ``sw`` with ports p0..p2, hosts h0..h2 with eth0; hosts have GRO on
    (NAPI for redirects into their veth, design section 9) and TX checksum offload off."""
    sw = make_netns()
    hosts = [make_netns() for _ in range(3)]
    for i, host in enumerate(hosts):
        netns.veth(sw, f"p{i}", host, "eth0", mtu=MTU)
        netns.run(["ip", "link", "set", f"p{i}", "address", port_mac(i)], ns=sw)
        netns.run(["ip", "link", "set", "eth0", "address", host_mac(i)], ns=host)
        netns.run(["ethtool", "-K", "eth0", "gro", "on"], ns=host)
    name = f"{sw}-s"
    yield sw, hosts, name
    EbpfSwitch(name, sw, {}).teardown()  # pins of a failed test go too


def switch_entries():
    """The switch's tables: uN for T0_0, one host-facing port per DOWN uSID; port 2 trims from
    a depth of TRIM_THRESHOLD packets."""
    entries = [TableEntry("my_usid", {DA_PREFIX_FIELD: prefix48(T0_0)}, "usid_un", {})]
    for port, usid in enumerate(DOWN):
        entries.append(TableEntry("usid_fib", {DA_PREFIX_FIELD: prefix48(usid)}, "set_egress", {"port": port}))
        entries.append(TableEntry("port_config", {EGRESS_PORT_FIELD: port}, "set_port", {
            "src_mac": mac_int(port_mac(port)), "dst_mac": mac_int(host_mac(port)), "faces_host": 1,
            "trim_threshold": TRIM_THRESHOLD if port == 2 else THRESHOLD_NONE, "ecn_threshold": THRESHOLD_NONE}))
    return entries


def udp_receiver(host):
    """h2 decapsulates its DOWN container (End.DT6, looking the inner DA up in the local table
    where H2_NIC lives) and listens on [H2_NIC]:4791. Skips when the kernel has no seg6local
    (an LWT encapsulation a kernel may be built without)."""
    netns.run(["ip", "-6", "addr", "add", f"{H2_NIC}/128", "dev", "lo", "nodad"], ns=host)
    try:
        netns.run(["ip", "-6", "route", "add", f"fcbb:bb00:{DOWN[2]:x}::/48", "encap", "seg6local",
                   "action", "End.DT6", "table", "255", "dev", "eth0"], ns=host)
    except MrcError as exc:
        pytest.skip(f"the kernel refuses seg6local End.DT6, the receiver's decap: {str(exc).rsplit('eth0: ', 1)[-1]}")
    with netns.enter(host):
        sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_UDP, UDP_NO_CHECK6_RX, 1)
    sock.bind((H2_NIC, 4791))
    sock.settimeout(2.0)
    return sock


def recv_all(sock, count):
    out = []
    try:
        while len(out) < count:
            out.append(sock.recv(4096))
    except socket.timeout:
        pass
    return out


def burst(fabric, sock=None):
    """SENT frames from h0 through the switch to h2, port 2 draining 1 packet/s so that it
    trims: the frames h2 got, the datagrams ``sock`` got (if given), and port 2's trims."""
    sw, hosts, name = fabric
    with EbpfSwitch(name, sw, {0: "p0", 1: "p1", 2: "p2"}, entries=switch_entries()) as switch:
        assert set(switch.attach_modes.values()) == {"native"}
        assert sorted(os.listdir(switch_pin_dir(name))) == sorted(MAP_TYPES)
        switch.tables.queues.set_rate(2, 1)  # a low drain rate: the queue fills
        frames = [mrc_frame(container(T0_0, DOWN[2]), opcode=Opcode.WRITE_ONLY_IMM, payload=PAYLOAD,
                            src=host_mac(0), dst=port_mac(0), inner_dst=H2_NIC, sport=0xC000 + i, psn=i)
                  for i in range(SENT)]
        with RawPort(hosts[2], "eth0") as rx, RawPort(hosts[0], "eth0") as tx:
            for frame in frames:
                tx.send(frame)
            got = rx.recv(is_mrc, count=SENT, timeout=3.0)
        datagrams = recv_all(sock, SENT) if sock else []
        tables = switch.tables
        # h0's own IPv6 chatter (MLD, RS) also arrives, and is dropped as no_route.
        assert tables.counters.read("rx_port", 0)[0] - tables.counters.read("drop_port", 0)[0] == SENT
        assert tables.counters.read("tx_port", 2)[0] == SENT
        trimmed_count = tables.counters.read("trim_port", 2)[0]
    if sock:
        sock.close()
    # Nothing left attached or pinned.
    assert name not in pinned_switches()
    with netns.enter(sw):
        assert all(xdp_query(f"p{i}").mode is None for i in range(3))
    return got, datagrams, trimmed_count


def test_switch_forwards_and_trims_on_veth(fabric):
    got, _, trimmed_count = burst(fabric)
    assert len(got) == SENT
    whole = trimmed = 0
    for frame in got:
        i = int.from_bytes(frame[94:96], "big") - 0xC000
        common = dict(opcode=Opcode.WRITE_ONLY_IMM, hlim=63, src=port_mac(2), dst=host_mac(2),
                      inner_dst=H2_NIC, sport=0xC000 + i, psn=i)
        if frame == mrc_frame(container(DOWN[2]), payload=PAYLOAD, **common):
            whole += 1
        else:
            assert frame == mrc_frame(container(DOWN[2]), payload=0, icrc=False,
                                      dscp=Dscp.TRIMMED_LASTHOP, **common), i
            assert len(frame) == 138
            trimmed += 1
    # Depth counting the packet reaches the threshold at the 4th packet; 1 packet/s drains
    # at most a few in the time the 10 frames take.
    assert whole >= TRIM_THRESHOLD - 1 and trimmed >= 1 and trimmed == trimmed_count


def test_the_hosts_udp_stack_accepts_whole_and_trimmed_datagrams(fabric):
    """h2's UDP stack accepts every datagram, the trimmed ones with their corrected lengths."""
    got, datagrams, trimmed = burst(fabric, udp_receiver(fabric[1][2]))
    assert len(got) == len(datagrams) == SENT
    whole = SENT - trimmed
    headers = mrc_headers(Opcode.WRITE_ONLY_IMM, psn=0)
    assert sorted(len(d) for d in datagrams) == [len(headers)] * trimmed + [len(headers) + PAYLOAD + 4] * whole
    for d in datagrams:
        psn = d[11]
        assert d[:len(headers)] == mrc_headers(Opcode.WRITE_ONLY_IMM, psn=psn)


def test_teardown_after_a_failure_leaves_nothing(fabric):
    sw, hosts, name = fabric
    with pytest.raises(RuntimeError):
        with EbpfSwitch(name, sw, {0: "p0", 1: "p1"}):
            raise RuntimeError("a test failing inside the switch's lifetime")
    assert name not in pinned_switches()
    with netns.enter(sw):
        assert xdp_query("p0").mode is None and xdp_query("p1").mode is None


def test_failed_setup_is_undone(fabric):
    sw, hosts, name = fabric
    with pytest.raises(MrcError, match="nope"):
        EbpfSwitch(name, sw, {0: "p0", 1: "nope"}).setup()
    assert name not in pinned_switches()
    with netns.enter(sw):
        assert xdp_query("p0").mode is None


def test_setup_reuses_pins_and_teardown_is_idempotent(fabric):
    sw, hosts, name = fabric
    first = EbpfSwitch(name, sw, {0: "p0"}).setup()
    first.tables.direct.write(TableEntry.exact("usid_fib", prefix48(DOWN[1]), "set_egress", {"port": 1}))
    again = EbpfSwitch(name, sw, {0: "p0"}).setup()  # a restarted manager keeps the tables
    assert [e.key for e in again.tables.direct.read("usid_fib")] == [prefix48(DOWN[1])]
    pinned = SwitchTables.open_pinned(name)
    assert pinned.direct.read("usid_fib") == again.tables.direct.read("usid_fib")
    pinned.close()
    again.teardown()
    again.teardown()
    first.teardown()
    assert not os.path.exists(switch_pin_dir(name))
    with pytest.raises(MrcError, match="not set up"):
        SwitchTables.open_pinned(name)
    netns.delete(sw)
    EbpfSwitch(name, sw, {0: "p0"}).teardown()  # the namespace is gone: still quiet
    assert os.path.isdir(BPFFS)


def test_pins_of_another_layout_are_refused_and_left_as_they_are(fabric):
    """A switch whose pin folder holds another version's maps (here: port_config where
    port_state should be) is neither reused nor torn down by a set-up: one line says why."""
    sw, hosts, name = fabric
    first = EbpfSwitch(name, sw, {0: "p0"}).setup()
    folder = switch_pin_dir(name)
    os.rename(os.path.join(folder, "port_state"), os.path.join(folder, "port_config"))
    pins = sorted(os.listdir(folder))
    with netns.enter(sw):
        attached = xdp_query("p0").prog_id
    stale = r"not this mrckit's \(unknown port_config; missing port_state\).*tear it down"
    with pytest.raises(MrcError, match=stale):
        EbpfSwitch(name, sw, {0: "p0"}).setup()
    with pytest.raises(MrcError, match=stale):
        SwitchTables.open_pinned(name)
    assert sorted(os.listdir(folder)) == pins
    with netns.enter(sw):
        assert xdp_query("p0").prog_id == attached != 0
    first.teardown()
    assert name not in pinned_switches()


def test_frame_over_the_egress_mtu_is_dropped_and_counted_not_counted_sent(fabric):
    """Port 1 and h1 have a smaller MTU than the rest. A veth would drop the oversize frame in
    its transmit path, after the switch counted it in tx_port; the switch drops it as
    `oversize` instead (bpf_check_mtu on the DEVMAP's ifindex), and the frame behind it, which
    fits, arrives."""
    sw, hosts, name = fabric
    small = 1280
    # h1's own IPv6 (MLD reports, DAD) would reach port 1 and count in drop_port[1] as no_route;
    # silenced before the switch is attached, so drop_port[1] counts only the oversize frame.
    netns.run(["sysctl", "-qw", "net.ipv6.conf.eth0.disable_ipv6=1"], ns=hosts[1])
    netns.run(["ip", "link", "set", "p1", "mtu", str(small)], ns=sw)
    netns.run(["ip", "link", "set", "eth0", "mtu", str(small)], ns=hosts[1])
    hdrs = 40 + 40 + 8 + len(mrc_headers(Opcode.WRITE_ONLY)) + 4  # outer to ICRC, no payload

    def frame(l3_len, psn):
        return mrc_frame(container(T0_0, DOWN[1]), payload=l3_len - hdrs, src=host_mac(0), dst=port_mac(0), psn=psn)

    too_big, fits = frame(small + 1, 1), frame(small, 2)
    assert len(fits) == 14 + small
    with EbpfSwitch(name, sw, {0: "p0", 1: "p1", 2: "p2"}, entries=switch_entries()) as switch:
        with RawPort(hosts[1], "eth0") as rx, RawPort(hosts[0], "eth0") as tx:
            tx.send(too_big)
            tx.send(fits)  # behind it on the same queue: once it is here, too_big was decided
            got = rx.recv(is_mrc, count=1, timeout=10.0)
        tables = switch.tables
        assert [len(f) for f in got] == [len(fits)]
        assert int.from_bytes(got[0][111:114], "big") == 2  # BTH PSN (bytes 9-11 after UDP): `fits`
        assert tables.counters.read("tx_port", 1) == (1, len(fits))
        assert tables.counters.read("drop_port", 1) == (1, len(too_big))
        assert tables.counters.read("drop_reason", DropReason.OVERSIZE) == (1, len(too_big))
