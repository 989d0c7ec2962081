"""Failure reaction: EV events of many hosts in, DENY and lift decisions out (design 7).

A state machine with no I/O: the controller feeds it host events (:meth:`FailureReactor.event`)
and good-path evidence from polled counters (:meth:`FailureReactor.good`), calls
:meth:`FailureReactor.decide` periodically, carries out the :class:`Action` s on every host and
confirms them. Times are wall-clock ns (CLOCK_REALTIME), passed in, so tests drive the clock.

Rules:
- an *episode* starts with the first ASSUMED_BAD (or a host port going down) that no denied
  link explains; good evidence counts only if gathered after the episode began (acks that
  grew between two polls both taken after it, or a probe answered after it), so traffic that
  crossed a link before it failed never clears it;
- ``settle_ns`` after the episode began, the evidence is localised (``localise.py``); a unique
  answer is DENIED on every host at once. An ambiguous answer waits until ``ambiguous_wait_ns``
  after the episode began (a spurious ASSUMED_BAD on a busy host recovers by probes within
  that time, and more evidence may settle it); if it is still ambiguous then, every suspect
  T0-T1 link is denied: the hosts keep probing across denied links, so an innocent one is
  lifted by the next rule. Host links are never denied on ambiguous evidence: a host reports
  its own port going down (PORT_DOWN), and an ambiguous set naming host links is most often a
  busy host's spurious timeouts (all paths of one host pair failing alike);
- end hosts are not links: when every plane of one host pair (as one host reports it) fails
  within the evidence window, the trouble is at an end host (a host too busy to send its SACKs
  or to run its timers in time, or one that stopped), not in the fabric: one failed link
  touches one plane only. That pair's evidence is set aside (an ``end_host`` mark on the
  timeline says so) and does not localise; a host whose port really went down says so itself
  (PORT_DOWN). A one-plane fabric keeps all evidence;
- arrivals prove paths good: each host's dataplane counts the probes it accepts by the path
  they came on (plane, T1 and sender: ``rx_paths``, polled with the EV counters); every failing
  path is probed by its sender. A count that grew in a poll window that began after a path's
  failing evidence proves that path's links good in the direction it crosses them (the
  sender's host link and leaf uplink up, the receiver's leaf uplink and host link down), and
  those links are taken out of that evidence.
  A path whose every link is so proven is not failing: its probes arrived, and the timeouts
  were a slow host's (its SACKs or its sweep late), not a failed link's; an ``arrivals`` mark
  on the timeline says so. Such evidence counts toward no rule below, the end-host rule's
  included. A failed link carries nothing, so no count across it grows. When the caller polls
  arrivals (``arrival_polls``, the controller), nothing is localised until every failing path's
  receiver has been polled over a window that began after the path failed (a busy machine
  makes polls late), or until ``ambiguous_wait_ns`` after the episode began;
- weak evidence waits: a suspect that fewer than ``min_support`` failing EVs name alone (EVs
  whose path crosses no other suspect of the answer) is not denied at ``settle_ns`` with the
  rest of the answer. A failed link fails every EV across it, from every sender; one or two EVs
  that timed out are the usual trace of a late host (its sweep, or its peer's SACKs, late), not
  of a failed link. The weak suspect waits until ``ambiguous_wait_ns`` after its episode began,
  time for its EVs' probes to succeed and for good evidence to clear it; if it is still named
  then, it is treated like an ambiguous answer's suspect (next rule);
- probes confirm weak evidence: after the wait, an ambiguous answer's suspect or a weak one
  is denied only once the hosts' probes across it have failed for ``probe_confirm_ns`` with
  none answered in between (PROBE_RESULT events of retired paths; failures on a path that a
  denied or reported link explains do not count). Until then it is *withheld*, and a probe
  answered across it starts the count again. A busy machine delays timers and SACKs, and one
  spurious loss retires a whole path (path-aware retirement) and names its links; the probes
  of a healthy path are answered within milliseconds of the host running again, while those
  of a failed link keep failing. Time alone never decides such a deny;
- a host link that only one host pair's failing paths cross is withheld too: a failed host
  link fails that host's paths toward every peer on its plane, while one pair's plane failing
  alone is most often a lossy T0-T1 link beside a spurious timeout on that pair's other
  path (the one host link both paths share is then the smallest answer), or that pair's own
  trouble. A host link that really goes down is reported by its host (PORT_DOWN);
- connectivity guard: a deny never leaves a host pair, connected before it, without a usable
  path (``reach.py``, over planes x T1). The links that would are *withheld*: kept allowed,
  listed in :attr:`FailureReactor.withheld` and put on the timeline. Ports a host reports
  down are denied regardless (they carry nothing either way);
- a denied link whose probes succeed ``lift_successes`` times in a row (PROBE_RESULT events
  with probe_ok, or retired EVs recovering with PROBE_OK, on paths across it) is lifted on
  every host, and the failing evidence across it is forgotten;
- a link *reported* down (:meth:`FailureReactor.report`: a switch's PHY, a fault injector, an
  operator; ``reports.py``) is denied on every host at the next decision, without waiting for
  host evidence, through the same deny path (a ``localised`` mark whose detail names the
  report); a report that it came back up lifts it at once. Reports are facts, not evidence, so
  the connectivity guard does not hold them back (a down link carries nothing either way).
  Evidence across a link reported down is explained by the report: it makes no other link a
  suspect, and a link denied earlier as a suspect of an ambiguous answer whose every failing
  path crosses the reported link is lifted (a report that comes late, after the hosts' evidence
  has already been localised).
"""

