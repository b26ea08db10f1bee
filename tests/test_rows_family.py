"""The rows family on the cases a review of the kernel-families change found: what it lowers is checked
against float64 NumPy through the emitted kernel, what it cannot lower is refused at lowering with one line naming
the op, the IR value, its spec line and the rule (never a traceback, never a Python repr)."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from opgen.kernel.family import NoKernel
from opgen.tiling.pipeline import compile_unit
from opgen.registry import load_spec

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAD = "from opgen.dsl import A2, A3, OpSpec, bf16, boolean, f16, f32, i8, i32, i64, u8\n\n"


def _spec(tmp_path, name, body):
    path = tmp_path / f"{name.lower()}.py"
    path.write_text(HEAD + body.lstrip())
    return path


# ------------------------------------------------------------------------------------------------ refusals
REFUSED = {
    # RoPE's rotate_half (a concat of computed halves read on) with tables [B, S, 1, D] broadcast over the heads: the
    # parts schedule took S for the head dim and the tables' extent-1 axis for a sequence, and its kernel read the
    # tables past their end (the emulation's GM range fault); neither schedule lowers it now
    "RopeBroadcastTables": ('''
spec = OpSpec("RopeBroadcastTables", aclnn="aclnnRopeBroadcastTables", socs=(A2, A3))
B, S, N = spec.dims("B S N")
D = spec.dim("D", max=1024, multiple_of=2)
spec.input("query", f32, [B, S, N, D])
spec.input("cos", f32, [B, S, 1, D])
spec.input("sin", f32, [B, S, 1, D])
spec.output("out", f32, [B, S, N, D])


@spec.body
def _(b, query, cos, sin):
    lo, hi = query.slice(-1, 0, D // 2), query.slice(-1, D // 2, D)
    return {"out": query * cos + b.concat([-hi, lo], -1) * sin}
''', "return", "(nor does the head-row parts schedule: a 4-D tensor [B, S, 1, D] broadcasts over axis 2"),
    # a sum over every axis read by per-row arithmetic (only column reductions are read back in a second pass)
    "TotalUse": ('''
spec = OpSpec("TotalUse", aclnn="aclnnTotalUse", socs=(A2, A3))
S, H = spec.dims("S H")
spec.input("x", f32, [S, H])
spec.output("y", f32, [S, H])


@spec.body
def _(b, x):
    return {"y": x - x.sum((0, 1))}
''', "return", "reads the sum over rows %v"),
    # a per-batch sum of values that read a per-batch sum (a variance around the mean: a third pass)
    "BatchMeanUse": ('''
spec = OpSpec("BatchMeanUse", aclnn="aclnnBatchMeanUse", socs=(A2, A3))
B, S, H = spec.dims("B S H")
spec.input("x", f32, [B, S, H])
spec.output("y", f32, [B, 1, H])


@spec.body
def _(b, x):
    m = x.sum(1) * (1.0 / 7.0)
    return {"y": (x - m).sum(1)}
''', "return", "a reduction over rows of a value that reads the reduction over rows %"),
    # a column sum broadcast to every row of an output
    "ColSumRows": ('''
spec = OpSpec("ColSumRows", aclnn="aclnnColSumRows", socs=(A2, A3))
S, H = spec.dims("S H")
spec.input("x", f32, [S, H])
spec.output("y", f32, [S, H])


@spec.body
def _(b, x):
    return {"y": x.sum(0).broadcast_to([S, H])}
''', "return", "the sum over rows %v"),
    # a concat of inputs of two dtype variables
    "CatTwoDtypes": ('''
spec = OpSpec("CatTwoDtypes", aclnn="aclnnCatTwoDtypes", socs=(A2, A3))
B, St, Si, H = spec.dims("B St Si H")
T, U = spec.dtype_vars("T U")
spec.input("txt", T, [B, St, H])
spec.input("img", U, [B, Si, H])
spec.output("out", f32, [B, St + Si, H])
spec.dtypes((T, U), [(f16, f32), (f32, f16)])


@spec.body
def _(b, txt, img):
    return {"out": b.concat([txt.f32(), img.f32()], 1) * 2.0}
''', "return", "a concat of inputs of different dtypes (txt: T, img: U)"),
    # a concat of per-batch rows
    "CatBatchRows": ('''
spec = OpSpec("CatBatchRows", aclnn="aclnnCatBatchRows", socs=(A2, A3))
A, C, S, H = spec.dims("A C S H")
spec.input("x", f32, [A + C, S, H])
spec.input("p", f32, [A, 1, H])
spec.input("q", f32, [C, 1, H])
spec.output("y", f32, [A + C, S, H])


@spec.body
def _(b, x, p, q):
    return {"y": x * b.concat([p, q], 0)}
''', "return", "a concat of inputs p, q read as per-batch rows"),
    # a concat of per-row statistics
    "CatStats": ('''
spec = OpSpec("CatStats", aclnn="aclnnCatStats", socs=(A2, A3))
A, C, H = spec.dims("A C H")
spec.input("x", f32, [A + C, H])
spec.input("p", f32, [A, 1])
spec.input("q", f32, [C, 1])
spec.output("y", f32, [A + C, H])


@spec.body
def _(b, x, p, q):
    return {"y": x * b.concat([p, q], 0)}
''', "return", "a concat of inputs p, q read as per-row statistics"),
    # statistics per group of channels then per channel (a reduction on each grouping): a reshape that regroups
    # axes between computations, named as such (not as a permute); GroupNorm's per-channel affine lowers
    # (examples/specs/group_norm.py), a second reduction per channel does not
    "GroupStats": ('''
spec = OpSpec("GroupStats", aclnn="aclnnGroupStats", socs=(A2, A3))
N, C, L = spec.dims("N C L")
G = spec.dim("G", max=64)
spec.input("x", f32, [N, C, L])
spec.input("w", f32, [C])
spec.attr("group", int, 1, dim=G)
spec.require((C % G).eq(0), "group", "C must be a multiple of group")
spec.output("y", f32, [N, C, L])


@spec.body
def _(b, x, w, group):
    xg = x.reshape([N, G, C // G * L])
    z = (xg - xg.mean(-1)).reshape([N, C, L]) * w.reshape([C, 1])
    return {"y": z - z.mean(-1)}
''', "xg = x.reshape", "groupings (a reduction over part of an axis, such as a group of channels, read back per "
                     "element of the other grouping, such as a per-channel weight); the rows family computes in one "
                     "axis order: reshape only operator inputs or outputs, or merge whole trailing axes (a reduction "
                     "(%v7 at groupstats.py:17) of the values regrouped as [N, C, L]"),
    # a reduction over two trailing axes whose weight carries only one of them: the axes stay apart (the mean is a
    # per-batch total over the H rows of W), a second reduction reads it (a third pass), and the refusal says which
    # value keeps the axes apart
    "PartRun": ('''
spec = OpSpec("PartRun", aclnn="aclnnPartRun", socs=(A2, A3))
N, C, H, W = spec.dims("N C H W")
spec.input("x", f32, [N, C, H, W])
spec.input("w", f32, [W])
spec.output("y", f32, [N, C, H, W])


@spec.body
def _(b, x, w):
    d = (x - x.mean((2, 3))) * w
    return {"y": d * (d * d).mean((2, 3))}
''', "d = (x", "the reduced axes [H, W] are not merged into one row: input w of shape [W] carries part of them"),
    # a per-row statistic input of a 16-bit dtype
    "HalfStat": ('''
spec = OpSpec("HalfStat", aclnn="aclnnHalfStat", socs=(A2, A3))
R, H = spec.dims("R H")
(T,) = spec.dtype_vars("T")
spec.input("x", T, [R, H])
spec.input("s", u8, [R, 1])
spec.output("y", T, [R, H])
spec.dtypes((T,), [(bf16,), (f32,)])


@spec.body
def _(b, x, s):
    return {"y": (x.f32() * s.f32()).cast(T, "rint")}
''', 'return', "per-row statistic input s has dtype u8; the rows family reads per-row statistics as f32, "
                         "f16 or bf16 and per-row indices as i32 or i64"),
    # an int64 input cast to f32 with floor, then reshaped: the kernel would round to nearest (review)
    "ChainFloor": ('''
spec = OpSpec("ChainFloor", aclnn="aclnnChainFloor", socs=(A2, A3), round="rint")
N, H = spec.dims("N H")
spec.input("x", i64, [N, H])
spec.output("y", f32, [N * H])


@spec.body
def _(b, x):
    return {"y": x.cast(f32, "floor").reshape([N * H])}
''', "return", "input x (i64) is cast to f32 with round mode 'floor'; the rows kernel converts integers to fp32 "
                 "rounding to nearest even (cast with 'rint')"),
    # the same through a dtype variable one of whose rows is int64
    "VarFloor": ('''
spec = OpSpec("VarFloor", aclnn="aclnnVarFloor", socs=(A2, A3), round="rint")
N, H = spec.dims("N H")
(T,) = spec.dtype_vars("T")
spec.input("x", T, [N, H])
spec.output("y", f32, [N, H])
spec.dtypes((T,), [(f32,), (i64,)])


@spec.body
def _(b, x):
    return {"y": x.cast(f32, "floor")}
''', "return", "input x (dtype variable T, bound to i64 by a row) is cast to f32 with round mode 'floor'; the "
                 "rows kernel converts integers to fp32 rounding to nearest even (cast with 'rint')"),
    # a mask with one value per row (masks of the rows' shape, column and batch-row masks are read): the refusal
    # names the input and the dtypes a per-row input may have
    "WhereRowMask": ('''
spec = OpSpec("WhereRowMask", aclnn="aclnnWhereRowMask", socs=(A2, A3))
R, H = spec.dims("R H")
spec.input("x", f32, [R, H])
spec.input("m", boolean, [R, 1])
spec.output("y", f32, [R, H])


@spec.body
def _(b, x, m):
    return {"y": b.where(m, x, 0.0)}
''', "b.where(m", "per-row statistic input m has dtype bool; the rows family reads per-row statistics as f32, "
       "f16 or bf16 and per-row indices as i32 or i64"),
    # a reduction over every axis combined with another: only column and per-batch ones are read back
    "TwoReductions": ('''
spec = OpSpec("TwoReductions", aclnn="aclnnTwoReductions", socs=(A2, A3))
S, H = spec.dims("S H")
spec.input("x", f32, [S, H])
spec.output("y", f32, [H])


@spec.body
def _(b, x):
    return {"y": x.max(0, keepdims=False) - x.sum((0, 1), keepdims=False)}
''', "return", "combines the reductions over rows %v"),
    # a per-batch reduction read into a per-batch value (computed at each new batch, before the batch is complete)
    "BatchValueUse": ('''
spec = OpSpec("BatchValueUse", aclnn="aclnnBatchValueUse", socs=(A2, A3))
B, S, H = spec.dims("B S H")
spec.input("x", f32, [B, S, H])
spec.input("g", f32, [B, 1, H])
spec.output("y", f32, [B, S, H])


@spec.body
def _(b, x, g):
    return {"y": x * (x.sum(1) * g)}
''', "return", "into per-row arithmetic only, not into a per-batch row value (apply it to the rows first"),
    # an iota of another length than the row axis
    "IotaLength": ('''
spec = OpSpec("IotaLength", aclnn="aclnnIotaLength", socs=(A2, A3))
N, H = spec.dims("N H")
spec.input("x", f32, [N, H])
spec.output("y", f32, [N, H])


@spec.body
def _(b, x):
    k = b.iota(N).reshape([N, 1]).f32()
    return {"y": x * k}
''', "k = b.iota", "`b.iota(N)`: the rows family numbers the columns of its row axis H only (`b.iota(H)`)"),
    # several indices per row
    "GatherMany": ('''
spec = OpSpec("GatherMany", aclnn="aclnnGatherMany", socs=(A2, A3))
N, H, K = spec.dims("N H K")
spec.input("x", f32, [N, H])
spec.input("idx", i64, [N, K])
spec.output("y", f32, [N, K])


@spec.body
def _(b, x, idx):
    return {"y": b.gather(x, idx, axis=1)}
''', "return", "by one i32 or i64 index per row"),
    # a per-channel operand of regrouped rows computed in the kernel (only operator inputs are read per segment):
    # the regrouping stays refused
    "SegComputed": ('''
spec = OpSpec("SegComputed", aclnn="aclnnSegComputed", socs=(A2, A3))
N, C, L = spec.dims("N C L")
G = spec.dim("G", max=64)
spec.input("x", f32, [N, C, L])
spec.input("w", f32, [C])
spec.attr("group", int, 1, dim=G)
spec.require((C % G).eq(0), "group", "C must be a multiple of group")
spec.output("y", f32, [N, C, L])


@spec.body
def _(b, x, w, group):
    xg = x.reshape([N, G, C // G * L])
    return {"y": (xg - xg.mean(-1)).reshape([N, C, L]) * b.exp(w.reshape([C, 1]))}
''', "xg = x.reshape", "is computed in the kernel; the rows family applies only elementwise ops with per-channel "
                     "operator inputs [C, 1] to values regrouped as [N, C, L]"),
    # a per-channel operand minus the regrouped rows (Muls / Adds apply x * w, x + b, x - b only)
    "SegMinus": ('''
spec = OpSpec("SegMinus", aclnn="aclnnSegMinus", socs=(A2, A3))
N, C, L = spec.dims("N C L")
G = spec.dim("G", max=64)
spec.input("x", f32, [N, C, L])
spec.input("w", f32, [C])
spec.attr("group", int, 1, dim=G)
spec.require((C % G).eq(0), "group", "C must be a multiple of group")
spec.output("y", f32, [N, C, L])


@spec.body
def _(b, x, w, group):
    xg = x.reshape([N, G, C // G * L])
    return {"y": w.reshape([C, 1]) - (xg - xg.mean(-1)).reshape([N, C, L])}
''', "return", "multiplies, adds or subtracts a per-channel operand (x * w, x + b, x - b) only"),
    # a dtype variable with an int8 row: the byte route through half is per tensor, not per template instance
    "ByteVariable": ('''
spec = OpSpec("ByteVariable", aclnn="aclnnByteVariable", socs=(A2, A3), round="rint")
Bd = spec.variadic("Bd", max_rank=4)
(T,) = spec.dtype_vars("T")
spec.input("dy", T, [Bd])
spec.input("x", T, [Bd])
spec.output("dx", T, [Bd])
spec.dtypes((T,), [(f32,), (f16,), (i8,)])


@spec.body
def _(b, dy, x):
    s = b.sigmoid(x)
    return {"dx": dy * s * (1.0 + x * (1.0 - s))}
''', 'spec.input("dy"', "input dy has dtype i8 (dtype variable T); the rows family reads f32, f16, bf16, i32, "
                         "i16, i64 inputs through a dtype variable (a byte dtype goes through half"),
    # an int runtime attribute is read as fp32, exact only in .eq / .ne
    # (docs/design.md "Rows family: integer attributes"): in index arithmetic k = 2^24 + 1 would shift by 2^24
    # where the interpreter shifts by 2^24 + 1
    "IntAttrShift": ('''
spec = OpSpec("IntAttrShift", aclnn="aclnnIntAttrShift", socs=(A2, A3))
N, C = spec.dims("N C")
spec.input("x", f32, [N, C])
spec.input("target", i64, [N])
spec.attr("k", int, 0, doc="a shift of the class index")
spec.output("y", f32, [N])


@spec.body
def _(b, x, target, k):
    return {"y": b.gather(x, target + k, axis=1)}
''', "target + k", "the int attribute k in `add`: the rows family reads it as fp32, exact only in .eq / .ne"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_at_lowering_with_the_rule(name, tmp_path):
    """Each case raises NoKernel from the pipeline: one line with the op, an IR value, the spec line of the
    construct and the rule; no Python repr (SpecKey(...), tuples) in the message."""
    text, marker, why = REFUSED[name]
    path = _spec(tmp_path, name, text)
    line = next(k for k, t in enumerate(path.read_text().splitlines(), 1) if marker in t)
    with pytest.raises(NoKernel) as e:
        compile_unit(load_spec(str(path)))
    msg = str(e.value)
    assert msg.startswith(f"{name}: no kernel family lowers %") and msg.endswith("[rows family]"), msg
    assert why in msg and "\n" not in msg and "SpecKey" not in msg and "(" + "'" not in msg, msg
    m = re.search(rf"\((?:\S*/)?{re.escape(path.name)}:(\d+)\)", msg)
    assert m and int(m.group(1)) == line, (msg, line)


# ------------------------------------------------------------------------------------------------ supported
def _kernel_text(path) -> str:
    unit = compile_unit(load_spec(str(path)))
    return unit.family.program_text(unit.lowered, next(iter(unit.lowered.programs)))


def test_group_norm_lowers_on_the_rows_of_its_groups_whatever_the_names(tmp_path):
    """GroupNorm (examples/specs/group_norm.py) lowers on rows [N, G] of C // G * HxW elements, gamma and beta read
    one value per segment of HxW columns at the row's group (vseg); the spec with every dim, input and attribute
    renamed lowers to the same program under the new names (nothing in opgen knows the operator)."""
    src = (ROOT / "examples" / "specs" / "group_norm.py").read_text()
    text = _kernel_text(ROOT / "examples" / "specs" / "group_norm.py")
    assert "layout rows [N, G, C // G * HxW]: G * N rows of C // G * HxW" in text, text
    assert "gm in gamma: T seg at gamma[a1 * C // G + (col / HxW)]" in text, text
    assert len(re.findall(r"= Muls\(w\d, \(\(s\d\) \* \(gamma\[seg\]\)\) per segment\)", text)) == 1, text
    assert len(re.findall(r"= Adds\(w\d, beta per segment\)", text)) == 1, text   # rowalg.fold_affine_chains
    names = {"C": "Ch", "G": "Grp", "HxW": "Sp", "gamma": "weight", "beta": "bias", "group": "num_groups",
             "GroupNorm": "GroupNormRenamed"}
    renamed = src
    for a, b in names.items():
        renamed = re.sub(rf"\b{a}\b", b, renamed)
    path = tmp_path / "group_norm_renamed.py"
    path.write_text(renamed)
    back = _kernel_text(path)
    for a, b in names.items():
        back = re.sub(rf"\b{b}\b", a, back)
    strip = lambda t: re.sub(r"@ \S+:\d+", "", t)  # noqa: E731 - the spec file names differ
    assert strip(back) == strip(text)


def test_group_norm_over_several_spatial_axes_lowers_on_the_groups_rows(tmp_path):
    """x [N, C, H, W] regrouped as [N, G, C // G * H * W], the affine on [N, C, H, W] with weights [C, 1, 1]: the same
    rows of the groups, segments of H * W columns."""
    path = _spec(tmp_path, "GroupNorm4", '''
spec = OpSpec("GroupNorm4", aclnn="aclnnGroupNorm4", socs=(A2, A3))
N = spec.dim("N")
C, H, W = spec.dims("C H W", max=256)
G = spec.dim("G", max=64)
spec.input("x", f32, [N, C, H, W])
spec.input("w", f32, [C])
spec.attr("groups", int, required=True, dim=G)
spec.require((C % G).eq(0), "groups", "C must be a multiple of groups")
spec.output("y", f32, [N, C, H, W])


@spec.body
def _(b, x, w, groups):
    xg = x.reshape([N, G, C // G * H * W])
    return {"y": (xg - xg.mean(2)).reshape([N, C, H, W]) * w.reshape([C, 1, 1])}
''')
    text = _kernel_text(path)
    assert "layout rows [N, G, C // G * H * W]: G * N rows of C // G * H * W" in text, text
    assert "gm in w: f32 seg at w[a1 * C // G + (col / (H * W))]" in text, text
    assert "gm out y: f32 row at y[" in text and "= Muls(w0, w per segment)" in text, text


def test_a_reshape_by_an_inexact_quotient_is_refused_at_the_spec_line(tmp_path):
    """[N, C, L] -> [N, G, C // G * L] keeps the elements only when C % G == 0: without that relation the spec is
    refused at the reshape's line, naming the relation to declare."""
    from opgen.errors import SpecError

    path = _spec(tmp_path, "NoRelation", '''
spec = OpSpec("NoRelation", aclnn="aclnnNoRelation", socs=(A2, A3))
N, C, L = spec.dims("N C L")
G = spec.dim("G", max=64)
spec.input("x", f32, [N, C, L])
spec.attr("group", int, 1, dim=G)
spec.output("y", f32, [N, G, 1])


@spec.body
def _(b, x, group):
    return {"y": x.reshape([N, G, C // G * L]).mean(-1)}
''')
    with pytest.raises(SpecError) as e:
        compile_unit(load_spec(str(path)))
    msg = str(e.value)
    assert "C // G is exact only when C % G == 0" in msg and "spec.require((C % G).eq(0)" in msg, msg
    line = next(k for k, t in enumerate(path.read_text().splitlines(), 1) if "x.reshape" in t)
    assert f"norelation.py:{line}: error" in msg, msg


def test_a_strided_view_copies_runs_of_rows():
    """ScaledTranspose's x (BSND read in BNSD order) has rows D apart along S: N * D - D >= D - D holds for N >= 1,
    so a run of rows along S is one DataCopyPad (the view's `runs`), not one copy per row."""
    from opgen.codegen import generate_cached

    spec = load_spec("examples/specs/scaled_transpose.py")
    u = compile_unit(spec, until="lower")
    (prog,) = u.lowered.programs.values()
    x = prog.tensor("x")
    assert x.view.runs and not x.view.flat
    h = generate_cached(spec)[1]["op_kernel/scaled_transpose.h"]
    assert "const int64_t m = 1;" not in h
    assert h.count("const int64_t m = RunRows(r, k - j);") == 1     # x's copy-in in ROW_SPLIT
    # and in COL_SPLIT, whose items are prefetched (rowsched._chunk_in: the first before the loops, then the next)
    assert h.count("const int64_t m = RunRows(r, inK - j);") == 2


_OPT_INT = '''
spec = OpSpec("OptShiftInt", aclnn="aclnnOptShiftInt", socs=(A2, A3), round="rint")
B, S = spec.dims("B S")
H = spec.dim("H", max=4096)
spec.input("x", f32, [B, S, H])
spec.input("m", i32, [B, S, H])
spec.input("shift", f32, [B, 1, H], optional=True)
spec.output("y", f32, [B, S, H])


@spec.body
def _(b, x, m, shift):
    y = x * m.cast(f32, "rint")
    if shift is not None:
        y = y + shift
    return {"y": y}
'''


@pytest.fixture(scope="module")
def opt_int(tmp_path_factory):
    """The spec file of _OPT_INT."""
    return _spec(tmp_path_factory.mktemp("opt_int"), "opt_shift_int", _OPT_INT)


def test_optional_batch_row_keeps_one_layout(opt_int):
    """An optional per-batch input: the specialisation without it is pure elementwise (flat) but lowers on the
    rows domain of the one with it, so one kernel serves both."""
    u = compile_unit(load_spec(str(opt_int)), until="lower")
    assert not u.lowered.layout.flat and u.lowered.layout.split == 1
    assert len(u.lowered.programs) == 2


_CAT_SUMS = '''
spec = OpSpec("CatSums", aclnn="aclnnCatSums", socs=(A2, A3), round="rint")
B, S = spec.dims("B S")
H = spec.dim("H", max=4096)
spec.input("cls", f32, [B, 1, H])
spec.input("x", f32, [B, S, H])
spec.input("y", f32, [B, B, H])
spec.output("out", f32, [B, S + B + 1, H])
spec.output("gb", f32, [2 * H])


@spec.body
def _(b, cls, x, y):
    v = b.concat([cls, x, y], 1) * 2.0
    return {"out": v, "gb": b.concat([v.sum((0, 1), keepdims=False), (v * v).sum((0, 1), keepdims=False)], -1)}
'''


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_concat_pieces_by_position_and_column_sums_at_an_offset(tmp_path):
    """A concat along axis 1 of an extent-1 piece (a CLS row [B, 1, H]), [B, S, H] and a piece whose batch and
    concat axes have one extent ([B, B, H]: each piece keeps its own batch stride), and two column sums written
    side by side into [2 H]: the kernel's outputs equal float64 NumPy, every input element read once."""
    from opgen.check import run_check
    from opgen.codegen import write_ops

    path = _spec(tmp_path, "cat_sums", _CAT_SUMS)
    write_ops([str(path)], tmp_path / "out")
    rng = np.random.default_rng(3)
    B, S, H = 3, 2, 20
    ins = {"cls": rng.standard_normal((B, 1, H)), "x": rng.standard_normal((B, S, H)),
           "y": rng.standard_normal((B, B, H))}
    ins = {k: v.astype(np.float32) for k, v in ins.items()}
    r = run_check(str(path), inputs=ins, gen_dir=tmp_path / "out", progress=False)
    v = np.concatenate([ins["cls"], ins["x"], ins["y"]], 1).astype(np.float64) * 2
    want = {"out": v, "gb": np.concatenate([v.sum((0, 1)), (v * v).sum((0, 1))])}
    for k, w in want.items():
        got = r.arrays[k].astype(np.float64)
        assert got.shape == w.shape, k
        assert np.abs(got - w).max() <= 1e-5 * (np.abs(w).max() + 1), k
    assert r.passed and not r.faults
    assert all(r.gm[k].read == a.nbytes for k, a in ins.items())


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_int32_rows_and_an_optional_batch_row(opt_int, tmp_path):
    """An int32 row input cast to fp32 in UB, and an optional per-batch shift: both specialisations run the one
    kernel and equal float64 NumPy."""
    from opgen.check import run_check
    from opgen.codegen import write_ops

    path = opt_int
    write_ops([str(path)], tmp_path / "out")
    rng = np.random.default_rng(4)
    B, S, H = 2, 3, 24
    x = rng.standard_normal((B, S, H)).astype(np.float32)
    m = rng.integers(-1000, 1000, (B, S, H)).astype(np.int32)
    shift = rng.standard_normal((B, 1, H)).astype(np.float32)
    for ins in ({"x": x, "m": m}, {"x": x, "m": m, "shift": shift}):
        r = run_check(str(path), inputs=ins, gen_dir=tmp_path / "out", progress=False)
        want = x.astype(np.float64) * m + (shift.astype(np.float64) if "shift" in ins else 0)
        got = r.arrays["y"].astype(np.float64)
        assert got.shape == want.shape
        assert np.abs(got - want).max() <= 1e-6 * np.abs(want).max(), sorted(ins)
        assert r.passed and not r.faults


_LEAD_STATS = '''
spec = OpSpec("LeadStats", aclnn="aclnnLeadStats", socs=(A2, A3), round="rint")
A, M = spec.dims("A M")
H = spec.dim("H", max=65536)
spec.attr("alpha", float, 2.0)
spec.input("x", f32, [A, M, H])
spec.output("bmean", f32, [A, H])
spec.output("cmax", f32, [H])
spec.output("cmean", f16, [H])
spec.output("tmax", f32, [1])
spec.output("cmin", f32, [H])
spec.output("tmin", f32, [1])
spec.output("span", f32, [A, M, H])


@spec.body
def _(b, x, alpha):
    return {"bmean": 1.0 - x.sum(1, keepdims=False) / M * alpha, "cmax": x.max((0, 1), keepdims=False),
            "cmean": x.mean((0, 1), keepdims=False).cast(f16, "rint"), "tmax": x.max((0, 1, 2)).reshape([1]) * 0.5,
            "cmin": x.min((0, 1), keepdims=False), "tmin": x.min((0, 1, 2)).reshape([1]), "span": x - x.min(-1)}
'''


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_means_maxima_and_finishing_steps_over_leading_axes(tmp_path):
    """A per-batch sum finished by scalar arithmetic with a dim and a runtime attribute (`1 - sum / M * alpha`), a
    column maximum (from -inf, partials combined with Max), a column mean and a maximum over every axis (a [1]
    output, halved once complete), and minima over the same axes and over the row (min: -max(-x)) in one kernel,
    against float64 NumPy:
    batches and rows split across cores with tails (ROW_SPLIT), M = 1, and rows past the core count's columns
    (COL_SPLIT). One build, three runs."""
    from opgen.check import run_check
    from opgen.codegen import write_ops

    path = _spec(tmp_path, "lead_stats", _LEAD_STATS)
    write_ops([str(path)], tmp_path / "gen")
    for dims, alpha, strategy in (({"A": 3, "M": 37, "H": 33}, 0.7, 1), ({"A": 5, "M": 1, "H": 1}, -3.0, None),
                                  ({"A": 2, "M": 2, "H": 5000}, 1.5, 2)):
        r = run_check(str(path), dims=dims, attrs={"alpha": alpha}, gen_dir=tmp_path / "gen", seed=dims["H"],
                      progress=False)
        assert not r.faults and r.passed, (dims, r.faults[:3], r.failed_outputs())
        if strategy is not None:
            assert r.tiling_key % 10 == strategy, r.tiling_key
        x = np.asarray(r.inputs["x"], dtype=np.float64)
        want = {"bmean": 1.0 - x.sum(1) / dims["M"] * alpha, "cmax": x.max((0, 1)), "cmean": x.mean((0, 1)),
                "tmax": x.max().reshape(1) * 0.5, "cmin": x.min((0, 1)), "tmin": x.min().reshape(1),
                "span": x - x.min(-1, keepdims=True)}
        x32 = np.asarray(r.inputs["x"], dtype=np.float32)
        span32 = (x32 - x32.min(-1, keepdims=True)).astype(np.float64)   # one fp32 rounding of an exact minimum
        for name, ref in want.items():
            got = np.asarray(r.arrays[name], dtype=np.float64)
            unit = 2.0**-11 if name == "cmean" else 2.0**-24 * (4 + x.shape[0] * x.shape[1])
            assert got.shape == ref.shape and np.all(np.abs(got - ref) <= 4 * unit * (np.abs(ref) + np.abs(ref).mean()
                                                                                     + 1e-30)), (dims, name)
        for name in ("cmax", "tmax", "cmin", "tmin"):   # a max / min is exact (and halving it)
            assert np.array_equal(np.asarray(r.arrays[name], dtype=np.float64), want[name]), (dims, name)
        assert np.array_equal(np.asarray(r.arrays["span"], dtype=np.float64), span32), dims


_CENTRE = '''
spec = OpSpec("Centre", aclnn="aclnnCentre", socs=(A2, A3), round="rint")
S = spec.dim("S", max=100000)
H = spec.dim("H", max=4096)
(T,) = spec.dtype_vars("T")
spec.input("x", T, [S, H])
spec.output("y", T, [S, H])
spec.output("z", f32, [S, H])
spec.output("mean", f32, [H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, x):
    xf = x.f32()
    m = xf.mean(0, keepdims=False)
    return {"y": ((xf - m) * 2.0).cast(T, "rint"), "z": xf - xf.max(0), "mean": m}
'''


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_a_column_reduction_read_by_per_row_arithmetic_takes_a_second_pass(tmp_path):
    """`x - x.mean(0)` and `x - x.max(0)`: the first pass accumulates the column mean and maximum, the cross-core
    exchange completes them (each core its column slice, in core order) and writes them back through workspace,
    the second pass reads them complete; against float64 NumPy with rows split across cores with tails, one row of
    one element, and rows of 4000 (the tiling keeps ROW_SPLIT for a two-pass kernel). One build."""
    from opgen.check import run_check
    from opgen.codegen import write_ops

    path = _spec(tmp_path, "centre", _CENTRE)
    write_ops([str(path)], tmp_path / "gen")
    for dims, dt in (({"S": 111, "H": 33}, "float16"), ({"S": 1, "H": 1}, "bfloat16"), ({"S": 5, "H": 4000}, "float32")):
        r = run_check(str(path), dims=dims, dtypes={"T": dt}, gen_dir=tmp_path / "gen", seed=dims["S"],
                      progress=False)
        assert not r.faults and r.passed, (dims, r.faults[:3], r.failed_outputs())
        assert r.tiling_key % 10 == 1, r.tiling_key
        x = np.asarray(r.inputs["x"], dtype=np.float64)
        m = x.mean(0)
        unit = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24}[dt] * 4 + 2.0**-24 * 4 * dims["S"]
        for name, ref in (("y", (x - m) * 2.0), ("z", x - x.max(0)), ("mean", m)):
            got = np.asarray(r.arrays[name], dtype=np.float64)
            scale = np.maximum(np.abs(ref), np.abs(x).max())   # differences cancel: bound by the terms' size
            assert got.shape == ref.shape and np.all(np.abs(got - ref) <= unit * (scale + 1e-30)), (dims, name)


_BATCH_CENTRE = '''
spec = OpSpec("BatchCentre", aclnn="aclnnBatchCentre", socs=(A2, A3), round="rint")
B = spec.dim("B", max=1000)
S = spec.dim("S", max=100000)
H = spec.dim("H", max=4096)
(T,) = spec.dtype_vars("T")
spec.input("x", T, [B, S, H])
spec.output("y", T, [B, S, H])
spec.output("m", f32, [B, H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, x):
    xf = x.f32()
    m = xf.mean(1, keepdims=False)
    return {"y": (xf - xf.max(1) + m.reshape([B, 1, H])).cast(T, "rint"), "m": m}
'''


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_a_per_batch_reduction_read_by_per_row_arithmetic_takes_a_second_pass(tmp_path):
    """`x - x.max(1) + x.mean(1)` of [B, S, H]: the first pass accumulates each batch's maximum and mean, whole
    batches are written complete to workspace when flushed, batches split across cores after the exchange; the
    second pass reads each batch's complete rows back at a new batch. Against float64 NumPy: batches split across
    cores, one row per batch with 97 batches, rows of 4000. One build."""
    from opgen.check import run_check
    from opgen.codegen import write_ops

    path = _spec(tmp_path, "batch_centre", _BATCH_CENTRE)
    write_ops([str(path)], tmp_path / "gen")
    for dims, dt in (({"B": 3, "S": 37, "H": 33}, "float16"), ({"B": 97, "S": 1, "H": 1}, "bfloat16"),
                     ({"B": 2, "S": 3, "H": 4000}, "float32")):
        r = run_check(str(path), dims=dims, dtypes={"T": dt}, gen_dir=tmp_path / "gen", seed=dims["S"],
                      progress=False)
        assert not r.faults and r.passed, (dims, r.faults[:3], r.failed_outputs())
        x = np.asarray(r.inputs["x"], dtype=np.float64)
        m = x.mean(1)
        unit = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24}[dt] * 4 + 2.0**-24 * 4 * dims["S"]
        for name, ref in (("y", x - x.max(1, keepdims=True) + m[:, None, :]), ("m", m)):
            got = np.asarray(r.arrays[name], dtype=np.float64)
            scale = np.maximum(np.abs(ref), np.abs(x).max())
            assert got.shape == ref.shape and np.all(np.abs(got - ref) <= unit * (scale + 1e-30)), (dims, name)


