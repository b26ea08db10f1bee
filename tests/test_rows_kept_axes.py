"""Reductions over the row axis and some leading axes that are not adjacent to it, whose results feed more math
(opgen.kernel.rowmerge.kept_first, opgen.kernel.rows `batch_total`; docs/design.md "Kernel families", the rows
family's per-batch totals): BatchNorm's statistics of [N, C, L] per channel over N and L
(examples/specs/batch_norm_v3.py), a mean over axes [0, 2] of [A, B, Cc] centring the input, a maximum over axes
[1, 3] of a 4-D tensor keeping two axes. The kept axes are put first, each kept coordinate's rows are a batch of
consecutive rows: the first pass adds them into a per-batch row, the second reads it back complete, reduces it over
its columns and uses the total. Emulated kernels are compared with float64 NumPy math written here; the program
facts below are read off the spec by hand (which axes are kept, which rows form a batch), not off earlier output."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from opgen.kernel.family import NoKernel
from opgen.kernel.rowmerge import kept_first
from opgen.tiling.pipeline import compile_unit
from opgen.registry import load_spec

ROOT = Path(__file__).resolve().parents[1]
BN = ROOT / "examples" / "specs" / "batch_norm_v3.py"
UNIT = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}

HEAD = "from opgen.dsl import A2, OpSpec, bf16, f16, f32\n\n"
SPECS = {
    # a mean over the first and last axes of [A, B, Cc] centring the input, and a minimum over the same axes
    "MidCenter": '''
spec = OpSpec("MidCenter", aclnn="aclnnMidCenter", socs=(A2,))
A = spec.dim("A", max=4096)
B = spec.dim("B", max=2048)
Cc = spec.dim("Cc", max=4096)
(T,) = spec.dtype_vars("T")
spec.input("x", T, [A, B, Cc])
spec.output("y", T, [A, B, Cc])
spec.output("mn", T, [1, B, 1])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, x):
    xf = x.f32()
    return {"y": (xf - xf.mean((0, 2))).cast(T, "rint"), "mn": xf.min((0, 2)).cast(T, "rint")}
''',
    # the same statistics written on the permuted input [C, N, L] (the kept axis already first)
    "PermutedStats": '''
spec = OpSpec("PermutedStats", aclnn="aclnnPermutedStats", socs=(A2,))
N = spec.dim("N", max=4096)
C = spec.dim("C", max=2048)
L = spec.dim("L", max=4096)
spec.input("x", f32, [N, C, L])
spec.output("y", f32, [N, C, L])
spec.output("m", f32, [C])


@spec.body
def _(b, x):
    xp = x.permute(1, 0, 2)
    m = xp.mean((1, 2), keepdims=True)
    return {"y": (xp - m).permute(1, 0, 2), "m": m.reshape([C])}
''',
    # a sum over axes [0, 2] and nothing else: per-batch outputs only (no second pass over the rows)
    "SumOuter": '''
spec = OpSpec("SumOuter", aclnn="aclnnSumOuter", socs=(A2,))
A = spec.dim("A", max=4096)
B = spec.dim("B", max=2048)
Cc = spec.dim("Cc", max=4096)
(T,) = spec.dtype_vars("T")
spec.input("x", T, [A, B, Cc])
spec.output("s", T, [B])
spec.dtypes((T,), [(f32,), (f16,)])


@spec.body
def _(b, x):
    return {"s": x.f32().sum((0, 2), keepdims=False).cast(T, "rint")}
''',
    # a maximum over axes [1, 3] of [A, B, Cc, D] (two kept axes, A and Cc) and a per-channel weight [Cc, 1]
    "MaxKeep2": '''
spec = OpSpec("MaxKeep2", aclnn="aclnnMaxKeep2", socs=(A2,))
A = spec.dim("A", max=64)
B = spec.dim("B", max=64)
Cc = spec.dim("Cc", max=64)
D = spec.dim("D", max=1024)
(T,) = spec.dtype_vars("T")
spec.input("x", T, [A, B, Cc, D])
spec.input("g", f32, [Cc, 1])
spec.output("y", T, [A, B, Cc, D])
spec.output("mx", f32, [A, Cc])
spec.dtypes((T,), [(f32,), (f16,)])


@spec.body
def _(b, x, g):
    xf = x.f32()
    m = xf.max((1, 3))
    return {"y": ((xf - m) * g).cast(T, "rint"), "mx": m.reshape([A, Cc])}
''',
    # BatchNorm2d's statistics: [N, C, H, W] over N, H, W (the trailing H, W merged into rows of H * W)
    "Stats2d": '''
spec = OpSpec("Stats2d", aclnn="aclnnStats2d", socs=(A2,))
N = spec.dim("N", max=4096)
C = spec.dim("C", max=2048)
H = spec.dim("H", max=64)
W = spec.dim("W", max=64)
(T,) = spec.dtype_vars("T")
spec.input("x", T, [N, C, H, W])
spec.input("weight", f32, [C])
spec.input("bias", f32, [C])
spec.output("y", T, [N, C, H, W])
spec.output("mean", f32, [C])
spec.output("invstd", f32, [C])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, x, weight, bias):
    xf = x.f32()
    m = xf.mean((0, 2, 3), keepdims=False)
    r = b.rsqrt((xf * xf).mean((0, 2, 3), keepdims=False) - m * m + 1e-5)
    y = (xf - m.reshape([C, 1, 1])) * (r * weight).reshape([C, 1, 1]) + bias.reshape([C, 1, 1])
    return {"y": y.cast(T, "rint"), "mean": m, "invstd": r}
''',
}


def _spec(tmp_path, name) -> Path:
    path = tmp_path / f"{name.lower()}.py"
    path.write_text(HEAD + SPECS[name].lstrip())
    return path


def _program(path) -> str:
    unit = compile_unit(load_spec(str(path)))
    return unit.family.program_text(unit.lowered, next(iter(unit.lowered.programs)))


# ------------------------------------------------------------------------------------------------ the rewrite
def test_kept_first_moves_the_kept_axis_first_and_permutes_inputs_and_outputs_as_views():
    # by hand from the spec: mean over (0, 2) of [N, C, L] keeps C, so the order is (1, 0, 2): the input read
    # through permute (1, 0, 2), the reductions over (1, 2) of [C, N, L], [C, 1] operands reshaped to [C, 1, 1]
    # (only size-1 dims move), the output stored through the inverse permute, itself (1, 0, 2)
    spec = load_spec(str(BN))
    g = spec.graph(spec.keys()[0])
    h = kept_first(g)
    vals = h.values()
    perms = [n for n in h.nodes if n.op == "permute"]
    assert [(n.inputs[0], tuple(n.attr("perm"))) for n in perms[:1]] == [("input", (1, 0, 2))]
    assert [str(d) for d in perms[0].result.type.shape] == ["C", "N", "L"]
    assert [tuple(n.attr("axes")) for n in h.nodes if n.op == "reduce"] == [(1, 2), (1, 2)]
    out = dict(h.outputs)["output"]
    last = next(n for n in h.nodes if n.result.name == out)
    assert last.op == "permute" and tuple(last.attr("perm")) == (1, 0, 2)
    assert [str(d) for d in vals[out].type.shape] == ["N", "C", "L"]
    lifted = [n for n in h.nodes if n.op == "reshape" and [str(d) for d in n.result.type.shape] == ["C", "1", "1"]]
    assert lifted   # the [C, 1] mean, scale and bias aligned on the new order
    # a graph whose reductions keep the leading axes already (LayerNorm-like over the last two axes) is left alone
    assert kept_first(h) is h


# ------------------------------------------------------------------------------------------------ the program
def test_batch_norm_v3_lowers_as_per_batch_totals_of_its_channels():
    text = _program(BN)
    # rows (c, n) of L: input row (c, n) at n * C * L + c * L; each channel's N rows one batch
    assert "layout rows [C, N, L]: C * N rows of L, batch rows over [C]" in text
    assert re.search(r"gm in input: T row at input\[a0 \* L \+ a1 \* C \* L\]", text)
    assert re.search(r"gm out output: T row at output\[a0 \* L \+ a1 \* C \* L\]", text)
    # weight only scales invstd: read once per channel; bias is added to the rows: read per row
    assert "gm in weight: f32 bstat at weight[a0]" in text and "gm in bias: f32 stat at bias[a0]" in text
    assert re.search(r"bt\d+_ = static_cast<float>\(gm_weight.GetValue\(b\)\)", text)
    # two per-channel rows (the sum of x and of x * x over the channel's rows), read back complete
    assert "brow b0, b1" in text and "second pass over the rows reads b0, b1 complete" in text
    assert "bt0_ = ReduceSum(b0)" in text and "ReduceSum(b1)" in text
    # saveMean / saveInvstd: one element per channel, written once per batch
    assert re.search(r"store saveMean <- bt\d+_ \(CAST_NONE\) once per batch", text)
    assert re.search(r"store saveInvstd <- bt\d+_ \(CAST_NONE\) once per batch", text)
    # the first pass: load, accumulate x and x * x; the second: load, x - mean, * scale, + bias, store
    rows = [ln for ln in text.splitlines() if ln.lstrip().startswith("[row") or ln.lstrip().startswith("[brow")]
    assert sum("pass 1" in ln and "pass 1,2" not in ln for ln in rows) == 3     # 2 accumulates + x * x
    assert sum("pass 2" in ln and "pass 1,2" not in ln for ln in rows) == 4     # Adds, Muls, Adds, store


def test_batch_norm_2d_statistics_run_on_rows_of_h_times_w(tmp_path):
    # by hand: N, H, W reduced, C kept; H, W trailing and both reduced: one row of H * W; C first
    text = _program(_spec(tmp_path, "Stats2d"))
    assert "layout rows [C, N, H * W]: C * N rows of H * W, batch rows over [C]" in text
    assert re.search(r"gm in x: T row at x\[a0 \* H \* W \+ a1 \* C \* H \* W\]", text)


def test_renaming_dims_and_inputs_gives_the_same_program(tmp_path):
    src = BN.read_text()
    names = {"input": "xqq", "weight": "wqq", "bias": "bqq"}
    for a, b in names.items():
        src = re.sub(rf"(?<![.\w]){a}\b", b, src)   # not the DSL method spec.input
    dims = {"N": "Nqq", "C": "Cqq", "L": "Lqq"}
    for a, b in dims.items():
        src = src.replace(f'spec.dim("{a}"', f'spec.dim("{b}"')
    path = tmp_path / "batch_norm_v3.py"
    path.write_text(src)
    got = _program(path)
    for a, b in {**names, **dims}.items():
        got = got.replace(b, a)
    assert got == _program(BN)


# ------------------------------------------------------------------------------------------------ refusals
REFUSED = {
    # the per-batch mean read by a second reduction over the same axes (a variance around the mean): a third pass
    "ThirdPass": ('''
spec = OpSpec("ThirdPass", aclnn="aclnnThirdPass", socs=(A2,))
A, B, Cc = spec.dims("A B Cc")
spec.input("x", f32, [A, B, Cc])
spec.output("v", f32, [1, B, 1])


@spec.body
def _(b, x):
    d = x - x.mean((0, 2))
    return {"v": (d * d).mean((0, 2))}
''', "d = x", "reads the reduction over rows %v1 (thirdpass.py:11) while it is still being reduced (a third pass"),
    # two reductions over the row axis and a leading axis that keep different leading axes
    "TwoKeeps": ('''
spec = OpSpec("TwoKeeps", aclnn="aclnnTwoKeeps", socs=(A2,))
A, B, Cc = spec.dims("A B Cc")
spec.input("x", f32, [A, B, Cc])
spec.output("y", f32, [A, B, Cc])


@spec.body
def _(b, x):
    return {"y": x - x.mean((0, 2)) - x.mean((1, 2))}
''', "return", "a mean of [A, B, Cc] over the axes [A, Cc]; the rows family reduces over the row axis [Cc], over all "
     "leading axes [A, B] or over the rows of a batch (a reduction over Cc and the rows of each batch keeps the "
     "leading axes [A] here"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_with_the_rule_in_the_spec_terms(name, tmp_path):
    text, marker, why = REFUSED[name]
    path = tmp_path / f"{name.lower()}.py"
    path.write_text(HEAD + text.lstrip())
    line = next(k for k, t in enumerate(path.read_text().splitlines(), 1) if marker in t)
    with pytest.raises(NoKernel) as e:
        compile_unit(load_spec(str(path)))
    msg = str(e.value)
    assert msg.startswith(f"{name}: no kernel family lowers %") and msg.endswith("[rows family]"), msg
    assert why in msg and "\n" not in msg and "bt0_" not in msg, msg
    m = re.search(rf"\({re.escape(path.name)}:(\d+)\)", msg)
    assert m and int(m.group(1)) == line, (msg, line)


# ------------------------------------------------------------------------------------------------ emulated
def _f(a):
    return np.asarray(a, dtype=np.float64)


def _close(got, ref, dtype, terms, scale=None):
    """|got - ref| within a few units of the output dtype's rounding plus fp32 accumulation over `terms` values,
    relative to the larger of the value (or `scale`, the terms it is a difference of) and the mean magnitude."""
    mag = np.abs(ref) if scale is None else np.maximum(np.abs(ref), scale)
    bound = (UNIT[dtype] * 4 + 2.0**-24 * 4 * terms) * (mag + mag.mean())
    err = np.abs(_f(got) - ref)
    assert got.shape == ref.shape and np.all(err <= bound), (float(err.max()), float(bound.max()))


def _check(path, dims, dtypes, gen):
    from opgen.check import run_check

    r = run_check(str(path), dims=dims, dtypes=dtypes, gen_dir=gen, seed=sum(dims.values()), progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    assert r.tiling_key % 10 == 1   # two passes over the rows: ROW_SPLIT
    return r


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    from opgen.codegen import write_ops

    src = tmp_path_factory.mktemp("specs")
    out = tmp_path_factory.mktemp("gen")
    write_ops([str(_spec(src, name)) for name in SPECS], out)
    return out, src


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("dims,dt", [({"A": 9, "B": 11, "Cc": 65}, "float16"), ({"A": 1, "B": 100, "Cc": 1}, "bfloat16"),
                                     ({"A": 70, "B": 1, "Cc": 3}, "float32"), ({"A": 5, "B": 13, "Cc": 300}, "bfloat16"),
                                     ({"A": 3, "B": 7, "Cc": 1}, "float32")])
def test_a_mean_over_the_outer_axes_centres_the_input(dims, dt, gen):
    out, src = gen
    r = _check(src / "midcenter.py", dims, {"T": dt}, out)
    x = _f(r.inputs["x"])
    m = x.mean((0, 2), keepdims=True)
    _close(r.arrays["y"], x - m, dt, dims["A"] * dims["Cc"], np.abs(x) + np.abs(m))
    assert np.array_equal(_f(r.arrays["mn"]), x.min((0, 2), keepdims=True))   # a minimum is exact


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("dims", [{"N": 5, "C": 7, "L": 33}, {"N": 1, "C": 1, "L": 1}, {"N": 61, "C": 2, "L": 17}])
def test_the_permuted_form_computes_the_same_statistics(dims, gen):
    out, src = gen
    r = _check(src / "permutedstats.py", dims, {}, out)
    x = _f(r.inputs["x"])
    m = x.mean((0, 2), keepdims=True)
    _close(r.arrays["y"], x - m, "float32", dims["N"] * dims["L"], np.abs(x) + np.abs(m))
    _close(r.arrays["m"], m.reshape(-1), "float32", dims["N"] * dims["L"], np.abs(x).mean((0, 2)))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("dims,dt", [({"A": 7, "B": 9, "Cc": 301}, "float32"), ({"A": 50, "B": 3, "Cc": 40}, "float16"),
                                     ({"A": 1, "B": 1, "Cc": 1}, "float32")])
def test_a_sum_over_the_outer_axes_reads_its_input_once(dims, dt, gen):
    out, src = gen
    r = _check(src / "sumouter.py", dims, {"T": dt}, out)
    x = _f(r.inputs["x"])
    _close(r.arrays["s"], x.sum((0, 2)), dt, dims["A"] * dims["Cc"], np.abs(x).sum((0, 2)))
    assert r.gm["x"].read == x.size * {"float32": 4, "float16": 2}[dt]   # no second pass over the rows


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("dims,dt", [({"A": 3, "B": 5, "Cc": 7, "D": 9}, "float32"),
                                     ({"A": 2, "B": 1, "Cc": 3, "D": 130}, "float16")])
def test_a_maximum_keeping_two_axes(dims, dt, gen):
    out, src = gen
    r = _check(src / "maxkeep2.py", dims, {"T": dt}, out)
    x, g = _f(r.inputs["x"]), _f(r.inputs["g"])
    m = x.max((1, 3), keepdims=True)
    assert np.array_equal(_f(r.arrays["mx"]), m.reshape(dims["A"], dims["Cc"]))
    _close(r.arrays["y"], (x - m) * g, dt, 1, (np.abs(x) + np.abs(m)) * np.abs(g))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("dims,dt", [({"N": 4, "C": 16, "H": 7, "W": 7}, "float16"),
                                     ({"N": 3, "C": 5, "H": 1, "W": 9}, "float32"),
                                     ({"N": 1, "C": 3, "H": 5, "W": 1}, "bfloat16")])
def test_batch_norm_2d_statistics(dims, dt, gen):
    out, src = gen
    r = _check(src / "stats2d.py", dims, {"T": dt}, out)
    x, w, bb = _f(r.inputs["x"]), _f(r.inputs["weight"])[:, None, None], _f(r.inputs["bias"])[:, None, None]
    ax = (0, 2, 3)
    m = x.mean(ax, keepdims=True)
    inv = 1.0 / np.sqrt(((x - m) ** 2).mean(ax, keepdims=True) + 1e-5)
    dr = 2.0 * inv**3 * (x * x).mean(ax, keepdims=True)   # invstd's sensitivity to mean(x * x) - mean ** 2
    terms = dims["N"] * dims["H"] * dims["W"]
    _close(r.arrays["mean"], m.reshape(-1), "float32", terms, np.abs(x).mean(ax))
    _close(r.arrays["invstd"], inv.reshape(-1), "float32", terms, (inv + dr).reshape(-1))
    _close(r.arrays["y"], (x - m) * inv * w + bb, dt, terms, (np.abs(x) + np.abs(m)) * (inv + dr) * np.abs(w)
           + np.abs(bb))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_batch_norm_v3_gm_bytes_within_the_two_pass_bound(examples_gen):
    """GM traffic of the two-pass kernel (docs/design.md, the rows family's per-batch totals): the input read twice
    (once a pass), the output written once, bias read once a row a pass (4 bytes a row; it is added to the rows),
    weight once per channel by each core reaching it (it only scales invstd, a per-channel value), and the
    workspace within accs x L x 4 bytes x (2 C + 5 cores): a partial row per core and slot (2 slots: its first and
    last batch) written and read back once, each channel's complete row written once and read back by each core
    whose rows it reaches. At N 32, C 64, L 512 fp16 that is under 1.9x the minimum (each input read once, each
    output written once)."""
    from opgen.check import run_check

    n, c, ln = 32, 64, 512
    r = run_check(str(BN), dims={"N": n, "C": c, "L": ln}, dtypes={"T": "float16"}, gen_dir=examples_gen, golden=False,
                  progress=False)
    assert r.passed and not r.faults
    x = n * c * ln * 2
    assert r.gm["input"].read == 2 * x and r.gm["output"].written == x
    assert r.gm["bias"].read == 2 * 4 * n * c                        # added to the rows: once a row a pass
    assert r.gm["weight"].read <= 4 * (c + r.block_dim)              # into invstd * weight: once a batch a core
    ws = r.gm["workspace"].read + r.gm["workspace"].written
    assert ws <= 2 * ln * 4 * (2 * c + 5 * r.block_dim), ws
    assert r.gm_ratio < 1.9, r.gm_ratio
