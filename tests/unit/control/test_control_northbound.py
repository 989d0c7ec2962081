"""The controller's northbound (controller.proto) with a real gRPC server on a unix socket: link
reports, status, the streamed timeline, a second controller refused, a restarted one taking
over, the CLI's one-line errors, and an idle controller that does not wake. The switches are
unreachable (``unix:/nonexistent``): the reaction is still decided and recorded."""

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from click.testing import CliRunner

from mrckit.cli import main
from mrckit.control import Controller, ControllerClient, SwitchTarget, load_pipeline, read_status, report_link
from mrckit.control.client import WATCH_HEADERS, mark_to_proto, status_from_proto, status_to_proto
from mrckit.control.status import saved_status_path
from mrckit.errors import MrcError
from mrckit.proto import controller_pb2 as pb
from mrckit.proto import controller_pb2_grpc as pbg
from mrckit.topology import generate_clos

TOPO = generate_clos()
LINK = "p0/t0-1/t1-0"
NAME = "lab"


class Loop:
    """One asyncio loop in a thread for the module: grpc.aio binds its poller to the loops it
    has seen, and a loop closed under it makes noise in later tests."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def call(self, coro, timeout=30):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)


LOOP = None


class Running:
    """``ctl.run(stop)`` on the module's loop, serving its northbound."""

    def __init__(self, ctl: Controller):
        self.ctl = ctl
        self.stop_event = LOOP.call(self._event())
        self.task = asyncio.run_coroutine_threadsafe(ctl.run(self.stop_event), LOOP.loop)
        LOOP.call(self._serving())

    async def _event(self):
        return asyncio.Event()

    async def _serving(self):
        while ctl_address_pending(self.ctl):
            await asyncio.sleep(0.01)

    def stop(self):
        if not self.task.done():
            LOOP.loop.call_soon_threadsafe(self.stop_event.set)
            self.task.result(30)


def ctl_address_pending(ctl) -> bool:
    """Whether ``ctl``'s northbound is not bound yet."""
    if ctl.address.startswith("unix:"):
        return not Path(ctl.address.removeprefix("unix:")).exists()
    return ctl.address.endswith(":0")


@pytest.fixture(scope="module", autouse=True)
def loop():
    global LOOP
    LOOP = Loop()
    yield LOOP
    LOOP.close()


def _controller(tmp_path, mode="srv6", name=NAME, **kw):
    targets = [SwitchTarget(s.name, "unix:/nonexistent") for s in TOPO.switches]
    return Controller(TOPO, targets, [], load_pipeline(), mode=mode, name=name, run_dir=tmp_path, **kw)


@pytest.fixture
def running(tmp_path):
    started = []

    def start(**kw):
        r = Running(_controller(tmp_path, **kw))
        started.append(r)
        return r

    yield start
    for r in started:
        r.stop()


def test_status_over_grpc_is_the_controllers_status(tmp_path, running):
    r = running()
    st = read_status(NAME, tmp_path)
    assert st["running"] and st["name"] == NAME and st["mode"] == "srv6" and st["ready"] is False
    assert set(st["switches"]) == {s.name for s in TOPO.switches}
    assert st["switches"]["p0-t0-0"]["address"] == "unix:/nonexistent" and not st["switches"]["p0-t0-0"]["connected"]
    local = r.ctl.status()
    for key in ("name", "pid", "started_ns", "topology", "election_id", "mode", "links_down", "denials", "timeline"):
        assert st[key] == local[key], key
    assert (tmp_path / f"{NAME}.sock").is_socket()


def test_status_survives_the_wire_both_ways():
    full = {
        "name": "x", "pid": 7, "started_ns": 1, "updated_ns": 2, "topology": "t", "topology_file": "/t.yaml",
        "election_id": (1 << 100) + 5, "pipeline": {"p4info": "/p", "cookie": 0xABCDEF}, "ready": True, "mode": "ecmp",
        "switches": {"s": {"address": "unix:/s", "device_id": 1, "connected": True, "reconciles": 2,
                           "last": {"pipeline_pushed": True, "cookie_before": None, "entries_read": 3, "inserted": 4,
                                    "modified": 5, "deleted": 6, "write_requests": 7},
                           "total": {"pipeline_pushed": False, "cookie_before": 0, "entries_read": 0, "inserted": 9,
                                     "modified": 0, "deleted": 0, "write_requests": 1}, "error": ""}},
        "hosts": {"h": {"address": "unix:/h", "configured": True, "configured_by_us": False, "watching": True,
                        "denied": [LINK], "events": 5, "error": "e"}},
        "links_down": [LINK], "reported_down": {LINK: 3}, "rerouted": {LINK: 4}, "denials": {LINK: 5},
        "withheld": {"p0/t0-0/down-0": "why"},
        "localisation": {"describe": "d", "failed": [LINK], "ambiguous": False, "candidates": [[LINK]],
                         "suspects": [], "unexplained": 0},
        "timeline": [{"kind": "link_down", "time_ns": 3, "links": [LINK], "detail": "fault"}],
    }
    assert status_from_proto(status_to_proto(full)) == {**full, "running": True}