MASK_LOGIC = '''
spec = OpSpec("MaskLogic", aclnn="aclnnMaskLogic", socs=(A2, A3))
R, H = spec.dims("R H")
spec.input("x", f32, [R, H])
spec.input("m", boolean, [R, H])
spec.input("k", i8, [R, H])
spec.input("u", u8, [R, H])
spec.output("y", f32, [R, H])
spec.output("z", f32, [R, H])


@spec.body
def _(b, x, m, k, u):
    return {"y": b.where((x > 0.5) | ~m, x, b.where(k, -x, b.where(u, 2.0 * x, 0.0))),
            "z": x * b.cast(x > 0.5, f32)}


@spec.example
def _(rng, inputs, env, attrs):
    inputs["m"] = rng.random(inputs["m"].shape) < 0.5
    inputs["k"] = rng.integers(-2, 3, inputs["k"].shape).astype("int8")
    inputs["u"] = rng.integers(0, 3, inputs["u"].shape).astype("uint8")
'''


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_mask_logic_with_mask_inputs_lowers_and_runs(tmp_path):
    """`|` and `~` over a comparison and a bool mask input, int8 / uint8 masks (`!= 0`), a comparison used as a
    number: byte inputs reach fp32 through half and are compared with 0, masks combined with Or / Not as uint16
    words; the emulated kernel equals float64 math exactly."""
    from opgen.check import run_check
    from opgen.codegen import write_ops
    from opgen.kernel.rowprog import print_program

    path = _spec(tmp_path, "MaskLogic", MASK_LOGIC)
    u = compile_unit(load_spec(str(path)), until="lower")
    (prog,) = u.lowered.programs.values()
    text = print_program(prog)
    for want in ("cast_in(m) as half", "cast_in(k) as half", "cast_in(u) as half", "NE)", "Not(", "Or("):
        assert want in text, text
    write_ops([str(path)], tmp_path / "gen")
    r = run_check(str(path), dims={"R": 7, "H": 100}, gen_dir=tmp_path / "gen", seed=2, progress=False)
    assert not r.faults and r.passed, r.faults[:3]
    x = np.asarray(r.inputs["x"], np.float64)
    m, k, uu = (np.asarray(r.inputs[n]) for n in ("m", "k", "u"))
    assert m.any() and not m.all() and (k < 0).any() and (uu == 0).any()
    want = np.where((x > 0.5) | ~m.astype(bool), x, np.where(k != 0, -x, np.where(uu != 0, 2.0 * x, 0.0)))
    np.testing.assert_array_equal(np.asarray(r.arrays["y"], np.float64), want)
    np.testing.assert_array_equal(np.asarray(r.arrays["z"], np.float64), x * (x > 0.5))

