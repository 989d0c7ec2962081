"""YAML load and dump of topologies (schema version 1, ``docs/topology.md``).

The loader keeps PyYAML's node marks so that every error names ``file:line`` and the problem:
a syntax error, an unknown or duplicate key, a wrong type, an unknown node, a duplicate port,
a host without a port in some plane, a field overflow (more than 16 planes, 256 T1 per plane,
1024 T0 per plane or 1024 downlinks per T0), or a stated uSID, NIC address or link name that
disagrees with the addressing plan (design 3.3).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import yaml
from yaml.constructor import SafeConstructor

from ..wire.addressing import nic_address
from ..wire.usid import DEFAULT_LOCATOR
from .model import (
    DEFAULT_ECN_THRESHOLD, DEFAULT_MTU, DEFAULT_TRIM_THRESHOLD, FabricLinks, GrpcEndpoint, GrpcTls, Host, HostLinks,
    Switch, Topology, TopologyError,
)
from .plan import Role, mac_address, mac_str, parse_mac

SCHEMA_VERSION = 1
TOP_KEYS = ("version", "planes", "locator", "mtu", "trim_threshold", "ecn_threshold", "switches", "hosts", "links")
SWITCH_KEYS = ("name", "role", "plane", "index", "usid", "p4runtime")
HOST_KEYS = ("name", "leaf", "downlink", "nic", "ports", "agent")
ENDPOINT_KEYS = ("address", "device_id", "tls")
TLS_KEYS = ("ca", "cert", "key", "server_name")
PORT_KEYS = ("address", "mac", "usid")
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_constructor = SafeConstructor()


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


@dataclass
class _Parsed:
    """What the loader read, with the line of each element for error messages."""

    path: str
    names: set[str] = field(default_factory=set)
    top: dict[str, yaml.Node] = field(default_factory=dict)
    top_lines: dict[str, int] = field(default_factory=dict)
    switches: list[Switch] = field(default_factory=list)
    switch_lines: list[int] = field(default_factory=list)
    switch_usids: list[tuple[int, int]] = field(default_factory=list)  # (switch id, stated uSID)
    hosts: list[Host] = field(default_factory=list)
    host_lines: list[int] = field(default_factory=list)
    host_nics: list[tuple[int, str]] = field(default_factory=list)
    host_ports: list[tuple[int, yaml.Node]] = field(default_factory=list)
    fabric: list[tuple[int, int, int, int]] = field(default_factory=list)
    fabric_lines: list[int] = field(default_factory=list)
    host_links: list[tuple[int, int, int, int]] = field(default_factory=list)
    host_link_lines: list[int] = field(default_factory=list)
    link_names: list[tuple[str, str, int]] = field(default_factory=list)  # (kind, stated name, row)

    def error(self, node_or_line, problem: str) -> TopologyError:
        line = node_or_line if isinstance(node_or_line, int) else _line(node_or_line)
        return TopologyError(problem).located(f"{self.path}:{line}")


def _scalar(p: _Parsed, node: yaml.Node, what: str):
    if not isinstance(node, yaml.ScalarNode):
        raise p.error(node, f"{what} must be a single value")
    try:
        return _constructor.construct_object(node)
    except yaml.YAMLError as exc:
        raise p.error(node, f"{what}: {exc}") from None


def _int(p: _Parsed, node: yaml.Node, what: str) -> int:
    value = _scalar(p, node, what)
    if isinstance(value, bool) or not isinstance(value, int):
        raise p.error(node, f"{what} must be an integer, got {node.value!r}")
    return value


def _name(p: _Parsed, node: yaml.Node, what: str) -> str:
    if not isinstance(node, yaml.ScalarNode):
        raise p.error(node, f"{what} must be a single value")
    return str(node.value)


def _mapping(p: _Parsed, node: yaml.Node, what: str, allowed: tuple[str, ...],
             required: tuple[str, ...]) -> dict[str, yaml.Node]:
    if not isinstance(node, yaml.MappingNode):
        raise p.error(node, f"{what} must be a mapping")
    out = {}
    for key_node, value_node in node.value:
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
        if key not in allowed:
            raise p.error(key_node, f"{what}: unknown key {key!r} (expected one of: {', '.join(allowed)})")
        if key in out:
            raise p.error(key_node, f"{what}: duplicate key {key!r}")
        out[key] = value_node
    for key in required:
        if key not in out:
            raise p.error(node, f"{what}: missing key {key!r}")
    return out


def _sequence(p: _Parsed, node: yaml.Node | None, what: str) -> list[yaml.Node]:
    if node is None:
        return []
    if not isinstance(node, yaml.SequenceNode):
        raise p.error(node, f"{what} must be a list")
    return node.value


def _check_unique_name(p: _Parsed, node: yaml.Node, name: str) -> None:
    if name in p.names:
        raise p.error(node, f"duplicate node name {name!r}")
    p.names.add(name)


def _parse_switches(p: _Parsed) -> None:
    for item in _sequence(p, p.top.get("switches"), "switches"):
        m = _mapping(p, item, "switch", SWITCH_KEYS, ("name", "role", "plane", "index"))
        name = _name(p, m["name"], "switch name")
        _check_unique_name(p, m["name"], name)
        role_text = _name(p, m["role"], f"switch {name}: role")
        if role_text not in (Role.T0.value, Role.T1.value):
            raise p.error(m["role"], f"switch {name}: role {role_text!r} is not t0 or t1")
        sw = Switch(name, Role(role_text), _int(p, m["plane"], f"switch {name}: plane"),
                    _int(p, m["index"], f"switch {name}: index"),
                    _endpoint(p, m["p4runtime"], f"switch {name}: p4runtime", True) if "p4runtime" in m else None)
        if "usid" in m:
            p.switch_usids.append((len(p.switches), _int(p, m["usid"], f"switch {name}: usid")))
        p.switches.append(sw)
        p.switch_lines.append(_line(item))


def _endpoint(p: _Parsed, node: yaml.Node, what: str, switch: bool) -> GrpcEndpoint:
    """An optional ``p4runtime:`` (switch) or ``agent:`` (host) mapping: where a controller
    reaches the node's gRPC server, with an optional device id (switches) and TLS."""
    m = _mapping(p, node, what, ENDPOINT_KEYS if switch else ("address", "tls"), ("address",))
    tls = None
    if "tls" in m:
        t = _mapping(p, m["tls"], f"{what}: tls", TLS_KEYS, ("ca",))
        try:
            tls = GrpcTls(**{k: _name(p, v, f"{what}: tls: {k}") for k, v in t.items()})
        except TopologyError as exc:
            raise p.error(m["tls"], f"{what}: {exc.problem}") from None
    device_id = _int(p, m["device_id"], f"{what}: device_id") if "device_id" in m else None
    try:
        return GrpcEndpoint(_name(p, m["address"], f"{what}: address"), device_id, tls)
    except TopologyError as exc:
        raise p.error(node, f"{what}: {exc.problem}") from None


