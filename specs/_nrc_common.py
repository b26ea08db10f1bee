"""Pieces shared by the NormRopeConcat forward and backward specs (docs/reference/norm_rope_concat.md).

Not a spec itself (files starting with `_` are skipped by the registry).
"""

ROPE_NONE, ROPE_INTERLEAVE, ROPE_HALF = 0, 1, 2


def rotate(b, x, D, rope_type):
    """Forward rotation R(x) along the last axis (§1.3): interleave rotates pairs (2i, 2i+1),
    half swaps the halves: R(x)[i] = -x[i+h], R(x)[i+h] = x[i]."""
    shape = list(x.shape)
    if rope_type == ROPE_INTERLEAVE:
        pairs = x.reshape(shape[:-1] + [D // 2, 2])
        even, odd = pairs.slice(-1, 0, 1), pairs.slice(-1, 1, 2)
        return b.concat([-odd, even], -1).reshape(shape)
    lo, hi = x.slice(-1, 0, D // 2), x.slice(-1, D // 2, D)
    return b.concat([-hi, lo], -1)


def rotate_t(b, g, D, rope_type):
    """Adjoint R^T(g) (§2): interleave (g[2i+1], -g[2i]); half (g[i+h], -g[i])."""
    shape = list(g.shape)
    if rope_type == ROPE_INTERLEAVE:
        pairs = g.reshape(shape[:-1] + [D // 2, 2])
        even, odd = pairs.slice(-1, 0, 1), pairs.slice(-1, 1, 2)
        return b.concat([odd, -even], -1).reshape(shape)
    lo, hi = g.slice(-1, 0, D // 2), g.slice(-1, D // 2, D)
    return b.concat([hi, -lo], -1)


def split_rope(c, R, total):
    """Split [B, N, total, D] at position R: (first R rows, the rest)."""
    return c.slice(2, 0, R), c.slice(2, R, total)


def stream_parts(main, enc, concat_order):
    """The concatenation order of a stream's parts (§1.1 step 3)."""
    if enc is None:
        return [main]
    return [main, enc] if concat_order == 0 else [enc, main]


STREAMS = (("norm_query", "norm_type", "query"), ("norm_key", "norm_type", "key"),
           ("norm_added_query", "norm_added_type", "encoder_query"), ("norm_added_key", "norm_added_type", "encoder_key"))
"""(parameter prefix, norm-type attribute, input) of the four normalised streams (§1.2, §2.1)."""


def require_by_mode(spec, param, attr, value, part):
    """`param` is required when attribute `attr` >= `value` (types are 0..2, so 2 means == 2) and the
    stream's input `part` is given (§3.3 "weights present when type 2, stats when type >= 1")."""
    cond = f"{{{attr}}} == 2" if value == 2 else f"{{{attr}}} >= {value}"   # {name}: a parameter (dsl.rules)
    extra = "" if part in ("query", "key") else f" and {{{part}}} is given"

    def fn(attrs, present):
        if attrs[attr] >= value and present[part] and not present[param]:
            return f"required when {cond}{extra}"
        return None

    spec.check(param, fn)


def require_rope_tables(spec):
    """rope_sin and rope_cos are always required (§7.1: CANN sizes every copy by rope_sin's D)."""
    for p in ("rope_sin", "rope_cos"):
        spec.check(p, lambda a, pr, p=p: None if pr[p] else
                   "required (CANN's kernels size every copy by {rope_sin}'s D, even for {rope_type} 0)")


def declare_public_api(spec, names: str) -> None:
    """CANN's public aclnn parameters (docs/reference/norm_rope_concat.md §3.1-3.2): the OpDef's order (inputs,
    attributes, outputs), camelCase names without Optional/Out suffixes, const output tensors (ops-transformer).
    `names`: the public names in that order, one per OpDef parameter."""
    from opgen.dsl import api

    opdef = [p.name for p in spec.inputs + spec.attrs + spec.outputs]
    public = names.split()
    if len(public) != len(opdef):
        raise ValueError(f"declare_public_api: {len(public)} public names for {len(opdef)} OpDef parameters; give one per parameter")
    spec.aclnn_signature(*(api.param(n, p) for n, p in zip(public, opdef)), const_outputs=True)
    spec.aclnn_note("Stricter than CANN's aclnn layer of this op: CANN's aclnn layer checks only null "
                    "pointers and dtypes and leaves the rest to infershape and tiling (a later 561xxx) or to nobody; "
                    "here every rule of the recommended validation set fails with 161002: 4-D BSND inputs with common "
                    "B, N and D; D even and at most 1024; Sk == Sv; an encoder key exactly when an encoder value; "
                    "weights for norm type 2; ropeSin and ropeCos both given with 1 <= R <= min(SQ, SK); outputs of "
                    "exactly the inferred shapes. Optional outputs may be null.")

