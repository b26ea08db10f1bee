"""Tests of opgen.interp.rounding.round_to and of the interpreter's `cast` kernel.

Reference (independent of NumPy's float16 and of ml_dtypes): every finite non-negative fp16 / bf16
value is decoded from its bit pattern with integer arithmetic (sign | exponent | mantissa, IEEE-754
binary16 and bfloat16 = the top 16 bits of binary32), giving a sorted float64 table; one extra
"virtual" entry 2^(emax+1) stands for overflow to inf. For a float32 x the two neighbouring table
entries lo <= |x| < hi are found with searchsorted and the nearer one is taken; on an exact tie
(|x| == (lo + hi) / 2, computed exactly in float64) "rint" takes the even code (CAST_RINT,
ties-to-even) and "round" the larger magnitude (CAST_ROUND, ties away from zero; docs/reference/ascendc.md
Cast round modes). The sign is re-applied with copysign, NaN stays NaN.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from opgen.interp.kernels import KERNELS, Ctx  # noqa: E402
from opgen.interp.rounding import round_float, round_to  # noqa: E402
from opgen.interp.run import run_graph  # noqa: E402
from opgen.ir.core import Graph, Node, Param, TensorType, Value  # noqa: E402
from opgen.ir.dims import Sym  # noqa: E402
from opgen.ir.dtypes import DType, DTypeVar  # noqa: E402
from opgen.ir.verify import verify  # noqa: E402

# ---------------------------------------------------------------------------------------------
# independent reference
# ---------------------------------------------------------------------------------------------

# (exponent bits, mantissa bits) of the two narrow formats
_FORMATS = {DType.f16: (5, 10), DType.bf16: (8, 7)}
_TABLES: dict = {}


def _table(dt: DType) -> np.ndarray:
    """float64 values of codes 0 .. inf-code of `dt` (non-negative); the inf code holds 2^(emax+1)."""
    if dt not in _TABLES:
        ebits, mbits = _FORMATS[dt]
        bias = (1 << (ebits - 1)) - 1
        inf_code = ((1 << ebits) - 1) << mbits
        codes = np.arange(inf_code + 1, dtype=np.int64)
        e = codes >> mbits
        f = codes & ((1 << mbits) - 1)
        # subnormal (e == 0): f * 2^(1 - bias - mbits); normal: (2^mbits + f) * 2^(e - bias - mbits).
        # The inf code decodes as 2^(emax + 1) with this formula, i.e. the next binade's first value.
        sig = np.where(e == 0, f, f + (1 << mbits)).astype(np.float64)
        exp = np.where(e == 0, 1, e) - bias - mbits
        _TABLES[dt] = np.ldexp(sig, exp.astype(np.int32))
    return _TABLES[dt]


def ref_round(x, dt: DType, mode: str) -> np.ndarray:
    """Independent rounding of float32 (or exactly taken float64) `x` to `dt` as float64 values.

    mode "rint": nearest, ties to the even code; "round": nearest, ties to the larger magnitude (inf on overflow);
    the directed modes on the magnitude: "trunc" the lower neighbour, "floor" / "ceil" the lower one for a
    positive / negative x and the upper one (inf beyond the largest finite value) otherwise; "odd" an inexact
    value takes the neighbour with the odd code, never the inf code."""
    x = np.asarray(x)
    if x.dtype != np.float64:
        x = x.astype(np.float32)   # float64 values are taken exactly (the table's midpoints are exact in float64)
    vals = _table(dt)
    with np.errstate(invalid="ignore"):
        ax = np.abs(x.astype(np.float64))
    finite = np.isfinite(ax)
    axf = np.where(finite, ax, 0.0)
    i = np.searchsorted(vals, axf, side="right") - 1  # vals[i] <= |x|
    i = np.clip(i, 0, len(vals) - 2)
    lo, hi = vals[i], vals[i + 1]
    mid = (lo + hi) / 2  # exact: lo, hi have <= 11 significant bits and close exponents
    if mode in ("trunc", "floor", "ceil", "odd"):
        exact = axf == lo
        neg = np.signbit(x)
        if mode == "trunc":
            up = np.zeros(x.shape, dtype=bool)
        elif mode == "odd":
            up = (i % 2 == 0) & (i + 1 < len(vals) - 1)
        else:
            up = neg if mode == "floor" else ~neg
        code = np.where(exact | ~up, i, i + 1)
        mag = np.where(code == len(vals) - 1, np.inf, vals[code])
        mag = np.where(finite, mag, ax)
        with np.errstate(invalid="ignore"):
            return np.copysign(mag, x.astype(np.float64))
    if mode == "round":
        tie_hi = np.ones(x.shape, dtype=bool)
    else:
        tie_hi = (i + 1) % 2 == 0
    pick_hi = (axf > mid) | ((axf == mid) & tie_hi)
    code = np.where(pick_hi, i + 1, i)
    mag = np.where(code == len(vals) - 1, np.inf, vals[code])
    mag = np.where(finite, mag, ax)  # inf stays inf, nan stays nan
    with np.errstate(invalid="ignore"):
        return np.copysign(mag, x.astype(np.float64))


def _assert_same(got, want, x):
    """got (narrow array) equals want (float64) value-for-value, with equal sign bits; NaN matches NaN."""
    g = np.asarray(got).astype(np.float64)
    nan_g, nan_w = np.isnan(g), np.isnan(want)
    bad = (nan_g != nan_w) | (~nan_w & ((g != want) | (np.signbit(g) != np.signbit(want))))
    if bad.any():
        k = np.flatnonzero(bad.ravel())[:8]
        xs = np.asarray(x, dtype=np.float32).ravel()
        rows = [f"x={xs[j]!r} (bits {xs[j:j+1].view(np.uint32)[0]:#010x}) got {g.ravel()[j]!r} want {want.ravel()[j]!r}"
                for j in k]
        raise AssertionError(f"{int(bad.sum())} mismatches, e.g.\n" + "\n".join(rows))


def _check(x, dt, mode):
    x = np.asarray(x, dtype=np.float32)
    got = round_to(x, dt, mode)
    assert got.dtype == dt.np
    _assert_same(got, ref_round(x, dt, mode), x)


def _with_neighbours(x32: np.ndarray) -> np.ndarray:
    """x, the float32 values one ulp below and above, and all their negatives."""
    x32 = np.asarray(x32, dtype=np.float32)
    up = np.nextafter(x32, np.float32(np.inf))
    down = np.nextafter(x32, np.float32(-np.inf))
    a = np.concatenate([x32, up, down])
    return np.concatenate([a, -a])


# NaN / out-of-range inputs make NumPy casts inside round_to warn ("invalid value", "overflow"): expected.
pytestmark = [
    pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),
]

MODES = ["rint", "round"]
NARROW = [DType.f16, DType.bf16]


# ---------------------------------------------------------------------------------------------
# self-checks of the reference (against hand-worked values, not against opgen)
# ---------------------------------------------------------------------------------------------

def test_reference_tables_decode_known_values():
    """The bit-decoded tables hold the IEEE binary16 / bfloat16 landmarks (min subnormal, 1, max finite)."""
    f16, bf = _table(DType.f16), _table(DType.bf16)
    assert f16[1] == 2.0 ** -24 and f16[0x0400] == 2.0 ** -14 and f16[0x3C00] == 1.0
    assert f16[0x7BFF] == 65504.0 and f16[0x7C00] == 65536.0
    assert bf[1] == 2.0 ** -133 and bf[0x0080] == 2.0 ** -126 and bf[0x3F80] == 1.0
    assert bf[0x7F7F] == (2 - 2.0 ** -7) * 2.0 ** 127 and bf[0x7F80] == 2.0 ** 128
    assert np.all(np.diff(f16) > 0) and np.all(np.diff(bf) > 0)


def test_reference_hand_worked_ties():
    """Hand-worked ties: 1 + 2^-11 (fp16 tie between 1 and 1+2^-10), 2.5 * 2^-24, 65520, bf16 1 + 2^-8."""
    x = np.array([1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 2.5 * 2.0 ** -24, 65520.0, -0.5 * 2.0 ** -24], np.float32)
    assert list(ref_round(x, DType.f16, "rint")) == [1.0, 1 + 2 * 2.0 ** -10, 2 * 2.0 ** -24, np.inf, -0.0]
    assert list(ref_round(x, DType.f16, "round")) == [1 + 2.0 ** -10, 1 + 2 * 2.0 ** -10, 3 * 2.0 ** -24, np.inf,
                                                      -(2.0 ** -24)]
    y = np.array([1 + 2.0 ** -8, -(1 + 2.0 ** -8), 1 + 3 * 2.0 ** -8], np.float32)
    assert list(ref_round(y, DType.bf16, "rint")) == [1.0, -1.0, 1 + 2 * 2.0 ** -7]
    assert list(ref_round(y, DType.bf16, "round")) == [1 + 2.0 ** -7, -(1 + 2.0 ** -7), 1 + 2 * 2.0 ** -7]
    assert np.signbit(ref_round(np.float32(-1e-30), DType.f16, "round"))


# ---------------------------------------------------------------------------------------------
# round_to against the reference
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_bf16_all_midpoints(mode):
    """Every float32 exactly halfway between consecutive bf16 values (all 2^15 codes, both signs), and
    their float32 neighbours, rounds like the reference (ties-even for rint, ties-away for round)."""
    codes = np.arange(0, 0x7F80, dtype=np.uint32)  # lower neighbour: every finite non-negative bf16
    mids = ((codes << 16) | 0x8000).view(np.float32)
    # the midpoints really are halfway (float64 check, independent of the bit trick)
    t = _table(DType.bf16)
    assert np.array_equal(mids.astype(np.float64), (t[:-1] + t[1:]) / 2)
    _check(_with_neighbours(mids), DType.bf16, mode)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_bf16_selected_binades_dense(mode):
    """Every 7th float32 value of a few whole binades (subnormal, around 1, the top binade incl. overflow) round
    like the reference to bf16."""
    parts = []
    for e in (0, 1, 127, 254):  # subnormal, smallest normal, [1, 2), top binade (overflow at the last tie)
        parts.append(((np.uint32(e) << 23) | np.arange(1 << 23, dtype=np.uint32)[::7]).view(np.float32))
    x = np.concatenate(parts)
    _check(np.concatenate([x, -x]), DType.bf16, mode)


@pytest.mark.parametrize("mode", MODES)
def test_f16_all_midpoints(mode):
    """Every midpoint between consecutive finite fp16 values (and 65520, between max finite and 2^16),
    exactly representable in float32, plus its float32 neighbours, both signs, rounds like the reference."""
    t = _table(DType.f16)
    mids64 = (t[:-1] + t[1:]) / 2
    mids = mids64.astype(np.float32)
    assert np.array_equal(mids.astype(np.float64), mids64)  # fp16 midpoints are exact in float32
    _check(_with_neighbours(mids), DType.f16, mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dt", NARROW, ids=lambda d: d.value)
def test_random_bit_patterns(dt, mode):
    """200k uniformly random float32 bit patterns (normals, subnormals, inf, NaN, both signs) round
    like the reference."""
    rng = np.random.default_rng(1234 + (dt == DType.bf16) + 2 * (mode == "round"))
    x = rng.integers(0, 2 ** 32, size=200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    _check(x, dt, mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dt", NARROW, ids=lambda d: d.value)
def test_random_values_in_range(dt, mode):
    """Log-uniform random magnitudes across the target's whole range (incl. subnormals), random signs."""
    rng = np.random.default_rng(99 + (dt == DType.bf16) + 2 * (mode == "round"))
    lo, hi = (-27, 17) if dt == DType.f16 else (-135, 128)
    mag = np.exp2(rng.uniform(lo, hi, size=100_000))
    x = (mag * rng.choice([-1.0, 1.0], size=mag.size)).astype(np.float32)
    _check(x, dt, mode)


