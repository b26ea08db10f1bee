"""Emission of op_kernel/<op>.h and op_kernel/<op>.cpp for rows-family kernels (opgen.kernel.rows).

Python decides every statement: the family lowers each specialisation of the spec (static attributes, presence
of optional inputs) to a row program; equal programs share one class. Its instructions are printed as AscendC
calls for the two strategies of opgen.tiling.rowkernel — ROW_SPLIT (rows over cores, `rowsPerPass` rows per
CopyIn/Compute/CopyOut pass) and COL_SPLIT (the row axis over cores, column chunks, resident row groups and
row reductions exchanged through workspace per level), and for a spec whose rows can outgrow a core's UB slice
COL_STREAM (the slice in chunks re-read per level, `online_pair` for a softmax's maximum and sum) — and every GM
access through its operand's view
(opgen.kernel.rowlayout.View): contiguous rows as one DataCopyPad per pass, strided rows (a permuted tensor, a
broadcast over leading axes) one DataCopyPad per run along the innermost leading axis, the row-axis slices of
a tensor at a column offset. The dim values the addressing needs travel in the tiling data (`DimFields`). The
classes arrive finished: built as Kernel IR by opgen.kernel.rowclass and synchronised by the dependency pass
(the family's synchronise, opgen.kernel.kir_sync); they are printed by opgen.kernel.kir, and the template
(templates/op_kernel/row_kernel.h.j2) is the file skeleton around them (banner, includes, helpers, namespace).

Reference facts: docs/reference/ascendc.md §1.3 (extern "C" __global__ __aicore__ entry, GM_ADDR, tiling
data), §1.5 (TPipe/TQue/TBuf, EnQue/DeQue), §1.8 (DataCopyPad units: blockLen bytes, UB gaps in
32-byte blocks, GM gaps in bytes), §1.9 (count-form vector calls, Cast round modes, ReduceSum, ReduceMax),
§1.6 (SyncAll), §1.3 (GetBlockIdx/GetBlockNum).
"""

from __future__ import annotations

import dataclasses

from opgen.codegen.tilingkey import TilingKey, emit_tiling_keys
from opgen.dsl.keys import form_key_count
from opgen.kernel import kir
from opgen.kernel.rowclass import CTYPE, Variant
from opgen.names import cpp_name
from opgen.codegen import kernel_attention, kernel_cube  # noqa: F401  install the attention / cube families' emit
from opgen.codegen.headkernel import emit_head_kernel
from opgen.kernel.rowlayout import RowLayout
from opgen.kernel.rows import RowsFamily
from opgen.names import spec_path
from opgen.tiling.pipeline import compile_unit, kernel_build


def class_context(v: Variant) -> dict:
    """The template context of kernel class `v` (templates/op_kernel/row_kernel.h.j2): its facts (v.ctx,
    opgen.kernel.rowclass.class_ir) with its finished Kernel IR class (v.kclass: built by the tiling stage, pruned
    to the members its methods name, synchronised by the dependency pass) printed whole by kir's C++ printer
    ("cpp", its comment the variant's doc)."""
    ctx = dict(v.ctx)
    k = v.kclass
    ctx["row_split_ir"] = k
    ctx["cpp"] = kir.to_cpp(dataclasses.replace(k, doc=v.doc or k.doc), verify_first=False)
    return ctx


