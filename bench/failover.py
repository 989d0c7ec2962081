#!/usr/bin/env python3
"""Failover time of ``mrc demo``'s fault, timed by the dataplane itself, over RUNS runs.

Each run is the demo (``mrckit.apps.demo.run.run_demo``, eBPF target, native endpoint by default):
one RDMA write across the default fabric, link p0/t0-1/t1-1 failed at a third of the bytes and
restored at two thirds. The failover time of a run is the last dead EV's retirement (the host
dataplane's timestamp, ``ev_slot.bad_ns``) minus the fault program's first drop (its
``bpf_ktime_get_ns()``, the same kernel clock): ``failover.dataplane_failover_us`` of the
report. Prints a table per run and two BENCH lines (``bench/bench_result.py``):

- ``failover time``: the median, against the writer's RTO (the endpoint detects the loss by
  its retransmission timer, so the RTO is the floor a timer-driven failover has to beat);
- ``goodput kept during the fault``: goodput from fault to restore against goodput before the
  fault, of the run with the median ratio.

    .venv/bin/python bench/failover.py [--runs 5] [--fail down] [--endpoint native] [--timeout-exp N]
                                       [--max-cwnd W] [--duration S] [--keep DIR]

A run whose dead EVs were not all taken out has no failover time; it counts as missing (the
median is over the runs that have one) and the table says so. Needs root.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_result import result  # noqa: E402

RUNS = 5


def main() -> int:
    from mrckit.errors import MrcError
    from mrckit.apps.demo.run import DemoOptions, run_demo
    from mrckit.apps.demo.report import FAIL_KINDS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=RUNS)
    ap.add_argument("--fail", choices=FAIL_KINDS, default=DemoOptions.fail)
    ap.add_argument("--endpoint", choices=["native", "python"], default=DemoOptions.endpoint)
    ap.add_argument("--timeout-exp", type=int, default=None, help="the writer's RTO, 1.024 us x 2^N")
    ap.add_argument("--max-cwnd", type=int, default=None,
                    help="cap of the writer's window in packets, 0 for none (default: the demo's)")
    ap.add_argument("--duration", type=float, default=DemoOptions.duration_s)
    ap.add_argument("--keep", default="", help="write each run's JSON report into this folder")
    args = ap.parse_args()
    rows = []
    for i in range(args.runs):
        opts = DemoOptions(target="ebpf", fail=args.fail, endpoint=args.endpoint, timeout_exp=args.timeout_exp,
                           max_cwnd=args.max_cwnd, duration_s=args.duration, name=f"bfo{i}")
        try:
            r = run_demo(opts)
        except MrcError as exc:
            print(f"run {i + 1}: {exc}", flush=True)
            continue
        if args.keep:
            Path(args.keep).mkdir(parents=True, exist_ok=True)
            r.write_json(Path(args.keep) / f"run{i + 1}.json")
        f = r.failover
        kept = f.goodput_during_gbps / f.goodput_before_gbps if f.goodput_before_gbps else None
        rows.append((f.dataplane_failover_us, kept, f, r))
        fo = "-" if f.dataplane_failover_us is None else f"{f.dataplane_failover_us:.1f} us"
        print(f"run {i + 1}: failover {fo} ({f.dead_evs_out} of {f.dead_evs} dead EVs out), goodput before "
              f"{f.goodput_before_gbps:.3f} during {f.goodput_during_gbps:.3f} Gb/s"
              f" (kept {'-' if kept is None else f'{kept:.2f}'}), {r.bytes.sent} B in {r.duration_s:.2f} s, "
              f"checks {'passed' if r.passed else 'FAILED: ' + ', '.join(c.name for c in r.checks if not c.ok)}",
              flush=True)
    if not rows:
        print("no run completed", file=sys.stderr)
        return 1
    rto_us = rows[0][3].writer_rto_ns / 1e3
    times = [t for t, *_ in rows if t is not None]
    print(f"{len(times)} of {args.runs} runs timed; writer RTO {rto_us:.0f} us, host agents' RTO "
          f"{rows[0][3].agent_rto_ns / 1e3:.0f} us, writer window {rows[0][3].writer_max_cwnd or 'uncapped'} packets, "
          f"{args.endpoint} endpoint, fault {args.fail}")
    if times:
        result("failover time", statistics.median(times), "us", "writer RTO", rto_us,
               goal="< 1000 us (moonshot <= 100 us)")
    ratios = sorted(((k, f) for _, k, f, _ in rows if k is not None), key=lambda kf: kf[0])
    if ratios:
        _, f = ratios[(len(ratios) - 1) // 2]  # the median run (the lower one of an even count)
        result("goodput kept during the fault", f.goodput_during_gbps, "Gb/s", "goodput before the fault",
               f.goodput_before_gbps, goal=">= 0.9x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
