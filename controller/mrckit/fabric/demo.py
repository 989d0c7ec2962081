"""``mrc demo``: one MRC RDMA write across the default fabric, a link failed mid-flight and
restored, every byte verified (issue 10). See ``docs/demo.md``.

:func:`run_demo` brings the fabric up (``mrckit.fabric.Fabric``: switches, host agents and the
controller), runs the software endpoint (``mrckit.endpoint``) in two hosts' namespaces, samples
the sender's per-EV counters while the write runs, injects the fault at a third of the bytes and
restores it at two thirds (:class:`~mrckit.fabric.scenario.Phases`), then tears everything down
and returns the analysed :class:`~mrckit.fabric.report.DemoReport`. It prints nothing: progress
and phases go to an :class:`Observer`.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from ..errors import MrcError
from ..host.config import Settings
from ..proto import host_agent_pb2 as pb
from ..proto import host_agent_pb2_grpc as pbg
from ..topology import Role, generate_clos
from ..topology.plan import switch_name
from ..wire.addressing import t1_link_name
from .report import FAIL_KINDS, ByteCounts, DemoReport, EndpointCounts, FaultInfo, SwitchCounts
from .scenario import AgentEvent, ControllerEvent, Phases, RunRecord, analyze
from .demo_worker import demo_data
from .series import Recorder

DEFAULT_SIZE = 32 << 20
"""Bytes written by default: a few seconds for the pure-Python endpoint on a small machine."""
SENDER, RECEIVER = "h0-0", "h1-0"
FAILED_PLANE, FAILED_LEAF, FAILED_SPINE = 0, 1, 1
"""The failed link p0/t0-1/t1-1: spine 1 of plane 0 to the receiver's leaf."""
DEFAULT_LOSS_PERCENT, DEFAULT_FLAP_HZ = 10.0, 2.0
SAMPLE_S = 0.05
PHASE_POLL_S = 0.01
"""How often the main loop checks the bytes placed against the fault and restore points."""
"""Sampling period of the sender's EV counters and the responder's placed bytes."""
WRITE_TIMEOUT_S = 600.0
LIFT_WAIT_S = 3.0
"""After the write, how long to wait for the controller to lift its DENY (for the report)."""
QPN_SENDER, QPN_RECEIVER, RKEY, IMM = 0x100, 0x200, 0x1000, 0xD3E0
AGENT_SETTINGS = Settings(rto_ns=50_000_000, probe_interval_ns=20_000_000, backups_per_plane=8, min_unacked=4,
                          seed=10)
"""Host agents: an RTO of 50 ms, above the pure-Python endpoint's SACK delays on a busy
2-core machine (2 ms retires healthy EVs); a probe every 20 ms per probed EV; 8 backups per
plane, so that replacements cannot take every slot of the failed path: the EVs left in their
slots as ASSUMED_BAD come back there when probes succeed, and the path carries data again
after the restore (a retired EV that probes back goes to the backup pool, not to a slot).
An EV is retired after 4 unacked sends (the agent's default is 8): the receiver's SACKs also
cross the failed link, so 1 or 2 retire healthy EVs whose SACKs were lost, while 8 sends on
one EV take most of a second at the pure-Python endpoint's rate."""


class Observer:
    """What the demo reports while it runs; the CLI overrides both (default: silent)."""

    def phase(self, text: str) -> None:
        """A new phase began (one line for a human)."""

    def progress(self, placed: int, total: int) -> None:
        """``placed`` of ``total`` bytes are at the responder."""


@dataclass
class DemoOptions:
    """The demo's knobs (CLI options). ``size`` in bytes; ``loss_percent`` for ``loss``,
    ``flap_hz`` for ``flap``; ``name`` is the fabric's name (default ``demo<pid>``)."""

    target: str = "ebpf"
    size: int = DEFAULT_SIZE
    fail: str = "down"
    loss_percent: float = DEFAULT_LOSS_PERCENT
    flap_hz: float = DEFAULT_FLAP_HZ
    name: str = ""
    settings: Settings = field(default_factory=lambda: AGENT_SETTINGS)
    logs: str = ""

    def check(self) -> None:
        """Raises MrcError naming the bad option."""
        if self.target not in ("ebpf", "bmv2"):
            raise MrcError(f"--target {self.target!r}: use ebpf or bmv2")
        if self.fail not in FAIL_KINDS:
            raise MrcError(f"--fail {self.fail!r}: use one of {', '.join(FAIL_KINDS)}")
        if not 1 << 20 <= self.size <= 1 << 30:
            raise MrcError(f"--size {self.size}: use 1 MiB .. 1 GiB (the responder's memory region is "
                           "allocated in this process)")
        if not 0 < self.loss_percent <= 100:
            raise MrcError(f"--loss-percent {self.loss_percent}: must be within (0, 100]")
        if not 0 < self.flap_hz <= 50:
            raise MrcError(f"--flap-hz {self.flap_hz}: must be within (0, 50]")


