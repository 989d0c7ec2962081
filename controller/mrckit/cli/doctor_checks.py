"""``mrc doctor``: check, for real, every prerequisite of mrckit on this machine.

Each check does the thing it vouches for: it loads the real objects (mrc_host, mrc_switch,
mrc_fault, every program) and says which failed and why, loads and runs an XDP program through
BPF_PROG_TEST_RUN, also with live frames, attaches XDP and tc programs to a veth pair in a scratch namespace (removed
afterwards, also on error or Ctrl-C), compiles a tiny program with ``clang -target bpf``, asks
the kernel to accept a ``seg6local End flavors next-csid`` route, runs the P4 tools (and asks
bmv2 for ``--priority-queues``), imports the Python packages and p4runtime-shell. The minimum
kernel it states is that of the newest feature used (``KERNEL_FEATURES``).

A check is *required* when the default demo (the eBPF target) cannot run without it; anything
else that fails is a warning (p4c and bmv2 for the bmv2 target, p4runtime-shell for ``mrc
shell``, seg6local for the kernel reference tests, bpftool and tshark for debugging).
:func:`demo_ready` is False when a required check failed; the CLI then exits non-zero.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import bpf, netns
from ..errors import MrcError
from ..switch.bmv2 import DEFAULT_JSON, DEFAULT_P4INFO, P4TOOLS_BIN, find_tool

# The BPF objects the default demo loads (built by `make bpf` into mrckit/bpf/obj/).
DEMO_OBJECTS = ("mrc_switch", "mrc_host", "mrc_fault")
# import name -> distribution name, for the packages the toolkit imports at runtime.
PY_PACKAGES = {"scapy": "scapy", "grpc": "grpcio", "finsy": "finsy", "pyroute2": "pyroute2",
               "yaml": "PyYAML", "click": "click", "rich": "rich", "matplotlib": "matplotlib",
               "pydantic": "pydantic", "google.protobuf": "protobuf"}
TINY_XDP_C = """#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
SEC("xdp") int doctor_pass(struct xdp_md *ctx) { return XDP_PASS; }
char LICENSE[] SEC("license") = "GPL";
"""
APT_FIX = "apt-get install -y {pkg}   (or: make deps)"
KERNEL_FEATURES = ((5, 17, "bpf_loop, which mrc_host calls"),
                   (5, 18, "BPF_F_TEST_XDP_LIVE_FRAMES, the traffic generator's live frames"))
"""(major, minor, what) of the newest kernel features mrckit uses; the rest of what the
programs call (ring buffers 5.8, bpf_xdp_adjust_tail, tc clsact, devmaps) is older."""
MIN_KERNEL = max((major, minor) for major, minor, _ in KERNEL_FEATURES)
P4RT_SHELL_ENV = "MRC_P4RT_PYTHON"
"""Environment variable naming the python of p4runtime-shell's virtualenv (``mrc shell``)."""


@dataclass
class Check:
    """One prerequisite: ``name``, whether it is ``ok``, whether the default demo ``required``
    it, what was found or went wrong (``detail``) and how to fix it (``fix``, empty if ok)."""
    name: str
    ok: bool
    required: bool
    detail: str
    fix: str = ""

    @property
    def status(self) -> str:
        """"ok", "missing" (a required check failed) or "warn" (an optional one failed)."""
        return "ok" if self.ok else ("missing" if self.required else "warn")

    def as_dict(self) -> dict:
        return {**asdict(self), "status": self.status}


