"""Lifecycle: a restarted server rebuilds its view from the pinned maps and the pipeline it
stored, so a reconnecting controller (finsy) finds the same cookie, pushes nothing and reads the
entries already installed (design section 7). Also the server as its own process inside the
switch's namespace, and TLS."""

import asyncio
import subprocess

import finsy
import grpc
import pytest
from finsy.proto import p4r

from support import p4rt
from support.p4rt_harness import DEVICE_CONFIG, P4INFO_PATH, Client, load_p4info

from mrckit.errors import MrcError
from mrckit.switch.p4runtime import MRC_SWITCH, Device, EbpfBackend, P4RuntimeServer, TlsFiles, process

Get = p4r.GetForwardingPipelineConfigRequest


def _serve(switch, state_dir, address, tls=None):
    backend = EbpfBackend.open(switch.name)
    return P4RuntimeServer(Device(backend, MRC_SWITCH, 1, state_dir), address, tls).start(), backend


def test_restarted_server_answers_as_before(switch, state_dir, tmp_path):
    address = f"unix:{tmp_path}/p4rt.sock"
    p4info = load_p4info()
    srv, backend = _serve(switch, state_dir, address)
    c = Client(srv.address)
    c.set_pipeline(p4info, cookie=0xABCDEF)
    c.write(p4rt.update("INSERT", p4rt.entry(p4info, "usid_fib", 0xFCBBBB001001, "set_egress", port=8)),
            p4rt.update("INSERT", p4rt.entry(p4info, "my_usid", 0xFCBBBB000101, "usid_un")),
            p4rt.update("MODIFY", p4rt.entry(p4info, "usid_fib", None, "set_egress", default=True, port=1)))
    before = sorted(e.SerializeToString() for e in c.read(p4rt.read_table(p4info)))
    c.close()
    srv.stop(0)
    backend.close()

    srv, backend = _serve(switch, state_dir, address)
    try:
        c = Client(srv.address)
        config = c.get_pipeline(Get.ALL).config
        assert config.cookie.cookie == 0xABCDEF and config.p4info == p4info and config.p4_device_config == DEVICE_CONFIG
        assert sorted(e.SerializeToString() for e in c.read(p4rt.read_table(p4info))) == before
        (d,) = c.read(p4rt.read_table(p4info, "usid_fib", default=True))
        assert d.table_entry.action.action.params[0].value == b"\x01"
        with pytest.raises(grpc.RpcError):  # the view knows the entry: a second insert collides
            c.write(p4rt.update("INSERT", p4rt.entry(p4info, "usid_fib", 0xFCBBBB001001, "drop")))
        c.write(p4rt.update("DELETE", p4rt.entry(p4info, "usid_fib", 0xFCBBBB001001)))
        assert switch.tables.direct.read("usid_fib") == []
        c.close()
    finally:
        srv.stop(0)
        backend.close()


def test_stored_pipeline_of_other_maps_is_ignored(switch, state_dir, tmp_path):
    srv, backend = _serve(switch, state_dir, f"unix:{tmp_path}/a.sock")
    c = Client(srv.address)
    c.set_pipeline(load_p4info())
    c.close()
    srv.stop(0)
    backend.close()
    switch.sw.teardown()  # the switch is re-created: new, empty maps
    switch.sw.setup()
    srv, backend = _serve(switch, state_dir, f"unix:{tmp_path}/b.sock")
    try:
        c = Client(srv.address)
        with pytest.raises(grpc.RpcError) as info:
            c.get_pipeline(Get.COOKIE_ONLY)
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        c.close()
    finally:
        srv.stop(0)
        backend.close()


async def _finsy_session(address: str, entries=()):
    """Connect with finsy as the controller does (it pushes the pipeline only when the cookie
    differs), insert ``entries`` in one batch, and return every table entry read back."""
    opts = finsy.SwitchOptions(p4info=P4INFO_PATH, p4blob=DEVICE_CONFIG, device_id=1)
    async with finsy.Switch("sw", address, opts) as sw:
        if entries:
            await sw.insert(entries)
        return sw.p4info.p4cookie, [e async for e in sw.read(finsy.P4TableEntry())]


def test_finsy_reconnect_after_restart_pushes_nothing(server, switch, state_dir):
    entries = [finsy.P4TableEntry("usid_fib", match=finsy.P4TableMatch({"hdr.outer_ipv6.dst_addr[127:80]": 0xFCBBBB000000 + i}),
                                  action=finsy.P4TableAction("set_egress", port=i)) for i in range(1, 21)]
    cookie, found = asyncio.run(_finsy_session(server.address, entries))
    assert len(found) == 20
    server.stop(0)
    srv, backend = _serve(switch, state_dir, server.address)
    try:
        c = Client(srv.address, election_id=None)
        assert c.get_pipeline(Get.COOKIE_ONLY).config.cookie.cookie == cookie
        c.close()
        _, found = asyncio.run(_finsy_session(srv.address))
        # a pushed pipeline (VERIFY_AND_COMMIT) would have emptied the tables
        assert len(found) == 20 and len(switch.tables.direct.read("usid_fib")) == 20
    finally:
        srv.stop(0)
        backend.close()


def test_server_process_in_the_switch_namespace(switch, state_dir, tmp_path):
    address = f"unix:{tmp_path}/proc.sock"
    proc = process.spawn(switch.name, address, netns=switch.ns, state_dir=state_dir)
    try:
        c = Client(address)
        c.set_pipeline(load_p4info(), cookie=5)
        c.write(p4rt.update("INSERT", p4rt.entry(load_p4info(), "usid_fib", 0xA, "drop")))
        c.close()
    finally:
        assert process.stop(proc) == 0
    proc = process.spawn(switch.name, address, netns=switch.ns, state_dir=state_dir)
    try:
        c = Client(address)
        assert c.get_pipeline(Get.COOKIE_ONLY).config.cookie.cookie == 5
        assert len(c.read(p4rt.read_table(load_p4info()))) == 1
        c.close()
    finally:
        assert process.stop(proc) == 0


def test_server_process_refuses_unknown_switch(tmp_path):
    with pytest.raises(MrcError) as info:
        process.spawn("mrc-no-such-switch", f"unix:{tmp_path}/x.sock")
    assert "not set up" in str(info.value)


def _self_signed(tmp_path):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    return cert, key


def test_tls_on_tcp_loopback(switch, state_dir, tmp_path):
    if subprocess.run(["which", "openssl"], capture_output=True).returncode:
        pytest.skip("openssl not found: needed to make a test certificate")
    cert, key = _self_signed(tmp_path)
    srv, backend = _serve(switch, state_dir, "127.0.0.1:0", TlsFiles(cert, key))
    try:
        creds = grpc.ssl_channel_credentials(cert.read_bytes())
        with grpc.secure_channel(srv.address, creds) as ch:
            from finsy.proto import p4r_grpc
            reply = p4r_grpc.P4RuntimeStub(ch).Capabilities(p4r.CapabilitiesRequest(), timeout=10)
            assert reply.p4runtime_api_version.startswith("1.4")
        with grpc.insecure_channel(srv.address) as ch:  # plaintext is refused
            from finsy.proto import p4r_grpc
            with pytest.raises(grpc.RpcError):
                p4r_grpc.P4RuntimeStub(ch).Capabilities(p4r.CapabilitiesRequest(), timeout=3)
    finally:
        srv.stop(0)
        backend.close()
