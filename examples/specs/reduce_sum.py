"""ReduceSum (aclnnReduceSum) over the axes `dim` of self [Bd, M, H], keepDim off: out = the sum of self over the
listed axes, accumulated in float32 and rounded to the output dtype.

`dim` is a list attribute (CANN's ListInt, the API's `const aclIntArray *dim`), each allowed value its own
specialisation chosen by the tiling key: [-1] sums each row of H (out [Bd, M]); [-2, -1] sums each batch's M x H
block to one value (out [Bd]). The attribute picks the output's shape (`form_by`). (A middle-axis sum [-2] is
ReduceMean's kernel without the division; next to [-2, -1] the shared tiling plan does not fit UB at these maxima.)
CANN's aclnnReduceSum also takes `aclDataType dtype` (the output dtype) between keepDim and out; the DSL has no
such parameter kind yet, so this API is aclnnReduceSum(self, dim, keepDim, out) with out in self's dtype.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("ReduceSum", aclnn="aclnnReduceSum", socs=(A2, A3), round="rint",
              doc="Sum over the last axis or the last two axes.")
Bd = spec.variadic("Bd", max_rank=6)
M = spec.dim("M", max=65536)
H = spec.dim("H", max=65536)
(T,) = spec.dtype_vars("T")

spec.input("self", T, [Bd, M, H])
spec.attr("dim", list[int], (-1,), choices=((-1,), (-2, -1)), static=True,
          doc="the reduced axes: the last one, or the last two")
spec.attr("keepDim", bool, False, choices=(False,), static=True, doc="the reduced axes are dropped")
spec.output("out", T, {(-1,): [Bd, M], (-2, -1): [Bd]}, form_by="dim")
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, self, dim, keepDim):
    return {"out": self.f32().sum(dim, keepdims=keepDim).cast(T, "rint")}
