"""The conformance cases on ``mrckit.testing``: install a case's tables, send its frame, expect
each frame out of its port, expect nothing else after one quiet period, and compare the counter
deltas with the case's. A failing case leaves pcaps (the session's failure folder)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mrckit.testing import Entity, SwitchUnderTest, Tables, Target
from mrckit.testing.tables import Key


@dataclass
class Case:
    """One conformance case.

    frame goes in on in_port; ``out`` maps each port to the frames expected there (ports not
    named expect none); ``counts`` maps (counter, index) to the expected packet delta (every
    other cell must stay put); ``tables`` overrides the base tables for this case
    (None deletes an entry; keys and entries as in ``mrckit.testing.tables``' model);
    ``kernel``: a uN case that the Linux reference also runs.
    """

    name: str
    frame: bytes
    in_port: int
    out: dict[int, list[bytes]]
    counts: dict[tuple[str, int], int]
    tables: dict[tuple[str, Key], Entity | None] = field(default_factory=dict)
    kernel: bool = False


def expected_bytes(target: Target, case: Case, name: str) -> int:
    """Bytes a counter cell counts for one packet: the ingress length, except for the eBPF
    target's tx/trim/ecn counters, which count what leaves (design section 4)."""
    if name in ("tx_port", "trim_port", "ecn_port") and not target.counts_ingress_length:
        sent = [f for frames in case.out.values() for f in frames]
        return len(sent[0]) if sent else len(case.frame)
    return len(case.frame)


def run_case(sut: SwitchUnderTest, case: Case, base: Tables, pcap_dir: Path) -> None:
    """Install the tables, send, expect, compare counters. Raises AssertionError describing the
    first frame mismatch (with a field diff and the pcaps' folder) or every counter mismatch."""
    wanted = dict(base)
    for key, entry in case.tables.items():
        if entry is None:
            wanted.pop(key, None)
        else:
            wanted[key] = entry
    sut.tables.apply(wanted)
    assert sut.target is not None
    sut.target.reset_queues()
    sut.reset(artifacts=pcap_dir)
    sut.send(case.in_port, case.frame)
    for port, frames in sorted(case.out.items()):
        for frame in frames:
            sut.expect(port, frame)
    sut.expect_nothing_else()
    if "counters" in sut.target.features:
        problems = _counter_problems(sut.target, case, sut.counter_deltas())
        if problems:
            raise AssertionError(f"{sut.name}/{case.name}: " + "; ".join(problems))


def _counter_problems(target: Target, case: Case, deltas) -> list[str]:
    problems = []
    for cell in sorted(set(deltas) | set(case.counts)):
        packets, nbytes = deltas.get(cell, (0, 0))
        want = case.counts.get(cell, 0)
        if packets != want:
            problems.append(f"{cell[0]}[{cell[1]}] counted {packets} packets, expected {want}")
        elif want and nbytes != want * expected_bytes(target, case, cell[0]):
            problems.append(f"{cell[0]}[{cell[1]}] counted {nbytes} bytes, expected "
                            f"{want * expected_bytes(target, case, cell[0])}")
    return problems
