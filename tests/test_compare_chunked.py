"""The chunked comparison of `opgen check` (opgen/check/compare.py, docs/design.md "Comparison in chunks") against
the straightforward whole-array float64 computation (tests/compare_reference.py): the same verdict, rule, reason,
note and counts, and the same metrics to within float64 summation order, on small arrays and on arrays spanning
several chunks, for every class of element the comparison tells apart (overflow, unwritten poison, stray NaN,
golden NaN/inf, cancellation, small values, rounded intermediates, conditioning)."""

import math

import ml_dtypes
import numpy as np
import pytest

from compare_reference import reference_compare
from opgen.check import compare
from opgen.check.compare import compare_output

NP = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "int32": np.int32}


def _poison(a, idx):
    bits = a.view({2: np.uint16, 4: np.uint32}[a.dtype.itemsize])
    bits.reshape(-1)[idx] = np.iinfo(bits.dtype).max
    return a


@np.errstate(over="ignore", invalid="ignore")   # the overflow and NaN cases are made by casting on purpose
def _case(kind, dtype, n, rng):
    """(actual, exact, device, rounded) of one class of comparison."""
    t = NP[dtype]
    g = rng.standard_normal(n)
    if kind == "cancel":              # a few elements cancel to near zero: the floored rule
        g[:: 7] *= 1e-9
    if kind == "small":
        g = g * 2.0 ** -9
        g[::3] *= 300
    if kind == "tiny":                # every element small: the small-value cap at the output's scale
        g = g * 1e-6
    d = g.astype(t)
    a = d.copy()
    if kind == "noisy":               # the kernel misses the criteria where the device meets them
        a = (g * (1 + 0.05 * rng.standard_normal(n))).astype(t)
    if kind == "cond":                # device fails too; the kernel as accurate (conditioning)
        g = g * 1e-3 + 1e-12
        d = (g + 1e-4 * rng.standard_normal(n)).astype(t)
        a = d.copy()
        a[::5] = (np.asarray(a[::5], np.float64) * (1 + 2.0 ** -9)).astype(t)
    if kind == "cond_worse":
        g = g * 1e-3
        d = (g + 1e-4 * rng.standard_normal(n)).astype(t)
        a = (np.asarray(d, np.float64) + 1e-2 * rng.standard_normal(n)).astype(t)
    if kind == "overflow":            # overflow to inf in the dtype as in the device interpretation
        big = float(compare.FLOAT_MAX[dtype]) * 4
        g[:: 11] = big
        g[5:: 23] = -big
        d = g.astype(t)
        a = d.copy()
    if kind == "poison":
        a = _poison(a, rng.choice(n, 3, replace=False))
    if kind == "stray":
        a[rng.choice(n, 4, replace=False)] = np.nan
        a[rng.choice(n, 2, replace=False)] = np.inf
    if kind == "devlimit":            # non-finite exactly as the device interpretation, golden finite
        k = rng.choice(n, 3, replace=False)
        d[k] = np.nan
        a[k] = np.nan
    if kind == "golden_special":
        k = rng.choice(n, 5, replace=False)
        g[k] = [np.nan, np.inf, -np.inf, np.nan, np.inf]
        d = g.astype(t)
        a = d.copy()
    if kind == "golden_special_bad":
        k = rng.choice(n, 4, replace=False)
        g[k] = np.nan
        d = g.astype(t)
        a = d.copy()
        a[k[0]] = 1.0
        _poison(a, k[1])
    if kind == "all_special":
        g = np.full(n, np.inf)
        d = g.astype(t)
        a = d.copy()
    if kind == "rounded":             # an absolute-type error: only the rounded-intermediate rule passes it
        th = compare.THRESHOLD[dtype]
        d = (g + 0.2 * th * rng.standard_normal(n)).astype(t)
        a = (g + 0.2 * th * rng.standard_normal(n)).astype(t)
    if kind == "dev_inf":             # the device overflows where the kernel does not
        big = float(compare.FLOAT_MAX[dtype])
        g[::13] = big * 1.5
        d = g.astype(t)
        a = d.copy()
        a[::13] = t(big) if dtype != "bfloat16" else ml_dtypes.bfloat16(big)
    if dtype == "int32":
        g = np.round(g * 100)
        d = g.astype(np.int32)
        a = d.copy()
        if kind == "noisy":
            a[::9] += 1
    return a, g, d, kind == "rounded"


def _same(x, y):
    if isinstance(x, float) or isinstance(y, float):
        if math.isnan(x) or math.isnan(y):
            return math.isnan(x) and math.isnan(y)
        return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-300)
    return x == y


