"""Symbolic dimensions of the tensor IR.

A shape is a tuple whose entries are `DimExpr` (a symbol such as `S`, an integer literal, or
an arithmetic expression of them) or at most one `Variadic` entry (`*Bd`: zero or more leading
batch dims, e.g. AdaLayerNorm's [*Bd, S, H]). `Prod("Bd")` is the product of a variadic's dims
(the flattened batch B). Constraints (`Constraint`) relate dims: ranges, divisibility, equalities.

Units: every dim is a count of elements, never bytes.
"""

from __future__ import annotations

import numbers

import functools
import operator
from dataclasses import dataclass
from typing import Mapping, Union

from opgen.errors import SpecError

Env = Mapping[str, Union[int, tuple]]


class DimExpr:
    """Base of dim expressions; supports + - * // % with ints and other DimExprs.

    An operand that is neither (a traced tensor of the spec body: `N * x`) makes the operator return
    NotImplemented, so Python asks that operand's reflected method (`Tensor.__rmul__`): a dim is a number of the
    body in arithmetic with a tensor on either side, as `x * N` (README "Writing a spec"). A float or bool operand
    still raises SpecError ("not a dim"): a dim is an integer symbol."""

    def __add__(self, o):
        return dim_bin("+", self, o) if _dim_operand(o) else NotImplemented

    def __radd__(self, o):
        return dim_bin("+", o, self) if _dim_operand(o) else NotImplemented

    def __sub__(self, o):
        return dim_bin("-", self, o) if _dim_operand(o) else NotImplemented

    def __rsub__(self, o):
        return dim_bin("-", o, self) if _dim_operand(o) else NotImplemented

    def __mul__(self, o):
        return dim_bin("*", self, o) if _dim_operand(o) else NotImplemented

    def __rmul__(self, o):
        return dim_bin("*", o, self) if _dim_operand(o) else NotImplemented

    def __floordiv__(self, o):
        return dim_bin("//", self, o) if _dim_operand(o) else NotImplemented

    def __mod__(self, o):
        return dim_bin("%", self, o) if _dim_operand(o) else NotImplemented

    # comparisons build constraints (never use them in a boolean context)
    def __le__(self, o):
        return Constraint("<=", self, as_dim(o))

    def __lt__(self, o):
        return Constraint("<", self, as_dim(o))

    def __ge__(self, o):
        return Constraint(">=", self, as_dim(o))

    def __gt__(self, o):
        return Constraint(">", self, as_dim(o))

    def eq(self, o) -> "Constraint":
        """Constraint `self == o` (`==` itself keeps structural equality for hashing)."""
        return Constraint("==", self, as_dim(o))

    def symbols(self) -> set[str]:
        """Names of the dims (and variadic groups) this expression mentions."""
        raise NotImplementedError

    def evaluate(self, env: Env) -> int:
        """Integer value under `env` ({name: int or tuple}). Raises SpecError if unbound."""
        raise NotImplementedError


@dataclass(frozen=True, eq=True)
class Sym(DimExpr):
    """A named dim (B, S, H, N, D, T1, ...)."""

    name: str

    def __str__(self):
        return self.name

    def symbols(self):
        """Names of the dims (and variadic groups) this expression mentions."""
        return {self.name}

    def evaluate(self, env):
        """Integer value under `env` ({name: int or tuple}). Raises SpecError if unbound."""
        try:
            v = env[self.name]
        except KeyError:
            raise SpecError(f"dim {self.name} is not bound") from None
        if isinstance(v, tuple):
            raise SpecError(f"dim {self.name} is variadic; use Prod({self.name})")
        return v


@dataclass(frozen=True, eq=True)
class Lit(DimExpr):
    """An integer literal dim."""

    value: int

    def __str__(self):
        return str(self.value)

    def symbols(self):
        """Names of the dims (and variadic groups) this expression mentions."""
        return set()

    def evaluate(self, env):
        """Integer value under `env` ({name: int or tuple}). Raises SpecError if unbound."""
        return self.value


