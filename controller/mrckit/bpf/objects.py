"""BPF objects (ELF files built by ``make bpf``), their programs, and BPF_PROG_TEST_RUN."""

from __future__ import annotations

import ctypes
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from . import _libbpf as L
from .errors import BpfError
from .maps import Map

OBJ_DIR = Path(__file__).resolve().parent / "obj"


def object_path(name: str) -> Path:
    """Path of the packaged object ``mrckit/bpf/obj/<name>.bpf.o`` (``name`` without suffix).

    Raises:
        BpfError: the object is not built; the message says to run ``make bpf``.
    """
    stem = name.removesuffix(".o").removesuffix(".bpf")
    path = OBJ_DIR / f"{stem}.bpf.o"
    if not path.is_file():
        raise BpfError(f"BPF object {path} is missing: build it with `make bpf` "
                       f"(compiles ebpf/{stem}.bpf.c)")
    return path


@dataclass
class RunResult:
    """Outcome of one BPF_PROG_TEST_RUN.

    retval: the program's return code (XDP_PASS=2...); data: the packet out (bytes, empty
    with live frames); duration_ns: kernel-measured average time per repetition (ns);
    ctx: the context out (bytes) when a ctx was given.
    """
    retval: int
    data: bytes
    duration_ns: int
    ctx: bytes | None = None


class XdpMd(ctypes.Structure):
    """``struct xdp_md``, the context of an XDP test run (offsets are bytes into the packet)."""
    _fields_ = [("data", ctypes.c_uint32), ("data_end", ctypes.c_uint32),
                ("data_meta", ctypes.c_uint32), ("ingress_ifindex", ctypes.c_uint32),
                ("rx_queue_index", ctypes.c_uint32), ("egress_ifindex", ctypes.c_uint32)]