def _run(argv: list[str], timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[0] if lines else ""


# --- individual checks ---

def check_root() -> Check:
    ok = os.geteuid() == 0
    return Check("root", ok, True, "running as root" if ok else f"running as uid {os.geteuid()}",
                 "" if ok else "run as root: BPF, network namespaces and bpffs need it")


def check_kernel(release: str | None = None) -> Check:
    """The kernel is at least ``MIN_KERNEL``: every feature in ``KERNEL_FEATURES`` is there.
    The detail names the features a too-old kernel lacks."""
    release = platform.release() if release is None else release
    name = f"kernel >= {MIN_KERNEL[0]}.{MIN_KERNEL[1]}"
    try:
        version = tuple(int(x) for x in release.split("-")[0].split(".")[:2])
    except ValueError:
        return Check(name, False, True, f"cannot parse release {release!r}")
    lacking = [f"{what} ({major}.{minor})" for major, minor, what in KERNEL_FEATURES if version < (major, minor)]
    if not lacking:
        return Check(name, True, True, f"Linux {release}")
    return Check(name, False, True, f"Linux {release} lacks " + "; ".join(lacking),
                 f"run Linux {MIN_KERNEL[0]}.{MIN_KERNEL[1]} or later")


def check_libbpf() -> Check:
    try:
        return Check("libbpf", True, True, f"libbpf.so.1 {bpf.libbpf_version()}")
    except bpf.BpfError as exc:
        return Check("libbpf", False, True, str(exc), APT_FIX.format(pkg="libbpf1"))


def check_bpffs() -> Check:
    ok = bpf.bpffs_mounted()
    return Check("bpffs", ok, True, f"mounted at {bpf.BPFFS}" if ok else f"{bpf.BPFFS} is not bpffs",
                 "" if ok else f"mount -t bpf bpf {bpf.BPFFS}   (or: make bpffs)")


def check_objects() -> Check:
    missing = [n for n in DEMO_OBJECTS if not (bpf.OBJ_DIR / f"{n}.bpf.o").is_file()]
    ok = not missing
    return Check("BPF objects", ok, True,
                 f"{', '.join(DEMO_OBJECTS)} in {bpf.OBJ_DIR}" if ok else f"not built: {', '.join(missing)}",
                 "" if ok else "make bpf   (compiles ebpf/*.bpf.c into the package)")


def check_p4_program() -> Check:
    """p4c's outputs of mrc_switch.p4 ship with the package: every pipeline push sends them."""
    missing = [p.name for p in (DEFAULT_JSON, DEFAULT_P4INFO) if not p.is_file()]
    return Check("P4 program", not missing, True,
                 f"{DEFAULT_JSON.name}, {DEFAULT_P4INFO.name} in {DEFAULT_JSON.parent}" if not missing
                 else f"missing in {DEFAULT_JSON.parent}: {', '.join(missing)}",
                 "" if not missing else "make p4 in the clone, then reinstall the package")


def check_native() -> Check:
    """The native endpoint library (``libmrcep.so``) ships with the package and loads."""
    from ..endpoint import native

    why = native.available()
    if why is not None:
        return Check("native endpoint", False, False, _first_line(why),
                     "make native   (or reinstall the package: its build compiles it)")
    return Check("native endpoint", True, False, "libmrcep.so loads")


def _verifier_reason(exc: bpf.BpfError) -> str:
    """The line of a failed load that says why: the verifier's last words, else the error."""
    log = exc.log.split("-- BEGIN PROG LOAD LOG --")[-1].split("-- END PROG LOAD LOG --")[0] if exc.log else ""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip() and not ln.startswith(("processed ", "libbpf:"))]
    reason = lines[-1] if lines else _first_line(str(exc))
    if "unknown func" in reason:
        reason += f" (a helper this kernel lacks: Linux >= {MIN_KERNEL[0]}.{MIN_KERNEL[1]} has every one mrckit calls)"
    return reason


def load_programs(name: str) -> list[str]:
    """Load every program of BPF object ``name`` into the kernel, one at a time as mrckit does
    (mrc_fault's xdp and xdp.frags variants may not share its tail-call map), and unload it.
    Returns the program names. Raises BpfError naming the program that failed."""
    with bpf.BpfObject.open(name) as obj:
        names = obj.program_names()
    for prog in names:
        with bpf.BpfObject.open(name) as obj:
            for other in names:
                if other != prog:
                    obj.program(other).set_autoload(False)
            try:
                obj.load()
            except bpf.BpfError as exc:
                raise bpf.BpfError(f"program {prog}: {_verifier_reason(exc)}", errno=exc.errno, log=exc.log) from None
    return names


def check_load(name: str) -> Check:
    """Load the real object ``name`` (every program) into this kernel."""
    title = f"load {name}"
    try:
        names = load_programs(name)
    except bpf.BpfError as exc:
        return Check(title, False, True, f"{name}.bpf.o: {exc}"[:300],
                     f"see the verifier's reason; Linux >= {MIN_KERNEL[0]}.{MIN_KERNEL[1]} is needed")
    return Check(title, True, True, f"the kernel loaded {', '.join(names)}")


