"""The tiling program and UB buffer plans of a rows-family kernel, derived from its lowered row programs.

A rows kernel's UB needs follow from its row programs (opgen.kernel.rows), summarised as `RowCounts`: the
maximum over the spec's specialisations of the row inputs and outputs (per dtype), per-row statistics, fp32
row temporaries, batch and column rows, accumulators, row reductions and their levels (`counts_of`). The
buffer plan and the tiling program are built from those counts and the kernel's layout
(opgen.kernel.rowlayout), so the budget proven here (opgen.tiling.ub_proof) is the one the kernel allocates.

ROW_SPLIT (strategy 1): rows split over the AIV cores in contiguous ranges (the first `rowsTail` cores take one
more row); `rowsPerPass` rows per UB pass are copied in with one DataCopyPad per operand and run of rows
(double-buffered TQue; one buffer per queue where that fits more rows a pass and the cost model prices it faster,
each input freed after its last read and each output allocated before its first write: `rowQueBufs`,
opgen.tiling.rows.row_split, docs/design.md "Copy/compute overlap"), computed one row at a time in fp32
temporaries, copied out. Batch rows (brow) are
reloaded when a row enters a new batch; per-batch sums of a batch that crosses a core boundary and the
per-kernel column sums go to workspace as fp32 partials and are summed after SyncAll in core order, the columns
split over the cores (`colsPerReduceCore`): deterministic.

COL_SPLIT (strategy 2), when a row does not fit or there are fewer rows than cores and no row reductions: the
row axis split over the cores in `colsPerCore` slices (multiples of 16); each core walks its slice in
`colsPerPass` chunks (the whole slice when the program reduces rows: its slices of a group of `groupRows` rows
stay resident while, per row-reduction level, partial row sums / maxima are exchanged through workspace — SyncAll,
each core combines its `rowsPerOwner` rows over the cores in a fixed pairwise tree (`xchg_plan`), SyncAll; or,
where the extra reads stay within 1 / XCHG_ALL_SHARE of the row bytes (`xchg_all`, the field xchgAll: rows of tens
of MB), one SyncAll and every core combines every row of the group), then computes its output slices. The core owns its columns for every row: no cross-core column sums. Inputs are read
from GM once.

COL_STREAM (strategy 3; only in a kernel whose spec lets a core's slice outgrow UB: `with_streaming`), when even
a core's resident slice of one row does not fit: the slice walked in `colsPerPass` chunks (whole 32-byte blocks,
the last a tail) of `groupRows` rows, re-read from GM for each row-reduction level (partials combined over the
chunks in chunk order, then exchanged as in COL_SPLIT; a softmax's maximum and sum in one online pass) and once
more for the outputs: the row inputs are read at most (levels + 1) times (docs/design.md, COL_STREAM).

ROW_CHUNK (strategy 4; for a `chunkable` program: nothing combined across a row's columns or across rows, no
per-row output): rows split over the cores as in ROW_SPLIT, each row walked in `colsPerPass` column chunks of
`groupRows` rows (COL_SPLIT's chunk loop over this core's rows and the whole row; for such a program both run with
two buffers of every row input and output, the next chunk's copy issued before this one's compute, and the row or
slice cut into the fewest chunks that fit, of even width: `_even_chunks`). Where a row does not fit UB it
competes with COL_SPLIT by estimated time (`_chunk_or_slice`: the cost model's memory, vector and issue terms,
docs/reference/kernel_cost.md §2): few rows leave cores idle in ROW_CHUNK, many rows make COL_SPLIT issue every
instruction once per row on every core. For a `row_resident` program (row reductions, nothing summed over rows)
ROW_CHUNK keeps a group's row inputs in UB whole, as stored in GM (two buffers; the chunk is sized for one resident
row, so a group is one row in practice; the next group's copy is issued as soon as this group's rows are
dequeued, so it overlaps this group's whole work),
and runs each reduction level and then the outputs over the row's column chunks with fp32 temporaries of one
chunk: the reductions complete on the core that owns the row, nothing is exchanged and every input is read once
(`_resident_or_slice` prices it against COL_SPLIT, whose groups pay two SyncAll per level).

Units: elements unless a name ends in Bytes. Facts: docs/reference/ascendc.md §1.5 (TQue/TBuf, double buffering),
§1.7-§1.8 (DataCopyPad, 32-byte UB alignment), §2.5 (blockDim, tails), §3 (UB sizes).
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

from opgen.errors import SpecError
from opgen.kernel.rowcounts import (COL_SPLIT, COL_STREAM, ROW_CHUNK, ROW_SPLIT, RowCounts, chunk_prefetch, col_prefetch, chunkable,  # noqa: F401
                                    fetches_next_pass, fixed_needs, row_pool_bound, row_resident, stage_dtypes, stage_element)
from opgen.platforms.cost import (BARRIER_CYCLES, BURST_OVERHEAD_BYTES, CLOCK_HZ, FLAG_WAIT_CYCLES, HBM_BYTES_PER_S,
                                  L2_BYTES_PER_S, SYNC_ALL_CYCLES, VEC_ISSUE_CYCLES, VEC_REPEAT_BYTES)
from opgen.kernel.rowprog import MASK_LANES, NARROW_LANES
from opgen.tiling.buffers import Buffer, fixed_bytes, row_bytes
from opgen.tiling.program import TilingProgram, Var, align_up, ceil_div, emax, emin, lit, select
from opgen.tiling.rows import col_split, row_split
from opgen.tiling.ub_proof import prove_ub

STREAM_PROBE_COLS = 4096
"""Columns at which a streaming chunk's UB bytes per column are measured (a multiple of 256: the reduction scratch
of `row_reduce_elems` is exact there, one pair per 64 columns)."""
STREAM_GROUP_ROWS = 8
"""COL_STREAM sizes its chunk for at most STREAM_GROUP_ROWS rows at once (weights and batch rows are re-read once per
group, and each group costs its exchanges' SyncAlls), fewer (4, 2, 1) where the cost model prices their wider chunks
cheaper (`_stream_chunk_cols`), and only while a row's GM stride in bytes stays below 2^32 (the DataCopyPad stride
field of a copy of several rows is 32 bits, docs/reference/ascendc.md §1.8)."""
SELECT_SCRATCH_BYTES = 8192
"""UB kept free by a kernel that uses Select in its tensor-scalar or tensor-tensor mode: on A2/A3 the instruction uses
a scratch block at 184 KB of the 192 KB UB (docs/reference/ascendc.md §1.9, Select's constraints: reserve 8 KB)."""
PASS_SLACK_BYTES = 1024
"""UB bytes kept free when the column chunk of a COL_SPLIT pass is sized (rounding of the sum buffers)."""


def reduce_tmp_elems(cols):
    """fp32 scratch of ReduceSum over `cols` elements: one partial per 256-byte repeat plus the result block
    (docs/reference/ascendc.md §1.9)."""
    return align_up(ceil_div(cols, 64), 8) + 8


def row_reduce_elems(cols):
    """fp32 result block and scratch of a rows kernel's row reductions over `cols` elements: the result block plus
    ReduceMax's first-round (value, index) pair per 256-byte repeat, which also covers ReduceSum's partials
    (CANN API "ReduceMax", sharedTmpBuffer size without the index)."""
    return align_up(ceil_div(cols, 64) * 2, 8) + 8


def _by_dtype(counts, bytes_of, num: int, name: str, kind: str, per_row: bool, length, doc: str) -> list[Buffer]:
    return [Buffer(f"{name}{d}", kind, num * n, per_row, length, bytes_of(d), f"{doc} ({d})")
            for d, n in counts if n]


def row_plan(c: RowCounts, col_align, bytes_of, bufs=2) -> list[Buffer]:
    """ROW_SPLIT buffers: per-row buffers scale with rowsPerPass (bytes per row), the rest is fixed. `bufs`: buffers
    per row queue (2, 1, or the tiling expression of the field rowQueBufs, opgen.tiling.rows.row_split)."""
    plan = _by_dtype(c.row_in, bytes_of, bufs, "inQue", "TQue<VECIN>", True, col_align, "row inputs")
    plan += _by_dtype(c.row_out, bytes_of, bufs, "outQue", "TQue<VECOUT>", True, col_align, "row outputs")
    plan += stat_plan(c)
    if getattr(c, "batch", 0) and c.rsums:   # row reductions over all rows of a pass (rowsched._rows_reduce)
        fits = col_align <= 8 * 255   # rowsched.ROWS_REDUCE_STRIDE: allocated only then
        # rows of 65 to 2040 elements fold into it (RowsSum / RowsMax); the eight-rows forms (rowsched.BLOCK_FITS)
        # hold their Brcb blocks and per-row scalar slots in it at every row length
        plan.append(Buffer("rowsRedBuf", "TBuf<VECCALC>", 1, True, select(fits, 64, 0), 4,
                           "per row: 64 fp32 partial sums or maxima, Brcb blocks and scalar slots"))
        plan.append(Buffer("rowValBuf", "TBuf<VECCALC>", c.rsums, True, select(fits, 1, 0), 4,
                           "per row: its row reductions (fp32)"))
        plan.append(Buffer("rowValSlack", "TBuf<VECCALC>", c.rsums, False, select(fits, 8, 0), 4,
                           "32-byte rounding of rowValBuf"))
    plan += _fixed_plan(c, col_align, ROW_SPLIT, bytes_of)
    return plan


def col_batch(c: RowCounts) -> bool:
    """Whether a COL_SPLIT kernel class may run a group's rows several at a time (opgen.kernel.rowclass
    `_col_batchable`: a `batchable` program with row reductions; the kernel decides per class, never where this is
    False): the tiling then has the field colBatchRows (`col_batch_rows`)."""
    return bool(getattr(c, "batch", 0) and c.rsums and c.levels)


COL_BATCH_UB_SHARE = 4
"""COL_SPLIT's sub-batch of rows (`col_batch_rows`) keeps its fp32 row temporaries and RowsSum scratch in at most
1 / COL_BATCH_UB_SHARE of UB where 8 rows fit there: the rest holds the group's resident slices, whose rows share
each exchange's fixed cost (SyncAll, TotalOwnedRows' copy and tree over every core's partials)."""


XCHG_ALL_SHARE = 2000
"""COL_SPLIT's exchange with one SyncAll (every core totals every row of a group: the tiling field xchgAll,
`xchg_all`) reads each core's partials on every core. Against the owners' exchange (each owner reads every core's
partials of its rows, writes their totals, every core reads the totals back: 2 * colCores + 1 fp32 a row reduction
of a row) that is colCores^2 - 2 * colCores - 1 more fp32 reads a row reduction of a row (L2 hits: the partials were
just written, but GM bytes all the same). The tiling takes it only while those extra bytes stay within
1 / XCHG_ALL_SHARE of the row operands' bytes (each read or written once: a lower bound of the kernel's bytes), so a
kernel's GM ratio (bench/results: bytes over the minimum, workspace included) rises by at most 0.0005 -- below the
last of the three decimals the bench prints (no GM ratio above the bench's). Over 48 cores that wants rows
of at least 2000 * 4 * 2207 bytes of row operands a row reduction (17.7 MB: RmsNorm fp16 rows of 4.4 M elements);
the bench's long rows keep the owners' exchange (SoftmaxV2 [48, 262144] fp32: 0.84 %; [8, 786432]: 0.28 %). With
one or two cores it reads fewer bytes than the owners' and is always taken."""


def xchg_extra_bytes(c: RowCounts, R, col_cores):
    """GM bytes the one-SyncAll exchange (`xchg_all`) reads beyond the owners' exchange over the whole kernel, a
    tiling expression (negative for one or two cores): R rows x rsums row reductions x 4 bytes x (colCores^2 -
    2 * colCores - 1) (XCHG_ALL_SHARE's count; opgen.kernel.rowsched `_exchange`, `_exchange_owned`)."""
    return R * (max(c.rsums, 1) * 4) * (col_cores * col_cores - 2 * col_cores - 1)


def xchg_all(p, c: RowCounts, R, H, col_cores, bytes_of):
    """The tiling field xchgAll of a rows kernel with row reductions (opgen.kernel.rowsched `_exchange`): 1 when a
    COL_SPLIT / COL_STREAM exchange takes one SyncAll (every core reads all cores' partials of the group's rows into
    the [colCores, AlignUp(groupRows, 8)] tile and totals them, its partials in one of two workspace regions that
    alternate), 0 for two (the owners total their rows, write the totals, SyncAll, every core reads them back). 1
    where the extra reads (`xchg_extra_bytes`) stay within 1 / XCHG_ALL_SHARE of the row operands' R * H * (bytes of
    an element of every row operand) bytes (a tiling expression; `bytes_of` an IR dtype name's bytes; the rule:
    docs/design.md "COL_SPLIT exchange", One SyncAll per exchange). Each exchange then saves one SyncAll
    (SYNC_ALL_CYCLES, docs/reference/kernel_cost.md §2), the totals' write and read-back."""
    elem = _cost_terms(c, bytes_of)[0]
    return p.let("xchgAll", select(xchg_extra_bytes(c, R, col_cores) * XCHG_ALL_SHARE <= R * H * elem, 1, 0),
                 f"1: a COL_SPLIT exchange takes one SyncAll (every core totals every row; its extra GM reads within "
                 f"1 / {XCHG_ALL_SHARE} of the row bytes), 0: two (owners total)", True)


def _sync_alls(c: RowCounts):
    """SyncAll calls of one row-reduction level's exchange: 2 - xchgAll (a tiling expression; `xchg_all`)."""
    return (2 - Var("xchgAll")) if c.levels else lit(2)


def _exchange_cycles(c: RowCounts, col_cores, bytes_of):
    """AI Core cycles of one group's cross-core exchanges in COL_SPLIT (opgen.kernel.rowsched `_exchange`;
    docs/reference/kernel_cost.md §2): per row-reduction level its SyncAll (`_sync_alls`: two, or one where
    xchgAll), the flag waits of the strided copy of every core's partials (MTE2 -> V) and of the totals out
    (V -> MTE3), that copy's bursts (one a core) and ceil(log2(cores)) tree instructions (`tree_steps`), each with
    its barrier. A tiling expression."""
    _elem, _ins, _outs, (num, den), _lanes32, per_issue = _cost_terms(c, bytes_of)
    return max(c.levels, 1) * (_sync_alls(c) * int(SYNC_ALL_CYCLES) + 2 * FLAG_WAIT_CYCLES
                               + tree_steps(col_cores) * per_issue + col_cores * BURST_OVERHEAD_BYTES * num // den)


def _slice_issue_cycles(c: RowCounts, R, cols, group_rows, batch_rows):
    """Issue cycles (docs/reference/kernel_cost.md §2: VEC_ISSUE + BARRIER an instruction, FLAG_WAIT a hand-off) of
    one core's COL_SPLIT instructions over R rows of `cols` columns in groups of `group_rows`:
      batch_rows = 0  row by row: vinstrs instructions a row, and each of its rsums row reductions one more (the
                      second pass of ReduceSum / ReduceMax) and a V -> S wait (RowSum's scalar result, then SetValue)
      batch_rows = b  per sub-batch of b rows of a group: vinstrs instructions, each row reduction by RowsSum
                      ceil(cols / 64) + 1 of them (eight rows a repeat: no scalar round trip)
    `batch_rows` a Python int, the others tiling expressions."""
    per_issue = VEC_ISSUE_CYCLES + BARRIER_CYCLES
    vin = max(c.vinstrs, 1)
    if isinstance(batch_rows, int) and batch_rows == 0:
        return R * (vin * per_issue + c.rsums * (per_issue + FLAG_WAIT_CYCLES))
    batches = ceil_div(R, group_rows) * ceil_div(group_rows, batch_rows)
    return batches * ((vin + c.rsums * (ceil_div(cols, 64) + 1)) * per_issue)


def col_batch_rows(p, c: RowCounts, cols, R, ub, col_cores, bytes_of, S=None, B=None):
    """The tiling field colBatchRows (opgen.kernel.rowsched `_col_rows`): rows of a COL_SPLIT group run at once, a
    multiple of 8 (each sub-batch's first row starts a 32-byte block of the per-row buffers, eight rows fill a
    repeat of RowsSumB and the Brcb forms), or 0 (row by row); 0 whenever a slice is longer than 2040 columns
    (RowsSum's repeat stride). Where 8 or more rows' fp32 row temporaries (`cols` columns a row) and 64-float
    RowsSum scratch fit 1 / COL_BATCH_UB_SHARE of UB: the most that do, at most 248 (one instruction's repeatTime)
    and at most the rows rounded up to 8. Else (a wide slice) 8 rows, taking more than that share from the group's
    resident slices, where their group still takes a row and the cost model (docs/reference/kernel_cost.md §2)
    prices them below row by row: each as its instruction issues (`_slice_issue_cycles`) plus its groups'
    exchanges (`_exchange_cycles`), the groups those of `col_plan` with its temporaries.

    A program with per-batch rows (c.brow; `S` rows a batch, `B` batches) runs its groups within one batch when it
    runs sub-batches (opgen.kernel.rowsched `_col_split`: a group ends at its batch's last row, so the sub-batches
    read the batch rows as column rows), which adds up to a group a batch: colBatchRows (the share's rows, else 8)
    is taken only where the cost model prices those groups (B ceil(S / groupRows) of them, each with its exchange,
    its sub-batches' issues) below row by row's ceil(R / groupRows); else 0."""
    temps = fixed_needs(c, COL_SPLIT)["workBuf"]
    per = lit(temps * 4) * cols + 64 * 4
    share = p.let("colBatchShareRows", emin(emin(lit(248), align_up(R, 8)), (ub // COL_BATCH_UB_SHARE) // per) // 8 * 8,
                  f"COL_SPLIT: rows of temporaries that fit 1 / {COL_BATCH_UB_SHARE} of UB (a multiple of 8)")
    xchg = _exchange_cycles(c, col_cores, bytes_of)

    def group(b):
        plan = col_plan(c, cols, bytes_of, lit(b))
        fit = select(ub > fixed_bytes(plan), (ub - fixed_bytes(plan)) // row_bytes(plan), 0)
        return fit, emax(1, emin(emin(fit, 1024), R))

    _fit0, rows0 = group(0)
    fit8, rows8 = group(8)
    cost0 = p.let("colBatchCost0", _slice_issue_cycles(c, R, cols, rows0, 0) + ceil_div(R, rows0) * xchg,
                  "COL_SPLIT row by row: estimated issue and exchange cycles of a core")
    if getattr(c, "brow", 0):   # groups within one batch (docstring)
        b = p.let("colBatchPick", select(share >= 8, share, 8), "COL_SPLIT: rows of a sub-batch when sub-batches run")
        fitb, rowsb = group(b)
        groups = p.let("colBatchGroups", B * ceil_div(S, rowsb), "COL_SPLIT in sub-batches: groups, one batch each")
        per = (max(c.vinstrs, 1) + c.rsums * (ceil_div(cols, 64) + 1)) * (VEC_ISSUE_CYCLES + BARRIER_CYCLES)
        costb = p.let("colBatchCostRuns", groups * ceil_div(emin(rowsb, S), b) * per + groups * xchg,
                      "COL_SPLIT in sub-batches of groups within one batch: estimated issue and exchange cycles of a "
                      "core")
        return p.let("colBatchRows", select((cols <= 8 * 255) & (fitb >= 1) & (costb < cost0), b, 0),
                     "COL_SPLIT: rows of a group run at once (a multiple of 8; 0: row by row)", True)
    cost8 = p.let("colBatchCost8", _slice_issue_cycles(c, R, cols, rows8, 8) + ceil_div(R, rows8) * xchg,
                  "COL_SPLIT in sub-batches of 8 rows: estimated issue and exchange cycles of a core")
    wide = select((fit8 >= 1) & (cost8 < cost0), 8, 0)
    return p.let("colBatchRows", select(cols <= 8 * 255, select(share >= 8, share, wide), 0),
                 "COL_SPLIT: rows of a group run at once (a multiple of 8; 0: row by row)", True)


def col_plan(c: RowCounts, cols, bytes_of, batch_rows=None, in_bufs=None, out_bufs=None) -> list[Buffer]:
    """COL_SPLIT buffers for `cols` columns per pass: the group's slices scale with groupRows (two buffers of each
    row input and output for a `chunkable` program, whose ColSplit prefetches the next item: docs/design.md "Kernel
    IR", ROW_CHUNK; one otherwise, and where two would pass the event-id pool: rowcounts.chunk_prefetch). With `batch_rows` (a tiling expression: colBatchRows where COL_SPLIT runs,
    `col_batch_rows`; 0 for COL_STREAM, which shares the plan) the fp32 row temporaries hold max(batch_rows, 1)
    rows and RowsSum's scratch 64 fp32 a row of them (slices of 65 to 2040 columns; opgen.kernel.rowsched
    `_col_buffers`). `in_bufs` / `out_bufs` (ints or tiling expressions) override the buffers a row input / output
    takes: COL_STREAM's chunks of a `col_prefetch` program take two of each (`_stream_program`)."""
    two = chunk_prefetch(c)
    if in_bufs is not None or two:   # items prefetched through two buffers (opgen.kernel.rowsched `_chunk_in`)
        plan = _by_dtype(c.row_in, bytes_of, 2 if in_bufs is None else in_bufs, "resQue", "TQue<VECIN>", True, cols,
                         "row-input chunks of a group")
    else:
        plan = _by_dtype(c.row_in, bytes_of, 1, "resBuf", "TBuf<VECCALC>", True, cols, "row-input slices of a group")
    outs = out_bufs if out_bufs is not None else 2 if two else 1
    plan += _by_dtype(c.row_out, bytes_of, outs, "outQue", "TQue<VECOUT>", True, cols,
                      "row-output slices of a group")
    plan += stat_plan(c)
    plan += _sum_plan(c)
    plan += xchg_plan(c)
    for b in _fixed_plan(c, cols, COL_SPLIT, bytes_of):
        plan.append(dataclasses.replace(b, length=b.length * emax(batch_rows, 1),
                                        doc=b.doc + ", colBatchRows rows of them")
                    if batch_rows is not None and b.name == "workBuf" else b)
    if batch_rows is not None:
        fold = (cols <= 8 * 255) & (batch_rows >= 1)   # rowsched `_col_buffers` (the eight-rows forms: any slice)
        plan.append(Buffer("rowsRedBuf", "TBuf<VECCALC>", 1, False, select(fold, batch_rows * 64, 0), 4,
                           "64 fp32 partial sums, Brcb blocks or scalar slots a row of a sub-batch"))
    return plan


def xchg_plan(c: RowCounts) -> list[Buffer]:
    """The exchange tile of a COL_SPLIT / COL_STREAM kernel with row reductions (opgen.kernel.rowsched
    `_total_owned_rows`): every core's fp32 partial of the group rows this core owns, one 32-byte aligned row a core,
    colCores * AlignUp(rowsPerOwner, 8) floats. With rowsPerOwner = ceil(groupRows / colCores) that is below
    groupRows + 8 * colCores floats, counted as 4 bytes a group row and 32 bytes a core, so the tile fits whenever
    the group does and the owned rows are exchanged in one copy and one tree (no chunks). [] without row
    reductions."""
    if not c.levels:
        return []
    per = select(Var("xchgAll") >= 1, Var("colCores"), 1)   # xchgAll: every core's partials of every group row
    return [Buffer("xchgBuf", "TBuf<VECCALC>", 1, True, per, 4, "exchange tile: every core's partial of an owned row "
                   "(fp32; of every row where xchgAll)"),
            Buffer("xchgSlack", "TBuf<VECCALC>", 8, False, Var("colCores"), 4, "exchange tile: its rounding of the "
                   "owned rows to 8 and up to one more row, per core")]


def tree_steps(n):
    """Folds of the exchange's pairwise tree over `n` cores' partials (opgen.kernel.rowsched `_total_owned_rows`:
    n -> n - n // 2 until 1): ceil(log2(n)) for n >= 1, as a tiling expression (n up to 4096 cores)."""
    steps = lit(0)
    for j in range(12):
        steps = steps + select(n > (1 << j), 1, 0)
    return steps


def _sum_plan(c: RowCounts) -> list[Buffer]:
    """The group's partial and total row reductions (fp32, one slot a row) and their 32-byte rounding."""
    n = c.rsums_per_level + c.rsums
    return [Buffer("sumBuf", "TBuf<VECCALC>", n, True, 1, 4, "partial and total row reductions of the group (fp32)"),
            Buffer("sumSlack", "TBuf<VECCALC>", n, False, 8, 4, "32-byte rounding of the sum buffers")]


def resident_plan(c: RowCounts, col_align, cols, bytes_of, col_chunks=None) -> list[Buffer]:
    """ROW_CHUNK buffers of a `row_resident` program with chunks of `cols` columns: per row of a group, its inputs
    whole (`col_align` elements as stored in GM, two buffers), its output chunks (two buffers), its statistics and
    row reductions; fixed, the fp32 temporaries of one chunk and the fp32 column rows whole (no exchange: no partial
    rows staged) -- or, with `col_chunks` (a tiling expression, the field colChunkLoads: 1 where the column rows are
    loaded per chunk, opgen.kernel.rowsched `_chunk_head`), column rows of one chunk where it is 1."""
    plan = _by_dtype(c.row_in, bytes_of, 2, "resQue", "TQue<VECIN>", True, col_align, "whole row inputs of a group")
    plan += _by_dtype(c.row_out, bytes_of, 2, "outQue", "TQue<VECOUT>", True, cols, "row-output chunks of a group")
    plan += stat_plan(c)
    plan += _sum_plan(c)
    for b in _fixed_plan(c, cols, ROW_CHUNK, bytes_of):   # the column rows whole, loaded once per core
        if b.name == "colBuf" and col_chunks is None:
            b = dataclasses.replace(b, length=col_align, doc=b.doc + ", whole rows")
        elif b.name == "colBuf":
            b = dataclasses.replace(b, length=select(col_chunks >= 1, cols, col_align),
                                    doc=b.doc + ", whole rows (colChunkLoads 0) or one chunk (1)")
        plan.append(b)
    return plan


def stat_plan(c, out_doc: str = "per-row outputs (T, fp32 max)") -> list[Buffer]:
    """Per-row statistic buffers of counts `c` (fields stat_in, stat_out: RowCounts or HeadCounts): the input
    queue, the fp32 staging and output queue (one fp32 slot per row each, two in the output queue of an int64
    output: `stat_out_words`; `out_doc` describes the output queue), and the 32-byte rounding slack of the stat
    buffers."""
    plan = []
    if c.stat_in:
        plan.append(Buffer("statInQue", "TQue<VECIN>", 2 * c.stat_in, True, 1, 4, "per-row fp32 inputs"))
    if c.stat_out:
        words = getattr(c, "stat_out_words", 0) or c.stat_out   # an int64 output's queue holds 8 bytes a row
        plan.append(Buffer("statStage", "TBuf<VECCALC>", c.stat_out, True, 1, 4, "per-row fp32 results"))
        plan.append(Buffer("statOutQue", "TQue<VECOUT>", 2 * words, True, 1, 4, out_doc))
    n = 2 * c.stat_in + c.stat_out + 2 * (getattr(c, "stat_out_words", 0) or c.stat_out)
    if n:
        plan.append(Buffer("statSlack", "TBuf<VECCALC>", n, False, 8, 4, "32-byte rounding of the stat buffers"))
    return plan


def _fixed_plan(c: RowCounts, cols, strategy: int, bytes_of) -> list[Buffer]:
    """The fixed buffers of `fixed_needs(c, strategy)` for `cols` columns per pass (bytes: their fp32 rows; paramQue's
    its staged element, opgen.kernel.rowcounts.stage_dtypes, `bytes_of` an IR dtype name's bytes)."""
    need = fixed_needs(c, strategy)
    top, params = stage_element(stage_dtypes(c, strategy))
    stage = None if top is None else lit(top)
    for v in params:   # dtype variables: their bytes at run time
        stage = bytes_of(v) if stage is None else emax(stage, bytes_of(v))
    docs = {"workBuf": ("TBuf<VECCALC>", "fp32 row temporaries"),
            "browBuf": ("TBuf<VECCALC>", "fp32 batch rows and their sums"),
            "colBuf": ("TBuf<VECCALC>", "fp32 column rows and their sums"),
            "paramQue": ("TQue<VECIN>", "batch/column row staging (any dtype)"),
            "accOutQue": ("TQue<VECOUT>", "sum outputs staging (any dtype)"),
            "reduceBuf": ("TBuf<VECCALC>", "row reduction result and scratch")}
    out = []
    for name, n in need.items():
        if n:
            kind, doc = docs[name]
            length = row_reduce_elems(cols) if name == "reduceBuf" else cols
            per_row = name == "workBuf" and strategy == ROW_SPLIT and bool(getattr(c, "batch", 0))
            out.append(Buffer(name, kind, n, per_row, length, stage if name == "paramQue" else 4,
                              doc + (" per row of a pass" if per_row else "")))
    return out


def streamable(c: RowCounts) -> bool:
    """Whether a rows kernel of counts `c` can run COL_STREAM (module docstring): it reduces rows (levels), and
    holds nothing across the column chunks of a group but its per-row partial reductions — no two-pass
    reductions over rows (acc_reads), no sums over rows (column / batch accumulators, totals over every axis)."""
    return bool(c.levels) and not (c.acc_reads or c.col_acc or c.brow_acc or c.total_acc)


def with_streaming(spec, inputs: dict, prog, plans: dict, streaming) -> tuple:
    """(program, plans, proven): the ROW_SPLIT / COL_SPLIT tiling program `prog` (plans `plans`) with the UB
    proof's checked cases when it fits every shape spec `spec` allows (opgen.tiling.ub_proof, its inputs read as
    `inputs`); when it fails with a UB overflow, `streaming()` — the program with COL_STREAM — and None (the
    pipeline proves that one). So a kernel whose rows fit at the spec's bounds has no streaming schedule. Another
    SpecError of the proof: (prog, plans, None), the pipeline's proof reports it."""
    try:
        return prog, plans, prove_ub(spec, prog, inputs, suggest=False)   # the error's suggestion is not read
    except SpecError as e:
        if "UB overflow" not in str(e):
            return prog, plans, None
    return (*streaming(), None)


def program(name: str, c: RowCounts, dvars: tuple[str, ...], float_attrs: tuple[str, ...] = (),
            extra: tuple[tuple[str, str], ...] = (), stream: bool = False,
            overlap: tuple | None = None, forms: int = 1, col_presence: bool = False,
            int_attrs: frozenset = frozenset(), col_guards: tuple = ()) -> tuple[TilingProgram, dict]:
    """The tiling program of rows kernel `name` (module docstring) for counts `c`, and its buffer plans
    {strategy: [Buffer]}. With `stream` (only when `streamable(c)`; raises ValueError otherwise) the program has a
    third strategy, COL_STREAM, chosen when neither a row nor a core's resident slice of one row fits UB.

    Inputs: rows, seq, batch, hidden (from the layout), `<var>Bytes` per dtype variable in `dvars`, dtypeKey,
    attrKey, coreNum, ubBytes, one `<attr>Attr` per runtime attribute in `float_attrs` (its fp32 IEEE-754 bits; of
    those in `int_attrs`, the int value rounded once to fp32; copied to the tiling field
    `<attr>Bits` the kernel decodes) and one `<name>Dim` input per `extra` (name, doc), copied to the field `name`
    (view strides, pitches and offsets, leading extents: opgen.kernel.rowclass). `overlap`: (a, b, s), where ROW_SPLIT's
    Compute frees its row inputs, allocates its row outputs and last waits for PIPE_V on the scalar unit
    (opgen.kernel.rowsched.queue_overlap; None: held throughout), which prices one buffer per row queue against two
    (rows.row_split). `forms` > 1: the shape forms lower to different classes (opgen.kernel.rows.variants_of), and
    an input formKey (opgen.dsl.keys.form_key, 0 .. forms - 1) is folded into the tiling key:
    (attrKey * forms + formKey) * 100 + dtypeKey * 10 + strategy (opgen.codegen.tilingkey.TilingKey).
    `col_presence`: the program reads an input colLoadsAbsent (1 when every optional input ROW_CHUNK's per-chunk
    column rows load from is absent; their re-reads are then not priced). `col_guards`: ((rowguard.GuardName,
    literal), ...), the runtime guards those loads run under (opgen.tiling.rowfamily `_col_load_guards`): not
    priced either while a guard's value (its attribute's `<attr>Attr` bits, among `float_attrs`) differs."""
    p = TilingProgram(name)
    R = p.input("rows", "rows of the anchor domain (product of its leading axes)")
    S = p.input("seq", "rows per batch (product of the leading axes after the batch axes)")
    B = p.input("batch", "batches (product of the batch axes)")
    H = p.input("hidden", "elements of a row (the row axis)")
    sizes = {v: p.input(f"{v}Bytes", f"bytes per element of dtype variable {v}") for v in dvars}
    dk = p.input("dtypeKey", "1-based row of the dtype table")
    ak = p.input("attrKey", "mixed-radix index of the static attribute values (first attribute fastest)")
    key = (ak, "attrKey")   # the tiling key's digits above dtypeKey
    if forms > 1:
        fk = p.input("formKey", f"index of the shape forms the inputs take (0 .. {forms - 1}; one class each)")
        key = (ak * forms + fk, f"(attrKey * {forms} + formKey)")
    cores = p.input("coreNum", "AIV cores of the platform")
    col_on = 1 - p.input("colLoadsAbsent", "1 when every optional input the column rows load from is absent (a "
                         "presence; 0 when unknown: their re-reads counted)") if col_presence else lit(1)
    ub = p.input("ubBytes", "UB bytes per AIV core")
    attrs = [(p.input(f"{a}Attr", f"IEEE-754 bits of the int attribute {a} rounded to fp32" if a in int_attrs
                      else f"IEEE-754 bits of the float attribute {a}"),
              f"IEEE-754 bits of {a} (int, rounded once to float)" if a in int_attrs
              else f"IEEE-754 bits of {a} (float)") for a in float_attrs]
    extras = [(p.input(f"{n}Dim", d), n, d) for n, d in extra]
    for g, value in col_guards:   # the column loads run only while each guard has its value
        col_on = col_on * guard_holds(attrs[list(float_attrs).index(g.attr)][0], g, value)

    def bytes_of(d: str):
        return sizes[d] if d in sizes else lit({"f32": 4, "f16": 2, "bf16": 2, "i32": 4, "bool": 1, "u8": 1,
                                                "i8": 1, "i16": 2, "i64": 8}.get(d, 4))

    if stream and not streamable(c):
        raise ValueError(f"rows kernel {name}: COL_STREAM needs row reductions and no sums over rows")
    resident = row_resident(c)   # implies row reductions (levels)
    lanes = MASK_LANES if c.masks else 16   # a compare / select covers whole 256-B repeats of the row
    if c.selects:   # Select's scratch at the top of UB stays free
        ub = p.let("ubUsable", select(ub > SELECT_SCRATCH_BYTES, ub - SELECT_SCRATCH_BYTES, 0),
                   "UB bytes the buffers may take: Select's 8 KB scratch kept free")
    col_align = p.let("colAlign", align_up(H, lanes), "row stride in UB (elements; 32-byte aligned)", True)
    # RowsSum / RowsMax take a pass's rows in one instruction of a repeat a row (rowsched.ROWS_REDUCE_FITS); one
    # buffer per row queue where that lets a pass take more rows and the cost model prices it faster (rows.row_split,
    # the field rowQueBufs; `overlap`: where the Kernel IR's Compute frees its inputs and allocates its outputs)
    batch = bool(getattr(c, "batch", 0))
    # a program holding no row in UB (rowprog.narrow_rows) sizes ROW_SPLIT's rows by the lanes it accumulates
    row_align = p.let("rowAlign", emin(col_align, NARROW_LANES), "ROW_SPLIT's UB row: the lanes of the column "
                      "accumulators (the program holds no row of the row axis in UB)") if c.narrow else col_align
    two = row_plan(c, row_align, bytes_of)
    rows_fit, row_cores = row_split(p, R, cores, ub, two, max_pass=255 if batch and c.rsums else 4095,
                                    single=row_plan(c, row_align, bytes_of, 1),
                                    price=_pass_price(c, H, bytes_of), overlap=overlap,
                                    pool_bound=row_pool_bound(c),
                                    fetch=fetches_next_pass(bool(c.row_in), bool(c.acc_reads), row_pool_bound(c)))
    plans = {ROW_SPLIT: row_plan(c, row_align, bytes_of, Var("rowQueBufs"))}
    cols_core = p.let("colsPerCore", align_up(ceil_div(H, cores), lanes), "columns per core (COL_SPLIT)", True)
    col_cores = p.let("colCores", ceil_div(H, cols_core), "cores used by COL_SPLIT")
    if c.levels:
        xchg_all(p, c, R, H, col_cores, bytes_of)
    cs_rows = col_batch_rows(p, c, cols_core, R, ub, col_cores, bytes_of, S, B) if col_batch(c) else None
    if stream:
        cols_pass = None   # after the strategy: the resident slice (COL_SPLIT) or the streaming chunk (COL_STREAM)
    elif resident:
        res_cols, res_rows, res_fit, use_res, res_cc = _resident_or_slice(
            p, c, R, H, lanes, col_align, cols_core, col_cores, row_cores, ub, bytes_of, cs_rows, col_on)
        use4 = p.let("useRowChunk", select((rows_fit < 1) & (use_res >= 1), 1, 0),
                     "1 when a row does not fit ROW_SPLIT and ROW_CHUNK (inputs resident) is chosen")
        cols_pass = p.let("colsPerPass", select(use4 >= 1, res_cols, cols_core), "columns per pass (COL_SPLIT: the "
                          "whole slice stays resident; ROW_CHUNK: a chunk of the resident row)", True)
    elif c.levels:
        cols_pass = p.let("colsPerPass", cols_core + 0, "columns per COL_SPLIT pass: the whole slice stays resident",
                          True)
    else:
        one, none = col_plan(c, lit(1), bytes_of), col_plan(c, lit(0), bytes_of)
        per_col = p.let("passColBytes", row_bytes(one) + fixed_bytes(one) - fixed_bytes(none),
                        "UB bytes per column of a one-row COL_SPLIT pass")
        fixed0 = fixed_bytes(none) + PASS_SLACK_BYTES
        cols_fit = p.let("passColsFit", select(ub > fixed0, (ub - fixed0) // per_col, 0) // lanes * lanes,
                         f"columns of a one-row COL_SPLIT pass that fit (multiple of {lanes})")
        if chunkable(c):
            cols_pass, use_chunks = _chunk_or_slice(p, c, R, H, lanes, col_align, cols_core, col_cores, cols_fit,
                                                    row_cores, ub, bytes_of)
        else:
            cols_pass = p.let("colsPerPass", emax(lanes, emin(cols_core, cols_fit)),
                              "columns per COL_SPLIT pass (no row reduction: the slice is walked in chunks)", True)
    if stream:
        return _stream_program(p, c, R, S, B, H, key, dk, cores, ub, lanes, col_align, cols_core, col_cores, rows_fit,
                               row_cores, plans, bytes_of, float_attrs, attrs, extras, cs_rows, col_on)
    if resident:   # COL_SPLIT's groups are sized by its slice; ROW_CHUNK's by its own plan
        grp_fit, _cc, group_rows, plans[COL_SPLIT] = col_split(
            p, H, R, cores, ub, lambda cols: col_plan(c, cols, bytes_of, cs_rows), cols_core, col_cores, cols_core,
            group_alt=(use4 >= 1, res_rows))
        plans[ROW_CHUNK] = resident_plan(c, col_align, res_cols, bytes_of, res_cc)
    else:
        grp_fit, _cc, group_rows, plans[COL_SPLIT] = col_split(
            p, H, R, cores, ub, lambda cols: col_plan(c, cols, bytes_of, cs_rows), cols_core, col_cores, cols_pass)
    # rows stay whole when they fit, unless nothing is reduced per row and there are fewer rows than column slices;
    # a narrow program's COL_SPLIT would have every core walk every row's scalar work for nothing (no row in UB to
    # split), so its rows stay whole whenever they fit
    prefer_rows = (rows_fit >= 1) if c.levels or c.narrow else (rows_fit >= 1) & (R >= col_cores)
    if c.acc_reads:   # two passes over the rows around the cross-core exchange: ROW_SPLIT only
        strategy = p.let("strategy", lit(ROW_SPLIT) + 0, "1 ROW_SPLIT (two passes over the rows: always)", True)
    elif resident:
        strategy = p.let("strategy", select(use4 >= 1, ROW_CHUNK, select(prefer_rows | (grp_fit < 1), ROW_SPLIT,
                                                                         COL_SPLIT)),
                         "1 ROW_SPLIT, 2 COL_SPLIT, 4 ROW_CHUNK (inputs resident)", True)
    elif chunkable(c):
        strategy = p.let("strategy", select(prefer_rows | (grp_fit < 1), ROW_SPLIT,
                                            select(use_chunks >= 1, ROW_CHUNK, COL_SPLIT)),
                         "1 ROW_SPLIT, 2 COL_SPLIT, 4 ROW_CHUNK", True)
    else:
        strategy = p.let("strategy", select(prefer_rows | (grp_fit < 1), ROW_SPLIT, COL_SPLIT),
                         "1 ROW_SPLIT, 2 COL_SPLIT", True)
    p.let("colsPerReduceCore", align_up(ceil_div(H, row_cores), 16),
          "columns each core sums in the cross-core reduction (ROW_SPLIT)", True)
    if resident:
        p.let("fits", select(strategy.eq(ROW_SPLIT), rows_fit >= 1, select(strategy.eq(ROW_CHUNK), res_fit >= 1,
                                                                            grp_fit >= 1)),
              "1 when the chosen plan fits UB", True)
    else:
        p.let("fits", select(strategy.eq(ROW_SPLIT), rows_fit >= 1, grp_fit >= 1), "1 when the chosen plan fits UB",
              True)
    rows_over_cores = (strategy.eq(ROW_SPLIT) | strategy.eq(ROW_CHUNK)) if chunkable(c) or resident \
        else strategy.eq(ROW_SPLIT)
    block_dim = p.let("blockDim", select(rows_over_cores, row_cores, col_cores), "AIV cores launched", True)
    _tiling_key(p, key, dk, strategy)
    per_core = c.col_acc + 2 * c.brow_acc + c.total_acc
    ws_rows = p.let("wsRowBytes", (block_dim * (per_core * col_align * 4) if per_core else 0 * block_dim)
                    + ((c.acc_reads - c.brow_reads + B * c.brow_reads) * col_align * 4 if c.acc_reads else 0),
                    "ROW_SPLIT: per core, fp32 partial rows of the column sums and of its first/last batch sums"
                    + ("; then the complete column (and per-batch) reductions the second pass reads" if c.acc_reads
                       else ""))
    if c.total_acc:   # the partial totals of every core after the level region (opgen.kernel.rowclass._col_total_nodes)
        ws_cols = p.let("wsColBytes", (block_dim * max(c.rsums_per_level, 1) + max(c.rsums, 1))
                        * align_up(group_rows, 8) * 4 + block_dim * (c.total_acc * 32),
                        "COL_SPLIT: partial row reductions of every core and their totals, then each core's partial "
                        "reductions over every axis in 32-byte slots (fp32)")
    else:
        ws_cols = p.let("wsColBytes", (block_dim * c.rsums_per_level + c.rsums) * align_up(group_rows, 8) * 4,
                        "COL_SPLIT: partial row reductions of every core and their totals (fp32), each slot 32-byte "
                        "aligned")
    ws_cols = _xchg_region(p, c, ws_cols, block_dim, group_rows)
    if resident:
        p.let("workspaceBytes", select(strategy.eq(ROW_SPLIT), ws_rows, select(strategy.eq(ROW_CHUNK), 0 * ws_cols,
                                                                                ws_cols)),
              "user workspace (bytes; ROW_CHUNK exchanges nothing)", True)
    else:
        p.let("workspaceBytes", select(strategy.eq(ROW_SPLIT), ws_rows, ws_cols), "user workspace (bytes)", True)
    _tail_fields(p, S, B, H, R, float_attrs, attrs, extras)
    return p, plans


def _group_rows_fit(p, c, cols, ub, bytes_of, name: str, what: str, batch_rows=None):
    """Rows of a COL_SPLIT-shaped group that fit UB with `cols` columns per pass (a tiling variable `name`; `what`
    says which pass in its comment; `batch_rows`: col_plan's, colBatchRows)."""
    plan = col_plan(c, cols, bytes_of, batch_rows)
    fixed, per_row = fixed_bytes(plan), row_bytes(plan)
    return p.let(name, select(ub > fixed, (ub - fixed) // per_row, 0), f"rows of a group that fit ({what})")


def _row_bytes(c: RowCounts, bytes_of) -> tuple:
    """(bytes the row inputs read, bytes the row outputs write) per column of a row, as tiling expressions:
    the sum over c.row_in / c.row_out of an element's bytes (bytes_of(dtype)) times the count of that dtype."""
    in_b, out_b = lit(0), lit(0)
    for d, n in c.row_in:
        in_b = in_b + bytes_of(d) * n
    for d, n in c.row_out:
        out_b = out_b + bytes_of(d) * n
    return in_b, out_b


def _cost_terms(c: RowCounts, bytes_of) -> tuple:
    """What the strategy prices share (docs/reference/kernel_cost.md §2, opgen.platforms.cost): (bytes an element of
    every row operand moves together, row inputs, row outputs, (num, den) with num / den the AI Core cycles a byte of
    HBM traffic takes, reduced (9 / 8000: no int64 overflow), fp32 lanes a vector cycle, cycles an instruction's
    issue and barrier take)."""
    elem = lit(0)
    for d, n in list(c.row_in) + list(c.row_out):
        elem = elem + bytes_of(d) * n
    ratio = Fraction(int(CLOCK_HZ), int(HBM_BYTES_PER_S))
    return (elem, sum(n for _d, n in c.row_in), sum(n for _d, n in c.row_out), (ratio.numerator, ratio.denominator),
            VEC_REPEAT_BYTES // 4, VEC_ISSUE_CYCLES + BARRIER_CYCLES)


def _pass_price(c: RowCounts, H, bytes_of):
    """price(k, cores) of rows.row_split: a ROW_SPLIT pass of k rows as (copy-in, compute, copy-out) AI Core cycles on
    one of `cores` cores sharing the HBM bandwidth (docs/reference/kernel_cost.md §2, opgen.platforms.cost):
      copy-in  = k * (H * bytes of the row inputs' elements + row inputs * BURST_OVERHEAD_BYTES) * cores * CLOCK / HBM
      copy-out = the same over the row outputs
      compute  = k * H * vinstrs / (VEC_REPEAT_BYTES / 4)  +  issues * (VEC_ISSUE + BARRIER), issues = vinstrs a
                 pass when its instructions run over all its rows (`batch`), vinstrs a row otherwise."""
    _elem, ins, outs, (num, den), lanes32, per_issue = _cost_terms(c, bytes_of)
    in_b, out_b = _row_bytes(c, bytes_of)
    instrs = max(c.vinstrs, 1)
    batch = bool(getattr(c, "batch", 0))

    def price(k, cores):
        t_in = k * (H * in_b + ins * BURST_OVERHEAD_BYTES) * cores * num // den
        t_out = k * (H * out_b + outs * BURST_OVERHEAD_BYTES) * cores * num // den
        t_c = k * H * instrs // lanes32 + (instrs if batch else k * instrs) * per_issue
        return t_in, t_c, t_out
    return price


def _even_chunks(n, n_align, cols_fit, lanes):
    """Columns of a chunk when `n` columns (`n_align`: n rounded up to `lanes`) are walked in the fewest chunks of at
    most `cols_fit` columns (a multiple of `lanes`): ceil(n / chunks) rounded up to `lanes`, so the chunks are of one
    width but the last (no short tail chunk paying a whole chunk's issue cost); at least `lanes`, at most n_align.
    It fits: n / chunks <= cols_fit, and cols_fit is a multiple of lanes."""
    chunks = ceil_div(n_align, emax(cols_fit, lanes))
    return emax(lanes, emin(n_align, align_up(ceil_div(n, chunks), lanes)))


def _chunk_or_slice(p, c, R, H, lanes, col_align, cols_core, col_cores, cols_fit, row_cores, ub, bytes_of):
    """(colsPerPass, useChunks) of a `chunkable` program whose row may not fit UB: ROW_CHUNK (this core's rows, the
    whole row in chunks of up to `cols_fit` columns) against COL_SPLIT (every row, this core's column slice), each
    priced by the cost model of docs/reference/kernel_cost.md §2 in AI Core cycles (opgen.platforms.cost):
      memory  = (bytes moved + bursts * BURST_OVERHEAD_BYTES) * CLOCK / HBM bandwidth   (a burst: one row of one
                operand's chunk)
      vector  = a core's rows * its columns * vinstrs / (VEC_REPEAT_BYTES / 4)   (fp32 lanes a cycle)
      issue   = a core's rows * its chunks of a row * vinstrs * (VEC_ISSUE + BARRIER)   (every instruction is issued
                for one row of a group and followed by a barrier)
      time    = max(memory, vector + issue)
    useChunks is 1 when ROW_CHUNK's time is at most COL_SPLIT's. colsPerPass (a field) is the chosen one's."""
    elem, ins, outs, (num, den), lanes32, issue = _cost_terms(c, bytes_of)
    ops = ins + outs
    instrs = max(c.vinstrs, 1)
    per_issue = instrs * issue
    chunk = p.let("chunkCols", _even_chunks(H, col_align, cols_fit, lanes), "columns per ROW_CHUNK pass (whole "
                  "rows when they fit; else the row in the fewest chunks that fit, of even width)")
    slice_ = p.let("sliceCols", _even_chunks(cols_core, cols_core, cols_fit, lanes), "columns per COL_SPLIT pass (no "
                   "row reduction: the slice in the fewest chunks that fit, of even width)")
    moved = R * H * elem
    rows_core = ceil_div(R, row_cores)
    chunks = ceil_div(H, chunk)
    mem_rc = p.let("chunkMemCycles", (moved + R * chunks * ops * BURST_OVERHEAD_BYTES) * num // den,
                   "ROW_CHUNK: estimated HBM cycles (bytes and bursts)")
    run_rc = p.let("chunkRunCycles", rows_core * H * instrs // lanes32 + rows_core * chunks * per_issue,
                   "ROW_CHUNK: estimated vector and issue cycles of a core")
    slices = ceil_div(cols_core, slice_)
    mem_cs = p.let("sliceMemCycles", (moved + R * col_cores * slices * ops * BURST_OVERHEAD_BYTES) * num // den,
                   "COL_SPLIT: estimated HBM cycles (bytes and bursts)")
    run_cs = p.let("sliceRunCycles", R * cols_core * instrs // lanes32 + R * slices * per_issue,
                   "COL_SPLIT: estimated vector and issue cycles of a core")
    fit_rc = _group_rows_fit(p, c, chunk, ub, bytes_of, "chunkGroupFit", "ROW_CHUNK's chunks")
    use = p.let("useChunks", select((fit_rc >= 1) & (emax(mem_rc, run_rc) <= emax(mem_cs, run_cs)), 1, 0),
                "1 when ROW_CHUNK is estimated no slower than COL_SPLIT (and a group of its chunk fits)")
    cols = p.let("colsPerPass", select(use >= 1, chunk, slice_), "columns per pass (ROW_CHUNK: of the whole row; "
                 "COL_SPLIT: of the core's slice)", True)
    return cols, use


def _resident_or_slice(p, c, R, H, lanes, col_align, cols_core, col_cores, row_cores, ub, bytes_of,
                       batch_rows=None, col_on=None):
    """ROW_CHUNK of a `row_resident` program (module docstring) against COL_SPLIT, for a row that does not fit
    ROW_SPLIT: (colsPerPass of ROW_CHUNK, its group rows, its fit, useResident). The chunk is the widest that fits
    beside one group row's resident inputs (a multiple of the row's lane quantum, at most the row); the group as many
    rows as then fit. Each is priced by the cost model of docs/reference/kernel_cost.md §2 in AI Core cycles, as
    `_chunk_or_slice` does (memory: bytes and bursts; vector: a core's elements times its instructions; issue: a
    core's instruction issues and barriers), with what differs:
      ROW_CHUNK  instructions a row = pinstrs per chunk (each phase runs its instructions over every chunk);
                 bursts a row = one per input (the whole row) + one per output chunk
      COL_SPLIT  instructions a row = vinstrs on every core; per group of its rows and row-reduction level,
                 the exchange (opgen.kernel.rowsched `_total_owned_rows`): two SyncAll, the flag waits of one
                 strided copy of every core's partials (MTE2 -> V) and of the totals out (V -> MTE3), that copy's
                 bursts (one a core) and ceil(log2(cores)) tree instructions (`tree_steps`), each with its
                 barrier. With `batch_rows` (colBatchRows, `col_batch_rows`) >= 1
                 the issues are per sub-batch of that many rows: vinstrs instructions, each row reduction by
                 RowsSum ceil(slice / 64) + 1 of them
    Times: ROW_CHUNK max(memory, vector + issue) (its resident inputs are double-buffered: the next group's copy
    runs beside this group's work); COL_SPLIT memory + vector + issue + exchange: its group's slices are single
    buffers (a TBuf, an output queue of depth 1), so a group's copy-in, its work and exchanges and its copy-out
    follow one another (RmsNorm 50 x 20001 bf16, the emulation's estimate: COL_SPLIT 8.44 us, ROW_CHUNK 7.48 us,
    which the overlapped max had reversed once the exchange cost a tree instead of a combine per core).
    useResident is 1 when ROW_CHUNK fits and COL_SPLIT does not, or ROW_CHUNK's time is at most COL_SPLIT's.
    A program with column rows has two ROW_CHUNK forms (the tiling field colChunkLoads, returned last; None without
    column rows): the column rows whole in UB, loaded once per core, or one chunk of them loaded (a lane index
    computed) in every chunk of each phase that reads them (RowCounts.col_phases), which leaves the resident row room
    where whole fp32 column rows do not fit beside it (CrossEntropyLoss [N, 32000]: its lane-index row alone is
    128 KB). The per-chunk form re-reads the GM column rows every group and phase, priced at the L2's bandwidth
    (opgen.platforms.cost.L2_BYTES_PER_S: a column row read by every core stays in the L2), and is a candidate only
    while those re-reads stay within 1 / GM_REREAD_SHARE of the row operands' bytes (`colLoadsAbsent`: not counted
    when the optional inputs they load from are absent, nor the vector work of loading them in each chunk); the
    cheaper form that fits is taken."""
    elem, ins, outs, (num, den), lanes32, per_issue = _cost_terms(c, bytes_of)
    moved = R * H * elem
    rows_core = ceil_div(R, row_cores)
    pin = max(c.pinstrs, c.vinstrs, 1)

    def variant(chunked: bool, tag: str, what: str):
        """(chunk, group, fit, memory cycles, run cycles) of ROW_CHUNK with the column rows whole (`chunked` False)
        or loaded per chunk (True), its lets suffixed by `tag`."""
        cc = lit(1) if chunked else None
        none = resident_plan(c, col_align, lit(0), bytes_of, cc)
        probe = resident_plan(c, col_align, lit(STREAM_PROBE_COLS), bytes_of, cc)
        # + 64: the reduction scratch grows by 8 floats at a time (row_reduce_elems), which the probe's linear rate
        # can miss by up to that: the chunk then still fits beside the slack rowChunkFit keeps
        base = row_bytes(none) + fixed_bytes(none) + PASS_SLACK_BYTES + 64
        per_probe = p.let(f"rowChunkProbeBytes{tag}",
                          row_bytes(probe) + fixed_bytes(probe) - row_bytes(none) - fixed_bytes(none),
                          f"UB bytes of {STREAM_PROBE_COLS} chunk columns of a one-row ROW_CHUNK group (row "
                          f"reductions: inputs resident; {what})")
        cols_fit = p.let(f"rowChunkColsFit{tag}", select(ub > base, (ub - base) * STREAM_PROBE_COLS // per_probe, 0)
                         // lanes * lanes, f"chunk columns that fit beside one resident row (multiple of {lanes}; "
                         f"{what})")
        chunk = p.let(f"rowChunkCols{tag}", emax(lanes, emin(col_align, cols_fit)),
                      f"columns per ROW_CHUNK chunk (row reductions: the row's inputs resident; {what})")
        plan = resident_plan(c, col_align, chunk, bytes_of, cc)
        fixed = fixed_bytes(plan) + PASS_SLACK_BYTES   # as the chunk was sized: the proof counts the same bytes
        fit = p.let(f"rowChunkFit{tag}", select(ub > fixed, (ub - fixed) // row_bytes(plan), 0),
                    f"rows of a ROW_CHUNK group that fit beside PASS_SLACK_BYTES (inputs resident; {what})")
        group = p.let(f"rowChunkRows{tag}", emax(1, emin(emin(fit, 1024), rows_core)),
                      f"rows per ROW_CHUNK group ({what})")
        chunks = ceil_div(H, chunk)
        mem = (moved + R * (chunks * outs + ins) * BURST_OVERHEAD_BYTES) * num // den
        run = rows_core * H * pin // lanes32 + rows_core * chunks * (pin * per_issue)
        reread = lit(0)
        if chunked:   # every group re-reads its loaded column rows in each phase that reads them, from the L2
            groups = ceil_div(rows_core, group)
            reread = p.let("colReloadBytes", groups * row_cores * c.col_phases * H * _col_load_bytes(c, bytes_of)
                           * on,
                           "ROW_CHUNK with column rows per chunk: GM bytes of the column rows re-read (every group, "
                           "every phase reading them)")
            mem = mem + (reread + groups * row_cores * c.col_phases * chunks * c.loads * BURST_OVERHEAD_BYTES * on) \
                * l2_num // l2_den
            # the column rows a chunk makes: the loaded ones only while their inputs are present (`on`), the
            # computed ones (a lane index) always
            cols = c.col - c.loads + c.loads * on if c.loads <= c.col else c.col
            run = run + groups * c.col_phases * (H * cols // lanes32 + chunks * cols * per_issue)
        mem = p.let(f"rowChunkMemCycles{tag}", mem, f"ROW_CHUNK: estimated HBM cycles (bytes and bursts; {what})")
        run = p.let(f"rowChunkRunCycles{tag}", run, f"ROW_CHUNK: estimated vector and issue cycles of a core ({what})")
        return chunk, group, fit, mem, run, reread

    on = lit(1) if col_on is None else col_on   # the column rows' loads happen (their inputs present)
    l2 = Fraction(int(CLOCK_HZ), int(L2_BYTES_PER_S))
    l2_num, l2_den = l2.numerator, l2.denominator
    chunk, group, fit, mem_r, run_r, _none = variant(False, "Whole" if c.col else "", "column rows whole")
    per_chunk = None
    if c.col:   # column rows per chunk where whole ones do not fit beside the resident row or cost more
        chunk_c, group_c, fit_c, mem_c, run_c, reread = variant(True, "ColLoads", "column rows loaded per chunk")
        within = reread * GM_REREAD_SHARE <= moved   # the GM goal: no more than 1 / GM_REREAD_SHARE re-read
        per_chunk = p.let("colChunkLoads", select((fit_c >= 1) & within & ((fit < 1) | (emax(mem_c, run_c)
                                                                                       < emax(mem_r, run_r))), 1, 0),
                          "ROW_CHUNK: 1 when the column rows are loaded per chunk of each phase reading them (they "
                          "do not fit whole beside the resident row, or that is estimated faster, and their re-reads "
                          f"stay within 1/{GM_REREAD_SHARE} of the row operands' bytes), 0 whole once", True)
        pick = lambda a, b: select(per_chunk >= 1, b, a)   # noqa: E731
        chunk = p.let("rowChunkCols", pick(chunk, chunk_c), "columns per ROW_CHUNK chunk (row reductions: the row's "
                      "inputs resident)")
        fit = p.let("rowChunkFit", pick(fit, fit_c), "rows of a ROW_CHUNK group that fit (inputs resident)")
        group = p.let("rowChunkRows", pick(group, group_c), "rows per ROW_CHUNK group")
        mem_r, run_r = pick(mem_r, mem_c), pick(run_r, run_c)
    slice_fit = _group_rows_fit(p, c, cols_core, ub, bytes_of, "sliceGroupFit", "COL_SPLIT's resident slices",
                                batch_rows)
    slice_rows = emax(1, emin(emin(slice_fit, 1024), R))
    vin = max(c.vinstrs, 1)
    mem_s = p.let("sliceMemCycles", (moved + R * col_cores * (ins + outs) * BURST_OVERHEAD_BYTES) * num // den,
                  "COL_SPLIT: estimated HBM cycles (bytes and bursts)")
    issue_s = _slice_issue_cycles(c, R, cols_core, slice_rows, 0)
    if batch_rows is not None:   # per sub-batch of a group
        issue_s = select(batch_rows >= 1, _slice_issue_cycles(c, R, cols_core, slice_rows, emax(batch_rows, 1)),
                         issue_s)
    exchange = ceil_div(R, slice_rows) * _exchange_cycles(c, col_cores, bytes_of)
    run_s = p.let("sliceRunCycles", R * cols_core * vin // lanes32 + issue_s + exchange,
                  "COL_SPLIT: estimated vector, issue and exchange cycles of a core (per level and group: two SyncAll, "
                  "TotalOwnedRows' strided copy of every core's partials and its pairwise tree)")
    use = p.let("useResident", select((fit >= 1) & ((slice_fit < 1) | (emax(mem_r, run_r) <= mem_s + run_s)),
                                      1, 0),
                "1 when ROW_CHUNK (inputs resident) fits and is estimated no slower than COL_SPLIT, or only it fits")
    return chunk, group, fit, use, per_chunk


def guard_holds(bits, g, value: bool):
    """1 when runtime guard `g` (opgen.kernel.rowguard.GuardName) has value `value` for the float attribute whose
    IEEE-754 bits are the tiling expression `bits` (as the kernel's guard member, GuardName.bits_conds), else 0."""
    hit = lit(0)
    for b in g.bits_eq():   # the bits equal to the guard's constant (both zeros for 0)
        hit = select(bits.eq(b), 1, hit)
    holds = hit if g.op == "eq" else 1 - hit
    return holds if value else 1 - holds


GM_REREAD_SHARE = 10
"""A ROW_CHUNK whose column rows are re-read per chunk (`_resident_or_slice`) is a candidate only while the re-reads
stay within 1 / GM_REREAD_SHARE of the row operands' bytes: the project's GM goal for the vector kernels is 1.10 of
the minimum (bench/results/README.md), which the cost model's time alone does not protect (a [1024, 32000] weighted
cross-entropy would re-read its fp32 weight row per row in its label-smoothing sum: 2x the minimum from the L2)."""


def _col_load_bytes(c: RowCounts, bytes_of):
    """GM bytes a column of the column rows loaded from GM takes (RowCounts.staged: the loads' dtypes; a resident
    program loads column rows only), as a tiling expression."""
    total = lit(0)
    for d, n in c.staged:
        total = total + bytes_of(d) * n
    return total


def _split_or_stream(p, c, R, H, cols_core, col_cores, res_fit, stream_rows, bytes_of):
    """useColSplit: 1 when COL_SPLIT (the slices resident, groups of up to `res_fit` rows) is estimated no slower
    than COL_STREAM (groups of `stream_rows` rows, the row inputs re-read for every level and the outputs), each
    priced by the cost model of docs/reference/kernel_cost.md §2 in AI Core cycles, serially (neither overlaps a
    group's copies with its work):
      memory   = R * H * (bytes of the row inputs * reads + bytes of the row outputs) * CLOCK / HBM bandwidth,
                 reads 1 for COL_SPLIT, levels + 1 for COL_STREAM (an online maximum and sum reads once less: the
                 estimate is an upper bound there)
      vector   = R * colsPerCore * vinstrs / (VEC_REPEAT_BYTES / 4) times the reads, and R * vinstrs issues
      exchange = groups * levels * (two SyncAll, two flag waits, tree_steps(colCores) issues)
    A COL_SPLIT whose slices leave room for few rows a group pays many exchanges: SoftmaxV2 [8, 393216] fp32, the
    emulation's estimate, COL_STREAM 38 us; COL_SPLIT 60 us in groups of one row, 40 us in groups of two (the
    row-reduction exchange staging nothing, one work row: this model takes COL_SPLIT there, GM 1.00x the minimum
    instead of 1.50x). The online pass is not known here, so COL_STREAM's estimate is high for a softmax."""
    _elem, _ins, _outs, (num, den), lanes32, per_issue = _cost_terms(c, bytes_of)
    in_b, out_b = _row_bytes(c, bytes_of)
    vin, levels = max(c.vinstrs, 1), max(c.levels, 1)
    xchg = levels * (_sync_alls(c) * int(SYNC_ALL_CYCLES) + 2 * FLAG_WAIT_CYCLES + tree_steps(col_cores) * per_issue)
    work = R * cols_core * vin // lanes32 + R * vin * per_issue
    split_rows = emax(1, emin(emin(res_fit, 1024), R))
    t_split = p.let("splitCycles", R * H * (in_b + out_b) * num // den + work + ceil_div(R, split_rows) * xchg,
                    "COL_SPLIT: estimated cycles of a core (memory, vector and issue, exchanges; serial)")
    t_stream = p.let("streamCycles", R * H * (in_b * (levels + 1) + out_b) * num // den + work * (levels + 1)
                     + ceil_div(R, stream_rows) * xchg,
                     "COL_STREAM: estimated cycles of a core (the inputs read levels + 1 times; serial)")
    return p.let("useColSplit", select(t_split <= t_stream, 1, 0),
                 "1 when COL_SPLIT is estimated no slower than COL_STREAM")


def _xchg_region(p, c: RowCounts, ws_cols, block_dim, group_rows):
    """COL_SPLIT's workspace bytes with the second region of partials an exchange with one SyncAll alternates into
    (`xchg_all`; opgen.kernel.rowsched `_exchange`): the field xchgOff1, its offset in floats (after the regions of
    `ws_cols` bytes, which the owners' exchange and the totals over every axis use), and the bytes with it."""
    if not c.levels:
        return ws_cols
    p.let("xchgOff1", ws_cols // 4, "COL_SPLIT with xchgAll: the second region of partials (floats into the "
          "workspace)", True)
    return p.let("wsColBytesAll", ws_cols + Var("xchgAll") * block_dim * c.rsums_per_level * align_up(group_rows, 8)
                 * 4, "COL_SPLIT: the workspace with the second region of partials where xchgAll")


def _stream_chunk_cols(p, c: RowCounts, R, H, cols_core, col_cores, want, free, probe_row, probe_fixed, lanes,
                       bytes_of):
    """Columns of a COL_STREAM chunk (a tiling expression): sized for r rows at once, r of streamRows (`want`), 4, 2
    and 1 (each at most `want`), the one the cost model (docs/reference/kernel_cost.md §2) prices cheapest, the more
    rows on a tie. A chunk of r rows is cols_r = free / (probe_row * r + probe_fixed) columns (`free`: UB bytes
    beside the fixed buffers, times STREAM_PROBE_COLS; a multiple of `lanes`); fewer rows give wider chunks, so fewer
    chunks a row, but smaller groups (about r rows), so more exchanges, pipeline fills and re-reads of the column
    rows:
      issue     R * ceil(colsPerCore / cols_r) * (vinstrs * (VEC_ISSUE + BARRIER) + rsums * (VEC_ISSUE + BARRIER +
                FLAG_WAIT))   (the phases run row by row over each chunk: vinstrs instructions a row over all of them,
                each with a barrier, a V -> S wait a row reduction)
      exchange  ceil(R / r) * `_exchange_cycles`
      fill      ceil(R / r) * passes * the HBM cycles of one chunk's row inputs on one core's share of the
                bandwidth (r * cols_r elements and r bursts each; passes = levels + 1): each phase of a group copies
                its first chunk before any work, and the exchanges' SyncAll joins every pipe, so nothing hides it
      reloads   ceil(R / r) * passes * H * (bytes of the loaded column rows) at the L2's rate
    A candidate needs cols_r >= `lanes`; one row always stands (the strategy checks that it fits)."""
    _elem, ins, _outs, (num, den), _lanes32, per_issue = _cost_terms(c, bytes_of)
    in_b = _row_bytes(c, bytes_of)[0]
    per_row = max(c.vinstrs, 1) * per_issue + c.rsums * (per_issue + FLAG_WAIT_CYCLES)
    passes = max(c.levels, 1) + 1
    xchg = _exchange_cycles(c, col_cores, bytes_of)
    l2 = Fraction(int(CLOCK_HZ), int(L2_BYTES_PER_S))
    loads = _col_load_bytes(c, bytes_of) if getattr(c, "staged", None) else lit(0)
    best_cols, best_cost = None, None
    for r in (1, 2, 4, None):   # None: streamRows; later candidates win ties (more rows a group)
        rows = want if r is None else emin(want, r)
        cols = free // (probe_row * rows + probe_fixed) // lanes * lanes
        chunks = ceil_div(cols_core, emax(emin(cols, cols_core), lanes))
        groups = ceil_div(R, rows)
        fill = (rows * emin(cols, cols_core) * in_b + rows * ins * BURST_OVERHEAD_BYTES) * col_cores * num // den
        cost = (R * chunks * per_row + groups * xchg + groups * passes * fill
                + groups * passes * H * loads * l2.numerator // l2.denominator)
        if best_cols is None:
            best_cols, best_cost = cols, cost
            continue
        take = (cols >= lanes) & (cost <= best_cost)
        best_cols, best_cost = select(take, cols, best_cols), select(take, cost, best_cost)
    return best_cols


def _tiling_key(p, key: tuple, dk, strategy) -> None:
    """The let tilingKey = <key> * 100 + dtypeKey * 10 + strategy; `key`: (the digits above dtypeKey, their doc):
    attrKey, or attrKey and formKey (`program`'s `forms`)."""
    p.let("tilingKey", key[0] * 100 + dk * 10 + strategy, f"{key[1]} * 100 + dtypeKey * 10 + strategy", True)


def _tail_fields(p, S, B, H, R, float_attrs, attrs, extras) -> None:
    """The fields every rows tiling ends with: the extents, the runtime attributes' fp32 bits (`attrs`: (input,
    field doc) per name of `float_attrs`), the view dims."""
    p.let("seqLen", S + 0, "rows per batch", True)
    p.let("batchNum", B + 0, "batches", True)
    p.let("hiddenDim", H + 0, "elements of a row", True)
    p.let("rowNum", R + 0, "rows", True)
    for a, (v, doc) in zip(float_attrs, attrs):
        p.let(f"{a}Bits", v + 0, doc, True)
    for v, n, d in extras:
        p.let(n, v + 0, d, True)


def _stream_program(p, c, R, S, B, H, key, dk, cores, ub, lanes, col_align, cols_core, col_cores, rows_fit, row_cores,
                    plans, bytes_of, float_attrs, attrs, extras, cs_rows=None, col_on=None):
    """The strategies of a streaming rows tiling (`program` with stream): ROW_SPLIT when a row fits, else ROW_CHUNK
    with the row's inputs resident when that fits and is estimated no slower than COL_SPLIT (`_resident_or_slice`),
    else COL_SPLIT when a core's resident slice of one row fits, else COL_STREAM — the slice walked in chunks of
    `colsPerPass` columns (a multiple of the row's lane quantum, the last chunk a tail) re-read from GM for each
    row-reduction level and for the output phase, `groupRows` rows per chunk. Returns (program, plans)."""
    pre = col_prefetch(c)   # COL_STREAM's chunks through two buffers a row operand (COL_SPLIT's groups one)
    two = {"in_bufs": 2, "out_bufs": 2} if pre else {}
    plan_for = lambda cols: col_plan(c, cols, bytes_of, **two)   # noqa: E731
    res = col_plan(c, cols_core, bytes_of, cs_rows)   # COL_SPLIT: colBatchRows rows of temporaries
    res_row = p.let("residentRowBytes", row_bytes(res), "UB bytes per resident row of a COL_SPLIT slice")
    res_fixed = p.let("residentFixedBytes", fixed_bytes(res), "UB bytes held once by COL_SPLIT")
    res_fit = p.let("residentFit", select(ub > res_fixed, (ub - res_fixed) // res_row, 0),
                    "rows of a resident COL_SPLIT slice that fit")
    none, probe = plan_for(lit(0)), plan_for(lit(STREAM_PROBE_COLS))
    probe_row = p.let("streamProbeRowBytes", row_bytes(probe),
                      f"UB bytes of one row of {STREAM_PROBE_COLS} columns of a COL_STREAM chunk")
    probe_fixed = p.let("streamProbeFixedBytes", fixed_bytes(probe) - fixed_bytes(none),
                        f"UB bytes held once that grow with {STREAM_PROBE_COLS} columns of a COL_STREAM chunk")
    fixed0 = fixed_bytes(none) + PASS_SLACK_BYTES
    want = p.let("streamRows", select(H < (1 << 28), emax(1, emin(R, STREAM_GROUP_ROWS)), 1),
                 "rows a COL_STREAM chunk is sized for (one when a row's GM stride could pass 2^32 bytes)")
    free = select(ub > fixed0, (ub - fixed0) * STREAM_PROBE_COLS, 0)
    stream_cols = p.let("streamColsFit", _stream_chunk_cols(p, c, R, H, cols_core, col_cores, want, free,
                                                            probe_row, probe_fixed, lanes, bytes_of),
                        "columns of a COL_STREAM chunk: of streamRows, 4, 2 or 1 rows at once, the cheapest by the "
                        "cost model (_stream_chunk_cols)")
    prefer_rows = rows_fit >= 1
    rc_cols, rc_rows, rc_fit, rc_use, rc_cc = _resident_or_slice(p, c, R, H, lanes, col_align, cols_core, col_cores,
                                                                 row_cores, ub, bytes_of, cs_rows, col_on)
    use4 = p.let("useRowChunk", select((rows_fit < 1) & (rc_use >= 1), 1, 0),
                 "1 when a row does not fit ROW_SPLIT and ROW_CHUNK (inputs resident) is chosen")
    split = _split_or_stream(p, c, R, H, cols_core, col_cores, res_fit, want, bytes_of)
    strategy = p.let("strategy", select(use4 >= 1, ROW_CHUNK, select(
        prefer_rows | (res_fit < 1) & (stream_cols < lanes), ROW_SPLIT,
        select((res_fit >= 1) & ((stream_cols < lanes) | (split >= 1)), COL_SPLIT, COL_STREAM))),
        "1 ROW_SPLIT, 2 COL_SPLIT, 3 COL_STREAM (the slice of one row does not fit UB), 4 ROW_CHUNK (inputs "
        "resident)", True)
    cols_pass = p.let("colsPerPass", select(strategy.eq(COL_STREAM), emin(cols_core, emax(lanes, stream_cols)),
                                            select(strategy.eq(ROW_CHUNK), rc_cols, cols_core)),
                      "columns per COL_SPLIT pass (the whole slice stays resident), COL_STREAM chunk or ROW_CHUNK "
                      "chunk of the resident row", True)
    slice_rows = None if cs_rows is None else select(strategy.eq(COL_SPLIT), cs_rows, 0)   # COL_STREAM: row by row
    bufs = {}
    if pre:   # the plan the UB proof checks: the chosen strategy's buffers
        n = p.let("colQueBufs", select(strategy.eq(COL_STREAM), 2, 1), "buffers a row input or output takes "
                  "(COL_STREAM: 2, its chunks prefetched; COL_SPLIT: 1)")
        bufs = {"in_bufs": n, "out_bufs": n}
    grp_fit, _cores, group_rows, plans[COL_SPLIT] = col_split(
        p, H, R, cores, ub, lambda cols: col_plan(c, cols, bytes_of, slice_rows, **bufs), cols_core, col_cores,
        select(strategy.eq(ROW_CHUNK), cols_core, cols_pass), group_alt=(use4 >= 1, rc_rows))
    plans[COL_STREAM] = plans[COL_SPLIT]
    plans[ROW_CHUNK] = resident_plan(c, col_align, rc_cols, bytes_of, rc_cc)
    p.let("colsPerReduceCore", align_up(ceil_div(H, row_cores), 16),
          "columns each core sums in the cross-core reduction (ROW_SPLIT)", True)
    p.let("fits", select(strategy.eq(ROW_SPLIT), rows_fit >= 1, select(strategy.eq(ROW_CHUNK), rc_fit >= 1,
                                                                        grp_fit >= 1)),
          "1 when the chosen plan fits UB", True)
    block_dim = p.let("blockDim", select(strategy.eq(ROW_SPLIT) | strategy.eq(ROW_CHUNK), row_cores, col_cores),
                      "AIV cores launched", True)
    _tiling_key(p, key, dk, strategy)
    ws_rows = p.let("wsRowBytes", 0 * block_dim, "ROW_SPLIT and ROW_CHUNK: no cross-core sums")
    ws_cols = p.let("wsColBytes", (block_dim * c.rsums_per_level + c.rsums) * align_up(group_rows, 8) * 4,
                    "COL_SPLIT / COL_STREAM: partial row reductions of every core and their totals (fp32), each slot "
                    "32-byte aligned")
    ws_cols = _xchg_region(p, c, ws_cols, block_dim, group_rows)
    p.let("workspaceBytes", select(strategy.eq(ROW_SPLIT) | strategy.eq(ROW_CHUNK), ws_rows, ws_cols),
          "user workspace (bytes)", True)
    _tail_fields(p, S, B, H, R, float_attrs, attrs, extras)
    return p, plans
