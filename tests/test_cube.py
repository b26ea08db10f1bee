"""The cube family (opgen.kernel.cube) and the Kernel IR cube nodes: matching by structure (renamed specs behave
the same; epilogues not lowered yet are refused with the rule), the verifier's operand rules for Nd2Nz / LoadData /
Mmad / Fixpipe, the printed AscendC calls, and the tiling: every output block owned by exactly one AI Core and the
L1 / L0 tiles within the platform sizes of docs/reference/ascendc.md §1.2 (512 KB L1, 64 KB L0A / L0B, 128 KB
L0C) for shapes the spec allows. The emulated kernel against float64 NumPy: tests/test_examples.py (mat_mul)."""

from __future__ import annotations

from dataclasses import replace

import math

import numpy as np
import re
import shutil
import textwrap
from pathlib import Path

import pytest

from opgen.ir.dims import Constraint, Lit, Sym
from opgen.kernel import kir as K
from opgen.kernel.cube import FIELDS, FLAG_PART
from opgen.kernel.family import NoKernel
from opgen.kernel.isa import Pipe
from opgen.tiling.pipeline import kernel_build
from opgen.registry import load_spec

SPEC = """
from opgen.dsl import A2, OpSpec, bf16, f16, f32
spec = OpSpec("{op}", aclnn="aclnn{op}", socs=(A2,), round="rint")
{m} = spec.dim("{m}", max=4096)
{k} = spec.dim("{k}", max=4096)
{n} = spec.dim("{n}", max=4096)
(U,) = spec.dtype_vars("U")
spec.input("{a}", U, [{m}, {k}])
spec.input("{b}", U, [{k}, {n}])
spec.output("{c}", U, [{m}, {n}])
spec.dtypes((U,), [(f16,), (bf16,)])
spec.example_call({{"{m}": 5, "{k}": 7, "{n}": 9}})


@spec.body
def _(bb, {a}, {b}):
    return {{"{c}": {body}}}
"""


def _spec(tmp_path, body="bb.matmul({a}, {b}).cast(U, 'rint')", **names):
    d = dict(op="Gemm", m="M", k="K", n="N", a="x", b="w", c="y")
    d.update(names)
    d["body"] = body.format(**d)
    p = tmp_path / f"{d['op'].lower()}.py"
    p.write_text(textwrap.dedent(SPEC.format(**d)))
    return load_spec(str(p))


def test_renamed_spec_gets_the_same_kernel(tmp_path):
    u1 = kernel_build(_spec(tmp_path))
    u2 = kernel_build(_spec(tmp_path, op="Other", m="Rows", k="Red", n="Cols", a="lhs", b="rhs", c="res"))
    assert u1.family.name == u2.family.name == "cube"
    t1 = K.to_text(next(iter(u1.lowered.programs.values())))
    t2 = K.to_text(next(iter(u2.lowered.programs.values())))
    norm = {"GemmCubeKernel": "X", "OtherCubeKernel": "X", "GemmTilingData": "S", "OtherTilingData": "S", "x": "A", "lhs": "A", "w": "B", "rhs": "B", "y": "C", "res": "C",
            "gemm": "F", "other": "F"}   # the spec file's name in the `// spec:` traces
    def canon(t):
        return re.sub(r"\b(\w+)\b", lambda m: norm.get(m.group(1), m.group(1)), t)

    assert canon(t1) == canon(t2)
    lay = u2.layout
    assert (lay.a, lay.b, lay.out, lay.dims) == ("lhs", "rhs", "res", ("Rows", "Red", "Cols"))


def test_renamed_spec_with_an_epilogue_gets_the_same_kernel(tmp_path):
    body = "bb.silu(bb.matmul({a}, {b}) * 0.5 - 1.0).cast(U, 'rint')"
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    u1 = kernel_build(_spec(tmp_path / "one", body=body))
    u2 = kernel_build(_spec(tmp_path / "two", body=body, op="Other", m="Rows", k="Red", n="Cols", a="lhs", b="rhs",
                            c="res"))
    norm = {"GemmCubeKernel": "X", "OtherCubeKernel": "X", "GemmTilingData": "S", "OtherTilingData": "S", "x": "A",
            "lhs": "A", "w": "B", "rhs": "B", "y": "C", "res": "C", "gemm": "F", "other": "F"}
    t1, t2 = (re.sub(r"\b(\w+)\b", lambda m: norm.get(m.group(1), m.group(1)),
                     K.to_text(next(iter(u.lowered.programs.values())))) for u in (u1, u2))
    assert t1 == t2 and "cross_wait" in t1


def test_a_reduction_in_the_epilogue_is_refused_in_the_users_terms(tmp_path):
    """A reduction over M (the epilogue reduces rows over N only: tests/test_cube_row_reduce.py)."""
    spec = _spec(tmp_path, body="(lambda t: t - t.sum(0))(bb.matmul({a}, {b})).cast(U, 'rint')")
    with pytest.raises(NoKernel) as e:
        kernel_build(spec)
    msg = str(e.value)
    cube = msg.split(" [cube family]")[0]   # the family that got furthest speaks first (the epilogue's reduction)
    assert "a reduction (sum over M) in the matmul's epilogue" in cube and "[attention family]" not in cube \
        and "\n" not in msg


def test_a_matmul_operand_read_again_in_the_epilogue_is_refused(tmp_path):
    spec = _spec(tmp_path, body="(bb.matmul({a}, {b}) + bb.exp({a}.cast(f32)).sum(-1)).cast(U, 'rint')")
    with pytest.raises(NoKernel) as e:
        kernel_build(spec)
    assert "a matmul operand (%v1) read again in the matmul's epilogue" in str(e.value)


@pytest.mark.parametrize("body, words", [
    # a reshape around a permute: an operand computed in the kernel (a permute of the input alone is a GM view,
    # tests/test_transpose_batch_mat_mul.py)
    ("bb.matmul({a}.reshape([1, M, K]).permute(1, 0, 2).reshape([M, K]), {b}).cast(U, 'rint')",
     "the left operand is a reshape (%v"),
    ("bb.matmul({a}.f32(), {b} * 2.0).cast(U, 'rint')", "the right operand is a mul (%v"),
])
def test_an_operand_computed_in_the_kernel_is_refused_naming_its_op_and_line(tmp_path, body, words):
    # the cube family reads its operands from GM as inputs lay them out: the refusal names the operand, the op that
    # computes it and that op's spec line (was "the matmul operands are not (casts of) two distinct inputs")
    spec = _spec(tmp_path, body=body)
    with pytest.raises(NoKernel) as e:
        kernel_build(spec)
    cube = str(e.value).split(" [cube family]")[0]
    assert words in cube and "gemm.py:17)" in cube and "not an input" in cube, cube


def test_an_elementwise_epilogue_is_lowered_on_the_aivs(tmp_path):
    u = kernel_build(_spec(tmp_path, body="bb.silu(bb.matmul({a}, {b}) * 0.5 + 1.0).cast(U, 'rint')"))
    assert u.family.name == "cube" and u.family.entry_kernel_type(u.lowered) == "KERNEL_TYPE_MIX_AIC_1_2"
    assert [st[0] for st in u.layout.steps][0] == "acc" and u.layout.steps[-1] == ("store", u.layout.steps[-2][1],
                                                                                 "CAST_RINT")
    k = next(iter(u.lowered.programs.values()))
    units = [s.unit for s in k.process if isinstance(s, K.CoreIf)]
    assert units == ["cube", "vector"]
    # two slots: the AIC waits for a slot's free flag (ids 2, 3) and raises its ready flag (ids 0, 1); the AIVs
    # the other way round
    cube, vec = (s for s in k.process if isinstance(s, K.CoreIf))
    sets = lambda body: sorted({s.id for s in K.walk(body) if isinstance(s, K.CrossCoreSetFlag)})  # noqa: E731
    waits = lambda body: sorted({s.id for s in K.walk(body) if isinstance(s, K.CrossCoreWaitFlag)})  # noqa: E731
    # and the K split's FLAG_PART (id 4): the AIC's partials are written, once per launch
    assert (sets(cube.body), waits(cube.body), sets(vec.body), waits(vec.body)) == ([0, 1, 4], [2, 3], [2, 3],
                                                                                     [0, 1, 4])
    assert "CrossCoreSetFlag<2, PIPE_FIX>(0);" in K.to_cpp(k) and "GetSubBlockIdx()" in K.to_cpp(k)
    # the plain GEMM is mixed too: its AIVs reduce a K split's partials (and have no work without one)
    (tmp_path / "plain").mkdir()
    u0 = kernel_build(_spec(tmp_path / "plain"))
    assert u0.family.entry_kernel_type(u0.lowered) == "KERNEL_TYPE_MIX_AIC_1_2" and not u0.layout.steps


TRANS = SPEC.replace("[{m}, {k}])\nspec.input", "[{k}, {m}])\nspec.input").replace("[{k}, {n}])\nspec.output",
                                                                                  "[{n}, {k}])\nspec.output")


def _trans_spec(tmp_path):
    d = dict(op="GemmT", m="M", k="K", n="N", a="x", b="w", c="y",
             body="bb.matmul(x, w, transpose_a=True, transpose_b=True).cast(U, 'rint')")
    p = tmp_path / "gemmt.py"
    p.write_text(textwrap.dedent(TRANS.format(**d)))
    return load_spec(str(p))


