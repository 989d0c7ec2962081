"""The switch targets of ``mrckit.testing``, behind one small interface (design section 4).

Each local target is one switch whose ports sit in its own namespace, wired by veths to a
tester namespace (:mod:`mrckit.testing.wiring`). Tables are written by P4 names:

- ``ebpf``: ``mrckit.switch.ebpf_target.EbpfSwitch`` (XDP, native mode), through its own table API;
- ``bmv2``: ``simple_switch_grpc`` (``mrckit.switch.bmv2``) running ``mrc_switch.p4`` or a user's
  program (:class:`Program`), through P4Runtime with finsy;
- ``kernel``: Linux as the uN reference (``seg6local End flavors next-csid``,
  ``mrckit.switch.kernel_ref``): uN forwarding only, no counters, no trimming, no drop reasons;
- ``remote``: an existing P4Runtime server (a hardware switch, say), its ports wired by the
  user to tester interfaces (:class:`Remote`).

A target declares what it can do in :attr:`Target.features`; a test that needs a feature the
target lacks raises :class:`Unsupported` (the pytest plugin turns it into a skip).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import netns
from ..errors import MrcError
from ..switch import kernel_ref
from ..topology.entries import ActionProfileGroup, ActionProfileMember
from ..wire.pipeline import COUNTER_NAMES
from .p4rt_client import P4RuntimeClient
from .tables import Entity, Tables, insert_order
from .wiring import Wiring

TARGET_NAMES = ("ebpf", "bmv2", "kernel", "remote")
"""Every target; ``remote`` runs only when the user names a server (:class:`Remote`)."""
LOCAL_TARGETS = ("ebpf", "bmv2", "kernel")

FEATURES = ("counters", "drop_reasons", "trim", "ecn", "ecmp", "queues")
"""What a target may offer beyond uN forwarding (design section 4): P4 counters, the
``drop_reason`` counter, payload trimming, ECN marking, the EV-hash ECMP tables, queue rates."""
MRC_FEATURES = frozenset(FEATURES)


class Unsupported(MrcError):
    """The target lacks a feature the test needs (the pytest plugin reports a skip)."""


@dataclass(frozen=True)
class Program:
    """A P4 program compiled for bmv2: its JSON and its P4Info (text or binary)."""

    json: Path
    p4info: Path

    @classmethod
    def mrc_switch(cls) -> "Program":
        """``p4src/mrc_switch.p4`` as shipped in the package (:mod:`mrckit.resources`)."""
        from ..switch.bmv2 import DEFAULT_JSON, DEFAULT_P4INFO
        return cls(DEFAULT_JSON, DEFAULT_P4INFO)


@dataclass(frozen=True)
class Remote:
    """An existing P4Runtime server and the tester interfaces wired to its ports.

    Attributes:
        address: the server, ``HOST:PORT`` or ``unix:/path``.
        ports: switch port -> the tester's interface cabled to it (the user wires them).
        tester_ns: the namespace of those interfaces (None: the root namespace).
        device_id: the P4Runtime device id.
        p4info: the running program's P4Info (default: mrc_switch's).
        device_config: a device config (bmv2 JSON) to push with the P4Info; None leaves the
            pipeline the server runs.
    """

    address: str
    ports: dict[int, str]
    tester_ns: str | None = None
    device_id: int = 1
    p4info: Path | None = None
    device_config: Path | None = None


class Target:
    """A switch under test. Subclasses write single entries; :meth:`apply` makes the installed
    tables equal to a wanted set by writing only the difference."""

    name = ""
    features: frozenset[str] = MRC_FEATURES
    counts_ingress_length = False
    """bmv2 counts every packet at its ingress length, a trimmed one too (design section 4)."""
    quiet_period = 0.3
    """Seconds of silence on every port that prove "nothing else came out" (one wait per check,
    for all ports together)."""
    expect_timeout = 3.0
    """Seconds a positive check waits for its frame at most; it returns as soon as it arrives."""

    def __init__(self, wiring: Wiring):
        self.wiring = wiring
        self.installed: Tables = {}

    def counter_names(self) -> tuple[str, ...]:
        """The program's indirect counters."""
        return COUNTER_NAMES

    def apply(self, wanted: Tables) -> None:
        """Delete, modify and insert entries so the switch holds exactly ``wanted``."""
        for key in sorted(set(self.installed) - set(wanted), key=insert_order, reverse=True):
            self.delete(self.installed.pop(key))
        for key, entry in sorted(wanted.items(), key=lambda kv: insert_order(kv[0])):
            if self.installed.get(key) == entry:
                continue
            self.write(entry, modify=key in self.installed)
            self.installed[key] = entry

    def write(self, entry: Entity, *, modify: bool) -> None:
        """Insert (``modify``: replace) one entry."""
        raise NotImplementedError

    def delete(self, entry: Entity) -> None:
        """Delete one entry."""
        raise NotImplementedError

    def counters(self) -> dict[str, dict[int, tuple[int, int]]]:
        """Every counter's non-zero cells: name -> index -> (packets, bytes)."""
        raise NotImplementedError

    def set_queue_rate(self, port: int, pps: int) -> None:
        """Drain ``port``'s queue at ``pps`` packets/s."""
        raise Unsupported(f"{self.name} target: no queue model")

    def restore_queue_rate(self, port: int) -> None:
        """Back to the target's default drain rate."""
        raise Unsupported(f"{self.name} target: no queue model")

    def reset_queues(self) -> None:
        """Forget queued depth (a target with real queues lets them drain instead)."""

    def close(self) -> None:
        """Stop the switch (the wiring is removed by its owner)."""

    def kept(self) -> str:
        """What stays running when the switch is kept for debugging, and how to remove it."""
        return ""


