"""One end of a fabric link going down or up, for the ``down`` and ``flap`` link faults.

A port of a bmv2 switch is never set admin-down. bmv2 reads all its ports in one select loop
through libpcap (behavioral-model ``src/BMI/bmi_port.c``), and libpcap blocks in ``poll()`` on
an interface that went down, so the whole switch stops receiving, on every port, until it is
restarted. Its end of the link therefore drops every frame with the blackhole fault of
:mod:`mrckit.fabric.faults` instead: for traffic that is the same as a dead link. A host end
still goes down for real, so the host agent sees its carrier go; the bmv2 end then has no
carrier, which bmv2 survives.
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import netns
from . import faults

BMV2_COMMS = ("simple_switch_grpc", "simple_switch", "simple_switch_g")
"""Process names of bmv2 (the kernel cuts ``comm`` to 15 characters)."""


def bmv2_serves(ns: str) -> bool:
    """Whether a bmv2 process runs in network namespace ``ns``."""
    try:
        want = os.stat(f"/run/netns/{ns}")
    except OSError:
        return False
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "comm").read_text().strip() not in BMV2_COMMS:
                continue
            st = os.stat(proc / "ns" / "net")
        except OSError:
            continue  # the process ended while we looked
        if (st.st_dev, st.st_ino) == (want.st_dev, want.st_ino):
            return True
    return False


def set_end(ns: str, ifname: str, up: bool, *, keep: bool = False) -> None:
    """Take ``ifname`` in ``ns`` down or bring it back up.

    On a bmv2 port, down attaches (or reconfigures) a blackhole fault; up removes it, or with
    ``keep`` (a flapping link) leaves the program attached and lets everything through, so the
    next down is a map update. Elsewhere it is ``ip link set``. A namespace that has gone
    (fabric torn down) is skipped.

    Raises:
        MrcError: the kernel refused (iproute2 or the fault program's attach).
    """
    if not netns.exists(ns):
        return
    if not bmv2_serves(ns):
        netns.run(["ip", "link", "set", ifname, "up" if up else "down"], ns=ns)
        return
    attached = os.path.exists(faults.fault_dir(ns, ifname))
    if up and not keep:
        faults.detach(ns, ifname)
    elif attached:
        faults.configure(ns, ifname, faults.Fault(blackhole=not up))
    elif not up:
        faults.attach(ns, ifname, faults.Fault(blackhole=True))


def release(ns: str, ifname: str) -> None:
    """Bring the end up for good: detach a fault left by ``set_end(..., keep=True)``."""
    set_end(ns, ifname, True)
