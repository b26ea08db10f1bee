"""How a tiling program's inputs are read and evaluated; the tiling files (op_kernel/<op>_tiling_data.h,
op_host/<op>_tiling.cpp) are printed from them by opgen.codegen.tilingfiles, from a spec and its tiling program (docs/reference/ascendc.md §2.4 struct-style tiling data, §2.5 TilingFunc). The struct lives in
op_kernel/ and the host includes it as ../op_kernel/<op>_tiling_data.h: the kernel build copies only op_kernel/*
(docs/reference/ops_package.md §2.3, §3).

Python decides everything: how each program input is read from the TilingContext (dims from input
shapes, generated from the spec's symbolic shapes; dtype sizes and the dtype key from the dtype table),
the program statements (TilingProgram.to_cpp), the fields. The templates only lay the code out.
"""

from __future__ import annotations

from opgen.names import c_string

from opgen.dsl.checks import host_rule
from opgen.dsl.dimsource import group_location, read_dim, sym_locations, wrapped
from opgen.dsl.keys import attr_key  # noqa: F401  (the tiling key's attrKey; its users import it from here too)
from opgen.dsl.keys import form_key, form_key_count, free_form_inputs
from opgen.errors import OpgenError, SpecError
from opgen.ir.dims import Bin, DimExpr, Lit, Prod, Sym, Variadic, as_dim
from opgen.ir.dimprint import dim_cpp as print_cpp
from opgen.ir.dtypes import DType
from opgen.dsl.keys import LIST_INT

SYS_WORKSPACE_BYTES = 16 * 1024 * 1024  # AscendC system workspace reserve (docs/reference/ada_layer_norm.md §3.1)


def _dim_in(spec, index: int, sym: str, ref: str):
    """C++ reading dim (or variadic group product) `sym` from input number `index` whose gert::Shape is
    `ref`, or None when that input does not carry it (opgen.dsl.dimsource)."""

    pick = lambda attr, exprs: pick_form_cpp(spec, attr, exprs)   # noqa: E731
    if sym in spec.variadics:
        g = group_location(spec, sym)
        if g is None or g.index != index:
            return None
        lead, tail = g.bounds(pick)
        return f"ProdDims({ref}, {lead}, {tail})"
    for loc in sym_locations(spec, sym):
        if loc.index == index:
            return loc.read(lambda where, k: f"{ref}.GetDim({k})" if where == "front" else
                            f"{ref}.GetDim({ref}.GetDimNum() - {k})", pick)
    return None


def pick_form_cpp(spec, attr: str, exprs: list[str]) -> str:
    """C++ selecting exprs[k] when static attribute `attr` holds its k-th choice (an input's shape form picked
    by the attribute, InputDecl.form_by); the TilingFunc rejects a value outside the choices before it reads a
    dim (its attrKey check)."""
    if len(set(exprs)) == 1:
        return exprs[0]
    a = next(a for a in spec.attrs if a.name == attr)
    idx = next(k for k, x in enumerate(spec.attrs) if x.name == attr)
    sel = _attr_index_cpp(a, idx)
    out = exprs[-1]
    for k in range(len(exprs) - 2, -1, -1):
        out = f"({sel} == {k} ? {exprs[k]} : {out})"
    return out


def _dim_access(spec, sym: str) -> str:
    """C++ expression reading dim `sym` (or the product of variadic group `sym`) in the TilingFunc: from the input
    shapes by opgen.dsl.dimsource.read_dim (the rule InferShape follows: the best required input, a form-picked
    input per form, a product entry N1 * D once its other dims are read, an optional input when present), behind
    them the dim's `absent` value, else an integer attribute bound to the dim (dim=), else 0. A variadic group's
    product comes from the input holding it (the absent value or 0 when that input is optional and null). Raises
    SpecError when neither an input nor an attribute gives the dim."""
    if sym in spec.variadics:
        order = [k for k, i in enumerate(spec.inputs) if not i.optional] + \
            [k for k, i in enumerate(spec.inputs) if i.optional]
        for k in order:
            i = spec.inputs[k]
            got = _dim_in(spec, k, sym, shape_ref(i))
            if got and not i.optional:
                return got
            if got:
                return f"({i.name}ShapeOpt != nullptr ? {got} : 0)"
        raise SpecError(f"{spec.file}: dim {sym} is not carried by any input; the tiling cannot read it")

    got = read_dim(spec, sym, lambda i, w, k: _entry_cpp(spec, i, w, k), lambda a, exprs: pick_form_cpp(spec, a, exprs),
                   lambda i: f"{spec.inputs[i].name}ShapeOpt != nullptr", lambda n: _tail_cpp(spec, n))
    if got is None:
        raise SpecError(f"{spec.file}: dim {sym} is not carried by any input; the tiling cannot read it")
    return _paren(got)


