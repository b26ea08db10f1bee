"""Parser of the canonical IR text (`opgen.ir.printer`). `parse_graph(print_graph(g)) == g`; the node locations of
`print_graph(g, locs=True)` are read back too."""

from __future__ import annotations

import json
import re

from opgen.errors import IRError
from opgen.ir.core import Graph, Node, Param, TensorType, Value
from opgen.ir.dims import Constraint, Lit, Prod, Rank, Sym, Variadic, dim_bin
from opgen.ir.dtypes import DType, DTypeVar
from opgen.ir.ops import OPS

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<val>%[A-Za-z0-9_.]+)
    | (?P<str>"(?:[^"\\]|\\.)*")
    | (?P<num>(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+))
    | (?P<id>[A-Za-z_][A-Za-z0-9_.]*)
    | (?P<op>//|<=|>=|==|!=|[-+*%()\[\]{}=,:<>])
    )""",
    re.X,
)


class _Tokens:
    def __init__(self, text: str):
        self.toks = []
        pos = 0
        line = 1
        text = text.rstrip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise IRError(f"line {line}: unexpected text {text[pos:pos + 20]!r}")
            line += text.count("\n", pos, m.end())
            kind = m.lastgroup
            self.toks.append((kind, m.group(kind), line))
            pos = m.end()
        self.i = 0

    def peek(self, k=0):
        """The k-th next token (kind, text, line) without consuming it."""
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else ("eof", "", self.toks[-1][2] if self.toks else 1)

    def next(self):
        """Consume and return the next token."""
        t = self.peek()
        self.i += 1
        return t

    def expect(self, text=None, kind=None):
        """Consume the next token, which must have this text/kind. Raises IRError."""
        k, v, line = self.next()
        if (text is not None and v != text) or (kind is not None and k != kind):
            raise IRError(f"line {line}: expected {text or kind!r}, got {v!r}")
        return v

    def accept(self, text):
        """Consume the next token if its text is `text`; returns whether it did."""
        if self.peek()[1] == text and self.peek()[0] != "str":
            self.i += 1
            return True
        return False


def _dtype(tok: str):
    try:
        return DType(tok)
    except ValueError:
        return DTypeVar(tok)


def _dim_atom(t: _Tokens):
    k, v, line = t.next()
    if k == "num":
        return Lit(int(v))
    if v == "(":
        e = _dim_expr(t)
        t.expect(")")
        return e
    if v == "-":
        return dim_bin("-", Lit(0), _dim_atom(t))
    if k == "id":
        if v in ("prod", "rank") and t.peek()[1] == "(":
            t.next()
            name = t.expect(kind="id")
            t.expect(")")
            return Prod(name) if v == "prod" else Rank(name)
        return Sym(v)
    raise IRError(f"line {line}: expected a dim, got {v!r}")


def _dim_term(t):
    e = _dim_atom(t)
    while t.peek()[1] in ("*", "//", "%") and t.peek()[0] == "op":
        op = t.next()[1]
        e = dim_bin(op, e, _dim_atom(t))
    return e


def _dim_expr(t):
    e = _dim_term(t)
    while t.peek()[1] in ("+", "-") and t.peek()[0] == "op":
        op = t.next()[1]
        e = dim_bin(op, e, _dim_term(t))
    return e


def _shape(t):
    t.expect("[")
    out = []
    while not t.accept("]"):
        if t.accept("*"):
            out.append(Variadic(t.expect(kind="id")))
        else:
            out.append(_dim_expr(t))
        if not t.accept(","):
            t.expect("]")
            break
    return tuple(out)


def _type(t):
    dt = _dtype(t.expect(kind="id"))
    return TensorType(dt, _shape(t))


def _number(t):
    neg = t.accept("-")
    k, v, line = t.next()
    if k == "id" and v in ("inf", "nan"):
        x = float(v)
    elif k == "num":
        x = float(v) if any(c in v for c in ".eE") else int(v)
    else:
        raise IRError(f"line {line}: expected a number, got {v!r}")
    return -x if neg else x


def _attr_value(t, kind):
    if kind == "int":
        v = _number(t)
        if not isinstance(v, int):
            raise IRError(f"line {t.peek()[2]}: expected an integer")
        return v
    if kind == "scalar" and t.peek()[1] in ("true", "false") and t.peek()[0] == "id":
        return t.next()[1] == "true"
    if kind in ("float", "scalar"):
        return _number(t)
    if kind == "bool":
        _, v, line = t.next()
        if v not in ("true", "false"):
            raise IRError(f"line {line}: expected true or false, got {v!r}")
        return v == "true"
    if kind == "str":
        return json.loads(t.expect(kind="str"))
    if kind == "dtype":
        return _dtype(t.expect(kind="id"))
    if kind == "dim":
        return _dim_expr(t)
    if kind == "shape":
        return _shape(t)
    if kind == "ints":
        t.expect("[")
        out = []
        while not t.accept("]"):
            out.append(_number(t))
            if not t.accept(","):
                t.expect("]")
                break
        return tuple(out)
    raise IRError(f"line {t.peek()[2]}: unknown attribute kind {kind}")


def _loc(t) -> str:
    """An optional node location suffix `loc("file.py":28)` / `loc("text")` (opgen.ir.printer.format_loc): the
    location string, "" when there is none."""
    if not (t.peek()[0] == "id" and t.peek()[1] == "loc" and t.peek(1)[1] == "("):
        return ""
    t.next()
    t.next()
    text = json.loads(t.expect(kind="str"))
    if t.accept(":"):
        k, v, line = t.next()
        if k != "num" or not v.isdigit():
            raise IRError(f"line {line}: expected a line number in loc(...), got {v!r}")
        text = f"{text}:{v}"
    t.expect(")")
    return text


def parse_graph(text: str) -> Graph:
    """Parse the canonical text of one graph.

    Raises:
        IRError: syntax error or unknown op/attribute, with the line number.
    """
    t = _Tokens(text)
    t.expect("graph")
    name = t.expect(kind="id")
    t.expect("(")
    params = []
    while not t.accept(")"):
        vname = t.expect(kind="val")[1:]
        t.expect(":")
        ty = _type(t)
        kind = "input"
        if t.peek()[1] == "attr":
            t.next()
            kind = "attr"
        params.append(Param(Value(vname, ty), kind))
        if not t.accept(","):
            t.expect(")")
            break
    constraints = []
    if t.peek()[1] == "where" and t.peek()[0] == "id":
        t.next()
        t.expect("[")
        while not t.accept("]"):
            lhs = _dim_expr(t)
            k, op, line = t.next()
            if op not in ("==", "<=", "<", ">=", ">", "!="):
                raise IRError(f"line {line}: expected a comparison in a constraint, got {op!r}")
            constraints.append(Constraint(op, lhs, _dim_expr(t)))
            if not t.accept(","):
                t.expect("]")
                break
    t.expect("{")
    nodes = []
    outputs = []
    while True:
        k, v, line = t.peek()
        if v == "return":
            t.next()
            t.expect("{")
            while not t.accept("}"):
                oname = t.expect(kind="id")
                t.expect("=")
                outputs.append((oname, t.expect(kind="val")[1:]))
                if not t.accept(","):
                    t.expect("}")
                    break
            t.expect("}")
            break
        rname = t.expect(kind="val")[1:]
        t.expect("=")
        op = t.expect(kind="id")
        od = OPS.get(op)
        if od is None:
            raise IRError(f"line {line}: unknown op {op!r}")
        t.expect("(")
        args = []
        while not t.accept(")"):
            args.append(t.expect(kind="val")[1:])
            if not t.accept(","):
                t.expect(")")
                break
        attrs = []
        if t.accept("{"):
            while not t.accept("}"):
                an = t.expect(kind="id")
                if an not in od.attrs:
                    raise IRError(f"line {line}: op {op} has no attribute {an!r}")
                t.expect("=")
                attrs.append((an, _attr_value(t, od.attrs[an])))
                if not t.accept(","):
                    t.expect("}")
                    break
        t.expect(":")
        ty = _type(t)
        nodes.append(Node(op, tuple(args), Value(rname, ty), tuple(attrs), _loc(t)))
    if t.peek()[0] != "eof":
        raise IRError(f"line {t.peek()[2]}: unexpected {t.peek()[1]!r} after the graph")
    return Graph(name, tuple(params), tuple(nodes), tuple(outputs), tuple(constraints))
