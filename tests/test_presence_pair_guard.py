"""A presence guard over two optional inputs (kir_sync._Analysis.presence_if with two literals): PairGuard writes
its output z only when both a and b are given (z = x * a + b; y = 2 x always), so z's queue protocol sits inside
`if (hasInput0_ && hasInput1_)` (opgen.kernel.rowpresence.output_guard, one cube of two literals) and the
dependency pass keeps the guard's else-branch as one fact set per falsifying assignment (a absent; a present and
b absent). Both engines pass every presence against float64 NumPy; a flag the pass placed in PairGuardNorm (z = (x -
mean(x)) * a + b, not chunkable), removed, fails, but for the pairs UNNEEDED names."""

from __future__ import annotations

import numpy as np
import pytest

from opgen.check import run_check
from opgen.kernel import kir, kir_sync
from opgen.registry import load_spec
from opgen.tiling.pipeline import kernel_build

SPEC = '''
from opgen.dsl import A2, A3, OpSpec, f32

spec = OpSpec("PairGuard", aclnn="aclnnPairGuard", socs=(A2, A3), round="rint")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=16384)
(T,) = spec.dtype_vars("T")
spec.input("x", T, [Bd, H])
spec.input("a", T, [H], optional=True)
spec.input("b", T, [H], optional=True)
spec.output("y", T, [Bd, H])
spec.output("z", T, [Bd, H], optional=True, doc="written when a and b are both given")
spec.dtypes((T,), [(f32,)])


@spec.body
def _(b_, x, a, b):
    out = {"y": x * 2.0}
    if a is not None and b is not None:
        out["z"] = x * a + b
    return out
'''

PRESENCES = [(True, True), (True, False), (False, True), (False, False)]


def _write(d) -> str:
    d.mkdir(parents=True, exist_ok=True)
    (d / "pair_guard.py").write_text(SPEC)
    return str(d / "pair_guard.py")


def _inputs(rows: int, h: int, a: bool, b: bool) -> dict:
    rng = np.random.default_rng(rows + h)
    inp = {"x": rng.standard_normal((rows, h)).astype(np.float32)}
    if a:
        inp["a"] = rng.standard_normal(h).astype(np.float32)
    if b:
        inp["b"] = rng.standard_normal(h).astype(np.float32)
    return inp


def _check_values(r, inp: dict) -> None:
    """y = 2 x exactly; z = x * a + b (fp32 multiply then add: within one fp32 rounding of float64) when both
    are given, else not written."""
    assert not r.faults and r.passed, r.faults[:2]
    x = inp["x"].astype(np.float64)
    np.testing.assert_array_equal(np.asarray(r.arrays["y"], np.float64), 2 * x)
    both = "a" in inp and "b" in inp
    assert (r.arrays.get("z") is not None) == both
    if both:
        want = x * inp["a"] + inp["b"]
        np.testing.assert_allclose(np.asarray(r.arrays["z"], np.float64), want, rtol=0, atol=4e-7 * np.abs(want).max())


def test_the_class_guards_z_by_both_presences(tmp_path):
    """One class; z's queue operations (AllocTensor, EnQue, DeQue, FreeTensor) sit under Ifs whose condition is the
    two presence literals (hasInput0_, hasInput1_), and the verifier and the dependency pass split on both members
    (kir.presence_split)."""
    unit = kernel_build(load_spec(_write(tmp_path / "s")))
    ks = [v.kclass for v in unit.lowered.extra["variants"] if v.kclass is not None]
    assert len(ks) == 1
    k = ks[0]
    assert kir.presence_split(k) == ("hasInput0_", "hasInput1_")
    two = [s for m in k.methods for s in kir.walk(m.body)
           if isinstance(s, kir.If) and kir.presence_literals(s.cond) == {"hasInput0_": True, "hasInput1_": True}]
    ops = {type(x).__name__ for s in two for x in kir.walk(s.then) if getattr(x, "queue", "").endswith("_z")}
    assert {"Alloc", "EnQue", "DeQue", "Free"} <= ops, ops


@pytest.mark.parametrize("rows, h", [(37, 300), (3, 16384)])   # ROW_SPLIT; COL_SPLIT
def test_every_presence_on_the_kernel_ir_engine(rows, h, tmp_path):
    spec = _write(tmp_path / "s")
    for a, b in PRESENCES:
        inp = _inputs(rows, h, a, b)
        r = run_check(spec, inputs=inp, dtypes={"T": "float32"}, engine="kir", progress=False)
        _check_values(r, inp)


