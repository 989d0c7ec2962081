"""EV-hash mode: members, groups and ipv6_fib entries written over gRPC change forwarding. Frames
through the real XDP program (BPF_PROG_TEST_RUN) leave on the port of the member that
``mrckit.wire.ecmp`` predicts for their EV, after every INSERT, MODIFY and DELETE."""

import collections

import pytest
from scapy.layers.l2 import Ether

from support import p4rt
from support.p4rt_frames import DST, XDP_DROP, XDP_REDIRECT, ecmp_frame as frame
from support.p4rt_harness import load_p4info

from mrckit.wire.ecmp import ecmp_member, ev_member
from mrckit.wire.pipeline import THRESHOLD_NONE

NO_ROUTE = 2
PORTS = (1, 2, 3, 4)
U = p4rt.entity_update
EVS = [(0x9E3779B9 * i) & 0xFFFFFFFF for i in range(1, 41)]  # 40 EVs spread over 32 bits


def port_mac(port: int) -> int:
    return 0x020000000A00 + port


@pytest.fixture
def p4info(client, switch):
    info = load_p4info()
    client.set_pipeline(info)
    switch.wire_ports(PORTS, ingress=0)
    infinite = dict(dst_mac=0x0200000000BB, faces_host=0, trim_threshold=THRESHOLD_NONE, ecn_threshold=THRESHOLD_NONE)
    client.write(*[p4rt.update("INSERT", p4rt.entry(info, "port_config", p, "set_port", src_mac=port_mac(p), **infinite))
                   for p in PORTS])
    # the controller's scheme: member id = port + 1, set_egress(port), created in ascending order
    client.write(*[U("INSERT", p4rt.member(info, p + 1, "set_egress", port=p)) for p in PORTS])
    return info


def egress_port(switch, data: bytes) -> int | None:
    """The port a frame left on (its source MAC is the port's), or None if dropped."""
    verdict, out = switch.run(data)
    if verdict == XDP_DROP:
        return None
    assert verdict == XDP_REDIRECT
    return int(Ether(out).src.replace(":", ""), 16) - 0x020000000A00


def tx_counts(client, p4info) -> dict:
    return {p: client.read(p4rt.counter(p4info, "tx_port", p))[0].counter_entry.data.packet_count for p in PORTS}


def test_group_route_sends_each_ev_to_the_predicted_member(client, switch, p4info):
    members = [p + 1 for p in PORTS]
    client.write(U("INSERT", p4rt.group(p4info, 7, members)),
                 U("INSERT", p4rt.route(p4info, "2001:db8:100:1::/64", group_id=7)))
    taken = collections.Counter()
    for ev in EVS:
        port = egress_port(switch, frame(ev))
        assert port is not None and port + 1 == ev_member(members, ev), hex(ev)
        taken[port] += 1
    assert len(taken) == len(PORTS)  # the EVs spread over every member
    assert tx_counts(client, p4info) == {p: taken[p] for p in PORTS}

    # without a UDP header the selector hashes the flow label alone
    for ev in EVS[:10]:
        assert egress_port(switch, frame(ev, udp=False)) + 1 == ecmp_member(members, ev & 0xFFFF, None)

    # MODIFY the group: the EVs rehash over the members left
    client.write(U("MODIFY", p4rt.group(p4info, 7, [5, 3])))
    for ev in EVS:
        assert egress_port(switch, frame(ev)) + 1 == ev_member([3, 5], ev)


def test_member_routes_longest_prefix_modify_delete_and_fall_through(client, switch, p4info):
    client.write(U("INSERT", p4rt.group(p4info, 7, [2, 3])),
                 U("INSERT", p4rt.route(p4info, "2001:db8:100::/48", group_id=7)),
                 U("INSERT", p4rt.route(p4info, DST + "/128", member_id=5)))
    assert {egress_port(switch, frame(ev)) for ev in EVS} == {4}  # the /128 wins over the /48
    other = "2001:db8:100:7::9"
    assert {egress_port(switch, frame(ev, other)) for ev in EVS} == {1, 2}  # the /48: the group

    client.write(U("MODIFY", p4rt.member(p4info, 5, "set_egress", port=3)))
    assert egress_port(switch, frame(EVS[0])) == 3
    client.write(U("MODIFY", p4rt.route(p4info, DST + "/128", group_id=7)))
    assert egress_port(switch, frame(EVS[0])) + 1 == ev_member([2, 3], EVS[0])
    client.write(U("INSERT", p4rt.member(p4info, 9, "drop")),
                 U("MODIFY", p4rt.route(p4info, DST + "/128", member_id=9)))
    assert egress_port(switch, frame(EVS[0])) is None  # drop(): counted as no_route
    (c,) = client.read(p4rt.counter(p4info, "drop_reason", NO_ROUTE))
    assert c.counter_entry.data.packet_count == 1

    client.write(U("DELETE", p4rt.route(p4info, DST + "/128")))
    assert egress_port(switch, frame(EVS[0])) + 1 == ev_member([2, 3], EVS[0])  # the /48 again
    client.write(U("DELETE", p4rt.route(p4info, "2001:db8:100::/48")))
    # an ipv6_fib miss goes on to the uN tables, where 2001:db8:100:: is no uSID: no_route
    assert egress_port(switch, frame(EVS[0])) is None
    (c,) = client.read(p4rt.counter(p4info, "drop_reason", NO_ROUTE))
    assert c.counter_entry.data.packet_count == 2


def test_default_route_catches_every_destination(client, switch, p4info):
    client.write(U("INSERT", p4rt.route(p4info, None, member_id=4)))
    assert egress_port(switch, frame(EVS[0], "2001:db8:999::1")) == 3
    assert egress_port(switch, frame(EVS[1], "fcbb:bb00:1::")) == 3  # ipv6_fib comes before uN