INT_OUT = '''
spec = OpSpec("IntOut", aclnn="aclnnIntOut", socs=(A2, A3))
R, H = spec.dims("R H")
spec.input("x", f32, [R, H])
spec.output("y", i32, [R, H])
spec.output("z", u8, [R, H])


@spec.body
def _(b, x):
    return {"y": (x * 1000.0).cast(i32, "floor"), "z": (x * 100.0).cast(u8, "round")}
'''


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_integer_outputs_are_rounded_and_saturated(tmp_path):
    """int32 and uint8 outputs written by the rows kernel: float -> int32 with the mode (floor), float -> half
    (CAST_ODD) -> uint8 with the mode (round: ties away from zero) saturating at 0 and 255, exactly as float64
    rounding of the fp32 values."""
    from opgen.check import run_check
    from opgen.codegen import write_ops

    path = _spec(tmp_path, "IntOut", INT_OUT)
    write_ops([str(path)], tmp_path / "gen")
    r = run_check(str(path), dims={"R": 5, "H": 70}, gen_dir=tmp_path / "gen", seed=3, progress=False)
    assert not r.faults and r.passed, r.faults[:3]
    x = np.asarray(r.inputs["x"], np.float64)
    y, z = np.asarray(r.arrays["y"]), np.asarray(r.arrays["z"])
    assert y.dtype == np.int32 and z.dtype == np.uint8
    np.testing.assert_array_equal(y, np.floor(np.float32(x * 1000.0)).astype(np.int64))
    v = np.float32(x * 100.0).astype(np.float64)   # the kernel's fp32 product
    # round-to-odd to half, then the mode, equals rounding v directly for |v| < 256 (docs/reference/ascendc.md
    # §1.12); beyond, both saturate: exact equality
    np.testing.assert_array_equal(z, np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5), 0, 255))
    assert (z == 0).any() and (z == 255).any()


