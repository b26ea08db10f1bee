"""Rounding inside a row: a cast to fp16 / bf16 (or a dtype variable bound to them) that a computation reads is
performed in the row (Cast to the 16-bit type with the cast's mode, Cast back to fp32; opgen.kernel.rows
`_Lowering.round_trip`, docs/design.md "Rounding inside a row"), as CANN's kernels round a residual sum or a
normalised row to T before using it. Refused before ("a cast to T that feeds a computation"), found by a new user
writing AddRmsNormQuant.

Values against independent truths: NumPy float16 / ml_dtypes bfloat16 conversions (round to nearest even, the
"rint" cast) and float64 math, the directed modes by stepping to the neighbouring 16-bit value."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from opgen.check import run_check

EX = Path(__file__).resolve().parent.parent / "examples" / "specs" / "add_rms_norm_quant.py"

ROUND_SPEC = '''
from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("RoundInRow", aclnn="aclnnRoundInRow", socs=(A2, A3), round="rint")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=65536)
spec.attr("mode", str, "rint", choices=("rint", "floor", "ceil", "trunc", "round"), static=True)
spec.attr("to_bf16", bool, False, static=True)
spec.input("x", f32, [Bd, H])
spec.output("y", f32, [Bd, H])


@spec.body
def _(b, x, mode, to_bf16):
    t = (x * 3.0).cast(bf16 if to_bf16 else f16, mode).f32()
    return {"y": t * 0.5 + x}
'''

NP16 = {False: np.float16, True: ml_dtypes.bfloat16}


def _to16(v: np.ndarray, bf: bool, mode: str) -> np.ndarray:
    """float32 values v rounded to fp16 / bf16 with `mode`, as float64: the nearest-even value from NumPy /
    ml_dtypes, then one step towards the mode's side where it went the wrong way (a directed mode), or away from
    zero on an exact half-way tie ("round": ties away)."""
    t = NP16[bf]
    near = v.astype(t)
    out = near.astype(np.float64)
    x = v.astype(np.float64)
    up = np.nextafter(near, np.array(np.inf, t)).astype(np.float64)
    down = np.nextafter(near, np.array(-np.inf, t)).astype(np.float64)
    if mode == "floor":
        out = np.where(out > x, down, out)
    elif mode == "ceil":
        out = np.where(out < x, up, out)
    elif mode == "trunc":
        out = np.where(np.abs(out) > np.abs(x), np.where(x > 0, down, up), out)
    elif mode == "round":   # half away from zero: a tie rounded to even towards zero goes one step out
        other = np.where(out < x, up, down)
        tie = np.abs(other - x) == np.abs(out - x)
        out = np.where(tie & (np.abs(other) > np.abs(out)), other, out)
    return out


@pytest.fixture(scope="module")
def round_spec(tmp_path_factory):
    p = tmp_path_factory.mktemp("rt") / "round_in_row.py"
    p.write_text(ROUND_SPEC)
    return p


@pytest.mark.parametrize("mode", ["rint", "floor", "ceil", "trunc", "round"])
@pytest.mark.parametrize("bf", [False, True], ids=["f16", "bf16"])
def test_every_mode_rounds_like_the_16_bit_type(round_spec, mode, bf):
    """y = round16(3x) * 0.5 + x in fp32: round16 from NumPy / ml_dtypes and the neighbour steps, the rest in
    float32 NumPy (the kernel's own arithmetic: one fp32 rounding per operation): equal bit for bit. Values
    include exact ties of the 16-bit grid (integers + 1/2 in fp16's 2048..4096 range, bf16's 256..512)."""
    rng = np.random.default_rng(5 + bf)
    x = (rng.standard_normal((37, 1000)) * 50).astype(np.float32)
    ties = (np.arange(1000, dtype=np.float32) % 7 + (2048.5 if not bf else 256.5)) / np.float32(3.0)
    x[0] = ties.astype(np.float32)   # 3x lands on or next to a tie
    r = run_check(str(round_spec), inputs={"x": x}, attrs={"mode": mode, "to_bf16": bf}, engine="kir", progress=False)
    assert not r.faults and r.passed, r.faults[:2]
    t = _to16(x * np.float32(3.0), bf, mode).astype(np.float32)
    want = t * np.float32(0.5) + x
    np.testing.assert_array_equal(np.asarray(r.arrays["y"]), want)


@pytest.mark.slow
def test_the_emulated_kernel_rounds_inside_the_row(round_spec, tmp_path):
    """The same through the g++ emulation of the emitted C++ (bf16 floor and fp16 round: the two Casts as AscendC
    spells them, CAST_FLOOR / CAST_ROUND to the 16-bit type, CAST_NONE back)."""
    from opgen.codegen import write_ops
    from opgen.registry import load_spec

    gen = tmp_path / "gen"
    write_ops([load_spec(str(round_spec))], gen)
    h = (gen / "round_in_row" / "op_kernel" / "round_in_row.h").read_text()
    assert "ReinterpretCast<bfloat16_t>()" in h and "RoundMode::CAST_FLOOR" in h and "RoundMode::CAST_ROUND" in h
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((50, 333)) * 50).astype(np.float32)
    for mode, bf in (("floor", True), ("round", False)):
        r = run_check(str(round_spec), inputs={"x": x}, attrs={"mode": mode, "to_bf16": bf}, gen_dir=gen,
                      progress=False)
        assert not r.faults and r.passed, r.faults[:2]
        want = _to16(x * np.float32(3.0), bf, mode).astype(np.float32) * np.float32(0.5) + x
        np.testing.assert_array_equal(np.asarray(r.arrays["y"]), want)


def _arnq_inputs(rows: int, h: int, zp1: bool, scales2: bool, zp2: bool) -> dict:
    """AddRmsNormQuant's inputs: fp16 x1, x2 (standard normal), gamma in [0.5, 1.5], scales in [0.005, 0.05] (so
    the quotients saturate int8 at both ends), zero points in [-20, 20); the optional ones as asked."""
    rng = np.random.default_rng(rows + h)
    inp = {"x1": rng.standard_normal((rows, h)).astype(np.float16),
           "x2": rng.standard_normal((rows, h)).astype(np.float16),
           "gamma": rng.uniform(0.5, 1.5, h).astype(np.float16),
           "scales1": rng.uniform(0.005, 0.03, h).astype(np.float32)}
    if zp1:
        inp["zero_points1"] = rng.integers(-20, 20, h).astype(np.int32)
    if scales2:
        inp["scales2"] = rng.uniform(0.01, 0.05, h).astype(np.float32)
    if zp2:
        inp["zero_points2"] = rng.integers(-5, 5, h).astype(np.int32)
    return inp


@pytest.mark.parametrize("dims, zp1, scales2, zp2, engine", [
    ({"Bd": (37,), "H": 1000}, True, True, True, "emu"),
    ({"Bd": (5,), "H": 16384}, False, True, False, "emu"),    # COL_SPLIT: rows over the cores' column slices
    ({"Bd": (23,), "H": 257}, False, False, True, "emu"),     # scales2 absent (zero_points2 unused): y2 not written
    ({"Bd": (97,), "H": 33}, True, False, False, "kir"),
    ({"Bd": (3,), "H": 16384}, True, False, True, "kir"),     # COL_SPLIT with y2 absent
    ({"Bd": (64,), "H": 96}, False, True, True, "kir"),
])
def test_add_rms_norm_quant_against_float64(dims, zp1, scales2, zp2, engine, examples_gen):
    """x = f16(x1 + x2) exactly (the sum of two halves is exact in fp32, then one rounding); y1 (and y2 when scales2
    is given) = sat(rint(y / scales + zp)) with y = f16(f16(x * rstd) * gamma) and rstd in float64: off by one only
    where the quotient is within a few fp16 ulps of y of a rounding boundary (fp32 then fp16 rounding of x * rstd
    may differ from float64's by one fp16 ulp). Every presence runs the one kernel class (y2's queue and CopyOut
    guarded by scales2's presence)."""
    rows, h = dims["Bd"][0], dims["H"]
    inp = _arnq_inputs(rows, h, zp1, scales2, zp2)
    r = run_check(str(EX), inputs=inp, dtypes={"T": "float16"}, engine=engine, gen_dir=examples_gen, progress=False)
    assert not r.faults and r.passed, r.faults[:2]
    x = (inp["x1"].astype(np.float64) + inp["x2"].astype(np.float64)).astype(np.float16)
    np.testing.assert_array_equal(np.asarray(r.arrays["x"]), x)
    xf = x.astype(np.float64)
    rstd = 1.0 / np.sqrt((xf * xf).mean(-1, keepdims=True) + 1e-6)
    y = ((xf * rstd).astype(np.float16).astype(np.float64) * inp["gamma"]).astype(np.float16).astype(np.float64)
    assert (r.arrays.get("y2") is not None) == scales2
    for k in (1, 2) if scales2 else (1,):
        s, z = inp[f"scales{k}"], inp.get(f"zero_points{k}")
        q = y / s + (z if z is not None else 0)
        ref = np.clip(np.rint(q), -128, 127)
        diff = np.asarray(r.arrays[f"y{k}"]).astype(np.int64) - ref
        slack = 4 * 2.0**-10 * np.abs(y) / s + 1e-9   # a few fp16 ulps of y, in q's units
        near = np.abs(q - np.floor(q) - 0.5) <= slack
        assert np.all(np.abs(diff) <= 1) and np.all((diff == 0) | near), (k, np.argwhere((diff != 0) & ~near)[:5])
        assert (diff == 0).mean() > 0.99
        assert (ref == 127).any() and (ref == -128).any()


def test_add_rms_norm_quant_is_one_class_for_every_presence(examples_gen):
    """The eight presences of scales2 / zero_points1 / zero_points2 share one kernel class (the entry tests no
    pointer; before the guarded output they were six classes): y2's AllocTensor, EnQue and CopyOut each sit inside
    `if (hasInput0_)` (scales2 present), counted by hand in the emitted header."""
    d = examples_gen / "add_rms_norm_quant" / "op_kernel"
    h, entry = (d / "add_rms_norm_quant.h").read_text(), (d / "add_rms_norm_quant.cpp").read_text()
    assert len(re.findall(r"^class AddRmsNormQuantKernel\d+ \{", h, re.M)) == 1
    assert "nullptr" not in entry and "this->hasInput0_ = scales2 != nullptr;" in h
    lines = h.split("\n")
    queue_ops = [k for k, ln in enumerate(lines) if re.search(r"rowOutQue_y2\.(template AllocTensor|EnQue|template "
                                                              r"DeQue)", ln)]
    assert queue_ops
    for k in queue_ops:   # the nearest guard above (past an EnQue and a scope's `{` line)
        above = [ln for ln in lines[max(0, k - 4):k] if "if (" in ln]
        assert above and "if (hasInput0_) {" in above[-1], lines[k - 2:k + 1]


def _absent_output_faults(r) -> bool:
    """Whether check result `r` failed with a fault on a store to an unbound GM tensor (y2's, scales2 absent: the
    emulation's and the interpreter's "no registered buffer" fault of a DataCopyPad UB->GM)."""
    return not r.passed and any("UB->GM" in f and "no registered buffer" in f for f in r.faults)


def test_unguarded_y2_store_faults_on_the_interpreter(monkeypatch, tmp_path):
    """Mutation: y2's queue and CopyOut built without their presence guard (opgen.kernel.rowsched.guard made the
    identity): with scales2 absent the Kernel-IR interpreter faults on the store to y2's unbound GM, with it present
    the kernel still passes (the guard is what keeps an absent output untouched). The spec is a copy at a path of
    its own: the loaded spec, which memoises its kernel build, is not the unmutated one another test loaded."""
    import opgen.kernel.rowsched as rowsched

    monkeypatch.setattr(rowsched, "guard", lambda t, stmts: tuple(stmts))
    spec = tmp_path / "add_rms_norm_quant.py"
    shutil.copy(EX, spec)
    r = run_check(str(spec), inputs=_arnq_inputs(19, 100, True, False, False), dtypes={"T": "float16"}, engine="kir",
                  progress=False)
    assert _absent_output_faults(r), r.faults[:2]
    r = run_check(str(spec), inputs=_arnq_inputs(19, 100, True, True, False), dtypes={"T": "float16"}, engine="kir",
                  progress=False)
    assert r.passed and not r.faults, r.faults[:2]


@pytest.mark.slow
def test_unguarded_y2_copy_out_faults_in_the_emulation(examples_gen, tmp_path, session_build_root):
    """Mutation of the emitted C++: the `if (hasInput0_)` guards of y2's AllocTensor, EnQue and CopyOut replaced by
    `if (true)` in a copy of the package; with scales2 absent the g++ emulation faults on y2 (the DataCopyPad to its
    unbound GM)."""
    pkg = tmp_path / "gen" / "add_rms_norm_quant"
    shutil.copytree(examples_gen / "add_rms_norm_quant", pkg)
    h = pkg / "op_kernel" / "add_rms_norm_quant.h"
    lines = h.read_text().split("\n")
    cut = 0
    for k in range(len(lines) - 2):
        if lines[k].lstrip().startswith("if (hasInput0_) {") and "rowOutQue_y2" in "".join(lines[k + 1:k + 3]):
            lines[k] = lines[k].replace("if (hasInput0_) {", "if (true) {")
            cut += 1
    assert cut >= 6   # Alloc, EnQue + CopyOut in each strategy's method
    h.write_text("\n".join(lines))
    r = run_check(str(EX), inputs=_arnq_inputs(19, 100, True, False, False), dtypes={"T": "float16"},
                  gen_dir=tmp_path / "gen", build_root=session_build_root, progress=False)
    assert _absent_output_faults(r), r.faults[:2]


def test_the_golden_rounds_inside_the_row_as_the_interpreter(round_spec, tmp_path):
    """The emitted standalone golden (numpy only) prints the directed modes of a float cast too (floor / ceil /
    trunc to fp16 and bf16): equal to the interpreter on every specialisation, with values past fp16's range and
    exact 16-bit values among the inputs."""
    from opgen.codegen.golden import GOLDEN_PATH, emit_golden
    from opgen.interp import interpret
    from opgen.registry import load_spec
    from test_golden import run_isolated

    spec = load_spec(str(round_spec))
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((4, 300)) * 50).astype(np.float32)
    x[0, :6] = [30000.0, -30000.0, 1e30, -1e30, 1.0, -0.0]   # past fp16's largest value (3x), exact, a zero
    cases = [(key, {"x": x}, dict(spec.static_values(key))) for key in spec.keys()]
    assert len(cases) == 10
    got = run_isolated(tmp_path, [(spec, emit_golden(spec)[GOLDEN_PATH], {}, cases)])
    for c, (key, inputs, attrs) in enumerate(cases):
        ref = np.asarray(interpret(spec, inputs, attrs, {}, "device")["y"])
        np.testing.assert_array_equal(got[(0, c, "y")], ref, err_msg=str(key))
