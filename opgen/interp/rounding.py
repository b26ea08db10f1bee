"""Rounding of fp32 values to the narrow float types, in the two modes AscendC's Cast uses on outputs:

- `rint`  (CAST_RINT): round to nearest, ties to even — NumPy's / ml_dtypes' astype.
- `round` (CAST_ROUND): round to nearest, ties away from zero (docs/reference/ascendc.md, Cast round modes).

Inputs are float32 (device mode) or float64 arrays; the result has the target dtype.
"""

from __future__ import annotations

import numpy as np

from opgen.ir.dtypes import DType


def round_to(x: np.ndarray, dtype: DType, mode: str) -> np.ndarray:
    """Round float32 values `x` to `dtype` (f32/f16/bf16) with `mode` in {"rint", "round", "none"}.

    "none" is only exact for widening; for a narrowing cast it behaves as "rint".
    Raises ValueError for a non-float target, an unknown mode, or non-float32 input (rounding
    float64 would round twice, via float32; device mode computes in float32).
    """
    if not dtype.is_float:
        raise ValueError(f"round_to: {dtype!r} is not a float type")
    if mode not in ("rint", "round", "none"):
        raise ValueError(f"round_to: unknown round mode {mode!r}")
    x = np.asarray(x)
    if dtype == DType.f32:
        return x.astype(np.float32)
    if x.dtype != np.float32:
        raise ValueError(f"round_to: expects float32 values, got {x.dtype}")
    if mode != "round":
        return x.astype(dtype.np)
    if dtype == DType.bf16:
        # sign-magnitude: adding half an ulp of bf16 to the magnitude bits and truncating rounds
        # half away from zero; NaNs keep a NaN payload, overflow goes to inf as it should.
        bits = x.view(np.uint32)
        nan = np.isnan(x)
        r = ((bits + np.uint32(0x8000)) & np.uint32(0xFFFF0000)).view(np.float32)
        if nan.any():
            r = np.where(nan, x, r)
        return r.astype(dtype.np)  # exact: r already holds a bf16 value
    # f16: start from the ties-to-even result and move ties away from zero
    rne = x.astype(np.float16)
    x64 = x.astype(np.float64)
    r64 = rne.astype(np.float64)
    away = np.nextafter(rne, np.copysign(np.float16(np.inf), rne)).astype(np.float64)
    tie = (np.abs(x64 - r64) == np.abs(away - x64)) & (np.abs(x64) > np.abs(r64)) & np.isfinite(r64)
    if tie.any():
        rne = np.where(tie, away.astype(np.float16), rne)
    return rne
