"""examples/packet-tests, a user-style project, runs on every target present and passes; its
deliberately failing example reports a field diff and the folder of its pcaps
(docs/packet-tests.md, "Reading a failure")."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from scapy.layers.inet6 import IPv6
from scapy.utils import rdpcap

from mrckit import netns
from mrckit.switch.ebpf_target import remove_pins
from mrckit.testing import LOCAL_TARGETS, skip_reason

from support.paths import ROOT

EXAMPLES = ROOT / "examples" / "packet-tests"
pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _root():
    if os.geteuid() != 0:
        pytest.skip("needs root: network namespaces, XDP and raw sockets")


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    # From outside the clone, with the project's own pytest.ini: nothing of the repo's config.
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--basetemp={tmp_path}/t",
                           "-rs", *args], cwd=tmp_path, capture_output=True, text=True, timeout=1200)


def test_the_example_project_passes_on_every_target_present(tmp_path):
    proc = _pytest(tmp_path, "-v", str(EXAMPLES))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    summary = proc.stdout.strip().splitlines()[-1]
    assert " failed" not in summary and " passed" in summary
    for target in LOCAL_TARGETS:                   # each target present ran the uN shift
        if skip_reason(target) is None:
            assert f"test_srv6_switch.py::test_un_shift[{target}] PASSED" in proc.stdout


def test_the_failing_example_shows_the_field_diff_and_the_pcaps(tmp_path):
    proc = _pytest(tmp_path, str(EXAMPLES / "failing_example.py"), "--mrc-target", "ebpf")
    out = proc.stdout
    assert proc.returncode == 1, out[-4000:]
    assert "IPv6.hlim: expected 62, got 63" in out
    assert "-  hlim      = 62" in out and "+  hlim      = 63" in out
    assert "session.py" not in out            # the traceback shows the test's line, not ours
    (folder,) = re.findall(r"pcaps: (\S+)", out)
    got = rdpcap(str(Path(folder) / "port3.pcap"))
    assert len(got) == 1 and got[0][IPv6].hlim == 63
    assert rdpcap(str(Path(folder) / "expected.pcap"))[0][IPv6].hlim == 62
    assert len(rdpcap(str(Path(folder) / "sent.pcap"))) == 1


def test_keep_leaves_the_failed_switch_for_debugging_and_says_how_to_remove_it(tmp_path):
    proc = _pytest(tmp_path, str(EXAMPLES / "failing_example.py"), "--mrc-target", "ebpf", "--mrc-keep")
    kept = re.search(r"kept the ebpf switch of a failed test for debugging: namespaces (\S+) \(switch\) and (\S+) "
                     r"\(tester\).*XDP switch (\S+), maps pinned in (\S+)", proc.stdout)
    assert proc.returncode == 1 and kept, proc.stdout[-3000:]
    sw, tester, name, pins = kept.groups()
    try:
        assert netns.exists(sw) and netns.exists(tester)
        assert Path(pins).is_dir()
        assert "sp3" in netns.run(["ip", "-o", "link", "show", "sp3"], ns=sw).stdout.decode()
    finally:                                   # leave no trace: what the message says to remove
        netns.delete(sw)
        netns.delete(tester)
        remove_pins(name)
