"""Tiling of AdaLayerNormGrad: one AIV launch, deterministic, two strategies.

Units: rows and elements unless a name ends in Bytes. Reference facts: reference/ada_layer_norm.md
§3.2 (CANN's four templates, which we do not copy), §4.5 (GM traffic of CANN's kernels); platform
numbers: reference/ascendc.md §3.

ROW_SPLIT (key 1x) — whole rows of H live in UB. Rows are split over the AIV cores in contiguous
ranges (the first `rowsTail` cores take one extra row). Each core processes `rowsPerPass` rows per
UB pass (dy and x double-buffered in T, fp32 work rows), accumulates pd_gamma/pd_beta and the
pd_scale/pd_shift of the batch it is in, in fp32 in UB. Cross-core reductions are deterministic:
every core writes fp32 partial rows to workspace (pd_gamma, pd_beta, and the first/last batch it
touches for pd_scale, pd_shift), SyncAll, then the columns are split over the cores and each sums the
partials in core order, casts and writes.

COL_SPLIT (key 2x) — rows longer than UB allows. H is split over the cores in `colsPerCore`-wide
slices (multiple of 16); each core walks all rows in groups of `groupRows`, keeping its slices of dy
and x (in T) resident in UB between the two passes a row needs: pass 1 forms the partial row sums
sum(g) and sum(g * z) over its slice and exchanges them through workspace (SyncAll, each core
totals `rowsPerOwner` rows in core order, SyncAll), pass 2 writes its slice of pd_x. The core owns
its columns for every row, so pd_gamma, pd_beta, pd_scale and pd_shift need no cross-core sum.
No per-element intermediate goes to GM (CANN's 3xx/4xx kernels spill z and dy_g per element).

dtypeKey (tens digit of the tiling key): 1 fp32/fp32, 2 fp16/fp16, 3 fp16/fp32, 4 bf16/bf16, 5 bf16/fp32 (T/U).
The program and buffer plans are opgen.tiling.rowkernel's, sized by COUNTS; the kernel's GM bytes are
counted by the emulation (tests/test_kernels.py, bench/bench_emu.py), not modelled.
"""

from __future__ import annotations

from opgen.tiling.rowkernel import COL_SPLIT, ROW_SPLIT, RowCounts, program

DTYPE_KEYS = {("f32", "f32"): 1, ("f16", "f16"): 2, ("f16", "f32"): 3, ("bf16", "bf16"): 4, ("bf16", "f32"): 5}
# What the kernel holds in UB, the maximum over gamma/beta presence (checked against the lowered row
# programs by opgen.codegen.kernel): dy, x in; pd_x out; mean, rstd per row; 4 fp32 temporaries; scale,
# 1 + scale, pd_scale, pd_shift batch rows; gamma, beta, pd_gamma, pd_beta column rows; sum(g), sum(g*z).
COUNTS = RowCounts(row_in=2, row_out=1, stat_in=2, stat_out=0, temps=4, brow=4, col=4, brow_acc=2, col_acc=2,
                   rsums=2, rsums_per_level=2)
PROGRAM, BUFFERS = program("AdaLayerNormGrad", COUNTS)


def tiling(shape_rows: int, seq: int, batch: int, hidden: int, t: str, u: str, core_num: int, ub_bytes: int) -> dict:
    """Python twin of the emitted TilingFunc: all program variables for one call.

    t/u are IR dtype names ("f32", "f16", "bf16"). Raises KeyError for an unsupported (t, u) pair."""
    size = {"f32": 4, "f16": 2, "bf16": 2}
    out = PROGRAM.evaluate({
        "rows": shape_rows, "seq": seq, "batch": batch, "hidden": hidden, "tBytes": size[t],
        "dtypeKey": DTYPE_KEYS[(t, u)], "attrKey": 0, "coreNum": core_num, "ubBytes": ub_bytes,
    })
    out["uBytes"] = size[u]
    return out


# How the emitted TilingFunc reads each program input (opgen.tiling.emit).
from opgen.ir.dims import Prod as _Prod, Sym as _Sym  # noqa: E402

INPUTS = {
    "rows": _Prod("Bd") * _Sym("S"), "seq": _Sym("S"), "batch": _Prod("Bd"), "hidden": _Sym("H"),
    "tBytes": ("bytes", "T"), "dtypeKey": ("dtype_key",), "attrKey": ("attr_key",),
    "coreNum": ("platform", "coreNum"), "ubBytes": ("platform", "ubBytes"),
}
