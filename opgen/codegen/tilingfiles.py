"""The tiling files of a spec (op_kernel/<op>_tiling_data.h, op_host/<op>_tiling.cpp), printed from its tiling
program and how the program's inputs are read (opgen.tiling.emit; docs/reference/ascendc.md §2.4 struct-style
tiling data, §2.5 TilingFunc). The struct lives in op_kernel/ and the host includes it as
../op_kernel/<op>_tiling_data.h: the kernel build copies only op_kernel/* (docs/reference/ops_package.md §2.3, §3).
"""

from __future__ import annotations

import re

from opgen.codegen.env import template_env
from opgen.codegen.infershape import rank_bounds, same_dim_places, same_group_places
from opgen.dsl.checks import host_rule
from opgen.dsl.dimsource import attr_dim_min
from opgen.errors import SpecError
from opgen.ir.dims import shape_str
from opgen.ir.dtypes import DTypeVar
from opgen.names import spec_path
from opgen.tiling.pipeline import kernel_build
from opgen.names import c_printf, c_string, cpp_name
from opgen.tiling.emit import (attr_key_cpp, by_attr_key_cpp, dim_bounds, dim_cpp, exact_products, float_bits,
                               form_cond_cpp, form_key_cpp, input_label, pick_form_cpp, presence_cpp, rank_cond_cpp,
                               shape_ref, tiling_host_checks)
from opgen.ir.dims import Sym
from opgen.dsl.keys import LIST_INT


