"""The eBPF switch owns its P4Runtime server (docs/p4runtime.md, "Lifecycle"): ``EbpfSwitch(p4runtime=...)``
starts the server in the switch's namespace once the maps are pinned and stops it before they
are unpinned. A client in the root namespace programs the switch over the unix socket; after
teardown no process, socket, pin or attachment is left; a bad address fails set-up with
nothing left behind.
"""

import os
import signal
import socket
from pathlib import Path

import grpc
import pytest
from finsy.proto import p4r, p4r_grpc

from support import p4rt
from support import p4rt_harness
from support.p4rt_harness import Client, load_p4info

from mrckit import netns
from mrckit.bpf.attach import xdp_query
from mrckit.errors import MrcError
from mrckit.switch.ebpf_target import EbpfSwitch, switch_pin_dir
from mrckit.switch.p4runtime import process
from mrckit.switch.p4runtime.process import ServerOptions

DEVICE_ID = 7


@pytest.fixture
def ported(make_netns):
    """A switch namespace with port p0 (its peer in a second namespace); yields (ns, name)."""
    sw, peer = make_netns(), make_netns()
    netns.veth(sw, "p0", peer, "eth0")
    netns.run(["ethtool", "-K", "eth0", "gro", "on"], ns=peer)
    name = f"{sw}-s"
    yield sw, name
    EbpfSwitch(name, sw, {}).teardown()  # pins of a failed test go too


def server_pids(name: str) -> list[int]:
    """Pids of processes serving switch ``name`` (``--switch NAME`` in their argv)."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except (FileNotFoundError, ProcessLookupError, NotADirectoryError, PermissionError):
            continue
        if b"mrckit.switch.p4runtime" in argv and name.encode() in argv:
            pids.append(int(entry))
    return pids


def assert_nothing_left(ns: str, name: str, sock: Path | None = None) -> None:
    assert server_pids(name) == []
    assert not os.path.exists(switch_pin_dir(name))
    assert sock is None or not sock.exists()
    with netns.enter(ns):
        assert xdp_query("p0").mode is None


def test_setup_serves_p4runtime_from_the_switch_namespace(ported, tmp_path, monkeypatch):
    ns, name = ported
    monkeypatch.setattr(p4rt_harness, "DEVICE_ID", DEVICE_ID)  # the harness client's device id
    sock = tmp_path / "sw.sock"
    address = f"unix:{sock}"
    sw = EbpfSwitch(name, ns, {0: "p0"}, p4runtime=ServerOptions(address, device_id=DEVICE_ID,
                                                                  state_dir=tmp_path / "state"))
    with sw:
        pid = sw.server.pid
        assert server_pids(name) == [pid]
        # the server runs inside the switch's namespace, and we reach it from the root one
        assert os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(f"{netns.NETNS_DIR}/{ns}").st_ino
        assert os.stat(f"/proc/{pid}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino
        with grpc.insecure_channel(address) as channel:
            stub = p4r_grpc.P4RuntimeStub(channel)
            assert stub.Capabilities(p4r.CapabilitiesRequest()).p4runtime_api_version == "1.4.0"
            with pytest.raises(grpc.RpcError) as info:
                stub.GetForwardingPipelineConfig(p4r.GetForwardingPipelineConfigRequest(device_id=DEVICE_ID))
            assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            with pytest.raises(grpc.RpcError) as info:  # the device id option reached the server
                stub.GetForwardingPipelineConfig(p4r.GetForwardingPipelineConfigRequest(device_id=1))
            assert info.value.code() == grpc.StatusCode.NOT_FOUND
        p4info = load_p4info()
        client = Client(address)
        try:
            client.set_pipeline(p4info, cookie=0x5EED)
            got = client.get_pipeline(p4r.GetForwardingPipelineConfigRequest.ALL).config
            assert got.cookie.cookie == 0x5EED and got.p4info == p4info
            client.write(p4rt.update("INSERT", p4rt.entry(p4info, "usid_fib", 0xFCBBBB001001, "set_egress", port=0)))
        finally:
            client.close()
        # the write reached this switch's maps
        (entry,) = sw.tables.direct.read("usid_fib")
        assert (entry.key, entry.action, entry.params) == (0xFCBBBB001001, "set_egress", {"port": 0})
    assert sw.server is None
    assert not os.path.exists(f"/proc/{pid}")
    assert not (tmp_path / "state" / "pipeline.bin").exists()  # it named the unpinned maps
    assert_nothing_left(ns, name, sock)


def test_teardown_kills_a_server_that_ignores_sigterm(ported, tmp_path, monkeypatch):
    ns, name = ported
    sock = tmp_path / "sw.sock"
    sw = EbpfSwitch(name, ns, {0: "p0"}, p4runtime=f"unix:{sock}").setup()
    server = sw.server
    os.kill(server.pid, signal.SIGSTOP)  # a stopped process leaves SIGTERM pending
    monkeypatch.setattr(process, "STOP_TIMEOUT_S", 0.5)
    sw.teardown()
    assert server.returncode == -signal.SIGKILL
    assert_nothing_left(ns, name, sock)
    assert not os.path.exists(f"/run/mrckit/switch/{name}")  # the default state folder went too


def test_port_in_use_fails_setup_with_the_server_log(ported, tmp_path):
    ns, name = ported
    with netns.enter(ns):
        netns.run(["ip", "link", "set", "lo", "up"], ns=ns)
        taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        sw = EbpfSwitch(name, ns, {0: "p0"}, p4runtime=f"127.0.0.1:{port}")
        with pytest.raises(MrcError) as info:
            sw.setup()
    finally:
        taken.close()
    message = str(info.value)
    assert f"P4Runtime server for switch {name} did not start on 127.0.0.1:{port}" in message
    assert "cannot listen" in message  # the server's own last log line
    assert sw.server is None and sw.tables is None
    assert_nothing_left(ns, name)


def test_malformed_address_is_refused_before_anything_is_made(ported):
    ns, name = ported
    with pytest.raises(MrcError) as info:
        EbpfSwitch(name, ns, {0: "p0"}, p4runtime="nowhere")
    assert "P4Runtime address 'nowhere'" in str(info.value)
    assert_nothing_left(ns, name)
