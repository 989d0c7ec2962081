"""The e2e switch tests reuse the frame builders and harness of tests/bpf/switch."""

import os
import sys

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bpf", "switch"))

from switch_conftest_fixtures import switch  # noqa: E402,F401  (the loaded-program fixture)
