"""Useful multiply-accumulates of a tensor-IR graph's matmuls: the terms a data-independent mask keeps
(docs/reference/kernel_cost.md §3, "cube utilisation").

A matmul R[..., m, n] = sum_k A[..., m, k] B[..., k, n] issues M * N * K multiply-accumulates per batch as written.
A term (m, n, k) is *useful* unless

  * the result element R[m, n] is dead: every path from it to an output ends where a mask replaces it
    (`select(c, fill, x)` with c true there) or multiplies it by an element known to be zero; or
  * an operand element A[m, k] or B[k, n] is known to be zero.

"Known" means fixed by the graph alone at the call's dims, never by the data: a select's condition counts only when
it depends on no input (iota, dims and constants: a causal or band mask, evaluated here), and zeros come from a
forward pass over three element classes per value — ANY, ZERO (exactly 0) and NEG_HUGE (at most -FLT_MAX / 2, a
mask's fill): a select with a static condition takes its operands' classes, x - y and x + y keep NEG_HUGE where
one side is NEG_HUGE and the other is not, exp(NEG_HUGE) = ZERO, ZERO times anything or over anything but ZERO
is ZERO (0 / 0 is NaN), a cast keeps the class, a row max is NEG_HUGE only where its whole row is, a sum ZERO only
where all its terms are. The rules
assume the finite data of moderate magnitude the specs are defined for (exp(-FLT_MAX - m) underflows to 0 for any
finite m not itself near -FLT_MAX). A mask that is an input (data) keeps every term: a kernel cannot skip it from
the shapes. The classes are kept in compact arrays: each axis either the value's full extent or 1 (broadcast), so
a [S1, S2] mask broadcast over batch and heads costs S1 * S2 bytes.
"""

from __future__ import annotations

import math

import numpy as np

from opgen.interp.kernels import KERNELS, Ctx
from opgen.ir.dims import eval_shape

ANY, ZERO, NEG_HUGE = 0, 1, 2
"""Element classes of the forward pass (module docstring)."""

HUGE = 1.7014117331926443e38
"""A constant at or below -HUGE (-FLT_MAX / 2) is a mask fill: exp of it minus any moderate finite value is 0."""

STATIC_LIMIT = 1 << 26
"""The most elements of one input-free value evaluated here; a larger one is treated as data (every term kept)."""

_ELEMENTWISE = {"neg", "exp", "log", "sqrt", "rsqrt", "recip", "abs", "tanh", "erf", "add", "sub", "mul", "div",
                "maximum", "minimum", "select", "cast"}


def useful_macs(graph, env, dtypes=None) -> int:
    """Useful multiply-accumulates (module docstring) of `graph`'s matmul nodes at the dims `env` ({dim: int},
    as spec.bind's env); `dtypes` binds dtype variables for the evaluation of input-free values (a value that
    cannot be evaluated counts as data). Each matmul's batch dims are its result's leading axes; A's contraction
    axis is its last (second-to-last under transpose_a), B's its second-to-last (last under transpose_b).
    Raises opgen.errors.SpecError when a dim of a matmul is not bound in `env`."""
    if not any(n.op == "matmul" for n in graph.nodes):
        return 0
    vals = graph.values()
    shapes = {}

    def shape(name):
        if name not in shapes:
            shapes[name] = tuple(eval_shape(vals[name].type.shape, env))
        return shapes[name]

    static = _static_values(graph, env, dtypes or {}, shape)
    cls = _classes(graph, static, shape)
    dead = _dead(graph, static, cls, shape)
    total = 0
    for n in graph.nodes:
        if n.op != "matmul":
            continue
        total += _matmul_terms(n, cls, dead, shape)
    return total


def _static_values(graph, env, dtypes, shape) -> dict:
    """{value name: array} for the values that depend on no graph parameter (iota, dims, constants), each at most
    STATIC_LIMIT elements, evaluated by the interpreter in exact mode."""
    params = {p.value.name for p in graph.params}
    ctx = Ctx("exact", env, dtypes)
    out: dict[str, np.ndarray] = {}
    for n in graph.nodes:
        if n.op == "concat" or any(i in params or i not in out for i in n.inputs):
            continue
        if n.op in ("matmul", "gather", "scatter_add"):
            continue
        try:
            if math.prod(shape(n.result.name)) > STATIC_LIMIT:
                continue
            with np.errstate(all="ignore"):
                out[n.result.name] = np.asarray(KERNELS[n.op](ctx, *[out[i] for i in n.inputs], dict(n.attrs),
                                                              n.result.type))
        except Exception:   # noqa: BLE001 - an input-free value the interpreter cannot evaluate here counts as data
            continue
    return out


