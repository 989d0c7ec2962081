"""UDP traffic between every pair of hosts of a running fabric, counted per pair and per plane.

Each host gets an ordinary UDP socket on ``[NIC address]:4791`` made inside its namespace;
the host dataplane (tc egress on the NIC device) sprays each packet onto an EV, so onto a
plane and a spine, and the far host's XDP decapsulates it (design section 5). The result
gives, for every ordered pair, the packets sent and received (by payload, so a packet
delivered to the wrong host or twice is seen) and, from the sender's agent (``GetStats``
EV table), how many of them left on each plane.
"""

from __future__ import annotations

import select
import struct
import time
from dataclasses import dataclass, field

from ..wire.constants import UDP_PORT_ROCEV2

MAGIC = bytes.fromhex("d100ffff00000011")
"""Payloads start like a BTH (an ACK to QP 0x11), so none looks like QP 0x2 agent traffic."""
_TAG = struct.Struct("!HHI")


@dataclass
class PairResult:
    """One ordered pair: packets ``sent`` from ``src`` to ``dst``, ``received`` intact at
    ``dst``, ``misdelivered`` (arrived at another host), and packets per plane as counted by
    the sender's dataplane (``plane -> packets``)."""

    src: str
    dst: str
    sent: int = 0
    received: int = 0
    misdelivered: int = 0
    per_plane: dict[int, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Every packet arrived, at the right host, and every plane carried some."""
        return (self.received == self.sent and not self.misdelivered and bool(self.per_plane)
                and all(n > 0 for n in self.per_plane.values()))


BMV2_PPS = 500.0
"""Send rate that a bmv2 fabric (ten simple_switch_grpc processes on two cores here) forwards
without losing packets in its libpcap port rings."""


def pairwise_udp(fab, packets: int = 256, *, size: int = 200, timeout: float = 10.0,
                 hosts: list[str] | None = None, pps: float | None = None) -> list[PairResult]:
    """Send ``packets`` UDP datagrams of ``size`` bytes from every host to every other host
    (``hosts``: a subset) on port 4791, and count them (see the module docstring).

    The dataplane walks a peer's EV set in rotations (an affine permutation of the slots,
    design section 5), so a short burst may stay on one plane; twice the EV set (256 with
    the default 128 EVs) always holds one whole rotation, hence every plane.

    Args:
        fab: a running :class:`~mrckit.fabric.fabric.Fabric`.
        pps: cap on the total send rate in packets/s; None sends as fast as the sockets take
            them. bmv2 reads each port through a libpcap ring, which an unpaced burst overflows.
    Returns:
        one :class:`PairResult` per ordered pair, in (src, dst) order.
    """
    names = hosts or fab.hosts()
    nodes = {n: fab.host(n) for n in names}
    index = {n: i for i, n in enumerate(names)}
    planes = range(fab.topology.planes)
    results = {(s, d): PairResult(s, d, per_plane={p: 0 for p in planes}) for s in names for d in names if s != d}
    before = {n: _plane_tx(nodes[n]) for n in names}
    rx = {n: nodes[n].socket(UDP_PORT_ROCEV2) for n in names}
    tx = {n: nodes[n].socket() for n in names}
    try:
        pad = bytes(max(size - len(MAGIC) - _TAG.size, 0))
        pace = _Pacer(pps)
        for s in names:
            for d in names:
                if s == d:
                    continue
                for seq in range(packets):
                    tx[s].sendto(MAGIC + _TAG.pack(index[s], index[d], seq) + pad,
                                 (nodes[d].nic_address, UDP_PORT_ROCEV2))
                    pace.sent_one()
                results[(s, d)].sent = packets
        _receive(rx, names, results, expected=packets * (len(names) - 1), timeout=timeout)
    finally:
        for sock in (*rx.values(), *tx.values()):
            sock.close()
    for s in names:
        after = _plane_tx(nodes[s])
        for d in names:
            if s != d:
                peer = nodes[d].nic_address
                results[(s, d)].per_plane = {p: after.get((peer, p), 0) - before[s].get((peer, p), 0) for p in planes}
    return list(results.values())


class _Pacer:
    """Sleeps so that packets leave at no more than ``pps`` per second (None: no limit)."""

    def __init__(self, pps: float | None):
        if pps is not None and pps <= 0:
            raise ValueError(f"pps {pps!r}: must be positive")
        self.pps, self.start, self.count = pps, time.monotonic(), 0

    def sent_one(self) -> None:
        if self.pps is None:
            return
        self.count += 1
        wait = self.start + self.count / self.pps - time.monotonic()
        if wait > 0:
            time.sleep(wait)


def _receive(rx: dict, names: list[str], results: dict, *, expected: int, timeout: float) -> None:
    seen: set[tuple[int, int, int]] = set()
    got = dict.fromkeys(names, 0)
    end = time.monotonic() + timeout
    while time.monotonic() < end and any(got[n] < expected for n in names):
        ready, _, _ = select.select(list(rx.values()), [], [], 0.2)
        for at, sock in rx.items():
            if sock not in ready:
                continue
            data = sock.recv(65536)
            if not data.startswith(MAGIC):
                continue
            si, di, seq = _TAG.unpack_from(data, len(MAGIC))
            pair = results.get((names[si], names[di]))
            if pair is None:
                continue
            if names[di] != at:
                pair.misdelivered += 1
            elif (si, di, seq) not in seen:
                seen.add((si, di, seq))
                pair.received += 1
                got[at] += 1


def _plane_tx(node) -> dict[tuple[str, int], int]:
    """(peer NIC address, plane) -> packets sent, from the agent's EV table."""
    out: dict[tuple[str, int], int] = {}
    for peer in node.stats(include_evs=True).peers:
        for ev in peer.evs:
            key = (peer.peer, ev.plane)
            out[key] = out.get(key, 0) + ev.tx_packets
    return out


def summary(results: list[PairResult]) -> str:
    """One line: pairs OK out of all, packets received/sent, packets sent per plane in total
    (the senders' dataplane counts: a packet lost on the way still counts on its plane)."""
    planes: dict[int, int] = {}
    for r in results:
        for p, n in r.per_plane.items():
            planes[p] = planes.get(p, 0) + n
    ok = sum(r.ok for r in results)
    return (f"{ok}/{len(results)} host pairs OK; {sum(r.received for r in results)}/"
            f"{sum(r.sent for r in results)} packets received; sent per plane: "
            + ", ".join(f"plane {p}: {n}" for p, n in sorted(planes.items())))
