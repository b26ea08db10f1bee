"""ROW_SPLIT's exchange of per-batch reductions (opgen.kernel.rowclass `_split_batch_nodes`): after SyncAll each
batch whose rows lie on several cores is combined from those cores' partial rows, in (batch, column slice) items
dealt out over all the cores (item t * bSlices + s to core (t * bSlices + s) % blockNum, bSlices = ceil(blockNum /
split batches), slices of whole 16-column blocks), not every split batch by the core of each column slice.

Checked by values on ReduceMean over the middle axis (examples/specs/reduce_mean.py), the emulated kernel and the
Kernel-IR interpreter against float64 NumPy: few split batches (one batch cut into many slices, a last slice
shorter than the others), many (one or two slices each, more items than cores), odd H and rows over the cores with
tails, fp32 and bf16. The time the exchange saves is a figure of `opgen bench` (the ReduceMean [32, 1024, 1024]
bf16 row of bench/results: 1.14 -> 1.05 of its memory floor), not of this file."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from opgen.check import run_check

EX = Path(__file__).resolve().parent.parent / "examples" / "specs" / "reduce_mean.py"

CASES = [  # (B, M, H, T)
    (3, 37, 33, "float32"),      # 111 rows over 48 cores (a tail): 3 split batches, bSlices 16: slices 16, 16, 1
    (2, 700, 1000, "bfloat16"),  # 2 split batches, bSlices 24: 21 slices of 48 columns, the last 40
    (40, 50, 100, "float32"),    # 2000 rows: most batches split, 2 slices each (64, 36): more items than cores
    (40, 50, 100, "bfloat16"),
    (5, 1, 17, "float32"),       # M = 1: 5 rows on 5 cores, no batch split
]


@pytest.mark.parametrize("engine", ["emu", "kir"])
@pytest.mark.parametrize("b, m, h, dtype", CASES)
def test_split_batches_against_float64(examples_gen, engine, b, m, h, dtype):
    """out = mean over M in float64 of the (T-rounded) inputs, within one rounding to T (2^-8 relative for bf16) or
    fp32 summation error (1e-5 of the values' scale)."""
    rng = np.random.default_rng(b * 10007 + m * 101 + h)
    x = (rng.standard_normal((b, m, h)) + rng.uniform(-2, 2, (b, 1, h)))
    x = x.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32).astype(np.float32)
    r = run_check(str(EX), inputs={"self": x}, dtypes={"T": dtype}, gen_dir=examples_gen, engine=engine,
                  progress=False)
    assert not r.faults and r.passed, r.faults[:2]
    want = x.astype(np.float64).mean(1)
    got = np.asarray(r.arrays["out"], np.float64).reshape(want.shape)
    rel = 2.0**-8 if dtype == "bfloat16" else 1e-5
    np.testing.assert_allclose(got, want, rtol=rel, atol=1e-5 * np.abs(want).max())
