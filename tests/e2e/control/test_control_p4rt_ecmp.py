"""The controller in EV-hash (ECMP) mode against real eBPF switches and their real P4Runtime
server processes: members, groups and routes written in dependency order, read back
and reconciled, and rewritten when a link is reported down and up (through the report file
that ``mrc controller link`` writes)."""

import asyncio
import ipaddress
import time

from mrckit.control import Controller, EcmpDiff, EntryDiff, open_session, report_link
from mrckit.topology import ALL_UPLINKS_GROUP, ActionProfileGroup, ActionProfileMember, TableEntry, generate_clos

# At module level: at test time ``conftest`` may name another folder's conftest module.
from support.paths import DEVICE_CONFIG, P4INFO, ROOT
from support.control_cli import MRC, start

TOPO = generate_clos()  # 2 planes, 2 T1 and 3 T0 per plane, 2 hosts per leaf
NAMES = ["p0-t0-0", "p0-t0-1", "p0-t1-1"]


def controller(sws, pipeline, **kw):
    return Controller(TOPO, [sw.target() for sw in sws.values()], [], pipeline, mode="ecmp", **kw)


def held(sw) -> dict:
    """The EV-hash state straight from the switch's BPF maps."""
    t = sw.ebpf.tables.ecmp
    return by_id(t.members(), t.groups(), t.routes())


def by_id(members, groups, routes) -> dict:
    """Members, groups and routes keyed by what P4Runtime identifies them by."""
    return {"members": {m.member_id: (m.action, m.params) for m in members},
            "groups": {g.group_id: g.members for g in groups},
            "routes": {r.prefix: r.target for r in routes}}


def wanted(ctl, name, down=()) -> dict:
    cfg = ctl.compiled.switch(name, down)
    return by_id(cfg.members, cfg.groups, cfg.routes)


def test_first_run_writes_everything_in_order_a_second_writes_nothing(switches, pipeline):
    sws = switches(NAMES)
    ctl = controller(sws, pipeline, run_dir=None)
    first = asyncio.run(ctl.program_switches())
    for name, c in first.items():
        cfg = ctl.compiled.switch(name)
        assert not any(e.table in ("my_usid", "usid_fib") for e in cfg.entries)
        assert (c.inserted, c.modified, c.deleted) == (len(cfg.entries) + len(cfg.members) + len(cfg.groups)
                                                       + len(cfg.routes), 0, 0)
        assert held(sws[name]) == wanted(ctl, name)
        assert sws[name].entries()["usid_fib"] == [] and sws[name].entries()["my_usid"] == []
    # p0-t0-0: its 2 hosts, the 2 other leaves over group 1025 = the uplinks to T1 0 and 1 (ports 2, 3)
    assert held(sws["p0-t0-0"])["groups"] == {ALL_UPLINKS_GROUP: (3, 4)}
    assert held(sws["p0-t0-0"])["routes"][ipaddress.IPv6Network("2001:db8:100:2::/64")] == ("group", ALL_UPLINKS_GROUP)
    second = asyncio.run(controller(sws, pipeline, run_dir=None).program_switches())
    for name, c in second.items():
        cfg = ctl.compiled.switch(name)
        assert not c.pipeline_pushed and c.writes == 0 and c.write_requests == 0
        assert c.entries_read == len(cfg.entries) + len(cfg.members) + len(cfg.groups) + len(cfg.routes)


async def _tamper(target, pipeline):
    """Another client: a stale member, group and route; a group with a member less; a route
    deleted; a route pointed at the stale group."""
    session = await open_session(target, pipeline, election_id=2**100)
    try:
        await session.write_ecmp(EcmpDiff(
            members=EntryDiff(insert=(ActionProfileMember(100, "drop", {}),)),
            groups=EntryDiff(insert=(ActionProfileGroup(77, (100,)),),
                             modify=(ActionProfileGroup(ALL_UPLINKS_GROUP, (3,)),)),
            routes=EntryDiff(insert=(TableEntry.route(ipaddress.IPv6Network("2001:db8:100:9::/64"), group=77),),
                             modify=(TableEntry.route(ipaddress.IPv6Network("2001:db8:100:1::/64"), group=77),),
                             delete=(TableEntry.route(ipaddress.IPv6Network("2001:db8:100::1/128"), member=1),))))
    finally:
        await session.close()


