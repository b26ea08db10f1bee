"""Tiling programs: the host tiling logic written once, evaluated in Python and printed as C++.

A `TilingProgram` is a straight-line list of integer assignments over inputs (shape dims, dtype
sizes in bytes, platform numbers) with +, -, *, floor division, modulo, min, max, ceil_div,
align_up, comparisons and select. `evaluate(inputs)` runs it in Python; `to_cpp()` prints the same
statements as C++ (int64_t arithmetic) for the emitted TilingFunc, so the Python twin and the
emitted code cannot drift apart (docs/design.md "Tiling"). Units are stated per variable (elements,
rows, bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from opgen.errors import OpgenError
from opgen.names import cpp_name


class E:
    """An integer expression node; Python operators build bigger expressions."""

    def __add__(self, o):
        return Op("+", (self, lit(o)))

    def __radd__(self, o):
        return Op("+", (lit(o), self))

    def __sub__(self, o):
        return Op("-", (self, lit(o)))

    def __rsub__(self, o):
        return Op("-", (lit(o), self))

    def __mul__(self, o):
        return Op("*", (self, lit(o)))

    def __rmul__(self, o):
        return Op("*", (lit(o), self))

    def __floordiv__(self, o):
        return Op("//", (self, lit(o)))

    def __mod__(self, o):
        return Op("%", (self, lit(o)))

    def __lt__(self, o):
        return Op("<", (self, lit(o)))

    def __le__(self, o):
        return Op("<=", (self, lit(o)))

    def __gt__(self, o):
        return Op(">", (self, lit(o)))

    def __ge__(self, o):
        return Op(">=", (self, lit(o)))

    def eq(self, o):
        return Op("==", (self, lit(o)))

    def __and__(self, o):
        return Op("&&", (self, lit(o)))

    def __or__(self, o):
        return Op("||", (self, lit(o)))


@dataclass(frozen=True)
class Lit(E):
    """An integer literal."""

    value: int

    def ev(self, env):
        return self.value

    def py(self):
        return repr(int(self.value))

    def cpp(self):
        return f"{self.value}LL" if abs(self.value) > 2**31 - 1 else str(self.value)


@dataclass(frozen=True)
class Var(E):
    """A program input or an earlier assignment."""

    name: str

    def ev(self, env):
        return env[self.name]

    def py(self):
        return f"e[{self.name!r}]"

    def cpp(self):
        return cpp_name(self.name)


_BIN = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "<": lambda a, b: int(a < b), "<=": lambda a, b: int(a <= b), ">": lambda a, b: int(a > b),
    ">=": lambda a, b: int(a >= b), "==": lambda a, b: int(a == b),
    "&&": lambda a, b: int(bool(a) and bool(b)), "||": lambda a, b: int(bool(a) or bool(b)),
}


def _div(a, b):
    if b == 0:
        raise OpgenError("tiling: division by zero")
    if a < 0 or b < 0:
        raise OpgenError("tiling: division of negative values (C++ and Python round differently)")
    return a // b


def _mod(a, b):
    """a - (a // b) * b (Op.ev's "%"): a % b for a >= 0, b > 0; _div's errors otherwise."""
    if b <= 0 or a < 0:
        return a - _div(a, b) * b   # raises _div's error
    return a % b


def _ceil(a, b):
    """_div(a + b - 1, b) (Op.ev's ceil_div), one call fewer on the usual operands (the UB proof runs a program
    tens of thousands of times a spec)."""
    n = a + b - 1
    if b <= 0 or n < 0:
        return _div(n, b)   # raises _div's error
    return n // b


def _align(a, b):
    """_div(a + b - 1, b) * b (Op.ev's align_up), as _ceil."""
    n = a + b - 1
    if b <= 0 or n < 0:
        return _div(n, b) * b   # raises _div's error
    return n // b * b


# Helpers of the compiled form (Op.py): the same arithmetic as Op.ev, every operand evaluated once and eagerly
# except select's branches (lazy, as in ev and C++'s ?:).
_PY_HELPERS = {
    "_div": _div,
    "_mod": _mod,
    "_ceil": _ceil,
    "_align": _align,
    "_and": lambda a, b: int(bool(a) and bool(b)),
    "_or": lambda a, b: int(bool(a) or bool(b)),
}
_PY_CALL = {"//": "_div", "%": "_mod", "ceil_div": "_ceil", "align_up": "_align", "&&": "_and", "||": "_or",
            "min": "min", "max": "max"}


@dataclass(frozen=True)
class Op(E):
    """An operation (+ - * // % comparisons && || min max ceil_div align_up select) on expressions."""

    op: str
    args: tuple

    def ev(self, env):
        if self.op == "select":  # lazy like C++'s ?:
            return self.args[1].ev(env) if self.args[0].ev(env) else self.args[2].ev(env)
        v = [a.ev(env) for a in self.args]
        if self.op in _BIN:
            return _BIN[self.op](*v)
        if self.op == "//":
            return _div(*v)
        if self.op == "%":
            return v[0] - _div(*v) * v[1]
        if self.op == "min":
            return min(v)
        if self.op == "max":
            return max(v)
        if self.op == "ceil_div":
            return _div(v[0] + v[1] - 1, v[1])
        if self.op == "align_up":
            return _div(v[0] + v[1] - 1, v[1]) * v[1]
        raise OpgenError(f"tiling: unknown op {self.op}")

    def py(self):
        """This expression as Python source over `e` (the variables), for TilingProgram.evaluate."""
        a = [x.py() for x in self.args]
        if self.op == "select":
            return f"({a[1]} if {a[0]} else {a[2]})"
        if self.op in ("+", "-", "*"):
            return f"({a[0]} {self.op} {a[1]})"
        if self.op in ("<", "<=", ">", ">=", "=="):
            return f"int({a[0]} {self.op} {a[1]})"
        if self.op in _PY_CALL:
            return f"{_PY_CALL[self.op]}({', '.join(a)})"
        raise OpgenError(f"tiling: unknown op {self.op}")

    def cpp(self):
        """This expression as C++ (int64_t arithmetic), with the parentheses C++'s precedence needs to parse back
        the same tree and no more (_cpp_operand): `(attrKey * 4 + formKey) * 100 + dtypeKey * 10 + 1`, not one pair
        per operation (clang-format's time grows with the nesting: a fully parenthesised TilingFunc of a rows
        kernel took it 1.8 s). A comparison or a `&&` inside another comparison or `||` keeps its parentheses (g++'s
        -Wparentheses), a `?:` inside any operation too."""
        if self.op in _BIN or self.op in ("//", "%"):
            op = "/" if self.op == "//" else self.op
            p = _CPP_PREC[self.op]
            return f"{_cpp_operand(self.args[0], p, False, op)} {op} {_cpp_operand(self.args[1], p, True, op)}"
        a = [x.cpp() for x in self.args]
        if self.op in ("min", "max"):
            return f"std::{self.op}<int64_t>({a[0]}, {a[1]})"
        if self.op == "ceil_div":
            return f"CeilDiv({a[0]}, {a[1]})"
        if self.op == "align_up":
            return f"AlignUp({a[0]}, {a[1]})"
        if self.op == "select":
            c = self.args[0]
            cond = _cpp_operand(c, 1, True, "?")
            if isinstance(c, Op) and c.op in ("+", "-", "*", "//", "%"):   # an integer as the condition: clang's
                cond = f"({cond})"                                          # -Wparentheses asks for them
            return " ".join((cond, "?", _cpp_operand(self.args[1], 1, True, "?"), ":",
                             _cpp_operand(self.args[2], 1, True, "?")))
        raise OpgenError(f"tiling: unknown op {self.op}")


_CPP_PREC = {"*": 6, "//": 6, "%": 6, "+": 5, "-": 5, "<": 4, "<=": 4, ">": 4, ">=": 4, "==": 3, "&&": 2, "||": 1}
"""C++ precedence of the program's binary operations (higher binds tighter; all left-associative); ?: is 0."""
_CMP = ("<", "<=", ">", ">=", "==")


def _cpp_operand(x: E, prec: int, right: bool, parent: str) -> str:
    """The C++ of operand `x` of an operation of precedence `prec` (C++ spelling `parent`): parenthesised where C++
    would otherwise parse another tree (a looser operation; an equally tight one on the right, since `a - (b - c)`
    and `a / (b * c)` are not their unparenthesised forms), where g++'s -Wparentheses asks for them (a comparison
    inside a comparison, `&&` inside `||`), around a `?:` in any operand and around a negative literal."""
    text = x.cpp()
    if isinstance(x, Lit):
        return f"({text})" if x.value < 0 else text
    if not isinstance(x, Op) or x.op not in _CPP_PREC:
        return f"({text})" if isinstance(x, Op) and x.op == "select" else text
    p = _CPP_PREC[x.op]
    loose = p < prec or (right and p == prec)
    warned = (x.op in _CMP and parent in ("<", "<=", ">", ">=", "==")) or (x.op == "&&" and parent == "||")
    return f"({text})" if loose or warned or parent == "?" and p <= 2 else text


def fold(e: E) -> E:
    """`e` with its constant parts computed: an operation on literals becomes a literal (kept when it would divide
    by zero, so the error stays at run time), x + 0, x - 0, x * 1 and x // 1 become x, x * 0 becomes 0, a select on
    a literal or with equal branches becomes its branch, x && 0 becomes 0, x || 1 becomes 1, and c && 1, c || 0
    become c where c is a comparison, && or || (0 or 1 already). The value is unchanged for every input on which
    `e` itself is defined (integer arithmetic, no side effects); where `e` would divide by zero the folded form may
    not: x * 0, x && 0, x || 1 and a select with equal branches drop an operand that could hold such a division
    (`(a // b) * 0` becomes 0 for b = 0). The C++ TilingFunc and its Python twin both print the folded form, so they
    agree with each other on every input (tests/test_tiling_cse.py evaluates programs with zero divisors)."""
    if not isinstance(e, Op):
        return e
    args = tuple(fold(a) for a in e.args)
    if e.op == "select" and isinstance(args[0], Lit):
        return args[1] if args[0].value else args[2]
    if all(isinstance(a, Lit) for a in args):
        try:
            return Lit(Op(e.op, args).ev({}))
        except OpgenError:
            return Op(e.op, args)
    a = args
    if e.op == "+" and isinstance(a[1], Lit) and a[1].value == 0:
        return a[0]
    if e.op == "+" and isinstance(a[0], Lit) and a[0].value == 0:
        return a[1]
    if e.op == "-" and isinstance(a[1], Lit) and a[1].value == 0:
        return a[0]
    if e.op == "*" and any(isinstance(x, Lit) and x.value == 0 for x in a):
        return Lit(0)
    if e.op in ("*", "//") and isinstance(a[1], Lit) and a[1].value == 1:
        return a[0]
    if e.op == "*" and isinstance(a[0], Lit) and a[0].value == 1:
        return a[1]
    if e.op == "select" and args[1] == args[2]:
        return args[1]
    if e.op == "&&" and any(isinstance(x, Lit) and x.value == 0 for x in a):
        return Lit(0)
    if e.op == "||" and any(isinstance(x, Lit) and x.value != 0 for x in a):
        return Lit(1)
    if e.op in ("&&", "||") and isinstance(a[1], Lit) and _is_truth(a[0]):   # x && 1, x || 0 of a 0/1 x
        return a[0]
    if e.op in ("&&", "||") and isinstance(a[0], Lit) and _is_truth(a[1]):
        return a[1]
    return Op(e.op, args)


def _is_truth(e: E) -> bool:
    """Whether `e` is 0 or 1 for every input (a comparison, && or ||)."""
    return isinstance(e, Op) and e.op in _CMP + ("&&", "||")


def lit(x) -> E:
    """Coerce an int (or bool) to an expression."""
    if isinstance(x, E):
        return x
    if isinstance(x, bool):
        return Lit(int(x))
    if isinstance(x, int):
        return Lit(x)
    raise OpgenError(f"tiling: not an integer expression: {x!r}")


def emin(a, b) -> E:
    """min(a, b)."""
    return Op("min", (lit(a), lit(b)))


def emax(a, b) -> E:
    """max(a, b)."""
    return Op("max", (lit(a), lit(b)))


def ceil_div(a, b) -> E:
    """ceil(a / b) for a >= 0, b > 0."""
    return Op("ceil_div", (lit(a), lit(b)))


def align_up(a, b) -> E:
    """Smallest multiple of b that is >= a (a >= 0, b > 0)."""
    return Op("align_up", (lit(a), lit(b)))


def select(c, a, b) -> E:
    """a if c else b."""
    return Op("select", (lit(c), lit(a), lit(b)))


@dataclass
class TilingProgram:
    """Inputs (names with a unit each), then assignments in order; `fields` are the tiling data.

    Raises OpgenError for an unknown name or a division by zero during evaluation."""

    name: str
    inputs: dict = field(default_factory=dict)      # name -> unit/doc
    stmts: list = field(default_factory=list)       # (name, expr, doc)
    fields: list = field(default_factory=list)      # names written to the tiling data, in order

    def input(self, name: str, doc: str) -> Var:
        """Declare a program input (read from the TilingContext in C++); `doc` states its unit."""
        self.inputs[name] = doc
        return Var(name)

    def let(self, name: str, expr, doc: str = "", field_: bool = False) -> Var:
        """Assign `name = expr`; with field_=True it is also a tiling-data field."""
        if name in self.inputs or any(n == name for n, _, _ in self.stmts):
            raise OpgenError(f"tiling: {name} assigned twice")
        self.stmts.append((name, fold(lit(expr)), doc))
        if field_:
            self.fields.append(name)
        return Var(name)

    def evaluate(self, inputs: dict) -> dict:
        """All variables (inputs and assignments) as Python ints. Runs the statements compiled once to one Python
        function (same arithmetic and errors as evaluating the expression trees, `evaluate_tree`)."""
        missing = [k for k in self.inputs if k not in inputs]
        if missing:
            raise OpgenError(f"tiling {self.name}: missing inputs {missing}")
        return self._compiled()({k: int(inputs[k]) for k in self.inputs})

    def evaluate_tree(self, inputs: dict) -> dict:
        """`evaluate` by walking the expression trees (the reference the compiled form is tested against)."""
        missing = [k for k in self.inputs if k not in inputs]
        if missing:
            raise OpgenError(f"tiling {self.name}: missing inputs {missing}")
        env = {k: int(inputs[k]) for k in self.inputs}
        for name, expr, _ in self.stmts:
            env[name] = int(expr.ev(env))
        return env

    def _compiled(self):
        n = len(self.stmts)
        cached = self.__dict__.get("_py_fn")
        if cached is not None and cached[0] == n:
            return cached[1]
        lines = ["def run(e):"] + [f"    e[{name!r}] = int({expr.py()})" for name, expr, _ in self.stmts]
        ns = dict(_PY_HELPERS)
        exec(compile("\n".join(lines + ["    return e"]), f"<tiling program {self.name}>", "exec"), ns)
        self._py_fn = (n, ns["run"])
        return ns["run"]

    def to_cpp(self, indent: str = "    ", reserved=()) -> str:
        """The assignments as C++ statements (`const int64_t name = ...;`; names as opgen.names.cpp_name spells
        them, which is what the template's locals and field assignments use too), after `name_repeats` (a
        sub-expression met more than once is computed once, in a named local; `reserved`: the other identifiers
        of the enclosing C++ function, which no such local may take). A statement's doc is a comment line above it:
        never beside it, so where it goes does not depend on the length of the names (renaming a dim or an input
        changes no line's order) and clang-format has no statement to break around a trailing comment."""
        lines = []
        taken = {*self.inputs, *map(cpp_name, self.inputs), *reserved}
        for name, expr, doc in name_repeats(self.stmts, taken):
            if doc:
                lines.append(f"{indent}// {doc}")
            lines.append(f"{indent}const int64_t {cpp_name(name)} = {expr.cpp()};")
        return "\n".join(lines)


_LAZY_ARGS = {"select": (1, 2), "&&": (1,), "||": (1,)}
"""The operands an operation evaluates only for some inputs in C++ (?:'s branches, the right side of && and ||)."""
_MIN_NAMED = 20
"""Shortest C++ text (characters, each variable counted as _VAR_WIDTH: `_width`) of a repeated sub-expression
worth a local of its own."""
_VAR_WIDTH = 8
"""The width `_width` counts a variable as, whatever its name: renaming a dim or an input changes no choice."""


def _width(e: E) -> int:
    """Characters of `e`'s C++ text with every variable counted as _VAR_WIDTH wide (its name's length aside)."""
    text = e.cpp()
    stack, names = [e], []
    while stack:
        x = stack.pop()
        if isinstance(x, Op):
            stack.extend(x.args)
        elif isinstance(x, Var):
            names.append(x)
    return len(text) + sum(_VAR_WIDTH - len(v.cpp()) for v in names)
_KIND = {"+": "Sum", "-": "Diff", "*": "Product", "//": "Quotient", "%": "Remainder", "ceil_div": "Quotient",
         "align_up": "Aligned", "min": "Min", "max": "Max", "select": "Choice", "&&": "Cond", "||": "Cond",
         "<": "Cond", "<=": "Cond", ">": "Cond", ">=": "Cond", "==": "Cond"}
_WORD = {"+": "Plus", "-": "Minus", "*": "Times", "//": "Per", "%": "Mod", "<": "Lt", "<=": "Le", ">": "Gt",
         ">=": "Ge", "==": "Eq", "&&": "And", "||": "Or"}


def _describe(e: E) -> str | None:
    """A camelCase name spelling `e` (`CeilDiv(rows, rowCores)` -> rowsPerRowCoresCeil, `8 * colsPerCore` ->
    colsPerCoreTimes8), or None when `e` holds a select or a negative literal, would start with a digit (a literal
    divided or compared) or has more than _DESCRIBED_LEAVES variables and literals (a limit on the expression, not
    on its names' lengths: renaming a dim changes no choice)."""
    if _leaves(e) > _DESCRIBED_LEAVES:
        return None
    return _spell(e)


_DESCRIBED_LEAVES = 3
"""Most variables and literals an expression `_describe` spells may hold."""


def _leaves(e: E) -> int:
    """Variables and literals of `e`, counted with repeats."""
    return sum(_leaves(a) for a in e.args) if isinstance(e, Op) else 1


def _spell(e: E) -> str | None:
    """_describe without its size limit."""
    if isinstance(e, Var):
        return cpp_name(e.name)
    if isinstance(e, Lit):
        return str(e.value) if e.value >= 0 else None
    if e.op == "select":
        return None
    args = e.args
    if e.op in ("+", "*", "min", "max") and isinstance(args[0], Lit) and not isinstance(args[1], Lit):
        args = (args[1], args[0])   # `2 * colAlign` reads colAlignTimes2
    parts = [_spell(a) for a in args]
    if any(p is None for p in parts) or (parts[0][:1].isdigit() and e.op not in ("min", "max")):
        return None
    a, b = parts[0], parts[1][:1].upper() + parts[1][1:]
    if e.op in _WORD:
        out = f"{a}{_WORD[e.op]}{b}"
    elif e.op == "ceil_div":
        out = f"{a}Per{b}Ceil"
    elif e.op == "align_up":
        out = f"{a}AlignedTo{b}"
    else:   # min, max
        out = f"{e.op}{a[:1].upper()}{a[1:]}And{b}"
    return out


class _Interned:
    """Structural identities of a program's sub-expressions: equal trees get one number (hash-consing by operator
    and operand numbers, so a deep tree is hashed once, not once per enclosing node)."""

    def __init__(self):
        self.ids: dict = {}
        self.expr: list = []
        self.size: list = []
        self.memo: dict = {}

    def of(self, e: E) -> int:
        """The number of `e`'s structure."""
        got = self.memo.get(id(e))
        if got is not None and got[0] is e:
            return got[1]
        if isinstance(e, Op):
            kids = tuple(self.of(a) for a in e.args)
            key, size = (e.op, kids), 1 + sum(self.size[k] for k in kids)
        else:
            key, size = (type(e).__name__, e.value if isinstance(e, Lit) else e.name), 1
        n = self.ids.get(key)
        if n is None:
            n = self.ids[key] = len(self.expr)
            self.expr.append(e)
            self.size.append(size)
        self.memo[id(e)] = (e, n)
        return n


def _uses(e: E, t: _Interned, at: int, eager: bool, root: bool, seen: dict) -> None:
    """Record in `seen` (structure number -> [first statement evaluating it on every input, or None; list of
    (statement, eager) uses]) each operation of statement `at`'s expression `e` below its root."""
    if not isinstance(e, Op):
        return
    if not root:
        rec = seen.setdefault(t.of(e), [None, []])
        rec[1].append(at)
        if eager and rec[0] is None:
            rec[0] = at
    lazy = _LAZY_ARGS.get(e.op, ())
    for i, a in enumerate(e.args):
        _uses(a, t, at, eager and i not in lazy, False, seen)


def _replaced(e: E, t: _Interned, target: int, var: Var) -> E:
    """`e` with every sub-expression of structure `target` read from `var`."""
    if not isinstance(e, Op):
        return e
    if t.of(e) == target:
        return var
    args = tuple(_replaced(a, t, target, var) for a in e.args)
    return e if all(x is y for x, y in zip(args, e.args)) else Op(e.op, args)


def name_repeats(stmts: list, reserved=()) -> list:
    """Common-subexpression naming over a tiling program's statements [(name, expr, doc)]: the same statements,
    each operation that occurs in two or more places (and prints to at least _MIN_NAMED characters, `_width`) computed once in
    a statement of its own placed before its first use, and read from there. A sub-expression equal to an earlier
    statement's whole expression is read from that statement. Largest sub-expressions first, so a repeated
    compound is one local and its parts are named only where they also occur elsewhere.

    Values are unchanged for every input: the statements are pure integer expressions over constants, and a local
    is defined at the first statement that evaluates the sub-expression on every input (not only in a ?: branch or
    the right side of && / ||: a local never evaluates what the program would have skipped, e.g. a division by
    zero a select guards); an earlier use that evaluates it only on some inputs keeps it inline. The local's name
    spells the expression when that is short (`_describe`: rowsPerRowCoresCeil), else names the program statement it
    is a direct part of (a summand or factor of its root: `_part_of`), or of its first use (a local's: the statement
    that local serves), and its kind (`groupFixedBytesSum`), with a doc listing
    the program statements that read it, directly or through other such locals. `reserved`:
    names no new local may take (besides the statements' own). Returns a new list; `stmts` is not changed
    (docs/design.md "Tiling", the printing of repeated sub-expressions)."""
    out = list(stmts)
    owner = {n: n for n, _, _ in out}   # each statement -> the program statement it serves (a local: its first user's)
    taken = set(reserved) | {n for n, _, _ in out} | {cpp_name(n) for n, _, _ in out}
    # whole statements met again later: read from the statement
    t = _Interned()
    first: dict = {}
    for i, (name, expr, doc) in enumerate(out):
        for k in sorted(_op_ids(expr, t) & first.keys(), key=lambda k: -t.size[k]):   # largest first
            expr = _replaced(expr, t, k, first[k])
        out[i] = (name, expr, doc)
        if isinstance(expr, Op):
            first.setdefault(t.of(expr), Var(name))
    while True:
        seen: dict = {}
        for i, (_name, expr, _doc) in enumerate(out):
            _uses(expr, t, i, True, True, seen)
        best = None
        for k, (at, where) in seen.items():
            if at is None or sum(1 for w in where if w >= at) < 2:
                continue
            if best is None or (t.size[k], -at) > (t.size[best], -seen[best][0]):
                if _width(t.expr[k]) >= _MIN_NAMED:
                    best = k
        if best is None:
            return out
        at, where = seen[best]
        e = t.expr[best]
        users = list(dict.fromkeys(owner[out[w][0]] for w in where if w >= at))
        name = _describe(e)
        if name is None or name in taken:
            name = f"{cpp_name(owner[out[_part_of(out, t, best, at, where, owner)][0]])}{_KIND[e.op]}"
        base, n = name, 2
        while name in taken:
            name, n = f"{base}{n}", n + 1
        taken.add(name)
        owner[name] = owner[out[at][0]]
        var = Var(name)
        rest = [(nm, _replaced(x, t, best, var), d) for nm, x, d in out[at:]]
        more = f" and {len(users) - 3} more" if len(users) > 3 else ""
        out = out[:at] + [(name, e, f"in {', '.join(users[:3])}{more}")] + rest


def _part_of(out: list, t: _Interned, key: int, at: int, where: list, owner: dict) -> int:
    """The statement a repeated sub-expression `key` is named after: the first program statement (not a local)
    whose expression has it as a direct operand of its root's chain -- a summand of a sum, a factor of a product --
    so a fixed part of a UB size is named after the size (`groupFixedBytesSum`), not after the first, deeper user
    (a cycle estimate that compares the size, `colBatchCost0Sum`); else the statement at `at` (the first user)."""
    for w in dict.fromkeys(x for x in where if x >= at):
        name, expr, _doc = out[w]
        if owner.get(name) != name or not isinstance(expr, Op):
            continue
        stack = list(expr.args)
        while stack:
            x = stack.pop()
            if not isinstance(x, Op):
                continue
            if t.of(x) == key:
                return w
            if x.op == expr.op:
                stack.extend(x.args)
    return at


def _op_ids(e: E, t: _Interned) -> set:
    """The structure numbers of `e`'s operations below its root."""
    ids: set = set()
    stack = list(e.args) if isinstance(e, Op) else []
    while stack:
        x = stack.pop()
        if isinstance(x, Op):
            ids.add(t.of(x))
            stack.extend(x.args)
    return ids
