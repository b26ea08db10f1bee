"""The launch plan `fuse` builds (first level below the tensor IR): how an operator is launched.

A `KernelPlan` lists the launches of one specialisation. Each `Kernel` is one launch (opgen aims for
one per op: AIV-only for the vector ops, one mixed AIC/AIV launch for NSA) made of `Stage`s, each on
one unit (vector or cube) holding the tensor-IR values it computes. GM tensors: the operator's inputs
(read), outputs (written) and workspace tensors, the values that cross from one unit to the other
(docs/reference/ascendc.md §1.1: on arch 2201 AIC and AIV exchange data only through GM). The tiling program
attached by the `tile` stage names the tiling data of the launch.

`verify_plan` checks: every value belongs to exactly one stage; every operator input is read by exactly
one kernel (so by one fused loop: read once), every output is written by exactly one stage, workspace
edges connect stages on different units. `print_plan` is the canonical text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from opgen.errors import IRError


@dataclass(frozen=True)
class Stage:
    """Values computed on one unit ("vector" | "cube"), in graph order."""

    unit: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Kernel:
    """One launch: its type (KERNEL_TYPE_AIV_ONLY or KERNEL_TYPE_MIX_AIC_1_2), its stages, the GM tensors it
    reads/writes (operator inputs/outputs) and the workspace tensors between its stages."""

    name: str
    kernel_type: str
    stages: tuple[Stage, ...]
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    workspace: tuple[str, ...]
    domains: tuple[tuple[str, str], ...] = ()   # (value, iteration domain: the dims of its shape)


@dataclass(frozen=True)
class KernelPlan:
    """The launches of one operator specialisation, plus the tiling program name once tiled."""

    op: str
    kernels: tuple[Kernel, ...]
    tiling: tuple[tuple[str, str], ...] = field(default=())  # (field, doc) of the tiling data


def verify_plan(plan: KernelPlan, params: set[str], outputs: set[str]) -> None:
    """Check the invariants of the module docstring. Raises IRError naming the value and the rule."""
    seen: dict[str, str] = {}
    read_by: dict[str, str] = {}
    for k in plan.kernels:
        units = {s.unit for s in k.stages}
        if not units <= {"vector", "cube"}:
            raise IRError(f"kernel {k.name}: unknown unit in {sorted(units)}")
        for s in k.stages:
            for v in s.values:
                if v in seen:
                    raise IRError(f"%{v}: computed by two stages ({seen[v]} and {k.name}/{s.unit})")
                seen[v] = f"{k.name}/{s.unit}"
        for r in k.reads:
            if r not in params:
                raise IRError(f"kernel {k.name}: reads %{r}, which is not an operator input")
            if r in read_by:
                raise IRError(f"%{r}: read by two kernels ({read_by[r]} and {k.name}); each GM tensor is read once")
            read_by[r] = k.name
        for w in k.workspace:
            if w not in seen:
                raise IRError(f"kernel {k.name}: workspace %{w} is not computed by any stage")
    missing = [o for o in outputs if o not in seen and o not in params]
    if missing:
        raise IRError(f"outputs {missing} are computed by no stage")


def print_plan(plan: KernelPlan) -> str:
    """Canonical text of a plan (ends with a newline)."""
    lines = [f"plan {plan.op} {{"]
    for k in plan.kernels:
        lines.append(f"  kernel {k.name} {k.kernel_type} {{")
        lines.append(f"    reads  {', '.join('%' + r for r in k.reads) or '-'}")
        lines.append(f"    writes {', '.join('%' + w for w in k.writes) or '-'}")
        if k.workspace:
            lines.append(f"    workspace {', '.join('%' + w for w in k.workspace)}")
        dom = dict(k.domains)
        for s in k.stages:
            lines.append(f"    stage {s.unit} {{")
            for v in s.values:
                lines.append(f"      %{v}  [{dom.get(v, '')}]")
            lines.append("    }")
        lines.append("  }")
    if plan.tiling:
        lines.append("  tiling {")
        lines += [f"    {f}  // {d}" if d else f"    {f}" for f, d in plan.tiling]
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"
