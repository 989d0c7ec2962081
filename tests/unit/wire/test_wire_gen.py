"""One source of truth: the committed C and P4 constant files are exactly what
``python -m mrckit.wire.gen`` renders from mrckit.wire, and the P4 header types have the
Python layers' field names and widths."""

import re
import subprocess
import sys

import pytest

from mrckit.wire import constants as k
from mrckit.wire.gen import CONSTANTS, OUTPUTS, all_constants, render_c, render_p4, stale_files
from mrckit.wire.layers import HEADER_LAYERS

from support.wire_layout import py_layout

from support.paths import ROOT


@pytest.mark.parametrize("rel", list(OUTPUTS))
def test_generated_files_are_fresh(rel):
    assert (ROOT / rel).read_text() == OUTPUTS[rel](), f"{rel} is stale: run python -m mrckit.wire.gen"


def test_check_mode_reports_stale_files(tmp_path):
    assert set(stale_files(tmp_path)) == set(OUTPUTS)
    (tmp_path / "ebpf/include").mkdir(parents=True)
    (tmp_path / "p4src/include").mkdir(parents=True)
    for rel, render in OUTPUTS.items():
        (tmp_path / rel).write_text(render())
    assert stale_files(tmp_path) == []
    (tmp_path / "p4src/include/mrc_constants.p4").write_text(render_p4().replace("= 4791;", "= 4790;"))
    assert stale_files(tmp_path) == ["p4src/include/mrc_constants.p4"]


def test_check_command_passes_on_the_repository():
    proc = subprocess.run([sys.executable, "-m", "mrckit.wire.gen", "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("enum,prefix", [
    (k.Opcode, "OP"), (k.Dscp, "DSCP"), (k.Ecn, "ECN"), (k.NackReason, "NACK"),
    (k.MultipathState, "M"), (k.EpOp, "EP_OP"), (k.EpStatus, "EP_STATUS"), (k.EvState, "EV_STATE"),
    (k.DropReason, "DROP"), (k.UsidRole, "USID_ROLE"),
])
def test_every_enum_member_is_generated(enum, prefix):
    consts = all_constants()
    for member in enum:
        assert consts[f"MRC_{prefix}_{member.name}"] == member.value


def test_every_length_and_port_is_generated():
    consts = all_constants()
    names = [n for n in dir(k) if n.endswith("_LEN") or n.startswith(("UDP_PORT", "BTH_FLAG", "MAX_"))]
    assert {"BTH_LEN", "UDP_PORT_ROCEV2", "MAX_PLANES"} <= set(names)  # the filter still finds them
    for name in names:
        assert consts[f"MRC_{name}"] == getattr(k, name), name


def _p4_consts(text: str) -> dict[str, tuple[int, int]]:
    found = re.findall(r"const bit<(\d+)> (\w+) = (0x[0-9a-f]+|\d+);", text)
    return {name: (int(bits), int(value, 0)) for bits, name, value in found}


def test_p4_constants_parse_back_to_the_python_values():
    parsed = _p4_consts((ROOT / "p4src/include/mrc_constants.p4").read_text())
    assert {n: v for n, (_, v) in parsed.items()} == all_constants()
    for name, (bits, value) in parsed.items():
        assert value < 1 << bits, f"{name} does not fit bit<{bits}>"


def test_c_defines_parse_back_to_the_python_values():
    found = re.findall(r"#define (MRC_\w+) (0x[0-9a-f]+|\d+)U?", render_c())
    assert {n: int(v, 0) for n, v in found} == all_constants()
    assert len(found) == sum(len(c) for _, c in CONSTANTS)


def _p4_headers() -> dict[str, list[tuple[str, int]]]:
    text = (ROOT / "p4src/include/headers.p4").read_text()
    headers = {}
    for name, body in re.findall(r"header (\w+)_h \{(.*?)\}", text, re.S):
        headers[name] = [(f, int(b)) for b, f in re.findall(r"bit<(\d+)>\s+(\w+);", body)]
    return headers


@pytest.mark.parametrize("name", list(HEADER_LAYERS))
def test_p4_header_equals_python_layer(name):
    expected = [(field, bits) for field, _, bits in py_layout(HEADER_LAYERS[name])]
    assert _p4_headers()[name] == expected


def test_p4_network_headers_have_their_sizes():
    headers = _p4_headers()
    sizes = {name: sum(b for _, b in fields) // 8 for name, fields in headers.items()}
    assert (sizes["ethernet"], sizes["ipv6"], sizes["udp"]) == (k.ETH_LEN, k.IPV6_LEN, k.UDP_LEN)
    assert [f for f, _ in headers["ipv6"]][-1] == "dst_addr"  # the P4Runtime keys use dst_addr[127:80]
