"""Fixtures for the P4Runtime server tests: a real eBPF switch, a real gRPC server in front of
it on a unix socket, and a raw P4Runtime client (see p4rt_harness.py)."""

import pytest

from support.p4rt_harness import DEVICE_ID, Client, Switch

from mrckit.switch.p4runtime import MRC_SWITCH, Device, EbpfBackend, P4RuntimeServer


@pytest.fixture
def switch(make_netns):
    ns = make_netns()
    sw = Switch(ns, ns)  # the namespace name is unique and carries the run prefix
    try:
        yield sw
    finally:
        sw.sw.teardown()


@pytest.fixture
def state_dir(tmp_path):
    return tmp_path / "state"


@pytest.fixture
def server(switch, state_dir, tmp_path):
    """A P4Runtime server for ``switch`` on a unix socket; yields its address."""
    backend = EbpfBackend.open(switch.name)
    srv = P4RuntimeServer(Device(backend, MRC_SWITCH, DEVICE_ID, state_dir), f"unix:{tmp_path}/p4rt.sock").start()
    try:
        yield srv
    finally:
        srv.stop(0)
        backend.close()


@pytest.fixture
def client(server):
    c = Client(server.address)
    yield c
    c.close()
