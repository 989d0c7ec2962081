"""A readable difference between an expected frame and a received one: the fields that differ,
layer by layer, then scapy's ``show2`` of both as a unified diff.

The received frame is dissected with the expected packet's own layer classes, in order, so
MRC's layers (which no UDP port binds by default) line up field by field.
"""

from __future__ import annotations

import difflib

from scapy.layers.l2 import Ether
from scapy.packet import NoPayload, Packet, Raw

from .mask import Mask

MAX_FIELD_LINES = 40


def _chain(packet: Packet) -> list[type[Packet]]:
    classes = []
    layer: Packet = packet
    while not isinstance(layer, NoPayload):
        classes.append(type(layer))
        layer = layer.payload
    return classes


def dissect_like(classes: list[type[Packet]], frame: bytes) -> list[Packet]:
    """``frame`` cut into one layer per class of ``classes`` (the rest as Raw)."""
    layers: list[Packet] = []
    rest = frame
    for cls in classes:
        if not rest:
            break
        pkt = cls(rest)
        tail = bytes(pkt.payload)
        pkt.remove_payload()
        layers.append(pkt)
        rest = tail
    if rest:
        layers.append(Raw(rest))
    return layers


def _template(expected: Mask) -> list[type[Packet]]:
    if expected.packet is not None:
        return _chain(expected.packet)
    return _chain(Ether(expected.expected))


def field_lines(expected: Mask, got: bytes) -> list[str]:
    """One line per field that differs: ``IPv6.hlim: expected 63, got 64`` (ignored fields
    are left out)."""
    classes = _template(expected)
    want, have = dissect_like(classes, expected.expected), dissect_like(classes, got)
    lines = []
    for i in range(max(len(want), len(have))):
        a = want[i] if i < len(want) else None
        b = have[i] if i < len(have) else None
        if a is None or b is None or type(a) is not type(b):
            lines.append(f"layer {i}: expected {_name(a)}, got {_name(b)}")
            continue
        for fld in a.fields_desc:
            label = f"{type(a).__name__}.{fld.name}"
            if label in expected.ignored:
                continue
            va, vb = a.getfieldval(fld.name), b.getfieldval(fld.name)
            if va != vb:
                lines.append(f"{label}: expected {fld.i2repr(a, va)}, got {fld.i2repr(b, vb)}")
    if len(got) != len(expected.expected):
        lines.append(f"length: expected {len(expected.expected)} B, got {len(got)} B")
    return lines[:MAX_FIELD_LINES]


def _name(layer: Packet | None) -> str:
    return "nothing" if layer is None else type(layer).__name__


def show2(classes: list[type[Packet]], frame: bytes) -> str:
    """scapy's ``show2`` of ``frame`` dissected as ``classes``."""
    return "\n".join(str(layer.show2(dump=True) or "").rstrip() for layer in dissect_like(classes, frame))


def describe(expected: Mask, got: bytes) -> str:
    """The field lines, then the unified diff of both ``show2`` texts."""
    classes = _template(expected)
    fields = field_lines(expected, got) or ["(the fields agree; the bytes differ in a bit the fields hide)"]
    text = difflib.unified_diff(show2(classes, expected.expected).splitlines(), show2(classes, got).splitlines(),
                                "expected (show2)", "got (show2)", lineterm="", n=1)
    return "\n".join(["  " + line for line in fields] + ["", *text])


def summary(frame: bytes) -> str:
    """One line for a received frame: its length and scapy's summary."""
    return f"{len(frame)} B {Ether(frame).summary()}"
