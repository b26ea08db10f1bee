"""AscendQuantV2 (aclnnAscendQuant), static quantisation to int8: y = sat(round_mode(x * scale + offset)), or
y = sat(round_mode(x * scale * scale + offset)) under sqrt_mode; scale and offset are per channel ([H], along x's
last axis) or per tensor ([1]).

round_mode as CANN's A2 / A3 kernel rounds (ops-nn quant/ascend_quant_v2: "round" is CAST_RINT there, half to even;
"floor", "ceil", "trunc" the directed modes; the aclnn layer refuses "rint"). The forms of scale and offset are
matched against their shapes at run time (aclnnAscendQuant: a 1-D scale's size is x's last dim or 1; offset like
scale): each combination of forms that lowers to a different kernel class has its own tiling keys (the form key
is a digit of the tiling key, as CANN's QuantKey; docs/design.md "Shape forms at run time"). CANN also asks offset's shape to equal scale's; this spec takes the two
forms independently (a per-tensor offset with a per-channel scale too). opgen's kernel computes x * scale (* scale)
+ offset in fp32 and rounds once to int8 through half (CAST_ODD, then int8 with the mode; docs/reference/ascendc.md
§1.12); CANN's goes through int32 with the mode, then half: the same integers for every value.
"""

from opgen.dsl import A2, A3, OpSpec, api, bf16, f16, f32, i8

spec = OpSpec("AscendQuantV2", aclnn="aclnnAscendQuant", socs=(A2, A3), round="rint",
              doc="Static per-channel or per-tensor quantisation of x to int8.")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=65536)
(T,) = spec.dtype_vars("T")

spec.input("x", T, [Bd, H])
spec.input("scale", T, [[H], [1]], doc="per channel [H] or per tensor [1]")
spec.input("offset", T, [[H], [1]], optional=True, doc="per channel [H] or per tensor [1]")
spec.attr("sqrt_mode", bool, False, static=True, doc="multiply by scale twice")
spec.attr("round_mode", str, "round", choices=("round", "floor", "ceil", "trunc"), static=True,
          doc="round: half to even (CAST_RINT on A2 / A3)")
spec.attr("dst_type", int, 2, choices=(2,), doc="ge::DT_INT8 (the only type this spec writes)")
spec.attr("axis", int, -1, choices=(-1,), doc="the channel axis: the last")
spec.output("y", i8, [Bd, H])
spec.dtypes((T,), [(f16,), (f32,), (bf16,)])
spec.aclnn_signature(api.param("x"), api.param("scale"), api.param("offset"), api.param("sqrtMode", "sqrt_mode"),
                     api.param("roundMode", "round_mode", ctype="const char*"),
                     api.param("dstType", "dst_type", ctype="int32_t"), api.fixed("axis", -1), api.param("y"),
                     const_outputs=True)
spec.package("ops-nn", "quant")


@spec.body
def _(b, x, scale, offset, sqrt_mode, round_mode, dst_type, axis):
    v = x * scale * scale if sqrt_mode else x * scale   # CANN multiplies by scale twice: (x * s) * s
    return {"y": b.quantize(v, i8, "rint" if round_mode == "round" else round_mode, offset=offset)}
