"""The schedule of the head-rows family (opgen.kernel.headrows) as Kernel IR (opgen.kernel.kir).

A head-rows kernel class (one per dtype, template parameter T) runs the parts of the row space one after another;
per part this core's rows are copied in `rowsPerPass` at a time, computed one head row at a time in fp32 UB rows
and copied out; the column sums of a backward kernel are exchanged through workspace after a SyncAll.
`head_class` builds the whole schedule from a `HeadSchedule` (what opgen.codegen.headkernel derives from the
lowering): Process, InitBuffers, RunParts (the part slots in row-space order), RunPart (this core's rows of one
part, the passes with their tail, the column rows and accumulators), CopyIn / Compute / CopyOut (the queue
hand-offs of every slot, unrolled: slot j's queue is inQue<j>_; a slot the part does not use passes its block
through unwritten, so the queue order is the same whatever the part and only the copy is conditional),
CopyRowsIn / CopyRowsOut (one DataCopyPad per run of rows at one GM stride), PrepareLanes (the Gather offset
tables and sign rows), ReduceAccs (the cross-core column sums) and the helpers (LoadRow, StoreRow, RowSum,
RowStartOf, GapBlocks: opgen.kernel.rowsched's builders).

The compute *bodies* (`body_func`), one per distinct part computation: the loop over the pass's rows (`k` rows from
part row `r0`), the sequence position of a row (`seqPos`, only when a row condition or a RoPE table reads it), the
row conditions as If / else, each case's table-row loads (LoadRow when the row changes) and its instructions as
`kir.Vec` nodes of the instruction table (opgen.kernel.isa), scalar reads / writes of the per-row statistics
(GetValue / SetValue), row sums (a Call of RowSum bound to a float) and float lets. The schedule holds no sync of its
own: the kernel pass `synchronise` places every barrier and flag by dependency (opgen.kernel.kir_sync); only the
PIPE_ALL drain before the column sums' SyncAll is written here (a dependency between cores).

The Part struct the methods read (its row count `p.seq`, its slots' use flags, GM tensors and addressing, its row
conditions) is a struct parameter (kir.Param kind "struct", declared by `part_decl`; the file skeleton,
templates/op_kernel/head_kernel.h.j2, declares the type). SetupPart fills it for a slot from the attribute tables
(kir.ConstTable kBody, kAddr, kBodyUse, ...: the skeleton prints them from the same lists) and Addr<k> (StructSet
of each field); Init sets the members from the tiling data: HeadSchedule.part_funcs / tables, built by
opgen.codegen.headkernel. Init binds the GM tensors and sets has_<input> (pointer not nullptr, KernelClass.presence).

Facts: docs/reference/ascendc.md §1.5 (TQue / TBuf, the queue hand-offs), §1.6 (PipeBarrier, SetFlag / WaitFlag,
SyncAll), §1.8 (DataCopyPad units), §1.9 (the count-form vector calls, Gather, Cast round modes, ReduceSum).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from opgen.ir.dims import Bin, Constraint, DimExpr, Fn, Lit, Sym
from opgen.kernel.headrows import PERMS, SIGNS
from opgen.kernel.isa import Op, Pipe
from opgen.kernel.kir import (BLOCK_IDX, BLOCK_NUM, POOL_IDS, Alloc, Assign, Barrier, Call, Copy, DeQue, EnQue,
                              FAssign, FBits, FConst, For, FInt, Free, Func, Get, GmTensor, GmView, If, InitBuffer, Invoke, KernelClass,
                              Let, Local, Param, Ref, ScalarVar, Scope, Select, SetValue, SizeOf, StructDecl, StructLet,
                              SyncAll, TableAt, TensorVar, TPos, View, handoff_ids, vec)
from opgen.kernel.rowsched import (_gap_blocks_func, _load_row, _row_reduce, _row_start_of, _store_row, add, div,
                                   mul, sub)
from opgen.names import cpp_name

PART = "Part"
"""The C++ struct type of a part (declared by the file skeleton): seq, cond[], tab[], tabOff[], ... ."""

def body_func(index: int, doc: str, rows: tuple, uses_p: bool) -> Func:
    """Body<index>: the loop over the k rows of a pass from part row r0, `rows` the statements of one row (row `i`
    of the pass; with `uses_p`, `seqPos` is its sequence position, read by its row conditions and table loads).
    Parameters (p: Part, r0, k) when uses_p, else (k)."""
    row: list = []
    if uses_p:
        row.append(Let("seqPos", Bin("%", Bin("//", Bin("+", Sym("r0"), Sym("i")), Sym("heads_")), Sym("p.seq"))))
    row += list(rows)
    body = (For("i", Lit(0), Sym("k"), Lit(1), tuple(row)),)
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


MEMBER_SCALARS = ("attrKey_", "heads_", "headDim_", "dAlign_", "rowStart_", "rowEnd_", "accMask_")
"""The int64 members of a head kernel class (set in Init from the tiling data, or by Process)."""
FIELDS = ("tilingKey", "headNum", "headDimLen", "dAlign", "rowsPerCore", "rowsTail", "rowsPerPass",
          "colsPerReduceCore", "workspaceBytes", "batchNum")
"""The tiling-data fields the schedule reads (opgen.tiling.headkernel)."""
COUNTS = ("kIn", "kOut", "kStatIn", "kStatOut", "kTemps", "kTab", "kCol", "kAcc", "kPerm", "kSign", "kCond")
"""The slot counts of a head kernel class (opgen.tiling.headkernel.HeadCounts, by their C++ names)."""
COUNT_DOCS = {"kIn": "head-row inputs of a part (T)", "kOut": "head-row outputs of a part (T)",
              "kStatIn": "fp32 per-row inputs", "kStatOut": "fp32 per-row outputs", "kTemps": "fp32 row temporaries",
              "kTab": "RoPE table rows", "kCol": "column rows of a part", "kAcc": "column accumulators of a part",
              "kPerm": "Gather offset tables", "kSign": "sign rows", "kCond": "row conditions of a part",
              "kAccOutputs": "column outputs summed across cores"}
"""The comment of each count's constexpr constant (KernelClass.consts)."""