@pytest.mark.parametrize("mode", MODES)
def test_f16_subnormals_dense(mode):
    """All multiples of 2^-30 in [0, 2^-13] (every fp16 subnormal, its midpoints and quarter points)
    round like the reference, both signs; 2^-25 goes to 0 (rint) or 2^-24 (round)."""
    x = (np.arange(0, 1 << 17, dtype=np.float64) * 2.0 ** -30).astype(np.float32)
    _check(np.concatenate([x, -x]), DType.f16, mode)
    half_min = round_to(np.array([2.0 ** -25, -(2.0 ** -25), 3 * 2.0 ** -25], np.float32), DType.f16, mode)
    want = [0.0, -0.0, 2 * 2.0 ** -24] if mode == "rint" else [2.0 ** -24, -(2.0 ** -24), 2 * 2.0 ** -24]
    assert list(half_min.astype(np.float64)) == want


@pytest.mark.parametrize("mode", MODES)
def test_f16_overflow_region(mode):
    """Every float32 in [65504, 65536] and beyond: below 65520 -> 65504, from 65520 (the tie) on -> inf
    in both modes (RNE picks the even code 0x7C00 = inf); negatives mirror."""
    x = np.arange(65504 * 256, 65536 * 256 + 1, dtype=np.float64) / 256
    x = np.concatenate([x, [1e5, 3.4e38, np.inf]]).astype(np.float32)
    _check(np.concatenate([x, -x]), DType.f16, mode)
    r = round_to(np.array([65519.996, 65520.0, -65520.0], np.float32), DType.f16, mode).astype(np.float64)
    assert list(r) == [65504.0, np.inf, -np.inf]