def _parse_hosts(p: _Parsed) -> None:
    for item in _sequence(p, p.top.get("hosts"), "hosts"):
        m = _mapping(p, item, "host", HOST_KEYS, ("name", "leaf", "downlink"))
        name = _name(p, m["name"], "host name")
        _check_unique_name(p, m["name"], name)
        host = Host(name, _int(p, m["leaf"], f"host {name}: leaf"), _int(p, m["downlink"], f"host {name}: downlink"),
                    _endpoint(p, m["agent"], f"host {name}: agent", False) if "agent" in m else None)
        if "nic" in m:
            p.host_nics.append((len(p.hosts), _name(p, m["nic"], f"host {name}: nic")))
        if "ports" in m:
            p.host_ports.append((len(p.hosts), m["ports"]))
        p.hosts.append(host)
        p.host_lines.append(_line(item))


def _end(p: _Parsed, node: yaml.Node, nodes: dict[str, tuple[str, int]]) -> tuple[str, int, int]:
    text = _name(p, node, "link end")
    name, sep, port_text = text.rpartition(":")
    if not sep or not name:
        raise p.error(node, f"link end {text!r} is not <node>:<port>")
    if not port_text.isdigit():
        raise p.error(node, f"link end {text!r}: port {port_text!r} is not a non-negative integer")
    port = int(port_text)
    if name not in nodes:
        raise p.error(node, f"link end {text!r}: unknown node {name!r}")
    kind, nid = nodes[name]
    return kind, nid, port


def _parse_links(p: _Parsed) -> None:
    nodes = {s.name: (s.role.value, i) for i, s in enumerate(p.switches)}
    nodes.update({h.name: ("host", i) for i, h in enumerate(p.hosts)})
    for item in _sequence(p, p.top.get("links"), "links"):
        if not isinstance(item, yaml.SequenceNode) or len(item.value) not in (2, 3):
            raise p.error(item, "a link is [<node>:<port>, <node>:<port>] with an optional link name third")
        ends = sorted((_end(p, n, nodes) for n in item.value[:2]), key=lambda e: ("t0", "t1", "host").index(e[0]))
        (ka, a, pa), (kb, b, pb) = ends
        if ka != "t0" or kb == "t0":
            names = [n.value for n in item.value[:2]]
            raise p.error(item, f"link {names[0]} - {names[1]}: a link joins a T0 to a T1 or to a host")
        if kb == "t1":
            row, kind = len(p.fabric), "fabric_link"
            p.fabric.append((a, pa, b, pb))
            p.fabric_lines.append(_line(item))
        else:
            row, kind = len(p.host_links), "host_link"
            p.host_links.append((b, pb, a, pa))
            p.host_link_lines.append(_line(item))
        if len(item.value) == 3:
            p.link_names.append((kind, _name(p, item.value[2], "link name"), row))


