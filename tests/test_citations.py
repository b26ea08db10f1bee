"""The repository stands alone: every citation in the code, templates, specs, tests, benchmarks and the README points
into `docs/` and resolves (docs/README.md: `docs/reference/<file>.md §<n>` with a numbered heading `<n> Title`, a
range `§a-b` with both ends; a bare `§n` after a file citation in the same text refers to that file;
`docs/design.md "<title>"` with a heading of that title; any other `docs/<name>.md` is a file of docs/, except
`docs/aclnn<Api>.md`, the API document inside a generated package). Nothing cites the notes outside the repository
(`reference/*.md`, `DESIGN.md`), and docstrings and comments cite no issue numbers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ["opgen", "templates", "specs", "tests", "bench", "examples", "README.md", ".ci"]
SUFFIXES = {".py", ".j2", ".h", ".cpp", ".md", ".txt", ".json", ".cfg", ".toml", ""}

TOKEN = re.compile(r"(?P<file>(?:\.\./shared/|docs/)?(?:reference/[A-Za-z_]+\.md|DESIGN\.md|design\.md)"
                   r"|(?<![\w/.-])docs/(?!aclnn)[A-Za-z][\w-]*\.md)"
                   r"|(?P<sec>§\s?\d+(?:\.\d+)*(?:\s?[-–]\s?\d+(?:\.\d+)*)?)")
TITLE = re.compile(r'\s*"([^"]{1,80})"')   # a title may wrap onto the next comment line


def _files():
    for entry in SCANNED:
        p = ROOT / entry
        paths = [p] if p.is_file() else sorted(x for x in p.rglob("*") if x.is_file())
        for f in paths:
            if "__pycache__" in f.parts or f.suffix not in SUFFIXES or f.name == Path(__file__).name:
                continue
            yield f


def _headings(path: Path) -> tuple[set, set]:
    numbers, titles = set(), set()
    for line in path.read_text().splitlines():
        m = re.match(r"^#{2,4} (\d+(?:\.\d+)*) ", line)
        if m:
            numbers.add(m.group(1))
        m = re.match(r"^#{2,3} (.+?)\s*$", line)
        if m:
            titles.add(m.group(1))
    return numbers, titles


def _citations():
    """(source file, line, cited file, section or title or None, other notes) for every citation of the scanned
    files. A bare `§n` belongs to the file cited last before it; when that file has no such section, to one of the
    other notes the source file cites (a docstring citing two notes numbers its sections from both)."""
    for f in _files():
        text = f.read_text(errors="replace")
        toks = list(TOKEN.finditer(text))
        notes = sorted({m.group("file") for m in toks if m.group("file") and "reference/" in m.group("file")})
        current = None
        for m in toks:
            line = text.count("\n", 0, m.start()) + 1
            if m.group("file"):
                current = m.group("file")
                t = TITLE.match(text, m.end())
                yield f, line, current, ("title", " ".join(t.group(1).replace("//", " ").split())) if t else None, ()
            elif current is not None:
                yield f, line, current, ("sec", m.group("sec")), tuple(n for n in notes if n != current)


CITES = list(_citations())


def _problems(cites) -> list[str]:
    """One line per citation of `cites` that does not resolve (module docstring)."""
    bad = []
    cache = {}
    for f, line, cited, what, others in cites:
        where = f"{f.relative_to(ROOT)}:{line}"
        if not cited.startswith("docs/"):
            bad.append(f"{where}: cites {cited}, which is not in the repository (cite docs/...)")
            continue
        target = ROOT / cited
        if not target.is_file():
            bad.append(f"{where}: {cited} does not exist")
            continue
        numbers, titles = cache.setdefault(cited, _headings(target))
        if what is None:
            continue
        kind, val = what
        if kind == "sec":
            for end in re.split(r"\s?[-–]\s?", val.lstrip("§").strip()):
                homes = [cited, *others]
                if not any(end in cache.setdefault(h, _headings(ROOT / h))[0] for h in homes
                           if (ROOT / h).is_file()):
                    bad.append(f"{where}: {' / '.join(homes)} has no section {end}")
        elif kind == "title" and cited.endswith("design.md") and val not in titles:
            bad.append(f"{where}: {cited} has no section titled {val!r}")
    return bad


def test_citations_exist_and_point_into_docs():
    bad = _problems(CITES)
    assert not bad, "\n".join(bad)


def test_there_are_citations_to_check():
    assert sum(1 for c in CITES if c[3] and c[3][0] == "sec") > 100
    assert any(c[2] == "docs/design.md" for c in CITES)


def test_the_resolver_catches_a_dangling_citation():
    src = ROOT / "opgen" / "cli.py"
    cites = [(src, 1, "docs/reference/ascendc.md", ("sec", "§1.9"), ()),
             (src, 2, "docs/reference/ascendc.md", ("sec", "§1.2-99.9"), ()),
             (src, 3, "reference/ascendc.md", None, ()),
             (src, 4, "docs/reference/nothere.md", None, ()),
             (src, 5, "docs/design.md", ("title", "Kernel families"), ()),
             (src, 6, "docs/design.md", ("title", "No such section"), ())]
    bad = _problems(cites)
    assert [b.split(":")[1] for b in bad] == ["2", "3", "4", "6"], bad


@pytest.mark.parametrize("root", ["opgen", "templates", "specs", "bench", "examples", "tests"])
def test_no_issue_numbers_in_code(root):
    hits = []
    for f in sorted((ROOT / root).rglob("*")):
        if f.is_file() and "__pycache__" not in f.parts and f.suffix in SUFFIXES:
            for k, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
                if re.search(r"\b[Ii]ssues? ?#?\d+|\breview item \d+", line):
                    hits.append(f"{f.relative_to(ROOT)}:{k}: {line.strip()[:100]}")
    assert not hits, "\n".join(hits)
