"""The pytest plugin of ``mrckit.testing`` (registered through the ``pytest11`` entry point
``mrckit``): fixtures, a marker and options for packet tests (docs/packet-tests.md).

- ``mrc_switch``: a :class:`~mrckit.testing.SwitchUnderTest`, parametrised over the chosen
  targets that are present; an absent one is skipped with the reason. One switch per target
  and test module; each test starts with fresh captures, counter baseline and quiet-period
  count, and keeps the tables the module's tests left (``mrc_tables.apply`` sets them).
- ``mrc_tables``: its :class:`~mrckit.testing.TableWriter` (tables by P4 names).
- ``mrc_ports`` (module scope): the switch ports to wire, ``(0, 1, 2, 3)``; override it in a
  test module or conftest. ``mrc_program``: a user's bmv2 program (:class:`Program`) or None;
  ``mrc_remote``: the :class:`Remote` server, or None.
- Marker ``@pytest.mark.mrc_targets("ebpf", "bmv2")``: the targets a test runs on.
- Options: ``--mrc-target NAME`` (repeatable, or comma-separated), ``--mrc-keep`` (keep a
  failed module's namespaces and switch for debugging), ``--mrc-bmv2-json``/``--mrc-bmv2-p4info``
  (a user's program on bmv2), ``--mrc-remote ADDRESS`` with ``--mrc-remote-ports 1=eth1,2=eth2``
  and ``--mrc-remote-ns`` (a P4Runtime server wired to the tester).

A test that needs a feature its target lacks (``Unsupported``, e.g. trimming on the kernel
reference) is reported as skipped with the reason. Besides the CLI, this plugin is the one
place in mrckit that reads options and prints for humans (docs/architecture.md, "Layering").
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .. import netns
from ..errors import MrcError
from .targets import LOCAL_TARGETS, TARGET_NAMES, Program, Remote, Unsupported, skip_reason
from .wiring import PORTS

if TYPE_CHECKING:
    from .session import SwitchUnderTest

FIXTURE = "mrc_switch_module"
RUN_PREFIX = f"mrcp{os.getpid() % 100000}"
"""This run's namespace prefix: the session end removes whatever a crash left under it."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mrckit", "mrckit packet tests (mrckit.testing)")
    group.addoption("--mrc-target", action="append", default=[], metavar="NAME",
                    help=f"run packet tests on this target ({', '.join(TARGET_NAMES)}); repeat or use commas. "
                         "Default: every local target present, and remote when --mrc-remote is given.")
    group.addoption("--mrc-keep", action="store_true",
                    help="after a failure, keep that module's namespaces and switch for debugging")
    group.addoption("--mrc-bmv2-json", metavar="PATH", help="bmv2 runs this compiled program (with --mrc-bmv2-p4info)")
    group.addoption("--mrc-bmv2-p4info", metavar="PATH", help="the P4Info of --mrc-bmv2-json")
    group.addoption("--mrc-remote", metavar="ADDRESS", help="an existing P4Runtime server (HOST:PORT or unix:/path)")
    group.addoption("--mrc-remote-ports", metavar="MAP", default="",
                    help="switch port = tester interface wired to it, comma-separated: 1=eth1,2=eth2")
    group.addoption("--mrc-remote-ns", metavar="NS", help="the namespace of the remote's tester interfaces")
    group.addoption("--mrc-remote-device-id", metavar="ID", type=int, default=1, help="the remote's device id")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "mrc_targets(*names): the mrckit.testing targets this test runs on")


def chosen_targets(config: pytest.Config) -> list[str]:
    """The targets named by ``--mrc-target`` (default: the local ones, and remote when
    ``--mrc-remote`` is given)."""
    names = [n.strip() for opt in config.getoption("mrc_target") for n in opt.split(",") if n.strip()]
    for name in names:
        if name not in TARGET_NAMES:
            raise pytest.UsageError(f"--mrc-target {name}: choose from {', '.join(TARGET_NAMES)}")
    if not names:
        names = list(LOCAL_TARGETS) + (["remote"] if config.getoption("mrc_remote") else [])
    return names


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if FIXTURE not in metafunc.fixturenames:
        return
    names = chosen_targets(metafunc.config)
    marker = metafunc.definition.get_closest_marker("mrc_targets")
    if marker is not None:
        names = [n for n in names if n in marker.args]
    metafunc.parametrize(FIXTURE, names, indirect=True, scope="module", ids=names)


