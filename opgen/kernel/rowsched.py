"""The ROW_SPLIT schedule of the rows family as Kernel IR (opgen.kernel.kir).

A rows kernel class runs ROW_SPLIT (strategy 1 of opgen.tiling.rowkernel) as four methods: RowSplit (this core's
rows [RowStartOf(core), RowStartOf(core + 1)), the UB buffers the strategy reads, then `rowsPerPass` rows per
iteration, the last one shorter), CopyIn (each GM row operand into its VECIN queue: one DataCopyPad of k rows
when the operand is flat, one per run of rows at one GM stride otherwise; each per-row statistic), Compute (the
queue hand-offs, the MTE2->S flag before the scalar unit reads statistics, the per-row loop with its batch
bookkeeping, the statistics' S->V flag and cast into their output queue) and CopyOut (each output queue to GM).
`row_split_class` builds them from a `RowSchedule`: what the row program needs (its GM operands with their
addresses as dim expressions, the buffers the strategy reads, the per-row instruction stream) and nothing of a
particular operator. The per-row instruction streams (ROW_SPLIT's, COL_SPLIT's levels and final phase) arrive as
Kernel-IR statements (vector instructions, scalar reads / writes, row-reduction calls, float lets, barriers); the
per-segment scalar operands (a `vseg`, opgen.codegen.kernel) still arrive as `kir.Verbatim` lines printed by the
rows printer: they are not IR nodes yet.

Facts: docs/reference/ascendc.md §1.5 (TQue depth and buffer count, TBuf), §1.6 (HardEvent flags), §1.8
(DataCopyPad: blockLen bytes; the UB gap in 32-B blocks and the GM gap in bytes, on the side each lies).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from opgen.ir.dims import Bin, Constraint, DimExpr, Fn, Lit, Sym, as_dim
from opgen.kernel.isa import INSTRS, REPEAT_FORMS, Op, Pipe
from opgen.names import cpp_name
from opgen.kernel.rowcounts import fetches_next_pass
from opgen.kernel.rowprog import NARROW_LANES
from opgen.kernel.kir import (map_children, TilingCond, ELEM_BYTES, BLOCK_IDX, BLOCK_NUM, Alloc, Barrier, Comment, FLoad, Return, Select, SyncAll, Assign, FAssign, FBits, Call, Copy, DeQue, EnQue, FConst, For, Free, Func, Get,
                              GmTensor, GmView, If, InitBuffer, FNeg, FRef, Invoke, KernelClass, Let, Local, Param, Ref,
                              ScalarVar, Scope, SetValue, SizeOf, TensorVar, TPos, Vec, Verbatim, View, GetValue, FLet, vec,
                              walk)

INIT_MEMBERS = (("hidden_", "hiddenDim"), ("seqLen_", "seqLen"), ("rowNum_", "rowNum"), ("colAlign_", "colAlign"))
"""(member, tiling-data field) pairs every rows kernel class sets in Init; a float attribute's member attr_<a> is set
there from its IEEE-754 bits, field <a>Bits (opgen.tiling.emit.float_bits)."""
MEMBER_SCALARS = ("hidden_", "seqLen_", "rowNum_", "colAlign_", "rowStride_", "groupStride_", "rowStart_", "rowEnd_",
                  "c0_", "n_", "curBatch_", "valBatch_", "wsRowsPerCore_")
"""The int64 members of a rows kernel class (set in Init from the tiling data, or by the strategy's method)."""
FIXED_BUFS = ("workBuf", "browBuf", "colBuf", "paramQue", "accOutQue", "reduceBuf")
"""The fixed UB buffers of a rows kernel, each allocated only where the strategy reads it
(opgen.tiling.rowkernel.fixed_needs)."""


def mul(*xs) -> DimExpr:
    """x0 * x1 * ... as written (left-associated, not canonicalised: the printed order is the given one)."""
    e = as_dim(xs[0])
    for x in xs[1:]:
        e = Bin("*", e, as_dim(x))
    return e


def add(*xs) -> DimExpr:
    """x0 + x1 + ... as written."""
    e = as_dim(xs[0])
    for x in xs[1:]:
        e = Bin("+", e, as_dim(x))
    return e


def sub(a, b) -> DimExpr:
    """a - b as written."""
    return Bin("-", as_dim(a), as_dim(b))


def div(a, b) -> DimExpr:
    """a // b as written (values are >= 0: C++ /)."""
    return Bin("//", as_dim(a), as_dim(b))


@dataclass(frozen=True)
class GmRows:
    """One GM operand of the schedule: `op` names its queue and tensor members (rowInQue_<op>, rowIn_<op>, ...), `gm`
    its GM tensor (member gm_<gm>), ctype its element type (a C++ type or template parameter). layout "flat" (row
    r0 at off_r0, k rows one copy), "runs" (a run of up to RunRows(r, k - j) rows at GM distance `stride` from row r
    at off_r), "single" (row by row), "pieces" (a concat: `pieces`, the copy's statements from the rows printer),
    "gather" (a per-row value read element by element by the scalar unit at offset `at`, converted to float).
    gap: the GM gap in bytes between the rows of a run (Lit(0) when they touch). spec: the citation comment text
    of the instructions that read or write it; rm: the round mode of a statistic output."""

    op: str
    gm: str
    ctype: str
    layout: str = "flat"
    off_r0: DimExpr = Lit(0)
    off_r: DimExpr = Lit(0)
    gap: DimExpr = Lit(0)
    spec: str = ""
    pieces: tuple = ()
    rm: str = ""
    off_g0: DimExpr = Lit(0)     # COL_SPLIT: element offset of group row g0 (column 0)
    gap_col: DimExpr = Lit(0)    # COL_SPLIT: GM gap in bytes between the n_-element slices of a run
    pieces_col: tuple = ()       # COL_SPLIT: a concat's copy statements
    at: DimExpr = Lit(0)         # layout "gather": element offset of row r0 + j (ROW_SPLIT)
    at_g0: DimExpr = Lit(0)      # layout "gather": element offset of row g0 + j (COL_SPLIT)
    guard: tuple = ()            # an output written under some presences of the optional inputs only: the If
    #                              condition (hasInput<k>_ literals) its queue's Alloc, EnQue and CopyOut run under
    #                              (opgen.kernel.rowpresence.output_guard); an optional input of a class serving
    #                              several presences: its copy from GM's (rowpresence.input_guard); () = always
    guard_doc: str = ""          # the guard's words ("when scales2 present")


@dataclass(frozen=True)
class RowSchedule:
    """What ROW_SPLIT needs of one kernel class: its GM row / statistic operands (GmRows), the work rows (`temps`),
    batch rows (`nbrow`) and column rows (`ncol`), `bufs` ({FIXED_BUFS name: allocated}), `ws_rows_per_core` (rows
    of workspace per core for the cross-core sums; None without them), which bookkeeping methods exist
    (load_cols, load_batch, flush_row, zero_batch; batch_index: the per-row loop computes the batch b), the
    per-row stream, the cross-core epilogue (Kernel-IR statements), the template parameters and the tiling struct."""

    row_in: tuple = ()
    row_out: tuple = ()
    stat_in: tuple = ()
    stat_out: tuple = ()
    temps: int = 2
    narrow: bool = False       # no row of the row axis in UB (rowprog.narrow_rows): NARROW_LANES-lane UB rows
    nbrow: int = 0
    ncol: int = 0
    bufs: dict = field(default_factory=dict)
    ws_rows_per_core: int | None = None
    load_cols: bool = False
    gm_all: tuple = ()           # every GM tensor the class binds ((name, element type); the column operands too)
    load_cols_body: tuple = ()   # LoadColumns as Kernel-IR statements (the column rows' loads, compute, zeroed
    #                              accumulators); () with load_cols: its body is C++ text (an extern method)
    load_batch: bool = False
    flush_row_body: tuple = ()   # FlushRow / FlushCol as Kernel-IR statements; () with flush_row / flush_col: C++
    flush_col_body: tuple = ()   # text (extern methods)
    load_batch_body: tuple = ()   # LoadBatch(b) as Kernel-IR statements; () with load_batch: C++ text (extern)
    flush_row: bool = False
    zero_batch: bool = False
    zero_batch_body: tuple = ()   # ZeroBatchSums as Kernel-IR statements; () with zero_batch: C++ text (extern)
    batch_index: bool = False
    row_body: tuple = ()       # the per-row stream: Kernel-IR statements
    row_segments: tuple = ()   # ROW_SPLIT over the pass's rows at once: (("all" | "row", statements), ...); (): none
    reduce_segments: tuple = ()   # the same with the row reductions over all rows too (RowsSum / RowsMax), run when
    #                               a row's repeat stride fits BinaryRepeatParams and k one instruction's repeats
    block_segments: tuple = ()   # the same with eight rows a repeat ("bcol", "bsc" segments, RowsSumB / RowsMaxB),
    #                              run under BLOCK_FITS; () without reduce_segments
    acc_body: tuple = ()       # two passes over the rows: the first pass's stream (accumulates; row_body the second)
    reload_batch: tuple = ()   # the second pass: complete per-batch reductions read at a new batch b (statements)
    float_scalars: tuple = ()  # float members the stream reads (attr_<name>, set in Init; bt<k>_ per batch)
    gm_scalars: tuple = ()     # (float member, GM operand): single-value inputs, read in Init (RowProgram.gm_scalars)
    batch_stores: bool = False  # outputs written once per batch in the second pass (a pass even without row outputs)
    cross_core: tuple = ()
    strided: tuple = ()        # the Off_<name>(r) address methods (Kernel-IR Funcs)
    fields: tuple = ()         # the tiling-data fields the addresses read (dim<k>)
    bufs_col: dict = field(default_factory=dict)   # COL_SPLIT's fixed buffers ({FIXED_BUFS name: allocated})
    stage: tuple = (4, ())  # ROW_SPLIT's paramQue element: (largest fixed bytes or None, C types of dtype variables)
    chunk: bool = False     # ColSplit serves ROW_CHUNK too (strategy 4): this core's rows, each whole row in chunks
    prefetch: bool = False  # ColSplit prefetches its items through two-buffer queues (rowcounts.chunk_prefetch)
    col_prefetch: bool = False  # ColStream's chunks through two-buffer queues (rowcounts.col_prefetch)
    pool_bound: bool = False   # ROW_SPLIT's row queues take one buffer each (rowcounts.row_pool_bound)
    stage_col: tuple = (4, ())   # COL_SPLIT's (opgen.kernel.rowcounts.stage_element)
    levels: tuple = ()         # COL_SPLIT row-reduction levels: ((level, body statements, ((slot, j, "Add"/"Max"), ...)))
    nlevel: int = 1            # partial reductions per level (the widest level)
    nsums: int = 1             # row reductions in all
    final_body: tuple = ()     # COL_SPLIT's final per-row stream (Kernel-IR statements)
    col_segments: tuple = ()   # COL_SPLIT over the group's rows at once: ((level or -1 the final phase, segments as
    #                            row_segments), ...), run under COL_ROWS_FITS; (): row by row only
    col_block_segments: tuple = ()   # the same eight rows a repeat (as block_segments), run under COL_BLOCK_FITS
    stream_levels: tuple = ()  # COL_STREAM's levels (as `levels`, partials combined over the chunks); (): none
    col_phases: tuple = ()     # COL_STREAM: the phases (levels, -1 the final one) that read column rows
    online: tuple = ()         # COL_STREAM: (level a, the fused stream of levels a and a + 1, the rescale loop)
    res_levels: tuple = ()     # ROW_CHUNK with the row inputs resident: the levels as `stream_levels`; (): none
    res_online: tuple = ()     # ... (level a, the fused stream of levels a and a + 1) when a softmax's pair is online
    level_guards: tuple = ()   # ... ((level, If conditions), ...): a level whose row reductions all run under one
    #                            presence cube (runtime guard values, optional inputs): its chunk loop runs only there
    res_final: tuple = ()      # ... the output phase's per-row stream
    bufs_res: dict = field(default_factory=dict)   # ... its fixed buffers ({FIXED_BUFS name: allocated})
    stage_res: tuple = (4, ())   # ... its paramQue element
    col_final: tuple = ()      # COL_SPLIT's per-chunk epilogue (statements)
    col_total_init: tuple = ()   # COL_SPLIT: before the column chunks, the partial totals declared (statements)
    col_total_end: tuple = ()    # COL_SPLIT: after them, the totals exchanged, combined and written (statements)
    flush_col: bool = False
    helpers: tuple = ()        # which of HELPER_METHODS the class has (the buffers they use are allocated)
    run_extent: DimExpr = Lit(1)   # RunRows: the rows of one run (the innermost leading extent)
    tparams: tuple = ()
    tparam_bytes: tuple = ()   # (dtype variable, bytes) of the variables whose rows all have one size (KernelClass)
    tiling_struct: str = "TilingData"
    zero_fill: bool = False    # zero the row, batch and column rows once (a compare / select reads whole repeats)
    packed_lanes: int = 0      # a batched program with packed values (rowprog.packed): its segments run when a row's
    #                            lanes fill whole mask bytes (8) / words (16, mask logic), else the per-row loop
    dim_values: tuple = ()     # (int64 member, its tiling field's symbol): dims the row program reads as numbers
    presence: tuple = ()       # (bool member hasInput<k>_, optional input k's Init argument): Init sets it to "not nullptr"
    #                            (guard<k>_, kir.TilingCond) for a runtime guard: Init assigns its expression
    args: tuple = ()           # every Init argument (the spec's inputs and outputs, in order); () = the bound ones


def _spec(text: str) -> str:
    """The comment text of a citation "  // spec: a.py:3" -> "spec: a.py:3"."""
    return text.strip().removeprefix("//").strip()


_HID, _COLA, _K = Sym("hidden_"), Sym("colAlign_"), Sym("k")
_COL_CHUNKS = Constraint("==", Sym("colChunkLoads"), Lit(1))
"""ROW_CHUNK with resident rows: the column rows are loaded (or computed) per column chunk of each phase that reads
them, in buffers of one chunk, where whole ones do not fit beside the resident row (the tiling field colChunkLoads,
opgen.tiling.rowkernel `_resident_or_slice`); else whole, once per core."""
_RES_COL_LEN = Select(_COL_CHUNKS, Sym("rowStride_"), _COLA)
"""Elements of one column row in ROW_CHUNK's colBuf_: a chunk (colChunkLoads 1) or the whole row."""


def _gap_blocks(stride, length, ctype) -> DimExpr:
    return Invoke("GapBlocks", (as_dim(stride), as_dim(length), SizeOf(ctype)))


def _rows_copy(ub: Ref, gm: GmView, count, length, ctype: str, gm_gap, ub_stride, to_gm: bool, doc: str) -> Scope:
    """One DataCopyPad of `count` rows of `length` elements of `ctype` between UB (rows `ub_stride` elements apart)
    and GM (`gm_gap` bytes between rows): `count` bursts of a row each, or -- when the rows touch on both sides (no
    GM gap, the UB stride the row's length) -- one burst of all of them (blockLen is 32 bits, docs/reference/
    ascendc.md §1.8; the rows are in UB, so it fits), the condition bound once (oneBurst) in a scope with the copy.
    A burst costs HBM time beyond its bytes
    (docs/reference/kernel_cost.md §2): rows of a few KB are read at a fraction of the bandwidth."""
    sz = SizeOf(ctype)
    cond = ((Constraint("==", gm_gap, Lit(0)),) if gm_gap != Lit(0) else ()) + (Constraint("==", ub_stride, length),)
    one = (Constraint("!=", Sym("oneBurst"), Lit(0)),)   # the merge condition, bound once
    n = Select(one, Lit(1), count)
    nbytes = Select(one, mul(count, length, sz), mul(length, sz))
    gap = _gap_blocks(ub_stride, length, ctype)
    copy = Copy(gm, ub, n, nbytes, gap, gm_gap, doc=doc) if to_gm else Copy(ub, gm, n, nbytes, gm_gap, gap, doc=doc)
    return Scope((Let("oneBurst", Select(cond, Lit(1), Lit(0))), copy))


def _copy_rows_in(t: GmRows) -> tuple:
    """GM -> UB of k rows of row operand t into LocalTensor t (rows colAlign_ apart); inside If(t.guard) for an
    optional input of a class serving several presences (`guard`)."""
    return guard(t, _copy_rows_in_always(t))


def _copy_rows_in_always(t: GmRows) -> tuple:
    if t.layout == "pieces":
        return tuple(t.pieces)
    if t.layout == "flat":
        return (_rows_copy(Ref("t"), GmView(f"gm_{t.gm}", t.off_r0), _K, _HID, t.ctype, t.gap, _COLA, False,
                           _spec(t.spec)),)
    run = Invoke("RunRows", (Sym("r"), sub(_K, Sym("j")))) if t.layout == "runs" else Lit(1)
    return (For("j", Lit(0), _K, None, (
        Let("r", add(Sym("r0"), Sym("j"))),
        Let("m", run),
        _rows_copy(Ref("t", mul(Sym("j"), _COLA)), GmView(f"gm_{t.gm}", t.off_r), Sym("m"), _HID, t.ctype, t.gap,
                   _COLA, False, _spec(t.spec)),
        Assign("j", add(Sym("j"), Sym("m"))),
    ), doc="one copy per run of rows at a constant GM stride"),)


def _copy_rows_out(t: GmRows) -> tuple:
    """UB -> GM of k rows of output operand t from LocalTensor t."""
    if t.layout == "flat":
        return (_rows_copy(Ref("t"), GmView(f"gm_{t.gm}", t.off_r0), _K, _HID, t.ctype, t.gap, _COLA, True,
                           _spec(t.spec)),)
    run = Invoke("RunRows", (Sym("r"), sub(_K, Sym("j")))) if t.layout == "runs" else Lit(1)
    return (For("j", Lit(0), _K, None, (
        Let("r", add(Sym("r0"), Sym("j"))),
        Let("m", run),
        _rows_copy(Ref("t", mul(Sym("j"), _COLA)), GmView(f"gm_{t.gm}", t.off_r), Sym("m"), _HID, t.ctype, t.gap,
                   _COLA, True, _spec(t.spec)),
        Assign("j", add(Sym("j"), Sym("m"))),
    ), doc="one copy per run of rows at a constant GM stride"),)


def guard(t: GmRows, stmts) -> tuple:
    """Statements `stmts` of output t's queue (its Alloc, EnQue, CopyOut) or of an optional input's copy from GM,
    inside If(t.guard), a presence guard (kir.If.guard), when t is written or read under some presences of the
    optional inputs only (GmRows.guard):
    an absent operand's GM is never touched, as the Compute stores or reads it only under that condition
    (opgen.kernel.rowclass.guarded); `stmts` itself otherwise."""
    stmts = tuple(stmts)
    if not t.guard or not stmts:
        return stmts
    return (If(t.guard, stmts, doc=t.guard_doc, guard=True),)


def _store_out(t: GmRows, copy: tuple, enqueue: bool = False) -> tuple:
    """Output t's rows handed to MTE3 and stored, inside `guard(t)`: with `enqueue` its buffer rowOut_<operand>
    enqueued first; then a buffer of rowOutQue_<operand> dequeued as LocalTensor t, copied to GM by `copy` (the
    statements storing from t: _copy_rows_out, _col_copy_out) and freed."""
    q = f"rowOutQue_{t.op}"
    head = (EnQue(q, f"rowOut_{t.op}"),) if enqueue else ()
    return guard(t, head + (Scope((DeQue("t", q, t.ctype),) + tuple(copy) + (Free(q, "t"),)),))


def _alloc_guarded(body: tuple, t: GmRows) -> tuple:
    """`body` with output t's AllocTensor placed before its first write (alloc_before_first_use); a guarded output's
    (GmRows.guard) in its own If before the first top-level statement naming it, so the branches of the If that
    hold the write leave the queue as the guard's other path does."""
    alloc = Alloc(f"rowOut_{t.op}", f"rowOutQue_{t.op}", t.ctype)
    if not t.guard:
        return alloc_before_first_use(body, f"rowOut_{t.op}", alloc)
    first = min((k for k, st in enumerate(body) if mentions(st, f"rowOut_{t.op}")), default=len(body))
    return tuple(body[:first]) + guard(t, (alloc,)) + tuple(body[first:])


def _stat_out_bytes(t: GmRows) -> DimExpr:
    """Bytes a row of per-row output t's queue holds: its element (8 for int64), at least the fp32 it is staged in
    (opgen.kernel.rowcounts.RowCounts.stat_out_words, which the tiling's plan counts the same)."""
    return Lit(8) if t.ctype == "int64_t" else SizeOf("float")


def stage_bytes(stage: tuple) -> DimExpr:
    """Bytes of paramQue's element: `stage` = (the largest fixed size or None, the C types of the dtype variables
    staged), opgen.kernel.rowcounts.stage_element's rule, which the tiling's plan follows too
    (opgen.tiling.rowkernel `_fixed_plan`)."""
    top, params = stage
    out = None if top is None else Lit(top)
    for t in params:   # template parameters: their sizes at run time
        out = SizeOf(t) if out is None else Fn("max", (out, SizeOf(t)))
    return out


def _fixed_buffers(s: RowSchedule, bufs: dict, batch: bool = False, stage: tuple = (4, ()),
                   whole_cols: bool = False) -> tuple:
    """A strategy's fixed UB buffers (`bufs`: only those it reads) and the views into them; with `batch` (ROW_SPLIT's
    `row_segments`) each row temporary holds the pass's rows (`pass` rows of rowStride_); with `whole_cols` each
    column row holds the whole row (colAlign_ elements; ROW_CHUNK with resident rows points colv_ at a chunk of it)
    unless the tiling field colChunkLoads is 1 (then one chunk, rowStride_, reloaded per chunk: `_chunk_head`);
    paramQue's element is `stage_bytes(stage)`."""
    out: list = []
    f4 = SizeOf("float")
    rows = (("workBuf", "w_", s.temps), ("browBuf", "brow_", s.nbrow), ("colBuf", "colv_", s.ncol))
    for buf, arr, n in rows:
        if bufs.get(buf):
            if buf == "workBuf":   # the strategy's count (opgen.kernel.rowcounts.fixed_needs)
                n = bufs[buf]
            per = mul(Sym("pass"), Sym("rowStride_")) if batch and buf == "workBuf" else \
                (_RES_COL_LEN if s.load_cols else _COLA) if whole_cols and buf == "colBuf" else Sym("rowStride_")
            out.append(InitBuffer(f"{buf}_", mul(n, per, f4)))
            out.append(For("j", Lit(0), Lit(n), Lit(1), (
                Get(arr, f"{buf}_", "float", mul(Sym("j"), per), slot=Sym("j")),)))
            if s.zero_fill:   # lanes past the row are written once: a compare / select covers whole repeats
                out.append(For("j", Lit(0), Lit(n), Lit(1), (
                    vec(Op.DUPLICATE, dst=Ref(arr, slot=Sym("j")), scalar=FConst(0.0), count=per),),
                    doc="the lanes a compare or select reads past the row hold defined values"))
    for q in ("paramQue", "accOutQue"):
        if bufs.get(q):
            out.append(InitBuffer(f"{q}_", mul(Sym("rowStride_"), stage_bytes(stage) if q == "paramQue" else f4), 1))
    if bufs.get("reduceBuf"):
        # ReduceMax's temporary: one (value, index) pair per 256-B repeat, a block aligned, after 8 result floats
        pairs = mul(div(add(Sym("rowStride_"), 63), 64), 2)
        out.append(InitBuffer("reduceBuf_", mul(add(_align8(pairs), 8), f4)))
        out.append(Get("red_", "reduceBuf_", "float"))
        out.append(View("redTmp_", Ref("red_", Lit(8))))
    return tuple(out)


def _align8(e) -> DimExpr:
    return Fn("align_up", (as_dim(e), Lit(8)))


def _row_split(s: RowSchedule) -> Func:
    ps = Sym("pass")
    f4 = SizeOf("float")
    body: list = [
        Assign("rowStart_", Invoke("RowStartOf", (BLOCK_IDX,))),
        Assign("rowEnd_", Invoke("RowStartOf", (add(BLOCK_IDX, 1),))),
        Assign("c0_", Lit(0)),
        # a narrow program (rowprog.narrow_rows): its UB rows are the accumulated lanes, not the row
        Assign("n_", Fn("min", (_HID, Lit(NARROW_LANES))) if s.narrow else _HID),
        Assign("rowStride_", Fn("min", (_COLA, Lit(NARROW_LANES))) if s.narrow else _COLA),
        Let("pass", Sym("rowsPerPass")),
    ]
    queues = [(f"rowInQue_{t.op}", t.ctype) for t in s.row_in] + [(f"rowOutQue_{t.op}", t.ctype) for t in s.row_out]

    def inits(n: int) -> tuple:
        return tuple(InitBuffer(q, mul(ps, _COLA, SizeOf(ct)), n) for q, ct in queues)

    why = ("one buffer per row queue where two would leave fewer rows a pass (each input freed after its last read, "
           "each output allocated before its first write: Compute)")
    pool = ("one buffer per row queue: two would hold more event ids than the TPipe's pool (the tiling's rowQueBufs "
            "is 1; docs/design.md \"Event ids of the queues\")")
    if queues and not s.row_in and s.pool_bound:
        body += [Comment(pool)] + list(inits(1))
    elif queues and not s.row_in:   # buffers per row queue: the tiling's rowQueBufs (opgen.tiling.rows.row_split)
        body.append(If((Constraint("==", Sym("rowQueBufs"), Lit(1)),), inits(1), inits(2), doc=why))
    body += [InitBuffer(g.queue, g.bytes(_align8(ps)), 2) for g in stat_groups(s)]
    body += [x for g in stat_out_groups(s) for x in g.inits(_align8(ps))]
    body += list(_fixed_buffers(s, s.bufs, bool(s.row_segments), s.stage))
    if s.reduce_segments:   # RowsSum / RowsMax: a [pass, 64] scratch and one value per row of each row reduction
        scratch = (InitBuffer("rowsRedBuf_", mul(ps, 64, f4)), Get("rowsRed_", "rowsRedBuf_", "float"))
        body.append(If(ROWS_REDUCE_STRIDE, (
            *(scratch if s.block_segments else (If((Constraint(">", Sym("rowStride_"), Lit(64)),), scratch,
                                                   doc="rows longer than one repeat fold into the scratch "
                                                       "(RowsSum / RowsMax)"),)),
            InitBuffer("rowValBuf_", mul(s.nsums, _align8(ps), f4)),
            For("j", Lit(0), Lit(s.nsums), Lit(1), (
                Get("rv_", "rowValBuf_", "float", mul(Sym("j"), _align8(ps)), slot=Sym("j")),))),
            doc="rows RowsSum / RowsMax can take (ROWS_REDUCE_FITS)"))
    if s.ws_rows_per_core is not None:
        body.append(Assign("wsRowsPerCore_", Lit(s.ws_rows_per_core)))
    if s.load_cols:
        body.append(Call("LoadColumns"))
    body += [Assign("curBatch_", Lit(-1)), Assign("valBatch_", Lit(-1))]
    if not s.row_in:   # CopyIn fills statistic queues only (two buffers each): every pass prefetched
        return Func("RowSplit", (), tuple(body + _passes(s, True) + _after(s)))
    # the row queues initialised with the passes that use them: where they have two buffers the next pass is copied
    # in before this one is computed (pass_loop), where one, right before its own work
    after = [] if s.acc_body else _after(s)   # a two-pass kernel's exchange lies between its passes
    if s.pool_bound:
        body += [Comment(pool)] + list(inits(1)) + list(_passes(s, False))
    else:
        body.append(If((Constraint("==", Sym("rowQueBufs"), Lit(1)),),
                       inits(1) + tuple(_passes(s, False, fetch=fetch_loop(s))),
                       inits(2) + tuple(_passes(s, True)), doc=why))
    return Func("RowSplit", (), tuple(body + after))


def _after(s: RowSchedule) -> list:
    """After a one-pass ROW_SPLIT's passes: the last batch's flush and the cross-core exchange."""
    out: list = []
    if s.flush_row:
        out.append(If((Constraint(">=", Sym("curBatch_"), Lit(0)),), (Call("FlushRow"),)))
    return out + list(s.cross_core)


def fetch_loop(s: RowSchedule) -> bool:
    """Whether ROW_SPLIT's one-buffer pass loop (rowQueBufs 1) lets Compute issue the next pass's copy-in
    (ComputeFetch, `pass_loop` with fetch): a one-pass kernel with row inputs (a two-pass kernel's Accumulate holds
    its inputs to its end) whose row queues are not held to one buffer by the event-id pool."""
    return fetches_next_pass(bool(s.row_in), bool(s.acc_body), s.pool_bound)


def _passes(s: RowSchedule, prefetch: bool, fetch: bool = False) -> list:
    """RowSplit's passes over this core's rows after its buffers (pass_loop: prefetched, fetched by ComputeFetch
    or neither), with a two-pass kernel's exchange between them (a one-pass kernel's flush and exchange follow:
    `_after`)."""
    body: list = []
    if s.acc_body:   # the first pass over this core's rows accumulates; the exchange completes the reductions
        body += pass_loop(s, prefetch, (Call("Accumulate", (Sym("r0"), _K)),),
                          "first pass: the reductions over rows")
        if s.flush_row:
            body.append(If((Constraint(">=", Sym("curBatch_"), Lit(0)),), (Call("FlushRow"),)))
        body += list(s.cross_core)
        if not (s.row_out or s.stat_out):   # only column values read them: no second pass over the rows
            if s.batch_stores:   # per-batch outputs only: each batch whose first row is this core's, read back
                first = div(add(Sym("rowStart_"), sub(Sym("seqLen_"), 1)), Sym("seqLen_"))
                last = div(add(Sym("rowEnd_"), sub(Sym("seqLen_"), 1)), Sym("seqLen_"))
                body.append(For("b", first, last, Lit(1), tuple(s.reload_batch),
                                doc="the per-batch values of the batches starting in this core's rows"))
            return body
        body.append(Assign("valBatch_", Lit(-1)))
    loop: list = [Call("ComputeFetch" if fetch else "Compute", (Sym("r0"), _K))]
    if s.row_out or s.stat_out:
        loop.append(Call("CopyOut", (Sym("r0"), _K)))
    body += pass_loop(s, prefetch, tuple(loop),
                      "second pass: the per-row arithmetic reading them complete" if s.acc_body else "", fetch)
    return body


def _take_in(s: RowSchedule) -> tuple:
    """The DeQue of every queue CopyIn fills (a pass's row and statistic inputs, into their member tensors
    rowIn_<operand> / statIn_<operand>): issued by the pass loop before its Compute / Accumulate reads them."""
    return tuple([DeQue(f"rowIn_{t.op}", f"rowInQue_{t.op}", t.ctype) for t in s.row_in]
                 + [x for g in stat_groups(s) for x in (DeQue(g.tensor, g.queue, g.dtype),) + g.views(ROW_STAT_STRIDE)])


def _copy_in_queues(s: RowSchedule) -> tuple:
    """(queue, element type) of every queue CopyIn fills."""
    return tuple([(f"rowInQue_{t.op}", t.ctype) for t in s.row_in] + [(g.queue, g.dtype) for g in stat_groups(s)])


def pass_loop(s: RowSchedule, prefetch: bool, work: tuple, doc: str = "", fetch: bool = False) -> list:
    """ROW_SPLIT's loop over this core's rows [rowStart_, rowEnd_), `pass` rows an iteration (k the last one's
    fewer): `work` (the Compute / Accumulate and CopyOut calls of the pass at r0, k), printed once. Where CopyIn
    fills queues, each pass's rows are copied in (CopyIn(r0, k)) and dequeued (`_take_in`) before its work. With
    `prefetch` (every queue CopyIn fills has two buffers) the loop is software-pipelined (docs/design.md
    "Copy/compute overlap", the prefetched pass): the first pass is copied in before the loop; each iteration
    dequeues this pass's buffers, then issues the next pass's CopyIn (rowNext = r0 + pass, nothing copied past
    rowEnd_: CopyIn copies k > 0 rows only), then this pass's work -- so the copy-in of pass i + 1 is issued before
    the scalar unit waits in Compute(i) and runs beside it. This pass's buffer is dequeued before the next one is
    enqueued, so a queue never holds more than one enqueued buffer (TQue depth 1, docs/reference/ascendc.md §1.5:
    double buffering is the InitBuffer count, not the depth) and at most two are allocated: pass i's, dequeued, and
    pass i + 1's; Compute(i) frees pass i's before CopyIn(i + 2) allocates again. The buffer enqueued past the last
    pass (nothing copied into it) is dequeued and freed after the loop, so each iteration and the whole leave the
    queues as they found them (the Kernel IR's verifier). Without `prefetch` each pass is copied in right before
    its work (a queue of one buffer cannot hold the next pass while this one is computed), unless `fetch` (one
    buffer a row queue, `work` calling ComputeFetch, `_compute`): the first pass is copied in before the loop, each
    iteration dequeues its buffers and runs its work, whose ComputeFetch issues the next pass's CopyIn right after
    it frees this pass's row inputs (the buffer each reuses; the statistics' queues have two buffers), and the
    buffers enqueued past the last pass are dequeued and freed after the loop. Returns the statements."""
    r0, lo, hi, ps = Sym("r0"), Sym("rowStart_"), Sym("rowEnd_"), Sym("pass")
    queues = _copy_in_queues(s)
    if not queues:
        return [For("r0", lo, hi, ps, tuple(work), tail="k", doc=doc)]
    take = _take_in(s)
    if fetch:   # one buffer a row queue: the next pass's CopyIn is issued by ComputeFetch (`_compute`)
        return [
            Call("CopyIn", (lo, Fn("min", (ps, sub(hi, lo))))),
            For("r0", lo, hi, ps, take + tuple(work), tail="k",
                doc=(doc + "; " if doc else "") + "the next pass's copy-in (none past rowEnd_) is issued inside "
                                                  "Compute right after it frees this pass's row inputs"),
            *(Scope((DeQue("t", q, ct), Free(q, "t"))) for q, ct in queues),
        ]
    if not prefetch:
        return [For("r0", lo, hi, ps, (Call("CopyIn", (r0, _K)),) + take + tuple(work), tail="k", doc=doc)]
    nxt = Sym("rowNext")
    return [
        Call("CopyIn", (lo, Fn("min", (ps, sub(hi, lo))))),
        For("r0", lo, hi, ps, take + (
            Let("rowNext", add(r0, ps)),
            Call("CopyIn", (nxt, Fn("min", (ps, sub(hi, nxt))))),
        ) + tuple(work), tail="k", pipelined=True,
            doc=(doc + "; " if doc else "") + "the next pass's copy-in (none past rowEnd_) runs beside this pass's "
                                              "compute"),
        *(Scope((DeQue("t", q, ct), Free(q, "t"))) for q, ct in queues),
    ]


def _gather_stat(t: GmRows, at: DimExpr, dst: Ref = Ref("t")) -> For:
    """The per-row values of the k rows of a CopyIn (`j` the row within them, `at` its GM element offset) read by the
    scalar unit from GM tensor gm_<gm> and converted to float into the statistic buffer at `dst` (layout "gather": a
    weight over some leading axes, or a statistic of another dtype than fp32)."""
    cite = f"; {_spec(t.spec)}" if t.spec else ""
    return For("j", Lit(0), _K, Lit(1), (SetValue(Ref(dst.tensor, add(dst.offset, Sym("j")) if dst.offset != Lit(0)
                                                      else Sym("j")), FLoad(GmView(f"gm_{t.gm}", at))),),
               doc=f"{t.op}: one value per row at its coordinates{cite}")


def _qtype(t) -> str:
    """The element type of a per-row input's UB queue: float for one the scalar unit gathers and converts (layout
    "gather"), else the tensor's own type (fp32 statistics, int32 / int64 indices copied as they are)."""
    return "float" if t.layout == "gather" else t.ctype


@dataclass(frozen=True)
class StatGroup:
    """The per-row statistic inputs of one queue element type (`dtype`, `_qtype`), in s.stat_in order: one VECIN
    queue `queue` whose buffer holds each member's values one after another, `stride` elements apart (the group's
    aligned row count: align_up(pass, 8) in ROW_SPLIT, groupStride_ in the column strategies), dequeued as tensor
    `tensor`; member j is the view statIn_<op> at element j * stride. A group of one member keeps its own names
    (statInQue_<op>, statIn_<op>) and has no view. Why one queue (docs/design.md "Event ids of the queues"): a
    queue buffer freed and not yet allocated again holds one id of its hand-off's HardEvent from the TPipe's pool of
    8, and after a pass loop every buffer of every queue is freed; one queue per statistic kept LayerNormGradV3's
    ROW_SPLIT at 9 VECIN buffers (V_MTE2 ids)."""

    queue: str
    tensor: str
    dtype: str
    members: tuple   # GmRows

    def views(self, stride) -> tuple:
        """statIn_<op> = the group's tensor at member j's offset (none for a group of one)."""
        if len(self.members) == 1:
            return ()
        return tuple(View(f"statIn_{t.op}", Ref(self.tensor, _member_at(j, stride)))
                     for j, t in enumerate(self.members))

    def bytes(self, stride) -> DimExpr:
        """One buffer: every member's `stride` elements."""
        return mul(Lit(len(self.members)), stride, SizeOf(self.dtype)) if len(self.members) > 1 else \
            mul(stride, SizeOf(self.dtype))

    def at(self, j: int, stride) -> Ref:
        """Member j's values in the allocated buffer `t`."""
        return Ref("t", _member_at(j, stride))


def _member_at(j: int, stride) -> DimExpr:
    return Lit(0) if j == 0 else stride if j == 1 else mul(Lit(j), stride)


ROW_STAT_STRIDE = Fn("align_up", (Sym("rowsPerPass"), Lit(8)))
"""ROW_SPLIT's StatGroup stride: the pass's rows, aligned to a 32-B block of fp32 (CopyIn and the pass loop name the
tiling field, RowSplit's `pass` is the same value)."""


def stat_groups(s: RowSchedule) -> tuple:
    """The StatGroups of s.stat_in: one per queue element type, in the order of their first member."""
    by: dict = {}
    for t in s.stat_in:
        by.setdefault(_qtype(t), []).append(t)
    out = []
    for dt, ts in by.items():
        if len(ts) == 1:
            out.append(StatGroup(f"statInQue_{ts[0].op}", f"statIn_{ts[0].op}", dt, (ts[0],)))
        else:
            ops = "_".join(t.op for t in ts)
            out.append(StatGroup(f"statInQue_{ops}", f"statIn_{ops}", dt, tuple(ts)))
    return tuple(out)


@dataclass(frozen=True)
class StatOutGroup:
    """The per-row statistic outputs of one element type (`ctype`), in s.stat_out order: one VECOUT queue `queue`
    of two buffers, each holding every member's k values one after another; member j's values start j * stride
    rows of _stat_out_bytes into the buffer (stride: the group's aligned row count, ROW_STAT_STRIDE in ROW_SPLIT,
    groupStride_ in the column strategies and ROW_CHUNK; a row's bytes are at least the fp32 the value is staged
    in, `at`), so each member starts on a 32-B block and the buffer's bytes are the sum of the members' former
    queues'. A group of one member keeps its own queue statOutQue_<op> and its output's presence
    guard around the whole hand-off; a shared queue's AllocTensor / EnQue / DeQue / FreeTensor run always and each
    member's Cast and CopyOut under its own guard (GmRows.guard). Why one queue (docs/design.md "Event ids of the
    queues"): a freed VECOUT buffer holds one MTE3_V id of the TPipe's pool of 8 until its next AllocTensor, so three
    statistic outputs of their own queues beside two row outputs held 10."""

    queue: str
    ctype: str
    members: tuple   # GmRows

    def at(self, j: int, stride) -> Ref:
        """Member j's values in the allocated buffer `t`: j * stride rows of _stat_out_bytes, in elements of
        `ctype` (a template type's size is known to the C++ only: sizeof(T)); with several members, part j of the
        buffer cut into one part per member (kir.Ref.part: its k <= stride rows stay inside it, so the dependency
        pass orders it apart from the others without comparing run-time offsets)."""
        n = len(self.members)
        part = (j, n) if n > 1 else None
        if j == 0:
            return Ref("t", Lit(0), part=part)
        words = _stat_out_words(self.members[0])
        if self.ctype in ELEM_BYTES:
            ratio = words * 4 // ELEM_BYTES[self.ctype]
            return Ref("t", _member_at(j, stride) if ratio == 1 else mul(Lit(j * ratio), stride), part=part)
        return Ref("t", div(mul(Lit(j * words * 4), stride), SizeOf(self.ctype)), part=part)

    def bytes(self, stride) -> DimExpr:
        """One buffer: every member's `stride` rows of _stat_out_bytes."""
        n = len(self.members)
        return mul(Lit(n), stride, _stat_out_bytes(self.members[0])) if n > 1 else \
            mul(stride, _stat_out_bytes(self.members[0]))

    def inits(self, stride) -> list:
        """Each member's fp32 staging buffer (`stride` rows) and the group's queue of two buffers."""
        return ([InitBuffer(f"statStageBuf_{t.op}", mul(stride, SizeOf("float"))) for t in self.members]
                + [InitBuffer(self.queue, self.bytes(stride), 2)])

    def _each(self, stmts) -> tuple:
        """stmts(j, t) of every member, each under its output's guard in a shared queue (a group of one: the
        guard is around the whole hand-off, `_scope`)."""
        if len(self.members) == 1:
            return tuple(stmts(0, self.members[0]))
        return tuple(x for j, t in enumerate(self.members) for x in guard(t, stmts(j, t)))

    def _scope(self, body: tuple) -> tuple:
        return guard(self.members[0], (Scope(body),)) if len(self.members) == 1 else (Scope(body),)

    def _cast(self, stride) -> tuple:
        return ((Alloc("t", self.queue, self.ctype),) + self._each(lambda j, t: (
            vec(Op.CAST_TO, dst=self.at(j, stride), src=Ref(f"statStage_{t.op}"), mode=t.rm, count=_K,
                doc=_spec(t.spec)),)) + (EnQue(self.queue, "t"),))

    def _copy(self, stride, off: str) -> tuple:
        return ((DeQue("t", self.queue, self.ctype),) + self._each(lambda j, t: (
            Copy(GmView(f"gm_{t.gm}", getattr(t, off)), self.at(j, stride), Lit(1), mul(_K, SizeOf(t.ctype)),
                 doc=_spec(t.spec)),)) + (Free(self.queue, "t"),))

    def cast_in(self, stride) -> tuple:
        """AllocTensor, each member's staged fp32 (statStage_<op>, k rows) cast to its type at its offset, EnQue."""
        return self._scope(self._cast(stride))

    def copy_out(self, stride, off: str) -> tuple:
        """DeQue, each member's k values copied to GM at its row offset (GmRows attribute `off`: off_r0 / off_g0),
        FreeTensor."""
        return self._scope(self._copy(stride, off))

    def both(self, stride, off: str, when: tuple = ()) -> tuple:
        """cast_in then copy_out in one scope (the column strategies and ROW_CHUNK: once per group of rows), inside
        If(when) when given (the core and chunk that write the statistics)."""
        body = self._cast(stride) + self._copy(stride, off)
        if not when:
            return self._scope(body)
        return guard(self.members[0], (If(when, body),)) if len(self.members) == 1 else (If(when, body),)


def _stat_out_words(t: GmRows) -> int:
    """4-byte words a row of output t takes in its queue (_stat_out_bytes / 4)."""
    return 2 if t.ctype == "int64_t" else 1


def stat_out_groups(s: RowSchedule) -> tuple:
    """The StatOutGroups of s.stat_out: one per element type, in the order of their first member; the queue of
    group g of several members is statOutQue<g>_<op>_<op>..., of one member statOutQue_<op>."""
    by: dict = {}
    for t in s.stat_out:
        by.setdefault(t.ctype, []).append(t)
    # a shared queue's name starts statOutQue<g>_ (g: the group's index): a digit no output's own statOutQue_<op>
    # has, so no output name (mean_rstd beside a mean and an rstd) or other split of the joined names repeats it
    return tuple(StatOutGroup(f"statOutQue_{ts[0].op}" if len(ts) == 1 else
                              f"statOutQue{g}_{'_'.join(t.op for t in ts)}", ct, tuple(ts))
                 for g, (ct, ts) in enumerate(by.items()))


def _stat_copy(t, dst: Ref, at: DimExpr, off: DimExpr):
    """Statistic `t`'s k values (from GM element `off`, or gathered at `at`) into `dst` of the allocated buffer."""
    if t.layout == "gather":
        return _gather_stat(t, at, dst)
    return Copy(dst, GmView(f"gm_{t.gm}", off), Lit(1), mul(_K, SizeOf(t.ctype)), doc=_spec(t.spec),
                pad_value=FConst(0.0) if t.ctype == "float" else None)


def _stat_frees(s: RowSchedule) -> list:
    """The FreeTensor of every statistic queue's dequeued tensor."""
    return [Free(g.queue, g.tensor) for g in stat_groups(s)]


def _copy_in(s: RowSchedule) -> Func:
    """ROW_SPLIT's CopyIn of the k rows at r0: a buffer of every queue it fills allocated, the rows copied into it
    (none when k <= 0: the prefetching pass loop's copy past the core's last row, `pass_loop`) and enqueued."""
    body: list = []
    some = (Constraint(">", _K, Lit(0)),)
    for t in s.row_in:
        body.append(Scope((Alloc("t", f"rowInQue_{t.op}", t.ctype), If(some, _copy_rows_in(t)),
                           EnQue(f"rowInQue_{t.op}", "t"))))
    for g in stat_groups(s):
        body.append(Scope((
            Alloc("t", g.queue, g.dtype),
            If(some, tuple(_stat_copy(t, g.at(j, ROW_STAT_STRIDE), t.at, t.off_r0)
                           for j, t in enumerate(g.members))),
            EnQue(g.queue, "t"))))
    return Func("CopyIn", (Param("r0"), Param("k")), tuple(body))


def _accumulate(s: RowSchedule) -> Func:
    """The first pass of a two-pass ROW_SPLIT (RowSchedule.acc_body): the rows' accumulates, no outputs (its inputs
    dequeued by the pass loop, `pass_loop`)."""
    body: list = []
    row: list = []
    if s.batch_index:
        row += _batch_steps(s, Sym("r0"), "FlushRow" if s.flush_row else None)
    row += list(s.acc_body)
    body.append(For("i", Lit(0), _K, Lit(1), tuple(row)))
    body += [Free(f"rowInQue_{t.op}", f"rowIn_{t.op}") for t in s.row_in]
    body += _stat_frees(s)
    return Func("Accumulate", (Param("r0"), Param("k")), tuple(body))


def free_after_last_use(stmts: tuple, name: str, free) -> tuple:
    """`stmts` with statement `free` (the FreeTensor of tensor `name`) placed right after the last statement naming
    `name`: inside an If that is the last to name it, after the last use in each branch (at the start of a branch
    that names it not); at the start of `stmts` when none does. A loop naming it is not entered (after the loop).
    The buffer's lifetime in the pass ends at its last read, so the next pass's copy-in into it may start then
    (a queue of one buffer: opgen.tiling.rows.row_split)."""
    last = max((k for k, st in enumerate(stmts) if mentions(st, name)), default=None)
    if last is None:
        return (free,) + tuple(stmts)
    st = stmts[last]
    if isinstance(st, If) and not mentions(st.cond, name):
        st = dataclasses.replace(st, then=free_after_last_use(st.then, name, free),
                                 orelse=free_after_last_use(st.orelse, name, free))
        return tuple(stmts[:last]) + (st,) + tuple(stmts[last + 1:])
    return tuple(stmts[:last + 1]) + (free,) + tuple(stmts[last + 1:])


MAX_OVERLAP_PATHS = 4096
"""Paths through a Compute's ifs that `queue_overlap` follows at most (beyond them: no overlap assumed).
LayerNormGradV3's Compute has between 256 and 1024 (its three forms, the column sums' halving branches), walked in
about 0.02 s."""


def queue_overlap(compute: Func, methods: tuple = ()) -> tuple:
    """Where a pass's row queues change hands inside ROW_SPLIT's Compute `compute` (a Func of the Kernel IR, as
    `_compute` builds it), as fractions of the pass's vector instructions: (a, b, s), Fractions in [0, 1].
      a = the vector instructions issued before the FreeTensor of a row input queue (rowInQue_*), the latest over
          the inputs: a queue of one buffer lets the next pass's copy-in start there, no earlier;
      b = the vector instructions issued before the AllocTensor of a row output queue (rowOutQue_*), the earliest
          over the outputs: with one buffer this pass waits there for the previous pass's copy-out;
      s = the vector instructions issued before the last scalar read (GetValue) of a tensor a vector instruction of
          the pass wrote: the scalar unit waits there for PIPE_V (a V_S flag), and the next pass's copy-in, issued
          after this Compute in program order, cannot start earlier whatever the buffers (0 without one).
    Vector instructions are the Vec statements on PIPE_V, each counted once (a loop's body once: the row loop of a
    pass that runs row by row holds its inputs throughout, a = 1, b = 0); a Call of one of `methods` (Funcs) is
    followed into its body, and writes the tensors it is passed. Each if's branches are followed apart (up to MAX_OVERLAP_PATHS paths; beyond that, or
    with no vector instruction, (1, 0, 1): no overlap), a and s the largest and b the smallest over the paths. The
    cost of a queue of that depth: opgen.platforms.cost.pass_cycles (docs/design.md "Copy/compute overlap")."""
    from fractions import Fraction

    by_name = {m.name: m for m in methods}

    def paths(stmts, depth=0) -> list:
        out = [[]]
        for st in stmts:
            if isinstance(st, Vec):
                dst = dict(st.args).get("dst")
                wrote = [("wrote", dst.tensor)] if isinstance(dst, Ref) else []
                ev = [["V"] + wrote] if INSTRS[st.op].pipe == Pipe.V else [[]]
            elif isinstance(st, GetValue) and isinstance(st.src, Ref):
                ev = [[("read", st.src.tensor)]]
            elif isinstance(st, Free) and st.queue.startswith("rowInQue_"):
                ev = [[("free", st.queue)]]
            elif isinstance(st, Alloc) and st.queue.startswith("rowOutQue_"):
                ev = [[("alloc", st.queue)]]
            elif isinstance(st, If):
                ev = paths(st.then, depth) + paths(st.orelse, depth)
            elif isinstance(st, (For, Scope)):
                ev = paths(st.body, depth)
            elif isinstance(st, Call) and st.method in by_name and depth < 4:
                # the callee's vector instructions write through its tensor parameters: the tensors passed
                args = [("wrote", r.tensor) for r in st.args if isinstance(r, Ref)]
                ev = [p + args for p in paths(by_name[st.method].body, depth + 1)]
            else:
                continue
            out = [p + e for p in out for e in ev]
            if len(out) > MAX_OVERLAP_PATHS:
                raise OverflowError
        return out

    try:
        every = paths(compute.body)
    except OverflowError:
        return Fraction(1), Fraction(0), Fraction(1)
    a, b, s = Fraction(0), Fraction(1), Fraction(0)
    for path in every:
        n = sum(1 for e in path if e == "V")
        if not n:
            return Fraction(1), Fraction(0), Fraction(1)
        seen, written = 0, set()
        for e in path:
            if e == "V":
                seen += 1
            elif e[0] == "wrote":
                written.add(e[1])
            elif e[0] == "read":
                if e[1] in written:
                    s = max(s, Fraction(seen, n))
            elif e[0] == "free":
                a = max(a, Fraction(seen, n))
            else:
                b = min(b, Fraction(seen, n))
    return a, b, s


def alloc_before_first_use(stmts: tuple, name: str, alloc) -> tuple:
    """`stmts` with statement `alloc` (the AllocTensor of tensor `name`) placed right before the first statement
    naming `name` (inside an If that is the first to name it, before the first use in each branch, at the end of a
    branch that names it not; at the end of `stmts` when none does): the output buffer's lifetime in the pass
    starts at its first write, so the previous pass's copy-out from it may run until then."""
    first = min((k for k, st in enumerate(stmts) if mentions(st, name)), default=None)
    if first is None:
        return tuple(stmts) + (alloc,)
    st = stmts[first]
    if isinstance(st, If) and not mentions(st.cond, name):
        st = dataclasses.replace(st, then=alloc_before_first_use(st.then, name, alloc),
                                 orelse=alloc_before_first_use(st.orelse, name, alloc))
        return tuple(stmts[:first]) + (st,) + tuple(stmts[first + 1:])
    return tuple(stmts[:first]) + (alloc,) + tuple(stmts[first:])


def _compute(s: RowSchedule, fetch: bool = False) -> Func:
    """ROW_SPLIT's Compute of a pass of k rows at r0 (its inputs dequeued by the pass loop, `pass_loop`): the per-row
    (or all-rows) instruction stream, the outputs enqueued. Each row input is freed right after its last read and each row output allocated
    right before its first write (`free_after_last_use`, `alloc_before_first_use`), so a queue of one buffer
    (rowQueBufs = 1) still lets the next pass's copy-in and this pass's copy-out run beside the compute. With
    `fetch`, ComputeFetch: the same, and the next pass's CopyIn (r0 + rowsPerPass) issued right after the last row
    input is freed (`after_frees`), so with one buffer a row queue that copy-in runs beside the rest of this pass's
    compute (docs/design.md "Copy/compute overlap")."""
    body: list = [Get(f"statStage_{t.op}", f"statStageBuf_{t.op}", "float") for t in s.stat_out]
    row: list = []
    if s.batch_index:   # a two-pass kernel flushes its batch sums in the first pass, reads them in the second
        row += _batch_steps(s, Sym("r0"), "FlushRow" if s.flush_row and not s.acc_body else None, bool(s.acc_body))
    if s.row_segments and not (s.batch_index and s.acc_body):   # instructions over all k rows, the others in
        #                                                            per-row loops
        plain = _segments(s.row_segments)
        if s.reduce_segments:
            plain = (If(ROWS_REDUCE_FITS, _segments(s.reduce_segments), plain,
                        doc="rows of at most 255 blocks, at most 255 rows: the row reductions over all rows"),)
        if s.block_segments:
            plain = (If(BLOCK_FITS, _segments(s.block_segments), plain,
                        doc="rows of at most 255 blocks, 2 to 255 rows a pass: eight rows a repeat"),)
        if s.batch_index:   # per-batch rows: the pass's rows one batch at a time
            plain = _batch_runs(s, plain)
        if s.packed_lanes:
            body.append(If((Constraint("==", Bin("%", Sym("n_"), Lit(s.packed_lanes)), Lit(0)),), plain,
                           (For("i", Lit(0), _K, Lit(1), tuple(row) + tuple(s.row_body)),),
                           doc=f"rows of whole {s.packed_lanes}-lane groups: no mask bit or word of a row's lanes "
                               "packed with its padding; else row by row"))
        else:
            body += list(plain)
    else:
        row += list(s.row_body)
        body.append(For("i", Lit(0), _K, Lit(1), tuple(row)))
    for t in s.row_out:
        body = list(_alloc_guarded(tuple(body), t))
    for t in s.row_out:
        body += guard(t, (EnQue(f"rowOutQue_{t.op}", f"rowOut_{t.op}"),))
    for og in stat_out_groups(s):
        body += og.cast_in(ROW_STAT_STRIDE)
    for t in s.row_in:
        body = list(free_after_last_use(tuple(body), f"rowIn_{t.op}", Free(f"rowInQue_{t.op}", f"rowIn_{t.op}")))
    if fetch:   # the next pass's rows into the buffers just freed (none past rowEnd_: CopyIn copies k > 0 only)
        nxt, ps = add(Sym("r0"), Sym("rowsPerPass")), Sym("rowsPerPass")
        body = list(after_frees(tuple(body), {f"rowInQue_{t.op}" for t in s.row_in},
                                Call("CopyIn", (nxt, Fn("min", (ps, sub(Sym("rowEnd_"), nxt)))))))
    body += _stat_frees(s)
    if fetch:   # printed as Compute<true> of one member template (kir.printed_methods)
        return Func("ComputeFetch", (Param("r0"), Param("k")), tuple(body), variant_of=("Compute", "fetchNext_"))
    return Func("Compute", (Param("r0"), Param("k")), tuple(body))


def _batch_runs(s: RowSchedule, segs: tuple) -> tuple:
    """ROW_SPLIT's Compute statements `segs` (the pass's segments over k rows, opgen.kernel.rowclass `_run_segments`:
    its queue buffers read from row b0) run once for each batch the pass's rows [r0, r0 + k) meet: rows [b0, b0 +
    kb) of batch b, after the batch bookkeeping (`_batch_steps`: the last batch flushed and the new one's sums
    zeroed, its batch rows loaded) that the per-row loop does at each row. Within a run every row reads the same
    batch rows, which the segments read as column rows (one UB row for every row: repeat or block stride 0) and
    accumulate into as column sums. Rows of one batch are contiguous (b = row / seqLen_), so a pass meets at most
    ceil(k / seqLen_) + 1 batches: one run where a batch holds many rows, k runs of one row where seqLen_ is 1."""
    b, seq, r0 = Sym("b"), Sym("seqLen_"), Sym("r0")
    run: list = [Let("b0", Fn("max", (sub(mul(b, seq), r0), Lit(0)))),
                 Let("kb", sub(Fn("min", (sub(mul(add(b, 1), seq), r0), _K)), Sym("b0")))]
    run += _batch_steps(s, None, "FlushRow" if s.flush_row else None, batch=b)
    run += list(_rename_k(tuple(segs)))
    return (For("b", div(r0, seq), div(add(r0, sub(_K, 1)), seq), Lit(1), tuple(run), inclusive=True,
                nonempty=True, doc="the pass's rows one batch at a time (rows b0 .. b0 + kb of the pass)"),)


def after_frees(stmts: tuple, queues: set, stmt) -> tuple:
    """`stmts` with `stmt` placed right after the last FreeTensor of any queue in `queues`: after the last statement
    holding one, inside it when that is an If (in each branch, by the same rule; at the start of a branch holding
    none). Frees are placed outside loops (`free_after_last_use`), so a loop is not entered."""
    def holds(st) -> bool:
        if isinstance(st, Free):
            return st.queue in queues
        if isinstance(st, If):
            return any(holds(x) for x in st.then + st.orelse)
        return isinstance(st, Scope) and any(holds(x) for x in st.body)
    last = max((k for k, st in enumerate(stmts) if holds(st)), default=None)
    if last is None:
        return (stmt,) + tuple(stmts)
    st = stmts[last]
    if isinstance(st, If):
        st = dataclasses.replace(st, then=after_frees(st.then, queues, stmt), orelse=after_frees(st.orelse, queues, stmt))
        return tuple(stmts[:last]) + (st,) + tuple(stmts[last + 1:])
    return tuple(stmts[:last + 1]) + (stmt,) + tuple(stmts[last + 1:])


ROWS_REDUCE_STRIDE = (Constraint("<=", Sym("rowStride_"), Lit(8 * 255)),)
"""Rows whose repeat stride (rowStride_ / 8 blocks) fits BinaryRepeatParams' uint8: RowsSum's buffers are allocated
(the tiling's UB plan counts them only then, opgen.tiling.rowkernel.row_plan)."""
ROWS_REDUCE_FITS = ROWS_REDUCE_STRIDE + (Constraint("<=", _K, Lit(255)),
                    Constraint("<", div(add(Sym("n_"), 63), 64), mul(2, _K)))
"""When RowsSum / RowsMax apply: a row's repeat stride (rowStride_ / 8 blocks) fits BinaryRepeatParams' uint8 and
the pass's rows fit one instruction's repeatTime (0..255; docs/reference/ascendc.md §1.9), and they cost less than
the row-by-row reductions by the cost model (docs/reference/kernel_cost.md §2): RowsSum issues at most
ceil(n_ / 64) + 1 instructions (ceil(n_ / 64) for rows of 128 lanes or more), each with a barrier (8 + 16 cycles),
row by row a reduction is two issues and a V->S wait (16 + 32 cycles) a row, so batching pays when
ceil(n_ / 64) < 2 k."""


BLOCK_FITS = ROWS_REDUCE_STRIDE + (Constraint("<=", _K, Lit(255)), Constraint(">=", Sym("rowsPerPass"), Lit(2)))
"""When the block segments run (RowSchedule.block_segments, opgen.kernel.rowclass._Printer.batch_segments with
`block`): a row's 32-byte blocks (rowStride_ / 8) fit BinaryRepeatParams' uint8 block stride and a repeatTime,
the scratch rowsRed_ is allocated (rowsPerPass * 64 floats wherever the block segments may run, rows of one
repeat or less too; the tiling's UB plan, opgen.tiling.rowkernel.row_plan) and holds the Brcb blocks and the per-row scalar slots (rowsPerPass >= 2,
rowclass.BLOCK_SLOTS), and the pass's rows fit WholeReduce's repeatTime. Eight rows a repeat issue ceil(k / 8)
instructions where the row by row loop issues k and the 64-lane chunks ceil(rowStride_ / 64); a repeat computes
8 lanes of each of its rows (of 64: the k rows' lanes in 8 k / 8 ceil(k / 8) of the repeats' lanes). Rows of one
repeat or less (rowStride_ <= 64) take them too: an op by a per-row scalar or an accumulation is then
ceil(k / 8) instructions of ceil(n_ / 8) repeats (or one chunk's), where row by row it is k of one."""


def _segments(segs) -> tuple:
    """ROW_SPLIT's Compute statements of `segs` (RowSchedule.row_segments): an "all" or "col" (column-row instructions
    chunk by chunk) segment as it is, a "row" one in the per-row loop over i < k."""
    out: list = []
    for kind, nodes in segs:
        out += [For("i", Lit(0), _K, Lit(1), tuple(nodes), disjoint=_rows_apart(nodes))] if kind == "row" \
            else list(nodes)
    return tuple(out)


def _rows_apart(nodes) -> bool:
    """Whether the iterations of a per-row loop over `nodes` (row `i` of the pass) touch disjoint 32-B blocks where
    one writes (kir.For.disjoint): every vector instruction covers the row's n_ columns of row i of its buffers (the
    offset exactly i * rowStride_: rows of a batched pass start on 32-byte blocks, and opgen.kernel.rowprog.batchable
    issues every packed value, a byte row's included, over all rows) and reads no data-dependent source (Gather), scalar reads and writes are at i
    (the scalar unit runs in order), and nothing else (a call: a row reduction's shared scratch) is in the loop."""
    row = as_dim(Bin("*", Sym("i"), Sym("rowStride_")))
    for x in walk(tuple(nodes)):
        if isinstance(x, Vec):
            count = dict(x.args).get("count")
            if x.op.name.startswith("GATHER") or count is None or as_dim(count) != Sym("n_"):
                return False   # a data-dependent source, or more than one row's columns
            for _name, r in x.args:
                if isinstance(r, Ref) and (r.offset is None or as_dim(r.offset) != row):
                    return False
        elif isinstance(x, (GetValue, SetValue)):
            r = x.src if isinstance(x, GetValue) else x.dst
            if r.offset is None or "i" not in as_dim(r.offset).symbols():
                return False
        elif not isinstance(x, (Let, FLet, Assign, FAssign, Comment, Barrier)):
            return False
    return True


def _rows_reduce(name: str, comb: Op, whole: Op) -> Func:
    """RowsSum / RowsMax(src, dst, k): the sum (maximum) of each of the k rows of row temporary `src` (rows
    rowStride_ apart, n_ lanes each) into dst[0 .. k), one value per row, no scalar read. A row of at most 64 lanes:
    one WholeReduceSum / WholeReduceMax with a repeat a row (srcRepStride rowStride_ / 8 blocks). A longer one: its
    first two 64-lane chunks combined into the [k, 64] scratch rowsRed_ (a row of 65 to 127 lanes: its first chunk
    copied, Max of the chunk with itself), each further 64-lane
    chunk combined into it (Add / Max, mask form with a repeat a row: the tail chunk's mask is its lanes, so pad
    lanes are never read), then one WholeReduce over the scratch. docs/reference/ascendc.md §1.9 (the mask / repeat
    forms, WholeReduceSum's dstRepStride in elements); the caller checks ROWS_REDUCE_FITS."""
    n, rs, k = Sym("n_"), Sym("rowStride_"), Sym("k")
    R = div(rs, 8)
    acc = Ref("rowsRed_")
    full, tail = div(n, 64), Bin("%", n, Lit(64))
    return Func(name, (Param("src", "tensor", "float"), Param("dst", "tensor", "float"), Param("k")), (
        If((Constraint("<=", n, Lit(64)),), (
            vec(whole, dst=Ref("dst"), src=Ref("src"), mask=n, repeat=k, dstRep=Lit(1), srcBlk=Lit(1), srcRep=R),),
           (If((Constraint(">=", n, Lit(128)),), (
                vec(REPEAT_FORMS[comb], dst=acc, src0=Ref("src"), src1=Ref("src", Lit(64)), mask=Lit(64), repeat=k,
                    params=(Lit(1), Lit(1), Lit(1), Lit(8), R, R), doc="the first two 64-lane chunks of each row"),),
                (vec(REPEAT_FORMS[Op.MAX], dst=acc, src0=Ref("src"), src1=Ref("src"), mask=Lit(64), repeat=k,
                     params=(Lit(1), Lit(1), Lit(1), Lit(8), R, R), doc="the first 64 lanes of each row"),)),
            For("c", Fn("min", (Lit(2), full)), full, Lit(1), (
                vec(REPEAT_FORMS[comb], dst=acc, src0=acc, src1=Ref("src", mul(Sym("c"), 64)), mask=Lit(64),
                    repeat=k, params=(Lit(1), Lit(1), Lit(1), Lit(8), Lit(8), R)),)),
            If((Constraint(">", tail, Lit(0)),), (
                vec(REPEAT_FORMS[comb], dst=acc, src0=acc, src1=Ref("src", mul(full, 64)), mask=tail, repeat=k,
                    params=(Lit(1), Lit(1), Lit(1), Lit(8), Lit(8), R), doc="the tail chunk: its lanes only"),)),
            vec(whole, dst=Ref("dst"), src=acc, mask=Lit(64), repeat=k, dstRep=Lit(1), srcBlk=Lit(1), srcRep=Lit(8)))),
    ), doc=f"{'Sum' if comb is Op.ADD else 'Maximum'} of each of the k rows of src (n_ lanes, rowStride_ apart) into "
           "dst[0 .. k).")


def _rows_reduce_blocks(name: str, comb: Op, whole: Op, fallback: str) -> Func:
    """RowsSumB / RowsMaxB(src, dst, k): the sum (maximum) of each of the k rows of row temporary `src` (rows
    rowStride_ apart, n_ lanes each) into dst[0 .. k), eight rows a repeat (block stride rowStride_ / 8). For each
    group of eight rows: each row's first 32-byte block copied into its block of the scratch rowsRed_ (Max of the
    block with itself), then its further column blocks combined into it by one mask / repeat-form Add / Max with
    the scratch's repeat stride 0 (a repeat a column block; src1 reads what the earlier repeat wrote: the device's
    accumulation exception, docs/reference/ascendc.md §1.9 operand rules); then one WholeReduce of 8 lanes a row over
    all k rows. 2 ceil(k / 8) + 1 instructions; lane l of a row combines its elements l, l + 8, ... in order, then
    the 8 lanes by WholeReduce's halving tree. Rows of whole blocks only (n_ % 8 == 0: a block's pad lanes are never
    read) longer than one repeat; other rows by `fallback` (RowsSum / RowsMax: a row of at most 64 lanes in one
    WholeReduce). The caller checks BLOCK_FITS."""
    n, rs, k, g = Sym("n_"), Sym("rowStride_"), Sym("k"), Sym("g")
    R = div(rs, 8)
    acc = Ref("rowsRed_", mul(g, 64))
    rows = Ref("src", mul(g, 8, rs))
    mask = mul(8, Fn("min", (Lit(8), sub(k, mul(g, 8)))))
    return Func(name, (Param("src", "tensor", "float"), Param("dst", "tensor", "float"), Param("k")), (
        If((Constraint("==", Bin("%", n, Lit(8)), Lit(0)), Constraint(">", n, Lit(64))), (
            For("g", Lit(0), div(add(k, 7), 8), Lit(1), (
                vec(REPEAT_FORMS[Op.MAX], dst=acc, src0=rows, src1=rows, mask=mask, repeat=Lit(1),
                    params=(Lit(1), R, R, Lit(8), Lit(8), Lit(8)), doc="each row's first block"),
                vec(REPEAT_FORMS[comb], dst=acc, src0=Ref("src", add(mul(g, 8, rs), 8)), src1=acc, mask=mask,
                    repeat=sub(div(n, 8), 1), params=(Lit(1), R, Lit(1), Lit(0), Lit(1), Lit(0)),
                    doc="each further column block combined into it"),
            ), doc="eight rows a repeat", disjoint=True),
            vec(whole, dst=Ref("dst"), src=Ref("rowsRed_"), mask=Lit(8), repeat=k, dstRep=Lit(1), srcBlk=Lit(1),
                srcRep=Lit(1))),
           (Call(fallback, (Ref("src"), Ref("dst"), k)),)),
    ), doc=f"{'Sum' if comb is Op.ADD else 'Maximum'} of each of the k rows of src (n_ lanes, rowStride_ apart) into "
           "dst[0 .. k), eight rows a repeat.")


def _copy_out(s: RowSchedule) -> Func:
    body: list = []
    for t in s.row_out:
        body += _store_out(t, _copy_rows_out(t))
    for og in stat_out_groups(s):
        body += og.copy_out(ROW_STAT_STRIDE, "off_r0")
    return Func("CopyOut", (Param("r0"), Param("k")), tuple(body))


def _batch_steps(s: RowSchedule, row0, flush: str | None, reload: bool = False, batch=None) -> list:
    """The batch bookkeeping at the top of a per-row loop: b = (row0 + i) / seqLen_; a new batch flushes the last
    (method `flush`) and zeroes its sums; a new batch's rows are loaded (and with `reload`, in a two-pass kernel's
    second pass, its complete per-batch reductions read back: RowSchedule.reload_batch). With `batch` (a symbol
    already holding the batch: `_batch_runs`) no b is computed."""
    b, cur, val = Sym("b"), Sym("curBatch_"), Sym("valBatch_")
    out: list = [] if batch is not None else [Let("b", div(add(row0, Sym("i")), Sym("seqLen_")))]
    b = batch if batch is not None else b
    if flush:
        then: list = [If((Constraint(">=", cur, Lit(0)),), (Call(flush),)), Assign("curBatch_", b)]
        if s.zero_batch:
            then.append(Call("ZeroBatchSums"))
        out.append(If((Constraint("!=", b, cur),), tuple(then)))
    if s.load_batch or (reload and s.reload_batch):
        then = [Assign("valBatch_", b)] + ([Call("LoadBatch", (b,))] if s.load_batch else [])
        then += list(s.reload_batch) if reload else []
        out.append(If((Constraint("!=", b, val),), tuple(then)))
    return out


def _substituted(x, refs: dict, syms: dict):
    """Statement(s) `x` with every Ref of a tensor in `refs` reading refs[name] instead and every symbol in `syms`
    replaced by syms[name] (a DimExpr); frozen dataclasses rebuilt where something changed."""
    if isinstance(x, Ref) and x.tensor in refs:
        x = dataclasses.replace(x, tensor=refs[x.tensor])
    if isinstance(x, Sym):
        return syms.get(x.name, x)
    if isinstance(x, tuple):
        return tuple(_substituted(y, refs, syms) for y in x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        vals = {f.name: getattr(x, f.name) for f in dataclasses.fields(x) if f.init}
        got = {k: _substituted(v, refs, syms) for k, v in vals.items()}
        changed = {k: v for k, v in got.items() if v is not vals[k]}
        return dataclasses.replace(x, **changed) if changed else x
    return x


def _col_copy_in(t: GmRows, dst: str | None = None) -> tuple:
    """COL_SPLIT: GM -> UB of the column chunk [c0_, c0_ + n_) of rows [g0, g0 + k) of t into res_<op> (or the
    tensor `dst`); inside If(t.guard) for an optional input of a class serving several presences (`guard`)."""
    return guard(t, _col_copy_in_always(t, dst))


def _col_copy_in_always(t: GmRows, dst: str | None = None) -> tuple:
    if t.layout == "pieces":
        return tuple(t.pieces_col) if dst is None else _substituted(tuple(t.pieces_col), {f"res_{t.op}": dst}, {})
    rs, n, d = Sym("rowStride_"), Sym("n_"), dst or f"res_{t.op}"
    if t.layout == "flat":
        return (_rows_copy(Ref(d), GmView(f"gm_{t.gm}", add(t.off_g0, Sym("c0_"))), _K, n, t.ctype,
                           t.gap_col, rs, False, _spec(t.spec)),)
    run = Invoke("RunRows", (Sym("r"), sub(_K, Sym("j")))) if t.layout == "runs" else Lit(1)
    return (For("j", Lit(0), _K, None, (
        Let("r", add(Sym("g0"), Sym("j"))),
        Let("m", run),
        _rows_copy(Ref(d, mul(Sym("j"), rs)), GmView(f"gm_{t.gm}", add(t.off_r, Sym("c0_"))), Sym("m"),
                   n, t.ctype, t.gap_col, rs, False, _spec(t.spec)),
        Assign("j", add(Sym("j"), Sym("m"))),
    ), doc="one copy per run of rows at a constant GM stride"),)


def _col_copy_out(t: GmRows) -> tuple:
    """COL_SPLIT: UB -> GM of the column chunk of rows [g0, g0 + k) of output t from LocalTensor t."""
    rs, n = Sym("rowStride_"), Sym("n_")
    if t.layout == "flat":
        return (_rows_copy(Ref("t"), GmView(f"gm_{t.gm}", add(t.off_g0, Sym("c0_"))), _K, n, t.ctype, t.gap_col, rs,
                           True, _spec(t.spec)),)
    run = Invoke("RunRows", (Sym("r"), sub(_K, Sym("j")))) if t.layout == "runs" else Lit(1)
    return (For("j", Lit(0), _K, None, (
        Let("r", add(Sym("g0"), Sym("j"))),
        Let("m", run),
        _rows_copy(Ref("t", mul(Sym("j"), rs)), GmView(f"gm_{t.gm}", add(t.off_r, Sym("c0_"))), Sym("m"), n,
                   t.ctype, t.gap_col, rs, True, _spec(t.spec)),
        Assign("j", add(Sym("j"), Sym("m"))),
    ), doc="one copy per run of rows at a constant GM stride"),)


def _col_split(s: RowSchedule) -> Func:
    """COL_SPLIT: this core's column slice in chunks of colsPerPass; per chunk, groups of groupRows resident rows;
    per group the row-reduction levels (partial sums of this core's columns to workspace, SyncAll, each core totals
    the rows it owns, SyncAll, totals read back), then the final per-row stream and the outputs. A two-pass kernel
    (RowSchedule.acc_body) runs ROW_SPLIT here: its tiling always selects it (opgen.tiling.rowkernel). With
    `s.chunk` the method serves ROW_CHUNK too (strategy 4): the slice is the whole row and the rows this core's
    (RowStartOf), the program having nothing to exchange; its items (a group of a chunk) are then prefetched
    (`s.prefetch`: where the queues stay within the event-id pool, opgen.kernel.rowcounts.chunk_prefetch): row
    inputs through two-buffer queues resQue_<operand>, the next item's copy issued right after this item's DeQue
    (`_chunk_in`), outputs double-buffered (docs/design.md "Copy/compute overlap")."""
    if s.acc_body:
        return Func("ColSplit", (), (Call("RowSplit", doc="two passes over the rows: ROW_SPLIT only"),))
    core, g, rs = Sym("core"), Sym("G"), Sym("rowStride_")
    body = _col_buffers(s, bool(s.levels), bool(s.col_segments))
    batched, blocks = dict(s.col_segments), dict(s.col_block_segments)
    chunk: list = [
        Assign("n_", Fn("min", (sub(Sym("cEnd"), Sym("c0_")), rs))),
    ]
    if s.load_cols:
        chunk.append(Call("LoadColumns"))
    chunk += [Assign("curBatch_", Lit(-1)), Assign("valBatch_", Lit(-1))]
    grp: list = []
    lo, hi = (Sym("rBegin"), Sym("rEnd")) if s.chunk else (Lit(0), Sym("rowNum_"))
    if s.prefetch and s.row_in:   # prefetched: this item's buffers dequeued, the next item's copy issued
        grp += [DeQue(f"res_{t.op}", f"resQue_{t.op}", t.ctype) for t in s.row_in]
        grp += [Let("gNext", add(Sym("g0"), g)),
                Let("cNext", Select(Constraint(">=", Sym("gNext"), hi), add(Sym("c0_"), rs), Sym("c0_"))),
                _chunk_in(s, Select(Constraint(">=", Sym("gNext"), hi), lo, Sym("gNext")), Sym("cNext"), lo, hi)]
    else:
        for t in s.row_in:
            grp += list(_col_copy_in(t))
    grp += _group_stat_loads(s)
    runs = bool(s.col_segments) and bool(s.load_batch or s.flush_col)   # per-batch rows: groups within one batch
    if runs:   # the batch bookkeeping once a group (the per-row loops' own find the batch unchanged)
        grp += [Let("bg", div(Sym("g0"), Sym("seqLen_")))]
        grp += _batch_steps(s, None, "FlushCol" if s.flush_col else None, batch=Sym("bg"))
    for lv, lines, slots in s.levels:
        per_row = (_batch_steps(s, Sym("g0"), None) if s.load_batch else []) + list(lines)
        grp += [Comment(f"row-reduction level {lv}: partial results of this core's columns, exchanged through "
                        "workspace"),
                _col_rows(s, batched.get(lv), blocks.get(lv), (For("i", Lit(0), _K, Lit(1), tuple(per_row)),))]
        grp += _exchange(s, slots)
    for t in s.row_out:
        grp += guard(t, (Alloc(f"rowOut_{t.op}", f"rowOutQue_{t.op}", t.ctype),))
    grp += [Get(f"statStage_{t.op}", f"statStageBuf_{t.op}", "float") for t in s.stat_out]
    final: list = []
    if s.flush_col or s.load_batch:
        final += _batch_steps(s, Sym("g0"), "FlushCol" if s.flush_col else None)
    final += list(s.final_body)
    grp.append(_col_rows(s, batched.get(-1), blocks.get(-1), (For("i", Lit(0), _K, Lit(1), tuple(final)),)))
    for t in s.row_out:
        grp += _store_out(t, _col_copy_out(t), enqueue=True)
    for og in stat_out_groups(s):
        grp += og.both(Sym("groupStride_"), "off_g0",
                      (Constraint("==", core, Lit(0)), Constraint("==", Sym("c0_"), Sym("cBegin"))))
    grp += _stat_frees(s)
    if s.prefetch and s.row_in:
        grp += [Free(f"resQue_{t.op}", f"res_{t.op}") for t in s.row_in]
        body.append(_chunk_in(s, lo, Sym("cBegin"), lo, hi))
    if runs:   # sub-batches: a group ends at its batch's last row, so every row of it reads the same batch rows
        end = Select(Constraint(">=", Sym("colBatchRows"), Lit(1)),
                     sub(mul(add(div(Sym("g0"), Sym("seqLen_")), 1), Sym("seqLen_")), Sym("g0")), g)
        chunk.append(For("g0", lo, hi, None, (Let("k", Fn("min", (Fn("min", (g, sub(hi, Sym("g0")))), end))),)
                         + tuple(grp) + (Assign("g0", add(Sym("g0"), _K)),),
                         doc="groups of groupRows rows; with sub-batches none across a batch's end"))
    else:
        chunk.append(For("g0", lo, hi, g, tuple(grp), tail="k",
                         doc="the next item's copy-in (the next group, or the next chunk's first) runs beside this "
                             "group's compute" if s.prefetch and s.row_in else ""))
    if s.flush_col:
        chunk.append(If((Constraint(">=", Sym("curBatch_"), Lit(0)),), (Call("FlushCol"),)))
    chunk += list(s.col_final)
    body += list(s.col_total_init)
    body.append(For("c0_", Sym("cBegin"), Sym("cEnd"), rs, tuple(chunk), doc="column chunks of this core's slice"))
    if s.prefetch:   # the buffer enqueued past the last item (nothing copied into it)
        body += [Scope((DeQue("t", f"resQue_{t.op}", t.ctype), Free(f"resQue_{t.op}", "t"))) for t in s.row_in]
    body += list(s.col_total_end)
    return Func("ColSplit", (), tuple(body))


def _chunk_in(s: RowSchedule, g0, c0, lo, hi) -> Scope:
    """ColSplit of a `chunkable` class (RowSchedule.chunk; COL_SPLIT and ROW_CHUNK): the copy-in of the item at
    group row `g0`, column `c0` (tiling expressions; `lo`, `hi` this core's rows): rows [g0, g0 + min(G, hi - g0))
    of the chunk [c0, c0 + min(cEnd - c0, rowStride_)) of every row input into a buffer of its resQue_ (two buffers,
    rowStride_ apart) and enqueued -- nothing copied past the slice's last chunk (c0 >= cEnd), so every item finds a
    buffer enqueued and ColSplit dequeues and frees the one past the last after its loops. ColSplit issues the first
    item's before its loops and, in each item, the next one's right after DeQue-ing its own, so the copy of item
    i + 1 runs on MTE2 while item i computes (docs/design.md "Copy/compute overlap": two buffers, prefetched)."""
    nk, nn = Sym("inK"), Sym("inN")
    out: list = [Let("inG0", g0), Let("inC0", c0),
                 Let("inK", Select(Constraint("<", Sym("inC0"), Sym("cEnd")),
                                   Fn("min", (Sym("G"), sub(hi, Sym("inG0")))), Lit(0))),
                 Let("inN", Fn("min", (sub(Sym("cEnd"), Sym("inC0")), Sym("rowStride_"))))]
    for t in s.row_in:
        copy = _substituted(_col_copy_in(t, "t"), {}, {"g0": Sym("inG0"), "k": nk, "c0_": Sym("inC0"), "n_": nn})
        out.append(Scope((Alloc("t", f"resQue_{t.op}", t.ctype),
                          If((Constraint(">", nk, Lit(0)),), tuple(copy)),
                          EnQue(f"resQue_{t.op}", "t"))))
    return Scope(tuple(out))


COL_ROWS_FITS = (Constraint(">=", Sym("colBatchRows"), Lit(1)),) + ROWS_REDUCE_STRIDE
"""When COL_SPLIT runs a phase over the group's rows colBatchRows at a time (RowSchedule.col_segments): the tiling
gave a sub-batch (opgen.tiling.rowkernel: a multiple of 8, at most 248 rows, so one instruction's repeatTime takes
them and each sub-batch's first row starts a 32-byte block of the per-row buffers) and a row's repeat stride
(rowStride_ / 8 blocks) fits BinaryRepeatParams' uint8 (RowsSum / RowsMax with a repeat a row,
docs/reference/ascendc.md §1.9); a longer slice runs row by row."""


COL_BLOCK_FITS = COL_ROWS_FITS
"""When COL_SPLIT runs a phase eight rows a repeat (RowSchedule.col_block_segments), as BLOCK_FITS for ROW_SPLIT: a
row's 32-byte blocks fit the uint8 block stride and the scratch rowsRed_ ([colBatchRows, 64] fp32, allocated for
every slice where the block segments may run) holds the Brcb blocks and the per-row scalar slots (colBatchRows >= 8,
rowclass.BLOCK_SLOTS)."""


def _col_rows(s: RowSchedule, segs, bsegs, per_row: tuple):
    """A COL_SPLIT phase: its segments eight rows a repeat (`bsegs`, RowSchedule.col_block_segments) under
    COL_BLOCK_FITS, else over the group's rows at once (`segs`, RowSchedule.col_segments) under COL_ROWS_FITS (and,
    for packed values, rows of whole mask groups), else `per_row` (the per-row loop)."""
    if not segs:
        return per_row[0] if len(per_row) == 1 else Scope(per_row)
    out = (If(COL_ROWS_FITS, _sub_batches(segs), per_row,
              doc="the group's rows at once (one instruction over every row, row reductions by RowsSum); else row "
                  "by row"),)
    if bsegs:
        out = (If(COL_BLOCK_FITS, _sub_batches(bsegs), out,
                  doc="slices of at most 255 blocks: eight rows a repeat"),)
    if s.packed_lanes:
        out = (If((Constraint("==", Bin("%", Sym("n_"), Lit(s.packed_lanes)), Lit(0)),), out, per_row,
                  doc=f"slices of whole {s.packed_lanes}-lane groups: no mask bit or word of a row's lanes packed "
                      "with its padding; else row by row"),)
    return out[0]


def _sub_batches(segs) -> tuple:
    """COL_SPLIT's segments of a phase (rowclass._Printer.col_batch_segments: rows b0 .. b0 + k of the group) run over
    the group's k rows colBatchRows at a time: the loop's tail kb stands for the segments' k."""
    body = _rename_k(_segments(segs))
    return (For("b0", Lit(0), _K, Sym("colBatchRows"), tuple(body), tail="kb",
                doc="the group's rows, colBatchRows at a time"),)


def _rename_k(x):
    """Kernel-IR statements `x` with every use of the scalar k renamed kb (expressions kept as written)."""
    if isinstance(x, Sym):
        return Sym("kb") if x.name == "k" else x
    if isinstance(x, Bin):
        return Bin(x.op, _rename_k(x.lhs), _rename_k(x.rhs))
    if isinstance(x, Fn):
        return Fn(x.fn, tuple(_rename_k(a) for a in x.args))
    if isinstance(x, tuple):
        return tuple(_rename_k(y) for y in x)
    if isinstance(x, list):
        return [_rename_k(y) for y in x]
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return dataclasses.replace(x, **{f.name: _rename_k(getattr(x, f.name)) for f in dataclasses.fields(x)
                                         if f.init})
    return x


def _row_chunk(s: RowSchedule) -> Func:
    """ROW_CHUNK of a row-reduction program (opgen.kernel.rowcounts.row_resident; opgen.tiling.rowkernel): this
    core's rows [RowStartOf(core), RowStartOf(core + 1)) in groups of G = groupRows rows. A group's row inputs are
    copied into UB once, whole, as stored in GM (resQue_<operand>, two buffers; `_resident_in`: the next group's copy
    is issued right after this group's DeQue, so it runs on MTE2 through this group's whole work); then each
    row-reduction level, and last the outputs, run over the rows' column chunks of
    colsPerPass columns (fp32 temporaries of one chunk) reading the resident rows, a level's partial reductions
    combined over the chunks in chunk order (a softmax's maximum and sum in one online pass,
    opgen.kernel.rowprog.online_pair). The core owns its rows: the partials are combined in their totals' slots
    (tots_; opgen.kernel.rowclass._Printer with `resident`), nothing is exchanged or copied. The tiling sizes the chunk for one resident row, so groupRows is 1
    in practice (k > 1 is not reached by the tiling; tests/test_rows_resident.py forces it). Each output chunk is written as it is done (two buffers).
    GM traffic: every input read once, every output written once."""
    core, g, gs, rs = Sym("core"), Sym("G"), Sym("groupStride_"), Sym("rowStride_")
    f4 = SizeOf("float")
    body: list = [
        Let("core", BLOCK_IDX),
        Let("cBegin", Lit(0)),
        Let("cEnd", _HID),
        Let("rBegin", Invoke("RowStartOf", (core,))),
        Let("rEnd", Invoke("RowStartOf", (add(core, 1),))),
        Assign("rowStride_", Sym("colsPerPass")),
        Let("G", Sym("groupRows")),
        Assign("groupStride_", Fn("align_up", (g, Lit(8)))),
    ]
    body += [InitBuffer(f"resQue_{t.op}", mul(g, _COLA, SizeOf(t.ctype)), 2) for t in s.row_in]
    body += [InitBuffer(f"rowOutQue_{t.op}", mul(g, rs, SizeOf(t.ctype)), 2) for t in s.row_out]
    body += [InitBuffer(sg.queue, sg.bytes(gs), 2) for sg in stat_groups(s)]
    body += [x for og in stat_out_groups(s) for x in og.inits(gs)]
    body += [InitBuffer("sumBuf_", mul(add(Lit(s.nlevel), Lit(s.nsums)), gs, f4)),
             Get("sums_", "sumBuf_", "float"), View("tots_", Ref("sums_", mul(Lit(s.nlevel), gs)))]
    body += list(_fixed_buffers(s, s.bufs_res, stage=s.stage_res, whole_cols=True))
    if s.load_cols:   # whole column rows, computed once per core (a chunk at a time through the staging queue)
        body += [Comment("the column rows, whole, once (unless they are loaded per chunk: colChunkLoads)"),
                 If((Constraint("==", Sym("colChunkLoads"), Lit(0)),), (
                     For("c0_", Sym("cBegin"), Sym("cEnd"), rs, (
                         Assign("n_", Fn("min", (sub(Sym("cEnd"), Sym("c0_")), rs))),
                         *_col_views(s), Call("LoadColumns")), doc="column chunks of the row"),))]
    grp: list = list(_group_stat_loads(s))
    if s.row_in:   # the first group's copy before the loop; each group's DeQue, then the next group's copy
        body.append(_resident_in(s, Sym("rBegin")))
        grp += [DeQue(f"res_{t.op}", f"resQue_{t.op}", t.ctype) for t in s.row_in]
        grp.append(_resident_in(s, add(Sym("g0"), g)))
    fused = s.res_online[0] if s.res_online else None
    for lv, lines, slots in s.res_levels:
        if fused is not None and lv == fused + 1:
            continue   # computed in level lv - 1's pass (online maximum and sum)
        per_row = (_batch_steps(s, Sym("g0"), None) if s.load_batch else []) + list(
            s.res_online[1] if lv == fused else lines)
        chunk = _chunk_head(s, lv) + [For("i", Lit(0), _K, Lit(1), tuple(per_row))]
        what = f"levels {lv} and {lv + 1} (an online maximum and sum)" if lv == fused else f"level {lv}"
        loop = For("c0_", Sym("cBegin"), Sym("cEnd"), rs, tuple(chunk), doc="column chunks of the resident rows")
        conds = dict(s.level_guards).get(lv) if lv != fused else None
        grp += [Comment(f"row-reduction {what}: partials combined over the row's chunks in their totals' slots "
                        "(tots_), complete on this core"),
                loop if conds is None else If(conds, (loop,), doc="only where its row reductions run (their "
                                                                   "presences and runtime guards)", guard=True)]
    grp += [Get(f"statStage_{t.op}", f"statStageBuf_{t.op}", "float") for t in s.stat_out]
    grp += [Comment("the outputs, chunk by chunk"),
            For("c0_", Sym("cBegin"), Sym("cEnd"), rs, tuple(_output_chunk(s, _chunk_head(s, -1), s.res_final)),
                doc="column chunks of the resident rows")]
    grp += [x for og in stat_out_groups(s) for x in og.both(gs, "off_g0")]
    grp += _stat_frees(s)
    grp += [Free(f"resQue_{t.op}", f"res_{t.op}") for t in s.row_in]
    grp = hoist_row_functions(grp, s.nlevel)   # a function of a row's total, once per group (not per chunk)
    body.append(For("g0", Sym("rBegin"), Sym("rEnd"), g, tuple(grp), tail="k"))
    body += [Scope((DeQue("t", f"resQue_{t.op}", t.ctype), Free(f"resQue_{t.op}", "t")))
             for t in s.row_in]   # the buffer enqueued past the last group (nothing copied into it)
    return Func("RowChunk", (), tuple(body))


HOIST_UNARY = (Op.LN, Op.EXP, Op.SQRT, Op.ABS, Op.RECIPROCAL, Op.RSQRT, Op.RELU)
"""Lane-wise unary instructions whose result on a lane depends on that lane's value only: applied to a broadcast
scalar, every lane holds the same value as the instruction applied to the scalar once (`hoist_row_functions`)."""
_HOIST_BINARY = {Op.SUB: Op.ADDS, Op.ADD: Op.ADDS, Op.MUL: Op.MULS}


def _tots_slot(ref, nlevel: int):
    """The totals' slot (tots_ = sums_ from slot nlevel on) a Ref of tots_ / sums_ addresses: its offset j * gs
    (+ anything), as ROW_CHUNK writes them; None when it is not one of those two tensors; -1 when the offset has
    another form (the caller then leaves the program alone)."""
    if not isinstance(ref, Ref) or ref.tensor not in ("tots_", "sums_"):
        return None
    off = ref.offset
    if isinstance(off, Bin) and off.op == "+":
        off = off.lhs
    if isinstance(off, Bin) and off.op == "*" and isinstance(off.lhs, Lit) and off.rhs == Sym("groupStride_"):
        return off.lhs.value - (nlevel if ref.tensor == "sums_" else 0)
    if isinstance(off, Lit) and off.value == 0:
        return -nlevel if ref.tensor == "sums_" else 0
    return "?"


def _refs(x):
    """Every Ref inside Kernel-IR node `x` (nested statements and operands included)."""
    if isinstance(x, Ref):
        yield x
    elif isinstance(x, (tuple, list)):
        for y in x:
            yield from _refs(y)
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        for f in dataclasses.fields(x):
            yield from _refs(getattr(x, f.name))


def _match_row_function(body: tuple, a: int):
    """The broadcast-function pattern at statement `a` of a per-row loop body of ROW_CHUNK: `s = tots_[j * gs + i]`
    (a GetValue) and every later use of s one of these spans, each Duplicate(W, s, n) then lane-wise unary
    instructions U1 .. Um in place on W (HOIST_UNARY, count n; the same chain in every span), consecutive, then
    either one Sub / Add / Mul reading W as one operand (the other not W) -- the function broadcast over the row's
    chunk -- or `l = W[0]` (an FLet of a FLoad of W: the function of the total read back by the scalar unit,
    rowprog `sunary`); W not read after the span before it is overwritten. Returns (j, (U1 .. Um), ((start, end
    index, kind "bin" | "lane"), ...)) or None."""
    g = body[a]
    if not (isinstance(g, GetValue) and g.src.tensor == "tots_" and g.src.slot is None):
        return None
    off = g.src.offset
    if not (isinstance(off, Bin) and off.op == "+" and off.rhs == Sym("i") and isinstance(off.lhs, Bin)
            and off.lhs.op == "*" and isinstance(off.lhs.lhs, Lit) and off.lhs.rhs == Sym("groupStride_")):
        return None
    j, s = off.lhs.lhs.value, g.name
    chain0, spans, q = None, [], a + 1
    while q < len(body):
        if not mentions(body[q], s):
            q += 1
            continue
        span = _function_span(body, q, s)
        if span is None or (chain0 is not None and span[0] != chain0):
            return None
        chain0 = span[0]
        spans.append(span[1:])
        q = span[2] + 1
    if not spans:
        return None
    return j, chain0, tuple(spans)


def _function_span(body: tuple, q: int, s: str):
    """One span of `_match_row_function` starting at statement q (a Duplicate of scalar s): (chain, q, end index,
    kind) or None."""
    dup = body[q]
    if not (isinstance(dup, Vec) and dup.op is Op.DUPLICATE and dup.arg("scalar") == FRef(s)):
        return None
    w, n = dup.arg("dst"), dup.arg("count")
    chain, b = [], q + 1
    while b < len(body) and isinstance(body[b], Vec) and body[b].op in HOIST_UNARY:
        u = body[b]
        if u.arg("dst") != w or u.arg("src0") != w or u.arg("count") != n:
            return None
        chain.append(u.op)
        b += 1
    if not chain or b >= len(body):
        return None
    bi = body[b]
    if isinstance(bi, FLet) and bi.value == FLoad(w):
        kind = "lane"
    elif isinstance(bi, Vec) and bi.op in _HOIST_BINARY and bi.arg("count") == n:
        s0, s1 = bi.arg("src0"), bi.arg("src1")
        if not (s1 == w and s0 != w or bi.op is not Op.SUB and s0 == w and s1 != w):
            return None
        kind = "bin"
    else:
        return None
    if any(mentions(st, s) for st in body[q + 1:b + 1]):
        return None

    def names_w(x) -> bool:   # a Ref of W's tensor and slot, or opaque text naming its tensor
        if isinstance(x, Verbatim):
            return mentions(x, w.tensor)
        return any(r.tensor == w.tensor and r.slot == w.slot for r in _refs(x))

    for st in body[b + 1:]:   # W dead: overwritten (not read) by the next statement naming it, or never named again
        if not names_w(st):
            continue
        if isinstance(st, Vec) and st.arg("dst") == w and not any(names_w(v) for nm, v in st.args if nm != "dst"):
            break
        return None
    return tuple(chain), q, b, kind


def mentions(x, name: str) -> bool:
    """Whether Kernel-IR node `x` (a statement, an operand, nested ones included) names tensor variable `name`: a
    Ref of it, a statement binding or handing it (View, DeQue, Alloc, EnQue, Free), or C++ text naming it (a
    Verbatim line, which is opaque)."""
    if isinstance(x, Ref):
        return x.tensor == name or mentions(x.offset, name) or (x.slot is not None and mentions(x.slot, name))
    if isinstance(x, Verbatim):
        return any(name in ln for ln in x.lines)
    if isinstance(x, (tuple, list)):
        return any(mentions(y, name) for y in x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        vals = [getattr(x, f.name) for f in dataclasses.fields(x)]
        return any(v == name if isinstance(v, str) else mentions(v, name) for v in vals)
    return False


HOIST_SAFE_CALLS = ("RowSum", "RowMax", "LoadColumns")
"""Methods a ROW_CHUNK group body may call after a hoisted total (`hoist_row_functions`): the row reductions write
a scalar, LoadColumns (the column rows of a chunk, colChunkLoads) writes the column rows and the staging queue;
none reads or writes the totals (tots_, sums_)."""


def hoist_row_functions(grp: list, nlevel: int) -> list:
    """Loop-invariant code motion of ROW_CHUNK's group body `grp` (Kernel IR, before the dependency pass): a
    function of a row's completed total broadcast over every chunk of the row — `Duplicate(W, s)`, then Ln / Exp /
    ... in place on W, then `D = A - W` (or A + W, A * W), with s = tots_[j * gs + i] — runs inside the chunk loop,
    once per chunk of each row, over the whole chunk. Every lane of W holds f(s), so it is computed once per group
    instead: f applied in place to the group's k totals of slot j right before the first chunk loop that reads
    them (one instruction each over k lanes), and in every chunk `D = A + (-f(s))` (Adds; A * f(s): Muls). Exact:
    f is lane-wise (the same value on every lane), and a - b is a + (-b) in IEEE fp32. Done only when every later
    read of slot j (tots_ or its sums_ alias) is such a pattern with the same f, nothing later writes it, and no
    statement after the hoist point calls a method other than HOIST_SAFE_CALLS (which touch neither). Returns the
    new body (the same list when nothing matches)."""
    found: dict = {}   # slot j -> (chain, first loop index)
    for li, st in enumerate(grp):
        if not _chunk_loop(st):
            continue
        if isinstance(st, If):   # a level's loop under its guard (level_guards)
            st = st.then[0]
        for row in st.body:
            if not (isinstance(row, For) and row.var == "i"):
                continue
            for a in range(len(row.body)):
                m = _match_row_function(row.body, a)
                if m is None:
                    continue
                j, chain, _spans = m
                if j in found and found[j][0] != chain:
                    return grp
                found.setdefault(j, (chain, li))
    if not found:
        return grp
    start = min(li for _c, li in found.values())
    if any(isinstance(x, Call) and x.method not in HOIST_SAFE_CALLS for st in grp[start:] for x in walk((st,))):
        return grp
    # every Ref of slot j from its hoist point on is a matched GetValue (and no Ref of an unknown slot)
    matched: set = set()
    for st in grp[start:]:
        for x in walk((st,)):
            if isinstance(x, For) and x.var == "i":
                for a in range(len(x.body)):
                    m = _match_row_function(x.body, a)
                    if m is not None and m[0] in found and m[1] == found[m[0]][0]:
                        matched.add(id(x.body[a]))
    for li, st in enumerate(grp):
        for x in walk((st,)):
            for r in _refs(x if not isinstance(x, (For, If, Scope)) else ()):
                j = _tots_slot(r, nlevel)
                if j == "?" and li >= start:
                    return grp
                if j in found and li >= found[j][1] and id(x) not in matched:
                    return grp

    def rewrite(body: tuple) -> tuple:
        out, a, drop, repl = [], 0, set(), {}
        while a < len(body):
            st = body[a]
            if a in drop:
                a += 1
                continue
            if a in repl:
                out.append(repl[a])
                a += 1
                continue
            m = _match_row_function(body, a)
            if m is None or m[0] not in found:
                if isinstance(st, (For, If, Scope)):
                    st = map_children(st, rewrite)
                out.append(st)
                a += 1
                continue
            g = body[a]
            for q, b, kind in m[2]:
                drop.update(range(q, b))
                bi, w = body[b], body[q].arg("dst")
                if kind == "lane":   # the function of the total, read back: the hoisted value itself
                    repl[b] = FLet(bi.name, FRef(g.name), doc=bi.doc)
                    continue
                other = bi.arg("src0") if bi.arg("src1") == w else bi.arg("src1")
                scalar = FNeg(FRef(g.name), paren=True) if bi.op is Op.SUB else FRef(g.name)
                repl[b] = vec(_HOIST_BINARY[bi.op], dst=bi.arg("dst"), src0=other, scalar=scalar,
                              count=bi.arg("count"), doc=bi.doc)
            out.append(g)
            a += 1
        return tuple(out)

    new = list(grp)
    for j, (chain, li) in sorted(found.items(), key=lambda t: -t[1][1]):
        slot = Ref("tots_", mul(Lit(j), Sym("groupStride_")))
        pre = [Comment(f"the row totals of slot {j} through {', '.join(INSTRS[u].api for u in chain)} once per group "
                       "(every chunk below reads them broadcast: hoisted out of the chunk loop)")]
        pre += [vec(u, dst=slot, src0=slot, count=_K) for u in chain]
        new[li:li] = pre
    return [map_children(st, rewrite) if _chunk_loop(st) else st for st in new]


def _chunk_loop(st) -> bool:
    """Whether ROW_CHUNK group statement `st` is a loop over the column chunks, or one under a level's guard (an If
    holding only that loop, RowSchedule.level_guards)."""
    if isinstance(st, If) and len(st.then) == 1 and not st.orelse:
        st = st.then[0]
    return isinstance(st, For) and st.var == "c0_"


def _resident_in(s: RowSchedule, start: DimExpr) -> Scope:
    """ROW_CHUNK (inputs resident): rows [start, start + G) of every row input (fewer at the end of this core's rows:
    none past rEnd) copied whole into a buffer of its resQue_ (colAlign_ apart, as stored in GM) and enqueued. RowChunk
    issues the first group's before its group loop and, in each group, the next group's right after DeQue-ing its
    own, so the copy of group g + 1 runs on MTE2 while group g computes (two buffers, docs/reference/ascendc.md
    §1.5). Past the last group a buffer is still allocated and enqueued, with nothing copied, so every group finds one
    enqueued; RowChunk dequeues and frees it after the loop. Leaves rowStride_ at the chunk width."""
    nk, rows = Sym("resK"), Sym("resG0")
    out: list = [Let("resG0", start), Let("resK", Fn("min", (Sym("G"), sub(Sym("rEnd"), rows)))),
                 Assign("c0_", Lit(0)), Assign("n_", _HID), Assign("rowStride_", _COLA)]
    for t in s.row_in:
        copy = _substituted(_col_copy_in(t, "t"), {}, {"g0": rows, "k": nk})
        out.append(Scope((Alloc("t", f"resQue_{t.op}", t.ctype),
                          If((Constraint(">", nk, Lit(0)),), tuple(copy)),
                          EnQue(f"resQue_{t.op}", "t"))))
    out.append(Assign("rowStride_", Sym("colsPerPass")))
    return Scope(tuple(out))


def _output_chunk(s: RowSchedule, head: list, body) -> list:
    """One column chunk of the output phase (COL_STREAM, ROW_CHUNK): `head` (the chunk's width, its column rows, its
    inputs where they are re-read), the output chunks allocated, the per-row stream `body` over the group's rows, each
    output chunk handed to MTE3 and copied out."""
    out = list(head)
    for t in s.row_out:
        out += guard(t, (Alloc(f"rowOut_{t.op}", f"rowOutQue_{t.op}", t.ctype),))
    per_row = (_batch_steps(s, Sym("g0"), None) if s.load_batch else []) + list(body)
    out.append(For("i", Lit(0), _K, Lit(1), tuple(per_row)))
    for t in s.row_out:
        out += _store_out(t, _col_copy_out(t), enqueue=True)
    return out


def _chunk_head(s: RowSchedule, phase: int) -> list:
    """ROW_CHUNK (inputs resident): the head of column chunk [c0_, c0_ + n_) in `phase` (a level, -1 the output
    phase): its width and, when the phase reads column rows, their views at the chunk (the column rows are whole in
    UB, loaded once) or, with the tiling field colChunkLoads 1, the chunk's column rows loaded (LoadColumns: GM
    columns copied in, computed ones such as a lane index computed at c0_) into buffers of one chunk. The row inputs
    are in UB already."""
    out: list = [Assign("n_", Fn("min", (sub(Sym("cEnd"), Sym("c0_")), Sym("rowStride_"))))]
    if s.ncol and phase in s.col_phases:
        if s.load_cols:
            out.append(If((_COL_CHUNKS,), (Call("LoadColumns"),), tuple(_col_views(s))))
        else:
            out += _col_views(s)
    return out


def _col_views(s: RowSchedule) -> list:
    """colv_[j] pointed at column c0_ of whole column row j (ROW_CHUNK with resident rows: colBuf_ holds
    the column rows whole, colAlign_ apart; not read where colChunkLoads is 1)."""
    return [For("j", Lit(0), Lit(s.ncol), Lit(1), (
        Get("colv_", "colBuf_", "float", add(mul(Sym("j"), _COLA), Sym("c0_")), slot=Sym("j")),))]


def _exchange(s: RowSchedule, slots) -> list:
    """A row-reduction level's exchange (COL_SPLIT, COL_STREAM): this core's partials of the group's k rows (sums_
    slots) to workspace, then by the tiling field xchgAll (opgen.tiling.rowkernel `xchg_all`; docs/design.md
    "COL_SPLIT exchange"):
      0  SyncAll, each core totals the rows it owns (TotalOwnedRows: one strided copy of every core's partials, a
         pairwise tree over the cores), SyncAll, the totals read back into tots_ (two SyncAll);
      1  the partials to one of two workspace regions (the local xpar alternates them: region 0 at 0, region 1 at
         the field xchgOff1 floats), SyncAll, every core totals every row of the group (TotalAllRows: the same copy
         and tree over all k rows) straight into tots_ (one SyncAll). A core writes a region again only two
         exchanges later, after the SyncAll of the exchange between, which every core reaches after reading it.
    `slots`: ((slot, j, "Add" / "Max"), ...)."""
    f4, core, gs, ws = SizeOf("float"), Sym("core"), Sym("groupStride_"), "ws_"
    both = len(_combines(s)) > 1
    xb = mul(Sym("xpar"), Sym("xchgOff1"))
    one: list = [Copy(GmView(ws, add(xb, mul(add(mul(core, Lit(s.nlevel)), Lit(slot)), gs))),
                      Ref("sums_", mul(Lit(slot), gs)), Lit(1), mul(_K, f4)) for slot, _j, _c in slots]
    one += [Barrier(Pipe.ALL), SyncAll()]
    one += [Call("TotalAllRows", (add(xb, mul(Lit(slot), gs)), mul(Lit(j), gs), _K)
                 + ((comb == "Max",) if both else ())) for slot, j, comb in slots]
    one.append(Assign("xpar", sub(Lit(1), Sym("xpar"))))
    return [If((Constraint("==", Sym("xchgAll"), Lit(1)),), tuple(one), tuple(_exchange_owned(s, slots)),
               doc="one SyncAll: every core totals every row (xchgAll); else the owners total, two SyncAll")]


def _exchange_owned(s: RowSchedule, slots) -> list:
    """`_exchange` with xchgAll 0: the owners total their rows between two SyncAll."""
    f4, core, gs, ws = SizeOf("float"), Sym("core"), Sym("groupStride_"), "ws_"
    out: list = []
    for slot, _j, _c in slots:
        out.append(Copy(GmView(ws, mul(add(mul(core, Lit(s.nlevel)), Lit(slot)), gs)),
                        Ref("sums_", mul(Lit(slot), gs)), Lit(1), mul(_K, f4)))
    out += [Barrier(Pipe.ALL), SyncAll()]
    both = len(_combines(s)) > 1
    for slot, j, comb in slots:
        out.append(Call("TotalOwnedRows", (Lit(slot), add(Sym("totBase"), mul(Lit(j), gs)), _K)
                        + ((comb == "Max",) if both else ())))
    out += [Barrier(Pipe.ALL), SyncAll()]
    for _slot, j, _c in slots:
        out.append(Copy(Ref("tots_", mul(Lit(j), gs)), GmView(ws, add(Sym("totBase"), mul(Lit(j), gs))), Lit(1),
                        mul(_K, f4), pad_value=FConst(0.0)))
    return out


def _col_buffers(s: RowSchedule, sums: bool = True, batch: bool = False, prefetch: bool | None = None) -> list:
    """The prologue shared by COL_SPLIT and COL_STREAM: this core's column slice [cBegin, cEnd), the chunk width
    (rowStride_ = colsPerPass), the group of G = groupRows rows, and the UB buffers of a group's chunk (`sums`:
    the partial and total row reductions too; `batch`: COL_SPLIT over the group's rows at once, each row temporary
    G rows of rowStride_ and RowsSum's [G, 64] scratch, as opgen.tiling.rowkernel.col_plan counts them)."""
    f4 = SizeOf("float")
    pre = s.prefetch if prefetch is None else prefetch
    core, cores, g, gs, rs = Sym("core"), Sym("cores"), Sym("G"), Sym("groupStride_"), Sym("rowStride_")
    body: list = [Let("core", BLOCK_IDX), Let("cores", BLOCK_NUM)]
    if s.chunk:   # ROW_CHUNK: the whole row, this core's rows (RowStartOf, as ROW_SPLIT splits them)
        chunked = Constraint("==", Sym("strategy"), Lit(4))
        body += [
            Let("cBegin", Select(chunked, Lit(0), mul(core, Sym("colsPerCore")))),
            Let("cEnd", Select(chunked, Sym("hidden_"), add(Sym("cBegin"), Select(
                Constraint("==", core, sub(cores, 1)), Sym("colsTail"), Sym("colsPerCore"))))),
            Let("rBegin", Select(chunked, Invoke("RowStartOf", (core,)), Lit(0))),
            Let("rEnd", Select(chunked, Invoke("RowStartOf", (add(core, 1),)), Sym("rowNum_")))]
    else:
        body += [
            Let("cBegin", mul(core, Sym("colsPerCore"))),
            Let("cEnd", add(Sym("cBegin"), Select(Constraint("==", core, sub(cores, 1)), Sym("colsTail"),
                                                  Sym("colsPerCore"))))]
    body += [
        Assign("rowStride_", Sym("colsPerPass")),
        Let("G", Sym("groupRows")),
        Assign("groupStride_", Fn("align_up", (g, Lit(8)))),
    ]
    for t in s.row_in:   # a chunkable class's items are prefetched through two buffers (`_chunk_in`)
        body += ([InitBuffer(f"resQue_{t.op}", mul(g, rs, SizeOf(t.ctype)), 2)] if pre else
                 [InitBuffer(f"resBuf_{t.op}", mul(g, rs, SizeOf(t.ctype))),
                  Get(f"res_{t.op}", f"resBuf_{t.op}", t.ctype)])
    body += [InitBuffer(f"rowOutQue_{t.op}", mul(g, rs, SizeOf(t.ctype)), 2 if pre else 1)
             for t in s.row_out]
    body += [InitBuffer(sg.queue, sg.bytes(gs), 2) for sg in stat_groups(s)]
    body += [x for og in stat_out_groups(s) for x in og.inits(gs)]
    if sums:
        body += [InitBuffer("sumBuf_", mul(add(Lit(s.nlevel), Lit(s.nsums)), gs, f4)),
                 Get("sums_", "sumBuf_", "float"), View("tots_", Ref("sums_", mul(Lit(s.nlevel), gs)))]
        if "TotalOwnedRows" in s.helpers:   # the exchange tile: every core's partials of the owned (all) rows
            per = Select(Constraint("==", Sym("xchgAll"), Lit(1)), g, Sym("rowsPerOwner"))
            body += [InitBuffer("xchgBuf_", mul(cores, Fn("align_up", (per, Lit(8))), f4)),
                     Get("xchg_", "xchgBuf_", "float"), Let("xpar", Lit(0), mutable=True)]
    if batch:   # colBatchRows rows (0: row by row, one row of temporaries)
        body.append(Let("pass", Fn("max", (Sym("colBatchRows"), Lit(1)))))
    body += list(_fixed_buffers(s, s.bufs_col, batch, stage=s.stage_col))
    if batch:
        body.append(If((Constraint(">=", Sym("colBatchRows"), Lit(1)),) + ROWS_REDUCE_STRIDE
                       + (() if s.col_block_segments else (Constraint(">", rs, Lit(64)),)), (
            InitBuffer("rowsRedBuf_", mul(Sym("colBatchRows"), 64, f4)), Get("rowsRed_", "rowsRedBuf_", "float")),
            doc="rows longer than one repeat fold into the scratch (RowsSum / RowsMax)"))
    body.append(Let("totBase", mul(cores, Lit(s.nlevel), gs)))
    return body


def _stream_chunk_in(s: RowSchedule, phase: int, prefetch: bool = False) -> list:
    """COL_STREAM: the head of one column chunk [c0_, c0_ + n_) of the group's rows in `phase` (a level, -1 the
    output phase): the chunk's width, the previous chunk's vector and scalar work on the UB rows done (V->MTE2,
    S->MTE2: the rows are overwritten), the column rows of the chunk (LoadColumns) when the phase reads them, the
    batch rows reloaded at the chunk's first row, the row inputs' chunk copied in (MTE2->V, MTE2->S). With
    `prefetch` (RowSchedule.col_prefetch) the row inputs' chunk is instead dequeued from resQue_<operand> and the
    next chunk's copy issued into its other buffer (`_stream_chunks`)."""
    out: list = [
        Assign("n_", Fn("min", (sub(Sym("cEnd"), Sym("c0_")), Sym("rowStride_")))),
    ]
    if s.load_cols and phase in s.col_phases:
        out.append(Call("LoadColumns"))
    out += [Assign("curBatch_", Lit(-1)), Assign("valBatch_", Lit(-1))]
    if prefetch:
        out += [DeQue(f"res_{t.op}", f"resQue_{t.op}", t.ctype) for t in s.row_in]
        out.append(_chunk_in(s, Sym("g0"), add(Sym("c0_"), Sym("rowStride_")), Lit(0), Sym("rowNum_")))
        return out
    for t in s.row_in:
        out += list(_col_copy_in(t))
    return out


def _stream_chunks(s: RowSchedule, chunk: tuple, prefetch: bool) -> list:
    """COL_STREAM's loop over the column chunks of this core's slice with the per-chunk statements `chunk`. With
    `prefetch` (RowSchedule.col_prefetch) software-pipelined as ColSplit's items (`_chunk_in`): the phase's first
    chunk copied before the loop, each chunk dequeued and the next one's copy issued at its head (nothing copied past
    the slice's end, `_stream_chunk_in`), its buffers freed at its end, the buffer enqueued past the last chunk
    dequeued and freed after the loop -- so a chunk's copy runs on MTE2 while the one before computes."""
    loop = For("c0_", Sym("cBegin"), Sym("cEnd"), Sym("rowStride_"),
               chunk + (tuple(Free(f"resQue_{t.op}", f"res_{t.op}") for t in s.row_in) if prefetch else ()),
               doc="column chunks of this core's slice" + ("; the next chunk's copy runs beside this one's work"
                                                            if prefetch else ""))
    if not prefetch:
        return [loop]
    return ([_chunk_in(s, Sym("g0"), Sym("cBegin"), Lit(0), Sym("rowNum_")), loop]
            + [Scope((DeQue("t", f"resQue_{t.op}", t.ctype), Free(f"resQue_{t.op}", "t"))) for t in s.row_in])


def _group_stat_loads(s) -> list:
    """The group's per-row statistics inputs (s.stat_in) loaded into their queues at the group's first row (g0):
    one Copy of _K values (a gather for a gathered one), padded with 0.0 for float, then EnQue / DeQue. COL_SPLIT and
    COL_STREAM load them alike."""
    gs = Sym("groupStride_")
    return [Scope((Alloc("t", g.queue, g.dtype),)
                  + tuple(_stat_copy(t, g.at(j, gs), t.at_g0, t.off_g0) for j, t in enumerate(g.members))
                  + (EnQue(g.queue, "t"), DeQue(g.tensor, g.queue, g.dtype)) + g.views(gs)) for g in stat_groups(s)]


def _col_stream(s: RowSchedule) -> Func:
    """COL_STREAM (opgen.tiling.rowkernel): this core's column slice is longer than UB. Per group of groupRows
    rows: for each row-reduction level, the slice is walked in chunks of colsPerPass columns (the last a tail),
    each chunk's inputs re-read from GM and the level's partial row reductions combined over the chunks in chunk
    order (RowSchedule.stream_levels); the core's partials are exchanged through workspace as COL_SPLIT does
    (SyncAll, each core totals the rows it owns in a pairwise tree over the cores, SyncAll, totals read back); then
    the output phase
    walks the chunks again, reads the inputs once more and writes each output chunk. With RowSchedule.online (a
    row maximum and the next level's sum of exponentials of the row minus it) the two levels share one pass:
    the fused stream keeps a running maximum and sum, the core's sums are rescaled to the total maximum between the
    two exchanges (opgen.kernel.rowprog.online_pair). GM traffic: the row inputs are read (levels + 1) times (one
    less with the online pass), the outputs written once."""
    core = Sym("core")
    pre = s.col_prefetch and bool(s.row_in)
    body = _col_buffers(s, prefetch=s.col_prefetch)
    grp: list = []
    grp += _group_stat_loads(s)
    by_level = {lv: slots for lv, _b, slots in s.stream_levels}
    online = s.online[0] if s.online else None
    for lv, lines, slots in s.stream_levels:
        if online is not None and lv == online + 1:
            continue   # computed in level lv - 1's pass (online maximum and sum)
        fused = online is not None and lv == online
        per_row = (_batch_steps(s, Sym("g0"), None) if s.load_batch else []) + list(s.online[1] if fused else lines)
        chunk = _stream_chunk_in(s, lv, pre) + [For("i", Lit(0), _K, Lit(1), tuple(per_row))]
        what = f"levels {lv} and {lv + 1}" if fused else f"level {lv}"
        how = " (an online maximum and sum)" if fused else ""
        grp += [Comment(f"row-reduction {what}: this core's partials, combined over its column chunks{how}, "
                        "exchanged through workspace"),
                *_stream_chunks(s, tuple(chunk), pre)]
        grp += _exchange(s, slots)
        if fused:
            grp += list(s.online[2]) + _exchange(s, by_level[lv + 1])
    grp += [Get(f"statStage_{t.op}", f"statStageBuf_{t.op}", "float") for t in s.stat_out]
    grp += [Comment("the output phase: the inputs re-read chunk by chunk, each output chunk written"),
            *_stream_chunks(s, tuple(_output_chunk(s, _stream_chunk_in(s, -1, pre), s.final_body)), pre)]
    grp += [x for og in stat_out_groups(s) for x in og.both(Sym("groupStride_"), "off_g0",
                                                             (Constraint("==", core, Lit(0)),))]
    grp += _stat_frees(s)
    body.append(For("g0", Lit(0), Sym("rowNum_"), Sym("G"), tuple(grp), tail="k"))
    return Func("ColStream", (), tuple(body))


def _staged_load(name: str, dst_type: str, cast, doc: str) -> Func:
    """<name><S_>(dst, src, n): a GM row of n elements of S_ staged through paramQue_ (DataCopyPad in, EnQue /
    DeQue), then cast into `dst` (a `dst_type` UB row) by the Vec `cast(n)` makes of Ref("t") -> Ref("dst")."""
    n = Sym("n")
    return Func(name, (Param("dst", "tensor", dst_type), Param("src", "gm", "S_"), Param("n")), (
        Alloc("t", "paramQue_", "S_"),
        Copy(Ref("t"), GmView("src"), Lit(1), mul(n, SizeOf("S_"))),
        EnQue("paramQue_", "t"),
        DeQue("t", "paramQue_", "S_"),
        cast(n),
        Free("paramQue_", "t"),
    ), doc=doc, tparams=("S_",))


def _load_row() -> Func:
    """LoadRow<S_>: a GM row of any element type into an fp32 UB row. The type parameter ends in '_', which no
    spec name may, so it never shadows a class template parameter named after a dtype variable (kir verifies it)."""
    return _staged_load("LoadRow", "float", lambda n: vec(Op.CAST_FROM, dst=Ref("dst"), src=Ref("t"), count=n),
                        "GM row (T, U or fp32) -> fp32 UB row, n elements.")


def _load_byte_row() -> Func:
    """LoadByteRow<S_>: a GM row of a byte type (int8, uint8, bool as uint8) into the halves of an fp32 UB row: the
    bytes staged in paramQue_ as LoadRow stages a row, then Cast to half, exact (no byte -> float Cast exists:
    docs/reference/ascendc.md §1.12; rowprog.BYTE_DTYPES); the caller widens the halves to fp32 (a vwiden into
    another buffer)."""
    return _staged_load("LoadByteRow", "half",
                        lambda n: vec(Op.CAST, dst=Ref("dst"), src=Ref("t"), mode="CAST_NONE", count=n),
                        "GM row of bytes -> halves of a UB row, n elements (exact).")


def _store_row() -> Func:
    n = Sym("n")
    return Func("StoreRow", (Param("dst", "gm", "D_"), Param("src", "tensor", "float"), Param("rm", "mode"),
                             Param("n")), (
        Alloc("t", "accOutQue_", "D_"),
        vec(Op.CAST_TO, dst=Ref("t"), src=Ref("src"), mode=Sym("rm"), count=n),
        EnQue("accOutQue_", "t"),
        DeQue("t", "accOutQue_", "D_"),
        Copy(GmView("dst"), Ref("t"), Lit(1), mul(n, SizeOf("D_"))),
        Free("accOutQue_", "t"),
    ), doc="fp32 UB row -> GM row of D_ with round mode rm, n elements.", tparams=("D_",))


def _row_reduce(name: str, op: Op) -> Func:
    return Func(name, (Param("src", "tensor", "float"), Param("n")), (
        vec(op, dst=Ref("red_"), src=Ref("src"), tmp=Ref("redTmp_"), count=Sym("n")),
        Return(FLoad(Ref("red_"))),
    ), ret="float")


def _tree_partials(op: Op, fallback: tuple) -> tuple:
    """The one-copy form of ROW_SPLIT's cross-core exchange (SumPartials / MaxPartials / MinPartials): when every
    core's partial row of this exchange sits at the same workspace slot (b < 0: no per-batch slot choice) and the
    [cores, AlignUp(rn, 8)] fp32 tile fits in w_[0] and w_[1] (contiguous, each at least rowStride_ floats:
    `_fixed_buffers`), the partial rows of cores cFirst..cLast come in with one strided DataCopyPad (blockCount =
    the cores, blockLen = rn fp32, the GM gap between two cores' rows wsRowsPerCore_ * colAlign_ - rn floats as
    srcStride; one 32-byte aligned row a core) and fold in a pairwise tree, as COL_SPLIT's TotalOwnedRows does: with
    n rows left the last h = n / 2 (rounded down) are combined lane-wise onto the first h (one `op` over h rows),
    n becomes n - h, until one row is left in w_[0]: ceil(log2(cores)) vector instructions and one copy instead of
    one copy and one instruction a core. The tree depends only on the core count, so the result is deterministic
    (a sum in another order than core order; a maximum or minimum is the same value either way: docs/design.md
    "COL_SPLIT exchange"). Returns the statements: the tile's Lets and an If whose else branch is `fallback` (the
    core-order loop)."""
    w0, rn, d, h, n, ra = Ref("w_", slot=Lit(0)), Sym("rn"), Sym("d"), Sym("h"), Sym("cn"), Sym("ra")
    f4 = SizeOf("float")
    src = add(mul(add(mul(Sym("cFirst"), Sym("wsRowsPerCore_")), Sym("row")), _COLA), Sym("r0"))
    upper = Ref("w_", mul(sub(sub(n, d), h), ra), slot=Lit(0))
    return (
        Let("cn", add(sub(Sym("cLast"), Sym("cFirst")), Lit(1))),
        Let("ra", Fn("align_up", (rn, Lit(8)))),
        If((Constraint("<", Sym("b"), Lit(0)), Constraint("<=", mul(n, ra), mul(Lit(2), Sym("rowStride_")))), (
            Copy(w0, GmView("ws_", src), n, mul(rn, f4), mul(sub(mul(Sym("wsRowsPerCore_"), _COLA), rn), f4),
                 Lit(0), doc="the partial rows of cores cFirst..cLast: one row of w_ a core"),
            For("d", Lit(0), sub(n, Lit(1)), None, (
                Let("h", div(sub(n, d), Lit(2))),
                vec(op, dst=w0, src0=w0, src1=upper, count=mul(h, ra)),
                Assign("d", add(d, h)),
            ), doc="pairwise tree: the last h of the n = cn - d rows left folded onto the first h"),
        ), tuple(fallback), doc="one strided copy and a pairwise tree where the tile fits; else core by core"),
    )


def _sum_partials() -> Func:
    """The cross-core sum of ROW_SPLIT's partial rows (exchanged through workspace after a SyncAll): one strided
    copy and a pairwise tree where the tile fits (`_tree_partials`), else core by core in core order."""
    w0, w1, rn, c = Ref("w_", slot=Lit(0)), Ref("w_", slot=Lit(1)), Sym("rn"), Sym("c")
    slot = Select((Constraint(">=", Sym("b"), Lit(0)),
                   Constraint("!=", Sym("b"), div(Invoke("RowStartOf", (c,)), Sym("seqLen_")))), Lit(1), Lit(0))
    row = add(mul(add(mul(c, Sym("wsRowsPerCore_")), Sym("row"), mul(Sym("slot"), Sym("slotStride"))), _COLA), Sym("r0"))
    return Func("SumPartials", tuple(Param(n) for n in ("row", "slotStride", "r0", "rn", "cFirst", "cLast", "b")), (
        *_tree_partials(Op.ADD, (
            vec(Op.DUPLICATE, dst=w0, scalar=0.0, count=rn),
            For("c", Sym("cFirst"), Sym("cLast"), Lit(1), (
                Let("slot", slot),
                Call("LoadRow", (w1, GmView("ws_", row), rn), targs=("float",)),
                vec(Op.ADD, dst=w0, src0=w0, src1=w1, count=rn),
            ), inclusive=True),
        )),
    ), doc="Sum of the fp32 partial rows `row` (+ slotStride for a core whose last batch is b) of cores\n"
           "cFirst..cLast, columns [r0, r0 + rn), into w_[0]: one strided copy and a pairwise tree where the\n"
           "[cores, AlignUp(rn, 8)] tile fits in w_[0..1] and b < 0, else in core order.")


def _max_partials(name: str = "MaxPartials", op: Op = Op.MAX, what: str = "Maximum") -> Func:
    """The cross-core maximum (or, with name MinPartials and op Min, minimum) of ROW_SPLIT's partial rows
    (SumPartials' exchange with Max / Min): the first core's row is taken as it is (the op of a row with itself),
    then each later core's in core order, so no identity is needed; one strided copy and a pairwise tree where the
    tile fits (`_tree_partials`)."""
    w0, w1, rn, c = Ref("w_", slot=Lit(0)), Ref("w_", slot=Lit(1)), Sym("rn"), Sym("c")
    slot = Select((Constraint(">=", Sym("b"), Lit(0)),
                   Constraint("!=", Sym("b"), div(Invoke("RowStartOf", (c,)), Sym("seqLen_")))), Lit(1), Lit(0))
    row = add(mul(add(mul(c, Sym("wsRowsPerCore_")), Sym("row"), mul(Sym("slot"), Sym("slotStride"))), _COLA), Sym("r0"))
    return Func(name, tuple(Param(n) for n in ("row", "slotStride", "r0", "rn", "cFirst", "cLast", "b")), (
        *_tree_partials(op, (
            For("c", Sym("cFirst"), Sym("cLast"), Lit(1), (
                Let("slot", slot),
                Call("LoadRow", (w1, GmView("ws_", row), rn), targs=("float",)),
                If((Constraint("==", c, Sym("cFirst")),), (vec(op, dst=w0, src0=w1, src1=w1, count=rn),),
                   (vec(op, dst=w0, src0=w0, src1=w1, count=rn),)),
            ), inclusive=True),
        )),
    ), doc=f"{what} of the fp32 partial rows `row` (+ slotStride for a core whose last batch is b) of cores\n"
           "cFirst..cLast, columns [r0, r0 + rn), into w_[0]: one strided copy and a pairwise tree where the\n"
           "[cores, AlignUp(rn, 8)] tile fits in w_[0..1] and b < 0, else in core order (the same value).")


def _combine_totals() -> Func:
    """COL_SPLIT's exchange of the partial reductions over every axis: core 0 combines the cores' one-element
    partials (8 floats apart, a 32-byte block each) in core order, the first taken as it is."""
    w0, w1, c = Ref("w_", slot=Lit(0)), Ref("w_", slot=Lit(1)), Sym("c")
    return Func("CombineTotals", (Param("at"), Param("j"), Param("n"), Param("cLast"), Param("isMax", "bool")), (
        For("c", Lit(0), Sym("cLast"), Lit(1), (
            Call("LoadRow", (w1, GmView("ws_", add(Sym("at"), mul(add(mul(c, Sym("n")), Sym("j")), Lit(8)))), Lit(1)),
                 targs=("float",)),
            If((Constraint("==", c, Lit(0)),), (vec(Op.MAX, dst=w0, src0=w1, src1=w1, count=Lit(1)),),
               (If((Sym("isMax"),), (vec(Op.MAX, dst=w0, src0=w0, src1=w1, count=Lit(1)),),
                   (vec(Op.ADD, dst=w0, src0=w0, src1=w1, count=Lit(1)),)),)),
        ), inclusive=True),
    ), doc="The partial reduction `j` of `n` of cores 0..cLast (workspace at + (core * n + j) * 8), combined in\n"
           "core order (the maximum when isMax, else the sum) into w_[0] lane 0.")


def _combines(s: RowSchedule) -> set:
    """How the class's row-reduction levels combine the cores' partials: a subset of {"Add", "Max"}."""
    return {comb for _lv, _b, sl in s.levels + s.stream_levels for _slot, _j, comb in sl}


def _total_owned_rows(nlevel: int, combines: set) -> Func:
    """COL_SPLIT's exchange (COL_STREAM's too): each core totals the partial row reductions of the group rows it
    owns, by the combinations the class uses (`combines`: an isMax parameter picks one only when it has both).

    The owned rows [o0, o0 + on) of every core's partials (workspace slot `slot` of each core, nlevel * groupStride_
    floats apart) come in with one strided DataCopyPad (blockCount = cores, blockLen = on fp32, the GM gap between
    cores' slots as srcStride) into the [cores, AlignUp(on, 8)] fp32 tile xchg_ (one 32-byte aligned row a core,
    opgen.tiling.rowkernel `col_plan` counts it: 4 bytes a group row and 32 a core), then fold in a pairwise tree:
    with n rows left, the last h = n / 2 (rounded down) rows are combined lane-wise onto the first h (row
    n - h + i onto row i, one Add / Max over h rows), n becomes n - h, until one row is left: ceil(log2(cores))
    vector instructions. The tree depends only on the core count, so the totals are deterministic (the same bits on
    every run), though summed in another order than core order (docs/design.md "COL_SPLIT exchange")."""
    x, cores, oa = Ref("xchg_"), Sym("cores"), Sym("oa")
    per, gr, on, o0, f4 = Sym("rowsPerOwner"), Sym("groupStride_"), Sym("on"), Sym("o0"), SizeOf("float")
    is_max, fold = _tree_fold(combines, oa)
    params = (Param("slot"), Param("dst"), Param("k")) + is_max
    return Func("TotalOwnedRows", params, (
        Let("cores", BLOCK_NUM),
        Let("o0", mul(BLOCK_IDX, per)),
        Let("on", Select(Constraint("<", o0, Sym("k")), Fn("min", (sub(Sym("k"), o0), per)), Lit(0))),
        If((Constraint(">", on, Lit(0)),), (
            Let("oa", Fn("align_up", (on, Lit(8)))),
            Copy(x, GmView("ws_", add(mul(Sym("slot"), gr), o0)), cores, mul(on, f4),
                 mul(sub(mul(Lit(nlevel), gr), on), f4), Lit(0),
                 doc="every core's partials of the owned rows: one row of xchg_ a core"),
            fold,
            Copy(GmView("ws_", add(Sym("dst"), o0)), x, Lit(1), mul(on, f4)),
        )),
    ), doc="This core's rows [core * rowsPerOwner, ...) of the group: every core's partial row reductions `slot` in "
           "one strided\ncopy, combined in a pairwise tree over the cores (a sum, or the maximum when isMax), the "
           "totals written to\nworkspace at `dst`.")


def _tree_fold(combines: set, width) -> tuple:
    """(the isMax parameter, or none; the loop) of the exchange's pairwise tree over the xchg_ tile (one row of
    `width` fp32 lanes a core): with n = cores - d rows left, the last h = n / 2 rows are combined lane-wise onto the
    first h (one Add, or Max when isMax, over h rows), until one row is left -- ceil(log2(cores)) instructions, an
    order fixed by the core count (TotalOwnedRows, TotalAllRows; docs/design.md "COL_SPLIT exchange")."""
    x, cores, d, h = Ref("xchg_"), Sym("cores"), Sym("d"), Sym("h")
    upper = Ref("xchg_", mul(sub(sub(cores, d), h), width))
    ops = {"Max": vec(Op.MAX, dst=x, src0=x, src1=upper, count=mul(h, width)),
           "Add": vec(Op.ADD, dst=x, src0=x, src1=upper, count=mul(h, width))}
    both = len(combines) > 1
    combine = (If((Sym("isMax"),), (ops["Max"],), (ops["Add"],)) if both else
               ops["Max" if "Max" in combines else "Add"])
    loop = For("d", Lit(0), sub(cores, Lit(1)), None, (
        Let("h", div(sub(cores, d), Lit(2))),
        combine,
        Assign("d", add(d, h)),
    ), doc="pairwise tree: the last h of the n = cores - d rows left folded onto the first h")
    return ((Param("isMax", "bool"),) if both else ()), loop


def _total_all_rows(nlevel: int, combines: set) -> Func:
    """COL_SPLIT's exchange with one SyncAll (the tiling field xchgAll, `_exchange`): every core totals all k rows
    of the group. Every core's partials of the k rows (workspace at `src`, nlevel * groupStride_ floats apart) come
    in with one strided DataCopyPad (blockCount = cores, blockLen = k fp32: the bytes written, no more) into the
    [cores, AlignUp(k, 8)] fp32 tile xchg_, fold in the pairwise tree of `_total_owned_rows` (the same order over
    the cores, so every core gets the same bits), and row 0 is copied into tots_ at `dst` by an exact Muls by 1 over
    AlignUp(k, 8) lanes. Ints in elements; `combines` as for TotalOwnedRows (an isMax parameter only when both are
    used)."""
    x, cores, ka = Ref("xchg_"), Sym("cores"), Sym("ka")
    gr, f4 = Sym("groupStride_"), SizeOf("float")
    is_max, fold = _tree_fold(combines, ka)
    params = (Param("src"), Param("dst"), Param("k")) + is_max
    return Func("TotalAllRows", params, (
        Let("cores", BLOCK_NUM),
        Let("ka", Fn("align_up", (Sym("k"), Lit(8)))),
        Copy(x, GmView("ws_", Sym("src")), cores, mul(Sym("k"), f4), mul(sub(mul(Lit(nlevel), gr), Sym("k")), f4),
             Lit(0), doc="every core's partials of the group's rows: one row of xchg_ a core"),
        fold,
        vec(Op.MULS, dst=Ref("tots_", Sym("dst")), src0=x, scalar=FConst(1.0), count=ka),
    ), doc="Every row of the group: every core's partial row reductions at `src` in one strided copy, combined in "
           "a pairwise tree\nover the cores (a sum, or the maximum when isMax), the totals copied into tots_ at "
           "`dst`.")


def _row_start_of() -> Func:
    """ROW_SPLIT's row partition (opgen.tiling.rowkernel): the first rowsTail cores take rowsPerCore + 1 rows, the
    others rowsPerCore; the first row of core `core` (RowStartOf(blockNum) is the row count)."""
    core, per, tail = Sym("core"), Sym("rowsPerCore"), Sym("rowsTail")
    return Func("RowStartOf", (Param("core"),), (
        Let("big", add(per, 1)),
        Return(Select(Constraint("<", core, tail), mul(core, Sym("big")),
                      add(mul(tail, Sym("big")), mul(sub(core, tail), per)))),
    ), ret="int64_t", const=True)


def _core_of_row() -> Func:
    """The inverse of RowStartOf: the core whose ROW_SPLIT rows hold row `row` (the first rowsTail cores hold
    rowsPerCore + 1 rows each, the others rowsPerCore; opgen.tiling.rowkernel)."""
    row, per, tail = Sym("row"), Sym("rowsPerCore"), Sym("rowsTail")
    return Func("CoreOfRow", (Param("row"),), (
        Let("big", add(per, 1)),
        Let("head", mul(tail, Sym("big"))),
        Return(Select(Constraint("<", row, Sym("head")), div(row, Sym("big")),
                      add(tail, div(sub(row, Sym("head")), per)))),
    ), ret="int64_t", const=True, doc="The core whose ROW_SPLIT rows hold `row` (the inverse of RowStartOf).")


def _run_rows(extent: DimExpr) -> Func:
    """Rows of [r, r + left) in r's run of the innermost leading axis (of `extent` rows, at one GM stride)."""
    return Func("RunRows", (Param("r"), Param("left")), (
        Let("m", sub(extent, Bin("%", Sym("r"), as_dim(extent)))),
        Return(Fn("min", (Sym("m"), Sym("left")))),
    ), ret="int64_t", const=True,
        doc="Rows of [r, r + left) in r's run of the innermost leading axis (rows at one GM stride).")


def _gap_blocks_func() -> Func:
    """The UB gap in 32-B blocks between rows of `len` elements of `bytes` bytes stored `stride` elements apart (a
    DataCopyPad's UB-side stride, docs/reference/ascendc.md §1.8: each UB burst starts on a 32-B block)."""
    st, ln, by = Sym("stride"), Sym("len"), Sym("bytes")
    return Func("GapBlocks", (Param("stride"), Param("len"), Param("bytes")), (
        Return(div(sub(mul(st, by), Fn("align_up", (mul(ln, by), Lit(32)))), 32)),
    ), ret="uint32_t", static=True,
        doc="UB gap in 32-byte blocks between rows of `len` elements of `bytes` stored `stride` elements apart.")


def _process(s: RowSchedule) -> tuple:
    """Process: the method of the strategy the tiling chose (tiling field `strategy`, opgen.tiling.rowkernel):
    1 RowSplit, 3 ColStream (when the class streams), 4 RowChunk (when the class keeps rows resident; a `chunkable`
    class runs ROW_CHUNK in ColSplit), else ColSplit."""
    tail: tuple = (Call("ColSplit"),)
    for num, method, has in ((3, "ColStream", bool(s.stream_levels)), (4, "RowChunk", bool(s.res_levels))):
        if has:
            tail = (If((Constraint("==", Sym("strategy"), Lit(num)),), (Call(method),), tail),)
    return (If((Constraint("==", Sym("strategy"), Lit(1)),), (Call("RowSplit"),), tail),)


HELPER_METHODS = ("SumPartials", "MaxPartials", "MinPartials", "CombineTotals", "TotalOwnedRows", "TotalAllRows",
                  "LoadRow", "LoadByteRow",
                  "StoreRow", "RowSum", "RowMax", "RowStartOf", "CoreOfRow", "RunRows", "GapBlocks")
"""The helper methods of a rows kernel that are Kernel IR (each present only where the class uses it)."""

ROW_SPLIT_METHODS = ("RowSplit", "CopyIn", "Accumulate", "Compute", "ComputeFetch", "CopyOut", "RowsSum", "RowsMax")
"""The methods of the ROW_SPLIT schedule, in the order a class prints them."""
COL_FIELDS = ("strategy", "rowsPerPass", "colsPerCore", "colsTail", "colsPerPass", "groupRows")
"""The tiling-data fields the schedule reads (opgen.tiling.rowkernel)."""


def row_split_class(name: str, s: RowSchedule) -> KernelClass:
    """The Kernel IR of class `name`'s ROW_SPLIT schedule: Process calls RowSplit; RowSplit, CopyIn (when there is
    an input), Compute and CopyOut (when there is an output) are IR; the methods the file skeleton prints (the
    batch and column helpers, the Off_<operand> address functions) are `extern` (RowStartOf, RunRows and
    GapBlocks are IR helpers);
    the members are every buffer the strategies may use (rowclass prunes them to those its methods name, and
    kir's printer prints the class whole)."""
    ops = {t.op: t for t in s.row_in + s.row_out + s.stat_in + s.stat_out}
    gms: dict = {}
    for t in ops.values():
        if t.layout != "pieces":
            gms.setdefault(t.gm, GmTensor(f"gm_{t.gm}", t.ctype, cpp_name(t.gm)))
    for gm, ct in s.gm_all:   # the column operands LoadColumns reads
        gms.setdefault(gm, GmTensor(f"gm_{gm}", ct, cpp_name(gm)))
    # every queue depth 1: the prefetching pass loop dequeues a pass before it enqueues the next (pass_loop)
    locals_ = [Local(f"rowInQue_{t.op}", TPos.VECIN, True) for t in s.row_in]
    locals_ += [Local(f"rowOutQue_{t.op}", TPos.VECOUT, True) for t in s.row_out]
    locals_ += [Local(g.queue, TPos.VECIN, True) for g in stat_groups(s)]
    locals_ += [Local(f"statStageBuf_{t.op}") for t in s.stat_out]
    locals_ += [Local(g.queue, TPos.VECOUT, True) for g in stat_out_groups(s)]
    locals_ += [Local(f"resBuf_{t.op}") for t in s.row_in] + [Local("sumBuf_"), Local("xchgBuf_")]
    locals_ += [Local(f"resQue_{t.op}", TPos.VECIN, True) for t in s.row_in] if s.res_levels or s.prefetch or s.col_prefetch \
        else []
    # the reductions over all rows of ROW_SPLIT or of a COL_SPLIT group (the scratch: _col_setup)
    locals_ += [Local("rowsRedBuf_"), Local("rowValBuf_")] if s.reduce_segments or s.col_segments else []
    locals_ += [Local("workBuf_"), Local("browBuf_"), Local("colBuf_"), Local("paramQue_", TPos.VECIN, True),
                Local("accOutQue_", TPos.VECOUT, True), Local("reduceBuf_")]
    tensors = [TensorVar(f"rowIn_{t.op}", t.ctype) for t in s.row_in]
    tensors += [TensorVar(f"rowOut_{t.op}", t.ctype) for t in s.row_out]
    tensors += [TensorVar(g.tensor, g.dtype) for g in stat_groups(s) if len(g.members) > 1]
    tensors += [TensorVar(f"statIn_{t.op}", _qtype(t)) for t in s.stat_in]
    tensors += [TensorVar(f"statStage_{t.op}", "float") for t in s.stat_out]
    tensors += [TensorVar(f"res_{t.op}", t.ctype) for t in s.row_in]
    tensors += [TensorVar("w_", "float", max(s.temps, 1)), TensorVar("red_", "float"), TensorVar("redTmp_", "float"),
                TensorVar("sums_", "float"), TensorVar("tots_", "float"), TensorVar("xchg_", "float")]
    if s.reduce_segments or s.col_segments:
        tensors += [TensorVar("rowsRed_", "float"), TensorVar("rv_", "float", s.nsums)]
    if s.nbrow:
        tensors.append(TensorVar("brow_", "float", s.nbrow))
    if s.ncol:
        tensors.append(TensorVar("colv_", "float", s.ncol))
    ext = [Func(name, (), tuple(body), doc="the batch accumulators of curBatch_ finished and stored")
           if body else Func(name, extern=True)
           for name, body in (("FlushRow", s.flush_row_body), ("FlushCol", s.flush_col_body))]
    ext.append(Func("ZeroBatchSums", (), tuple(s.zero_batch_body), doc="the batch accumulators at their identity")
               if s.zero_batch_body else Func("ZeroBatchSums", extern=True))
    ext.append(Func("LoadBatch", (Param("b"),), tuple(s.load_batch_body),
                    doc="batch b's rows of the chunk [c0_, c0_ + n_): loaded and computed")
               if s.load_batch_body else Func("LoadBatch", (Param("b"),), extern=True))
    if s.load_cols_body:
        ext.append(Func("LoadColumns", (), tuple(s.load_cols_body),
                        doc="the column rows of the chunk [c0_, c0_ + n_): loaded, computed, accumulators zeroed"))
    else:
        ext.append(Func("LoadColumns", extern=True))
    ext += list(s.strided)
    methods = [_row_split(s), _col_split(s)] + ([_col_stream(s)] if s.stream_levels else []) + (
        [_row_chunk(s)] if s.res_levels else [])
    build = {"SumPartials": _sum_partials, "MaxPartials": _max_partials,
             "MinPartials": lambda: _max_partials("MinPartials", Op.MIN, "Minimum"), "CombineTotals": _combine_totals, "TotalOwnedRows": lambda: _total_owned_rows(s.nlevel, _combines(s)),
             "TotalAllRows": lambda: _total_all_rows(s.nlevel, _combines(s)),
             "LoadRow": _load_row, "LoadByteRow": _load_byte_row, "StoreRow": _store_row,
             "RowSum": lambda: _row_reduce("RowSum", Op.REDUCE_SUM),
             "RowMax": lambda: _row_reduce("RowMax", Op.REDUCE_MAX), "RowStartOf": _row_start_of,
             "CoreOfRow": _core_of_row,
             "RunRows": lambda: _run_rows(s.run_extent), "GapBlocks": _gap_blocks_func}
    methods += [build[h]() for h in HELPER_METHODS if h in s.helpers]
    if s.reduce_segments or s.col_segments:
        used = {c.method for _k, nodes in s.reduce_segments + s.block_segments
                + tuple(sg for _lv, segs in s.col_segments + s.col_block_segments for sg in segs) for c in walk(nodes)
                if isinstance(c, Call)}
        used |= {m[:-1] for m in used if m in ("RowsSumB", "RowsMaxB")}   # their fallback
        methods += [f for f in (_rows_reduce("RowsSum", Op.ADD, Op.WHOLE_REDUCE_SUM),
                                _rows_reduce("RowsMax", Op.MAX, Op.WHOLE_REDUCE_MAX),
                                _rows_reduce_blocks("RowsSumB", Op.ADD, Op.WHOLE_REDUCE_SUM, "RowsSum"),
                                _rows_reduce_blocks("RowsMaxB", Op.MAX, Op.WHOLE_REDUCE_MAX, "RowsMax"))
                    if f.name in used]
    if s.row_in or s.stat_in:
        methods.append(_copy_in(s))
    if s.acc_body:
        methods.append(_accumulate(s))
    if not s.acc_body or s.row_out or s.stat_out:   # a two-pass kernel without row outputs has no second pass
        methods.append(_compute(s))
    if fetch_loop(s):   # the one-buffer pass loop's (RowSplit)
        methods.append(_compute(s, fetch=True))
    if s.row_out or s.stat_out:
        methods.append(_copy_out(s))
    return KernelClass(
        name, s.tiling_struct, args=tuple(s.args) or tuple(cpp_name(g) for g in gms), gms=tuple(gms.values()) + (GmTensor("ws_", "float", workspace=True),),
        locals=tuple(locals_),
        tensors=tuple(tensors),
        scalars=tuple(ScalarVar(n) for n in MEMBER_SCALARS) + tuple(ScalarVar(m) for m, _f in s.dim_values)
        + tuple(ScalarVar(n, "float") for n in s.float_scalars) + tuple(ScalarVar(m, "bool") for m, _a in s.presence)
        + tuple(ScalarVar(m, "float") for m, _g in s.gm_scalars),
        presence=tuple(s.presence), ws_field="workspaceBytes",
        fields=COL_FIELDS + ("rowsPerOwner", "rowsPerCore", "rowsTail")
        + (("rowQueBufs",) if s.row_in or s.row_out else ()) + (("colsPerReduceCore",) if s.cross_core else ())
        + (("colBatchRows",) if s.col_segments else ())
        + (("xchgAll", "xchgOff1") if "TotalAllRows" in s.helpers else ())
        + (("colChunkLoads",) if s.res_levels and s.ncol and s.load_cols else ())
        + tuple(s.fields)
        + tuple(f for _m, f in INIT_MEMBERS if f not in s.fields)
        + tuple(f"{a[len('attr_'):]}Bits" for a in s.float_scalars if a.startswith("attr_")),
        init=tuple(Assign(m, a.expr) for m, a in s.presence if isinstance(a, TilingCond))   # runtime guards
        + tuple(Assign(m, Sym(f)) for m, f in INIT_MEMBERS) + tuple(Assign(m, f) for m, f in s.dim_values)
        + tuple(FAssign(a, FBits(Sym(f"{a[len('attr_'):]}Bits"))) for a in s.float_scalars if a.startswith("attr_"))
        + tuple(FAssign(m, FLoad(GmView(f"gm_{g}", Lit(0)))) for m, g in s.gm_scalars),
        process=_process(s),
        methods=tuple(methods + ext), tparams=tuple(s.tparams), tparam_bytes=tuple(s.tparam_bytes),
        doc="ROW_SPLIT / COL_SPLIT schedule")