def test_transposed_operands_are_layouts_not_copies(tmp_path):
    u = kernel_build(_trans_spec(tmp_path))
    lay = u.layout
    assert (lay.trans_a, lay.trans_b, lay.dims) == (True, True, ("M", "K", "N"))
    k = next(iter(u.lowered.programs.values()))
    loads = [s for s in K.walk(k.process) if isinstance(s, K.LoadData)]
    # Aᵀ: transposing loads (a fractal row of the chunk each); Bᵀ is B's ZN layout already: one plain load
    # (twice: the K split's units and the plain blocks run the same panel loop)
    assert [(s.dst.tensor, s.transpose) for s in loads] == [("a2", True), ("b2", False)] * 2
    copies = [s for s in K.walk(k.process) if isinstance(s, K.Nd2Nz)]
    # the stored layouts copied as they are: Aᵀ panel [ktA, mt] of row pitch M (A's panels baseKL1A deep), Bᵀ panel
    # [nt, kt1] of pitch K
    assert [(c.rows, c.cols, c.src_pitch) for c in copies] == [(Sym("ktA"), Sym("mt"), Sym("M")),
                                                               (Sym("nt"), Sym("kt1"), Sym("K"))] * 2


@pytest.mark.slow
def test_transposed_gemm_emulated_matches_float64(tmp_path):
    import numpy as np

    from opgen.check import run_check
    from opgen.codegen import write_ops

    spec = _trans_spec(tmp_path)
    out = tmp_path / "gen"
    write_ops([spec.file], out)
    r = run_check(spec.file, dims={"M": 150, "K": 70, "N": 33}, dtypes={"U": "bfloat16"}, gen_dir=out, seed=3,
                  progress=False)
    assert not r.faults and r.passed
    x, w = (np.asarray(r.inputs[n], dtype=np.float64) for n in ("x", "w"))
    ref = x.T @ w.T
    got = np.asarray(r.arrays["y"], dtype=np.float64)
    bound = (2.0**-8 * 4 + 2.0**-24 * 4 * 70) * (np.abs(ref) + np.abs(ref).mean())
    assert got.shape == ref.shape and np.all(np.abs(got - ref) <= bound)


def _cls(process, locals_=None):
    locs = locals_ or (K.Local("l1", K.TPos.A1), K.Local("l0a", K.TPos.A2), K.Local("l0b", K.TPos.B2),
                       K.Local("l0c", K.TPos.CO1), K.Local("ub", K.TPos.VECCALC))
    return K.KernelClass("C", "S", args=("a", "c"), gms=(K.GmTensor("aGm", "half", "a"), K.GmTensor("cGm", "half", "c")),
                         locals=locs, process=process)


def _gets():
    return (K.InitBuffer("l1", Lit(8192)), K.InitBuffer("l0a", Lit(8192)), K.InitBuffer("l0b", Lit(8192)),
            K.InitBuffer("l0c", Lit(16384)), K.InitBuffer("ub", Lit(1024)),
            K.Get("a1", "l1", "half"), K.Get("a2", "l0a", "half"), K.Get("b2", "l0b", "half"),
            K.Get("c1", "l0c", "float"), K.Get("u", "ub", "half"))


def _mm(a="a2", b="b2", c="c1"):
    return K.Mmad(K.Ref(c), K.Ref(a), K.Ref(b), Lit(16), Lit(16), Lit(16), (Constraint("==", Lit(0), Lit(0)),))


def test_verifier_accepts_the_cube_path_and_prints_the_ascendc_calls():
    body = _gets() + (
        K.Nd2Nz(K.Ref("a1"), K.GmView("aGm", Lit(0)), Lit(16), Lit(16), Lit(16), Lit(16)),
        K.SetFlag(Pipe.MTE2, Pipe.MTE1), K.WaitFlag(Pipe.MTE2, Pipe.MTE1),
        K.LoadData(K.Ref("a2"), K.Ref("a1"), Lit(0), Lit(1), Lit(1)),
        K.LoadData(K.Ref("b2"), K.Ref("a1"), Lit(0), Lit(1), Lit(1), True),
        K.SetFlag(Pipe.MTE1, Pipe.M), K.WaitFlag(Pipe.MTE1, Pipe.M),
        _mm(),
        K.SetFlag(Pipe.M, Pipe.FIX), K.WaitFlag(Pipe.M, Pipe.FIX),
        K.Fixpipe(K.GmView("cGm", Lit(0)), K.Ref("c1"), Lit(16), Lit(16), Lit(16), Lit(16)),
    )
    cpp = K.to_cpp(_cls((K.CoreIf("cube", body),)))
    assert "if ASCEND_IS_AIC {" in cpp
    assert "DataCopy(a1, aGm, Nd2NzParams(1, 16, 16, 0, 16, 16, 1, 0));" in cpp
    assert "LoadData(b2, a1, LoadData2DParams(0, 1, 1, 0, 0, true, 0));" in cpp
    assert "Mmad(c1, a2, b2, MmadParams(16, 16, 16, 0, false, 0 == 0));" in cpp
    assert ("Fixpipe<half, float, CFG_ROW_MAJOR>(cGm, c1, FixpipeParamsV220(16, 16, 16, 16, false, "
            "QuantMode_t::F322F16, 0, 1, 0, 0, 0));") in cpp
    text = K.to_text(_cls((K.CoreIf("cube", body),)))
    assert "on cube {" in text and "m.Mmad c1[0] <- a2[0] x b2[0]" in text and "fix.Fixpipe" in text


@pytest.mark.parametrize("stmt, rule", [
    (_mm(a="b2", b="a2"), "b2 lies in B2, not in A2"),               # operands swapped
    (_mm(c="u"), "u lies in VECCALC, not in CO1"),                    # result in UB
    (K.LoadData(K.Ref("a2"), K.Ref("u"), Lit(0), Lit(1), Lit(1)), "u lies in VECCALC, not in A1 / B1"),
    (K.Fixpipe(K.GmView("cGm", Lit(0)), K.Ref("a2"), Lit(16), Lit(16), Lit(16), Lit(16)), "a2 lies in A2, not in CO1"),
    (K.Mmad(K.Ref("c1"), K.Ref("a2"), K.Ref("b2"), Lit(4096), Lit(16), Lit(16)), "outside [0, 4095]"),
    (K.LoadData(K.Ref("a2"), K.Ref("a1"), Lit(0), Lit(256), Lit(1)), "outside [0, 255]"),
])
def test_verifier_refuses_cube_operands_in_the_wrong_memory_or_out_of_range(stmt, rule):
    with pytest.raises(K.IRError, match=rule.replace("[", r"\[").replace("]", r"\]")):
        K.verify(_cls((K.CoreIf("cube", _gets() + (stmt,)),)))


def test_cube_instructions_run_only_on_the_cube_core():
    with pytest.raises(K.IRError, match="outside a cube-core branch"):
        K.verify(_cls(_gets() + (_mm(),)))
    with pytest.raises(K.IRError, match="outside a cube-core branch"):
        K.verify(_cls((K.CoreIf("vector", _gets() + (_mm(),)),)))


def test_cross_core_flags_print_as_ascendc_and_keep_to_the_device_rules():
    """CrossCoreSetFlag<mode, pipe>(id) / CrossCoreWaitFlag(id) (docs/reference/ascendc.md §1.6; the emulation's
    rules in opgen/emu/include/emu/mix.h): ids 0..10, not on PIPE_S / PIPE_ALL or a pipe the core kind lacks, mode 1
    on the AIVs only, only inside a core branch."""
    ok = (K.CoreIf("cube", (K.CrossCoreSetFlag(2, Pipe.FIX, 0), K.CrossCoreWaitFlag(2))),
          K.CoreIf("vector", (K.CrossCoreWaitFlag(0), K.CrossCoreSetFlag(2, Pipe.MTE2, 2))))
    cpp = K.to_cpp(_cls(ok))
    assert "CrossCoreSetFlag<2, PIPE_FIX>(0);" in cpp and "CrossCoreWaitFlag(2);" in cpp \
        and "CrossCoreSetFlag<2, PIPE_MTE2>(2);" in cpp
    assert "cross_set mode=2 FIX #0" in K.to_text(_cls(ok))
    for process, rule in (
            ((K.CrossCoreWaitFlag(0),), "outside a core branch"),
            ((K.CoreIf("cube", (K.CrossCoreWaitFlag(11),)),), "id 11 outside 0..10"),
            ((K.CoreIf("cube", (K.CrossCoreSetFlag(2, Pipe.V, 0),)),), "pipe V, which the cube core"),
            ((K.CoreIf("vector", (K.CrossCoreSetFlag(2, Pipe.FIX, 0),)),), "pipe FIX, which the vector core"),
            ((K.CoreIf("vector", (K.CrossCoreSetFlag(2, Pipe.S, 0),)),), "pipe S"),
            ((K.CoreIf("cube", (K.CrossCoreSetFlag(1, Pipe.FIX, 0),)),), "mode 1 on the cube core")):
        with pytest.raises(K.IRError, match=rule):
            K.verify(_cls(process))


