"""Emitter of the UT sources in CANN's style (docs/reference/ops_package.md §1: every real op directory has tests/ut with
op_host and op_kernel; §2.5: tests/ut/op_host is built by add_modules_ut_sources, tests/ut/op_kernel by
AddOpTestCase):

    tests/ut/op_host/test_<op>_tiling.cpp      gtest cases of the TilingFunc: the spec's example shapes in every
                                               dtype row (gert::TilingContextPara + ExecuteTiling of the repository's
                                               tests/ut common helpers); the tiling key's attrKey and dtypeKey digits,
                                               and the whole key when the example's strategy does not depend on the
                                               core count, are the ones opgen's tiling twin computes; a dtype outside
                                               the table fails
    tests/ut/op_host/test_<op>_infershape.cpp  gtest case of InferShape on the example: the output shapes of the spec
    tests/ut/op_host/op_api/test_aclnn_<op>.cpp
                                               gtest cases of <api>GetWorkspaceSize through the repository's op_api UT
                                               framework (OP_API_UT, TensorDesc): the example in every dtype row
                                               returns ACLNN_SUCCESS; each required tensor passed as null
                                               ACLNN_ERR_PARAM_NULLPTR; a dtype outside the table, a tensor of a fixed
                                               dtype given another and an output of the wrong shape
                                               ACLNN_ERR_PARAM_INVALID (docs/design.md "Emission":
                                               the codes the emitted checks return)
    tests/ut/op_kernel/test_<op>.cpp           gtest case running the kernel entry in the CPU-debug build (tikicpulib:
                                               GmAlloc, ICPU_SET_TILING_KEY, ICPU_RUN_KF) on the example's inputs with
                                               the tiling data the TilingFunc writes for it on the UT's SoC
    tests/ut/op_kernel/<op>_tiling_def.h (ops-nn) or <op>_tiling.h (ops-transformer)
                                               the header the kernel UT build force-includes: the tiling struct and
                                               GET_TILING_DATA_WITH_STRUCT for the CPU build

The values (shapes, dtypes, attribute values, tiling fields, keys, block dim, workspace) are computed here from the
spec: its example call (opgen.codegen.example.example_case) and the tiling program's Python twin
(opgen.tiling.emit.evaluate) on the platform of the UT's SoC (opgen.platforms). The sources cannot run without the
repositories' UT frameworks; opgen checks that they are well-formed, and runs the op_api UT against the emitted
aclnn layer in its host emulation with a stand-in of the framework (tests/test_op_api_ut.py).
"""

from __future__ import annotations

import dataclasses
import textwrap

import numpy as np

from opgen.codegen.env import render
from opgen.codegen.example import int_array_values
from opgen.codegen.model import ACL_DTYPE, OpModel, cpp_literal
from opgen.codegen.tilingkey import TilingKey
from opgen.dsl.examples import random_inputs
from opgen.dsl.keys import LIST_INT, form_key_count
from opgen.errors import OpgenError
from opgen.ir.dims import eval_shape
from opgen.ir.dtypes import DType, DTypeVar
from opgen.names import c_string, cpp_name
from opgen.platforms import get_platform
from opgen.tiling.emit import SYS_WORKSPACE_BYTES, attr_key, evaluate
from opgen.tiling.pipeline import kernel_build

# Platform (opgen/platforms/platforms.json) of the SoC a kernel UT runs as (opgen.codegen.layout.KERNEL_UT_SOC).
UT_PLATFORM = {"ascend910B1": "ascend910b1", "ascend950pr_9599": "ascend950"}
_ATTR_CTYPE = {int: "int64_t", float: "float", bool: "bool", str: "std::string", LIST_INT: "std::vector<int64_t>"}
_HOST_CTYPE = {DType.f32: "float", DType.f16: "half", DType.bf16: "bfloat16_t", DType.i32: "int32_t",
               DType.i64: "int64_t", DType.u8: "uint8_t", DType.bool: "uint8_t", DType.i8: "int8_t",
               DType.i16: "int16_t"}


def _shape_init(shape) -> str:
    dims = ", ".join(str(int(d)) for d in shape)
    return f"{{{{{dims}}}, {{{dims}}}}}"


