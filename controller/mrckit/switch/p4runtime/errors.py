"""The one error type of the P4Runtime server: a gRPC status code plus a message.

Every check in the server raises ``P4RuntimeError``; the gRPC layer turns it into the RPC's
status (P4Runtime spec 1.4, section 11 "Error reporting"), or, inside a Write, into one
``p4.v1.Error`` of the batch.
"""

import grpc


class P4RuntimeError(Exception):
    """A request the server refuses.

    ``code`` is a ``grpc.StatusCode`` (INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS,
    PERMISSION_DENIED, FAILED_PRECONDITION, UNIMPLEMENTED, RESOURCE_EXHAUSTED, ...);
    ``message`` names what is wrong and where.
    """

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"


def invalid(message: str) -> P4RuntimeError:
    """Shorthand for an INVALID_ARGUMENT error."""
    return P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, message)


def backend_call(fn, *args) -> None:
    """Call a backend method; turn what it refuses into ``P4RuntimeError``: NotImplementedError
    -> UNIMPLEMENTED, ValueError/KeyError -> INVALID_ARGUMENT, OSError (a map update) ->
    INTERNAL. A ``P4RuntimeError`` from the backend passes unchanged."""
    try:
        fn(*args)
    except NotImplementedError as exc:
        raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED, str(exc)) from exc
    except (ValueError, KeyError) as exc:
        raise invalid(str(exc)) from exc
    except OSError as exc:
        raise P4RuntimeError(grpc.StatusCode.INTERNAL, f"BPF map update failed: {exc}") from exc
