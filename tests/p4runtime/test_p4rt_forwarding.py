"""Entries written over gRPC change forwarding: frames through the real XDP program
(BPF_PROG_TEST_RUN) after INSERT, MODIFY, DELETE and default-action writes, with the counters
read back as P4Runtime counter entries."""

import pytest
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from mrckit.wire.pipeline import THRESHOLD_NONE

from support import p4rt
from support.p4rt_frames import SW_MAC, XDP_DROP, XDP_REDIRECT, frame
from support.p4rt_harness import load_p4info

NO_ROUTE, CONGESTION = 2, 3
FIB = 0xFCBBBB001001  # locator fcbb:bb00, uSID 0x1001
MY = 0xFCBBBB000101
PORT2 = dict(src_mac=0x0200000000A2, dst_mac=0x0200000000B2, faces_host=0,
             trim_threshold=THRESHOLD_NONE, ecn_threshold=THRESHOLD_NONE)
NO_TRIM_DSCP = 26


@pytest.fixture
def p4info(client, switch):
    info = load_p4info()
    client.set_pipeline(info)
    switch.wire_ports([2, 3, 4], ingress=0)
    return info


def counter(client, p4info, name, index):
    (c,) = client.read(p4rt.counter(p4info, name, index))
    return c.counter_entry.data.packet_count


def write(client, p4info, kind, table, key, action=None, default=False, **params):
    client.write(p4rt.update(kind, p4rt.entry(p4info, table, key, action, default=default, **params)))


def test_fib_insert_modify_delete_and_default_change_forwarding(client, switch, p4info):
    pkt = frame("fcbb:bb00:1001::")
    verdict, _ = switch.run(pkt)
    assert verdict == XDP_DROP and counter(client, p4info, "drop_reason", NO_ROUTE) == 1

    write(client, p4info, "INSERT", "port_config", 2, "set_port", **PORT2)
    write(client, p4info, "INSERT", "usid_fib", FIB, "set_egress", port=2)
    verdict, out = switch.run(pkt)
    assert verdict == XDP_REDIRECT
    assert Ether(out).src == "02:00:00:00:00:a2" and Ether(out).dst == "02:00:00:00:00:b2"
    assert Ether(out)[IPv6].hlim == 63
    assert counter(client, p4info, "tx_port", 2) == 1

    write(client, p4info, "MODIFY", "usid_fib", FIB, "set_egress", port=3)
    verdict, out = switch.run(pkt)
    assert verdict == XDP_REDIRECT and Ether(out).dst == SW_MAC  # port 3 has no port_config entry
    assert counter(client, p4info, "tx_port", 3) == 1 and counter(client, p4info, "tx_port", 2) == 1

    write(client, p4info, "MODIFY", "usid_fib", FIB, "drop")
    assert switch.run(pkt)[0] == XDP_DROP
    write(client, p4info, "DELETE", "usid_fib", FIB)
    assert switch.run(pkt)[0] == XDP_DROP
    assert counter(client, p4info, "drop_port", 0) == 3  # the first miss, the drop action, the delete

    write(client, p4info, "MODIFY", "usid_fib", None, "set_egress", default=True, port=4)
    assert switch.run(pkt)[0] == XDP_REDIRECT and counter(client, p4info, "tx_port", 4) == 1
    assert counter(client, p4info, "rx_port", 0) == 6


def test_my_usid_insert_shifts_and_delete_stops_shifting(client, switch, p4info):
    write(client, p4info, "INSERT", "usid_fib", FIB, "set_egress", port=2)
    pkt = frame("fcbb:bb00:101:1001::")
    assert switch.run(pkt)[0] == XDP_DROP  # no my_usid entry: 0x0101 is looked up and missed

    write(client, p4info, "INSERT", "my_usid", MY, "usid_un")
    verdict, out = switch.run(pkt)
    assert verdict == XDP_REDIRECT and Ether(out)[IPv6].dst == "fcbb:bb00:1001::"

    write(client, p4info, "MODIFY", "my_usid", MY, "NoAction")
    assert switch.run(pkt)[0] == XDP_DROP
    write(client, p4info, "MODIFY", "my_usid", MY, "usid_un")
    assert switch.run(pkt)[0] == XDP_REDIRECT
    write(client, p4info, "DELETE", "my_usid", MY)
    assert switch.run(pkt)[0] == XDP_DROP


def test_port_config_thresholds_change_forwarding(client, switch, p4info):
    write(client, p4info, "INSERT", "usid_fib", FIB, "set_egress", port=2)
    pkt = frame("fcbb:bb00:1001::", dscp=NO_TRIM_DSCP)
    assert switch.run(pkt)[0] == XDP_REDIRECT
    write(client, p4info, "INSERT", "port_config", 2, "set_port", **{**PORT2, "trim_threshold": 0})
    assert switch.run(pkt)[0] == XDP_DROP  # always congested: a NO_TRIM packet is dropped
    assert counter(client, p4info, "drop_reason", CONGESTION) == 1
    write(client, p4info, "MODIFY", "port_config", 2, "set_port", **PORT2)
    assert switch.run(pkt)[0] == XDP_REDIRECT
    write(client, p4info, "DELETE", "port_config", 2)
    verdict, out = switch.run(pkt)
    assert verdict == XDP_REDIRECT and Ether(out).dst == SW_MAC