def exact_products(spec) -> list[dict]:
    """The TilingFunc's checks that each product it divides a shape entry by is exact (opgen.dsl.dimsource.Divides:
    BSH's H1 by head_num, H2 by D): [{"cond", "msg", "args"}], the failing condition (in the shape form the check
    belongs to) and the interpreter's words ("query: dim 2 is 100, not D * N1 for any whole D with N1=3"). Graph
    mode reaches the TilingFunc without the aclnn layer's BindFactor check."""
    found: list = []
    for sym in spec.dims_:
        if not any(q for q in sym_locations(spec, sym)):
            continue
        read_dim(spec, sym, lambda i, w, k: _entry_cpp(spec, i, w, k), lambda a, exprs: pick_form_cpp(spec, a, exprs),
                 lambda i: f"{spec.inputs[i].name}ShapeOpt != nullptr", lambda n: _tail_cpp(spec, n), divides=found)
    return [d.check(spec.inputs[d.index].name, lambda attr, k: form_cond_cpp(spec, attr, k)) for d in found]


def _entry_cpp(spec, index: int, where: str, k: int) -> str:
    """C++ of shape entry (where, k) of input number `index` in the TilingFunc."""
    ref = shape_ref(spec.inputs[index])
    return f"{ref}.GetDim({k})" if where == "front" else f"{ref}.GetDim({ref}.GetDimNum() - {k})"


def _tail_cpp(spec, name: str) -> str | None:
    """C++ of dim `name` when no input gives it in the TilingFunc: its absent value, else the integer attribute
    bound to it (dim=), else None."""
    absent = spec.dims_[name].absent if name in spec.dims_ else None
    if absent is not None:
        return str(absent)
    for k, a in enumerate(spec.attrs):
        if a.dim is not None and a.dim.name == name:
            return f"AttrInt(context, {k}, {int(a.default) if a.default is not None else 0})"
    return None


def _paren(x: str) -> str:
    """x in parentheses when it is a conditional expression (the printer composes dims with * and /)."""
    return f"({x})" if " ? " in x and not wrapped(x) else x


def form_cond_cpp(spec, attr: str, k: int) -> str:
    """C++ condition, in the TilingFunc: static attribute `attr` of `spec` holds its choice number `k` (false when
    absent or not one of its choices)."""
    idx = next(j for j, a in enumerate(spec.attrs) if a.name == attr)
    return f"{_attr_index_cpp(spec.attrs[idx], idx)} == {k}"


def shape_ref(i) -> str:
    """C++ of input declaration `i`'s shape in the TilingFunc (a gert::Shape; an optional input's through its
    StorageShape pointer, which the caller checks for null first)."""
    return f"{i.name}Shape" if not i.optional else f"{i.name}ShapeOpt->GetStorageShape()"


def dim_cpp(spec, e: DimExpr) -> str:
    """C++ int64 expression of a dim expression over the spec's dims, read from the TilingContext's input
    shapes (_dim_access); printed by the printer InferShape and aclnn use (opgen.ir.dimprint)."""

    return print_cpp(e, lambda n: _dim_access(spec, n), lambda n: _dim_access(spec, n))


def float_bits(v: float) -> int:
    """IEEE-754 single-precision bits of `v` as a non-negative int (how a float attribute travels in the
    int64 tiling data)."""
    import struct

    return struct.unpack("<I", struct.pack("<f", float(v)))[0]