def test_the_epilogue_workspace_and_ub_fit_in_the_tiling(tmp_path):
    """workspaceBytes = blockDim x 2 slots x baseM x baseN x 4 (fp32); epiRows at most half a block and its pass
    within the 192 KB UB of an Atlas A2 AIV (docs/reference/ascendc.md §1.2), counted from the buffers the kernel
    itself allocates on the AIVs (the InitBuffers under its vector CoreIf, sizeof(bf16) = 2), not from the tiling's
    own byte counts."""
    u = kernel_build(_spec(tmp_path, body="(bb.matmul({a}, {b}) * 0.5).cast(U, 'rint')"))
    cls = next(iter(u.lowered.programs.values()))
    vec = [st for st in K.walk(cls.process) if isinstance(st, K.CoreIf) and st.unit == "vector"]
    allocs = [st for v in vec for st in K.walk(v.body) if isinstance(st, K.InitBuffer)]
    assert allocs
    for m, k, n in ((37, 50, 45), (4096, 4096, 4096), (1, 1, 1)):
        v = _tiling(u, m, k, n)
        assert v["fits"] == 1
        assert v["workspaceBytes"] == v["blockDim"] * 2 * v["baseM"] * v["baseN"] * 4
        assert 1 <= v["epiRows"] <= (v["baseM"] + 1) // 2
        env = {**v, "sizeof(T)": 2}
        assert sum(a.num * a.bytes.evaluate(env) for a in allocs) <= 192 * 1024, (m, k, n)


def _tiling(u, m, k, n, aiv=48):
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import program_inputs

    plat = next(p for p in PLATFORMS.values() if p.aiv == aiv and p.arch == "dav-2201")
    t = u.tiling
    from opgen.ir.dtypes import parse_dtype

    vals = program_inputs(u.spec, t.program, t.inputs, {"M": m, "K": k, "N": n}, {"U": parse_dtype("bf16")}, plat,
                          None)
    return t.program.evaluate(vals)


@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (37, 50, 45), (1000, 333, 500), (129, 17, 1), (4096, 4096, 4096),
                                     (16, 4096, 3000)])
def test_every_block_has_one_owner_and_tiles_fit_the_cube_memories(tmp_path, m, k, n):
    u = kernel_build(_spec(tmp_path))
    v = _tiling(u, m, k, n)
    assert set(FIELDS) <= set(v)
    bm, bn, bk = v["baseM"], v["baseN"], v["baseK"]
    assert bm % 16 == bn % 16 == bk % 16 == 0 and bm >= min(m, 16) and bn >= min(n, 16)
    blocks = math.ceil(m / bm) * math.ceil(n / bn)
    owners = [0] * blocks
    for core in range(v["blockDim"]):   # the schedule's first / last (opgen.kernel.cube.lower_gemm)
        first = core * v["blocksPerCore"] + min(core, v["blocksTail"])
        last = first + v["blocksPerCore"] + (1 if core < v["blocksTail"] else 0)
        for b in range(first, last):
            owners[b] += 1
    assert owners == [1] * blocks
    assert v["blockDim"] <= 24   # Atlas A2 910B1: 24 AI Cores (48 AIV)
    elem = 2
    assert (bm * bk + bk * bn) * elem <= 512 * 1024 and bm * bk * elem <= 64 * 1024 and bk * bn * elem <= 64 * 1024
    assert bm * bn * 4 <= 128 * 1024 and v["fits"] == 1
    assert v["tilingKey"] % 10 == (1 if v["kSplit"] > 1 else 2)   # mixed for a K split, else AIC only


def test_a_panels_are_twice_as_deep_as_b_panels_where_l1_holds_them(tmp_path):
    """docs/design.md "Cube family: A panels deeper than B's". By hand (L1 512 KB = 524288 B, bf16): two A panels
    128 x 512 and two B panels 256 x 256 take 2 (65536 + 65536) 2 = 524288 B, all of L1, so at 4096^3 A is 512 deep
    and B 256; beside a 1 KB bias row they do not fit and B goes to 128 (2 (65536 + 32768) 2 + 1024 = 394240 B);
    K = 300 gives one A panel of 304 (K rounded to 16) holding B panels of 256 and 48; K = 200 one of each. In the
    IR the B panel's copy sits in a loop inside the A panel's, so per block of K = 4096 the AIC copies 8 A panels
    and 16 B panels (a 512-element, 1 KB, GM burst per A row: half the bursts of 256-deep panels)."""
    from opgen.tiling.cube import gemm_program

    u = kernel_build(_spec(tmp_path))
    v = _tiling(u, 4096, 4096, 4096)
    assert (v["baseKL1A"], v["baseKL1"], v["l1Bytes"]) == (512, 256, 524288)
    assert (_tiling(u, 100, 300, 100)["baseKL1A"], _tiling(u, 100, 300, 100)["baseKL1"]) == (304, 256)
    assert (_tiling(u, 100, 200, 100)["baseKL1A"], _tiling(u, 100, 200, 100)["baseKL1"]) == (208, 208)
    p, _plan = gemm_program("G", epi=(12, 4), bias=True)
    b = p.evaluate({"dimM": 4096, "dimK": 4096, "dimN": 4096, "tBytes": 2, "oBytes": 2, "dtypeKey": 1, "attrKey": 0,
                    "aicNum": 24, "ubBytes": 196608})
    assert (b["baseKL1A"], b["baseKL1"], b["l1Bytes"], b["fits"]) == (512, 128, 393216, 1)
    cls = next(iter(u.lowered.programs.values()))
    a_loops = [s for s in K.walk(cls.process) if isinstance(s, K.For) and s.var == "k0a"]
    assert len(a_loops) == 2   # the K split's units and the plain blocks
    for lp in a_loops:
        inner = [s for s in K.walk(lp.body) if isinstance(s, K.For) and s.var == "k0"]
        assert len(inner) == 1 and inner[0].step == Sym("baseKL1") and lp.step == Sym("baseKL1A")
        copies = [c.dst.tensor for c in K.walk(lp.body) if isinstance(c, K.Nd2Nz)]
        assert copies == ["a1", "b1"] and [c.dst.tensor for c in K.walk(inner[0].body)
                                           if isinstance(c, K.Nd2Nz)] == ["b1"]
        assert 4096 // v["baseKL1A"] == 8 and 4096 // v["baseKL1"] == 16


def test_layout_is_read_off_the_graph(tmp_path):
    lay = kernel_build(_spec(tmp_path)).layout
    assert (lay.a, lay.b, lay.out, lay.dims, lay.dtype, lay.out_dtype) == ("x", "w", "y", ("M", "K", "N"), "U", "U")
    assert "y[M, N] = x[M, K] x w[K, N]" in lay.text()


def test_batched_layout_and_blocks_cross_matrices():
    spec = load_spec(str(Path(__file__).resolve().parents[1] / "examples" / "specs" / "batch_mat_mul.py"))
    u = kernel_build(spec)
    assert u.layout.batch == ("B",) and u.layout.dims == ("M", "K", "N")
    k = next(iter(u.lowered.programs.values()))
    assert "mnBlocks" in k.fields
    lets = {s.name: s.value for s in K.walk(k.process) if isinstance(s, K.Let)}
    assert lets["bi"] == Sym("blk") // Sym("mnBlocks") and lets["bb"] == Sym("blk") % Sym("mnBlocks")


def _run_cube(cls, values: dict, arrays: dict):
    """Run cube class `cls` (operands f16) on the interpreter with the tiling `values`; `arrays` by GM member name."""
    from opgen.kernel import kir_interp

    gm = {g.arg: arrays[g.name] for g in cls.gms if not g.workspace}
    ws = np.zeros(max(values["workspaceBytes"], 4) // 4, np.float32)
    r = kir_interp.run(cls, {f: values[f] for f in cls.fields}, gm, values["blockDim"], types={"T": "half"},
                       workspace=ws)
    assert kir_interp.kernel_type(cls) == "KERNEL_TYPE_MIX_AIC_1_2" and r.ok, r.faults[:2]


@pytest.mark.parametrize("trans, batch, m, k, n", [(False, 0, 37, 50, 45), (False, 0, 300, 130, 270),
                                                   (True, 0, 150, 70, 33), (False, 3, 20, 40, 140),
                                                   (False, 0, 150, 700, 90), (True, 0, 150, 600, 33)])
def test_cube_schedule_interpreted_in_numpy_equals_float64_matmul(tmp_path, trans, batch, m, k, n):
    """The schedule's copies, fractal loads, Mmads and Fixpipes run on the Kernel IR interpreter (opgen.kernel.
    kir_interp with opgen.kernel.cubesem's layouts; an unwritten L1 / L0 element read is a fault, so is a race between
    the AIC's pipes) compute A @ B on every core's blocks: the layout arithmetic without g++."""
    import numpy as np

    if batch:
        spec = load_spec(str(Path(__file__).resolve().parents[1] / "examples" / "specs" / "batch_mat_mul.py"))
    else:
        spec = _trans_spec(tmp_path) if trans else _spec(tmp_path)
    u = kernel_build(spec)
    cls = next(iter(u.lowered.programs.values()))
    from opgen.ir.dtypes import parse_dtype
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import program_inputs

    plat = next(p for p in PLATFORMS.values() if p.aiv == 48 and p.arch == "dav-2201")
    env = {"M": m, "K": k, "N": n, **({"B": batch} if batch else {})}
    var = spec.dtype_table[0].name
    v = u.tiling.program.evaluate(program_inputs(spec, u.tiling.program, u.tiling.inputs, env,
                                                 {var: parse_dtype("f16")}, plat, None))
    rng = np.random.default_rng(m + k + n)
    nb = max(batch, 1)
    a = rng.uniform(-1, 1, (nb, m, k)).astype(np.float16)
    b = rng.uniform(-1, 1, (nb, k, n)).astype(np.float16)
    ga = np.swapaxes(a, 1, 2).ravel().copy() if trans else a.ravel().copy()
    gb = np.swapaxes(b, 1, 2).ravel().copy() if trans else b.ravel().copy()
    out = np.full(nb * m * n, np.nan, dtype=np.float16)
    _run_cube(cls, v, {"aGm_": ga, "bGm_": gb, "cGm_": out})
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64)).ravel()
    assert not np.isnan(out).any()   # every output element written, no unwritten L1 / L0 element read
    assert np.all(np.abs(out.astype(np.float64) - ref) <= 2.0**-10 * np.abs(ref) + 2.0**-24 * 4 * k * np.abs(ref).max())


