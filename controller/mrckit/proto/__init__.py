"""mrckit.proto: the gRPC APIs of mrckit's own servers: the host agent's (``host_agent.proto``,
served by ``mrckit.host.service``, used by ``mrckit.control.hosts``, design sections 5 and 7)
and the controller's northbound (``controller.proto``, served by ``mrckit.control.northbound``,
used through ``mrckit.control.client``, design section 7).

The .proto files are the source; ``<name>_pb2.py`` and ``<name>_pb2_grpc.py`` are generated
from them by ``python -m mrckit.proto.gen`` (grpcio-tools) and committed; tests/unit/proto
checks that they are current. Imports nothing else of mrckit.
"""
