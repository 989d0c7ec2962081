"""Test harness: a real eBPF switch (pinned maps, loaded program) in a test namespace, and a raw
P4Runtime client over real gRPC (finsy's generated stubs)."""

import os
from pathlib import Path

import grpc
from google.protobuf import text_format

from finsy.proto import p4i, p4r, p4r_grpc

from mrckit import netns
from mrckit.switch.ebpf_target import EbpfSwitch, switch_pin_dir

from support.paths import DEVICE_CONFIG, ROOT  # noqa: F401  (re-exported to the P4Runtime tests)
from support.paths import P4INFO as P4INFO_PATH
LO_IFINDEX = 1
DEVICE_ID = 1


def load_p4info(path: Path = P4INFO_PATH) -> p4i.P4Info:
    """The P4Info text proto at ``path``."""
    return text_format.Parse(path.read_text(), p4i.P4Info())


class Switch:
    """An eBPF switch set up in its own namespace, without ports: frames go in through
    BPF_PROG_TEST_RUN and every switch port's DEVMAP entry is the namespace's loopback."""

    def __init__(self, name: str, ns: str):
        self.name, self.ns = name, ns
        # libbpf creates only the last folder of a pin path; the manager relies on the parent.
        os.makedirs(os.path.dirname(switch_pin_dir(name)), exist_ok=True)
        self.sw = EbpfSwitch(name, ns, {}).setup()
        self.tables = self.sw.tables
        self.prog = self.sw._obj.program("mrc_switch")  # the manager keeps the loaded object

    def wire_ports(self, ports, ingress: int = 0) -> None:
        with netns.enter(self.ns):
            for port in ports:
                self.tables.maps["tx_ports"].update(port, LO_IFINDEX)
        self.tables.maps["ifindex_port"].update(LO_IFINDEX, ingress)

    def run(self, frame: bytes):
        """(XDP verdict, frame out) of one frame through the program."""
        with netns.enter(self.ns):
            res = self.prog.test_run(frame)
        return res.retval, res.data

    def snapshot(self) -> dict:
        """Every table entry and default action, and every ECMP member, group and route,
        straight from the maps."""
        snap = {t: (self.tables.direct.read(t), self.tables.direct.default(t))
                for t in ("my_usid", "usid_fib", "port_config")}
        return snap | {"members": self.members(), "groups": self.groups(), "routes": self.routes()}

    def members(self) -> dict:
        """The ecmp_selector members in the maps: {member id: (action, params)}."""
        return {m.member_id: (m.action, m.params) for m in self.tables.ecmp.members()}

    def groups(self) -> dict:
        """The ecmp_selector groups in the maps: {group id: member ids, ascending}."""
        return {g.group_id: g.members for g in self.tables.ecmp.groups()}

    def routes(self) -> dict:
        """The ipv6_fib entries in the maps: {prefix: ("member" | "group", id)}."""
        return {r.prefix: r.target for r in self.tables.ecmp.routes()}


class Client:
    """A raw P4Runtime client (finsy's generated stubs) with an open arbitration stream."""

    def __init__(self, address: str, election_id: int | None = 1):
        self.channel = grpc.insecure_channel(address)
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self.election_id = election_id
        self._out = __import__("queue").Queue()
        self.stream = self.stub.StreamChannel(iter(self._out.get, None))
        self.answer = self.arbitrate(election_id)  # the server's first arbitration update

    def arbitrate(self, election_id: int | None):
        msg = p4r.StreamMessageRequest()
        msg.arbitration.device_id = DEVICE_ID
        if election_id is not None:
            msg.arbitration.election_id.high, msg.arbitration.election_id.low = election_id >> 64, election_id & (2**64 - 1)
        self.election_id = election_id
        self._out.put(msg)
        return self.next_arbitration()

    def next_arbitration(self):
        return next(self.stream).arbitration

    def _stamp(self, req):
        req.device_id = DEVICE_ID
        if self.election_id is not None:
            req.election_id.high, req.election_id.low = self.election_id >> 64, self.election_id & (2**64 - 1)
        return req

    def set_pipeline(self, p4info=None, action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT, cookie=42):
        req = self._stamp(p4r.SetForwardingPipelineConfigRequest(action=action))
        req.config.p4info.CopyFrom(p4info if p4info is not None else load_p4info())
        req.config.p4_device_config = DEVICE_CONFIG
        req.config.cookie.cookie = cookie
        return self.stub.SetForwardingPipelineConfig(req)

    def get_pipeline(self, response_type=p4r.GetForwardingPipelineConfigRequest.ALL):
        return self.stub.GetForwardingPipelineConfig(
            p4r.GetForwardingPipelineConfigRequest(device_id=DEVICE_ID, response_type=response_type))

    def write(self, *updates, atomicity=p4r.WriteRequest.CONTINUE_ON_ERROR):
        req = self._stamp(p4r.WriteRequest(atomicity=atomicity))
        req.updates.extend(updates)
        return self.stub.Write(req)

    def read(self, *entities):
        req = p4r.ReadRequest(device_id=DEVICE_ID)
        req.entities.extend(entities)
        return [e for reply in self.stub.Read(req) for e in reply.entities]

    def close(self):
        self._out.put(None)
        self.channel.close()