def render_kernel(spec, variants: list[Variant], doc: str, spec_file: str) -> dict[str, str]:
    """{path: text} of op_kernel/<op>.h and .cpp for the rows-family classes `variants` (opgen.kernel.rows), each
    finished (its facts and synchronised Kernel IR class: opgen.tiling.rowfamily.rows_tiling, RowsFamily.synchronise).
    The entry has a branch per tiling key (joined where the call is the same): per attrKey, per form key where
    shape forms select the class (opgen.codegen.tilingkey.TilingKey), per dtype row; inside it, the class serving
    each presence of the optional inputs where one class does not serve them all."""
    from opgen.codegen.env import template_env

    snake = spec.stem
    dvars = [c.name for c in spec.dtype_table]
    classes = [class_context(v) for v in variants]
    keys, declared = [], []
    attr_keys = sorted({k for v in variants for k, _f, _c in v.serves})
    # shape forms selecting the class (opgen.kernel.rows.variants_of): the form key is a digit of the tiling key
    forms = form_key_count(spec) if any(f is not None for v in variants for _k, f, _c in v.serves) else 1
    strategies = [(1, "ROW_SPLIT"), (2, "COL_SPLIT")] + (
        [(3, "COL_STREAM")] if any(v.stream for v in variants) else []) + (
        [(4, "ROW_CHUNK")] if any(v.chunk or v.resident for v in variants) else [])
    for ak in attr_keys:
        for fk in range(forms) if forms > 1 else (None,):
            serving = [(c, cond) for v, c in zip(variants, classes) for k, f, cond in v.serves
                       if k == ak and f in (fk, None)]
            if not serving:   # no call has these forms (not reached: every form key has a specialisation)
                continue
            if len({c["name"] for c, _cond in serving}) == 1:   # one class serves every presence (rowpresence)
                serving = [(serving[0][0], "")]
            for r, row in enumerate(spec.dtype_rows, start=1):
                types = [CTYPE[str(row[d].value) if hasattr(row[d], "value") else str(row[d])] for d in dvars]
                for strategy, name in strategies:
                    tk = TilingKey(ak, r, strategy, name, fk, forms)
                    declared.append(tk)
                    call = (types, [(c["name"], cond) for c, cond in serving])
                    if keys and keys[-1][1:] == call:   # the class reads the strategy itself: one call, keys joined
                        keys[-1][0].append(tk.macro(spec))
                    else:
                        keys.append(([tk.macro(spec)], *call))
    ctx = {
        "op": spec.name, "op_snake": snake, "spec_file": spec_file, "dvars": dvars, "classes": classes,
        "entry": spec.entry,
        "inputs": [cpp_name(i.name) for i in spec.inputs], "outputs": [cpp_name(o.name) for o in spec.outputs], "keys": keys,
        "struct": f"optiling::{spec.name}TilingData", "doc": doc,
        "gm_scalar": any(kir.reads_gm_scalar(c["row_split_ir"]) for c in classes),
        "forms": forms,
    }
    env = template_env()
    return {
        f"op_kernel/{snake}.h": env.get_template("op_kernel/row_kernel.h.j2").render(**ctx),
        f"op_kernel/{snake}.cpp": env.get_template("op_kernel/row_kernel.cpp.j2").render(**ctx),
        **emit_tiling_keys(spec, declared),
    }


def emit_rows_kernel(spec, lowered, tiling) -> dict[str, str]:
    """RowsFamily.emit (installed below): op_kernel/<op>.h and .cpp of a rows lowering (render_kernel) or of a
    parts lowering (opgen.codegen.headkernel.emit_head_kernel), from the finished classes the tiling stage built
    and the dependency pass synchronised."""
    if isinstance(lowered.layout, RowLayout):
        return render_kernel(spec, lowered.extra["variants"], tiling.doc, spec_path(spec))
    return emit_head_kernel(spec, lowered.extra["hclass"], tiling.doc)


RowsFamily.install(emit=emit_rows_kernel)


def emit_kernel(spec) -> dict[str, str]:
    """The codegen emitter (opgen.codegen.EMITTERS): op_kernel/ of `spec` from its kernel build
    (opgen.tiling.pipeline.kernel_build), printed by the family that lowered it. Raises NoKernel when no family
    lowers the spec (a package is never written without its kernel), SpecError as the family's emitter."""

    u = kernel_build(spec)
    return u.family.emit(spec, u.lowered, u.tiling)


def schedule_text(spec, unit, key) -> str:
    """The Kernel IR text (opgen.kernel.kir.to_text) of the schedule the op_kernel class serving specialisation `key`
    is printed from, for a full kernel build `unit` (opgen.tiling.pipeline.kernel_build) of a rows lowering: its
    finished class (synchronised) as IR; "" for a lowering whose schedule is not Kernel IR yet (head rows,
    attention)."""
    ex = unit.lowered.extra
    if "variants" not in ex or key not in unit.lowered.programs:
        return ""
    prog = unit.lowered.programs[key]
    for v in ex["variants"]:
        if v.prog is prog or any(p is prog for p in v.also):
            return kir.to_text(v.kclass)
    return ""


def kernel_ir_text(spec, g, key=None) -> str:
    """The lowered kernel of specialisation `key` of `spec` (graph `g` is its tensor IR) as canonical text: the
    family's layout line, then its Kernel IR (`opgen graph --stage kernel`). Raises NoKernel."""

    u = compile_unit(spec, key=key, until="lower", only_key0=True)
    return f"family {u.family.name}: {u.family.layout_text(u.layout)}\n" + u.family.program_text(u.lowered, u.key0)
