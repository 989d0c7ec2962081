"""Fixtures for the mrckit.bpf tests: veth pairs between fresh namespaces, a pin folder."""

import ctypes
import json
import os
import shutil
import socket

import pytest

from mrckit import bpf, netns


class PktStats(ctypes.Structure):
    """Mirror of ``struct pkt_stats`` in ebpf/test_maps.bpf.c."""
    _fields_ = [("packets", ctypes.c_uint64), ("bytes", ctypes.c_uint64),
                ("last_len", ctypes.c_uint32), ("kind", ctypes.c_uint8), ("pad", ctypes.c_uint8 * 3)]


class CfgVal(ctypes.Structure):
    """Mirror of ``struct cfg_val`` in ebpf/test_maps.bpf.c."""
    _fields_ = [("dmac", ctypes.c_uint8 * 6), ("flags", ctypes.c_uint16), ("verdict", ctypes.c_uint32)]


@pytest.fixture
def need_bpf(need_root):
    """Root, libbpf and the test objects; a missing object fails with `make bpf` advice."""
    bpf.object_path("test_maps")


@pytest.fixture
def veth_pair(make_netns, need_bpf):
    """(ns_a, "va", ns_b, "vb"): a veth pair with one end in each of two fresh namespaces."""
    ns_a, ns_b = make_netns(), make_netns()
    netns.veth(ns_a, "va", ns_b, "vb")
    return ns_a, "va", ns_b, "vb"


@pytest.fixture
def pin_dir(need_bpf):
    """A fresh folder under /sys/fs/bpf/mrckit, removed with everything pinned in it."""
    bpf.ensure_bpffs()
    path = bpf.pin_path(netns.unique_name("mrctest"))
    os.makedirs(path)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def send_frames(ns: str, ifname: str, frames: list[bytes]) -> None:
    """Send raw Ethernet frames out of ``ifname`` inside ``ns`` with an AF_PACKET socket."""
    with netns.enter(ns):
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
            sock.bind((ifname, 0))
            for frame in frames:
                sock.send(frame)


def mac_of(ns: str, ifname: str) -> bytes:
    """The MAC address of ``ifname`` in ``ns`` (6 bytes)."""
    out = netns.run(["ip", "-j", "link", "show", ifname], ns=ns).stdout
    return bytes.fromhex(json.loads(out)[0]["address"].replace(":", ""))
