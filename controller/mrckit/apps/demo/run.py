"""``mrc demo``: one MRC RDMA write across the default fabric, a link failed mid-flight and
restored, every byte verified. See ``docs/demo.md``.

:func:`run_demo` brings the fabric up (``mrckit.fabric.Fabric``: switches, host agents and the
controller), runs the software endpoint (``mrckit.endpoint``) as two processes in two hosts' namespaces
(``worker.py``), samples (``observe.py``)
the sender's per-EV counters while the write runs, injects the fault at a third of the bytes and
restores it at two thirds (:class:`~mrckit.apps.demo.scenario.Phases`), then tears everything down
and returns the analysed :class:`~mrckit.apps.demo.report.DemoReport`. It prints nothing: progress
and phases go to an :class:`Observer`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from ...endpoint.choices import ENDPOINTS
from ...endpoint.endpoint import QpConfig
from ...errors import MrcError
from ...host.config import Settings
from ...topology import Role, generate_clos
from ...topology.plan import switch_name
from ...wire.addressing import t1_link_name
from ...wire.constants import TIME_UNIT_NS
from ...fabric.flap import FlapWindow
from .report import (
    FAIL_KINDS, ByteCounts, DemoReport, EndpointCounts, EndpointName, FailKind, FaultInfo, Mode, SwitchCounts, Target,
)
from .worker import WorkerProcess, demo_data
from .observe import EventWatcher, EvTableSampler, controller_events, dataplane_rows, link_counters, switch_counts
from .scenario import Phases, RunRecord, analyze
from .series import Recorder
from ...fabric.state import check_name

DEFAULT_DURATION_S = 8.0
"""How long the write should last by default; the size follows from the endpoint's rate. Longer
than the few seconds the phases need, because applying the fault and reading the switch counters
before it take up to seconds on this loaded machine, and a write that ends first proves nothing."""
RATE_ESTIMATE = {"native": 32 << 20, "python": 16 << 20}
"""Bytes per second the demo expects across the default fabric on this 2-core machine, per
endpoint, at the low end of what it measured (JSON ``goodput_gbps``): native 34-42 MB/s at load
2-5 and 120-180 MB/s quiet, Python 60-80 MB/s quiet. It sizes the warm-up write, whose measured
rate then sizes the demo's write (``WARMUP_S``)."""
WARMUP_S = 1.0
"""How long the warm-up write should last at the expected rate. Without ``--size`` the demo
first times a write of that size between the same two hosts, then sizes its own write to last
``--duration`` at the rate measured: the native endpoint's rate here ranges from about 35 MB/s
(the machine busy) to 180 MB/s (quiet), and a write shorter than the controller's DENY and LIFT
(0.3-2.5 s) cannot show a path come back."""
WARMUP_SEED = 0
"""The warm-up write's data (``demo_data``): the demo only times that write."""
BMV2_RATE_ESTIMATE = 3 << 20
"""Bytes per second across a bmv2 fabric, whichever the endpoint: bmv2 forwards a few thousand
packets a second here (the native endpoint moved 32 MiB in 11.5 s)."""
MIN_SIZE, MAX_SIZE = 1 << 20, 1 << 30
SENDER, RECEIVER = "h0-0", "h1-0"
WARMUP_RECEIVER = "h1-1"
"""The warm-up write's responder: the receiver's neighbour on its leaf, so the warm-up crosses
the same planes and spines, while the sender's EV set toward the receiver, whose per-EV counts
the loss accounting reads, stays untouched until the write."""
FAILED_PLANE, FAILED_LEAF, FAILED_SPINE = 0, 1, 1
"""The failed link p0/t0-1/t1-1: spine 1 of plane 0 to the receiver's leaf."""
DEFAULT_LOSS_PERCENT, DEFAULT_FLAP_HZ = 10.0, 2.0
BMV2_MAX_CWND = 16
"""The writer's window on the bmv2 target, in packets (see ``DemoOptions.writer_window``)."""
NATIVE_MAX_CWND = 32
"""The native writer's window on the eBPF target, in packets (64 KiB): about twice the default
fabric's bandwidth-delay product here (about 1.7 Gb/s x 150 us). The NSCC-style window grows on
every ACK that carries no ECN mark, and nothing on this path marks: the bottleneck is the CPU,
whose queues (socket buffers, veth backlogs) no switch sees. Uncapped, it grows to the MPR
(1024 packets) and its own queue lifts the RTT to about 10 ms; every loss is then detected 10 ms
late, and the failover takes that long. Capped, the RTT stays near its base and goodput is the
same or better (docs/demo.md, "The writer's window")."""
MAX_WINDOW = QpConfig.mpr
"""Largest ``--max-cwnd``: the writer's MPR in packets (the window never exceeds it)."""
BMV2_TIMEOUT_EXP = 18
"""The writer's RTO on bmv2: 1.024 us x 2^18 = 268 ms. Ten bmv2 processes on two cores delay
some packets by tens of ms; a spurious RTO retransmits a packet that was only late, and the
host dataplane then retires the healthy EV that carried it (LOSS)."""
MIN_FAULT_S = 1.5
"""The fault lasts at least this long (unless 80 % of the bytes are placed first): the flap
process must start, the agents detect and the controller deny, whatever the write's speed."""
PHASE_POLL_S = 0.01
"""How often the main loop checks the bytes placed against the fault and restore points."""
"""Sampling period of the sender's EV counters and the responder's placed bytes."""
WRITE_TIMEOUT_S = 600.0
LIFT_WAIT_S = 3.0
"""After the write, how long to wait for the controller to lift its DENY (for the report)."""
ALLOW_WAIT_S = 10.0
"""Before the write, how long to wait for the fault's link to be allowed again on the sender."""
QPN_SENDER, QPN_RECEIVER, RKEY, IMM = 0x100, 0x200, 0x1000, 0xD3E0
PYTHON_AGENT_SETTINGS = Settings(rto_ns=50_000_000, probe_interval_ns=20_000_000, backups_per_plane=8, min_unacked=4,
                          seed=10)