class Program:
    """A loaded BPF program: ``name``, ``fd``, ``id``, ``section``; run it with :meth:`test_run`."""

    def __init__(self, name: str, *, handle: int | None = None, fd: int = -1, section: str = "",
                 owned: bool = False, owner: "BpfObject | None" = None):
        self.name, self.section = name, section
        self._handle, self._fd, self._owned, self._owner = handle, fd, owned, owner

    @classmethod
    def from_pin(cls, path: str) -> "Program":
        """Open the program pinned at ``path``; the returned program owns its fd.

        Raises:
            BpfError: nothing pinned there, or not a program.
        """
        fd = L.check(L.require().bpf_obj_get(path.encode()), f"open pinned program {path}")
        info = _prog_info(fd)
        return cls(info.name.decode(), fd=fd, owned=True)

    @classmethod
    def from_id(cls, prog_id: int) -> "Program":
        """Open the loaded program with kernel id ``prog_id`` (e.g. from :func:`xdp_query`);
        the returned program owns its fd.

        Raises:
            BpfError: no program has that id (ENOENT).
        """
        fd = L.check(L.require().bpf_prog_get_fd_by_id(prog_id), f"open program id {prog_id}")
        return cls(_prog_info(fd).name.decode(), fd=fd, owned=True)

    def set_autoload(self, autoload: bool) -> None:
        """Before load: whether :meth:`BpfObject.load` loads this program (default True).
        Programs that share a PROG_ARRAY but differ in type or xdp.frags cannot both load."""
        if self._handle is None:
            raise BpfError(f"program {self.name} is not part of an unloaded object")
        L.check(L.require().bpf_program__set_autoload(self._handle, autoload),
                f"set autoload of {self.name}")

    def __enter__(self) -> "Program":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def fd(self) -> int:
        """The program's fd; raises BpfError before its object is loaded."""
        if self._owner is not None:
            self._owner._obj()  # a closed object's handles dangle: refuse instead of crashing
        fd = L.require().bpf_program__fd(self._handle) if self._handle is not None else self._fd
        if fd < 0:
            raise BpfError(f"program {self.name} has no fd: load its object first")
        return fd

    @property
    def id(self) -> int:
        """The kernel's program id (as shown by ``bpftool prog`` and :func:`xdp_query`)."""
        return _prog_info(self.fd).id

    def run_stats(self) -> tuple[int, int]:
        """(run_time_ns, run_cnt): the kernel's total run time of this program in ns and its
        number of runs, counted only while run-time stats are on (:func:`run_stats_enabled`,
        or ``sysctl kernel.bpf_stats_enabled=1``), test runs included."""
        info = _prog_info(self.fd)
        return info.run_time_ns, info.run_cnt

    def pin(self, path: str) -> str:
        """Pin the program at ``path`` (bpffs). Raises BpfError (e.g. EEXIST)."""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        L.check(L.require().bpf_obj_pin(self.fd, path.encode()), f"pin program {self.name} at {path}")
        return path

    def close(self) -> None:
        """Close an owned fd (from :meth:`from_pin`); no-op for programs of an object."""
        if self._owned and self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __repr__(self) -> str:
        return f"Program({self.name!r}, section={self.section!r})"

    def test_run(self, data: bytes = b"", *, repeat: int = 1, ctx: Any = None, flags: int = 0,
                 data_out_size: int | None = None, cpu: int = 0, batch_size: int = 0) -> RunResult:
        """Run the program once per ``repeat`` on ``data`` with BPF_PROG_TEST_RUN.

        Args:
            data: the input packet (bytes, from the Ethernet header for XDP/tc).
            repeat: number of runs; ``duration_ns`` is the average per run.
            ctx: the context in (bytes or ctypes struct, e.g. :class:`XdpMd` with
                ``ingress_ifindex``); its output is returned in ``RunResult.ctx``.
            flags: ``BPF_F_TEST_XDP_LIVE_FRAMES`` turns the run into a packet generator
                (XDP_TX/XDP_REDIRECT really send; no data out), ``BPF_F_TEST_RUN_ON_CPU``
                with ``cpu``.
            data_out_size: size of the output buffer (bytes); default input + 4 KiB.
            batch_size: live-frames batch size (0: kernel default).

        Raises:
            BpfError: the kernel refused the run (e.g. ENOSPC when ``data_out_size`` is too
                small, EINVAL for a bad ctx or a packet shorter than 14 bytes).
        """
        live = bool(flags & L.BPF_F_TEST_XDP_LIVE_FRAMES)
        inp = ctypes.create_string_buffer(bytes(data), len(data))
        out = None if live else ctypes.create_string_buffer(data_out_size or len(data) + 4096)
        opts = L.TestRunOpts(sz=ctypes.sizeof(L.TestRunOpts), data_in=ctypes.addressof(inp),
                             data_size_in=len(data), repeat=repeat, flags=flags, cpu=cpu,
                             batch_size=batch_size)
        if out is not None:
            opts.data_out, opts.data_size_out = ctypes.addressof(out), len(out)
        ctx_in = ctx_out = None
        if ctx is not None:
            raw = bytes(ctx)
            ctx_in = ctypes.create_string_buffer(raw, len(raw))
            opts.ctx_in, opts.ctx_size_in = ctypes.addressof(ctx_in), len(raw)
            if not live:
                ctx_out = ctypes.create_string_buffer(len(raw))
                opts.ctx_out, opts.ctx_size_out = ctypes.addressof(ctx_out), len(raw)
        ret = L.require().bpf_prog_test_run_opts(self.fd, ctypes.byref(opts))
        if ret < 0 and L.errno_of(ret) == 28:  # ENOSPC
            raise BpfError(f"BPF_PROG_TEST_RUN of {self.name}: the packet out is "
                           f"{opts.data_size_out} bytes, more than data_out_size", errno=28)
        L.check(ret, f"BPF_PROG_TEST_RUN of {self.name}")
        data_out = out.raw[:opts.data_size_out] if out is not None else b""
        ctx_bytes = ctx_out.raw[:opts.ctx_size_out] if ctx_out is not None else None
        return RunResult(opts.retval, data_out, opts.duration, ctx_bytes)


    def run_syscall(self, ctx: ctypes.Structure) -> int:
        """Run a ``SEC("syscall")`` program once with BPF_PROG_RUN on ``ctx`` (a ctypes
        struct, changed in place by what the program wrote to its context). Returns the
        program's return value.

        Raises:
            BpfError: the kernel refused the run (EINVAL: not a syscall program).
        """
        buf = ctypes.create_string_buffer(bytes(ctx), ctypes.sizeof(ctx))
        # A syscall program takes no packet and copies its context back into ctx_in.
        opts = L.TestRunOpts(sz=ctypes.sizeof(L.TestRunOpts), ctx_in=ctypes.addressof(buf),
                             ctx_size_in=ctypes.sizeof(ctx))
        L.check(L.require().bpf_prog_test_run_opts(self.fd, ctypes.byref(opts)),
                f"BPF_PROG_RUN of {self.name}")
        ctypes.memmove(ctypes.addressof(ctx), buf, ctypes.sizeof(ctx))
        return opts.retval

