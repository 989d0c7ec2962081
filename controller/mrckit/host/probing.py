"""The agent's probing and endpoint operations (design section 5): EV probes on the EV's own
path, answers to the peers' probes, and PORT_STATUS_UPDATE received from peers. Mixed into
:class:`~mrckit.host.agent.HostAgent`."""

from __future__ import annotations

import ipaddress
import logging
import socket
import time
from collections.abc import Callable

from ..wire.addressing import HostLocation, parse_nic_address, path_links
from ..wire.constants import EpOp, EpStatus
from ..wire.ev import SALT_MASK, ev_from_flowinfo, ev_pack, ev_plane, ev_unpack
from ..wire.headers import EpRequest, EpResponse, ep_request, ep_response, parse_ep, timestamp_units
from . import probe as P
from .config import _mac
from .core import AgentCore
from .events import make_event
from .maps import EvSet, Reason
from .state import BAD, DENIED, GOOD, SKIP, PeerState, ProbeTarget
from .sweep import path_key, path_siblings

PROBE_REPORT_NS = 100_000_000
"""Least time (ns) between two published probe results of one path that say the same."""

LOSS_REASONS = (Reason.LOSS, Reason.PATH_LOSS, Reason.RTO_TIMEOUT)
"""The reasons of an ASSUMED_BAD EV that a probe answer on its path undoes for the whole path."""

log = logging.getLogger("mrckit.host")
IPV6_FLOWINFO = 11       # linux/in6.h: deliver the flow label (the EV's low half) as a cmsg


