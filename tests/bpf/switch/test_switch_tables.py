"""The P4-name mapping of ``mrckit.switch.tables`` / ``SwitchTables``: layouts equal the C
structs, writes validate everything before touching a map, reads give back what was written."""

import ctypes

import pytest

from mrckit.bpf.btf import btf_struct_layout
from mrckit.errors import MrcError
from mrckit.switch import tables as T
from mrckit.switch.ebpf_target import MAP_TYPES
from mrckit.switch.errors import EntryExists, EntryNotFound
from mrckit.topology.entries import TableEntry
from mrckit.wire import pipeline as P
from mrckit.wire.constants import DropReason


def test_ctypes_sizes_match_the_maps(switch):
    for name, (ktype, vtype) in MAP_TYPES.items():
        m = switch.obj.map(name)
        assert (m.key_size, m.value_size) == (ctypes.sizeof(ktype), ctypes.sizeof(vtype)), name


def test_ctypes_layouts_match_btf():
    """Every ctypes struct equals its C struct in the object's BTF: names, offsets, sizes."""
    for cname, ctype in (("usid_key", T.UsidKey), ("table_action", T.TableAction),
                         ("port_config", T.PortConfig), ("counter", T.Counter), ("vqueue", T.VQueue),
                         ("usid_slot", T.UsidSlot), ("queue_rate", T.QueueRate),
                         ("ifindex_slot", T.IfindexSlot), ("ipv6_lpm_key", T.Ipv6LpmKey),
                         ("fib_ref", T.FibRef), ("ecmp_group", T.EcmpGroup), ("port_state", T.PortState)):
        layout = btf_struct_layout("mrc_switch", cname)
        assert layout.size == ctypes.sizeof(ctype), cname
        mine = {f[0]: (getattr(ctype, f[0]).offset, getattr(ctype, f[0]).size) for f in ctype._fields_}
        assert {n: (f.offset, f.size) for n, f in layout.fields.items()} == mine, cname


def test_write_read_delete_roundtrip(switch):
    t = switch.tables
    t.direct.write(TableEntry.exact("MyIngress.usid_fib", 0xFCBBBB000805, "MyIngress.set_egress", {"port": 511}))
    t.direct.write(TableEntry.exact("my_usid", 0xFCBBBB000400, "usid_un"))
    t.direct.write(TableEntry.exact("port_config", 7, "set_port", {"src_mac": 0x0200000000A7, "dst_mac": 0x0200000000B7,
                                                 "faces_host": 1, "trim_threshold": 8, "ecn_threshold": 4}))
    assert t.direct.read("usid_fib") == [TableEntry("usid_fib", {P.DA_PREFIX_FIELD: 0xFCBBBB000805}, "set_egress", {"port": 511})]
    assert t.direct.read("my_usid") == [TableEntry("my_usid", {P.DA_PREFIX_FIELD: 0xFCBBBB000400}, "usid_un", {})]
    assert t.direct.read("port_config") == [TableEntry("port_config", {P.EGRESS_PORT_FIELD: 7}, "set_port", {
        "src_mac": 0x0200000000A7, "dst_mac": 0x0200000000B7, "faces_host": 1,
        "trim_threshold": 8, "ecn_threshold": 4})]
    # The map bytes are the contract's layout: prefix in network order, pad zero.
    raw = next(iter(t.maps["usid_fib"].typed(None, None).items()))
    assert raw == (bytes.fromhex("fcbbbb000805") + b"\0\0", (2).to_bytes(4, "little") + (511).to_bytes(4, "little"))
    for table, key in (("usid_fib", 0xFCBBBB000805), ("my_usid", 0xFCBBBB000400), ("port_config", 7)):
        t.direct.delete(TableEntry.exact(table, key))
        assert t.direct.read(table) == []
        with pytest.raises(EntryNotFound):
            t.direct.delete(TableEntry.exact(table, key))


def test_insert_modify_semantics(switch):
    t = switch.tables
    with pytest.raises(EntryNotFound):
        t.direct.write(TableEntry.exact("usid_fib", 1, "drop"), mode="modify")
    t.direct.write(TableEntry.exact("usid_fib", 1, "drop"), mode="insert")
    with pytest.raises(EntryExists):
        t.direct.write(TableEntry.exact("usid_fib", 1, "set_egress", {"port": 2}), mode="insert")
    t.direct.write(TableEntry.exact("usid_fib", 1, "set_egress", {"port": 2}), mode="modify")
    assert t.direct.read("usid_fib")[0].params == {"port": 2}


