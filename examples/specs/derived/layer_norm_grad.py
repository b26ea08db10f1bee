"""LayerNormGrad derived from LayerNormV4 (layer_norm.py): dx, dgamma and dbeta from dy, x, gamma and the saved
mean and rstd. Compare the hand-written ../layer_norm_grad.py (LayerNormGradV3)."""

from opgen.dsl import derive_grad

spec = derive_grad("layer_norm.py", "LayerNormGrad", aclnn="aclnnLayerNormGrad", wrt=["x", "gamma", "beta"],
                   saved=["mean", "rstd"], grads={"y": "dy"}, names={"x": "pd_x", "gamma": "pd_gamma", "beta": "pd_beta"})


@spec.example
def _(rng, inputs, env, attrs):
    """The saved mean and rstd consistent with the generated x (LayerNormV4's epsilon default, 1e-5), in fp32."""
    import numpy as np

    x = inputs["x"].astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    inputs["mean"] = mean.astype(np.float32)
    inputs["rstd"] = (1.0 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5)).astype(np.float32)
