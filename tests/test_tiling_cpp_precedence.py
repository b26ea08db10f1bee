"""opgen.tiling.program's C++ printer (Op.cpp, _cpp_operand): the parentheses it leaves out are the ones C++'s
precedence does not need. Random expression trees of the tiling program's operations are printed, read back by a
parser of the C++ grammar's precedence and associativity (ISO C++ [expr]: multiplicative over additive over
relational over equality over && over || over ?:, the binary ones left-associative, ?: right-associative) and must
give the same tree; and (g++) the printed expressions compile with -Werror=parentheses and evaluate to what Op.ev
gives."""

from __future__ import annotations

import random
import re
import shutil
import subprocess

import pytest

from opgen.errors import OpgenError
from opgen.tiling.program import Lit, Op, Var

BINARY = ["+", "-", "*", "//", "%", "<", "<=", ">", ">=", "==", "&&", "||"]
VALUES = {"a": 7, "b": 3, "c": 12}


def _tree(rng: random.Random, depth: int, big: bool = True):
    """A random program expression over a, b, c and literals (negative ones; with `big`, one above int32 printed
    with LL, which the value test leaves out: products of it overflow int64 where Python's ints do not)."""
    if depth == 0 or rng.random() < 0.25:
        lits = [0, 1, 2, 5, -1, -3] + ([3000000000] if big else [])
        return Var(rng.choice("abc")) if rng.random() < 0.6 else Lit(rng.choice(lits))
    r = rng.random()
    if r < 0.75:
        return Op(rng.choice(BINARY), (_tree(rng, depth - 1, big), _tree(rng, depth - 1, big)))
    if r < 0.9:
        return Op("select", tuple(_tree(rng, depth - 1, big) for _ in range(3)))
    return Op(rng.choice(["min", "max"]), (_tree(rng, depth - 1, big), _tree(rng, depth - 1, big)))


def _shape(e) -> tuple:
    """The tree of `e` as nested tuples (op, operands...)."""
    if isinstance(e, Lit):
        return ("lit", e.value)
    if isinstance(e, Var):
        return ("var", e.name)
    return (e.op,) + tuple(_shape(x) for x in e.args)


_PREC = {"||": 1, "&&": 2, "==": 3, "<": 4, "<=": 4, ">": 4, ">=": 4, "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}
_TOKEN = re.compile(r"\s*(std::min<int64_t>|std::max<int64_t>|\d+LL|\d+|[A-Za-z_]\w*|<=|>=|==|&&|\|\||[-+*/%<>?:(),])")


class _CppReader:
    """A precedence-climbing reader of the printed subset of C++ (the independent grammar the test checks against)."""

    def __init__(self, text: str):
        self.toks, pos = [], 0
        while text[pos:].strip():
            m = _TOKEN.match(text, pos)
            assert m, f"unexpected text {text[pos:]!r} in {text!r}"
            self.toks.append(m.group(1))
            pos = m.end()
        self.i = 0

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, want=None):
        t = self.toks[self.i]
        assert want is None or t == want, (want, t, self.toks)
        self.i += 1
        return t

    def conditional(self):   # logical-or-expression [? expression : assignment-expression] (right-associative)
        c = self.binary(1)
        if self.peek() != "?":
            return c
        self.take("?")
        a = self.conditional()
        self.take(":")
        return ("select", c, a, self.conditional())

    def binary(self, lowest: int):   # left-associative levels from `lowest` up
        lhs = self.primary()
        while self.peek() in _PREC and _PREC[self.peek()] >= lowest:
            op = self.take()
            lhs = ("//" if op == "/" else op, lhs, self.binary(_PREC[op] + 1))
        return lhs

    def primary(self):
        t = self.take()
        if t == "(":
            e = self.conditional()
            self.take(")")
            return e
        if t == "-":   # a negative literal (the printer's only unary minus)
            n = self.take()
            assert re.fullmatch(r"\d+(LL)?", n), n
            return ("lit", -int(n.rstrip("L")))
        if t.startswith("std::"):
            self.take("(")
            a = self.conditional()
            self.take(",")
            b = self.conditional()
            self.take(")")
            return (t[5:8], a, b)
        if re.fullmatch(r"\d+(LL)?", t):
            return ("lit", int(t.rstrip("L")))
        return ("var", t)