_LEAD_SLICES = '''
spec = OpSpec("GluLead", aclnn="aclnnGluLead", socs=(A2, A3), round="rint")
A = spec.dim("A", max=4096)
H = spec.dim("H", max=4096)
W = spec.dim("W", max=65536)
(T,) = spec.dtype_vars("T")
spec.input("x", T, [A, 2 * H, W])
spec.input("w", T, [2 * H, A, W])
spec.output("y", T, [A, H, W])
spec.output("z", f32, [A, H, W])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, x, w):
    a = x.slice(1, 0, H)
    g = x.slice(1, H, 2 * H)
    u = w.slice(0, H, 2 * H).permute(1, 0, 2)
    return {"y": (a / (1.0 + b.exp(-a)) * g).cast(T, "rint"), "z": a * u}
'''


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_windows_of_leading_axes_are_gm_views(tmp_path):
    """Slices of a middle axis (a GLU's halves on dim 1) and of the first axis of a permuted input are GM views
    (a base offset of start * the axis's stride), not copies: every element of x read once, w's used half read
    once; the kernel's outputs equal float64 NumPy for odd sizes, H = 1 and a row of one element. One build."""
    from opgen.check import run_check
    from opgen.codegen import write_ops

    path = _spec(tmp_path, "glu_lead", _LEAD_SLICES)
    write_ops([str(path)], tmp_path / "gen")
    for dims, dt in (({"A": 3, "H": 37, "W": 35}, "f32"), ({"A": 2, "H": 1, "W": 1}, "f32"),
                     ({"A": 5, "H": 19, "W": 33}, "f16")):
        r = run_check(str(path), dims=dims, dtypes={"T": dt}, gen_dir=tmp_path / "gen", seed=dims["H"],
                      progress=False)
        assert not r.faults and r.passed, (dims, r.faults[:3], r.failed_outputs())
        x = np.asarray(r.inputs["x"], dtype=np.float64)
        w = np.asarray(r.inputs["w"], dtype=np.float64)
        H = dims["H"]
        a, g = x[:, :H], x[:, H:]
        z = a * np.transpose(w[H:], (1, 0, 2))
        y = a / (1.0 + np.exp(-a)) * g
        eps = 2.0**-23 if dt == "f32" else 2.0**-10
        got_z = np.asarray(r.arrays["z"], dtype=np.float64)
        assert got_z.shape == z.shape and np.all(np.abs(got_z - z) <= 2.0**-23 * np.abs(z) + 1e-30), dims
        got_y = np.asarray(r.arrays["y"], dtype=np.float64)
        assert got_y.shape == y.shape and np.all(np.abs(got_y - y) <= 8 * eps * (np.abs(y) + 1e-3)), dims
        assert r.gm["x"].read == x.size * (4 if dt == "f32" else 2)
        assert r.gm["w"].read == w.size // 2 * (4 if dt == "f32" else 2)


