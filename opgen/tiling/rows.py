"""The row split shared by opgen's vector kernels: R independent rows of `cols` elements (a LayerNorm
row of H, a head row of D) split over the AIV cores in contiguous ranges with tails, each core taking
`rowsPerPass` rows per UB pass. The UB budget is `fixedBytes + rowsPerPass * rowBytes <= ubBytes`.
Reference for the conventions: docs/reference/ascendc.md §2.5 (blockFactor / usedCores / tail cores), §1.5
(double buffering = two buffers per queue), §1.8 (32-byte aligned UB rows).
"""

from __future__ import annotations

from fractions import Fraction

from opgen.platforms.cost import pipeline_cycles
from opgen.tiling.buffers import fixed_bytes as buffer_fixed_bytes
from opgen.tiling.buffers import row_bytes as buffer_row_bytes
from opgen.tiling.program import TilingProgram, align_up, ceil_div, emax, emin, lit, select


ONE_BUFFER_MARGIN = Fraction(1, 64)
"""How much faster one buffer per row queue must be priced than two to be taken (rows.row_split's rowQueBufs): the
price counts the last scalar wait of a pass for PIPE_V, not the others nor the flag hand-offs, which one buffer
exposes and two hide. Measured (docs/design.md "Copy/compute overlap"): LogSoftmaxV2 4096 x 4096 bf16 is priced
0.5 % faster with one buffer, and the emulation's time line finds it 0.2 % slower (49.8 against 49.7 us);
LayerNormGradV3 4096 x 1152 is priced 2.7 % faster and runs 8 % faster there (32.8 against 35.5 us)."""


