"""The op_kernel files of the cube family (opgen.kernel.cube): the Kernel IR class printed by the one C++ printer
(opgen.kernel.kir.to_cpp) inside the file skeleton templates/op_kernel/cube_kernel.h.j2, and the entry
cube_kernel.cpp.j2 that instantiates it per tiling key (dtype row x static attributes); the tiling keys' header.
Installs itself into the family when imported (opgen.codegen.kernel imports it)."""

from __future__ import annotations

from opgen.codegen.env import template_env
from opgen.codegen.tilingkey import TilingKey, emit_tiling_keys
from opgen.dsl.keys import attr_key
from opgen.errors import SpecError
from opgen.ir.dtypes import dtype_name
from opgen.kernel import cube as kcube
from opgen.kernel import kir
from opgen.names import kernel_entry, op_snake, spec_path


def emit_cube_kernel(spec, lowered, tiling) -> dict[str, str]:
    """{path: text} of op_kernel/<op>.h, op_kernel/<op>.cpp and the tiling-key header of a cube-family lowering
    (`lowered`: the GemmLayout and {key: KernelClass}). Raises SpecError when the specialisations' classes differ
    (one class serves every key) or a dtype row binds the operands to a type the cube does not take (a guard:
    gemm_layout refuses such a row as Unsupported at the input's line while matching)."""
    classes = {kir.to_text(c): c for c in lowered.programs.values()}
    if len(classes) != 1:
        raise SpecError(f"{spec.name}: the cube family expects one kernel class for every specialisation, got "
                        f"{len(classes)}")
    cls = next(iter(classes.values()))
    lay = lowered.layout
    snake = op_snake(spec.name)
    attrs_keys = sorted({attr_key(spec, dict(zip([a.name for a in spec.static_attrs], key.static)))
                         for key in lowered.programs})
    keys, declared = [], []
    for r, row in enumerate(spec.dtype_rows, start=1):
        dt = lay.dtype if lay.fixed else dtype_name(row[lay.dtype])
        if dt not in ("f16", "bf16"):
            raise SpecError(f"{spec.name}: dtype row {r} binds {lay.dtype} to {dt}; the cube kernel takes f16 or "
                            f"bf16 operands")
        for ak in attrs_keys:
            tk = TilingKey(ak, r, 1, "CUBE_GEMM")
            declared.append(tk)
            keys.append((tk.macro(spec), kcube.CTYPE[dt]))
    env = template_env()
    ctx = {"op": spec.name, "op_snake": snake, "entry": kernel_entry(spec.name), "spec_file": spec_path(spec),
           "doc": tiling.doc,
           "class_cpp": kir.to_cpp(cls), "cls": cls.name, "args": list(cls.args), "keys": keys,
           "struct": cls.tiling_struct, "kernel_type": kcube.CubeFamily().entry_kernel_type(lowered)}
    return {
        f"op_kernel/{snake}.h": env.get_template("op_kernel/cube_kernel.h.j2").render(**ctx),
        f"op_kernel/{snake}.cpp": env.get_template("op_kernel/cube_kernel.cpp.j2").render(**ctx),
        **emit_tiling_keys(spec, declared),
    }


kcube.CubeFamily.install(emit=emit_cube_kernel)