@dataclass(frozen=True, eq=True)
class Prod(DimExpr):
    """Product of the dims of a variadic group (1 when it has none)."""

    name: str

    def __str__(self):
        return f"prod({self.name})"

    def symbols(self):
        """Names of the dims (and variadic groups) this expression mentions."""
        return {self.name}

    def evaluate(self, env):
        """Integer value under `env` ({name: int or tuple}). Raises SpecError if unbound."""
        v = env.get(self.name)
        if not isinstance(v, tuple):
            raise SpecError(f"variadic dims {self.name} are not bound")
        p = 1
        for d in v:
            p *= d
        return p


@dataclass(frozen=True, eq=True)
class Rank(DimExpr):
    """Number of dims in a variadic group (`rank(Bd)`: 0..6 leading batch dims of AdaLayerNorm)."""

    name: str

    def __str__(self):
        return f"rank({self.name})"

    def symbols(self):
        """Names of the dims (and variadic groups) this expression mentions."""
        return {self.name}

    def evaluate(self, env):
        """Integer value under `env` ({name: int or tuple}). Raises SpecError if unbound."""
        v = env.get(self.name)
        if not isinstance(v, tuple):
            raise SpecError(f"variadic dims {self.name} are not bound")
        return len(v)


_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv, "%": operator.mod}
_PREC = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2}


@dataclass(frozen=True, eq=True)
class Bin(DimExpr):
    """`lhs op rhs` with op in + - * // %."""

    op: str
    lhs: DimExpr
    rhs: DimExpr

    def __str__(self):
        def wrap(e, right):
            s = str(e)
            if isinstance(e, Bin) and (_PREC[e.op] < _PREC[self.op] or (right and _PREC[e.op] == _PREC[self.op])):
                return f"({s})"
            return s

        return f"{wrap(self.lhs, False)} {self.op} {wrap(self.rhs, True)}"

    def symbols(self):
        """Names of the dims (and variadic groups) this expression mentions."""
        return self.lhs.symbols() | self.rhs.symbols()

    def evaluate(self, env):
        """Integer value under `env` ({name: int or tuple}). Raises SpecError if unbound."""
        a, b = self.lhs.evaluate(env), self.rhs.evaluate(env)
        if self.op in ("//", "%") and b == 0:
            raise SpecError(f"division by zero in dim expression {self}")
        return _OPS[self.op](a, b)


