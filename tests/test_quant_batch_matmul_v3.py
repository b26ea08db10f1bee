"""The int8 product on the cube (docs/design.md "Cube family: int8 operands"): b.matmul(x1.cast(i32), x2.cast(i32))
of int8 inputs is exact in the interpreter and lowers to int8 fractals (16 x 32) with an int32 L0C; the example
QuantBatchMatmulV3 (examples/specs/quant_batch_matmul_v3.py) dequantises on the AIVs. Every value is checked against
NumPy written here: int64 matmul for the int32 sums, float64 (x1 @ x2ᵀ) * scale (+ bias) for the bf16 output."""

from __future__ import annotations

import itertools
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

from opgen.kernel.family import NoKernel
from opgen.registry import load_spec
from opgen.tiling.pipeline import kernel_build

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "specs" / "quant_batch_matmul_v3.py"
ATTRS = {"transpose_x2": True}   # x2 stored [N, K] (CANN's default false: x2 [K, N], both implemented)


def _spec(tmp_path, body: str, x2: str = "[N, K]", out: str = "i32", scale: str | None = None,
          x1: str = "[M, K]") -> str:
    """A spec file of int8 x1 `x1`, x2 `x2`, output y `out` [M, N] whose body returns `body` (x1, x2 in scope;
    with `scale`, a dtype name, also an input scale of that dtype [N])."""
    p = tmp_path / "int8_mm.py"
    scale_decl = f'spec.input("scale", {scale}, [N])' if scale else ""
    params = "b, x1, x2, scale" if scale else "b, x1, x2"
    p.write_text(textwrap.dedent(f'''
        from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32, i8, i32
        spec = OpSpec("Int8Mm", aclnn="aclnnInt8Mm", socs=(A2, A3), round="rint")
        M = spec.dim("M", max=65535)
        K = spec.dim("K", max=65535)
        N = spec.dim("N", max=65535)
        spec.input("x1", i8, {x1})
        spec.input("x2", i8, {x2})
        {scale_decl}
        spec.output("y", {out}, [M, N])
        spec.example_call({{"M": 5, "K": 40, "N": 7}})


        @spec.body
        def _({params}):
            return {{"y": {body}}}
    '''))
    return str(p)


def _int8(rng, shape):
    """Random int8 values over the whole range, the extreme -128 included."""
    x = rng.integers(-128, 128, shape).astype(np.int8)
    x.flat[0] = -128
    return x


@pytest.mark.parametrize("k", [1, 33, 4099, 65535])
def test_the_interpreter_multiplies_int8_exactly_in_int32(tmp_path, k):
    """b.matmul(x1.cast(i32), x2.cast(i32)): int64 NumPy matmul, element for element, in both interpreter modes
    (|sum| <= 2^14 K < 2^31 for K < 2^17: the int32 result wraps nowhere)."""
    from opgen.interp.run import interpret

    path = _spec(tmp_path, "b.matmul(x1.cast(i32), x2.cast(i32), transpose_b=True)")
    rng = np.random.default_rng(k)
    x1, x2 = _int8(rng, (3, k)), _int8(rng, (4, k))
    x1[:] = -128   # the largest magnitude: -128 * -128 * K in one row
    x2[0] = -128
    ref = x1.astype(np.int64) @ x2.astype(np.int64).T
    for mode in ("device", "exact"):
        y = interpret(path, {"x1": x1, "x2": x2}, mode=mode)["y"]
        assert y.dtype == np.int32
        np.testing.assert_array_equal(y.astype(np.int64), ref)


@pytest.mark.parametrize("tb", [True, False])
@pytest.mark.parametrize("dims", [(37, 77, 45), (300, 333, 301)])
def test_the_int32_sums_are_fixpipes_output_on_the_kernel_ir(tmp_path, tb, dims):
    """An int32 output straight from the int8 product: Fixpipe NoQuant of the int32 L0C (no vector epilogue, AIC
    only), odd M / K / N (and 3 x 2 blocks with tails on both edges), B stored [N, K] or [K, N] (the latter through
    LoadDataWithTranspose of 32 x 32 int8 squares, baseN a multiple of 32), on the Kernel IR interpreter: equal to
    NumPy's int64 matmul."""
    from opgen.check import run_check

    path = _spec(tmp_path, f"b.matmul(x1.cast(i32), x2.cast(i32), transpose_b={tb})", "[N, K]" if tb else "[K, N]")
    u = kernel_build(load_spec(path))
    lay = u.lowered.layout
    assert lay.acc == "i32" and not lay.steps and not lay.mixed and lay.trans_b == tb
    r = run_check(path, dims=dict(zip("MKN", dims)), seed=3, progress=False, engine="kir")
    assert not r.faults and r.passed
    x1, x2 = (np.asarray(r.inputs[n], np.int64) for n in ("x1", "x2"))
    np.testing.assert_array_equal(np.asarray(r.arrays["y"], np.int64), x1 @ (x2.T if tb else x2))


