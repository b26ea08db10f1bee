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


# Two refinements of the plain rule for outputs whose exact values cancel to near zero (a LayerNorm
# backward projection, a RoPE sum, an S-sum landing near 0). The plain rule divides by |golden| + 1e-7, so
# on such an element the unavoidable fp32 compute noise of any implementation (~2^-22 of the output's
# scale) alone exceeds 10 Th. Measurements are in the docstrings of the tests that use them.

SMALL_VALUE = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-14}
CANCEL_FLOOR = 2.0**-12


def assert_cann_precision_small_values(actual, golden, dtype: str, what: str = "") -> None:
    """CANN's commercial standard split (reference/ada_layer_norm.md §5.5): elements with |golden| below
    the small-value boundary (2^-11 fp16, 2^-8 bf16, 2^-14 fp32) are judged by the mixed-tolerance bound
    |a - g| <= Th (1 + |g|); all others by the plain MERE/MARE rule."""
    a = np.asarray(actual, np.float64)
    g = np.asarray(golden, np.float64)
    assert a.shape == g.shape, f"{what}: shape {a.shape} != {g.shape}"
    assert np.isfinite(a).all(), f"{what}: non-finite values"
    small = np.abs(g) < SMALL_VALUE[dtype]
    assert_cann_precision(a[~small], g[~small], dtype, what)
    err = np.abs(a[small] - g[small])
    th = THRESHOLD[dtype]
    assert (err <= th * (1 + np.abs(g[small]))).all(), f"{what}: small-value abs error {err.max():.3g} > {th:.3g}"


def assert_cann_precision_floored(actual, golden, dtype: str, what: str = "") -> None:
    """The plain rule with each denominator floored at 2^-12 of the output's largest |golden|: elements that
    cancel below that still need |error| < 10 Th 2^-12 max|golden|; 2^-12 is where fp32 noise at the output's
    scale reaches the fp32 MARE bound."""
    th = THRESHOLD[dtype]
    a = np.asarray(actual, np.float64)
    g = np.asarray(golden, np.float64)
    assert a.shape == g.shape, (what, a.shape, g.shape)
    assert np.isfinite(a).all(), f"{what}: non-finite values"
    if a.size == 0:
        return
    floor = CANCEL_FLOOR * float(np.max(np.abs(g)))
    rel = np.abs(a - g) / (np.maximum(np.abs(g), floor) + 1e-7)
    mere_f, mare_f = float(rel.mean()), float(rel.max())
    mere, mare = mere_mare(a, g)
    assert mere_f < th and mare_f < 10 * th, (
        f"{what}: floored MERE {mere_f:.3g} (< {th:.3g}), floored MARE {mare_f:.3g} (< {10 * th:.3g}); "
        f"plain MERE {mere:.3g}, MARE {mare:.3g}")
