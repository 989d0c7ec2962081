"""Generate the C and P4 views of the wire constants (design section 3) and of the switch
pipeline contract (design section 4, ``mrckit.wire.pipeline``) from the Python source.

``python -m mrckit.wire.gen`` rewrites, relative to the repository root:

- ``ebpf/include/mrc_wire_gen.h``: ``#define MRC_<NAME> <value>`` for every wire constant;
- ``p4src/include/mrc_constants.p4``: ``const bit<W> MRC_<NAME> = <value>;``;
- ``ebpf/include/mrc_pipeline_gen.h`` and ``p4src/include/mrc_pipeline.p4``: the same for the
  pipeline contract (table sizes, action profile sizes, the eBPF target's action ids...);
- the constants tables of ``docs/wire-format.md``, between its marker comments.

``python -m mrckit.wire.gen --check`` exits 1 and names the stale files instead of writing.
``tests/unit/wire/test_wire_gen.py`` and ``test_pipeline_gen.py`` fail when the committed files differ from :func:`render_c` /
:func:`render_p4`, so the three languages cannot drift apart.

Naming: a Python enum member ``Opcode.WRITE_ONLY`` becomes ``MRC_OP_WRITE_ONLY`` in C and P4;
a module constant ``BTH_LEN`` becomes ``MRC_BTH_LEN``. ``CONSTANTS`` lists every pair.
"""

import sys
from enum import IntEnum
from pathlib import Path
from typing import NamedTuple

from . import addressing, ev, pipeline, usid
from . import constants as k


class Const(NamedTuple):
    """One generated constant: C/P4 name, value, P4 width in bits, and a one-line comment."""

    name: str
    value: int
    bits: int
    doc: str = ""
    hex: bool = False


def _enum(prefix: str, enum: type[IntEnum], bits: int, doc: str, hex: bool = False) -> list[Const]:
    return [Const(f"MRC_{prefix}_{m.name}", int(m), bits, doc if i == 0 else "", hex)
            for i, m in enumerate(enum)]


def _plain(names: list[str], module, bits: int) -> list[Const]:
    # Masks and single-bit flags read best in hex, shifts and counts in decimal.
    return [Const(f"MRC_{n}", getattr(module, n), bits, "", "MASK" in n or n in _BIT_FLAGS)
            for n in names]


_BIT_FLAGS = {"BTH_FLAG_ACKREQ", "BTH_FLAG_RTX", "BTH_FLAG_TS", "BTH_SE", "BTH_MIGREQ", "SETH_PR",
              "TS_TSR", "CC_RESTORE_CWND"}


_LENGTHS = ["ETH_LEN", "IPV6_LEN", "UDP_LEN", "BTH_LEN", "METH_LEN", "TSETH_LEN", "RETH_LEN",
            "IMMDT_LEN", "AETH_LEN", "SETH_LEN", "CC_STATE_LEN", "NETH_LEN", "PETH_LEN",
            "ERTH_LEN", "EETH_LEN", "ICRC_LEN", "ICRC_PREFIX_LEN", "ENCAP_LEN", "IPV6_MIN_MTU"]
_LAYOUT8 = ["BTH_FLAG_ACKREQ", "BTH_FLAG_RTX", "BTH_FLAG_TS", "BTH_FLAGS_RESERVED_MASK",
            "BTH_SE", "BTH_MIGREQ", "BTH_PADCNT_SHIFT", "BTH_PADCNT_MASK", "BTH_TVER_MASK",
            "IPV6_DSCP_SHIFT", "IPV6_ECN_MASK", "TSETH_FORMAT", "TS_FORMAT_MASK",
            "SETH_TYPE_SHIFT", "SETH_NEXT_SHIFT", "SETH_NEXT_MASK", "SETH_M_SHIFT",
            "SETH_M_MASK", "SETH_PR", "CC_TYPE_SHIFT", "CC_FLAGS_MASK", "CC_RESTORE_CWND",
            "CC_RCV_CWND_PEN_MASK", "EP_OP_SHIFT", "EP_OP_MASK", "EP_STATUS_SHIFT",
            "EP_STATUS_MASK", "SACK_BITMAP_BITS"]
_LAYOUT16 = ["TS_TSR", "CC_OOO_COUNT_MASK"]
_LIMITS = ["MAX_PLANES", "MAX_T1_PER_PLANE", "MAX_T0_PER_PLANE", "MAX_DOWNLINKS_PER_T0",
           "MAX_USIDS_IN_CONTAINER", "SWITCH_PORT_BITS", "BMV2_MAX_PORTS"]


