"""The native binding itself: the C tuning constants equal their Python twins, bad settings
are refused with the Python endpoint's messages, and the C state survives being closed."""

import pytest

from support.endpoint_harness import A, B, Link, NATIVE_MISSING, RKEY
from mrckit.endpoint.requestor import (INFINITE_RETRIES, REORDER_PACKETS, RTO_MAX_RTT_SHIFT, RTO_RTT_DECAY_SHIFT,
                                      RTT_MAX_DECAY_SHIFT, RetryConfig)
from mrckit.endpoint.responder import ALWAYS_SKIP_HISTORY_MASK, SACK_MIN_PACKET_BYTES

pytestmark = pytest.mark.skipif(NATIVE_MISSING is not None, reason=str(NATIVE_MISSING))


def test_tuning_constants_match_the_python_reference():
    from mrckit.endpoint.native import _lib
    tuning = _lib.lib().mrcep_tuning
    assert tuning(b"RTT_MAX_DECAY_SHIFT") == RTT_MAX_DECAY_SHIFT
    assert tuning(b"RTO_MAX_RTT_SHIFT") == RTO_MAX_RTT_SHIFT
    assert tuning(b"RTO_RTT_DECAY_SHIFT") == RTO_RTT_DECAY_SHIFT
    assert tuning(b"INFINITE_RETRIES") == INFINITE_RETRIES
    assert tuning(b"SACK_MIN_PACKET_BYTES") == SACK_MIN_PACKET_BYTES
    assert tuning(b"ALWAYS_SKIP_HISTORY_MASK") == ALWAYS_SKIP_HISTORY_MASK
    assert tuning(b"MAX_TIMEOUT_EXP") == 24 and tuning(b"MAX_MTU") == 4096
    assert tuning(b"NO_SUCH") == -1
    with pytest.raises(ValueError, match="timeout_exp"):
        RetryConfig(timeout_exp=tuning(b"MAX_TIMEOUT_EXP") + 1)
    assert REORDER_PACKETS == 16


@pytest.mark.parametrize("kw,message", [(dict(mtu=0), "MTU"), (dict(mtu=4097), "MTU"), (dict(mpr=100), "MPR 100")])
def test_bad_settings_are_refused_like_the_python_requestor(kw, message):
    from mrckit.endpoint.native import NativeRequestorQp
    with pytest.raises(ValueError, match=message):
        NativeRequestorQp(0x100, 0x200, A, B, lambda parts, tc: None, **kw)


def test_default_rto_is_262_microseconds():
    from mrckit.endpoint.native import NATIVE_TIMEOUT_EXP, NativeRequestorQp
    qp = NativeRequestorQp(0x100, 0x200, A, B, lambda parts, tc: None)
    assert NATIVE_TIMEOUT_EXP == 8 and qp.retry.rto_ns(0) == 262_144
    qp.post(b"x" * 100, 0, RKEY)
    qp.pump(1_000_000)
    assert qp.on_timer(1_000_000) == 1_000_000 + 262_144


def test_stats_and_window_stay_readable_after_close():
    link = Link(1 << 16, impl="native")
    comp = link.req.post(b"y" * 5000, 0, RKEY, imm=3)
    link.run([comp])
    before = link.req.stats
    cwnd = link.req.cc.cwnd
    link.req.close()
    link.resp.close()
    assert link.req.stats == before and link.req.cc.cwnd == cwnd
    assert link.resp.stats.placed_bytes == 5000 and link.mr.placed_bytes == 5000


def test_close_fails_pending_writes():
    from mrckit.endpoint.requestor import QpError
    link = Link(1 << 16, impl="native")
    comp = link.req.post(b"z" * 5000, 0, RKEY)
    link.req.close()
    with pytest.raises(QpError, match="closed"):
        comp.wait(0)


def test_random_bytes_crash_neither_native_state_machine():
    """No packet can crash a component: random lengths, opcodes, traffic classes and bytes, to
    the responder and (as replies) to the requestor; the region outside writes stays intact."""
    import random

    from mrckit.wire.constants import Opcode
    rng = random.Random(99)
    link = Link(1 << 16, impl="native")
    link.req.post(b"r" * 20000, 0, RKEY)
    link.req.pump(link.now)
    opcodes = [int(o) for o in Opcode] + [0, 0xFF]
    for i in range(3000):
        n = rng.choice([0, 1, 11, 12, 15, 16, 31, 32, 39, 40, 44, 48, 60, 100, 2100, 4200, 9000])
        pkt = bytearray(rng.getrandbits(8) for _ in range(n))
        if n >= 8:
            pkt[0] = rng.choice(opcodes)
            pkt[5:8] = rng.choice([b"\x00\x02\x00", b"\x00\x01\x00", bytes(3)])
        link.resp.handle(pkt, n, rng.getrandbits(8), rng.getrandbits(20), rng.getrandbits(16), A)
        link.req.on_reply(bytes(pkt), link.now + i)
    link.resp.flush()
    st = link.resp.stats
    assert st.packets == 3000 and st.placed_bytes == 0 and bytes(link.mr.buf) == bytes(len(link.mr.buf))
