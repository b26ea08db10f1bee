"""Printing of op_kernel/<op>.h and op_kernel/<op>.cpp for head-row kernels: the finished class
(opgen.kernel.headclass.HeadClass, built by the tiling and synchronised by the kernel pass `synchronise`) through the
one Kernel-IR C++ printer into the templates' file skeleton. The class, its bodies, addressing functions and tables
are described in opgen.kernel.headclass.

Reference facts: docs/reference/ascendc.md §1.3 (entry point, GM_ADDR), §1.5 (TPipe/TQue/TBuf).
"""

from __future__ import annotations

import dataclasses

from opgen.codegen.tilingkey import TilingKey, emit_tiling_keys
from opgen.kernel import kir
from opgen.kernel.headclass import HeadClass
from opgen.names import cpp_name, spec_path

CTYPE = {"f32": "float", "f16": "half", "bf16": "bfloat16_t"}
def emit_head_kernel(spec, hc: HeadClass, doc: str) -> dict[str, str]:
    """{path: text} of op_kernel/<op>.h and .cpp (and the tiling-key header) of the head kernel class `hc` of
    `spec`; `doc`: the tiling's one-line description."""
    from opgen.codegen.env import template_env

    ctx = head_context(spec, hc, doc)
    snake = ctx["op_snake"]
    env = template_env()
    return {
        f"op_kernel/{snake}.h": env.get_template("op_kernel/head_kernel.h.j2").render(**ctx),
        f"op_kernel/{snake}.cpp": env.get_template("op_kernel/head_kernel.cpp.j2").render(**ctx),
        **emit_tiling_keys(spec, ctx["declared"]),
    }


def schedule_text(spec, unit) -> str:
    """The Kernel IR text (opgen.kernel.kir.to_text) of the head kernel class of a full kernel build `unit`
    (opgen.tiling.pipeline.kernel_build) of a head-rows lowering, synchronised: its whole schedule (the bodies,
    their syncs and the helpers they call); "" for another lowering."""
    hc = unit.lowered.extra.get("hclass")
    return kir.to_text(hc.sched) if hc is not None else ""


def head_context(spec, hc: HeadClass, doc: str) -> dict:
    """The template context of the head kernel files of `hc` (emit_head_kernel's arguments), with the class's
    Kernel IR ("sched") and its declared tiling keys ("declared")."""
    sched = hc.sched
    dtype_keys, declared = [], []
    for r, row in enumerate(spec.dtype_rows, start=1):
        dt = row[hc.dvar]
        tks = [TilingKey(k, r, 1, "HEAD_ROWS") for k in hc.keys]
        declared += tks
        dtype_keys.append((CTYPE[str(getattr(dt, "value", dt))], [tk.macro(spec) for tk in tks]))
    return {
        "op": spec.name, "op_snake": spec.stem, "spec_file": spec_path(spec), "cls": sched.name,
        "doc": doc, "struct": f"optiling::{spec.name}TilingData",
        "entry": spec.entry,
        "inputs": [cpp_name(i.name) for i in spec.inputs], "outputs": [cpp_name(o.name) for o in spec.outputs],
        "namespace_cpp": kir.namespace_cpp(sched).rstrip("\n"),
        "class_cpp": kir.to_cpp(dataclasses.replace(sched, doc=""), verify_first=False).rstrip("\n"),
        "gm_scalar": kir.reads_gm_scalar(sched),
        "dtype_keys": dtype_keys, "sched": sched, "declared": declared,
    }


__all__ = ["emit_head_kernel", "head_context", "schedule_text"]
