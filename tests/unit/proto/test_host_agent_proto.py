"""The committed gRPC stubs are what grpcio-tools makes of host_agent.proto and controller.proto today."""

import re

import pytest

from mrckit.proto import gen

# The stubs record the versions of the tools that made them; a newer grpcio-tools may differ
# there and only there.
_VERSIONS = re.compile(r"(GRPC_GENERATED_VERSION = |Protobuf Python Version: |PUBLIC,\s*)[0-9.,\s']+")


def _normalised(text: str) -> str:
    return _VERSIONS.sub(r"\1<version>", text)


def test_generated_stubs_are_current(tmp_path):
    pytest.importorskip("grpc_tools", reason="grpcio-tools (the test extra) is not installed")
    for fresh in gen.generate(tmp_path):
        committed = gen.PROTO_DIR / fresh.name
        assert _normalised(committed.read_text()) == _normalised(fresh.read_text()), (
            f"{committed} is stale: run python -m mrckit.proto.gen and commit the result")


def test_stubs_import_and_carry_the_four_rpcs():
    from mrckit.proto import host_agent_pb2, host_agent_pb2_grpc

    service = host_agent_pb2.DESCRIPTOR.services_by_name["HostAgent"]
    assert [m.name for m in service.methods] == ["Configure", "SetEvState", "WatchEvents", "GetStats"]
    assert service.methods_by_name["WatchEvents"].server_streaming
    assert hasattr(host_agent_pb2_grpc, "HostAgentServicer")


def test_controller_stubs_carry_the_northbound_rpcs():
    from mrckit.proto import controller_pb2, controller_pb2_grpc

    service = controller_pb2.DESCRIPTOR.services_by_name["Controller"]
    assert [m.name for m in service.methods] == ["ReportLink", "GetStatus", "WatchTimeline"]
    assert service.methods_by_name["WatchTimeline"].server_streaming
    assert hasattr(controller_pb2_grpc, "ControllerServicer")
