"""Tiling of AdaLayerNormV2 (forward with mean/rstd): one AIV launch, rows split over the cores.

Rows (prod(Bd) * S of H elements) are independent, so there is no cross-core step. ROW_SPLIT keeps
whole rows in UB: x and out double-buffered in T, two fp32 work rows, the weight, bias, 1+scale and
shift rows of the current batch in fp32 (scale/shift reloaded when a pass enters a new batch), mean and
rstd staged per row. Rows too long for UB are not supported by this plan: the spec bounds H so that
one row always fits (reference/ada_layer_norm.md §3.1 for CANN's three H regimes, which re-read x).
dtypeKey: 1 fp32/fp32, 2 fp16/fp16, 3 fp16/fp32, 4 bf16/bf16, 5 bf16/fp32 (T/U, the spec's dtype rows).
"""

from __future__ import annotations

from opgen.ir.dims import Prod, Sym
from opgen.tiling.program import TilingProgram, align_up
from opgen.tiling.rows import row_split

REDUCE_TMP_BYTES = 1024


def program() -> TilingProgram:
    """The tiling program; see the module docstring."""
    p = TilingProgram("AdaLayerNormV2")
    R = p.input("rows", "prod(Bd) * S")
    S = p.input("seq", "S")
    H = p.input("hidden", "H (elements)")
    tB = p.input("tBytes", "bytes per element of T")
    dk = p.input("dtypeKey", "1..5, row of the dtype table")
    cores = p.input("coreNum", "AIV cores")
    ub = p.input("ubBytes", "UB bytes per AIV core")
    col_align = p.let("colAlign", align_up(H, 16), "row stride in UB (elements)", True)
    row_bytes = p.let("rowBytes", 4 * col_align * tB + 8 * col_align + 64,
                      "x and out double-buffered in T + 2 fp32 work rows + mean/rstd (bytes)")
    fixed = p.let("fixedBytes", 16 * col_align + 2 * col_align * tB + REDUCE_TMP_BYTES,
                  "weight, bias, 1+scale, shift in fp32 + scale/shift staging in T + reduce tmp (bytes)")
    fit, used = row_split(p, R, cores, ub, row_bytes, fixed)
    p.let("blockDim", used, "AIV cores launched", True)
    p.let("tilingKey", 10 + dk, "10 + dtypeKey (one strategy)", True)
    p.let("workspaceBytes", 0 * R, "no user workspace (bytes)", True)
    p.let("fits", fit >= 1, "1 when one row fits UB (the spec's H bound guarantees it)", True)
    p.let("seqLen", S + 0, "S", True)
    p.let("hiddenDim", H + 0, "H", True)
    p.let("rowNum", R + 0, "prod(Bd) * S", True)
    return p


PROGRAM = program()
INPUTS = {
    "rows": Prod("Bd") * Sym("S"), "seq": Sym("S"), "hidden": Sym("H"), "tBytes": ("bytes", "T"),
    "dtypeKey": ("dtype_key",), "coreNum": ("platform", "coreNum"), "ubBytes": ("platform", "ubBytes"),
}
