"""Controller reconciliation on one large eBPF switch (a T0 with 500 hosts: about 1000 entries),
over real gRPC to its P4Runtime server process: the first programming (pipeline push and every
entry inserted) is the baseline; a controller restart (cookie check, Read, diff, no write) and a
repair of 1 % tampered entries are measured against it. Prints a table and ratios; exits 0.

Run as root: python bench/controller_reconcile.py [--hosts N] [--runs R]
"""

import argparse
import asyncio
import itertools
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "controller"))

from mrckit import netns  # noqa: E402
from mrckit.control import Controller, EntryDiff, load_pipeline, open_session  # noqa: E402
from mrckit.control.targets import SwitchTarget  # noqa: E402
from mrckit.switch.ebpf_target import EbpfSwitch, switch_pin_dir  # noqa: E402
from mrckit.switch.p4runtime import process  # noqa: E402
from mrckit.topology import TableEntry, generate_clos  # noqa: E402
from bench_result import result  # noqa: E402  (bench/: the common BENCH line)

P4INFO = ROOT / "p4src/build/mrc_switch.p4info.txtpb"
JSON = ROOT / "p4src/build/mrc_switch.json"
DEVICE_CONFIG = JSON.read_bytes()
SWITCH = "p0-t0-0"


def timed(ctl) -> tuple[float, object]:
    t = time.perf_counter()
    counts = asyncio.run(ctl.program_switches())[SWITCH]
    return time.perf_counter() - t, counts


ELECTION_IDS = itertools.count(2**64)
"""Every session of the run arbitrates higher than the one before it, so a stream the server
has not yet seen closed cannot leave the next one a backup ("a primary exists")."""


async def tamper(target, pipeline, entries, share=0.01):
    """Another client changes ``share`` of the port_config entries (trim threshold 1)."""
    pcs = [e for e in entries if e.table == "port_config"]
    changed = tuple(TableEntry(e.table, e.match, e.action, {**e.params, "trim_threshold": 1})
                    for e in pcs[:max(1, int(len(entries) * share))])
    s = await open_session(target, pipeline, election_id=next(ELECTION_IDS))
    try:
        await s.write(EntryDiff(modify=changed))
    finally:
        await s.close()
    return len(changed)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=500, help="hosts on the T0 (ports = hosts + 2)")
    ap.add_argument("--runs", type=int, default=3, help="best of this many runs per measure")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("controller_reconcile: needs root (namespaces, BPF); skipped")
        return 0
    logging.basicConfig(level=logging.WARNING)
    topo = generate_clos(planes=1, spines=2, leaves=2, hosts_per_leaf=args.hosts)
    pipeline = load_pipeline(P4INFO, DEVICE_CONFIG)
    ns = netns.add(netns.unique_name("mrcbench"))
    tmp = Path(tempfile.mkdtemp(prefix="mrc-bench-ctl-"))
    os.makedirs(os.path.dirname(switch_pin_dir(ns)), exist_ok=True)
    sw = EbpfSwitch(ns, ns, {}).setup()
    proc = None
    try:
        proc = process.spawn(ns, f"unix:{tmp}/sw.sock", netns=ns, state_dir=tmp / "state")
        target = SwitchTarget(SWITCH, f"unix:{tmp}/sw.sock")

        def ctl(p=pipeline):
            return Controller(topo, [target], [], p, run_dir=None, election_id=next(ELECTION_IDS))

        entries = ctl().compiled.entries(SWITCH)
        first, restart, repair = [], [], []
        for run in range(args.runs):
            # A new cookie each run: the push clears the tables, so every entry is written.
            fresh = load_pipeline(P4INFO, DEVICE_CONFIG + b" " * (run + 1))
            t, c = timed(ctl(fresh))
            assert c.pipeline_pushed and c.inserted == len(entries), c
            first.append(t)
            t, c = timed(ctl(fresh))
            assert c.writes == 0, c
            restart.append(t)
            n = asyncio.run(tamper(target, fresh, entries))
            t, c = timed(ctl(fresh))
            assert c.modified == n and c.writes == n, c
            repair.append(t)
        base = min(first)
        print(f"controller reconciliation, one switch, {len(entries)} entries, best of {args.runs}")
        print(f"{'measure':<44}{'seconds':>10}{'x first':>10}")
        rows = [("first programming (push + insert all)", base),
                ("restart: cookie + Read + diff, 0 writes", min(restart)),
                (f"repair of {n} tampered entries", min(repair))]
        for label, value in rows:
            print(f"{label:<44}{value:>10.3f}{value / base:>10.2f}")
        result("restart reconcile", min(restart), "s", "first programming", base, "< 1x")
        result("repair 1% reconcile", min(repair), "s", "first programming", base, "< 1x")
    finally:
        if proc is not None:
            process.stop(proc)
        sw.teardown()
        netns.delete(ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
