"""`mrc write` argument checks that come before any socket is bound."""

from click.testing import CliRunner

from mrckit.cli import main


def test_a_dst_that_is_no_mrckit_nic_address_is_refused_before_binding_src():
    # SRC is on no interface of this namespace: had it been bound first, the error would be
    # "cannot bind"; the DST mistake must be the one reported.
    result = CliRunner().invoke(main, ["write", "2001:db8:100:3ff::3ff", "2001:db8:5::1", "1M"])
    assert result.exit_code == 2
    assert "DST 2001:db8:5::1 is not a NIC address (third hextet must be 100)" in result.output
    assert "cannot bind" not in result.output
