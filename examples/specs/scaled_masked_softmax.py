"""ScaledMaskedSoftmax (torch_npu.npu_scaled_masked_softmax): y = softmax over the last axis of x * scale with the
masked positions filled with -10000 first (Megatron's masked fill, which the op replaces).

A fused masked fill: the bool mask (one byte per element) is read through half, compared with 0 and selected
between the fill value and the scaled row before the row max and sum. This spec takes a mask of x's own shape
(CANN's op also broadcasts a [B or 1, N or 1, S, S] mask); fixed_triu_mask is CANN's reserved attribute, left out.
CANN offers the op to torch_npu without an aclnn API; opgen names its aclnn layer after the OpDef. Rows up to 2^20:
a core's slice longer than UB is streamed (COL_STREAM, the row maximum and sum in one online pass).
"""

from opgen.dsl import A2, A3, OpSpec, bf16, boolean, f16, f32

spec = OpSpec("ScaledMaskedSoftmax", aclnn="aclnnScaledMaskedSoftmax", socs=(A2, A3), round="rint",
              doc="Softmax of scaled logits with masked positions filled.")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=1048576)
(T,) = spec.dtype_vars("T")

spec.input("x", T, [Bd, H], doc="logits")
spec.input("mask", boolean, [Bd, H], doc="true where the logit is masked out")
spec.attr("scale", float, 1.0, doc="scale of the logits")
spec.output("y", T, [Bd, H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.package("ops-nn", "vfusion")

FILL = -10000.0


@spec.body
def _(b, x, mask, scale):
    z = b.where(mask, FILL, x * scale)
    e = b.exp(z - z.max(-1))
    return {"y": e / e.sum(-1)}


@spec.example
def _(rng, inputs, env, attrs):
    """About a third of the logits masked (random inputs are all true otherwise: every logit masked)."""
    inputs["mask"] = rng.random(inputs["mask"].shape) < 0.3
