"""mrckit.topology: the fabric model, YAML schema, Clos generator, addressing plan, paths and
table compilation (design sections 3.3, 4 and 7). Imports only ``mrckit.wire`` (and errors).

Start with :func:`generate_clos` or :func:`load_topology`, then :func:`compile_fabric` for the
per-switch :class:`SwitchConfig` and per-host :class:`HostConfig`. See ``docs/topology.md``.
"""

from .entries import HostConfig, HostPort, SwitchConfig, SwitchPort, TableEntry  # noqa: F401
from .generate import generate_clos  # noqa: F401
from .model import FabricLinks, Host, HostLinks, Link, Switch, Topology, TopologyError  # noqa: F401
from .plan import Role, mac_address, mac_str, parse_mac  # noqa: F401
