"""Cache of generated packages: `opgen generate` / `opgen diff` skip tracing, lowering and formatting a
spec whose inputs have not changed since the last generation.

Key (sha256): the bytes of the spec file and the shared spec helpers beside it (`_*.py`) that were
executed (opgen.registry.source_digest; the registry reloads a spec whose files changed and imports the
helpers of its own directory), every source opgen generates from (opgen/**/*.py, opgen/platforms/*.json,
templates/** including .clang-format), the clang-format binary's version and jinja2's. Any change to one
of them is a miss. Entries live in `$OPGEN_CACHE_DIR`
(default `~/.cache/opgen/generate`), one JSON file per key; a corrupt entry is ignored.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

_PKG = Path(__file__).resolve().parent.parent          # opgen/
_TEMPLATES = _PKG.parent / "templates"


def cache_dir() -> Path:
    """Directory of the cache entries."""
    env = os.environ.get("OPGEN_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "opgen" / "generate"


@functools.lru_cache(maxsize=None)
def _sources_digest() -> str:
    h = hashlib.sha256()
    files = sorted([*_PKG.rglob("*.py"), *(_PKG / "platforms").glob("*.json"),
                    *(p for p in _TEMPLATES.rglob("*") if p.is_file())])
    for f in files:
        h.update(str(f.relative_to(_PKG.parent)).encode())
        h.update(f.read_bytes())
    from importlib.metadata import PackageNotFoundError, version

    from opgen.codegen.fmt import clang_format_version

    h.update(clang_format_version().encode())   # the binary actually used (pinned wheel or PATH)
    for dist in ("jinja2",):
        try:
            h.update(f"{dist}=={version(dist)}".encode())
        except PackageNotFoundError:
            h.update(f"{dist}==?".encode())
    return h.hexdigest()


def key(spec_path: Path, spec_digest: str | None = None) -> str:
    """Cache key of the package generated from `spec_path` (see module docstring); `spec_digest`: the
    opgen.registry.source_digest the spec was loaded from (default: the files as they are now)."""
    from opgen.registry import source_digest

    h = hashlib.sha256(_sources_digest().encode())
    h.update((spec_digest or source_digest(Path(spec_path))).encode())
    return h.hexdigest()[:32]


def load(spec_path: Path) -> tuple[str, dict[str, str]] | None:
    """(OpDef name, {path: text}) cached for `spec_path`, or None."""
    try:
        entry = json.loads((cache_dir() / f"{key(spec_path)}.json").read_text())
        return entry["op"], dict(entry["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(spec_path: Path, op: str, files: dict[str, str], spec_digest: str) -> None:
    """Remember `files` generated from the spec loaded with source digest `spec_digest` (the key is of the
    bytes that were executed, not of the file as it may be now). Errors writing the cache are ignored."""
    try:
        d = cache_dir()
        d.mkdir(parents=True, exist_ok=True)
        k = key(spec_path, spec_digest)
        tmp = d / f".{k}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps({"op": op, "files": files}, sort_keys=True))
        tmp.replace(d / f"{k}.json")
    except OSError:
        pass