def test_reconcile_repairs_exactly_the_tampered_members_groups_and_routes(switches, pipeline):
    sws = switches(["p0-t0-0"])
    ctl = controller(sws, pipeline, run_dir=None)
    asyncio.run(ctl.program_switches())
    asyncio.run(_tamper(sws["p0-t0-0"].target(), pipeline))
    assert held(sws["p0-t0-0"])["groups"] == {ALL_UPLINKS_GROUP: (3,), 77: (100,)}
    c = asyncio.run(controller(sws, pipeline, run_dir=None).program_switches())["p0-t0-0"]
    # insert the deleted host route; modify group 1025 and the leaf-1 route; delete the stale
    # route, group and member (in that order: nothing refers to what is gone).
    assert (c.inserted, c.modified, c.deleted) == (1, 2, 3)
    assert held(sws["p0-t0-0"]) == wanted(ctl, "p0-t0-0")


def _wait(predicate, what, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_reported_link_failure_rewrites_the_groups_and_recovery_restores_them(switches, pipeline, tmp_path):
    sws = switches(NAMES)
    ctl = controller(sws, pipeline, name="ecmp-e2e", run_dir=tmp_path)

    async def scenario():
        stop = asyncio.Event()
        runner = asyncio.create_task(ctl.run(stop))
        await asyncio.wait_for(ctl.ready.wait(), 30)
        before = {n: ctl.switches[n].total.writes for n in NAMES}
        # The T1 1 - T0 1 link of plane 0 goes down, reported over the northbound as `mrc
        # controller link` does (from a thread: the client blocks, the server is on this loop).
        await asyncio.to_thread(report_link, "ecmp-e2e", "p0/t0-1/t1-1", up=False, run_dir=tmp_path, source="test")
        await _until(lambda: "p0/t0-1/t1-1" in ctl.rerouter.rerouted)
        down = {n: held(sws[n]) for n in NAMES}
        written = {n: ctl.switches[n].total.writes - before[n] for n in NAMES}
        await asyncio.to_thread(report_link, "ecmp-e2e", "p0/t0-1/t1-1", up=True, run_dir=tmp_path, source="test")
        await _until(lambda: not ctl.rerouter.rerouted)
        stop.set()
        await runner
        return down, written

    async def _until(predicate, timeout=20.0):
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, "timed out"
            await asyncio.sleep(0.02)

    down, written = asyncio.run(scenario())
    link = ["p0/t0-1/t1-1"]
    # T0 0: towards leaf 1 only T1 0 is left (member 3 = port 2): group 2 created, route moved.
    assert down["p0-t0-0"]["groups"] == {2: (3,), ALL_UPLINKS_GROUP: (3, 4)}
    assert down["p0-t0-0"]["routes"][ipaddress.IPv6Network("2001:db8:100:1::/64")] == ("group", 2)
    assert down["p0-t0-0"]["routes"][ipaddress.IPv6Network("2001:db8:100:2::/64")] == ("group", ALL_UPLINKS_GROUP)
    # T0 1: its own uplink to T1 1 is dead: the shared group loses it.
    assert down["p0-t0-1"]["groups"] == {ALL_UPLINKS_GROUP: (3,)}
    assert written == {"p0-t0-0": 2, "p0-t0-1": 1, "p0-t1-1": 0}  # group 2 + route; one group modify
    for n in NAMES:
        assert down[n] == wanted(ctl, n, link)
        assert held(sws[n]) == wanted(ctl, n)  # restored
    kinds = [(m.kind, m.links) for m in ctl.timeline()]
    assert kinds == [("link_down", tuple(link)), ("reroute", tuple(link)), ("link_up", tuple(link)),
                     ("restore", tuple(link))]
    status = ctl.status()
    assert status["mode"] == "ecmp" and status["rerouted"] == {} and status["denials"] == {}


# --- the CLI: mrc controller run --mode ecmp, mrc controller link, kill and restart -----------
SMALL = generate_clos(planes=1, spines=2, leaves=3, hosts_per_leaf=1)


def test_cli_reroutes_on_mrc_controller_link_and_a_restart_writes_nothing(switches, tmp_path):
    import dataclasses
    import signal
    import subprocess

    from mrckit.control import read_status
    from mrckit.topology import GrpcEndpoint, compile_fabric, dump_topology


    sws = switches([s.name for s in SMALL.switches])
    topo = dataclasses.replace(SMALL, switches=tuple(
        dataclasses.replace(s, p4runtime=GrpcEndpoint(sws[s.name].address)) for s in SMALL.switches))
    path = tmp_path / "fabric.yaml"
    dump_topology(topo, str(path))
    (tmp_path / "dc.json").write_bytes(DEVICE_CONFIG)
    name, sd = "ecmpcli", str(tmp_path)
    run = [*MRC, "controller", "run", str(path), "--mode", "ecmp", "--name", name, "--run-dir", sd,
           "--p4info", str(P4INFO), "--device-config", str(tmp_path / "dc.json")]

    def mrc(*args):
        out = subprocess.run([*MRC, *args, "--name", name, "--run-dir", sd], capture_output=True, text=True,
                             timeout=60, cwd=ROOT)
        assert out.returncode == 0, out.stderr
        return out.stdout

    def status():
        return read_status(name, tmp_path)

    def until(predicate, what):
        deadline = time.monotonic() + 30
        while not predicate():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.05)

    compiled = compile_fabric(SMALL, mode="ecmp")
    link = "p0/t0-2/t1-0"
    first = start(run)
    try:
        assert "reported p0/t0-2/t1-0 down" in mrc("controller", "link", link, "--down")
        until(lambda: link in status()["rerouted"], "the reroute")
        assert held(sws["p0-t0-0"])["groups"] == {3: (3,), ALL_UPLINKS_GROUP: (2, 3)}  # uplinks on ports 1, 2
        for n in sws:
            assert held(sws[n]) == wanted_of(compiled, n, [link])
        shown = mrc("controller", "status")
        assert "ecmp mode" in shown and f"rerouted around (groups changed): {link}" in shown
        assert f"links believed down: {link}" in shown
        shown_kinds = [k for ln in shown.splitlines() for k in ("link_down", "reroute") if f" {k} " in ln]
        assert shown_kinds == ["link_down", "reroute"]
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    before = {n: held(sws[n]) for n in sws}
    second = start(run)  # takes the report over from the saved status: the link is still down
    try:
        st = status()
        assert all(s["total"]["write_requests"] == 0 for s in st["switches"].values()), st["switches"]
        assert {n: held(sws[n]) for n in sws} == before and link in st["rerouted"]
        mrc("controller", "link", link, "--up")
        until(lambda: not status()["rerouted"], "the restore")
        for n in sws:
            assert held(sws[n]) == wanted_of(compiled, n, [])
        kinds = [m["kind"] for m in status()["timeline"]]
        assert kinds[-2:] == ["link_up", "restore"]
    finally:
        second.send_signal(signal.SIGINT)
        second.communicate(timeout=60)
    assert second.returncode == 0


def wanted_of(compiled, name, down):
    cfg = compiled.switch(name, down)
    return {"members": {m.member_id: (m.action, m.params) for m in cfg.members},
            "groups": {g.group_id: g.members for g in cfg.groups},
            "routes": {r.prefix: r.target for r in cfg.routes}}