def test_a_report_is_acted_on_and_streamed_to_watchers(tmp_path, running):
    r = running()
    with ControllerClient.named(NAME, tmp_path) as client:
        marks = client.watch(replay=True)
        assert report_link(NAME, LINK, up=False, run_dir=tmp_path, time_ns=5, source="test") == {}
        kind, mark = next(marks)
        assert kind == "mark" and mark == {"kind": "link_down", "time_ns": 5, "links": [LINK], "detail": "test"}
        kind, mark = next(marks)  # SRv6 mode: DENIED on every host from the report alone (no host: not done)
        assert kind == "mark"
    st = read_status(NAME, tmp_path)
    assert st["reported_down"] == {LINK: 5} and LINK in st["links_down"]
    report_link(NAME, LINK, up=True, run_dir=tmp_path)
    assert read_status(NAME, tmp_path)["reported_down"] == {}
    assert [m["kind"] for m in r.ctl.status()["timeline"]][:1] == ["link_down"]


def test_a_replayed_watch_starts_with_the_marks_so_far(tmp_path, running):
    running()
    report_link(NAME, LINK, up=False, run_dir=tmp_path, time_ns=9, source="before")
    with ControllerClient.named(NAME, tmp_path) as client:
        kind, first = next(client.watch(replay=True))
    assert first["detail"] == "before" and first["time_ns"] == 9


@pytest.mark.parametrize("link", ["p0/t0-9/t1-1", "p0/t0-1/t1-7", "p5/t0-1/t1-1", "p0/t0-1"])
def test_a_link_the_fabric_lacks_is_refused_in_one_line(tmp_path, running, link):
    running(mode="ecmp")
    with pytest.raises(MrcError, match=f"link '{link}'") as err:
        report_link(NAME, link, up=False, run_dir=tmp_path)
    assert "\n" not in str(err.value)
    assert read_status(NAME, tmp_path)["timeline"] == []


def test_ecmp_mode_reroutes_on_a_report(tmp_path, running):
    running(mode="ecmp")
    assert report_link(NAME, LINK, up=False, run_dir=tmp_path, source="t") == {}  # no switch reachable
    st = read_status(NAME, tmp_path)
    assert [m["kind"] for m in st["timeline"]] == ["link_down", "reroute"]
    assert st["rerouted"][LINK] > 0 and st["links_down"] == [LINK]


def test_no_controller_is_one_clear_line(tmp_path):
    with pytest.raises(MrcError, match=r"^no controller socket at .*/none\.sock: is `mrc controller run` running"):
        read_status("none", tmp_path)
    (tmp_path / "dead.sock").touch()  # a socket file nobody listens on (a killed controller)
    with pytest.raises(MrcError, match="no controller answers at unix:.*dead.sock"):
        report_link("dead", LINK, up=False, run_dir=tmp_path)
    with pytest.raises(MrcError, match="controller name 'a/b'"):
        read_status("a/b", tmp_path)


def test_a_second_controller_of_that_name_is_refused_a_stale_socket_is_not(tmp_path, running):
    r = running()
    with pytest.raises(MrcError, match=r"controller 'lab' is already running \(pid \d+, unix:.*kill \d+"):
        _controller(tmp_path)
    r.stop()
    (tmp_path / f"{NAME}.sock").touch()  # left by a controller that was killed
    _controller(tmp_path)


def test_a_restarted_controller_takes_over_reports_and_timeline(tmp_path, running):
    first = running(mode="ecmp")
    report_link(NAME, LINK, up=False, run_dir=tmp_path, time_ns=9)
    report_link(NAME, "p0/t0-2/t1-1", up=False, run_dir=tmp_path)
    report_link(NAME, "p0/t0-2/t1-1", up=True, run_dir=tmp_path)
    before = read_status(NAME, tmp_path)["timeline"]
    first.stop()
    saved = json.loads(saved_status_path(NAME, tmp_path).read_text())
    assert saved["pid"] == 0 and saved["reported_down"] == {LINK: 9}
    again = _controller(tmp_path, mode="ecmp")
    assert again.rerouter.down == {LINK: 9} and again.reported_down == {LINK: 9}
    assert [m.as_dict() for m in again.timeline()] == before


def test_a_fresh_controller_has_nothing_to_take_over(tmp_path):
    ctl = _controller(tmp_path, mode="ecmp")
    assert ctl.rerouter.down == {} and ctl.timeline() == []


def test_an_idle_controller_sleeps_until_woken(tmp_path):
    ctl = _controller(tmp_path)
    ctl._dirty = False
    assert ctl.reactor.quiet() and ctl._react_timeout(0.0) is None  # no periodic wake-up
    ctl._dirty = True  # a change: the saved status is due soon
    assert ctl._react_timeout(0.0) is not None


