"""Ctrl-C at any moment leaves nothing behind: `mrc demo` and `mrc fabric up -f` get SIGINT at
seeded moments of each phase (bring-up, programming, the transfer, the fault, the teardown),
and then no namespace, link, BPF attachment, pin, state file or process of theirs remains."""

import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.fabric_helpers import leftovers

from mrckit.fabric.state import DEFAULT_PREFIX

SEED = 20261201
EXIT_TIMEOUT_S = 180.0
PHASE_TIMEOUT_S = 180.0


@pytest.fixture(autouse=True, scope="module")
def sigint_reaches_children():
    """Ctrl-C as a terminal sends it: a shell without job control starts background commands
    with SIGINT ignored, and that disposition is inherited across exec. Run under such a parent
    (a CI script, `make ... &`), the mrc processes here would ignore every SIGINT that comes
    before they set their own handler, and wait for ever. A handled signal is reset to its
    default at exec, so the children start as under a terminal."""
    old = signal.getsignal(signal.SIGINT)
    if old == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


class Cli:
    """An ``mrc`` process whose output lines are followed as they come."""

    def __init__(self, *args: str):
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen([sys.executable, "-c", "import sys; from mrckit.cli import main; sys.exit(main())",
                                      *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.lines: queue.Queue = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.output.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def wait_line(self, marker: str) -> bool:
        """True once a line containing ``marker`` was printed; False if the process ended first."""
        deadline = time.monotonic() + PHASE_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                continue
            if line is None:
                return False
            if marker in line:
                return True
        raise AssertionError(f"no line with {marker!r} in {PHASE_TIMEOUT_S:.0f} s:\n{''.join(self.output)}")

    def interrupt(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)

    def finish(self) -> str:
        try:
            self.proc.wait(EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"still running {EXIT_TIMEOUT_S:.0f} s after SIGINT:\n{''.join(self.output)}") from None
        time.sleep(0.2)  # the reader drains the last lines
        return "".join(self.output)


def _controller_running(name: str) -> bool:
    """Whether the fabric's controller process exists: programming has begun."""
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            cmd = (pid_dir / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"controller" in cmd and b"run" in cmd and any(f"/run/mrckit/{name}/".encode() in a for a in cmd):
            return True
    return False


def _wait_controller(cli: Cli, name: str) -> None:
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    while not _controller_running(name):
        assert cli.proc.poll() is None, f"exited before programming:\n{''.join(cli.output)}"
        assert time.monotonic() < deadline, "the controller never started"
        time.sleep(0.02)


def _name(kind: str, phase: str) -> str:
    return f"s{os.getpid() % 10000}{kind}{phase[:4]}"


def _check_clean(cli: Cli, name: str) -> None:
    out = cli.finish()
    assert "Traceback" not in out, out
    assert leftovers(DEFAULT_PREFIX + name, name) == {}, out


DEMO_PHASES = {
    # phase: (what to wait for, the seeded delay range after it, seconds)
    "bring-up": ("bringing up", (0.2, 1.5)),
    "programming": (None, (0.0, 0.2)),
    "transfer": ("RDMA WRITE", (0.0, 0.1)),
    "fault": ("fault injected", (0.0, 0.05)),
    "teardown": ("tearing the fabric down", (0.0, 0.5)),
}


@pytest.mark.parametrize("phase", list(DEMO_PHASES))
def test_ctrl_c_during_the_demo_leaves_nothing(need_root, tmp_path, phase):
    name = _name("d", phase)
    marker, (lo, hi) = DEMO_PHASES[phase]
    delay = random.Random(f"{SEED}/demo/{phase}").uniform(lo, hi)
    # the Python endpoint: a 32 MiB native write can end before a later phase's moment comes
    cli = Cli("demo", "--endpoint", "python", "--size", "32M", "--name", name, "--json", str(tmp_path / "d.json"),
              "--plot", str(tmp_path / "d.png"))
    if marker is None:
        _wait_controller(cli, name)
    else:
        assert cli.wait_line(marker), f"the demo ended before {marker!r}:\n{''.join(cli.output)}"
    time.sleep(delay)
    cli.interrupt()
    _check_clean(cli, name)


FABRIC_PHASES = {
    "bring-up": (0.3, 1.5),
    "programming": (0.0, 0.2),
    "running": (0.0, 0.5),
    "teardown": (0.05, 0.5),  # a second Ctrl-C while the first one's teardown runs
    "twice-at-once": (0.0, 0.0),  # two Ctrl-C in a row during bring-up
}


@pytest.mark.parametrize("phase", list(FABRIC_PHASES))
def test_ctrl_c_during_fabric_up_foreground_leaves_nothing(need_root, phase):
    name = _name("f", phase)
    delay = random.Random(f"{SEED}/fabric/{phase}").uniform(*FABRIC_PHASES[phase])
    cli = Cli("fabric", "up", "--name", name, "-f")
    if phase in ("bring-up", "twice-at-once"):
        time.sleep(delay + (1.0 if phase == "twice-at-once" else 0.0))
    elif phase == "programming":
        _wait_controller(cli, name)
        time.sleep(delay)
    else:
        assert cli.wait_line("running; Ctrl-C tears it down"), "".join(cli.output)
        time.sleep(delay if phase == "running" else 0.0)
    cli.interrupt()
    if phase in ("teardown", "twice-at-once"):
        time.sleep(delay if phase == "teardown" else 0.05)
        cli.interrupt()
    _check_clean(cli, name)
