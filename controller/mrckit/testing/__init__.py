"""``mrckit.testing``: scapy-driven packet tests of a switch program on every target, in the
style of p4lang's PTF (docs/packet-tests.md).

- :class:`SwitchUnderTest`: one target (``ebpf``, ``bmv2``, ``kernel`` or ``remote``) with N
  ports, wired to a tester; ``send``, ``expect`` (bytes, scapy packets or a :class:`Mask`),
  ``expect_drop`` by counters, ``expect_nothing_else`` after one quiet period for all ports,
  counter reads, and tables by P4 names (``tables``).
- :class:`Program`: a user's P4 program for bmv2 (JSON + P4Info); :class:`Remote`: an existing
  P4Runtime server and the tester interfaces wired to it.
- The pytest plugin (``mrckit.testing.plugin``, registered through ``pytest11``) gives the
  fixtures ``mrc_switch`` and ``mrc_tables``, the marker ``mrc_targets`` and the options
  ``--mrc-target``, ``--mrc-keep``, ``--mrc-bmv2-json``/``--mrc-bmv2-p4info`` and
  ``--mrc-remote``.
"""

from ..topology.entries import ActionProfileGroup, ActionProfileMember, TableEntry
from ..wire.constants import DropReason
from .mask import Mask
from .session import PacketCheckFailed, SwitchUnderTest, TableWriter, counter_deltas, drop_reason_index
from .tables import Entity, Tables, slot, tables_of
from .targets import FEATURES, LOCAL_TARGETS, TARGET_NAMES, Program, Remote, Target, Unsupported, skip_reason
from .tester import Tester, is_noise
from .wiring import PORTS, Wiring, build_wiring, remove_wiring

__all__ = [
    "ActionProfileGroup", "ActionProfileMember", "DropReason", "Entity", "FEATURES", "LOCAL_TARGETS", "Mask",
    "PORTS", "PacketCheckFailed", "Program", "Remote", "SwitchUnderTest", "TARGET_NAMES", "TableEntry",
    "TableWriter", "Tables", "Target", "Tester", "Unsupported", "Wiring", "build_wiring", "counter_deltas",
    "drop_reason_index", "is_noise", "remove_wiring", "skip_reason", "slot", "tables_of",
]