def _build() -> list[tuple[str, list[Const]]]:
    return [
        ("UDP ports, reserved QP, protocol numbers", [
            Const("MRC_UDP_PORT_ROCEV2", k.UDP_PORT_ROCEV2, 16, "RoCEv2 UDP destination port"),
            Const("MRC_AGENT_UDP_PORT", k.AGENT_UDP_PORT, 16, "QP 0x2 traffic is rewritten to this port"),
            Const("MRC_QP_ENDPOINT_OPS", k.QP_ENDPOINT_OPS, 24, "destination QP of EP_REQ/EP_RESP", True),
            Const("MRC_ETHERTYPE_IPV6", k.ETHERTYPE_IPV6, 16, "", True),
            Const("MRC_IPPROTO_IPV6", k.IPPROTO_IPV6, 8, "outer next header: IPv6-in-IPv6"),
            Const("MRC_IPPROTO_UDP", k.IPPROTO_UDP, 8),
            Const("MRC_OUTER_HOP_LIMIT", k.OUTER_HOP_LIMIT, 8),
        ]),
        ("Header lengths in bytes", _plain(_LENGTHS, k, 16)),
        ("Transport parameters", [
            Const("MRC_DEFAULT_PAYLOAD_LEN", k.DEFAULT_PAYLOAD_LEN, 16, "bytes of RDMA payload per packet"),
            Const("MRC_MPR_UNIT_PSNS", k.MPR_UNIT_PSNS, 16, "SETH MPR unit, in PSNs"),
            Const("MRC_SETH_OFFSET_MAX", k.SETH_OFFSET_MAX, 16, "SETH PSN offsets: signed 16-bit", True),
            Const("MRC_TIME_UNIT_NS", k.TIME_UNIT_NS, 16, "tx_timestamp/service time unit, ns"),
            Const("MRC_RCVD_BYTES_UNIT", k.RCVD_BYTES_UNIT, 16, "CC_STATE rcvd_bytes unit, bytes"),
            Const("MRC_ALWAYS_SKIP_CE_MIN", k.ALWAYS_SKIP_CE_MIN, 8, "ALWAYS_SKIP: CE marks ..."),
            Const("MRC_ALWAYS_SKIP_WINDOW", k.ALWAYS_SKIP_WINDOW, 8, "... among this many packets"),
            Const("MRC_PSN_BITS", k.PSN_BITS, 8),
            Const("MRC_PSN_MOD", k.PSN_MOD, 32, "", True),
            Const("MRC_BTH_DEFAULT_PKEY", k.BTH_DEFAULT_PKEY, 16, "BTH P_Key: default partition", True),
        ]),
        ("Bit layouts inside header fields (see docs/wire-format.md)",
         _plain(_LAYOUT8, k, 8) + _plain(_LAYOUT16, k, 16)
         + [Const("MRC_IPV6_FLOW_LABEL_MASK", k.IPV6_FLOW_LABEL_MASK, 20, "", True)]),
        ("BTH opcodes", _enum("OP", k.Opcode, 8, "BTH byte 0", True)),
        ("DSCP classes (build-time constants)", _enum("DSCP", k.Dscp, 6, "6-bit DSCP")),
        ("ECN codepoints", _enum("ECN", k.Ecn, 2, "RFC 3168")),
        ("NACK reasons", _enum("NACK", k.NackReason, 8, "NETH nack_reason", True)),
        ("AETH syndromes (the RC baseline's ACK)", _enum("AETH", k.AethSyndrome, 8, "AETH syndrome", True)),
        ("SETH M field", _enum("M", k.MultipathState, 2, "SETH M(6..5)")),
        ("Endpoint operations", _enum("EP_OP", k.EpOp, 2, "ERTH/EETH op(7..6)")
         + _enum("EP_STATUS", k.EpStatus, 2, "EETH status(5..4)")),
        ("EV states", _enum("EV_STATE", k.EvState, 8, "sender's per-EV path state")),
        ("Host dataplane flags (host_config.flags)", _enum("HOST_FLAG", k.HostFlag, 32, "bit", True)),
        ("Switch drop reasons (index of the drop_reason counter)",
         _enum("DROP", k.DropReason, 32, "drop_reason counter index")
         + [Const("MRC_DROP_REASON_COUNT", len(k.DropReason), 32, "size of the drop_reason counter")]),
        ("EV layout: plane(31..28) T1(27..20) salt(19..0); sport = EV >> 16, flow label = EV & 0xffff", [
            Const("MRC_EV_PLANE_SHIFT", ev.PLANE_SHIFT, 8),
            Const("MRC_EV_PLANE_MASK", ev.PLANE_MASK, 8, "", True),
            Const("MRC_EV_T1_SHIFT", ev.T1_SHIFT, 8),
            Const("MRC_EV_T1_MASK", ev.T1_MASK, 8, "", True),
            Const("MRC_EV_SALT_MASK", ev.SALT_MASK, 32, "", True),
            Const("MRC_EV_SPORT_SHIFT", ev.EV_SPORT_SHIFT, 8),
            Const("MRC_EV_FLOW_LABEL_MASK", ev.EV_FLOW_LABEL_MASK, 32, "", True),
        ]),
        ("uSID layout: plane(15..12) role(11..10) index(9..0); container = locator(32) + 6 x 16", [
            Const("MRC_USID_PLANE_SHIFT", usid.USID_PLANE_SHIFT, 8),
            Const("MRC_USID_ROLE_SHIFT", usid.USID_ROLE_SHIFT, 8),
            Const("MRC_USID_ROLE_MASK", usid.USID_ROLE_MASK, 8, "", True),
            Const("MRC_USID_INDEX_MASK", usid.USID_INDEX_MASK, 16, "", True),
            Const("MRC_USID_BITS", usid.USID_BITS, 8),
            Const("MRC_LOCATOR_BITS", usid.LOCATOR_BITS, 8),
            Const("MRC_ACTIVE_PREFIX_BITS", usid.ACTIVE_PREFIX_BITS, 8),
            Const("MRC_LOCATOR_DEFAULT", usid.DEFAULT_LOCATOR, 32, "fcbb:bb00::/32", True),
        ] + _enum("USID_ROLE", k.UsidRole, 2, "uSID role(11..10)")),
        ("Addressing plan (design 3.3): host addresses are 2001:db8:K:L::H", [
            Const("MRC_ADDR_PREFIX", addressing.ADDR_PREFIX, 32, "first 32 bits of a host address", True),
            Const("MRC_NIC_HEXTET", addressing.NIC_HEXTET, 16, "K of a NIC address", True),
            Const("MRC_PORT_HEXTET_BASE", addressing.PORT_HEXTET_BASE, 16, "K of plane 0's port address", True),
        ]),
        ("Limits", _plain(_LIMITS, k, 16)),
    ]


