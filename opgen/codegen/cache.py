"""Cache of generated packages: `opgen generate` / `opgen diff` skip tracing, lowering and formatting a
spec whose inputs have not changed since the last generation.

Key (sha256): the bytes of the spec file and the shared spec helpers beside it (`_*.py`) that were
executed (opgen.registry.source_digest; the registry reloads a spec whose files changed and imports the
helpers of its own directory), every source opgen generates from (opgen/**/*.py, opgen/platforms/*.json,
templates/** including .clang-format), the clang-format binary's version and jinja2's, and the spec's path as
the banners name it (relative to the project root, else its file name) with whether it is bundled. Any change to
one of them is a miss. Entries live in `$OPGEN_CACHE_DIR`
(default `~/.cache/opgen/generate`), one JSON file per key.

An entry is trusted only after it is verified against its key (`load`): it names its key, its op name is a valid
identifier, every file path is confined to the package (opgen.codegen.writer.safe_relpath), and the sha256 of
every file's text and of the whole listing (op, paths, file hashes) recomputed on reading equal the ones stored.
Anything else (an edited, truncated or dropped file, a foreign key, a path such as `../../x`, an op such as
`../../../Op`, unreadable JSON) is a miss: the package is regenerated and the entry rewritten.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

from opgen.dsl.spec import ident_problem
from opgen.errors import OpgenError
from opgen.paths import cache_root
from opgen.registry import source_digest, specs_dir

_PKG = Path(__file__).resolve().parent.parent          # opgen/
_TEMPLATES = _PKG.parent / "templates"


def cache_dir() -> Path:
    """Directory of the cache entries (opgen.paths.cache_root)."""
    return cache_root()


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
    """Cache key of the package generated from `spec_path` (see module docstring), also covering the spec's path
    as the banners name it and whether it is bundled; `spec_digest`: the opgen.registry.source_digest the spec
    was loaded from (default: the files as they are now)."""


    h = hashlib.sha256(_sources_digest().encode())
    h.update((spec_digest or source_digest(Path(spec_path))).encode())
    # where the spec lives shows in the packages (banners name its path, the regenerate hint a non-bundled
    # spec's path): the same bytes elsewhere are another package
    full = Path(spec_path).resolve()
    try:
        where = full.relative_to(_PKG.parent).as_posix()
    except ValueError:
        where = full.name
    h.update(f"\0{where}\0{full.parent == specs_dir().resolve()}".encode())
    return h.hexdigest()[:32]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _manifest(k: str, op: str, hashes: dict[str, str]) -> str:
    """sha256 of an entry's key, op name and sorted (path, file hash) listing."""
    h = hashlib.sha256(f"{k}\0{op}\0".encode())
    for path in sorted(hashes):
        h.update(f"{path}\0{hashes[path]}\n".encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _verified(entry, k: str) -> tuple[str, dict[str, str]] | None:
    """(op, files) of a decoded entry when it passes every check of the module docstring, else None."""
    from opgen.codegen.writer import safe_relpath

    if not isinstance(entry, dict) or entry.get("key") != k:
        return None
    op, files, hashes = entry.get("op"), entry.get("files"), entry.get("hashes")
    if ident_problem(op) or not isinstance(files, dict) or not isinstance(hashes, dict) or set(files) != set(hashes):
        return None
    try:
        for path, text in files.items():
            safe_relpath(path)
            if not isinstance(text, str) or _sha(text) != hashes[path]:
                return None
    except OpgenError:
        return None
    if entry.get("manifest") != _manifest(k, op, hashes):
        return None
    return op, dict(files)


def load(spec_path: Path) -> tuple[str, dict[str, str]] | None:
    """(OpDef name, {path: text}) cached for `spec_path` when a verified entry exists (module docstring), else
    None."""
    try:
        k = key(spec_path)
        entry = json.loads((cache_dir() / f"{k}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeError):
        return None
    return _verified(entry, k)


def store(spec_path: Path, op: str, files: dict[str, str], spec_digest: str) -> None:
    """Remember `files` generated from the spec loaded with source digest `spec_digest` (the key is of the
    bytes that were executed, not of the file as it may be now), with the hashes `load` verifies. Written to a
    unique temporary file and renamed (concurrent runs never see half an entry); errors writing the cache are
    ignored."""
    import tempfile

    try:
        d = cache_dir()
        d.mkdir(parents=True, exist_ok=True)
        k = key(spec_path, spec_digest)
        hashes = {path: _sha(text) for path, text in files.items()}
        entry = {"key": k, "op": op, "files": files, "hashes": hashes, "manifest": _manifest(k, op, hashes)}
        fd, tmp = tempfile.mkstemp(prefix=f".{k}.", suffix=".tmp", dir=d)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(json.dumps(entry, sort_keys=True))
            os.replace(tmp, d / f"{k}.json")
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except (OSError, ValueError):
        pass
