"""The demo's report, checks, JSON and plot on synthetic runs (no fabric needed)."""

import json
import re
import struct
from pathlib import Path

import pytest
from support.demo_synthetic import PATHS, synthetic_run
from rich.console import Console

from mrckit.apps.demo.plots import plot_report, rates
from mrckit.apps.demo.render import render
from mrckit.apps.demo.report import DemoReport, json_schema
from mrckit.apps.demo.scenario import Phases, analyze
from mrckit.apps.demo.series import PathCounter, Recorder

DOCS = Path(__file__).resolve().parents[3] / "docs" / "demo.md"


def _check(report, name):
    return next(c for c in report.checks if c.name == name)


def test_phases_fire_once_at_a_third_and_two_thirds():
    ph = Phases(300)
    assert [ph.due(n) for n in (0, 99, 100, 150, 199, 200, 250, 300)] == \
        [None, None, "fail", None, None, "restore", None, None]
    with pytest.raises(ValueError, match="positive"):
        Phases(0)


def test_restore_waits_for_the_minimum_fault_but_not_past_the_latest_fraction():
    ph = Phases(1000, min_fault_ns=100, latest_restore=0.8)
    assert ph.due(400, now_ns=10) == "fail"
    assert ph.due(700, now_ns=50) is None          # two thirds, but the fault is 40 ns old
    assert ph.due(750, now_ns=110) == "restore"    # 100 ns of fault
    ph = Phases(1000, min_fault_ns=100, latest_restore=0.8)
    assert ph.due(340, now_ns=0) == "fail"
    assert ph.due(799, now_ns=20) is None
    assert ph.due(800, now_ns=30) == "restore"     # 80 % of the bytes: restore anyway


def test_path_counter_keeps_counts_across_replacement_and_return():
    pc = PathCounter()
    a, b = 0x0010_0001, 0x0000_0002
    pc.update([dict(ev=a, plane=0, t1=1, tx_packets=10)])
    pc.update([dict(ev=a, plane=0, t1=1, tx_packets=15)])            # same life
    pc.update([dict(ev=b, plane=0, t1=0, tx_packets=4),               # took a's slot
               dict(ev=a, plane=0, t1=1, tx_packets=15)])             # a retired, count kept
    pc.update([dict(ev=a, plane=0, t1=1, tx_packets=3)])              # a back, fresh counters
    assert pc.per_ev() == {a: 18, b: 4}
    assert pc.per_path() == {(0, 1): 18, (0, 0): 4}


def test_path_counter_takes_a_retired_snapshot_as_the_same_life():
    pc = PathCounter()
    a = 0x0010_0001
    pc.update([dict(ev=a, plane=0, t1=1, tx_packets=8)])                     # in its slot
    pc.update([dict(ev=a, plane=0, t1=1, tx_packets=6, retired=True)])       # agent's older copy
    assert pc.per_ev() == {a: 8}
    pc.update([dict(ev=a, plane=0, t1=1, tx_packets=9, retired=True)])       # a later copy
    pc.update([dict(ev=a, plane=0, t1=1, tx_packets=2)])                     # back in a slot
    assert pc.per_ev() == {a: 11}


def test_a_recorder_counts_from_its_first_read_so_an_earlier_write_is_left_out():
    rec = Recorder(0, [(0, 0), (0, 1)])
    a, b = 0x0010_0001, 0x0000_0002
    rec.begin([dict(ev=a, plane=0, t1=1, tx_packets=100)])               # the warm-up write's
    rec.record(10, 0, [dict(ev=a, plane=0, t1=1, tx_packets=130), dict(ev=b, plane=0, t1=0, tx_packets=5)])
    assert rec.ev_samples[-1] == (10, {a: 30, b: 5})
    assert rec.samples[-1].path_packets == {(0, 0): 5, (0, 1): 30}
    rec.record(20, 0, [dict(ev=a, plane=0, t1=1, tx_packets=2)])         # a back in a slot, fresh counters
    assert rec.ev_samples[-1][1] == {a: 32, b: 5}  # 30 + 2