from __future__ import annotations

import logging
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from ..topology import Topology, TopologyError, path_for_ev
from ..topology.paths import EV_PATH_MASK
from ..wire.addressing import host_link_name, t1_link_name
from ..wire.ev import ev_unpack
from .localise import Localisation, localise
from .reach import is_host_link, safe_subset
from .timeline import Timeline

log = logging.getLogger(__name__)

GOOD, SKIP, ASSUMED_BAD, DENIED = 0, 1, 2, 3  # EvState of host_agent.proto
SETTLE_NS = 100_000_000
"""Evidence gathering time after the first ASSUMED_BAD before localising (100 ms): enough for
the hosts' RTO (2 ms by default) to retire the other EVs across the link and for two polls."""
CONGESTION_REASONS = frozenset({"SACK_ALWAYS_SKIP"})
"""ASSUMED_BAD reasons that mean congestion, not failure (design 5: ALWAYS_SKIP from the
receiver's CE history). They are the hosts' business: the controller denies failed links only."""
AMBIGUOUS_WAIT_NS = 3 * SETTLE_NS
"""How long an ambiguous localisation waits for more evidence before denying its suspects."""
MIN_SUPPORT = 3
"""Failing EVs (distinct host, peer and EV) that must name a suspect alone for it to be denied
at the settle time; a suspect with fewer waits (module docstring, "weak evidence")."""
LIFT_SUCCESSES = 3
"""Consecutive successful probes across a denied link that lift the denial."""
PROBE_CONFIRM_NS = SETTLE_NS
"""How long probes across a weak or ambiguous suspect must keep failing, with none answered,
for it to be denied (module docstring, "probes confirm weak evidence"). Hosts report a path's
failing probes at once and then every 100 ms (``host.probing.PROBE_REPORT_NS``), so a path
whose probes all fail confirms its links one report interval after the first failure."""
REPORT_REASON = "link report"
"""How the reason of a deny or lift that a link report decided begins (host evidence decides
the others)."""
EVIDENCE_TTL_NS = 30_000_000_000
"""Failing evidence older than this (30 s) is forgotten."""


@dataclass(frozen=True)
class Action:
    """Deny or lift ``links`` on every host. ``localisation`` is the reason of a deny."""

    kind: str  # "deny" or "lift"
    links: tuple[str, ...]
    localisation: Localisation | None = None
    reason: str = ""  # "link report ..." when a report, not host evidence, decided it


@dataclass
class _Evidence:
    links: frozenset[str]
    time_ns: int
    evs: frozenset[int] = frozenset()  # the failing EVs of the path seen so far