class EbpfTarget(Target):
    """``mrckit.switch.ebpf_target.EbpfSwitch`` on the switch ports, native XDP."""

    name = "ebpf"

    def __init__(self, wiring: Wiring, switch_name: str):
        super().__init__(wiring)
        from ..bpf.fs import ensure_bpffs
        from ..switch.ebpf_target import EbpfSwitch, switch_pin_dir

        ensure_bpffs()
        # libbpf creates only the last folder of a pin path (docs/ebpf-switch.md).
        os.makedirs(os.path.dirname(switch_pin_dir(switch_name)), exist_ok=True)
        assert wiring.sw is not None
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
        from ..switch.queues import DEFAULT_QUEUE_RATE_PPS
        self.tables.queues.set_rate(port, DEFAULT_QUEUE_RATE_PPS)

    def reset_queues(self):
        self.tables.queues.reset(self.wiring.ports)

    def close(self):
        self.switch.teardown()

    def kept(self):
        from ..switch.ebpf_target import switch_pin_dir
        return f"XDP switch {self.switch.name}, maps pinned in {switch_pin_dir(self.switch.name)} (rm -r it)"


class P4RuntimeTarget(Target):
    """A target whose tables and counters go over P4Runtime (finsy): bmv2 and remote."""

    client: P4RuntimeClient

    def _init_client(self, client: P4RuntimeClient, program_is_ours: bool) -> None:
        self.client = client
        self.last_member = -1
        """The highest member id created so far on this instance."""
        self._counter_names = tuple(client.counter_names())
        if not program_is_ours:
            self.features = frozenset({"counters"} if self._counter_names else ())

    @property
    def fy(self):
        """The finsy module of the client (for raw P4Runtime entities)."""
        return self.client.fy

    def counter_names(self):
        return self._counter_names

    def write(self, entry, *, modify):
        if isinstance(entry, ActionProfileMember) and not modify:
            self._check_member_order(entry.member_id)
        self.client.write(entry, modify=modify)

    def delete(self, entry):
        if isinstance(entry, ActionProfileMember):
            raise MrcError(f"{self.name} target: member {entry.member_id} would be deleted. bmv2 orders a group by "
                           "member handle, so members are created once, in ascending id order, and never deleted "
                           "(docs/ecmp-mode.md, 'The hash'): keep every member in every case's tables")
        self.client.delete(entry)

    def _check_member_order(self, member_id: int) -> None:
        """Refuse a member that would break "handles follow ids" (docs/ecmp-mode.md, "The hash")."""
        if member_id <= self.last_member:
            raise MrcError(f"{self.name} target: member {member_id} created after member {self.last_member}; "
                           "members must be created in ascending id order (docs/ecmp-mode.md, 'The hash')")
        self.last_member = member_id

    def counters(self):
        return self.client.counters(self._counter_names)


class Bmv2Target(P4RuntimeTarget):
    """``simple_switch_grpc`` started by ``mrckit.switch.bmv2`` with ``program`` (default:
    mrc_switch.p4); tables and counters over P4Runtime with finsy, through the launcher's unix
    socket."""

    name = "bmv2"
    counts_ingress_length = True
    quiet_period = 0.6
    expect_timeout = 5.0

    def __init__(self, wiring: Wiring, switch_name: str, program: Program | None = None):
        super().__init__(wiring)
        from ..switch.bmv2 import Bmv2Switch

        ours = program is None
        program = program or Program.mrc_switch()
        assert wiring.sw is not None
        self.switch = Bmv2Switch(switch_name, wiring.sw, {p: wiring.sw_if(p) for p in wiring.ports},
                                 json_path=program.json)
        self.switch.start()
        try:
            self._init_client(P4RuntimeClient(self.switch.grpc_address, program.p4info, program.json), ours)
        except BaseException:
            self.switch.stop()
            raise

    def set_queue_rate(self, port, pps):
        self.switch.set_queue_rate(pps, port)

    def restore_queue_rate(self, port):
        self.switch.set_queue_rate(0, port)   # bmv2: 0 = no limit

    def close(self):
        try:
            self.client.close()
        finally:
            self.switch.stop()

    def kept(self):
        pid = self.switch.proc.pid if self.switch.proc is not None else "?"
        return f"simple_switch_grpc pid {pid} (kill it), P4Runtime at {self.switch.grpc_address}, logs in {self.switch.run_dir}"


