"""BatchNorm (aclnnBatchNorm) in training mode on a 2-D input [N, C]: per channel c, over the N rows,
mean = sum(x) / N and invstd = 1 / sqrt(sum(x * x) / N - mean ** 2 + eps) (the biased variance from the sum and the
sum of squares, as the BNTrainingReduce / BNTrainingUpdate pair that CANN's BatchNorm training path runs: the first
outputs sum and square_sum); output = (x - mean) * invstd * weight + bias; saveMean and saveInvstd are written.

Two passes over the rows: the first accumulates both column sums, the cross-core exchange completes them (each
core a column slice, in core order), every core reads them back and computes invstd once, the second pass
normalises the rows. Not declared here: CANN's N-D input (channel axis 1: the 3-D form is batch_norm_v3.py), the
running statistics updated in place (runningMean / runningVar, momentum) and
training = false (which reads them).
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("BatchNorm", aclnn="aclnnBatchNorm", socs=(A2, A3), round="rint",
              doc="Batch normalisation over the rows of [N, C] (training mode).")
N = spec.dim("N", max=1 << 24)
C = spec.dim("C", max=2048)
(T,) = spec.dtype_vars("T")

spec.input("input", T, [N, C])
spec.input("weight", f32, [C])
spec.input("bias", f32, [C])
spec.attr("training", bool, True, choices=(True,), static=True, doc="the batch statistics are computed")
spec.attr("eps", float, 1e-5, doc="added to the variance")
spec.output("output", T, [N, C])
spec.output("saveMean", f32, [C])
spec.output("saveInvstd", f32, [C])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


spec.package("ops-nn", "norm")  # where the package goes: ops-nn norm/<op_snake>


@spec.body
def _(b, input, weight, bias, training, eps):
    x = input.f32()
    mean = x.mean(0, keepdims=False)
    invstd = b.rsqrt((x * x).mean(0, keepdims=False) - mean * mean + eps)
    return {"output": ((x - mean) * (invstd * weight) + bias).cast(T, "rint"), "saveMean": mean,
            "saveInvstd": invstd}
