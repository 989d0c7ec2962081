"""Network-namespace primitives shared by every layer that touches the kernel.

Namespaces are created with iproute2 (``ip netns add``), which bind-mounts them under
``/var/run/netns/NAME``. To act inside one from Python, :func:`enter` switches the *calling
thread* into it with ``setns(2)`` and back afterwards; a socket or BPF attachment made inside
keeps its namespace. Processes are started with ``nsenter --net=...`` rather than
``ip netns exec``, because the latter remounts /sys and hides bpffs pins (design section 9).

Every name that mrckit creates starts with ``mrc``, so :func:`cleanup_prefix` can remove all of
one run's leftovers.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import subprocess
import uuid
from collections.abc import Iterator, Sequence

from .errors import MrcError

NETNS_DIR = "/var/run/netns"
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


SO_RCVBUFFORCE = 33
"""``SO_RCVBUFFORCE`` (asm-generic/socket.h): Python's socket module lacks it."""


def set_receive_buffer(sock: socket.socket, nbytes: int) -> None:
    """Give ``sock`` a receive buffer of ``nbytes`` bytes: past ``net.core.rmem_max`` as root
    (``SO_RCVBUFFORCE``, socket(7)), else as much as ``rmem_max`` allows (``SO_RCVBUF``).

    Raises:
        OSError: the socket refuses both options.
    """
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, nbytes)
    except PermissionError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, nbytes)


def run(cmd: Sequence[str], *, check: bool = True, ns: str | None = None,
        input: bytes | None = None) -> subprocess.CompletedProcess:
    """Run ``cmd`` (in namespace ``ns`` when given, through nsenter) and capture its output.

    Raises:
        MrcError: the command exited non-zero and ``check`` is true; the message holds the
            command line and its stderr.
    """
    argv = list(cmd)
    if ns is not None:
        argv = ["nsenter", f"--net={NETNS_DIR}/{ns}", "--"] + argv
    proc = subprocess.run(argv, capture_output=True, input=input)
    if check and proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip()
        raise MrcError(f"command failed ({proc.returncode}): {' '.join(argv)}: {err}")
    return proc


def unique_name(prefix: str = "mrc") -> str:
    """A fresh name such as ``mrc3f9a1c``; netns names start with ``mrc`` (design section 8)."""
    return f"{prefix}{uuid.uuid4().hex[:6]}"


def exists(name: str) -> bool:
    """Whether namespace ``name`` exists under /var/run/netns."""
    return os.path.exists(f"{NETNS_DIR}/{name}")


def add(name: str) -> str:
    """Create namespace ``name`` with loopback up and IPv6 DAD off. Returns ``name``.

    Raises:
        MrcError: the namespace exists already, or ``ip netns add`` failed.
    """
    if exists(name):
        raise MrcError(f"network namespace {name} exists already")
    run(["ip", "netns", "add", name])
    try:
        for key, val in (("net.ipv6.conf.all.accept_dad", "0"), ("net.ipv6.conf.default.accept_dad", "0"),
                         ("net.ipv6.conf.all.forwarding", "0")):
            run(["sysctl", "-qw", f"{key}={val}"], ns=name)
        run(["ip", "link", "set", "lo", "up"], ns=name)
    except MrcError:
        delete(name)
        raise
    return name


def delete(name: str) -> None:
    """Delete namespace ``name`` and kill what still runs in it; quiet if it is absent."""
    if not exists(name):
        return
    pids = run(["ip", "netns", "pids", name], check=False).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), 9)
    run(["ip", "netns", "del", name], check=False)


def list_prefix(prefix: str) -> list[str]:
    """Names of existing namespaces that start with ``prefix``."""
    if not os.path.isdir(NETNS_DIR):
        return []
    return sorted(n for n in os.listdir(NETNS_DIR) if n.startswith(prefix))


def cleanup_prefix(prefix: str) -> list[str]:
    """Delete every namespace whose name starts with ``prefix``; returns the names removed.

    Deleting a namespace removes its veth ends, and with them their peers and XDP/tc programs.
    """
    removed = list_prefix(prefix)
    for name in removed:
        delete(name)
    return removed


@contextlib.contextmanager
def enter(name: str) -> Iterator[None]:
    """Switch the calling thread into namespace ``name`` for the ``with`` block.

    Raises:
        MrcError: the namespace does not exist or setns(2) failed.
    """
    try:
        target = os.open(f"{NETNS_DIR}/{name}", os.O_RDONLY)
    except FileNotFoundError:
        raise MrcError(f"network namespace {name} does not exist") from None
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise MrcError(f"setns into {name} failed: {os.strerror(ctypes.get_errno())}")
        try:
            yield
        finally:
            if _libc.setns(home, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back to the original namespace failed")
    finally:
        os.close(target)
        os.close(home)


def veth(ns_a: str, if_a: str, ns_b: str, if_b: str, *, mtu: int = 1500) -> None:
    """Create a veth pair with end ``if_a`` in ``ns_a`` and ``if_b`` in ``ns_b``, both up,
    with TX checksum offload off (design section 9: XDP forwarding breaks offloaded checksums).

    Raises:
        MrcError: an iproute2 or ethtool step failed (the pair is removed again).
    """
    tmp_a, tmp_b = unique_name("mrcv"), unique_name("mrcv")
    run(["ip", "link", "add", tmp_a, "mtu", str(mtu), "type", "veth", "peer", "name", tmp_b, "mtu", str(mtu)])
    try:
        run(["ip", "link", "set", tmp_a, "netns", ns_a, "name", if_a])
        run(["ip", "link", "set", tmp_b, "netns", ns_b, "name", if_b])
        for ns, ifname in ((ns_a, if_a), (ns_b, if_b)):
            run(["ethtool", "-K", ifname, "tx", "off"], ns=ns)
            run(["ip", "link", "set", ifname, "up"], ns=ns)
    except MrcError:
        run(["ip", "link", "del", tmp_a], check=False)
        for ns, ifname in ((ns_a, if_a), (ns_b, if_b)):
            if exists(ns):
                run(["ip", "link", "del", ifname], ns=ns, check=False)
        raise


class Netns:
    """A namespace that lives for a ``with`` block, deleted on exit even after an error.

    >>> with Netns() as ns:            # doctest: +SKIP
    ...     run(["ip", "link"], ns=ns.name)
    """

    def __init__(self, name: str | None = None):
        self.name = name or unique_name()

    def __enter__(self) -> "Netns":
        add(self.name)
        return self

    def __exit__(self, *exc) -> None:
        delete(self.name)
