"""The host agent: one per host, owning that host's BPF maps (design section 5).

It provisions the EV sets, and its loop, every fraction of an RTO:
- drains the dataplane's EV events (SKIP, ASSUMED_BAD from feedback) and publishes them;
- follows the plane ports' link state; a port that goes down retires its plane's EVs at once
  and tells every live peer with an EP_REQ PORT_STATUS_UPDATE;
- retires an EV that sent since its last ack and saw no ack for an RTO while its siblings were
  acked, and replaces it with a backup EV of the same plane;
- probes ASSUMED_BAD and DENIED EVs (and EVs crossing a denied link) with EP_REQ EV_PROBE on the
  EV's own path; N consecutive answers make an ASSUMED_BAD EV GOOD again;
- answers the peers' probes with EP_RESP on the response EV they name.

Everything the API changes goes through :meth:`HostAgent.set_ev_denied`,
:meth:`HostAgent.set_link_denied`; reads through :meth:`HostAgent.stats` and
:meth:`HostAgent.ev_table`.
"""

from __future__ import annotations

import ipaddress
import logging
import random
import select
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from ..errors import MrcError
from ..wire.addressing import parse_link_name, parse_nic_address, path_da
from ..wire.constants import EpOp, EpStatus, EvState
from ..wire.ev import ev_pack, ev_unpack
from . import probe as P
from .config import AgentConfig, _mac
from .dataplane import HostDataplane, PortSetting
from .events import EventHub, EvEvent, make_event
from .evset import Template, build_template, fresh_ev
from .maps import EvSet, Reason, state_name

log = logging.getLogger("mrckit.host")

RTMGRP_LINK = 1          # linux/rtnetlink.h: link state change notifications
UDP_NO_CHECK6_RX = 102   # linux/udp.h: accept the zero UDP checksum of RoCEv2
IPV6_FLOWINFO = 11       # linux/in6.h: deliver the flow label (the EV's low half) as a cmsg
GOOD, SKIP, BAD, DENIED = (int(s) for s in EvState)


@dataclass
class ProbeTarget:
    """A probed EV of one peer: consecutive answers and when it was last probed."""

    streak: int = 0
    last_probe_ns: int = 0
    outstanding: int | None = None  # probe_id waiting for an answer
    tx_packets: int = 0             # retired EVs: the slot's counters when it was retired
    last_tx_ns: int = 0
    acked: int = 0


@dataclass
class PeerState:
    """What the agent keeps per live peer, beside the dataplane's EV set."""

    backups: dict[int, list[int]]
    retired: dict[int, ProbeTarget] = field(default_factory=dict)  # ASSUMED_BAD, out of the set
    probes: dict[int, ProbeTarget] = field(default_factory=dict)   # probed EVs still in the set
    dead_planes: set[int] = field(default_factory=set)             # from PORT_STATUS_UPDATE


@dataclass
class ConfigureResult:
    """What Configure did: XDP mode per port, template and backup sizes, warnings."""

    ports: list[tuple[str, int, str]]
    template_evs: int
    backup_evs: int
    warnings: list[str]


