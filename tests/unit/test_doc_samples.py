"""Each sample output of README.md and docs/ has the structure of what the code prints now:
the same sections and field names (row labels, column headings, report keys), whatever its
numbers. The samples are the blocks between `<!-- sample: CMD -->` markers that `make docs`
rewrites (tools/docsamples.py); a failure here means: run `make docs` (or the target the
marker's tag names) and commit what it printed."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console
from support.demo_synthetic import synthetic_run, with_rx
from support.doc_commands import check_mrc
from support.paths import ROOT

import docsamples
from mrckit.apps.chaos.report import ChaosReport
from mrckit.apps.demo.compare import compare
from mrckit.apps.demo.render import render, render_comparison
from mrckit.apps.demo.scenario import analyze
from mrckit.apps.traffic.report import TrafficReport
from mrckit.cli import main as mrc_main

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SAMPLES = [(doc, s) for doc in DOCS for s in docsamples.samples(doc.read_text())]
BOX = "┏┃┡│└━┳╇┩┓┗"


def _id(item: tuple[Path, docsamples.Sample]) -> str:
    return f"{item[0].relative_to(ROOT).as_posix()}:{item[1].line}"


def _label(text: str) -> str:
    """A name with its numbers taken out: `p0/s1 (failed)` and `p1/s1 (failed)` are one label."""
    return re.sub(r"\d+(\.\d+)?", "#", text.strip())


def structure(text: str) -> dict[str, set[str]]:
    """Section -> the names in it: a report's keys (the words before a two-space gap at the
    start of a line), a table's column headings and the labels of its first column. Lines
    that continue a wrapped value (indented) or title carry no name."""
    out: dict[str, set[str]] = {}
    for block in docsamples.sections(text):
        names: set[str] = set()
        top = next((i for i, ln in enumerate(block) if ln.startswith("┏")), 0)  # a title may wrap
        for ln in block[top + 1:] if top else block[1:]:
            if ln.startswith("┃"):
                names |= {_label(c) for c in ln.strip("┃").split("┃") if c.strip()}
            elif ln.startswith("│"):
                first = ln.strip("│").split("│")[0]
                if first.strip():
                    names.add(_label(first))
            elif ln[:1] not in BOX and not ln[:1].isspace():
                names.add(_label(re.split(r"\s{2,}", ln)[0]))
        out[" ".join(_label(block[0]).split()[:3])] = names
    return out


def _console_text(renderable) -> str:
    console = Console(file=io.StringIO(), width=docsamples.COLUMNS, force_terminal=False)
    console.print(renderable)
    return console.file.getvalue()


def _option(command: str, name: str, default: str | None = None) -> str | None:
    words = shlex.split(command.split("|")[0])
    return words[words.index(name) + 1] if name in words else default


def printed_now(sample: docsamples.Sample) -> str | None:
    """What the code of this commit prints for the sample's command, from a synthetic run or
    the JSON record the sample's run wrote; None for a sample this test cannot rebuild
    without root (it is then checked by its own end-to-end test)."""
    cmd = sample.command
    if cmd.startswith("mrc demo") and "--mode ecmp" in cmd:
        kind = _option(cmd, "--fail", "down")
        ecmp = analyze(with_rx(synthetic_run(kind), 3, "ecmp"))
        srv6 = analyze(with_rx(synthetic_run(kind), 1, "srv6"))
        return _console_text(render_comparison(compare(ecmp, srv6, seed=42)))
    if cmd.startswith("mrc demo"):
        return _console_text(render(analyze(synthetic_run(_option(cmd, "--fail", "down")))))
    if cmd.startswith("mrc traffic"):
        return "\n".join(TrafficReport.read_json(ROOT / _option(cmd, "--json")).lines()) if "--json" in cmd else None
    if cmd.startswith("mrc experiment chaos"):
        return "\n".join(ChaosReport.read_json(ROOT / _option(cmd, "--json")).lines())
    if cmd.startswith("mrc topo gen") and "-o" not in cmd.split() or cmd.startswith("mrc controller status"):
        return _cli(cmd.split("2>")[0], sample.exit_codes)
    if "mrc topo export" in cmd:
        with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
            _cli("mrc topo gen -o fabric.yaml", (0,))
            return _cli(cmd.split("&&")[-1], sample.exit_codes)
    return None


def _cli(cmd: str, exit_codes: tuple[int, ...]) -> str:
    """``mrc ...`` run in this process: what it printed, stdout and stderr."""
    result = CliRunner().invoke(mrc_main, shlex.split(cmd)[1:])
    assert result.exit_code in exit_codes, result.output
    return result.output


@pytest.mark.parametrize("item", SAMPLES, ids=_id)
def test_sample_has_the_structure_of_what_the_code_prints(item):
    doc, sample = item
    now = printed_now(sample)
    if now is None:
        pytest.skip(f"needs a real run: make docs{'-' + sample.tag if sample.tag else ''}")
    shown, expected = structure(sample.body), structure(docsamples.select(now, sample))
    assert shown == expected, (
        f"{_id(item)}: the sample of `{sample.command}` has other sections or names than what the "
        f"code prints now: run make docs{'-' + sample.tag if sample.tag else ''}")


def test_every_sample_command_exists_and_every_sample_has_text():
    """Every marker's `mrc` command and option exists and its block is not empty."""
    wrong = {}
    for doc, sample in SAMPLES:
        words = sample.command.split("|")[0].split("&&")[-1].split()
        why = check_mrc(words[1:]) if words[:1] == ["mrc"] else None
        if why or not sample.body.strip():
            wrong[_id((doc, sample))] = why or "empty block"
    assert not wrong, wrong
    assert {s.tag for _, s in SAMPLES} <= {"", "traffic", "bench"}, "a tag no make target runs"


def test_structure_tells_a_renamed_field_or_a_missing_section():
    """The comparison can fail: a key renamed, a section gone, a column added."""
    text = "transfer\nmode         srv6\nbytes        sent 1\n\nchecks\n┃ check ┃ result ┃\n│ ok_a  │ ok  │\n"
    base = structure(text)
    assert base == {"transfer": {"mode", "bytes"}, "checks": {"check", "result", "ok_a"}}
    assert structure(text.replace("bytes   ", "octets  ")) != base
    assert structure(text.split("\n\nchecks")[0]) != base
    assert structure(text.replace("result ┃", "result ┃ why ┃")) != base