_FNS = {"min": min, "max": max, "ceil_div": lambda a, b: -(-a // b), "align_up": lambda a, b: -(-a // b) * b}


@dataclass(frozen=True, eq=True)
class Fn(DimExpr):
    """`fn(args...)` with fn one of min, max, ceil_div (ceil(a / b), b > 0), align_up (the smallest multiple of b
    that is >= a, b > 0): the integer functions the kernel schedule needs for tails and alignment (a loop's last
    extent min(step, hi - i), opgen.kernel.kir). An opaque atom to the polynomial canonical form, as // and % are."""

    fn: str
    args: tuple

    def __post_init__(self):
        if self.fn not in _FNS:
            raise SpecError(f"unknown dim function {self.fn}")
        if len(self.args) != 2:
            raise SpecError(f"dim function {self.fn} takes 2 arguments")

    def __str__(self):
        return f"{self.fn}({', '.join(str(a) for a in self.args)})"

    def symbols(self):
        """Names of the dims (and variadic groups) this expression mentions."""
        out: set = set()
        for a in self.args:
            out |= a.symbols()
        return out

    def evaluate(self, env):
        """Integer value under `env` ({name: int or tuple}). Raises SpecError if unbound or on a divisor <= 0."""
        v = [a.evaluate(env) for a in self.args]
        if self.fn in ("ceil_div", "align_up") and v[1] <= 0:
            raise SpecError(f"{self.fn} by {v[1]} in dim expression {self}")
        return _FNS[self.fn](*v)


def fn(name: str, *args) -> DimExpr:
    """`name(args...)` (Fn) with its arguments coerced; folded to a literal when every argument is one."""
    e = Fn(name, tuple(as_dim(a) for a in args))
    if all(isinstance(a, Lit) for a in e.args):
        return Lit(e.evaluate({}))
    return e


@dataclass(frozen=True, eq=True)
class Variadic:
    """`*name` inside a shape: zero or more leading dims bound together (rank range [min_rank, max_rank])."""

    name: str

    def __str__(self):
        return f"*{self.name}"

    def symbols(self):
        """Names of the dims (and variadic groups) this expression mentions."""
        return {self.name}


def _dim_operand(x) -> bool:
    """Whether DimExpr's arithmetic takes `x` itself: anything but an object whose type sets DIM_REFLECTED (a tensor
    of the spec body, opgen.dsl.builder.Tensor), which is left to its own reflected operator. An int becomes a
    literal; anything else (a float, a bool, a list, a string) is refused by as_dim with SpecError ("not a dim"),
    not a bare TypeError."""
    return not getattr(type(x), "DIM_REFLECTED", False)


def as_dim(x) -> DimExpr:
    """Coerce an int or DimExpr to a DimExpr. Raises SpecError otherwise."""
    if isinstance(x, DimExpr):
        return x
    if isinstance(x, bool):
        raise SpecError(f"not a dim: {x!r}")
    if isinstance(x, int):
        return Lit(x)
    raise SpecError(f"not a dim: {x!r}")


def dim_bin(op, a, b) -> DimExpr:
    """Build `a op b` in canonical form: + - * are normalised as polynomials (so R + (S - R) is S),
    // and % fold constants and otherwise stay opaque atoms. Memoised (dims are immutable values): tracing a
    spec builds the same few expressions over and over, once per specialisation."""
    return _canonical(op, as_dim(a), as_dim(b))


@functools.lru_cache(maxsize=1 << 16)
def _canonical(op: str, a: DimExpr, b: DimExpr) -> DimExpr:
    if isinstance(a, Lit) and isinstance(b, Lit) and (op in ("+", "-", "*") or b.value != 0):
        return Lit(_OPS[op](a.value, b.value))
    if op in ("//", "%"):
        if op == "//" and b == Lit(1):
            return a
        return Bin(op, a, b)
    return _from_poly(_poly_bin(Bin(op, a, b)))


def _atom_key(a) -> str:
    return str(a)


def _poly(e: DimExpr) -> dict:
    """Polynomial of e: {tuple of atoms (sorted): integer coefficient}."""
    if isinstance(e, Lit):
        return {(): e.value} if e.value else {}
    if isinstance(e, Bin) and e.op in ("+", "-", "*"):
        return _poly_bin(e)
    return {(e,): 1}


def _poly_bin(e: "Bin") -> dict:
    pa, pb = _poly(e.lhs), _poly(e.rhs)
    if e.op == "*":
        out: dict = {}
        for ma, ca in pa.items():
            for mb, cb in pb.items():
                m = tuple(sorted(ma + mb, key=_atom_key))
                out[m] = out.get(m, 0) + ca * cb
        return {m: c for m, c in out.items() if c}
    sign = 1 if e.op == "+" else -1
    out = dict(pa)
    for m, c in pb.items():
        out[m] = out.get(m, 0) + sign * c
    return {m: c for m, c in out.items() if c}


def _from_poly(p: dict) -> DimExpr:
    if not p:
        return Lit(0)
    terms = sorted((m for m in p if m), key=lambda m: (p[m] < 0, len(m), [_atom_key(a) for a in m]))
    if () in p:
        terms.append(())

    def product(m):
        e = m[0]
        for a in m[1:]:
            e = Bin("*", e, a)
        return e

    acc = None
    for m in terms:
        c = p[m]
        if not m:
            if acc is None:
                acc = Lit(c)
            else:
                acc = Bin("+" if c > 0 else "-", acc, Lit(abs(c)))
            continue
        mag = product(m) if abs(c) == 1 else Bin("*", Lit(abs(c)), product(m))
        if acc is None:
            acc = mag if c > 0 else (Bin("*", Lit(c), product(m)))
        else:
            acc = Bin("+" if c > 0 else "-", acc, mag)
    return acc


ShapeEntry = Union[DimExpr, Variadic]


def affine_in(e) -> tuple[str, int, int] | None:
    """(symbol, scale, offset) when dim expression `e` is scale * symbol + offset for one symbol, an integer
    scale >= 1 and an integer offset (2 * H, H + 1); None otherwise (no symbol, several, a product of symbols,
    `//` or `%`). A dim written only this way is bound from a shape as (value - offset) / scale."""
    if not isinstance(e, DimExpr) or isinstance(e, (Sym, Lit)):
        return None
    p = _poly(as_dim(e))
    terms = [m for m in p if m]
    if len(terms) != 1 or len(terms[0]) != 1 or not isinstance(terms[0][0], Sym):
        return None
    scale = p[terms[0]]
    if scale < 1:
        return None
    return terms[0][0].name, scale, p.get((), 0)


def product_in(e, name: str) -> tuple[int, tuple[str, ...]] | None:
    """(scale, other factors) when dim expression `e` is scale * name * F1 * F2 ... for an integer scale >= 1 and
    other dim symbols F (N1 * D for D: (1, ("N1",))), `name` appearing once; None otherwise (a sum, an offset,
    `//`, `name` absent or squared). A dim written only this way is bound from a shape once its other factors are
    known: value / (scale * F1 * F2 ...) (docs/design.md "Specs and the Tensor IR", product dims)."""
    if not isinstance(e, DimExpr) or isinstance(e, (Sym, Lit)):
        return None
    p = _poly(as_dim(e))
    if len(p) != 1:
        return None
    (m, scale), = p.items()
    if scale < 1 or not all(isinstance(a, Sym) for a in m) or [a.name for a in m].count(name) != 1 or len(m) < 2:
        return None
    return scale, tuple(a.name for a in m if a.name != name)


def subst(e, mapping: dict):
    """Replace symbols by dims (`{"Seq": Lit(0)}`) and re-canonicalise; Variadic entries pass through."""
    if isinstance(e, Variadic) or not mapping:
        return e
    if isinstance(e, Sym):
        return mapping.get(e.name, e)
    if isinstance(e, Bin):
        return dim_bin(e.op, subst(e.lhs, mapping), subst(e.rhs, mapping))
    if isinstance(e, Fn):
        return fn(e.fn, *(subst(a, mapping) for a in e.args))
    return e


def shape_str(shape) -> str:
    """Canonical text of a shape: `[*Bd, S, H]`."""
    return "[" + ", ".join(str(d) for d in shape) + "]"


def eval_shape(shape, env: Env) -> tuple[int, ...]:
    """Concrete shape (tuple of ints) of a symbolic shape under `env` (variadics expand)."""
    out: list[int] = []
    for d in shape:
        if isinstance(d, Variadic):
            v = env.get(d.name)
            if not isinstance(v, tuple):
                raise SpecError(f"variadic dims {d.name} are not bound")
            out.extend(v)
        else:
            out.append(d.evaluate(env))
    return tuple(out)


_CMP = {
    "==": operator.eq,
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    ">": operator.gt,
    "!=": operator.ne,
}


@dataclass(frozen=True)
class Constraint:
    """A relation between dims, e.g. `N1 % N2 == 0`, `R <= Sq + Seq`, `D % 2 == 0`."""

    op: str
    lhs: DimExpr
    rhs: DimExpr

    def __str__(self):
        return f"{self.lhs} {self.op} {self.rhs}"

    def holds(self, env: Env) -> bool:
        """Whether the relation holds under `env`."""
        return _CMP[self.op](self.lhs.evaluate(env), self.rhs.evaluate(env))

    def symbols(self):
        """Names of the dims (and variadic groups) this expression mentions."""
        return self.lhs.symbols() | self.rhs.symbols()

    def explain(self, env: Env) -> str:
        """The relation with its dims' values, in name order: `R <= Sq + Seq with R=9, Seq=3, Sq=5`; the text alone
        when a dim is unbound (or a variadic group)."""
        vals = [(n, env.get(n)) for n in sorted(self.symbols())]
        if any(not isinstance(v, numbers.Integral) for _n, v in vals):
            return str(self)
        return f"{self} with " + ", ".join(f"{n}={v}" for n, v in vals)


# ------------------------------------------------------------------------------------------------ bounds
INF = float("inf")


@dataclass(frozen=True)
class Bounds:
    """What is known of the dims of a spec: `box` {atom text: (min, max or None)} for symbols (and `rank(Bd)`),
    and `facts`, dim expressions known to be >= 0 (from `require` relations); a symbol outside the box is at least
    `floor` (None: unbounded). A variadic product `prod(Bd)` is at least 1 (every dim of a group is >= 1); `a // k`
    (k >= 1) lies in [min(a) // k, max(a) // k] and is at most a.

    `lower(e)` is a lower bound of e over the box (sound, not tight: every atom is shifted by its minimum, a = min +
    a' with a' in [0, max - min], and the monomials of the shifted polynomial bounded one by one); `nonneg(e)`
    proves e >= 0 from the box alone or from the box and one fact (e - fact >= 0)."""

    box: tuple = ()     # ((atom text, (lo, hi)), ...)
    facts: tuple = ()
    floor: int | None = None   # the minimum of a symbol the box does not name (None: unbounded)

    @staticmethod
    def of(constraints, domains: dict | None = None) -> "Bounds":
        """Bounds from IR constraints (opgen.ir.core.Graph.constraints: `s >= lo`, `s <= hi`, relations) and an
        optional {symbol: (lo, hi)} of declared domains."""
        box: dict = dict(domains or {})
        facts = []
        for c in constraints:
            lhs, rhs = as_dim(c.lhs), as_dim(c.rhs)
            if isinstance(lhs, (Sym, Rank)) and isinstance(rhs, Lit) and c.op in (">=", "<="):
                lo, hi = box.get(str(lhs), (None, None))
                if c.op == ">=":
                    lo = rhs.value if lo is None else max(lo, rhs.value)
                else:
                    hi = rhs.value if hi is None else min(hi, rhs.value)
                box[str(lhs)] = (lo, hi)
                continue
            if c.op in ("<=", "<"):
                facts.append(rhs - lhs - (1 if c.op == "<" else 0))
            elif c.op in (">=", ">"):
                facts.append(lhs - rhs - (1 if c.op == ">" else 0))
            elif c.op == "==":
                facts += [lhs - rhs, rhs - lhs]
        return Bounds(tuple(sorted(box.items())), tuple(facts))

    def range(self, a) -> tuple:
        """(lo, hi) of one atom (a Sym, Prod, Rank or an opaque // or % expression); None where unknown."""
        box = dict(self.box)
        if str(a) in box:
            return box[str(a)]
        if isinstance(a, Prod):
            return (max(1, self.floor or 0), None)
        if isinstance(a, Rank):
            return (0, None)
        if isinstance(a, Sym):
            return (self.floor, None)
        if isinstance(a, Bin) and isinstance(a.rhs, Lit) and a.rhs.value >= 1:
            lo = self.lower(a.lhs)
            hi = -self.lower(Lit(0) - a.lhs)
            if a.op == "//" and lo >= 0:
                return (int(lo) // a.rhs.value, None if hi == INF else int(hi) // a.rhs.value)
            if a.op == "%" and lo >= 0:
                return (0, a.rhs.value - 1)
        return (None, None)

    def lower(self, e) -> float:
        """A lower bound of dim expression e (-inf when the box does not bound it)."""
        p = _poly(as_dim(e))
        atoms = {a for m in p for a in m}
        rng = {a: self.range(a) for a in atoms}
        shifted: DimExpr = Lit(0)   # e with every atom a replaced by a' + lo(a)
        for m, c in p.items():
            term: DimExpr = Lit(c)
            for a in m:
                lo = rng[a][0]
                if lo is None:
                    return -INF if c else 0
                term = term * (a + lo)
            shifted = shifted + term
        total = 0.0
        for m, c in _poly(shifted).items():
            if c > 0 or not m:
                total += c if not m else 0
                continue
            width = 1
            for a in m:
                lo, hi = rng[a]
                if hi is None:
                    return -INF
                width *= hi - lo
            total += c * width
        return total

    def nonneg(self, e) -> bool:
        """Whether e >= 0 for every value of the dims the bounds allow (a proof, or False when none is found).
        Memoised per (bounds, expression): tracing every specialisation of a spec asks the same questions."""
        return _nonneg_memo(self, as_dim(e))

    def _nonneg(self, e) -> bool:
        if self.lower(e) >= 0:
            return True
        floors = [a for m in _poly(e) for a in m if isinstance(a, Bin) and a.op == "//" and isinstance(a.rhs, Lit)
                  and a.rhs.value >= 1 and self.lower(a.lhs) >= 0]
        for f in list(self.facts) + [a.lhs - a for a in floors]:
            if self.lower(e - f) >= 0:
                return True
        return False


@functools.lru_cache(maxsize=1 << 16)
def _nonneg_memo(bounds: Bounds, e) -> bool:
    return bounds._nonneg(e)