@dataclass(frozen=True)
class HeadSchedule:
    """What the schedule of one head kernel class needs (opgen.codegen.headkernel builds it from the lowering):
    `counts` ({COUNTS name: slots}, 0 when none), `bodies` (Funcs of `body_func`, Body<k> for body k),
    `body_uses_p` (per body: whether it takes (p, r0, k) or just k), `accs` ((output, round mode) of each column
    output summed across cores, in output order), `lanes` (some body reads Gather offset tables or sign rows:
    the skeleton's PrepareLanes builds them), `needs` (opgen.tiling.headkernel.head_needs: paramQue, accOutQue,
    reduceBuf), `float_attrs` (attr_<a> members), `gms` ((name, ctype): the GM tensors the parts bind),
    `has` (the optional inputs whose presence is tested), `args` (every GM_ADDR argument, in order), `nparts`
    (the part slots of the row space) and `body_lanes` (per body: ((kind "perm" | "sign", slot j, family id,
    family name of opgen.kernel.headrows.PERMS / SIGNS), ...): the lane tables it reads)."""

    counts: dict
    bodies: tuple
    body_uses_p: tuple
    accs: tuple = ()
    lanes: bool = False
    needs: dict = field(default_factory=dict)
    float_attrs: tuple = ()
    gms: tuple = ()
    has: tuple = ()
    args: tuple = ()
    nparts: int = 0
    body_lanes: tuple = ()
    part_funcs: tuple = ()   # SetupPart and the Addr<k> methods (Funcs); (): SetupPart is the skeleton's (extern)
    tables: tuple = ()       # the ConstTables SetupPart and Init read (kBody, kAddr, kBodyUse, ...)
    consts: tuple = ()       # ((name, value, comment), ...): the file's constexpr constants (kParts, kIn, ...)
    tiling_struct: str = "TilingData"   # the tiling-data struct Init takes (optiling::<Op>TilingData)
    dim_fields: tuple = ()   # the tiling-data fields of the dims the addressing reads (dim<Name>)


def _n(c: dict, k: str) -> int:
    return max(c.get(k, 0), 1)


def part_decl(c: dict) -> StructDecl:
    """The Part struct as Kernel IR reads it (the skeleton declares it): one part of the row space."""
    f = [("seq", "int", "", None), ("body", "int", "", None)]
    for use, k in (("useIn", "kIn"), ("useOut", "kOut"), ("useStatIn", "kStatIn"), ("useStatOut", "kStatOut"),
                   ("useCol", "kCol"), ("useAcc", "kAcc")):
        f.append((use, "int", "", _n(c, k)))
    f += [("in", "gm", "T", _n(c, "kIn")), ("out", "gm", "T", _n(c, "kOut")), ("tab", "gm", "T", _n(c, "kTab")),
          ("col", "gm", "T", _n(c, "kCol")), ("statIn", "gm", "float", _n(c, "kStatIn")),
          ("statOut", "gm", "float", _n(c, "kStatOut"))]
    for side, k in (("in", "kIn"), ("out", "kOut")):
        f += [(f"{side}Extent", "int", "", _n(c, k)), (f"{side}Offset", "int", "", _n(c, k)),
              (f"{side}Bnsd", "int", "", _n(c, k))]
    f += [("tabOff", "int", "", _n(c, "kTab")), ("cond", "int", "", _n(c, "kCond")), ("acc", "int", "", _n(c, "kAcc")),
          ("permWant", "int", "", _n(c, "kPerm")), ("signWant", "int", "", _n(c, "kSign"))]
    docs = (("seq", "rows per (b, n)"), ("body", "the compute body (-1: no part)"),
            ("useIn", "slots the body uses (0 / 1)"), ("tabOff", "table row of part row s: s + tabOff"),
            ("cond", "row condition j of part row s: s < cond[j]"), ("acc", "accumulator output index of acc slot j"),
            ("permWant", "lane table families of the body"),
            ("inExtent", "sequence length extent of a slot's GM tensor; part row s at sequence index s + offset; "
                         "[B, N, extent, E] when bnsd, else [B, extent, N, E]"))
    return StructDecl(PART, tuple(f), defaults=(("body", -1),), field_docs=docs, in_class=True,
                      doc="One part of the row space: `seq` rows per (b, n), rows ordered (b, s, n), its GM tensors "
                          "by slot.")


