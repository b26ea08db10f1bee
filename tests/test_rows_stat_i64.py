"""Per-row outputs of 8-byte elements (an int64 index per row: ArgMax over the last axis, written from a new user's
spec): their output queue holds 8 bytes a row in every strategy, and the tiling's UB plan counts the same
(opgen.kernel.rowsched `_stat_out_bytes`, opgen.kernel.rowcounts `stat_out_words`). Before, the queue held 4 bytes a
row: an int64 output of more than four rows a pass overran it (ROW_SPLIT with many rows, COL_SPLIT with a group of
five or more rows). The emulated kernel against NumPy's argmax in float64 (first index of the maximum)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from opgen.registry import load_spec
from test_rows_rowscalar import ARG

ARG_MAX = ARG.format(name="ArgMaxV2", api="ArgMax", red="max", cmp=">=")   # the spec test_rows_rowscalar writes


@pytest.fixture(scope="module")
def arg_max(run_shared):
    """The spec file and its generated package (gen/), made once per run for both xdist workers (run_shared): the
    emulated cases below check the one package, so its kernel is built once, not once per case."""
    from opgen.codegen import write_ops

    def fill(d):
        (d / "arg_max.py").write_text(ARG_MAX)
        write_ops([str(d / "arg_max.py")], d / "gen")
    return run_shared("argmax-i64", fill) / "arg_max.py"


def test_an_int64_per_row_output_queue_holds_eight_bytes_a_row(arg_max):
    from opgen.check.kirengine import kernel_classes
    from opgen.kernel import kir
    from opgen.tiling.pipeline import kernel_build

    spec = load_spec(str(arg_max))
    u = kernel_build(spec)
    assert u.counts.stat_out == 1 and u.counts.stat_out_words == 2
    for plan in u.tiling.plans.values():
        q = [b for b in plan if b.name == "statOutQue"]
        assert q and all(b.num == 4 for b in q), plan   # two buffers of two 4-byte words a row
    text = kir.to_text(kernel_classes(spec)[0])
    inits = [ln.split("bytes=")[1] for ln in text.splitlines() if "init_buffer statOutQue_y" in ln]
    assert set(inits) == {"align_up(pass, 8) * 8", "groupStride_ * 8"}, inits   # ROW_SPLIT, a group of rows


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
# strategies (fp32): ROW_SPLIT, ROW_CHUNK (9 long rows: the lane-index row loaded per chunk beside the resident row,
# priced below COL_SPLIT's exchanges), COL_SPLIT, ROW_SPLIT
@pytest.mark.parametrize("dims, key", [({"N": 1000, "H": 33}, 1), ({"N": 9, "H": 20000}, 4),
                                       ({"N": 200, "H": 30000}, 2), ({"N": 3, "H": 1}, 1)])
@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_arg_max_emulated_equals_numpy(arg_max, dims, key, dt):
    """The eight cases share one generated package (the `arg_max` fixture; the same spec each time: one kernel
    build, where each case generated and built its own copy)."""
    from opgen.check import run_check

    rng = np.random.default_rng(dims["N"] + dims["H"])
    x = rng.integers(-50, 50, (dims["N"], dims["H"])).astype(np.float32)   # ties: the first index wins
    r = run_check(str(arg_max), inputs={"x": x}, dtypes={"T": dt}, gen_dir=arg_max.parent / "gen",
                  progress=False)
    assert r.passed and not r.faults, r.faults[:2]
    if dt == "float32":
        assert r.tiling_key % 10 == key, r.tiling_key
    y = np.asarray(r.arrays["y"])
    assert y.dtype == np.int64 and np.array_equal(y, np.argmax(x.astype(np.float64), axis=-1))
