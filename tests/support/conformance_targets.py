"""The switch targets of the conformance suite, behind one small interface.

Each target is one switch with ports 0..3 (or the ports a suite asks for) in namespace ``sw``;
the ports' veth peers sit in namespace ``tester``, where the harness sends and captures frames.
Tables are given by P4 names (design section 4, docs/ecmp-mode.md, "Ingress"): the eBPF target
writes them with ``mrckit.switch.ebpf_target``, bmv2 gets them through P4Runtime (finsy), and the
Linux kernel (``seg6local End flavors next-csid``, the uN reference) gets routes.

The tables model holds mrckit's own entry types, indexed by their slot (:func:`slot`):

- ``TableEntry`` of ``my_usid`` / ``usid_fib`` (slot: the table and the 48-bit DA prefix) and
  ``port_config`` (the table and the port);
- ``ActionProfileMember`` of ``ecmp_selector`` (slot ``("ecmp_member", member id)``);
- ``ActionProfileGroup`` (slot ``("ecmp_group", group id)``);
- ``TableEntry.route`` of ``ipv6_fib`` (slot: the table and its ``ipaddress.IPv6Network``).

Entries are written members first, then groups, then routes, each in ascending key order, and
deleted in the reverse order. bmv2 orders a group's members by member handle, so a suite that
runs several cases on one bmv2 must keep its members in every case's tables: created once, in
ascending id order, never deleted and re-created (docs/ecmp-mode.md, "The hash").
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import threading
from dataclasses import dataclass

from mrckit import netns
from mrckit.errors import MrcError
from mrckit.switch import kernel_ref
from mrckit.topology.entries import ActionProfileGroup, ActionProfileMember, TableEntry
from mrckit.wire.pipeline import COUNTER_NAMES

PORTS = (0, 1, 2, 3)
Entity = TableEntry | ActionProfileMember | ActionProfileGroup
Key = int | ipaddress.IPv6Network
Tables = dict[tuple[str, Key], Entity]      # slot -> entry


def slot(e: Entity) -> tuple[str, Key]:
    """Where the tables model keeps ``e``: (table or ``ecmp_member``/``ecmp_group``, key)."""
    if isinstance(e, ActionProfileMember):
        return "ecmp_member", e.member_id
    if isinstance(e, ActionProfileGroup):
        return "ecmp_group", e.group_id
    return e.table, (e.prefix if e.table == "ipv6_fib" else e.key)


def tables_of(*entries: Entity) -> Tables:
    """The tables model holding ``entries``."""
    return {slot(e): e for e in entries}


@dataclass
class Wiring:
    """The two namespaces, the switch's ports and the interface names: ``sp<N>`` in the
    switch, ``tp<N>`` in the tester."""

    sw: str
    tester: str
    ports: tuple[int, ...] = PORTS

    @staticmethod
    def sw_if(port: int) -> str:
        return f"sp{port}"

    @staticmethod
    def tester_if(port: int) -> str:
        return f"tp{port}"


def build_wiring(prefix: str, *, kernel_switch: bool, ports: tuple[int, ...] = PORTS) -> Wiring:
    """Create both namespaces and one veth per port. IPv6 is off on the tester (no ND/MLD
    chatter into the switch). A kernel switch keeps IPv6 for forwarding but makes no
    link-local address, so it sends no ND/MLD either."""
    sw = netns.add(netns.unique_name(prefix))
    try:
        tester = netns.add(netns.unique_name(prefix))
    except BaseException:
        netns.delete(sw)
        raise
    wiring = Wiring(sw, tester, tuple(ports))
    try:
        netns.run(["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"], ns=tester)
        if kernel_switch:
            netns.run(["sysctl", "-qw", "net.ipv6.conf.default.addr_gen_mode=1"], ns=sw)
        else:
            netns.run(["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"], ns=sw)
        for port in wiring.ports:
            netns.veth(sw, wiring.sw_if(port), tester, wiring.tester_if(port))
            # XDP_REDIRECT into a veth needs NAPI on its peer (design section 9).
            netns.run(["ethtool", "-K", wiring.tester_if(port), "gro", "on"], ns=tester)
            netns.run(["sysctl", "-qw", f"net.ipv6.conf.{wiring.tester_if(port)}.disable_ipv6=1"], ns=tester)
    except BaseException:
        remove_wiring(wiring)
        raise
    return wiring


def remove_wiring(wiring: Wiring) -> None:
    netns.delete(wiring.sw)
    netns.delete(wiring.tester)


class Target:
    """A switch under test. Subclasses write single entries; :meth:`apply` makes the installed
    tables equal to a wanted set by writing only the difference."""

    name = ""
    has_counters = True
    counts_ingress_length = False
    """bmv2 counts every packet at its ingress length, a trimmed one too (design section 4)."""
    window = 0.3
    """Seconds to wait for frames after a send; every port is polled for this long once."""
    noise_filter = False

    def __init__(self, wiring: Wiring):
        self.wiring = wiring
        self.installed: Tables = {}

    def apply(self, wanted: Tables) -> None:
        """Delete, modify and insert entries so the switch holds exactly ``wanted``."""
        for key in sorted(set(self.installed) - set(wanted), key=_insert_order, reverse=True):
            self.delete(self.installed.pop(key))
        for key, entry in sorted(wanted.items(), key=lambda kv: _insert_order(kv[0])):
            if self.installed.get(key) == entry:
                continue
            self.write(entry, modify=key in self.installed)
            self.installed[key] = entry

    def write(self, entry: Entity, *, modify: bool) -> None:
        raise NotImplementedError

    def delete(self, entry: Entity) -> None:
        raise NotImplementedError

    def counters(self) -> dict[str, dict[int, tuple[int, int]]]:
        """Every counter's non-zero cells: name -> index -> (packets, bytes)."""
        raise NotImplementedError

    def set_queue_rate(self, port: int, pps: int) -> None:
        """Drain ``port``'s queue at ``pps`` packets/s."""
        raise NotImplementedError

    def restore_queue_rate(self, port: int) -> None:
        """Back to the target's default drain rate."""
        raise NotImplementedError

    def reset_queues(self) -> None:
        """Forget queued depth (a target with real queues lets them drain instead)."""

    def close(self) -> None:
        raise NotImplementedError


