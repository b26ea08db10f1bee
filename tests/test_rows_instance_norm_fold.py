"""InstanceNorm's normalisation tail as (x - mean) * S + beta[c] (opgen.kernel.rowalg.fold_affine_chains: S = rstd *
gamma[c] once a row; examples/specs/instance_norm.py) checked by values: the emulated kernel and the Kernel-IR
interpreter against float64 NumPy written from the formula (biased variance, per-channel affine), on rows whose mean
is off 0 (|mean| / std up to 3; at 10 the ROW_CHUNK kernel fails CANN's fp32 floored MARE with or without the
fold, 0.0015 > 0.00122, from its fp32 statistics), in ROW_SPLIT (rows in UB) and ROW_CHUNK (rows longer than UB: the final phase reads x
again), fp32 and fp16. The bound (docs/reference/kernel_cost.md §4): about 4u |x - mean| |S| from the chain or its
fold, log2(L) u (|x| + |mean|) |S| from the fp32 mean (k + 4 = 8 added for margin), plus the output's rounding to T
(u = 2^-24)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from opgen.check import run_check

EX = Path(__file__).resolve().parent.parent / "examples" / "specs" / "instance_norm.py"


def _inputs(n: int, c: int, h: int, w: int, dtype: str) -> dict:
    """x normal with a per-(n, c) offset in [-3, 3], gamma in [0.5, 1.5], beta normal; fp16 values rounded to
    fp16 (held as float32)."""
    rng = np.random.default_rng(n * 1000 + c * 10 + h * w)
    x = rng.standard_normal((n, c, h, w)) + rng.uniform(-3, 3, (n, c, 1, 1))
    inp = {"x": x, "gamma": rng.uniform(0.5, 1.5, c), "beta": rng.standard_normal(c)}
    cast = np.float16 if dtype == "float16" else np.float32
    return {k: v.astype(cast).astype(np.float32) for k, v in inp.items()}


CASES = [  # (N, C, H, W, T): strategy
    (2, 3, 5, 7, "float32"),        # ROW_SPLIT: rows of 35 in UB
    (2, 3, 16, 16, "float16"),
    (49, 1, 4, 5000, "float32"),    # ROW_CHUNK: 49 rows of 20000 over 48 cores, a tail
]


@pytest.mark.parametrize("engine", ["emu", "kir"])
@pytest.mark.parametrize("n, c, h, w, dtype", CASES)
def test_instance_norm_fold_against_float64(examples_gen, engine, n, c, h, w, dtype):
    """y within the fold's bound plus the output's rounding of float64's (x - mean) rstd gamma + beta; mean and
    variance within their rounding to T and the fp32 sums' error."""
    inp = _inputs(n, c, h, w, dtype)
    r = run_check(str(EX), inputs=inp, dtypes={"T": dtype}, gen_dir=examples_gen, engine=engine, progress=False)
    assert not r.faults and r.passed, r.faults[:2]
    x = inp["x"].astype(np.float64)
    mean = x.mean((2, 3), keepdims=True)
    var = ((x - mean) ** 2).mean((2, 3), keepdims=True)
    scale = inp["gamma"].astype(np.float64)[:, None, None] / np.sqrt(var + 1e-5)
    y = (x - mean) * scale + inp["beta"].astype(np.float64)[:, None, None]
    u, length = 2.0 ** -24, h * w
    out_u = 2.0 ** -11 if dtype == "float16" else u
    bound = ((8 + np.log2(length)) * u * (np.abs(x) + np.abs(mean)) * np.abs(scale)
             + 2 * out_u * np.abs(y) + u)
    got = np.asarray(r.arrays["y"], np.float64).reshape(y.shape)
    assert np.all(np.abs(got - y) <= bound), float(np.max(np.abs(got - y) / bound))
    for name, want in (("mean", mean), ("variance", var)):
        g = np.asarray(r.arrays[name], np.float64).reshape(want.shape)
        np.testing.assert_allclose(g, want, rtol=4 * out_u + 64 * u, err_msg=name)
