"""Raw Ethernet frames in and out of an interface inside a namespace (AF_PACKET)."""

from __future__ import annotations

import select
import socket
import time

from mrckit import netns

ETH_P_ALL = 0x0003


class RawPort:
    """An AF_PACKET socket on ``iface`` in namespace ``ns``: :meth:`send` frames, :meth:`recv` them."""

    def __init__(self, ns: str, iface: str):
        with netns.enter(ns):
            self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            self.sock.bind((iface, 0))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)

    def send(self, frame: bytes) -> None:
        self.sock.send(frame)

    def recv(self, want, *, count: int, timeout: float = 3.0) -> list[bytes]:
        """Frames accepted by ``want(frame)`` until ``count`` arrived or ``timeout`` s passed.
        Outgoing frames (PACKET_OUTGOING) are skipped."""
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(out) < count:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                break
            frame, addr = self.sock.recvfrom(65536)
            if addr[2] != socket.PACKET_OUTGOING and want(frame):
                out.append(frame)
        return out

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "RawPort":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def is_mrc(frame: bytes) -> bool:
    """An encapsulated frame (IPv6 with next header 41), not ND/MLD chatter."""
    return len(frame) >= 54 and frame[12:14] == b"\x86\xdd" and frame[20] == 41
