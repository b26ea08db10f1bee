"""COL_SPLIT's exchange of partial row reductions between cores (opgen.kernel.rowsched `_total_owned_rows`,
opgen.tiling.rowkernel `xchg_plan` / `tree_steps`; docs/design.md "COL_SPLIT exchange"): the owner of a group's rows
copies every core's partials of them in one strided DataCopyPad into a [cores, AlignUp(on, 8)] tile and folds it in
a pairwise tree (n rows left: the last floor(n / 2) onto the first), ceil(log2(cores)) vector instructions.

Checked by its consequences: the tree's instruction count in the tiling's cost term against a plain count of the
folds and log2; the tile's UB bound the plan counts against the allocation for every core count and group size; the
emitted kernel's exchange (one copy, the tree, no per-core loads); CrossEntropyLoss through COL_SPLIT on core counts
that are not powers of two, with owners of several rows, a last owner of fewer and owners of none, and a shorter last
group, against torch in float64; and a kernel whose tree skips or doubles a row failing `opgen check`."""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from opgen.check import run_check
from opgen.cli import main as cli_main
from opgen.ir.dtypes import DType
from opgen.platforms import PLATFORMS
from opgen.tiling.program import TilingProgram
from opgen.tiling.rowkernel import tree_steps

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "specs"


def _folds(n: int) -> int:
    """Folds of the documented tree over n rows, counted by hand: n -> n - n // 2 until one row is left."""
    steps = 0
    while n > 1:
        n -= n // 2
        steps += 1
    return steps


def test_tree_steps_is_the_trees_fold_count():
    """The cost model's tree_steps(cores) is the number of folds the kernel's loop runs, ceil(log2(cores))."""
    p = TilingProgram("t")
    n = p.input("n", "cores")
    p.let("steps", tree_steps(n), "folds", True)
    for cores in list(range(1, 130)) + [4095, 4096]:
        got = p.evaluate({"n": cores})["steps"]
        assert got == _folds(cores) == (math.ceil(math.log2(cores)) if cores > 1 else 0), cores


