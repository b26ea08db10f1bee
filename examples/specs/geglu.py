"""GeGluV3 (aclnnGeGluV3): x's last axis holds two halves; one is passed through the tanh-approximated GELU and
multiplies the other. activateLeft and approximate (static) select which half is activated and which GELU, so each
value is its own kernel specialisation; outGelu is the activated half.

approximate = 0 is the exact GELU, 0.5 x (1 + erf(x / sqrt 2)), with erf as AscendC's Erf computes it; 1 is the
tanh approximation.
"""

import math

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("GeGluV3", aclnn="aclnnGeGluV3", socs=(A2, A3), round="rint",
              doc="GELU-gated linear unit over the two halves of the last axis.")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=32768)
(T,) = spec.dtype_vars("T")

spec.input("x", T, [Bd, 2 * H])
spec.attr("dim", int, -1, choices=(-1,), static=True, doc="the split axis: the last one")
spec.attr("approximate", int, 1, choices=(0, 1), static=True, doc="0: exact (erf), 1: tanh approximation")
spec.attr("activateLeft", bool, False, choices=(False, True), static=True,
          doc="True: GELU of the left half times the right half; False: the other way round")
spec.output("out", T, [Bd, H])
spec.output("outGelu", T, [Bd, H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])

K = math.sqrt(8.0 / math.pi)


spec.package("ops-nn", "activation")  # where the package goes: ops-nn activation/<op_snake>


@spec.body
def _(b, x, dim, approximate, activateLeft):
    left, right = x.slice(-1, 0, H), x.slice(-1, H, 2 * H)
    a, g = (left, right) if activateLeft else (right, left)
    ga = b.gelu(a, approximate="none") if approximate == 0 else a / (1.0 + b.exp(-K * (a + 0.044715 * a * a * a)))
    return {"out": ga * g, "outGelu": ga}
