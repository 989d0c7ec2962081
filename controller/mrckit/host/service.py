"""The host agent's gRPC service (``mrckit/proto/host_agent.proto``) and its server.

Like every mrckit gRPC server it listens on a unix socket (``unix:/path``) or on loopback
(``127.0.0.1:PORT``) unless told otherwise, and offers TLS when given a key and certificate.
"""

from __future__ import annotations

import grpc
from concurrent import futures

from ..errors import MrcError
from ..proto import host_agent_pb2 as pb
from ..proto import host_agent_pb2_grpc as pbg
from .agent import HostAgent
from .config import from_proto
from .events import EvEvent


def event_to_proto(e: EvEvent) -> pb.EvEvent:
    """The wire form of an :class:`EvEvent`."""
    out = pb.EvEvent(timestamp_ns=e.timestamp_ns, wall_time_ns=e.wall_time_ns, peer=e.peer,
                     ev=e.ev, old_state=e.old_state, new_state=e.new_state, reason=e.reason,
                     replaced_by=e.replaced_by, probe_ok=e.probe_ok, plane=e.plane, link=e.link,
                     opaque=e.opaque)
    if e.ev_counters is not None:
        out.ev_counters.CopyFrom(pb.EvCounters(**e.ev_counters))
    if e.plane_stats is not None:
        out.plane_stats.CopyFrom(pb.PlaneStats(**e.plane_stats))
    return out


class HostAgentService(pbg.HostAgentServicer):
    """gRPC front of a :class:`HostAgent`. User errors become INVALID_ARGUMENT or
    FAILED_PRECONDITION with the agent's message."""

    def __init__(self, agent: HostAgent):
        self.agent = agent

    def Configure(self, request, context):
        try:
            res = self.agent.configure(from_proto(request))
        except (MrcError, ValueError) as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return pb.ConfigureResponse(
            ports=[pb.PortAttachment(ifname=i, plane=p, xdp_mode=m) for i, p, m in res.ports],
            template_evs=res.template_evs, backup_evs=res.backup_evs, warnings=res.warnings,
            mode=res.mode)

    def SetEvState(self, request, context):
        try:
            if request.WhichOneof("target") == "link":
                crossing, changed = self.agent.set_link_denied(request.link, request.denied)
                return pb.SetEvStateResponse(evs_changed=crossing, link_changed=changed,
                                             not_applied=self.agent.denial_note())
            if request.WhichOneof("target") == "ev":
                n = self.agent.set_ev_denied(request.ev.peer or None, request.ev.ev, request.denied)
                return pb.SetEvStateResponse(evs_changed=n)
        except MrcError as exc:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        except ValueError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "SetEvState needs a target: ev or link")

    def WatchEvents(self, request, context):
        q = self.agent.events.subscribe(replay=request.replay)
        context.add_callback(lambda: self.agent.events.unsubscribe(q))
        # No timeout: the callback above (the RPC ended) and EventHub.close put None.
        while (event := q.get()) is not None:
            yield event_to_proto(event)

    def GetStats(self, request, context):
        try:
            out = pb.Stats(counters=self.agent.stats(), mode=self.agent.cfg.mode,
                           planes=[pb.PlaneStats(**row) for row in self.agent.plane_stats()],
                           denied_links=self.agent.denied_links(),
                           denials_applied=not self.agent.denial_note(),
                           rx_paths=[pb.RxPath(**row) for row in self.agent.rx_paths()])
            if request.include_evs:
                by_peer: dict[str, list] = {}
                for row in self.agent.ev_table(request.peer or None):
                    by_peer.setdefault(row["peer"], []).append(pb.EvInfo(
                        slot=max(row["slot"], 0), ev=row["ev"], plane=row["plane"], t1=row["t1"],
                        state=pb.EvState.Value(row["state"]), path=row["path"],
                        tx_packets=row["tx_packets"], tx_bytes=row["tx_bytes"], acked=row["acked"],
                        skips=row["skips"], nacks=row["nacks"], last_tx_ns=row["last_tx_ns"],
                        last_ack_ns=row["last_ack_ns"], retired=row["retired"],
                        probe_streak=row["probe_streak"]))
                out.peers.extend(pb.PeerEvs(peer=p, evs=evs) for p, evs in by_peer.items())
            return out
        except MrcError as exc:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        except ValueError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))


def serve(agent: HostAgent, address: str, *, tls_key: bytes | None = None,
          tls_cert: bytes | None = None, workers: int = 8) -> grpc.Server:
    """Start a gRPC server for ``agent`` on ``address`` (``unix:/path`` or ``HOST:PORT``) and
    return it (``server.stop(grace)`` ends it). TLS when both ``tls_key`` and ``tls_cert``
    (PEM bytes) are given.

    Raises:
        MrcError: the address cannot be bound, or only one of key/cert was given.
    """
    if (tls_key is None) != (tls_cert is None):
        raise MrcError("TLS needs both a key and a certificate")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
    pbg.add_HostAgentServicer_to_server(HostAgentService(agent), server)
    if tls_key is not None:
        creds = grpc.ssl_server_credentials([(tls_key, tls_cert)])
        port = server.add_secure_port(address, creds)
    else:
        port = server.add_insecure_port(address)
    if not address.startswith("unix:") and port == 0:
        raise MrcError(f"cannot listen on {address}")
    server.start()
    return server
