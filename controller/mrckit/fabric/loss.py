"""Packets lost to the demo's fault, counted the same way in both forwarding modes (issue 11).

In SRv6 mode a host knows which EVs cross a link; in EV-hash (ECMP) mode it does not, and the
switches' hash decides. Either way a packet is lost or it is not, so the demo counts losses at
the two ends of the transfer, which see every packet whatever the mode, the target or the kind
of fault:

- **totals** (the headline): packets the requestor sent toward the responder (data, first sends
  and retransmissions, and its PROBEs) minus packets that reached the responder, both read
  after the write completed;
- **per EV**: the sender's dataplane counts the packets it sends on each EV (``tx_packets`` of
  the agent's EV table, sampled every 50 ms, ``mrckit.fabric.series``) and the responder counts
  the packets that arrive on each EV (``demo_worker.EvTally``, reported every 50 ms). An EV's
  final loss is ``L = tx - rx``. Its last loss happened before the first sample from which on
  its running deficit ``tx(t) - rx(t)`` (rx from the responder's last report at or before t,
  so packets in flight only raise it) never falls below L. The last loss of the run is the
  latest of those: exact to one sampling period (50 ms) when the counts are in step, and never
  later than the truth (packets in flight at a sample can only make a loss look settled
  early; the responder reports every 20 ms, about half a packet per EV at the demo's rates).
  The loss curve sums, per EV, the least deficit from each sample on;
- **at the switches** (a cross-check by another witness): the failed link's two switch ports,
  ``tx_port`` at one end minus ``rx_port`` at the other, both directions, from the fault to the
  end. It sees every class of packet (data, SACKs, probes), whatever drops them: a link down,
  the fault program's loss or blackhole.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from .report import LossStats

Samples = list[tuple[int, dict[int, int]]]
"""``(t_ns, {EV: cumulative packets})``, oldest first."""


def per_ev_loss(final_tx: dict[int, int], final_rx: dict[int, int]) -> dict[int, int]:
    """EV -> packets lost on it (``tx - rx``, only EVs that lost some)."""
    return {ev: tx - final_rx.get(ev, 0) for ev, tx in final_tx.items() if tx > final_rx.get(ev, 0)}


class _RxAt:
    """The responder's per-EV counts as of its last report at or before a time."""

    def __init__(self, reports: Samples):
        self.reports = sorted(reports, key=lambda r: r[0])
        self.times = [t for t, _ in self.reports]

    def __call__(self, t_ns: int) -> dict[int, int]:
        i = bisect.bisect_right(self.times, t_ns)
        return self.reports[i - 1][1] if i else {}


def _settled(tx_samples: Samples, rx_reports: Samples, lost: dict[int, int]) -> dict[int, list[int]]:
    """Per EV of ``lost``, at each sample, the least deficit from that sample on (a suffix
    minimum): it never decreases, it ignores packets in flight (they arrive, and a later
    deficit is smaller), and it reaches the EV's final loss once its last loss has happened."""
    rx_at = _RxAt(rx_reports)
    rx_per_sample = [rx_at(t) for t, _ in tx_samples]
    out = {}
    for ev, n in lost.items():
        least, column = n, []
        for (_, tx), rx in zip(reversed(tx_samples), reversed(rx_per_sample)):
            least = min(least, max(tx.get(ev, 0) - rx.get(ev, 0), 0))
            column.append(least)
        out[ev] = column[::-1]
    return out


def loss_series(tx_samples: Samples, rx_reports: Samples, lost: dict[int, int]) -> list[int]:
    """Cumulative packets lost at each sample of ``tx_samples``: the sum over the EVs of
    ``lost`` of their settled deficit (see :func:`_settled`), capped at their final loss."""
    settled = _settled(tx_samples, rx_reports, lost)
    return [sum(column[i] for column in settled.values()) for i in range(len(tx_samples))]


def last_loss_ns(tx_samples: Samples, rx_reports: Samples, lost: dict[int, int]) -> int | None:
    """When the last packet was lost (ns, CLOCK_MONOTONIC; see the module docstring): the first
    sample at which every EV's settled deficit is its final loss. None when no EV lost one."""
    if not lost or not tx_samples:
        return None
    series = loss_series(tx_samples, rx_reports, lost)
    total = sum(lost.values())
    return next((t for (t, _), n in zip(tx_samples, series) if n >= total), tx_samples[-1][0])


def loss_stats(*, tx_samples: Samples, rx_reports: Samples, final_rx: dict[int, int], packets_sent: int,
               packets_received: int, t_fault_ns: int, t_restore_ns: int,
               retirements: Iterable[tuple[int, int]], link_packets_lost: int | None) -> LossStats:
    """The :class:`~mrckit.fabric.report.LossStats` of one run.

    Args:
        tx_samples: the sender dataplane's cumulative packets per EV, sampled (the last sample
            taken after the write completed).
        rx_reports: the responder's cumulative packets per EV, as reported during the write;
            ``final_rx`` its counts after the write.
        packets_sent, packets_received: the endpoints' totals (requestor data packets + PROBEs;
            responder packets).
        t_fault_ns, t_restore_ns: when the fault was injected and removed (CLOCK_MONOTONIC).
        retirements: ``(t_ns, EV)`` of the sender's EV retirements toward the receiver.
        link_packets_lost: the switch counters' figure at the failed link, or None.
    """
    final_tx = tx_samples[-1][1] if tx_samples else {}
    lost = per_ev_loss(final_tx, final_rx)
    in_fault = [ev for t, ev in retirements if t_fault_ns <= t <= t_restore_ns]
    last = last_loss_ns(tx_samples, rx_reports, lost)
    return LossStats(
        packets_sent=packets_sent, packets_received=packets_received,
        packets_lost=packets_sent - packets_received, packets_lost_by_ev=sum(lost.values()),
        evs_with_loss=len(lost), link_packets_lost=link_packets_lost,
        evs_retired=len(in_fault), evs_retired_distinct=len(set(in_fault)),
        t_last_loss_s=None if last is None else (last - t_fault_ns) / 1e9,
        t_s=[(t - t_fault_ns) / 1e9 for t, _ in tx_samples],
        lost=loss_series(tx_samples, rx_reports, lost))


def link_loss(before: dict[str, int], after: dict[str, int]) -> int:
    """Packets lost on a link between two reads of its ends' counters: ``{"a_tx", "a_rx",
    "b_tx", "b_rx"}`` (packets) -> (a_tx - b_rx) + (b_tx - a_rx), as differences."""
    d = {k: after[k] - before[k] for k in ("a_tx", "a_rx", "b_tx", "b_rx")}
    return (d["a_tx"] - d["b_rx"]) + (d["b_tx"] - d["a_rx"])
