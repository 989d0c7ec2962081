"""`mrc listen` and `mrc write` as two processes in a netns pair: both exit 0 and print the
same SHA-256; user mistakes print one line and exit 2."""

import os
import re
import subprocess
import sys

import pytest

from support.endpoint_pair import ADDR_A, ADDR_B
from mrckit.endpoint.native import available

MRC = os.path.join(os.path.dirname(sys.executable), "mrc")
pytestmark = pytest.mark.root


def _mrc(ns, *args, **kw):
    return subprocess.Popen(["nsenter", f"--net=/var/run/netns/{ns}", MRC, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


_NATIVE = pytest.mark.skipif(available() is not None, reason=str(available()))
IMPL_PAIRS = [pytest.param("python", "python", id="python-to-python"),
              pytest.param("native", "python", id="native-to-python", marks=_NATIVE),
              pytest.param("python", "native", id="python-to-native", marks=_NATIVE)]


def _listen_and_write(netns_pair, writer_impl: str, listener_impl: str, *extra: str) -> tuple[str, str]:
    """Run ``mrc listen`` and ``mrc write`` of 4 MiB (``extra`` flags on both); return their
    stdouts after checking both succeeded with the same SHA-256."""
    listener = _mrc(netns_pair.ns_b, "listen", ADDR_B, "--size", "4M", "--timeout", "60",
                    "--endpoint", listener_impl, *extra)
    try:
        assert "listening on" in listener.stderr.readline()
        # no retry limit: the 262 µs native RTO must not fail the QP while the listener is descheduled
        writer = _mrc(netns_pair.ns_a, "write", ADDR_A, ADDR_B, "4M", "--endpoint", writer_impl,
                      "--exp-retries", "25", *extra)
        w_out, w_err = writer.communicate(timeout=90)
        l_out, _ = listener.communicate(timeout=90)
    finally:
        listener.kill()
    assert writer.returncode == 0, w_err
    assert listener.returncode == 0
    sha_w = re.search(r"^sha256 ([0-9a-f]{64})$", w_out, re.M).group(1)
    assert sha_w == re.search(r"^sha256 ([0-9a-f]{64})$", l_out, re.M).group(1)
    return w_out, l_out


@pytest.mark.parametrize("writer_impl,listener_impl", IMPL_PAIRS)
def test_listen_and_write(netns_pair, writer_impl, listener_impl):
    w_out, l_out = _listen_and_write(netns_pair, writer_impl, listener_impl)
    assert "4194304" in w_out and "goodput" in w_out and "retransmits" in w_out
    assert "bytes placed" in l_out and "4194304" in l_out


@_NATIVE
def test_listen_and_write_busy_polling(netns_pair):
    _listen_and_write(netns_pair, "native", "native", "--busy-poll")


@_NATIVE
def test_listen_and_write_with_the_rc_baseline(netns_pair):
    w_out, l_out = _listen_and_write(netns_pair, "native", "native", "--transport", "rc")
    assert re.search(r"SACKs received[\s│]+0 ", w_out) and re.search(r"RC ACKs received[\s│]+[1-9]", w_out)
    assert re.search(r"SACKs sent[\s│]+0\b", l_out) and re.search(r"RC ACKs sent[\s│]+[1-9]", l_out)


@pytest.mark.parametrize("args,message", [
    (["write", ADDR_A, ADDR_B, "12X"], "size '12X'"),
    (["write", ADDR_A, "not-an-address", "1M"], "not an IPv6 NIC address"),
    (["listen", "2001:db8:ffff::1"], "cannot bind"),
    (["write", ADDR_A, ADDR_B, "1T"], "size 1T (1099511627776 B) does not fit in this machine's memory"),
    (["listen", ADDR_A, "--size", "1T"], "size 1T (1099511627776 B) does not fit in this machine's memory"),
    (["listen", ADDR_A, "--count", "0"], "--count 0: must be at least 1"),
    (["write", ADDR_A, ADDR_B, "1M", "--timeout", "0"], "--timeout 0.0: must be a positive number"),
    (["write", ADDR_A, ADDR_B, "1M", "--endpoint", "rust"], "'rust' is not one of 'native', 'python'"),
    (["write", ADDR_A, ADDR_B, "1M", "--transport", "rc"], "--transport rc: the rc transport runs on the native endpoint only"),
    (["listen", ADDR_A, "--transport", "roce"], "'roce' is not one of 'mrc', 'rc'"),
    (["listen", "2001:db8:ffff::1", "--endpoint", "native"], "cannot bind"),
    (["write", ADDR_A, ADDR_B, "1M", "--busy-poll"], "--busy-poll: only the native endpoint busy-polls"),
    (["listen", ADDR_A, "--busy-poll"], "--busy-poll: only the native endpoint busy-polls"),
])
def test_user_mistakes_are_one_line(netns_pair, args, message):
    proc = _mrc(netns_pair.ns_a, *args)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and message in err and "Traceback" not in err


@pytest.mark.parametrize("impl", ["python", pytest.param("native", marks=_NATIVE)])
def test_write_without_listener_fails_at_the_retry_limit(netns_pair, impl):
    proc = _mrc(netns_pair.ns_a, "write", ADDR_A, ADDR_B, "64K", "--rto-exp", "10", "--linear-retries", "1",
                "--exp-retries", "1", "--endpoint", impl)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "retry counter exceeded" in err and "mrc listen" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("args,message", [(["--mpr", "100"], "MPR 100"), (["--mtu", "0"], "MTU"),
                                          (["--rto-exp", "30"], "timeout_exp")])
def test_bad_transport_options(netns_pair, args, message):
    proc = _mrc(netns_pair.ns_a, "write", ADDR_A, ADDR_B, "64K", *args)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and message in err and "Traceback" not in err
