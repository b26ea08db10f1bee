"""ReduceMax (aclnnAmax) over the middle axis M of [Bd, M, H], keepDim off: out[b, h] = max over m of self[b, m, h].

A maximum over leading axes: each batch's rows are combined with Max into a per-batch fp32 row that starts at
-inf; a batch split across cores takes the maximum of the cores' partial rows in core order through workspace.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("ReduceMax", aclnn="aclnnAmax", socs=(A2, A3), round="rint",
              doc="Maximum over the second-to-last axis.")
Bd = spec.variadic("Bd", max_rank=6)
M = spec.dim("M", max=65536)
H = spec.dim("H", max=65536)
(T,) = spec.dtype_vars("T")

spec.input("self", T, [Bd, M, H])
spec.attr("dim", list[int], (-2,), choices=((-2,),), static=True,
          doc="the reduced axes (CANN's aclIntArray): opgen's kernel takes the middle one")
spec.attr("keepDim", bool, False, choices=(False,), static=True, doc="the reduced axis is dropped")
spec.output("out", T, [Bd, H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, self, dim, keepDim):
    return {"out": self.max(dim, keepdims=keepDim)}
