"""Emission of op_kernel/<op>.h and op_kernel/<op>.cpp for the attention family's mixed kernels: the last pass.

The kernel classes are Kernel IR built by the tiling stage (opgen.kernel.attnclass, from each specialisation's
AttentionProgram and the tiling's plan) and synchronised by the dependency pass (AttentionFamily.synchronise); this
module prints them with the one C++ printer (opgen.kernel.kir.to_cpp) into the file skeleton
(templates/op_kernel/attention_kernel.h.j2: includes, the Unit struct, the classes) and writes the entry that picks a
class per tiling key and optional-input presence (attention_kernel.cpp.j2).

Reference facts: docs/reference/ascendc.md §1.3 (mix kernel indexing, KERNEL_TYPE_MIX_AIC_1_2).
"""

from __future__ import annotations

import itertools

from opgen.codegen.tilingkey import TilingKey, emit_tiling_keys
from opgen.ir.dtypes import dtype_name
from opgen.kernel import kir
from opgen.kernel.attention import AttentionFamily
from opgen.kernel.attnclass import CTYPE, UNIT_DENSE, UNIT_DOC, UNIT_SELECTED, UNIT_TND, UNIT_TND_DOC
from opgen.names import cpp_name
from opgen.tiling import attention as tattn
from opgen.tiling.emit import attr_key


def _static_combos(spec):
    return [dict(zip([a.name for a in spec.static_attrs], vals))
            for vals in itertools.product(*[a.choices for a in spec.static_attrs])]


def emit_attention_kernel(spec, lowered, tiling) -> dict[str, str]:
    """{path: text} of op_kernel/<op>.h, op_kernel/<op>.cpp and the tiling-key header of an attention-family
    lowering whose classes the tiling built and the pass synchronised (`lowered.extra["aclasses"]`, a list of
    opgen.kernel.attnclass.AttnClass). Raises IRError for a class that does not verify."""
    from opgen.codegen.env import template_env   # lazy: start-up time
    from opgen.names import spec_path

    lay = lowered.layout
    snake = spec.stem
    opts = [i for i in spec.inputs if i.optional]
    aclasses = lowered.extra["aclasses"]
    variants: dict[int, list] = {}
    for key in lowered.programs:
        cls = next(c.name for c in aclasses if key in c.keys)
        present = dict(zip([i.name for i in opts], key.present))
        attrs = dict(zip([a.name for a in spec.static_attrs], key.static))
        cond = " && ".join(f"{cpp_name(n)} {'!=' if pr_ else '=='} nullptr" for n, pr_ in present.items()
                           if not _never_read(spec, n)) or "true"
        variants.setdefault(attr_key(spec, attrs), []).append((cond, cls))
    keys, declared = [], []
    strategies = [(tattn.STRATEGY, "ATTENTION")]
    if any(c.det for c in aclasses):
        strategies.append((tattn.DETERMINISTIC, "ATTENTION_DETERMINISTIC"))
    for r, row in enumerate(spec.dtype_rows, start=1):
        ctype = CTYPE[dtype_name(row[lay.dtype])]
        for ak, vs in sorted(variants.items()):
            for st, name in strategies:
                tk = TilingKey(ak, r, st, name)
                declared.append(tk)
                keys.append((tk.macro(spec), ctype, _dedupe(vs)))
    env = template_env()
    ctx = {
        "op": spec.name, "op_snake": snake, "spec_file": spec_path(spec),
        "classes": [kir.to_cpp(c.kclass) for c in aclasses], "entry": spec.entry,
        "inputs": [cpp_name(i.name) for i in spec.inputs], "outputs": [cpp_name(o.name) for o in spec.outputs],
        "keys": keys, "struct": f"optiling::{spec.name}TilingData", "doc": tiling.doc,
        "unit_fields": ((UNIT_DENSE + UNIT_TND if lay.form == "TND" else UNIT_DENSE) if lay.keyset == "dense"
                        else UNIT_SELECTED),
        "unit_doc": UNIT_DOC + (UNIT_TND_DOC if lay.keyset == "dense" and lay.form == "TND" else ""),
        "gm_scalar": any(kir.reads_gm_scalar(c.kclass) for c in aclasses),
    }
    return {
        f"op_kernel/{snake}.h": env.get_template("op_kernel/attention_kernel.h.j2").render(**ctx),
        f"op_kernel/{snake}.cpp": env.get_template("op_kernel/attention_kernel.cpp.j2").render(**ctx),
        **emit_tiling_keys(spec, declared),
    }


def _never_read(spec, name: str) -> bool:
    """Optional inputs the kernel never distinguishes (declared with when= always false, e.g. attenMsk)."""
    i = next(i for i in spec.inputs if i.name == name)
    return i.when is not None and not any(i.when(a, {}) for a in _static_combos(spec))


def _dedupe(vs):
    out = []
    for cond, cls in vs:
        if (cond, cls) not in out:
            out.append((cond, cls))
    if len({cls for _c, cls in out}) == 1:
        return [("true", out[0][1])]
    return out


AttentionFamily.install(emit=emit_attention_kernel)
