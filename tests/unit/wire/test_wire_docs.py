"""docs/wire-format.md agrees with the code: its header tables list every field of every layer
with the right byte and width, and its constants tables are freshly generated."""

import re

import pytest

from mrckit.wire.gen import DOC, _doc_with_block
from mrckit.wire.layers import HEADER_LAYERS

from support.wire_layout import py_layout

from support.paths import ROOT

TEXT = (ROOT / DOC).read_text()


def _doc_tables() -> dict[str, tuple[int, list[tuple[int, str, int]]]]:
    """name -> (size in bytes, [(byte, field, bits), ...]) from the '### X (`name`, N B)' sections."""
    tables = {}
    sections = re.split(r"^### ", TEXT, flags=re.M)
    for section in sections:
        head = re.match(r"[\w ]+ \(`(\w+)`, (\d+) B\)", section)
        if not head:
            continue
        rows = re.findall(r"^\| (\d+) \| (\w+) \| (\d+) \|", section, flags=re.M)
        tables[head[1]] = (int(head[2]), [(int(b), f, int(w)) for b, f, w in rows])
    return tables


def test_every_header_has_a_table():
    assert set(_doc_tables()) == set(HEADER_LAYERS)


@pytest.mark.parametrize("name", list(HEADER_LAYERS))
def test_table_equals_layer(name):
    size, rows = _doc_tables()[name]
    layout = py_layout(HEADER_LAYERS[name])
    assert rows == [(offset // 8, field, bits) for field, offset, bits in layout]
    assert size == HEADER_LAYERS[name].wire_len == sum(bits for *_, bits in layout) // 8


def test_constants_block_is_fresh():
    assert _doc_with_block(TEXT) == TEXT, "run python -m mrckit.wire.gen"
