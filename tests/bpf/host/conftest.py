"""A loaded host dataplane configured as host A (leaf 0, downlink 0) with 2 planes."""

import os

import pytest

from mrckit.host.dataplane import HostDataplane

from support import host_pkt as pkt


@pytest.fixture
def dp():
    if os.geteuid() != 0:
        pytest.skip("needs root: loading BPF programs")
    d = HostDataplane()
    pkt.configure_host_a(d)
    yield d
    d.close()


@pytest.fixture
def ecmp_dp():
    """Host A's dataplane in EV-hash (ecmp) mode."""
    if os.geteuid() != 0:
        pytest.skip("needs root: loading BPF programs")
    d = HostDataplane(mode="ecmp")
    pkt.configure_host_a(d, mode="ecmp")
    yield d
    d.close()
