"""The naming, MAC and port-numbering plans of mrckit fabrics (ours; addresses are design 3.3).

Everything here is a pure function of a node's place in the fabric, so the controller, the
emulator and the host agents derive the same names without exchanging them.

- **Node names** (generator): T0 ``p<plane>-t0-<L>``, T1 ``p<plane>-t1-<t>``, host ``h<L>-<D>``.
- **Interface names** (emulator; Linux ifnames are at most 15 characters and each lives in its
  node's own namespace, so they only need to be unique per node):

  | node | port towards | ifname |
  |---|---|---|
  | host | its T0 on plane p | ``plane<p>`` |
  | T0 | host on downlink D | ``down-<D>`` |
  | T0 | T1 t | ``t1-<t>`` |
  | T1 | T0 L | ``t0-<L>`` |

- **MAC plan**: locally administered unicast (first byte 0x02, RFC 7042 section 2.1),
  ``02:RR:PI:II:NN:NN``: RR = node kind (1 T0, 2 T1, 3 host), P = plane (4 bits),
  III = switch index or host leaf (12 bits), NNNN = switch port or host downlink (16 bits).
  Example: T0 3 of plane 1, port 5 -> ``02:01:10:03:00:05``; the host on leaf 3, downlink 2,
  its plane-1 port -> ``02:03:10:03:00:02``. Unique across the whole fabric.
- **Port numbers** (generator): on a T0 with H hosts, downlink D is port D and the uplink to
  T1 t is port H + t; on a T1, the port to T0 L is port L. Ports are 9 bits (design section 4).
"""

from __future__ import annotations

import enum
from typing import TypeVar

import numpy as np

from ..wire import check_range

MAX_PORT = 511
"""Highest switch port number: ports are 9 bits in v1model (design section 4)."""
IFNAME_MAX = 15
"""Linux IFNAMSIZ - 1."""
MAC_LOCAL_UNICAST = 0x02
"""First MAC byte: locally administered (bit 1), unicast (bit 0 clear)."""


class Role(str, enum.Enum):
    """A node's role in a two-tier Clos: leaf switch (T0), spine switch (T1) or host."""

    T0 = "t0"
    T1 = "t1"
    HOST = "host"


MAC_KIND = {Role.T0: 1, Role.T1: 2, Role.HOST: 3}
"""The RR byte of the MAC plan, per role."""


# --- node names --------------------------------------------------------------------------------
def switch_name(role: Role, plane: int, index: int) -> str:
    """Generator name of a switch: ``p<plane>-t0-<L>`` or ``p<plane>-t1-<t>``."""
    return f"p{plane}-{Role(role).value}-{index}"


def host_name(leaf: int, downlink: int) -> str:
    """Generator name of the host on downlink D of leaf L: ``h<L>-<D>``."""
    return f"h{leaf}-{downlink}"


# --- interface names ----------------------------------------------------------------------------
def host_ifname(plane: int) -> str:
    """Interface name of a host's port on ``plane``: ``plane<p>``."""
    return f"plane{check_range('plane', plane, 0, 15)}"


def t0_down_ifname(downlink: int) -> str:
    """Interface name of a T0's port to the host on downlink D: ``down-<D>``."""
    return f"down-{check_range('downlink', downlink, 0, 1023)}"


def t0_up_ifname(t1: int) -> str:
    """Interface name of a T0's port to T1 t: ``t1-<t>``."""
    return f"t1-{check_range('t1', t1, 0, 255)}"


def t1_ifname(leaf: int) -> str:
    """Interface name of a T1's port to T0 L: ``t0-<L>``."""
    return f"t0-{check_range('leaf', leaf, 0, 1023)}"


# --- MAC plan -------------------------------------------------------------------------------------
def mac_address(role: Role, plane: int, index: int, port: int) -> int:
    """The 48-bit MAC of one interface, as an int (see the module docstring for the layout).

    Args:
        role: the node's role.
        plane: its plane (0..15); for a host, the plane of the port.
        index: switch index, or the host's leaf (0..4095).
        port: switch port number, or the host's downlink (0..65535).

    Raises:
        ValueError: a field out of range.
    """
    check_range("plane", plane, 0, 15)
    check_range("index", index, 0, 0xFFF)
    check_range("port", port, 0, 0xFFFF)
    return (MAC_LOCAL_UNICAST << 40) | (MAC_KIND[Role(role)] << 32) | (plane << 28) | (index << 16) | port


def mac_addresses(kind: np.ndarray, plane: np.ndarray, index: np.ndarray, port: np.ndarray) -> np.ndarray:
    """Vectorised :func:`mac_address` over arrays of MAC kinds (``MAC_KIND`` values), planes,
    indexes and ports; returns uint64 MACs. Inputs must already be in range (the model checks)."""
    u = np.uint64
    return ((u(MAC_LOCAL_UNICAST) << u(40)) | (kind.astype(u) << u(32)) | (plane.astype(u) << u(28))
            | (index.astype(u) << u(16)) | port.astype(u))


def mac_str(mac: int) -> str:
    """``0x020110030005`` -> ``"02:01:10:03:00:05"``."""
    check_range("mac", mac, 0, (1 << 48) - 1)
    return ":".join(f"{b:02x}" for b in mac.to_bytes(6, "big"))


def parse_mac(text: str) -> int:
    """``"02:01:10:03:00:05"`` -> 48-bit int.

    Raises:
        ValueError: not six two-digit hex bytes separated by colons.
    """
    parts = str(text).split(":")
    if len(parts) != 6 or not all(len(p) == 2 for p in parts):
        raise ValueError(f"malformed MAC address {text!r} (expected six hex bytes, e.g. 02:01:10:03:00:05)")
    try:
        return int("".join(parts), 16)
    except ValueError:
        raise ValueError(f"malformed MAC address {text!r}") from None


# --- port numbering (generator) ------------------------------------------------------------------
Index = TypeVar("Index", int, np.ndarray)
"""One index, or an array of them: the generator numbers every port of a fabric at once."""


def t0_down_port(downlink: Index) -> Index:
    """Generator port number of a T0's port to downlink D: D."""
    return downlink


def t0_up_port(hosts_per_leaf: int, t1: Index) -> Index:
    """Generator port number of a T0's uplink to T1 t: hosts_per_leaf + t."""
    return hosts_per_leaf + t1


def t1_port(leaf: Index) -> Index:
    """Generator port number of a T1's port to T0 L: L."""
    return leaf
