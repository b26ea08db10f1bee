"""opgen.kernel.rowmerge: reductions over a run of trailing axes become reductions over one merged row axis, on
the graph the rows family analyses; graphs that do not keep the run together are left as they are (and keep the
analysis' own refusal). No C++ is built here (the kernels are emulated in tests/test_examples.py)."""

from __future__ import annotations

import re

import pytest

from opgen.kernel.rowlayout import analyse
from opgen.kernel.rowmerge import merge_trailing, min_as_max, prepare
from opgen.passes.graph import from_nx
from opgen.passes.pipeline import _run_nx
from opgen.registry import load_spec

HEAD = "from opgen.dsl import A2, A3, OpSpec, f16, f32\n\n"


def _graph(tmp_path, body: str, name="Norm"):
    p = tmp_path / f"{name.lower()}.py"
    p.write_text(HEAD + body.lstrip())
    spec = load_spec(str(p))
    return from_nx(_run_nx(spec.graph(list(spec.keys())[0]), None))


NORM = '''
spec = OpSpec("Norm", aclnn="aclnnNorm", socs=(A2, A3))
{a}, {b}, {c}, {d} = spec.dims("{a} {b} {c} {d}")
spec.input("x", f32, [{a}, {b}, {c}, {d}])
spec.input("w", f32, [{b}])
spec.output("y", f32, [{a}, {b}, {c}, {d}])
spec.output("m", f32, [{a}, {b}, 1, 1])


@spec.body
def _(b, x, w):
    m = x.mean((2, 3))
    return {{"y": (x - m) * w.reshape([{b}, 1, 1]), "m": m}}
'''


@pytest.mark.parametrize("names", [("N", "C", "H", "W"), ("Q", "P", "A", "Z")])
def test_a_reduction_over_two_trailing_axes_becomes_one_row(tmp_path, names):
    """[N, C, H, W] reduced over (H, W): rows [N, C] of H * W elements; the [C] weight is a per-row value. Renaming
    the dims changes nothing but the names."""
    a, b, c, d = names
    g = _graph(tmp_path, NORM.format(a=a, b=b, c=c, d=d))
    assert analyse(g).row == d   # unmerged: the row would be the last axis alone
    m = merge_trailing(g)
    lay = analyse(m)
    assert lay.axes == (a, b) and sorted(lay.row.split(" * ")) == sorted([c, d]), lay.text()
    vals = m.values()
    assert [str(x) for x in vals["x"].type.shape] == [a, b, lay.row]
    red = [n for n in m.nodes if n.op == "reduce"]
    assert [n.attr("axes") for n in red] == [(2,)] and [str(x) for x in red[0].result.type.shape] == [a, b, "1"]
    assert lay.space(vals["w"].type.shape) == "stat"


def test_a_weight_over_one_of_the_merged_axes_keeps_the_graph(tmp_path):
    """A [W] weight broadcast onto the run: the run is not one block of every value; the graph is returned as it is."""
    g = _graph(tmp_path, NORM.format(a="N", b="C", c="H", d="W").replace('spec.input("w", f32, [C])',
                                                                        'spec.input("w", f32, [W])')
               .replace('w.reshape([C, 1, 1])', 'w'))
    assert merge_trailing(g) is g


def test_a_reduction_of_every_element_keeps_its_rows(tmp_path):
    """A sum over every axis keeps the rows (per-core partials of any length), not one row of every element."""
    g = _graph(tmp_path, '''
spec = OpSpec("Total", aclnn="aclnnTotal", socs=(A2, A3))
S, H = spec.dims("S H")
spec.input("x", f32, [S, H])
spec.output("y", f32, [1])


@spec.body
def _(b, x):
    return {"y": x.sum((0, 1)).reshape([1])}
''', "Total")
    assert merge_trailing(g) is g


def test_a_reduction_over_middle_axes_keeps_the_graph(tmp_path):
    """(C, H) of [N, C, H, W] is no trailing run."""
    g = _graph(tmp_path, NORM.format(a="N", b="C", c="H", d="W").replace("x.mean((2, 3))", "x.mean((1, 2))")
               .replace('spec.output("m", f32, [N, C, 1, 1])', 'spec.output("m", f32, [N, 1, 1, W])')
               .replace("(x - m) * w.reshape([C, 1, 1])", "x - m"))
    assert merge_trailing(g) is g


