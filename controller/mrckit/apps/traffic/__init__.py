"""``mrc traffic``: many QPs at once between the hosts of a running fabric, in a pattern
(all-to-all, ring, k-to-1 incast, random permutation), every byte verified (docs/traffic.md).

- ``patterns``: which flows a pattern makes (pure);
- ``worker``: the process that runs one host's endpoint and all its QPs;
- ``run``: starts the workers on a fabric and gathers what they measured;
- ``report``: per-QP figures, the summary, JSON and a plot.
"""

from .patterns import PATTERNS, Flow, make_flows
from .report import TrafficReport
from .run import run_traffic

__all__ = ["PATTERNS", "Flow", "make_flows", "TrafficReport", "run_traffic"]
