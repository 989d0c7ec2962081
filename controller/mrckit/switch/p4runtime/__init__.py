"""A P4Runtime server in front of an eBPF switch's BPF maps (design sections 4 and 7).

The controller programs the eBPF switch exactly like bmv2: arbitration on StreamChannel,
Set/GetForwardingPipelineConfig with the P4Info of ``p4src/mrc_switch.p4``, Write and Read of
table entries, Read of counters, Capabilities. Layers, bottom up:

- ``bytestrings``, ``p4info``, ``entries``: P4Runtime values, checked against the pipeline
  contract ``mrckit.wire.pipeline.MRC_SWITCH``;
- ``backend``: the switch's tables by P4 names (``mrckit.switch.ebpf_target.SwitchTables``);
- ``view``, ``arbitration``, ``store``, ``device``: server state and request semantics;
- ``service``, ``server``, ``process``: gRPC, sockets and TLS, one process per switch.

>>> from mrckit.switch.p4runtime import Device, P4RuntimeServer, EbpfBackend, MRC_SWITCH  # doctest: +SKIP
>>> P4RuntimeServer(Device(EbpfBackend.open("s0"), MRC_SWITCH), "unix:/run/mrckit/s0.sock").start()  # doctest: +SKIP
"""

from ...wire.pipeline import MRC_SWITCH, Contract
from .backend import Backend, EbpfBackend
from .device import Device
from .errors import P4RuntimeError
from .server import DEFAULT_ADDRESS, P4RuntimeServer, TlsFiles

__all__ = ["Backend", "EbpfBackend", "MRC_SWITCH", "Contract", "Device", "P4RuntimeError",
           "DEFAULT_ADDRESS", "P4RuntimeServer", "TlsFiles"]
