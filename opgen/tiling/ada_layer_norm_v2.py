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
from opgen.tiling.rowkernel import RowCounts, program

# What the kernel holds in UB (checked against the lowered row programs by opgen.codegen.kernel): x in,
# out out, mean and rstd per row, 2 fp32 temporaries, scale, shift, 1 + scale batch rows, weight and bias
# column rows, two row sums of one level each (mean, then the centred sum of squares).
COUNTS = RowCounts(row_in=1, row_out=1, stat_in=0, stat_out=2, temps=2, brow=3, col=2, brow_acc=0, col_acc=0,
                   rsums=2, rsums_per_level=1)
PROGRAM, BUFFERS = program("AdaLayerNormV2", COUNTS, float_attrs=("epsilon",))

INPUTS = {
    "rows": Prod("Bd") * Sym("S"), "seq": Sym("S"), "batch": Prod("Bd"), "hidden": Sym("H"), "tBytes": ("bytes", "T"),
    "epsilonAttr": ("attr_bits", "epsilon"),
    "dtypeKey": ("dtype_key",), "attrKey": ("attr_key",), "coreNum": ("platform", "coreNum"), "ubBytes": ("platform", "ubBytes"),
}
