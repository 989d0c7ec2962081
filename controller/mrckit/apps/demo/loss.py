"""Packets lost to the demo's fault, counted the same way in both forwarding modes.

In SRv6 mode a host knows which EVs cross a link; in EV-hash (ECMP) mode it does not, and the
switches' hash decides. Either way a packet is lost or it is not, so the demo counts losses at
the two ends of the transfer, which see every packet whatever the mode, the target or the kind
of fault:

- **totals** (the headline): packets the requestor sent toward the responder (data, first sends
  and retransmissions, and its PROBEs) minus packets that reached the responder, both read
  after the write completed;
- **per EV**: the sender's dataplane counts the packets it sends on each EV and notes when it
  sent the last one (``tx_packets`` and ``last_tx_ns`` of the agent's EV table, sampled every
  50 ms, ``mrckit.apps.demo.series``), and the responder process keeps, per EV, the time each
  arriving packet was *sent* (its TSETH timestamp, ``worker.EvTally``). An EV's final loss
  is ``L = tx - rx``. At a sample, its deficit ``tx`` minus its arrivals sent no later than
  ``last_tx_ns`` counts the packets among those ``tx`` counted that never arrived: packets in
  flight are counted (they arrive, whenever), and the read's own timing does not matter (the
  cut is the EV's last counted send). An arrival that waited longer than one TSETH wrap
  (67 ms) in the responder's queue is dated one wrap late, which raises a deficit for a while;
  so the loss curve sums, per EV, the least deficit from each sample on (which never
  decreases, and drops such moments), capped at L. The loss *to the fault* is the curve at the first
  sample taken after the restore minus the curve at the last sample read before the fault;
  the last loss is the first sample at which the curve reaches its value at the restore, with
  one sampling period of resolution (losses after the restore, if any, are not the fault's);
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


def per_ev_loss(final_tx: dict[int, int], rx_sent: dict[int, list[int]]) -> dict[int, int]:
    """EV -> packets lost on it (``tx`` minus arrivals, only EVs that lost some)."""
    got = {ev: len(times) for ev, times in rx_sent.items()}
    return {ev: tx - got.get(ev, 0) for ev, tx in final_tx.items() if tx > got.get(ev, 0)}


def _curves(tx_samples: Samples, cutoffs: list[dict[int, int]], rx_sent: dict[int, list[int]],
            lost: dict[int, int]) -> dict[int, list[int]]:
    """Per EV of ``lost``, at each sample, the least deficit from that sample on (``tx`` minus
    arrivals sent at or before the EV's last counted send, ``cutoffs``), between 0 and the
    final loss: it never decreases, and a deficit too high for a moment (an arrival dated one
    TSETH wrap late) drops out."""
    out = {}
    for ev, n in lost.items():
        times = rx_sent.get(ev, [])
        least, column = n, []
        for (_, tx), cut in zip(reversed(tx_samples), reversed(cutoffs)):
            least = min(least, max(tx.get(ev, 0) - bisect.bisect_right(times, cut.get(ev, 0)), 0))
            column.append(least)
        out[ev] = column[::-1]
    return out


def loss_series(tx_samples: Samples, cutoffs: list[dict[int, int]], rx_sent: dict[int, list[int]],
                lost: dict[int, int]) -> list[int]:
    """Cumulative packets lost at each sample of ``tx_samples`` (see the module docstring)."""
    curves = _curves(tx_samples, cutoffs, rx_sent, lost)
    return [sum(column[i] for column in curves.values()) for i in range(len(tx_samples))]


def fault_window(tx_samples: Samples, read_end_ns: list[int], series: list[int], t_fault_ns: int,
                 t_restore_ns: int) -> tuple[int, int | None]:
    """Packets lost to the fault, and when the last of them was lost (ns, or None): the loss
    curve ``series`` at the first sample begun at or after the restore, minus its value at the
    last sample whose read ended before the fault; the first sample at or after that one where
    the curve reaches its value at the restore."""
    if not tx_samples:
        return 0, None
    before = max((i for i, end in enumerate(read_end_ns) if end <= t_fault_ns), default=0)
    after = next((i for i, (t, _) in enumerate(tx_samples) if t >= t_restore_ns), len(tx_samples) - 1)
    lost = series[after] - series[before]
    if lost <= 0:
        return 0, None
    last = next(i for i in range(before, after + 1) if series[i] >= series[after])
    return lost, tx_samples[last][0]


def loss_stats(*, tx_samples: Samples, last_tx: list[dict[int, int]], read_end_ns: list[int],
               rx_sent: dict[int, list[int]], packets_sent: int, packets_received: int, t_fault_ns: int,
               t_restore_ns: int, retirements: Iterable[tuple[int, int]],
               link_packets_lost: int | None) -> LossStats:
    """The :class:`~mrckit.apps.demo.report.LossStats` of one run.

    Args:
        tx_samples: the sender dataplane's cumulative packets per EV, sampled (the last sample
            taken after the write completed); ``last_tx`` per sample and EV the time of the
            last send those counts hold (ns); ``read_end_ns`` when each sample's read ended.
        rx_sent: per EV, the send times (ns, ascending) of the packets that reached the
            responder, collected after the write.
        packets_sent, packets_received: the endpoints' totals (requestor data packets + PROBEs;
            responder packets).
        t_fault_ns, t_restore_ns: when the fault was injected and removed (CLOCK_MONOTONIC).
        retirements: ``(t_ns, EV)`` of the sender's EV retirements toward the receiver.
        link_packets_lost: the switch counters' figure at the failed link, or None.
    """
    final_tx = tx_samples[-1][1] if tx_samples else {}
    lost = per_ev_loss(final_tx, rx_sent)
    in_fault = [ev for t, ev in retirements if t_fault_ns <= t <= t_restore_ns]
    series = loss_series(tx_samples, last_tx, rx_sent, lost)
    to_fault, last = fault_window(tx_samples, read_end_ns, series, t_fault_ns, t_restore_ns)
    return LossStats(
        packets_sent=packets_sent, packets_received=packets_received, packets_lost=packets_sent - packets_received,
        packets_lost_to_fault=to_fault, packets_lost_by_ev=sum(lost.values()),
        evs_with_loss=len(lost), link_packets_lost=link_packets_lost,
        evs_retired=len(in_fault), evs_retired_distinct=len(set(in_fault)),
        t_last_loss_s=None if last is None else (last - t_fault_ns) / 1e9,
        t_s=[(t - t_fault_ns) / 1e9 for t, _ in tx_samples],
        lost=series)


def link_loss(before: dict[str, int], after: dict[str, int]) -> int:
    """Packets lost on a link between two reads of its ends' counters: ``{"a_tx", "a_rx",
    "b_tx", "b_rx"}`` (packets) -> (a_tx - b_rx) + (b_tx - a_rx), as differences."""
    d = {k: after[k] - before[k] for k in ("a_tx", "a_rx", "b_tx", "b_rx")}
    return (d["a_tx"] - d["b_rx"]) + (d["b_tx"] - d["a_rx"])
