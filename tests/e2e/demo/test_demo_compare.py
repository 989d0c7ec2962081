"""`mrc demo --mode ecmp` without a fabric: the loss accounting (mrckit.apps.demo.loss) on
hand-made counts, and the comparison report, its rendering, JSON and plot on synthetic runs."""

import json
import re
import struct
from pathlib import Path

import pytest
from support.demo_synthetic import synthetic_run, with_rx
from rich.console import Console

from mrckit.apps.demo.compare import ComparisonReport, compare
from mrckit.apps.demo.loss import fault_window, link_loss, loss_series, loss_stats, per_ev_loss
from mrckit.apps.demo.plots import plot_comparison
from mrckit.apps.demo.render import render, render_comparison
from mrckit.apps.demo.scenario import analyze

DOCS = Path(__file__).resolve().parents[3] / "docs" / "demo.md"
MS = 1_000_000
A, B = 0x0010_0001, 0x0000_0002


def _sends(times_ms):
    return [t * MS for t in times_ms]


def test_per_ev_loss_is_sent_minus_received():
    assert per_ev_loss({A: 10, B: 5}, {A: _sends(range(7)), B: _sends(range(5))}) == {A: 3}
    assert per_ev_loss({A: 4}, {}) == {A: 4}
    assert per_ev_loss({A: 4}, {A: _sends(range(6))}) == {}  # more arrived than counted: never negative


def test_loss_curve_and_last_loss_count_by_send_time():
    # A sends every 10 ms from 5 ms on; the packets sent at 55 and 355 ms are lost. B loses none.
    sends = list(range(5, 500, 10))
    reads = [0, 100, 200, 300, 400, 500]
    reads[2] = 207  # the counters of the 200 ms sample were read late: they hold the send of 205 ms
    tx = [(t * MS, {A: sum(1 for x in sends if x <= r), B: 3}) for t, r in zip((0, 100, 200, 300, 400, 500), reads)]
    cut = [{A: max((x for x in sends if x <= r), default=0) * MS, B: 3 * MS} for r in reads]
    rx = {A: _sends(x for x in sends if x not in (55, 355)), B: _sends([1, 2, 3])}
    lost = per_ev_loss(tx[-1][1], rx)
    assert lost == {A: 2}
    # cut at each EV's last counted send, the deficit is exact: packets in flight count as
    # arrived (their send times are known) and a late read changes nothing
    series = loss_series(tx, cut, rx, lost)
    assert series == [0, 1, 1, 1, 2, 2]
    ends = [t + 30 * MS for t, _ in tx]  # each read of the EV table took 30 ms
    # a fault from 0 to 450 ms: both losses are its, the last one by the 400 ms sample
    assert fault_window(tx, ends, series, 0, 450 * MS) == (2, 400 * MS)
    # a fault from 120 to 250 ms: the first loss came before it (the 100 ms read ended at
    # 130 ms, after the fault began, so the window starts at the 0 ms sample), the second after it
    assert fault_window(tx, ends, series, 120 * MS, 250 * MS) == (1, 100 * MS)
    assert fault_window(tx, ends, series, 140 * MS, 250 * MS) == (0, None)
    assert loss_series(tx, cut, rx, {}) == [0] * 6
    # an arrival dated one TSETH wrap late (it waited over 67 ms in the responder's queue)
    # makes the 200 ms deficit 2 for a moment; the curve does not take it
    late = {A: sorted(t + 67 * MS if t == 185 * MS else t for t in rx[A]), B: rx[B]}
    assert loss_series(tx, cut, late, lost) == series


def test_loss_stats_totals_retirements_and_link():
    tx = [(1000 * MS, {A: 0}), (1100 * MS, {A: 10})]
    stats = loss_stats(tx_samples=tx, last_tx=[{A: 0}, {A: 1099 * MS}], read_end_ns=[1000 * MS, 1100 * MS],
                       rx_sent={A: _sends(range(1001, 1008))}, packets_sent=12,
                       packets_received=9, t_fault_ns=1000 * MS, t_restore_ns=2000 * MS,
                       retirements=[(900 * MS, A), (1010 * MS, A), (1020 * MS, A), (1030 * MS, B), (2100 * MS, B)],
                       link_packets_lost=40)
    assert (stats.packets_lost, stats.packets_lost_to_fault, stats.packets_lost_by_ev, stats.evs_with_loss) == \
        (3, 3, 3, 1)
    assert (stats.evs_retired, stats.evs_retired_distinct, stats.link_packets_lost) == (3, 2, 40)
    assert stats.t_last_loss_s == pytest.approx(0.1) and stats.t_s == [0.0, 0.1] and stats.lost == [0, 3]