CONSTANTS: list[tuple[str, list[Const]]] = _build()
"""Every generated constant, in groups: ``[(group title, [Const, ...]), ...]``."""


def all_constants() -> dict[str, int]:
    """Name → value for every generated constant (the names are unique)."""
    out: dict[str, int] = {}
    for _, consts in CONSTANTS:
        for c in consts:
            if c.name in out:
                raise AssertionError(f"duplicate generated constant {c.name}")
            out[c.name] = c.value
    return out


_BANNER = "Generated by `python -m mrckit.wire.gen` from controller/mrckit/wire. Do not edit."


def _fmt(c: Const) -> str:
    return f"0x{c.value:x}" if c.hex else str(c.value)


def _render_c(groups: list[tuple[str, list[Const]]], guard: str, unsigned: bool = True) -> str:
    # ``unsigned``: C needs the U suffix above INT_MAX; the P4 preprocessor output must not have it.
    lines = [f"/* {_BANNER} */", f"#ifndef {guard}", f"#define {guard}", ""]
    for title, consts in groups:
        lines.append(f"/* {title} */")
        for c in consts:
            suffix = "U" if unsigned and c.value > 0x7FFFFFFF else ""
            comment = f"  /* {c.doc} */" if c.doc else ""
            lines.append(f"#define {c.name} {_fmt(c)}{suffix}{comment}")
        lines.append("")
    lines.append(f"#endif /* {guard} */")
    return "\n".join(lines) + "\n"


def _render_p4(groups: list[tuple[str, list[Const]]], guard: str) -> str:
    lines = [f"/* {_BANNER} */", f"#ifndef {guard}", f"#define {guard}", ""]
    for title, consts in groups:
        lines.append(f"/* {title} */")
        for c in consts:
            if c.value >> c.bits:
                raise AssertionError(f"{c.name}={c.value} does not fit bit<{c.bits}>")
            comment = f"  /* {c.doc} */" if c.doc else ""
            lines.append(f"const bit<{c.bits}> {c.name} = {_fmt(c)};{comment}")
        lines.append("")
    lines.append(f"#endif /* {guard} */")
    return "\n".join(lines) + "\n"


def render_c() -> str:
    """The text of ``ebpf/include/mrc_wire_gen.h``."""
    return _render_c(CONSTANTS, "MRC_WIRE_GEN_H")


def render_p4() -> str:
    """The text of ``p4src/include/mrc_constants.p4``."""
    return _render_p4(CONSTANTS, "_MRC_CONSTANTS_P4_")


