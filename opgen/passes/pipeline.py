"""The pass pipeline over the tensor IR (DESIGN.md "Passes").

`PIPELINE` is THE list of passes, in order. Every pass is a named function
`pass_(G: nx.DiGraph) -> nx.DiGraph` that is pure (it returns a new DiGraph and leaves its argument
alone) and deterministic. Later passes (fuse, tile, plan_buffers) are appended to this list.

`run(g, ...)` lowers a Graph to networkx (`opgen.passes.graph.to_nx`), applies the passes in order
(optionally stopping after one, printing the IR after one, and running the IR verifier after each),
and returns the resulting Graph. `optimize(g)` is the whole tensor-level pipeline.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Callable, Iterable, TextIO

import networkx as nx

from opgen.errors import IRError, OpgenError
from opgen.ir.core import Graph
from opgen.ir.printer import print_graph
from opgen.ir.verify import verify
from opgen.passes.canonicalize import canonicalize
from opgen.passes.cse import cse
from opgen.passes.dce import dce
from opgen.passes.fuse import fuse
from opgen.passes.graph import from_nx, to_nx
from opgen.kernel import KernelPlan, print_plan

Pass = Callable[[nx.DiGraph], nx.DiGraph]

PIPELINE: list[Pass] = [
    canonicalize,
    cse,
    dce,
    fuse,
    # tile, plan_buffers: the tiling programs and UB proofs live in opgen.tiling (see `tile` below)
]


def pass_names() -> list[str]:
    """Names of the passes of `PIPELINE`, in order."""
    return [p.__name__ for p in PIPELINE]


def check_pass_name(name: str) -> str:
    """Return `name` when it names a pass of `PIPELINE`.

    Raises:
        OpgenError: unknown pass (one line naming the valid passes).
    """
    names = pass_names()
    if name not in names:
        raise OpgenError(f"unknown pass {name!r}; valid passes: {', '.join(names)}")
    return name


def run(g: Graph, until: str | None = None, dump_after: str | Iterable[str] | None = None,
        verify_each: bool = True, out: TextIO | None = None) -> Graph:
    """Run `PIPELINE` on graph `g`.

    Args:
        g: a tensor IR graph (e.g. `spec.graph(key)`); not modified.
        until: stop after this pass (inclusive); None runs every pass.
        dump_after: a pass name (or several): print the canonical IR text right after that pass to
            `out` (default: standard output).
        verify_each: run the IR verifier (`opgen.ir.verify`) after every pass.
        out: the stream for `dump_after`.

    Returns:
        The graph after the last pass run.

    Raises:
        OpgenError: `until` or `dump_after` names no pass (message lists the valid ones).
        IRError: a pass left a DiGraph that does not convert back, or (with verify_each) an invalid
            graph ("after pass NAME: ...").
    """
    if until is not None:
        check_pass_name(until)
    dumps = set()
    if dump_after is not None:
        dumps = {dump_after} if isinstance(dump_after, str) else set(dump_after)
        for d in sorted(dumps):
            check_pass_name(d)
    return from_nx(_run_nx(g, until, dumps, verify_each, out))


def _run_nx(g: Graph, until, dumps, verify_each, out) -> nx.DiGraph:
    G = to_nx(g)
    for p in PIPELINE:
        G = p(G)
        if verify_each or p.__name__ in dumps:
            try:
                result = from_nx(G)
                if verify_each:
                    verify(result)
            except IRError as e:
                raise IRError(f"after pass {p.__name__}: {e}") from None
        if p.__name__ in dumps:
            (out or sys.stdout).write(print_graph(result))
            if "plan" in G.graph:
                (out or sys.stdout).write(print_plan(G.graph["plan"]))
        if p.__name__ == until:
            break
    return G


def plan(g: Graph, tiling=None) -> KernelPlan:
    """The Kernel IR of `g`: run the whole pipeline and return the launch plan `fuse` built; with
    `tiling` (a TilingProgram, opgen.tiling.TILINGS) the plan also names the tiling-data fields."""
    p = _run_nx(g, None, set(), False, None).graph["plan"]
    if tiling is not None:
        docs = {n: d for n, _, d in tiling.stmts}
        p = dataclasses.replace(p, tiling=tuple((f, docs.get(f, "")) for f in tiling.fields))
    return p


TENSOR_LEVEL_LAST = "dce"
"""The last pass that maps tensor IR to tensor IR; `optimize` stops after it."""


def optimize(g: Graph, verify_each: bool = False) -> Graph:
    """The tensor IR after the tensor-level passes (canonicalize, cse, dce): computes exactly what `g`
    computes (the interpreter gives bit-identical outputs in both modes). Raises IRError as `run` does."""
    return run(g, until=TENSOR_LEVEL_LAST, verify_each=verify_each)
