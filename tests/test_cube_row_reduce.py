"""Row reductions over N in the cube family's vector epilogue (docs/design.md "Cube family: row reductions in the
epilogue"): MatmulRmsNorm (a row mean, rsqrt, gamma) and MatmulSoftmax (a row maximum, then the row sum of the
shifted exponentials) against float64 NumPy on the Kernel IR interpreter (few AI Cores: tails over the cores, a
workspace slot reused, the K split) and on the emulation; the refusals beyond the first step's bound."""

from __future__ import annotations

import dataclasses
import functools
import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from opgen.kernel.family import NoKernel
from opgen.registry import load_spec
from opgen.tiling.pipeline import kernel_build

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "specs"
ULP = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
NP = {"float16": np.float16}


@functools.cache
def _unit(name: str):
    """kernel_build of examples/specs/<name>.py, once per worker (read only)."""
    return kernel_build(load_spec(str(EXAMPLES / f"{name}.py")))


def _ref(name: str, x, w, gamma=None, scale=1.0, eps=1e-6):
    """The spec's formula in float64 NumPy (RMSNorm over N times gamma; softmax over N of the scaled product)."""
    h = x.astype(np.float64) @ w.astype(np.float64)
    if name == "matmul_rms_norm":
        return h / np.sqrt((h * h).mean(-1, keepdims=True) + eps) * gamma.astype(np.float64)
    s = h * scale
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _close(got, ref, dt: str, k: int) -> bool:
    """Within one rounding of the output type plus fp32 accumulation over k and over the row (relative to the row's
    scale; an absolute half step of the output's smallest normal for the softmax's tiny values)."""
    got = np.asarray(got, dtype=np.float64)
    scale = np.abs(ref).mean(-1, keepdims=True)
    bound = ULP[dt] * np.abs(ref) + (2.0 ** -22 * (k + ref.shape[-1]) + ULP[dt] / 4) * scale + 2.0 ** -25
    return got.shape == ref.shape and bool(np.all(np.abs(got - ref) <= bound))