def _locator(p: _Parsed) -> int:
    node = p.top.get("locator")
    if node is None:
        return DEFAULT_LOCATOR
    text = _name(p, node, "locator")
    try:
        net = ipaddress.IPv6Network(text, strict=True)
    except ValueError as exc:
        raise p.error(node, f"locator {text!r}: {exc}") from None
    if net.prefixlen != 32:
        raise p.error(node, f"locator {text!r} must be a /32 (design 3.1: a 32-bit uSID block)")
    return int(net.network_address) >> 96


def _build(p: _Parsed) -> Topology:
    def opt(key, default):
        return default if key not in p.top else _int(p, p.top[key], key)

    fabric = list(zip(*p.fabric)) or [(), (), (), ()]
    hosts = list(zip(*p.host_links)) or [(), (), (), ()]
    fields = dict(planes=_int(p, p.top["planes"], "planes"), locator=_locator(p), mtu=opt("mtu", DEFAULT_MTU),
                  trim_threshold=opt("trim_threshold", DEFAULT_TRIM_THRESHOLD),
                  ecn_threshold=opt("ecn_threshold", DEFAULT_ECN_THRESHOLD))
    try:
        return Topology(switches=tuple(p.switches), hosts=tuple(p.hosts),
                        fabric_links=FabricLinks(*(np.asarray(c, dtype=np.int32) for c in fabric)),
                        host_links=HostLinks(*(np.asarray(c, dtype=np.int32) for c in hosts)), **fields)
    except TopologyError as exc:
        raise exc.located(f"{p.path}:{_ref_line(p, exc.ref)}") from None


def _ref_line(p: _Parsed, ref: tuple | None) -> int:
    if ref is None:
        return 1
    kind, key = ref
    lines = {"switch": p.switch_lines, "host": p.host_lines, "fabric_link": p.fabric_lines,
             "host_link": p.host_link_lines}
    if kind in lines:
        return lines[kind][key]
    return p.top_lines.get(key, 1)


def _check_stated(p: _Parsed, topo: Topology) -> None:
    """Optional fields that restate the plan must agree with it."""
    for sid, usid in p.switch_usids:
        sw = topo.switches[sid]
        if usid != sw.usid:
            raise p.error(p.switch_lines[sid], f"switch {sw.name}: usid 0x{usid:04x} disagrees with the plan: "
                                               f"{sw.role.value} {sw.index} of plane {sw.plane} is 0x{sw.usid:04x}")
    for hid, text in p.host_nics:
        host = topo.hosts[hid]
        try:
            stated = ipaddress.IPv6Address(text)
        except ValueError:
            raise p.error(p.host_lines[hid], f"host {host.name}: nic {text!r} is not an IPv6 address") from None
        if stated != nic_address(host.leaf, host.downlink):
            raise p.error(p.host_lines[hid], f"host {host.name}: nic {stated} disagrees with the plan: leaf "
                                             f"{host.leaf}, downlink {host.downlink} is {host.nic_address}")
    for hid, node in p.host_ports:
        _check_host_ports(p, topo, topo.hosts[hid], node)
    for kind, named, row in p.link_names:
        link = topo.fabric_link(row) if kind == "fabric_link" else topo.host_link(row)
        if named != link.name:
            line = (p.fabric_lines if kind == "fabric_link" else p.host_link_lines)[row]
            raise p.error(line, f"link {link.a}:{link.a_port} - {link.b}:{link.b_port}: name {named!r} "
                                f"disagrees with the plan: it is {link.name}")


_SHOW: dict[str, Callable[[Any], str]] = {"address": str, "mac": mac_str, "usid": lambda usid: f"0x{usid:04x}"}


def _port_field(p: _Parsed, what: str, key: str, node: yaml.Node):
    if key == "usid":
        return _int(p, node, f"{what}: usid")
    text = _name(p, node, f"{what}: {key}")
    try:
        return ipaddress.IPv6Address(text) if key == "address" else parse_mac(text)
    except ValueError as exc:
        raise p.error(node, f"{what}: {key}: {exc}") from None


