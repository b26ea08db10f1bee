"""Reviewing emitted code: unified diffs between two sets of packages and a `--stat` summary that says what
changed in substance (`opgen diff OLD_SPEC NEW_SPEC`, `opgen diff --rev REV`, README "Reviewing generated code").

A *tree* is `{op directory (op_snake): {relative path: text}}`, the packages of several ops as `opgen generate`
writes them. The substance of a package is read back from its emitted text, not from opgen's internals, so the
summary works the same for packages made by another opgen revision:

    OpDef            each input/output's DataType list, each attribute's type and default (op_host/<op>_def.cpp)
    SoC              the AI Core configs registered (AddConfig)
    tiling key       each TILING_KEY macro and its number (op_kernel/<op>_tiling_key.h)
    tiling data      each field of the tiling-data struct (op_kernel/<op>_tiling_data.h)
    buffer plan      each UB/L1 size or fit the TilingFunc computes (`const int64_t <x>Bytes|<x>Fit = ...`, also
                     with a TwoBufs / OneBuf suffix),
                     simplified (simplify_expr)
    blockDim         the formula of the cores launched (`const int64_t blockDim = ...`), simplified
    aclnn signature  the parameters of aclnn<Api>GetWorkspaceSize (op_host/op_api/aclnn_<api>.h)
    aclnn check      each message an aclnn check logs (OP_LOGE in op_host/op_api/aclnn_<api>.cpp)

Facts are {category: {item: text}} (text "" for a fact that is only present: a SoC, a check message); the
summary lists items added, removed and changed.

Traces (docs/design.md "Reviewing generated code"): every `// spec: file.py:N` comment is compared by the statement
it traces, not by its line number. Given the spec sources of each side ({file name: lines}, spec_sources), a trace
`rms_norm.py:28` becomes the text of line 28 of that side's rms_norm.py and its occurrence count among identical
lines (trace_key), and lines are matched on that key with the whitespace before the comment collapsed (clang-format
realigns trailing comments when their width changes). So a spec edit that only moves lines shows no trace-only
hunks; a trace that now names another statement still shows. A trace whose file is not among the sources keeps its
line number. `traces=True` (`--traces`) compares the exact text instead.
"""

from __future__ import annotations

import difflib
import re
from opgen.ir.dims import Lit, Sym
from opgen.ir.dimprint import balanced_parens

FACT_ORDER = ("OpDef", "SoC", "tiling key", "tiling data", "buffer plan", "blockDim", "aclnn signature",
              "aclnn check")
"""The substance categories of a package, in the order the summary prints them."""

_RED, _GREEN, _CYAN, _BOLD, _RESET = "\033[31m", "\033[32m", "\033[36m", "\033[1m", "\033[0m"


