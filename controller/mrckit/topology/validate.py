"""Validation of a :class:`~mrckit.topology.model.Topology` (design sections 3.3 and 4).

Checks run in a fixed order so that the first error is the most useful one: scalar fields,
field overflows (more than 16 planes, 256 T1 per plane, 1024 T0 per plane, 1024 downlinks per
T0), then each switch, host and link, then completeness (a port per host and plane, every T0
linked to every T1 of its plane). Link checks are vectorised with numpy, so a fabric with two
million links validates in a fraction of a second.

Each error is a :class:`TopologyError` whose ``ref`` names the element at fault, so the YAML
loader can add ``file:line``.
"""

from __future__ import annotations

import operator
import re

import numpy as np

from ..wire.constants import MAX_DOWNLINKS_PER_T0, MAX_PLANES, MAX_T0_PER_PLANE, MAX_T1_PER_PLANE, UsidRole
from .model import MAX_MTU, MIN_MTU, SWITCH_ROLES, Topology, TopologyError
from .plan import MAX_PORT, Role

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
"""Node names: letters, digits, ``_ . -``; no ``:`` (links write ``node:port``)."""
_NAMES_RE = re.compile(r"(?:[A-Za-z0-9][A-Za-z0-9_.-]{0,62}\n)*")
MAX_LEAF = MAX_T0_PER_PLANE - 1
MAX_HOST_DOWNLINK = 1022
"""NIC addresses use H = D + 1 and the plan keeps H <= 1023 (``mrckit.wire.addressing``)."""


def _first(mask: np.ndarray) -> int | None:
    idx = np.flatnonzero(mask)
    return int(idx[0]) if len(idx) else None


def _all_unique(keys: np.ndarray) -> bool:
    """Fast check (the common case): a count per key when the key space is small, else a sort."""
    if len(keys) < 2:
        return True
    if keys.min() >= 0 and keys.max() < 8 * len(keys) + 4096:
        return bool(np.bincount(keys).max() <= 1)
    ordered = np.sort(keys)
    return not bool(np.any(ordered[1:] == ordered[:-1]))


def _first_duplicate(keys: np.ndarray) -> tuple[int, int] | None:
    """(earlier row, later row) of the first repeated key in row order, or None."""
    if _all_unique(keys):
        return None
    _, first_rows, inverse = np.unique(keys, return_index=True, return_inverse=True)
    later = np.flatnonzero(first_rows[inverse] != np.arange(len(keys)))
    if not len(later):
        return None
    row = int(later[0])
    return int(first_rows[inverse[row]]), row


def validate(topo: Topology) -> None:
    """Check ``topo`` against the model; return None or raise the first :class:`TopologyError`."""
    _check_fields(topo)
    _check_overflows(topo)
    _check_switches(topo)
    _check_hosts(topo)
    _check_fabric_links(topo)
    _check_host_links(topo)
    _check_ports(topo)
    _check_complete(topo)


def _check_fields(topo: Topology) -> None:
    def need(name, value, lo, hi, why=""):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TopologyError(f"{name} must be an integer, got {value!r}", ("field", name))
        if not lo <= value <= hi:
            raise TopologyError(f"{name}={value} is out of range {lo}..{hi}{why}", ("field", name))

    if isinstance(topo.planes, int) and topo.planes > MAX_PLANES:
        raise TopologyError(f"{topo.planes} planes: at most {MAX_PLANES} (the EV plane field is 4 bits)",
                            ("field", "planes"))
    need("planes", topo.planes, 1, MAX_PLANES)
    need("locator", topo.locator, 0, 0xFFFFFFFF, " (a 32-bit uSID block)")
    need("mtu", topo.mtu, MIN_MTU, MAX_MTU, " bytes")
    need("trim_threshold", topo.trim_threshold, 0, 0xFFFFFFFF, " packets")
    need("ecn_threshold", topo.ecn_threshold, 0, 0xFFFFFFFF, " packets")


def _nth_of_group(groups: np.ndarray, n: int) -> int | None:
    """Row of the (n+1)-th member of the first group that has more than n members."""
    if len(groups) == 0 or (groups.min() >= 0 and np.bincount(groups).max() <= n):
        return None
    order = np.argsort(groups, kind="stable")
    sorted_groups = groups[order]
    starts = np.searchsorted(sorted_groups, sorted_groups, side="left")
    rank = np.arange(len(groups)) - starts
    over = np.flatnonzero(rank == n)
    return int(order[over].min()) if len(over) else None


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _only_ints(items, field: str) -> bool:
    return set(map(type, map(operator.attrgetter(field), items))) <= {int}


