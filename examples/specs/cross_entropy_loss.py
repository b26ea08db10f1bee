"""CrossEntropyLoss (ops-nn loss/cross_entropy_loss, aclnnCrossEntropyLoss) with class-index targets, reduction
'none': per row n of input [N, C], log_prob[n, c] = x[n, c] - lse_n with lse_n = log(sum_c exp(x[n, c])), and
loss[n] = -(1 - eps) * weight[target[n]] * log_prob[n, target[n]] - eps / C * sum_c weight[c] * log_prob[n, c]
(eps = label_smoothing; weight absent: 1), 0 where target[n] == ignore_index.

The OpDef and the aclnn signature are CANN's: inputs input, target, weight (optional); outputs loss, log_prob,
zloss, lse_for_zloss; attributes reduction ("mean"), ignore_index (-100), label_smoothing (0.0),
lse_square_scale_for_zloss (0.0), return_zloss (false); aclnnCrossEntropyLoss's 12 parameters (input, target,
weightOptional, reductionOptional, ignoreIndex, labelSmoothing, lseSquareScaleForZloss, returnZloss, lossOut,
logProbOut, zlossOut, lseForZlossOut). What the kernel implements (docs/design.md "Parameters a kernel does not
implement"): reduction 'none' only — CANN's default 'mean' and 'sum' (a [1] loss) are refused, so a call passes
reduction="none"; the z-loss attributes at 0.0 / false only; zloss and lse_for_zloss are not written (CANN's
README: the z-loss is not supported yet).

The target is one int64 index per row: the kernel reads it on the scalar unit, checks 0 <= target < C or the
ignored index (the spec's device check: Trap() otherwise; the aclnn layer cannot read device data) and picks
log_prob[n, target[n]] and weight[target[n]] by comparing the row's lane indices (CreateVecIndex) with it. An
ignored row gathers at class 0 and is multiplied by 0 (a row whose log_prob there is -inf would give NaN, not 0).
ignore_index is CANN's int64 (OpDef Int, aclnn int64_t): the kernel reads it as its value rounded once to fp32 and
compares it with the target read as fp32, which is exact for any int64 ignore_index while C <= 2^24 (docs/design.md
"Rows family: integer attributes").
"""

from opgen.dsl import A2, A3, OpSpec, api, bf16, f16, f32, i64
from opgen.dsl.checks import index_in_range

spec = OpSpec("CrossEntropyLoss", aclnn="aclnnCrossEntropyLoss", socs=(A2, A3), round="rint",
              doc="Cross-entropy loss of logits against class-index targets (reduction none).")
N = spec.dim("N")
C = spec.dim("C", max=131072)
(T,) = spec.dtype_vars("T")

spec.input("input", T, [N, C])
spec.input("target", i64, [N])
spec.input("weight", f32, [C], optional=True, doc="weightOptional: per-class weights; absent = ones")
spec.attr("reduction", str, "mean", choices=("none", "mean", "sum"), accepts=("none",),
          unsupported="a reduced [1] loss")
spec.attr("ignore_index", int, -100, doc="a target value that contributes no loss (an integer)")
spec.attr("label_smoothing", float, 0.0, doc="epsilon: the target's share 1 - epsilon, every class's epsilon / C")
spec.attr("lse_square_scale_for_zloss", float, 0.0, accepts=(0.0,), unsupported="the z-loss")
spec.attr("return_zloss", bool, False, accepts=(False,), unsupported="the z-loss")
spec.output("loss", T, [N])
spec.output("log_prob", T, [N, C])
spec.output("zloss", T, [N], optional=True, param_type="REQUIRED", doc="not written (CANN: no z-loss yet)")
spec.output("lse_for_zloss", T, [N], optional=True, param_type="REQUIRED", doc="not written")
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.aclnn_signature(api.param("input"), api.param("target"), api.param("weightOptional", "weight"),
                     api.param("reductionOptional", "reduction", ctype="char*"),
                     api.param("ignoreIndex", "ignore_index"), api.param("labelSmoothing", "label_smoothing"),
                     api.param("lseSquareScaleForZloss", "lse_square_scale_for_zloss"),
                     api.param("returnZloss", "return_zloss"), api.param("lossOut", "loss"),
                     api.param("logProbOut", "log_prob"), api.param("zlossOut", "zloss"),
                     api.param("lseForZlossOut", "lse_for_zloss"), const_outputs=True)
spec.package("ops-nn", "loss")
spec.example_call({"N": 7, "C": 37}, {"reduction": "none"})


# device data: the kernel traps on a target outside [0, C) that is not ignore_index
spec.check("target", index_in_range("target", "C", ignore="ignore_index"), on="device")


@spec.body
def _(b, input, target, weight, reduction, ignore_index, label_smoothing, lse_square_scale_for_zloss, return_zloss):
    x = input.f32()
    z = x - x.max(-1)
    lp = z - b.log(b.exp(z).sum(-1).broadcast_to([N, C]))
    keep = target.ne(ignore_index).cast(i64)
    t = target * keep                       # an ignored row reads class 0, then counts 0
    picked = b.gather(lp, t, axis=1)
    every = (lp if weight is None else lp * weight).sum(-1, keepdims=False)
    if weight is not None:                  # absent: every class weighs 1
        picked = picked * b.gather(weight, t, axis=0)
    # torch / CANN: (1 - eps) * nll + eps / C * sum_c -w_c logProb_c, the smoothing term only when eps != 0 (a
    # runtime guard: the kernel skips its class sum and weight reads at eps == 0; docs/design.md "Runtime guards")
    smooth = b.where(label_smoothing.ne(0.0), every * (label_smoothing / C), -0.0)   # -0.0: x + -0.0 is x
    loss = -(picked * (1.0 - label_smoothing) + smooth) * keep.f32()
    return {"loss": loss.cast(T, "rint"), "log_prob": lp.cast(T, "rint")}