def emit_tiling(spec, prog, inputs_map: dict, doc: str, fits_fail: str = "") -> dict[str, str]:
    """{path: text} of op_kernel/<op>_tiling_data.h and op_host/<op>_tiling.cpp for `spec` with tiling program `prog`;
    `inputs_map`: {program input name: dim expression | ("bytes", var) | ("dtype_key",) |
    ("platform", "coreNum"|"aicNum"|"ubBytes") | ("attr_key",) | ("attr_bits", float attr) |
    ("attr_dim", int attr, dim) | ("deterministic",) | ("by_attr_key", ((attrKey, dim expression), ...)) |
    ("form_key",) | ("presence", ((bool per optional input, ...), ...)) | ("longest_batch", host input, dim
    expression, block)}; `doc`: one line naming the strategy and its reference.

    ("longest_batch", cu, whole, block) is the longest batch of host array `cu`'s cumulative ends (OpDef ValueDepend:
    TilingFunc reads its values from the input tensor, as CANN's FlashAttentionScore tiling reads actualSeqQLen) in
    blocks of `block` (rounded up); `whole` (the token dim, which bounds it) when the tensor carries no values. The
    Python twin takes the arrays as `evaluate(..., host=)`.

    ("attr_dim", attr, dim) reads an integer attribute that binds a spec dim (spec.attr(..., dim=BS)): the
    C++ reads the attribute (its default when absent), the Python twin takes the dim's value, and both
    fail outside the dim's [min, max] like a dim read from a shape. ("deterministic",) is the framework's
    deterministic-computation flag: TilingContext::GetDeterministic() when the context has it (CANN's does, and so
    does opgen's host stub, set by `opgen check --deterministic`), else 0; the Python twin takes it as
    `evaluate(..., deterministic=)`. ("presence", presences) is 1 when the call's optional inputs are present as one
    of `presences` (their shape pointers null or not), else 0; the Python twin takes `evaluate(..., present=)`."""
    op = spec.stem
    reads = []
    for name in prog.inputs:
        how = inputs_map[name]
        if isinstance(how, tuple) and how[0] == "bytes":
            reads.append((name, f"DTypeBytes({_first_desc(spec, how[1])})"))
        elif isinstance(how, tuple) and how[0] == "dtype_key":
            reads.append((name, "DTypeKey(" + ", ".join(_first_desc(spec, c.name) for c in spec.dtype_table) + ")"))
        elif isinstance(how, tuple) and how[0] == "platform":
            reads.append((name, {"coreNum": "static_cast<int64_t>(compileInfo->coreNum)",
                                 "aicNum": "static_cast<int64_t>(compileInfo->aicNum)",
                                 "ubBytes": "static_cast<int64_t>(compileInfo->ubSize)"}[how[1]]))
        elif isinstance(how, tuple) and how[0] == "attr_key":
            reads.append((name, attr_key_cpp(spec)))
        elif isinstance(how, tuple) and how[0] == "attr_bits":
            index = [a.name for a in spec.attrs].index(how[1])
            default = spec.attrs[index].default
            reads.append((name, f"AttrFloatBits(context, {index}, {float_bits(default)})"))
        elif isinstance(how, tuple) and how[0] == "attr_int_bits":
            index = [a.name for a in spec.attrs].index(how[1])
            default = spec.attrs[index].default
            reads.append((name, f"AttrIntFloatBits(context, {index}, {int(default) if default is not None else 0})"))
        elif isinstance(how, tuple) and how[0] == "deterministic":
            reads.append((name, "DeterministicOf(context, 0)"))
        elif isinstance(how, tuple) and how[0] == "form_key":
            reads.append((name, form_key_cpp(spec)))
        elif isinstance(how, tuple) and how[0] == "presence":
            reads.append((name, presence_cpp(spec, how[1])))
        elif isinstance(how, tuple) and how[0] == "by_attr_key":
            reads.append((name, by_attr_key_cpp(spec, how[1])))
        elif isinstance(how, tuple) and how[0] == "longest_batch":
            index = [i.name for i in spec.inputs].index(how[1])
            get = "GetOptionalInputTensor" if spec.inputs[index].optional else "GetRequiredInputTensor"
            reads.append((name, f"LongestBatch(context->{get}({index}), {dim_cpp(spec, how[2])}, {int(how[3])})"))
        elif isinstance(how, tuple) and how[0] == "attr_dim":
            index = [a.name for a in spec.attrs].index(how[1])
            default = spec.attrs[index].default
            reads.append((name, f"AttrInt(context, {index}, {int(default) if default is not None else 0})"))
        else:
            reads.append((name, dim_cpp(spec, how)))
    rows = [[c.cann for c in (r[v.name] for v in spec.dtype_table)] for r in spec.dtype_rows]
    reads, descs = _desc_vars(spec, reads)
    consts = {n: int(e) for n, e in reads if re.fullmatch(r"-?\d+", e.strip())}   # inputs the spec fixes
    equal = _equal_dims(spec)
    equal_reads = [("", p["extent"]) for e in equal for p in e["places"]]
    groups = _equal_groups(spec)
    equal_reads += [("", f"{g['check']} {g['cond'] or ''}") for g in groups]
    exact = exact_products(spec)
    equal_reads += [("", c["cond"]) for c in exact]
    host_checks = _host_checks(spec)
    equal_reads += [("", h["call"]) for h in host_checks]   # the shapes the token dims are read from   # the shapes the exactness checks read are declared too
    env = template_env()
    storages = [_storage(spec, n, i, o) for n, i, o in _shape_refs(spec, reads + equal_reads)]
    # identifiers of the TilingFunc beside the program's statements, which a local the printer names
    # (TilingProgram.to_cpp: name_repeats) must not take: the template's own, the shape and desc locals, the reads'
    template = env.loader.get_source(env, "op_host/tiling.cpp.j2")[0]
    reserved = {*re.findall(r"[A-Za-z_]\w*", template), *(d["var"] for d in descs),
                *(f"{s['name']}{x}" for s in storages for x in ("Shape", "Storage", "ShapeOpt")),
                *(w for _n, e in reads + equal_reads for w in re.findall(r"[A-Za-z_]\w*", e))}
    ctx = {
        "op": spec.name, "op_snake": op, "struct": f"{spec.name}TilingData", "spec_file": spec_path(spec),
        "guard": f"{op.upper()}_TILING_DATA_H_",
        "fields": [(n, doc) for n, _, doc in prog.stmts if n in prog.fields],
        "inputs": [(n, expr, prog.inputs[n]) for n, expr in reads],
        "storages": storages,
        "equal_dims": equal, "equal_groups": groups,
        "same_group": bool(groups) or any("SameGroup(" in e for _n, e in reads),
        "descs": descs, "has_attrs": bool(spec.attrs),
        "bounds": [_bound(n, lo, hi, input_label(inputs_map, n)) for n, lo, hi in dim_bounds(spec, prog, inputs_map)
                   if not _holds(consts.get(n), lo, hi)],
        "attr_check": consts.get("attrKey") is None or consts["attrKey"] < 0,
        "dtype_fail": c_printf(f"the dtype combination of {spec.name}'s tensors is not one of its supported rows"),
        "attr_fail": c_printf(f"a static attribute of {spec.name} is absent or not one of its allowed values"),
        "fits_fail": c_printf((fits_fail or "no UB plan of {op} holds this shape").replace("{op}", spec.name)),
        "platform_fail": c_printf("the platform reports no AIV core or no UB"),
        "uses_aic": any(how == ("platform", "aicNum") for how in inputs_map.values()),
        "statements": prog.to_cpp(indent="    ", reserved=reserved),
        "dtype_rows": rows, "n_vars": len(spec.dtype_table),
        "source": doc,
        "attr_int": any(isinstance(h, tuple) and h[0] in ("attr_dim", "attr_int_bits") for h in inputs_map.values())
        or any("AttrInt(" in e for _n, e in reads),
        "attr_int_float": any(isinstance(h, tuple) and h[0] == "attr_int_bits" for h in inputs_map.values()),
        "deterministic": any(isinstance(h, tuple) and h[0] == "deterministic" for h in inputs_map.values()),
        "longest_batch": any(isinstance(h, tuple) and h[0] == "longest_batch" for h in inputs_map.values()),
        "attr_list": any(a.type is LIST_INT for a in spec.static_attrs),
        "attr_str": any(a.type is str and len(a.choices) > 1 for a in spec.static_attrs),
        "dim_attrs": _dim_attrs(spec, reads),
        "exact_products": exact,
        "host_checks": host_checks,
        "cumulative_ends": any(h["kind"] == "cumulative_ends" for h in host_checks),
    }
    return {
        f"op_kernel/{op}_tiling_data.h": env.get_template("op_kernel/tiling_data.h.j2").render(**ctx),
        f"op_host/{op}_tiling.cpp": env.get_template("op_host/tiling.cpp.j2").render(**ctx),
    }


