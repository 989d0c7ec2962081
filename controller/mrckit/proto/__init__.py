"""mrckit.proto: the host agent's gRPC API, shared by the agent (``mrckit.host.service``) and
the controller (``mrckit.control.hosts``), design sections 5 and 7.

``host_agent.proto`` is the source; ``host_agent_pb2.py`` and ``host_agent_pb2_grpc.py`` are
generated from it by ``python -m mrckit.proto.gen`` (grpcio-tools) and committed;
tests/unit/proto checks that they are current. Imports nothing else of mrckit.
"""
