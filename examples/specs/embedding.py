"""Embedding (aclnnEmbedding): out[i..., :] = weight[indices[i...], :] -- for each index, the row of the table
weight [V, H] it names (V = numEmbeddings, H = embeddingDim); out has the indices' shape followed by H.

A gather along the leading axis of weight by an index input: the rows family reads it as a row input whose GM row
address each anchor row picks (opgen.kernel.rowlayout.PickedView): the kernel reads the row's index from GM on the
scalar unit, checks 0 <= index < V (the spec's device check: Trap() otherwise; the aclnn layer cannot read device
data) and copies that row of weight (one DataCopyPad a row; rows longer than UB: column chunks over the cores).
A repeated index reads its row once per occurrence. Not declared here: int32 indices (one dtype variable cannot
carry an index: a spec with `i32` in place of `i64` lowers alike, tests/test_rows_pick.py), CANN's integer weight
dtypes, and padding_idx / max_norm (torch.nn.Embedding's; aclnnEmbedding has neither).
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32, i64
from opgen.dsl.checks import index_in_range

spec = OpSpec("Embedding", aclnn="aclnnEmbedding", socs=(A2, A3), round="rint",
              doc="Rows of a table picked by integer indices (an embedding lookup).")
Bd = spec.variadic("Bd", max_rank=7)
V = spec.dim("V")
H = spec.dim("H", max=1048576)
(T,) = spec.dtype_vars("T")

spec.input("weight", T, [V, H], doc="the table: V rows of H")
spec.input("indices", i64, [Bd], doc="the row of weight each output row copies, 0 <= index < V")
spec.output("out", T, [Bd, H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.package("ops-nn", "index")


spec.check("indices", index_in_range("indices", "V"), on="device")   # device data: the kernel traps


@spec.body
def _(b, weight, indices):
    return {"out": b.gather(weight, indices, axis=0)}
