"""The host dataplane: loads ``mrc_host.bpf.o`` and owns its maps (design section 5).

:class:`HostDataplane` writes the host config, the plane ports, the template EV set and the
denied links, reads the per-peer EV sets and counters, attaches tc egress to the virtual NIC
device and XDP ingress to every plane port, and drains the dataplane's EV events.
"""

from __future__ import annotations

import ctypes
import ipaddress
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..bpf.attach import tc_attach, tc_detach, xdp_attach, xdp_detach
from ..bpf.objects import BpfObject, Program
from ..bpf.ringbuf import RingBuffer
from ..errors import MrcError
from ..wire.constants import MAX_PLANES
from ..wire.constants import HostFlag
from ..wire.ev import ev_plane
from ..wire.usid import DEFAULT_LOCATOR
from .maps import (HOST_MODES, LINK_KIND, MAX_EVS, SLOT_WRITE_CLEAR_PENDING, U8, EvEvent, EvSet,
                   EvSlot, HostConfigMap, HostLoad, LinkKey, PeerKey, PlaneGroup, PlanePort,
                   RxPath, SlotWrite, SlotWriteResult, Stat, TxRec, split_rx_path_key,
                   tx_index)

OBJECT = "mrc_host"
TC_PROG = "mrc_host_egress"
XDP_PROG = "mrc_host_ingress"
SLOT_WRITE_PROG = "mrc_host_slot_write"


def addr_bytes(addr: str | ipaddress.IPv6Address) -> bytes:
    """16 network-order bytes of an IPv6 address. Raises ValueError on a bad address."""
    return ipaddress.IPv6Address(addr).packed


def mac_bytes(mac: str | bytes) -> bytes:
    """6 bytes of a MAC given as ``aa:bb:cc:dd:ee:ff`` or bytes. Raises ValueError."""
    if isinstance(mac, bytes):
        raw = mac
    else:
        raw = bytes(int(part, 16) for part in mac.split(":"))
    if len(raw) != 6:
        raise ValueError(f"MAC {mac!r} must have 6 bytes")
    return raw


def _u8s(ctype, raw: bytes):
    return ctype.from_buffer_copy(raw)


@dataclass
class PortSetting:
    """One plane port as the dataplane sees it."""

    plane: int
    ifindex: int
    mac: bytes
    neigh_mac: bytes
    port_addr: bytes
    up: bool = True


def plane_runs(evs: list[int]) -> list[tuple[int, int, int]]:
    """The plane groups of an EV list: ``[(plane, first index, count), ...]`` in list order.

    Raises:
        ValueError: a plane's EVs are not consecutive (the pick needs one run per plane).
    """
    runs: list[tuple[int, int, int]] = []
    for i, ev in enumerate(evs):
        plane = ev_plane(ev)
        if runs and runs[-1][0] == plane:
            runs[-1] = (plane, runs[-1][1], runs[-1][2] + 1)
        elif any(r[0] == plane for r in runs):
            raise ValueError(f"EV {ev:#010x} at index {i}: plane {plane}'s EVs are not consecutive "
                             "(an EV set lists its EVs grouped by plane)")
        else:
            runs.append((plane, i, 1))
    return runs


