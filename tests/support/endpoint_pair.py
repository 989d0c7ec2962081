"""Addresses and test sockets of the endpoint tests' netns pair (a uniquely named module, so
that test files can import it without clashing with other folders' conftest modules)."""

import contextlib
import socket
import struct

from mrckit.wire.layers import MrcBTH

ADDR_A = "2001:db8:100:1::1"
ADDR_B = "2001:db8:100:1::2"
LINK_MTU = 3500
"""Fits a 2048 B payload with every header (design 3.1), under the 3506 B XDP limit."""


IPV6_FLOWLABEL_MGR, IPV6_FLOWINFO_SEND, IPV6_FLOWINFO = 32, 33, 11


def make_test_sockets(label: int):
    """A sender on [A]:0x1234 that sends with flow label ``label``, and a receiver on [A]:4791."""
    tx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    tx.bind((ADDR_A, 0x1234))
    req = struct.pack("=16sIBBHHHI", socket.inet_pton(socket.AF_INET6, ADDR_B), socket.htonl(label),
                      0, 1, 1, 0, 0, 0)  # IPV6_FL_A_GET, IPV6_FL_S_EXCL, IPV6_FL_F_CREATE
    tx.setsockopt(socket.IPPROTO_IPV6, IPV6_FLOWLABEL_MGR, req)
    tx.setsockopt(socket.IPPROTO_IPV6, IPV6_FLOWINFO_SEND, 1)
    rx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    rx.bind((ADDR_A, 4791))
    rx.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVTCLASS, 1)
    rx.setsockopt(17, 102, 1)  # UDP_NO_CHECK6_RX: the endpoint sends UDP checksum 0
    rx.settimeout(5)
    return tx, rx


def send_from_test(tx, payload: bytes, tclass: int, label: int):
    """Send one UDP payload to [B]:4791 with this traffic class and flow label."""
    tx.sendmsg([payload], [(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, struct.pack("=i", tclass))], 0,
               (ADDR_B, 4791, label, 0))


def recv_reply(rx):
    """The next reply at [A]:4791, dissected, and its traffic class."""
    data, anc, _f, _addr = rx.recvmsg(4096, 64)
    tclass = next(struct.unpack("=i", d)[0] for lvl, kind, d in anc if kind == socket.IPV6_TCLASS)
    return MrcBTH(data), tclass


@contextlib.contextmanager
def responder_with_test_sockets(pair, label: int, impl: str = "python"):
    """Endpoint B (``impl`` python or native) in ``pair.ns_b`` with a 64 KiB region (rkey
    0x1000) and QP 0x200 <-> 0x100, plus :func:`make_test_sockets` opened in ``pair.ns_a``.
    Yields (endpoint, region, tx, rx); everything is closed on exit."""
    from mrckit import netns
    from mrckit.endpoint import Endpoint
    from mrckit.endpoint.native import NativeEndpoint

    with netns.enter(pair.ns_b):
        ep_b = (NativeEndpoint if impl == "native" else Endpoint)(ADDR_B)
    try:
        mr = ep_b.register_mr(1 << 16, rkey=0x1000)
        ep_b.create_qp(ADDR_A, qpn=0x200, remote_qpn=0x100)
        with netns.enter(pair.ns_a):
            tx, rx = make_test_sockets(label)
        with tx, rx:
            yield ep_b, mr, tx, rx
    finally:
        ep_b.close()