def _attr_literal(v, t) -> str:
    if t is LIST_INT:   # ops-nn's UTs: AnyValue::CreateFrom<std::vector<int64_t>>(axis)
        return "std::vector<int64_t>{" + ", ".join(str(int(x)) for x in v) + "}"
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return str(int(v))
    if t is float:
        return f"{float(v)!r}f"
    return c_string(str(v))


def _float_literal(v: float) -> str:
    s = f"{float(v):.9g}"
    if not any(c in s for c in ".en"):
        s += ".0"
    return s + "f"


@dataclasses.dataclass
class UtCase:
    """The example call as the UTs need it: dtype row index (1-based), dtypes, attrs, input arrays (None: absent),
    outputs: {name: (shape or None, made)} (made: the caller passes a tensor for it), env, the shape forms
    (SpecKey.forms)."""

    row: int
    dtypes: dict
    attrs: dict
    inputs: dict
    outputs: dict
    env: dict
    forms: tuple = ()


def ut_cases(spec) -> list[UtCase]:
    """The spec's example call in every dtype-table row (same shapes and attributes). Raises SpecError when the
    example is not valid for the spec."""
    from opgen.codegen.example import example_case

    base = example_case(spec)
    out = []
    for r, row in enumerate(spec.dtype_rows or [{}], start=1):
        dtypes = {k: v.long_name for k, v in row.items()}
        inputs = base["inputs"] if r == 1 else random_inputs(spec, base["dims"], base["attrs"], dtypes, seed=0)
        inputs = {i.name: (inputs.get(i.name) if base["inputs"].get(i.name) is not None else None)
                  for i in spec.inputs}
        bound = spec.bind(inputs, base["attrs"], dtypes)
        graph = spec.graph(bound.key)
        produced = {name for name, _ in graph.outputs}
        outputs = {}
        for o in spec.outputs:
            if o.like:
                src = inputs.get(o.like)
                outputs[o.name] = None if src is None else tuple(np.shape(src))
            else:
                outputs[o.name] = tuple(eval_shape(o.shape_for(spec.static_values(bound.key)), bound.env))
            # made: the caller passes a tensor (the body writes it, or the OpDef declares it REQUIRED though this
            # specialisation leaves it unwritten: OutputDecl.opdef_optional)
            outputs[o.name] = (outputs[o.name], o.name in produced or not o.opdef_optional)
        out.append(UtCase(r, dtypes, bound.attrs, inputs, outputs, bound.env, tuple(bound.key.forms)))
    return out


def _twin(spec, case: UtCase, platform) -> dict:
    """The tiling program's values for `case` on `platform` (what the TilingFunc writes)."""

    t = kernel_build(spec).tiling
    dtypes = {k: next(d for d in DType if d.long_name == v) for k, v in case.dtypes.items()}
    present = tuple(case.inputs.get(i.name) is not None for i in spec.inputs if i.optional)
    return evaluate(spec, t.program, t.inputs, case.env, dtypes, platform, case.attrs, forms=case.forms,
                    present=present)


