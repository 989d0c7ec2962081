"""Harness for the switch's BPF_PROG_TEST_RUN tests: a loaded ``mrc_switch`` object used inside a
test namespace, whose ports all point at that namespace's loopback (test runs do not transmit)."""

from mrckit import netns
from mrckit.bpf.objects import BpfObject
from mrckit.switch.ebpf_target import SwitchTables
from mrckit.wire.pipeline import THRESHOLD_NONE
from support.switch_frames import prefix48

from mrckit.topology.entries import TableEntry

LO_IFINDEX = 1
XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_TX, XDP_REDIRECT = range(5)


class Harness:
    """A loaded switch program: ``tables`` (SwitchTables) and :meth:`run` for one frame."""

    def __init__(self, obj: BpfObject, ns: str):
        self.obj, self.ns = obj, ns
        self.prog = obj.program("mrc_switch")
        self.tables = SwitchTables.from_object(obj)
        self.tables.init_defaults()
        self.tables.queues.reset()

    def wire_ports(self, ports) -> None:
        """Give every switch port in ``ports`` a DEVMAP entry (the namespace's loopback)."""
        with netns.enter(self.ns):
            for port in ports:
                self.tables.maps["tx_ports"].update(port, LO_IFINDEX)

    def set_ingress(self, port: int) -> None:
        """Frames of :meth:`run` arrive on switch ``port``."""
        with netns.enter(self.ns):
            self.tables.ports.bind(port, LO_IFINDEX)

    def run(self, frame: bytes, repeat: int = 1):
        """(XDP return code, frame out) of one test run inside the namespace."""
        with netns.enter(self.ns):
            res = self.prog.test_run(frame, repeat=repeat)
        return res.retval, res.data


# uSIDs of plane 0 (design 3.3: plane(4) | role(2) | index(10)); role 1 T0, 2 T1, 3 DOWN.
T0_0, T0_1, T1_5, DOWN_2 = 0x0400, 0x0401, 0x0805, 0x0C02
HOST_PORT, FABRIC_PORT, FABRIC_PORT_2, HOST_PORT_2 = 0, 1, 2, 3


def mac(port: int, far: bool = False) -> str:
    return f"02:00:00:00:00:{(0xB0 if far else 0xA0) + port:02x}"


def port_config(sw, port, *, faces_host, trim=THRESHOLD_NONE, ecn=THRESHOLD_NONE):
    sw.tables.direct.write(TableEntry.exact("port_config", port, "set_port", {
        "src_mac": int(mac(port).replace(":", ""), 16), "dst_mac": int(mac(port, True).replace(":", ""), 16),
        "faces_host": int(faces_host), "trim_threshold": trim, "ecn_threshold": ecn}))


def leaf(sw, my_usid=T0_0, *, trim=THRESHOLD_NONE, ecn=THRESHOLD_NONE):
    """A T0 with my uSID ``my_usid``: T1_5 up port 1, T0_1 up port 2, DOWN_2 to host port 3."""
    sw.wire_ports(range(4))
    sw.set_ingress(HOST_PORT)
    sw.tables.direct.write(TableEntry.exact("my_usid", prefix48(my_usid), "usid_un"))
    for usid, port in ((T1_5, FABRIC_PORT), (T0_1, FABRIC_PORT_2), (DOWN_2, HOST_PORT_2)):
        sw.tables.direct.write(TableEntry.exact("usid_fib", prefix48(usid), "set_egress", {"port": port}))
    for port in range(4):
        port_config(sw, port, faces_host=port in (HOST_PORT, HOST_PORT_2), trim=trim, ecn=ecn)


COUNTER_NAMES = ("rx_port", "tx_port", "trim_port", "ecn_port", "drop_port", "drop_reason")


def counters(sw):
    """Every non-zero counter cell: name -> {index: (packets, bytes)}."""
    return {name: sw.tables.counters.nonzero(name) for name in COUNTER_NAMES}


def expect_counters(sw, **nonzero):
    """Assert that the counters named in ``nonzero`` hold exactly those cells, the others none."""
    want = {name: {} for name in COUNTER_NAMES}
    want.update(nonzero)
    assert counters(sw) == want
