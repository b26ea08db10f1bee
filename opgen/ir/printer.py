"""Canonical text form of the tensor IR (parsed back by `opgen.ir.parser`).

    graph AdaLayerNormGrad(%dy: T[*Bd, S, H], %epsilon: f32[] attr) where [S >= 1, H <= 65536] {
      %x32 = cast(%dy) {round = "none", to = f32} : f32[*Bd, S, H]
      ...
      return {pd_x = %v9, pd_gamma = %v12}
    }

Attributes are printed sorted by name; floats with `repr` (round-trips exactly). With `locs=True` every node
ends with its spec location, `loc("rms_norm.py":28)`; the parser restores it.
"""

from __future__ import annotations

import json
import re

from opgen.ir.core import Graph, Node, TensorType
from opgen.ir.dims import DimExpr, Variadic, shape_str
from opgen.ir.dtypes import DType, DTypeVar


def format_value(v) -> str:
    """Text of an attribute value (bool, int, float, str, dtype, dim, tuple of dims/ints)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        r = repr(v)
        return r
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (DType, DTypeVar)):
        return repr(v)
    if isinstance(v, (DimExpr, Variadic)):
        return str(v)
    if isinstance(v, tuple):
        return shape_str(v) if any(isinstance(x, (DimExpr, Variadic)) for x in v) else "[" + ", ".join(
            format_value(x) for x in v) + "]"
    raise TypeError(f"cannot print attribute value {v!r}")


def format_type(t: TensorType) -> str:
    """Text of a tensor type: `f32[*Bd, S, H]`."""
    return f"{t.dtype!r}{shape_str(t.shape)}"


def format_loc(loc: str) -> str:
    """Text of a node's spec location, MLIR-style: `loc("rms_norm.py":28)` (the file part a JSON string, so any
    file name round-trips; `loc("text")` when the location has no line number). "" for no location."""
    if not loc:
        return ""
    path, sep, line = loc.rpartition(":")
    if sep and line.isdigit():
        return f"loc({json.dumps(path)}:{line})"
    return f"loc({json.dumps(loc)})"


def format_node(n: Node, locs: bool = False) -> str:
    """Text of one node: `%v = op(%a, %b) {attrs} : type`, with locs=True followed by its spec location
    (` loc("file.py":28)`) when it has one."""
    args = ", ".join("%" + i for i in n.inputs)
    attrs = ""
    if n.attrs:
        attrs = " {" + ", ".join(f"{k} = {format_value(v)}" for k, v in n.attrs) + "}"
    where = f" {format_loc(n.loc)}" if locs and n.loc else ""
    return f"%{n.result.name} = {n.op}({args}){attrs} : {format_type(n.result.type)}{where}"


def print_graph(g: Graph, locs: bool = False) -> str:
    """The canonical text of `g` (ends with a newline). locs=True adds each node's spec location (`format_loc`;
    what `opgen graph` and `opgen interpret --print-ir` show); the default text has none, so graphs traced from
    different spec files compare equal."""
    params = ", ".join(
        f"%{p.value.name}: {format_type(p.value.type)}" + (" attr" if p.kind == "attr" else "") for p in g.params
    )
    where = ""
    if g.constraints:
        where = " where [" + ", ".join(str(c) for c in g.constraints) + "]"
    lines = [f"graph {g.name}({params}){where} {{"]
    lines += ["  " + format_node(n, locs) for n in g.nodes]
    outs = ", ".join(f"{k} = %{v}" for k, v in g.outputs)
    lines.append(f"  return {{{outs}}}")
    lines.append("}")
    return "\n".join(lines) + "\n"


_TRACED = re.compile(r"(?<![A-Za-z0-9])v(\d+)(?![A-Za-z0-9])")


def canonical_values(text: str) -> str:
    """`text` (any printed program) with the traced values' names (v<n>, opgen.dsl.builder: numbered in trace order,
    also inside derived names such as st_v<n> / ws_v<n>) renumbered by first appearance: two programs that differ
    only in how many values the trace made before them (a specialisation whose optional input is absent traces
    fewer) print the same. A bijective renaming, so equal results mean equal programs up to value names."""
    seen: dict[str, str] = {}
    return _TRACED.sub(lambda m: "v" + seen.setdefault(m.group(1), str(len(seen))), text)
