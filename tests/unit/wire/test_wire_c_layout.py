"""The C view (ebpf/include/mrc_wire.h) equals the Python layers byte for byte: every struct's
size, every member's offset and size, every constant and helper macro. The header is compiled
with the host gcc (and with clang -target bpf, as the BPF programs include it)."""

import shutil
import subprocess

import pytest

from mrckit.wire import ev_pack, ev_unpack, usid_pack
from mrckit.wire.gen import all_constants
from mrckit.wire.layers import HEADER_LAYERS

from support.wire_layout import py_layout

from support.paths import ROOT

INCLUDE = ROOT / "ebpf" / "include"

# C member -> the Python field that starts at the same byte. A C member that packs several bit
# fields is named after the first of them.
C_MEMBERS = {
    "bth": [("opcode", "opcode"), ("se_m_pad_tver", "solicited"), ("pkey", "pkey"),
            ("resv8", "resv8"), ("dqpn", "dqpn"), ("flags", "ackreq"), ("psn", "psn")],
    "meth": [("rqmsn", "rqmsn"), ("msn", "msn")],
    "tseth": [("tx_timestamp", "tx_timestamp"), ("tsr_format", "tsr")],
    "reth": [("va", "va"), ("rkey", "rkey"), ("dma_len", "dma_len")],
    "immdt": [("imm", "imm")],
    "aeth": [("syndrome", "syndrome"), ("msn", "msn")],
    "seth": [("type_next_m_pr", "hdr_type"), ("ack_psn_offset", "ack_psn_offset"), ("ev", "ev"),
             ("spdcid", "spdcid"), ("dpdcid", "dpdcid"), ("resv12", "resv12"),
             ("cack_psn", "cack_psn"), ("cc_type_flags", "cc_type"), ("mpr", "mpr"),
             ("sack_offset", "sack_offset"), ("sack_bitmap", "sack_bitmap")],
    "cc_state": [("tx_timestamp", "tx_timestamp"), ("ooo_count", "resv1"),
                 ("restore_pen", "restore_cwnd"), ("rcvd_bytes", "rcvd_bytes")],
    "neth": [("type_next", "hdr_type"), ("nack_reason", "nack_reason"),
             ("vendor_info", "vendor_info"), ("ev", "ev"), ("spdcid", "spdcid"),
             ("dpdcid", "dpdcid"), ("resv12", "resv12"), ("nack_psn", "nack_psn"),
             ("cc_type_flags", "cc_type"), ("resv17", "resv17"), ("tx_timestamp", "tx_timestamp")],
    "peth": [("resv0", "resv0"), ("vendor_info", "vendor_info"), ("probe_id", "probe_id"),
             ("resv4", "resv4"), ("spdcid", "spdcid"), ("dpdcid", "dpdcid"),
             ("tx_timestamp", "tx_timestamp"), ("tsr_format", "tsr"), ("resv14", "resv14")],
    "erth": [("op", "op"), ("vendor_info", "vendor_info"), ("probe_id", "probe_id"),
             ("port_status_mask", "port_status_mask"), ("resp_ev", "resp_ev"),
             ("tx_timestamp", "tx_timestamp"), ("resv14", "resv14")],
    "eeth": [("op_status", "op"), ("vendor_info", "vendor_info"), ("probe_id", "probe_id"),
             ("req_ev", "req_ev"), ("req_tx_timestamp", "req_tx_timestamp"),
             ("service_time", "service_time"), ("resv12", "resv12")],
}

EV_SAMPLES = [0, 0xFFFFFFFF, 0x10234567, 0xF0000000, 0x0FF00000, 0x000FFFFF]


