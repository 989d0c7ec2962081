"""The host agent: one per host, owning that host's BPF maps (design section 5).

Its loop blocks (epoll) on the dataplane's event ring, its UDP socket, rtnetlink and a wake-up
eventfd, and sweeps only while time alone can change a verdict (:func:`~mrckit.host.sweep.sweep_due`):
every probe period while it probes, else at the earliest RTO verdict; idle, it sleeps until the
dataplane or the API wakes it. A sweep:
- drains the dataplane's EV events (SKIP, ASSUMED_BAD from feedback) and publishes them;
- follows the plane ports' link state; a port that goes down retires its plane's EVs at once
  and tells every live peer with an EP_REQ PORT_STATUS_UPDATE;
- retires an EV that sent since its last ack and saw no ack for an RTO while its siblings were
  acked, and replaces it with a backup EV of the same plane;
- probes ASSUMED_BAD and DENIED EVs (and EVs crossing a denied link) with EP_REQ EV_PROBE on the
  EV's own path; N consecutive answers make an ASSUMED_BAD EV GOOD again;
- answers the peers' probes with EP_RESP on the response EV they name.

Everything the API changes goes through :meth:`HostAgent.set_ev_denied`,
:meth:`HostAgent.set_link_denied`; reads through :meth:`HostAgent.stats`,
:meth:`HostAgent.plane_stats` and :meth:`HostAgent.ev_table`.

In EV-hash (ecmp) mode the switches hash the EV, so EVs are opaque: the state
machine, probing and replacement are unchanged, but no link follows from an EV. Link denials
are accepted and recorded, not applied (:data:`DENIALS_NOT_APPLIED`), and failure reports
(ASSUMED_BAD events) carry the EV's counters and its plane's state instead of links.
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import logging
import os
import random
import select
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass

from .. import netns
from ..errors import MrcError
from ..wire.addressing import parse_link_name, parse_nic_address, path_da
from ..wire.ev import ev_plane, ev_unpack
from .config import AgentConfig, _mac
from .core import NOT_CONFIGURED, opened
from .dataplane import HostDataplane, PortSetting
from .events import EventHub, EvEvent, make_event
from .evset import Template, build_template
from .maps import EvSet, EvSlot, Reason, state_name
from .planestats import SetReports, plane_rows, sum_planes
from .ports import PortMixin, link_up
from .probing import IPV6_FLOWINFO, ProbeMixin
from .state import DENIED, GOOD, PeerState, ProbeTarget, went_bad
from .sweep import SweepMixin, probe_due, sweep_due

log = logging.getLogger("mrckit.host")

DENIALS_NOT_APPLIED = ("ecmp mode: EVs are opaque (the switches hash them), so no EV is known to "
                       "cross a link; link denials are recorded, not applied to EVs")
"""Why a link denial does not change any EV in ecmp mode (SetEvStateResponse.not_applied)."""

RTMGRP_LINK = 1          # linux/rtnetlink.h: link state change notifications
AGENT_SOCKET_BUFFER_BYTES = 4 << 20
"""Receive buffer of the agent's UDP socket. Every peer's probes and their answers arrive here
(QP 0x2, rewritten to the agent's port); the kernel's default (about 208 KiB) overflowed when
a busy machine descheduled the agent while many EVs were being probed, and a dropped answer is
a failed probe."""
UDP_NO_CHECK6_RX = 102   # linux/udp.h: accept the zero UDP checksum of RoCEv2
PROBE_DRAIN = 1024
"""EP messages a sweep reads from the agent's socket, at most, before it expires probes."""
EV_COUNTERS = ("tx_packets", "tx_bytes", "acked", "nacks", "skips", "unacked_tx")
"""The EV counters of a failure report (EvCounters in host_agent.proto)."""


@dataclass
class ConfigureResult:
    """What Configure did: XDP mode per port, template and backup sizes, warnings."""

    ports: list[tuple[str, int, str]]
    template_evs: int
    backup_evs: int
    warnings: list[str]
    mode: str = "srv6"


class HostAgent(SweepMixin, ProbeMixin, PortMixin):
    """The host agent. ``configure`` starts it; ``close`` stops it and detaches everything."""

    def __init__(self):
        self.cfg: AgentConfig | None = None
        self.dp: HostDataplane | None = None
        self.events = EventHub()
        self.counters: Counter[str] = Counter()
        self.template: Template | None = None
        self.peers: dict[ipaddress.IPv6Address, PeerState] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._rng = random.Random()
        self._udp: socket.socket | None = None
        self._raw: dict[int, socket.socket] = {}
        self._ifindex: dict[int, int] = {}
        self._port_up: dict[int, bool] = {}
        self._outstanding: dict[int, tuple[ipaddress.IPv6Address, int, int]] = {}
        self._next_probe_id = 1
        self._ipr: socket.socket | None = None
        self._bell = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)  # wake() -> the loop
        self._denied_links: set[str] = set()
        self._template_denied: set[int] = set()

    # ================================================================ lifecycle ==========
    def configure(self, cfg: AgentConfig) -> ConfigureResult:
        """Apply ``cfg``: load the dataplane, write its maps, attach tc egress to the NIC device
        and XDP to every plane port, open the agent's sockets and start the loop. Call it in
        the host's network namespace. A second call replaces the first.

        Raises:
            MrcError: an invalid config (naming the field), a missing interface, or a refusal
                by the kernel (BpfError); nothing stays attached after a failure.
        """
        cfg.validate()
        self.close()
        self._stop.clear()
        try:
            return self._setup(cfg)
        except Exception:
            self.close()
            raise

    def _setup(self, cfg: AgentConfig) -> ConfigureResult:
        s = cfg.settings
        self._rng = random.Random(s.seed or None)
        # The T1 draws differ per host (its NIC address) but repeat with the seed.
        self.template = build_template(cfg.t1_counts(), s.ev_count, s.backups_per_plane,
                                       seed=s.seed or None, opaque=cfg.opaque_evs, t1_draws=s.t1_draws,
                                       draw_seed=f"{s.seed}/{cfg.nic_address}" if s.seed else None)
        self._ifindex = {p.plane: _ifindex(p.ifname, cfg.name) for p in cfg.ports}
        _ifindex(cfg.nic_device, cfg.name)
        dp = self.dp = HostDataplane(cfg.mode, cfg.locator)  # both fixed at load: Configure reloads
        dp.set_host(str(cfg.nic_address), cfg.locator, cfg.leaf, cfg.downlink,
                    max(p.plane for p in cfg.ports) + 1, s.agent_port, cfg.mode,
                    path_retire=cfg.path_retire, pinned=s.pinned_ev,
                    min_active=0 if s.pinned_ev else s.min_active)
        self._open_sockets(cfg)  # the link monitor first, so no change is missed
        self._port_up = {p.plane: link_up(p.ifname) for p in cfg.ports}
        for p in cfg.ports:
            dp.set_port(PortSetting(p.plane, self._ifindex[p.plane], _mac(p.mac), _mac(p.neighbor_mac),
                                    p.address.packed, self._port_up[p.plane]))
        dp.set_template(self.template.active)
        warnings, ports = ([DENIALS_NOT_APPLIED] if cfg.opaque_evs else []), []
        for p in cfg.ports:
            got = dp.attach_ingress(p.ifname, s.xdp_mode)
            if s.xdp_mode != "generic" and got == "generic":
                warnings.append(f"{p.ifname}: native XDP refused, fell back to generic mode")
            ports.append((p.ifname, p.plane, got))
        dp.attach_egress(cfg.nic_device)
        self.cfg = cfg
        self.peers = {}
        dp.set_configured(True)
        self._thread = threading.Thread(target=self._loop, name=f"mrc-host-{cfg.name}", daemon=True)
        self._thread.start()
        backups = sum(len(v) for v in self.template.backups.values())
        return ConfigureResult(ports, len(self.template.active), backups, warnings, cfg.mode)

    def _open_sockets(self, cfg: AgentConfig) -> None:
        udp = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        udp.setsockopt(socket.SOL_UDP, UDP_NO_CHECK6_RX, 1)
        udp.setsockopt(socket.IPPROTO_IPV6, IPV6_FLOWINFO, 1)
        netns.set_receive_buffer(udp, AGENT_SOCKET_BUFFER_BYTES)
        udp.bind((str(cfg.nic_address), cfg.settings.agent_port))
        udp.setblocking(False)
        self._udp = udp
        for p in cfg.ports:
            raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            raw.bind((p.ifname, 0))
            self._raw[p.plane] = raw
        # Link changes wake the loop through a plain rtnetlink socket on RTMGRP_LINK; the
        # loop then re-reads the ports' state (no message parsing needed).
        self._ipr = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        self._ipr.bind((0, RTMGRP_LINK))
        self._ipr.setblocking(False)

    def close(self) -> None:
        """Stop the loop, detach every program, close sockets. Idempotent."""
        self._stop.set()
        self.wake()  # the loop may block with no timeout
        if self._thread and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._thread = None
        for sock in [self._udp, *self._raw.values()]:
            if sock is not None:
                sock.close()
        self._udp, self._raw = None, {}
        if self._ipr is not None:
            self._ipr.close()
            self._ipr = None
        if self.dp is not None:
            self.dp.detach()
            self.dp.close()
            self.dp = None

    # ================================================================ loop ===============
    def wake(self) -> None:
        """Make the loop sweep soon (thread-safe). The API calls it after changing EV states;
        a test that writes the maps behind the agent's back must call it too."""
        os.eventfd_write(self._bell, 1)

    def _loop(self) -> None:
        poller = select.epoll()
        ring = self._dataplane().events_fd()
        for fd in (opened(self._udp).fileno(), opened(self._ipr).fileno(), ring, self._bell):
            poller.register(fd, select.EPOLLIN)
        deadline: float | None = time.monotonic()  # one sweep at start: it decides to sleep
        try:
            while not self._stop.is_set():
                timeout = -1 if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    ready = {fd for fd, _ in poller.poll(timeout)}
                except (OSError, ValueError):
                    return  # closed under us
                deadline = self._turn(ready, ring, deadline)
        finally:
            poller.close()

    def _turn(self, ready: set[int], ring: int, deadline: float | None) -> float | None:
        """Handle what woke the loop; sweep when due. Returns the next sweep time (monotonic
        s), or None to block until something happens."""
        try:
            with self._lock:
                urgent = False
                if self._bell in ready:
                    os.eventfd_read(self._bell)
                    urgent = True  # the API changed EV states
                if ring in ready:
                    urgent |= self._drain_dataplane_events()
                if opened(self._udp).fileno() in ready:
                    answered = self.counters["probes_ok"]
                    self._receive()
                    if self.counters["probes_ok"] != answered and deadline is not None:
                        # An answered probe frees its path for the next one a probe period on,
                        # sooner than the expiry the schedule waited for.
                        deadline = min(deadline, time.monotonic() + self._probe_period())
                if opened(self._ipr).fileno() in ready:
                    self._link_messages()
                    urgent = True  # a port went up or down
                now = time.monotonic()
                if urgent:
                    deadline = now
                elif deadline is None:
                    # Woken while idle by a send, an ack or a peer's message: no RTO verdict
                    # can fall due sooner than a sweep period from now.
                    deadline = now + self._sweep_period()
                if now < deadline:
                    return deadline
                return self._sweep_and_schedule()
        except Exception:  # keep the agent alive; the log says what went wrong
            if self._stop.is_set():
                return None
            log.exception("host agent loop")
            self.counters["loop_errors"] += 1
            return time.monotonic() + self._probe_period()

    def _sweep_period(self) -> float:
        """The sweep period in s: an RTO verdict falls due at most this long before a sweep
        finds it."""
        return self._config().settings.sweep_period_ns / 1e9

    def _probe_period(self) -> float:
        """The period in s of the sweeps that probe: the sweep period, or the probe interval
        when that is shorter."""
        return self._probe_period_ns() / 1e9

    def _probe_period_ns(self) -> int:
        s = self._config().settings
        return min(s.sweep_period_ns, s.probe_interval_ns)

    def _sweep_and_schedule(self) -> float | None:
        """Sweep, then the next sweep time (:meth:`_next_sweep`), or None after marking the
        dataplane idle (its next send or ack wakes us)."""
        self.sweep()
        nxt = self._next_sweep()
        if nxt is not None:
            return nxt
        activity = self._activity()
        dp = self._dataplane()
        dp.set_agent_idle(True)
        # A send or ack between the sweep's read and the flag rang no bell: look once more.
        if self._activity() != activity or self._next_sweep() is not None:
            dp.set_agent_idle(False)
            return time.monotonic() + self._sweep_period()
        self.counters["idle_sleeps"] += 1
        return None

    def _next_sweep(self) -> float | None:
        """The next sweep time (monotonic s), or None when no sweep can change anything by
        the passing of time alone: the earliest RTO verdict (:func:`~mrckit.host.sweep.
        sweep_due`), but at least one sweep period away (under traffic every EV's unacked send
        is recent, so the agent sweeps about once an RTO instead of every probe interval), and
        the next probe that can go out or be judged lost (:func:`~mrckit.host.sweep.probe_due`),
        at least one probe period away. A path that stays down is probed once per probe
        expiry, not swept every probe interval."""
        now = time.monotonic_ns()
        settings = self._config().settings
        expiry = self._probe_expiry()
        planes_up = {p for p, up in self._port_up.items() if up}
        verdict = probe = None
        for peer, evset in self._dataplane().peer_sets():
            st = self.peers.get(peer)
            verdict = _earliest(verdict, sweep_due(evset, st, now, settings.rto_ns, settings.pinned_ev))
            if st is not None:
                interval_of = self._interval_of(self._denied_check(peer))
                probe = _earliest(probe, probe_due(st, interval_of, expiry, planes_up, self._path_of(peer)))
        if self._outstanding:
            probe = _earliest(probe, min(sent for _, _, sent in self._outstanding.values()) + expiry)
        times = []
        if verdict is not None:
            times.append(now + self._probe_period_ns() if verdict <= now
                         else max(verdict, now + settings.sweep_period_ns))
        if probe is not None:
            times.append(max(probe, now + self._probe_period_ns()))
        return min(times) / 1e9 if times else None

    def _activity(self) -> tuple[int, int]:
        """What a send that elicits an ack, or an ack, moves over every live peer's EVs: (the
        writes and PROBEs unacked, the SACKs and NACKs received). An ack resets its EV's unacked
        count but adds one to the second, so no such event leaves the pair as it was. A SACK
        or NACK this host sends moves neither: it gives the sweep nothing to judge."""
        unacked = answered = 0
        for _, evset in self._dataplane().peer_sets():
            for s in evset.slots[:evset.n]:
                unacked += s.unacked_tx
                answered += s.acked + s.nacks
        return unacked, answered

    def sweep(self, now: int | None = None) -> None:
        """One pass of the state machine (the loop calls it every ``sweep_period_ns``)."""
        with self._lock:
            if self.dp is None:
                return
            now = now or time.monotonic_ns()
            # Read the sets before draining: the dataplane submits an event before it writes
            # the state, so every state in this snapshot has its event published before the
            # sweep acts on it (a LOSS comes before its REPLACED).
            sets = list(self.dp.peer_sets())
            self._drain_dataplane_events()
            # Answers that came while the agent waited for a core are on time: read them all
            # before the clock declares their probes lost.
            self._receive(limit=PROBE_DRAIN)
            self._expire_probes(now)
            budget = [self._config().settings.max_probes_per_sweep]
            for peer, evset in sets:
                st = self.peers.setdefault(peer, self._new_peer_state())
                self._sweep_peer(peer, st, evset, now, budget)
            self.counters["sweeps"] += 1  # GetStats: agent_sweeps, the idle tests' witness

    def _new_peer_state(self) -> PeerState:
        return PeerState(backups={p: list(v) for p, v in self._template().backups.items()})

    def _drain_dataplane_events(self) -> bool:
        """Publish the dataplane's EV events. Returns whether one made an EV ASSUMED_BAD (the
        sweep should replace it now)."""
        dp = self._dataplane()
        # A LOSS comes with its path's PATH_LOSSes: one read of the set reports them all.
        reports: dict[str, SetReports | None] = {}
        retired = False
        for e in dp.poll_events():
            if e.reason == Reason.WAKE:
                self.counters["dataplane_wakes"] += 1
                continue
            peer = str(ipaddress.IPv6Address(bytes(e.peer)))
            bad = went_bad(e.old_state, e.new_state)
            if bad and peer not in reports:
                reports[peer] = self._set_reports(peer)
            retired |= bad
            self._publish_with(make_event(peer, e.ev, e.old_state, e.new_state, Reason(e.reason).name,
                                          ts_ns=e.ts_ns, plane=ev_plane(e.ev)), reports.get(peer))
        return retired

    def _publish(self, event: EvEvent, evset: EvSet | None = None) -> None:
        """Publish ``event``; a change to ASSUMED_BAD carries the failure report, read from
        ``evset`` (the peer's set in hand) or else from the map."""
        reports = None
        if event.peer and went_bad(event.old_state, event.new_state):
            reports = self._set_reports(event.peer, evset)
        self._publish_with(event, reports)

    def _publish_with(self, event: EvEvent, reports: SetReports | None) -> None:
        """Publish ``event``; a change to ASSUMED_BAD carries its failure report from
        ``reports`` (none when the peer has no set)."""
        if reports is not None and event.peer and went_bad(event.old_state, event.new_state):
            counters, row = reports.report(event.ev, event.new_state)
            event = dataclasses.replace(event, ev_counters=counters, plane_stats=row)
        if self.cfg is not None and self.cfg.opaque_evs:
            event = dataclasses.replace(event, opaque=True)
        self.counters[f"events_{event.reason.lower()}"] += 1
        self.events.publish(event)

    def _set_reports(self, peer: str, evset: EvSet | None = None) -> SetReports | None:
        """The failure reports of ``peer``'s set (``evset``, the set in hand, or else read from
        the map): the EV's counters and its plane's state toward the peer, the evidence that
        replaces link guesses in ecmp mode. None when the peer has no set."""
        if evset is None and self.dp is not None:
            evset = self.dp.peer_set(peer)
        if evset is None:
            return None
        st = self.peers.get(ipaddress.IPv6Address(peer))
        return SetReports(peer, [evset.slots[i] for i in range(evset.n)], st.retired if st else {},
                          self._port_up, EV_COUNTERS)

    # ================================================================ API ================

    def set_ev_denied(self, peer: str | None, ev: int, denied: bool) -> int:
        """Set (or lift) DENIED on EV ``ev`` of ``peer``, or of every live peer and the template
        when ``peer`` is None. Lifting makes the EV GOOD. Returns the slots changed.

        Raises:
            MrcError: not configured; ``peer`` is not a NIC address.
        """
        with self._lock:
            self._require()
            if peer:
                try:
                    parse_nic_address(peer)
                except ValueError as exc:
                    raise MrcError(f"peer: {exc}") from None
            now = time.monotonic_ns()
            new, reason = (DENIED, Reason.API_DENY) if denied else (GOOD, Reason.API_ALLOW)
            changed = 0
            dp = self._dataplane()
            for p, evset in list(dp.peer_sets()):
                if peer and p != ipaddress.IPv6Address(peer):
                    continue
                touched: set[int] = set()
                for i in range(evset.n):
                    s = evset.slots[i]
                    if s.ev == ev and (s.state == DENIED) != denied:
                        self._set_state(p, s, new, reason, now)
                        touched.add(i)
                changed += len(touched)
                dp.merge_slots(p, evset, touched)
            if not peer:
                self._deny_in_template(ev, denied)
            self.wake()  # DENIED EVs are probed
            return changed

    def _deny_in_template(self, ev: int, denied: bool) -> None:
        active = self._template().active
        states = [DENIED if (e == ev and denied) or (e != ev and e in self._template_denied) else GOOD
                  for e in active]
        if denied:
            self._template_denied.add(ev)
        else:
            self._template_denied.discard(ev)
        self._dataplane().set_template(active, states)

    def set_link_denied(self, link: str, denied: bool) -> tuple[int, bool]:
        """Deny (or allow) a link by name: tc egress then skips every EV whose path crosses
        it, for every peer, met or not. Returns (EVs of live peers now crossing it, whether
        the denied-links map changed).

        In ecmp mode the denial is only recorded (:meth:`denial_note` says why): it returns
        (0, whether the recorded set changed) and no EV changes.

        Raises:
            MrcError: not configured. ValueError: a malformed link name.
        """
        with self._lock:
            self._require()
            ln = parse_link_name(link)
            dp = self._dataplane()
            if self._config().opaque_evs:
                changed = (str(ln) in self._denied_links) != denied
            else:
                changed = dp.deny_link(ln.plane, ln.leaf, ln.kind, ln.index, denied)
            (self._denied_links.add if denied else self._denied_links.discard)(str(ln))
            for st in self.peers.values():
                st.probe_reports.clear()  # the controller hears each path's next result afresh
            crossing = 0
            for peer, evset in dp.peer_sets():
                crossing += sum(1 for i in range(evset.n) if str(ln) in self._links_of(peer, evset.slots[i].ev))
            self._publish(make_event("", 0, GOOD if denied else DENIED, DENIED if denied else GOOD,
                                     (Reason.LINK_DENIED if denied else Reason.LINK_ALLOWED).name,
                                     plane=ln.plane, link=str(ln)))
            self.wake()  # EVs across a denied link are probed
            return crossing, changed

    def denial_note(self) -> str:
        """'' when link denials act on EVs (srv6 mode); in ecmp mode, why they do not."""
        return DENIALS_NOT_APPLIED if self.cfg is not None and self.cfg.opaque_evs else ""

    def denied_links(self) -> list[str]:
        """The links denied through the API (applied in srv6 mode, recorded in ecmp mode)."""
        with self._lock:
            return sorted(self._denied_links)

    def plane_stats(self) -> list[dict]:
        """Per-plane statistics, the localisation evidence of ecmp mode (design 5):
        one row per plane summed over the live peers (peer ''), then one per (peer, plane).
        Each row: plane, peer, port_up, evs and the count per state (good, skip, assumed_bad,
        denied), retired (ASSUMED_BAD EVs out of the set), and tx_packets, tx_bytes, acked,
        nacks, skips summed over the plane's EVs in the set. Raises MrcError: not configured."""
        with self._lock:
            self._require()
            per_peer: list[dict] = []
            for peer, evset in self._dataplane().peer_sets():
                st = self.peers.get(peer)
                per_peer += plane_rows(str(peer), [evset.slots[i] for i in range(evset.n)],
                                       st.retired if st else {}, self._port_up)
            return sum_planes(per_peer, self._port_up) + per_peer

    def stats(self) -> dict[str, int]:
        """Dataplane counters (``host_stats``, summed over CPUs) and the agent's counters."""
        with self._lock:
            self._require()
            dp = self._dataplane()
            out = {f"dp_{k.lower()}": v for k, v in dp.stat_values().items()}
            out.update({f"agent_{k}": v for k, v in self.counters.items()})
            out["agent_retired_evs"] = sum(len(st.retired) for st in self.peers.values())
            out["agent_live_peers"] = sum(1 for _ in dp.peers.keys())
            return out

    def rx_paths(self) -> list[dict]:
        """Probes (QP 0x2 packets) the XDP ingress accepted from the fabric by the path they
        came on, one row per (plane, t1, src_leaf, src_downlink) with its ``packets`` (the
        ``RxPath`` message of host_agent.proto; docs/host.md, "Arrivals"). Raises MrcError:
        not configured."""
        with self._lock:
            self._require()
            counts = self._dataplane().rx_path_counts()
        return [dict(k._asdict(), packets=n) for k, n in sorted(counts.items())]

    def ev_table(self, peer: str | None = None) -> list[dict]:
        """Rows of the EV table of every live peer (or one): peer, slot, ev, plane, t1, state,
        path (outer DA), tx/ack counters; retired EVs follow with ``retired`` true."""
        with self._lock:
            self._require()
            rows = []
            only = ipaddress.IPv6Address(peer) if peer else None
            for p, evset in self._dataplane().peer_sets():
                if only is not None and p != only:
                    continue
                st = self.peers.get(p)
                rows += [self._row(p, i, evset.slots[i], st) for i in range(evset.n)]
                for ev, target in (st.retired.items() if st else []):
                    rows.append(self._retired_row(p, ev, target))
            return rows

    def _path(self, peer: ipaddress.IPv6Address, ev: int) -> str:
        cfg = self._config()
        if cfg.opaque_evs:
            return str(peer)  # the DA: the switches choose the path by hashing the EV
        loc = parse_nic_address(peer)
        plane, t1, _ = ev_unpack(ev)
        return _path_text(plane, t1, cfg.leaf, loc.leaf, loc.downlink, cfg.locator)

    def _row(self, peer: ipaddress.IPv6Address, slot_index: int, s: EvSlot, st: PeerState | None) -> dict:
        plane, t1, _ = ev_unpack(s.ev)
        target = st.probes.get(s.ev) if st else None
        return dict(peer=str(peer), slot=slot_index, ev=s.ev, plane=plane, t1=t1,
                    state=state_name(s.state), path=self._path(peer, s.ev), tx_packets=s.tx_packets,
                    tx_bytes=s.tx_bytes, acked=s.acked, skips=s.skips, nacks=s.nacks,
                    last_tx_ns=s.last_tx_ns, last_ack_ns=s.last_ack_ns, retired=False,
                    probe_streak=target.streak if target else 0)

    def _retired_row(self, peer: ipaddress.IPv6Address, ev: int, target: ProbeTarget) -> dict:
        plane, t1, _ = ev_unpack(ev)
        return dict(peer=str(peer), slot=-1, ev=ev, plane=plane, t1=t1, state="ASSUMED_BAD",
                    path=self._path(peer, ev), tx_packets=target.tx_packets, tx_bytes=0,
                    acked=target.acked, skips=0, nacks=0, last_tx_ns=target.last_tx_ns,
                    last_ack_ns=0, retired=True, probe_streak=target.streak)

    def _require(self) -> None:
        if self.dp is None or self.cfg is None:
            raise MrcError(NOT_CONFIGURED)

    def _config(self) -> AgentConfig:
        if self.cfg is None:
            raise MrcError(NOT_CONFIGURED)
        return self.cfg

    def _dataplane(self) -> HostDataplane:
        if self.dp is None:
            raise MrcError(NOT_CONFIGURED)
        return self.dp

    def _template(self) -> Template:
        if self.template is None:
            raise MrcError(NOT_CONFIGURED)
        return self.template


@functools.lru_cache(maxsize=65536)
def _path_text(plane: int, t1: int, src_leaf: int, dst_leaf: int, dst_downlink: int, locator: int) -> str:
    """:func:`~mrckit.wire.addressing.path_da` as text, cached: every EV table read (the
    demo samples one every 50 ms) names the path of every EV."""
    return str(path_da(plane, t1, src_leaf, dst_leaf, dst_downlink, locator))


def _earliest(a: int | None, b: int | None) -> int | None:
    """The earlier of two times, None meaning never."""
    return b if a is None else a if b is None else min(a, b)


def _ifindex(ifname: str, host: str) -> int:
    try:
        return socket.if_nametoindex(ifname)
    except OSError:
        raise MrcError(f"host {host}: interface {ifname} does not exist in this network namespace") from None
