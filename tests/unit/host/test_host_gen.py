"""One source of truth for the host dataplane's constants: ``ebpf/host/consts_gen.h`` is exactly
what ``python -m mrckit.host.gen`` renders from mrckit.host.maps, and ``maps.h`` keeps no copy."""

import re
import subprocess
import sys

from mrckit.host import gen, maps

from support.paths import ROOT


def test_generated_header_is_fresh():
    assert not gen.is_stale(ROOT), f"{gen.OUTPUT} is stale: run python -m mrckit.host.gen"


def test_check_mode_names_a_stale_header(tmp_path):
    (tmp_path / "ebpf/include").mkdir(parents=True)
    (tmp_path / "ebpf/host").mkdir()
    (tmp_path / "p4src/include").mkdir(parents=True)
    (tmp_path / gen.OUTPUT).write_text(gen.render_c().replace("STAT_TX_PINNED = 38", "STAT_TX_PINNED = 39"))
    proc = subprocess.run([sys.executable, "-m", "mrckit.host.gen", "--check"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert (proc.returncode, proc.stdout.strip()) == (1, f"stale: {gen.OUTPUT} (run: python -m mrckit.host.gen)")
    assert subprocess.run([sys.executable, "-m", "mrckit.host.gen"], cwd=tmp_path).returncode == 0
    assert not gen.is_stale(tmp_path)


def test_every_stat_and_dataplane_reason_is_rendered_with_its_value():
    text = gen.render_c()
    for s in maps.Stat:
        assert f"\tSTAT_{s.name} = {int(s)}," in text
    assert text.index(f"STAT_{max(maps.Stat).name} =") < text.index("\tSTAT_MAX,")
    dataplane = [r for r in maps.Reason if r < maps.DATAPLANE_REASONS]
    agent = [r for r in maps.Reason if r >= maps.DATAPLANE_REASONS]
    assert all(f"\tREASON_{r.name} = {int(r)}," in text for r in dataplane)
    assert agent and not any(f"REASON_{r.name} " in text for r in agent)


def test_attribute_docstrings_become_c_comments():
    docs = gen.member_docs(maps.Stat)
    assert docs["TX_PINNED"] == "Pinned-EV mode: packets sent on their QP's fixed EV."
    assert "STAT_TX_PINNED = 38, /* Pinned-EV mode: packets sent on their QP's fixed EV */" in gen.render_c()


def test_maps_h_defines_none_of_the_generated_names():
    maps_h = (ROOT / "ebpf/host/maps.h").read_text()
    generated = set(re.findall(r"#define (\w+)|^\t(\w+) =", gen.render_c(), re.M))
    names = {a or b for a, b in generated}
    assert names and not [n for n in names if re.search(rf"#define {n}\b|^\s*{n}\s*[=,]", maps_h, re.M)]
    assert '#include "consts_gen.h"' in maps_h
