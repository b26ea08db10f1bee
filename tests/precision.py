"""CANN's precision criteria (reference/ada_layer_norm.md §5.5, ecosystem standard):
relative error per element = |actual - golden| / (|golden| + 1e-7); MERE = mean, MARE = max;
pass when MERE < Th and MARE < 10 * Th, Th = 2^-13 (fp32), 2^-10 (fp16), 2^-7 (bf16)."""

from __future__ import annotations

import numpy as np

THRESHOLD = {"float32": 2.0**-13, "float16": 2.0**-10, "bfloat16": 2.0**-7}


def mere_mare(actual, golden) -> tuple[float, float]:
    """(MERE, MARE) of `actual` against `golden`, both converted to float64."""
    a = np.asarray(actual, dtype=np.float64)
    g = np.asarray(golden, dtype=np.float64)
    if a.shape != g.shape:
        raise AssertionError(f"shape {a.shape} != golden shape {g.shape}")
    if a.size == 0:
        return 0.0, 0.0
    rel = np.abs(a - g) / (np.abs(g) + 1e-7)
    return float(rel.mean()), float(rel.max())


def assert_cann_precision(actual, golden, dtype: str, what: str = "") -> None:
    """Assert MERE < Th and MARE < 10 Th for `dtype` ("float32", "float16", "bfloat16")."""
    th = THRESHOLD[dtype]
    mere, mare = mere_mare(actual, golden)
    assert np.isfinite(np.asarray(actual, dtype=np.float64)).all(), f"{what}: non-finite values"
    assert mere < th and mare < 10 * th, f"{what}: MERE {mere:.3g} (< {th:.3g}), MARE {mare:.3g} (< {10 * th:.3g})"
