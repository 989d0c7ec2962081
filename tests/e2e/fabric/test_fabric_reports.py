"""`mrc fabric down` removes the saved status of a fabric's controller
(`/run/mrckit/controller/<name>.state.json`, what a restarted controller takes over: the links
reported down) and a socket a killed controller left, also when nothing else of the fabric is
left, and `--all` removes those of every controller that is not running: a later fabric of the
same name must not start with an old fabric's links down."""

import json
import os
from pathlib import Path

from click.testing import CliRunner

from mrckit.cli import main
from mrckit.control import controller_address, saved_status_path
from mrckit.fabric import teardown


def _name(tag):
    return f"rp{tag}{os.getpid() % 100000}"


def _leave_behind(name):
    """What a controller killed under ``name`` leaves: its saved status and its socket file."""
    saved = saved_status_path(name)
    saved.parent.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps({"name": name, "pid": 0, "reported_down": {"p0/t0-1/t1-1": 1}, "timeline": []}))
    sock = Path(controller_address(name).removeprefix("unix:"))
    sock.touch()
    return saved, sock


def test_fabric_down_removes_a_leftover_controller_state():
    name = _name("a")
    saved, sock = _leave_behind(name)
    out = CliRunner().invoke(main, ["fabric", "down", name])
    assert out.exit_code == 0, out.output
    assert "removed its controller's leftover saved status" in out.output
    assert not saved.exists() and not sock.exists()
    again = CliRunner().invoke(main, ["fabric", "down", name])  # nothing left: the usual error
    assert again.exit_code == 2 and f"no fabric named {name!r} is up" in again.output


def test_down_all_forgets_controllers_that_are_not_running():
    name = _name("b")
    saved, sock = _leave_behind(name)
    assert name in teardown.stale_controllers()
    assert not saved.exists() and not sock.exists()
