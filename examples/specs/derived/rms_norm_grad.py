"""RmsNormGrad derived from RmsNorm (../rms_norm.py) by reverse-mode differentiation of its tensor IR: dx and dgamma
from dy, x, gamma and the saved rstd (reused, not recomputed). Compare the hand-written ../rms_norm_grad.py."""

from opgen.dsl import derive_grad

spec = derive_grad("../rms_norm.py", "RmsNormGrad", aclnn="aclnnRmsNormGrad", wrt=["x", "gamma"], saved=["rstd"],
                   grads={"y": "dy"}, names={"x": "dx", "gamma": "dgamma"},
                   dim_max={"H": 65536})   # dgamma sums over rows: such a program is not streamed, rows must fit


@spec.example
def _(rng, inputs, env, attrs):
    """The saved rstd consistent with the generated x (RmsNorm's epsilon default, 1e-6), in fp32."""
    import numpy as np

    x = inputs["x"].astype(np.float64)
    inputs["rstd"] = (1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)).astype(np.float32)
