"""KlDiv (aclnnKlDiv): the Kullback-Leibler divergence of `target` from `self` (log-probabilities), reduced to a
0-d tensor: reduction 1 'mean' (over every element), 2 'sum', 3 'batchmean' (the sum over the size of dim 0, N).

Pointwise (torch.nn.functional.kl_div, which aclnnKlDiv follows): logTarget true: exp(target) * (target - self);
logTarget false: xlogy(target, target) - target * self, where xlogy(t, t) is 0 at t = 0 and t * log(t) elsewhere
(NaN for a negative target). CANN's reduction 0 ('none') returns the elementwise tensor, another output shape: not
declared here.

The shape is [N, *Bd, H]: the rows of the kernel are N x Prod(Bd), so batchmean's N is not one of the kernel's
extents; the rows family reads it as a number through a tiling field of its own (RowProgram.dim_values).
"""

from opgen.dsl import A2, A3, OpSpec, Prod, bf16, f16, f32

spec = OpSpec("KlDiv", aclnn="aclnnKlDiv", socs=(A2, A3), round="rint",
              doc="Kullback-Leibler divergence of target from self, reduced to a scalar.")
N = spec.dim("N", max=65535)
Bd = spec.variadic("Bd", max_rank=6)
H = spec.dim("H", max=1048576)
(T,) = spec.dtype_vars("T")

spec.input("self", T, [N, Bd, H])
spec.input("target", T, [N, Bd, H])
spec.attr("reduction", int, 1, choices=(1, 2, 3), static=True, doc="1: mean, 2: sum, 3: batchmean (sum / N)")
spec.attr("logTarget", bool, False, static=True, doc="target holds log-probabilities")
spec.output("out", T, [])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])

spec.package("ops-nn", "loss")  # where the package goes: ops-nn loss/<op_snake>
spec.example_call({"N": 2, "Bd": (3,), "H": 5}, attrs={"logTarget": True})


@spec.body
def _(b, self, target, reduction, logTarget):
    x, t = self.f32(), target.f32()
    if logTarget:
        pw = b.exp(t) * (t - x)
    else:
        pw = b.where(t.eq(0.0), 0.0, t * b.log(t)) - t * x
    s = pw.reshape([N, Prod("Bd"), H]).sum((0, 1, 2), keepdims=False)
    if reduction == 1:
        s = s / (N * Prod("Bd") * H)
    elif reduction == 3:
        s = s / N
    return {"out": s.cast(T, "rint")}
