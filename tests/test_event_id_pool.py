"""Rows kernels keep their queues within the TPipe's pool of 8 event ids per HardEvent (docs/design.md "Event ids of
the queues"; kir.check_event_ids, a rule of kir.verify).

Per-row statistic outputs of one element type share one VECOUT queue (opgen.kernel.rowsched.StatOutGroup,
opgen.kernel.headsched `_stat_out_queues`; docs/design.md "Event ids of the queues"): a freed VECOUT buffer holds one
HardEvent::MTE3_V id of the TPipe's pool of 8 until its next AllocTensor, and after a core's passes every buffer of
every queue has been freed. A norm forward returning two row outputs (y, the residual sum x) and three per-row
statistics (mean, rstd, var) held 2 * 2 + 3 * 2 = 10 such ids with a queue per statistic: both engines faulted
('all 8 ids of HardEvent::MTE3_V are held') once a core ran two passes. With one queue for the three: 2 * 2 + 2 = 6
(two more statistics of T here share a second queue: 8).

A `chunkable` program's ColSplit (COL_SPLIT, ROW_CHUNK) prefetches its items through two buffers per row input
(resQue_<operand>) only where those hold at most 8 V_MTE2 ids (opgen.kernel.rowcounts.chunk_prefetch): five [B, H]
inputs held 10 and faulted; they now take one buffer each, copied per item. ROW_SPLIT's row queues likewise take
one buffer each where two would pass the pool (rowcounts.row_pool_bound; the kernel allocates one only, so the
verifier's count agrees). Values against float64 NumPy written here."""

from __future__ import annotations

import shutil

import ml_dtypes
import numpy as np
import pytest

from opgen.check import run_check

SPEC = '''
from opgen.dsl import A2, OpSpec, bf16, f16, f32

spec = OpSpec("ThreeStats", aclnn="aclnnThreeStats", socs=(A2,), round="rint")
Bd = spec.variadic("Bd", max_rank=3)
H = spec.dim("H", max=32768)
(T,) = spec.dtype_vars("T")
spec.input("x1", T, [Bd, H])
spec.input("x2", T, [Bd, H])
spec.input("gamma", T, [H])
spec.attr("epsilon", float, 1e-5)
spec.output("y", T, [Bd, H])
spec.output("x", T, [Bd, H])
spec.output("mean", f32, [Bd])
spec.output("rstd", f32, [Bd])
spec.output("var", f32, [Bd])
spec.output("amax", T, [Bd])
spec.output("xmax", T, [Bd])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, x1, x2, gamma, epsilon):
    x = x1.f32() + x2.f32()
    mean = x.mean(-1)
    d = x - mean
    var = (d * d).mean(-1)
    rstd = b.rsqrt(var + epsilon)
    return {"y": (d * rstd * gamma.f32()).cast(T, "rint"), "x": x.cast(T, "rint"),
            "mean": mean.reshape([Bd]), "rstd": rstd.reshape([Bd]), "var": var.reshape([Bd]),
            "amax": b.cast(b.abs(x).max(-1).reshape([Bd]), T, round="rint"),
            "xmax": b.cast(x.max(-1).reshape([Bd]), T, round="rint")}
'''

NP = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
TOL = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1.6e-2}   # a rounding of T, relative


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("threestats") / "three_stats.py"
    p.write_text(SPEC)
    return p


def _check(spec_path, shape, dt, **kw):
    """run_check on random inputs; every output against float64 NumPy."""
    rng = np.random.default_rng(shape[0])
    x1, x2 = (rng.uniform(-2, 2, shape).astype(NP[dt]) for _ in range(2))
    g = rng.uniform(-2, 2, shape[-1:]).astype(NP[dt])
    r = run_check(str(spec_path), inputs={"x1": x1, "x2": x2, "gamma": g}, attrs={"epsilon": 1e-5}, dtypes={"T": dt},
                  progress=False, **kw)
    assert not r.faults and r.passed, r.faults[:1]
    x = np.asarray(x1, np.float64) + np.asarray(x2, np.float64)
    mean = x.mean(-1)
    var = ((x - mean[..., None]) ** 2).mean(-1)
    rstd = 1.0 / np.sqrt(var + 1e-5)
    y = (x - mean[..., None]) * rstd[..., None] * np.asarray(g, np.float64)
    got = {k: np.asarray(r.arrays[k], np.float64) for k in ("y", "x", "mean", "rstd", "var", "amax", "xmax")}
    tol = TOL[dt]
    np.testing.assert_allclose(got["x"], x, rtol=tol, atol=0)
    np.testing.assert_allclose(got["y"], y, rtol=tol, atol=tol * np.abs(y).max())
    np.testing.assert_allclose(got["mean"], mean, rtol=0, atol=2e-5)
    np.testing.assert_allclose(got["var"], var, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got["rstd"], rstd, rtol=1e-4)
    np.testing.assert_allclose(got["amax"], np.abs(x).max(-1), rtol=tol)
    np.testing.assert_allclose(got["xmax"], x.max(-1), rtol=tol)
    return r


