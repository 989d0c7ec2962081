"""The host ingress fuzz's mutations and its rule for trims XDP repairs (docs/host.md)."""

import random

from mrckit.wire.constants import WRITE_OPCODES

from support.host_pkt import Dscp


def stale_trim(marked: bytes, ip: bytes, iplen: int) -> bool:
    """Whether a frame shorter than its lengths is a trim that XDP repairs (docs/host.md):
    ``marked`` is the IPv6 header with the class, ``ip`` the one carrying UDP and what follows
    (to the frame's end), ``iplen`` its payload length field."""
    dscp = (((marked[0] & 0xF) << 4) | (marked[1] >> 4)) >> 2
    return (dscp in (Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP) and ip[6] == 17 and len(ip) >= 60
            and ip[42:44] == b"\x12\xb7" and ip[48] in WRITE_OPCODES and ip[46:48] == b"\0\0"
            and int.from_bytes(ip[44:46], "big") == iplen and 40 + iplen > len(ip))


def mutate(rng: random.Random, seed: bytes) -> bytes:
    buf = bytearray(seed)
    for _ in range(rng.randint(1, 4)):
        kind = rng.random()
        if kind < 0.5:  # one byte in the headers, where the decisions are made
            buf[rng.randrange(min(len(buf), 130))] = rng.randrange(256)
        elif kind < 0.65:  # flip ECN/version nibbles
            off = rng.choice([14, 15, 54, 55])
            if off < len(buf):
                buf[off] ^= 1 << rng.randrange(8)
        elif kind < 0.8:  # truncate or extend
            n = rng.randrange(14, len(buf) + 8)
            buf = buf[:n] if n <= len(buf) else buf + bytes(rng.randrange(256) for _ in range(n - len(buf)))
        else:  # a payload length off by a little
            off = rng.choice([18, 58])
            if off + 2 > len(buf):
                continue
            val = max(0, int.from_bytes(buf[off:off + 2], "big") + rng.randint(-3, 3))
            buf[off:off + 2] = (val & 0xFFFF).to_bytes(2, "big")
    return bytes(buf)
