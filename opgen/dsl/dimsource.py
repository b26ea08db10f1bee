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

from opgen.ir.dims import Sym, Variadic, affine_in, product_in
from opgen.names import c_printf


def wrapped(x: str) -> bool:
    """True when C++ text `x` is one parenthesised whole: it opens with "(" and that bracket closes at its end."""
    depth = 0
    for j, c in enumerate(x):
        depth += (c == "(") - (c == ")")
        if depth == 0:
            return j == len(x) - 1 and x.startswith("(")
    return False


def _atom(x: str) -> str:
    """C++ text `x` as one operand: as is when it is a name, a call `F(...)` or already parenthesised whole, else
    in parentheses."""
    head = x.split("(", 1)[0]
    if x.isidentifier() or (head == "" or head.isidentifier()) and wrapped(x[len(head):]):
        return x
    return f"({x})"


@dataclass(frozen=True)
class DimLocation:
    """Dim symbol at `k` from the front (where="front") or `k` from the back (where="back") of input
    number `index` (OpDef order) of the spec; the entry there is scale * dim * F1 * F2 ... + offset (scale 1, offset
    0 and no factors for the dim itself; opgen.ir.dims.affine_in for 2 * H + 1, opgen.ir.dims.product_in for
    N1 * D, `factors` the other dims of the product), so the dim is (entry - offset) / (scale * F1 * F2 ...)."""

    index: int
    where: str
    k: int
    scale: int = 1
    offset: int = 0
    factors: tuple = ()

    def cpp(self, entry: str, factors: list | None = None) -> str:
        """C++ of the dim from the C++ text of its shape entry; `factors`: the C++ of the other dims of a product
        place, in `self.factors` order. A product place reads 0 when its factors multiply to 0 (no division by
        zero in host code)."""
        if self.factors:
            if factors is None or len(factors) != len(self.factors):
                raise ValueError(f"the product place of input {self.index} needs its factors {self.factors}")
            den = self.divisor(factors)
            return f"({den} != 0 ? {entry} / {den} : 0)"
        if (self.scale, self.offset) == (1, 0):
            return entry
        x = entry if self.offset == 0 else f"({entry} - {self.offset})" if self.offset > 0 else \
            f"({entry} + {-self.offset})"
        return x if self.scale == 1 else f"{x} / {self.scale}"

    def divisor(self, factors: list) -> str:
        """C++ of a product place's divisor, scale * F1 * F2 ... from the factors' C++ (one operand)."""
        return _atom(" * ".join(([str(self.scale)] if self.scale != 1 else []) + [_atom(f) for f in factors]))

    def read(self, entry, pick=None) -> str:
        """C++ of the dim from `entry(where, k)`, the C++ of the shape entry at a place (`pick`: unused here,
        see FormDimLocation.read). Not for a product place (read_dim reads those)."""
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
        selection of the picked form's expression (0 for a form without the dim: nothing reads it there). Not for
        product places (read_dim reads those)."""
        return pick(self.attr, [p.read(entry, pick) if p is not None else "0" for p in self.places])

    def place(self, choice: int):
        """The DimLocation in the form of choice number `choice` (None when that form lacks the dim)."""
        return self.places[choice]


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
    scale * name + offset (an affine entry such as 2 * H) come after those that carry it plainly, and those that
    carry it only in a product with other dims (N1 * D: read once N1 is known) after those."""
    plain, affine, quotient = [], [], []
    for i in _order(spec):
        found = set()
        per_form = []
        for shape in spec.inputs[i].shapes:
            cands = []   # (rank: 0 the dim, 1 affine, 2 a product, place)
            for pos, d in enumerate(shape):
                if isinstance(d, Variadic):
                    continue
                if isinstance(d, Sym) and d.name == name:
                    cands.append((0, pos, (1, 0, ())))
                elif (a := affine_in(d)) is not None:
                    if a[0] == name:
                        cands.append((1, pos, a[1:] + ((),)))
                elif (q := product_in(d, name)) is not None:
                    cands.append((2, pos, (q[0], 0, q[1])))
            loc = None
            if cands:
                _rank, pos, aff = min(cands, key=lambda c: c[:2])
                loc = _place(shape, pos) + aff
            found.add(loc)
            per_form.append(loc)
        decl = spec.inputs[i]
        if decl.form_by is not None and len(found - {None}) > 1 or decl.form_by is not None and None in found \
                and found != {None}:   # its place follows the attribute that picks the form (None: not in it)
            places = tuple(DimLocation(i, *loc) if loc is not None else None for loc in per_form)
            bucket = quotient if any(p.factors for p in places if p is not None) else \
                affine if any((p.scale, p.offset) != (1, 0) for p in places if p is not None) else plain
            bucket.append(FormDimLocation(i, decl.form_by, decl.choices, places))
            continue
        if None in found or len(found) != 1:
            continue
        (where, k, scale, off, factors), = found
        (quotient if factors else plain if (scale, off) == (1, 0) else affine).append(
            DimLocation(i, where, k, scale, off, factors))
    def complete(loc):   # a place in every form before a form-picked one that lacks the dim in some form
        return not isinstance(loc, FormDimLocation) or None not in loc.places

    return sum((sorted(b, key=complete, reverse=True) for b in (plain, affine, quotient)), [])


def _form_attrs(spec) -> list[tuple[str, int]]:
    """(attribute, number of choices) of every static attribute that picks an input's shape form, in attribute
    order."""
    used = {i.form_by for i in spec.inputs if i.form_by is not None}
    return [(a.name, len(a.choices)) for a in spec.attrs if a.name in used]


