"""Shared fixtures: root and tool checks, and namespaces that are always removed."""

import os
import shutil

import pytest

from mrckit import netns

# Helpers' asserts in tests/support report their operands as the tests' own do.
pytest.register_assert_rewrite("support")

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


def skip_reasons(reports) -> list[tuple[int, str]]:
    """Count skipped test reports by their reason: ``[(count, reason)]``, most common first."""
    counts: dict[str, int] = {}
    for report in reports:
        if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
            reason = str(report.longrepr[2])
        else:
            reason = str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        counts[reason] = counts.get(reason, 0) + 1
    return sorted(((n, r) for r, n in counts.items()), key=lambda item: (-item[0], item[1]))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter):
    # One line that says at a glance which parts of the suite did not run, and why: pytest's
    # own -ra list names each skip but buries a missing toolchain under a hundred lines. It
    # comes after that list, just above pytest's closing count.
    yield
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    parts = "; ".join(f"{n} × {reason}" for n, reason in skip_reasons(skipped))
    terminalreporter.write_line(f"skipped by reason ({len(skipped)}): {parts}")
