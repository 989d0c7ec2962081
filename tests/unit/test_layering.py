"""Design section 2: imports point downward only, and only ``mrckit.cli`` parses arguments or
prints for humans. Read from the source with ``ast`` (imports inside functions count too)."""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "controller" / "mrckit"

# The base layer (docs/architecture.md, "Layering"): the shared exception base, the network
# namespace helpers and where the shipped files are (package resources). Every layer but wire, endpoint and proto may import it; it imports nothing
# above itself.
BASE = {"errors", "netns", "resources"}

# Layer -> the mrckit modules it may import besides its own (a prefix allows submodules).
ALLOWED = {
    "wire": set(),
    "topology": {"wire", "errors"},
    "bpf": {"errors"},
    "endpoint": {"wire"},
    "proto": set(),
    "switch": {"bpf", "wire", "proto", "topology.entries", "topology.model", "errors", "netns",
               "resources"},
    "host": {"bpf", "wire", "proto", "topology.entries", "topology.model", "errors", "netns"},
    # control talks to switches and hosts only over gRPC: no switch, host, bpf or netns.
    "control": {"topology", "wire", "proto", "errors", "resources"},
    # packet tests of a switch (docs/packet-tests.md): switch targets and a tester, never the
    # controller, the emulator or the applications.
    "testing": {"switch", "bpf", "wire", "topology.entries", "topology.model", "errors", "netns", "resources"},
    "__init__": set(),
    "errors": set(),
    "netns": {"errors"},
    "resources": {"errors"},
}
# fabric composes everything but the CLI and the applications on it (apps); apps compose
# everything but the CLI; the CLI may import anything.
ANYTHING_BUT_CLI = {"fabric", "apps"}

# Modules outside mrckit.cli that are processes of their own (``python -m``) and so own their
# argv and stdout. Each must have a ``__main__`` guard or be a ``__main__.py``.
ENTRY_POINTS = {
    "wire/gen.py": "developer tool `python -m mrckit.wire.gen`, named in the generated C/P4 headers",
    "proto/gen.py": "developer tool `python -m mrckit.proto.gen`, named in host_agent.proto",
    "host/gen.py": "developer tool `python -m mrckit.host.gen`, named in ebpf/host/consts_gen.h",
    "switch/p4runtime/pipeline_doc.py": "developer tool `python -m mrckit.switch.p4runtime.pipeline_doc`, named in "
                                        "docs/p4runtime.md",
    "fabric/flap.py": "child process that mrckit.fabric.faultctl starts to flap a link",
    "apps/demo/worker.py": "child process of `mrc demo`, one per endpoint namespace",
    "apps/traffic/worker.py": "child process of `mrc traffic`, one per host namespace",
    "switch/p4runtime/__main__.py": "the eBPF P4Runtime server process",
}
ARG_PARSERS = {"argparse", "optparse", "getopt", "click"}
# Besides the CLI, the one module that reads options and prints for humans: the pytest plugin of
# mrckit.testing (its --mrc-* options, the kept namespaces it reports; docs/architecture.md).
HUMAN_FACING = {"testing/plugin.py": "pytest plugin of mrckit.testing (pytest11 entry point)"}


def _modules():
    return sorted(p for p in PKG.rglob("*.py") if "obj" not in p.parts)


def _rel(path: Path) -> str:
    return path.relative_to(PKG).as_posix()


def _layer(rel: str) -> str:
    return rel.split("/")[0].removesuffix(".py")


def _package(path: Path) -> tuple[str, ...]:
    """The package of a module under mrckit, e.g. ``("host",)`` for host/agent.py."""
    return path.relative_to(PKG).parts[:-1]


