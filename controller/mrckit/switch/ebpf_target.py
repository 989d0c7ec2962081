"""The eBPF switch target: load ``mrc_switch.bpf.o``, attach it to a switch's ports, and drive
its maps by P4 names (design section 4; map layouts in ``docs/ebpf-switch.md``).

Two classes:

- :class:`SwitchTables` holds one switch's maps and reads and writes them by P4 names, one
  concern per attribute: ``direct`` (table entries of ``my_usid``, ``usid_fib``,
  ``port_config``: ``direct_tables.py``), ``ecmp`` (EV-hash mode's ``ecmp_selector`` members
  and groups and ``ipv6_fib`` routes, docs/ecmp-mode.md: ``ecmp_selector.py``), ``counters``
  (``counters.py``), ``ports`` (admin state, wiring: ``ports.py``) and ``queues`` (drain rate,
  depth: ``queues.py``).
  It works on a freshly loaded object or on the maps pinned under
  ``/sys/fs/bpf/mrckit/switch/<name>/`` (:meth:`SwitchTables.open_pinned`), so the P4Runtime
  server and the conformance suite share this one mapping.
- :class:`EbpfSwitch` sets one switch up in its network namespace (load, pin, attach XDP to
  every port, fill the DEVMAP from inside the namespace, optionally start its P4Runtime
  server) and tears it down completely.

>>> with EbpfSwitch("s0", "mrcsw", {0: "p0", 1: "p1"}) as sw:      # doctest: +SKIP
...     sw.tables.direct.write(TableEntry.exact("usid_fib", 0xFCBBBB001001, "set_egress", {"port": 1}))
...     sw.tables.counters.read("tx_port", 1)
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .. import netns
from ..bpf.attach import ifindex_of, xdp_attach, xdp_detach, xdp_query
from ..bpf.errors import BpfError
from ..bpf.fs import BPFFS, ensure_bpffs, pin_path, unpin
from ..bpf.maps import Map
from ..bpf.objects import BpfObject
from ..errors import MrcError
from ..topology.entries import TableEntry
from ..wire import pipeline as P
from . import tables as T
from .counters import Counters
from .direct_tables import DirectTables
from .ecmp_selector import EcmpSelector
from .port_state import PORT_STATE, port_fields
from .ports import Ports, check_port
from .queues import Queues

if TYPE_CHECKING:  # the server package imports this module: import it lazily at run time
    from .p4runtime.process import ServerOptions, ServerProcess

OBJECT = "mrc_switch"
PROGRAM = "mrc_switch"
PIN_DIR = "switch"

_u32 = ctypes.c_uint32
MAP_TYPES: dict[str, tuple[type, type]] = {
    "my_usid": (T.UsidKey, T.TableAction),
    "usid_fib": (T.UsidKey, T.TableAction),
    "my_usid_slots": (_u32, T.UsidSlot),
    "usid_fib_slots": (_u32, T.UsidSlot),
    "table_defaults": (_u32, T.TableAction),
    PORT_STATE: (_u32, T.PortState),
    **{name: (_u32, T.Counter) for name in P.COUNTER_NAMES},
    "tx_ports": (_u32, _u32),
    "ifindex_port": (_u32, _u32),
    "ifindex_slots": (_u32, T.IfindexSlot),
    "ipv6_fib": (T.Ipv6LpmKey, T.FibRef),
    "ipv6_fib_state": (_u32, _u32),
    "ecmp_member": (_u32, T.TableAction),
    "ecmp_group": (_u32, T.EcmpGroup),
}
"""Every map of ``mrc_switch.bpf.c`` with its key and value ctypes (the pinned set)."""


def switch_pin_dir(name: str) -> str:
    """``/sys/fs/bpf/mrckit/switch/<name>``; raises ValueError for a name with ``/``."""
    return pin_path(PIN_DIR, name)


class SwitchTables:
    """The maps of one eBPF switch, by concern: each attribute reads and writes its own maps by
    P4 names.

    Attributes:
        direct: ``DirectTables``: ``my_usid``, ``usid_fib`` and ``port_config`` entries
            (``TableEntry``) and default actions.
        ecmp: ``EcmpSelector``: EV-hash mode's ``ecmp_selector`` members and groups and
            ``ipv6_fib`` routes (docs/ecmp-mode.md).
        counters: ``Counters``: the indirect counters, summed over CPUs.
        ports: ``Ports``: admin state and the port-to-interface wiring.
        queues: ``Queues``: the virtual queues' drain rates and depths.
        maps: map name -> ``Map``, every map of ``MAP_TYPES``.
        port_state: the ``port_state`` map, mmapped (``MmapArray``); each manager writes its
            own part of it (``mrckit.switch.port_state``).

    It works on a freshly loaded object or on the maps pinned under
    ``/sys/fs/bpf/mrckit/switch/<name>/`` (:meth:`open_pinned`), so the P4Runtime server and
    the conformance suite share this one mapping.

    Raises:
        MrcError: a map of ``MAP_TYPES`` is missing from ``maps``.
        BpfError: ``port_state`` cannot be mmapped (a switch pinned by an older mrckit).
    """

    def __init__(self, maps: dict[str, Map], *, owned: bool = False):
        missing = set(MAP_TYPES) - set(maps)
        if missing:
            raise MrcError(f"switch maps missing: {', '.join(sorted(missing))}")
        self.maps, self._owned = maps, owned
        self.port_state, parts = port_fields(maps[PORT_STATE])
        self.direct = DirectTables(maps, parts.config)
        self.ecmp = EcmpSelector(maps)
        self.counters = Counters(maps)
        self.ports = Ports(maps, parts.down)
        self.queues = Queues(parts.rate, parts.queue)

    @classmethod
    def from_object(cls, obj: BpfObject) -> "SwitchTables":
        """The maps of a loaded ``mrc_switch`` object (they live as long as the object)."""
        return cls({name: obj.map(name, key_type=k, value_type=v) for name, (k, v) in MAP_TYPES.items()})

    @classmethod
    def open_pinned(cls, name: str) -> "SwitchTables":
        """The maps pinned for switch ``name``; close the result when done.

        Raises:
            MrcError: the switch is not set up (no pins), naming the folder, or its pins are
                another mrckit version's (:func:`check_pins`).
        """
        folder = switch_pin_dir(name)
        check_pins(name)
        maps: dict[str, Map] = {}
        try:
            for map_name, (k, v) in MAP_TYPES.items():
                maps[map_name] = Map.from_pin(os.path.join(folder, map_name), key_type=k, value_type=v)
            return cls(maps, owned=True)
        except BpfError as exc:
            for m in maps.values():
                m.close()
            raise MrcError(f"switch {name} is not set up: {exc}") from None

    def close(self) -> None:
        """Unmap ``port_state`` and close the map fds opened by :meth:`open_pinned` (the maps
        of an object close with it). Idempotent."""
        self.port_state.close()
        if self._owned:
            for m in self.maps.values():
                m.close()
            self._owned = False

    def init_defaults(self) -> None:
        """Default actions of design section 4 and default queue rates, on a fresh switch."""
        self.direct.init_defaults()
        self.queues.init_rates()


class EbpfSwitch:
    """One eBPF switch: the XDP program on every port of ``ports`` in namespace ``netns``.

    Args:
        name: the switch's name; its maps are pinned under ``/sys/fs/bpf/mrckit/switch/<name>/``.
        netns: the namespace holding the port interfaces (None: the caller's namespace).
        ports: switch port number (0..511) -> interface name.
        xdp_mode: "native" (default; design section 9 explains the veth traps), "generic", "auto".
        entries: table entries (``TableEntry``) written at set-up, before any port is attached.
        p4runtime: serve P4Runtime for this switch: an address (``unix:/path`` or
            ``host:port``) or a ``mrckit.switch.p4runtime.process.ServerOptions`` (device id,
            TLS, state folder, log file). None: no server.

    :meth:`setup` is idempotent and reuses pinned maps, so a restarted manager keeps its
    tables; :meth:`teardown` stops the server, detaches and unpins everything, and is
    idempotent too. ``server`` is the running server process (or None).
    Redirecting into a veth needs NAPI on its peer (an XDP program or ``gro on``); the
    fabric builder sets that on the far ends, which this switch cannot reach.
    """

    def __init__(self, name: str, netns: str | None, ports: dict[int, str], *, xdp_mode: str = "native",
                 entries: Iterable[TableEntry] = (), p4runtime: "str | ServerOptions | None" = None):
        if not name or "/" in name or name in (".", ".."):
            raise MrcError(f"switch name {name!r}: must be a plain name")
        for port in ports:
            check_port(port)
        if len(set(ports.values())) != len(ports):
            raise MrcError(f"switch {name}: an interface appears on two ports: {ports}")
        self.name, self.netns, self.ports, self.xdp_mode = name, netns, dict(ports), xdp_mode
        self.entries = list(entries)
        self.p4runtime = _server_options(p4runtime)
        self.server: ServerProcess | None = None
        self.pin_dir = switch_pin_dir(name)
        self._obj: BpfObject | None = None
        self.tables: SwitchTables | None = None
        self.attach_modes: dict[int, str] = {}

    def setup(self, *, wait: bool = True) -> "EbpfSwitch":
        """Load (reusing pins), pin, wire the DEVMAP, attach to every port, then start the
        P4Runtime server (if ``p4runtime`` was given) and wait until it serves.

        ``wait=False`` returns once the server process is started; call :meth:`wait_ready`
        (or :func:`wait_servers` for several switches, which start in parallel) before use.

        Raises:
            MrcError / BpfError: namespace or interface missing, verifier refusal (with log),
            attach refused, the server exited or stayed silent (with its last log lines).
            Whatever was done is undone before the error propagates. Pins of another
            mrckit version (:func:`check_pins`) are refused before anything is done.
        """
        ensure_bpffs()
        check_pins(self.name)
        try:
            obj, tables = self._load()
            tables.direct.apply(self.entries)
            with self._in_netns():
                for port, iface in self.ports.items():
                    tables.ports.bind(port, ifindex_of(iface))
                    self.attach_modes[port] = xdp_attach(iface, obj.program(PROGRAM), self.xdp_mode,
                                                         replace=True)
            if self.p4runtime is not None and self.server is None:
                from .p4runtime.process import ServerProcess
                self.server = ServerProcess(self.name, self.p4runtime, self.netns)
            if wait:
                self.wait_ready()
        except BaseException:
            self.teardown()
            raise
        return self

    def wait_ready(self, timeout: float | None = None) -> "EbpfSwitch":
        """Return once the P4Runtime server serves (at once without a server).

        Raises:
            MrcError: the server exited or did not serve within ``timeout`` s (default
                ``process.READY_TIMEOUT_S``); the whole switch is torn down first.
        """
        wait_servers([self], timeout)
        return self

    def _load(self) -> tuple[BpfObject, SwitchTables]:
        """Open and load the object with its maps on their pins; returns it and its tables."""
        fresh = not os.path.isdir(self.pin_dir)
        os.makedirs(os.path.dirname(self.pin_dir), exist_ok=True)  # libbpf makes only the last folder
        obj = BpfObject.open(OBJECT)
        try:
            for map_name in MAP_TYPES:
                path = os.path.join(self.pin_dir, map_name)
                # reuse_pin, not libbpf's own pin check: the kernel adds BPF_F_RDONLY_PROG to
                # every DEVMAP, which libbpf then reports as a parameter mismatch.
                if not obj.map(map_name).reuse_pin(path):
                    obj.map(map_name).set_pin_path(path)
            obj.load()
        except BaseException:
            obj.close()
            raise
        self._obj = obj
        self.tables = SwitchTables.from_object(obj)
        if fresh:
            self.tables.init_defaults()
        self.tables.ecmp.sync_routes_present()  # pins from an older object may hold routes already
        return obj, self.tables

    def _in_netns(self):
        import contextlib
        return netns.enter(self.netns) if self.netns else contextlib.nullcontext()

    def teardown(self) -> None:
        """Stop the P4Runtime server (SIGTERM, SIGKILL after ``process.STOP_TIMEOUT_S``; its
        unix socket and stored pipeline go with it), detach from every port, unpin every map and remove the pin
        folder. Idempotent: a missing namespace, interface or pin is skipped."""
        self._stop_server()
        if self.netns is None or netns.exists(self.netns):
            with self._in_netns():
                for iface in self.ports.values():
                    try:
                        if xdp_query(iface).mode is not None:
                            xdp_detach(iface)
                    except BpfError:
                        pass  # the interface is gone, and its attachment with it
        remove_pins(self.name)
        if self.tables is not None:
            self.tables.close()
        if self._obj is not None:
            self._obj.close()
            self._obj, self.tables = None, None
        self.attach_modes = {}

    def _stop_server(self) -> None:
        if self.p4runtime is None:
            return
        from .p4runtime import server, store

        if self.server is not None:
            self.server.stop()
            self.server = None
            path = server.unix_path(self.p4runtime.address)
            if path and os.path.exists(path):
                os.unlink(path)  # a SIGKILLed server leaves its socket behind
        # The stored pipeline names maps about to be unpinned: it could never be used again.
        folder = self.p4runtime.state_dir or store.default_dir(self.name)
        store.remove(folder)
        if self.p4runtime.state_dir is None and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()

    def __enter__(self) -> "EbpfSwitch":
        return self.setup()

    def __exit__(self, *exc) -> None:
        self.teardown()


def wait_servers(switches: Iterable[EbpfSwitch], timeout: float | None = None, progress=None) -> None:
    """Wait until the P4Runtime server of every switch (set up with ``wait=False``) serves;
    ``progress(n)``: see ``process.wait_all``.

    Raises:
        MrcError: a server exited or stayed silent for ``timeout`` s (default
            ``process.READY_TIMEOUT_S``), naming its switch, with its last log lines; that
            switch is torn down first (the others are left to the caller).
    """
    servers = [sw.server for sw in switches if sw.server is not None]
    if not servers:
        return
    from .p4runtime import process

    try:
        process.wait_all(servers, process.READY_TIMEOUT_S if timeout is None else timeout,
                         progress)
    except process.ServerStartError as exc:
        next(sw for sw in switches if sw.server is exc.server).teardown()
        raise


def _server_options(p4runtime) -> "ServerOptions | None":
    if p4runtime is None:
        return None
    from .p4runtime.process import ServerOptions

    return ServerOptions(p4runtime) if isinstance(p4runtime, str) else p4runtime


def check_pins(name: str) -> None:
    """Refuse a pin folder of switch ``name`` that holds another set of maps than
    ``MAP_TYPES`` (a switch set up by another mrckit version): reusing it would attach a program
    that reads maps nobody writes. A missing folder is fine (a fresh switch).

    Raises:
        MrcError: naming the maps that differ and the way out.
    """
    folder = switch_pin_dir(name)
    if not os.path.isdir(folder):
        return
    pinned, mine = set(os.listdir(folder)), set(MAP_TYPES)
    if pinned == mine:
        return
    differ = [f"{what} {', '.join(sorted(names))}" for what, names in
              (("unknown", pinned - mine), ("missing", mine - pinned)) if names]
    raise MrcError(f"switch {name}: the maps pinned in {folder} are not this mrckit's ({'; '.join(differ)}): "
                   "set up by another version, or a set-up cut short; tear it down (mrc fabric down) and set it up again")


def remove_pins(name: str) -> None:
    """Unpin every map of switch ``name`` and remove its folder (quiet when absent)."""
    folder = switch_pin_dir(name)
    if not os.path.isdir(folder):
        return
    for entry in os.listdir(folder):
        unpin(os.path.join(folder, entry))
    os.rmdir(folder)


def pinned_switches() -> list[str]:
    """Names of switches with pins under ``/sys/fs/bpf/mrckit/switch``."""
    root = os.path.join(BPFFS, "mrckit", PIN_DIR)
    return sorted(os.listdir(root)) if os.path.isdir(root) else []
