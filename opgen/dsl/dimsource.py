"""Where a dim can be read from: the spec inputs whose shapes carry a dim symbol or a variadic group.

One rule for every emitter that reads dims from input shapes at run time (InferShape, the TilingFunc):
candidates are ordered required before optional, single-form before multi-form inputs, then in OpDef
order; a multi-form input counts only when the dim sits at the same position in every form. A position
is counted from the front when it precedes the variadic group (or there is none), else from the back.
Reference: docs/reference/ascendc.md §2.5-§2.6 (shapes read from the tiling / infershape context).
"""

from __future__ import annotations

from dataclasses import dataclass

from opgen.ir.dims import Sym, Variadic, affine_in


@dataclass(frozen=True)
class DimLocation:
    """Dim symbol at `k` from the front (where="front") or `k` from the back (where="back") of input
    number `index` (OpDef order) of the spec; the entry there is scale * dim + offset (1 and 0 for the dim itself,
    opgen.ir.dims.affine_in), so the dim is (entry - offset) / scale."""

    index: int
    where: str
    k: int
    scale: int = 1
    offset: int = 0

    def cpp(self, entry: str) -> str:
        """C++ of the dim from the C++ text of its shape entry."""
        if (self.scale, self.offset) == (1, 0):
            return entry
        x = entry if self.offset == 0 else f"({entry} - {self.offset})" if self.offset > 0 else \
            f"({entry} + {-self.offset})"
        return x if self.scale == 1 else f"{x} / {self.scale}"


def _variadic_pos(shape):
    var = [k for k, d in enumerate(shape) if isinstance(d, Variadic)]
    return var[0] if var else None


def _order(spec):
    return sorted(range(len(spec.inputs)),
                  key=lambda i: (spec.inputs[i].optional, len(spec.inputs[i].shapes) > 1, i))


def sym_locations(spec, name: str) -> list[DimLocation]:
    """Every input carrying dim symbol `name`, best first (module docstring); inputs that carry it only as
    scale * name + offset (an affine entry such as 2 * H) come after those that carry it plainly."""
    plain, affine = [], []
    for i in _order(spec):
        found = set()
        for shape in spec.inputs[i].shapes:
            loc = None
            for pos, d in enumerate(shape):
                if isinstance(d, Variadic):
                    continue
                if isinstance(d, Sym) and d.name == name:
                    aff = (1, 0)
                else:
                    a = affine_in(d)
                    if a is None or a[0] != name:
                        continue
                    aff = a[1:]
                v = _variadic_pos(shape)
                loc = (("front", pos) if v is None or pos < v else ("back", len(shape) - pos)) + aff
                break
            found.add(loc)
        if None in found or len(found) != 1:
            continue
        (where, k, scale, off), = found
        (plain if (scale, off) == (1, 0) else affine).append(DimLocation(i, where, k, scale, off))
    return plain + affine


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
