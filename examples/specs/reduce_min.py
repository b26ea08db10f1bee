"""ReduceMin (aclnnAmin) over the middle axis M of [Bd, M, H], keepDim off: out[b, h] = min over m of self[b, m, h].

A minimum over leading axes: the rows family runs it as -max(-x) (opgen.kernel.rowmerge.min_as_max: negation is
exact), each batch's negated rows combined with Max into a per-batch fp32 row from -inf, a batch split across cores
taking the maximum of the cores' partial rows in core order through workspace, the result negated once complete.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("ReduceMin", aclnn="aclnnAmin", socs=(A2, A3), round="rint",
              doc="Minimum over the second-to-last axis.")
Bd = spec.variadic("Bd", max_rank=6)
M = spec.dim("M", max=65536)
H = spec.dim("H", max=65536)
(T,) = spec.dtype_vars("T")

spec.input("self", T, [Bd, M, H])
spec.attr("dim", int, -2, choices=(-2,), static=True, doc="the reduced axis: opgen's kernel takes the middle one")
spec.attr("keepDim", bool, False, choices=(False,), static=True, doc="the reduced axis is dropped")
spec.output("out", T, [Bd, H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, self, dim, keepDim):
    return {"out": self.min(dim, keepdims=keepDim)}