class ProbeMixin(AgentCore):
    """Probes, EP_REQ/EP_RESP handling; needs the agent's ``cfg``, ``dp``, ``counters``,
    ``peers``, ``_udp``, ``_raw``, ``_rng``, ``_outstanding``, ``_port_up``, ``_denied_links``."""

    # Declared here, not in AgentCore: mypy loses a protocol attribute's type where a
    # subclass assigns it (python/mypy#19862), and only probing uses it.
    _next_probe_id: int  # the id of the next EV_PROBE, 1..0xFFFF

    def _probe_peer(self, peer: ipaddress.IPv6Address, st: PeerState, evset: EvSet, now: int,
                    budget: list[int]) -> None:
        crosses_denied = self._denied_check(peer)
        interval_of = self._interval_of(crosses_denied)
        targets = self._one_per_path(peer, list(st.retired.items()), now, interval_of)
        in_set = set()
        lost: list[tuple[int, ProbeTarget]] = []     # in the set, ASSUMED_BAD for a loss
        watched: list[tuple[int, ProbeTarget]] = []  # DENIED, or across a denied link: reports only
        for i in range(evset.n):
            s = evset.slots[i]
            if s.state in (BAD, DENIED) or (s.state == GOOD and crosses_denied(s.ev)):
                in_set.add(s.ev)
                pair = (s.ev, st.probes.setdefault(s.ev, ProbeTarget()))
                if s.state == BAD:
                    (lost if s.reason in LOSS_REASONS else targets).append(pair)
                else:
                    watched.append(pair)
        targets += (self._one_per_path(peer, lost, now, interval_of)
                    + self._one_per_path(peer, watched, now, interval_of))
        for ev in [ev for ev in st.probes if ev not in in_set]:
            del st.probes[ev]
        for ev, target in targets:
            if budget[0] <= 0:
                return
            if target.busy(now, interval_of(ev)):
                continue
            if not self._port_up.get(ev_plane(ev), False):
                continue  # a down local port cannot carry the probe
            if self._send_probe(peer, ev, target, now):
                budget[0] -= 1

    def _one_per_path(self, peer: ipaddress.IPv6Address, group: list[tuple[int, ProbeTarget]],
                      now: int, interval_of: Callable[[int], int] | None = None) -> list[tuple[int, ProbeTarget]]:
        """Which of ``group`` ((EV, target) pairs whose probes say the same of their path:
        the retired EVs, the set's EVs retired for a loss, or the set's EVs DENIED or across a
        denied link) to consider probing toward ``peer``: all, or, when paths are shared, the
        first of each path unless one of the path's is probed already or was within the probe
        interval. Paths are shared with path-aware retirement (SRv6 mode), where the EVs of
        one path (:func:`~mrckit.host.sweep.path_key`) take the same links. A path retired or
        denied whole (about 32 EVs) then costs one probe per interval, not 32."""
        path_of = self._path_of(peer)
        if path_of is None:
            return group
        interval_of = interval_of or self._interval_of(self._denied_check(peer))
        busy = {path_of(ev) for ev, t in group if t.busy(now, interval_of(ev))}
        out = []
        for ev, t in group:
            key = path_of(ev)
            if key not in busy:
                busy.add(key)
                out.append((ev, t))
        return out

    def _interval_of(self, crosses_denied: Callable[[int], bool]) -> Callable[[int], int]:
        """The probe interval of an EV (ns): ``probe_interval_ns``, or :data:`PROBE_REPORT_NS`
        when its path crosses a denied link (``crosses_denied``, as :meth:`_denied_check`
        gives it).
        The controller denied that link: it lifts the denial on a link report or on the
        probes' results, which are published at most every ``PROBE_REPORT_NS`` per path
        anyway, so probing faster would only cost the agent a sweep per probe."""
        interval = self._config().settings.probe_interval_ns
        slow = max(interval, PROBE_REPORT_NS)
        return lambda ev: slow if crosses_denied(ev) else interval

    def _denied_check(self, peer: ipaddress.IPv6Address) -> Callable[[int], bool]:
        """:meth:`_crosses_denied` toward ``peer`` for one pass over its set, worked out once
        per path (the EV without its salt): a set holds about 128 EVs on a few paths."""
        if not self._denied_links:
            return lambda ev: False
        memo: dict[int, bool] = {}

        def crosses(ev: int) -> bool:
            path = ev & ~SALT_MASK
            if path not in memo:
                memo[path] = self._crosses_denied(peer, ev)
            return memo[path]
        return crosses

    def _crosses_denied(self, peer: ipaddress.IPv6Address, ev: int) -> bool:
        if not self._denied_links:
            return False
        return bool(self._links_of(peer, ev) & self._denied_links)

    def _links_of(self, peer: ipaddress.IPv6Address, ev: int) -> frozenset[str]:
        """The link names on the path of ``ev`` toward ``peer`` (design 3.3); none in ecmp
        mode, where the switches hash the EV and its path is unknown to the host."""
        cfg = self._config()
        if cfg.opaque_evs:
            return frozenset()
        plane, t1, _ = ev_unpack(ev)
        return path_links(plane, t1, HostLocation(cfg.leaf, cfg.downlink), parse_nic_address(peer))

    def _send_probe(self, peer: ipaddress.IPv6Address, ev: int, target: ProbeTarget, now: int) -> bool:
        pid = self._next_probe_id
        self._next_probe_id = pid % 0xFFFF + 1
        plane, t1, _ = ev_unpack(ev)
        resp_ev = ev_pack(plane, t1, self._rng.randint(1, SALT_MASK))
        l4 = ep_request(EpOp.EV_PROBE, pid, self._port_mask(), resp_ev,
                        timestamp_units(time.monotonic_ns()))
        if not self._send_frame(peer, ev, l4):
            return False
        target.last_probe_ns, target.outstanding = now, pid
        self._outstanding[pid] = (peer, ev, now)
        self.counters["probes_sent"] += 1
        return True

    def _send_frame(self, peer: ipaddress.IPv6Address, ev: int, l4: bytes) -> bool:
        cfg, plane = self._config(), ev_plane(ev)
        port = next((p for p in cfg.ports if p.plane == plane), None)
        raw = self._raw.get(plane)
        if port is None or raw is None:
            return False
        view = P.PortView(_mac(port.mac), _mac(port.neighbor_mac), port.address)
        if cfg.opaque_evs:  # ecmp mode: the packet as tc egress sends it there, hashed like data
            frame = P.plain_frame(view, cfg.nic_address, ipaddress.IPv6Address(peer), ev, l4)
        else:
            loc = parse_nic_address(peer)
            frame = P.encapsulated_frame(view, cfg.locator, cfg.leaf, cfg.nic_address,
                                         ipaddress.IPv6Address(peer), loc.leaf, loc.downlink, ev, l4)
        try:
            raw.send(frame)
        except OSError as exc:  # a down port refuses: ENETDOWN
            self.counters["send_errors"] += 1
            log.debug("send on plane %d: %s", plane, exc)
            return False
        return True

    def _probe_expiry(self) -> int:
        """How long (ns) a probe waits for its answer before it counts as lost."""
        settings = self._config().settings
        return max(settings.rto_ns, settings.probe_interval_ns)

    def _path_of(self, peer: ipaddress.IPv6Address) -> Callable[[int], object] | None:
        """What names an EV's path toward ``peer`` when the EVs of one path share their
        probes (path-aware retirement, :meth:`_one_per_path`), else None (each EV its own)."""
        if not self._config().path_retire:
            return None
        same_leaf = self._same_leaf(peer)
        return lambda ev: path_key(ev, same_leaf)

    def _expire_probes(self, now: int) -> None:
        expiry = self._probe_expiry()
        for pid, (peer, ev, sent) in list(self._outstanding.items()):
            if now - sent > expiry:
                del self._outstanding[pid]
                self.counters["probes_lost"] += 1
                self._probe_result(peer, ev, ok=False, now=now)

    def _probe_result(self, peer: ipaddress.IPv6Address, ev: int, ok: bool, now: int) -> None:
        st = self.peers.get(peer)
        if st is None:
            return
        target = st.retired.get(ev) or st.probes.get(ev)
        if target is None:
            return
        target.outstanding = None
        target.streak = target.streak + 1 if ok else 0
        need = self._config().settings.probe_successes
        if ev in st.retired:
            if target.streak < need:
                self._report_probe(peer, st, ev, BAD, ok, now)
                return
            back = [ev]
            path_of = self._path_of(peer)
            if path_of is not None:  # the answers proved the path: its retired EVs come back
                back += [e for e in st.retired if e != ev and path_of(e) == path_of(ev)]
            for e in back:
                del st.retired[e]
                st.backups.setdefault(ev_plane(e), []).append(e)
                self._publish(make_event(str(peer), e, BAD, GOOD, Reason.PROBE_OK.name, ts_ns=now,
                                         plane=ev_plane(e), probe_ok=True))
            return
        self._probe_result_in_set(peer, st, ev, target, ok, now)

    def _probe_result_in_set(self, peer: ipaddress.IPv6Address, st: PeerState, ev: int, target: ProbeTarget,
                             ok: bool, now: int) -> None:
        dp = self._dataplane()
        evset = dp.peer_set(peer)
        if evset is None:
            return
        index = next((i for i in range(evset.n) if evset.slots[i].ev == ev), None)
        if index is None:
            return
        slot = evset.slots[index]
        if slot.state == BAD and target.streak >= self._config().settings.probe_successes:
            if self._plane_dead(st, ev_plane(ev)):
                return
            self._set_state(peer, slot, GOOD, Reason.PROBE_OK, now, probe_ok=True)
            st.probes.pop(ev, None)
            dp.merge_slots(peer, evset, {index} | self._path_back(peer, st, evset, index, now))
        elif slot.state in (BAD, DENIED) or (slot.state == GOOD and self._crosses_denied(peer, ev)):
            self._report_probe(peer, st, ev, slot.state, ok, now)

    def _report_probe(self, peer: ipaddress.IPv6Address, st: PeerState, ev: int, state: int, ok: bool,
                      now: int) -> None:
        """Publish a probe result (PROBE_RESULT) of a path that is retired (ASSUMED_BAD) or
        crosses a denied link: at once when the result of the EV's path changes, else at most
        once per :data:`PROBE_REPORT_NS` per path. The controller lifts a denied link on its
        successes, and denies a link that only weak or ambiguous evidence names once probes
        across it have failed for a while (docs/controller.md, "Probes confirm weak evidence").

        Every EV across a denied link is probed every probe interval (1 ms): one event per
        probe would be thousands a second per host, more than the controller, which needs
        each path's state and not each probe, can read on a busy machine; behind on its
        stream, it would lift a restored link seconds late, or never."""
        key = ev if self._config().opaque_evs else ev & ~SALT_MASK  # the path: plane and T1
        last = st.probe_reports.get(key)
        if last is not None and last[0] == ok and now - last[1] < PROBE_REPORT_NS:
            self.counters["probe_results_held"] += 1
            return
        st.probe_reports[key] = (ok, now)
        links = ",".join(sorted(self._links_of(peer, ev) & self._denied_links))
        self._publish(make_event(str(peer), ev, state, state, Reason.PROBE_RESULT.name,
                                 ts_ns=now, probe_ok=ok, plane=ev_plane(ev), link=links))


    def _path_back(self, peer: ipaddress.IPv6Address, st: PeerState, evset: EvSet, index: int,
                   now: int) -> set[int]:
        """Path-aware retirement: a probe answer on one EV proves its path, so the path's other
        EVs retired for loss (LOSS, PATH_LOSS, RTO_TIMEOUT) come back GOOD with it."""
        if not self._config().path_retire:
            return set()
        out: set[int] = set()
        for j in path_siblings(evset, index, self._same_leaf(peer)):
            s = evset.slots[j]
            if s.state == BAD and s.reason in LOSS_REASONS:
                s.pending_ns = s.unacked_tx = 0
                self._set_state(peer, s, GOOD, Reason.PROBE_OK, now, probe_ok=True)
                st.probes.pop(s.ev, None)
                out.add(j)
        return out

    def _receive(self, limit: int = 64) -> None:
        """Handle up to ``limit`` EP messages waiting on the agent's UDP socket."""
        if self._udp is None:
            return
        for _ in range(limit):
            try:
                data, anc, _flags, addr = self._udp.recvmsg(2048, socket.CMSG_SPACE(4))
            except BlockingIOError:
                return
            flow = 0
            for level, ctype, cdata in anc:
                if level == socket.IPPROTO_IPV6 and ctype == IPV6_FLOWINFO and len(cdata) >= 4:
                    flow = int.from_bytes(cdata[:4], "big")
            msg = parse_ep(data)
            peer = ipaddress.IPv6Address(addr[0].split("%")[0])
            req_ev = ev_from_flowinfo(flow, addr[1])
            if isinstance(msg, EpRequest):
                self._on_request(peer, msg, req_ev)
            elif isinstance(msg, EpResponse):
                self._on_response(peer, msg)
            else:
                self.counters["ep_malformed"] += 1

    def _on_request(self, peer: ipaddress.IPv6Address, req: EpRequest, req_ev: int) -> None:
        now = time.monotonic_ns()
        if req.op == EpOp.EV_PROBE:
            self.counters["probes_answered"] += 1
            l4 = ep_response(EpOp.EV_PROBE, EpStatus.OK, req.probe_id, req_ev, req.tx_timestamp,
                             timestamp_units(time.monotonic_ns() - now))
            self._send_frame(peer, req.resp_ev, l4)
        elif req.op == EpOp.PORT_STATUS_UPDATE:
            self.counters["port_status_received"] += 1
            self._on_port_status(peer, req.port_status_mask, now)

    def _on_response(self, peer: ipaddress.IPv6Address, resp: EpResponse) -> None:
        pending = self._outstanding.pop(resp.probe_id, None)
        if pending is None or pending[0] != peer or pending[1] != resp.req_ev:
            self.counters["probe_answers_unmatched"] += 1
            return
        self.counters["probes_ok"] += 1
        self._probe_result(peer, resp.req_ev, ok=resp.status == EpStatus.OK, now=time.monotonic_ns())

    def _on_port_status(self, peer: ipaddress.IPv6Address, mask: int, now: int) -> None:
        """A peer's ports changed: treat its down planes as ASSUMED_BAD toward it (design 5)."""
        st = self.peers.setdefault(peer, self._new_peer_state())
        dp = self._dataplane()
        evset = dp.peer_set(peer)
        planes = set(self._template().planes())
        down = {p for p in planes if not mask >> p & 1}
        st.dead_planes = down
        if evset is None:
            return
        changed: set[int] = set()
        for i in range(evset.n):
            s = evset.slots[i]
            if ev_plane(s.ev) in down and s.state in (GOOD, SKIP):
                self._set_state(peer, s, BAD, Reason.PEER_PORT_DOWN, now)
                changed.add(i)
        dp.merge_slots(peer, evset, changed)
