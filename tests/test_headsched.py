"""The head-rows schedule as Kernel IR (opgen.kernel.headsched, opgen.kernel.headclass): the vector barriers the
dependency pass gives a body (expected placements derived by hand from the RAW / WAW / WAR rule of
docs/reference/ascendc.md §1.6), the struct parameter of the Kernel IR (kir.Param kind "struct"), and the bundled
kernels' bodies as instruction-table nodes that the verifier accepts and `opgen graph --stage kernel` prints."""

from __future__ import annotations

import io
import re
import shutil
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from opgen.cli import main as cli_main
from opgen.ir.dims import Constraint, Lit, Sym
from opgen.kernel import kir
from opgen.kernel import kir_sync as ks
from opgen.kernel.headclass import table_row
from opgen.kernel.headsched import PART, HeadSchedule, body_func, head_class, row_conditions
from opgen.kernel.isa import Op

from mutants import guard_package, reach_then_mutate  # noqa: E402

N = Sym("headDim_")


def w(j):
    return kir.Ref("w_", slot=Lit(j))


def mul(d, a, b):
    return kir.vec(Op.MUL, dst=d, src0=a, src1=b, count=N)


def shape(stmts) -> list:
    """The statements as short tags: "B" a V barrier, "Mul w2" a vector op and its destination slot, nested lists for
    loop bodies and branches."""
    out = []
    for s in stmts:
        if isinstance(s, kir.Barrier):
            out.append("B")
        elif isinstance(s, kir.Vec):
            d = s.arg("dst")
            out.append(f"{kir.INSTRS[s.op].api} {d.tensor[0]}{kir.const_value(d.slot)}")
        elif isinstance(s, kir.Call):
            out.append(f"call {s.method}")
        elif isinstance(s, kir.For):
            out.append(["for", shape(s.body)])
        elif isinstance(s, kir.If):
            out.append(["if", shape(s.then), shape(s.orelse)])
        else:
            out.append(type(s).__name__)
    return out


def placed_body(row, uses_p=False) -> tuple:
    """Body0's statements (one row `row` inside the loop over a pass's rows) in a head class of two part slots both
    running it, after the dependency pass (opgen.kernel.kir_sync) placed the class's syncs."""
    cls = _class([body_func(0, "test", tuple(row), uses_p)], [uses_p], temps=4, parts=2)
    k, _ = ks.place_syncs(ks.strip_syncs(cls), hoist=ks.Hoist.NONE)
    return next(m for m in k.methods if m.name == "Body0").body


def test_barriers_by_dependency_in_a_straight_stream():
    # w1 = w0 * t1 and w2 = gather(w0) only read w0 (RAR): no barrier between them; w2 *= sign reads and writes w2,
    # which the gather wrote (RAW): a barrier; w1 += w2 reads w2 written since (RAW): another; the next row's
    # w1 = w0 * t1 overwrites the w1 this row's Add wrote (WAW): one at the head of the row
    t1, s0, p0 = kir.Ref("tab_", slot=Lit(1)), kir.Ref("sign_", slot=Lit(0)), kir.Ref("perm_", slot=Lit(0))
    row = (mul(w(1), w(0), t1),
           kir.vec(Op.GATHER, dst=w(2), src=w(0), offset=p0, base=Lit(0), count=N),
           mul(w(2), w(2), s0),
           kir.vec(Op.ADD, dst=w(1), src0=w(1), src1=w(2), count=N))
    assert shape(placed_body(row)) == [["for", ["B", "Mul w1", "Gather w2", "B", "Mul w2", "B", "Add w1"]]]


def test_war_and_waw_and_disjoint_slots():
    # w1 = w0 * w0 reads w0; w0 = w2 * w2 then writes it (WAR): a barrier; w3 = ... is independent of both; the
    # second w0 = ... writes after the first (WAW); the next row's first Mul reads the w0 written last (RAW)
    row = (mul(w(1), w(0), w(0)), mul(w(3), w(2), w(2)), mul(w(0), w(2), w(2)), mul(w(0), w(2), w(2)))
    assert shape(placed_body(row)) == [["for", ["B", "Mul w1", "Mul w3", "B", "Mul w0", "B", "Mul w0"]]]