def _use(kind: str, j: int) -> tuple:
    return (Constraint("!=", Sym(f"p.{kind}[{j}]"), Lit(0)),)


_K, _R0, _P = Sym("k"), Sym("r0"), Sym("p")
_HD, _DA = Sym("headDim_"), Sym("dAlign_")


def _copy_rows(to_gm: bool) -> Func:
    """CopyRowsIn / CopyRowsOut: part rows [r0, r0 + k) between GM tensor g (sequence length `extent`, part row s at
    sequence index s + offset, [B, N, extent, E] when bnsd else [B, extent, N, E]) and UB rows dAlign_ apart, one
    DataCopyPad per run of rows equally spaced in GM: the heads of one (b, s) of a BNSD tensor (GM gap
    (extent - 1) * D elements), the rows of one batch of a BSND tensor, the whole pass when the tensor is the part
    itself (docs/reference/ascendc.md §1.8: blockLen bytes, the UB gap in 32-B blocks, the GM gap in bytes)."""
    i, r, n, s_, b = Sym("i"), Sym("r"), Sym("n"), Sym("s"), Sym("b")
    ext, off, seq = Sym("extent"), Sym("offset"), Sym("p.seq")
    left = sub(_K, i)
    sz = SizeOf("T")
    ub, gm = Ref("ub", mul(i, _DA)), GmView("g", Sym("gmOff"))
    gap_bytes = mul(Sym("gap"), sz)
    copy = (Copy(gm, ub, Sym("run"), mul(_HD, sz), Sym("ubGap"), gap_bytes) if to_gm else
            Copy(ub, gm, Sym("run"), mul(_HD, sz), gap_bytes, Sym("ubGap")))
    loop = (
        Let("r", add(_R0, i)),
        Let("n", Bin("%", r, Sym("heads_"))),
        Let("s", Bin("%", div(r, Sym("heads_")), seq)),
        Let("b", div(div(r, Sym("heads_")), seq)),
        Let("run", Lit(0), mutable=True), Let("gmOff", Lit(0), mutable=True), Let("gap", Lit(0), mutable=True),
        If((Constraint("!=", Sym("bnsd"), Lit(0)),), (
            Assign("run", Fn("min", (left, sub(Sym("heads_"), n)))),
            Assign("gmOff", mul(add(mul(add(mul(b, Sym("heads_")), n), ext), s_, off), _HD)),
            Assign("gap", mul(sub(ext, 1), _HD)),
        ), (
            Assign("run", Select((Constraint("==", ext, seq), Constraint("==", off, Lit(0))), left,
                                 Fn("min", (left, sub(mul(sub(seq, s_), Sym("heads_")), n))))),
            Assign("gmOff", mul(add(mul(add(mul(b, ext), s_, off), Sym("heads_")), n), _HD)),
        )),
        copy,
        Assign("i", add(i, Sym("run"))),
    )
    body = (Let("ubGap", Invoke("GapBlocks", (_DA, _HD, sz))),
            For("i", Lit(0), _K, None, loop, doc="one DataCopyPad per run of rows at one GM stride"))
    params = (Param("g", "gm", "T"), Param("extent"), Param("offset"), Param("bnsd"), Param("ub", "tensor", "T"),
              Param("p", "struct", PART), Param("r0"), Param("k"))
    return Func("CopyRowsOut" if to_gm else "CopyRowsIn", params, body,
                doc=("UB -> GM" if to_gm else "GM -> UB") + " of part rows [r0, r0 + k): one DataCopyPad per run of "
                "rows equally spaced in GM\n(the heads of one (b, s) of a BNSD tensor, the rows of one batch of a "
                "BSND tensor, the whole pass\nwhen the tensor is the part itself).")


def row_queue_bufs(n_in: int, n_out: int, stat_in: int, stat_out: int, param_que: bool,
                   acc_out_que: bool) -> tuple[int, int]:
    """(buffers of each head-row input queue inQue<j>_, of each output queue outQue<j>_) for a class of `n_in` row
    inputs and `n_out` row outputs per part, `stat_in` / `stat_out` statistic slots (one shared queue of two buffers
    each side: _stat_in_names, _stat_out_queues) and the one-buffer staging queues paramQue_ / accOutQue_: two (the
    next pass's copy may wait on this pass's free only) where the queues' ids of that hand-off stay within the TPipe's
    pool (kir.POOL_IDS per HardEvent: V_MTE2 for the inputs, MTE3_V for the outputs; a buffer holds one from its
    FreeTensor to its next AllocTensor, kir.queue_event_buffers), else one. Five row inputs held 10 V_MTE2 ids with
    two buffers each (docs/design.md "Event ids of the queues"); the tiling plans the same count
    (opgen.tiling.headkernel.head_plan). A class whose queues exceed the pool with one buffer each is refused by the
    verifier (kir.check_event_ids)."""
    ins = 2 if handoff_ids(n_in, bool(stat_in), int(param_que)) <= POOL_IDS else 1
    outs = 2 if handoff_ids(n_out, bool(stat_out), int(acc_out_que)) <= POOL_IDS else 1
    return ins, outs


