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

from forced_tiling import forced_evaluate  # noqa: E402

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

# Flag pairs (named by `pair_name`: the method, the loops and branches around the wait, the pair's comment, the
# statement after it) whose removal no presence at any shape tried makes the Kernel-IR engine fail: ROW_SPLIT 37 x
# 300 and 300 x 1000 (more rows than a pass, a tail), COL_SPLIT 64 x 16384 and 130 x 16384 (several groups of rows
# per chunk, several chunks, a tail) with either exchange, each of the four presences. They are pairs the pass placed
# but no order needs (a pruning gap in kir_sync, reported, not hidden): the test names them and skips exactly them,
# and fails if the pass stops placing one or one of them becomes needed. Printed by
# `python tests/test_presence_pair_guard.py` (every placed pair, its index and its name). Re-landing the one-SyncAll
# exchange (sm1b) added its branch's pairs and moved every index after ColSplit's first: the names are what moved
# them from main's list (2, 6, 8, 9, 16, 17, 18 -> the same pairs by name; 19, the partials' S -> MTE3 sunk into the
# row-by-row branch, is now one in each exchange branch), and the new row-by-row and dead-branch pairs of the same
# kinds join them.
UNNEEDED = {
    'ComputeFetch / if rowStride_ <= 2040 && k <= 255 && rowsPerPass >= 2 (else) / if rowStride_ <= 2040 && k <= 255 && (n_ + 63) // 64 < 2 * k (then): rowValBuf_: V has written it before S reads it; before for i in [0, k) step 1 {':
        "ComputeFetch's narrow-slice branch: rowValBuf_ V -> S (as Compute's below)",
    'Compute / if rowStride_ <= 2040 && k <= 255 && rowsPerPass >= 2 (else) / if rowStride_ <= 2040 && k <= 255 && (n_ + 63) // 64 < 2 * k (then): rowValBuf_: V has written it before S reads it; before for i in [0, k) step 1 {':
        "Compute's narrow-slice branch: rowValBuf_ V -> S",
    'ColSplit / for c0_ in [cBegin, cEnd) step rowStride_ / for g0 in [0, rowNum_) step G tail k / if colBatchRows >= 1 && rowStride_ <= 2040 (else) / if colBatchRows >= 1 && rowStride_ <= 2040 (then): resBuf_x: MTE2 has written it before V reads it; before for b0 in [0, k) step colBatchRows tail kb {':
        "ColSplit: resBuf_x MTE2 -> V under the sub-batch test's else, its inner test's then",
    'ColSplit / for c0_ in [cBegin, cEnd) step rowStride_ / for g0 in [0, rowNum_) step G tail k / if colBatchRows >= 1 && rowStride_ <= 2040 (else) / if colBatchRows >= 1 && rowStride_ <= 2040 (else): resBuf_x: MTE2 has written it before V reads it; before for i in [0, k) step 1 {':
        'ColSplit, row by row: resBuf_x MTE2 -> V (COL_SPLIT here is 342-column slices: sub-batches)',
    "ColSplit / for c0_ in [cBegin, cEnd) step rowStride_ / for g0 in [0, rowNum_) step G tail k / if colBatchRows >= 1 && rowStride_ <= 2040 (else) / if colBatchRows >= 1 && rowStride_ <= 2040 (else): sumBuf_: S writes after V's write; before for i in [0, k) step 1 {":
        "ColSplit, row by row: sumBuf_ S after V's write",
    'ColSplit / for c0_ in [cBegin, cEnd) step rowStride_ / for g0 in [0, rowNum_) step G tail k / if xchgAll == 1 (then): sumBuf_: S has written it before MTE3 reads it; before copy.mte3 ws_[xpar * xchgOff1 + (core * 1 + 0) * groupStride_] <- sums_[0 * groupStride_] blocks=1 len=k * sizeof(float)B src_stride=0 dst_stride=0':
        "ColSplit's one-SyncAll exchange: sumBuf_ S -> MTE3 (the partials are the scalar unit's only row by row)",
    'ColSplit / for c0_ in [cBegin, cEnd) step rowStride_ / for g0 in [0, rowNum_) step G tail k / if xchgAll == 1 (else): sumBuf_: S has written it before MTE3 reads it; before copy.mte3 ws_[(core * 1 + 0) * groupStride_] <- sums_[0 * groupStride_] blocks=1 len=k * sizeof(float)B src_stride=0 dst_stride=0':
        "ColSplit's owners' exchange: sumBuf_ S -> MTE3 (likewise)",
    'ColSplit / for c0_ in [cBegin, cEnd) step rowStride_ / for g0 in [0, rowNum_) step G tail k / if colBatchRows >= 1 && rowStride_ <= 2040 (else) / if colBatchRows >= 1 && rowStride_ <= 2040 (then): sumBuf_: V has written it before S reads it; before for b0 in [0, k) step colBatchRows tail kb {':
        "ColSplit: sumBuf_ V -> S under the sub-batch test's else, its inner test's then",
    'ColSplit / for c0_ in [cBegin, cEnd) step rowStride_ / for g0 in [0, rowNum_) step G tail k / if colBatchRows >= 1 && rowStride_ <= 2040 (else) / if colBatchRows >= 1 && rowStride_ <= 2040 (then): sumBuf_: MTE2 has written it before S reads it; before for b0 in [0, k) step colBatchRows tail kb {':
        "ColSplit: sumBuf_ MTE2 -> S under the sub-batch test's else, its inner test's then",
    'ColSplit / for c0_ in [cBegin, cEnd) step rowStride_ / for g0 in [0, rowNum_) step G tail k / if colBatchRows >= 1 && rowStride_ <= 2040 (else) / if colBatchRows >= 1 && rowStride_ <= 2040 (else): sumBuf_: V has written it before S reads it; before for i in [0, k) step 1 {':
        'ColSplit, row by row: sumBuf_ V -> S (the totals of the one-SyncAll exchange)',
    'ColSplit / for c0_ in [cBegin, cEnd) step rowStride_ / for g0 in [0, rowNum_) step G tail k / if colBatchRows >= 1 && rowStride_ <= 2040 (else) / if colBatchRows >= 1 && rowStride_ <= 2040 (else): sumBuf_: MTE2 has written it before S reads it; before for i in [0, k) step 1 {':
        'ColSplit, row by row: sumBuf_ MTE2 -> S (the totals read back)',
    'ColSplit / for c0_ in [cBegin, cEnd) step rowStride_ / for g0 in [0, rowNum_) step G tail k / Scope: resBuf_x: V has read it before MTE2 overwrites it; before copy.mte2 res_x[0] <- gm_x[g0 * hidden_ + c0_] blocks=select(oneBurst != 0, 1, k) len=select(oneBurst != 0, k * n_ * sizeof(T), n_ * sizeof(T))B src_stride=(hidden_ - n_) * sizeof(T) dst_stride=GapBlocks(rowStride_, n_, sizeof(T))':
        'ColSplit: resBuf_x V -> MTE2 (write-after-read across groups)',
}


