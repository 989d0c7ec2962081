"""`mrc experiment failover`, `flaps` and `incast` for real, on small fabrics with short
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
    proc = _mrc("experiment", name, "--out", str(tmp_path), "--name", f"te{os.getpid() % 10000}{name[:4]}", *extra)
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


def test_flaps_flap_the_link_at_each_rate_and_lose_no_byte(need_root, tmp_path):
    proc, record = _run(tmp_path, "flaps", "--per-minute", "120", "--duration", "3")
    _common(proc, record, tmp_path, "flaps")
    (rate,) = record["details"]["rates"]
    assert rate["per_minute"] == 120 and rate["flaps"] > 0 and rate["link_packets_lost"] > 0
    assert record["checks"]["the link flapped at every rate, by the switch counters and its down transitions"]


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
