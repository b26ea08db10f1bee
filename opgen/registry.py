"""Finding and loading specs: by OpDef name from the specs directory, or from a spec file path.

The specs directory is $OPGEN_SPECS, else `specs/` beside the `opgen` package (the project root).
Every problem in a spec file (Python syntax, an exception at module level, a malformed declaration, no
`spec = OpSpec(...)`, the whole-spec checks of `OpSpec.finish`) is a SpecError pointing at the spec line.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import os
import re
import sys
from pathlib import Path

from opgen.dsl.diagnostics import from_exception, parsed_tree, spec_error, syntax_error
from opgen.dsl.spec import OpSpec
from opgen.errors import OpgenError, SpecError

_CACHE: dict[str, object] = {}
_HELPERS: dict[str, bytes] = {}   # helper file -> the bytes imported (sys.modules holds that version)


def specs_dir() -> Path:
    """Directory holding the bundled specs."""
    env = os.environ.get("OPGEN_SPECS")
    return Path(env) if env else Path(__file__).resolve().parent.parent / "specs"


def is_bundled(path) -> bool:
    """Whether the spec file `path` is a bundled spec: a file of specs_dir() (not a shared `_*.py` helper), which
    `opgen generate NAME` finds and writes into generated/ without --out (opgen.cli._bundled_only, the banner's
    regenerate hint, the stale-package hint)."""
    p = Path(path).resolve()
    return p.parent == specs_dir().resolve() and not p.name.startswith("_")


_HOMES: dict = {}
"""{resolved spec file: directory}: the spec files whose relative paths resolve against another directory than
their own (relocated)."""


def spec_home(file) -> str:
    """The directory the relative paths a spec file names (derive_grad's forward spec) resolve against: the file's
    own directory, or the one `relocated` gave a copy of it."""
    key = str(Path(file).resolve())
    return _HOMES.get(key, os.path.dirname(key))


class relocated:
    """`with relocated(copy, home):` while it lasts, spec file `copy` (a copy of a spec made to give it another
    file name: `opgen diff OLD_SPEC NEW_SPEC`) resolves the relative paths it names against directory `home`, the
    original's (spec_home), as the original does; loads of it inside see that."""

    def __init__(self, copy, home):
        self.key, self.home = str(Path(copy).resolve()), str(Path(home).resolve())

    def __enter__(self):
        _HOMES[self.key] = self.home
        return self

    def __exit__(self, *exc):
        _HOMES.pop(self.key, None)
        _CACHE.pop(self.key, None)   # a later load of the path resolves against its own directory again
        return False


def _snapshot(path: Path) -> tuple:
    """((file name, bytes), ...) of a spec file and the shared helpers beside it (`_*.py`): what loading it
    executes, in the order source_digest hashes them."""
    path = Path(path).resolve()
    return tuple((f.name, f.read_bytes()) for f in [path, *sorted(path.parent.glob("_*.py"))])


def _digest_of(snapshot: tuple) -> str:
    import hashlib

    h = hashlib.sha256()
    for name, data in snapshot:
        h.update(name.encode())
        h.update(data)
    return h.hexdigest()


def source_digest(path: Path) -> str:
    """sha256 of a spec file and the shared helpers beside it (`_*.py`): what loading it executes."""
    return _digest_of(_snapshot(path))


class _Digest:
    """The source_digest of a loaded spec's files, hashed when first asked for (OpSpec.source_digest): the
    generation cache needs it, interpreting a spec does not (and hashlib's import is a tenth of a start-up)."""

    def __init__(self, snapshot: tuple):
        self.snapshot, self._hex = snapshot, None

    def __call__(self) -> str:
        if self._hex is None:
            self._hex = _digest_of(self.snapshot)
        return self._hex


def helpers_current(path: Path) -> bool:
    """Whether the helper modules (`_*.py` beside `path`) the last load of that spec executed still have the
    bytes of the files (helpers are loaded by path under names unique to their directory and bytes,
    `_helper_builtins`, so a same-named helper of another directory can never stand in for them). False
    when a helper file changed since: the spec loaded then may not match its files."""
    for helper in Path(path).resolve().parent.glob("_*.py"):
        seen = _HELPERS.get(str(helper))
        if seen is not None and seen != helper.read_bytes():
            return False
    return True


def _helper_builtins(directory: Path) -> dict:
    """The builtins of a spec module (and of its helpers) of `directory`: the real ones, with an `__import__`
    that resolves a top-level `_x` naming a helper file `_x.py` of `directory` to that file, loaded by path as
    module `opgen_helper_<digest>__x` (digest: sha256 of its path and bytes; reused while the bytes stay), and
    leaves every other import to Python. Module-level and lazy (in-function) imports alike go through it, so a
    same-named module of another directory can never stand in for the helper, nor the helper for it."""
    import builtins

    real = builtins.__import__
    ns = dict(vars(builtins))

    def load(f: Path):
        import hashlib

        data = f.read_bytes()
        digest = hashlib.sha256(os.fsencode(f) + bytes(1) + data).hexdigest()[:16]
        unique = f"opgen_helper_{digest}_{f.stem}"
        _HELPERS[str(f)] = data
        mod = sys.modules.get(unique)
        if mod is None:
            spec_ = importlib.util.spec_from_file_location(unique, f, loader=SourceOnlyLoader(unique, str(f)))
            mod = importlib.util.module_from_spec(spec_)
            mod.__dict__["__builtins__"] = ns
            sys.modules[unique] = mod
            try:
                spec_.loader.exec_module(mod)
            except BaseException:
                del sys.modules[unique]
                raise
        return mod

    def helper_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and name.startswith("_") and "." not in name:
            f = directory / f"{name}.py"
            if f.is_file():
                return load(f)
        return real(name, globals, locals, fromlist, level)

    ns["__import__"] = helper_import
    return ns


class SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """The loader of spec files, their helpers and the benchmark workloads: compiles the file's current source
    every time, never reading or writing cached bytecode. CPython takes a .pyc as current when the source's modification time, in whole
    seconds, and its size are unchanged: a spec or helper rewritten within the same second at the same length
    (`FACTOR = 2.0` -> `FACTOR = 7.0`, a bound 5456 -> 5457) would run its previous bytecode."""

    def get_code(self, fullname):
        return self.source_to_code(self.get_data(self.path), self.path)


def _exec_spec_module(spec_, mod, directory: Path) -> None:
    """Execute a spec module with its directory's helpers importable by their plain names (_helper_builtins)."""
    mod.__dict__["__builtins__"] = _helper_builtins(directory)
    spec_.loader.exec_module(mod)


def _load_file(path: Path):
    key = str(path.resolve())
    snapshot = _snapshot(Path(key))
    hit = _CACHE.get(key)
    if hit is not None and hit[0] == snapshot + _derived_snapshot(hit[1]):
        return hit[1]

    modname = "opgen_spec_" + path.stem
    # absolute: diagnostics re-read the file
    spec_ = importlib.util.spec_from_file_location(modname, key, loader=SourceOnlyLoader(modname, key))
    if spec_ is None or spec_.loader is None:
        raise OpgenError(f"{path}: not a loadable Python file")
    mod = importlib.util.module_from_spec(spec_)
    try:
        _exec_spec_module(spec_, mod, Path(key).parent)  # spec files may share helpers (specs/_*.py)
    except SyntaxError as e:
        raise syntax_error(e) from None
    except SpecError as e:
        if e.located:
            raise
        raise from_exception(e, os.path.dirname(key)) from None
    except OpgenError:
        raise
    except Exception as e:  # NameError, TypeError... at module level: blame the spec line
        raise from_exception(e, os.path.dirname(key)) from e
    s = getattr(mod, "spec", None)
    if not isinstance(s, OpSpec):
        others = [(k, v) for k, v in vars(mod).items() if isinstance(v, OpSpec)]
        example = 'spec = OpSpec("MyOp", aclnn="aclnnMyOp", socs=(A2,))'
        if others:
            raise spec_error(others[0][1].loc, f"the OpSpec is bound to {others[0][0]!r}, not to `spec`",
                             f"name it spec: {example}", token="OpSpec")
        if s is not None:
            line = _assignment_line(key, "spec")
            raise spec_error(f"{key}:{line}", f"`spec` is a {type(s).__name__}, not an OpSpec",
                             f"bind the operator to spec: {example}", token="spec" if line > 1 else None)
        raise spec_error(f"{key}:1", "the file defines no `spec = OpSpec(...)`",
                         f"declare the operator at module level: {example}")
    s.finish()
    _CACHE[key] = (snapshot + _derived_snapshot(s), s)
    s._source_digest = _Digest(_CACHE[key][0])
    return s


def _derived_snapshot(s) -> tuple:
    """The files of the forward spec a derived spec (opgen.dsl.grad.derive_grad, `derived_from`) was derived from,
    recursively, as `_snapshot` gives them: a change there changes the derived spec, so its digest covers them."""
    fwd = getattr(s, "derived_from", None)
    if fwd is None or not os.path.isfile(getattr(fwd, "file", "")):
        return ()
    return _snapshot(Path(fwd.file)) + _derived_snapshot(fwd)


def _assignment_line(path: str, name: str) -> int:
    """Line of the last module-level `name = ...` in a file (1 when there is none)."""
    line = 1
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for k, text in enumerate(f, 1):
                if re.match(rf"{re.escape(name)}\s*(:[^=]*)?=[^=]", text):
                    line = k
    except OSError:
        pass
    return line


def spec_files() -> list[Path]:
    """Paths of the bundled spec files (not the shared `_*.py` helpers), sorted by name. Raises OpgenError when
    the specs directory is missing."""
    d = specs_dir()
    if not d.is_dir():
        raise OpgenError(f"no specs directory at {d}: install opgen editable from a checkout (pip install -e .) "
                         f"or set OPGEN_SPECS to the directory holding the spec files")
    return [p for p in sorted(d.glob("*.py")) if not p.name.startswith("_")]


def _opspec_name(node) -> str | None:
    """The literal OpDef name of an `OpSpec("Name", ...)` call node, else None."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "OpSpec" and \
            node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        return node.args[0].value
    return None


def declared_names(path: Path, top_level_only: bool = False) -> frozenset:
    """The OpDef names a spec file declares literally (`OpSpec("RmsNorm", ...)`), read from its syntax tree
    without executing it; empty when the file does not parse or builds the name at run time. top_level_only:
    only calls that are the value of a module-level statement (`spec = OpSpec(...)`, the usual form: found
    without walking the whole tree)."""

    tree = parsed_tree(str(Path(path).resolve()))   # parsed once: the loader's diagnostics read the same tree
    if tree is None:
        return frozenset()
    if top_level_only:
        nodes = (getattr(st, "value", None) for st in tree.body)
    else:
        nodes = ast.walk(tree)
    return frozenset(n for n in map(_opspec_name, nodes) if n is not None)


def all_specs() -> list:
    """Every bundled spec, sorted by file name. Raises OpgenError when the specs directory is missing."""
    return [_load_file(p) for p in spec_files()]


def load_spec(op: str):
    """The spec for an OpDef name (`AdaLayerNormGrad`) or a path to a spec file.

    Raises OpgenError for an unknown name (listing the known ones)."""
    p = Path(op)
    if op.endswith(".py") or p.is_file():
        if not p.is_file():
            raise OpgenError(f"spec file {op} does not exist")
        return _load_file(p)
    files = spec_files()
    # only the file that declares the op is executed (`opgen interpret X` loads X alone): module-level
    # declarations first (quick to find), then declarations anywhere in a file
    for top_level_only in (True, False):
        for f in files:
            if op in declared_names(f, top_level_only):
                s = _load_file(f)
                if s.name == op:
                    return s
    specs = [_load_file(f) for f in files]   # a name built at run time: every spec file has to be executed
    for s in specs:
        if s.name == op:
            return s
    raise OpgenError(f"unknown op {op!r}; known: {', '.join(s.name for s in specs)}")
