"""The emulated fabric: a whole MRC Clos on one machine, as one Python object.

>>> with Fabric.up(generate_clos(), name="lab") as fab:          # doctest: +SKIP
...     a, b = fab.host("h0-0"), fab.host("h1-0")
...     rx = b.socket(port=4791); tx = a.socket()
...     tx.sendto(payload, (b.nic_address, 4791))
...     fab.fail_link("p0-t0-0", "p0-t1-0", kind="down"); fab.restore("p0-t0-0", "p0-t1-0")

Bring-up (design sections 8 and 9): namespaces with their sysctls, links, the switch
targets (eBPF program + P4Runtime server, or bmv2), the host agents, then the controller
(``mrckit.control``), which programs the switches over P4Runtime and configures the agents.
Everything is recorded in ``/run/mrckit/<name>/fabric.json`` as it is made, so a failure at
any step, Ctrl-C, SIGTERM or the interpreter's exit removes exactly what was made, and a later
``mrc`` process can open the fabric by name (:meth:`Fabric.open`).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import signal
import socket
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from .. import bpf, netns
from ..errors import MrcError
from ..host.config import Settings, mac_text
from ..topology import CompiledFabric, GrpcEndpoint, Topology, compile_fabric, dumps_topology, loads_topology
from ..topology.compile import Mode, Target
from . import build, faultctl, nodes, procs, teardown
from .parallel import Progress, each
from . import restart as restarts
from .restart import CONTROLLER_READY, Restart
from .state import DEFAULT_PREFIX, FabricState, check_name, locked, state_dir

DEFAULT_RTO_NS = 50_000_000
"""Host agents' RTO in an emulated fabric unless the caller gives settings (50 ms; ``mrc
fabric up --rto-us``). The agent's own default (2 ms) suits a NIC; here the endpoint is
Python on a shared, busy machine whose SACKs lag by tens of ms, and a 2 ms RTO retires
healthy EVs (spurious RTO_TIMEOUTs) and feeds the controller false failure evidence."""


BMV2_PROBE_INTERVAL_NS, BMV2_MAX_PROBES_PER_SWEEP = 20_000_000, 4
"""Agent probing on a bmv2 fabric: at most 4 probes per sweep, a sweep every 20 ms. Once the
controller denies a link, every host probes the denied EVs toward every peer; at the agent's
defaults (up to 64 probes every ms) that is tens of thousands of probes per second, which
overflow bmv2's libpcap rings and drop unrelated packets."""


def fabric_settings(rto_ns: int | None = None, target: str = "ebpf") -> Settings:
    """The agent settings a fabric uses: the agent's defaults with the fabric's RTO (``rto_ns``
    in ns; None: :data:`DEFAULT_RTO_NS`), and gentler probing on ``target`` bmv2
    (:data:`BMV2_PROBE_INTERVAL_NS`).

    Raises:
        MrcError: ``rto_ns`` not positive.
    """
    rto_ns = DEFAULT_RTO_NS if rto_ns is None else rto_ns
    if rto_ns <= 0:
        raise MrcError(f"RTO {rto_ns} ns: must be positive")
    if target == "bmv2":
        return Settings(rto_ns=rto_ns, probe_interval_ns=BMV2_PROBE_INTERVAL_NS,
                        max_probes_per_sweep=BMV2_MAX_PROBES_PER_SWEEP)
    return Settings(rto_ns=rto_ns)


@dataclasses.dataclass(frozen=True)
class HostNode:
    """A host of a running fabric, for tests and demos.

    Attributes:
        name: the host's name; ns: its namespace; nic_address: its NIC address (text);
        agent_address: its agent's gRPC address.
    """

    name: str
    ns: str
    nic_address: str
    agent_address: str

    def run(self, cmd: list[str], *, check: bool = True) -> subprocess.CompletedProcess:
        """Run ``cmd`` inside the host's namespace (``nsenter``); MrcError on failure."""
        return netns.run(cmd, ns=self.ns, check=check)

    def popen(self, cmd: list[str], **kwargs) -> subprocess.Popen:
        """Start ``cmd`` inside the host's namespace (``nsenter --net``)."""
        return subprocess.Popen(["nsenter", f"--net={netns.NETNS_DIR}/{self.ns}", "--", *cmd], **kwargs)

    def socket(self, port: int = 0, *, kind: int = socket.SOCK_DGRAM, rcvbuf: int = 8 << 20) -> socket.socket:
        """An IPv6 socket made inside the host's namespace, bound to ``[NIC address]:port``
        (it stays in that namespace). UDP by default, receive buffer ``rcvbuf`` bytes."""
        with netns.enter(self.ns):
            s = socket.socket(socket.AF_INET6, kind)
            try:
                netns.set_receive_buffer(s, rcvbuf)
                s.bind((self.nic_address, port))
            except BaseException:
                s.close()
                raise
        return s

    @contextlib.contextmanager
    def inside(self):
        """Switch the calling thread into the host's namespace for a ``with`` block."""
        with netns.enter(self.ns):
            yield

    def stats(self, *, include_evs: bool = False, peer: str = ""):
        """The agent's ``GetStats`` answer (host_agent.proto ``Stats``)."""
        import grpc

        from ..proto import host_agent_pb2 as pb
        from ..proto import host_agent_pb2_grpc as pbg

        with grpc.insecure_channel(self.agent_address) as channel:
            return pbg.HostAgentStub(channel).GetStats(
                pb.GetStatsRequest(include_evs=include_evs, peer=peer), timeout=10)