@pytest.mark.parametrize("tb,dims", [(True, (37, 77, 45)), (False, (300, 333, 301)), (True, (70, 40, 33))])
def test_an_int8_a_stored_k_by_m_on_the_kernel_ir(tmp_path, tb, dims):
    """x1 int8 stored [K, M] (transpose_a): Aᵀ's L1 NZ moved to L0A by LoadDataWithTranspose, one per 32-row piece
    of the block's m (dstGap 0, dstFracGap k1 - 1: two ZZ fractal rows per piece), baseM a multiple of 32; with B
    stored [N, K] or [K, N] (both operands transposing), odd M / K / N, tails on both edges over 3 x 2 blocks; the
    int32 output on the Kernel IR interpreter against NumPy's int64 (x1ᵀ) @ x2."""
    from opgen.check import run_check
    from opgen.kernel import kir as K

    path = _spec(tmp_path, f"b.matmul(x1.cast(i32), x2.cast(i32), transpose_a=True, transpose_b={tb})",
                 "[N, K]" if tb else "[K, N]", x1="[K, M]")
    u = kernel_build(load_spec(path))
    assert u.lowered.layout.trans_a and u.lowered.layout.acc == "i32"
    (c,) = {id(c): c for c in u.lowered.programs.values()}.values()
    loads = [s for s in K.walk(c.process) if isinstance(s, K.LoadData) and s.with_transpose]
    assert any(s.dst_gap == K.Lit(0) for s in loads)
    r = run_check(path, dims=dict(zip("MKN", dims)), seed=4, progress=False, engine="kir")
    assert not r.faults and r.passed
    assert r.tiling_key and r.block_dim >= 1
    x1, x2 = (np.asarray(r.inputs[n], np.int64) for n in ("x1", "x2"))
    np.testing.assert_array_equal(np.asarray(r.arrays["y"], np.int64), x1.T @ (x2.T if tb else x2))


@pytest.mark.parametrize("body,x2,why", [
    ("b.matmul(x1, x2, transpose_b=True)", "[N, K]", "written b.matmul(x1.cast(i32), x2.cast(i32))"),
    ("b.matmul(x1.cast(i32), x2.cast(i32), transpose_b=True).cast(bf16)", "[N, K]",
     "converted to f32 once"),
])
def test_int8_forms_the_cube_does_not_lower_are_refused_naming_the_rule(tmp_path, body, x2, why):
    """A plain int8 matmul (an int8 result) and an int32 result cast straight to bf16 are refused, each naming the
    rule."""
    path = _spec(tmp_path, body, x2, "i32" if "cast(bf16)" not in body and "x1, x2," not in body else
                 "bf16" if "bf16" in body else "i8", x1="[K, M]" if "transpose_a" in body else "[M, K]")
    with pytest.raises(NoKernel, match=re.escape(why)):
        kernel_build(load_spec(path))


def _inputs(m: int, k: int, n: int, bias: bool, seed: int, pertoken: bool = False, tx2: bool = True,
            per_tensor: bool = False, tx1: bool = False) -> dict:
    """int8 x1 [m, k] (tx1, CANN's transpose_x1 true: [k, m]) and x2 [n, k] (tx2, CANN's transpose_x2 true) or
    [k, n] over the whole range, a dequantising
    scale [n] (per_tensor: [1]) in [1e-4, 2e-3] (the size of CANN's per-channel scales: the fp16 output stays
    finite), an fp32 bias [n] or None, a per-row pertoken_scale [m] in [0.25, 4] (sign flipped on every third row) or
    None."""
    rng = np.random.default_rng(seed)
    out = {"x1": _int8(rng, (k, m) if tx1 else (m, k)), "x2": _int8(rng, (n, k) if tx2 else (k, n)),
           "scale": rng.uniform(1e-4, 2e-3, 1 if per_tensor else n).astype(np.float32),
           "bias": rng.uniform(-4, 4, n).astype(np.float32) if bias else None}
    if pertoken:
        p = rng.uniform(0.25, 4, m)
        p[::3] *= -1
        out["pertoken_scale"] = p.astype(np.float32)
    return out


def _ref(inputs: dict, tx2: bool = True, tx1: bool = False) -> np.ndarray:
    """float64 (x1 @ x2ᵀ) * scale (or x1 @ x2 with tx2 false: x2 stored [K, N]) (* pertoken_scale[:, None]) (+ bias):
    aclnnQuantMatmulV4's formula with a pertoken scale and a float bias (ops-nn quant_batch_matmul_v3
    docs/aclnnQuantMatmulV4.md: the bias after both scales)."""
    x1, x2, s = (np.asarray(inputs[n], np.float64) for n in ("x1", "x2", "scale"))
    y = ((x1.T if tx1 else x1) @ (x2.T if tx2 else x2)) * s
    if inputs.get("pertoken_scale") is not None:
        y = y * np.asarray(inputs["pertoken_scale"], np.float64)[:, None]
    if inputs.get("bias") is not None:
        y = y + np.asarray(inputs["bias"], np.float64)
    return y


ULP = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}


def _close(got, ref, dt: str) -> bool:
    """Within one rounding of the output type of the float64 value (the int32 sums are exact; their fp32
    conversion and the scale's and bias's fp32 arithmetic add a few 2^-24 relative)."""
    got = np.asarray(got, np.float64)
    return got.shape == ref.shape and bool(np.all(np.isfinite(got)) and np.all(
        np.abs(got - ref) <= ULP[dt] * np.abs(ref) + 2.0 ** -20 * (np.abs(ref).max() + 1e-30)))


