"""JointConcat: the text and image token streams of an MM-DiT joint attention block joined along the sequence,
with a per-channel scale: out = concat(txt, img, axis=1) * gamma.

The concat along a leading axis is GM addressing: the kernel walks out's rows and copies each run of rows from
the stream it lies in (rows s < St from txt, the others from img at s - St); nothing is copied twice.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("JointConcat", aclnn="aclnnJointConcat", socs=(A2, A3), round="rint",
              doc="Concat of two token streams along the sequence, times a per-channel scale.")
B, St, Si = spec.dims("B St Si")
H = spec.dim("H", max=32768)
(T,) = spec.dtype_vars("T")

spec.input("txt", T, [B, St, H])
spec.input("img", T, [B, Si, H])
spec.input("gamma", T, [H])
spec.output("out", T, [B, St + Si, H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, txt, img, gamma):
    return {"out": b.concat([txt, img], 1) * gamma}
