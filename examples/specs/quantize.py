"""Quantize (ops-nn quant/quantize; aclnnQuantize), per-channel quantisation to int8 along x's last axis:
y = sat(rint(x / scales + zero_points)), scales [H] (per channel) or [1] (per tensor) in x's dtype, the optional
zero_points [H] or [1] as int8, y int8 (dtype "torch.qint8").

The zero points are read as the kernel's column rows: an int8 / uint8 row has no direct cast to fp32 on the vector
unit, so its bytes go to half and the halves to fp32, both exact (opgen.kernel.rowsched LoadByteRow; docs/reference/
ascendc.md). The quotient and the sum are fp32 and rounded once to int8 (half to even, saturating: through half with
CAST_ODD, then int8 with CAST_RINT, docs/reference/ascendc.md §1.12).

The parameters are CANN's (OpDef Quantize: inputs x, scales, zero_points; output y; attributes dtype, a required
string, and axis). What this kernel does not implement is declared with the values it accepts (docs/design.md
"Parameters a kernel does not implement"): dtype "torch.qint8" (no uint8, int32, hifloat8 or fp8 output), axis -1
(the last axis; CANN's OpDef default is 1, any axis), scales in x's dtype (CANN also takes fp32 scales beside fp16 /
bf16 x), int8 zero points only (CANN also takes uint8, int32, bf16 and fp32 ones: a dtype variable over byte and
wider types is one kernel class the rows family cannot template, rows._check_dtype_rows). CANN's aclnnQuantize takes the output type as `aclDataType dtype`; the DSL has
no such parameter kind, so this API passes dtype fixed (aclnnQuantize(x, scales, zeroPoints, axis, y)). Atlas A2 /
A3 only.
"""

from opgen.dsl import A2, A3, OpSpec, api, bf16, f16, f32, i8

spec = OpSpec("Quantize", aclnn="aclnnQuantize", socs=(A2, A3), round="rint",
              doc="Per-channel (or per-tensor) quantisation of x to int8 with a scale and an integer zero point.")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=65536)
(T,) = spec.dtype_vars("T")

spec.input("x", T, [Bd, H])
spec.input("scales", T, [[H], [1]], doc="per channel [H] or per tensor [1], x's dtype")
spec.input("zero_points", i8, [[H], [1]], optional=True, doc="per channel [H] or per tensor [1], int8")
spec.attr("dtype", str, "torch.qint8", accepts=("torch.qint8",), unsupported="an output other than int8")
spec.attr("axis", int, -1, accepts=(-1,), unsupported="a channel axis other than the last")
spec.output("y", i8, [Bd, H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.aclnn_signature(api.param("x"), api.param("scales"), api.param("zeroPoints", "zero_points"),
                     api.fixed("dtype", "torch.qint8"), api.param("axis", "axis", ctype="int32_t"), api.param("y"),
                     const_outputs=True)
spec.package("ops-nn", "quant")


@spec.body
def _(b, x, scales, zero_points, dtype, axis):
    q = x.f32() / scales.f32()
    if zero_points is not None:
        q = q + zero_points.f32()
    return {"y": b.quantize(q, i8, "rint")}
