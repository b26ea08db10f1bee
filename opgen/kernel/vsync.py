"""Synchronisation within the vector pipe by dependency: the `place_barriers` pass.

The vector pipe issues in order but does not complete in order, so a vector instruction that reads or writes a UB
region an earlier, possibly unfinished vector instruction wrote (read-after-write, write-after-write), or writes a
region such an instruction reads (write-after-read), must wait for it: `PipeBarrier<PIPE_V>()` makes every earlier
vector instruction complete before any later one starts (docs/reference/ascendc.md §1.6). The pass walks one
straight-line *stream* of statements (the printed vector instructions of a loop body, a setup or an epilogue, with
their operands' regions from the instruction table's roles, opgen.kernel.isa) keeping the regions read and written
by the vector instructions issued since the last barrier, and puts a barrier before a statement only where one of
its regions conflicts with them. No barrier is placed between independent instructions; a barrier given in the input
is dropped (the pass derives every one).

Stream edges: streams are pasted into template loops and between copies, so what runs before and after them is
not known here. The pass keeps a barrier at the end of a stream whenever vector work is pending (`tail`), so a
stream never leaves unfinished vector work to its context: the next iteration of a loop (the stream followed by
itself), a copy-out or the template's own vector statements start after it. In turn it assumes a stream starts with
no pending vector work: true after a stream (its tail barrier), after a queue hand-off, and after the templates'
vector helpers, each of which ends with a barrier or a V->S wait (LoadRow, StoreRow, TableRow, LoadHead, RowMax; RowSum's
result is read back by the scalar unit).

Regions (`region`): an operand expression names one region. Two regions overlap exactly when their names are equal.
The slots of the per-slot arrays of views (SLOT_ARRAYS, e.g. `w_[k]`) and the register functions (`Reg(j)`,
`Head(j)`) are distinct regions: slot k is the view at k·stride elements of its TBuf and every instruction on a slot
covers at most stride elements (the rows kernels: n_ <= rowStride_ and hidden_ <= colAlign_; the head rows: headDim_
<= dAlign_; the NSA rows: keys <= Lc_ per row of vecRows_ rows, e <= D_ per head register; the planned buffers of
opgen.tiling). Any other view (`rowIn_x[i * rowStride_]`, `tileQue0T[i * keys]`) is its whole tensor: views of one
tensor at run-time offsets are taken as overlapping.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

BARRIER = "PipeBarrier<PIPE_V>();"
"""The vector-pipe barrier statement (docs/reference/ascendc.md §1.6)."""
FULL_BARRIER = "PipeBarrier<PIPE_ALL>()"
"""The all-pipes barrier (docs/reference/ascendc.md §1.6): every pending vector access is complete after it."""

SLOT_ARRAYS = ("w_", "brow_", "colv_", "tab_", "col_", "acc_", "perm_", "sign_")
"""Kernel members that are arrays of disjoint fixed-stride views (module docstring): `name[k]` with a literal k is one
region per slot."""
SLOT_FUNCS = ("Reg", "Head")
"""Kernel helpers returning disjoint fixed-stride views (NSA row and head registers): `Reg(j)...` is one region per j."""

AFTER = ("pending", "done", "barrier")
"""What a statement leaves behind: "pending" its accesses may still be in flight; "done" its own accesses are complete
when the next statement starts (its result was read back by the scalar unit after a V->S wait); "barrier" it ends
with a PipeBarrier<PIPE_V>() of its own (every earlier vector access complete)."""


@dataclass(frozen=True)
class VStmt:
    """One vector statement of a stream: its C++ lines, the regions it reads and writes on the vector pipe (region
    names, `region`), and what it leaves pending (AFTER)."""

    lines: tuple[str, ...]
    reads: frozenset = frozenset()
    writes: frozenset = frozenset()
    after: str = "pending"


def region(expr: str) -> str:
    """The region an operand's C++ expression names (module docstring): `w_[3]` -> "w_[3]", `Reg(2)[i * keys]` ->
    "Reg(2)", `rowIn_x[i * rowStride_]` -> "rowIn_x", a plain name -> itself."""
    e = expr.strip()
    m = re.fullmatch(r"([A-Za-z_]\w*)\[(\d+)\]", e)
    if m and m.group(1) in SLOT_ARRAYS:
        return e
    m = re.fullmatch(r"([A-Za-z_]\w*)\((\d+)\)(\[.*\])?", e)
    if m and m.group(1) in SLOT_FUNCS:
        return f"{m.group(1)}({m.group(2)})"
    m = re.match(r"([A-Za-z_]\w*)\s*[\[(]", e)
    if m:
        return m.group(1)
    return e


def vstmt(lines, reads=(), writes=(), after: str = "pending") -> VStmt:
    """A VStmt of `lines` (a string or a list of them) reading and writing the regions of the operand expressions
    `reads` / `writes` (mapped through `region`). Raises ValueError for an unknown `after`."""
    if after not in AFTER:
        raise ValueError(f"vstmt: after must be one of {AFTER}, not {after}")
    lines = (lines,) if isinstance(lines, str) else tuple(lines)
    return VStmt(lines, frozenset(region(x) for x in reads), frozenset(region(x) for x in writes), after)


def instr_stmt(d, lines, exprs: dict, after: str = "pending") -> VStmt:
    """The VStmt of table instruction `d` (opgen.kernel.isa.InstrDef) printed as `lines` with operand expressions
    `exprs` ({operand name: C++ text}): it reads the regions of the operands its entry reads and writes those of the
    operands it writes (InstrDef.reads / writes)."""
    return vstmt(lines, [exprs[n] for n in d.reads() if n in exprs], [exprs[n] for n in d.writes() if n in exprs],
                 after)


def _control(line: str) -> bool:
    """Whether C++ line `line` opens or closes a block (a loop, a branch, a one-line block) or leaves one (continue,
    break, return): an edge of a straight-line stream."""
    t = line.split("//")[0].strip()
    return t.endswith(("{", "}")) or t.startswith("}") or re.match(r"(continue|break|return)\b", t) is not None


def place_barriers(stream, tail: bool = True) -> list[str]:
    """The C++ lines of `stream` (strings: statements with no vector-pipe access, or BARRIER; VStmt: vector
    statements) with a PipeBarrier<PIPE_V>() before each vector statement that reads or writes a region a vector
    statement since the last barrier wrote, or writes a region one read (RAW / WAW / WAR; module docstring); a
    BARRIER line in the input is dropped (redundant or re-derived), a PipeBarrier<PIPE_ALL>() ends every pending access.
    A line opening, closing or leaving a block (a loop or branch edge: `{`, `}`, `} else {`, `continue;`) is a stream edge: a barrier goes
    before it while work is pending, so every straight-line segment is analysed on its own. With `tail`, a barrier
    ends the stream when vector work is pending (module docstring, stream edges)."""
    out: list[str] = []
    reads: set = set()
    writes: set = set()
    for s in stream:
        if isinstance(s, str):
            if s.strip() == BARRIER:   # every barrier is this pass's: one given in the input is re-derived
                continue
            if _control(s) and (reads or writes):   # a branch or loop edge: the next statement's context is unknown
                out.append(BARRIER)
                reads, writes = set(), set()
            if s.startswith(FULL_BARRIER):
                reads, writes = set(), set()
            out.append(s)
            continue
        if s.reads & writes or s.writes & writes or s.writes & reads:
            out.append(BARRIER)
            reads, writes = set(), set()
        out.extend(s.lines)
        if s.after == "barrier":
            reads, writes = set(), set()
        elif s.after == "pending":
            reads |= s.reads
            writes |= s.writes
    if tail and (reads or writes):
        out.append(BARRIER)
    return out
