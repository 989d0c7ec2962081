"""BPF_PROG_TEST_RUN golden tests of XDP ingress on trims whose length fields were left stale.

SONiC and Cumulus switches trim a frame to a fixed size and remark its DSCP, but leave the IPv6
payload length and the UDP length of the whole packet (sonic-mgmt's packet-trimming test plan,
section 5). Host XDP sets them from the frame, so the responder NACKs the trim as it NACKs our
own switch's (which corrects them, design 4 step 5); any other frame shorter than its lengths
stays malformed (docs/host.md, "What each bad input gets")."""

from support import host_pkt as pkt
from support.host_pkt import Dscp, Ecn, Opcode
import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from mrckit.wire.ev import ev_pack

XDP_DROP, XDP_PASS = 1, 2
PEER_EV = ev_pack(0, 3, 0xABCDE)
HDRS = 14 + 40 + 40 + 8  # Ethernet, outer and inner IPv6, UDP: what precedes the BTH
WRITE = pkt.write_payload(payload=bytes(range(256)) * 4)  # BTH METH RETH, 1024 B, ICRC


def full(l4: bytes = WRITE, dscp: int = Dscp.TRIMMED, chksum: int | None = 0) -> bytes:
    return pkt.encapped(pkt.NIC_B, pkt.NIC_A, l4, ev=PEER_EV, outer_tc=pkt.tclass(dscp, Ecn.ECT0),
                        inner_tc=pkt.tclass(Dscp.TRIMMABLE, Ecn.ECT0), chksum=chksum)


def decap_of(frame: bytes, dscp: int) -> bytes:
    """What XDP ingress passes up for a consistent encapsulated ``frame``: no outer header, the
    outer DSCP and flow label copied in (ECT0 on both sides)."""
    p = Ether(frame)
    inner = p[IPv6].payload
    inner.tc, inner.fl = pkt.tclass(dscp, Ecn.ECT0), PEER_EV & 0xFFFF
    return bytes(Ether(src=p.src, dst=p.dst) / IPv6(bytes(inner)))


def lengths(frame: bytes) -> tuple[int, ...]:
    """(outer payload length, inner payload length, UDP length) as the fields say."""
    return tuple(int.from_bytes(frame[o:o + 2], "big") for o in (18, 58, 98))


@pytest.mark.parametrize("dscp", [Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP])
@pytest.mark.parametrize("size", [256, HDRS + 12, HDRS + 12 + 4 + 7])
def test_fixed_size_trim_with_stale_lengths_is_repaired_like_our_own_trim(dp, dscp, size):
    """A fixed-size trim (with some payload left, or cut right after the BTH, or inside the
    RETH) comes out as our switch's trim to the same bytes would: the lengths fit the frame."""
    stale = full(dscp=dscp)[:size]
    assert lengths(stale) == (40 + 8 + len(WRITE), 8 + len(WRITE), 8 + len(WRITE))
    ours = full(WRITE[:size - HDRS], dscp)  # the same bytes, lengths as our switch sets them
    assert stale != ours and lengths(ours) == (size - 54, size - 94, size - 94)
    res = dp.ingress.test_run(stale)
    assert res.retval == XDP_PASS
    assert res.data == decap_of(ours, dscp)
    out = Ether(res.data)
    assert (out[IPv6].plen, out[UDP].len, out[IPv6].tc >> 2) == (size - 94, size - 94, dscp)
    st = dp.stat_values()
    assert (st["RX_TRIM_REPAIRED"], st["RX_DECAP"], st["RX_DROP_MALFORMED"]) == (1, 1, 0)


def test_our_own_trim_needs_no_repair(dp):
    ours = full(WRITE[:40])
    res = dp.ingress.test_run(ours)
    assert (res.retval, res.data) == (XDP_PASS, decap_of(ours, Dscp.TRIMMED))
    assert dp.stat_values()["RX_TRIM_REPAIRED"] == 0


def _stale(frame: bytes, size: int = 200) -> bytes:
    return frame[:size]


@pytest.mark.parametrize("case, frame", [
    ("not a trim: DSCP TRIMMABLE", _stale(full(dscp=Dscp.TRIMMABLE))),
    ("not a trim: DSCP CONTROL", _stale(full(dscp=Dscp.CONTROL))),
    ("trim without a whole BTH", _stale(full(), HDRS + 11)),
    ("trim of a SACK: only writes are trimmed", _stale(full(pkt.bth(Opcode.SACK) + bytes(200)), HDRS + 20)),
    ("trim with a non-zero UDP checksum", _stale(full(chksum=0x1234))),
    ("trim whose outer length disagrees with the inner", None),
    ("trim whose UDP length disagrees with the IPv6 one", None),
    ("trim not to RoCEv2's port", None),
])
def test_other_frames_shorter_than_their_lengths_stay_malformed(dp, case, frame):
    if frame is None:
        buf = bytearray(_stale(full()))
        if "outer" in case:
            buf[18:20] = (int.from_bytes(buf[18:20], "big") + 1).to_bytes(2, "big")
        elif "UDP length" in case:
            buf[98:100] = (int.from_bytes(buf[98:100], "big") - 1).to_bytes(2, "big")
        else:
            buf[96:98] = (4792).to_bytes(2, "big")
        frame = bytes(buf)
    assert dp.ingress.test_run(frame).retval == XDP_DROP, case
    st = dp.stat_values()
    assert (st["RX_DROP_MALFORMED"], st["RX_TRIM_REPAIRED"], st["RX_DECAP"]) == (1, 0, 0), case


# ---- EV-hash mode: the trimmed frame has one IPv6 header (docs/ecmp-mode.md) --------------------

def plain_write(dscp: int = Dscp.TRIMMED) -> bytes:
    return pkt.plain(pkt.NIC_B, pkt.NIC_A, WRITE, sport=PEER_EV >> 16, fl=PEER_EV & 0xFFFF,
                     tc=pkt.tclass(dscp, Ecn.ECT0))


@pytest.mark.parametrize("dscp", [Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP])
def test_ecmp_fixed_size_trim_with_stale_lengths_is_repaired(ecmp_dp, dscp):
    size = 14 + 40 + 8 + 12 + 4 + 16 + 30
    stale = plain_write(dscp)[:size]
    ours = pkt.plain(pkt.NIC_B, pkt.NIC_A, WRITE[:size - 62], sport=PEER_EV >> 16,
                     fl=PEER_EV & 0xFFFF, tc=pkt.tclass(dscp, Ecn.ECT0))
    assert stale != ours and len(stale) == len(ours)
    res = ecmp_dp.ingress.test_run(stale)
    assert (res.retval, res.data) == (XDP_PASS, ours)
    st = ecmp_dp.stat_values()
    assert (st["RX_TRIM_REPAIRED"], st["RX_PLAIN"], st["RX_DROP_MALFORMED"]) == (1, 1, 0)


def test_ecmp_non_trim_with_stale_lengths_stays_malformed(ecmp_dp):
    assert ecmp_dp.ingress.test_run(plain_write(Dscp.TRIMMABLE)[:200]).retval == XDP_DROP
    st = ecmp_dp.stat_values()
    assert (st["RX_DROP_MALFORMED"], st["RX_TRIM_REPAIRED"]) == (1, 0)
