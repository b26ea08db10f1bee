"""BatchNormV3 (the operator aclnnBatchNorm launches for an N-D input) in training mode on a 3-D input [N, C, L]
(torch BatchNorm1d): per channel c, over the N samples and the L positions, mean = sum(x) / (N * L) and
invstd = 1 / sqrt(sum(x * x) / (N * L) - mean ** 2 + eps) (the biased variance from the sum and the sum of squares,
as CANN's BNTrainingReduce / BNTrainingUpdate pair computes it); output = (x - mean) * invstd * weight + bias;
saveMean and saveInvstd ([C]) are written.

The statistics are reductions over two axes that are not adjacent (N and L, keeping C). The rows family puts the
kept axis first (its kernel runs on [C, N, L]: input and output are read and written through that permuted view,
row (c, n) at n * C * L + c * L) so that each channel's rows are a batch of consecutive rows: the first pass adds
each channel's rows into a per-channel fp32 row (a channel split across cores: the cores' partial rows combined in
core order through workspace), the second pass reads that row back complete at each new channel, reduces it over
its L columns and normalises the channel's rows; saveMean and saveInvstd are written by the core holding the
channel's first row. Not declared here (as in batch_norm.py): the running statistics updated in place
(runningMean / runningVar, momentum) and training = false.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("BatchNormV3", aclnn="aclnnBatchNorm", socs=(A2, A3), round="rint",
              doc="Batch normalisation of [N, C, L] over N and L per channel C (training mode).")
N = spec.dim("N", max=1 << 20)
C = spec.dim("C", max=4096)
L = spec.dim("L", max=4096)
(T,) = spec.dtype_vars("T")

spec.input("input", T, [N, C, L])
spec.input("weight", f32, [C])
spec.input("bias", f32, [C])
spec.attr("training", bool, True, choices=(True,), static=True, doc="the batch statistics are computed")
spec.attr("eps", float, 1e-5, doc="added to the variance")
spec.output("output", T, [N, C, L])
spec.output("saveMean", f32, [C])
spec.output("saveInvstd", f32, [C])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


spec.package("ops-nn", "norm")  # where the package goes: ops-nn norm/<op_snake>


@spec.body
def _(b, input, weight, bias, training, eps):
    x = input.f32()
    mean = x.mean((0, 2), keepdims=False)
    invstd = b.rsqrt((x * x).mean((0, 2), keepdims=False) - mean * mean + eps)
    scale = (invstd * weight).reshape([C, 1])
    return {"output": ((x - mean.reshape([C, 1])) * scale + bias.reshape([C, 1])).cast(T, "rint"),
            "saveMean": mean, "saveInvstd": invstd}