def _strip_comments(text: str) -> str:
    """C++ text without // and /* */ comments (string literals kept; the emitted files put no // inside one
    except in format strings, which hold no comment markers)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _find(files: dict, pattern: str) -> list[str]:
    """Texts of the package files whose path matches regex `pattern` (full match), in path order."""
    return [files[p] for p in sorted(files) if re.fullmatch(pattern, p)]


def _opdef_facts(files: dict) -> tuple[dict, dict]:
    params, socs = {}, {}
    for text in _find(files, r"op_host/[^/]+_def\.cpp"):
        code = _one_line(_strip_comments(text))
        for kind, name, body in re.findall(r'this->(Input|Output)\("([^"]*)"\)(.*?);', code):
            dts = re.search(r"\.DataType\(\{([^}]*)\}\)", body)
            req = re.search(r"\.ParamType\((\w+)\)", body)
            params[f"{kind.lower()} {name}"] = (f"{req.group(1) if req else ''} "
                                               f"[{dts.group(1).replace('ge::', '') if dts else ''}]").strip()
        for name, body in re.findall(r'this->Attr\("([^"]*)"\)(.*?);', code):
            params[f"attribute {name}"] = body.strip().lstrip(".")
        for soc in re.findall(r'AddConfig\("([^"]*)"', code):
            socs[soc] = ""
    return params, socs


def _tiling_func_consts(files: dict) -> dict[str, str]:
    """{name: C++ expression} of the TilingFunc's `const int64_t` statements, each local the tiling printer named for
    a repeated sub-expression (opgen.tiling.program.name_repeats: its comment reads "in <statements>") written
    back into the expressions that read it (and left out itself), so a fact is the whole formula and changes when
    such a local does."""
    out, locals_ = {}, set()
    for text in _find(files, r"op_host/[^/]+_tiling\.cpp"):
        named = set(re.findall(r"^\s*// in [^\n]*\n\s*const int64_t (\w+) =", text, re.M))
        named |= set(re.findall(r"const int64_t (\w+) =[^;]*;[ \t]*// in ", text))
        code = _one_line(_strip_comments(text))
        for name, expr in re.findall(r"const int64_t (\w+) = ([^;]*);", code):
            expr = expr.strip()
            for _ in range(len(named)):   # a local reads only earlier ones: as deep as there are locals at most
                hit = [n for n in named if n in out and re.search(rf"\b{n}\b", expr)]
                if not hit:
                    break
                for n in hit:
                    expr = re.sub(rf"\b{n}\b", lambda _m, n=n: f"({out[n]})", expr)
            out.setdefault(name, expr)
        locals_ |= named
    return {n: e for n, e in out.items() if n not in locals_}   # the locals are no facts of their own


_TOKEN = re.compile(r"\s*(?:(\d+)[uUlL]*|([A-Za-z_][\w:]*(?:<(?:u?int(?:8|16|32|64)_t|float|double|bool)>)?)|"
                    r"(<=|>=|==|!=|&&|\|\||[-+*/%()?:<>,!]))")


class _Unparsed(Exception):
    """The text is not an expression simplify_expr reads."""


def _tokens(text: str) -> list[str]:
    out, i = [], 0
    text = text.rstrip()
    while i < len(text):
        m = _TOKEN.match(text, i)
        if not m or m.end() == i:
            raise _Unparsed(text[i:])
        out.append(m.group(1) or m.group(2) or m.group(3))
        i = m.end()
    return out


def simplify_expr(text: str) -> str:
    """A C++ integer expression of a TilingFunc (`((4 * colAlign) * TBytes) + ((2 * colAlign) * TBytes)`, as the
    emitter prints it, fully parenthesised) printed simplified: + - * collected as a polynomial and / % kept, by
    the dim-expression algebra and printer of opgen/ir/dims.py (docs/design.md "Reviewing generated code"), so it
    reads `6 * TBytes * colAlign`. Calls, comparisons and `?:` stay opaque terms with their operands simplified;
    `/` is C++ integer division (dims' `//`). Text it does not read (another revision's emitter) is returned as it
    is; never raises."""
    try:
        toks = _tokens(text)
        out = _Parser(toks).parse()
    except (_Unparsed, IndexError, RecursionError):
        return text
    return _show(out, top=True)


def _show(e, top: bool = False) -> str:

    s = str(e).replace(" // ", " / ")
    if top and isinstance(e, Sym) and s.startswith("(") and s.endswith(")") and balanced_parens(s[1:-1]):
        s = s[1:-1]
    return s


class _Parser:
    """Recursive descent over _tokens: ternary > || && > comparison > + - > * / % > unary > primary; each value a
    DimExpr (opgen.ir.dims), an opaque part a Sym named by its simplified text."""

    def __init__(self, toks):
        self.t, self.i = toks, 0

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self, want=None):
        tok = self.t[self.i]
        if want is not None and tok != want:
            raise _Unparsed(tok)
        self.i += 1
        return tok

    def parse(self):
        e = self.ternary()
        if self.i != len(self.t):
            raise _Unparsed(self.t[self.i])
        return e

    def ternary(self):

        c = self.logic()
        if self.peek() != "?":
            return c
        self.take("?")
        a = self.ternary()
        self.take(":")
        b = self.ternary()
        return Sym(f"({_show(c)} ? {_show(a)} : {_show(b)})")

    def logic(self):

        e = self.cmp()
        while self.peek() in ("&&", "||"):
            op = self.take()
            e = Sym(f"({_show(e)} {op} {_show(self.cmp())})")
        return e

    def cmp(self):

        e = self.add()
        if self.peek() in ("<", ">", "<=", ">=", "==", "!="):
            op = self.take()
            e = Sym(f"({_show(e)} {op} {_show(self.add())})")
        return e

    def add(self):
        e = self.mul()
        while self.peek() in ("+", "-"):
            e = e + self.mul() if self.take() == "+" else e - self.mul()
        return e

    def mul(self):
        e = self.unary()
        while self.peek() in ("*", "/", "%"):
            op = self.take()
            r = self.unary()
            e = e * r if op == "*" else e // r if op == "/" else e % r
        return e

    def unary(self):

        if self.peek() == "-":
            self.take()
            return Lit(0) - self.unary()
        if self.peek() == "!":
            self.take()
            return Sym(f"!{_show(self.unary())}")
        return self.primary()

    def primary(self):

        tok = self.take()
        if tok == "(":
            e = self.ternary()
            self.take(")")
            return e
        if tok.isdigit():
            return Lit(int(tok))
        if not (tok[0].isalpha() or tok[0] == "_"):
            raise _Unparsed(tok)
        if self.peek() != "(":
            return Sym(tok)
        self.take("(")
        args = []
        while self.peek() != ")":
            args.append(_show(self.ternary()))
            if self.peek() == ",":
                self.take(",")
        self.take(")")
        if tok.startswith("static_cast<") and len(args) == 1:
            return Sym(f"{tok}({args[0]})")
        return Sym(f"{tok}({', '.join(args)})")


def package_facts(files: dict) -> dict[str, dict[str, str]]:
    """The substance of one package ({path: text} as `opgen generate` emits it): {category: {item: text}} for
    the categories of FACT_ORDER (module docstring). Categories a package does not have (no TilingFunc, no
    kernel) are empty. Never raises on unexpected text: what does not parse is not a fact."""
    facts: dict[str, dict[str, str]] = {c: {} for c in FACT_ORDER}
    facts["OpDef"], facts["SoC"] = _opdef_facts(files)
    for text in _find(files, r"op_kernel/[^/]+_tiling_key\.h"):
        for name, value in re.findall(r"^#define (\w+_TILING_KEY\w*) (\d+)\s*$", text, re.M):
            facts["tiling key"][name] = value
    for text in _find(files, r"op_kernel/[^/]+_tiling_data\.h"):
        code = _strip_comments(text)
        for body in re.findall(r"struct \w+TilingData\s*\{(.*?)\};", code, re.S):
            for ctype, name in re.findall(r"^\s*([A-Za-z_][\w:<> ]*?)\s+(\w+)(?:\[[^\]]*\])?\s*(?:=[^;]*)?;",
                                          body, re.M):
                facts["tiling data"][name] = ctype
    consts = _tiling_func_consts(files)
    for name, expr in consts.items():
        # a plan per buffer count too (rowBytesTwoBufs / rowsFitOneBuf: opgen.tiling.rows.row_split)
        if re.fullmatch(r"\w*(Bytes|Fit)(TwoBufs|OneBuf)?", name) and not re.fullmatch(r"[A-Za-z]Bytes|ubBytes", name):
            facts["buffer plan"][name] = simplify_expr(expr)
    if "blockDim" in consts:
        facts["blockDim"]["blockDim"] = simplify_expr(consts["blockDim"])
    for text in _find(files, r"op_host/op_api/aclnn_[^/]+\.h"):
        code = _one_line(_strip_comments(text))
        for name, params in re.findall(r"(aclnn\w+GetWorkspaceSize)\s*\(([^)]*)\)", code):
            facts["aclnn signature"][name] = ", ".join(x.strip() for x in params.split(","))
    for text in _find(files, r"op_host/op_api/aclnn_[^/]+\.cpp"):
        code = _one_line(_strip_comments(text))
        # clang-format breaks a long call after its parenthesis: `OP_LOGE( ACLNN_ERR_PARAM_INVALID, "..."` once
        # the lines are joined
        for code_name, msg in re.findall(r'OP_LOGE\(\s*(\w+),\s*((?:"(?:[^"\\]|\\.)*"\s*)+)', code):
            text_ = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', msg))
            facts["aclnn check"][f"{code_name}: {text_}"] = ""
    return facts


def facts_delta(old: dict, new: dict) -> list[str]:
    """Lines naming what changed between two packages' facts (package_facts), category by category in
    FACT_ORDER: `<category> added: <item> = <text>`, `... removed: ...`, `... changed: <item>: <old> -> <new>`.
    For the aclnn checks only the messages are listed (added / removed)."""
    lines = []
    for cat in FACT_ORDER:
        a, b = old.get(cat, {}), new.get(cat, {})
        for item in sorted(set(a) | set(b)):
            if cat == "aclnn signature" and item in a and item in b:
                lines += [f"{cat} changed: {item}: {d}" for d in _list_delta(a[item].split(", "), b[item].split(", "))]
                continue
            if item not in b:
                lines.append(f"{cat} removed: {item}" + (f" = {a[item]}" if a[item] else ""))
            elif item not in a:
                lines.append(f"{cat} added: {item}" + (f" = {b[item]}" if b[item] else ""))
            elif a[item] != b[item]:
                lines.append(f"{cat} changed: {item}: {a[item]} -> {b[item]}")
    return lines


def _list_delta(old: list[str], new: list[str]) -> list[str]:
    """What turns parameter list `old` into `new`: parameters added (1-based position in `new`), removed
    (position in `old`), and the span of the kept ones whose order changed."""
    out = []
    olds, news = set(old), set(new)
    out += [f"parameter {k + 1} added: {p}" for k, p in enumerate(new) if p not in olds]
    out += [f"parameter {p} removed (was {k + 1})" for k, p in enumerate(old) if p not in news]
    a, b = [p for p in old if p in news], [p for p in new if p in olds]
    if a != b:
        lo = next(k for k in range(len(a)) if a[k] != b[k])
        hi = len(a) - next(k for k in range(len(a)) if a[len(a) - 1 - k] != b[len(b) - 1 - k])
        out.append(f"parameters reordered: {', '.join(a[lo:hi])} -> {', '.join(b[lo:hi])}")
    return out


def _counts(old: str | None, new: str | None, sources=None) -> tuple[int, int]:
    added = removed = 0
    if sources is not None and old is not None and new is not None:
        a, b = _keys(old, sources[0]), _keys(new, sources[1])
    else:
        a, b = (old or "").splitlines(), (new or "").splitlines()
    for line in difflib.unified_diff(a, b, lineterm="", n=0):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


_TRACE = re.compile(r"[ \t]*// spec: (.*)$")


def spec_sources(paths) -> dict[str, list[str]]:
    """{file name: its lines} of every spec file in `paths` (files that do not exist are skipped) and of the shared
    `_*.py` helpers beside it: what trace_key resolves `// spec: file.py:N` against. The first file of a name
    wins (traces name files by basename, opgen/ir/locs.py)."""
    from pathlib import Path

    out: dict[str, list[str]] = {}
    for p in paths:
        p = Path(p)
        if not p.is_file():
            continue
        for f in (p, *sorted(p.parent.glob("_*.py"))):
            if f.name not in out:
                out[f.name] = f.read_text(encoding="utf-8", errors="replace").splitlines()
    return out


def _statement_ids(lines: list[str]) -> list[str]:
    """Per line (0-based) its stripped text and the count of identical stripped lines up to it: `text#k`."""
    seen: dict[str, int] = {}
    ids = []
    for line in lines:
        t = line.strip()
        seen[t] = seen.get(t, 0) + 1
        ids.append(f"{t}#{seen[t]}")
    return ids


def trace_key(line: str, sources: dict[str, list[str]], _cache: dict | None = None) -> str:
    """`line` with its `// spec: a.py:3,7 b.py:2` trace (opgen.ir.locs.spec_comment) rewritten to the statements it
    traces (`// spec: a.py:[<text of line 3>#k|...]`, module docstring) and the whitespace before the comment
    collapsed to one space; a line without a trace unchanged. A file not in `sources` or a line number out of its
    range keeps its number."""
    m = _TRACE.search(line)
    if not m:
        return line
    cache = {} if _cache is None else _cache
    parts = []
    for tok in m.group(1).split():
        f, sep, nums = tok.rpartition(":")
        if not sep or f not in sources:
            parts.append(tok)
            continue
        if f not in cache:
            cache[f] = _statement_ids(sources[f])
        ids = cache[f]
        parts.append(f"{f}:[" + "|".join(ids[int(n) - 1] if n.isdigit() and 0 < int(n) <= len(ids) else n
                                         for n in nums.split(",")) + "]")
    return line[:m.start()] + " // spec: " + " ".join(parts)


def _keys(text: str | None, sources) -> list[str]:
    cache: dict = {}
    return [trace_key(x, sources, cache) for x in (text or "").splitlines()]


def _unified(a: list[str], b: list[str], ka: list, kb: list, fromfile: str, tofile: str, n: int = 3) -> list[str]:
    """Unified-diff lines of `a` -> `b` (lines with their ends) matched on the keys ka / kb (one per line); a
    context line shows b's text. [] when the keys are equal."""
    sm = difflib.SequenceMatcher(None, ka, kb, autojunk=False)
    out = []
    for group in sm.get_grouped_opcodes(n):
        if not out:
            out += [f"--- {fromfile}\n", f"+++ {tofile}\n"]
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]

        def rng(start, length):
            return f"{start + 1 if length else start}" + ("" if length == 1 else f",{length}")

        out.append(f"@@ -{rng(i1, i2 - i1)} +{rng(j1, j2 - j1)} @@\n")
        for tag, x1, x2, y1, y2 in group:
            if tag == "equal":
                out += [" " + line for line in b[y1:y2]]
                continue
            out += ["-" + line for line in a[x1:x2]]
            out += ["+" + line for line in b[y1:y2]]
    return out


