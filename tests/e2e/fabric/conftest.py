"""Fixtures of the fabric e2e tests: one small fabric for the whole session (bring-up costs
seconds), under the test run's namespace prefix, so the session's cleanup by prefix catches
any leak. Fault tests restore what they break, and break nothing the hosts notice (no host
link goes down), so test order does not matter."""

import os

import pytest

from support.fabric_helpers import RUN_PREFIX, controller_args, fabric_name, leftovers

from mrckit.fabric.fabric import Fabric
from mrckit.topology import generate_clos


@pytest.fixture(scope="session")
def small_fabric():
    """The default small fabric (2 planes, 2 spines + 3 leaves per plane, 2 hosts per leaf)
    on the eBPF target, programmed by `mrc controller run`; torn down after the session."""
    if os.geteuid() != 0:
        pytest.skip("needs root: network namespaces and BPF")
    fab = Fabric.up(generate_clos(), name=fabric_name("small"), target="ebpf",
                    prefix=RUN_PREFIX, controller_args=controller_args())
    yield fab
    fab.down()
    # After the suite nothing of ours remains: namespaces, links, attachments, pins, processes.
    assert leftovers(RUN_PREFIX + fab.name, fab.name) == {}

