"""BinaryCrossEntropy (ops-nn loss/binary_cross_entropy, aclnnBinaryCrossEntropy): the loss of probabilities x
against targets y, each log clamped at -100 as torch's binary_cross_entropy does:
    l = -weight * (y * max(log(x), -100) + (1 - y) * max(log(1 - x), -100))
reduced by `reduction`: "none" keeps the elementwise tensor, "mean" / "sum" give a 0-d tensor.

CANN's OpDef takes the reduction as a string attribute (default "mean") while its aclnn API takes an int64_t
(0 none, 1 mean, 2 sum): `api.enum` declares that index, and the emitted aclnn layer maps it to the string,
refusing any other index with ACLNN_ERR_PARAM_INVALID.
"""

from opgen.dsl import A2, A3, OpSpec, Prod, api, bf16, f16, f32

spec = OpSpec("BinaryCrossEntropy", aclnn="aclnnBinaryCrossEntropy", socs=(A2, A3), round="rint",
              doc="Binary cross entropy of probabilities and targets, optionally weighted, reduced or not.")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=65536)
(T,) = spec.dtype_vars("T")

spec.input("x", T, [Bd, H], doc="probabilities, each in [0, 1]")
spec.input("y", T, [Bd, H], doc="targets, each in [0, 1]")
spec.input("weight", T, [Bd, H], optional=True, doc="a rescaling weight per element")
spec.attr("reduction", str, "mean", choices=("none", "mean", "sum"), static=True,
          doc="none: the elementwise loss; mean / sum: over every element")
spec.output("output", T, {"none": [Bd, H], "mean": [], "sum": []}, form_by="reduction")
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.aclnn_signature(api.param("self", "x"), api.param("target", "y"), api.param("weight", "weight"),
                     api.enum("reduction", "reduction", ["none", "mean", "sum"]), api.param("out", "output"))

spec.package("ops-nn", "loss")  # where the package goes: ops-nn loss/<op_snake>


@spec.body
def _(b, x, y, weight, reduction):
    lx = b.maximum(b.log(x), -100.0)
    l1x = b.maximum(b.log(1.0 - x), -100.0)
    loss = -(y * lx + (1.0 - y) * l1x)
    if weight is not None:
        loss = loss * weight
    if reduction == "none":
        return {"output": loss}
    flat = loss.reshape([Prod("Bd"), H])
    if reduction == "mean":
        return {"output": flat.mean([0, 1], keepdims=False)}
    return {"output": flat.sum([0, 1], keepdims=False)}


@spec.example
def _(rng, inputs, env, attrs):
    # probabilities strictly inside (0, 1) and targets in [0, 1], as aclnnBinaryCrossEntropy's callers pass them
    inputs["x"] = rng.uniform(0.01, 0.99, inputs["x"].shape).astype(inputs["x"].dtype)
    inputs["y"] = rng.uniform(0.0, 1.0, inputs["y"].shape).astype(inputs["y"].dtype)
