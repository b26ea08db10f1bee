"""Hygiene of every emitted kernel (the committed generated/*/op_kernel files and the example specs of
examples/specs/ generated afresh): every UB / L1 buffer a kernel class allocates is read by code the class runs, no
function has an empty body, and device code calls nothing of the C++ standard library (docs/reference/ascendc.md
§1.4 "Scalar helpers", §1.5). Plus LayerNormGradV3 at H = 4096 (T bfloat16, U float32): with only the buffers its
ROW_SPLIT code reads, one row fits UB and the tiling picks ROW_SPLIT on every core.

The checker reads the C++ text (no compiler): classes and their methods by brace matching, the methods reachable
from Init / Process by their calls, the buffers of reachable `InitBuffer` calls, the tensors taken from each buffer
(Get / GetWithOffset / AllocTensor / DeQue, and views of those tensors), and a buffer is *read* when one of its
tensors is an operand after the first of any call (AscendC puts the destination first: DataCopyPad(ub, gm) writes
ub, DataCopyPad(gm, ub) and Add(d, a, b) read their later operands) or calls GetValue. Locals declared in a method
(`LocalTensor<T> t = ...`) are bound statement by statement, so a `t` taken from one queue is not credited to
another. Known imprecision: a helper taking its destination later than first (CopyRows(gm, map, ub, ...)) counts as
a read."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from opgen.codegen import generate, generate_cached
from opgen.registry import load_spec

ROOT = Path(__file__).resolve().parent.parent

# ------------------------------------------------------------------------------------------------ C++ text reading
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_STRING = re.compile(r'"(?:\\.|[^"\\])*"')
_METHOD = re.compile(r"__aicore__\s+(?:inline\s+)?(?:constexpr\s+)?[\w:<>,\s\*&]*?\b(\w+)\s*\(")
_INIT = re.compile(r"\bInitBuffer\s*\(\s*(?:this->)?(\w+)")
_TAKE = re.compile(r"(?:this->)?(\w+)\s*(?:\[[^\]]*\])?\s*\.\s*(?:template\s+)?"
                   r"(Get|GetWithOffset|AllocTensor|DeQue)\b")
_ASSIGN = re.compile(r"^\s*(?:(?:const\s+)?LocalTensor\s*<[^>]*>\s+)?(\w+)\s*(?:\[[^\]]*\])?\s*=\s*(.*)$", re.S)
_LOCAL = re.compile(r"^\s*(?:const\s+)?LocalTensor\s*<")
_CALL = re.compile(r"\b(\w+)\s*(?:<[^;(){}]*?>)?\s*\(")
_ROOT = re.compile(r"^[\s\(\*&]*(?:static_cast<[^>]*>\s*\()?\s*(?:this->)?(\w+)")
_GETVALUE = re.compile(r"\b(\w+)\s*(?:\[[^\]]*\])*\s*\.\s*GetValue\s*\(")


def strip(text: str) -> str:
    """C++ text without comments and with string literals emptied."""
    return _STRING.sub('""', _COMMENT.sub(" ", text))


def _match(text: str, i: int, open_: str, close: str) -> int:
    """Index just past the bracket closing the one at text[i]."""
    depth = 0
    for k in range(i, len(text)):
        if text[k] == open_:
            depth += 1
        elif text[k] == close:
            depth -= 1
            if depth == 0:
                return k + 1
    raise ValueError(f"unbalanced {open_}{close} at {i}")


def functions(text: str) -> list[tuple[str, str]]:
    """[(name, body)] of every __aicore__ function defined in `text` (comment-free C++), in order."""
    out = []
    for m in _METHOD.finditer(text):
        end = _match(text, m.end() - 1, "(", ")")
        rest = re.match(r"\s*(?:const\s*)?(?:noexcept\s*)?\{", text[end:])
        if rest is None:
            continue   # a declaration, or a call inside a body
        start = end + rest.end() - 1
        out.append((m.group(1), text[start + 1:_match(text, start, "{", "}") - 1]))
    return out


def classes(text: str) -> list[tuple[str, str]]:
    """[(class name, class body)] of every class defined in `text` (comment-free C++)."""
    out = []
    for m in re.finditer(r"\bclass\s+(\w+)\s*(?::[^{;]*)?\{", text):
        start = m.end() - 1
        out.append((m.group(1), text[start + 1:_match(text, start, "{", "}") - 1]))
    return out


def _args(text: str, i: int) -> list[str]:
    """The top-level arguments of the call whose '(' is text[i]."""
    end = _match(text, i, "(", ")")
    args, depth, cur = [], 0, ""
    for ch in text[i + 1:end - 1]:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            args.append(cur)
            cur = ""
        else:
            cur += ch
    args.append(cur)
    return args


def reachable(methods: dict[str, str], roots=("Init", "Process")) -> set[str]:
    """Names of the methods run from `roots` through their calls."""
    seen, todo = set(), [r for r in roots if r in methods]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo += [c for c in {x.group(1) for x in _CALL.finditer(methods[m])} if c in methods and c not in seen]
    return seen


def unread_buffers(cls_body: str) -> list[str]:
    """The buffers the class allocates (InitBuffer in a method run from Init / Process) that none of its running
    code reads (module docstring)."""
    methods = dict(functions(cls_body))
    run = reachable(methods)
    allocated = {m.group(1) for name in run for m in _INIT.finditer(methods[name])}
    members: dict[str, set] = {}       # member tensor -> buffers (bound anywhere in the running code)
    # accessor methods returning a tensor of a buffer (`return rowBuf_.template Get<float>()[...]`)
    for name in run:
        body = methods[name].strip()
        m = re.match(r"return\s+(.*);$", body, re.S)
        if m and (t := _TAKE.search(m.group(1))) and t.group(1) in allocated:
            members.setdefault(name, set()).add(t.group(1))
    statements = {name: _statements(methods[name]) for name in run}
    for _ in range(3):   # views of views (redTmp_ = red_[8]) bound in any order
        for name in run:
            for st in statements[name]:
                m = _ASSIGN.match(st)
                if m is None or _LOCAL.match(st):
                    continue
                src = _source(m.group(2), allocated, members, {})
                if src:
                    members.setdefault(m.group(1), set()).update(src)
    read: set[str] = set()
    for name in run:
        local: dict[str, set] = {}
        for st in statements[name]:
            m = _ASSIGN.match(st)
            if m is not None and _LOCAL.match(st):
                local[m.group(1)] = _source(m.group(2), allocated, members, local)
            elif m is not None and m.group(1) in local:
                local[m.group(1)] = _source(m.group(2), allocated, members, local) or local[m.group(1)]
            read |= _reads(st, allocated, members, local, set(methods))
    return sorted(allocated - read)


def _statements(body: str) -> list[str]:
    """The statements of a function body: split at ';', '{' and '}' outside parentheses (so `T{}` and a for
    header stay whole)."""
    out, depth, cur = [], 0, ""
    for ch in body:
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and ch in ";{}":
            if cur.strip():
                out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return out


def _source(expr: str, allocated: set, members: dict, local: dict) -> set:
    """The buffers the tensor expression `expr` is taken from (a buffer's Get/AllocTensor/DeQue, or a view of a
    tensor already bound)."""
    t = _TAKE.search(expr)
    if t and t.group(1) in allocated:
        return {t.group(1)}
    r = _ROOT.match(expr)
    if r:
        name = r.group(1)
        return set(local.get(name) or members.get(name) or ())
    return set()


def _reads(st: str, allocated: set, members: dict, local: dict, own: set = frozenset()) -> set:
    """The buffers statement `st` reads: tensors passed after the first operand of a call (every operand of a call
    of one of the class's own methods `own`, which may read its first: RowSum(src, n), RowsSum(src, dst, k)), or read
    by GetValue."""
    out = set()

    def bound(name):
        return local.get(name) if name in local else members.get(name, set())

    for c in _CALL.finditer(st):
        if c.group(1) in ("InitBuffer", "if", "for", "while", "switch", "return", "sizeof", "static_cast"):
            continue
        for a in _args(st, c.end() - 1)[0 if c.group(1) in own else 1:]:
            r = _ROOT.match(a)
            if r:
                out |= bound(r.group(1))
    for g in _GETVALUE.finditer(st):
        out |= bound(g.group(1))
    return out


def empty_functions(text: str) -> list[str]:
    """Names of the functions of `text` (comment-free C++) whose body does nothing (empty, or only `(void)x;`)."""
    return [name for name, body in functions(text) if not re.sub(r"\(void\)\s*\w+\s*;", "", body).strip()]


def std_uses(text: str) -> list[str]:
    """The `std::` names `text` (comment-free C++) uses."""
    return sorted(set(re.findall(r"\bstd::\w+", text)))


# ------------------------------------------------------------------------------------------------ the kernels
def _committed() -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text() for p in sorted(ROOT.glob("generated/*/op_kernel/*"))
            if p.suffix in (".h", ".cpp")}


@pytest.fixture(scope="module")
def kernels(examples_gen) -> dict[str, str]:
    """{path: text} of every op_kernel file: committed packages and the example specs (the run's shared tree of
    them, tests/conftest.py examples_gen)."""
    out = _committed()
    for f in sorted(examples_gen.glob("*/op_kernel/*")):
        if f.suffix in (".h", ".cpp"):
            out[f"examples:{f.relative_to(examples_gen)}"] = f.read_text()
    assert sum(1 for k in out if k.startswith("generated/")) >= 12 and sum(1 for k in out if "examples:" in k) >= 28
    return out


def test_every_allocated_buffer_is_read(kernels):
    """No kernel class carves out UB / L1 that its code never reads."""
    bad, checked = [], 0
    for path, text in kernels.items():
        for cls, body in classes(strip(text)):
            checked += 1
            bad += [f"{path}: {cls}.{b}" for b in unread_buffers(body)]
    assert checked >= 30 and not bad, bad


def test_no_function_has_an_empty_body(kernels):
    """Functions that would do nothing (FlushRow() {}, ZeroBatchSums() {}) are not emitted."""
    bad = [f"{p}: {n}" for p, t in kernels.items() for n in empty_functions(strip(t))]
    assert not bad, bad


def test_device_code_uses_no_std(kernels):
    """Nothing under op_kernel/ calls the C++ standard library (AscendC's own helpers instead)."""
    bad = {p: std_uses(strip(t)) for p, t in kernels.items() if std_uses(strip(t))}
    assert not bad, bad


# ------------------------------------------------------------------------------------------------ the checker fails
_DEAD = """
template <typename T>
class K {
public:
    __aicore__ inline void Init(GM_ADDR x) { gm_.SetGlobalBuffer((__gm__ T*)x); }
    __aicore__ inline void Process()
    {
        pipe_.InitBuffer(inQue_, 2, 64);
        pipe_.InitBuffer(outQue_, 2, 64);
        pipe_.InitBuffer(workBuf_, 64);
        pipe_.InitBuffer(deadBuf_, 64);
        pipe_.InitBuffer(filledQue_, 1, 64);
        w_ = workBuf_.template Get<float>();
        dead_[0] = deadBuf_.template Get<float>()[0];
        LocalTensor<T> t = inQue_.template AllocTensor<T>();
        DataCopyPad(t, gm_, DataCopyExtParams(1, 64, 0, 0, 0), DataCopyPadExtParams<T>(false, 0, 0, T{}));
        inQue_.EnQue(t);
        LocalTensor<T> f = filledQue_.template AllocTensor<T>();
        DataCopyPad(f, gm_, DataCopyExtParams(1, 64, 0, 0, 0), DataCopyPadExtParams<T>(false, 0, 0, T{}));
        filledQue_.EnQue(f);
        t = inQue_.template DeQue<T>();
        Add(w_, t, t, 16);
        LocalTensor<T> o = outQue_.template AllocTensor<T>();
        Muls(o, w_, 1.0f, 16);
        outQue_.EnQue(o);
        o = outQue_.template DeQue<T>();
        DataCopyPad(gm_, o, DataCopyExtParams(1, 64, 0, 0, 0));
    }

private:
    __aicore__ inline void Unused() { pipe_.InitBuffer(neverBuf_, 64); }
    __aicore__ inline void FlushRow() {}
    __aicore__ inline void LoadBatch(int64_t b)
    {
        (void)b;
    }
};
"""


def test_the_checker_finds_dead_buffers_empty_bodies_and_std():
    """On a class that allocates a TBuf nothing reads (deadBuf_, only assigned) and a queue only written
    (filledQue_), the buffer check names exactly those two (neverBuf_ is allocated by a method nothing calls); the
    empty-body check names FlushRow and LoadBatch; `std::` outside comments is found."""
    body = dict(classes(strip(_DEAD)))["K"]
    assert unread_buffers(body) == ["deadBuf_", "filledQue_"]
    assert empty_functions(strip(_DEAD)) == ["FlushRow", "LoadBatch"]
    assert std_uses(strip("// std::sqrt in a comment\nconst float s = std::sqrt(x) + y;")) == ["std::sqrt"]


# ------------------------------------------------------------------------------------------------ LayerNormGradV3
H, T_BYTES, U_BYTES, UB = 4096, 2, 4, 196608   # bfloat16 data, fp32 weights; ascend910b1 UB bytes


def _bytes(expr: str, env: dict) -> int:
    """Value of a C++ size expression of an InitBuffer call: sizeof(X) and identifiers from `env`, AlignUp, and the
    conditional `(a > b ? c : d)` of numbers (a maximum of element sizes)."""
    py = re.sub(r"sizeof\((\w+)\)", lambda m: str(env[m.group(1)]), expr)
    py = re.sub(r"\((\d+) > (\d+) \? (\d+) : (\d+)\)", r"(\3 if \1 > \2 else \4)", py)
    py = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: str(env.get(m.group(0), m.group(0))), py).replace("/", "//")
    return int(eval(py, {"AlignUp": lambda a, b: (a + b - 1) // b * b}))   # noqa: S307 - emitted arithmetic only


def test_layer_norm_grad_at_4096_is_row_split():
    """LayerNormGradV3, H = 4096, T = bfloat16, U = float32 on ascend910b1 (48 AIV cores, 196608 B UB).

    What its ROW_SPLIT code needs for one row, from the spec: dy and x rows in (T, double-buffered), the pd_x row
    out (T, double-buffered), the per-row rstd and mean (fp32, one 32-byte block per buffer), three fp32 row
    temporaries, three fp32 column rows (gamma and the two column sums), one fp32 staging row each way (gamma's
    load and the column-sum partials), ReduceSum's result and scratch (one (value, index) pair per 64-lane repeat
    plus a block) — and no batch rows (nor RowsSum's buffers: rows longer than 2040 elements reduce row by row). The
    emitted RowSplit allocates exactly those buffers, their bytes add up to
    that, which fits UB; the tiling picks ROW_SPLIT (strategy 1) on all 48 cores."""
    from opgen.ir.dtypes import parse_dtype
    from opgen.tiling.pipeline import kernel_build
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import evaluate

    spec = load_spec(str(ROOT / "examples" / "specs" / "layer_norm_grad.py"))
    header = generate_cached(spec)[1]["op_kernel/layer_norm_grad_v3.h"]
    (cls, body), = classes(strip(header))
    split = dict(functions(body))["RowSplit"]
    # RowsSum's scratch and per-row values are allocated only for rows of at most 2040 elements (rowsched
    # ROWS_REDUCE_STRIDE: a repeat stride of at most 255 blocks); H = 4096 skips that block
    guard = split.find("if (rowStride_ <= 2040)")
    if guard >= 0:
        depth, end = 0, split.index("{", guard)
        for end in range(end, len(split)):
            depth += {"{": 1, "}": -1}.get(split[end], 0)
            if depth == 0:
                break
        assert H > 2040 and "rowsRedBuf_" in split[guard:end]
        split = split[:guard] + split[end + 1:]
    calls = [(m.group(1), _args(split, m.end() - 1)) for m in _CALL.finditer(split) if m.group(1) == "InitBuffer"]
    env = {"T": T_BYTES, "U": U_BYTES, "float": 4, "pass": 1, "colAlign_": H, "rowStride_": H}
    sizes = {}
    for _fn, args in calls:
        name = args[0].strip()
        num, length = (int(args[1]), args[2]) if len(args) == 3 else (1, args[1])
        sizes[name] = num * ((_bytes(length, env) + 31) // 32 * 32)   # InitBuffer rounds each buffer to 32 B
    assert set(sizes) == {"rowInQue_dy", "rowInQue_x", "rowOutQue_pd_x", "statInQue_rstd_mean",
                          "workBuf_", "colBuf_", "paramQue_", "accOutQue_", "reduceBuf_"}, sizes
    want = (2 * (2 * H * T_BYTES)        # dy, x: two buffers each
            + 2 * H * T_BYTES            # pd_x
            + 2 * (2 * 32)               # rstd and mean in one queue: two buffers of two 32-byte rows each
            + 3 * H * 4                  # fp32 temporaries
            + 3 * H * 4                  # gamma, sum(dy * z), sum(dy)
            + 2 * H * 4                  # paramQue, accOutQue
            + (2 * (H // 64) + 8) * 4)   # ReduceSum result block + scratch
    assert sum(sizes.values()) == want == 180896 and want <= UB

    u = kernel_build(spec)
    tl = evaluate(spec, u.tiling.program, u.tiling.inputs, {"Bd": (4096,), "H": H},
                  {"T": parse_dtype("bfloat16"), "U": parse_dtype("float32")}, PLATFORMS["ascend910b1"], {})
    assert tl["strategy"] == 1 and tl["blockDim"] == 48 and tl["rowsPerPass"] >= 1, tl
    # the tiling's plan covers what the kernel allocates, within its 32-byte rounding slack of the stat buffers
    assert want <= tl["fixedBytes"] + tl["rowsPerPass"] * tl["rowBytes"] <= want + 4 * 32


def test_a_per_row_exp_is_the_vector_exp_on_8_lanes_not_std_exp(tmp_path):
    """The AIV scalar unit has no exp (docs/reference/ascendc.md §1.4): RmsNorm with exp in place of rsqrt (an exp of
    a per-row statistic) is emitted as AscendC's Exp over 8 lanes holding the value (rowprog `sunary`, docs/design.md
    "Per-row values the scalar unit cannot compute"), never std::exp / expf on the scalar unit."""
    text = (ROOT / "examples" / "specs" / "rms_norm.py").read_text()
    assert "rstd = b.rsqrt((x * x).mean(-1) + epsilon)" in text
    path = tmp_path / "row_exp_norm.py"
    path.write_text(text.replace("b.rsqrt((x * x).mean(-1) + epsilon)", "b.exp((x * x).mean(-1) + epsilon)")
                    .replace('"RmsNorm", aclnn="aclnnRmsNorm"', '"RowExpNorm", aclnn="aclnnRowExpNorm"'))
    h = generate(load_spec(str(path)))["op_kernel/row_exp_norm.h"]
    assert re.search(r"\bExp\(red_, red_, 8\)", h)
    assert not re.search(r"\b(std::|Std::)?exp[f]?\(", h)
