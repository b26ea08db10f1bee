"""Casts between floats and integers in the interpreter (opgen.interp.rounding, the `cast` kernel, run_graph's
integer outputs) against an independent reference.

Reference: every float is split exactly into a numerator / power-of-two denominator (float.as_integer_ratio) and
rounded to an integer with Python's integer arithmetic — floor by floor division, the remainder compared with
half the denominator for the nearest modes (ties to the even integer for rint, away from zero for round) — then
clipped to the target's range; NaN gives 0 and ±inf the range's ends (docs/reference/ascendc.md §1.12).
Inputs: every f16 and every bf16 bit pattern (exhaustive), and float32 values around every tie n + 1/2 for
|n| <= 300 with their float32 neighbours plus random bit patterns — the float32 -> int8 path goes through half
with CAST_ODD on the device, and this checks that it equals the direct rounding.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

from opgen.interp.kernels import KERNELS, Ctx
from opgen.interp.rounding import float_to_int, int_to_float, int_to_int
from opgen.interp.run import run_graph
from opgen.ir.core import Graph, Node, Param, TensorType, Value
from opgen.ir.dims import Sym
from opgen.ir.dtypes import DType

INT_MODES = ["rint", "round", "floor", "ceil", "trunc"]
INTS = [DType.i8, DType.u8, DType.i16, DType.i32, DType.i64]
_RANGE = {DType.i8: (-128, 127), DType.u8: (0, 255), DType.i16: (-32768, 32767),
          DType.i32: (-2 ** 31, 2 ** 31 - 1), DType.i64: (-2 ** 63, 2 ** 63 - 1)}


_BIG = 10 ** 30   # beyond every integer range: ±inf rounds to it, then saturates


def _ref_one(v: float, mode: str, lo: int = -_BIG, hi: int = _BIG) -> int:
    if math.isnan(v):
        return 0
    if math.isinf(v):
        return hi if v > 0 else lo
    p, q = v.as_integer_ratio()   # exact; q a power of two
    fl = p // q
    r = p - fl * q                # 0 <= r < q
    if mode == "floor":
        n = fl
    elif mode == "ceil":
        n = fl + (r > 0)
    elif mode == "trunc":
        n = fl if (v >= 0 or r == 0) else fl + 1
    else:
        if 2 * r < q:
            n = fl
        elif 2 * r > q:
            n = fl + 1
        elif mode == "rint":
            n = fl if fl % 2 == 0 else fl + 1
        else:   # round: ties away from zero
            n = fl + 1 if v > 0 else fl
    return min(max(n, lo), hi)


def ref_int(x, mode: str, to: DType) -> np.ndarray:
    """Independent integer rounding + saturation of float values `x` (module docstring)."""
    lo, hi = _RANGE[to]
    vals = np.asarray(x).astype(np.float64).ravel().tolist()   # exact: every f16/bf16/f32 value is a float64
    return np.array([_ref_one(v, mode, lo, hi) for v in vals], dtype=object)


def _same(got, want, x):
    got = np.asarray(got).ravel()
    bad = [k for k in range(len(want)) if int(got[k]) != want[k]]
    if bad:
        xs = np.asarray(x).astype(np.float64).ravel()
        rows = [f"x={xs[k]!r} got {int(got[k])} want {want[k]}" for k in bad[:8]]
        raise AssertionError(f"{len(bad)} mismatches, e.g.\n" + "\n".join(rows))


def _all16(npd) -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(npd)


def _f32_ties() -> np.ndarray:
    n = np.arange(-300, 301, dtype=np.float32)
    ties = n + np.float32(0.5)
    x = np.concatenate([n, ties, np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf))])
    rng = np.random.default_rng(7)
    rand = rng.integers(0, 2 ** 32, size=20_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    near = (rng.standard_normal(20_000) * 100).astype(np.float32)
    return np.concatenate([x, -x, rand, near, np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-40, 3e38], np.float32)])


_REF_CACHE: dict = {}


def _ref_cached(key, x, mode, to):
    """ref_int(x, mode, to), the unsaturated integers computed once per (inputs, mode) and clipped per target."""
    if (key, mode) not in _REF_CACHE:
        vals = np.asarray(x).astype(np.float64).ravel().tolist()
        _REF_CACHE[key, mode] = np.array([_ref_one(v, mode) for v in vals], dtype=object)
    lo, hi = _RANGE[to]
    return np.array([min(max(n, lo), hi) for n in _REF_CACHE[key, mode]], dtype=object)


pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def test_reference_hand_worked():
    """The reference on hand-worked values (AscendC's Cast table: 2^22 + 0.5 under each mode; int8 saturation)."""
    v = 2.0 ** 22 + 0.5
    assert [_ref_one(v, m, *_RANGE[DType.i32]) for m in INT_MODES] == [2 ** 22, 2 ** 22 + 1, 2 ** 22, 2 ** 22 + 1,
                                                                       2 ** 22]
    assert [_ref_one(-2.5, m, -128, 127) for m in INT_MODES] == [-2, -3, -3, -2, -2]
    assert _ref_one(127.5, "rint", -128, 127) == 127 and _ref_one(-1e9, "trunc", -128, 127) == -128
    assert _ref_one(float("nan"), "rint", -128, 127) == 0 and _ref_one(float("-inf"), "ceil", 0, 255) == 0


@pytest.mark.parametrize("to", INTS, ids=lambda d: d.value)
@pytest.mark.parametrize("mode", INT_MODES)
def test_every_f16_value(mode, to):
    """Every f16 bit pattern (NaN and ±inf included) to each integer type in each mode (f16 -> int is direct)."""
    x = _all16(np.float16)
    _same(float_to_int(x, DType.f16, to, mode), _ref_cached("f16", x, mode, to), x)


@pytest.mark.parametrize("to", [DType.i8, DType.u8, DType.i32], ids=lambda d: d.value)
@pytest.mark.parametrize("mode", INT_MODES)
def test_every_bf16_value(mode, to):
    """Every bf16 bit pattern, held as float32 as device mode holds it (to i8 / u8: through half, CAST_ODD)."""
    x = _all16(ml_dtypes.bfloat16).astype(np.float32)
    _same(float_to_int(x, DType.f32, to, mode), _ref_cached("bf16", x, mode, to), x)


@pytest.mark.parametrize("to", INTS, ids=lambda d: d.value)
@pytest.mark.parametrize("mode", INT_MODES)
def test_f32_ties_and_random(mode, to):
    """float32 ties n + 1/2, their neighbours and random bit patterns: the int8 / uint8 path through half
    (CAST_ODD then the mode) equals the direct rounding; every target saturates, NaN -> 0."""
    x = _f32_ties()
    _same(float_to_int(x, DType.f32, to, mode), _ref_cached("f32", x, mode, to), x)


def test_via_half_matters_without_odd():
    """The half step needs CAST_ODD: a float32 just below a tie rounded to half with ties-to-even would land on the
    tie and round the wrong way (so the path test above is not vacuous)."""
    x = np.float32(np.nextafter(np.float32(2.5), np.float32(0)))   # 2.4999998
    assert np.float16(x) == np.float16(2.5)                         # the naive half step makes a tie
    assert float_to_int(np.array([x]), DType.f32, DType.i8, "round")[0] == 2


def test_int_to_float_and_int_to_int():
    """int32 -> f32 rounds above 2^24 with the mode; int -> f16 rounds; int -> narrower int saturates."""
    x = np.array([2 ** 24 + 1, 2 ** 24 + 3, -(2 ** 24) - 1, 7, 70000], np.int64)
    assert int_to_float(x, DType.f32, "rint").tolist() == [2 ** 24, 2 ** 24 + 4, -(2 ** 24), 7, 70000]
    assert int_to_float(x, DType.f32, "trunc").tolist() == [2 ** 24, 2 ** 24 + 2, -(2 ** 24), 7, 70000]
    assert int_to_float(np.array([70000, 2049]), DType.f16, "rint").tolist() == [np.inf, 2048]
    assert int_to_int(np.array([300, -300, 5]), DType.i8).tolist() == [127, -128, 5]
    assert int_to_int(np.array([300, -3, 5]), DType.u8).tolist() == [255, 0, 5]


def _int_rounded_to_f32(v: int, mode: str) -> float:
    """int v rounded to float32 with `mode` by exact integer arithmetic (q * 2^sh, 24 significant bits)."""
    a, neg = abs(v), v < 0
    sh = max(a.bit_length() - 24, 0)
    q, r = divmod(a, 1 << sh)
    half = 1 << sh
    up = {"rint": 2 * r > half or (2 * r == half and sh > 0 and q % 2 == 1), "round": sh > 0 and 2 * r >= half,
          "trunc": False, "floor": neg and r > 0, "ceil": not neg and r > 0}[mode]
    m = (q + up) << sh
    return float(-m if neg else m)


@pytest.mark.parametrize("mode", ["rint", "round", "trunc", "floor", "ceil"])
def test_int64_to_f32_rounds_once_beyond_2_pow_53(mode):
    """int64 -> f32 (A2 / A3 convert int64 with a rounding mode only): the value rounded once, also past 2^53 where
    a detour through float64 would round twice (round to odd at 53 bits first: opgen.interp.rounding), against
    exact integer arithmetic; ties at 2^24 + 1 units and the int64 extremes included."""
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.integers(-2 ** 63, 2 ** 63 - 1, 4000, dtype=np.int64),
                        np.array([2 ** 63 - 1, -2 ** 63, 2 ** 53 + 1, -(2 ** 53 + 1), (2 ** 24 + 1) << 30,
                                  ((2 ** 24 + 1) << 30) + 1, (2 ** 24 + 1) << 38, -((2 ** 24 + 3) << 35), 0, 1, -1],
                                 np.int64)])
    got = int_to_float(x, DType.f32, mode)
    assert got.dtype == np.float32
    assert got.tolist() == [_int_rounded_to_f32(int(v), mode) for v in x.tolist()]


