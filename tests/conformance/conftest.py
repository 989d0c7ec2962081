"""Fixtures of the conformance suite: one switch per target, shared by the module's cases."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from mrckit import netns  # noqa: E402

import conformance_targets as CT  # noqa: E402
from conformance_harness import Tester  # noqa: E402

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
    """A target plus the tester's sockets on its ports."""

    def __init__(self, name: str):
        self.wiring = CT.build_wiring(RUN_PREFIX, kernel_switch=name == "kernel")
        self.target = None
        self.tester = None
        try:
            self.target = CT.TARGETS[name](self.wiring, netns.unique_name("mrcconf"))
            self.tester = Tester(self.wiring.tester, {p: self.wiring.tester_if(p) for p in CT.PORTS})
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


@pytest.fixture(scope="module", params=TARGET_NAMES)
def sut(request):
    reason = skip_reason(request.param)
    if reason:
        pytest.skip(reason)
    s = SwitchUnderTest(request.param)
    yield s
    s.close()
