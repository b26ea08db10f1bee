"""InplaceApplyMomentum (ops-nn optim/inplace_apply_momentum): the momentum update of var and accum, both written
in place (outputs var_ref, accum_ref are the updated values, ref= their inputs: the kernel writes the inputs'
GM; docs/design.md "Inputs updated in place"):

    accum = accum * momentum + grad
    var   = var - lr * accum                                 (use_nesterov false)
    var   = var - (grad * lr + accum * momentum * lr)        (use_nesterov true; accum already updated)

torch.optim.SGD's momentum step (dampening 0) computes the same: buf = momentum * buf + grad, then var -= lr * buf,
or with nesterov var -= lr * (grad + momentum * buf). CANN's OpDef types var, accum, lr, grad and momentum alike
(float32, float16, bfloat16); lr and momentum hold one element. Its attribute use_locking has no effect on the
math (CANN's kernel does not read it) and is kept for the OpDef. CANN declares the op for ascend950 only; opgen
emits it for Atlas A2 / A3 as well (the same vector math). CANN has no aclnn API for it (ops-nn builds the op with
ACLNNTYPE aclnn_exclude: graph mode only), so the API opgen emits is named aclnnOpgenInplaceApplyMomentum, a name
that says it is opgen's and cannot be mistaken for one of CANN's.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("InplaceApplyMomentum", aclnn="aclnnOpgenInplaceApplyMomentum", socs=(A2, A3), round="rint",
              doc="Momentum update of var and accum, in place.")
Bd = spec.variadic("Bd", max_rank=8)
(T,) = spec.dtype_vars("T")

spec.input("var", T, [Bd], doc="the parameters, updated in place")
spec.input("accum", T, [Bd], doc="the momentum buffer, updated in place")
spec.input("lr", T, [1], doc="learning rate, one element")
spec.input("grad", T, [Bd], doc="gradient of var")
spec.input("momentum", T, [1], doc="momentum coefficient, one element")
spec.attr("use_nesterov", bool, False, choices=(False, True), static=True, doc="Nesterov momentum")
spec.attr("use_locking", bool, False, doc="no effect on the result (kept for CANN's OpDef)")
spec.output("var_ref", ref="var", doc="var after the update (written into var)")
spec.output("accum_ref", ref="accum", doc="accum after the update (written into accum)")
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.package("ops-nn", "optim")


@spec.body
def _(b, var, accum, lr, grad, momentum, use_nesterov):
    lr, momentum = lr.reshape([]), momentum.reshape([])    # one element each: scalars of the update
    acc = accum * momentum + grad
    if use_nesterov:
        new = var - (grad * lr + acc * momentum * lr)
    else:
        new = var - lr * acc
    return {"var_ref": new, "accum_ref": acc}


@spec.example
def _(rng, inputs, env, attrs):
    """A learning rate and a momentum coefficient as training uses them (random normals are negative half the
    time): lr in [0.001, 0.1), momentum in [0.5, 0.99)."""
    inputs["lr"] = rng.uniform(0.001, 0.1, inputs["lr"].shape)
    inputs["momentum"] = rng.uniform(0.5, 0.99, inputs["momentum"].shape)
