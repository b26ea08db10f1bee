"""`canonicalize`: local rewrites that are exact — the result is bit-identical for every input,
including -0.0, infinities and NaN — both in IEEE arithmetic and in opgen's interpreter (device mode:
fp32 NumPy arrays; exact mode: float64 arrays).

Each rule is a small function `rule(G, node) -> str | Node | None` in `RULES`:

- a value name: the node's result is that existing value (its users and outputs move to it, the node
  is erased);
- a `Node` with the same result value: the node is replaced in place (same name, same type);
- None: the rule does not apply.

The driver visits the ops in topological order, so operands are already canonical when their users
are looked at (a chain such as neg(neg(neg(neg(x)))) folds in one sweep), and repeats sweeps until
nothing changes (a bounded number of times). Values that become unused are left to `dce`.

One caveat shapes the float rules: the interpreter stores a constant (and a dimval) of a 16-bit float
type as an fp32 array, so an f16/bf16-typed value is not always held in its own dtype. An identity
such as x * 1 would then change the array's NumPy dtype (and so later arithmetic). The arithmetic
identities therefore only fire on f32 and integer values, whose storage always matches their type;
the same-dtype cast rule checks that the operand's storage is faithful (see `_faithful_storage`).
"""

from __future__ import annotations

import dataclasses
import math

import networkx as nx
import numpy as np

from opgen.interp.kernels import KERNELS, Ctx
from opgen.ir.core import Node
from opgen.ir.dtypes import DType, DTypeVar
from opgen.passes.graph import OP, op_of, remove, replace_uses, set_op, topo_order, type_of

MAX_SWEEPS = 8


# -- helpers ------------------------------------------------------------------------------------------

def _scalar_const(G, v):
    """(value, dtype) when every element of `v` is one known constant: a scalar `const`, possibly seen
    through broadcast/reshape (which copy elements without changing them); else None."""
    n = op_of(G, v)
    while n is not None and n.op in ("broadcast", "reshape"):
        n = op_of(G, n.inputs[0])
    if n is None or n.op != "const":
        return None
    return n.attr("value"), n.attr("dtype")


def _exact_storage_dtype(dt) -> bool:
    """f32, integer and bool values are held in arrays of their own kind by the interpreter."""
    return isinstance(dt, DType) and (dt == DType.f32 or dt.is_int or dt == DType.bool)


def _is_value(c, want: float, *, negative_zero: bool | None = None) -> bool:
    """Whether constant c equals `want`; with `negative_zero` given, also whether the zero's sign is
    negative (an int literal 0 of a float const is +0.0)."""
    value, _ = c
    if isinstance(value, bool) or value != want:
        return False
    if negative_zero is not None:
        return (isinstance(value, float) and math.copysign(1.0, value) < 0) == negative_zero
    return True


def _identity_operand(G, n: Node, k: int) -> str | None:
    """Operand k of binary node n, if n's result has exactly its type (the other operand broadcasts
    into it without changing its shape) and that type's storage is exact; else None."""
    x = n.inputs[k]
    if type_of(G, x) != n.result.type or not _exact_storage_dtype(n.result.type.dtype):
        return None
    return x


def _is_int(dt) -> bool:
    return isinstance(dt, DType) and dt.is_int


# -- rules --------------------------------------------------------------------------------------------

def mul_by_one(G, n):
    """x * 1 -> x, 1 * x -> x.

    Exact: IEEE 754 multiplication by 1 returns x for every x (±0 keep their sign, ±inf stay, NaN stays
    NaN); integer multiplication by 1 is the identity. Only when the constant does not change the shape
    (result type == x's type)."""
    if n.op != "mul":
        return None
    for k in (0, 1):
        c = _scalar_const(G, n.inputs[1 - k])
        if c is not None and _is_value(c, 1):
            x = _identity_operand(G, n, k)
            if x is not None:
                return x
    return None


def div_by_one(G, n):
    """x / 1 -> x.

    Exact: IEEE 754 division by 1 returns x for every x, signed zeros, infinities and NaN included.
    Float values only (the interpreter's integer division is true division)."""
    if n.op != "div":
        return None
    c = _scalar_const(G, n.inputs[1])
    if c is None or not _is_value(c, 1) or _is_int(n.result.type.dtype):
        return None
    return _identity_operand(G, n, 0)