@pytest.mark.parametrize("entry,needle", [
    (TableEntry("nope", {P.DA_PREFIX_FIELD: 1}, "drop"), "unknown table"),
    (TableEntry.route("2001:db8::/32", member=1), "table 'ipv6_fib' is indirect"),
    (TableEntry.exact("usid_fib", 1 << 48, "drop"), "48 bits"),
    (TableEntry.exact("usid_fib", 1), "names no action"),
    (TableEntry.exact("usid_fib", 1, "usid_un"), "not one of"),
    (TableEntry.exact("usid_fib", 1, "set_egress"), "parameters"),
    (TableEntry.exact("usid_fib", 1, "set_egress", {"port": 512}), "9 bits"),
    (TableEntry.exact("port_config", 512, "set_port"), "9 bits"),
    (TableEntry.exact("port_config", 1, "set_port", {"src_mac": 1, "dst_mac": 1, "faces_host": 2,
                                                     "trim_threshold": 1, "ecn_threshold": 1}), "faces_host"),
    (("usid_fib", 1, "drop", {}), "is not a TableEntry"),
])
def test_bad_writes_are_refused_and_change_nothing(switch, entry, needle):
    with pytest.raises(MrcError, match=needle):
        switch.tables.direct.write(entry)
    for table in P.TABLE_NAMES:
        assert switch.tables.direct.read(table) == []


def test_defaults(switch):
    t = switch.tables
    assert t.direct.default("usid_fib") == TableEntry("usid_fib", {}, "drop")
    assert t.direct.default("my_usid") == TableEntry("my_usid", {}, "NoAction")
    assert t.direct.default("port_config") == TableEntry("port_config", {}, "NoAction")
    t.maps["table_defaults"].update(1, T.TableAction())  # a fresh all-zero entry reads as drop
    assert t.direct.default("usid_fib") == TableEntry("usid_fib", {}, "drop")
    with pytest.raises(MrcError):
        t.direct.set_default(TableEntry("port_config", {}, "NoAction"))


def test_counters_and_settings_validation(switch):
    t = switch.tables
    with pytest.raises(MrcError, match="unknown counter"):
        t.counters.read("bogus", 0)
    with pytest.raises(MrcError, match="outside"):
        t.counters.read("drop_reason", len(DropReason))
    assert t.counters.read("MyIngress.rx_port", 511) == (0, 0)
    with pytest.raises(MrcError):
        t.queues.set_rate(0, -1)
    with pytest.raises(MrcError):
        t.ports.set_up(512, True)
    with pytest.raises(MrcError, match="switch port True outside"):
        t.ports.set_up(True, False)
    with pytest.raises(MrcError, match="port_state.down: -1 does not fit its 32 bits"):
        t.ports.down.update(0, -1)
    with pytest.raises(MrcError, match=r"port_state.rate: map port_state: index 512 outside 0\.\.511"):
        t.queues.rates.lookup(512)
    t.queues.set_rate(5, 1000)
    assert t.queues.rate(5) == 1000


def test_each_writer_of_port_state_changes_only_its_part(switch):
    """port_config entries, drain rates, capacities and admin states share one map value per
    port with the program's virtual queue: no write of one part touches another."""
    t, port = switch.tables, 7
    neighbour = bytes(t.maps["port_state"].lookup(port + 1))
    live = T.VQueue(busy_until_ns=123_456_789, backlog=0)
    t.port_state.write(port, "queue", live)  # as the program leaves a busy queue
    params = {"src_mac": 0x020000000001, "dst_mac": 0x020000000002, "faces_host": 1,
              "trim_threshold": 8, "ecn_threshold": 4}
    t.direct.write(TableEntry.exact("port_config", port, "set_port", params))
    t.queues.set_rate(port, 2000)
    t.queues.set_capacity(port, 64)
    t.ports.set_up(port, False)
    kernel = t.maps["port_state"].lookup(port)  # what the program reads
    assert bytes(kernel.queue) == bytes(live)
    assert T.decode_port_config(kernel.config) == params and kernel.config.valid == 1
    assert (kernel.rate.rate_pps, kernel.rate.service_ns, kernel.rate.capacity) == (2000, 500_000, 64)
    assert kernel.down == 1
    t.direct.delete(TableEntry.exact("port_config", port, "set_port", params))
    t.ports.set_up(port, True)
    kernel = t.maps["port_state"].lookup(port)
    assert (bytes(kernel.queue), kernel.config.valid, kernel.rate.rate_pps, kernel.down) == (bytes(live), 0, 2000, 0)
    assert bytes(t.maps["port_state"].lookup(port + 1)) == neighbour