def check_live_frames() -> Check:
    """Run test_xdp_pass with BPF_F_TEST_XDP_LIVE_FRAMES into a scratch namespace's lo."""
    name = "XDP live frames"
    ns = netns.unique_name("mrcdoc")
    frame = bytes(6) + bytes.fromhex("020000000001") + b"\x88\xb5" + bytes(50)  # local experimental ethertype
    try:
        netns.add(ns)
        with bpf.BpfObject.open("test_xdp_pass") as obj, netns.enter(ns):
            prog = obj.load().program("xdp_pass")
            prog.test_run(frame, repeat=2, flags=bpf.BPF_F_TEST_XDP_LIVE_FRAMES,
                          ctx=bpf.XdpMd(data_end=len(frame), ingress_ifindex=1))
    except (MrcError, OSError) as exc:
        return Check(name, False, True, _first_line(str(exc)),
                     "the traffic generator needs Linux 5.18+ (BPF_F_TEST_XDP_LIVE_FRAMES)")
    finally:
        netns.delete(ns)
    return Check(name, True, True, "BPF_PROG_TEST_RUN sent live frames (into a scratch namespace's lo)")


def p4rt_shell_python() -> str:
    """Where ``mrc shell`` looks for p4runtime-shell's python: $MRC_P4RT_PYTHON, else
    ``.venv-p4rt`` next to this virtualenv (``make p4rt-shell`` makes it beside ``.venv``)."""
    beside = Path(sys.prefix).parent / ".venv-p4rt" / "bin" / "python"
    return os.environ.get(P4RT_SHELL_ENV) or str(beside)