def fault_info(opts: DemoOptions) -> FaultInfo:
    """The fault the demo injects, as the report describes it."""
    return FaultInfo(kind=opts.fail, link=t1_link_name(FAILED_PLANE, FAILED_LEAF, FAILED_SPINE),
                     node=switch_name(Role.T1, FAILED_PLANE, FAILED_SPINE), ifname=f"t0-{FAILED_LEAF}",
                     plane=FAILED_PLANE, spine=FAILED_SPINE,
                     loss_percent=opts.loss_percent if opts.fail == "loss" else None,
                     flap_hz=opts.flap_hz if opts.fail == "flap" else None)


def run_demo(opts: DemoOptions, observer: Observer | None = None) -> DemoReport:
    """Run the whole demo and return its report (``report.passed`` says whether every check
    held). Everything it made is torn down, on success, error and Ctrl-C.

    Raises:
        MrcError: a bad option, or the fabric could not be built (e.g. no bmv2 for
            ``--target bmv2``); the write failed (QP error) or timed out.
    """
    from .fabric import Fabric

    from .nodes import check_target

    opts.check()
    check_target(opts.target)  # bmv2 needs simple_switch_grpc: say so before anything starts
    obs = observer or Observer()
    topo = generate_clos()
    obs.phase(f"bringing up the default fabric on the {opts.target} target: {topo.planes} planes, "
              f"{len(topo.switches)} switches, {len(topo.hosts)} hosts, the controller")
    name = opts.name or f"demo{os.getpid() % 100000}"
    p4info, device_config = pipeline_files(opts.target)
    args = ("--name", name, "--p4info", str(p4info), "--device-config", str(device_config))
    fab = Fabric.up(topo, name=name, target=opts.target, settings=opts.settings, controller_args=args)
    try:
        obs.phase(f"fabric {fab.name} is up and programmed")
        run = _Run(fab, opts, obs)
        record = run.execute()
        record.switches = _switch_counts(fab, p4info)
    finally:
        if opts.logs:
            _keep_logs(fab, Path(opts.logs))
        obs.phase("tearing the fabric down")
        fab.down()
    return analyze(record)


