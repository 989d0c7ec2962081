"""A switch under test and its tester: send scapy packets into ports, expect bytes (or masked
bytes) out of ports, expect drops by counters, and expect nothing else after one quiet period
for all ports together (design section 4; docs/packet-tests.md).

>>> with SwitchUnderTest("ebpf") as sut:                       # doctest: +SKIP
...     sut.tables.insert(TableEntry.exact("usid_fib", 0xFCBBBB000401, "set_egress", {"port": 3}))
...     sut.send(1, pkt)
...     sut.expect(3, want)
...     sut.expect_nothing_else()

A failed check raises :class:`PacketCheckFailed` (an AssertionError) whose message holds a
field-by-field diff and the folder of pcaps (sent, expected, and what each port received).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import NoReturn

from scapy.data import DLT_EN10MB
from scapy.packet import Packet
from scapy.utils import PcapWriter

from .. import netns
from ..errors import MrcError
from ..topology.entries import TableEntry
from ..wire.constants import DropReason
from . import diff
from .mask import Mask
from .tables import Entity, Tables, slot
from .targets import (LOCAL_TARGET_CLASSES, TARGET_NAMES, Program, Remote, Target, Unsupported, feature_skip,
                      skip_reason)
from .tester import Tester, is_noise
from .wiring import PORTS, Wiring, build_wiring, remove_wiring

NS_PREFIX = "mrct"
"""Namespaces of packet tests start with this (every mrckit name starts with ``mrc``)."""
POLL_S = 0.05


class PacketCheckFailed(AssertionError):
    """A check of :class:`SwitchUnderTest` failed; the message says how, and where the pcaps are.

    Attributes:
        pcap_dir: the folder with ``sent.pcap``, ``expected.pcap`` and ``port<N>.pcap``.
    """

    def __init__(self, message: str, pcap_dir: Path):
        super().__init__(message)
        self.pcap_dir = pcap_dir


class TableWriter:
    """The switch's tables by P4 names: entries of :mod:`mrckit.topology.entries`."""

    def __init__(self, target: Target):
        self.target = target

    @property
    def installed(self) -> Tables:
        """What this session has written: slot -> entry."""
        return self.target.installed

    def insert(self, *entries: Entity) -> None:
        """Insert each entry (in the order given)."""
        for e in entries:
            self.target.write(e, modify=False)
            self.target.installed[slot(e)] = e

    def modify(self, *entries: Entity) -> None:
        """Replace each entry's action or parameters."""
        for e in entries:
            self.target.write(e, modify=True)
            self.target.installed[slot(e)] = e

    def delete(self, *entries: Entity) -> None:
        """Delete each entry (named by its key)."""
        for e in entries:
            self.target.delete(self.target.installed.pop(slot(e), e))

    def apply(self, wanted: Tables) -> None:
        """Make the switch hold exactly ``wanted``, writing only the difference."""
        self.target.apply(wanted)

    def add(self, table: str, match: dict, action: str | None = None, **params: int) -> TableEntry:
        """Insert one direct entry by names: ``add("usid_fib", {"hdr.outer_ipv6.dst_addr[127:80]":
        0xfcbbbb000401}, "set_egress", port=3)``; returns it."""
        entry = TableEntry(table, dict(match), action, dict(params))
        self.insert(entry)
        return entry


def drop_reason_index(reason: DropReason | str | int) -> int:
    """The ``drop_reason`` counter index of ``reason``: a DropReason, its name in any case
    (``"no_route"``) or its index.

    Raises:
        MrcError: no such reason.
    """
    if isinstance(reason, str):
        try:
            return int(DropReason[reason.upper()])
        except KeyError:
            names = ", ".join(r.name.lower() for r in DropReason)
            raise MrcError(f"unknown drop reason {reason!r}: choose from {names}") from None
    return int(reason)