"""Host agents: an RTO of 50 ms, above the pure-Python endpoint's SACK delays on a busy
2-core machine (2 ms retires healthy EVs); a probe every 20 ms per probed EV; 8 backups per
plane, so that replacements cannot take every slot of the failed path: the EVs left in their
slots as ASSUMED_BAD come back there when probes succeed, and the path carries data again
after the restore (a retired EV that probes back goes to the backup pool, not to a slot).
An EV is retired after 4 unacked sends (the agent's default is 8): the receiver's SACKs also
cross the failed link, so 1 or 2 retire healthy EVs whose SACKs were lost, while 8 sends on
one EV take most of a second at the pure-Python endpoint's rate."""

AGENT_SETTINGS = Settings(rto_ns=10_000_000, backups_per_plane=8, seed=10)
"""Host agents with the native endpoint: an RTO of 10 ms, the agent's own probe interval (1 ms)
and retirement after 8 unacked sends, with 8 backups per plane as with the Python endpoint
(the path comes back after the restore). The dataplane's loss retirement, not this RTO, takes
a dead path out (the endpoint retransmits within milliseconds); the agent's RTO sweep is the
fallback. At the agent's default 2 ms it retired healthy paths: the native endpoint sends 8
packets on an EV in well under a millisecond, and on this shared 2-core machine one path's
queue waits milliseconds for a core while the others deliver, which the sweep's sibling rule
(a sibling acked for a packet sent rto/2 later) takes for a dead path (20 RTO_TIMEOUT and 267
PATH_LOSS retirements in an 8 s demo at load 4 with no packet lost; at load 20, 5 RTO_TIMEOUT
and a DENY of three healthy links)."""

BMV2_AGENT_SETTINGS = dataclasses.replace(PYTHON_AGENT_SETTINGS, rto_ns=400_000_000)
"""On bmv2 the agents' RTO is 400 ms: bmv2's delays on this machine exceed 50 ms now and then,
and an EV that is only slow must not look failed to the agents and then to the controller."""


class Observer:
    """What the demo reports while it runs; the CLI overrides both (default: silent)."""

    def phase(self, text: str) -> None:
        """A new phase began (one line for a human)."""

    def progress(self, placed: int, total: int) -> None:
        """``placed`` of ``total`` bytes are at the responder."""


