"""Fixture ``switch``: a loaded ``mrc_switch`` object in a fresh test namespace."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from switch_conftest_fixtures import switch  # noqa: E402,F401
