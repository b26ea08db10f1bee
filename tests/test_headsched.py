"""The head-rows schedule as Kernel IR (opgen.kernel.headsched, opgen.codegen.headkernel): the vector barriers a body
gets by dependency (expected placements derived by hand from the RAW / WAW / WAR rule of docs/reference/ascendc.md
§1.6), the struct parameter of the Kernel IR (kir.Param kind "struct"), and the bundled kernels' bodies as
instruction-table nodes that the verifier accepts and `opgen graph --stage kernel` prints."""

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
from opgen.codegen.headkernel import table_row
from opgen.kernel.headsched import HeadSchedule, body_func, head_class, place_vbarriers, row_conditions

from mutants import GUARD as _GUARD  # noqa: E402
from opgen.kernel.isa import Op, Pipe

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


def test_barriers_by_dependency_in_a_straight_stream():
    # w1 = w0 * t1 and w2 = gather(w0) only read w0 (RAR): no barrier between them; w2 *= sign reads and writes w2,
    # which the gather wrote (RAW): a barrier; w1 += w2 reads w2 written since (RAW): another; the tail: one.
    t1, s0, p0 = kir.Ref("tab_", slot=Lit(1)), kir.Ref("sign_", slot=Lit(0)), kir.Ref("perm_", slot=Lit(0))
    stream = (mul(w(1), w(0), t1),
              kir.vec(Op.GATHER, dst=w(2), src=w(0), offset=p0, base=Lit(0), count=N),
              mul(w(2), w(2), s0),
              kir.vec(Op.ADD, dst=w(1), src0=w(1), src1=w(2), count=N))
    assert shape(place_vbarriers(stream)) == ["Mul w1", "Gather w2", "B", "Mul w2", "B", "Add w1", "B"]


def test_war_and_waw_and_disjoint_slots():
    # w1 = w0 * w0 reads w0; w0 = w2 * w2 then writes it (WAR): a barrier; w3 = ... is independent of both.
    stream = (mul(w(1), w(0), w(0)), mul(w(3), w(2), w(2)), mul(w(0), w(2), w(2)), mul(w(0), w(2), w(2)))
    assert shape(place_vbarriers(stream)) == ["Mul w1", "Mul w3", "B", "Mul w0", "B", "Mul w0", "B"]


def test_queue_rows_are_one_region_and_given_barriers_are_rederived():
    # two stores into different slots of rowOut_ (queue blocks, not fixed-stride views): taken as overlapping (WAW)
    out0 = kir.Ref("rowOut_", Sym("i"), slot=Lit(0))
    out1 = kir.Ref("rowOut_", Sym("i"), slot=Lit(1))
    stream = (kir.Barrier(Pipe.V),
              kir.vec(Op.CAST_TO, dst=out0, src=w(0), mode="CAST_ROUND", count=N),
              kir.Barrier(Pipe.V),
              kir.vec(Op.CAST_TO, dst=out1, src=w(1), mode="CAST_ROUND", count=N))
    assert shape(place_vbarriers(stream)) == ["CastTo r0", "B", "CastTo r1", "B"]


def test_pending_work_flows_through_branches_and_around_loops():
    # RowSum reads w0 which a Mul wrote: a barrier before it unless one came since, nothing pending after it (its V->S
    # wait); LoadRow writes tab_[0] which the Mul before it read (WAR): a barrier before it, nothing pending after it
    # (it ends with one). The else branch leaves w1 read and w0 written pending: it flows around the loop, so the
    # next iteration's Mul w1 (WAR on w1) needs a barrier at the loop head, and one ends the stream. The Mul w1
    # before the If costs both branches a barrier (each starts by reading w1): one goes before the If instead.
    rs = kir.Call("RowSum", (w(0), N), result="s0")
    t0 = kir.Ref("tab_", slot=Lit(0))
    load = kir.Call("LoadRow", (t0, kir.GmView("gm_x"), N), targs=("T",))
    then = (mul(w(0), w(1), t0), load, mul(w(3), w(1), t0), rs)
    orelse = (mul(w(0), w(1), w(1)),)
    body = (mul(w(1), w(2), w(2)), kir.If((Constraint("<", Sym("seqPos"), Sym("p.cond[0]")),), then, orelse))
    got = shape(place_vbarriers((kir.For("i", Lit(0), Sym("k"), Lit(1), body),)))
    assert got == [["for", ["B", "Mul w1", "B", ["if", ["Mul w0", "B", "call LoadRow", "Mul w3", "call RowSum"],
                                                      ["Mul w0"]]]], "B"]


def test_a_loop_without_a_carried_dependency_gets_no_barrier_at_its_head():
    # each iteration's work ends with RowSum (nothing pending): no barrier at the loop head or after the loop
    body = (mul(w(3), w(0), w(0)), kir.Call("RowSum", (w(3), N), result="s0"))
    assert shape(place_vbarriers((kir.For("i", Lit(0), Sym("k"), Lit(1), body),))) == [["for", ["Mul w3", "B",
                                                                                                "call RowSum"]]]
    # a branch that skips its work leaves the work before it pending after the If (the join of both paths)
    skip = (mul(w(1), w(0), w(0)), kir.If((Sym("flag"),), (kir.Call("RowSum", (w(2), N), result="s1"),)),
            mul(w(0), w(2), w(2)))
    assert shape(place_vbarriers(skip)) == ["Mul w1", ["if", ["call RowSum"], []], "B", "Mul w0", "B"]


