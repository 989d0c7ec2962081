"""Attach and detach XDP and tc (clsact) programs on an interface.

Every call acts in the network namespace of the CALLING THREAD: wrap it in
``with mrckit.netns.enter(ns):`` to act inside a namespace. Interfaces are given by name
(resolved in that namespace) or by ifindex.

XDP modes: "native" (driver mode, XDP_FLAGS_DRV_MODE; veth supports it), "generic" (skb mode),
"auto" (native, falling back to generic; the mode obtained is returned). Design section 9
lists the veth traps of native mode.
"""

from __future__ import annotations

import ctypes
import os
import socket
import subprocess
from dataclasses import dataclass

from . import _libbpf as L
from .errors import BpfError
from .objects import Program

_XDP_MODE_FLAGS = {"native": L.XDP_FLAGS_DRV_MODE, "generic": L.XDP_FLAGS_SKB_MODE}
_ATTACHED_NAMES = {L.XDP_ATTACHED_NONE: None, L.XDP_ATTACHED_DRV: "native",
                   L.XDP_ATTACHED_SKB: "generic", L.XDP_ATTACHED_HW: "hw",
                   L.XDP_ATTACHED_MULTI: "multi"}
_TC_POINTS = {"ingress": L.BPF_TC_INGRESS, "egress": L.BPF_TC_EGRESS}
EEXIST, ENOENT = 17, 2


def ifindex_of(iface: str | int) -> int:
    """ifindex of ``iface`` (a name, looked up in the calling thread's netns, or an int).

    Raises:
        BpfError: no interface of that name here.
    """
    if isinstance(iface, int):
        return iface
    try:
        return socket.if_nametoindex(iface)
    except OSError:
        raise BpfError(f"no interface {iface!r} in this network namespace") from None


@dataclass
class XdpInfo:
    """What is attached at an interface's XDP hook.

    mode: None, "native", "generic", "hw" or "multi"; prog_id: the single program's id (0 if
    none or several); drv_prog_id / skb_prog_id: the program per mode (0 if none).
    """
    mode: str | None
    prog_id: int
    drv_prog_id: int
    skb_prog_id: int


def xdp_query(iface: str | int) -> XdpInfo:
    """Which XDP programs are attached to ``iface``. Raises BpfError."""
    opts = L.XdpQueryOpts(sz=ctypes.sizeof(L.XdpQueryOpts))
    L.check(L.require().bpf_xdp_query(ifindex_of(iface), 0, ctypes.byref(opts)), f"XDP query of {iface}")
    return XdpInfo(_ATTACHED_NAMES.get(opts.attach_mode, str(opts.attach_mode)), opts.prog_id,
                   opts.drv_prog_id, opts.skb_prog_id)


def xdp_attach(iface: str | int, prog: Program, mode: str = "native", *, replace: bool = False,
               expected: Program | None = None) -> str:
    """Attach ``prog`` at the XDP hook of ``iface``; returns the mode obtained.

    Args:
        mode: "native", "generic" or "auto" (native, else generic).
        replace: replace a program already attached in that mode; without it an attached
            program is an error (like ``ip link set ... xdp`` without ``-force``).
        expected: replace atomically only if this program is the one attached
            (XDP_FLAGS_REPLACE); otherwise BpfError (EEXIST). Implies ``replace``.

    Raises:
        ValueError: unknown mode. BpfError: the kernel refused (EBUSY: something is attached;
            EOPNOTSUPP: the driver has no native XDP; the message says which).
    """
    if mode not in ("native", "generic", "auto"):
        raise ValueError(f"XDP mode {mode!r}: use native, generic or auto")
    ifindex = ifindex_of(iface)
    tries = ["native", "generic"] if mode == "auto" else [mode]
    extra = 0 if replace else L.XDP_FLAGS_UPDATE_IF_NOEXIST
    opts = None
    if expected is not None:
        extra = L.XDP_FLAGS_REPLACE
        opts = ctypes.byref(L.XdpAttachOpts(sz=ctypes.sizeof(L.XdpAttachOpts), old_prog_fd=expected.fd))
    errors = []
    for attempt in tries:
        ret = L.require().bpf_xdp_attach(ifindex, prog.fd, _XDP_MODE_FLAGS[attempt] | extra, opts)
        if ret >= 0:
            return attempt
        err = L.errno_of(ret)
        errors.append(f"{attempt}: {_xdp_reason(err)}")
        if err in (16, EEXIST):  # busy: falling back would stack a second program
            break
    raise BpfError(f"XDP attach of {prog.name} to {iface} failed: {'; '.join(errors)}",
                   errno=err)


def _xdp_reason(err: int) -> str:
    if err in (16, EEXIST):
        return ("a program is already attached (detach it or pass replace=True), or not the "
                "expected one")
    if err == 95:
        return "the driver does not support this XDP mode (try mode='generic')"
    return f"{os.strerror(err)} (errno {err})"