def _tiling_key(spec, value: int) -> TilingKey:
    """The TilingKey whose value is `value` (opgen.codegen.tilingkey: (attrKey * forms + formKey) * 100 + dtypeKey *
    10 + strategy; the form key a digit only where the family's lowering says the inputs' shape forms select the
    class, lowered.extra["form_key"], as opgen.check.run reads it), so that its macro is one the tiling-key header
    defines."""
    forms = form_key_count(spec) if kernel_build(spec).lowered.extra.get("form_key") else 1
    high = value // 100
    return TilingKey(high // forms, value // 10 % 10, value % 10, "", high % forms if forms > 1 else None, forms)


def ut_context(spec) -> dict:
    """Template data of the UT sources."""
    from opgen.codegen.layout import kernel_ut_soc, repository

    m = OpModel(spec)
    repo = repository(spec)
    ut_soc = kernel_ut_soc(spec)
    platform = get_platform(UT_PLATFORM[ut_soc])
    cases = ut_cases(spec)
    ak = attr_key(spec, cases[0].attrs)

    def tensor_desc(name, shape, dt, row):
        d = row[dt.name] if isinstance(dt, DTypeVar) else dt
        return {"name": name, "shape": _shape_init(shape), "dtype": f"ge::{d.cann}"}

    attrs = [{"name": a.name, "ctype": _ATTR_CTYPE[a.type], "value": _attr_literal(cases[0].attrs[a.name], a.type)}
             for a in spec.attrs]
    ut_soc_version = {"ascend910B1": "Ascend910B", "ascend950pr_9599": "Ascend950"}[ut_soc]

    def para_lists(c, row, input_dtype=None):
        """(input descriptions, output descriptions, the constructor's trailing arguments) in the repository's
        convention for absent optional inputs (Repository.absent_as_placeholder)."""
        ins = []
        for i in spec.inputs:
            if c.inputs[i.name] is None:
                if repo.absent_as_placeholder:
                    d = tensor_desc(i.name, (), i.dtype, row)
                    d["shape"], d["name"] = "{{}, {}}", f"{i.name} (absent)"
                    ins.append(d)
                continue
            d = tensor_desc(i.name, np.shape(c.inputs[i.name]), i.dtype, row)
            if input_dtype and isinstance(i.dtype, DTypeVar):
                d["dtype"] = input_dtype
            ins.append(d)
        outs = [tensor_desc(o.name, shp, o.dtype, row) for o in spec.outputs
                for shp, _made in [c.outputs[o.name]] if shp is not None]
        inst_in = ", ".join("0" if c.inputs[i.name] is None else "1" for i in spec.inputs)
        inst_out = ", ".join("1" for _o in outs)
        if repo.absent_as_placeholder:
            tiling_tail = f'Attrs(), &compileInfo, "{ut_soc_version}", CORE_NUM, UB_SIZE'
            infer_tail = "Attrs()"
        else:
            tiling_tail = f"Attrs(), {{{inst_in}}}, {{{inst_out}}}, &compileInfo, CORE_NUM, UB_SIZE"
            infer_tail = f"Attrs(), {{{inst_in}}}, {{{inst_out}}}"
        return ins, outs, tiling_tail, infer_tail

    tiling_cases = []
    for c in cases:
        row = spec.dtype_rows[c.row - 1] if spec.dtype_rows else {}
        ins, outs, tail, infer_tail = para_lists(c, row)
        keys = set()
        for cores in (platform.aiv // 2, platform.aiv, platform.aiv * 2):
            keys.add(int(_twin(spec, c, dataclasses.replace(platform, aiv=cores))["tilingKey"]))
        key = int(_twin(spec, c, platform)["tilingKey"])
        tk = _tiling_key(spec, key)
        tiling_cases.append({
            "name": "_".join(["example"] + [v for v in c.dtypes.values()]) if c.dtypes else "example",
            "row": c.row, "inputs": ins, "outputs": outs, "tail": tail, "infer_tail": infer_tail,
            "attr_key": key // 100, "dtype_key": tk.dtype_key, "exact": len(keys) == 1, "forms": tk.forms,
            "macro": tk.macro(spec), "combo": ", ".join(f"{k}={v}" for k, v in c.dtypes.items())
            or "fixed dtypes"})
    # a dtype outside the table: every tensor typed by a dtype variable as int32 (no row has it)
    bad = None
    if spec.dtype_table:
        ins, outs, tail, _t = para_lists(cases[0], spec.dtype_rows[0], input_dtype="ge::DT_INT32")
        bad = {"inputs": ins, "outputs": outs, "tail": tail}
    # infershape: the first row's outputs
    c0 = cases[0]
    infer_outputs = []
    for o in spec.outputs:
        shp, _made = c0.outputs[o.name]
        if shp is None:
            break
        infer_outputs.append({"name": o.name, "dims": ", ".join(str(int(x)) for x in shp)})
    # kernel UT: the first row on the UT's platform
    twin = _twin(spec, c0, platform)
    prog = kernel_build(spec).tiling.program
    fields = [(f, int(twin[f])) for f in prog.fields]
    row0 = spec.dtype_rows[0] if spec.dtype_rows else {}
    buffers = []
    for i in spec.inputs:
        arr = c0.inputs[i.name]
        dt = row0[i.dtype.name] if isinstance(i.dtype, DTypeVar) else i.dtype
        if arr is None:
            buffers.append({"name": cpp_name(i.name), "absent": True, "alias": False})
            continue
        vals = np.asarray(arr)
        if dt.is_float:
            data = ", ".join(_float_literal(v) for v in vals.astype(np.float32).ravel())
        else:
            data = ", ".join(str(int(v)) for v in vals.astype(np.int64).ravel())
        buffers.append({"name": cpp_name(i.name), "absent": False, "ctype": _HOST_CTYPE[dt], "count": int(vals.size),
                        "data": data or "0", "src": "float" if dt.is_float else _HOST_CTYPE[dt],
                        "input": True, "alias": False})
    for o in spec.outputs:
        shp, _made = c0.outputs[o.name]
        dt = row0[o.dtype.name] if isinstance(o.dtype, DTypeVar) else o.dtype
        if o.ref is not None:   # written in place (OpSpec.output(ref=)): the kernel gets the input's buffer
            buffers.append({"name": cpp_name(o.ref), "absent": False, "input": False, "alias": True})
            continue
        if shp is None:
            buffers.append({"name": cpp_name(o.name), "absent": True, "alias": False})
            continue
        buffers.append({"name": cpp_name(o.name), "absent": False, "ctype": _HOST_CTYPE[dt], "input": False,
                        "count": int(np.prod(shp, dtype=np.int64)), "alias": False})
    u = kernel_build(spec)
    kt = u.family.entry_kernel_type(u.lowered)
    kinds = {kt} if kt else \
        {k.kernel_type for g in u.graphs.values() for k in g.graph["plan"].kernels}
    mix = any("MIX" in k for k in kinds)
    ktk = _tiling_key(spec, int(twin["tilingKey"]))
    dims = ", ".join(f"{k}={list(v) if isinstance(v, tuple) else v}" for k, v in c0.env.items())
    kernel_intro = textwrap.wrap(
        f"Kernel UT of {m.op}: the kernel entry in the CPU-debug build ({ut_soc}) on the spec's example ({dims}; "
        f"{tiling_cases[0]['combo']}), with the tiling data the TilingFunc writes for it on {platform.name} "
        f"(blockDim {int(twin['blockDim'])}, tiling key {ktk.macro(spec)}).", width=110,
        break_on_hyphens=False)
    return {
        "kernel_intro": kernel_intro,
        "banner": m.banner(), "op": m.op, "op_snake": m.snake, "api_snake": m.api_snake, "entry": m.entry, "struct": f"optiling::{m.op}TilingData",
        "any_value": repo.any_value, "attrs": attrs, "tiling_cases": tiling_cases, "bad": bad,
        "attr_key": ak, "infer_outputs": infer_outputs, "infer_case": tiling_cases[0],
        "core_num": platform.aiv, "ub_size": platform.ub_bytes, "sys_workspace": SYS_WORKSPACE_BYTES, "ut_soc": ut_soc, "platform": platform.name,
        "fields": fields, "block_dim": int(twin["blockDim"]),
        "workspace": int(twin["workspaceBytes"]) + SYS_WORKSPACE_BYTES, "buffers": buffers,
        "kernel_mode": ("KernelMode::AIC_MODE" if kinds == {"KERNEL_TYPE_AIC_ONLY"} else "KernelMode::MIX_MODE" if mix
                        else "KernelMode::AIV_MODE"),
        "kernel_key": ktk.macro(spec), "tiling_header": repo.kernel_ut_tiling_header.format(op=m.snake),
        "guard": f"{m.snake.upper()}_UT_TILING_DEF_H_", "combo": tiling_cases[0]["combo"],
        "dims": ", ".join(f"{k}={list(v) if isinstance(v, tuple) else v}" for k, v in c0.env.items()),
    }


# Dtypes tried, in order, for "a dtype outside the table" (the first one the tensor's column lacks).
_FOREIGN_DTYPES = (DType.i16, DType.i8, DType.u8, DType.i32, DType.i64, DType.f16, DType.f32, DType.bf16, DType.bool)


def _int_vector(values) -> str:
    return "vector<int64_t>{" + ", ".join(str(int(v)) for v in values) + "}"


def _tensor_desc(shape, dt) -> str:
    return f"TensorDesc({{{', '.join(str(int(d)) for d in shape)}}}, {ACL_DTYPE[dt]}, ACL_FORMAT_ND)"


def op_api_context(spec) -> dict:
    """Template data of tests/ut/op_host/op_api/test_aclnn_<op>.cpp: the public parameters of every case as C++
    argument expressions (TensorDesc / IntArrayDesc / literals / nullptr) in the API's order, with the status code
    the emitted aclnn layer must return (docs/design.md "Emission": 161001 null, 161002 invalid). No spec name
    becomes an identifier: arguments are temporaries, cases are numbered, names appear in comments only.
    Raises SpecError when the example is not valid for the spec."""
    m = OpModel(spec)
    ucases = ut_cases(spec)

    def args(c: UtCase, override: dict | None = None) -> tuple[list, list]:
        row = spec.dtype_rows[c.row - 1] if spec.dtype_rows else {}
        ins, outs = [], []
        for k, a in enumerate(m.api_params):
            dt = a.dtype
            if isinstance(dt, DTypeVar):
                dt = row[dt.name]
            if a.kind == "int_array":
                expr = f"IntArrayDesc({_int_vector(int_array_values(a, c.env))})"
            elif a.kind in ("input", "optional", "unused"):
                decl = (a.like if a.kind == "unused" else a.param).decl
                arr = c.inputs.get(decl.name)
                if arr is None:
                    expr = "nullptr"
                elif decl.host:
                    expr = f"IntArrayDesc({_int_vector(np.asarray(arr).ravel())})"
                else:
                    expr = _tensor_desc(np.shape(arr), dt)
            elif a.scalar:   # the repository's ScalarDesc, its dtype from the argument's C++ type
                at = a.param.decl
                v = c.attrs[at.name]
                lit = cpp_literal(v, at.type)   # SpecError for a non-finite value
                expr = f"ScalarDesc({lit}f)" if at.type is float else \
                    f"ScalarDesc(static_cast<int64_t>({lit}))" if at.type is int else f"ScalarDesc({lit})"
            elif a.kind == "attr" and a.param.decl.type is LIST_INT:   # an aclIntArray, as host arrays are
                expr = f"IntArrayDesc({_int_vector(c.attrs[a.param.decl.name])})"
            elif a.enum is not None:   # the index CANN's API takes for the string (api.enum)
                expr = f"static_cast<int64_t>({a.enum_index(c.attrs[a.param.decl.name])})"
            elif a.kind == "attr":
                at = a.param.decl
                expr = cpp_literal(c.attrs[at.name], at.type)
                if at.type in (int, float):   # the API's own parameter type, not the literal's (int, double)
                    expr = f"static_cast<{a.ctype}>({expr})"   # int64_t / int32_t / int8_t, double / float
                elif at.type is str and a.ctype == "char*":   # CANN's header takes a mutable string
                    expr = f"const_cast<char*>({expr})"
            else:
                shape, made = c.outputs[a.param.decl.name]
                expr = _tensor_desc(shape, dt) if made and shape is not None else "nullptr"
            if override and k in override:
                expr = override[k](expr, a, dt)
            (outs if a.kind == "output" else ins).append({"name": a.name, "expr": expr})
        return ins, outs

    ok, bad = "ACLNN_SUCCESS", "ACLNN_ERR_PARAM_INVALID"
    cases = []
    for c in ucases:
        ins, outs = args(c)
        combo = ", ".join(f"{k}={v}" for k, v in c.dtypes.items()) or "fixed dtypes"
        cases.append({"name": "_".join(["example"] + list(c.dtypes.values())), "inputs": ins, "outputs": outs,
                      "code": ok, "doc": f"The example in dtype row {c.row} ({combo}) is accepted."})
    c0 = ucases[0]
    params = list(m.api_params)
    for k, a in enumerate(params):
        if not a.scalar and (a.optional or a.kind not in ("input", "unused", "int_array", "output")):
            continue
        if a.kind == "output" and not c0.outputs[a.param.decl.name][1]:
            continue
        ins, outs = args(c0, {k: lambda e, a, dt: "nullptr"})
        cases.append({"name": f"null_argument_{k}", "inputs": ins, "outputs": outs, "code": "ACLNN_ERR_PARAM_NULLPTR",
                      "doc": f"{a.name} (argument {k}) passed as null is refused."})
    row0 = spec.dtype_rows[0] if spec.dtype_rows else {}
    for k, a in enumerate(params):
        if a.kind not in ("input", "optional") or not isinstance(a.dtype, DTypeVar) or a.param.decl.host:
            continue
        if c0.inputs.get(a.param.decl.name) is None:
            continue
        column = {r[a.dtype.name] for r in spec.dtype_rows}
        foreign = next((d for d in _FOREIGN_DTYPES if d not in column), None)
        if foreign is None:
            continue
        shape = np.shape(c0.inputs[a.param.decl.name])
        ins, outs = args(c0, {k: lambda e, a, dt: _tensor_desc(shape, foreign)})
        cases.append({"name": "dtype_outside_the_table", "inputs": ins, "outputs": outs, "code": bad,
                      "doc": f"{a.name} as {foreign.long_name}, a dtype no row of the table gives "
                             f"{a.dtype.name}, is refused."})
        break
    for k, a in enumerate(params):   # a tensor of a fixed dtype (rstd float32, an index int32) given another
        if a.kind not in ("input", "optional", "output") or isinstance(a.dtype, DTypeVar) \
                or getattr(a.param.decl, "host", False):
            continue
        if a.kind == "output":
            shape, made = c0.outputs[a.param.decl.name]
            if not made or shape is None:
                continue
        elif c0.inputs.get(a.param.decl.name) is None:
            continue
        else:
            shape = np.shape(c0.inputs[a.param.decl.name])
        foreign = next(d for d in _FOREIGN_DTYPES if d != a.dtype)
        ins, outs = args(c0, {k: lambda e, a, dt: _tensor_desc(shape, foreign)})
        cases.append({"name": "fixed_dtype_given_another", "inputs": ins, "outputs": outs, "code": bad,
                      "doc": f"{a.name} as {foreign.long_name} where its dtype is fixed to {a.dtype.long_name} "
                             f"is refused."})
        break
    for k, a in enumerate(params):
        if a.kind != "output":
            continue
        shape, made = c0.outputs[a.param.decl.name]
        if not made or not shape:
            continue
        wrong = tuple(shape[:-1]) + (int(shape[-1]) + 1,)
        dt = row0[a.dtype.name] if isinstance(a.dtype, DTypeVar) else a.dtype
        ins, outs = args(c0, {k: lambda e, a, d: _tensor_desc(wrong, dt)})
        cases.append({"name": "output_of_the_wrong_shape", "inputs": ins, "outputs": outs, "code": bad,
                      "doc": f"{a.name} of shape {list(wrong)} where the call gives {list(shape)} is refused."})
        break
    dims = ", ".join(f"{k}={list(v) if isinstance(v, tuple) else v}" for k, v in c0.env.items())
    intro = textwrap.wrap(
        f"op_api UT of {m.op}: {m.api}GetWorkspaceSize on the spec's example ({dims}) with the status codes its "
        f"checks return: ACLNN_SUCCESS in every dtype row; ACLNN_ERR_PARAM_NULLPTR (161001) for each required tensor "
        f"{'or scalar ' if any(a.scalar for a in params) else ''}passed as null; ACLNN_ERR_PARAM_INVALID (161002) "
        f"for a dtype outside the table, a tensor of a fixed dtype given another and an output of the "
        f"wrong shape. Built by the repository's op_api UT framework (OP_API_UT, TensorDesc).", width=110,
        break_on_hyphens=False)
    return {"banner": m.banner(), "op": m.op, "op_snake": m.snake, "api": m.api, "api_snake": m.api_snake,
            "intro": intro, "cases": cases}


def emit_ut(spec) -> dict[str, str]:
    """{path: text} of the UT sources (module doc; unformatted). Raises SpecError / OpgenError as the example and
    the tiling twin do."""
    ctx = ut_context(spec)
    if not ctx["tiling_cases"]:
        raise OpgenError(f"{spec.name}: no UT case")
    s = ctx["op_snake"]
    return {
        f"tests/ut/op_host/test_{s}_tiling.cpp": render("tests/ut/tiling_test.cpp.j2", **ctx),
        f"tests/ut/op_host/test_{s}_infershape.cpp": render("tests/ut/infershape_test.cpp.j2", **ctx),
        f"tests/ut/op_host/op_api/test_{ctx['api_snake']}.cpp": render("tests/ut/op_api_test.cpp.j2",
                                                                        **op_api_context(spec)),
        f"tests/ut/op_kernel/test_{s}.cpp": render("tests/ut/kernel_test.cpp.j2", **ctx),
        f"tests/ut/op_kernel/{ctx['tiling_header']}": render("tests/ut/tiling_def.h.j2", **ctx),
    }
