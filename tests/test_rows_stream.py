"""COL_STREAM, the rows family's schedule for rows whose core slice does not fit UB (opgen.tiling.rowkernel,
opgen.kernel.rowsched._col_stream): which strategy the tiling picks by row length, the chunk it sizes (whole
32-byte blocks, a tail, inside UB on every SoC and dtype row of the spec), that only a spec whose rows can outgrow
UB gets the schedule, and that renaming the operator, its dims and tensors changes nothing of it.

UB bytes are recomputed here from the buffer list the kernel allocates (docs/design.md, rows family: resident
slices of the row inputs and outputs, the fp32 work rows, the staging queues, the reduction scratch), not read
from the tiling program's own sums. The emulated kernels against float64 NumPy are in tests/test_examples.py.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from opgen.ir.dtypes import DType
from opgen.platforms import PLATFORMS
from opgen.registry import _load_file
from opgen.tiling.emit import program_inputs

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "specs"
SOFTMAX = (EX / "softmax.py").read_text()
BYTES = {DType.f32: 4, DType.f16: 2, DType.bf16: 2}


def _build(tmp_path, text: str, name: str = "sm.py"):
    from opgen.tiling.pipeline import kernel_build

    p = tmp_path / name
    p.write_text(text)
    spec = _load_file(p)
    return spec, kernel_build(spec)


def _tiling(spec, unit, rows: int, h: int, dtype: DType, plat, hname: str = "H", bname: str = "Bd") -> dict:
    t = unit.tiling
    env = {bname: (rows,), hname: h}
    return t.program.evaluate(program_inputs(spec, t.program, t.inputs, env, {"T": dtype}, plat, {}))


def _softmax_ub(tl: dict, tbytes: int) -> int:
    """UB bytes of SoftmaxV2's COL_SPLIT / COL_STREAM buffers for the tiling `tl` (its chunk colsPerPass and group
    groupRows), counted from the kernel's allocations: one resident input and one output slice of T per group
    row (two of each in COL_STREAM, whose chunks are double-buffered), the partial and total row reductions (1 + 2
    slots of align8(groupRows) floats), the exchange tile (blockDim rows of align8(groupRows) floats where every core
    totals every row, xchgAll, else of align8(ceil(groupRows / blockDim))), one fp32 work row, ReduceMax's scratch
    (one (value, index) pair per 64 floats, aligned to 8, plus the 8-float result block); no LoadRow / StoreRow
    staging (SoftmaxV2 loads no column rows and its exchange copies straight into the tile)."""
    c, g, n = tl["colsPerPass"], tl["groupRows"], tl["blockDim"]
    g8 = -(-g // 8) * 8
    bufs = 2 if tl["strategy"] == 3 else 1
    tile = n * (-(-(g if tl["xchgAll"] else -(-g // n)) // 8) * 8) * 4
    red = (-(-(-(-c // 64) * 2) // 8) * 8 + 8) * 4
    return g * c * tbytes * 2 * bufs + 3 * g8 * 4 + tile + c * 4 + red


@pytest.fixture(scope="module")
def softmax(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("stream"), SOFTMAX)


def test_strategy_follows_the_row_length(softmax):
    """A short row runs ROW_SPLIT, a row that fits once split over the cores COL_SPLIT (the whole slice resident),
    a row whose core slice does not fit COL_STREAM (key digit 3), with a chunk shorter than the slice."""
    spec, unit = softmax
    b1 = PLATFORMS["ascend910b1"]
    assert _tiling(spec, unit, 8, 1000, DType.f32, b1)["strategy"] == 1
    assert _tiling(spec, unit, 2, 65536, DType.f16, b1)["strategy"] == 2
    # 40000 columns: COL_SPLIT's exchange (two SyncAll, one strided copy of the 48 cores' partials and a tree of 6
    # instructions per level) costs a little less than ROW_CHUNK on 2 cores (the emulation's estimate: 6.04 us
    # against 6.18 us; before the tree, with a cast and combine per core, COL_SPLIT took 7.4 us and ROW_CHUNK won)
    assert _tiling(spec, unit, 2, 40000, DType.f16, b1)["strategy"] == 2
    tl = _tiling(spec, unit, 8, 786432, DType.f32, b1)
    assert tl["strategy"] == 3 and tl["tilingKey"] % 10 == 3 and tl["fits"] == 1
    assert tl["colsPerPass"] < tl["colsPerCore"]
    # the resident slice of this shape would need more than UB (the reason it streams)
    whole = dict(tl, colsPerPass=tl["colsPerCore"], groupRows=1, strategy=2)
    assert _softmax_ub(whole, 4) > b1.ub_bytes


@pytest.mark.parametrize("plat", sorted(p for p in PLATFORMS if PLATFORMS[p].soc_key in ("ascend910b", "ascend910_93")))
def test_the_stream_plan_fits_on_every_soc_and_dtype(softmax, plat):
    """For every SoC of the spec and every dtype row, rows up to the bound (2^20) are planned within UB: the chunk
    is whole 32-byte blocks of T (and of fp32), the last chunk a tail, the buffers inside UB."""
    spec, unit = softmax
    p = PLATFORMS[plat]
    for dt, tb in BYTES.items():
        for h in (300001, 393217, 524288, 777777, 1048576):
            tl = _tiling(spec, unit, 3, h, dt, p)
            assert tl["fits"] == 1, (plat, dt, h)
            if tl["strategy"] != 3:
                continue
            c = tl["colsPerPass"]
            assert c % 16 == 0 and (c * tb) % 32 == 0, c
            assert _softmax_ub(tl, tb) <= p.ub_bytes, (plat, dt, h, tl["colsPerPass"], tl["groupRows"])
            last = h - (tl["blockDim"] - 1) * tl["colsPerCore"]
            assert last == tl["colsTail"] and 0 < last <= tl["colsPerCore"]
            assert math.ceil(tl["colsPerCore"] / c) >= 2   # several chunks per slice


def test_stream_only_where_rows_outgrow_ub(tmp_path, softmax):
    """At the old bound (262144: every slice fits on every SoC) the kernel has no COL_STREAM and its tiling no
    strategy 3; at 2^20 both are there and the UB proof holds (it ran in the build)."""
    spec, unit = softmax
    assert any(v.stream for v in unit.lowered.extra["variants"]) and unit.proven
    from opgen.codegen.kernel import render_kernel

    files = render_kernel(spec, unit.lowered.extra["variants"], unit.tiling.doc, "sm.py")
    h = next(t for n, t in files.items() if n.endswith(".h") and "tiling" not in n)
    assert "void ColStream()" in h and "ColStream();" in h
    small, su = _build(tmp_path, SOFTMAX.replace("max=1048576", "max=262144"), "small.py")
    assert not any(v.stream for v in su.lowered.extra["variants"])
    tl = _tiling(small, su, 2, 262144, DType.f32, PLATFORMS["ascend910b3"])
    assert tl["strategy"] == 2 and "streamColsFit" not in tl and "COL_STREAM" not in su.tiling.doc
    files = render_kernel(small, su.lowered.extra["variants"], su.tiling.doc, "small.py")
    assert not any("ColStream" in t for t in files.values())


def test_a_program_with_sums_over_rows_is_not_streamed():
    """A reduction over rows kept across column chunks (a column sum) cannot be streamed: `streamable` says no and
    `program` refuses the stream flag."""
    from opgen.tiling.rowkernel import RowCounts, program, streamable

    base = dict(row_in=(("f32", 1),), row_out=(("f32", 1),), stat_in=0, stat_out=0, temps=2, brow=0, col=1,
                brow_acc=0, col_acc=0, rsums=2, rsums_per_level=1, levels=2)
    assert streamable(RowCounts(**base))
    for k in ("col_acc", "brow_acc", "total_acc", "acc_reads"):
        assert not streamable(RowCounts(**{**base, k: 1}))
    assert not streamable(RowCounts(**{**base, "levels": 0, "rsums": 0, "rsums_per_level": 0}))
    with pytest.raises(ValueError, match="COL_STREAM"):
        program("X", RowCounts(**{**base, "col_acc": 1}), ("T",), stream=True)


def test_renaming_changes_nothing(tmp_path, softmax):
    """The operator, its row dim, batch group and tensors renamed: the same strategies, chunks and groups."""
    spec, unit = softmax
    text = (SOFTMAX.replace('"SoftmaxV2"', '"MyRowSoft"').replace('aclnn="aclnnSoftmax"', 'aclnn="aclnnMyRowSoft"')
            .replace('"H"', '"Cols"').replace('"Bd"', '"Lead"').replace('"x"', '"inp"').replace('"y"', '"outp"')
            .replace("x, dim", "inp, dim").replace("b.exp(x - x.max(-1))", "b.exp(inp - inp.max(-1))")
            .replace('{"y":', '{"outp":'))
    rspec, runit = _build(tmp_path, text, "renamed.py")
    assert rspec.name == "MyRowSoft"
    for plat in ("ascend910b1", "ascend910b3"):
        for dt in BYTES:
            for rows, h in ((8, 1000), (2, 40000), (8, 393216), (3, 1048576)):
                a = _tiling(spec, unit, rows, h, dt, PLATFORMS[plat])
                b = _tiling(rspec, runit, rows, h, dt, PLATFORMS[plat], "Cols", "Lead")
                assert {k: a[k] for k in ("strategy", "colsPerPass", "groupRows", "blockDim", "workspaceBytes")} == \
                    {k: b[k] for k in ("strategy", "colsPerPass", "groupRows", "blockDim", "workspaceBytes")}


def test_online_max_and_sum_is_found_by_the_program_shape():
    """The online maximum and sum (one pass for the maximum and the sum of exponentials) is taken for softmax-like
    chains — SoftmaxV2, LogSoftmaxV2, and CrossEntropyLoss's row — and not for reductions of another shape."""
    from opgen.kernel.rowprog import online_pair
    from opgen.tiling.pipeline import kernel_build
    from opgen.registry import load_spec

    def pairs(name):
        u = kernel_build(load_spec(str(EX / f"{name}.py")))
        return [online_pair(v.prog) for v in u.lowered.extra["variants"]]

    for name in ("softmax", "log_softmax"):
        (m, s), = pairs(name)
        assert (m.kind, s.kind, s.level) == ("rmax", "rsum", m.level + 1)
    assert any(pairs("cross_entropy_loss"))
    for name in ("rms_norm", "layer_norm_v4", "group_norm"):
        assert not any(pairs(name)), name


