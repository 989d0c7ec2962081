"""What the demo watches while the write runs: the sender's EV table (sampled), every host
agent's EV events (streamed), the controller's timeline, and the switch counters.

All of it over the parts' own interfaces: the host agents' gRPC (``GetStats``, ``WatchEvents``),
the controller's status file, and P4Runtime Read for the switches (design sections 4, 5, 7).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import grpc

from ..errors import MrcError
from ..proto import host_agent_pb2 as pb
from ..proto import host_agent_pb2_grpc as pbg
from .report import SwitchCounts
from .scenario import AgentEvent, ControllerEvent
from .series import Recorder

SAMPLE_S = 0.05
"""Sampling period of the sender's EV counters and the responder's placed bytes."""


class EvTableSampler:
    """A thread that reads the sender's EV table toward one peer over the agent's gRPC API
    every ``SAMPLE_S`` and records it with ``placed()`` into ``rec``; a slow read never holds
    up the fault and restore, which the main loop fires."""

    def __init__(self, host, peer: str, rec: Recorder, placed):
        self.peer, self.rec, self.placed = peer, rec, placed
        self.channel = grpc.insecure_channel(host.agent_address)
        self.stub = pbg.HostAgentStub(self.channel)
        self.last_rows: list[dict] = []
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
        self.rec.record(t_ns, placed, rows)
        self.last_rows = rows

    def rows(self) -> list[dict]:
        stats = self.stub.GetStats(pb.GetStatsRequest(include_evs=True, peer=self.peer), timeout=10)
        return [dict(ev=e.ev, plane=e.plane, t1=e.t1, state=pb.EvState.Name(e.state), tx_packets=e.tx_packets,
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


def controller_events(fab) -> list[ControllerEvent]:
    """The controller's timeline (wall-clock marks) on the monotonic clock of the samples."""
    from ..control.status import read_status, status_path

    try:
        status = read_status(status_path(fab.name))
    except MrcError:
        return []
    offset = time.time_ns() - time.monotonic_ns()
    kinds = {"deny_all_hosts": "DENY", "lifted": "LIFT", "localised": "LOCALISED"}
    return [ControllerEvent(int(m["time_ns"]) - offset, kinds.get(m["kind"], m["kind"]), tuple(m.get("links", ())),
                            m.get("detail", ""))
            for m in status.get("timeline", []) if m.get("kind") in kinds]


def switch_counts(fab, p4info: Path) -> SwitchCounts:
    from ..control.pipeline import load_pipeline
    from .counters import fabric_counts, read_counters

    schema = load_pipeline(p4info, b"").schema
    return fabric_counts(fab.topology, lambda name: read_counters(
        fab.switch_address(name), fab.state.device_ids[name], schema))
