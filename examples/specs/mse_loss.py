"""MseLoss (aclnnMseLoss) with reduction mean (1) or sum (2): out = mean or sum of (self - target)^2 over every
element, a 0-d tensor.

A reduction to a scalar: each core accumulates its rows' squared differences into an fp32 column row, reduces it
over its columns once the rows are done (ReduceSum), and core 0 adds the cores' partial sums in core order
(through workspace, after a SyncAll) and divides by the element count (rows x row length, from tiling data) for
the mean. CANN's reduction 0 ('none') returns the elementwise tensor, a different output shape: not declared here.
"""

from opgen.dsl import A2, A3, OpSpec, Prod, bf16, f16, f32

spec = OpSpec("MseLoss", aclnn="aclnnMseLoss", socs=(A2, A3), round="rint",
              doc="Mean (or sum) of the squared differences of self and target.")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=1048576)
(T,) = spec.dtype_vars("T")

spec.input("self", T, [Bd, H])
spec.input("target", T, [Bd, H])
spec.attr("reduction", int, 1, choices=(1, 2), static=True, doc="1: mean, 2: sum over every element")
spec.output("out", T, [])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


spec.package("ops-nn", "loss")  # where the package goes: ops-nn loss/<op_snake>


@spec.body
def _(b, self, target, reduction):
    d = self.f32() - target.f32()
    sq = (d * d).reshape([Prod("Bd"), H])
    r = sq.mean((0, 1), keepdims=False) if reduction == 1 else sq.sum((0, 1), keepdims=False)
    return {"out": r.cast(T, "rint")}