@dataclass
class FailureReactor:
    """See the module docstring. ``topology`` maps (host, peer NIC, EV) to path links."""

    topology: Topology
    settle_ns: int = SETTLE_NS
    ambiguous_wait_ns: int = AMBIGUOUS_WAIT_NS
    lift_successes: int = LIFT_SUCCESSES
    min_support: int = MIN_SUPPORT
    probe_confirm_ns: int = PROBE_CONFIRM_NS
    evidence_ttl_ns: int = EVIDENCE_TTL_NS
    arrival_polls: bool = False  # the caller polls arrivals (polled()): evidence waits for a window after it
    timeline: Timeline = field(default_factory=Timeline)
    denied: dict[str, int] = field(default_factory=dict)        # link -> time denied (ns)
    last: Localisation | None = None
    ignored_events: int = 0
    withheld: dict[str, str] = field(default_factory=dict)      # link -> why it was kept allowed
    _bad: dict[tuple, _Evidence] = field(default_factory=dict)  # (host, peer, path bits) -> evidence
    _good: dict[tuple, _Evidence] = field(default_factory=dict)
    _ports_down: dict[str, int] = field(default_factory=dict)   # host links a host saw go down
    _streak: dict[str, int] = field(default_factory=dict)
    _probe_fails: dict[str, tuple[int, int]] = field(default_factory=dict)  # link -> first, last failed probe (ns)
    _pending: set[str] = field(default_factory=set)             # decided, not yet on all hosts
    _episode: int | None = None
    _paths: dict[tuple, frozenset[str] | None] = field(default_factory=dict)
    _reported: dict[str, str] = field(default_factory=dict)     # link reported down -> its source
    _reported_up: dict[str, str] = field(default_factory=dict)  # denied link reported up -> source
    _end_hosts_noted: set[frozenset[str]] = field(default_factory=set)
    _suspected: dict[str, list[frozenset[str]]] = field(default_factory=dict)  # ambiguous deny -> its evidence
    _arrived: dict[tuple[str, str], int] = field(default_factory=dict)  # (link, direction) -> proof window start (ns)
    _directed: dict[tuple, frozenset[tuple[str, str]] | None] = field(default_factory=dict)
    _arrivals_noted: set[frozenset[str]] = field(default_factory=set)
    _polled: dict[str, int] = field(default_factory=dict)  # host -> start of its latest arrivals poll window (ns)

    # --- evidence in --------------------------------------------------------------------
    def links_of(self, host: str, peer: str, ev: int) -> frozenset[str] | None:
        """Link names of the path EV ``ev`` takes from ``host`` to ``peer`` (NIC address);
        None when the topology has no such host pair or path."""
        key = (host, peer, ev & EV_PATH_MASK)
        if key not in self._paths:
            try:
                self._paths[key] = frozenset(path_for_ev(self.topology, host, peer, ev).links)
            except (TopologyError, ValueError):
                self._paths[key] = None
        return self._paths[key]

    def event(self, host: str, ev, now_ns: int) -> None:
        """One ``EvEvent`` (host_agent.proto) from ``host``, received at ``now_ns``."""
        reason = ev.reason
        if reason in ("LINK_DENIED", "LINK_ALLOWED", "API_DENY", "API_ALLOW", "REPLACED"):
            return
        if not ev.peer:
            self._port_event(host, ev, now_ns)
            return
        links = self.links_of(host, ev.peer, ev.ev)
        if links is None:
            self.ignored_events += 1
            return
        key = (host, ev.peer, ev.ev & EV_PATH_MASK)
        if reason == "PROBE_RESULT":
            self._probe(links, ev.probe_ok, now_ns)
        elif ev.new_state == ASSUMED_BAD and reason not in CONGESTION_REASONS:
            self._failing(key, links, host, ev, now_ns)
        elif ev.new_state == GOOD and reason == "PROBE_OK":
            self._probe(links, True, now_ns)
            self._bad.pop(key, None)
            if self._episode is not None:
                self._good[key] = _Evidence(links, now_ns)

    def good(self, host: str, peer: str, ev: int, since_ns: int, now_ns: int) -> None:
        """``host``'s EV ``ev`` toward ``peer`` was acked between ``since_ns`` and ``now_ns``
        (two polls of its counters): its path works, if that was after the episode began."""
        if self._episode is None or since_ns < self._episode:
            return
        links = self.links_of(host, peer, ev)
        if links is not None:
            key = (host, peer, ev & EV_PATH_MASK)
            self._good[key] = _Evidence(links, now_ns)
            self._bad.pop(key, None)

    def arrived(self, host: str, path, since_ns: int, now_ns: int) -> None:
        """``host`` received packets on ``path`` (an ``RxPath`` of host_agent.proto, a key of its
        dataplane's ``rx_paths``: plane, t1, src_leaf, src_downlink) between two polls at
        ``since_ns`` and ``now_ns`` (ns): every link of that path carried them toward ``host``,
        if that was after the episode began (module docstring, "arrivals"). Senders, planes or
        T1s the topology lacks are ignored."""
        if self._episode is None or since_ns < self._episode:
            return
        src = self.topology.host_at(path.src_leaf, path.src_downlink)
        if src is None:
            return
        try:
            links = _directed_links(self.topology, src, self.topology.host(host), path.plane, path.t1)
        except (TopologyError, ValueError):
            return
        for link in links:
            self._arrived[link] = max(self._arrived.get(link, 0), since_ns)

    def polled(self, host: str, since_ns: int) -> None:
        """``host``'s arrivals were polled over a window that began at ``since_ns`` (ns), whether
        or not any grew: evidence toward ``host`` from before ``since_ns`` has been judged
        (module docstring, "arrivals")."""
        self._polled[host] = max(self._polled.get(host, 0), since_ns)

    def note_link_down(self, link: str, time_ns: int, source: str = "fault") -> None:
        """Record that ``link`` went down at ``time_ns`` (a fault injector's log), for the
        timeline only: the controller localises from host evidence, not from this."""
        self.timeline.add("link_down", time_ns, (link,), source)

    def report(self, link: str, up: bool, source: str = "") -> None:
        """``link`` was reported down (``up`` False) or up again by ``source`` (a switch's PHY,
        a fault injector, an operator): the next :meth:`decide` denies it on every host, or
        lifts it if denied. The caller puts the report itself on the timeline."""
        who = source or "reported"
        if up:
            self._reported.pop(link, None)
            if link in self.denied or link in self._pending:
                self._reported_up[link] = who
        else:
            self._reported[link] = who
            self._reported_up.pop(link, None)

    def adopt_denial(self, link: str, denied: bool, time_ns: int) -> None:
        """A denial found in force (or lifted) on a host before we started: a restarted
        controller takes over its predecessor's denials rather than forget them."""
        if denied:
            self.denied.setdefault(link, time_ns)
            self._streak.setdefault(link, 0)
        else:
            self.denied.pop(link, None)
            self._streak.pop(link, None)

    def _port_event(self, host: str, ev, now_ns: int) -> None:
        if not ev.link:
            return
        if ev.reason == "PORT_DOWN":
            self._ports_down[ev.link] = now_ns
            self.timeline.add("link_down", ev.wall_time_ns or now_ns, (ev.link,), f"port down seen by {host}")
            self._start_episode(now_ns, host, ev)
        else:
            self._ports_down.pop(ev.link, None)

    def _failing(self, key, links, host, ev, now_ns) -> None:
        seen = self._bad[key].evs if key in self._bad else frozenset()
        self._bad[key] = _Evidence(links, now_ns, seen | {ev.ev})
        if not (links & self.denied.keys()):
            self._start_episode(now_ns, host, ev)

    def _start_episode(self, now_ns: int, host: str, ev) -> None:
        if self._episode is None:
            self._episode = now_ns
            self._good.clear()
            self._arrived.clear()
            what = f"{host}: {ev.reason} peer {ev.peer or '-'} EV 0x{ev.ev:08x}"
            self.timeline.add("first_assumed_bad", ev.wall_time_ns or now_ns, (), what)

    def _probe(self, links: frozenset[str], ok: bool, now_ns: int) -> None:
        for link in links & self.denied.keys():
            self._streak[link] = self._streak.get(link, 0) + 1 if ok else 0
        if ok:
            for link in links:
                self._probe_fails.pop(link, None)
        elif not links & self._explaining():
            for link in links:
                first, _ = self._probe_fails.get(link, (now_ns, now_ns))
                self._probe_fails[link] = (first, now_ns)

    def _probes_failing_ns(self, link: str) -> int:
        """How long probes across ``link`` have failed in the current episode with none
        answered (ns; 0 when none failed in it)."""
        first, last = self._probe_fails.get(link, (0, 0))
        if self._episode is None or last < self._episode:
            return 0
        return last - first

    # --- decisions out ------------------------------------------------------------------
    @property
    def episode_start(self) -> int | None:
        """When the current episode began (ns), or None outside one."""
        return self._episode

    def unexplained_failing(self, end_hosts: set[frozenset[str]] | None = None) -> list[frozenset[str]]:
        """Link sets of failing paths that no denied link explains and no end host does
        (``end_hosts``: :meth:`end_host_pairs`, when the caller has it already)."""
        return [e.links for _, e in self._unexplained(end_hosts)]

    def _unexplained(self, end_hosts: set[frozenset[str]] | None = None) -> list[tuple[tuple, _Evidence]]:
        """(key, evidence) of :meth:`unexplained_failing`'s paths, each without the links that
        arrivals prove good in the direction the path crosses them."""
        end_hosts = self.end_host_pairs() if end_hosts is None else end_hosts
        return [(k, e) for k, e in self._failing_now() if _pair(k) not in end_hosts]

    def _failing_now(self) -> list[tuple[tuple, _Evidence]]:
        """The failing evidence that no denied or reported link explains, each path without
        its links that packets crossed toward its receiver since it failed (arrivals); a path
        left with no link is not failing."""
        explained = self._explaining()
        out = []
        for k, e in self._bad.items():
            if e.links & explained:
                continue
            proven = {link for link, way in self._directions(k) if self._arrived.get((link, way), -1) >= e.time_ns}
            if proven:
                e = _Evidence(e.links - proven, e.time_ns, e.evs)
            if e.links:
                out.append((k, e))
        return out

    def arrivals_explain(self) -> set[frozenset[str]]:
        """Host pairs (as :func:`_pair` names them) with failing evidence that arrivals
        explain entirely: the receiver got packets across every link of each such path after
        it failed. Those are a slow host's timeouts, not a failed link's."""
        explained = self._explaining()
        left = {_pair(k) for k, _ in self._failing_now()}
        return {_pair(k) for k, e in self._bad.items() if not (e.links & explained)} - left

    def _unpolled(self, evidence: list[tuple[tuple, _Evidence]]) -> bool:
        """Whether some failing path's receiver has not had its arrivals polled over a window
        that began after the path failed (so arrivals could not have cleared it yet)."""
        for (_, peer, _), e in evidence:
            try:
                receiver = self.topology.host(peer).name
            except (TopologyError, ValueError):
                continue
            if self._polled.get(receiver, -1) < e.time_ns:
                return True
        return False

    def _directions(self, key: tuple) -> frozenset[tuple[str, str]]:
        """The (link, direction) pairs that the path of evidence ``key`` crosses (empty when the
        topology lacks it)."""
        if key not in self._directed:
            host, peer, bits = key
            try:
                plane, t1, _ = ev_unpack(bits)
                self._directed[key] = _directed_links(self.topology, self.topology.host(host),
                                                      self.topology.host(peer), plane, t1)
            except (TopologyError, ValueError):
                self._directed[key] = None
        return self._directed[key] or frozenset()

    def _explaining(self) -> set[str]:
        """Links that explain failing evidence across them: denied, being denied, or reported
        down. A path that crosses a link reported down failed for that reason; it says nothing
        against the path's other links, so it must not make them suspects."""
        return set(self.denied) | self._pending | set(self._reported)

    def end_host_pairs(self) -> set[frozenset[str]]:
        """Host pairs (a reporting host's name and its peer's NIC address) whose every plane
        has failing evidence: an end host's trouble, not a link's (module docstring)."""
        if self.topology.planes < 2:
            return set()
        planes: dict[frozenset[str], set[int]] = {}
        for key, _ in self._failing_now():
            planes.setdefault(_pair(key), set()).add(ev_unpack(key[2])[0])
        return {pair for pair, seen in planes.items() if len(seen) >= self.topology.planes}

    def _note_end_hosts(self, current: set[frozenset[str]], now_ns: int) -> None:
        """Put each newly set-aside host pair of ``current`` on the timeline, once while its
        evidence lasts."""
        for pair in sorted(current - self._end_hosts_noted, key=sorted):
            a, b = sorted(pair)
            self.timeline.add("end_host", now_ns, (), f"every plane between {a} and {b} failing alike: "
                              "an end host's trouble (slow or stopped), not a link's; not localised")
        self._end_hosts_noted = current

    def _note_arrivals(self, now_ns: int) -> None:
        """Put each host pair whose failing paths arrivals newly explain on the timeline, once
        while that lasts."""
        current = self.arrivals_explain()
        for pair in sorted(current - self._arrivals_noted, key=sorted):
            a, b = sorted(pair)
            self.timeline.add("arrivals", now_ns, (), f"failing paths between {a} and {b} carried packets to "
                              "their receiver after they failed: a slow host's timeouts, not a link's; not localised")
        self._arrivals_noted = current

    def quiet(self) -> bool:
        """Whether no decision can change with time alone: no failure evidence is held (so no
        episode runs) and nothing decided waits. Then only new inputs (events, reports,
        probe results) can lead to an action."""
        return not self._bad and self._episode is None and not self._pending

    def decide(self, now_ns: int) -> list[Action]:
        """The actions due at ``now_ns``: lifts first, then a deny when an episode settled."""
        actions = self._reported_actions(now_ns)
        lift = tuple(sorted(link for link, n in self._streak.items()
                            if n >= self.lift_successes and link in self.denied and link not in self._pending
                            and link not in self._reported and link not in self._reported_up))
        if lift:
            actions.append(Action("lift", lift))
        self._bad = {k: e for k, e in self._bad.items() if now_ns - e.time_ns <= self.evidence_ttl_ns}
        end_hosts = self.end_host_pairs()
        evidence = self._unexplained(end_hosts)
        failing = [e.links for _, e in evidence]
        ports_down = [link for link in self._ports_down if link not in self.denied]
        self._note_end_hosts(end_hosts, now_ns)
        self._note_arrivals(now_ns)
        if not failing and not ports_down:
            self._episode = None
            self.withheld.clear()  # a new episode judges its evidence afresh
            return actions
        if self._episode is None:
            self._episode = now_ns
        if now_ns - self._episode < self.settle_ns and not ports_down:
            return actions
        if self.arrival_polls and now_ns - self._episode < self.ambiguous_wait_ns and not ports_down \
                and self._unpolled(evidence):
            return actions
        loc = localise(failing, [e.links for e in self._good.values()])
        self.last = loc
        waiting = now_ns - self._episode < self.ambiguous_wait_ns and not ports_down
        if loc.ambiguous and waiting:
            return actions
        support = _support(loc.suspects, evidence)
        weak = {link for link, evs in support.items() if len(evs) < self.min_support}
        one_pair = {link for link in loc.suspects if is_host_link(link)
                    and len({_pair(k) for k, e in evidence if link in e.links}) < 2}
        doubtful = set(loc.suspects) if loc.ambiguous else weak
        unconfirmed = {link for link in doubtful if self._probes_failing_ns(link) < self.probe_confirm_ns}
        deny = self._guarded(loc, ports_down, now_ns, weak, waiting, one_pair, unconfirmed)
        if deny:
            if loc.ambiguous or weak.intersection(deny):
                self._suspected.update({link: list(failing) for link in deny})
            probed = {link: self._probes_failing_ns(link) for link in doubtful.intersection(deny)}
            self.timeline.add("localised", now_ns, deny, _why(loc, deny, support, evidence, probed))
            self._pending |= set(deny)
            actions.append(Action("deny", deny, loc))
        return actions

    def _reported_actions(self, now_ns: int) -> list[Action]:
        """Deny the links reported down that are not denied yet; lift those reported up."""
        actions = []
        up = tuple(sorted(link for link in self._reported_up if link in self.denied and link not in self._pending))
        if up:
            actions.append(Action("lift", up, reason=f"{REPORT_REASON}: up (" + ", ".join(
                sorted({self._reported_up[link] for link in up})) + ")"))
        explained = self._explained_suspects()
        if explained:
            actions.append(Action("lift", explained, reason=f"{REPORT_REASON}: down (" + ", ".join(
                sorted({self._reported[r] for r in self._reported})) + ") explains its evidence"))
        down = tuple(sorted(link for link in self._reported if link not in self.denied and link not in self._pending))
        if down:
            why = f"{REPORT_REASON}: down (" + ", ".join(sorted({self._reported[link] for link in down})) + ")"
            self.timeline.add("localised", now_ns, down, why)
            self._pending |= set(down)
            actions.append(Action("deny", down, reason=why))
        return actions

    def _explained_suspects(self) -> tuple[str, ...]:
        """Links denied as suspects of an ambiguous localisation whose every failing path also
        crosses a link since reported down: the report explains that evidence, so they are
        innocent. Hosts often cannot clear them by probes, since every path they use across one
        crosses the other too."""
        reported = set(self._reported)
        return tuple(sorted(link for link, sets in self._suspected.items()
                            if link in self.denied and link not in self._pending and link not in reported
                            and all(s & (reported - {link}) for s in sets)))

    def _guarded(self, loc: Localisation, ports_down: list[str], now_ns: int, weak: AbstractSet[str] = frozenset(),
                 waiting: bool = False, one_pair: AbstractSet[str] = frozenset(),
                 unconfirmed: AbstractSet[str] = frozenset()) -> tuple[str, ...]:
        """The links to deny now: ports reported down, plus the suspects that neither the
        host-link rules (``one_pair``: host links only one host pair's traffic names), the
        weak-evidence rule (``weak`` suspects wait while ``waiting``), the probe rule
        (``unconfirmed``: weak or ambiguous suspects whose probes have not failed long
        enough) nor the connectivity guard withholds (module docstring)."""
        wanted = set(loc.suspects) - self.denied.keys() - self._pending
        if waiting:
            wanted -= weak
        held = {link: "host link on ambiguous evidence (hosts report their own ports)"
                for link in wanted if loc.ambiguous and is_host_link(link)}
        held |= {link: "host link named by one host pair's traffic only (hosts report their own ports)"
                 for link in wanted & one_pair if link not in held}
        held |= {link: "weak or ambiguous evidence, and probes across it have not failed "
                       f"for {self.probe_confirm_ns / 1e6:g} ms (a busy host's timeouts recover by probes)"
                 for link in wanted & unconfirmed if link not in held}
        wanted -= held.keys()
        ports = set(ports_down) - self._pending
        base = set(self.denied) | self._pending | ports
        # Links in more candidate sets first: the guard keeps the likeliest culprits.
        order = sorted(wanted, key=lambda link: (-sum(link in c for c in loc.candidates), link))
        deny, cut = safe_subset(self.topology, base, order)
        held |= {link: "denying it would leave a host pair without a path" for link in cut}
        news = {link: why for link, why in held.items() if self.withheld.get(link) != why}
        self.withheld = held
        if news:  # decide() runs every tick: say it once per link and reason
            detail = "; ".join(f"{link}: {why}" for link, why in sorted(news.items()))
            self.timeline.add("withheld", now_ns, tuple(sorted(news)), detail)
            log.warning("not denying %s", detail)
        return tuple(sorted(ports | set(deny)))

    def done(self, action: Action, now_ns: int, hosts: int) -> None:
        """``action`` is in effect on all ``hosts`` hosts (the controller carried it out)."""
        if action.kind == "deny":
            for link in action.links:
                self.denied[link] = now_ns
                self._streak[link] = 0
                self._pending.discard(link)
            self._episode = None
            self.timeline.add("deny_all_hosts", now_ns, action.links,
                              f"DENY on all {hosts} hosts" + (f" ({action.reason})" if action.reason else ""))
            return
        for link in action.links:
            self.denied.pop(link, None)
            self._suspected.pop(link, None)
            self._streak.pop(link, None)
            self._ports_down.pop(link, None)
            self._reported_up.pop(link, None)
        self.withheld.clear()  # with fewer links denied, a withheld one may be safe now
        self._bad = {k: e for k, e in self._bad.items() if not (e.links & set(action.links))}
        self.timeline.add("lifted", now_ns, action.links,
                          f"{action.reason or 'probes succeeded'}; lifted on all {hosts} hosts")

    def failed(self, action: Action) -> None:
        """``action`` could not be carried out everywhere; it will be decided again."""
        self._pending.difference_update(action.links)
        if action.kind == "lift":
            for link in action.links:
                self._streak[link] = 0

    def links_down(self) -> list[str]:
        """Links believed down: denied, being denied, or reported down by a host."""
        return sorted(set(self.denied) | self._pending | set(self._ports_down) | set(self._reported))


