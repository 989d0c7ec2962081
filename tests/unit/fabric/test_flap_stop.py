"""The flap process's stop path: once stopped it leaves the link up and writes its window line
without waiting on the controller (a stopper that waits too little loses that line)."""

import threading

from mrckit.fabric import flap


def test_a_stop_during_a_down_half_ends_without_reporting_up():
    stop, reports = threading.Event(), []

    def report(up: bool) -> None:
        reports.append(up)
        if not up and len(reports) == 3:  # the second down: stop, as SIGTERM would
            stop.set()

    window = flap.flap([], 1000.0, stop, report)
    assert reports == [False, True, False]  # the restore reports the final up itself
    assert window.flaps == 2 and window.last_up_ns >= window.first_down_ns
    assert flap.read_window("flapping x\n" + window.line()) == window


def test_the_stopper_waits_longer_than_a_report_can_take():
    from mrckit.fabric import faultctl

    assert faultctl.FLAP_STOP_S > flap.REPORT_TIMEOUT_S + 10