def _stat_in_names(c: dict) -> tuple:
    """(queues, dequeued tensors) of the per-row statistic inputs: one slot, statInQue0_ / statIn0_; several, one
    queue statInQue_ whose buffer holds slot j's values at element _stat_at(j) (each slot's statIn<j>_ a view of
    statIn_). One queue: a queue buffer freed and not yet allocated again holds one id of its hand-off's HardEvent
    from the TPipe's pool of 8, and after a part's passes every buffer of every queue is freed; one queue per slot
    kept NormRopeConcatGrad at 9 VECIN buffers (V_MTE2 ids; docs/design.md "Event ids of the queues")."""
    n = c.get("kStatIn", 0)
    if n > 1:
        return ("statInQue_",), ("statIn_",)
    return tuple(f"statInQue{j}_" for j in range(n)), tuple(f"statIn{j}_" for j in range(n))


def _stat_out_queues(c: dict) -> tuple:
    """((queue, slots), ...) of the per-row statistic outputs: one slot, statOutQue0_; several, one queue
    statOutQue_ whose buffer holds slot j's values at element _stat_at(j) (cast into it in Compute, copied out of
    it in CopyOut, each under its slot's use flag). One queue for the reason of _stat_in_names: a freed VECOUT
    buffer holds one MTE3_V id until its next AllocTensor (docs/design.md "Event ids of the queues")."""
    n = c.get("kStatOut", 0)
    if n > 1:
        return (("statOutQue_", tuple(range(n))),)
    return tuple((f"statOutQue{j}_", (j,)) for j in range(n))


def _stat_at(j: int) -> DimExpr:
    """Element offset of statistic slot j in the shared statistic buffer: j passes' rows, each aligned to 8."""
    stride = Fn("align_up", (Sym("rowsPerPass"), Lit(8)))
    return Lit(0) if j == 0 else stride if j == 1 else mul(Lit(j), stride)


def _stat_ref(tensor: str, j: int, n: int) -> Ref:
    """Slot j's values in the statistic buffer `tensor` of n slots: the whole buffer when n is 1, else part j of
    its cut into n (kir.Ref.part: a pass's k <= rowsPerPass rows stay inside the slot's aligned stride, so the
    dependency pass orders the slots apart without comparing run-time offsets)."""
    return Ref(tensor, _stat_at(j), part=(j, n)) if n > 1 else Ref(tensor)


def _copy_in(c: dict) -> Func:
    body: list = []
    for j in range(c.get("kIn", 0)):
        copy = Call("CopyRowsIn", (GmView(f"p.in[{j}]"), Sym(f"p.inExtent[{j}]"), Sym(f"p.inOffset[{j}]"),
                                   Sym(f"p.inBnsd[{j}]"), Ref("t"), _P, _R0, _K))
        body.append(Scope((Alloc("t", f"inQue{j}_", "T"), If(_use("useIn", j), (copy,)), EnQue(f"inQue{j}_", "t"))))
    nsi = c.get("kStatIn", 0)
    if nsi > 1:   # one queue, one buffer holding every slot's values (_stat_in_names)
        copies = tuple(If(_use("useStatIn", j), (Copy(_stat_ref("t", j, nsi), GmView(f"p.statIn[{j}]", _R0), Lit(1),
                                                       mul(_K, SizeOf("float"))),)) for j in range(nsi))
        body.append(Scope((Alloc("t", "statInQue_", "float"),) + copies + (EnQue("statInQue_", "t"),)))
    for j in range(nsi if nsi == 1 else 0):
        copy = Copy(Ref("t"), GmView(f"p.statIn[{j}]", _R0), Lit(1), mul(_K, SizeOf("float")))
        body.append(Scope((Alloc("t", f"statInQue{j}_", "float"), If(_use("useStatIn", j), (copy,)),
                           EnQue(f"statInQue{j}_", "t"))))
    return Func("CopyIn", (Param("p", "struct", PART), Param("r0"), Param("k")), tuple(body),
                doc="Every input slot's queue gets a block (the part's slots are copied into; the others pass "
                    "through unwritten).")


