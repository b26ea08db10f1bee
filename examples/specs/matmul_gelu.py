"""MatmulGelu (aclnnMatmulGelu): output[M, N] = gelu_tanh(x[M, K] @ weight[K, N] + bias[N]), fp16 / bf16 in, fp32
accumulation on the cube, the bias add and the GELU in fp32 on the vector cores, the result rounded once to the
input dtype.

The operator of vllm-ascend's custom op MatmulGelu (csrc/matmul_gelu: inputs x, weight, bias, output `output`;
its kernel takes fp16 / fp32 on Atlas A2). What differs: this spec takes fp16 / bf16 (the cube reads 2-byte
operands), the weight as [K, N], and GELU in its tanh form (torch's approximate="tanh").

The cube family's matmul with a vector epilogue: the AIC of each AI Core computes fp32 output blocks into two GM
workspace slots in turn; its two AIVs each take half of a block's rows, add the bias, apply GELU, cast and store.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("MatmulGelu", aclnn="aclnnMatmulGelu", socs=(A2, A3), round="rint",
              doc="Matrix product plus bias, then GELU (tanh form).")
M = spec.dim("M", max=65535)
K = spec.dim("K", max=65535)
N = spec.dim("N", max=65535)
(T,) = spec.dtype_vars("T")

spec.input("x", T, [M, K])
spec.input("weight", T, [K, N])
spec.input("bias", T, [N])
spec.output("output", T, [M, N])
spec.dtypes((T,), [(f16,), (bf16,)])

spec.package("ops-nn", "matmul")  # where the package goes: ops-nn matmul/<op_snake>
spec.example_call({"M": 37, "K": 50, "N": 45})


@spec.body
def _(b, x, weight, bias):
    y = b.matmul(x, weight) + bias.cast(f32)
    return {"output": b.gelu(y, approximate="tanh").cast(T, "rint")}