def _entry_dim(spec, index: int, A: dict, p: DimLocation):
    """The spec's dim expression at place `p` of input number `index` in the shape form of assignment `A`."""
    decl = spec.inputs[index]
    shape = decl.shapes[A[decl.form_by]] if decl.form_by is not None else decl.shapes[0]
    return shape[p.k] if p.where == "front" else shape[len(shape) - p.k]


@dataclass(frozen=True)
class Divides:
    """A product place read_dim divides by (host code checks the division is exact, as the aclnn layer and the
    interpreter do): in the shape form `form` ({form attribute: choice index}), the entry of input number `index`
    at (where, k) is `expr` (its spec text) and must be a multiple of `den` (C++); `dim` is the dim read, `factors`
    the other dims of the product with their C++."""

    form: tuple
    index: int
    where: str
    k: int
    entry: str
    den: str
    dim: str
    expr: str
    factors: tuple

    def check(self, param: str, form_cond) -> dict:
        """Template data of the host check: {"cond": C++ failing condition, "msg": printf literal, "args": [C++]};
        `param` names the input, `form_cond(attr, choice)` prints the test of a form attribute's choice. The words
        are the interpreter's (opgen.dsl.validate.unify_shape): "query: dim 2 is 100, not D * N1 for any whole D
        with N1=3"."""

        axis = str(self.k) if self.where == "front" else f"-{self.k}"
        parts = [f"{param}: dim {axis} is ", "%lld", f", not {self.expr} for any whole {self.dim} with "]
        for j, (f, _cpp) in enumerate(self.factors):
            parts[-1] += ("" if j == 0 else ", ") + f"{f}="
            parts += ["%lld", ""]
        conds = [form_cond(attr, k) for attr, k in self.form]
        return {"cond": " && ".join(conds + [f"{self.den} != 0", f"{self.entry} % {self.den} != 0"]),
                "msg": c_printf(*parts),
                "args": [f"static_cast<long long>({self.entry})"] +
                        [f"static_cast<long long>({cpp})" for _f, cpp in self.factors]}


def read_dim(spec, name: str, entry, pick, present, tail, var=lambda n: None, zero_ok: bool = True,
             divides: list | None = None) -> str | None:
    """C++ of dim `name` read at run time from the input shapes (InferShape, the TilingFunc: one rule for both),
    decided per shape form (each choice of the attributes that pick input forms, joined by `pick(attr,
    [expr per choice])`). In a form: the first required input holding the dim itself or an affine entry of it
    (2 * H + 1) at a place; else a required input holding it in a product whose other dims this rule reads in
    that form without it (H = N1 * D with N1 known gives D = H / N1); else the optional inputs holding it, each
    when `present(index)` (C++ condition) holds, behind them `tail(name)` (the dim's absent value or an attribute
    bound to it, None if neither; 0 in its place when `zero_ok`). A form where nothing gives the dim reads 0
    there (nothing reads it in that form). `entry(index, where, k)` prints a shape entry of input number `index`;
    `var(dim)` names a host variable already holding a factor's value (else the factor is printed inline).
    `divides`, when given, receives a Divides for each product place a required input's read uses (once each).
    Returns None when no form gives the dim (or an optional chain has no tail and not `zero_ok`)."""
    forms = _form_attrs(spec)

    def in_form(loc, A):
        if isinstance(loc, FormDimLocation):
            return loc.place(A[loc.attr])
        return loc

    def at(A, n, resolving) -> str | None:
        places = []
        for loc in sym_locations(spec, n):
            p = in_form(loc, A)
            if p is not None:
                places.append((spec.inputs[loc.index].optional, bool(p.factors), loc.index, p))
        places.sort(key=lambda x: x[:2])   # stable: sym_locations' order within a kind

        def read(i, p, optional=True):
            ent = entry(i, p.where, p.k)
            if not p.factors:
                return p.cpp(ent)
            fs = []
            for f in p.factors:
                e = None if f in resolving or f == n else at(A, f, resolving | {n})
                if e is None:
                    return None
                fs.append(var(f) or e)
            if divides is not None and not optional:
                d = Divides(tuple(sorted(A.items())), i, p.where, p.k, ent, p.divisor(fs), n,
                            str(_entry_dim(spec, i, A, p)), tuple(zip(p.factors, fs)))
                if d not in divides:
                    divides.append(d)
            return p.cpp(ent, fs)

        opts = []
        for optional, _product, i, p in places:
            e = read(i, p, optional)
            if e is None:
                continue
            if not optional:
                return e
            opts.append((i, e))
        rest = tail(n)
        if not opts:
            return rest
        if rest is None:
            if not zero_ok:
                return None
            rest = "0"
        for i, e in reversed(opts):
            rest = f"{present(i)} ? {e} : " + (f"({rest})" if " ? " in rest else rest)
        return rest

    values = {}

    def assign(k, A):
        if k == len(forms):
            values[tuple(sorted(A.items()))] = at(A, name, frozenset())
            return
        for j in range(forms[k][1]):
            assign(k + 1, {**A, forms[k][0]: j})

    assign(0, {})
    if all(v is None for v in values.values()):
        return None

    def tree(k, A):
        if k == len(forms):
            v = values[tuple(sorted(A.items()))]
            return v if v is not None else "0"
        return pick(forms[k][0], [tree(k + 1, {**A, forms[k][0]: j}) for j in range(forms[k][1])])

    return tree(0, {})


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
            if isinstance(loc, DimLocation) and (loc.scale, loc.offset, loc.factors) == (1, 0, ()):
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
