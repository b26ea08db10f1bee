"""The float scalar expressions of a row program (opgen.kernel.rowprog: `sexpr` instructions and the scalar operand
of `vscalar` / `vdup`) as Kernel-IR `FExpr` trees (opgen.kernel.kir).

The row programs write their per-row scalar arithmetic as C++ text in a small closed grammar (rowprog.SCALAR_BINARY,
SCALAR_MINMAX, SCALAR_UNARY, `_float_literal`, opgen.kernel.isa.float_scalar); `parse` reads exactly that grammar
back into a tree the Kernel-IR verifier, interpreter and dependency pass understand, keeping the brackets as
written (FBin.paren, FNeg.paren) so the C++ printer prints the text the row program meant:

    expr    := term (("+" | "-") term)*
    term    := unary (("*" | "/") unary)*
    unary   := "-" unary | atom
    atom    := FLOAT "f" | "__builtin_inff()" | NAME | "static_cast<float>(" expr ")"
             | ("Std::sqrt" | "Std::abs") "(" expr ")"
             | "(" expr ")" | "(" expr ("<" | "<=" | ">" | ">=" | "==" | "!=") expr "?" expr ":" expr ")"
             | "static_cast<float>(" NAME ".GetValue(" NAME "))"

`static_cast<float>(n)` of an int64 name `n` (a member such as hidden_, `int_names`) is FInt(Sym(n)); of a float
expression it is that expression (the cast is a no-op on an fp32 value); of `g.GetValue(i)` (GM tensor member g,
int64 index i: a per-batch input element) it is FLoad(GmView(g, i)), the scalar unit's read of GM. C++ semantics of the forms: docs/reference/
ascendc.md §1.4 (scalar unit, Std::sqrt / Std::abs), §1.9 (a vector instruction's scalar operand is exactly T).
"""

from __future__ import annotations

import re

from opgen.errors import OpgenError
from opgen.ir.dims import Sym
from opgen.kernel.kir import F_CMP, FBin, FCall, FCond, FConst, FExpr, FInt, FLoad, FMinMax, FNeg, FRef, GmView, check_name

_TOKEN = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d*)?(?:e[+-]?\d+)?f)|(?P<cast>static_cast<float>)|"
                    r"(?P<fn>Std::(?:sqrt|abs))|(?P<gmget>[A-Za-z_][A-Za-z0-9_]*\.GetValue\()|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op><=|>=|==|!=|[-+*/()<>?:]))")


class FExprError(OpgenError):
    """A scalar text outside the row programs' grammar (module docstring); the message quotes it."""


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise FExprError(f"row kernel scalar {text!r}: cannot read {text[pos:]!r} as a float expression")
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str, int_names):
        self.text, self.toks, self.k, self.ints = text, _tokens(text), 0, frozenset(int_names)

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.k] if self.k < len(self.toks) else None

    def take(self, want: str | None = None) -> tuple[str, str]:
        t = self.peek()
        if t is None or (want is not None and t[1] != want):
            raise FExprError(f"row kernel scalar {self.text!r}: expected {want or 'a term'}")
        self.k += 1
        return t

    def expr(self) -> FExpr:
        e = self.term()
        while self.peek() and self.peek()[1] in "+-" and self.peek()[0] == "op":
            op = self.take()[1]
            e = FBin(op, e, self.term(), paren=False)
        return e

    def term(self) -> FExpr:
        e = self.unary()
        while self.peek() and self.peek()[1] in "*/" and self.peek()[0] == "op":
            op = self.take()[1]
            e = FBin(op, e, self.unary(), paren=False)
        return e

    def unary(self) -> FExpr:
        if self.peek() == ("op", "-"):
            self.take()
            if self.peek() == ("op", "("):
                return FNeg(self.bracketed(), paren=True)
            return FNeg(self.unary())
        return self.atom()

    def bracketed(self) -> FExpr:
        """( expr ) or a conditional ( a <cmp> b ? x : y ): ( a > b ? a : b ) is a max, ( a < b ? a : b ) a min
        (FMinMax), any other an FCond; the bracket is kept on a binary expression."""
        self.take("(")
        e = self.expr()
        t = self.peek()
        if t and t[0] == "op" and t[1] in F_CMP:
            self.take()
            b = self.expr()
            self.take("?")
            x = self.expr()
            self.take(":")
            y = self.expr()
            self.take(")")
            if t[1] in ("<", ">") and (x, y) == (e, b):
                return FMinMax("max" if t[1] == ">" else "min", e, b)
            return FCond(t[1], e, b, x, y)
        self.take(")")
        return FBin(e.op, e.a, e.b, paren=True) if isinstance(e, FBin) else e

    def atom(self) -> FExpr:
        t = self.peek()
        if t is None:
            raise FExprError(f"row kernel scalar {self.text!r}: ends early")
        kind, v = t
        if kind == "num":
            self.take()
            return FConst(float(v[:-1]))
        if kind == "name" and v == "__builtin_inff":   # the compiler's +infinity (rowprog.ACC_INIT)
            self.take()
            self.take("(")
            self.take(")")
            return FConst(float("inf"))
        if kind == "name":
            self.take()
            return FRef(check_name(v, "scalar"))
        if kind == "cast":
            self.take()
            self.take("(")
            t2 = self.peek()
            if t2 and t2[0] == "name" and t2[1] in self.ints and self.toks[self.k + 1:self.k + 2] == [("op", ")")]:
                self.take()
                self.take(")")
                return FInt(Sym(t2[1]))
            if t2 and t2[0] == "gmget":   # a GM element read by the scalar unit
                self.take()
                idx = self.take()
                if idx[0] != "name":
                    raise FExprError(f"row kernel scalar {self.text!r}: a GM read's index must be a name")
                self.take(")")
                self.take(")")
                return FLoad(GmView(check_name(t2[1][:-len(".GetValue(")], "GM tensor"), Sym(check_name(idx[1], "index"))))
            e = self.expr()
            self.take(")")
            return e
        if kind == "fn":
            self.take()
            self.take("(")
            e = self.expr()
            self.take(")")
            return FCall(v.split("::")[1], e)
        if t == ("op", "("):
            return self.bracketed()
        raise FExprError(f"row kernel scalar {self.text!r}: unexpected {v!r}")


def parse(text: str, int_names=()) -> FExpr:
    """The FExpr of row-program scalar C++ `text` (module docstring grammar); names in `int_names` are int64
    members read through static_cast<float>. Raises FExprError (one line quoting the text) outside the grammar."""
    p = _Parser(text, int_names)
    e = p.expr()
    if p.peek() is not None:
        raise FExprError(f"row kernel scalar {text!r}: unexpected {p.peek()[1]!r}")
    return e
