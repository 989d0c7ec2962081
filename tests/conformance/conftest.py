"""Fixtures of the conformance suite: one switch per target, shared by the module's cases."""

import pytest

from support.conformance_sut import TARGET_NAMES, SwitchUnderTest, skip_reason


@pytest.fixture(scope="module", params=TARGET_NAMES)
def sut(request):
    reason = skip_reason(request.param)
    if reason:
        pytest.skip(reason)
    s = SwitchUnderTest(request.param)
    yield s
    s.close()
