"""DynamicQuant (aclnnDynamicQuant), symmetric per-token int8 quantisation: for each row of x,
scale = max(|x|) / 127 and y = round(x / scale) to int8 (ties to even, saturated), the scale returned in fp32.

The rows kernel writes y from fp32 through half (CAST_ODD, then int8 with the mode: the correctly rounded, saturated
integer), the interpreter's device mode the same. ops-nn's A2 kernel computes 127 / max and multiplies, then goes
through int32 and half: its y and scale are not bit-identical to this spec's x / (max / 127). An all-zero row has scale 0 and
x / scale = NaN, which the cast turns into 0 (docs/reference/ascendc.md §1.12).
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32, i8

spec = OpSpec("DynamicQuant", aclnn="aclnnDynamicQuant", socs=(A2, A3), round="rint",
              doc="Per-token symmetric quantisation of x to int8 with its fp32 scale.")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=65536)
(T,) = spec.dtype_vars("T")

spec.input("x", T, [Bd, H])
spec.output("y", i8, [Bd, H])
spec.output("scale", f32, [Bd], doc="max(|x|) / 127 per row")
spec.dtypes((T,), [(f16,), (bf16,)])
spec.package("ops-nn", "quant")


@spec.body
def _(b, x):
    scale = b.abs(x).max(-1) / 127.0
    y = b.cast(x / scale, i8, "rint")
    return {"y": y, "scale": scale.reshape([Bd])}
