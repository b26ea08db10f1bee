"""Buffer planning: the UB buffers of a kernel plan as data.

Each `Buffer` is one AscendC allocation (docs/reference/ascendc.md §1.5): a TQue (VECIN / VECOUT, `num` = 2
for double buffering) or a TBuf (VECCALC scratch), either per resident row (scaled by the rows of a UB
pass) or fixed. The tiling program's UB budget is computed from these lists (`row_bytes`,
`fixed_bytes`), so the budget the tiling proves (opgen.tiling.ub_proof) and the buffers a kernel
allocates are the same numbers. Sizes are bytes; UB rows are 32-byte aligned because every length is a
multiple of 16 elements or a whole number of 32-byte blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from opgen.tiling.program import lit


@dataclass(frozen=True)
class Buffer:
    """One UB allocation: `per_row` buffers hold `length` elements of `elem_bytes` for each row of a pass."""

    name: str
    kind: str          # "TQue<VECIN>", "TQue<VECOUT>" or "TBuf<VECCALC>"
    num: object        # number of buffers (2 = double buffering; an int or a tiling expression)
    per_row: bool
    length: object     # elements (a tiling expression)
    elem_bytes: object  # bytes per element (a tiling expression)
    doc: str = ""
    pool: int = 0      # 1: carved from the TBufPool that shares pool 0's bytes (opgen.kernel.ubplan); 0: the rest

    def bytes(self):
        """Bytes per row (per_row) or in total (fixed), as a tiling expression."""
        return lit(self.num) * self.length * self.elem_bytes


def pools(buffers) -> list:
    """[the pool-0 buffers, the pool-1 buffers] of a plan (pool 1 empty when nothing shares bytes): the UB a plan
    takes is the larger of the two pools (opgen.kernel.ubplan), not their sum."""
    return [[b for b in buffers if b.pool == 0], [b for b in buffers if b.pool == 1]]


def row_bytes(buffers):
    """Sum of the per-row buffers' bytes (a tiling expression)."""
    total = lit(0)
    for b in buffers:
        if b.per_row:
            total = total + b.bytes()
    return total


def fixed_bytes(buffers):
    """Sum of the fixed buffers' bytes (a tiling expression)."""
    total = lit(0)
    for b in buffers:
        if not b.per_row:
            total = total + b.bytes()
    return total


def describe(buffers, rows_field: str) -> list[str]:
    """Human-readable lines of a plan (`opgen graph --stage tiled`); a buffer of pool 1 (it shares pool 0's bytes)
    says so."""
    out = []
    for b in buffers:
        scale = f" x {rows_field}" if b.per_row else ""
        shared = " [pool 1: shares pool 0's bytes]" if b.pool else ""
        out.append(f"{b.kind} {b.name}: {_txt(b.num)} x {_txt(b.length)} x {_txt(b.elem_bytes)} B{scale}{shared}  // {b.doc}")
    return out


def _txt(e) -> str:
    """An expression of a plan as C++, parenthesised when it is an operation printed with an operator (it stands
    beside the 'x' of describe's products)."""
    if not hasattr(e, "cpp"):
        return str(e)
    t = e.cpp()
    return f"({t})" if getattr(e, "op", None) not in (None, "min", "max", "ceil_div", "align_up") else t
