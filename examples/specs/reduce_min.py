"""ReduceMin (aclnnAmin) over the middle axis M of [Bd, M, H], keepDim off: out[b, h] = min over m of self[b, m, h].

A minimum over leading axes: each batch's rows are combined with Min into a per-batch fp32 row that starts at
+inf; a batch split across cores takes the minimum of the cores' partial rows in core order through workspace
(MinPartials). (A minimum over the last axis runs as -max(-x): opgen.kernel.rowmerge.min_as_max.)
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("ReduceMin", aclnn="aclnnAmin", socs=(A2, A3), round="rint",
              doc="Minimum over the second-to-last axis.")
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
    return {"out": self.min(dim, keepdims=keepDim)}
