"""Finding and loading specs: by OpDef name from the specs directory, or from a spec file path.

The specs directory is $OPGEN_SPECS, else `specs/` beside the `opgen` package (the project root).
Every problem in a spec file (Python syntax, an exception at module level, a malformed declaration, no
`spec = OpSpec(...)`, the whole-spec checks of `OpSpec.finish`) is a SpecError pointing at the spec line.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import sys
from pathlib import Path

from opgen.errors import OpgenError, SpecError

_CACHE: dict[str, object] = {}
_HELPERS: dict[str, bytes] = {}   # helper file -> the bytes imported (sys.modules holds that version)


def specs_dir() -> Path:
    """Directory holding the bundled specs."""
    env = os.environ.get("OPGEN_SPECS")
    return Path(env) if env else Path(__file__).resolve().parent.parent / "specs"


def source_digest(path: Path) -> str:
    """sha256 of a spec file and the shared helpers beside it (`_*.py`): what loading it executes."""
    import hashlib

    h = hashlib.sha256()
    path = Path(path).resolve()
    for f in [path, *sorted(path.parent.glob("_*.py"))]:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def helpers_current(path: Path) -> bool:
    """Whether every helper module a spec file beside `path` imports (`_*.py`) is, in this process, the file of
    that directory with its current bytes. False when a same-named helper of another directory, or an older
    version, was imported first (Python caches modules by name): a spec loaded now may not match its files."""
    text = Path(path).read_text(errors="replace")
    for helper in Path(path).resolve().parent.glob("_*.py"):
        mod = sys.modules.get(helper.stem)
        if mod is None or helper.stem not in text:   # not imported by this spec
            continue
        if Path(getattr(mod, "__file__", "") or "").resolve() != helper.resolve() or \
                _HELPERS.get(str(helper.resolve())) != helper.read_bytes():
            return False
    return True


def _load_file(path: Path):
    key = str(path.resolve())
    digest = source_digest(Path(key))
    hit = _CACHE.get(key)
    if hit is not None and hit[0] == digest:
        return hit[1]
    from opgen.dsl.diagnostics import from_exception, spec_error, syntax_error
    from opgen.dsl.spec import OpSpec

    modname = "opgen_spec_" + path.stem
    spec_ = importlib.util.spec_from_file_location(modname, key)  # absolute: diagnostics re-read the file
    if spec_ is None or spec_.loader is None:
        raise OpgenError(f"{path}: not a loadable Python file")
    mod = importlib.util.module_from_spec(spec_)
    sys.path.insert(0, str(path.resolve().parent))  # spec files may share helpers (specs/_*.py)
    try:
        spec_.loader.exec_module(mod)
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
    finally:
        sys.path.pop(0)
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
    for helper in Path(key).parent.glob("_*.py"):   # the helper sources this load executed, when they are its own
        mod = sys.modules.get(helper.stem)
        if mod is not None and Path(getattr(mod, "__file__", "") or "").resolve() == helper.resolve():
            _HELPERS.setdefault(str(helper.resolve()), helper.read_bytes())
    s.finish()
    s.source_digest = digest
    _CACHE[key] = (digest, s)
    return s


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


def declared_names(path: Path) -> frozenset:
    """The OpDef names a spec file declares literally (`OpSpec("RmsNorm", ...)`), read from its syntax tree
    without executing it; empty when the file does not parse or builds the name at run time."""
    try:
        tree = ast.parse(Path(path).read_bytes())
    except (SyntaxError, ValueError, OSError):
        return frozenset()
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) == "OpSpec" and \
                n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str):
            out.add(n.args[0].value)
    return frozenset(out)


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
    for f in files:   # only the file that declares the op is executed (`opgen interpret X` loads X alone)
        if op in declared_names(f):
            s = _load_file(f)
            if s.name == op:
                return s
    specs = [_load_file(f) for f in files]   # a name built at run time: every spec file has to be executed
    for s in specs:
        if s.name == op:
            return s
    raise OpgenError(f"unknown op {op!r}; known: {', '.join(s.name for s in specs)}")
