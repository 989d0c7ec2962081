"""ctypes bindings to the parts of libbpf 1.1 (``libbpf.so.1``) that mrckit uses.

Only declarations live here: function prototypes, the ``*_opts`` structs of
``/usr/include/bpf/{libbpf,bpf}.h`` and the kernel's ``bpf_map_info``/``bpf_prog_info`` prefixes
(``include/uapi/linux/bpf.h``). libbpf 1.x reports errors as a negative errno from ``int``
functions and as NULL plus ``errno`` from pointer functions; :func:`check` and
:func:`check_ptr` turn both into :class:`~mrckit.bpf.errors.BpfError`.

libbpf's warnings (the verifier log among them) reach Python through ``libbpf_set_print``;
:func:`capture` collects them for the calling thread while it loads an object.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import platform
import threading
from collections.abc import Iterator
from ctypes import (CFUNCTYPE, POINTER, Structure, c_bool, c_char, c_char_p, c_int, c_int64,
                    c_size_t, c_uint8, c_uint32, c_uint64, c_void_p)

from .errors import BpfError

log = logging.getLogger("mrckit.bpf")

lib: ctypes.CDLL | None
LOAD_ERROR: str | None
try:
    lib = ctypes.CDLL("libbpf.so.1", use_errno=True)
except OSError as exc:  # pragma: no cover - depends on the machine
    lib = None
    LOAD_ERROR = f"libbpf.so.1 not found ({exc}); install it with: apt-get install libbpf1"
else:
    LOAD_ERROR = None
_libc = ctypes.CDLL(None, use_errno=True)

# --- constants (uapi linux/bpf.h, if_link.h) ---
BPF_ANY, BPF_NOEXIST, BPF_EXIST = 0, 1, 2
BPF_F_TEST_RUN_ON_CPU = 1 << 0
BPF_F_TEST_XDP_LIVE_FRAMES = 1 << 1
XDP_FLAGS_UPDATE_IF_NOEXIST = 1 << 0
XDP_FLAGS_SKB_MODE = 1 << 1
XDP_FLAGS_DRV_MODE = 1 << 2
XDP_FLAGS_HW_MODE = 1 << 3
XDP_FLAGS_REPLACE = 1 << 4
XDP_ATTACHED_NONE, XDP_ATTACHED_DRV, XDP_ATTACHED_SKB, XDP_ATTACHED_HW, XDP_ATTACHED_MULTI = range(5)
BPF_TC_INGRESS, BPF_TC_EGRESS = 1, 2
BTF_KIND_STRUCT, BTF_KIND_UNION = 4, 5

# enum bpf_map_type values whose values are stored once per possible CPU.
PERCPU_MAP_TYPES = {5: "percpu_hash", 6: "percpu_array", 10: "lru_percpu_hash",
                    21: "percpu_cgroup_storage"}
MAP_TYPE_NAMES = {0: "unspec", 1: "hash", 2: "array", 3: "prog_array", 4: "perf_event_array",
                  5: "percpu_hash", 6: "percpu_array", 7: "stack_trace", 8: "cgroup_array",
                  9: "lru_hash", 10: "lru_percpu_hash", 11: "lpm_trie", 12: "array_of_maps",
                  13: "hash_of_maps", 14: "devmap", 15: "sockmap", 16: "cpumap", 17: "xskmap",
                  18: "sockhash", 20: "reuseport_sockarray", 22: "queue", 23: "stack",
                  25: "devmap_hash", 27: "ringbuf"}


class ObjectOpenOpts(Structure):
    _fields_ = [("sz", c_size_t), ("object_name", c_char_p), ("relaxed_maps", c_bool),
                ("pin_root_path", c_char_p), ("_attach_prog_fd", c_uint32), ("kconfig", c_char_p),
                ("btf_custom_path", c_char_p), ("kernel_log_buf", c_void_p),
                ("kernel_log_size", c_size_t), ("kernel_log_level", c_uint32)]


class TestRunOpts(Structure):
    _fields_ = [("sz", c_size_t), ("data_in", c_void_p), ("data_out", c_void_p),
                ("data_size_in", c_uint32), ("data_size_out", c_uint32), ("ctx_in", c_void_p),
                ("ctx_out", c_void_p), ("ctx_size_in", c_uint32), ("ctx_size_out", c_uint32),
                ("retval", c_uint32), ("repeat", c_int), ("duration", c_uint32),
                ("flags", c_uint32), ("cpu", c_uint32), ("batch_size", c_uint32)]


class XdpAttachOpts(Structure):
    _fields_ = [("sz", c_size_t), ("old_prog_fd", c_int)]


class XdpQueryOpts(Structure):
    _fields_ = [("sz", c_size_t), ("prog_id", c_uint32), ("drv_prog_id", c_uint32),
                ("hw_prog_id", c_uint32), ("skb_prog_id", c_uint32), ("attach_mode", c_uint8)]


class TcHook(Structure):
    _fields_ = [("sz", c_size_t), ("ifindex", c_int), ("attach_point", c_int), ("parent", c_uint32)]


class TcOpts(Structure):
    _fields_ = [("sz", c_size_t), ("prog_fd", c_int), ("flags", c_uint32), ("prog_id", c_uint32),
                ("handle", c_uint32), ("priority", c_uint32)]


class MapInfo(Structure):
    """Prefix of the kernel's ``struct bpf_map_info`` (the kernel accepts a shorter struct)."""
    _fields_ = [("type", c_uint32), ("id", c_uint32), ("key_size", c_uint32),
                ("value_size", c_uint32), ("max_entries", c_uint32), ("map_flags", c_uint32),
                ("name", c_char * 16)]