def _fit(c, rank: int):
    """A compact class array `c` (or None) with leading size-1 axes up to `rank` (numpy's right alignment)."""
    if c is None:
        return None
    return c.reshape((1,) * (rank - c.ndim) + c.shape)


def _compact(a: np.ndarray) -> np.ndarray:
    """`a` with every axis along which it is constant reduced to size 1."""
    for ax in range(a.ndim):
        if a.shape[ax] > 1:
            first = np.take(a, [0], axis=ax)
            if (a == first).all():
                a = first
    return a


def _const_class(v: np.ndarray) -> np.ndarray | None:
    """Classes of an evaluated float / int value: ZERO where 0, NEG_HUGE where <= -HUGE."""
    v = np.asarray(v)
    if v.dtype == bool:
        return None
    c = np.where(v == 0, ZERO, np.where(v <= -HUGE, NEG_HUGE, ANY)).astype(np.int8)
    return _compact(c) if c.any() else None


def _reshape_compact(c: np.ndarray, src: tuple, dst: tuple):
    """The compact class array `c` of a value of shape `src` reshaped to `dst` (row-major), or None when an axis
    group of the reshape is neither wholly broadcast nor wholly full in `c` and materialising it would pass
    STATIC_LIMIT elements."""
    if math.prod(src) <= STATIC_LIMIT:
        return _compact(np.broadcast_to(c, src).reshape(dst))
    # group the axes of src and dst into runs of equal products
    out = []
    i = j = 0
    while i < len(src) or j < len(dst):
        gi, gj = [i], [j]
        ps, pd = (src[i] if i < len(src) else 1), (dst[j] if j < len(dst) else 1)
        i, j = i + 1, j + 1
        while ps != pd:
            if ps < pd:
                ps *= src[i]; gi.append(i); i += 1   # noqa: E702
            else:
                pd *= dst[j]; gj.append(j); j += 1   # noqa: E702
        cs = [c.shape[a] for a in gi if a < len(src)]
        full = [src[a] for a in gi if a < len(src)]
        dd = [dst[b] for b in gj if b < len(dst)]
        if all(s == 1 for s in cs):
            out += [1] * len(dd)
        elif cs == full:
            out += dd
        else:
            return None
    return c.reshape(out)


def _classes(graph, static, shape) -> dict:
    """{value name: compact int8 class array (ANY / ZERO / NEG_HUGE) or None (all ANY)} (module docstring)."""
    cls: dict = {}
    for name, v in static.items():
        cls[name] = _const_class(v)
    for n in graph.nodes:
        r = n.result.name
        if r in cls:
            continue
        rank = len(shape(r))
        ins = [_fit(cls.get(i), len(shape(i))) for i in n.inputs]
        c = None
        op = n.op
        if op == "select" and n.inputs[0] in static:
            k = _fit(np.asarray(static[n.inputs[0]], bool), rank)
            a, b = (_fit(x if x is not None else np.zeros((), np.int8), rank) for x in ins[1:])
            c = np.where(k, a, b)
        elif op in ("add", "sub") and any(x is not None for x in ins):
            a, b = (_fit(x if x is not None else np.zeros((), np.int8), rank) for x in ins)
            hugea, hugeb = a == NEG_HUGE, b == NEG_HUGE
            huge = (hugea & ~hugeb) if op == "sub" else (hugea ^ hugeb)
            c = np.where(huge, NEG_HUGE, np.where((a == ZERO) & (b == ZERO), ZERO, ANY)).astype(np.int8)
        elif op == "mul" and any(x is not None for x in ins):
            a, b = (_fit(x if x is not None else np.zeros((), np.int8), rank) for x in ins)
            c = np.where((a == ZERO) | (b == ZERO), ZERO, ANY).astype(np.int8)
        elif op == "div" and ins[0] is not None:   # 0 / 0 is NaN: ZERO only over a divisor not known to be 0
            den = _fit(ins[1] if ins[1] is not None else np.zeros((), np.int8), rank)
            c = np.where((_fit(ins[0], rank) == ZERO) & (den != ZERO), ZERO, ANY).astype(np.int8)
        elif op == "exp" and ins[0] is not None:
            c = np.where(ins[0] == NEG_HUGE, ZERO, ANY).astype(np.int8)
        elif op == "cast" and ins[0] is not None:
            c = ins[0]
        elif op == "neg" and ins[0] is not None:
            c = np.where(ins[0] == ZERO, ZERO, ANY)
        elif op == "broadcast" and ins[0] is not None:
            c = ins[0].reshape((1,) * (rank - ins[0].ndim) + ins[0].shape)
        elif op == "reshape" and ins[0] is not None:
            c = _reshape_compact(ins[0], shape(n.inputs[0]), shape(r))
        elif op == "permute" and ins[0] is not None:
            c = np.transpose(ins[0], n.attr("perm"))
        elif op == "reduce" and ins[0] is not None and n.attr("kind") in ("max", "sum"):
            keep = NEG_HUGE if n.attr("kind") == "max" else ZERO
            src = shape(n.inputs[0])
            axes = tuple(a % len(src) for a in n.attr("axes"))
            c = np.where((ins[0] == keep).all(axis=axes, keepdims=True), keep, ANY).astype(np.int8)
            if not n.attr("keepdims", True):
                c = c.reshape([s for a, s in enumerate(c.shape) if a not in axes])
        if c is not None:
            c = _compact(np.asarray(c, np.int8))
            cls[r] = c if c.any() else None
    return cls


