"""The pass manager and the tensor passes (docs/design.md "The pipeline").

The tensor passes (`TENSOR_PASSES`: canonicalize, cse, dce, fuse) are named functions
`pass_(G: nx.DiGraph) -> nx.DiGraph`, pure and deterministic, run on every specialisation a kernel is built from.
They are the head of THE list of passes, `opgen.tiling.pipeline.PIPELINE`, whose kernel passes (select_family,
lower, count, tile, synchronise, plan_buffers) run once per operator on a Unit; that list lives at the tiling
stage because its last passes are the tiling stage's, so no package imports a later one (docs/design.md "Packages
flow one way").

Instruments observe every pass of the list (`Instrument`: before/after hooks): `VerifyInstrument` runs the level's
verifier after each pass (the IR verifier on tensor graphs; a kernel-stage IR's own `verify(pass)`),
`DumpInstrument` prints the canonical text right after named passes (`--dump-after`; with the spec locations, as
`opgen graph`; a kernel-stage IR's own `text(pass)`), `TimingInstrument` adds up the seconds of each pass
(`--time-passes`). `run(g, ...)` runs the tensor passes on one Graph, `optimize(g)` the tensor-to-tensor ones and
`plan(g)` returns the launch plan `fuse` built.
"""

from __future__ import annotations

import dataclasses
import sys
import time
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
from opgen.passes.plan import KernelPlan, print_plan

Pass = Callable[[nx.DiGraph], nx.DiGraph]

TENSOR_PASSES: list[Pass] = [canonicalize, cse, dce, fuse]
"""The passes over one specialisation's tensor IR (nx.DiGraph -> nx.DiGraph)."""


def tensor_pass_names() -> list[str]:
    """Names of the tensor passes (the prefix of the pipeline that `run` applies to one graph)."""
    return [p.__name__ for p in TENSOR_PASSES]


def check_pass_name(name: str, names: list[str] | None = None) -> str:
    """Return `name` when it is one of `names` (default: the tensor passes).

    Raises:
        OpgenError: unknown pass (one line naming the valid passes).
    """
    names = tensor_pass_names() if names is None else names
    if name not in names:
        raise OpgenError(f"unknown pass {name!r}; valid passes: {', '.join(names)}")
    return name


def run(g: Graph, until: str | None = None, dump_after: str | Iterable[str] | None = None,
        verify_each: bool = True, out: TextIO | None = None) -> Graph:
    """Run the tensor passes on graph `g`.

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
    inst = ([VerifyInstrument()] if verify_each else []) + ([DumpInstrument(dumps, out)] if dumps else [])
    return from_nx(_run_nx(g, until, inst))


def run_passes(passes, ir, instruments=(), until: str | None = None):
    """The pass manager: each pass of `passes` in order on `ir` (a pass is a function IR -> IR named by its
    __name__), every instrument's before / after around it, stopping after the pass named `until` (None: all).
    Returns the last IR. Raises what a pass or an instrument raises (a VerifyInstrument: IRError)."""
    for p in passes:
        for i in instruments:
            i.before(p.__name__, ir)
        ir = p(ir)
        for i in instruments:
            i.after(p.__name__, ir)
        if p.__name__ == until:
            break
    return ir


def _run_nx(g: Graph, until, instruments=()) -> nx.DiGraph:
    """The tensor passes on `g` as an nx.DiGraph, observed by `instruments`, stopping after pass `until`."""
    return run_passes(TENSOR_PASSES, to_nx(g), instruments, until)


# ------------------------------------------------------------------------------------------------ instruments
class Instrument:
    """Observes the pass manager: before(pass name, IR) and after(pass name, IR); the IR is an nx.DiGraph for
    tensor passes and a Unit for kernel passes."""

    def before(self, name: str, ir) -> None:
        """Called before pass `name` runs on `ir`."""

    def after(self, name: str, ir) -> None:
        """Called after pass `name` produced `ir`."""


class VerifyInstrument(Instrument):
    """Runs the level's verifier after every pass (`every_tensor_pass=False`: after the last tensor pass of each
    specialisation and every kernel pass only, the cheap form the emitting path uses). Raises IRError "after pass
    NAME: ..."."""

    def __init__(self, every_tensor_pass: bool = True):
        self.every_tensor_pass = every_tensor_pass

    def after(self, name, ir):
        try:
            if isinstance(ir, nx.DiGraph):
                if self.every_tensor_pass or name == TENSOR_PASSES[-1].__name__:
                    verify(from_nx(ir))
            else:   # a later stage's IR (opgen.tiling.pipeline.Unit) verifies itself
                ir.verify(name)
        except IRError as e:
            raise IRError(f"after pass {name}: {e}") from None


class DumpInstrument(Instrument):
    """Prints the canonical text of the IR right after the named passes to `out` (default standard output)."""

    def __init__(self, names, out: TextIO | None = None):
        self.names, self.out = set(names), out

    def after(self, name, ir):
        if name not in self.names:
            return
        out = self.out or sys.stdout
        if isinstance(ir, nx.DiGraph):
            try:
                out.write(print_graph(from_nx(ir), locs=True))
            except IRError as e:
                raise IRError(f"after pass {name}: {e}") from None
            if "plan" in ir.graph:
                out.write(print_plan(ir.graph["plan"]))
        else:   # a later stage's IR prints itself (opgen.tiling.pipeline.Unit)
            out.write(ir.text(name))


class TimingInstrument(Instrument):
    """Adds up the wall seconds of each pass over every run it observes: `seconds` {pass: s}, `calls` {pass: n}."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._t0: dict[str, float] = {}

    def before(self, name, ir):
        self._t0[name] = time.perf_counter()

    def after(self, name, ir):
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - self._t0.pop(name)
        self.calls[name] = self.calls.get(name, 0) + 1

    def report(self) -> str:
        """One line per pass in the order the passes first ran (the pipeline's): seconds and calls."""
        lines = [f"{n:14s} {t:9.3f} s  {self.calls[n]:5d} runs" for n, t in self.seconds.items()]
        return "pass timings {\n" + "".join(f"  {ln}\n" for ln in lines) + "}\n"


def plan(g: Graph, tiling=None) -> KernelPlan:
    """The Kernel IR of `g`: run the tensor passes and return the launch plan `fuse` built; with `tiling` (a
    TilingProgram: kernel_build(spec).tiling.program) the plan also names the tiling-data fields."""
    p = _run_nx(g, "fuse").graph["plan"]
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
