"""p4c accepts p4src/include/headers.p4 and mrc_constants.p4: a v1model program that parses
every MRC header with the generated constants compiles. Skips without p4c-bm2-ss."""

import os
import shutil
import subprocess

import pytest

from support.paths import ROOT


def _p4c() -> str:
    # Same search as tests/conftest.py's need_tool; importing conftest by name is ambiguous
    # because several test folders have one.
    found = shutil.which("p4c-bm2-ss")
    if not found and os.access("/opt/p4tools/bin/p4c-bm2-ss", os.X_OK):
        found = "/opt/p4tools/bin/p4c-bm2-ss"
    if not found:
        pytest.skip("p4c-bm2-ss not found on PATH or in /opt/p4tools/bin")
    return found

PROGRAM = r"""
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

struct meta_t { }

parser P(packet_in pkt, out mrc_headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        pkt.extract(hdr.outer_ipv6);
        pkt.extract(hdr.inner_ipv6);
        pkt.extract(hdr.udp);
        pkt.extract(hdr.bth);
        transition select(hdr.bth.opcode) {
            MRC_OP_SACK: sack;
            MRC_OP_NACK: nack;
            MRC_OP_ACK: ack;
            MRC_OP_PROBE: probe;
            MRC_OP_EP_REQ: ep_req;
            MRC_OP_EP_RESP: ep_resp;
            default: data;
        }
    }
    state data {
        pkt.extract(hdr.meth);
        transition select(hdr.bth.ts) { 1: tseth; default: reth; }
    }
    state tseth { pkt.extract(hdr.tseth); transition reth; }
    state reth {
        pkt.extract(hdr.reth);
        transition select(hdr.bth.opcode) {
            MRC_OP_WRITE_LAST_IMM: immdt;
            MRC_OP_WRITE_ONLY_IMM: immdt;
            default: accept;
        }
    }
    state immdt { pkt.extract(hdr.immdt); transition accept; }
    state sack { pkt.extract(hdr.seth); pkt.extract(hdr.cc_state); transition accept; }
    state nack { pkt.extract(hdr.neth); transition accept; }
    state ack { pkt.extract(hdr.aeth); transition accept; }
    state probe { pkt.extract(hdr.peth); transition accept; }
    state ep_req { pkt.extract(hdr.erth); transition accept; }
    state ep_resp { pkt.extract(hdr.eeth); transition accept; }
}

control V(inout mrc_headers_t hdr, inout meta_t m) { apply { } }

control I(inout mrc_headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        if (hdr.outer_ipv6.dst_addr[127:96] == MRC_LOCATOR_DEFAULT &&
            hdr.seth.ev[31:28] == (bit<4>) MRC_EV_PLANE_MASK) {
            hdr.outer_ipv6.dscp = MRC_DSCP_TRIMMED;
            hdr.outer_ipv6.ecn = MRC_ECN_CE;
            hdr.outer_ipv6.payload_len = hdr.outer_ipv6.payload_len - MRC_RETH_LEN;
        }
    }
}

control E(inout mrc_headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control C(inout mrc_headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in mrc_headers_t hdr) { apply { pkt.emit(hdr); } }

V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_headers_compile_with_p4c(tmp_path):
    p4c = _p4c()
    src = tmp_path / "wire_headers.p4"
    src.write_text(PROGRAM)
    proc = subprocess.run([p4c, "--std", "p4-16", "--arch", "v1model",
                           "-I", str(ROOT / "p4src" / "include"),
                           "-o", str(tmp_path / "out.json"), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out.json").stat().st_size > 0
