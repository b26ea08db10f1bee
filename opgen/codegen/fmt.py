"""clang-format of emitted C/C++ (docs/design.md: "Output is deterministic and formatted").

The binary is the one pinned in pyproject.toml (`clang-format==19.1.7`, installed next to the Python
interpreter of the venv); it is looked up in that package first (`clang_format/data/bin/`, the executable the
venv's `clang-format` script runs: that script starts a Python interpreter for every call, ~0.03 s of CPU, more
than formatting a small package takes), then beside `sys.executable`, then on PATH. Every file is
formatted with the same style file, `templates/.clang-format` (Google style, 4-space indent, 120 columns:
CANN's conventions), passed explicitly so no `.clang-format` of the surrounding directories applies.

The format store. When $OPGEN_FORMAT_DIR names a directory (opgen.paths.format_store_root; the test suite sets it,
tests/conftest.py), every C/C++ file is looked up there before clang-format runs: one JSON file per key, the
sha256 of the binary's version string, the style file's bytes, the file name's suffix (which selects the
language) and the input text; the entry holds the formatted text. Only the files the store does not answer go to
clang-format, and what it returns is written back, each entry to a unique temporary file renamed into place
(concurrent processes never read half an entry). An entry is used only when it is a JSON object naming its key
whose text's sha256 equals the one it stores; anything else (unreadable, truncated, edited, another key's) is a
miss, formatted again and rewritten. Like the generate cache (opgen.codegen.cache), the check guards against
damage, not against someone who rewrites an entry and its hash on purpose. An unwritable directory is no error.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from opgen.codegen.env import TEMPLATES_DIR
from opgen.errors import OpgenError
from opgen.paths import format_store_root

STYLE_FILE = TEMPLATES_DIR / ".clang-format"
CPP_SUFFIXES = (".cpp", ".h", ".hpp", ".cc", ".c")
PINNED_VERSION = "19.1.7"


@functools.lru_cache(maxsize=None)
def clang_format_path() -> str:
    """Path of the clang-format binary: the pinned package's own executable (packaged_binary) first, then
    next to sys.executable, then PATH.

    Raises OpgenError when none is found."""
    here = Path(sys.executable).parent
    found = packaged_binary() or shutil.which("clang-format", path=str(here)) or shutil.which("clang-format")
    if not found:
        raise OpgenError("clang-format not found (install the pinned dependency: pip install clang-format==19.1.7)")
    return found


def packaged_binary() -> str | None:
    """The executable the `clang-format` PyPI package ships (`<its package directory>/data/bin/clang-format`: what
    the console script it installs runs, in a Python interpreter of its own), when that package is installed with
    it and it is executable; None otherwise. The package is located without importing it."""
    import importlib.util

    try:
        found = importlib.util.find_spec("clang_format")
    except (ImportError, ValueError):
        return None
    if found is None or not found.submodule_search_locations:
        return None
    for d in found.submodule_search_locations:
        exe = Path(d) / "data" / "bin" / "clang-format"
        if exe.is_file() and os.access(exe, os.X_OK):
            return str(exe)
    return None


@functools.lru_cache(maxsize=None)
def clang_format_version() -> str:
    """Version string printed by the clang-format in use (e.g. "clang-format version 19.1.7")."""
    out = subprocess.run([clang_format_path(), "--version"], capture_output=True, text=True, check=False)
    return out.stdout.strip()


def is_cpp(path: str) -> bool:
    """Whether `path` is a C/C++ source or header opgen formats."""
    return path.endswith(CPP_SUFFIXES)


@functools.lru_cache(maxsize=None)
def _store_salt() -> bytes:
    """What every format-store key starts with: the entry format, clang-format's version, the style file's bytes."""
    return b"opgen-format-store 1\0" + clang_format_version().encode() + b"\0" + STYLE_FILE.read_bytes() + b"\0"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def store_key(text: str, filename: str) -> str:
    """Format-store key (hex sha256) of `text` formatted as a file named `filename` (only its suffix matters):
    clang-format's version, the style file and the suffix are part of it (module docstring)."""
    h = hashlib.sha256(_store_salt())
    h.update(Path(filename).suffix.encode("utf-8", "surrogatepass") + b"\0")
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def store_load(text: str, filename: str) -> str | None:
    """The formatted text the format store holds for `text` (as `format_cpp(text, filename)` gives it), or None:
    no store ($OPGEN_FORMAT_DIR unset), no entry, or an entry that fails the module docstring's checks."""
    root = format_store_root()
    if root is None:
        return None
    k = store_key(text, filename)
    try:
        entry = json.loads((root / f"{k}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != k:
        return None
    out = entry.get("text")
    if not isinstance(out, str) or entry.get("sha256") != _sha(out):
        return None
    return out


def store_save(text: str, filename: str, formatted: str) -> None:
    """Remember in the format store that clang-format turned `text` (a file named `filename`) into `formatted`;
    nothing without a store. Written to a unique temporary file and renamed; errors writing are ignored."""
    import tempfile

    root = format_store_root()
    if root is None:
        return
    try:
        root.mkdir(parents=True, exist_ok=True)
        k = store_key(text, filename)
        fd, tmp = tempfile.mkstemp(prefix=f".{k}.", suffix=".tmp", dir=root)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(json.dumps({"key": k, "sha256": _sha(formatted), "text": formatted}))
            os.replace(tmp, root / f"{k}.json")
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except (OSError, ValueError, UnicodeError):
        pass


class PendingFormat:
    """One clang-format process formatting copies of a package's C/C++ files in a temporary directory
    (`-i`, same style and language selection by suffix), started by `format_start` and running while the
    caller goes on (e.g. renders the next op). `result()` waits and returns {path: text}; `cancel()` kills
    the process and removes the directory. Files the format store answers (module docstring) are not given to
    the process, and those it formats are stored. Raises OpgenError (from result) when clang-format fails."""

    def __init__(self, files: dict[str, str]):
        import tempfile

        self.files = dict(files)
        self.hits = {}
        for p in sorted(p for p in files if is_cpp(p)):
            found = store_load(files[p], p)
            if found is not None:
                self.hits[p] = found
        self.cpp = sorted(p for p in files if is_cpp(p) and p not in self.hits)
        self.proc = None
        self.tmp = None
        if not self.cpp:
            return
        self.tmp = tempfile.TemporaryDirectory(prefix="opgen-fmt-")
        try:
            self.paths = []
            for k, p in enumerate(self.cpp):
                f = Path(self.tmp.name) / f"{k}_{Path(p).name}"
                f.write_text(files[p])
                self.paths.append(f)
            env = dict(os.environ)
            env.pop("CLANG_FORMAT_STYLE", None)
            self.proc = subprocess.Popen([clang_format_path(), f"--style=file:{STYLE_FILE}", "-i",
                                          *map(str, self.paths)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        except BaseException:
            if self.proc is not None:
                self.proc.kill()
                self.proc.communicate()
            self.tmp.cleanup()
            raise

    def result(self) -> dict[str, str]:
        """{path: text}, C/C++ files formatted; waits for clang-format. Raises OpgenError when it failed."""
        if self.proc is None:
            return {**self.files, **self.hits}
        try:
            _, err = self.proc.communicate()
            if self.proc.returncode != 0:
                raise OpgenError(f"clang-format failed on {', '.join(self.cpp)}: {err.strip()}")
            out = {**self.files, **self.hits}
            for p, f in zip(self.cpp, self.paths):
                out[p] = f.read_text()
                store_save(self.files[p], p, out[p])
            return out
        except BaseException:
            if self.proc.poll() is None:   # interrupted while waiting: do not leave clang-format running
                self.proc.kill()
                self.proc.communicate()
            raise
        finally:
            self.tmp.cleanup()

    def cancel(self) -> None:
        """Stop the process (if still running) and remove the temporary directory."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            pipes = [f for f in (self.proc.stdout, self.proc.stderr) if f is not None]
            if any(not f.closed for f in pipes):   # not yet reaped (result() may have, when it was interrupted)
                self.proc.communicate()   # reaps it and closes the pipes
        if self.tmp is not None:
            self.tmp.cleanup()


def format_start(files: dict[str, str]) -> PendingFormat:
    """Start formatting `files` ({path: text}; C/C++ files formatted as `format_cpp` does, others returned
    unchanged) in ONE background clang-format process; see PendingFormat."""
    return PendingFormat(files)


def format_many(files: dict[str, str]) -> dict[str, str]:
    """{path: text} with every C/C++ file formatted as `format_cpp` does, in ONE clang-format process;
    other files unchanged. Raises OpgenError when clang-format fails."""
    return format_start(files).result()


def format_cpp(text: str, filename: str) -> str:
    """`text` formatted by clang-format with STYLE_FILE; `filename` selects the language (only its suffix
    matters); the format store (module docstring) is consulted first and given what clang-format returns.
    Raises OpgenError when clang-format fails."""
    found = store_load(text, filename)
    if found is not None:
        return found
    cmd = [clang_format_path(), f"--style=file:{STYLE_FILE}", f"--assume-filename={Path(filename).name}"]
    env = dict(os.environ)
    env.pop("CLANG_FORMAT_STYLE", None)
    proc = subprocess.run(cmd, input=text, capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        raise OpgenError(f"clang-format failed on {filename}: {proc.stderr.strip()}")
    store_save(text, filename, proc.stdout)
    return proc.stdout
