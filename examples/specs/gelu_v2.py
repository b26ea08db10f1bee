"""GeluV2 (aclnnGeluV2): GELU on a tensor of any rank (0 to 8 dims), exact or tanh-approximated.

approximate = 0: y = 0.5 x (1 + erf(x / sqrt 2)), erf as AscendC's Erf computes it on Atlas A2 / A3 (x clipped to
±3.92, a rational P(x) / Q(x) in fp32); approximate = 1: y = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))),
written as the equal x / (1 + exp(-sqrt(8 / pi) (x + 0.044715 x^3))). Each value of approximate is its own kernel
specialisation; the kernel sees the whole tensor as one run of elements split over the cores.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("GeluV2", aclnn="aclnnGeluV2", socs=(A2, A3), round="rint",
              doc="Gaussian error linear unit, exact (erf) or tanh-approximated.")
Bd = spec.variadic("Bd", max_rank=8)
(T,) = spec.dtype_vars("T")

spec.input("x", T, [Bd])
spec.attr("approximate", int, 0, choices=(0, 1), static=True, doc="0: exact (erf); 1: tanh approximation")
spec.output("y", T, [Bd])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.opdef_note("CANN's OpDef declares approximate as a String attribute (\"none\" / \"tanh\"); this package keeps "
                "the aclnn API's int64 (0 / 1) in the OpDef too.")
spec.aclnn_note("CANN's aclnnGeluV2 takes any approximate other than 1 as the exact GELU; this API refuses values "
                "other than 0 and 1 (ACLNN_ERR_PARAM_INVALID).")

spec.package("ops-nn", "activation")  # where the package goes: ops-nn activation/<op_snake>


@spec.body
def _(b, x, approximate):
    return {"y": b.gelu(x, approximate="none" if approximate == 0 else "tanh")}
