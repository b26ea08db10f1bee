"""Emission of the host tiling files (op_host/<op>_tiling.h, op_host/<op>_tiling.cpp) from a spec
and its tiling program (reference/ascendc.md §2.4 struct-style tiling data, §2.5 TilingFunc).

Python decides everything: how each program input is read from the TilingContext (dims from input
shapes, generated from the spec's symbolic shapes; dtype sizes and the dtype key from the dtype table),
the program statements (TilingProgram.to_cpp), the fields. The templates only lay the code out.
"""

from __future__ import annotations

import re

import jinja2

from opgen.errors import SpecError
from opgen.ir.dims import Bin, DimExpr, Lit, Prod, Sym, Variadic, as_dim
from opgen.ir.dtypes import DType, DTypeVar
from opgen.registry import specs_dir

SYS_WORKSPACE_BYTES = 16 * 1024 * 1024  # AscendC system workspace reserve (reference/ada_layer_norm.md §3.1)


def snake(name: str) -> str:
    """CamelCase OpDef name -> snake_case file stem (AdaLayerNormGrad -> ada_layer_norm_grad, V2 -> v2)."""
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    return s.lower()


def _dim_access(spec, sym: str) -> str:
    """C++ expression reading dim `sym` (or the product of variadic group `sym`) from the first required
    input whose shape mentions it. Raises SpecError when no required input carries it."""
    for idx, i in enumerate(spec.inputs):
        if i.optional or len(i.shapes) != 1:
            continue
        shape = i.shapes[0]
        var = [k for k, d in enumerate(shape) if isinstance(d, Variadic)]
        v = var[0] if var else None
        for pos, d in enumerate(shape):
            if isinstance(d, Variadic) and d.name == sym:
                return f"ProdDims({i.name}Shape, {pos}, {len(shape) - pos - 1})"
            if isinstance(d, Sym) and d.name == sym:
                if v is not None and pos > v:
                    return f"{i.name}Shape.GetDim({i.name}Shape.GetDimNum() - {len(shape) - pos})"
                return f"{i.name}Shape.GetDim({pos})"
    raise SpecError(f"{spec.file}: dim {sym} is not carried by a required single-form input; the tiling cannot read it")


def dim_cpp(spec, e: DimExpr) -> str:
    """C++ int64 expression of a dim expression over the spec's dims."""
    e = as_dim(e)
    if isinstance(e, Lit):
        return str(e.value)
    if isinstance(e, Sym):
        return _dim_access(spec, e.name)
    if isinstance(e, Prod):
        return _dim_access(spec, e.name)
    if isinstance(e, Bin):
        op = "/" if e.op == "//" else e.op
        return f"({dim_cpp(spec, e.lhs)} {op} {dim_cpp(spec, e.rhs)})"
    raise SpecError(f"cannot emit dim {e}")


def emit_tiling(spec, tiling_module) -> dict[str, str]:
    """{path: text} of op_host/<op>_tiling.h and _tiling.cpp for `spec` with `tiling_module`
    (a module with PROGRAM and INPUTS: {program input name: dim expression | ("bytes", var) |
    ("dtype_key",) | ("platform", "coreNum"|"ubBytes")})."""
    prog = tiling_module.PROGRAM
    op = snake(spec.name)
    reads = []
    for name in prog.inputs:
        how = tiling_module.INPUTS[name]
        if isinstance(how, tuple) and how[0] == "bytes":
            reads.append((name, f"DTypeBytes({_first_desc(spec, how[1])})"))
        elif isinstance(how, tuple) and how[0] == "dtype_key":
            reads.append((name, "DTypeKey(" + ", ".join(_first_desc(spec, c.name) for c in spec.dtype_table) + ")"))
        elif isinstance(how, tuple) and how[0] == "platform":
            reads.append((name, {"coreNum": "static_cast<int64_t>(platform.GetCoreNumAiv())",
                                 "ubBytes": "static_cast<int64_t>(ubSize)"}[how[1]]))
        else:
            reads.append((name, dim_cpp(spec, how)))
    rows = [[c.cann for c in (r[v.name] for v in spec.dtype_table)] for r in spec.dtype_rows]
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(specs_dir().parent / "templates")),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    ctx = {
        "op": spec.name, "op_snake": op, "struct": f"{spec.name}TilingData",
        "fields": [(n, doc) for n, _, doc in prog.stmts if n in prog.fields],
        "inputs": [(n, expr, prog.inputs[n]) for n, expr in reads],
        "shapes": _shape_refs(spec, reads),
        "statements": prog.to_cpp(indent="    "),
        "dtype_rows": rows, "n_vars": len(spec.dtype_table),
        "sys_workspace": SYS_WORKSPACE_BYTES, "source": tiling_module.__doc__.strip().splitlines()[0],
    }
    return {
        f"op_host/{op}_tiling.h": env.get_template("op_host/tiling.h.j2").render(**ctx),
        f"op_host/{op}_tiling.cpp": env.get_template("op_host/tiling.cpp.j2").render(**ctx),
    }


def _first_desc(spec, var):
    """C++ ge::DataType of dtype variable `var`: the first required input typed by it, else the optional
    inputs in order, falling back to the first required output (always present)."""
    for idx, i in enumerate(spec.inputs):
        if not i.optional and isinstance(i.dtype, DTypeVar) and i.dtype.name == var:
            return f"context->GetInputDesc({idx})->GetDataType()"
    chain = [f"context->GetOptionalInputDesc({idx})" for idx, i in enumerate(spec.inputs)
             if i.optional and isinstance(i.dtype, DTypeVar) and i.dtype.name == var]
    outs = [f"context->GetOutputDesc({idx})" for idx, o in enumerate(spec.outputs)
            if not o.optional and isinstance(o.dtype, DTypeVar) and o.dtype.name == var]
    if not outs:
        raise SpecError(f"{spec.file}: dtype variable {var} has no required tensor to read it from")
    expr = f"{outs[0]}->GetDataType()"
    for d in reversed(chain):
        expr = f"({d} != nullptr ? {d}->GetDataType() : {expr})"
    return expr


def _shape_refs(spec, reads) -> list[tuple[str, int]]:
    """(input name, index) of the inputs whose shapes the reads use, in spec order."""
    used = {name for _, expr in reads for name in re.findall(r"\b(\w+)Shape\b", expr)}
    return [(i.name, idx) for idx, i in enumerate(spec.inputs) if i.name in used]