def add_zero(G, n):
    """x + (-0.0) -> x, (-0.0) + x -> x; for integers x + 0 -> x, 0 + x -> x.

    Exact: x + (-0.0) == x for every x, including x = +0.0 (+0 + -0 = +0 in round-to-nearest) and
    x = -0.0. NOT x + (+0.0): (-0.0) + (+0.0) = +0.0 flips the sign of a negative zero, so a +0.0
    addend is left alone."""
    if n.op != "add":
        return None
    integer = _is_int(n.result.type.dtype)
    for k in (0, 1):
        c = _scalar_const(G, n.inputs[1 - k])
        if c is not None and _is_value(c, 0, negative_zero=None if integer else True):
            x = _identity_operand(G, n, k)
            if x is not None:
                return x
    return None


def sub_zero(G, n):
    """x - (+0.0) -> x; for integers x - 0 -> x.

    Exact: x - (+0.0) == x + (-0.0) == x for every x ((-0) - (+0) = -0, (+0) - (+0) = +0). Not
    x - (-0.0), which is x + (+0.0) (see add_zero)."""
    if n.op != "sub":
        return None
    integer = _is_int(n.result.type.dtype)
    c = _scalar_const(G, n.inputs[1])
    if c is not None and _is_value(c, 0, negative_zero=None if integer else False):
        return _identity_operand(G, n, 0)
    return None


def neg_neg(G, n):
    """neg(neg(x)) -> x.

    Exact: float negation flips the sign bit only, so twice restores every bit (±0, ±inf, NaN payload
    included). The interpreter's negation keeps the array's dtype, so this holds for f16/bf16 and
    dtype variables too (neg is float-only in the IR)."""
    if n.op != "neg":
        return None
    inner = op_of(G, n.inputs[0])
    if inner is not None and inner.op == "neg":
        return inner.inputs[0]
    return None


def reshape_reshape(G, n):
    """reshape(reshape(x, s1), s2) -> reshape(x, s2).

    Exact: a reshape moves no element (row-major order is kept), so two reshapes are the one reshape
    from the first operand to the final shape."""
    if n.op != "reshape":
        return None
    inner = op_of(G, n.inputs[0])
    if inner is not None and inner.op == "reshape":
        return dataclasses.replace(n, inputs=(inner.inputs[0],))
    return None


def reshape_same(G, n):
    """reshape(x, shape of x) -> x.

    Exact: same shape, same row-major order, same elements. Shapes compare structurally (symbolic dims
    in canonical form), so only provably equal shapes match."""
    if n.op == "reshape" and type_of(G, n.inputs[0]) == n.result.type:
        return n.inputs[0]
    return None


def permute_identity(G, n):
    """permute(x, [0, 1, ..., r-1]) -> x.

    Exact: the identity permutation moves no element."""
    if n.op == "permute" and tuple(n.attr("perm")) == tuple(range(len(n.attr("perm")))):
        return n.inputs[0]
    return None


def permute_permute(G, n):
    """permute(permute(x, p), q) -> permute(x, [p[q[0]], p[q[1]], ...]).

    Exact: result axis i of the outer permute is inner axis q[i], which is x's axis p[q[i]]; elements
    only move, and the composed permutation moves each exactly where the pair did."""
    if n.op != "permute":
        return None
    inner = op_of(G, n.inputs[0])
    if inner is None or inner.op != "permute":
        return None
    p, q = inner.attr("perm"), n.attr("perm")
    attrs = tuple((k, tuple(p[i] for i in q)) if k == "perm" else (k, v) for k, v in n.attrs)
    return dataclasses.replace(n, inputs=(inner.inputs[0],), attrs=attrs)


def broadcast_same(G, n):
    """broadcast(x, shape of x) -> x.

    Exact: broadcasting to the operand's own shape repeats nothing."""
    if n.op == "broadcast" and type_of(G, n.inputs[0]) == n.result.type:
        return n.inputs[0]
    return None


def _faithful_storage(G, v) -> bool:
    """Whether the interpreter holds value `v` in an array of its own dtype in both modes.

    True for f32/integer/bool values; for f16/bf16 and dtype variables when the value is a param, a cast
    result, or reaches one through ops that keep the array's dtype (reshape, permute, broadcast, slice,
    neg, abs). A narrow-float const or arithmetic on one is held as fp32 (not faithful)."""
    while True:
        t = type_of(G, v)
        if _exact_storage_dtype(t.dtype):
            return True
        n = op_of(G, v)
        if n is None or n.op == "cast":
            return True
        if n.op not in ("reshape", "permute", "broadcast", "slice", "neg", "abs"):
            return False
        v = n.inputs[0]


