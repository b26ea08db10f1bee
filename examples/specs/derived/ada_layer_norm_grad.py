"""AdaLayerNormGrad derived from AdaLayerNormV2 (specs/ada_layer_norm_v2.py): the gradients of x, scale, shift,
weight and bias from dy, x, scale, the optional weight and the saved mean and rstd (taken in fp32, as the
hand-written specs/ada_layer_norm_grad.py takes them). shift and bias are inputs only for their presence and
shape form (their gradients do not read them)."""

from opgen.dsl import derive_grad, f32

spec = derive_grad("../../../specs/ada_layer_norm_v2.py", "AdaLayerNormGrad", aclnn="aclnnAdaLayerNormBackward",
                   wrt=["x", "scale", "shift", "weight", "bias"], saved=["mean", "rstd"], grads={"out": "dy"},
                   names={"x": "pd_x", "scale": "pd_scale", "shift": "pd_shift", "weight": "pd_gamma",
                          "bias": "pd_beta"},
                   dtypes={"mean": f32, "rstd": f32}, dim_max={"H": 65536})   # the hand-written spec's bound


@spec.example
def _(rng, inputs, env, attrs):
    """The saved per-row mean and rstd consistent with the generated x (epsilon 1e-5), in fp32."""
    import numpy as np

    x = inputs["x"].astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    inputs["mean"] = mean.astype(np.float32)
    inputs["rstd"] = (1.0 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5)).astype(np.float32)