def xdp_detach(iface: str | int) -> bool:
    """Detach whatever XDP programs are attached to ``iface`` (every mode).

    Returns True if something was detached. A missing interface is BpfError.
    """
    ifindex = ifindex_of(iface)
    info = xdp_query(ifindex)
    detached = False
    for prog_id, flags in ((info.drv_prog_id, L.XDP_FLAGS_DRV_MODE),
                           (info.skb_prog_id, L.XDP_FLAGS_SKB_MODE)):
        if prog_id:
            L.check(L.require().bpf_xdp_detach(ifindex, flags, None), f"XDP detach from {iface}")
            detached = True
    return detached


def _tc_hook(ifindex: int, direction: str) -> L.TcHook:
    if direction not in _TC_POINTS:
        raise ValueError(f"tc direction {direction!r}: use ingress or egress")
    return L.TcHook(sz=ctypes.sizeof(L.TcHook), ifindex=ifindex, attach_point=_TC_POINTS[direction])


def tc_attach(iface: str | int, prog: Program, direction: str = "ingress", *,
              handle: int = 1, priority: int = 1, replace: bool = False) -> int:
    """Attach ``prog`` (a tc/``SEC("tc")`` program) as a direct-action filter on the clsact
    qdisc of ``iface``, creating the qdisc if needed. Returns the kernel program id.

    ``handle``/``priority`` name the filter; use different ones to stack several.

    Raises:
        ValueError: bad direction. BpfError: the kernel refused (EEXIST: a filter with that
            handle and priority exists; pass replace=True).
    """
    ifindex = ifindex_of(iface)
    hook = _tc_hook(ifindex, direction)
    prog_fd = prog.fd
    ret = L.require().bpf_tc_hook_create(ctypes.byref(hook))
    if ret < 0 and L.errno_of(ret) != EEXIST:
        L.check(ret, f"create clsact qdisc on {iface}")
    created = ret >= 0
    opts = L.TcOpts(sz=ctypes.sizeof(L.TcOpts), prog_fd=prog_fd, handle=handle, priority=priority,
                    flags=1 if replace else 0)  # BPF_TC_F_REPLACE
    ret = L.require().bpf_tc_attach(ctypes.byref(hook), ctypes.byref(opts))
    if ret >= 0:
        return opts.prog_id
    if created:  # leave the interface as we found it
        tc_hook_destroy(ifindex)
    if L.errno_of(ret) == EEXIST:
        raise BpfError(f"tc {direction} filter handle {handle} priority {priority} exists on "
                       f"{iface}; detach it or pass replace=True", errno=EEXIST)
    L.check(ret, f"tc {direction} attach of {prog.name} to {iface}")
    raise AssertionError("unreachable")


def tc_query(iface: str | int, direction: str = "ingress", *, handle: int = 1,
             priority: int = 1) -> int:
    """Program id of the tc filter (handle, priority) on ``iface``, or 0 if none."""
    hook = _tc_hook(ifindex_of(iface), direction)
    opts = L.TcOpts(sz=ctypes.sizeof(L.TcOpts), handle=handle, priority=priority)
    ret = L.require().bpf_tc_query(ctypes.byref(hook), ctypes.byref(opts))
    if ret < 0 and L.errno_of(ret) in (ENOENT, 22):  # EINVAL: no clsact qdisc at all
        return 0
    L.check(ret, f"tc {direction} query on {iface}")
    return opts.prog_id


def tc_detach(iface: str | int, direction: str = "ingress", *, handle: int = 1,
              priority: int = 1, destroy_hook: bool = True) -> bool:
    """Remove the tc filter (handle, priority) in ``direction``; True if it existed.

    With ``destroy_hook`` (default), the clsact qdisc is removed too once it holds no filter
    in either direction, so nothing of ours stays on the interface.
    """
    ifindex = ifindex_of(iface)
    hook = _tc_hook(ifindex, direction)
    opts = L.TcOpts(sz=ctypes.sizeof(L.TcOpts), handle=handle, priority=priority)
    ret = L.require().bpf_tc_detach(ctypes.byref(hook), ctypes.byref(opts))
    found = ret >= 0
    if not found and L.errno_of(ret) not in (ENOENT, 22):
        L.check(ret, f"tc {direction} detach from {iface}")
    if destroy_hook and not _tc_has_filters(ifindex):
        tc_hook_destroy(ifindex)
    return found


def _tc_has_filters(ifindex: int) -> bool:
    # libbpf can only query a filter by (handle, priority); iproute2 lists them all. A child
    # process inherits the calling thread's network namespace.
    name = socket.if_indextoname(ifindex)
    for direction in _TC_POINTS:
        proc = subprocess.run(["tc", "filter", "show", "dev", name, direction],
                              capture_output=True, text=True)
        if proc.returncode != 0 or proc.stdout.strip():
            return True
    return False


def tc_hook_destroy(iface: str | int) -> None:
    """Delete the clsact qdisc of ``iface`` and every filter on it (quiet if absent)."""
    hook = L.TcHook(sz=ctypes.sizeof(L.TcHook), ifindex=ifindex_of(iface),
                    attach_point=L.BPF_TC_INGRESS | L.BPF_TC_EGRESS)
    ret = L.require().bpf_tc_hook_destroy(ctypes.byref(hook))
    if ret < 0 and L.errno_of(ret) not in (ENOENT, 22):
        L.check(ret, f"delete clsact qdisc of {iface}")