def _pipeline_groups(p4: bool) -> list[tuple[str, list[Const]]]:
    # P4 sizes and thresholds are bit<32>, as p4c wants for table sizes and counter sizes.
    groups = []
    for title, consts in pipeline.generated_constants():
        chosen = [Const(name, value, 32, doc, value > 0xFFFFFF) for name, value, in_p4, doc in consts if in_p4 or not p4]
        if chosen:
            groups.append((title, chosen))
    return groups


def pipeline_constants() -> dict[str, int]:
    """Name → value of every generated constant of the pipeline contract (as the C header has them).

    Read from ``pipeline.MRC_SWITCH`` at each call, as the renderers are, so that a changed
    contract shows in the output (and in the stale check) at once.
    """
    return {c.name: c.value for _, consts in _pipeline_groups(p4=False) for c in consts}


def render_pipeline_c() -> str:
    """The text of ``ebpf/include/mrc_pipeline_gen.h`` (every pipeline constant)."""
    return _render_c(_pipeline_groups(p4=False), "MRC_PIPELINE_GEN_H")


def render_pipeline_p4() -> str:
    """The text of ``p4src/include/mrc_pipeline.p4`` (the constants the P4 program has a use for).

    They are preprocessor ``#define`` lines, as in C, not ``const``: p4c reads annotations such
    as ``@max_group_size`` before constant folding and takes only integer literals there.
    """
    return _render_c(_pipeline_groups(p4=True), "_MRC_PIPELINE_P4_", unsigned=False)


DOC = "docs/wire-format.md"
DOC_BEGIN = "<!-- BEGIN GENERATED CONSTANTS: python -m mrckit.wire.gen -->"
DOC_END = "<!-- END GENERATED CONSTANTS -->"


def render_doc_block() -> str:
    """The constants tables of ``docs/wire-format.md``, between its two marker comments."""
    lines = [DOC_BEGIN, ""]
    for title, consts in CONSTANTS:
        lines += [f"**{title}**", "", "| C / P4 name | value | P4 type | note |", "|---|---|---|---|"]
        lines += [f"| `{c.name}` | {_fmt(c)} | `bit<{c.bits}>` | {c.doc} |" for c in consts]
        lines.append("")
    lines.append(DOC_END)
    return "\n".join(lines)


def _doc_with_block(current: str) -> str:
    """``current`` with the text between the markers replaced by :func:`render_doc_block`."""
    start, end = current.find(DOC_BEGIN), current.find(DOC_END)
    if start < 0 or end < start:
        raise ValueError(f"{DOC} lacks the markers {DOC_BEGIN!r} ... {DOC_END!r}")
    return current[:start] + render_doc_block() + current[end + len(DOC_END):]


OUTPUTS = {
    "ebpf/include/mrc_wire_gen.h": render_c,
    "p4src/include/mrc_constants.p4": render_p4,
    "ebpf/include/mrc_pipeline_gen.h": render_pipeline_c,
    "p4src/include/mrc_pipeline.p4": render_pipeline_p4,
}
"""Generated file (relative to the repository root) → function that renders its text."""


def repo_root(start: Path | None = None) -> Path:
    """The source checkout holding ``start`` (default: the current directory): the nearest
    folder with ``ebpf/include`` and ``p4src/include``, where the generated files live.

    Raises:
        FileNotFoundError: ``start`` is not inside an mrckit checkout.
    """
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "ebpf" / "include").is_dir() and (folder / "p4src" / "include").is_dir():
            return folder
    raise FileNotFoundError(f"{here} is not inside an mrckit source checkout (run this from the clone)")


def stale_files(root: Path) -> list[str]:
    """The generated files under ``root`` whose committed text differs from the rendered one."""
    stale = []
    for rel, render in OUTPUTS.items():
        path = root / rel
        if not path.exists() or path.read_text() != render():
            stale.append(rel)
    doc = root / DOC
    if doc.exists():
        text = doc.read_text()
        if DOC_BEGIN not in text or _doc_with_block(text) != text:
            stale.append(DOC)
    return stale


def write_all(root: Path) -> list[str]:
    """Write every generated file under ``root``; return the relative paths written."""
    for rel, render in OUTPUTS.items():
        (root / rel).write_text(render())
    written = list(OUTPUTS)
    doc = root / DOC
    if doc.exists():
        doc.write_text(_doc_with_block(doc.read_text()))
        written.append(DOC)
    return written


def main(argv: list[str]) -> int:
    """``[--check]``: write (or only check) the generated files; exit status 1 when stale."""
    try:
        root = repo_root()
    except FileNotFoundError as exc:
        print(f"mrckit.wire.gen: {exc}", file=sys.stderr)
        return 1
    if "--check" in argv:
        stale = stale_files(root)
        for rel in stale:
            print(f"stale: {rel} (run: python -m mrckit.wire.gen)")
        return 1 if stale else 0
    for rel in write_all(root):
        print(f"wrote {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
