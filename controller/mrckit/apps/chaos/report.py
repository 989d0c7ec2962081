"""The report of a chaos soak: the traffic and its verification, each fault as applied (when,
how late, and what the dataplane counted), every DENY with the controller's reason, and the
restarted controller's writes.

Times are seconds from the soak's start (CLOCK_MONOTONIC; restarts are measured on the wall
clock and converted).
"""

from __future__ import annotations

from pydantic import BaseModel

from ...control.reactor import REPORT_REASON as REPORT_PREFIX
from ..common import JsonFile

SCHEMA_VERSION = 1


class FaultResult(BaseModel):
    """One scheduled fault as it happened.

    Attributes:
        kind, target, value: as scheduled (``schedule.Fault``).
        planned_s, applied_s: when it was due and when it took effect (None: never applied).
        ended_s: when it was restored or the restarted process served again.
        evidence: what shows it happened, by kind: ``dropped`` and ``first_drop_s`` (loss: the
            fault program's counters), ``flaps`` (down transitions of the flapping link),
            ``down_s`` (a restart: from the signal to serving again), and for ``switches``
            ``crossed_while_down`` (packets that crossed the fabric while no P4Runtime server
            ran: the switches forward from their pinned maps).
        error: why it could not be applied or checked.
    """

    kind: str
    target: list[str]
    value: float
    planned_s: float
    applied_s: float | None = None
    ended_s: float | None = None
    evidence: dict[str, float | int | None] = {}
    error: str | None = None

    @property
    def late_s(self) -> float | None:
        """How much later than planned it took effect."""
        return None if self.applied_s is None else max(self.applied_s - self.planned_s, 0.0)

    @property
    def happened(self) -> bool:
        """Applied, and the dataplane or the process shows it (see ``evidence``)."""
        if self.applied_s is None or self.error:
            return False
        e = self.evidence
        if self.kind == "loss":
            return (e.get("dropped") or 0) > 0
        if self.kind == "flap":
            return (e.get("flaps") or 0) > 0
        if self.kind == "switches":
            return (e.get("crossed_while_down") or 0) > 0
        return e.get("down_s") is not None


class Decision(BaseModel):
    """A controller decision on the timeline: ``kind`` (``LOCALISED``, ``DENY``, ``LIFT``),
    when, which links, and the controller's reason (for LOCALISED: the evidence)."""

    kind: str
    t_s: float
    links: list[str]
    why: str


class ChaosReport(JsonFile):
    """Everything one chaos soak measured; ``passed`` is the AND of :meth:`checks`."""

    schema_version: int = SCHEMA_VERSION
    seed: int
    duration_s: float
    fabric: str
    endpoint: str
    qp_size: int
    rounds: int = 0
    flows: int = 0
    flows_ok: int = 0
    bytes_verified: int = 0
    bytes_lost: int = 0
    flow_errors: list[str] = []
    faults: list[FaultResult] = []
    decisions: list[Decision] = []
    reconcile_writes: dict[str, int] | None = None
    """Per switch, the writes (inserts, modifies, deletes, pipeline pushes) of the controller
    that was restarted, over its whole life: it found every switch programmed, also after the
    switch server's restart, so SRv6 mode wants 0."""

    def checks(self) -> dict[str, bool]:
        """Each pass condition by name."""
        return {
            "every byte verified": self.flows > 0 and self.bytes_lost == 0 and self.flows_ok == self.flows,
            "every fault happened": bool(self.faults) and all(f.happened for f in self.faults),
            "controller reconciled with 0 writes": self.reconcile_writes is not None
            and not any(self.reconcile_writes.values()),
        }

    @property
    def passed(self) -> bool:
        return all(self.checks().values())

    def lines(self, *, decisions: int = 20) -> list[str]:
        """The report as text: traffic, faults, decisions (those from host evidence, the first
        ``decisions`` of them, each with its reason; those from link reports counted), checks."""
        out = [f"chaos soak, seed {self.seed}: {self.duration_s:g} s on fabric {self.fabric}, {self.endpoint} endpoint",
               f"traffic      {self.rounds} rounds of a ring, {self.flows} QPs of {self.qp_size} B: "
               f"{self.flows_ok} verified, {self.bytes_verified} B verified, {self.bytes_lost} B lost",
               *(f"  error: {e}" for e in self.flow_errors[:5]),
               "faults       planned  applied  late    what the dataplane or process showed"]
        for f in self.faults:
            applied = "-" if f.applied_s is None else f"{f.applied_s:7.2f}"
            late = "-" if f.late_s is None else f"{f.late_s * 1000:.0f} ms"
            ev = ", ".join(f"{k} {_fmt(v)}" for k, v in f.evidence.items())
            out.append(f"  {f.kind:<10} {f.planned_s:7.2f}  {applied:>7}  {late:<7} {ev}"
                       + (f"  ERROR {f.error}" if f.error else ""))
        counts = {k: sum(d.kind == k for d in self.decisions) for k in ("LOCALISED", "DENY", "LIFT")}
        reported = [d for d in self.decisions if d.kind == "LOCALISED" and d.why.startswith(REPORT_PREFIX)]
        evidence = [d for d in self.decisions if d.kind == "LOCALISED" and not d.why.startswith(REPORT_PREFIX)]
        out.append(f"decisions    {counts['LOCALISED']} localised, {counts['DENY']} DENY, {counts['LIFT']} LIFT: "
                   f"{len(reported)} from link reports ({', '.join(sorted({', '.join(d.links) for d in reported})) or '-'}), "
                   f"{len(evidence)} from host evidence:")
        for d in evidence[:decisions]:
            out.append(f"  {d.t_s:7.2f} s  {', '.join(d.links)}: {d.why}")
        if self.reconcile_writes is not None:
            out.append(f"controller   restarted: {sum(self.reconcile_writes.values())} writes on "
                       f"{len(self.reconcile_writes)} switches")
        out.append("checks       " + "; ".join(f"{k}: {'ok' if v else 'FAILED'}" for k, v in self.checks().items()))
        out.append("PASSED" if self.passed else "FAILED")
        return out


def _fmt(v) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)
