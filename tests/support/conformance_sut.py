"""The switch under test of the conformance suite: which targets run here, and one target
with the tester's sockets on its ports. ``conftest.py`` and the EV-hash modules build their
module-scoped fixtures from this."""

import os

import pytest

from mrckit import netns

from support import conformance_targets as CT
from support.conformance_harness import Tester

RUN_PREFIX = f"mrct{os.getpid() % 100000}"
"""The run prefix of tests/conftest.py, so its session-end cleanup also covers our namespaces."""
TARGET_NAMES = ("ebpf", "bmv2", "kernel")


def skip_reason(name: str) -> str | None:
    """Why target ``name`` cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root: network namespaces, XDP and raw sockets"
    if name == "bmv2":
        from mrckit.switch.bmv2 import DEFAULT_JSON, DEFAULT_P4INFO, find_tool
        if find_tool("simple_switch_grpc") is None:
            return "bmv2: simple_switch_grpc not found on PATH or in /opt/p4tools/bin"
        if not (DEFAULT_JSON.is_file() and DEFAULT_P4INFO.is_file()):
            return f"bmv2: {DEFAULT_JSON} or {DEFAULT_P4INFO} missing (run `make p4`)"
    if name == "kernel":
        from mrckit.switch.kernel_ref import next_csid_support
        ok, why = next_csid_support()
        if not ok:
            return f"kernel: {why}"
    if name == "ebpf":
        from mrckit.bpf.objects import BpfObject  # noqa: F401
        obj = os.path.join(os.path.dirname(CT.__file__), "..", "..", "controller", "mrckit", "bpf", "obj",
                           "mrc_switch.bpf.o")
        if not os.path.exists(obj):
            return "ebpf: mrc_switch.bpf.o not built (run `make bpf`)"
    return None


class SwitchUnderTest:
    """A target plus the tester's sockets on its ports (0..3 unless ``ports`` says otherwise)."""

    def __init__(self, name: str, ports: tuple[int, ...] = CT.PORTS):
        self.wiring = CT.build_wiring(RUN_PREFIX, kernel_switch=name == "kernel", ports=ports)
        self.target = None
        self.tester = None
        try:
            self.target = CT.TARGETS[name](self.wiring, netns.unique_name("mrcconf"))
            self.tester = Tester(self.wiring.tester, {p: self.wiring.tester_if(p) for p in ports})
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        try:
            if self.tester is not None:
                self.tester.close()
            if self.target is not None:
                self.target.close()
        finally:
            CT.remove_wiring(self.wiring)


EV_HASH_SKIP_KERNEL = ("kernel reference (seg6local End next-csid) has no ipv6_fib or ECMP groups: "
                       "the EV-hash cases run on ebpf and bmv2 only")


def ev_hash_sut(ports: tuple[int, ...] = CT.PORTS, name: str = "sut"):
    """A module-scoped fixture ``name`` like conftest's ``sut`` for the EV-hash suites (assign
    it to a module global of that name): one switch per target and module with ``ports``,
    skipped on the kernel reference before anything is built. One bmv2
    per module keeps that module's action profile members created once, in ascending id order
    (docs/ecmp-mode.md, "The hash")."""

    @pytest.fixture(scope="module", params=TARGET_NAMES, name=name)
    def fixture(request):
        if request.param == "kernel":
            pytest.skip(EV_HASH_SKIP_KERNEL)
        reason = skip_reason(request.param)
        if reason:
            pytest.skip(reason)
        s = SwitchUnderTest(request.param, ports)
        yield s
        s.close()

    return fixture
