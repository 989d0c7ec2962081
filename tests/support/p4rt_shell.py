"""The real p4runtime-shell, run by its own virtualenv's Python as its own process on the
script ``p4rt_shell_session.py`` (one step a run), its result parsed from its last line."""

import json
import subprocess
from pathlib import Path

from support.paths import DEVICE_CONFIG, P4INFO, ROOT

SHELL_PYTHON = ROOT / ".venv-p4rt/bin/python"
SESSION = Path(__file__).with_name("p4rt_shell_session.py")


def shell(address: str, step: str, tmp_path: Path) -> dict:
    """Run session step ``step`` against the P4Runtime server at ``address``; its RESULT as a
    dict. Fails the test (with the shell's stderr) when the session exits non-zero."""
    blob = tmp_path / "device_config.bin"
    blob.write_bytes(DEVICE_CONFIG)
    proc = subprocess.run([str(SHELL_PYTHON), str(SESSION), address, str(P4INFO), str(blob), step],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])
