"""Finding and loading specs: by OpDef name from the specs directory, or from a spec file path.

The specs directory is $OPGEN_SPECS, else `specs/` beside the `opgen` package (the project root).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from opgen.errors import OpgenError, SpecError

_CACHE: dict[str, object] = {}


def specs_dir() -> Path:
    """Directory holding the bundled specs."""
    env = os.environ.get("OPGEN_SPECS")
    return Path(env) if env else Path(__file__).resolve().parent.parent / "specs"


def _load_file(path: Path):
    key = str(path.resolve())
    if key in _CACHE:
        return _CACHE[key]
    modname = "opgen_spec_" + path.stem
    spec_ = importlib.util.spec_from_file_location(modname, path)
    if spec_ is None or spec_.loader is None:
        raise OpgenError(f"{path}: not a loadable Python file")
    mod = importlib.util.module_from_spec(spec_)
    sys.path.insert(0, str(path.resolve().parent))  # spec files may share helpers (specs/_*.py)
    try:
        spec_.loader.exec_module(mod)
    except SpecError:
        raise
    except SyntaxError as e:
        raise SpecError(f"{path}:{e.lineno}: syntax error: {e.msg}") from None
    finally:
        sys.path.pop(0)
    s = getattr(mod, "spec", None)
    if s is None or not hasattr(s, "bind"):
        raise SpecError(f"{path}: defines no `spec = OpSpec(...)`")
    _CACHE[key] = s
    return s


def all_specs() -> list:
    """Every bundled spec, sorted by file name. Raises OpgenError when the specs directory is missing."""
    d = specs_dir()
    if not d.is_dir():
        raise OpgenError(f"no specs directory at {d}: install opgen editable from a checkout (pip install -e .) "
                         f"or set OPGEN_SPECS to the directory holding the spec files")
    return [_load_file(p) for p in sorted(d.glob("*.py")) if not p.name.startswith("_")]


def load_spec(op: str):
    """The spec for an OpDef name (`AdaLayerNormGrad`) or a path to a spec file.

    Raises OpgenError for an unknown name (listing the known ones)."""
    p = Path(op)
    if op.endswith(".py") or p.is_file():
        if not p.is_file():
            raise OpgenError(f"spec file {op} does not exist")
        return _load_file(p)
    specs = all_specs()
    for s in specs:
        if s.name == op:
            return s
    raise OpgenError(f"unknown op {op!r}; known: {', '.join(s.name for s in specs)}")
