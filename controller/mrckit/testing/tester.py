"""The tester: AF_PACKET sockets on the tester's end of every switch port, which send frames
into the switch and capture what it sends out (never our own outgoing frames)."""

from __future__ import annotations

import contextlib
import select
import socket
import time

from .. import netns

ETH_P_ALL = 0x0003
RCVBUF_BYTES = 64 << 20
"""Bytes of receive buffer per socket: a paced burst of thousands of frames waits there."""


def is_noise(frame: bytes) -> bool:
    """IPv6 to a multicast destination (ff00::/8: neighbour discovery, MLD) that a kernel may
    send on its own; Ethernet 14 B, then the IPv6 destination's first byte at offset 38."""
    return len(frame) >= 54 and frame[12:14] == b"\x86\xdd" and frame[38] == 0xFF


class Tester:
    """One raw socket per switch port, bound to the tester's interface in namespace ``ns``
    (None: this namespace).

    ``rcvbuf``: bytes of receive buffer per socket (SO_RCVBUFFORCE, needs root).
    """

    __test__ = False   # a helper, not a pytest test class

    def __init__(self, ns: str | None, ifaces: dict[int, str], *, rcvbuf: int = RCVBUF_BYTES):
        self.socks: dict[int, socket.socket] = {}
        with netns.enter(ns) if ns is not None else contextlib.nullcontext():
            try:
                for port, iface in ifaces.items():
                    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                    self.socks[port] = sock
                    netns.set_receive_buffer(sock, rcvbuf)
                    sock.bind((iface, 0))
                    sock.setblocking(False)
            except BaseException:
                self.close()
                raise

    def send(self, port: int, frame: bytes) -> None:
        """Send ``frame`` (Ethernet onwards) into switch ``port``."""
        self.socks[port].send(frame)

    def collect(self, window: float) -> dict[int, list[bytes]]:
        """Frames received on each port during ``window`` seconds (one wait for all ports)."""
        got: dict[int, list[bytes]] = {p: [] for p in self.socks}
        by_fd = {s.fileno(): p for p, s in self.socks.items()}
        deadline = time.monotonic() + window
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select(list(self.socks.values()), [], [], left)
            for sock in ready:
                self._read_all(sock, got[by_fd[sock.fileno()]])
        return got

    @staticmethod
    def _read_all(sock: socket.socket, into: list[bytes]) -> None:
        while True:
            try:
                frame, addr = sock.recvfrom(65536)
            except BlockingIOError:
                return
            if addr[2] != socket.PACKET_OUTGOING:
                into.append(frame)

    def poll(self, into: dict[int, list[bytes]], timeout: float = 0.0) -> None:
        """Append to ``into[port]`` every frame already received, waiting at most ``timeout`` s
        for the first one."""
        ready, _, _ = select.select(list(self.socks.values()), [], [], timeout)
        by_fd = {s.fileno(): p for p, s in self.socks.items()}
        for sock in ready:
            self._read_all(sock, into.setdefault(by_fd[sock.fileno()], []))

    def drain(self) -> None:
        """Throw away every frame received so far."""
        for sock in self.socks.values():
            self._read_all(sock, [])

    def close(self) -> None:
        """Close every socket."""
        for sock in self.socks.values():
            sock.close()