def differs(a: str | None, b: str | None, sources=None) -> bool:
    """Whether file texts `a` and `b` differ: exactly without `sources` ((old, new) spec_sources), else with their
    traces compared by statement (module docstring)."""
    if a == b:
        return False
    if sources is None or a is None or b is None:
        return True
    return _keys(a, sources[0]) != _keys(b, sources[1])


def diff_files(old: dict | None, new: dict | None, old_label: str, new_label: str, sources=None) -> str:
    """Unified diff from package `old` to package `new` ({path: text}; None = no such package), file by file in
    path order, headers `a/<old_label>/<path>` and `b/<new_label>/<path>` (/dev/null for a file on one side
    only); "" when they are identical. sources: None = exact text; (old, new) spec_sources = traces compared by the
    statement they trace (module docstring), so hunks whose only change is a trace's line number do not show."""
    old, new = old or {}, new or {}
    out = []
    for rel in sorted(set(old) | set(new)):
        a, b = old.get(rel), new.get(rel)
        if not differs(a, b, sources):
            continue
        fa = f"a/{old_label}/{rel}" if a is not None else "/dev/null"
        fb = f"b/{new_label}/{rel}" if b is not None else "/dev/null"
        al, bl = (a or "").splitlines(keepends=True), (b or "").splitlines(keepends=True)
        if sources is None or a is None or b is None:
            lines = difflib.unified_diff(al, bl, fa, fb)
        else:
            lines = _unified(al, bl, _keys(a, sources[0]), _keys(b, sources[1]), fa, fb)
        for line in lines:
            out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def align_spec_names(files: dict, old_names: tuple[str, ...], new_names: tuple[str, ...]) -> dict:
    """`files` with each of `old_names` (the old spec's banner path and file name) replaced by the matching one of
    `new_names`, so two versions of one spec kept in differently named files diff in what they emit, not in the
    banners and spec-line comments that name the file."""
    out = {}
    for rel, text in files.items():
        for a, b in zip(old_names, new_names):
            if a != b:
                text = re.sub(rf"(?<![\w./-]){re.escape(a)}(?![\w-])", b, text)
        out[rel] = text
    return out


