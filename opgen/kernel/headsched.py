"""The schedule of the head-rows family (opgen.kernel.headrows) as Kernel IR (opgen.kernel.kir).

A head-rows kernel class (one per dtype, template parameter T) runs the parts of the row space one after another;
per part this core's rows are copied in `rowsPerPass` at a time, computed one head row at a time in fp32 UB rows
and copied out (docs/design.md, "Head rows"). What is Kernel IR here:

* the compute *bodies* (`body_func`): one per distinct part computation; the loop over the pass's rows (`k` rows
  from part row `r0`), the sequence position of a row (`seqPos`, read only when a row condition or a RoPE table
  needs it), the row conditions as If / else, each case's table-row loads (a Call of the skeleton's TableRow) and
  its instructions as `kir.Vec` nodes of the instruction table (opgen.kernel.isa), scalar reads / writes of the
  per-row statistics (GetValue / SetValue), row sums (a Call of RowSum bound to a float) and float lets;
* the vector-pipe barriers inside them, placed by dependency (`place_vbarriers`: the rule of
  opgen.kernel.vsync.place_barriers over nodes).

`head_class` collects them in a `KernelClass` whose members are declared for the verifier (the file skeleton,
templates/op_kernel/head_kernel.h.j2, prints the members, the rest of the class and the entry point): the Part
struct a body reads (its row count `p.seq`, its row conditions `p.cond[j]`) is a struct parameter (kir.Param
kind "struct"); the skeleton's helpers a body calls (TableRow, RowSum) are `extern`.

Facts: docs/reference/ascendc.md §1.6 (PipeBarrier<PIPE_V>: later vector instructions wait for earlier ones),
§1.9 (the count-form vector calls, Gather, Cast round modes, ReduceSum).
"""

from __future__ import annotations

from opgen.ir.dims import Bin, Constraint, Lit, Sym
from opgen.kernel.isa import INSTRS, Pipe
from opgen.kernel.kir import (Barrier, Call, For, Func, If, KernelClass, Let, Param, Ref, ScalarVar, TensorVar, Vec,
                              const_value)
from opgen.kernel.vsync import SLOT_ARRAYS

PART = "Part"
"""The C++ struct type of a part (declared by the file skeleton): seq, cond[], tab[], tabOff[], ... ."""

BODY_CALLS = {"RowSum": ("reads", 0), "TableRow": ("writes", "tab_")}
"""The skeleton's helpers a body calls and the UB region each touches on the vector pipe: RowSum reads its first
argument (a V->S wait reads the result back, so nothing it did is pending after it); TableRow(j, p, s) writes table
row tab_[j] (its LoadRow ends with a barrier). Both leave no vector work pending."""


def region(r: Ref):
    """The region key of UB operand `r` for the barrier rule (opgen.kernel.vsync.region): a slot of one of the
    fixed-stride view arrays (SLOT_ARRAYS) at a constant slot is its own region; any other view is its whole
    tensor (views of one tensor at run-time offsets, or slots of the queue blocks' arrays, are taken as
    overlapping)."""
    if r.tensor in SLOT_ARRAYS and r.slot is not None and const_value(r.slot) is not None:
        return (r.tensor, const_value(r.slot))
    return r.tensor


def _call_access(c: Call):
    """(reads, writes) on the vector pipe of a Call of a BODY_CALLS helper; None for any other call."""
    if c.method not in BODY_CALLS:
        return None
    how, what = BODY_CALLS[c.method]
    if how == "reads":
        return {region(c.args[what])}, set()
    return set(), {region(Ref(what, slot=c.args[0]))}


def place_vbarriers(stmts) -> tuple:
    """`stmts` (Kernel-IR statements) with a Barrier(PIPE_V) before each vector instruction that reads or writes a
    region (`region`) a vector instruction since the last barrier wrote, or writes one read (RAW / WAW / WAR);
    each loop body and If branch is a stream of its own that starts with no pending vector work and ends with a
    barrier while work is pending (so does `stmts`), and a barrier goes before a loop or branch while work is
    pending (its context is unknown to it). Barriers given in the input are dropped (every one is re-derived).
    A Call of a BODY_CALLS helper reads / writes its region and completes every pending access; other statements
    (scalar lets, GetValue / SetValue, calls) have no vector access."""
    out: list = []
    reads: set = set()
    writes: set = set()
    for s in stmts:
        if isinstance(s, Barrier) and s.pipe is Pipe.V:
            continue
        if isinstance(s, (For, If)):
            if reads or writes:
                out.append(Barrier(Pipe.V))
                reads, writes = set(), set()
            if isinstance(s, For):
                out.append(For(s.var, s.lo, s.hi, s.step, place_vbarriers(s.body), s.tail, s.doc, s.inclusive))
            else:
                out.append(If(s.cond, place_vbarriers(s.then), place_vbarriers(s.orelse) if s.orelse else (),
                              s.doc))
            continue
        if isinstance(s, Vec) and INSTRS[s.op].pipe is Pipe.V:
            d = INSTRS[s.op]
            names = {n for n, _v in s.args}
            rs = {region(s.arg(x)) for x in d.reads() if x in names}
            ws = {region(s.arg(x)) for x in d.writes() if x in names}
            after_done = False
        elif isinstance(s, Call) and _call_access(s) is not None:
            rs, ws = _call_access(s)
            after_done = True
        else:
            out.append(s)
            continue
        if rs & writes or ws & writes or ws & reads:
            out.append(Barrier(Pipe.V))
            reads, writes = set(), set()
        out.append(s)
        if after_done:
            reads, writes = set(), set()
        else:
            reads |= rs
            writes |= ws
    if reads or writes:
        out.append(Barrier(Pipe.V))
    return tuple(out)


