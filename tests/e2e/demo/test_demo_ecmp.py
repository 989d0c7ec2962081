"""`mrc demo --mode ecmp` for real, at a small size: the same write and fault in EV-hash mode
and in SRv6 mode, both delivering every byte, and a report with both modes' loss figures
(docs/demo.md, "EV-hash mode"). Shapes and data integrity are asserted; timing and which mode lost more are not."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.root, pytest.mark.slow]
SIZE = 16 << 20
LOSS_FIELDS = ("packets_lost_to_fault", "packets_lost", "packets_lost_by_ev", "evs_with_loss", "evs_retired",
               "evs_retired_distinct")


def _demo(tmp_path, fail: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / f"ecmp-{fail}.json"
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from mrckit.cli import main; sys.exit(main())", "demo",
         "--mode", "ecmp", "--fail", fail, "--endpoint", "python", "--size", str(SIZE), "--json", str(out),
         "--plot", str(tmp_path / f"ecmp-{fail}.png"), "--name", f"te{os.getpid() % 10000}{fail[:3]}"],
        capture_output=True, text=True, timeout=600)
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads(out.read_text())


@pytest.mark.parametrize("fail", ["down", "loss"])
def test_demo_ecmp_compares_both_modes_with_every_byte_delivered(need_root, tmp_path, fail):
    proc, c = _demo(tmp_path, fail)
    assert c["kind"] == "ecmp_vs_srv6" and c["size"] == SIZE and c["fault"]["kind"] == fail
    assert set(c["modes"]) == set(c["runs"]) == {"srv6", "ecmp"}
    for mode in ("srv6", "ecmp"):
        run, m = c["runs"][mode], c["modes"][mode]
        assert run["mode"] == m["mode"] == mode and run["target"] == "ebpf"
        # zero bytes lost: every byte placed and equal to the source, SHA-256 equal
        b = run["bytes"]
        assert b["sent"] == b["placed"] == b["verified"] == SIZE and b["hash_match"], (mode, b)
        assert b["sha256_sent"] == b["sha256_received"]
        assert m["bytes_verified"] == SIZE and m["hash_match"]
        # the loss figures: counts, consistent with each other and with the run's report
        loss = run["loss"]
        for field in LOSS_FIELDS:
            assert isinstance(m[field], int) and m[field] >= 0 and m[field] == loss[field], (mode, field)
        assert loss["packets_sent"] - loss["packets_received"] == loss["packets_lost"]
        assert loss["packets_sent"] >= SIZE // 2048
        assert m["evs_retired_distinct"] <= m["evs_retired"]
        assert len(loss["t_s"]) == len(loss["lost"]) == len(run["series"]["t_s"]) >= 2
        assert loss["lost"][-1] == loss["packets_lost_by_ev"] <= loss["packets_lost"]
        assert (m["t_last_loss_s"] is None) == (loss["packets_lost_to_fault"] == 0)
        assert loss["packets_lost_to_fault"] <= loss["packets_lost_by_ev"]
        assert m["link_packets_lost"] is None or m["link_packets_lost"] >= 0
    # the same write and fault in both runs, and the difference is ecmp - srv6
    assert c["runs"]["srv6"]["fault"] == c["runs"]["ecmp"]["fault"] == c["fault"]
    for field in LOSS_FIELDS:
        assert c["difference"][field] == c["modes"]["ecmp"][field] - c["modes"]["srv6"][field]
    assert (tmp_path / f"ecmp-{fail}.png").read_bytes()[:4] == b"\x89PNG"
    assert "the cost of opaque paths" in proc.stdout and "ecmp - srv6" in proc.stdout
    assert c["passed"] == all(x["ok"] for x in c["checks"])
    assert (proc.returncode == 0) == c["passed"], proc.stdout[-2000:]


def test_demo_ecmp_refuses_a_long_name(need_root, tmp_path):
    proc = subprocess.run([sys.executable, "-c", "import sys; from mrckit.cli import main; sys.exit(main())",
                           "demo", "--mode", "ecmp", "--name", "a" * 16, "--json", str(tmp_path / "x.json")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "at most 15" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "x.json").exists()
