"""``mrc write`` and ``mrc listen``: run the software MRC endpoint (design section 6).

QPs are set up out of band (MRC has no CM): both sides agree on QP numbers, the rkey and the
VA by options, whose defaults match, so ``mrc listen B`` and ``mrc write A B 64M`` work together.

A host may be named by NIC address (bound in the caller's namespace, as before) or by the name
of a host of a running fabric (``h1-0``; ``--fabric NAME`` when several run): then the
endpoint's socket is made inside that host's namespace (``mrckit.netns.enter`` around the
endpoint's creation; its thread starts there too, and the socket stays in that namespace),
so ``mrc write h0-0 h1-0 32M`` works from the root namespace. Entering the namespace in this
process, rather than re-running ``mrc`` under ``nsenter``, keeps one process, one Python
start-up, and errors and Ctrl-C exactly as without a fabric.
"""

from __future__ import annotations

import hashlib
import os
import re
import time

import click

from ..endpoint.choices import ENDPOINTS, TRANSPORTS, check_transport
from ..errors import MrcError
from .params import INT

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(i?b)?\s*$", re.I)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
LISTEN_QPN, WRITE_QPN, DEFAULT_RKEY = 0x200, 0x100, 0x1000


def parse_size(text: str) -> int:
    """``64M``, ``64MiB``, ``1g`` or ``4096`` to bytes (binary units).

    Raises:
        MrcError: not a size.
    """
    m = _SIZE.match(text)
    if not m:
        raise MrcError(f"size {text!r} is not a number of bytes such as 4096, 64M or 1GiB")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


TRANSPORT_HELP = ("What the QPs speak: mrc, or rc (the RC baseline: RoCEv2 RC's go-back-N on one path; "
                  "native endpoint only; on a fabric, bring it up with `mrc fabric up --transport rc` so "
                  "each QP keeps one EV).")


def transport_option(fn):
    """``--transport mrc|rc`` (default mrc), for every command that runs endpoints."""
    return click.option("--transport", type=click.Choice(TRANSPORTS), default="mrc", show_default=True,
                        help=TRANSPORT_HELP)(fn)


def check_transport_option(transport: str, impl: str) -> None:
    """MrcError (one line) for ``--transport rc`` with an endpoint that lacks it."""
    try:
        check_transport(transport, impl)
    except ValueError as exc:
        raise MrcError(f"--transport {transport}: {exc}") from None


def _endpoint(addr: str, ns: str | None = None, impl: str = "python", **kw):
    """An endpoint (``impl`` python or native) bound to ``addr``, made inside namespace ``ns``
    (None: this one)."""
    import contextlib

    from .. import netns
    from ..endpoint import implementation

    try:
        cls = implementation(impl)
    except ValueError as exc:
        raise MrcError(f"--endpoint {impl}: {exc}") from None
    where = f"namespace {ns}" if ns else "this network namespace"
    try:
        with netns.enter(ns) if ns else contextlib.nullcontext():
            return cls(addr, **kw)
    except OSError as exc:
        raise MrcError(f"cannot bind [{addr}]:4791: {exc.strerror} (is {addr} configured on an "
                       f"interface of {where}, and the port free?)") from None


def _busy_poll(impl: str, busy_poll: bool) -> dict:
    """The endpoint keywords for ``--busy-poll``; MrcError if the endpoint cannot busy-poll."""
    if not busy_poll:
        return {}
    if impl != "native":
        raise MrcError("--busy-poll: only the native endpoint busy-polls (add --endpoint native)")
    return {"busy_poll": True}


def _host(ref: str, fabric: str | None, what: str):
    """``ref`` (NIC address or fabric host name) as ``(NIC address, namespace or None,
    fabric or None)``; MrcError naming ``what`` (SRC, DST, ADDR) if it is neither."""
    from ..fabric.hostref import find_host, is_address

    if fabric is None and is_address(ref):
        return ref, None, None
    try:
        host = find_host(ref, fabric)
    except MrcError as exc:
        if fabric:
            raise MrcError(f"{what} {ref!r}: {exc}") from None
        raise MrcError(f"{what} {ref!r} is not an IPv6 NIC address nor a fabric host name: {exc}") from None
    if host is None:  # an address with no fabric: used as it is (is_address caught it above)
        return ref, None, None
    return host.nic_address, host.ns, host.fabric


