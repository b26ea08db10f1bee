"""The tensor IR as a networkx DiGraph, the form the graph passes work on.

Lowering (`to_nx`) makes one DiGraph node per IR value, keyed by the value's name:

    node attributes   kind  "param" or "op"
                      ir    the frozen `Param` or `Node` (authoritative: operands, attrs, type, loc)
                      pos   a sort key (int) giving the original position: params 0..P-1, then the
                            ops in graph order P.. (passes give new nodes the pos of the node they
                            replace, so the order stays stable)
    edges             operand -> user, attribute `index`: the tuple of operand positions at which the
                      user reads that operand (a DiGraph has no parallel edges, so `mul(%a, %a)` is one
                      edge with index (0, 1))
    graph attributes  name, outputs (tuple of (output name, value name)), extra (any further fields
                      of Graph, e.g. metadata, passed back unchanged)

`from_nx` is the inverse: params in `pos` order, ops in a deterministic topological order that
prefers the smallest (pos, name) first, so an unchanged graph comes back exactly as it was:
`from_nx(to_nx(g)) == g`.

The rewrite helpers below (`set_op`, `replace_uses`, `remove`) keep the `ir` attributes and the edges
consistent; passes should use them rather than editing the DiGraph by hand.
"""

from __future__ import annotations

import dataclasses

import networkx as nx

from opgen.errors import IRError
from opgen.ir.core import Graph, Node, Param, TensorType

PARAM = "param"
OP = "op"
_CORE_FIELDS = ("name", "params", "nodes", "outputs")


def to_nx(g: Graph) -> nx.DiGraph:
    """Lower graph `g` to a networkx DiGraph (layout in the module docstring).

    Raises:
        IRError: two values share a name, or an operand is not defined anywhere in the graph.
    """
    extra = {f.name: getattr(g, f.name) for f in dataclasses.fields(g) if f.name not in _CORE_FIELDS}
    G = nx.DiGraph(name=g.name, outputs=tuple(g.outputs), extra=extra)
    pos = 0
    for p in g.params:
        _add_value(G, p.value.name, PARAM, p, pos)
        pos += 1
    for n in g.nodes:
        _add_value(G, n.result.name, OP, n, pos)
        pos += 1
    for n in g.nodes:
        for i in n.inputs:
            if i not in G:
                raise IRError(f"%{n.result.name} = {n.op}: operand %{i} is not defined")
        _connect(G, n.result.name, n)
    return G


def _add_value(G, name, kind, ir, pos):
    if name in G:
        raise IRError(f"%{name}: defined twice (SSA)")
    G.add_node(name, kind=kind, ir=ir, pos=pos)


def _connect(G, name, node: Node):
    """Add the in-edges of op `name` from its operands (index = operand positions)."""
    idx: dict[str, list[int]] = {}
    for k, i in enumerate(node.inputs):
        idx.setdefault(i, []).append(k)
    for i, ks in idx.items():
        G.add_edge(i, name, index=tuple(ks))


def order_key(G: nx.DiGraph):
    """The sort key of `from_nx`'s topological order: (pos, name) of a DiGraph node."""
    nodes = G.nodes
    return lambda v: (nodes[v]["pos"], v)


def from_nx(G: nx.DiGraph) -> Graph:
    """Rebuild the tensor IR Graph from a DiGraph made by `to_nx` (and rewritten by passes).

    Params come in `pos` order; ops in networkx's lexicographical topological order keyed by
    (pos, name), which is the original order for an unchanged graph and deterministic otherwise.

    Raises:
        IRError: the edges disagree with the operands of a node (a pass bypassed the helpers), a node
            lacks its `kind`/`ir` attributes, or the graph has a cycle.
    """
    params, ops = [], []
    try:
        order = list(nx.lexicographical_topological_sort(G, key=order_key(G)))
    except nx.NetworkXUnfeasible:
        raise IRError(f"graph {G.graph.get('name')}: the DiGraph has a cycle") from None
    for v in order:
        data = G.nodes[v]
        kind, ir = data.get("kind"), data.get("ir")
        if kind == PARAM and isinstance(ir, Param):
            params.append((data["pos"], v, ir))
        elif kind == OP and isinstance(ir, Node):
            _check_edges(G, v, ir)
            ops.append(ir)
        else:
            raise IRError(f"%{v}: DiGraph node without a valid kind/ir ({kind!r}, {type(ir).__name__})")
    params.sort(key=lambda t: (t[0], t[1]))
    return Graph(G.graph["name"], tuple(p for _, _, p in params), tuple(ops), tuple(G.graph["outputs"]),
                 **G.graph.get("extra", {}))


