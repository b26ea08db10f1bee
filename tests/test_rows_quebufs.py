"""ROW_SPLIT's row queues with one buffer where two would cap the rows of a pass (opgen.tiling.rows.row_split, the
field rowQueBufs; opgen.kernel.rowsched `free_after_last_use` / `alloc_before_first_use`): the UB plan counted by
hand, the buffers' lifetimes in the emitted Compute, and the emulated kernel's values against float64."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from opgen.kernel import kir
from opgen.registry import load_spec

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "specs"
UB = 196608   # ascend910b1: UB bytes of an AIV core (docs/reference/ascendc.md §3)


def _tiling(name: str, dims: dict, dtypes: dict) -> dict:
    from opgen.ir.dtypes import parse_dtype
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import evaluate
    from opgen.tiling.pipeline import kernel_build

    spec = load_spec(str(EX / name))
    u = kernel_build(spec)
    return evaluate(spec, u.tiling.program, u.tiling.inputs, dims, {k: parse_dtype(v) for k, v in dtypes.items()},
                    PLATFORMS["ascend910b1"], {})


def _lngv3_row_bytes(H: int, bufs: int) -> int:
    """LayerNormGradV3's ROW_SPLIT bytes a row of a pass (T bf16), from the spec: dy and x in and pd_x out (2 B an
    element, `bufs` buffers each), three fp32 row temporaries (z, dy then dy * z then g * z, g then dx), rstd and mean
    (fp32, two buffers each), RowsSum's 64-float scratch and the two row sums (fp32)."""
    return 3 * bufs * H * 2 + 3 * H * 4 + 2 * 2 * 4 + 64 * 4 + 2 * 4