def pair_name(k: kir.KernelClass, inserted: dict, pair: tuple) -> str:
    """A flag pair the dependency pass placed in `k` (its input; `inserted` and `pair` as kir_sync.place_syncs and
    kir_sync.placed give them) named without statement indices, so a statement added elsewhere in the class leaves
    the name as it is: the method, the header of each loop / branch around the wait (an If's condition and which
    branch), the pair's comment (the buffer and the dependence, kir_sync._why) and the statement after the wait (the
    access it orders; "end" at a list's end)."""
    (p0, j0), (p1, _j1) = pair
    method = p1[0]
    stmts = {"Init": k.init, "Process": k.process, **{m.name: m.body for m in k.methods}}[method]
    where = []
    steps = p1[1:]
    for at, step in zip(steps[0:-1:2], steps[1::2]):
        s = stmts[at]
        head = kir.to_text_stmt(s).split("\n")[0].split("  //")[0].rstrip(" {") or type(s).__name__
        if isinstance(s, kir.If):
            head += " (then)" if step == "t" else " (else)"
            stmts = s.then if step == "t" else s.orelse
        else:
            stmts = s.body
        where.append(head)
    nxt = kir.to_text_stmt(stmts[steps[-1]]).split("\n")[0].split("  //")[0].strip() if steps[-1] < len(stmts) else "end"
    return " / ".join([method, *where]) + f": {inserted[p0][j0].doc}; before {nxt}"


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
    with monkeypatch.context() as mp:   # COL_SPLIT's exchange with one SyncAll (xchgAll), which the mutants run too
        forced_evaluate(mp, {"xchgAll": 1})
        inp = _inputs(64, 16384, True, True)
        r = run_check(spec, inputs=inp, dtypes={"T": "float32"}, engine="kir", progress=False)
    assert not r.faults and r.passed and r.tiling_key % 10 == 2, r.faults[:2]
    x = inp["x"].astype(np.float64)
    want = (x - x.mean(-1, keepdims=True)) * inp["a"] + inp["b"]
    np.testing.assert_allclose(np.asarray(r.arrays["z"], np.float64), want, rtol=0, atol=1e-5 * np.abs(want).max())

    real = kir_sync.place_syncs
    base = kernel_build(load_spec(spec))
    ks = [v.kclass for v in base.lowered.extra["variants"] if v.kclass is not None]
    assert len(ks) == 1 and kir.presence_split(ks[0]) == ("hasInput0_", "hasInput1_")
    k0 = rows.hoist_guards(kir_sync.strip_syncs(ks[0]))
    placed0 = real(k0, hoist=kir_sync.Hoist.LOOPS)[1]
    flags = [w for w in kir_sync.placed(placed0) if len(w) == 2]
    placements = {}   # every mutation builds the same class: its placement is computed once
    last_failed = None   # the case that failed the previous pair (tried first for the next)

    def placed_once(k, types, prune, hoist):
        key = (kir.to_text(k), repr(types), prune, hoist)
        if key not in placements:
            placements[key] = real(k, types, prune=prune, hoist=hoist)
        return placements[key]

    names = [pair_name(k0, placed0, w) for w in flags]
    assert len(set(names)) == len(names), names
    assert set(UNNEEDED) <= set(names), sorted(set(UNNEEDED) - set(names))
    survivors = []
    for n in range(len(flags)):
        if names[n] in UNNEEDED:
            continue
        def mutated(k, types=None, prune=True, hoist=kir_sync.Hoist.ALL, n=n):
            _good, ins = placed_once(k, types, prune, hoist)
            pairs = [w for w in kir_sync.placed(ins) if len(w) == 2]
            assert pair_name(k, ins, pairs[n]) == names[n]   # the class the engine builds is the one named
            return kir_sync.without(k, ins, pairs[n]), ins

        monkeypatch.setattr(rows, "place_syncs_memo", mutated)
        dm = tmp_path / f"m{n}"      # a fresh spec path per mutation: no build is reused
        dm.mkdir()
        (dm / "pgn.py").write_text(NORM_SPEC)
        failed = []
        # the same presences and shapes, every pair; presence-major, so the search stops at the first failing case
        # sooner: both inputs given runs z's guarded code too (the most code, where every needed pair here fails
        # first), so a pair that a bigger shape shows is not first tried at every presence of the smaller ones.
        # Shapes: ROW_SPLIT (more rows than a pass, a tail: Compute's pairs need it); COL_SPLIT, several groups per
        # chunk, with the owners' exchange (the tiling's choice) and with one SyncAll (xchgAll forced to 1: the
        # tiling takes it only for rows of tens of MB, rowkernel.XCHG_ALL_SHARE). The case that failed the previous
        # pair is tried first (pairs next to each other in the pass's order sit in the same method): the same
        # cases, each pair must still fail one of them, only the order of the search differs. "one": ROW_SPLIT
        # with one buffer a row queue (rowQueBufs 1, 2 rows a pass: ComputeFetch, the next pass's copy issued
        # inside Compute, in each of its three forms; the tiling takes it by cost only at larger shapes,
        # _one_buffer).
        cases = [(a, b, rows_, h, how) for a, b in PRESENCES
                 for rows_, h, how in ((37, 300, ""), (300, 1000, ""), (64, 16384, ""), (64, 16384, "all"),
                                       (300, 1000, "one"), (100, 40, "one"), (100, 3000, "one"))]
        for a, b, rows_, h, how in sorted(cases, key=lambda c: c != last_failed):
            with monkeypatch.context() as mp:
                if how == "one":
                    _one_buffer(mp, 2)
                elif how == "all":
                    forced_evaluate(mp, {"xchgAll": 1})
                r = run_check(str(dm / "pgn.py"), inputs=_inputs(rows_, h, a, b), dtypes={"T": "float32"},
                              engine="kir", progress=False)
            if not r.passed:
                failed.append((rows_, h, a, b, r.faults[:1]))
                last_failed = (a, b, rows_, h, how)
                break
        if not failed:
            survivors.append(names[n])
    assert not survivors, "flag pairs removed with every presence passing:\n" + "\n".join(survivors)


if __name__ == "__main__":   # every flag pair the pass places in PairGuardNorm, by index and by name
    import tempfile
    from pathlib import Path

    from opgen.kernel.rows import hoist_guards

    d = Path(tempfile.mkdtemp())
    (d / "pgn.py").write_text(NORM_SPEC)
    built = kernel_build(load_spec(str(d / "pgn.py")))
    k0 = hoist_guards(kir_sync.strip_syncs(next(v.kclass for v in built.lowered.extra["variants"] if v.kclass)))
    _k, ins = kir_sync.place_syncs(k0, hoist=kir_sync.Hoist.LOOPS)
    for n, w in enumerate(w for w in kir_sync.placed(ins) if len(w) == 2):
        print(n, kir_sync._pos_text(w[0][0]), pair_name(k0, ins, w), "(unneeded)" * (pair_name(k0, ins, w) in UNNEEDED))
