"""Fuzz ``mrc_switch.bpf.c`` through BPF_PROG_TEST_RUN with more than 100k frames: valid MRC
frames truncated at every byte boundary, random and mutated frames, and scapy ``fuzz()`` of
every layer. Each output must be a counted drop or a well-formed forwarded frame, and the
counters must add up to the number of inputs."""

import random

from support.switch_harness import DOWN_2, T0_0, T0_1, T1_5, XDP_DROP, XDP_REDIRECT, leaf
from support.switch_frames import container, mrc_frame
from scapy.contrib.roce import BTH
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw, fuzz

from mrckit.netns import enter
from mrckit.wire.constants import Dscp, Ecn, Opcode

ETH_MIN = 14  # BPF_PROG_TEST_RUN refuses XDP input shorter than an Ethernet header (EINVAL)
TRIM_LENGTHS = {134, 138, 142}
ROUTES = {T1_5, T0_1, DOWN_2}
TARGET = 100_000


def templates():
    """Valid frames for every opcode family, class, ECN value and route."""
    out = []
    for opcode in (Opcode.WRITE_ONLY, Opcode.WRITE_FIRST, Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY_IMM,
                   Opcode.SACK, Opcode.NACK, Opcode.ACK):
        for ts in (False, True):
            out.append(mrc_frame(container(T0_0, T1_5, DOWN_2), opcode=opcode, ts=ts, payload=48))
    for dscp in Dscp:
        out.append(mrc_frame(container(T0_0, T0_1, DOWN_2), dscp=dscp, ecn=Ecn.ECT0, payload=32))
    out.append(mrc_frame(container(DOWN_2), hlim=2, payload=16))
    out.append(mrc_frame(container(0x0777), payload=16))
    return out


def scapy_fuzzed(rng, count):
    """scapy ``fuzz()`` applied to each layer in turn (Ethernet, outer IPv6, inner IPv6, UDP,
    BTH) of an MRC frame, the other layers staying valid."""
    layers = [lambda f: f(Ether(dst="02:00:00:00:00:aa")),
              lambda f: f(IPv6(dst=container(T0_0, T1_5), nh=41)),
              lambda f: f(IPv6(nh=17)),
              lambda f: f(UDP(dport=4791)),
              lambda f: f(BTH(opcode=0xCA))]
    out = []
    for i in range(count):
        which = i % len(layers)
        built = [layer(fuzz if j == which else (lambda x: x)) for j, layer in enumerate(layers)]
        pkt = built[0] / built[1] / built[2] / built[3] / built[4] / Raw(rng.randbytes(rng.randrange(0, 40)))
        out.append(bytes(pkt))
    return out


def mutate(rng, frame):
    data = bytearray(frame)
    for _ in range(rng.randrange(1, 9)):
        # Mostly headers (where the program looks), sometimes anywhere.
        pos = rng.randrange(0, min(len(data), 150) if rng.random() < 0.9 else len(data))
        data[pos] = rng.randrange(256)
    if rng.random() < 0.2:
        data = data[:rng.randrange(ETH_MIN, len(data) + 1)]
    return bytes(data)


def corpus(seed=4):
    rng = random.Random(seed)
    temps = templates()
    frames = [t[:n] for t in temps for n in range(ETH_MIN, len(t) + 1)]
    frames += scapy_fuzzed(rng, 2500)
    frames += [rng.randbytes(rng.randrange(ETH_MIN, 300)) for _ in range(15_000)]
    while len(frames) < TARGET + 1000:
        frames.append(mutate(rng, rng.choice(temps)))
    return frames


def dscp(frame):
    return (((frame[14] & 0x0F) << 4) | (frame[15] >> 4)) >> 2


def check_forwarded(frame_in, frame_out):
    """A forwarded frame: IPv6, hop limit decremented, routed DA, whole or trimmed to headers."""
    assert len(frame_out) >= 54 and frame_out[12:14] == b"\x86\xdd"
    assert frame_in[21] >= 2 and frame_out[21] == frame_in[21] - 1
    assert int.from_bytes(frame_out[38:42], "big") == 0xFCBBBB00
    assert int.from_bytes(frame_out[42:44], "big") in ROUTES
    if dscp(frame_out) == dscp(frame_in):
        assert frame_out[54:] == frame_in[54:]
        return False
    assert len(frame_out) in TRIM_LENGTHS and dscp(frame_out) in (Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP)
    assert int.from_bytes(frame_out[18:20], "big") == len(frame_out) - 54
    assert int.from_bytes(frame_out[58:60], "big") == len(frame_out) - 94
    assert int.from_bytes(frame_out[98:100], "big") == len(frame_out) - 94
    assert frame_out[54:58] == frame_in[54:58] and frame_out[60:98] == frame_in[60:98]
    assert frame_out[100:] == frame_in[100:len(frame_out)]
    return True


def test_fuzz_counters_add_up(switch):
    leaf(switch, trim=INF_TRIM, ecn=2)
    switch.tables.queues.set_rate(1, 0)
    switch.tables.queues.set_rate(3, 0)
    frames = corpus()
    assert len(frames) > TARGET
    forwarded = dropped = trimmed = 0
    with enter(switch.ns):
        for frame in frames:
            res = switch.prog.test_run(frame)
            if res.retval == XDP_DROP:
                dropped += 1
                continue
            assert res.retval == XDP_REDIRECT, (res.retval, frame.hex())
            forwarded += 1
            trimmed += check_forwarded(frame, res.data)
    assert forwarded and dropped and trimmed
    t = switch.tables
    total = {name: [sum(v) for v in zip(*t.counters.nonzero(name).values())] or [0, 0]
             for name in ("rx_port", "tx_port", "trim_port", "drop_port", "drop_reason")}
    assert total["rx_port"] == [len(frames), sum(map(len, frames))]
    assert total["tx_port"][0] == forwarded and total["trim_port"][0] == trimmed
    assert total["drop_port"] == total["drop_reason"]
    assert total["drop_reason"][0] == dropped
    assert total["tx_port"][0] + total["drop_reason"][0] == len(frames)
    # Every drop reason of design section 4 except port_down (no port is down) occurred.
    assert set(t.counters.nonzero("drop_reason")) == {0, 1, 2, 3, 5}


INF_TRIM = 4