IOTA_PICK = '''
spec = OpSpec("IotaPick", aclnn="aclnnIotaPick", socs=(A2, A3))
R, H = spec.dims("R H")
spec.input("x", f32, [R, H])
spec.input("t", i32, [R])
spec.output("y", f32, [R, H])
spec.output("z", f32, [R, H])


@spec.body
def _(b, x, t):
    lane = b.iota(H, i32).reshape([1, H])
    k = t.reshape([R, 1])
    return {"y": b.where(lane.eq(k), x, 0.0) + lane.f32(), "z": b.where(lane < k, x, -1.0)}
'''


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_iota_along_the_row_against_a_per_row_index(tmp_path):
    """`b.iota` of the row axis (CreateVecIndex from the chunk's first column) compared with a per-row int32 value:
    a one-hot pick (.eq) and a prefix mask (<), and the lane index as a number; exact against NumPy in COL_SPLIT
    (each core's column slice numbered from its own first column; ROW_SPLIT: the CrossEntropyLoss examples)."""
    rows, h, strategy = 3, 20000, 2
    from opgen.check import run_check
    from opgen.codegen import write_ops

    path = _spec(tmp_path, "IotaPick", IOTA_PICK)
    write_ops([str(path)], tmp_path / "gen")
    rng = np.random.default_rng(rows)
    x = rng.uniform(-2, 2, (rows, h)).astype(np.float32)
    t = rng.integers(0, h, rows).astype(np.int32)
    t[0], t[-1] = 0, h - 1
    r = run_check(str(path), {"x": x, "t": t}, gen_dir=tmp_path / "gen", progress=False)
    assert not r.faults and r.passed, r.faults[:3]
    assert r.tiling_key % 10 == strategy, r.tiling_key
    lane = np.arange(h)[None, :]
    pick = np.where(lane == t[:, None], x, np.float32(0.0))
    np.testing.assert_array_equal(np.asarray(r.arrays["y"]), pick + lane.astype(np.float32))   # one fp32 add
    np.testing.assert_array_equal(np.asarray(r.arrays["z"]), np.where(lane < t[:, None], x, -1.0))


