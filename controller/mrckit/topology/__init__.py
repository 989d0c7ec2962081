"""mrckit.topology: the fabric model, YAML schema, Clos generator, addressing plan, paths and
table compilation (design sections 3.3, 4 and 7). Imports only ``mrckit.wire`` (and errors).

Start with :func:`generate_clos` or :func:`load_topology`, then :func:`compile_fabric` for the
per-switch :class:`SwitchConfig` and per-host :class:`HostConfig`; ``compile_fabric(topo,
mode="ecmp")`` compiles EV-hash mode (``ecmp.py``). See ``docs/topology.md``.
"""

from .compile import CompiledFabric, compile_fabric
from .ecmp import ALL_UPLINKS_GROUP, leaf_group_id, leaf_prefix, member_id
from .entries import (
    MODES, ActionProfileGroup, ActionProfileMember, HostConfig, HostPort, SwitchConfig, SwitchPort, TableEntry,
)
from .generate import generate_clos
from .model import FabricLinks, GrpcEndpoint, GrpcTls, Host, HostLinks, Link, Switch, Topology, TopologyError
from .paths import EvClass, Path, ev_classes_for_link, path_for_ev, paths
from .plan import Role, mac_address, mac_str, parse_mac
from .walk import Trace, Walker, walk
from .yamlio import dump_topology, dumps_topology, load_topology, loads_topology

__all__ = [
    "CompiledFabric", "compile_fabric", "ALL_UPLINKS_GROUP", "leaf_group_id", "leaf_prefix", "member_id", "MODES",
    "ActionProfileGroup", "ActionProfileMember", "HostConfig", "HostPort", "SwitchConfig", "SwitchPort", "TableEntry",
    "generate_clos", "FabricLinks", "GrpcEndpoint", "GrpcTls", "Host", "HostLinks", "Link", "Switch", "Topology", "TopologyError",
    "EvClass", "Path", "ev_classes_for_link", "path_for_ev", "paths", "Role", "mac_address", "mac_str",
    "parse_mac", "Trace", "Walker", "walk", "dump_topology", "dumps_topology", "load_topology", "loads_topology",
]