@pytest.mark.parametrize("mode", MODES)
def test_bf16_overflow_region(mode):
    """All float32 in the top bf16 binade's last ulp (0x7F7F0000..0x7F7FFFFF), FLT_MAX and inf:
    the tie 0x7F7F8000 and above -> inf; below -> bf16 max."""
    x = (np.uint32(0x7F7F0000) + np.arange(1 << 16, dtype=np.uint32)).view(np.float32)
    x = np.concatenate([x, np.array([np.finfo(np.float32).max, np.inf], np.float32)])
    _check(np.concatenate([x, -x]), DType.bf16, mode)
    r = round_to(np.array([0x7F7F7FFF, 0x7F7F8000], np.uint32).view(np.float32), DType.bf16, mode)
    assert list(r.astype(np.float64)) == [float(ml_dtypes.finfo(ml_dtypes.bfloat16).max), np.inf]


@pytest.mark.parametrize("mode", MODES + ["none"])
@pytest.mark.parametrize("dt", NARROW, ids=lambda d: d.value)
def test_nan_stays_nan(dt, mode):
    """Quiet, signalling-pattern and negative NaNs (payload only in the low bits too) stay NaN."""
    bits = np.array([0x7FC00000, 0x7F800001, 0x7F800100, 0x7FBFFFFF, 0xFFC00000, 0xFF800001, 0x7FFFFFFF],
                    dtype=np.uint32)
    r = round_to(bits.view(np.float32), dt, mode)
    assert np.isnan(r.astype(np.float64)).all()


