"""The Linear / broadcast-batch matmul: the type rule and the interpreter follow NumPy matmul broadcasting (batch dims
broadcast, 1-D operands refused with the rule), reverse mode sums a broadcast operand's adjoint over the batch, and
the cube family folds a 2-D right operand's batch into M (examples/specs/batch_mat_mul_v3.py: x1 [*Bd, M, K] times
x2 [K, N] or [N, K] by adj_x2, optional bias). Every value is checked against float64 NumPy written here."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from opgen.errors import OpgenError
from opgen.kernel.family import NoKernel
from opgen.registry import load_spec
from opgen.tiling.pipeline import kernel_build

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "specs"
SPEC = EXAMPLES / "batch_mat_mul_v3.py"
ULP = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}

BCAST = """
from opgen.dsl import A2, OpSpec, bf16, f16, f32
spec = OpSpec("Bcast", aclnn="aclnnBcast", socs=(A2,), round="rint")
B, C, M, K, N = spec.dims("B C M K N", max=4096)
(T,) = spec.dtype_vars("T")
spec.input("a", T, {a})
spec.input("w", T, {w})
spec.output("y", T, {y})
spec.dtypes((T,), [(f16,), (bf16,)])


@spec.body
def _(b, a, w):
    return {{"y": b.matmul(a, w, transpose_a={ta}, transpose_b={tb}).cast(T, "rint")}}
"""


def _bcast(tmp_path, a, w, y, tb=False, ta=False):
    p = tmp_path / "bcast.py"
    p.write_text(textwrap.dedent(BCAST.format(a=a, w=w, y=y, tb=tb, ta=ta)))
    return load_spec(str(p))


def _ref(x1, x2, bias, adj_x2: bool) -> np.ndarray:
    """float64 x1 @ op(x2) (+ bias), NumPy matmul broadcasting the 2-D weight over x1's batch dims."""
    w = np.asarray(x2, np.float64)
    y = np.asarray(x1, np.float64) @ (w.T if adj_x2 else w)
    return y if bias is None else y + np.asarray(bias, np.float64)


def _close(got, ref, dt: str, k: int) -> bool:
    """Within one rounding of the output type plus fp32 accumulation over k (relative to the output's scale)."""
    got = np.asarray(got, dtype=np.float64)
    bound = ULP[dt] * np.abs(ref) + (2.0 ** -22 * k + ULP[dt] / 4) * (np.abs(ref).mean() + 1e-30)
    return got.shape == ref.shape and bool(np.all(np.abs(got - ref) <= bound))


def test_batch_dims_broadcast_as_numpy_in_the_type_rule_and_the_interpreter(tmp_path):
    """[B, 1, M, K] x [C, K, N] -> [B, C, M, N] (both sides broadcast), interpreted exactly against float64 np.matmul
    written out as loops over the batch."""
    from opgen.interp import interpret

    spec = _bcast(tmp_path, "[B, 1, M, K]", "[C, K, N]", "[B, C, M, N]")
    rng = np.random.default_rng(1)
    a, w = rng.uniform(-1, 1, (2, 1, 5, 7)), rng.uniform(-1, 1, (3, 7, 4))
    out = interpret(spec, {"a": a.astype(np.float16), "w": w.astype(np.float16)}, dtypes={"T": "float16"},
                    mode="exact")["y"]
    a16, w16 = a.astype(np.float16).astype(np.float64), w.astype(np.float16).astype(np.float64)
    ref = np.empty((2, 3, 5, 4))
    for i in range(2):
        for j in range(3):
            ref[i, j] = a16[i, 0] @ w16[j]
    assert out.shape == (2, 3, 5, 4) and np.allclose(out, ref, rtol=0, atol=1e-12)


def test_a_1d_operand_and_unbroadcastable_batches_are_refused_with_the_rule(tmp_path):
    """The spec body's matmul line fails with the type rule's words."""
    def trace(spec):
        return spec.graph(next(iter(spec.keys())))

    with pytest.raises(OpgenError, match=r"fewer than 2 \(fixed\) dims; 1-D operands .* not supported"):
        trace(_bcast(tmp_path, "[M, K]", "[K]", "[M]"))
    with pytest.raises(OpgenError, match=r"cannot broadcast \[B\] with \[C\]"):
        trace(_bcast(tmp_path, "[B, M, K]", "[C, K, N]", "[B, M, N]"))


