"""The failure reactor (mrckit.control.reactor), driven with host_agent.proto EvEvent messages
and an explicit clock, on the default fabric."""

from mrckit.control import FailureReactor
from mrckit.control.reactor import ASSUMED_BAD, DENIED, GOOD
from mrckit.proto import host_agent_pb2 as pb
from mrckit.topology import generate_clos
from mrckit.wire.ev import ev_pack

MS = 1_000_000
SETTLE = 100 * MS
TOPO = generate_clos()
NIC = {h.name: str(h.nic_address) for h in TOPO.hosts}
DOWN = "p0/t0-0/t1-1"


def ev(plane, t1, salt=5):
    return ev_pack(plane, t1, salt)


def bad(peer, e, t):
    return pb.EvEvent(peer=NIC[peer], ev=e, old_state=GOOD, new_state=ASSUMED_BAD, reason="RTO_TIMEOUT",
                      wall_time_ns=t)


def probe(peer, e, ok, links, t, state=DENIED, nic=NIC):
    return pb.EvEvent(peer=nic[peer], ev=e, old_state=state, new_state=state, reason="PROBE_RESULT",
                      probe_ok=ok, link=",".join(links), wall_time_ns=t)


def probes_fail(r, host, peer, e, t, span=SETTLE, nic=NIC):
    """``host``'s probes of its retired EV ``e`` toward ``peer`` fail from ``t`` for ``span``:
    the first failure reported at once, the last ``span`` later (the agent's report rate)."""
    for when in (t, t + span):
        r.event(host, probe(peer, e, False, [], when, ASSUMED_BAD, nic), when)


def reactor():
    return FailureReactor(TOPO, settle_ns=SETTLE, lift_successes=3)


def fail_evs(r, host, peer, plane, t1, t, salts=(5, 6, 7)):
    """``host``'s EVs toward ``peer`` over (``plane``, ``t1``) time out, one per salt: a failed
    link fails every EV across it."""
    for salt in salts:
        r.event(host, bad(peer, ev(plane, t1, salt), t), t)


def fail_and_gather(r, t0):
    """h0-0 loses T1 1 of plane 0 toward leaves 1 and 2; traffic leaf 1 <-> leaf 2 over T1 1 and
    h0-0's traffic over T1 0 keep working (polled after the episode began)."""
    fail_evs(r, "h0-0", "h1-0", 0, 1, t0)
    fail_evs(r, "h0-0", "h2-0", 0, 1, t0 + MS, salts=(9, 10, 11))
    r.good("h1-0", NIC["h2-0"], ev(0, 1), since_ns=t0 + 2 * MS, now_ns=t0 + 50 * MS)
    r.good("h0-0", NIC["h1-0"], ev(0, 0), since_ns=t0 + 2 * MS, now_ns=t0 + 50 * MS)
    r.good("h0-0", NIC["h2-0"], ev(1, 1), since_ns=t0 + 2 * MS, now_ns=t0 + 50 * MS)


def test_deny_waits_for_the_settle_time_then_names_exactly_the_link():
    r, t0 = reactor(), 1_000 * MS
    fail_and_gather(r, t0)
    assert r.episode_start == t0
    assert r.decide(t0 + SETTLE - 1) == []
    (action,) = r.decide(t0 + SETTLE)
    assert action.kind == "deny" and action.links == (DOWN,)
    assert action.localisation.failed == {DOWN} and not action.localisation.ambiguous
    assert r.decide(t0 + SETTLE + MS) == []  # pending on the hosts: not decided twice
    r.done(action, t0 + SETTLE + 2 * MS, hosts=6)
    assert r.denied == {DOWN: t0 + SETTLE + 2 * MS} and r.links_down() == [DOWN]
    assert [m.kind for m in r.timeline.marks] == ["first_assumed_bad", "localised", "deny_all_hosts"]
    times = [m.time_ns for m in r.timeline.marks]
    assert times == sorted(times)


def test_good_evidence_from_before_the_failure_does_not_clear_the_link():
    r, t0 = reactor(), 1_000 * MS
    r.event("h0-0", bad("h1-0", ev(0, 1), t0), t0)
    # Acks over the failed link that grew in a poll interval that began before the episode.
    r.good("h0-0", NIC["h1-0"], ev(0, 1, 77), since_ns=t0 - 10 * MS, now_ns=t0 + 10 * MS)
    fail_evs(r, "h0-0", "h2-0", 0, 1, t0 + MS, salts=(9, 10, 11))
    r.good("h1-0", NIC["h2-0"], ev(0, 1), since_ns=t0 + 2 * MS, now_ns=t0 + 50 * MS)
    r.good("h0-0", NIC["h1-0"], ev(0, 0), since_ns=t0 + 2 * MS, now_ns=t0 + 50 * MS)
    (action,) = r.decide(t0 + SETTLE)
    assert action.links == (DOWN,)


