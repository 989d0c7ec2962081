"""The controller against real eBPF switches and their real P4Runtime server processes, over
real gRPC: pipeline push by cookie, reconciliation of only the difference, restarts that write
nothing, TLS, arbitration and device-id errors."""

import asyncio
import subprocess

import pytest

from mrckit.control import Controller, EntryDiff, SwitchTarget, load_pipeline, open_session
from mrckit.errors import MrcError
from mrckit.switch.p4runtime import TlsFiles
from mrckit.topology import GrpcTls, TableEntry, generate_clos

from support.paths import DEVICE_CONFIG, P4INFO

TOPO = generate_clos()
K = "hdr.outer_ipv6.dst_addr[127:80]"


def controller(sws, pipeline, **kw):
    return Controller(TOPO, [sw.target(**kw) for sw in sws.values()], [], pipeline, run_dir=None)


def expected(ctl, name):
    return {t: sorted((e.key, e.action, tuple(sorted(e.params.items())))
                      for e in ctl.compiled.entries(name) if e.table == t)
            for t in ("my_usid", "usid_fib", "port_config")}


def test_first_run_pushes_and_writes_everything_a_second_writes_nothing(switches, pipeline):
    sws = switches(["p0-t0-0", "p0-t1-1"])
    ctl = controller(sws, pipeline)
    first = asyncio.run(ctl.program_switches())
    for name, c in first.items():
        n = len(ctl.compiled.entries(name))
        assert c.pipeline_pushed and c.cookie_before is None
        assert (c.inserted, c.modified, c.deleted, c.entries_read) == (n, 0, 0, 0)
        assert sws[name].entries() == expected(ctl, name)
    second = asyncio.run(controller(sws, pipeline).program_switches())
    for name, c in second.items():
        assert not c.pipeline_pushed and c.cookie_before == pipeline.cookie
        assert c.writes == 0 and c.write_requests == 0
        assert c.entries_read == len(ctl.compiled.entries(name))


async def _tamper(target, pipeline, entries):
    """Another client (a higher election id) deletes one entry, changes one, adds a stale one."""
    victim = next(e for e in entries if e.table == "usid_fib")
    changed = next(e for e in entries if e.table == "port_config")
    changed = TableEntry(changed.table, changed.match, changed.action, {**changed.params, "trim_threshold": 1})
    stale = TableEntry("usid_fib", {K: 0xFCBBBB000777}, "set_egress", {"port": 9})
    session = await open_session(target, pipeline, election_id=2**100)
    try:
        await session.write(EntryDiff(insert=(stale,), modify=(changed,), delete=(victim,)))
    finally:
        await session.close()


def test_reconcile_writes_only_the_difference_after_tampering(switches, pipeline):
    sws = switches(["p0-t0-1"])
    sw = sws["p0-t0-1"]
    ctl = controller(sws, pipeline)
    asyncio.run(ctl.program_switches())
    asyncio.run(_tamper(sw.target(), pipeline, ctl.compiled.entries("p0-t0-1")))
    assert sw.entries() != expected(ctl, "p0-t0-1")
    (c,) = asyncio.run(controller(sws, pipeline).program_switches()).values()
    assert not c.pipeline_pushed
    assert (c.inserted, c.modified, c.deleted, c.write_requests) == (1, 1, 1, 1)
    assert sw.entries() == expected(ctl, "p0-t0-1")


def test_another_cookie_pushes_the_pipeline_and_restores_the_entries(switches, pipeline):
    sws = switches(["p1-t0-2"])
    asyncio.run(controller(sws, pipeline).program_switches())
    other = load_pipeline(P4INFO, DEVICE_CONFIG + b" ")
    assert other.cookie != pipeline.cookie
    ctl = controller(sws, other)
    (c,) = asyncio.run(ctl.program_switches()).values()
    assert c.pipeline_pushed and c.cookie_before == pipeline.cookie
    assert sws["p1-t0-2"].entries() == expected(ctl, "p1-t0-2")
    (again,) = asyncio.run(controller(sws, other).program_switches()).values()
    assert not again.pipeline_pushed and again.writes == 0