class Fabric:
    """A running emulated fabric. Make one with :meth:`up`, or open a running one with
    :meth:`open`; use it as a context manager to tear it down at the end of the block.

    Attributes:
        state: its :class:`~mrckit.fabric.state.FabricState`; topology, compiled: the topology
            and its compiled tables (``mrckit.topology``).
    """

    def __init__(self, state: FabricState, topology: Topology | None = None,
                 compiled: CompiledFabric | None = None):
        self.state = state
        self.topology = topology or loads_topology(state.topology, f"{state.dir}/fabric.json")
        self.compiled: CompiledFabric = compiled or compile_fabric(self.topology, state.target, state.mode)
        self._atexit: Callable[[], None] | None = None

    # --- life cycle ---------------------------------------------------------------------------
    @classmethod
    def up(cls, topology: Topology, *, name: str = "default", target: Target = "ebpf", mode: Mode = "srv6",
           prefix: str = DEFAULT_PREFIX, settings: Settings | None = None,
           p4runtime_port: int | None = None, controller: bool = True,
           controller_args: tuple[str, ...] = (), progress: Progress | None = None) -> "Fabric":
        """Build and start the fabric of ``topology``; returns it running and programmed.

        Args:
            name: fabric name (1..16 of a-z0-9_); namespaces are ``<prefix><name>-<node>``.
            target: ``ebpf`` (default) or ``bmv2``.
            mode: forwarding mode, ``srv6`` (default: uSID source routing, design 3-7) or
                ``ecmp`` (EV-hash mode: the switches hash the EV over ECMP groups;
                no outer header). Recorded in the state; given to the compiler, the
                controller (``--mode``) and every host config.
            prefix: namespace prefix, starting with ``mrc``.
            settings: host agent settings (``mrckit.host.config.Settings``; default
                :func:`fabric_settings`: an RTO of :data:`DEFAULT_RTO_NS`). The controller
                gets the same RTO, for agents it has to configure again.
            p4runtime_port: eBPF target only: serve P4Runtime on 127.0.0.1 ports from this
                one (one per switch, root namespace) instead of unix sockets.
            controller: start ``mrc controller run`` on the fabric (False: leave the switches
                unprogrammed, for tests that run a controller themselves).
            controller_args: extra arguments for ``mrc controller run``.
            progress: ``progress(step, done, total)`` as bring-up advances (steps
                ``namespaces``, ``ports``, ``switches``, ``agents``, ``controller``; from the
                calling thread), for a progress bar.

        Raises:
            MrcError: a bad name, target or mode, bmv2 missing, MTU too large, a port in use, a
                fabric of that name up already, or any start-up failure. Nothing is left
                behind in any of these cases.
        """
        check_name(name)
        if not prefix.startswith("mrc"):
            raise MrcError(f"namespace prefix {prefix!r} must start with 'mrc' (design section 8)")
        nodes.check_target(target)
        nodes.check_mode(mode)
        if target == "bmv2" and p4runtime_port is not None:
            raise MrcError("--p4runtime-port is for the ebpf target; bmv2 serves on a unix socket")
        build.check_mtu(topology.mtu)
        nodes.check_ports(p4runtime_port, len(topology.switches))
        if controller:
            _check_pipeline(controller_args)
        compiled = compile_fabric(topology, target, mode)
        fab = cls(FabricState(name, prefix, target, dumps_topology(topology), mode=mode), topology, compiled)
        folder = state_dir(name)
        try:
            folder.mkdir(parents=True)
        except FileExistsError:
            raise MrcError(f"fabric {name!r} is up already ({folder} exists); "
                           f"use another --name, or `mrc fabric down {name}` first") from None
        fab._guard()
        try:
            with _signals_raise():
                settings = settings or fabric_settings(target=target)
                fab._build(compiled, settings, p4runtime_port, progress)
                if controller:  # ours first: the caller's --agent-setting wins
                    if progress:
                        progress("controller", 0, 1)
                    fab._start_controller(("--agent-setting", f"rto_ns={settings.rto_ns}", *controller_args))
                    if progress:
                        progress("controller", 1, 1)
        except BaseException:
            fab.down()
            raise
        return fab

    def _build(self, compiled: CompiledFabric, settings: Settings, base_port: int | None,
               progress: Progress | None = None) -> None:
        st = self.state
        bpf.ensure_bpffs()
        ns_of = lambda node: f"{st.prefix}{st.name}-{node}"  # noqa: E731
        switches = [s.name for s in compiled.switches()]
        st.nodes = {n: ns_of(n) for n in switches + [h.name for h in compiled.hosts()]}
        st.pins = {n: ns_of(n) for n in switches}
        st.device_ids = {n: 1 for n in switches}
        st.save()
        build.add_namespaces(st.nodes, switches, progress)
        links = list(_links(compiled))
        st.links = [[a, ia, b, ib] for a, ia, _, b, ib, _ in links]
        st.link_names = {faultctl.link_key(sw.name, p.peer): p.link for sw in compiled.switches() for p in sw.ports}
        st.save()
        build.add_links([(st.nodes[a], ia, ma, st.nodes[b], ib, mb) for a, ia, ma, b, ib, mb in links],
                        compiled.topology.mtu)
        ports: dict[str, list[str]] = {n: [] for n in st.nodes}
        for a, ia, b, ib in st.links:
            ports[a].append(ia)
            ports[b].append(ib)
        each("ports", lambda node: build.prepare_ports(st.nodes[node], ports[node], _neighbours(compiled, node)),
             st.nodes, progress)
        if st.target == "ebpf":
            nodes.start_ebpf_switches(st, compiled, base_port, progress)
        else:
            nodes.start_bmv2_switches(st, compiled)
        nodes.start_agents(st, compiled, settings, progress)
        self._write_topology()
        st.save()

    def _write_topology(self) -> Path:
        """The topology with every switch's P4Runtime address and every host's agent address
        filled in: what ``mrc controller run`` (or any controller) is given."""
        st = self.state
        topo = dataclasses.replace(
            self.topology,
            switches=tuple(dataclasses.replace(s, p4runtime=GrpcEndpoint(st.switches[s.name].address,
                                                                          st.device_ids[s.name]))
                           for s in self.topology.switches),
            hosts=tuple(dataclasses.replace(h, agent=GrpcEndpoint(st.hosts[h.name].address))
                        for h in self.topology.hosts))
        path = st.dir / "topology.yaml"
        path.write_text(dumps_topology(topo))
        return path

    @property
    def topology_path(self) -> Path:
        """``/run/mrckit/<name>/topology.yaml``: the topology with the fabric's addresses."""
        return self.state.dir / "topology.yaml"

    def _start_controller(self, extra: tuple[str, ...]) -> None:
        st = self.state
        argv = procs.mrc_argv("controller", "run", str(self.topology_path), "--name", st.name,
                              "--target", st.target, *self._mode_args(), *extra)
        proc, info = procs.start(argv, st.dir / "controller.log", ns=None, address="")
        st.controller = dataclasses.asdict(info)
        st.save()
        procs.wait_ready({"controller": (proc, info)}, CONTROLLER_READY)

    def program_once(self, *controller_args: str) -> str:
        """Run ``mrc controller run TOPO --once`` (program every switch, configure every host,
        exit) for a fabric started with ``controller=False``. Returns its output.

        Raises:
            MrcError: the controller failed (with its output).
        """
        argv = procs.mrc_argv("controller", "run", str(self.topology_path), "--name", self.name,
                              "--target", self.state.target, *self._mode_args(), "--once", *controller_args)
        out = subprocess.run(argv, capture_output=True, text=True, env=procs.child_env())
        if out.returncode != 0:
            raise MrcError(f"mrc controller run --once failed: {(out.stderr or out.stdout).strip()}")
        return out.stdout

    def _mode_args(self) -> tuple[str, ...]:
        # srv6 is the controller's default: its command line stays as it always was.
        return ("--mode", self.state.mode) if self.state.mode != "srv6" else ()

    @property
    def mode(self) -> str:
        """The fabric's forwarding mode: ``srv6`` or ``ecmp``."""
        return self.state.mode

    @classmethod
    def open(cls, name: str) -> "Fabric":
        """The running fabric ``name`` (from its state file). Raises MrcError if none."""
        return cls(FabricState.load(name))

    def down(self) -> None:
        """Tear everything down (idempotent; also run at interpreter exit for an owner)."""
        teardown.teardown(self.state)
        self.detach()

    def detach(self) -> None:
        """Leave the fabric running when this process exits (``mrc fabric up`` does this)."""
        if self._atexit is not None:
            atexit.unregister(self._atexit)
            self._atexit = None
            _OWNED.discard(self.name)
            if not _OWNED:
                _sigterm_exits(False)

    def _guard(self) -> None:
        # Torn down at interpreter exit; SIGTERM becomes SystemExit so that the exit (and any
        # ``with`` block) runs instead of the process dying on the spot.
        self._atexit = self.down
        atexit.register(self.down)
        _OWNED.add(self.name)
        _sigterm_exits(True)

    def __enter__(self) -> "Fabric":
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    # --- nodes ----------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.state.name

    def ns(self, node: str) -> str:
        """The namespace of ``node``. Raises MrcError for an unknown node."""
        try:
            return self.state.nodes[node]
        except KeyError:
            raise MrcError(f"fabric {self.name} has no node {node!r} "
                           f"(nodes: {', '.join(sorted(self.state.nodes))})") from None

    def hosts(self) -> list[str]:
        """Host names, in topology order."""
        return [h.name for h in self.topology.hosts]

    def switches(self) -> list[str]:
        """Switch names, in topology order."""
        return [s.name for s in self.topology.switches]

    def host(self, name: str) -> HostNode:
        """A :class:`HostNode` handle. Raises MrcError for an unknown host."""
        if name not in self.state.hosts:
            raise MrcError(f"fabric {self.name} has no host {name!r} (hosts: {', '.join(self.hosts())})")
        return HostNode(name, self.ns(name), str(self.compiled.host(name).nic_address),
                        self.state.hosts[name].address)

    def switch_address(self, name: str) -> str:
        """The P4Runtime address of switch ``name``."""
        if name not in self.state.switches:
            raise MrcError(f"fabric {self.name} has no switch {name!r}")
        return self.state.switches[name].address

    def switch_counters(self, name: str, counter: str = "rx_port") -> dict[int, tuple[int, int]]:
        """eBPF target: ``{port: (packets, bytes)}`` of counter ``counter`` of switch ``name``,
        read from its pinned maps."""
        from ..switch.ebpf_target import SwitchTables

        if self.state.target != "ebpf":
            raise MrcError("switch_counters reads eBPF pins; on bmv2 read counters over P4Runtime")
        tables = SwitchTables.open_pinned(self.state.pins[name])
        try:
            return {p.number: tables.counters.read(counter, p.number) for p in self.compiled.switch(name).ports}
        finally:
            tables.close()

    # --- faults ---------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _fresh_state(self):
        # Another process (`mrc fail`, `mrc restore`) may have changed the state file.
        with locked(self.name):
            self.state = FabricState.load(self.name)
            yield self.state

    def fail_link(self, a: str, b: str, kind: str = "down", value: float | None = None) -> str:
        """Break link a–b: ``kind`` is ``down``, ``flap`` (``value`` Hz), ``loss``
        (``value`` percent) or ``blackhole``. Returns the fault-log line.
        Raises MrcError/ValueError: see :func:`mrckit.fabric.faultctl.fail_link`."""
        with self._fresh_state() as st:
            return faultctl.fail_link(st, a, b, kind, value)

    def first_drop_ns(self, a: str, b: str) -> int | None:
        """ktime (ns) of the first packet the fault on link a–b dropped, None if none; see
        :func:`mrckit.fabric.faultctl.first_drop_ns`."""
        with self._fresh_state() as st:
            return faultctl.first_drop_ns(st, a, b)

    def flap_window(self, a: str, b: str):
        """What the last flap of link a–b did, once restored; see
        :func:`mrckit.fabric.faultctl.flap_window`."""
        return faultctl.flap_window(self.state, a, b)

    def fail_switch(self, name: str) -> str:
        """Detach switch ``name``'s dataplane. Returns the fault-log line."""
        with self._fresh_state() as st:
            return faultctl.fail_switch(st, self.compiled, name)

    def restore(self, a: str, b: str | None = None) -> str:
        """Undo the fault on link a–b, or on switch ``a`` when ``b`` is None."""
        with self._fresh_state() as st:
            if b is None:
                return faultctl.restore_switch(st, self.compiled, a)
            return faultctl.restore_link(st, a, b)

    def restore_all(self) -> list[str]:
        """Undo every fault; returns the fault-log lines."""
        with self._fresh_state() as st:
            return faultctl.restore_all(st, self.compiled)

    def restart(self, which: str, *, kill: bool = False, down_s: float = 0.0,
                while_down: Callable[[], object] | None = None) -> Restart:
        """Stop the fabric's process ``which`` (``controller``, ``switches`` or a host name;
        :func:`mrckit.fabric.restart.processes`), SIGKILL with ``kill`` else SIGTERM, run
        ``while_down()``, and start it again after ``down_s`` s; returns when it serves. Other
        faults may be applied meanwhile: the state is locked only to read and record it.

        Raises:
            MrcError: no such process, or it did not serve again (with its log).
        """
        with self._fresh_state() as st:
            info, marker = restarts.locate(st, which)

        def started(new) -> None:
            with self._fresh_state() as st:
                restarts.record(st, which, new)

        return restarts.restart_process(info, which, marker, kill=kill, down_s=down_s, while_down=while_down,
                                        started=started)

    def fault_log(self) -> list[str]:
        """Timestamped fault and restore lines, oldest first."""
        return self.state.fault_log()

    def status(self) -> dict:
        """Namespaces, processes (alive or not), links (up or down per end) and faults."""
        with self._fresh_state() as st:
            return faultctl.status(st)