def int_float_bits(v: int) -> int:
    """IEEE-754 single-precision bits of integer `v` (int64 range) rounded once to fp32, to nearest with ties to even
    (as the TilingFunc's static_cast<float>(int64_t) does on the host, AttrIntFloatBits): how an int attribute a rows
    kernel reads travels in the tiling data (docs/design.md "Rows family: integer attributes"). Not
    float_bits(float(v)), which rounds twice (to double, then to fp32). Raises OverflowError outside int64."""
    import numpy as np

    return int(np.array([v], dtype=np.int64).astype(np.float32).view(np.uint32)[0])


def _attr_value(spec, name: str, attrs: dict | None):
    """Value of attribute `name` in `attrs`, else its declared default."""
    a = next(a for a in spec.attrs if a.name == name)
    return (attrs or {}).get(name, a.default)


def attr_key_cpp(spec) -> str:
    """The C++ expression (an int64_t) of attr_key over the TilingContext's attributes of `spec` (OpDef order,
    mixed radix over the static attributes' choices: docs/design.md "Tiling", the tiling key), -1 when a value is not
    one of its choices. Never raises."""
    terms, radix = [], 1
    index = {a.name: k for k, a in enumerate(spec.attrs)}
    for a in spec.static_attrs:
        if a.type is str and len(a.choices) == 1:
            continue  # index 0 whatever the value: the aclnn layer and infershape reject any other string
        terms.append(f"{_attr_index_cpp(a, index[a.name])} * {radix}")
        radix *= len(a.choices)
    return " + ".join(terms) if terms else "0"


def _attr_index_cpp(a, idx: int) -> str:
    """C++ of the index of static attribute `a` (OpDef index `idx`) among its choices in the TilingContext,
    a large negative value when absent or not allowed: AttrIndex for an int or bool attribute, AttrListIndex
    (RuntimeAttrs::GetListInt) for a list[int] one."""
    if a.type is LIST_INT:
        vals = ", ".join("{" + ", ".join(str(int(x)) for x in c) + "}" for c in a.choices)
        return f"AttrListIndex(context, {idx}, {{{vals}}})"
    if a.type is str:   # RuntimeAttrs::GetStr
        vals = ", ".join(c_string(c) for c in a.choices)
        return f"AttrStrIndex(context, {idx}, {{{vals}}})"
    ctype = "bool" if a.type is bool else "int64_t"
    vals = ", ".join(("true" if c else "false") if a.type is bool else str(c) for c in a.choices)
    return f"AttrIndex<{ctype}>(context, {idx}, {{{vals}}})"


def evaluate(spec, prog, inputs_map: dict, env: dict, dtypes: dict, platform, attrs: dict | None = None,
             deterministic: bool = False, forms: tuple | None = None, present: tuple | None = None,
             host: dict | None = None) -> dict:
    """The Python twin: run `prog` for concrete dims `env` ({"Bd": (2,), "S": 7, ...}), dtype binding
    `dtypes` ({"T": DType, ...}; a variable whose tensors are all absent may be missing), a Platform,
    the static attribute values `attrs` (defaults when absent) and the framework's deterministic-computation flag
    (a ("deterministic",) input; CANN's TilingContext::GetDeterministic()) and the shape forms of the call
    (SpecKey.forms; a ("form_key",) input, opgen.dsl.keys.form_key; None: every form 0) and the presence of the
    optional inputs (SpecKey.present: one bool per optional input in spec order; a ("presence", ...) input; None:
    unknown, such an input reads 0) and the call's host arrays (`host`: {input name: int array}; a
    ("longest_batch", ...) input reads its array, else its token dim).

    Raises KeyError for a program input without a mapping; OpgenError when a host array of `host` breaks a value
    check the TilingFunc enforces (tiling_host_checks: "tiling <prog>: <input>: <rule>"), when a dim is outside the
    spec's domain or no UB plan fits (the emitted TilingFunc returns GRAPH_FAILED in the same cases)."""
    if host:
        for r in tiling_host_checks(spec):
            rule = r.evaluate({i.name: host.get(i.name) for i in spec.inputs}, env, attrs or {})
            if rule is not None:
                raise OpgenError(f"tiling {prog.name}: {r.param}: {rule}")
    vals = program_inputs(spec, prog, inputs_map, env, dtypes, platform, attrs, deterministic, forms, present, host)
    for name, lo, hi in dim_bounds(spec, prog, inputs_map):
        if vals[name] < lo or (hi is not None and vals[name] > hi):
            raise OpgenError(f"tiling {prog.name}: {input_label(inputs_map, name)}={vals[name]} outside [{lo}, {hi}]")
    out = prog.evaluate(vals)
    if not out.get("fits", 1):
        raise OpgenError(f"tiling {prog.name}: no UB plan fits")
    return out