class RemoteTarget(P4RuntimeTarget):
    """An existing P4Runtime server (:class:`Remote`): nothing is started or stopped here;
    the tables this session wrote are deleted at the end."""

    name = "remote"
    quiet_period = 0.6
    expect_timeout = 5.0

    def __init__(self, wiring: Wiring, remote: Remote):
        super().__init__(wiring)
        ours = remote.p4info is None
        p4info = remote.p4info or Program.mrc_switch().p4info
        self._init_client(P4RuntimeClient(remote.address, p4info, remote.device_config,
                                          device_id=remote.device_id), ours)

    def close(self):
        try:
            self.apply({})
        finally:
            self.client.close()


class KernelTarget(Target):
    """Linux as the uN reference, through ``mrckit.switch.kernel_ref``: ``my_usid`` entries
    become ``seg6local End flavors next-csid lblen 32 nflen 16`` routes, ``usid_fib`` set_egress
    entries routes to a static neighbour with the egress port's ``dst_mac``, and
    ``port_config`` sets the port's own MAC. Only uN forwarding runs here: the kernel has no
    P4 counters, no trimming and no drop reasons."""

    name = "kernel"
    features: frozenset[str] = frozenset()

    def __init__(self, wiring: Wiring, switch_name: str):
        super().__init__(wiring)
        assert wiring.sw is not None
        self.sw: str = wiring.sw
        kernel_ref.enable_forwarding(self.sw)

    def write(self, entry, *, modify):
        if modify:
            self.delete(entry)
        sw, sp = self.sw, self.wiring.sw_if
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
            raise Unsupported(f"kernel target: no mapping for {entry} (the uN reference has my_usid usid_un, "
                              "usid_fib set_egress and port_config only)")

    def delete(self, entry):
        if entry.table != "port_config":
            netns.run(["ip", "-6", "route", "del", kernel_ref.prefix_text(entry.key)], ns=self.sw, check=False)

    def counters(self):
        raise Unsupported("kernel target: the kernel reference has no P4 counters")


def _mac_text(mac: int) -> str:
    return ":".join(f"{b:02x}" for b in mac.to_bytes(6, "big"))


LOCAL_TARGET_CLASSES: dict[str, Callable[[Wiring, str], Target]] = {"ebpf": EbpfTarget, "bmv2": Bmv2Target, "kernel": KernelTarget}


def skip_reason(name: str, program: Program | None = None) -> str | None:
    """Why target ``name`` cannot run on this machine, or None.

    Raises:
        MrcError: ``name`` is not a target.
    """
    if name not in TARGET_NAMES:
        raise MrcError(f"unknown target {name!r}: choose from {', '.join(TARGET_NAMES)}")
    if name == "remote":
        return None
    if os.geteuid() != 0:
        return "needs root: network namespaces, XDP and raw sockets"
    if name == "bmv2":
        from ..switch.bmv2 import find_tool
        if find_tool("simple_switch_grpc") is None:
            return "bmv2: simple_switch_grpc not found on PATH or in /opt/p4tools/bin"
        program = program or Program.mrc_switch()
        for path in (program.json, program.p4info):
            if not Path(path).is_file():
                return f"bmv2: {path} is missing"
    if name == "kernel":
        ok, why = kernel_ref.next_csid_support()
        if not ok:
            return f"kernel: {why}"
    if name == "ebpf":
        from ..bpf import BpfError, object_path
        try:
            object_path("mrc_switch")
        except BpfError as exc:
            return f"ebpf: {exc}"
    return None


def feature_skip(target: Target, feature: str) -> None:
    """Raise :class:`Unsupported` when ``target`` lacks ``feature`` (one of :data:`FEATURES`).

    Raises:
        MrcError: ``feature`` is not one of :data:`FEATURES`.
    """
    if feature not in FEATURES:
        raise MrcError(f"unknown feature {feature!r}: choose from {', '.join(FEATURES)}")
    if feature not in target.features:
        why = {"kernel": "the kernel reference (seg6local End next-csid) forwards uN only: no trimming, no ECN, "
                         "no ECMP groups, no drop reasons, no counters"}.get(target.name, "")
        raise Unsupported(f"{target.name} target has no {feature}" + (f": {why}" if why else ""))

