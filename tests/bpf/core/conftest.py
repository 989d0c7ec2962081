"""Fixtures for the mrckit.bpf tests: veth pairs between fresh namespaces, a pin folder, and a
check that no test leaves a fault attached."""

import os
import shutil

import pytest

from mrckit import bpf, netns
from mrckit.fabric import faults


@pytest.fixture(autouse=True)
def nothing_left_behind(request):
    """After each test: no fault pins of this run remain (the test fails if it leaked any)."""
    yield
    # tests/conftest.py names this run's namespaces; it is registered as a plugin.
    prefixes = [p.RUN_PREFIX for p in request.config.pluginmanager.get_plugins()
                if isinstance(getattr(p, "RUN_PREFIX", None), str)]
    if os.geteuid() == 0 and prefixes:
        leaked = faults.detach_all(prefixes[0])
        assert leaked == [], f"test left faults attached: {leaked}"


@pytest.fixture
def need_bpf(need_root):
    """Root, libbpf and the test objects; a missing object fails with `make bpf` advice."""
    bpf.object_path("test_maps")


@pytest.fixture
def veth_pair(make_netns, need_bpf):
    """(ns_a, "va", ns_b, "vb"): a veth pair with one end in each of two fresh namespaces."""
    ns_a, ns_b = make_netns(), make_netns()
    netns.veth(ns_a, "va", ns_b, "vb")
    return ns_a, "va", ns_b, "vb"


@pytest.fixture
def pin_dir(need_bpf):
    """A fresh folder under /sys/fs/bpf/mrckit, removed with everything pinned in it."""
    bpf.ensure_bpffs()
    path = bpf.pin_path(netns.unique_name("mrctest"))
    os.makedirs(path)
    yield path
    shutil.rmtree(path, ignore_errors=True)
