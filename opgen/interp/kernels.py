"""NumPy evaluation of each IR op (semantics in opgen.ir.ops).

`Ctx` carries the mode: device (floats as float32, casts round with their mode) or exact (floats as
float64, casts between float types are the identity), the bound dims and the dtype variables.
"""

from __future__ import annotations

import math

import numpy as np

from opgen.errors import OpgenError, SpecError
from opgen.interp.minmax import ieee_max, ieee_min, reduce_max, reduce_min
from opgen.interp.rounding import float_to_int, int_to_float, int_to_int, round_float
from opgen.ir.dims import eval_shape
from opgen.ir.ops import repeat_interleave_size_error
from opgen.ir.dtypes import DType, DTypeVar


class Ctx:
    """Evaluation context: mode ("device" | "exact"), dim env, dtype-variable binding."""

    def __init__(self, mode: str, env: dict, dtypes: dict):
        if mode not in ("device", "exact"):
            raise OpgenError(f"mode must be device or exact, got {mode!r}")
        self.mode = mode
        self.env = env
        self.dtypes = dtypes
        self.float = np.float32 if mode == "device" else np.float64

    def dtype(self, dt) -> DType:
        """Concrete DType of `dt` (dtype variables resolved by the binding)."""
        return self.dtypes[dt.name] if isinstance(dt, DTypeVar) else dt

    def shape(self, shape):
        """Concrete shape (ints) of a symbolic shape under the bound dims."""
        return eval_shape(shape, self.env)


def _cast(ctx, x, a, ty):
    """The cast op: AscendC's Cast (opgen.interp.rounding). Device mode: floats rounded to their type with the
    round mode, float -> integer rounded and saturated (8-bit targets through half), integers saturated; exact
    mode: casts between float types are the identity (float64), a cast to an integer still rounds and saturates
    (directly, no half step). Integers come back as int64 holding values of their type, bools as bool."""
    to = ctx.dtype(a["to"])
    mode = a["round"]
    x = np.asarray(x)
    if to == DType.bool:
        return x != 0
    if to.is_float:
        if ctx.mode == "exact":
            return np.asarray(x, dtype=np.float64)
        if x.dtype.kind in "iub":
            return int_to_float(x, to, mode)
        if to == DType.f32:
            return np.asarray(x, dtype=np.float32)
        return round_float(x, to, mode)
    if x.dtype.kind == "b":
        return x.astype(np.int64)
    if x.dtype.kind in "iu":
        return int_to_int(x, to)
    src = DType.f16 if x.dtype == np.float16 else DType.f32
    return float_to_int(x, src, to, mode, device=ctx.mode == "device")


def _const(ctx, a, ty):
    dt = ctx.dtype(a["dtype"])
    if dt.is_float:
        return np.asarray(a["value"], dtype=ctx.float)
    if dt == DType.bool:
        return np.asarray(bool(a["value"]))
    return np.asarray(a["value"], dtype=np.int64)


def _reduce(ctx, x, a, ty):
    axes = tuple(a["axes"])
    kd = a["keepdims"]
    k = a["kind"]
    if k == "sum":
        return np.sum(x, axis=axes, keepdims=kd)
    if k == "max":
        return reduce_max(x, axis=axes, keepdims=kd)
    if k == "min":
        return reduce_min(x, axis=axes, keepdims=kd)
    return np.mean(x, axis=axes, keepdims=kd)


def _slice(ctx, x, a, ty):
    ax = a["axis"]
    start = a["start"].evaluate(ctx.env)
    stop = a["stop"].evaluate(ctx.env)
    sl = [slice(None)] * x.ndim
    sl[ax] = slice(start, stop, a["step"])
    return x[tuple(sl)]