def _compute(c: dict, s: HeadSchedule) -> Func:
    body: list = [DeQue(f"rowIn{j}_", f"inQue{j}_", "T") for j in range(c.get("kIn", 0))]
    que, ten = _stat_in_names(c)
    body += [DeQue(t, q, "float") for q, t in zip(que, ten)]
    if c.get("kStatIn", 0) > 1:
        body += [View(f"statIn{j}_", _stat_ref("statIn_", j, c["kStatIn"])) for j in range(c["kStatIn"])]
    body += [Alloc(f"rowOut{j}_", f"outQue{j}_", "T") for j in range(c.get("kOut", 0))]
    body += [Get(f"statStage{j}_", f"statStageBuf{j}_", "float") for j in range(c.get("kStatOut", 0))]
    for k, (f, uses_p) in enumerate(zip(s.bodies, s.body_uses_p)):
        body.append(If((Constraint("==", Sym("p.body"), Lit(k)),), (Call(f.name, (_P, _R0, _K) if uses_p else (_K,)),)))
    body += [EnQue(f"outQue{j}_", f"rowOut{j}_") for j in range(c.get("kOut", 0))]
    nso = c.get("kStatOut", 0)
    for q, slots in _stat_out_queues(c):   # one queue for several slots, each slot's values at _stat_at(j)
        body.append(Scope((Alloc("t", q, "float"),) + tuple(If(_use("useStatOut", j), (
            vec(Op.CAST_TO, dst=_stat_ref("t", j, nso), src=Ref(f"statStage{j}_"),
                mode="CAST_NONE", count=_K),)) for j in slots) + (EnQue(q, "t"),)))
    body += [Free(f"inQue{j}_", f"rowIn{j}_") for j in range(c.get("kIn", 0))]
    body += [Free(q, t) for q, t in zip(que, ten)]
    return Func("Compute", (Param("p", "struct", PART), Param("r0"), Param("k")), tuple(body),
                doc="The queue hand-offs around the part's body (its rows one at a time in fp32).")


def _copy_out(c: dict) -> Func:
    body: list = []
    for j in range(c.get("kOut", 0)):
        copy = Call("CopyRowsOut", (GmView(f"p.out[{j}]"), Sym(f"p.outExtent[{j}]"), Sym(f"p.outOffset[{j}]"),
                                    Sym(f"p.outBnsd[{j}]"), Ref("t"), _P, _R0, _K))
        body.append(Scope((DeQue("t", f"outQue{j}_", "T"), If(_use("useOut", j), (copy,)),
                           Free(f"outQue{j}_", "t"))))
    nso = c.get("kStatOut", 0)
    for q, slots in _stat_out_queues(c):
        body.append(Scope((DeQue("t", q, "float"),) + tuple(If(_use("useStatOut", j), (
            Copy(GmView(f"p.statOut[{j}]", _R0), _stat_ref("t", j, nso), Lit(1),
                 mul(_K, SizeOf("float"))),)) for j in slots) + (Free(q, "t"),)))
    return Func("CopyOut", (Param("p", "struct", PART), Param("r0"), Param("k")), tuple(body))


def _run_part(c: dict, s: HeadSchedule) -> Func:
    lo, hi = Sym("lo"), Sym("hi")
    body: list = [
        Let("lo", sub(Fn("max", (Sym("rowStart_"), Sym("start"))), Sym("start"))),
        Let("hi", sub(Fn("min", (Sym("rowEnd_"), add(Sym("start"), Sym("rows")))), Sym("start"))),
    ]
    for j in range(c.get("kAcc", 0)):
        body.append(If(_use("useAcc", j), (
            vec(Op.DUPLICATE, dst=Ref("acc_", slot=Lit(j)), scalar=FConst(0.0), count=_HD),)))
    rows: list = []
    for j in range(c.get("kCol", 0)):
        rows.append(If(_use("useCol", j), (
            Call("LoadRow", (Ref("col_", slot=Lit(j)), GmView(f"p.col[{j}]"), _HD), targs=("T",)),)))
    rows += [Assign(f"tabRow{j}_", Lit(-1)) for j in range(c.get("kTab", 0))]
    if s.lanes:
        rows.append(Call("PrepareLanes", (_P,)))
    rows.append(Let("pass", Sym("rowsPerPass")))
    rows.append(For("r", lo, hi, Sym("pass"), (Call("CopyIn", (_P, Sym("r"), _K)), Call("Compute", (_P, Sym("r"), _K)),
                                               Call("CopyOut", (_P, Sym("r"), _K))), tail="k"))
    body.append(If((Constraint(">", hi, lo),), tuple(rows)))
    for j in range(c.get("kAcc", 0)):
        at = mul(add(mul(BLOCK_IDX, Lit(len(s.accs))), Sym(f"p.acc[{j}]")), _DA)
        body.append(If(_use("useAcc", j), (
            Call("StoreRow", (GmView("ws_", at), Ref("acc_", slot=Lit(j)), "CAST_NONE", _HD), targs=("float",)),)))
    return Func("RunPart", (Param("p", "struct", PART), Param("start"), Param("rows")), tuple(body),
                doc="This core's rows [rowStart_, rowEnd_) of the part whose rows start at `start`: passes of "
                    "rowsPerPass\nrows; the part's column sums (if any) go to this core's workspace rows even when "
                    "it has no rows.")


