"""The ``switch`` fixture of tests/bpf/switch, shared with the e2e tests."""

import pytest
from support.switch_harness import Harness

from mrckit.bpf.objects import BpfObject


@pytest.fixture
def switch(make_netns):
    """A loaded ``mrc_switch`` object (not attached) driven in a fresh namespace."""
    ns = make_netns()
    obj = BpfObject.open("mrc_switch")
    try:
        obj.load()
        yield Harness(obj, ns)
    finally:
        obj.close()