def test_branches_and_helpers_get_barriers_by_dependency():
    # then: Mul w0 reads w1 the Mul before the If wrote (RAW): a barrier; LoadRow writes tab_[0] the Mul w0 read
    # (WAR): a barrier; Mul w3 reads the tab_[0] LoadRow<T> wrote (its cast's end is not known for every T: RAW, a
    # barrier); RowSum reads w0, ordered since by the barrier before LoadRow. else: Mul w0 reads w1 (RAW). The next
    # row's Mul w1 overwrites the w1 both branches read (WAR): a barrier at the head of the row.
    rs = kir.Call("RowSum", (w(0), N), result="s0")
    t0 = kir.Ref("tab_", slot=Lit(0))
    load = kir.Call("LoadRow", (t0, kir.GmView("gm_x"), N), targs=("T",))
    then = (mul(w(0), w(1), t0), load, mul(w(3), w(1), t0), rs)
    orelse = (mul(w(0), w(1), w(1)),)
    row = (mul(w(1), w(2), w(2)), kir.If((Constraint("<", Sym("seqPos"), Sym("p.cond[0]")),), then, orelse))
    assert shape(placed_body(row, uses_p=True)) == [["for", [
        "Let", "B", "Mul w1", ["if", ["B", "Mul w0", "B", "call LoadRow", "B", "Mul w3", "call RowSum"],
                               ["B", "Mul w0"]]]]]


def test_a_row_ending_in_a_row_sum_gets_no_barrier_at_its_head():
    # RowSum reads w3 the Mul wrote (RAW): a barrier; its V -> S wait orders every vector instruction before the
    # scalar unit goes on, so the next row's Mul w3 (WAR) needs none
    row = (mul(w(3), w(0), w(0)), kir.Call("RowSum", (w(3), N), result="s0"))
    assert shape(placed_body(row)) == [["for", ["Mul w3", "B", "call RowSum"]]]


def _class(bodies, uses_p=None, temps=2, parts=0):
    """A head class of `bodies`; with `parts`, that many part slots, each running body 0 (a SetupPart of Kernel
    IR: the dependency pass analyses the whole class)."""
    counts = {k: 2 for k in ("kIn", "kOut", "kStatIn", "kStatOut", "kTemps", "kTab", "kCol", "kAcc", "kPerm",
                             "kSign", "kCond")}
    counts["kTemps"] = temps
    setup = kir.Func("SetupPart", (kir.Param("j"), kir.Param("p", "struct", PART)),
                     (kir.StructSet("p.seq", Sym("headNum")), kir.StructSet("p.body", Lit(0)), kir.Return(Lit(1))),
                     ret="int64_t")
    s = HeadSchedule(counts, tuple(bodies), tuple(uses_p or [True] * len(bodies)), accs=(("dw", "CAST_RINT"),),
                     lanes=True, needs={"paramQue": True, "accOutQue": True, "reduceBuf": True},
                     float_attrs=("eps",), gms=(("x", "T"),), args=("x", "dw"), nparts=parts,
                     part_funcs=(setup,) if parts else (),
                     body_lanes=((("perm", 0, 1, "half_swap"), ("sign", 1, 0, "low_half")),) * len(bodies))
    return head_class("K", s)


def test_a_body_with_row_conditions_verifies_and_prints():
    def case(truth):
        out = table_row(1) if truth[0] else []
        return out + [mul(w(0), w(1), kir.Ref("tab_", slot=Lit(1)) if truth[0] else w(1))]
    f = body_func(0, "doc", row_conditions(1, case), True)
    g = body_func(1, "doc", (mul(w(0), w(1), w(1)),), False)
    k = _class([f, g], [True, False])
    text = kir.methods_cpp(k, ["Body0", "Body1", "Compute"])
    assert "__aicore__ inline void Body0(const Part& p, int64_t r0, int64_t k)" in text
    assert "const int64_t seqPos = (r0 + i) / heads_ % p.seq;" in text
    assert "if (seqPos < p.cond[0]) {" in text
    assert "const int64_t tabRow1 = seqPos + p.tabOff[1];" in text and "if (tabRow1 != tabRow1_) {" in text
    assert "LoadRow<T>(tab_[1], p.tab[1][tabRow1 * headDim_], headDim_);" in text
    assert "inline void Body1(int64_t k)" in text
    # Compute runs the part's body by its index, with the arguments each takes
    assert "if (p.body == 0) {\n            Body0(p, r0, k);" in text and "Body1(k);" in text


