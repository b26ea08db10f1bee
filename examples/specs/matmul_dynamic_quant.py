"""MatmulDynamicQuant: h[M, N] = x[M, K] @ w[K, N] (fp16 / bf16 in, fp32 accumulation on the cube), then symmetric
per-token int8 quantisation of each row of h on the vector cores: scale[M] = max over N of |h| / 127 and
y[M, N] = round(h / scale) to int8 (ties to even, saturated), the scale returned in fp32 as a second output.

The quantisation is DynamicQuant's formula (examples/specs/dynamic_quant.py) over the product's rows. CANN's nearest
operator, RotateQuant of ops-nn (matmul/rotate_quant: x reshaped to rows of k times a square rotation [k, k], an
optional clamp by alpha of each 32-element group's maximum, then the same per-row int8 quantisation with its fp32
scale), multiplies by a square matrix over groups of x's columns; this spec is the plain product, so its name says
what it computes.

The cube family's band epilogue (docs/design.md "Cube family: row reductions in the epilogue" and "a per-row second
output"): an AI Core's unit is baseM rows x all of N; the AIVs reduce each row to its maximum, write the row's scale
to `scale` and the row's quotients through half (CAST_ODD, then int8 with rint: one correct rounding) to `y`.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32, i8

spec = OpSpec("MatmulDynamicQuant", aclnn="aclnnMatmulDynamicQuant", socs=(A2, A3), round="rint",
              doc="Matrix product, then per-row symmetric int8 quantisation of the result with its fp32 scale.")
M = spec.dim("M", max=65535)
K = spec.dim("K", max=65535)
N = spec.dim("N", max=16384)
(T,) = spec.dtype_vars("T")

spec.input("x", T, [M, K])
spec.input("w", T, [K, N])
spec.output("y", i8, [M, N])
spec.output("scale", f32, [M], doc="max over N of |x @ w| / 127 per row")
spec.dtypes((T,), [(f16,), (bf16,)])

spec.package("ops-nn", "matmul")  # where the package goes: ops-nn matmul/<op_snake>
spec.example_call({"M": 37, "K": 50, "N": 45})


@spec.body
def _(b, x, w):
    h = b.matmul(x, w)
    scale = b.abs(h).max(-1) / 127.0
    return {"y": b.cast(h / scale, i8, "rint"), "scale": scale.reshape([M])}
