"""Which of a fabric's processes `Fabric.restart` knows, and how it records a new one
(mrckit.fabric.restart), on a state that is not saved anywhere."""

import pytest

from mrckit.errors import MrcError
from mrckit.fabric import restart
from mrckit.fabric.state import FabricState, ProcInfo


class _State(FabricState):
    def save(self) -> None:  # a state of this test only: nothing to write
        self.saved = True


def _state(target="ebpf") -> _State:
    server = ProcInfo(10, 1, "", ["srv"], "/tmp/switches.log")
    st = _State("lab", "mrct", target, "")
    st.switches = {"p0-t0-0": ProcInfo(**{**server.__dict__, "address": "unix:/a"}),
                   "p0-t1-0": ProcInfo(**{**server.__dict__, "address": "unix:/b"})}
    st.hosts = {"h0-0": ProcInfo(20, 1, "unix:/h", ["agent"], "/tmp/h.log")}
    st.controller = {"pid": 30, "start_ticks": 1, "address": "", "argv": ["ctl"], "log": "/tmp/c.log"}
    return st


def test_the_processes_a_fabric_restarts_and_the_line_each_prints_when_it_serves():
    st = _state()
    assert restart.processes(st) == ["controller", "switches", "h0-0"]
    assert restart.locate(st, "controller") == (ProcInfo(30, 1, "", ["ctl"], "/tmp/c.log"), restart.CONTROLLER_READY)
    assert restart.locate(st, "switches")[0].argv == ["srv"]
    assert restart.locate(st, "h0-0")[0].pid == 20
    assert restart.processes(_state("bmv2")) == ["controller", "h0-0"]  # bmv2 switches are not ours


def test_an_unknown_process_is_one_error_naming_the_known_ones():
    with pytest.raises(MrcError, match="no process 'h9-9' in fabric lab: use one of controller, switches, h0-0"):
        restart.locate(_state(), "h9-9")


def test_a_restarted_switch_server_is_every_switchs_process_and_keeps_each_address():
    st = _state()
    new = ProcInfo(99, 7, "", ["srv"], "/tmp/switches.log")
    restart.record(st, "switches", new)
    assert {n: (p.pid, p.address) for n, p in st.switches.items()} == {"p0-t0-0": (99, "unix:/a"),
                                                                        "p0-t1-0": (99, "unix:/b")}
    restart.record(st, "controller", new)
    assert st.controller["pid"] == 99 and st.saved