def test_the_cube_family_refuses_a_broadcast_it_does_not_lower_naming_the_shapes(tmp_path):
    """Equal batch dims, or one 2-D operand against the other's batch, are lowered; batch dims that broadcast
    against each other ([B, M, K] x [1, K, N] -> a batch of B from two batched operands) are refused naming the
    shapes."""
    spec = _bcast(tmp_path, "[B, M, K]", "[1, K, N]", "[B, M, N]")
    with pytest.raises(NoKernel) as e:
        kernel_build(spec)
    assert "operands of shapes ['B', 'M', 'K'] and ['1', 'K', 'N']" in str(e.value)
    assert "batch dims broadcast otherwise are not lowered" in str(e.value)


# (a's shape, w's shape, transpose_a, transpose_b): a broadcast left operand, a transposed left operand batched, the
# transposed left operand against a 2-D weight (BatchMatMulV3's adj_x1 over a 2-D x2), both broadcast and transposed
BROADCAST_FORMS = {
    "a_2d": ("[M, K]", "[B, K, N]", False, False),
    "a_t_batched": ("[B, K, M]", "[B, K, N]", True, False),
    "a_t_w_2d": ("[B, K, M]", "[K, N]", True, False),
    "a_t_2d_w_t": ("[K, M]", "[B, N, K]", True, True),
}


@pytest.mark.parametrize("form", sorted(BROADCAST_FORMS))
def test_a_broadcast_or_transposed_left_operand_on_the_interpreter_equals_float64(tmp_path, form):
    """Each form at B 3, M 37, K 50, N 45 (odd edges, several matrices) on the Kernel IR interpreter against float64
    NumPy matmul (its broadcasting): a 2-D operand is read as the one matrix of every batch index
    (GemmLayout.shared), a transposed left operand by the Aᵀ loads."""
    from opgen.check import run_check

    a, w, ta, tb = BROADCAST_FORMS[form]
    spec = _bcast(tmp_path, a, w, "[B, M, N]", tb=tb, ta=ta)
    lay = kernel_build(spec).layout
    assert lay.batch == ("B",) and lay.trans_a == ta and lay.shared == ("a" if a.count(",") == 1 else
                                                                      "b" if w.count(",") == 1 else "")
    dt = "float16" if tb else "bfloat16"
    r = run_check(str(tmp_path / "bcast.py"), dims={"B": 3, "M": 37, "K": 50, "N": 45}, dtypes={"T": dt}, seed=5,
                  progress=False, engine="kir")
    assert not r.faults and r.passed, r.faults[:1]
    x, y = (np.asarray(r.inputs[n], np.float64) for n in ("a", "w"))
    ref = np.matmul(np.swapaxes(x, -1, -2) if ta else x, np.swapaxes(y, -1, -2) if tb else y)
    assert ref.shape == (3, 37, 45)
    assert _close(r.arrays["y"], ref, dt, 50), np.abs(r.arrays["y"] - ref).max()


def test_gradient_of_a_broadcast_weight_sums_over_the_batch(tmp_path):
    """derive_grad of y = x1 @ w with x1 [B, M, K], w [K, N]: dw [K, N] = sum over the batch of x1ᵀ g, dx1 = g wᵀ
    (float64 NumPy), on the exact interpreter."""
    from opgen.dsl.grad import derive_grad
    from opgen.interp import interpret

    src = BCAST.replace('b.matmul(a, w, transpose_a={ta}, transpose_b={tb}).cast(T, "rint")',
                        'b.matmul(a.cast(f32), w.cast(f32))')
    src = src.replace('spec.output("y", T, {y})', 'spec.output("y", f32, {y})')
    p = tmp_path / "lin.py"
    p.write_text(textwrap.dedent(src.format(a="[B, M, K]", w="[K, N]", y="[B, M, N]", tb=False)))
    grad = derive_grad(load_spec(str(p)), "LinGrad", aclnn="aclnnLinGrad", wrt=["a", "w"], grads={"y": "dy"},
                       names={"a": "da", "w": "dw"})
    rng = np.random.default_rng(2)
    a, w, g = rng.uniform(-1, 1, (3, 5, 7)), rng.uniform(-1, 1, (7, 4)), rng.uniform(-1, 1, (3, 5, 4))
    a, w = a.astype(np.float16), w.astype(np.float16)
    out = interpret(grad, {"a": a, "w": w, "dy": g.astype(np.float32)}, dtypes={"T": "float16"}, mode="exact")
    a64, w64, g64 = a.astype(np.float64), w.astype(np.float64), g.astype(np.float32).astype(np.float64)
    assert np.allclose(out["dw"], np.einsum("bmk,bmn->kn", a64, g64), rtol=0, atol=1e-9)
    assert np.allclose(out["da"], g64 @ w64.T, rtol=0, atol=1e-9)