def _reduce_accs(s: HeadSchedule) -> Func:
    g_n = len(s.accs)
    c0, cn, c = Sym("c0"), Sym("cn"), Sym("c")
    w0, w1 = Ref("w_", slot=Lit(0)), Ref("w_", slot=Lit(1))
    per: list = []
    for g, (_out, rm) in enumerate(s.accs):
        at = add(mul(add(mul(c, Lit(g_n)), Lit(g)), _DA), c0)
        per.append(If((Constraint("!=", Bin("%", div(Sym("accMask_"), Lit(1 << g)), Lit(2)), Lit(0)),), (
            vec(Op.DUPLICATE, dst=w0, scalar=FConst(0.0), count=cn),
            For("c", Lit(0), BLOCK_NUM, Lit(1), (
                Call("LoadRow", (w1, GmView("ws_", at), cn), targs=("float",)),
                vec(Op.ADD, dst=w0, src0=w0, src1=w1, count=cn),
            )),
            Call("StoreRow", (GmView(f"accOut{g}_", c0), w0, rm, cn), targs=("T",)),
        ), doc=f"column output {g}"))
    body = (If((Constraint("!=", Sym("accMask_"), Lit(0)),), (
        Barrier(Pipe.ALL, doc="the partial rows are in GM before any core reads them"),
        SyncAll(),
        Let("c0", mul(BLOCK_IDX, Sym("colsPerReduceCore"))),
        If((Constraint("<", c0, _HD),), (
            Let("cn", Fn("min", (sub(_HD, c0), Sym("colsPerReduceCore")))),
        ) + tuple(per)),
    )),)
    return Func("ReduceAccs", (), body,
                doc="After SyncAll every core sums its columns [c0, c0 + colsPerReduceCore) of the partial rows of "
                    "every\ncore, in core order (deterministic), and writes them in T.")


def _init_buffers(c: dict, s: HeadSchedule) -> Func:
    f4, ps = SizeOf("float"), Sym("pass")
    stat = mul(Fn("align_up", (ps, Lit(8))), f4)
    body: list = [Let("pass", Sym("rowsPerPass"))]
    nin, nout = row_queue_bufs(c.get("kIn", 0), c.get("kOut", 0), c.get("kStatIn", 0), c.get("kStatOut", 0),
                               bool(s.needs.get("paramQue")), bool(s.needs.get("accOutQue")))
    body += [InitBuffer(f"inQue{j}_", mul(ps, _DA, SizeOf("T")), nin) for j in range(c.get("kIn", 0))]
    body += [InitBuffer(f"outQue{j}_", mul(ps, _DA, SizeOf("T")), nout) for j in range(c.get("kOut", 0))]
    nsi = c.get("kStatIn", 0)
    body += [InitBuffer(q, mul(Lit(nsi), Fn("align_up", (ps, Lit(8))), f4) if nsi > 1 else stat, 2)
             for q in _stat_in_names(c)[0]]
    nso = c.get("kStatOut", 0)
    body += [InitBuffer(f"statStageBuf{j}_", stat) for j in range(nso)]
    body += [InitBuffer(q, mul(Lit(nso), Fn("align_up", (ps, Lit(8))), f4) if nso > 1 else stat, 2)
             for q, _slots in _stat_out_queues(c)]
    for buf, arr, k in (("workBuf_", "w_", "kTemps"), ("tabBuf_", "tab_", "kTab"), ("colBuf_", "col_", "kCol"),
                        ("accBuf_", "acc_", "kAcc")):
        if c.get(k, 0):
            body.append(InitBuffer(buf, mul(Lit(c[k]), _DA, f4)))
            body.append(For("j", Lit(0), Lit(c[k]), Lit(1), (Get(arr, buf, "float", mul(Sym("j"), _DA), slot=Sym("j")),)))
    if s.lanes:
        np_, ns = c.get("kPerm", 0), c.get("kSign", 0)
        body.append(InitBuffer("laneBuf_", mul(Lit(np_ + ns), _DA, f4)))
        if np_:
            body.append(For("j", Lit(0), Lit(np_), Lit(1), (
                Get("perm_", "laneBuf_", "uint32_t", mul(Sym("j"), _DA), slot=Sym("j")),)))
        if ns:
            body.append(For("j", Lit(0), Lit(ns), Lit(1), (
                Get("sign_", "laneBuf_", "float", mul(add(Lit(np_), Sym("j")), _DA), slot=Sym("j")),)))
    if s.needs.get("paramQue"):
        body.append(InitBuffer("paramQue_", mul(_DA, f4), 1))
    if s.needs.get("accOutQue"):
        body.append(InitBuffer("accOutQue_", mul(_DA, f4), 1))
    if s.needs.get("reduceBuf"):
        red = add(Fn("align_up", (div(add(_DA, 63), 64), Lit(8))), 8)
        body += [InitBuffer("reduceBuf_", mul(red, f4)), Get("red_", "reduceBuf_", "float"),
                 View("redTmp_", Ref("red_", Lit(8)))]
    return Func("InitBuffers", (), tuple(body))


