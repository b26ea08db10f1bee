"""Packages flow one way (docs/design.md "Packages flow one way"): the import graph of opgen's modules, read from
the AST (module level and function level alike), has no cycle and no import of a later stage by an earlier one;
an import inside a function that leaves its package says why (`# lazy: start-up time`).

Run as a script (`python tests/test_layering.py [ROOT]`) it prints the module map: modules, internal imports,
those inside functions, cycles and imports against the stage order.
"""

from __future__ import annotations

import ast
import functools
import sys
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent

# The stage of each package, in pipeline order (docs/design.md "Packages flow one way"); a module may import
# modules of its own stage or of an earlier one. Top-level leaf modules shared by every stage are stage 0.
STAGES = {
    "opgen": 0, "opgen.ir": 0, "opgen.errors": 0, "opgen.resources": 0, "opgen.names": 0, "opgen.escape": 0,
    "opgen.platforms": 0, "opgen.progress": 0, "opgen.paths": 0,
    "opgen.dsl": 1, "opgen.registry": 1,
    "opgen.interp": 2,
    "opgen.passes": 3,
    "opgen.kernel": 4,
    "opgen.tiling": 5,
    "opgen.codegen": 6,
    "opgen.check": 7,
    "opgen.bench": 8, "opgen.cli": 8,
}
LAZY = "# lazy: start-up time"


@dataclass(frozen=True)
class Import:
    """One import statement's edge: importer and imported module names, line, inside a function or not, and
    whether the line carries the start-up comment."""

    src: str
    dst: str
    line: int
    in_function: bool
    lazy: bool


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the opgen package under `root`."""
    out = {}
    for p in sorted((root / "opgen").rglob("*.py")):
        parts = p.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _targets(cur: str, is_pkg: bool, node, mods: dict) -> list[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = cur.split(".") if is_pkg else cur.split(".")[:-1]
            parts = parts[:len(parts) - node.level + 1]
            base = ".".join(parts + ([base] if base else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
    out = []
    for n in names:
        while n and n not in mods:   # `import opgen.x.y` of a name inside a module: the module
            n = n.rpartition(".")[0]
        if n.startswith("opgen") and n not in out:
            out.append(n)
    return out


@functools.lru_cache(maxsize=4)
def imports(root: Path = ROOT) -> tuple[dict, tuple[Import, ...]]:
    """The modules and every internal import edge of opgen under `root` (self-imports dropped). Parsed once per
    root and process (the tests read the same tree); the caller must not change the returned dict."""
    mods = modules(root)
    edges = []
    for name, p in mods.items():
        text = p.read_text()
        lines = text.splitlines()
        tree = ast.parse(text)
        in_fn = set()
        for f in ast.walk(tree):
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                in_fn.update(id(n) for n in ast.walk(f) if n is not f)
        for n in ast.walk(tree):
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                span = "\n".join(lines[n.lineno - 2 if n.lineno > 1 else 0:n.end_lineno])
                for t in _targets(name, p.name == "__init__.py", n, mods):
                    if t != name:
                        edges.append(Import(name, t, n.lineno, id(n) in in_fn, LAZY in span))
    return mods, tuple(edges)


def stage(mod: str) -> int:
    """The stage of a module: that of its longest listed prefix. Raises KeyError for an unlisted package."""
    parts = mod.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in STAGES:
            return STAGES[".".join(parts[:i])]
    raise KeyError(mod)


def package(mod: str) -> str:
    """The top-level package of a module (`opgen.kernel.rows` -> `opgen.kernel`)."""
    return ".".join(mod.split(".")[:2])


def report(root: Path = ROOT) -> dict:
    """The module map: counts, cycles (sets of modules), upward edges, unmarked cross-package lazy imports."""
    mods, edges = imports(root)
    g = nx.DiGraph()
    g.add_nodes_from(mods)
    g.add_edges_from((e.src, e.dst) for e in edges)
    cycles = [frozenset(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    upward = sorted({(e.src, e.dst) for e in edges if stage(e.dst) > stage(e.src)})
    unmarked = sorted({(e.src, e.dst, e.line) for e in edges
                       if e.in_function and package(e.src) != package(e.dst) and not e.lazy})
    return {"modules": len(mods), "imports": len(edges), "in_function": sum(e.in_function for e in edges),
            "cycles": cycles, "upward": upward, "unmarked": unmarked}


def test_every_module_has_a_stage():
    mods, _ = imports()
    for m in mods:
        stage(m)


def test_no_import_cycle():
    cycles = report()["cycles"]
    assert not cycles, f"import cycle(s): {[sorted(c) for c in cycles]}"


def test_no_import_of_a_later_stage():
    upward = report()["upward"]
    assert not upward, f"imports of a later stage: {sorted(upward)}"


def test_lazy_imports_are_downward_and_say_so():
    """A function-level import that leaves its package is marked `# lazy: start-up time` (on its line or the
    line above) and, like every import, goes to the same or an earlier stage (checked above)."""
    bad = report()["unmarked"]
    assert not bad, f"function-level imports without `{LAZY}`: {bad}"


def test_the_checker_sees_cycles_and_upward_imports(tmp_path):
    """The analysis itself: a two-module cycle through a function-level import and an upward import are found."""
    (tmp_path / "opgen" / "dsl").mkdir(parents=True)
    (tmp_path / "opgen" / "codegen").mkdir()
    (tmp_path / "opgen" / "__init__.py").write_text("")
    (tmp_path / "opgen" / "dsl" / "__init__.py").write_text("")
    (tmp_path / "opgen" / "codegen" / "__init__.py").write_text("")
    (tmp_path / "opgen" / "dsl" / "a.py").write_text("from opgen.dsl import b\n")
    (tmp_path / "opgen" / "dsl" / "b.py").write_text("def f():\n    from opgen.dsl.a import x\n"
                                                   "    from opgen.codegen import c\n")
    (tmp_path / "opgen" / "codegen" / "c.py").write_text("def g():\n    import opgen.dsl  # lazy: start-up time\n")
    r = report(tmp_path)
    assert r["cycles"] == [frozenset({"opgen.dsl.a", "opgen.dsl.b"})]
    assert r["upward"] == [("opgen.dsl.b", "opgen.codegen.c")]
    assert r["unmarked"] == [("opgen.dsl.b", "opgen.codegen.c", 3)]


if __name__ == "__main__":
    r = report(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)
    print(f"modules {r['modules']}  internal imports {r['imports']}  inside functions {r['in_function']}")
    for c in sorted(r["cycles"], key=len, reverse=True):
        print(f"cycle of {len(c)}: {sorted(c)}")
    print(f"imports of a later stage: {len(r['upward'])}")
    for s, d in r["upward"]:
        print(f"  {s} -> {d}")
    print(f"function-level imports leaving their package without `{LAZY}`: {len(r['unmarked'])}")
    for s, d, line in r["unmarked"]:
        print(f"  {s}:{line} -> {d}")