def _assert_same(got, ref):
    for f in ("name", "dtype", "passed", "rule", "reason", "note", "golden_nonfinite", "overflow", "unwritten"):
        assert getattr(got, f) == getattr(ref, f), (f, getattr(got, f), getattr(ref, f))
    for f in ("rel_l2", "rel_linf", "mere", "mare"):
        assert _same(getattr(got, f), getattr(ref, f)), (f, getattr(got, f), getattr(ref, f))
    assert got.device.keys() == ref.device.keys()
    for k in ref.device:
        assert _same(got.device[k], ref.device[k]), (k, got.device[k], ref.device[k])


KINDS = ["clean", "cancel", "small", "tiny", "noisy", "cond", "cond_worse", "overflow", "poison", "stray", "devlimit",
         "golden_special", "golden_special_bad", "all_special", "rounded", "dev_inf"]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n,chunk", [(37, None), (1000, 64), (4099, 512)])
def test_chunked_equals_whole_array(kind, dtype, n, chunk):
    rng = np.random.default_rng(hash((kind, dtype, n)) % 2 ** 32)
    a, g, d, rounded = _case(kind, dtype, n, rng)
    ref = reference_compare("y", a, g, d, dtype, rounded)
    got = compare_output("y", a, g, d, dtype, rounded, chunk=chunk)
    _assert_same(got, ref)


@pytest.mark.parametrize("kind", ["clean", "noisy", "golden_special"])
def test_integer_outputs(kind):
    rng = np.random.default_rng(3)
    a, g, d, _ = _case(kind, "int32", 3001, rng)
    _assert_same(compare_output("i", a, g, d, "int32", chunk=256), reference_compare("i", a, g, d, "int32"))


def test_the_cases_reach_every_rule():
    """The cases above exercise each verdict, so the equality is tested where it matters (a test that can fail)."""
    rules, failed = set(), 0
    for kind in KINDS:
        for dtype in ("float32", "float16", "bfloat16"):
            rng = np.random.default_rng(hash((kind, dtype, 4099)) % 2 ** 32)
            a, g, d, rounded = _case(kind, dtype, 4099, rng)
            r = compare_output("y", a, g, d, dtype, rounded, chunk=512)
            rules.add(r.rule)
            failed += not r.passed
    assert {"plain", "floored", "small-value", "conditioning", "rounded-intermediate", "special-values"} <= rules, rules
    assert failed >= 5


def test_empty_and_shape_errors():
    e = np.zeros((0, 4), np.float32)
    _assert_same(compare_output("y", e, e.astype(np.float64), e, "float32"),
                 reference_compare("y", e, e.astype(np.float64), e, "float32"))
    with pytest.raises(ValueError):
        compare_output("y", np.zeros(3, np.float32), np.zeros(4), np.zeros(3, np.float32), "float32")
    with pytest.raises(ValueError, match="device shape"):
        compare_output("y", np.zeros(3, np.float32), np.zeros(3), np.zeros(4, np.float32), "float32")


def test_memory_is_a_few_chunks():
    """No full-array float64 temporary: the peak of Python allocations during the comparison of a 2^22-element bf16
    output stays below half of one float64 copy of it (tracemalloc counts numpy's buffers), and within a few dozen
    chunks' worth."""
    import tracemalloc

    n = 1 << 22
    rng = np.random.default_rng(0)
    g = rng.standard_normal(n)
    d = g.astype(ml_dtypes.bfloat16)
    a = d.copy()
    tracemalloc.start()
    try:
        r = compare_output("y", a, g, d, "bfloat16")
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.passed
    assert peak < n * 8 / 2 and peak < 24 * compare.CHUNK * 8, peak


def test_integer_verdict_takes_the_float64_value_at_a_boundary():
    """An int8 output off by one from device mode passes where it equals the exact (float64) interpretation (the
    value before the cast sits on a rounding boundary the kernel's fp32 sums fall on the other side of); an element
    equal to neither fails, as a wrong tie rule does (both interpretations round half to even). Chunked and whole-
    array verdicts agree."""
    v = np.array([0.4, 2.5, 3.5, -2.5, 67.4999999, 10.0, -7.2] * 100)
    g = np.rint(v)                                   # exact mode: float64 value, rint
    d = g.copy()
    d[4::7] = 68                                     # device mode: its fp32 sum landed above the tie
    cases = {
        "device": d.copy(),
        "float64": g.copy(),                         # the kernel's sum on float64's side of the tie
        "fail": np.sign(v) * np.floor(np.abs(v) + 0.5),   # half away from zero: 3 vs 2 at 2.5, neither's value
    }
    for rule, a in cases.items():
        a = a.astype(np.int8)
        got = compare_output("y", a, g, d.astype(np.int8), "int8", chunk=64)
        _assert_same(got, reference_compare("y", a, g, d.astype(np.int8), "int8"))
        assert got.passed == (rule != "fail") and got.rule == ("" if rule == "fail" else rule), (rule, got.rule)
        if rule == "fail":
            assert got.reason == "200 elements differ from both device mode and exact mode (300 from device mode)", \
                got.reason