def _program() -> str:
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "mrc_wire.h"',
             '#define SZ(s, m) sizeof(((struct s *)0)->m)', 'int main(void) {']
    for name, members in C_MEMBERS.items():
        lines.append(f'printf("size {name} %zu\\n", sizeof(struct mrc_{name}));')
        for member, _ in members:
            lines.append(f'printf("member {name} {member} %zu %zu\\n", '
                         f'offsetof(struct mrc_{name}, {member}), SZ(mrc_{name}, {member}));')
    for const in all_constants():
        lines.append(f'printf("const {const} %llu\\n", (unsigned long long)({const}));')
    for macro in ("MRC_OFF_OUTER", "MRC_OFF_INNER", "MRC_OFF_UDP", "MRC_OFF_BTH",
                  "MRC_OFF_AFTER_BTH", "MRC_ECHO_EV_OFFSET"):
        lines.append(f'printf("macro {macro} %llu\\n", (unsigned long long)({macro}));')
    for ev in EV_SAMPLES:
        lines.append(f'printf("ev {ev} %u %u %u %u %u %u\\n", MRC_EV_PLANE({ev}u), MRC_EV_T1({ev}u), '
                     f'MRC_EV_SALT({ev}u), MRC_EV_SPORT({ev}u), MRC_EV_FLOW_LABEL({ev}u), '
                     f'MRC_EV_FROM_WIRE(MRC_EV_SPORT({ev}u), MRC_EV_FLOW_LABEL({ev}u)));')
    lines.append('printf("usid %u %u\\n", MRC_USID(1, MRC_USID_ROLE_T1, 2), '
                 'MRC_USID(15, MRC_USID_ROLE_DOWN, 1023));')
    lines.append('{ __u8 b[3]; mrc_put24(b, 0xabcdef); printf("u24 %u %02x%02x%02x\\n", mrc_get24(b), b[0], b[1], b[2]); }')
    # outer IPv6 header of the WRITE_ONLY golden: tc 0x2a, flow label 0x4567
    lines.append('{ struct ipv6hdr h = {0}; unsigned char *p = (unsigned char *)&h;'
                 ' p[0] = 0x62; p[1] = 0xa0; p[2] = 0x45; p[3] = 0x67;'
                 ' printf("ip6get %u %u\\n", mrc_ipv6_tclass(&h), mrc_ipv6_flow_label(&h));'
                 ' mrc_ipv6_set_tclass(&h, 0xb8); mrc_ipv6_set_flow_label(&h, 0xfedcb);'
                 ' printf("ip6set %02x%02x%02x%02x\\n", p[0], p[1], p[2], p[3]); }')
    lines += ['return 0;', '}']
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def c_output(tmp_path_factory) -> dict:
    gcc = shutil.which("gcc")
    if not gcc:
        pytest.skip("gcc not found")
    tmp = tmp_path_factory.mktemp("clayout")
    src, exe = tmp / "layout.c", tmp / "layout"
    src.write_text(_program())
    subprocess.run([gcc, "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-I", str(INCLUDE),
                    str(src), "-o", str(exe)], check=True, capture_output=True, text=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    result: dict = {"size": {}, "member": {}, "const": {}, "macro": {}, "ev": {}}
    for line in out.splitlines():
        kind, *rest = line.split()
        if kind == "size":
            result["size"][rest[0]] = int(rest[1])
        elif kind == "member":
            result["member"][(rest[0], rest[1])] = (int(rest[2]), int(rest[3]))
        elif kind in ("const", "macro"):
            result[kind][rest[0]] = int(rest[1])
        elif kind == "ev":
            result["ev"][int(rest[0])] = tuple(int(x) for x in rest[1:])
        else:
            result[kind] = rest
    return result


@pytest.mark.parametrize("name", list(C_MEMBERS))
def test_struct_layout_equals_python_layer(c_output, name):
    layout = py_layout(HEADER_LAYERS[name])
    total_bits = sum(bits for _, _, bits in layout)
    assert c_output["size"][name] * 8 == total_bits
    starts = {field: off for field, off, _ in layout}
    members = C_MEMBERS[name]
    covered = 0
    for member, field in members:
        offset, size = c_output["member"][(name, member)]
        assert offset == covered, f"{name}.{member} leaves a gap or overlaps"
        assert starts[field] == offset * 8, f"{name}.{member} is not at Python field {field}"
        inside = [bits for _, off, bits in layout if offset * 8 <= off < (offset + size) * 8]
        assert sum(inside) == size * 8, f"a Python field straddles {name}.{member}"
        covered += size
    assert covered == c_output["size"][name]
    assert {m for m, _ in members} and len(HEADER_LAYERS) == len(C_MEMBERS)


def test_every_constant_has_the_python_value(c_output):
    assert c_output["const"] == all_constants()


def test_offset_macros(c_output):
    assert c_output["macro"] == {"MRC_OFF_OUTER": 14, "MRC_OFF_INNER": 54, "MRC_OFF_UDP": 94,
                                 "MRC_OFF_BTH": 102, "MRC_OFF_AFTER_BTH": 114,
                                 "MRC_ECHO_EV_OFFSET": 4}


@pytest.mark.parametrize("ev", EV_SAMPLES)
def test_ev_macros_equal_python_codec(c_output, ev):
    plane, t1, salt = ev_unpack(ev)
    assert c_output["ev"][ev] == (plane, t1, salt, ev >> 16, ev & 0xFFFF, ev)
    assert ev_pack(plane, t1, salt) == ev


def test_small_helpers(c_output):
    assert c_output["usid"] == [str(usid_pack(1, 2, 2)), str(usid_pack(15, 3, 1023))]
    assert c_output["u24"] == [str(0xABCDEF), "abcdef"]
    assert c_output["ip6get"] == [str(0x2A), str(0x4567)]
    assert c_output["ip6set"] == ["6b8fedcb"]


def test_compiles_as_bpf(tmp_path):
    clang = shutil.which("clang")
    if not clang:
        pytest.skip("clang not found")
    src = tmp_path / "use.bpf.c"
    src.write_text('#include "mrc_wire.h"\n'
                   'int use(void *d) {\n'
                   '  struct mrc_bth *b = (void *)((char *)d + MRC_OFF_BTH);\n'
                   '  struct mrc_seth *s = (void *)(b + 1);\n'
                   '  struct ipv6hdr *in = (void *)((char *)d + MRC_OFF_INNER);\n'
                   '  return mrc_get24(b->psn) + s->ev + MRC_EV_PLANE(s->ev) + mrc_ipv6_flow_label(in);\n'
                   '}\n')
    multiarch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True).stdout.strip() \
        or "x86_64-linux-gnu"
    proc = subprocess.run([clang, "-O2", "-g", "-target", "bpf", "-Wall", "-Werror", "-I", str(INCLUDE),
                           f"-I/usr/include/{multiarch}", "-c", str(src), "-o", str(tmp_path / "use.o")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
