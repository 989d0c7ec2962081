"""The mrckit MRC wire profile (design section 3): constants, codecs and scapy layers.

This package imports nothing else of mrckit. Importing it does not import scapy: the scapy
layers are in :mod:`mrckit.wire.layers` and whole frames in :mod:`mrckit.wire.packet`. The
hot-path struct codecs are :mod:`mrckit.wire.headers` (BTH through EETH) and
:mod:`mrckit.wire.ipv6` (Ethernet, IPv6 and UDP headers with the EV applied).
See ``docs/wire-format.md``.
"""

from ._check import check_range  # noqa: F401  (the codecs' range check, for the layers above)
from .constants import *  # noqa: F401,F403
from .ev import EvFields, ev_from_flowinfo, ev_from_wire, ev_pack, ev_plane, ev_t1, ev_to_wire, ev_unpack  # noqa: F401
from .usid import (  # noqa: F401
    DEFAULT_LOCATOR, UsidFields, active_prefix, container_pack, container_unpack, to_ipv6,
    un_shift, usid_pack, usid_unpack,
)
from .icrc import icrc_append, icrc_bytes, icrc_check, icrc_compute  # noqa: F401
from .stack import HEADER_LENS, header_stack, headers_len  # noqa: F401
from .addressing import (  # noqa: F401
    HostLocation, LinkName, host_link_name, nic_address, parse_link_name, parse_nic_address,
    parse_port_address, path_da, path_usids, port_address, t1_link_name,
)