@dataclass
class DemoOptions:
    """The demo's knobs (CLI options). ``size`` in bytes; ``loss_percent`` for ``loss``,
    ``flap_hz`` for ``flap``; ``name`` is the fabric's name (default ``demo<pid>``); ``mode``
    the fabric's forwarding mode (``srv6`` or ``ecmp``); ``seed`` the data's seed (None: random;
    the EV-hash comparison gives both runs the same one). The CLI hands over plain strings:
    :meth:`check` holds them to the values the types name."""

    target: Target = "ebpf"
    mode: Mode = "srv6"
    seed: int | None = None
    size: int | None = None
    duration_s: float = DEFAULT_DURATION_S
    endpoint: EndpointName = "native"
    timeout_exp: int | None = None
    max_cwnd: int | None = None
    fail: FailKind = "down"
    loss_percent: float = DEFAULT_LOSS_PERCENT
    flap_hz: float = DEFAULT_FLAP_HZ
    name: str = ""
    settings: Settings | None = None
    logs: str = ""

    def expected_rate(self) -> int:
        """Bytes/s the write is expected to move: ``RATE_ESTIMATE`` of the endpoint, at most
        ``BMV2_RATE_ESTIMATE`` on bmv2."""
        rate = RATE_ESTIMATE[self.endpoint]
        return min(rate, BMV2_RATE_ESTIMATE) if self.target == "bmv2" else rate

    def warmup_size(self) -> int:
        """Bytes of the warm-up write: ``WARMUP_S`` at the expected rate (whole MiB, >= 1 MiB)."""
        return write_size_for(WARMUP_S, self.expected_rate())

    def write_size(self, rate_bps: float | None = None) -> int:
        """Bytes to write: ``size`` when given, else ``duration_s`` at ``rate_bps`` (bytes/s,
        measured by the warm-up write) or, without it, at the expected rate; rounded to MiB,
        within 1 MiB .. 1 GiB."""
        if self.size is not None:
            return self.size
        return write_size_for(self.duration_s, rate_bps or self.expected_rate())

    def writer_window(self) -> int:
        """The cap of the writer's window in packets (0: none, the MPR): ``max_cwnd`` when
        given, else ``BMV2_MAX_CWND`` on bmv2, ``NATIVE_MAX_CWND`` for the native endpoint, and
        none for the Python one (its own per-packet cost keeps its queue short)."""
        if self.max_cwnd is not None:
            return self.max_cwnd
        if self.target == "bmv2":
            return BMV2_MAX_CWND
        return NATIVE_MAX_CWND if self.endpoint == "native" else 0

    def agent_settings(self) -> Settings:
        """The host agents' settings: ``settings`` when given, else the ones tuned for this
        endpoint and target (bmv2: a long RTO whatever the endpoint)."""
        if self.settings is not None:
            return self.settings
        if self.target == "bmv2":
            return BMV2_AGENT_SETTINGS
        return AGENT_SETTINGS if self.endpoint == "native" else PYTHON_AGENT_SETTINGS

    def check(self) -> None:
        """Raises MrcError naming the bad option."""
        if self.target not in ("ebpf", "bmv2"):
            raise MrcError(f"--target {self.target!r}: use ebpf or bmv2")
        if self.mode not in ("srv6", "ecmp"):
            raise MrcError(f"--mode {self.mode!r}: use srv6 or ecmp")
        if self.endpoint not in ENDPOINTS:
            raise MrcError(f"--endpoint {self.endpoint!r}: use native or python")
        if self.timeout_exp is not None and not 0 <= self.timeout_exp <= 24:
            raise MrcError(f"--timeout-exp {self.timeout_exp}: use 0 .. 24 (RTO = 1.024 us x 2^N)")
        if self.max_cwnd is not None and not 0 <= self.max_cwnd <= MAX_WINDOW:
            raise MrcError(f"--max-cwnd {self.max_cwnd}: use 0 (no cap) .. {MAX_WINDOW} packets")
        if not 0.5 <= self.duration_s <= 120:
            raise MrcError(f"--duration {self.duration_s:g}: use 0.5 .. 120 s")
        if self.fail not in FAIL_KINDS:
            raise MrcError(f"--fail {self.fail!r}: use one of {', '.join(FAIL_KINDS)}")
        if self.size is not None and not MIN_SIZE <= self.size <= MAX_SIZE:
            raise MrcError(f"--size {self.size}: use 1 MiB .. 1 GiB (the data and the responder's region "
                           "are held in memory)")
        if not 0 < self.loss_percent <= 100:
            raise MrcError(f"--loss-percent {self.loss_percent}: must be within (0, 100]")
        if not 0 < self.flap_hz <= 50:
            raise MrcError(f"--flap-hz {self.flap_hz}: must be within (0, 50]")
        if self.name:  # "" and None: the default name, demo<pid>
            check_name(self.name)  # before anything is printed or built