def body_func(index: int, doc: str, rows: tuple, uses_p: bool) -> Func:
    """Body<index>: the loop over the k rows of a pass from part row r0, `rows` the statements of one row (row `i`
    of the pass; with `uses_p`, `seqPos` is its sequence position, read by its row conditions and table loads),
    barriers placed by `place_vbarriers`. Parameters (p: Part, r0, k) when uses_p, else (k)."""
    row: list = []
    if uses_p:
        row.append(Let("seqPos", Bin("%", Bin("//", Bin("+", Sym("r0"), Sym("i")), Sym("heads_")), Sym("p.seq"))))
    row += list(rows)
    body = place_vbarriers((For("i", Lit(0), Sym("k"), Lit(1), tuple(row)),))
    params = (Param("p", "struct", PART), Param("r0"), Param("k")) if uses_p else (Param("k"),)
    return Func(f"Body{index}", params, body, doc=f"Body {index}: {doc}")


def row_conditions(conds: int, case) -> tuple:
    """The statements of one row under `conds` row conditions (condition j: seqPos < p.cond[j]): If / else nests
    whose leaves are `case(truth)` (truth: a tuple of bools, one per condition)."""
    def emit(j, prefix):
        if j == conds:
            return tuple(case(prefix))
        return (If((Constraint("<", Sym("seqPos"), Sym(f"p.cond[{j}]")),), emit(j + 1, prefix + (True,)),
                   emit(j + 1, prefix + (False,))),)
    return emit(0, ())


MEMBER_SCALARS = ("heads_", "headDim_", "dAlign_")
"""The int64 members a body reads (set in Init from the tiling data)."""


def head_class(name: str, counts: dict, bodies: list, float_attrs=()) -> KernelClass:
    """The Kernel IR of head kernel class `name` as far as it is IR: the bodies (`bodies`, Funcs of `body_func`);
    `counts` the slot counts of the class ({"kIn", "kOut", "kStatIn", "kStatOut", "kTemps", "kTab", "kCol",
    "kAcc", "kPerm", "kSign"}: array lengths, at least 1); `float_attrs` the float attribute members (attr_<a>).
    The members and the skeleton's helpers are declared for the verifier; Process runs nothing (the skeleton's
    Process calls the bodies), so each body is verified on its own."""
    c = counts
    tensors = (TensorVar("w_", "float", c["kTemps"]), TensorVar("tab_", "float", c["kTab"]),
               TensorVar("col_", "float", c["kCol"]), TensorVar("acc_", "float", c["kAcc"]),
               TensorVar("sign_", "float", c["kSign"]), TensorVar("perm_", "uint32_t", c["kPerm"]),
               TensorVar("rowIn_", "T", c["kIn"]), TensorVar("rowOut_", "T", c["kOut"]),
               TensorVar("statIn_", "float", c["kStatIn"]), TensorVar("statStage_", "float", c["kStatOut"]),
               TensorVar("red_", "float"), TensorVar("redTmp_", "float"))
    ext = (Func("RowSum", (Param("src", "tensor", "float"), Param("n")), ret="float", extern=True),
           Func("TableRow", (Param("j"), Param("p", "struct", PART), Param("s")), extern=True))
    return KernelClass(name, "TilingData", tensors=tensors,
                       scalars=tuple(ScalarVar(n) for n in MEMBER_SCALARS)
                       + tuple(ScalarVar(f"attr_{a}", "float") for a in float_attrs),
                       methods=tuple(bodies) + ext, tparams=("T",), doc="head-rows schedule")


__all__ = ["BODY_CALLS", "MEMBER_SCALARS", "PART", "body_func", "head_class", "place_vbarriers", "region",
           "row_conditions"]