def test_a_minimum_is_a_negated_maximum_of_the_negation(tmp_path):
    """x.min over the last axis: neg(reduce max(neg(x))) with the node's own result name, type and spec line; a min
    over leading axes stays a min (a Min accumulator); the interpreter's minimum is NumPy's."""
    import numpy as np

    from opgen.interp.run import interpret

    g = _graph(tmp_path, '''
spec = OpSpec("Lo", aclnn="aclnnLo", socs=(A2, A3))
A, H = spec.dims("A H")
spec.input("x", f32, [A, H])
spec.output("y", f32, [A, 1])
spec.output("z", f32, [H])


@spec.body
def _(b, x):
    return {"y": x.min(-1), "z": x.min(0, keepdims=False)}
''', "Lo")
    m = min_as_max(g)
    outs, prod, before = dict(g.outputs), m.producers(), g.producers()
    n = prod[outs["y"]]
    assert n.op == "neg" and prod[n.inputs[0]].op == "reduce" and prod[prod[n.inputs[0]].inputs[0]].op == "neg"
    assert prod[n.inputs[0]].attr("kind") == "max"
    assert n.result == before[outs["y"]].result and n.loc == before[outs["y"]].loc
    assert prod[outs["z"]] == before[outs["z"]] and prod[outs["z"]].attr("kind") == "min"
    assert prepare(g).nodes == m.nodes   # nothing to merge here
    x = np.random.default_rng(1).standard_normal((5, 7)).astype(np.float32)
    got = interpret(load_spec(str(tmp_path / "lo.py")), {"x": x})
    assert np.array_equal(got["y"], x.min(-1, keepdims=True)) and np.array_equal(got["z"], x.min(0))


def test_leading_variadic_dims_stay_leading(tmp_path):
    """[*Bd, S, H] normalised over (S, H): rows [*Bd] of S * H; the reduction's axes stay negative (a variadic group
    precedes them)."""
    g = _graph(tmp_path, '''
spec = OpSpec("Ln2", aclnn="aclnnLn2", socs=(A2, A3))
Bd = spec.variadic("Bd", max_rank=4)
S, H = spec.dims("S H")
spec.input("x", f32, [Bd, S, H])
spec.input("w", f32, [S, H])
spec.output("y", f32, [Bd, S, H])


@spec.body
def _(b, x, w):
    return {"y": (x - x.mean((-2, -1))) * w}
''', "Ln2")
    m = merge_trailing(g)
    lay = analyse(m)
    assert lay.axes == ("*Bd",) and sorted(lay.row.split(" * ")) == ["H", "S"], lay.text()   # canonical product
    assert [n.attr("axes") for n in m.nodes if n.op == "reduce"] == [(-1,)]
    assert lay.space(m.values()["w"].type.shape) == "col"


def test_a_dim_used_as_a_number_keeps_the_merge(tmp_path):
    """`x.sum((-2, -1)) / (S * H)`: the dim value S * H is the merged row's length (read from tiling data)."""
    g = _graph(tmp_path, '''
spec = OpSpec("Ln3", aclnn="aclnnLn3", socs=(A2, A3))
B, S, H = spec.dims("B S H")
spec.input("x", f32, [B, S, H])
spec.output("y", f32, [B, S, H])


@spec.body
def _(b, x):
    return {"y": x - x.sum((-2, -1)) / (S * H)}
''', "Ln3")
    assert any(n.op == "dimval" for n in g.nodes)
    m = merge_trailing(g)
    row = analyse(m).row
    assert m is not g and sorted(row.split(" * ")) == ["H", "S"]
    assert [str(d) for d in m.values()["x"].type.shape] == ["B", row]


MERGED_MAX = '''
spec = OpSpec("Norm", aclnn="aclnnNorm", socs=(A2, A3))
N = spec.dim("N", max=64)
C = spec.dim("C", max=64)
H = spec.dim("H", max=8192)
W = spec.dim("W", max=8192)
{require}
spec.input("x", f32, [N, C, H, W])
spec.output("y", f32, [N, C, H, W])


@spec.body
def _(b, x):
    m = x.mean((2, 3))
    return {{"y": x - m}}
'''