def test_fp32_output_keeps_the_accumulator(tmp_path):
    """A product written as f32 (no cast after the matmul): Fixpipe without quantisation (NoQuant), the float32
    L0C values themselves, equal to float64 A @ B to fp32 accumulation accuracy."""
    import numpy as np

    from opgen.ir.dtypes import parse_dtype
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import program_inputs

    text = SPEC.replace('spec.output("{c}", U, [{m}, {n}])', 'spec.output("{c}", f32, [{m}, {n}])').replace(
        "import A2, OpSpec, bf16, f16", "import A2, OpSpec, bf16, f16, f32")
    d = dict(op="GemmF", m="M", k="K", n="N", a="x", b="w", c="y", body="bb.matmul(x, w)")
    p = tmp_path / "gemmf.py"
    p.write_text(textwrap.dedent(text.format(**d)))
    spec = load_spec(str(p))
    u = kernel_build(spec)
    cls = next(iter(u.lowered.programs.values()))
    assert u.layout.out_dtype == "f32" and "QuantMode_t::NoQuant" in K.to_cpp(cls)
    plat = next(p for p in PLATFORMS.values() if p.aiv == 48 and p.arch == "dav-2201")
    v = u.tiling.program.evaluate(program_inputs(spec, u.tiling.program, u.tiling.inputs, {"M": 40, "K": 300, "N": 20},
                                                 {"U": parse_dtype("bf16")}, plat, None))
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (40, 300)).astype(np.float16)
    b = rng.uniform(-1, 1, (300, 20)).astype(np.float16)
    out = np.full(800, np.nan, dtype=np.float32)
    _run_cube(cls, v, {"aGm_": a.ravel(), "bGm_": b.ravel(), "cGm_": out})
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.allclose(out.reshape(40, 20), ref, rtol=0, atol=2.0**-24 * 4 * 300 * np.abs(ref).max())


@pytest.mark.parametrize("body, words", [
    # an intermediate rounding Fixpipe would skip: it rounds once, straight to the output dtype
    ("bb.matmul({a}, {b}).cast(U, 'rint').cast(U, 'rint')", "a second cast after the matmul"),
    # Fixpipe rounds to nearest even only: ties away from zero would differ from the interpreter
    ("bb.matmul({a}, {b}).cast(U, 'round')", "round='round'"),
])
def test_epilogue_casts_fixpipe_cannot_do_are_refused_at_the_cast_line(tmp_path, body, words):
    spec = _spec(tmp_path, body=body)
    with pytest.raises(NoKernel) as e:
        kernel_build(spec)
    msg = str(e.value)
    line = next(i for i, t in enumerate(Path(spec.file).read_text().splitlines(), 1) if "bb.matmul" in t)
    cube = msg.split(" [cube family]")[0]   # the cube family got furthest (to the cast): its reason comes first
    assert words in cube and f"(gemm.py:{line})" in cube and "[attention family]" not in cube and "\n" not in msg


def test_an_f32_dtype_row_is_refused_at_the_input_line(tmp_path):
    # the cube reads f16 / bf16 operands only (docs/reference/ascendc.md §1.10): an f32 row is refused while matching,
    # at the first operand's declaration, not late in emission
    text = SPEC.replace("bf16, f16", "bf16, f16, f32").replace("[(f16,), (bf16,)]", "[(f16,), (f32,)]")
    d = dict(op="Gemm", m="M", k="K", n="N", a="x", b="w", c="y", body="bb.matmul(x, w).cast(U, 'rint')")
    p = tmp_path / "gemm.py"
    p.write_text(textwrap.dedent(text.format(**d)))
    with pytest.raises(NoKernel) as e:
        kernel_build(load_spec(str(p)))
    line = next(i for i, t in enumerate(p.read_text().splitlines(), 1) if 'spec.input("x"' in t)
    cube = str(e.value).split(" [cube family]")[0]   # the family that recognised a plain matmul speaks first
    assert "dtype row 2 binds U to f32" in cube and f"gemm.py:{line})" in cube and "lowers %x (" in cube


def test_spec_names_equal_to_the_kernels_old_member_names_do_not_collide(tmp_path):
    # aGm / bGm / cGm are valid spec names; the kernel's own members end in '_', which no spec name may
    u = kernel_build(_spec(tmp_path, a="aGm", b="bGm", c="cGm"))
    cls = next(iter(u.lowered.programs.values()))
    assert cls.args == ("aGm", "bGm", "cGm")
    assert {g.name for g in cls.gms} == {"aGm_", "bGm_", "cGm_", "wsGm_"}
    cpp = K.to_cpp(cls)
    assert "aGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(aGm));" in cpp


def test_an_argument_named_twice_is_refused_with_an_article_that_fits():
    cls = K.KernelClass("C", "S", args=("a", "a"), gms=(K.GmTensor("g", "half", "a"),), locals=(), fields=(),
                        process=(), tparams=())
    with pytest.raises(Exception, match=r"argument name a is also an argument"):
        K.verify(cls)


def test_an_argument_named_like_a_member_is_renamed():
    # the class's own names win: the argument (a spec name) is spelled v_<name>_ in Init and in the bindings
    cls = K.KernelClass("C", "S", args=("a", "c"), gms=(K.GmTensor("a", "half", "a"), K.GmTensor("g", "half", "c")),
                        fields=("c",), presence=(("has_", "a"),), scalars=(K.ScalarVar("has_", "bool", False),))
    assert cls.args == ("v_a_", "v_c_")
    assert [g.arg for g in cls.gms] == ["v_a_", "v_c_"] and cls.presence == (("has_", "v_a_"),)
    assert K.kernel_arg(cls, "a") == "v_a_" and K.kernel_arg(cls, "x") == "x"


def test_ai_cores_are_read_from_the_platform_and_the_fit_error_names_l1_l0(tmp_path):
    import dataclasses

    from opgen.codegen.tilingfiles import emit_tiling_files
    from opgen.ir.dtypes import parse_dtype
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import program_inputs

    spec = _spec(tmp_path)
    u = kernel_build(spec)
    plat = next(p for p in PLATFORMS.values() if p.arch == "dav-2201")
    odd = dataclasses.replace(plat, aic=20, aiv=48)   # an AIC count that is not AIV / 2: the launch follows the AIC
    vals = program_inputs(spec, u.tiling.program, u.tiling.inputs, {"M": 4096, "K": 64, "N": 4096},
                          {"U": parse_dtype("f16")}, odd, None)
    assert u.tiling.program.evaluate(vals)["blockDim"] == 20
    host = next(t for p, t in emit_tiling_files(spec).items() if p.endswith("_tiling.cpp"))
    assert "info.aicNum = platform.GetCoreNumAic();" in host   # CANN's PlatformAscendC call for the AI Core count
    assert "no L1/L0 tiling of Gemm holds this shape" in host and "no UB plan" not in host


def test_the_entry_is_mixed_and_named_as_the_opdef_looks_it_up(tmp_path):
    import opgen.codegen.kernel_cube  # noqa: F401  (installs the cube family's emit stage)
    from opgen.check.driver import LAUNCH, kernel_type, key_kernel_types

    spec = _trans_spec(tmp_path)   # GemmT: snake gemm_t ends in _t (reserved for types), so the entry is gemm_t_entry
    u = kernel_build(spec)
    files = u.family.emit(spec, u.lowered, u.tiling)
    cpp = tmp_path / "k.cpp"
    cpp.write_text(files["op_kernel/gemm_t.cpp"])
    assert 'extern "C" __global__ __aicore__ void gemm_t_entry(' in cpp.read_text()
    # the AIVs reduce a K split's partials when the tiling chooses one: the launch is mixed (1 AIC : 2 AIV,
    # docs/reference/ascendc.md §1.3), which opgen check launches
    assert kernel_type(cpp) == "KERNEL_TYPE_MIX_AIC_1_2" and "KERNEL_TYPE_MIX_AIC_1_2" in LAUNCH
    # without a K split the AIVs have no work (no epilogue): those keys (strategy 2) launch AIC only
    (tmp_path / "gemm_t_tiling_key.h").write_text(files["op_kernel/gemm_t_tiling_key.h"])
    assert key_kernel_types(cpp) == ((12, "KERNEL_TYPE_AIC_ONLY"), (22, "KERNEL_TYPE_AIC_ONLY"))
    # the family states it (the kernel UT's KernelMode follows it)
    assert u.family.kernel_type == "KERNEL_TYPE_MIX_AIC_1_2"


def _gelu_tanh(y):
    """GELU, tanh form, in float64 (torch.nn.functional.gelu(approximate="tanh"))."""
    return 0.5 * y * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (y + 0.044715 * y ** 3)))


EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "specs"


