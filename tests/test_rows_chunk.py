"""ROW_CHUNK, the rows family's schedule for long rows that combine nothing across their columns (opgen.kernel
.rowcounts.chunkable; opgen.tiling.rowkernel `_chunk_or_slice`; ColSplit over this core's rows, opgen.kernel.rowsched):
rows split over the cores as in ROW_SPLIT, each row walked in column chunks. Which strategy the tiling picks comes
from the cost model (docs/reference/kernel_cost.md §2) and is checked here by its consequences: many long rows run
ROW_CHUNK, a few long rows COL_SPLIT (more cores busy), short rows ROW_SPLIT, a row-reduction kernel never gets the
strategy. The emulated kernel and the Kernel IR interpreter are compared with float64 NumPy written from the spec's
formula (SwiGlu: y = silu(a) * g over the halves a | g of the last axis), and the GM traffic with its minimum."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from opgen.check import run_check
from opgen.ir.dtypes import DType
from opgen.platforms import PLATFORMS
from opgen.registry import _load_file
from opgen.tiling.emit import program_inputs

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "specs"
B1 = PLATFORMS["ascend910b1"]
TOL = {"float32": 2e-6, "float16": 2.0**-10, "bfloat16": 2.0**-7}   # one rounding of the output, relative


def _tiling(spec_path: Path, rows: int, h: int, dtype: DType) -> dict:
    from opgen.tiling.pipeline import kernel_build

    spec = _load_file(spec_path)
    t = kernel_build(spec).tiling
    return t.program.evaluate(program_inputs(spec, t.program, t.inputs, {"Bd": (rows,), "H": h}, {"T": dtype}, B1,
                                             {"dim": -1} if any(a.name == "dim" for a in spec.attrs) else {}))


def test_the_strategy_follows_rows_and_row_length():
    """SwiGlu: rows of 1000 fit UB (ROW_SPLIT); 4096 rows of 11008 do not, and ROW_CHUNK (4) spreads them over all
    cores with chunks of whole rows' columns; 5 such rows leave ROW_CHUNK 43 cores idle, COL_SPLIT (2) takes them;
    going from 5 to 4096 rows the choice turns once from COL_SPLIT to ROW_CHUNK and never back."""
    sw = EX / "swiglu.py"
    assert _tiling(sw, 4096, 1000, DType.bf16)["strategy"] == 1
    big = _tiling(sw, 4096, 11008, DType.bf16)
    assert big["strategy"] == 4 and big["tilingKey"] % 10 == 4 and big["blockDim"] == B1.aiv and big["fits"]
    assert big["colsPerPass"] % 16 == 0 and big["groupRows"] >= 1   # here a chunk holds a whole row
    assert _tiling(sw, 5, 11008, DType.bf16)["strategy"] == 2
    seq = [_tiling(sw, r, 11008, DType.bf16)["strategy"] for r in (5, 10, 20, 40, 48, 96, 400, 4096)]
    assert seq == sorted(seq, key=lambda s: s == 4) and seq[0] == 2 and seq[-1] == 4, seq


def test_a_kernel_summing_over_rows_has_no_row_chunk():
    """LayerNormGradV3 sums over rows (dgamma, dbeta: column accumulators exchanged across cores): its tiling never
    picks 4 and its kernel entry declares no ROW_CHUNK key (a row-reduction program without sums over rows gets
    ROW_CHUNK with its rows resident: tests/test_rows_resident.py)."""
    from opgen.codegen import generate_cached

    path = EX / "layer_norm_grad.py"
    for rows, h in ((4096, 16384), (3, 8192), (4096, 8192)):
        spec = _load_file(path)
        t = kernel_build_of(spec)
        got = t.program.evaluate(program_inputs(spec, t.program, t.inputs, {"Bd": (rows,), "H": h},
                                                {"T": DType.bf16, "U": DType.bf16}, B1, {}))
        assert got["strategy"] in (1, 2, 3), (rows, h, got["strategy"])
    files = generate_cached(path)[1]
    assert not any("ROW_CHUNK" in text for text in files.values())


def kernel_build_of(spec):
    from opgen.tiling.pipeline import kernel_build

    return kernel_build(spec).tiling


def _oracle(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    a, g = np.split(x, 2, axis=-1)
    return a / (1.0 + np.exp(-a)) * g


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("engine", ["emu", "kir"])
@pytest.mark.parametrize("rows, h, dtype, strategy", [
    ((50,), 11008, "float16", 4),      # 50 rows on 48 cores: two cores take a second row; 2 chunks a row
    ((3, 7), 20000, "bfloat16", 4),    # 21 rows, a chunk tail of 20000 - k * colsPerPass columns
    ((5,), 11008, "float32", 2),       # few rows: COL_SPLIT, the same method over a column slice
])
def test_row_chunk_against_float64(engine, rows, h, dtype, strategy, examples_gen):
    r = run_check(str(EX / "swiglu.py"), dims={"Bd": rows, "H": h}, dtypes={"T": dtype}, attrs={"dim": -1},
                  gen_dir=examples_gen, seed=h + len(rows), progress=False, engine=engine)
    assert not r.faults and r.passed, r.faults[:3]
    assert r.tiling_key % 10 == strategy, r.tiling_key
    ref = _oracle(r.inputs["x"])
    got = np.asarray(r.arrays["y"], dtype=np.float64)
    assert got.shape == ref.shape
    bound = 4 * TOL[dtype] * np.abs(ref) + 1e-6 * np.abs(ref).max()
    assert np.all(np.abs(got - ref) <= bound), float(np.abs(got - ref).max())
    if strategy == 4 and engine == "emu":   # every element read once and written once (the emulation counts)
        assert r.gm_bytes == r.gm_bytes_min, (r.gm_bytes, r.gm_bytes_min)


def test_renaming_changes_nothing(tmp_path):
    """SwiGlu with the operator, its dims, tensor and dtype variable renamed: the same strategies, chunks, groups,
    cores and estimates at every shape (and the same choice of ROW_CHUNK over COL_SPLIT)."""
    import re

    text = (EX / "swiglu.py").read_text()
    for old, new in (("SwiGlu", "GatedQq"), ("aclnnSwiGlu", "aclnnGatedQq"), ("Bd", "Lqq"), ("H", "Kqq"),
                     ("x", "inqq"), ("y", "outqq"), ("T", "Xqq")):
        text = re.sub(rf"(?<![\w]){old}(?![\w])", new, text)
    p = tmp_path / "gated_qq.py"
    p.write_text(text)
    from opgen.tiling.pipeline import kernel_build

    spec = _load_file(p)
    assert spec.name == "GatedQq"
    t = kernel_build(spec).tiling
    keys = ("strategy", "colsPerPass", "groupRows", "blockDim", "chunkRunCycles", "sliceRunCycles", "useChunks")
    for rows, h in ((5, 11008), (50, 11008), (4096, 11008), (21, 20000), (4096, 1000)):
        for dt in (DType.f32, DType.f16, DType.bf16):
            a = _tiling(EX / "swiglu.py", rows, h, dt)
            b = t.program.evaluate(program_inputs(spec, t.program, t.inputs, {"Lqq": (rows,), "Kqq": h}, {"Xqq": dt},
                                                  B1, {"dim": -1}))
            assert {k: a.get(k) for k in keys} == {k: b.get(k) for k in keys}, (rows, h, dt)


def _smooth_l1(x: np.ndarray, t: np.ndarray, beta: float = 1.0) -> np.ndarray:
    d = np.asarray(x, dtype=np.float64) - np.asarray(t, dtype=np.float64)
    ad = np.abs(d)
    return np.where(ad < beta, 0.5 * d * d / beta, ad - 0.5 * beta)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("name, dims, strategy", [
    ("swiglu.py", {"Bd": (192,), "H": 11008}, 4),        # 4 rows a core, each row in two chunks: 8 items a core
    ("smooth_l1_loss.py", {"Bd": (1024,), "H": 4096}, 2),  # one row of 2^22: a core's slice in 14 chunks
])
@pytest.mark.slow
def test_chunked_copies_overlap_compute(name, dims, strategy, examples_gen):
    """ColSplit of a chunkable program prefetches its items through two buffers (docs/design.md, ROW_CHUNK): the
    next chunk's copy-in runs beside this chunk's compute and the copy-out of the one before, so the emulation's
    time line of every core (copies at the core's share of the HBM bandwidth, docs/design.md "Copy/compute
    overlap") stays below the memory term, which sets the estimate, within 5% of the floor (each element read once
    and written once at 1.6 TB/s, docs/reference/kernel_cost.md §2). With one TBuf a chunk and one output buffer
    the copy waited for the compute before it: 1.25x and 1.43x, the time line the bound. The outputs against
    float64 NumPy of the spec's formula (bf16: one rounding)."""
    r = run_check(str(EX / name), dims=dims, dtypes={"T": "bfloat16"}, gen_dir=examples_gen, seed=7,
                  progress=False)
    assert not r.faults and r.passed, r.faults[:3]
    assert r.tiling_key % 10 == strategy, r.tiling_key
    if name == "swiglu.py":
        ref, got = _oracle(r.inputs["x"]), r.arrays["y"]
    else:
        ref, got = _smooth_l1(r.inputs["self"], r.inputs["target"]), r.arrays["out"]
    got = np.asarray(got, dtype=np.float64)
    bound = 4 * TOL["bfloat16"] * np.abs(ref) + 1e-6 * np.abs(ref).max()
    assert np.all(np.abs(got - ref) <= bound), float(np.abs(got - ref).max())
    c = r.cost
    assert r.gm_bytes == r.gm_bytes_min
    assert c["overlap_us"] < c["memory_us"] and c["bound"] == "memory", c
    assert c["estimate_us"] <= 1.05 * c["floor_us"], c