def _cli(*args):
    return CliRunner().invoke(main, ["controller", *args])


def test_mrc_controller_link_and_status(tmp_path, running):
    running(mode="ecmp")  # no host to DENY on: srv6 mode would log its retries into the output
    out = _cli("link", LINK, "--down", "--name", NAME, "--run-dir", str(tmp_path))
    assert out.exit_code == 0 and f"reported {LINK} down to controller 'lab'" in out.output, out.output
    out = _cli("status", "--name", NAME, "--run-dir", str(tmp_path))
    assert out.exit_code == 0, out.output
    assert "controller lab: running, pid" in out.output and "timeline:" in out.output and LINK in out.output
    raw = json.loads(_cli("status", "--name", NAME, "--run-dir", str(tmp_path), "--json").stdout)
    assert raw["reported_down"].keys() == {LINK}
    address = f"unix:{tmp_path}/{NAME}.sock"
    assert _cli("status", "--address", address).exit_code == 0


def test_mrc_controller_cli_errors_are_one_line(tmp_path, running):
    for args in (("link", LINK, "--down"), ("status",), ("watch",)):
        out = _cli(*args, "--name", NAME, "--run-dir", str(tmp_path))  # nothing runs yet
        assert out.exit_code == 2 and "no controller socket at" in out.output, out.output
        assert len(out.output.strip().splitlines()) == 1 and "Traceback" not in out.output
    running(mode="ecmp")
    bad = _cli("link", "p0/t0-9/t1-1", "--down", "--name", NAME, "--run-dir", str(tmp_path))
    assert bad.exit_code == 2 and "p0/t0-9/t1-1" in bad.output and len(bad.output.strip().splitlines()) == 1
    assert _cli("link", LINK, "--name", NAME, "--run-dir", str(tmp_path)).exit_code == 2  # --down or --up


def test_loopback_tcp_with_port_0_is_resolved(tmp_path, running):
    r = running(listen="127.0.0.1:0")
    assert r.ctl.address.startswith("127.0.0.1:") and not r.ctl.address.endswith(":0")
    with ControllerClient(r.ctl.address) as client:
        assert client.status()["name"] == NAME
    assert not (tmp_path / f"{NAME}.sock").exists()


def test_an_address_that_cannot_be_bound_is_one_clear_error(tmp_path):
    ctl = _controller(tmp_path, listen="192.0.2.1:1")  # TEST-NET-1: not an address of this machine

    async def run():
        await ctl.run(asyncio.Event())

    with pytest.raises(MrcError, match="controller northbound cannot listen on 192.0.2.1:1"):
        LOOP.call(run())


def test_mrc_controller_watch_follows_the_timeline_until_the_controller_stops(tmp_path, running):
    import subprocess
    import sys

    r = running(mode="ecmp")
    report_link(NAME, LINK, up=False, run_dir=tmp_path, source="before")
    mrc = [sys.executable, "-c", "import sys; from mrckit.cli import main; sys.exit(main())"]
    watch = subprocess.Popen([*mrc, "controller", "watch", "--name", NAME,
                              "--run-dir", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "link_down" in watch.stdout.readline()  # replayed: the report made before it started
        assert "reroute" in watch.stdout.readline()
        report_link(NAME, LINK, up=True, run_dir=tmp_path, source="after")
        up = watch.stdout.readline()
        assert "link_up" in up and LINK in up and "after" in up
        assert "restore" in watch.stdout.readline()
        r.stop()
        out, err = watch.communicate(timeout=60)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.communicate()
    assert watch.returncode == 0, err
    assert out.strip().splitlines()[-1] == "controller stopped"


class _BreakingTimeline(pbg.ControllerServicer):
    """A WatchTimeline that sends one mark, then breaks as a stopping server may
    (UNAVAILABLE), after its headers when ``headers``."""

    def __init__(self, headers: bool):
        self.headers = headers

    def WatchTimeline(self, request, context):
        if self.headers:
            context.send_initial_metadata(WATCH_HEADERS)
            yield pb.TimelineEvent(mark=mark_to_proto({"kind": "link_down", "time_ns": 1, "links": [LINK], "detail": ""}))
        context.abort(grpc.StatusCode.UNAVAILABLE, "server shutting down")


@pytest.mark.parametrize("headers", [True, False])
def test_watch_ends_when_a_controller_that_answered_goes_away(tmp_path, headers):
    server = grpc.server(ThreadPoolExecutor(2))
    pbg.add_ControllerServicer_to_server(_BreakingTimeline(headers), server)
    server.add_insecure_port(f"unix:{tmp_path}/w.sock")
    server.start()
    try:
        with ControllerClient(f"unix:{tmp_path}/w.sock") as client:
            if headers:
                assert [kind for kind, _ in client.watch()] == ["mark"]  # then the end, no error
            else:
                with pytest.raises(MrcError, match="no controller answers"):
                    list(client.watch())
    finally:
        server.stop(0)
