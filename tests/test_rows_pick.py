"""Whole rows picked along a leading axis by an index input (an embedding lookup, out[n, :] = weight[idx[n], :]) in
the rows family: the gathered rows are a row input whose GM row address each anchor row reads from the index
(opgen.kernel.rowlayout.PickedView; Off_<operand>(r) reads the index on the scalar unit and traps outside the
gathered axis), followed by any row math. Covered: Embedding (examples/specs/embedding.py, i64 indices) and the same
spec with i32 indices, an embedding followed by an RmsNorm (rstd as a second output), token plus position embeddings
(the position table's rows picked per sequence coordinate and broadcast over the batch), a gather with a batch dim
(table [B, V, H] by idx [B, N]), two picks from one table with one index also read as a number (a padding id). Values are compared with float64 NumPy math written here at every level: the
interpreter (device and exact mode), the Kernel IR on its interpreter (`opgen check --engine kir`) and the emitted
kernel on the g++ emulation (`opgen check`, slow): odd sizes, H = 1, row counts with a tail over the 48 cores, rows
past UB (COL_SPLIT, COL_STREAM), repeated indices, every dtype row. An index outside the table stops the kernel with
Trap() (device data: the aclnn layer cannot read it); the interpreter refuses it naming the input. The program facts
below are read off the specs by hand."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from opgen.errors import ValidationError
from opgen.interp.run import interpret
from opgen.kernel.family import NoKernel
from opgen.registry import load_spec
from opgen.tiling.pipeline import compile_unit, kernel_build

ROOT = Path(__file__).resolve().parents[1]
EMB = ROOT / "examples" / "specs" / "embedding.py"
DT = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
UNIT = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}
DTYPES = ("float32", "float16", "bfloat16")

HEAD = "from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32, i32, i64\n\n"
CHECK = '''

def _{name}_ok(arrays, env, attrs):
    t, v = arrays["{name}"], arrays["{table}"].shape[{axis}]
    bad = (t < 0) | (t >= v)
    return f"{name}[{{int(bad.reshape(-1).nonzero()[0][0])}}] is outside [0, {{v}})" if bad.any() else None


spec.check("{name}", _{name}_ok, on="device")
'''
SPECS = {
    # an embedding followed by an RmsNorm: the picked rows reduced (mean of squares) and scaled per row
    "EmbeddingRmsNorm": '''
spec = OpSpec("EmbeddingRmsNorm", aclnn="aclnnEmbeddingRmsNorm", socs=(A2, A3), round="rint")
N, V = spec.dims("N V")
H = spec.dim("H", max=1048576)
(T,) = spec.dtype_vars("T")
spec.input("weight", T, [V, H])
spec.input("ids", i32, [N])
spec.input("gamma", T, [H])
spec.attr("epsilon", float, 1e-6)
spec.output("y", T, [N, H])
spec.output("rstd", f32, [N, 1])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
''' + CHECK.format(name="ids", table="weight", axis=0) + '''

@spec.body
def _(b, weight, ids, gamma, epsilon):
    x = b.gather(weight, ids, axis=0)
    rstd = b.rsqrt((x * x).mean(-1) + epsilon)
    return {"y": (x * rstd * gamma).cast(T, "rint"), "rstd": rstd}
''',
    # token embeddings [B, S] plus position embeddings picked by a position per sequence coordinate [S]
    "TokPos": '''
spec = OpSpec("TokPos", aclnn="aclnnTokPos", socs=(A2, A3), round="rint")
B, S, V, P, H = spec.dims("B S V P H")
(T,) = spec.dtype_vars("T")
spec.input("tok", T, [V, H])
spec.input("pos", T, [P, H])
spec.input("ids", i64, [B, S])
spec.input("where", i32, [S])
spec.output("y", T, [B, S, H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
''' + CHECK.format(name="ids", table="tok", axis=0) + CHECK.format(name="where", table="pos", axis=0) + '''

@spec.body
def _(b, tok, pos, ids, where):
    return {"y": (b.gather(tok, ids, axis=0) + b.gather(pos, where, axis=0)).cast(T, "rint")}
''',
    # one table per batch: table [B, V, H] by idx [B, N] (batch_dims 1), then a softmax-like row and a [H] scale
    "BatchedPick": '''
spec = OpSpec("BatchedPick", aclnn="aclnnBatchedPick", socs=(A2, A3), round="rint")
B, V, N, H = spec.dims("B V N H")
(T,) = spec.dtype_vars("T")
spec.input("table", T, [B, V, H])
spec.input("idx", i64, [B, N])
spec.input("scale", T, [H])
spec.output("y", T, [B, N, H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
''' + CHECK.format(name="idx", table="table", axis=1) + '''

@spec.body
def _(b, table, idx, scale):
    x = b.gather(table, idx, axis=1)
    return {"y": (b.exp(x - x.max(-1)) * scale).cast(T, "rint")}
''',
    # two picks from one table by two indices, the first index also read per row as a number (a padding id's row
    # counts zero)
    "PadPick": '''
spec = OpSpec("PadPick", aclnn="aclnnPadPick", socs=(A2, A3), round="rint")
N, V, H = spec.dims("N V H")
(T,) = spec.dtype_vars("T")
spec.input("weight", T, [V, H])
spec.input("ids", i64, [N])
spec.input("ids2", i32, [N])
spec.attr("pad", float, 1.0)
spec.output("y", T, [N, H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
''' + CHECK.format(name="ids", table="weight", axis=0) + CHECK.format(name="ids2", table="weight", axis=0) + '''

@spec.body
def _(b, weight, ids, ids2, pad):
    keep = ids.f32().ne(pad).cast(i64).f32().reshape([N, 1])
    return {"y": ((b.gather(weight, ids, axis=0) - b.gather(weight, ids2, axis=0)) * keep).cast(T, "rint")}
''',
}


def _spec(tmp_path, name) -> Path:
    path = tmp_path / f"{re.sub(r'(?<!^)(?=[A-Z])', '_', name).lower()}.py"
    path.write_text(HEAD + SPECS[name].lstrip())
    return path


def _embedding_i32(tmp_path) -> Path:
    """examples/specs/embedding.py with int32 indices (OpDef EmbeddingI32)."""
    text = EMB.read_text()
    for old, new in (('spec.input("indices", i64', 'spec.input("indices", i32'), ("bf16, f16, f32, i64", "bf16, f16, f32, i32"),
                     ('OpSpec("Embedding", aclnn="aclnnEmbedding"', 'OpSpec("EmbeddingI32", aclnn="aclnnEmbeddingI32"')):
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "embedding_i32.py"
    path.write_text(text)
    return path


def _program(path) -> str:
    unit = compile_unit(load_spec(str(path)))
    return unit.family.program_text(unit.lowered, next(iter(unit.lowered.programs)))


def _f(a):
    return np.asarray(a, dtype=np.float64)


# ------------------------------------------------------------------------------------------------ the lowering
def test_the_picked_rows_are_read_at_the_row_their_index_names(tmp_path):
    # by hand: weight [V, H] by indices [*Bd]: rows prod(Bd) of H, row r at weight[indices[r] * H]; the position
    # table's row of anchor row (b, s) is where[s] (a1: the second leading coordinate); one table per batch: table
    # [B, V, H] row (b, n) at b * V * H + idx[b, n] * H (idx [B, N] contiguous: idx[r])
    text = _program(EMB)
    assert "layout rows [*Bd, H]: prod(Bd) rows of H" in text
    assert "gm in weight: T row at weight[indices[r] * H]" in text
    assert "gm in indices" not in text   # the index is read for the address only, never loaded as a statistic
    assert "gm in weight: T row at weight[indices[r] * H]" in _program(_embedding_i32(tmp_path))
    text = _program(_spec(tmp_path, "TokPos"))
    assert "layout rows [B, S, H]: B * S rows of H" in text
    assert "gm in tok: T row at tok[ids[r] * H]" in text and "gm in pos: T row at pos[where[a1] * H]" in text
    text = _program(_spec(tmp_path, "BatchedPick"))
    assert re.search(r"gm in table: T row at table\[a0 \* (H \* V|V \* H) \+ idx\[r\] \* H\]", text), text
    text = _program(_spec(tmp_path, "EmbeddingRmsNorm"))
    assert "gm in weight: T row at weight[ids[r] * H]" in text and "= ReduceSum(w1)" in text
    text = _program(_spec(tmp_path, "PadPick"))   # one table, two views; ids also a per-row value
    assert "gm in weight: T row at weight[ids[r] * H]" in text and "gm in weight_view1: T row at weight[ids2[r] * H]" \
        in text and "gm in ids: i64 stat at ids[r]" in text


def test_the_kernel_reads_each_index_on_the_scalar_unit_and_traps_outside_the_table():
    """The emitted kernel's address method of the picked rows: the index read from GM (GetValue), Trap() unless
    0 <= index < V, the row at index * H; the index tensor is bound in Init though no copy reads it."""
    from opgen.codegen import generate_cached

    files = generate_cached(EMB)[1]
    cpp = "\n".join(t for p, t in files.items() if p.startswith("op_kernel/"))
    m = re.search(r"int64_t Off_weight\(int64_t r\) const\s*\{(.*?)\n    \}", cpp, re.S)
    assert m, cpp[:2000]
    body = m.group(1)
    assert "gm_indices.GetValue(r)" in body and "Trap();" in body and "* hidden_" in body, body
    assert re.search(r"pick >= 0 && pick < td_->dim\d+", body), body
    assert "gm_indices.SetGlobalBuffer" in cpp


def test_renaming_the_op_its_dims_and_inputs_changes_nothing_but_names(tmp_path):
    """Embedding renamed (OpDef, aclnn API, dims, variadic group, inputs, output, dtype variable): the emitted kernel
    and tiling files equal the original's once the names are mapped back."""
    from opgen.codegen import generate, generate_cached

    names = {"Embedding": "Lookupqq", "weight": "tableqq", "indices": "idsqq", "out": "yqq", "V": "Vqq", "H": "Hqq",
             "Bd": "Bqq", "T": "Xqq"}
    src = EMB.read_text()
    for old, new in names.items():
        src = re.sub(rf"(?<![\w.]){old}(?!\w)", new, src)
    path = tmp_path / "lookupqq.py"
    path.write_text(src)
    a, b = generate_cached(EMB)[1], generate(load_spec(str(path)))
    back = {**{new: old for old, new in names.items()}, "lookupqq": "embedding", "LOOKUPQQ": "EMBEDDING"}

    def norm(t):
        t = re.sub(r"//\s*spec:[^\n]*", "", t)
        t = re.sub(r"Regenerate with `opgen generate [^`]*`[^\n]*", "Regenerate", re.sub(r"from \S+\.py", "from SPEC", t))
        return re.sub(r"\s+", "", t)

    checked = 0
    for p, text in a.items():
        if not (p.startswith("op_kernel/") or "_tiling." in p):
            continue
        other = b[p.replace("embedding", "lookupqq")]
        for new, old in sorted(back.items(), key=lambda kv: -len(kv[0])):
            other = other.replace(new, old)
        assert norm(other) == norm(text), p
        checked += 1
    assert checked >= 4


