"""The templates' Jinja bytecode cache (opgen/codegen/env.py): written under the generation cache's directory, read
back by a later process, and never a cause of failure (corrupt entries, an unwritable directory)."""

from __future__ import annotations

import os
import subprocess
import sys

import jinja2

from opgen.codegen import env as env_mod
from opgen.codegen.cache import cache_dir

TEMPLATE = "cmake/subdirs.txt.j2"
CTX = {"banner": "# generated", "path": "op_host/CMakeLists.txt", "op": "SomeOp"}


def _plain(name: str) -> jinja2.Template:
    """The template from a Jinja environment without any cache (the independent reference)."""
    e = jinja2.Environment(loader=jinja2.FileSystemLoader(str(env_mod.TEMPLATES_DIR)), undefined=jinja2.StrictUndefined,
                           **env_mod._OPTIONS)
    e.filters.update(env_mod.template_env().filters)
    return e.get_template(name)


def _fresh_env(monkeypatch, cache):
    monkeypatch.setenv("OPGEN_CACHE_DIR", str(cache))
    env_mod.template_env.cache_clear()
    return env_mod.template_env()


def test_a_render_writes_bytecode_that_a_new_process_loads(tmp_path, monkeypatch):
    e = _fresh_env(monkeypatch, tmp_path / "c")
    try:
        assert e.get_template(TEMPLATE).render(**CTX) == _plain(TEMPLATE).render(**CTX)
        d = env_mod.bytecode_dir()
        assert d.parent == tmp_path / "c" == cache_dir() and d.name.startswith("jinja-")
        entries = list(d.glob("*.cache"))
        assert len(entries) == 1 and entries[0].stat().st_size > 0
        # a new process: the template's code comes from the file (Jinja's compiler is not called)
        code = ("import jinja2.environment as je, sys\n"
                "from opgen.codegen.env import template_env\n"
                "e = template_env()\n"
                "je.Environment.compile = lambda *a, **k: sys.exit('compiled')\n"
                f"e.get_template({TEMPLATE!r})\n")
        r = subprocess.run([sys.executable, "-c", code], env={**os.environ, "OPGEN_CACHE_DIR": str(tmp_path / "c")},
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    finally:
        env_mod.template_env.cache_clear()


def test_corrupt_entries_and_an_unwritable_directory_only_cost_a_compile(tmp_path, monkeypatch):
    try:
        e = _fresh_env(monkeypatch, tmp_path / "c")
        e.get_template(TEMPLATE)
        for f in env_mod.bytecode_dir().glob("*.cache"):   # garbage after a valid header, then a truncated file
            data = f.read_bytes()
            f.write_bytes(data[:len(data) // 2])
        e = _fresh_env(monkeypatch, tmp_path / "c")
        assert e.get_template(TEMPLATE).render(**CTX) == _plain(TEMPLATE).render(**CTX)
        blocker = tmp_path / "file"
        blocker.write_text("not a directory")
        e = _fresh_env(monkeypatch, blocker / "sub")   # the cache directory cannot be made
        assert e.get_template(TEMPLATE).render(**CTX) == _plain(TEMPLATE).render(**CTX)
    finally:
        env_mod.template_env.cache_clear()