def cast_same(G, n):
    """cast(x, to = dtype of x, round = "none") -> x.

    Exact: converting a value to its own type is the identity (no rounding happens, whatever the mode).
    In the interpreter a same-type cast re-rounds the operand's storage, which is the identity when that
    storage is already of the type (checked by `_faithful_storage`); rint/round casts are left alone."""
    if n.op != "cast" or n.attr("round") != "none":
        return None
    x = n.inputs[0]
    if type_of(G, x) == n.result.type and _faithful_storage(G, x):
        return x
    return None


def fold_constants(G, n):
    """op(const, ...) -> const: a scalar op whose operands are all scalar constants of concrete dtypes
    becomes one `const`.

    Exact by construction: the op is evaluated with the interpreter's own kernels in both modes (device:
    fp32, exact: float64), and the fold only happens when the single literal reproduces both results
    bit for bit (value, sign of zero and NumPy dtype) — e.g. 1/3 folds (fp32(1/3 in float64) is the fp32
    quotient), while a value whose two modes disagree stays an op. NaN results are not folded (a NaN
    attribute would never compare equal to itself)."""
    if n.op in ("const", "dimval", "iota", "concat") or not n.inputs or n.result.type.shape != ():
        return None
    consts = []
    for i in n.inputs:
        c = op_of(G, i)
        if c is None or c.op != "const" or not isinstance(c.attr("dtype"), DType):
            return None
        consts.append(c)
    dt = n.result.type.dtype
    if not isinstance(dt, DType) or any(isinstance(v, DTypeVar) for _, v in n.attrs):
        return None

    results = {}
    for mode in ("device", "exact"):
        ctx = Ctx(mode, {}, {})
        try:
            with np.errstate(all="ignore"):
                args = [_eval(ctx, c) for c in consts]
                results[mode] = np.asarray(KERNELS[n.op](ctx, *args, n.attr_dict, n.result.type))
        except Exception:  # noqa: BLE001 - anything the kernel rejects is simply not folded
            return None
    ex = results["exact"]
    if dt == DType.bool:
        value = bool(ex)
    elif dt.is_int:
        if ex.dtype.kind not in "iu":
            return None
        value = int(ex)
    else:
        if ex.dtype.kind != "f" or np.isnan(ex):
            return None
        value = float(ex)
    attrs = (("dtype", dt), ("value", value))
    for mode, want in results.items():
        with np.errstate(all="ignore"):
            got = np.asarray(KERNELS["const"](Ctx(mode, {}, {}), dict(attrs), n.result.type))
        if got.dtype != want.dtype or got.shape != want.shape or got.tobytes() != want.tobytes():
            return None
    return Node("const", (), n.result, attrs, n.loc)


def _eval(ctx, c: Node):

    return np.asarray(KERNELS["const"](ctx, c.attr_dict, c.result.type))


RULES = [
    fold_constants,
    mul_by_one,
    div_by_one,
    add_zero,
    sub_zero,
    neg_neg,
    reshape_reshape,
    reshape_same,
    permute_permute,
    permute_identity,
    broadcast_same,
    cast_same,
]
"""The rewrite rules, tried in this order on each op; the first that applies wins."""


def apply_rules(G: nx.DiGraph, rules) -> bool:
    """One sweep of `rules` over the ops of `G` (in place, topological order). Returns whether anything
    changed. Raises IRError when a rule returns an ill-typed replacement (a bug in the rule)."""
    changed = False
    for v in topo_order(G):
        if v not in G or G.nodes[v]["kind"] != OP:
            continue
        while True:
            n = G.nodes[v]["ir"]
            for rule in rules:
                r = rule(G, n)
                if r is not None:
                    break
            else:
                break
            changed = True
            if isinstance(r, str):
                replace_uses(G, v, r)
                remove(G, v)
                break
            set_op(G, v, r)
    return changed


def canonicalize(G: nx.DiGraph) -> nx.DiGraph:
    """Apply `RULES` until nothing changes (at most MAX_SWEEPS sweeps).

    Input: a DiGraph from `to_nx` (not modified). Output: a new DiGraph with the same params and
    outputs (possibly returning other, equal values). Deterministic.
    """
    G = G.copy()
    for _ in range(MAX_SWEEPS):
        if not apply_rules(G, RULES):
            break
    return G
