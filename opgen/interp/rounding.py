"""AscendC's Cast, as the interpreter computes it: rounding to the narrow float types and conversions between
floats and integers, with the round modes and saturation of docs/reference/ascendc.md §1.9 and §1.12.

Round modes (the IR spelling; CAST_<MODE> in AscendC):

- `rint`  round to nearest, ties to even.       - `round` round to nearest, ties away from zero.
- `floor` toward -inf.  `ceil` toward +inf.  `trunc` toward zero.
- `odd`   an inexact result takes the neighbour whose last mantissa bit is 1 (float -> f16 only).
- `none`  a conversion that needs no rounding (widening, bool, integer -> integer); where one is needed it acts as
  `rint` (CAST_NONE "means CAST_RINT when precision is lost").

Float -> float (`round_float`): to nearest even from float64 through float32 rounded to odd (`_to_odd_f32`), ties
away from float32 by NumPy's cast with its ties fixed (`_round_away_f32`); otherwise the two representable neighbours of |x| are found from a first guess and its bit
pattern predecessor / successor and compared in float64 (exact: both neighbours and x are float64 values). Beyond
the largest finite value rint / round / ceil-of-a-positive go to infinity, floor / trunc / odd stay at the largest
finite value; NaN stays NaN, ±inf stays ±inf.

Float -> integer (`float_to_int`): the value is rounded to an integer with the mode, then saturated to the target
range (±inf saturate too) and NaN becomes 0. On A2/A3 there is no float32 -> int8 / uint8 conversion: it goes
through half, float32 -> f16 with CAST_ODD then f16 -> int8 with the mode (as ops-nn's quantising kernels do);
round-to-odd to half keeps enough bits that the second rounding equals a direct one for every |x| < 256, so the
result is the correctly rounded, saturated integer — `float_to_int` computes the two steps literally and the tests
compare it with the direct rule.

Integer -> float (`int_to_float`): exact in float64 for |x| <= 2^53 (beyond: rounded to odd at 53 bits, which a
second rounding to the target cannot tell from the exact value), then rounded to the target with the mode.
Integer -> integer (`int_to_int`): saturated to the target range (opgen's rule: the vector Cast saturates where it
narrows; documented for float sources, taken for integer ones). Integers are held as int64 by the interpreter.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from opgen.ir.dtypes import DType

MODES = ("none", "rint", "round", "floor", "ceil", "trunc", "odd")
"""Round modes of the IR's cast (module docstring); AscendC's RoundMode::CAST_<MODE.upper()>."""

_BITS = {DType.f32: (np.float32, np.uint32), DType.f16: (np.float16, np.uint16),
         DType.bf16: (ml_dtypes.bfloat16, np.uint16)}


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"unknown round mode {mode!r} (one of {', '.join(MODES)})")


def round_float(x, dtype: DType, mode: str) -> np.ndarray:
    """Round float values `x` (any float array, taken exactly as float64) to float type `dtype` (f32/f16/bf16)
    with round mode `mode` (MODES; "none" acts as "rint"). Returns an array of dtype.np. NaN stays NaN, ±inf stays
    ±inf; overflow as in the module docstring.
    Raises ValueError for a non-float target or an unknown mode."""
    if not dtype.is_float:
        raise ValueError(f"round_float: {dtype!r} is not a float type")
    _check_mode(mode)
    npd, ud = _BITS[dtype]
    x = np.asarray(x)
    if x.dtype == npd:
        return x.copy()
    if x.dtype == np.float32 and mode in ("none", "rint"):
        with np.errstate(over="ignore", invalid="ignore"):
            return x.astype(npd)   # NumPy's / ml_dtypes' float32 conversions round to nearest even (tested)
    if x.dtype == np.float32 and mode == "round":
        return _round_away_f32(x, npd)
    if mode in ("none", "rint"):
        with np.errstate(over="ignore", invalid="ignore"):
            if dtype == DType.f32:
                return x.astype(np.float32)      # IEEE's conversion: nearest even
            return _to_odd_f32(x).astype(npd)   # round to odd at 24 bits, then once to nearest even (_to_odd_f32)
    x64 = x.astype(np.float64)
    neg = np.signbit(x64)
    a = np.abs(x64)
    nbits = 8 * np.dtype(ud).itemsize
    inf_bits = int(np.array([np.inf], dtype=npd).view(ud)[0])
    with np.errstate(over="ignore", invalid="ignore"):
        near = a.astype(np.float32).astype(npd) if dtype != DType.f32 else a.astype(npd)
    nb = near.view(ud).astype(np.int64)
    nb = np.where(np.isnan(a), 0, nb)
    nv = nb.astype(ud).view(npd).astype(np.float64)
    lo_b = np.clip(np.where(nv > a, nb - 1, nb), 0, inf_bits)
    hi_b = np.clip(np.where(nv < a, nb + 1, nb), 0, inf_bits)
    lo = lo_b.astype(ud).view(npd).astype(np.float64)
    top = float(np.array([inf_bits - 1], dtype=ud).view(npd)[0])
    below = float(np.array([inf_bits - 2], dtype=ud).view(npd)[0])
    hi = np.where(hi_b == inf_bits, 2 * top - below, hi_b.astype(ud).view(npd).astype(np.float64))
    exact = lo == a
    with np.errstate(invalid="ignore"):
        d_lo, d_hi = a - lo, hi - a
    if mode in ("none", "rint"):
        up = (d_hi < d_lo) | ((d_hi == d_lo) & (lo_b % 2 == 1))
    elif mode == "round":
        up = d_hi <= d_lo
    elif mode == "trunc":
        up = np.zeros(a.shape, dtype=bool)
    elif mode == "floor":
        up = neg.copy()
    elif mode == "ceil":
        up = ~neg
    else:  # odd: the odd neighbour, but never past the largest finite value
        up = (lo_b % 2 == 0) & (hi_b < inf_bits)
    pick = np.where(exact, lo_b, np.where(up, hi_b, lo_b))
    pick = np.where(np.isinf(a), inf_bits, pick)
    sign = np.where(neg, 1 << (nbits - 1), 0)
    bits = (pick | sign).astype(ud)
    out = bits.view(npd)
    nan = np.isnan(x64)
    if nan.any():
        out = np.where(nan, npd(np.nan), out).astype(npd)
    return out.reshape(x.shape)


def _round_away_f32(x32: np.ndarray, npd) -> np.ndarray:
    """float32 `x32` rounded to the narrower float type `npd` (float16 / bfloat16) to nearest, ties away from zero:
    NumPy's / ml_dtypes' cast (nearest, ties to even) differs only on a tie it rounded toward zero, so only the
    values it rounded toward zero are looked at, each against its neighbour away from zero (the midpoint test is
    exact in float64: both neighbours and x have at most 24 significant bits and close exponents)."""
    x32 = np.ascontiguousarray(x32)   # r's flat view below must be r itself (a transposed input is not)
    with np.errstate(over="ignore", invalid="ignore"):
        r = x32.astype(npd)
        idx = np.flatnonzero(np.abs(r.astype(np.float32)) < np.abs(x32))
        if idx.size:
            rf = r.reshape(-1)
            xs = x32.reshape(-1)[idx].astype(np.float64)
            lo = rf[idx]
            hi = np.nextafter(lo, np.where(xs > 0, np.inf, -np.inf).astype(npd))
            hi64 = hi.astype(np.float64)
            tie = (2 * xs == lo.astype(np.float64) + hi64) & np.isfinite(hi64)
            rf[idx[tie]] = hi[tie]
    return r


def _to_odd_f32(x) -> np.ndarray:
    """float32 values of float array `x` rounded to odd (an inexact value takes the neighbour whose last mantissa
    bit is 1; beyond the largest finite float32 the largest finite one; ±inf and NaN kept). A second rounding of the
    result to a float type of at most 22 significand bits (f16: 11, bf16: 8) to nearest even equals the direct
    rounding of `x` (Boldo and Melquiond, "When double rounding is odd", 2005: 24 >= p + 2), so float64 values
    reach f16 / bf16 in two NumPy casts and four array temporaries instead of the neighbour search's twenty."""
    x64 = np.ascontiguousarray(x, dtype=np.float64)   # r's flat view below must be r itself
    with np.errstate(over="ignore", invalid="ignore"):
        r = x64.astype(np.float32)                          # nearest even: one of x's two float32 neighbours
        fix = (r != x64) & ~np.isnan(x64) & ((r.view(np.uint32) & 1) == 0)
    idx = np.flatnonzero(fix)
    if idx.size:                                            # the even neighbour: take the other one, on x's side
        rf, xf = r.reshape(-1), x64.reshape(-1)
        toward = np.where(rf[idx] > xf[idx], np.float32(-np.inf), np.float32(np.inf))
        rf[idx] = np.nextafter(rf[idx], toward)
    return r


