"""The pure parts of the experiments that compare MRC with the RC baseline (random-loss,
load-balance): option checks, the records built from runs, and their checks failing when a
run shows what must not happen (an RC QP on two EVs, a byte not verified)."""

import pytest

from mrckit.apps.experiments.random_loss import RandomLossOptions, parse_percents, random_loss_record
from mrckit.apps.experiments.writes import WriteRun
from mrckit.errors import MrcError

PAIR = (("h0-0", "h1-0"),)


def _run(transport, pct, seconds, evs, dropped=10):
    r = WriteRun(transport, pct, 1, 4 << 20, PAIR, seconds=seconds, verified=True, fault_dropped=dropped if pct else 0)
    r.evs_used = {"h0-0>h1-0": {ev: 5 for ev in range(evs)}}
    return r


def _runs(rc_evs=1, verified=True):
    runs = [_run("mrc", 0.0, 1.0, 64), _run("mrc", 1.0, 2.0, 64), _run("rc", 0.0, 1.0, rc_evs),
            _run("rc", 1.0, 10.0, rc_evs)]
    runs[-1].verified = verified
    return runs


def test_random_loss_reports_each_transport_as_a_fraction_of_its_loss_free_run():
    rec = random_loss_record(RandomLossOptions(loss_percents=(1.0,)), _runs())
    assert rec.passed
    mrc, rc, vs = rec.figures
    assert mrc.value / mrc.baseline_value == pytest.approx(0.5) and rc.value / rc.baseline_value == pytest.approx(0.1)
    assert vs.value / vs.baseline_value == pytest.approx(5.0)
    assert rec.details["fraction_of_loss_free"] == {"mrc": {"1": pytest.approx(0.5)}, "rc": {"1": pytest.approx(0.1)}}
    assert [b.startswith('BENCH {"measure": "experiment random-loss: ') for b in rec.bench_lines()] == [True] * 3


def test_random_loss_fails_when_rc_used_two_paths_or_a_byte_was_not_verified():
    assert not random_loss_record(RandomLossOptions(loss_percents=(1.0,)), _runs(rc_evs=2)).checks[
        "RC really on one path (the sender's per-EV counters)"]
    rec = random_loss_record(RandomLossOptions(loss_percents=(1.0,)), _runs(verified=False))
    assert not rec.checks["every byte verified"] and rec.figures[1].value is None


def test_random_loss_options_are_checked():
    assert parse_percents("0.1,1,5") == (0.1, 1.0, 5.0)
    with pytest.raises(MrcError, match="--loss-percents"):
        parse_percents("1,x")
    with pytest.raises(MrcError, match="within"):
        RandomLossOptions(loss_percents=(0.0,)).check()


def _lb_run(transport, qps, seconds, evs_per_pair, links):
    from mrckit.apps.experiments.load_balance import PAIRS

    r = WriteRun(transport, 0.0, qps, (4 << 20) // qps, PAIRS, seconds=seconds, verified=True, links=links)
    r.evs_used = {f"{s}>{d}": {ev: 3 for ev in range(n)} for (s, d), n in zip(PAIRS, evs_per_pair)}
    return r


def test_load_balance_compares_one_mrc_qp_with_the_most_rc_qps_and_their_spread():
    from mrckit.apps.experiments.load_balance import LoadBalanceOptions, load_balance_record, spread

    even, skewed = {"a": 10, "b": 10, "c": 10, "d": 10}, {"a": 30, "b": 10, "c": 0, "d": 0}
    assert spread(even) == 1.0 and spread(skewed) == 3.0 and spread({}) is None
    runs = [_lb_run("mrc", 1, 1.0, [200, 200], even), _lb_run("rc", 8, 2.0, [6, 8], skewed),
            _lb_run("rc", 16, 2.0, [12, 14], skewed)]
    rec = load_balance_record(LoadBalanceOptions(rc_qps=(8, 16)), runs)
    assert rec.passed, rec.checks
    gp, sp, rc = rec.figures
    assert gp.value / gp.baseline_value == pytest.approx(2.0) and sp.value == 1.0 and sp.baseline_value == 3.0
    assert rc.value / rc.baseline_value == pytest.approx(1.0)
    runs[1].evs_used["h0-0>h1-0"] = {ev: 1 for ev in range(9)}  # 9 EVs for 8 pinned QPs: not single-path
    assert not load_balance_record(LoadBalanceOptions(rc_qps=(8, 16)), runs).passed


def test_load_balance_options_are_checked():
    from mrckit.apps.experiments.demo_fault import FabricSize
    from mrckit.apps.experiments.load_balance import LoadBalanceOptions, parse_counts

    assert parse_counts("1,2,4") == (1, 2, 4)
    with pytest.raises(MrcError, match="2 hosts per leaf"):
        LoadBalanceOptions(size=FabricSize(2, 2, 2, 1)).check()
    with pytest.raises(MrcError, match="--rc-qps"):
        LoadBalanceOptions(rc_qps=(0,)).check()