@pytest.mark.parametrize("mode", MODES + ["none"])
@pytest.mark.parametrize("dt", NARROW, ids=lambda d: d.value)
def test_signed_zero_and_inf(dt, mode):
    """+0 -> +0, -0 -> -0 (sign bit kept), +-inf -> +-inf, tiny negatives -> -0."""
    x = np.array([0.0, -0.0, np.inf, -np.inf, -1e-45], np.float32)
    r = round_to(x, dt, mode).astype(np.float64)
    assert list(r[:4]) == [0.0, 0.0, np.inf, -np.inf]
    assert list(np.signbit(r)) == [False, True, False, True, True]


@pytest.mark.parametrize("dt", NARROW, ids=lambda d: d.value)
def test_none_is_rint_when_narrowing(dt):
    """Mode "none" on a narrowing cast equals ties-to-even (documented in round_to)."""
    t = _table(dt)
    x = ((t[:-1] + t[1:]) / 2).astype(np.float32)
    _check(np.concatenate([x, -x]), dt, "rint")
    _assert_same(round_to(x, dt, "none"), ref_round(x, dt, "rint"), x)


def test_f32_target_and_errors():
    """f32 target is the plain float32 value; an int target or unknown mode raises ValueError."""
    x = np.array([1.0000001, -3.5, 1e-40], np.float64)
    r = round_to(x, DType.f32, "round")
    assert r.dtype == np.float32 and np.array_equal(r, x.astype(np.float32))
    with pytest.raises(ValueError, match="not a float"):
        round_to(x, DType.i32, "rint")
    with pytest.raises(ValueError, match="unknown round mode"):
        round_to(x, DType.f16, "nearest")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dt", NARROW, ids=lambda d: d.value)
