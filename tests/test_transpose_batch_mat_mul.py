"""Operands and output through permuted GM views (docs/design.md "Cube family: operands and output through permuted
GM views"): TransposeBatchMatMul (examples/specs/transpose_batch_mat_mul.py: x1 stored [B, M, K] or [M, B, K] by
perm_x1, x2 [B, K, N] or [B, N, K] by perm_x2, y [M, B, N]) reads x1 [M, B, K] at a row stride of B * K and writes y
at B * N, nothing copied; permutations no view can read are refused naming the tensor and the rule. Every value is
checked against float64 NumPy written here (np.transpose by each perm, np.matmul)."""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

import numpy as np
import pytest

from opgen.kernel.family import NoKernel
from opgen.registry import load_spec
from opgen.tiling.pipeline import kernel_build

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "specs" / "transpose_batch_mat_mul.py"
ULP = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
PERMS_X1 = ((0, 1, 2), (1, 0, 2))
PERMS_X2 = ((0, 1, 2), (0, 2, 1))


def _ref(x1, x2, perm_x1, perm_x2, perm_y=(1, 0, 2)) -> np.ndarray:
    """float64 permute(permute(x1, perm_x1) @ permute(x2, perm_x2), perm_y) (CANN's TransposeShape: axis i of the
    result is axis perm[i] of the tensor, NumPy's transpose)."""
    a = np.transpose(np.asarray(x1, np.float64), perm_x1)
    b = np.transpose(np.asarray(x2, np.float64), perm_x2)
    return np.transpose(np.matmul(a, b), perm_y)


def _close(got, ref, dt: str, k: int) -> bool:
    """Within one rounding of the output type plus fp32 accumulation over k (relative to the output's scale)."""
    got = np.asarray(got, dtype=np.float64)
    bound = ULP[dt] * np.abs(ref) + (2.0 ** -22 * k + ULP[dt] / 4) * (np.abs(ref).mean() + 1e-30)
    return got.shape == ref.shape and bool(np.all(np.abs(got - ref) <= bound))


def test_the_example_reads_x1_and_writes_y_through_strided_views():
    """One class per (perm_x1, perm_x2): x1 [M, B, K] is a view of row stride B * K and batch stride K, y [M, B, N]
    one of B * N and N in every class, x2 [B, N, K] a plain transposed operand (its matrices contiguous); the tiling
    fields take each class's strides by attrKey (x1 [B, M, K]: K and M * K), and the emitted kernel reads them."""
    from opgen.codegen.kernel_cube import emit_cube_kernel
    from opgen.kernel.cube import CubeFamily
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import program_inputs

    spec = load_spec(str(SPEC))
    u = kernel_build(spec)
    lays = {(k.static[0], k.static[1]): x for k, x in u.lowered.extra["layouts"].items()}
    assert len(set(CubeFamily().layouts(u.lowered))) == 4
    for (p1, p2), x in lays.items():
        views = dict(x.views)
        assert x.batch == ("B",) and not x.fold and x.trans_b == (p2 == (0, 2, 1)) and not x.trans_a
        assert views.get("a") == ((("B", "K"), ("K",)) if p1 == (1, 0, 2) else None)
        assert views["c"] == (("B", "N"), ("N",)) and "b" not in views
    plat = next(p for p in PLATFORMS.values() if p.arch == "dav-2201")
    dims = {"B": 7, "M": 37, "K": 50, "N": 45}
    for p1, p2 in itertools.product(PERMS_X1, PERMS_X2):
        v = u.tiling.program.evaluate(program_inputs(spec, u.tiling.program, u.tiling.inputs, dims, {}, plat,
                                                     {"perm_x1": p1, "perm_x2": p2, "perm_y": (1, 0, 2)}))
        assert (v["aRowStride"], v["aBatchStride"]) == ((7 * 50, 50) if p1 == (1, 0, 2) else (50, 37 * 50))
        assert (v["cRowStride"], v["cBatchStride"]) == (7 * 45, 45) and v["fits"] == 1
    files = emit_cube_kernel(spec, u.lowered, u.tiling)
    text = files["op_kernel/transpose_batch_mat_mul.h"]
    assert "aRowStride" in text and "cRowStride" in text and "bRowStride" not in text


