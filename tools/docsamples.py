"""``make docs``: rewrite the sample outputs of README.md and docs/ from real runs.

A sample is the fenced block between two marker comments; the opening one names the command
that prints it:

    <!-- sample: mrc demo --json build/docs/demo.json --plot docs/demo-plot.png
         keep: transfer | failover | data packets per path | checks -->
    ```
    (what the command printed)
    ```
    <!-- /sample -->

The command runs in bash from the repository's root, with ``.venv/bin`` first on PATH and
``COLUMNS`` set (rich folds its tables to it; ``columns:`` changes it). Its stdout replaces
the block. Optional lines of the marker:

- ``keep: A | B``: only the sections (blocks between blank lines, named by their first line)
  whose first line starts with A or B, in the order printed;
- ``drop: A | B``: leave out the lines that start with A or B (progress, "wrote FILE");
- ``exit: N | M``: the exit codes the command may end with (default 0);
- ``tag: NAME``: the sample belongs to the group ``--tag NAME`` runs (untagged samples are the
  default group: ``make docs``; ``make docs-bench`` runs ``--tag bench``).

A command that several samples share runs once. A file is rewritten only when every sample of
it that ran succeeded. Usage::

    .venv/bin/python tools/docsamples.py [--tag TAG] [--list] FILE...
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = 104
MARKER = re.compile(r"^<!-- sample:(?P<head>.*?)-->\n(?P<body>```[^\n]*\n.*?^```\n)<!-- /sample -->\n?", re.S | re.M)
OPTION = re.compile(r"^\s*(keep|drop|exit|tag|columns):\s*(.*?)\s*$")


class SampleError(Exception):
    """A marker that cannot be read, or a command that failed; the message names where."""


@dataclass(frozen=True)
class Sample:
    """One marker: its command and options, and where it sits (``line``, 1-based)."""

    command: str
    line: int
    keep: tuple[str, ...] = ()
    drop: tuple[str, ...] = ()
    exit_codes: tuple[int, ...] = (0,)
    tag: str = ""
    columns: int = COLUMNS
    body: str = field(default="", compare=False)


def _alternatives(text: str) -> tuple[str, ...]:
    return tuple(a.strip() for a in text.split("|") if a.strip())


def parse_head(head: str, line: int) -> Sample:
    """A marker's text after ``sample:`` -> Sample. Raises SampleError on an unknown option."""
    command_lines, opts = [], {}
    for raw in head.strip().splitlines():
        m = OPTION.match(raw)
        if m:
            opts[m.group(1)] = m.group(2)
        elif opts:
            raise SampleError(f"line {line}: a command line after the options: {raw.strip()!r}")
        else:
            command_lines.append(raw.strip())
    command = " ".join(command_lines)
    if not command:
        raise SampleError(f"line {line}: a sample marker without a command")
    try:
        exit_codes = tuple(int(c) for c in _alternatives(opts.get("exit", "0")))
        columns = int(opts.get("columns", str(COLUMNS)))
    except ValueError as exc:
        raise SampleError(f"line {line}: exit and columns take a number: {exc}") from None
    return Sample(command, line, _alternatives(opts.get("keep", "")), _alternatives(opts.get("drop", "")),
                  exit_codes, opts.get("tag", ""), columns)


def samples(text: str) -> list[Sample]:
    """Every sample marker of a markdown text, with the text of its block (fences removed)."""
    out = []
    for m in MARKER.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        body = re.sub(r"\A\s*```[^\n]*\n|```\s*\Z", "", m.group("body"))
        s = parse_head(m.group("head"), line)
        out.append(Sample(s.command, s.line, s.keep, s.drop, s.exit_codes, s.tag, s.columns, body))
    return out


def sections(text: str) -> list[list[str]]:
    """The sections of a report, as lists of lines: blocks between blank lines, and a rich
    table's last line (``└``) ends one too (rich prints titled tables one under another)."""
    blocks: list[list[str]] = [[]]
    for ln in text.splitlines():
        if ln.strip():
            blocks[-1].append(ln.rstrip())
            if ln.startswith("└"):
                blocks.append([])
        elif blocks[-1]:
            blocks.append([])
    return [b for b in blocks if b]


def select(output: str, sample: Sample) -> str:
    """What the sample shows of a command's ``output``: its ``drop`` lines left out, then its
    ``keep`` sections. Raises SampleError when a kept section is missing."""
    lines = [ln.rstrip() for ln in output.splitlines() if not ln.startswith(sample.drop or ("\0",))]
    text = "\n".join(lines)
    if not sample.keep:
        return text.strip("\n") + "\n"
    kept = [b for b in sections(text) if b[0].startswith(sample.keep)]
    missing = [k for k in sample.keep if not any(b[0].startswith(k) for b in kept)]
    if missing:
        raise SampleError(f"line {sample.line}: `{sample.command}` printed no section {missing}")
    return "\n\n".join("\n".join(b) for b in kept) + "\n"


def run(sample: Sample, cache: dict[tuple[str, int], str]) -> str:
    """The command's stdout (run once per command and width). Raises SampleError when its
    exit code is not the one the marker expects."""
    key = (sample.command, sample.columns)
    if key not in cache:
        env = dict(os.environ, COLUMNS=str(sample.columns), PATH=f"{ROOT / '.venv/bin'}:{os.environ['PATH']}")
        print(f"docsamples: {sample.command}", file=sys.stderr, flush=True)
        proc = subprocess.run(["bash", "-c", sample.command], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        if proc.returncode not in sample.exit_codes:
            raise SampleError(f"line {sample.line}: `{sample.command}` exited {proc.returncode}, "
                              f"not {' or '.join(map(str, sample.exit_codes))}")
        cache[key] = proc.stdout
    return cache[key]


def rewrite(text: str, tag: str, cache: dict[tuple[str, int], str]) -> str:
    """``text`` with the blocks of its samples of group ``tag`` printed anew."""
    def one(m: re.Match[str]) -> str:
        s = parse_head(m.group("head"), text.count("\n", 0, m.start()) + 1)
        if s.tag != tag:
            return m.group(0)
        shown = select(run(s, cache), s)
        fence = re.match(r"\s*(```[^\n]*)", m.group("body"))  # keep the block's language
        return f"<!-- sample:{m.group('head')}-->\n{fence.group(1) if fence else '```'}\n{shown}```\n<!-- /sample -->\n"
    return MARKER.sub(one, text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--tag", default="", help="run the samples of this group (default: the untagged ones)")
    ap.add_argument("--list", action="store_true", help="print each sample's command, run nothing")
    args = ap.parse_args(argv)
    cache: dict[tuple[str, int], str] = {}
    failed = False
    for path in args.files:
        try:
            text = path.read_text()
            if args.list:
                for s in samples(text):
                    print(f"{path}:{s.line} [{s.tag or 'docs'}] {s.command}")
                continue
            new = rewrite(text, args.tag, cache)
        except (OSError, SampleError) as exc:
            print(f"docsamples: {path}: {exc}", file=sys.stderr)
            failed = True
            continue
        if new != text:
            path.write_text(new)
            print(f"docsamples: rewrote {path}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