def test_the_ub_proof_probes_a_merged_row_at_both_maxima(tmp_path, monkeypatch):
    """A row of H * W elements fits with either dim at its max and the other at 1, but not with both at 8192
    (67M fp32 elements) when a core's slice must stay resident: the proof probes the pair together and names both; a
    relation bounding the product is probed where it binds (H at its max, W lowered to what the relation allows)
    and accepted. With the streaming schedule allowed (the default for this program), the same spec is proven at
    both maxima and its kernel streams."""
    from opgen.codegen import write_ops
    from opgen.errors import SpecError
    from opgen.tiling.pipeline import kernel_build
    from opgen.registry import _load_file

    monkeypatch.setattr("opgen.tiling.rowfamily.streamable", lambda c: False)   # a core's slice stays resident
    p = tmp_path / "norm.py"
    p.write_text(HEAD + MERGED_MAX.format(require=""))
    with pytest.raises(SpecError) as e:
        kernel_build(_load_file(p))   # in this process: the patch holds
    msg = str(e.value)
    assert "H=8192 and W=8192 together" in msg and "with  the" not in msg, msg
    fix = re.search(r'spec\.require\(H \* W <= (\d+), "x", "H \* W must be at most \1"\)', msg)
    assert fix, msg
    p.write_text(HEAD + MERGED_MAX.format(require=fix.group(0)))   # the printed relation is accepted
    assert kernel_build(_load_file(p)).proven
    p.write_text(HEAD + MERGED_MAX.format(require='spec.require(H * W <= 65536, "x", "H * W at most 65536")'))
    assert kernel_build(_load_file(p)).proven
    # a bound above what fits is refused again: it allows both maxima, which are probed
    p.write_text(HEAD + MERGED_MAX.format(require='spec.require(H * W <= (1 << 26), "x", "too long")'))
    with pytest.raises(SpecError):
        kernel_build(_load_file(p))
    monkeypatch.undo()
    p.write_text(HEAD + MERGED_MAX.format(require=""))
    write_ops([str(p)], tmp_path / "streamed")
    assert "ColStream" in (tmp_path / "streamed" / "norm" / "op_kernel" / "norm.h").read_text()


CHANNEL = '''
spec = OpSpec("{op}", aclnn="aclnn{op}", socs=(A2, A3), round="rint")
{a}, {b}, {c}, {d} = spec.dims("{a} {b} {c} {d}")
spec.input("x", {t}, [{a}, {b}, {c}, {d}])
spec.input("gamma", f32, {gshape})
spec.output("y", {t}, [{a}, {b}, {c}, {d}])


@spec.body
def _(b, x, gamma):
    xf = x.f32()
    r = b.rsqrt((xf * xf).mean(1) + 1e-6)
    return {{"y": (xf * r * gamma).cast(x.dtype, "rint")}}
'''


@pytest.mark.parametrize("names", [("B", "C", "H", "W"), ("Q", "P", "A", "Z")])
def test_the_axes_after_a_middle_reduction_become_one_row(tmp_path, names):
    """RmsNorm over the channels of [B, C, H, W] (a mean over axis 1): H and W, which no reduction touches, merge into
    one row of H * W; the mean becomes one over the C rows of each batch; the [C, 1, 1] weight becomes [C, 1].
    Renaming the dims changes nothing but the names."""
    a, b, c, d = names
    g = _graph(tmp_path, CHANNEL.format(op="RmsC", a=a, b=b, c=c, d=d, t="f32", gshape=f"[{b}, 1, 1]"), "RmsC")
    m = merge_trailing(g)
    lay = analyse(m)
    assert lay.axes == (a, b) and sorted(lay.row.split(" * ")) == sorted([c, d]) and lay.split == 1, lay.text()
    vals = m.values()
    assert [str(x) for x in vals["gamma"].type.shape] == [b, "1"]
    assert [n.attr("axes") for n in m.nodes if n.op == "reduce"] == [(1,)]


def test_a_weight_over_one_of_the_axes_after_the_reduction_keeps_the_graph(tmp_path):
    """A [W] weight broadcast onto H, W: they are not one block of every value; the graph is left as it is and the
    family's refusal says which input kept them apart."""
    from opgen.kernel.rowmerge import merge_blocker

    g = _graph(tmp_path, CHANNEL.format(op="RmsC", a="B", b="C", c="H", d="W", t="f32", gshape="[W]"), "RmsC")
    assert merge_trailing(g) is g
    assert merge_blocker(g) == ("the axes [H, W] after the reduced ones are not merged into one row: input gamma of "
                                "shape [W] carries part of them")


