"""The README points only at files in the repository and warns before `mrc fabric down --all`."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_every_docs_path_in_the_readme_exists_and_none_leaves_the_repo():
    paths = set(re.findall(r"`((?:\.\./|docs/)[\w./-]+)`", README))
    assert paths, "the README names no docs"
    assert not [p for p in paths if p.startswith("../")]
    assert [p for p in paths if not (ROOT / p).exists()] == []
    assert "docs/architecture.md" in paths and "docs/wire-format.md" in paths


def test_troubleshooting_warns_that_down_all_removes_every_fabric():
    trouble = README.split("## Troubleshooting", 1)[1].split("\n## ", 1)[0]
    assert "`mrc fabric down --all` removes EVERY mrckit fabric on the machine" in trouble
