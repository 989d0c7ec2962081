"""The bmv2 launcher (mrckit.switch.bmv2): readiness, the failure message, queue settings and a
clean stop. Runs simple_switch_grpc when it is built (/opt/p4tools or PATH)."""

import os

import grpc
import pytest

from finsy.proto import p4r, p4r_grpc
from mrckit import netns
from mrckit.errors import MrcError
from mrckit.switch import bmv2
from mrckit.switch.bmv2 import Bmv2Switch, find_tool


@pytest.fixture
def need_bmv2():
    if find_tool("simple_switch_grpc") is None:
        pytest.skip("simple_switch_grpc not found on PATH or in /opt/p4tools/bin")


@pytest.fixture
def switch_ns(make_netns):
    """A switch namespace with ports p0, p1 (veth peers in a second namespace)."""
    sw, peer = make_netns(), make_netns()
    for port in (0, 1):
        netns.veth(sw, f"p{port}", peer, f"h{port}")
    return sw


def test_port_511_is_refused():
    with pytest.raises(MrcError, match="511 as its drop port"):
        Bmv2Switch("s", "mrcnone", {511: "p0"})


def test_missing_binary_is_named(monkeypatch):
    monkeypatch.setattr(bmv2, "find_tool", lambda name: None)
    with pytest.raises(MrcError, match="simple_switch_grpc not found"):
        Bmv2Switch("s", "mrcnone", {0: "p0"}).start()


def test_missing_namespace_is_named(need_bmv2, need_root):
    with pytest.raises(MrcError, match="namespace mrcnosuchns does not exist"):
        Bmv2Switch("s", "mrcnosuchns", {0: "p0"}).start()


def test_ready_reachable_from_root_namespace_and_stops_clean(need_bmv2, switch_ns):
    sw = Bmv2Switch(f"{switch_ns}-ok", switch_ns, {0: "p0", 1: "p1"})
    with sw:
        assert sw.proc.poll() is None
        cmd = sw.command
        assert cmd[cmd.index("--priority-queues") + 1] == "2" and cmd[cmd.index("--device-id") + 1] == "1"
        # The socket is reachable from here, the root namespace.
        with grpc.insecure_channel(sw.grpc_address) as channel:
            caps = p4r_grpc.P4RuntimeStub(channel).Capabilities(p4r.CapabilitiesRequest(), timeout=5)
        assert caps.p4runtime_api_version
        sw.set_queue_rate(100, port=1)
        sw.set_queue_depth(32)
        with pytest.raises(MrcError, match="has no port 7"):
            sw.set_queue_rate(100, port=7)
        pid, run_dir = sw.proc.pid, sw.run_dir
    assert sw.proc is None and not run_dir.exists()
    assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"


def test_bad_json_fails_with_command_and_log(need_bmv2, switch_ns, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"header_types": [ this is not json')
    sw = Bmv2Switch(f"{switch_ns}-bad", switch_ns, {0: "p0"}, json_path=bad, ready_timeout=10)
    with pytest.raises(MrcError) as err:
        sw.start()
    msg = str(err.value)
    assert "failed to start: simple_switch_grpc exited" in msg
    assert f"command: nsenter --net=/var/run/netns/{switch_ns} -- " in msg and str(bad) in msg
    assert "--- stdout.log (last" in msg
    log = msg.split("--- stdout.log", 1)[1]
    assert len(log.strip().splitlines()) >= 2, f"no bmv2 log lines in the message:\n{msg}"
    assert sw.proc is None
    sw.stop()
    assert not sw.run_dir.exists()


def test_readiness_timeout_is_reported(need_bmv2, switch_ns):
    sw = Bmv2Switch(f"{switch_ns}-slow", switch_ns, {0: "p0"}, ready_timeout=0)
    with pytest.raises(MrcError, match=r"did not answer within 0 s[\s\S]*command: nsenter"):
        sw.start()
    assert sw.proc is None
    sw.stop()
