"""The common output convention of the ``bench/`` scripts, read by ``bench/run_all.py``.

Each script prints its own table for a human, and one line per ratio for the summary::

    BENCH {"measure": ..., "value": ..., "unit": ..., "baseline": ..., "baseline_value": ...,
           "ratio": ..., "goal": ...}

``ratio`` is value / baseline_value, both measured in the same run (design section 8).
"""

from __future__ import annotations

import json

PREFIX = "BENCH "


def result(measure: str, value: float, unit: str, baseline: str, baseline_value: float, goal: str = "") -> None:
    """Print one result line: ``measure`` at ``value`` ``unit`` against ``baseline`` at
    ``baseline_value`` (same unit), with the ratio and the stated goal (e.g. ``<= 2x``)."""
    ratio = value / baseline_value if baseline_value else None
    print(PREFIX + json.dumps(dict(measure=measure, value=value, unit=unit, baseline=baseline,
                                   baseline_value=baseline_value, ratio=ratio, goal=goal)), flush=True)


def parse(text: str) -> list[dict]:
    """The result lines in a script's output, as dicts (malformed lines are skipped)."""
    rows = []
    for line in text.splitlines():
        if line.startswith(PREFIX):
            try:
                rows.append(json.loads(line[len(PREFIX):]))
            except ValueError:
                continue
    return rows
