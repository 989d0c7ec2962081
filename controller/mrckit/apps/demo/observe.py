"""What the demo watches while the write runs: the sender's EV table (sampled), every host
agent's EV events (streamed), the controller's timeline, and the switch counters.

All of it over the parts' own interfaces: the host agents' gRPC (``GetStats``, ``WatchEvents``),
the controller's status (its gRPC northbound), and P4Runtime Read for the switches (design sections 4, 5, 7).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import grpc

from ...errors import MrcError
from ...proto import host_agent_pb2 as pb
from ...proto import host_agent_pb2_grpc as pbg
from .report import SwitchCounts
from .scenario import AgentEvent, ControllerEvent
from .series import Recorder

SAMPLE_S = 0.05
"""Sampling period of the sender's EV counters and the responder's placed bytes."""


class EvTableSampler:
    """A thread that reads the sender's EV table toward one peer over the agent's gRPC API
    every ``SAMPLE_S`` and records it with ``placed()`` into ``rec``; a slow read never holds
    up the fault and restore, which the main loop fires. ``path_of(ev) -> (plane, spine)``, when
    given, replaces the spine an EV's own T1 field names (EV-hash mode: the hash decides)."""

    def __init__(self, host, peer: str, rec: Recorder, placed, path_of=None):
        self.peer, self.rec, self.placed, self.path_of = peer, rec, placed, path_of
        self.channel = grpc.insecure_channel(host.agent_address)
        self.stub = pbg.HostAgentStub(self.channel)
        self.last_rows: list[dict] = []
        try:  # before the write starts: earlier writes' packets are not its
            rec.begin(self.rows())
        except grpc.RpcError as exc:
            self.channel.close()
            raise MrcError(f"cannot read {host.name}'s EV table from its agent: {exc.code().name}") from None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.sample()
                self._stop.wait(SAMPLE_S)
        except grpc.RpcError:
            pass  # the agent went away; the demo fails on the write, not here

    def sample(self) -> None:
        """Read the EV table once and record it."""
        # Stamped before the read: the counts are at least as new as the stamp, so a sample
        # stamped after an event never holds counts from before it.
        t_ns, placed = time.monotonic_ns(), self.placed()
        rows = self.rows()
        self.rec.record(t_ns, placed, rows, time.monotonic_ns())
        self.last_rows = rows

    def rows(self) -> list[dict]:
        stats = self.stub.GetStats(pb.GetStatsRequest(include_evs=True, peer=self.peer), timeout=10)
        return [dict(ev=e.ev, plane=e.plane, t1=self.path_of(e.ev)[1] if self.path_of else e.t1,
                     state=pb.EvState.Name(e.state), tx_packets=e.tx_packets,
                     last_tx_ns=e.last_tx_ns, retired=e.retired)
                for p in stats.peers for e in p.evs]

    def stop(self) -> None:
        """Stop the thread, take a last sample, close the channel (idempotent)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(15)
        try:
            self.sample()
        except grpc.RpcError:
            pass  # the agent went away (an error is being raised already): keep the samples we have
        self.channel.close()


class EventWatcher:
    """Collects one host agent's WatchEvents stream in a thread."""

    def __init__(self, host):
        self.host = host.name
        self.channel = grpc.insecure_channel(host.agent_address)
        self.events: list[AgentEvent] = []
        self._lock = threading.Lock()
        self.stream = pbg.HostAgentStub(self.channel).WatchEvents(pb.WatchEventsRequest())
        self.thread = threading.Thread(target=self._pump, name=f"demo-events-{host.name}", daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        try:
            for e in self.stream:
                event = AgentEvent(self.host, e.timestamp_ns, e.peer, e.ev, pb.EvState.Name(e.old_state),
                                   pb.EvState.Name(e.new_state), e.reason, e.plane, e.link, e.probe_ok,
                                   e.replaced_by)
                with self._lock:
                    self.events.append(event)
        except grpc.RpcError:
            pass  # cancelled by stop(), or the agent went away

    def snapshot(self) -> list[AgentEvent]:
        with self._lock:
            return list(self.events)

    def stop(self) -> None:
        self.stream.cancel()
        self.thread.join(2)
        self.channel.close()


def dataplane_rows(host, peer: str) -> list[dict]:
    """The sender's EV set toward ``peer`` read straight from its host dataplane's
    ``peer_evs`` map (found through the tc egress program on the host's NIC device), as rows
    like :meth:`EvTableSampler.rows` (slots only; the agent's retired EVs are not in the map).
    A read of the map never waits for the agent, which a storm of EV events can keep busy for
    seconds; the demo uses it for its snapshots at the fault and the restore. Raises MrcError
    when the program or map cannot be found."""
    import ipaddress

    from ... import netns
    from ...bpf.attach import tc_query
    from ...bpf.errors import BpfError
    from ...bpf.maps import Map
    from ...bpf.objects import prog_map_ids
    from ...fabric.nodes import NIC_DEVICE
    from ...host.maps import EvSet, PeerKey, state_name
    from ...wire.ev import ev_unpack

    try:
        with netns.enter(host.ns):
            prog_id = tc_query(NIC_DEVICE, "egress")
        if not prog_id:
            raise MrcError(f"no tc egress program on {host.name}'s {NIC_DEVICE}")
        key = PeerKey(*ipaddress.IPv6Address(peer).packed)
        for map_id in prog_map_ids(prog_id):
            try:
                opened = Map.from_id(map_id)
            except BpfError:
                continue  # freed since the program listed it
            with opened as m:
                if m.name != "peer_evs":
                    continue
                evset = m.typed(key_type=PeerKey, value_type=EvSet).lookup(key)
            if evset is None:
                return []
            rows = []
            for s in evset.slots[:evset.n]:
                plane, t1, _ = ev_unpack(s.ev)
                rows.append(dict(ev=s.ev, plane=plane, t1=t1, state=state_name(s.state), tx_packets=s.tx_packets,
                                 last_tx_ns=s.last_tx_ns, retired=False))
            return rows
    except OSError as exc:
        raise MrcError(f"cannot read {host.name}'s EV set: {exc}") from None
    raise MrcError(f"no peer_evs map behind {host.name}'s tc egress program")


def controller_events(fab) -> list[ControllerEvent]:
    """The controller's timeline (wall-clock marks) on the monotonic clock of the samples."""
    from ...control.client import read_status

    try:
        status = read_status(fab.name)
    except MrcError:
        return []
    offset = time.time_ns() - time.monotonic_ns()
    # reroute/restore: EV-hash mode's repair (a group rewritten), never seen in SRv6 mode.
    kinds = {"deny_all_hosts": "DENY", "lifted": "LIFT", "localised": "LOCALISED", "reroute": "REROUTE",
             "restore": "RESTORE", "link_down": "LINK_DOWN", "link_up": "LINK_UP"}
    return [ControllerEvent(int(m["time_ns"]) - offset, kinds.get(m["kind"], m["kind"]), tuple(m.get("links", ())),
                            m.get("detail", ""))
            for m in status.get("timeline", []) if m.get("kind") in kinds]


def switch_counts(fab, p4info: Path) -> SwitchCounts:
    from ...control.pipeline import load_pipeline
    from .counters import fabric_counts, read_counters

    schema = load_pipeline(p4info, b"").schema
    return fabric_counts(fab.topology, lambda name: read_counters(
        fab.switch_address(name), fab.state.device_ids[name], schema))


def link_counters(fab, p4info: Path, a: str, b: str) -> dict[str, int]:
    """Packet counters of both ends of link a–b (switches): ``{"a_tx", "a_rx", "b_tx",
    "b_rx"}`` from ``tx_port``/``rx_port`` of each end's port on the link, over P4Runtime (any
    target). Raises MrcError when a switch does not answer."""
    from ...control.pipeline import load_pipeline
    from .counters import read_counters

    schema = load_pipeline(p4info, b"").schema
    out = {}
    for end, node, peer in (("a", a, b), ("b", b, a)):
        port = next(p.number for p in fab.compiled.switch(node).ports if p.peer == peer)
        c = read_counters(fab.switch_address(node), fab.state.device_ids[node], schema, ("tx_port", "rx_port"))
        out[f"{end}_tx"], out[f"{end}_rx"] = c["tx_port"].get(port, 0), c["rx_port"].get(port, 0)
    return out
