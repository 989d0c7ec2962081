"""mrckit.apps.traffic: the flows each pattern makes, and the report's figures."""

import pytest

from mrckit.apps.traffic import PATTERNS, make_flows
from mrckit.apps.traffic.report import FlowResult, TrafficReport
from mrckit.apps.traffic.patterns import chunks
from mrckit.cli import traffic as cli_traffic
from mrckit.errors import MrcError

HOSTS = [f"h{i}" for i in range(6)]


def test_the_cli_lists_the_same_patterns():
    assert cli_traffic.PATTERNS == PATTERNS


def test_all_to_all_is_every_ordered_pair_once():
    flows = make_flows("all-to-all", HOSTS, 10)
    assert sorted((f.src, f.dst) for f in flows) == sorted((a, b) for a in HOSTS for b in HOSTS if a != b)
    assert [f.id for f in flows] == list(range(30))


def test_ring_sends_each_host_to_the_next():
    assert [(f.src, f.dst) for f in make_flows("ring", HOSTS, 10)] == \
        [("h0", "h1"), ("h1", "h2"), ("h2", "h3"), ("h3", "h4"), ("h4", "h5"), ("h5", "h0")]


def test_incast_k_senders_to_one_receiver():
    flows = make_flows("incast", HOSTS, 10, k=4, dst="h3")
    assert [(f.src, f.dst) for f in flows] == [("h0", "h3"), ("h1", "h3"), ("h2", "h3"), ("h4", "h3")]
    assert {f.dst for f in make_flows("incast", HOSTS, 10, k=5)} == {"h0"}


@pytest.mark.parametrize("seed", range(20))
def test_permutation_moves_every_host_and_is_seeded(seed):
    flows = make_flows("permutation", HOSTS, 10, seed=seed)
    assert sorted(f.src for f in flows) == HOSTS and sorted(f.dst for f in flows) == HOSTS
    assert all(f.src != f.dst for f in flows)
    assert flows == make_flows("permutation", HOSTS, 10, seed=seed)


@pytest.mark.parametrize("args, match", [
    (("bogus", HOSTS, 10), "pattern 'bogus'"),
    (("ring", ["h0"], 10), "at least 2 hosts"),
    (("ring", HOSTS, 0), "at least 1 byte"),
    (("incast", HOSTS, 10, {"k": 6}), "k = 6"),
    (("incast", HOSTS, 10, {"dst": "h9"}), "'h9' is not a host"),
])
def test_bad_patterns_are_refused_with_what_is_wrong(args, match):
    kwargs = args[3] if len(args) > 3 else {}
    with pytest.raises(MrcError, match=match):
        make_flows(*args[:3], **kwargs)


def _flow(i, fct_ms, ok=True):
    return FlowResult(id=i, src="a", dst="b", size=1_000_000, start_ns=0, end_ns=int(fct_ms * 1e6),
                      verified=ok, error=None if ok else "retry counter exceeded")


def test_the_summary_counts_only_verified_flows_and_takes_percentiles_of_their_fcts():
    flows = [_flow(i, ms) for i, ms in enumerate([10, 20, 30, 40])] + [_flow(4, 5, ok=False)]
    report = TrafficReport(pattern="ring", fabric="f", seed=0, started_ns=0, finished_ns=int(1e9), flows=flows)
    s = report.summary()
    assert (s.flows, s.ok, s.failed, s.bytes_verified) == (5, 4, 1, 4_000_000)
    assert s.fct_median_s == pytest.approx(0.025)
    assert s.aggregate_gbps == pytest.approx(0.032)
    # 8 Mb over 10, 20, 30 and 40 ms: 0.8, 0.4, 0.267 and 0.2 Gb/s
    assert s.goodput_median_gbps == pytest.approx((0.4 + 0.8 / 3) / 2)
    assert not report.passed
    assert any("FAILED       flow 4 a->b: retry counter exceeded" == line for line in report.lines())


def test_the_report_round_trips_through_json(tmp_path):
    report = TrafficReport(pattern="ring", fabric="f", seed=3, started_ns=1, finished_ns=2, flows=[_flow(0, 10)])
    report.write_json(tmp_path / "r.json")
    assert TrafficReport.read_json(tmp_path / "r.json") == report


@pytest.mark.parametrize("size,writes,want", [
    (10, 1, [(0, 10)]), (10, 2, [(0, 5), (5, 5)]), (10, 3, [(0, 4), (4, 4), (8, 2)]), (3, 3, [(0, 1), (1, 1), (2, 1)])])
def test_chunks_cover_the_flow_once_in_order(size, writes, want):
    assert chunks(size, writes) == want
    assert sum(n for _, n in chunks(size, writes)) == size
