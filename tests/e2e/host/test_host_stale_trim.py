"""A trim with stale length fields, as SONiC and Cumulus switches make them, reaches a host over
real veth and XDP: the host repairs the lengths, the responder NACKs the trim, the requestor
retransmits and the write verifies (docs/host.md, "XDP ingress").

Two hosts are wired port to port (hostpair.py). In front of B's XDP program on each plane port
sits ebpf/test_trim_stale.bpf.c, playing the last switch of the path: it cuts every first
transmission of a write whose PSN is a multiple of EVERY to SIZE_KEPT bytes and remarks it,
leaving the IPv6 and UDP lengths as they were, then tail-calls B's program. Without the repair
B would drop each of them as malformed and A would wait for its RTO."""

import contextlib
import hashlib
import os
import struct

import pytest
from support.hostpair import host_pair

from mrckit import netns
from mrckit.bpf.attach import xdp_attach, xdp_query
from mrckit.bpf.objects import BpfObject, Program
from mrckit.endpoint import Endpoint, QpConfig
from mrckit.wire.constants import Dscp

pytestmark = pytest.mark.root
SIZE = 1 << 20
SIZE_KEPT = 200  # bytes of each trimmed frame: its headers and some payload, a fixed-size trim
EVERY = 16


@contextlib.contextmanager
def trimmer_in_front(host, dscp: int):
    """test_trim_stale in front of the XDP program on each of ``host``'s plane ports (the
    program it replaces goes into its ``next``); the host's own program is back on exit."""
    obj = BpfObject.open("test_trim_stale")
    obj.load()
    placed = []
    try:
        obj.map("trim_cfg").update(0, struct.pack("=IIII", SIZE_KEPT, EVERY, dscp, 0))
        ours = obj.program("trim_stale")
        with netns.enter(host.ns):
            for port in host.cfg.ports:
                info = xdp_query(port.ifname)
                resident = Program.from_id(info.prog_id)
                obj.map("next").update(0, resident.fd)  # one slot: every port runs the same program
                xdp_attach(port.ifname, ours, info.mode, expected=resident)
                placed.append((port.ifname, resident, info.mode))
        yield obj
    finally:
        with netns.enter(host.ns):
            for ifname, resident, mode in placed:
                xdp_attach(ifname, resident, mode, expected=obj.program("trim_stale"))
                resident.close()
        obj.close()


@pytest.mark.parametrize("dscp", [Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP])
def test_stale_length_trims_are_repaired_nacked_and_recovered(make_netns, dscp):
    with host_pair(make_netns) as (a, b):
        with trimmer_in_front(b, dscp) as trimmer:
            with netns.enter(a.ns):
                ep_a = Endpoint(a.nic)
            with netns.enter(b.ns):
                ep_b = Endpoint(b.nic)
            try:
                mr = ep_b.register_mr(SIZE, rkey=0x1000)
                ep_b.create_qp(a.nic, qpn=0x200, remote_qpn=0x100, config=QpConfig())
                qp = ep_a.create_qp(b.nic, qpn=0x100, remote_qpn=0x200, config=QpConfig())
                data = os.urandom(SIZE)
                ep_a.write(qp, data, 0, 0x1000).wait(120)
                assert hashlib.sha256(mr.buf).digest() == hashlib.sha256(data).digest()
                rs, qs = ep_b.responder.stats, qp.requestor.stats
            finally:
                ep_a.close(), ep_b.close()
            seen, trimmed, failed = struct.unpack("=QQQ", trimmer.map("trim_stats").lookup(0))
        sb, sa = b.agent.stats(), a.agent.stats()
    assert failed == 0 and seen >= SIZE // 2048
    assert trimmed >= SIZE // 2048 // EVERY // 2
    # Every trim reached B's stack repaired; nothing was dropped as malformed.
    assert sb["dp_rx_trim_repaired"] == trimmed and sb["dp_rx_drop_malformed"] == 0
    # The responder NACKed each one with the class it carried, and the requestor heard each NACK.
    assert rs.trimmed == trimmed
    assert qs.nacks["TRIMMED" if dscp == Dscp.TRIMMED else "TRIMMED_LASTHOP"] == trimmed
    assert qs.retransmits["nack_trimmed" if dscp == Dscp.TRIMMED else "nack_trimmed_lasthop"] >= 1
    # A's XDP took the NACKs as feedback: TRIMMED skips the EV, TRIMMED_LASTHOP does not.
    assert sa["dp_fb_nack_trimmed" if dscp == Dscp.TRIMMED else "dp_fb_nack_lasthop"] == trimmed