class HostAgent:
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
        self._ipr = None
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
        self.template = build_template(cfg.t1_counts(), s.ev_count, s.backups_per_plane,
                                       seed=s.seed or None)
        self._ifindex = {p.plane: _ifindex(p.ifname, cfg.name) for p in cfg.ports}
        _ifindex(cfg.nic_device, cfg.name)
        dp = self.dp = HostDataplane()
        dp.set_host(str(cfg.nic_address), cfg.locator, cfg.leaf, cfg.downlink,
                    max(p.plane for p in cfg.ports) + 1, s.agent_port)
        self._open_sockets(cfg)  # the link monitor first, so no change is missed
        self._port_up = {p.plane: _link_up(p.ifname) for p in cfg.ports}
        for p in cfg.ports:
            dp.set_port(PortSetting(p.plane, self._ifindex[p.plane], _mac(p.mac), _mac(p.neighbor_mac),
                                    p.address.packed, self._port_up[p.plane]))
        dp.set_template(self.template.active)
        warnings, ports = [], []
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
        return ConfigureResult(ports, len(self.template.active), backups, warnings)

    def _open_sockets(self, cfg: AgentConfig) -> None:
        udp = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        udp.setsockopt(socket.SOL_UDP, UDP_NO_CHECK6_RX, 1)
        udp.setsockopt(socket.IPPROTO_IPV6, IPV6_FLOWINFO, 1)
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
    def _loop(self) -> None:
        s = self.cfg.settings
        period = min(s.sweep_period_ns, s.probe_interval_ns) / 1e9
        next_sweep = time.monotonic()
        while not self._stop.is_set():
            fds = [self._udp, self._ipr]
            try:
                ready, _, _ = select.select(fds, [], [], max(0.0, next_sweep - time.monotonic()))
            except (OSError, ValueError):
                return  # closed under us
            try:
                with self._lock:
                    if self._udp in ready:
                        self._receive()
                    if self._ipr in ready:
                        self._link_messages()
                    if time.monotonic() >= next_sweep:
                        self.sweep()
                        next_sweep = time.monotonic() + period
            except Exception:  # keep the agent alive; the log says what went wrong
                if self._stop.is_set():
                    return
                log.exception("host agent loop")
                self.counters["loop_errors"] += 1

    def sweep(self, now: int | None = None) -> None:
        """One pass of the state machine (the loop calls it every ``sweep_period_ns``)."""
        with self._lock:
            if self.dp is None:
                return
            now = now or time.monotonic_ns()
            self._drain_dataplane_events()
            self._expire_probes(now)
            budget = [self.cfg.settings.max_probes_per_sweep]
            for peer, evset in list(self.dp.peer_sets()):
                st = self.peers.setdefault(peer, self._new_peer_state())
                self._sweep_peer(peer, st, evset, now, budget)
            self.counters["sweeps"] += 1

    def _new_peer_state(self) -> PeerState:
        return PeerState(backups={p: list(v) for p, v in self.template.backups.items()})

    def _drain_dataplane_events(self) -> None:
        for e in self.dp.poll_events():
            peer = str(ipaddress.IPv6Address(bytes(e.peer)))
            self._publish(make_event(peer, e.ev, e.old_state, e.new_state, Reason(e.reason).name,
                                     ts_ns=e.ts_ns, plane=e.ev >> 28))

    def _publish(self, event: EvEvent) -> None:
        self.counters[f"events_{event.reason.lower()}"] += 1
        self.events.publish(event)

    # ================================================================ sweep of one peer ==
    def _sweep_peer(self, peer, st: PeerState, evset: EvSet, now: int, budget: list[int]) -> None:
        rto = self.cfg.settings.rto_ns
        n = evset.n
        slots = evset.slots
        changed: set[int] = set()
        # The latest send time known to be acked, per EV: a sibling acked for a packet sent
        # after this EV's oldest unacked one is the evidence that this one was lost.
        latest_sent = sorted((slots[i].acked_sent_ns for i in range(n)), reverse=True)[:2]
        for i in range(n):
            s = slots[i]
            plane = s.ev >> 28
            dead = self._plane_dead(st, plane)
            # A lost SACK must not retire a working EV, so it takes several unacked sends.
            if s.state == GOOD and s.pending_ns and now - s.pending_ns > rto and \
                    s.unacked_tx >= self.cfg.settings.min_unacked:
                # Paths reorder (other planes, other queues), so the sibling's packet must have
                # left at least half an RTO after this EV's oldest unacked one.
                other = latest_sent[1] if latest_sent[0] == s.acked_sent_ns else latest_sent[0]
                if other > s.pending_ns + rto // 2:
                    self._set_state(peer, s, BAD, Reason.RTO_TIMEOUT, now)
                    changed.add(i)
            if s.state == BAD and not dead and self._replace(peer, st, s, now):
                changed.add(i)
            elif s.state == SKIP and s.last_tx_ns and now - max(s.last_tx_ns, s.last_ack_ns) > rto:
                # An idle peer never finishes its rotation; a SKIP also ends after an RTO.
                self._set_state(peer, s, GOOD, Reason.SKIP_EXPIRED, now)
                changed.add(i)
        self.dp.merge_slots(peer, evset, changed)
        self._probe_peer(peer, st, evset, now, budget)

    def _plane_dead(self, st: PeerState, plane: int) -> bool:
        return not self._port_up.get(plane, False) or plane in st.dead_planes

    def _set_state(self, peer, slot, state: int, reason: Reason, now: int, **extra) -> None:
        old = slot.state
        slot.state, slot.reason, slot.skip_until_rot = state, min(int(reason), 255), 0
        self._publish(make_event(str(peer), slot.ev, old, state, reason.name, ts_ns=now,
                                 plane=slot.ev >> 28, **extra))

    def _replace(self, peer, st: PeerState, slot, now: int) -> bool:
        """Retire the ASSUMED_BAD EV of ``slot`` and put a backup EV of the same plane in."""
        plane, t1, _ = ev_unpack(slot.ev)
        pool = st.backups.get(plane, [])
        if not pool:
            return False
        suspect = {t1} | {(ev >> 20) & 0xFF for ev in st.retired if ev >> 28 == plane}
        pick = next((ev for ev in pool if (ev >> 20) & 0xFF not in suspect), pool[0])
        pool.remove(pick)
        old = slot.ev
        st.retired[old] = ProbeTarget(tx_packets=slot.tx_packets, last_tx_ns=slot.last_tx_ns,
                                      acked=slot.acked)
        st.probes.pop(old, None)
        slot.ev, slot.state, slot.reason = pick, GOOD, int(Reason.REPLACED)
        for name in ("tx_packets", "tx_bytes", "last_tx_ns", "pending_ns", "last_ack_ns", "acked_sent_ns",
                     "unacked_tx", "acked",
                     "skips", "nacks", "skip_until_rot"):
            setattr(slot, name, 0)
        self.counters["replacements"] += 1
        self._publish(make_event(str(peer), old, BAD, BAD, Reason.REPLACED.name, ts_ns=now,
                                 replaced_by=pick, plane=plane))
        return True

    # ================================================================ probes =============
    def _probe_peer(self, peer, st: PeerState, evset: EvSet, now: int, budget: list[int]) -> None:
        interval = self.cfg.settings.probe_interval_ns
        targets: list[tuple[int, ProbeTarget]] = [(ev, t) for ev, t in st.retired.items()]
        in_set = set()
        for i in range(evset.n):
            s = evset.slots[i]
            if s.state in (BAD, DENIED) or (s.state == GOOD and self._crosses_denied(peer, s.ev)):
                in_set.add(s.ev)
                targets.append((s.ev, st.probes.setdefault(s.ev, ProbeTarget())))
        for ev in [ev for ev in st.probes if ev not in in_set]:
            del st.probes[ev]
        for ev, target in targets:
            if budget[0] <= 0:
                return
            if target.outstanding is not None or now - target.last_probe_ns < interval:
                continue
            if not self._port_up.get(ev >> 28, False):
                continue  # a down local port cannot carry the probe
            if self._send_probe(peer, ev, target, now):
                budget[0] -= 1

    def _crosses_denied(self, peer, ev: int) -> bool:
        if not self._denied_links:
            return False
        return bool(self._links_of(peer, ev) & self._denied_links)

    def _links_of(self, peer, ev: int) -> set[str]:
        """The link names on the path of ``ev`` toward ``peer`` (design 3.3)."""
        loc = parse_nic_address(peer)
        plane, t1, _ = ev_unpack(ev)
        cfg = self.cfg
        links = {f"p{plane}/t0-{cfg.leaf}/down-{cfg.downlink}", f"p{plane}/t0-{loc.leaf}/down-{loc.downlink}"}
        if loc.leaf != cfg.leaf:
            links |= {f"p{plane}/t0-{cfg.leaf}/t1-{t1}", f"p{plane}/t0-{loc.leaf}/t1-{t1}"}
        return links

    def _send_probe(self, peer, ev: int, target: ProbeTarget, now: int) -> bool:
        pid = self._next_probe_id
        self._next_probe_id = pid % 0xFFFF + 1
        plane, t1, _ = ev_unpack(ev)
        resp_ev = ev_pack(plane, t1, self._rng.randint(1, 0xFFFFF))
        l4 = P.ep_request(EpOp.EV_PROBE, pid, self._port_mask(), resp_ev)
        if not self._send_frame(peer, ev, l4):
            return False
        target.last_probe_ns, target.outstanding = now, pid
        self._outstanding[pid] = (peer, ev, now)
        self.counters["probes_sent"] += 1
        return True

    def _send_frame(self, peer, ev: int, l4: bytes) -> bool:
        cfg, plane = self.cfg, ev >> 28
        port = next((p for p in cfg.ports if p.plane == plane), None)
        raw = self._raw.get(plane)
        if port is None or raw is None:
            return False
        loc = parse_nic_address(peer)
        frame = P.encapsulated_frame(P.PortView(_mac(port.mac), _mac(port.neighbor_mac), port.address),
                                     cfg.locator, cfg.leaf, cfg.nic_address,
                                     ipaddress.IPv6Address(peer), loc.leaf, loc.downlink, ev, l4)
        try:
            raw.send(frame)
        except OSError as exc:  # a down port refuses: ENETDOWN
            self.counters["send_errors"] += 1
            log.debug("send on plane %d: %s", plane, exc)
            return False
        return True

    def _expire_probes(self, now: int) -> None:
        rto = self.cfg.settings.rto_ns
        for pid, (peer, ev, sent) in list(self._outstanding.items()):
            if now - sent > max(rto, self.cfg.settings.probe_interval_ns):
                del self._outstanding[pid]
                self.counters["probes_lost"] += 1
                self._probe_result(peer, ev, ok=False, now=now)

    def _probe_result(self, peer, ev: int, ok: bool, now: int) -> None:
        st = self.peers.get(peer)
        if st is None:
            return
        target = st.retired.get(ev) or st.probes.get(ev)
        if target is None:
            return
        target.outstanding = None
        target.streak = target.streak + 1 if ok else 0
        need = self.cfg.settings.probe_successes
        if ev in st.retired:
            if target.streak >= need:
                del st.retired[ev]
                st.backups.setdefault(ev >> 28, []).append(ev)
                self._publish(make_event(str(peer), ev, BAD, GOOD, Reason.PROBE_OK.name, ts_ns=now,
                                         plane=ev >> 28, probe_ok=True))
            return
        self._probe_result_in_set(peer, st, ev, target, ok, now)

    def _probe_result_in_set(self, peer, st: PeerState, ev: int, target: ProbeTarget, ok: bool,
                             now: int) -> None:
        evset = self.dp.peer_set(peer)
        if evset is None:
            return
        index = next((i for i in range(evset.n) if evset.slots[i].ev == ev), None)
        if index is None:
            return
        slot = evset.slots[index]
        if slot.state == BAD and target.streak >= self.cfg.settings.probe_successes:
            if self._plane_dead(st, ev >> 28):
                return
            self._set_state(peer, slot, GOOD, Reason.PROBE_OK, now, probe_ok=True)
            st.probes.pop(ev, None)
            self.dp.merge_slots(peer, evset, {index})
        elif slot.state == DENIED or (slot.state == GOOD and self._crosses_denied(peer, ev)):
            links = ",".join(sorted(self._links_of(peer, ev) & self._denied_links))
            self._publish(make_event(str(peer), ev, slot.state, slot.state, Reason.PROBE_RESULT.name,
                                     ts_ns=now, probe_ok=ok, plane=ev >> 28, link=links))

    # ================================================================ receive ============
    def _receive(self) -> None:
        for _ in range(64):
            try:
                data, anc, _flags, addr = self._udp.recvmsg(2048, socket.CMSG_SPACE(4))
            except BlockingIOError:
                return
            flow = 0
            for level, ctype, cdata in anc:
                if level == socket.IPPROTO_IPV6 and ctype == IPV6_FLOWINFO and len(cdata) >= 4:
                    flow = int.from_bytes(cdata[:4], "big") & 0xFFFF
            msg = P.parse_ep(data)
            peer = ipaddress.IPv6Address(addr[0].split("%")[0])
            req_ev = (addr[1] << 16) | flow
            if isinstance(msg, P.EpRequest):
                self._on_request(peer, msg, req_ev)
            elif isinstance(msg, P.EpResponse):
                self._on_response(peer, msg)
            else:
                self.counters["ep_malformed"] += 1

    def _on_request(self, peer, req: P.EpRequest, req_ev: int) -> None:
        now = time.monotonic_ns()
        if req.op == EpOp.EV_PROBE:
            self.counters["probes_answered"] += 1
            l4 = P.ep_response(EpOp.EV_PROBE, EpStatus.OK, req.probe_id, req_ev, req.tx_timestamp,
                               P.timestamp_units(time.monotonic_ns() - now))
            self._send_frame(peer, req.resp_ev, l4)
        elif req.op == EpOp.PORT_STATUS_UPDATE:
            self.counters["port_status_received"] += 1
            self._on_port_status(peer, req.port_status_mask, now)

    def _on_response(self, peer, resp: P.EpResponse) -> None:
        pending = self._outstanding.pop(resp.probe_id, None)
        if pending is None or pending[0] != peer or pending[1] != resp.req_ev:
            self.counters["probe_answers_unmatched"] += 1
            return
        self.counters["probes_ok"] += 1
        self._probe_result(peer, resp.req_ev, ok=resp.status == EpStatus.OK, now=time.monotonic_ns())

    def _on_port_status(self, peer, mask: int, now: int) -> None:
        """A peer's ports changed: treat its down planes as ASSUMED_BAD toward it (design 5)."""
        st = self.peers.setdefault(peer, self._new_peer_state())
        evset = self.dp.peer_set(peer)
        planes = set(self.template.planes())
        down = {p for p in planes if not mask >> p & 1}
        st.dead_planes = down
        if evset is None:
            return
        changed = set()
        for i in range(evset.n):
            s = evset.slots[i]
            if s.ev >> 28 in down and s.state in (GOOD, SKIP):
                self._set_state(peer, s, BAD, Reason.PEER_PORT_DOWN, now)
                changed.add(i)
        self.dp.merge_slots(peer, evset, changed)

    # ================================================================ ports ==============
    def _link_messages(self) -> None:
        try:
            while self._ipr.recv(65536):
                pass
        except BlockingIOError:
            pass
        for port in self.cfg.ports:
            try:
                up = _link_up(port.ifname)
            except OSError:
                up = False  # the interface is gone
            if up != self._port_up.get(port.plane):
                self.set_port_state(port.plane, up)

    def set_port_state(self, plane: int, up: bool) -> None:
        """A local plane port went down (or up): on down, retire the plane's EVs at once; in
        both cases, tell every live peer with an EP_REQ PORT_STATUS_UPDATE."""
        with self._lock:
            now = time.monotonic_ns()
            self._port_up[plane] = up
            self.dp.set_port_up(plane, up)
            self._publish(make_event("", 0, GOOD if not up else BAD, BAD if not up else GOOD,
                                     (Reason.PORT_DOWN if not up else Reason.PROBE_OK).name,
                                     ts_ns=now, plane=plane, link=self._port_link(plane)))
            for peer, evset in list(self.dp.peer_sets()):
                self.peers.setdefault(peer, self._new_peer_state())
                if not up:
                    self._retire_plane(peer, evset, plane, now)
            self._send_port_status()

    def _port_link(self, plane: int) -> str:
        return f"p{plane}/t0-{self.cfg.leaf}/down-{self.cfg.downlink}"

    def _retire_plane(self, peer, evset: EvSet, plane: int, now: int) -> None:
        changed = set()
        for i in range(evset.n):
            s = evset.slots[i]
            if s.ev >> 28 == plane and s.state in (GOOD, SKIP):
                self._set_state(peer, s, BAD, Reason.PORT_DOWN, now)
                changed.add(i)
        self.dp.merge_slots(peer, evset, changed)

    def _port_mask(self) -> int:
        return sum(1 << p for p, up in self._port_up.items() if up)

    def _send_port_status(self) -> None:
        mask = self._port_mask()
        for peer, evset in list(self.dp.peer_sets()):
            ev = next((evset.slots[i].ev for i in range(evset.n)
                       if evset.slots[i].state == GOOD and self._port_up.get(evset.slots[i].ev >> 28)), None)
            if ev is None:
                self.counters["port_status_unsent"] += 1
                continue
            if self._send_frame(peer, ev, P.ep_request(EpOp.PORT_STATUS_UPDATE, 0, mask, 0)):
                self.counters["port_status_sent"] += 1

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
            for p, evset in list(self.dp.peer_sets()):
                if peer and p != ipaddress.IPv6Address(peer):
                    continue
                touched = set()
                for i in range(evset.n):
                    s = evset.slots[i]
                    if s.ev == ev and (s.state == DENIED) != denied:
                        self._set_state(p, s, new, reason, now)
                        touched.add(i)
                changed += len(touched)
                self.dp.merge_slots(p, evset, touched)
            if not peer:
                self._deny_in_template(ev, denied)
            return changed

    def _deny_in_template(self, ev: int, denied: bool) -> None:
        states = [DENIED if (e == ev and denied) or (e != ev and e in self._template_denied) else GOOD
                  for e in self.template.active]
        if denied:
            self._template_denied.add(ev)
        else:
            self._template_denied.discard(ev)
        self.dp.set_template(self.template.active, states)

    def set_link_denied(self, link: str, denied: bool) -> tuple[int, bool]:
        """Deny (or allow) a link by name: tc egress then skips every EV whose path crosses
        it, for every peer, met or not. Returns (EVs of live peers now crossing it, whether
        the denied-links map changed).

        Raises:
            MrcError: not configured. ValueError: a malformed link name.
        """
        with self._lock:
            self._require()
            ln = parse_link_name(link)
            changed = self.dp.deny_link(ln.plane, ln.leaf, ln.kind, ln.index, denied)
            (self._denied_links.add if denied else self._denied_links.discard)(str(ln))
            crossing = 0
            for peer, evset in self.dp.peer_sets():
                crossing += sum(1 for i in range(evset.n) if str(ln) in self._links_of(peer, evset.slots[i].ev))
            self._publish(make_event("", 0, GOOD if denied else DENIED, DENIED if denied else GOOD,
                                     (Reason.LINK_DENIED if denied else Reason.LINK_ALLOWED).name,
                                     plane=ln.plane, link=str(ln)))
            return crossing, changed

    def stats(self) -> dict[str, int]:
        """Dataplane counters (``host_stats``, summed over CPUs) and the agent's counters."""
        with self._lock:
            self._require()
            out = {f"dp_{k.lower()}": v for k, v in self.dp.stat_values().items()}
            out.update({f"agent_{k}": v for k, v in self.counters.items()})
            out["agent_retired_evs"] = sum(len(st.retired) for st in self.peers.values())
            out["agent_live_peers"] = sum(1 for _ in self.dp.peers.keys())
            return out

    def ev_table(self, peer: str | None = None) -> list[dict]:
        """Rows of the EV table of every live peer (or one): peer, slot, ev, plane, t1, state,
        path (outer DA), tx/ack counters; retired EVs follow with ``retired`` true."""
        with self._lock:
            self._require()
            rows = []
            for p, evset in self.dp.peer_sets():
                if peer and p != ipaddress.IPv6Address(peer):
                    continue
                st = self.peers.get(p)
                rows += [self._row(p, i, evset.slots[i], st) for i in range(evset.n)]
                for ev, target in (st.retired.items() if st else []):
                    rows.append(self._retired_row(p, ev, target))
            return rows

    def _path(self, peer, ev: int) -> str:
        loc = parse_nic_address(peer)
        plane, t1, _ = ev_unpack(ev)
        return str(path_da(plane, t1, self.cfg.leaf, loc.leaf, loc.downlink, self.cfg.locator))

    def _row(self, peer, slot_index: int, s, st: PeerState | None) -> dict:
        plane, t1, _ = ev_unpack(s.ev)
        target = st.probes.get(s.ev) if st else None
        return dict(peer=str(peer), slot=slot_index, ev=s.ev, plane=plane, t1=t1,
                    state=state_name(s.state), path=self._path(peer, s.ev), tx_packets=s.tx_packets,
                    tx_bytes=s.tx_bytes, acked=s.acked, skips=s.skips, nacks=s.nacks,
                    last_tx_ns=s.last_tx_ns, last_ack_ns=s.last_ack_ns, retired=False,
                    probe_streak=target.streak if target else 0)

    def _retired_row(self, peer, ev: int, target: ProbeTarget) -> dict:
        plane, t1, _ = ev_unpack(ev)
        return dict(peer=str(peer), slot=-1, ev=ev, plane=plane, t1=t1, state="ASSUMED_BAD",
                    path=self._path(peer, ev), tx_packets=target.tx_packets, tx_bytes=0,
                    acked=target.acked, skips=0, nacks=0, last_tx_ns=target.last_tx_ns,
                    last_ack_ns=0, retired=True, probe_streak=target.streak)

    def _require(self) -> None:
        if self.dp is None or self.cfg is None:
            raise MrcError("the host agent is not configured: call Configure first")


def _ifindex(ifname: str, host: str) -> int:
    try:
        return socket.if_nametoindex(ifname)
    except OSError:
        raise MrcError(f"host {host}: interface {ifname} does not exist in this network namespace") from None


def _link_up(ifname: str) -> bool:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        link = ipr.link("get", index=socket.if_nametoindex(ifname))[0]
        return link.get_attr("IFLA_OPERSTATE") in _UP


_UP = ("UP", "UNKNOWN")  # UNKNOWN: a driver that does not report operstate
