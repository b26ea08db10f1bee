"""Kernel families: how any spec gets a kernel (docs/design.md "Kernel families").

A family is one schedule template plus its analysis. Every family implements one protocol (`Family`):

  claims(plan)                    whether the launch plan `fuse` made of a specialisation (opgen.kernel.KernelPlan:
                                  its launches and their cube / vector stages) is of the family's kind; its rule
                                  is the one reported when no family lowers the graph
  match(spec, graph, plan)        the structural analysis of one fused specialisation against its plan -> the
                                  family's layout; raises opgen.kernel.rowlayout.Unsupported naming the value and
                                  the rule
  keys(spec, layout)              the specialisations the kernel is built from
  lower(spec, layout, graphs)     the family's Kernel IR of each specialisation (a `Lowered`; only=key: that one,
                                  for display)
  counts(lowered)                 what the programs hold on chip, the maximum over the specialisations
  tile(spec, lowered, counts)     the tiling program, how the TilingFunc reads each of its inputs (derived from
                                  the layout) and the buffer plans, as a `Tiling`
  emit(spec, lowered, tiling)     {path: text} of op_kernel/
  program_text(lowered, key)      canonical text of one specialisation's Kernel IR (`opgen graph --stage kernel`)

`tile` (and `counts`, where the counts are the tiling's summary) belong to the tiling stage and `emit` to codegen:
the modules there install them into the family class (`Family.install`), so nothing here imports a later stage.

`families()` returns THE list (the family modules `register` into it), tried in order; the first whose match returns a layout lowers the spec. Nothing here or
in a family knows an operator's name: the families look at shapes, ops and the dataflow of the fused graph.
What belongs to one operator is declared in its spec (`OpSpec.kernel_checks`: the device-data rules its kernel
checks with Trap(); `OpSpec.gm_reference`: the reference's GM estimate of CANN's kernel).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from opgen.errors import OpgenError
from opgen.kernel.rowlayout import Unsupported


class NoKernel(OpgenError):
    """No kernel family lowers a specialisation of a spec: names the op, the IR value, its spec line and what is
    unsupported (`opgen generate`, `check`, `graph --stage tiled|kernel` exit 2 with this one line). `key`: the
    specialisation in words (OpSpec.key_text) when the spec has several and the refusal is known to be about this
    one, printed after the location (`... %v6 (my_op.py:24) in the specialisation bias present: ...`): one kernel
    serves every specialisation, so a refusal of another one than `graph --present` asked for stops it too."""

    def __init__(self, op: str, value: str, loc: str, why: str, family: str, key: str = ""):
        self.op, self.value, self.loc, self.why, self.family, self.key = op, value, loc, why, family, key
        where = (f" ({loc})" if loc else "") + (f" in the specialisation {key}" if key else "")
        super().__init__(f"{op}: no kernel family lowers %{value}{where}: {why} [{family} family]")


@dataclass
class Tiling:
    """The host tiling of a kernel: the TilingProgram, {program input: how the TilingFunc reads it}
    (opgen.tiling.emit), the buffer plans {strategy: [Buffer]}, a one-line doc of the strategy and `fits_fail`: the
    family's own words for the emitted tiling's error when the program's `fits` is 0 ("{op}" stands for the operator;
    "" gives the UB families' "no UB plan of {op} holds this shape"); `proven`: the UB proof's checked cases when
    the family already ran it on this program (opgen.tiling.ub_proof.prove_ub; None: not run)."""

    program: object
    inputs: dict
    plans: dict
    doc: str
    fits_fail: str = ""
    proven: list | None = None


@dataclass
class Lowered:
    """A family's lowering of one spec: the layout, {spec key: Kernel-IR program} and family-specific extras."""

    family: str
    layout: object
    programs: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)