def _repeat_interleave(ctx, x, a, ty):
    """Element i of the axis is x's element i // repeats, for i < size (docs/design.md "Specs and the Tensor IR").
    Raises OpgenError when x's extent and size break opgen.ir.ops.repeat_interleave_size_error's rule: the shapes
    the spec relates disagree with the tensors."""
    ax, r = a["axis"], a["repeats"]
    size = a["size"].evaluate(ctx.env)
    why = repeat_interleave_size_error(x.shape[ax], r, size)
    if why:
        raise OpgenError(why)
    return np.take(x, np.arange(size) // r, axis=ax)


def _gather(ctx, x, idx, a, ty):
    nb = a["batch_dims"]
    bshape = x.shape[:nb]
    p = int(np.prod(bshape, dtype=np.int64))
    n_ax = x.shape[nb]
    if idx.size and (idx.min() < 0 or idx.max() >= n_ax):
        raise OpgenError(f"gather: index {int(idx.min() if idx.min() < 0 else idx.max())} outside [0, {n_ax}) (a "
                         f"spec bounds its index input with spec.check(name, fn, on=\"device\"), which random "
                         f"inputs then respect: docs/design.md \"Random inputs\")")
    rest = x.shape[nb + 1:]
    xb = x.reshape((p, n_ax) + rest)
    ib = idx.reshape(p, -1)
    out = xb[np.arange(p)[:, None], ib]
    return out.reshape(idx.shape + rest)


def _scatter_add(ctx, idx, src, a, ty):
    nb = a["batch_dims"]
    size = a["size"].evaluate(ctx.env)
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        raise OpgenError(f"scatter_add: index {int(idx.min() if idx.min() < 0 else idx.max())} outside [0, {size})")
    bshape = idx.shape[:nb]
    p = int(np.prod(bshape, dtype=np.int64))
    rest = src.shape[idx.ndim:]
    ib = idx.reshape(p, -1)
    sb = src.reshape((p, ib.shape[1]) + rest)
    out = np.zeros((p, size) + rest, dtype=src.dtype)
    np.add.at(out, (np.arange(p)[:, None], ib), sb)
    return out.reshape(bshape + (size,) + rest)


def _matmul(ctx, x, y, a, ty):
    """NumPy matmul of the operands (each transposed over its last two axes by its attribute): the leading batch
    dims broadcast as np.matmul broadcasts them (the type rule, opgen.ir.ops._matmul, refuses 1-D operands)."""
    if a["transpose_a"]:
        x = np.swapaxes(x, -1, -2)
    if a["transpose_b"]:
        y = np.swapaxes(y, -1, -2)
    return np.matmul(x, y)


ERF_CLIP = 3.92
"""AscendC's Erf clips x to [-3.92, 3.92] before its rational approximation (docs/reference/ascendc.md §1.9)."""
ERF_P = (0.29639384698e5, 0.50637915060e4, 0.13938061484e4, 0.10162808918e3, 0.75517016694e1, 0.053443748819)
"""P(x) = x * sum_k ERF_P[k] x^(2k) of AscendC's Erf (p0 .. p5, docs/reference/ascendc.md §1.9); fp32 constants."""
ERF_Q = (0.26267224157e5, 0.13243365831e5, 0.30231248150e4, 0.39856963806e3, 0.31212858877e2)
"""Q(x) = x^10 + sum_k ERF_Q[k] x^(2k) of AscendC's Erf (q0 .. q4, docs/reference/ascendc.md §1.9); fp32 constants."""
_ERF_CLIP = np.float32(ERF_CLIP)
_ERF_P = tuple(np.float32(v) for v in ERF_P)
_ERF_Q = tuple(np.float32(v) for v in ERF_Q)


def _erf(ctx, x, a, ty):
    """erf. float32 (device mode): as AscendC's Erf on Atlas A2 / A3 computes it (docs/reference/ascendc.md §1.9): x
    clipped to [-3.92, 3.92], s = x², P = x·(((((p5 s + p4) s + p3) s + p2) s + p1) s + p0), Q = ((((s + q4) s + q3)
    s + q2) s + q1) s + q0, P / Q, each step rounded to float32 (within 4.3e-7 of erf, absolute, and relative for
    normal x; constant past the clip); a float16 / bfloat16 operand is computed in float32 and rounded back to its
    dtype (the builder's GELU casts to float32 first, so kernels never see one). float64 (exact mode): math.erf."""
    x = np.asarray(x)
    if x.dtype == np.float64:
        return np.vectorize(math.erf, otypes=[np.float64])(x)
    if x.dtype != np.float32:   # a half operand: AscendC casts to fp32, computes, casts back
        return _erf(ctx, x.astype(np.float32), a, ty).astype(x.dtype)
    c = np.maximum(np.minimum(x, _ERF_CLIP), -_ERF_CLIP)
    s = c * c
    p = s * _ERF_P[5] + _ERF_P[4]
    for k in (3, 2, 1, 0):
        p = s * p + _ERF_P[k]
    q = s + _ERF_Q[4]
    for k in (3, 2, 1, 0):
        q = s * q + _ERF_Q[k]
    return (c * p) / q


def _tanh(ctx, x, a, ty):
    """tanh. float32 (device mode): as AscendC's Tanh on Atlas A2 / A3 computes it (docs/reference/ascendc.md §1.9):
    x clipped to [-8.8, 8.8], t = exp(2x), (t - 1) / (t + 1), each step rounded to float32 (about 1e-7 absolute, so
    up to ~1e-3 relative for |x| ~ 1e-4; saturates to +-1 exactly past the clip). float64 (exact mode): NumPy's
    tanh."""
    x = np.asarray(x)
    if x.dtype != np.float32:
        return np.tanh(x)
    c = np.maximum(np.minimum(x, np.float32(8.8)), np.float32(-8.8))
    t = np.exp(c * np.float32(2.0))
    return (t - np.float32(1.0)) / (t + np.float32(1.0))


def _reshape(ctx, x, a):
    """The reshape op (row-major). Raises SpecError when the dims of this call give the target another element
    count than x (a reshape the spec's relations do not keep exact, e.g. [N, C * L + 1] from [N, C, L])."""
    shape = ctx.shape(a["shape"])
    x = np.asarray(x)
    if int(np.prod(shape, dtype=np.int64)) != x.size:
        raise SpecError(f"reshape of {list(x.shape)} ({x.size} elements) to [{', '.join(str(d) for d in a['shape'])}] = "
                        f"{list(shape)} ({int(np.prod(shape, dtype=np.int64))} elements) at these dims: a reshape keeps "
                        f"the element count; fix the spec's shape or require the relation that makes it hold")
    return np.reshape(x, shape)


def _rsqrt(ctx, x, a, ty):
    return 1.0 / np.sqrt(x)


KERNELS = {
    "neg": lambda c, x, a, t: np.negative(x),
    "exp": lambda c, x, a, t: np.exp(x),
    "log": lambda c, x, a, t: np.log(x),
    "sqrt": lambda c, x, a, t: np.sqrt(x),
    "rsqrt": _rsqrt,
    "recip": lambda c, x, a, t: 1.0 / x,
    "abs": lambda c, x, a, t: np.abs(x),
    "tanh": _tanh,
    "erf": _erf,
    "not": lambda c, x, a, t: np.logical_not(x),
    "add": lambda c, x, y, a, t: x + y,
    "sub": lambda c, x, y, a, t: x - y,
    "mul": lambda c, x, y, a, t: x * y,
    "div": lambda c, x, y, a, t: x / y,
    "maximum": lambda c, x, y, a, t: ieee_max(x, y),
    "minimum": lambda c, x, y, a, t: ieee_min(x, y),
    "and": lambda c, x, y, a, t: np.logical_and(x, y),
    "or": lambda c, x, y, a, t: np.logical_or(x, y),
    "lt": lambda c, x, y, a, t: x < y,
    "le": lambda c, x, y, a, t: x <= y,
    "gt": lambda c, x, y, a, t: x > y,
    "ge": lambda c, x, y, a, t: x >= y,
    "eq": lambda c, x, y, a, t: x == y,
    "ne": lambda c, x, y, a, t: x != y,
    "select": lambda c, k, x, y, a, t: np.where(k, x, y),
    "cast": _cast,
    "const": _const,
    "dimval": lambda c, a, t: np.asarray(a["n"].evaluate(c.env), dtype=c.float if c.dtype(a["dtype"]).is_float
                                         else np.int64),
    "iota": lambda c, a, t: np.arange(a["n"].evaluate(c.env), dtype=np.int64),
    "broadcast": lambda c, x, a, t: np.broadcast_to(x, c.shape(a["shape"])),
    "reduce": _reduce,
    "reshape": lambda c, x, a, t: _reshape(c, x, a),
    "permute": lambda c, x, a, t: np.transpose(x, a["perm"]),
    "concat": None,  # variadic, handled in run.py
    "slice": _slice,
    "repeat_interleave": _repeat_interleave,
    "gather": _gather,
    "scatter_add": _scatter_add,
    "matmul": _matmul,
}
