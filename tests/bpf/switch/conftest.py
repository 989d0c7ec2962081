"""Fixture ``switch``: a loaded ``mrc_switch`` object in a fresh test namespace (switch_harness)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from mrckit.bpf.objects import BpfObject  # noqa: E402
from switch_harness import Harness  # noqa: E402


@pytest.fixture
def switch(make_netns):
    ns = make_netns()
    obj = BpfObject.open("mrc_switch")
    try:
        obj.load()
        yield Harness(obj, ns)
    finally:
        obj.close()
