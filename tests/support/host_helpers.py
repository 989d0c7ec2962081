"""Socket and polling helpers shared by the host e2e tests."""

from __future__ import annotations

import socket
import time

from mrckit import netns

SO_RCVBUFFORCE = 33  # asm-generic/socket.h; root may exceed rmem_max


def udp_socket(ns: str, addr: str, port: int) -> socket.socket:
    """A UDP socket bound to [addr]:port inside namespace ``ns`` (8 MiB receive buffer, 3 s timeout)."""
    with netns.enter(ns):
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)
        s.bind((addr, port))
    s.settimeout(3)
    return s


def wait_for(cond, timeout: float = 5.0, step: float = 0.005) -> bool:
    """Poll ``cond()`` every ``step`` s until it is true or ``timeout`` s pass; its last value."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return bool(cond())
