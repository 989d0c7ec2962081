"""What ``t1-failure`` does to the fabric and reads from it: the dead T1 (:class:`DeadT1`, its
fault on a thread of its own, with the dataplane counters and EV tables read before the
restore), and the aggregate goodput of an all-to-all from its receivers' placed bytes."""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...errors import MrcError

BIN_S = 0.5
"""The goodput plot's interval, seconds."""
OUT_OF_SERVICE = ("ASSUMED_BAD", "DENIED")


@dataclass(frozen=True)
class EvRow:
    """One EV of a host's set toward ``peer``, as its agent reports it (``GetStats``)."""

    peer: ipaddress.IPv6Address
    plane: int
    t1: int
    state: str
    last_tx_ns: int
    retired: bool


class DeadT1:
    """T1 switch ``switch`` of a running fabric ``fab`` blackholed on every link (both ends)
    from ``at_s`` after the traffic's start for ``for_s`` seconds, on a thread (:meth:`start`,
    :meth:`go` when the traffic starts, :meth:`finish` once it ended). Before the restore it
    reads: the fault programs' drops (``drops``), the T1's ``tx_port`` packets while failed
    (``t1_tx_during``), every host's EV table and denied links. Times: CLOCK_MONOTONIC ns."""

    def __init__(self, fab, switch: str, at_s: float, for_s: float, say: Callable[[str], None] = lambda _: None):
        self.fab, self.switch, self.at_s, self.for_s, self.say = fab, switch, at_s, for_s, say
        sw = next(s for s in fab.topology.switches if s.name == switch)
        self.plane, self.index = sw.plane, sw.index
        self.links = [(p.peer, switch) for p in fab.compiled.switch(switch).ports]
        self.t_go_ns: int | None = None
        self.t_fault_ns: int | None = None
        self.t_restore_ns: int | None = None
        self.drops = 0
        self.t1_tx_during: int | None = None
        self.rows: dict[str, list[EvRow]] = {}
        self.denied: dict[str, set[str]] = {}
        self._go, self._end = threading.Event(), threading.Event()
        self._failed: list[tuple[str, str]] = []
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._run, name=f"dead-{switch}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def go(self, t_ns: int) -> None:
        """The traffic started at ``t_ns``."""
        self.t_go_ns = t_ns
        self._go.set()

    def finish(self) -> None:
        """End the fault now if it still holds, restore, and wait for the thread.

        Raises:
            MrcError: the fault or a read failed, or the traffic ended before the fault began.
        """
        self._end.set()
        self._thread.join()
        if self._error:
            raise MrcError(f"T1 failure of {self.switch}: {self._error}") from self._error
        if self.t_fault_ns is None:
            raise MrcError(f"the traffic ended before {self.switch} could fail; use a longer --duration")

    def times(self) -> tuple[int, int, int]:
        """(traffic start, fault, restore), CLOCK_MONOTONIC ns, once :meth:`finish` returned.

        Raises:
            MrcError: the fault did not happen (yet).
        """
        if self.t_go_ns is None or self.t_fault_ns is None or self.t_restore_ns is None:
            raise MrcError(f"the failure of {self.switch} has not happened")
        return self.t_go_ns, self.t_fault_ns, self.t_restore_ns

    def _run(self) -> None:
        try:
            self._go.wait()
            go_s = (self.t_go_ns or time.monotonic_ns()) / 1e9
            if self._end.wait(max(go_s + self.at_s - time.monotonic(), 0)):
                return
            for a, b in self.links:
                self.fab.fail_link(a, b, "blackhole")
                self._failed.append((a, b))
            self.t_fault_ns = time.monotonic_ns()  # every packet sent on the T1 from now is dropped
            tx0 = self._t1_tx()
            self.say(f"{self.switch} failed: its {len(self.links)} links blackholed")
            self._end.wait(self.for_s)
            self._read_hosts()
            self.drops = self._drops()
            self.t1_tx_during = self._t1_tx() - tx0
        except Exception as exc:  # raised by finish(), in the caller's thread
            self._error = exc
        finally:
            self._restore()

    def _restore(self) -> None:
        for a, b in self._failed:
            self.fab.restore(a, b)
        if self._failed:
            self.t_restore_ns = time.monotonic_ns()
            self.say(f"{self.switch} restored")

    def _t1_tx(self) -> int:
        from ...control.pipeline import load_pipeline
        from ..demo.counters import read_counters
        from ..demo.run import pipeline_files

        schema = load_pipeline(pipeline_files("ebpf")[0], b"").schema
        c = read_counters(self.fab.switch_address(self.switch), self.fab.state.device_ids[self.switch], schema,
                          ("tx_port",))
        return sum(c["tx_port"].values())

    def _drops(self) -> int:
        from ...fabric import faults
        from ...fabric.faultctl import find_link

        total = 0
        for a, b in self._failed:
            na, ia, nb, ib = find_link(self.fab.state, a, b)
            total += sum(faults.read_stats(self.fab.state.nodes[n], i).dropped_blackhole for n, i in ((na, ia), (nb, ib)))
        return total

    def _read_hosts(self) -> None:
        import grpc

        from ...proto import host_agent_pb2 as pb
        from ...proto import host_agent_pb2_grpc as pbg

        for name in self.fab.hosts():
            with grpc.insecure_channel(self.fab.host(name).agent_address) as channel:
                stats = pbg.HostAgentStub(channel).GetStats(pb.GetStatsRequest(include_evs=True), timeout=30)
            self.rows[name] = [EvRow(ipaddress.IPv6Address(p.peer), e.plane, e.t1, pb.EvState.Name(e.state),
                                     e.last_tx_ns, e.retired) for p in stats.peers for e in p.evs]
            self.denied[name] = set(stats.denied_links)

    def _dead_rows(self, host: str, peer: ipaddress.IPv6Address) -> list[EvRow]:
        return [r for r in self.rows.get(host, []) if r.peer == peer and (r.plane, r.t1) == (self.plane, self.index)]

    def exposed(self, host: str, peer: ipaddress.IPv6Address) -> bool:
        """``host``'s EV set toward ``peer`` holds an EV across the dead T1, in any state: the
        event whose chance is 1 - (1 - 1/S)^E."""
        return bool(self._dead_rows(host, peer))

    def sent_on_dead(self, host: str, peer: ipaddress.IPv6Address) -> bool:
        """``host``'s EV set toward ``peer`` sent on an EV across the dead T1 during the fault."""
        t_fault = self.times()[1]
        return any(r.last_tx_ns >= t_fault for r in self._dead_rows(host, peer))

    def taken_out(self, host: str, peer: ipaddress.IPv6Address, leaves: tuple[int, int]) -> bool:
        """By the restore, ``host`` had taken every EV across the dead T1 toward ``peer`` out
        of service (ASSUMED_BAD, DENIED, retired), or denied a link of it that the path crosses
        (``leaves``: the host's and the peer's leaf)."""
        links = {f"p{self.plane}/t0-{leaf}/t1-{self.index}" for leaf in leaves}
        if links & self.denied.get(host, set()):
            return True
        return all(r.retired or r.state in OUT_OF_SERVICE for r in self._dead_rows(host, peer))