def _check_edges(G, v, node: Node):
    want: dict[str, list[int]] = {}
    for k, i in enumerate(node.inputs):
        want.setdefault(i, []).append(k)
    pred = G.pred[v]
    if len(pred) != len(want) or any(tuple(ks) != pred.get(i, {}).get("index") for i, ks in want.items()):
        got = {u: d.get("index") for u, d in pred.items()}
        raise IRError(f"%{v} = {node.op}: DiGraph edges {got} disagree with its operands {list(node.inputs)}")
    if node.result.name != v:
        raise IRError(f"%{v}: DiGraph node holds the op defining %{node.result.name}")


# -- queries ------------------------------------------------------------------------------------------

def op_of(G: nx.DiGraph, v: str) -> Node | None:
    """The Node defining value `v`, or None when `v` is a param."""
    d = G.nodes[v]
    return d["ir"] if d["kind"] == OP else None


def type_of(G: nx.DiGraph, v: str) -> TensorType:
    """The TensorType of value `v` (param or op result)."""
    d = G.nodes[v]
    return d["ir"].result.type if d["kind"] == OP else d["ir"].value.type


def output_values(G: nx.DiGraph) -> set[str]:
    """Names of the values the graph returns."""
    return {v for _, v in G.graph["outputs"]}


def topo_order(G: nx.DiGraph) -> list[str]:
    """All value names in `from_nx`'s deterministic topological order."""
    return list(nx.lexicographical_topological_sort(G, key=order_key(G)))


# -- rewrites (in place on a DiGraph the pass owns; each keeps edges and `ir` consistent) -------------

def set_op(G: nx.DiGraph, v: str, node: Node) -> None:
    """Replace the op defining `v` by `node` (same result value, new op/operands/attrs), rewiring its
    in-edges. The result type must not change, so users stay valid.

    Raises:
        IRError: `v` is a param, `node` defines another value or changes the type, or an operand is unknown.
    """
    old = op_of(G, v)
    if old is None:
        raise IRError(f"%{v}: cannot replace a parameter by an op")
    if node.result != old.result:
        raise IRError(f"%{v}: replacement defines %{node.result.name}: {node.result.type} "
                      f"instead of {old.result.type}")
    for i in node.inputs:
        if i not in G:
            raise IRError(f"%{v} = {node.op}: operand %{i} is not defined")
    G.remove_edges_from([(u, v) for u in list(G.pred[v])])
    G.nodes[v]["ir"] = node
    _connect(G, v, node)


def add_op(G: nx.DiGraph, node: Node, pos: int) -> str:
    """Add a new op node at sort position `pos` (use the pos of the node it stands in for);
    returns its value name.

    Raises:
        IRError: the result name is taken or an operand is unknown.
    """
    v = node.result.name
    if v in G:
        raise IRError(f"%{v}: defined twice (SSA)")
    for i in node.inputs:
        if i not in G:
            raise IRError(f"%{v} = {node.op}: operand %{i} is not defined")
    G.add_node(v, kind=OP, ir=node, pos=pos)
    _connect(G, v, node)
    return v


def fresh_name(G: nx.DiGraph, base: str) -> str:
    """A value name not used in `G`: `base`, else `base.1`, `base.2`, ..."""
    if base not in G:
        return base
    k = 1
    while f"{base}.{k}" in G:
        k += 1
    return f"{base}.{k}"


def replace_uses(G: nx.DiGraph, old: str, new: str) -> None:
    """Make every user of `old` (and every graph output returning it) use `new` instead.

    `old` keeps existing (without users); `remove` or the dce pass drops it.

    Raises:
        IRError: the two values have different types (the users' type rules would change), or `new`
            depends on `old` (the rewrite would make a cycle).
    """
    if old == new:
        return
    if type_of(G, old) != type_of(G, new):
        raise IRError(f"cannot replace %{old}: {type_of(G, old)} by %{new}: {type_of(G, new)}")
    if nx.has_path(G, old, new):
        raise IRError(f"cannot replace %{old} by %{new}: %{new} depends on %{old}")
    for u in list(G.succ[old]):
        n = G.nodes[u]["ir"]
        set_op(G, u, dataclasses.replace(n, inputs=tuple(new if i == old else i for i in n.inputs)))
    outs = G.graph["outputs"]
    if any(v == old for _, v in outs):
        G.graph["outputs"] = tuple((k, new if v == old else v) for k, v in outs)


def remove(G: nx.DiGraph, v: str) -> None:
    """Delete op `v`, which must be unused (no users, not an output).

    Raises:
        IRError: `v` is a param, still has users, or is returned.
    """
    if op_of(G, v) is None:
        raise IRError(f"%{v}: parameters are never removed")
    if G.succ[v] or v in output_values(G):
        raise IRError(f"%{v}: still used")
    G.remove_node(v)