def _imports(source: str, package: tuple[str, ...]) -> set[str]:
    """Every module ``source`` (in mrckit ``package``) imports, absolute, ``mrckit.`` stripped."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[:len(package) - (node.level - 1)])
                mod = ".".join(["mrckit", *base] + ([node.module] if node.module else []))
            else:
                mod = node.module
            if mod == "mrckit" or (not node.module and node.level):
                out |= {f"{mod}.{a.name}" for a in node.names}  # "from .. import netns"
            else:
                out.add(mod)
    return {m.removeprefix("mrckit.") for m in out}


def _ours(path: Path) -> set[str]:
    top = {p.name.removesuffix(".py") for p in PKG.iterdir() if p.suffix == ".py" or p.is_dir()}
    return {m for m in _imports(path.read_text(), _package(path)) if m.split(".")[0] in top}


def _violations(rel: str, ours: set[str]) -> list[str]:
    layer = _layer(rel)
    if layer == "cli":
        return []
    if layer in ANYTHING_BUT_CLI:
        # the applications (apps) stand on the emulator (fabric), never the reverse
        above = {"cli", "apps"} if layer == "fabric" else {"cli"}
        return sorted(m for m in ours if m.split(".")[0] in above)
    allowed = ALLOWED[layer]
    return sorted(m for m in ours if m.split(".")[0] != layer
                  and not any(m == a or m.startswith(a + ".") for a in allowed))


def _private(rel: str, ours: set[str]) -> list[str]:
    """The private modules (``_name``) of other packages that the module ``rel`` imports."""
    package = rel.rsplit("/", 1)[0].replace("/", ".") + "." if "/" in rel else ""
    private = [m for m in ours if any(p.startswith("_") and p != "__init__" for p in m.split("."))]
    return sorted(m for m in private if not (package and m.startswith(package)))


@pytest.mark.parametrize("path", _modules(), ids=_rel)
def test_imports_point_downward(path):
    rel = _rel(path)
    assert _layer(rel) in ALLOWED or _layer(rel) in ANYTHING_BUT_CLI | {"cli"}, (
        f"{rel}: a new top-level module; give it a layer in test_layering.ALLOWED")
    bad = _violations(rel, _ours(path))
    assert not bad, f"{rel} imports {bad}: against design section 2 ({_layer(rel)} may import {ALLOWED.get(_layer(rel))})"


# The emulator's own modules: namespaces, links, switches, agents, processes, faults, state and
# teardown. An application on the fabric (the demo, its reports and plots, traffic) goes under
# apps/, which fabric may not import; a new module here must be emulator machinery.
FABRIC_MODULES = {"__init__", "build", "containerlab", "fabric", "faultctl", "faults", "flap", "hostref",
                  "linkstate", "nodes", "parallel", "procs", "restart", "state", "teardown"}


def test_fabric_holds_only_the_emulator():
    found = {p.stem for p in (PKG / "fabric").glob("*.py")}
    assert found == FABRIC_MODULES, (
        f"mrckit/fabric has {sorted(found - FABRIC_MODULES)} and lacks {sorted(FABRIC_MODULES - found)}: "
        "applications on the fabric belong in mrckit/apps; emulator parts are listed in FABRIC_MODULES")


def test_fabric_never_imports_apps():
    bad = {_rel(p): sorted(m for m in _ours(p) if m.split(".")[0] == "apps")
           for p in _modules() if _layer(_rel(p)) == "fabric"}
    assert not {k: v for k, v in bad.items() if v}, f"fabric imports the applications on it: {bad}"


@pytest.mark.parametrize("path", _modules(), ids=_rel)
def test_no_module_reaches_into_another_packages_private_modules(path):
    # A package's _modules (bpf._libbpf: raw ctypes bindings) are its own business; the others
    # use its public API (bpf.Map.id, bpf.RingBuffer, bpf.prog_map_ids...).
    bad = _private(_rel(path), _ours(path))
    assert not bad, f"{_rel(path)} imports {bad}: another package's private module; use its public API"


def test_base_layer_is_the_bottom():
    """errors and netns import nothing of mrckit above them; doctor lives in the CLI."""
    assert not (PKG / "doctor.py").exists(), "the prerequisite checks belong to the CLI (mrckit/cli/doctor_checks.py)"
    for name in BASE:
        ours = _ours(PKG / f"{name}.py")
        assert ours <= BASE, f"{name}.py imports {sorted(ours - BASE)}: the base layer imports only itself"


def _prints_or_parses(source: str) -> list[str]:
    found = [f"import {m}" for m in _imports(source, ()) if m in ARG_PARSERS or m.startswith("click.")]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in (
                "print", "Console", "addoption", "getoption", "write_line"):
            found.append(f"{ast.unparse(node.func)}() on line {node.lineno}")
        if isinstance(node, ast.Attribute) and ast.unparse(node) in ("sys.argv", "sys.stdout.write",
                                                                      "sys.stderr.write"):
            found.append(f"{ast.unparse(node)} on line {node.lineno}")
    return found


@pytest.mark.parametrize("path", [p for p in _modules() if _layer(_rel(p)) != "cli" and _rel(p) not in ENTRY_POINTS
                                  and _rel(p) not in HUMAN_FACING], ids=_rel)
def test_only_cli_prints_or_parses_arguments(path):
    found = _prints_or_parses(path.read_text())
    assert not found, f"{_rel(path)}: {found}: only mrckit/cli/ parses arguments or prints for humans"


@pytest.mark.parametrize("rel", sorted(ENTRY_POINTS))
def test_entry_points_are_processes(rel):
    path = PKG / rel
    text = path.read_text()
    assert path.name == "__main__.py" or 'if __name__ == "__main__":' in text, (
        f"{rel} is listed as a process entry point ({ENTRY_POINTS[rel]}) but has no __main__ guard")


def test_checker_catches_violations():
    """The rules above can fail: upward imports, prints and argument parsing are reported."""
    assert _violations("wire/x.py", {"topology.model"}) == ["topology.model"]
    assert _violations("control/x.py", {"host.config"}) == ["host.config"]
    assert _violations("switch/x.py", {"topology.compile"}) == ["topology.compile"]
    assert _violations("fabric/x.py", {"cli.demo"}) == ["cli.demo"]
    assert _violations("fabric/x.py", {"apps.demo.report", "fabric.state"}) == ["apps.demo.report"]
    assert _violations("apps/demo/x.py", {"fabric.faults", "control.status"}) == []
    assert _violations("host/x.py", {"topology.model", "wire.ev"}) == []
    assert _private("switch/p4runtime/backend.py", {"bpf._libbpf", "bpf.maps"}) == ["bpf._libbpf"]
    assert _private("bpf/maps.py", {"bpf._libbpf"}) == []
    assert _private("endpoint/native/state.py", {"endpoint.native._lib"}) == []
    assert _imports("from .. import netns\nfrom .maps import X\n", ("host",)) == {"netns", "host.maps"}
    assert _imports("def f():\n    from ..control import Controller\n", ("fabric",)) == {"control"}
    src = "import argparse\nimport sys\nprint('hi')\nsys.stdout.write('x')\nn = len(sys.argv)\nrich.Console()\n"
    assert len(_prints_or_parses(src)) == 5
    assert len(_prints_or_parses("config.getoption('x')\nreporter.write_line('y')\n")) == 2
    assert _prints_or_parses((PKG / "testing" / "plugin.py").read_text()), "the plugin is human-facing"
