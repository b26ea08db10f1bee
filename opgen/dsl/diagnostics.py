"""Diagnostics of spec errors: which spec line (and which token on it) an error is about.

Every error a spec author can cause — while a spec file is loaded, while it declares the op, while its
body is traced, or later when a pass such as buffer planning finds that the declared ranges cannot work —
is a `SpecError` built by :func:`spec_error`. It renders as

    specs/foo.py:12: error: dim H2 is not declared; declare it first: H2 = spec.dim("H2")
        spec.input("dy", T, [Bd, S, H2])
                                    ^^

Locations are `Loc` values: a `file:line` string that may also carry the column span of the expression
being executed (Python >= 3.11 code positions), so the call on that line is known exactly. Declarations
record their `Loc` (`DimDecl.loc`, `InputDecl.loc`, ...), so a later pass reports against the
declaration, e.g. for a UB overflow:

    raise spec_error(spec.dims_["H"].loc, "UB overflow: ... needs 210 KiB at H=16384 > 192 KiB",
                     "lower the bound: max=8192", arg="max")

How the caret is placed: the statement (or exact call) at the location is found with `ast`; `arg=`
narrows the search to one argument of that call (a position, a keyword name, or both as a tuple;
`item=` to one element of a list/tuple argument); `token=` is then searched in that region with
`tokenize` (a string literal equal to it, then a name/number/operator, then a word inside a string,
then any substring). Without a token the argument is underlined, else the callee (`spec.input`), else
the start of the statement. When the token lies on another line of a multi-line statement, the
diagnostic names that line.
"""

from __future__ import annotations

import ast
import io
import itertools
import os
import difflib
import re
import sys
import tokenize

from opgen.errors import SpecError

_OPGEN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Loc(str):
    """`file:line` (a str, so it prints and compares as before) with optional code position.

    Attributes: file, line (1-based), col / end_line / end_col (UTF-8 byte offsets as in `ast` and code
    positions, or None when unknown).
    """

    def __new__(cls, file: str, line: int, col=None, end_line=None, end_col=None):
        self = super().__new__(cls, f"{file}:{line}")
        self.file = file
        self.line = int(line)
        self.col = col
        self.end_line = end_line
        self.end_col = end_col
        return self

    def __reduce__(self):  # copy / pickle keep the position
        return (Loc, (self.file, self.line, self.col, self.end_line, self.end_col))


def parse_loc(loc) -> Loc | None:
    """A `Loc` from a Loc, a "file:line" string or a (file, line) pair; None when it is none of these."""
    if isinstance(loc, Loc) or loc is None:
        return loc
    if isinstance(loc, tuple) and len(loc) == 2:
        return Loc(str(loc[0]), int(loc[1]))
    if isinstance(loc, str):
        file, sep, line = loc.rpartition(":")
        if sep and line.strip().isdigit():
            return Loc(file, int(line))
    return None


# -- where code runs -----------------------------------------------------------------------------

_INSIDE: dict = {}


def _inside(filename: str, root: str = _OPGEN_DIR) -> bool:
    key = (filename, root)
    r = _INSIDE.get(key)
    if r is None:
        r = os.path.abspath(filename).startswith(root.rstrip(os.sep) + os.sep)
        _INSIDE[key] = r
    return r