def program_inputs(spec, prog, inputs_map: dict, env: dict, dtypes: dict, platform, attrs,
                   deterministic: bool = False, forms: tuple | None = None, present: tuple | None = None,
                   host: dict | None = None) -> dict:
    """The values of the tiling program's inputs for one call (see `evaluate`)."""
    vals = {}
    for name in prog.inputs:
        how = inputs_map[name]
        if isinstance(how, tuple) and how[0] == "longest_batch":
            vals[name] = longest_batch((host or {}).get(how[1]), as_dim(how[2]).evaluate(env), int(how[3]))
            continue
        if isinstance(how, tuple) and how[0] == "presence":
            vals[name] = int(present is not None and tuple(present) in how[1])
            continue
        if isinstance(how, tuple) and how[0] == "deterministic":
            vals[name] = int(bool(deterministic))
            continue
        if isinstance(how, tuple) and how[0] == "form_key":
            vals[name] = form_key(spec, forms)
            continue
        if isinstance(how, tuple) and how[0] == "bytes":
            vals[name] = dtypes[how[1]].itemsize if how[1] in dtypes else 4
        elif isinstance(how, tuple) and how[0] == "dtype_key":
            match = [k + 1 for k, r in enumerate(spec.dtype_rows) if all(r[v] == d for v, d in dtypes.items())]
            free = [c.name for c in spec.dtype_table if c.name not in dtypes]
            f32 = [k for k in match if all(spec.dtype_rows[k - 1][v] == DType.f32 for v in free)]
            vals[name] = (f32 or match or [0])[0]  # a free variable prefers float32, like the interpreter
        elif isinstance(how, tuple) and how[0] == "platform":
            vals[name] = {"coreNum": platform.aiv, "aicNum": platform.aic, "ubBytes": platform.ub_bytes}[how[1]]
        elif isinstance(how, tuple) and how[0] == "attr_key":
            vals[name] = attr_key(spec, attrs or {})
        elif isinstance(how, tuple) and how[0] == "attr_bits":
            vals[name] = float_bits(_attr_value(spec, how[1], attrs))
        elif isinstance(how, tuple) and how[0] == "attr_int_bits":
            vals[name] = int_float_bits(_attr_value(spec, how[1], attrs))
        elif isinstance(how, tuple) and how[0] == "attr_dim":
            vals[name] = int(env[how[2]])  # the dim the integer attribute binds (spec.attr(..., dim=...))
        elif isinstance(how, tuple) and how[0] == "by_attr_key":
            ak = attr_key(spec, attrs or {})
            vals[name] = as_dim(dict(how[1])[ak]).evaluate(env)
        else:
            vals[name] = as_dim(how).evaluate(env)
    return vals


TILING_HOST_CHECKS = ("cumulative_ends",)
"""The value-check factories (opgen.dsl.checks, by host_rule) whose rule the emitted TilingFunc also enforces on
the host arrays it reads (ValueDepend): graph mode calls the TilingFunc without the aclnn layer in front of it
(docs/design.md "Value checks on host arrays"). opgen.codegen.tilingfiles prints each one's C++."""


def tiling_host_checks(spec) -> list:
    """The spec's value requirements (`spec.check(name, fn, on="values")`) the TilingFunc enforces: those built by a
    factory in TILING_HOST_CHECKS, in spec order. Others (device data, unknown rules) stay with the aclnn layer and
    the kernel."""
    return [r for r in spec.requirements if r.kind == "values" and not r.kernel
            and (host_rule(r.fn) or ("",))[0] in TILING_HOST_CHECKS]


