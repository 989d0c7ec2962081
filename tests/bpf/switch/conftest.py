"""Fixtures for the switch's BPF_PROG_TEST_RUN tests: a loaded ``mrc_switch`` object inside a
test namespace, whose ports all point at that namespace's loopback (test runs do not transmit)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from mrckit import netns  # noqa: E402
from mrckit.bpf.objects import BpfObject, XdpMd  # noqa: E402
from mrckit.switch.ebpf_target import SwitchTables  # noqa: E402

LO_IFINDEX = 1
XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_TX, XDP_REDIRECT = range(5)


class Harness:
    """A loaded switch program: ``tables`` (SwitchTables) and :meth:`run` for one frame."""

    def __init__(self, obj: BpfObject, ns: str):
        self.obj, self.ns = obj, ns
        self.prog = obj.program("mrc_switch")
        self.tables = SwitchTables.from_object(obj)
        self.tables.init_defaults()
        self.tables.reset_queues()

    def wire_ports(self, ports) -> None:
        """Give every switch port in ``ports`` a DEVMAP entry (the namespace's loopback)."""
        with netns.enter(self.ns):
            for port in ports:
                self.tables.maps["tx_ports"].update(port, LO_IFINDEX)

    def set_ingress(self, port: int) -> None:
        """Frames of :meth:`run` arrive on switch ``port``."""
        self.tables.maps["ifindex_port"].update(LO_IFINDEX, port)

    def run(self, frame: bytes, repeat: int = 1):
        """(XDP return code, frame out) of one test run inside the namespace."""
        with netns.enter(self.ns):
            res = self.prog.test_run(frame, repeat=repeat)
        return res.retval, res.data


@pytest.fixture
def switch(make_netns):
    ns = make_netns()
    obj = BpfObject.open("mrc_switch")
    try:
        obj.load()
        yield Harness(obj, ns)
    finally:
        obj.close()
