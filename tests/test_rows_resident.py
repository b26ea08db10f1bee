"""ROW_CHUNK with the rows resident: the rows family's schedule for many long rows of a row-reduction program
(opgen.kernel.rowcounts.row_resident; opgen.tiling.rowkernel `_resident_or_slice`; RowChunk in opgen.kernel.rowsched).
Each core takes its rows as ROW_SPLIT does, holds a group's row inputs whole in UB as stored in GM, and runs every
row-reduction level, then the outputs, over the row's column chunks: no cross-core exchange, every input read once.

Checked here by its consequences: which strategy the tiling picks (by rows and row length, from the cost model of
docs/reference/kernel_cost.md §2), that the buffers the kernel allocates fit UB on every SoC of the spec (recounted
from the allocations, not read from the tiling program's sums), the GM traffic, that the Kernel-IR interpreter and
the emulated kernel agree with float64 NumPy written from the operators' formulas (RmsNorm; SoftmaxV2 with rows
whose maximum grows chunk after chunk and masked stretches), and that renaming changes nothing. More operators run
ROW_CHUNK against their float64 oracles in tests/test_examples.py (cases with strategy 4)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

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


def _unit(path: Path):
    from opgen.tiling.pipeline import kernel_build

    spec = _load_file(path)
    return spec, kernel_build(spec)


def _tiling(path: Path, rows: int, h: int, dtype: DType, plat=B1, names=("Bd", "H", "T")) -> dict:
    spec, unit = _unit(path)
    t = unit.tiling
    return t.program.evaluate(program_inputs(spec, t.program, t.inputs, {names[0]: (rows,), names[1]: h},
                                             {names[2]: dtype}, plat, {}))


def test_the_strategy_follows_rows_and_row_length():
    """RmsNorm bf16: rows of 4096 fit UB (ROW_SPLIT); 4096 rows of 16384 do not, and ROW_CHUNK (4) spreads them over
    every core, in chunks shorter than the row, with no workspace; rows of 65536 (a resident row would need more
    than UB twice over) take COL_SPLIT. AddRmsNorm at 8192 and SoftmaxV2 fp16 at 32000 (the bench's shapes) take
    ROW_CHUNK; SoftmaxV2 fp32 over 8 rows of 786432 still streams (3)."""
    rms, add, sm = EX / "rms_norm.py", EX / "add_rms_norm.py", EX / "softmax.py"
    assert _tiling(rms, 4096, 4096, DType.bf16)["strategy"] == 1
    big = _tiling(rms, 4096, 16384, DType.bf16)
    assert big["strategy"] == 4 and big["tilingKey"] % 10 == 4 and big["blockDim"] == B1.aiv and big["fits"] == 1
    assert big["colsPerPass"] % 16 == 0 and big["colsPerPass"] < 16384 and big["groupRows"] >= 1
    assert big["workspaceBytes"] == 0
    assert _tiling(rms, 4096, 65536, DType.bf16)["strategy"] == 2
    assert _tiling(add, 4096, 8192, DType.bf16)["strategy"] == 4
    assert _tiling(sm, 8192, 32000, DType.f16)["strategy"] == 4
    assert _tiling(sm, 8, 786432, DType.f32)["strategy"] == 3
    # a few rows on a few cores against the row over every core: the choice turns once as rows grow
    seq = [_tiling(sm, r, 40000, DType.f16)["strategy"] for r in (1, 2, 3, 8, 48, 400, 8192)]
    assert seq == sorted(seq, key=lambda s: s == 4) and seq[-1] == 4, seq


def _rms_norm_ub(tl: dict, tbytes: int) -> int:
    """UB bytes RmsNorm's RowChunk allocates for tiling `tl` (opgen.kernel.rowsched._row_chunk, counted by hand from
    its InitBuffer calls): x whole (two buffers of groupRows rows of colAlign), y chunks (two buffers), the rstd
    staging (fp32) and its output queue (two), the partial and total sums (2 slots of align8(groupRows) floats), two
    fp32 work rows of a chunk, gamma whole in fp32, the staging row of a chunk (T), ReduceSum's scratch (one pair per
    64 floats, aligned to 8, plus the 8-float result block)."""
    c, g, a = tl["colsPerPass"], tl["groupRows"], tl["colAlign"]
    g8 = -(-g // 8) * 8
    red = (-(-(-(-c // 64) * 2) // 8) * 8 + 8) * 4
    return 2 * g * a * tbytes + 2 * g * c * tbytes + g8 * 4 + 2 * g8 * 4 + 2 * g8 * 4 + 2 * c * 4 + a * 4 \
        + c * tbytes + red


@pytest.mark.parametrize("plat", sorted(p for p in PLATFORMS if PLATFORMS[p].soc_key in ("ascend910b", "ascend910_93")))
@pytest.mark.parametrize("rows, h", [(4096, 16384), (50, 20001), (4096, 12289), (97, 30000)])
def test_the_resident_plan_fits_on_every_soc(plat, rows, h):
    """Where the tiling picks ROW_CHUNK for RmsNorm, the kernel's allocations fit the platform's UB, and the chunk
    is the widest multiple of 16 that does (16 columns more would not fit with one row)."""
    p = PLATFORMS[plat]
    for dtype, nbytes in ((DType.bf16, 2), (DType.f32, 4)):
        tl = _tiling(EX / "rms_norm.py", rows, h, dtype, p)
        if tl["strategy"] != 4:
            continue
        assert _rms_norm_ub(tl, nbytes) <= p.ub_bytes, (plat, rows, h, dtype)
        if tl["colsPerPass"] < tl["colAlign"]:
            wider = dict(tl, colsPerPass=tl["colsPerPass"] + 16, groupRows=1)
            assert _rms_norm_ub(wider, nbytes) > p.ub_bytes - 1024 - 64, (plat, rows, h, dtype)


def test_sums_over_rows_and_batch_rows_are_not_served():
    """A program that sums over rows (LayerNormGradV3's dgamma, dbeta) or reads batch rows (AdaLayerNormV2's scale
    and shift, reloaded per group) has no resident ROW_CHUNK: its generated kernel has no RowChunk method."""
    from opgen.codegen import generate_cached
    from opgen.kernel.rowcounts import row_resident

    for path in (EX / "layer_norm_grad.py", ROOT / "specs" / "ada_layer_norm_v2.py"):
        spec, unit = _unit(path)
        assert not row_resident(unit.counts), path
        assert not any("RowChunk" in text for text in generate_cached(path)[1].values()), path
    for name in ("rms_norm", "add_rms_norm", "softmax", "group_norm", "cross_entropy_loss"):
        assert row_resident(_unit(EX / f"{name}.py")[1].counts), name


def _rms_norm64(x, gamma, eps):
    x = np.asarray(x, np.float64)
    rstd = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    return x * rstd * np.asarray(gamma, np.float64), rstd


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("engine", ["emu", "kir"])
@pytest.mark.parametrize("rows, h, dtype", [
    ((50,), 20001, "bfloat16"),      # 50 rows on 48 cores: two cores take a second row; a chunk tail
    ((2, 3), 12000, "float32"),      # fp32 rows: 6 cores, chunks of a 48 KB row
    ((7, 9), 13001, "float32"),      # 63 rows: 15 cores take a second row
])
def test_rms_norm_row_chunk_against_float64(engine, rows, h, dtype, examples_gen):
    """RmsNorm through ROW_CHUNK against float64 (y = x * rsqrt(mean(x^2) + eps) * gamma; rstd), both engines; the
    emulation counts every input read once but gamma, which each core reads once."""
    r = run_check(str(EX / "rms_norm.py"), dims={"Bd": rows, "H": h}, dtypes={"T": dtype}, gen_dir=examples_gen,
                  seed=h + len(rows), progress=False, engine=engine)
    assert not r.faults and r.passed, r.faults[:3]
    assert r.tiling_key % 10 == 4, r.tiling_key
    y, rstd = _rms_norm64(r.inputs["x"], r.inputs["gamma"], 1e-6)
    tol = {"float32": 2.0**-21, "bfloat16": 2.0**-7}[dtype]
    got = np.asarray(r.arrays["y"], np.float64)
    assert np.all(np.abs(got - y) <= 4 * tol * np.abs(y) + 1e-6 * np.abs(y).max()), float(np.abs(got - y).max())
    got_r = np.asarray(r.arrays["rstd"], np.float64)
    assert np.allclose(got_r, rstd.reshape(got_r.shape), rtol=2.0**-20, atol=0)
    if engine == "emu":
        cores = min(int(np.prod(rows)), B1.aiv)
        extra = (cores - 1) * h * {"float32": 4, "bfloat16": 2}[dtype]   # gamma once per core, not once in all
        assert r.gm_bytes == r.gm_bytes_min + extra, (r.gm_bytes, r.gm_bytes_min, extra)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("engine", ["emu", "kir"])
def test_softmax_row_chunk_with_a_growing_maximum(engine, examples_gen):
    """SoftmaxV2 fp16 over 60 rows of 40000 (ROW_CHUNK, an online maximum and sum over the row's chunks): rows whose
    maximum grows chunk after chunk (up to 200: exp(200) overflows fp32, so a sum not rescaled to the running
    maximum would be inf), a descending row, -inf over the first half of a row (a chunk of -inf first) and over the
    second half of another, random rows. Equal to float64 softmax within a few fp16 roundings, rows summing to 1."""
    h, n = 40000, 60
    rng = np.random.default_rng(11)
    x = rng.standard_normal((n, h)) * 8.0
    x[0] = np.linspace(-50.0, 200.0, h)
    x[1] = np.linspace(150.0, -100.0, h)
    x[2, : h // 2] = -np.inf
    x[3, h // 2:] = -np.inf
    x = x.astype(np.float16)
    r = run_check(str(EX / "softmax.py"), inputs={"x": x}, dtypes={"T": "float16"}, gen_dir=examples_gen,
                  progress=False, engine=engine)
    assert not r.faults and r.passed and r.tiling_key % 10 == 4, (r.faults[:3], r.tiling_key)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    got = np.asarray(r.arrays["y"], np.float64)
    assert np.all(np.isfinite(got))
    assert np.all(np.abs(got - want) <= 4 * 2.0**-11 * want + 2.0**-24), float(np.abs(got - want).max())
    assert np.all(got[2, : h // 2] == 0) and np.all(got[3, h // 2:] == 0)
    assert np.allclose(got.sum(-1), 1.0, rtol=0, atol=2e-2)
    if engine == "emu":
        assert r.gm_bytes == r.gm_bytes_min, (r.gm_bytes, r.gm_bytes_min)   # x read once, y written once


def test_renaming_changes_nothing(tmp_path):
    """RmsNorm with the operator, its dims, tensors and dtype variable renamed: the same strategies, chunks, groups,
    cores and cost estimates at every shape."""
    text = (EX / "rms_norm.py").read_text()
    for old, new in (("RmsNorm", "NormQq"), ("aclnnRmsNorm", "aclnnNormQq"), ("Bd", "Lqq"), ("H", "Kqq"),
                     ("x", "inqq"), ("gamma", "wqq"), ("y", "outqq"), ("rstd", "rqq"), ("T", "Xqq")):
        text = re.sub(rf"(?<![\w]){old}(?![\w])", new, text)
    p = tmp_path / "norm_qq.py"
    p.write_text(text)
    spec, unit = _unit(p)
    assert spec.name == "NormQq"
    keys = ("strategy", "colsPerPass", "groupRows", "blockDim", "rowChunkRunCycles", "sliceRunCycles", "useResident",
            "fits")
    for rows, h in ((5, 16384), (50, 20001), (4096, 16384), (4096, 65536), (4096, 1000)):
        for dt in (DType.f32, DType.f16, DType.bf16):
            a = _tiling(EX / "rms_norm.py", rows, h, dt)
            b = _tiling(p, rows, h, dt, names=("Lqq", "Kqq", "Xqq"))
            assert {k: a.get(k) for k in keys} == {k: b.get(k) for k in keys}, (rows, h, dt)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_rows_that_touch_are_copied_in_one_burst(examples_gen):
    """RmsNorm bf16 over 150 rows (ROW_SPLIT, 48 cores, a few rows a pass): rows of 256 touch in GM and in UB (a
    whole number of 32-byte blocks), so each pass's x and y go in one burst each; rows of 250 are 500 bytes, 12
    short of their UB stride, so every row is a burst of its own. The bytes moved are the same (GM at its minimum plus gamma per core either way) and both pass."""
    runs = {}
    for h in (256, 250):
        r = run_check(str(EX / "rms_norm.py"), dims={"Bd": (150,), "H": h}, dtypes={"T": "bfloat16"},
                      gen_dir=examples_gen, seed=h, progress=False)
        assert not r.faults and r.passed and r.tiling_key % 10 == 1, (r.faults[:3], r.tiling_key)
        runs[h] = r
    merged, split = runs[256].cost["bursts"], runs[250].cost["bursts"]
    cores = B1.aiv
    for h in runs:   # each core takes its 3 or 4 rows in one pass
        assert _tiling(EX / "rms_norm.py", 150, h, DType.bf16)["rowsPerPass"] >= 4
    # x and y: a burst a row (150 each) against a burst a pass (48 each); gamma and rstd the same in both
    assert split - merged == 2 * (150 - cores), (merged, split)
    for h, r in runs.items():   # x and y once, gamma once per core, rstd once per pass at most
        assert r.gm_bytes <= r.gm_bytes_min + (cores - 1) * h * 2 + 32 * 150, (h, r.gm_bytes, r.gm_bytes_min)


def _row_chunk_text(path: Path) -> str:
    """The C++ of the RowChunk method of the generated kernel of spec `path` (to its closing brace at 4 spaces)."""
    from opgen.codegen import generate_cached

    text = next(t for t in generate_cached(path)[1].values() if "void RowChunk()" in t)
    body = text[text.index("void RowChunk()"):]
    return body[:body.index("\n    }\n")]


@pytest.mark.parametrize("name, inputs", [("add_rms_norm", ("x1", "x2")), ("softmax", ("x",))])
def test_the_next_groups_rows_are_copied_before_this_group_computes(name, inputs):
    """ROW_CHUNK prefetches: in the group loop, right after this group's row inputs are dequeued (MTE2 -> V), the
    next group's whole rows are allocated in the second resQue_ buffer, copied (DataCopyPad) and enqueued before the
    first row-reduction pass, so MTE2 reads group g + 1 while V computes group g. The first group's copy precedes the
    loop; the buffer enqueued past the last group is dequeued and freed after it."""
    text = _row_chunk_text(EX / f"{name}.py")
    head, loop = text.split("for (int64_t g0 = rBegin; g0 < rEnd; g0 += G) {", 1)
    first_pass = loop.index("// row-reduction")
    for x in inputs:
        assert f"resQue_{x}.template AllocTensor" in head and f"resQue_{x}.EnQue(t)" in head, x
        deq, alloc = loop.index(f"res_{x} = resQue_{x}.template DeQue"), loop.index(f"resQue_{x}.template AllocTensor")
        copy = loop.index(f"gm_{x}[resG0", alloc)
        assert deq < alloc < copy < loop.index(f"resQue_{x}.EnQue(t)") < first_pass, x
        tail = loop[loop.rindex(f"resQue_{x}.FreeTensor(res_{x})"):]
        assert f"resQue_{x}.template DeQue" in tail and f"resQue_{x}.FreeTensor(t)" in tail, x


def _forced_groups(tmp_path: Path, name: str, group: int, cols: int, always: bool = False) -> Path:
    """Spec `name`'s package generated into tmp_path with its tiling function patched so that ROW_CHUNK (strategy 4)
    runs `group` rows a group in chunks of `cols` columns (the tiling sizes the chunk for one resident row, so it
    never picks more than one row a group at the lengths where ROW_CHUNK wins); `always`: ROW_CHUNK whatever the
    tiling would choose."""
    return forced_package(tmp_path, EX / f"{name}.py", lets={"strategy": "4"} if always else None,
                          fields={"groupRows": f"strategy == 4 ? {group} : groupRows",
                                  "colsPerPass": f"strategy == 4 ? {cols} : colsPerPass"})


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.slow
def test_groups_of_several_resident_rows_against_float64(tmp_path):
    """ROW_CHUNK with two rows a group (the k > 1 path: the group's rows copied in one burst of blockCount k when they
    touch, several rows' chunks per pass, k per-row statistics written at once), forced through the tiling function:
    RmsNorm bf16 over 100 rows of 12000 (48 cores: 4 take 3 rows, so a group of 2 and a tail group of 1) and SoftmaxV2
    fp16 over 100 rows of 14000, in chunks of 1024 columns, against float64 written from the formulas; GM traffic
    as with one row a group (x read once, the outputs written once)."""
    rms = _forced_groups(tmp_path / "rms", "rms_norm", 2, 1024)
    r = run_check(str(EX / "rms_norm.py"), dims={"Bd": (100,), "H": 12000}, dtypes={"T": "bfloat16"}, gen_dir=rms,
                  seed=3, progress=False)
    assert not r.faults and r.passed and r.tiling_key % 10 == 4, (r.faults[:3], r.tiling_key)
    y, rstd = _rms_norm64(r.inputs["x"], r.inputs["gamma"], 1e-6)
    got = np.asarray(r.arrays["y"], np.float64)
    assert np.all(np.abs(got - y) <= 4 * 2.0**-7 * np.abs(y) + 1e-6 * np.abs(y).max()), float(np.abs(got - y).max())
    got_r = np.asarray(r.arrays["rstd"], np.float64)
    assert np.allclose(got_r, rstd.reshape(got_r.shape), rtol=2.0**-20, atol=0)
    assert r.gm_bytes == r.gm_bytes_min + (B1.aiv - 1) * 12000 * 2, (r.gm_bytes, r.gm_bytes_min)
    one = run_check(str(EX / "rms_norm.py"), dims={"Bd": (100,), "H": 12000}, dtypes={"T": "bfloat16"},
                    gen_dir=_forced_groups(tmp_path / "rms1", "rms_norm", 1, 1024), seed=3, progress=False)
    assert one.passed and not one.faults
    # per group one x burst and one rstd copy: 44 cores go from 2 groups to 1, 4 cores from 3 to 2
    assert one.cost["bursts"] - r.cost["bursts"] == 2 * 44 + 2 * 4, (one.cost["bursts"], r.cost["bursts"])

    sm = _forced_groups(tmp_path / "sm", "softmax", 2, 1024)
    x = (np.random.default_rng(5).standard_normal((100, 14000)) * 6.0).astype(np.float16)
    x[7] = np.linspace(-40.0, 90.0, 14000).astype(np.float16)   # a maximum growing chunk after chunk
    r = run_check(str(EX / "softmax.py"), inputs={"x": x}, dtypes={"T": "float16"}, gen_dir=sm, progress=False)
    assert not r.faults and r.passed and r.tiling_key % 10 == 4, (r.faults[:3], r.tiling_key)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    got = np.asarray(r.arrays["y"], np.float64)
    assert np.all(np.abs(got - want) <= 4 * 2.0**-11 * want + 2.0**-24), float(np.abs(got - want).max())
    assert r.gm_bytes == r.gm_bytes_min, (r.gm_bytes, r.gm_bytes_min)


@pytest.mark.parametrize("name", ["add_rms_norm", "softmax", "rms_norm", "group_norm"])
def test_partials_combine_in_the_totals_slots(name):
    """ROW_CHUNK exchanges nothing, so a level's partials are combined in their totals' slots (tots_, the sums_ buffer
    past its per-level slots) and read from there by later levels and the outputs: no vector copy of sums_ into
    tots_ (a Muls by 1) and no S->V / V->S hand-off around one."""
    text = _row_chunk_text(EX / f"{name}.py")
    assert "Muls(tots_" not in text and "partials are the totals" not in text
    assert "sumBuf_: S has written it before V reads it" not in text
    assert "sumBuf_: V has written it before S reads it" not in text


def test_the_online_pair_rescales_only_after_the_first_chunk():
    """SoftmaxV2's online maximum and sum: at a row's first chunk there is no running sum to rescale, so the vector
    exp(old maximum - new) (a Duplicate and an Exp on 8 lanes, then a V->S wait) runs only under c0_ > cBegin."""
    text = _row_chunk_text(EX / "softmax.py")
    guard = text.index("if (c0_ > cBegin) {\n", text.index("RowSum("))
    body = text[guard:text.index("}", guard)]
    assert "Duplicate(red_" in body and "Exp(red_, red_, 8)" in body and "WaitFlag<HardEvent::V_S>" in body
    assert text.count("Duplicate(red_") == 1 and text.count("Exp(red_") == 1


def _red_bytes(c: int) -> int:
    """reduceBuf_ of a chunk of c columns: one (value, index) pair per 64 floats aligned to 8, plus the 8-float
    result block (fp32)."""
    return (-(-(-(-c // 64) * 2) // 8) * 8 + 8) * 4


def _softmax_ub(tl: dict, tbytes: int) -> int:
    """UB bytes SoftmaxV2's RowChunk allocates (its InitBuffer calls, counted by hand): x whole (two buffers of
    groupRows rows of colAlign), y chunks (two buffers), the sums (1 per-level slot + 2 totals of align8(groupRows)
    floats), one fp32 work row of a chunk, the reduction scratch."""
    c, g, a = tl["colsPerPass"], tl["groupRows"], tl["colAlign"]
    g8 = -(-g // 8) * 8
    return 2 * g * a * tbytes + 2 * g * c * tbytes + 3 * g8 * 4 + c * 4 + _red_bytes(c)


def _dynamic_quant_ub(tl: dict, tbytes: int) -> int:
    """UB bytes DynamicQuant's RowChunk allocates (counted by hand): x whole (two buffers), the int8 y chunks (two
    buffers), the scale staging (fp32) and its output queue (two), the sums (2 slots), two fp32 work rows of a chunk,
    the reduction scratch."""
    c, g, a = tl["colsPerPass"], tl["groupRows"], tl["colAlign"]
    g8 = -(-g // 8) * 8
    return 2 * g * a * tbytes + 2 * g * c + g8 * 4 + 2 * g8 * 4 + 2 * g8 * 4 + 2 * c * 4 + _red_bytes(c)


@pytest.mark.parametrize("plat", sorted(p for p in PLATFORMS if PLATFORMS[p].soc_key in ("ascend910b", "ascend910_93")))
@pytest.mark.parametrize("name, count, lanes, shapes", [
    ("softmax", _softmax_ub, 16, [(8192, 32000), (60, 40000), (4096, 20001), (97, 16000)]),
    ("dynamic_quant", _dynamic_quant_ub, 32, [(50, 20000), (4096, 16384), (97, 30001), (4096, 12289)]),
])
def test_softmax_and_dynamic_quant_resident_plans_fit_on_every_soc(plat, name, count, lanes, shapes):
    """Where the tiling picks ROW_CHUNK for SoftmaxV2 or DynamicQuant, the buffers the kernel allocates (recounted
    from its InitBuffer calls) fit UB less the PASS_SLACK_BYTES (1024) the chunk was sized beside, and the chunk is
    nearly the widest that does: two lane quanta more (16 columns, 32 for DynamicQuant's int8 chunks) would not fit
    (the plan also counts the 32-byte rounding of the sum and statistic buffers, which the kernel does not
    allocate: up to a quantum of slack)."""
    p = PLATFORMS[plat]
    seen = 0
    for rows, h in shapes:
        for dtype, nbytes in ((DType.f16, 2), (DType.bf16, 2)) + (((DType.f32, 4),) if name == "softmax" else ()):
            tl = _tiling(EX / f"{name}.py", rows, h, dtype, p)
            if tl["strategy"] != 4:
                continue
            seen += 1
            assert tl["fits"] == 1 and count(tl, nbytes) <= p.ub_bytes - 1024, (plat, rows, h, dtype)
            if tl["colsPerPass"] < tl["colAlign"]:
                wider = dict(tl, colsPerPass=tl["colsPerPass"] + 2 * lanes, groupRows=1)
                assert count(wider, nbytes) > p.ub_bytes - 1024, (plat, rows, h, dtype)
    assert seen >= 2, (plat, name)


def test_the_group_fit_keeps_the_slack_the_chunk_was_sized_beside():
    """rowChunkFit (rows of a ROW_CHUNK group that fit) keeps the PASS_SLACK_BYTES the chunk width was sized beside:
    around the row length where one resident SoftmaxV2 fp16 row stops fitting, whenever the tiling says a row fits,
    the kernel's allocations for it (recounted by hand, the chunk at rowChunkCols) fit UB less the slack."""
    for h in range(48000, 50000, 16):
        tl = _tiling(EX / "softmax.py", 4096, h, DType.f16)
        if tl["rowChunkFit"] >= 1:
            got = _softmax_ub(dict(tl, colsPerPass=tl["rowChunkCols"], groupRows=tl["rowChunkFit"]), 2)
            assert got <= B1.ub_bytes - 1024, (h, got, tl["rowChunkFit"])


@pytest.mark.parametrize("name", ["add_rms_norm", "rms_norm", "softmax"])
def test_the_one_burst_condition_is_bound_once_per_copy(name):
    """A copy of rows that may go in one burst (rows touching in GM and in UB) binds that condition once (oneBurst) and
    reads it for both blockCount and blockLen: the kernel's every `... == n_` / `== hidden_` merge test stands in a
    oneBurst binding, none inside DataCopyExtParams."""
    from opgen.codegen import generate_cached

    text = next(t for t in generate_cached(EX / f"{name}.py")[1].values() if "void RowChunk()" in t)
    binds = [ln for ln in text.split("\n") if "const int64_t oneBurst =" in ln]   # a long one wraps after "="
    assert binds, name
    # COL_STREAM's prefetched chunk copies (rowsched._chunk_in) test their own width, inN
    for call in text.split("DataCopyExtParams(")[1:]:
        head = call[:call.index(";")]
        assert all(t not in head for t in ("rowStride_ == n_", "rowStride_ == inN", "colAlign_ == hidden_")), head
    merged = text.count("rowStride_ == n_") + text.count("rowStride_ == inN") + text.count("colAlign_ == hidden_")
    assert merged == len(binds), (merged, len(binds))
