"""The same controller code on bmv2 (``simple_switch_grpc``, device id 0): pipeline by cookie and
only the difference written. Skipped where bmv2 or p4c's outputs are missing."""

import asyncio

import pytest

from mrckit.control import Controller, EntryDiff, SwitchTarget, load_pipeline, open_session
from mrckit.switch.bmv2 import Bmv2Switch, find_tool
from mrckit.topology import TableEntry, generate_clos

from support.paths import DEVICE_CONFIG_PATH, P4INFO

TOPO = generate_clos()


@pytest.fixture
def bmv2(make_netns):
    if find_tool("simple_switch_grpc") is None:
        pytest.skip("simple_switch_grpc (bmv2) not found on PATH or in /opt/p4tools/bin")
    if not (P4INFO.exists() and DEVICE_CONFIG_PATH.exists()):
        pytest.skip("p4c's outputs p4src/build/mrc_switch.{p4info.txtpb,json} are missing")
    ns = make_netns()
    sw = Bmv2Switch(ns, ns, {}, json_path=None, device_id=0).start()
    try:
        yield sw
    finally:
        sw.stop()


def test_bmv2_is_programmed_like_the_ebpf_target(bmv2):
    pipeline = load_pipeline(P4INFO, DEVICE_CONFIG_PATH)

    def ctl():
        return Controller(TOPO, [SwitchTarget("p0-t0-1", bmv2.grpc_address, device_id=0)], [], pipeline,
                          target="bmv2", run_dir=None)

    first = asyncio.run(ctl().program_switches())["p0-t0-1"]
    n = len(ctl().compiled.entries("p0-t0-1"))
    assert first.pipeline_pushed and first.inserted == n
    again = asyncio.run(ctl().program_switches())["p0-t0-1"]
    assert not again.pipeline_pushed and again.writes == 0 and again.entries_read == n

    entries = ctl().compiled.entries("p0-t0-1")
    victim = next(e for e in entries if e.table == "usid_fib")
    stale = TableEntry("usid_fib", dict(victim.match), "set_egress", {"port": 0})
    stale = TableEntry(stale.table, {k: v ^ 0x777 for k, v in stale.match.items()}, stale.action, stale.params)

    async def tamper():
        s = await open_session(ctl().switches["p0-t0-1"].target, pipeline, election_id=2**100)
        try:
            await s.write(EntryDiff(insert=(stale,), delete=(victim,)))
        finally:
            await s.close()

    asyncio.run(tamper())
    fixed = asyncio.run(ctl().program_switches())["p0-t0-1"]
    assert (fixed.inserted, fixed.modified, fixed.deleted) == (1, 0, 1) and not fixed.pipeline_pushed


def test_bmv2_ecmp_mode_members_groups_routes_and_a_reroute(bmv2):
    """EV-hash mode on bmv2: everything inserted once, nothing on a second run, and a
    reported link failure rewrites exactly the group change (PI's action profile support)."""
    pipeline = load_pipeline(P4INFO, DEVICE_CONFIG_PATH)
    target = SwitchTarget("p0-t0-1", bmv2.grpc_address, device_id=0)

    def ctl(**kw):
        return Controller(TOPO, [target], [], pipeline, target="bmv2", mode="ecmp", **kw)

    cfg = ctl(run_dir=None).compiled.switch("p0-t0-1")
    n = len(cfg.entries) + len(cfg.members) + len(cfg.groups) + len(cfg.routes)
    first = asyncio.run(ctl(run_dir=None).program_switches())["p0-t0-1"]
    assert first.inserted == n and first.modified == first.deleted == 0
    again = asyncio.run(ctl(run_dir=None).program_switches())["p0-t0-1"]
    assert again.writes == 0 and again.entries_read == n

    async def reroute(c):
        stop = asyncio.Event()
        runner = asyncio.create_task(c.run(stop))
        await asyncio.wait_for(c.ready.wait(), 60)
        written = await c.link_report("p0/t0-2/t1-1", up=False)
        async with c.switches["p0-t0-1"].lock:
            held = await c.switches["p0-t0-1"].session.read_ecmp()
        stop.set()
        await runner
        return written, held

    import tempfile
    with tempfile.TemporaryDirectory() as run_dir:
        written, held = asyncio.run(reroute(ctl(run_dir=run_dir, name="bmv2-ecmp")))
    assert written == {"p0-t0-1": 2}  # group 3 (leaf 2 over T1 0 only) inserted, route to leaf 2 modified
    assert {g.group_id: g.members for g in held.groups} == {3: (3,), 1025: (3, 4)}