@pytest.mark.slow
def test_matmul_bias_gelu_emulated_matches_float64(examples_gen):
    """MatmulGelu on the mixed launch against float64 NumPy: odd M / N / K, a tail block of one row (its second
    AIV has no rows) and of odd rows (halves of 23 / 22), fp16 and bf16; one build serves both runs."""
    from opgen.check import run_check

    spec = load_spec(str(EXAMPLES / "matmul_gelu.py"))
    out = examples_gen
    for dims, dt, ulp in (({"M": 257, "K": 70, "N": 290}, "bfloat16", 2.0**-8),
                          ({"M": 301, "K": 33, "N": 45}, "float16", 2.0**-11)):
        r = run_check(spec.file, dims=dims, dtypes={"T": dt}, gen_dir=out, seed=5, progress=False)
        assert not r.faults and r.passed and r.block_dim > 1
        x, w, b = (np.asarray(r.inputs[n], dtype=np.float64) for n in ("x", "weight", "bias"))
        ref = _gelu_tanh(x @ w + b)
        got = np.asarray(r.arrays["output"], dtype=np.float64)
        assert got.shape == ref.shape
        assert np.all(np.abs(got - ref) <= ulp * np.abs(ref) + 1e-3 * np.abs(ref).mean())


@pytest.mark.slow
def test_batched_matmul_bias_residual_emulated_matches_float64(examples_gen):
    """FusedMatMul ("add": + bias + x3) with 60 matrices over the AI Cores: cores taking three blocks reuse a
    workspace slot (the AIC waits for its AIVs' free flag), tails on every edge; against float64 NumPy."""
    from opgen.check import run_check

    from opgen.tiling.emit import SYS_WORKSPACE_BYTES

    spec = load_spec(str(EXAMPLES / "fused_mat_mul.py"))
    out = examples_gen
    r = run_check(spec.file, dims={"B": 60, "M": 37, "K": 50, "N": 45}, dtypes={"T": "bfloat16"}, gen_dir=out,
                  seed=2, progress=False)
    assert not r.faults and r.passed
    # two fp32 slots of a 48 x 48 block (baseM = ceil16(37), baseN = ceil16(45)) per AI Core, beside the library's
    assert 1 < r.block_dim < 60 and r.workspace_bytes - SYS_WORKSPACE_BYTES == r.block_dim * 2 * 48 * 48 * 4
    x1, x2, b, x3 = (np.asarray(r.inputs[n], dtype=np.float64) for n in ("x1", "x2", "bias", "x3"))
    ref = x1 @ x2 + b + x3
    got = np.asarray(r.arrays["y"], dtype=np.float64)
    assert got.shape == ref.shape
    assert np.all(np.abs(got - ref) <= 2.0**-8 * np.abs(ref) + 1e-3 * np.abs(ref).mean())


@pytest.mark.slow
def test_relu_of_a_scaled_matmul_kept_fp32_emulated_matches_float64(tmp_path):
    """relu(alpha * x @ w) - 1 written as fp32 (no final cast: the AIVs store their fp32 rows), alpha a runtime float
    attribute (its bits through the tiling data), fixed bf16 operands (no dtype variable), renamed dims; against
    float64 NumPy."""
    from opgen.check import run_check
    from opgen.codegen import write_ops

    p = tmp_path / "mm_relu.py"
    p.write_text(textwrap.dedent('''
        from opgen.dsl import A2, OpSpec, bf16, f32
        spec = OpSpec("MmRelu", aclnn="aclnnMmRelu", socs=(A2,), round="rint")
        R = spec.dim("R", max=4096)
        C = spec.dim("C", max=4096)
        D = spec.dim("D", max=4096)
        spec.input("lhs", bf16, [R, D])
        spec.input("rhs", bf16, [D, C])
        spec.output("res", f32, [R, C])
        spec.attr("alpha", float, 0.25)
        spec.example_call({"R": 5, "D": 7, "C": 9})


        @spec.body
        def _(bb, lhs, rhs, alpha):
            return {"res": bb.maximum(bb.matmul(lhs, rhs) * alpha, 0.0) - 1.0}
    '''))
    spec = load_spec(str(p))
    out = tmp_path / "gen"
    write_ops([spec.file], out)
    r = run_check(spec.file, dims={"R": 131, "D": 45, "C": 270}, attrs={"alpha": -0.375}, gen_dir=out, seed=4,
                  progress=False)
    assert not r.faults and r.passed
    x, w = (np.asarray(r.inputs[n], dtype=np.float64) for n in ("lhs", "rhs"))
    ref = np.maximum(-0.375 * (x @ w), 0.0) - 1.0
    got = np.asarray(r.arrays["res"], dtype=np.float64)
    assert got.dtype == np.float64 and str(r.arrays["res"].dtype) == "float32" and got.shape == ref.shape
    assert np.all(np.abs(got - ref) <= 2.0**-20 * (np.abs(ref) + np.abs(x) @ np.abs(w)))


def _is_ksplit_if(s) -> bool:
    return isinstance(s, K.If) and any(Sym("kSplit") in (c.lhs, c.rhs) for c in s.cond)


def _in_ksplit_branch(cls, path) -> bool:
    """Whether `path` (a dependency-pass position ('Process', index, step, ...) or a _cross_paths path) lies in
    the then-branch of the K split's `if kSplit > 1`."""
    stmts = cls.process
    if path and path[0] == "Process":
        items = list(path[1:])
        steps = [(items[i], items[i + 1] if i + 1 < len(items) else None) for i in range(0, len(items), 2)]
        names = {"b": "body", "c": "body", "s": "body", "t": "then", "e": "orelse"}
    else:
        steps = [x if isinstance(x, tuple) else (x, None) for x in path]
        names = {"body": "body", "then": "then", "orelse": "orelse"}
    for i, f in steps:
        if not isinstance(i, int) or i >= len(stmts):
            return False
        st = stmts[i]
        if f is None:
            return False
        if _is_ksplit_if(st) and names.get(f) == "then":
            return True
        stmts = getattr(st, names.get(f, "body"), ())
    return False


def _cross_paths(stmts, pre=()):
    """(path, statement) of every CrossCoreSetFlag / CrossCoreWaitFlag under `stmts`, depth first."""
    for i, s in enumerate(stmts):
        if isinstance(s, (K.CrossCoreSetFlag, K.CrossCoreWaitFlag)):
            yield pre + (i,), s
        for f in ("body", "then", "orelse"):
            if isinstance(getattr(s, f, None), tuple):
                yield from _cross_paths(getattr(s, f), pre + ((i, f),))


def _without(stmts, path):
    """`stmts` without the statement at `path`."""
    i = path[0]
    if len(path) == 1:
        return stmts[:i] + stmts[i + 1:]
    j, f = i
    return stmts[:j] + (replace(stmts[j], **{f: _without(getattr(stmts[j], f), path[1:])}),) + stmts[j + 1:]


def _drop(stmts, keep):
    """`stmts` with only the statements `keep` accepts, at every depth."""
    out = []
    for s in stmts:
        if not keep(s):
            continue
        for f in ("body", "then", "orelse"):
            if isinstance(getattr(s, f, None), tuple):
                s = replace(s, **{f: _drop(getattr(s, f), keep)})
        out.append(s)
    return tuple(out)


def _insert(stmts, path, stmt):
    """`stmts` with `stmt` inserted at `path`."""
    i = path[0]
    if len(path) == 1:
        return stmts[:i] + (stmt,) + stmts[i:]
    j, f = i
    return stmts[:j] + (replace(stmts[j], **{f: _insert(getattr(stmts[j], f), path[1:], stmt)}),) + stmts[j + 1:]


