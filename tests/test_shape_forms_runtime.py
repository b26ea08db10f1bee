"""Shape forms told apart at run time: an input declared with several forms whose programs differ (AscendQuantV2's
scale and offset, [H] per channel or [1] per tensor) gets one kernel class per form combination, and the emitted
TilingFunc writes the tiling field formKey from the input shapes (opgen.tiling.emit.form_key_cpp) that the kernel
entry selects the class by (docs/design.md "Shape forms at run time"). Refused before ("the shape forms of the
specialisation ... lower to different kernels"), found by a new user writing aclnnAscendQuant from CANN's docs.

Values against float64 NumPy written here: y = sat(round_mode(x * s + offset)), s = scale or scale * scale. The
device computes x * s + offset in fp32; x, scale and offset are fp16 / bf16 / fp32 values, so the product is exact in
fp32 for the half types and the sum is one fp32 rounding: an integer off by one only where the float64 value
straddles a rounding boundary."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from opgen.check import run_check
from opgen.dsl.keys import form_key
from opgen.registry import load_spec

EX = Path(__file__).resolve().parent.parent / "examples" / "specs" / "ascend_quant_v2.py"
NP = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
ROUND = {"round": lambda v: np.sign(v) * np.floor(np.abs(v) + 0.5), "rint": np.rint, "floor": np.floor,
         "ceil": np.ceil, "trunc": np.trunc}


def _inputs(rng, rows, h, dt, scale_form, offset_form):
    """x N(0, 1) * 2; scale in [10, 60] (so y saturates at both ends); offset in [-20, 20]; `*_form` "H" or "1",
    offset_form None for an absent offset."""
    n = {"H": h, "1": 1}
    out = {"x": (rng.standard_normal((rows, h)) * 2).astype(NP[dt]),
           "scale": rng.uniform(10, 60, n[scale_form]).astype(NP[dt])}
    if offset_form is not None:
        out["offset"] = rng.uniform(-20, 20, n[offset_form]).astype(NP[dt])
    return out


def _ref(inp, round_mode, sqrt_mode):
    x, s = (np.asarray(inp[k], np.float64) for k in ("x", "scale"))
    s = s * s if sqrt_mode else s
    v = x * s + (np.asarray(inp["offset"], np.float64) if "offset" in inp else 0.0)
    return v, np.clip(ROUND[round_mode](v), -128, 127)


def _check_values(r, inp, round_mode, sqrt_mode):
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    v, ref = _ref(inp, round_mode, sqrt_mode)
    y = np.asarray(r.arrays["y"])
    assert y.dtype == np.int8 and y.shape == ref.shape
    diff = y.astype(np.int64) - ref.astype(np.int64)
    frac = v - np.floor(v)
    edge = np.minimum(frac, 1 - frac) < 1e-4 * np.maximum(np.abs(v), 1.0)   # an integer is the boundary
    if round_mode == "round":
        edge |= np.abs(frac - 0.5) < 1e-4 * np.maximum(np.abs(v), 1.0)
    assert np.all(np.abs(diff) <= 1) and np.all((diff == 0) | edge), np.argwhere(diff != 0)[:5]
    assert (ref == 127).any() and (ref == -128).any()   # both saturation bounds are exercised


CASES = [   # (scale form, offset form or None, dtype, round_mode, sqrt_mode, rows, H)
    ("H", "H", "float16", "round", False, 37, 1000),
    ("1", "H", "bfloat16", "rint", True, 5, 77),
    ("H", "1", "float32", "floor", False, 97, 33),
    ("1", "1", "float16", "trunc", False, 3, 4097),
    ("1", None, "float32", "ceil", False, 50, 100),
    ("H", None, "bfloat16", "round", True, 9, 64),
]


def _id(c):
    return f"scale{c[0]}-offset{c[1] or 'absent'}-{c[2]}-{c[3]}{'-sqrt' if c[4] else ''}"


@pytest.mark.parametrize("case", CASES, ids=_id)
@pytest.mark.parametrize("engine", ["kir", "emu"])
def test_each_form_combination_against_float64(case, engine, examples_gen):
    scale_form, offset_form, dt, round_mode, sqrt_mode, rows, h = case
    rng = np.random.default_rng(rows * h)
    inp = _inputs(rng, rows, h, dt, scale_form, offset_form)
    r = run_check(str(EX), inputs=inp, attrs={"round_mode": round_mode, "sqrt_mode": sqrt_mode}, dtypes={"T": dt},
                  engine=engine, gen_dir=examples_gen, progress=False)
    _check_values(r, inp, round_mode, sqrt_mode)


@pytest.mark.parametrize("engine", ["kir", "emu"])
def test_a_one_column_row_matches_both_forms(engine, examples_gen):
    """H = 1: a scale of shape [1] is both [H] and [1]; the TilingFunc takes the first form that agrees ([H]), as
    the interpreter binds forms in order, and either class computes the same values."""
    rng = np.random.default_rng(11)
    inp = _inputs(rng, 97, 1, "float16", "1", "1")
    r = run_check(str(EX), inputs=inp, attrs={"round_mode": "rint"}, dtypes={"T": "float16"}, engine=engine,
                  gen_dir=examples_gen, progress=False)
    assert not r.faults and r.passed
    _v, ref = _ref(inp, "rint", False)
    y = np.asarray(r.arrays["y"]).astype(np.int64)
    assert np.abs(y - ref).max() <= 1


def test_the_entry_selects_classes_by_the_form_key(examples_gen):
    """The kernel entry tests tilingData.formKey once per (presence, form key) a class serves; the form key of a
    call is the mixed-radix index of its forms (scale fastest), an absent offset counting as its first form."""
    spec = load_spec(str(EX))
    entry = (Path(examples_gen) / "ascend_quant_v2" / "op_kernel" / "ascend_quant_v2.cpp").read_text()
    tiling = (Path(examples_gen) / "ascend_quant_v2" / "op_host" / "ascend_quant_v2_tiling.cpp").read_text()
    assert "tiling->formKey = formKey;" in tiling
    for cond in ("offset != nullptr && tilingData.formKey == 3", "offset == nullptr && tilingData.formKey == 1"):
        assert cond in entry
    assert "offset == nullptr && tilingData.formKey == 2" not in entry   # an absent offset has no form of its own
    # forms (scale, offset) -> key, by hand: scale [1] is 1, offset [1] is 2
    assert [form_key(spec, f, (True,)) for f in ((0, 0), (1, 0), (0, 1), (1, 1))] == [0, 1, 2, 3]
    assert form_key(spec, (1, 1), (False,)) == 1
