"""Quantize (ops-nn quant/quantize; aclnnQuantize), per-channel quantisation to int8 along x's last axis:
y = sat(rint(x / scales + zero_points)), scales [H], the optional zero_points [H] as int8, y int8 (dtype
"torch.qint8").

The zero points are read as the kernel's column rows: an int8 row has no direct cast to fp32 on the vector unit, so
its bytes go to half and the halves to fp32, both exact (opgen.kernel.rowsched LoadByteRow; docs/reference/
ascendc.md §1.12). The quotient and the sum are fp32 and rounded once to int8 (half to even, saturating: through
half with CAST_ODD, then int8 with CAST_RINT, docs/reference/ascendc.md §1.12).

The parameters are CANN's (OpDef Quantize: inputs x, scales, zero_points; output y; attributes dtype, a required
string, and axis). Atlas A2 / A3 take x and scales as fp32, fp16 or bf16 and zero points as int8, uint8, int32 or
bf16, where bf16 scales or zero points need all three bf16 (CANN's aclnn dtype check). What this kernel does not
implement is declared with the values it accepts (docs/design.md "Parameters a kernel does not implement"): dtype
"torch.qint8" (no uint8 or int32 output), axis -1 (the last axis; CANN's OpDef default is 1, any axis), the per
channel form only (no per-tensor [1] scales and zero points), scales fp32 or in x's fp16 (no bf16 scales), int8 zero
points only (a dtype variable over byte and wider types is one kernel class the rows family cannot template,
rows._check_dtype_rows). CANN's aclnnQuantize takes the output type as `aclDataType dtype`; the DSL has no such
parameter kind, so this API passes dtype fixed (aclnnQuantize(x, scales, zeroPoints, axis, y)), and the package
replaces ops-nn's own quant/quantize directory (its README says what is lost).
"""

from opgen.dsl import A2, A3, OpSpec, api, bf16, f16, f32, i8

spec = OpSpec("Quantize", aclnn="aclnnQuantize", socs=(A2, A3), round="rint",
              doc="Per-channel quantisation of x to int8 with a scale and an integer zero point.")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=65536)
T, S = spec.dtype_vars("T S")

spec.input("x", T, [Bd, H])
spec.input("scales", S, [H], doc="per channel [H]; fp32, or x's fp16")
spec.input("zero_points", i8, [H], optional=True, doc="per channel [H], int8")
spec.attr("dtype", str, required=True, accepts=("torch.qint8",), unsupported="an output other than int8")
spec.attr("axis", int, -1, accepts=(-1,), unsupported="a channel axis other than the last")
spec.output("y", i8, [Bd, H])
spec.dtypes((T, S), [(f32, f32), (f16, f16), (f16, f32), (bf16, f32)])
spec.aclnn_signature(api.param("x"), api.param("scales"), api.param("zeroPoints", "zero_points"),
                     api.fixed("dtype", "torch.qint8"), api.param("axis", "axis", ctype="int32_t"), api.param("y"),
                     const_outputs=True)
spec.package("ops-nn", "quant")
spec.example_call({"Bd": (4,), "H": 64}, {"dtype": "torch.qint8"})
spec.replaces("quant/quantize", "CANN's own Quantize lives there; two registrations of Quantize clash.",
              lost=("aclnnQuantize's aclDataType dtype argument (this API fixes int8)", "uint8 and int32 outputs",
                    "per-tensor scales and zero points", "uint8, int32 and bf16 zero points",
                    "channel axes other than the last", "the Ascend 950 (arch35) kernel"))


@spec.body
def _(b, x, scales, zero_points, dtype, axis):
    q = x.f32() / scales.f32()
    if zero_points is not None:
        q = q + zero_points.f32()
    return {"y": b.quantize(q, i8, "rint")}
