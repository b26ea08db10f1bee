"""Legal NSA topk indices for the tests (tests/test_nsa.py, tests/test_kernels_nsa.py): one generator, so the
interpreter tests and the kernel tests draw inputs the same way (docs/reference/nsa_selected_attention.md §2.2, §2.6)."""

from __future__ import annotations

import numpy as np


def legal_topk(rng, ql, kl, n2: int, cnt: int, bs: int, causal: bool) -> np.ndarray:
    """int32 [T1 = sum(ql), n2, cnt] block indices: for the token at position s of batch b, each index lies inside
    that batch's kv length kl[b] (0 <= idx, (idx + 1) * bs <= kl[b]); about half the rows end with a duplicate of
    their first entry; with `causal` the first entry is a block starting at or before s (a visible key). Draws from
    `rng` (numpy Generator) in token order."""
    topk = np.zeros((int(np.sum(ql)), n2, cnt), np.int32)
    t = 0
    for sq, sk in zip(ql, kl):
        nblk = sk // bs
        for s in range(sq):
            row = rng.integers(0, nblk, (n2, cnt))
            if causal:
                row[:, 0] = rng.integers(0, min(s // bs, nblk - 1) + 1, n2)
            if cnt >= 2:
                dup = rng.random(n2) < 0.5
                row[dup, -1] = row[dup, 0]
            topk[t] = row
            t += 1
    return topk
