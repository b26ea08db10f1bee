"""Body helpers for batches stored concatenated along the token dim (TND: CANN's actualSeqQLen / actualSeqKvLen
layouts), shared by the specs that need them. docs/design.md "Kernel families", attention (TND)."""

from __future__ import annotations

from opgen.ir.dtypes import DType


def token_batches(b, cu, n, nb):
    """(batch index, first token of its batch) of each of the `n` tokens, both [n] int64 tensors, from the int64
    cumulative ends `cu` [nb] (batch k holds tokens cu[k - 1] .. cu[k] - 1, the first from 0; the rule
    opgen.dsl.checks.cumulative_ends checks): the batches ending at or before a token counted, and the largest of
    their ends (0 for the first batch). `b` is the body's builder; `n`, `nb` dims. The attention family recognises a
    mask built from these by its values (opgen.kernel.attnprog.batch_mask_kind), not by this spelling."""
    tok = b.iota(n).reshape([n, 1])
    past = cu.reshape([1, nb]) <= tok
    return past.cast(DType.i64).sum(-1, keepdims=False), b.where(past, cu.reshape([1, nb]), 0).max(-1, keepdims=False)