class Family:
    """Base of the kernel families (module docstring). Subclasses set `name` and `doc` and implement the
    protocol."""

    name = ""
    doc = ""
    kernel_type = ""
    """The KERNEL_TYPE_* the family's kernel entry declares when it differs from the launch plan's (opgen.passes.fuse
    annotates by units; a family may fold a vector op into the cube path, as the cube family folds the output
    cast into Fixpipe); "" follows the plan."""

    def entry_kernel_type(self, lowered) -> str:
        """The KERNEL_TYPE_* of the kernel entry of `lowered` ("" follows the plan): the family's kernel_type unless
        a family's lowering decides it."""
        return self.kernel_type

    def claims(self, plan) -> bool:
        """Whether launch plan `plan` (opgen.kernel.KernelPlan) is of the family's kind."""
        raise NotImplementedError

    def match(self, spec, g, plan):
        """The family's layout of fused graph `g` (one specialisation of `spec`, planned as `plan`). Raises
        opgen.kernel.rowlayout.Unsupported naming the value and the rule."""
        raise NotImplementedError

    def keys(self, spec, layout) -> list:
        """The specialisation keys (opgen.dsl.spec.SpecKey) the kernel is built from."""
        raise NotImplementedError

    def lower(self, spec, layout, graphs: dict, only=None) -> Lowered:
        """The Kernel IR of every specialisation in `graphs` ({key: fused Graph}; `only`: just that key, for
        display). Raises Unsupported."""
        raise NotImplementedError

    def synchronise(self, lowered: Lowered) -> Lowered:
        """`lowered` with its kernel classes synchronised (the dependency pass, opgen.kernel.kir_sync.place_syncs:
        the flags and barriers the accesses need, none by rule). It runs after `tile` (a family may build its
        classes there, from the strategies the tiling decides). Default: unchanged, for a family whose lowering is
        not Kernel IR classes."""
        return lowered

    @classmethod
    def install(cls, **parts) -> None:
        """Install this family's parts that belong to a later stage (docs/design.md "Packages flow one way"): the
        tiling stage's `counts` (fn(lowered) -> counts) and `tile` (fn(spec, lowered, counts) -> Tiling), the
        codegen stage's `emit` (fn(spec, lowered, tiling) -> {path: text}). The module of that stage calls it when
        imported (opgen/tiling/__init__.py, opgen/codegen/kernel.py import every such module), so the kernel stage
        never imports a later one. Raises OpgenError for a part name outside STAGE_OF."""
        bad = sorted(set(parts) - set(STAGE_OF))
        if bad:
            raise OpgenError(f"{cls.name} family: no installable part {', '.join(bad)} (parts: {', '.join(STAGE_OF)})")
        if "_installed" not in cls.__dict__:   # one table per family class, not shared through the base
            cls._installed = {}
        cls._installed.update(parts)

    def _stage(self, part: str):
        """The installed function of `part`. Raises OpgenError naming the package to import when that stage's
        module was not loaded."""
        fn = type(self).__dict__.get("_installed", {}).get(part)
        if fn is None:
            raise OpgenError(f"{self.name} family: its {part} part is not installed; import {STAGE_OF[part]}")
        return fn

    def counts(self, lowered: Lowered):
        """What the lowered programs hold on chip: the maximum over the specialisations (the installed `counts`
        unless the family computes them at the kernel stage)."""
        return self._stage("counts")(lowered)

    def tile(self, spec, lowered: Lowered, counts) -> Tiling:
        """The tiling program, how the TilingFunc reads its inputs and the buffer plans, from the counts and the
        layout (the installed `tile`). Raises Unsupported."""
        return self._stage("tile")(spec, lowered, counts)

    def emit(self, spec, lowered: Lowered, tiling: Tiling) -> dict:
        """{path: text} of op_kernel/ (the installed `emit`)."""
        return self._stage("emit")(spec, lowered, tiling)

    def program_text(self, lowered: Lowered, key) -> str:
        """Canonical text of the Kernel IR of specialisation `key`."""
        raise NotImplementedError

    def synchronised_text(self, lowered: Lowered, key) -> str:
        """Canonical text of specialisation `key` right after `synchronise` (`--dump-after synchronise`): the
        program_text unless the family's classes are built apart from its programs."""
        return self.program_text(lowered, key)

    def layout_text(self, layout) -> str:
        """One line describing a layout (`--dump-after select_family`)."""
        return getattr(layout, "text", lambda: repr(layout))()

    def counts_text(self, counts) -> str:
        """Canonical text of the counts (`--dump-after count`)."""
        d = counts.as_dict() if hasattr(counts, "as_dict") else vars(counts)
        return f"counts {self.name} {{\n" + "".join(f"  {k} {v}\n" for k, v in d.items()) + "}\n"


