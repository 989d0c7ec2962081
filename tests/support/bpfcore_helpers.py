"""Shared helpers of the mrckit.bpf tests: ctypes mirrors of ebpf/test_maps.bpf.c, frames."""

import ctypes
import errno
import json
import socket

from mrckit import netns


class PktStats(ctypes.Structure):
    """Mirror of ``struct pkt_stats`` in ebpf/test_maps.bpf.c."""
    _fields_ = [("packets", ctypes.c_uint64), ("bytes", ctypes.c_uint64),
                ("last_len", ctypes.c_uint32), ("kind", ctypes.c_uint8), ("pad", ctypes.c_uint8 * 3)]


class CfgVal(ctypes.Structure):
    """Mirror of ``struct cfg_val`` in ebpf/test_maps.bpf.c."""
    _fields_ = [("dmac", ctypes.c_uint8 * 6), ("flags", ctypes.c_uint16), ("verdict", ctypes.c_uint32)]


class SharedVal(ctypes.Structure):
    """Mirror of ``struct shared_val`` in ebpf/test_maps.bpf.c (the mmapable array ``shared``)."""
    _fields_ = [("hits", ctypes.c_uint64), ("config", CfgVal), ("limit", ctypes.c_uint32)]


def send_frames(ns: str, ifname: str, frames: list[bytes]) -> int:
    """Send raw Ethernet frames out of ``ifname`` inside ``ns`` with an AF_PACKET socket.
    Returns how many the device accepted: a frame dropped at tc egress fails with ENOBUFS."""
    accepted = 0
    with netns.enter(ns):
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
            sock.bind((ifname, 0))
            for frame in frames:
                try:
                    sock.send(frame)
                    accepted += 1
                except OSError as exc:
                    if exc.errno != errno.ENOBUFS:
                        raise
    return accepted


def mac_of(ns: str, ifname: str) -> bytes:
    """The MAC address of ``ifname`` in ``ns`` (6 bytes)."""
    out = netns.run(["ip", "-j", "link", "show", ifname], ns=ns).stdout
    return bytes.fromhex(json.loads(out)[0]["address"].replace(":", ""))
