"""`opgen check --engine kir`: run an operator's kernel with the Kernel IR interpreter (opgen.kernel.kir_interp)
instead of the g++ emulation. Only a kernel whose every class is Kernel IR throughout (no C++ text, no extern
method: `kir_interp.opaque`) can run there; for any other the engine refuses with one line naming the first part
that is not Kernel IR yet, so the user falls back to `--engine emu` (the default).

Today every rows kernel (the row-split, column-split and column-stream schedules, opgen.kernel.rowsched), every
head-rows kernel (opgen.kernel.headsched: the parts chosen per attribute key from constant tables, SetupPart), every
cube kernel (opgen.kernel.cube: AIC only, or mixed with the epilogue on the AIVs and the workspace slots handed over by
cross-core flags) and every attention kernel (opgen.kernel.attnclass: the AIC's matmuls and the AIVs' softmax(-grad),
one class per distinct program) is Kernel IR throughout.

A check case binds to the interpreter as the emitted driver binds it to the emulated launch (`launch`): the tiling
data, blockDim, tiling key and workspace size come from the tiling program's Python twin (opgen.tiling.emit.evaluate,
what the emitted TilingFunc computes); the kernel class is the one serving the call's attrKey and optional inputs; its
GM arguments are the validated inputs in their declared dtypes (copies: the caller's arrays are never written) and the
outputs, an output updated in place (OpSpec.output(ref=)) being its input's array itself, the others made NaN (floats) before the launch
so an element the kernel never writes cannot pass; its template parameters take the dtype binding. Nothing is compiled: the aclnn
layer is C++, so the spec's own validation (the interpreter's, with the same rules) judges the call.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from opgen.errors import OpgenError
from opgen.names import cpp_name
from opgen.kernel import kir
from opgen.kernel import kir_interp
from opgen.kernel.kir_interp import NP_TYPES, NotKernelIR, opaque
from opgen.kernel.rows import presence_condition, serves_call


def kernel_classes(spec) -> list:
    """The Kernel IR classes of `spec`'s kernel (one per kernel class of the rows family; [] for a family whose
    schedule is not Kernel IR). Raises as the kernel build (opgen.tiling.pipeline.kernel_build)."""
    from opgen.tiling.pipeline import kernel_build  # lazy: start-up time

    unit = kernel_build(spec)
    if unit.family.name == "cube":   # one class per layout (opgen.kernel.cube.CubeFamily.lower), in class order
        return list({id(c): c for c in unit.lowered.programs.values()}.values())
    ex = unit.lowered.extra
    if "aclasses" in ex:   # the attention family: one class per distinct program (opgen.kernel.attnclass)
        return [c.kclass for c in ex["aclasses"]]
    if "hclass" in ex:   # one head-rows class, template parameter T the data dtype (opgen.kernel.headclass)
        return [ex["hclass"].sched]   # finished: synchronised by the dependency pass
    if "variants" not in ex:
        return []
    return [v.kclass for v in ex["variants"]]   # finished: synchronised by the dependency pass


def require_kernel_ir(spec) -> list:
    """The kernel classes of `spec` (verified) when every one is Kernel IR throughout; else NotKernelIR (an
    OpgenError: one line, exit 2 in the CLI) naming the operator, the class and the first part that is not Kernel
    IR (or, for a kernel with no rows Kernel IR classes, its family; a head-rows kernel by that name, not "the rows
    family")."""
    classes = kernel_classes(spec)
    if not classes:
        from opgen.tiling.pipeline import kernel_build  # lazy: start-up time

        unit = kernel_build(spec)
        raise NotKernelIR(f"--engine kir: {spec.name}'s kernel is of the {unit.family.name} family; the Kernel-IR "
                          "engine reads the rows and cube families' kernel classes only so far; use --engine emu")
    for k in classes:
        kir.verify(k)
        why = opaque(k)
        if why:
            raise NotKernelIR(f"--engine kir: {spec.name}'s kernel class {k.name} is not Kernel IR throughout: "
                              f"{why}; use --engine emu")
    return classes


@dataclass
class KirLaunch:
    """What `launch` gives `opgen check`: the tiling (ok, error), blockDim, tiling key, the whole workspace in bytes
    (system part included, as the driver reports it), the outputs {name: array in its declared dtype} when
    launched, the faults (`[core k] message`) and the UB bytes each core allocated (the maximum: ub_peak)."""

    tiling_ok: bool = False
    tiling_error: str = ""
    block_dim: int = 0
    tiling_key: int = 0
    workspace_bytes: int = 0
    launched: bool = False
    arrays: dict = field(default_factory=dict)
    faults: list = field(default_factory=list)
    ub_peak: int = 0


def _ctype(dt) -> str:
    """The AscendC element type name of DType `dt` (kir_interp.NP_TYPES)."""
    return next(c for c, t in NP_TYPES.items() if t == dt.np)


def _tensor_dtypes(spec, bound) -> dict:
    """The dtype binding the TilingFunc sees: {variable: DType} of the variables some present input or an output is
    declared in. A variable whose tensors are all absent (an optional weight's U) is missing, so the dtype key takes
    its float32 row as the emitted DTypeKey does (a ge::DT_UNDEFINED variable prefers DT_FLOAT), whatever --dtype
    bound it to."""
    used = {t.dtype.name for t in spec.outputs if hasattr(t.dtype, "name")}
    used |= {i.dtype.name for i in spec.inputs if hasattr(i.dtype, "name") and bound.arrays.get(i.name) is not None}
    return {v: d for v, d in bound.dtypes.items() if v in used}


def launch(spec, bound, slots: list, platform, deterministic: bool = False) -> KirLaunch:
    """Run `spec`'s kernel for the bound call `bound` (BoundCall: arrays, env, dtypes, attrs, key) on `platform`
    with the Kernel IR interpreter: the class is the one serving the call's attrKey and presence of the optional
    inputs (opgen.kernel.rows.variants_of's condition, as the kernel entry tests it). `slots`: (DType, shape) per
    output in spec order, None for one the specialisation does not produce. Raises NotKernelIR (require_kernel_ir)
    when the kernel is not Kernel IR throughout, or when no single class serves the call."""
    from opgen.tiling.pipeline import kernel_build  # lazy: start-up time
    from opgen.tiling.emit import SYS_WORKSPACE_BYTES, evaluate

    classes = require_kernel_ir(spec)
    unit = kernel_build(spec)
    out = KirLaunch()
    try:
        host = {i.name: bound.arrays[i.name] for i in spec.inputs if i.host and bound.arrays.get(i.name) is not None}
        tl = evaluate(spec, unit.tiling.program, unit.tiling.inputs, bound.env, _tensor_dtypes(spec, bound),
                      platform, bound.attrs, deterministic, bound.key.forms, bound.key.present, host)
    except OpgenError as e:   # the emitted TilingFunc returns GRAPH_FAILED in the same cases
        out.tiling_error = str(e)
        return out
    out.tiling_ok = True
    out.block_dim, out.tiling_key = int(tl["blockDim"]), int(tl["tilingKey"])
    user_ws = int(tl.get("workspaceBytes", 0))
    out.workspace_bytes = user_ws + SYS_WORKSPACE_BYTES
    ex = getattr(unit.lowered, "extra", {})
    members: dict = {}
    kind = None
    if unit.family.name == "cube":   # one class, T the operands' type; the entry's kernel type (AIC only or mixed)
        from opgen.kernel.cube import CTYPE, tparam_var  # lazy: start-up time

        # the class of the call's static attributes and, where they select it, its inputs' shape forms (its layout;
        # every presence of its optional inputs)
        forms = unit.lowered.extra.get("form_key")
        k = next((c for key, c in unit.lowered.programs.items() if key.static == bound.key.static
                  and key.dtypes == bound.key.dtypes and (not forms or key.forms == bound.key.forms)), None)
        if k is None:   # not reached: every specialisation has a class (a guard, never another class's run)
            raise NotKernelIR(f"--engine kir: {spec.name}: no kernel class serves {bound.key}; use --engine emu")
        lay = unit.lowered.layout
        types = {"T": CTYPE[lay.dtype] if lay.fixed else _ctype(bound.dtypes[lay.dtype])}
        # an epilogue input's own dtype variable (the class's other template parameters); unbound: float below
        used = _tensor_dtypes(spec, bound)
        types.update({t: _ctype(used[tparam_var(spec, t)]) for t in k.tparams[1:] if tparam_var(spec, t) in used})
        kind = unit.family.launch_kind(unit.lowered, out.tiling_key)
    elif "aclasses" in ex:   # the class serving the call's specialisation; T the data's type; a mixed launch
        k = next((c.kclass for c in ex["aclasses"] if bound.key in c.keys), None)
        if k is None:
            raise NotKernelIR(f"--engine kir: {spec.name}: no kernel class serves {bound.key}; use --engine emu")
        types = {"T": _ctype(bound.dtypes[unit.lowered.layout.dtype])}
        kind = "KERNEL_TYPE_MIX_AIC_1_2"
    elif "heads" in ex:   # one class; its Init sets has_<input> from the pointer (KernelClass.presence)
        from opgen.kernel.headlower import data_dtype  # lazy: start-up time

        k = classes[0]
        types = {"T": _ctype(bound.dtypes[data_dtype(spec, ex["heads"])])}
    else:
        cond = presence_condition(spec, bound.key.present)
        fkey = int(tl.get("formKey", 0))   # the tiling key's form digit (opgen.tiling.rowkernel.program's forms)
        serving = [k for v, k in zip(ex["variants"], classes)
                   if serves_call(v, tl["attrKey"], bound.key.present, fkey, spec)]
        if len(serving) != 1:
            raise NotKernelIR(f"--engine kir: {spec.name}: {len(serving)} kernel classes serve attrKey "
                              f"{tl['attrKey']} with {cond}; use --engine emu")
        k = serving[0]
        types = {t: _ctype(bound.dtypes[t]) for t in k.tparams if t in bound.dtypes}
        # a class serving several presences sets hasInput<k>_ in its Init (KernelClass.presence): the interpreter too
    gm = {}   # by Init argument name (cpp_name of the spec's, as the class spells it); an absent input is nullptr
    for i in spec.inputs:
        a = bound.arrays.get(i.name)
        dt = bound.dtypes[i.dtype.name] if hasattr(i.dtype, "name") and i.dtype.name in bound.dtypes else i.dtype
        arg = kir.kernel_arg(k, cpp_name(i.name))
        if not i.host:
            gm[arg] = None if a is None else np.ascontiguousarray(np.asarray(a).astype(dt.np))
        elif any(g.arg == arg for g in k.gms):   # a host array the aclnn layer copies to the device
            gm[arg] = None if a is None else np.ascontiguousarray(np.asarray(a).astype(dt.np))
    outs = {}
    for o, s in zip(spec.outputs, slots):
        arg = kir.kernel_arg(k, cpp_name(o.name))
        gm[arg] = None   # an output this specialisation does not produce: nullptr
        if o.ref is not None:   # written in place (OpSpec.output(ref=)): the input's own array, read back after the run
            outs[o.name] = gm[arg] = gm[kir.kernel_arg(k, cpp_name(o.ref))]
            continue
        if s is not None:
            dt, shape = s
            outs[o.name] = np.full(shape, np.nan, dt.np) if dt.is_float else np.zeros(shape, dt.np)
            gm[arg] = outs[o.name]
    for t in k.tparams:   # a variable whose tensors are all absent: float, as the TilingFunc's dtype key takes it
        types.setdefault(t, "float")
    ws = np.zeros(-(-user_ws // 4), np.float32)
    cube = {"L1": platform.l1_bytes, "L0A": platform.l0a_bytes, "L0B": platform.l0b_bytes, "L0C": platform.l0c_bytes,
            "BiasTable": platform.bt_bytes}
    r = kir_interp.run(k, {f: int(v) for f, v in tl.items()}, gm, out.block_dim, platform.ub_bytes, workspace=ws,
                       types=types, members=members, launch=kind, cube_bytes=cube, deterministic=deterministic,
                       verify_first=False)   # require_kernel_ir verified every class above
    out.launched = True
    out.faults = list(r.faults)
    out.ub_peak = max(r.ub_peak) if r.ub_peak else 0
    out.arrays = outs
    return out