REFUSED = {
    # the index computed in the kernel: the address must be read before the row is copied
    "ComputedIndex": ('''
spec = OpSpec("ComputedIndex", aclnn="aclnnComputedIndex", socs=(A2,))
V, H, N = spec.dims("V H N")
spec.input("weight", f32, [V, H])
spec.input("ids", i64, [N])
spec.output("y", f32, [N, H])


@spec.body
def _(b, weight, ids):
    return {"y": b.gather(weight, ids + 1, axis=0)}
''', "return", "the index %v2 is computed in the kernel"),
    # the picked rows [B, H] used per batch of rows [B, S, H]: picked rows are rows of the domain
    "PickedPerBatch": ('''
spec = OpSpec("PickedPerBatch", aclnn="aclnnPickedPerBatch", socs=(A2,))
V, H, B, S = spec.dims("V H B S")
spec.input("weight", f32, [V, H])
spec.input("ids", i64, [B])
spec.input("x", f32, [B, S, H])
spec.output("y", f32, [B, S, H])


@spec.body
def _(b, weight, ids, x):
    return {"y": x * b.gather(weight, ids, axis=0).reshape([B, 1, H])}
''', "return", "the rows family reads picked rows as rows of its domain [B, S, H] (one index per row)"),
    # the gradient of a lookup: rows added into a leading axis
    "ScatterRows": ('''
spec = OpSpec("ScatterRows", aclnn="aclnnScatterRows", socs=(A2,))
V, H, N = spec.dims("V H N")
spec.input("grad", f32, [N, H])
spec.input("ids", i64, [N])
spec.output("dw", f32, [V, H])


@spec.body
def _(b, grad, ids):
    return {"dw": b.scatter_add(ids, grad, axis=0, size=V)}
''', "return", "adding whole rows into a leading axis (an embedding's gradient) is not lowered"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_with_the_rule_in_the_spec_terms(name, tmp_path):
    text, marker, why = REFUSED[name]
    path = tmp_path / f"{name.lower()}.py"
    path.write_text(HEAD + text.lstrip())
    line = next(k for k, t in enumerate(path.read_text().splitlines(), 1) if marker in t)
    with pytest.raises(NoKernel) as e:
        kernel_build(load_spec(str(path)))
    msg = str(e.value)
    assert msg.startswith(f"{name}: no kernel family lowers %") and msg.endswith("[rows family]"), msg
    assert why in msg and "\n" not in msg, msg
    m = re.search(rf"\({re.escape(path.name)}:(\d+)\)", msg)
    assert m and int(m.group(1)) == line, (msg, line)


# ------------------------------------------------------------------------------------------------ interpreter
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("itype", [np.int64, np.int32])
@pytest.mark.parametrize("shape, v, h", [((7,), 5, 33), ((2, 3), 4, 1), ((), 3, 17), ((9,), 1, 8)])
def test_interpreter_picks_the_rows(dt, itype, shape, v, h, tmp_path):
    """Device and exact mode equal NumPy's weight[indices] (a copy: exact in the weight's dtype); repeated indices
    and a one-row table included."""
    spec = load_spec(str(EMB if itype is np.int64 else _embedding_i32(tmp_path)))
    rng = np.random.default_rng(v * h)
    w = rng.standard_normal((v, h)).astype(DT[dt])
    idx = rng.integers(0, v, shape).astype(itype)
    if idx.size > 2:
        idx.flat[-1] = idx.flat[0]   # a repeated index
    want = w.astype(np.float64)[idx]
    got = interpret(spec, {"weight": w, "indices": idx}, dtypes={"T": dt}, mode="device")["out"]
    assert got.dtype == DT[dt] and got.shape == shape + (h,) and np.array_equal(got.astype(np.float64), want)
    ex = interpret(spec, {"weight": w, "indices": idx}, dtypes={"T": dt}, mode="exact")["out"]
    assert np.array_equal(_f(ex), want)


@pytest.mark.parametrize("bad", [-1, 5, 2**40])
def test_an_index_outside_the_table_is_refused_naming_the_input(bad):
    w = np.ones((5, 3), np.float32)
    idx = np.array([0, bad, 1], np.int64)
    with pytest.raises(ValidationError) as e:
        interpret(load_spec(str(EMB)), {"weight": w, "indices": idx}, dtypes={"T": "float32"})
    assert "indices" in str(e.value) and "outside [0, 5)" in str(e.value), str(e.value)


def test_interpreter_embedding_then_rms_norm(tmp_path):
    spec = load_spec(str(_spec(tmp_path, "EmbeddingRmsNorm")))
    rng = np.random.default_rng(3)
    w, g = rng.standard_normal((6, 9)).astype(np.float32), rng.standard_normal(9).astype(np.float32)
    ids = np.array([5, 0, 5, 2], np.int32)
    got = interpret(spec, {"weight": w, "ids": ids, "gamma": g}, {"epsilon": 1e-5}, mode="exact")
    x = _f(w)[ids]
    r = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(_f(got["rstd"]), r, rtol=1e-12)
    np.testing.assert_allclose(_f(got["y"]), x * r * _f(g), rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------------------------------------ Kernel IR
def _kir(path, dims, dtype, seed=0, inputs=None):
    from opgen.check import run_check

    r = run_check(str(path), inputs=inputs, dims=None if inputs else dims, dtypes={"T": dtype}, seed=seed,
                  engine="kir", progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    return r


@pytest.mark.parametrize("dims, dt, key", [
    ({"Bd": (97,), "V": 5, "H": 3}, "float16", 1),     # 97 rows over 48 cores: a tail; repeated indices
    ({"Bd": (2, 3), "V": 4, "H": 1}, "bfloat16", None),   # H = 1
    ({"Bd": (3,), "V": 2, "H": 20000}, "float32", 2),    # rows past UB: column chunks over the cores
])
def test_kernel_ir_copies_the_picked_rows(dims, dt, key, tmp_path):
    for path in (EMB, _embedding_i32(tmp_path)):
        r = _kir(path, dims, dt, seed=dims["V"] + dims["H"])
        if key is not None:
            assert r.tiling_key % 10 == key, r.tiling_key
        want = _f(r.inputs["weight"])[np.asarray(r.inputs["indices"])]
        assert np.array_equal(_f(r.arrays["out"]), want)


def test_kernel_ir_embedding_then_rms_norm_token_plus_position_and_batched_tables(tmp_path):
    r = _kir(_spec(tmp_path, "EmbeddingRmsNorm"), {"N": 61, "V": 7, "H": 33}, "float16", seed=1)
    x = _f(r.inputs["weight"])[r.inputs["ids"]]
    rs = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    _close(r.arrays["rstd"], rs, "float32", 33)
    _close(r.arrays["y"], x * rs * _f(r.inputs["gamma"]), "float16", 33)
    r = _kir(_spec(tmp_path, "TokPos"), {"B": 3, "S": 5, "V": 7, "P": 6, "H": 33}, "bfloat16", seed=2)
    want = _f(r.inputs["tok"])[r.inputs["ids"]] + _f(r.inputs["pos"])[r.inputs["where"]][None]
    _close(r.arrays["y"], want, "bfloat16", 1)
    r = _kir(_spec(tmp_path, "BatchedPick"), {"B": 3, "V": 5, "N": 7, "H": 19}, "float32", seed=3)
    x = np.take_along_axis(_f(r.inputs["table"]), np.asarray(r.inputs["idx"])[:, :, None], axis=1)
    _close(r.arrays["y"], np.exp(x - x.max(-1, keepdims=True)) * _f(r.inputs["scale"]), "float32", 1)
    r = _kir(_spec(tmp_path, "PadPick"), {"N": 61, "V": 3, "H": 20}, "float16", seed=4)
    ids, w = np.asarray(r.inputs["ids"]), _f(r.inputs["weight"])
    assert (ids == 1).any() and (ids != 1).any()   # rows of the padding id and others
    want = (w[ids] - w[np.asarray(r.inputs["ids2"])]) * (ids != 1)[:, None]
    _close(r.arrays["y"], want, "float16", 1, np.abs(w).max())


def test_the_kernel_ir_traps_on_an_index_outside_the_table():
    """The kernel's own check (the validation skipped, as for device data): Off_weight's Trap() stops the core."""
    from opgen.check.kirengine import launch
    from opgen.check.run import _output_slots
    from opgen.codegen.aclnn import device_value_requirements
    from opgen.platforms import get_platform

    spec = load_spec(str(EMB))
    for bad in (-1, 4, 2**33):
        inputs = {"weight": np.ones((4, 3), np.float32), "indices": np.array([0, 3, bad, 1], np.int64)}
        bound = spec.bind(inputs, {}, {"T": "float32"}, skip=device_value_requirements(spec))
        run = launch(spec, bound, _output_slots(spec, bound), get_platform("ascend910b1"))
        assert any("Trap()" in f and "outside [0, 4)" in f for f in run.faults), run.faults


def _close(got, ref, dtype, terms, scale=None):
    """|got - ref| within a few units of the output dtype's rounding plus fp32 accumulation over `terms` values,
    relative to the larger of the value (or `scale`) and the mean magnitude."""
    mag = np.abs(ref) if scale is None else np.maximum(np.abs(ref), scale)
    bound = (UNIT[dtype] * 4 + 2.0**-24 * 4 * terms) * (mag + mag.mean())
    err = np.abs(_f(got) - ref)
    assert np.shape(got) == ref.shape and np.all(err <= bound), (float(err.max()), float(bound.max()))


# ------------------------------------------------------------------------------------------------ emulated
@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    from opgen.codegen import write_ops

    src = tmp_path_factory.mktemp("specs")
    out = tmp_path_factory.mktemp("gen")
    paths = [_spec(src, name) for name in SPECS] + [_embedding_i32(src)]
    write_ops([str(p) for p in paths], out)
    return out, src


def _emu(path, gen_dir, dtype, dims=None, inputs=None, seed=0):
    from opgen.check import run_check

    r = run_check(str(path), inputs=inputs, dims=dims, dtypes={"T": dtype}, seed=seed, gen_dir=gen_dir,
                  progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    return r


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("dims, key", [({"Bd": (97,), "V": 50, "H": 33}, 1), ({"Bd": (3,), "V": 5, "H": 30001}, 2),
                                       ({"Bd": (2, 1), "V": 3, "H": 1}, None)])
def test_int32_indices_pick_the_rows(dt, dims, key, gen):
    out, src = gen
    r = _emu(src / "embedding_i32.py", out, dt, dims=dims, seed=dims["V"])
    if key is not None:
        assert r.tiling_key % 10 == key, r.tiling_key
    assert np.asarray(r.inputs["indices"]).dtype == np.int32
    assert np.array_equal(_f(r.arrays["out"]), _f(r.inputs["weight"])[np.asarray(r.inputs["indices"])])


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_repeated_indices_and_every_row_of_the_table(gen, examples_gen):
    """Every output row the same table row (one index repeated over 100 rows: cores read it concurrently), and a
    permutation of every row of the table."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((6, 45)).astype(np.float16)
    for idx in (np.full(100, 4, np.int64), rng.permutation(6).astype(np.int64), np.array([5], np.int64)):
        r = _emu(EMB, examples_gen, "float16", inputs={"weight": w, "indices": idx})
        assert np.array_equal(np.asarray(r.arrays["out"]), w[idx])
        # each picked row read once (its bytes), nothing else of the table; each index once a row (ROW_SPLIT), or
        # once a row by each core holding a column slice of it (COL_SPLIT: one row over the cores)
        assert r.gm["weight"].read == idx.size * 45 * 2, r.gm
        per_row = 1 if r.tiling_key % 10 == 1 else r.block_dim
        assert r.gm["indices"].read == idx.size * 8 * per_row, (r.gm, r.tiling_key, r.block_dim)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_an_index_outside_the_table_stops_the_kernel(examples_gen):
    from opgen.check.run import KernelTrapped

    w = np.ones((4, 3), np.float32)
    for bad in (-1, 4):
        with pytest.raises(KernelTrapped) as e:
            _emu(EMB, examples_gen, "float32", inputs={"weight": w, "indices": np.array([[0, 3], [bad, 1]], np.int64)})
        assert e.value.traps and "indices[2] (flat)" in str(e.value), str(e.value)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("dims, dt, key", [({"N": 97, "V": 50, "H": 33}, "bfloat16", 1),
                                           ({"N": 3, "V": 5, "H": 40000}, "float32", 2),
                                           ({"N": 100, "V": 7, "H": 20000}, "bfloat16", 4),   # rows resident
                                           ({"N": 2, "V": 3, "H": 524289}, "float16", 3),   # streamed
                                           ({"N": 5, "V": 2, "H": 1}, "float16", None)])
def test_embedding_then_rms_norm(dims, dt, key, gen):
    out, src = gen
    r = _emu(src / "embedding_rms_norm.py", out, dt, dims=dims, seed=dims["N"])
    if key is not None:
        assert r.tiling_key % 10 == key, r.tiling_key
    x = _f(r.inputs["weight"])[np.asarray(r.inputs["ids"])]
    rs = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    _close(r.arrays["rstd"], rs, "float32", dims["H"])
    _close(r.arrays["y"], x * rs * _f(r.inputs["gamma"]), dt, dims["H"])


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("dims, dt", [({"B": 2, "S": 49, "V": 7, "P": 50, "H": 33}, "float16"),
                                      ({"B": 3, "S": 1, "V": 1, "P": 1, "H": 1}, "float32")])
def test_token_plus_position_embeddings(dims, dt, gen):
    out, src = gen
    r = _emu(src / "tok_pos.py", out, dt, dims=dims, seed=dims["S"])
    want = _f(r.inputs["tok"])[np.asarray(r.inputs["ids"])] + _f(r.inputs["pos"])[np.asarray(r.inputs["where"])][None]
    _close(r.arrays["y"], want, dt, 1)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("dims, dt", [({"B": 3, "V": 5, "N": 33, "H": 19}, "bfloat16"),
                                      ({"B": 2, "V": 3, "N": 2, "H": 20000}, "float32")])
def test_one_table_per_batch(dims, dt, gen):
    out, src = gen
    r = _emu(src / "batched_pick.py", out, dt, dims=dims, seed=dims["N"])
    x = np.take_along_axis(_f(r.inputs["table"]), np.asarray(r.inputs["idx"])[:, :, None], axis=1)
    _close(r.arrays["y"], np.exp(x - x.max(-1, keepdims=True)) * _f(r.inputs["scale"]), dt, 1)