def test_a_view_pitch_over_nd2nz_range_does_not_fit():
    """x1 [M, B, K]'s row stride B * K is the Nd2Nz source pitch (uint16): B * K > 65535 fails `fits` (CANN's own
    rule for that form: B * K <= 65535), while x1 [B, M, K] at the same dims fits."""
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import program_inputs

    spec = load_spec(str(SPEC))
    u = kernel_build(spec)
    plat = next(p for p in PLATFORMS.values() if p.arch == "dav-2201")
    for p1, fits in (((1, 0, 2), 0), ((0, 1, 2), 1)):
        v = u.tiling.program.evaluate(program_inputs(spec, u.tiling.program, u.tiling.inputs,
                                                     {"B": 2, "M": 16, "K": 40000, "N": 16}, {}, plat,
                                                     {"perm_x1": p1, "perm_x2": (0, 1, 2), "perm_y": (1, 0, 2)}))
        assert v["fits"] == fits and v["aRowStride"] == (80000 if p1 == (1, 0, 2) else 40000)


@pytest.mark.parametrize("p1, p2", list(itertools.product(PERMS_X1, PERMS_X2)))
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_the_example_on_the_kernel_ir_equals_float64(p1, p2, dt):
    """Every perm_x1 x perm_x2 class, fp16 and bf16, odd M 37 / K 50 / N 45 over B 5 matrices, on the Kernel IR
    interpreter against float64."""
    from opgen.check import run_check

    r = run_check(str(SPEC), dims={"B": 5, "M": 37, "K": 50, "N": 45}, attrs={"perm_x1": p1, "perm_x2": p2},
                  dtypes={"T": dt}, seed=11, progress=False, engine="kir")
    assert not r.faults and r.passed, r.faults[:1]
    ref = _ref(r.inputs["x1"], r.inputs["x2"], p1, p2)
    assert ref.shape == (37, 5, 45)
    assert _close(r.arrays["y"], ref, dt, 50), np.abs(np.asarray(r.arrays["y"], np.float64) - ref).max()


@pytest.mark.parametrize("p1, p2, dt", [((1, 0, 2), (0, 2, 1), "bfloat16"), ((1, 0, 2), (0, 1, 2), "float16")])
def test_batch_tails_over_cores_on_the_kernel_ir_equal_float64(p1, p2, dt):
    """B 7 matrices of 3 x 2 blocks (M 300, N 301: tails on both edges) = 42 blocks over 24 AI Cores (the first 18
    take two, a core's range crossing matrices), K 333 (a tail panel and chunk), x1 through its view; against
    float64."""
    from opgen.check import run_check

    r = run_check(str(SPEC), dims={"B": 7, "M": 300, "K": 333, "N": 301}, attrs={"perm_x1": p1, "perm_x2": p2},
                  dtypes={"T": dt}, seed=5, progress=False, engine="kir")
    assert not r.faults and r.passed, r.faults[:1]
    assert r.block_dim == 24
    ref = _ref(r.inputs["x1"], r.inputs["x2"], p1, p2)
    assert _close(r.arrays["y"], ref, dt, 333), np.abs(np.asarray(r.arrays["y"], np.float64) - ref).max()


