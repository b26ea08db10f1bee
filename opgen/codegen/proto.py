"""Emitter of op_graph/<op>_proto.h: the GE IR registration of the operator (docs/reference/ops_package.md §1: every real
op directory has op_graph/<op>_proto.h; §2.2: add_modules_sources and add_graph_plugin_sources glob
op_graph/*_proto*.h).

`REG_OP(<OpDef name>)` with, in OpDef order, `.INPUT` / `.OPTIONAL_INPUT` for the inputs, `.OUTPUT` for the outputs
(GE has no optional-output form: an optional output is an OUTPUT the kernel may leave unwritten), `.ATTR(name, Type,
default)` / `.REQUIRED_ATTR(name, Type)` for the attributes (Type Int / Float / Bool / String, the macros of
graph/operator_reg.h), each tensor's `TensorType({...})` the distinct ge::DT_* its column of the dtype table takes,
in table order. A doc comment lists the shapes and dtypes as the spec declares them.
"""

from __future__ import annotations

from opgen.codegen.env import render
from opgen.codegen.model import OpModel, cpp_literal
from opgen.dsl.spec import choice_text
from opgen.ir.dtypes import DTypeVar
from opgen.dsl.keys import LIST_INT

_GE_ATTR = {int: "Int", float: "Float", bool: "Bool", str: "String", LIST_INT: "ListInt"}


def _comment(text: str) -> str:
    """`text` on one line (the template escapes it for the comment: the `ccomment` filter)."""
    return " ".join(str(text).split())


def tensor_types(spec, dt) -> list[str]:
    """The DT_* values a tensor of dtype (variable) `dt` takes over the dtype-table rows, distinct, in row order."""
    rows = spec.dtype_rows or [{}]
    seen = []
    for r in rows:
        d = r[dt.name] if isinstance(dt, DTypeVar) else dt
        if d.cann not in seen:
            seen.append(d.cann)
    return seen


def proto_context(spec) -> dict:
    """Template data of op_graph/<op>_proto.h."""
    m = OpModel(spec)
    tensors = []
    for i in spec.inputs:
        shapes = i.shape_text()
        tensors.append({"macro": "OPTIONAL_INPUT" if i.optional else "INPUT", "name": i.name,
                        "types": tensor_types(spec, i.dtype), "kind": "input",
                        "doc": _comment(f"{i.name}: {'optional ' if i.optional else ''}input, shape {shapes}"
                                        f"{' (a host array)' if i.host else ''}{'. ' + i.doc if i.doc else ''}")})
    outs = []
    for o in spec.outputs:
        shape = o.shape_text() if o.like else f"shape {o.shape_text()}"
        ref = f", {o.ref} updated in place (the same memory)" if o.ref is not None else ""
        outs.append({"macro": "OUTPUT", "name": o.opdef_name, "types": tensor_types(spec, o.dtype), "kind": "output",
                     "doc": _comment(f"{o.opdef_name}: {'optional ' if o.opdef_optional else ''}output, {shape}{ref}"
                                     f"{'. ' + o.doc if o.doc else ''}")})
    attrs = []
    for a in spec.attrs:
        t = _GE_ATTR[a.type]
        if a.default is None or a.required:
            text = f".REQUIRED_ATTR({a.name}, {t})"
        else:
            text = f".ATTR({a.name}, {t}, {cpp_literal(a.default, a.type)})"
        shown = choice_text if a.type is LIST_INT else repr
        extra = f", one of {', '.join(map(shown, a.choices))}" if a.choices else ""
        attrs.append({"text": text, "doc": _comment(f"{a.name}: {'list of int' if a.type is LIST_INT else a.type.__name__}"
                                                    f"{', required' if a.default is None or a.required else ''}"
                                                    f"{extra}{'. ' + a.doc if a.doc else ''}")})
    rows = [", ".join(f"{k}={v.long_name}" for k, v in r.items()) for r in spec.dtype_rows if r]
    return {"banner": m.banner(), "op": m.op, "guard": f"OPS_{spec.category.upper()}_{m.snake.upper()}_PROTO_H_",
            "doc": _comment(spec.doc) if spec.doc else "", "inputs": tensors, "outputs": outs, "attrs": attrs,
            "rows": rows}


def emit_proto(spec) -> dict[str, str]:
    """{"op_graph/<op>_proto.h": text} (unformatted; generate() runs clang-format)."""
    m = OpModel(spec)
    return {f"op_graph/{m.snake}_proto.h": render("op_graph/proto.h.j2", **proto_context(spec))}
