"""`mrc doctor`: real checks on this machine, the required/warning split, JSON and exit codes."""

import json
import os

import pytest
from click.testing import CliRunner

from mrckit import bpf, doctor, netns
from mrckit.switch import bmv2
from mrckit.cli import main

BULLETS = {"XDP BPF_PROG_TEST_RUN", "XDP/tc attach on veth", "clang -target bpf", "libbpf",
           "bpftool", "seg6local End next-csid", "p4c-bm2-ss", "simple_switch_grpc",
           "Python packages", "bpffs", "BPF objects"}


@pytest.fixture(scope="module")
def checks():
    if os.geteuid() != 0:
        pytest.skip("needs root: the doctor loads BPF and creates a namespace")
    return doctor.run_checks()


def test_every_prerequisite_is_checked(checks):
    names = [c.name for c in checks]
    assert BULLETS <= set(names)
    assert len(names) == len(set(names))


def test_kernel_checks_really_ran_here(checks):
    by_name = {c.name: c for c in checks}
    assert by_name["root"].ok and by_name["libbpf"].ok and by_name["bpffs"].ok
    assert by_name["XDP BPF_PROG_TEST_RUN"].ok, by_name["XDP BPF_PROG_TEST_RUN"].detail
    assert "retval 2" in by_name["XDP BPF_PROG_TEST_RUN"].detail  # XDP_PASS came back
    assert by_name["XDP/tc attach on veth"].ok, by_name["XDP/tc attach on veth"].detail
    assert "native" in by_name["XDP/tc attach on veth"].detail
    # Design section 9: this kernel and bookworm's iproute2 accept next-csid.
    assert by_name["seg6local End next-csid"].ok, by_name["seg6local End next-csid"].detail
    assert by_name["Python packages"].ok, by_name["Python packages"].detail


def test_doctor_leaves_no_namespace(checks):
    assert netns.list_prefix("mrcdoc") == []


def test_p4_tools_only_warn(checks):
    by_name = {c.name: c for c in checks}
    for tool in ("p4c-bm2-ss", "simple_switch_grpc"):
        assert by_name[tool].required is False
        if not by_name[tool].ok:
            assert by_name[tool].status == "warn" and "/opt/p4tools" in by_name[tool].fix


def test_demo_ready_follows_required_checks():
    ok = doctor.Check("a", True, True, "")
    warn = doctor.Check("b", False, False, "", "fix b")
    missing = doctor.Check("c", False, True, "", "fix c")
    assert (ok.status, warn.status, missing.status) == ("ok", "warn", "missing")
    assert doctor.demo_ready([ok, warn]) is True
    assert doctor.demo_ready([ok, warn, missing]) is False


def test_tool_found_under_opt_p4tools(tmp_path, monkeypatch):
    tool = tmp_path / "simple_switch_grpc"
    tool.write_text("#!/bin/sh\necho 'simple_switch_grpc 1.15.0'\n")
    tool.chmod(0o755)
    # find_tool lives in mrckit.switch.bmv2; the doctor names the same folder in its message.
    monkeypatch.setattr(bmv2, "P4TOOLS_BIN", str(tmp_path))
    monkeypatch.setattr(doctor, "P4TOOLS_BIN", str(tmp_path))
    monkeypatch.setenv("PATH", "/nonexistent")
    check = doctor.check_tool("simple_switch_grpc", required=False, version_args=["--version"],
                              fix=doctor.P4_FIX)
    assert check.ok and "1.15.0" in check.detail and str(tmp_path) in check.detail
    absent = doctor.check_tool("p4c-bm2-ss", required=False, version_args=["--version"], fix=doctor.P4_FIX)
    assert absent.status == "warn" and "not found" in absent.detail


def test_unbuilt_objects_are_missing_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(bpf, "OBJ_DIR", tmp_path)
    check = doctor.check_objects()
    assert check.status == "missing" and "make bpf" in check.fix
    assert "mrc_switch" in check.detail


def test_missing_clang_is_required_only_without_objects(tmp_path, monkeypatch):
    monkeypatch.setattr(doctor.shutil, "which", lambda name: None)
    built, _ = doctor.check_clang(str(tmp_path), objects_built=True)
    unbuilt, obj = doctor.check_clang(str(tmp_path), objects_built=False)
    assert (built.status, unbuilt.status, obj) == ("warn", "missing", None)
    assert "apt-get install" in unbuilt.fix


def test_clang_compiles_a_real_object(tmp_path):
    if not doctor.shutil.which("clang"):
        pytest.skip("clang not installed")
    check, obj = doctor.check_clang(str(tmp_path), objects_built=True)
    assert check.ok, check.detail
    with open(obj, "rb") as f:
        assert f.read(4) == b"\x7fELF"


def test_cli_json_and_exit_code(checks):
    result = CliRunner().invoke(main, ["doctor", "--json"])
    report = json.loads(result.output)
    assert {c["name"] for c in report["checks"]} >= BULLETS
    assert all(c["status"] in ("ok", "warn", "missing") for c in report["checks"])
    missing = [c["name"] for c in report["checks"] if c["status"] == "missing"]
    assert report["demo_ready"] is (not missing)
    assert result.exit_code == (0 if report["demo_ready"] else 1)


def test_cli_table_names_what_is_missing(monkeypatch, tmp_path, checks):
    monkeypatch.setattr(bpf, "OBJ_DIR", tmp_path)  # pretend `make bpf` was never run
    result = CliRunner().invoke(main, ["doctor"], terminal_width=200)
    assert result.exit_code == 1
    assert "BPF objects" in result.output and "make bpf" in result.output
    assert "not ready" in result.output
