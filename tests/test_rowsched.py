"""The rows family's ROW_SPLIT and COL_SPLIT schedules as Kernel IR (opgen.kernel.rowsched): for example specs, the IR of every
kernel class verifies, has the copies, queues and flags the spec's inputs and outputs call for (facts read off the
spec files, not the code), is what the op_kernel header prints, and a dropped flag is refused by the verifier."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pytest

from opgen.kernel import kir
from opgen.ir.dims import Sym
from opgen.kernel.isa import Op, Pipe
from opgen.tiling.pipeline import kernel_build
from opgen.registry import load_spec

ROOT = Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=None)
def _irs(name: str):
    spec = load_spec(str(ROOT / "examples" / "specs" / f"{name}.py"))
    u = kernel_build(spec)
    if u.family.name != "rows":
        return spec, u, None
    return spec, u, [v.kclass for v in u.lowered.extra["variants"]]


def _scopes(k: kir.KernelClass, method: str) -> list:
    return [s for s in k.method(method).body if isinstance(s, kir.Scope)]


# (spec, row/stat inputs copied per pass, outputs copied per pass, statistics read by the scalar unit)
CASES = [("rms_norm", 1, 2, False),            # x; y and rstd (gamma is a column row, loaded once)
         ("layer_norm_grad", 3, 1, True),      # dy, x, rstd and mean in one queue; pd_x (pd_gamma, pd_beta:
         #                                       column sums). Why one queue: docs/design.md "Event ids of the queues"
         ("scaled_transpose", 1, 1, False),
         ("joint_concat", 1, 1, False)]        # the concat of txt and img is one row operand


@pytest.mark.parametrize("name, n_in, n_out, stats", CASES, ids=[c[0] for c in CASES])
def test_row_split_ir_has_one_copy_scope_per_operand_and_verifies(name, n_in, n_out, stats):
    _spec, _u, irs = _irs(name)
    assert irs
    for k in irs:
        kir.verify(k)
        assert len(_scopes(k, "CopyIn")) == n_in and len(_scopes(k, "CopyOut")) == n_out
        # statistics the scalar unit reads after their copy-in: an MTE2 -> S flag on the pass's path (placed by
        # the dependency pass where the calls of CopyIn and Compute part, or inside Compute)
        path = kir.walk(k.method("RowSplit").body + k.method("Compute").body)
        flags = [s for s in path if isinstance(s, kir.SetFlag)]
        assert any(f.src is Pipe.MTE2 and f.dst is Pipe.S for f in flags) == stats
        # the pass loops (one buffer a row queue, the next pass fetched by ComputeFetch, and two, the next pass
        # prefetched: rowsched.pass_loop), each over every pass, its rows k, the work written once in each
        loops = [s for s in kir.walk(k.method("RowSplit").body) if isinstance(s, kir.For) and s.var == "r0"]
        assert len(loops) == 2 and all(x.tail == "k" for x in loops)
        assert [str(x.hi) for x in loops] == ["rowEnd_", "rowEnd_"] and [x.pipelined for x in loops] == [False, True]
        # (the one-buffer loop's ComputeFetch: Compute issuing the next pass's copy-in, rowsched.fetch_loop)
        assert [c.method for c in kir.walk(k.method("RowSplit").body) if isinstance(c, kir.Call)
                and c.method in ("Compute", "ComputeFetch")] == ["ComputeFetch", "Compute"]
        chunks = [s for s in k.method("ColSplit").body if isinstance(s, kir.For)][-1]
        groups = [s for s in chunks.body if isinstance(s, kir.For)][-1]
        assert chunks.var == "c0_" and groups.var == "g0" and groups.tail == "k"
        # each row input is resident in its own TBuf for COL_SPLIT, copied once per group
        copies = [s for s in kir.walk(groups.body) if isinstance(s, kir.Copy) and s.pipe is Pipe.MTE2
                  and isinstance(s.dst, kir.Ref) and s.dst.tensor.startswith("res_")]
        # ... or, for a program that combines nothing across a row (scaled_transpose), prefetched through a
        # two-buffer queue resQue_<operand> (rowsched._chunk_in): a buffer of each allocated per group
        copies += [s for s in kir.walk(groups.body) if isinstance(s, kir.Alloc) and s.queue.startswith("resQue_")]
        assert len(copies) == (n_in - (1 if stats else 0)) or name == "joint_concat"


def test_strided_and_concat_operands_copy_per_run_and_per_piece():
    # scaled_transpose: y = x with S and N swapped; the rows of one of the two are strided in GM
    k = _irs("scaled_transpose")[2][0]
    runs = [s for m in ("CopyIn", "CopyOut") for s in kir.walk(k.method(m).body)
            if isinstance(s, kir.For) and s.step is None]
    assert runs and all(any(isinstance(x, kir.Copy) for x in kir.walk(r.body)) for r in runs)
    # joint_concat: the copy-in of the concatenated rows picks the piece each run lies in (an If on the run's
    # coordinate on the concat axis), each piece's Copy from its own GM tensor at its own Off_<operand>_<k>(r)
    k = _irs("joint_concat")[2][0]
    loops = [s for s in kir.walk(k.method("CopyIn").body) if isinstance(s, kir.For) and s.step is None
             and any(isinstance(x, kir.If) for x in s.body)]
    assert loops
    copies = [x for x in kir.walk(loops[0].body) if isinstance(x, kir.Copy)]
    assert len({c.src.tensor for c in copies}) == len(copies) >= 2
    offs = [kir.invokes(c.src.offset)[0].method for c in copies]
    assert all(o.startswith("Off_") for o in offs) and [o.rsplit("_", 1)[1] for o in offs] == \
        [str(j) for j in range(len(copies))]
    assert not any(isinstance(s, kir.Verbatim) for m in k.methods for s in kir.walk(m.body))


def test_the_header_prints_the_ir():
    import opgen.codegen.kernel  # noqa: F401  (installs the rows emit part; the test ran after one that imported it)

    spec, u, irs = _irs("layer_norm_grad")
    text = " ".join(next(t for p, t in u.family.emit(spec, u.lowered, u.tiling).items() if p.endswith(".h")).split())
    for k in irs:
        for m in k.methods:
            if not m.extern:
                assert " ".join(kir.methods_cpp(k, [m.name]).split()) in text, m.name


def test_a_dropped_flag_or_hand_off_is_refused():
    k = _irs("layer_norm_grad")[2][0]
    flagged = next(m.name for m in k.methods if any(isinstance(s, kir.SetFlag) for s in m.body))

    def without(method, pred):
        ms = tuple(kir.Func(m.name, m.params, tuple(s for s in m.body if not pred(s)), m.ret, m.const, m.doc,
                            m.extern) if m.name == method else m for m in k.methods)
        return kir.KernelClass(**{**k.__dict__, "methods": ms})

    with pytest.raises(kir.IRError, match="without a SetFlag"):
        kir.verify(without(flagged, lambda s: isinstance(s, kir.SetFlag)))
    with pytest.raises(kir.IRError, match="nothing enqueued|still holds|leaves queues"):
        kir.verify(without("Compute", lambda s: isinstance(s, kir.EnQue)))
    with pytest.raises(kir.IRError, match="leaves queues"):
        kir.verify(without("Compute", lambda s: isinstance(s, kir.Free)))


EXAMPLES = sorted(p.stem for p in (ROOT / "examples" / "specs").glob("*.py") if not p.name.startswith("_"))


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_schedule_verifies_and_prints(name):
    _spec, u, irs = _irs(name)
    if irs is None:
        pytest.skip(f"{name} is a {u.family.name}-family kernel (tests/test_cube.py covers the cube family)")
    assert irs
    for k in irs:
        kir.verify(k)
        text = kir.to_text(k)
        assert "func RowSplit()" in text and "func ColSplit()" in text and "tail k" in text
        # every queue a strategy initialises is allocated or dequeued by the schedule it belongs to
        for m in ("RowSplit", "ColSplit"):
            inited = {s.buf for s in kir.walk(k.method(m).body) if isinstance(s, kir.InitBuffer)}
            reach = [k.method(m)] + [k.method(c.method) for c in kir.walk(k.method(m).body)
                                     if isinstance(c, kir.Call) and not k.method(c.method).extern]
            used = {s.queue for f in reach for s in kir.walk(f.body) if isinstance(s, (kir.Alloc, kir.DeQue))}
            queues = {b.name for b in k.locals if b.queue} - {"paramQue_", "accOutQue_"}   # the helpers' queues
            assert inited & queues <= used, (m, sorted((inited & queues) - used))


def test_the_cross_core_exchanges_and_row_helpers_are_ir():
    # layer_norm_grad: pd_gamma / pd_beta are column sums over all rows (partial rows exchanged through workspace
    # after ROW_SPLIT: SumPartials), and its row sums need COL_SPLIT's row-reduction levels (TotalOwnedRows)
    k = _irs("layer_norm_grad")[2][0]
    names = {m.name for m in k.methods if not m.extern}
    assert {"SumPartials", "TotalOwnedRows", "LoadRow", "StoreRow", "RowSum"} <= names
    col = k.method("ColSplit")
    # each level's exchange in both forms (rowsched._exchange): one SyncAll where xchgAll, two for the owners'
    assert sum(isinstance(s, kir.SyncAll) for s in kir.walk(col.body)) == 3 * len(
        [s for s in kir.walk(col.body) if isinstance(s, kir.Comment) and "row-reduction level" in s.text])
    load = k.method("LoadRow")
    broken = kir.Func(load.name, load.params, tuple(s for s in load.body if not isinstance(s, kir.EnQue)),
                      load.ret, load.const, load.doc, load.extern, load.tparams)
    bad = kir.KernelClass(**{**k.__dict__, "methods": tuple(broken if m.name == "LoadRow" else m for m in k.methods)})
    with pytest.raises(kir.IRError, match="nothing enqueued"):
        kir.verify(bad)


def test_row_split_exchange_is_one_copy_and_a_pairwise_tree():
    """ROW_SPLIT's cross-core sum (SumPartials) reads the cores' partial rows with one strided DataCopyPad and folds
    them in a pairwise tree where the [cores, AlignUp(rn, 8)] tile fits in w_[0..1] (docs/design.md "Kernel IR
    interpreter and synchronisation by dependency"): under that branch one Copy of `cn` blocks (a core a block)
    and one Add inside the fold loop; the core-order loop (a LoadRow and an Add a core) stays the else branch. Hand count of the fold: with n rows
    left the last n // 2 are added onto the first, so 48 cores take 24 + 12 + 6 + 3 + 1 + 1 rows in 6 Adds =
    ceil(log2 48), where the core-order loop takes 48 Adds."""
    k = _irs("layer_norm_grad")[2][0]
    sp = k.method("SumPartials")
    tree = next(s for s in kir.walk(sp.body) if isinstance(s, kir.If) and "pairwise tree" in s.doc)
    copies = [s for s in kir.walk(tree.then) if isinstance(s, kir.Copy)]
    assert len(copies) == 1 and copies[0].block_count == Sym("cn") and isinstance(copies[0].src, kir.GmView)
    loops = [s for s in tree.then if isinstance(s, kir.For)]
    assert len(loops) == 1 and [v.op for v in kir.walk(loops[0].body) if isinstance(v, kir.Vec)] == [Op.ADD]
    assert any(isinstance(c, kir.Call) and c.method == "LoadRow" for c in kir.walk(tree.orelse))
    # the fold's iteration count, stepped as the loop's Let / Assign say (h = (n - d) / 2, d += h)
    for cores, adds in ((48, 6), (40, 6), (20, 5), (2, 1), (1, 0)):
        d = steps = 0
        while d < cores - 1:
            d += (cores - d) // 2
            steps += 1
        assert steps == adds == math.ceil(math.log2(cores)), cores