def test_accepts_16bit_input_unchanged(dt, mode):
    """Values already in the target type (every finite code, both signs) pass through unchanged."""
    t = _table(dt)[:-1]
    x = np.concatenate([t, -t]).astype(np.float32)  # exact: narrow values fit float32
    r = round_to(x, dt, mode).astype(np.float64)
    assert np.array_equal(r, x.astype(np.float64))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dt", NARROW, ids=lambda d: d.value)
def test_float64_input_is_rejected(dt, mode):
    """round_to narrows device-mode (float32) values only; float64 input would be rounded twice
    (via float32) and is refused with a ValueError instead of a silently double-rounded result."""
    ebits, mbits = _FORMATS[dt]
    half_ulp = 2.0 ** -(mbits + 1)  # at 1.0
    x = np.array([1 + half_ulp - 2.0 ** -40])
    with pytest.raises(ValueError, match="float32"):
        round_to(x, dt, mode)


# ---------------------------------------------------------------------------------------------
# the cast kernel and a cast graph through the interpreter
# ---------------------------------------------------------------------------------------------

def _tie_rich_inputs(dt):
    t = _table(dt)
    mids = ((t[:-1] + t[1:]) / 2).astype(np.float32)
    rng = np.random.default_rng(5)
    x = np.concatenate([mids[::97], rng.standard_normal(2000).astype(np.float32) * 3])
    return np.concatenate([x, -x, np.array([0.0, -0.0, np.inf, np.nan], np.float32)])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dt", NARROW, ids=lambda d: d.value)
def test_cast_kernel_device_mode(dt, mode):
    """KERNELS['cast'] in device mode with `to` a dtype variable bound to f16/bf16 rounds like the
    reference and returns the narrow dtype; exact mode returns the float64 values unchanged."""
    x = _tie_rich_inputs(dt)
    attrs = {"to": DTypeVar("T"), "round": mode}
    ctx = Ctx("device", {}, {"T": dt})
    got = KERNELS["cast"](ctx, x, attrs, None)
    assert got.dtype == dt.np
    _assert_same(got, ref_round(x, dt, mode), x)
    ex = KERNELS["cast"](Ctx("exact", {}, {"T": dt}), x.astype(np.float64), attrs, None)
    assert ex.dtype == np.float64
    np.testing.assert_array_equal(ex, x.astype(np.float64))


def test_cast_kernel_to_int_and_bool():
    """Float -> int casts round with their mode (AscendC's Cast: 2.7 -> 3 under rint, -2.5 -> -2 ties to even,
    trunc toward zero); -> bool is x != 0 (NaN counts as true, as in C)."""
    x = np.array([2.7, -2.7, -2.5, 0.0, -0.0, 7.0], np.float32)
    ctx = Ctx("device", {}, {})
    r = KERNELS["cast"](ctx, x, {"to": DType.i32, "round": "rint"}, None)
    assert list(r) == [3, -3, -2, 0, 0, 7]
    r = KERNELS["cast"](ctx, x, {"to": DType.i32, "round": "trunc"}, None)
    assert list(r) == [2, -2, -2, 0, 0, 7]
    b = KERNELS["cast"](ctx, np.array([0.0, -0.0, 1e-30, np.nan], np.float32), {"to": DType.bool, "round": "none"},
                        None)
    assert list(b) == [False, False, True, True]


DIRECTED = ["floor", "ceil", "trunc", "odd"]


