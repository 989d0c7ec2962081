"""Golden bytes: under one fake clock, the C and Python endpoints put byte-identical packets on
the wire (design 6). Each scenario runs with the Python requestor and responder, then with other
pairings; every data packet (all opcodes, TSETH, ImmDt, retransmissions, PROBEs) and every SACK
and NACK must match, in order."""

import os

import pytest

from support.endpoint_harness import Faults, Link, NATIVE_MISSING, RKEY
from mrckit.wire.constants import BTH_FLAG_RTX, Opcode

pytestmark = pytest.mark.skipif(NATIVE_MISSING is not None, reason=str(NATIVE_MISSING))

SIZE = 1 << 20
PAIRS = [("native", "native"), ("native", "python"), ("python", "native")]


def _writes():
    rnd = __import__("random").Random(5)
    data = bytes(rnd.getrandbits(8) for _ in range(300_000))
    return [(data[:5000], 0x40, None), (b"", 0, None), (data[:1], 9000, 0xDEADBEEF),
            (data, 10_000, 7), (data[:4096], 400_000, None), (data[:2048], 500_000, 0)]


SCENARIOS = {
    "clean": dict(),
    "loss_trim_dup_permute": dict(faults=Faults(drop=0.1, trim=0.05, duplicate=0.1, permute=True, seed=21),
                                  reply_faults=Faults(drop=0.2, duplicate=0.1, permute=True, seed=22)),
    "heavy_loss_rto": dict(faults=Faults(drop=0.4, seed=23), reply_faults=Faults(drop=0.3, seed=24)),
    "silent_ev": dict(faults=Faults(silent_ev=0x20000003, seed=25)),
    "psn_wrap_small_mpr": dict(faults=Faults(drop=0.05, permute=True, seed=26), mpr=128, mtu=512,
                               initial_psn=(1 << 24) - 300),
    "coalesced_sacks": dict(faults=Faults(drop=0.02, seed=27), coalesce=65536),
}


def _run(impl, resp_impl, scenario):
    kw = dict(SCENARIOS[scenario])
    for key in ("faults", "reply_faults"):  # a fresh, identically seeded RNG per run
        if key in kw:
            f = kw[key]
            kw[key] = Faults(f.drop, f.duplicate, f.trim, f.permute, f.silent_ev, f.seed)
    link = Link(SIZE, impl=impl, resp_impl=resp_impl, **kw)
    comps = [link.req.post(d, va, RKEY, imm) for d, va, imm in _writes()]
    link.run(comps)
    return link


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("impl,resp_impl", PAIRS, ids=["-".join(p) for p in PAIRS])
def test_packets_are_byte_identical(scenario, impl, resp_impl):
    ref = _run("python", "python", scenario)
    got = _run(impl, resp_impl, scenario)
    assert len(got.sent) == len(ref.sent)
    for i, (a, b) in enumerate(zip(got.sent, ref.sent)):
        assert a == b, f"data packet {i} differs: {a[0][:40].hex()} vs {b[0][:40].hex()}"
    assert got.answered == ref.answered
    assert got.mr.buf == ref.mr.buf
    assert [c.rqmsn for c in got.resp.completions] == [c.rqmsn for c in ref.resp.completions]


def test_the_golden_runs_cover_every_opcode_and_retransmission_kind():
    seen, rtx, probes = set(), 0, 0
    for scenario in SCENARIOS:
        link = _run("native", "native", scenario)
        for pkt, _tc, _ev in link.sent:
            seen.add(pkt[0])
            rtx += bool(pkt[8] & BTH_FLAG_RTX)
        probes += link.req.stats.probes
        st = link.req.stats.retransmits
        assert link.mr.buf[0x40:0x40 + 5000] == _writes()[0][0]
    assert seen >= {Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST, Opcode.WRITE_LAST_IMM,
                    Opcode.WRITE_ONLY, Opcode.WRITE_ONLY_IMM, Opcode.PROBE}
    assert rtx > 0 and probes > 0 and st is not None


def test_icrc_matches_zlib():
    import zlib
    from mrckit.endpoint.native import _lib
    buf = os.urandom(3000)
    assert _lib.lib().mrcep_crc32(0, buf, len(buf)) == zlib.crc32(buf)
    assert _lib.lib().mrcep_crc32(zlib.crc32(buf[:7]), buf[7:], len(buf) - 7) == zlib.crc32(buf)
