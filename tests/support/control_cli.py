"""``mrc controller run`` as a child process, awaited until it prints ``ready``."""

import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.paths import ROOT

MRC = [sys.executable, "-m", "mrckit.cli"] if not (Path(sys.executable).parent / "mrc").exists() \
    else [str(Path(sys.executable).parent / "mrc")]
READY_TIMEOUT_S = 120


def start(args: list[str]) -> subprocess.Popen:
    """Start ``args`` (an ``mrc controller run`` command line) in the repository and return the
    process once it prints ``ready``; fail the test with its output if it does not in time."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    deadline, lines = time.monotonic() + READY_TIMEOUT_S, []
    while time.monotonic() < deadline and proc.poll() is None:
        if select.select([proc.stdout], [], [], 0.5)[0]:
            line = proc.stdout.readline()
            lines.append(line)
            if line.startswith("ready"):
                return proc
    proc.kill()
    out, err = proc.communicate()
    pytest.fail(f"controller not ready: {''.join(lines)}{out}{err[-3000:]}")
