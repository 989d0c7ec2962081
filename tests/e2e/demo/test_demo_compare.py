"""`mrc demo --mode ecmp` without a fabric: the loss accounting (mrckit.fabric.loss) on
hand-made counts, and the comparison report, its rendering, JSON and plot on synthetic runs."""

import json
import re
import struct
from pathlib import Path

import pytest
from demo_synthetic import synthetic_run
from rich.console import Console

from mrckit.fabric.compare import ComparisonReport, compare
from mrckit.fabric.loss import last_loss_ns, link_loss, loss_series, loss_stats, per_ev_loss
from mrckit.fabric.plots import plot_comparison
from mrckit.fabric.render import render, render_comparison
from mrckit.fabric.scenario import analyze

DOCS = Path(__file__).resolve().parents[3] / "docs" / "demo.md"
MS = 1_000_000
A, B = 0x0010_0001, 0x0000_0002


def test_per_ev_loss_is_sent_minus_received():
    assert per_ev_loss({A: 10, B: 5}, {A: 7, B: 5}) == {A: 3}
    assert per_ev_loss({A: 4}, {}) == {A: 4}
    assert per_ev_loss({A: 4}, {A: 6}) == {}  # more arrived than counted: no loss, never negative


def test_last_loss_is_when_every_deficit_settles():
    # A loses one packet before 100 ms and one between 300 and 400 ms, and has one packet in
    # flight at the 200 ms sample; B loses none. The responder reports at the sample times.
    tx = [(t * MS, {A: n, B: n}) for t, n in ((0, 0), (100, 10), (200, 20), (300, 30), (400, 40), (500, 50))]
    rx = [(t * MS, {A: a, B: n}) for t, a, n in ((0, 0, 0), (100, 9, 10), (200, 18, 20), (300, 29, 30),
                                                 (400, 38, 40), (500, 48, 50))]
    lost = per_ev_loss(tx[-1][1], rx[-1][1])
    assert lost == {A: 2}
    # A's deficit: 0, 1, 2, 1, 2, 2. At 200 ms it reaches 2 with a packet in flight, and falls
    # back: the last loss is at the 400 ms sample, from which on it stays at 2.
    assert last_loss_ns(tx, rx, lost) == 400 * MS
    # the loss curve is the least deficit from each sample on: the packet in flight is not a loss
    assert loss_series(tx, rx, lost) == [0, 1, 1, 1, 2, 2]
    # a report that lags the sample adds the packets in flight to the deficit: the last loss can
    # only look earlier (here the lag is a whole 100 ms of sending), never later
    late = [(t + 10 * MS, c) for t, c in rx]
    assert last_loss_ns(tx, late, lost) <= 400 * MS
    assert loss_series(tx, late, lost)[1] == 2  # at 100 ms it reads the report of 0 ms
    assert last_loss_ns(tx, rx, {}) is None


def test_loss_stats_totals_retirements_and_link():
    tx = [(1000 * MS, {A: 0}), (1100 * MS, {A: 10})]
    stats = loss_stats(tx_samples=tx, rx_reports=[(1050 * MS, {A: 4})], final_rx={A: 7}, packets_sent=12,
                       packets_received=9, t_fault_ns=1000 * MS, t_restore_ns=2000 * MS,
                       retirements=[(900 * MS, A), (1010 * MS, A), (1020 * MS, A), (1030 * MS, B), (2100 * MS, B)],
                       link_packets_lost=40)
    assert (stats.packets_lost, stats.packets_lost_by_ev, stats.evs_with_loss) == (3, 3, 1)
    assert (stats.evs_retired, stats.evs_retired_distinct, stats.link_packets_lost) == (3, 2, 40)
    assert stats.t_last_loss_s == pytest.approx(0.1) and stats.t_s == [0.0, 0.1] and stats.lost == [0, 3]


def test_link_loss_counts_both_directions():
    before = dict(a_tx=100, a_rx=200, b_tx=300, b_rx=400)
    after = dict(a_tx=150, a_rx=230, b_tx=340, b_rx=420)  # a sent 50, b got 20; b sent 40, a got 30
    assert link_loss(before, after) == (50 - 20) + (40 - 30)


