"""The op_kernel files of the cube family (opgen.kernel.cube): the Kernel IR class printed by the one C++ printer
(opgen.kernel.kir.to_cpp) inside the file skeleton templates/op_kernel/cube_kernel.h.j2, and the entry
cube_kernel.cpp.j2 that instantiates it per tiling key (dtype row x static attributes); the tiling keys' header.
Installs itself into the family when imported (opgen.codegen.kernel imports it)."""

from __future__ import annotations

from opgen.codegen.env import template_env
from opgen.codegen.tilingkey import TilingKey, emit_tiling_keys
from opgen.dsl.keys import attr_key, form_key, form_key_count
from opgen.errors import SpecError
from opgen.ir.dtypes import dtype_name
from opgen.kernel import cube as kcube
from opgen.kernel import kir
from opgen.names import spec_path
from opgen.tiling.cube import direct_presences


def emit_cube_kernel(spec, lowered, tiling) -> dict[str, str]:
    """{path: text} of op_kernel/<op>.h, op_kernel/<op>.cpp and the tiling-key header of a cube-family lowering
    (`lowered`: the layouts and {key: KernelClass}): every class printed, and the entry testing each tiling key
    (attrKey x dtype row; x form key where the inputs' shape forms select the class, CubeFamily.lower) to
    instantiate the class of its attrKey (the static attributes select the layout; one class serves every presence
    of the optional inputs) and of the row's static dtypes (SpecKey.dtypes). Raises SpecError when two keys of one attrKey have
    different classes (CubeFamily.lower joins them) or a dtype row binds the operands to a type the cube does not
    take (a guard: gemm_layout refuses such a row as Unsupported at the input's line while matching)."""
    names = [a.name for a in spec.static_attrs]
    split = bool(lowered.extra.get("form_key"))   # the inputs' shape forms select the class (CubeFamily.lower)
    forms = form_key_count(spec) if split else 1
    by_ak: dict = {}   # (attrKey, form key or None, static dtypes) -> class text
    order: dict = {}   # class text -> class, in the lowering's order
    for key, c in lowered.programs.items():
        ak = attr_key(spec, dict(zip(names, key.static)))
        fk = form_key(spec, key.forms, key.present) if split else None
        text = kir.to_text(c)
        order.setdefault(text, c)
        if by_ak.setdefault((ak, fk, key.dtypes), text) != text:
            raise SpecError(f"{spec.name}: the cube family expects one kernel class per attribute combination "
                            f"(attrKey {ak}" + ("" if fk is None else f", form key {fk}") + "), got two")
    lay = lowered.layout
    snake = spec.stem
    keys, declared, aic_keys = [], [], []
    # no layout with a vector epilogue, or presences of the optional inputs without one (direct_presences):
    # without a K split the AIVs have no work, so that key launches AIC only (strategy 2,
    # KERNEL_TASK_TYPE(key, KERNEL_TYPE_AIC_ONLY)); a K split or the epilogue keeps the mixed launch (strategy 1)
    lays = kcube.CubeFamily().layouts(lowered)
    aic = not any(x.mixed for x in lays) or bool(direct_presences(lays))
    for r, row in enumerate(spec.dtype_rows, start=1):
        dt = lay.dtype if lay.fixed else dtype_name(row[lay.dtype])
        if dt not in ("f16", "bf16") and not (dt == "i8" and lay.acc == "i32"):
            raise SpecError(f"{spec.name}: dtype row {r} binds {lay.dtype} to {dt}; the cube kernel takes f16 or "
                            f"bf16 operands (or int8 cast to int32)")
        sd = tuple(row[n] for n in spec.static_dtype_vars)   # the row's static dtypes pick its classes
        for ak, fk in sorted({(a, f) for a, f, d in by_ak if d == sd}, key=lambda af: (af[0], af[1] or 0)):
            tks = [TilingKey(ak, r, 1, "CUBE_GEMM", fk, forms)] + (
                [TilingKey(ak, r, 2, "CUBE_GEMM_AIC_ONLY", fk, forms)] if aic else [])
            declared.extend(tks)
            aic_keys.extend(t.macro(spec) for t in tks[1:])
            cls = order[by_ak[(ak, fk, sd)]]
            # T the operands' C++ type; another dtype variable of the class (an epilogue input's) its row's type
            targs = [kcube.CTYPE[dt]] + [kcube.CTYPE[dtype_name(row[kcube.tparam_var(spec, v)])] for v in cls.tparams[1:]]
            keys.append(([t.macro(spec) for t in tks], ", ".join(targs), cls.name))
    env = template_env()
    classes = list(order.values())
    ctx = {"op": spec.name, "op_snake": snake, "entry": spec.entry, "spec_file": spec_path(spec),
           "doc": tiling.doc,
           "class_cpp": "\n\n".join(kir.to_cpp(c) for c in classes), "args": list(classes[0].args), "keys": keys,
           "struct": classes[0].tiling_struct, "kernel_type": kcube.CubeFamily().entry_kernel_type(lowered), "multi": len(classes) > 1, "forms": forms,
           "aic_keys": aic_keys, "cast_from": any(len(c.tparams) > 1 for c in classes),
           "gm_scalar": any(kir.reads_gm_scalar(c) for c in classes)}   # an epilogue input of one value
    return {
        f"op_kernel/{snake}.h": env.get_template("op_kernel/cube_kernel.h.j2").render(**ctx),
        f"op_kernel/{snake}.cpp": env.get_template("op_kernel/cube_kernel.cpp.j2").render(**ctx),
        **emit_tiling_keys(spec, declared),
    }


kcube.CubeFamily.install(emit=emit_cube_kernel)