def test_the_linear_form_folds_the_batch_into_m_one_class_per_weight_layout():
    """BatchMatMulV3: no batch in the kernel (its M is prod(Bd) * M, the tiling's dimM), one class per adj_x2 value
    serving the bias present and absent."""
    from opgen.ir.dims import Prod, Sym

    u = kernel_build(load_spec(str(SPEC)))
    assert u.family.name == "cube"
    lays = set(u.lowered.extra["layouts"].values())
    assert {(x.fold, x.batch, x.trans_a, x.trans_b) for x in lays} == {(("*Bd",), (), False, False),
                                                                       (("*Bd",), (), False, True)}
    assert u.tiling.inputs["dimM"] == Sym("M") * Prod("Bd") and "batch" not in u.tiling.inputs
    assert len({id(c) for c in u.lowered.programs.values()}) == 2


@pytest.mark.parametrize("adj_x2", [False, True])
def test_linear_form_on_the_interpreter_equals_float64(adj_x2):
    """x1 [2, 3, 37, 50] times the weight [50, 45] (or [45, 50] transposed) with the bias present in one dtype and
    absent in the other (fp16 beside fp16 operands, fp32 beside bf16), on the Kernel IR interpreter against float64
    NumPy."""
    from opgen.check import run_check

    for dt, present in (("float16", ["bias"]), ("bfloat16", [])):
        if adj_x2:
            dt = "bfloat16" if dt == "float16" else "float16"
        u = "float16" if dt == "float16" else "float32"   # the bias fp16 beside fp16, fp32 beside bf16
        r = run_check(str(SPEC), dims={"Bd": (2, 3), "M": 37, "K": 50, "N": 45}, dtypes={"T": dt, "U": u}, seed=7,
                      progress=False, attrs={"adj_x2": adj_x2}, present=present, engine="kir")
        assert not r.faults and r.passed, (adj_x2, dt, present)
        ref = _ref(r.inputs["x1"], r.inputs["x2"], r.inputs.get("bias"), adj_x2)
        assert ref.shape == (2, 3, 37, 45)
        assert _close(r.arrays["y"], ref, dt, 50), (adj_x2, dt, present, np.abs(r.arrays["y"] - ref).max())


@pytest.mark.slow
@pytest.mark.parametrize("adj_x2, dt, present", [(False, "float16", False), (True, "bfloat16", True)])
def test_linear_form_tails_over_cores_emulated_matches_float64(examples_gen, adj_x2, dt, present):
    """The emitted C++ on the g++ emulation: x1 [4, 433, 45] (1732 folded rows: 14 x 2 blocks of 128 x 256 on 24
    AICs, the first cores take two; tails on both edges, the folded blocks crossing batch boundaries) times the
    weight, each layout once, the dtype and the bias presence alternating (an fp32 bias beside bf16)."""
    from opgen.check import run_check

    r = run_check(str(SPEC), dims={"Bd": (4,), "M": 433, "K": 45, "N": 290}, dtypes={"T": dt, "U": "float32"},
                  gen_dir=examples_gen,
                  seed=3, progress=False, attrs={"adj_x2": adj_x2}, present=["bias"] if present else [])
    assert not r.faults and r.passed and r.block_dim == 24
    ref = _ref(r.inputs["x1"], r.inputs["x2"], r.inputs.get("bias"), adj_x2)
    assert _close(r.arrays["y"], ref, dt, 45), np.abs(r.arrays["y"] - ref).max()