def test_the_statistics_of_one_type_share_a_queue(spec_path):
    """The statistics' queues hold 2 (fp32, shared) + 2 (amax and xmax, T: shared, each at its 32-B aligned offset)
    MTE3_V ids beside the row outputs' 2 * 2 (five queues of their own: 14)."""
    from opgen.check.kirengine import kernel_classes
    from opgen.kernel import kir
    from opgen.registry import load_spec

    for k in kernel_classes(load_spec(str(spec_path))):
        n, qs = kir.queue_event_buffers(k)["MTE3_V"]
        assert n == 8 and "statOutQue0_mean_rstd_var (2)" in qs and "statOutQue1_amax_xmax (2)" in qs, (n, qs)


def test_a_shared_queue_name_is_no_outputs_own(tmp_path):
    """Statistic outputs mean and rstd (fp32) share a queue beside an fp16 statistic output named mean_rstd, whose
    own queue is statOutQue_mean_rstd: the shared one is statOutQue0_mean_rstd (rowsched.stat_out_groups), and the
    class is well formed (the two names were one local buffer: kir.verify refused the class)."""
    from opgen.check.kirengine import kernel_classes
    from opgen.registry import load_spec

    p = tmp_path / "stat_names.py"
    p.write_text('''
from opgen.dsl import A2, OpSpec, f16, f32

spec = OpSpec("StatNames", aclnn="aclnnStatNames", socs=(A2,), round="rint")
R = spec.dim("R", max=4096)
H = spec.dim("H", max=8192)
spec.input("x", f32, [R, H])
spec.output("y", f32, [R, H])
spec.output("mean", f32, [R])
spec.output("rstd", f32, [R])
spec.output("mean_rstd", f16, [R])


@spec.body
def _(b, x):
    mean = x.mean(-1)
    d = x - mean
    rstd = b.rsqrt((d * d).mean(-1) + 1e-5)
    return {"y": d * rstd, "mean": mean.reshape([R]), "rstd": rstd.reshape([R]),
            "mean_rstd": (mean * rstd).reshape([R]).cast(f16, "rint")}
''')
    for k in kernel_classes(load_spec(str(p))):
        names = [b.name for b in k.locals if b.name.startswith("statOutQue")]
        assert sorted(names) == ["statOutQue0_mean_rstd", "statOutQue_mean_rstd"], names


@pytest.mark.parametrize("shape, dt, strategy", [
    ((144, 2048), "float32", 1), ((97, 1000), "float16", 1), ((5, 3, 4100), "bfloat16", None),
    ((3, 5000), "float32", 4), ((12, 9000), "float32", 2)])
def test_several_statistic_outputs_over_several_passes_kernel_ir(spec_path, shape, dt, strategy):
    """ROW_SPLIT with cores of several passes (144 rows, 97 rows), rows not a multiple of a block, ROW_CHUNK (3
    rows of 5000) and COL_SPLIT (12 rows of 9000: the statistics written by core 0 once a group of rows). The
    strategy is the tiling key's last digit (opgen.tiling.rowkernel `_tiling_key`)."""
    r = _check(spec_path, shape, dt, engine="kir")
    assert strategy is None or r.tiling_key % 10 == strategy, r.tiling_key


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_several_statistic_outputs_emulated(spec_path, tmp_path):
    from opgen.codegen import write_ops

    write_ops([str(spec_path)], tmp_path)
    _check(spec_path, (144, 2048), "float16", gen_dir=tmp_path)


FIVE = """
from opgen.dsl import A2, OpSpec, f32

spec = OpSpec("FiveRows", aclnn="aclnnFiveRows", socs=(A2,))
B = spec.variadic("B", max_rank=3)
H = spec.dim("H", max=65536)
(U,) = spec.dtype_vars("U")
for _n in ("a", "b", "c", "d", "e"):
    spec.input(_n, U, [B, H])
spec.output("y", U, [B, H])
spec.dtypes((U,), [(f32,)])


@spec.body
def _(bb, a, b, c, d, e):
    return {"y": a * b + c * d - e}
"""


@pytest.fixture(scope="module")
def five_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("fiverows") / "five_rows.py"
    p.write_text(FIVE)
    return p


