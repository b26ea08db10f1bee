"""A matrix product with a literal extent: a matrix-vector product self [M, K] x vec [K, 1] (KernelBench's MatVec as
a new user wrote it), a vector-matrix product [1, K] x [K, N] and an outer product [M, 1] x [1, N]. The cube family
takes a literal M, K or N as a constant of the layout (opgen.kernel.cube gemm_layout; the tiling's dimM / dimK /
dimN read it as a number, opgen.tiling.cube `_dim`), where it asked for three named dims. Each against float64
(one rounding of the output), on the Kernel IR over several blocks and in the emulation."""

from __future__ import annotations

import numpy as np
import pytest

from opgen.check import run_check

SPEC = '''
from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("{op}", aclnn="aclnn{op}", socs=(A2, A3), round="rint")
B = spec.dim("B", max=65535)
M = spec.dim("M", max=65535)
K = spec.dim("K", max=65535)
N = spec.dim("N", max=65535)
(T,) = spec.dtype_vars("T")
spec.input("x1", T, {a})
spec.input("x2", T, {b})
{extra}spec.output("y", T, {y})
spec.dtypes((T,), [(f16,), (bf16,)])


@spec.body
def _(bb, x1, x2{args}):
    return {{"y": (bb.matmul(x1, x2){tail}).cast(T, "rint")}}
'''
"""A matrix product spec: {op}, the shapes {a} x {b} -> {y}, and optionally an input line {extra} whose parameters
{args} the body reads in {tail}."""


def _spec(op: str, a: str, b: str, y: str, bias: bool = False) -> str:
    """SPEC for `op`, with a per-tensor fp32 bias [1] added to the product when `bias`."""
    extra = 'spec.input("bias", f32, [1])\n' if bias else ""
    return SPEC.format(op=op, a=a, b=b, y=y, extra=extra, args=", bias" if bias else "",
                       tail=" + bias" if bias else "")


def _assert_float64(r, dt: str) -> None:
    """r's y equals x1 @ x2 (+ bias) in float64 within the output's one rounding and fp32 accumulation over K (the
    bias's term counted as one more)."""
    assert not r.faults and r.passed, r.faults[:2]
    x1, x2 = np.asarray(r.inputs["x1"], np.float64), np.asarray(r.inputs["x2"], np.float64)
    bias = r.inputs.get("bias")
    want = x1 @ x2 + (np.asarray(bias, np.float64) if bias is not None else 0.0)
    got = np.asarray(r.arrays["y"], np.float64)
    assert got.shape == want.shape
    half_ulp = 2.0 ** -11 if dt == "float16" else 2.0 ** -8   # the output's one rounding
    acc = np.abs(x1) @ np.abs(x2) + (1 if bias is not None else 0)
    bound = half_ulp * np.abs(want) + x1.shape[-1] * 2.0 ** -24 * acc   # plus fp32 accumulation
    assert np.all(np.abs(got - want) <= bound), float(np.max(np.abs(got - want) - bound))


FORMS = {"MatVec": ("[M, K]", "[K, 1]", "[M, 1]"), "VecMat": ("[1, K]", "[K, N]", "[1, N]"),
         "Outer": ("[M, 1]", "[1, N]", "[M, N]")}


@pytest.fixture(scope="module")
def literal_specs(run_shared):
    """{op: (spec path, generated tree)} of FORMS, written and generated once per run."""
    def fill(d):
        from opgen.codegen import write_ops

        for op, (a, b, y) in FORMS.items():
            (d / f"{op.lower()}.py").write_text(_spec(op, a, b, y))
        write_ops([str(d / f"{op.lower()}.py") for op in FORMS], d / "gen")
    d = run_shared("cube-literal-dims", fill)
    return {op: (d / f"{op.lower()}.py", d / "gen") for op in FORMS}


@pytest.mark.parametrize("engine", ["kir", "emu"])
@pytest.mark.parametrize("op,dims,dt", [("MatVec", {"M": 37, "K": 50}, "float16"),
                                        ("MatVec", {"M": 3000, "K": 333}, "bfloat16"),
                                        ("VecMat", {"K": 50, "N": 2001}, "float16"),
                                        ("Outer", {"M": 37, "N": 45}, "bfloat16")])
def test_a_literal_extent_is_a_constant_of_the_matrix_product(engine, op, dims, dt, literal_specs):
    spec, gen = literal_specs[op]
    r = run_check(str(spec), dims=dims, dtypes={"T": dt}, seed=3, engine=engine, progress=False,
                  gen_dir=gen if engine == "emu" else None)
    _assert_float64(r, dt)
    if dims.get("M", 1) >= 3000:
        assert r.block_dim > 1   # the rows of M over several AI Cores


def test_a_literal_that_is_not_a_matrix_extent_is_still_refused(tmp_path):
    """Only a literal extent is a constant: a named dim shared by two roles ([M, M] x [M, 1]) stays refused with
    the layout's rule."""
    from opgen.kernel.family import NoKernel
    from opgen.registry import load_spec
    from opgen.tiling.pipeline import kernel_build

    p = tmp_path / "same_dims.py"
    p.write_text(_spec("SameDims", "[M, M]", "[M, 1]", "[M, 1]"))
    with pytest.raises(NoKernel, match=r"are not \[M, K\] x \[K, N\] over three distinct plain dims"):
        kernel_build(load_spec(str(p)))


@pytest.mark.parametrize("dims,dt", [({"B": 3, "M": 37, "K": 50}, "float16"),
                                     ({"B": 2, "M": 300, "K": 20000}, "bfloat16")])
def test_a_literal_n_with_a_folded_batch_and_a_bias(dims, dt, tmp_path):
    """[B, M, K] x [K, 1] + bias [1]: the batch folded into M (dimM = B * M), N the number 1, the bias read as the
    epilogue's [N] row; at K 20000 the tiling splits K over the AI Cores. The Kernel IR against float64."""
    spec = tmp_path / "batched_mat_vec_bias.py"
    spec.write_text(_spec("BatchedMatVecBias", "[B, M, K]", "[K, 1]", "[B, M, 1]", bias=True))
    r = run_check(str(spec), dims=dims, dtypes={"T": dt}, seed=4, engine="kir", progress=False)
    _assert_float64(r, dt)
    if dims["K"] == 20000:
        assert r.block_dim > 1
