"""LayerNormGrad derived from LayerNormV4 (layer_norm.py): dx, dgamma and dbeta from dy, x, gamma and the saved
mean and rstd. Compare the hand-written ../layer_norm_grad.py (LayerNormGradV3)."""

from opgen.dsl import derive_grad

spec = derive_grad("layer_norm.py", "LayerNormGrad", aclnn="aclnnLayerNormGrad", wrt=["x", "gamma", "beta"],
                   saved=["mean", "rstd"], grads={"y": "dy"}, names={"x": "pd_x", "gamma": "pd_gamma", "beta": "pd_beta"})