INSERT_ORDER = ("port_config", "ecmp_member", "ecmp_group", "ipv6_fib", "usid_fib", "my_usid")
"""Referenced entries before the entries that name them (members, then groups, then routes)."""


def _insert_order(key: tuple[str, Key]) -> tuple[int, Key]:
    """Table rank, then ascending key: members are created in ascending id order. Deletes
    go in the reverse order: routes before groups before members."""
    return INSERT_ORDER.index(key[0]), key[1]


class EbpfTarget(Target):
    """``mrckit.switch.ebpf_target.EbpfSwitch`` on the switch ports, native XDP."""

    name = "ebpf"

    def __init__(self, wiring: Wiring, switch_name: str):
        super().__init__(wiring)
        from mrckit.bpf.fs import ensure_bpffs
        from mrckit.switch.ebpf_target import EbpfSwitch, switch_pin_dir

        ensure_bpffs()
        # libbpf creates only the last folder of a pin path (docs/ebpf-switch.md).
        os.makedirs(os.path.dirname(switch_pin_dir(switch_name)), exist_ok=True)
        self.switch = EbpfSwitch(switch_name, wiring.sw, {p: wiring.sw_if(p) for p in wiring.ports})
        self.switch.setup()
        self.tables = self.switch.tables

    def write(self, entry, *, modify):
        if isinstance(entry, ActionProfileMember):
            self.tables.ecmp.write_member(entry, modify=modify)
        elif isinstance(entry, ActionProfileGroup):
            self.tables.ecmp.write_group(entry, modify=modify)
        elif entry.target is not None:
            self.tables.ecmp.write_route(entry, modify=modify)
        else:
            self.tables.direct.write(entry, mode="modify" if modify else "insert")

    def delete(self, entry):
        if isinstance(entry, ActionProfileMember):
            self.tables.ecmp.delete_member(entry.member_id)
        elif isinstance(entry, ActionProfileGroup):
            self.tables.ecmp.delete_group(entry.group_id)
        elif entry.target is not None:
            self.tables.ecmp.delete_route(entry)
        else:
            self.tables.direct.delete(entry)

    def counters(self):
        return {name: self.tables.counters.nonzero(name) for name in COUNTER_NAMES}

    def set_queue_rate(self, port, pps):
        self.tables.queues.set_rate(port, pps)

    def restore_queue_rate(self, port):
        from mrckit.switch.queues import DEFAULT_QUEUE_RATE_PPS
        self.tables.queues.set_rate(port, DEFAULT_QUEUE_RATE_PPS)

    def reset_queues(self):
        self.tables.queues.reset(self.wiring.ports)

    def close(self):
        self.switch.teardown()