def write_size_for(duration_s: float, rate_bps: float) -> int:
    """Bytes that last ``duration_s`` seconds at ``rate_bps`` bytes/s, rounded to whole MiB and
    held within 1 MiB .. 1 GiB (the data and the responder's region are held in memory)."""
    mib = round(duration_s * rate_bps / (1 << 20))
    return min(max(mib << 20, MIN_SIZE), MAX_SIZE)


def endpoint_check(name: str) -> None:
    """Raises MrcError when endpoint ``name`` cannot run here (the native library not built)."""
    from ...endpoint import implementation

    try:
        implementation(name)
    except ValueError as exc:
        raise MrcError(f"--endpoint {name}: {exc}") from None


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
    from ...fabric.fabric import Fabric
    from ...fabric.nodes import check_target

    opts.check()
    check_target(opts.target)  # bmv2 needs simple_switch_grpc: say so before anything starts
    endpoint_check(opts.endpoint)
    obs = observer or Observer()
    topo = generate_clos()
    in_mode = " in EV-hash (ecmp) mode" if opts.mode == "ecmp" else ""
    obs.phase(f"bringing up the default fabric on the {opts.target} target{in_mode}: {topo.planes} planes, "
              f"{len(topo.switches)} switches, {len(topo.hosts)} hosts, the controller")
    name = opts.name or f"demo{os.getpid() % 100000}"
    p4info, device_config = pipeline_files(opts.target)
    args = ("--name", name, "--p4info", str(p4info), "--device-config", str(device_config))
    settings = opts.agent_settings()
    fab = Fabric.up(topo, name=name, target=opts.target, mode=opts.mode, settings=settings,
                    controller_args=args)
    try:
        obs.phase(f"fabric {fab.name} is up and programmed")
        return run_on_fabric(fab, opts, obs)
    finally:
        if opts.logs:
            _keep_logs(fab, Path(opts.logs))
        obs.phase("tearing the fabric down")
        fab.down()


def run_on_fabric(fab, opts: DemoOptions, observer: Observer | None = None) -> DemoReport:
    """The demo's write, fault and analysis on a fabric that is up already (``fab``: a running
    :class:`mrckit.fabric.Fabric` with hosts ``h0-0``, ``h1-0`` and ``h1-1``, two leaves and two
    spines per plane at least, its agents set up with ``opts.agent_settings()``): what
    :func:`run_demo` does between bring-up and teardown, for applications that build their own
    fabric (``mrckit.apps.experiments``). The fabric is left up.

    Raises:
        MrcError: as :func:`run_demo`, the fabric aside.
    """
    p4info, _ = pipeline_files(opts.target)
    run = _Run(fab, opts, observer or Observer(), p4info)
    record = run.execute()
    record.switches = switch_counts(fab, p4info)
    return analyze(record)


@dataclass
class _Marks:
    """When the demo injected its fault, began and ended its restore (CLOCK_MONOTONIC ns; None
    until it did), and the sender's EV rows just before the fault and the restore."""

    t_fault: int | None = None
    t_restore: int | None = None
    t_restored: int | None = None
    fault_rows: list[dict] = field(default_factory=list)
    restore_rows: list[dict] = field(default_factory=list)

    def fault_times(self, size: int) -> tuple[int, int]:
        """``(t_fault, t_restore)`` of a write of ``size`` bytes that saw both.

        Raises:
            MrcError: the write finished before the fault could be injected and restored.
        """
        if self.t_fault is None or self.t_restore is None:
            raise MrcError(f"the write of {size} B finished before the fault could be injected and "
                           "restored; use a longer --duration or a larger --size")
        return self.t_fault, self.t_restore