def _position(code, lasti: int):
    getpos = getattr(code, "co_positions", None)  # Python >= 3.11
    if getpos is None or lasti is None or lasti < 0:
        return None
    try:
        return next(itertools.islice(getpos(), lasti // 2, None))
    except StopIteration:
        return None


def _code_loc(code, line, lasti) -> Loc:
    pos = _position(code, lasti)
    if pos and pos[0] is not None and pos[2] is not None:
        return Loc(code.co_filename, pos[0], pos[2], pos[1], pos[3])
    return Loc(code.co_filename, line or 0)


def frame_loc(frame) -> Loc:
    """The Loc of the expression `frame` is executing (its file, line and, when known, column span)."""
    return _code_loc(frame.f_code, frame.f_lineno, frame.f_lasti)


def caller_loc() -> Loc:
    """The Loc of the innermost caller outside the opgen package: the spec statement being executed."""
    fr = sys._getframe(1)
    while fr is not None and _inside(fr.f_code.co_filename):
        fr = fr.f_back
    return frame_loc(fr) if fr is not None else Loc("<unknown>", 0)


def traceback_loc(tb, prefer_dir: str | None = None) -> Loc | None:
    """The Loc in a traceback to blame: the innermost frame under `prefer_dir` (the spec's directory),
    else the innermost frame outside opgen and outside frozen/builtin code; None when there is none."""
    best = fallback = None
    while tb is not None:
        f = tb.tb_frame.f_code.co_filename
        if not f.startswith("<") and not _inside(f):
            loc = _code_loc(tb.tb_frame.f_code, tb.tb_lineno, tb.tb_lasti)
            fallback = loc
            if prefer_dir and _inside(f, prefer_dir):
                best = loc
        tb = tb.tb_next
    return best or fallback


# -- source files --------------------------------------------------------------------------------

class _Source:
    """A source file's lines and syntax tree; its tokens and span -> node index are built on first use (most
    loads only need a function's `def` span, and tokenising is the larger part of reading a file)."""

    def __init__(self, text: str, tree):
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.tree = tree
        self._tokens = None
        self._spans = None

    @property
    def tokens(self) -> list:
        if self._tokens is None:
            toks = []
            try:
                for t in tokenize.generate_tokens(io.StringIO(self.text).readline):
                    toks.append(t)
            except (tokenize.TokenError, SyntaxError):
                pass
            self._tokens = toks
        return self._tokens

    @property
    def spans(self) -> dict:
        if self._spans is None:
            spans = {}
            if self.tree is not None:
                for node in ast.walk(self.tree):
                    if getattr(node, "end_col_offset", None) is None:
                        continue
                    span = (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)
                    old = spans.get(span)
                    if old is None or (isinstance(node, ast.expr) and not isinstance(old, ast.expr)):
                        spans[span] = node
            self._spans = spans
        return self._spans


_SOURCES: dict = {}


def _source(path: str) -> _Source | None:
    """Lines, syntax tree, tokens and a span -> node index of a file (cached while it is unchanged)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    key = (path, st.st_mtime_ns, st.st_size)
    src = _SOURCES.get(key)
    if src is not None:
        return src
    try:
        with tokenize.open(path) as f:
            text = f.read()
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        tree = None
    src = _Source(text, tree)
    _SOURCES[key] = src
    return src


def parsed_tree(path: str) -> ast.AST | None:
    """The syntax tree of the file at `path` (cached while the file is unchanged, shared with the diagnostics'
    own reading of it); None when it cannot be read or does not parse."""
    src = _source(path)
    return src.tree if src is not None else None


def _line(src: _Source, n: int) -> str:
    return src.lines[n - 1] if 1 <= n <= len(src.lines) else ""


def _b2c(line: str, b: int) -> int:
    """UTF-8 byte offset -> character offset on `line`."""
    return len(line.encode("utf-8")[:b].decode("utf-8", errors="ignore"))


def _c2b(line: str, c: int) -> int:
    return len(line[:c].encode("utf-8"))


def _span_chars(src: _Source, node) -> tuple:
    """(line, col, end_line, end_col) of an ast node in characters."""
    return (node.lineno, _b2c(_line(src, node.lineno), node.col_offset),
            node.end_lineno, _b2c(_line(src, node.end_lineno), node.end_col_offset))


def _stmt_at(body, line: int):
    """The innermost statement whose lines cover `line` (decorators count as part of a def)."""
    for st in body:
        if not isinstance(st, ast.stmt):
            continue
        start = min([st.lineno] + [d.lineno for d in getattr(st, "decorator_list", [])])
        if start <= line <= st.end_lineno:
            inner = []
            for f in ("body", "orelse", "finalbody"):
                v = getattr(st, f, None)
                if isinstance(v, list):
                    inner += v
            for h in getattr(st, "handlers", None) or []:
                inner += h.body
            for c in getattr(st, "cases", None) or []:
                inner += c.body
            return _stmt_at(inner, line) or st
    return None


def _first_call(stmt):
    """The outermost call in a statement's own text (not in nested statements)."""
    queue = [c for c in ast.iter_child_nodes(stmt)
             if not isinstance(c, (ast.stmt, ast.excepthandler)) and type(c).__name__ != "match_case"]
    while queue:
        n = queue.pop(0)
        if isinstance(n, ast.Call):
            return n
        queue.extend(c for c in ast.iter_child_nodes(n) if not isinstance(c, ast.stmt))
    return None


def _arg_node(call: ast.Call, arg):
    """The node of argument `arg` (position, keyword name, or (position, keyword)) of `call`."""
    if isinstance(arg, tuple):
        pos, kw = arg
    elif isinstance(arg, str):
        pos, kw = None, arg
    else:
        pos, kw = arg, None
    if kw is not None:
        for k in call.keywords:
            if k.arg == kw:
                return k.value
    if pos is not None and pos < len(call.args):
        if not any(isinstance(a, ast.Starred) for a in call.args[:pos + 1]):
            return call.args[pos]
    return None


def _find_token(src: _Source, region: tuple, token: str, loose: bool = True):
    """(line, col, width) in characters of the first occurrence of `token` inside `region`, or None.

    Strict search (loose=False) accepts only a string literal equal to the token or a name/number/operator
    token; loose search also accepts a word inside a string literal and any substring."""
    l1, c1, l2, c2 = region

    def inside(t):
        return (t.start[0], t.start[1]) >= (l1, c1) and (t.end[0], t.end[1]) <= (l2, c2)

    toks = [t for t in (src.tokens or ()) if inside(t)]
    for t in toks:  # 1. a string literal equal to the token
        if t.type == tokenize.STRING:
            try:
                v = ast.literal_eval(t.string)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
            if v == token:
                return t.start[0], t.start[1], len(t.string) if t.start[0] == t.end[0] else 1
    for t in toks:  # 2. a name, number or operator
        if t.type in (tokenize.NAME, tokenize.NUMBER, tokenize.OP) and t.string == token:
            return t.start[0], t.start[1], len(token)
    if not loose:
        return None
    word = re.compile(r"(?<![\w])" + re.escape(token) + r"(?![\w])")
    for t in toks:  # 3. a word inside a string ("S H")
        if t.type == tokenize.STRING and t.start[0] == t.end[0]:
            m = word.search(t.string)
            if m:
                return t.start[0], t.start[1] + m.start(), len(token)
    for ln in range(l1, l2 + 1):  # 4. any substring (several tokens: `max=16384`)
        text = _line(src, ln)
        lo = c1 if ln == l1 else 0
        hi = c2 if ln == l2 else len(text)
        k = text.find(token, lo, hi)
        if k >= 0 and k + len(token) <= hi:
            return ln, k, len(token)
    return None


def _underline(src: _Source, region: tuple):
    """(line, col, width) underlining the first line of a region."""
    l1, c1, l2, c2 = region
    text = _line(src, l1).rstrip("\r\n")
    end = c2 if l2 == l1 else len(text.rstrip())
    return l1, c1, max(1, end - c1)


def _statement_start(src: _Source, line: int):
    text = _line(src, line).rstrip("\r\n")
    stripped = text.lstrip()
    col = len(text) - len(stripped)
    m = re.match(r"[\w.]+", stripped)
    return line, col, len(m.group(0)) if m else 1


def _resolve(loc: Loc, token=None, arg=None, item=None):
    """(line, col, width, source line) for a diagnostic at `loc`; col None when no caret can be placed."""
    src = _source(loc.file)
    if src is None or not (1 <= loc.line <= len(src.lines)):
        return loc.line, None, 1, None
    node = None
    if loc.col is not None and loc.end_line is not None:
        node = src.spans.get((loc.line, loc.col, loc.end_line, loc.end_col))
    stmt = None
    if node is None and src.tree is not None:
        stmt = _stmt_at(src.tree.body, loc.line)
        if stmt is not None:
            node = _first_call(stmt)
    region = None
    if node is not None:
        region = _span_chars(src, node)
    elif loc.col is not None and loc.end_line is not None:
        region = (loc.line, _b2c(_line(src, loc.line), loc.col), loc.end_line,
                  _b2c(_line(src, loc.end_line), loc.end_col))
    elif stmt is not None:
        region = (stmt.lineno, stmt.col_offset, stmt.end_lineno, len(_line(src, stmt.end_lineno)))
    argnode = None
    if arg is not None and isinstance(node, ast.Call):
        argnode = _arg_node(node, arg)
        if argnode is not None and item is not None and isinstance(argnode, (ast.List, ast.Tuple)):
            elts = argnode.elts
            if item < len(elts) and not any(isinstance(e, ast.Starred) for e in elts):
                argnode = elts[item]
        if argnode is not None:
            region = _span_chars(src, argnode)
    hit = None
    if token is not None:
        token = str(token)
        if region is not None:
            hit = _find_token(src, region, token)
        if hit is None and argnode is None and stmt is not None:  # e.g. the target of an assignment
            hit = _find_token(src, (stmt.lineno, stmt.col_offset, stmt.end_lineno,
                                    len(_line(src, stmt.end_lineno))), token, loose=False)
        if hit is None and region is None:
            hit = _find_token(src, (loc.line, 0, loc.line, len(_line(src, loc.line))), token)
    if hit is None:
        if argnode is not None:
            hit = _underline(src, region)
        elif isinstance(node, ast.Call):
            hit = _underline(src, _span_chars(src, node.func))
        elif node is not None or (region is not None and stmt is None):
            hit = _underline(src, region)
        else:
            hit = _statement_start(src, loc.line)
    line, col, width = hit
    return line, col, width, _line(src, line)


# -- building errors ---------------------------------------------------------------------------

def spec_error(loc, message: str, hint: str = "", *, token=None, arg=None, item=None, cls=SpecError) -> SpecError:
    """A located SpecError (the caller raises it).

    loc: where (a `Loc`, a "file:line" string such as a declaration's `.loc`, or None for no location);
    message: what is wrong; hint: what to change; token: text to put the caret under (a name is found
    as a string literal or identifier); arg / item: narrow the search to one argument of the call at
    `loc` (position, keyword name or (position, keyword)) and to one element of a list/tuple argument.
    """
    loc = parse_loc(loc)
    if loc is None:
        return cls(message, hint)
    line, col, width, source = _resolve(loc, token, arg, item)
    return cls(message, hint, file=loc.file, line=line, col=col, width=width, source=source)


def locate_token(loc, token: str, loose: bool = True) -> Loc | None:
    """The Loc of the first occurrence of `token` inside the expression/statement at `loc`, or None
    (loose=False: only as a string literal or a name, not inside strings or as a substring)."""
    loc = parse_loc(loc)
    src = _source(loc.file) if loc is not None else None
    if src is None:
        return None
    node = None
    if loc.col is not None and loc.end_line is not None:
        node = src.spans.get((loc.line, loc.col, loc.end_line, loc.end_col))
    if node is None and src.tree is not None:
        node = _stmt_at(src.tree.body, loc.line)
    if node is None:
        return None
    hit = _find_token(src, _span_chars(src, node), str(token), loose)
    if hit is None:
        return None
    line, col, width = hit
    text = _line(src, line)
    return Loc(loc.file, line, _c2b(text, col), line, _c2b(text, col + width))


def _function_node(fn):
    code = getattr(fn, "__code__", None)
    if code is None:
        return None, None
    src = _source(code.co_filename)
    if src is None or src.tree is None:
        return code.co_filename, None
    first = code.co_firstlineno
    for node in ast.walk(src.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.lineno == first or any(d.lineno == first for d in node.decorator_list):
                return code.co_filename, node
    return code.co_filename, None


def function_loc(fn) -> Loc | None:
    """The Loc of a function's definition (whole `def` span), or None when its source is unavailable."""
    file, node = _function_node(fn)
    if file is None:
        return None
    if node is None:
        return Loc(file, fn.__code__.co_firstlineno)
    return Loc(file, node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)


def return_loc(fn) -> Loc | None:
    """The Loc of the last `return` statement of a function (not of functions nested in it)."""
    file, node = _function_node(fn)
    if node is None:
        return function_loc(fn)
    found = []
    stack = list(node.body)
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Return):
            found.append(n)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(n))
    if not found:
        return Loc(file, node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)
    r = max(found, key=lambda n: (n.lineno, n.col_offset))
    return Loc(file, r.lineno, r.col_offset, r.end_lineno, r.end_col_offset)


def return_loc_at(fn, line: int | None) -> Loc | None:
    """The Loc of the `return` statement of a function (not of functions nested in it) that spans source line
    `line` (the line the function returned from), or None."""
    file, node = _function_node(fn)
    if node is None or line is None:
        return None
    stack = list(node.body)
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Return) and n.lineno <= line <= n.end_lineno:
            return Loc(file, n.lineno, n.col_offset, n.end_lineno, n.end_col_offset)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(n))
    return None


