"""EV events: what WatchEvents streams (state changes with timestamps and reasons)."""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from dataclasses import dataclass

HISTORY = 20_000
"""Events kept for WatchEvents(replay=True) and for tests."""


@dataclass(frozen=True)
class EvEvent:
    """One EV state change or probe result.

    timestamp_ns: CLOCK_MONOTONIC ns (the dataplane's ``bpf_ktime_get_ns`` clock);
    wall_time_ns: CLOCK_REALTIME ns when the agent recorded it; peer: the peer NIC address as
    text ('' for host-wide events); states are ``EvState`` ints; reason a ``Reason`` name.
    A change to ASSUMED_BAD (a failure report) also carries ``ev_counters`` (tx_packets,
    tx_bytes, acked, nacks, skips, unacked_tx) and ``plane_stats`` (a
    :mod:`~mrckit.host.planestats` row); ``opaque`` is set in ecmp mode.
    """

    timestamp_ns: int
    wall_time_ns: int
    peer: str
    ev: int
    old_state: int
    new_state: int
    reason: str
    replaced_by: int = 0
    probe_ok: bool = False
    plane: int = 0
    link: str = ""
    opaque: bool = False              # ecmp mode: the EV names no path
    ev_counters: dict | None = None   # failure reports: the EV's counters (EvCounters)
    plane_stats: dict | None = None   # failure reports: its plane toward the peer (PlaneStats)


class EventHub:
    """Fan-out of events to any number of subscribers, plus a bounded history."""

    def __init__(self):
        self._lock = threading.Lock()
        self._subs: list[queue.Queue] = []
        self.history: deque[EvEvent] = deque(maxlen=HISTORY)

    def publish(self, event: EvEvent) -> None:
        with self._lock:
            self.history.append(event)
            for q in self._subs:
                q.put(event)

    def subscribe(self, replay: bool = False) -> queue.Queue:
        """A queue that receives every event from now on (after the history, with ``replay``)."""
        q: queue.Queue = queue.Queue()
        with self._lock:
            if replay:
                for event in self.history:
                    q.put(event)
            self._subs.append(q)
        return q

    def unsubscribe(self, q: queue.Queue) -> None:
        with self._lock:
            if q in self._subs:
                self._subs.remove(q)
            q.put(None)  # wakes a waiting reader

    def close(self) -> None:
        with self._lock:
            subs, self._subs = self._subs, []
        for q in subs:
            q.put(None)


def make_event(peer: str, ev: int, old: int, new: int, reason: str, *, ts_ns: int | None = None,
               **extra) -> EvEvent:
    """An :class:`EvEvent` stamped now (or at ``ts_ns``, a CLOCK_MONOTONIC time)."""
    return EvEvent(ts_ns if ts_ns is not None else time.monotonic_ns(), time.time_ns(), peer, ev,
                   int(old), int(new), reason, **extra)
