"""Where a dim can be read from: the spec inputs whose shapes carry a dim symbol or a variadic group.

One rule for every emitter that reads dims from input shapes at run time (InferShape, the TilingFunc):
candidates are ordered required before optional, single-form before multi-form inputs, then in OpDef
order; a multi-form input counts only when the dim sits at the same position in every form. A position
is counted from the front when it precedes the variadic group (or there is none), else from the back.
Reference: reference/ascendc.md §2.5-§2.6 (shapes read from the tiling / infershape context).
"""

from __future__ import annotations

from dataclasses import dataclass

from opgen.ir.dims import Sym, Variadic


@dataclass(frozen=True)
class DimLocation:
    """Dim symbol at `k` from the front (where="front") or `k` from the back (where="back") of input
    number `index` (OpDef order) of the spec."""

    index: int
    where: str
    k: int


def _variadic_pos(shape):
    var = [k for k, d in enumerate(shape) if isinstance(d, Variadic)]
    return var[0] if var else None


def _order(spec):
    return sorted(range(len(spec.inputs)),
                  key=lambda i: (spec.inputs[i].optional, len(spec.inputs[i].shapes) > 1, i))


def sym_locations(spec, name: str) -> list[DimLocation]:
    """Every input carrying dim symbol `name`, best first (module docstring)."""
    out = []
    for i in _order(spec):
        found = set()
        for shape in spec.inputs[i].shapes:
            loc = None
            for pos, d in enumerate(shape):
                if isinstance(d, Sym) and d.name == name:
                    v = _variadic_pos(shape)
                    loc = ("front", pos) if v is None or pos < v else ("back", len(shape) - pos)
                    break
            found.add(loc)
        if None in found or len(found) != 1:
            continue
        (where, k), = found
        out.append(DimLocation(i, where, k))
    return out


def group_location(spec, name: str) -> tuple[int, int, int] | None:
    """(input index, variadic position, entries after it) of the best single-form input holding variadic
    group `name`, or None."""
    for i in _order(spec):
        shapes = spec.inputs[i].shapes
        if len(shapes) != 1:
            continue
        v = _variadic_pos(shapes[0])
        if v is not None and shapes[0][v].name == name:
            return i, v, len(shapes[0]) - v - 1
    return None
