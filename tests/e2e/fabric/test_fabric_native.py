"""The native endpoint against the Python one across the default fabric (2 planes, eBPF
switches, host dataplanes spraying over EVs): 64 MiB each way with `mrc write`/`mrc listen
--endpoint`, the SHA-256 of source and region compared."""

import os
import re
import subprocess
import time

import pytest
from support.fabric_helpers import RUN_PREFIX, controller_args, fabric_name, leftovers

from mrckit.endpoint.native import available
from mrckit.fabric.fabric import Fabric
from mrckit.fabric.procs import child_env, mrc_argv
from mrckit.topology import generate_clos

pytestmark = pytest.mark.skipif(available() is not None, reason=str(available()))


@pytest.fixture(scope="module")
def default_fabric():
    """A default fabric of its own: writes change the agents' EV states, which the session's
    shared fabric must not see."""
    if os.geteuid() != 0:
        pytest.skip("needs root: network namespaces and BPF")
    fab = Fabric.up(generate_clos(), name=fabric_name(__name__), target="ebpf", prefix=RUN_PREFIX,
                    controller_args=controller_args())
    yield fab
    fab.down()
    assert leftovers(RUN_PREFIX + fab.name, fab.name) == {}


def _sha(text: str) -> str:
    return re.search(r"^sha256 ([0-9a-f]{64})$", text, re.M).group(1)


@pytest.mark.parametrize("writer_impl,listener_impl", [("native", "python"), ("python", "native")],
                         ids=["native-to-python", "python-to-native"])
def test_64mib_across_the_default_fabric(default_fabric, tmp_path, writer_impl, listener_impl):
    name = default_fabric.name
    log = tmp_path / "listen.err"
    with open(log, "wb") as err:
        listener = subprocess.Popen(mrc_argv("listen", "h2-1", "--fabric", name, "--size", "64M", "--timeout", "240",
                                             "--endpoint", listener_impl),
                                    stdout=subprocess.PIPE, stderr=err, text=True, env=child_env())
    try:
        end = time.monotonic() + 60
        while "listening on" not in log.read_text() and listener.poll() is None and time.monotonic() < end:
            time.sleep(0.1)
        assert "listening on" in log.read_text(), log.read_text()
        # no retry limit: the native 262 µs RTO must not fail the QP on a loaded machine
        writer = subprocess.run(mrc_argv("write", "h0-0", "h2-1", "64M", "--fabric", name, "--timeout", "240",
                                         "--endpoint", writer_impl, "--exp-retries", "25"),
                                capture_output=True, text=True, env=child_env(), timeout=300)
        assert writer.returncode == 0, writer.stderr
        out, _ = listener.communicate(timeout=120)
    finally:
        if listener.poll() is None:
            listener.kill()
            listener.wait()
    assert listener.returncode == 0, log.read_text()
    assert _sha(writer.stdout) == _sha(out)
    assert "67108864" in out
