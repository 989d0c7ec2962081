"""mrckit.topology: the fabric model, YAML schema, Clos generator, addressing plan, paths and
table compilation (design sections 3.3, 4 and 7). Imports only ``mrckit.wire`` (and errors).

Start with :func:`generate_clos` or :func:`load_topology`, then :func:`compile_fabric` for the
per-switch :class:`SwitchConfig` and per-host :class:`HostConfig`. See ``docs/topology.md``.
"""

from .compile import CompiledFabric, compile_fabric  # noqa: F401
from .entries import HostConfig, HostPort, SwitchConfig, SwitchPort, TableEntry  # noqa: F401
from .generate import generate_clos  # noqa: F401
from .model import FabricLinks, Host, HostLinks, Link, Switch, Topology, TopologyError  # noqa: F401
from .paths import EvClass, Path, ev_classes_for_link, path_for_ev, paths  # noqa: F401
from .plan import Role, mac_address, mac_str, parse_mac  # noqa: F401
from .walk import Trace, Walker, walk  # noqa: F401
from .yamlio import dump_topology, dumps_topology, load_topology, loads_topology  # noqa: F401