class _Run:
    """One write with its fault, on a running fabric."""

    def __init__(self, fab, opts: DemoOptions, obs: Observer):
        self.fab, self.opts, self.obs = fab, opts, obs
        self.a, self.b = fab.host(SENDER), fab.host(RECEIVER)
        self.fault = fault_info(opts)
        self.demo_log: list[tuple[int, str]] = []
        self.fault_log: list[tuple[int, str]] = []

    def say(self, text: str) -> None:
        self.demo_log.append((time.monotonic_ns(), text))
        self.obs.phase(text)

    def execute(self) -> RunRecord:
        watchers = [_EventWatcher(self.fab.host(h)) for h in self.fab.hosts()]
        workers: list[_Worker] = []
        try:
            return self._transfer(watchers, workers)
        finally:
            for w in workers:
                w.close()
            for w in watchers:
                w.stop()

    def _transfer(self, watchers, workers) -> RunRecord:
        size, seed = self.opts.size, random.getrandbits(32)
        common = ["--size", str(size), "--seed", str(seed), "--rkey", str(RKEY)]
        rx = _Worker(self.b, ["respond", "--nic", self.b.nic_address, "--peer", self.a.nic_address,
                              "--qpn", str(QPN_RECEIVER), "--remote-qpn", str(QPN_SENDER), *common])
        workers.append(rx)
        tx = _Worker(self.a, ["write", "--nic", self.a.nic_address, "--peer", self.b.nic_address,
                              "--qpn", str(QPN_SENDER), "--remote-qpn", str(QPN_RECEIVER), "--imm", str(IMM), *common])
        workers.append(tx)
        rx.wait("ready", 60)
        tx.wait("ready", 60)
        sha_sent = hashlib.sha256(demo_data(seed, size)).hexdigest()
        phases = Phases(size)
        rec = Recorder(time.monotonic_ns(), [(p, s) for p in range(self.fab.topology.planes)
                                             for s in range(_spines(self.fab.topology, p))])
        sampler = _Sampler(self.a, self.b.nic_address, rec, lambda: rx.state.get("placed", 0))
        self.say(f"RDMA WRITE of {size} B from {SENDER} [{self.a.nic_address}] to {RECEIVER} "
                 f"[{self.b.nic_address}], sprayed over every plane and spine")
        tx.send("go")
        marks = dict(t_fault=None, t_restore=None, fault_rows=[], restore_rows=[])
        deadline = time.monotonic() + WRITE_TIMEOUT_S
        try:
            while "done" not in tx.state and "error" not in tx.state:
                tx.check_alive()
                if time.monotonic() > deadline:
                    raise MrcError(f"the write did not complete in {WRITE_TIMEOUT_S:.0f} s "
                                   f"({rx.state.get('placed', 0)} of {size} B placed)")
                self._step(sampler, rx.state.get("placed", 0), phases, marks)
                time.sleep(PHASE_POLL_S)
            if "error" in tx.state:
                raise MrcError(f"the write failed: {tx.state['error']}")
            sampler.stop()  # before the responder's verification, which takes a while
            result = rx.wait("done", 60)
            t_end = tx.state["finished_ns"]
            self._step(sampler, rx.state["placed"], phases, marks)
            if marks["t_restore"] is None:
                raise MrcError(f"the write of {size} B finished before the fault could be injected and "
                               "restored; use a larger --size")
            self.say(f"write complete: {rx.state['placed']} B placed in {(t_end - rec.t0_ns) / 1e9:.2f} s")
        finally:
            if marks["t_fault"] is not None and marks["t_restore"] is None:
                self._restore(marks, [])
            sampler.stop()
        self._wait_lift(marks["t_restore"])
        sha_got, verified = result["sha256"], result["verified"]
        self.say(f"verified {verified} of {size} B; SHA-256 {'match' if sha_got == sha_sent else 'MISMATCH'}")
        events = [e for w in watchers for e in w.snapshot()]
        rs, rq = result["stats"], tx.state["stats"]
        return RunRecord(
            target=self.opts.target, topology=_topology_sizes(self.fab.topology), sender=SENDER,
            receiver=RECEIVER, receiver_nic=self.b.nic_address, fault=self.fault, recorder=rec,
            t_fault_ns=marks["t_fault"], t_restore_ns=marks["t_restore"], t_end_ns=t_end,
            bytes=ByteCounts(sent=size, placed=rs["placed_bytes"], verified=verified,
                             sha256_sent=sha_sent, sha256_received=sha_got, hash_match=sha_got == sha_sent),
            endpoint=_endpoint_counts(rq, rs), switches=SwitchCounts(),
            events=events, controller=_controller_events(self.fab), fault_log=self.fault_log,
            demo_log=self.demo_log, fault_rows=marks["fault_rows"], restore_rows=marks["restore_rows"])

    def _step(self, sampler, placed: int, phases: Phases, marks: dict) -> None:
        self.obs.progress(min(placed, self.opts.size), self.opts.size)
        action = phases.due(placed)
        rows = sampler.last_rows
        if action == "fail":
            marks["fault_rows"] = rows
            marks["t_fault"] = time.monotonic_ns()
            line = self._fail()
            self.fault_log.append((marks["t_fault"], line))
            self.say(f"fault injected at {placed * 100 // self.opts.size} % of the bytes: "
                     f"{self.fault.describe()} on {self.fault.link}")
        elif action == "restore":
            self._restore(marks, rows)
            self.say(f"fault restored at {placed * 100 // self.opts.size} % of the bytes")

    def _link_nodes(self) -> tuple[str, str]:
        return (switch_name(Role.T0, FAILED_PLANE, FAILED_LEAF), switch_name(Role.T1, FAILED_PLANE, FAILED_SPINE))

    def _fail(self) -> str:
        value = {"loss": self.opts.loss_percent, "flap": self.opts.flap_hz}.get(self.opts.fail)
        return self.fab.fail_link(*self._link_nodes(), kind=self.opts.fail, value=value)

    def _restore(self, marks: dict, rows: list[dict]) -> None:
        marks["restore_rows"] = rows
        marks["t_restore"] = time.monotonic_ns()
        self.fault_log.append((marks["t_restore"], self.fab.restore(*self._link_nodes())))

    def _wait_lift(self, t_restore: int | None) -> None:
        """Give the controller a moment to lift its DENY, so the report can show it."""
        if t_restore is None:
            return
        end = time.monotonic() + LIFT_WAIT_S
        while time.monotonic() < end:
            events = _controller_events(self.fab)
            denied = any(c.what == "DENY" for c in events)
            if not denied or any(c.what == "LIFT" and c.t_ns >= t_restore for c in events):
                return
            time.sleep(0.1)