def _same_shape(n, name, shape) -> bool:
    """Whether input `name` of node `n` has its result's shape (no broadcast in the op)."""
    return shape(name) == shape(n.result.name)


def _dead(graph, static, cls, shape) -> dict:
    """{value name: compact bool array of its dead elements (module docstring)} for the values with any."""
    outputs = {v for _, v in graph.outputs}
    uses = graph.uses()
    dead: dict = {}
    for n in reversed(graph.nodes):
        r = n.result.name
        if r in outputs or r not in uses:
            continue
        acc = None
        for u in uses[r]:
            d = _dead_via(u, r, static, cls, dead, shape)
            if d is None:
                acc = None
                break
            acc = d if acc is None else (acc & d)
        if acc is not None:
            acc = _compact(np.asarray(acc))
            if acc.any():
                dead[r] = acc
    return dead


def _dead_via(u, name, static, cls, dead, shape):
    """The elements of value `name` that node `u` makes dead (compact bool, or None for none)."""
    if u.op not in _ELEMENTWISE or not _same_shape(u, name, shape):
        return None
    rank = len(shape(name))
    d = dead.get(u.result.name)
    d = np.zeros((1,) * rank, bool) if d is None else _fit(d, rank)
    if u.op == "select" and u.inputs[0] in static:
        k = _fit(np.asarray(static[u.inputs[0]], bool), rank)
        pos = [i for i, x in enumerate(u.inputs) if x == name]
        if pos == [1]:
            d = d | ~k
        elif pos == [2]:
            d = d | k
    elif u.op == "mul":
        other = [x for x in u.inputs if x != name]
        if other and cls.get(other[0]) is not None:
            d = d | (_fit(cls[other[0]], rank) == ZERO)
    return d if d.any() else None


def _matmul_terms(n, cls, dead, shape) -> int:
    """Useful terms of one matmul node (module docstring)."""
    a_name, b_name = n.inputs
    rs = shape(n.result.name)
    batch, (m, nn) = rs[:-2], rs[-2:]
    asz = shape(a_name)
    k = asz[-2] if n.attr("transpose_a", False) else asz[-1]
    full = math.prod(rs) * k
    rank = len(rs)

    def oriented(name, transpose):
        c = cls.get(name)
        if c is None:
            return None
        nz = _fit(c, len(shape(name))) != ZERO
        if transpose:
            nz = np.swapaxes(nz, -1, -2)
        return _fit(nz, rank)

    A = oriented(a_name, n.attr("transpose_a", False))
    B = oriented(b_name, n.attr("transpose_b", False))
    L = dead.get(n.result.name)
    L = None if L is None else ~_fit(L, rank)
    if A is None and B is None and L is None:
        return full
    parts = [x for x in (A, B, L) if x is not None]
    bshape = np.broadcast_shapes(*[x.shape[:-2] for x in parts])
    mult = math.prod(batch) // math.prod(bshape)
    total = 0
    for idx in np.ndindex(*bshape):
        def pick(x, r, c):
            if x is None:
                return None
            bi = tuple(i if s > 1 else 0 for i, s in zip(idx, x.shape[:-2]))
            return np.broadcast_to(x[bi], (r, c)).astype(np.float64)
        a, b, l_ = pick(A, m, k), pick(B, k, nn), pick(L, m, nn)
        if a is None and b is None:
            t = l_.sum() * k
        elif b is None:
            t = (a.sum(1) * (l_.sum(1) if l_ is not None else nn)).sum()
        elif a is None:
            t = (b.sum(0) * (l_.sum(0) if l_ is not None else m)).sum()
        elif l_ is None:
            t = (a.sum(0) * b.sum(1)).sum()
        else:
            t = (l_ * (a.astype(np.float32) @ b.astype(np.float32))).sum()
        total += int(round(t))
    return total * mult
