"""Generate and compile the 131,072-host MRC fabric: 8 planes, 512 T0 and 256 T1 per plane,
256 hosts per T0, each host with one port per plane (goal: < 10 s and < 2 GB).

Stages: generate (with validation), compile (every switch's tables as arrays), then what a
controller and the host agents consume: one switch's entries, one host's config, and finally
every table entry and every host config streamed as Python objects. A fabric with 1/64 of the
hosts, run first in the same process, is the baseline: the ratios show how time grows with
size. Prints a table and exits 0.

Run: python bench/topology_scale.py [--no-stream]
"""

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "controller"))

from mrckit.topology import compile_fabric, generate_clos  # noqa: E402
from bench_result import result  # noqa: E402  (bench/: the common BENCH line)

FULL = dict(planes=8, spines=256, leaves=512, hosts_per_leaf=256)
BASELINE = dict(planes=8, spines=32, leaves=64, hosts_per_leaf=32)
GOAL_S, GOAL_MB = 10.0, 2048


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn):
    """(result, (wall seconds, CPU seconds)): the machine is shared, so both are shown."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, (time.perf_counter() - wall, time.process_time() - cpu)


def run(size: dict, stream: bool) -> dict:
    topo, t_gen = timed(lambda: generate_clos(**size))
    fabric, t_compile = timed(lambda: compile_fabric(topo, "ebpf"))
    out = {"hosts": len(topo.hosts), "switches": len(topo.switches),
           "links": len(topo.fabric_links) + len(topo.host_links), "entries": fabric.entry_count(),
           "generate": t_gen, "compile": t_compile, "rss_after_compile": peak_mb()}
    _, out["one_switch"] = timed(lambda: fabric.entries(0))
    _, out["one_host"] = timed(lambda: fabric.host(0))
    if stream:
        count, out["stream_entries"] = timed(lambda: sum(len(fabric.entries(s)) for s in range(len(topo.switches))))
        assert count == out["entries"]
        _, out["stream_hosts"] = timed(lambda: sum(1 for _ in fabric.hosts()))
    # EV-hash mode: the same arrays, then members, groups and routes per switch.
    ecmp, out["compile_ecmp"] = timed(lambda: compile_fabric(topo, "ebpf", "ecmp"))
    _, out["one_switch_ecmp"] = timed(lambda: (ecmp.members(0), ecmp.groups_and_routes(0)))
    if stream:
        out["ecmp_objects"], out["stream_ecmp"] = timed(lambda: sum(
            len(ecmp.members(s)) + sum(map(len, ecmp.groups_and_routes(s))) for s in range(len(topo.switches))))
    out["rss_peak"] = peak_mb()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-stream", action="store_true", help="skip streaming every entry and host config")
    args = parser.parse_args()
    stream = not args.no_stream
    base = run(BASELINE, stream)
    full = run(FULL, stream)

    print(f"fabric: {full['hosts']:,} hosts, {full['switches']:,} switches, {full['links']:,} links, "
          f"{full['entries']:,} table entries")
    if stream:
        print(f"ecmp mode: {full['ecmp_objects']:,} members, groups and routes (1 shared group per T0 while healthy)")
    print(f"baseline: {base['hosts']:,} hosts, {base['entries']:,} entries (size ratio x{full['entries'] / base['entries']:.0f})")
    print()
    print(f"{'stage':<34} {'baseline':>10} {'full':>10} {'full CPU':>10} {'ratio':>8}")
    rows = [("generate + validate", "generate"), ("compile (all tables, arrays)", "compile"),
            ("one switch's entries", "one_switch"), ("one host config", "one_host")]
    if stream:
        rows += [("stream every TableEntry object", "stream_entries"), ("stream every HostConfig", "stream_hosts")]
    rows += [("ecmp: compile (arrays)", "compile_ecmp"), ("ecmp: one switch's tables", "one_switch_ecmp")]
    if stream:
        rows += [("ecmp: stream every table object", "stream_ecmp")]
    for label, key in rows:
        (b_wall, _), (f_wall, f_cpu) = base[key], full[key]
        print(f"{label:<34} {b_wall:>9.3f}s {f_wall:>9.3f}s {f_cpu:>9.3f}s {f_wall / max(b_wall, 1e-9):>7.0f}x")
        result(f"131k hosts: {label}", f_wall, "s", "1/64-size fabric", b_wall)
    total = full["generate"][0] + full["compile"][0]
    print()
    print(f"generate + compile: {total:.2f} s ({total / GOAL_S:.2f} of the {GOAL_S:.0f} s goal)")
    print(f"peak RSS after compile: {full['rss_after_compile']:.0f} MB "
          f"({full['rss_after_compile'] / GOAL_MB:.2f} of the {GOAL_MB} MB goal); "
          f"after streaming: {full['rss_peak']:.0f} MB")


if __name__ == "__main__":
    main()