def _read(text: str) -> tuple:
    r = _CppReader(text)
    e = r.conditional()
    assert r.i == len(r.toks), f"trailing tokens in {text!r}"
    return e


@pytest.mark.parametrize("seed", [0, 1])
def test_every_printed_tree_reads_back_as_the_same_tree(seed):
    rng = random.Random(seed)
    for _ in range(1500):
        e = _tree(rng, 4)
        text = e.cpp()
        assert _read(text) == _shape(e), text


@pytest.mark.parametrize("tree, text", [
    (Op("-", (Var("a"), Op("-", (Var("b"), Var("c"))))), "a - (b - c)"),
    (Op("-", (Op("-", (Var("a"), Var("b"))), Var("c"))), "a - b - c"),
    (Op("//", (Var("a"), Op("*", (Var("b"), Var("c"))))), "a / (b * c)"),
    (Op("*", (Op("+", (Var("a"), Lit(1))), Lit(-2))), "(a + 1) * (-2)"),
    (Op("||", (Op("&&", (Var("a"), Var("b"))), Var("c"))), "(a && b) || c"),
    (Op("==", (Op("<", (Var("a"), Var("b"))), Var("c"))), "(a < b) == c"),
    (Op("+", (Var("a"), Op("select", (Var("b"), Lit(1), Lit(2))))), "a + (b ? 1 : 2)"),
    (Op("select", (Op("<", (Var("a"), Var("b"))), Var("a"), Op("select", (Var("c"), Lit(1), Lit(2))))),
     "a < b ? a : (c ? 1 : 2)"),
])
def test_the_parentheses_kept_and_dropped(tree, text):
    """The cases by hand: an equally tight operation on the right keeps its parentheses (a - (b - c), a / (b * c)),
    on the left loses them; a negative literal, && in ||, a comparison in a comparison and ?: in an operand keep
    theirs (g++ -Wparentheses, readability)."""
    assert tree.cpp() == text


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.slow
def test_printed_trees_compile_without_parentheses_warnings_and_keep_their_values(tmp_path):
    rng = random.Random(7)
    cases = []
    while len(cases) < 300:
        e = _tree(rng, 4, big=False)
        try:
            v = e.ev(VALUES)
        except OpgenError:   # a division of negative values or by zero: C++ and Op.ev need not agree
            continue
        cases.append((e.cpp(), v))   # |values| <= 12 ** 16 at depth 4: no int64 overflow
    lines = ["#include <algorithm>", "#include <cstdint>", "#include <cstdio>",
             "int main(int argc, char**) {", "    const int64_t a = 6 + argc, b = 3, c = 12;", "    int bad = 0;"]
    for k, (text, v) in enumerate(cases):
        lines.append(f"    {{ const int64_t v = {text}; if (v != {v}LL) {{ std::printf(\"%d %lld\\n\", {k}, "
                     f"static_cast<long long>(v)); ++bad; }} }}")
    lines += ["    return bad;", "}"]
    src = tmp_path / "prec.cpp"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "prec"
    cc = subprocess.run(["g++", "-O0", "-std=c++17", "-Wparentheses", "-Werror=parentheses", str(src), "-o", str(exe)],
                        capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr[:4000]
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    bad = [cases[int(x.split()[0])][0] + " = " + x.split()[1] for x in run.stdout.splitlines()]
    assert run.returncode == 0 and not bad, bad[:5]


def test_an_integer_condition_of_a_select_keeps_its_parentheses():
    """`(a + b) ? a : b`: clang's -Wparentheses asks for parentheses around an arithmetic ?: condition (a comparison
    needs none: `a < b ? a : b`)."""
    a, b = Var("a"), Var("b")
    assert Op("select", (a + b, a, b)).cpp() == "(a + b) ? a : b"
    assert Op("select", (Op("<", (a, b)), a, b)).cpp() == "a < b ? a : b"
