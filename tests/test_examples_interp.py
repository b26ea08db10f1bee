"""Example specs of real operators that use compare / select, iota and integer outputs (LeakyRelu, DynamicQuant,
MaskedFill, OneHot in examples/specs/, whose kernels tests/test_examples.py emulates), interpreted in device mode
for every dtype row and in exact mode, against float64 NumPy
math written here: odd sizes, one-column rows, all-zero rows, ties of the quantiser."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from opgen.interp.run import interpret
from opgen.registry import load_spec

EX = Path(__file__).resolve().parent.parent / "examples" / "specs"
DT = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
UNIT = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}


def _spec(name):
    return load_spec(str(EX / f"{name}.py"))


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(7, 13), (1,), (3, 1, 5)])
def test_leaky_relu(dt, shape):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(DT[dt])
    x.flat[0] = 0.0
    slope = 0.2
    x64 = x.astype(np.float64)
    want = np.where(x64 > 0, x64, float(np.float32(slope)) * x64)   # a float attribute reaches the kernel as fp32
    got = interpret(_spec("leaky_relu"), {"self": x}, {"negative_slope": slope}, mode="device")["out"]
    assert got.dtype == DT[dt]
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=UNIT[dt] * 1.01, atol=0)
    ex = interpret(_spec("leaky_relu"), {"self": x}, {"negative_slope": slope}, mode="exact")["out"]
    np.testing.assert_allclose(ex, np.where(x64 > 0, x64, slope * x64), rtol=1e-15, atol=0)


def _quant_ref(x64):
    """float64 DynamicQuant: scale = max|x| / 127 per row; y = round-half-even(x / scale) saturated to int8, NaN
    (an all-zero row: 0 / 0) -> 0. Returns (y, scale, the float64 quotient)."""
    scale = np.abs(x64).max(-1) / 127.0
    with np.errstate(invalid="ignore", divide="ignore"):
        q = x64 / scale[..., None]
    y = np.clip(np.where(np.isnan(q), 0.0, np.rint(q)), -128, 127).astype(np.int8)
    return y, scale, q


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(9, 33), (2, 3, 1), (1, 256)])
def test_dynamic_quant(dt, shape):
    """int8 y and fp32 scale against float64 math; y may differ by one only where the fp32 quotient and the
    float64 one straddle a tie (|q - (n + 1/2)| below the fp32 rounding of the quotient)."""
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(shape) * 3).astype(DT[dt])
    x[0] = 0.0   # an all-zero row: scale 0, y 0
    x64 = x.astype(np.float64)
    y_ref, s_ref, q = _quant_ref(x64)
    out = interpret(_spec("dynamic_quant"), {"x": x}, mode="device")
    assert out["y"].dtype == np.int8 and out["scale"].dtype == np.float32
    np.testing.assert_allclose(out["scale"].astype(np.float64), s_ref, rtol=2.0**-23, atol=0)
    diff = out["y"].astype(np.int64) - y_ref.astype(np.int64)
    near_tie = np.abs(np.abs(q - np.floor(q)) - 0.5) < 1e-5 * np.maximum(np.abs(q), 1.0)
    assert np.all(np.abs(diff) <= 1) and np.all((diff == 0) | near_tie)
    assert np.all(out["y"][0] == 0)
    ex = interpret(_spec("dynamic_quant"), {"x": x}, mode="exact")
    assert ex["y"].dtype == np.int8 and np.array_equal(ex["y"], y_ref)


def test_dynamic_quant_rounds_ties_to_even_and_saturates():
    """Hand-worked row: max |x| = 127 gives scale 1, so y = rint(x): 2.5 -> 2, -3.5 -> -4, 126.5 -> 126."""
    x = np.array([[2.5, -3.5, 126.5, -127.0, 0.25]], np.float16)
    out = interpret(_spec("dynamic_quant"), {"x": x}, mode="device")
    assert out["y"].tolist() == [[2, -4, 126, -127, 0]] and out["scale"].tolist() == [1.0]


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
def test_masked_fill(dt):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 7)).astype(DT[dt])
    m = rng.random((5, 7)) < 0.4
    got = interpret(_spec("masked_fill"), {"self": x, "mask": m}, {"value": -1.25}, mode="device")["out"]
    want = np.where(m, -1.25, x.astype(np.float64))
    assert got.dtype == DT[dt] and np.array_equal(got.astype(np.float64), want)


def test_masked_fill_takes_a_uint8_mask():
    """A 0/1 uint8 mask (torch's older mask dtype) binds to the bool input."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    m = np.array([[1, 0, 1], [0, 0, 1]], np.uint8)
    got = interpret(_spec("masked_fill"), {"self": x, "mask": m}, {"value": 9.0}, mode="device")["out"]
    assert got.tolist() == [[9.0, 1.0, 9.0], [3.0, 4.0, 9.0]]


def test_one_hot():
    idx = np.array([0, 4, 2, 2, 6], np.int64)
    got = interpret(_spec("one_hot"), {"self": idx}, {"num_classes": 7, "on_value": 3.0, "off_value": -1.0},
                    mode="device")["out"]
    want = np.full((5, 7), -1.0)
    want[np.arange(5), idx] = 3.0
    assert got.dtype == np.float32 and np.array_equal(got, want)


def test_where_takes_an_integer_mask_tensor(tmp_path):
    """b.where(m, a, c) with a uint8 mask input reads it as m != 0 (values other than 0 / 1 included)."""
    p = tmp_path / "mask_u8.py"
    p.write_text('''
from opgen.dsl import A2, A3, OpSpec, f32, u8

spec = OpSpec("MaskU8", aclnn="aclnnMaskU8", socs=(A2, A3))
N = spec.dim("N")
spec.input("x", f32, [N])
spec.input("m", u8, [N])
spec.output("y", f32, [N])


@spec.body
def _(b, x, m):
    return {"y": b.where(m, x, -x)}
''')
    got = interpret(load_spec(str(p)), {"x": np.array([1.0, 2.0, 3.0], np.float32),
                                        "m": np.array([0, 7, 1], np.uint8)}, mode="device")["y"]
    assert got.tolist() == [-1.0, 2.0, 3.0]


def test_cli_saves_integer_outputs_in_their_dtype(tmp_path, capsys):
    """`opgen interpret ... --out` stores DynamicQuant's y as int8 (not int64) and its scale as float32."""
    from opgen.cli import main

    out = tmp_path / "q.npz"
    assert main(["interpret", str(EX / "dynamic_quant.py"), "--dims", "Bd=3,H=5", "--dtype", "T=float16",
                 "--out", str(out)]) == 0
    d = np.load(out)
    assert d["y"].dtype == np.int8 and d["y"].shape == (3, 5) and d["scale"].dtype == np.float32
    assert "y: [3, 5] int8 (stored as int8)" in capsys.readouterr().out


@pytest.mark.parametrize("name,inputs,attrs", [
    ("dynamic_quant", {"x": (np.arange(-20, 20, dtype=np.float32).reshape(4, 10) * 0.37).astype(np.float16)}, {}),
    ("leaky_relu", {"self": np.linspace(-2, 2, 12, dtype=np.float32)}, {"negative_slope": 0.1}),
    ("one_hot", {"self": np.array([3, 0, 1], np.int64)}, {"num_classes": 4}),
])
def test_emitted_golden_equals_the_interpreter(name, inputs, attrs):
    """The package's NumPy golden (tests/assets/golden.py, printed from the IR) gives the interpreter's device-mode
    outputs bit for bit, integer casts and outputs in their dtype included."""
    from opgen.codegen.golden import GOLDEN_PATH, emit_golden

    spec = _spec(name)
    ns: dict = {}
    exec(compile(emit_golden(spec)[GOLDEN_PATH], "golden.py", "exec"), ns)   # the file's own code, run here
    fn = next(v for k, v in ns.items() if k.endswith("_golden") and callable(v) and k != "__golden__")
    got = fn(*inputs.values(), **attrs)
    want = interpret(spec, inputs, attrs, mode="device")
    for o, g in zip(spec.outputs, got):
        w = want[o.name]
        assert np.asarray(g).dtype == w.dtype and np.array_equal(np.asarray(g), w), (name, o.name)


def test_group_norm_interpreted_and_its_group_relation_checked():
    """GroupNorm (examples/specs/group_norm.py) in exact mode equals float64 group normalisation written here (odd
    sizes: 7 channels in 7 groups of 1, HxW = 5; 6 channels in 2 groups); C not a multiple of group is refused naming
    `group` (the interpreter's check, as the aclnn layer's 161002)."""
    from opgen.errors import ValidationError

    spec = _spec("group_norm")
    rng = np.random.default_rng(4)
    for n, c, hw, grp in ((2, 7, 5, 7), (3, 6, 5, 2)):
        x, g, b = rng.standard_normal((n, c, hw)), rng.standard_normal(c), rng.standard_normal(c)
        attrs = {"N": n, "C": c, "HxW": hw, "group": grp}
        got = interpret(spec, {"self": x.astype(np.float32), "gamma": g.astype(np.float32), "beta": b.astype(np.float32)},
                        attrs, mode="exact")
        x32 = {k: v.astype(np.float32).astype(np.float64) for k, v in (("x", x), ("g", g), ("b", b))}   # as passed
        xg = x32["x"].reshape(n, grp, -1)
        m = xg.mean(-1, keepdims=True)
        r = 1.0 / np.sqrt(((xg - m) ** 2).mean(-1, keepdims=True) + float(np.float32(1e-5)))
        want = ((xg - m) * r).reshape(n, c, hw) * x32["g"][:, None] + x32["b"][:, None]
        np.testing.assert_allclose(got["out"], want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got["meanOut"], m.reshape(n, grp), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got["rstdOut"], r.reshape(n, grp), rtol=1e-12, atol=0)
    x = np.zeros((2, 7, 5), np.float32)
    with pytest.raises(ValidationError) as e:
        interpret(spec, {"self": x, "gamma": np.zeros(7, np.float32), "beta": np.zeros(7, np.float32)},
                  {"N": 2, "C": 7, "HxW": 5, "group": 3}, mode="exact")
    assert "group" in str(e.value) and "C must be a multiple of group" in str(e.value)


def test_a_reshape_the_dims_do_not_keep_is_refused_at_its_line(tmp_path):
    """A reshape whose element count differs at the call's dims is one error at the reshape's spec line, not a
    NumPy traceback."""
    from opgen.errors import SpecError

    path = tmp_path / "bad_reshape.py"
    path.write_text('from opgen.dsl import A2, A3, OpSpec, f32\n\n'
                    'spec = OpSpec("BadReshape", aclnn="aclnnBadReshape", socs=(A2, A3))\n'
                    'N, C, L = spec.dims("N C L")\n'
                    'spec.input("x", f32, [N, C, L])\n'
                    'spec.output("y", f32, [N, C * L + 1])\n\n\n'
                    '@spec.body\n'
                    'def _(b, x):\n'
                    '    return {"y": x.reshape([N, C * L + 1])}\n')
    with pytest.raises(SpecError) as e:
        interpret(load_spec(str(path)), {"x": np.zeros((2, 3, 4), np.float32)}, {}, mode="exact")
    msg = str(e.value)
    assert "bad_reshape.py:11" in msg and "24 elements" in msg and "26 elements" in msg and "\n" not in msg, msg


WHERE_NUMBERS = '''
from opgen.dsl import A2, A3, OpSpec, f32, i32

spec = OpSpec("OneHotD", aclnn="aclnnOneHotD", socs=(A2, A3), round="rint")
N = spec.dim("N")
C = spec.dim("C", max=65536)
spec.input("self", i32, [N])
spec.attr("depth", int, required=True, dim=C)
spec.output("out", f32, [N, C])
spec.output("sign", f32, [N, C])


@spec.body
def _(b, self, depth):
    hit = b.iota(C).f32().reshape([1, C]).eq(self.f32().reshape([N, 1]))
    return {"out": b.where(hit, 1.0, 0.0), "sign": b.where(hit, 2, -1)}
'''
"""OneHot as trial 9 wrote it (finding 9): both branches of `where` Python numbers (floats, and ints)."""


def test_where_of_two_numbers_is_a_select_of_f32_constants(tmp_path):
    """b.where(cond, 1.0, 0.0) and b.where(cond, 2, -1): two numbers are f32 constants (as b.const makes them), not
    an AttributeError; interpreted against NumPy, indices -1 and depth matching no class."""
    p = tmp_path / "one_hot_d.py"
    p.write_text(WHERE_NUMBERS)
    idx = np.array([0, 4, -1, 2, 5, 1], np.int32)
    got = interpret(load_spec(str(p)), {"self": idx}, {"depth": 5}, mode="device")
    hit = np.arange(5)[None, :] == idx[:, None]
    assert got["out"].dtype == np.float32 and got["sign"].dtype == np.float32
    np.testing.assert_array_equal(got["out"], np.where(hit, 1.0, 0.0))
    np.testing.assert_array_equal(got["sign"], np.where(hit, 2.0, -1.0))
    assert not got["out"][[2, 4]].any()
