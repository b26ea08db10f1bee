"""MaximumGrad (the gradient of Maximum, ops-math's math/maximum_grad): y1 = grads where x1 >= x2, y2 = grads where
x1 < x2, 0 elsewhere — the gradient goes to the input that won, ties to x1 (a select, as the TensorFlow graph the op
replaces: an infinite gradient stays out of the loser, where grads * (x1 >= x2) would make it NaN).

CANN offers MaximumGrad to graph mode only; opgen names its aclnn layer after the OpDef. The comparisons of two
tensors are Compare bit masks, each read by Select's scalar form.
ops-math's categories are not among the repositories opgen lays packages out for: the package goes to ops-nn's
vfusion.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("MaximumGrad", aclnn="aclnnMaximumGrad", socs=(A2, A3), round="rint",
              doc="Gradient of the elementwise maximum.")
Bd = spec.variadic("Bd", max_rank=8)
(T,) = spec.dtype_vars("T")

spec.input("grads", T, [Bd], doc="gradient of the maximum's output")
spec.input("x1", T, [Bd])
spec.input("x2", T, [Bd])
spec.output("y1", T, [Bd], doc="gradient with respect to x1")
spec.output("y2", T, [Bd], doc="gradient with respect to x2")
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, grads, x1, x2):
    return {"y1": b.where(x1 >= x2, grads, 0.0), "y2": b.where(x1 < x2, grads, 0.0)}
