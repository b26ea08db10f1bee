"""Modulate (DiT adaptive modulation): out = x * (1 + scale) + shift, scale and shift one row per batch.

scale and shift are [B, H] or [B, 1, H] (either form): batch rows loaded once per batch and reused by its S rows.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("Modulate", aclnn="aclnnModulate", socs=(A2, A3), round="rint",
              doc="x * (1 + scale) + shift with per-batch scale and shift.")
B, S = spec.dims("B S")
H = spec.dim("H", max=65536)
(T,) = spec.dtype_vars("T")

spec.input("x", T, [B, S, H])
spec.input("scale", T, [[B, H], [B, 1, H]])
spec.input("shift", T, [[B, H], [B, 1, H]])
spec.output("out", T, [B, S, H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, x, scale, shift):
    return {"out": x * (1.0 + scale.reshape([B, 1, H])) + shift.reshape([B, 1, H])}