def _class(bodies, uses_p=None):
    counts = {k: 2 for k in ("kIn", "kOut", "kStatIn", "kStatOut", "kTemps", "kTab", "kCol", "kAcc", "kPerm",
                             "kSign", "kCond")}
    s = HeadSchedule(counts, tuple(bodies), tuple(uses_p or [True] * len(bodies)), accs=(("dw", "CAST_RINT"),),
                     lanes=True, needs={"paramQue": True, "accOutQue": True, "reduceBuf": True},
                     float_attrs=("eps",), gms=(("x", "T"),), args=("x", "dw"),
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
    text = kir.methods_cpp(_class([body_func(0, "doc", (mul(w(0), w(1), w(1)),), True)]), ["PrepareLanes"])
    assert "if (p.permWant[0] >= 0 && p.permWant[0] != permFamily0_) {" in text
    assert ("perm_[0].SetValue(l, static_cast<uint32_t>((l + headDim_ / 2) % headDim_ * sizeof(float)));"
            in text)
    assert "sign_[1].SetValue(l, static_cast<float>(l < headDim_ / 2 ? -1 : 1));" in text
    assert text.index("signFamily1_ = p.signWant[1];") < text.index("SetFlag<HardEvent::S_V>(0);")


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
_SYNC = re.compile(r"^(\s*)(PipeBarrier<PIPE_V>\(\);|SetFlag<HardEvent::\w+>\(\w+\);)(.*)$")


def _code(line: str) -> str:
    return line.split("//")[0].strip()


def guard_syncs(text: str) -> tuple[str, list]:
    """`text` (an emitted head kernel header) with each flag pair (SetFlag + WaitFlag) and each PipeBarrier<PIPE_V>
    between two vector instructions of one straight-line run of a body (the previous statement a call, not a scalar
    let; the next one not the end of a block) guarded by OpgenKeep(i); and [(i, line, statement)] of the sites.
    The barriers at a block's start or end and the flag pairs at a block's start are left alone: they order work
    across a branch or loop edge or the function's end, which one run of the kernel does not always exercise (the
    V->S before a Gather table is refilled orders an earlier part's reads of it: none before the first fill)."""
    lines = text.split("\n")
    out, sites, body = [], [], False
    i = 0
    while i < len(lines):
        ln = lines[i]
        if re.match(r"\s*__aicore__ inline \w+ (\w+)\(", ln):
            body = re.match(r"\s*__aicore__ inline \w+ Body\d+\(", ln) is not None
        m = _SYNC.match(ln)
        take = False
        if m and m.group(2).startswith("SetFlag"):   # not at a block's start (a branch's first work, as below)
            prev = next(_code(x) for x in reversed(lines[:i]) if _code(x))
            take = "WaitFlag" in lines[i + 1] and not prev.endswith("{")
        elif m and body:
            prev = next(_code(x) for x in reversed(lines[:i]) if _code(x))
            nxt = next(_code(x) for x in lines[i + 1:] if _code(x))
            take = prev.endswith(");") and not prev.startswith("const ") and not nxt.startswith("}")
        if take:
            stmt = m.group(2) + (" " + _code(lines[i + 1]) if m.group(2).startswith("SetFlag") else "")
            k = len(sites)
            sites.append((k, i + 1, stmt))
            out.append(f"{m.group(1)}if (OpgenKeep({k})) {{ {stmt} }}{m.group(3)}")
            i += 2 if m.group(2).startswith("SetFlag") else 1
            continue
        out.append(ln)
        i += 1
    text = "\n".join(out).replace('#include "kernel_operator.h"\n', '#include "kernel_operator.h"\n' + _GUARD, 1)
    return text, sites


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_deleting_any_one_placed_sync_of_norm_rope_concat_is_a_race(tmp_path, monkeypatch, session_build_root):
    """The bundled NormRopeConcat kernel (float16, RoPE and both norms): built once with every flag pair and every
    barrier the dependency rule placed between two vector instructions of a body guarded, it passes unmutated; then,
    for each such site the run reaches, the same binary with only that site skipped fails `check` with a race
    fault (the emulation's race detector: opgen/emu/include/EMU.md "Pipes and races")."""
    from opgen.check import run_check

    root = Path(__file__).resolve().parents[1]
    snake = "norm_rope_concat"
    shutil.copytree(root / "generated" / snake, tmp_path / "gen" / snake)
    h = tmp_path / "gen" / snake / "op_kernel" / f"{snake}.h"
    text, sites = guard_syncs(h.read_text())
    h.write_text(text)
    assert sum("SetFlag" in s for _k, _l, s in sites) >= 3 and sum("PipeBarrier" in s for _k, _l, s in sites) >= 50
    dims = dict(B=2, Sq=5, Sk=4, N=3, D=34, Seq=3, Sek=2, R=6)
    attrs = dict(norm_type=1, norm_added_type=2, rope_type=1, concat_order=0, is_training=True)

    def check():
        return run_check("NormRopeConcat", dims=dims, attrs=attrs, dtypes={"T": "float16"}, gen_dir=tmp_path / "gen",
                         build_root=session_build_root, progress=False)

    log = tmp_path / "reached.txt"
    monkeypatch.setenv("OPGEN_MUTANT_LOG", str(log))
    r = check()
    assert r.passed and not r.faults, r.faults
    monkeypatch.delenv("OPGEN_MUTANT_LOG")
    reached = sorted({int(x) for x in log.read_text().split()})
    flags = {sites[k][2].split("(")[0] for k in reached if "SetFlag" in sites[k][2]}
    assert len(reached) >= 25 and {"SetFlag<HardEvent::S_V>", "SetFlag<HardEvent::V_S>"} <= flags, flags
    survivors = []
    for k in reached:
        monkeypatch.setenv("OPGEN_MUTANT", str(k))
        r = check()
        if r.passed or not any("race (" in f for f in r.faults):
            survivors.append((sites[k][1], sites[k][2], r.faults[:1]))
    assert not survivors, survivors
