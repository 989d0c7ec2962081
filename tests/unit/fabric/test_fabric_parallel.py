"""Bring-up steps on threads (mrckit.fabric.parallel.each): every item runs once, progress
counts up to the total, and a failure stops what has not started and is raised once the
running items are done (so teardown never races a thread still making something)."""

import threading
import time

import pytest

from mrckit.fabric.parallel import WORKERS, each


def test_every_item_runs_once_and_progress_reaches_the_total():
    seen, calls = [], []
    lock = threading.Lock()

    def work(item):
        with lock:
            seen.append(item)

    each("ports", work, range(50), lambda step, done, total: calls.append((step, done, total)))
    assert sorted(seen) == list(range(50))
    assert calls[0] == ("ports", 0, 50) and calls[-1] == ("ports", 50, 50)
    assert [d for _, d, _ in calls] == sorted(d for _, d, _ in calls)


def test_a_failure_cancels_the_rest_and_waits_for_the_running():
    started, finished = [], []
    lock = threading.Lock()

    def work(item):
        with lock:
            started.append(item)
        if item == 0:
            raise ValueError("item 0 failed")
        time.sleep(0.05)
        with lock:
            finished.append(item)

    with pytest.raises(ValueError, match="item 0 failed"):
        each("switch setup", work, range(10 * WORKERS))
    running_at_raise = set(started)
    assert len(running_at_raise) < 10 * WORKERS  # the queued items never ran
    assert set(finished) == running_at_raise - {0}  # the running ones were waited for