class _Run:
    """One write with its fault, on a running fabric."""

    def __init__(self, fab, opts: DemoOptions, obs: Observer, p4info: Path | None = None):
        self.fab, self.opts, self.obs, self.p4info = fab, opts, obs, p4info
        self.path_of = None
        if opts.mode == "ecmp":
            from .ecmp_paths import nominal_path

            self.path_of = nominal_path(fab.compiled, fab.compiled.host(SENDER).leaf)
        self.link_before: dict[str, int] | None = None
        self.a, self.b = fab.host(SENDER), fab.host(RECEIVER)
        self.fault = fault_info(opts)
        self.demo_log: list[tuple[int, str]] = []
        self.fault_log: list[tuple[int, str]] = []
        self.dead_evs: frozenset[int] = frozenset()
        self.fault_drops: int | None = None
        self.denied_at_fault: bool | None = None
        self.first_drop_ns: int | None = None
        self.flap: FlapWindow | None = None  # a flap fault's, read once it is restored
        self.size = opts.size
        """Bytes of the write: ``--size``, or set by the warm-up write."""

    def _write_size(self) -> int:
        """Bytes of the write, once known.

        Raises:
            MrcError: asked before the warm-up write sized the write.
        """
        if self.size is None:
            raise MrcError("the demo's write has no size yet: the warm-up write sizes it")
        return self.size

    def say(self, text: str) -> None:
        self.demo_log.append((time.monotonic_ns(), text))
        self.obs.phase(text)

    def execute(self) -> RunRecord:
        watchers = [EventWatcher(self.fab.host(h)) for h in self.fab.hosts()]
        workers: list[WorkerProcess] = []
        try:
            return self._transfer(watchers, workers)
        finally:
            for worker in workers:
                worker.close()
            for watcher in watchers:
                watcher.stop()

    def _pair(self, size: int, seed: int, workers: list, receiver=None) -> tuple[WorkerProcess, WorkerProcess]:
        """Start the responder (on ``receiver``, default the demo's) and the writer of a
        ``size``-byte write of the ``seed`` data, and wait until both are ready (the writer then
        waits for ``go``)."""
        b = receiver or self.b
        common = ["--size", str(size), "--seed", str(seed), "--rkey", str(RKEY), "--endpoint", self.opts.endpoint]
        rx = WorkerProcess(b, ["respond", "--nic", b.nic_address, "--peer", self.a.nic_address,
                               "--qpn", str(QPN_RECEIVER), "--remote-qpn", str(QPN_SENDER), *common])
        workers.append(rx)
        tx = WorkerProcess(self.a, ["write", "--nic", self.a.nic_address, "--peer", b.nic_address,
                                    "--qpn", str(QPN_SENDER), "--remote-qpn", str(QPN_RECEIVER),
                                    "--imm", str(IMM), "--timeout-exp", str(self._timeout_exp()), *common,
                                    *self._window_args()])
        workers.append(tx)
        rx.wait("ready", 60)
        tx.wait("ready", 60)
        return rx, tx

    def _warm_up(self, workers: list) -> float:
        """The write's rate now (bytes/s): a write of ``DemoOptions.warmup_size`` from the
        sender to ``WARMUP_RECEIVER``, on the same fabric, timed by the writer (post to
        completion)."""
        size = self.opts.warmup_size()
        rx, tx = self._pair(size, WARMUP_SEED, workers, self.fab.host(WARMUP_RECEIVER))
        tx.send("go")
        done = tx.wait("done", WRITE_TIMEOUT_S)
        for w in (tx, rx):
            w.close()
            workers.remove(w)
        seconds = max(done["finished_ns"] - done["started_ns"], 1) / 1e9
        self.say(f"warm-up write: {size} B to {WARMUP_RECEIVER} in {seconds:.2f} s ({size / seconds / 1e6:.1f} MB/s); "
                 f"the write is sized to last {self.opts.duration_s:g} s at that rate")
        return size / seconds

    def _transfer(self, watchers: list[EventWatcher], workers: list[WorkerProcess]) -> RunRecord:
        if self.size is None:
            self.size = self.opts.write_size(self._warm_up(workers))
        size = self.size
        seed = self.opts.seed if self.opts.seed is not None else random.getrandbits(32)
        rx, tx = self._pair(size, seed, workers)
        sha_sent = hashlib.sha256(demo_data(seed, size)).hexdigest()
        phases = Phases(size, min_fault_ns=int(MIN_FAULT_S * 1e9))
        rec = Recorder(time.monotonic_ns(), [(p, s) for p in range(self.fab.topology.planes)
                                             for s in range(_spines(self.fab.topology, p))])
        sampler = EvTableSampler(self.a, self.b.nic_address, rec, lambda: rx.state.get("placed", 0), self.path_of)
        self.say(f"RDMA WRITE of {size} B ({self.opts.endpoint} endpoint) from {SENDER} [{self.a.nic_address}] to {RECEIVER} "
                 f"[{self.b.nic_address}], sprayed over every plane and spine")
        self._snapshot(sampler)  # the first read opens libbpf's handles: not at the fault
        self._wait_allowed()
        tx.send("go")
        marks = _Marks()
        try:
            self._drive(tx, rx, sampler, phases, marks)
            if "error" in tx.state:
                raise MrcError(f"the write failed: {tx.state['error']}")
            sampler.stop()  # before the responder's verification, which takes a while
            result = rx.wait("done", 60)
            t_end = tx.state["finished_ns"]
            self._step(sampler, rx.state["placed"], phases, marks)
            t_fault, t_restore = marks.fault_times(size)
            self.say(f"write complete: {rx.state['placed']} B placed in {(t_end - rec.t0_ns) / 1e9:.2f} s")
        finally:
            if marks.t_fault is not None and marks.t_restore is None:
                self._restore(marks, [])
            sampler.stop()
        self._wait_lift(t_restore)
        link_lost = self._link_lost()
        rx.close()  # its final counts include the requestor's last retransmissions
        sha_got, verified = result["sha256"], result["verified"]
        self.say(f"verified {verified} of {size} B; SHA-256 {'match' if sha_got == sha_sent else 'MISMATCH'}")
        events = [e for w in watchers for e in w.snapshot()]
        rs, rq = result["stats"], tx.state["stats"]
        return RunRecord(
            target=self.opts.target, topology=_topology_sizes(self.fab.topology), sender=SENDER,
            receiver=RECEIVER, receiver_nic=self.b.nic_address, fault=self.fault, recorder=rec,
            t_fault_ns=self.first_drop_ns or t_fault, t_restore_ns=t_restore, t_end_ns=t_end,
            bytes=ByteCounts(sent=size, placed=rs["placed_bytes"], verified=verified,
                             sha256_sent=sha_sent, sha256_received=sha_got, hash_match=sha_got == sha_sent),
            endpoint=_endpoint_counts(rq, rs), switches=SwitchCounts(),
            events=events, controller=controller_events(self.fab), fault_log=self.fault_log,
            demo_log=self.demo_log, fault_rows=marks.fault_rows, restore_rows=marks.restore_rows,
            mode=self.opts.mode, **({"path_of": self.path_of} if self.path_of else {}),
            rx_sent=rx.ev_rx_sent, endpoint_name=self.opts.endpoint, t_fault_injected_ns=t_fault,
            t_first_drop_ns=self.first_drop_ns, agent_rto_ns=self.opts.agent_settings().rto_ns,
            writer_rto_ns=TIME_UNIT_NS << self._timeout_exp(), writer_max_cwnd=self.opts.writer_window(),
            t_restored_ns=marks.t_restored, flap=self.flap,
            packets_sent=rq["packets"] + rq["probes"], packets_received=rx.state["stats"]["packets"],
            link_packets_lost=link_lost, dead_evs=self.dead_evs, fault_program_drops=self.fault_drops,
            link_denied_at_fault=self.denied_at_fault)

    def _timeout_exp(self) -> int:
        from .worker import timeout_exp

        if self.opts.timeout_exp is not None:
            return self.opts.timeout_exp
        if self.opts.target == "bmv2":
            return BMV2_TIMEOUT_EXP
        # The endpoint's own: native 2^8 = 262 us (the RTO waits at least twice the slowest
        # recent RTT, and a retransmission retires an EV only once a later send was delivered,
        # so a busy machine no longer makes a short timer thrash the EV set), Python 2^16.
        return timeout_exp(self.opts.endpoint, None)

    def _window_args(self) -> list[str]:
        """The writer's window cap (``DemoOptions.writer_window``). On bmv2 it matters most:
        bmv2 reads its ports through libpcap rings, and a window it cannot forward at once is
        lost in them, where no counter, trim or ECN mark sees it, and the controller takes those
        losses for failed links (its RTO is longer too, ``BMV2_TIMEOUT_EXP``)."""
        window = self.opts.writer_window()
        return ["--max-cwnd", str(window)] if window else []

    def _drive(self, tx, rx, sampler, phases: Phases, marks: _Marks) -> None:
        """Until the writer reports, fire the fault and the restore as the bytes come in."""
        deadline = time.monotonic() + WRITE_TIMEOUT_S
        while "done" not in tx.state and "error" not in tx.state:
            tx.check_alive()
            if time.monotonic() > deadline:
                raise MrcError(f"the write did not complete in {WRITE_TIMEOUT_S:.0f} s "
                               f"({rx.state.get('placed', 0)} of {self.size} B placed)")
            self._step(sampler, rx.state.get("placed", 0), phases, marks)
            time.sleep(PHASE_POLL_S)

    def _step(self, sampler, placed: int, phases: Phases, marks: _Marks) -> None:
        size = self._write_size()
        self.obs.progress(min(placed, size), size)
        action = phases.due(placed, time.monotonic_ns())
        rows = self._snapshot(sampler) if action else sampler.last_rows
        if action == "fail":
            self.link_before = self._link_counts()
            marks.fault_rows = rows
            self.denied_at_fault = self._denied()
            down_before = self._links_down()
            marks.t_fault = time.monotonic_ns()
            line = self._fail()
            phases.in_effect(time.monotonic_ns())
            self.fault_log.append((marks.t_fault, line))
            self.dead_evs = self._dead_evs(rows, down_before)
            self.say(f"fault injected at {placed * 100 // size} % of the bytes: "
                     f"{self.fault.describe()} on {self.fault.link}")
        elif action == "restore":
            self._restore(marks, rows)
            self.say(f"fault restored at {placed * 100 // size} % of the bytes")

    def _snapshot(self, sampler) -> list[dict]:
        """The sender's EV set toward the receiver now, read from its dataplane's map (the
        agent's gRPC can lag by seconds when EV events pour in); the sampler's last rows if the
        map cannot be read."""
        try:
            rows = dataplane_rows(self.a, self.b.nic_address)
        except MrcError:
            return sampler.last_rows
        if self.path_of:
            for r in rows:
                r["t1"] = self.path_of(r["ev"])[1]
        return rows or sampler.last_rows

    def _links_down(self) -> list[str]:
        """Links a carrier-down fault holds down now (none in the demo before its fault)."""
        return [f["link"] for f in self.fab.state.faults.values() if f.get("kind") in ("down", "flap") and f.get("link")]

    def _dead_evs(self, rows: list[dict], down: list[str]) -> frozenset[int]:
        """The sender's EVs in use at fault time whose path crosses the failed link: SRv6, the
        EV's own path; EV-hash mode, where the sender T0's group for those links down hashes it
        (``ecmp_paths.group_path``: the demo's link is the receiver T0's uplink, so an EV
        crosses it when the sender's T0 picks that spine)."""
        path = lambda r: (r["plane"], r["t1"])  # noqa: E731 - SRv6 rows carry the EV's path
        if self.opts.mode == "ecmp":
            from .ecmp_paths import group_path

            hashed = group_path(self.fab.compiled, self.fab.compiled.host(SENDER).leaf, self.b.nic_address, down)
            path = lambda r: hashed(r["ev"])  # noqa: E731
        return frozenset(r["ev"] for r in rows if not r.get("retired") and r["state"] in ("GOOD", "SKIP")
                         and path(r) == (self.fault.plane, self.fault.spine))

    def _fault_drops(self) -> int | None:
        """Packets the loss/blackhole program dropped at both ends of the link (None: unread)."""
        from ...fabric import faults
        from ...fabric.faultctl import find_link

        try:
            na, ia, nb, ib = find_link(self.fab.state, *self._link_nodes())
            stats = [faults.read_stats(self.fab.state.nodes[n], i) for n, i in ((na, ia), (nb, ib))]
        except MrcError:
            return None
        return sum(c.dropped_loss + c.dropped_blackhole for c in stats)

    def _first_drop(self) -> int | None:
        """ktime of the fault program's first drop on the failed link (None: no program, e.g.
        flap or bmv2 down, or nothing dropped)."""
        try:
            return self.fab.first_drop_ns(*self._link_nodes())
        except MrcError:
            return None

    def _link_counts(self) -> dict[str, int] | None:
        """The failed link's port counters at both ends (None if a switch did not answer)."""
        try:
            return link_counters(self.fab, self.p4info, *self._link_nodes()) if self.p4info else None
        except MrcError:
            return None

    def _link_lost(self) -> int | None:
        from .loss import link_loss

        before = self.link_before
        if not before:
            return None
        after = self._link_counts()
        return link_loss(before, after) if after else None

    def _link_nodes(self) -> tuple[str, str]:
        return (switch_name(Role.T0, FAILED_PLANE, FAILED_LEAF), switch_name(Role.T1, FAILED_PLANE, FAILED_SPINE))

    def _fail(self) -> str:
        value = {"loss": self.opts.loss_percent, "flap": self.opts.flap_hz}.get(self.opts.fail)
        return self.fab.fail_link(*self._link_nodes(), kind=self.opts.fail, value=value)

    def _restore(self, marks: _Marks, rows: list[dict]) -> None:
        if self.opts.fail in ("loss", "blackhole"):
            self.fault_drops = self._fault_drops()  # before the restore removes the program
        self.first_drop_ns = self._first_drop()  # before the restore removes the program
        marks.restore_rows = rows
        marks.t_restore = time.monotonic_ns()
        self.fault_log.append((marks.t_restore, self.fab.restore(*self._link_nodes())))
        marks.t_restored = time.monotonic_ns()
        if self.opts.fail == "flap":
            self.flap = self.fab.flap_window(*self._link_nodes())

    def _denied(self) -> bool | None:
        """Whether the sender's agent denies the fault's link now (None: unread, or the fault
        names no link)."""
        if not self.fault.link:
            return None
        try:
            return self.fault.link in self.a.stats().denied_links
        except MrcError:
            return None

    def _wait_allowed(self) -> None:
        """Before the write: wait up to ``ALLOW_WAIT_S`` until the sender's agent no longer
        denies the fault's link (an earlier write's spurious timeouts on a busy machine can
        have had the controller deny it; its probes lift the denial), so the fault meets a
        link in use."""
        end = time.monotonic() + ALLOW_WAIT_S
        while self._denied() and time.monotonic() < end:
            time.sleep(0.1)
        if self._denied():
            self.say(f"{self.fault.link} is still denied after {ALLOW_WAIT_S:g} s; the write starts anyway")

    def _wait_lift(self, t_restore: int) -> None:
        """Give the controller a moment to lift its DENY, so the report can show it."""
        end = time.monotonic() + LIFT_WAIT_S
        while time.monotonic() < end:
            events = controller_events(self.fab)
            denied = any(c.what == "DENY" for c in events)
            if not denied or any(c.what == "LIFT" and c.t_ns >= t_restore for c in events):
                return
            time.sleep(0.1)