def _check_nic(addr: str, what: str) -> None:
    """MrcError unless ``addr`` is an mrckit NIC address (2001:db8:100:L::H, design 3.3)."""
    from ..wire.addressing import parse_nic_address

    try:
        parse_nic_address(addr)
    except ValueError as exc:
        raise MrcError(f"{what} {exc}; MRC endpoints have NIC addresses 2001:db8:100:L::H "
                       "(or give a fabric host name such as h1-0)") from None


def _allocate(size: str, nbytes: int, make):
    """``make(nbytes)``, with running out of memory reported as a user mistake (a size such
    as 1T is accepted by the parser but cannot be held in this process)."""
    try:
        return make(nbytes)
    except (MemoryError, OverflowError):
        raise MrcError(f"size {size} ({nbytes} B) does not fit in this machine's memory") from None


def _progress(console):
    """A rich byte-count progress bar on ``console`` (rich is imported here: ``mrc`` starts fast)."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn, TransferSpeedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(binary_units=True),
                    TransferSpeedColumn(), TimeElapsedColumn(), console=console, transient=False)


def _print_summary(title: str, rows) -> None:
    """Print ``(name, value)`` rows as a rich table on stdout."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_header=False)
    for k, v in rows:
        table.add_row(k, v)
    Console().print(table)


def _goodput(nbytes: int, seconds: float) -> str:
    if seconds <= 0:
        return "n/a"
    return f"{nbytes * 8 / seconds / 1e9:.3f} Gb/s ({nbytes / seconds / 1e6:.1f} MB/s)"


def _counter(c) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(c.items())) or "none"


@click.command("write", short_help="Write SIZE random bytes from SRC into the listener at DST.")
@click.argument("src")
@click.argument("dst")
@click.argument("size")
@click.option("--qpn", type=INT, default=WRITE_QPN, show_default=True, help="Local QP number.")
@click.option("--remote-qpn", type=INT, default=LISTEN_QPN, show_default=True, help="The listener's QP number.")
@click.option("--rkey", type=INT, default=DEFAULT_RKEY, show_default=True, help="The listener's region rkey.")
@click.option("--va", type=INT, default=0, show_default=True, help="Remote virtual address to write at.")
@click.option("--imm", type=INT, default=1, show_default=True, help="Immediate of the WRITE_WITH_IMM that ends the transfer.")
@click.option("--mtu", type=int, default=2048, show_default=True, help="Payload bytes per packet.")
@click.option("--mpr", type=int, default=1024, show_default=True, help="PSN window (multiple of 128).")
@click.option("--rto-exp", type=int, default=None, help="RTO = 1.024 us x 2^N (0..24); default 16 for the "
              "python endpoint (a Python thread cannot hold shorter timers on a busy host), 8 for native.")
@click.option("--linear-retries", type=int, default=7, show_default=True, help="Timeouts at the base RTO (0..7).")
@click.option("--exp-retries", type=int, default=7, show_default=True, help="Doubling timeouts after those (0..25, 25 = no limit).")
@click.option("--timeout", type=float, default=300.0, show_default=True, help="Seconds to wait for completion.")
@click.option("--fabric", metavar="NAME", help="The running fabric whose hosts SRC and DST name "
              "(default: the one fabric that has them).")
@click.option("--endpoint", "impl", type=click.Choice(ENDPOINTS), default="python", show_default=True,
              help="Which MRC endpoint runs: the Python reference or the native (C) one.")
@click.option("--busy-poll", is_flag=True, help="Native endpoint only: its thread spins on the socket "
              "instead of sleeping (lower latency, one core kept busy).")