def _log_tail(text: str, lines: int = 10) -> str:
    """The verifier's last words (just before END PROG LOAD LOG), else libbpf's last lines."""
    head, sep, _ = text.partition("-- END PROG LOAD LOG --")
    return "\n".join((head if sep else text).rstrip().splitlines()[-lines:])


BPF_STATS_RUN_TIME = 0  # enum bpf_stats_type


@contextmanager
def run_stats_enabled() -> Iterator[None]:
    """Count the run time and runs of every BPF program while inside (BPF_ENABLE_STATS, the
    syscall form of ``sysctl kernel.bpf_stats_enabled=1``; read with :meth:`Program.run_stats`).
    Stats stay on while any holder keeps its fd, and go off when the last one closes it, even
    if this process dies. Each run then pays for two clock reads.

    Raises:
        BpfError: not permitted (needs CAP_SYS_ADMIN) or not supported by the kernel.
    """
    fd = L.check(L.require().bpf_enable_stats(BPF_STATS_RUN_TIME), "enable BPF run-time stats")
    try:
        yield
    finally:
        os.close(fd)


def _prog_info(fd: int) -> L.ProgInfo:
    info = L.ProgInfo()
    size = ctypes.c_uint32(ctypes.sizeof(info))
    L.check(L.require().bpf_obj_get_info_by_fd(fd, ctypes.byref(info), ctypes.byref(size)),
            f"program info of fd {fd}")
    return info


def prog_map_ids(prog_id: int) -> list[int]:
    """Kernel ids of the maps that the loaded program with kernel id ``prog_id`` uses (open
    each with :meth:`Map.from_id`).

    Raises:
        BpfError: no program has that id.
    """
    lib = L.require()
    fd = L.check(lib.bpf_prog_get_fd_by_id(prog_id), f"open program id {prog_id}")
    try:
        count = _prog_info(fd).nr_map_ids
        ids = (ctypes.c_uint32 * count)()
        info = L.ProgInfo(nr_map_ids=count, map_ids=ctypes.addressof(ids))
        size = ctypes.c_uint32(ctypes.sizeof(info))
        L.check(lib.bpf_obj_get_info_by_fd(fd, ctypes.byref(info), ctypes.byref(size)),
                f"map ids of program id {prog_id}")
    finally:
        os.close(fd)
    return list(ids)


