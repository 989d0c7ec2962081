"""The Python reference of the EV hash (mrckit.wire.ecmp): input packing, CRC-32, member pick."""

import collections
import random

import pytest

from mrckit.wire.ecmp import ecmp_hash, ecmp_hash_input, ecmp_member, ev_member
from support.crc32 import crc32_bitwise


def test_input_packs_fields_msb_first_and_pads_at_the_end():
    assert ecmp_hash_input(0xABCDE, 0x1234) == bytes([0xAB, 0xCD, 0xE1, 0x23, 0x40])
    assert ecmp_hash_input(0xABCDE, None) == bytes([0xAB, 0xCD, 0xE0])


def test_hash_is_ieee_crc32():
    # the bit-by-bit CRC-32 that the ICRC tests check against the catalogue's check value
    for fl, sport in [(0, 0), (0xFFFFF, 0xFFFF), (0x12345, 0xBEEF), (1, None)]:
        assert ecmp_hash(fl, sport) == crc32_bitwise(ecmp_hash_input(fl, sport))


def test_member_order_is_by_member_id_not_by_argument_order():
    for fl in range(200):
        assert ecmp_member([3, 1, 2], fl, 7) == ecmp_member([1, 2, 3], fl, 7)


def test_ev_splits_into_flow_label_and_source_port():
    ev = 0x1234ABCD
    assert ev_member([10, 20, 30], ev) == ecmp_member([10, 20, 30], 0xABCD, 0x1234)


def test_random_evs_spread_evenly():
    rng = random.Random(7)
    counts = collections.Counter(ev_member([1, 2, 3, 4, 5], rng.getrandbits(32)) for _ in range(50_000))
    assert set(counts) == {1, 2, 3, 4, 5}
    assert all(abs(c / 10_000 - 1) < 0.05 for c in counts.values()), counts


@pytest.mark.parametrize("args", [((), 1, 2), ([1], 1 << 20, 0), ([1], 0, 1 << 16), ([1], -1, 0)])
def test_bad_input_is_a_value_error(args):
    with pytest.raises(ValueError):
        ecmp_member(*args)