def _host_checks(spec) -> list[dict]:
    """Template data of the value checks on host arrays the TilingFunc enforces (opgen.tiling.emit.tiling_host_checks:
    the same rules as the aclnn layer's, since graph mode calls the TilingFunc without that layer): per check its
    kind, the C++ call that holds (filling `hostFault` with the broken rule when not) and the message naming the input.
    docs/design.md "Value checks on host arrays"."""
    out = []
    for r in tiling_host_checks(spec):
        kind, args = host_rule(r.fn)
        out.append(_TILING_CHECK_CPP[kind](spec, **args))
    return out


def _cumulative_cpp(spec, name: str, total_dim: str) -> dict:
    """opgen.dsl.checks.cumulative_ends(name, total_dim) in the TilingFunc: the template's CumulativeEnds helper on
    input `name`'s tensor against the token dim `total_dim` read from its shape."""
    index = [i.name for i in spec.inputs].index(name)
    get = "GetOptionalInputTensor" if spec.inputs[index].optional else "GetRequiredInputTensor"
    return {"kind": "cumulative_ends",
            "call": f"CumulativeEnds(hostFault, context->{get}({index}), {dim_cpp(spec, Sym(total_dim))}, "
                    f"{c_string(total_dim)})",
            "fmt": c_printf(f"{name}: ", "%s")}


_TILING_CHECK_CPP = {"cumulative_ends": _cumulative_cpp}
"""Factory (opgen.tiling.emit.TILING_HOST_CHECKS) -> fn(spec, **the factory's arguments) -> template data."""