def test_reductions_leaving_different_runs_keep_the_graph(tmp_path):
    """A mean over axis 1 (leaving H, W) and one over axis 2 (leaving W): no run every reduction leaves whole."""
    g = _graph(tmp_path, CHANNEL.format(op="RmsC", a="B", b="C", c="H", d="W", t="f32", gshape="[C, 1, 1]")
               .replace('spec.output("y"', 'spec.output("z", f32, [B, C, 1, W])\nspec.output("y"')
               .replace('return {"y"', 'return {"z": xf.mean(2), "y"'), "RmsC")
    assert merge_trailing(g) is g


@pytest.mark.slow
def test_channel_rms_norm_kernel_against_float64(tmp_path):
    """The emulated kernel of RmsNorm over the channels of [B, C, H, W] (bf16, fp32; a row of H * W elements, C rows
    a batch, batches over the cores) against float64 NumPy on the inputs the kernel got."""
    import numpy as np

    from opgen.check import run_check
    from opgen.codegen import write_ops

    p = tmp_path / "rms_channel.py"
    p.write_text('''from opgen.dsl import A2, A3, OpSpec, bf16, f32

spec = OpSpec("RmsNormChannel", aclnn="aclnnRmsNormChannel", socs=(A2, A3), round="rint")
B = spec.dim("B")
C = spec.dim("C", max=4096)
H = spec.dim("H", max=64)
W = spec.dim("W", max=64)
(T,) = spec.dtype_vars("T")
spec.input("x", T, [B, C, H, W])
spec.input("gamma", f32, [C, 1, 1])
spec.output("y", T, [B, C, H, W])
spec.dtypes((T,), [(f32,), (bf16,)])


@spec.body
def _(b, x, gamma):
    xf = x.f32()
    r = b.rsqrt((xf * xf).mean(1) + 1e-6)
    return {"y": (xf * r * gamma).cast(T, "rint")}
''')
    write_ops([str(p)], tmp_path / "gen")
    for dims, dt, unit in (({"B": 3, "C": 37, "H": 5, "W": 9}, "float32", 2.0**-24),
                           ({"B": 50, "C": 16, "H": 17, "W": 33}, "bfloat16", 2.0**-8)):
        r = run_check(str(p), dims=dims, dtypes={"T": dt}, gen_dir=tmp_path / "gen", seed=4, progress=False)
        assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items()})
        x = np.asarray(r.inputs["x"], dtype=np.float64)
        gamma = np.asarray(r.inputs["gamma"], dtype=np.float64)
        want = x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-6) * gamma
        got = np.asarray(r.arrays["y"], dtype=np.float64)
        assert np.all(np.abs(got - want) <= 4 * unit * np.abs(want) + 2.0**-24 * 8 * dims["C"] * np.abs(want)), \
            float(np.abs(got - want).max())


def test_a_size_one_axis_of_the_run_reduced_alone_leaves_the_merged_axis(tmp_path):
    """x [B, C, 1, W] minus its sum over (C, 1): the run after C is (1, W); reducing its size-1 axis is a no-op, so
    the merged reduction is over C alone (review finding: it also summed the merged W), and the merged graph on the
    merged input equals the interpreter."""
    import numpy as np

    from opgen.interp import interpret, run_graph

    g = _graph(tmp_path, '''
spec = OpSpec("OneAxis", aclnn="aclnnOneAxis", socs=(A2, A3))
B, C, W = spec.dims("B C W")
spec.input("x", f32, [B, C, 1, W])
spec.output("y", f32, [B, C, 1, W])


@spec.body
def _(b, x):
    return {"y": x - x.sum([1, 2])}
''', "OneAxis")
    m = merge_trailing(g)
    assert [n.attr("axes") for n in m.nodes if n.op == "reduce"] == [(1,)]
    spec = load_spec(str(tmp_path / "oneaxis.py"))
    x = np.random.default_rng(0).normal(size=(2, 3, 1, 5)).astype(np.float32)
    bound = spec.bind({"x": x})
    bound.arrays["x"] = x.reshape(2, 3, 5)
    got = run_graph(m, bound, mode="device")["y"]
    assert np.array_equal(got.reshape(2, 3, 1, 5), interpret(spec, {"x": x}, mode="device")["y"])


