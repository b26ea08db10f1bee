"""`opgen check --engine kir`: run an operator's kernel with the Kernel IR interpreter (opgen.kernel.kir_interp)
instead of the g++ emulation. Only a kernel whose every class is Kernel IR throughout (no C++ text, no extern
method: `kir_interp.opaque`) can run there; for any other the engine refuses with one line naming the first part
that is not Kernel IR yet, so the user falls back to `--engine emu` (the default).

Today the rows family's ROW_SPLIT and COL_SPLIT schedules and their per-row instruction streams are Kernel IR
(opgen.kernel.rowsched), but the batch load / flush bodies, the cross-core epilogues and concat-piece copies are
still C++ text (kir.Verbatim) or extern methods; the head-rows and attention families have no Kernel IR yet. So
most operators are refused with the reason, and one that is IR throughout (SoftmaxV2's rows kernel) with the
missing piece: binding a check case (the tiling data, the GM arguments) to the interpreter.
"""

from __future__ import annotations

from opgen.kernel import kir
from opgen.kernel.kir_interp import NotKernelIR, opaque


def kernel_classes(spec) -> list:
    """The Kernel IR classes of `spec`'s kernel (one per kernel class of the rows family; [] for a family whose
    schedule is not Kernel IR). Raises as the kernel build (opgen.passes.pipeline.kernel_build)."""
    from opgen.codegen.kernel import class_context, row_split_ir  # lazy: start-up time
    from opgen.passes.pipeline import kernel_build  # lazy: start-up time

    unit = kernel_build(spec)
    ex = unit.lowered.extra
    if "variants" not in ex:
        return []
    return [row_split_ir(spec, v, v.dims or ex["dims"], class_context(spec, v, v.dims or ex["dims"]))
            for v in ex["variants"]]


def require_kernel_ir(spec) -> list:
    """The kernel classes of `spec` when every one is Kernel IR throughout; else NotKernelIR (an OpgenError: one
    line, exit 2 in the CLI) naming the operator, the class and the first part that is not Kernel IR (or, for a
    kernel with no rows Kernel IR classes, its family; a head-rows kernel by that name, not "the rows family")."""
    classes = kernel_classes(spec)
    if not classes:
        from opgen.passes.pipeline import kernel_build  # lazy: start-up time

        unit = kernel_build(spec)
        if "heads" in unit.lowered.extra:  # rows family, head-rows lowering (opgen.kernel.headrows)
            raise NotKernelIR(f"--engine kir: {spec.name}'s kernel is a head-rows kernel (template C++ around Kernel "
                              "IR bodies); the Kernel-IR engine reads the rows family's row-split and column-split "
                              "kernel classes only so far; use --engine emu")
        raise NotKernelIR(f"--engine kir: {spec.name}'s kernel is of the {unit.family.name} family; the Kernel-IR "
                          "engine reads the rows family's kernel classes only so far; use --engine emu")
    for k in classes:
        kir.verify(k)
        why = opaque(k)
        if why:
            raise NotKernelIR(f"--engine kir: {spec.name}'s kernel class {k.name} is not Kernel IR throughout: "
                              f"{why}; use --engine emu")
    raise NotKernelIR(f"--engine kir: {spec.name}'s kernel is Kernel IR throughout, but binding a check case to "
                      "it (the host tiling data, the GM arguments) is not implemented yet; use --engine emu")
