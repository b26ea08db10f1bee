"""ModulateGrad: gradients of out = x * (1 + scale) + shift with per-batch scale and shift.

dx = dy * (1 + scale); dscale = sum over the batch's S rows of dy * x; dshift = sum of dy over them: per-batch
accumulators (a batch split across cores is summed in core order through workspace).
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("ModulateGrad", aclnn="aclnnModulateBackward", socs=(A2, A3), round="rint",
              doc="Backward of Modulate.")
B, S = spec.dims("B S")
H = spec.dim("H", max=32768)
(T,) = spec.dtype_vars("T")

spec.input("dy", T, [B, S, H])
spec.input("x", T, [B, S, H])
spec.input("scale", T, [B, 1, H])
spec.output("dx", T, [B, S, H])
spec.output("dscale", T, [B, 1, H])
spec.output("dshift", T, [B, 1, H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, dy, x, scale):
    return {"dx": dy * (1.0 + scale), "dscale": (dy * x).sum(1), "dshift": dy.sum(1)}
