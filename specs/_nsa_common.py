"""Pieces shared by the NsaSelectedAttention forward and backward specs
(docs/reference/nsa_selected_attention.md §1.3 cumulative lengths, §2.1 GQA, §2.2 gather, §2.3 masking).

Not a spec itself (files starting with `_` are skipped by the registry).
"""

import numpy as np

from opgen.dsl import cumulative_ends, i64

FLT_MAX = 3.4028234663852886e38


def batch_starts(b, cu, nb):
    """Start offsets [nb] of the batches from cumulative ends `cu` [nb] (cu[-1] = 0)."""
    zero = b.const(0, cu.dtype).broadcast_to([1])
    return b.concat([zero, cu.slice(0, 0, nb - 1)], 0)


def token_layout(b, cu_q, cu_kv, T1, nb):
    """(s, kv0): in-batch position of each query token and the kv start of its batch, both [T1]."""
    tok = b.iota(T1)
    bidx = (cu_q.reshape([1, nb]) <= tok.reshape([T1, 1])).cast(cu_q.dtype).sum(-1, keepdims=False)
    q0 = b.gather(batch_starts(b, cu_q, nb), bidx, 0)
    kv0 = b.gather(batch_starts(b, cu_kv, nb), bidx, 0)
    return tok - q0, kv0


def selected_positions(b, topk, T1, N2, CNT, BS):
    """In-batch key positions idx*bs + j of the selected blocks, in topk order: [T1, N2, L]."""
    t64 = topk.cast(i64)
    pos = t64.reshape([T1, N2, CNT, 1]) * BS + b.iota(BS).reshape([1, 1, 1, BS])
    return pos.reshape([T1, N2, CNT * BS])


def gather_rows(b, x, rows):
    """x [T2, N2, E] gathered at per-kv-head rows [T1, N2, L] -> [T1, N2, L, E]."""
    return b.gather(x.permute(1, 0, 2), rows.permute(1, 0, 2), 1).permute(1, 0, 2, 3)


def scatter_rows(b, src, rows, T2):
    """Inverse of gather_rows: src [T1, N2, L, E] added into [T2, N2, E] at rows (duplicates add)."""
    return b.scatter_add(rows.permute(1, 0, 2), src.permute(1, 0, 2, 3), 1, T2).permute(1, 0, 2)


# -- value checks (run by the interpreter before evaluation) ------------------------------------------

def _lengths(cu):
    """Per-batch lengths from cumulative ends."""
    return np.diff(np.concatenate([[0], cu]))


def _token_batch(cu_q, t1):
    """(batch index, in-batch position) of each of the t1 query tokens, from cumulative ends cu_q."""
    batch = np.searchsorted(cu_q, np.arange(t1), side="right")
    starts = np.concatenate([[0], cu_q[:-1]])
    return batch, np.arange(t1) - starts[batch]


check_cumulative = cumulative_ends   # the shared check the aclnn layer also emits (opgen.dsl.checks)


