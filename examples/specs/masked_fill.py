"""MaskedFill (aclnnInplaceMaskedFillScalar as an out-of-place op): out = value where mask, else self; the bool
mask broadcasts against self from the right (NumPy rules). Interpreted (`opgen interpret`).
"""

from opgen.dsl import A2, A3, OpSpec, bf16, boolean, f16, f32

spec = OpSpec("MaskedFill", aclnn="aclnnMaskedFill", socs=(A2, A3), round="rint",
              doc="Fill the elements a bool mask selects with a scalar.")
N, H = spec.dims("N H")
(T,) = spec.dtype_vars("T")

spec.input("self", T, [N, H])
spec.input("mask", boolean, [N, H])
spec.attr("value", float, 0.0, doc="the fill value")
spec.output("out", T, [N, H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.package("ops-nn", "index")


@spec.body
def _(b, self, mask, value):
    return {"out": b.where(mask, value, self)}


@spec.example
def _(rng, inputs, env, attrs):
    """A mask with both values (random inputs are all true otherwise)."""
    inputs["mask"] = rng.random(inputs["mask"].shape) < 0.5
