"""Shape forms told apart at run time: an input declared with several forms whose programs differ (AscendQuantV2's
scale and offset, [H] per channel or [1] per tensor) gets one kernel class per form combination, and the emitted
TilingFunc computes the form key from the input shapes (opgen.tiling.emit.form_key_cpp) and folds it into the tiling
key, one class per key (docs/design.md "Shape forms at run time"). Refused before ("the shape forms of the
specialisation ... lower to different kernels"), found by a new user writing aclnnAscendQuant from CANN's docs.

Values against float64 NumPy written here: y = sat(round_mode(x * s + offset)), s = scale or scale * scale. The
device computes x * s + offset in fp32; x, scale and offset are fp16 / bf16 / fp32 values, so the product is exact in
fp32 for the half types and the sum is one fp32 rounding: an integer off by one only where the float64 value
straddles a rounding boundary."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from opgen.check import run_check
from opgen.dsl.keys import form_key
from opgen.registry import load_spec

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "specs" / "ascend_quant_v2.py"
NP = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
ROUND = {"round": np.rint, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc}
"""CANN's round modes of AscendQuant on A2 / A3: "round" is half to even (CAST_RINT), the others directed."""


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
    v = x * s * s if sqrt_mode else x * s
    v = v + (np.asarray(inp["offset"], np.float64) if "offset" in inp else 0.0)
    return v, np.clip(ROUND[round_mode](v), -128, 127)


def _check_values(r, inp, round_mode, sqrt_mode, saturates=True):
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    v, ref = _ref(inp, round_mode, sqrt_mode)
    y = np.asarray(r.arrays["y"])
    assert y.dtype == np.int8 and y.shape == ref.shape
    diff = y.astype(np.int64) - ref.astype(np.int64)
    frac = v - np.floor(v)
    if round_mode == "round":   # the boundary is half way (an exact tie is half to even: no slack there)
        edge = (np.abs(frac - 0.5) < 1e-4 * np.maximum(np.abs(v), 1.0)) & (frac != 0.5)
    else:   # the boundary is an integer
        edge = np.minimum(frac, 1 - frac) < 1e-4 * np.maximum(np.abs(v), 1.0)
    assert np.all(np.abs(diff) <= 1) and np.all((diff == 0) | edge), np.argwhere(diff != 0)[:5]
    if saturates:
        assert (ref == 127).any() and (ref == -128).any()   # both saturation bounds are exercised


