"""``mrc demo --mode ecmp``: the cost of opaque paths, measured.

One invocation runs the demo twice, one fabric after the other: in EV-hash (ECMP) mode, where
the switches hash each EV and no host knows its path, then in SRv6 mode, where the hosts
source-route each EV. Both runs write the same bytes (same size and seed) between the same
hosts, with the same fault on the same link at the same point of the transfer (a third of the
bytes placed). :func:`compare` puts their loss figures side by side (``LossStats``,
``mrckit.apps.demo.loss``) with the difference ECMP − SRv6.
"""

from __future__ import annotations

import dataclasses
import os
import random
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ...errors import MrcError
from ...fabric.state import check_name
from ..common import JsonFile
from .report import SCHEMA_VERSION, Check, DemoReport, FaultInfo

MODES = ("ecmp", "srv6")
"""The order of the runs: EV-hash mode first, then the SRv6 baseline."""
MAX_BASE_NAME = 15
"""A run's fabric is ``<name><e|s>``, within the 16 characters of a fabric name."""


class LossFigures(BaseModel):
    """The figures compared between the modes (see ``ModeFigures``); ``Difference`` holds
    ECMP − SRv6 of each (None when either side has none)."""

    packets_lost_to_fault: int
    packets_lost: int
    packets_lost_by_ev: int
    evs_with_loss: int
    link_packets_lost: int | None
    evs_retired: int
    evs_retired_distinct: int
    t_last_loss_s: float | None
    t_repair_s: float | None
    retransmits_total: int
    dead_link_evs: int = 0
    dead_link_evs_retired: int = 0
    dead_link_packets_lost: int = 0
    fault_duration_s: float | None = None


class ModeFigures(LossFigures):
    """One mode's figures in the comparison (see ``LossStats`` for the loss fields).

    Attributes:
        mode: ``srv6`` or ``ecmp``. packets_lost ... t_last_loss_s and dead_link_evs,
            dead_link_evs_retired, dead_link_packets_lost: from its ``loss``.
        fault_duration_s: from the fault to the restore (the fault is placed by bytes placed,
            so each mode's lasts differently; compare the loss figures with it in mind).
        t_repair_s: from the fault to the controller's first repair: SRv6, its DENY of the
            link on every host; EV-hash mode, its first group rewritten around the link
            (None: no repair, e.g. a blackhole in EV-hash mode, which no switch notices).
        retransmits_total: the requestor's retransmissions, every reason.
        duration_s, goodput_gbps: the write's duration and goodput.
        bytes_sent, bytes_verified, hash_match: the data check.
        passed: every check of that run held.
    """

    mode: Literal["srv6", "ecmp"]
    duration_s: float
    goodput_gbps: float
    bytes_sent: int
    bytes_verified: int
    hash_match: bool
    passed: bool


class Difference(LossFigures):
    """ECMP − SRv6 for each figure of :class:`LossFigures` (None when either side has none)."""


class ComparisonReport(JsonFile):
    """Everything ``mrc demo --mode ecmp`` measured: both runs' full reports (``runs``), their
    figures side by side (``modes``), the difference ECMP − SRv6, and the checks."""

    schema_version: int = SCHEMA_VERSION
    kind: Literal["ecmp_vs_srv6"] = "ecmp_vs_srv6"
    target: Literal["ebpf", "bmv2"]
    size: int
    seed: int
    fault: FaultInfo
    modes: dict[str, ModeFigures]
    difference: Difference
    runs: dict[str, DemoReport]
    checks: list[Check] = Field(default_factory=list)
    passed: bool = False


def figures(r: DemoReport) -> ModeFigures:
    """The comparison's figures of one run."""
    loss, b = r.loss, r.bytes
    return ModeFigures(
        mode=r.mode, packets_lost_to_fault=loss.packets_lost_to_fault, packets_lost=loss.packets_lost,
        packets_lost_by_ev=loss.packets_lost_by_ev,
        evs_with_loss=loss.evs_with_loss, link_packets_lost=loss.link_packets_lost, evs_retired=loss.evs_retired,
        evs_retired_distinct=loss.evs_retired_distinct, t_last_loss_s=loss.t_last_loss_s, t_repair_s=_repair(r),
        retransmits_total=r.endpoint.retransmits_total, dead_link_evs=loss.dead_link_evs,
        dead_link_evs_retired=loss.dead_link_evs_retired, dead_link_packets_lost=loss.dead_link_packets_lost,
        fault_duration_s=_fault_duration(r), duration_s=r.duration_s, goodput_gbps=r.goodput_gbps,
        bytes_sent=b.sent, bytes_verified=b.verified, hash_match=b.hash_match, passed=r.passed)


