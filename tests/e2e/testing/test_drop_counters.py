"""tests/support/drops.py sees a real drop: a UDP datagram with a bad checksum, sent between two
namespaces, shows as the receiver's Udp6InCsumErrors, and a good one moves no loss counter."""

import socket
import struct

import pytest
from support import drops
from support.host_helpers import udp_socket

from mrckit import netns

pytestmark = pytest.mark.root
A, B = "2001:db8:77::1", "2001:db8:77::2"


def _udp(payload: bytes, checksum: int) -> bytes:
    return struct.pack("!HHHH", 4000, 4791, 8 + len(payload), checksum) + payload


def test_a_bad_udp_checksum_is_reported_and_a_good_datagram_is_not(make_netns):
    ns = {"a": make_netns(), "b": make_netns()}
    netns.veth(ns["a"], "va", ns["b"], "vb")
    for node, ifname, addr in (("a", "va", A), ("b", "vb", B)):
        netns.run(["ip", "-6", "addr", "add", f"{addr}/64", "dev", ifname, "nodad"], ns=ns[node])
    rx = udp_socket(ns["b"], B, 4791)
    with netns.enter(ns["a"]):
        tx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        raw = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_UDP)
    try:
        before = drops.snapshot(ns)
        tx.sendto(b"good", (B, 4791))
        assert rx.recvfrom(64)[0] == b"good"
        after_good = drops.snapshot(ns)
        assert drops.grown(before, after_good) == {}
        raw.sendto(_udp(b"bad!", 0x1234), (B, 0))  # the kernel sends a raw UDP header as given
        # One veth queue keeps the order: once the next datagram is in, the bad one was judged.
        tx.sendto(b"next", (B, 4791))
        assert rx.recvfrom(64)[0] == b"next"
        grown = drops.grown(after_good, drops.snapshot(ns))
        assert grown["b Udp6InCsumErrors"] == 1 and grown["b Udp6InErrors"] == 1
        assert not [k for k in grown if k.startswith("a ")]
    finally:
        tx.close(), raw.close(), rx.close()