def check_p4runtime_shell(python: str | None = None) -> Check:
    """p4runtime-shell imports in its own virtualenv (``mrc shell`` runs it there)."""
    python = p4rt_shell_python() if python is None else python
    fix = f"make p4rt-shell   (or set {P4RT_SHELL_ENV} to a python that has p4runtime-shell); only mrc shell needs it"
    if not os.access(python, os.X_OK):
        return Check("p4runtime-shell", False, False, f"no python at {python}", fix)
    probe = "import importlib.metadata as m, p4runtime_sh; print(m.version('p4runtime-shell'))"
    try:
        proc = _run([python, "-c", probe], timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("p4runtime-shell", False, False, f"{python} does not run: {exc}", fix)
    if proc.returncode != 0:
        return Check("p4runtime-shell", False, False, f"{python}: {_last_line(proc.stderr)}", fix)
    return Check("p4runtime-shell", True, False, f"p4runtime-shell {proc.stdout.strip()} ({python})")


def check_priority_queues() -> Check:
    """simple_switch_grpc takes --priority-queues: without it bmv2 drops every packet whose
    priority is not 0 ("Priority out of range"), and mrckit's launcher passes it."""
    name = "bmv2 --priority-queues"
    path = find_tool("simple_switch_grpc")
    if not path:
        return Check(name, False, False, "simple_switch_grpc not found", P4_FIX)
    try:
        proc = _run([path, "--help"], timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check(name, False, False, f"{path} does not run: {exc}", P4_FIX)
    if "--priority-queues" in proc.stdout + proc.stderr:
        return Check(name, True, False, f"{path} takes --priority-queues")
    return Check(name, False, False, f"{path} has no --priority-queues: it would drop every packet of "
                 "priority > 0 (\"Priority out of range\")",
                 "build bmv2 from current p4lang sources (with priority queues) into /opt/p4tools")


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def check_clang(workdir: str, objects_built: bool) -> tuple[Check, str | None]:
    """Compile a tiny XDP program with clang -target bpf. Returns the check and the object."""
    clang = shutil.which("clang")
    fix = APT_FIX.format(pkg="clang libbpf-dev")
    if not clang:
        return Check("clang -target bpf", False, not objects_built, "clang not on PATH", fix), None
    src, obj = os.path.join(workdir, "doctor.bpf.c"), os.path.join(workdir, "doctor.bpf.o")
    with open(src, "w") as f:
        f.write(TINY_XDP_C)
    multiarch = _run(["gcc", "-print-multiarch"]).stdout.strip() if shutil.which("gcc") else ""
    argv = [clang, "-O2", "-g", "-target", "bpf", "-c", src, "-o", obj]
    if multiarch:
        argv[1:1] = [f"-I/usr/include/{multiarch}"]
    proc = _run(argv)
    version = _first_line(_run([clang, "--version"]).stdout)
    if proc.returncode != 0:
        return Check("clang -target bpf", False, not objects_built,
                     f"{version}: compile failed: {_first_line(proc.stderr)}", fix), None
    return Check("clang -target bpf", True, not objects_built, f"{version}: compiled a tiny XDP program"), obj


def check_xdp_test_run(fallback_obj: str | None) -> Check:
    name = "XDP BPF_PROG_TEST_RUN"
    try:
        path = str(bpf.object_path("test_xdp_pass"))
        prog_name = "xdp_pass"
    except bpf.BpfError:
        if not fallback_obj:
            return Check(name, False, True, "no XDP object to load (test_xdp_pass not built, clang failed)",
                         "make bpf")
        path, prog_name = fallback_obj, "doctor_pass"
    frame = bytes(range(64))
    try:
        with bpf.BpfObject.open(path) as obj:
            res = obj.load().program(prog_name).test_run(frame, repeat=10)
    except bpf.BpfError as exc:
        return Check(name, False, True, str(exc).splitlines()[0], f"run as root on Linux {MIN_KERNEL[0]}.{MIN_KERNEL[1]}+ with BPF enabled")
    ok = res.retval == bpf.XDP_PASS and res.data == frame
    return Check(name, ok, True, f"{os.path.basename(path)}: retval {res.retval}, {res.duration_ns} ns/run"
                 if ok else f"unexpected result: retval {res.retval}, {len(res.data)} bytes out")


def _attach_in_scratch_ns(ns: str) -> str:
    """Attach XDP (native) and tc (clsact ingress+egress) on a veth pair inside ``ns``, check
    they are there, detach. Returns a summary; raises MrcError/BpfError on any failure."""
    netns.veth(ns, "mrcdoc0", ns, "mrcdoc1")
    with bpf.BpfObject.open("test_xdp_pass") as xobj, bpf.BpfObject.open("test_tc_pass") as tobj:
        xprog, tprog = xobj.load().program("xdp_pass"), tobj.load().program("tc_pass")
        with netns.enter(ns):
            try:
                mode = bpf.xdp_attach("mrcdoc0", xprog, "native")
                info = bpf.xdp_query("mrcdoc0")
                if (info.mode, info.prog_id) != ("native", xprog.id):
                    raise MrcError(f"XDP query after attach shows {info}")
                for direction in ("ingress", "egress"):
                    bpf.tc_attach("mrcdoc1", tprog, direction)
                    if bpf.tc_query("mrcdoc1", direction) != tprog.id:
                        raise MrcError(f"tc {direction} filter not found after attach")
            finally:
                bpf.xdp_detach("mrcdoc0")
                bpf.tc_hook_destroy("mrcdoc1")
    return f"XDP {mode} + tc clsact ingress/egress on veth in a scratch netns"


def check_attach() -> Check:
    name = "XDP/tc attach on veth"
    try:
        bpf.object_path("test_xdp_pass"), bpf.object_path("test_tc_pass")
    except bpf.BpfError as exc:
        return Check(name, False, True, str(exc), "make bpf")
    ns = netns.unique_name("mrcdoc")
    try:
        netns.add(ns)
        detail = _attach_in_scratch_ns(ns)
    except (MrcError, OSError) as exc:
        return Check(name, False, True, str(exc).splitlines()[0],
                     f"needs root and a kernel with XDP on veth ({MIN_KERNEL[0]}.{MIN_KERNEL[1]}+); see the detail")
    finally:
        netns.delete(ns)
    return Check(name, True, True, detail)


def check_seg6local() -> Check:
    name = "seg6local End next-csid"
    ns = netns.unique_name("mrcdoc")
    route = ["ip", "-6", "route", "add", "fcbb:bb00:100::/48", "encap", "seg6local", "action", "End",
             "flavors", "next-csid", "lblen", "32", "nflen", "16", "dev", "lo"]
    try:
        netns.add(ns)
        proc = netns.run(route, ns=ns, check=False)
        shown = netns.run(["ip", "-6", "route", "show", "fcbb:bb00:100::/48"], ns=ns, check=False)
    except MrcError as exc:
        return Check(name, False, False, str(exc), "run as root")
    finally:
        netns.delete(ns)
    ok = proc.returncode == 0 and b"next-csid" in shown.stdout
    detail = ("kernel and iproute2 accept 'End flavors next-csid lblen 32 nflen 16'" if ok else
              f"refused: {_first_line(proc.stderr.decode(errors='replace'))}")
    return Check(name, ok, False, detail, "" if ok else
                 "needs Linux 6.1+ with CONFIG_IPV6_SEG6_LWTUNNEL and iproute2 6.1+; only the "
                 "kernel reference tests use it")


def check_tool(tool: str, *, required: bool, version_args: list[str], fix: str) -> Check:
    path = find_tool(tool)
    if not path:
        where = f"PATH or {P4TOOLS_BIN}" if fix.startswith("build") else "PATH"
        return Check(tool, False, required, f"not found on {where}", fix)
    try:
        proc = _run([path, *version_args], timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check(tool, False, required, f"{path} does not run: {exc}", fix)
    out = _first_line(proc.stdout) or _first_line(proc.stderr)
    return Check(tool, True, required, f"{path}: {out}"[:120])


def check_python_packages() -> Check:
    missing, found = [], []
    for module, dist in PY_PACKAGES.items():
        try:
            importlib.import_module(module)
            found.append(f"{dist} {importlib.metadata.version(dist)}")
        except Exception as exc:  # any import failure means the package is unusable
            missing.append(f"{dist} ({type(exc).__name__})")
    ok = not missing
    return Check("Python packages", ok, True, ", ".join(found) if ok else "missing: " + ", ".join(missing),
                 "" if ok else "pip install -e '.[test]'   (or: make venv)")


P4_FIX = ("build p4c and bmv2 from the p4lang sources into /opt/p4tools; only the bmv2 target "
          "needs them")


def run_checks(progress: Callable[[str], None] | None = None) -> list[Check]:
    """Run every check in order and return the results (never raises for a failed check)."""
    checks: list[Check] = []

    def add(check: Check) -> None:
        checks.append(check)
        if progress:
            progress(check.name)

    add(check_root())
    add(check_kernel())
    add(check_libbpf())
    add(check_bpffs())
    objects = check_objects()
    add(objects)
    add(check_p4_program())
    add(check_native())
    with tempfile.TemporaryDirectory(prefix="mrc-doctor-") as workdir:
        clang, tiny_obj = check_clang(workdir, objects.ok)
        add(clang)
        headers = os.path.exists("/usr/include/bpf/libbpf.h")
        add(Check("libbpf-dev headers", headers, not objects.ok,
                  "/usr/include/bpf/libbpf.h" if headers else "missing: /usr/include/bpf/libbpf.h",
                  "" if headers else APT_FIX.format(pkg="libbpf-dev")))
        root = checks[0].ok
        add(check_xdp_test_run(tiny_obj) if root else Check("XDP BPF_PROG_TEST_RUN", False, True, "needs root", "run as root"))
    add(check_attach() if root else Check("XDP/tc attach on veth", False, True, "needs root", "run as root"))
    add(check_live_frames() if root else Check("XDP live frames", False, True, "needs root", "run as root"))
    for name in DEMO_OBJECTS:
        if root and objects.ok:
            add(check_load(name))
        else:
            add(Check(f"load {name}", False, True, "needs root" if not root else "not built",
                      "run as root" if not root else "make bpf"))
    add(check_seg6local() if root else Check("seg6local End next-csid", False, False, "needs root", "run as root"))
    for tool, pkg, args in (("ip", "iproute2", ["-V"]), ("ethtool", "ethtool", ["--version"]),
                            ("nsenter", "util-linux", ["--version"])):
        add(check_tool(tool, required=True, version_args=args, fix=APT_FIX.format(pkg=pkg)))
    add(check_tool("bpftool", required=False, version_args=["version"], fix=APT_FIX.format(pkg="bpftool")))
    add(check_tool("tshark", required=False, version_args=["--version"], fix=APT_FIX.format(pkg="tshark")))
    add(check_tool("p4c-bm2-ss", required=False, version_args=["--version"], fix=P4_FIX))
    add(check_tool("simple_switch_grpc", required=False, version_args=["--version"], fix=P4_FIX))
    add(check_priority_queues())
    add(check_p4runtime_shell())
    add(check_python_packages())
    return checks


def demo_ready(checks: list[Check]) -> bool:
    """True when every check the default (eBPF) demo needs passed."""
    return all(c.ok for c in checks if c.required)
