"""AddLayerNorm (aclnnAddLayerNorm): x = x1 + x2 (+ bias when given), then LayerNorm over the last axis:
mean = E[x], rstd = 1 / sqrt(E[(x - mean)^2] + epsilon), y = (x - mean) * rstd * gamma + beta; returns y, the fp32
statistics mean and rstd ([*Bd, 1]) and, when additional_output is true, the sum x. CANN's interface: x1, x2,
gamma, beta, biasOptional ([H] like gamma, or x1's shape), epsilon, additionalOutput (false by default: xOut is not
written), yOut, meanOut, rstdOut, xOut (ops-nn norm/add_layer_norm). Not here: CANN's mixed dtype rows (fp16 / bf16
x1 or x2 beside fp32 gamma and beta). As in CANN, x is a REQUIRED output (the caller always passes xOut) that the
kernel writes only under additional_output (param_type="REQUIRED" on an optional=True output).

One kernel class per value of additional_output and form of bias: the [H] class serves both presences of bias (the
statements that do not depend on it are printed once, only the bias add sits under its guard; docs/design.md
"Optional inputs: one class for every presence"); a bias of x1's shape is one more row operand.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("AddLayerNorm", aclnn="aclnnAddLayerNorm", socs=(A2, A3), round="rint",
              doc="Residual add (with an optional bias) followed by LayerNorm.")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=16384)
(T,) = spec.dtype_vars("T")

spec.input("x1", T, [Bd, H])
spec.input("x2", T, [Bd, H])
spec.input("gamma", T, [H])
spec.input("beta", T, [H])
spec.input("bias", T, [[H], [Bd, H]], optional=True, doc="added to x1 + x2 when given: [H] (one row for every row) or "
           "x1's shape")
spec.attr("epsilon", float, 1e-5, ge=0.0, doc="added to the variance")
spec.attr("additional_output", bool, False, choices=(False, True), static=True, doc="write x (CANN's default: not)")
spec.output("y", T, [Bd, H])
spec.output("mean", f32, [Bd, 1])
spec.output("rstd", f32, [Bd, 1])
spec.output("x", T, [Bd, H], optional=True, param_type="REQUIRED",
            doc="x1 + x2 (+ bias), written when additional_output is true")
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.package("ops-nn", "norm")


@spec.body
def _(b, x1, x2, gamma, beta, bias, epsilon, additional_output):
    x = x1.f32() + x2.f32()
    if bias is not None:
        x = x + bias.f32()
    mean = x.mean(-1)
    d = x - mean
    rstd = b.rsqrt((d * d).mean(-1) + epsilon)
    y = d * rstd * gamma.f32() + beta.f32()
    out = {"y": y.cast(T, "rint"), "mean": mean, "rstd": rstd}
    if additional_output:
        out["x"] = x.cast(T, "rint")
    return out
