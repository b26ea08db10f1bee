"""Byte inputs read as column rows or batch rows by the rows family (opgen.kernel.rows `_load_new`: int8, uint8 and
bool tensors of one value per column, [H], or per batch row, [B, 1, H]): the bytes are staged and cast to half
(rowsched LoadByteRow; no byte -> fp32 Cast exists), the halves widened to fp32. Quantize's per-channel int8 zero
points (examples/specs/quantize.py, CANN's aclnnQuantize) and a spec written for the purpose (a uint8 weight per
batch row, a bool column mask both added and selected on) against NumPy: float32 written here for the quantised
int8 (the kernel's fp32 arithmetic, one rounding; bit for bit) and float64 for the rest, on the Kernel IR and in the
emulation, at a ROW_SPLIT and a COL_SPLIT shape."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from opgen.check import run_check

ROOT = Path(__file__).resolve().parent.parent
QUANTIZE = ROOT / "examples" / "specs" / "quantize.py"

BYTE_ROWS = '''
from opgen.dsl import A2, A3, OpSpec, bf16, boolean, f16, f32, u8

spec = OpSpec("BatchByteScale", aclnn="aclnnBatchByteScale", socs=(A2, A3))
B, M, H = spec.dims("B M H")
(T,) = spec.dtype_vars("T")
spec.input("x", T, [B, M, H])
spec.input("w", u8, [B, 1, H])
spec.input("keep", boolean, [H])
spec.output("y", T, [B, M, H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, x, w, keep):
    v = x.f32() * w.f32() + keep.f32()
    return {"y": b.where(keep, v, -v).cast(T, "rint")}
'''


def _quantize_inputs(shape, dt: str, st: str, zp: bool, seed: int) -> dict:
    """x ~ N(0, 4) in dt; scales in [0.02, 0.1] in st (the quotients span the int8 range and beyond: saturation at
    both ends); zero points [H] over int8's whole range."""
    import ml_dtypes

    rng = np.random.default_rng(seed)
    npdt = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}
    h = shape[-1]
    x = (rng.standard_normal(shape) * 2).astype(np.float32).astype(npdt[dt])
    out = {"x": x, "scales": rng.uniform(0.02, 0.1, (h,)).astype(np.float32).astype(npdt[st])}
    if zp:
        out["zero_points"] = rng.integers(-128, 128, (h,)).astype(np.int8)
    return out


def _quantize_ref(inp: dict, ft) -> np.ndarray:
    """y = sat(rint(x / scales + zero_points)) computed in NumPy float type `ft`: float32 as the kernel computes it
    (one rounding at the end), float64 for the exact quotient."""
    q = inp["x"].astype(ft) / inp["scales"].astype(ft)
    if "zero_points" in inp:
        q = q + inp["zero_points"].astype(ft)
    return np.clip(np.rint(q), -128, 127)


QUANTIZE_CASES = [((37, 1000), "float16", "float16", True, 1), ((3, 60000), "bfloat16", "float32", True, 2),
                  ((2, 3, 4099), "float32", "float32", True, None), ((37, 1000), "float16", "float32", False, 1)]


@pytest.mark.parametrize("engine", ["kir", "emu"])
@pytest.mark.parametrize("shape,dt,st,zp,strategy", QUANTIZE_CASES)
def test_quantize_with_int8_zero_points_per_channel(engine, shape, dt, st, zp, strategy, examples_gen):
    """Quantize with int8 zero points [H] (the column rows' byte path) and without: equal to float32 NumPy bit for
    bit, within one step of float64 (a quotient rounded to fp32 can cross a half), every dtype row, ROW_SPLIT at 37
    rows and COL_SPLIT at 3 rows of 60000."""
    inp = _quantize_inputs(shape, dt, st, zp, seed=sum(shape))
    r = run_check(str(QUANTIZE), inputs=inp, attrs={"dtype": "torch.qint8"}, dtypes={"T": dt, "S": st},
                  gen_dir=examples_gen if engine == "emu" else None, engine=engine, progress=False)
    assert not r.faults and r.passed, r.faults[:2]
    if strategy is not None:
        assert r.tiling_key % 10 == strategy, r.tiling_key   # 1 ROW_SPLIT, 2 COL_SPLIT
    y = np.asarray(r.arrays["y"])
    np.testing.assert_array_equal(y, _quantize_ref(inp, np.float32).astype(np.int8))
    assert np.abs(y.astype(np.float64) - _quantize_ref(inp, np.float64)).max() <= 1
    assert (y == 127).any() and (y == -128).any() and ((y > -128) & (y < 127)).mean() > 0.5