def _with_rx(run, lost_per_ev: int, mode: str):
    """Give a synthetic run the responder's side: every EV of the failed path loses
    ``lost_per_ev`` packets at the fault; everything else arrives."""
    run.mode = mode
    lost = {}
    for t, per_ev in run.recorder.ev_samples:
        if t >= run.t_fault_ns:
            lost = {ev: lost_per_ev for ev in per_ev if (ev >> 28, (ev >> 20) & 0xFF) == (0, 1)}
            break
    run.rx_reports = [(t, {ev: n - (lost.get(ev, 0) if t >= run.t_fault_ns else 0) for ev, n in per_ev.items()})
                      for t, per_ev in run.recorder.ev_samples]
    run.final_rx = run.rx_reports[-1][1]
    sent = sum(run.recorder.ev_samples[-1][1].values())
    run.packets_sent, run.packets_received = sent, sent - sum(lost.values())
    run.link_packets_lost = sum(lost.values()) + 7
    return run


def _comparison():
    ecmp = analyze(_with_rx(synthetic_run("down"), 3, "ecmp"))
    srv6 = analyze(_with_rx(synthetic_run("down"), 1, "srv6"))
    return compare(ecmp, srv6, seed=42)


def test_ecmp_run_is_judged_by_its_own_checks():
    ecmp = analyze(_with_rx(synthetic_run("down"), 3, "ecmp"))
    assert ecmp.mode == "ecmp"
    assert [c.name for c in ecmp.checks] == ["bytes_verified", "planes_carry"]
    assert ecmp.passed, ecmp.checks
    assert ecmp.loss.packets_lost == ecmp.loss.packets_lost_by_ev == 3 * ecmp.loss.evs_with_loss > 0


def test_comparison_figures_and_difference():
    c = _comparison()
    s, e, d = c.modes["srv6"], c.modes["ecmp"], c.difference
    assert (s.mode, e.mode) == ("srv6", "ecmp")
    assert e.packets_lost == 3 * s.packets_lost and d.packets_lost == e.packets_lost - s.packets_lost
    assert d.link_packets_lost == e.link_packets_lost - s.link_packets_lost
    assert d.evs_retired == e.evs_retired - s.evs_retired
    assert d.t_last_loss_s == pytest.approx(e.t_last_loss_s - s.t_last_loss_s)
    assert {c.name for c in c.checks} >= {"srv6.bytes_verified", "ecmp.planes_carry", "ecmp.zero_bytes_lost",
                                          "srv6.zero_bytes_lost", "srv6.failed_path_silent"}
    assert c.passed, [x for x in c.checks if not x.ok]


def test_compare_refuses_runs_that_differ():
    ecmp = analyze(_with_rx(synthetic_run("down"), 3, "ecmp"))
    srv6 = analyze(_with_rx(synthetic_run("loss"), 1, "srv6"))
    with pytest.raises(ValueError, match="the runs differ"):
        compare(ecmp, srv6, seed=1)
    with pytest.raises(ValueError, match="an ecmp run and an srv6 run"):
        compare(srv6, ecmp, seed=1)


def test_comparison_json_round_trip_and_documented(tmp_path):
    c = _comparison()
    path = tmp_path / "cmp.json"
    c.write_json(path)
    doc = json.loads(path.read_text())
    assert doc["kind"] == "ecmp_vs_srv6" and set(doc["modes"]) == set(doc["runs"]) == {"srv6", "ecmp"}
    assert ComparisonReport.read_json(path) == c
    schema = ComparisonReport.model_json_schema()
    names = set(schema["properties"])
    for model in schema["$defs"].values():
        names |= set(model.get("properties", {}))
    documented = set(re.findall(r"`([a-z0-9_]+)`", DOCS.read_text()))
    assert names - documented == set()


def test_rendered_comparison_and_mode_line():
    c = _comparison()
    console = Console(record=True, width=200)
    console.print(render_comparison(c))
    text = console.export_text()
    for needle in ("the cost of opaque paths", "ecmp - srv6", "packets lost", "sent by the requestor, never at",
                   "EV-hash mode", "ecmp.zero_bytes_lost", f"{c.difference.packets_lost:+d}"):
        assert needle in text, needle
    assert "FAILED" not in text
    console = Console(record=True, width=200)
    console.print(render(c.runs["srv6"]))
    assert "srv6 (SRv6 uSID source routing" in console.export_text()


def test_comparison_plot_is_a_png(tmp_path):
    out = plot_comparison(_comparison(), tmp_path / "cmp.png")
    raw = out.read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", raw[16:24])
    assert width > 1000 and height > 700