def param_loc(fn, name: str) -> Loc | None:
    """The Loc of parameter `name` in a function's signature, or None."""
    file, node = _function_node(fn)
    if node is None:
        return None
    a = node.args
    for p in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]:
        if p.arg == name:
            return Loc(file, p.lineno, p.col_offset, p.end_lineno, p.end_col_offset)
    return None


def syntax_error(e: SyntaxError) -> SpecError:
    """A SpecError for a Python syntax error in a spec (or helper) file, caret at the reported column."""
    file = e.filename or "<unknown>"
    line = e.lineno or 0
    src = _source(file)
    text = _line(src, line) if src is not None else (e.text or "")
    col = width = None
    if e.offset:
        col = max(e.offset - 1, 0)
        end = getattr(e, "end_offset", None)
        same = getattr(e, "end_lineno", line) in (None, line)
        width = end - e.offset if (end and same and end > e.offset) else 1
    return SpecError(f"syntax error: {e.msg}", "fix the Python syntax of the spec file", file=file, line=line,
                     col=col, width=width or 1, source=text or None)


def from_exception(exc: BaseException, prefer_dir: str | None = None, what: str = "") -> SpecError:
    """A located SpecError for any exception raised by spec code (module level, body, check functions).

    A located SpecError is returned unchanged; otherwise the innermost spec frame of the traceback is
    blamed (`traceback_loc`). `what` prefixes the message (e.g. "while tracing the body").
    """
    if isinstance(exc, SpecError) and exc.located:
        return exc
    if isinstance(exc, SyntaxError):
        return syntax_error(exc)
    loc = traceback_loc(exc.__traceback__, prefer_dir)
    pre = f"{what}: " if what else ""
    token = None
    if isinstance(exc, SpecError):
        message, hint = exc.message, exc.hint or "fix the spec at this line"
    elif isinstance(exc, NameError):
        token = getattr(exc, "name", None)
        message = f"name {token!r} is not defined" if token else str(exc)
        hint = (f"define or import it before this line (a dim: {token} = spec.dim(\"{token}\"); a dtype "
                f"variable: spec.dtype_vars; dtypes and helpers: from opgen.dsl import ...)") if token else \
            "define or import the name before this line"
    elif isinstance(exc, ImportError):
        token = getattr(exc, "name", None)
        message = f"{type(exc).__name__}: {exc}"
        hint = "import from opgen.dsl, or put the helper module beside the spec file"
    elif isinstance(exc, AttributeError):
        token = getattr(exc, "name", None)
        message = f"AttributeError: {exc}"
        hint = _attribute_hint(getattr(exc, "obj", None), token)
    elif isinstance(exc, TypeError) and _DIM_TYPE.search(str(exc)):
        message = f"TypeError: {exc}"
        hint = ("a dim is an integer symbol: it takes integer arithmetic with dims and ints (2 * H, H // 2) and is a "
                "number of the body only in arithmetic with a tensor (x / N, x.sum(-1) / (N * M), b.const(1.0) / N); "
                "float(N) and 1.0 / N are not defined")
    else:
        message = f"{type(exc).__name__}: {exc}"
        hint = "fix the spec at this line"
    return spec_error(loc, pre + message, hint, token=token)