def _equal_dims(spec) -> list[dict]:
    """A dim two inputs carry must be equal in both (infershape.same_dim_places): graph mode calls the TilingFunc
    without the aclnn layer's cross-input checks, and a kernel tiled from one input's extent would read past the
    other's."""
    def access(k):
        i = spec.inputs[k]
        return f"{i.name}ShapeOpt->GetStorageShape()." if i.optional else f"{i.name}Shape."

    return same_dim_places(spec, access, lambda k: f"{spec.inputs[k].name}ShapeOpt != nullptr")


def _equal_groups(spec) -> list[dict]:
    """A variadic group (Bd) every input holding it carries must equal the group as the TilingFunc reads it
    (infershape.same_group_places, in the TilingFunc's words): graph mode calls the TilingFunc without the aclnn
    layer's cross-input checks, and a kernel tiled from the source's rows would read past a shorter input."""
    return same_group_places(spec, lambda k: shape_ref(spec.inputs[k]),
                             lambda k: f"{shape_ref(spec.inputs[k])}.GetDimNum()",
                             lambda k: f"{spec.inputs[k].name}ShapeOpt != nullptr",
                             lambda attr, exprs: pick_form_cpp(spec, attr, exprs),
                             lambda attr, k: form_cond_cpp(spec, attr, k))


def _dim_attrs(spec, reads) -> list[dict]:
    """The integer attributes binding a dim that the tiling reads (AttrInt(context, k, ...)), with the dim's
    minimum (at least 1): checked before any tiling input is computed, since a dim may divide another (C // G) and
    graph mode calls the TilingFunc without the aclnn layer's checks in front of it. A missing required attribute
    reads as 0 and fails the check."""
    out = []
    for k, a in enumerate(spec.attrs):
        if a.dim is None or not any(f"AttrInt(context, {k}," in e for _n, e in reads):
            continue
        lo = attr_dim_min(spec, a)
        default = int(a.default) if a.default is not None else 0
        out.append({"read": f"AttrInt(context, {k}, {default})", "min": lo,
                    "fail": c_printf(f"{a.name}: ", "%lld", f" is not a valid {a.dim.name} (at least {lo}), or the "
                                     f"attribute is absent")})
    return out


def _holds(value, lo: int, hi) -> bool:
    """True when a tiling input the spec fixes (`value`, None when read at run time) lies in [lo, hi]: its domain
    check would be a constant test, so it is not emitted."""
    return value is not None and value >= lo and (hi is None or value <= hi)


def _bound(name: str, lo: int, hi, label: str | None = None) -> dict:
    """Template data of one domain check of a tiling input read from a shape or an attribute: the failing condition
    and its message (`name` is a C++ identifier of the tiling program, `label` how the message names it -- the dim
    expression it is read from, opgen.tiling.emit.input_label; lo/hi in elements, hi None: unbounded)."""
    var = cpp_name(name)   # the local's C++ spelling (opgen.names.cpp_name); the message keeps the spec's
    name = label or name
    if hi is not None and lo == hi:
        cond, rule = f"{var} != {lo}", f"must be {lo}"
    elif hi is None:
        cond, rule = f"{var} < {lo}", f"must be >= {lo}"
    else:
        cond, rule = f"{var} < {lo} || {var} > {hi}", f"must be in [{lo}, {hi}]"
    return {"name": var, "cond": cond, "fmt": c_printf(f"{name}=", "%ld", f" is outside the spec's domain: {rule}")}


def _storage(spec, name: str, idx: int, optional: bool) -> dict:
    """Template data of one input shape the TilingFunc reads (`name` the spec input, `idx` its IR index): its rank
    check, the failing condition on the local `<name>Shape` and its message, from the spec's shape forms
    (opgen.codegen.infershape.rank_bounds; docs/design.md "Host-side checks"). The check runs before any GetDim."""
    var = name   # the locals opgen.tiling.emit.dim_cpp reads: <input>Shape, <input>ShapeOpt
    lo, hi = rank_bounds(spec.inputs[idx].shapes, spec.variadics)
    dims = f"{var}Shape.GetDimNum()" if not optional else f"{var}ShapeOpt->GetStorageShape().GetDimNum()"
    cond = f"!{rank_cond_cpp(dims, lo, hi)}"
    if optional:
        cond = f"{var}ShapeOpt != nullptr && {cond}"
    rule = f"at least {lo}" if hi is None else (f"{lo}" if lo == hi else f"in [{lo}, {hi}]")
    shapes = " or ".join(shape_str(s) for s in spec.inputs[idx].shapes)
    return {"name": name, "idx": idx, "optional": optional, "getter": _required_getter(spec, idx, "Shape"),
            "rank_cond": cond, "rank_dims": dims,
            "rank_fail": c_printf(f"{name}: rank ", "%zu", f", expected {rule} for {shapes}")}


