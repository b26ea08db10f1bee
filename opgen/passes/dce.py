"""`dce`: dead-code elimination — ops that no output depends on are dropped; params always stay
(they are the operator's interface, used or not)."""

from __future__ import annotations

import networkx as nx

from opgen.passes.graph import OP, output_values


def live_values(G: nx.DiGraph) -> set[str]:
    """The outputs and every value they (transitively) depend on."""
    live: set[str] = set()
    stack = sorted(output_values(G))
    while stack:
        v = stack.pop()
        if v in live:
            continue
        live.add(v)
        stack.extend(G.pred[v])
    return live


def dce(G: nx.DiGraph) -> nx.DiGraph:
    """Drop dead ops.

    Input: a DiGraph from `to_nx` (not modified). Output: a new DiGraph holding the params and the
    live ops only. Deterministic.
    """
    live = live_values(G)
    dead = [v for v, d in G.nodes(data=True) if d["kind"] == OP and v not in live]
    G = G.copy()
    G.remove_nodes_from(dead)
    return G
