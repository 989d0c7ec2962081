"""The suite's closing line counts the skipped tests by reason (tests/conftest.py)."""

from pathlib import Path

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"


def test_skips_are_counted_by_reason_in_one_line_above_the_closing_count(pytester):
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_some="""
        import pytest

        @pytest.mark.parametrize("i", range(3))
        def test_bmv2(i):
            pytest.skip("simple_switch_grpc not found on PATH or in /opt/p4tools/bin")

        def test_p4c():
            pytest.skip("p4c-bm2-ss not found on PATH or in /opt/p4tools/bin")

        def test_runs():
            pass
    """)
    # A subprocess: the conftest cleans up namespaces under its own pid's prefix at exit.
    result = pytester.runpytest_subprocess("-ra")
    result.assert_outcomes(passed=1, skipped=4)
    lines = [line for line in result.outlines if line.strip()]
    assert lines[-2] == ("skipped by reason (4): "
                         "3 × simple_switch_grpc not found on PATH or in /opt/p4tools/bin; "
                         "1 × p4c-bm2-ss not found on PATH or in /opt/p4tools/bin")


def test_no_line_when_nothing_is_skipped(pytester):
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_some="def test_runs():\n    pass\n")
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1)
    assert not any("skipped by reason" in line for line in result.outlines)
