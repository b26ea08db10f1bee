"""SwiGluGrad derived from SwiGlu (../swiglu.py): dx (both halves, joined along the last axis) from dy and x.
Compare the hand-written ../swiglu_grad.py."""

from opgen.dsl import derive_grad

spec = derive_grad("../swiglu.py", "SwiGluGrad", aclnn="aclnnSwiGluGrad", wrt=["x"], grads={"y": "dy"},
                   names={"x": "dx"})