@pytest.mark.parametrize("kind", ["down", "blackhole"])
def test_down_run_passes_with_silent_dead_path(kind):
    report = analyze(synthetic_run(kind))
    assert report.passed, [c for c in report.checks if not c.ok]
    f = report.failover
    assert f.t_fault_s == pytest.approx(1.0) and f.t_restore_s == pytest.approx(2.0)
    assert f.t_first_assumed_bad_s == pytest.approx(1.005)
    assert f.t_out_of_service_s == pytest.approx(1.005)  # every dead EV retired by then
    assert f.t_failover_s == pytest.approx(1.005)        # and its last packet (1.0 s) had left
    assert f.t_deny_s == pytest.approx(1.031) and f.deny_links == ["p0/t0-1/t1-1"]
    assert f.t_deny_lifted_s == pytest.approx(2.040)
    assert f.t_last_dead_tx_s == pytest.approx(1.0)
    assert f.dead_path_packets_failover_to_restore == 0
    dead = next(p for p in report.paths if p.failed)
    assert (dead.plane, dead.spine, dead.packets_during, dead.retired, dead.probed_back) == (0, 1, 32, 32, 32)
    assert dead.packets_after > 0
    assert sum(p.packets_total for p in report.paths) == report.bytes.sent // 2048
    assert len(report.ev_cycles) == 32 and all(c.retired == 1 for c in report.ev_cycles)


def test_dead_path_that_keeps_sending_fails_the_check():
    report = analyze(synthetic_run("down", silent=False))
    c = _check(report, "failed_path_silent")
    assert not c.ok and not report.passed
    assert report.failover.dead_path_packets_failover_to_restore > 0


def test_dead_path_never_back_fails_the_check():
    report = analyze(synthetic_run("down", back=False))
    assert not _check(report, "failed_path_back").ok and not report.passed


def test_corrupt_data_fails_the_byte_check():
    report = analyze(synthetic_run("down", corrupt=True))
    assert not _check(report, "bytes_verified").ok and not report.passed


@pytest.mark.parametrize("kind", ["loss", "flap"])
def test_lossy_run_shows_smaller_share_and_cycles(kind):
    report = analyze(synthetic_run(kind))
    assert report.passed, [c for c in report.checks if not c.ok]
    dead = next(p for p in report.paths if p.failed)
    healthy = [p for p in report.paths if not p.failed]
    assert dead.share_during < min(p.share_during for p in healthy)
    assert dead.retired == dead.probed_back == 10
    assert report.series.failed_path_retired_t_s and report.series.failed_path_probed_back_t_s


def test_json_round_trip_and_every_field_documented(tmp_path):
    report = analyze(synthetic_run("down"))
    path = tmp_path / "out" / "report.json"
    report.write_json(path)
    doc = json.loads(path.read_text())
    assert doc["bytes"]["verified"] == doc["bytes"]["sent"] and doc["passed"] is True
    assert DemoReport.read_json(path) == report
    assert set(doc["series"]["path_packets"]) == {f"p{p}/s{s}" for p, s in PATHS}
    # docs/demo.md names every field of every model in the schema.
    schema = json.loads(json_schema())
    names = set(schema["properties"])
    for model in schema["$defs"].values():
        names |= set(model.get("properties", {}))
    documented = set(re.findall(r"`([a-z0-9_]+)`", DOCS.read_text()))
    assert names - documented == set()


def test_rendered_report_names_the_figures():
    report = analyze(synthetic_run("down"))
    console = Console(record=True, width=160)
    console.print(render(report))
    text = console.export_text()
    for needle in ("controller DENY", "p0/s1 (failed)", "RTO_TIMEOUT", "bytes_verified", "failed_path_silent",
                   "matches", "p0-t1-1"):
        assert needle in text, needle
    assert "FAILED" not in text


def test_plot_is_a_png_with_both_panels(tmp_path):
    report = analyze(synthetic_run("down"))
    out = plot_report(report, tmp_path / "plot" / "demo.png")
    raw = out.read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", raw[16:24])
    assert width > 1000 and height > 700
    # the failed path's rate goes to zero during the fault and is positive before and after
    mids, pps = rates(report.series.t_s, report.series.path_packets["p0/s1"])
    during = [v for t, v in zip(mids, pps) if 1.1 < t < 1.95]
    assert during and max(during) == 0
    assert min(v for t, v in zip(mids, pps) if t < 0.95) > 0 and max(v for t, v in zip(mids, pps) if t > 2.1) > 0


def test_plot_refuses_an_empty_series(tmp_path):
    report = analyze(synthetic_run("down"))
    report.series.t_s = report.series.t_s[:1]
    with pytest.raises(ValueError, match="fewer than two samples"):
        plot_report(report, tmp_path / "x.png")


@pytest.mark.parametrize("kind", ["down", "flap", "loss", "blackhole"])
def test_a_fault_that_hit_the_write_is_recorded(kind):
    report = analyze(synthetic_run(kind))
    c = _check(report, "fault_took_effect")
    assert c.ok, c.detail
    fe = report.fault_effect
    if kind in ("loss", "blackhole"):
        assert fe.fault_program_drops == 100 and "dropped 100 packets" in c.detail
    else:
        assert fe.down_transitions == (1 if kind == "down" else 2) and fe.dead_link_packets_after > 0


