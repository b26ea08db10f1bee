"""Fusion: partition the optimized tensor IR into launches (docs/design.md "Passes").

Every op of a specialisation joins one kernel, so each operator input is read by one fused loop and
each output written once (one launch per op). Inside it, matmuls run on the cube unit and everything
else (elementwise, broadcast, reduce, gather, scatter-add, casts) on the vector unit; a value produced on
one unit and used on the other crosses through GM workspace (docs/reference/ascendc.md §1.1). A kernel with
cube work is a mixed AIC/AIV launch (KERNEL_TYPE_MIX_AIC_1_2), else AIV-only. Each value's iteration
domain (the dims of its shape) is recorded for the tiling and code generation that follow.

The pass annotates the DiGraph (node attribute `unit`, graph attribute `plan`) and changes no op, so the
tensor IR it returns is unchanged and still verifies; `plan_of(G)` reads the Kernel IR back.
"""

from __future__ import annotations

import networkx as nx

from opgen.ir.dims import Variadic, as_dim
from opgen.passes.plan import Kernel, KernelPlan, Stage, verify_plan
from opgen.passes.graph import OP, PARAM, topo_order

CUBE_OPS = {"matmul"}


def _domain(ty) -> str:
    names = []
    for d in ty.shape:
        if isinstance(d, Variadic):
            names.append("*" + d.name)
        elif as_dim(d) != as_dim(1):
            names.append(str(d))
    return ", ".join(names)


def fuse(G: nx.DiGraph) -> nx.DiGraph:
    """Annotate `G` with its launch plan (module docstring); pure: returns a new DiGraph."""
    H = G.copy()
    order = [v for v in topo_order(H) if H.nodes[v]["kind"] == OP]
    unit = {v: ("cube" if H.nodes[v]["ir"].op in CUBE_OPS else "vector") for v in order}
    for v, u in unit.items():
        H.nodes[v]["unit"] = u
    params = [v for v in sorted(H.nodes, key=lambda x: H.nodes[x]["pos"]) if H.nodes[v]["kind"] == PARAM]
    reads = tuple(p for p in params if H.out_degree(p) > 0 and H.nodes[p]["ir"].kind == "input")
    outs = tuple(v for _, v in H.graph["outputs"])
    workspace = tuple(v for v in order if any(unit.get(w) not in (None, unit[v]) for w in H.successors(v)))
    stages = []
    for u in ("cube", "vector"):
        vals = tuple(v for v in order if unit[v] == u)
        if vals:
            stages.append(Stage(u, vals))
    kind = "KERNEL_TYPE_MIX_AIC_1_2" if any(s.unit == "cube" for s in stages) else "KERNEL_TYPE_AIV_ONLY"
    domains = tuple((v, _domain(H.nodes[v]["ir"].result.type)) for v in order)
    kernel = Kernel(H.graph["name"], kind, tuple(stages), reads, tuple(sorted(set(outs), key=outs.index)),
                    workspace, domains)
    plan = KernelPlan(H.graph["name"], (kernel,))
    verify_plan(plan, set(params), set(outs))
    H.graph["plan"] = plan
    return H


def plan_of(G: nx.DiGraph) -> KernelPlan:
    """The KernelPlan `fuse` attached to `G`. Raises KeyError when `fuse` has not run."""
    return G.graph["plan"]