@pytest.mark.slow
def test_a_max_over_the_leading_axis_of_three_lowers_and_is_exact(tmp_path):
    """x.max(0) of [R, S, H] (no reduction over the trailing S, H, which merge into one row): a column maximum over
    the R rows, emulated; a maximum is exact, so the kernel equals NumPy's bit for bit (R = 1, a tail over the
    cores, rows of S * H = 2107)."""
    import numpy as np

    from opgen.check import run_check
    from opgen.codegen import write_ops

    p = tmp_path / "outer_max.py"
    p.write_text(HEAD + '''
spec = OpSpec("OuterMax", aclnn="aclnnOuterMax", socs=(A2, A3))
R, S, H = spec.dims("R S H")
spec.input("x", f32, [R, S, H])
spec.output("y", f32, [S, H])


@spec.body
def _(b, x):
    return {"y": x.max(0, keepdims=False)}
''')
    write_ops([str(p)], tmp_path / "gen")
    for dims in ({"R": 50, "S": 7, "H": 301}, {"R": 1, "S": 100, "H": 70}, {"R": 3, "S": 2, "H": 4}):
        r = run_check(str(p), dims=dims, gen_dir=tmp_path / "gen", seed=2, progress=False)
        assert not r.faults and r.passed, r.faults[:3]
        assert np.array_equal(r.arrays["y"], np.asarray(r.inputs["x"]).max(0))


RMS_C = '''
spec = OpSpec("RmsNormC", aclnn="aclnnRmsNormC", socs=(A2, A3), round="rint")
B = spec.dim("B", max=4096)
C = spec.dim("C", max=4096)
H = spec.dim("H", max=4096)
W = spec.dim("W", max=4096)
{require}
(T,) = spec.dtype_vars("T")
spec.input("x", T, [B, C, H, W])
spec.input("gamma", T, [C])
spec.attr("epsilon", float, 1e-6)
spec.output("y", T, [B, C, H, W])
spec.output("rstd", f32, [B, 1, H, W])
spec.dtypes((T,), [(f32,), (f16,)])


@spec.body
def _(b, x, gamma, epsilon):
    xf = x.f32()
    rstd = b.rsqrt((xf * xf).mean(1) + epsilon)
    return {{"y": (xf * rstd * gamma.f32().reshape([C, 1, 1])).cast(T, "rint"), "rstd": rstd}}
'''


def test_the_pair_overflow_names_the_largest_product_that_fits(tmp_path):
    """RmsNorm over the channel axis of [B, C, H, W] (trial 9, finding 8): H and W each fit at 4096, together they
    do not. The refusal prints the relation to write with its number, and that relation makes the spec generate.
    The number by hand: with T=f32 the columns H * W, aligned up to 16, cost 36 B each in UB (16 per resident row,
    20 fixed) plus 72 B, so 36 * c + 72 <= 196608 gives c <= 5459, and 5457..5459 align up to 5472: N = 5456.
    A bound of 5457 allows H * W = 5457 (H=1819, W=3) and is refused; the probes run along the product's edge,
    not only at H=max, W=1."""
    from opgen.errors import SpecError
    from opgen.tiling.pipeline import kernel_build
    from opgen.registry import _load_file

    p = tmp_path / "rms_norm_c.py"
    p.write_text(HEAD + RMS_C.format(require=""))
    with pytest.raises(SpecError) as e:
        kernel_build(_load_file(p))
    msg = str(e.value)
    fix = 'spec.require(H * W <= 5456, "x", "H * W must be at most 5456")'
    assert "H=4096 and W=4096 together" in msg and fix in msg and "each fits alone" not in msg, msg
    p.write_text(HEAD + RMS_C.format(require=fix))
    assert kernel_build(_load_file(p)).proven
    p.write_text(HEAD + RMS_C.format(require=fix.replace("5456", "5457")))
    with pytest.raises(SpecError) as e:
        kernel_build(_load_file(p))
    assert "H * W <= 5456" in str(e.value), str(e.value)