def row_split(p: TilingProgram, rows, cores, ub, plan, prefix: str = "", max_pass: int = 4095, single=None,
              price=None, overlap=None, pool_bound: bool = False, fetch: bool = False):
    """Add the row split with UB buffer `plan` ([Buffer], opgen.tiling.buffers) to `p`; returns
    (rowsFit, usedCores). Variables: rowBytes, fixedBytes (from the plan), rowsFit (0 when not one row
    fits: the caller needs another plan), rowCores; fields rowsPerCore, rowsTail (the first rowsTail
    cores take one more row), rowsPerPass (at most `max_pass`, at most 4095). Names are prefixed by `prefix`.

    With `single` (the same plan with one buffer per row queue instead of two; opgen.tiling.rowkernel.row_plan)
    and `price` the field rowQueBufs chooses between them by estimated time: each plan's rows per pass (its fit,
    the cap, this core's rows) and passes, priced by opgen.platforms.cost.pipeline_cycles with queue depth 2 and 1
    (passCyclesTwoBufs / passCyclesOneBuf; two buffers priced prefetched: the kernel's pass loop issues the next
    pass's copy-in before this pass's compute where its queues have two, opgen.kernel.rowsched.pass_loop):
    `price(rows_per_pass, cores)` gives a pass's (copy-in, compute,
    copy-out) cycles at a core's share of the bandwidth, `overlap` the (a, b, s) fractions of the Kernel IR's Compute
    where a row input is freed, a row output allocated and the scalar unit last waits for PIPE_V
    (opgen.kernel.rowsched.queue_overlap; (1, 0, 1) when None: held throughout, no overlap). rowQueBufs is 1 when
    two buffers per queue fit a row, one fits more and its price is lower by ONE_BUFFER_MARGIN, else 2 (where two
    fit no row the caller's other strategies decide, as before); rowBytes, fixedBytes and rowsFit are then the
    chosen plan's, rowsFit computed from the two (the two plans' own are rowBytesTwoBufs / rowBytesOneBuf, ...). The kernel allocates its row queues with
    that many buffers (opgen.kernel.rowsched `_row_split`), each input freed right after its last read and each
    output allocated right before its first write (docs/design.md "Copy/compute overlap"). pool_bound: two buffers
    per row queue would hold more event ids than the TPipe's pool (docs/design.md "Event ids of the queues"), so
    rowQueBufs is 1 and `single` the plan, unpriced. `fetch`: the one-buffer loop's Compute issues the next
    pass's copy-in right after it frees the row inputs (opgen.kernel.rowsched.fetch_loop), priced by
    pipeline_cycles with `fetch` (no scalar-wait term)."""
    cap, why = min(max_pass, 4095), "one DataCopyPad moves them, blockCount is 12 bits"
    if cap < 4095:
        why = "one repeat-form instruction takes them, repeatTime is 0..255"
    if pool_bound and single is not None:
        _row_bytes, _fixed, fit = _fit_lets(p, prefix, "", buffer_row_bytes(single), buffer_fixed_bytes(single), ub)
        used = p.let(f"{prefix}rowCores", emax(1, emin(cores, rows)), "cores used by the row split")
        p.let(f"{prefix}rowQueBufs", lit(1) + 0, "buffers per row queue of ROW_SPLIT: one (two would hold more "
              "event ids than the TPipe's pool)", True)
    elif single is None or price is None:
        _row_bytes, _fixed, fit = _fit_lets(p, prefix, "", buffer_row_bytes(plan), buffer_fixed_bytes(plan), ub)
        used = p.let(f"{prefix}rowCores", emax(1, emin(cores, rows)), "cores used by the row split")
        if single is not None:
            p.let(f"{prefix}rowQueBufs", lit(2) + 0, "buffers per row queue of ROW_SPLIT (not priced: two)", True)
    else:
        row2, fixed2, fit2 = _fit_lets(p, prefix, "TwoBufs", buffer_row_bytes(plan), buffer_fixed_bytes(plan), ub,
                                       "two buffers per row queue")
        row1, fixed1, fit1 = _fit_lets(p, prefix, "OneBuf", buffer_row_bytes(single), buffer_fixed_bytes(single), ub,
                                       "one buffer per row queue")
        used = p.let(f"{prefix}rowCores", emax(1, emin(cores, rows)), "cores used by the row split")
        want = emin(lit(cap), ceil_div(rows, used))
        a, b, s = overlap if overlap is not None else (Fraction(1), Fraction(0), Fraction(1))
        cost = {}
        for depth, fit_d, tag in ((2, fit2, "TwoBufs"), (1, fit1, "OneBuf")):
            what = "with two buffers per row queue" if depth == 2 else "with one buffer per row queue"
            k = p.let(f"{prefix}passRows{tag}", emax(1, emin(fit_d, want)), f"rows a pass {what}")
            passes = p.let(f"{prefix}passes{tag}", ceil_div(ceil_div(rows, used), k), f"passes of a core {what}")
            t_in, t_c, t_out = price(k, used)
            t_in = p.let(f"{prefix}copyInCycles{tag}", t_in, f"estimated cycles of a pass's copy-in {what}")
            t_c = p.let(f"{prefix}computeCycles{tag}", t_c, f"estimated cycles of a pass's compute {what}")
            t_out = p.let(f"{prefix}copyOutCycles{tag}", t_out, f"estimated cycles of a pass's copy-out {what}")
            cost[depth] = p.let(f"{prefix}passCycles{tag}", pipeline_cycles(
                passes, t_in, t_c, t_out, depth, a, b, mx=emax, s=s, prefetch=depth == 2,
                fetch=fetch and depth == 1),
                f"estimated cycles of a core's passes {what} (pipeline_cycles, a = {a}, b = {b}, s = {s}"
                + (", the next pass prefetched)" if depth == 2 else
                   ", the next pass's copy-in issued by Compute after its frees)" if fetch else ")"))
        num, den = ONE_BUFFER_MARGIN.numerator, ONE_BUFFER_MARGIN.denominator
        bufs = p.let(f"{prefix}rowQueBufs", select((fit2 >= 1) & (fit1 > fit2)
                                                   & (cost[1] * den < cost[2] * (den - num)), 1, 2),
                     f"buffers per row queue of ROW_SPLIT: 1 where one is priced {ONE_BUFFER_MARGIN} faster, else 2",
                     True)
        one = bufs.eq(1)
        _row_bytes, _fixed, fit = _fit_lets(p, prefix, "", select(one, row1, row2), select(one, fixed1, fixed2),
                                            ub)   # the chosen plan's
    p.let(f"{prefix}rowsPerCore", rows // used, "rows of every core", True)
    p.let(f"{prefix}rowsTail", rows % used, "the first rowsTail cores take one more row", True)
    p.let(f"{prefix}rowsPerPass", emax(1, emin(emin(fit, cap), ceil_div(rows, used))),
          f"rows per UB pass (at most {cap}: {why})", True)
    return fit, used


def _fit_lets(p: TilingProgram, prefix: str, tag: str, row, fixed, ub, what: str = ""):
    """The lets <prefix>rowBytes<tag> (`row`: UB bytes per resident row), <prefix>fixedBytes<tag> (`fixed`: UB bytes
    held once) and <prefix>rowsFit<tag> (rows per UB pass that fit in `ub` bytes, 0 when not one does) of one buffer
    plan of `row_split` (`what`: the plan, in their docs); returns the three variables."""
    row = p.let(f"{prefix}rowBytes{tag}", row, "UB bytes per resident row" + (f", {what}" if what else ""))
    fixed = p.let(f"{prefix}fixedBytes{tag}", fixed, "UB bytes held once" + (f", {what}" if what else ""))
    fit = p.let(f"{prefix}rowsFit{tag}", select(ub > fixed, (ub - fixed) // row, 0),
                "rows per UB pass that fit" + (f" with {what}" if what else ""))
    return row, fixed, fit


def col_split(p: TilingProgram, cols_total, rows, cores, ub, plan_for, cols=None, col_cores=None, cols_pass=None,
              group_alt=None):
    """Add the column split (rows too long for UB): `cols_total` columns over the cores in 16-multiple slices,
    rows walked in groups kept resident in UB. `plan_for(columns per pass)` gives the UB buffer plan. Given
    `cols` / `col_cores` (slice width and cores, already in `p`) and `cols_pass` (columns per pass, default the
    slice), they are used instead of new variables. `group_alt` = (condition, rows): groupRows is `rows` where the
    condition holds (another strategy sharing the field, sized by its own plan). Returns (groupFit, colCores,
    groupRows, plan). Fields colsPerCore, colsTail, groupRows, rowsPerOwner (rows each core totals per group in the
    cross-core row-sum exchange)."""
    if cols is None:
        cols = p.let("colsPerCore", align_up(ceil_div(cols_total, cores), 16), "columns per core (COL_SPLIT)", True)
        col_cores = p.let("colCores", ceil_div(cols_total, cols), "cores used by COL_SPLIT")
    p.let("colsTail", cols_total - (col_cores - 1) * cols, "columns of the last core (COL_SPLIT)", True)
    plan = plan_for(cols if cols_pass is None else cols_pass)
    row_bytes = p.let("groupRowBytes", buffer_row_bytes(plan), "UB bytes per resident row (COL_SPLIT)")
    fixed = p.let("groupFixedBytes", buffer_fixed_bytes(plan), "UB bytes held once (COL_SPLIT)")
    fit = p.let("groupFit", select(ub > fixed, (ub - fixed) // row_bytes, 0), "rows per group that fit")
    own = emax(1, emin(emin(fit, 1024), rows))
    if group_alt is None:
        group_rows = p.let("groupRows", own, "rows per group (COL_SPLIT)", True)
    else:
        group_rows = p.let("groupRows", select(group_alt[0], group_alt[1], own), "rows per group", True)
    p.let("rowsPerOwner", ceil_div(group_rows, col_cores), "rows each core totals per group (COL_SPLIT)", True)
    return fit, col_cores, group_rows, plan


def row_ranges(rows: int, tl: dict, prefix: str = ""):
    """[(start, end)) row range of every used core, as the kernel walks them (for models and tests)."""
    out, start = [], 0
    n = max(1, min(tl["coreNum"], rows))
    for c in range(n):
        end = start + tl[f"{prefix}rowsPerCore"] + (1 if c < tl[f"{prefix}rowsTail"] else 0)
        out.append((start, end))
        start = end
    return out
