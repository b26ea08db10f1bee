"""GeluGrad derived from Gelu (../gelu.py, tanh approximation): dx from dy and x."""

from opgen.dsl import derive_grad

spec = derive_grad("../gelu.py", "GeluGrad", aclnn="aclnnGeluBackward", wrt=["self"], grads={"out": "grad_output"},
                   names={"self": "grad_input"})