def test_failures_across_a_denied_link_start_no_new_episode():
    r, t0 = reactor(), 1_000 * MS
    fail_and_gather(r, t0)
    (action,) = r.decide(t0 + SETTLE)
    r.done(action, t0 + SETTLE, hosts=6)
    r.event("h0-1", bad("h1-1", ev(0, 1, 3), t0 + 2 * SETTLE), t0 + 2 * SETTLE)
    assert r.episode_start is None and r.decide(t0 + 4 * SETTLE) == []


def test_successful_probes_across_the_link_lift_it_and_a_failed_one_resets_the_count():
    r, t0 = reactor(), 1_000 * MS
    fail_and_gather(r, t0)
    (action,) = r.decide(t0 + SETTLE)
    r.done(action, t0 + SETTLE, hosts=6)
    t = t0 + 2 * SETTLE
    r.event("h0-0", probe("h1-0", ev(0, 1), True, [DOWN], t), t)
    r.event("h0-0", probe("h1-0", ev(0, 1), True, [DOWN], t), t)
    r.event("h0-0", probe("h1-0", ev(0, 1), False, [DOWN], t), t)
    r.event("h0-0", probe("h2-0", ev(0, 1), True, [DOWN], t), t)
    r.event("h0-0", probe("h2-0", ev(0, 1), True, [DOWN], t), t)
    assert r.decide(t) == []
    r.event("h0-1", probe("h2-1", ev(0, 1), True, [DOWN], t), t)
    (lift,) = r.decide(t + MS)
    assert lift.kind == "lift" and lift.links == (DOWN,)
    r.done(lift, t + 2 * MS, hosts=6)
    assert r.denied == {} and r.links_down() == []
    assert r.unexplained_failing() == []  # the old evidence across it is forgotten
    assert r.decide(t + SETTLE * 5) == []
    assert [m.kind for m in r.timeline.marks][-1] == "lifted"


def test_an_ambiguous_answer_whose_probes_fail_denies_every_suspect_and_probes_lift_the_innocent():
    r, t0 = reactor(), 1_000 * MS
    r.event("h0-0", bad("h1-0", ev(0, 1), t0), t0)  # one failing path only
    r.good("h0-0", NIC["h1-0"], ev(0, 0), since_ns=t0 + MS, now_ns=t0 + 50 * MS)  # clears both host links
    probes_fail(r, "h0-0", "h1-0", ev(0, 1), t0 + 2 * MS)
    assert r.decide(t0 + SETTLE) == [] and r.last.ambiguous  # waits for more evidence
    assert r.decide(t0 + 3 * SETTLE - 1) == []
    (action,) = r.decide(t0 + 3 * SETTLE)
    assert action.localisation.ambiguous
    assert action.links == ("p0/t0-0/t1-1", "p0/t0-1/t1-1")
    (mark,) = [m for m in r.timeline.marks if m.kind == "localised"]
    assert "p0/t0-0/t1-1: 1 failing EV of h0-0 cross it, no good path crosses it, " \
           "probes across it failed for 100 ms" in mark.detail
    r.done(action, t0 + SETTLE, hosts=6)
    t = t0 + 2 * SETTLE
    for _ in range(3):  # leaf 1 -> leaf 2 over T1 1 crosses only the innocent link
        r.event("h1-0", probe("h2-0", ev(0, 1), True, ["p0/t0-1/t1-1"], t), t)
    (lift,) = r.decide(t)
    assert lift.links == ("p0/t0-1/t1-1",)
    r.done(lift, t, hosts=6)
    assert list(r.denied) == ["p0/t0-0/t1-1"]


