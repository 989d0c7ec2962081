"""The controller runtime: program every switch, configure every host agent, react to failures
(design section 7). One asyncio loop drives all switches and hosts concurrently.

Per switch, forever: connect and arbitrate, reconcile (pipeline by cookie, then only the entry
difference), hold the stream; when it ends (server restarted, connection lost), back off and
do it again. Per host: configure the agent unless it already has a config (a restarted
controller must not reset running hosts), push the current denials, then stream its EV events
into the :class:`~mrckit.control.reactor.FailureReactor`. A reaction loop polls the hosts' EV
counters during a failure episode (good-path evidence), and carries out DENY and lift actions
on every host; it sleeps while the reactor holds no evidence, until an input wakes it. The
northbound (``northbound.py``, gRPC) takes link reports and answers ``mrc controller status``
and timeline watchers; the state is also saved (``status.py``) for a restarted successor.

In EV-hash mode (``mode="ecmp"``) the switches also get ``ecmp_selector`` members and
groups and ``ipv6_fib`` routes, and the reaction differs: host evidence cannot name a path, so
nothing is denied; link reports (``ReportLink``, :meth:`Controller.link_report`) make the
:class:`~mrckit.control.reroute.Rerouter` rewrite the groups of the affected switches. In SRv6
mode a link report is DENIED on every host at once (lifted when reported up), without waiting
for host evidence: both modes act on the same information.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MrcError
from ..topology import Topology, compile_fabric
from ..topology.compile import Mode, Target
from .diff import EcmpTables, diff_ecmp
from .hosts import HostSession, open_host
from .localise import Localisation
from .p4rt import CONNECT_TIMEOUT_S, SwitchSession, WriteCounts, check_ecmp_pipeline, default_election_id, open_session
from .pipeline import Pipeline
from .reactor import GOOD, LIFT_SUCCESSES, SETTLE_NS, Action, FailureReactor
from . import northbound
from .client import RUN_DIR, controller_address
from .reports import LinkReport
from .reroute import Reroute, Rerouter
from .status import load_saved_status, saved_status_path, write_status
from .targets import HostTarget, SwitchTarget
from .timeline import Mark

log = logging.getLogger(__name__)

TICK_S = 0.01
"""Reaction loop period while the reactor holds evidence (its decisions then depend on time)."""
POLL_INTERVAL_S = 0.04
"""EV-counter polling period during a failure episode (good-path evidence)."""
STATUS_MIN_GAP_S = 0.1
"""The saved status is rewritten on a change, at most this often."""
RETRY_MAX_S = 5.0


@dataclass
class SwitchState:
    """What the controller knows of one switch (shown by ``mrc controller status``)."""

    target: SwitchTarget
    connected: bool = False
    reconciles: int = 0
    last: WriteCounts | None = None
    total: WriteCounts = field(default_factory=WriteCounts)
    error: str = ""
    session: SwitchSession | None = None      # while connected
    installed: EcmpTables | None = None       # EV-hash tables as last written (None: unknown)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one writer at a time

    def as_dict(self) -> dict:
        """Plain data for the status."""
        return {"address": self.target.address, "device_id": self.target.device_id, "connected": self.connected,
                "reconciles": self.reconciles, "last": self.last.as_dict() if self.last else None,
                "total": self.total.as_dict(), "error": self.error}


@dataclass
class HostState:
    """What the controller knows of one host agent."""

    target: HostTarget
    session: HostSession | None = None
    configured: bool = False
    configured_by_us: bool = False
    watching: bool = False
    denied: set[str] = field(default_factory=set)  # links denied on this host by us
    events: int = 0
    error: str = ""

    def as_dict(self) -> dict:
        """Plain data for the status."""
        return {"address": self.target.address, "configured": self.configured,
                "configured_by_us": self.configured_by_us, "watching": self.watching,
                "denied": sorted(self.denied), "events": self.events, "error": self.error}


def _minus(a: WriteCounts, b: WriteCounts) -> WriteCounts:
    """The writes counted in ``a`` since the snapshot ``b`` of the same session's counts."""
    return WriteCounts(entries_read=a.entries_read - b.entries_read, inserted=a.inserted - b.inserted,
                       modified=a.modified - b.modified, deleted=a.deleted - b.deleted,
                       write_requests=a.write_requests - b.write_requests)