@pytest.mark.parametrize("dims, p1, p2, dt", [
    ({"B": 5, "M": 37, "K": 50, "N": 45}, (1, 0, 2), (0, 2, 1), "float16"),
    pytest.param({"B": 7, "M": 300, "K": 333, "N": 301}, (1, 0, 2), (0, 1, 2), "bfloat16", marks=pytest.mark.slow),
])
@pytest.mark.slow
def test_the_example_emulated_equals_float64(examples_gen, dims, p1, p2, dt):
    """The emitted C++ on the g++ emulation: odd M / K / N, x1 [M, B, K] through its view, y [M, B, N]; fp16 with
    x2 [B, N, K], and bf16 with 42 blocks over 24 AI Cores; GM bytes moved equal the minimum (each operand block read
    through the view, nothing copied to a contiguous layout first) at the small size; against float64."""
    from opgen.check import run_check

    r = run_check(str(SPEC), dims=dims, attrs={"perm_x1": p1, "perm_x2": p2}, dtypes={"T": dt}, seed=3,
                  gen_dir=examples_gen, progress=False)
    assert not r.faults and r.passed
    ref = _ref(r.inputs["x1"], r.inputs["x2"], p1, p2)
    assert _close(r.arrays["y"], ref, dt, dims["K"]), np.abs(np.asarray(r.arrays["y"], np.float64) - ref).max()
    if dims["B"] == 7:
        assert r.block_dim == 24
    else:   # one block per matrix: each element of x1, x2 and y moved once (2 bytes each), nothing more
        B, M, K, N = (dims[d] for d in "BMKN")
        assert r.gm_bytes == 2 * (B * M * K + B * K * N + B * M * N) == r.gm_bytes_min


VIEW = """
from opgen.dsl import A2, OpSpec, bf16, f16
spec = OpSpec("ViewMm", aclnn="aclnnViewMm", socs=(A2,), round="rint")
B, C, M, K, N = spec.dims("B C M K N", max=4096)
(T,) = spec.dtype_vars("T")
spec.input("a", T, {a})
spec.input("w", T, {w})
spec.output("y", T, {y})
spec.dtypes((T,), [(f16,), (bf16,)])
{extra}


@spec.body
def _(b, a, w):
    return {{"y": {body}}}
"""


def _view_spec(tmp_path, a, w, y, body, extra=""):
    p = tmp_path / "view_mm.py"
    p.write_text(textwrap.dedent(VIEW.format(a=a, w=w, y=y, body=body, extra=extra)))
    return str(p)


def test_two_batch_axes_stored_after_m_are_one_view(tmp_path):
    """a stored [M, B, C, K] read as [B, C, M, K] (permute 1, 2, 0, 3): the batch axes adjacent and in order, so one
    batch stride K steps through both and the row stride is B * C * K; B stored [B, C, N, K] through its last two
    axes swapped (a transpose, no view); on the Kernel IR interpreter against float64. The row stride is the Nd2Nz
    source pitch: without a bound on B * C * K the UB proof refuses the spec at the dims naming the relation."""
    from opgen.check import run_check
    from opgen.errors import SpecError

    body = 'b.matmul(a.permute(1, 2, 0, 3), w.permute(0, 1, 3, 2)).cast(T, "rint")'
    with pytest.raises(SpecError, match="the operands' row pitches fit Nd2Nz"):
        kernel_build(load_spec(_view_spec(tmp_path, "[M, B, C, K]", "[B, C, N, K]", "[B, C, M, N]", body)))
    path = _view_spec(tmp_path, "[M, B, C, K]", "[B, C, N, K]", "[B, C, M, N]", body,
                      'spec.require(B * C * K <= 65535, "a", "B * C * K must be at most 65535")')
    lay = kernel_build(load_spec(path)).layout
    assert dict(lay.views) == {"a": (("B", "C", "K"), ("K",))} and lay.trans_b and lay.batch == ("B", "C")
    r = run_check(path, dims={"B": 2, "C": 3, "M": 37, "K": 50, "N": 45}, dtypes={"T": "float16"}, seed=2,
                  progress=False, engine="kir")
    assert not r.faults and r.passed, r.faults[:1]
    a = np.transpose(np.asarray(r.inputs["a"], np.float64), (1, 2, 0, 3))
    w = np.swapaxes(np.asarray(r.inputs["w"], np.float64), -1, -2)
    assert _close(r.arrays["y"], a @ w, "float16", 50)


