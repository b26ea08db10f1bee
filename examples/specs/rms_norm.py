"""RmsNorm (aclnnRmsNorm): y = x * rstd * gamma with rstd = 1 / sqrt(mean(x^2 over the last axis) + epsilon).

A last-axis reduction per row with a [H] weight broadcast over the rows; the per-row rstd is a second output in
fp32, as CANN's RmsNorm returns it. One dtype variable: x, gamma and y share T. Rows up to 2^20: a core's slice
longer than UB is streamed (COL_STREAM: x read twice, gamma once per chunk of the output pass).
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("RmsNorm", aclnn="aclnnRmsNorm", socs=(A2, A3), round="rint",
              doc="Root-mean-square normalisation over the last axis with a learned scale.")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=1048576)
(T,) = spec.dtype_vars("T")

spec.input("x", T, [Bd, H])
spec.input("gamma", T, [H])
spec.attr("epsilon", float, 1e-6, doc="added to the mean square")
spec.output("y", T, [Bd, H])
spec.output("rstd", f32, [Bd, 1], doc="1 / sqrt(mean(x^2) + epsilon) per row")
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


spec.package("ops-nn", "norm")  # where the package goes: ops-nn norm/<op_snake>
# ops-nn already has norm/rms_norm (snapshot e5c3fa9): its tiling file also registers GemmaRmsNorm, and it builds
# for more SoCs and paths than this package
spec.replaces("norm/rms_norm", "CANN's own RmsNorm lives there; two registrations of RmsNorm clash.",
              lost=("GemmaRmsNorm's tiling (IMPL_OP_OPTILING(GemmaRmsNorm) in op_host/rms_norm_tiling.cpp)",
                    "the ascend950 (arch35, regbase) tiling and kernels (op_host/rms_norm_tiling_arch35.cpp, "
                    "op_kernel/arch35/)",
                    "the ascend310p, ascend910, kirinx90 and kirin9030 configs (float16 and float32 only)",
                    "the ONNX plugin (framework/npu_rms_norm_onnx_plugin.cpp)",
                    "on ascend910b and ascend910_93, the OpDef rows x float16 with gamma float32 and x bfloat16 with "
                    "gamma float32 (this spec's x, gamma and y share one dtype)",
                    "gamma of more than one axis (gamma_shape = x_shape[n:], rstd 1 on each normalised axis; "
                    "this spec's gamma is [H])"))


@spec.body
def _(b, x, gamma, epsilon):
    rstd = b.rsqrt((x * x).mean(-1) + epsilon)
    return {"y": x * rstd * gamma, "rstd": rstd}
