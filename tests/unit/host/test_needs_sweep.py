"""When the agent's periodic sweep must run (mrckit.host.sweep.needs_sweep): only while time
alone can still change a verdict, so an idle agent blocks (docs/host.md, "An idle agent")."""

import pytest

from mrckit.host.maps import EvSet, EvSlot
from mrckit.host.state import PeerState, ProbeTarget
from mrckit.host.sweep import needs_sweep
from mrckit.wire.constants import EvState

RTO, NOW = 50_000_000, 10_000_000_000


def evset(**slot) -> EvSet:
    s = EvSet(n=4)
    for i in range(4):
        s.slots[i] = EvSlot(ev=0x10100000 + i)
    for k, v in slot.items():
        setattr(s.slots[2], k, v)
    return s


@pytest.mark.parametrize("slot, needed", [
    ({}, False),                                                      # never sent
    (dict(pending_ns=NOW - RTO // 2, last_tx_ns=NOW - RTO // 2), True),   # verdict to come
    (dict(pending_ns=NOW - 2 * RTO, last_tx_ns=NOW - 2 * RTO), False),    # judged already
    (dict(last_tx_ns=NOW - 1, last_ack_ns=NOW - 1), False),           # acked: nothing pending
    (dict(state=EvState.SKIP, last_tx_ns=NOW - 1), True),             # SKIP ends after an RTO
    (dict(state=EvState.ASSUMED_BAD), True),                          # to replace and probe
    (dict(state=EvState.DENIED), True),                               # probed while denied
])
def test_needs_sweep_by_slot(slot, needed):
    assert needs_sweep(evset(**slot), PeerState(backups={}), NOW, RTO) is needed


def test_probe_targets_need_the_sweep_even_when_pinned():
    st = PeerState(backups={}, retired={0x10100009: ProbeTarget()})
    assert needs_sweep(evset(), st, NOW, RTO, pinned=True)
    assert not needs_sweep(evset(state=EvState.DENIED), PeerState(backups={}), NOW, RTO, pinned=True)