def _check_pipeline(controller_args: tuple[str, ...]) -> None:
    """Load the P4Info and device config the controller will load, before anything is built,
    so a missing p4c output is an error in a second, not after the whole bring-up."""
    from ..control import load_pipeline

    args = list(controller_args)

    def value(flag: str) -> str | None:
        return args[args.index(flag) + 1] if flag in args[:-1] else None

    load_pipeline(value("--p4info"), value("--device-config"))


def _links(compiled: CompiledFabric):
    """``(node_a, if_a, mac_a, node_b, if_b, mac_b)`` per link, each link once, MACs as text."""
    seen = set()
    for sw in compiled.switches():
        for p in sw.ports:
            key = frozenset([(sw.name, p.ifname), (p.peer, p.peer_ifname)])
            if key not in seen:
                seen.add(key)
                yield sw.name, p.ifname, mac_text(p.mac), p.peer, p.peer_ifname, mac_text(p.peer_mac)


def _neighbours(compiled: CompiledFabric, node: str) -> list[tuple[str, str]]:
    """A host's static neighbours: its T0 on every plane, ``(ifname, mac)``."""
    try:
        host = compiled.host(node)
    except (KeyError, ValueError, MrcError):
        return []
    return [(p.ifname, mac_text(p.t0_mac)) for p in host.ports]


_OWNED: set[str] = set()
"""Names of the fabrics this process owns (tears down at exit)."""
_SIGTERM_SET = False


def _sigterm_exits(on: bool) -> None:
    """While this process owns a fabric, SIGTERM raises SystemExit(143) (main thread only,
    and only in place of the default action: a handler someone else set is left alone)."""
    global _SIGTERM_SET
    if threading.current_thread() is not threading.main_thread():
        return
    if on and not _SIGTERM_SET and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_143)
        _SIGTERM_SET = True
    elif not on and _SIGTERM_SET:
        if signal.getsignal(signal.SIGTERM) == _exit_143:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _SIGTERM_SET = False


def _exit_143(signum, frame):
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def _signals_raise():
    """During bring-up, SIGTERM behaves like Ctrl-C, so the caller's cleanup runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    old = {sig: signal.signal(sig, raise_interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def wait_for_signal(ready=None) -> None:
    """Block until SIGINT or SIGTERM (``mrc fabric up --foreground``); ``ready()`` is called
    once the handlers are in place, so a signal sent after it is never missed."""
    stop = threading.Event()
    old = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        if ready is not None:
            ready()
        while not stop.wait(1.0):
            pass
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


__all__ = ["Fabric", "HostNode", "wait_for_signal"]
