"""BiasAddGrad: the bias gradient, dy summed over every leading axis (rank 1 to 8), accumulated and written in fp32.

A reduction over all rows to a [H] column: each core sums its rows, the partial columns are added in core order.
"""

from opgen.dsl import A2, A3, OpSpec, Prod, bf16, f16, f32

spec = OpSpec("BiasAddGrad", aclnn="aclnnBiasAddGrad", socs=(A2, A3), round="rint",
              doc="Sum of the gradient over all leading axes.")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=65536)
(T,) = spec.dtype_vars("T")

spec.input("dy", T, [Bd, H])
spec.output("db", f32, [H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, dy):
    return {"db": dy.reshape([Prod("Bd"), H]).sum(0, keepdims=False)}