def test_a_dim_that_is_no_extent_of_the_kernel_is_read_as_a_number_from_its_own_field(tmp_path):
    """`x.sum(1) / A` over [A, M, H] rows: A (the batch count) is no extent the layout keeps (rows, a batch's rows,
    the row length); it is a tiling field of its own, read into dimValue0_ in Init (RowProgram.dim_values), and
    renaming the dim changes nothing but the spec. The interpreted kernel equals float64 math."""
    import numpy as np

    from opgen.check import run_check

    text = '''
from opgen.dsl import A2, A3, OpSpec, f32
spec = OpSpec("BatchCount", aclnn="aclnnBatchCount", socs=(A2, A3))
{a}, M, H = spec.dims("{a} M H")
spec.input("x", f32, [{a}, M, H])
spec.output("y", f32, [{a}, H])


@spec.body
def _(b, x):
    return {{"y": x.sum(1, keepdims=False) / {a}}}
'''
    x = np.random.default_rng(3).uniform(-1, 1, (3, 7, 20)).astype(np.float32)
    outs = []
    for a in ("A", "Batches"):
        p = tmp_path / f"bc_{a}.py"
        p.write_text(text.format(a=a))
        r = run_check(str(p), inputs={"x": x}, progress=False, engine="kir")
        assert r.passed and not r.faults, r.faults[:2]
        outs.append(np.asarray(r.arrays["y"]))
    ref = x.astype(np.float64).sum(1) / 3
    assert np.allclose(outs[0], ref, rtol=2.0 ** -20, atol=2.0 ** -22) and np.array_equal(outs[0], outs[1])


