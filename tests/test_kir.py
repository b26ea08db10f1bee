"""The Kernel IR (opgen.kernel.kir): programs built by hand are verified, printed as text and as C++, and the printed
C++ runs in the emulation (opgen/emu/include) against float64 NumPy math; malformed programs are refused with the
node named; deleting a synchronisation from the IR makes the emulation report a race."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess

import numpy as np
import pytest

from opgen.codegen.env import template_env
from opgen.ir.dims import Constraint, Lit, Sym, fn
from opgen.kernel import kir, kir_sync
from opgen.kernel.isa import Op, Pipe
from opgen.kernel.kir import (BLOCK_IDX, Alloc, Assign, Barrier, Call, Comment, Copy, DeQue, E, EnQue,
                              For, Free, FRef, Func, Get, GetValue, GmTensor, GmView, If, InitBuffer, IRError,
                              KernelClass, Let, Local, Param, Ref, SetFlag, SetValue, SizeOf, TensorVar,
                              TPos, WaitFlag, to_cpp, to_text, verify, vec)

from test_isa import BASE

F4 = SizeOf("float")


def rows_kernel(name: str = "RowsDemo", barrier: bool = True, flags: bool = True) -> KernelClass:
    """y[r, :] = 2 x[r, :] + 1 and s[r] = sum of y[r, :] over rows split across cores (rowsPerCore each, the last
    core the rest), `pass` rows per iteration (the last one shorter), double-buffered queues, the sum staged by
    the scalar unit. barrier=False drops the V barrier before the reduction, flags=False the V->S hand-off."""
    colA, hid, ps = E("colAlign"), E("hidden"), E("pass")
    copy_in = Func("CopyIn", (Param("r0"), Param("k")), (
        Alloc("t", "inQ", "float"),
        Copy(Ref("t"), GmView("gmX", E("r0") * hid), E("k"), hid * F4, Lit(0), (colA - hid) * F4 // 32,
             doc="k rows, UB rows colAlign apart"),
        EnQue("inQ", "t"),
    ))
    per_row = [
        vec(Op.MULS, dst=Ref("o", E("i") * colA), src0=Ref("t", E("i") * colA), scalar=2.0, count=hid),
        Barrier(Pipe.V),
        vec(Op.ADDS, dst=Ref("o", E("i") * colA), src0=Ref("o", E("i") * colA), scalar=1.0, count=hid),
    ]
    if barrier:
        per_row.append(Barrier(Pipe.V))
    per_row.append(vec(Op.REDUCE_SUM, dst=Ref("red"), src=Ref("o", E("i") * colA), tmp=Ref("redTmp"), count=hid))
    if flags:
        per_row += [SetFlag(Pipe.V, Pipe.S), WaitFlag(Pipe.V, Pipe.S)]
    per_row += [GetValue("sum", Ref("red")), SetValue(Ref("stage", E("i")), FRef("sum"))]
    compute = Func("Compute", (Param("k"),), (
        DeQue("t", "inQ", "float"),
        Alloc("o", "outQ", "float"),
        For("i", Lit(0), E("k"), Lit(1), tuple(per_row)),
        EnQue("outQ", "o"),
        Free("inQ", "t"),
    ))
    copy_out = Func("CopyOut", (Param("r0"), Param("k")), (
        DeQue("o", "outQ", "float"),
        Copy(GmView("gmY", E("r0") * hid), Ref("o"), E("k"), hid * F4, (colA - hid) * F4 // 32, Lit(0)),
        Free("outQ", "o"),
        SetFlag(Pipe.S, Pipe.MTE3), WaitFlag(Pipe.S, Pipe.MTE3),
        Copy(GmView("gmS", E("r0")), Ref("stage"), Lit(1), E("k") * F4),
        SetFlag(Pipe.MTE3, Pipe.S), WaitFlag(Pipe.MTE3, Pipe.S),
    ))
    process = (
        Let("rowStart", BLOCK_IDX * E("rowsPerCore")),
        Let("rowEnd", fn("min", E("rowStart") + E("rowsPerCore"), E("rows"))),
        InitBuffer("inQ", ps * colA * F4, 2),
        InitBuffer("outQ", ps * colA * F4, 2),
        InitBuffer("redBuf", Lit(64 * 4)),
        InitBuffer("stageBuf", fn("align_up", ps, 8) * F4),
        Get("red", "redBuf", "float"),
        Get("redTmp", "redBuf", "float", Lit(8)),
        Get("stage", "stageBuf", "float"),
        Comment("rows of this core, pass rows at a time"),
        For("r0", E("rowStart"), E("rowEnd"), ps, (
            Call("CopyIn", (E("r0"), E("k"))),
            Call("Compute", (E("k"),)),
            Call("CopyOut", (E("r0"), E("k"))),
        ), tail="k"),
    )
    return KernelClass(
        name, "DemoTiling", args=("x", "y", "s"),
        gms=(GmTensor("gmX", "float", "x"), GmTensor("gmY", "float", "y"), GmTensor("gmS", "float", "s")),
        locals=(Local("inQ", TPos.VECIN, True), Local("outQ", TPos.VECOUT, True), Local("redBuf"),
                Local("stageBuf")),
        tensors=(TensorVar("red", "float"), TensorVar("redTmp", "float"), TensorVar("stage", "float")),
        fields=("rows", "hidden", "colAlign", "rowsPerCore", "pass"),
        process=process, methods=(copy_in, compute, copy_out), doc="a demo rows kernel")


def test_a_rows_kernel_verifies_and_prints_its_schedule_as_text():
    k = verify(rows_kernel())
    text = to_text(k)
    for line in ("local inQ: VECIN queue depth 1", "for r0 in [rowStart, rowEnd) step pass tail k {",
                 "t = alloc inQ as float", "copy.mte2 t[0] <- gmX[hidden * r0]", "enque inQ t",
                 "v.ReduceSum dst=red[0], src=o[colAlign * i]", "set_flag V->S #0", "wait_flag V->S #0",
                 "copy.mte3 gmY[hidden * r0] <- o[0]", "call CopyIn(r0, k)", "barrier V"):
        assert line in text, line
    assert to_text(rows_kernel()) == text   # canonical: equal programs, equal text


def test_the_cpp_printer_prints_the_schedule_through_the_table():
    cpp = to_cpp(rows_kernel())
    for line in ("const int64_t rowEnd = rowStart + td_->rowsPerCore < td_->rows ? rowStart + td_->rowsPerCore : "
                 "td_->rows;",
                 "for (int64_t r0 = rowStart; r0 < rowEnd; r0 += td_->pass) {",
                 "const int64_t k = rowEnd - r0 < td_->pass ? rowEnd - r0 : td_->pass;",
                 "LocalTensor<float> t = inQ.template AllocTensor<float>();",
                 "pipe_.InitBuffer(inQ, 2, td_->colAlign * td_->pass * sizeof(float));",
                 "pipe_.InitBuffer(stageBuf, AlignUp(td_->pass, 8) * sizeof(float));",
                 "Muls(o[td_->colAlign * i], t[td_->colAlign * i], 2.0f, static_cast<int32_t>(td_->hidden));",
                 "ReduceSum(red, o[td_->colAlign * i], redTmp, static_cast<int32_t>(td_->hidden));",
                 "SetFlag<HardEvent::V_S>(0);", "const float sum = red.GetValue(0);", "stage.SetValue(i, sum);",
                 "TQue<TPosition::VECIN, 1> inQ;", "TBuf<TPosition::VECCALC> redBuf;",
                 "gmX.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(x));", "PipeBarrier<PIPE_V>();"):
        assert line in cpp, line
    assert "DataCopyPad(t, gmX[td_->hidden * r0], DataCopyExtParams(static_cast<uint16_t>(k), " in cpp
    assert "std::" not in cpp


def _replace(k: KernelClass, method: str, body) -> KernelClass:
    ms = tuple(Func(m.name, m.params, body(m.body), m.ret, m.const, m.doc) if m.name == method else m
               for m in k.methods)
    return KernelClass(**{**k.__dict__, "methods": ms})


@pytest.mark.parametrize("mutate, rule", [
    (lambda k: _replace(k, "CopyIn", lambda b: b[:2]), "nothing enqueued"),          # never enqueued
    (lambda k: _replace(k, "Compute", lambda b: b[1:]), "DeQue|used before"),          # t never dequeued
    (lambda k: _replace(k, "CopyOut", lambda b: b[:3] + b[4:]), "without a SetFlag"),  # SetFlag dropped
    (lambda k: _replace(k, "CopyOut", lambda b: b[:4] + b[5:]), "set again|loop"),    # WaitFlag dropped
    (lambda k: _replace(k, "CopyIn", lambda b: (Alloc("t", "inQ", "float"),) + b), "loop .* leaves|all 2"),
    (lambda k: _replace(k, "Compute", lambda b: b + (Let("zz", E("nope")),)), "symbol nope"),
    (lambda k: _replace(k, "Compute", lambda b: b + (Call("Nope"),)), "Nope"),
    (lambda k: _replace(k, "Compute", lambda b: b + (vec(Op.ADD, dst="o", src0="o", count=E("k")),)),
     "src1 missing"),
    (lambda k: _replace(k, "Compute", lambda b: b + (vec(Op.DUPLICATE, dst=Ref("red", Lit(60)), scalar=0.0,
                                                         count=Lit(8)),)), "outside its buffer"),
    # a reinterpreted region is checked in bytes: 24 halves from float 56 end 16 bytes past the block
    (lambda k: _replace(k, "Compute", lambda b: b + (vec(Op.DUPLICATE, dst=Ref("red", Lit(56), as_dtype="half"),
                                                         scalar=0.0, count=Lit(24)),)), "outside its buffer"),
    (lambda k: _replace(k, "Compute", lambda b: b + (SetFlag(Pipe.V, Pipe.V),)), "V_V does not exist"),
    (lambda k: KernelClass(**{**k.__dict__, "name": "Bad Name"}), "not a usable C\\+\\+ identifier"),
    # a local named like an element type would shadow it (a later sizeof(half) would read the int64's 8 bytes)
    (lambda k: _replace(k, "Compute", lambda b: (Let("half", Lit(1)),) + b), "element type the printer emits"),
    (lambda k: KernelClass(**{**k.__dict__, "process": k.process[:2] + k.process[3:]}), "before its InitBuffer"),
    (lambda k: _replace(k, "CopyOut", lambda b: b[:2]), "loop over r0 leaves"),              # never freed
])
def test_the_verifier_names_the_rule_a_malformed_program_breaks(mutate, rule):
    with pytest.raises(IRError, match=rule):
        verify(mutate(rows_kernel()))


def test_the_verdict_is_remembered_for_a_well_formed_class_only():
    """kir.verify remembers a class object it found well formed (kir._VERIFIED: the nodes are frozen, so the
    verdict cannot change) and verifies an equal but distinct object afresh; a malformed class is never
    remembered: it raises on every call."""
    k = rows_kernel()
    assert verify(k) is k and kir._VERIFIED.get(id(k)) is k
    assert verify(k) is k
    bad = _replace(k, "CopyIn", lambda b: b[:2])
    for _ in range(2):
        with pytest.raises(IRError, match="nothing enqueued"):
            verify(bad)
    assert kir._VERIFIED.get(id(bad)) is None
    twin = rows_kernel()
    assert twin == k and kir._VERIFIED.get(id(twin)) is None
    assert verify(twin) is twin


def test_a_reinterpreted_region_inside_its_block_verifies():
    """16 halves from float 56 end exactly at the 64-float block's end: accepted (the bound is in bytes)."""
    k = _replace(rows_kernel(), "Compute", lambda b: b + (vec(Op.DUPLICATE, dst=Ref("red", Lit(56), as_dtype="half"),
                                                               scalar=0.0, count=Lit(16)),))
    verify(k)