@pytest.fixture(scope="module")
def mrc_ports() -> tuple[int, ...]:
    """The switch ports to wire to the tester (override in a module or conftest)."""
    return PORTS


@pytest.fixture(scope="session")
def mrc_program(pytestconfig: pytest.Config) -> Program | None:
    """A user's program for bmv2 (``--mrc-bmv2-json`` and ``--mrc-bmv2-p4info``), else None."""
    json_path, p4info = pytestconfig.getoption("mrc_bmv2_json"), pytestconfig.getoption("mrc_bmv2_p4info")
    if bool(json_path) != bool(p4info):
        raise pytest.UsageError("--mrc-bmv2-json and --mrc-bmv2-p4info go together")
    return Program(Path(json_path), Path(p4info)) if json_path else None


@pytest.fixture(scope="session")
def mrc_remote(pytestconfig: pytest.Config) -> Remote | None:
    """The remote P4Runtime server (``--mrc-remote`` and friends), else None."""
    address = pytestconfig.getoption("mrc_remote")
    if not address:
        return None
    ports = {}
    for item in pytestconfig.getoption("mrc_remote_ports").split(","):
        port, sep, iface = item.partition("=")
        if not sep or not port.strip().isdigit() or not iface.strip():
            raise pytest.UsageError(f"--mrc-remote-ports: {item!r} is not PORT=INTERFACE")
        ports[int(port)] = iface.strip()
    if not ports:
        raise pytest.UsageError("--mrc-remote needs --mrc-remote-ports (the tester interfaces wired to it)")
    return Remote(address, ports, tester_ns=pytestconfig.getoption("mrc_remote_ns"),
                  device_id=pytestconfig.getoption("mrc_remote_device_id"))


@pytest.fixture(scope="module")
def mrc_switch_module(request: pytest.FixtureRequest, mrc_ports, mrc_program, mrc_remote):
    """One switch per target (the parameter) and module."""
    name = request.param
    if name == "remote" and mrc_remote is None:
        pytest.skip("target remote: no server given (--mrc-remote and --mrc-remote-ports)")
    reason = skip_reason(name, mrc_program if name == "bmv2" else None)
    if reason:
        pytest.skip(f"target {name}: {reason}")
    from .session import SwitchUnderTest   # scapy loads only when a packet test runs

    try:
        sut = SwitchUnderTest(name, ports=mrc_ports, program=mrc_program if name == "bmv2" else None,
                              remote=mrc_remote if name == "remote" else None, ns_prefix=RUN_PREFIX)
    except Unsupported as exc:
        pytest.skip(str(exc))
    yield sut
    keep = bool(request.config.getoption("mrc_keep") and sut.failed)
    kept = sut.close(keep=keep)
    if kept:
        _report(request.config, f"mrckit: kept the {name} switch of a failed test for debugging: {kept}")


@pytest.fixture
def mrc_switch(mrc_switch_module: SwitchUnderTest, tmp_path: Path) -> SwitchUnderTest:
    """The switch under test of this module and target, reset for this test (captures, counter
    baseline, quiet-period count); failures write their pcaps under the test's tmp_path."""
    mrc_switch_module.reset(artifacts=tmp_path / "mrc")
    return mrc_switch_module


@pytest.fixture
def mrc_tables(mrc_switch: SwitchUnderTest):
    """The switch's tables by P4 names (:class:`~mrckit.testing.TableWriter`)."""
    return mrc_switch.tables


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    try:
        return (yield)
    except Unsupported as exc:   # a fixture needed a feature the target lacks
        pytest.skip(str(exc))


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function):
    try:
        return (yield)
    except Unsupported as exc:
        pytest.skip(str(exc))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if report.failed:
        sut = getattr(item, "funcargs", {}).get(FIXTURE)
        if sut is not None:
            sut.failed = True
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.geteuid() == 0 and not session.config.getoption("mrc_keep"):
        try:
            netns.cleanup_prefix(RUN_PREFIX)
        except MrcError as exc:
            _report(session.config, f"mrckit: could not remove namespaces {RUN_PREFIX}*: {exc}")


def _report(config: pytest.Config, line: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line)
