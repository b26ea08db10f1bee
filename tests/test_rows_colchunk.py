"""ROW_CHUNK with column rows loaded per chunk: a row-reduction program whose column rows (a lane index computed by
CreateVecIndex, a per-class weight loaded from GM) do not fit whole in UB beside the resident row holds one chunk of
them instead, loaded (or computed at the chunk's first column) in every chunk of each phase that reads them
(opgen.kernel.rowsched `_chunk_head`, the tiling field colChunkLoads of opgen.tiling.rowkernel `_resident_or_slice`).

CrossEntropyLoss [1024, 32000] bf16 picks its target with a lane-index row: 128 KB of fp32 whole, so before this
ROW_CHUNK did not fit and COL_SPLIT ran with its exchanges (two SyncAll a level and group). Checked here: the
strategy the tiling picks (per chunk without a weight; COL_SPLIT with one, whose re-read per row in the smoothing sum
would be 2x the minimum GM traffic), and the emulated kernel and the Kernel-IR interpreter against float64 NumPy written from
the operators' formulas (CrossEntropyLoss and its hand-written gradient; a chunk tail, rows over cores with tails,
ignored rows, label smoothing, bf16 and fp32), including a weighted run forced through the per-chunk form."""

from __future__ import annotations

import shutil
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from opgen.check import run_check
from opgen.ir.dtypes import DType
from opgen.platforms import PLATFORMS
from opgen.registry import _load_file
from opgen.tiling.emit import program_inputs

from forced_tiling import forced_package

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "specs"
B1 = PLATFORMS["ascend910b1"]
CE, CEG = EX / "cross_entropy_loss.py", EX / "cross_entropy_loss_grad.py"
NP_DT = {"bfloat16": ml_dtypes.bfloat16, "float32": np.float32}


def _tiling(path: Path, n: int, c: int, dtype: DType, weight: bool, eps: float = 0.0) -> dict:
    from opgen.tiling.pipeline import kernel_build

    spec = _load_file(path)
    t = kernel_build(spec).tiling
    attrs = {"reduction": "none", "label_smoothing": eps} if any(a.name == "reduction" for a in spec.attrs) \
        else {"labelSmoothing": eps}
    return t.program.evaluate(program_inputs(spec, t.program, t.inputs, {"N": n, "C": c}, {"T": dtype}, B1, attrs,
                                             present=(weight,)))


@pytest.mark.parametrize("path", [CE, CEG], ids=["loss", "grad"])
def test_the_column_rows_go_per_chunk_where_whole_ones_do_not_fit(path):
    """[1024, 32000] bf16 (the bench's shape): without a weight ROW_CHUNK (4) over every core, the column rows per
    chunk, no workspace; with a weight and label smoothing the per-chunk form would re-read it per row (more than a
    tenth of the row operands' bytes: 4 bytes a column against 4 of x and the output), so COL_SPLIT (2) stays (at
    label_smoothing 0 the weight row is not read: test_rows_runtime_guard)."""
    bare = _tiling(path, 1024, 32000, DType.bf16, False)
    assert bare["strategy"] == 4 and bare["colChunkLoads"] == 1 and bare["blockDim"] == B1.aiv, bare["strategy"]
    assert bare["workspaceBytes"] == 0 and bare["fits"] == 1 and bare["colsPerPass"] < 32000
    assert bare["colsPerPass"] % 64 == 0   # a compare / select covers whole 256-B repeats
    assert bare["colReloadBytes"] == 0   # no GM column row to re-read
    weighted = _tiling(path, 1024, 32000, DType.bf16, True, 0.1)
    assert weighted["strategy"] == 2 and weighted["colChunkLoads"] == 0, weighted["strategy"]
    assert weighted["colReloadBytes"] * 10 > 1024 * 32000 * 4


def _loss64(x, t, w, ignore, eps):
    """CrossEntropyLoss in float64 (torch's formula, reduction none): (loss [N], log_prob [N, C])."""
    x = np.asarray(x, np.float64)
    n, c = x.shape
    m = x.max(-1, keepdims=True)
    lp = x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))
    w = np.ones(c) if w is None else np.asarray(w, np.float64)
    keep = t != ignore
    tt = np.where(keep, t, 0)
    picked = lp[np.arange(n), tt] * w[tt]
    loss = -((1.0 - eps) * picked + eps / c * (lp * w).sum(-1)) * keep
    return loss, lp


def _inputs(n, c, dtype, seed, ignore=-100):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, c)) * 3.0).astype(NP_DT[dtype])
    t = rng.integers(0, c, n).astype(np.int64)
    t[::7] = ignore   # ignored rows: loss 0, log_prob still written
    t[1] = c - 1      # the last class: in the last chunk (a tail)
    return x, t