def test_if_branches_and_assignments():
    k = rows_kernel()
    body = (Let("n", Lit(3), mutable=True),
            If((Constraint(">", E("n"), Lit(2)),), (Assign("n", E("n") - 1),), (Assign("n", Lit(0)),)),
            Let("m", E("n") * 2))
    verify(KernelClass(**{**k.__dict__, "init": body}))
    with pytest.raises(IRError, match="not a mutable"):
        verify(KernelClass(**{**k.__dict__, "init": (Let("n", Lit(3)), Assign("n", Lit(1)))}))
    with pytest.raises(IRError, match="m used before"):   # a name defined in a branch does not leak out
        verify(KernelClass(**{**k.__dict__, "init": (If((Constraint(">", BLOCK_IDX, Lit(0)),),
                                                        (Let("m", Lit(1)),)), Let("q", E("m")))}))
    cpp = to_cpp(KernelClass(**{**k.__dict__, "init": body}))
    assert "if (n > 2) {" in cpp and "} else {" in cpp and "int64_t n = 3;" in cpp


def _harness(classes: list[KernelClass], rows: int, hidden: int, cores: int, rows_per_core: int, pass_: int) -> str:
    col_align = -(-hidden // 8) * 8
    helpers = template_env().get_template("op_kernel/_helpers.h.j2").render()
    out = ['#include <cstdio>', '#include <vector>', '#include "kernel_operator.h"', '#include "emu/launch.h"',
           "using namespace AscendC;", helpers,
           "struct DemoTiling { int64_t rows, hidden, colAlign, rowsPerCore, pass; };"]
    out += [to_cpp(k) for k in classes]
    out += ["int main(int argc, char** argv)", "{",
            f"    std::vector<float> x({rows * hidden}), y({rows * hidden}, -7.0f), s({rows}, -7.0f);",
            "    FILE* f = std::fopen(argv[1], \"rb\");",
            "    if (!f || std::fread(x.data(), 4, x.size(), f) != x.size()) return 3;",
            "    std::fclose(f);",
            f"    DemoTiling td{{{rows}, {hidden}, {col_align}, {rows_per_core}, {pass_}}};",
            "    emu::RegisterGm(x.data(), x.size() * 4, \"x\");",
            "    emu::RegisterGm(y.data(), y.size() * 4, \"y\");",
            "    emu::RegisterGm(s.data(), s.size() * 4, \"s\");"]
    for k in classes:
        out += [f"    {{ auto r = emu::Launch({cores}, 196608, [&] {{ {k.name} op; "
                "op.Init(reinterpret_cast<GM_ADDR>(x.data()), reinterpret_cast<GM_ADDR>(y.data()), "
                "reinterpret_cast<GM_ADDR>(s.data()), nullptr, &td); op.Process(); });",
                f"      std::printf(\"{k.name} %d %s\\n\", r.ok ? 1 : 0, r.ok ? \"\" : r.firstFault.c_str());",
                "      if (r.ok) { f = std::fopen(argv[2], \"wb\"); std::fwrite(y.data(), 4, y.size(), f); "
                "std::fwrite(s.data(), 4, s.size(), f); std::fclose(f); } }"]
    return "\n".join(out + ["    return 0;", "}"]) + "\n"


@pytest.mark.slow
def test_printed_kernel_runs_in_the_emulation_and_a_dropped_sync_is_a_race(tmp_path):
    if shutil.which("g++") is None:
        pytest.skip("g++ not available")
    rows, hidden, cores, per, pass_ = 13, 37, 3, 5, 2        # cores get 5, 5, 3 rows; passes of 2, 2, 1 rows
    good, nobar, noflag = (rows_kernel("RowsGood"), rows_kernel("RowsNoBarrier", barrier=False),
                           rows_kernel("RowsNoFlag", flags=False))
    src = _harness([nobar, noflag, good], rows, hidden, cores, per, pass_)
    (tmp_path / "k.cpp").write_text(src)
    r = subprocess.run(BASE + [str(tmp_path / "k.cpp"), "-o", str(tmp_path / "k")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]
    rng = np.random.default_rng(4)
    x = rng.uniform(-2, 2, (rows, hidden)).astype(np.float32)
    (tmp_path / "x.bin").write_bytes(x.tobytes())
    run = subprocess.run([str(tmp_path / "k"), str(tmp_path / "x.bin"), str(tmp_path / "out.bin")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    verdict = {ln.split(" ")[0]: ln for ln in run.stdout.splitlines()}
    assert verdict["RowsGood"].startswith("RowsGood 1"), verdict["RowsGood"]
    for bad in ("RowsNoBarrier", "RowsNoFlag"):
        assert verdict[bad].startswith(f"{bad} 0") and "race" in verdict[bad].lower(), verdict[bad]
    got = np.frombuffer((tmp_path / "out.bin").read_bytes(), dtype=np.float32)
    y, s = got[:rows * hidden].reshape(rows, hidden), got[rows * hidden:]
    want_y = x.astype(np.float64) * 2 + 1
    assert np.array_equal(y, want_y.astype(np.float32))    # 2x + 1 is exact in fp32 for these inputs' magnitudes
    want_s = want_y.astype(np.float32).astype(np.float64).sum(axis=1)
    bound = np.finfo(np.float32).eps * 8 * np.abs(want_y).sum(axis=1)
    assert np.all(np.abs(s - want_s) <= bound)


def test_dim_functions_evaluate_print_and_substitute():
    from opgen.ir.dimprint import dim_cpp, dim_py
    from opgen.ir.dims import subst

    e = fn("min", Sym("a") + 1, 4) * 2 + fn("ceil_div", Sym("a"), 3) + fn("align_up", Sym("a"), 8)
    for a in (0, 1, 3, 5, 9):
        want = min(a + 1, 4) * 2 + -(-a // 3) + -(-a // 8) * 8
        assert e.evaluate({"a": a}) == want
        assert eval(dim_py(e, str, str), {}, {"a": a}) == want                     # noqa: S307 - our own text
    assert subst(e, {"a": Lit(5)}) == Lit(min(6, 4) * 2 + 2 + 8)
    assert "?" in dim_cpp(e, str, str) and fn("max", 3, 7) == Lit(7)
    assert kir.CppPrinter(rows_kernel()).e(fn("min", Sym("a"), fn("max", Sym("b"), 2))) == \
        "a < (b > 2 ? b : 2) ? a : (b > 2 ? b : 2)"


def test_pruning_drops_the_members_and_extern_methods_nothing_names():
    """prune_members keeps exactly the members a statement names (the demo kernel's own) and drops a declared
    buffer, tensor, scalar and extern method nothing uses; the pruned class verifies and prints the same methods."""
    from opgen.kernel.kir import ScalarVar, prune_members

    k = rows_kernel()
    fat = KernelClass(**{**k.__dict__, "locals": k.locals + (Local("spareBuf"),),
                         "tensors": k.tensors + (TensorVar("spare", "float"),),
                         "scalars": (ScalarVar("spare_"),), "methods": k.methods + (Func("Unused", extern=True),)})
    lean = verify(prune_members(fat))
    assert lean.locals == k.locals and lean.tensors == k.tensors and lean.scalars == ()
    assert [m.name for m in lean.methods] == [m.name for m in k.methods]
    assert "spareBuf" not in to_cpp(lean) and "spare_" not in to_cpp(lean)


def test_presence_members_are_set_by_init_from_the_pointers(monkeypatch):
    """A class's `presence` pairs a bool member with an optional argument: the printer's Init sets it from the
    pointer (`hasBias_ = bias != nullptr;`), the interpreter the same from whether the argument is given, and the
    verifier refuses a member that is not a bool scalar."""
    from opgen.kernel import kir_interp
    from opgen.kernel.kir import ScalarVar

    k = rows_kernel()
    k2 = KernelClass(**{**k.__dict__, "args": k.args + ("bias",), "scalars": (ScalarVar("hasBias_", "bool"),),
                        "presence": (("hasBias_", "bias"),)})
    cpp = to_cpp(k2)
    assert "this->hasBias_ = bias != nullptr;" in cpp and "(void)bias" not in cpp
    assert "presence hasBias_ = bias != nullptr" in to_text(k2)
    bad = KernelClass(**{**k2.__dict__, "scalars": (ScalarVar("hasBias_"),)})
    with pytest.raises(IRError, match="must be a bool scalar member"):
        verify(bad)
    rows, hid = 3, 8
    tiling = {"rows": rows, "hidden": hid, "colAlign": hid, "rowsPerCore": rows, "pass": 2}
    seen = {}
    real = kir_interp._Core.__init__

    def spy(self, *a, **kw):
        real(self, *a, **kw)
        seen.setdefault("cores", []).append(self)

    for given in (True, False):
        gm = {"x": np.ones(rows * hid, np.float32), "y": np.zeros(rows * hid, np.float32),
              "s": np.zeros(rows, np.float32), "bias": np.zeros(hid, np.float32) if given else None}
        seen.clear()
        with monkeypatch.context() as m:
            m.setattr(kir_interp._Core, "__init__", spy)
            r = kir_interp.run(k2, tiling, gm, 1)
        assert r.ok, r.faults
        assert [c.members["hasBias_"] for c in seen["cores"]] == [given]


def test_namespace_constants_tables_and_class_structs_are_printed_from_the_ir():
    """namespace_cpp prints a class's constexpr constants and ConstTables (axes by their constants' names, a row
    comment beside each row when given); a StructDecl with in_class is declared in the class's public section with
    its initialisers (a non-zero default, arrays value-initialised) and field comments, one without is left to the
    file."""
    from opgen.kernel.kir import ConstTable, StructDecl, namespace_cpp

    k = rows_kernel()
    k2 = KernelClass(**{**k.__dict__, "consts": (("kRows", 2, "rows of the table"), ("kCols", 3, "")),
                        "tables": (ConstTable("kT", "int8_t", (2, 3), (1, 2, 3, -4, -5, -6), doc="demo table",
                                              row_docs=("first", "second"), dim_names=("kRows", "kCols")),
                                   ConstTable("kU", "uint8_t", (2,), (7, 8))),
                        "structs": (StructDecl("Slot", (("seq", "int", "", None), ("use", "int", "", 2),
                                                        ("src", "gm", "float", 1)), defaults=(("seq", -1),),
                                               field_docs=(("use", "slots used"),), in_class=True),
                                    StructDecl("Shared", (("a", "int", "", None),)))})
    ns = namespace_cpp(k2)
    assert ns.splitlines() == ["constexpr int64_t kRows = 2;  // rows of the table", "constexpr int64_t kCols = 3;",
                               "", "// demo table", "constexpr int8_t kT[kRows][kCols] = {",
                               "    {1, 2, 3},  // first", "    {-4, -5, -6},  // second", "};",
                               "constexpr uint8_t kU[2] = {7, 8};"]
    cpp = to_cpp(k2)
    assert "    struct Slot {\n        int64_t seq = -1;\n        int64_t use[2] = {};  // slots used\n" \
           "        GlobalTensor<float> src[1];\n    };" in cpp
    assert "struct Shared" not in cpp
    with pytest.raises(IRError, match="table name kT is also a constant"):
        verify(KernelClass(**{**k2.__dict__, "consts": (("kT", 1, ""),)}))


def _guarded_output(k: KernelClass, copy_out: bool = True, enque: bool = True) -> KernelClass:
    """rows_kernel with output y written only when optional input `bias` is given (as AddRmsNormQuant's y2 under
    scales2): its Alloc and EnQue in Compute and its DeQue, copy and Free in CopyOut inside `if (hasBias_)`
    (opgen.kernel.rowsched `guard`), o a member tensor as rowOut_<y> is; copy_out / enque False leave that part
    unguarded (a mutant)."""
    from opgen.kernel.kir import If, ScalarVar

    has = (Sym("hasBias_"),)

    def compute(b):   # DeQue t, Alloc o, the loop (it writes o), EnQue o, Free t
        return (b[0], If(has, (b[1],)), If(has, (b[2],)), If(has, (b[3],)) if enque else b[3], b[4])

    def out(b):       # DeQue o, copy, Free o, then the statistic's copy (its row sums are y's: guarded too)
        return ((If(has, b[:3]),) if copy_out else b[:3]) + (If(has, b[3:]),)

    k = _replace(_replace(rows_kernel(), "Compute", compute), "CopyOut", out)
    return KernelClass(**{**k.__dict__, "args": k.args + ("bias",), "scalars": (ScalarVar("hasBias_", "bool"),),
                          "presence": (("hasBias_", "bias"),), "tensors": k.tensors + (TensorVar("o", "float"),)})


def test_an_output_guarded_by_a_presence_verifies_per_presence_and_a_half_guard_is_refused():
    """A queue whose protocol runs under a presence guard (kir.presence_split: an output written under some
    presences only) is verified once per value of the presence member: the guarded class verifies, the dependency
    pass keeps each presence's queue states apart (its blocks are not 'every block in use' after a pass whose
    CopyOut skipped them), the interpreter writes y only when bias is given and never touches it otherwise (y not
    bound: a store would fault); a guard dropped from the CopyOut (or the EnQue) alone is refused by the verifier."""
    from opgen.kernel import kir_interp, kir_sync

    k = _guarded_output(rows_kernel())
    assert kir.presence_split(k) == ("hasBias_",)
    verify(k)
    placed, _where = kir_sync.place_syncs(kir_sync.strip_syncs(k), prune=True, hoist=kir_sync.Hoist.NONE)
    assert kir_sync.conflicts(placed) == []
    rows, hid = 5, 8
    tiling = {"rows": rows, "hidden": hid, "colAlign": hid, "rowsPerCore": rows, "pass": 2}
    x = np.arange(rows * hid, dtype=np.float32)
    for given in (True, False):
        gm = {"x": x.copy(), "y": np.zeros(rows * hid, np.float32) if given else None,
              "s": np.zeros(rows, np.float32), "bias": np.zeros(hid, np.float32) if given else None}
        r = kir_interp.run(placed, tiling, gm, 1)
        assert r.ok, r.faults
        if given:
            np.testing.assert_array_equal(gm["y"], 2 * x + 1)
            np.testing.assert_array_equal(gm["s"], (2 * x + 1).reshape(rows, hid).sum(1))
    with pytest.raises(IRError, match="nothing enqueued|DeQue"):
        verify(_guarded_output(rows_kernel(), copy_out=False))
    with pytest.raises(IRError, match="hasBias_ = false"):
        verify(_guarded_output(rows_kernel(), enque=False))


def _per_presence_copies(k: KernelClass, second: bool = False) -> KernelClass:
    """rows_kernel serving both presences of an optional input `bias` (presence member hasBias_) as the joined
    row program prints one before kirguard: the per-row loop body once under `if (hasBias_)` (y = 2 x + 1) and once
    under `if (hasBias_ == 0)` (y = 2 x + 3), without syncs; second=True adds a presence member hasG_ (input g) and
    guards the copies by (hasBias_, hasG_) and (hasBias_, !hasG_) instead."""
    from opgen.kernel.kir import ScalarVar

    def body(add):
        return (vec(Op.MULS, dst=Ref("o", E("i") * E("colAlign")), src0=Ref("t", E("i") * E("colAlign")), scalar=2.0,
                    count=E("hidden")),
                vec(Op.ADDS, dst=Ref("o", E("i") * E("colAlign")), src0=Ref("o", E("i") * E("colAlign")),
                    scalar=add, count=E("hidden")),
                vec(Op.REDUCE_SUM, dst=Ref("red"), src=Ref("o", E("i") * E("colAlign")), tmp=Ref("redTmp"),
                    count=E("hidden")),
                GetValue("sum", Ref("red")), SetValue(Ref("stage", E("i")), FRef("sum")))

    has, hasnt = Sym("hasBias_"), Constraint("==", Sym("hasBias_"), Lit(0))
    g, nog = Sym("hasG_"), Constraint("==", Sym("hasG_"), Lit(0))
    conds = ((has, g), (has, nog)) if second else ((has,), (hasnt,))

    def compute(b):
        loop = b[2]
        return b[:2] + (dataclasses.replace(loop, body=(If(conds[0], body(1.0), doc="when bias present", guard=True),
                                                       If(conds[1], body(3.0), doc="when bias absent", guard=True))),) \
            + b[3:]

    k = kir_sync.strip_syncs(_replace(rows_kernel(), "Compute", compute))
    pres = (("hasBias_", "bias"),) + ((("hasG_", "g"),) if second else ())
    return KernelClass(**{**k.__dict__, "args": k.args + tuple(a for _m, a in pres),
                          "scalars": tuple(ScalarVar(m, "bool") for m, _a in pres), "presence": pres})


def test_hoist_guards_knows_guards_by_their_mark_not_their_words():
    """kirguard.hoist_guards rewrites the Ifs the lowering marked as presence guards (kir.If.guard), whatever their
    comment says: the two marked copies with comments other than kirguard's own words still join into one If whose
    branches hold only the Adds. An unmarked If testing the same member (a branch on the presence for another
    purpose) is left as it is, comment and form, where matching by condition rewrote it into a guard. The verifier
    refuses a mark on a condition that is not presence literals of the class's members."""
    from opgen.kernel.kirguard import hoist_guards

    k = _per_presence_copies(rows_kernel())

    def redoc(docs, marks):
        def fn(b):
            loop = b[2]
            ifs = tuple(dataclasses.replace(s, doc=d, guard=m) for s, d, m in zip(loop.body, docs, marks))
            return b[:2] + (dataclasses.replace(loop, body=ifs),) + b[3:]
        return _replace(k, "Compute", fn)

    out = hoist_guards(redoc(("bias given: + 1", "no bias: + 3"), (True, True)))
    loop = out.method("Compute").body[2]
    assert [type(s).__name__ if not isinstance(s, kir.Vec) else s.op.name for s in loop.body] == \
        ["MULS", "If", "REDUCE_SUM", "GetValue", "SetValue"]
    assert loop.body[1].guard and loop.body[1].cond == (Sym("hasBias_"),)
    plain = redoc(("the bias path, by hand", "no bias: + 3"), (False, True))
    out = hoist_guards(plain)
    first = out.method("Compute").body[2].body[0]
    assert first == plain.method("Compute").body[2].body[0], first   # untouched: not a guard
    bad = _replace(k, "Compute", lambda b: b[:2] + (dataclasses.replace(b[2], body=(
        If((Constraint(">", Sym("k"), Lit(0)),), b[2].body[0].then, doc="not presence", guard=True),)),) + b[3:])
    with pytest.raises(IRError, match="presence guard"):
        verify(bad)


def test_hoist_guards_leaves_only_what_differs_under_the_presence_guard():
    """kirguard.hoist_guards on two guarded copies of a row's work that differ in one Adds: the Muls before it and
    the ReduceSum, GetValue and SetValue after it move out of the guards, one If(hasBias_) holds the two Adds
    (then / else); the class verifies, the dependency pass leaves no conflict, and the interpreter gives
    y = 2 x + 1 with bias, 2 x + 3 without, s the row sums (by hand). Two guards of two members, (bias, g) and
    (bias, !g), join to one of bias holding If(g) of the Adds."""
    from opgen.kernel import kir_interp
    from opgen.kernel.kirguard import hoist_guards

    k = hoist_guards(_per_presence_copies(rows_kernel()))
    loop = k.method("Compute").body[2]
    kinds = [type(s).__name__ if not isinstance(s, kir.Vec) else s.op.name for s in loop.body]
    assert kinds == ["MULS", "If", "REDUCE_SUM", "GetValue", "SetValue"], kinds
    guard = loop.body[1]
    assert guard.cond == (Sym("hasBias_"),) and [s.arg("scalar") for s in guard.then + guard.orelse] == [kir.FConst(1.0), kir.FConst(3.0)]
    verify(k)
    placed, _where = kir_sync.place_syncs(k, prune=True, hoist=kir_sync.Hoist.NONE)
    assert kir_sync.conflicts(placed) == []
    rows, hid = 5, 8
    tiling = {"rows": rows, "hidden": hid, "colAlign": hid, "rowsPerCore": rows, "pass": 2}
    x = np.arange(rows * hid, dtype=np.float32)
    for given, add in ((True, 1), (False, 3)):
        gm = {"x": x.copy(), "y": np.zeros(rows * hid, np.float32), "s": np.zeros(rows, np.float32),
              "bias": np.zeros(hid, np.float32) if given else None}
        r = kir_interp.run(placed, tiling, gm, 1)
        assert r.ok, r.faults
        np.testing.assert_array_equal(gm["y"], 2 * x + add)
        np.testing.assert_array_equal(gm["s"], (2 * x + add).reshape(rows, hid).sum(1))
    k2 = hoist_guards(_per_presence_copies(rows_kernel(), second=True))
    loop = k2.method("Compute").body[2]
    assert [type(s).__name__ for s in loop.body] == ["If"]
    outer = loop.body[0]
    assert outer.cond == (Sym("hasBias_"),) and not outer.orelse
    inner = [s for s in outer.then if isinstance(s, If)]
    assert len(inner) == 1 and inner[0].cond == (Sym("hasG_"),) and len(outer.then) == 5
    verify(k2)