@pytest.mark.slow
# a half-precision row of at most 2^20 elements fits a core's UB slice since the exchange stages nothing (COL_SPLIT):
# only fp32 rows stream
@pytest.mark.parametrize("dtype,h", [("float32", 786433)])
def test_streamed_softmax_with_a_growing_maximum(examples_gen, dtype, h):
    """Rows whose maximum grows chunk after chunk and core after core (x ascending up to 200: exp(200) overflows
    fp32, so a sum not rescaled to the running maximum would be inf) and a row descending from 150: the streamed
    kernel (COL_STREAM, online maximum and sum: x read twice) equals float64 softmax within a few units of the
    dtype's rounding, and every row sums to 1."""
    import ml_dtypes
    import numpy as np

    from opgen.check import run_check

    x = np.stack([np.linspace(-50.0, 200.0, h), np.linspace(150.0, -100.0, h),
                  np.random.default_rng(7).standard_normal(h) * 30.0])
    if dtype == "bfloat16":
        x = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    else:
        x = x.astype(np.float32)
    r = run_check(str(EX / "softmax.py"), inputs={"x": x}, dtypes={"T": dtype}, gen_dir=examples_gen, progress=False)
    assert not r.faults and r.passed and r.tiling_key % 10 == 3
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    got = np.asarray(r.arrays["y"], dtype=np.float64)
    unit = 2.0**-24 if dtype == "float32" else 2.0**-8
    assert np.all(np.abs(got - want) <= 8 * unit * want + 1e-30 + 2.0**-24 * 64 * want)
    assert np.allclose(got.sum(-1), 1.0, rtol=0, atol=1e-3 if dtype == "float32" else 2e-2)
    assert r.gm_ratio < 1.51   # x read twice, y written once


