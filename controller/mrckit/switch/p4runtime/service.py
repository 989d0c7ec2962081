"""The gRPC face of a ``Device``: the ``p4.v1.P4Runtime`` service (finsy's generated stubs).

Refusals become the RPC status. A Write with failed updates ends with status UNKNOWN and, in
the ``grpc-status-details-bin`` trailer, a ``google.rpc.Status`` whose details hold one
``p4.v1.Error`` per update in request order (OK for the updates that took effect), the batch
error format of P4Runtime spec 1.4 section 12.3; a Read with invalid requests answers the
valid ones and ends the same way (section 13.3).
"""

import logging
import threading

import grpc
from finsy.proto import p4r, p4r_grpc, rpc_status

from .device import Device
from .errors import P4RuntimeError

log = logging.getLogger(__name__)
ERROR_SPACE = "mrckit-ebpf-switch"
_CLOSED = object()


def _abort(context, exc: P4RuntimeError):
    context.abort(exc.code, exc.message)


def batch_status(results: list, what: str = "updates") -> rpc_status.Status:
    """The ``google.rpc.Status`` of a Write with failed updates, or a Read with failed
    requests: code UNKNOWN, one p4.v1.Error per item in order, OK with no other field for the
    items that succeeded (spec 1.4 sections 12.3 and 13.3)."""
    failed = [(i, r) for i, r in enumerate(results) if r is not None]
    first_index, first = failed[0]
    status = rpc_status.Status(code=grpc.StatusCode.UNKNOWN.value[0],
                               message=f"{len(failed)} of {len(results)} {what} failed; the first (#{first_index}): {first}")
    for r in results:
        err = p4r.Error(canonical_code=0) if r is None else p4r.Error(
            canonical_code=r.code.value[0], message=r.message, space=ERROR_SPACE)
        status.details.add().Pack(err)
    return status


class P4RuntimeService(p4r_grpc.P4RuntimeServicer):
    """Serves one device. Unary RPCs run under the device lock; each StreamChannel has a reader
    thread, and arbitration updates for it arrive through its outbox."""

    def __init__(self, device: Device):
        self.device = device

    def Write(self, request, context):
        try:
            results = self.device.write(request)
        except P4RuntimeError as exc:
            return _abort(context, exc)
        if any(r is not None for r in results):
            status = batch_status(results)
            context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
            context.abort(grpc.StatusCode.UNKNOWN, status.message)
        return p4r.WriteResponse()

    def Read(self, request, context):
        try:
            found, errors = self.device.read(request)
        except P4RuntimeError as exc:
            return _abort(context, exc)
        for start in range(0, max(len(found), 1), 1000):
            yield p4r.ReadResponse(entities=found[start:start + 1000])
        if any(e is not None for e in errors):
            status = batch_status(errors, "requests")
            context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
            context.abort(grpc.StatusCode.UNKNOWN, status.message)

    def SetForwardingPipelineConfig(self, request, context):
        try:
            self.device.set_pipeline(request)
        except P4RuntimeError as exc:
            return _abort(context, exc)
        return p4r.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request, context):
        try:
            return self.device.get_pipeline(request)
        except P4RuntimeError as exc:
            return _abort(context, exc)

    def Capabilities(self, request, context):
        return self.device.capabilities()

    def close_streams(self) -> None:
        """End every open StreamChannel: each handler's loop wakes on its outbox and returns,
        so a stopping server's worker threads never wait on a stream that will get nothing."""
        for stream in self.device.arbiter.streams():
            stream.outbox.put(_CLOSED)

    def StreamChannel(self, request_iterator, context):
        arbiter = self.device.arbiter
        stream = arbiter.open()
        failure: list[P4RuntimeError] = []
        reader = threading.Thread(target=self._read_stream, args=(request_iterator, stream, failure),
                                  name="p4rt-stream", daemon=True)
        reader.start()
        context.add_callback(lambda: stream.outbox.put(_CLOSED))
        try:
            while True:
                msg = stream.outbox.get()
                if msg is _CLOSED:
                    break
                yield msg
        finally:
            arbiter.close(stream)
        if failure:
            _abort(context, failure[0])

    def _read_stream(self, request_iterator, stream, failure: list) -> None:
        try:
            for req in request_iterator:
                kind = req.WhichOneof("update")
                if kind == "arbitration":
                    self.device.arbiter.arbitrate(stream, req.arbitration)
                elif not stream.arbitrated:
                    raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION, "the first stream message must be an arbitration update")
                else:
                    log.debug("ignoring stream message %s: this switch has no packet I/O or digests", kind)
        except P4RuntimeError as exc:
            failure.append(exc)
        except grpc.RpcError:
            pass  # the client went away
        finally:
            stream.outbox.put(_CLOSED)
