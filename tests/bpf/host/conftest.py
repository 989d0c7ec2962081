"""A loaded host dataplane configured as host A (leaf 0, downlink 0) with 2 planes."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import ipaddress
import os

import pytest

from mrckit.host.dataplane import HostDataplane, PortSetting, addr_bytes, mac_bytes
from mrckit.wire.constants import AGENT_UDP_PORT
from mrckit.wire.usid import DEFAULT_LOCATOR  # noqa: F401

import host_pkt as pkt


@pytest.fixture
def dp():
    if os.geteuid() != 0:
        pytest.skip("needs root: loading BPF programs")
    d = HostDataplane()
    d.set_host(pkt.NIC_A, DEFAULT_LOCATOR, pkt.A_LEAF, pkt.A_DOWN, pkt.PLANES, AGENT_UDP_PORT)
    for plane in range(pkt.PLANES):
        d.set_port(PortSetting(plane, pkt.PORT_IFINDEX, mac_bytes(pkt.MAC[plane]),
                               mac_bytes(pkt.NEIGH[plane]), addr_bytes(pkt.port_addr(plane))))
    d.set_configured(True)
    yield d
    d.close()
