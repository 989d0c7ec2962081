"""When the agent's sweep is next due (mrckit.host.sweep.sweep_due): now while it has an EV
to replace or to start probing, at the earliest RTO verdict while sends are unacked, and never
while only a send, an ack or the API can change a verdict, so an idle agent blocks; and when
its next probe is due (probe_due): a probe interval after a path's last probe, or the probe's
expiry while it awaits an answer (docs/host.md, "An idle agent")."""

import pytest

from mrckit.host.maps import EvSet, EvSlot
from mrckit.host.state import PeerState, ProbeTarget
from mrckit.host.sweep import path_key, probe_due, sweep_due
from mrckit.wire.constants import EvState

RTO, NOW = 50_000_000, 10_000_000_000
INTERVAL, EXPIRY = 1_000_000, RTO
EVERY = lambda ev: INTERVAL  # noqa: E731 - one interval for every EV


def evset(**slot) -> EvSet:
    s = EvSet(n=4)
    for i in range(4):
        s.slots[i] = EvSlot(ev=0x10100000 + i)
    for k, v in slot.items():
        setattr(s.slots[2], k, v)
    return s


@pytest.mark.parametrize("slot, due", [
    ({}, None),                                                            # never sent
    (dict(pending_ns=NOW - RTO // 2, last_tx_ns=NOW - RTO // 2), NOW + RTO // 2),  # verdict to come
    (dict(pending_ns=NOW - 2 * RTO, last_tx_ns=NOW - 2 * RTO), None),      # judged already
    (dict(last_tx_ns=NOW - 1, last_ack_ns=NOW - 1), None),                # acked: nothing pending
    (dict(state=EvState.SKIP, last_tx_ns=NOW - 10, last_ack_ns=NOW - 20), NOW - 10 + RTO),  # SKIP ends after an RTO
    (dict(state=EvState.SKIP, last_tx_ns=NOW - 2 * RTO), NOW),             # ... which has passed
    (dict(state=EvState.ASSUMED_BAD), NOW),                                # to replace and probe
    (dict(state=EvState.DENIED), NOW),                                     # probed while denied
])
def test_sweep_due_by_slot(slot, due):
    assert sweep_due(evset(**slot), PeerState(backups={}), NOW, RTO) == due


def test_the_earliest_verdict_is_due_first():
    s = evset(pending_ns=NOW - RTO // 4)
    s.slots[0].pending_ns = NOW - RTO // 2
    assert sweep_due(s, PeerState(backups={}), NOW, RTO) == NOW + RTO // 2


def test_a_probed_ev_waits_for_its_probe_schedule_not_the_sweep():
    st = PeerState(backups={}, probes={0x10100002: ProbeTarget(last_probe_ns=NOW)})
    assert sweep_due(evset(state=EvState.ASSUMED_BAD), st, NOW, RTO) is None
    assert sweep_due(evset(state=EvState.DENIED), st, NOW, RTO, pinned=True) is None


EV_A, EV_B, EV_OTHER = 0x10100001, 0x10100002, 0x10200003  # A and B: plane 1, T1 1


@pytest.mark.parametrize("target, due", [
    (ProbeTarget(), INTERVAL),                                      # never probed: now
    (ProbeTarget(last_probe_ns=NOW - 10), NOW - 10 + INTERVAL),     # a probe interval on
    (ProbeTarget(last_probe_ns=NOW - 10, outstanding=7), NOW - 10 + EXPIRY),  # its answer or loss
])
def test_probe_due_by_target(target, due):
    assert probe_due(PeerState(backups={}, retired={EV_A: target}), EVERY, EXPIRY, {0, 1}) == due


def test_no_probe_is_due_without_targets_or_on_a_down_plane():
    assert probe_due(PeerState(backups={}), EVERY, EXPIRY, {0, 1}) is None
    assert probe_due(PeerState(backups={}, retired={EV_A: ProbeTarget()}), EVERY, EXPIRY, {0}) is None


def test_a_shared_path_is_due_once_none_of_its_evs_is_busy():
    st = PeerState(backups={}, retired={EV_A: ProbeTarget(last_probe_ns=NOW, outstanding=3)},
                   probes={EV_B: ProbeTarget(), EV_OTHER: ProbeTarget(last_probe_ns=NOW)})
    assert probe_due(st, EVERY, EXPIRY, {1}) == INTERVAL  # each EV its own: B is due now
    shared = probe_due(st, EVERY, EXPIRY, {1}, lambda ev: path_key(ev, False))
    assert shared == NOW + INTERVAL  # B waits for A's answer; the other path is due first


def test_each_ev_is_due_after_its_own_interval():
    st = PeerState(backups={}, retired={EV_A: ProbeTarget(last_probe_ns=NOW), EV_OTHER: ProbeTarget(last_probe_ns=NOW)})
    slow = lambda ev: 100 * INTERVAL if ev == EV_A else 10 * INTERVAL  # noqa: E731
    assert probe_due(st, slow, EXPIRY, {1}) == NOW + 10 * INTERVAL
