"""Mode and locator are load-time settings (.rodata.host): written before load, read back from
the loaded object, pruned per mode by the verifier, and refused when set_host disagrees."""
import os

import pytest

from mrckit.bpf.objects import _prog_info
from mrckit.host.dataplane import HostDataplane
from mrckit.host.maps import HOST_MODES, HostLoad
from mrckit.wire.usid import DEFAULT_LOCATOR

from support import host_pkt as pkt

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: loading BPF programs")


def _insns(prog) -> int:
    return _prog_info(prog.fd).xlated_prog_len // 8


def test_load_settings_reach_the_rodata_map():
    with HostDataplane(mode="ecmp") as d:
        got = HostLoad.from_buffer_copy(d.obj.map(".rodata.host").initial_value())
        assert (got.mode, got.locator) == (HOST_MODES["ecmp"], DEFAULT_LOCATOR)


def test_each_mode_loads_only_its_own_code():
    with HostDataplane(mode="srv6") as srv6, HostDataplane(mode="ecmp") as ecmp:
        # ecmp pushes no outer header and checks no denied path; srv6 has no plain-packet path.
        assert _insns(ecmp.egress) < _insns(srv6.egress)
        assert _insns(ecmp.ingress) != _insns(srv6.ingress)


def test_set_host_refuses_another_mode_or_locator(ecmp_dp):
    with pytest.raises(ValueError, match="load-time setting"):
        pkt.configure_host_a(ecmp_dp, mode="srv6")
    with pytest.raises(ValueError, match="load-time setting"):
        ecmp_dp.set_host(pkt.NIC_A, DEFAULT_LOCATOR + 1, pkt.A_LEAF, pkt.A_DOWN, pkt.PLANES, 4791)
    assert ecmp_dp.config.lookup(0).mode == HOST_MODES["ecmp"]  # written by configure_host_a


def test_unknown_mode_is_a_clear_error():
    with pytest.raises(ValueError, match="use one of srv6, ecmp"):
        HostDataplane(mode="spray")