def test_a_flap_that_never_went_down_during_the_write_fails_and_says_use_a_larger_size():
    report = analyze(synthetic_run("flap", flap_downs=0))
    c = _check(report, "fault_took_effect")
    assert not c.ok and not report.passed
    assert "never went down before the write completed" in c.detail and "larger --size" in c.detail


def test_a_down_link_no_data_was_sent_toward_fails():
    run = synthetic_run("down")
    run.dead_evs = frozenset()  # no EV of the sender crossed the link: the fault hit nothing
    report = analyze(run)
    c = _check(report, "fault_took_effect")
    assert not c.ok and "0 data packets" in c.detail and "larger --size" in c.detail


def test_a_failover_faster_than_the_samples_counts_from_the_dataplanes_clock():
    """Dead EVs retired within one sampling interval leave the samples no packet to count
    after the fault; a dead EV's own last send after the first drop still shows the hit."""
    from mrckit.apps.demo.scenario import fault_took_effect
    report = analyze(synthetic_run("down"))
    report.fault_effect.dead_link_packets_after = 0
    assert all(not m.last_tx_us for m in report.failover.dead_ev_marks)
    c = fault_took_effect(report)
    assert not c.ok and "0 data packets" in c.detail and "larger --size" in c.detail
    report.failover.dead_ev_marks[3].last_tx_us = 8400.0   # sent on 8.4 ms after the first drop
    c = fault_took_effect(report)
    assert c.ok and "1 of them sent on after the fault" in c.detail and "larger" not in c.detail


@pytest.mark.parametrize("drops, words", [(0, "dropped nothing"), (None, "counters unread")])
def test_a_loss_fault_that_dropped_nothing_fails(drops, words):
    report = analyze(synthetic_run("blackhole", drops=drops))
    c = _check(report, "fault_took_effect")
    assert not c.ok and not report.passed and words in c.detail and "larger --size" in c.detail


def test_failed_path_silent_says_what_is_missing_instead_of_none():
    from mrckit.apps.demo.scenario import checks

    report = analyze(synthetic_run("down"))
    report.failover.dead_path_packets_failover_to_restore = None
    report.failover.t_failover_s = None
    c = next(x for x in checks(report) if x.name == "failed_path_silent")
    assert not c.ok and "None" not in c.detail and "never took the path out of service" in c.detail
    report.failover.t_failover_s = report.failover.t_restore_s - 0.001
    c = next(x for x in checks(report) if x.name == "failed_path_silent")
    assert not c.ok and "None" not in c.detail and "less than one sampling interval" in c.detail


def test_transitions_table_shows_a_paths_evs_retired_together():
    per_ev = {(t.reason, t.new_state): t for t in analyze(synthetic_run("down")).ev_transitions}
    assert per_ev[("RTO_TIMEOUT", "ASSUMED_BAD")].together == 1
    report = analyze(synthetic_run("down", path_retire=True))
    rows = {(t.reason, t.new_state): t for t in report.ev_transitions}
    assert (rows[("LOSS", "ASSUMED_BAD")].count, rows[("LOSS", "ASSUMED_BAD")].together) == (1, 32)
    assert (rows[("PATH_LOSS", "ASSUMED_BAD")].count, rows[("PATH_LOSS", "ASSUMED_BAD")].together) == (31, 32)
    assert report.passed
    console = Console(record=True, width=160)
    console.print(render(report))
    line = next(x for x in console.export_text().splitlines() if "PATH_LOSS" in x and "ASSUMED_BAD" in x)
    assert [c.strip() for c in line.split("│") if c.strip()][-2:] == ["31", "32"]


def test_a_read_that_the_agent_answered_after_the_restore_is_not_counted_as_during_the_fault():
    # The sampler stamps a read when it begins; an agent slow to answer returns counts that
    # include the dead path's first packets after the restore.
    run = synthetic_run("down")
    rec = run.recorder
    i = next(i for i, s in enumerate(rec.samples) if s.t_ns > run.t_restore_ns)
    rec.samples[i].t_ns = run.t_restore_ns - 1
    rec.ev_read_end_ns[i] = run.t_restore_ns + 5 * 1_000_000
    report = analyze(run)
    assert report.failover.dead_path_packets_failover_to_restore == 0
    assert _check(report, "failed_path_silent").ok
