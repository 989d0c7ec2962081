"""`mrc` starts without loading the heavy libraries, and the --help defaults that the CLI
repeats (to avoid those imports) agree with the library's own."""

import json
import subprocess
import sys

from click.testing import CliRunner

HEAVY = ("finsy", "grpc", "scapy", "numpy")


def _loaded_after(code: str) -> list[str]:
    """The HEAVY top-level packages in sys.modules after running ``code`` in a fresh interpreter."""
    probe = f"import sys, json\n{code}\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout
    return [m for m in HEAVY if m in json.loads(out.splitlines()[-1])]


def test_import_cli_loads_no_heavy_package():
    assert _loaded_after("import mrckit.cli") == []


def test_help_loads_no_heavy_package():
    code = ("from click.testing import CliRunner\nimport mrckit.cli\n"
            "r = CliRunner().invoke(mrckit.cli.main, ['--help'])\nassert r.exit_code == 0, r.output")
    assert _loaded_after(code) == []


def test_probe_sees_heavy_imports():
    # The probe itself must be able to fail: a heavy import is reported.
    assert "numpy" in _loaded_after("import numpy")


def test_controller_defaults_match_library():
    from mrckit.cli import controller as cli_controller
    from mrckit.control.reactor import SETTLE_NS
    from mrckit.control.client import RUN_DIR

    assert cli_controller.SETTLE_MS * 1e6 == SETTLE_NS
    assert cli_controller.RUN_DIR == str(RUN_DIR)


def test_topo_defaults_match_library():
    from mrckit.cli import topo as cli_topo
    from mrckit.topology import compile as tcompile
    from mrckit.topology import generate

    for name in ("DEFAULT_PLANES", "DEFAULT_SPINES", "DEFAULT_LEAVES", "DEFAULT_HOSTS_PER_LEAF", "DEFAULT_MTU"):
        assert getattr(cli_topo, name) == getattr(generate, name), name
    assert cli_topo.TARGETS == tcompile.TARGETS


def test_topo_gen_uses_its_defaults():
    from mrckit.cli import main

    from mrckit.topology import dumps_topology, generate_clos

    r = CliRunner().invoke(main, ["topo", "gen"])
    assert r.exit_code == 0, r.output
    assert r.output == dumps_topology(generate_clos())


def test_ctrl_c_while_the_commands_load_is_one_line_and_exit_130():
    # A KeyboardInterrupt raised by the import of one command module, as a Ctrl-C there would.
    code = ("import sys\n"
            "class Interrupt:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'mrckit.cli.fabric':\n"
            "            raise KeyboardInterrupt\n"
            "sys.meta_path.insert(0, Interrupt())\n"
            "import mrckit.cli\n"
            "print('not reached')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (out.returncode, out.stdout, out.stderr) == (130, "", "mrc: interrupted\n")
