"""The Jinja2 environment over the project's top-level `templates/` directory (docs/design.md "Emission").

Templates hold layout only: every value they print (names, dtype lists, conditions, messages, shapes)
is computed in Python and passed in. StrictUndefined makes a missing value an error instead of an
empty string; no autoescaping (the output is C++ and Python, not HTML); trailing newlines are kept so
the files end exactly as the templates do.
"""

from __future__ import annotations

import functools
from pathlib import Path

import jinja2

from opgen.escape import FILTERS
from opgen.names import c_format, cpp_name

TEMPLATES_DIR = Path(__file__).resolve().parent.parent.parent / "templates"


@functools.lru_cache(maxsize=None)
def template_env() -> jinja2.Environment:
    """The shared environment (StrictUndefined, keep_trailing_newline, no autoescape, trim/lstrip blocks).

    Filters (opgen.escape): `cstr` (C string literal), `cfmt` (printf format literal of verbatim text),
    `ccomment` (one line of a C++ comment), `py` (Python literal), `pystr` (Python string literal), `pycomment`
    (one line of a Python comment), `md` (one line of Markdown), `mdcomment` (inside an HTML comment); `cpp` (the
    bare C++ identifier of a spec name, opgen.names.cpp_name)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(FILTERS)
    env.filters["cfmt"] = c_format
    env.filters["cpp"] = cpp_name
    return env


def render(template: str, **ctx) -> str:
    """Render `templates/<template>` with `ctx`. Raises jinja2 errors for unknown templates/undefined values."""
    return template_env().get_template(template).render(**ctx)