def _support(suspects: frozenset[str], evidence: list[tuple[tuple, _Evidence]]) -> dict[str, set[tuple]]:
    """For each suspect, the failing EVs ``(host, peer, EV)`` that name it alone: their path
    crosses it and no other suspect."""
    out: dict[str, set[tuple]] = {link: set() for link in suspects}
    for key, e in evidence:
        named = e.links & suspects
        if len(named) == 1:
            (link,) = named
            out[link] |= {(key[0], key[1], ev) for ev in e.evs}
    return out


def _why(loc: Localisation, deny: tuple[str, ...], support: dict[str, set[tuple]],
         evidence: list[tuple[tuple, _Evidence]], probed: dict[str, int] | None = None) -> str:
    """The timeline's reason for denying ``deny``: the answer, then for each link the failing
    EVs that name it alone (a unique answer) or that cross it (an ambiguous one), and for a
    weak or ambiguous suspect how long probes across it failed (``probed``, ns)."""
    parts = [loc.describe()]
    probed = probed or {}
    for link in deny:
        if link not in support:  # a port its host reported down: a fact, not part of the answer
            continue
        if loc.ambiguous:
            text = _support_text(link, _support(frozenset({link}), evidence)[link], "cross it")
        else:
            text = _support_text(link, support[link])
        if link in probed:
            text += f", probes across it failed for {probed[link] / 1e6:.0f} ms"
        parts.append(text)
    return "; ".join(parts)