def _add(total: WriteCounts, c: WriteCounts) -> None:
    total.pipeline_pushed |= c.pipeline_pushed
    for name in ("entries_read", "inserted", "modified", "deleted", "write_requests"):
        setattr(total, name, getattr(total, name) + getattr(c, name))


def _open(hs: HostState) -> HostSession:
    """The agent's session, opened on first use (it reconnects by itself)."""
    if hs.session is None:
        hs.session = open_host(hs.target)
    return hs.session


class Controller:
    """Programs ``switches`` and configures ``hosts`` of ``topology``; reacts to failures.

    Args:
        topology: the fabric (entries and host configs are compiled from it for ``target``).
        switches, hosts: where each node's server is (``targets.py``); a target must name a
            node of the topology.
        pipeline: the P4 program to push (``pipeline.py``).
        target: ``"ebpf"`` or ``"bmv2"`` (only the compiler's port-range check differs).
        mode: ``"srv6"`` (uSID source routing; hosts are DENIED failed links) or ``"ecmp"``
            (EV-hash mode: groups are rewritten on link reports).
        name: the controller's name: its northbound socket is ``<run_dir>/<name>.sock`` and
            its saved status ``<run_dir>/<name>.state.json`` unless ``listen`` says otherwise.
        run_dir: where the socket and saved status go; None = save no status and, unless
            ``listen`` is given, serve no northbound (one-shot use).
        listen: the northbound address (``unix:/path``, or ``127.0.0.1:PORT`` on loopback;
            port 0 picks one); None = ``unix:<run_dir>/<name>.sock``. Served by :meth:`run`.
        election_id: ours (default: the wall clock in ms, so a restart wins).
        settle_ns, lift_successes: failure-reaction tuning (``reactor.py``).
        connect_timeout_s: how long to wait for a switch to answer arbitration.
        reconfigure_hosts: Configure every agent once even if it has a config already (by
            default a configured agent is left alone: Configure resets its dataplane).
        topology_file: the YAML ``topology`` came from, if any (shown in the status).

    Raises:
        MrcError: a target naming no node of the topology, a topology that does not compile,
            an unknown mode or, in EV-hash mode, a pipeline without its tables, another live
            controller answering at the northbound address, or an unreadable saved status.
    """

    def __init__(self, topology: Topology, switches: list[SwitchTarget], hosts: list[HostTarget],
                 pipeline: Pipeline, *, target: Target = "ebpf", mode: Mode = "srv6", name: str = "default",
                 run_dir: Path | str | None = RUN_DIR, listen: str | None = None,
                 election_id: int | None = None,
                 settle_ns: int = SETTLE_NS, lift_successes: int = LIFT_SUCCESSES,
                 connect_timeout_s: float = CONNECT_TIMEOUT_S, reconfigure_hosts: bool = False,
                 topology_file: str | None = None):
        self.topology, self.pipeline, self.name, self.mode = topology, pipeline, name, mode
        self.topology_file = topology_file
        self.compiled = compile_fabric(topology, target, mode)
        if mode == "ecmp":
            check_ecmp_pipeline(pipeline)
        for t in switches:
            topology.switch(t.name)  # raises TopologyError (an MrcError) naming it
        for h in hosts:
            topology.host(h.name)
        self.switches = {t.name: SwitchState(t) for t in switches}
        self.hosts = {t.name: HostState(t) for t in hosts}
        self.election_id = default_election_id() if election_id is None else election_id
        self.connect_timeout_s = connect_timeout_s
        self.reconfigure_hosts = reconfigure_hosts
        self.reactor = FailureReactor(topology, settle_ns=settle_ns, ambiguous_wait_ns=3 * settle_ns,
                                      lift_successes=lift_successes, arrival_polls=True)
        self.status_file = saved_status_path(name, run_dir) if run_dir is not None else None
        self.address = listen or (controller_address(name, run_dir) if run_dir is not None else None)
        if self.address is not None:
            northbound.check_not_running(self.address, name)  # two would fight over primary
        self.rerouter = Rerouter(self.compiled, self.reactor.timeline) if mode == "ecmp" else None
        self.reported_down: dict[str, int] = {}  # link -> when reported down (ns)
        self.feed = northbound.Feed()
        self._take_over(load_saved_status(self.status_file) if self.status_file is not None else None)
        self.reactor.timeline.listeners.append(self.feed.mark)
        self._reports: asyncio.Queue = asyncio.Queue()
        self.started_ns = time.time_ns()
        self.ready = asyncio.Event()  # every switch reconciled once and every host configured once
        self._wake = asyncio.Event()
        self._acked: dict[str, dict[tuple[str, int], tuple[int, int]]] = {}
        self._arrivals: dict[str, tuple[int, dict[tuple[int, int, int, int], int]]] = {}
        self._last_poll = 0
        self._dirty = True

    @property
    def _dirty(self) -> bool:
        """Whether the saved status is out of date; setting it wakes the reaction loop, which
        saves it (at most every STATUS_MIN_GAP_S)."""
        return self._status_dirty

    @_dirty.setter
    def _dirty(self, value: bool) -> None:
        self._status_dirty = value
        if value:
            self._wake.set()

    # --- one-shot API (the fabric emulator, tests) ----------------------------------------
    async def program_switch(self, name: str) -> WriteCounts:
        """Connect to switch ``name``, reconcile it once, disconnect. Returns what was written.

        Raises:
            MrcError: unreachable, not primary, or the switch refused a write.
        """
        st = self.switches[name]
        session = await open_session(st.target, self.pipeline, self.election_id, self.connect_timeout_s)
        self.election_id = max(self.election_id, session.election_id)  # raised above election_id_past
        try:
            await self._reconcile(st, session)
        finally:
            await session.close()
        self._record(st, session.counts)
        return session.counts

    async def _reconcile(self, st: SwitchState, session) -> None:
        """Reconcile one switch (table entries; in EV-hash mode members, groups and routes)."""
        async with st.lock:
            name = st.target.name
            ecmp = self.rerouter.desired(name) if self.rerouter is not None else None
            await session.reconcile(self.compiled.entries(name), ecmp)
            st.installed = ecmp

    async def program_switches(self) -> dict[str, WriteCounts]:
        """:meth:`program_switch` on every switch concurrently.

        Raises:
            MrcError: naming every switch that failed (the others are programmed).
        """
        names = list(self.switches)
        results = await asyncio.gather(*(self.program_switch(n) for n in names), return_exceptions=True)
        errors = [f"{r}" for r in results if isinstance(r, BaseException)]
        if errors:
            raise MrcError("; ".join(errors))
        return {n: r for n, r in zip(names, results) if not isinstance(r, BaseException)}

    async def configure_hosts(self, force: bool = False) -> dict[str, bool]:
        """Configure every host agent that has no config yet (all of them with ``force``).
        Returns host -> whether it was configured now.

        Raises:
            MrcError: naming every agent that failed.
        """
        names = list(self.hosts)
        results = await asyncio.gather(*(self._configure(self.hosts[n], force) for n in names),
                                       return_exceptions=True)
        errors = [f"{r}" for r in results if isinstance(r, BaseException)]
        if errors:
            raise MrcError("; ".join(errors))
        return {n: r for n, r in zip(names, results) if not isinstance(r, BaseException)}

    async def close(self) -> None:
        """Close the host agents' channels (after the one-shot calls; :meth:`run` does it)."""
        for hs in self.hosts.values():
            if hs.session is not None:
                await hs.session.close()
                hs.session = None

    def note_link_down(self, link: str, time_ns: int | None = None) -> None:
        """Put a fault injector's "link down" on the timeline (it does not drive localisation)."""
        self.reactor.note_link_down(link, time.time_ns() if time_ns is None else time_ns)
        self._dirty = True

    # --- the long-running controller --------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Run until ``stop`` is set: keep switches reconciled, hosts configured and watched,
        and react to failures. Never raises for a node's trouble (it is retried and shown in
        the status); cancels cleanly."""
        tasks = [asyncio.create_task(self._switch_loop(st), name=f"switch-{n}") for n, st in self.switches.items()]
        tasks += [asyncio.create_task(self._host_loop(hs), name=f"host-{n}") for n, hs in self.hosts.items()]
        tasks.append(asyncio.create_task(self._react_loop(), name="react"))
        tasks.append(asyncio.create_task(self._reports_loop(), name="link-reports"))
        tasks.append(asyncio.create_task(self._ready_watch(), name="ready"))
        server = None
        try:
            if self.address is not None:
                server, self.address = await northbound.serve(self, self.address)
            await stop.wait()
        finally:
            if server is not None and self.address is not None:
                await northbound.stop(server, self.address, self.feed)
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.close()
            self.save_status(stopped=True)

    async def _ready_watch(self) -> None:
        while not (all(s.reconciles for s in self.switches.values())
                   and all(h.configured for h in self.hosts.values())):
            await asyncio.sleep(TICK_S)
        self.ready.set()
        self.save_status()  # before anyone waiting on ``ready`` runs: the saved status says ready too
        log.info("all %d switches programmed and %d hosts configured", len(self.switches), len(self.hosts))

    async def _switch_loop(self, st: SwitchState) -> None:
        delay = 0.2
        while True:
            session = None
            try:
                session = await open_session(st.target, self.pipeline, self.election_id, self.connect_timeout_s)
                self.election_id = max(self.election_id, session.election_id)  # raised above election_id_past
                st.connected, st.error = True, ""
                await self._reconcile(st, session)
                st.session = session
                self._record(st, session.counts)
                delay = 0.2
                await session.lost.wait()
                st.error = "P4Runtime stream ended; reconnecting"
            except MrcError as exc:
                st.error = str(exc)
                log.warning("%s", exc)
            finally:
                st.connected, st.session, st.installed = False, None, None
                self._dirty = True
                if session is not None:
                    await session.close()
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)

    def _record(self, st: SwitchState, counts: WriteCounts) -> None:
        st.reconciles += 1
        st.last = dataclasses.replace(counts)  # later reroute writes count on the session, not here
        _add(st.total, counts)
        self._dirty = True

    async def _configure(self, hs: HostState, force: bool = False) -> bool:
        session = _open(hs)
        if not force and await session.is_configured():
            hs.configured = True
            return False
        await session.configure(self.compiled.host(hs.target.name))
        hs.configured = hs.configured_by_us = True
        hs.denied.clear()
        self._dirty = True
        return True

    async def _host_loop(self, hs: HostState) -> None:
        delay, replay = 0.2, True
        while True:
            try:
                await self._configure(hs, force=self.reconfigure_hosts and not hs.configured_by_us)
                await self._sync_denials(hs)
                hs.watching, hs.error = True, ""
                self._dirty = True
                async for ev in _open(hs).events(replay=replay):
                    replay = False
                    self._host_event(hs, ev)
                raise MrcError(f"host {hs.target.name}: event stream ended")
            except MrcError as exc:
                hs.error, hs.watching, hs.configured = str(exc), False, False
                hs.denied.clear()  # the agent may have restarted: give it every denial again
                self._dirty = True
                log.warning("%s", exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)

    def _host_event(self, hs: HostState, ev) -> None:
        hs.events += 1
        if ev.wall_time_ns and ev.wall_time_ns < self.started_ns:
            # History from before we started: only the denials matter (the agent keeps them).
            if ev.reason in ("LINK_DENIED", "LINK_ALLOWED") and ev.link:
                (hs.denied.add if ev.reason == "LINK_DENIED" else hs.denied.discard)(ev.link)
                self.reactor.adopt_denial(ev.link, ev.reason == "LINK_DENIED", ev.wall_time_ns)
            return
        self.feed.ev_event(hs.target.name, ev)
        if self.rerouter is not None:  # EV-hash mode: EVs name no path, nothing to localise
            self.rerouter.host_event(hs.target.name, ev, time.time_ns())
            self._dirty = True
            return
        self.reactor.event(hs.target.name, ev, time.time_ns())
        self._wake.set()

    async def _sync_denials(self, hs: HostState) -> None:
        """Give ``hs`` every denial in force that it lacks (a reconnected or new agent)."""
        for link in sorted(set(self.reactor.denied) - hs.denied):
            await _open(hs).set_link_denied(link, True)
            hs.denied.add(link)

    # --- link reports (EV-hash mode reroutes on them) ---------------------------------------
    async def link_report(self, link: str, up: bool, time_ns: int | None = None,
                          source: str = "") -> dict[str, int]:
        """``link`` (design 3.3 name) went down (``up`` False) or came back. In EV-hash mode
        the groups and routes of every affected switch are rewritten at once (``reroute.py``);
        in SRv6 mode the link is DENIED on every host at the reactor's next decision (and
        lifted on ``up``), as after a localisation (``reactor.py``).
        Returns switch -> updates written.

        Raises:
            TopologyError: the fabric has no such link (ValueError: a malformed name).
        """
        now = time.time_ns() if not time_ns else time_ns
        self._dirty = True
        self.check_link(link)
        if up:
            self.reported_down.pop(link, None)
        else:
            self.reported_down.setdefault(link, now)
        if self.rerouter is None:
            self.compiled.down_links([link])  # raises for a link the fabric lacks
            self.reactor.timeline.add("link_up" if up else "link_down", now, (link,), source or "reported")
            self.reactor.report(link, up, source or "reported")  # DENY (or lift) on every host
            self._wake.set()
            return {}
        change = self.rerouter.report(link, up, now, source)
        if change is None:
            return {}
        return await self._carry_out_reroute(change)

    async def _carry_out_reroute(self, change: Reroute) -> dict[str, int]:
        rerouter = self.rerouter
        if rerouter is None:
            raise MrcError("a reroute outside EV-hash mode")

        async def one(name: str) -> int:
            st = self.switches[name]
            async with st.lock:
                if st.session is None or st.installed is None:
                    raise MrcError(f"switch {name} is not connected")
                desired = rerouter.desired(name)
                diff = diff_ecmp(desired, st.installed)
                counts = st.session.counts
                before = dataclasses.replace(counts)
                try:
                    await st.session.write_ecmp(diff)
                except MrcError:
                    st.installed = None  # unknown now: the reconnect reconciles it
                    raise
                finally:
                    _add(st.total, _minus(counts, before))
                st.installed = desired
                return counts.writes - before.writes

        names = [n for n in change.switches if n in self.switches]
        results = await asyncio.gather(*(one(n) for n in names), return_exceptions=True)
        written = {n: r for n, r in zip(names, results) if not isinstance(r, BaseException)}
        failed = {n: str(r) for n, r in zip(names, results) if isinstance(r, BaseException)}
        for name, why in failed.items():
            log.warning("reroute %s on %s: %s", change.link, name, why)
            st = self.switches[name]
            if st.session is not None:
                st.session.lost.set()  # reconnect and reconcile from a Read
        rerouter.done(change, time.time_ns(), written, failed)
        self._dirty = True
        log.info("%s %s: %s", "restored" if change.up else "rerouted around", change.link,
                 self.reactor.timeline.marks[-1].detail)
        return written

    def check_link(self, link: str) -> None:
        """Refuse a link name this fabric lacks.

        Raises:
            TopologyError: the fabric has no such link (ValueError: a malformed name).
        """
        self.compiled.down_links([link])

    async def submit_report(self, report: LinkReport) -> dict[str, int]:
        """Queue ``report`` for :meth:`link_report` and wait for it: reports are carried out
        one at a time, in the order they arrive (a down and the up after it must not cross).
        Returns switch -> updates written; a report that fails is logged and returns {}."""
        done: asyncio.Future = asyncio.get_running_loop().create_future()
        self._reports.put_nowait((report, done))
        return await done

    async def _reports_loop(self) -> None:
        while True:
            report, done = await self._reports.get()
            try:
                written = await self.link_report(report.link, report.up, report.time_ns, report.source)
            except (MrcError, ValueError) as exc:
                log.warning("link report %s: %s", report.link, exc)
                written = {}
            if not done.done():  # the caller may have given up (RPC cancelled)
                done.set_result(written)

    def _take_over(self, saved: dict | None) -> None:
        """A restarted controller (a saved status of a predecessor under the same name) keeps
        its timeline and the links reported down, before it programs anything; its denials
        are taken over from the agents themselves (``_host_event``)."""
        if saved is None:
            return
        try:
            for m in saved.get("timeline", []):
                self.reactor.timeline.add(m["kind"], m["time_ns"], tuple(m["links"]), m["detail"])
            down = {str(k): int(v) for k, v in saved.get("reported_down", {}).items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            log.warning("not taking over from %s: %s", self.status_file, exc)
            return
        for link, t in down.items():
            try:
                self.check_link(link)
            except (MrcError, ValueError) as exc:
                log.warning("ignoring a report of link %s: %s", link, exc)
                continue
            self.reported_down[link] = t
        if self.rerouter is not None:
            self.rerouter.adopt(dict(self.reported_down))
            return
        for link in self.reported_down:  # SRv6: still down, so still denied (and not lifted by probes)
            self.reactor.report(link, False, "report adopted on restart")

    # --- reaction -----------------------------------------------------------------------------
    async def _react_loop(self) -> None:
        last_status = -STATUS_MIN_GAP_S
        while True:
            # asyncio.timeout, not wait_for: wait_for of 3.11 can swallow a cancellation that
            # arrives as the event is set, and the loop would outlive run().
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._react_timeout(last_status)):
                    await self._wake.wait()
            self._wake.clear()
            now = time.time_ns()
            if self.reactor.episode_start is not None and now - self._last_poll >= POLL_INTERVAL_S * 1e9:
                await self._poll_good()
            for action in self.reactor.decide(time.time_ns()):
                await self._carry_out(action)
            if self._dirty and time.monotonic() - last_status >= STATUS_MIN_GAP_S:
                self.save_status()
                last_status = time.monotonic()

    def _react_timeout(self, last_status: float) -> float | None:
        """Seconds the reaction loop may sleep unless woken: a tick while the reactor holds
        evidence (its decisions then depend on time: settling, evidence expiry, polls), until
        the saved status is due after a change, else no limit (None): every input wakes the
        loop (host events, link reports, state changes), so an idle controller sleeps."""
        if not self.reactor.quiet():
            return TICK_S
        if self._dirty:
            return max(STATUS_MIN_GAP_S - (time.monotonic() - last_status), TICK_S)
        return None

    async def _poll_good(self) -> None:
        """Poll every host's EV table and arrivals: an EV still GOOD whose acks grew since the
        last poll is a working path, and so is a path whose arrivals at its receiver grew
        (good evidence for the reactor)."""
        self._last_poll = time.time_ns()
        live = [hs for hs in self.hosts.values() if hs.watching and hs.session is not None]
        replies = await asyncio.gather(*(_open(hs).stats(include_evs=True) for hs in live), return_exceptions=True)
        now = time.time_ns()
        for hs, reply in zip(live, replies):
            if isinstance(reply, BaseException):
                continue
            before = self._acked.get(hs.target.name, {})
            after = {}
            for peer in reply.peers:
                for e in peer.evs:
                    after[(peer.peer, e.ev)] = (e.acked, now)
                    prev = before.get((peer.peer, e.ev))
                    if prev is not None and e.state == GOOD and e.acked > prev[0]:
                        self.reactor.good(hs.target.name, peer.peer, e.ev, prev[1], now)
            self._acked[hs.target.name] = after
            self._poll_arrivals(hs.target.name, reply.rx_paths, now)

    def _poll_arrivals(self, host: str, rx_paths, now: int) -> None:
        """Tell the reactor that ``host``'s arrivals were polled over the window since its last
        poll, and which of its counts (``RxPath`` rows) grew in it. A count that fell (its key
        was evicted and came back) only resets the base."""
        since, before = self._arrivals.get(host, (None, {}))
        after = {}
        for row in rx_paths:
            key = (row.plane, row.t1, row.src_leaf, row.src_downlink)
            after[key] = row.packets
            prev = before.get(key)
            if since is not None and prev is not None and row.packets > prev:
                self.reactor.arrived(host, row, since, now)
        if since is not None:
            self.reactor.polled(host, since)
        self._arrivals[host] = (now, after)

    async def _carry_out(self, action: Action) -> None:
        deny = action.kind == "deny"
        live = [hs for hs in self.hosts.values() if hs.session is not None and hs.configured]

        async def apply(hs: HostState) -> None:
            for link in action.links:
                await _open(hs).set_link_denied(link, deny)
                (hs.denied.add if deny else hs.denied.discard)(link)

        results = await asyncio.gather(*(apply(hs) for hs in live), return_exceptions=True)
        failed = [f"{hs.target.name}: {r}" for hs, r in zip(live, results) if isinstance(r, BaseException)]
        self._dirty = True
        if failed or not live:
            log.warning("%s %s: not done on every host: %s", action.kind, ",".join(action.links),
                        "; ".join(failed) or "no host reachable")
            self.reactor.failed(action)
            await asyncio.sleep(TICK_S)  # it is decided again: retry at the tick, not in a spin
            return
        self.reactor.done(action, time.time_ns(), len(live))
        log.info("%s %s on all %d hosts%s", "DENIED" if deny else "lifted", ", ".join(action.links), len(live),
                 f" ({action.localisation.describe()})" if action.localisation else "")

    # --- status -------------------------------------------------------------------------------
    def status(self) -> dict:
        """Everything ``mrc controller status`` shows, as plain data (the ``Status`` message
        of ``controller.proto`` as ``client.status_from_proto`` gives it, less ``running``)."""
        loc: Localisation | None = self.reactor.last
        return {
            "name": self.name, "pid": os.getpid(), "started_ns": self.started_ns, "updated_ns": time.time_ns(),
            "topology": self.topology.summary(), "topology_file": self.topology_file,
            "election_id": self.election_id,
            "pipeline": {"p4info": self.pipeline.p4info_path, "cookie": self.pipeline.cookie},
            "ready": self.ready.is_set(), "mode": self.mode,
            "switches": {n: st.as_dict() for n, st in self.switches.items()},
            "hosts": {n: hs.as_dict() for n, hs in self.hosts.items()},
            "links_down": sorted(set(self.reactor.links_down())
                                 | set(self.rerouter.links_down() if self.rerouter else ())),
            "reported_down": dict(sorted(self.reported_down.items())),
            "rerouted": dict(sorted(self.rerouter.rerouted.items())) if self.rerouter else {},
            "denials": {link: t for link, t in sorted(self.reactor.denied.items())},
            "withheld": dict(sorted(self.reactor.withheld.items())),
            "localisation": None if loc is None else {
                "describe": loc.describe(), "failed": sorted(loc.failed), "ambiguous": loc.ambiguous,
                "candidates": [sorted(c) for c in loc.candidates], "suspects": sorted(loc.suspects),
                "unexplained": len(loc.unexplained)},
            "timeline": [m.as_dict() for m in self.reactor.timeline.marks],
        }

    def timeline(self) -> list[Mark]:
        """The failure timeline so far."""
        return list(self.reactor.timeline.marks)

    def save_status(self, stopped: bool = False) -> None:
        """Save the status now (``stopped``: pid 0, the controller is gone)."""
        self._dirty = False
        if self.status_file is None:
            return
        status = self.status()
        if stopped:
            status["pid"] = 0
        try:
            write_status(self.status_file, status)
        except OSError as exc:
            log.warning("saved status %s: %s", self.status_file, exc)