def _members(c: dict, s: HeadSchedule) -> tuple:
    """(locals, tensors, scalars) of the class."""
    locals_ = [Local(f"inQue{j}_", TPos.VECIN, True) for j in range(c.get("kIn", 0))]
    locals_ += [Local(f"outQue{j}_", TPos.VECOUT, True) for j in range(c.get("kOut", 0))]
    locals_ += [Local(q, TPos.VECIN, True) for q in _stat_in_names(c)[0]]
    locals_ += [Local(f"statStageBuf{j}_") for j in range(c.get("kStatOut", 0))]
    locals_ += [Local(q, TPos.VECOUT, True) for q, _slots in _stat_out_queues(c)]
    locals_ += [Local(b) for b, k in (("workBuf_", "kTemps"), ("tabBuf_", "kTab"), ("colBuf_", "kCol"),
                                      ("accBuf_", "kAcc")) if c.get(k, 0)]
    if s.lanes:
        locals_.append(Local("laneBuf_"))
    if s.needs.get("paramQue"):
        locals_.append(Local("paramQue_", TPos.VECIN, True))
    if s.needs.get("accOutQue"):
        locals_.append(Local("accOutQue_", TPos.VECOUT, True))
    if s.needs.get("reduceBuf"):
        locals_.append(Local("reduceBuf_"))
    tensors = [TensorVar(f"rowIn{j}_", "T") for j in range(c.get("kIn", 0))]
    tensors += [TensorVar(f"rowOut{j}_", "T") for j in range(c.get("kOut", 0))]
    tensors += [TensorVar("statIn_", "float")] if c.get("kStatIn", 0) > 1 else []
    tensors += [TensorVar(f"statIn{j}_", "float") for j in range(c.get("kStatIn", 0))]
    tensors += [TensorVar(f"statStage{j}_", "float") for j in range(c.get("kStatOut", 0))]
    tensors += [TensorVar(a, "float", c[k]) for a, k in (("w_", "kTemps"), ("tab_", "kTab"), ("col_", "kCol"),
                                                         ("acc_", "kAcc"), ("sign_", "kSign")) if c.get(k, 0)]
    if c.get("kPerm", 0):
        tensors.append(TensorVar("perm_", "uint32_t", c["kPerm"]))
    if s.needs.get("reduceBuf"):
        tensors += [TensorVar("red_", "float"), TensorVar("redTmp_", "float")]
    scalars = [ScalarVar(n) for n in MEMBER_SCALARS]
    scalars += [ScalarVar(f"tabRow{j}_") for j in range(c.get("kTab", 0))]
    if s.lanes:
        scalars += [ScalarVar(f"permFamily{j}_", init=-1) for j in range(c.get("kPerm", 0))]
        scalars += [ScalarVar(f"signFamily{j}_", init=-1) for j in range(c.get("kSign", 0))]
    scalars += [ScalarVar(f"has_{n}", "bool") for n in s.has]
    scalars += [ScalarVar(f"attr_{a}", "float") for a in s.float_attrs]
    return tuple(locals_), tuple(tensors), tuple(scalars)


def _prepare_lanes(s: HeadSchedule) -> Func:
    """PrepareLanes(p): the Gather byte-offset tables (perm_[j]: lane l reads source lane PERMS[f](l, D), 4 bytes a
    lane) and sign rows (sign_[j]: SIGNS[f](l, D)) the part's body reads (p.permWant[j] / p.signWant[j]: the family
    id, -1 for none; SetupPart takes them from the attribute tables), written by the scalar unit when slot j holds
    another family (permFamily<j>_ / signFamily<j>_: the id it holds, -1 at first), after V->S (an earlier part's
    Gather may still read the slot); then S->V, the vector unit reads them (docs/reference/ascendc.md §1.6, §1.9
    Gather)."""
    l, d = Sym("l"), _HD
    fams: dict = {}   # (kind, slot) -> {(family id, family)}
    for tables in s.body_lanes:
        for kind, j, fid, fam in tables:
            fams.setdefault((kind, j), set()).add((fid, fam))
    body: list = []
    for (kind, j), used in sorted(fams.items()):
        held, want = Sym(f"{kind}Family{j}_"), Sym(f"p.{kind}Want[{j}]")
        fills: list = []
        for fid, fam in sorted(used):
            if kind == "perm":
                put = SetValue(Ref("perm_", l, slot=Lit(j)), mul(PERMS[fam][0](l, d), SizeOf("float")),
                               doc=f"{fam}: the source lane's byte offset")
            else:
                put = SetValue(Ref("sign_", l, slot=Lit(j)), FInt(SIGNS[fam][0](l, d)), doc=f"{fam}: the lane's sign")
            fills.append(If((Constraint("==", want, Lit(fid)),), (For("l", Lit(0), d, Lit(1), (put,)),)))
        body.append(If((Constraint(">=", want, Lit(0)), Constraint("!=", want, held)),
                       tuple(fills) + (Assign(held.name, want),)))
    return Func("PrepareLanes", (Param("p", "struct", PART),), tuple(body),
                doc="The Gather byte-offset tables and sign rows of the part's body, written by the scalar unit "
                    "when they change.")


