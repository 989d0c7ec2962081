"""``mrc experiment chaos``: a soak across the default fabric while a seeded schedule kills and
restarts the controller, a host agent and the switches' P4Runtime server, flaps one T0-T1 link
and makes another lossy; every byte is verified (docs/chaos.md).

- ``schedule``: the seeded faults (pure);
- ``run``: the fabric, the traffic rounds and the faults applied on time;
- ``report``: what happened, JSON and text.
"""

from .report import ChaosReport
from .run import ChaosOptions, run_chaos
from .schedule import Fault, make_schedule

__all__ = ["ChaosOptions", "ChaosReport", "Fault", "make_schedule", "run_chaos"]
