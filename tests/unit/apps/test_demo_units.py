"""The demo's failover figure from the dataplane's timestamps, and the write sized by duration."""

import pytest

from mrckit.errors import MrcError
from mrckit.apps.demo.run import (
    AGENT_SETTINGS, BMV2_AGENT_SETTINGS, BMV2_MAX_CWND, BMV2_RATE_ESTIMATE, NATIVE_MAX_CWND, PYTHON_AGENT_SETTINGS,
    RATE_ESTIMATE, WARMUP_S,
    DemoOptions, write_size_for,
)
from mrckit.apps.demo.plots import zoom_window_us
from mrckit.apps.demo.scenario import AgentEvent, dataplane_failover_ns, dead_ev_out_times

MIB = 1 << 20


def ev(t_ns, ev_id, new="ASSUMED_BAD", reason="PATH_LOSS", old="GOOD"):
    return AgentEvent("h0-0", t_ns, "2001:db8::1", ev_id, old, new, reason)


def test_failover_is_the_last_dead_ev_retirement_minus_the_first_drop():
    dead = frozenset({1, 2, 3})
    events = [ev(1_000, 1), ev(1_400, 2, new="DENIED", reason="DENY"), ev(1_250, 3), ev(1_100, 9),
              ev(5_000, 1, new="GOOD", old="ASSUMED_BAD", reason="PROBE_OK"), ev(6_000, 1)]
    out = dead_ev_out_times(events, dead, 900, 10_000)
    assert out == {1: (1_000, "ASSUMED_BAD"), 2: (1_400, "DENIED"), 3: (1_250, "ASSUMED_BAD")}
    assert dataplane_failover_ns(900, out, dead) == 500  # EV 2, the last one out; EV 9 is not dead


def test_transitions_outside_the_fault_window_do_not_count():
    dead = frozenset({1, 2})
    out = dead_ev_out_times([ev(100, 1), ev(1_000, 1), ev(20_000, 2)], dead, 500, 10_000)
    assert out == {1: (1_000, "ASSUMED_BAD")}
    assert dataplane_failover_ns(500, out, dead) is None  # EV 2 stayed in service until the restore


def test_the_senders_denial_of_the_link_takes_out_the_dead_evs_left():
    dead = frozenset({1, 2, 3})
    deny = AgentEvent("h0-0", 2_000, "", 0, "GOOD", "DENIED", "LINK_DENIED", link="p0/t0-1/t1-1")
    other = AgentEvent("h0-0", 1_500, "", 0, "GOOD", "DENIED", "LINK_DENIED", link="p1/t0-1/t1-1")
    out = dead_ev_out_times([ev(1_000, 1), other, deny, ev(3_000, 2)], dead, 900, 10_000, "p0/t0-1/t1-1")
    assert out == {1: (1_000, "ASSUMED_BAD"), 2: (2_000, "DENIED"), 3: (2_000, "DENIED")}
    assert dataplane_failover_ns(900, out, dead) == 1_100


def test_no_first_drop_or_no_dead_evs_gives_no_figure():
    out = {1: (1_000, "ASSUMED_BAD")}
    assert dataplane_failover_ns(None, out, frozenset({1})) is None
    assert dataplane_failover_ns(900, {}, frozenset()) is None


def test_duration_sizes_the_write_at_the_endpoints_rate():
    assert write_size_for(3.0, 12 * MIB) == 36 * MIB
    assert write_size_for(2.0, 1.3 * MIB) == 3 * MIB  # whole MiB
    assert write_size_for(0.5, 100) == MIB and write_size_for(120, 1e12) == 1 << 30  # clamped
    native, python = DemoOptions(duration_s=3.0), DemoOptions(endpoint="python", duration_s=3.0)
    assert native.write_size(150e6) == write_size_for(3.0, 150e6)  # at the warm-up's measured rate
    assert native.write_size() == write_size_for(3.0, RATE_ESTIMATE["native"])  # else the expected one
    assert python.write_size() == write_size_for(3.0, RATE_ESTIMATE["python"]) < native.write_size()
    bmv2 = DemoOptions(target="bmv2", endpoint="native", duration_s=3.0)
    assert bmv2.write_size() == write_size_for(3.0, BMV2_RATE_ESTIMATE) < native.write_size()
    assert DemoOptions(size=7 * MIB, duration_s=60).write_size(150e6) == 7 * MIB  # --size overrides


