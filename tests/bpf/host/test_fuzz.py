"""Fuzz: 100k mutated packets through XDP ingress. Every output must equal a plain-Python model
of design 3.1 (so nothing is decapsulated wrongly), and every drop must be counted."""

import random
from collections import Counter

from support import host_pkt as pkt
from support.host_fuzz import mutate, stale_trim
from support.host_pkt import Dscp, Ecn, Opcode

from mrckit.host.maps import RX_DROPS, Stat
from mrckit.wire.addressing import nic_address
from mrckit.wire.constants import AGENT_UDP_PORT, QP_ENDPOINT_OPS, MultipathState, NackReason
from mrckit.wire.ev import ev_pack

PACKETS = 100_000
XDP_DROP, XDP_PASS = 1, 2
NIC = nic_address(pkt.A_LEAF, pkt.A_DOWN).packed


def model(frame: bytes, repaired: list | None = None) -> tuple[int, bytes, Stat]:
    """(verdict, bytes out, counter) that XDP ingress must produce for ``frame``; a repaired
    trim appends to ``repaired``."""
    repaired = [] if repaired is None else repaired
    if len(frame) < 54 or frame[12:14] != b"\x86\xdd":
        return XDP_PASS, frame, Stat.RX_PASS_OTHER
    outer = frame[14:54]
    if outer[0] >> 4 != 6 or outer[6] != 41:
        return XDP_PASS, frame, Stat.RX_PASS_OTHER
    if len(frame) < 94 or frame[54] >> 4 != 6:
        return XDP_DROP, b"", Stat.RX_DROP_MALFORMED
    inner = bytearray(frame[54:])
    plen, iplen = int.from_bytes(outer[4:6], "big"), int.from_bytes(inner[4:6], "big")
    if plen != iplen + 40:
        return XDP_DROP, b"", Stat.RX_DROP_MALFORMED
    if 94 + iplen > len(frame):
        if not stale_trim(outer, bytes(inner), iplen):
            return XDP_DROP, b"", Stat.RX_DROP_MALFORMED
        iplen = len(inner) - 40  # repaired: the lengths are set from the frame
        inner[4:6] = inner[44:46] = iplen.to_bytes(2, "big")
        repaired.append(1)
    if bytes(inner[24:40]) != NIC:
        return XDP_DROP, b"", Stat.RX_DROP_NOT_LOCAL
    otc = ((outer[0] & 0xF) << 4) | (outer[1] >> 4)
    itc = ((inner[0] & 0xF) << 4) | (inner[1] >> 4)
    ecn = itc & 3
    if otc & 3 == Ecn.CE:
        if ecn == Ecn.NOT_ECT:
            return XDP_DROP, b"", Stat.RX_DROP_CE_NOT_ECT
        ecn = Ecn.CE
    itc = (otc & ~3) | ecn
    inner[0] = 0x60 | (itc >> 4)
    inner[1] = ((itc << 4) & 0xF0) | (outer[1] & 0x0F)
    inner[2:4] = outer[2:4]
    stat = Stat.RX_DECAP
    if inner[6] == 17 and len(inner) >= 60 and iplen >= 20 and inner[42:44] == b"\x12\xb7":
        if inner[53:56] == bytes([0, 0, QP_ENDPOINT_OPS]):
            old = int.from_bytes(inner[42:44], "big")
            inner[42:44] = AGENT_UDP_PORT.to_bytes(2, "big")
            ck = int.from_bytes(inner[46:48], "big")
            if ck:
                s = (~ck & 0xFFFF) + (~old & 0xFFFF) + AGENT_UDP_PORT
                s = (s & 0xFFFF) + (s >> 16)
                s = (s & 0xFFFF) + (s >> 16)
                inner[46:48] = ((~s & 0xFFFF) or 0xFFFF).to_bytes(2, "big")
    return XDP_PASS, frame[:14] + bytes(inner), stat


def seeds() -> list[bytes]:
    ev = ev_pack(0, 1, 0x111)
    ctl, data = pkt.tclass(Dscp.CONTROL), pkt.tclass(Dscp.TRIMMABLE, Ecn.ECT0)
    l4s = [pkt.write_payload(), pkt.bth(Opcode.SACK) + pkt.seth(ev, MultipathState.SKIP_ONCE),
           pkt.bth(Opcode.NACK) + pkt.neth(ev, NackReason.TRIMMED),
           pkt.bth(Opcode.EP_REQ, dqpn=QP_ENDPOINT_OPS) + bytes(16)]
    out = []
    for l4 in l4s:
        for chksum in (0, None):
            out.append(pkt.encapped(pkt.NIC_B, pkt.NIC_A, l4, ev=ev, outer_tc=ctl, inner_tc=data,
                                    chksum=chksum))
    out.append(pkt.encapped(pkt.NIC_B, pkt.NIC_C, l4s[0], ev=ev, outer_tc=ctl, inner_tc=0))
    out.append(pkt.plain(pkt.NIC_B, pkt.NIC_A, l4s[0]))
    # A fixed-size trim with stale lengths (docs/host.md), both classes.
    for dscp in (Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP):
        out.append(pkt.encapped(pkt.NIC_B, pkt.NIC_A, l4s[0], ev=ev, outer_tc=pkt.tclass(dscp),
                                inner_tc=data)[:140])
    return out


def test_100k_mutated_packets(dp):
    dp.set_template([ev_pack(0, 1, 0x111), ev_pack(1, 2, 0x222)])
    assert dp.egress.test_run(pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload())).retval == 7
    before = dp.stat_values()
    rng = random.Random(8)
    base = seeds()
    want = Counter()
    drops = 0
    repaired: list = []
    for i in range(PACKETS):
        frame = mutate(rng, rng.choice(base)) if i % 10 else rng.choice(base)
        verdict, out, stat = model(frame, repaired)
        res = dp.ingress.test_run(frame)
        assert res.retval == verdict, (i, frame.hex())
        if verdict == XDP_PASS:
            assert res.data == out, (i, frame.hex())
        drops += res.retval == XDP_DROP
        want[stat.name] += 1
    got = {k: v - before[k] for k, v in dp.stat_values().items()}
    for stat in [Stat.RX_DECAP, Stat.RX_PASS_OTHER, *RX_DROPS]:
        assert got[stat.name] == want[stat.name], stat.name
    assert sum(got[s.name] for s in RX_DROPS) == drops > 1000
    assert got["RX_TRIM_REPAIRED"] == len(repaired) > 1000
    assert want["RX_DECAP"] > 10_000 and got["FB_SACK"] > 0