def _placed_at(report, t_ns: float) -> float:
    """Bytes placed at every receiver by ``t_ns`` (each host's samples interpolated)."""
    total = 0.0
    for samples in report.placed.values():
        ts, bs = zip(*samples)
        total += float(np.interp(t_ns, ts, bs))
    return total


def window_gbps(report, t0_ns: float, t1_ns: float) -> float | None:
    """Aggregate goodput (payload Gb/s placed at all receivers) of a ``mrc traffic`` report
    with ``placed`` samples, between ``t0_ns`` and ``t1_ns``; None for an empty window."""
    if t1_ns <= t0_ns or not report.placed:
        return None
    return (_placed_at(report, t1_ns) - _placed_at(report, t0_ns)) * 8 / (t1_ns - t0_ns)


def aggregate_series(report, bin_s: float = BIN_S) -> dict[str, list[float]]:
    """The aggregate goodput over time: ``t_s`` (interval midpoints from the start) and ``gbps``."""
    if not report.placed:
        return dict(t_s=[], gbps=[])
    end = max(s[-1][0] for s in report.placed.values())
    edges = np.arange(report.started_ns, end + bin_s * 1e9, bin_s * 1e9)
    placed = [_placed_at(report, t) for t in edges]
    return dict(t_s=[round((a - report.started_ns) / 1e9 + bin_s / 2, 3) for a in edges[:-1]],
                gbps=[round((b - a) * 8 / (bin_s * 1e9), 6) for a, b in zip(placed, placed[1:])])
