"""ctypes views of the host dataplane's BPF maps (``ebpf/mrc_host.bpf.c``).

Each class mirrors one C struct field for field; ``tests/bpf/host/test_layout.py`` proves the
two agree with the object's BTF. Addresses and MACs are byte arrays in network order; every
other field is host order, as the BPF program reads it.
"""

import ctypes
from enum import IntEnum
from typing import NamedTuple

from ..wire.constants import MAX_DOWNLINKS_PER_T0, MAX_PLANES, MAX_T0_PER_PLANE, EvState
from ..wire.ev import SALT_MASK, ev_pack, ev_plane, ev_t1

MAX_EVS = 256
"""Slots in one EV set (the C HOST_MAX_EVS)."""

U8, U16, U32, U64 = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64


DATAPLANE_REASONS = 16
"""Reasons below this value come from the dataplane (the C ``enum ev_reason``); the rest from
the agent."""


class Reason(IntEnum):
    """Why an EV changed state: below :data:`DATAPLANE_REASONS` from the dataplane, the rest
    from the agent."""

    NONE = 0
    SACK_SKIP_ONCE = 1
    NACK_TRIMMED = 2
    SACK_ALWAYS_SKIP = 3
    SKIP_EXPIRED = 4
    LOSS = 5
    LOSS_UNDONE = 6
    PATH_LOSS = 7
    """A sibling on the same path was retired for LOSS."""
    FLOOR = 8
    """Brought back: the set fell below ``host_config.min_active``."""
    WAKE = 9
    """No state change: a send or an ack while the agent was idle."""
    RTO_TIMEOUT = 16
    REPLACED = 17
    PROBE_OK = 18
    PORT_DOWN = 19
    PEER_PORT_DOWN = 20
    API_DENY = 21
    API_ALLOW = 22
    LINK_DENIED = 23
    LINK_ALLOWED = 24
    PROBE_RESULT = 25


class Stat(IntEnum):
    """Indexes of the ``host_stats`` per-CPU counters (``enum host_stat``). Every XDP_DROP
    and TC_ACT_SHOT is counted under exactly one ``*_DROP_*`` index."""

    TX_ENCAP = 0
    TX_PASS_ENCAPPED = 1
    TX_PASS_OTHER = 2
    TX_DROP_NO_GOOD_EV = 3
    TX_DROP_BAD_DST = 4
    TX_DROP_NOT_CONFIGURED = 5
    TX_DROP_ENCAP_FAILED = 6
    TX_DROP_MALFORMED = 7
    RX_DECAP = 8
    RX_PASS_OTHER = 9
    RX_DROP_MALFORMED = 10
    RX_DROP_NOT_LOCAL = 11
    RX_DROP_CE_NOT_ECT = 12
    RX_DROP_NOT_CONFIGURED = 13
    RX_DROP_DECAP_FAILED = 14
    RX_AGENT = 15
    FB_SACK = 16
    FB_SKIP_ONCE = 17
    FB_ALWAYS_SKIP = 18
    FB_NACK_TRIMMED = 19
    FB_NACK_LASTHOP = 20
    FB_NACK_OTHER = 21
    FB_UNKNOWN_PEER = 22
    FB_UNKNOWN_EV = 23
    FB_SHORT = 24
    EVENTS_LOST = 25
    RTX_SEEN = 26
    """Data retransmissions that tc egress looked up."""
    RTX_UNKNOWN_PSN = 27
    """Retransmissions with no record (evicted, or another QP's PSN)."""
    RTX_AFTER_NACK = 28
    """Retransmissions whose original was NACKed: it reached the receiver, no penalty."""
    LOSS_RETIRED = 29
    """Retransmissions whose original EV became ASSUMED_BAD (reason LOSS)."""
    LOSS_EV_GONE = 30
    """Retransmissions whose original EV was already replaced, not GOOD/SKIP."""
    NACK_MARKED = 31
    """NACKs that matched a tx record (PSN and echoed EV)."""
    LOSS_UNDONE = 32
    """LOSS retirements undone: a SACK showed the original arrived."""
    RTX_AFTER_ACK = 33
    """Retransmissions whose original a SACK had already acked: spurious, no penalty."""
    TX_PLAIN = 34
    """EV-hash mode: sent with the EV written in, no outer header."""
    RX_PLAIN = 35
    """EV-hash mode: MRC packets for the NIC address, passed up as is."""
    PATH_RETIRED = 36
    """Siblings retired with a LOSS EV (path-aware retirement)."""
    FLOOR_RESTORED = 37
    """Retired EVs made GOOD again to keep min_active GOOD."""
    TX_PINNED = 38
    """Pinned-EV mode: packets sent on their QP's fixed EV."""
    TX_DROP_PINNED_DOWN = 39
    """Pinned-EV mode: the QP's EV is on a down port or denied path."""
    RTX_NONE_DELIVERED = 40
    """A retransmission with nothing sent after it delivered: no LOSS."""
    RX_TRIM_REPAIRED = 41
    """TRIMMED/TRIMMED_LASTHOP frames whose length fields exceeded the frame (a switch that trims
    to a fixed size and leaves them stale), repaired and passed on (docs/host.md)."""
    TX_DROP_OVERSIZE = 42
    """Frames larger than the plane port's MTU once sent (after the 40-byte outer header in
    SRv6 mode), dropped rather than handed to a port that would drop them unseen."""


