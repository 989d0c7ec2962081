"""Shared fixtures: root and tool checks, and namespaces that are always removed."""

import os
import shutil

import pytest

from mrckit import netns

RUN_PREFIX = f"mrct{os.getpid() % 100000}"


def pytest_sessionfinish(session, exitstatus):
    # The last line of defence: whatever a failed test leaked under our prefix goes now.
    if os.geteuid() == 0:
        netns.cleanup_prefix(RUN_PREFIX)


@pytest.fixture
def need_root():
    if os.geteuid() != 0:
        pytest.skip("needs root: network namespaces and BPF")


@pytest.fixture
def make_netns(need_root):
    """Factory: ``make_netns()`` returns a fresh namespace name, removed after the test."""
    created = []

    def factory() -> str:
        name = netns.add(netns.unique_name(RUN_PREFIX))
        created.append(name)
        return name

    yield factory
    for name in created:
        netns.delete(name)


def need_tool(name: str) -> str:
    """Path of ``name`` on PATH or under /opt/p4tools/bin, or skip the test with the reason."""
    path = shutil.which(name) or (f"/opt/p4tools/bin/{name}" if os.access(f"/opt/p4tools/bin/{name}", os.X_OK) else None)
    if not path:
        pytest.skip(f"{name} not found on PATH or in /opt/p4tools/bin")
    return path