def test_a_reshape_merging_leading_axes_before_a_reduction_is_the_same_rows(tmp_path):
    """`x.reshape([N * Prod("Bd"), H])` of an [N, *Bd, H] value merges its leading axes; reduced over the merged
    axis (a column sum kept as [1, H], a mean of every element) it is the reduction over N and Bd
    (opgen.kernel.rowmerge.split_merged_leading): the kernel class equals the one of the spec written with
    [N, Prod("Bd"), H], and the interpreted kernel equals float64 math."""
    import numpy as np

    from opgen.check import run_check
    from opgen.check.kirengine import kernel_classes
    from opgen.kernel import kir

    text = '''
from opgen.dsl import A2, A3, OpSpec, Prod, f32
spec = OpSpec("MergedRows", aclnn="aclnnMergedRows", socs=(A2, A3))
N, H = spec.dims("N H")
Bd = spec.variadic("Bd", max_rank=4)
spec.input("x", f32, [N, Bd, H])
spec.output("colsum", f32, [1, H])
spec.output("mean", f32, [])


@spec.body
def _(b, x):
    m = (x * x).reshape({shape})
    return {{"colsum": m.sum({col}, keepdims=True).reshape([1, H]), "mean": m.mean({every}, keepdims=False)}}
'''
    forms = {"merged": dict(shape='[N * Prod("Bd"), H]', col="0", every="(0, 1)"),
             "split": dict(shape='[N, Prod("Bd"), H]', col="(0, 1)", every="(0, 1, 2)")}
    texts = {}
    x = np.random.default_rng(5).uniform(-1, 1, (3, 4, 2, 19)).astype(np.float32)
    for name, f in forms.items():
        p = tmp_path / f"{name}.py"
        p.write_text(text.format(**f))
        spec = load_spec(str(p))
        texts[name] = [kir.to_text(k).replace(f"{name}.py:", "spec.py:") for k in kernel_classes(spec)]
        r = run_check(str(p), inputs={"x": x}, progress=False, engine="kir")
        assert r.passed and not r.faults, r.faults[:2]
        sq = x.astype(np.float64) ** 2
        assert np.allclose(np.asarray(r.arrays["colsum"]), sq.sum((0, 1, 2)).reshape(1, 19), rtol=2.0 ** -20)
        assert np.allclose(float(r.arrays["mean"]), sq.mean(), rtol=2.0 ** -20)
    assert texts["merged"] == texts["split"]


