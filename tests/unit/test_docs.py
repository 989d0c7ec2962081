"""The docs name only what exists: every repository file, test file, `make` target, `mrc` command
and `mrc` option that README.md or a page of docs/ names is there, and so is every test file
that a source comment names. Names are read from code spans, code blocks and links."""

import re
from pathlib import Path

import pytest


from support.doc_commands import check_mrc
from support.paths import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP = {p.name for p in ROOT.iterdir() if not p.name.startswith(".")} - {"build", "dist"}
SOURCES = [p for d in ("controller/mrckit", "ebpf", "native", "p4src", "bench", "tests")
           for p in (ROOT / d).rglob("*") if p.suffix in (".py", ".c", ".h", ".p4", ".proto")
           and "obj" not in p.parts and "build" not in p.parts and "_pb2" not in p.name
           and p.name != "test_docs.py"]
# Files that runs make and that .gitignore keeps out of a fresh clone: a doc may name them.
MADE_BY_RUNS = {"mrc-demo.json", "mrc-demo.png", ".venv", ".venv-p4rt", "p4src/build"}


def _code(text: str) -> list[str]:
    """Inline code spans and the lines of fenced code blocks of a markdown page."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)
    outside = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.S | re.M)
    return re.findall(r"`([^`\n]+)`", outside) + [ln for b in blocks for ln in b.splitlines()]


def _links(text: str) -> list[str]:
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t and not t.startswith("#")]


def _is_repo_path(token: str) -> bool:
    head = token.split("/", 1)[0]
    return "/" in token and head in TOP and not re.search(r"[<>{}$]", token)


def _exists(path: str) -> bool:
    path = path.rstrip("/.,:;").split("::")[0]
    if any(path == m or path.startswith(m + "/") for m in MADE_BY_RUNS):
        return True
    if "*" in path or "?" in path:
        return any(ROOT.glob(path))
    return (ROOT / path).exists()


def _paths(doc: Path) -> set[str]:
    text = doc.read_text()
    found = {t for span in _code(text) for t in re.findall(r"[\w.*?-]+(?:/[\w.*?-]+)+/?", span)
             if _is_repo_path(t)}
    for link in _links(text):
        target = (doc.parent / link.split("#")[0]).resolve()
        if target.is_relative_to(ROOT):
            found.add(target.relative_to(ROOT).as_posix())
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_named_file_exists(doc):
    missing = sorted(p for p in _paths(doc) if not _exists(p))
    assert not missing, f"{doc.relative_to(ROOT)} names files that do not exist: {missing}"


TEST_FILES = {p.name for d in ("tests", "examples") for p in (ROOT / d).rglob("test_*.py")}


def _test_file_names(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w/])(test_\w+\.py)\b", text))


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_named_test_file_exists(doc):
    missing = sorted(_test_file_names(doc.read_text()) - TEST_FILES)
    assert not missing, f"{doc.relative_to(ROOT)} names test files that do not exist: {missing}"


def test_every_test_file_a_source_comment_names_exists():
    bad = {}
    for src in SOURCES:
        text = src.read_text(errors="replace")
        named = {p for p in re.findall(r"\btests/[\w/]+\.py\b", text) if not (ROOT / p).exists()}
        named |= _test_file_names(text) - TEST_FILES
        if named:
            bad[src.relative_to(ROOT).as_posix()] = sorted(named)
    assert not bad, f"source comments name test files that do not exist: {bad}"


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([\w.-]+)\s*:(?!=)", text, re.M))


MAKE_TARGETS = _make_targets()


def _make_uses(doc: Path) -> set[str]:
    """Targets of the ``make`` commands a doc shows: a code span or line that starts with
    ``make`` (after variable assignments), not a ``make`` inside another project's build line."""
    out = set()
    for span in _code(doc.read_text()):
        m = re.match(r"\s*(?:\$\s+)?(?:[A-Z_0-9]+=\S+\s+)*make((?:\s+[\w.=/-]+)*)", span)
        if m:
            out |= {t for t in m.group(1).split() if "=" not in t and not t.startswith("-")}
    return out


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_named_make_target_exists(doc):
    missing = sorted(_make_uses(doc) - MAKE_TARGETS)
    assert not missing, f"{doc.relative_to(ROOT)} names make targets the Makefile lacks: {missing}"


def _mrc_invocations(doc: Path) -> list[list[str]]:
    """The words after ``mrc`` of every command line a doc shows, up to a pipe or a comment."""
    out = []
    for span in _code(doc.read_text().replace("\\|", "|")):
        for m in re.finditer(r"(?:^|[\s;&|($])mrc\s+([^|#;&)]*)", span):
            words = m.group(1).replace("[", " ").replace("]", " ").split()
            if words and re.fullmatch(r"[a-z][\w-]*", words[0]):
                out.append(words)
    return out


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_named_mrc_command_and_option_exists(doc):
    wrong = sorted({why for words in _mrc_invocations(doc) if (why := check_mrc(words))})
    assert not wrong, f"{doc.relative_to(ROOT)}: {wrong}"


def test_checker_catches_what_does_not_exist(tmp_path):
    """The checks above can fail: a missing file, test, target, command and option."""
    doc = tmp_path / "x.md"
    doc.write_text("See `controller/mrckit/nope.py`, `test_nope.py`; run `make nope` and\n"
                   "```sh\nmrc demo --nope\nmrc nope\nmrc fabric up --target ebpf\n```\n")
    assert [p for p in _paths(doc) if not _exists(p)] == ["controller/mrckit/nope.py"]
    assert _test_file_names(doc.read_text()) - TEST_FILES == {"test_nope.py"}
    assert _make_uses(doc) - MAKE_TARGETS == {"nope"}
    checks = [check_mrc(w) for w in _mrc_invocations(doc)]
    assert checks[0] and "--nope" in checks[0]
    assert checks[1] and "'nope'" in checks[1]
    assert checks[2] is None
