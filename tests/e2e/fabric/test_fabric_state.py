"""Pieces of the emulator that need no root: names, the state file, process identity, the
EUI-64 neighbours, fault argument checks."""

import os
import subprocess
import sys

import pytest

from mrckit.errors import MrcError
from mrckit.fabric import faultctl, state
from mrckit.fabric.build import check_mtu, link_local


@pytest.mark.parametrize("bad", ["", "Up", "a-b", "x" * 17, "_x", "bmv2", "switch", "a/b"])
def test_fabric_names_are_checked(bad):
    with pytest.raises(MrcError, match="fabric name"):
        state.check_name(bad)


def test_state_round_trips_and_keeps_a_timestamped_fault_log(tmp_path, monkeypatch):
    monkeypatch.setattr(state, "RUN_ROOT", tmp_path)
    st = state.FabricState("lab", "mrcf-", "ebpf", "version: 1\n", nodes={"h0-0": "mrcf-lab-h0-0"},
                           links=[["p0-t0-0", "down-0", "h0-0", "plane0"]],
                           hosts={"h0-0": state.ProcInfo(1, 2, "unix:/x", ["a"], "/log")})
    st.save()
    with state.locked("lab"):
        back = state.FabricState.load("lab")
    assert back == st and state.list_fabrics() == ["lab"]
    first = st.log_fault("fail link p0-t0-0 h0-0 down")
    st.log_fault("restore link p0-t0-0 h0-0 (down)")
    assert back.fault_log()[0] == first and first.split(" ", 1)[1] == "fail link p0-t0-0 h0-0 down"
    with pytest.raises(MrcError, match="no fabric named 'other'"):
        state.FabricState.load("other")
    (tmp_path / "lab" / state.STATE_FILE).write_text("{")
    with pytest.raises(MrcError, match="damaged"):
        state.FabricState.load("lab")


def test_process_identity_is_pid_and_start_time():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    info = state.ProcInfo(proc.pid, state.start_ticks(proc.pid), "", [], "")
    assert info.alive()
    assert not state.ProcInfo(proc.pid, info.start_ticks + 1, "", [], "").alive()  # a reused pid
    proc.kill()
    proc.wait()
    assert not info.alive() and state.start_ticks(os.getpid()) is not None


def test_eui64_link_local_of_a_mac():
    # RFC 4291 appendix A: flip the universal/local bit, insert ff:fe.
    assert link_local("02:01:10:03:00:05") == "fe80::1:10ff:fe03:5"
    assert link_local("00:00:5e:00:53:01") == "fe80::200:5eff:fe00:5301"


def test_mtu_and_fault_arguments_are_checked():
    check_mtu(3506)
    with pytest.raises(MrcError, match="xdp.frags"):
        check_mtu(3507)
    for kind, value, what in (("jitter", None, "link fault"), ("flap", None, "--flap"), ("flap", 51, "--flap"),
                              ("loss", 0, "--loss"), ("loss", 100.5, "--loss")):
        with pytest.raises(ValueError, match=what):
            faultctl._check_kind(kind, value)
