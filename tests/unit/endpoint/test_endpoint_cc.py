"""The NSCC-style window: one test per quadrant, plus trims and timeouts (cc module docstring)."""

import pytest
from pytest import approx

from mrckit.endpoint.cc import NsccConfig, NsccWindow

MTU = 2048


def _win(cwnd=100 * MTU):
    w = NsccWindow(NsccConfig(mtu=MTU, initial_cwnd=cwnd, max_cwnd=1000 * MTU, target_qdelay=1_000_000))
    w.on_ack(0, 100_000, False, 0)  # base RTT 100 µs, target 1.1 ms
    return w


def test_no_ecn_below_target_increases_proportionally():
    w = _win()
    before = w.cwnd
    w.on_ack(MTU, 100_000, False, 1)
    assert w.cwnd - before == approx(MTU * 1.0 * (1_100_000 - 100_000) / 1_100_000)


def test_no_ecn_above_target_increases_fairly():
    w = _win()
    before = w.cwnd
    w.on_ack(MTU, 2_000_000, False, 1)
    assert w.cwnd - before == approx(MTU * MTU / before)


def test_ecn_above_target_decreases_once_per_rtt():
    w = _win()
    before = w.cwnd
    w.on_ack(MTU, 2_000_000, True, 10_000_000)
    assert w.cwnd == before * (1 - min(0.5, 0.8 * (2_000_000 - 1_100_000) / 2_000_000))
    after = w.cwnd
    w.on_ack(MTU, 2_000_000, True, 10_000_001)
    assert w.cwnd == after


def test_ecn_below_target_leaves_the_window():
    w = _win()
    before = w.cwnd
    w.on_ack(MTU, 200_000, True, 10_000_000)
    assert w.cwnd == before


def test_trim_and_timeout_decrease_and_bounds_hold():
    w = _win()
    w.on_trim(10_000_000)
    assert w.cwnd == 50 * MTU
    for _ in range(20):
        w.on_timeout()
    assert w.cwnd == MTU
    for i in range(10000):
        w.on_ack(100 * MTU, 100_000, False, i)
    assert w.cwnd == 1000 * MTU


def test_a_capped_window_starts_at_its_cap_and_never_passes_it():
    w = NsccWindow(NsccConfig.capped(32))
    assert w.cwnd == 32 * NsccConfig().mtu
    for t in range(1, 100):
        w.on_ack(64 * MTU, 100_000, False, t)
    assert w.cwnd == 32 * NsccConfig().mtu


def test_a_cap_below_one_packet_is_refused():
    with pytest.raises(ValueError, match="window cap of 0 packets"):
        NsccConfig.capped(0)
