"""The agent's sweep of one peer's EV set (design section 5): RTO retirement, replacement by
a backup EV of the same plane, and SKIP expiry. Mixed into :class:`~mrckit.host.agent.HostAgent`."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Container

from ..wire.addressing import parse_nic_address
from ..wire.ev import ev_plane, ev_t1, ev_unpack
from .core import AgentCore
from .events import make_event
from .maps import EvSet, EvSlot, Reason
from .state import BAD, DENIED, GOOD, SKIP, PeerState, ProbeTarget, went_bad


class SweepMixin(AgentCore):
    """EV state decisions of one sweep; needs the agent's ``cfg``, ``dp``, ``counters``,
    ``_port_up``, ``_publish`` and ``_probe_peer``."""

    def _sweep_peer(self, peer: ipaddress.IPv6Address, st: PeerState, evset: EvSet, now: int,
                    budget: list[int]) -> None:
        settings = self._config().settings
        if settings.pinned_ev:
            return  # pinned-EV mode: each QP keeps its one EV, whatever happens to it
        rto = settings.rto_ns
        n = evset.n
        slots = evset.slots
        changed: set[int] = set()
        # The latest send time known to be acked, per EV: a sibling acked for a packet sent
        # after this EV's oldest unacked one is the evidence that this one was lost.
        latest_sent = sorted((slots[i].acked_sent_ns for i in range(n)), reverse=True)[:2]
        for i in range(n):
            s = slots[i]
            plane = ev_plane(s.ev)
            dead = self._plane_dead(st, plane)
            # A lost SACK must not retire a working EV, so it takes several unacked sends.
            if s.state == GOOD and s.pending_ns and now - s.pending_ns > rto and \
                    s.unacked_tx >= settings.min_unacked:
                # Paths reorder (other planes, other queues), so the sibling's packet must have
                # left at least half an RTO after this EV's oldest unacked one.
                other = latest_sent[1] if latest_sent[0] == s.acked_sent_ns else latest_sent[0]
                if other > s.pending_ns + rto // 2:
                    self._set_state(peer, s, BAD, Reason.RTO_TIMEOUT, now, evset)
                    changed.add(i)
                    changed |= self._retire_siblings(peer, evset, i, now)
            if s.state == BAD and not dead and self._replace(peer, st, s, now):
                changed.add(i)
            elif s.state == SKIP and s.last_tx_ns and now - max(s.last_tx_ns, s.last_ack_ns) > rto:
                # An idle peer never finishes its rotation; a SKIP also ends after an RTO.
                self._set_state(peer, s, GOOD, Reason.SKIP_EXPIRED, now)
                changed.add(i)
        changed |= self._keep_floor(peer, evset, now)
        for ev, last in self._dataplane().merge_slots(peer, evset, changed).items():
            self._retired_counts(st, ev, last)
        self._probe_peer(peer, st, evset, now, budget)

    @staticmethod
    def _retired_counts(st: PeerState, ev: int, last) -> None:
        """Keep the dataplane's last counts of ``ev``, just replaced: the agent's read, taken
        before it decided, misses what was sent on the EV since."""
        st.tx_totals[ev] = (last.tx_packets, last.tx_bytes)
        target = st.retired.get(ev)
        if target is not None:
            target.tx_packets, target.last_tx_ns, target.acked = last.tx_packets, last.last_tx_ns, last.acked

    def _retire_siblings(self, peer: ipaddress.IPv6Address, evset: EvSet, index: int, now: int) -> set[int]:
        """Path-aware retirement after an RTO: the GOOD/SKIP EVs on the path of slot ``index``
        toward ``peer`` that have a packet unacked for an RTO too go ASSUMED_BAD with it
        (reason PATH_LOSS); a sibling acked since shows the path still carries packets.
        Returns the slots changed."""
        cfg = self._config()
        if not cfg.path_retire:
            return set()
        out = set()
        rto = cfg.settings.rto_ns
        for j in path_siblings(evset, index, self._same_leaf(peer)):
            s = evset.slots[j]
            if s.state in (GOOD, SKIP) and s.pending_ns and now - s.pending_ns > rto:
                self._set_state(peer, s, BAD, Reason.PATH_LOSS, now, evset)
                out.add(j)
        return out

    def _same_leaf(self, peer: ipaddress.IPv6Address) -> bool:
        return parse_nic_address(peer).leaf == self._config().leaf

    def _keep_floor(self, peer: ipaddress.IPv6Address, evset: EvSet, now: int) -> set[int]:
        """The ev_min_active floor, as the dataplane keeps it after a LOSS: while fewer than
        the floor are GOOD or SKIP, the least recently failed ASSUMED_BAD EV comes back GOOD
        (reason FLOOR). Returns the slots changed."""
        floor = self._config().settings.min_active
        slots = [evset.slots[i] for i in range(evset.n)]
        active = sum(1 for s in slots if s.state in (GOOD, SKIP))
        bad = sorted((s.bad_ns, i) for i, s in enumerate(slots) if s.state == BAD)
        out = set()
        for _, i in bad[:max(floor - active, 0)]:
            slots[i].pending_ns = slots[i].unacked_tx = 0
            self._set_state(peer, slots[i], GOOD, Reason.FLOOR, now)
            out.add(i)
        return out

    def _plane_dead(self, st: PeerState, plane: int) -> bool:
        return not self._port_up.get(plane, False) or plane in st.dead_planes

    def _set_state(self, peer: ipaddress.IPv6Address, slot: EvSlot, state: int, reason: Reason, now: int,
                   evset: EvSet | None = None, **extra: object) -> None:
        """Set ``slot`` (of ``evset``, the set in hand, when given) to ``state`` for ``reason``
        and publish the change."""
        old = slot.state
        slot.state, slot.reason, slot.skip_until_rot = state, min(int(reason), 255), 0
        if went_bad(old, state):
            slot.bad_ns = now
        self._publish(make_event(str(peer), slot.ev, old, state, reason.name, ts_ns=now,
                                 plane=ev_plane(slot.ev), **extra), evset)

    def _replace(self, peer: ipaddress.IPv6Address, st: PeerState, slot: EvSlot, now: int) -> bool:
        """Retire the ASSUMED_BAD EV of ``slot`` and put a backup EV of the same plane in."""
        plane, t1, _ = ev_unpack(slot.ev)
        pool = st.backups.get(plane, [])
        if not pool:
            return False
        # ecmp mode: the T1 field names no spine, so any backup of the plane will do.
        pick = pool[0] if self._config().opaque_evs else _pick_backup(st, plane, t1, pool)
        if pick is None:
            return False
        pool.remove(pick)
        old = slot.ev
        st.retired[old] = ProbeTarget(tx_packets=slot.tx_packets, last_tx_ns=slot.last_tx_ns,
                                      acked=slot.acked)
        st.probes.pop(old, None)
        slot.ev, slot.state, slot.reason = pick, GOOD, int(Reason.REPLACED)
        st.tx_totals[old] = (slot.tx_packets, slot.tx_bytes)
        for name in ("tx_packets", "tx_bytes", "last_tx_ns", "pending_ns", "last_ack_ns", "acked_sent_ns",
                     "unacked_tx", "acked",
                     "skips", "nacks", "skip_until_rot"):
            setattr(slot, name, 0)
        # An EV that comes back (retired, probed back, reused) resumes its own tx counts, so
        # they never go down for a reader that follows them (the demo's per-path counts).
        slot.tx_packets, slot.tx_bytes = st.tx_totals.get(pick, (0, 0))
        self.counters["replacements"] += 1
        self._publish(make_event(str(peer), old, BAD, BAD, Reason.REPLACED.name, ts_ns=now,
                                 replaced_by=pick, plane=plane))
        return True


def sweep_due(evset: EvSet, st: PeerState | None, now: int, rto: int, pinned: bool = False) -> int | None:
    """When the agent's sweep can next change a verdict on the EV set of one peer by the
    passing of time alone: a CLOCK_MONOTONIC time in ns (``now`` when it is due already), or
    None when only a send, an ack or the API can (the agent may then block). Probes have
    their own schedule (:func:`probe_due`). ``rto`` is the agent's RTO in ns. Due:

    - now, while an EV is ASSUMED_BAD or DENIED and not probed yet (``st.probes``): the sweep
      replaces or probes it;
    - at ``pending_ns + rto`` for a GOOD EV with a send unacked for at most ``rto``: its RTO
      verdict cannot come sooner (one unacked for longer was judged by an earlier sweep; only
      a later ack can change that, and an ack wakes an idle agent);
    - at ``max(last_tx_ns, last_ack_ns) + rto`` for a SKIP EV with a send recorded: a SKIP ends
      after an RTO without traffic.

    Pinned-EV mode has no sweep, so only probes count there.
    """
    if pinned:
        return None
    probed = st.probes if st is not None else {}
    due = None
    for i in range(evset.n):
        s = evset.slots[i]
        if s.state in (BAD, DENIED):
            if s.ev not in probed:
                return now
            continue
        t = None
        if s.state == GOOD and s.pending_ns and now - s.pending_ns <= rto:
            t = s.pending_ns + rto
        elif s.state == SKIP and s.last_tx_ns:
            t = max(s.last_tx_ns, s.last_ack_ns, now - rto) + rto
        if t is not None and (due is None or t < due):
            due = t
    return due


def probe_due(st: PeerState, interval_of: Callable[[int], int], expiry: int, planes_up: Container[int],
              path_of: Callable[[int], object] | None = None) -> int | None:
    """When the agent can next probe one of the EVs it probes toward a peer (``st.retired``
    and ``st.probes``), in ns of CLOCK_MONOTONIC, or None when it can probe none: the EV's
    probe interval (``interval_of(ev)``, ns) after its last probe, or, while that probe
    awaits its answer, ``expiry`` (ns) after it, when the probe counts as lost. EVs whose
    plane is not in ``planes_up`` wait: a down local port cannot carry a probe, and its
    coming up sweeps at once. ``path_of(ev)``, when given, names the path of an EV
    (:func:`path_key`): the EVs of one path share their probes (``ProbeMixin._one_per_path``),
    so a path is due once none of its EVs is busy. A time in the past means now."""
    busy: dict[object, int] = {}
    for ev, t in (*st.retired.items(), *st.probes.items()):
        if ev_plane(ev) not in planes_up:
            continue
        until = t.last_probe_ns + (expiry if t.outstanding is not None else interval_of(ev))
        key = path_of(ev) if path_of else ev
        busy[key] = max(busy.get(key, until), until)
    return min(busy.values(), default=None)


def path_key(ev: int, same_leaf: bool) -> tuple[int, int]:
    """What names the path of ``ev`` toward a peer (design 3.3): (plane, T1), or, toward a
    peer on this host's leaf (no T1 on the path), (plane, 0). EVs with one key share a path."""
    return (ev_plane(ev), 0 if same_leaf else ev_t1(ev))


