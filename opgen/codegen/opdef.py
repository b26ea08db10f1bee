"""Emitter of op_host/<op>_def.cpp: the OpDef registration (docs/reference/ascendc.md §2.3).

Per input/output: ParamType (REQUIRED / OPTIONAL), the DataType list with one column per row of the
spec's dtype table (a dtype variable expanded through the rows, a fixed dtype repeated), FORMAT_ND
lists, UnknownShapeFormat; inputs read on the host (`host=True`: aclIntArray at the aclnn layer) are
ValueDepend(OPTIONAL); device inputs are AutoContiguous. Attributes: AttrType as `attr_type` decides, with
the default when there is one (Int/Float/Bool/String). One OpAICoreConfig (dynamic compile/rank/shape,
opFile.value = the kernel's file stem, as CANN's defs: docs/reference/ops_package.md §4; opInterface.value = the
kernel entry's name where it is not the file stem: opgen.names.kernel_entry) added for every SoC the spec supports. Names exactly as the spec spells them; the spec's opdef notes (deliberate differences from
CANN's def) as comments.
"""

from __future__ import annotations

import textwrap

from opgen.codegen.env import render
from opgen.codegen.model import OpModel, cpp_literal
from opgen.dsl.keys import LIST_INT

_SETTER = {int: "Int", float: "Float", bool: "Bool", str: "String", LIST_INT: "ListInt"}


def def_context(m: OpModel) -> dict:
    """Template data of the OpDef (also used by tests to know what the file must say)."""
    fmt = ["ge::FORMAT_ND"] * m.n_rows
    inputs = []
    for p in m.inputs:
        extras = []
        if p.decl.host:
            extras.append("ValueDepend(OPTIONAL)")
        else:
            extras.append("AutoContiguous()")
        inputs.append({"name": p.name, "param_type": "OPTIONAL" if p.optional else "REQUIRED", "dtypes": p.dtypes,
                       "formats": fmt, "extras": extras})
    outputs = [{"name": p.decl.opdef_name, "param_type": "OPTIONAL" if p.optional else "REQUIRED", "dtypes": p.dtypes,
                "formats": fmt} for p in m.outputs]
    attrs = []
    for p in m.attrs:
        a = p.decl
        setter = _SETTER[a.type]
        value = f"{setter}()" if a.default is None else f"{setter}({cpp_literal(a.default, a.type)})"
        attrs.append({"name": a.name, "attr_type": attr_type(a), "setter": value})
    rows = [", ".join(f"{k}={v.long_name}" for k, v in r.items()) for r in m.spec.dtype_rows]
    notes = [ln for n in m.spec.opdef_notes for ln in textwrap.wrap(" ".join(n.split()), 110)]
    return {"banner": m.banner(), "op": m.op, "inputs": inputs, "outputs": outputs, "attrs": attrs, "socs": m.socs,
            "rows": rows, "op_file": m.snake, "notes": notes,
            "op_interface": m.entry if m.entry != m.snake else None}


def attr_type(a) -> str:
    """The OpDef AttrType of attribute `a`: the spec's attr_type=, else REQUIRED when it has no default or
    required=True, else OPTIONAL (docs/reference/ops_package.md §4: CANN declares some attributes REQUIRED with a
    default value)."""
    if a.attr_type is not None:
        return a.attr_type
    return "REQUIRED" if a.default is None or a.required else "OPTIONAL"


def emit_def(spec) -> dict[str, str]:
    """{"op_host/<op>_def.cpp": text} for `spec` (unformatted; generate() runs clang-format)."""
    m = OpModel(spec)
    return {f"op_host/{m.snake}_def.cpp": render("op_host/def.cpp.j2", **def_context(m))}
