"""The eBPF switch's per-port virtual queues (design section 4): a drain rate per port and
the virtual finish time the program advances, which give the queue depth that trimming and
ECN marking compare with ``port_config``'s thresholds; and a capacity per port, past which a
whole data packet is tail-dropped (what bmv2's ``set_queue_depth`` sets), the loss a port
with trimming off (trim threshold ``THRESHOLD_NONE``) shows under congestion."""

from __future__ import annotations

import time
from collections.abc import Iterable

from ..errors import MrcError
from ..wire import pipeline as P
from . import tables as T
from .port_state import PortField
from .ports import check_port

DEFAULT_QUEUE_RATE_PPS = 1_000_000
"""Drain rate of every port's virtual queue after set-up (packets/s), a fast veth's rate."""
MAX_QUEUE_RATE_PPS = 1_000_000_000
"""The C side multiplies elapsed ns by the rate in 64 bits; 1e9 pps keeps that exact."""
MAX_QUEUE_CAPACITY = P.THRESHOLD_NONE - 1
"""The C side compares the depth with capacity + 1 as a 32-bit threshold."""


class Queues:
    """The virtual queues of one eBPF switch, through the ``rate`` (drain rate and capacity)
    and ``queue`` parts of each port's ``port_state`` (``mrckit.switch.port_state``). Every
    method raises MrcError for a port outside 0..511."""

    def __init__(self, rate: PortField, queue: PortField):
        self.rates, self.vqueues = rate, queue

    def set_rate(self, port: int, pps: int) -> None:
        """Set the drain rate of ``port``'s virtual queue in packets/s (0 = never drains).

        Raises:
            MrcError: port out of range or rate outside 0..MAX_QUEUE_RATE_PPS.
        """
        if not isinstance(pps, int) or not 0 <= pps <= MAX_QUEUE_RATE_PPS:
            raise MrcError(f"queue rate {pps!r} pps outside 0..{MAX_QUEUE_RATE_PPS}")
        port = check_port(port)
        self.rates.update(port, T.QueueRate.of(pps, self.capacity(port)))

    def rate(self, port: int) -> int:
        """The drain rate of ``port``'s virtual queue (packets/s)."""
        return self.rates.lookup(check_port(port)).rate_pps

    def set_capacity(self, port: int, packets: int) -> None:
        """Let ``port``'s data queue hold ``packets`` whole data packets (0 = unbounded, the
        default): a whole data packet that finds it full is dropped (drop reason congestion),
        whatever the trim threshold. CONTROL-class and trimmed packets never count.

        Raises:
            MrcError: port out of range or capacity outside 0..MAX_QUEUE_CAPACITY.
        """
        if not isinstance(packets, int) or not 0 <= packets <= MAX_QUEUE_CAPACITY:
            raise MrcError(f"queue capacity {packets!r} packets outside 0..{MAX_QUEUE_CAPACITY}")
        port = check_port(port)
        self.rates.update(port, T.QueueRate.of(self.rate(port), packets))

    def capacity(self, port: int) -> int:
        """The capacity of ``port``'s data queue in packets (0 = unbounded)."""
        return self.rates.lookup(check_port(port)).capacity

    def depth(self, port: int) -> int:
        """The depth of ``port``'s virtual queue now, in packets (design section 4)."""
        q = self.vqueues.lookup(check_port(port))
        service_ns = self.rates.lookup(check_port(port)).service_ns
        if service_ns == 0:
            return q.backlog
        left = q.busy_until_ns - time.monotonic_ns()  # bpf_ktime_get_ns() is CLOCK_MONOTONIC
        return max(0, -(-left // service_ns))

    def reset(self, ports: Iterable[int] | None = None) -> None:
        """Empty the virtual queues of ``ports`` (default: all)."""
        for port in (range(P.PORT_COUNT) if ports is None else ports):
            self.vqueues.update(check_port(port), T.VQueue())

    def init_rates(self) -> None:
        """Every port's drain rate to ``DEFAULT_QUEUE_RATE_PPS``, on a fresh switch."""
        for port in range(P.PORT_COUNT):
            self.rates.update(port, T.QueueRate.of(DEFAULT_QUEUE_RATE_PPS))