def test_the_example_layout_int8_fractals_and_the_epilogue():
    """QuantBatchMatmulV3: one class per transpose_x2 value and bias dtype (x2 [K, N]: LoadDataWithTranspose and Mmad
    n = nPad, 32-aligned; x2 [N, K]: one plain LoadData), each for the bias present and absent; int8 operands (K
    padded to 32, C0 of int8), an int32 L0C and workspace, the AIVs' int32 -> fp32 Cast before the scale; no K split (kSplit
    1 even where the fp16 tiling would split: few blocks, long K), baseK, baseKL1 and baseN multiples of 32."""
    import dataclasses

    from opgen.kernel import kir as K
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import program_inputs

    spec = load_spec(str(SPEC))
    u = kernel_build(spec)
    from opgen.kernel.cube import CubeFamily

    lays = CubeFamily().layouts(u.lowered)
    # per (transpose_x1, transpose_x2) and bias dtype (BIAS f32, then i32: the static dtype variable) a class per
    # scale form: [N] a column row of each pass, [1] one value read by the scalar unit; attrKey = index(transpose_x1)
    # + 2 index(transpose_x2), the form key the fastest; an int32 bias on the cube (under its presence)
    assert [x.trans_b for x in lays] == [False] * 8 + [True] * 8
    assert [x.trans_a for x in lays] == [False] * 4 + [True] * 4 + [False] * 4 + [True] * 4
    assert [x.bias for x in lays] == [(), (), ("bias", "i32"), ("bias", "i32")] * 4
    assert all(x.acc == "i32" and x.mixed for x in lays)
    assert u.lowered.extra["form_key"]
    classes = {id(c): c for c in u.lowered.programs.values()}
    assert len(classes) == 16
    assert sum(K.reads_gm_scalar(c) for c in classes.values()) == 8
    for c in classes.values():
        lets = {s.name: s.value for s in K.walk(c.process) if isinstance(s, K.Let)}
        assert lets["kPad"] == K.Fn("align_up", (K.Sym("kt"), K.Lit(32)))   # int8's C0: K padded to 32, not 16
        text = K.to_cpp(c)
        assert "LocalTensor<int32_t> c1" in text and "Fixpipe<int32_t, int32_t, CFG_ROW_MAJOR>" in text
        assert "LocalTensor<int8_t> a2" in text and "RoundMode::CAST_RINT" in text
        kn = "LoadDataWithTranspose(b2" in text   # x2 [K, N]: its squares into L0B
        assert kn == (lets["nPad"] == K.Fn("align_up", (K.Sym("nt"), K.Lit(32))))
        km = "LoadDataWithTranspose(a2" in text   # x1 [K, M]: its squares into L0A, 32-row pieces of m
        assert km == ("mPadA" in lets) and (not km or lets["mPadA"] == K.Fn("align_up", (K.Sym("mt"), K.Lit(32))))
    plat = dataclasses.replace(next(p for p in PLATFORMS.values() if p.aiv == 48 and p.arch == "dav-2201"), aic=3,
                               aiv=6)
    for (m, k, n), tx1, tx2 in itertools.product(((125, 1999, 111), (16, 65535, 16), (33, 50, 45)), (False, True),
                                                 (False, True)):
        v = u.tiling.program.evaluate(program_inputs(spec, u.tiling.program, u.tiling.inputs,
                                                     {"M": m, "K": k, "N": n}, {}, plat,
                                                     {"transpose_x1": tx1, "transpose_x2": tx2}))
        assert v["kSplit"] == 1 and v["baseK"] % 32 == 0 and v["baseKL1"] % 32 == 0 and v["fits"] == 1
        # whole int8 squares in L0B rows for x2 [K, N]; the [N, K] class keeps its 16-aligned blocks
        assert v["baseN"] == min(256, -(-n // (16 if tx2 else 32)) * (16 if tx2 else 32))
        # x1 [K, M]: whole squares along m in L0A (pieces of 32 rows); x1 [M, K] 16-aligned
        assert v["baseM"] == min(128, -(-m // (32 if tx1 else 16)) * (32 if tx1 else 16))


@pytest.mark.parametrize("tx2", [True, False])
@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
@pytest.mark.parametrize("bias", [True, False])
def test_the_example_on_the_kernel_ir_equals_float64(dt, bias, tx2):
    """Odd M 37, K 50 (a K tail inside one 64-wide chunk), N 45, bias present and absent, bf16 and fp16 outputs (the
    dtype rows), x2 stored [N, K] (transpose_x2 true) or [K, N] (CANN's default false: LoadDataWithTranspose), on
    the Kernel IR interpreter."""
    from opgen.check import run_check

    x = _inputs(37, 50, 45, bias, 7, tx2=tx2)
    r = run_check(str(SPEC), x, {"transpose_x2": tx2}, dtypes={"Y": dt}, progress=False, engine="kir")
    assert not r.faults and r.passed
    assert str(r.arrays["y"].dtype) == dt
    assert _close(r.arrays["y"], _ref(x, tx2), dt)


@pytest.mark.parametrize("dims,bias,dt,tx2", [((37, 50, 45), True, "float16", True),
                                              ((1700, 333, 300), False, "bfloat16", True),
                                              ((37, 50, 45), True, "bfloat16", False),
                                              ((1700, 333, 301), False, "float16", False)])
@pytest.mark.slow
def test_the_example_emulated_equals_float64(examples_gen, dims, bias, dt, tx2):
    """The emitted C++ on the g++ emulation: odd M / K / N with the bias, and more blocks than AI Cores
    (M 1700, N 300 / 301: 14 x 2 blocks on 24 AICs, tails on both edges, K 333 in two L1 panels and several L0
    chunks) without it; x2 stored [N, K] (transpose_x2 true) or [K, N] (false: LoadDataWithTranspose of int8
    squares), fp16 and bf16 outputs on each."""
    from opgen.check import run_check

    x = _inputs(*dims, bias, 3, tx2=tx2)
    r = run_check(str(SPEC), x, {"transpose_x2": tx2}, dtypes={"Y": dt}, gen_dir=examples_gen, progress=False)
    assert not r.faults and r.passed
    assert _close(r.arrays["y"], _ref(x, tx2), dt)
    if dims[0] == 1700:
        assert r.block_dim == 24


@pytest.mark.parametrize("tx2,dt,pertoken", [(False, "bfloat16", True), (True, "float16", False)])
def test_a_per_tensor_scale_of_the_example_on_the_kernel_ir_equals_float64(tx2, dt, pertoken):
    """QuantBatchMatmulV3's scale [1] (per tensor: the second shape form beside [N]) on the Kernel IR interpreter
    against float64, odd M 37, K 50, N 45, with the bias, x2 in both stored shapes; the form key is the tiling key's
    digit above the dtype row: (attrKey * 4 + formKey) * 100 + ..., formKey 1 for scale [1] (offset absent: its
    form 0), and a scale [N] call of the same attributes takes formKey 0 (attrKey = index(transpose_x1) +
    2 index(transpose_x2))."""
    from opgen.check import run_check

    x = _inputs(37, 50, 45, True, 17, pertoken=pertoken, tx2=tx2, per_tensor=True)
    r = run_check(str(SPEC), x, {"transpose_x2": tx2}, dtypes={"Y": dt}, progress=False, engine="kir")
    assert not r.faults and r.passed
    assert _close(r.arrays["y"], _ref(x, tx2), dt)
    assert r.tiling_key // 100 == int(tx2) * 2 * 4 + 1   # attrKey = index(transpose_x1) + 2 index(transpose_x2)
    x["scale"] = np.repeat(x["scale"], 45)   # the same values per channel: form 0, the same result
    r0 = run_check(str(SPEC), x, {"transpose_x2": tx2}, dtypes={"Y": dt}, progress=False, engine="kir")
    assert r0.passed and r0.tiling_key // 100 == int(tx2) * 2 * 4
    np.testing.assert_array_equal(np.asarray(r0.arrays["y"], np.float64), np.asarray(r.arrays["y"], np.float64))


@pytest.mark.parametrize("tx2,dt,dims", [(True, "bfloat16", (37, 50, 45)), (False, "float16", (300, 333, 301))])
def test_an_x1_stored_k_by_m_of_the_example_on_the_kernel_ir_equals_float64(tx2, dt, dims):
    """QuantBatchMatmulV3 with transpose_x1 true (x1 stored [K, M]: its int8 squares into L0A by
    LoadDataWithTranspose), x2 in both stored shapes, pertoken_scale and the bias, odd M / K / N and tails over
    blocks, on the Kernel IR interpreter against float64 (x1ᵀ @ x2) * scale * pertoken + bias."""
    from opgen.check import run_check

    x = _inputs(*dims, True, 21, pertoken=True, tx2=tx2, tx1=True)
    r = run_check(str(SPEC), x, {"transpose_x1": True, "transpose_x2": tx2}, dtypes={"Y": dt}, progress=False,
                  engine="kir")
    assert not r.faults and r.passed
    assert _close(r.arrays["y"], _ref(x, tx2, tx1=True), dt)


@pytest.mark.slow
def test_an_x1_stored_k_by_m_of_the_example_emulated_equals_float64(examples_gen):
    """The emitted C++ with transpose_x1 true: M 1700 (14 blocks of 128 rows, a 36-row tail: two 32-row pieces of m
    with the second's rows past M zero-filled), N 301, K 333, x2 [K, N] (both operands transposing), a per-tensor
    scale, bf16."""
    from opgen.check import run_check

    x = _inputs(1700, 333, 301, True, 23, tx2=False, per_tensor=True, tx1=True)
    r = run_check(str(SPEC), x, {"transpose_x1": True, "transpose_x2": False}, dtypes={"Y": "bfloat16"},
                  gen_dir=examples_gen, progress=False)
    assert not r.faults and r.passed
    assert _close(r.arrays["y"], _ref(x, False, tx1=True), "bfloat16")
    assert r.block_dim == 24


@pytest.mark.slow
def test_a_per_tensor_scale_of_the_example_emulated_equals_float64(examples_gen):
    """The emitted C++ with scale [1]: the TilingFunc computes the form key from the scale's shape and the entry
    runs that key's class (GmScalar read of the scale); more blocks than AI Cores (M 1700, N 301: tails on both
    edges), x2 [K, N], bf16, with pertoken_scale and the bias."""
    from opgen.check import run_check

    x = _inputs(1700, 333, 301, True, 19, pertoken=True, tx2=False, per_tensor=True)
    r = run_check(str(SPEC), x, {"transpose_x2": False}, dtypes={"Y": "bfloat16"}, gen_dir=examples_gen,
                  progress=False)
    assert not r.faults and r.passed
    assert _close(r.arrays["y"], _ref(x, False), "bfloat16")
    assert r.tiling_key // 100 == 1 and r.block_dim == 24


def test_a_bf16_scale_read_before_the_product_on_the_kernel_ir(tmp_path):
    """The int32 result's cast to f32 need not be the first op after the matmul (a bf16 scale cast first, the
    product on the right of the multiply), and a fixed bf16 epilogue input is staged as bf16 and Cast to fp32
    (CANN's bf16 scale rows): fp32 output against float64, odd M 19, K 70, N 33."""
    from opgen.check import run_check

    p = _spec(tmp_path, "scale.cast(f32) * b.matmul(x1.cast(i32), x2.cast(i32), transpose_b=True).cast(f32)",
              out="f32", scale="bf16")
    r = run_check(p, dims={"M": 19, "K": 70, "N": 33}, seed=1, progress=False, engine="kir")
    assert not r.faults and r.passed
    x1, x2, s = (np.asarray(r.inputs[n], np.float64) for n in ("x1", "x2", "scale"))
    ref = (x1 @ x2.T) * s
    assert np.all(np.abs(np.asarray(r.arrays["y"], np.float64) - ref) <= 2.0 ** -22 * np.abs(ref))


def test_a_fixed_half_output_is_written_with_sizeof_the_type_not_a_local_named_half(tmp_path):
    """An fp16 output declared without a dtype variable prints `half` in the AIVs' block, whose rows were once split
    by a local `int64_t half`: the copy-out's `sizeof(half)` then read 8 bytes and `opgen check` saw poisoned UB
    bytes reach y. No KIR scalar may take an element type's name (kir.check_name), and the rows' split is named
    otherwise; an element of y is 2 bytes, as IEEE binary16 stores it."""
    from opgen.kernel import kir as K

    p = _spec(tmp_path, '(b.matmul(x1.cast(i32), x2.cast(i32), transpose_b=True).cast(f32) * scale).cast(f16, "rint")',
              out="f16", scale="f32")
    u = kernel_build(load_spec(p))
    (c,) = {id(c): c for c in u.lowered.programs.values()}.values()
    names = {s.name for s in K.walk(c.process) if isinstance(s, (K.Let, K.FLet))}
    assert not names & set(K.ELEM_BYTES)
    text = K.to_cpp(c)
    assert "sizeof(half)" in text and not re.search(r"\bhalf\s*=", text)
    assert np.dtype(np.float16).itemsize == K.ELEM_BYTES["half"] == 2


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
@pytest.mark.parametrize("bias", [True, False])
def test_a_pertoken_scale_on_the_kernel_ir_equals_float64(dt, bias):
    """pertoken_scale [M] (one value per row, read by the AIVs' scalar unit per row of a pass): odd M 37, K 50,
    N 45, with and without the bias (added after both scales), on the Kernel IR interpreter."""
    from opgen.check import run_check

    x = _inputs(37, 50, 45, bias, 11, pertoken=True)
    r = run_check(str(SPEC), x, ATTRS, dtypes={"Y": dt}, progress=False, engine="kir")
    assert not r.faults and r.passed
    assert _close(r.arrays["y"], _ref(x), dt)


@pytest.mark.slow
@pytest.mark.parametrize("dims,bias,dt", [((37, 50, 45), True, "float16"), ((1700, 333, 300), True, "bfloat16")])
def test_a_pertoken_scale_emulated_equals_float64(examples_gen, dims, bias, dt):
    """The emitted C++ with pertoken_scale: odd M / K / N, and more blocks than AI Cores (tails on both edges, the
    per-row values of each AIV's half of a block), both with the bias after the scales."""
    from opgen.check import run_check

    x = _inputs(*dims, bias, 13, pertoken=True)
    r = run_check(str(SPEC), x, ATTRS, dtypes={"Y": dt}, gen_dir=examples_gen, progress=False)
    assert not r.faults and r.passed
    assert _close(r.arrays["y"], _ref(x), dt)
    if dims[0] == 1700:
        assert r.block_dim == 24


def test_a_transposing_load_of_a_2_byte_type_is_refused_by_the_verifier_and_faults_in_the_interpreter():
    """kir.LoadData(with_transpose=True) models int8 squares of 32 x 32 only: the verifier refuses it on half
    operands, and cubesem.transpose_squares is the transpose of each 32 x 32 square (element (i, j) to (j, i))."""
    from opgen.kernel import cubesem
    from opgen.kernel import kir as K

    sq = np.arange(2 * 1024)
    t = cubesem.transpose_squares(sq).reshape(2, 32, 32)
    np.testing.assert_array_equal(t, sq.reshape(2, 32, 32).transpose(0, 2, 1))
    cls = K.KernelClass("T", "optiling::TD", args=(), gms=(), locals=(
        K.Local("l1B_", K.TPos.B1), K.Local("l0B_", K.TPos.B2)), process=(K.CoreIf("cube", (
            K.InitBuffer("l1B_", K.Lit(4096)), K.InitBuffer("l0B_", K.Lit(4096)),
            K.Get("b1", "l1B_", "half"), K.Get("b2", "l0B_", "half"),
            K.LoadData(K.Ref("b2"), K.Ref("b1"), K.Lit(0), K.Lit(1), K.Lit(1), with_transpose=True)), "cube"),))
    with pytest.raises(K.IRError, match="LoadDataWithTranspose of half"):
        K.verify(cls)


def test_square_destinations_follow_dst_gap_and_dst_frac_gap():
    """LoadDataWithTranspose's destinations (512-B fractals): square r's first fractal at r (1 + dstGap), its
    second 1 + dstFracGap after it. B [K, N] (dstGap 1, dstFracGap 0): contiguous squares; Aᵀ [K, M] (dstGap 0,
    dstFracGap k1 - 1 = 2 for three squares): ZZ rows 0 and 1 of a piece, fractals 0-2 then 3-5; dstGap 0 with
    dstFracGap 0 puts square 0's second fractal on square 1's first: refused (the emulation faults the same)."""
    from opgen.kernel import cubesem

    assert cubesem.square_destinations(3, 1, 0) == [(0, 1), (2, 3), (4, 5)]
    assert cubesem.square_destinations(3, 0, 2) == [(0, 3), (1, 4), (2, 5)]
    assert cubesem.square_destinations(1, 0, 0) == [(0, 1)]
    with pytest.raises(ValueError, match="two fractals of 2 squares to one destination fractal"):
        cubesem.square_destinations(2, 0, 0)
    with pytest.raises(ValueError):
        cubesem.square_destinations(3, 1, 1)   # square 0's second fractal (2) is square 1's first


PER_TENSOR = '''
from opgen.dsl import A2, OpSpec, bf16, f16, f32, i8, i32
spec = OpSpec("Int8MmPerTensor", aclnn="aclnnInt8MmPerTensor", socs=(A2,), round="rint")
M = spec.dim("M", max=4096)
K = spec.dim("K", max=4096)
N = spec.dim("N", max=4096)
(Y,) = spec.dtype_vars("Y")
spec.input("x1", i8, [M, K])
spec.input("x2", i8, [N, K])
spec.input("scale", {scale_t}, [1])
spec.input("bias", f32, [N], optional=True)
spec.input("offset", f32, [], optional=True)
spec.output("y", Y, [M, N])
spec.dtypes((Y,), [(f16,), (bf16,)])
spec.example_call({{"M": 5, "K": 40, "N": 7}})


@spec.body
def _(b, x1, x2, scale, bias, offset):
    y = b.matmul(x1.cast(i32), x2.cast(i32), transpose_b=True).cast(f32) * (scale{widen} * 0.5)
    if bias is not None:
        y = y + bias
    if offset is not None:
        y = y + offset
    return {{"y": y.cast(Y, "rint")}}
'''


def _per_tensor_inputs(m, k, n, bias: bool, offset: bool, seed: int) -> dict:
    """_inputs with a per-tensor scale [1] (in [1e-4, 2e-3]) and an optional fp32 offset [] in [-2, 2]."""
    rng = np.random.default_rng(seed)
    x = _inputs(m, k, n, bias, seed)
    x["scale"] = rng.uniform(1e-4, 2e-3, 1).astype(np.float32)
    x["offset"] = np.asarray(rng.uniform(-2, 2), np.float32) if offset else None
    return x


def _per_tensor_ref(x: dict) -> np.ndarray:
    """float64 (x1 @ x2ᵀ) * (scale * 0.5) (+ bias) (+ offset)."""
    y = (np.asarray(x["x1"], np.float64) @ np.asarray(x["x2"], np.float64).T) * (float(x["scale"][0]) * 0.5)
    for name in ("bias", "offset"):
        if x.get(name) is not None:
            y = y + np.asarray(x[name], np.float64)
    return y


@pytest.mark.parametrize("bias,offset,dt", [(True, True, "float16"), (False, False, "bfloat16"),
                                            (False, True, "float16")])
def test_a_per_tensor_scale_and_offset_on_the_kernel_ir_equal_float64(tmp_path, bias, offset, dt):
    """Epilogue inputs of one value (a scale [1], an optional offset []) are read once per AIV by the scalar unit
    (an FLoad of GM element 0; the optional one under its presence guard, 0 otherwise) and used as scalars of the
    epilogue's math (Muls / Adds): odd M 37, K 50, N 45 on the Kernel IR interpreter against float64."""
    from opgen.check import run_check

    p = tmp_path / "pt.py"
    p.write_text(PER_TENSOR.format(scale_t="f32", widen=""))
    x = _per_tensor_inputs(37, 50, 45, bias, offset, 5)
    r = run_check(str(p), x, {}, dtypes={"Y": dt}, progress=False, engine="kir")
    assert not r.faults and r.passed
    assert _close(r.arrays["y"], _per_tensor_ref(x), dt)


@pytest.mark.parametrize("scale_t, dt", [("bf16", "bfloat16"), ("f16", "float16")])
def test_a_per_tensor_scale_of_a_16_bit_dtype_on_the_kernel_ir_equals_float64(tmp_path, scale_t, dt):
    """A one-value epilogue input of a 16-bit float dtype (a bf16 or fp16 scale [1] widened in the body) is read by
    the scalar unit in its type and converted exactly (GmScalar: ToFloat for bf16, a static_cast for half;
    docs/reference/ascendc.md §1.4), not staged: odd M 37, K 50, N 45 on the Kernel IR interpreter against float64
    of the scale as stored (rounded to its dtype)."""
    import torch

    from opgen.check import run_check

    p = tmp_path / "pt.py"
    p.write_text(PER_TENSOR.format(scale_t=scale_t, widen=".f32()"))
    x = _per_tensor_inputs(37, 50, 45, True, False, 5)
    x["scale"] = torch.tensor(x["scale"]).to(getattr(torch, dt)).float().numpy()
    assert x["scale"][0] != np.float32(_per_tensor_inputs(37, 50, 45, True, False, 5)["scale"][0])   # rounded
    r = run_check(str(p), x, {}, dtypes={"Y": dt}, progress=False, engine="kir")
    assert not r.faults and r.passed
    assert _close(r.arrays["y"], _per_tensor_ref(x), dt)


@pytest.mark.slow
def test_a_per_tensor_scale_and_offset_emulated_equal_float64(tmp_path):
    """The emitted C++ (GmScalar in the cube kernel's skeleton, the offset's guarded read): both present, fp16,
    more blocks than AI Cores (M 300, K 333, N 70)."""
    from opgen.check import run_check
    from opgen.codegen import write_ops

    p = tmp_path / "pt.py"
    p.write_text(PER_TENSOR.format(scale_t="f32", widen=""))
    write_ops([str(p)], tmp_path / "gen", jobs=1)
    x = _per_tensor_inputs(300, 333, 70, True, True, 9)
    r = run_check(str(p), x, {}, dtypes={"Y": "float16"}, gen_dir=str(tmp_path / "gen"), progress=False)
    assert not r.faults and r.passed
    assert _close(r.arrays["y"], _per_tensor_ref(x), "float16")


def test_an_int8_x1_stored_k_by_m_is_refused_for_a_soc_without_an_l0a_transposing_load(tmp_path):
    """The example with ascend950 (arch dav-3510, whose L1 -> L0A path has no LoadDataWithTranspose) among its SoCs:
    the class of transpose_x1 = true is refused at generation naming the SoC, its arch and the attribute value; with
    transpose_x1 limited to false (x1 [M, K] only) the same SoCs lower."""
    src = SPEC.read_text().replace("socs=(A2, A3)", "socs=(A2, A3, A5)").replace(
        "from opgen.dsl import A2, A3,", "from opgen.dsl import A2, A3, A5,")
    p = tmp_path / "qbm_950.py"
    p.write_text(src)
    with pytest.raises(NoKernel) as e:
        kernel_build(load_spec(str(p)))
    msg = str(e.value).split(" [cube family]")[0]
    assert "SoC ascend950 (arch dav-3510) does not have" in msg and "transpose_x1=True" in msg \
        and "int8 x1 stored [K, M]" in msg, msg
    (tmp_path / "mk").mkdir()
    q = tmp_path / "mk" / "qbm_950.py"
    q.write_text(src.replace('spec.attr("transpose_x1", bool, False, static=True)',
                             'spec.attr("transpose_x1", bool, False, static=True, choices=(False,))').replace(
        '{False: [M, K], True: [K, M]}, form_by="transpose_x1"', '{False: [M, K]}, form_by="transpose_x1"'))
    u = kernel_build(load_spec(str(q)))
    assert not any(x.trans_a for x in u.lowered.extra["layouts"].values())


def test_the_int8_x1_transpose_refusal_reads_the_soc_table(tmp_path, monkeypatch):
    """Whether a SoC has the L1 -> L0A transposing load is the table's l0a_transpose_load, not its arch's name: with
    ascend950's row stating it, the spec listing A5 lowers the transpose_x1 = true class (LoadDataWithTranspose into
    L0A); with one of ascend910_93's rows stating its absence, the spec of A2 / A3 alone is refused naming that SoC,
    its arch and the capability."""
    import dataclasses

    from opgen.platforms import PLATFORMS

    src = SPEC.read_text().replace("socs=(A2, A3)", "socs=(A2, A3, A5)").replace(
        "from opgen.dsl import A2, A3,", "from opgen.dsl import A2, A3, A5,")
    p = tmp_path / "qbm_950.py"
    p.write_text(src)
    with monkeypatch.context() as m:
        m.setitem(PLATFORMS, "ascend950", dataclasses.replace(PLATFORMS["ascend950"], l0a_transpose_load=True))
        u = kernel_build(load_spec(str(p)))
        assert any(x.trans_a for x in u.lowered.extra["layouts"].values())
    a3 = next(k for k, v in PLATFORMS.items() if v.soc_key == "ascend910_93")
    monkeypatch.setitem(PLATFORMS, a3, dataclasses.replace(PLATFORMS[a3], l0a_transpose_load=False))
    q = tmp_path / "qbm_a2_a3.py"   # a file of its own: load_spec / kernel_build memoise the example's build
    q.write_text(SPEC.read_text())
    with pytest.raises(NoKernel) as e:
        kernel_build(load_spec(str(q)))
    msg = str(e.value).split(" [cube family]")[0]
    assert "SoC ascend910_93 (arch dav-2201) does not have" in msg and "l0a_transpose_load false" in msg \
        and "transpose_x1=True" in msg, msg


INT32_BIAS = '''
from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32, i8, i32

spec = OpSpec("QuantMmI32Bias", aclnn="aclnnQuantMmI32Bias", socs=(A2, A3), round="rint",
              doc="int8 product plus an int32 bias in the int32 sums, then the dequantisation scale")
M = spec.dim("M", max=65535)
K = spec.dim("K", max=65535)
N = spec.dim("N", max=65535)
(Y,) = spec.dtype_vars("Y")
spec.input("x1", i8, [M, K])
spec.input("x2", i8, {x2})
spec.input("scale", f32, [N])
spec.input("bias", i32, [N], optional=True)
spec.output("y", Y, [M, N])
spec.dtypes((Y,), [(bf16,), (f16,)])
spec.example_call({{"M": 37, "K": 50, "N": 45}})


@spec.body
def _(b, x1, x2, scale, bias):
    acc = b.matmul(x1.cast(i32), x2.cast(i32), transpose_b={tb})
    if bias is not None:   # aclnnQuantMatmulV4's INT32 bias: (x1 @ x2 + bias) * scale
        acc = acc + bias
    return {{"y": (acc.cast(f32) * scale).cast(Y, "rint")}}
'''


def _int32_bias_case(tmp_path, tb: bool):
    p = tmp_path / f"qmm_i32_bias_{int(tb)}.py"
    p.write_text(INT32_BIAS.format(x2="[N, K]" if tb else "[K, N]", tb=tb))
    return p


def _int32_bias_inputs(M, K, N, tb, bias, seed):
    rng = np.random.default_rng(seed)
    x = {"x1": _int8(rng, (M, K)), "x2": _int8(rng, (N, K) if tb else (K, N)),
         "scale": (rng.random(N) * 1e-5 + 1e-6).astype(np.float32),   # |y| < 2.5e4: inside fp16's range
         "bias": rng.integers(-2 ** 30, 2 ** 30, N).astype(np.int32) if bias else None}
    if bias:
        x["bias"][:2] = (2 ** 31 - 1 - 2 ** 21, -2 ** 31 + 2 ** 21)   # near the int32 range, the sums still inside
    return x


def _int32_bias_ref(x, tb):
    """float64 of (x1 @ x2 + bias) * scale, the int32 sum exact (|sum| < 2^31 here)."""
    b = x["x2"].astype(np.float64)
    acc = x["x1"].astype(np.float64) @ (b.T if tb else b)
    if x["bias"] is not None:
        acc = acc + x["bias"].astype(np.float64)
    assert np.abs(acc).max() < 2 ** 31
    return acc * x["scale"].astype(np.float64)


def test_an_int32_bias_is_added_in_the_bias_table_before_the_scale(tmp_path):
    """The add of an int32 [N] input to the int8 product's int32 result, before its cast to f32, is the cube's: the
    row GM -> L1 -> bias table as int32 (LoadBias int32_t into int32_t) and the first K chunk's Mmad starting at it,
    under the bias's presence; the AIVs' epilogue starts from the cast (the scale only). Odd M 37, K 50, N 45 on
    the Kernel IR interpreter against float64 (bias values up to near 2^31; the bias after the scale would be off by
    orders of magnitude), bias present and absent, x2 [K, N] and [N, K], fp16 and bf16."""
    from opgen.check import run_check
    from opgen.kernel import kir as K

    for tb in (False, True):
        p = _int32_bias_case(tmp_path, tb)
        u = kernel_build(load_spec(str(p)))
        lay = next(iter(u.lowered.extra["layouts"].values()))
        assert lay.bias == ("bias", "i32") and lay.acc == "i32" and [st[0] for st in lay.steps][:2] == ["acc", "load"]
        cls = next(iter(u.lowered.programs.values()))
        text = K.to_cpp(cls)
        assert "LocalTensor<int32_t> bt" in text or "int32_t> bt =" in text, text[:2000]
        for bias, dt in ((True, "float16"), (True, "bfloat16"), (False, "float16")):
            x = _int32_bias_inputs(37, 50, 45, tb, bias, 11 + tb)
            r = run_check(str(p), x, {}, dtypes={"Y": dt}, progress=False, engine="kir")
            assert not r.faults and r.passed, (tb, bias, dt)
            assert _close(r.arrays["y"], _int32_bias_ref(x, tb), dt), (tb, bias, dt)


@pytest.mark.slow
def test_an_int32_bias_emulated_equals_float64(tmp_path):
    """The emitted C++ (DataCopy of the int32 row into the int32 bias table, Mmad with the int32 bias) on the CPU
    emulation: more blocks than AI Cores (M 300, K 333, N 70), x2 [K, N], bias present, fp16 and bf16."""
    from opgen.check import run_check
    from opgen.codegen import write_ops

    p = _int32_bias_case(tmp_path, False)
    write_ops([str(p)], tmp_path / "gen", jobs=1)
    for dt in ("float16", "bfloat16"):
        x = _int32_bias_inputs(300, 333, 70, False, True, 13)
        r = run_check(str(p), x, {}, dtypes={"Y": dt}, gen_dir=str(tmp_path / "gen"), progress=False)
        assert not r.faults and r.passed, dt
        assert _close(r.arrays["y"], _int32_bias_ref(x, False), dt), dt


def _i32_bias_inputs(m, k, n, seed, pertoken, tx2):
    """_inputs with an int32 bias [n] in [-2^20, 2^20) (the int32 sums stay inside int32; y inside fp16's range)."""
    x = _inputs(m, k, n, False, seed, pertoken=pertoken, tx2=tx2)
    x["bias"] = np.random.default_rng(seed + 100).integers(-2 ** 20, 2 ** 20, n).astype(np.int32)
    return x


def _i32_bias_ref(x, tx2):
    """float64 of aclnnQuantMatmulV4's INT32-bias formula: (x1 @ x2 + bias) * scale (* pertokenScaleOptional)."""
    x1, x2 = np.asarray(x["x1"], np.float64), np.asarray(x["x2"], np.float64)
    y = (x1 @ (x2.T if tx2 else x2) + np.asarray(x["bias"], np.float64)) * np.asarray(x["scale"], np.float64)
    if x.get("pertoken_scale") is not None:
        y = y * np.asarray(x["pertoken_scale"], np.float64)[:, None]
    return y


@pytest.mark.parametrize("tx2,dt,pertoken", [(False, "bfloat16", True), (True, "float16", False),
                                             (False, "float16", False)])
def test_the_examples_int32_bias_enters_before_the_scale_on_the_kernel_ir(tx2, dt, pertoken):
    """QuantBatchMatmulV3 with an int32 bias (BIAS = i32, a static dtype variable: its own class, the bias in the
    int32 bias table) against float64 of (x1 @ x2 + bias) * scale (* pertoken), odd M 37, K 50, N 45; the fp32 bias
    formula would be far off. The fp32 bias of the same call site keeps the other class (the add after the scales)."""
    from opgen.check import run_check

    x = _i32_bias_inputs(37, 50, 45, 21, pertoken, tx2)
    r = run_check(str(SPEC), x, {"transpose_x2": tx2}, dtypes={"Y": dt}, progress=False, engine="kir")
    assert not r.faults and r.passed
    ref = _i32_bias_ref(x, tx2)
    assert _close(r.arrays["y"], ref, dt)
    after = {**x, "bias": x["bias"].astype(np.float64)}
    assert np.max(np.abs(_ref(after, tx2) - ref)) > 100   # the other order: not what the kernel computed
    spec = load_spec(str(SPEC))
    assert [d.value for d in spec.bind(x, {"transpose_x2": tx2}, {"Y": dt}).key.dtypes] == ["i32"]


@pytest.mark.slow
@pytest.mark.parametrize("dims,dt,tx2", [((37, 50, 45), "float16", True), ((300, 333, 70), "bfloat16", False)])
def test_the_examples_int32_bias_emulated_equals_float64(examples_gen, dims, dt, tx2):
    """The emitted C++ of the int32-bias classes (the entry instantiating, per dtype row, the class of its BIAS):
    odd M / K / N and more blocks than AI Cores, x2 in both stored shapes, fp16 and bf16."""
    from opgen.check import run_check

    x = _i32_bias_inputs(*dims, 23, False, tx2)
    r = run_check(str(SPEC), x, {"transpose_x2": tx2}, dtypes={"Y": dt}, gen_dir=examples_gen, progress=False)
    assert not r.faults and r.passed
    assert _close(r.arrays["y"], _i32_bias_ref(x, tx2), dt)
