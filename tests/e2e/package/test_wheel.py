"""The package stands on its own: a wheel built from the clone compiles and ships the BPF
objects, the native endpoint library and p4c's outputs, is tagged for this platform, and
``mrc doctor`` run from it, outside the clone, finds them all (docs/packaging.md)."""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from support.paths import ROOT

pytestmark = pytest.mark.slow

EXAMPLES = ROOT / "examples" / "packet-tests"
SHIPPED = ["mrckit/bpf/obj/mrc_switch.bpf.o", "mrckit/bpf/obj/mrc_host.bpf.o", "mrckit/bpf/obj/mrc_fault.bpf.o",
           "mrckit/endpoint/native/libmrcep.so", "mrckit/p4/mrc_switch.json", "mrckit/p4/mrc_switch.p4info.txtpb"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build_dir = ROOT / "build"           # setuptools' in-tree build folder: ours to remove if new
    existed = build_dir.exists()
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(out), str(ROOT)], capture_output=True, text=True, timeout=600)
    if not existed:
        shutil.rmtree(build_dir, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (found,) = out.glob("mrckit-*.whl")
    return found


@pytest.fixture(scope="module")
def site(wheel, tmp_path_factory) -> Path:
    """The wheel installed into a folder of its own; the dependencies come from this venv."""
    target = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                           str(wheel)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return target


def _run_outside(site: Path, cwd: Path, code: str) -> subprocess.CompletedProcess:
    # PYTHONPATH puts the installed wheel before this venv's editable mrckit.
    env = dict(os.environ, PYTHONPATH=str(site))
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def test_the_wheel_is_platform_specific_and_ships_the_dataplanes(wheel):
    assert wheel.name.endswith(f"-py3-none-linux_{os.uname().machine}.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        meta = zf.read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
    assert "Root-Is-Purelib: false" in meta
    assert set(SHIPPED) <= names


def test_the_installed_package_finds_its_files_without_the_clone(site, tmp_path):
    code = ("import json, mrckit.resources as r, mrckit.bpf as b, mrckit.switch.bmv2 as s;"
            "from mrckit.endpoint import native;"
            "print(json.dumps([str(r.package_dir()), str(b.object_path('mrc_switch')), str(s.DEFAULT_JSON),"
            " native.available()]))")
    proc = _run_outside(site, tmp_path, code)
    assert proc.returncode == 0, proc.stderr
    package, obj, program, native_missing = json.loads(proc.stdout)
    assert Path(package) == site / "mrckit"
    assert Path(obj).is_file() and Path(obj).is_relative_to(site)
    assert Path(program).is_file() and Path(program).is_relative_to(site)
    assert native_missing is None


@pytest.mark.root
def test_mrc_doctor_runs_from_the_installed_wheel(site, tmp_path, need_root):
    code = "import sys; from mrckit.cli import main; sys.exit(main(['doctor', '--json']))"
    proc = _run_outside(site, tmp_path, code)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    for name in ("BPF objects", "P4 program", "native endpoint", "load mrc_switch"):
        assert checks[name]["ok"], checks[name]
    assert str(site) in checks["BPF objects"]["detail"] and str(site) in checks["P4 program"]["detail"]


def test_the_wheel_registers_the_pytest_plugin(wheel):
    with zipfile.ZipFile(wheel) as zf:
        entry_points = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert "[pytest11]" in entry_points and "mrckit = mrckit.testing.plugin" in entry_points


@pytest.mark.root
def test_the_example_packet_tests_pass_against_the_installed_wheel(site, tmp_path, need_root):
    where = _run_outside(site, tmp_path, "import mrckit.testing.plugin as p; print(p.__file__)")
    assert Path(where.stdout.strip()).is_relative_to(site), where.stdout + where.stderr
    env = dict(os.environ, PYTHONPATH=str(site))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--basetemp={tmp_path}/t",
                           "--mrc-target", "ebpf", "-v", str(EXAMPLES)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "test_srv6_switch.py::test_un_shift[ebpf] PASSED" in proc.stdout
