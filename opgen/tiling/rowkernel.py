"""The tiling program and UB buffer plans of a row kernel (opgen.kernel.rowprog), shared by
AdaLayerNormV2 and AdaLayerNormGrad.

A row kernel's UB needs follow from its lowered row program, summarised as `RowCounts` (how many row
inputs/outputs, stat tensors, fp32 row temporaries, batch/column rows, row sums). The op's tiling module
declares the counts it plans for; the kernel emitter checks every specialisation's lowered program fits
them (opgen.codegen.kernel), so the budget proven here is the one the kernel allocates.

ROW_SPLIT (strategy 1): rows split over the AIV cores in contiguous ranges (the first `rowsTail` cores
take one more row); `rowsPerPass` rows per UB pass are copied in with one DataCopyPad per tensor
(double-buffered TQue), computed one row at a time in fp32 temporaries, copied out. Batch rows (brow)
are reloaded when a row enters a new batch; per-batch sums of a batch that crosses a core boundary and
the per-kernel column sums go to workspace as fp32 partials and are summed after SyncAll in core order,
the columns split over the cores (`colsPerReduceCore`): deterministic.

COL_SPLIT (strategy 2), when one row does not fit: H split over the cores in `colsPerCore` slices; each
core keeps its slices of a group of `groupRows` rows resident and, per row-sum level, exchanges partial
row sums through workspace (SyncAll, each core totals `rowsPerOwner` rows in core order, SyncAll), then
computes its output slices. The core owns its columns for every row: no cross-core column sums. Inputs
are read from GM once.

Units: elements unless a name ends in Bytes. Facts: reference/ascendc.md §1.5 (TQue/TBuf, double
buffering), §1.7-§1.8 (DataCopyPad, 32-byte UB alignment), §2.5 (blockDim, tails), §3 (UB sizes).
"""

from __future__ import annotations

from dataclasses import dataclass

from opgen.tiling.buffers import Buffer
from opgen.tiling.program import TilingProgram, align_up, ceil_div, select
from opgen.tiling.rows import col_split, row_split

ROW_SPLIT, COL_SPLIT = 1, 2


@dataclass(frozen=True)
class RowCounts:
    """What a row kernel holds in UB (maxima over its specialisations).

    row_in/row_out: row tensors read/written (T); stat_in (fp32) / stat_out (T): one value per row;
    temps: fp32 row temporaries; brow/col: fp32 batch rows / column rows (values and accumulators);
    col_acc/brow_acc: accumulators among them (cross-core partial rows in ROW_SPLIT); rsums: row sums;
    rsums_per_level: the most row sums of one level (exchanged together in COL_SPLIT)."""

    row_in: int
    row_out: int
    stat_in: int
    stat_out: int
    temps: int
    brow: int
    col: int
    brow_acc: int
    col_acc: int
    rsums: int
    rsums_per_level: int


def reduce_tmp_elems(cols):
    """fp32 scratch of ReduceSum over `cols` elements: one partial per 256-byte repeat plus the result
    block (reference/ascendc.md §1.9)."""
    return align_up(ceil_div(cols, 64), 8) + 8


def row_plan(c: RowCounts, col_align, t_bytes) -> list[Buffer]:
    """ROW_SPLIT buffers: per-row buffers scale with rowsPerPass (bytes per row), the rest is fixed."""
    plan = []
    if c.row_in:
        plan.append(Buffer("inQue", "TQue<VECIN>", 2 * c.row_in, True, col_align, t_bytes, "row inputs (T)"))
    if c.row_out:
        plan.append(Buffer("outQue", "TQue<VECOUT>", 2 * c.row_out, True, col_align, t_bytes, "row outputs (T)"))
    plan += stat_plan(c)
    plan += _fixed_plan(c, col_align)
    return plan


def col_plan(c: RowCounts, cols, t_bytes) -> list[Buffer]:
    """COL_SPLIT buffers for `cols` columns per core: the group's resident slices scale with groupRows."""
    plan = []
    if c.row_in:
        plan.append(Buffer("resBuf", "TBuf<VECCALC>", c.row_in, True, cols, t_bytes, "resident row-input slices"))
    if c.row_out:
        plan.append(Buffer("outQue", "TQue<VECOUT>", c.row_out, True, cols, t_bytes, "row-output slices of a group"))
    plan += stat_plan(c)
    plan.append(Buffer("sumBuf", "TBuf<VECCALC>", c.rsums_per_level + c.rsums, True, 1, 4,
                       "partial and total row sums of the group (fp32)"))
    plan.append(Buffer("sumSlack", "TBuf<VECCALC>", c.rsums_per_level + c.rsums, False, 8, 4,
                       "32-byte rounding of the sum buffers"))
    plan += _fixed_plan(c, cols)
    return plan


