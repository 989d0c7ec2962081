"""Fault injection on one side of a link with ``ebpf/mrc_fault.bpf.c`` (this kernel has no netem).

A fault sits on one interface ``ifname`` inside namespace ``ns``, at one of three hooks:

- ``"xdp"`` (default): in front of the XDP program already on the interface (the eBPF switch
  or the host dataplane), which it tail-calls; if there is none, it passes packets to the
  stack. Faults the traffic that ARRIVES on ``ifname``. It is the only hook that sees
  switch-to-switch traffic, because XDP_REDIRECT bypasses tc on both veth ends.
  Supports loss and blackhole.
- ``"tc-ingress"`` / ``"tc-egress"``: a clsact filter (handle 0xFA17, priority 1) for traffic
  through the kernel stack. Supports loss, blackhole, duplicate and reorder (a chosen packet
  is held in a map and sent just behind the next one, so the two swap places).

Faulting both directions of a link means one fault on each end (each end's arriving traffic).

tc order: filters of equal priority run newest first, and a filter that returns a final
verdict (TC_ACT_OK, a redirect) ends the chain. The fault filter returns TC_ACT_UNSPEC for
what it lets through, so it must be attached AFTER the host's own tc programs (the usual
order: dataplane up, then faults); a program re-attached later runs before it and hides
the traffic from it.

State lives in bpffs pins under ``PIN_ROOT/fault/<ns>/<ifname>/<hook>/`` (cfg, stats, prog,
and for XDP the chained program in ``next``), so ``mrc fail`` and ``mrc restore`` can run as
separate processes. :func:`detach` puts the interface back as it was: the chained program is
re-attached atomically in place of the fault program.

>>> attach("mrcsw1", "p1", fault=Fault(loss_ppm=percent_to_ppm(5)))   # doctest: +SKIP
>>> read_stats("mrcsw1", "p1").dropped_loss                            # doctest: +SKIP
>>> configure("mrcsw1", "p1", Fault(blackhole=True)); detach("mrcsw1", "p1")  # doctest: +SKIP
>>> attach("mrch1", "eth0", Fault(duplicate_ppm=10_000), hook="tc-egress")  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass

from .. import bpf, netns
from ..errors import MrcError

OBJECT = "mrc_fault"
HOOKS = ("xdp", "tc-ingress", "tc-egress")
TC_HANDLE, TC_PRIORITY = 0xFA17, 1
PPM_ONE = 1_000_000
FAULT_PIN_ROOT = os.path.join(bpf.PIN_ROOT, "fault")
_XDP_VARIANTS = ("mrc_fault_xdp", "mrc_fault_xdp_frags")  # try plain XDP, then xdp.frags
EINVAL = 22


class FaultCfg(ctypes.Structure):
    """Mirror of ``struct fault_cfg`` (tests prove it equal to the BTF layout)."""
    _fields_ = [("loss_ppm", ctypes.c_uint32), ("dup_ppm", ctypes.c_uint32),
                ("reorder_ppm", ctypes.c_uint32), ("blackhole", ctypes.c_uint32)]


class FaultStatsC(ctypes.Structure):
    """Mirror of ``struct fault_stats``: packet counters, per CPU in the map."""
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "seen", "passed", "dropped_loss", "dropped_blackhole", "duplicated", "reordered",
        "clone_failed", "no_next", "released", "release_failed")]


class FaultMarkC(ctypes.Structure):
    """Mirror of ``struct fault_mark``: the ktime of the first drop (0: none yet)."""

    _fields_ = [("first_drop_ns", ctypes.c_uint64)]


def percent_to_ppm(percent: float) -> int:
    """A probability in percent (0..100) as parts per million.

    Raises:
        ValueError: out of range.
    """
    if not 0 <= percent <= 100:
        raise ValueError(f"loss/duplicate/reorder percent {percent}: must be within 0..100")
    return round(percent * PPM_ONE / 100)


@dataclass(frozen=True)
class Fault:
    """What to do to each packet, checked in this order: ``blackhole`` drops everything;
    else drop with ``loss_ppm``; else (tc only) copy with ``duplicate_ppm``; else (tc
    only) hold back until the next packet passes, with ``reorder_ppm``.
    Probabilities in parts per million (0..1000000). ``Fault()`` lets everything through."""
    loss_ppm: int = 0
    blackhole: bool = False
    duplicate_ppm: int = 0
    reorder_ppm: int = 0

    def check(self, hook: str) -> None:
        """Raises ValueError when a value is out of range or the hook cannot do it."""
        for name in ("loss_ppm", "duplicate_ppm", "reorder_ppm"):
            value = getattr(self, name)
            if not isinstance(value, int) or not 0 <= value <= PPM_ONE:
                raise ValueError(f"{name}={value!r}: must be an integer within 0..{PPM_ONE}")
        if hook == "xdp" and (self.duplicate_ppm or self.reorder_ppm):
            raise ValueError("duplicate and reorder need a tc hook (hook='tc-ingress' or "
                             "'tc-egress'): XDP cannot copy a frame")

    def to_c(self) -> FaultCfg:
        return FaultCfg(self.loss_ppm, self.duplicate_ppm, self.reorder_ppm, int(self.blackhole))


@dataclass
class FaultCounters:
    """Packets seen by the fault program, and what happened to each (summed over CPUs).
    ``seen == passed + dropped_loss + dropped_blackhole + duplicated + reordered +
    clone_failed``; ``no_next`` is the part of ``passed`` that XDP gave to the stack.
    A reordered packet is held until the next one passes: ``reordered == released +
    release_failed + held_now``."""
    seen: int = 0
    passed: int = 0
    dropped_loss: int = 0
    dropped_blackhole: int = 0
    duplicated: int = 0
    reordered: int = 0
    clone_failed: int = 0
    no_next: int = 0
    released: int = 0
    release_failed: int = 0
    held_now: int = 0

    @property
    def dropped(self) -> int:
        return self.dropped_loss + self.dropped_blackhole


def _check_hook(hook: str) -> None:
    if hook not in HOOKS:
        raise ValueError(f"fault hook {hook!r}: use one of {', '.join(HOOKS)}")


def fault_dir(ns: str, ifname: str, hook: str = "xdp") -> str:
    """The pin folder of the fault at (ns, ifname, hook)."""
    _check_hook(hook)
    return bpf.pin_path("fault", ns, ifname, hook)


def attach(ns: str, ifname: str, fault: Fault = Fault(), *, hook: str = "xdp") -> None:
    """Put a fault program on ``ifname`` in ``ns`` at ``hook``, configured with ``fault``.

    Raises:
        ValueError: bad hook or fault values. MrcError: the namespace or interface does not
            exist, a fault is already attached there (use :func:`configure`), or the kernel
            refused; nothing is left attached or pinned then.
    """
    _check_hook(hook)
    fault.check(hook)
    if not netns.exists(ns):
        raise MrcError(f"network namespace {ns} does not exist")
    bpf.ensure_bpffs()
    folder = fault_dir(ns, ifname, hook)
    if os.path.exists(folder):
        raise MrcError(f"a {hook} fault is already attached to {ifname} in {ns}; "
                       "configure or detach it")
    os.makedirs(folder)
    try:
        with netns.enter(ns):
            bpf.ifindex_of(ifname)
            if hook == "xdp":
                _attach_xdp(ifname, fault, folder)
            else:
                _attach_tc(ifname, hook.removeprefix("tc-"), fault, folder)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        _prune(os.path.dirname(folder))
        raise


def _pin_common(obj: bpf.BpfObject, prog: bpf.Program, fault: Fault, folder: str) -> None:
    obj.map("fault_cfg").update(0, fault.to_c())
    obj.map("fault_cfg").pin(os.path.join(folder, "cfg"))
    obj.map("fault_stats").pin(os.path.join(folder, "stats"))
    obj.map("fault_mark").pin(os.path.join(folder, "mark"))
    prog.pin(os.path.join(folder, "prog"))


def _load_xdp(variant: str, resident: bpf.Program | None) -> bpf.BpfObject:
    """Load the XDP variant and chain ``resident``; the kernel refuses (EINVAL) to chain a
    program whose xdp.frags flag differs, so the caller tries the other variant."""
    obj = bpf.BpfObject.open(OBJECT)
    try:
        for name in ("mrc_fault_tc_ingress", "mrc_fault_tc_egress", *_XDP_VARIANTS):
            if name != variant:
                obj.program(name).set_autoload(False)
        obj.load()
        if resident is not None:
            obj.map("next").update(0, resident.fd)
        return obj
    except BaseException:
        obj.close()
        raise


def _attach_xdp(ifname: str, fault: Fault, folder: str) -> None:
    info = bpf.xdp_query(ifname)
    resident = bpf.Program.from_id(info.prog_id) if info.prog_id else None
    try:
        for variant in _XDP_VARIANTS:
            try:
                obj = _load_xdp(variant, resident)
                break
            except bpf.BpfError as exc:
                if exc.errno != EINVAL or variant == _XDP_VARIANTS[-1]:
                    raise
        with obj:
            prog = obj.program(variant)
            _pin_common(obj, prog, fault, folder)
            obj.map("next").pin(os.path.join(folder, "next"))
            if resident is None:
                bpf.xdp_attach(ifname, prog, "auto")
            else:
                bpf.xdp_attach(ifname, prog, info.mode or "auto", expected=resident)  # a resident has a mode
    finally:
        if resident is not None:
            resident.close()


def _attach_tc(ifname: str, direction: str, fault: Fault, folder: str) -> None:
    name = f"mrc_fault_tc_{direction}"
    with bpf.BpfObject.open(OBJECT) as obj:
        for other in obj.program_names():
            if other != name:
                obj.program(other).set_autoload(False)
        prog = obj.load().program(name)
        _pin_common(obj, prog, fault, folder)
        obj.map("hold").pin(os.path.join(folder, "hold"))
        bpf.tc_attach(ifname, prog, direction, handle=TC_HANDLE, priority=TC_PRIORITY)


def configure(ns: str, ifname: str, fault: Fault, *, hook: str = "xdp") -> None:
    """Change the fault at (ns, ifname, hook); takes effect on the next packet.

    Raises:
        ValueError: bad values for this hook. MrcError: no fault attached there.
    """
    fault.check(hook)
    with _pinned(ns, ifname, hook, "cfg", value_type=FaultCfg) as cfg:
        cfg.update(0, fault.to_c())
    # Zeroed after the new configuration is in place, so the next stamp is a drop under it
    # (at worst one drop of the new fault, microseconds, goes unstamped).
    reset_first_drop(ns, ifname, hook=hook)


def first_drop_ns(ns: str, ifname: str, *, hook: str = "xdp") -> int | None:
    """``bpf_ktime_get_ns()`` (CLOCK_MONOTONIC, ns; every namespace shares the kernel's clock)
    of the first packet the fault at (ns, ifname, hook) dropped since it was attached or last
    configured; None when it has dropped nothing yet.

    Raises:
        MrcError: no fault attached there.
    """
    with _pinned(ns, ifname, hook, "mark", value_type=FaultMarkC) as mark:
        return mark.lookup(0).first_drop_ns or None


def reset_first_drop(ns: str, ifname: str, *, hook: str = "xdp") -> None:
    """Forget the first drop: the next dropped packet stamps it again. Raises MrcError if no
    fault is attached there."""
    with _pinned(ns, ifname, hook, "mark", value_type=FaultMarkC) as mark:
        mark.update(0, FaultMarkC(0))


def clear(ns: str, ifname: str, *, hook: str = "xdp") -> None:
    """Let everything through again; the program stays attached and keeps counting."""
    configure(ns, ifname, Fault(), hook=hook)


def read_config(ns: str, ifname: str, *, hook: str = "xdp") -> Fault:
    """The fault currently configured at (ns, ifname, hook). Raises MrcError if none."""
    with _pinned(ns, ifname, hook, "cfg", value_type=FaultCfg) as cfg:
        c = cfg.lookup(0)
    return Fault(c.loss_ppm, bool(c.blackhole), c.dup_ppm, c.reorder_ppm)


def read_stats(ns: str, ifname: str, *, hook: str = "xdp") -> FaultCounters:
    """Counters of the fault at (ns, ifname, hook), summed over CPUs. Raises MrcError if none."""
    with _pinned(ns, ifname, hook, "stats", value_type=FaultStatsC) as stats:
        total = stats.lookup_sum(0)
    counters = FaultCounters(**{name: getattr(total, name) for name, *_ in FaultStatsC._fields_})
    if hook != "xdp":
        with _pinned(ns, ifname, hook, "hold") as hold:
            # Each CPU's slot 0 starts with the held packet's length (0: empty).
            counters.held_now = sum(raw[:4] != bytes(4) for raw in hold.lookup(0))
    return counters


@contextlib.contextmanager
def _pinned(ns: str, ifname: str, hook: str, name: str, **types) -> Iterator[bpf.Map]:
    path = os.path.join(fault_dir(ns, ifname, hook), name)
    if not os.path.exists(path):
        raise MrcError(f"no {hook} fault attached to {ifname} in {ns}")
    with bpf.Map.from_pin(path, key_type=ctypes.c_uint32, **types) as m:
        yield m


def detach(ns: str, ifname: str, *, hook: str = "xdp") -> bool:
    """Remove the fault at (ns, ifname, hook) and restore the interface: for XDP the chained
    program goes back in its place, atomically. Returns False if there was no fault.
    A namespace or interface that has gone (fabric torn down) only loses the pins."""
    folder = fault_dir(ns, ifname, hook)
    if not os.path.exists(folder):
        return False
    try:
        if netns.exists(ns):
            with netns.enter(ns):
                if _iface_exists(ifname):
                    if hook == "xdp":
                        _detach_xdp(ifname, folder)
                    else:
                        bpf.tc_detach(ifname, hook.removeprefix("tc-"), handle=TC_HANDLE,
                                      priority=TC_PRIORITY)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        _prune(os.path.dirname(folder))
    return True


def _iface_exists(ifname: str) -> bool:
    try:
        bpf.ifindex_of(ifname)
        return True
    except bpf.BpfError:
        return False


def _detach_xdp(ifname: str, folder: str) -> None:
    info = bpf.xdp_query(ifname)
    with bpf.Program.from_pin(os.path.join(folder, "prog")) as ours:
        if info.prog_id != ours.id:
            return  # someone replaced or removed it already: leave their program alone
        with bpf.Map.from_pin(os.path.join(folder, "next"), value_type=ctypes.c_uint32) as nxt:
            resident_id = nxt.lookup(0)  # a PROG_ARRAY reads back as program ids
        if not resident_id:
            bpf.xdp_detach(ifname)
            return
        with bpf.Program.from_id(resident_id) as resident:
            bpf.xdp_attach(ifname, resident, info.mode or "auto", expected=ours)  # ours is attached: a mode


def _prune(folder: str) -> None:
    # Remove empty <ifname>, <ns> and fault/ folders: nothing of ours stays in bpffs.
    while folder == FAULT_PIN_ROOT or folder.startswith(FAULT_PIN_ROOT + "/"):
        try:
            os.rmdir(folder)
        except OSError:
            return
        folder = os.path.dirname(folder)


def list_faults() -> list[tuple[str, str, str]]:
    """Every fault recorded in bpffs, as (ns, ifname, hook)."""
    found: list[tuple[str, str, str]] = []
    if not os.path.isdir(FAULT_PIN_ROOT):
        return found
    for ns in sorted(os.listdir(FAULT_PIN_ROOT)):
        for ifname in sorted(os.listdir(os.path.join(FAULT_PIN_ROOT, ns))):
            for hook in sorted(os.listdir(os.path.join(FAULT_PIN_ROOT, ns, ifname))):
                if hook in HOOKS:
                    found.append((ns, ifname, hook))
    return found


def detach_all(ns_prefix: str = "mrc") -> list[tuple[str, str, str]]:
    """Detach every fault in namespaces whose name starts with ``ns_prefix``; returns them."""
    gone = [f for f in list_faults() if f[0].startswith(ns_prefix)]
    for ns, ifname, hook in gone:
        detach(ns, ifname, hook=hook)
    return gone


@contextlib.contextmanager
def injected(ns: str, ifname: str, fault: Fault, *, hook: str = "xdp") -> Iterator[None]:
    """Attach ``fault`` for the ``with`` block, and detach it afterwards, even on error."""
    attach(ns, ifname, fault, hook=hook)
    try:
        yield
    finally:
        detach(ns, ifname, hook=hook)
