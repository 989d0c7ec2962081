"""Property tests (hypothesis): build -> bytes -> parse -> equal, for every layer and codec;
malformed and truncated bytes never raise anything but a clear ValueError."""

import ipaddress

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scapy.fields import ConditionalField
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.packet import Raw

from mrckit.wire import (
    container_pack, container_unpack, ev_from_wire, ev_pack, ev_to_wire, ev_unpack,
    host_link_name, nic_address, parse_link_name, parse_nic_address, parse_port_address,
    path_da, path_usids, port_address, t1_link_name, un_shift, usid_pack, usid_unpack,
)
from mrckit.wire.constants import Dscp, Opcode
from mrckit.wire.icrc import icrc_append, icrc_check
from mrckit.wire.layers import HEADER_LAYERS, MrcBTH, RETH
from mrckit.wire.packet import frame_ev, header_stack, mrc_frame, parse_frame

from support.wire_layout import py_layout

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _field_strategy(field, bits: int):
    if "Signed" in type(field).__name__:
        return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    return st.integers(0, (1 << bits) - 1)


def layer_values(cls):
    """A strategy of field values for every field of ``cls`` (ICRC included for the BTH)."""
    fields = {f.name: f for f in cls.fields_desc}
    strategies = {name: _field_strategy(fields[name], bits) for name, _, bits in py_layout(cls)}
    if any(isinstance(f, ConditionalField) for f in cls.fields_desc):
        strategies["icrc"] = st.integers(0, 0xFFFFFFFF)
    return st.fixed_dictionaries(strategies)


@pytest.mark.parametrize("name", list(HEADER_LAYERS))
def test_every_layer_round_trips(name):
    cls = HEADER_LAYERS[name]

    @SETTINGS
    @given(layer_values(cls))
    def check(values):
        data = bytes(cls(**values))
        assert len(data) == cls.wire_len + (4 if "icrc" in values else 0)
        parsed = cls(data)
        assert {k: parsed.getfieldval(k) for k in values} == values
        assert bytes(parsed) == data

    check()


MRC_OPCODES = [int(o) for o in Opcode]
NOT_TRIMMED = [d for d in Dscp if d not in (Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP)]


@st.composite
def frames(draw):
    opcode = draw(st.sampled_from(MRC_OPCODES))
    ts = draw(st.booleans())
    bth = draw(layer_values(MrcBTH))
    bth.pop("icrc")
    bth.update(opcode=opcode, ts=int(ts and opcode < Opcode.ACK))
    stack = MrcBTH(**bth)
    for layer_name in header_stack(opcode, bool(bth["ts"])):
        cls = HEADER_LAYERS[layer_name]
        stack = stack / cls(**draw(layer_values(cls)))
    payload = draw(st.binary(max_size=64)) if opcode < Opcode.ACK else b""
    if payload:
        stack = stack / Raw(payload)
    encap = draw(st.booleans())
    outer = dict(outer_src="2001:db8:201::1", outer_dst=str(path_da(1, 2, 0, 1, 2))) if encap else {}
    ev = draw(st.integers(0, 0xFFFFFFFF))
    frame = mrc_frame(stack, ev=ev, inner_src="2001:db8:100::1", inner_dst="2001:db8:100:1::3",
                      dscp=draw(st.sampled_from(NOT_TRIMMED)), ecn=draw(st.integers(0, 3)), **outer)
    return frame, ev


@SETTINGS
@given(frames())
def test_whole_frames_round_trip(case):
    frame, ev = case
    data = bytes(frame)
    parsed = parse_frame(data)
    assert bytes(parsed) == data
    assert frame_ev(parsed) == ev
    for layer in [MrcBTH] + [HEADER_LAYERS[n] for n in header_stack(parsed[MrcBTH].opcode, parsed[MrcBTH].ts)]:
        assert layer in parsed
        for field, *_ in py_layout(layer):
            assert parsed[layer].getfieldval(field) == frame[layer].getfieldval(field)
    inner = bytes(parsed[UDP].underlayer)
    assert icrc_check(inner)


@SETTINGS
@given(st.binary(max_size=200))
def test_random_bytes_never_raise_unclearly(data):
    try:
        parse_frame(data)
    except ValueError:
        assert len(data) < 14
    try:
        MrcBTH(data)
    except ValueError as exc:
        assert "MRC BTH" in str(exc)


@SETTINGS
@given(frames(), st.data())
def test_truncated_frames_parse(case, data):
    raw = bytes(case[0])
    cut = data.draw(st.integers(14, len(raw) - 1))
    parsed = parse_frame(raw[:cut])  # must not raise
    assert parsed.type == 0x86DD and parsed.original == raw[:cut]


