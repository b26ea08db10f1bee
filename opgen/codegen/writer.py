"""Deterministic writing and diffing of generated packages (`opgen generate`, `opgen diff`).

A package is `{relative path: text}` for one op, written under `<out>/<op_snake>/`. Files are UTF-8 with LF
line endings; files inside an op's directory that the generator no longer emits are stale and removed (empty
directories too). Only the directories of the ops being generated are touched.

Every path is confined to its package directory (`safe_relpath`: relative, normalised, no `..`, no absolute
path, no NUL or line break), whatever produced it (an emitter or a generation-cache entry). A package is
written atomically: the whole new tree goes into a uniquely named temporary directory beside the op's directory
and is swapped in by rename (renameat2(RENAME_EXCHANGE) where the kernel has it: a reader sees the old tree
or the new one, never a mix), so concurrent `opgen generate --out D` runs do not collide and an interrupted one
leaves the old tree (its temporary directory is removed on the way out).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import difflib
import errno
import os
import secrets
import shutil
import tempfile
from pathlib import Path, PurePosixPath

from opgen.errors import OpgenError

TMP_PREFIX = ".opgen-tmp-"
"""Name prefix of the writer's temporary directories (beside the op directory)."""


def safe_relpath(rel) -> str:
    """`rel` when it is a safe path inside a package directory: a non-empty str, '/'-separated, relative,
    normalised (no '', '.' or '..' component, no backslash), without NUL or any control character, and no
    component longer than 255 bytes. Raises OpgenError naming the path otherwise."""
    ok = isinstance(rel, str) and rel and not rel.startswith("/") and "\\" not in rel and rel.isprintable()
    parts = rel.split("/") if ok else []
    if not ok or any(p in ("", ".", "..") or len(p.encode("utf-8", "surrogatepass")) > 255 for p in parts) \
            or PurePosixPath(rel).as_posix() != rel:
        raise OpgenError(f"refusing to write {rel!r}: a package path must be relative, normalised and inside the "
                         "package directory (no '..', no absolute path, no control characters)")
    return rel


def _existing(root: Path) -> dict[str, Path]:
    if not root.is_dir():
        return {}
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for f in sorted(filenames):
            p = Path(dirpath) / f
            out[p.relative_to(root).as_posix()] = p
    return dict(sorted(out.items()))


def _exchange(a: Path, b: Path) -> bool:
    """Swap directories `a` and `b` atomically (Linux renameat2 RENAME_EXCHANGE); False when unsupported."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _swap_in(tmp: Path, root: Path) -> Path | None:
    """Put the tree `tmp` at `root`; returns where the old tree now is (to be removed), or None."""
    if not root.exists() and not root.is_symlink():
        try:
            os.rename(tmp, root)
            return None
        except OSError as e:  # another writer created it meanwhile
            if e.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
    if root.is_symlink() or not root.is_dir():
        raise OpgenError(f"--out: {root} exists and is not a directory")
    if _exchange(tmp, root):
        return tmp
    old = Path(tempfile.mkdtemp(prefix=TMP_PREFIX + "old-", dir=root.parent))
    os.rmdir(old)
    os.rename(root, old)      # fallback: a moment without the tree, never a mix
    os.rename(tmp, root)
    return old


def write_package(root: Path, files: dict[str, str]) -> tuple[list[str], list[str]]:
    """Make directory `root` hold exactly `files` ({posix relative path: text}), atomically (module doc).

    Returns (written or changed paths, removed stale paths), both sorted and relative to `root`; nothing is
    rewritten when nothing changed. Raises OpgenError for a path outside the package (safe_relpath) or a `root`
    that exists and is not a directory; OSError from the file system."""
    root = Path(root)
    for rel in files:
        safe_relpath(rel)
    if root.exists() and not root.is_dir():
        raise OpgenError(f"--out: {root} exists and is not a directory")
    on_disk = _existing(root)
    data = {rel: text.encode("utf-8") for rel, text in files.items()}
    written = sorted(rel for rel, b in data.items() if rel not in on_disk or on_disk[rel].read_bytes() != b)
    removed = sorted(rel for rel in on_disk if rel not in files)
    if not written and not removed:
        return [], []
    root.parent.mkdir(parents=True, exist_ok=True)
    with signals_deferred():   # SIGINT/SIGTERM arrive after the temp tree is swapped in or removed, never midway
        # The mask holds a signal back only when the main thread takes it: another thread of the process (a
        # formatter's reaper) may take it, and Python then raises it in the main thread anyway. So the temp tree is
        # named before it is made (an interrupt right after mkdir is inside the try), and its removal is finished
        # before such an interrupt goes on.
        tmp = root.parent / f"{TMP_PREFIX}{root.name}-{secrets.token_hex(6)}"
        old = None
        stopped = None
        try:
            tmp.mkdir(mode=0o700)
            for rel, b in sorted(data.items()):
                p = tmp / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(b)
            os.chmod(tmp, 0o777 & ~_umask())
            old = _swap_in(tmp, root)
        finally:
            for d in (tmp, old):
                for _attempt in range(3):   # again after an interrupt (not forever: ignore_errors may leave it)
                    if d is None or d == root or not (d.exists() or d.is_symlink()):
                        break
                    try:
                        shutil.rmtree(d, ignore_errors=True)
                    except BaseException as e:   # noqa: B902 - a signal taken by another thread: clean up first
                        stopped = stopped or e
            if stopped is not None:
                raise stopped
    return written, removed


@contextlib.contextmanager
def signals_deferred():
    """Block SIGINT and SIGTERM in the main thread for the duration (POSIX): a signal that arrives meanwhile is
    delivered when the block ends, so the clean-up of a package write (or the fork and registration of a render
    worker, opgen.codegen.generation) is never interrupted halfway. Yields the signal mask in force before the
    block (what a forked child restores), or None when nothing was blocked (another thread, no POSIX masks)."""
    import signal
    import threading

    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield None
        return
    sigs = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        yield previous
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def diff_package(root: Path, files: dict[str, str], label: str) -> str:
    """Unified diff turning what is on disk under `root` into `files` ("" when identical).

    Paths in the diff headers are `a/<label>/<rel>` and `b/<label>/<rel>`; a missing file diffs from
    /dev/null, a stale one to /dev/null."""
    root = Path(root)
    for rel in files:
        safe_relpath(rel)
    on_disk = _existing(root)
    out: list[str] = []
    for rel in sorted(set(on_disk) | set(files)):
        old = on_disk[rel].read_bytes().decode("utf-8", errors="replace") if rel in on_disk else None
        new = files.get(rel)
        if old == new:
            continue
        a = f"a/{label}/{rel}" if old is not None else "/dev/null"
        b = f"b/{label}/{rel}" if new is not None else "/dev/null"
        lines = difflib.unified_diff((old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True),
                                     a, b)
        for line in lines:
            out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)
