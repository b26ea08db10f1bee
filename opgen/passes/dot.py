"""Drawing the pass graph: Graphviz DOT text (always) and SVG (through Graphviz's `dot` program).

Layout of the drawing: one box per op labelled `%name = op {attrs}` and its type; params as blue
"input" shapes (runtime attribute params dashed); the values the graph returns drawn with a double
border, each linked to a green terminal node carrying the output name (CANN OpDef spelling); edges
from operand to user, labelled with the operand position when the user has several operands.
The text is deterministic: nodes and edges come in `from_nx` order.
"""

from __future__ import annotations

import shutil
import subprocess

import networkx as nx

from opgen.errors import OpgenError
from opgen.ir.core import Graph
from opgen.ir.printer import format_type, format_value
from opgen.passes.graph import OP, output_values, to_nx, topo_order

_PARAM_STYLE = {"shape": "invhouse", "style": "filled", "fillcolor": '"#dbe8f7"'}
_OUTPUT_STYLE = {"shape": "house", "style": "filled", "fillcolor": '"#d9f2d9"'}
_MAX_ATTR_CHARS = 60


def quote(s: str) -> str:
    """A DOT double-quoted string of `s` (backslashes and quotes escaped, newlines as \\n)."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _style_text(style: dict) -> str:
    return "".join(f", {k}={v}" for k, v in style.items())


def _attrs_text(node) -> str:
    s = ", ".join(f"{k}={format_value(v)}" for k, v in node.attrs)
    if len(s) > _MAX_ATTR_CHARS:
        s = s[: _MAX_ATTR_CHARS - 3] + "..."
    return "{" + s + "}" if s else ""


def to_dot(G: nx.DiGraph | Graph) -> str:
    """DOT text of a pass graph (a DiGraph from `to_nx`, or a Graph, which is lowered first).

    Returns the text of one `digraph`, ending with a newline. Deterministic. Raises nothing for a
    well-formed graph (IRError from `to_nx` for a malformed Graph).
    """
    if isinstance(G, Graph):
        G = to_nx(G)
    outs = output_values(G)
    lines = [f"digraph {quote(G.graph['name'])} {{",
             '  graph [rankdir=TB, fontname="Helvetica", label=' + quote(G.graph["name"]) + ", labelloc=t];",
             '  node [fontname="Helvetica", fontsize=10, shape=box];',
             '  edge [fontname="Helvetica", fontsize=8];']
    order = topo_order(G)
    for v in order:
        d = G.nodes[v]
        ir = d["ir"]
        if d["kind"] == OP:
            attrs = _attrs_text(ir)
            label = f"%{v} = {ir.op}" + ("\n" + attrs if attrs else "") + "\n" + format_type(ir.result.type)
            style = {}
        else:
            label = f"%{v}\n{format_type(ir.value.type)}" + ("\nattr" if ir.kind == "attr" else "")
            style = dict(_PARAM_STYLE)
            if ir.kind == "attr":
                style["style"] = '"filled,dashed"'
        if v in outs:
            style["peripheries"] = "2"
        lines.append(f"  {quote(v)} [label={quote(label)}{_style_text(style)}];")
    for name, v in G.graph["outputs"]:
        lines.append(f"  {quote('out:' + name)} [label={quote(name)}{_style_text(_OUTPUT_STYLE)}];")
    for v in order:
        for u in sorted(G.pred[v], key=lambda u: G.pred[v][u]["index"]):
            idx = G.pred[v][u]["index"]
            nops = len(G.nodes[v]["ir"].inputs)
            label = f" [label={quote(','.join(map(str, idx)))}]" if nops > 1 else ""
            lines.append(f"  {quote(u)} -> {quote(v)}{label};")
    for name, v in G.graph["outputs"]:
        lines.append(f"  {quote(v)} -> {quote('out:' + name)};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_svg(G: nx.DiGraph | Graph, timeout: float = 60.0) -> str:
    """SVG text of the drawing of `G` (see `to_dot`), rendered by Graphviz's `dot -Tsvg`.

    Raises:
        OpgenError: Graphviz's `dot` program is not on PATH (the message says to install Graphviz or
            to use the DOT format), or `dot` failed.
    """
    exe = shutil.which("dot")
    if exe is None:
        raise OpgenError("--format svg needs Graphviz: the `dot` program is not on PATH "
                         "(install Graphviz, e.g. `apt-get install graphviz`, or use --format dot)")
    try:
        p = subprocess.run([exe, "-Tsvg"], input=to_dot(G), capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise OpgenError(f"Graphviz `dot` failed: {e}") from None
    if p.returncode != 0:
        msg = (p.stderr.strip().splitlines() or ["no message"])[0]
        raise OpgenError(f"Graphviz `dot -Tsvg` failed (exit {p.returncode}): {msg}")
    return p.stdout