@SETTINGS
@given(frames(), st.binary(min_size=1, max_size=40))
def test_garbage_after_udp_parses(case, garbage):
    # The UDP and IPv6 lengths must cover the garbage, or bytes past the old lengths are
    # Ethernet padding rather than UDP payload (hypothesis found 21 bytes after a 20-byte ACK).
    frame = case[0].copy()
    frame[UDP].remove_payload()
    frame[UDP].len = None
    for n in (1, 2):  # the outer IPv6 header and, when encapsulated, the inner one
        ip = frame.getlayer(IPv6, n)
        if ip is not None:
            ip.plen = None
    data = bytes(frame / Raw(garbage))
    parsed = parse_frame(data)  # any bytes after UDP :4791 parse: short headers become Raw
    assert parsed[UDP].dport == 4791 and bytes(parsed[UDP].payload) == garbage
    assert bytes(parsed) == data


def test_truncated_header_errors_name_the_header():
    with pytest.raises(ValueError, match=r"MRC BTH: 5 bytes left, the header needs 16"):
        MrcBTH(b"\xca" * 5)
    with pytest.raises(ValueError, match=r"MRC RETH: 3 bytes left, the header needs 16"):
        RETH(b"\0" * 3)
    with pytest.raises(ValueError, match="frame is 3 bytes"):
        parse_frame(b"abc")


# --- codecs --------------------------------------------------------------------------------
@SETTINGS
@given(st.integers(0, 15), st.integers(0, 255), st.integers(0, (1 << 20) - 1))
def test_ev_fields_round_trip(plane, t1, salt):
    ev = ev_pack(plane, t1, salt)
    assert tuple(ev_unpack(ev)) == (plane, t1, salt)
    assert ev_from_wire(*ev_to_wire(ev)) == ev


@SETTINGS
@given(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF))
def test_ev_wire_round_trip(flow_label, sport):
    assert ev_to_wire(ev_from_wire(flow_label, sport)) == (flow_label, sport)


usids = st.builds(usid_pack, st.integers(0, 15), st.integers(1, 3), st.integers(0, 1023))


@SETTINGS
@given(st.integers(0, 15), st.integers(1, 3), st.integers(0, 1023))
def test_usid_round_trip(plane, role, index):
    usid = usid_pack(plane, role, index)
    assert usid != 0
    assert tuple(usid_unpack(usid)) == (plane, role, index)


@SETTINGS
@given(st.lists(usids, max_size=6), st.integers(0, 0xFFFFFFFF))
def test_container_round_trip_and_shift(usid_list, locator):
    da = container_pack(usid_list, locator)
    assert container_unpack(da) == (locator, usid_list)
    assert container_unpack(un_shift(da)) == (locator, usid_list[1:])


@SETTINGS
@given(st.integers(0, 15), st.integers(0, 1023), st.integers(0, 1022))
def test_addresses_round_trip(plane, leaf, downlink):
    assert tuple(parse_nic_address(nic_address(leaf, downlink))) == (leaf, downlink)
    p, loc = parse_port_address(port_address(plane, leaf, downlink))
    assert (p, tuple(loc)) == (plane, (leaf, downlink))
    assert parse_nic_address(str(nic_address(leaf, downlink))) == (leaf, downlink)


@SETTINGS
@given(st.integers(0, 15), st.integers(0, 1023), st.integers(0, 255), st.integers(0, 1022))
def test_link_names_round_trip(plane, leaf, t1, downlink):
    assert tuple(parse_link_name(t1_link_name(plane, leaf, t1))) == (plane, leaf, "t1", t1)
    assert tuple(parse_link_name(host_link_name(plane, leaf, downlink))) == (plane, leaf, "down", downlink)


@SETTINGS
@given(st.integers(0, 15), st.integers(0, 255), st.integers(0, 1023), st.integers(0, 1023),
       st.integers(0, 1022))
def test_path_walk_ends_at_the_downlink(plane, t1, src_leaf, dst_leaf, downlink):
    da = int(path_da(plane, t1, src_leaf, dst_leaf, downlink))
    hops = path_usids(plane, t1, src_leaf, dst_leaf, downlink)
    for usid in hops[:-1]:
        assert (da >> 80) & 0xFFFF == usid
        da = un_shift(da)
    assert container_unpack(da) == (0xFCBBBB00, [usid_pack(plane, 3, downlink)])
    assert ipaddress.IPv6Address(da).exploded.startswith("fcbb:bb00:")


@SETTINGS
@given(frames(), st.integers(0, 0xFFFF))
def test_icrc_append_check_and_ev_independence(case, sport):
    inner = bytes(case[0][UDP].underlayer)[:-4]
    assert icrc_check(icrc_append(inner))
    moved = inner[:40] + sport.to_bytes(2, "big") + inner[42:]  # another EV: same ICRC
    assert icrc_append(moved)[-4:] == icrc_append(inner)[-4:]