STAGE_OF = {"counts": "opgen.tiling", "tile": "opgen.tiling", "emit": "opgen.codegen"}
"""The package whose modules install each later-stage part of a family (Family.install)."""

_REGISTERED: list[type] = []


def register(cls: type) -> type:
    """Add family class `cls` to THE list (a class decorator; a family module registers itself when imported,
    opgen.kernel imports them in the order they are tried). Registering a class twice keeps the first place."""
    if cls not in _REGISTERED:
        _REGISTERED.append(cls)
    return cls


def families() -> list[Family]:
    """The kernel families, tried in registration order: attention (cube + vector) first, then rows (any vector
    graph); a fresh instance of each."""
    return [cls() for cls in _REGISTERED]


def choose(spec, g, plan) -> tuple[Family, object]:
    """The first family that claims the launch plan `plan` of fused graph `g` (one specialisation of `spec`) and
    whose match returns a layout, and the layout. Raises NoKernel with the rule of every family that claims the
    plan on one line, the family that got furthest first: the one refused at the latest IR value of the graph
    (its reason is about the construct that stops the spec, where the others stop at what they never take); a
    rule about the whole graph (Unsupported.whole: "2 matmuls") counts as getting nowhere, and a family that did
    not find the construct it is built around (Unsupported.foreign: attention without a score matmul reaching a
    softmax) as less than that: the spec is closest to the family that recognised its kind (a plain matmul: the
    cube family). Ties in the order of the list."""
    fams = families()
    failures = []
    for fam in fams:
        if not fam.claims(plan):
            failures.append((fam, Unsupported(g.outputs[0][1] if g.outputs else "?", "",
                                              f"the launch plan is not of the {fam.name} kind")))
            continue
        try:
            lay = fam.match(spec, g, plan)
        except Unsupported as e:
            failures.append((fam, e))
            continue
        if lay is not None:
            return fam, lay
    claim = [(f, e) for f, e in failures if f.claims(plan)] or failures
    claim.sort(key=lambda fe: -_progress(g, fe[1]))   # stable: ties keep the order of the list
    if not claim:
        raise NoKernel(spec.name, g.outputs[0][1] if g.outputs else "?", "", "no family applies", "none")
    fam, e = claim[0]
    why = e.why
    for f2, e2 in claim[1:]:   # every family that claims the plan says why it does not lower it, on one line
        where = f" ({_rel(e2.loc)})" if e2.loc else ""
        why += f" [{fam.name} family]; %{e2.value}{where}: {e2.why}"
        fam = f2
    raise NoKernel(spec.name, e.value, _rel(e.loc), why, fam.name)


def _progress(g, e) -> int:
    """How far a family got in graph `g` before refusing with Unsupported `e`: the position of the node defining
    its value (-1 for a parameter, a value not in the graph, or a rule about the graph as a whole, `e.whole`; -2 for
    a graph not of the family's kind, `e.foreign`)."""
    if getattr(e, "foreign", False):
        return -2
    if getattr(e, "whole", False):
        return -1
    for k, n in enumerate(g.nodes):
        if n.result.name == e.value:
            return k
    return -1


def _rel(loc: str) -> str:
    """A spec location relative to the working directory when under it (messages must not depend on where the
    checkout lives)."""
    import os

    if not loc:
        return ""
    path, _, line = loc.rpartition(":")
    try:
        rel = os.path.relpath(path)
    except ValueError:
        rel = path
    return f"{rel if not rel.startswith('..') else path}:{line}"
