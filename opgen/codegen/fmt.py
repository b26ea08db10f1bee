"""clang-format of emitted C/C++ (docs/design.md: "Output is deterministic and formatted").

The binary is the one pinned in pyproject.toml (`clang-format==19.1.7`, installed next to the Python
interpreter of the venv); it is looked up beside `sys.executable` first, then on PATH. Every file is
formatted with the same style file, `templates/.clang-format` (Google style, 4-space indent, 120 columns:
CANN's conventions), passed explicitly so no `.clang-format` of the surrounding directories applies.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from opgen.codegen.env import TEMPLATES_DIR
from opgen.errors import OpgenError

STYLE_FILE = TEMPLATES_DIR / ".clang-format"
CPP_SUFFIXES = (".cpp", ".h", ".hpp", ".cc", ".c")
PINNED_VERSION = "19.1.7"


@functools.lru_cache(maxsize=None)
def clang_format_path() -> str:
    """Path of the clang-format binary: next to sys.executable first, then PATH.

    Raises OpgenError when none is found."""
    here = Path(sys.executable).parent
    found = shutil.which("clang-format", path=str(here)) or shutil.which("clang-format")
    if not found:
        raise OpgenError("clang-format not found (install the pinned dependency: pip install clang-format==19.1.7)")
    return found


@functools.lru_cache(maxsize=None)
def clang_format_version() -> str:
    """Version string printed by the clang-format in use (e.g. "clang-format version 19.1.7")."""
    out = subprocess.run([clang_format_path(), "--version"], capture_output=True, text=True, check=False)
    return out.stdout.strip()


def is_cpp(path: str) -> bool:
    """Whether `path` is a C/C++ source or header opgen formats."""
    return path.endswith(CPP_SUFFIXES)


class PendingFormat:
    """One clang-format process formatting copies of a package's C/C++ files in a temporary directory
    (`-i`, same style and language selection by suffix), started by `format_start` and running while the
    caller goes on (e.g. renders the next op). `result()` waits and returns {path: text}; `cancel()` kills
    the process and removes the directory. Raises OpgenError (from result) when clang-format fails."""

    def __init__(self, files: dict[str, str]):
        import tempfile

        self.files = dict(files)
        self.cpp = sorted(p for p in files if is_cpp(p))
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
            return dict(self.files)
        try:
            _, err = self.proc.communicate()
            if self.proc.returncode != 0:
                raise OpgenError(f"clang-format failed on {', '.join(self.cpp)}: {err.strip()}")
            out = dict(self.files)
            for p, f in zip(self.cpp, self.paths):
                out[p] = f.read_text()
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
    matters). Raises OpgenError when clang-format fails."""
    cmd = [clang_format_path(), f"--style=file:{STYLE_FILE}", f"--assume-filename={Path(filename).name}"]
    env = dict(os.environ)
    env.pop("CLANG_FORMAT_STYLE", None)
    proc = subprocess.run(cmd, input=text, capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        raise OpgenError(f"clang-format failed on {filename}: {proc.stderr.strip()}")
    return proc.stdout
