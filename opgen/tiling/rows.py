"""The row split shared by opgen's vector kernels: R independent rows of `cols` elements (a LayerNorm
row of H, a head row of D) split over the AIV cores in contiguous ranges with tails, each core taking
`rowsPerPass` rows per UB pass. The UB budget is `fixedBytes + rowsPerPass * rowBytes <= ubBytes`.
Reference for the conventions: reference/ascendc.md §2.5 (blockFactor / usedCores / tail cores), §1.5
(double buffering = two buffers per queue), §1.8 (32-byte aligned UB rows).
"""

from __future__ import annotations

from opgen.tiling.program import TilingProgram, ceil_div, emax, emin, select


def row_split(p: TilingProgram, rows, cores, ub, row_bytes, fixed_bytes, prefix: str = ""):
    """Add the row-split variables to `p` (names prefixed by `prefix`); returns (rowsFit, usedCores).

    Fields: {prefix}rowsPerCore, {prefix}rowsTail (the first rowsTail cores take one more row),
    {prefix}rowsPerPass. rowsFit is 0 when not even one row fits (the caller must choose another plan)."""
    fit = p.let(f"{prefix}rowsFit", select(ub > fixed_bytes, (ub - fixed_bytes) // row_bytes, 0),
                "rows per UB pass that fit")
    used = p.let(f"{prefix}rowCores", emax(1, emin(cores, rows)), "cores used by the row split")
    p.let(f"{prefix}rowsPerCore", rows // used, "rows of every core", True)
    p.let(f"{prefix}rowsTail", rows % used, "the first rowsTail cores take one more row", True)
    p.let(f"{prefix}rowsPerPass", emax(1, emin(fit, ceil_div(rows, used))), "rows per UB pass", True)
    return fit, used


def row_ranges(rows: int, tl: dict, prefix: str = ""):
    """[(start, end)) row range of every used core, as the kernel walks them (for models and tests)."""
    out, start = [], 0
    n = max(1, min(tl["coreNum"], rows))
    for c in range(n):
        end = start + tl[f"{prefix}rowsPerCore"] + (1 if c < tl[f"{prefix}rowsTail"] else 0)
        out.append((start, end))
        start = end
    return out