def test_struct_parameter_rules():
    # a field of something that is not a struct parameter, or that the struct does not declare, or out of its
    # array, or an array used without its index, is rejected
    for sym in ("q.seq", "p.nope", "p.cond[2]", "p.cond", "p.in[0]"):
        bad = body_func(0, "doc", (kir.Let("x", Sym(sym)),), True)
        with pytest.raises(kir.IRError, match=re.escape(sym.split("[")[0])):
            kir.verify(_class([bad]))
    # a GM tensor field is a GmView's tensor; an int field is not
    ok = body_func(0, "doc", (kir.Call("LoadRow", (w(0), kir.GmView("p.col[1]"), N), targs=("T",)),), True)
    kir.verify(_class([ok]))
    bad = body_func(0, "doc", (kir.Call("LoadRow", (w(0), kir.GmView("p.seq"), N), targs=("T",)),), True)
    with pytest.raises(kir.IRError, match="not a gm field"):
        kir.verify(_class([bad]))
    # a struct parameter is passed only a struct parameter
    k = _class([])
    wrong = kir.Call("CopyIn", (Sym("r0"), Sym("r0"), Sym("k")))
    f = kir.Func("Body0", (kir.Param("r0"), kir.Param("k")), (wrong,))
    with pytest.raises(kir.IRError, match="not a struct parameter"):
        kir.verify(kir.KernelClass(k.name, k.tiling_struct, k.args, k.gms, k.locals, k.tensors, k.scalars, k.fields,
                                   k.init, k.process, k.methods + (f,), k.tparams, k.doc, k.structs))


@pytest.mark.parametrize("table", ["perms", "signs"])
def test_lane_families_in_the_kernel_are_the_python_maps(table):
    # the dim expressions PrepareLanes prints, evaluated lane by lane, against the maps the lowering matched
    from opgen.kernel.headrows import PERMS, SIGNS

    for name, (expr, py) in (PERMS if table == "perms" else SIGNS).items():
        for d in (2, 4, 6, 34, 128):
            e = expr(Sym("l"), Sym("d"))
            assert [e.evaluate({"l": j, "d": d}) for j in range(d)] == [py(j, d) for j in range(d)], (name, d)


def test_prepare_lanes_writes_the_tables_by_the_scalar_unit_then_flags():
    # PrepareLanes fills the lane tables on the scalar unit; the dependency pass orders the previous part's vector
    # reads of them (Gather's offsets, the sign row) before the fill (V -> S) and the fill before this part's reads
    # (S -> V), around the call
    p0, s1 = kir.Ref("perm_", slot=Lit(0)), kir.Ref("sign_", slot=Lit(1))
    row = (kir.vec(Op.GATHER, dst=w(2), src=w(0), offset=p0, base=Lit(0), count=N), mul(w(3), w(2), s1))
    cls = _class([body_func(0, "doc", row, True)], temps=4, parts=2)
    text = kir.methods_cpp(cls, ["PrepareLanes"])
    assert "if (p.permWant[0] >= 0 && p.permWant[0] != permFamily0_) {" in text
    assert ("perm_[0].SetValue(l, static_cast<uint32_t>((l + headDim_ / 2) % headDim_ * sizeof(float)));"
            in text)
    assert "sign_[1].SetValue(l, static_cast<float>(l < headDim_ / 2 ? -1 : 1));" in text
    assert "SetFlag" not in text   # the schedule writes none
    placed, _ = ks.place_syncs(ks.strip_syncs(cls), hoist=ks.Hoist.NONE)
    run = kir.methods_cpp(placed, ["RunPart"])
    call = run.index("PrepareLanes(p);")
    assert run.rindex("SetFlag<HardEvent::V_S>", 0, call) < call < run.index("SetFlag<HardEvent::S_V>", call)


@pytest.mark.slow
def test_graph_stage_kernel_prints_the_head_bodies():
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli_main(["graph", "NormRopeConcat", "--stage", "kernel", "--present", "rope_sin,rope_cos"]) == 0
    text = out.getvalue()
    sched = text[text.index("schedule (Kernel IR"):]
    bodies = re.findall(r"^  func (Body\d+)\(", sched, re.M)
    assert len(bodies) >= 10
    # a RoPE body: the rotation's Gather through the lane table, under the row condition, a barrier before its use
    assert re.search(r"if seqPos < p\.cond\[0\] \{\n(?:.*\n)*?\s+v\.Gather dst=w_<(\d)>.*\n\s+barrier V\n"
                     r"\s+v\.Mul dst=w_<\1>", sched)