def test_slot_cache_follows_the_table(switch):
    """Prefixes sharing a cache slot (same low 12 bits of the uSID): the program must forward
    each one to its own port through every insert and delete, and miss the others."""
    from support.switch_frames import container, mrc_frame
    from support.switch_harness import XDP_DROP, XDP_REDIRECT

    switch.wire_ports(range(4))
    switch.set_ingress(0)
    t = switch.tables
    loc = 0xFCBBBB00 << 16
    keys = {loc | 0x0805: 1, loc | 0x1805: 2, (0xFCBBBB01 << 16) | 0x0805: 3}

    def da(prefix):
        return container(prefix & 0xFFFF) if prefix >> 16 == 0xFCBBBB00 else "fcbb:bb01:805::"

    def check(present):
        for prefix, port in keys.items():
            rc, out = switch.run(mrc_frame(da(prefix)))
            if prefix in present:
                assert rc == XDP_REDIRECT and t.counters.read("tx_port", port)[0] > 0, hex(prefix)
                t.counters.reset()
            else:
                assert rc == XDP_DROP, hex(prefix)

    present = []
    for prefix, port in keys.items():
        t.direct.write(TableEntry.exact("usid_fib", prefix, "set_egress", {"port": port}))
        present.append(prefix)
        check(present)
        assert t.maps["usid_fib_slots"].lookup(0x805).count == len(present)
    for prefix in list(keys):
        t.direct.delete(TableEntry.exact("usid_fib", prefix))
        present.remove(prefix)
        check(present)
        # A delete leaving one entry does not search the hash for it: the slot goes hash-only.
        slot = t.maps["usid_fib_slots"].lookup(0x805)
        assert (slot.count, slot.hash_only) == (len(present), int(len(present) == 1))
    assert t.maps["usid_fib_slots"].lookup(0x805).count == 0
    # A modify of the single entry on a slot updates the cached action.
    t.direct.write(TableEntry.exact("usid_fib", loc | 0x0805, "set_egress", {"port": 1}))
    t.direct.write(TableEntry.exact("usid_fib", loc | 0x0805, "drop"), mode="modify")
    assert switch.run(mrc_frame(container(0x0805)))[0] == XDP_DROP


def test_apply_validates_everything_first(switch):
    good = TableEntry("usid_fib", {P.DA_PREFIX_FIELD: 0xFCBBBB000805}, "set_egress", {"port": 1})
    bad = TableEntry("usid_fib", {P.DA_PREFIX_FIELD: 0xFCBBBB000806}, "set_egress", {"port": 999})
    with pytest.raises(MrcError, match="9 bits"):
        switch.tables.direct.apply([good, bad])
    misnamed = TableEntry("usid_fib", {P.FIB_DST_FIELD: 0xFCBBBB000806}, "set_egress", {"port": 1})
    with pytest.raises(MrcError, match="the key is 'hdr.outer_ipv6.dst_addr\\[127:80\\]'"):
        switch.tables.direct.apply([good, misnamed])
    assert switch.tables.direct.read("usid_fib") == []
    switch.tables.direct.apply([good, TableEntry("my_usid", {P.DA_PREFIX_FIELD: 0xFCBBBB000400}, "usid_un", {})])
    assert switch.tables.direct.read("usid_fib") == [good]


def test_hash_only_slot_is_cached_again_by_a_write(switch):
    """The entry left on a hash-only slot is cached again when it is next written (it is then
    known to be the one), and forwards the same before and after."""
    from support.switch_frames import container, mrc_frame
    from support.switch_harness import XDP_REDIRECT

    switch.wire_ports(range(4))
    switch.set_ingress(0)
    t = switch.tables
    loc = 0xFCBBBB00 << 16
    t.direct.write(TableEntry.exact("usid_fib", loc | 0x0805, "set_egress", {"port": 1}))
    t.direct.write(TableEntry.exact("usid_fib", loc | 0x1805, "set_egress", {"port": 2}))
    t.direct.delete(TableEntry.exact("usid_fib", loc | 0x0805))
    assert t.maps["usid_fib_slots"].lookup(0x805).hash_only == 1
    rc, out = switch.run(mrc_frame(container(0x1805)))
    assert rc == XDP_REDIRECT and t.counters.nonzero("tx_port") == {2: (1, len(out))}
    t.direct.write(TableEntry.exact("usid_fib", loc | 0x1805, "set_egress", {"port": 3}), mode="modify")
    slot = t.maps["usid_fib_slots"].lookup(0x805)
    assert (slot.count, slot.hash_only, slot.act.port) == (1, 0, 3)
    assert bytes(slot.prefix) == (loc | 0x1805).to_bytes(6, "big")
    rc, out = switch.run(mrc_frame(container(0x1805)))
    assert rc == XDP_REDIRECT and t.counters.nonzero("tx_port") == {2: (1, len(out)), 3: (1, len(out))}
