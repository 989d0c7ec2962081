"""What the transport-comparison experiments share (random-loss, load-balance): writes of QPs
of one transport (``mrc`` or the RC baseline ``rc``, ``mrckit.endpoint.choices``) between pairs
of hosts of a fabric brought up for that transport, every byte verified by the traffic workers
(``mrckit.apps.traffic``), with what the sender's host dataplane and the fault programs
counted meanwhile."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..traffic import run_traffic
from ..traffic.patterns import Flow

WRITE_TIMEOUT_S = 90.0
"""How long one run's writes may take once started: RC under loss crawls (go-back-N)."""
WRITE_TIMEOUT_EXP = 10
"""The writers' RTO, 1.024 us x 2^10 (1 ms): above the native endpoint's ack delays on this
loaded 2-core machine (spurious timeouts cost go-back-N a whole window), the same for both
transports."""


@dataclass
class WriteRun:
    """One run: ``qps`` QPs of ``bytes_per_qp`` each for every (source, destination) host pair
    of ``pairs``, all at once.

    Attributes:
        transport: ``mrc`` or ``rc``. loss_percent: random loss on every link (0: none).
        seconds: first post to last completion (CLOCK_MONOTONIC). verified: every QP completed
            and its bytes matched. errors: why QPs failed. evs_used: per pair (``src>dst``), EV
            -> packets the source's dataplane sent toward the destination on it during the run.
            fault_seen/fault_dropped: what the loss programs saw and dropped, both ends of every
            link. links: the load per link (free form, set by the experiment).
    """

    transport: str
    loss_percent: float
    qps: int
    bytes_per_qp: int
    pairs: tuple[tuple[str, str], ...] = (("h0-0", "h1-0"),)
    seconds: float | None = None
    verified: bool = False
    errors: list[str] = field(default_factory=list)
    evs_used: dict[str, dict[int, int]] = field(default_factory=dict)
    fault_seen: int = 0
    fault_dropped: int = 0
    links: dict[str, int] = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        return self.qps * len(self.pairs) * self.bytes_per_qp

    @property
    def goodput_mbps(self) -> float | None:
        """Aggregate goodput, MB/s (10^6 B), or None when the run failed."""
        if not self.verified or not self.seconds:
            return None
        return self.total_bytes / self.seconds / 1e6

    @property
    def evs_per_pair(self) -> list[int]:
        """How many EVs each pair's packets used (one entry per pair)."""
        return [len(self.evs_used.get(f"{s}>{d}", {})) for s, d in self.pairs]

    def summary(self) -> dict:
        """The run as JSON-ready figures, for a record's details."""
        return dict(transport=self.transport, loss_percent=self.loss_percent, qps=self.qps,
                    pairs=[f"{s}>{d}" for s, d in self.pairs], bytes_per_qp=self.bytes_per_qp,
                    seconds=self.seconds, goodput_mbps=self.goodput_mbps, verified=self.verified,
                    errors=self.errors[:3], evs_used=max(self.evs_per_pair, default=0),
                    evs_per_pair=self.evs_per_pair, fault_seen=self.fault_seen, fault_dropped=self.fault_dropped,
                    links=self.links)


def evs_sent(fab, src: str, dst: str) -> dict[int, int]:
    """EV -> packets host ``src``'s dataplane has sent on it toward host ``dst`` (its agent's
    per-EV counters)."""
    stats = fab.host(src).stats(include_evs=True, peer=fab.host(dst).nic_address)
    return {e.ev: e.tx_packets for p in stats.peers for e in p.evs}


def run_writes(fab, run: WriteRun, seed: int) -> WriteRun:
    """Run ``run``'s QPs on ``fab`` (its agents set up for ``run.transport``) and fill in its
    results; flows that fail are reported in it, not raised.

    Raises:
        MrcError: a traffic worker did not start or died.
    """
    before = {(s, d): evs_sent(fab, s, d) for s, d in run.pairs}
    flows = [Flow(len(run.pairs) * i + k, s, d, run.bytes_per_qp) for i in range(run.qps)
             for k, (s, d) in enumerate(run.pairs)]
    report = run_traffic(fab, f"{run.transport}-{run.qps}qp", flows, endpoint="native", seed=seed,
                         timeout=WRITE_TIMEOUT_S, timeout_exp=WRITE_TIMEOUT_EXP, transport=run.transport)
    for (s, d), old in before.items():
        run.evs_used[f"{s}>{d}"] = {ev: n - old.get(ev, 0) for ev, n in evs_sent(fab, s, d).items()
                                    if n > old.get(ev, 0)}
    run.verified = report.passed
    run.errors = [f"QP {f.id}: {f.error}" for f in report.flows if f.error]
    starts = [f.start_ns for f in report.flows if f.start_ns is not None]
    ends = [f.end_ns for f in report.flows if f.end_ns is not None]
    if run.verified and starts and ends:
        run.seconds = (max(ends) - min(starts)) / 1e9
    return run