def test_an_ambiguous_answer_whose_probes_do_not_fail_denies_nothing():
    """A busy host's spurious loss retires one path and names its links; its probes are not
    failing, or fail for a moment and are answered again: time alone denies nothing."""
    r, t0 = reactor(), 1_000 * MS
    r.event("h0-0", bad("h1-0", ev(0, 1), t0), t0)
    r.good("h0-0", NIC["h1-0"], ev(0, 0), since_ns=t0 + MS, now_ns=t0 + 50 * MS)
    assert r.decide(t0 + 10 * SETTLE) == [] and r.last.ambiguous
    assert sorted(r.withheld) == ["p0/t0-0/t1-1", "p0/t0-1/t1-1"]
    assert "probes across it have not failed for 100 ms" in r.withheld["p0/t0-0/t1-1"]
    (mark,) = [m for m in r.timeline.marks if m.kind == "withheld"]
    assert mark.links == ("p0/t0-0/t1-1", "p0/t0-1/t1-1")
    t = t0 + 11 * SETTLE
    probes_fail(r, "h0-0", "h1-0", ev(0, 1), t, span=SETTLE // 2)
    r.event("h0-0", probe("h1-0", ev(0, 1), True, [], t + SETTLE // 2 + MS, ASSUMED_BAD), t + SETTLE // 2 + MS)
    r.event("h0-0", probe("h1-0", ev(0, 1), False, [], t + SETTLE, ASSUMED_BAD), t + SETTLE)
    assert r.decide(t + SETTLE + MS) == []  # the answer in between started the count again
    assert r.denied == {}


def test_failed_probes_across_a_reported_link_confirm_no_other_suspect():
    """Probes toward h1-0 over T1 1 fail because p0/t0-1/t1-1 is reported down; they cross
    p0/t0-0/t1-1 too, which a lone timeout toward h2-0 names: they must not confirm it."""
    r, t0 = reactor(), 1_000 * MS
    r.report("p0/t0-1/t1-1", up=False, source="fault")
    (deny,) = r.decide(t0)
    r.done(deny, t0 + MS, hosts=6)
    r.event("h0-0", bad("h2-0", ev(0, 1), t0 + 2 * MS), t0 + 2 * MS)
    r.good("h0-0", NIC["h2-0"], ev(0, 0), since_ns=t0 + 3 * MS, now_ns=t0 + 50 * MS)
    probes_fail(r, "h0-0", "h1-0", ev(0, 1), t0 + 3 * MS)
    assert r.decide(t0 + 10 * SETTLE) == [] and r.last.ambiguous
    assert list(r.denied) == ["p0/t0-1/t1-1"] and "p0/t0-0/t1-1" in r.withheld
    probes_fail(r, "h0-0", "h2-0", ev(0, 1), t0 + 10 * SETTLE)  # its own probes fail: confirmed
    (second,) = r.decide(t0 + 11 * SETTLE + MS)
    assert second.links == ("p0/t0-0/t1-1", "p0/t0-2/t1-1")


def test_a_spurious_assumed_bad_that_recovers_denies_nothing():
    r, t0 = reactor(), 1_000 * MS
    r.event("h0-0", bad("h1-0", ev(1, 1), t0), t0)
    assert r.decide(t0 + SETTLE) == [] and r.last.ambiguous
    ok = pb.EvEvent(peer=NIC["h1-0"], ev=ev(1, 1), old_state=ASSUMED_BAD, new_state=GOOD, reason="PROBE_OK",
                    wall_time_ns=t0 + 2 * SETTLE)
    r.event("h0-0", ok, t0 + 2 * SETTLE)
    assert r.decide(t0 + 10 * SETTLE) == [] and r.episode_start is None and r.denied == {}


def test_a_host_port_going_down_is_denied_without_waiting():
    r, t0 = reactor(), 1_000 * MS
    port = pb.EvEvent(peer="", ev=0, old_state=GOOD, new_state=ASSUMED_BAD, reason="PORT_DOWN", plane=1,
                      link="p1/t0-2/down-1", wall_time_ns=t0)
    r.event("h2-1", port, t0)
    (action,) = r.decide(t0 + 1)
    assert action.links == ("p1/t0-2/down-1",)
    assert [m.kind for m in r.timeline.marks] == ["link_down", "first_assumed_bad", "localised"]


def test_a_failed_action_is_decided_again():
    r, t0 = reactor(), 1_000 * MS
    fail_and_gather(r, t0)
    (action,) = r.decide(t0 + SETTLE)
    r.failed(action)
    (again,) = r.decide(t0 + SETTLE + MS)
    assert again.links == action.links


def test_denials_found_on_hosts_are_adopted():
    r = reactor()
    r.adopt_denial(DOWN, True, 5)
    r.adopt_denial("p1/t0-0/t1-0", True, 6)
    r.adopt_denial("p1/t0-0/t1-0", False, 7)
    assert r.denied == {DOWN: 5}


def test_events_for_unknown_hosts_are_counted_and_ignored():
    r = reactor()
    r.event("h0-0", pb.EvEvent(peer="2001:db8:100:77::1", ev=ev(0, 1), new_state=ASSUMED_BAD,
                               reason="RTO_TIMEOUT"), 1)
    assert r.ignored_events == 1 and r.episode_start is None


def test_congestion_is_not_failure_evidence():
    r, t0 = reactor(), 1_000 * MS
    skip = pb.EvEvent(peer=NIC["h1-0"], ev=ev(0, 1), old_state=GOOD, new_state=ASSUMED_BAD,
                      reason="SACK_ALWAYS_SKIP", wall_time_ns=t0)
    r.event("h0-0", skip, t0)
    assert r.episode_start is None and r.decide(t0 + 10 * SETTLE) == []


def all_paths_fail(r, src, dst, t):
    """Every EV of ``src`` toward ``dst`` times out (a busy host's spurious RTOs)."""
    for plane in (0, 1):
        for t1 in (0, 1):
            r.event(src, bad(dst, ev(plane, t1), t), t)


def test_spurious_timeouts_on_every_plane_of_a_pair_are_an_end_hosts_and_deny_nothing():
    r, t0 = reactor(), 1_000 * MS
    all_paths_fail(r, "h0-0", "h1-0", t0)
    assert r.end_host_pairs() == {frozenset({"h0-0", NIC["h1-0"]})}
    assert r.decide(t0 + SETTLE) == [] and r.decide(t0 + 3 * SETTLE) == []
    assert r.denied == {} and r.links_down() == [] and r.withheld == {}
    marks = [(m.kind, m.detail) for m in r.timeline.marks]
    assert [k for k, _ in marks] == ["first_assumed_bad", "end_host"]  # said once, not every tick
    assert f"every plane between {NIC['h1-0']} and h0-0 failing alike" in marks[1][1]


def test_one_plane_of_a_pair_failing_is_still_a_links():
    r, t0 = reactor(), 1_000 * MS
    for t1 in (0, 1):
        r.event("h0-0", bad("h1-0", ev(0, t1), t0), t0)
    assert r.end_host_pairs() == set()
    r.decide(t0 + SETTLE)
    assert r.last.failing_paths == 2


def test_an_end_hosts_pair_does_not_hide_another_pairs_link_evidence():
    r, t0 = reactor(), 1_000 * MS
    all_paths_fail(r, "h2-0", "h1-0", t0)  # a slow pair
    fail_and_gather(r, t0)  # the real failure, seen by h0-0
    (action,) = r.decide(t0 + SETTLE)
    assert action.kind == "deny" and action.links == (DOWN,)
    assert [m.kind for m in r.timeline.marks][:2] == ["first_assumed_bad", "end_host"]


def test_a_unique_answer_that_would_cut_a_host_off_denies_only_what_keeps_a_path():
    r, t0 = reactor(), 1_000 * MS
    # Two pairs, one plane each: no pair fails on every plane, so this is link evidence.
    # Each of h0-0's two host links is named by two pairs (a host link fails toward every peer).
    for t1 in (0, 1):
        fail_evs(r, "h0-0", "h1-0", 0, t1, t0)
        fail_evs(r, "h1-1", "h0-0", 0, t1, t0)
        fail_evs(r, "h0-0", "h2-0", 1, t1, t0)
        fail_evs(r, "h2-1", "h0-0", 1, t1, t0)
    for plane in (0, 1):  # every other link of those paths is proven good
        for t1 in (0, 1):
            for src, dst in (("h1-0", "h2-0"), ("h0-1", "h1-0"), ("h1-1", "h2-0"), ("h2-1", "h1-0")):
                r.good(src, NIC[dst], ev(plane, t1), since_ns=t0 + MS, now_ns=t0 + 50 * MS)
    (action,) = r.decide(t0 + SETTLE)
    assert r.last.failed == {"p0/t0-0/down-0", "p1/t0-0/down-0"} and not r.last.ambiguous
    assert action.links == ("p0/t0-0/down-0",)
    assert list(r.withheld) == ["p1/t0-0/down-0"]
    assert "without a path" in r.withheld["p1/t0-0/down-0"]
    assert [m.kind for m in r.timeline.marks] == ["first_assumed_bad", "withheld", "localised"]


def test_an_ambiguous_set_that_would_split_the_fabric_is_cut_down_to_a_safe_one():
    from mrckit.control.reach import newly_cut
    from mrckit.topology import generate_clos

    topo = generate_clos(planes=2, spines=1, leaves=3, hosts_per_leaf=2)
    nic = {h.name: str(h.nic_address) for h in topo.hosts}
    r, t0 = FailureReactor(topo, settle_ns=SETTLE), 1_000 * MS
    for plane, (src, dst) in ((0, ("h0-0", "h1-0")), (1, ("h0-1", "h1-1"))):  # one plane per pair
        r.event(src, pb.EvEvent(peer=nic[dst], ev=ev(plane, 0), new_state=ASSUMED_BAD,
                                reason="RTO_TIMEOUT", wall_time_ns=t0), t0)
        for a, b in (("h0-0", "h0-1"), ("h1-0", "h1-1")):  # same-leaf traffic clears the host links
            r.good(a, nic[b], ev(plane, 0), since_ns=t0 + MS, now_ns=t0 + 50 * MS)
        probes_fail(r, src, dst, ev(plane, 0), t0 + MS, nic=nic)
    (action,) = r.decide(t0 + 3 * SETTLE)
    assert r.last.ambiguous and len(r.last.suspects) == 4
    assert action.links == ("p0/t0-0/t1-0", "p0/t0-1/t1-0")
    assert sorted(r.withheld) == ["p1/t0-0/t1-0", "p1/t0-1/t1-0"]
    assert newly_cut(topo, [], action.links) == []


def test_a_reported_link_down_is_denied_at_once_and_lifted_when_reported_up():
    r, t0 = reactor(), 1_000 * MS
    r.report(DOWN, up=False, source="fault")
    (deny,) = r.decide(t0)  # no host evidence, no settle time
    assert deny.kind == "deny" and deny.links == (DOWN,) and "link report" in deny.reason
    assert r.decide(t0 + MS) == []  # pending: not decided twice
    r.done(deny, t0 + 2 * MS, hosts=12)
    assert r.denied == {DOWN: t0 + 2 * MS} and r.links_down() == [DOWN]
    marks = [(m.kind, m.detail) for m in r.timeline.marks]
    assert marks == [("localised", "link report: down (fault)"),
                     ("deny_all_hosts", "DENY on all 12 hosts (link report: down (fault))")]
    # Host evidence across the reported link starts no episode and denies nothing more.
    r.event("h0-0", bad("h1-0", ev(0, 1), t0 + 3 * MS), t0 + 3 * MS)
    assert r.decide(t0 + 10 * SETTLE) == []
    r.report(DOWN, up=True, source="fault")
    (lift,) = r.decide(t0 + 11 * SETTLE)
    assert lift.kind == "lift" and lift.links == (DOWN,)
    r.done(lift, t0 + 11 * SETTLE + MS, hosts=12)
    assert r.denied == {} and r.links_down() == []
    assert r.timeline.marks[-1].kind == "lifted" and r.timeline.marks[-1].detail.startswith("link report: up")


def test_a_link_reported_down_explains_the_evidence_so_its_path_neighbour_is_not_denied():
    """A failing path crossing a link reported down is explained by the report: the path's
    other link (the ambiguous alternative) stays allowed, even once the ambiguity has waited."""
    r, t0 = reactor(), 1_000 * MS
    r.event("h0-0", bad("h1-0", ev(0, 1), t0), t0)   # crosses p0/t0-0/t1-1 and p0/t0-1/t1-1
    r.good("h0-0", NIC["h1-0"], ev(0, 0), since_ns=t0 + MS, now_ns=t0 + 50 * MS)
    assert r.decide(t0 + SETTLE) == [] and r.last.ambiguous
    r.report("p0/t0-1/t1-1", up=False, source="fault")
    (deny,) = r.decide(t0 + 3 * SETTLE)               # the ambiguity's wait is over
    assert deny.links == ("p0/t0-1/t1-1",) and "link report" in deny.reason
    r.done(deny, t0 + 3 * SETTLE + MS, hosts=6)
    assert r.decide(t0 + 4 * SETTLE) == [] and list(r.denied) == ["p0/t0-1/t1-1"]


def test_a_late_report_lifts_the_innocent_suspect_of_an_ambiguous_deny():
    """The hosts' evidence is localised first (ambiguous: both links of the path are denied);
    the link report that names one of them comes later and explains every failing path, so
    the other is lifted; the reported one stays denied."""
    r, t0 = reactor(), 1_000 * MS
    r.event("h0-0", bad("h1-0", ev(0, 1), t0), t0)
    r.good("h0-0", NIC["h1-0"], ev(0, 0), since_ns=t0 + MS, now_ns=t0 + 50 * MS)
    probes_fail(r, "h0-0", "h1-0", ev(0, 1), t0 + MS)
    (deny,) = r.decide(t0 + 3 * SETTLE)
    assert deny.links == ("p0/t0-0/t1-1", "p0/t0-1/t1-1") and deny.localisation.ambiguous
    r.done(deny, t0 + 3 * SETTLE + MS, hosts=6)
    assert r.decide(t0 + 4 * SETTLE) == []          # nothing explains it yet: both stay
    r.report("p0/t0-1/t1-1", up=False, source="fault")
    (lift,) = r.decide(t0 + 5 * SETTLE)
    assert lift.kind == "lift" and lift.links == ("p0/t0-0/t1-1",) and "explains" in lift.reason
    r.done(lift, t0 + 5 * SETTLE + MS, hosts=6)
    assert list(r.denied) == ["p0/t0-1/t1-1"] and r.decide(t0 + 6 * SETTLE) == []


def test_probes_do_not_lift_a_link_still_reported_down_but_do_once_it_is_up_and_denied_by_evidence():
    r, t0 = reactor(), 1_000 * MS
    r.report(DOWN, up=False, source="fault")
    (deny,) = r.decide(t0)
    r.done(deny, t0 + MS, hosts=12)
    for i in range(4):
        r.event("h0-0", probe("h1-0", ev(0, 1), True, [DOWN], t0 + (2 + i) * MS), t0 + (2 + i) * MS)
    assert r.decide(t0 + 10 * MS) == []  # still reported down: a fact beats probes
    # A link denied from host evidence (not reported) is still lifted by probes.
    other, t1 = reactor(), 5_000 * MS
    fail_and_gather(other, t1)
    (d,) = other.decide(t1 + SETTLE)
    other.done(d, t1 + SETTLE + MS, hosts=12)
    for i in range(3):
        other.event("h0-0", probe("h1-0", ev(0, 1), True, [DOWN], t1 + SETTLE + (2 + i) * MS),
                    t1 + SETTLE + (2 + i) * MS)
    (lift,) = other.decide(t1 + SETTLE + 10 * MS)
    assert lift.kind == "lift" and lift.links == (DOWN,) and lift.reason == ""


def test_a_link_reported_up_before_its_deny_landed_is_lifted_after_it():
    r, t0 = reactor(), 1_000 * MS
    r.report(DOWN, up=False)
    (deny,) = r.decide(t0)
    r.report(DOWN, up=True)  # the deny is still being carried out
    assert r.decide(t0 + MS) == []
    r.done(deny, t0 + 2 * MS, hosts=12)
    (lift,) = r.decide(t0 + 3 * MS)
    assert lift.kind == "lift" and lift.links == (DOWN,)


def late_host_evidence(r, t0):
    """The failure of ``fail_and_gather``, the good evidence proving every link but h1-0's
    plane-0 downlink, and one EV of h0-0 toward h1-0 over T1 0 timing out because a host was
    late: alone, it names h1-0's downlink."""
    fail_evs(r, "h0-0", "h1-0", 0, 1, t0)
    fail_evs(r, "h0-0", "h2-0", 0, 1, t0 + MS, salts=(9, 10, 11))
    r.event("h0-0", bad("h1-0", ev(0, 0, 7), t0 + 2 * MS), t0 + 2 * MS)
    for src, dst, e in (("h1-1", "h2-0", ev(0, 1)), ("h1-1", "h2-0", ev(0, 0)), ("h0-0", "h2-0", ev(0, 0))):
        r.good(src, NIC[dst], e, since_ns=t0 + 3 * MS, now_ns=t0 + 50 * MS)


def test_a_late_hosts_lone_timeout_beside_a_real_failure_waits_and_its_probe_clears_it():
    r, t0 = reactor(), 1_000 * MS
    late_host_evidence(r, t0)
    (action,) = r.decide(t0 + SETTLE)
    assert r.last.failed == {DOWN, "p0/t0-1/down-0"}  # the smallest answer names both ...
    assert action.links == (DOWN,)                     # ... but the lone EV's link waits
    (mark,) = [m for m in r.timeline.marks if m.kind == "localised"]
    assert f"{DOWN}: 3 failing EVs of h0-0 name it alone" in mark.detail
    r.done(action, t0 + SETTLE + MS, hosts=6)
    ok = pb.EvEvent(peer=NIC["h1-0"], ev=ev(0, 0, 7), old_state=ASSUMED_BAD, new_state=GOOD, reason="PROBE_OK",
                    wall_time_ns=t0 + 2 * SETTLE)
    r.event("h0-0", ok, t0 + 2 * SETTLE)
    assert r.decide(t0 + 10 * SETTLE) == []
    assert list(r.denied) == [DOWN]


def test_a_host_link_that_one_pairs_traffic_names_is_withheld():
    r, t0 = reactor(), 1_000 * MS
    late_host_evidence(r, t0)
    (first,) = r.decide(t0 + SETTLE)
    r.done(first, t0 + SETTLE, hosts=6)
    assert r.decide(t0 + 2 * SETTLE) == []  # a new episode begins for the evidence left
    assert r.decide(t0 + 10 * SETTLE) == []  # h1-0's downlink: only h0-0 -> h1-0 names it
    assert "one host pair's traffic only" in r.withheld["p0/t0-1/down-0"]
    assert list(r.denied) == [DOWN]


def test_a_weak_t0_t1_suspect_still_named_after_the_wait_is_denied_once_its_probes_fail():
    r, t0 = reactor(), 1_000 * MS
    fail_evs(r, "h0-0", "h1-0", 0, 1, t0)
    fail_evs(r, "h0-0", "h2-0", 0, 1, t0 + MS, salts=(9, 10, 11))
    r.event("h1-1", bad("h2-0", ev(0, 0, 7), t0 + 2 * MS), t0 + 2 * MS)  # alone, it names p0/t0-1/t1-0
    for src, dst, e in (("h1-1", "h1-0", ev(0, 0)), ("h0-0", "h2-0", ev(0, 0)), ("h1-1", "h2-0", ev(0, 1))):
        r.good(src, NIC[dst], e, since_ns=t0 + 3 * MS, now_ns=t0 + 50 * MS)
    (first,) = r.decide(t0 + SETTLE)
    assert r.last.failed == {DOWN, "p0/t0-1/t1-0"} and first.links == (DOWN,)
    r.done(first, t0 + SETTLE, hosts=6)
    assert r.decide(t0 + 2 * SETTLE) == []  # a new episode begins for the evidence left
    assert r.decide(t0 + 2 * SETTLE + 3 * SETTLE) == []  # its probes have not failed yet
    probes_fail(r, "h1-1", "h2-0", ev(0, 0, 7), t0 + 5 * SETTLE)
    (second,) = r.decide(t0 + 6 * SETTLE)
    assert second.kind == "deny" and second.links == ("p0/t0-1/t1-0",)
    (mark,) = [m for m in r.timeline.marks if m.kind == "localised" and m.links == second.links]
    assert "1 failing EV of h1-1 name it alone" in mark.detail


# ---- arrivals: the receiver's dataplane counted packets on the failing paths ------------------

def arrive(r, host, src, plane, t1, since, now):
    """``host``'s dataplane counted packets from ``src`` on (``plane``, ``t1``) between polls at
    ``since`` and ``now``."""
    s = TOPO.host(src)
    r.arrived(host, pb.RxPath(plane=plane, t1=t1, src_leaf=s.leaf, src_downlink=s.downlink, packets=9),
              since, now)


def slow_receiver(r, t0):
    """h0-0 and h1-0 time out toward h2-0 on plane 0 over both T1s: the evidence names h2-0's
    plane-0 host link, strongly."""
    fail_evs(r, "h0-0", "h2-0", 0, 1, t0)
    fail_evs(r, "h1-0", "h2-0", 0, 0, t0 + MS, salts=(9, 10, 11))


HOST_LINK_H20 = "p0/t0-2/down-0"


def test_a_slow_receivers_host_link_is_denied_without_arrivals():
    r, t0 = reactor(), 1_000 * MS
    slow_receiver(r, t0)
    (action,) = r.decide(t0 + SETTLE)
    assert action.links == (HOST_LINK_H20,)


def test_arrivals_on_the_failing_paths_explain_them_and_nothing_is_denied():
    r, t0 = reactor(), 1_000 * MS
    slow_receiver(r, t0)
    arrive(r, "h2-0", "h0-0", 0, 1, t0 + 2 * MS, t0 + 40 * MS)
    arrive(r, "h2-0", "h1-0", 0, 0, t0 + 2 * MS, t0 + 40 * MS)
    for t in range(t0 + SETTLE, t0 + 10 * SETTLE, SETTLE):
        assert r.decide(t) == []
    assert r.unexplained_failing() == []
    marks = [m.detail for m in r.timeline.marks if m.kind == "arrivals"]
    assert len(marks) == 2 and all(NIC["h2-0"] in m for m in marks)  # once per sender and receiver


def test_arrivals_from_before_the_failure_or_the_other_way_prove_nothing():
    r, t0 = reactor(), 1_000 * MS
    slow_receiver(r, t0)
    fail_evs(r, "h0-0", "h2-0", 0, 1, t0 + 10 * MS, salts=(31,))  # the paths failed again, later
    fail_evs(r, "h1-0", "h2-0", 0, 0, t0 + 10 * MS, salts=(32,))
    arrive(r, "h2-0", "h0-0", 0, 1, t0 - 10 * MS, t0 + 40 * MS)  # the window began before the episode
    arrive(r, "h2-0", "h1-0", 0, 0, t0 + 5 * MS, t0 + 40 * MS)   # ... before the paths' last failure
    arrive(r, "h0-0", "h2-0", 0, 1, t0 + 20 * MS, t0 + 40 * MS)  # h2-0 -> h0-0: the other direction
    (action,) = r.decide(t0 + SETTLE)
    assert action.links == (HOST_LINK_H20,)


def test_arrivals_on_one_path_leave_the_others_links_to_localise():
    """h2-0's plane-0 host link is proven by h1-0's arrivals; h0-0's paths over T1 1 still fail
    and nothing proves them: T1 1's uplink of leaf 0 is the answer, not the receiver's link."""
    r, t0 = reactor(), 1_000 * MS
    fail_evs(r, "h0-0", "h2-0", 0, 1, t0)
    fail_evs(r, "h0-0", "h1-0", 0, 1, t0, salts=(9, 10, 11))
    arrive(r, "h2-0", "h1-0", 0, 0, t0 + 2 * MS, t0 + 40 * MS)
    arrive(r, "h1-0", "h2-0", 0, 1, t0 + 2 * MS, t0 + 40 * MS)
    r.good("h0-0", NIC["h1-0"], ev(0, 0), since_ns=t0 + 2 * MS, now_ns=t0 + 40 * MS)
    (action,) = r.decide(t0 + SETTLE)
    assert action.links == (DOWN,)


def test_a_plane_that_arrivals_explain_does_not_make_an_end_host():
    """h0-0's EVs toward h2-0 fail on both planes; plane 1's paths carried packets all along (a
    late SACK retired them), so this is no end host's trouble: plane 0's failure is localised."""
    r, t0 = reactor(), 1_000 * MS
    slow_receiver(r, t0)
    fail_evs(r, "h0-0", "h2-0", 1, 0, t0, salts=(21, 22, 23))
    fail_evs(r, "h1-0", "h2-0", 1, 1, t0, salts=(24, 25, 26))
    assert r.end_host_pairs()
    arrive(r, "h2-0", "h0-0", 1, 0, t0 + 2 * MS, t0 + 40 * MS)
    arrive(r, "h2-0", "h1-0", 1, 1, t0 + 2 * MS, t0 + 40 * MS)
    assert r.end_host_pairs() == set()
    (action,) = r.decide(t0 + SETTLE)
    assert action.links == (HOST_LINK_H20,)
    assert not [m for m in r.timeline.marks if m.kind == "end_host"]


def test_with_arrival_polls_evidence_waits_for_a_poll_of_its_receiver_after_it():
    """A unique answer is not denied at the settle time while the receivers' arrivals were not
    polled after the paths failed; once they were (nothing grew), it is."""
    r, t0 = FailureReactor(TOPO, settle_ns=SETTLE, arrival_polls=True), 1_000 * MS
    slow_receiver(r, t0)
    r.polled("h2-0", t0 - 5 * MS)  # a window that began before the failures judges nothing
    assert r.decide(t0 + SETTLE) == []
    r.polled("h2-0", t0 + 2 * MS)
    (action,) = r.decide(t0 + SETTLE + MS)
    assert action.links == (HOST_LINK_H20,)


def test_with_arrival_polls_and_no_poll_at_all_the_evidence_is_judged_at_the_ambiguous_wait():
    r, t0 = FailureReactor(TOPO, settle_ns=SETTLE, arrival_polls=True), 1_000 * MS
    slow_receiver(r, t0)
    assert r.decide(t0 + 3 * SETTLE - 1) == []
    (action,) = r.decide(t0 + 3 * SETTLE)
    assert action.links == (HOST_LINK_H20,)