@pytest.mark.slow
def test_streamed_softmax_with_masked_stretches(examples_gen):
    """A causal / padding mask on a long row: -inf over the first half of one row and the second half of another
    (whole chunks and whole cores' slices of -inf). The online maximum must not compute -inf - -inf: the streamed
    kernel equals float64 softmax there (review: these rows came out NaN), and a row that is -inf throughout is NaN
    as in exp(x - max x)."""
    import numpy as np

    from opgen.check import run_check

    h = 786433
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((3, h)) * 4.0).astype(np.float32)
    x[0, : h // 2] = -np.inf
    x[1, h // 2:] = -np.inf
    x[2, :] = -np.inf
    r = run_check(str(EX / "softmax.py"), inputs={"x": x}, dtypes={"T": "float32"}, gen_dir=examples_gen, progress=False)
    assert not r.faults and r.passed and r.tiling_key % 10 == 3
    x64 = x[:2].astype(np.float64)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    got = np.asarray(r.arrays["y"], dtype=np.float64)
    assert np.all(np.isfinite(got[:2])) and np.all(got[0, : h // 2] == 0) and np.all(got[1, h // 2:] == 0)
    assert np.all(np.abs(got[:2] - want) <= 2.0**-16 * want + 1e-30)   # fp32 sums of 200000 terms
    assert np.all(np.isnan(got[2]))


def test_the_planned_reads_of_the_row_inputs_follow_the_schedule():
    """opgen.kernel.rowprog.row_input_reads, what `opgen check` states on its "GM plan" line: COL_STREAM reads a
    row input once per row-reduction level plus the output pass (SoftmaxV2: the maximum and the sum of exponentials
    share one online pass, 2; LayerNormV4: the mean, then the variance of x - mean, then the outputs, 3), ROW_SPLIT
    twice when per-row arithmetic reads a reduction over rows (BatchNorm's batch mean), once otherwise, COL_SPLIT
    once (resident slices). Values by hand from the schedules (opgen.kernel.rowsched)."""
    from opgen.kernel.rowprog import row_input_reads
    from opgen.tiling.pipeline import kernel_build
    from opgen.registry import load_spec

    def prog(name):
        return kernel_build(load_spec(str(EX / f"{name}.py"))).lowered.extra["variants"][0].prog

    assert row_input_reads(prog("softmax"), 3)[0] == 2 and "online softmax" in row_input_reads(prog("softmax"), 3)[1]
    assert row_input_reads(prog("layer_norm_v4"), 3)[0] == 3
    assert [row_input_reads(prog("softmax"), s)[0] for s in (1, 2)] == [1, 1]
    assert row_input_reads(prog("batch_norm"), 1)[0] == 2 and row_input_reads(prog("batch_norm"), 2)[0] == 1
    assert row_input_reads(prog("rms_norm"), 1) == (1, "")