def _check_five(five_path, shape, **kw):
    rng = np.random.default_rng(shape[-1])
    inp = {n: rng.standard_normal(shape).astype(np.float32) for n in "abcde"}
    r = run_check(str(five_path), inputs=inp, dtypes={"U": "float32"}, progress=False, **kw)
    assert not r.faults and r.passed, r.faults[:1]
    a, b, c, d, e = (inp[n].astype(np.float64) for n in "abcde")
    np.testing.assert_allclose(np.asarray(r.arrays["y"], np.float64), a * b + c * d - e, rtol=0, atol=2e-6 * 16)
    return r


def test_five_row_inputs_stay_within_the_pool(five_path):
    """No class of the five-input spec holds more than 8 ids of any HardEvent: ColSplit's row inputs are not
    prefetched (no resQue_), ROW_SPLIT's row queues take one buffer each (5 + 0 V_MTE2 ids)."""
    from opgen.check.kirengine import kernel_classes
    from opgen.kernel import kir
    from opgen.registry import load_spec

    for k in kernel_classes(load_spec(str(five_path))):
        ids = kir.queue_event_buffers(k)
        n, qs = ids["V_MTE2"]
        assert n == 5 and not any(q.startswith("resQue_") for q in qs), (n, qs)


@pytest.mark.parametrize("shape", [(96, 10000), (500, 40)])
def test_five_row_inputs_kernel_ir(five_path, shape):
    """Cores of several items (96 rows of 10000: the tiling's COL_SPLIT, faulted on V_MTE2 before) and many short
    rows."""
    _check_five(five_path, shape, engine="kir")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_five_row_inputs_emulated(five_path, tmp_path):
    from opgen.codegen import write_ops

    write_ops([str(five_path)], tmp_path)
    _check_five(five_path, (96, 10000), gen_dir=tmp_path)


HEAD_FIVE = '''
from opgen.dsl import A2, OpSpec, f32

spec = OpSpec("HeadFive", aclnn="aclnnHeadFive", socs=(A2,))
B, S1, S2, N = spec.dims("B S1 S2 N")
D = spec.dim("D", max=1024)
(U,) = spec.dtype_vars("U")
for _n in ("a", "b", "c", "d", "e"):
    spec.input(_n, U, [B, S1, N, D])
spec.input("f", U, [B, S2, N, D])
spec.output("y", U, [B, S1 + S2, N, D])
spec.dtypes((U,), [(f32,)])


@spec.body
def _(bb, a, b, c, d, e, f):
    return {"y": bb.concat([a * b + c * d - e, f], 1)}
'''


@pytest.fixture(scope="module")
def head_five_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("headfive") / "head_five.py"
    p.write_text(HEAD_FIVE)
    return p


def _check_head_five(path, **kw):
    """B 2, S1 150, S2 7, N 2, D 1000: 628 head rows over 48 cores, several passes of rowsPerPass rows per core (the
    freed buffers of one pass hold their ids while the next allocates); y = concat(a b + c d - e, f) in float64."""
    rng = np.random.default_rng(5)
    inp = {n: rng.standard_normal((2, 150, 2, 1000)).astype(np.float32) for n in "abcde"}
    inp["f"] = rng.standard_normal((2, 7, 2, 1000)).astype(np.float32)
    r = run_check(str(path), inputs=inp, dtypes={"U": "float32"}, progress=False, **kw)
    assert not r.faults and r.passed, r.faults[:1]
    a, b, c, d, e, f = (inp[n].astype(np.float64) for n in "abcdef")
    np.testing.assert_allclose(np.asarray(r.arrays["y"], np.float64), np.concatenate([a * b + c * d - e, f], 1),
                               rtol=0, atol=2e-6 * 16)
    return r


def test_head_rows_of_five_inputs_take_one_buffer_per_input_queue(head_five_path):
    """A head-rows part reading five row inputs: two buffers per inQue<j>_ would hold 10 V_MTE2 ids (the verifier
    refused the class: 'more than the TPipe's pool of 8'); each takes one (opgen.kernel.headsched.row_queue_bufs),
    the output queue keeps two, and the tiling's plan counts the same buffers."""
    from opgen.check.kirengine import kernel_classes
    from opgen.kernel import kir
    from opgen.registry import load_spec
    from opgen.tiling.pipeline import kernel_build

    spec = load_spec(str(head_five_path))
    (k,) = kernel_classes(spec)
    ids = kir.queue_event_buffers(k)
    assert ids["V_MTE2"][0] == 5 and ids["MTE3_V"][0] == 2, ids
    plan = {b.name: b.num for p in kernel_build(spec).tiling.plans.values() for b in p}
    assert plan["inQue"] == 5 and plan["outQue"] == 2, plan
    _check_head_five(head_five_path, engine="kir")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_head_rows_of_five_inputs_emulated(head_five_path, tmp_path):
    from opgen.codegen import write_ops

    write_ops([str(head_five_path)], tmp_path)
    _check_head_five(head_five_path, gen_dir=tmp_path)
