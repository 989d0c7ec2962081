"""The ``impl`` fixture: every test that takes it runs with the Python endpoint and with the
native (C) one (skipped, with the reason, when libmrcep.so is not built)."""

import pytest

from support.endpoint_harness import IMPLS, impl_param


@pytest.fixture(params=[impl_param(name) for name in IMPLS])
def impl(request) -> str:
    return request.param