def _keep_logs(fab, folder: Path) -> None:
    """Copy the fabric's process logs (switches, agents, controller) and the controller's
    status into ``folder`` before teardown removes them."""
    import json
    import shutil

    from ...control.client import read_status
    from ...control.status import saved_status_path

    folder.mkdir(parents=True, exist_ok=True)
    for log in fab.state.dir.glob("*.log"):
        shutil.copy(log, folder / log.name)
    kept = folder / "controller.json"
    try:  # the running controller's own answer, else what it saved last
        kept.write_text(json.dumps(read_status(fab.name), indent=1, sort_keys=True))
    except MrcError:
        if saved_status_path(fab.name).exists():
            shutil.copy(saved_status_path(fab.name), kept)


def pipeline_files(target: str) -> tuple[Path, Path]:
    """The P4Info and device config the controller pushes to either target: p4c's outputs in
    ``p4src/build`` (committed; the eBPF target stores the bmv2 JSON untouched, design
    section 4).

    Raises:
        MrcError: one of them is missing (``make p4`` rebuilds them where p4c is built).
    """
    from ...control.pipeline import DEFAULT_DEVICE_CONFIG, DEFAULT_P4INFO

    for path in (DEFAULT_P4INFO, DEFAULT_DEVICE_CONFIG):
        if not path.exists():
            raise MrcError(f"the {target} target needs p4c's output {path} (run `make p4` where p4c is built)")
    return DEFAULT_P4INFO, DEFAULT_DEVICE_CONFIG


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