TX_DROPS = tuple(s for s in Stat if s.name.startswith("TX_DROP_"))
RX_DROPS = tuple(s for s in Stat if s.name.startswith("RX_DROP_"))


class HostConfigMap(ctypes.Structure):
    """``struct host_config``: index 0 of map ``host_config``."""

    _fields_ = [("nic_addr", U8 * 16), ("locator", U32), ("leaf", U16), ("downlink", U16),
                ("n_planes", U32), ("agent_port", U16), ("configured", U16), ("n_denied", U32),
                ("mode", U32), ("flags", U32), ("min_active", U32), ("agent_idle", U32)]


class HostLoad(ctypes.Structure):
    """``struct host_load``: the ``.rodata.host`` map, written before load (mode, locator)."""

    _fields_ = [("mode", U32), ("locator", U32)]


HOST_MODES = {"srv6": 0, "ecmp": 1}
"""``host_config.mode`` values (the C HOST_MODE_*): ``srv6`` pushes the outer uSID header,
``ecmp`` (EV-hash mode) sends the packet as is with the EV in its flow label and UDP
source port."""


class PlanePort(ctypes.Structure):
    """``struct plane_port``: map ``plane_ports``, index = plane."""

    _fields_ = [("ifindex", U32), ("up", U8), ("pad", U8), ("mac", U8 * 6),
                ("neigh_mac", U8 * 6), ("pad2", U8 * 2), ("port_addr", U8 * 16)]


class EvSlot(ctypes.Structure):
    """``struct ev_slot``: one EV with its state and counters. Times are CLOCK_MONOTONIC ns."""

    _fields_ = [("ev", U32), ("state", U8), ("reason", U8), ("group", U16),
                ("skip_until_rot", U32), ("unacked_tx", U32),
                ("tx_packets", U64), ("tx_bytes", U64), ("last_tx_ns", U64),
                ("pending_ns", U64), ("last_ack_ns", U64), ("acked_sent_ns", U64), ("acked", U64),
                ("skips", U64), ("nacks", U64), ("bad_ns", U64)]



class SlotWrite(ctypes.Structure):
    """``struct slot_write``: the command of the syscall program ``mrc_host_slot_write``, one
    field-wise change of one slot of a peer's live set. ``tx_packets``/``tx_bytes`` go in as a
    new EV's resumed counts and, with ``last_tx_ns`` and ``acked``, come back as the replaced
    EV's last counts (CLOCK_MONOTONIC ns)."""

    _fields_ = [("peer", U8 * 16), ("index", U32), ("expect_ev", U32), ("ev", U32),
                ("state", U8), ("reason", U8), ("flags", U16), ("skip_until_rot", U32),
                ("pad", U32), ("bad_ns", U64), ("tx_packets", U64), ("tx_bytes", U64),
                ("last_tx_ns", U64), ("acked", U64)]


SLOT_WRITE_CLEAR_PENDING = 1
"""``slot_write.flags``: nothing is outstanding on the EV (it was made GOOD)."""


class SlotWriteResult(IntEnum):
    """Return values of ``mrc_host_slot_write`` (the C SLOT_WRITE_*)."""

    OK = 0
    NO_PEER = 1
    BAD_INDEX = 2
    STALE = 3

class PlaneGroup(ctypes.Structure):
    """``struct plane_group``: one plane's run of slots ``base..base+n-1`` in a set and its
    scan order (equal planes: the pick draws a group in turn, then an EV within it)."""

    _fields_ = [("seq", U64), ("rot", U32), ("stride", U32), ("offset", U32), ("base", U16),
                ("n", U16), ("plane", U32), ("pad", U32)]


class EvSet(ctypes.Structure):
    """``struct ev_set``: the template (``ev_template[0]``) or one peer's set (``peer_evs``).
    ``delivered_ns`` is the latest send time (CLOCK_MONOTONIC ns) of a packet toward the peer
    that a SACK showed delivered: the dataplane's RACK reference for loss retirement."""

    _fields_ = [("n", U32), ("n_groups", U32), ("plane_seq", U64), ("delivered_ns", U64),
                ("groups", PlaneGroup * MAX_PLANES), ("slots", EvSlot * MAX_EVS)]