def _check_types(topo: Topology) -> None:
    if all(_only_ints(topo.switches, f) for f in ("plane", "index")) and \
            all(_only_ints(topo.hosts, f) for f in ("leaf", "downlink")) and \
            set(map(operator.attrgetter("role"), topo.switches)) <= set(SWITCH_ROLES):
        return
    for sid, s in enumerate(topo.switches):
        if s.role not in SWITCH_ROLES:
            raise TopologyError(f"switch {s.name}: role {s.role!r} is not t0 or t1", ("switch", sid))
        for field in ("plane", "index"):
            if not _is_int(getattr(s, field)):
                raise TopologyError(f"switch {s.name}: {field} must be an integer, got {getattr(s, field)!r}",
                                    ("switch", sid))
    for hid, h in enumerate(topo.hosts):
        for field in ("leaf", "downlink"):
            if not _is_int(getattr(h, field)):
                raise TopologyError(f"host {h.name}: {field} must be an integer, got {getattr(h, field)!r}",
                                    ("host", hid))


def _check_overflows(topo: Topology) -> None:
    _check_types(topo)
    roles, planes = topo.switch_role, topo.switch_plane
    for role, limit, what in ((UsidRole.T1, MAX_T1_PER_PLANE, "the EV T1 field is 8 bits"),
                              (UsidRole.T0, MAX_T0_PER_PLANE, "the uSID index is 10 bits")):
        rows = np.flatnonzero(roles == role)
        over = _nth_of_group(planes[rows], limit)
        if over is not None:
            sw = topo.switches[rows[over]]
            raise TopologyError(f"switch {sw.name}: more than {limit} {role.name} in plane {sw.plane} ({what})",
                                ("switch", int(rows[over])))
    over = _nth_of_group(topo.host_links.t0, MAX_DOWNLINKS_PER_T0)
    if over is not None:
        t0 = topo.switches[topo.host_links.t0[over]]
        raise TopologyError(f"more than {MAX_DOWNLINKS_PER_T0} downlinks on {t0.name} (the uSID index is 10 bits)",
                            ("host_link", over))


def _check_switches(topo: Topology) -> None:
    names = {}
    for sid, s in enumerate(topo.switches):
        where = ("switch", sid)
        if not isinstance(s.name, str) or not NAME_RE.fullmatch(s.name):
            raise TopologyError(f"bad node name {s.name!r}: use letters, digits, '_', '.', '-' (at most 63)", where)
        if s.name in names:
            raise TopologyError(f"duplicate node name {s.name!r}", where)
        names[s.name] = sid
        if not 0 <= s.plane < topo.planes:
            raise TopologyError(f"switch {s.name}: plane {s.plane} is out of range 0..{topo.planes - 1}", where)
        hi = MAX_T1_PER_PLANE - 1 if s.role == Role.T1 else MAX_T0_PER_PLANE - 1
        if not 0 <= s.index <= hi:
            raise TopologyError(f"switch {s.name}: {s.role.value} index {s.index} is out of range 0..{hi}", where)
    keys = (topo.switch_role.astype(np.int64) * 16 + topo.switch_plane) * 1024 + topo.switch_index
    dup = _first_duplicate(keys)
    if dup:
        a, b = (topo.switches[i] for i in dup)
        raise TopologyError(f"switches {a.name} and {b.name} are both {b.role.value} {b.index} of plane {b.plane} "
                            f"(they would share a uSID)", ("switch", dup[1]))
    for p in range(topo.planes):
        ids = np.flatnonzero((topo.switch_role == UsidRole.T1) & (topo.switch_plane == p))
        ids = ids[np.argsort(topo.switch_index[ids], kind="stable")]
        gap = _first(topo.switch_index[ids] != np.arange(len(ids)))
        if gap is not None:
            s = topo.switches[ids[gap]]
            raise TopologyError(f"switch {s.name}: T1 index {s.index} leaves a gap; the T1 indexes of plane {p} "
                                f"must run 0..{len(ids) - 1} (an EV names T1 0..n-1)", ("switch", int(ids[gap])))


