"""A deliberately failing packet test, to show what a failure reports (docs/packet-tests.md,
"Reading a failure"). Its name does not start with ``test_``, so ``pytest`` skips it unless
named: ``pytest failing_example.py --mrc-target ebpf``.

The test expects hop limit 62 after one switch, which decrements it once: 63 comes out."""

from scapy.layers.inet6 import IPv6

from srv6_tables import mrc_write, out_of


def test_wrong_hop_limit(switch):
    pkt = mrc_write("fcbb:bb00:801:401::", in_port=1)
    want = out_of(pkt, 3)
    want[IPv6].dst = "fcbb:bb00:401::"
    want[IPv6].hlim = 62            # wrong on purpose: 64 - 1 is 63
    switch.send(1, pkt)
    switch.expect(3, want, timeout=1.0)
