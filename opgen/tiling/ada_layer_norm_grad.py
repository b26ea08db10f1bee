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

dtypeKey (last digit): 1 fp32/fp32, 2 fp16/fp16, 3 fp16/fp32, 4 bf16/bf16, 5 bf16/fp32 (T/U).
"""

from __future__ import annotations

from opgen.tiling.buffers import Buffer
from opgen.tiling.program import TilingProgram, align_up, ceil_div, select
from opgen.tiling.rows import col_split, row_split

ROW_SPLIT, COL_SPLIT = 1, 2
DTYPE_KEYS = {("f32", "f32"): 1, ("f16", "f16"): 2, ("f16", "f32"): 3, ("bf16", "bf16"): 4, ("bf16", "f32"): 5}
REDUCE_TMP_BYTES = 1024  # scratch of the vector reductions (bytes)
BUFFERS: dict = {}  # strategy -> [Buffer], filled by program() (opgen.tiling.buffers)


def program() -> TilingProgram:
    """The tiling program (inputs: shape, dtype sizes, platform); see module docstring."""
    p = TilingProgram("AdaLayerNormGrad")
    R = p.input("rows", "rows = prod(Bd) * S")
    S = p.input("seq", "S (rows per batch)")
    B = p.input("batch", "prod(Bd)")
    H = p.input("hidden", "H, the normalised length (elements)")
    tB = p.input("tBytes", "bytes per element of T (dy, x, scale, pd_x)")
    uB = p.input("uBytes", "bytes per element of U (gamma, beta, pd_gamma, pd_beta)")
    dk = p.input("dtypeKey", "1..5, see module docstring")
    ak = p.input("attrKey", "mixed-radix index of the static attribute values (opgen.tiling.emit.attr_key)")
    cores = p.input("coreNum", "AIV cores of the platform")
    ub = p.input("ubBytes", "UB bytes per AIV core")

    col_align = p.let("colAlign", align_up(H, 16), "row stride in UB (elements; 32-byte aligned for 16/32-bit)", True)
    # --- ROW_SPLIT UB plan: bytes per resident row and fixed bytes
    rows_plan = [
        Buffer("inQueDy", "TQue<VECIN>", 2, True, col_align, tB, "dy rows"),
        Buffer("inQueX", "TQue<VECIN>", 2, True, col_align, tB, "x rows"),
        Buffer("outQuePdX", "TQue<VECOUT>", 2, True, col_align, tB, "pd_x rows"),
        Buffer("workBuf", "TBuf<VECCALC>", 3, True, col_align, 4, "fp32 dy*(1+scale), z, dy_g"),
        Buffer("statBuf", "TBuf<VECCALC>", 2, True, 8, 4, "mean and rstd, one 32-byte block each"),
        Buffer("paramBuf", "TBuf<VECCALC>", 3, False, col_align, 4, "gamma, beta, 1+scale in fp32"),
        Buffer("accBuf", "TBuf<VECCALC>", 4, False, col_align, 4, "pd_gamma, pd_beta, pd_scale, pd_shift sums"),
        Buffer("inQueScale", "TQue<VECIN>", 1, False, col_align, tB, "scale row"),
        Buffer("reduceBuf", "TBuf<VECCALC>", 1, False, REDUCE_TMP_BYTES // 4, 4, "reduction scratch"),
    ]
    BUFFERS[ROW_SPLIT] = rows_plan
    rows_fit, row_cores = row_split(p, R, cores, ub, rows_plan)
    strategy = p.let("strategy", select(rows_fit >= 1, 1, 2), "1 ROW_SPLIT, 2 COL_SPLIT", True)
    p.let("colsPerReduceCore", align_up(ceil_div(H, row_cores), 16),
          "columns each core sums in the final cross-core reduction (ROW_SPLIT)", True)

    def cols_plan(cols):
        return [
            Buffer("dyRes", "TBuf<VECCALC>", 1, True, cols, tB, "resident dy slices of the group"),
            Buffer("xRes", "TBuf<VECCALC>", 1, True, cols, tB, "resident x slices of the group"),
            Buffer("outQuePdX", "TQue<VECOUT>", 2, True, cols, tB, "pd_x slice staging"),
            Buffer("sumBuf", "TBuf<VECCALC>", 2, True, 2, 4, "partial sum(g) and sum(g*z) per row"),
            Buffer("statBuf", "TBuf<VECCALC>", 2, True, 8, 4, "mean and rstd, one 32-byte block each"),
            Buffer("paramBuf", "TBuf<VECCALC>", 3, False, cols, 4, "gamma, beta, 1+scale slices in fp32"),
            Buffer("accBuf", "TBuf<VECCALC>", 4, False, cols, 4, "pd_gamma, pd_beta, pd_scale, pd_shift sums"),
            Buffer("workBuf", "TBuf<VECCALC>", 3, False, cols, 4, "fp32 work rows"),
            Buffer("inQueScale", "TQue<VECIN>", 1, False, cols, tB, "scale slice"),
            Buffer("reduceBuf", "TBuf<VECCALC>", 1, False, REDUCE_TMP_BYTES // 4, 4, "reduction scratch"),
        ]

    grp_fit, col_cores, group_rows, BUFFERS[COL_SPLIT] = col_split(p, H, R, cores, ub, cols_plan)
    p.let("fits", (rows_fit >= 1) | (grp_fit >= 1), "1 when the chosen plan fits UB", True)
    # --- launch
    block_dim = p.let("blockDim", select(strategy.eq(1), row_cores, col_cores), "AIV cores launched", True)
    p.let("tilingKey", ak * 100 + dk * 10 + strategy, "attrKey * 100 + dtypeKey * 10 + strategy", True)
    ws_rows = p.let("wsRowBytes", block_dim * 4 * (4 * col_align), "per-core fp32 partial rows (ROW_SPLIT, bytes)")
    ws_cols = p.let("wsColBytes", 2 * 2 * block_dim * group_rows * 4 + 2 * group_rows * 4,
                    "double-buffered partial and total row sums (COL_SPLIT, bytes)")
    p.let("workspaceBytes", select(strategy.eq(1), ws_rows, ws_cols), "user workspace (bytes)", True)
    p.let("seqLen", S + 0, "S", True)
    p.let("batchNum", B + 0, "prod(Bd)", True)
    p.let("hiddenDim", H + 0, "H", True)
    p.let("rowNum", R + 0, "prod(Bd) * S", True)
    return p


PROGRAM = program()


def tiling(shape_rows: int, seq: int, batch: int, hidden: int, t: str, u: str, core_num: int, ub_bytes: int) -> dict:
    """Python twin of the emitted TilingFunc: all program variables for one call.

    t/u are IR dtype names ("f32", "f16", "bf16"). Raises KeyError for an unsupported (t, u) pair."""
    size = {"f32": 4, "f16": 2, "bf16": 2}
    return PROGRAM.evaluate({
        "rows": shape_rows, "seq": seq, "batch": batch, "hidden": hidden, "tBytes": size[t], "uBytes": size[u],
        "dtypeKey": DTYPE_KEYS[(t, u)], "attrKey": 0, "coreNum": core_num, "ubBytes": ub_bytes,
    })


def gm_bytes(tl: dict) -> dict:
    """Model of the GM bytes the kernel moves for tiling `tl`, next to the minimum.

    Minimum: dy, x read once, pd_x written once (T), mean/rstd read once (fp32), scale read once and
    pd_scale/pd_shift written once (B x H, T), gamma/beta read once and pd_gamma/pd_beta written once
    (H, U). Returns {"bytes", "min_bytes", "ratio", "detail": {...}}."""
    R, S, B, H = tl["rowNum"], tl["seqLen"], tl["batchNum"], tl["hiddenDim"]
    t, u = tl["tBytes"], tl["uBytes"]
    n = tl["blockDim"]
    minimum = 3 * R * H * t + 8 * R + 3 * B * H * t + 4 * H * u
    d = {"dy+x+pd_x": 3 * R * H * t, "pd_scale+pd_shift": 2 * B * H * t, "pd_gamma+pd_beta": 2 * H * u}
    if tl["strategy"] == ROW_SPLIT:
        touched = 0  # (core, batch) pairs: one scale row read and one pd_scale/pd_shift partial each
        start = 0
        for c in range(n):
            end = start + tl["rowsPerCore"] + (1 if c < tl["rowsTail"] else 0)
            touched += (end - 1) // S - start // S + 1
            start = end
        d["mean+rstd"] = 8 * R
        d["scale"] = touched * H * t
        d["gamma+beta"] = n * 2 * H * u
        d["partials gamma/beta (write+read)"] = 2 * (n * 2 * H * 4)
        d["partials scale/shift (write+read)"] = 2 * (touched * 2 * H * 4)
    else:
        groups = -(-R // tl["groupRows"])
        d["mean+rstd"] = n * 8 * R
        d["scale"] = B * H * t
        d["gamma+beta"] = 2 * H * u
        d["row-sum exchange"] = groups * (2 * n * tl["groupRows"] * 4 * 2 + n * tl["groupRows"] * 8)
    total = sum(d.values())
    return {"bytes": total, "min_bytes": minimum, "ratio": total / minimum, "detail": d}


# How the emitted TilingFunc reads each program input (opgen.tiling.emit).
from opgen.ir.dims import Prod as _Prod, Sym as _Sym  # noqa: E402

INPUTS = {
    "rows": _Prod("Bd") * _Sym("S"), "seq": _Sym("S"), "batch": _Prod("Bd"), "hidden": _Sym("H"),
    "tBytes": ("bytes", "T"), "uBytes": ("bytes", "U"), "dtypeKey": ("dtype_key",), "attrKey": ("attr_key",),
    "coreNum": ("platform", "coreNum"), "ubBytes": ("platform", "ubBytes"),
}