def round_to(x: np.ndarray, dtype: DType, mode: str) -> np.ndarray:
    """Round float32 values `x` to `dtype` (f32/f16/bf16) with `mode` (MODES) — the device-mode float Cast.

    Raises ValueError for a non-float target, an unknown mode, or non-float32 input (rounding float64 would round
    twice, via float32; device mode computes in float32)."""
    if not dtype.is_float:
        raise ValueError(f"round_to: {dtype!r} is not a float type")
    _check_mode(mode)
    x = np.asarray(x)
    if dtype == DType.f32:
        return x.astype(np.float32)
    if x.dtype != np.float32:
        raise ValueError(f"round_to: expects float32 values, got {x.dtype}")
    return round_float(x, dtype, mode)


def round_integral(v: np.ndarray, mode: str) -> np.ndarray:
    """float64 values `v` rounded to integral float64 values with `mode` ("none" as "rint"; "odd" is refused).
    Exact: every float64 above 2^52 is already integral, and "round" (ties away from zero) compares the exact
    fraction v - trunc(v) with 0.5 (floor(|v| + 0.5) would round 0.49999999999999994 and 2^52 + 1 wrongly, the
    addition rounding first). Raises ValueError for "odd" or an unknown mode."""
    _check_mode(mode)
    if mode == "odd":
        raise ValueError("round mode odd has no meaning for a cast to an integer")
    if mode in ("none", "rint"):
        return np.rint(v)
    if mode == "round":
        t = np.trunc(v)
        with np.errstate(invalid="ignore"):   # inf - inf: NaN, not >= 0.5, so inf stays inf
            return np.where(np.abs(v - t) >= 0.5, t + np.sign(v), t)
    return {"floor": np.floor, "ceil": np.ceil, "trunc": np.trunc}[mode](v)