def stat_plan(c, out_doc: str = "per-row outputs (T, fp32 max)") -> list[Buffer]:
    """Per-row statistic buffers of counts `c` (fields stat_in, stat_out: RowCounts or HeadCounts): the input
    queue, the fp32 staging and output queue (one fp32 slot per row each; `out_doc` describes the output
    queue), and the 32-byte rounding slack of the stat buffers."""
    plan = []
    if c.stat_in:
        plan.append(Buffer("statInQue", "TQue<VECIN>", 2 * c.stat_in, True, 1, 4, "per-row fp32 inputs"))
    if c.stat_out:
        plan.append(Buffer("statStage", "TBuf<VECCALC>", c.stat_out, True, 1, 4, "per-row fp32 results"))
        plan.append(Buffer("statOutQue", "TQue<VECOUT>", 2 * c.stat_out, True, 1, 4, out_doc))
    n = 2 * c.stat_in + 3 * c.stat_out
    if n:
        plan.append(Buffer("statSlack", "TBuf<VECCALC>", n, False, 8, 4, "32-byte rounding of the stat buffers"))
    return plan


def _fixed_plan(c: RowCounts, cols) -> list[Buffer]:
    return [
        Buffer("workBuf", "TBuf<VECCALC>", max(c.temps, 2), False, cols, 4, "fp32 row temporaries"),
        Buffer("browBuf", "TBuf<VECCALC>", max(c.brow, 1), False, cols, 4, "fp32 batch rows and their sums"),
        Buffer("colBuf", "TBuf<VECCALC>", max(c.col, 1), False, cols, 4, "fp32 column rows and their sums"),
        Buffer("paramQue", "TQue<VECIN>", 1, False, cols, 4, "batch/column row staging (T or U)"),
        Buffer("accOutQue", "TQue<VECOUT>", 1, False, cols, 4, "sum outputs staging (T or U)"),
        Buffer("reduceBuf", "TBuf<VECCALC>", 1, False, reduce_tmp_elems(cols), 4, "ReduceSum result and scratch"),
    ]


def program(name: str, c: RowCounts, float_attrs: tuple[str, ...] = ()) -> tuple[TilingProgram, dict]:
    """The tiling program of row kernel `name` (see module docstring) and its buffer plans
    {strategy: [Buffer]}. Inputs: rows, seq, batch, hidden, tBytes, dtypeKey, attrKey, coreNum, ubBytes and
    one `<attr>Attr` per float attribute (its IEEE-754 bits), copied to the tiling field `<attr>Bits` the kernel
    decodes."""
    p = TilingProgram(name)
    R = p.input("rows", "rows = prod(Bd) * S")
    S = p.input("seq", "S (rows per batch)")
    B = p.input("batch", "prod(Bd)")
    H = p.input("hidden", "H, the row length (elements)")
    tB = p.input("tBytes", "bytes per element of T")
    dk = p.input("dtypeKey", "1-based row of the dtype table")
    ak = p.input("attrKey", "mixed-radix index of the static attribute values (opgen.tiling.emit.attr_key)")
    cores = p.input("coreNum", "AIV cores of the platform")
    ub = p.input("ubBytes", "UB bytes per AIV core")
    attrs = [p.input(f"{a}Attr", f"IEEE-754 bits of the float attribute {a}") for a in float_attrs]

    col_align = p.let("colAlign", align_up(H, 16), "row stride in UB (elements; 32-byte aligned)", True)
    plans = {ROW_SPLIT: row_plan(c, col_align, tB)}
    rows_fit, row_cores = row_split(p, R, cores, ub, plans[ROW_SPLIT])
    strategy = p.let("strategy", select(rows_fit >= 1, ROW_SPLIT, COL_SPLIT), "1 ROW_SPLIT, 2 COL_SPLIT", True)
    p.let("colsPerReduceCore", align_up(ceil_div(H, row_cores), 16),
          "columns each core sums in the cross-core reduction (ROW_SPLIT)", True)
    grp_fit, col_cores, group_rows, plans[COL_SPLIT] = col_split(p, H, R, cores, ub, lambda cols: col_plan(c, cols, tB))
    p.let("fits", (rows_fit >= 1) | (grp_fit >= 1), "1 when the chosen plan fits UB", True)
    block_dim = p.let("blockDim", select(strategy.eq(ROW_SPLIT), row_cores, col_cores), "AIV cores launched", True)
    p.let("tilingKey", ak * 100 + dk * 10 + strategy, "attrKey * 100 + dtypeKey * 10 + strategy", True)
    per_core = c.col_acc + 2 * c.brow_acc
    ws_rows = p.let("wsRowBytes", block_dim * (per_core * col_align * 4) if per_core else 0 * block_dim,
                    "ROW_SPLIT: per core, fp32 partial rows of the column sums and of its first/last batch sums")
    ws_cols = p.let("wsColBytes", (block_dim * c.rsums_per_level + c.rsums) * group_rows * 4,
                    "COL_SPLIT: partial row sums of every core and their totals (fp32)")
    p.let("workspaceBytes", select(strategy.eq(ROW_SPLIT), ws_rows, ws_cols), "user workspace (bytes)", True)
    p.let("seqLen", S + 0, "S", True)
    p.let("batchNum", B + 0, "prod(Bd)", True)
    p.let("hiddenDim", H + 0, "H", True)
    p.let("rowNum", R + 0, "prod(Bd) * S", True)
    for a, v in zip(float_attrs, attrs):
        p.let(f"{a}Bits", v + 0, f"IEEE-754 bits of {a} (float)", True)
    return p, plans
