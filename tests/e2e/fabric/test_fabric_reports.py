"""`mrc fabric down` removes a fabric's link-report file (`<status dir>/<name>.links.jsonl`),
also when nothing else of the fabric is left, and `--all` removes every report file whose
controller is not running (nothing else would ever remove them)."""

import os

from click.testing import CliRunner

from mrckit.cli import main
from mrckit.control import report_link, reports_path
from mrckit.fabric import teardown


def _name(tag):
    return f"rp{tag}{os.getpid() % 100000}"


def test_fabric_down_removes_a_leftover_report_file():
    name = _name("a")
    report_link(name, "p0/t0-1/t1-1", up=False, source="test")
    assert reports_path(name).exists()
    out = CliRunner().invoke(main, ["fabric", "down", name])
    assert out.exit_code == 0, out.output
    assert "removed its leftover link reports" in out.output
    assert not reports_path(name).exists()
    again = CliRunner().invoke(main, ["fabric", "down", name])  # nothing left: the usual error
    assert again.exit_code == 2 and f"no fabric named {name!r} is up" in again.output


def test_down_all_removes_report_files_whose_controller_is_not_running():
    name = _name("b")
    report_link(name, "p0/t0-1/t1-1", up=False, source="test")
    assert name in teardown.stale_reports()
    assert not reports_path(name).exists()