def saturate(v: np.ndarray, dtype: DType) -> np.ndarray:
    """Integral float64 (or int64) values `v` clipped to `dtype`'s range, NaN -> 0, as int64."""
    lo, hi = dtype.int_range
    v = np.asarray(v)
    if v.dtype.kind == "f":
        v = np.where(np.isnan(v), 0.0, v)
        return np.clip(v, float(lo), float(hi)).astype(np.int64)  # the bounds are exact in float64 but for i64
    return np.clip(v.astype(np.int64), lo, hi)


def float_to_int(x, src: DType, to: DType, mode: str, device: bool = True) -> np.ndarray:
    """Cast float values `x` of float type `src` to integer type `to` with round mode `mode` (module docstring):
    device mode goes through half for an 8-bit target from f32 / bf16 (f32 -> f16 CAST_ODD, then the mode);
    exact mode (device=False) rounds the float64 value directly. Returns int64 values within `to`'s range.
    Raises ValueError for a non-integer target or an unknown / "odd" mode."""
    if not to.is_int:
        raise ValueError(f"float_to_int: {to!r} is not an integer type")
    x = np.asarray(x)
    if device and to in (DType.i8, DType.u8) and src != DType.f16:
        x = round_float(x.astype(np.float32), DType.f16, "odd")
    v = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        r = round_integral(v, mode)
    if to == DType.i64:   # 2^63 is not an int64: saturate in float64 first, then take the exact bounds
        lo, hi = to.int_range
        big = r >= 2.0 ** 63
        small = r < -(2.0 ** 63)
        nan = np.isnan(r)
        out = np.where(big | small | nan, 0, r).astype(np.int64)
        return np.where(big, hi, np.where(small, lo, out)).astype(np.int64)
    return saturate(r, to)


def _int_to_f64_odd(x: np.ndarray) -> np.ndarray:
    """int64 values as float64, exact for |x| <= 2^53 and rounded to odd beyond (the dropped bits ORed into the last
    kept one): a second rounding of that to 24 or fewer bits, in any mode, equals the direct rounding of x."""
    x = x.astype(np.int64)
    neg = x < 0
    mag = np.where(neg, (~x).astype(np.uint64) + np.uint64(1), x.astype(np.uint64))
    big = mag > np.uint64(2 ** 53)
    out = mag.astype(np.float64)
    if big.any():
        m = mag[big]
        e = np.frexp(m.astype(np.float64))[1].astype(np.int64)          # bit length, or one more when rounded up
        e = np.where((m >> (e - 1).astype(np.uint64)) == 0, e - 1, e)
        shift = (e - 53).astype(np.uint64)
        q = m >> shift
        sticky = (m & ((np.uint64(1) << shift) - np.uint64(1))) != 0
        q = q | sticky.astype(np.uint64)
        out[big] = np.ldexp(q.astype(np.float64), shift.astype(np.int64))
    return np.where(neg, -out, out)


def int_to_float(x, dtype: DType, mode: str) -> np.ndarray:
    """Cast integer values `x` to float type `dtype` with `mode` ("none" as "rint"), rounded once: exact in float64
    for |x| <= 2^53, rounded to odd in float64 beyond (_int_to_f64_odd), then rounded to the target with the mode.
    Returns an array of dtype.np. Raises ValueError for a non-float target or an unknown mode."""
    x = np.asarray(x)
    v = _int_to_f64_odd(x) if x.dtype.kind in "iu" and x.dtype.itemsize == 8 else x.astype(np.float64)
    return round_float(v, dtype, mode)


def int_to_int(x, to: DType) -> np.ndarray:
    """Integer (or bool) values `x` saturated to integer type `to` (module docstring), as int64."""
    return saturate(np.asarray(x).astype(np.int64), to)