def test_cast_kernel_exact_mode_rounds_directly():
    """Exact mode: a cast to an integer still rounds and saturates (float64 input, no half step)."""
    x = np.array([20.907, -1.5, 2.5, 1e10, np.nan])
    ctx = Ctx("exact", {}, {})
    assert KERNELS["cast"](ctx, x, {"to": DType.i8, "round": "rint"}, None).tolist() == [21, -2, 2, 127, 0]
    assert KERNELS["cast"](ctx, x, {"to": DType.i32, "round": "round"}, None).tolist() == [21, -2, 3, 2 ** 31 - 1, 0]


@pytest.mark.parametrize("to", INTS, ids=lambda d: d.value)
def test_outputs_keep_their_declared_dtype(to):
    """run_graph returns an integer output in its declared dtype (not int64), in both modes."""
    N = Sym("N")
    g = Graph("IntProbe", (Param(Value("x", TensorType(DType.f32, (N,)))),),
              (Node("cast", ("x",), Value("y", TensorType(to, (N,))), (("round", "rint"), ("to", to))),),
              (("y", "y"),))
    x = np.array([20.907, -1.5, 2.5, 1e10], np.float32)
    for mode in ("device", "exact"):
        bound = SimpleNamespace(env={"N": 4}, dtypes={}, arrays={"x": x}, attrs={})
        y = run_graph(g, bound, mode)["y"]
        assert y.dtype == to.np
        lo, hi = _RANGE[to]
        assert y.tolist() == [21, max(-2, lo), 2, min(10 ** 10, hi)]   # float32(1e10) is exactly 10**10


