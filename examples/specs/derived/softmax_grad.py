"""SoftmaxGrad derived from SoftmaxV2 (../softmax.py): dx from dy and x (the forward's maximum and sum recomputed)."""

from opgen.dsl import derive_grad

spec = derive_grad("../softmax.py", "SoftmaxGrad", aclnn="aclnnSoftmaxBackward", wrt=["x"], grads={"y": "dy"},
                   names={"x": "dx"}, dim_max={"H": 131072})   # five row temporaries: rows half as long fit
