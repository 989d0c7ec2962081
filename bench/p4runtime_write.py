"""P4Runtime write rate into the eBPF switch: batched writes through finsy (as the controller
does) against one-by-one inserts through p4runtime-shell (as an operator types them), both over
real gRPC to the server process in the switch's namespace; and, where bmv2 is built, the same
finsy batch written to simple_switch_grpc. Prints a table of entries/s and ratios; exits 0.

Run as root: python bench/p4runtime_write.py [--entries N] [--shell-entries M]
"""

import argparse
import asyncio
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "controller"))

import finsy  # noqa: E402

from mrckit import netns  # noqa: E402
from mrckit.switch.bmv2 import Bmv2Switch, find_tool  # noqa: E402
from mrckit.switch.ebpf_target import EbpfSwitch, switch_pin_dir  # noqa: E402
from mrckit.switch.p4runtime import process  # noqa: E402
from bench_result import result  # noqa: E402  (bench/: the common BENCH line)

BUILD = ROOT / "p4src/build"
P4INFO = BUILD / "mrc_switch.p4info.txtpb"
BMV2_JSON = BUILD / "mrc_switch.json"
SHELL_PYTHON = ROOT / ".venv-p4rt/bin/python"
KEY = "hdr.outer_ipv6.dst_addr[127:80]"
BASE = 0xFCBBBB000000

SHELL_SCRIPT = r"""
import sys, time
import p4runtime_sh.shell as sh
address, count, base = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
# Above any 64-bit id a finsy run left as the election_id_past (spec 5.3): (high, low) = 2^64.
sh.setup(device_id=1, grpc_addr=address, election_id=(1, 0), verbose=False)
start = time.perf_counter()
for i in range(count):
    te = sh.TableEntry("usid_fib")(action="set_egress")
    te.match["hdr.outer_ipv6.dst_addr[127:80]"] = hex(0xFCBBBB100000 + base + i)
    te.action["port"] = str(i % 512)
    te.insert()
elapsed = time.perf_counter() - start
sh.teardown()
print("ELAPSED", elapsed)
"""


def fib_entries(n: int, base: int = BASE):
    """``n`` usid_fib entries (finsy objects) with consecutive 48-bit keys from ``base``."""
    return [finsy.P4TableEntry("usid_fib", match=finsy.P4TableMatch({KEY: base + i}),
                               action=finsy.P4TableAction("set_egress", port=i % 510)) for i in range(n)]


async def finsy_batch(address: str, n: int, device_id: int, blob: bytes, base: int = BASE,
                      force: bool = True) -> float:
    """Seconds to insert ``n`` usid_fib entries from key ``base`` in one batched write (after
    connecting; ``force`` pushes the pipeline first, which empties the tables)."""
    opts = finsy.SwitchOptions(p4info=P4INFO, p4blob=blob, device_id=device_id, p4force=force)
    async with finsy.Switch("bench", address, opts) as sw:
        entries = fib_entries(n, base)
        start = time.perf_counter()
        await sw.insert(entries)
        elapsed = time.perf_counter() - start
        keys = {next(iter(e.match.values())) async for e in sw.read(finsy.P4TableEntry("usid_fib"))}
        assert all(base + i in keys for i in range(n)), "entries missing on read-back"
    return elapsed


def shell_one_by_one(address: str, n: int, base: int) -> float | None:
    """Seconds for p4runtime-shell to insert ``n`` entries one by one (its start-up excluded)."""
    if not SHELL_PYTHON.exists():
        return None
    proc = subprocess.run([str(SHELL_PYTHON), "-c", SHELL_SCRIPT, address, str(n), str(base)],
                          capture_output=True, text=True, timeout=120)
    line = next((l for l in proc.stdout.splitlines() if l.startswith("ELAPSED")), None)
    if proc.returncode or line is None:
        print(f"p4runtime-shell run failed: {proc.stderr[-500:]}", file=sys.stderr)
        return None
    return float(line.split()[1])


def bmv2_batch(n: int, ns: str) -> float | None:
    """The same finsy batch written to bmv2 (``Bmv2Switch``), or None where bmv2 is not built."""
    if find_tool("simple_switch_grpc") is None or not BMV2_JSON.exists():
        return None
    with Bmv2Switch(f"{ns}-bmv2", ns, {}, json_path=None) as bmv2:
        return asyncio.run(finsy_batch(bmv2.grpc_address, n, bmv2.device_id, BMV2_JSON.read_bytes()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=5000, help="entries in the finsy batch")
    ap.add_argument("--shell-entries", type=int, default=300, help="entries inserted one by one through p4runtime-shell")
    args = ap.parse_args()
    logging.getLogger("finsy").setLevel(logging.ERROR)  # "gNMI is not implemented" is expected
    if os.geteuid() != 0:
        print("p4runtime_write: needs root (netns, BPF maps); skipped")
        return 0
    os.makedirs(os.path.dirname(switch_pin_dir("x")), exist_ok=True)
    ns = netns.add(netns.unique_name("mrcbench"))
    name = ns
    sw = EbpfSwitch(name, ns, {})
    workdir = Path(tempfile.mkdtemp(prefix="mrc-p4rt-bench-"))
    server = None
    try:
        sw.setup()
        address = f"unix:{workdir}/p4rt.sock"
        server = process.spawn(name, address, netns=ns, state_dir=workdir / "state")
        blob = BMV2_JSON.read_bytes() if BMV2_JSON.exists() else b"{}"
        rows = []
        # best of 3 runs with fresh keys; only the first pushes the pipeline (empty tables)
        batch_s = min(asyncio.run(finsy_batch(address, args.entries, 1, blob, BASE + run * (1 << 24), force=run == 0))
                      for run in range(3))
        rows.append(("eBPF, finsy batched", args.entries, batch_s))
        shell_s = min((shell_one_by_one(address, args.shell_entries, base) for base in (0, 1 << 20)),
                      key=lambda x: x if x is not None else float("inf"))
        if shell_s is not None:
            rows.append(("eBPF, p4runtime-shell one by one", args.shell_entries, shell_s))
        bmv2_s = bmv2_batch(args.entries, ns)
        if bmv2_s is not None:
            rows.append(("bmv2, finsy batched", args.entries, bmv2_s))
        report(rows, shell_s, args.shell_entries, bmv2_s is not None)
    finally:
        if server is not None:
            process.stop(server)
        sw.teardown()
        netns.delete(ns)
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def report(rows, shell_s, shell_n, has_bmv2) -> None:
    baseline = shell_n / shell_s if shell_s else None
    print("P4Runtime writes into the eBPF switch (best of 3 finsy runs, of 2 p4runtime-shell runs)")
    print(f"{'method':36} {'entries':>8} {'seconds':>9} {'entries/s':>11} {'x shell':>8}")
    for label, n, secs in rows:
        rate = n / secs
        ratio = f"{rate / baseline:8.1f}" if baseline else "       -"
        print(f"{label:36} {n:8d} {secs:9.3f} {rate:11.0f} {ratio}")
        if baseline:
            result(label, rate, "entries/s", "p4runtime-shell one by one", baseline, ">= 5x")
    if baseline is None:
        print("p4runtime-shell: .venv-p4rt missing (make p4rt-shell): no baseline")
    else:
        print("goal: finsy batched >= 5x p4runtime-shell one by one")
    if not has_bmv2:
        print("bmv2: simple_switch_grpc or p4src/build/mrc_switch.json not found: skipped")


if __name__ == "__main__":
    sys.exit(main())
