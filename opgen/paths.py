"""Where opgen keeps its caches on the user's machine (README "Set up": both are safe to delete).

`cache_root()`: $OPGEN_CACHE_DIR, else ~/.cache/opgen/generate: the generate cache's entries
(opgen.codegen.cache), the templates' compiled code (`jinja-*/`, opgen.codegen.env) and the dependency pass's
placements (`syncs/`, opgen.kernel.kir_sync.memo_dir; $OPGEN_SYNC_DIR puts those elsewhere: the test suite shares
one directory between its workers and the opgen processes it runs, whatever generate cache a test isolates).
`build_root()`: $OPGEN_BUILD_DIR, else ~/.cache/opgen/build: `opgen check`'s builds (opgen.check.build).
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
