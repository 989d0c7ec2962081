"""``python -m mrckit.fabric.flap NS_A IF_A NS_B IF_B HZ [CONTROLLER LINK]``: flap one link
until SIGTERM.

Each period of ``1/HZ`` s the link is down for the first half and up for the second (both
veth ends, ``ip link set``; a bmv2 port toggles a blackhole instead, see
``mrckit.fabric.linkstate``). On SIGTERM or SIGINT the link is left up and the process exits 0.
With ``CONTROLLER LINK`` (EV-hash mode), every down and up is reported to the controller of that
name as link ``LINK`` over its northbound (``mrckit.control.ControllerClient``), as a switch's
PHY would; a report the controller does not take is noted on stderr and the flapping goes on.
``mrc fail link A B --flap HZ`` starts it; ``mrc restore link A B`` stops it.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from dataclasses import dataclass

from ..errors import MrcError
from . import linkstate

GREETING = "flapping"
"""The first word the process prints, just before its first down: the link flaps from then."""


def _set(ends: list[tuple[str, str]], up: bool, *, keep: bool = True) -> None:
    for ns, ifname in ends:
        try:
            linkstate.set_end(ns, ifname, up, keep=keep)  # a bmv2 port toggles a blackhole
        except MrcError as e:
            print(f"flap: {ifname}@{ns}: {e}", file=sys.stderr, flush=True)


@dataclass
class FlapWindow:
    """What one flapping did: ``flaps`` down transitions, the CLOCK_MONOTONIC ns of the first
    down (None: none) and of the final up."""

    flaps: int = 0
    first_down_ns: int | None = None
    last_up_ns: int | None = None

    def line(self) -> str:
        """The flap process's last log line, which :func:`read_window` parses."""
        return (f"{STOPPED} {self.flaps} flaps; first down {self.first_down_ns or 0} ns; "
                f"last up {self.last_up_ns or 0} ns; link up")


STOPPED = "stopped after"
REPORT_TIMEOUT_S = 3.0
"""How long one report to the controller may take; the flapping goes on without it."""
STOP_TIMEOUT_S = 20.0
"""How long a stopper waits for this process to exit after SIGTERM before SIGKILL (which
loses the ``stopped after`` line): one report in flight (:data:`REPORT_TIMEOUT_S`), then the
final ``ip link set`` of both ends, each seconds on a busy machine."""


def read_window(log_text: str) -> FlapWindow | None:
    """The :class:`FlapWindow` a flap process logged when it stopped, None if it did not."""
    for line in reversed(log_text.splitlines()):
        if line.startswith(STOPPED):
            words = line.split()
            first, last = int(words[6]), int(words[10])
            return FlapWindow(int(words[2]), first or None, last or None)
    return None


def flap(ends: list[tuple[str, str]], hz: float, stop: threading.Event, report=None) -> FlapWindow:
    """Toggle ``ends`` at ``hz`` until ``stop`` is set; leaves them up. ``report(up)``, when
    given, is called after each change. Returns what it did."""
    half = 0.5 / hz
    window = FlapWindow()
    next_t = time.monotonic()
    report = report or (lambda up: None)
    while not stop.is_set():
        _set(ends, up=False)
        window.flaps += 1
        window.first_down_ns = window.first_down_ns or time.monotonic_ns()
        report(False)
        next_t += half
        if stop.wait(max(next_t - time.monotonic(), 0)):
            break  # the restore reports the link up itself: no report on the way out
        _set(ends, up=True)
        report(True)
        next_t += half
        stop.wait(max(next_t - time.monotonic(), 0))
    _set(ends, up=True, keep=False)
    window.last_up_ns = time.monotonic_ns()
    return window


def _reporter(controller: str, link: str):
    """``report(up)`` telling controller ``controller`` that ``link`` went down or came up."""
    from ..control.client import ControllerClient

    client = ControllerClient.named(controller, timeout_s=REPORT_TIMEOUT_S)

    def report(up: bool) -> None:
        try:
            client.report_link(link, up=up, source="flap")
        except MrcError as exc:
            print(f"flap: {link} {'up' if up else 'down'}: {exc}", file=sys.stderr, flush=True)

    return report


def main(argv: list[str] | None = None) -> int:
    """Parse ``NS_A IF_A NS_B IF_B HZ [CONTROLLER LINK]`` and flap until a signal."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (5, 7):
        print("usage: python -m mrckit.fabric.flap NS_A IF_A NS_B IF_B HZ [CONTROLLER LINK]", file=sys.stderr)
        return 2
    ends = [(args[0], args[1]), (args[2], args[3])]
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    # The reporter imports the controller's package (seconds on a busy machine): before the
    # greeting, so that the link starts flapping when the greeting says it does.
    report = _reporter(*args[5:]) if len(args) == 7 else None
    print(f"{GREETING} {args[1]}@{args[0]} <-> {args[3]}@{args[2]} at {args[4]} Hz", flush=True)
    print(flap(ends, float(args[4]), stop, report).line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
