"""ReduceMean (aclnnMean) over the middle axis M of [Bd, M, H]: out[b, h] = mean over m of self[b, m, h], the reduced
axis dropped (keepDim false: out [Bd, H]) or kept as 1 (keepDim true: out [Bd, 1, H]) — the attribute picks the output's
shape (`form_by`); both shapes address the same elements, so one kernel serves both.

A mean over leading axes: the rows of each batch (the M rows of one b) are summed into a per-batch fp32 row, and
the complete sum is divided by the count of rows it summed (M, read from tiling data) before it is written; a
batch split across cores is summed from the cores' partial rows in core order through workspace.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("ReduceMean", aclnn="aclnnMean", socs=(A2, A3), round="rint",
              doc="Mean over the second-to-last axis.")
Bd = spec.variadic("Bd", max_rank=6)
M = spec.dim("M", max=65536)
H = spec.dim("H", max=65536)
(T,) = spec.dtype_vars("T")

spec.input("self", T, [Bd, M, H])
spec.attr("dim", int, -2, choices=(-2,), static=True, doc="the reduced axis: opgen's kernel takes the middle one")
spec.attr("keepDim", bool, False, static=True, doc="the reduced axis is kept as 1 (true) or dropped (false)")
spec.output("out", T, {False: [Bd, H], True: [Bd, 1, H]}, form_by="keepDim")
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, self, dim, keepDim):
    return {"out": self.f32().mean(dim, keepdims=keepDim).cast(T, "rint")}