def _lngv3_fixed_bytes(H: int, u_bytes: int) -> int:
    """... and its bytes held once: gamma and the two column sums (fp32 rows), gamma's staging row (max(4, U)) and
    the column sums' output staging row (fp32), ReduceSum's result block and scratch (a (value, index) pair a
    64-lane repeat, a block rounded), the 32-byte rounding slack of the two row-sum slots and of the four stat
    buffers."""
    return 3 * H * 4 + H * max(4, u_bytes) + H * 4 + (-(-(2 * -(-H // 64)) // 8) * 8 + 8) * 4 + 2 * 8 * 4 + 4 * 8 * 4


@pytest.mark.parametrize("u", ["float32", "bfloat16"])
def test_layer_norm_grad_at_1152_runs_eight_rows_a_pass(u):
    """LayerNormGradV3 4096 x 1152 (T bf16; the bench's row) on 48 cores: 86 rows a core. With two buffers per
    row queue (UB - fixed) // 27928 = 6 rows a pass fit; with one (UB - 23424) // 21016 = 8, so the tiling takes
    one buffer a queue and 8 rows a pass (11 passes a core instead of 15)."""
    H = 1152
    tl = _tiling("layer_norm_grad.py", {"Bd": (4096,), "H": H}, {"T": "bfloat16", "U": u})
    fixed = _lngv3_fixed_bytes(H, 4 if u == "float32" else 2)
    two, one = _lngv3_row_bytes(H, 2), _lngv3_row_bytes(H, 1)
    assert (fixed, two, one) == (23424, 27928, 21016)
    assert (UB - fixed) // two == 6 and (UB - fixed) // one == 8
    assert tl["strategy"] == 1 and tl["blockDim"] == 48 and tl["rowQueBufs"] == 1, tl
    assert (tl["fixedBytes"], tl["rowBytes"], tl["rowBytesTwoBufs"]) == (fixed, one, two)
    assert tl["rowsPerPass"] == 8 >= 8
    assert tl["fixedBytes"] + tl["rowsPerPass"] * tl["rowBytes"] <= UB


def test_two_buffers_stay_where_the_rows_fit_or_one_buys_no_row():
    """Two buffers a queue where they already fit every row a pass could take (LayerNormGradV3, 96 rows on 48
    cores: 2 rows a core), and where one buffer fits no more rows (H = 4096: one row a pass either way)."""
    small = _tiling("layer_norm_grad.py", {"Bd": (96,), "H": 1152}, {"T": "bfloat16", "U": "float32"})
    assert small["rowQueBufs"] == 2 and small["rowsPerPass"] == 2 and small["rowBytes"] == _lngv3_row_bytes(1152, 2)
    wide = _tiling("layer_norm_grad.py", {"Bd": (4096,), "H": 4096}, {"T": "bfloat16", "U": "float32"})
    assert wide["rowQueBufs"] == 2 and wide["rowsPerPass"] == 1 == wide["rowsFitOneBuf"]


def test_compute_frees_each_input_after_its_last_read_and_allocates_the_output_before_its_first_write():
    """In every branch of LayerNormGradV3's Compute, x's buffer is freed right after the cast that reads it (the
    first instruction of the pass), dy's right after its cast, and pd_x's is allocated right before the cast that
    writes it (the last): a queue of one buffer overlaps the next pass's copy-in and this pass's copy-out with
    everything between."""
    from opgen.check.kirengine import kernel_classes

    (k,) = kernel_classes(load_spec(str(EX / "layer_norm_grad.py")))
    body = k.method("Compute").body

    # the three ways a pass runs (rowsched.BLOCK_FITS: eight rows a repeat; ROWS_REDUCE_FITS: the row reductions
    # over all rows; else row by row reductions), each over all rows of the pass
    (top,) = [s for s in body if isinstance(s, kir.If)]
    (inner,) = [s for s in top.orelse if isinstance(s, kir.If)]
    branches = [top.then, inner.then, inner.orelse]
    for b in branches:
        kinds = [(s.op.name, s.arg("src").tensor if s.op.name == "CAST_FROM" else s.arg("dst").tensor)
                 if isinstance(s, kir.Vec) and s.op.name in ("CAST_FROM", "CAST_TO") else
                 (type(s).__name__, s.var) if isinstance(s, (kir.Free, kir.Alloc)) else None for s in b]
        for name in ("rowIn_x", "rowIn_dy"):
            at = kinds.index(("CAST_FROM", name))
            assert kinds[at + 1] == ("Free", name), (name, kinds)
            assert ("CAST_FROM", name) not in kinds[at + 1:]
        at = kinds.index(("Alloc", "rowOut_pd_x"))
        assert [x for x in kinds[at + 1:] if x is not None] == [("CAST_TO", "rowOut_pd_x")], kinds


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_layer_norm_grad_with_one_buffer_a_queue_against_float64(examples_gen):
    """LayerNormGradV3 768 x 1152 (T bf16, U fp32) on 48 cores: 16 rows a core, so one buffer a row queue takes 8
    rows a pass (two passes against three of 6 rows with two buffers) and is priced lower
    (tests/test_cost_overlap.py): the tiling takes it. The emulation (strict UB bounds and pipe races) runs it
    without a fault, and its outputs match float64 NumPy of the spec's formulas: dx within bf16's rounding, the
    column sums over 768 rows within fp32's."""
    from opgen.check import run_check

    r = run_check(str(EX / "layer_norm_grad.py"), dims={"Bd": (768,), "H": 1152},
                  dtypes={"T": "bfloat16", "U": "float32"}, gen_dir=examples_gen, seed=5, progress=False)
    assert r.passed and not r.faults and r.tiling_key % 10 == 1
    tl = _tiling("layer_norm_grad.py", {"Bd": (768,), "H": 1152}, {"T": "bfloat16", "U": "float32"})
    assert tl["rowQueBufs"] == 1 and tl["rowsPerPass"] == 8
    f = {n: np.asarray(r.inputs[n], np.float64) for n in ("dy", "x", "rstd", "mean", "gamma")}
    z = (f["x"] - f["mean"]) * f["rstd"]
    g = f["dy"] * f["gamma"]
    dx = f["rstd"] * (g - g.mean(-1, keepdims=True) - z * (g * z).mean(-1, keepdims=True))
    dgamma, dbeta = (f["dy"] * z).sum(0), f["dy"].sum(0)
    out = {n: np.asarray(r.arrays[n], np.float64) for n in ("pd_x", "pd_gamma", "pd_beta")}
    assert np.allclose(out["pd_x"], dx, rtol=2.0**-7, atol=2.0**-10 * np.abs(dx).max())
    assert np.allclose(out["pd_gamma"], dgamma, rtol=2.0**-16, atol=2.0**-18 * np.abs(f["dy"] * z).sum(0).max())
    assert np.allclose(out["pd_beta"], dbeta, rtol=2.0**-16, atol=2.0**-18 * np.abs(f["dy"]).sum(0).max())