@transport_option
def write_cmd(src, dst, size, qpn, remote_qpn, rkey, va, imm, mtu, mpr, rto_exp, linear_retries, exp_retries,
              timeout, fabric, impl, busy_poll, transport):
    """Write SIZE random bytes (e.g. 64M) from SRC into the region of the MRC listener at DST,
    as one WRITE_WITH_IMM, and print a summary. SRC and DST are NIC addresses
    (2001:db8:100:L::H; SRC must be on this namespace) or host names of a running fabric
    (h0-0: the write runs inside SRC's namespace)."""
    from rich.console import Console

    from ..endpoint import QpConfig, QpError, RetryConfig

    nbytes = parse_size(size)
    if timeout <= 0:
        raise MrcError(f"--timeout {timeout}: must be a positive number of seconds")
    check_transport_option(transport, impl)
    src, ns, src_fabric = _host(src, fabric, "SRC")
    dst, _, _ = _host(dst, fabric or src_fabric, "DST")
    _check_nic(dst, "DST")  # before binding SRC: a wrong DST is the user's mistake to hear first
    if rto_exp is None:
        from ..endpoint.native import NATIVE_TIMEOUT_EXP

        rto_exp = NATIVE_TIMEOUT_EXP if impl == "native" else RetryConfig().timeout_exp
    config = QpConfig(mtu=mtu, mpr=mpr, retry=RetryConfig(rto_exp, linear_retries, exp_retries), transport=transport)
    data = _allocate(size, nbytes, os.urandom)
    console = Console(stderr=True)
    ep = _endpoint(src, ns, impl, **_busy_poll(impl, busy_poll))
    try:
        qp = ep.create_qp(dst, qpn=qpn, remote_qpn=remote_qpn, config=config)
        t0 = time.monotonic()
        comp = ep.write(qp, data, va, rkey, imm=imm)
        with _progress(console) as bar:
            task = bar.add_task(f"write {dst}", total=nbytes)
            while not comp.done() and time.monotonic() - t0 < timeout:
                time.sleep(0.05)
                bar.update(task, completed=min(qp.requestor.stats.acked_bytes, nbytes))
            bar.update(task, completed=min(qp.requestor.stats.acked_bytes, nbytes))
        comp.wait(0)
        seconds = (comp.finished_ns - comp.started_ns) / 1e9
        stats, cwnd = qp.requestor.stats, qp.requestor.cc.cwnd
    except TimeoutError:
        raise MrcError(f"the write did not complete within {timeout} s (is `mrc listen {dst}` running?)") from None
    except QpError as exc:
        hint = f" (is `mrc listen {dst}` running, with matching QP numbers?)" if "retry counter" in str(exc) else ""
        raise MrcError(f"{exc}{hint}") from None
    finally:
        ep.close()
    _print_summary(f"mrc write {src} -> {dst}", (
        ("bytes", f"{nbytes}"), ("duration", f"{seconds:.3f} s"), ("goodput", _goodput(nbytes, seconds)),
        ("packets sent", f"{stats.packets}"), ("retransmits", _counter(stats.retransmits)),
        ("NACKs received", _counter(stats.nacks)), ("SACKs received", f"{stats.sacks} ({stats.ecn_sacks} with ECN)"),
        *((("RC ACKs received", f"{stats.acks} ({stats.seq_naks} NAK sequence errors)"),) if transport == "rc" else ()),
        ("timeouts", f"{stats.timeouts}"), ("final cwnd", f"{cwnd / 1024:.0f} KiB")))
    click.echo(f"sha256 {hashlib.sha256(data).hexdigest()}")


@click.command("listen")
@click.argument("addr")
@click.option("--size", "size", default="64M", show_default=True, help="Region size (e.g. 64M).")
@click.option("--peer", default="::", help="The writer's NIC address (replies go to the sender anyway).")
@click.option("--qpn", type=INT, default=LISTEN_QPN, show_default=True, help="Local QP number.")
@click.option("--remote-qpn", type=INT, default=WRITE_QPN, show_default=True, help="The writer's QP number.")
@click.option("--rkey", type=INT, default=DEFAULT_RKEY, show_default=True, help="rkey of the region.")
@click.option("--va", type=INT, default=0, show_default=True, help="Base virtual address of the region.")
@click.option("--count", type=int, default=1, show_default=True, help="Exit after this many WRITE_WITH_IMM completions.")
@click.option("--timeout", type=float, default=None, help="Give up after this many seconds.")
@click.option("--fabric", metavar="NAME", help="The running fabric whose host ADDR names "
              "(default: the one fabric that has it).")
