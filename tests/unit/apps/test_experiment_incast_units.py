"""The pure parts of `mrc experiment incast` (docs/experiments.md): where the hosts sit, the
flows, option checks, the victim's figures from its writes, the record from runs, and the
switch counts' arithmetic."""

import pytest

from mrckit.apps.experiments.congestion import counts_since, total
from mrckit.apps.experiments.demo_fault import FabricSize
from mrckit.apps.experiments.incast import IncastOptions, Run, flows, incast_fct, incast_record, placement, victim_figures
from mrckit.apps.traffic.report import FlowResult, TrafficReport
from mrckit.errors import MrcError
from mrckit.wire.pipeline import THRESHOLD_NONE

SMALL = FabricSize(planes=1, spines=2, leaves=2, hosts_per_leaf=3)
MS = 1_000_000


def test_placement_keeps_the_victim_off_the_receivers_last_hop():
    receiver, senders, v_src, v_dst = placement(FabricSize(planes=2, spines=2, leaves=3, hosts_per_leaf=4), 7)
    assert receiver == "h0-0" and v_dst == "h0-1" and v_src == "h2-3"
    assert senders == ["h1-0", "h1-1", "h1-2", "h1-3", "h2-0", "h2-1", "h2-2"]


def test_flows_are_the_incast_then_the_victims_writes():
    opts = IncastOptions(size=SMALL, senders=2, incast_bytes=100, victim_write_bytes=10, victim_writes=4)
    fl = flows(opts, incast=True)
    assert [(f.id, f.src, f.dst, f.size, f.writes) for f in fl] == [
        (0, "h1-0", "h0-0", 100, 1), (1, "h1-1", "h0-0", 100, 1), (2, "h1-2", "h0-1", 40, 4)]
    assert [f.id for f in flows(opts, incast=False)] == [2]


@pytest.mark.parametrize("change,words", [
    (dict(senders=3), "--senders 3: use 1..2"), (dict(size=FabricSize(1, 2, 1, 3)), "2 leaves"),
    (dict(victim_writes=0), "--victim-writes 0"), (dict(capacity=THRESHOLD_NONE), "--capacity"),
    (dict(transports=("mrc", "roce")), "--transport roce: use mrc, rc")])
def test_bad_options_are_named(change, words):
    with pytest.raises(MrcError, match=words.replace("(", r"\(")):
        IncastOptions(**{"size": SMALL, "senders": 2, **change}).check()


def _report(victim_writes, incast_ends, victim_id=2):
    flows = [FlowResult(id=i, src="s", dst="r", size=100, start_ns=0, end_ns=end, arrived=True, verified=True)
             for i, end in enumerate(incast_ends)]
    flows.append(FlowResult(id=victim_id, src="v", dst="w", size=10 * len(victim_writes),
                            writes=len(victim_writes), start_ns=victim_writes[0][0], end_ns=victim_writes[-1][1],
                            writes_ns=victim_writes, arrived=True, verified=True))
    return TrafficReport(pattern="incast", fabric="f", seed=1, started_ns=0, finished_ns=10 * MS, flows=flows)


def test_victim_figures_count_only_the_writes_posted_during_the_incast():
    writes = [(0, 1 * MS), (1 * MS, 2 * MS), (2 * MS, 5 * MS), (5 * MS, 6 * MS)]
    v = victim_figures(_report(writes, [3 * MS, 4 * MS]), 2)  # the incast ends at 4 ms
    assert v["writes"] == 3
    assert v["goodput_gbps"] == pytest.approx(30 * 8 / 5e-3 / 1e9)
    assert v["fct_p50_s"] == pytest.approx(1e-3)
    alone = victim_figures(_report(writes, []), 2)
    assert alone["writes"] == 4
    assert incast_fct(_report(writes, [3 * MS, 4 * MS]), 2) == pytest.approx(4e-3)


def test_the_record_checks_trims_with_trimming_on_and_none_with_it_off():
    opts = IncastOptions(size=SMALL, senders=2)
    writes = [(0, 1 * MS), (1 * MS, 2 * MS)]
    on_counts = {"p0-t0-0": dict(trimmed=5, ecn_marked=0, congestion_drops=0, drops=0, trimmed_to_hosts=4,
                                 dropped_to_hosts=0)}
    off_counts = {"p0-t0-0": dict(trimmed=0, ecn_marked=0, congestion_drops=3, drops=3, trimmed_to_hosts=0,
                                  dropped_to_hosts=3)}
    results = {"victim alone": dict(run=Run("victim alone", "mrc", True, False), report=_report(writes, []),
                                    counts={}, nic_drops={}, thresholds=[64]),
               "trimming on": dict(run=Run("trimming on", "mrc", True, True), report=_report(writes, [3 * MS] * 2),
                                   counts=on_counts, nic_drops={}, thresholds=[64]),
               "trimming off": dict(run=Run("trimming off", "mrc", False, True),
                                    report=_report(writes, [3 * MS] * 2), counts=off_counts, nic_drops={"h1-0": 2},
                                    thresholds=[THRESHOLD_NONE])}
    record = incast_record(opts, results)
    assert record.passed and len(record.figures) == 7
    assert "5 trims, 4 at last hops" in record.ours and "3 drops, 3 at last hops, 2 at host NICs" in record.ours
    stalled = _report(writes, [3 * MS] * 2)
    stalled.flows[0] = FlowResult(id=0, src="s", dst="r", size=100, start_ns=0, end_ns=None, verified=False,
                                  error="not complete")
    results["trimming off"]["report"] = stalled
    record = incast_record(opts, results)
    assert record.passed and "1 flows not complete in 60 s with trimming off" in record.ours
    assert record.figures[4].value is None and record.figures[4].note == "1 flows not complete in 60 s"
    stalled.flows[1] = FlowResult(id=1, src="s", dst="r", size=100, start_ns=0, end_ns=3 * MS, arrived=True,
                                  verified=False, error="the bytes placed at the receiver differ")
    assert not incast_record(opts, results).passed  # a wrong byte fails the run, whatever the setting
    results["trimming off"]["report"] = _report(writes, [3 * MS] * 2)
    results["trimming off"]["counts"] = on_counts
    assert not incast_record(opts, results).passed


def test_counts_since_keeps_only_switches_that_counted():
    before = {"a": dict(trimmed=1, drops=0), "b": dict(trimmed=2, drops=1)}
    after = {"a": dict(trimmed=4, drops=0), "b": dict(trimmed=2, drops=1)}
    assert counts_since(before, after) == {"a": dict(trimmed=3, drops=0)}
    assert total({"a": dict(trimmed=3), "b": dict(trimmed=2)}, "trimmed") == 5


def test_rc_adds_a_baseline_run_with_trimming_off_after_the_mrc_runs():
    from mrckit.apps.experiments.incast import _runs

    runs = _runs(IncastOptions(size=SMALL, senders=2, transports=("mrc", "rc")))
    assert [(r.label, r.transport, r.trimming, r.incast) for r in runs] == [
        ("victim alone", "mrc", True, False), ("trimming on", "mrc", True, True),
        ("trimming off", "mrc", False, True), ("rc baseline", "rc", False, True)]