def pair_trees(old: dict, new: dict) -> list[tuple[str, str, dict | None, dict | None]]:
    """[(old label, new label, old package, new package)] for every op directory of either tree, sorted."""
    return [(d, d, old.get(d), new.get(d)) for d in sorted(set(old) | set(new))]


def diff_pairs(pairs, sources=None) -> str:
    """The unified diffs of `pairs` (pair_trees), concatenated; sources as diff_files."""
    return "".join(diff_files(o, n, a, b, sources) for a, b, o, n in pairs)


def pairs_differ(pairs, sources=None) -> bool:
    """Whether any file of `pairs` (pair_trees) differs (sources as diff_files)."""
    return any(differs((o or {}).get(p), (n or {}).get(p), sources)
               for _a, _b, o, n in pairs for p in set(o or {}) | set(n or {}))


def trace_only_files(pairs, sources) -> int:
    """How many files of `pairs` differ in their text but not once traces are compared by statement."""
    return sum(1 for _a, _b, o, n in pairs for p in set(o or {}) | set(n or {})
               if differs((o or {}).get(p), (n or {}).get(p)) and not differs((o or {}).get(p), (n or {}).get(p),
                                                                           sources))


def stat_pairs(pairs, sources=None) -> str:
    """The `--stat` report of `pairs` (pair_trees): per op one line (`<op>: N files changed, +A -R`, or `added`,
    `removed`, `no differences`), one line per changed file (`  <path> | +A -R`, `(new)` / `(deleted)`), then
    the lines of facts_delta indented under `  substance:`; last a total line, and with `sources` (as diff_files)
    a line counting the files whose only change is trace line numbers (hidden; `--traces` shows them)."""
    out, n_ops, tot_a, tot_r, tot_f = [], 0, 0, 0, 0
    for a_label, b_label, old, new in pairs:
        label = a_label if a_label == b_label else f"{a_label} -> {b_label}"
        o, n = old or {}, new or {}
        changed = [p for p in sorted(set(o) | set(n)) if differs(o.get(p), n.get(p), sources)]
        if not changed:
            out.append(f"{label}: no differences")
            continue
        n_ops += 1
        rows = []
        sa = sr = 0
        for p in changed:
            ad, rm = _counts(o.get(p), n.get(p), sources)
            sa, sr = sa + ad, sr + rm
            tag = " (new)" if p not in o else " (deleted)" if p not in n else ""
            rows.append((p, f"+{ad} -{rm}{tag}"))
        tot_a, tot_r, tot_f = tot_a + sa, tot_r + sr, tot_f + len(changed)
        what = "added" if old is None else "removed" if new is None else f"{len(changed)} file{'s' if len(changed) != 1 else ''} changed"
        out.append(f"{label}: {what}, +{sa} -{sr}")
        width = max(len(p) for p, _ in rows)
        out += [f"  {p.ljust(width)} | {c}" for p, c in rows]
        delta = facts_delta(package_facts(o), package_facts(n))
        if delta:
            out.append("  substance:")
            out += [f"    {d}" for d in delta]
    out.append(f"{n_ops} op{'s differ' if n_ops != 1 else ' differs'}, {tot_f} file{'s' if tot_f != 1 else ''} changed, "
               f"+{tot_a} -{tot_r}")
    hidden = trace_only_files(pairs, sources) if sources is not None else 0
    if hidden:
        out.append(f"{hidden} file{'s differ' if hidden != 1 else ' differs'} only in `// spec:` trace line "
                   f"numbers (not shown; --traces shows them)")
    return "\n".join(out) + "\n"