def test_integer_arithmetic_wraps_to_its_type():
    """An i8 add computed past 127 wraps (two's complement) rather than growing as int64."""
    N = Sym("N")
    i8 = TensorType(DType.i8, (N,))
    g = Graph("Wrap", (Param(Value("a", i8)), Param(Value("b", i8))),
              (Node("add", ("a", "b"), Value("c", i8), ()),), (("c", "c"),))
    bound = SimpleNamespace(env={"N": 2}, dtypes={}, arrays={"a": np.array([100, -100], np.int8),
                                                             "b": np.array([100, -100], np.int8)}, attrs={})
    c = run_graph(g, bound, "device")["c"]
    assert c.dtype == np.int8 and c.tolist() == [-56, 56]


def test_a_float_to_int_cast_without_rounding_is_a_spec_error(tmp_path):
    """x.cast(i8) on a float names the rule and the fix at the spec line (AscendC has no float -> int CAST_NONE);
    round="odd" outside float -> f16 is refused the same way."""
    from opgen.errors import SpecError
    from opgen.registry import load_spec

    for expr, words in (("x.cast(i8)", 'rounds to an integer; name its rounding'),
                        ('x.cast(i8, "odd")', "rounds to an integer"),
                        ('x.cast(bf16, "odd")', "odd exists only for a float cast to f16")):
        p = tmp_path / "castbad.py"
        p.write_text(f'''
from opgen.dsl import A2, A3, OpSpec, bf16, f32, i8

spec = OpSpec("CastBad", aclnn="aclnnCastBad", socs=(A2, A3))
N = spec.dim("N")
spec.input("x", f32, [N])
spec.output("y", f32, [N])


@spec.body
def _(b, x):
    return {{"y": {expr}.cast(f32)}}
''')
        spec = load_spec(str(p))
        with pytest.raises(SpecError, match=words) as e:
            spec.graph(spec.keys()[0])
        assert "castbad.py:12" in str(e.value) and "\n" not in str(e.value).strip().split("\n")[0]