def test_a_restarted_switch_server_needs_no_write(switches, pipeline):
    sws = switches(["p0-t1-0"])
    sw = sws["p0-t1-0"]
    asyncio.run(controller(sws, pipeline).program_switches())
    sw.stop()
    sw.start()  # the pipeline and cookie persist beside the pinned maps
    (c,) = asyncio.run(controller(sws, pipeline).program_switches()).values()
    assert not c.pipeline_pushed and c.writes == 0 and c.entries_read > 0


def test_a_wrong_device_id_is_a_clear_error(switches, pipeline):
    sws = switches(["p0-t0-2"])
    with pytest.raises(MrcError, match=r"switch p0-t0-2: .*device id 7"):
        asyncio.run(controller(sws, pipeline, device_id=7).program_switches())


def test_a_higher_election_id_elsewhere_leaves_us_backup(switches, pipeline):
    sws = switches(["p1-t1-1"])
    target = sws["p1-t1-1"].target()

    async def go():
        other = await open_session(target, pipeline, election_id=2**90)
        try:
            with pytest.raises(MrcError, match="not primary"):
                await open_session(target, pipeline, election_id=5)
        finally:
            await other.close()

    asyncio.run(go())


def test_an_unreachable_switch_is_named(pipeline, tmp_path):
    ctl = Controller(TOPO, [SwitchTarget("p0-t0-0", f"unix:{tmp_path}/none.sock")], [], pipeline, run_dir=None,
                     connect_timeout_s=1.0)
    with pytest.raises(MrcError, match="switch p0-t0-0: cannot reach its P4Runtime server"):
        asyncio.run(ctl.program_switches())


def _certs(d):
    """A CA and a server certificate for 'localhost' (the authority of a unix: target)."""
    def ssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.pem",
        "-days", "1", "-subj", "/CN=mrckit test CA")
    ssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{d}/sw.key", "-out", f"{d}/sw.csr",
        "-subj", "/CN=switch.mrckit.test")
    (d / "ext").write_text("subjectAltName=DNS:switch.mrckit.test\n")
    ssl("x509", "-req", "-in", f"{d}/sw.csr", "-CA", f"{d}/ca.pem", "-CAkey", f"{d}/ca.key", "-CAcreateserial",
        "-out", f"{d}/sw.pem", "-days", "1", "-extfile", f"{d}/ext")


def test_tls_when_the_topology_asks_for_it(switches, pipeline, tmp_path):
    _certs(tmp_path)
    sws = switches(["p0-t0-0"], tls=TlsFiles(tmp_path / "sw.pem", tmp_path / "sw.key"))
    sw = sws["p0-t0-0"]
    good = GrpcTls(str(tmp_path / "ca.pem"), server_name="switch.mrckit.test")
    ctl = Controller(TOPO, [sw.target(tls=good)], [], pipeline, run_dir=None)
    (c,) = asyncio.run(ctl.program_switches()).values()
    assert c.pipeline_pushed and c.inserted == len(ctl.compiled.entries("p0-t0-0"))
    plain = Controller(TOPO, [sw.target()], [], pipeline, run_dir=None, connect_timeout_s=1.0)
    with pytest.raises(MrcError, match="cannot reach"):
        asyncio.run(plain.program_switches())


def test_a_p4info_the_switch_does_not_implement_is_refused_clearly(switches, pipeline, tmp_path):
    sws = switches(["p1-t0-0"])
    wrong = tmp_path / "wrong.p4info.txtpb"
    wrong.write_text(P4INFO.read_text().replace("bitwidth: 9", "bitwidth: 10"))
    with pytest.raises(MrcError, match="switch p1-t0-0 .*SetForwardingPipelineConfig"):
        asyncio.run(controller(sws, load_pipeline(wrong, DEVICE_CONFIG)).program_switches())
    assert sws["p1-t0-0"].entries() == {"my_usid": [], "usid_fib": [], "port_config": []}
