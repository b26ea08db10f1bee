"""Emitter of examples/test_aclnn_<api>.cpp: a call example of the aclnn API in CANN's style
(docs/reference/ascendc.md §2.2 "ACL runtime sample", §2.9): init the device and a stream, create the input
and output tensors, call the two phases, synchronise, print the first values of each output, release.

The example uses the first dtype combination of the spec, the dims and attributes the spec declares with
OpSpec.example_call (else dims derived from the dim domains and the default attributes); the inputs are made by
the spec's own valid-input maker
(`opgen.dsl.examples.random_inputs`, which fills data-dependent inputs such as statistics, topk indices
and cumulative sequence arrays legally) and validated by the spec before anything is emitted. Small
tensors and every integer tensor are embedded exactly; larger float tensors are filled from a formula.
"""

from __future__ import annotations

import math

import numpy as np

from opgen.codegen.env import render
from opgen.codegen.model import ACL_DTYPE, OpModel, cpp_literal
from opgen.dsl.examples import random_inputs
from opgen.dsl.keys import LIST_INT
from opgen.errors import OpgenError, SpecError
from opgen.ir.dims import eval_shape
from opgen.ir.dtypes import DType, DTypeVar
from opgen.names import c_string

EMBED_LIMIT = 256  # float tensors up to this many elements are embedded value by value

_HOST = {DType.f32: "float", DType.f16: "uint16_t", DType.bf16: "uint16_t", DType.i32: "int32_t",
         DType.i64: "int64_t", DType.u8: "uint8_t", DType.bool: "uint8_t", DType.i8: "int8_t", DType.i16: "int16_t"}
_TO_FLOAT = {DType.f32: "FloatFromFloat", DType.f16: "FloatFromHalf", DType.bf16: "FloatFromBf16",
             DType.i32: "FloatFromInt32", DType.i64: "FloatFromInt64", DType.u8: "FloatFromUint8",
             DType.bool: "FloatFromUint8", DType.i8: "FloatFromInt8", DType.i16: "FloatFromInt16"}
_FROM_FLOAT = {DType.f32: "", DType.f16: "HalfFromFloat", DType.bf16: "Bf16FromFloat"}