@pytest.mark.slow
def test_every_presence_in_the_emulation(tmp_path, session_build_root):
    """The emitted C++ (g++ emulation, pipes asynchronous), ROW_SPLIT, the four presences."""
    from opgen.codegen import write_ops

    spec = _write(tmp_path / "s")
    write_ops([spec], tmp_path / "gen", jobs=1)
    for a, b in PRESENCES:
        inp = _inputs(29, 300, a, b)
        r = run_check(spec, inputs=inp, dtypes={"T": "float32"}, gen_dir=tmp_path / "gen",
                      build_root=session_build_root, progress=False)
        _check_values(r, inp)


def test_pair_guard_needs_no_flag_pair(tmp_path):
    """PairGuard combines nothing across a row (rowcounts.chunkable): its ColSplit prefetches through two-buffer
    queues (docs/design.md, ROW_CHUNK), whose hand-offs order every access, so the dependency pass places no flag
    pair in it; the mutation runs on PairGuardNorm (test_a_placed_flag_removed_fails)."""
    from opgen.kernel.rows import hoist_guards

    real = kir_sync.place_syncs
    base = kernel_build(load_spec(_write(tmp_path / "s")))
    k0 = hoist_guards(kir_sync.strip_syncs(next(v.kclass for v in base.lowered.extra["variants"] if v.kclass is not None)))
    flags = [w for w in kir_sync.placed(real(k0, hoist=kir_sync.Hoist.LOOPS)[1]) if len(w) == 2]
    assert not flags, flags


NORM_SPEC = SPEC.replace("PairGuard", "PairGuardNorm").replace('out["z"] = x * a + b', 'out["z"] = (x - x.mean(-1)) * a + b')

# Flag pairs (indices into kir_sync.placed, in the pass's order) whose removal no presence at any shape tried makes
# the Kernel-IR engine fail: ROW_SPLIT 37 x 300 and 300 x 1000 (more rows than a pass, a tail), COL_SPLIT 64 x 16384
# and 130 x 16384 (several groups of rows per chunk, several chunks, a tail), each of the four presences. They are
# pairs the pass placed but no order needs (a pruning gap in kir_sync, reported, not hidden): the test names them
# and skips exactly them, and fails if the pass stops placing one (the set then shrinks).
UNNEEDED = {
    2: "ComputeFetch, else-branch of the presence guard: rowValBuf_ V -> S (as Compute's, pair 6)",
    6: "Compute, else-branch of the presence guard: rowValBuf_ V -> S",
    8: "ColSplit, else-branch (a given, b absent): resBuf_x MTE2 -> V",
    9: "ColSplit, else-branch (a absent): resBuf_x MTE2 -> V",
    16: "ColSplit, else-branch (a given, b absent): sumBuf_ MTE2 -> S",
    17: "ColSplit, else-branch (a absent): sumBuf_ MTE2 -> S",
    18: "ColSplit: resBuf_x V -> MTE2 (write-after-read across groups)",
    19: "ColSplit, else-branch (a absent), at its end: the pair kir_sync._sink moved into the branch from after the "
        "If (sync9; the branch's other pairs, 8 and 9, are not needed either)",
}
# (This session's sync9 pruned a pair this list named -- ColSplit's sumBuf_ S -> MTE3 beside its V -> MTE3 -- and
# sank pair 19 into the else-branch; the indices after 10 moved down by one: 17, 18, 19 -> 16, 17, 18.)


def _one_buffer(mp, per_pass: int) -> None:
    """Make the Kernel-IR engine's tiling take ROW_SPLIT's one-buffer plan (rowQueBufs 1, `per_pass` rows a pass at
    most): opgen.tiling.emit.evaluate, which that engine launches with, patched on `mp` (a monkeypatch context)."""
    from opgen.tiling import emit

    real = emit.evaluate

    def forced(*a, **k):
        tl = real(*a, **k)
        if tl.get("strategy") == 1:
            tl = {**tl, "rowQueBufs": 1, "rowsPerPass": min(per_pass, tl["rowsFitOneBuf"])}
        return tl
    mp.setattr(emit, "evaluate", forced)


