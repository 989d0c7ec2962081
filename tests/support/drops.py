"""Where a packet went missing: the kernel's drop and error counters of a set of namespaces.

A test that sends without a transport (no retransmission) fails when one datagram is lost. On
a loaded machine that can be a real drop (a full veth ring) or a bug; the counters tell which.
Take a :func:`snapshot` before the traffic and put :func:`grown` of a second one in the
failure message: every interface's ``ip -s link`` and ``ethtool -S`` counters and the
namespace's ``nstat`` (SNMP: UDP checksum errors, full receive buffers), those whose names
say drop or error and that moved.
"""

from __future__ import annotations

import json
import re

from mrckit import netns

LOSS_WORDS = re.compile(r"drop|err|miss|fail|discard|overflow|full|lost", re.IGNORECASE)


def _text(cmd: list[str], ns: str) -> str:
    return netns.run(cmd, ns=ns, check=False).stdout.decode(errors="replace")


def _links(ns: str) -> dict[str, int]:
    out: dict[str, int] = {}
    links = json.loads(_text(["ip", "-s", "-j", "link"], ns) or "[]")
    for link in links:
        name = link["ifname"]
        for direction, stats in link.get("stats64", {}).items():
            for key, value in stats.items():
                out[f"{name} {direction}_{key}"] = value
        for line in _text(["ethtool", "-S", name], ns).splitlines()[1:]:
            key, _, value = line.rpartition(":")
            if value.strip().isdigit():
                out[f"{name} {key.strip()}"] = int(value)
    return out


def _snmp(ns: str) -> dict[str, int]:
    out: dict[str, int] = {}
    # absolute values (-a), zeros too (-z), and nstat's history file left alone (-s)
    for line in _text(["nstat", "-asz"], ns).splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[1].isdigit():
            out[fields[0]] = int(fields[1])
    return out


def snapshot(namespaces: dict[str, str]) -> dict[str, int]:
    """Every counter of every namespace (``{node: namespace}``), keyed ``"node ifname counter"``
    or ``"node counter"`` (SNMP)."""
    out: dict[str, int] = {}
    for node, ns in namespaces.items():
        out.update({f"{node} {k}": v for k, v in _links(ns).items()})
        out.update({f"{node} {k}": v for k, v in _snmp(ns).items()})
    return out


def grown(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The drop and error counters that grew from ``before`` to ``after``, by how much."""
    return {k: v - before.get(k, 0) for k, v in sorted(after.items())
            if LOSS_WORDS.search(k.rsplit(" ", 1)[-1]) and v > before.get(k, 0)}