class ProgInfo(Structure):
    """Prefix of the kernel's ``struct bpf_prog_info`` up to ``run_cnt`` (include/uapi/linux/bpf.h);
    the kernel fills the prefix it is given."""
    _fields_ = [("type", c_uint32), ("id", c_uint32), ("tag", c_uint8 * 8),
                ("jited_prog_len", c_uint32), ("xlated_prog_len", c_uint32),
                ("jited_prog_insns", c_uint64), ("xlated_prog_insns", c_uint64),
                ("load_time", c_uint64), ("created_by_uid", c_uint32), ("nr_map_ids", c_uint32),
                ("map_ids", c_uint64), ("name", c_char * 16),
                ("ifindex", c_uint32), ("gpl_compatible", c_uint32), ("netns_dev", c_uint64),
                ("netns_ino", c_uint64), ("nr_jited_ksyms", c_uint32), ("nr_jited_func_lens", c_uint32),
                ("jited_ksyms", c_uint64), ("jited_func_lens", c_uint64), ("btf_id", c_uint32),
                ("func_info_rec_size", c_uint32), ("func_info", c_uint64), ("nr_func_info", c_uint32),
                ("nr_line_info", c_uint32), ("line_info", c_uint64), ("jited_line_info", c_uint64),
                ("nr_jited_line_info", c_uint32), ("line_info_rec_size", c_uint32),
                ("jited_line_info_rec_size", c_uint32), ("nr_prog_tags", c_uint32), ("prog_tags", c_uint64),
                ("run_time_ns", c_uint64), ("run_cnt", c_uint64)]


class BtfType(Structure):
    _fields_ = [("name_off", c_uint32), ("info", c_uint32), ("size", c_uint32)]


class BtfMember(Structure):
    _fields_ = [("name_off", c_uint32), ("type", c_uint32), ("offset", c_uint32)]


PRINT_FN = CFUNCTYPE(c_int, c_int, c_char_p, c_void_p)

_PROTOS = {
    "bpf_object__open_file": (c_void_p, [c_char_p, POINTER(ObjectOpenOpts)]),
    "bpf_object__load": (c_int, [c_void_p]),
    "bpf_object__close": (None, [c_void_p]),
    "bpf_object__btf": (c_void_p, [c_void_p]),
    "bpf_object__find_program_by_name": (c_void_p, [c_void_p, c_char_p]),
    "bpf_object__find_map_by_name": (c_void_p, [c_void_p, c_char_p]),
    "bpf_object__next_program": (c_void_p, [c_void_p, c_void_p]),
    "bpf_object__next_map": (c_void_p, [c_void_p, c_void_p]),
    "bpf_program__name": (c_char_p, [c_void_p]),
    "bpf_program__section_name": (c_char_p, [c_void_p]),
    "bpf_program__fd": (c_int, [c_void_p]),
    "bpf_program__set_autoload": (c_int, [c_void_p, c_bool]),
    "bpf_map__name": (c_char_p, [c_void_p]),
    "bpf_map__fd": (c_int, [c_void_p]),
    "bpf_map__type": (c_int, [c_void_p]),
    "bpf_map__key_size": (c_uint32, [c_void_p]),
    "bpf_map__value_size": (c_uint32, [c_void_p]),
    "bpf_map__max_entries": (c_uint32, [c_void_p]),
    "bpf_map__set_max_entries": (c_int, [c_void_p, c_uint32]),
    "bpf_map__reuse_fd": (c_int, [c_void_p, c_int]),
    "bpf_map__set_pin_path": (c_int, [c_void_p, c_char_p]),
    "bpf_map__is_internal": (c_bool, [c_void_p]),
    "bpf_map__set_initial_value": (c_int, [c_void_p, c_void_p, c_size_t]),
    "bpf_map__initial_value": (c_void_p, [c_void_p, POINTER(c_size_t)]),
    "bpf_map_lookup_elem": (c_int, [c_int, c_void_p, c_void_p]),
    "bpf_map_update_elem": (c_int, [c_int, c_void_p, c_void_p, c_uint64]),
    "bpf_map_delete_elem": (c_int, [c_int, c_void_p]),
    "bpf_map_get_next_key": (c_int, [c_int, c_void_p, c_void_p]),
    "bpf_obj_pin": (c_int, [c_int, c_char_p]),
    "bpf_obj_get": (c_int, [c_char_p]),
    "bpf_obj_get_info_by_fd": (c_int, [c_int, c_void_p, POINTER(c_uint32)]),
    "bpf_prog_get_fd_by_id": (c_int, [c_uint32]),
    "bpf_enable_stats": (c_int, [c_int]),
    "bpf_map_get_fd_by_id": (c_int, [c_uint32]),
    "bpf_prog_test_run_opts": (c_int, [c_int, POINTER(TestRunOpts)]),
    "bpf_xdp_attach": (c_int, [c_int, c_int, c_uint32, POINTER(XdpAttachOpts)]),
    "bpf_xdp_detach": (c_int, [c_int, c_uint32, POINTER(XdpAttachOpts)]),
    "bpf_xdp_query": (c_int, [c_int, c_int, POINTER(XdpQueryOpts)]),
    "bpf_tc_hook_create": (c_int, [POINTER(TcHook)]),
    "bpf_tc_hook_destroy": (c_int, [POINTER(TcHook)]),
    "bpf_tc_attach": (c_int, [POINTER(TcHook), POINTER(TcOpts)]),
    "bpf_tc_detach": (c_int, [POINTER(TcHook), POINTER(TcOpts)]),
    "bpf_tc_query": (c_int, [POINTER(TcHook), POINTER(TcOpts)]),
    "btf__parse": (c_void_p, [c_char_p, c_void_p]),
    "btf__free": (None, [c_void_p]),
    "btf__find_by_name_kind": (c_int, [c_void_p, c_char_p, c_uint32]),
    "btf__type_by_id": (POINTER(BtfType), [c_void_p, c_uint32]),
    "btf__resolve_size": (c_int64, [c_void_p, c_uint32]),
    "btf__name_by_offset": (c_char_p, [c_void_p, c_uint32]),
    "libbpf_num_possible_cpus": (c_int, []),
    "libbpf_version_string": (c_char_p, []),
    "libbpf_set_print": (c_void_p, [PRINT_FN]),
}

