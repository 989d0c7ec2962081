"""mrckit.bpf: a small ctypes layer over libbpf 1.1 (``libbpf.so.1``); no compiler at runtime.

Objects are compiled ahead of time by ``make bpf`` (``ebpf/<name>.bpf.c`` ->
``mrckit/bpf/obj/<name>.bpf.o``). This package imports nothing else of mrckit but ``errors``.
Every failure raises :class:`BpfError` (a ``MrcError``) with ``.errno`` and, for loads, ``.log``
(the full verifier log).

Load and run::

    from mrckit import bpf
    with bpf.BpfObject.open("test_xdp_pass") as obj:      # name or path; closes on exit
        obj.load()                                         # BpfError(.log=verifier log)
        prog = obj.program("xdp_pass")                     # Program: .name .fd .id
        res = prog.test_run(pkt_bytes, repeat=100)         # RunResult(retval, data, duration_ns, ctx)
    # before load: obj.program(n).set_autoload(False); any loaded program: Program.from_id(id),
    # Program.from_pin(path), prog.pin(path) (from_* own their fd: close() or ``with``)
        # packet generator: prog.test_run(pkt, repeat=N, flags=bpf.BPF_F_TEST_XDP_LIVE_FRAMES,
        #                                 ctx=bpf.XdpMd(ingress_ifindex=ifindex))
    with bpf.run_stats_enabled():                          # kernel run-time stats while inside
        ...; prog.run_stats()                              # (run_time_ns, run_cnt) of real runs

Maps (``obj.map(name, key_type=, value_type=)``, ``Map.from_pin(path)``, ``m.typed(K, V)``)::

    m.key_size, m.value_size, m.max_entries, m.map_type, m.type_name, m.percpu, m.fd
    m.update(key, value[, flags=bpf.BPF_NOEXIST])   # bytes, int, or ctypes objects
    m.lookup(key)        # value or None; per-CPU maps: list with one value per possible CPU
    m.lookup_sum(key)    # per-CPU values summed field by field (counters); see sum_values()
    m.delete(key) -> bool; m.keys(); m.items(); m.items_sum(); m.clear()
    m.pin(path); bpf.Map.unpin(path); Map.from_pin(path) (owns its fd: use ``with``)

Before ``load()``: ``obj.map(n).set_max_entries(k)``; ``obj.map(n).reuse_pin(path)`` (a restarted
process reattaches to pinned state) or ``.set_pin_path(path)`` (reuse if pinned, else pin after
load); or ``BpfObject.open(name, pin_root=dir)`` for maps declared ``LIBBPF_PIN_BY_NAME``.
Maps and programs of an object are valid until the object is closed; attachments and pins
outlive it.

Attach (acts in the CALLING THREAD's netns; wrap in ``with mrckit.netns.enter(ns):``)::

    mode = bpf.xdp_attach("eth0", prog, mode="auto")  # "native"|"generic"|"auto" -> mode got
    bpf.xdp_attach("eth0", new, "native", replace=True)          # replace whatever is there
    bpf.xdp_attach("eth0", new, "native", expected=old_prog)     # atomic, only if old_prog is there
    bpf.xdp_query("eth0")                              # XdpInfo(mode, prog_id, drv_prog_id, skb_prog_id)
    bpf.xdp_detach("eth0") -> bool
    bpf.tc_attach("eth0", prog, "egress", handle=1, priority=1)   # creates clsact if needed
    bpf.tc_detach("eth0", "egress")  # removes clsact too once no filter is left
    bpf.tc_query("eth0", "egress") -> prog id or 0; bpf.tc_hook_destroy("eth0")

Pins: ``bpf.ensure_bpffs()`` mounts /sys/fs/bpf if needed and creates ``bpf.PIN_ROOT``
(``/sys/fs/bpf/mrckit``); ``bpf.pin_path("sw1", "counters")`` -> ``PIN_ROOT/sw1/counters``.

Layouts: ``bpf.btf_struct_layout(obj_or_path_or_name, "port_stats")`` -> StructLayout(size,
fields{name: FieldLayout(offset, size, ...)}) from the object's BTF;
``bpf.layout_mismatches(MyCtypesStruct, layout) == []`` proves a ctypes mirror equals C.
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
from .objects import OBJ_DIR, BpfObject, ObjectMap, Program, RunResult, XdpMd, object_path, run_stats_enabled

# XDP actions (enum xdp_action) and tc verdicts, for test assertions.
XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_TX, XDP_REDIRECT = range(5)
TC_ACT_OK, TC_ACT_SHOT, TC_ACT_REDIRECT = 0, 2, 7

__all__ = [
    "BPF_ANY", "BPF_EXIST", "BPF_F_TEST_RUN_ON_CPU", "BPF_F_TEST_XDP_LIVE_FRAMES", "BPF_NOEXIST",
    "BPFFS", "PIN_ROOT", "OBJ_DIR", "BpfError", "BpfObject", "FieldLayout", "Map", "ObjectMap",
    "Program", "RunResult", "StructLayout", "XdpInfo", "XdpMd", "btf_struct_layout",
    "bpffs_mounted", "ctypes_layout", "ensure_bpffs", "ifindex_of", "layout_mismatches", "libbpf_version", "object_path",
    "pin_path", "possible_cpus", "run_stats_enabled", "sum_values", "tc_attach", "tc_detach", "tc_hook_destroy",
    "tc_query", "unpin", "xdp_attach", "xdp_detach", "xdp_query",
    "XDP_ABORTED", "XDP_DROP", "XDP_PASS", "XDP_TX", "XDP_REDIRECT",
    "TC_ACT_OK", "TC_ACT_SHOT", "TC_ACT_REDIRECT",
]