class SwitchUnderTest:
    """One target with ``ports``, wired to a tester; a context manager that removes both.

    Args:
        target: ``ebpf``, ``bmv2``, ``kernel`` or ``remote`` (:mod:`mrckit.testing.targets`).
        ports: the switch ports to wire (local targets); a remote target's come from ``remote``.
        program: bmv2 only: a user's compiled program (default mrc_switch.p4).
        remote: remote only: the server and the tester interfaces wired to it.
        artifacts: where failures write their pcaps (default: a new temporary folder).
        filter_noise: drop IPv6 multicast (ND, MLD) that kernels send on their own.
        ns_prefix: the start of the namespaces' names (``mrc...``; one run's prefix lets a
            cleanup remove whatever a crash left).

    Raises:
        MrcError: an unknown target, a target that cannot run here (the reason), or a
            namespace, switch or P4Runtime session that failed to come up (all removed).
    """

    def __init__(self, target: str, *, ports: tuple[int, ...] = PORTS, program: Program | None = None,
                 remote: Remote | None = None, artifacts: Path | None = None, filter_noise: bool = True,
                 ns_prefix: str = NS_PREFIX):
        if target not in TARGET_NAMES:
            raise MrcError(f"unknown target {target!r}: choose from {', '.join(TARGET_NAMES)}")
        if (target == "remote") != (remote is not None):
            raise MrcError("the remote target needs a Remote (its server and wired ports), and only it takes one")
        why = skip_reason(target, program)
        if why:
            raise MrcError(why)
        self.name = target
        self.filter_noise = filter_noise
        self.artifacts = Path(artifacts) if artifacts else Path(tempfile.mkdtemp(prefix="mrc-packet-test-"))
        self.failed = False
        """Set by the pytest plugin when a test on this switch failed (``--mrc-keep``)."""
        self.quiet_waits = 0
        """How many quiet periods the negative checks have waited (one per expect_nothing_else)."""
        self.sent: list[tuple[int, bytes]] = []
        self.received: dict[int, list[bytes]] = {}
        self._pending: dict[int, list[bytes]] = {}
        self._baseline: dict | None = None
        self._failures = 0
        self.target: Target | None = None
        self.tester: Tester | None = None
        if remote is not None:
            self.wiring = Wiring(None, remote.tester_ns, tuple(sorted(remote.ports)), dict(remote.ports))
        else:
            self.wiring = build_wiring(ns_prefix, kernel_switch=target == "kernel", ports=ports)
        try:
            self.target = self._start(target, program, remote)
            self.tester = Tester(self.wiring.tester, {p: self.wiring.tester_if(p) for p in self.wiring.ports})
        except BaseException:
            self.close()
            raise
        self.tables = TableWriter(self.target)
        self.received = {p: [] for p in self.wiring.ports}

    def _start(self, name: str, program: Program | None, remote: Remote | None) -> Target:
        from .targets import Bmv2Target, RemoteTarget

        if remote is not None:
            return RemoteTarget(self.wiring, remote)
        switch_name = netns.unique_name("mrcpt")
        if name == "bmv2":
            return Bmv2Target(self.wiring, switch_name, program)
        if program is not None:
            raise MrcError(f"{name} target runs mrc_switch only: a user's program runs on bmv2")
        return LOCAL_TARGET_CLASSES[name](self.wiring, switch_name)

    def __enter__(self) -> "SwitchUnderTest":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def ports(self) -> tuple[int, ...]:
        """The switch ports wired to the tester."""
        return self.wiring.ports

    def reset(self, artifacts: Path | None = None) -> None:
        """Start a new test on this switch: forget received frames, pending checks, the counter
        baseline and the quiet-period count; failures write into ``artifacts`` from now on.
        The tables stay as they are (``tables.apply`` sets them)."""
        self._tester.drain()
        self.sent, self._pending, self._baseline, self.quiet_waits = [], {}, None, 0
        self.received = {p: [] for p in self.wiring.ports}
        if artifacts is not None:
            self.artifacts, self._failures = Path(artifacts), 0

    def reset_counter_baseline(self) -> None:
        """Count from the next send on (``counter_deltas``, ``expect_drop``)."""
        self._baseline = None

    def require(self, *features: str) -> None:
        """Raise :class:`Unsupported` (a skip under pytest) unless the target has every feature
        (``counters``, ``drop_reasons``, ``trim``, ``ecn``, ``ecmp``, ``queues``)."""
        for feature in features:
            feature_skip(self._target, feature)

    @property
    def _target(self) -> Target:
        assert self.target is not None, "the switch did not start"
        return self.target

    @property
    def _tester(self) -> Tester:
        assert self.tester is not None, "the tester did not start"
        return self.tester

    # --- sending and checking ---------------------------------------------------------------

    def send(self, port: int, packet: Packet | bytes) -> bytes:
        """Send ``packet`` (Ethernet onwards) into switch ``port``; returns its bytes.

        Raises:
            MrcError: ``port`` is not wired.
        """
        frame = bytes(packet)
        self._check_port(port)
        if self._baseline is None and "counters" in self._target.features:
            self._baseline = self._target.counters()
        self._tester.send(port, frame)
        self.sent.append((port, frame))
        return frame

    def expect(self, port: int, packet: Packet | bytes | Mask, *, timeout: float | None = None) -> bytes:
        """Wait until a frame that matches ``packet`` (bytes, a scapy packet, or a :class:`Mask`)
        comes out of ``port``; returns it. Returns as soon as it arrives; ``timeout`` (seconds,
        default the target's ``expect_timeout``) bounds the wait.

        Raises:
            PacketCheckFailed: no matching frame in time (diff against the closest, pcaps).
        """
        __tracebackhide__ = True   # pytest shows the test's line, not ours
        self._check_port(port)
        want = packet if isinstance(packet, Mask) else Mask(packet)
        deadline = time.monotonic() + (self._target.expect_timeout if timeout is None else timeout)
        while True:
            for i, frame in enumerate(self._pending.get(port, [])):
                if want.matches(frame):
                    del self._pending[port][i]
                    return frame
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._poll(min(left, POLL_S))
        self._fail_expect(port, want)

    def expect_nothing_else(self) -> None:
        """Wait one quiet period (the target's ``quiet_period``) for all ports together, then
        fail if any port received a frame that no check has claimed.

        Raises:
            PacketCheckFailed: frames nobody expected (each listed, pcaps).
        """
        __tracebackhide__ = True   # pytest shows the test's line, not ours
        got = self._tester.collect(self._target.quiet_period)
        self.quiet_waits += 1
        self._take(got)
        extra = {p: frames for p, frames in self._pending.items() if frames}
        self._pending = {}
        if extra:
            lines = [f"  port {p}: {diff.summary(f)}" for p, frames in sorted(extra.items()) for f in frames]
            self._fail("expect_nothing_else: frames nobody expected:\n" + "\n".join(lines))

    def expect_drop(self, reason: DropReason | str | int | None = None, *, count: int = 1,
                    timeout: float | None = None) -> None:
        """The switch dropped ``count`` packets for ``reason`` (any reason when None) since the
        first send after the previous drop check, by its ``drop_reason`` counter (or the total
        of ``drop_port`` when the program has no ``drop_reason``).

        Raises:
            Unsupported: the target has no drop reasons (the kernel reference).
            PacketCheckFailed: another count after ``timeout`` s (the counter deltas, pcaps).
        """
        __tracebackhide__ = True   # pytest shows the test's line, not ours
        self.require("drop_reasons" if reason is not None else "counters")
        if not {"drop_reason", "drop_port"} & set(self._target.counter_names()):
            raise Unsupported(f"{self.name} target: the program has no drop_reason or drop_port counter")
        index = None if reason is None else drop_reason_index(reason)
        deadline = time.monotonic() + (self._target.expect_timeout if timeout is None else timeout)
        while True:
            deltas = self.counter_deltas()
            dropped = self._dropped(deltas, index)
            if dropped >= count or time.monotonic() >= deadline:
                break
            time.sleep(POLL_S)
        self._baseline = None
        if dropped != count:
            what = "packets" if index is None else f"packets for {DropReason(index).name.lower()}"
            cells = ", ".join(f"{n}[{i}] +{p}" for (n, i), (p, _) in sorted(deltas.items())) or "none"
            self._fail(f"expect_drop: {dropped} {what} dropped, expected {count}; counter deltas: {cells}")

    @staticmethod
    def _dropped(deltas: dict, index: int | None) -> int:
        if index is not None:
            return deltas.get(("drop_reason", index), (0, 0))[0]
        by_reason = [p for (n, _), (p, _) in deltas.items() if n == "drop_reason"]
        return sum(by_reason) if by_reason else sum(p for (n, _), (p, _) in deltas.items() if n == "drop_port")

    # --- counters ---------------------------------------------------------------------------

    def counters(self) -> dict[str, dict[int, tuple[int, int]]]:
        """Every counter's non-zero cells: name -> index -> (packets, bytes).

        Raises:
            Unsupported: the target has no counters.
        """
        self.require("counters")
        return self._target.counters()

    def counter(self, name: str, index: int) -> tuple[int, int]:
        """(packets, bytes) of one counter cell."""
        return self.counters().get(name, {}).get(index, (0, 0))

    def counter_deltas(self) -> dict[tuple[str, int], tuple[int, int]]:
        """(counter, index) -> (packets, bytes) counted since the first send after the last
        drop check (or since the session began)."""
        return counter_deltas(self._baseline or {}, self.counters(), self._target.counter_names())

    # --- internals --------------------------------------------------------------------------

    def _check_port(self, port: int) -> None:
        if port not in self.wiring.ports:
            raise MrcError(f"port {port} is not wired to the tester (ports: {', '.join(map(str, self.ports))})")

    def _poll(self, timeout: float) -> None:
        got: dict[int, list[bytes]] = {}
        self._tester.poll(got, timeout)
        self._take(got)

    def _take(self, got: dict[int, list[bytes]]) -> None:
        for port, frames in got.items():
            frames = [f for f in frames if not (self.filter_noise and is_noise(f))]
            self.received.setdefault(port, []).extend(frames)
            self._pending.setdefault(port, []).extend(frames)

    def _fail_expect(self, port: int, want: Mask) -> NoReturn:
        __tracebackhide__ = True   # pytest shows the test's line, not ours
        here = self._pending.get(port, [])
        head = f"expect(port {port}): no frame matched within the timeout"
        if here:
            closest = min(here, key=lambda f: _distance(want, f))
            body = f"; port {port} received {len(here)} other frame(s), the closest:\n{diff.describe(want, closest)}"
        else:
            others = [f"  port {p}: {diff.summary(f)}" for p, frames in sorted(self._pending.items()) for f in frames]
            body = f"; port {port} received nothing" + (", but:\n" + "\n".join(others) if others else "")
        self._fail(head + body, expected=want.expected)

    def _fail(self, message: str, expected: bytes | None = None) -> NoReturn:
        __tracebackhide__ = True   # pytest shows the test's line, not ours
        self._failures += 1
        folder = self.artifacts / f"failure-{self._failures}"
        folder.mkdir(parents=True, exist_ok=True)
        write_pcap(folder / "sent.pcap", [f for _, f in self.sent])
        if expected is not None:
            write_pcap(folder / "expected.pcap", [expected])
        for port, frames in sorted(self.received.items()):
            write_pcap(folder / f"port{port}.pcap", frames)
        raise PacketCheckFailed(f"{self.name}: {message}\npcaps: {folder}", folder)

    def close(self, *, keep: bool = False) -> str:
        """Stop the switch and remove the namespaces. ``keep``: leave the switch running and
        the namespaces in place for debugging; returns what stays and how to remove it."""
        kept = ""
        try:
            if self.tester is not None:
                self.tester.close()
                self.tester = None
            if self.target is not None:
                if keep:
                    kept = self.target.kept()
                else:
                    self.target.close()
        finally:
            self.target = None
            if self.wiring.sw is not None and not keep:
                remove_wiring(self.wiring)
        if keep and self.wiring.sw is not None:
            kept = (f"namespaces {self.wiring.sw} (switch) and {self.wiring.tester} (tester) "
                    f"(ip netns del NAME)" + (f"; {kept}" if kept else ""))
        return kept