def check_topk(topk_name, cu_q_name, cu_kv_name, bs_attr):
    """Every selected block lies inside its batch: 0 <= idx and (idx + 1) * bs <= S2_b."""
    def fn(arrays, env, attrs):
        topk, cu_q, cu_kv = arrays[topk_name], arrays[cu_q_name], arrays[cu_kv_name]
        if cu_q is None or cu_kv is None:
            return None
        bs = attrs[bs_attr]
        s2 = _lengths(cu_kv)
        batch, _ = _token_batch(cu_q, topk.shape[0])
        limit = (s2[batch] // bs)[:, None, None]
        bad = (topk < 0) | (topk >= limit)
        if bad.any():
            t, n, i = (int(v[0]) for v in np.nonzero(bad))
            return (f"index {int(topk[t, n, i])} at [{t}, {n}, {i}] selects keys outside its batch "
                    f"(needs 0 <= idx and (idx + 1) * {bs} <= S2_b = {int(s2[batch[t]])})")
        return None
    return fn


def check_visible(topk_name, cu_q_name, bs_attr, mode_attr, masked_when):
    """With causal masking every (token, kv head) must see at least one selected key (p <= s)."""
    def fn(arrays, env, attrs):
        if not masked_when(attrs, arrays):
            return None
        topk, cu_q = arrays[topk_name], arrays[cu_q_name]
        if cu_q is None:
            return None
        _, s = _token_batch(cu_q, topk.shape[0])
        first = topk.astype(np.int64).min(-1) * attrs[bs_attr]
        bad = first > s[:, None]
        if bad.any():
            t, n = (int(v[0]) for v in np.nonzero(bad))
            return (f"token {t} (position {int(s[t])} in its batch), kv head {n}: every selected key is in the "
                    f"future under {mode_attr}=2 (a fully masked row: its softmax is undefined)")
        return None
    return fn


def make_layout(rng, inputs, env, bs, causal, names):
    """Fill cumulative ends (T1, T2 split into Bn nearly equal batches) and legal topk indices;
    with causal masking the first selected block of every row is block 0 (always visible).

    names = (topk, cu_q, cu_kv). Raises ValueError when a kv batch is shorter than one block."""
    topk_name, cu_q_name, cu_kv_name = names
    T1, T2 = env["T1"], env["T2"]
    nb = env.get("Bn", 1)
    cu_q = np.array([(T1 * (i + 1)) // nb for i in range(nb)], dtype=np.int64)
    cu_kv = np.array([(T2 * (i + 1)) // nb for i in range(nb)], dtype=np.int64)
    s2 = _lengths(cu_kv)
    if (s2 < bs).any():
        raise ValueError(f"every kv batch needs at least one block of {bs} keys (T2={T2}, Bn={nb})")
    inputs[cu_q_name], inputs[cu_kv_name] = cu_q, cu_kv
    batch, _ = _token_batch(cu_q, T1)
    nblocks = (s2 // bs)[batch]
    shape = inputs[topk_name].shape
    topk = (rng.random(shape) * nblocks[:, None, None]).astype(np.int32)
    if causal:
        topk[..., 0] = 0
    inputs[topk_name] = topk


def declare_checks(spec, dims, names, masked_when):
    """The relations and value checks both NSA specs share (§3.2/§3.4 plus opgen's stricter ones).

    dims = (N1, N2, D, Dv, CNT, BS); names = (value, topk, cu_q, cu_kv, block size attr, sparse mode attr);
    masked_when(attrs, arrays) tells whether causal masking is on."""
    N1, N2, D, Dv, CNT, BS = dims
    value, topk, cu_q, cu_kv, bs_attr, mode_attr = names
    spec.require((N1 % N2).eq(0), "query", "query heads N1 must be a multiple of the kv heads N2")
    spec.require(Dv <= D, value, "value head dim Dv must not exceed D")
    spec.require(CNT * BS <= 8192, topk, "selected keys CNT * BS must not exceed 8192")
    for p in (cu_q, cu_kv):
        spec.check(p, lambda a, pr, p=p: None if pr[p] else "required for the TND layout")
    spec.check(cu_q, check_cumulative(cu_q, "T1"), on="values")
    spec.check(cu_kv, check_cumulative(cu_kv, "T2"), on="values")
    # device data: the emitted kernel checks every index where it reads it and stops with AscendC::Trap()
    spec.check(topk, check_topk(topk, cu_q, cu_kv, bs_attr), on="device")
    spec.check(topk, check_visible(topk, cu_q, bs_attr, mode_attr, masked_when), on="device")


# GM traffic of CANN's kernels as the reference estimates it (docs/reference/nsa_selected_attention.md §4)
def cann_gm_bytes(backward: bool, dims: dict, t_bytes: int = 2, deterministic: bool = False) -> tuple[int, str]:
    """The reference's estimate of the GM bytes CANN's kernel moves for one call, and which template.

    dims: T1, T2, N1, N2, D, Dv, CNT, BS (ints). Forward (§4.1): per (t, n2) K and V read once, written to a
    workspace and read again by the cube, 3 L (D + Dv) e; S fp32 write + read 8 G L; P write + read 4 G L; Q, O,
    stats (64 G) and the topk row (4 cnt). Backward basic template (§4.2; cnt 16, bs 64, D <= 192, Dv <= 128,
    G <= 16, not deterministic): K, V once L (D + Dv) e; S, dP fp32 16 G L; P, dS 8 G L; Q, dO, O (G (D + 2 Dv)
    e) and the stats; dK/dV fp32 atomic read-modify-write 2 L (D + Dv) 4; dQ two atomic adds 2 * 2 G D 4. Else
    the general template (§4.3): K read 3x and written 1x, V read 2x and written 1x (e each), S/dP/P/dS as above,
    dK/dV to a scatter workspace, re-read and atomically added (the reference's "~3x L (D + Dv) 4"), dQ written
    once (G D 4). Backward global terms (both): zero-init 4 (T1 N1 D + T2 N2 (D + Dv)), final pass read 4 (...)
    and write e (...). Declared by both specs with spec.gm_reference (opgen check reports it)."""
    T1, T2, N1, N2, D, Dv, CNT, BS = (int(dims[k]) for k in ("T1", "T2", "N1", "N2", "D", "Dv", "CNT", "BS"))
    G, L, e = N1 // N2, CNT * BS, t_bytes
    units = T1 * N2
    stats = 64 * G
    if not backward:
        per = 3 * L * (D + Dv) * e + 8 * G * L + 4 * G * L + G * D * e + G * Dv * e + stats + 4 * CNT
        return units * per, "forward (§4.1)"
    basic = CNT == 16 and BS == 64 and D <= 192 and Dv <= 128 and G <= 16 and not deterministic
    small = G * (D + 2 * Dv) * e + stats + 4 * CNT
    if basic:
        per = L * (D + Dv) * e + 16 * G * L + 8 * G * L + small + 2 * L * (D + Dv) * 4 + 2 * 2 * G * D * 4
        what = "backward basic template (§4.2)"
    else:
        per = (4 * L * D + 3 * L * Dv) * e + 16 * G * L + 8 * G * L + small + 3 * L * (D + Dv) * 4 + G * D * 4
        what = "backward general template (§4.3)"
    total = T1 * N1 * D + T2 * N2 * (D + Dv)
    return units * per + 4 * total + 4 * total + e * total, what