CASES = [   # (scale form, offset form or None, dtype, round_mode, sqrt_mode, rows, H)
    ("H", "H", "float16", "round", False, 37, 1000),
    ("1", "H", "bfloat16", "round", True, 5, 77),
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
    r = run_check(str(EX), inputs=inp, attrs={"round_mode": "round"}, dtypes={"T": "float16"}, engine=engine,
                  gen_dir=examples_gen, progress=False)
    _check_values(r, inp, "round", False, saturates=False)


@pytest.mark.parametrize("engine", ["kir", "emu"])
def test_round_is_half_to_even_as_cann_rounds_it(engine, examples_gen):
    """round_mode "round" on exact ties x * scale + offset = k + 1/2 (scale 1, offset 0): half to even, as
    CANN's A2 / A3 kernel casts with CAST_RINT (2.5 -> 2, 3.5 -> 4, -2.5 -> -2, 0.5 -> 0), saturating at the ends."""
    x = np.array([[2.5, 3.5, -2.5, 0.5, -0.5, 126.5, -127.5, 127.5, -128.5, 200.0, 1.5, -1.5]], np.float16)
    inp = {"x": x, "scale": np.ones(1, np.float16)}
    r = run_check(str(EX), inputs=inp, attrs={"round_mode": "round"}, dtypes={"T": "float16"}, engine=engine,
                  gen_dir=examples_gen, progress=False)
    assert not r.faults and r.passed
    np.testing.assert_array_equal(np.asarray(r.arrays["y"]), [[2, 4, -2, 0, 0, 126, -128, 127, -128, 127, 2, -2]])


def test_the_tiling_key_selects_one_class_per_form_key(examples_gen):
    """The form key is a digit of the tiling key, (attrKey * 4 + formKey) * 100 + dtypeKey * 10 + strategy, as CANN
    keys per-tensor / per-channel quantisation: each TILING_KEY_IS branch runs one class, with no run-time test of a
    tiling field. The form key of a call is the mixed-radix index of its forms (scale fastest), an absent offset
    counting as its first form."""
    spec = load_spec(str(EX))
    entry = (Path(examples_gen) / "ascend_quant_v2" / "op_kernel" / "ascend_quant_v2.cpp").read_text()
    tiling = (Path(examples_gen) / "ascend_quant_v2" / "op_host" / "ascend_quant_v2_tiling.cpp").read_text()
    keys = (Path(examples_gen) / "ascend_quant_v2" / "op_kernel" / "ascend_quant_v2_tiling_key.h").read_text()
    assert "formKey" not in entry.split("{", 1)[1] and "tiling->formKey" not in tiling
    assert "(attrKey * 4 + formKey) * 100" in tiling
    branches = entry.split("if (TILING_KEY_IS(")[1:]
    # 8 attrKeys (sqrt_mode x round_mode) x 4 form keys x 3 dtypes, the strategies of one class joined
    assert len(branches) == 8 * 4 * 3
    assert all(b.count("op.Process();") == 1 and "nullptr" not in b for b in branches)
    # sqrt_mode False, round_mode "round" (attrKey 0), fp16 (dtypeKey 1), ROW_SPLIT: per form key, by hand
    for fkey, forms in ((0, "scale [H], offset [H]"), (1, "scale [1], offset [H]"), (2, "scale [H], offset [1]"),
                        (3, "scale [1], offset [1]")):
        value = (0 * 4 + fkey) * 100 + 1 * 10 + 1
        assert f"#define ASCEND_QUANT_V2_TILING_KEY_A0_F{fkey}_D1_S1 {value}\n" in keys
        assert f"T=float16, {forms}, ROW_SPLIT" in keys
    # attrKey 1 (sqrt_mode True), form key 3, bf16 (dtypeKey 3), ROW_CHUNK
    assert "#define ASCEND_QUANT_V2_TILING_KEY_A1_F3_D3_S4 734\n" in keys
    classes = {b[:b.index(")")]: b.split("op;")[0].split()[-1] for b in branches}
    assert classes["ASCEND_QUANT_V2_TILING_KEY_A0_F0_D1_S1"] != classes["ASCEND_QUANT_V2_TILING_KEY_A0_F1_D1_S1"]
    # forms (scale, offset) -> key, by hand: scale [1] is 1, offset [1] is 2
    assert [form_key(spec, f, (True,)) for f in ((0, 0), (1, 0), (0, 1), (1, 1))] == [0, 1, 2, 3]
    assert form_key(spec, (1, 1), (False,)) == 1


GE_DT = {"float16": 1, "int8": 2}
"""ge::DataType values the driver passes (ge::DT_FLOAT16, ge::DT_INT8)."""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is needed to compile the emitted TilingFunc")
def test_a_shape_matching_no_form_fails_the_tiling(examples_gen, tmp_path):
    """Graph mode reaches the TilingFunc without the aclnn layer's shape checks. The emitted TilingFunc, compiled on
    the host with tests/cpp/tiling_driver.cpp (as tests/test_tiling.py runs them, -Wall -Werror): a scale or offset of
    5 values beside H = 77 matches neither [H] nor [1] and the call fails (GRAPH_FAILED, logged), instead of
    running the per-tensor class on the first value; each good combination of forms tiles with the form key in its
    tiling key (tilingKey = (attrKey * 4 + formKey) * 100 + dtypeKey * 10 + strategy, the key the kernel entry
    selects its one class by). The form keys by hand: scale [1] counts 1, offset [1] counts 2 (scale fastest), an
    absent offset as its first form."""
    from opgen.platforms import PLATFORMS

    from gxx import tiling_driver

    op = Path(examples_gen) / "ascend_quant_v2"
    exe = tiling_driver(tmp_path / "driver", [op / "op_host" / "ascend_quant_v2_tiling.cpp"], op / "op_host")
    plat = PLATFORMS["ascend910b1"]
    h = 77

    def line(scale, offset):
        """Driver input: x [3, 77] f16, scale / offset (None: absent) f16 of those shapes; sqrt_mode false,
        round_mode "round", dst_type 2, axis -1; y int8."""
        parts = ["AscendQuantV2", str(plat.aiv), str(plat.ub_bytes), "3", "1", str(GE_DT["float16"]), "2", "3", str(h)]
        for shape in (scale, offset):
            parts += ["0", "0", "0"] if shape is None else ["1", str(GE_DT["float16"]), str(len(shape)),
                                                              *map(str, shape)]
        return " ".join(parts + ["4", "0", "s:round", "2", "-1", "1", str(GE_DT["int8"])])

    cases = [((h,), (h,), 0), ((1,), (h,), 1), ((h,), (1,), 2), ((1,), (1,), 3), ((1,), None, 1), ((h,), None, 0),
             ((5,), (h,), None), ((h,), (5,), None), ((5,), None, None), ((1,), (h + 1,), None)]
    out = subprocess.run([str(exe)], input="\n".join(line(s, o) for s, o, _k in cases) + "\n", capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    got = out.stdout.splitlines()
    assert len(got) == len(cases), got
    for (scale, offset, key), g in zip(cases, got):
        if key is None:
            assert g == "fail", (scale, offset, g)
        else:
            assert g.startswith("ok ") and int(g.split()[2]) // 100 % 4 == key, (scale, offset, key, g)  # ok blockDim key
    assert out.stderr.count("a shape matching none of its forms") == 4, out.stderr