def write_pcap(path: Path, frames: list[bytes]) -> None:
    """Write Ethernet ``frames`` to a pcap file at ``path`` (an empty list makes an empty file)."""
    with PcapWriter(str(path), linktype=DLT_EN10MB) as out:
        for frame in frames:
            out.write(frame)


def _distance(want: Mask, frame: bytes) -> int:
    n = min(len(frame), len(want.expected))
    return sum(1 for i in range(n) if (frame[i] ^ want.expected[i]) & want.cared_bits(i)) + abs(
        len(frame) - len(want.expected))


def counter_deltas(before, after, names=None) -> dict[tuple[str, int], tuple[int, int]]:
    """(counter, index) -> (packets, bytes) that changed from ``before`` to ``after`` (each
    name -> index -> (packets, bytes)), over ``names`` (default: every counter in either)."""
    out = {}
    for name in names if names is not None else sorted(set(before) | set(after)):
        b, a = before.get(name, {}), after.get(name, {})
        for index in set(a) | set(b):
            pb, bb = b.get(index, (0, 0))
            pa, ba = a.get(index, (0, 0))
            if (pa - pb, ba - bb) != (0, 0):
                out[(name, index)] = (pa - pb, ba - bb)
    return out


__all__ = ["PacketCheckFailed", "SwitchUnderTest", "TableWriter", "Unsupported", "counter_deltas",
           "drop_reason_index", "write_pcap"]
