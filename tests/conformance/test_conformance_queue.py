"""The queue model of design section 4 under a real burst: a slowly drained egress queue
fills, and packets past the trim threshold are trimmed (eBPF virtual queue, bmv2 egress
queue); CONTROL packets overtake data on bmv2's priority queue."""

import pytest

from mrckit.wire.constants import Dscp, Opcode
from mrckit.wire.layers import dissect

from support import conformance_frames as F
from support.conformance_cases import T0, base_tables, into, port_entry
from mrckit.testing import tables_of

BURST = 6
DRAIN_PPS = 10
TRIM_AT = 3


def _is_trimmed(frame: bytes) -> bool:
    return ((frame[14] & 0x0F) << 2 | frame[15] >> 6) == Dscp.TRIMMED


@pytest.fixture
def slow_port0(mrc_switch):
    sut = mrc_switch
    sut.require("queues")   # the kernel reference has no queue model
    sut.target.set_queue_rate(0, DRAIN_PPS)
    yield sut
    sut.target.restore_queue_rate(0)


def test_burst_fills_queue_and_trims_past_threshold(slow_port0):
    sut = slow_port0
    target, tester = sut.target, sut.tester
    tables = base_tables() | tables_of(port_entry(0, trim=TRIM_AT))
    target.apply(tables)
    target.reset_queues()
    tester.drain()
    before = target.counters()
    frames = [into(F.mrc_frame(F.container(T0[0]), opcode=Opcode.WRITE_MIDDLE), 1) for _ in range(BURST)]
    for frame in frames:
        tester.send(1, frame)
    got = tester.collect(BURST / DRAIN_PPS + 1.5 + target.quiet_period)[0]
    after = target.counters()

    assert len(got) == BURST, f"{target.name}: {len(got)} of {BURST} frames left port 0"
    trimmed = [_is_trimmed(f) for f in got]
    # The first packet meets an empty queue; the queue only grows during a burst this fast.
    assert not trimmed[0] and trimmed[-1], f"{target.name}: trimmed pattern {trimmed}"
    assert all(len(f) == 134 for f, t in zip(got, trimmed) if t)
    assert all(len(f) == len(frames[0]) for f, t in zip(got, trimmed) if not t)
    delta = after["trim_port"].get(0, (0, 0))[0] - before["trim_port"].get(0, (0, 0))[0]
    assert delta == sum(trimmed)
    assert after["drop_port"] == before["drop_port"]


def test_control_overtakes_data_on_priority_queue(slow_port0):
    sut = slow_port0
    target, tester = sut.target, sut.tester
    if target.name != "bmv2":
        pytest.skip("only bmv2 has real egress queues; the eBPF target forwards at once")
    target.apply(base_tables())
    tester.drain()
    data = into(F.mrc_frame(F.container(T0[0]), dscp=Dscp.NO_TRIM), 1)
    control = into(F.mrc_frame(F.container(T0[0]), opcode=Opcode.SACK, dscp=Dscp.CONTROL), 1)
    for _ in range(BURST - 1):
        tester.send(1, data)
    tester.send(1, control)
    got = tester.collect(BURST / DRAIN_PPS + 1.5 + target.quiet_period)[0]
    kinds = ["control" if dissect(f)[F.MrcBTH].opcode == Opcode.SACK else "data" for f in got]
    assert sorted(kinds) == sorted(["data"] * (BURST - 1) + ["control"])
    assert kinds.index("control") < BURST - 2, f"control did not overtake the queued data: {kinds}"
