#!/usr/bin/env python3
"""``make bench``: run every ``bench/*.py`` script and print one table of ratios against the
baselines each measured in the same run (design section 8).

Each script runs as its own process (its own namespaces and BPF state), one after another, with
a time limit. Its own table is shown as it runs (``--quiet`` hides it); its ``BENCH`` lines
(``bench/bench_result.py``) make the summary. A script that fails or times out gets a row that
says so; the summary is still printed, and the exit code is 0 unless ``--strict``.

    .venv/bin/python bench/run_all.py [--quiet] [--only NAME ...] [--timeout S] [--strict]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_result import parse  # noqa: E402

SKIP = {"run_all.py", "bench_result.py"}
TIMEOUT_S = 180
LONG_TIMEOUT_S = {"fabric_scale.py": 900, "endpoint.py": 900, "failover.py": 1200}
"""Scripts that need more than ``--timeout``: fabric_scale brings up a 64-host fabric; endpoint
brings up the default one and moves some GB through it and a veth; failover runs the demo 5
times."""


def scripts(only: list[str]) -> list[Path]:
    """The bench scripts, by name; ``only`` keeps those whose stem is listed."""
    found = sorted(p for p in HERE.glob("*.py") if p.name not in SKIP)
    return [p for p in found if not only or p.stem in only]


def run(script: Path, timeout: float, quiet: bool) -> tuple[str, list[dict], float, str]:
    """Run one script; returns (status, result rows, seconds, last output lines)."""
    t0 = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=timeout,
                              cwd=HERE.parent)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return f"timed out after {timeout:.0f} s", parse(out), time.monotonic() - t0, out
    seconds = time.monotonic() - t0
    out = proc.stdout
    if not quiet:
        print(f"--- {script.name} ({seconds:.0f} s)")
        print("\n".join(line for line in out.splitlines() if not line.startswith("BENCH ")))
        if proc.returncode:
            print(proc.stderr[-2000:], file=sys.stderr)
    status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}"
    return status, parse(out), seconds, out + proc.stderr


def _fmt(value, unit: str = "") -> str:
    if value is None:
        return "-"
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return f"{text} {unit}".strip()


def summary(results: list[tuple[Path, str, list[dict], float, str]]) -> None:
    """Print the one table: a row per ratio, or a row saying why a script has none."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="mrckit benchmarks: ratios against baselines measured in the same run")
    for col in ("script", "measure", "value", "baseline", "baseline value", "ratio", "goal"):
        table.add_column(col, justify="right" if col in ("value", "baseline value", "ratio") else "left")
    for script, status, rows, seconds, out in results:
        if not rows:
            last = next((line for line in reversed(out.strip().splitlines()) if line.strip()), "")
            table.add_row(script.stem, f"[yellow]no ratio ({status})[/]", "", "", "", "", last[:60])
            continue
        for r in rows:
            ratio = "-" if r.get("ratio") is None else f"{r['ratio']:.3g}x"
            table.add_row(script.stem, r["measure"], _fmt(r["value"], r["unit"]), r["baseline"],
                          _fmt(r["baseline_value"], r["unit"]), ratio, r.get("goal", ""))
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)  # a log file: do not fold the table to 80 columns
    console.print(table)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=[], help="script names (stems) to run")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per script")
    ap.add_argument("--quiet", action="store_true", help="only the summary table")
    ap.add_argument("--strict", action="store_true", help="exit 1 if a script failed or timed out")
    args = ap.parse_args()
    results = []
    for script in scripts(args.only):
        timeout = max(args.timeout, LONG_TIMEOUT_S.get(script.name, 0))
        status, rows, seconds, out = run(script, timeout, args.quiet)
        results.append((script, status, rows, seconds, out))
    summary(results)
    failed = [s.stem for s, status, *_ in results if status != "ok"]
    return 1 if args.strict and failed else 0


if __name__ == "__main__":
    sys.exit(main())
