"""The example project's own fixture. ``mrc_switch`` and ``mrc_tables`` come from mrckit's
pytest plugin, which the installed package registers (entry point ``pytest11``)."""

import pytest

from srv6_tables import tables


@pytest.fixture
def switch(mrc_switch, mrc_tables):
    """The switch under test with the example's tables (mrc_tables.apply writes only the
    difference from what the previous test left)."""
    mrc_tables.apply(tables(mrc_switch.ports))
    return mrc_switch
