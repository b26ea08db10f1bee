"""Printers of symbolic dims (opgen.ir.dims) as C++ and Python expressions.

Used wherever emitted code computes a dim: output shapes in InferShape, expected shapes and relations
in the aclnn checks, reshape/broadcast targets in the NumPy golden. The caller says how a dim symbol
and the product of a variadic group are spelled in the target code; the printer keeps the expression's
structure with the minimal parentheses. Dims are non-negative, so `//` prints as C++ `/`.
"""

from __future__ import annotations

from typing import Callable

from opgen.errors import SpecError
from opgen.ir.dims import Bin, DimExpr, Fn, Lit, Prod, Sym, Variadic, as_dim

_PREC = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2}


def balanced_parens(text: str) -> bool:
    """Whether every ')' of C++ expression text `text` closes a '(' before it and every '(' is closed: the test
    for dropping one pair of outer parentheses `(` + text + `)` of a printed expression (the kernel's per-row
    scalar texts, the review's printed dims)."""
    depth = 0
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def _print(e: DimExpr, sym: Callable[[str], str], prod: Callable[[str], str], lang: str) -> str:
    e = as_dim(e)
    if isinstance(e, Lit):
        return str(e.value)
    if isinstance(e, Sym):
        return sym(e.name)
    if isinstance(e, Prod):
        return prod(e.name)
    if isinstance(e, Bin):
        def wrap(x, right):
            s = _print(x, sym, prod, lang)
            if isinstance(x, Bin) and (_PREC[x.op] < _PREC[e.op] or (right and _PREC[x.op] == _PREC[e.op])):
                return f"({s})"
            return s

        op = "/" if (e.op == "//" and lang == "cpp") else e.op
        return f"{wrap(e.lhs, False)} {op} {wrap(e.rhs, True)}"
    if isinstance(e, Fn):   # self-contained forms: no helper function need exist in the target code
        a, b = (_print(x, sym, prod, lang) for x in e.args)
        if e.fn in ("min", "max"):
            if lang == "py":
                return f"{e.fn}({a}, {b})"
            return f"(({a}) {'<' if e.fn == 'min' else '>'} ({b}) ? ({a}) : ({b}))"
        div = "/" if lang == "cpp" else "//"
        up = f"(({a}) + ({b}) - 1) {div} ({b})"
        return f"({up})" if e.fn == "ceil_div" else f"({up} * ({b}))"
    raise SpecError(f"cannot print dim expression {e!r}")


def dim_cpp(e, sym: Callable[[str], str], prod: Callable[[str], str]) -> str:
    """C++ int64 expression of dim expression `e`; sym(name) / prod(group) spell symbols and group products."""
    return _print(e, sym, prod, "cpp")


def dim_py(e, sym: Callable[[str], str], prod: Callable[[str], str]) -> str:
    """Python int expression of dim expression `e` (same conventions as dim_cpp)."""
    return _print(e, sym, prod, "py")


def is_plain(d) -> bool:
    """True for entries a shape binds directly: a symbol, a literal or a variadic group."""
    return isinstance(d, (Sym, Lit, Variadic))


def shape_symbols(shape) -> list[str]:
    """Names of the dims and groups a shape mentions, in first-use order."""
    out: list[str] = []
    for d in shape:
        names = [d.name] if isinstance(d, Variadic) else sorted(as_dim(d).symbols())
        for n in names:
            if n not in out:
                out.append(n)
    return out
