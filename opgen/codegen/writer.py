"""Deterministic writing and diffing of generated packages (`opgen generate`, `opgen diff`).

A package is `{relative path: text}` for one op, written under `<out>/<op_snake>/`. Files are written
as UTF-8 with LF line endings and only when their content changes; files inside an op's directory that
the generator no longer emits are stale and removed (empty directories too). Only the directories of
the ops being generated are touched.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path


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


def write_package(root: Path, files: dict[str, str]) -> tuple[list[str], list[str]]:
    """Make directory `root` hold exactly `files` ({posix relative path: text}).

    Returns (written or changed paths, removed stale paths), both sorted and relative to `root`."""
    root = Path(root)
    written, removed = [], []
    for rel, text in sorted(files.items()):
        p = root / rel
        data = text.encode("utf-8")
        if p.is_file() and p.read_bytes() == data:
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + ".opgen-tmp")
        tmp.write_bytes(data)
        os.replace(tmp, p)
        written.append(rel)
    for rel, p in _existing(root).items():
        if rel not in files:
            p.unlink()
            removed.append(rel)
    dirs = sorted((Path(dp) for dp, _, _ in os.walk(root)), key=lambda d: (-len(d.parts), d.as_posix()))
    for d in dirs:  # deepest first, so a directory emptied by removing its children goes too
        if d != root and not any(d.iterdir()):
            d.rmdir()
    return written, removed


def diff_package(root: Path, files: dict[str, str], label: str) -> str:
    """Unified diff turning what is on disk under `root` into `files` ("" when identical).

    Paths in the diff headers are `a/<label>/<rel>` and `b/<label>/<rel>`; a missing file diffs from
    /dev/null, a stale one to /dev/null."""
    root = Path(root)
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
