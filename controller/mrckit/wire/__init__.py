"""The mrckit MRC wire profile (design section 3): constants, codecs and scapy layers.

This package imports nothing else of mrckit.
"""

from .constants import *  # noqa: F401,F403
from .ev import EvFields, ev_from_wire, ev_pack, ev_to_wire, ev_unpack  # noqa: F401
from .usid import (  # noqa: F401
    DEFAULT_LOCATOR, UsidFields, active_prefix, container_pack, container_unpack, un_shift,
    usid_pack, usid_unpack,
)
from .addressing import (  # noqa: F401
    HostLocation, LinkName, host_link_name, nic_address, parse_link_name, parse_nic_address,
    parse_port_address, path_da, path_usids, port_address, t1_link_name,
)