def test_the_tile_the_kernel_allocates_is_within_the_plan():
    """The kernel allocates cores * AlignUp(rowsPerOwner, 8) floats with rowsPerOwner = ceil(groupRows / cores)
    (rowsched `_col_buffers`); the plan counts 4 bytes a group row and 32 bytes a core (rowkernel `xchg_plan`)."""
    for cores in range(1, 65):
        for g in range(1, 1100):
            per = -(-g // cores)
            assert cores * (-(-per // 8) * 8) * 4 <= 4 * g + 32 * cores, (cores, g)


def test_the_emitted_exchange_is_one_copy_and_a_tree():
    """The bundled AdaLayerNormV2's TotalOwnedRows: one DataCopyPad of blockCount cores into the tile, the fold loop
    of one Add over h rows, the totals out in one DataCopyPad; no per-core LoadRow."""
    text = (ROOT / "generated" / "ada_layer_norm_v2" / "op_kernel" / "ada_layer_norm_v2.h").read_text()
    body = text[text.index("void TotalOwnedRows("):]
    body = body[:body.index("\n    }\n")]
    assert "LoadRow" not in body and "StoreRow" not in body
    assert body.count("DataCopyPad(") == 2
    assert "DataCopyExtParams(static_cast<uint16_t>(cores), on * sizeof(float)" in body
    assert re.search(r"for \(int64_t d = 0; d < cores - 1;\) \{\s*const int64_t h = \(cores - d\) / 2;", body)
    assert "Add(xchg_, xchg_, xchg_[(cores - d - h) * oa], static_cast<int32_t>(h * oa));" in body


UNIT = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}


def _ce_oracle(x, t, eps):
    """torch.nn.functional.cross_entropy (reduction none, ignore_index -100, label smoothing eps) and log_softmax
    in float64."""
    import torch

    x64 = torch.tensor(np.asarray(x, np.float64))
    loss = torch.nn.functional.cross_entropy(x64, torch.tensor(t), reduction="none", ignore_index=-100,
                                             label_smoothing=eps)
    return loss.numpy(), torch.log_softmax(x64, -1).numpy()


def _ce_tiling(n: int, c: int, dtype: str, soc: str, eps: float) -> dict:
    """CrossEntropyLoss's tiling program evaluated for input [n, c] of `dtype` on platform `soc` with label_smoothing
    `eps` (at 0 the weight row is not read and these shapes take ROW_CHUNK: test_rows_runtime_guard)."""
    from opgen.registry import _load_file
    from opgen.tiling.emit import program_inputs
    from opgen.tiling.pipeline import kernel_build

    spec = _load_file(EX / "cross_entropy_loss.py")
    t = kernel_build(spec).tiling
    dt = {"bfloat16": DType.bf16, "float16": DType.f16, "float32": DType.f32}[dtype]
    return t.program.evaluate(program_inputs(spec, t.program, t.inputs, {"N": n, "C": c}, {"T": dt}, PLATFORMS[soc],
                                             {"label_smoothing": eps}))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("n, c, dtype, soc, cores, group, owner", [
    # (the groups hold 8-row sub-batches' temporaries since COL_SPLIT prices 8 rows at once: docs/design.md)
    # (the weight's gather is one GM element a row, no exchanged partial: opgen.kernel.rowalg.gather_column_inputs)
    # 47 cores, groups of 74 rows: owners of 2 rows, cores 37.. of none; a last group of 26 rows
    (100, 24001, "bfloat16", "ascend910b1", 47, 74, 2),
    # the 40 cores of a 910B3, groups of 49 rows: owners of 2, core 24 of 1, cores 25.. of none; a last group of
    # 2 rows
    (100, 28001, "bfloat16", "ascend910b3", 40, 49, 2),
    # fp32 over 48 cores: groups of 52 rows, owners of 2, cores 26.. of none; a last group of 48 rows
    (100, 16001, "float32", "ascend910b1", 48, 52, 2),
])
def test_col_split_exchange_against_float64(n, c, dtype, soc, cores, group, owner, examples_gen):
    """CrossEntropyLoss (a row maximum and a row sum: both the Max and the Add tree) through COL_SPLIT against torch
    in float64; the tiling's core count, group and owned rows are the ones the case names. The weight is present
    (all ones: the oracle's unweighted loss) because its smoothing sum re-reads the weight row per row beyond what
    ROW_CHUNK takes, which keeps these shapes in COL_SPLIT; without one they take ROW_CHUNK
    (tests/test_rows_colchunk.py)."""
    rng = np.random.default_rng(n + c)
    x = rng.normal(0.0, 3.0, (n, c)).astype(np.float32)
    t = rng.integers(0, c, n).astype(np.int64)
    t[::7] = -100
    eps = 0.1
    r = run_check(str(EX / "cross_entropy_loss.py"), {"input": x, "target": t, "weight": np.ones(c, np.float32)},
                  {"reduction": "none", "label_smoothing": eps},
                  dtypes={"T": dtype}, soc=soc, gen_dir=examples_gen, progress=False)
    assert not r.faults and r.passed, r.faults[:3]
    assert r.tiling_key % 10 == 2 and r.block_dim == cores, (r.tiling_key, r.block_dim)
    tl = _ce_tiling(n, c, dtype, soc, eps)
    assert (tl["blockDim"], tl["groupRows"], tl["rowsPerOwner"]) == (cores, group, owner), tl
    loss, lp = _ce_oracle(r.inputs["input"], t, eps)
    for name, ref in (("loss", loss), ("log_prob", lp)):
        got = np.asarray(r.arrays[name], np.float64)
        scale = np.abs(lp).max(-1) if name == "loss" else np.abs(ref)
        bound = (UNIT[dtype] * 4 + 2.0**-24 * 4 * c) * (scale + scale.mean())
        assert np.all(np.abs(got - ref) <= bound), (name, float(np.abs(got - ref).max()))


@pytest.fixture(scope="module")
def rms_gen(tmp_path_factory):
    d = tmp_path_factory.mktemp("rms-exchange")
    assert cli_main(["generate", str(EX / "rms_norm.py"), "--out", str(d)]) == 0
    return d


TREE_MUTANTS = {
    "a row skipped": ("d += h;", "d += h + 1;"),
    "the wrong half folded": ("xchg_[(cores - d - h) * oa]", "xchg_[(cores - d - h - 1) * oa]"),
}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("what", sorted(TREE_MUTANTS))
def test_a_wrong_tree_fails_the_check(rms_gen, what, session_build_root):
    """RmsNorm fp32 over 3 rows of 30001 (COL_SPLIT on 47 cores, one exchange of row sums of squares): unmutated it
    passes; with its tree skipping a core's partials or folding the wrong half (one of them twice, another never)
    the check fails on the outputs, with no fault."""
    h = rms_gen / "rms_norm" / "op_kernel" / "rms_norm.h"
    orig = h.read_text()
    spec, dims = str(EX / "rms_norm.py"), {"Bd": (3,), "H": 30001}
    r = run_check(spec, dims=dims, dtypes={"T": "float32"}, gen_dir=rms_gen, build_root=session_build_root,
                  progress=False)
    assert r.passed and not r.faults and r.tiling_key % 10 == 2 and r.block_dim == 47, (r.faults[:3], r.tiling_key)
    a, b = TREE_MUTANTS[what]
    assert orig.count(a) >= 1
    h.write_text(orig.replace(a, b))
    try:
        r = run_check(spec, dims=dims, dtypes={"T": "float32"}, gen_dir=rms_gen, build_root=session_build_root,
                      progress=False)
        assert not r.faults, r.faults[:3]
        assert not r.passed
    finally:
        h.write_text(orig)