def _default_dims(spec) -> dict:
    dims = {}
    for d in spec.dims_.values():
        v = max(d.min, 2)
        if d.multiple_of:
            v = -(-v // d.multiple_of) * d.multiple_of
        if d.max is not None:
            v = min(v, d.max)
        dims[d.name] = v
    for g in spec.variadics:
        dims[g] = (2,)
    return dims


def int_array_values(a, env: dict) -> list[int]:
    """The values of an extra host array (opgen.dsl.aclnn.int_array) for bound dims `env`: its dims in order, a
    variadic group expanded."""
    out = []
    for d in a.entry.dims:
        v = env[d.name]
        out += [int(x) for x in v] if isinstance(v, tuple) else [int(v)]
    return out


def _float_literal(v: float) -> str:
    """C++ float literal of `v` (6 significant digits); NaN and infinities through std::numeric_limits (<limits>,
    which the example includes when a value needs it: example_context's "nonfinite")."""
    if math.isnan(v):
        return "std::numeric_limits<float>::quiet_NaN()"
    if math.isinf(v):
        return ("-" if v < 0 else "") + "std::numeric_limits<float>::infinity()"
    s = f"{float(v):.6g}"
    if "e" not in s and "." not in s and "n" not in s:
        s += ".0"
    return s + "f"


def example_case(spec) -> dict:
    """The validated example: dims, attrs, dtype row, inputs, bound env and produced outputs.

    Raises SpecError when the example dims are not valid for the spec."""

    call = spec.example_call_ or {}
    dims = dict(call.get("dims") or _default_dims(spec))
    row = spec.dtype_rows[0] if spec.dtype_rows else {}
    dtypes = {k: v.long_name for k, v in row.items()}
    attrs = dict(call.get("attrs", {}))
    for a in spec.attrs:
        if a.name in attrs:
            continue
        if a.dim is not None and a.dim.name in dims:
            attrs[a.name] = dims[a.dim.name]
        elif a.default is None and a.choices and a.dtype_of is None:   # a dtype attribute follows the row
            attrs[a.name] = a.choices[0]
    try:
        inputs = random_inputs(spec, dims, attrs, dtypes, seed=0)
        bound = spec.bind(inputs, attrs, dtypes)
    except (OpgenError, ValueError) as e:
        raise SpecError(f"{spec.file}: the call example's dims {dims} are not valid for {spec.name}: {e}") from None
    graph = spec.graph(bound.key)
    produced = {name for name, _ in graph.outputs}
    derived = {a.name for a in spec.attrs if a.dtype_of is not None}   # follow each row's dtypes (OpSpec.attr)
    return {"dims": dims, "attrs": {k: v for k, v in bound.attrs.items() if k not in derived}, "row": row, "inputs": inputs, "bound": bound, "produced": produced}


def example_context(spec) -> dict:
    """Template data of the example file."""
    m = OpModel(spec)
    case = example_case(spec)
    bound, row = case["bound"], case["row"]
    helpers = set()
    tensors, host_arrays, scalars, attrs, outputs, args = [], [], [], [], [], []
    nonfinite = [False]   # a NaN or infinity among the embedded values

    def tensor(name, arr, dt):
        values = np.asarray(arr)
        shape = [int(s) for s in values.shape]
        t = {"name": name, "shape": ", ".join(map(str, shape)), "host": _HOST[dt], "acl": ACL_DTYPE[dt],
             "size": int(values.size), "from_float": _FROM_FLOAT.get(dt, ""), "output": False}
        if dt.is_float:
            if values.size <= EMBED_LIMIT:
                flat = values.astype(np.float32).ravel()
                t["data"] = ", ".join(_float_literal(v) for v in flat)
                nonfinite[0] = nonfinite[0] or not bool(np.isfinite(flat).all())
            else:
                t["data"] = None
                helpers.add("Pattern")
            if t["from_float"]:
                helpers.add(t["from_float"])
        else:
            t["data"] = ", ".join(str(int(v)) for v in values.astype(np.int64).ravel())
        tensors.append(t)

    for a in m.api_params:
        if a.kind == "int_array":
            values = int_array_values(a, bound.env)
            host_arrays.append({"name": a.cpp, "data": ", ".join(map(str, values))})
        elif a.kind in ("input", "optional", "unused"):
            i = (a.like if a.kind == "unused" else a.param).decl
            arr = case["inputs"].get(i.name)
            if arr is None:
                args.append("nullptr")
                continue
            if i.host:
                host_arrays.append({"name": a.cpp, "data": ", ".join(str(int(v)) for v in np.asarray(arr).ravel())})
            else:
                tensor(a.cpp, arr, row[a.dtype.name] if isinstance(a.dtype, DTypeVar) else a.dtype)
        elif a.scalar:   # created as CANN's examples create scalar operands: a float as ACL_FLOAT
            at = a.param.decl
            v = case["attrs"][at.name]
            host, acl = {float: ("float", "ACL_FLOAT"), int: ("int64_t", "ACL_INT64"),
                         bool: ("bool", "ACL_BOOL")}[at.type]
            lit = cpp_literal(v, at.type) + ("f" if at.type is float else "")   # SpecError for a non-finite value
            scalars.append({"name": a.cpp, "host": host, "acl": acl, "value": lit})
        elif a.kind == "attr" and a.param.decl.type is LIST_INT:   # aclCreateIntArray / aclDestroyIntArray
            host_arrays.append({"name": a.cpp, "data": ", ".join(str(int(v)) for v in case["attrs"][a.param.decl.name])})
        elif a.kind == "attr":
            at = a.param.decl
            v = case["attrs"][at.name]
            if at.type is float:
                lit, ctype = repr(float(v)), a.ctype   # double, or float where CANN's header has it
            elif at.type is bool:
                lit, ctype = ("true" if v else "false"), "bool"
            elif at.type is int:
                lit, ctype = str(int(v)), a.ctype   # int64_t, or int32_t where CANN's header has it
            elif a.enum is not None:   # the index CANN's API takes for the string (api.enum)
                lit, ctype = str(a.enum_index(v)), "int64_t"
            else:
                lit, ctype = c_string(str(v)), "const char*"
            name = a.cpp
            if a.ctype == "char*":   # CANN's header takes a mutable string: pass an array
                ctype, name = "char", f"{a.cpp}[]"
            attrs.append({"name": name, "type": ctype, "value": lit})
        else:
            o = a.param.decl
            if o.name not in case["produced"]:
                args.append("nullptr")
                continue
            dt = row[o.dtype.name] if isinstance(o.dtype, DTypeVar) else o.dtype
            shape = list(np.shape(case["inputs"][o.like])) if o.like else list(eval_shape(o.shape_for(spec.static_values(bound.key)), bound.env))
            helpers.add(_TO_FLOAT[dt])
            size = int(np.prod(shape, dtype=np.int64))
            outputs.append({"name": a.cpp, "spec_name": o.name, "shape": ", ".join(map(str, shape)),
                            "host": _HOST[dt], "acl": ACL_DTYPE[dt], "size": size, "to_float": _TO_FLOAT[dt]})
        args.append(a.cpp)
    # outputs written in place (OpSpec.output(ref=)): read back from their input's device memory
    ref_outputs = []
    for o in spec.outputs:
        if o.ref is None or o.name not in case["produced"]:
            continue
        t = next(t for t in tensors if t["name"] == m.param(o.ref).cpp)
        dt = row[o.dtype.name] if isinstance(o.dtype, DTypeVar) else o.dtype
        helpers.add(_TO_FLOAT[dt])
        ref_outputs.append({"name": t["name"], "spec_name": o.name, "host": t["host"], "to_float": _TO_FLOAT[dt]})
    _check_locals(spec, tensors, host_arrays, scalars, attrs, outputs)
    dims_text = ", ".join(f"{k}={list(v) if isinstance(v, tuple) else v}" for k, v in case["dims"].items())
    combo = ", ".join(f"{k}={v.long_name}" for k, v in row.items())
    return {"banner": m.banner(), "op": m.op, "api": m.api, "api_snake": m.api_snake, "tensors": tensors,
            "host_arrays": host_arrays, "scalars": scalars, "attrs": attrs, "outputs": outputs,
            "ref_outputs": ref_outputs, "nonfinite": nonfinite[0], "args": args, "dims": dims_text, "combo": combo, "helpers": sorted(helpers), "socs": ", ".join(m.socs)}


# Locals of the example's main besides those named after parameters (templates/examples/test_aclnn.cpp.j2).
_MAIN_LOCALS = ("deviceId", "stream", "ret", "workspaceSize", "executor", "workspaceAddr")


def _check_locals(spec, tensors, host_arrays, scalars, attrs, outputs) -> None:
    """The example's main declares each public parameter under its name plus locals derived from it (xShape,
    xValues, xHost, xDevice, alphaValue): two of these must not be one identifier (a tensor `alphaValue` beside a
    scalar `alpha`). Raises SpecError naming both."""
    owner: dict[str, str] = {n: "the example's own local" for n in _MAIN_LOCALS}

    def declare(name: str, of: str) -> None:
        if name in owner and owner[name] != of:
            raise SpecError(f"{spec.file}: the call example declares {name!r} for {of} and for {owner[name]}; "
                            f"rename one of the aclnn parameters (aclnn_signature)")
        owner[name] = of

    for t in tensors:
        for suffix in ("", "Shape", "Values", "Host", "Device"):
            declare(t["name"] + suffix, f"parameter {t['name']}")
    for h in host_arrays:
        for suffix in ("", "Host"):
            declare(h["name"] + suffix, f"parameter {h['name']}")
    for c in scalars:
        for suffix in ("", "Value"):
            declare(c["name"] + suffix, f"parameter {c['name']}")
    for a in attrs:
        name = a["name"].removesuffix("[]")
        declare(name, f"parameter {name}")
    for o in outputs:
        for suffix in ("", "Shape", "Host", "Device"):
            declare(o["name"] + suffix, f"parameter {o['name']}")


def emit_example(spec) -> dict[str, str]:
    """{"examples/test_aclnn_<api>.cpp": text} (unformatted)."""
    m = OpModel(spec)
    return {f"examples/test_{m.api_snake}.cpp": render("examples/test_aclnn.cpp.j2", **example_context(spec))}
