"""The pass pipeline: tensor passes, kernel-family stages, tiling and buffer planning (docs/design.md "The pipeline").

`PIPELINE` is THE list of passes, in order, run by one pass manager. The tensor passes (`TENSOR_PASSES`:
canonicalize, cse, dce, fuse) are named functions `pass_(G: nx.DiGraph) -> nx.DiGraph`, pure and deterministic,
run on every specialisation the kernel is built from. The kernel passes (`KERNEL_PASSES`) run once per operator
on a `Unit` (the spec, its fused specialisations and what the stages produced):

  select_family   match the fused graph of the first specialisation against opgen.kernel.family.families():
                  the family and its layout; the family names the specialisations it is built from, which then
                  go through the tensor passes too
  lower           every specialisation to the family's Kernel IR (verified)
  count           what the programs hold on chip, the maximum over the specialisations
  tile            the tiling program, derived from the counts and the layout, and how its inputs are read (the
                  rows family's kernel classes take their strategies, and so their methods, from it)
  synchronise     the dependency pass (opgen.kernel.kir_sync) places the flags and barriers of the family's Kernel
                  IR classes (the cube and rows families'; head rows place theirs by opgen.kernel.headsched)
  plan_buffers    the buffer plans, proven to fit UB (and L1/L0) for every shape the spec allows

Instruments observe every pass (`Instrument`: before/after hooks): `VerifyInstrument` runs the level's verifier
after each pass (the IR verifier on tensor graphs, the family's checks on kernel stages), `DumpInstrument`
prints the canonical text right after named passes (`--dump-after`; with the spec locations, as `opgen graph`), `TimingInstrument` adds up the seconds of
each pass (`--time-passes`). `run(g, ...)` runs the tensor passes on one Graph; `compile_unit(spec, ...)` runs
the whole list for a spec; `kernel_build(spec)` is the memoised full build the emitters share.
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


def pass_names() -> list[str]:
    """Names of the passes of `PIPELINE`, in order."""
    return [p.__name__ for p in PIPELINE]


def tensor_pass_names() -> list[str]:
    """Names of the tensor passes (the prefix of PIPELINE that `run` applies to one graph)."""
    return [p.__name__ for p in PIPELINE if getattr(p, "level", "tensor") == "tensor"]


def check_pass_name(name: str, tensor_only: bool = False) -> str:
    """Return `name` when it names a pass of `PIPELINE` (a tensor pass when `tensor_only`).

    Raises:
        OpgenError: unknown pass (one line naming the valid passes).
    """
    names = tensor_pass_names() if tensor_only else pass_names()
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
        check_pass_name(until, tensor_only=True)
    dumps = set()
    if dump_after is not None:
        dumps = {dump_after} if isinstance(dump_after, str) else set(dump_after)
        for d in sorted(dumps):
            check_pass_name(d, tensor_only=True)
    inst = ([VerifyInstrument()] if verify_each else []) + ([DumpInstrument(dumps, out)] if dumps else [])
    return from_nx(_run_nx(g, until, inst))


def _run_nx(g: Graph, until, instruments=()) -> nx.DiGraph:
    G = to_nx(g)
    for p in PIPELINE:
        if getattr(p, "level", "tensor") != "tensor":
            break
        for i in instruments:
            i.before(p.__name__, G)
        G = p(G)
        for i in instruments:
            i.after(p.__name__, G)
        if p.__name__ == until:
            break
    return G


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
            else:
                verify_unit(name, ir)
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
        else:
            out.write(print_unit(name, ir))


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
        """One line per pass in PIPELINE order: seconds and calls."""
        lines = [f"{n:14s} {self.seconds[n]:9.3f} s  {self.calls[n]:5d} runs" for n in pass_names() if n in self.seconds]
        return "pass timings {\n" + "".join(f"  {ln}\n" for ln in lines) + "}\n"


# ------------------------------------------------------------------------------------------------ kernel passes
@dataclasses.dataclass
class Unit:
    """What the kernel passes transform: the spec, the specialisation shown or built first (`key0`), {key: fused
    nx.DiGraph}, and the products of the stages (family, layout, lowered, counts, tiling; `proven`: the cases the
    buffer-plan proof checked). `only_key0`: lower just key0 (`opgen graph --stage kernel`)."""

    spec: object
    key0: object
    graphs: dict
    only_key0: bool = False
    instruments: tuple = ()
    family: object = None
    layout: object = None
    lowered: object = None
    counts: object = None
    tiling: object = None
    proven: list = dataclasses.field(default_factory=list)


def _fused(unit: Unit, key) -> nx.DiGraph:
    """The specialisation `key` of the unit's spec after the tensor passes (observed by the unit's timing and
    verifying instruments, not its dumps)."""
    quiet = [i for i in unit.instruments if not isinstance(i, DumpInstrument)]
    return _run_nx(unit.spec.graph(key), None, quiet)


def select_family(unit: Unit) -> Unit:
    """Choose the family by matching the first specialisation's fused graph; add the specialisations the family
    builds the kernel from. Raises opgen.kernel.family.NoKernel."""
    from opgen.kernel.family import choose

    G0 = unit.graphs[unit.key0]
    fam, lay = choose(unit.spec, from_nx(G0), G0.graph["plan"])
    unit.family, unit.layout = fam, lay
    if not unit.only_key0:
        for k in fam.keys(unit.spec, lay):
            if k not in unit.graphs:
                unit.graphs[k] = _fused(unit, k)
    return unit


def lower(unit: Unit) -> Unit:
    """Every specialisation of the unit to the family's Kernel IR. Raises NoKernel naming the value that has no
    lowering."""
    from opgen.kernel.family import NoKernel, _rel
    from opgen.kernel.rowlayout import Unsupported

    fam = unit.family
    keys = [unit.key0] if unit.only_key0 else fam.keys(unit.spec, unit.layout)
    for k in keys:   # the family lowers what fuse planned: one launch of its kind per specialisation
        plan = unit.graphs[k].graph["plan"]
        if len(plan.kernels) != 1 or not fam.claims(plan):
            raise NoKernel(unit.spec.name, plan.kernels[0].writes[0] if plan.kernels and plan.kernels[0].writes
                           else "?", "", f"the specialisation {unit.spec.key_text(k)} is planned as {len(plan.kernels)} launch(es) not of the "
                           f"{fam.name} kind", fam.name)
    graphs = {k: from_nx(unit.graphs[k]) for k in keys}
    try:
        unit.lowered = fam.lower(unit.spec, unit.layout, graphs, only=unit.key0 if unit.only_key0 else None)
    except Unsupported as e:
        raise NoKernel(unit.spec.name, e.value, _rel(e.loc), e.why, fam.name) from None
    return unit


def synchronise(unit: Unit) -> Unit:
    """The lowered kernel classes with the synchronisation their accesses need, placed by the dependency pass
    (opgen.kernel.kir_sync; the family's `synchronise`)."""
    unit.lowered = unit.family.synchronise(unit.lowered)
    return unit


def count(unit: Unit) -> Unit:
    """What the lowered programs hold on chip (the family's counts, maxima over the specialisations)."""
    unit.counts = unit.family.counts(unit.lowered)
    return unit


def tile(unit: Unit) -> Unit:
    """The tiling program derived from the counts and the layout, with how the TilingFunc reads its inputs."""
    from opgen.kernel.family import NoKernel, _rel
    from opgen.kernel.rowlayout import Unsupported
    # Importing the tiling package installs the families' tiling parts that live there (opgen/tiling/__init__.py).
    import opgen.tiling.ub_proof  # noqa: F401  # lazy: start-up time

    try:
        unit.tiling = unit.family.tile(unit.spec, unit.lowered, unit.counts)
    except Unsupported as e:
        raise NoKernel(unit.spec.name, e.value, _rel(e.loc), e.why, unit.family.name) from None
    return unit


def plan_buffers(unit: Unit) -> Unit:
    """The buffer plans, proven to fit on chip for every shape the spec allows (opgen.tiling.ub_proof). Raises
    SpecError at the dim's declaration line when a plan does not fit."""
    from opgen.tiling.ub_proof import prove_ub

    t = unit.tiling
    unit.proven = t.proven if t.proven is not None else prove_ub(unit.spec, t.program, t.inputs)
    return unit


for _p in (select_family, lower, count, tile, synchronise, plan_buffers):
    _p.level = "kernel"

KERNEL_PASSES: list[Pass] = [select_family, lower, count, tile, synchronise, plan_buffers]
"""The per-operator passes over a Unit."""

PIPELINE: list[Pass] = TENSOR_PASSES + KERNEL_PASSES


def verify_unit(name: str, unit: Unit) -> None:
    """The checks after kernel pass `name`: a layout exists; every lowered program verifies (the family's own
    verifier ran in lower) and is present for every key; counts exist; every tiling-program input has a reading
    rule; the buffer proof checked at least one case. Raises IRError."""
    if name == "select_family" and (unit.family is None or unit.layout is None):
        raise IRError("no family chosen")
    if name in ("lower", "synchronise") and (unit.lowered is None or not unit.lowered.programs):
        raise IRError("no lowered program")
    if name == "count" and unit.counts is None:
        raise IRError("no counts")
    if name == "tile":
        missing = [n for n in unit.tiling.program.inputs if n not in unit.tiling.inputs]
        if missing:
            raise IRError(f"tiling program {unit.tiling.program.name}: inputs without a reading rule: {missing}")
    if name == "plan_buffers" and not unit.proven:
        raise IRError("the buffer-plan proof checked no case")


def print_unit(name: str, unit: Unit) -> str:
    """Canonical text of the unit right after kernel pass `name`."""
    fam = unit.family
    if name == "select_family":
        return f"family {fam.name}: {fam.layout_text(unit.layout)}\n"
    if name == "lower":
        return fam.program_text(unit.lowered, unit.key0)
    if name == "synchronise":   # the class serving key0 (a family may build its kernel from other keys: the one
        progs = unit.lowered.programs   # of key0's static attributes then)
        key = unit.key0 if unit.key0 in progs else \
            next((k for k in progs if k.static == unit.key0.static), next(iter(progs)))
        return fam.synchronised_text(unit.lowered, key)
    if name == "count":
        return fam.counts_text(unit.counts)
    if name == "tile":
        t = unit.tiling
        ins = "".join(f"  input {n} = {_how(h)}\n" for n, h in t.inputs.items())
        return f"tiling program {t.program.name} {{\n{ins}{t.program.to_cpp(indent='  ')}\n}}\n"
    if name == "plan_buffers":
        from opgen.tiling.buffers import describe

        out = []
        for strategy, bufs in sorted(unit.tiling.plans.items()):
            rows = "rowsPerPass" if strategy == 1 else "groupRows"
            out.append(f"buffers strategy {strategy} {{\n  " + "\n  ".join(describe(bufs, rows)) + "\n}\n")
        return "".join(out)
    return ""


def _how(h) -> str:
    return " ".join(map(str, h)) if isinstance(h, tuple) else str(h)


def compile_unit(spec, key=None, until: str | None = None, dump_after=None, instruments=(), only_key0=False,
                 out: TextIO | None = None, verify_each: bool = True) -> Unit:
    """Run PIPELINE for `spec`: the tensor passes on `key` (default the first specialisation), then the kernel
    passes (stopping after `until`). `dump_after`: pass names to print after; `instruments`: more instruments
    (e.g. a TimingInstrument); `only_key0`: lower only `key`. Raises OpgenError (unknown pass), NoKernel, IRError,
    SpecError."""
    if until is not None:
        check_pass_name(until)
    dumps = {dump_after} if isinstance(dump_after, str) else set(dump_after or ())
    for d in sorted(dumps):
        check_pass_name(d)
    inst = list(instruments) + ([VerifyInstrument()] if verify_each else []) + (
        [DumpInstrument(dumps, out)] if dumps else [])
    key0 = key if key is not None else spec.keys()[0]
    G = _run_nx(spec.graph(key0), until, inst)
    unit = Unit(spec, key0, {key0: G}, only_key0, tuple(inst))
    if until in tensor_pass_names():
        return unit
    for p in KERNEL_PASSES:
        for i in inst:
            i.before(p.__name__, unit)
        unit = p(unit)
        for i in inst:
            i.after(p.__name__, unit)
        if p.__name__ == until:
            break
    return unit


def kernel_build(spec) -> Unit:
    """The full kernel build of `spec` (every pass), memoised per spec object: the kernel and tiling emitters
    share it. The verifiers run on it (each specialisation's fused graph, each kernel stage's products). Raises as
    compile_unit."""
    got = getattr(spec, "_opgen_kernel_build", None)
    if got is None:   # verified cheaply: each fused graph once, every kernel stage
        got = compile_unit(spec, verify_each=False, instruments=(VerifyInstrument(every_tensor_pass=False),))
        try:
            spec._opgen_kernel_build = got
        except AttributeError:
            pass
    return got


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