def _check_host_ports(p: _Parsed, topo: Topology, host: Host, node: yaml.Node) -> None:
    """A host's optional ``ports`` list: per plane, the port address, MAC and downlink uSID."""
    items = _sequence(p, node, f"host {host.name}: ports")
    if len(items) != topo.planes:
        raise p.error(node, f"host {host.name}: ports lists {len(items)} ports; there is one per plane "
                            f"({topo.planes})")
    for plane, item in enumerate(items):
        what = f"host {host.name}: port {plane}"
        plan = {"address": host.port_address(plane), "usid": host.downlink_usid(plane),
                "mac": mac_address(Role.HOST, plane, host.leaf, host.downlink)}
        for key, value_node in _mapping(p, item, what, PORT_KEYS, ()).items():
            stated = _port_field(p, what, key, value_node)
            if stated != plan[key]:
                raise p.error(value_node, f"{what}: {key} {_SHOW[key](stated)} disagrees with the plan: "
                                          f"{_SHOW[key](plan[key])} (plane {plane}, leaf {host.leaf}, "
                                          f"downlink {host.downlink})")


def loads_topology(text: str, path: str = "<string>") -> Topology:
    """Parse a topology from YAML text; ``path`` is used in error messages.

    Raises:
        TopologyError: the message starts with ``path:line:`` and names the problem.
    """
    p = _Parsed(path)
    try:
        root = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise p.error((mark.line + 1) if mark else 1, f"YAML syntax error: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise p.error(1, f"YAML error: {exc}") from None
    if root is None:
        raise p.error(1, "empty file: expected a topology mapping (docs/topology.md)")
    p.top = _mapping(p, root, "topology", TOP_KEYS, ("version", "planes", "switches", "hosts", "links"))
    p.top_lines = {k.value: _line(k) for k, _ in root.value}
    version = _int(p, p.top["version"], "version")
    if version != SCHEMA_VERSION:
        raise p.error(p.top["version"], f"version {version} is not supported (this mrckit reads version "
                                        f"{SCHEMA_VERSION})")
    _parse_switches(p)
    _parse_hosts(p)
    _parse_links(p)
    topo = _build(p)
    _check_stated(p, topo)
    return topo


def load_topology(path: str) -> Topology:
    """Read and validate a topology YAML file.

    Raises:
        TopologyError: ``file:line: problem`` for a malformed or invalid file, or
            ``file: cannot read: ...`` when it cannot be read.
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise TopologyError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise TopologyError(f"{path}: not a UTF-8 text file ({exc.reason} at byte {exc.start})") from None
    return loads_topology(text, path)


def dumps_topology(topo: Topology) -> str:
    """The YAML text of ``topo`` (schema version 1), with every plan-derived field stated: each
    switch's uSID; each host's NIC address and, per plane, port address, MAC and downlink uSID;
    each link's name."""
    out = [f"# mrckit topology, schema version {SCHEMA_VERSION} (docs/topology.md): {topo.summary()}",
           f"version: {SCHEMA_VERSION}", f"planes: {topo.planes}",
           f"locator: {ipaddress.IPv6Network((topo.locator << 96, 32))}",
           f"mtu: {topo.mtu}", f"trim_threshold: {topo.trim_threshold}", f"ecn_threshold: {topo.ecn_threshold}",
           "switches:"]
    out += [f"  - {{name: {s.name}, role: {s.role.value}, plane: {s.plane}, index: {s.index}, "
            f"usid: 0x{s.usid:04x}{_endpoint_yaml('p4runtime', s.p4runtime)}}}" for s in topo.switches]
    out.append("hosts:")
    for h in topo.hosts:
        out += [f"  - name: {h.name}", f"    leaf: {h.leaf}", f"    downlink: {h.downlink}"]
        out += [f"    {_endpoint_yaml('agent', h.agent)[2:]}"] if h.agent else []
        out += [f"    nic: \"{h.nic_address}\"", "    ports:  # per plane: port address, MAC, downlink uSID"]
        out += [f"      - {{address: \"{h.port_address(pl)}\", mac: \"{mac_str(mac_address(Role.HOST, pl, h.leaf, h.downlink))}\", "
                f"usid: 0x{h.downlink_usid(pl):04x}}}" for pl in range(topo.planes)]
    out.append("links:")
    out += [f"  - [{ln.a}:{ln.a_port}, {ln.b}:{ln.b_port}, {ln.name}]" for ln in topo.links()]
    return "\n".join(out) + "\n"


def _endpoint_yaml(key: str, ep: GrpcEndpoint | None) -> str:
    """``, key: {address: ..., ...}`` (flow style), or '' when there is no endpoint."""
    if ep is None:
        return ""
    fields = [f"address: {json.dumps(ep.address)}"]
    if ep.device_id is not None:
        fields.append(f"device_id: {ep.device_id}")
    if ep.tls is not None:
        tls = [f"{k}: {json.dumps(v)}" for k in TLS_KEYS if (v := getattr(ep.tls, k)) is not None]
        fields.append(f"tls: {{{', '.join(tls)}}}")
    return f", {key}: {{{', '.join(fields)}}}"


def dump_topology(topo: Topology, path: str) -> None:
    """Write ``topo`` as YAML to ``path`` (see :func:`dumps_topology`)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(dumps_topology(topo))
