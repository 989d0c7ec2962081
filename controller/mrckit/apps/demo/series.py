"""Time series of a transfer, sampled from the sender's host agent.

The agent's EV table (``GetStats(include_evs)``, design section 5) has per-EV data counters:
``tx_packets`` counts what tc egress sent on that EV. Probes are built by the agent and sent on
the plane port directly, so they never pass tc egress and are not in these counters.

A slot's counters restart at zero when its EV is replaced by a backup, a retired EV keeps the
count it had when it left the set, and an EV probed back may later return with fresh counters.
:class:`PathCounter` turns those rows into monotonic per-path (plane × spine) totals.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import overload

from .report import Series, path_name


@dataclass
class _EvCount:
    base: int = 0   # packets of the EV's earlier lives in the set
    last: int = 0   # the current life's count, as last seen

    @property
    def total(self) -> int:
        return self.base + self.last


class PathCounter:
    """Cumulative data packets per EV and per path, from successive EV-table reads.

    Feed every read to :meth:`update` (rows as ``mrckit.host.agent.HostAgent.ev_table`` or the
    gRPC ``EvInfo`` give them: ``ev``, ``plane``, ``t1``, ``tx_packets``, ``retired``). The
    agent keeps an EV's count across its lives (retired, probed back, reused: the dataplane
    hands the last count over when the EV leaves a slot), so counts only go down when a peer's
    set is made anew (its LRU entry evicted, the agent reconfigured): a slot row below the
    last count seen for that EV starts a new life, and the old count is kept. A retired row
    is the count when the EV left its slot: it can raise the count, never start a new life.
    """

    def __init__(self):
        self._evs: dict[int, _EvCount] = {}
        self._path: dict[int, tuple[int, int]] = {}
        self._start: dict[int, int] = {}

    def start_here(self) -> None:
        """Count from the reads so far: what they hold (an earlier write's packets, such as the
        demo's warm-up write) is left out of :meth:`per_ev` and :meth:`per_path`."""
        self._start = {ev: c.total for ev, c in self._evs.items()}

    def update(self, rows: Iterable[Mapping]) -> None:
        """Account one read of the EV table."""
        for row in rows:
            ev, tx = int(row["ev"]), int(row["tx_packets"])
            count = self._evs.setdefault(ev, _EvCount())
            self._path[ev] = (int(row["plane"]), int(row["t1"]))
            if row.get("retired"):
                count.last = max(count.last, tx)
                continue
            if tx < count.last:
                count.base += count.last
            count.last = tx

    def per_path(self) -> dict[tuple[int, int], int]:
        """(plane, spine) -> data packets sent so far on EVs of that path."""
        out: dict[tuple[int, int], int] = {}
        for ev, n in self.per_ev().items():
            key = self._path[ev]
            out[key] = out.get(key, 0) + n
        return out

    def per_ev(self) -> dict[int, int]:
        """EV -> data packets sent so far on it (since :meth:`start_here`)."""
        return {ev: c.total - self._start.get(ev, 0) for ev, c in self._evs.items()}


@dataclass
class Sample:
    """One sample: CLOCK_MONOTONIC time (ns), bytes placed at the responder so far, and
    cumulative data packets per (plane, spine) path."""

    t_ns: int
    bytes_placed: int
    path_packets: dict[tuple[int, int], int]


@dataclass
class Recorder:
    """Samples of one transfer, with ``t0_ns`` the transfer's start (CLOCK_MONOTONIC);
    ``ev_samples`` keeps each sample's cumulative data packets per EV, ``(t_ns, {EV: packets})``,
    ``ev_last_tx`` per EV when the last packet those counts hold was sent (the rows'
    ``last_tx_ns``, the latest seen), and ``ev_read_end_ns`` when each read ended, for the loss
    accounting (``mrckit.apps.demo.loss``)."""

    t0_ns: int
    paths: list[tuple[int, int]]
    samples: list[Sample] = field(default_factory=list)
    counter: PathCounter = field(default_factory=PathCounter)
    ev_samples: list[tuple[int, dict[int, int]]] = field(default_factory=list)
    ev_last_tx: list[dict[int, int]] = field(default_factory=list)
    ev_read_end_ns: list[int] = field(default_factory=list)
    _last_tx: dict[int, int] = field(default_factory=dict)

    def begin(self, ev_rows: Iterable[Mapping]) -> None:
        """Count from this EV-table read, taken before the transfer starts: the packets it
        holds belong to earlier writes."""
        self.counter.update(ev_rows)
        self.counter.start_here()

    def record(self, t_ns: int, bytes_placed: int, ev_rows: Iterable[Mapping],
               read_end_ns: int | None = None) -> Sample:
        """Account an EV-table read begun at ``t_ns`` (and ended at ``read_end_ns``, default
        ``t_ns``) and append a sample."""
        ev_rows = list(ev_rows)
        self.counter.update(ev_rows)
        for row in ev_rows:
            ev = int(row["ev"])
            self._last_tx[ev] = max(self._last_tx.get(ev, 0), int(row.get("last_tx_ns") or 0))
        self.ev_samples.append((t_ns, self.counter.per_ev()))
        self.ev_last_tx.append(dict(self._last_tx))
        self.ev_read_end_ns.append(t_ns if read_end_ns is None else read_end_ns)
        per_path = self.counter.per_path()
        sample = Sample(t_ns, bytes_placed, {p: per_path.get(p, 0) for p in self.paths})
        self.samples.append(sample)
        return sample

    # A time that is set gives plain seconds: the report's required times take them as they are.
    @overload
    def seconds(self, t_ns: int) -> float: ...

    @overload
    def seconds(self, t_ns: None) -> None: ...

    def seconds(self, t_ns: int | None) -> float | None:
        """``t_ns`` as seconds since the transfer started (None stays None)."""
        return None if t_ns is None else (t_ns - self.t0_ns) / 1e9

    def series(self) -> Series:
        """The samples as the report's :class:`Series`."""
        return Series(t_s=[(s.t_ns - self.t0_ns) / 1e9 for s in self.samples],
                      bytes_placed=[s.bytes_placed for s in self.samples],
                      path_packets={path_name(*p): [s.path_packets[p] for s in self.samples]
                                    for p in self.paths})

    def at(self, t_ns: int) -> Sample:
        """The first sample taken at or after ``t_ns`` (the last sample if none)."""
        return next((s for s in self.samples if s.t_ns >= t_ns), self.samples[-1])

    def before(self, t_ns: int) -> Sample:
        """The last sample taken at or before ``t_ns`` (the first sample if none)."""
        return next((s for s in reversed(self.samples) if s.t_ns <= t_ns), self.samples[0])

    def read_by(self, t_ns: int) -> Sample:
        """The last sample whose EV-table read had ended by ``t_ns`` (the first sample if
        none). Its packet counts hold nothing sent after ``t_ns``; those of :meth:`before`
        can, when the read began before ``t_ns`` and the agent answered after it."""
        ends = zip(reversed(self.samples), reversed(self.ev_read_end_ns))
        return next((s for s, end in ends if end <= t_ns), self.samples[0])
