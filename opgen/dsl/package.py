"""Where an operator package goes in CANN's operator repositories, and what it displaces there.

A spec declares its destination with `spec.package(repository, category)`: the generated directory
`generated/<op_snake>/` is meant to be copied to `<repository>/<category>/<op_snake>/`. The repositories and
the category directories their builds enter are facts of the repositories (docs/reference/ops_package.md §2-3):

- ops-nn: `add_category_subdirectory` walks only the categories of `OP_CATEGORY_LIST` (cmake/variables.cmake
  of hicann/ops-nn); an op directory under any other top-level directory is never built.
- ops-transformer: the build globs `<category>/**/op_host/CMakeLists.txt` of posembedding, moe, ffn, mc2 and
  gmm (cmake/func.cmake `op_add_subdirectory`) and enters `attention/` from the top-level CMakeLists.txt.

`spec.replaces(path, reason)` and `spec.modifies(path, reason)` record that dropping the package in needs more
than a copy: an existing directory it takes the place of, or one that must be edited (e.g. ops-nn's
`norm/ada_layer_norm` registers AdaLayerNormV2's tiling, so a second registration beside it clashes,
docs/reference/ops_package.md §1). They become notes of the generated README.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Category directories whose operators each repository's build picks up (docs/reference/ops_package.md §2-3).
REPOSITORY_CATEGORIES: dict[str, tuple[str, ...]] = {
    "ops-nn": ("activation", "control", "conv", "foreach", "hash", "index", "loss", "matmul", "norm", "optim",
               "pooling", "quant", "rnn", "vfusion"),
    "ops-transformer": ("attention", "ffn", "gmm", "mc2", "moe", "posembedding"),
}
DEFAULT_REPOSITORY = "ops-nn"
# ops-nn's directory of fused vector operators (modulate, scaled_masked_softmax_v2, ...): the natural home of
# a new fused vector operator when its spec does not say where it belongs.
DEFAULT_CATEGORY = "vfusion"

_COMPONENT = re.compile(r"[a-z0-9][a-z0-9_]*")


@dataclass(frozen=True)
class PackageNote:
    """An existing directory of the destination repository the drop-in displaces.

    kind: "replaces" (the package takes its place: remove it first) or "modifies" (it must be edited);
    path: its repository-relative path (`norm/ada_layer_norm`); reason: why, one or more sentences;
    loc: the spec line that declared it; lost: what the displaced directory registers or builds that this package
    does not (a replaced directory's other ops, SoC paths), one phrase each — declared by the spec, since opgen
    cannot read another repository."""

    kind: str
    path: str
    reason: str
    loc: str = ""
    lost: tuple = ()


def category_problem(repository, category) -> str | None:
    """Why (repository, category) cannot hold a package, or None when it can. Facts: REPOSITORY_CATEGORIES."""
    if repository not in REPOSITORY_CATEGORIES:
        return (f"repository {repository!r} is not one opgen lays packages out for (known: "
                f"{', '.join(REPOSITORY_CATEGORIES)})")
    allowed = REPOSITORY_CATEGORIES[repository]
    if category not in allowed:
        return (f"category {category!r} is not a directory {repository}'s build enters (one of: "
                f"{', '.join(allowed)})")
    return None


def path_problem(path) -> str | None:
    """Why `path` is not a repository-relative directory such as `norm/ada_layer_norm`, or None: one to three
    '/'-separated components of lower-case letters, digits and '_' (no leading '/', no '.' or '..')."""
    if not isinstance(path, str):
        return f"{path!r} is not a string"
    parts = path.split("/")
    if not 1 <= len(parts) <= 3 or not all(_COMPONENT.fullmatch(p) for p in parts):
        return (f"{path!r} is not a repository-relative directory (1 to 3 components of a-z, 0-9 and '_' separated "
                f"by '/', e.g. 'norm/ada_layer_norm')")
    return None


# SPDX identifiers a package may name as its licence (https://spdx.org/licenses/); any other licence is given as text.
KNOWN_SPDX = ("Apache-2.0", "MIT", "BSD-2-Clause", "BSD-3-Clause", "MPL-2.0", "GPL-2.0-only", "GPL-2.0-or-later",
              "GPL-3.0-only", "GPL-3.0-or-later", "LGPL-2.1-only", "LGPL-2.1-or-later", "LGPL-3.0-only",
              "LGPL-3.0-or-later", "BSL-1.0", "Unlicense", "0BSD", "ISC")
LICENSE_MAX_LINES = 40
LICENSE_MAX_LINE = 200
_SPDX_LIKE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+-]*")


def license_lines(text) -> tuple[list[str] | None, str | None]:
    """(the header lines of licence `text`, None) or (None, why it is refused). A known SPDX id (KNOWN_SPDX) gives
    one line "SPDX-License-Identifier: <id>"; any other text (it must contain a space, so that a misspelt id is not
    taken for a text) is kept line by line: at most LICENSE_MAX_LINES lines of at most LICENSE_MAX_LINE
    characters, printable characters only (tabs become spaces). Each emitted file escapes the lines for its own
    comment syntax."""
    if not isinstance(text, str) or not text.strip():
        return None, f"{text!r} is not a non-empty string"
    t = text.strip()
    if t in KNOWN_SPDX:
        return [f"SPDX-License-Identifier: {t}"], None
    if _SPDX_LIKE.fullmatch(t):
        return None, f"{t!r} is not an SPDX id opgen knows (one of: {', '.join(KNOWN_SPDX)}); give other licences as text"
    lines = [ln.rstrip().replace("\t", "    ") for ln in t.replace("\r\n", "\n").split("\n")]
    if len(lines) > LICENSE_MAX_LINES:
        return None, f"the text has {len(lines)} lines, more than {LICENSE_MAX_LINES}"
    for k, ln in enumerate(lines, 1):
        if len(ln) > LICENSE_MAX_LINE:
            return None, f"line {k} has {len(ln)} characters, more than {LICENSE_MAX_LINE}"
        bad = next((c for c in ln if not c.isprintable()), None)
        if bad is not None:
            return None, f"line {k} holds the non-printable character {bad!r}"
    return lines, None

