"""mrckit: a P4 and eBPF dataplane toolkit for MRC (Multipath Reliable Connection).

Layering (design section 2): ``wire`` and ``bpf`` import nothing else of mrckit; ``topology``
and ``endpoint`` import only ``wire``; ``switch`` and ``host`` add ``bpf`` and ``proto``;
``control`` talks to switches and hosts over gRPC only; ``fabric`` composes everything; ``cli``
is the only module that parses arguments or prints for humans.
"""

__version__ = "0.1.0"
