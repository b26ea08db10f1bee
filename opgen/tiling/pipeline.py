"""THE list of passes and the kernel passes (docs/design.md "The pipeline").

`PIPELINE` is the list, in order, run by one pass manager (opgen.passes.pipeline's instruments): the tensor passes
(`TENSOR_PASSES`: canonicalize, cse, dce, fuse, on each specialisation's graph) then the kernel passes
(`KERNEL_PASSES`), once per operator on a `Unit` (the spec, its fused specialisations and what the stages produced):

  select_family   match the fused graph of the first specialisation against opgen.kernel.family.families():
                  the family and its layout; the family names the specialisations it is built from, which then
                  go through the tensor passes too
  lower           every specialisation to the family's Kernel IR (verified)
  count           what the programs hold on chip, the maximum over the specialisations
  tile            the tiling program, derived from the counts and the layout, and how its inputs are read (the
                  kernel classes take their strategies, and so their methods, from it)
  synchronise     the dependency pass (opgen.kernel.kir_sync) places the flags and barriers of the family's Kernel
                  IR classes
  plan_buffers    the buffer plans, proven to fit UB (and L1/L0) for every shape the spec allows

The list lives here, at the tiling stage, because its last passes are the tiling stage's: the kernel families'
tiling parts are installed by the modules of opgen.tiling (imported with the package), and nothing of an earlier
stage imports this module (docs/design.md "Packages flow one way"). `compile_unit(spec, ...)` runs the whole list
for a spec; `kernel_build(spec)` is the memoised full build the emitters and `opgen check` share.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, TextIO

import networkx as nx

from opgen.dsl.spec import short_loc
from opgen.errors import IRError
from opgen.kernel.family import NoKernel, _rel, choose
from opgen.kernel.rowlayout import Unsupported
from opgen.passes.graph import from_nx
from opgen.passes.pipeline import (TENSOR_PASSES, DumpInstrument, VerifyInstrument, _run_nx, check_pass_name,
                                   run_passes, tensor_pass_names)
from opgen.tiling.buffers import describe
from opgen.tiling.ub_proof import prove_ub

Pass = Callable
"""A pass: a tensor pass nx.DiGraph -> nx.DiGraph or a kernel pass Unit -> Unit."""


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

    def verify(self, name: str) -> None:
        """The checks after kernel pass `name` (verify_unit; the pass manager's VerifyInstrument calls it). Raises
        IRError."""
        verify_unit(name, self)

    def text(self, name: str) -> str:
        """Canonical text right after kernel pass `name` (print_unit; DumpInstrument prints it)."""
        return print_unit(name, self)


def _fused(unit: Unit, key) -> nx.DiGraph:
    """The specialisation `key` of the unit's spec after the tensor passes (observed by the unit's timing and
    verifying instruments, not its dumps)."""
    quiet = [i for i in unit.instruments if not isinstance(i, DumpInstrument)]
    return _run_nx(unit.spec.graph(key), None, quiet)


def select_family(unit: Unit) -> Unit:
    """Choose the family by matching the first specialisation's fused graph; add the specialisations the family
    builds the kernel from. Raises opgen.kernel.family.NoKernel, naming that specialisation when the spec has
    several."""
    G0 = unit.graphs[unit.key0]
    try:
        fam, lay = choose(unit.spec, from_nx(G0), G0.graph["plan"])
    except NoKernel as e:
        if len(unit.spec.keys()) < 2 or e.key:
            raise
        raise NoKernel(e.op, e.value, e.loc, e.why, e.family, unit.spec.key_text(unit.key0)) from None
    unit.family, unit.layout = fam, lay
    if not unit.only_key0:
        for k in fam.keys(unit.spec, lay):
            if k not in unit.graphs:
                unit.graphs[k] = _fused(unit, k)
    return unit


def lower(unit: Unit) -> Unit:
    """Every specialisation of the unit to the family's Kernel IR. Raises NoKernel naming the value that has no
    lowering."""
    fam = unit.family
    _refuse_static_dtypes(unit.spec, fam)
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
    except Unsupported as e:   # lowering one specialisation alone (graph --present): its refusal names it
        key = ""
        if len(unit.spec.keys()) > 1:
            key = unit.spec.key_text(unit.key0) if unit.only_key0 else _refused_key(unit, graphs, e)
        raise NoKernel(unit.spec.name, e.value, _rel(e.loc), e.why, fam.name, key) from None
    return unit


def _refused_key(unit: Unit, graphs: dict, e: Unsupported) -> str:
    """The specialisation (OpSpec.key_text) whose own lowering gives the refusal `e` of the family's lowering of
    every specialisation in `graphs` ({key: Graph}), so that the error of `generate` / `graph --stage kernel` names
    it as README "opgen generate" says; "" when none refuses alone with the same value, line and rule (a rule about
    the specialisations together: their anchor domains differ). Run only on the way to that error: each key is
    lowered alone once more."""
    for k, g in graphs.items():
        try:
            unit.family.lower(unit.spec, unit.layout, {k: g}, only=k)
        except Unsupported as e2:
            if (e2.value, e2.loc, e2.why) == (e.value, e.loc, e.why):
                return unit.spec.key_text(k)
    return ""


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
    try:
        unit.tiling = unit.family.tile(unit.spec, unit.lowered, unit.counts)
    except Unsupported as e:
        raise NoKernel(unit.spec.name, e.value, _rel(e.loc), e.why, unit.family.name) from None
    return unit


def plan_buffers(unit: Unit) -> Unit:
    """The buffer plans, proven to fit on chip for every shape the spec allows (opgen.tiling.ub_proof). Raises
    SpecError at the dim's declaration line when a plan does not fit."""
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
        check_pipeline_pass(until)
    dumps = {dump_after} if isinstance(dump_after, str) else set(dump_after or ())
    for d in sorted(dumps):
        check_pipeline_pass(d)
    inst = list(instruments) + ([VerifyInstrument()] if verify_each else []) + (
        [DumpInstrument(dumps, out)] if dumps else [])
    key0 = key if key is not None else spec.keys()[0]
    G = _run_nx(spec.graph(key0), until, inst)
    unit = Unit(spec, key0, {key0: G}, only_key0, tuple(inst))
    if until in tensor_pass_names():
        return unit
    return run_passes(KERNEL_PASSES, unit, inst, until)


def _refuse_static_dtypes(spec, fam) -> None:
    """Raises NoKernel for a spec with static dtype variables (OpSpec.dtype_vars(static=True): one specialisation
    per dtype, docs/design.md "Dtype variables that select the body") when family `fam` does not key its classes by
    a dtype (its `static_dtype_keys` false), naming the first input such a variable types and the family."""
    sv = spec.static_dtype_vars
    if not sv or getattr(fam, "static_dtype_keys", False):
        return
    i = next(i for i in spec.inputs if getattr(i.dtype, "name", None) in sv)
    raise NoKernel(spec.name, i.name, _rel(short_loc(i.loc)) if i.loc else "",
                   f"input {i.name} is typed by {i.dtype.name}, a static dtype variable (dtype_vars(static=True): one "
                   f"specialisation of the body per dtype); the {fam.name} family does not lower specialisations "
                   f"that differ by a dtype (its classes are keyed by static attributes, presences and shape forms)",
                   fam.name)


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


def pass_names() -> list[str]:
    """Names of the passes of `PIPELINE`, in order."""
    return [p.__name__ for p in PIPELINE]


def check_pipeline_pass(name: str) -> str:
    """Return `name` when it names a pass of `PIPELINE`. Raises OpgenError (one line naming the valid passes)."""
    return check_pass_name(name, pass_names())
