"""When the agent's sweep is next due (mrckit.host.sweep.sweep_due): now while it probes or
has an EV to replace, at the earliest RTO verdict while sends are unacked, and never while
only a send, an ack or the API can change a verdict, so an idle agent blocks (docs/host.md,
"An idle agent")."""

import pytest

from mrckit.host.maps import EvSet, EvSlot
from mrckit.host.state import PeerState, ProbeTarget
from mrckit.host.sweep import sweep_due
from mrckit.wire.constants import EvState

RTO, NOW = 50_000_000, 10_000_000_000


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


def test_probe_targets_need_the_sweep_even_when_pinned():
    st = PeerState(backups={}, retired={0x10100009: ProbeTarget()})
    assert sweep_due(evset(), st, NOW, RTO, pinned=True) == NOW
    assert sweep_due(evset(state=EvState.DENIED), PeerState(backups={}), NOW, RTO, pinned=True) is None
