"""`mrc experiment failover`, `lossy-ev`, `flaps`, `random-loss`, `load-balance`, `t1-failure` and `incast`
for real, on small fabrics with short
writes: invariants only (docs/experiments.md): every byte verified, the fault shown by the
dataplane's counters, the record written with the machine and commit, and its row in the
table. No timing assertion: the figures depend on the machine's load."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.root, pytest.mark.slow]


def _mrc(*args: str, timeout: float = 400) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import sys; from mrckit.cli import main; sys.exit(main())", *args],
                          capture_output=True, text=True, timeout=timeout)


def _run(tmp_path, name: str, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    proc = _mrc("experiment", name, "--out", str(tmp_path), "--name", f"te{os.getpid() % 10000}{name.replace('-', '')[:4]}", *extra)
    path = tmp_path / f"{name}.json"
    assert path.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads(path.read_text())


def _common(proc, record: dict, tmp_path, name: str) -> None:
    assert record["name"] == name and record["link_speed_pps"] == 5000
    assert record["checks"]["every byte verified"], proc.stdout[-2000:]
    m = record["machine"]
    assert m["cores"] >= 1 and m["kernel"] and len(m["load_start"]) == 3 and m["load_end"]
    assert record["commit"]
    assert (tmp_path / record["plot"]).read_bytes()[:4] == b"\x89PNG"
    bench = [json.loads(ln[6:]) for ln in proc.stdout.splitlines() if ln.startswith("BENCH ")]
    assert len(bench) == len(record["figures"]) >= 2
    assert all(b["measure"].startswith(f"experiment {name}: ") and b["baseline"] for b in bench)
    assert (proc.returncode == 0) == all(record["checks"].values())
    table = _mrc("experiment", "table", "--results", str(tmp_path), "--out", str(tmp_path / "experiments.md"))
    assert table.returncode == 0, table.stderr[-2000:]
    page = (tmp_path / "experiments.md").read_text()
    assert f"| [{name}](#{name}) |" in page and record["command"] in page


def test_failover_bypasses_the_failed_link_and_loses_no_byte(need_root, tmp_path):
    proc, record = _run(tmp_path, "failover", "--duration", "2")
    _common(proc, record, tmp_path, "failover")
    d = record["details"]
    assert record["checks"]["the link failed, by the dataplane counters"]
    assert d["link_packets_lost"] > 0  # the switch counters at the failed link
    assert record["setting"]["failed_link"] == "p0/t0-1/t1-1"


def test_lossy_ev_drops_on_the_lossy_path_and_loses_no_byte(need_root, tmp_path):
    proc, record = _run(tmp_path, "lossy-ev", "--planes", "2", "--link-speed", "5000", "--duration", "2")
    _common(proc, record, tmp_path, "lossy-ev")
    assert record["checks"]["the path dropped packets, by the loss program's counters"]
    assert record["setting"]["lossy_link"] == "p0/t0-1/t1-1" and record["setting"]["loss_percent"] == 20.0


def test_flaps_flap_the_link_at_each_rate_and_lose_no_byte(need_root, tmp_path):
    proc, record = _run(tmp_path, "flaps", "--per-minute", "120", "--duration", "3")
    _common(proc, record, tmp_path, "flaps")
    (rate,) = record["details"]["rates"]
    assert rate["per_minute"] == 120 and rate["flaps"] > 0 and rate["link_packets_lost"] > 0
    assert record["checks"]["the link flapped at every rate, by the switch counters and its down transitions"]


def test_random_loss_runs_mrc_and_rc_each_against_its_loss_free_run(need_root, tmp_path):
    proc, record = _run(tmp_path, "random-loss", "--loss-percents", "2", "--write-bytes", "1M")
    _common(proc, record, tmp_path, "random-loss")
    runs = record["details"]["runs"]
    assert {(r["transport"], r["loss_percent"]) for r in runs} == {("mrc", 0), ("mrc", 2), ("rc", 0), ("rc", 2)}
    assert all(r["verified"] and r["bytes_per_qp"] == 1 << 20 for r in runs)
    assert record["checks"]["RC really on one path (the sender's per-EV counters)"]
    assert all(r["evs_used"] == 1 for r in runs if r["transport"] == "rc")
    assert all(r["evs_used"] > 1 for r in runs if r["transport"] == "mrc")
    assert all(r["fault_dropped"] > 0 for r in runs if r["loss_percent"])
    assert set(record["details"]["fraction_of_loss_free"]) == {"mrc", "rc"}


def test_load_balance_runs_one_mrc_qp_and_pinned_rc_qps_on_an_ecmp_fabric(need_root, tmp_path):
    proc, record = _run(tmp_path, "load-balance", "--rc-qps", "1,4", "--write-bytes", "1M", "--link-speed", "5000")
    _common(proc, record, tmp_path, "load-balance")
    runs = record["details"]["runs"]
    assert [(r["transport"], r["qps"]) for r in runs] == [("mrc", 1), ("rc", 1), ("rc", 4)]
    assert all(r["verified"] and len(r["pairs"]) == 2 for r in runs)
    assert record["checks"]["RC really single-path: each QP on one EV (the senders' per-EV counters)"]
    assert [r["evs_per_pair"] for r in runs if r["transport"] == "rc" and r["qps"] == 1] == [[1, 1]]
    assert all(e > 4 for e in runs[0]["evs_per_pair"])
    assert all(sum(r["links"].values()) > 0 and len(r["links"]) == 4 for r in runs)  # 2 planes x 2 spines
    assert record["setting"]["mode"] == "ecmp"


def test_t1_failure_drops_at_the_dead_t1_and_loses_no_byte(need_root, tmp_path):
    proc, record = _run(tmp_path, "t1-failure", "--planes", "1", "--spines", "2", "--leaves", "2",
                        "--hosts-per-leaf", "1", "--qps-per-pair", "2", "--duration", "4")
    assert record["checks"]["every byte verified, with and without the fault"], proc.stdout[-2000:]
    assert record["checks"]["the T1 dropped packets, by its links' fault-program counters"]
    assert record["checks"]["the T1 forwarded nothing during the fault, by its tx_port counters"]
    d = record["details"]
    assert d["fault_program_drops"] > 0 and d["t1_tx_during"] == 0
    assert d["qps"] == d["qps_across_t1"] == 4 and d["writers"] == 2
    assert d["qps_affected"] in (0, 2, 4)  # a pair's QPs share one EV set: affected together
    assert d["formula"] == 0.5 and record["setting"]["dead_t1"].startswith("p0-t1-")
    assert d["series_fault"]["gbps"] and d["series_baseline"]["gbps"]
    assert (tmp_path / record["plot"]).read_bytes()[:4] == b"\x89PNG"
    bench = [json.loads(ln[6:]) for ln in proc.stdout.splitlines() if ln.startswith("BENCH ")]
    assert [b["measure"] for b in bench] == [f"experiment t1-failure: {f['measure']}" for f in record["figures"]]
    assert bench[0]["baseline_value"] == 0.5
    assert proc.returncode == 0
    table = _mrc("experiment", "table", "--results", str(tmp_path), "--out", str(tmp_path / "experiments.md"))
    assert table.returncode == 0, table.stderr[-2000:]
    assert "| [t1-failure](#t1-failure) |" in (tmp_path / "experiments.md").read_text()


def test_incast_trims_with_trimming_on_not_off_and_loses_no_byte(need_root, tmp_path):
    """A 2-to-1 incast and its victim on the smallest fabric that has one (1 plane, 2 leaves of
    3 hosts), a shallow threshold and queue so that the incast surely congests the last hop."""
    proc, record = _run(tmp_path, "incast", "--planes", "1", "--leaves", "2", "--hosts-per-leaf", "3",
                        "--senders", "2", "--incast-size", "512K", "--victim-write", "16K", "--victim-writes", "32",
                        "--trim-threshold", "16", "--capacity", "16")
    runs = record["details"]["runs"]
    assert set(runs) == {"victim alone", "trimming on", "trimming off"}
    assert record["checks"]["every byte that arrived verified (no run placed a wrong byte)"], proc.stdout[-2000:]
    assert record["checks"]["every flow completed and verified, the victim alone and trimming on"]
    assert all(r["flows_verified"] == r["flows"] for k, r in runs.items() if k != "trimming off")
    assert runs["trimming off"]["flows_verified"] + len(runs["trimming off"]["failed"]) == 3
    assert runs["trimming on"]["flows"] == 3 and runs["victim alone"]["flows"] == 1
    on, off = runs["trimming on"], runs["trimming off"]
    assert on["trimmed"] > 0 and on["trim_thresholds"] == [16]  # the switches' own counters
    assert sum(c["trimmed"] for c in on["per_switch"].values()) == on["trimmed"]
    assert off["trimmed"] == 0 and off["trim_thresholds"] == [0xFFFFFFFF]
    assert set(off["sender_evs"]) <= {"h1-0", "h1-1", "h1-2"} and all(e["evs"] > 0 for e in off["sender_evs"].values())
    assert record["checks"]["the incast with trimming on trimmed, by the switch counters"]
    assert record["checks"]["with trimming off (threshold never on every port) no switch trimmed"]
    assert runs["victim alone"]["victim"]["writes"] == 32 and on["victim"]["writes"] >= 1
    assert record["details"]["placement"] == {"receiver": "h0-0", "senders": ["h1-0", "h1-1"], "victim_src": "h1-2",
                                              "victim_dst": "h0-1"}
    assert record["link_speed_pps"] == 1000 and record["commit"] and record["machine"]["load_end"]
    assert (tmp_path / record["plot"]).read_bytes()[:4] == b"\x89PNG"
    bench = [json.loads(ln[6:]) for ln in proc.stdout.splitlines() if ln.startswith("BENCH ")]
    assert len(bench) == len(record["figures"]) == 7
    assert all(b["measure"].startswith("experiment incast: ") and b["baseline"] for b in bench)
    assert (proc.returncode == 0) == all(record["checks"].values())
    table = _mrc("experiment", "table", "--results", str(tmp_path), "--out", str(tmp_path / "experiments.md"))
    assert table.returncode == 0, table.stderr[-2000:]
    page = (tmp_path / "experiments.md").read_text()
    assert "| [incast](#incast) |" in page and record["command"] in page
