"""mrckit.bpf: a small ctypes layer over libbpf 1.1 (``libbpf.so.1``); no compiler at runtime.

Loads the objects ``make bpf`` compiles, runs programs with BPF_PROG_TEST_RUN, reads and writes
maps, attaches XDP and tc programs, pins. Every failure raises :class:`BpfError`. The manual,
with examples: ``docs/bpf.md``.
"""

from ._libbpf import (BPF_ANY, BPF_EXIST, BPF_F_TEST_RUN_ON_CPU, BPF_F_TEST_XDP_LIVE_FRAMES,
                      BPF_NOEXIST, possible_cpus)
from ._libbpf import version as libbpf_version
from .attach import (XdpInfo, ifindex_of, tc_attach, tc_detach, tc_hook_destroy, tc_query,
                     xdp_attach, xdp_detach, xdp_query)
from .btf import FieldLayout, StructLayout, btf_struct_layout, ctypes_layout, layout_mismatches
from .errors import BpfError
from .fs import BPFFS, PIN_ROOT, bpffs_mounted, ensure_bpffs, pin_path, unpin
from .maps import Map, sum_values
from .mmapped import MmapArray
from .objects import (OBJ_DIR, BpfObject, ObjectMap, Program, RunResult, XdpMd, object_path, prog_map_ids,
                      run_stats_enabled)
from .ringbuf import RingBuffer

# XDP actions (enum xdp_action) and tc verdicts, for test assertions.
XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_TX, XDP_REDIRECT = range(5)
TC_ACT_OK, TC_ACT_SHOT, TC_ACT_REDIRECT = 0, 2, 7

__all__ = [
    "BPF_ANY", "BPF_EXIST", "BPF_F_TEST_RUN_ON_CPU", "BPF_F_TEST_XDP_LIVE_FRAMES", "BPF_NOEXIST",
    "BPFFS", "PIN_ROOT", "OBJ_DIR", "BpfError", "BpfObject", "FieldLayout", "Map", "MmapArray", "ObjectMap",
    "Program", "RingBuffer", "RunResult", "StructLayout", "XdpInfo", "XdpMd", "btf_struct_layout",
    "bpffs_mounted", "ctypes_layout", "ensure_bpffs", "ifindex_of", "layout_mismatches", "libbpf_version", "object_path",
    "pin_path", "possible_cpus", "prog_map_ids", "run_stats_enabled", "sum_values", "tc_attach", "tc_detach",
    "tc_hook_destroy",
    "tc_query", "unpin", "xdp_attach", "xdp_detach", "xdp_query",
    "XDP_ABORTED", "XDP_DROP", "XDP_PASS", "XDP_TX", "XDP_REDIRECT",
    "TC_ACT_OK", "TC_ACT_SHOT", "TC_ACT_REDIRECT",
]
