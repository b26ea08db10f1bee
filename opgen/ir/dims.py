"""Symbolic dimensions of the tensor IR.

A shape is a tuple whose entries are `DimExpr` (a symbol such as `S`, an integer literal, or
an arithmetic expression of them) or at most one `Variadic` entry (`*Bd`: zero or more leading
batch dims, e.g. AdaLayerNorm's [*Bd, S, H]). `Prod("Bd")` is the product of a variadic's dims
(the flattened batch B). Constraints (`Constraint`) relate dims: ranges, divisibility, equalities.

Units: every dim is a count of elements, never bytes.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Mapping, Union

from opgen.errors import SpecError

Env = Mapping[str, Union[int, tuple]]


class DimExpr:
    """Base of dim expressions; supports + - * // % with ints and other DimExprs."""

    def __add__(self, o):
        return _bin("+", self, o)

    def __radd__(self, o):
        return _bin("+", o, self)

    def __sub__(self, o):
        return _bin("-", self, o)

    def __rsub__(self, o):
        return _bin("-", o, self)

    def __mul__(self, o):
        return _bin("*", self, o)

    def __rmul__(self, o):
        return _bin("*", o, self)

    def __floordiv__(self, o):
        return _bin("//", self, o)

    def __mod__(self, o):
        return _bin("%", self, o)

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
        raise NotImplementedError

    def evaluate(self, env: Env) -> int:
        raise NotImplementedError


@dataclass(frozen=True, eq=True)
class Sym(DimExpr):
    """A named dim (B, S, H, N, D, T1, ...)."""

    name: str

    def __str__(self):
        return self.name

    def symbols(self):
        return {self.name}

    def evaluate(self, env):
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
        return set()

    def evaluate(self, env):
        return self.value


@dataclass(frozen=True, eq=True)
class Prod(DimExpr):
    """Product of the dims of a variadic group (1 when it has none)."""

    name: str

    def __str__(self):
        return f"prod({self.name})"

    def symbols(self):
        return {self.name}

    def evaluate(self, env):
        v = env.get(self.name)
        if not isinstance(v, tuple):
            raise SpecError(f"variadic dims {self.name} are not bound")
        p = 1
        for d in v:
            p *= d
        return p


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
        return self.lhs.symbols() | self.rhs.symbols()

    def evaluate(self, env):
        a, b = self.lhs.evaluate(env), self.rhs.evaluate(env)
        if self.op in ("//", "%") and b == 0:
            raise SpecError(f"division by zero in dim expression {self}")
        return _OPS[self.op](a, b)


@dataclass(frozen=True, eq=True)
class Variadic:
    """`*name` inside a shape: zero or more leading dims bound together (rank range [min_rank, max_rank])."""

    name: str

    def __str__(self):
        return f"*{self.name}"

    def symbols(self):
        return {self.name}


def as_dim(x) -> DimExpr:
    """Coerce an int or DimExpr to a DimExpr. Raises SpecError otherwise."""
    if isinstance(x, DimExpr):
        return x
    if isinstance(x, bool):
        raise SpecError(f"not a dim: {x!r}")
    if isinstance(x, int):
        return Lit(x)
    raise SpecError(f"not a dim: {x!r}")


def _bin(op, a, b) -> DimExpr:
    a, b = as_dim(a), as_dim(b)
    if isinstance(a, Lit) and isinstance(b, Lit) and not (op in ("//", "%") and b.value == 0):
        return Lit(_OPS[op](a.value, b.value))
    # light canonicalisation so that equal shapes compare equal
    if op == "+" and isinstance(b, Lit) and b.value == 0:
        return a
    if op == "+" and isinstance(a, Lit) and a.value == 0:
        return b
    if op == "*" and isinstance(b, Lit) and b.value == 1:
        return a
    if op == "*" and isinstance(a, Lit) and a.value == 1:
        return b
    return Bin(op, a, b)


ShapeEntry = Union[DimExpr, Variadic]


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
        return _CMP[self.op](self.lhs.evaluate(env), self.rhs.evaluate(env))

    def symbols(self):
        return self.lhs.symbols() | self.rhs.symbols()

    def explain(self, env: Env) -> str:
        """`R <= Sq + Seq` with the values filled in: `R <= Sq + Seq (9 <= 8)`."""
        try:
            return f"{self} ({self.lhs.evaluate(env)} {self.op} {self.rhs.evaluate(env)})"
        except SpecError:
            return str(self)