# ------------------------------------------------------------------ the emitted kernel: every placed sync is needed
# the README case (one row a core), then a sequence long enough that a core runs several rows: RoPE rows, rows
# past the RoPE table one after another, and across a batch row into the next one's RoPE rows (the loop-carried
# orders of a body whose branches differ)
NRC_CASES = (dict(B=2, Sq=5, Sk=4, N=3, D=34, Seq=3, Sek=2, R=6), dict(B=2, Sq=50, Sk=40, N=3, D=34, Seq=3, Sek=2,
                                                                         R=20))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_deleting_any_one_placed_sync_of_norm_rope_concat_is_a_race(tmp_path, monkeypatch, session_build_root):
    """The bundled NormRopeConcat kernel (float16, RoPE and both norms; a head-rows kernel, every flag and barrier
    placed by the dependency pass, opgen.kernel.kir_sync): built once with each placed sync guarded, it runs
    unmutated in every case with no fault (launch only); then, for each site the cases reach, the same binary with only that site skipped
    fails `check` with a race fault in a case that reaches it (the emulation's race detector:
    opgen/emu/include/EMU.md "Pipes and races"), but the syncs whose dependence no run of this operator exercises
    (named below)."""
    from opgen.check import run_check

    snake = "norm_rope_concat"
    orig, sites = guard_package(Path(__file__).resolve().parents[1] / "generated" / snake, tmp_path / "gen", snake)
    assert sum("SetFlag" in s for _k, _l, s in sites) >= 3 and sum("PipeBarrier" in s for _k, _l, s in sites) >= 50
    attrs = dict(norm_type=1, norm_added_type=2, rope_type=1, concat_order=0, is_training=True)

    def check(dims):
        return run_check("NormRopeConcat", dims=dims, attrs=attrs, dtypes={"T": "float16"}, gen_dir=tmp_path / "gen",
                         build_root=session_build_root, progress=False, golden=False)   # a race is a fault

    reached, survivors = reach_then_mutate(sites, NRC_CASES, check, monkeypatch, tmp_path / "reached.txt")
    flags = {sites[k][2].split("(")[0] for k in reached if "SetFlag" in sites[k][2]}
    assert len(reached) >= 25 and {"SetFlag<HardEvent::S_V>", "SetFlag<HardEvent::V_S>"} <= flags, flags
    lines = orig.split("\n")
    survivors = [(ln, stmt, lines[ln - 1].split("//")[-1].strip()) for ln, stmt, _f in survivors]
    # Sound syncs whose dependence no case makes the emulation see unordered, each named: the V -> S before
    # PrepareLanes refills a lane table (the parts of one attribute key read one lane family, so a table is filled
    # before any vector read of it); the S -> V of the second staged statistic (the first slot's S -> V orders it
    # whenever that slot is used, and these parts use both); and the barrier at the head of the RoPE (then) branch
    # of a body with a row condition, right after the table-row loads: an earlier row's else branch read w_[0], and
    # a row entering the branch from it loads a new table row whose LoadRow orders that read. It is needed when the
    # table row does not change across the wrap (a row condition admitting one sequence position): no case covers
    # that. The else branch's head barrier does race when deleted (the second case).
    unexercised = {"laneBuf_: V has read it before S overwrites it",
                   "statStageBuf1_: S has written it before V reads it"}
    rope_heads = [x for x in survivors if x[2] not in unexercised]
    assert len(survivors) - len(rope_heads) <= 2, survivors
    bodies = set()
    for ln, stmt, why in rope_heads:
        above = [x.strip() for x in lines[max(0, ln - 6):ln - 1] if x.strip()]
        body = next(m.group(1) for x in reversed(lines[:ln])
                    if (m := re.match(r"\s*__aicore__ inline \w+ (Body\d+)\(", x)))
        assert why == "workBuf_: V has read it before V overwrites it" and stmt == "PipeBarrier<PIPE_V>();", survivors
        assert above[-1] == "}" and any(x.startswith("LoadRow<T>(tab_") for x in above), (ln, above)
        bodies.add(body)
    assert len(bodies) == len(rope_heads) <= 2, survivors