def _run_parts(s: HeadSchedule) -> Func:
    """The part slots in row-space order: each slot's Part for this attribute key (SetupPart: it reads the constant
    attribute tables; 0 when the slot has no part), its rows after the previous parts' rows."""
    rows = mul(Sym("batchNum"), Sym("heads_"), Sym("p.seq"))
    return Func("RunParts", (), (
        Let("start", Lit(0), mutable=True),
        For("j", Lit(0), Lit(s.nparts), Lit(1), (
            StructLet("p", PART),
            Call("SetupPart", (Sym("j"), _P), result="found"),
            If((Constraint("!=", Sym("found"), Lit(0)),), (
                Let("rows", rows),
                Call("RunPart", (_P, Sym("start"), Sym("rows"))),
                Assign("start", add(Sym("start"), Sym("rows"))))),
        )),
    ), doc="The parts in row-space order, each after the rows of the ones before it.")


def head_class(name: str, s: HeadSchedule) -> KernelClass:
    """The Kernel IR of head kernel class `name` (template parameter T) from `s`: Process (this core's rows, the
    buffers, the parts, the column outputs' cross-core sums), InitBuffers, RunPart, CopyIn, Compute, CopyOut,
    CopyRowsIn / CopyRowsOut, ReduceAccs, RunParts, the bodies and the helpers LoadRow, StoreRow, RowSum,
    RowStartOf and GapBlocks, PrepareLanes, SetupPart and Addr<k> (a part slot's Part from the constant attribute
    tables, s.part_funcs; without them SetupPart is declared `extern`), Init (the GM bindings, has_<input> from the
    pointers, the members from the tiling data); printed whole by kir.to_cpp, its constants and tables by
    kir.namespace_cpp."""
    c = s.counts
    locals_, tensors, scalars = _members(c, s)
    gms = tuple(GmTensor(f"gm_{n}", ct, cpp_name(n)) for n, ct in s.gms)
    gms += tuple(GmTensor(f"accOut{g}_", "T", cpp_name(o)) for g, (o, _rm) in enumerate(s.accs))
    gms += (GmTensor("ws_", "float", workspace=True),)
    helpers = [_row_start_of(), _gap_blocks_func(), _copy_rows(False), _copy_rows(True), _init_buffers(c, s),
               _run_part(c, s), _copy_in(c), _compute(c, s), _copy_out(c)]
    if s.accs:
        helpers.append(_reduce_accs(s))
    if s.needs.get("paramQue"):
        helpers.append(_load_row())
    if s.needs.get("accOutQue"):
        helpers.append(_store_row())
    if s.needs.get("reduceBuf"):
        helpers.append(_row_reduce("RowSum", Op.REDUCE_SUM))
    helpers.append(_run_parts(s))
    if s.lanes:
        helpers.append(_prepare_lanes(s))
    ext = list(s.part_funcs) or [Func("SetupPart", (Param("j"), Param("p", "struct", PART)), ret="int64_t",
                                      extern=True)]
    process = (Assign("rowStart_", Invoke("RowStartOf", (BLOCK_IDX,))),
               Assign("rowEnd_", Invoke("RowStartOf", (add(BLOCK_IDX, 1),))),
               Call("InitBuffers"), Call("RunParts"))
    if s.accs:
        process += (Call("ReduceAccs"),)
    args = tuple(cpp_name(a) for a in s.args)
    init = (Assign("attrKey_", div(Sym("tilingKey"), Lit(100))), Assign("heads_", Sym("headNum")),
            Assign("headDim_", Sym("headDimLen")), Assign("dAlign_", Sym("dAlign")))
    if any(t.name == "kAccMask" for t in s.tables):   # the column outputs summed for this attribute key
        init += (Assign("accMask_", TableAt("kAccMask", (Sym("attrKey_"),))),)
    init += tuple(FAssign(f"attr_{a}", FBits(Sym(f"{a}Bits"))) for a in s.float_attrs)
    fields = tuple(f for f in FIELDS if f != "colsPerReduceCore" or s.accs)   # the exchange's field: with accs
    fields += tuple(f for f in s.dim_fields if f not in FIELDS) + tuple(f"{a}Bits" for a in s.float_attrs)
    return KernelClass(name, s.tiling_struct, args=args, gms=gms, locals=locals_, tensors=tensors, scalars=scalars,
                       fields=fields, init=init, process=process,
                       methods=tuple(helpers) + tuple(s.bodies) + tuple(ext), tparams=("T",),
                       doc="head-rows schedule", structs=(part_decl(c),), tables=tuple(s.tables),
                       presence=tuple((f"has_{n}", cpp_name(n)) for n in s.has), ws_field="workspaceBytes",
                       consts=tuple(s.consts))


SCHEDULE_METHODS = ("InitBuffers", "RunParts", "RunPart", "PrepareLanes", "CopyIn", "Compute", "CopyOut", "CopyRowsIn", "CopyRowsOut",
                    "ReduceAccs", "LoadRow", "StoreRow", "RowSum", "RowStartOf", "GapBlocks")
"""The IR methods of a head kernel class other than the bodies, in the order the class prints them (those it has)."""


__all__ = ["COUNTS", "FIELDS", "HeadSchedule", "MEMBER_SCALARS", "PART", "SCHEDULE_METHODS",
           "body_func", "head_class", "part_decl", "row_conditions"]