def _fault_duration(r: DemoReport) -> float | None:
    f = r.failover
    return None if f.t_fault_s is None or f.t_restore_s is None else f.t_restore_s - f.t_fault_s


REPAIRS = ("DENY", "REROUTE")
"""The controller's timeline words for its repair of a failed link, per mode."""


def _repair(r: DemoReport) -> float | None:
    t0 = r.failover.t_fault_s
    times = [e.t_s for e in r.timeline if e.source == "controller" and e.what in REPAIRS and e.t_s >= t0]
    return min(times) - t0 if times else None


def _minus(a, b):
    return None if a is None or b is None else a - b


def compare(ecmp: DemoReport, srv6: DemoReport, seed: int) -> ComparisonReport:
    """The comparison of two runs of the same write and fault, one per mode.

    Raises:
        ValueError: the runs are not one ecmp and one srv6 run of the same size and fault.
    """
    if (ecmp.mode, srv6.mode) != ("ecmp", "srv6"):
        raise ValueError(f"compare wants an ecmp run and an srv6 run, got {ecmp.mode} and {srv6.mode}")
    same = ("bytes.sent", ecmp.bytes.sent, srv6.bytes.sent), ("fault", ecmp.fault, srv6.fault)
    for what, x, y in same:
        if x != y:
            raise ValueError(f"the runs differ in {what}: {x} vs {y}")
    e, s = figures(ecmp), figures(srv6)
    diff = Difference(**{k: _minus(getattr(e, k), getattr(s, k)) for k in LossFigures.model_fields})
    report = ComparisonReport(target=ecmp.target, size=ecmp.bytes.sent, seed=seed, fault=ecmp.fault,
                              modes={"srv6": s, "ecmp": e}, difference=diff, runs={"srv6": srv6, "ecmp": ecmp})
    report.checks = comparison_checks(report)
    report.passed = all(c.ok for c in report.checks)
    return report


def comparison_checks(report: ComparisonReport) -> list[Check]:
    """Each run's own checks (prefixed with its mode), and that both runs counted their loss
    the same way (the endpoints' totals are the per-EV sums)."""
    out = [Check(name=f"{mode}.{c.name}", ok=c.ok, detail=c.detail)
           for mode in MODES for c in report.runs[mode].checks]
    for mode in MODES:
        m = report.modes[mode]
        out.append(Check(name=f"{mode}.zero_bytes_lost", ok=m.hash_match and m.bytes_verified == m.bytes_sent,
                         detail=f"{m.bytes_verified} of {m.bytes_sent} B verified, SHA-256 match {m.hash_match}"))
    return out


def run_comparison(opts, observer=None) -> ComparisonReport:
    """Run the demo in EV-hash mode, then in SRv6 mode, with ``opts``'s fault and target, one
    seed and one size (``--size``, or what the first run's warm-up write gave), and compare
    them (``opts`` is a ``mrckit.apps.demo.run.DemoOptions``; its ``mode`` is ignored). Each run
    builds its own fabric, ``<name>e`` then ``<name>s``, and tears it down before the next
    starts.

    Raises:
        MrcError: a bad option, or either run failed (see ``run_demo``).
    """
    from .run import Observer, run_demo

    obs = observer or Observer()
    base = opts.name or f"demo{os.getpid() % 100000}"
    check_name(base)  # each run's fabric is the base plus one letter: say so with the base
    if len(base) > MAX_BASE_NAME:
        raise MrcError(f"--name {base!r}: at most {MAX_BASE_NAME} characters with --mode ecmp "
                       "(the two runs' fabrics are NAMEe and NAMEs)")
    seed = opts.seed if opts.seed is not None else random.getrandbits(32)
    reports, size = {}, opts.size  # None: the first run's warm-up sizes both
    for mode in MODES:
        run_opts = dataclasses.replace(opts, mode=mode, seed=seed, name=f"{base}{mode[0]}", size=size,
                                       logs=str(Path(opts.logs) / mode) if opts.logs else "")
        run_opts.check()
        obs.phase(f"run {MODES.index(mode) + 1} of 2: {mode} mode"
                  + (" (switches hash the EV; hosts cannot see paths)" if mode == "ecmp"
                     else " (hosts source-route each EV), the baseline"))
        reports[mode] = run_demo(run_opts, obs)
        size = reports[mode].bytes.sent
    return compare(reports["ecmp"], reports["srv6"], seed)