class HostDataplane:
    """The loaded host BPF object and typed handles on its maps.

    ``mode`` (``"srv6"`` or ``"ecmp"``, :data:`~mrckit.host.maps.HOST_MODES`) and ``locator``
    (the uSID block, 32 bits, host order) are load-time settings: they are written into the
    object's ``.rodata.host`` map before it loads, so the verifier drops the other mode's code.
    Changing either means a new ``HostDataplane`` (docs/host.md, "Load-time settings").

    Use as a context manager or call :meth:`close`; closing detaches nothing (see
    :meth:`detach`), it frees the object.

    Raises:
        ValueError: an unknown mode; a locator outside 32 bits.
        BpfError: on load (object missing: run ``make bpf``; verifier refusal with its log).
    """

    def __init__(self, mode: str = "srv6", locator: int = DEFAULT_LOCATOR, obj_path: str = OBJECT):
        if mode not in HOST_MODES:
            raise ValueError(f"mode {mode!r}: use one of {', '.join(HOST_MODES)}")
        if not 0 <= locator <= 0xFFFFFFFF:
            raise ValueError(f"locator {locator:#x} is not a 32-bit uSID block")
        self.mode, self.locator = mode, locator
        obj = BpfObject.open(obj_path)
        try:
            obj.map(".rodata.host").set_initial_value(HostLoad(mode=HOST_MODES[mode], locator=locator))
            self.obj = obj.load()
        except Exception:
            obj.close()
            raise
        self.config = self.obj.map("host_config", key_type=U32, value_type=HostConfigMap)
        self.ports = self.obj.map("plane_ports", key_type=U32, value_type=PlanePort)
        self.template = self.obj.map("ev_template", key_type=U32, value_type=EvSet)
        self.peers = self.obj.map("peer_evs", key_type=PeerKey, value_type=EvSet)
        self.denied = self.obj.map("denied_links", key_type=LinkKey, value_type=ctypes.c_uint8)
        self.stats = self.obj.map("host_stats", key_type=U32, value_type=ctypes.c_uint64)
        self.tx_records = self.obj.map("tx_records", key_type=U32, value_type=TxRec)
        self.rx_paths = self.obj.map("rx_paths", key_type=U32, value_type=ctypes.c_uint64)
        self.egress: Program = self.obj.program(TC_PROG)
        self.ingress: Program = self.obj.program(XDP_PROG)
        self.slot_writer: Program = self.obj.program(SLOT_WRITE_PROG)
        self._events = RingBuffer(self.obj.map("ev_events"), EvEvent)
        self.attached: list[tuple[str, str]] = []

    # ---- configuration -----------------------------------------------------------------
    def set_host(self, nic_addr: str, locator: int | None, leaf: int, downlink: int, n_planes: int,
                 agent_port: int, mode: str | None = None, *, path_retire: bool = False,
                 pinned: bool = False, min_active: int = 0) -> None:
        """Write ``host_config`` (n_denied and configured are kept as they are). ``locator`` and
        ``mode`` were fixed at load (:class:`HostDataplane`): None, or the same values, are
        accepted; a different one is refused (load a new dataplane instead). ``path_retire``: a
        LOSS retires the lost packet's whole path toward that peer (SRv6 mode only; the
        dataplane ignores it in ecmp mode). ``pinned``: pinned-EV mode, one fixed EV per QP.
        ``min_active``: the ev_min_active floor of GOOD/SKIP EVs per peer set (0 = none).

        Raises:
            ValueError: a mode or locator other than the load-time one; min_active outside
                0..256.
        """
        mode = self.mode if mode is None else mode
        locator = self.locator if locator is None else locator
        if mode != self.mode:
            raise ValueError(f"mode {mode!r}: this dataplane was loaded in {self.mode!r} mode, a "
                             "load-time setting; load a new HostDataplane(mode=...) to change it")
        if locator != self.locator:
            raise ValueError(f"locator {locator:#x}: this dataplane was loaded with "
                             f"{self.locator:#x}, a load-time setting; load a new "
                             "HostDataplane(locator=...) to change it")
        if not 0 <= min_active <= MAX_EVS:
            raise ValueError(f"min_active {min_active} outside 0..{MAX_EVS}")
        flags = (HostFlag.PATH_RETIRE if path_retire else 0) | (HostFlag.PINNED if pinned else 0)
        cur = self.config.lookup(0)
        cfg = HostConfigMap(nic_addr=_u8s(ctypes.c_uint8 * 16, addr_bytes(nic_addr)),
                            locator=locator, leaf=leaf, downlink=downlink, n_planes=n_planes,
                            agent_port=agent_port, configured=cur.configured,
                            n_denied=cur.n_denied, mode=HOST_MODES[mode], flags=int(flags),
                            min_active=min_active, agent_idle=cur.agent_idle)
        self.config.update(0, cfg)

    def set_configured(self, on: bool) -> None:
        """Open (or close) the dataplane: until then both programs drop and count MRC traffic."""
        cfg = self.config.lookup(0)
        cfg.configured = 1 if on else 0
        self.config.update(0, cfg)

    def set_agent_idle(self, idle: bool) -> None:
        """Tell the dataplane whether the agent is blocked: while ``idle`` is set, the next
        data send (tc egress) or SACK/NACK (XDP) clears it and pushes one ``WAKE`` record to
        ``ev_events``, which makes :meth:`events_fd` readable (docs/host.md, "An idle agent")."""
        cfg = self.config.lookup(0)
        cfg.agent_idle = 1 if idle else 0
        self.config.update(0, cfg)

    def set_port(self, p: PortSetting) -> None:
        """Write ``plane_ports[p.plane]``. Raises ValueError for a plane outside 0..15."""
        if not 0 <= p.plane < MAX_PLANES:
            raise ValueError(f"plane {p.plane} outside 0..{MAX_PLANES - 1}")
        self.ports.update(p.plane, PlanePort(
            ifindex=p.ifindex, up=1 if p.up else 0, mac=_u8s(ctypes.c_uint8 * 6, p.mac),
            neigh_mac=_u8s(ctypes.c_uint8 * 6, p.neigh_mac),
            port_addr=_u8s(ctypes.c_uint8 * 16, p.port_addr)))

    def set_port_up(self, plane: int, up: bool) -> None:
        """Flip one plane port's ``up`` flag; tc egress skips the EVs of a down plane."""
        port = self.ports.lookup(plane)
        port.up = 1 if up else 0
        self.ports.update(plane, port)

    def port(self, plane: int) -> PlanePort:
        """``plane_ports[plane]``."""
        return self.ports.lookup(plane)

    def set_template(self, evs: list[int], states: Iterable[int] | None = None) -> None:
        """Write the template EV set (1..256 EVs, all GOOD unless ``states`` says otherwise).

        The EVs of one plane must be consecutive: each plane's run becomes a plane group, the
        unit of the equal-planes pick (docs/host.md).

        Raises:
            ValueError: no EVs or more than 256; a plane's EVs not consecutive.
        """
        if not 1 <= len(evs) <= MAX_EVS:
            raise ValueError(f"an EV set holds 1..{MAX_EVS} EVs, got {len(evs)}")
        runs = plane_runs(evs)
        tset = EvSet(n=len(evs), n_groups=len(runs), plane_seq=0)
        for g, (plane, base, n) in enumerate(runs):
            # rot = all ones: the first packet to a peer draws a fresh scan order.
            tset.groups[g] = PlaneGroup(rot=0xFFFFFFFF, stride=1, base=base, n=n, plane=plane)
            for i in range(base, base + n):
                tset.slots[i] = EvSlot(ev=evs[i], group=g)
        for i, state in enumerate(states or []):
            tset.slots[i].state = state
        self.template.update(0, tset)

    def deny_link(self, plane: int, leaf: int, kind: str, index: int, on: bool) -> bool:
        """Add (``on``) or remove a denied link; returns whether the map changed."""
        key = LinkKey(plane=plane, kind=LINK_KIND[kind], leaf=leaf, index=index)
        if on:
            changed = self.denied.lookup(key) is None
            self.denied.update(key, 1)
        else:
            changed = self.denied.delete(key)
        cfg = self.config.lookup(0)
        cfg.n_denied = sum(1 for _ in self.denied.keys())
        self.config.update(0, cfg)
        return changed

    # ---- EV sets -----------------------------------------------------------------------
    def peer_sets(self) -> Iterator[tuple[ipaddress.IPv6Address, EvSet]]:
        """Every live peer's EV set, as (peer NIC address, set)."""
        for key, value in self.peers.items():
            yield ipaddress.IPv6Address(bytes(key)), value

    def peer_set(self, peer: str | ipaddress.IPv6Address) -> EvSet | None:
        """One peer's EV set, or None if no packet has gone to it yet."""
        return self.peers.lookup(_u8s(PeerKey, addr_bytes(peer)))

    def put_peer_set(self, peer: str | ipaddress.IPv6Address, value: EvSet) -> None:
        """Replace a peer's whole EV set (creating it if absent)."""
        self.peers.update(_u8s(PeerKey, addr_bytes(peer)), value)

    def merge_slots(self, peer: str | ipaddress.IPv6Address, snapshot: EvSet,
                    indices: Iterable[int]) -> dict[int, EvSlot]:
        """Write the agent's changes to slots ``indices`` of ``snapshot`` (an earlier read of the
        peer's set) into the live set, keeping what the dataplane did meanwhile.

        Each slot is written field-wise in the kernel (``mrc_host_slot_write``): its state,
        reason, SKIP rotation and ``bad_ns``; an EV made GOOD has nothing outstanding. A slot
        whose EV the agent replaced gets the new EV with fresh counters, except ``tx_packets``
        and ``tx_bytes``, which resume from the snapshot's values. A slot whose EV changed
        since the snapshot is left alone.

        Returns:
            replaced EV -> its last counts in the dataplane (``tx_packets``, ``tx_bytes``,
            ``last_tx_ns``, ``acked`` of an :class:`EvSlot`), for each slot whose EV this
            write replaced: the snapshot's copies of those counts may be older.
        """
        raw = addr_bytes(peer)
        before = self.peer_set(peer)
        if before is None:
            return {}
        out = {}
        for i in sorted(indices):
            new, old_ev = snapshot.slots[i], before.slots[i].ev
            cmd = SlotWrite(peer=_u8s(U8 * 16, raw), index=i, expect_ev=old_ev, ev=new.ev,
                            state=new.state, reason=new.reason,
                            flags=SLOT_WRITE_CLEAR_PENDING if new.state == 0 else 0,
                            skip_until_rot=new.skip_until_rot, bad_ns=new.bad_ns,
                            tx_packets=new.tx_packets, tx_bytes=new.tx_bytes)
            if self._slot_write(cmd) == SlotWriteResult.OK and new.ev != old_ev:
                out[old_ev] = EvSlot(ev=old_ev, tx_packets=cmd.tx_packets, tx_bytes=cmd.tx_bytes,
                                     last_tx_ns=cmd.last_tx_ns, acked=cmd.acked)
        return out

    def write_slot(self, peer: str | ipaddress.IPv6Address, index: int, ev: int | None = None,
                   state: int | None = None, reset: bool = False) -> bool:
        """Change slot ``index`` of a peer's set: its EV and/or state, and with ``reset`` its
        counters. A new EV starts with fresh counters (``tx_packets`` and ``tx_bytes`` too).
        Only those fields are written, in the kernel, so the dataplane's concurrent counter
        updates are kept. Returns False for an unknown peer or a slot past the set's n."""
        cur = self.peer_set(peer)
        if cur is None or not 0 <= index < cur.n:
            return False
        slot = cur.slots[index]
        if reset:
            self.peers.update(_u8s(PeerKey, addr_bytes(peer)), self._reset_slot(cur, index))
            slot = cur.slots[index]
        cmd = SlotWrite(peer=_u8s(U8 * 16, addr_bytes(peer)), index=index, expect_ev=slot.ev,
                        ev=slot.ev if ev is None else ev,
                        state=slot.state if state is None else state, reason=slot.reason,
                        skip_until_rot=0 if state is not None else slot.skip_until_rot,
                        bad_ns=slot.bad_ns)
        return self._slot_write(cmd) == SlotWriteResult.OK

    @staticmethod
    def _reset_slot(evset: EvSet, index: int) -> EvSet:
        slot = evset.slots[index]
        evset.slots[index] = EvSlot(ev=slot.ev, state=slot.state, group=slot.group)
        return evset

    def _slot_write(self, cmd: SlotWrite) -> SlotWriteResult:
        return SlotWriteResult(self.slot_writer.run_syscall(cmd))

    def tx_record(self, peer: str | ipaddress.IPv6Address, psn: int) -> TxRec | None:
        """The EV that carried the last transmission of data PSN ``psn`` (24 bits) to ``peer``,
        or None when tc egress kept no record of it (never sent, or its entry since taken by
        another (peer, PSN) of the direct-mapped table)."""
        raw = addr_bytes(peer)
        rec = self.tx_records.lookup(tx_index(raw, psn))
        if rec is None or rec.psn != psn or bytes(rec.peer) != raw:
            return None
        return rec

    def rx_path_counts(self) -> dict[RxPath, int]:
        """Probes (QP 0x2 packets) XDP ingress accepted, summed over CPUs, by (plane, T1,
        sender): the ``rx_paths`` map (docs/host.md, "Arrivals")."""
        return {split_rx_path_key(int(k)): int(v) for k, v in self.rx_paths.items_sum()}

    def stat_values(self) -> dict[str, int]:
        """Every ``host_stats`` counter summed over CPUs, by ``Stat`` name."""
        return {s.name: int(self.stats.lookup_sum(int(s))) for s in Stat}

    # ---- attach ------------------------------------------------------------------------
    def attach_egress(self, nic_dev: str) -> None:
        """tc egress on the virtual NIC device. Raises BpfError."""
        tc_attach(nic_dev, self.egress, "egress", replace=True)
        self.attached.append(("tc", nic_dev))

    def attach_ingress(self, port_dev: str, mode: str = "native") -> str:
        """XDP on a plane port; ``mode`` "native", "generic" or "auto". Returns the mode got."""
        got = xdp_attach(port_dev, self.ingress, mode, replace=True)
        self.attached.append(("xdp", port_dev))
        return got

    def detach(self) -> None:
        """Remove every attachment this object made (quiet for interfaces already gone)."""
        for kind, dev in reversed(self.attached):
            try:
                if kind == "tc":
                    tc_detach(dev, "egress")
                else:
                    xdp_detach(dev)
            except MrcError:
                pass
        self.attached.clear()

    # ---- events ------------------------------------------------------------------------
    def poll_events(self, timeout_ms: int = 0) -> list[EvEvent]:
        """EV state changes the dataplane made since the last call (oldest first), and its
        ``WAKE`` records (reason ``Reason.WAKE``, no peer: a send or an ack woke an idle agent)."""
        return self._events.poll(timeout_ms)

    def events_fd(self) -> int:
        """A file descriptor (libbpf's epoll fd of the ring buffer) that polls readable while
        ``ev_events`` holds records; :meth:`poll_events` drains them."""
        return self._events.fd()

    def close(self) -> None:
        """Free the ring buffer and the object (attachments made stay until detach())."""
        self._events.close()
        self.obj.close()

    def __enter__(self) -> "HostDataplane":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


U32 = ctypes.c_uint32