@pytest.mark.slow
def test_a_placed_flag_removed_fails(monkeypatch, tmp_path):
    """Mutation: PairGuardNorm (z = (x - mean(x)) * a + b under both presences; the row mean makes it not
    chunkable, so its ColSplit keeps flag pairs the pass places) built with one placed flag pair removed
    (kir_sync.without over RowsFamily.synchronise's placement), for each flag pair in turn: the Kernel-IR engine
    reports a fault (a race or an unordered access) on some presence at a ROW_SPLIT or COL_SPLIT shape; the
    class with every flag passes every presence against float64 NumPy."""
    import opgen.kernel.rows as rows

    d = tmp_path / "s"
    d.mkdir(parents=True)
    (d / "pgn.py").write_text(NORM_SPEC)
    spec = str(d / "pgn.py")
    for a, b in PRESENCES:
        inp = _inputs(37, 300, a, b)
        r = run_check(spec, inputs=inp, dtypes={"T": "float32"}, engine="kir", progress=False)
        assert not r.faults and r.passed, r.faults[:2]
        if a and b:
            x = inp["x"].astype(np.float64)
            want = (x - x.mean(-1, keepdims=True)) * inp["a"] + inp["b"]
            np.testing.assert_allclose(np.asarray(r.arrays["z"], np.float64), want, rtol=0,
                                       atol=1e-5 * np.abs(want).max())
        else:
            assert r.arrays.get("z") is None
    with monkeypatch.context() as mp:   # the one-buffer ROW_SPLIT (ComputeFetch) the mutants run too
        _one_buffer(mp, 2)
        inp = _inputs(300, 1000, True, True)
        r = run_check(spec, inputs=inp, dtypes={"T": "float32"}, engine="kir", progress=False)
    assert not r.faults and r.passed and r.tiling_key % 10 == 1, r.faults[:2]
    x = inp["x"].astype(np.float64)
    want = (x - x.mean(-1, keepdims=True)) * inp["a"] + inp["b"]
    np.testing.assert_allclose(np.asarray(r.arrays["z"], np.float64), want, rtol=0, atol=1e-5 * np.abs(want).max())

    real = kir_sync.place_syncs
    base = kernel_build(load_spec(spec))
    ks = [v.kclass for v in base.lowered.extra["variants"] if v.kclass is not None]
    assert len(ks) == 1 and kir.presence_split(ks[0]) == ("hasInput0_", "hasInput1_")
    k0 = rows.hoist_guards(kir_sync.strip_syncs(ks[0]))
    flags = [w for w in kir_sync.placed(real(k0, hoist=kir_sync.Hoist.LOOPS)[1]) if len(w) == 2]
    assert flags and set(UNNEEDED) < set(range(len(flags))), (len(flags), sorted(UNNEEDED))
    placements = {}   # every mutation builds the same class: its placement is computed once
    last_failed = None   # the case that failed the previous pair (tried first for the next)

    def placed_once(k, types, prune, hoist):
        key = (kir.to_text(k), repr(types), prune, hoist)
        if key not in placements:
            placements[key] = real(k, types, prune=prune, hoist=hoist)
        return placements[key]

    for n in range(len(flags)):
        if n in UNNEEDED:
            continue
        def mutated(k, types=None, prune=True, hoist=kir_sync.Hoist.ALL, n=n):
            _good, ins = placed_once(k, types, prune, hoist)
            pairs = [w for w in kir_sync.placed(ins) if len(w) == 2]
            return kir_sync.without(k, ins, pairs[n]), ins

        monkeypatch.setattr(rows, "place_syncs_memo", mutated)
        dm = tmp_path / f"m{n}"      # a fresh spec path per mutation: no build is reused
        dm.mkdir()
        (dm / "pgn.py").write_text(NORM_SPEC)
        failed = []
        # the same presences and shapes, every pair, as before; presence-major, so the search stops at the first
        # failing case sooner: both inputs given runs z's guarded code too (the most code, where every needed pair
        # here fails first), so a pair that a bigger shape shows is not first tried at every presence of the
        # smaller ones. Shapes: ROW_SPLIT (more rows than a pass, a tail: Compute's pairs 4 and 5 need it); COL_SPLIT,
        # several groups per chunk. The case that failed the previous pair is tried first (pairs next to each
        # other in the pass's order sit in the same method: the seven of ColSplit and TotalOwnedRows fail at
        # 64 x 16384, which they reached after a passing 37 x 300 and a passing 300 x 1000, 1.8 s of CPU a pair):
        # the same cases, each pair must still fail one of them, only the order of the search differs.
        # The last shapes (negative H) run ROW_SPLIT with one buffer a row queue (rowQueBufs 1, 2 rows a pass:
        # ComputeFetch, the next pass's copy issued inside Compute, in each of its three forms; the tiling takes it by
        # cost only at larger shapes, _one_buffer).
        cases = [(a, b, rows_, h) for a, b in PRESENCES
                 for rows_, h in ((37, 300), (300, 1000), (64, 16384), (300, -1000), (100, -40), (100, -3000))]
        for a, b, rows_, h in sorted(cases, key=lambda c: c != last_failed):
            with monkeypatch.context() as mp:
                if h < 0:
                    _one_buffer(mp, 2)
                r = run_check(str(dm / "pgn.py"), inputs=_inputs(rows_, abs(h), a, b), dtypes={"T": "float32"},
                              engine="kir", progress=False)
            if not r.passed:
                failed.append((rows_, h, a, b, r.faults[:1]))
                last_failed = (a, b, rows_, h)
                break
        assert failed, f"flag pair {n} removed: every presence passes"