def test_the_mixed_cube_kernel_runs_on_the_interpreter_and_every_flag_it_needs_is_checked():
    """MatmulGelu's mixed kernel on the Kernel IR interpreter (one AI Core: its AIC and two AIVs as generators that
    wait at CrossCoreWaitFlag) equals float64 gelu(x @ w + bias) to fp16 accuracy. Its flags and barriers are the
    dependency pass's (opgen.kernel.kir_sync: the lowering places none); with any one of them deleted the launch
    faults with a race naming both statements; with any one cross-core set or wait (the slots' READY / FREE flags,
    the final waits) deleted it faults with a deadlock, a flag set never waited for or a race between cores; with a
    READY set issued on MTE2 instead of FIX (it does not wait for the Fixpipe's workspace write) the AIVs' read of
    the slot is a race between cores; without the EnQue / DeQue of the L1 queues or of the L0A / L0B queues, the
    consumer's read races the producer's write. Four blocks on the core, so
    both slots are reused and every flag runs; the last two are one row, so one AIV has no rows of them (its pass
    loop runs no iteration, and the flags after the loop are the ones that order its next block)."""
    import dataclasses

    import numpy as np

    from opgen.ir.dtypes import parse_dtype
    from opgen.kernel import kir_interp
    from opgen.kernel import kir_sync as ks
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import program_inputs

    spec = load_spec(str(EXAMPLES / "matmul_gelu.py"))
    u = kernel_build(spec)
    cls = next(iter(u.lowered.programs.values()))
    bare = ks.strip_syncs(cls)
    again, ins = ks.place_syncs(bare)
    assert again == cls   # the class the kernel is printed from is the pass's output
    plat = dataclasses.replace(next(p for p in PLATFORMS.values() if p.aiv == 48 and p.arch == "dav-2201"), aic=1,
                               aiv=2)
    m, k, n = 129, 16, 300
    v = u.tiling.program.evaluate(program_inputs(spec, u.tiling.program, u.tiling.inputs, {"M": m, "K": k, "N": n},
                                                 {"T": parse_dtype("f16")}, plat, None))
    assert v["blockDim"] == 1 and v["blocksPerCore"] == 4 and v["baseM"] == 128, v
    rng = np.random.default_rng(7)
    a, w = rng.uniform(-1, 1, (m, k)).astype(np.float16), rng.uniform(-1, 1, (k, n)).astype(np.float16)
    bias = rng.uniform(-1, 1, n).astype(np.float16)
    y = a.astype(np.float64) @ w.astype(np.float64) + bias
    ref = y / (1 + np.exp(-1.5957691216057308 * (y + 0.044715 * y ** 3)))

    def launch(c):
        out = np.full(m * n, np.nan, np.float16)
        r = kir_interp.run(c, {f: v[f] for f in c.fields}, {"x": a, "weight": w, "bias": bias, "output": out}, 1,
                           workspace=np.zeros(v["workspaceBytes"] // 4, np.float32), types={"T": "half"},
                           verify_first=False)
        return r, out.reshape(m, n)

    r, out = launch(cls)
    assert r.ok and np.all(np.abs(out - ref) <= 2.0 ** -10 * np.abs(ref) + 2.0 ** -14), r.faults[:1]
    syncs = ks.placed(ins)
    pipes = {x.event if not isinstance(x, K.Barrier) else "V" for p, lst in ins.items() for x in lst}
    assert {"M_FIX", "FIX_M", "MTE2_V", "V_MTE2", "V_MTE3", "MTE3_V", "V"} <= pipes, pipes
    # L1 and L0A / L0B are double-buffered queues: their EnQue / DeQue and FreeTensor / AllocTensor hand-offs order
    # MTE2 -> MTE1 -> M and back, so the pass places no flag between those pipes
    assert not pipes & {"MTE2_MTE1", "MTE1_MTE2", "MTE1_M", "M_MTE1"}, pipes
    survivors = []
    for which in syncs:
        r, _ = launch(ks.without(bare, ins, which))
        if r.ok:
            survivors.append(which)
        else:
            assert "race (" in r.faults[0], (which, r.faults[:1])
    # this call does not split K (kSplit 1): only the syncs of the K split's branches go unexercised
    # (test_ksplit_kernel_on_the_interpreter_every_sync_and_exchange_is_checked deletes those)
    assert survivors and all(_in_ksplit_branch(cls, w[0][0]) for w in survivors), survivors
    # without the EnQue -> DeQue hand-offs of a level's queues the consumer races (one pair alone still orders both
    # operands: an EnQue hands over everything its producer pipe issued before it)
    for qs in (("l1A_", "l1B_"), ("l0A_", "l0B_")):
        def keep(st, qs=qs):
            return not (isinstance(st, (K.EnQue, K.DeQue)) and st.queue in qs)
        r, _ = launch(replace(cls, process=_drop(cls.process, keep)))
        assert not r.ok and "race (read-after-write)" in r.faults[0], (qs, r.faults[:1])
    cross = [(p, st) for p, st in _cross_paths(cls.process) if not _in_ksplit_branch(cls, p)]
    assert len(cross) == 10, cross
    for p, s in cross:   # READY set on MTE2, which never waited for the Fixpipe's workspace write (review)
        if isinstance(s, K.CrossCoreSetFlag) and s.pipe is Pipe.FIX:
            bad = _without(cls.process, p)
            r, _ = launch(replace(cls, process=_insert(bad, p, replace(s, pipe=Pipe.MTE2))))
            assert not r.ok and "race (read-after-write) between cores on GM tensor 'wsGm_'" in r.faults[0], r.faults[:1]
    for p, s in cross:
        r, _ = launch(replace(cls, process=_without(cls.process, p)))
        assert not r.ok, K.to_text_stmt(s)
        assert any(w in r.faults[0] for w in ("race (", "deadlock", "never consumed")), r.faults[0]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_deleting_any_cross_core_wait_of_the_epilogue_kernel_faults(tmp_path, monkeypatch, session_build_root):
    """MatmulGelu's mixed kernel (examples/specs/matmul_gelu.py), built once with each CrossCoreWaitFlag guarded:
    unmutated it passes; with any one wait skipped (the AIVs' READY waits, the AIC's slot-reuse and final waits)
    `check` faults, because the emulation requires every CrossCoreSetFlag to be consumed by kernel end (CANN: sets
    and waits in pairs, undefined behaviour otherwise; review: a deleted wait passed or failed by timing before)."""
    from opgen.check import run_check
    from opgen.codegen import write_ops
    from mutants import GUARD as _GUARD

    spec = str(Path(__file__).resolve().parents[1] / "examples" / "specs" / "matmul_gelu.py")
    write_ops([spec], tmp_path / "gen")
    h = tmp_path / "gen" / "matmul_gelu" / "op_kernel" / "matmul_gelu.h"
    sites = []

    def guard(m):
        if m.group(2) == f"CrossCoreWaitFlag({FLAG_PART});":   # the K split's: this call does not split K
            return m.group(0)   # (test_ksplit_matmul_gelu_emulated_... deletes it)
        sites.append(m.group(2))
        return f"{m.group(1)}if (OpgenKeep({len(sites) - 1})) {{ {m.group(2)} }}"

    text = re.sub(r"^(\s*)(CrossCoreWaitFlag\(\d+\);)", guard, h.read_text(), flags=re.M)
    h.write_text(text.replace('#include "kernel_operator.h"\n', '#include "kernel_operator.h"\n' + _GUARD, 1))
    assert len(sites) >= 6, sites

    def check(golden=True):   # 16 x 6 blocks of 128 x 256 over 24 AI Cores: 4 per core, so each slot is reused
        return run_check(spec, dims={"M": 1950, "K": 40, "N": 1300}, dtypes={"T": "bfloat16"}, gen_dir=tmp_path / "gen",
                         build_root=session_build_root, progress=False, golden=golden)

    r = check()
    assert r.passed and not r.faults, r.faults
    survivors = []
    for k in range(len(sites)):
        monkeypatch.setenv("OPGEN_MUTANT", str(k))
        r = check(golden=False)   # a mutant is judged by its faults alone: no float64 interpretation needed
        if r.passed or not r.faults:
            survivors.append((k, sites[k]))
    assert not survivors, survivors


@pytest.mark.slow
def test_matmul_bias_exact_gelu_emulated_matches_float64(tmp_path):
    """MatmulGelu with the exact GELU (erf) in the AIV epilogue: AscendC's Erf steps (clip, rational P / Q in fp32)
    after the fp32 accumulation, against float64 GELU with math.erf (fp16, odd M / N / K, a tail block)."""
    from opgen.check import run_check
    from opgen.codegen import write_ops

    src = (EXAMPLES / "matmul_gelu.py").read_text().replace('approximate="tanh"', 'approximate="none"')
    assert 'approximate="none"' in src
    p = tmp_path / "matmul_gelu.py"
    p.write_text(src)
    write_ops([str(p)], tmp_path / "gen")
    r = run_check(str(p), dims={"M": 37, "K": 64, "N": 45}, dtypes={"T": "float16"}, gen_dir=tmp_path / "gen",
                  seed=3, progress=False)
    assert not r.faults and r.passed
    x, w, b = (np.asarray(r.inputs[n], dtype=np.float64) for n in ("x", "weight", "bias"))
    y = x @ w + b
    ref = 0.5 * y * (1.0 + np.vectorize(math.erf)(y / math.sqrt(2.0)))
    got = np.asarray(r.arrays["output"], dtype=np.float64)
    # one fp16 rounding of the output, plus Erf's 4.3e-7 on terms of size |y| / 2 (cancelling for y < 0)
    assert np.all(np.abs(got - ref) <= 2.0**-11 * np.abs(ref) + 4.3e-7 * np.abs(y) + 1e-3 * np.abs(ref).mean())


def test_a_bound_past_nd2nz_s_row_pitch_names_that_limit_not_the_ub(tmp_path):
    """K with max=65536: the tiling's `fits` fails on Nd2Nz's 16-bit row pitch, and the proof's error says what the
    plan requires (L1 / L0, Nd2Nz) with the largest K that fits -- not "UB overflow" (new-user trial)."""
    from opgen.errors import SpecError

    p = tmp_path / "mm.py"
    p.write_text((EXAMPLES / "mat_mul.py").read_text().replace('spec.dim("K", max=65535)', 'spec.dim("K", max=65536)'))
    with pytest.raises(SpecError) as e:
        kernel_build(load_spec(str(p)))
    msg = str(e.value)
    assert "tiling limit" in msg and "Nd2Nz" in msg and "UB overflow" not in msg and "lower max= of K to 65535" in msg


def _ksplit_gelu_launch(dt: str):
    """MatmulGelu at M 125, K 1999, N 111 on a platform of 3 AI Cores (6 AIVs): the tiling chooses kSplit 3 (k
    ranges of 704, the last 591: not a multiple of the 256-element L1 panel), the reduction's passes of 22 rows
    over the 6 AIVs (the last 15 rows: a tail). Returns (class, pass input, placed syncs, tiling values, launch:
    class -> (RunResult, output [M, N] float64), float64 reference). The pass's placement is the run's memo
    (kir_sync.place_syncs_memo: computed once for the three tests that call this; the test of the mixed kernel above
    places the same class afresh)."""
    import dataclasses

    from opgen.ir.dtypes import parse_dtype
    from opgen.kernel import kir_interp
    from opgen.kernel import kir_sync as ks
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import program_inputs

    spec = load_spec(str(EXAMPLES / "matmul_gelu.py"))
    u = kernel_build(spec)
    cls = next(iter(u.lowered.programs.values()))
    bare = ks.strip_syncs(cls)
    _again, ins = ks.place_syncs_memo(bare)   # the memo kernel_build read: that it equals a fresh placement is the
    # mixed kernel's test above (a comparison here would compare the memo with itself)
    plat = dataclasses.replace(next(p for p in PLATFORMS.values() if p.aiv == 48 and p.arch == "dav-2201"), aic=3,
                               aiv=6)
    m, k, n = 125, 1999, 111
    v = u.tiling.program.evaluate(program_inputs(spec, u.tiling.program, u.tiling.inputs, {"M": m, "K": k, "N": n},
                                                 {"T": parse_dtype(dt)}, plat, None))
    assert (v["kSplit"], v["kLen"], v["blockDim"], v["redRows"]) == (3, 704, 3, 22), v
    np_t = {"f16": np.float16, "bf16": __import__("ml_dtypes").bfloat16}[dt]
    rng = np.random.default_rng(11)
    a, w = rng.uniform(-1, 1, (m, k)).astype(np_t), rng.uniform(-1, 1, (k, n)).astype(np_t)
    bias = rng.uniform(-1, 1, n).astype(np_t)
    ref = _gelu_tanh(a.astype(np.float64) @ w.astype(np.float64) + bias.astype(np.float64))

    def launch(c, over=None):
        vv = dict(v, **(over or {}))
        out = np.full(m * n, np.nan, np_t)
        r = kir_interp.run(c, {f: vv[f] for f in c.fields}, {"x": a, "weight": w, "bias": bias, "output": out},
                           vv["blockDim"], workspace=np.zeros(vv["workspaceBytes"] // 4, np.float32),
                           types={"T": {"f16": "half", "bf16": "bfloat16_t"}[dt]}, verify_first=False)
        return r, out.reshape(m, n).astype(np.float64)

    return cls, bare, ins, v, launch, ref


@pytest.mark.parametrize("dt", ["f16", "bf16"])
def test_ksplit_gemm_with_epilogue_interpreted_equals_float64_and_is_deterministic(dt):
    """The K split (docs/design.md "Cube family: the K split") with MatmulGelu's bias + GELU epilogue on the Kernel
    IR interpreter: every unit's fp32 partial, the AIVs' ordered sum after the SyncAll, then the epilogue, equal
    float64 gelu(x @ w + bias) to one rounding of the output type (plus fp32 accumulation over K); and two
    launches give bit-identical outputs (the partials are summed in k order, not in the order cores finish)."""
    _cls, _bare, _ins, _v, launch, ref = _ksplit_gelu_launch(dt)
    cls = _cls
    r1, o1 = launch(cls)
    assert r1.ok, r1.faults[:1]
    ulp = {"f16": 2.0 ** -11, "bf16": 2.0 ** -8}[dt]
    assert np.all(np.abs(o1 - ref) <= ulp * np.abs(ref) + 2.0 ** -20 * 1999 * 4 + 1e-6), np.abs(o1 - ref).max()
    r2, o2 = launch(cls)
    assert r2.ok and np.array_equal(o1.view(np.uint64), o2.view(np.uint64))


def test_ksplit_kernel_on_the_interpreter_every_sync_and_exchange_is_checked():
    """The K split's branches of MatmulGelu's kernel, run with kSplit 3: deleting any flag or barrier the dependency
    pass placed faults with a race; deleting the SyncAll makes an AIV's read of another AI Core's partial a race
    between cores (its own AIC's FLAG_PART orders only that AIC's Fixpipes); deleting the FLAG_PART set or wait
    faults (a race, a deadlock or a flag never consumed); the FLAG_PART set issued on MTE2 instead of FIX does not
    order the Fixpipe's partial write: a race between cores."""
    from opgen.kernel import kir_sync as ks

    cls, bare, ins, v, launch, ref = _ksplit_gelu_launch("f16")
    # a second tiling the kernel must take as well, by hand from opgen.tiling.cube's rules: kSplit 4 (kLen
    # align_up(ceil(1999 / 4), 64) = 512), 4 units over 3 AI Cores (the first takes 2: a unit after a unit), and
    # reduction passes of 8 rows (16 per 128-row block over 6 AIVs: 2 or 3 items each, one after another)
    two = {"kSplit": 4, "kLen": 512, "blockDim": 3, "unitsPerCore": 1, "unitsTail": 1, "redRows": 8,
           "passesPerBlock": 16, "itemsPerAiv": 2, "itemsTail": 4, "workspaceBytes": 4 * 128 * 112 * 4}
    r, out = launch(cls, two)
    assert r.ok and np.all(np.abs(out - ref) <= 2.0 ** -11 * np.abs(ref) + 2e-3), r.faults[:1]
    syncs = [w for w in ks.placed(ins) if _in_ksplit_branch(cls, w[0][0])]
    assert syncs
    survivors = []
    for which in syncs:
        mutant = ks.without(bare, ins, which)
        r, _ = launch(mutant)
        if r.ok:
            r, _ = launch(mutant, two)
        if r.ok:
            survivors.append(which)
        else:
            assert "race (" in r.faults[0], (which, r.faults[:1])
    # two V -> MTE2 flags cover each other between an AIV's items (the next item's column copy waits for every
    # earlier V read, so does its partial-0 copy): each alone is redundant, both deleted race
    assert len(survivors) <= 2, survivors
    if survivors:
        r, _ = launch(ks.without(bare, ins, tuple(x for w in survivors for x in w)), two)
        assert not r.ok and "race (" in r.faults[0], r.faults[:1]

    r, _ = launch(replace(cls, process=_drop(cls.process, lambda s: not isinstance(s, K.SyncAll))))
    assert not r.ok and "race (read-after-write) between cores on GM tensor 'wsGm_'" in r.faults[0], r.faults[:1]
    for kind in (K.CrossCoreSetFlag, K.CrossCoreWaitFlag):
        r, _ = launch(replace(cls, process=_drop(cls.process, lambda s: not (isinstance(s, kind) and s.id == 4))))
        assert not r.ok and any(w in r.faults[0] for w in ("race (", "deadlock", "never consumed")), r.faults[:1]

    def on_mte2(stmts):
        out = []
        for s in stmts:
            if isinstance(s, K.CrossCoreSetFlag) and s.id == 4:
                s = replace(s, pipe=Pipe.MTE2)
            for f in ("body", "then", "orelse"):
                if isinstance(getattr(s, f, None), tuple):
                    s = replace(s, **{f: on_mte2(getattr(s, f))})
            out.append(s)
        return tuple(out)

    r, _ = launch(replace(cls, process=on_mte2(cls.process)))
    assert not r.ok and "race (read-after-write) between cores on GM tensor 'wsGm_'" in r.faults[0], r.faults[:1]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_ksplit_matmul_gelu_emulated_matches_float64_is_bit_identical_and_races_without_its_syncall(
        tmp_path, dt, session_build_root, examples_gen):
    """MatmulGelu at M 50, K 12347 (odd; not a multiple of the 256-element L1 panel), N 70 on Atlas A2: one output
    block for 24 AI Cores, and the tiling's cost model splits K in three (k ranges of 4160, the last 4027; two
    before A's L1 panels were 512 deep, whose fewer bursts make a third range's extra panels cheaper). The
    emulated kernel (g++) equals float64 gelu(x @ w + bias) to one rounding of the output type; the workspace holds
    one fp32 partial of every element per k range (3 x M x N x 4 bytes written, read once each); a second run with
    the cores' interleaving perturbed (OPGEN_EMU_SCHED_SEED) gives bit-identical outputs. With the SyncAll deleted from the emitted kernel, an AIV's read of the other AI Core's
    partial is a race between cores (the emulation's cross-core check, emu/pipes.h XTouchGm), whichever of the
    read and the write the threads happen to run first; with the AIVs' FLAG_PART wait deleted the launch faults.""" 
    from opgen.check import run_check

    spec = str(EXAMPLES / "matmul_gelu.py")
    m, k, n = 50, 12347, 70

    def check(gen, root=session_build_root):
        return run_check(spec, dims={"M": m, "K": k, "N": n}, dtypes={"T": dt}, gen_dir=gen, seed=4,
                         build_root=root, progress=False)

    # the example as generated: the run's tree and its build (tests/conftest.py examples_gen; test_examples checks
    # the same package), not a copy generated and built per dtype; the deletions below edit a copy of it
    r1 = check(examples_gen, None)
    assert r1.passed and not r1.faults, r1.faults[:2]
    assert r1.block_dim == 3 and r1.gm["workspace"].written == 3 * m * n * 4 == r1.gm["workspace"].read
    x, w, b = (np.asarray(r1.inputs[v], dtype=np.float64) for v in ("x", "weight", "bias"))
    ref = _gelu_tanh(x @ w + b)
    got = np.asarray(r1.arrays["output"], dtype=np.float64)
    ulp = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}[dt]
    assert np.all(np.abs(got - ref) <= ulp * np.abs(ref) + 2.0 ** -22 * k * 4), np.abs(got - ref).max()
    with pytest.MonkeyPatch.context() as mp:   # another interleaving of the cores (emu/core.h SchedJitter)
        mp.setenv("OPGEN_EMU_SCHED_SEED", "7")
        r2 = check(examples_gen, None)
    a1, a2 = np.asarray(r1.arrays["output"]), np.asarray(r2.arrays["output"])
    assert r2.passed and a1.tobytes() == a2.tobytes()
    if dt == "bfloat16":
        return
    shutil.copytree(examples_gen / "matmul_gelu", tmp_path / "gen" / "matmul_gelu")
    h = tmp_path / "gen" / "matmul_gelu" / "op_kernel" / "matmul_gelu.h"
    text = h.read_text()
    assert text.count("SyncAll();") == 1
    h.write_text(text.replace("SyncAll();", "/* deleted */"))
    r = check(tmp_path / "gen")
    # read-after-write when the AIC wrote first, write-after-read when the AIV read first: either order faults
    assert not r.passed and any(re.search(r"race \((read-after-write|write-after-read)\) between cores on GM "
                                          r"tensor 'workspace'", f) for f in r.faults), r.faults[:2]
    # without the AIVs' FLAG_PART wait: a flag never consumed (or, by timing, a race on the partials)
    assert text.count(f"CrossCoreWaitFlag({FLAG_PART});") == 1
    h.write_text(text.replace(f"CrossCoreWaitFlag({FLAG_PART});", "/* deleted */"))
    r = check(tmp_path / "gen")
    assert not r.passed and r.faults, r.faults[:2]


@pytest.mark.parametrize("change, words", [
    # a shape form the cube family refuses: the right operand's batch dims broadcast against the left's
    ({"spec.input(\"x\", U, [M, K])": "spec.input(\"x\", U, [2, M, K])",
      "spec.input(\"w\", U, [K, N])": "spec.input(\"w\", U, [2, 1, K, N])",
      "spec.output(\"y\", U, [M, N])": "spec.output(\"y\", U, [2, 2, M, N])"}, "batch dims broadcast otherwise"),
    # a dtype row the cube does not read, refused at an input (a parameter: no IR node to rank by position)
    ({"[(f16,), (bf16,)]": "[(f16,), (f32,)]", "bf16, f16": "bf16, f16, f32"}, "binds U to f32"),
])
def test_a_plain_matmul_no_family_lowers_is_refused_with_the_cube_familys_reason_first(tmp_path, change, words):
    # the attention family does not find its score matmul reaching a softmax in a plain matmul: the spec is not of
    # its kind, so its reason follows the cube family's (docs/design.md "Kernel families")
    text = SPEC.format(op="Gemm", m="M", k="K", n="N", a="x", b="w", c="y", body="bb.matmul(x, w).cast(U, 'rint')")
    for old, new in change.items():
        assert old in text
        text = text.replace(old, new)
    p = tmp_path / "gemm.py"
    p.write_text(textwrap.dedent(text))
    with pytest.raises(NoKernel) as e:
        kernel_build(load_spec(str(p)))
    msg = str(e.value)
    first, _, rest = msg.partition(" [cube family]; ")
    assert words in first and "[attention family]" not in first, msg
    assert "no score matmul" in rest and rest.endswith("[attention family]"), msg


def test_cube_kernel_statements_carry_the_spec_lines_they_come_from(tmp_path):
    # the `// spec: file.py:N` traces the rows and attention kernels carry
    # (docs/design.md "Reviewing generated code"): the cube's copies, loads and Mmad cite the matmul's line, each
    # epilogue step its own, the store the output cast's; the line numbers are read off the spec text
    text = SPEC.format(op="Gemm", m="M", k="K", n="N", a="x", b="w", c="y", body="t.cast(U, 'rint')")
    text = text.replace("def _(bb, x, w):\n", "def _(bb, x, w):\n    s = bb.matmul(x, w)\n    t = s * 0.5 - 1.0\n")
    p = tmp_path / "gemm.py"
    p.write_text(textwrap.dedent(text))
    lines = p.read_text().splitlines()
    at = {k: next(i for i, t in enumerate(lines, 1) if t.strip().startswith(k)) for k in ("s =", "t =", "return")}
    cls = next(iter(kernel_build(load_spec(str(p))).lowered.programs.values()))
    cpp = K.to_cpp(cls).splitlines()
    for stmt in ("DataCopy(a1, ", "DataCopy(b1, ", "LoadData(a2", "LoadData(b2", "Mmad(", "Fixpipe<"):
        hits = [t for t in cpp if t.strip().startswith(stmt)]
        assert hits and all(t.endswith(f"// spec: gemm.py:{at['s =']}") for t in hits), (stmt, hits)
    for stmt in ("Muls(", "Adds("):   # s * 0.5 - 1.0
        hits = [t for t in cpp if t.strip().startswith(stmt)]
        assert hits and all(t.endswith(f"// spec: gemm.py:{at['t =']}") for t in hits), (stmt, hits)
    for stmt in ("Cast(eo", "DataCopyPad(cGm_"):
        hits = [t for t in cpp if t.strip().startswith(stmt)]
        assert hits and all(t.endswith(f"// spec: gemm.py:{at['return']}") for t in hits), (stmt, hits)


def test_operands_named_like_cpp_keywords_are_renamed_as_in_the_other_families(tmp_path):
    """Inputs and outputs named `int`, `float`, `half` (an operand, the output, an epilogue input) lower: the cube
    class takes them as Init arguments `v_<name>_` (opgen.names.cpp_name), as the rows and attention classes do,
    instead of stopping in the Kernel IR verifier (a new user's FusedMatMul with an input named `int`, trial 29)."""
    spec = _spec(tmp_path, body="(bb.matmul({a}, {b}) + double.cast(f32)).cast(U, 'rint')", a="int", b="half",
                 c="float")
    src = Path(spec.file).read_text()
    src = src.replace('spec.output("float"', 'spec.input("double", U, [M, N])\nspec.output("float"')
    Path(spec.file).write_text(src.replace("def _(bb, int, half):", "def _(bb, int, half, double):"))
    u = kernel_build(load_spec(spec.file))
    cls = next(iter(u.lowered.programs.values()))
    assert u.family.name == "cube" and cls.args == ("v_int_", "v_half_", "v_double_", "v_float_")


ROWSCALE_SPEC = """
from opgen.dsl import A2, OpSpec, f16, f32

spec = OpSpec("RowScaledGemm", aclnn="aclnnRowScaledGemm", socs=(A2,), round="rint")
M, K, N = spec.dims("M K N")
spec.input("x", f16, [M, K])
spec.input("w", f16, [K, N])
spec.input("rs", f32, [K], optional=True)
spec.output("y", f16, [M, N])


@spec.body
def _(bb, x, w, rs):
    y = bb.matmul(x, w)
    if rs is not None:
        y = y * rs.sum(0, keepdims=False)
    return {"y": y.cast(f16, "rint")}
"""


def test_a_refusal_names_the_specialisation_when_the_spec_has_several(tmp_path):
    # one kernel serves every specialisation: the one without rs lowers alone (graph --present ""), while the kernel
    # (generate, graph --stage kernel of any specialisation) stops at the sum of rs, a reduction the epilogue does not
    # run (elementwise math only), and the message says which specialisation that operand belongs to (it is not the
    # one `graph --present ""` asked for)
    from opgen.tiling.pipeline import compile_unit

    p = tmp_path / "row_scaled_gemm.py"
    p.write_text(ROWSCALE_SPEC)
    spec = load_spec(str(p))
    without = next(k for k in spec.keys() if not any(k.present))
    assert compile_unit(spec, key=without, until="lower", only_key0=True).lowered is not None
    with pytest.raises(NoKernel) as e:
        kernel_build(spec)
    line = next(i for i, t in enumerate(ROWSCALE_SPEC.splitlines(), 1) if "y * rs" in t)
    want = f"(row_scaled_gemm.py:{line}) in the specialisation rs present: a reduction (sum over K)"
    assert want in str(e.value), str(e.value)
    with pytest.raises(NoKernel) as e:   # that specialisation lowered alone (graph --present rs) names it too
        compile_unit(spec, key=next(k for k in spec.keys() if any(k.present)), until="lower", only_key0=True)
    assert want in str(e.value), str(e.value)


def test_an_epilogue_op_the_vector_lowering_refuses_is_a_refusal_at_its_spec_line(tmp_path):
    """A scalar exp of a float attribute in the epilogue (the AIV scalar unit has no exp) is refused as every other
    construct of the family: `no kernel family lowers %v (file:line): a scalar exp ... [cube family]`, not an
    error of the rows family's lowering without a spec line."""
    p = tmp_path / "exp_scaled_gemm.py"
    p.write_text('''
from opgen.dsl import A2, OpSpec, f16

spec = OpSpec("ExpScaledGemm", aclnn="aclnnExpScaledGemm", socs=(A2,), round="rint")
M, K, N = spec.dims("M K N")
spec.input("x", f16, [M, K])
spec.input("w", f16, [K, N])
spec.attr("alpha", float, 1.0)
spec.output("y", f16, [M, N])


@spec.body
def _(bb, x, w, alpha):
    return {"y": (bb.matmul(x, w) * bb.exp(alpha)).cast(f16, "rint")}
''')
    with pytest.raises(NoKernel) as e:
        kernel_build(load_spec(str(p)))
    assert "(exp_scaled_gemm.py:14): a scalar exp" in str(e.value) and "[cube family]" in str(e.value), str(e.value)
    assert "row kernel" not in str(e.value)