def colorize_diff(text: str) -> str:
    """A unified diff with ANSI colours as git prints them: headers bold, hunks cyan, removed red, added green."""
    out = []
    for line in text.splitlines(keepends=True):
        body, nl = (line[:-1], "\n") if line.endswith("\n") else (line, "")
        if line.startswith(("--- ", "+++ ")):
            out.append(f"{_BOLD}{body}{_RESET}{nl}")
        elif line.startswith("@@"):
            out.append(f"{_CYAN}{body}{_RESET}{nl}")
        elif line.startswith("-"):
            out.append(f"{_RED}{body}{_RESET}{nl}")
        elif line.startswith("+"):
            out.append(f"{_GREEN}{body}{_RESET}{nl}")
        else:
            out.append(line)
    return "".join(out)


def colorize_stat(text: str) -> str:
    """A `--stat` report with ANSI colours: +N green, -N red, removed facts red, added facts green."""
    out = []
    for line in text.splitlines(keepends=True):
        if " removed: " in line:
            line = f"{_RED}{line.rstrip(chr(10))}{_RESET}\n"
        elif " added: " in line:
            line = f"{_GREEN}{line.rstrip(chr(10))}{_RESET}\n"
        else:
            line = re.sub(r"(?<![\w-])\+(\d+)", f"{_GREEN}+\\1{_RESET}", line)
            line = re.sub(r"(?<![\w+]) -(\d+)", f" {_RED}-\\1{_RESET}", line)
        out.append(line)
    return "".join(out)
