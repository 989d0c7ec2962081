"""``python -m mrckit.switch.p4runtime --switch NAME [--listen ADDR] ...``: serve one switch.

The eBPF switch manager (``EbpfSwitch(p4runtime=...)``, through ``process.ServerProcess``)
starts this process inside the switch's network namespace. It serves until SIGTERM/SIGINT,
then stops cleanly (exit code 0).
"""

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path

from ...errors import MrcError
from ...wire.pipeline import MRC_SWITCH
from . import store
from .backend import EbpfBackend
from .device import Device
from .server import DEFAULT_ADDRESS, P4RuntimeServer, TlsFiles


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line options of the server process."""
    p = argparse.ArgumentParser(prog="python -m mrckit.switch.p4runtime", description=__doc__.splitlines()[0])
    p.add_argument("--switch", required=True, help="eBPF switch name (pins under /sys/fs/bpf/mrckit/switch/NAME)")
    p.add_argument("--listen", default=DEFAULT_ADDRESS, help="unix:/path or host:port (default %(default)s)")
    p.add_argument("--device-id", type=int, default=1, help="P4Runtime device id (default %(default)s, finsy's default)")
    p.add_argument("--state-dir", type=Path, help="where the pipeline is kept (default /run/mrckit/switch/NAME)")
    p.add_argument("--tls-cert", type=Path)
    p.add_argument("--tls-key", type=Path)
    p.add_argument("--tls-client-ca", type=Path, help="require client certificates signed by this CA")
    p.add_argument("-v", "--verbose", action="store_true")
    return p.parse_args(argv)


def main(argv=None) -> int:
    """Serve until a signal; 2 on a usage or set-up error."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s p4runtime[%(process)d] %(levelname)s %(message)s")
    if bool(args.tls_cert) != bool(args.tls_key):
        print("mrc p4runtime: error: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    tls = TlsFiles(args.tls_cert, args.tls_key, args.tls_client_ca) if args.tls_cert else None
    try:
        backend = EbpfBackend.open(args.switch)
        device = Device(backend, MRC_SWITCH, args.device_id, args.state_dir or store.default_dir(args.switch))
        server = P4RuntimeServer(device, args.listen, tls).start()
    except MrcError as exc:
        print(f"mrc p4runtime: error: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    logging.info("serving switch %s on %s (device id %d)", args.switch, server.address, args.device_id)
    print(f"listening {server.address}", flush=True)
    stop.wait()
    server.stop()
    backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
