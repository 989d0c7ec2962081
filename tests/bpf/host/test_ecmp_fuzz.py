"""Fuzz of XDP ingress in EV-hash (ecmp) mode: 30k mutated packets, each output equal to a
plain-Python model (nothing is ever decapsulated or cut; only the QP 0x2 port rewrite changes
bytes), and every drop counted."""

import random
from collections import Counter

from support import host_pkt as pkt
from support.host_pkt import Dscp, Ecn, Opcode
from support.host_fuzz import mutate, stale_trim

from mrckit.host.maps import RX_DROPS, Stat
from mrckit.wire.addressing import nic_address
from mrckit.wire.constants import AGENT_UDP_PORT, QP_ENDPOINT_OPS, MultipathState, NackReason
from mrckit.wire.ev import ev_pack

PACKETS = 30_000
XDP_DROP, XDP_PASS = 1, 2
NIC = nic_address(pkt.A_LEAF, pkt.A_DOWN).packed


def model(frame: bytes, repaired: list | None = None) -> tuple[int, bytes, Stat]:
    """(verdict, bytes out, counter) that XDP ingress must produce for ``frame`` in ecmp mode;
    a repaired trim appends to ``repaired``."""
    repaired = [] if repaired is None else repaired
    if len(frame) < 54 or frame[12:14] != b"\x86\xdd" or frame[14] >> 4 != 6 or frame[20] != 17:
        return XDP_PASS, frame, Stat.RX_PASS_OTHER
    if len(frame) < 62 or frame[38:54] != NIC or frame[56:58] != b"\x12\xb7":
        return XDP_PASS, frame, Stat.RX_PASS_OTHER
    plen = int.from_bytes(frame[18:20], "big")
    out = bytearray(frame)
    if plen < 8 or 54 + plen > len(frame):
        if not stale_trim(frame[14:], frame[14:], plen):
            return XDP_DROP, b"", Stat.RX_DROP_MALFORMED
        plen = len(frame) - 54  # repaired: the lengths are set from the frame
        out[18:20] = out[58:60] = plen.to_bytes(2, "big")
        repaired.append(1)
    if len(frame) >= 74 and plen >= 20 and frame[67:70] == bytes([0, 0, QP_ENDPOINT_OPS]):
        old = int.from_bytes(out[56:58], "big")
        out[56:58] = AGENT_UDP_PORT.to_bytes(2, "big")
        ck = int.from_bytes(out[60:62], "big")
        if ck:
            s = (~ck & 0xFFFF) + (~old & 0xFFFF) + AGENT_UDP_PORT
            s = (s & 0xFFFF) + (s >> 16)
            s = (s & 0xFFFF) + (s >> 16)
            out[60:62] = ((~s & 0xFFFF) or 0xFFFF).to_bytes(2, "big")
    return XDP_PASS, bytes(out), Stat.RX_PLAIN


def seeds() -> list[bytes]:
    ev = ev_pack(0, 1, 0x111)
    l4s = [pkt.write_payload(), pkt.bth(Opcode.SACK) + pkt.seth(ev, MultipathState.SKIP_ONCE),
           pkt.bth(Opcode.NACK) + pkt.neth(ev, NackReason.TRIMMED),
           pkt.bth(Opcode.EP_REQ, dqpn=QP_ENDPOINT_OPS) + bytes(16)]
    out = [pkt.plain(pkt.NIC_B, pkt.NIC_A, l4, sport=0x0ABC, fl=0xDEF, chksum=chksum,
                     tc=pkt.tclass(Dscp.TRIMMABLE, Ecn.CE))
           for l4 in l4s for chksum in (0, None)]
    out.append(pkt.plain(pkt.NIC_B, pkt.NIC_C, l4s[0]))
    out.append(pkt.encapped(pkt.NIC_B, pkt.NIC_A, l4s[0], ev=ev, outer_tc=0, inner_tc=0))
    # A fixed-size trim with stale lengths (docs/host.md), both classes.
    for dscp in (Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP):
        out.append(pkt.plain(pkt.NIC_B, pkt.NIC_A, l4s[0], tc=pkt.tclass(dscp))[:100])
    return out


def test_30k_mutated_plain_packets(ecmp_dp):
    ecmp_dp.set_template([ev_pack(0, 1, 0x111), ev_pack(1, 2, 0x222)])
    assert ecmp_dp.egress.test_run(pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload())).retval == 7
    rng = random.Random(11)
    base = seeds()
    want = Counter()
    drops = 0
    repaired: list = []
    for i in range(PACKETS):
        frame = mutate(rng, rng.choice(base)) if i % 10 else rng.choice(base)
        verdict, out, stat = model(frame, repaired)
        res = ecmp_dp.ingress.test_run(frame)
        assert res.retval == verdict, (i, frame.hex())
        if verdict == XDP_PASS:
            assert res.data == out, (i, frame.hex())
        drops += res.retval == XDP_DROP
        want[stat.name] += 1
    got = ecmp_dp.stat_values()
    for stat in [Stat.RX_PLAIN, Stat.RX_PASS_OTHER, Stat.RX_DECAP, *RX_DROPS]:
        assert got[stat.name] == want[stat.name], stat.name
    assert sum(got[s.name] for s in RX_DROPS) == drops > 300
    assert got["RX_TRIM_REPAIRED"] == len(repaired) > 300
    assert want["RX_PLAIN"] > 5_000 and got["FB_SACK"] > 0 and got["RX_AGENT"] > 0
