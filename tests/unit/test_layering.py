"""Design section 2: imports point downward only, and only ``mrckit.cli`` parses arguments or
prints for humans. Read from the source with ``ast`` (imports inside functions count too)."""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "controller" / "mrckit"

# Layer -> the mrckit modules it may import besides its own (a prefix allows submodules).
# ``errors`` is the shared exception base; ``netns`` the namespace helpers that switch and host
# need to open their devices.
ALLOWED = {
    "wire": set(),
    "topology": {"wire", "errors"},
    "bpf": {"errors"},
    "endpoint": {"wire"},
    "proto": set(),
    "switch": {"bpf", "wire", "proto", "topology.entries", "topology.model", "errors", "netns"},
    "host": {"bpf", "wire", "proto", "topology.entries", "topology.model", "errors", "netns"},
    # control talks to switches and hosts only over gRPC: no switch, host, bpf or netns.
    "control": {"topology", "wire", "proto", "errors"},
    "__init__": set(),
    "errors": set(),
    "netns": {"errors"},
    "doctor": {"bpf", "errors", "netns", "switch.bmv2"},
}
# fabric composes everything but the CLI and the applications on it (apps); apps compose
# everything but the CLI; the CLI may import anything.
ANYTHING_BUT_CLI = {"fabric", "apps"}

# Modules outside mrckit.cli that are processes of their own (``python -m``) and so own their
# argv and stdout. Each must have a ``__main__`` guard or be a ``__main__.py``.
ENTRY_POINTS = {
    "wire/gen.py": "developer tool `python -m mrckit.wire.gen`, named in the generated C/P4 headers",
    "proto/gen.py": "developer tool `python -m mrckit.proto.gen`, named in host_agent.proto",
    "switch/p4runtime/pipeline_doc.py": "developer tool `python -m mrckit.switch.p4runtime.pipeline_doc`, named in "
                                        "docs/p4runtime.md",
    "fabric/flap.py": "child process that mrckit.fabric.faultctl starts to flap a link",
    "fabric/demo_worker.py": "child process of the demo, one per endpoint namespace",
    "apps/traffic/worker.py": "child process of `mrc traffic`, one per host namespace",
    "switch/p4runtime/__main__.py": "the eBPF P4Runtime server process",
}
ARG_PARSERS = {"argparse", "optparse", "getopt", "click"}


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


@pytest.mark.parametrize("path", _modules(), ids=_rel)
def test_imports_point_downward(path):
    rel = _rel(path)
    assert _layer(rel) in ALLOWED or _layer(rel) in ANYTHING_BUT_CLI | {"cli"}, (
        f"{rel}: a new top-level module; give it a layer in test_layering.ALLOWED")
    bad = _violations(rel, _ours(path))
    assert not bad, f"{rel} imports {bad}: against design section 2 ({_layer(rel)} may import {ALLOWED.get(_layer(rel))})"


def _prints_or_parses(source: str) -> list[str]:
    found = [f"import {m}" for m in _imports(source, ()) if m in ARG_PARSERS or m.startswith("click.")]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in ("print", "Console"):
            found.append(f"{ast.unparse(node.func)}() on line {node.lineno}")
        if isinstance(node, ast.Attribute) and ast.unparse(node) in ("sys.argv", "sys.stdout.write",
                                                                      "sys.stderr.write"):
            found.append(f"{ast.unparse(node)} on line {node.lineno}")
    return found


@pytest.mark.parametrize("path", [p for p in _modules() if _layer(_rel(p)) != "cli" and _rel(p) not in ENTRY_POINTS],
                         ids=_rel)
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
    assert _violations("host/x.py", {"topology.model", "wire.ev"}) == []
    assert _imports("from .. import netns\nfrom .maps import X\n", ("host",)) == {"netns", "host.maps"}
    assert _imports("def f():\n    from ..control import Controller\n", ("fabric",)) == {"control"}
    src = "import argparse\nimport sys\nprint('hi')\nsys.stdout.write('x')\nn = len(sys.argv)\nrich.Console()\n"
    assert len(_prints_or_parses(src)) == 5
