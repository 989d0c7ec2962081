"""Bring up emulated fabrics of growing size and measure what they cost: bring-up seconds, the
RSS of all fabric processes, their idle CPU over a quiet period (as a fraction of one core),
and `mrc fabric check` (every host pair reachable over every plane).

Sizes: the default fabric (6 hosts), 4 planes × 4 spines × 8 leaves × 2 hosts (16 hosts) and
4 × 8 × 16 × 4 (64 hosts, 96 switches). The default fabric, measured first in the same run, is
the baseline of each ratio. Goals: 64 hosts up in < 60 s, idle CPU of the whole fabric < 5 % of
one core, RSS < 8 GB. Needs root. Prints a table and BENCH lines; exits 0.

Run: python bench/fabric_scale.py [--sizes default,16,64] [--idle-s 10]
"""

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "controller"))

from mrckit.apps import pairwise  # noqa: E402
from mrckit.fabric.fabric import Fabric  # noqa: E402
from mrckit.topology import generate_clos  # noqa: E402
from bench_result import result  # noqa: E402  (bench/: the common BENCH line)

SIZES = {"default": (2, 2, 3, 2), "16": (4, 4, 8, 2), "64": (4, 8, 16, 4)}
"""Name -> (planes, spines per plane, leaves per plane, hosts per leaf)."""
TICK_S = os.sysconf("SC_CLK_TCK")
CHECK_PACKETS = 64


KINDS = ("switch", "agent", "controller")
"""Process kinds of a fabric: switch servers (eBPF P4Runtime or bmv2), host agents, the controller."""


def fabric_pids(fab: Fabric) -> dict[int, str]:
    """Every live process the fabric started, pid -> kind (:data:`KINDS`)."""
    st = fab.state
    pids = {p.pid: "switch" for p in st.switches.values()}
    pids.update({p.pid: "agent" for p in st.hosts.values()})
    if st.controller:
        pids[st.controller["pid"]] = "controller"
    return {p: k for p, k in pids.items() if Path(f"/proc/{p}").exists()}


def cpu_ticks(pid: int) -> int:
    """utime + stime of ``pid``, in clock ticks (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def measure(name: str, idle_s: float) -> dict:
    """Bring up one fabric, measure it, tear it down."""
    planes, spines, leaves, hosts = SIZES[name]
    t0 = time.monotonic()
    fab = Fabric.up(generate_clos(planes, spines, leaves, hosts), name=f"bench{name}")
    try:
        up_s = time.monotonic() - t0
        pids = fabric_pids(fab)
        before = {p: cpu_ticks(p) for p in pids}
        t1 = time.monotonic()
        time.sleep(idle_s)
        elapsed = time.monotonic() - t1
        used = {p: (cpu_ticks(p) - before[p]) / TICK_S / elapsed for p in pids}
        by_kind = {k: [u for p, u in used.items() if pids[p] == k] for k in KINDS}
        rss = sum(rss_mb(p) for p in pids)
        results = pairwise.pairwise_udp(fab, CHECK_PACKETS)
        ok = sum(r.ok for r in results)
        return dict(name=name, hosts=len(fab.hosts()), switches=len(fab.switches()), processes=len(pids),
                    up_s=up_s, rss_mb=rss, idle_core=sum(used.values()), by_kind=by_kind,
                    pairs=len(results), pairs_ok=ok)
    finally:
        fab.down()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="default,16,64", help="comma-separated: default, 16, 64")
    ap.add_argument("--idle-s", type=float, default=10.0, help="quiet period for the idle CPU, seconds")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("fabric_scale: needs root (network namespaces and BPF)", file=sys.stderr)
        return 2
    names = [n.strip() for n in args.sizes.split(",") if n.strip()]
    unknown = [n for n in names if n not in SIZES]
    if unknown:
        print(f"fabric_scale: unknown size {unknown[0]!r}: use {', '.join(SIZES)}", file=sys.stderr)
        return 2
    if "default" not in names:
        names.insert(0, "default")  # the baseline
    rows = [measure(n, args.idle_s) for n in names]
    print(f"{'fabric':>8} {'hosts':>5} {'switches':>8} {'procs':>5} {'up s':>6} {'RSS MB':>8} "
          f"{'idle core':>9} {'check':>9}")
    for r in rows:
        print(f"{r['name']:>8} {r['hosts']:>5} {r['switches']:>8} {r['processes']:>5} {r['up_s']:>6.1f} "
              f"{r['rss_mb']:>8.0f} {r['idle_core']:>9.3f} {r['pairs_ok']:>4}/{r['pairs']:<4}")
    print("idle CPU per process kind, fraction of one core: sum (max of one process)")
    for r in rows:
        cells = [f"{k} {sum(v):.4f} ({max(v, default=0):.4f}, n={len(v)})" for k, v in r["by_kind"].items()]
        print(f"{r['name']:>8}  " + "; ".join(cells))
    base = rows[0]
    for r in rows[1:]:
        label = f"{r['hosts']} hosts"
        result(f"fabric bring-up, {label}", r["up_s"], "s", "default fabric bring-up", base["up_s"], "< 60 s")
        result(f"fabric idle cpu, {label}", r["idle_core"], "core", "default fabric idle cpu",
               base["idle_core"], "< 0.05 core")
        result(f"fabric rss, {label}", r["rss_mb"], "MB", "default fabric rss", base["rss_mb"], "< 8192 MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