class _Sampler:
    """A thread that reads the sender's EV table toward one peer over the agent's gRPC API
    every ``SAMPLE_S`` and records it with ``placed()`` into ``rec``; a slow read never holds
    up the fault and restore, which the main loop fires."""

    def __init__(self, host, peer: str, rec: Recorder, placed):
        self.peer, self.rec, self.placed = peer, rec, placed
        self.channel = grpc.insecure_channel(host.agent_address)
        self.stub = pbg.HostAgentStub(self.channel)
        self.last_rows: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.sample()
                self._stop.wait(SAMPLE_S)
        except grpc.RpcError:
            pass  # the agent went away; the demo fails on the write, not here

    def sample(self) -> None:
        """Read the EV table once and record it."""
        rows = self.rows()
        self.rec.record(time.monotonic_ns(), self.placed(), rows)
        self.last_rows = rows

    def rows(self) -> list[dict]:
        stats = self.stub.GetStats(pb.GetStatsRequest(include_evs=True, peer=self.peer), timeout=10)
        return [dict(ev=e.ev, plane=e.plane, t1=e.t1, state=pb.EvState.Name(e.state), tx_packets=e.tx_packets,
                     last_tx_ns=e.last_tx_ns, retired=e.retired)
                for p in stats.peers for e in p.evs]

    def stop(self) -> None:
        """Stop the thread, take a last sample, close the channel (idempotent)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(15)
        try:
            self.sample()
        except grpc.RpcError:
            pass  # the agent went away (an error is being raised already): keep the samples we have
        self.channel.close()


class _EventWatcher:
    """Collects one host agent's WatchEvents stream in a thread."""

    def __init__(self, host):
        self.host = host.name
        self.channel = grpc.insecure_channel(host.agent_address)
        self.events: list[AgentEvent] = []
        self._lock = threading.Lock()
        self.stream = pbg.HostAgentStub(self.channel).WatchEvents(pb.WatchEventsRequest())
        self.thread = threading.Thread(target=self._pump, name=f"demo-events-{host.name}", daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        try:
            for e in self.stream:
                event = AgentEvent(self.host, e.timestamp_ns, e.peer, e.ev, pb.EvState.Name(e.old_state),
                                   pb.EvState.Name(e.new_state), e.reason, e.plane, e.link, e.probe_ok,
                                   e.replaced_by)
                with self._lock:
                    self.events.append(event)
        except grpc.RpcError:
            pass  # cancelled by stop(), or the agent went away

    def snapshot(self) -> list[AgentEvent]:
        with self._lock:
            return list(self.events)

    def stop(self) -> None:
        self.stream.cancel()
        self.thread.join(2)
        self.channel.close()


def _controller_events(fab) -> list[ControllerEvent]:
    """The controller's timeline (wall-clock marks) on the monotonic clock of the samples."""
    from ..control.status import read_status, status_path

    try:
        status = read_status(status_path(fab.name))
    except MrcError:
        return []
    offset = time.time_ns() - time.monotonic_ns()
    kinds = {"deny_all_hosts": "DENY", "lifted": "LIFT", "localised": "LOCALISED"}
    return [ControllerEvent(int(m["time_ns"]) - offset, kinds.get(m["kind"], m["kind"]), tuple(m.get("links", ())),
                            m.get("detail", ""))
            for m in status.get("timeline", []) if m.get("kind") in kinds]


def _keep_logs(fab, folder: Path) -> None:
    """Copy the fabric's process logs (switches, agents, controller) and the controller's
    status into ``folder`` before teardown removes them."""
    import shutil

    from ..control.status import status_path

    folder.mkdir(parents=True, exist_ok=True)
    for log in fab.state.dir.glob("*.log"):
        shutil.copy(log, folder / log.name)
    status = status_path(fab.name)
    if status.exists():
        shutil.copy(status, folder / "controller-status.json")


def pipeline_files(target: str) -> tuple[Path, Path]:
    """The P4Info and device config the controller pushes: p4c's outputs in ``p4src/build``.
    Until those are committed, the eBPF target takes the hand-written P4Info of the same
    contract (``tests/p4runtime/fixtures``) with an empty device config, which it stores
    untouched (design section 4); bmv2 needs p4c's JSON.

    Raises:
        MrcError: neither P4Info exists, or ``--target bmv2`` without the bmv2 JSON.
    """
    from ..control.pipeline import DEFAULT_DEVICE_CONFIG, DEFAULT_P4INFO, REPO_ROOT

    if DEFAULT_P4INFO.exists() and DEFAULT_DEVICE_CONFIG.exists():
        return DEFAULT_P4INFO, DEFAULT_DEVICE_CONFIG
    if target == "bmv2":
        raise MrcError(f"--target bmv2 needs p4c's outputs {DEFAULT_P4INFO} and {DEFAULT_DEVICE_CONFIG} "
                       "(run `make p4` where p4c is built)")
    handwritten = REPO_ROOT / "tests" / "p4runtime" / "fixtures" / "mrc_switch.handwritten.p4info.txtpb"
    if not handwritten.exists():
        raise MrcError(f"no P4Info: neither {DEFAULT_P4INFO} nor {handwritten} exists")
    return handwritten, Path(os.devnull)


def _switch_counts(fab, p4info: Path) -> SwitchCounts:
    from ..control.pipeline import load_pipeline
    from .counters import fabric_counts, read_counters

    schema = load_pipeline(p4info, b"").schema
    return fabric_counts(fab.topology, lambda name: read_counters(
        fab.switch_address(name), fab.state.device_ids[name], schema))


def _spines(topology, plane: int) -> int:
    return sum(1 for s in topology.switches if s.role == Role.T1 and s.plane == plane)


def _topology_sizes(topology) -> dict[str, int]:
    t0 = [s for s in topology.switches if s.role == Role.T0]
    leaves = len({s.index for s in t0})
    return dict(planes=topology.planes, spines=_spines(topology, 0), leaves=leaves,
                hosts_per_leaf=len(topology.hosts) // max(leaves, 1))


def _endpoint_counts(rq: dict, rs: dict) -> EndpointCounts:
    """The report's endpoint counters from the workers' stats (``RequestorStats`` and
    ``ResponderStats`` as dicts)."""
    return EndpointCounts(
        data_packets=rq["packets"], retransmits=rq["retransmits"], retransmits_total=sum(rq["retransmits"].values()),
        sacks=rq["sacks"], nacks={str(k): v for k, v in rq["nacks"].items()}, timeouts=rq["timeouts"],
        probes=rq["probes"], responder_packets=rs["packets"], responder_duplicates=rs["duplicates"],
        responder_trimmed=rs["trimmed"], responder_ce_marked=rs["ce_marked"])


class _Worker:
    """One endpoint process (``mrckit.fabric.demo_worker``) in a host's namespace: its JSON
    lines are merged into ``state``; :meth:`wait` blocks until a key appears."""

    def __init__(self, host, argv: list[str]):
        self.name = f"{argv[0]} on {host.name}"
        self.proc = host.popen([sys.executable, "-m", "mrckit.fabric.demo_worker", *argv], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.state: dict = {}
        self._cv = threading.Condition()
        self._reader = threading.Thread(target=self._read, name=f"demo-{argv[0]}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            with self._cv:
                self.state.update(msg)
                self._cv.notify_all()
        with self._cv:
            self.state.setdefault("exited", True)
            self._cv.notify_all()

    def wait(self, key: str, timeout: float) -> dict:
        """The state once ``key`` is in it. Raises MrcError if the process exits or times out."""
        with self._cv:
            self._cv.wait_for(lambda: key in self.state or "exited" in self.state or "error" in self.state, timeout)
            if key in self.state:
                return dict(self.state)
        why = self.state.get("error") or ("exited" if "exited" in self.state else f"no {key!r} in {timeout:.0f} s")
        raise MrcError(f"the {self.name} process: {why}{self._stderr()}")

    def check_alive(self) -> None:
        """Raises MrcError if the process died before finishing."""
        if "exited" in self.state and "done" not in self.state and "error" not in self.state:
            raise MrcError(f"the {self.name} process exited early{self._stderr()}")

    def _stderr(self) -> str:
        if self.proc.poll() is None:
            return ""
        tail = (self.proc.stderr.read() or "").strip().splitlines()[-3:]
        return (": " + " | ".join(tail)) if tail else ""

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        """Close its stdin (the responder's cue to exit); terminate it if it lingers."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            self.proc.wait(5)
