"""`mrc traffic`: many QPs at once across emulated fabrics, every byte verified."""

import json
import os

import pytest
from support.fabric_helpers import RUN_PREFIX, controller_args, fabric_name, leftovers, mrc

from mrckit.apps.traffic import make_flows, run_traffic
from mrckit.fabric.fabric import Fabric
from mrckit.topology import generate_clos

SIZE = 16 << 10
TIMEOUT_S = 240.0
TIMEOUT_EXP = 18
"""The writers' RTO, 1.024 us × 2^18 = 268 ms: 16 endpoints share 2 cores here."""


@pytest.fixture(scope="module")
def fabric16():
    """4 planes × 4 spines × 8 leaves × 2 hosts: 16 hosts, 48 eBPF switches."""
    if os.geteuid() != 0:
        pytest.skip("needs root: network namespaces and BPF")
    fab = Fabric.up(generate_clos(4, 4, 8, 2), name=fabric_name("traffic16"), target="ebpf",
                    prefix=RUN_PREFIX, controller_args=controller_args())
    yield fab
    fab.down()
    assert leftovers(RUN_PREFIX + fab.name, fab.name) == {}


def test_all_to_all_between_every_pair_of_16_hosts_verifies_every_byte(fabric16):
    hosts = fabric16.hosts()
    flows = make_flows("all-to-all", hosts, SIZE)
    assert len(flows) == 16 * 15
    report = run_traffic(fabric16, "all-to-all", flows, endpoint="native", timeout=TIMEOUT_S, timeout_exp=TIMEOUT_EXP)
    assert [f.error for f in report.flows if not f.ok] == []
    assert {(f.src, f.dst) for f in report.flows} == {(a, b) for a in hosts for b in hosts if a != b}
    assert all(f.verified for f in report.flows)
    summary = report.summary()
    assert summary.ok == 240 and summary.bytes_verified == 240 * SIZE


def test_the_cli_runs_an_incast_and_writes_its_report_and_plot(small_fabric, tmp_path):
    out = mrc("traffic", "incast", "--fabric", small_fabric.name, "--endpoint", "python", "-k", "3", "--size", "32K",
              "--timeout-exp", str(TIMEOUT_EXP), "--json", str(tmp_path / "t.json"), "--plot", str(tmp_path / "t.png"),
              timeout=TIMEOUT_S + 60)
    assert out.returncode == 0, out.stdout + out.stderr
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["pattern"] == "incast" and doc["endpoint"] == "python" and len(doc["flows"]) == 3
    assert {f["dst"] for f in doc["flows"]} == {small_fabric.hosts()[0]}
    assert all(f["verified"] and f["error"] is None for f in doc["flows"])
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "3 (3 ok, 0 failed)" in out.stdout


def test_a_host_the_fabric_lacks_is_one_error_line(small_fabric):
    out = mrc("traffic", "ring", "--fabric", small_fabric.name, "--hosts", "h0-0,h9-9")
    assert out.returncode == 2 and "no host 'h9-9'" in out.stderr and "Traceback" not in out.stderr