def path_siblings(evset: EvSet, index: int, same_leaf: bool) -> list[int]:
    """The other slots of ``evset`` whose EVs take the path of slot ``index``'s EV toward the
    set's peer (:func:`path_key`)."""
    key = path_key(evset.slots[index].ev, same_leaf)
    return [j for j in range(evset.n) if j != index and path_key(evset.slots[j].ev, same_leaf) == key]


OWN_SPINE_WEIGHT = 4
"""The spine whose EV just failed counts as this many retirements more (ours): loss retirement
(LOSS) also retires a healthy spine's EV now and then, for a single drop, so a few retirements
elsewhere must not send the replacement back toward the spine that is failing right now."""


def _pick_backup(st: PeerState, plane: int, failed_t1: int, pool: list[int]) -> int | None:
    """The backup EV to replace a failed EV on spine ``failed_t1`` of ``plane``: one on
    another spine (an EV on the same plane and spine takes exactly the same path, design 3.3),
    on the spine with the fewest retired EVs toward this peer, and less suspect than the
    failing spine itself (its retired EVs plus :data:`OWN_SPINE_WEIGHT`). None when no backup
    qualifies: the EV then stays ASSUMED_BAD in its slot and is probed there. Ties keep the
    pool's order."""
    retired: dict[int, int] = {}  # T1 -> EVs retired on it
    for ev in st.retired:
        if ev_plane(ev) == plane:
            retired[ev_t1(ev)] = retired.get(ev_t1(ev), 0) + 1
    limit = retired.get(failed_t1, 0) + OWN_SPINE_WEIGHT
    best, best_score = None, limit
    for ev in pool:
        t1 = ev_t1(ev)
        score = retired.get(t1, 0)
        if t1 != failed_t1 and score < best_score:
            best, best_score = ev, score
    return best
