"""The Jinja2 environment over the project's top-level `templates/` directory (docs/design.md "Emission").

Templates hold layout only: every value they print (names, dtype lists, conditions, messages, shapes)
is computed in Python and passed in. StrictUndefined makes a missing value an error instead of an
empty string; no autoescaping (the output is C++ and Python, not HTML); trailing newlines are kept so
the files end exactly as the templates do.

The environment is made once per process, so each template is parsed and compiled once per process; the compiled
code also persists across processes in a Jinja bytecode cache (`bytecode_dir()`, under the generation cache's
directory), so a process whose packages are not in the generation cache still skips Jinja's parser and compiler
(docs/design.md "Output is deterministic and formatted").
"""

from __future__ import annotations

import functools
import hashlib
import pickle
from pathlib import Path

import jinja2

from opgen.escape import FILTERS
from opgen.names import c_format, cpp_name
from opgen.paths import cache_root
from opgen.ir.dtypes import DType

TEMPLATES_DIR = Path(__file__).resolve().parent.parent.parent / "templates"
_OPTIONS = dict(keep_trailing_newline=True, autoescape=False, trim_blocks=True, lstrip_blocks=True)


def bytecode_dir() -> Path:
    """Directory of the Jinja bytecode cache: `<opgen.codegen.cache.cache_dir()>/jinja-<12 hex digits>`, the digest
    of jinja2's version and the environment's options (which shape the compiled code but are not in Jinja's own key:
    the template's name, path and source checksum; its file header names the Python version)."""
    key = f"{jinja2.__version__}\n{sorted(_OPTIONS.items())}"
    return cache_root() / f"jinja-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


class _BytecodeCache(jinja2.FileSystemBytecodeCache):
    """jinja2's file-system bytecode cache that never fails a render: a directory that cannot be made or written
    (read-only home, full disk) only means no cache; an unreadable or foreign entry is recompiled (Jinja checks
    the header and the source checksum)."""

    def load_bytecode(self, bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except (OSError, EOFError, ValueError, TypeError, pickle.UnpicklingError):
            bucket.reset()

    def dump_bytecode(self, bucket) -> None:
        try:
            Path(self.directory).mkdir(parents=True, exist_ok=True)
            super().dump_bytecode(bucket)
        except OSError:
            pass


@functools.lru_cache(maxsize=None)
def template_env() -> jinja2.Environment:
    """The shared environment (StrictUndefined, keep_trailing_newline, no autoescape, trim/lstrip blocks; the
    bytecode cache of bytecode_dir()).

    Filters (opgen.escape): `cstr` (C string literal), `cfmt` (printf format literal of verbatim text),
    `ccomment` (one line of a C++ comment), `py` (Python literal), `pystr` (Python string literal), `pycomment`
    (one line of a Python comment), `md` (one line of Markdown), `mdcomment` (inside an HTML comment); `cpp` (the
    bare C++ identifier of a spec name, opgen.names.cpp_name).

    Global `dtypes`: every opgen.ir.dtypes.DType as {cann: ge::DataType enumerator name, bytes: element bytes,
    name: command-line name}, so the emitted dtype tables (DTypeBytes, DtypeName) cover every type opgen knows."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        bytecode_cache=_BytecodeCache(str(bytecode_dir())),
        **_OPTIONS,
    )
    env.filters.update(FILTERS)
    env.filters["cfmt"] = c_format
    env.filters["cpp"] = cpp_name
    env.globals["dtypes"] = [{"cann": d.cann, "bytes": d.itemsize, "name": d.long_name} for d in DType]
    return env


def render(template: str, **ctx) -> str:
    """Render `templates/<template>` with `ctx`. Raises jinja2 errors for unknown templates/undefined values."""
    return template_env().get_template(template).render(**ctx)
