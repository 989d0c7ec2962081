"""``mrc experiment NAME``: the MRC paper's claims, measured on fabrics that each experiment
builds for itself, at an emulated link speed, every byte verified (docs/experiments.md).

- ``record``: the JSON record every experiment leaves, and its BENCH lines;
- ``linkspeed``: the link speed (switch queue drain rate, host NIC token bucket);
- ``bringup``: an experiment's fabric, up at its link speed and down at the end;
- ``options``: option values they share (comma-separated number lists);
- ``demo_fault``: the demo's one-QP write with a link fault, on such a fabric;
- ``writes``: QPs of one transport (MRC or the RC baseline) between host pairs, verified;
- ``failover``, ``lossy_ev``, ``flaps``, ``t1_failure`` (with ``t1_observe``, ``t1_plot``),
  ``random_loss``, ``incast`` (its plot in ``incast_plot``), ``load_balance``: the experiments;
  ``congestion``: their switch queue settings and counters; ``chaos``: the chaos soak's record;
- ``table``: the results table written from the records.
"""

from .record import ExperimentRecord, Figure, Machine, bench_line, mrckit_commit, parse_bench

__all__ = ["ExperimentRecord", "Figure", "Machine", "bench_line", "mrckit_commit", "parse_bench"]
