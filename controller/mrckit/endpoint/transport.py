"""The endpoint's UDP socket (design sections 3.1 and 6).

One socket bound to [NIC address]:4791. Sends set the IPv6 traffic class per packet through an
``IPV6_TCLASS`` control message; receives read the traffic class (``IPV6_RECVTCLASS``) and the
flow label (``IPV6_FLOWINFO``), which carry the DSCP/ECN and EV bits 15..0. UDP checksums are
off both ways (``UDP_NO_CHECK6_TX/RX``): integrity is the ICRC.
"""

from __future__ import annotations

import errno
import socket
import struct

from mrckit.wire.constants import IPV6_FLOW_LABEL_MASK, UDP_PORT_ROCEV2

SOL_UDP = 17
UDP_NO_CHECK6_TX = 101
UDP_NO_CHECK6_RX = 102
IPV6_FLOWINFO = 11  # <linux/in6.h>: enables, and names, the received flowinfo cmsg
IPV6_TCLASS = socket.IPV6_TCLASS
IPV6_RECVTCLASS = socket.IPV6_RECVTCLASS
SOCKET_BUFFER_BYTES = 32 << 20
_INT = struct.Struct("=i")
_BE32 = struct.Struct(">I")
_ANC_SIZE = socket.CMSG_SPACE(4) * 4


class UdpTransport:
    """A UDP socket on ``local_addr`` (IPv6 text) and ``port``.

    Raises:
        OSError: the address is not configured here or the port is in use.
    """

    def __init__(self, local_addr: str, port: int = UDP_PORT_ROCEV2, *, peer_port: int = UDP_PORT_ROCEV2):
        self.local_addr = local_addr
        self.peer_port = peer_port
        self.sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        try:
            self._configure()
            self.sock.bind((local_addr, port))
        except OSError:
            self.sock.close()
            raise
        self._cmsg: dict[int, list] = {}

    def _configure(self) -> None:
        s = self.sock
        s.setsockopt(SOL_UDP, UDP_NO_CHECK6_TX, 1)
        s.setsockopt(SOL_UDP, UDP_NO_CHECK6_RX, 1)
        s.setsockopt(socket.IPPROTO_IPV6, IPV6_RECVTCLASS, 1)
        s.setsockopt(socket.IPPROTO_IPV6, IPV6_FLOWINFO, 1)
        # Never fragment: the host dataplane cannot encapsulate fragments (design 3.1); a packet
        # too big for the interface MTU fails at once with EMSGSIZE instead.
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_DONTFRAG, 1)
        for force, plain in ((33, socket.SO_RCVBUF), (32, socket.SO_SNDBUF)):  # SO_*BUFFORCE
            try:
                s.setsockopt(socket.SOL_SOCKET, force, SOCKET_BUFFER_BYTES)
            except PermissionError:
                s.setsockopt(socket.SOL_SOCKET, plain, SOCKET_BUFFER_BYTES)

    def fileno(self) -> int:
        """The socket's file descriptor (for poll)."""
        return self.sock.fileno()

    def send(self, parts: list, tclass: int, peer: str) -> None:
        """Send the concatenation of ``parts`` to [peer]:4791 with IPv6 traffic class ``tclass``.
        Blocks while the send buffer is full; a refused packet counts as lost (ENOBUFS, an
        unreachable peer...).

        Raises:
            OSError: EMSGSIZE with the sizes, when the packet does not fit the interface MTU;
                any other unexpected socket error.
        """
        cmsg = self._cmsg.get(tclass)
        if cmsg is None:
            cmsg = self._cmsg[tclass] = [(socket.IPPROTO_IPV6, IPV6_TCLASS, _INT.pack(tclass))]
        try:
            self.sock.sendmsg(parts, cmsg, 0, (peer, self.peer_port))
        except OSError as exc:
            if exc.errno == errno.EMSGSIZE:
                size = sum(len(p) for p in parts) + 48
                raise OSError(errno.EMSGSIZE, f"a {size} B packet (IPv6 + UDP + MRC) does not fit the MTU of "
                              f"the interface toward {peer}: raise that MTU or lower the payload per packet") from None
            if exc.errno not in (errno.ENOBUFS, errno.EAGAIN, errno.ECONNREFUSED, errno.EHOSTUNREACH,
                                 errno.ENETUNREACH):
                raise

    def recv_into(self, buf) -> tuple[int, int, int, int, str] | None:
        """Receive one datagram into ``buf`` without blocking.

        Returns (length, traffic class, flow label, UDP source port, peer address), or None when
        nothing is queued."""
        try:
            n, anc, _flags, addr = self.sock.recvmsg_into([buf], _ANC_SIZE, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return None
        except ConnectionRefusedError:
            return None
        tclass = flow = 0
        for level, kind, data in anc:
            if level == socket.IPPROTO_IPV6:
                if kind == IPV6_TCLASS and len(data) >= 4:
                    tclass = _INT.unpack_from(data)[0]
                elif kind == IPV6_FLOWINFO and len(data) >= 4:
                    flow = _BE32.unpack_from(data)[0] & IPV6_FLOW_LABEL_MASK
        return n, tclass, flow, addr[1], addr[0]

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()