@pytest.mark.parametrize("mode", DIRECTED)
@pytest.mark.parametrize("dt", NARROW, ids=lambda d: d.value)
def test_directed_modes(dt, mode):
    """CAST_FLOOR / CEIL / TRUNC / ODD to f16 and bf16 on every midpoint and its float32 neighbours, every value of
    the type itself, random bit patterns and the overflow region, against the bit-decoded reference."""
    t = _table(dt)
    mids = ((t[:-1] + t[1:]) / 2).astype(np.float32)
    rng = np.random.default_rng(11)
    bits = rng.integers(0, 2 ** 32, size=100_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    top = np.float32(t[-2]) * np.float32(1.001)
    x = np.concatenate([_with_neighbours(mids[::3]), t[:-1].astype(np.float32), -t[:-1].astype(np.float32), bits,
                        np.array([top, -top, np.inf, -np.inf, np.nan, 0.0, -0.0], np.float32)])
    _check(x, dt, mode)


@pytest.mark.parametrize("dt", NARROW, ids=lambda d: d.value)
def test_cast_graph_through_run_graph(dt):
    """A verified 4-node graph (cast to T with round and with rint, then quantize back to f32) run by
    run_graph in device mode gives the reference roundings; in exact mode every cast is the identity."""
    N = Sym("N")
    f32 = TensorType(DType.f32, (N,))
    tt = TensorType(DTypeVar("T"), (N,))
    g = Graph(
        "CastProbe",
        (Param(Value("x", f32)),),
        (
            Node("cast", ("x",), Value("a", tt), (("round", "round"), ("to", DTypeVar("T")))),
            Node("cast", ("x",), Value("b", tt), (("round", "rint"), ("to", DTypeVar("T")))),
            Node("cast", ("a",), Value("c", f32), (("round", "none"), ("to", DType.f32))),
        ),
        (("away", "a"), ("even", "b"), ("back", "c")),
    )
    verify(g)
    x = _tie_rich_inputs(dt)
    bound = SimpleNamespace(env={"N": x.size}, dtypes={"T": dt}, attrs={}, arrays={"x": x})
    out = run_graph(g, bound, "device")
    assert out["away"].dtype == dt.np and out["even"].dtype == dt.np and out["back"].dtype == np.float32
    _assert_same(out["away"], ref_round(x, dt, "round"), x)
    _assert_same(out["even"], ref_round(x, dt, "rint"), x)
    _assert_same(out["back"], ref_round(x, dt, "round"), x)
    ex = run_graph(g, bound, "exact")
    for k in ("away", "even", "back"):
        assert ex[k].dtype == np.float64
        np.testing.assert_array_equal(ex[k], x.astype(np.float64))


@pytest.mark.parametrize("mode", MODES + ["none"])
@pytest.mark.parametrize("dt", NARROW, ids=lambda d: d.value)
def test_general_path_on_float64_input(dt, mode):
    """round_float's neighbour path (taken for float64 input: integer sources, exact values) on float32 values held
    as float64 — every midpoint with its neighbours, random bit patterns — equals the reference ("none" as "rint")."""
    from opgen.interp.rounding import round_float

    t = _table(dt)
    mids = ((t[:-1] + t[1:]) / 2).astype(np.float32)
    rng = np.random.default_rng(13)
    bits = rng.integers(0, 2 ** 32, size=50_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([_with_neighbours(mids[::5]), bits, np.array([np.inf, -np.inf, np.nan], np.float32)])
    got = round_float(x.astype(np.float64), dt, mode)
    assert got.dtype == dt.np
    _assert_same(got, ref_round(x, dt, "rint" if mode == "none" else mode), x)


@pytest.mark.parametrize("mode", ["rint", "none"])
@pytest.mark.parametrize("dt", NARROW + [DType.f32], ids=lambda d: d.value)
def test_float64_values_round_once(dt, mode):
    """Genuine float64 values (the interpreter's exact mode) round to nearest even once: the double-rounding traps
    -- a midpoint of two neighbours of dt moved by a few float64 ulps, which a rounding through float32 would
    carry onto the midpoint and then to the even neighbour -- subnormals, overflow, and random values."""
    if dt == DType.f32:
        m32 = np.random.default_rng(3).integers(1, 2 ** 31 - 2 ** 23, 20_000, dtype=np.int64).astype(np.uint32)
        lo = m32.view(np.float32).astype(np.float64)
        mids = (lo + np.nextafter(m32.view(np.float32), np.float32(np.inf)).astype(np.float64)) / 2
    else:
        t = _table(dt)
        mids = (t[:-1] + t[1:]) / 2
    ulp = np.spacing(mids)
    x = np.concatenate([mids + k * ulp for k in (-3, -1, 0, 1, 3)])
    rng = np.random.default_rng(5)
    x = np.concatenate([x, -x, rng.standard_normal(20_000) * 10.0 ** rng.integers(-50, 39, 20_000),
                        [np.inf, -np.inf, np.nan, 1e300, -1e300, 1e-300, -1e-300, 0.0, -0.0]])
    got = round_float(x, dt, mode)
    assert got.dtype == dt.np
    if dt == DType.f32:    # the float32 table is too large for ref_round: Python's own correctly rounded struct pack
        import struct
        want = np.array([struct.unpack("f", struct.pack("f", v))[0] if abs(v) < 2.0 ** 128 - 2.0 ** 103 or not np.isfinite(v)
                         else np.copysign(np.inf, v) for v in x.tolist()])
    else:
        want = ref_round(x, dt, "rint")
    g = got.astype(np.float64)
    bad = ~((g == want) & (np.signbit(g) == np.signbit(want)) | (np.isnan(g) & np.isnan(want)))
    assert not bad.any(), [(float(v), float(a), float(b)) for v, a, b in zip(x[bad][:5], g[bad][:5], want[bad][:5])]


def _ties_away_exact(v: float) -> float:
    """Python's exact decimal rounding, half away from zero (independent of NumPy's float arithmetic)."""
    import decimal
    return float(decimal.Decimal(v).to_integral_value(rounding=decimal.ROUND_HALF_UP))


def test_round_integral_ties_away_is_exact():
    from opgen.interp.rounding import round_integral
    hard = [0.49999999999999994, -0.49999999999999994, 4503599627370497.0, -4503599627370497.0, 0.5, -0.5, 1.5,
            -2.5, 2.0 ** 53 + 2, 1e300, 0.0, 2.4999999999999996]
    rng = np.random.default_rng(7)
    rand = np.concatenate([rng.standard_normal(2000) * 10.0 ** rng.integers(-3, 17, 2000),
                           rng.integers(-10 ** 6, 10 ** 6, 500) + 0.5])
    v = np.array(hard + list(rand), dtype=np.float64)
    got = round_integral(v, "round")
    want = np.array([_ties_away_exact(float(x)) for x in v])
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(round_integral(np.array([np.inf, -np.inf]), "round"), [np.inf, -np.inf])
    assert np.isnan(round_integral(np.array([np.nan]), "round"))[0]


@pytest.mark.parametrize("mode", ["rint", "round"])
@pytest.mark.parametrize("dt", NARROW, ids=lambda d: d.value)
def test_transposed_inputs_round_like_contiguous_ones(dt, mode):
    """The fast paths fix ties / inexact values through a flat view: a transposed (non-contiguous) input, as the
    interpreter's permute gives, rounds exactly as its contiguous copy (review: it lost the fixes)."""
    t = _table(dt)
    mids = ((t[:-1] + t[1:]) / 2)[1000:1012]
    for x in (mids.astype(np.float32), mids + np.spacing(mids) * 3):
        m = x.reshape(3, 4).T
        got = round_float(m, dt, mode).astype(np.float64)
        want = round_float(np.ascontiguousarray(m), dt, mode).astype(np.float64)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, ref_round(np.ascontiguousarray(m), dt, mode))


def test_an_int_attribute_rounds_once_to_fp32():
    """An int attribute a rows kernel reads travels as its value rounded once to fp32, ties to even
    (opgen.tiling.emit.int_float_bits; docs/design.md "Rows family: integer attributes"). Values by the IEEE-754
    rule worked by hand: 2^24 + 1 is a tie between 2^24 and 2^24 + 2 (even mantissa: 2^24); 2^24 + 3 ties up to
    2^24 + 4; 2^53 + 2^29 + 1 lies above the midpoint of 2^53 and 2^53 + 2^30 and rounds up, where rounding
    through double first would make it the tie 2^53 + 2^29 and give 2^53."""
    from opgen.tiling.emit import int_float_bits

    def bits(sign, exp, frac):   # sign, unbiased exponent, 23-bit fraction
        return (sign << 31) | ((exp + 127) << 23) | frac

    assert int_float_bits(-100) == bits(1, 6, 0x480000)          # -1.5625 * 2^6
    assert int_float_bits(0) == 0
    assert int_float_bits(2 ** 24 + 1) == bits(0, 24, 0)
    assert int_float_bits(2 ** 24 + 3) == bits(0, 24, 2)
    assert int_float_bits(2 ** 53 + 2 ** 29 + 1) == bits(0, 53, 1)
    assert int_float_bits(-2 ** 63) == bits(1, 63, 0)
    assert int_float_bits(2 ** 63 - 1) == bits(0, 63, 0)         # rounds up to 2^63
