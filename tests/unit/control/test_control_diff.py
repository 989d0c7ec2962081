"""The entry difference (mrckit.control.diff)."""

import pytest

from mrckit.control import diff_entries
from mrckit.errors import MrcError
from mrckit.topology import TableEntry, compile_fabric, generate_clos

K = "hdr.outer_ipv6.dst_addr[127:80]"


def fib(key, port):
    return TableEntry("usid_fib", {K: key}, "set_egress", {"port": port})


def test_identical_sets_need_no_write():
    entries = compile_fabric(generate_clos()).entries("p0-t0-0")
    d = diff_entries(entries, list(reversed(entries)))
    assert len(d) == 0 and d.summary() == "0 insert, 0 modify, 0 delete"


def test_missing_changed_and_stale_entries():
    want = [fib(1, 1), fib(2, 2), fib(3, 3)]
    have = [fib(2, 2), fib(3, 9), fib(4, 4)]
    d = diff_entries(want, have)
    assert d.insert == (fib(1, 1),)
    assert d.modify == (fib(3, 3),)
    assert d.delete == (fib(4, 4),)


def test_another_action_on_the_same_match_is_a_modify():
    drop = TableEntry("usid_fib", {K: 1}, "drop", {})
    assert diff_entries([fib(1, 1)], [drop]).modify == (fib(1, 1),)


def test_same_key_in_another_table_is_another_entry():
    my = TableEntry("my_usid", {K: 1}, "usid_un", {})
    d = diff_entries([my], [fib(1, 1)])
    assert d.insert == (my,) and d.delete == (fib(1, 1),)


def test_a_duplicate_desired_entry_is_refused():
    with pytest.raises(MrcError, match="two entries for usid_fib"):
        diff_entries([fib(1, 1), fib(1, 2)], [])