def test_link_loss_counts_both_directions():
    before = dict(a_tx=100, a_rx=200, b_tx=300, b_rx=400)
    after = dict(a_tx=150, a_rx=230, b_tx=340, b_rx=420)  # a sent 50, b got 20; b sent 40, a got 30
    assert link_loss(before, after) == (50 - 20) + (40 - 30)


def _comparison():
    ecmp = analyze(with_rx(synthetic_run("down"), 3, "ecmp"))
    srv6 = analyze(with_rx(synthetic_run("down"), 1, "srv6"))
    return compare(ecmp, srv6, seed=42)


def test_ecmp_run_is_judged_by_its_own_checks():
    ecmp = analyze(with_rx(synthetic_run("down"), 3, "ecmp"))
    assert ecmp.mode == "ecmp"
    assert [c.name for c in ecmp.checks] == ["bytes_verified", "fault_took_effect", "planes_carry"]
    assert ecmp.passed, ecmp.checks
    assert ecmp.loss.packets_lost == ecmp.loss.packets_lost_by_ev == 3 * ecmp.loss.evs_with_loss > 0


def test_comparison_figures_and_difference():
    c = _comparison()
    s, e, d = c.modes["srv6"], c.modes["ecmp"], c.difference
    assert (s.mode, e.mode) == ("srv6", "ecmp")
    assert e.packets_lost == 3 * s.packets_lost and d.packets_lost == e.packets_lost - s.packets_lost
    assert d.packets_lost_to_fault == e.packets_lost_to_fault - s.packets_lost_to_fault
    assert d.link_packets_lost == e.link_packets_lost - s.link_packets_lost
    assert d.evs_retired == e.evs_retired - s.evs_retired
    assert d.t_last_loss_s == pytest.approx(e.t_last_loss_s - s.t_last_loss_s)
    assert {c.name for c in c.checks} >= {"srv6.bytes_verified", "ecmp.planes_carry", "ecmp.zero_bytes_lost",
                                          "srv6.zero_bytes_lost", "srv6.failed_path_silent"}
    assert c.passed, [x for x in c.checks if not x.ok]


def test_dead_link_figures_and_fault_duration_per_mode():
    c = _comparison()
    for mode, lost_per_ev in (("ecmp", 3), ("srv6", 1)):
        m = c.modes[mode]
        # The synthetic sender has 32 EVs on p0/s1 at fault time; each is retired, and loses
        # lost_per_ev packets before it stops being used.
        assert (m.dead_link_evs, m.dead_link_evs_retired) == (32, 32)
        assert m.dead_link_packets_lost == 32 * lost_per_ev
        assert m.fault_duration_s == pytest.approx(1.0)
    assert c.difference.dead_link_packets_lost == 64 and c.difference.fault_duration_s == pytest.approx(0.0)


def test_compare_refuses_runs_that_differ():
    ecmp = analyze(with_rx(synthetic_run("down"), 3, "ecmp"))
    srv6 = analyze(with_rx(synthetic_run("loss"), 1, "srv6"))
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
    for needle in ("the cost of opaque paths", "ecmp - srv6", "lost, fault to restore",
                   "EVs via the dead link", "  retired or denied", "  packets lost on them",
                   "fault duration", "dead-link drops (switch)", "never reached the responder",
                   "EV-hash mode", "ecmp.zero_bytes_lost", f"{c.difference.packets_lost:+d}"):
        assert needle in text, needle
    assert "FAILED" not in text and "lost on the failed link" not in text
    console = Console(record=True, width=200)
    console.print(render(c.runs["srv6"]))
    assert "srv6 (SRv6 uSID source routing" in console.export_text()


def test_comparison_plot_is_a_png(tmp_path):
    out = plot_comparison(_comparison(), tmp_path / "cmp.png")
    raw = out.read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", raw[16:24])
    assert width > 1000 and height > 700


@pytest.mark.parametrize("mode", ["srv6", "ecmp"])
def test_a_bad_fabric_name_is_refused_before_anything_is_printed_or_built(mode):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", "import sys; from mrckit.cli import main; sys.exit(main())",
                           "demo", "--mode", mode, "--name", "Bad-Name"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "fabric name 'Bad-Name'" in proc.stderr, proc.stderr
    assert "bringing up" not in proc.stdout and "Traceback" not in proc.stderr
