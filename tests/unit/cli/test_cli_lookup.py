"""Switch and host names with several fabrics running: a name two fabrics have is an error
naming them, ``--fabric`` chooses, and the output says which fabric a name resolved to."""

import asyncio
import threading

import pytest
from click.testing import CliRunner

from mrckit.cli import main
from mrckit.control import Controller, HostTarget, load_pipeline
from mrckit.control import client as controller_client
from mrckit.control.lookup import locate_host, locate_switch, resolve_host, resolve_switch
from mrckit.control.targets import SwitchTarget
from mrckit.errors import MrcError
from mrckit.topology import generate_clos


def controller(directory, name, *, mode="srv6", switches=(), hosts=(), big=False):
    """A real controller called ``name`` serving its northbound in ``directory``; its switches
    and agents are unreachable, which lookup does not mind."""
    topo = generate_clos(spines=10, leaves=10) if big else generate_clos()
    return Controller(topo, [SwitchTarget(s, f"unix:{directory}/{name}-{s}.sock", 1)
                                                     for s in switches],
                      [HostTarget(h, f"unix:{directory}/{name}-host-{h}.sock") for h in hosts],
                      load_pipeline(), mode=mode, name=name, run_dir=directory)


@pytest.fixture
def two_fabrics(tmp_path, monkeypatch):
    """``srv6`` and ``ecmp`` both run p0-t0-1 and h0-0; only ``ecmp`` has p0-t1-9 and h9-0;
    ``old`` has stopped (its saved status is left, its socket gone)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    stops = []

    def run(ctl):
        stop = asyncio.run_coroutine_threadsafe(_event(), loop).result(30)
        task = asyncio.run_coroutine_threadsafe(ctl.run(stop), loop)
        asyncio.run_coroutine_threadsafe(_listening(tmp_path / f"{ctl.name}.sock"), loop).result(30)
        stops.append((stop, task))

    run(controller(tmp_path, "srv6", switches=["p0-t0-1"], hosts=["h0-0"]))
    run(controller(tmp_path, "ecmp", mode="ecmp", switches=["p0-t0-1", "p0-t1-9"], hosts=["h0-0", "h9-0"],
                   big=True))
    run(controller(tmp_path, "old", switches=["p0-t0-1"], hosts=["h9-0"], big=True))
    stop, task = stops.pop()
    loop.call_soon_threadsafe(stop.set)
    task.result(30)
    monkeypatch.setattr(controller_client, "RUN_DIR", tmp_path)
    yield tmp_path
    for stop, task in stops:
        loop.call_soon_threadsafe(stop.set)
        task.result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)


async def _event():
    return asyncio.Event()


async def _listening(path):
    while not path.exists():
        await asyncio.sleep(0.01)


def test_an_ambiguous_name_is_an_error_naming_the_fabrics(two_fabrics):
    with pytest.raises(MrcError, match=r"switch 'p0-t0-1' is in 2 running fabrics: ecmp, srv6; "
                                       r"choose one with --fabric NAME"):
        resolve_switch("p0-t0-1")
    with pytest.raises(MrcError, match=r"host 'h0-0' is in 2 running fabrics: ecmp, srv6; choose one"):
        resolve_host("h0-0")


def test_fabric_chooses_and_a_unique_name_needs_none(two_fabrics):
    d = two_fabrics
    srv6 = SwitchTarget("p0-t0-1", f"unix:{d}/srv6-p0-t0-1.sock", 1)
    assert locate_switch("p0-t0-1", fabric="srv6") == ("srv6", srv6)
    assert locate_switch("p0-t0-1", fabric="ecmp")[1].address == f"unix:{d}/ecmp-p0-t0-1.sock"
    assert locate_switch("p0-t1-9") == ("ecmp", SwitchTarget("p0-t1-9", f"unix:{d}/ecmp-p0-t1-9.sock", 1))
    assert locate_host("h0-0", fabric="srv6") == ("srv6", f"unix:{d}/srv6-host-h0-0.sock")
    assert locate_host("h9-0") == ("ecmp", f"unix:{d}/ecmp-host-h9-0.sock")  # "old" is not running
    with pytest.raises(MrcError, match="fabric 'srv6' has no switch named 'p0-t1-9'"):
        resolve_switch("p0-t1-9", fabric="srv6")
    with pytest.raises(MrcError, match=r"no running fabric named 'old' .*running: ecmp, srv6"):
        resolve_host("h9-0", fabric="old")


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize("args", [["shell", "p0-t0-1"], ["host", "ev", "h0-0"], ["host", "planes", "h0-0"],
                                  ["host", "events", "h0-0"], ["host", "deny", "h0-0", "--ev", "1"]])
def test_cli_refuses_an_ambiguous_name(two_fabrics, args):
    out = run(*args)
    assert out.exit_code == 2, out.output
    assert out.stdout == "" and out.stderr.strip().splitlines() == [
        f"mrc: error: {'switch' if args[0] == 'shell' else 'host'} '{args[-1] if args[0] == 'shell' else 'h0-0'}' "
        f"is in 2 running fabrics: ecmp, srv6; choose one with --fabric NAME"]


def test_shell_says_which_fabric_a_name_resolved_to(two_fabrics):
    out = run("shell", "p0-t0-1", "--fabric", "srv6")
    # No switch listens there: the lookup is reported, then the unreachable socket.
    assert f"p0-t0-1: switch of fabric srv6, P4Runtime at unix:{two_fabrics}/srv6-p0-t0-1.sock" in out.stderr
    assert out.exit_code == 2 and "no P4Runtime server at" in out.stderr
    assert run("shell", "unix:/x.sock", "--fabric", "srv6").exit_code == 2


def test_host_commands_take_fabric(two_fabrics):
    out = run("host", "planes", "h0-0", "--fabric", "nope")
    assert out.exit_code == 2 and "no running fabric named 'nope'" in out.stderr
    out = run("host", "ev", "unix:/x.sock", "--fabric", "srv6")
    assert out.exit_code == 2 and "--fabric resolves a host name" in out.output


def test_ev_table_t1_cell():
    from mrckit.cli.host import ev_t1_cell

    assert ev_t1_cell("srv6", 105) == "105"
    assert ev_t1_cell("ecmp", 105) == "-"