def _support_text(link: str, evs: set[tuple], how: str = "name it alone") -> str:
    """Why the evidence names ``link``: how many failing EVs of which hosts ``how`` (name it
    alone, or for an ambiguous answer's suspect, cross it)."""
    hosts = sorted({h for h, _, _ in evs})
    return (f"{link}: {len(evs)} failing EV{'s' if len(evs) != 1 else ''}"
            + (f" of {', '.join(hosts)}" if hosts else "") + f" {how}, no good path crosses it")


def _pair(key: tuple) -> frozenset[str]:
    """The host pair of an evidence key ``(host name, peer NIC address, EV path bits)``. A host
    is named by its name on one end and its NIC address on the other, so the two directions of
    one pair are two pairs here; each is judged on its own evidence."""
    return frozenset(key[:2])


UP, DOWN = "up", "down"
"""Directions of a link: toward the T1 (up) or toward the host (down)."""


def _directed_links(topo: Topology, src, dst, plane: int, t1: int) -> frozenset[tuple[str, str]]:
    """The (link name, direction) pairs of the path from host ``src`` to host ``dst`` on
    ``plane`` through ``t1`` (design 3.3; T1 ignored within one leaf): the source's host link
    and its leaf's uplink up, the destination leaf's uplink and host link down.

    Raises:
        TopologyError: the fabric lacks the plane or T1.
    """
    if plane >= topo.planes:
        raise TopologyError(f"plane {plane} outside the fabric's 0..{topo.planes - 1}")
    out = {(host_link_name(plane, src.leaf, src.downlink), UP), (host_link_name(plane, dst.leaf, dst.downlink), DOWN)}
    if src.leaf != dst.leaf:
        if t1 >= topo.t1_per_plane[plane]:
            raise TopologyError(f"plane {plane} has no T1 {t1}")
        out |= {(t1_link_name(plane, src.leaf, t1), UP), (t1_link_name(plane, dst.leaf, t1), DOWN)}
    return frozenset(out)