_INTERNAL = frozenset({"emit", "check_slice", "check_reshape"})
"""Public methods of the Builder that a spec body does not call (the tracer's and the tensor methods' helpers)."""


def _attribute_hint(obj, name) -> str:
    """The hint of an AttributeError `obj.name` in spec code: for the DSL's Builder or Tensor (the body's `b` and its
    tensors), the closest public names (difflib) and all of them, so `b.expm1` reads `did you mean b.exp?` beside
    the list; otherwise the generic pointer to the DSL."""
    generic = "check the name against the DSL (Builder: b.exp, b.where, b.matmul...; Tensor: .sum, .reshape...)"
    kind = type(obj).__name__   # by name: opgen.dsl.builder imports this module (no cycle back to it)
    if type(obj).__module__ != "opgen.dsl.builder" or kind not in ("Builder", "Tensor") or not isinstance(name, str):
        return generic
    prefix = "b." if kind == "Builder" else "."
    names = sorted(n for n in dir(type(obj)) if not n.startswith("_") and not n.isupper() and n not in _INTERNAL)
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    guess = f"did you mean {' or '.join(prefix + c for c in close)}? " if close else ""
    return f"{guess}{type(obj).__name__} has {', '.join(prefix + n for n in names)}"


_DIM_TYPE = re.compile(r"'(Sym|Lit|Bin|Fn|Prod|Rank|DimExpr)'")
"""A TypeError about a dim expression (opgen.ir.dims' classes, as Python names an operand's type)."""


__all__ = ["Loc", "parse_loc", "frame_loc", "caller_loc", "traceback_loc", "spec_error", "locate_token",
           "function_loc", "return_loc", "param_loc", "syntax_error", "from_exception"]
