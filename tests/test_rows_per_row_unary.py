"""A per-row exp / log read as a per-row value (docs/design.md "Per-row values the scalar unit cannot compute").

The AIV scalar unit has no exp or log; a per-row value the program reads per row (an output, a per-row sum) is taken
by the vector instruction on 8 lanes holding it (rowprog `sunary`: Duplicate, Ln / Exp, the scalar unit reads lane
0), instead of the refusal a new user met writing LogSumExp (out = m + log(sum(exp(x - m)))). The oracle is float64
NumPy; every strategy a row length takes (whole rows, rows longer than UB)."""

import ml_dtypes
import numpy as np
import pytest

from opgen.check.run import run_check

SPEC = '''
from opgen.dsl import A2, OpSpec, bf16, f16, f32

spec = OpSpec("ReduceLogSumExpProbe", aclnn="aclnnReduceLogSumExpProbe", socs=(A2,), round="rint",
              doc="log-sum-exp over the last axis, and the row maximum's exp")
Bd = spec.variadic("Bd", max_rank=3)
H = spec.dim("H", max=262144)
(T,) = spec.dtype_vars("T")
spec.input("self", T, [Bd, H])
spec.output("out", T, [Bd, 1])
spec.output("emax", f32, [Bd, 1])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, self):
    m = self.max(-1)
    return {"out": m + b.log(b.exp(self - m).sum(-1)), "emax": b.exp(m * -1.0)}
'''


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("lse") / "reduce_log_sum_exp_probe.py"
    p.write_text(SPEC)
    return p


def test_the_per_row_log_is_a_vector_instruction_on_8_lanes(spec_path):
    from opgen.registry import load_spec
    from opgen.tiling.pipeline import kernel_build

    progs = [v.prog for v in kernel_build(load_spec(str(spec_path))).lowered.extra["variants"]]
    for p in progs:
        ops = sorted(i.op for i in p.instrs if i.kind == "sunary")
        assert ops == ["Exp", "Ln"], ops


@pytest.mark.parametrize("rows, h, dtype", [(37, 1001, "float32"), (5, 70001, "bfloat16"), (3, 33, "float16")])
def test_log_sum_exp_matches_float64(spec_path, rows, h, dtype):
    rng = np.random.default_rng(rows * h)
    x = (rng.standard_normal((rows, h)) * 4.0).astype(np.float32)
    r = run_check(str(spec_path), inputs={"self": x}, dtypes={"T": dtype}, progress=False, engine="kir")
    assert not r.faults and r.passed, r.faults[:3]
    xin = x.astype({"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[dtype]) \
        .astype(np.float64)   # the kernel reads the input in T
    m = xin.max(-1, keepdims=True)
    want = m + np.log(np.exp(xin - m).sum(-1, keepdims=True))
    got = r.arrays["out"].astype(np.float64)
    tol = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
    assert np.max(np.abs(got - want) / np.maximum(np.abs(want), 1.0)) < tol
    # exp(-m) in T (the spec's op dtype), then stored as f32: one rounding to T of the fp32 Exp
    np.testing.assert_allclose(r.arrays["emax"].astype(np.float64), np.exp(-m), rtol=tol)