def _hosts_look_right(topo: Topology) -> bool:
    """Fast check of names and ranges; the loop in :func:`_check_hosts` finds the culprit."""
    names = list(map(operator.attrgetter("name"), topo.hosts))
    if not set(map(type, names)) <= {str} or not _NAMES_RE.fullmatch("\n".join(names) + "\n"):
        return False
    if len(set(names) | {s.name for s in topo.switches}) != len(names) + len(topo.switches):
        return False
    leaf, down = topo.host_leaf, topo.host_downlink
    return not (np.any(leaf < 0) or np.any(leaf > MAX_LEAF) or np.any(down < 0) or np.any(down > MAX_HOST_DOWNLINK))


def _check_hosts(topo: Topology) -> None:
    if not topo.hosts or _hosts_look_right(topo):
        _check_host_places(topo)
        return
    names = {s.name for s in topo.switches}
    for hid, h in enumerate(topo.hosts):
        where = ("host", hid)
        if not isinstance(h.name, str) or not NAME_RE.fullmatch(h.name):
            raise TopologyError(f"bad node name {h.name!r}: use letters, digits, '_', '.', '-' (at most 63)", where)
        if h.name in names:
            raise TopologyError(f"duplicate node name {h.name!r}", where)
        names.add(h.name)
        for field, value, hi in (("leaf", h.leaf, MAX_LEAF), ("downlink", h.downlink, MAX_HOST_DOWNLINK)):
            if not 0 <= value <= hi:
                raise TopologyError(f"host {h.name}: {field}={value!r} is out of range 0..{hi}", where)
    _check_host_places(topo)


def _check_host_places(topo: Topology) -> None:
    dup = _first_duplicate(topo.host_leaf.astype(np.int64) * 1024 + topo.host_downlink)
    if dup:
        a, b = (topo.hosts[i] for i in dup)
        raise TopologyError(f"hosts {a.name} and {b.name} both sit on leaf {b.leaf}, downlink {b.downlink} "
                            f"(they would share the NIC address {b.nic_address})", ("host", dup[1]))


def _check_link_ports(kind: str, ports: np.ndarray, switch_ids: np.ndarray, topo: Topology) -> None:
    row = _first((ports < 0) | (ports > MAX_PORT))
    if row is not None:
        raise TopologyError(f"port {ports[row]} of {topo.switches[switch_ids[row]].name} is out of range "
                            f"0..{MAX_PORT} (ports are 9 bits)", (kind, row))


def _check_ids(kind: str, ids: np.ndarray, count: int, what: str) -> None:
    row = _first((ids < 0) | (ids >= count))
    if row is not None:
        raise TopologyError(f"link row {row}: {what} id {ids[row]} does not exist", (kind, row))


def _check_fabric_links(topo: Topology) -> None:
    fl, kind = topo.fabric_links, "fabric_link"
    _check_ids(kind, fl.t0, len(topo.switches), "switch")
    _check_ids(kind, fl.t1, len(topo.switches), "switch")
    row = _first((topo.switch_role[fl.t0] != UsidRole.T0) | (topo.switch_role[fl.t1] != UsidRole.T1))
    if row is not None:
        a, b = topo.switches[fl.t0[row]], topo.switches[fl.t1[row]]
        raise TopologyError(f"link {a.name}-{b.name}: a switch-to-switch link joins a T0 and a T1", (kind, row))
    row = _first(topo.switch_plane[fl.t0] != topo.switch_plane[fl.t1])
    if row is not None:
        a, b = topo.switches[fl.t0[row]], topo.switches[fl.t1[row]]
        raise TopologyError(f"link {a.name}-{b.name} joins plane {a.plane} to plane {b.plane}", (kind, row))
    _check_link_ports(kind, fl.t0_port, fl.t0, topo)
    _check_link_ports(kind, fl.t1_port, fl.t1, topo)
    # T1 indexes are < 256 and both ends share a plane (checked above), so this key is unique per pair.
    dup = _first_duplicate(fl.t0.astype(np.int64) * MAX_T1_PER_PLANE + topo.switch_index[fl.t1])
    if dup:
        a, b = topo.switches[fl.t0[dup[1]]], topo.switches[fl.t1[dup[1]]]
        raise TopologyError(f"{a.name} links to {b.name} twice: the uSID plan names one link per T0-T1 pair",
                            (kind, dup[1]))


