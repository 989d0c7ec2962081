"""Sender congestion window in the spirit of NSCC's four quadrants (reference 3.4).

What is implemented, exactly (docs/endpoint.md repeats it):

- a byte window ``cwnd`` in [``min_cwnd``, ``max_cwnd``]; the requestor sends while
  ``inflight + packet <= cwnd`` (one packet may always be in flight);
- ``base_rtt`` is the smallest RTT seen (from the TSETH timestamp reflected in the SACK);
  ``target = base_rtt + target_qdelay``;
- on each SACK that newly acknowledges ``acked`` bytes, with RTT sample ``rtt`` and ECN flag
  ``ecn`` (the SACK's M field is SKIP_ONCE or ALWAYS_SKIP, which the responder sets for a CE
  arrival):

  =====  ============  =============================================================
  ECN    RTT           action
  =====  ============  =============================================================
  no     < target      proportional increase: ``cwnd += acked * eta * (target-rtt)/target``
  no     >= target     fair increase: ``cwnd += fi * mtu * acked / cwnd`` (``fi`` MTU per RTT)
  yes    >= target     multiplicative decrease: ``cwnd *= 1 - min(max_md, gamma*(rtt-target)/rtt)``,
                       at most once per RTT
  yes    < target      no change (left to load balancing across EVs)
  =====  ============  =============================================================

- a trim NACK (TRIMMED or TRIMMED_LASTHOP) is a decrease of ``max_md`` at most once per RTT;
- a retransmission timeout halves the window.

Not implemented from NSCC: quick_adapt, the adjust-period batching, the receiver penalty
``rcv_cwnd_pen`` and ``restore_cwnd``, and goodput from ``rcvd_bytes``.
"""

from __future__ import annotations

from dataclasses import dataclass

from mrckit.wire.constants import DEFAULT_PAYLOAD_LEN


@dataclass
class NsccConfig:
    """Window parameters. Bytes: ``mtu``, ``initial_cwnd``, ``max_cwnd``. ns: ``target_qdelay``
    (software endpoints see RTT noise of hundreds of µs, hence the default of 2 ms).
    Dimensionless: ``eta`` (proportional gain), ``fi`` (MTUs per RTT of fair increase),
    ``gamma`` and ``max_md`` (decrease gain and cap)."""

    mtu: int = DEFAULT_PAYLOAD_LEN
    initial_cwnd: int = 64 * DEFAULT_PAYLOAD_LEN
    max_cwnd: int = 1024 * DEFAULT_PAYLOAD_LEN
    target_qdelay: int = 2_000_000
    eta: float = 1.0
    fi: float = 1.0
    gamma: float = 0.8
    max_md: float = 0.5

    @classmethod
    def capped(cls, packets: int) -> "NsccConfig":
        """A window that starts at and never passes ``packets`` full packets
        (``DEFAULT_PAYLOAD_LEN`` bytes each): ``mrc demo --max-cwnd``, ``mrc traffic``'s cap.

        Raises:
            ValueError: ``packets`` below 1.
        """
        if packets < 1:
            raise ValueError(f"a window cap of {packets} packets: at least 1")
        return cls(initial_cwnd=packets * DEFAULT_PAYLOAD_LEN, max_cwnd=packets * DEFAULT_PAYLOAD_LEN)


class NsccWindow:
    """The congestion window of one QP (see the module docstring for the rules)."""

    def __init__(self, config: NsccConfig | None = None):
        self.cfg = config or NsccConfig()
        self.cwnd = float(min(self.cfg.initial_cwnd, self.cfg.max_cwnd))
        self.base_rtt: int | None = None
        self._last_md = -1 << 62
        self.decreases = 0

    @property
    def min_cwnd(self) -> int:
        """One MTU: the window never stops the QP."""
        return self.cfg.mtu

    def target(self) -> int:
        """Target RTT in ns (base RTT plus the target queueing delay)."""
        return (self.base_rtt or 0) + self.cfg.target_qdelay

    def on_ack(self, acked: int, rtt: int | None, ecn: bool, now: int) -> None:
        """Apply one SACK: ``acked`` newly acknowledged bytes, RTT sample in ns (or None),
        whether it reports ECN, and the current time in ns."""
        if rtt is not None and rtt > 0 and (self.base_rtt is None or rtt < self.base_rtt):
            self.base_rtt = rtt
        if rtt is None:
            rtt = self.base_rtt or 0
        target = self.target()
        if not ecn:
            if acked <= 0:
                return
            if rtt < target:
                self.cwnd += acked * self.cfg.eta * (target - rtt) / target
            else:
                self.cwnd += self.cfg.fi * self.cfg.mtu * acked / self.cwnd
        elif rtt >= target:
            self._decrease(min(self.cfg.max_md, self.cfg.gamma * (rtt - target) / max(rtt, 1)), now)
        self._clamp()

    def on_trim(self, now: int) -> None:
        """A trim NACK: decrease by ``max_md`` at most once per RTT."""
        self._decrease(self.cfg.max_md, now)

    def on_timeout(self) -> None:
        """A retransmission timeout: halve the window."""
        self.cwnd /= 2
        self.decreases += 1
        self._clamp()

    def _decrease(self, frac: float, now: int) -> None:
        if now - self._last_md < (self.base_rtt or 0) + self.cfg.target_qdelay:
            return
        self._last_md = now
        self.cwnd *= 1 - frac
        self.decreases += 1
        self._clamp()

    def _clamp(self) -> None:
        self.cwnd = min(max(self.cwnd, self.min_cwnd), self.cfg.max_cwnd)
