"""AddRmsNormQuant (aclnnAddRmsNormQuant), the y1 path: x = x1 + x2, y = RmsNorm(x) * gamma, then static per-channel
quantisation y1 = sat(rint(y / scales1 + zero_points1)) to int8 (divMode true, the only mode CANN's A2 / A3 kernel
takes); x is returned too. CANN's optional second quantisation (scales2, zero_points2, y2) is left out.

The roundings are the ones ops-nn's fp16 kernel makes (norm/add_rms_norm_quant: the residual sum added in half, so
the norm reads x rounded to half; x * rstd cast to half and multiplied by gamma in half): each is a cast to T that
a computation reads, which the rows kernel performs inside the row (Cast to half with the mode, Cast back to fp32;
docs/design.md "Rounding inside a row"). Its bf16 kernel normalises the unrounded sum instead, which one body for
both types cannot say: this spec declares fp16 only.
"""

from opgen.dsl import A2, A3, OpSpec, f16, f32, i32, i8

spec = OpSpec("AddRmsNormQuant", aclnn="aclnnAddRmsNormQuant", socs=(A2, A3), round="rint",
              doc="Residual add, RmsNorm and static int8 quantisation.")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=16384)
(T,) = spec.dtype_vars("T")

spec.input("x1", T, [Bd, H])
spec.input("x2", T, [Bd, H])
spec.input("gamma", T, [H])
spec.input("scales1", f32, [H])
spec.input("zero_points1", i32, [H], optional=True)
spec.attr("epsilon", float, 1e-6, ge=0.0)
spec.output("y1", i8, [Bd, H])
spec.output("x", T, [Bd, H], doc="x1 + x2, rounded to T")
spec.dtypes((T,), [(f16,)])
spec.package("ops-nn", "norm")


@spec.body
def _(b, x1, x2, gamma, scales1, zero_points1, epsilon):
    x = (x1 + x2).cast(T, "rint")
    xf = x.f32()
    rstd = b.rsqrt((xf * xf).mean(-1) + epsilon)
    y = ((xf * rstd).cast(T, "rint").f32() * gamma).cast(T, "rint").f32()
    q = y / scales1
    if zero_points1 is not None:
        q = q + zero_points1.f32()
    return {"y1": b.cast(q, i8, "rint"), "x": x}
