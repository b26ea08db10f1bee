"""Tiling of AdaLayerNormV2 (forward with mean/rstd): one AIV launch, rows split over the cores.

ROW_SPLIT (key 1x): rows (prod(Bd) * S of H elements) are independent and split over the cores; whole
rows live in UB: x and out double-buffered in T, two fp32 work rows, the weight, bias, 1+scale and shift
rows of the current batch in fp32 (scale/shift reloaded when a pass enters a new batch), mean and rstd
staged per row. No cross-core step.
COL_SPLIT (key 2x), when a row does not fit: H is split over the cores in `colsPerCore`-wide slices;
each core keeps its x slices of a group of `groupRows` rows resident (in T) and exchanges partial sums
through workspace twice per group (sum x for the mean, then the centred sum of squares for the
variance, each followed by SyncAll and an in-order total), then writes its out slices. x is read once
(CANN's slice path re-reads x two or three times above H = 6144, reference/ada_layer_norm.md §3.1, §4.5).
dtypeKey: 1 fp32/fp32, 2 fp16/fp16, 3 fp16/fp32, 4 bf16/bf16, 5 bf16/fp32 (T/U, the spec's dtype rows).
"""

from __future__ import annotations

from opgen.ir.dims import Prod, Sym
from opgen.tiling.buffers import Buffer
from opgen.tiling.program import TilingProgram, align_up, select
from opgen.tiling.rows import col_split, row_split

REDUCE_TMP_BYTES = 1024
BUFFERS: dict = {}  # strategy -> [Buffer], filled by program() (opgen.tiling.buffers)


def program() -> TilingProgram:
    """The tiling program; see the module docstring."""
    p = TilingProgram("AdaLayerNormV2")
    R = p.input("rows", "prod(Bd) * S")
    S = p.input("seq", "S")
    H = p.input("hidden", "H (elements)")
    tB = p.input("tBytes", "bytes per element of T")
    dk = p.input("dtypeKey", "1..5, row of the dtype table")
    ak = p.input("attrKey", "mixed-radix index of the static attribute values (opgen.tiling.emit.attr_key)")
    cores = p.input("coreNum", "AIV cores")
    ub = p.input("ubBytes", "UB bytes per AIV core")
    col_align = p.let("colAlign", align_up(H, 16), "row stride in UB (elements)", True)
    rows_plan = [
        Buffer("inQueX", "TQue<VECIN>", 2, True, col_align, tB, "x rows"),
        Buffer("outQueOut", "TQue<VECOUT>", 2, True, col_align, tB, "out rows"),
        Buffer("workBuf", "TBuf<VECCALC>", 2, True, col_align, 4, "fp32 x - mean, y"),
        Buffer("statBuf", "TBuf<VECCALC>", 2, True, 8, 4, "mean and rstd, one 32-byte block each"),
        Buffer("paramBuf", "TBuf<VECCALC>", 4, False, col_align, 4, "weight, bias, 1+scale, shift in fp32"),
        Buffer("inQueScaleShift", "TQue<VECIN>", 2, False, col_align, tB, "scale and shift rows"),
        Buffer("reduceBuf", "TBuf<VECCALC>", 1, False, REDUCE_TMP_BYTES // 4, 4, "reduction scratch"),
    ]
    BUFFERS[1] = rows_plan
    fit, used = row_split(p, R, cores, ub, rows_plan)
    strategy = p.let("strategy", select(fit >= 1, 1, 2), "1 ROW_SPLIT, 2 COL_SPLIT", True)

    def cols_plan(cols):
        return [
            Buffer("xRes", "TBuf<VECCALC>", 1, True, cols, tB, "resident x slices of the group"),
            Buffer("outQueOut", "TQue<VECOUT>", 2, True, cols, tB, "out slice staging"),
            Buffer("sumBuf", "TBuf<VECCALC>", 2, True, 2, 4, "partial sums per row"),
            Buffer("statBuf", "TBuf<VECCALC>", 2, True, 8, 4, "mean and rstd, one 32-byte block each"),
            Buffer("paramBuf", "TBuf<VECCALC>", 4, False, cols, 4, "weight, bias, 1+scale, shift slices in fp32"),
            Buffer("workBuf", "TBuf<VECCALC>", 2, False, cols, 4, "fp32 work rows"),
            Buffer("inQueScaleShift", "TQue<VECIN>", 2, False, cols, tB, "scale and shift slices"),
            Buffer("reduceBuf", "TBuf<VECCALC>", 1, False, REDUCE_TMP_BYTES // 4, 4, "reduction scratch"),
        ]

    grp_fit, col_cores, group_rows, BUFFERS[2] = col_split(p, H, R, cores, ub, cols_plan)
    p.let("blockDim", select(strategy.eq(1), used, col_cores), "AIV cores launched", True)
    p.let("tilingKey", ak * 100 + dk * 10 + strategy, "attrKey * 100 + dtypeKey * 10 + strategy", True)
    p.let("workspaceBytes", select(strategy.eq(1), 0, 2 * 2 * col_cores * group_rows * 4 + 2 * group_rows * 4),
          "COL_SPLIT: double-buffered partial and total row sums (bytes)", True)
    p.let("fits", (fit >= 1) | (grp_fit >= 1), "1 when the chosen plan fits UB", True)
    p.let("seqLen", S + 0, "S", True)
    p.let("hiddenDim", H + 0, "H", True)
    p.let("rowNum", R + 0, "prod(Bd) * S", True)
    return p


PROGRAM = program()
INPUTS = {
    "rows": Prod("Bd") * Sym("S"), "seq": Sym("S"), "hidden": Sym("H"), "tBytes": ("bytes", "T"),
    "dtypeKey": ("dtype_key",), "attrKey": ("attr_key",), "coreNum": ("platform", "coreNum"), "ubBytes": ("platform", "ubBytes"),
}
