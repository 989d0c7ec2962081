"""``mrc experiment chaos`` as a row of the results table: the soak's own report
(``mrckit.apps.chaos``) summed up as an :class:`ExperimentRecord`."""

from __future__ import annotations

from ..chaos import ChaosOptions, ChaosReport
from .record import ExperimentRecord, Figure

NAME = "chaos"
CLAIM = ("T1 switch failures, link flaps and loss in production jobs with throughput largely unaffected "
         "(four T1 reboots in one job; multiple link flaps each minute); the paper gives no combined figure")
DIFFERS = ("Not a figure of the paper: a soak that breaks the control plane (controller, agent, P4Runtime "
           "server) and two links at once, and checks that nothing is lost and the restarted controller "
           "rewrites nothing. It runs at the default link speed of the queue model (1 Mpps per port, above "
           "what the machine forwards), as docs/chaos.md describes.")


def chaos_record(opts: ChaosOptions, report: ChaosReport, command: str) -> ExperimentRecord:
    """The record of a finished soak (pure). Its figures: QPs verified against QPs run, and
    faults that showed in the dataplane or the process against faults scheduled."""
    happened = sum(f.happened for f in report.faults)
    return ExperimentRecord(
        name=NAME, claim=CLAIM, command=command, seed=opts.seed, link_speed_pps=None,
        ours=(f"{report.flows_ok} of {report.flows} QPs verified ({report.bytes_verified} B, {report.bytes_lost} B "
              f"lost) while {happened} of {len(report.faults)} faults showed in the dataplane or the process"),
        setting=dict(duration_s=opts.duration_s, endpoint=opts.endpoint, qp_size=opts.qp_size, fabric="default"),
        figures=[Figure(measure="QPs verified", value=report.flows_ok, unit="QPs", baseline="QPs run",
                        baseline_value=report.flows),
                 Figure(measure="faults seen in the dataplane or process", value=happened, unit="faults",
                        baseline="faults scheduled", baseline_value=len(report.faults))],
        checks=report.checks(), differs=DIFFERS,
        details=dict(rounds=report.rounds, reconcile_writes=report.reconcile_writes,
                     faults=[dict(kind=f.kind, target="-".join(f.target), late_s=f.late_s, evidence=f.evidence)
                             for f in report.faults]))
