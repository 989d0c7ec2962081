"""mrckit.bpf: opening and loading objects, and the errors a user sees."""

import pytest

from mrckit import bpf


def test_load_lists_programs_and_maps(need_bpf):
    with bpf.BpfObject.open("test_maps") as obj:
        assert obj.program_names() == ["xdp_count", "xdp_shared_bump", "tc_count"]
        assert sorted(obj.map_names()) == ["cfg", "layout_probe", "shared", "stats"]
        obj.load()
        prog = obj.program("xdp_count")
        assert prog.section == "xdp"
        assert prog.fd > 0 and prog.id > 0


def test_open_by_path_equals_open_by_name(need_bpf):
    path = bpf.object_path("test_xdp_pass")
    assert path.name == "test_xdp_pass.bpf.o" and path.parent == bpf.OBJ_DIR
    with bpf.BpfObject.open(str(path)) as obj:
        assert obj.program_names() == ["xdp_pass"]


def test_unknown_program_and_map_name_what_exists(need_bpf):
    with bpf.BpfObject.open("test_maps") as obj:
        with pytest.raises(bpf.BpfError, match="no program 'nope'.*xdp_count, xdp_shared_bump, tc_count"):
            obj.program("nope")
        with pytest.raises(bpf.BpfError, match="no map 'nope'.*cfg"):
            obj.map("nope")


def test_verifier_rejection_carries_the_log(need_bpf):
    with bpf.BpfObject.open("test_reject") as obj:
        with pytest.raises(bpf.BpfError) as info:
            obj.load()
    err = info.value
    assert err.errno == 13  # EACCES: the verifier said no
    assert "-- BEGIN PROG LOAD LOG --" in err.log and "-- END PROG LOAD LOG --" in err.log
    assert "R1 offset is outside of the packet" in err.log
    assert "invalid access to packet" in str(err)  # the tail of the log is in the message


def test_missing_object_says_make_bpf():
    with pytest.raises(bpf.BpfError, match="make bpf"):
        bpf.object_path("no_such_program")
    with pytest.raises(bpf.BpfError, match="does not exist"):
        bpf.BpfObject.open("/nonexistent/x.bpf.o")


def test_handles_refuse_after_close(need_bpf):
    with bpf.BpfObject.open("test_xdp_pass") as obj:
        obj.load()
        prog = obj.program("xdp_pass")
    with pytest.raises(bpf.BpfError, match="closed"):
        _ = prog.fd
    with pytest.raises(bpf.BpfError, match="closed"):
        obj.program("xdp_pass")


def test_map_fd_before_load_is_an_error(need_bpf):
    with bpf.BpfObject.open("test_maps") as obj:
        stats = obj.map("stats")
        assert (stats.type_name, stats.key_size, stats.max_entries) == ("percpu_array", 4, 256)
        with pytest.raises(bpf.BpfError, match="load its object first"):
            _ = stats.fd
