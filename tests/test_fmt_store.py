"""The format store (opgen.codegen.fmt, "The format store"; $OPGEN_FORMAT_DIR): clang-format's results keyed by
its version, the style file, the file's suffix and the input text, shared by the processes of one test run.

- a file formatted once is answered by the store the next time: no clang-format process runs for it (the binary is
  made unreachable for the second call), in `format_many` / `format_start` and in `format_cpp`;
- the expected formatting is written out by hand from templates/.clang-format (function braces on their own line,
  4-space indent), not taken from an earlier run of the code;
- a damaged entry (not JSON, truncated, not an object, its text edited, another key's entry, a wrong-typed text) is
  a miss: the file is formatted again and the entry rewritten whole;
- the key separates suffixes (the language clang-format picks) and inputs; no temporary file is left; an unusable
  directory is no error; without $OPGEN_FORMAT_DIR nothing is stored.
"""

from __future__ import annotations

import json

import pytest

from opgen.codegen import fmt
from opgen.paths import format_store_root

RAW = "int   main( ){return  0 ;}\n"
CLEAN = "int main()\n{\n    return 0;\n}\n"   # the style's function braces on their own line, 4-space indent
RAW_H = "struct  S{int a;int b ;};\n"
CLEAN_H = "struct S {\n    int a;\n    int b;\n};\n"


@pytest.fixture
def store(tmp_path, monkeypatch):
    """An empty format store in tmp_path/formats (the directory is made by the first write)."""
    d = tmp_path / "formats"
    monkeypatch.setenv("OPGEN_FORMAT_DIR", str(d))
    fmt.clang_format_version()          # known before a test makes the binary unreachable
    return d


def _no_binary(monkeypatch):
    """Any clang-format process started from now on fails to start (FileNotFoundError)."""
    monkeypatch.setattr(fmt, "clang_format_path", lambda: "/nonexistent/clang-format")


def _entries(d):
    return sorted(d.glob("*.json"))


def test_second_format_is_answered_by_the_store(store, monkeypatch):
    out = fmt.format_many({"a.cpp": RAW, "b.h": RAW_H, "README.md": "x  y\n"})
    assert out == {"a.cpp": CLEAN, "b.h": CLEAN_H, "README.md": "x  y\n"}
    assert len(_entries(store)) == 2
    _no_binary(monkeypatch)
    pf = fmt.format_start({"b.h": RAW_H, "a.cpp": RAW})
    assert pf.proc is None and pf.tmp is None             # nothing left to format: no process, no directory
    assert pf.result() == {"a.cpp": CLEAN, "b.h": CLEAN_H}
    assert fmt.format_cpp(RAW, "other/name.cpp") == CLEAN   # only the suffix is in the key
    assert not list(store.glob("*.tmp")) and not list(store.glob(".*"))


def test_format_cpp_stores_and_reads(store, monkeypatch):
    assert fmt.format_cpp(RAW, "x.cpp") == CLEAN
    (entry,) = _entries(store)
    e = json.loads(entry.read_text())
    assert e["key"] == entry.stem == fmt.store_key(RAW, "x.cpp") and e["text"] == CLEAN
    _no_binary(monkeypatch)
    assert fmt.format_many({"y.cpp": RAW}) == {"y.cpp": CLEAN}


def test_only_the_misses_are_formatted(store, monkeypatch):
    fmt.format_cpp(RAW, "a.cpp")
    pf = fmt.format_start({"a.cpp": RAW, "b.h": RAW_H})
    try:
        assert pf.cpp == ["b.h"]                          # a.cpp came from the store
    finally:
        out = pf.result()
    assert out == {"a.cpp": CLEAN, "b.h": CLEAN_H}


def test_key_separates_suffix_and_text(store):
    k = fmt.store_key(RAW, "a.cpp")
    assert k != fmt.store_key(RAW, "a.h") and k != fmt.store_key(RAW + "\n", "a.cpp")
    assert k == fmt.store_key(RAW, "dir/b.cpp")


DAMAGE = {
    "not json": lambda e, other: "{not json",
    "truncated": lambda e, other: json.dumps(e)[:40],
    "not an object": lambda e, other: json.dumps([e]),
    "edited text": lambda e, other: json.dumps({**e, "text": "int pwned;\n"}),
    "text not a string": lambda e, other: json.dumps({**e, "text": 7}),
    "another key's entry": lambda e, other: json.dumps(other),
    "no hash": lambda e, other: json.dumps({"key": e["key"], "text": e["text"]}),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damaged_entry_is_a_miss(store, case):
    fmt.format_cpp(RAW_H, "o.h")
    fmt.format_cpp(RAW, "a.cpp")
    path = store / f"{fmt.store_key(RAW, 'a.cpp')}.json"
    other = json.loads((store / f"{fmt.store_key(RAW_H, 'o.h')}.json").read_text())
    path.write_text(DAMAGE[case](json.loads(path.read_text()), other))
    assert fmt.store_load(RAW, "a.cpp") is None
    assert fmt.format_many({"a.cpp": RAW}) == {"a.cpp": CLEAN}      # formatted again ...
    assert fmt.store_load(RAW, "a.cpp") == CLEAN                   # ... and the entry rewritten


def test_unusable_directory_is_no_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory\n")
    monkeypatch.setenv("OPGEN_FORMAT_DIR", str(blocker / "formats"))
    assert fmt.format_many({"a.cpp": RAW}) == {"a.cpp": CLEAN}
    assert fmt.format_cpp(RAW, "a.cpp") == CLEAN


def test_no_store_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("OPGEN_FORMAT_DIR", raising=False)
    assert format_store_root() is None and fmt.store_load(RAW, "a.cpp") is None
    assert fmt.format_cpp(RAW, "a.cpp") == CLEAN
    _no_binary(monkeypatch)
    with pytest.raises(FileNotFoundError):               # nothing remembered: clang-format is needed again
        fmt.format_cpp(RAW, "a.cpp")


def test_the_packaged_binary_runs_without_a_python_wrapper():
    """With the pinned PyPI package installed (the venv's `clang-format` is its Python console script), formatting
    runs the package's own executable: an ELF file, not a script that starts an interpreter per call (~0.03 s of CPU
    each, the suite runs a few hundred), and it formats as the style says."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("clang_format")
    if spec is None:
        pytest.skip("the clang-format PyPI package is not installed")
    exe = Path(fmt.clang_format_path())
    assert exe.read_bytes()[:4] == b"\x7fELF", exe
    assert exe.parent == Path(next(iter(spec.submodule_search_locations))) / "data" / "bin"
    assert fmt.format_many({"a.cpp": RAW}) == {"a.cpp": CLEAN}
