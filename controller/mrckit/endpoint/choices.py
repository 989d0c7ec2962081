"""The names users choose an endpoint by, defined once for the CLI and the applications.

- ``ENDPOINTS``: the implementations, ``native`` (the C endpoint, docs/endpoint.md "The native
  endpoint") and ``python`` (the reference);
- ``TRANSPORTS``: what a QP speaks, ``mrc`` (MRC: spraying over EVs, SACK, selective
  retransmission) or ``rc`` (the RC baseline: RoCEv2 RC's go-back-N on one path, native
  endpoint only; docs/endpoint.md "The RC baseline").
"""

from __future__ import annotations

ENDPOINTS = ("native", "python")
TRANSPORTS = ("mrc", "rc")
RC_NEEDS_NATIVE = "the rc transport runs on the native endpoint only (--endpoint native)"
"""The one-line error for ``rc`` with the Python endpoint."""


def check_transport(transport: str, endpoint: str = "native") -> None:
    """Raise ValueError unless ``transport`` is one of :data:`TRANSPORTS` and runs on
    ``endpoint`` (one of :data:`ENDPOINTS`)."""
    if transport not in TRANSPORTS:
        raise ValueError(f"transport {transport!r}: use {' or '.join(TRANSPORTS)}")
    if endpoint not in ENDPOINTS:
        raise ValueError(f"endpoint {endpoint!r}: use {' or '.join(ENDPOINTS)}")
    if transport == "rc" and endpoint != "native":
        raise ValueError(RC_NEEDS_NATIVE)