def _close(got, want, dtype):
    got = np.asarray(got, np.float64)
    rel = {"bfloat16": 2.0**-8, "float32": 2.0**-20}[dtype]
    err = np.abs(got - want)
    assert np.all(err <= 4 * rel * np.abs(want) + 2.0**-18 * np.abs(want).max() + 1e-30), float(err.max())


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("engine", ["emu", "kir"])
@pytest.mark.parametrize("n, c, dtype, eps", [
    (100, 8000, "bfloat16", 0.0),     # 100 rows on 48 cores: 4 take a third row; 8000 = a chunk and a tail
    (63, 12001, "float32", 0.1),      # odd C, 15 cores take a second row; label smoothing sums every class
])
def test_cross_entropy_per_chunk_columns_against_float64(engine, n, c, dtype, eps, examples_gen):
    """CrossEntropyLoss without a weight over rows of several chunks: loss and log_prob against float64, ignored
    rows 0. Its picked log-probability reads the target's element of the input row from GM
    (rowalg.gather_through_lanewise: no lane-index row, so 100 x 8000 bf16 fits ROW_SPLIT and 63 x 12001 fp32 runs
    ROW_CHUNK); the emulation counts every input read once, every output written once, plus that element: at most
    one fp32 read per row and chunk (ROW_CHUNK's output phase reads it in each chunk of the row)."""
    x, t = _inputs(n, c, dtype, seed=c)
    r = run_check(str(CE), inputs={"input": x, "target": t}, attrs={"reduction": "none", "label_smoothing": eps},
                  dtypes={"T": dtype}, gen_dir=examples_gen, progress=False, engine=engine)
    assert not r.faults and r.passed and r.tiling_key % 10 == (1 if c == 8000 else 4), (r.faults[:3], r.tiling_key)
    loss, lp = _loss64(x, t, None, -100, eps)
    _close(r.arrays["log_prob"], lp, dtype)
    _close(r.arrays["loss"], loss, dtype)
    assert np.all(np.asarray(r.arrays["loss"])[t == -100] == 0)
    if engine == "emu":
        assert 0 <= r.gm_bytes - r.gm_bytes_min <= n * ((c + 1023) // 1024) * 4, (r.gm_bytes, r.gm_bytes_min)


def _grad64(g, lp, t, w, ignore, eps):
    """CrossEntropyLossGrad in float64 from the saved log_prob: p * s - onehot(t) * s + g * eps / C * (p * sum(w)
    - w), s = (1 - eps) * g * w[t], 0 on ignored rows."""
    lp = np.asarray(lp, np.float64)
    n, c = lp.shape
    w = np.ones(c) if w is None else np.asarray(w, np.float64)
    keep = t != ignore
    tt = np.where(keep, t, 0)
    g = np.asarray(g, np.float64) * keep
    p = np.exp(lp)
    s = (1.0 - eps) * g * w[tt]
    dx = p * s[:, None] + (g * eps / c)[:, None] * (p * w.sum() - w)
    dx[np.arange(n), tt] -= s
    return dx


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("engine", ["emu", "kir"])
def test_cross_entropy_grad_per_chunk_columns_against_float64(engine, examples_gen):
    """CrossEntropyLossGrad fp32 over 100 rows of 12000 without a weight (ROW_CHUNK, the lane index per chunk; label
    smoothing 0.05, ignored rows) against float64."""
    n, c, dtype = 100, 12000, "float32"
    rng = np.random.default_rng(4)
    x, t = _inputs(n, c, dtype, seed=9)
    _loss, lp = _loss64(x, t, None, -100, 0.0)
    lp = lp.astype(np.float32)
    g = rng.standard_normal(n).astype(np.float32)
    r = run_check(str(CEG), inputs={"gradLoss": g, "logProb": lp, "target": t}, attrs={"labelSmoothing": 0.05},
                  dtypes={"T": dtype}, gen_dir=examples_gen, progress=False, engine=engine)
    assert not r.faults and r.passed and r.tiling_key % 10 == 4, (r.faults[:3], r.tiling_key)
    want = _grad64(g, lp, t, None, -100, 0.05)
    got = np.asarray(r.arrays["xGrad"], np.float64)
    assert np.all(np.abs(got - want) <= 2.0**-18 * np.abs(g).max()), float(np.abs(got - want).max())
    assert np.all(got[t == -100] == 0)


def _forced_col_chunks(tmp_path: Path, name: str) -> Path:
    """Spec `name`'s package generated into tmp_path with its tiling function patched to run ROW_CHUNK (strategy 4)
    with its column rows per chunk (colChunkLoads 1) whatever the tiling would choose."""
    return forced_package(tmp_path, EX / f"{name}.py", lets={"strategy": "4", "colChunkLoads": "1"},
                          fields={"colsPerPass": "rowChunkColsColLoads", "groupRows": "rowChunkRowsColLoads"})


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.slow
def test_a_weight_loaded_per_chunk_against_float64(tmp_path):
    """CrossEntropyLoss bf16 over 50 rows of 20001 with a weight, forced through ROW_CHUNK with the column rows per
    chunk (the weight copied from GM in every chunk of the phase that reads it, the smoothing sum; its gather at the
    target is one element read by the scalar unit, opgen.kernel.rowalg.gather_column_inputs): loss and log_prob
    against float64; the weight row is read once per row, plus that element (once per chunk of the outputs'
    phase), everything else once."""
    n, c, dtype = 50, 20001, "bfloat16"
    x, t = _inputs(n, c, dtype, seed=2)
    w = np.random.default_rng(3).uniform(0.25, 2.0, c).astype(np.float32)
    gen = _forced_col_chunks(tmp_path, "cross_entropy_loss")
    r = run_check(str(CE), inputs={"input": x, "target": t, "weight": w},
                  attrs={"reduction": "none", "label_smoothing": 0.2}, dtypes={"T": dtype}, gen_dir=gen,
                  progress=False)
    assert not r.faults and r.passed and r.tiling_key % 10 == 4, (r.faults[:3], r.tiling_key)
    loss, lp = _loss64(x, t, w, -100, 0.2)
    _close(r.arrays["log_prob"], lp, dtype)
    _close(r.arrays["loss"], loss, dtype)
    extra = r.gm["weight"].read - n * c * 4   # the gathered elements: 4 bytes a row and read
    assert extra % (4 * n) == 0 and 0 < extra <= 4 * n * -(-c // 64), r.gm["weight"].read
