"""``python -m mrckit.switch.p4runtime --switch NAME [--listen ADDR] ...``: serve one switch, or
``--switch NAME=ADDR[@DEVICE_ID]`` repeated: serve many from one process.

The eBPF switch manager (``EbpfSwitch(p4runtime=...)``, through ``process.ServerProcess``)
starts the one-switch form inside the switch's network namespace. An emulated fabric starts
the many-switch form once for all its switches (one Python process per switch cost
about 50 MB and a Python start-up each): every switch keeps its own device id, its own socket
and its own gRPC server, reached through its pins, so each is programmed exactly as one bmv2
is. It serves until SIGTERM/SIGINT, then stops cleanly (exit code 0).
"""

import argparse
import faulthandler
import logging
import os
import select
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from ...errors import MrcError
from ...wire.pipeline import MRC_SWITCH
from . import store
from .backend import EbpfBackend
from .device import Device
from .process import SERVING_MARKER
from .server import DEFAULT_ADDRESS, P4RuntimeServer, TlsFiles


STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}
STOP_DEADLINE_S = 8.0
"""How long stopping may take before the stacks are dumped and the process exits: below the
manager's SIGKILL timeout (``process.STOP_TIMEOUT_S``)."""


@dataclass(frozen=True)
class Spec:
    """One switch to serve: pin name, address, device id and pipeline folder."""

    switch: str
    address: str
    device_id: int
    state_dir: Path


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line options of the server process."""
    p = argparse.ArgumentParser(prog="python -m mrckit.switch.p4runtime", description=__doc__.splitlines()[0])
    p.add_argument("--switch", required=True, action="append",
                   help="eBPF switch name (pins under /sys/fs/bpf/mrckit/switch/NAME); or NAME=ADDR[@DEVICE_ID], "
                   "repeatable, to serve many switches (then --state-dir is the parent of their folders)")
    p.add_argument("--listen", default=DEFAULT_ADDRESS, help="unix:/path or host:port (default %(default)s)")
    p.add_argument("--device-id", type=int, default=1, help="P4Runtime device id (default %(default)s, finsy's default)")
    p.add_argument("--state-dir", type=Path, help="where the pipeline is kept (default /run/mrckit/switch/NAME)")
    p.add_argument("--tls-cert", type=Path)
    p.add_argument("--tls-key", type=Path)
    p.add_argument("--tls-client-ca", type=Path, help="require client certificates signed by this CA")
    p.add_argument("-v", "--verbose", action="store_true")
    return p.parse_args(argv)


def specs(args: argparse.Namespace) -> list[Spec]:
    """The switches ``args`` names. Raises MrcError for a malformed ``--switch``."""
    if len(args.switch) == 1 and "=" not in args.switch[0]:
        name = args.switch[0]
        return [Spec(name, args.listen, args.device_id, args.state_dir or store.default_dir(name))]
    out = []
    for value in args.switch:
        name, sep, rest = value.partition("=")
        address, _, dev = rest.rpartition("@") if "@" in rest else (rest, "", str(args.device_id))
        if not sep or not name or not address or not dev.isdigit():
            raise MrcError(f"--switch {value!r}: use NAME=ADDRESS[@DEVICE_ID] to serve several switches")
        folder = args.state_dir / name if args.state_dir else store.default_dir(name)
        out.append(Spec(name, address, int(dev), folder))
    return out


def main(argv=None) -> int:
    """Serve until a signal; 2 on a usage or set-up error."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s p4runtime[%(process)d] %(levelname)s %(message)s")
    if bool(args.tls_cert) != bool(args.tls_key):
        print("mrc p4runtime: error: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    tls = TlsFiles(args.tls_cert, args.tls_key, args.tls_client_ca) if args.tls_cert else None
    stop = _StopSignals()
    served = []
    try:
        for spec in specs(args):
            served.append(_serve(spec, tls))
    except MrcError as exc:
        print(f"mrc p4runtime: error: {exc}", file=sys.stderr)
        _stop(served)
        return 2
    if len(served) > 1:
        print(f"{SERVING_MARKER}{len(served)} switches", flush=True)
    logging.info("%s: stopping", stop.wait())
    # A stop that hangs (a gRPC worker that never returns) must not leave a server its manager
    # has to SIGKILL blind: after STOP_DEADLINE_S every thread's stack goes to the log, and the
    # process exits with status 1.
    faulthandler.dump_traceback_later(STOP_DEADLINE_S, exit=True)
    _stop(served)
    faulthandler.cancel_dump_traceback_later()
    return 0


class _StopSignals:
    """SIGTERM and SIGINT, caught from construction on and awaited by :meth:`wait`.

    The handler only records the signal: it takes no lock, so it cannot deadlock against the
    thread it interrupts. A caught signal is never fatal, whichever thread the kernel hands it
    to (gRPC's threads included), so the server always stops through :func:`_stop`. The wait
    blocks on the interpreter's wakeup fd, with no periodic wake-up, and cannot miss a signal
    that came before it.
    """

    def __init__(self):
        self.received: list[int] = []
        self._r, w = os.pipe()
        os.set_blocking(w, False)
        signal.set_wakeup_fd(w)
        for sig in STOP_SIGNALS:
            signal.signal(sig, lambda signum, _frame: self.received.append(signum))

    def wait(self) -> str:
        """Block until a stop signal came; its name."""
        while not self.received:
            select.select([self._r], [], [])  # the wakeup fd: readable once a signal came
            os.read(self._r, 512)
        return signal.Signals(self.received[0]).name


def _serve(spec: Spec, tls: TlsFiles | None) -> tuple[P4RuntimeServer, EbpfBackend]:
    backend = EbpfBackend.open(spec.switch)
    try:
        device = Device(backend, MRC_SWITCH, spec.device_id, spec.state_dir)
        server = P4RuntimeServer(device, spec.address, tls).start()
    except BaseException:
        backend.close()
        raise
    logging.info("serving switch %s on %s (device id %d)", spec.switch, server.address, spec.device_id)
    print(f"listening {server.address}", flush=True)
    return server, backend


def _stop(served: list[tuple[P4RuntimeServer, EbpfBackend]]) -> None:
    for server, backend in served:
        server.stop()
        backend.close()


if __name__ == "__main__":
    sys.exit(main())
