"""Send one frame into a switch port, capture every port for one bounded window, and compare
frames and counter deltas with a case's expectations. A failing case leaves a pcap per port."""

from __future__ import annotations

import select
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from mrckit import netns
from mrckit.wire.pipeline import COUNTER_NAMES

from support.conformance_targets import Entity, Key, Tables, Target

ETH_P_ALL = 0x0003
SO_RCVBUFFORCE = 33
RCVBUF_BYTES = 64 << 20


@dataclass
class Case:
    """One conformance case.

    frame goes in on in_port; ``out`` maps each port to the frames expected there (ports not
    named expect none); ``counts`` maps (counter, index) to the expected packet delta (every
    other cell must stay put); ``tables`` overrides the base tables for this case
    (None deletes an entry; keys and entries as in ``conformance_targets``' tables model);
    ``kernel``: a uN case that the Linux reference also runs.
    """

    name: str
    frame: bytes
    in_port: int
    out: dict[int, list[bytes]]
    counts: dict[tuple[str, int], int]
    tables: dict[tuple[str, Key], Entity | None] = field(default_factory=dict)
    kernel: bool = False


class Tester:
    """AF_PACKET sockets on the tester's end of every switch port.

    ``rcvbuf``: bytes of receive buffer per socket (SO_RCVBUFFORCE, root), large enough that a
    paced burst of thousands of frames waits in the socket until :meth:`collect` reads it.
    """

    __test__ = False   # a helper, not a pytest test class

    def __init__(self, ns: str, ifaces: dict[int, str], *, rcvbuf: int = RCVBUF_BYTES):
        self.socks: dict[int, socket.socket] = {}
        with netns.enter(ns):
            for port, iface in ifaces.items():
                sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, rcvbuf)
                sock.bind((iface, 0))
                sock.setblocking(False)
                self.socks[port] = sock

    def send(self, port: int, frame: bytes) -> None:
        self.socks[port].send(frame)

    def collect(self, window: float) -> dict[int, list[bytes]]:
        """Frames received on each port (never our own outgoing ones) during ``window`` s."""
        got: dict[int, list[bytes]] = {p: [] for p in self.socks}
        by_fd = {s.fileno(): p for p, s in self.socks.items()}
        deadline = time.monotonic() + window
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select(list(self.socks.values()), [], [], left)
            for sock in ready:
                self._read_all(sock, got[by_fd[sock.fileno()]])
        return got

    @staticmethod
    def _read_all(sock: socket.socket, into: list[bytes]) -> None:
        while True:
            try:
                frame, addr = sock.recvfrom(65536)
            except BlockingIOError:
                return
            if addr[2] != socket.PACKET_OUTGOING:
                into.append(frame)

    def poll(self, into: dict[int, list[bytes]], timeout: float = 0.0) -> None:
        """Append to ``into[port]`` every frame already received, waiting at most ``timeout`` s
        for the first one."""
        ready, _, _ = select.select(list(self.socks.values()), [], [], timeout)
        by_fd = {s.fileno(): p for p, s in self.socks.items()}
        for sock in ready:
            self._read_all(sock, into.setdefault(by_fd[sock.fileno()], []))

    def drain(self) -> None:
        for sock in self.socks.values():
            self._read_all(sock, [])

    def close(self) -> None:
        for sock in self.socks.values():
            sock.close()


def is_noise(frame: bytes) -> bool:
    """IPv6 link-local multicast (ND, MLD) that a kernel switch may send on its own."""
    return len(frame) >= 54 and frame[12:14] == b"\x86\xdd" and frame[38] == 0xFF


def counter_deltas(before, after) -> dict[tuple[str, int], tuple[int, int]]:
    out = {}
    for name in COUNTER_NAMES:
        b, a = before.get(name, {}), after.get(name, {})
        for index in set(a) | set(b):
            pb, bb = b.get(index, (0, 0))
            pa, ba = a.get(index, (0, 0))
            if (pa - pb, ba - bb) != (0, 0):
                out[(name, index)] = (pa - pb, ba - bb)
    return out


def expected_bytes(target: Target, case: Case, name: str) -> int:
    """Bytes a counter cell counts for one packet: the ingress length, except for the eBPF
    target's tx/trim/ecn counters, which count what leaves (design section 4)."""
    if name in ("tx_port", "trim_port", "ecn_port") and not target.counts_ingress_length:
        sent = [f for frames in case.out.values() for f in frames]
        return len(sent[0]) if sent else len(case.frame)
    return len(case.frame)


def run_case(target: Target, tester: Tester, case: Case, base: Tables, pcap_dir: Path) -> None:
    """Install the tables, send, capture, compare. Raises AssertionError describing every
    mismatch, after writing ``pcap_dir/port<N>.pcap`` (and ``input.pcap``)."""
    wanted = dict(base)
    for key, entry in case.tables.items():
        if entry is None:
            wanted.pop(key, None)
        else:
            wanted[key] = entry
    target.apply(wanted)
    target.reset_queues()
    tester.drain()
    before = target.counters() if target.has_counters else {}
    tester.send(case.in_port, case.frame)
    got = tester.collect(target.window)
    if target.noise_filter:
        got = {p: [f for f in frames if not is_noise(f)] for p, frames in got.items()}
    after = target.counters() if target.has_counters else {}

    problems = _frame_problems(case, got, target.wiring.ports)
    if target.has_counters:
        problems += _counter_problems(target, case, counter_deltas(before, after))
    if problems:
        _save_pcaps(pcap_dir, case, got)
        raise AssertionError(f"{target.name}/{case.name}: " + "; ".join(problems) + f" (pcaps in {pcap_dir})")


def _frame_problems(case: Case, got: dict[int, list[bytes]], ports) -> list[str]:
    problems = []
    for port in ports:
        want, have = case.out.get(port, []), got.get(port, [])
        if sorted(want) != sorted(have):
            problems.append(f"port {port}: expected {_describe(want)}, got {_describe(have)}"
                            + _first_diff(want, have))
    return problems


def _describe(frames: list[bytes]) -> str:
    return "no frame" if not frames else ", ".join(f"{len(f)} B" for f in frames)


def _first_diff(want: list[bytes], have: list[bytes]) -> str:
    if len(want) == 1 and len(have) == 1:
        a, b = want[0], have[0]
        for i in range(min(len(a), len(b))):
            if a[i] != b[i]:
                return f" (first difference at byte {i}: expected {a[i]:#04x}, got {b[i]:#04x})"
    return ""


def _counter_problems(target: Target, case: Case, deltas) -> list[str]:
    problems = []
    for cell in sorted(set(deltas) | set(case.counts)):
        packets, nbytes = deltas.get(cell, (0, 0))
        want = case.counts.get(cell, 0)
        if packets != want:
            problems.append(f"{cell[0]}[{cell[1]}] counted {packets} packets, expected {want}")
        elif want and nbytes != want * expected_bytes(target, case, cell[0]):
            problems.append(f"{cell[0]}[{cell[1]}] counted {nbytes} bytes, expected "
                            f"{want * expected_bytes(target, case, cell[0])}")
    return problems


def _save_pcaps(folder: Path, case: Case, got: dict[int, list[bytes]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    wrpcap(str(folder / "input.pcap"), [Ether(case.frame)])
    for port, frames in got.items():
        wrpcap(str(folder / f"port{port}.pcap"), [Ether(f) for f in frames])
