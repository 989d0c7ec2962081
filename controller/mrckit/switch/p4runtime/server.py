"""Run the P4Runtime service on a unix socket or a TCP address, optionally with TLS.

Addresses: ``unix:/path/to/sock`` (the emulator's default: the server runs inside the switch's
namespace and the controller reaches it from the root namespace through the socket) or
``host:port`` (default ``127.0.0.1:9559``, the IANA P4Runtime port). Design section 5 (every
mrckit gRPC server: unix socket or loopback unless configured, TLS offered).
"""

import os
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc
from finsy.proto import p4r_grpc

from ...errors import MrcError
from .device import Device
from .service import P4RuntimeService

DEFAULT_ADDRESS = "127.0.0.1:9559"
MAX_MESSAGE_BYTES = 64 << 20  # a full usid_fib (65,536 entries) in one WriteRequest, with room


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: the server's certificate and key, and optionally a CA that client
    certificates must chain to (then clients must present one)."""

    cert: Path
    key: Path
    client_ca: Path | None = None

    def credentials(self) -> grpc.ServerCredentials:
        """grpcio server credentials; raises MrcError if a file cannot be read."""
        try:
            pair = (Path(self.key).read_bytes(), Path(self.cert).read_bytes())
            ca = Path(self.client_ca).read_bytes() if self.client_ca else None
        except OSError as exc:
            raise MrcError(f"TLS: cannot read {exc.filename}: {exc.strerror}") from exc
        return grpc.ssl_server_credentials([pair], root_certificates=ca, require_client_auth=ca is not None)


def unix_path(address: str) -> str | None:
    """The socket path of a ``unix:`` address, else None."""
    if not address.startswith("unix:"):
        return None
    path = address[len("unix:"):]
    return "/" + path.lstrip("/") if path.startswith("//") else path


class P4RuntimeServer:
    """A running gRPC server for ``device`` on ``address``. ``start()`` returns self;
    ``address`` then holds the bound address (a TCP port 0 is resolved)."""

    def __init__(self, device: Device, address: str = DEFAULT_ADDRESS, tls: TlsFiles | None = None, workers: int = 16):
        self.device = device
        self.address = address
        self.tls = tls
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="p4rt"),
                                   options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                                            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)])
        self._service = P4RuntimeService(device)
        p4r_grpc.add_P4RuntimeServicer_to_server(self._service, self._server)

    def start(self) -> "P4RuntimeServer":
        """Bind and serve. Raises MrcError if the address cannot be bound."""
        path = unix_path(self.address)
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            if os.path.exists(path):
                os.unlink(path)  # a stale socket of a previous run
        creds = self.tls.credentials() if self.tls else None
        try:
            port = self._server.add_secure_port(self.address, creds) if creds else self._server.add_insecure_port(self.address)
        except RuntimeError as exc:
            raise MrcError(f"P4Runtime server cannot listen on {self.address}: {exc}") from exc
        if not path:
            if port == 0:
                raise MrcError(f"P4Runtime server cannot listen on {self.address}")
            host = self.address.rsplit(":", 1)[0]
            self.address = f"{host}:{port}"
        self._server.start()
        return self

    def stop(self, grace: float = 1.0) -> None:
        """Stop serving: refuse new RPCs, end the open streams, let unary RPCs finish for up to
        ``grace`` seconds, then cancel them; return once no handler runs."""
        stopped = self._server.stop(grace)
        self._service.close_streams()
        stopped.wait()
        path = unix_path(self.address)
        if path and os.path.exists(path):
            os.unlink(path)

    def wait(self) -> None:
        """Block until the server stops."""
        self._server.wait_for_termination()

    def __enter__(self) -> "P4RuntimeServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
