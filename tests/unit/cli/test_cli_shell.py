"""`mrc shell` refuses an address where no P4Runtime server answers, in one line (exit 2),
instead of letting p4runtime-shell print its CRITICAL log lines and exit 0."""

import socket
import subprocess
import sys

MRC = [sys.executable, "-c", "import sys; from mrckit.cli import main; sys.exit(main())"]


def test_missing_socket_is_one_clear_line(tmp_path):
    sock = tmp_path / "gone.sock"
    proc = subprocess.run(MRC + ["shell", f"unix:{sock}"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert f"the socket {sock} does not exist" in proc.stderr
    assert "CRITICAL" not in proc.stderr and "Traceback" not in proc.stderr


def test_silent_server_is_refused_after_the_timeout(tmp_path):
    # A unix socket that accepts but never speaks HTTP/2: the channel never becomes ready.
    path = tmp_path / "mute.sock"
    with socket.socket(socket.AF_UNIX) as srv:
        srv.bind(str(path))
        proc = subprocess.run(MRC + ["shell", f"unix:{path}"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "no P4Runtime server answers" in proc.stderr and "Traceback" not in proc.stderr