def _required_getter(spec, idx: int, kind: str) -> str:
    """The context accessor of required input `idx` (kind "Shape" or "Desc"): GetInput<kind>, whose index is the
    compute node's (absent optional inputs skipped), while no optional input comes before it, so that its IR index
    is its compute-node index; GetRequiredInput<kind> (the IR index) after one (opgen/emu/include/HOST.md)."""
    before = any(q.optional for q in spec.inputs[:idx])
    return f"GetRequiredInput{kind}" if before else f"GetInput{kind}"


def _desc_vars(spec, reads):
    """(reads with every required tensor desc taken from a local, [{var, getter, idx}] of those locals): the
    TilingFunc null-checks a desc before it reads its dtype (optional ones are already tested for null)."""
    names = {}
    for idx, i in enumerate(spec.inputs):
        names[f"context->GetInputDesc({idx})->"] = (f"{i.name}Desc", _required_getter(spec, idx, "Desc"), idx)
    for idx, o in enumerate(spec.outputs):
        names[f"context->GetOutputDesc({idx})->"] = (f"{o.name}OutDesc", "GetOutputDesc", idx)
    used, out = {}, []
    for name, expr in reads:
        for key, (var, getter, idx) in names.items():
            if key in expr:
                expr = expr.replace(key, f"{var}->")
                used.setdefault(var, {"var": var, "getter": getter, "idx": idx})
        out.append((name, expr))
    return out, list(used.values())


def _first_desc(spec, var):
    """C++ ge::DataType of dtype variable `var`: the first required input typed by it, else the optional
    inputs in order, falling back to the first required output, else DT_UNDEFINED (matches any row)."""
    for idx, i in enumerate(spec.inputs):
        if not i.optional and isinstance(i.dtype, DTypeVar) and i.dtype.name == var:
            return f"context->GetInputDesc({idx})->GetDataType()"
    chain = [f"context->GetOptionalInputDesc({idx})" for idx, i in enumerate(spec.inputs)
             if i.optional and isinstance(i.dtype, DTypeVar) and i.dtype.name == var]
    outs = [f"context->GetOutputDesc({idx})" for idx, o in enumerate(spec.outputs)
            if not o.opdef_optional and isinstance(o.dtype, DTypeVar) and o.dtype.name == var]
    if not chain and not outs:
        raise SpecError(f"{spec.file}: dtype variable {var} has no tensor to read it from")
    # no required tensor: all optional ones absent leaves the variable free (any row matches)
    expr = f"{outs[0]}->GetDataType()" if outs else "ge::DT_UNDEFINED"
    for d in reversed(chain):
        expr = f"({d} != nullptr ? {d}->GetDataType() : {expr})"
    return expr


def _shape_refs(spec, reads) -> list[tuple[str, int, bool]]:
    """(input name, index, optional) of the inputs whose shapes the reads use, in spec order."""
    used = {name for _, expr in reads for name in re.findall(r"\b(\w+?)Shape(?:Opt)?\b", expr)}
    return [(i.name, idx, i.optional) for idx, i in enumerate(spec.inputs) if i.name in used]


def emit_tiling_files(spec) -> dict[str, str]:
    """The codegen emitter (opgen.codegen.EMITTERS): the tiling files of `spec` from its kernel build
    (opgen.tiling.pipeline.kernel_build: the family's tiling program, its inputs, proven to fit by the
    plan_buffers pass).

    Raises NoKernel (no family lowers the spec) or SpecError (UB overflow at the dim's declaration line)."""
    t = kernel_build(spec).tiling
    return emit_tiling(spec, t.program, t.inputs, t.doc, t.fits_fail)
