"""Maximum and minimum as AscendC's vector unit gives them in its default INF/NAN mode (docs/reference/ascendc.md
§1.13): a NaN operand gives NaN and +0.0 is above -0.0, IEEE 754-2019's maximum /
minimum. The interpreter's `maximum` / `minimum` / max / min reductions and the instruction table's Max, Min, Maxs,
Mins, ReduceMax and WholeReduceMax meanings share these functions, so the interpreter, the Kernel-IR interpreter and
the emulation (emu_detail::MaxOf / MinOf) agree on NaN and signed zeros."""

from __future__ import annotations

import ml_dtypes
import numpy as np


def _floating(dt) -> bool:
    return dt.kind == "f" or dt == ml_dtypes.bfloat16


def ieee_max(a, b):
    """The larger of `a` and `b` lane by lane (arrays or scalars broadcasting together, of one floating dtype —
    float64 / float32 / float16 / bfloat16 — or of integer dtypes): NaN where either is NaN, +0.0 above -0.0. The
    result has NumPy's promoted dtype of the two. Never raises."""
    a, b = np.asarray(a), np.asarray(b)
    with np.errstate(invalid="ignore", over="ignore"):   # a comparison with NaN (bfloat16's warns) is meant
        r = np.where(a > b, a, b)
        if _floating(r.dtype):
            r = np.where((a == b) & ~np.signbit(a), a, r)
            r = np.where(np.isnan(a) | np.isnan(b), a + b, r)  # a + b: a NaN of the operands' dtype
    return r


def ieee_min(a, b):
    """The smaller of `a` and `b` lane by lane (as ieee_max): NaN where either is NaN, -0.0 below +0.0. Never
    raises."""
    a, b = np.asarray(a), np.asarray(b)
    with np.errstate(invalid="ignore", over="ignore"):   # a comparison with NaN (bfloat16's warns) is meant
        r = np.where(a < b, a, b)
        if _floating(r.dtype):
            r = np.where((a == b) & np.signbit(a), a, r)
            r = np.where(np.isnan(a) | np.isnan(b), a + b, r)
    return r


def reduce_max(x, axis=None, keepdims: bool = False):
    """The maximum of `x` over `axis` (None: every element; an int or a tuple of ints) with ieee_max's rules: NaN if
    any element is NaN, +0.0 when the largest are zeros of both signs. Raises ValueError for an empty reduction
    (as np.max)."""
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=keepdims)                 # NaN-propagating
    if _floating(x.dtype):
        plus = np.any((x == 0) & ~np.signbit(x), axis=axis, keepdims=keepdims)
        m = np.where((m == 0) & plus, np.zeros_like(m), m)
    return m


def reduce_min(x, axis=None, keepdims: bool = False):
    """The minimum of `x` over `axis` with ieee_min's rules: NaN if any element is NaN, -0.0 when the smallest are
    zeros of both signs. Raises ValueError for an empty reduction (as np.min)."""
    x = np.asarray(x)
    m = np.min(x, axis=axis, keepdims=keepdims)
    if _floating(x.dtype):
        minus = np.any((x == 0) & np.signbit(x), axis=axis, keepdims=keepdims)
        m = np.where((m == 0) & minus, -np.zeros_like(m), m)
    return m
