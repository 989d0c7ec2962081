"""`mrc doctor`: real checks on this machine, the required/warning split, JSON and exit codes."""

import json
import os

import pytest
from click.testing import CliRunner

from mrckit import bpf, netns
from mrckit.cli import doctor_checks as doctor
from mrckit.switch import bmv2
from mrckit.cli import main

BULLETS = {"XDP BPF_PROG_TEST_RUN", "XDP/tc attach on veth", "clang -target bpf", "libbpf",
           "bpftool", "seg6local End next-csid", "p4c-bm2-ss", "simple_switch_grpc",
           "Python packages", "bpffs", "BPF objects", "load mrc_host", "load mrc_switch", "load mrc_fault",
           "XDP live frames", "kernel >= 5.18", "p4runtime-shell", "bmv2 --priority-queues", "P4 program",
           "native endpoint"}


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
    # Optional (only the kernel reference uses it): some kernels are built without seg6local;
    # the check must then have tried the route and reported the refusal.
    csid = by_name["seg6local End next-csid"]
    assert not csid.required and (csid.ok or csid.detail.startswith("refused: ")), csid.detail
    assert by_name["Python packages"].ok, by_name["Python packages"].detail
    assert by_name["XDP live frames"].ok, by_name["XDP live frames"].detail
    for name in ("mrc_host", "mrc_switch", "mrc_fault"):
        assert by_name[f"load {name}"].ok, by_name[f"load {name}"].detail
    assert "mrc_host_ingress" in by_name["load mrc_host"].detail
    assert "mrc_fault_xdp_frags" in by_name["load mrc_fault"].detail  # each variant alone, as faults.py loads it


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


@pytest.mark.parametrize("release,ok,lacks", [
    ("6.1.0-18-amd64", True, ""), ("5.18.0", True, ""),
    ("5.17.3", False, "LIVE_FRAMES"), ("5.15.0-91-generic", False, "bpf_loop"),
])
def test_kernel_minimum_is_that_of_the_newest_feature(release, ok, lacks):
    check = doctor.check_kernel(release)
    assert check.name == "kernel >= 5.18" and check.ok is ok and check.required
    assert lacks in check.detail
    if not ok:
        assert "5.18" in check.fix


def test_an_object_the_verifier_refuses_is_named_with_the_reason(checks):
    check = doctor.check_load("test_reject")  # a program built to fail the verifier
    assert check.status == "missing"
    assert "test_reject.bpf.o: program " in check.detail
    reason = check.detail.split(": program ", 1)[1]
    assert ": " in reason and "libbpf" not in reason and "processed" not in reason


def _fake_tool(tmp_path, monkeypatch, script: str):
    tool = tmp_path / "simple_switch_grpc"
    tool.write_text("#!/bin/sh\n" + script + "\n")
    tool.chmod(0o755)
    monkeypatch.setattr(bmv2, "P4TOOLS_BIN", str(tmp_path))
    monkeypatch.setenv("PATH", "/nonexistent")


def test_bmv2_without_priority_queues_warns(tmp_path, monkeypatch):
    _fake_tool(tmp_path, monkeypatch, "echo 'Usage: simple_switch_grpc [options]'; echo '  --drop-port arg'")
    check = doctor.check_priority_queues()
    assert check.status == "warn" and "no --priority-queues" in check.detail and "Priority out of range" in check.detail


def test_installed_bmv2_takes_priority_queues(checks):
    if not bmv2.find_tool("simple_switch_grpc"):
        pytest.skip("bmv2 not installed")
    by_name = {c.name: c for c in checks}
    assert by_name["bmv2 --priority-queues"].ok, by_name["bmv2 --priority-queues"].detail


def test_p4runtime_shell_missing_or_broken_warns_with_the_fix(tmp_path):
    absent = doctor.check_p4runtime_shell(str(tmp_path / "nope" / "python"))
    assert absent.status == "warn" and "make p4rt-shell" in absent.fix
    without = doctor.check_p4runtime_shell(os.path.realpath(os.sys.executable))  # this venv has no p4runtime_sh
    assert without.status == "warn" and "p4runtime_sh" in without.detail


def test_p4runtime_shell_is_found_where_mrc_shell_looks(checks, monkeypatch):
    from mrckit.cli import shell
    monkeypatch.delenv(doctor.P4RT_SHELL_ENV, raising=False)
    path = doctor.p4rt_shell_python()
    if not os.access(path, os.X_OK):
        pytest.skip("make p4rt-shell was not run")
    assert shell.shell_python() == path
    by_name = {c.name: c for c in checks}
    assert by_name["p4runtime-shell"].ok and path in by_name["p4runtime-shell"].detail