if lib is not None:
    for _name, (_res, _args) in _PROTOS.items():
        _fn = getattr(lib, _name)
        _fn.restype, _fn.argtypes = _res, _args


def require() -> ctypes.CDLL:
    """The loaded libbpf, or raise :class:`BpfError` saying how to install it."""
    if lib is None:
        raise BpfError(LOAD_ERROR or "libbpf.so.1 not loaded")
    return lib


def errno_of(ret: int) -> int:
    """The errno of a failed libbpf call: its negative return, else the thread's errno."""
    return -ret if ret < 0 and -ret < 4096 else (ctypes.get_errno() or 1)


def check(ret: int, what: str) -> int:
    """Return ``ret`` if it is >= 0, else raise :class:`BpfError` naming ``what`` and errno."""
    if ret >= 0:
        return ret
    err = errno_of(ret)
    raise BpfError(f"{what}: {os.strerror(err)} (errno {err})", errno=err)


def check_ptr(ptr: int | None, what: str) -> int:
    """Return a non-NULL pointer from libbpf, else raise :class:`BpfError` with errno."""
    if ptr:
        return ptr
    err = ctypes.get_errno() or 1
    raise BpfError(f"{what}: {os.strerror(err)} (errno {err})", errno=err)


# --- libbpf's print callback: log everything, capture per thread while loading ---
_tls = threading.local()
_vsnprintf = _libc.vsnprintf
_vsnprintf.argtypes = [c_char_p, c_size_t, c_char_p, c_void_p]
_vsnprintf.restype = c_int
_VA_LIST_IS_POINTER = platform.machine() in ("x86_64", "AMD64")


def _format(fmt: bytes, va: int) -> str:
    if not _VA_LIST_IS_POINTER:
        return fmt.decode(errors="replace")
    # The verifier log comes in one message and can be megabytes long: size it first on a
    # copy of the va_list (on x86-64 a va_list is a 24-byte struct, so va_copy is a memcpy).
    probe = ctypes.create_string_buffer(24)
    ctypes.memmove(probe, va, 24)
    size = _vsnprintf(None, 0, fmt, ctypes.addressof(probe)) + 1
    buf = ctypes.create_string_buffer(max(size, 1))
    _vsnprintf(buf, len(buf), fmt, va)
    return buf.value.decode(errors="replace")


@PRINT_FN
def _print(level: int, fmt: bytes, va: int) -> int:
    try:
        text = _format(fmt, va)
    except Exception:  # never let an exception cross into C
        return 0
    sink = getattr(_tls, "sink", None)
    if sink is not None:
        sink.append(text)
    log.debug("libbpf: %s", text.rstrip())
    return 0


if lib is not None:
    lib.libbpf_set_print(_print)


@contextlib.contextmanager
def capture() -> Iterator[list[str]]:
    """Collect libbpf's messages printed by the calling thread during the block."""
    old = getattr(_tls, "sink", None)
    _tls.sink = []
    try:
        yield _tls.sink
    finally:
        _tls.sink = old


def possible_cpus() -> int:
    """Number of possible CPUs, the length of every per-CPU map value array."""
    return check(require().libbpf_num_possible_cpus(), "libbpf_num_possible_cpus")


def version() -> str:
    """libbpf's version, e.g. "v1.1"."""
    return require().libbpf_version_string().decode()
