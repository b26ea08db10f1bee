"""Epilogue inputs read against the batch (docs/design.md "Cube family: epilogue inputs broadcast over the batch"):
Baddbmm (examples/specs/baddbmm.py: out = beta * self + alpha * (batch1 @ batch2), self [B, M, N], [M, N], [B, 1, N],
[N], [1, N], [B, 1, 1], [1], [M, 1] or [B, M, 1]) on both engines against torch.baddbmm in float64; an [M, N] residual beside a folded (Linear)
GEMM unfolds it; a one-value epilogue input in fp16 / bf16 is read by the scalar unit and converted exactly."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from opgen.kernel.family import NoKernel
from opgen.registry import load_spec
from opgen.tiling.pipeline import kernel_build

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "specs" / "baddbmm.py"
ULP = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
FORMS = {"bmn": lambda B, M, N: (B, M, N), "mn": lambda B, M, N: (M, N), "b1n": lambda B, M, N: (B, 1, N),
         "n": lambda B, M, N: (N,), "1n": lambda B, M, N: (1, N), "b11": lambda B, M, N: (B, 1, 1),
         "one": lambda B, M, N: (1,), "m1": lambda B, M, N: (M, 1), "bm1": lambda B, M, N: (B, M, 1)}
"""self's forms as CANN's aclnnBaddbmm broadcasts them to [B, M, N]."""


def _rounded(x, dt: str) -> np.ndarray:
    """x rounded to `dt` (torch's conversion: to nearest even), as float32."""
    return torch.tensor(np.asarray(x, np.float32)).to(getattr(torch, dt)).float().numpy()


def _inputs(form: str, B: int, M: int, K: int, N: int, dt: str, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"self": _rounded(rng.standard_normal(FORMS[form](B, M, N)), dt),
            "batch1": _rounded(rng.standard_normal((B, M, K)), dt),
            "batch2": _rounded(rng.standard_normal((B, K, N)), dt)}


def _ref(x: dict, beta: float, alpha: float) -> np.ndarray:
    """torch.baddbmm in float64 (self broadcast to [B, M, N] as torch and CANN broadcast it)."""
    t = {k: torch.tensor(np.asarray(v, np.float64)) for k, v in x.items()}
    return torch.baddbmm(t["self"], t["batch1"], t["batch2"], beta=beta, alpha=alpha).numpy()


def _close(got, ref, dt: str, k: int) -> bool:
    """Within one rounding of the output type plus fp32 accumulation over k (relative to the output's scale)."""
    got = np.asarray(got, dtype=np.float64)
    bound = ULP[dt] * np.abs(ref) + (2.0 ** -22 * k + ULP[dt] / 4) * (np.abs(ref).mean() + 1e-30)
    return got.shape == ref.shape and bool(np.all(np.abs(got - ref) <= bound))


def _check(form, dims, dt, seed, engine="kir", gen_dir=None, beta=0.75, alpha=-1.5):
    from opgen.check import run_check

    B, M, K, N = (dims[d] for d in "BMKN")
    x = _inputs(form, B, M, K, N, dt, seed)
    r = run_check(str(SPEC), x, {"beta": beta, "alpha": alpha}, dtypes={"T": dt}, progress=False, engine=engine,
                  gen_dir=gen_dir)
    assert not r.faults and r.passed, r.faults[:1]
    ref = _ref(x, beta, alpha)
    assert ref.shape == (B, M, N)
    assert _close(r.arrays["out"], ref, dt, K), np.abs(np.asarray(r.arrays["out"], np.float64) - ref).max()
    return r


def test_the_self_forms_read_against_the_batch_by_their_shape():
    """One class per self form that reads GM differently (the tiling key's form digit; [N] and [1, N] share one):
    [B, M, N] steps by the batch index, [M, N] is read at the same rows for every batch index, [B, 1, N] one row per
    batch index, [N] one row for all, [B, 1, 1] one value per batch index and [1] one value, both read by the scalar
    unit, [M, 1] the same per-row values for every batch index and [B, M, 1] a batch index's own (a pass's rows
    staged in T, Cast to fp32, read per row by the scalar unit); beta and alpha are float attributes."""
    from opgen.codegen.kernel_cube import emit_cube_kernel
    from opgen.kernel.cube import CubeFamily

    spec = load_spec(str(SPEC))
    u = kernel_build(spec)
    lays = {k.forms[0]: x for k, x in u.lowered.extra["layouts"].items()}
    assert len(set(CubeFamily().layouts(u.lowered))) == 8 and u.lowered.extra["form_key"]
    for form, x in lays.items():
        assert x.batch == ("B",) and not x.fold and not x.shared and x.mixed
    # self's forms in declaration order: [B, M, N], [M, N], [B, 1, N], [N], [1, N], [B, 1, 1], [1], [M, 1],
    # [B, M, 1]
    assert {f: dict(x.bcast).get("self", "") for f, x in lays.items()} == {0: "", 1: "shared", 2: "batched", 3: "",
                                                                          4: "", 5: "batched", 6: "", 7: "shared",
                                                                          8: "batched"}
    text = emit_cube_kernel(spec, u.lowered, u.tiling)["op_kernel/baddbmm.h"]
    reads = set(re.findall(r"DataCopyPad\(et0, eGm0_\[([^\]]*)\]", text))
    assert reads == {"n0 + td_->N * c0 + td_->N * m0 + td_->M * td_->N * bi", "n0 + td_->N * c0 + td_->N * m0",
                     "n0 + td_->N * bi", "n0", "c0 + m0", "c0 + m0 + td_->M * bi"}
    assert "GmScalar(eGm0_, 0)" in text and "GmScalar(eGm0_, bi)" in text
    # the per-row forms: a pass's rows of T, at the same rows for every batch index or at the batch index's
    rows = set(re.findall(r"DataCopyPad\(et0, eGm0_\[([^\]]*)\], DataCopyExtParams\(1, rows \* sizeof\(T\)", text))
    assert rows == {"c0 + m0", "c0 + m0 + td_->M * bi"}
    assert "Cast(ef0, et0, RoundMode::CAST_NONE" in text and "ef0.GetValue(r)" in text


@pytest.mark.parametrize("form, dt", [("bmn", "float16"), ("mn", "bfloat16"), ("b1n", "float16"),
                                      ("n", "bfloat16"), ("1n", "float16"), ("b11", "bfloat16"), ("one", "bfloat16"),
                                      ("one", "float16"), ("m1", "float16"), ("bm1", "bfloat16")])
def test_every_self_form_on_the_kernel_ir_equals_torch_baddbmm(form, dt):
    """Each self form, fp16 and bf16 in turn (the one-value self in both: GmScalar's half and bf16 conversions),
    odd M 37 / K 50 / N 45 over B 3 matrices, beta 0.75, alpha -1.5, on the Kernel IR interpreter."""
    _check(form, {"B": 3, "M": 37, "K": 50, "N": 45}, dt, seed=11)


@pytest.mark.parametrize("form, dt", [("b1n", "bfloat16"), ("b11", "float16"), ("bm1", "float16"),
                                      ("m1", "bfloat16")])
def test_batch_tails_over_cores_on_the_kernel_ir_equal_torch_baddbmm(form, dt):
    """B 7 matrices of 3 x 2 blocks (M 300, N 301: tails on both edges) = 42 blocks over 24 AI Cores, a core's range
    crossing matrices (a [B, 1, N] self's row, a [B, 1, 1] self's value and a [B, M, 1] self's rows changing with the
    batch index within a core's range; an [M, N] or [M, 1] self's read does not depend on it), K 333."""
    r = _check(form, {"B": 7, "M": 300, "K": 333, "N": 301}, dt, seed=5, beta=-0.5, alpha=2.0)
    assert r.block_dim == 24


@pytest.mark.parametrize("form, dt", [("mn", "bfloat16"), ("b1n", "float16"), ("b11", "bfloat16"),
                                      ("bm1", "float16"), ("m1", "bfloat16")])
@pytest.mark.slow
def test_the_example_emulated_equals_torch_baddbmm(examples_gen, form, dt):
    """The emitted C++ on the g++ emulation: the reads against the batch (an [M, N] self shared by the batch, a
    [B, 1, N] self per batch index, a bf16 self of one value per batch index through GmScalar's ToFloat, a [B, M, 1]
    self's rows per batch index staged in fp16 and an [M, 1] one's shared by the batch in bf16, each Cast to fp32)
    at odd sizes, B 3."""
    _check(form, {"B": 3, "M": 37, "K": 50, "N": 45}, dt, seed=7, engine="emu", gen_dir=examples_gen)


LINEAR = """
from opgen.dsl import A2, OpSpec, bf16, f16, f32
spec = OpSpec("LinearRes", aclnn="aclnnLinearRes", socs=(A2,), round="rint")
B, M, K, N = spec.dims("B M K N", max=4096)
(T,) = spec.dtype_vars("T")
spec.input("x", T, [B, M, K])
spec.input("w", T, [K, N])
spec.input("res", T, {res})
spec.output("y", T, [B, M, N])
spec.dtypes((T,), [(f16,), (bf16,)])

@spec.body
def _(b, x, w, res):
    return {{"y": (b.matmul(x, w) + res.cast(f32)).cast(T, "rint")}}
"""


@pytest.mark.parametrize("res, shape", [("[M, N]", "mn"), ("[[B, M, N], [M, N]]", "mn"),
                                        ("[[B, M, N], [M, N]]", "bmn")])
def test_a_residual_shared_by_the_batch_unfolds_a_linear_gemm(tmp_path, res, shape):
    """x [B, M, K] @ w [K, N] folds the batch into M (one GEMM), whose blocks cross batch indices; an [M, N] residual
    (the same rows for every batch index) unfolds it: batched, w shared. With both forms declared every class is
    unfolded (one tiling program). On the Kernel IR interpreter against float64 (B 3, M 37, K 50, N 45)."""
    from opgen.check import run_check

    p = tmp_path / "linear_res.py"
    p.write_text(LINEAR.format(res=res))
    u = kernel_build(load_spec(str(p)))
    for x in u.lowered.extra["layouts"].values():
        assert x.batch == ("B",) and x.shared == "b" and not x.fold
    rng = np.random.default_rng(3)
    x = {"x": _rounded(rng.standard_normal((3, 37, 50)), "float16"),
         "w": _rounded(rng.standard_normal((50, 45)), "float16"),
         "res": _rounded(rng.standard_normal((37, 45) if shape == "mn" else (3, 37, 45)), "float16")}
    r = run_check(str(p), x, {}, dtypes={"T": "float16"}, progress=False, engine="kir")
    assert not r.faults and r.passed, r.faults[:1]
    ref = np.asarray(x["x"], np.float64) @ np.asarray(x["w"], np.float64) + np.asarray(x["res"], np.float64)
    assert _close(r.arrays["y"], ref, "float16", 50)


def test_a_residual_of_the_batch_keeps_a_linear_gemm_folded(tmp_path):
    """A [B, M, N] residual alone reads the rows of the folded product as they are: the layout stays folded."""
    p = tmp_path / "linear_res.py"
    p.write_text(LINEAR.format(res="[B, M, N]"))
    (x,) = set(kernel_build(load_spec(str(p))).lowered.extra["layouts"].values())
    assert x.fold == ("B",) and not x.batch and not x.bcast


def test_a_partial_batch_broadcast_is_refused_naming_the_shapes(tmp_path):
    """Two batch dims of which the input has one (res [B, 1, M, N] against [B, C, M, N]) is no read the kernel has
    (one batch stride): refused at the input naming its shape and the shapes the epilogue reads."""
    src = textwrap.dedent("""
        from opgen.dsl import A2, OpSpec, bf16, f16, f32
        spec = OpSpec("TwoBatch", aclnn="aclnnTwoBatch", socs=(A2,), round="rint")
        B, C, M, K, N = spec.dims("B C M K N", max=4096)
        (T,) = spec.dtype_vars("T")
        spec.input("x", T, [B, C, M, K])
        spec.input("w", T, [B, C, K, N])
        spec.input("res", T, [B, 1, M, N])
        spec.output("y", T, [B, C, M, N])
        spec.dtypes((T,), [(f16,), (bf16,)])

        @spec.body
        def _(b, x, w, res):
            return {"y": (b.matmul(x, w) + res.cast(f32)).cast(T, "rint")}
    """)
    p = tmp_path / "two_batch.py"
    p.write_text(src)
    with pytest.raises(NoKernel, match=re.escape("an operand of shape [B, 1, M, N] in the matmul's epilogue: it "
                                                 "reads [B, C, M, N] tensors and [M, N] ones broadcast over the "
                                                 "batch")):
        kernel_build(load_spec(str(p)))


@pytest.mark.parametrize("res, folded", [("[M, 1]", False), ("[B, M, 1]", True)])
def test_a_per_row_residual_of_a_linear_gemm_against_float64(tmp_path, res, folded):
    """Per-row inputs of a product whose batch folds into M: an [M, 1] residual (the same per-row values for every
    batch index) unfolds it, as an [M, N] one does; a [B, M, 1] residual is read at the folded product's own rows
    (its flat rows are the product's), so the layout stays folded. On the Kernel IR interpreter against float64
    (B 3, M 37, K 50, N 45, fp16)."""
    from opgen.check import run_check

    p = tmp_path / "linear_res.py"
    p.write_text(LINEAR.format(res=res))
    (lay,) = set(kernel_build(load_spec(str(p))).lowered.extra["layouts"].values())
    assert (lay.fold, lay.batch, lay.shared) == ((("B",), (), "") if folded else ((), ("B",), "b"))
    # a folded product reads [B, M, 1] at its own rows: no relation to the batch is recorded (nor said)
    assert dict(lay.bcast) == ({} if folded else {"res": "shared"})
    assert ("res the same per-row values for every batch index" in lay.text()) != folded
    rng = np.random.default_rng(4)
    x = {"x": _rounded(rng.standard_normal((3, 37, 50)), "float16"),
         "w": _rounded(rng.standard_normal((50, 45)), "float16"),
         "res": _rounded(rng.standard_normal((3, 37, 1) if folded else (37, 1)), "float16")}
    r = run_check(str(p), x, {}, dtypes={"T": "float16"}, progress=False, engine="kir")
    assert not r.faults and r.passed, r.faults[:1]
    ref = np.asarray(x["x"], np.float64) @ np.asarray(x["w"], np.float64) + np.asarray(x["res"], np.float64)
    assert _close(r.arrays["y"], ref, "float16", 50)


TWO_BATCH_ROWS = """
from opgen.dsl import A2, OpSpec, bf16, f16, f32
spec = OpSpec("BatchRowStats", aclnn="aclnnBatchRowStats", socs=(A2,), round="rint")
B, C, M, K, N = spec.dims("B C M K N", max=4096)
(T,) = spec.dtype_vars("T")
spec.input("x", T, [B, C, M, K])
spec.input("w", T, [B, C, K, N])
spec.input("shift", T, [B, C, M, 1])
spec.output("y", T, [B, C, M, N])
spec.output("peak", f32, [B, C, M])
spec.dtypes((T,), [(f16,), (bf16,)])

@spec.body
def _(b, x, w, shift):
    h = b.matmul(x, w) - shift.cast(f32)
    return {"y": h.cast(T, "rint"), "peak": b.abs(h).max(-1).reshape([B, C, M])}
"""


def test_per_row_input_and_output_over_two_batch_dims_against_float64(tmp_path):
    """A batched product over two batch dims (B 2, C 3: the flat batch index bi = b * C + c) with a per-row input
    [B, C, M, 1] read at the batch index's rows and a per-row output [B, C, M] (the row's max |h| over N) written at
    them: 6 matrices of M 37 rows, K 50, N 45, bf16, on the Kernel IR interpreter against float64."""
    from opgen.check import run_check

    p = tmp_path / "batch_row_stats.py"
    p.write_text(TWO_BATCH_ROWS)
    (lay,) = set(kernel_build(load_spec(str(p))).lowered.extra["layouts"].values())
    assert lay.batch == ("B", "C") and dict(lay.bcast) == {"shift": "batched"}
    rng = np.random.default_rng(8)
    x = {"x": _rounded(rng.standard_normal((2, 3, 37, 50)), "bfloat16"),
         "w": _rounded(rng.standard_normal((2, 3, 50, 45)), "bfloat16"),
         "shift": _rounded(4 * rng.standard_normal((2, 3, 37, 1)), "bfloat16")}
    r = run_check(str(p), x, {}, dtypes={"T": "bfloat16"}, progress=False, engine="kir")
    assert not r.faults and r.passed, r.faults[:1]
    h = np.asarray(x["x"], np.float64) @ np.asarray(x["w"], np.float64) - np.asarray(x["shift"], np.float64)
    assert _close(r.arrays["y"], h, "bfloat16", 50)
    peak = np.asarray(r.arrays["peak"], np.float64)
    assert peak.shape == (2, 3, 37)
    assert np.all(np.abs(peak - np.abs(h).max(-1)) <= 2.0 ** -22 * 50 * np.abs(h).max())


ROW_SCALE = """
from opgen.dsl import A2, OpSpec, bf16, f16, f32
spec = OpSpec("BatchRowScale", aclnn="aclnnBatchRowScale", socs=(A2,), round="rint")
B, M, K, N = spec.dims("B M K N", max=4096)
T, U = spec.dtype_vars("T U")
spec.input("x", T, [B, M, K])
spec.input("w", T, [B, K, N])
spec.input("scale", U, [B, M, 1])
spec.output("y", T, [B, M, N])
spec.dtypes((T, U), [(f16, f16), (f16, f32), (bf16, bf16), (bf16, f32)])

@spec.body
def _(b, x, w, scale):
    return {"y": (b.matmul(x, w) * scale.cast(f32)).cast(T, "rint")}
"""


@pytest.mark.parametrize("t, u", [("float16", "float32"), ("bfloat16", "bfloat16")])
def test_a_per_row_input_of_its_own_dtype_variable_against_float64(tmp_path, t, u):
    """A per-row scale [B, M, 1] of dtype variable U (T's type or fp32 per row of the dtype table): staged in U and
    converted by CastFrom (a copy when U is fp32, a Cast from T's type else), on the Kernel IR interpreter against
    float64 (B 2, M 37, K 50, N 45)."""
    from opgen.check import run_check

    p = tmp_path / "batch_row_scale.py"
    p.write_text(ROW_SCALE)
    rng = np.random.default_rng(9)
    scale = rng.uniform(0.5, 2.0, (2, 37, 1))
    x = {"x": _rounded(rng.standard_normal((2, 37, 50)), t), "w": _rounded(rng.standard_normal((2, 50, 45)), t),
         "scale": scale.astype(np.float32) if u == "float32" else _rounded(scale, u)}
    r = run_check(str(p), x, {}, dtypes={"T": t, "U": u}, progress=False, engine="kir")
    assert not r.faults and r.passed, r.faults[:1]
    ref = (np.asarray(x["x"], np.float64) @ np.asarray(x["w"], np.float64)) * np.asarray(x["scale"], np.float64)
    assert _close(r.arrays["y"], ref, t, 50)
