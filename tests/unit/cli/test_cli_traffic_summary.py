"""The one-line traffic summary `mrc fabric check` prints: the per-plane figures are packets
sent (the senders' dataplane counts), so they are labelled that way next to received/sent."""

from mrckit.apps.pairwise import PairResult, summary


def test_per_plane_figures_are_labelled_as_sent():
    results = [PairResult("h0-0", "h1-0", sent=100, received=96, per_plane={0: 50, 1: 50}),
               PairResult("h1-0", "h0-0", sent=100, received=100, per_plane={0: 49, 1: 51})]
    assert summary(results) == ("1/2 host pairs OK; 196/200 packets received; "
                                "sent per plane: plane 0: 99, plane 1: 101")