def _kir(name: str, m: int, k: int, n: int, dt: str, aic: int, seed: int, attrs: dict, min_ksplit: int = 1,
         ub: int | None = None):
    """Run the example's kernel on the Kernel IR interpreter on `aic` AI Cores (2 AIVs each; with `ub`, an AIV UB of
    that many bytes for the tiling) for [m, k] x [k, n] in dtype `dt`; returns (output, reference, tiling values)."""
    import ml_dtypes

    from opgen.ir.dtypes import parse_dtype
    from opgen.kernel import kir_interp
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import program_inputs

    u = _unit(name)
    spec = u.spec if hasattr(u, "spec") else load_spec(str(EXAMPLES / f"{name}.py"))
    cls = next(iter(u.lowered.programs.values()))
    plat = dataclasses.replace(next(p for p in PLATFORMS.values() if p.aiv == 48 and p.arch == "dav-2201"), aic=aic,
                               aiv=2 * aic)
    if ub is not None:
        plat = dataclasses.replace(plat, ub_bytes=ub)
    v = u.tiling.program.evaluate(program_inputs(spec, u.tiling.program, u.tiling.inputs, {"M": m, "K": k, "N": n},
                                                 {"T": parse_dtype(dt)}, plat, attrs))
    assert v["kSplit"] >= min_ksplit, v["kSplit"]
    npt = np.float16 if dt == "float16" else ml_dtypes.bfloat16
    rng = np.random.default_rng(seed)
    x, w = rng.uniform(-1, 1, (m, k)).astype(npt), rng.uniform(-1, 1, (k, n)).astype(npt)
    gm = {"x": x, "w": w}
    extra = {}
    if name == "matmul_rms_norm":
        gm["gamma"] = rng.uniform(0.5, 1.5, n).astype(npt)
        extra = {"gamma": gm["gamma"], "eps": attrs["epsilon"]}
    elif name == "matmul_softmax":
        extra = {"scale": attrs["scale"]}
    if name == "matmul_dynamic_quant":   # y int8 (a sentinel 99 no row quantises to) and the per-row scale
        out, gm["scale"] = np.full(m * n, 99, np.int8), np.full(m, np.nan, np.float32)
    else:
        out = np.full(m * n, np.nan, npt)
    gm["y"] = out
    r = kir_interp.run(cls, {f: v[f] for f in cls.fields}, gm, v["blockDim"],
                       workspace=np.zeros(v["workspaceBytes"] // 4, np.float32),
                       types={"T": "half" if dt == "float16" else "bfloat16_t"}, verify_first=False)
    assert r.ok, r.faults[:1]
    if name == "matmul_dynamic_quant":
        return (out.reshape(m, n), gm["scale"]), (x, w), v
    return out.reshape(m, n), _ref(name, x, w, **extra), v


def _quant_ok(y, scale, x, w) -> bool:
    """MatmulDynamicQuant's outputs against float64: h = x @ w, s = max |h| over N / 127; the scale within fp32
    accumulation over K and the division (relative 2^-22 * (K + 8)), y the integer nearest h / s (ties to even, the
    one rounding of AscendC's fp32 -> half CAST_ODD -> int8 CAST_RINT, docs/reference/ascendc.md §1.12): within half
    a step of the float64 quotient plus the quotient's fp32 error (a value that close to a tie may round either
    way)."""
    h = np.asarray(x, np.float64) @ np.asarray(w, np.float64)
    s = np.abs(h).max(-1) / 127.0
    rel = 2.0 ** -22 * (x.shape[1] + 8)
    q = h / s[:, None]
    return (y.dtype == np.int8 and bool(np.all(np.abs(np.asarray(scale, np.float64) - s) <= rel * s))
            and bool(np.all(np.abs(y - q) <= 0.5 + 2 * rel * 127)) and int(np.abs(y).max()) == 127)


@pytest.mark.parametrize("name,attrs", [("matmul_rms_norm", {"epsilon": 1e-6}), ("matmul_softmax", {"scale": 0.7})])
@pytest.mark.parametrize("dt,m,k,n,nblocks,aic,regions", [
    ("float16", 1000, 33, 45, 1, 3, 1),      # 8 bands over 3 AI Cores: two regions (295 KB) past the output's 90 KB
    ("bfloat16", 301, 70, 250, 1, 3, 1),     # 3 bands, one per AI Core
    ("bfloat16", 1000, 70, 1000, 4, 3, 1),   # 8 bands: two regions (3.1 MB) past the output's 2 MB
    ("float16", 77, 45, 2999, 12, 3, 1),     # one band
    ("float16", 700, 33, 45, 1, 1, 2)])      # 6 bands on one AI Core: two regions (49 KB) within the output's 63 KB
def test_row_reduction_epilogue_on_the_interpreter_equals_float64(name, attrs, dt, m, k, n, nblocks, aic, regions):
    """Odd M / K / N over 3 AI Cores (or one): 8 bands (the first cores take three: one band region reused after its
    free flag, the workspace budget's fallback), 3 bands, one band, 6 bands on one AI Core in two regions in turn; a
    band of one block (N <= 256) or of 4 and 12 blocks of N (the AIC writes each into its columns of the band's
    region; N 2999 a 183-column tail block); the last band's rows a tail split over the two AIVs; each row reduced
    over all its N columns. The workspace from docs/design.md "Cube family: the band workspace budget": two
    regions of baseM x align_up(N, 16) fp32 per AI Core when a core takes more than one band and they stay within the
    output's bytes, else one."""
    got, ref, v = _kir(name, m, k, n, dt, aic, 7, attrs)
    pitch, bm = -(-n // 16) * 16, min(128, -(-m // 16) * 16)
    bands = -(-m // bm)
    assert v["nBlocks"] == nblocks and v["kSplit"] == 1 and v["epiPitch"] == pitch and v["baseM"] == bm
    bd = min(aic, bands)
    two = bands > bd and bd * 2 * bm * pitch * 4 <= m * n * 2
    assert v["blockDim"] == bd and two == (regions == 2) and v["epiRegions"] == regions
    assert v["workspaceBytes"] == bd * regions * bm * pitch * 4
    assert _close(got, ref, dt, k), np.abs(got - ref).max()


@pytest.mark.parametrize("dt,m,k,n,ksplit", [("float16", 301, 33, 45, False), ("bfloat16", 77, 45, 2999, False),
                                              ("float16", 125, 1999, 111, True)])
def test_a_per_row_second_output_on_the_interpreter_equals_float64(dt, m, k, n, ksplit):
    """MatmulDynamicQuant (docs/design.md "Cube family: a per-row second output"): y int8 [M, N] and scale fp32 [M]
    over 3 AI Cores -- 3 bands of one block (the last 45 rows: each AIV's rows a tail), a band of 12 blocks (N 2999;
    one AI Core), the K split (the
    AIVs add the partials, then quantise) -- each row's scale written by the AIV that owns the row, once per pass."""
    (y, scale), (x, w), v = _kir("matmul_dynamic_quant", m, k, n, dt, 3, 11, {}, min_ksplit=2 if ksplit else 1)
    assert (v["kSplit"] > 1) == ksplit
    assert _quant_ok(y, scale, x, w), (np.abs(y - (x.astype(np.float64) @ w.astype(np.float64)) / (
        np.abs(x.astype(np.float64) @ w.astype(np.float64)).max(-1, keepdims=True) / 127)).max())


def test_an_int8_outputs_band_budget_counts_one_byte_per_element():
    """The band workspace budget compares two regions with the output's bytes, the output's own element size: M 700,
    N 45 on one AI Core (6 bands) -- two regions of 128 x 48 fp32 (49,152 B) are within an fp16 output's 63,000 B
    (matmul_rms_norm: 2 regions) but not within MatmulDynamicQuant's int8 output's 31,500 B (1 region); the int8
    output on one region still equals float64."""
    *_x, v = _kir("matmul_rms_norm", 700, 33, 45, "float16", 1, 3, {"epsilon": 1e-6})
    assert (v["outBytes"], v["epiRegions"]) == (700 * 45 * 2, 2)
    (y, scale), (x, w), v = _kir("matmul_dynamic_quant", 700, 33, 45, "float16", 1, 3, {})
    assert (v["outBytes"], v["epiRegions"], v["workspaceBytes"]) == (700 * 45, 1, 128 * 48 * 4)
    assert _quant_ok(y, scale, x, w)


@pytest.mark.parametrize("name,attrs", [("matmul_rms_norm", {"epsilon": 1e-5}), ("matmul_softmax", {"scale": 0.05})])
def test_row_reduction_after_the_k_split_equals_float64(name, attrs):
    """M 125, K 1999, N 111 on 3 AI Cores: the tiling splits K (kSplit > 1); the AIVs add the partials in k order,
    then reduce each complete row."""
    got, ref, v = _kir(name, 125, 1999, 111, "float16", 3, 5, attrs, min_ksplit=2)
    assert _close(got, ref, "float16", 1999), np.abs(got - ref).max()


SPEC = """
from opgen.dsl import A2, OpSpec, bf16, f16, f32
spec = OpSpec("Gemm", aclnn="aclnnGemm", socs=(A2,), round="rint")
M = spec.dim("M", max=4096)
K = spec.dim("K", max=4096)
N = spec.dim("N", max={nmax})
(U,) = spec.dtype_vars("U")
spec.input("x", U, [M, K])
spec.input("w", U, [K, N])
spec.output("y", U, [M, N])
spec.dtypes((U,), [(f16,), (bf16,)])
spec.example_call({{"M": 5, "K": 7, "N": 9}})


@spec.body
def _(bb, x, w):
    h = bb.matmul(x, w)
    return {{"y": ({body}).cast(U, "rint")}}
"""


def _spec(tmp_path, body: str, nmax: int = 4096):
    p = tmp_path / "gemm.py"
    p.write_text(textwrap.dedent(SPEC.format(body=body, nmax=nmax)))
    return load_spec(str(p))


def _refusal(spec) -> str:
    with pytest.raises(NoKernel) as e:
        kernel_build(spec)
    return str(e.value).split(" [cube family]")[0]


@pytest.mark.parametrize("name,dt,m,k,n,ub,passes", [
    ("matmul_rms_norm", "bfloat16", 20, 33, 6600, None, 2),    # past the whole-row bound (6544): chunks 6528 + 72
    ("matmul_softmax", "float16", 140, 20, 600, 8192, 3),      # 2 bands over 2 AI Cores, chunks 288 + 288 + 24
    ("matmul_dynamic_quant", "bfloat16", 130, 45, 300, 6144, 2),  # 2 bands, chunks 192 + 108
])
def test_rows_longer_than_ub_on_the_interpreter_equal_float64(name, dt, m, k, n, ub, passes):
    """A row of N the UB cannot hold (N past MatmulRmsNorm's old bound on the real UB; a smaller UB for the tiling
    elsewhere, so small shapes take several chunks and tails over the cores): epiChunk < epiPitch, each AIV's rows
    one at a time, `passes` passes over their column chunks (the reductions accumulated across chunks, the row read
    again from the band's region), against float64 NumPy (docs/design.md "Cube family: rows longer than UB")."""
    attrs = {"matmul_rms_norm": {"epsilon": 1e-6}, "matmul_softmax": {"scale": 0.7}}.get(name, {})
    got, ref, v = _kir(name, m, k, n, dt, 3, 13, attrs, ub=ub)
    assert v["epiChunk"] < v["epiPitch"] == -(-n // 16) * 16 and v["epiChunk"] % 32 == 0 and v["fits"] == 1
    prog = next(iter(_unit(name).lowered.programs.values()))
    from opgen.kernel import kir as K
    assert K.to_text(prog).count(f"pass {passes} of {passes} over the row's column chunks") == 1
    if name == "matmul_dynamic_quant":
        assert _quant_ok(*got, *ref)
    else:
        assert _close(got, ref, dt, k), np.abs(got - ref).max()


def test_n_beyond_a_row_in_ub_generates_and_the_tiling_streams_the_row(tmp_path):
    """N up to 65535 (Nd2Nz's pitch bound): the buffer proof over the spec's dim domain holds (a row the UB cannot
    hold streams in column chunks), and at N 65535 the tiling's chunk is a multiple of 32 columns whose pass fits
    the UB."""
    from opgen.ir.dtypes import parse_dtype
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import program_inputs

    spec = _spec(tmp_path, "h - h.sum(-1)", nmax=65535)
    u = kernel_build(spec)
    plat = next(p for p in PLATFORMS.values() if p.aiv == 48 and p.arch == "dav-2201")
    v = u.tiling.program.evaluate(program_inputs(spec, u.tiling.program, u.tiling.inputs,
                                                 {"M": 300, "K": 64, "N": 65535}, {"U": parse_dtype("float16")},
                                                 plat, {}))
    assert v["fits"] == 1 and v["epiPitch"] == 65536 and 0 < v["epiChunk"] < 65536 and v["epiChunk"] % 32 == 0
    assert v["ubEpiBytes"] <= plat.ub_bytes


@pytest.mark.parametrize("body,words", [
    ("h - h.sum(0)", "a reduction (sum over M) in the matmul's epilogue: the epilogue reduces an [M, N] row of the "
                     "result over N (its last axis) only"),
    ("h - h.min(-1)", "a reduction (min over N) in the matmul's epilogue: the row reductions are the sum, the mean "
                      "and the maximum"),
])
def test_other_reductions_are_refused_in_the_users_terms(tmp_path, body, words):
    assert words in _refusal(_spec(tmp_path, body))


TWO_OUTPUTS = """
from opgen.dsl import A2, OpSpec, bf16, f16, f32
spec = OpSpec("Gemm2", aclnn="aclnnGemm2", socs=(A2,), round="rint")
M = spec.dim("M", max=4096)
K = spec.dim("K", max=4096)
N = spec.dim("N", max=4096)
(U,) = spec.dtype_vars("U")
spec.input("x", U, [M, K])
spec.input("w", U, [K, N])
spec.output("y", U, [M, N])
spec.output("z", {zt}, {zshape})
spec.dtypes((U,), [(f16,), (bf16,)])
spec.example_call({{"M": 5, "K": 7, "N": 9}})


@spec.body
def _(bb, x, w):
    h = bb.matmul(x, w)
    return {{"y": h.cast(U, "rint"), "z": {z}}}
"""


@pytest.mark.parametrize("zt,zshape,z,words", [
    ("U", "[M, N]", "(h * 2.0).cast(U, 'rint')", "2 outputs, 2 of them [M, N]: the cube family writes one [M, N] "
                                                 "output and per-row values beside it"),
    ("f32", "[1, N]", "h.sum(0)", "a reduction (sum over M) in the matmul's epilogue"),
    ("f32", "[M, N]", "h * 2.0", "2 outputs, 2 of them [M, N]"),
])
def test_second_outputs_other_than_per_row_values_are_refused(tmp_path, zt, zshape, z, words):
    """Beside the [M, N] output the epilogue writes per-row fp32 values only: a second [M, N] output or a column
    sum is refused naming the outputs or the construct."""
    p = tmp_path / "gemm2.py"
    p.write_text(textwrap.dedent(TWO_OUTPUTS.format(zt=zt, zshape=zshape, z=z)).lstrip())
    assert words in _refusal(load_spec(str(p)))


def test_per_row_arithmetic_is_scalar_and_the_rows_run_row_by_row(tmp_path):
    """h / (max|h| over N + 1): the maximum a RowMax call, + 1 a float let of the row, the division a Duplicate and
    a Div; the pass's rows in one loop (per-row values live in scalars), the RowMax method in the class."""
    from opgen.kernel import kir as K

    u = kernel_build(_spec(tmp_path, "h / (bb.abs(h).max(-1) + 1.0)"))
    cls = next(iter(u.lowered.programs.values()))
    text = K.to_text(cls)
    assert "call RowMax(" in text and "func RowMax(" in text and "RowSum" not in text
    assert "v.Abs" in text and "v.Div" in text


@pytest.mark.slow
@pytest.mark.parametrize("name", ["matmul_rms_norm", "matmul_softmax"])
def test_row_reduction_epilogue_emulated_matches_float64(examples_gen, name):
    """The generated package on the emulation (the g++ build of the emitted C++): odd M / K / N, fp16 and bf16,
    N = 45 (a band of one block), 1000 (4 blocks) and 2999 (12, one AI Core), and a row longer than the UB holds
    (N 6600 / 13001: column chunks, docs/design.md "Cube family: rows longer than UB"), against float64 NumPy. Each
    AI Core takes at most one band there (one workspace region); MatmulRmsNorm also at M 2700, N 45 on ascend910b3's
    20 AI Cores: 22 bands, two regions (983 KB) past the output's 243 KB, so one region per AI Core, reused after
    the AIVs' free flag (docs/design.md "Cube family: the band workspace budget")."""
    from opgen.check import run_check

    attrs = {"epsilon": 1e-6} if name == "matmul_rms_norm" else {"scale": 0.7}
    cases = [({"M": 301, "K": 33, "N": 45}, "float16", None), ({"M": 257, "K": 70, "N": 1000}, "bfloat16", None),
             ({"M": 77, "K": 45, "N": 2999}, "float16", None),
             ({"M": 20, "K": 33, "N": 6600 if name == "matmul_rms_norm" else 13001}, "bfloat16", None)]
    if name == "matmul_rms_norm":
        cases.append(({"M": 2700, "K": 16, "N": 45}, "float16", "ascend910b3"))
    for dims, dt, soc in cases:
        r = run_check(str(EXAMPLES / f"{name}.py"), dims=dims, dtypes={"T": dt}, attrs=attrs, gen_dir=examples_gen,
                      soc=soc, seed=3, progress=False)
        assert not r.faults and r.passed and r.block_dim >= 1
        extra = {"gamma": r.inputs["gamma"]} if name == "matmul_rms_norm" else {"scale": 0.7}
        ref = _ref(name, r.inputs["x"], r.inputs["w"], **extra)
        assert _close(r.arrays["y"], ref, dt, dims["K"]), np.abs(np.asarray(r.arrays["y"], np.float64) - ref).max()


@pytest.mark.slow
def test_a_per_row_second_output_emulated_matches_float64(examples_gen):
    """MatmulDynamicQuant's package on the emulation: M 301 (3 bands, the last a tail), K 45, N 1000 (4 blocks a
    band), and M 20, N 13001 (a row in column chunks), bf16: y int8 and scale fp32 against float64 NumPy (and the
    interpreter's device mode: `passed`)."""
    from opgen.check import run_check

    for dims in ({"M": 301, "K": 45, "N": 1000}, {"M": 20, "K": 33, "N": 13001}):   # the second: column chunks
        r = run_check(str(EXAMPLES / "matmul_dynamic_quant.py"), dims=dims, dtypes={"T": "bfloat16"},
                      gen_dir=examples_gen, seed=4, progress=False)
        assert not r.faults and r.passed
        assert _quant_ok(np.asarray(r.arrays["y"]), r.arrays["scale"], r.inputs["x"], r.inputs["w"])


BATCHED = """
from opgen.dsl import A2, OpSpec, bf16, f16, f32
spec = OpSpec("BmmBiasSoftmax", aclnn="aclnnBmmBiasSoftmax", socs=(A2,), round="rint")
B = spec.dim("B", max=64)
M = spec.dim("M", max=4096)
K = spec.dim("K", max=4096)
N = spec.dim("N", max=2048)
(U,) = spec.dtype_vars("U")
spec.input("x", U, [B, M, K])
spec.input("w", U, [B, K, N])
spec.input("bias", U, [N])
spec.output("y", U, [B, M, N])
spec.dtypes((U,), [(f16,), (bf16,)])
spec.example_call({"B": 2, "M": 5, "K": 7, "N": 9})


@spec.body
def _(bb, x, w, bias):
    h = bb.matmul(x, w) + bias.cast(f32)
    e = bb.exp(h - h.max(-1))
    return {"y": (e / e.sum(-1)).cast(U, "rint")}
"""


@pytest.mark.parametrize("dims", [{"B": 5, "M": 37, "K": 50, "N": 45}, {"B": 3, "M": 130, "K": 20, "N": 300}])
def test_batched_bands_with_a_column_input_equal_float64(tmp_path, dims):
    """softmax(x @ w + bias) over B matrices: a band is rows of one matrix (batch index band // mnBlocks), the bias
    a column input of N read once per band; bands of one block (N 45) and of two (N 300, a 2-band matrix); on the
    Kernel IR interpreter against float64 NumPy."""
    from opgen.check import run_check

    p = tmp_path / "bmm_bias_softmax.py"
    p.write_text(BATCHED.lstrip())
    r = run_check(str(p), dims=dims, dtypes={"U": "float16"}, seed=2, progress=False, engine="kir")
    assert not r.faults and r.passed
    x, w, b = (np.asarray(r.inputs[n], np.float64) for n in ("x", "w", "bias"))
    h = x @ w + b
    e = np.exp(h - h.max(-1, keepdims=True))
    ref = e / e.sum(-1, keepdims=True)
    assert _close(r.arrays["y"], ref, "float16", dims["K"]), np.abs(np.asarray(r.arrays["y"], np.float64) - ref).max()


ROW_SCALED_NORM = """
from opgen.dsl import A2, OpSpec, bf16, f16, f32
spec = OpSpec("MatmulRowScaledNorm", aclnn="aclnnMatmulRowScaledNorm", socs=(A2,), round="rint")
M, K = spec.dims("M K", max=4096)
N = spec.dim("N", max=65535)
(T,) = spec.dtype_vars("T")
spec.input("x", T, [M, K])
spec.input("w", T, [K, N])
spec.input("s", T, [M, 1])
spec.output("y", T, [M, N])
spec.dtypes((T,), [(f16,), (bf16,)])

@spec.body
def _(b, x, w, s):
    h = b.matmul(x, w)
    return {"y": (h * b.rsqrt((h * h).mean(-1) + 1e-6) * s.cast(f32)).cast(T, "rint")}
"""


def test_a_per_row_input_of_t_in_rows_longer_than_ub_equals_float64(tmp_path):
    """A per-row input [M, 1] of the operands' type beside a row reduction whose rows (N 6600) the UB cannot hold:
    each AIV's rows one at a time, the row's value staged in T and Cast to fp32 (count 1) before its column chunks;
    on the Kernel IR against float64 (M 20, K 33, bf16)."""
    from opgen.check import run_check

    p = tmp_path / "matmul_row_scaled_norm.py"
    p.write_text(ROW_SCALED_NORM)
    from opgen.kernel import kir as K
    prog = next(iter(kernel_build(load_spec(str(p))).lowered.programs.values()))
    assert "over the row's column chunks" in K.to_text(prog)
    rng = np.random.default_rng(21)
    x = {"x": rng.uniform(-1, 1, (20, 33)).astype(ml_dtypes.bfloat16),
         "w": rng.uniform(-1, 1, (33, 6600)).astype(ml_dtypes.bfloat16),
         "s": rng.uniform(0.5, 2, (20, 1)).astype(ml_dtypes.bfloat16)}
    r = run_check(str(p), x, {}, dtypes={"T": "bfloat16"}, progress=False, engine="kir")
    assert not r.faults and r.passed, r.faults[:1]
    h = np.asarray(x["x"], np.float64) @ np.asarray(x["w"], np.float64)
    ref = h / np.sqrt((h * h).mean(-1, keepdims=True) + 1e-6) * np.asarray(x["s"], np.float64)
    assert _close(np.asarray(r.arrays["y"], np.float64), ref, "bfloat16", 33), \
        np.abs(np.asarray(r.arrays["y"], np.float64) - ref).max()
