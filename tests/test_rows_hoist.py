"""ROW_CHUNK's loop-invariant code motion of a function of a row's total (opgen.kernel.rowsched
`hoist_row_functions`): LogSoftmaxV2's log of the row sum, which the chunk loop broadcast and took the log of over
every chunk, is taken once per group over the group's totals; the chunks subtract it as a scalar."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from opgen.ir.dims import Bin, Lit, Sym
from opgen.kernel import kir
from opgen.kernel.isa import Op
from opgen.registry import load_spec

EX = Path(__file__).resolve().parent.parent / "examples" / "specs"


def _chunk_loops(stmts):
    return [s for s in kir.walk(stmts) if isinstance(s, kir.For) and s.var == "c0_"]


def test_log_of_the_row_sum_is_taken_once_per_group_not_per_chunk():
    """In RowChunk no chunk loop holds a Duplicate or an Ln of a row (the online pass's Duplicate / Exp of the
    rescale factor over one block stays); one Ln over the k totals of slot 1 (the row sums) precedes the output chunk
    loop, whose rows subtract it by Adds of its negation."""
    from opgen.check.kirengine import kernel_classes

    (k,) = kernel_classes(load_spec(str(EX / "log_softmax.py")))
    f = k.method("RowChunk")
    (group,) = [s for s in f.body if isinstance(s, kir.For) and s.var == "g0"]
    loops = _chunk_loops(group.body)
    assert len(loops) == 2
    for loop in loops:
        ops = [s for s in kir.walk(loop.body) if isinstance(s, kir.Vec)]
        assert not any(s.op is Op.LN for s in ops)
        assert all(s.arg("dst").tensor == "red_" for s in ops if s.op is Op.DUPLICATE)
    top = list(group.body)
    (ln,) = [s for s in top if isinstance(s, kir.Vec) and s.op is Op.LN]
    slot = kir.Ref("tots_", Bin("*", Lit(1), Sym("groupStride_")))
    assert ln.arg("dst") == slot == ln.arg("src0") and ln.arg("count") == Sym("k")
    assert top.index(ln) < top.index(loops[1])
    (rows,) = [s for s in loops[1].body if isinstance(s, kir.For) and s.var == "i"]
    reads = [s for s in rows.body if isinstance(s, kir.GetValue) and s.src.tensor == "tots_"]
    adds = [s for s in rows.body if isinstance(s, kir.Vec) and s.op is Op.ADDS]
    assert len(reads) == 2 and len(adds) == 2
    assert adds[1].arg("scalar") == kir.FNeg(kir.FRef(reads[1].name))


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("engine", ["emu", "kir"])
def test_log_softmax_row_chunk_against_float64(engine, examples_gen):
    """LogSoftmaxV2 fp16 over 60 rows of 40000 (ROW_CHUNK: each row in chunks, an online maximum and sum, the log
    of the sum once per group): equal to float64 x - max - log(sum(exp(x - max))) within fp16's rounding of the
    result and fp32's of the sum."""
    from opgen.check import run_check

    h, n = 40000, 60
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((n, h)) * 4.0).astype(np.float16)
    x[0] = np.linspace(-30.0, 60.0, h).astype(np.float16)   # a maximum growing chunk after chunk
    r = run_check(str(EX / "log_softmax.py"), inputs={"x": x}, dtypes={"T": "float16"}, gen_dir=examples_gen,
                  progress=False, engine=engine)
    assert not r.faults and r.passed and r.tiling_key % 10 == 4, (r.faults[:3], r.tiling_key)
    _assert_log_softmax(x, r.arrays["y"])



def _assert_log_softmax(x, y) -> None:
    """y equals float64 x - max - log(sum(exp(x - max))) per row within fp16's rounding of the result (2^-10
    relative) and fp32's of the sum (2^-12 absolute)."""
    x64 = x.astype(np.float64)
    m = x64.max(-1, keepdims=True)
    want = x64 - m - np.log(np.exp(x64 - m).sum(-1, keepdims=True))
    got = np.asarray(y, np.float64)
    assert np.all(np.abs(got - want) <= 2.0**-10 * np.abs(want) + 2.0**-12), float(np.abs(got - want).max())

def _forced_row_chunk(tmp_path: Path, name: str, group: int, cols: int) -> Path:
    """Spec `name`'s package with ROW_CHUNK forced, `group` rows a group in chunks of `cols` columns (groups of
    several rows: the hoisted instruction then runs over k > 1 totals; tests/test_rows_resident `_forced_groups`)."""
    from test_rows_resident import _forced_groups

    return _forced_groups(tmp_path, name, group, cols, always=True)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.slow
def test_hoisted_functions_over_groups_of_two_rows(tmp_path):
    """ROW_CHUNK forced with two rows a group and chunks of 1024 columns (the Ln runs over k = 2 totals, and over 1 in
    a tail group): LogSoftmaxV2 fp16 over 100 rows of 14000 (48 cores: 4 take 3 rows) against float64; and
    CrossEntropyLoss bf16 over 100 rows of 6000, whose log of the row sum feeds two phases (a later row reduction
    and the output), passing the emulation's check against the interpreter with no UB or race fault."""
    from opgen.check import run_check

    ls = _forced_row_chunk(tmp_path / "ls", "log_softmax", 2, 1024)
    x = (np.random.default_rng(9).standard_normal((100, 14000)) * 6.0).astype(np.float16)
    x[7] = np.linspace(-40.0, 90.0, 14000).astype(np.float16)
    r = run_check(str(EX / "log_softmax.py"), inputs={"x": x}, dtypes={"T": "float16"}, gen_dir=ls, progress=False)
    assert not r.faults and r.passed and r.tiling_key % 10 == 4, (r.faults[:3], r.tiling_key)
    _assert_log_softmax(x, r.arrays["y"])

    ce = _forced_row_chunk(tmp_path / "ce", "cross_entropy_loss", 2, 1024)
    r = run_check(str(EX / "cross_entropy_loss.py"), dims={"N": 100, "C": 6000}, attrs={"reduction": "none"},
                  dtypes={"T": "bfloat16"}, gen_dir=ce, seed=2, progress=False)
    assert not r.faults and r.passed and r.tiling_key % 10 == 4, (r.faults[:3], r.tiling_key)