def test_the_warm_up_write_lasts_about_a_second_at_the_expected_rate():
    assert DemoOptions().warmup_size() == write_size_for(WARMUP_S, RATE_ESTIMATE["native"]) == 32 * MIB
    python = DemoOptions(endpoint="python")
    assert python.warmup_size() == write_size_for(WARMUP_S, RATE_ESTIMATE["python"]) == 16 * MIB
    bmv2 = DemoOptions(target="bmv2", endpoint="native")
    assert bmv2.warmup_size() == write_size_for(WARMUP_S, BMV2_RATE_ESTIMATE) == 3 * MIB


def test_agent_settings_follow_the_endpoint_and_target():
    assert DemoOptions().endpoint == "native" and DemoOptions().agent_settings() == AGENT_SETTINGS
    assert DemoOptions(endpoint="python").agent_settings() == PYTHON_AGENT_SETTINGS
    assert DemoOptions(target="bmv2").agent_settings() == BMV2_AGENT_SETTINGS
    assert AGENT_SETTINGS.rto_ns < PYTHON_AGENT_SETTINGS.rto_ns


def test_writer_window_follows_the_endpoint_and_target_unless_given():
    assert DemoOptions().writer_window() == NATIVE_MAX_CWND
    assert DemoOptions(endpoint="python").writer_window() == 0  # uncapped
    assert DemoOptions(target="bmv2", endpoint="python").writer_window() == BMV2_MAX_CWND
    assert DemoOptions(max_cwnd=0).writer_window() == 0
    assert DemoOptions(endpoint="python", max_cwnd=64).writer_window() == 64


@pytest.mark.parametrize("opts, word", [(DemoOptions(endpoint="rust"), "--endpoint"),
                                        (DemoOptions(duration_s=0.1), "--duration"),
                                        (DemoOptions(size=100), "--size"),
                                        (DemoOptions(max_cwnd=-1), "--max-cwnd"),
                                        (DemoOptions(max_cwnd=4096), "--max-cwnd")])
def test_bad_options_name_themselves(opts, word):
    with pytest.raises(MrcError, match=word):
        opts.check()


def test_zoom_window_holds_every_mark_and_the_floor():
    assert zoom_window_us([]) == (-200.0, 200.0)
    lo, hi = zoom_window_us([-50.0, 3_000.0])
    assert lo <= -200 and hi >= 3_000 and hi - 3_000 == pytest.approx(0.1 * 3_050)


def test_seeded_bytes_reach_past_randbytes_limit_and_match_one_draw():
    """randbytes() cannot draw 256 MiB at once (its bit count overflows a C int); the demo's
    data comes in chunks that equal one draw wherever one draw works."""
    import random

    from mrckit.apps.common import RANDBYTES_CHUNK, seeded_bytes

    n = RANDBYTES_CHUNK + 5
    assert seeded_bytes(7, n) == random.Random(7).randbytes(n)
    big = seeded_bytes(3, (256 << 20) + 1)
    assert len(big) == (256 << 20) + 1 and big[-4096:] != bytes(4096)


def test_the_senders_probe_results_are_not_state_changes():
    """A dead EV's probe results (PROBE_RESULT, its state repeated) come every 100 ms after it
    left service: the failover figures must not take them for a later departure."""
    from types import SimpleNamespace

    from mrckit.apps.demo.scenario import _sender_events
    retired = ev(1_000, 1)
    probed = [ev(1_000 + k * 100, 1, reason="PROBE_RESULT", old="ASSUMED_BAD") for k in range(1, 4)]
    run = SimpleNamespace(events=[retired, *probed], sender="h0-0", receiver_nic="2001:db8::1")
    assert _sender_events(run) == [retired]
