"""``mrc controller run`` on the whole default fabric (ten eBPF switches, each with its P4Runtime
server process), killed and restarted: the restart writes nothing. ``mrc controller status``
(over the controller's northbound socket) and ``mrc shell SWITCH`` on the same switches."""

import dataclasses
import json
import os
import signal
import subprocess
import time

import pytest

from mrckit.control import read_status, saved_status_path
from mrckit.errors import MrcError
from mrckit.topology import GrpcEndpoint, compile_fabric, dump_topology, generate_clos

from support.control_cli import MRC, READY_TIMEOUT_S, start
from support.paths import DEVICE_CONFIG, P4INFO, ROOT

TOPO = generate_clos()


@pytest.fixture
def fabric(switches, tmp_path):
    """Every switch of the default fabric running; a topology file that names their servers."""
    sws = switches([s.name for s in TOPO.switches])
    topo = dataclasses.replace(TOPO, switches=tuple(
        dataclasses.replace(s, p4runtime=GrpcEndpoint(sws[s.name].address)) for s in TOPO.switches))
    path = tmp_path / "fabric.yaml"
    dump_topology(topo, str(path))
    (tmp_path / "device_config.json").write_bytes(DEVICE_CONFIG)
    return sws, path


def run_args(topo, tmp_path, name):
    return [*MRC, "controller", "run", str(topo), "--name", name, "--run-dir", str(tmp_path),
            "--p4info", str(P4INFO), "--device-config", str(tmp_path / "device_config.json")]


def totals(status):
    return {n: s["total"] for n, s in status["switches"].items()}


def test_controller_killed_and_restarted_writes_nothing(fabric, tmp_path):
    sws, topo = fabric
    compiled = compile_fabric(TOPO)
    name = f"ctl{os.getpid()}"
    first = start(run_args(topo, tmp_path, name))
    try:
        status = read_status(name, tmp_path)
        assert status["running"] and status["ready"]
        for sw in TOPO.switches:
            t = totals(status)[sw.name]
            n = len(compiled.entries(sw.name))
            assert t["pipeline_pushed"] and (t["inserted"], t["modified"], t["deleted"]) == (n, 0, 0)
            assert status["switches"][sw.name]["connected"]
    finally:
        first.send_signal(signal.SIGKILL)  # no goodbye: like a crash
        first.wait()
    before = {n: sw.entries() for n, sw in sws.items()}

    second = start(run_args(topo, tmp_path, name))
    try:
        status = read_status(name, tmp_path)
        for sw in TOPO.switches:
            t = totals(status)[sw.name]
            assert not t["pipeline_pushed"]
            assert (t["inserted"], t["modified"], t["deleted"], t["write_requests"]) == (0, 0, 0, 0)
            assert t["entries_read"] == len(compiled.entries(sw.name))
        assert {n: sw.entries() for n, sw in sws.items()} == before
        # A switch's server restarts under the running controller: it reconnects, reconciles
        # again, and writes nothing.
        sws["p0-t0-0"].stop()
        sws["p0-t0-0"].start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            s = read_status(name, tmp_path)["switches"]["p0-t0-0"]
            if s["reconciles"] == 2 and s["connected"]:
                break
            time.sleep(0.1)
        assert s["reconciles"] == 2 and s["connected"], s
        assert s["total"]["write_requests"] == 0 and not s["total"]["pipeline_pushed"]
        shown = subprocess.run([*MRC, "controller", "status", "--name", name, "--run-dir", str(tmp_path)],
                               capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0, shown.stderr
        assert f"controller {name}: running, pid {second.pid}" in shown.stdout
        assert "links believed down: none" in shown.stdout and "denials: none" in shown.stdout
        assert sum(" up " in line for line in shown.stdout.splitlines()) == len(TOPO.switches)
    finally:
        second.send_signal(signal.SIGINT)
        out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err[-3000:]
    assert "controller stopped" in out
    with pytest.raises(MrcError, match="no controller socket at"):  # it removed its socket
        read_status(name, tmp_path)
    assert json.loads(saved_status_path(name, tmp_path).read_text())["pid"] == 0  # saved: stopped


def test_once_programs_nothing_new_and_shell_finds_a_switch_by_name(fabric, tmp_path):
    sws, topo = fabric
    args = run_args(topo, tmp_path, "once") + ["--once"]
    first = subprocess.run(args, capture_output=True, text=True, timeout=READY_TIMEOUT_S, cwd=ROOT)
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stdout.count("pipeline pushed") == len(TOPO.switches)
    again = subprocess.run(args, capture_output=True, text=True, timeout=READY_TIMEOUT_S, cwd=ROOT)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("kept (cookie matches)") == len(TOPO.switches)
    assert again.stdout.count("insert    0  modify   0  delete   0") == len(TOPO.switches)
    assert not (tmp_path / "once.sock").exists()  # one shot: no northbound
    status = json.loads(saved_status_path("once", tmp_path).read_text())
    assert status["ready"] and status["pid"] == 0
    assert all(s["reconciles"] == 1 and s["total"]["write_requests"] == 0 for s in status["switches"].values())
    shell_python = ROOT / ".venv-p4rt/bin/python"
    if not shell_python.exists():
        pytest.skip("p4runtime-shell virtualenv .venv-p4rt missing: run `make p4rt-shell`")
    n = len(compile_fabric(TOPO).switch("p0-t1-1").table("usid_fib"))
    shell = subprocess.run([*MRC, "shell", "p0-t1-1", "--topo", str(topo)], capture_output=True, text=True,
                           input="print('ENTRIES', len(list(TableEntry('usid_fib').read())))\nexit()\n",
                           timeout=120, cwd=ROOT)
    assert shell.returncode == 0, shell.stderr[-3000:]
    assert f"ENTRIES {n}" in shell.stdout
