"""Reviewing emitted code: unified diffs between two sets of packages and a `--stat` summary that says what
changed in substance (`opgen diff OLD_SPEC NEW_SPEC`, `opgen diff --rev REV`, README "Reviewing generated code").

A *tree* is `{op directory (op_snake): {relative path: text}}`, the packages of several ops as `opgen generate`
writes them. The substance of a package is read back from its emitted text, not from opgen's internals, so the
summary works the same for packages made by another opgen revision:

    OpDef            each input/output's DataType list, each attribute's type and default (op_host/<op>_def.cpp)
    SoC              the AI Core configs registered (AddConfig)
    tiling key       each TILING_KEY macro and its number (op_kernel/<op>_tiling_key.h)
    tiling data      each field of the tiling-data struct (op_kernel/<op>_tiling_data.h)
    buffer plan      each UB/L1 size or fit the TilingFunc computes (`const int64_t <x>Bytes|<x>Fit = ...`)
    blockDim         the formula of the cores launched (`const int64_t blockDim = ...`)
    aclnn signature  the parameters of aclnn<Api>GetWorkspaceSize (op_host/op_api/aclnn_<api>.h)
    aclnn check      each message an aclnn check logs (OP_LOGE in op_host/op_api/aclnn_<api>.cpp)

Facts are {category: {item: text}} (text "" for a fact that is only present: a SoC, a check message); the
summary lists items added, removed and changed.
"""

from __future__ import annotations

import difflib
import re

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
    out = {}
    for text in _find(files, r"op_host/[^/]+_tiling\.cpp"):
        code = _one_line(_strip_comments(text))
        for name, expr in re.findall(r"const int64_t (\w+) = ([^;]*);", code):
            out.setdefault(name, expr.strip())
    return out


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
        if (name.endswith("Bytes") or name.endswith("Fit")) and not re.fullmatch(r"[A-Za-z]Bytes|ubBytes", name):
            facts["buffer plan"][name] = expr
    if "blockDim" in consts:
        facts["blockDim"]["blockDim"] = consts["blockDim"]
    for text in _find(files, r"op_host/op_api/aclnn_[^/]+\.h"):
        code = _one_line(_strip_comments(text))
        for name, params in re.findall(r"(aclnn\w+GetWorkspaceSize)\s*\(([^)]*)\)", code):
            facts["aclnn signature"][name] = ", ".join(x.strip() for x in params.split(","))
    for text in _find(files, r"op_host/op_api/aclnn_[^/]+\.cpp"):
        code = _one_line(_strip_comments(text))
        for code_name, msg in re.findall(r'OP_LOGE\((\w+),\s*((?:"(?:[^"\\]|\\.)*"\s*)+)', code):
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


def _counts(old: str | None, new: str | None) -> tuple[int, int]:
    added = removed = 0
    for line in difflib.unified_diff((old or "").splitlines(), (new or "").splitlines(), lineterm="", n=0):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


def diff_files(old: dict | None, new: dict | None, old_label: str, new_label: str) -> str:
    """Unified diff from package `old` to package `new` ({path: text}; None = no such package), file by file in
    path order, headers `a/<old_label>/<path>` and `b/<new_label>/<path>` (/dev/null for a file on one side
    only); "" when they are identical."""
    old, new = old or {}, new or {}
    out = []
    for rel in sorted(set(old) | set(new)):
        a, b = old.get(rel), new.get(rel)
        if a == b:
            continue
        lines = difflib.unified_diff((a or "").splitlines(keepends=True), (b or "").splitlines(keepends=True),
                                     f"a/{old_label}/{rel}" if a is not None else "/dev/null",
                                     f"b/{new_label}/{rel}" if b is not None else "/dev/null")
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


def diff_pairs(pairs) -> str:
    """The unified diffs of `pairs` (pair_trees), concatenated."""
    return "".join(diff_files(o, n, a, b) for a, b, o, n in pairs)


def stat_pairs(pairs) -> str:
    """The `--stat` report of `pairs` (pair_trees): per op one line (`<op>: N files changed, +A -R`, or `added`,
    `removed`, `no differences`), one line per changed file (`  <path> | +A -R`, `(new)` / `(deleted)`), then
    the lines of facts_delta indented under `  substance:`; last a total line."""
    out, n_ops, tot_a, tot_r, tot_f = [], 0, 0, 0, 0
    for a_label, b_label, old, new in pairs:
        label = a_label if a_label == b_label else f"{a_label} -> {b_label}"
        o, n = old or {}, new or {}
        changed = [p for p in sorted(set(o) | set(n)) if o.get(p) != n.get(p)]
        if not changed:
            out.append(f"{label}: no differences")
            continue
        n_ops += 1
        rows = []
        sa = sr = 0
        for p in changed:
            ad, rm = _counts(o.get(p), n.get(p))
            sa, sr = sa + ad, sr + rm
            tag = " (new)" if p not in o else " (deleted)" if p not in n else ""
            rows.append((p, f"+{ad} -{rm}{tag}"))
        tot_a, tot_r, tot_f = tot_a + sa, tot_r + sr, tot_f + len(changed)
        what = "added" if old is None else "removed" if new is None else f"{len(changed)} files changed"
        out.append(f"{label}: {what}, +{sa} -{sr}")
        width = max(len(p) for p, _ in rows)
        out += [f"  {p.ljust(width)} | {c}" for p, c in rows]
        delta = facts_delta(package_facts(o), package_facts(n))
        if delta:
            out.append("  substance:")
            out += [f"    {d}" for d in delta]
    out.append(f"{n_ops} op{'s' if n_ops != 1 else ''} differ, {tot_f} file{'s' if tot_f != 1 else ''} changed, "
               f"+{tot_a} -{tot_r}")
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
