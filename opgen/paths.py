"""Where opgen keeps its caches on the user's machine (README "Set up": both are safe to delete).

`cache_root()`: $OPGEN_CACHE_DIR, else ~/.cache/opgen/generate: the generate cache's entries
(opgen.codegen.cache), the templates' compiled code (`jinja-*/`, opgen.codegen.env) and the dependency pass's
placements (`syncs/`, opgen.kernel.kir_sync.memo_dir; $OPGEN_SYNC_DIR puts those elsewhere: the test suite shares
one directory between its workers and the opgen processes it runs, whatever generate cache a test isolates).
`build_root()`: $OPGEN_BUILD_DIR, else ~/.cache/opgen/build: `opgen check`'s builds (opgen.check.build).
`format_store_root()`: $OPGEN_FORMAT_DIR, else None: clang-format's results keyed by their input
(opgen.codegen.fmt, "The format store"); off unless set. The test suite sets it to `formats/` of its generate cache
root (tests/conftest.py), so a file one worker, test or `opgen` subprocess formatted is not formatted again by
another, whatever generate cache a test isolates.
"""

from __future__ import annotations

import os
from pathlib import Path


def _user_dir(var: str, default: str) -> Path:
    env = os.environ.get(var)
    return Path(env) if env else Path.home() / ".cache" / "opgen" / default


def cache_root() -> Path:
    """$OPGEN_CACHE_DIR, else ~/.cache/opgen/generate."""
    return _user_dir("OPGEN_CACHE_DIR", "generate")


def build_root() -> Path:
    """$OPGEN_BUILD_DIR, else ~/.cache/opgen/build."""
    return _user_dir("OPGEN_BUILD_DIR", "build")


def format_store_root() -> Path | None:
    """$OPGEN_FORMAT_DIR (the directory of the format store, opgen.codegen.fmt), else None (no store)."""
    env = os.environ.get("OPGEN_FORMAT_DIR")
    return Path(env) if env else None
