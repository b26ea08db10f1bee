"""The generation cache is verified, not trusted ("The generation cache is trusted"): an entry whose
file key is `../../x`, absolute or holds a newline, whose op is `../../../Op`, whose file is edited, truncated or
dropped, or that names another key is a miss. `opgen generate` then regenerates (writing only inside
`--out/<op_snake>/`) and `opgen diff` compares with what a fresh generation gives. The writer refuses the same
paths whatever produced them, and two ops mapping to one package directory are refused before anything is
written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from opgen.codegen import cache
from opgen.codegen.writer import safe_relpath, write_package
from opgen.errors import OpgenError

pytestmark = pytest.mark.slow   # builds C++ or runs many processes (the fast tier: -m "not slow")

ROOT = Path(__file__).resolve().parent.parent
GELU = ROOT / "examples" / "specs" / "gelu.py"


def cli(*args, env):
    """`opgen ARGS` with the environment `env`, run in this process (tests/inproc.py: the generate or diff call is
    the point, its files and exit status; a child process added ~0.9 s of interpreter start-up and imports each)."""
    from inproc import cli as run

    return run(*args, env=env, cwd=ROOT)


@pytest.fixture(scope="module")
def primed(tmp_path_factory):
    """A cache directory holding Gelu's entry (from a real generate) and the package it produced."""
    d = tmp_path_factory.mktemp("cache")
    env = {**os.environ, "OPGEN_CACHE_DIR": str(d / "cache"), "PYTHONPATH": str(ROOT)}
    r = cli("generate", GELU, "--out", d / "ref", env=env)
    assert r.returncode == 0, r.stderr
    entries = list((d / "cache").glob("*.json"))
    assert len(entries) == 1
    ref = {p.relative_to(d / "ref" / "gelu").as_posix(): p.read_text()
           for p in (d / "ref" / "gelu").rglob("*") if p.is_file()}
    return env, entries[0], json.loads(entries[0].read_text()), ref


def _poison(entry_path, entry, edit):
    e = json.loads(json.dumps(entry))
    edit(e)
    entry_path.write_text(json.dumps(e))


POISONS = {
    "escaping file key": lambda e: e["files"].__setitem__("../../x", "pwned\n"),
    "absolute file key": lambda e: e["files"].__setitem__("/tmp/opgen-pwned-abs", "pwned\n"),
    "newline in file key": lambda e: e["files"].__setitem__("a\nb.cpp", "pwned\n"),
    "escaping op": lambda e: e.__setitem__("op", "../../../Op"),
    "edited file": lambda e: e["files"].__setitem__("README.md", e["files"]["README.md"] + "edited\n"),
    "truncated file": lambda e: e["files"].__setitem__("README.md", e["files"]["README.md"][:10]),
    "dropped file": lambda e: (e["files"].pop("README.md"), e["hashes"].pop("README.md")),
    "dropped file and hash recomputed": lambda e: (e["files"].pop("README.md"), e["hashes"].pop("README.md"),
                                                   e.__setitem__("manifest", "0" * 64)),
    "foreign key": lambda e: e.__setitem__("key", "0" * 32),
    "not json": None,
}


@pytest.mark.parametrize("case", sorted(POISONS))
def test_poisoned_entry_is_a_miss(primed, tmp_path, case):
    env, entry_path, entry, ref = primed
    if POISONS[case] is None:
        entry_path.write_text('{"op": "Gelu", "files": {')
    else:
        _poison(entry_path, entry, POISONS[case])
    try:
        out = tmp_path / "deep" / "er" / "out"
        r = cli("generate", GELU, "--out", out, env=env)
        assert r.returncode == 0, r.stderr
        got = {p.relative_to(out / "gelu").as_posix(): p.read_text() for p in (out / "gelu").rglob("*") if p.is_file()}
        assert got == ref                                   # regenerated, exactly the fresh package
        assert sorted(os.listdir(out)) == ["gelu"]          # nothing beside the package
        assert not (tmp_path / "deep" / "x").exists() and not Path("/tmp/opgen-pwned-abs").exists()
        assert not (tmp_path / "Op").exists()
    finally:
        entry_path.write_text(json.dumps(entry))


def test_poisoned_entry_does_not_hide_a_stale_tree(primed, tmp_path):
    """`opgen diff` after an entry was edited together with the tree it would be compared with."""
    env, entry_path, entry, ref = primed
    out = tmp_path / "out"
    assert cli("generate", GELU, "--out", out, env=env).returncode == 0
    (out / "gelu" / "README.md").write_text("stale\n")
    _poison(entry_path, entry, lambda e: e["files"].__setitem__("README.md", "stale\n"))
    try:
        r = cli("diff", GELU, "--out", out, env=env)
        assert r.returncode == 1 and "-stale" in r.stdout
    finally:
        entry_path.write_text(json.dumps(entry))


def test_verified_entry_is_a_hit(primed, monkeypatch):
    env, entry_path, entry, ref = primed
    monkeypatch.setenv("OPGEN_CACHE_DIR", env["OPGEN_CACHE_DIR"])
    hit = cache.load(GELU)
    assert hit is not None and hit[0] == "Gelu" and hit[1] == ref


@pytest.mark.parametrize("rel", ["../x", "a/../../x", "/etc/x", "a//b", "./a", "a/./b", "a\\b", "a\nb", "a\0b", "",
                                 "a/", "x" * 256])
def test_writer_confines_paths(tmp_path, rel):
    with pytest.raises(OpgenError):
        safe_relpath(rel)
    with pytest.raises(OpgenError):
        write_package(tmp_path / "pkg", {"ok.txt": "ok\n", rel: "pwned\n"})
    assert sorted(os.listdir(tmp_path)) == []


def test_two_ops_one_directory_refused(tmp_path):
    base = GELU.read_text()
    a = tmp_path / "a.py"
    b = tmp_path / "b.py"
    a.write_text(base.replace('OpSpec("Gelu", aclnn="aclnnGelu"', 'OpSpec("FooBar", aclnn="aclnnFooBar"'))
    b.write_text(base.replace('OpSpec("Gelu", aclnn="aclnnGelu"', 'OpSpec("Foo_Bar", aclnn="aclnnFooBarX"'))
    env = {**os.environ, "OPGEN_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    r = cli("generate", a, b, "--out", tmp_path / "out", env=env)
    assert r.returncode == 2 and "both map to the package directory foo_bar/" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "out").exists()