def longest_batch(ends, whole: int, block: int = 1) -> int:
    """The most tokens one batch holds, in blocks of `block` (rounded up), from the int cumulative batch ends `ends`
    (batch k holds tokens ends[k - 1] .. ends[k] - 1, the first from 0; opgen.dsl.checks.cumulative_ends); `whole`
    (the token count, which bounds it) when `ends` is None or empty: the emitted LongestBatch's Python twin.
    0 when an end falls below the one before it (or below 0) or past `whole`: no batch can be sized from such ends,
    and the tiling's domain check (at least 1) refuses the 0 even for a spec without a cumulative_ends check."""
    longest, start = whole, 0
    if ends is not None and len(ends):
        longest = 0
        for e in (int(x) for x in ends):
            if e < start or e > whole:
                return 0
            longest, start = max(longest, e - start), e
    return -(-longest // block)


def _bounds(spec, e):
    """(lower, upper or None) of a dim expression from the spec's dim domains (absent-able dims from 0)."""
    e = as_dim(e)
    if isinstance(e, Lit):
        return e.value, e.value
    if isinstance(e, Sym):
        d = spec.dims_[e.name]
        return (0 if d.absent is not None else d.min), d.max
    if isinstance(e, Prod):
        return 1, None
    if isinstance(e, Bin) and e.op in ("+", "*"):
        (a, b), (c, d) = _bounds(spec, e.lhs), _bounds(spec, e.rhs)
        hi = None if b is None or d is None else (b + d if e.op == "+" else b * d)
        return (a + c if e.op == "+" else a * c), hi
    return 0, None


def dim_bounds(spec, prog, inputs_map) -> list[tuple[str, int, int | None]]:
    """(program input, lower, upper or None) for every input read from a dim: the emitted TilingFunc fails
    outside them, and so does `evaluate` (zero or negative dims would divide by zero or wrap in C++)."""
    out = []
    for name in prog.inputs:
        how = inputs_map[name]
        if not isinstance(how, tuple):
            lo, hi = _bounds(spec, how)
            out.append((name, lo, hi))
        elif how[0] == "attr_dim":
            lo, hi = _bounds(spec, Sym(how[2]))
            out.append((name, lo, hi))
        elif how[0] == "longest_batch":   # at most the whole token dim (its upper bound, in blocks)
            _lo, hi = _bounds(spec, how[2])
            out.append((name, 1, None if hi is None else -(-hi // int(how[3]))))
        elif how[0] == "form_key":   # a negative key: a shape agreeing with none of its forms (form_key_cpp)
            out.append((name, 0, form_key_count(spec) - 1))
        elif how[0] == "by_attr_key":   # the widest range over the specialisations' expressions
            rng = [_bounds(spec, e) for _ak, e in how[1]]
            his = [h for _l, h in rng]
            out.append((name, min(lo for lo, _h in rng), None if None in his else max(his)))
    return out


def input_label(inputs_map: dict, name: str) -> str:
    """How a message names tiling input `name`: the dim expression it is read from in the spec's words (`N`,
    `N * prod(Bd)`), the dim an attribute equals, else the input's own name (`rows`)."""
    how = inputs_map.get(name)
    if isinstance(how, DimExpr):
        return str(how)
    if isinstance(how, tuple) and how and how[0] == "attr_dim":
        return str(how[2])
    if isinstance(how, tuple) and how and how[0] == "form_key":
        return "the form key of the inputs' shape forms (negative: a shape matching none of its forms)"
    return name


def by_attr_key_cpp(spec, picks) -> str:
    """C++ of a ("by_attr_key", ((attrKey, dim expression), ...)) tiling input: the expression of the
    specialisation whose attrKey the call has (the last one for any other key: the TilingFunc has refused a value
    outside the choices before)."""
    key = attr_key_cpp(spec)
    out = dim_cpp(spec, picks[-1][1])
    for ak, e in reversed(picks[:-1]):
        out = f"(({key}) == {ak} ? {dim_cpp(spec, e)} : {out})"
    return out


def presence_cpp(spec, presences: tuple) -> str:
    """C++ (int64_t) of a ("presence", presences) tiling input in the TilingFunc: 1 when the call's optional inputs
    are present as one of `presences` (each one bool per optional input, spec order: null or not, as the kernel's
    hasInput<k>_ reads the pointer), else 0."""
    opts = [i for i in spec.inputs if i.optional]
    terms = [" && ".join(f"{i.name}ShapeOpt {'!=' if p else '=='} nullptr" for i, p in zip(opts, pr)) or "true"
             for pr in presences]
    return f"(({' || '.join(f'({t})' for t in terms) or 'false'}) ? 1 : 0)"


def form_key_cpp(spec) -> str:
    """C++ (int64_t) of opgen.dsl.keys.form_key in the TilingFunc: per free-form input, the index of the first of
    its shape forms its shape agrees with (rank, every entry that is not a variadic group equal to its dim's
    value as the TilingFunc reads it, a variadic group's entries equal to the group's source input's), 0 for an
    absent optional input; summed mixed-radix, first input fastest.
    A shape agreeing with none of its forms (graph mode reaches the TilingFunc without the aclnn layer's shape
    checks) makes the whole key negative (that input counts -(product of every input's form count)), which the
    TilingFunc refuses (dim_bounds: [0, count - 1]). The first agreeing form is the one the interpreter picks
    (opgen.dsl.validate binds forms in order) (docs/design.md "Shape forms at run time")."""
    terms, radix = [], 1
    total = form_key_count(spec)
    for i in free_form_inputs(spec):
        ref = shape_ref(i)
        conds = [_form_match_cpp(spec, shape, ref) for shape in i.shapes]
        idx = str(-total)
        for k in range(len(i.shapes) - 1, -1, -1):
            idx = f"({conds[k]} ? {k} : {idx})"
        if i.optional:
            idx = f"({i.name}ShapeOpt != nullptr ? {idx} : 0)"
        terms.append(idx if radix == 1 else f"{idx} * {radix}")
        radix *= len(i.shapes)
    return " + ".join(terms) or "0"


def rank_cond_cpp(rank: str, lo: int, hi: int | None) -> str:
    """C++ condition, parenthesised: rank `rank` (a size_t expression such as `xShape.GetDimNum()`) lies in [lo, hi]
    (hi None: no upper bound; lo 0 is not tested, a size_t is never negative). The one printer of a rank test: the
    InferShape's form choice (opgen.codegen.infershape), the TilingFunc's rank check (opgen.codegen.tilingfiles,
    negated) and the form key (`_form_match_cpp`) (docs/design.md "Host-side checks")."""
    if hi == lo:
        return f"({rank} == {lo})"
    parts = ([f"{rank} >= {lo}"] if lo > 0 else []) + ([f"{rank} <= {hi}"] if hi is not None else [])
    return "(" + (" && ".join(parts) or "true") + ")"


def _form_match_cpp(spec, shape, ref: str) -> str:
    """C++ condition: gert::Shape `ref` agrees with spec shape form `shape` (rank; entries other than a variadic
    group equal to their dims' values; a group's rank within its declared bounds and its entries equal to the
    group as the TilingFunc reads it, from its source input (SameGroup, templates/op_host/_same_dim.j2; an absent
    optional source is not compared))."""
    vpos = next((k for k, d in enumerate(shape) if isinstance(d, Variadic)), None)
    fixed = len(shape) - (vpos is not None)
    if vpos is None:
        out = [rank_cond_cpp(f"{ref}.GetDimNum()", fixed, fixed)]
    else:
        decl = spec.variadics.get(shape[vpos].name)
        out = [rank_cond_cpp(f"{ref}.GetDimNum()", fixed + (decl.min_rank if decl is not None else 0),
                             fixed + decl.max_rank if decl is not None else None)]
    for k, d in enumerate(shape):
        if isinstance(d, Variadic):
            continue
        at = f"{ref}.GetDim({k})" if vpos is None or k < vpos else f"{ref}.GetDim({ref}.GetDimNum() - {len(shape) - k})"
        out.append(f"{at} == {dim_cpp(spec, as_dim(d))}")
    src = group_location(spec, shape[vpos].name) if vpos is not None else None
    if src is not None:   # the group's entries equal the group as the TilingFunc reads it (its source input)
        s = spec.inputs[src.index]
        begin, after = src.bounds(lambda attr, exprs: pick_form_cpp(spec, attr, exprs))
        same = (f'SameGroup(nullptr, "", "", {shape_ref(s)}, {begin}, {after}, "", {ref}, {vpos}, '
                f'{len(shape) - vpos - 1})')
        out.append(f"({s.name}ShapeOpt == nullptr || {same})" if s.optional else same)
    return "(" + " && ".join(out) + ")"
