"""The tables, actions, action profiles and counters of the switch pipeline with the P4Runtime
ids p4c assigns, rendered from the committed P4Info into docs/p4runtime.md.

p4c derives the ids from the names (P4Runtime spec 1.4 section 6.3), so they are facts of the
compiled program, never typed by hand: ``python -m mrckit.switch.p4runtime.pipeline_doc``
rewrites the block between the two marker comments of ``docs/p4runtime.md`` from
``p4src/build/mrc_switch.p4info.txtpb`` (after ``make p4``), and ``--check`` exits 1 when the
committed block differs. The P4Info is first checked against the pipeline contract
(``mrckit.wire.pipeline.MRC_SWITCH``, as the server checks a pushed P4Info), so the table also
shows the eBPF target's action codes (``struct table_action.action``) from the contract.
``tests/p4/test_p4_pipeline_doc.py`` fails when the document is stale.
"""

import sys
from pathlib import Path

from finsy.proto import p4i
from google.protobuf import text_format

from ...wire.pipeline import BPF_ACTION_IDS, MRC_SWITCH
from ...errors import MrcError
from ...resources import checkout_root
from ..bmv2 import DEFAULT_P4INFO
from .errors import P4RuntimeError
from .p4info import Pipeline, short_name

DOC = Path("docs") / "p4runtime.md"
"""The page, relative to the source checkout (:func:`doc_path`)."""
BEGIN = "<!-- BEGIN GENERATED PIPELINE IDS: python -m mrckit.switch.p4runtime.pipeline_doc -->"
END = "<!-- END GENERATED PIPELINE IDS -->"
_MATCH = {p4i.MatchField.EXACT: "exact", p4i.MatchField.LPM: "lpm", p4i.MatchField.TERNARY: "ternary",
          p4i.MatchField.OPTIONAL: "optional", p4i.MatchField.RANGE: "range"}
_UNIT = {p4i.CounterSpec.BYTES: "bytes", p4i.CounterSpec.PACKETS: "packets", p4i.CounterSpec.BOTH: "packets and bytes"}


def load(path: Path = DEFAULT_P4INFO) -> p4i.P4Info:
    """The P4Info text file at ``path``.

    Raises:
        OSError: unreadable; ``text_format.ParseError``: not a P4Info text message.
    """
    return text_format.Parse(path.read_text(), p4i.P4Info())


def render(p4info: p4i.P4Info) -> str:
    """The markdown block (markers included) listing ``p4info``'s objects with their ids.

    Raises:
        P4RuntimeError: the P4Info does not match the pipeline contract (INVALID_ARGUMENT,
            every mismatch listed).
    """
    Pipeline.build(p4info, MRC_SWITCH)
    lines = [BEGIN, "", *_tables(p4info), "", *_actions(p4info), "", *_profiles(p4info), "", *_counters(p4info),
             "", END]
    return "\n".join(lines)


def _hex(ident: int) -> str:
    return f"`{ident:#010x}` ({ident})"


def _tables(p4info: p4i.P4Info) -> list[str]:
    actions = {a.preamble.id: short_name(a.preamble) for a in p4info.actions}
    profiles = {p.preamble.id: short_name(p.preamble) for p in p4info.action_profiles}
    rows = ["| table | id | match fields (id: name, kind, bits) | actions | default action | size | implementation |",
            "|---|---|---|---|---|---|---|"]
    for t in p4info.tables:
        fields = "; ".join(f"{f.id}: `{f.name}` {_MATCH[f.match_type]} {f.bitwidth}" for f in t.match_fields)
        refs = ", ".join(f"`{actions[r.id]}`" + (" (default only)" if r.scope == p4i.ActionRef.DEFAULT_ONLY else "")
                         for r in t.action_refs)
        default = actions.get(t.initial_default_action.action_id) or MRC_SWITCH.table(short_name(t.preamble)).default_action
        impl = f"`{profiles[t.implementation_id]}`" if t.implementation_id else "direct"
        rows.append(f"| `{short_name(t.preamble)}` | {_hex(t.preamble.id)} | {fields} | {refs} | `{default}` | "
                    f"{t.size} | {impl} |")
    return ["**Tables**", "", *rows]


def _actions(p4info: p4i.P4Info) -> list[str]:
    rows = ["| action | id | parameters (id: name, bits) | eBPF action code |", "|---|---|---|---|"]
    for a in p4info.actions:
        name = short_name(a.preamble)
        params = "; ".join(f"{p.id}: `{p.name}` {p.bitwidth}" for p in a.params) or "none"
        code = BPF_ACTION_IDS.get(name)
        shown = "none (`port_config` holds a `struct port_config`)" if code is None else code
        rows.append(f"| `{name}` | {_hex(a.preamble.id)} | {params} | {shown} |")
    return ["**Actions**", "", *rows]


def _profiles(p4info: p4i.P4Info) -> list[str]:
    tables = {t.preamble.id: short_name(t.preamble) for t in p4info.tables}
    rows = ["| action profile | id | tables | selector | members | members per group | groups (eBPF maps) |",
            "|---|---|---|---|---|---|---|"]
    for p in p4info.action_profiles:
        name = short_name(p.preamble)
        rows.append(f"| `{name}` | {_hex(p.preamble.id)} | {', '.join(f'`{tables[i]}`' for i in p.table_ids)} | "
                    f"{'yes' if p.with_selector else 'no'} | {p.size} | {p.max_group_size} | "
                    f"{MRC_SWITCH.action_profile(name).max_groups} |")
    return ["**Action profiles**", "", *rows]


def _counters(p4info: p4i.P4Info) -> list[str]:
    rows = ["| counter | id | unit | cells |", "|---|---|---|---|"]
    for c in p4info.counters:
        rows.append(f"| `{short_name(c.preamble)}` | {_hex(c.preamble.id)} | {_UNIT[c.spec.unit]} | {c.size} |")
    return ["**Counters**", "", *rows]


def with_block(text: str, block: str) -> str:
    """``text`` with the part between the markers replaced by ``block``.

    Raises:
        ValueError: ``text`` lacks the markers.
    """
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{DOC.name} lacks the markers {BEGIN!r} ... {END!r}")
    return text[:start] + block + text[end + len(END):]


def doc_path() -> Path:
    """docs/p4runtime.md of the checkout around the current directory.

    Raises:
        MrcError: not inside an mrckit source checkout.
    """
    return checkout_root() / DOC


def is_current(doc: Path | None = None, p4info_path: Path = DEFAULT_P4INFO) -> bool:
    """Whether ``doc``'s block (default: :func:`doc_path`) equals the one rendered from
    ``p4info_path``."""
    text = (doc or doc_path()).read_text()
    return with_block(text, render(load(p4info_path))) == text


def main(argv: list[str]) -> int:
    """``[--check]``: rewrite (or only check) the block of docs/p4runtime.md; exit 1 when stale
    or when the P4Info does not match the contract (one line naming why)."""
    try:
        current = is_current()
        if "--check" in argv:
            if not current:
                print(f"stale: {DOC} (run: python -m mrckit.switch.p4runtime.pipeline_doc)")
            return 0 if current else 1
        if not current:
            doc = doc_path()
            doc.write_text(with_block(doc.read_text(), render(load())))
            print(f"wrote {DOC}")
        return 0
    except (OSError, ValueError, text_format.ParseError, P4RuntimeError, MrcError) as exc:
        print(f"pipeline_doc: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
