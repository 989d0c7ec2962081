"""The report of ``mrc traffic``: one row per flow, the summary over flows, JSON and a plot.

Times are CLOCK_MONOTONIC; a flow's completion time (FCT) runs from its post to its completion
at the writer, in seconds. Goodput is RDMA payload bytes per FCT, in Gb/s in the JSON (Mb/s in
the text and the plot); the aggregate is all bytes over the run's wall time. Percentiles are numpy's (linear interpolation).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import BaseModel

from ..common import JsonFile

SCHEMA_VERSION = 1


class FlowResult(BaseModel):
    """One flow: its QP's id, hosts, size and number of writes; when the writer posted its
    first write and completed its last (ns, None if it did not complete), and for a flow of
    several writes each completed write's [post, completion] (ns); whether the receiver saw
    its last write (``arrived``) and whether its bytes then matched (``verified``); the error
    if any."""

    id: int
    src: str
    dst: str
    size: int
    writes: int = 1
    start_ns: int | None
    end_ns: int | None
    writes_ns: list[tuple[int, int]] = []
    arrived: bool = False
    verified: bool
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Completed, and every byte verified at the receiver."""
        return self.error is None and self.verified and self.end_ns is not None

    @property
    def fct_s(self) -> float | None:
        """Flow completion time in seconds, or None."""
        if self.start_ns is None or self.end_ns is None:
            return None
        return (self.end_ns - self.start_ns) / 1e9

    @property
    def write_fcts_s(self) -> list[float]:
        """The completion time of each completed write of a flow of several writes, seconds."""
        return [(end - start) / 1e9 for start, end in self.writes_ns]

    @property
    def goodput_gbps(self) -> float | None:
        """Payload Gb/s over the flow's completion time, or None."""
        fct = self.fct_s
        return None if not fct else self.size * 8 / fct / 1e9


class Summary(BaseModel):
    """Over the flows that completed: FCT median and p99 (s), goodput median and p99 (Gb/s;
    p99 is the 1st percentile, the slow tail), and the aggregate goodput (Gb/s)."""

    flows: int
    ok: int
    failed: int
    bytes_verified: int
    wall_s: float
    aggregate_gbps: float
    fct_median_s: float | None
    fct_p99_s: float | None
    goodput_median_gbps: float | None
    goodput_p99_gbps: float | None


class TrafficReport(JsonFile):
    """Everything one ``mrc traffic`` run measured. ``passed``: every flow ok."""

    schema_version: int = SCHEMA_VERSION
    pattern: str
    fabric: str
    endpoint: str = "python"
    transport: str = "mrc"
    seed: int
    started_ns: int
    finished_ns: int
    flows: list[FlowResult]
    placed: dict[str, list[list[int]]] = {}
    """host -> ``[t_ns, bytes placed so far]`` samples of its receiving worker (with
    ``progress_s``; empty otherwise)."""

    @property
    def passed(self) -> bool:
        """Every flow completed and verified."""
        return all(f.ok for f in self.flows)

    def summary(self) -> Summary:
        """The figures over all flows (see :class:`Summary`)."""
        done = [f for f in self.flows if f.ok]
        fct = np.array([f.fct_s for f in done], dtype=float)
        gput = np.array([f.goodput_gbps for f in done if f.goodput_gbps is not None], dtype=float)
        wall = max((self.finished_ns - self.started_ns) / 1e9, 1e-9)
        verified = sum(f.size for f in done)

        def pct(values, q):
            return float(np.percentile(values, q)) if len(values) else None

        return Summary(flows=len(self.flows), ok=len(done), failed=len(self.flows) - len(done),
                       bytes_verified=verified, wall_s=wall, aggregate_gbps=verified * 8 / wall / 1e9,
                       fct_median_s=pct(fct, 50), fct_p99_s=pct(fct, 99),
                       goodput_median_gbps=pct(gput, 50), goodput_p99_gbps=pct(gput, 1))

    def lines(self, *, worst: int = 5) -> list[str]:
        """The report as text lines: the summary, the ``worst`` slowest flows, every failure."""
        s = self.summary()

        def ms(v):
            return "-" if v is None else f"{v * 1e3:.1f} ms"

        def mb(v):
            return "-" if v is None else f"{v * 1e3:.3g} Mb/s"

        out = [f"pattern      {self.pattern} on fabric {self.fabric}, {self.endpoint} endpoint, seed {self.seed}",
               f"flows        {s.flows} ({s.ok} ok, {s.failed} failed), {s.bytes_verified} B verified "
               f"in {s.wall_s:.2f} s",
               f"aggregate    {mb(s.aggregate_gbps)}",
               f"FCT          median {ms(s.fct_median_s)}, p99 {ms(s.fct_p99_s)}",
               f"goodput/QP   median {mb(s.goodput_median_gbps)}, p99 (slowest 1 %) {mb(s.goodput_p99_gbps)}"]
        slow = sorted((f for f in self.flows if f.ok), key=lambda f: f.fct_s or 0.0, reverse=True)[:worst]
        if slow:
            out.append("slowest      " + ", ".join(f"{f.src}->{f.dst} {ms(f.fct_s)}" for f in slow))
        out += [f"FAILED       flow {f.id} {f.src}->{f.dst}: {f.error or 'not verified'}"
                for f in self.flows if not f.ok]
        return out

    def plot(self, path: str | Path) -> None:
        """A PNG: the CDF of flow completion times, and each flow's goodput by flow id."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        done = [f for f in self.flows if f.ok]
        fig, (cdf, bars) = plt.subplots(1, 2, figsize=(11, 4))
        fct = np.sort([(f.fct_s or 0.0) * 1e3 for f in done])  # a completed flow has its FCT
        if len(fct):
            cdf.step(fct, np.arange(1, len(fct) + 1) / len(fct), where="post")
        cdf.set(xlabel="flow completion time (ms)", ylabel="fraction of flows",
                title=f"{self.pattern}: {len(done)} of {len(self.flows)} flows")
        cdf.grid(alpha=0.3)
        bars.bar([f.id for f in done], [(f.goodput_gbps or 0.0) * 1e3 for f in done], width=0.8)
        bars.set(xlabel="flow (QP)", ylabel="goodput (Mb/s)", title="goodput per QP")
        bars.grid(alpha=0.3, axis="y")
        fig.tight_layout()
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=100)
        plt.close(fig)