class BpfObject:
    """A BPF ELF object opened with libbpf; a context manager that closes it.

    >>> with BpfObject.open("mrc_switch") as obj:            # doctest: +SKIP
    ...     obj.map("port_cfg").set_max_entries(64)           # before load
    ...     obj.load()
    ...     prog = obj.program("mrc_switch_xdp")

    Closing frees the object and its fds; attachments (XDP, tc) and pins stay.
    """

    def __init__(self, ptr: int, path: Path):
        self._ptr: int | None = ptr
        self.path, self.loaded = path, False

    @classmethod
    def open(cls, path_or_name: str | os.PathLike, *, pin_root: str | None = None) -> "BpfObject":
        """Open an object by path, or by name from :func:`object_path` (``"mrc_switch"``).

        ``pin_root``: folder for maps declared with ``__uint(pinning, LIBBPF_PIN_BY_NAME)``;
        libbpf reuses such a map if it is already pinned there, else pins it after load.

        Raises:
            BpfError: the file is missing or is not a valid BPF object (log attached).
        """
        text = os.fspath(path_or_name)
        path = Path(text) if ("/" in text or text.endswith(".o")) else object_path(text)
        if not path.is_file():
            raise BpfError(f"BPF object {path} does not exist")
        opts = L.ObjectOpenOpts(sz=ctypes.sizeof(L.ObjectOpenOpts))
        if pin_root:
            opts.pin_root_path = os.fsencode(pin_root)
        with L.capture() as msgs:
            ptr = L.require().bpf_object__open_file(os.fsencode(path), ctypes.byref(opts))
        if not ptr:
            err = ctypes.get_errno() or 22
            raise BpfError(f"cannot open BPF object {path}: {os.strerror(err)}\n" + "".join(msgs),
                           errno=err, log="".join(msgs))
        return cls(ptr, path)

    def _obj(self) -> int:
        if not self._ptr:
            raise BpfError(f"BPF object {self.path} is closed")
        return self._ptr

    def load(self) -> "BpfObject":
        """Create the maps and load every program into the kernel.

        Raises:
            BpfError: the verifier or map creation refused; ``.log`` holds libbpf's messages
                with the full verifier log, and the message ends with its last lines.
        """
        with L.capture() as msgs:
            ret = L.require().bpf_object__load(self._obj())
        if ret < 0:
            err = L.errno_of(ret)
            text = "".join(msgs)
            raise BpfError(f"loading {self.path.name} failed: {os.strerror(err)} (errno {err}); "
                           f"libbpf/verifier log ends with:\n{_log_tail(text)}", errno=err, log=text)
        self.loaded = True
        return self

    def program(self, name: str) -> Program:
        """The program whose C function is ``name``.

        Raises:
            BpfError: no such program; the message lists those that exist.
        """
        ptr = L.require().bpf_object__find_program_by_name(self._obj(), name.encode())
        if not ptr:
            raise BpfError(f"{self.path.name} has no program {name!r}; it has: "
                           f"{', '.join(self.program_names())}")
        section = L.require().bpf_program__section_name(ptr).decode()
        return Program(name, handle=ptr, section=section, owner=self)

    def program_names(self) -> list[str]:
        """Names of all programs in the object."""
        names, ptr = [], None
        while ptr := L.require().bpf_object__next_program(self._obj(), ptr):
            names.append(L.require().bpf_program__name(ptr).decode())
        return names

    def map(self, name: str, *, key_type: type | None = None,
            value_type: type | None = None) -> "ObjectMap":
        """The map ``name`` of this object (usable before load for sizing and pin reuse).

        Raises:
            BpfError: no such map (the message lists them), or a type size mismatch.
        """
        ptr = L.require().bpf_object__find_map_by_name(self._obj(), name.encode())
        if not ptr:
            raise BpfError(f"{self.path.name} has no map {name!r}; it has: {', '.join(self.map_names())}")
        return ObjectMap(ptr, self, key_type=key_type, value_type=value_type)

    def map_names(self) -> list[str]:
        """Names of the object's maps, without libbpf's internal .data/.bss/.rodata maps."""
        names, ptr = [], None
        while ptr := L.require().bpf_object__next_map(self._obj(), ptr):
            if not L.require().bpf_map__is_internal(ptr):
                names.append(L.require().bpf_map__name(ptr).decode())
        return names

    def close(self) -> None:
        """Free the object and close its fds (idempotent)."""
        if self._ptr:
            L.require().bpf_object__close(self._ptr)
            self._ptr = None

    def __enter__(self) -> "BpfObject":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class ObjectMap(Map):
    """A map of a :class:`BpfObject`; adds the before-load settings."""

    def __init__(self, handle: int, owner: BpfObject, *, key_type: type | None = None,
                 value_type: type | None = None):
        lib = L.require()
        self._owner = owner
        super().__init__(name=lib.bpf_map__name(handle).decode(), map_type=lib.bpf_map__type(handle),
                         key_size=lib.bpf_map__key_size(handle),
                         value_size=lib.bpf_map__value_size(handle),
                         max_entries=lib.bpf_map__max_entries(handle), handle=handle,
                         key_type=key_type, value_type=value_type)

    def typed(self, key_type: type | None = None, value_type: type | None = None) -> "ObjectMap":
        assert self._handle is not None  # an ObjectMap always has its libbpf handle
        return ObjectMap(self._handle, self._owner, key_type=key_type, value_type=value_type)

    @property
    def fd(self) -> int:
        self._owner._obj()  # a closed object's handles dangle: refuse instead of crashing
        return super().fd

    def set_max_entries(self, n: int) -> None:
        """Resize before load. Raises BpfError after load (EBUSY)."""
        self._owner._obj()
        L.check(L.require().bpf_map__set_max_entries(self._handle, n), f"resize map {self.name}")
        self.max_entries = n

    def reuse_pin(self, path: str) -> bool:
        """Before load: make this map the one pinned at ``path`` if it exists (a restarted
        process reattaches to its state). Returns True if a pinned map was reused.

        Raises:
            BpfError: the pinned map's type/sizes differ from this map's definition.
        """
        if not os.path.exists(path):
            return False
        with Map.from_pin(path) as pinned:
            mine = (self.map_type, self.key_size, self.value_size, self.max_entries)
            theirs = (pinned.map_type, pinned.key_size, pinned.value_size, pinned.max_entries)
            if mine != theirs:
                raise BpfError(f"pinned map {path} (type, key, value, max_entries)={theirs} "
                               f"differs from map {self.name}={mine}; unpin it to start afresh")
            # reuse_fd dups the fd, so closing ours afterwards is right.
            L.check(L.require().bpf_map__reuse_fd(self._handle, pinned.fd), f"reuse {path}")
        return True

    def initial_value(self) -> bytes:
        """The initial contents of a global-data map (``.rodata``, ``.rodata.NAME``, ``.data``)
        as libbpf will create it: the ELF defaults unless :meth:`set_initial_value` changed them.

        Raises:
            BpfError: the map has no initial value (not a global-data map).
        """
        size = ctypes.c_size_t(0)
        ptr = L.require().bpf_map__initial_value(self._handle, ctypes.byref(size))
        if not ptr:
            raise BpfError(f"map {self.name} has no initial value (not a global-data map)")
        return ctypes.string_at(ptr, size.value)

    def set_initial_value(self, data: bytes | ctypes.Structure) -> None:
        """Before load: the contents a global-data map is created with. For ``const volatile``
        variables (a ``.rodata`` map, frozen at load) the verifier then sees them as constants.
        ``data`` must be exactly the map's value size (bytes or a ctypes struct).

        Raises:
            BpfError: after load (EBUSY), or a size different from the map's value size.
        """
        raw = bytes(data)
        if len(raw) != self.value_size:
            raise BpfError(f"initial value of map {self.name} must be {self.value_size} bytes, "
                           f"got {len(raw)}")
        buf = ctypes.create_string_buffer(raw, len(raw))
        L.check(L.require().bpf_map__set_initial_value(self._handle, buf, len(raw)),
                f"set initial value of map {self.name}")

    def set_pin_path(self, path: str) -> None:
        """Before load: libbpf reuses the map pinned at ``path``, or pins it there after load."""
        L.check(L.require().bpf_map__set_pin_path(self._handle, path.encode()),
                f"set pin path of map {self.name}")
