"""A second controller under a name whose controller is alive is refused (it would steal
primary from it); a stopped, dead or recycled-pid one is not in the way."""

import json
import subprocess
import time
from pathlib import Path

import pytest

from mrckit.control import Controller, load_pipeline
from mrckit.control.status import check_not_running, status_path
from mrckit.errors import MrcError
from mrckit.topology import generate_clos

P4INFO = Path(__file__).resolve().parents[3] / "p4src/build/mrc_switch.p4info.txtpb"


@pytest.fixture
def live_pid():
    proc = subprocess.Popen(["sleep", "60"])
    time.sleep(0.05)
    yield proc.pid
    proc.kill()
    proc.wait()


def write(tmp_path, pid, updated_ns):
    path = status_path("lab", tmp_path)
    path.write_text(json.dumps({"name": "lab", "pid": pid, "updated_ns": updated_ns, "timeline": []}))
    return path


def test_a_running_controller_of_that_name_is_refused(tmp_path, live_pid):
    write(tmp_path, live_pid, time.time_ns())
    with pytest.raises(MrcError, match=rf"controller 'lab' is already running \(pid {live_pid}.*kill {live_pid}"):
        Controller(generate_clos(), [], [], load_pipeline(str(P4INFO), "/dev/null"), name="lab",
                   status_dir=tmp_path)


def test_stopped_dead_and_recycled_pids_are_not_in_the_way(tmp_path, live_pid):
    check_not_running(status_path("none", tmp_path))  # no file
    check_not_running(write(tmp_path, 0, time.time_ns()))  # stopped cleanly
    dead = subprocess.Popen(["true"])
    dead.wait()
    check_not_running(write(tmp_path, dead.pid, time.time_ns()))
    # The pid is alive, but its process started long after the file's last write.
    check_not_running(write(tmp_path, live_pid, time.time_ns() - 60_000_000_000))


def test_status_shows_the_links_the_guard_withheld():
    from mrckit.cli.controller import _status_lines

    st = {"name": "lab", "running": False, "pid": 0, "topology": "t", "ready": True,
          "pipeline": {"cookie": 1, "p4info": "x"}, "switches": {}, "hosts": {}, "links_down": [], "denials": {},
          "withheld": {"p0/t0-0/down-0": "host link on ambiguous evidence (hosts report their own ports)"},
          "localisation": None, "timeline": []}
    assert "  withheld p0/t0-0/down-0: host link on ambiguous evidence (hosts report their own ports)" \
        in _status_lines(st)