def test_quantize_refuses_what_cann_refuses():
    """bf16 scales (CANN: only beside bf16 x and bf16 zero points, which this spec does not take) are refused at the
    dtype binding, and a per-tensor scale [1] at its shape, each naming the parameter."""
    from opgen.dsl.validate import ValidationError
    from opgen.interp import interpret

    inp = _quantize_inputs((4, 16), "bfloat16", "bfloat16", True, seed=1)
    with pytest.raises(ValidationError, match=r"scales: dtype bfloat16 is not supported for S \(allowed: float16, "
                       r"float32\)"):
        interpret(str(QUANTIZE), inp, attrs={"dtype": "torch.qint8"})
    inp = _quantize_inputs((4, 16), "float32", "float32", False, seed=1)
    inp["scales"] = inp["scales"][:1]
    with pytest.raises(ValidationError, match=r"scales: shape \[1\]: dim 0 is 1, expected H=16 \(from x\)"):
        interpret(str(QUANTIZE), inp, attrs={"dtype": "torch.qint8"})


@pytest.fixture(scope="module")
def byte_rows(run_shared):
    """(spec path, generated tree) of BYTE_ROWS, written and generated once per run (the workers share the tree and
    so its emulated build)."""
    def fill(d):
        from opgen.codegen import write_ops

        (d / "batch_byte_scale.py").write_text(BYTE_ROWS)
        write_ops([str(d / "batch_byte_scale.py")], d / "gen")
    d = run_shared("byte-rows", fill)
    return d / "batch_byte_scale.py", d / "gen"


@pytest.mark.parametrize("engine", ["kir", "emu"])
@pytest.mark.parametrize("dims,dt,strategy", [({"B": 3, "M": 37, "H": 1000}, "float16", 1),
                                              ({"B": 2, "M": 3, "H": 40000}, "bfloat16", 2),
                                              ({"B": 2, "M": 50, "H": 20001}, "bfloat16", 4)])
def test_uint8_batch_rows_and_a_bool_column_mask(engine, dims, dt, strategy, byte_rows):
    """A uint8 weight per batch row ([B, 1, H]: the batch rows' byte path) and a bool mask per column ([H]: added as
    0 / 1 and selected on) against float64 (one rounding of y to dt), at ROW_SPLIT, COL_SPLIT and ROW_CHUNK (rows
    resident, the column and batch rows loaded per chunk)."""
    spec, gen = byte_rows
    r = run_check(str(spec), dims=dims, dtypes={"T": dt}, seed=5, engine=engine, progress=False,
                  gen_dir=gen if engine == "emu" else None)
    assert not r.faults and r.passed, r.faults[:2]
    assert r.tiling_key % 10 == strategy, r.tiling_key
    x = np.asarray(r.inputs["x"], np.float64)
    w = np.asarray(r.inputs["w"], np.float64)
    keep = np.asarray(r.inputs["keep"], bool)
    assert keep.any() and not keep.all() and len(np.unique(w)) > 100
    v = x * w + keep
    want = np.where(keep, v, -v)
    got = np.asarray(r.arrays["y"], np.float64)
    ulp = 2.0 ** -10 if dt == "float16" else 2.0 ** -7   # half an ulp of dt, relative, plus fp32's
    np.testing.assert_allclose(got, want, rtol=ulp, atol=0)


BIASED_SOFTMAX = '''
from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32, u8

spec = OpSpec("BiasedSoftmax", aclnn="aclnnBiasedSoftmax", socs=(A2, A3))
R, H = spec.dims("R H")
(T,) = spec.dtype_vars("T")
spec.input("x", T, [R, H])
spec.input("w", u8, [H])
spec.output("y", T, [R, H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, x, w):
    v = x.f32() + w.f32() * 0.01
    e = b.exp(v - v.max(-1, keepdims=True))
    return {"y": (e / e.sum(-1, keepdims=True)).cast(T, "rint")}
'''


@pytest.mark.parametrize("dims,strategy", [({"R": 37, "H": 1000}, 1), ({"R": 50, "H": 20001}, 2),
                                           ({"R": 3, "H": 524289}, 3)])
def test_a_uint8_column_bias_of_a_softmax_in_every_strategy(dims, strategy, tmp_path):
    """A uint8 column input ([H]) read by a row reduction's passes: a softmax of x + 0.01 w on the Kernel IR at
    ROW_SPLIT, COL_SPLIT and COL_STREAM (the column rows re-loaded per chunk of a streamed row), against float64
    within fp16's rounding of y plus fp32's of the sum."""
    spec = tmp_path / "biased_softmax.py"
    spec.write_text(BIASED_SOFTMAX)
    r = run_check(str(spec), dims=dims, dtypes={"T": "float16"}, seed=2, engine="kir", progress=False)
    assert not r.faults and r.passed, r.faults[:2]
    assert r.tiling_key % 10 == strategy, r.tiling_key
    x = np.asarray(r.inputs["x"], np.float64)
    w = np.asarray(r.inputs["w"], np.float64)
    assert len(np.unique(w)) > 100
    v = x + 0.01 * w
    e = np.exp(v - v.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    got = np.asarray(r.arrays["y"], np.float64)
    bound = 2.0 ** -11 * np.abs(want) + 2.0 ** -24 + 1e-6 * want.max()   # fp16 rounding, fp32 exp / sums
    assert np.all(np.abs(got - want) <= bound), float(np.max(np.abs(got - want) - bound))

