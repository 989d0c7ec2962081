"""The record every experiment of ``mrc experiment`` leaves: its claim, setting, figures (each
beside a baseline measured in the same run), checks, the machine it ran on and the mrckit
commit; saved as JSON, read back by ``table`` to write ``docs/experiments.md``.

A figure is printed as one ``BENCH`` line, the convention of ``bench/`` (``make bench``)::

    BENCH {"measure": "experiment failover: time to bypass", "value": ..., "unit": ...,
           "baseline": ..., "baseline_value": ..., "ratio": ..., "goal": ...}

``ratio`` is value / baseline_value, both from the same run (design section 8).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import subprocess
import time

from pydantic import BaseModel, Field

from ...resources import package_dir
from ..common import JsonFile

SCHEMA_VERSION = 1
BENCH_PREFIX = "BENCH "


def bench_line(measure: str, value: float | None, unit: str, baseline: str, baseline_value: float | None,
               goal: str = "") -> str:
    """One result line: ``measure`` at ``value`` ``unit`` against ``baseline`` at
    ``baseline_value`` (same unit), with the ratio (None when either is missing or the
    baseline is 0) and the stated ``goal`` (e.g. ``<= 2x``)."""
    ratio = value / baseline_value if value is not None and baseline_value else None
    return BENCH_PREFIX + json.dumps(dict(measure=measure, value=value, unit=unit, baseline=baseline,
                                          baseline_value=baseline_value, ratio=ratio, goal=goal))


def parse_bench(text: str) -> list[dict]:
    """The ``BENCH`` lines in ``text``, as dicts (malformed lines are skipped)."""
    rows = []
    for line in text.splitlines():
        if line.startswith(BENCH_PREFIX):
            try:
                rows.append(json.loads(line[len(BENCH_PREFIX):]))
            except ValueError:
                continue
    return rows


class Machine(BaseModel):
    """Where an experiment ran: CPU cores, kernel release, and the load average (1, 5 and 15
    minutes) when it started and when it ended."""

    cores: int
    kernel: str
    load_start: tuple[float, float, float]
    load_end: tuple[float, float, float] | None = None

    @classmethod
    def now(cls) -> "Machine":
        """This machine now (``load_end`` is filled by :meth:`ExperimentRecord.finish`)."""
        return cls(cores=os.cpu_count() or 0, kernel=platform.release(), load_start=os.getloadavg())


@dataclasses.dataclass(frozen=True)
class RunStart:
    """When and where an experiment began: CLOCK_MONOTONIC seconds, the machine (its load
    then) and the UTC time; :meth:`ExperimentRecord.finish` stamps them on the record."""

    monotonic: float
    machine: Machine
    started_utc: str

    @classmethod
    def now(cls) -> "RunStart":
        return cls(time.monotonic(), Machine.now(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


def mrckit_commit() -> str:
    """The mrckit commit that runs: ``git describe --always --dirty`` of the clone this
    package is imported from, or ``mrckit <version>`` of the installed package elsewhere."""
    try:
        out = subprocess.run(["git", "-C", str(package_dir()), "describe", "--always", "--dirty", "--tags"],
                             capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"mrckit {version('mrckit')}"
    except PackageNotFoundError:
        return "mrckit (unknown version)"


class Figure(BaseModel):
    """One measured figure beside its baseline from the same run (the same fabric without the
    fault). ``value``/``baseline_value`` None: not measured (the reason is in ``note``)."""

    measure: str
    value: float | None
    unit: str
    baseline: str
    baseline_value: float | None
    goal: str = ""
    note: str = ""

    def bench(self, experiment: str) -> str:
        """The BENCH line, ``experiment <name>: <measure>``."""
        return bench_line(f"experiment {experiment}: {self.measure}", self.value, self.unit, self.baseline,
                          self.baseline_value, self.goal)


class ExperimentRecord(JsonFile):
    """Everything one ``mrc experiment NAME`` run leaves (see the module docstring).

    Attributes:
        name: the experiment. claim: the paper's claim, quoted from the facts file
            (``mrc-facts.md`` section 6). ours: our figure in one sentence. setting: every
            option as run, by name. command: the command that reproduces the run.
        seed: seeds the fault schedule and the data.
        link_speed_pps: the drain rate of every switch port's queue model (packets/s), which
            the experiment calls the link speed; None where the experiment keeps the default.
        figures: the figures with their baselines. checks: each pass condition by name.
        differs: why our figure differs from the paper's, where it does.
        details: experiment-specific figures (free form, JSON-ready).
        machine, commit, started_utc, wall_s: where, what and when; wall_s includes bring-up.
        plot: the PNG's file name, next to the JSON.
    """

    schema_version: int = SCHEMA_VERSION
    name: str
    claim: str
    ours: str = ""
    setting: dict[str, float | int | str | bool | None] = Field(default_factory=dict)
    command: str = ""
    seed: int = 1
    link_speed_pps: int | None = None
    figures: list[Figure] = Field(default_factory=list)
    checks: dict[str, bool] = Field(default_factory=dict)
    differs: str = ""
    details: dict = Field(default_factory=dict)
    machine: Machine = Field(default_factory=Machine.now)
    commit: str = Field(default_factory=mrckit_commit)
    started_utc: str = Field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    wall_s: float = 0.0
    plot: str | None = None

    @property
    def passed(self) -> bool:
        """Every check held (and there is at least one)."""
        return bool(self.checks) and all(self.checks.values())

    def finish(self, start: "RunStart") -> None:
        """Stamp the run: the machine and UTC time at its ``start`` (the record itself is built
        at the end), its wall time since then, and the load now."""
        self.machine, self.started_utc = start.machine, start.started_utc
        self.wall_s = round(time.monotonic() - start.monotonic, 1)
        self.machine.load_end = os.getloadavg()

    def bench_lines(self) -> list[str]:
        """One BENCH line per figure."""
        return [f.bench(self.name) for f in self.figures]

    def lines(self) -> list[str]:
        """The record as text: claim, ours, figures, checks, machine."""
        out = [f"experiment   {self.name}, seed {self.seed}"
               + (f", link speed {self.link_speed_pps} pps per port" if self.link_speed_pps else ""),
               f"claim        {self.claim}", f"ours         {self.ours}"]
        for f in self.figures:
            ratio = f" ({f.value / f.baseline_value:.2f}x)" if f.value is not None and f.baseline_value else ""
            out.append(f"  {f.measure}: {_num(f.value)} {f.unit} vs {f.baseline} {_num(f.baseline_value)} "
                       f"{f.unit}{ratio}" + (f"  [{f.note}]" if f.note else ""))
        ld = self.machine.load_start
        out.append(f"machine      {self.machine.cores} cores, kernel {self.machine.kernel}, load "
                   f"{ld[0]:.1f} at start; mrckit {self.commit}; {self.wall_s:.0f} s")
        out.append("checks       " + "; ".join(f"{k}: {'ok' if v else 'FAILED'}" for k, v in self.checks.items()))
        out.append("PASSED" if self.passed else "FAILED")
        return out


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