def test_kernels_reading_different_dims_as_numbers_are_different_classes(tmp_path):
    """Two specialisations whose math divides by different dims (A, B: neither an extent the layout keeps) are
    different kernel classes -- the dims a program reads are part of its text (rowprog.print_program) -- so each
    reads its own tiling field (review: they were one class reading the first one's field)."""
    import numpy as np

    from opgen.check import run_check

    p = tmp_path / "by_dim.py"
    p.write_text('''
from opgen.dsl import A2, A3, OpSpec, f32
spec = OpSpec("ByDim", aclnn="aclnnByDim", socs=(A2, A3))
A, B, M, H = spec.dims("A B M H")
spec.input("x", f32, [A, B, M, H])
spec.attr("by", int, 0, choices=(0, 1), static=True)
spec.output("y", f32, [A, B, H])


@spec.body
def _(b, x, by):
    return {"y": x.sum(2, keepdims=False) / (A if by == 0 else B)}
''')
    x = np.random.default_rng(4).uniform(-1, 1, (3, 5, 2, 24)).astype(np.float32)
    for by, div in ((0, 3), (1, 5)):
        r = run_check(str(p), inputs={"x": x}, attrs={"by": by}, progress=False, engine="kir")
        assert r.passed and not r.faults, r.faults[:2]
        assert np.allclose(np.asarray(r.arrays["y"]), x.astype(np.float64).sum(2) / div, rtol=2.0 ** -20), by


I16_I64 = '''
from opgen.dsl import A2, A3, OpSpec, f32, i16, i64
spec = OpSpec("ScaleRound", aclnn="aclnnScaleRound", socs=(A2, A3), round="rint")
N, H = spec.dims("N H")
spec.input("x", i64, [N, H])
spec.input("w", i16, [H])
spec.attr("scale", float, 0.5)
spec.output("y", i16, [N, H])
spec.output("z", i64, [N, H])


@spec.body
def _(b, x, w, scale):
    v = x.cast(f32) * scale + w.cast(f32)
    return {"y": v.cast(i16, "floor"), "z": v.cast(i64, "round")}
'''


@pytest.mark.parametrize("engine", ["kir", pytest.param("emu", marks=pytest.mark.slow)])
def test_int16_and_int64_tensors_in_and_out(tmp_path, engine):
    """i64 and i16 inputs and outputs of a rows kernel: int64 -> fp32 rounded once to nearest even (A2 / A3 convert
    it with a rounding mode only: CastFrom with CAST_RINT), int16 -> fp32 exact, fp32 -> int16 with floor and
    saturation, fp32 -> int64 with round (ties away); values past 2^24, 2^53 and int16's range, against integer
    arithmetic written here."""
    from opgen.check import run_check

    p = tmp_path / "scale_round.py"
    p.write_text(I16_I64)
    rng = np.random.default_rng(11)
    x = np.concatenate([rng.integers(-2**62, 2**62, 40), rng.integers(-2**30, 2**30, 40),
                        rng.integers(-70000, 70000, 40), [2**53 + 1, -(2**53 + 3), 2**24 + 1, 3, -3, 2**63 - 1,
                                                          -2**63, 65535, -65536, 70001]]).astype(np.int64)[:130]
    x = x.reshape(5, 26)
    w = rng.integers(-2**15, 2**15, 26).astype(np.int16)
    if engine == "emu":
        from opgen.codegen import write_ops

        write_ops([str(p)], str(tmp_path / "gen"))
    r = run_check(str(p), inputs={"x": x, "w": w}, attrs={"scale": 0.5}, progress=False, engine=engine,
                  gen_dir=tmp_path / "gen" if engine == "emu" else None)
    assert r.passed and not r.faults, (r.faults[:2], {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    from test_casts import _int_rounded_to_f32   # int -> f32 by integer arithmetic (tests/test_casts.py)

    v = np.array([[np.float32(np.float32(_int_rounded_to_f32(int(a), "rint")) * np.float32(0.5)) + np.float32(b)
                   for a, b in zip(row, w)] for row in x], dtype=np.float32)
    y = np.clip(np.floor(v.astype(np.float64)), -2**15, 2**15 - 1).astype(np.int16)
    z = np.array([[int(np.sign(t) * np.floor(abs(float(t)) + 0.5)) for t in row] for row in v], dtype=np.int64)
    assert np.array_equal(np.asarray(r.arrays["y"]), y) and np.asarray(r.arrays["y"]).dtype == np.int16
    assert np.array_equal(np.asarray(r.arrays["z"]), z) and np.asarray(r.arrays["z"]).dtype == np.int64


_BIASED_RMS = '''
from opgen.dsl import A2, A3, OpSpec, f16, f32

spec = OpSpec("BiasedRms", aclnn="aclnnBiasedRms", socs=(A2, A3), round="rint", doc="t", source="t")
Bd = spec.variadic("Bd", max_rank=3)
H = spec.dim("H", max=65536)
(T,) = spec.dtype_vars("T")
spec.input("x1", T, [Bd, H])
spec.input("x2", T, [Bd, H])
spec.input("gamma", T, [H])
spec.input("bias", T, [H], optional=True)
spec.output("y", T, [Bd, H])
spec.output("rstd", f32, [Bd, 1])
spec.output("x", T, [Bd, H])
spec.dtypes((T,), [(f32,), (f16,)])


@spec.body
def _(b, x1, x2, gamma, bias):
    x = x1 + x2
    if bias is not None:
        x = x - (x * bias).mean(-1)   # a row reduction only this presence has, before the one both have
    rstd = b.rsqrt((x * x).mean(-1) + 1e-6)
    return {"y": x * rstd * gamma, "rstd": rstd, "x": x}
'''


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("engine", ["emu", "kir"])
def test_an_optional_input_before_every_reduction_in_one_class(tmp_path, engine):
    """An optional input that adds a row reduction of its own before the one both presences have (x - mean(x *
    bias)): one class serves both presences (opgen.kernel.rowpresence), the guarded row sums read back per row in the
    many-rows-per-instruction ROW_SPLIT (a new user's AddRmsNorm with a bias read a guarded sum's rv_ slot outside
    its guard there: unwritten under the other presence) and exchanged in COL_SPLIT; outputs against float64 NumPy
    on both engines."""
    from opgen.check import run_check
    from opgen.codegen import write_ops

    path = _spec(tmp_path, "biased_rms", _BIASED_RMS)
    if engine == "emu":   # the Kernel-IR engine needs no package
        write_ops([str(path)], tmp_path / "gen")
        assert len(re.findall(r"^class \w+ \{", (tmp_path / "gen/biased_rms/op_kernel/biased_rms.h").read_text(),
                              re.M)) == 1
    for present, (bd, h, strategy) in ((p, s) for p in (["bias"], []) for s in ((3, 40, 1), (2, 20000, 2))):
        r = run_check(str(path), dims={"Bd": (bd,), "H": h}, dtypes={"T": "float32"}, present=present,
                      gen_dir=tmp_path / "gen" if engine == "emu" else None, seed=h, progress=False, engine=engine)
        assert not r.faults and r.passed and r.tiling_key % 10 == strategy, (present, h, r.faults[:2])
        a = {k: np.asarray(v, np.float64) for k, v in r.inputs.items()}
        x = a["x1"] + a["x2"]
        x = x - (x * a["bias"]).mean(-1, keepdims=True) if present else x
        rstd = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
        for name, ref in (("y", x * rstd * a["gamma"]), ("rstd", rstd), ("x", x)):
            got = np.asarray(r.arrays[name], np.float64).reshape(ref.shape)
            assert np.all(np.abs(got - ref) <= 2.0**-20 * (np.abs(ref) + np.abs(ref).max())), (present, h, name)