class LinkKey(ctypes.Structure):
    """``struct link_key``: key of ``denied_links``; kind 1 = T0-T1 link, 2 = host link."""

    _fields_ = [("plane", U8), ("kind", U8), ("leaf", U16), ("index", U16), ("pad", U16)]


LINK_KIND = {"t1": 1, "down": 2}


TXR_NACKED, TXR_ACKED = 1, 2
"""``tx_rec.flags``: a NACK (TRIMMED or any other) / a SACK triggered by this PSN echoed its EV."""


class TxRec(ctypes.Structure):
    """``struct tx_rec``: one entry of the direct-mapped ``tx_records`` array: for (peer NIC
    address, PSN), the EV (and its slot) that carried the PSN's last transmission, whether a
    NACK or SACK answered it (``flags``: :data:`TXR_NACKED`, :data:`TXR_ACKED`), the data
    packet's destination QP, the EV that the retransmission retired for LOSS (0 = none), and
    when tc egress sent it (``sent_ns``, CLOCK_MONOTONIC ns)."""

    _fields_ = [("peer", U8 * 16), ("psn", U32), ("ev", U32), ("slot", U16), ("flags", U8),
                ("pad", U8), ("dqpn", U32), ("blamed_ev", U32), ("pad2", U32),
                ("sent_ns", U64)]


TX_RECORDS = 65536
"""Entries of ``tx_records`` (the C HOST_TX_RECORDS, a power of two)."""

RX_PATHS = 4096
"""Entries of ``rx_paths`` (the C HOST_RX_PATHS): (plane, T1, sender) keys kept at once, least
recently used evicted."""


class RxPath(NamedTuple):
    """One key of ``rx_paths``: probes came in on ``plane`` through ``t1`` (the sender's EV's
    T1 field, which a path between hosts of one leaf ignores) from the host at ``src_leaf``,
    ``src_downlink``."""

    plane: int
    t1: int
    src_leaf: int
    src_downlink: int


def rx_path_key(plane: int, t1: int, src_leaf: int, src_downlink: int) -> int:
    """The ``rx_paths`` key of (plane, T1, sender): the EV path bits | leaf * the downlinks per
    T0 + downlink (the C count_rx_path).

    Raises:
        ValueError: a field out of range.
    """
    if not 0 <= src_leaf < MAX_T0_PER_PLANE:
        raise ValueError(f"src_leaf={src_leaf} is out of range 0..{MAX_T0_PER_PLANE - 1}")
    if not 0 <= src_downlink < MAX_DOWNLINKS_PER_T0:
        raise ValueError(f"src_downlink={src_downlink} is out of range 0..{MAX_DOWNLINKS_PER_T0 - 1}")
    return ev_pack(plane, t1, src_leaf * MAX_DOWNLINKS_PER_T0 + src_downlink)


def split_rx_path_key(key: int) -> RxPath:
    """The (plane, T1, sender leaf, sender downlink) of an ``rx_paths`` key."""
    src_leaf, src_downlink = divmod(key & SALT_MASK, MAX_DOWNLINKS_PER_T0)
    return RxPath(ev_plane(key), ev_t1(key), src_leaf, src_downlink)


def tx_index(peer: bytes, psn: int) -> int:
    """The ``tx_records`` index of (peer NIC address, 16 bytes network order; PSN), as the C
    ``tx_index`` computes it (the address's four words in host order, x86/arm64 little-endian)."""
    w = [int.from_bytes(peer[i:i + 4], "little") for i in range(0, 16, 4)]
    h = w[0] ^ w[1] ^ w[2] ^ w[3]
    h = ((h ^ (h >> 16)) * 0x9E3779B1) & 0xFFFFFFFF
    return (psn ^ h) & (TX_RECORDS - 1)


class EvEvent(ctypes.Structure):
    """``struct ev_event``: one dataplane state change from the ``ev_events`` ring buffer."""

    _fields_ = [("peer", U8 * 16), ("ev", U32), ("old_state", U8), ("new_state", U8),
                ("reason", U8), ("pad", U8), ("ts_ns", U64)]


PeerKey = U8 * 16
"""Key of ``peer_evs``: the peer's NIC address, network order."""


def state_name(state: int) -> str:
    """``EvState`` name of a state byte, or ``"?<n>"`` for an unknown value."""
    try:
        return EvState(state).name
    except ValueError:
        return f"?{state}"
