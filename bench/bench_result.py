"""The common output convention of the ``bench/`` scripts, read by ``bench/run_all.py``.

Each script prints its own table for a human, and one line per ratio for the summary::

    BENCH {"measure": ..., "value": ..., "unit": ..., "baseline": ..., "baseline_value": ...,
           "ratio": ..., "goal": ...}

``ratio`` is value / baseline_value, both measured in the same run (design section 8). The
format is defined once, in ``mrckit.apps.experiments.record``, which ``mrc experiment`` prints
too.
"""

from __future__ import annotations

from mrckit.apps.experiments.record import BENCH_PREFIX as PREFIX
from mrckit.apps.experiments.record import bench_line
from mrckit.apps.experiments.record import parse_bench as parse

__all__ = ["PREFIX", "parse", "result"]


def result(measure: str, value: float, unit: str, baseline: str, baseline_value: float, goal: str = "") -> None:
    """Print one result line: ``measure`` at ``value`` ``unit`` against ``baseline`` at
    ``baseline_value`` (same unit), with the ratio and the stated goal (e.g. ``<= 2x``)."""
    print(bench_line(measure, value, unit, baseline, baseline_value, goal), flush=True)
