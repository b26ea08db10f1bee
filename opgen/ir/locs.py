"""Spec locations (`file.py:line`) as they travel from the tensor IR (`Node.loc`, set by opgen.dsl.builder) through
the Kernel IR (`loc` of rowprog.Instr, attnprog.VInstr, attnprog.CubeOp) into the emitted C++ (`// spec: file.py:line`) and
the kernel-program texts (`  @ file.py:line`).

A location is the spec file's basename and a line number, never a path, so output does not depend on where the
spec lives. `safe_loc` is the one place that makes a location safe inside a C++ line comment (and inside one
line of program text): another module may replace it by a general escaper later.
"""

from __future__ import annotations

import re

from opgen.ir.records import evolve

_UNSAFE_FILE = re.compile(r"[^A-Za-z0-9_.+-]")


def safe_loc(loc: str) -> str:
    """`loc` ("file.py:28") with every character of the file part outside [A-Za-z0-9_.+-] and every non-digit of
    the line part replaced by '?': safe in a `//` comment whatever the spec file is called (no newline, no `*/`, no
    backslash line continuation). "" stays ""."""
    if not loc:
        return ""
    path, sep, line = loc.rpartition(":")
    if not sep:
        path, line = loc, ""
    name = _UNSAFE_FILE.sub("?", path)
    num = re.sub(r"[^0-9]", "?", line)
    return f"{name}:{num}" if sep else name


def locs_text(locs) -> str:
    """The distinct non-empty locations of `locs`, made safe (safe_loc) and merged per file in a deterministic
    order: "a.py:3,7 b.py:2" (files by name, lines by number). "" when there is none."""
    by_file: dict[str, set] = {}
    for loc in locs:
        s = safe_loc(loc or "")
        if not s:
            continue
        f, _sep, line = s.rpartition(":")
        if not _sep:
            f, line = s, ""
        by_file.setdefault(f, set()).add(line)

    def line_key(x):
        return (0, int(x), x) if x.isdigit() else (1, 0, x)

    return " ".join(f"{f}:{','.join(sorted(ls, key=line_key))}" if any(ls) else f
                    for f, ls in sorted(by_file.items()))


def spec_comment(locs) -> str:
    """A trailing C++ comment citing `locs` (a location string or an iterable of them): "  // spec: a.py:3", or ""
    when there is no location."""
    text = locs_text([locs] if isinstance(locs, str) else locs)
    return f"  // spec: {text}" if text else ""


def spec_doc(locs) -> str:
    """The citation of `locs` as a node's comment text, without the C++ comment marker: "spec: a.py:3", or ""."""
    return spec_comment(locs).strip().removeprefix("//").strip()


def at_suffix(loc: str) -> str:
    """The location suffix of one instruction in a kernel-program text: "  @ a.py:3", or "" without a location."""
    s = locs_text([loc])
    return f"  @ {s}" if s else ""


def stamp(items: list, start: int, loc: str) -> None:
    """Give every element of items[start:] (frozen dataclasses with a `loc` field) that has no location yet the
    location `loc`, in place (opgen.ir.records.evolve: every other field is kept)."""
    if not loc:
        return
    for k in range(start, len(items)):
        if not items[k].loc:
            items[k] = evolve(items[k], loc=loc)
