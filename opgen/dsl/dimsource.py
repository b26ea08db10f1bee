"""Where a dim can be read from: the spec inputs whose shapes carry a dim symbol or a variadic group.

One rule for every emitter that reads dims from input shapes at run time (InferShape, the TilingFunc):
candidates are ordered required before optional, single-form before multi-form inputs, then in OpDef
order; a multi-form input counts only when the dim sits at the same position in every form, or when a static
attribute picks its form (InputDecl.form_by): the place is then read per form (FormDimLocation, GroupPlace.by)
and the emitters select it by the attribute's value. A position
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

    def read(self, entry, pick=None) -> str:
        """C++ of the dim from `entry(where, k)`, the C++ of the shape entry at a place (`pick`: unused here,
        see FormDimLocation.read)."""
        return self.cpp(entry(self.where, self.k))


@dataclass(frozen=True)
class FormDimLocation:
    """A dim of an input whose shape static attribute `attr` picks (InputDecl.form_by): `places[k]` is its
    DimLocation in the form of choice k (`choices` order; None when that form lacks it), `index` the input's
    number."""

    index: int
    attr: str
    choices: tuple
    places: tuple

    def read(self, entry, pick) -> str:
        """C++ of the dim: `entry(where, k)` prints the shape entry at a place, `pick(attr, [expr per form])` the
        selection of the picked form's expression (0 for a form without the dim: nothing reads it there)."""
        return pick(self.attr, [p.read(entry, pick) if p is not None else "0" for p in self.places])


@dataclass(frozen=True)
class GroupPlace:
    """Where variadic group `name` sits in input number `index`: entries [begin, rank - after). For an input whose
    shape a static attribute picks, `by` is (attr, choices, ((begin, after) per form)); begin/after are then those
    of the first form."""

    index: int
    begin: int
    after: int
    by: tuple | None = None

    def bounds(self, pick) -> tuple[str, str]:
        """(C++ of begin, C++ of after): plain numbers, or `pick(attr, [text per form])` selections."""
        if self.by is None:
            return str(self.begin), str(self.after)
        attr, _choices, places = self.by
        return pick(attr, [str(b) for b, _a in places]), pick(attr, [str(a) for _b, a in places])

    def __getitem__(self, k):   # the (index, begin, after) triple of the single-form case
        return (self.index, self.begin, self.after)[k]


def _variadic_pos(shape):
    var = [k for k, d in enumerate(shape) if isinstance(d, Variadic)]
    return var[0] if var else None


def _order(spec):
    return sorted(range(len(spec.inputs)),
                  key=lambda i: (spec.inputs[i].optional, len(spec.inputs[i].shapes) > 1, i))


def _place(shape, pos: int) -> tuple:
    """(where, k) of entry `pos` of `shape`: ("front", pos) before its variadic group (or with none), else ("back",
    its distance from the end), so the place holds whatever the group's rank."""
    v = _variadic_pos(shape)
    return ("front", pos) if v is None or pos < v else ("back", len(shape) - pos)


def sym_locations(spec, name: str) -> list[DimLocation]:
    """Every input carrying dim symbol `name`, best first (module docstring); inputs that carry it only as
    scale * name + offset (an affine entry such as 2 * H) come after those that carry it plainly."""
    plain, affine = [], []
    for i in _order(spec):
        found = set()
        per_form = []
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
                loc = _place(shape, pos) + aff
                break
            found.add(loc)
            per_form.append(loc)
        decl = spec.inputs[i]
        if decl.form_by is not None and len(found - {None}) > 1 or decl.form_by is not None and None in found \
                and found != {None}:   # its place follows the attribute that picks the form (None: not in it)
            places = tuple(DimLocation(i, *loc) if loc is not None else None for loc in per_form)
            scaled = any((p.scale, p.offset) != (1, 0) for p in places if p is not None)
            (affine if scaled else plain).append(FormDimLocation(i, decl.form_by, decl.choices, places))
            continue
        if None in found or len(found) != 1:
            continue
        (where, k, scale, off), = found
        (plain if (scale, off) == (1, 0) else affine).append(DimLocation(i, where, k, scale, off))
    def complete(loc):   # a place in every form before a form-picked one that lacks the dim in some form
        return not isinstance(loc, FormDimLocation) or None not in loc.places

    return sorted(plain, key=complete, reverse=True) + sorted(affine, key=complete, reverse=True)


def group_location(spec, name: str) -> GroupPlace | None:
    """Where variadic group `name` is read: the best single-form input holding it, else an input whose shape
    a static attribute picks and whose every form holds it (GroupPlace.by); None when no input does."""
    for i in _order(spec):
        shapes = spec.inputs[i].shapes
        if len(shapes) != 1:
            continue
        v = _variadic_pos(shapes[0])
        if v is not None and shapes[0][v].name == name:
            return GroupPlace(i, v, len(shapes[0]) - v - 1)
    for i in _order(spec):
        decl = spec.inputs[i]
        if decl.form_by is None:
            continue
        places = []
        for shape in decl.shapes:
            v = _variadic_pos(shape)
            if v is None or shape[v].name != name:
                break
            places.append((v, len(shape) - v - 1))
        else:
            return GroupPlace(i, places[0][0], places[0][1], (decl.form_by, decl.choices, tuple(places)))
    return None


def attr_dim_min(spec, attr) -> int:
    """The least value integer attribute `attr` (declared with dim=) may take: its dim's min=, at least 1 (a dim
    may divide another, C // G). Host code reading the dim from the attribute (TilingFunc, InferShape) checks it
    before any use, since graph mode runs them without the aclnn layer's checks in front."""
    d = spec.dims_.get(attr.dim.name)
    return max(1, d.min if d is not None and d.min is not None else 1)



def shared_dims(spec) -> list[tuple[str, list[DimLocation]]]:
    """[(dim name, its places)] for every dim carried plainly (the dim itself, at one place in each of the input's
    shape forms) at two places or more — by two inputs, or twice by one single-form input ([N, N]) — each input's
    places in sym_locations' order: the shapes must agree there.
    The aclnn layer checks this for every place; graph mode reaches InferShape and the TilingFunc without it, so
    they compare these (docs/design.md "Emission"). Places an attribute picks or that carry an affine entry
    (2 * H) are left to the aclnn layer."""
    out = []
    for name in spec.dims_:
        places = []
        for loc in sym_locations(spec, name):
            if isinstance(loc, DimLocation) and (loc.scale, loc.offset) == (1, 0):
                places.append(loc)
                places += _more_places(spec, loc.index, name, loc)
        if len(places) >= 2:
            out.append((name, places))
    return out


def _more_places(spec, i: int, name: str, first: DimLocation) -> list[DimLocation]:
    """The places after `first` where single-form input number `i` carries dim `name` itself again (a square
    [N, N] input: both extents must agree)."""
    if len(spec.inputs[i].shapes) != 1:
        return []
    shape = spec.inputs[i].shapes[0]
    out = []
    for pos, d in enumerate(shape):
        if isinstance(d, Sym) and d.name == name:
            loc = DimLocation(i, *_place(shape, pos))
            if (loc.where, loc.k) != (first.where, first.k):
                out.append(loc)
    return out
