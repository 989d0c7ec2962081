"""mrckit.endpoint imports only mrckit.wire (design section 2), and no scapy on the hot path."""

import ast
import pathlib
import subprocess
import sys

import mrckit.endpoint

ROOT = pathlib.Path(mrckit.endpoint.__file__).parent


def _imports(path: pathlib.Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module


def test_endpoint_imports_only_wire_and_no_scapy():
    offenders = []
    for path in sorted(ROOT.glob("*.py")):
        for name in _imports(path):
            if (name.startswith("mrckit.") and not name.startswith("mrckit.wire")) or name.startswith("scapy") \
                    or name == "mrckit.wire.layers":
                offenders.append(f"{path.name}: {name}")
    assert offenders == []


def test_importing_the_endpoint_loads_no_scapy():
    code = "import sys, mrckit.endpoint; print(sorted(m for m in sys.modules if m.startswith(('scapy', 'mrckit.'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = eval(out)
    assert not [m for m in loaded if m.startswith("scapy")]
    assert {m.split(".")[1] for m in loaded} == {"endpoint", "wire"}