@click.option("--endpoint", "impl", type=click.Choice(ENDPOINTS), default="python", show_default=True,
              help="Which MRC endpoint runs: the Python reference or the native (C) one.")
@click.option("--busy-poll", is_flag=True, help="Native endpoint only: its thread spins on the socket "
              "instead of sleeping (lower latency, one core kept busy).")
@transport_option
def listen_cmd(addr, size, peer, qpn, remote_qpn, rkey, va, count, timeout, fabric, impl, busy_poll, transport):
    """Run an MRC responder on ADDR with one memory region, until COUNT WRITE_WITH_IMM
    completions arrive; print a summary with the region's SHA-256. ADDR is a NIC address of
    this namespace, or a host name of a running fabric (h1-0: it listens inside its namespace)."""
    from rich.console import Console

    nbytes = parse_size(size)
    if count < 1:
        raise MrcError(f"--count {count}: must be at least 1")
    if timeout is not None and timeout <= 0:
        raise MrcError(f"--timeout {timeout}: must be a positive number of seconds")
    check_transport_option(transport, impl)
    addr, ns, _ = _host(addr, fabric, "ADDR")
    if peer != "::":
        peer, _, _ = _host(peer, fabric, "--peer")
    console = Console(stderr=True)
    ep = _endpoint(addr, ns, impl, **_busy_poll(impl, busy_poll))
    got = []
    try:
        mr = _allocate(size, nbytes, lambda n: ep.register_mr(n, base_va=va, rkey=rkey))
        from ..endpoint import QpConfig

        ep.create_qp(peer, qpn=qpn, remote_qpn=remote_qpn, config=QpConfig(transport=transport))
        console.print(f"listening on [{ep.nic_addr}]:4791 QP {qpn:#x} rkey {rkey:#x} VA {va:#x} size {nbytes}")
        t_start = None
        with _progress(console) as bar:
            task = bar.add_task(f"listen {ep.nic_addr}", total=nbytes)
            t0 = time.monotonic()
            while len(got) < count:
                if timeout is not None and time.monotonic() - t0 > timeout:
                    raise MrcError(f"{len(got)} of {count} WRITE_WITH_IMM completions after {timeout} s")
                comp = ep.poll_recv(0.1)
                st = ep.responder.stats
                if t_start is None and st.packets:
                    t_start = time.monotonic()
                if comp is not None:
                    got.append((comp, time.monotonic()))
                bar.update(task, completed=min(mr.placed_bytes, nbytes))
        st = ep.responder.stats
    finally:
        ep.close()
    seconds = got[-1][1] - t_start if t_start else 0.0
    _print_summary(f"mrc listen {ep.nic_addr}", (
        ("bytes placed", f"{st.placed_bytes}"), ("duration", f"{seconds:.3f} s (first packet to last completion)"),
        ("goodput", _goodput(st.placed_bytes, seconds)), ("packets", f"{st.packets}"),
        ("duplicates", f"{st.duplicates}"), ("trimmed arrivals", f"{st.trimmed}"),
        ("bad ICRC", f"{st.bad_icrc} of {st.icrc_checked} checked"), ("SACKs sent", f"{st.sacks}"),
        ("NACKs sent", _counter(st.nacks)),
        *((("RC ACKs sent", f"{st.acks} ({st.seq_naks} NAK sequence errors, {st.out_of_sequence} "
                              "packets discarded past a gap)"),) if transport == "rc" else ()),
        ("immediates", ", ".join(f"{c.imm:#x}" for c, _ in got))))
    click.echo(f"sha256 {mr.sha256()}")


def register(main: click.Group) -> None:
    """Add ``write`` and ``listen`` to the ``mrc`` group."""
    main.add_command(write_cmd)
    main.add_command(listen_cmd)
