"""AddRmsNormQuant (aclnnAddRmsNormQuant): x = x1 + x2, y = RmsNorm(x) * gamma, then static per-channel
quantisation y1 = sat(rint(y / scales1 + zero_points1)) to int8, and y2 likewise with scales2 / zero_points2 when
scales2 is given (divMode true, the only mode CANN's A2 / A3 kernel takes; axis -1); x is returned too. CANN's
interface: x1, x2, gamma, scales1, scales2Optional, zeroPoints1Optional, zeroPoints2Optional, axis, epsilon,
divMode, y1Out, y2Out, xOut (ops-nn norm/add_rms_norm_quant, aclnnAddRmsNormQuant.md); y2 is written only when
scales2 is present.

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
spec.input("scales2", f32, [H], optional=True)
spec.input("zero_points1", i32, [H], optional=True)
spec.input("zero_points2", i32, [H], optional=True)
spec.attr("axis", int, -1, choices=(-1,), doc="the channel axis: the last")
spec.attr("epsilon", float, 1e-6, ge=0.0)
spec.attr("div_mode", bool, True, choices=(True,), doc="divide by the scales (the only mode on A2 / A3)")
spec.output("y1", i8, [Bd, H])
spec.output("y2", i8, [Bd, H], optional=True, doc="written when scales2 is given")
spec.output("x", T, [Bd, H], doc="x1 + x2, rounded to T")
spec.dtypes((T,), [(f16,)])
spec.package("ops-nn", "norm")


@spec.body
def _(b, x1, x2, gamma, scales1, scales2, zero_points1, zero_points2, axis, epsilon):
    x = (x1 + x2).cast(T, "rint")
    xf = x.f32()
    rstd = b.rsqrt((xf * xf).mean(-1) + epsilon)
    y = ((xf * rstd).cast(T, "rint").f32() * gamma).cast(T, "rint").f32()
    out = {"x": x}
    for k, (s, z) in enumerate(((scales1, zero_points1), (scales2, zero_points2)), start=1):
        if s is None:
            continue
        q = y / s
        if z is not None:
            q = q + z.f32()
        out[f"y{k}"] = b.cast(q, i8, "rint")
    return out
