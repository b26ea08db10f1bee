"""`cse`: common-subexpression elimination — structurally identical ops are merged.

Two ops are identical when they have the same op name, the same operands in the same order, the same
attributes and the same result type. Attribute values are compared by their exact identity, not by
Python `==`: -0.0 and 0.0 (equal in Python) stay distinct, as do 1, 1.0 and True, while NaN constants with the
same bits do merge. Commutativity is not used (a + b and b + a are not
merged): the pass stays purely structural.

The earliest op (in `from_nx` order) survives; the users and outputs of a duplicate move to it. One
sweep in topological order suffices: by the time an op is looked at, its operands have been merged,
so duplicates of duplicates are found too.
"""

from __future__ import annotations

import networkx as nx

from opgen.ir.core import exact_key
from opgen.passes.graph import OP, remove, replace_uses, topo_order


def node_key(n) -> tuple:
    """The identity of an op for CSE: (op, operands, attribute keys, result type)."""
    return n.op, n.inputs, tuple((k, exact_key(v)) for k, v in n.attrs), n.result.type


def cse(G: nx.DiGraph) -> nx.DiGraph:
    """Merge structurally identical ops (see module docstring).

    Input: a DiGraph from `to_nx` (not modified). Output: a new DiGraph in which no two ops are
    identical; params and output names are unchanged. Deterministic.
    """
    G = G.copy()
    seen: dict[tuple, str] = {}
    for v in topo_order(G):
        if G.nodes[v]["kind"] != OP:
            continue
        k = node_key(G.nodes[v]["ir"])
        first = seen.get(k)
        if first is None:
            seen[k] = v
            continue
        replace_uses(G, v, first)
        remove(G, v)
    return G