class FinsyClient:
    """A synchronous face on finsy's asyncio ``Switch``: its event loop runs in a thread."""

    def __init__(self, address: str, p4info, json_path):
        import finsy as fy

        self.fy = fy
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="finsy", daemon=True)
        self.thread.start()
        opts = fy.SwitchOptions(p4info=p4info, p4blob=json_path, device_id=1)
        self.switch = fy.Switch("conformance", address, opts)
        try:
            self.call(self.switch.__aenter__())
        except BaseException:
            self._stop_loop()
            raise

    def call(self, coro, timeout: float = 30.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def read(self, entity) -> list:
        async def collect():
            return [e async for e in self.switch.read(entity)]
        return self.call(collect())

    def close(self) -> None:
        try:
            self.call(self.switch.__aexit__(None, None, None))
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


class Bmv2Target(Target):
    """``simple_switch_grpc`` started by ``mrckit.switch.bmv2``; tables and counters over
    P4Runtime with finsy, through the launcher's unix socket."""

    name = "bmv2"
    counts_ingress_length = True
    window = 0.6

    def __init__(self, wiring: Wiring, switch_name: str):
        super().__init__(wiring)
        from mrckit.switch.bmv2 import DEFAULT_JSON, DEFAULT_P4INFO, Bmv2Switch

        self.last_member = -1
        """The highest member id created so far on this bmv2 instance."""

        self.switch = Bmv2Switch(switch_name, wiring.sw, {p: wiring.sw_if(p) for p in wiring.ports})
        self.switch.start()
        try:
            self.client = FinsyClient(self.switch.grpc_address, DEFAULT_P4INFO, DEFAULT_JSON)
        except BaseException:
            self.switch.stop()
            raise

    def _entity(self, entry, with_action: bool = True):
        """The finsy entity of one entry of the tables model (a delete names only its key)."""
        fy = self.fy
        if isinstance(entry, ActionProfileMember):
            act = fy.P4TableAction(entry.action, **entry.params) if with_action else None
            return fy.P4ActionProfileMember(entry.profile, member_id=entry.member_id, action=act)
        if isinstance(entry, ActionProfileGroup):
            members = [fy.P4Member(m, weight=1) for m in entry.members] if with_action else None
            return fy.P4ActionProfileGroup(entry.profile, group_id=entry.group_id, members=members)
        if entry.target is not None:
            act = fy.P4IndirectAction(**{f"{entry.target[0]}_id": entry.target[1]}) if with_action else None
        else:
            act = fy.P4TableAction(entry.action, **entry.params) if with_action else None
        return fy.P4TableEntry(entry.table, match=fy.P4TableMatch(entry.match), action=act)

    @property
    def fy(self):
        return self.client.fy

    def write(self, entry, *, modify):
        if isinstance(entry, ActionProfileMember) and not modify:
            self._check_member_order(entry.member_id)
        entity = self._entity(entry)
        self.client.call(self.client.switch.write([~entity if modify else +entity]))

    def delete(self, entry):
        if isinstance(entry, ActionProfileMember):
            raise MrcError(f"bmv2 target: member {entry.member_id} would be deleted. bmv2 orders a group by member "
                           "handle, so members are created once, in ascending id order, and never deleted "
                           "(docs/ecmp-mode.md, 'The hash'): keep every member in every case's tables")
        self.client.call(self.client.switch.write([-self._entity(entry, with_action=False)]))

    def _check_member_order(self, member_id: int) -> None:
        """Refuse a member that would break "handles follow ids" (docs/ecmp-mode.md, "The hash")."""
        if member_id <= self.last_member:
            raise MrcError(f"bmv2 target: member {member_id} created after member {self.last_member}; "
                           "members must be created in ascending id order (docs/ecmp-mode.md, 'The hash')")
        self.last_member = member_id

    def counters(self):
        out = {}
        for name in COUNTER_NAMES:
            cells = self.client.read(self.fy.P4CounterEntry(name))
            out[name] = {c.index: (c.packet_count, c.byte_count) for c in cells if c.packet_count or c.byte_count}
        return out

    def set_queue_rate(self, port, pps):
        self.switch.set_queue_rate(pps, port)

    def restore_queue_rate(self, port):
        self.switch.set_queue_rate(0, port)   # bmv2: 0 = no limit

    def close(self):
        try:
            self.client.close()
        finally:
            self.switch.stop()


class KernelTarget(Target):
    """Linux as the uN reference, through ``mrckit.switch.kernel_ref``: ``my_usid`` entries
    become ``seg6local End flavors next-csid lblen 32 nflen 16`` routes, ``usid_fib`` set_egress
    entries routes to a static neighbour with the egress port's ``dst_mac``, and
    ``port_config`` sets the port's own MAC. Only uN forwarding cases run here; the kernel has
    no P4 counters."""

    name = "kernel"
    has_counters = False
    noise_filter = True

    def __init__(self, wiring: Wiring, switch_name: str):
        super().__init__(wiring)
        kernel_ref.enable_forwarding(wiring.sw)

    def write(self, entry, *, modify):
        if modify:
            self.delete(entry)
        sw, sp = self.wiring.sw, self.wiring.sw_if
        table, action = getattr(entry, "table", None), entry.action
        if table == "my_usid" and action == "usid_un":
            kernel_ref.add_un(sw, entry.key, sp(0))
        elif table == "usid_fib" and action == "set_egress":
            port = entry.params["port"]
            port_params = self.installed[("port_config", port)].params
            kernel_ref.add_fib(sw, entry.key, sp(port), _mac_text(port_params["dst_mac"]))
        elif table == "port_config" and action == "set_port":
            netns.run(["ip", "link", "set", sp(entry.key), "address", _mac_text(entry.params["src_mac"])], ns=sw)
        else:
            raise MrcError(f"kernel target: no mapping for {entry}")

    def delete(self, entry):
        if entry.table != "port_config":
            netns.run(["ip", "-6", "route", "del", kernel_ref.prefix_text(entry.key)], ns=self.wiring.sw, check=False)

    def counters(self):
        return {}

    def set_queue_rate(self, port, pps):
        raise MrcError("kernel target: no queue model")

    def close(self):
        pass


def _mac_text(mac: int) -> str:
    return ":".join(f"{b:02x}" for b in mac.to_bytes(6, "big"))


TARGETS = {"ebpf": EbpfTarget, "bmv2": Bmv2Target, "kernel": KernelTarget}
