"""ApplyAdamWV2 (ops-nn optim/apply_adam_w_v2; CANN's aclnnApplyAdamWV2): one AdamW step, var, m and v updated in
place (outputs var_ref, m_ref, v_ref are the updated values, ref= their inputs; docs/design.md "Inputs updated in
place"). With g = grad (-grad when maximize) and t = step (a one-element tensor, float32 or int64, t >= 1):

    var = var * (1 - lr * weight_decay)
    m   = beta1 * m + (1 - beta1) * g
    v   = beta2 * v + (1 - beta2) * g * g
    var = var - lr / (1 - beta1^t) * m / (sqrt(v / (1 - beta2^t)) + eps)

torch.optim.AdamW's step with the state's step count t - 1 before it (amsgrad off) computes the same
(tests/test_apply_adam_w_v2.py). Facts from CANN's OpDef and document: var, m, v of float32 / float16 / bfloat16,
grad of var's dtype or (var float32) float16 / bfloat16, step float32 or int64 with one element; the attributes
lr, beta1, beta2, weight_decay, eps, amsgrad, maximize.

The subset: amsgrad false only (accepts=(False,): its maximum of v kept in max_grad_norm, CANN's optional
maxGradNormOptionalRef, needs an optional input updated in place, which opgen does not express yet; the input
accepts "absent"). CANN declares max_grad_norm of grad's dtype. Nine of CANN's ten dtype rows: opgen's tiling key
holds the row in one decimal digit, so var float32 with grad bfloat16 and an int64 step is left out.
"""

from opgen.dsl import A2, A3, OpSpec, api, bf16, f16, f32, i64

spec = OpSpec("ApplyAdamWV2", aclnn="aclnnApplyAdamWV2", socs=(A2, A3), round="rint",
              doc="One AdamW optimizer step: var, m and v updated in place.",
              source="CANN's aclnnApplyAdamWV2 document (ops-nn optim/apply_adam_w_v2)")
Bd = spec.variadic("Bd", max_rank=8)
T, U, S = spec.dtype_vars("T U S")

spec.input("var", T, [Bd], doc="the parameters, updated in place")
spec.input("m", T, [Bd], doc="the first moment, updated in place")
spec.input("v", T, [Bd], doc="the second moment, updated in place (not negative)")
spec.input("grad", U, [Bd], doc="the gradient of var")
spec.input("step", S, [1], doc="the step count t >= 1, one element")
spec.input("max_grad_norm", U, [Bd], optional=True, accepts="absent", unsupported="amsgrad")
spec.attr("lr", float, 0.1, doc="learning rate")
spec.attr("beta1", float, 0.1)
spec.attr("beta2", float, 0.1)
spec.attr("weight_decay", float, 0.1)
spec.attr("eps", float, 1e-8)
spec.attr("amsgrad", bool, False, accepts=(False,), unsupported="amsgrad")
spec.attr("maximize", bool, False, choices=(False, True), static=True, doc="ascend the gradient")
spec.output("var_ref", ref="var", doc="var after the step (written into var)")
spec.output("m_ref", ref="m", doc="m after the step (written into m)")
spec.output("v_ref", ref="v", doc="v after the step (written into v)")
spec.dtypes((T, U, S), [(f32, f32, f32), (f16, f16, f32), (bf16, bf16, f32), (f32, f32, i64), (f16, f16, i64),
                        (bf16, bf16, i64), (f32, f16, f32), (f32, bf16, f32), (f32, f16, i64)])
# ops-nn's directory and file stem is apply_adam_w_v2 (its OpDef's opFile.value), not the apply_adam_wv2 op_snake
# derives from the OpDef name: the package, its files, tiling-key macros, kernel entry and aclnn files follow it
spec.package("ops-nn", "optim", stem="apply_adam_w_v2")
# CANN's public signature (ops-nn optim/apply_adam_w_v2 op_host/op_api/aclnn_apply_adam_w_v2.h): the tensors updated in
# place as aclTensor* <name>Ref, maxGradNormOptionalRef before grad, float coefficients.
spec.aclnn_signature(
    api.param("varRef", "var"), api.param("mRef", "m"), api.param("vRef", "v"),
    api.param("maxGradNormOptionalRef", "max_grad_norm", ctype="aclTensor*"), api.param("grad"), api.param("step"),
    api.param("lr", ctype="float"), api.param("beta1", ctype="float"), api.param("beta2", ctype="float"),
    api.param("weightDecay", "weight_decay", ctype="float"), api.param("eps", ctype="float"),
    api.param("amsgrad"), api.param("maximize"))


@spec.body
def _(b, var, m, v, grad, step, max_grad_norm, lr, beta1, beta2, weight_decay, eps, amsgrad, maximize):
    g = (-grad if maximize else grad).cast(f32)
    t = step.reshape([]).cast(f32).broadcast_to([Bd])   # the AIV scalar unit has no log / exp: rows of t
    mt = m * beta1 + g * (1.0 - beta1)
    vt = v * beta2 + g * g * (1.0 - beta2)
    bc1 = 1.0 - b.exp(t * b.log(beta1.broadcast_to([Bd])))   # 1 - beta1^t
    bc2 = 1.0 - b.exp(t * b.log(beta2.broadcast_to([Bd])))
    new = var * (1.0 - lr * weight_decay) - mt * (lr / bc1) / (b.sqrt(vt / bc2) + eps)
    return {"var_ref": new, "m_ref": mt, "v_ref": vt}


@spec.example
def _(rng, inputs, env, attrs):
    """A training step's values: v >= 0 (a mean of squares), t in 1 .. 1000, coefficients as AdamW uses them."""
    import numpy as np

    inputs["v"] = np.abs(inputs["v"])
    inputs["step"] = rng.integers(1, 1000, inputs["step"].shape).astype(inputs["step"].dtype)