def _check_host_links(topo: Topology) -> None:
    hl, kind = topo.host_links, "host_link"
    _check_ids(kind, hl.host, len(topo.hosts), "host")
    _check_ids(kind, hl.t0, len(topo.switches), "switch")
    row = _first(topo.switch_role[hl.t0] != UsidRole.T0)
    if row is not None:
        raise TopologyError(f"host {topo.hosts[hl.host[row]].name} links to {topo.switches[hl.t0[row]].name}: "
                            f"hosts link to T0 switches only", (kind, row))
    row = _first((hl.plane < 0) | (hl.plane >= topo.planes))
    if row is not None:
        raise TopologyError(f"host {topo.hosts[hl.host[row]].name}: port {hl.plane[row]} is out of range "
                            f"0..{topo.planes - 1} (a host's port p is its plane-p port)", (kind, row))
    row = _first(topo.switch_plane[hl.t0] != hl.plane)
    if row is not None:
        host, t0 = topo.hosts[hl.host[row]], topo.switches[hl.t0[row]]
        raise TopologyError(f"host {host.name} port {hl.plane[row]} links to {t0.name} of plane {t0.plane}: "
                            f"a host's port p links to a T0 of plane p", (kind, row))
    row = _first(topo.switch_index[hl.t0] != topo.host_leaf[hl.host])
    if row is not None:
        host, t0 = topo.hosts[hl.host[row]], topo.switches[hl.t0[row]]
        raise TopologyError(f"host {host.name} (leaf {host.leaf}) links to {t0.name}, which is T0 {t0.index}: "
                            f"a host links to the T0 of its own leaf in every plane (design 3.3)", (kind, row))
    _check_link_ports(kind, hl.t0_port, hl.t0, topo)
    dup = _first_duplicate(hl.host.astype(np.int64) * topo.planes + hl.plane)
    if dup:
        host = topo.hosts[hl.host[dup[1]]]
        raise TopologyError(f"host {host.name} has two links on port {hl.plane[dup[1]]} (plane {hl.plane[dup[1]]})",
                            (kind, dup[1]))


def _check_ports(topo: Topology) -> None:
    fl, hl = topo.fabric_links, topo.host_links
    switch = np.concatenate([fl.t0, fl.t1, hl.t0]).astype(np.int64)
    port = np.concatenate([fl.t0_port, fl.t1_port, hl.t0_port])
    refs = [("fabric_link", len(fl)), ("fabric_link", len(fl)), ("host_link", len(hl))]
    dup = _first_duplicate(switch * (MAX_PORT + 1) + port)
    if dup:
        later = max(dup)
        kind, row = refs[0][0], later
        for k, n in refs:
            if row < n:
                kind = k
                break
            row -= n
        name = topo.switches[switch[later]].name
        raise TopologyError(f"duplicate port {port[later]} on {name}", (kind, row))


def _check_complete(topo: Topology) -> None:
    hl, fl = topo.host_links, topo.fabric_links
    per_host = np.bincount(hl.host, minlength=len(topo.hosts))
    hid = _first(per_host != topo.planes)
    if hid is not None:
        have = set(hl.plane[hl.host == hid].tolist())
        missing = min(set(range(topo.planes)) - have)
        raise TopologyError(f"host {topo.hosts[hid].name} has no port in plane {missing} "
                            f"(every host needs one port per plane)", ("host", hid))
    t1_count = np.array(topo.t1_per_plane, dtype=np.int64)
    per_t0 = np.bincount(fl.t0, minlength=len(topo.switches))
    short = (topo.switch_role == UsidRole.T0) & (per_t0 != t1_count[topo.switch_plane])
    sid = _first(short)
    if sid is not None:
        s = topo.switches[sid]
        linked = set(topo.switch_index[fl.t1[fl.t0 == sid]].tolist())
        missing = min(set(range(int(t1_count[s.plane]))) - linked)
        raise TopologyError(f"{s.name} has no link to T1 {missing} of plane {s.plane}: every T0 links to every T1 "
                            f"of its plane (an EV may name any of them)", ("switch", sid))