@pytest.mark.parametrize("a, w, y, body, words", [
    # K among the batch axes: a's innermost stored axis is B
    ("[M, K, B]", "[B, K, N]", "[B, M, N]", 'b.matmul(a.permute(2, 0, 1), w).cast(T, "rint")',
     "input a stored [M, K, B] read through permute [2, 0, 1]: its innermost stored axis B is a batch axis"),
    # the batch axes apart: B before M, C after it
    ("[B, M, C, K]", "[B, C, K, N]", "[B, C, M, N]", 'b.matmul(a.permute(0, 2, 1, 3), w).cast(T, "rint")',
     "input a stored [B, M, C, K] read through permute [0, 2, 1, 3]: its batch axes are stored at positions [0, 2], "
     "not adjacent and in order"),
    # the output's columns not innermost
    ("[B, M, K]", "[B, K, N]", "[B, N, M]", 'b.matmul(a, w).permute(0, 2, 1).cast(T, "rint")',
     "the product's columns (N) are not its innermost stored axis"),
])
def test_permutations_no_view_reads_are_refused_naming_the_tensor_and_the_rule(tmp_path, a, w, y, body, words):
    path = _view_spec(tmp_path, a, w, y, body)
    with pytest.raises(NoKernel) as e:
        kernel_build(load_spec(path))
    cube = str(e.value).split(" [cube family]")[0]
    assert words in cube and "view_mm.py:" in cube, cube


@pytest.mark.parametrize("dims, body, ref_of", [
    # a vector epilogue (scale, ReLU) before the output's view: the AIVs' store writes rows B * N apart
    ({"B": 3, "M": 37, "K": 50, "N": 45},
     'b.maximum(b.matmul(a.permute(1, 0, 2), w) * 0.5, 0.0).permute(1, 0, 2).cast(T, "rint")',
     lambda p: np.maximum(0.5 * p, 0.0)),
    # few blocks and a long K: the K split's reduction stores through the view
    ({"B": 2, "M": 100, "K": 4000, "N": 200}, 'b.matmul(a.permute(1, 0, 2), w).permute(1, 0, 2).cast(T, "rint")',
     lambda p: p),
])
def test_the_output_view_behind_a_vector_epilogue_and_a_k_split_on_the_kernel_ir(tmp_path, dims, body, ref_of):
    """a stored [M, B, K], y [M, B, N]: the output view written by the AIVs (after an epilogue, or after the K
    split's ordered sum) rather than by Fixpipe; on the Kernel IR interpreter against float64."""
    from opgen.check import run_check
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import program_inputs

    path = _view_spec(tmp_path, "[M, B, K]", "[B, K, N]", "[M, B, N]", body,
                      'spec.require(B * K <= 65535, "a", "B * K must be at most 65535")')

    spec = load_spec(path)
    u = kernel_build(spec)
    lay = u.layout
    assert dict(lay.views) == {"a": (("B", "K"), ("K",)), "c": (("B", "N"), ("N",))}
    v = u.tiling.program.evaluate(program_inputs(spec, u.tiling.program, u.tiling.inputs, dims, {},
                                                 PLATFORMS["ascend910b1"], {}))
    assert (v["kSplit"] > 1) == (dims["K"] == 4000) and lay.mixed == (dims["K"] != 4000)
    r = run_check(path, dims=dims, dtypes={"T": "bfloat16"}, seed=9, progress=False, engine="kir")
    assert not r.faults and r.passed, r.faults[:1]
    a = np.transpose(np.asarray(r.inputs["a"], np.float64), (1, 0, 2))
    ref = np.transpose(ref_of(a @ np.asarray(r.inputs["w"], np.float64)), (1, 0, 2))
    assert _close(r.arrays["y"], ref, "bfloat16", dims["K"]), np.abs(np.asarray(r.arrays["y"], np.float64) - ref).max()
