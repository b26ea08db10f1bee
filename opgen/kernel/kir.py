"""Kernel IR (KIR): one program representation of an AscendC kernel (vector, and the cube path of a mixed one): its
buffers, loops, copies, vector and cube instructions, queue hand-offs, synchronisation and cross-core exchanges as
frozen IR nodes, in the spirit of an xDSL / MLIR operation definition (every node states its operands, which it reads and writes, and on which pipe).

A kernel family lowers a specialisation into a `KernelClass`; `verify` checks it; `to_text` prints its canonical
text (`opgen graph --stage kernel`), `to_cpp` prints it as AscendC C++ (the one C++ printer). Facts: docs/reference/
ascendc.md §1.3 (GetBlockIdx / GetBlockNum, GM_ADDR), §1.5 (TPipe, TQue, TBuf, AllocTensor / EnQue / DeQue /
FreeTensor), §1.6 (pipes, PipeBarrier, SetFlag / WaitFlag with a HardEvent), §1.8 (DataCopyPad and
DataCopyExtParams units), §1.9 (vector instructions: the table opgen.kernel.isa).

Integer expressions
-------------------
One language: `opgen.ir.dims.DimExpr` (Sym, Lit, Bin + - * // %, Fn min / max / ceil_div / align_up) plus `SizeOf`
(the bytes of an element type, which a template parameter makes unknown until instantiation). It was chosen over
`opgen.tiling.program.E` because the kernel stage must not import the later tiling stage (docs/design.md "Packages
flow one way") and because dims already are the language of shapes, whose tails and offsets the schedule computes
from; conditions are `opgen.ir.dims.Constraint` (lhs op rhs), an `If` taking a conjunction of them. Integer values
are int64 elements unless a field says bytes. A symbol names one of: a tiling-data field (`KernelClass.fields`,
printed `td_->name`), a member scalar (`KernelClass.scalars`), a parameter of the enclosing `Func`, a `Let`, a loop
variable or loop tail, or `BLOCK_IDX` / `BLOCK_NUM` (GetBlockIdx() / GetBlockNum(), this core's index and the
core count). Float scalars use the small `FExpr` language (FConst, FRef, FInt, FBits, FBin, FNeg, FMinMax, FCond, FCall, FLoad).

What each node means operationally (pipe; reads; writes)
-------------------------------------------------------
Declarations (members of a KernelClass):
  GmTensor(name, dtype, workspace, region)
                                    a GlobalTensor bound in Init to a GM_ADDR argument (or the user workspace;
                                    workspace tensors of different `region`s never share a byte: the lowering's
                                    claim, checked by the interpreter's race detector).
  GmView(tensor, offset, strides)   elements [offset, ...) of a GmTensor; strides (elements) document the
                                    view's layout for analyses; the copy's burst parameters say what is moved.
  Local(name, pos, queue, depth)    a TQue<pos, depth> (queue=True: hand-offs between pipes) or a TBuf<pos>
                                    (queue=False: one region the program synchronises itself) of the TPipe;
                                    pool=True: a TBufPool<pos, depth> (depth = its buffer handles).
  TensorVar(name, dtype, count)     a member LocalTensor (an array of `count` when given).
  ScalarVar(name, ctype, init)      a member scalar (int64_t, float, bool, uint32_t).
Statements (a Func body is a tuple of them, run in order by the scalar unit, which issues work to the pipes):
  Let / Assign(name, DimExpr)       S: an int64 scalar (const unless mutable); reads the symbols of the value.
  FLet / FAssign(name, FExpr)       S: a float scalar.
  For(var, lo, hi, step, body, tail)  S: var = lo; var < hi; var += step; `tail`, when named, is bound each
                                    iteration to min(step, hi - var) (the extent of this iteration).
  If(cond, then, orelse)            S: the conjunction of the Constraints selects a branch. guard=True marks a
                                    presence guard (If.guard: its cond is presence literals only).
  InitBuffer(buf, bytes, num)       S: gives the Local `num` blocks of `bytes` bytes of its position's memory
                                    (UB for VECIN / VECOUT / VECCALC); num = 1 for a TBuf. `pool`: carved from that
                                    TBufPool instead of the pipe; a pool Local: pipe_.InitBufPool, `share` the pool
                                    whose bytes it takes (buffers of the two share UB: opgen.kernel.ubplan).
  Get(var, buf, dtype, offset)      S: var = the TBuf's memory as dtype, from element `offset`.
  View(var, src)                    S: var = the region src (same tensor, shifted start).
  Alloc(var, queue, dtype)          S: var = a free block of the queue (blocks until one is free: the FreeTensor
                                    of its previous user happened before; a WAR hand-off to the allocating pipe).
  EnQue(queue, var)                 producer pipe -> queue: var's writes (MTE2 for VECIN, V for VECOUT) are done.
  DeQue(var, queue, dtype)          consumer waits for the EnQue: the RAW hand-off (MTE2->V for VECIN, V->MTE3
                                    for VECOUT); var = the dequeued block.
  Free(queue, var)                  consumer is done with var (its reads precede any later Alloc's writes).
  Copy(dst, src, block_count, block_len, src_stride, dst_stride)
                                    DataCopyPad of block_count bursts of block_len BYTES. GM->UB on MTE2
                                    (reads GM src, writes UB dst; src_stride = GM gap in bytes, dst_stride = UB gap
                                    in 32-B blocks); UB->GM on MTE3 (reads UB, writes GM; src_stride = UB gap in
                                    blocks, dst_stride = GM gap in bytes). Each UB burst starts on a 32-B block.
  Vec(op, args)                     the isa.INSTRS[op] instruction on its pipe (V for vector entries); reads the
                                    operands the table marks "r", writes those marked "w" (Ref regions, from
                                    their offset, `count` elements where the entry has a count).
  GetValue(name, src)               S: a float scalar = src's element (reads UB on the scalar pipe).
  SetValue(dst, value)              S: writes one UB element from the scalar pipe (a float, or an integer
                                    converted to dst's element type).
  TrapUnless(value, bound)          S: AscendC::Trap() unless 0 <= value < bound (float value, int64 bound): an
                                    index check; the core stops and the launch fails (ascendc.md §1.9, Trap).
  Barrier(pipe)                     PipeBarrier<pipe>: later instructions of that pipe wait for earlier ones
                                    (PIPE_ALL: every pipe).
  SetFlag(src, dst, id) / WaitFlag  HardEvent src_dst: `dst` pipe waits until `src` pipe's work issued before the
                                    SetFlag is done. A flag is set once before it is waited once. `pool`: the id
                                    from the TPipe's pool at run time (FetchEventID for a back-to-back pair,
                                    AllocEventID / ReleaseEventID around one with work between), kept in the local
                                    `var` (EVENT_VAR_PREFIX...; SetFlag's docstring): the queues take ids from the
                                    same pool, so a fixed id may be one a queue holds.
  CrossCoreSetFlag(mode, pipe, id) / CrossCoreWaitFlag(id)
                                    cross-core flag counters of a mixed launch (docs/reference/ascendc.md §1.6):
                                    the set is issued on `pipe` after that pipe's earlier work; mode 2 raises the
                                    counter of the other side of one AI Core (an AIC set: both its AIVs; both AIVs'
                                    sets: the AIC); the wait blocks while this core's counter of id is 0, then
                                    decrements it. GM written before the set is visible after the wait. No in-core
                                    ordering. Only inside a CoreIf; ids 0..10.
  SyncAll()                         every core of the launch reaches this point (GM writes before it are visible
                                    to every core after it); the workspace exchange primitive.
  Call(method, args)                runs a method of the class (its statements, in order).
  Return(value)                     a method's int64 (DimExpr) or float (FExpr) result.
  Comment(text)                     no effect; printed as a C++ comment.
  Scope(body)                       a nested block: names defined inside do not outlive it.
  StructLet(name, struct)           S: a local variable of a struct type the class declares (StructDecl), for a
                                    struct parameter of a method (the file skeleton's methods may fill it).
  CoreIf(unit, body)                S: body runs on the AIC (unit "cube", `if ASCEND_IS_AIC`) or the AIVs ("vector")
                                    of a mixed launch only; cube instructions live only under unit "cube".
  Nd2Nz(dst, src, rows, cols, src_pitch, pad_rows)
                                    MTE2: GM ND rows x cols (pitch src_pitch elements) -> L1 (A1/B1) NZ fractals,
                                    pad_rows (a multiple of 16) rows per fractal column (DataCopy + Nd2NzParams).
  LoadData(dst, src, start, repeat, src_stride, transpose, with_transpose, dst_gap, dst_frac_gap)
                                    MTE1: `repeat` 512-B fractals L1 -> L0A/L0B, source fractal start + r *
                                    src_stride, destination contiguous; transpose each 16 x 16 fractal (LoadData2D);
                                    with_transpose: LoadDataWithTranspose of int8 32 x 32 squares (2 fractals each),
                                    square r's fractals at r * (1 + dst_gap) and 1 + dst_frac_gap after it (512-B).
  Mmad(dst, a, b, m, n, k, init, bias)
                                    M: L0C (CO1, fp32) [+]= L0A (A2) x L0B (B2); init (a conjunction) = the
                                    cmatrixInitVal flag (true: C starts at 0, false: accumulate); `bias` (a C2 Ref):
                                    C starts at the bias-table row broadcast over the m rows (cmatrixSource).
  LoadBias(dst, src, blocks)        MTE1: L1 (C1) -> bias table (C2, fp32): `blocks` 64-B blocks of src, half
                                    converted to float on the way (DataCopy with DataCopyParams); int32 copied
                                    as int32 (an int8 product's bias).
  Fixpipe(dst, src, rows, cols, src_rows, dst_pitch)
                                    FIX: L0C NZ (src_rows = the Mmad's ceil16(m)) -> GM ND rows x cols (row pitch
                                    dst_pitch elements), cast to dst's element type (NoQuant / F322F16 / F322BF16);
                                    `atomic`: an fp32 atomic add into dst (SetAtomicAdd<float> around it).
                                    Facts of the cube nodes: docs/reference/ascendc.md §1.10 (cube path, layouts).
  Verbatim(lines)                   C++ lines a family printer made that are not nodes yet (the rows family's
                                    per-row stream, batch flush and cross-core epilogue): OPAQUE, any pipe may
                                    read or write anything in it; the verifier does not look inside.
Integer expressions may call an int64 method of the class: Invoke(method, args) (an address helper; not
statically evaluable), and read one element of an int32 / int64 GM input on the scalar unit: GmAt(tensor, index)
(an index table, cumulative lengths: device data); and take the integer a float scalar holds: FIndex(name) (an index
read as fp32 and checked by a TrapUnless, used as a GM element offset). A For with step None lets its body advance the variable (run-length loops). A Func with
extern=True is printed by the file skeleton (its body is not IR yet): a Call of it has unknown effects.
Functions: Func(name, params, body, ret, const); KernelClass(name, tparams, tiling_struct, args, gms, locals,
tensors, scalars, fields, init, process, methods, doc) is the unit both printers print (public Init(args...,
workspace, td) and Process(), private methods, members).

The verifier (`verify`) walks Init then Process, following Calls into methods, and raises IRError naming the node
for: an undefined symbol, tensor variable, buffer, method or GM tensor; a queue used out of its Alloc -> EnQue ->
DeQue -> Free order or beyond its InitBuffer block count (a loop body or If branch must leave every queue and flag
as it found it; a class whose queue protocol runs under presence guards is walked once per value of the presence
members those guards test, `presence_split`, each guard taking the branch that value runs); a WaitFlag without a pending SetFlag or a SetFlag already pending; a flag still set or a block
still held at the end; a constant-size region outside its buffer; operands that do not match the table entry; a
presence guard (If.guard) whose condition is not presence literals of the class's members only; queues that may
hold more ids of one HardEvent at once than the TPipe's pool of 8 (`check_event_ids`, after the walk).
"""

from __future__ import annotations

import difflib
import enum
import itertools
import re
import dataclasses
import weakref
from dataclasses import dataclass, field
from typing import Union

from opgen.errors import OpgenError
from opgen.ir.dims import Bin, Constraint, DimExpr, Fn, Lit, Prod, Rank, Sym, as_dim
from opgen.kernel.isa import CMP_MODES, INSTR_T, INSTRS, ROUND_MODES, TYPE_PARAMS, Op, Pipe
from opgen.names import cpp_name


class IRError(OpgenError):
    """A malformed Kernel IR program: the message names the rule; `node` is the offending node."""

    def __init__(self, message: str, node=None):
        self.node = node
        super().__init__(f"kernel IR: {message}" + (f" (at {_brief(node)})" if node is not None else ""))


def _brief(node) -> str:
    s = to_text_stmt(node) if isinstance(node, STMT_TYPES) else repr(node)
    s = s.splitlines()[0] if s else type(node).__name__
    return s if len(s) < 120 else s[:117] + "..."


# ------------------------------------------------------------------------------------------------ names and types
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
STRUCT_FIELD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)(?:\[([0-9]+)\])?$")
"""A field of a struct parameter (Param kind "struct", its type a KernelClass.structs StructDecl): an int64 or bool
symbol `p.seq`, `p.cond[0]`, or the tensor of a GmView `p.in[0]`."""
_CPP_RESERVED = frozenset({
    "alignas", "alignof", "and", "asm", "auto", "bool", "break", "case", "catch", "char", "class", "const",
    "constexpr", "continue", "default", "delete", "do", "double", "else", "enum", "explicit", "extern", "false",
    "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept",
    "not", "nullptr", "operator", "or", "private", "protected", "public", "register", "return", "short", "signed",
    "sizeof", "static", "struct", "switch", "template", "this", "throw", "true", "try", "typedef", "typename",
    "union", "unsigned", "using", "virtual", "void", "volatile", "while", "td", "td_", "pipe_", "workspace"})
"""C++ keywords and the names the printer itself uses (td / td_ / pipe_ / workspace)."""


def check_name(name: str, what: str) -> str:
    """`name` when it is a C++ identifier that is no keyword, no printer-reserved name and no element type the
    printer emits (`half`, `int8_t`, ...: ELEM_BYTES); else IRError naming `what`. Every KIR name becomes C++ text, so nothing else may pass (the project's rule for spec strings)."""
    if not isinstance(name, str) or not _IDENT.match(name) or name in _CPP_RESERVED:
        raise IRError(f"{what} name {name!r} is not a usable C++ identifier")
    if name in ELEM_BYTES:   # a local `half` would shadow the type: a later sizeof(half) reads the int64's 8 bytes
        raise IRError(f"{what} name {name!r} is a C++ element type the printer emits (ELEM_BYTES); it would shadow it")
    if name.startswith(EVENT_VAR_PREFIX):
        raise IRError(f"{what} name {name!r} starts with {EVENT_VAR_PREFIX!r}, reserved for the printer's event ids")
    return name


ELEM_BYTES = {"float": 4, "half": 2, "bfloat16_t": 2, "int32_t": 4, "uint32_t": 4, "int16_t": 2, "uint16_t": 2,
              "int8_t": 1, "uint8_t": 1, "int64_t": 8}
"""Bytes of each C++ element type a KIR tensor may have (a template parameter's size is known at instantiation)."""

SCALAR_CTYPES = ("int64_t", "float", "bool", "uint32_t", "int32_t")
"""C++ types of member scalars and function parameters of scalar kind."""


class TPos(enum.Enum):
    """TPosition of a Local (docs/reference/ascendc.md §1.5): where its memory lies (VECIN / VECOUT / VECCALC: UB;
    A1 / B1 / C1: L1 (C1: a bias row on its way to the bias table); A2: L0A; B2: L0B; C2: the bias table (BiasTable);
    CO1: L0C; CO2: UB, fixpipe output)."""

    VECIN = "VECIN"
    VECOUT = "VECOUT"
    VECCALC = "VECCALC"
    A1 = "A1"
    B1 = "B1"
    C1 = "C1"
    C2 = "C2"
    A2 = "A2"
    B2 = "B2"
    CO1 = "CO1"
    CO2 = "CO2"


HARD_EVENTS = frozenset({
    "MTE2_V", "V_MTE2", "MTE3_V", "V_MTE3", "MTE2_MTE3", "MTE3_MTE2", "S_V", "V_S", "S_MTE2", "MTE2_S", "S_MTE3",
    "MTE3_S", "MTE2_MTE1", "MTE1_MTE2", "MTE1_M", "M_MTE1", "M_FIX", "FIX_M", "MTE2_FIX", "FIX_MTE2", "FIX_MTE3",
    "FIX_S", "M_S", "MTE1_FIX", "FIX_MTE1", "M_V", "V_M", "MTE3_MTE1", "MTE1_MTE3", "MTE1_V", "MTE2_M", "M_MTE2",
    "V_MTE1"})
"""HardEvent names a SetFlag / WaitFlag may use (docs/reference/ascendc.md §1.6; src_dst pipes)."""

POOL_IDS = 8
"""Event ids the TPipe's pool holds per HardEvent (EVENT_ID0..7, docs/reference/ascendc.md §1.5)."""


def handoff_ids(row_queues: int, stat_queue: bool, staging: int, bufs: int = 2) -> int:
    """Ids of one hand-off's HardEvent (V_MTE2 for the inputs, MTE3_V for the outputs) that a vector kernel's queues
    may hold at once, counted from below: `bufs` for each of `row_queues` row queues, two for the statistics' one
    shared queue (`stat_queue`), one for each of `staging` one-buffer staging queues (paramQue_ / accOutQue_). A
    freed buffer holds its FreeTensor id until its next AllocTensor and after a loop over passes every buffer is
    freed (queue_event_buffers counts the class itself; docs/design.md "Event ids of the queues"). The planning
    rule of the rows family (rowcounts.two_buffer_ids) and the head rows (headsched.row_queue_bufs)."""
    return bufs * row_queues + (2 if stat_queue else 0) + staging
QUEUE_HANDOFF = {TPos.VECIN: (Pipe.MTE2, Pipe.V), TPos.VECOUT: (Pipe.V, Pipe.MTE3), TPos.A1: (Pipe.MTE2, Pipe.MTE1),
                 TPos.B1: (Pipe.MTE2, Pipe.MTE1), TPos.C1: (Pipe.MTE2, Pipe.MTE1), TPos.A2: (Pipe.MTE1, Pipe.M),
                 TPos.B2: (Pipe.MTE1, Pipe.M), TPos.C2: (Pipe.MTE1, Pipe.M), TPos.CO1: (Pipe.M, Pipe.FIX)}
"""(producer, consumer) pipe of a queue's EnQue -> DeQue hand-off by TPosition (§1.5; EMU.md "Queues"); FreeTensor ->
the next AllocTensor hands the reverse. VECCALC and CO2 queues carry none."""


def queue_event_buffers(k) -> dict:
    """{HardEvent name: (ids, queues)}: per HardEvent of a queue hand-off, the most ids of it the queues of class `k`
    may hold at once, with the queues named as 'name (ids)'. A buffer holds one id of its FreeTensor's event
    (consumer -> producer) from FreeTensor until its next AllocTensor, and after a loop over passes every buffer of
    a queue is freed: `num` ids per InitBuffer; the EnQue event (producer -> consumer) one per enqueued buffer until
    its DeQue: min(num, depth). The two branches of an If are alternatives, and so are the methods (the strategies).
    docs/design.md "Event ids of the queues"."""
    loc = {b.name: b for b in k.locals if b.queue}

    def count(stmts) -> dict:
        out: dict = {}
        for st in stmts:
            if isinstance(st, InitBuffer) and st.buf in loc and loc[st.buf].pos in QUEUE_HANDOFF:
                a, b = QUEUE_HANDOFF[loc[st.buf].pos]
                for ev, ids in ((f"{b.name}_{a.name}", st.num), (f"{a.name}_{b.name}", min(st.num, loc[st.buf].depth))):
                    n, qs = out.get(ev, (0, ()))
                    out[ev] = (n + ids, qs + (f"{st.buf} ({ids})",))
            elif isinstance(st, If):
                t, e = count(st.then), count(st.orelse)
                for ev in set(t) | set(e):
                    n, qs = max(t.get(ev, (0, ())), e.get(ev, (0, ())), key=lambda x: x[0])
                    m, ps = out.get(ev, (0, ()))
                    out[ev] = (m + n, ps + qs)
            else:
                for body in children(st):
                    for ev, (n, qs) in count(body).items():
                        m, ps = out.get(ev, (0, ()))
                        out[ev] = (m + n, ps + qs)
        return out

    best: dict = {}
    for body in [k.init, k.process] + [m.body for m in k.methods if not m.extern]:
        for ev, v in count(body).items():
            if v[0] > best.get(ev, (0, ()))[0]:
                best[ev] = v
    return best


def check_event_ids(k) -> None:
    """IRError when the queues of class `k` may hold more ids of one HardEvent than the TPipe's pool has
    (queue_event_buffers > POOL_IDS): the device's AllocEventID has none to give (a release build hands out one past
    EVENT_ID7). A rule of `verify`, so no class that would exhaust the pool on the device is printed or run; the
    error names the class, the HardEvent, the count and the queues holding the ids (docs/design.md "Event ids of
    the queues")."""
    for ev, (n, qs) in sorted(queue_event_buffers(k).items()):
        if n > POOL_IDS:
            raise IRError(f"class {k.name}: its queues hold up to {n} ids of HardEvent::{ev} at once ("
                          + ", ".join(qs) + f"), more than the TPipe's pool of {POOL_IDS}: plan fewer queue buffers "
                          "of that hand-off (docs/design.md \"Event ids of the queues\")")


BLOCK_IDX = Sym("blockIdx")
"""This core's index, 0 .. BLOCK_NUM - 1 (GetBlockIdx(), docs/reference/ascendc.md §1.3)."""
BLOCK_NUM = Sym("blockNum")
"""The number of cores of the launch (GetBlockNum())."""
SUB_BLOCK_IDX = Sym("subBlockIdx")
"""On an AIV of a mixed launch: which of its AI Core's two AIVs it is, 0 or 1 (GetSubBlockIdx(), §1.3)."""
TASK_RATIO = Sym("taskRatio")
"""AIVs per AIC of a mixed launch (GetTaskRatio(): 2 for KERNEL_TYPE_MIX_AIC_1_2, §1.3); an AIV's AI Core is
BLOCK_IDX // TASK_RATIO."""
_SPECIAL = {"blockIdx": "GetBlockIdx()", "blockNum": "GetBlockNum()", "subBlockIdx": "GetSubBlockIdx()",
            "taskRatio": "GetTaskRatio()"}


@dataclass(frozen=True, eq=True)
class SizeOf(DimExpr):
    """sizeof(ctype) in bytes, an atom of the integer language; a template parameter's value comes from the env
    of `evaluate` under the key "sizeof(T)"."""

    ctype: str

    def __str__(self):
        return f"sizeof({self.ctype})"

    def symbols(self):
        """No dim symbols: a type's size is not a scalar of the program."""
        return set()

    def evaluate(self, env):
        """Bytes of the type: fixed for the ELEM_BYTES types, env["sizeof(T)"] for a template parameter. Raises
        IRError when unknown."""
        if self.ctype in ELEM_BYTES:
            return ELEM_BYTES[self.ctype]
        try:
            return int(env[str(self)])
        except KeyError:
            raise IRError(f"{self} is not known here") from None


def _symbols_of(exprs) -> set:
    """The symbols of integer expressions `exprs`, together."""
    out: set = set()
    for a in exprs:
        out |= as_dim(a).symbols()
    return out


@dataclass(frozen=True, eq=True)
class Invoke(DimExpr):
    """method(args...): the int64 result of a method of the class (an address helper such as a strided view's
    row offset) inside an integer expression; not evaluable statically (its value needs the method's body)."""

    method: str
    args: tuple = ()

    def __str__(self):
        return f"{self.method}({', '.join(str(a) for a in self.args)})"

    def symbols(self):
        """The symbols of the arguments."""
        return _symbols_of(self.args)

    def evaluate(self, env):
        """Not evaluable from an env: raises IRError."""
        raise IRError(f"{self} needs its method's body to evaluate")


@dataclass(frozen=True, eq=True)
class TableAt(DimExpr):
    """table[i0][i1]...: an element of a ConstTable of the class (KernelClass.tables) as an int64, e.g. the part a
    slot holds for the call's attribute key; not evaluable statically (its value is the table's)."""

    table: str
    index: tuple = ()

    def __str__(self):
        return self.table + "".join(f"[{i}]" for i in self.index)

    def symbols(self):
        """The symbols of the indices."""
        return _symbols_of(self.index)

    def evaluate(self, env):
        """Not evaluable from an env: raises IRError."""
        raise IRError(f"{self} needs its table's values to evaluate")


@dataclass(frozen=True, eq=True)
class GmAt(DimExpr):
    """tensor[index]: one element of an integer GM tensor (int32_t or int64_t: an index table, a cumulative length
    array, device data) read by the scalar unit as an int64 (GlobalTensor::GetValue; PIPE_S, through the scalar
    data cache; docs/reference/ascendc.md §1.4); not evaluable statically (its value is the data's). The tensor is
    one the kernel only reads."""

    tensor: str
    index: DimExpr = Lit(0)

    def __str__(self):
        return f"{self.tensor}[{self.index}]"

    def symbols(self):
        """The symbols of the index."""
        return as_dim(self.index).symbols()

    def evaluate(self, env):
        """Not evaluable from an env: raises IRError."""
        raise IRError(f"{self} needs the GM data to evaluate")


@dataclass(frozen=True, eq=True)
class FIndex(DimExpr):
    """The int64 value of float scalar `name` (an FLet / FAssign local or a float member) that holds an exact
    non-negative integer: an index read as fp32 (exact below 2^24, docs/design.md "Rows family: integer attributes")
    and checked by a TrapUnless before use, e.g. the element offset of a GM read by the scalar unit (a column row's
    element picked by a per-row index: opgen.kernel.rowclass, `sgather`). Printed `static_cast<int64_t>(name)` (C++
    truncation, exact for such a value); the interpreter faults on a value that is not a non-negative integer. Its
    `symbols()` are empty (no int64 symbol is read); the verifier checks that `name` is a float scalar; not evaluable
    statically (its value is the data's)."""

    name: str

    def __str__(self):
        return f"int({self.name})"

    def symbols(self):
        """No int64 symbol: the float scalar is checked by the verifier apart (float_indices). An empty set, as
        every DimExpr's symbols() (a sum of it and a row's offset joins their sets)."""
        return set()

    def evaluate(self, env):
        """Not evaluable from an env: raises IRError."""
        raise IRError(f"{self} needs the float scalar's value to evaluate")


@dataclass(frozen=True, eq=True)
class Select(DimExpr):
    """cond ? a : b with cond a Constraint or a tuple of them (their conjunction): an integer choice, e.g. the last
    core's share."""

    cond: Union[Constraint, tuple]
    a: DimExpr
    b: DimExpr

    @property
    def conds(self) -> tuple:
        """The condition as a tuple of Constraints."""
        return self.cond if isinstance(self.cond, tuple) else (self.cond,)

    def __str__(self):
        return f"select({' && '.join(str(c) for c in self.conds)}, {self.a}, {self.b})"

    def symbols(self):
        """The symbols of the condition and both values."""
        out = as_dim(self.a).symbols() | as_dim(self.b).symbols()
        for c in self.conds:
            out |= c.symbols()
        return out

    def evaluate(self, env):
        """a when the condition holds under env, else b."""
        return as_dim(self.a).evaluate(env) if all(c.holds(env) for c in self.conds) else as_dim(self.b).evaluate(env)


def subexprs(e) -> list:
    """Integer expression `e` and every expression inside it, pre-order: the operands of Bin / Fn, the arguments
    of Invoke, the indices of TableAt, the conditions' sides and both values of Select."""
    e = as_dim(e) if not isinstance(e, DimExpr) else e
    if isinstance(e, Invoke):
        kids = list(e.args)
    elif isinstance(e, TableAt):
        kids = list(e.index)
    elif isinstance(e, GmAt):
        kids = [e.index]
    elif isinstance(e, Bin):
        kids = [e.lhs, e.rhs]
    elif isinstance(e, Fn):
        kids = list(e.args)
    elif isinstance(e, Select):
        kids = [y for c in e.conds for y in (c.lhs, c.rhs)] + [e.a, e.b]
    else:
        kids = []
    return [e] + [x for k in kids for x in subexprs(k)]


def table_refs(e) -> list:
    """Every TableAt inside integer expression `e`."""
    return [x for x in subexprs(e) if isinstance(x, TableAt)]


def invokes(e) -> list:
    """Every Invoke inside integer expression `e`."""
    return [x for x in subexprs(e) if isinstance(x, Invoke)]


def gm_reads(e) -> list:
    """Every GmAt inside integer expression `e`."""
    return [x for x in subexprs(e) if isinstance(x, GmAt)]


def float_indices(e) -> list:
    """Every FIndex inside integer expression `e`."""
    return [x for x in subexprs(e) if isinstance(x, FIndex)]


def E(x) -> DimExpr:
    """An integer expression from an int, a symbol name (str) or a DimExpr."""
    if isinstance(x, str):
        return Sym(check_name(x, "symbol") if x not in _SPECIAL else x)
    return as_dim(x)


def const_value(e) -> int | None:
    """The value of an integer expression without symbols (None when it has some or an unknown SizeOf)."""
    try:
        return as_dim(e).evaluate({})
    except (OpgenError, KeyError):
        return None


# ------------------------------------------------------------------------------------------------ float scalars
class FExpr:
    """Base of the float scalar expressions (fp32, computed by the scalar unit)."""


@dataclass(frozen=True)
class FConst(FExpr):
    """A float literal: finite, or ±infinity (printed as the compiler built-in `__builtin_inff()`, which g++ and the
    device compiler provide; device code has no std::numeric_limits, docs/reference/ascendc.md §1.4); never NaN."""

    value: float

    def __post_init__(self):
        v = float(self.value)
        if v != v:
            raise IRError(f"float literal {self.value!r} is NaN")


@dataclass(frozen=True)
class FRef(FExpr):
    """A float scalar by name (an FLet, a float member scalar or parameter, or a GetValue result)."""

    name: str


@dataclass(frozen=True)
class FInt(FExpr):
    """An integer expression converted to float."""

    value: DimExpr


@dataclass(frozen=True)
class FBits(FExpr):
    """The float whose IEEE-754 bits are the low 32 bits of an integer expression (a float attribute carried in a
    tiling-data field as its bits; BitsToFloat of templates/op_kernel/_scalar.h.j2)."""

    value: DimExpr


@dataclass(frozen=True)
class FBin(FExpr):
    """a op b with op one of + - * /. `paren` (not compared) says whether the C++ printer brackets it: the row
    programs' scalar texts are printed as written (opgen.kernel.rowfexpr)."""

    op: str
    a: FExpr
    b: FExpr
    paren: bool = field(default=True, compare=False)

    def __post_init__(self):
        if self.op not in ("+", "-", "*", "/"):
            raise IRError(f"float operator {self.op!r} unknown")


@dataclass(frozen=True)
class FLoad(FExpr):
    """One element read by the scalar unit (PIPE_S): a UB element `src` of a float tensor (a Ref: LocalTensor::
    GetValue), or a GM element (a GmView: GlobalTensor::GetValue, the element converted to fp32 exactly -- fp32,
    fp16 or bf16 (through ToFloat: the scalar unit has no bf16 conversion) --, printed `GmScalar(gm, i)`, a helper
    of the file skeleton; docs/reference/ascendc.md §1.4)."""

    src: "Ref | GmView"


_FCALLS = {"sqrt": "Std::sqrt", "abs": "Std::abs"}


@dataclass(frozen=True)
class FCall(FExpr):
    """fn(arg) with fn one of sqrt, abs (asc-devkit Std:: scalar functions)."""

    fn: str
    arg: FExpr

    def __post_init__(self):
        if self.fn not in _FCALLS:
            raise IRError(f"float function {self.fn!r} unknown")


@dataclass(frozen=True)
class FNeg(FExpr):
    """-x (exact in IEEE fp32); `paren` (not compared): the C++ printer writes -(x) instead of -x."""

    x: FExpr
    paren: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class FMinMax(FExpr):
    """max(a, b) (fn "max") or min(a, b) (fn "min"), printed as the C++ conditional (a > b ? a : b) /
    (a < b ? a : b): with a NaN operand it yields b, as the device's scalar unit does for that expression."""

    fn: str
    a: FExpr
    b: FExpr

    def __post_init__(self):
        if self.fn not in ("max", "min"):
            raise IRError(f"float min/max {self.fn!r} unknown")


F_CMP = ("<", "<=", ">", ">=", "==", "!=")
"""The comparisons of an FCond: C++'s float comparisons (IEEE: false with a NaN operand but for !=)."""


@dataclass(frozen=True)
class FCond(FExpr):
    """(a <cmp> b ? x : y) on the scalar unit, printed as that C++ conditional: x when the IEEE comparison holds,
    else y (a NaN operand makes every comparison but != false). Only the chosen branch's value is taken, so an
    infinite or NaN value in the other does not reach the result (a per-row `b.where` of per-row values:
    opgen.kernel.rows, docs/design.md "Per-row comparisons and choices")."""

    cmp: str
    a: FExpr
    b: FExpr
    x: FExpr
    y: FExpr

    def __post_init__(self):
        if self.cmp not in F_CMP:
            raise IRError(f"float comparison {self.cmp!r} unknown (one of {', '.join(F_CMP)})")


def fexpr_children(f) -> tuple:
    """The float sub-expressions of float expression `f` (FBin, FNeg, FMinMax, FCond, FCall; none for the atoms)."""
    if isinstance(f, FCond):
        return (f.a, f.b, f.x, f.y)
    if isinstance(f, (FBin, FMinMax)):
        return (f.a, f.b)
    if isinstance(f, FNeg):
        return (f.x,)
    if isinstance(f, FCall):
        return (f.arg,)
    return ()


# ------------------------------------------------------------------------------------------------ declarations
@dataclass(frozen=True)
class GmTensor:
    """A GlobalTensor member `name` of element type dtype, bound in Init to GM_ADDR argument `arg` (the user
    workspace when workspace=True; then arg is unused). `region` (workspace tensors only): the part of the workspace
    every view of this tensor stays inside; views of workspace tensors of different regions never share a byte --
    the lowering's claim, which the dependency pass relies on (opgen.kernel.kir_sync orders them as different
    buffers) and the interpreter's race detector checks at run time (an access it breaks races). "" for the whole
    workspace."""

    name: str
    dtype: str
    arg: str = ""
    workspace: bool = False
    region: str = ""


@dataclass(frozen=True)
class GmView:
    """Elements [offset, ...) of GmTensor `tensor`; strides (elements per step of each outer axis) describe the
    view for analyses (the printer uses the offset only)."""

    tensor: str
    offset: DimExpr = Lit(0)
    strides: tuple = ()


@dataclass(frozen=True)
class Local:
    """A TPipe allocation: a TQue<pos, depth> when queue, else a TBuf<pos>. Its size is set by InitBuffer."""

    name: str
    pos: TPos = TPos.VECCALC
    queue: bool = False
    depth: int = 1
    pool: bool = False   # a TBufPool<pos, depth>: `depth` its buffer handles; its InitBuffer is pipe_.InitBufPool


@dataclass(frozen=True)
class TensorVar:
    """A member LocalTensor<dtype> `name` (an array of `count` tensors when count is given)."""

    name: str
    dtype: str
    count: int | None = None


@dataclass(frozen=True)
class ScalarVar:
    """A member scalar of C++ type ctype (SCALAR_CTYPES) with its initial value (C++ literal text is printed from
    it: an int or a float)."""

    name: str
    ctype: str = "int64_t"
    init: int | float = 0


@dataclass(frozen=True)
class Ref:
    """A UB region operand: tensor variable `tensor` (slot `slot` of a member array), from element `offset`; with
    `as_dtype` the same bytes read as that element type (LocalTensor::ReinterpretCast: a Compare's uint8_t bit mask
    kept in an fp32 row temporary, docs/reference/ascendc.md §1.9). `part` (j, n): the lowering's claim that the
    operand lies inside part j of the tensor's allocation cut into n equal parts (a shared queue buffer holding
    several outputs' values one after another, at offsets of run-time strides the dependency pass cannot compare):
    the pass takes the parts of one allocation as disjoint regions, and the Kernel-IR interpreter faults an access
    reaching past its part (docs/design.md "Parts of an allocation"). Printing ignores it."""

    tensor: str
    offset: DimExpr = Lit(0)
    slot: DimExpr | None = None
    as_dtype: str | None = None
    part: tuple | None = None


@dataclass(frozen=True)
class Param:
    """A method parameter: kind "int" (int64_t), "float", "bool", "tensor" (const LocalTensor<dtype>&), "gm"
    (const GlobalTensor<dtype>&) or "struct" (dtype&, const unless the method sets a field: a plain struct the file
    skeleton declares, e.g. the head kernel's Part, described by a StructDecl of KernelClass.structs; its fields are read as symbols `name.field` or
    `name.field[N]` (STRUCT_FIELD), its GM tensor fields as GmView("name.field[N]"), and it is passed on as
    Sym(name))."""

    name: str
    kind: str = "int"
    dtype: str = "float"


@dataclass(frozen=True)
class StructDecl:
    """A plain struct type the file skeleton declares, as far as Kernel IR reads it through a struct parameter:
    `fields` ((name, kind, dtype, count), ...): kind "int" (int64_t) or "bool" (read as an int64 / bool symbol), or
    "gm" (a GlobalTensor<dtype>, the tensor of a GmView); count None for a scalar field, else the array length.
    `defaults` ((field, value), ...): the int fields whose member initialiser is not 0 (the declaration says so; a
    StructLet starts every other int field at 0). With `in_class` the C++ printer declares it in the class's
    public section (`doc` above it, `field_docs` beside the fields); else the file skeleton declares it once for
    every class of the file."""

    name: str
    fields: tuple = ()
    defaults: tuple = ()
    doc: str = ""          # the comment above the declaration the printer prints
    field_docs: tuple = ()  # ((field, comment), ...): a comment beside a field's declaration
    in_class: bool = False  # printed in the class's public section (else the file declares it, shared by classes)

    def field(self, name: str):
        """(kind, dtype, count) of field `name`, or None."""
        for f in self.fields:
            if f[0] == name:
                return f[1:]
        return None


_TABLE_RANGE = {"int8_t": (-2**7, 2**7 - 1), "uint8_t": (0, 2**8 - 1), "int16_t": (-2**15, 2**15 - 1),
                "int32_t": (-2**31, 2**31 - 1), "uint32_t": (0, 2**32 - 1), "int64_t": (-2**63, 2**63 - 1)}


@dataclass(frozen=True)
class ConstTable:
    """A constant integer table of the kernel's file (a constexpr array printed at namespace scope by
    `namespace_cpp`, e.g. the part each slot holds per attribute key): `ctype` one of int8_t, uint8_t, int16_t,
    int32_t, uint32_t, int64_t; `shape` its dimensions; `values` row-major, every one inside ctype's range. Read by
    TableAt."""

    name: str
    ctype: str
    shape: tuple
    values: tuple
    doc: str = ""          # the comment above the declaration
    row_docs: tuple = ()   # a comment per index of the first axis, beside its row (none: the rows packed)
    dim_names: tuple = ()  # the constants the declaration sizes its axes with (KernelClass.consts), else numbers

    def __post_init__(self):
        lo, hi = _TABLE_RANGE.get(self.ctype, (None, None))
        if lo is None:
            raise IRError(f"table {self.name}: element type {self.ctype!r} is not one of {', '.join(_TABLE_RANGE)}")
        n = 1
        for d in self.shape:
            n *= d
        if n != len(self.values):
            raise IRError(f"table {self.name}: {len(self.values)} values for shape {list(self.shape)}")
        bad = [v for v in self.values if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi]
        if bad:
            raise IRError(f"table {self.name}: value {bad[0]!r} is not an integer in [{lo}, {hi}] ({self.ctype})")

    def at(self, index) -> int:
        """The element at `index` (ints). Raises IndexError outside the shape."""
        flat = 0
        for i, d in zip(index, self.shape):
            if not 0 <= i < d:
                raise IndexError(f"{self.name}{list(index)} outside its shape {list(self.shape)}")
            flat = flat * d + i
        return self.values[flat]


# ------------------------------------------------------------------------------------------------ statements
@dataclass(frozen=True)
class StructSet:
    """A field of a struct variable (a StructLet or a struct parameter) set: `target` `name.field` or
    `name.field[N]` (STRUCT_FIELD); `value` an integer expression for an int / bool field, a GmView (a view of a
    declared GM tensor) for a GM tensor field."""

    target: str
    value: Union[DimExpr, "GmView"]
    doc: str = ""


@dataclass(frozen=True)
class Let:
    """int64 scalar `name` = value (const unless mutable)."""

    name: str
    value: DimExpr
    mutable: bool = False


@dataclass(frozen=True)
class Assign:
    """name = value for a mutable Let, a member scalar or a loop-free int parameter."""

    name: str
    value: DimExpr


@dataclass(frozen=True)
class FLet:
    """float scalar `name` = value."""

    name: str
    value: FExpr
    mutable: bool = False
    doc: str = ""


@dataclass(frozen=True)
class FAssign:
    """float scalar name = value (a mutable FLet or a float member)."""

    name: str
    value: FExpr
    doc: str = ""


@dataclass(frozen=True)
class For:
    """for (var = lo; var < hi; var += step) body; `tail` names min(step, hi - var) inside the body. var may be a
    member scalar (then it is assigned, not declared). step None: the body advances var itself (an Assign of the
    mutable loop variable; printed `for (var = lo; var < hi;)`), and there is no tail."""

    var: str
    lo: DimExpr
    hi: DimExpr
    step: DimExpr
    body: tuple
    tail: str | None = None
    doc: str = ""
    inclusive: bool = False   # var <= hi (hi included)
    disjoint: bool = False
    """The lowering's claim that no two iterations touch overlapping on-chip bytes where either writes (rows of a
    many-row pass, each iteration its own row): the dependency pass (opgen.kernel.kir_sync) then orders nothing of
    one iteration after another's. The interpreter's race detector checks the claim at run time (a false one is a
    race fault where a dependence goes unordered)."""
    apart: tuple = ()
    """Tensor variables (names; a member tensor array: every slot) whose bytes each iteration touches apart from
    every other iteration's (each iteration its own row of them), while other buffers may be shared: the
    dependency pass orders an access to them after an earlier iteration's access to the same buffer no more (a
    weaker claim than `disjoint`, which covers every buffer). Checked like `disjoint` by the interpreter's race
    detector."""
    nonempty: bool = False
    """The lowering's claim that the loop runs at least once whenever it is reached (an item's key chunks: an item
    exists only for a chunk): the dependency pass then takes the state after an iteration as the state after the
    loop, as it does for constant bounds, instead of joining in the state before it (a loop it must take as
    possibly empty keeps syncs for the path that skips it). The interpreter faults when the loop runs no
    iteration."""
    pipelined: bool = False
    """The lowering's mark of a software-pipelined loop (each iteration issues the next one's copy-in before its own
    work, opgen.kernel.rowsched.pass_loop): the dependency pass hoists the SetFlags of the flag pairs in its body
    (kir_sync.place_syncs hoist=Hoist.LOOPS) so a wait does not also wait for the prefetch. No effect on the program's
    meaning."""


@dataclass(frozen=True)
class TilingCond:
    """The source of a runtime-guard member of KernelClass.presence (opgen.kernel.rowguard): `expr`, an integer
    expression over tiling fields (nonzero: the guard holds), which an `Assign(member, expr)` of the class's Init
    sets; `text` its condition in the spec's words ("label_smoothing != 0"), for comments."""

    expr: DimExpr
    text: str


@dataclass(frozen=True)
class If:
    """if (all of cond) then else orelse; cond is a tuple of Constraints."""

    cond: tuple
    then: tuple
    orelse: tuple = ()
    doc: str = ""
    guard: bool = False
    """A presence guard: `cond` is presence literals only (`hasInput<k>_`, `hasInput<k>_ == 0` of
    KernelClass.presence members; the verifier checks it), made by the lowering of a class serving several presences
    (opgen.kernel.rowclass.guarded / presence_guard, rowsched.guard, cube._guarded). The rewrites of guards
    (opgen.kernel.kirguard.hoist_guards, rowclass.merge_guards) recognise a guard by this mark, never by its
    condition alone (an If testing a presence member for another purpose keeps its form and comment) nor by its
    `doc`. No effect on the program's meaning."""


@dataclass(frozen=True)
class InitBuffer:
    """pipe_.InitBuffer(buf, [num,] bytes): `num` blocks of `bytes` bytes (num 1 for a TBuf). `pool`: the TBufPool
    member the blocks are carved from (pool.InitBuffer(...); "" = the pipe). `buf` a TBufPool Local: pipe_.InitBufPool(
    buf, bytes[, share]) -- `share` the pool whose bytes it reuses (the same start and length: the buffers of the two
    pools share UB, so no two of them may be live at once; opgen.kernel.ubplan)."""

    buf: str
    bytes: DimExpr
    num: int = 1
    pool: str = ""
    share: str = ""


@dataclass(frozen=True)
class Get:
    """var = buf.Get<dtype>()[offset] (a TBuf's memory as a tensor); `slot`: element `slot` of a member tensor
    array var."""

    var: str
    buf: str
    dtype: str
    offset: DimExpr = Lit(0)
    slot: DimExpr | None = None


@dataclass(frozen=True)
class View:
    """var = src (a sub-region of another tensor variable)."""

    var: str
    src: Ref


@dataclass(frozen=True)
class Alloc:
    """var = queue.AllocTensor<dtype>()."""

    var: str
    queue: str
    dtype: str


@dataclass(frozen=True)
class EnQue:
    """queue.EnQue(var)."""

    queue: str
    var: str


@dataclass(frozen=True)
class DeQue:
    """var = queue.DeQue<dtype>()."""

    var: str
    queue: str
    dtype: str


@dataclass(frozen=True)
class Free:
    """queue.FreeTensor(var)."""

    queue: str
    var: str


@dataclass(frozen=True)
class Copy:
    """DataCopyPad between UB and GM (module docstring): exactly one of dst / src is a GmView, the other a Ref.
    block_len is bytes; the strides' units depend on the side (GM bytes, UB 32-B blocks)."""

    dst: Union[Ref, GmView]
    src: Union[Ref, GmView]
    block_count: DimExpr = Lit(1)
    block_len: DimExpr = Lit(0)
    src_stride: DimExpr = Lit(0)
    dst_stride: DimExpr = Lit(0)
    doc: str = ""
    pad_value: FExpr | None = None   # DataCopyPadExtParams' padding value of a GM -> UB copy (None: T{})

    @property
    def pipe(self) -> Pipe:
        """MTE2 for GM -> UB, MTE3 for UB -> GM."""
        return Pipe.MTE2 if isinstance(self.src, GmView) else Pipe.MTE3


@dataclass(frozen=True)
class Vec:
    """One instruction of the table: INSTRS[op] with args ((operand name, value), ...): a Ref for a "ub" operand,
    a DimExpr for "count" / "value", an FExpr for "scalar", a round mode name for "mode", a CMPMODE enumerator name
    for "cmp" ("GT", ...), a tuple of DimExprs for a struct-valued "value" operand (Brcb's params)."""

    op: Op
    args: tuple
    doc: str = ""

    def arg(self, name: str):
        """The value of operand `name`. Raises KeyError."""
        for n, v in self.args:
            if n == name:
                return v
        raise KeyError(name)


def vec(op: Op, doc: str = "", **args) -> Vec:
    """Vec(op, args) with keyword operands; ints become Lit, strs of a ub operand become Ref(str)."""
    d = INSTRS[op]
    out = []
    for o in d.operands:
        if o.name not in args:
            continue
        v = args[o.name]
        if o.kind in ("ub", "gm") and isinstance(v, str):
            v = Ref(v)
        elif o.kind in ("count", "value") and isinstance(v, (int, str)):
            v = E(v)
        elif o.kind == "scalar" and isinstance(v, (int, float)):
            v = FConst(float(v))
        elif o.kind == "scalar" and isinstance(v, str):
            v = FRef(v)
        out.append((o.name, v))
    extra = set(args) - {o.name for o in d.operands}
    if extra:
        raise IRError(f"{d.api} has no operand {sorted(extra)[0]}")
    return Vec(op, tuple(out), doc)


@dataclass(frozen=True)
class GetValue:
    """float scalar `name` = src's element (scalar pipe read of UB)."""

    name: str
    src: Ref
    doc: str = ""


@dataclass(frozen=True)
class SetValue:
    """dst's element = value (scalar pipe write of UB): a float expression, or an integer DimExpr converted to dst's
    element type (a Gather offset table's uint32 byte offsets)."""

    dst: Ref
    value: Union[FExpr, DimExpr]
    doc: str = ""


@dataclass(frozen=True)
class TrapUnless:
    """Trap() unless 0 <= value < bound: `value` a float scalar expression (an index read as fp32) or an int64
    expression (an index read as an integer: compared as one), `bound` an int64 expression (the indexed axis'
    length). Scalar unit only; no UB access."""

    value: Union[FExpr, DimExpr]
    bound: DimExpr
    doc: str = ""


@dataclass(frozen=True)
class Barrier:
    """PipeBarrier<pipe>."""

    pipe: Pipe
    doc: str = ""


@dataclass(frozen=True)
class SetFlag:
    """SetFlag<HardEvent::src_dst>(id). `pool` (FLAG_POOLS) says where the id comes from: "" the fixed id `id`;
    "fetch" the TPipe's lowest free id of the event at run time (FetchEventID, which takes nothing: only for a
    SetFlag its WaitFlag follows at once); "alloc" an id taken from the pool before the set (AllocEventID) and given
    back after the wait (ReleaseEventID), for a pair with work between its set and wait. A pool flag keeps its id
    in the local event_t `var` (EVENT_VAR_PREFIX...), declared at the set: the wait names the same var and lies
    later in the same statement list; `id` is then only a slot number (docs/reference/ascendc.md §1.5-§1.6: the
    queues take their ids from the same pool, so a fixed id may be one a queue holds)."""

    src: Pipe
    dst: Pipe
    id: int = 0
    doc: str = ""
    pool: str = ""
    var: str = ""

    @property
    def event(self) -> str:
        """The HardEvent name (MTE2_V, ...)."""
        return f"{self.src.name}_{self.dst.name}"


@dataclass(frozen=True)
class WaitFlag:
    """WaitFlag<HardEvent::src_dst>(id); `pool` / `var` as its SetFlag's (an "alloc" wait also gives the id back to
    the TPipe's pool: ReleaseEventID)."""

    src: Pipe
    dst: Pipe
    id: int = 0
    doc: str = ""
    pool: str = ""
    var: str = ""

    @property
    def event(self) -> str:
        """The HardEvent name (MTE2_V, ...)."""
        return f"{self.src.name}_{self.dst.name}"


FLAG_POOLS = ("", "fetch", "alloc")
"""Where a SetFlag / WaitFlag's event id comes from (SetFlag): a fixed id, FetchEventID, AllocEventID /
ReleaseEventID."""
EVENT_VAR_PREFIX = "evt_"
"""Prefix of the local event_t a pool flag keeps its id in (SetFlag.var): reserved, no KIR name may start with it
(check_name)."""


def flag_key(s) -> tuple:
    """The key a SetFlag / WaitFlag pairs by: (event, id) for a fixed id, (event, var) for a pool one."""
    return (s.event, s.var) if s.pool else (s.event, s.id)


CROSS_FLAG_IDS = range(0, 11)
"""Cross-core flag ids of Atlas A2 / A3 (0..10, the CANN API pages; opgen/emu/include/emu/mix.h)."""


@dataclass(frozen=True)
class CrossCoreSetFlag:
    """CrossCoreSetFlag<mode, pipe>(id): raise the cross-core counter `id` (module docstring; mode 0 all cores of
    this kind, 1 the two AIVs of an AI Core, 2 AIC <-> its AIVs), issued on `pipe` after its earlier work."""

    mode: int
    pipe: Pipe
    id: int
    doc: str = ""


@dataclass(frozen=True)
class CrossCoreWaitFlag:
    """CrossCoreWaitFlag(id): block until this core's counter `id` is positive, then decrement it."""

    id: int
    doc: str = ""


@dataclass(frozen=True)
class SyncAll:
    """SyncAll(): every core reaches this point (cross-core exchange through GM workspace)."""

    doc: str = ""


@dataclass(frozen=True)
class Call:
    """method(args...); args are DimExprs, FExprs, Refs (tensor arguments) or GmViews; `result` (optional) names
    an int64 (ret "int64_t") or float (ret "float") scalar declared with the call's value."""

    method: str
    args: tuple = ()
    result: str | None = None
    targs: tuple = ()   # template arguments of a template method (element types)
    doc: str = ""
    assign: bool = False   # with `result`: assign that mutable scalar, declared before, instead of declaring it


@dataclass(frozen=True)
class Return:
    """return value (a DimExpr or an FExpr)."""

    value: Union[DimExpr, FExpr]


@dataclass(frozen=True)
class StructLet:
    """S: a local struct variable `name` of type `struct` (a StructDecl of the class), value-initialised; it can be
    passed to a struct parameter (a method of the file skeleton may fill it)."""

    name: str
    struct: str


@dataclass(frozen=True)
class Comment:
    """A comment line (no effect)."""

    text: str


@dataclass(frozen=True)
class Scope:
    """A nested block { body }: names defined inside are not visible after it."""

    body: tuple


@dataclass(frozen=True)
class Verbatim:
    """C++ statements a family printer produced that are not lowered into nodes yet (a rows program's per-row
    instruction stream, its batch flush and cross-core epilogue). Opaque: the verifier does not look inside, and
    an analysis must treat it as reading and writing anything on any pipe. Each line is one complete C++ line
    made by opgen (never spec text)."""

    lines: tuple


# ------------------------------------------------------------------------------------------------ cube statements
@dataclass(frozen=True)
class Nd2Nz:
    """MTE2: GM ND -> L1 NZ (DataCopy with Nd2NzParams, docs/reference/ascendc.md §1.10 step 2): `rows` x `cols`
    elements of `src` (row pitch `src_pitch` elements) into `dst` (a Ref in an A1 / B1 buffer) as 16-row x C0
    fractals, column of fractals after column; `pad_rows` (a multiple of 16, >= rows) is the fractal column's
    height (dstNzC0Stride, in 32-B blocks = rows). Reads GM src; writes dst[0, ceil(cols / C0) * pad_rows * C0).
    Every count is uint16 on the device (rows <= 16384, cols and src_pitch <= 65535)."""

    dst: Ref
    src: GmView
    rows: DimExpr
    cols: DimExpr
    src_pitch: DimExpr
    pad_rows: DimExpr
    doc: str = ""
    pipe = Pipe.MTE2


@dataclass(frozen=True)
class LoadData:
    """MTE1: L1 -> L0A / L0B (LoadData with LoadData2DParams, §1.10 step 3): `repeat` 512-B fractals from `src`
    (an A1 / B1 Ref), fractal r from src fractal start + r * src_stride, to dst (an A2 / B2 Ref) fractal r
    (contiguous); `transpose` transposes each 16 x 16 fractal (2-byte types). Units: fractals; repeat <= 255.

    `with_transpose` (transpose False) is the other instruction form, LoadDataWithTranspose with
    LoadData2dTransposeParams (docs/reference/ascendc.md §1.10 "Transposing load of int8 fractals"), int8_t only
    here: `repeat` squares of 32 x 32 int8 (two consecutive 512-B fractals of 16 x 32, 1024 B) from src square
    start + r * src_stride (units: 1024-B squares), each transposed (element (i, j) of the square to (j, i)), its
    first fractal (rows 0-15 of the transposed square) written at dst fractal r * (1 + dst_gap) and its second at
    that + 1 + dst_frac_gap (units: 512-B fractals; cubesem.square_destinations). dst_gap 1, dst_frac_gap 0 (the
    defaults) lay the squares' fractals contiguous: an int8 B [K, N] in L1 NZ (32 rows of a 32-column piece = one
    square) becomes B's L0B ZN that way. dst_gap 0, dst_frac_gap k1 - 1 put the two fractals of square r k1
    fractals apart: the k1 squares of one 32-column piece of an int8 Aᵀ [K, M] become two ZZ fractal rows of L0A
    (16 m-rows each, k1 fractals along K)."""

    dst: Ref
    src: Ref
    start: DimExpr
    repeat: DimExpr
    src_stride: DimExpr
    transpose: bool = False
    doc: str = ""
    with_transpose: bool = False
    dst_gap: DimExpr = Lit(1)
    dst_frac_gap: DimExpr = Lit(0)
    pipe = Pipe.MTE1


@dataclass(frozen=True)
class Mmad:
    """M: C (m x n, fp32 in L0C at `dst`, a CO1 Ref) = A (m x k, L0A ZZ at `a`) x B (k x n, L0B ZN at `b`), plus C
    when the conjunction `init` is false (cmatrixInitVal = init; §1.10 step 5). m, n, k elements, each <= 4095;
    m = 1 selects GEMV mode on the device, so a lowering passes m >= 2. Reads a, b (and dst when accumulating);
    writes dst."""

    dst: Ref
    a: Ref
    b: Ref
    m: DimExpr
    n: DimExpr
    k: DimExpr
    init: tuple = ()
    doc: str = ""
    bias: Ref | None = None   # a C2 (bias table) Ref: C starts at its row (fp32; int32 for int8 operands),
    # broadcast over the m rows (init ())
    pipe = Pipe.M


@dataclass(frozen=True)
class LoadBias:
    """MTE1: L1 -> bias table (DataCopy(C2 tensor, C1 tensor, DataCopyParams{1, blocks, 0, 0}), docs/reference/
    ascendc.md §1.10 "Bias on the cube"): `blocks` 64-B blocks of `src` (a C1 Ref of half or float) into `dst` (a
    C2 Ref of float, 64-B aligned), half converted to float on the way (the destination then twice the bytes); arch
    2201 converts half only (bfloat16_t is refused); an int32_t row into an int32_t table is copied as it is (the
    source = destination pair of §1.10; an int8 product's bias). Reads src; writes dst. blocks <= 65535."""

    dst: Ref
    src: Ref
    blocks: DimExpr
    doc: str = ""
    pipe = Pipe.MTE1


@dataclass(frozen=True)
class Fixpipe:
    """FIX: L0C -> GM (Fixpipe with FixpipeParamsV220, CFG_ROW_MAJOR: NZ -> ND, §1.10 step 6): `rows` x `cols`
    fp32 elements of `src` (a CO1 Ref whose Mmad had ceil16(m) = `src_rows` rows) into `dst` (row pitch
    `dst_pitch` elements), converted to dst's element type (quantPre NoQuant / F322F16 / F322BF16, round to
    nearest even). Reads src; writes GM dst. cols <= 4095, rows <= 8192. atomic: an fp32 atomic add into dst
    (SetAtomicAdd<float>() before, SetAtomicNone() after: duplicate destinations accumulate; §1.7)."""

    dst: GmView
    src: Ref
    rows: DimExpr
    cols: DimExpr
    src_rows: DimExpr
    dst_pitch: DimExpr
    doc: str = ""
    atomic: bool = False
    pipe = Pipe.FIX


@dataclass(frozen=True)
class CoreIf:
    """S: `body` runs on the cores of one kind of a mixed launch only: unit "cube" (the AIC, `if ASCEND_IS_AIC`)
    or "vector" (the AIVs, `if ASCEND_IS_AIV`). The test is a compile-time constant of each core's build
    (docs/reference/ascendc.md §1.3), so cube instructions may appear only under unit "cube"."""

    unit: str
    body: tuple
    doc: str = ""


@dataclass(frozen=True)
class IfConst:
    """`if constexpr (flag) then else orelse` over a bool template parameter: printing only. `merge_variant` makes it
    when the C++ printer joins a method and its variant (Func.variant_of); it is never part of a program the
    verifier, the sync pass or an interpreter sees (not in STMT_TYPES)."""

    flag: str
    then: tuple
    orelse: tuple = ()


CUBE_STMTS = (Nd2Nz, LoadData, Mmad, Fixpipe, LoadBias)
"""The cube statement types (their `pipe` is a class attribute)."""


STMT_TYPES = (Let, Assign, FLet, FAssign, For, If, InitBuffer, Get, View, Alloc, EnQue, DeQue, Free, Copy, Vec,
              GetValue, SetValue, TrapUnless, Barrier, SetFlag, WaitFlag, SyncAll, Call, Return, Comment, Scope, Verbatim) + CUBE_STMTS + (CoreIf, StructLet, StructSet, CrossCoreSetFlag, CrossCoreWaitFlag)
"""Every statement node type."""


@dataclass(frozen=True)
class Func:
    """A method: name, params, body (statements), ret ("void", "int64_t", "uint32_t" (an int64 value printed
    static_cast<uint32_t>, >= 0 by the caller's contract) or "float"), const, doc (a comment), static (a static
    member function: it reads no member). extern: a method the file skeleton prints (its body is not IR yet); a
    Call of it has unknown effects to the verifier, and the printers print its signature only."""

    name: str
    params: tuple = ()
    body: tuple = ()
    ret: str = "void"
    const: bool = False
    doc: str = ""
    extern: bool = False
    tparams: tuple = ()   # a template method's type parameters
    static: bool = False
    variant_of: tuple = ()
    """(base method, flag): this method is method `base` with one compile-time bool `flag` true (ComputeFetch is
    Compute issuing the next pass's copy-in). The IR keeps both methods (the verifier, the sync pass, the counts and
    the Kernel-IR interpreter see two plain methods); the C++ printer prints them as one member template
    `base<bool flag>` whose differing statements sit in `if constexpr (flag)` blocks, where `merge_variant` can
    (docs/design.md "Variants of a method")."""


def renamed_arg(name: str) -> str:
    """`v_<name>_`, the spelling of an Init argument `name` that is also a name of its class (KernelClass.__post_init__):
    no spec name ends in '_' and no name of a class starts with `v_` (docs/reference/names.md §1)."""
    return f"v_{name}_"


def kernel_arg(k: "KernelClass", name: str) -> str:
    """The Init argument of class `k` that the kernel entry's argument `name` (opgen.names.cpp_name of a spec
    input or output) is passed as: renamed_arg(name) where the class renamed it, else `name` (also when the class
    takes no such argument)."""
    return renamed_arg(name) if name not in k.args and renamed_arg(name) in k.args else name


@dataclass(frozen=True)
class KernelClass:
    """The unit both printers print: class `name` (template parameters tparams, type names) whose Init takes one
    GM_ADDR per `args` entry, then `workspace` and `const tiling_struct* td`, binds `gms`, then runs `init`;
    Process runs `process`; `methods` are private. `fields` are the tiling-data fields the program reads
    (symbols printed td_->field); `locals`, `tensors` and `scalars` are members; `structs` describe the types of
    struct parameters (StructDecl); `presence` pairs a bool scalar member with an optional input's Init argument:
    Init sets it to whether the pointer is not nullptr (a class serving every presence of its optional inputs);
    `ws_field`: the tiling field (bytes) Init tests before binding the workspace tensors (none when it is 0)."""

    name: str
    tiling_struct: str
    args: tuple = ()
    gms: tuple = ()
    locals: tuple = ()
    tensors: tuple = ()
    scalars: tuple = ()
    fields: tuple = ()
    init: tuple = ()
    process: tuple = ()
    methods: tuple = ()
    tparams: tuple = ()
    doc: str = ""
    structs: tuple = ()   # StructDecls of the struct parameters' types
    tables: tuple = ()    # ConstTables the expressions read (TableAt)
    presence: tuple = ()  # (bool scalar member, Init argument): Init sets the member to "the argument is not nullptr";
    #                       or (bool scalar member, TilingCond): a runtime guard, set by an Assign of its expression
    #                       in Init (opgen.kernel.rowguard); either way set in Init and never changed
    consts: tuple = ()    # ((name, value, comment), ...): constexpr int64_t constants at namespace scope (namespace_cpp)
    ws_field: str = ""    # a tiling field: Init binds the workspace tensors only when it is > 0 (a user workspace)
    tparam_bytes: tuple = ()   # ((template parameter, element bytes), ...): those whose every binding has one size

    def __post_init__(self):
        """Spell every Init argument that is also a name of the class (a tiling field, a method, a member, a template
        parameter: an operator input named `strategy` or `Process`) `v_<argument>_` (renamed_arg), in `args`, the
        GM tensors' bindings and `presence`. The arguments come from the spec's names (opgen.names.cpp_name), the
        class's own names from the lowering, so only here are both known; the entry passes the arguments by
        position, so the spelling is the class's own (kernel_arg finds it). docs/reference/names.md §1."""
        own = self.member_names()
        ren = {a: renamed_arg(a) for a in self.args if a in own}
        if not ren:
            return
        object.__setattr__(self, "args", tuple(ren.get(a, a) for a in self.args))
        object.__setattr__(self, "gms", tuple(g if g.workspace or g.arg not in ren else
                                              dataclasses.replace(g, arg=ren[g.arg]) for g in self.gms))
        object.__setattr__(self, "presence", tuple((m, ren.get(a, a) if isinstance(a, str) else a)
                                                   for m, a in self.presence))

    def member_names(self) -> set:
        """Every name the class declares besides its Init arguments: template parameters, tiling fields, GM tensors,
        local buffers, member tensors and scalars, methods (Init and Process included), constants and tables."""
        return {*self.tparams, *self.fields, *(g.name for g in self.gms), *(b.name for b in self.locals),
                *(t.name for t in self.tensors), *(s.name for s in self.scalars), *(m.name for m in self.methods),
                "Init", "Process", *(c[0] for c in self.consts), *(t.name for t in self.tables)}

    def method(self, name: str) -> Func:
        """The method `name`. Raises IRError."""
        for m in self.methods:
            if m.name == name:
                return m
        raise IRError(f"no method {name} in class {self.name}")


def _local_names(k: "KernelClass") -> set:
    """Every name the methods of `k` declare in their own scope: parameters, template parameters, loop variables
    and tails, and the locals their statements bind (_declared)."""
    out = set()
    for m in k.methods:
        out.update(q.name for q in m.params)
        out.update(m.tparams)
        for s in walk(m.body):
            out |= _declared(s)
            if isinstance(s, For):
                out.add(s.var)
                if s.tail:
                    out.add(s.tail)
    for body in (k.init, k.process):
        for s in walk(body):
            out |= _declared(s)
            if isinstance(s, For):
                out.add(s.var)
                if s.tail:
                    out.add(s.tail)
    return out


_DESCEND = object()
"""_rewritten's leaf answer for a field it leaves to the walk (a node or a tuple of nodes is walked, else kept)."""


def _rewritten(x, leaf):
    """`x` (a node, a tuple of nodes or a value) with each dataclass field's value replaced by leaf(node, field
    name, value) -- or, where leaf answers _DESCEND, walked the same way; nodes rebuilt only where a field changed.
    The one walk of the renamers (_renamed_locals: names, renamed_types: types)."""
    if isinstance(x, tuple):
        return tuple(_rewritten(v, leaf) for v in x)
    if not dataclasses.is_dataclass(x) or isinstance(x, type):
        return x
    changes = {}
    for f in dataclasses.fields(x):
        v = getattr(x, f.name)
        nv = leaf(x, f.name, v)
        if nv is _DESCEND:
            if not (isinstance(v, tuple) or dataclasses.is_dataclass(v)):
                continue
            nv = _rewritten(v, leaf)
        if nv is not v and nv != v:
            changes[f.name] = nv
    return dataclasses.replace(x, **changes) if changes else x


def _renamed_strs(v, ren: dict):
    """A str or a tuple of them (other values kept) with each str in `ren` spelled as it says."""
    if isinstance(v, str):
        return ren.get(v, v)
    return tuple(ren.get(a, a) if isinstance(a, str) else a for a in v) if isinstance(v, tuple) else v


def _renamed_locals(x, ren: dict):
    """`x` (a node, a tuple of nodes or a value) with every name in `ren` that a name field holds (NAME_FIELDS: a
    local's declaration and every reference to it; a dotted struct path by its head) spelled as `ren` says."""
    def leaf(node, name, v):
        if name not in NAME_FIELDS.get(type(node), ()):
            return _DESCEND
        if isinstance(v, str):
            head, dot, rest = v.partition(".")
            return ren[head] + dot + rest if head in ren else v
        return _renamed_strs(v, ren)
    return _rewritten(x, leaf)


TYPE_FIELDS = ("dtype", "as_dtype", "ctype", "targs", "tparams", "ret")
"""The fields that hold an element type, a template parameter or template arguments (a str, None, or a tuple of
strs), on any node; a struct parameter's dtype (the struct's type) is none (renamed_types; kir_sync's memo key)."""


def renamed_types(x, ren: dict):
    """`x` (a node, a tuple of nodes or a value) with every type in `ren` that a type field holds (TYPE_FIELDS: a
    template parameter's declaration and every element type, sizeof and template argument naming it) spelled as
    `ren` says; names (NAME_FIELDS) stay. A KernelClass's `tparam_bytes` pairs and a StructDecl's GlobalTensor
    fields are renamed too."""
    def leaf(node, name, v):
        if name in TYPE_FIELDS and not (isinstance(node, Param) and node.kind == "struct"):
            return _renamed_strs(v, ren)
        if isinstance(node, KernelClass) and name == "tparam_bytes":
            return tuple((ren.get(t, t), n) for t, n in v)
        if isinstance(node, StructDecl) and name == "fields":   # a "gm" field's GlobalTensor<dtype>
            return tuple((n, kind, ren.get(dt, dt) if kind == "gm" else dt, c) for n, kind, dt, c in v)
        return _DESCEND
    return _rewritten(x, leaf)


NAME_FIELDS = {
    KernelClass: ("name", "tiling_struct", "args", "fields"), Func: ("name",), Param: ("name",),
    GmTensor: ("name", "arg"), GmView: ("tensor",), Local: ("name",), TensorVar: ("name",),
    ScalarVar: ("name",), ConstTable: ("name",), Ref: ("tensor",), Let: ("name",),
    Assign: ("name",), FLet: ("name",), FAssign: ("name",), For: ("var", "tail", "apart"),
    InitBuffer: ("buf", "pool", "share"), Get: ("var", "buf"), View: ("var",), Alloc: ("var", "queue"),
    EnQue: ("queue", "var"), DeQue: ("var", "queue"), Free: ("queue", "var"),
    GetValue: ("name",), Call: ("method", "result"), StructLet: ("name",),
    StructSet: ("target",), FRef: ("name",), Invoke: ("method",), TableAt: ("table",),
    GmAt: ("tensor",), Sym: ("name",), Prod: ("name",), Rank: ("name",)}
"""{node type: the fields that hold a name the class defines or refers to (a str, None, or a tuple of strs)}: the
class, its tiling struct, GM_ADDR arguments, tiling fields, methods, parameters, GM tensors, buffers, tensor
variables, member scalars, tables, Let / FLet / loop / result variables, struct variables, and the symbols of
integer expressions (_renamed_locals renames by it; kir_sync's memo key numbers them)."""


# ------------------------------------------------------------------------------------------------ walking helpers
def children(s) -> list[tuple]:
    """The nested statement lists of a statement (a For's body, an If's branches, a Scope's body)."""
    if isinstance(s, (For, Scope, CoreIf)):
        return [s.body]
    if isinstance(s, If):
        return [s.then, s.orelse]
    return []


def map_children(s, fn):
    """Statement `s` with each of its nested statement lists (children) replaced by fn(list); `s` itself when it
    has none."""
    if isinstance(s, (For, Scope, CoreIf)):
        return dataclasses.replace(s, body=fn(s.body))
    if isinstance(s, If):
        return dataclasses.replace(s, then=fn(s.then), orelse=fn(s.orelse))
    return s


def walk(stmts):
    """Every statement of `stmts`, nested ones included, in program (pre-)order."""
    for s in stmts:
        yield s
        for body in children(s):
            yield from walk(body)


def _fsyms(f) -> set:
    if isinstance(f, FRef):
        return {f.name}
    if isinstance(f, FLoad):
        return set()
    if isinstance(f, (FInt, FBits)):
        return set(f.value.symbols())
    out: set = set()
    for c in fexpr_children(f):
        out |= _fsyms(c)
    return out


def reads_gm_scalar(k: "KernelClass") -> bool:
    """Whether a statement of `k` reads a GM element by the scalar unit (an FLoad of a GmView, printed through the
    file skeleton's GmScalar helper)."""
    def fexprs(x):
        if isinstance(x, FExpr):
            yield x
            for c in fexpr_children(x):
                yield from fexprs(c)
        elif isinstance(x, tuple):
            for y in x:
                yield from fexprs(y)

    stmts = list(walk(k.init)) + list(walk(k.process)) + [s for m in k.methods for s in walk(m.body)]
    return any(isinstance(f, FLoad) and isinstance(f.src, GmView)
               for s in stmts for v in vars(s).values() for f in fexprs(v))


def _floads(f) -> list:
    if isinstance(f, FLoad):
        return [f]
    return [x for c in fexpr_children(f) for x in _floads(c)]


# ------------------------------------------------------------------------------------------------ the verifier
@dataclass
class _Tensor:
    dtype: str
    buf: str | None = None     # the Local it lies in (None: unknown, e.g. a parameter)
    start: int | None = None   # its first element within the buffer block (None: not constant)
    elems: int | None = None   # elements of the buffer block (None: not constant)


@dataclass
class _State:
    scalars: dict = field(default_factory=dict)    # name -> "int" / "float" / "bool"; mutability in `mutable`
    mutable: set = field(default_factory=set)
    tensors: dict = field(default_factory=dict)    # name -> _Tensor
    inited: dict = field(default_factory=dict)     # Local name -> (num, bytes or None)
    queues: dict = field(default_factory=dict)     # queue -> [allocated, enqueued, dequeued]
    flags: set = field(default_factory=set)        # pending (event, id)
    gmp: dict = field(default_factory=dict)        # GM tensor parameters of the method: name -> GmTensor
    tmap: dict = field(default_factory=dict)       # a template method's type parameters -> element types
    unit: str | None = None                        # inside a CoreIf: its unit

    def copy(self) -> "_State":
        return _State(dict(self.scalars), set(self.mutable), dict(self.tensors), dict(self.inited),
                      {k: list(v) for k, v in self.queues.items()}, set(self.flags), dict(self.gmp),
                      dict(self.tmap), self.unit)


class _Verifier:
    def __init__(self, k: KernelClass):
        self.k = k
        self.locals = {b.name: b for b in k.locals}
        self.gms = {g.name: g for g in k.gms}
        self.methods = {m.name: m for m in k.methods}
        self.member_tensors = {t.name: t for t in k.tensors}
        self.structs = {d.name: d for d in k.structs}
        self.tables = {t.name: t for t in getattr(k, "tables", ())}
        self.stack: list[str] = []
        self.reached: set = set()
        self.fixed: dict = {}   # presence member -> bool: the presence being verified (run, `presence_split`)
        self.parts = _EXPR_PARTS   # id of an integer expression -> (it, symbols, Invokes, TableAts, GmAts): `expr`
        if len(_EXPR_PARTS) > 200_000:
            _EXPR_PARTS.clear()

    def guard_cond(self, s: If) -> None:
        """A presence guard's (If.guard) condition: one or more presence literals of the class's presence members,
        nothing else. Raises IRError naming the If."""
        members = {m for m, _a in self.k.presence}
        lits = presence_literals(s.cond)
        if not s.cond or len(lits) != len(s.cond) or not set(lits) <= members:
            raise IRError(f"a presence guard ({s.doc or 'If.guard'}) tests {s.cond}: only presence literals of the "
                          f"class's presence members {sorted(members)} (hasInput<k>_, hasInput<k>_ == 0)", s)

    def decided(self, cond: tuple) -> bool | None:
        """Whether If condition `cond` holds under the presence being verified (self.fixed): False when one of its
        presence literals is false, True when all of its terms are true presence literals, None otherwise."""
        terms = []
        for c in cond:
            lit = presence_literals((c,))
            m = next(iter(lit), None)
            terms.append(lit[m] == self.fixed[m] if m in self.fixed else None)
        if False in terms:
            return False
        return True if None not in terms else None

    def names(self):
        k = self.k
        check_name(k.name, "class")
        for part in k.tiling_struct.split("::"):   # a namespace-qualified struct name
            check_name(part, "tiling struct")
        seen: dict = {}
        groups = [("template parameter", k.tparams), ("argument", k.args), ("field", k.fields),
                  ("GM tensor", [g.name for g in k.gms]), ("local buffer", [b.name for b in k.locals]),
                  ("tensor", [t.name for t in k.tensors]), ("scalar", [s.name for s in k.scalars]),
                  ("method", [m.name for m in k.methods] + ["Init", "Process"]),
                  ("constant", [c[0] for c in k.consts]), ("table", [t.name for t in k.tables])]
        for what, names in groups:
            for n in names:
                check_name(n, what)
                # a tiling field is printed td_->name and a template parameter names a type, so one spelling serves
                # both (a dtype variable spelled like a field: docs/reference/names.md §1),
                # and a template parameter meeting another name is re-spelled where the class is printed (to_cpp)
                if n in seen and not (what == "field" and seen[n] == "field"
                                      or seen[n] == "template parameter" != what):
                    art = "an" if seen[n][0] in "aeiou" else "a"
                    raise IRError(f"{what} name {n} is also {art} {seen[n]}")
                seen[n] = what
        for g in k.gms:
            self.dtype(g.dtype, g)
            if not g.workspace and g.arg not in k.args:
                raise IRError(f"GM tensor {g.name} is bound to {g.arg!r}, not an argument", g)
        for t in k.tensors:
            self.dtype(t.dtype, t)
        for d in k.structs:
            check_name(d.name, "struct type")
            for fname, kind, dtype, count in d.fields:
                check_name(fname, "struct field")
                if kind not in ("int", "bool", "gm") or (count is not None and count < 1):
                    raise IRError(f"struct {d.name}: field {fname} has kind {kind!r} / count {count!r}", d)
                if kind == "gm":
                    self.dtype(dtype, d)
        for m in k.methods:
            for t in m.tparams:   # C++ forbids a member template's parameter to shadow the class's
                check_name(t, "template parameter")
                if t in k.tparams:
                    raise IRError(f"{m.name}: template parameter {t} shadows the class's template parameter {t}", m)
            if m.variant_of:   # (base, flag): the flag a bool template parameter of the printed base method
                base, flag = m.variant_of
                check_name(flag, "template parameter")
                if base not in {x.name for x in k.methods} or flag in k.member_names() or \
                        flag in {x for x in m.tparams} | {q.name for q in m.params}:
                    raise IRError(f"{m.name}: variant of {base!r} with flag {flag!r}: the base must be a method and "
                                  f"the flag a name of neither the class nor the method", m)
            for p in m.params:
                if p.kind == "struct" and p.dtype not in self.structs:
                    raise IRError(f"{m.name}: parameter {p.name} has struct type {p.dtype}, which no StructDecl "
                                  f"declares", m)
        for s in k.scalars:
            if s.ctype not in SCALAR_CTYPES:
                raise IRError(f"scalar {s.name} has type {s.ctype}, not one of {SCALAR_CTYPES}", s)
        bools = {s.name for s in k.scalars if s.ctype == "bool"}
        for m, a in k.presence:
            if isinstance(a, TilingCond):   # a runtime guard: Init assigns it
                if m not in bools or not any(isinstance(s, Assign) and s.name == m for s in k.init):
                    raise IRError(f"runtime guard {m} ({a.text}): {m} must be a bool scalar member Init assigns")
                continue
            if m not in bools or a not in k.args:
                raise IRError(f"presence {m} = {a} != nullptr: {m} must be a bool scalar member and {a} an argument")
        for b in k.locals:
            if not isinstance(b.pos, TPos) or (b.queue and b.depth < 1) or (b.pool and b.queue):
                raise IRError(f"buffer {b.name}: bad position or depth", b)

    def elem_bytes(self, t: str) -> int | None:
        """Bytes of element type t: a known type's, or a template parameter's whose every binding has one size
        (KernelClass.tparam_bytes); None otherwise."""
        return ELEM_BYTES.get(t, dict(self.k.tparam_bytes).get(t))

    def dtype(self, t: str, node) -> str:
        if t in ELEM_BYTES or t in self.k.tparams:
            return t
        raise IRError(f"element type {t!r} is neither a known type nor a template parameter", node)

    def state0(self) -> _State:
        st = _State()
        for f in self.k.fields:
            st.scalars[f] = "int"
        for s in self.k.scalars:
            st.scalars[s.name] = {"int64_t": "int", "uint32_t": "int", "int32_t": "int"}.get(s.ctype,
                                                                                               s.ctype)
            st.mutable.add(s.name)
        st.scalars.update({"blockIdx": "int", "blockNum": "int", "subBlockIdx": "int", "taskRatio": "int"})
        for t in self.k.tensors:
            st.tensors[t.name] = _Tensor(t.dtype)
        return st

    def run(self):
        self.names()
        split = presence_split(self.k)
        for vals in itertools.product((True, False), repeat=len(split)):   # one walk without presence guards
            self.fixed = dict(zip(split, vals))
            where = "" if not split else " (" + ", ".join(f"{m} = {str(v).lower()}" for m, v in self.fixed.items()) + ")"
            st = self.state0()
            try:
                self.block(self.k.init, st, "Init")
                self.block(self.k.process, st, "Process")
            except IRError as e:   # say which presence the walk verified
                if not split:
                    raise
                err = IRError(str(e).removeprefix("kernel IR: ") + where)
                err.node = e.node
                raise err from None
            for q, (a, e, d) in st.queues.items():
                if a or e or d:
                    raise IRError(f"queue {q} still holds {a + e + d} block(s) at the end of Process{where}")
            if st.flags:
                ev, i = sorted(st.flags, key=str)[0][:2]
                raise IRError(f"flag {ev} #{i} is set and never waited{where}")
        # a method only opaque code calls: on its own, every buffer initialised as Process left it, its type
        # parameters taken as float, every flag and queue as it must leave them
        for m in self.k.methods:
            if m.extern or m.name in self.reached:
                continue
            args = tuple(True if p.kind == "bool" else "CAST_NONE" if p.kind == "mode" else Lit(0)
                         if p.kind == "int" else FConst(0.0) if p.kind == "float" else None for p in m.params)
            probe = st.copy()
            for p in m.params:
                if p.kind == "tensor":
                    probe.tensors[f"__{p.name}"] = _Tensor(p.dtype if p.dtype not in m.tparams else "float")
                elif p.kind == "gm":
                    probe.gmp[f"__{p.name}"] = GmTensor(f"__{p.name}", p.dtype if p.dtype not in m.tparams
                                                        else "float")
                elif p.kind == "struct":
                    probe.scalars[f"__{p.name}"] = f"struct:{p.dtype}"
            args = tuple(Ref(f"__{p.name}") if p.kind == "tensor" else GmView(f"__{p.name}") if p.kind == "gm"
                         else Sym(f"__{p.name}") if p.kind == "struct" else a for p, a in zip(m.params, args))
            call = Call(m.name, args, None, tuple("float" for _t in m.tparams))
            if m.ret != "void":
                call = Call(m.name, args, f"__result_{m.name}", call.targs)
            self.call(call, probe)
            if not self._same(st, probe):
                raise IRError(f"method {m.name} leaves queues or flags in another state than it found them")

    # -- expressions
    def expr(self, e, st: _State, node, kind: str = "int"):
        if isinstance(e, FExpr):
            if kind != "float":
                raise IRError("a float expression where an integer is needed", node)
            for n in _fsyms(e):
                if n not in st.scalars:
                    raise IRError(f"scalar {n} used before it is defined", node)
            for ld in _floads(e):
                if isinstance(ld.src, GmView):
                    self.gm(ld.src, st, node)
                else:
                    self.region(ld.src, 1, st, node)
            return
        if not isinstance(e, DimExpr):
            raise IRError(f"not an expression: {e!r}", node)
        # what the checks read of e, found once per expression object (frozen; kept in the entry, so its id is not
        # another object's): one walk of its subexpressions where each check walked them again at every use
        got = self.parts.get(id(e))
        if got is None or got[0] is not e:
            subs = subexprs(e)
            got = self.parts[id(e)] = (e, tuple(e.symbols()), [x for x in subs if isinstance(x, Invoke)],
                                       [x for x in subs if isinstance(x, TableAt)],
                                       [x for x in subs if isinstance(x, GmAt)])
        _e, syms, invs, tabs, gmrs = got
        for n in syms:
            if STRUCT_FIELD.match(n):   # an int64 / bool field of a struct parameter
                self.struct_field(n, ("int", "bool"), st, node)
                continue
            if st.scalars.get(n) not in ("int", "bool"):
                what = "defined" if n not in st.scalars else "an integer"
                raise IRError(f"symbol {n} used before it is {what}", node)
        for inv in invs:
            m = self.methods.get(inv.method)
            if m is None or m.ret not in ("int64_t", "uint32_t") or len(m.params) != len(inv.args):
                raise IRError(f"{inv.method} is not an int64_t method of {len(inv.args)} argument(s)", node)
        for t in tabs:
            d = self.tables.get(t.table)
            if d is None or len(d.shape) != len(t.index):
                raise IRError(f"{t} is not an element of a table of the class (KernelClass.tables)", node)
            for i, n in zip(t.index, d.shape):
                c = const_value(i)
                if c is not None and not 0 <= c < n:
                    raise IRError(f"{t}: index {c} outside the table's dimension of {n}", node)
        for x in float_indices(e):
            if st.scalars.get(x.name) != "float":
                what = "defined" if x.name not in st.scalars else "a float scalar"
                raise IRError(f"{x}: scalar {x.name} used before it is {what}", node)
        for g in gmrs:
            t = self.gms.get(g.tensor) or st.gmp.get(g.tensor)
            if t is None or t.workspace or t.dtype not in ("int32_t", "int64_t"):
                raise IRError(f"{g}: {g.tensor} is not an int32_t / int64_t GM input of the class", node)

    def cond(self, c, st, node):
        if not isinstance(c, tuple) or not c or not all(isinstance(x, (Constraint, Sym)) for x in c):
            raise IRError("an If condition is a non-empty tuple of Constraints (or bool symbols)", node)
        for x in c:
            if isinstance(x, Sym):
                self.expr(x, st, node)
                continue
            self.expr(x.lhs, st, node)
            self.expr(x.rhs, st, node)

    def tensor(self, r, st: _State, node) -> _Tensor:
        if not isinstance(r, Ref):
            raise IRError(f"not a UB region: {r!r}", node)
        t = st.tensors.get(r.tensor)
        if t is None:
            raise IRError(f"tensor {r.tensor} used before it is defined", node)
        m = self.member_tensors.get(r.tensor)
        if r.slot is not None:
            if m is None or m.count is None:
                raise IRError(f"tensor {r.tensor} is not an array", node)
            self.expr(r.slot, st, node)
            sv = const_value(r.slot)
            if sv is not None and not 0 <= sv < m.count:
                raise IRError(f"slot {sv} outside {r.tensor}[{m.count}]", node)
        elif m is not None and m.count is not None:
            raise IRError(f"tensor array {r.tensor} used without a slot", node)
        if r.part is not None:
            j, n = r.part if isinstance(r.part, tuple) and len(r.part) == 2 else (None, None)
            if not (type(j) is int and type(n) is int and 0 <= j < n):
                raise IRError(f"{r.tensor}: part {r.part!r} is not (j, n) with 0 <= j < n", node)
            if r.slot is not None or r.as_dtype is not None:
                raise IRError(f"{r.tensor}: a part claim is on a whole allocation (no slot, no reinterpreting)", node)
        self.expr(r.offset, st, node)
        if r.as_dtype is not None:
            want = self.dtype(st.tmap.get(r.as_dtype, r.as_dtype), node)
            have = st.tmap.get(t.dtype, t.dtype)
            if self.elem_bytes(want) is None or self.elem_bytes(have) is None:
                raise IRError(f"{r.tensor} reinterpreted as {r.as_dtype}: both element types must be known", node)
            off = const_value(r.offset)
            if t.start is None or t.elems is None or off is None:
                return _Tensor(want, t.buf, None, None)
            first, end = (t.start + off) * self.elem_bytes(have), t.elems * self.elem_bytes(have)   # bytes of the block
            if first % self.elem_bytes(want):
                raise IRError(f"{r.tensor}[{off}] reinterpreted as {r.as_dtype} starts inside an element", node)
            # in the new element type, the region starts at `first` (its own offset already counted: region()
            # adds none for a reinterpreted reference)
            return _Tensor(want, t.buf, first // self.elem_bytes(want), end // self.elem_bytes(want))
        return t

    def region(self, r, count, st, node, elem_bytes: int | None = None):
        """A constant region [offset, offset + count) must lie inside its buffer block."""
        t = self.tensor(r, st, node)
        off, n = const_value(r.offset), const_value(count) if count is not None else None
        if r.as_dtype is not None:   # tensor() counted the offset in the source type's elements
            off = 0
        if t.elems is None or t.start is None or off is None or n is None:
            return t
        if off < 0 or t.start + off + n > t.elems:
            raise IRError(f"region {r.tensor}[{off}:{off + n}] lies outside its buffer of {t.elems - t.start} "
                          f"element(s)", node)
        return t

    _CUBE_POS = {"l1": (TPos.A1, TPos.B1, TPos.C1), "l0": (TPos.A2, TPos.B2), "a2": (TPos.A2,), "b2": (TPos.B2,),
                 "co1": (TPos.CO1,), "c1": (TPos.C1,), "c2": (TPos.C2,)}

    def cube_operand(self, r, where, st, node) -> _Tensor:
        """A cube operand Ref whose buffer lies in the memory `where` names (_CUBE_POS)."""
        t = self.tensor(r, st, node)
        pos = self.locals[t.buf].pos if t.buf in self.locals else None
        if pos not in self._CUBE_POS[where]:
            raise IRError(f"{r.tensor} lies in {pos.value if pos else 'an unknown buffer'}, not in "
                          f"{' / '.join(p.value for p in self._CUBE_POS[where])}", node)
        return t

    def cube(self, s, st) -> None:
        """The operand rules of the cube statements (their docstrings); only inside a CoreIf of unit cube."""
        if st.unit != "cube":
            raise IRError("a cube instruction outside a cube-core branch (CoreIf unit cube)", s)
        if isinstance(s, Nd2Nz):
            t, g = self.cube_operand(s.dst, "l1", st, s), self.gm(s.src, st, s)
            if t.dtype != g.dtype:
                raise IRError(f"Nd2Nz from {g.dtype} GM into {t.dtype} L1", s)
            exprs = (s.rows, s.cols, s.src_pitch, s.pad_rows)
        elif isinstance(s, LoadData):
            a, b = self.cube_operand(s.dst, "l0", st, s), self.cube_operand(s.src, "l1", st, s)
            if a.dtype != b.dtype:
                raise IRError(f"LoadData from {b.dtype} into {a.dtype}", s)
            if s.transpose and ELEM_BYTES.get(a.dtype, 2) != 2:
                raise IRError("LoadData transposes 2-byte fractals only", s)
            if s.with_transpose and (s.transpose or a.dtype != "int8_t"):
                raise IRError(f"LoadDataWithTranspose of {a.dtype}{' with ifTranspose' if s.transpose else ''}: "
                              "the Kernel IR models int8_t squares of 32 x 32 only", s)
            exprs = (s.start, s.repeat, s.src_stride) + ((s.dst_gap, s.dst_frac_gap) if s.with_transpose else ())
        elif isinstance(s, Mmad):
            c = self.cube_operand(s.dst, "co1", st, s)
            a, b = self.cube_operand(s.a, "a2", st, s), self.cube_operand(s.b, "b2", st, s)
            if c.dtype != ("int32_t" if a.dtype == "int8_t" else "float") or a.dtype != b.dtype:
                raise IRError(f"Mmad {a.dtype} x {b.dtype} -> {c.dtype}: fp32 result of equal input types, int32_t "
                              "of int8_t ones", s)
            exprs = (s.m, s.n, s.k)
            if s.bias is not None:
                bt = self.cube_operand(s.bias, "c2", st, s)
                if bt.dtype != c.dtype or s.init:
                    raise IRError("Mmad with a bias: a bias-table row of the result's type (fp32, or int32 for int8 "
                                  "operands) and no init (C starts at the bias)", s)
            for x in s.init:
                for e in ((x,) if isinstance(x, Sym) else (x.lhs, x.rhs)):
                    self.expr(e, st, s)
        elif isinstance(s, LoadBias):
            d, b = self.cube_operand(s.dst, "c2", st, s), self.cube_operand(s.src, "c1", st, s)
            if not (d.dtype == b.dtype == "int32_t") and (d.dtype != "float" or b.dtype not in ("half", "float")
                                                           and b.dtype not in self.k.tparams):
                raise IRError(f"LoadBias from {b.dtype} L1 into {d.dtype}: half or float into the fp32 bias table, "
                              f"or int32_t into int32_t", s)
            exprs = (s.blocks,)
        else:
            c, g = self.cube_operand(s.src, "co1", st, s), self.gm(s.dst, st, s)
            if c.dtype == "int32_t" and g.dtype != "int32_t" or c.dtype not in ("float", "int32_t") \
                    or c.dtype == "float" and g.dtype not in _QUANT and g.dtype not in self.k.tparams:
                raise IRError(f"Fixpipe of {c.dtype} L0C into {g.dtype} GM (float into float / half / bfloat16_t, "
                              "int32_t into int32_t)", s)
            if s.atomic and g.dtype != "float":
                raise IRError(f"an atomic Fixpipe adds fp32 into fp32 GM, not {g.dtype}", s)
            exprs = (s.rows, s.cols, s.src_rows, s.dst_pitch)
        for e in exprs:
            self.expr(e, st, s)
        for e, lim in zip(exprs, (16384, 65535, 65535, 65535) if isinstance(s, Nd2Nz) else
                          (65535, 255, 65535, 65535, 65535) if isinstance(s, LoadData) else (4095, 4095, 4095) if isinstance(s, Mmad)
                          else (65535,) if isinstance(s, LoadBias)
                          else (8192, 4095, 65535, 2 ** 32 - 1)):
            v = const_value(e)
            if v is not None and not 0 <= v <= lim:
                raise IRError(f"{type(s).__name__} count {e} = {v} outside [0, {lim}]", s)

    def struct_field(self, name: str, kinds, st, node):
        """The (kind, dtype, count) of struct-parameter field `name` (`p.f` or `p.f[N]`), of one of `kinds`; else
        IRError."""
        m = STRUCT_FIELD.match(name)
        root = st.scalars.get(m.group(1), "") if m else ""
        decl = self.structs.get(root.removeprefix("struct:")) if root.startswith("struct:") else None
        f = decl.field(m.group(2)) if decl else None
        if f is None or f[0] not in kinds:
            raise IRError(f"{name} is not a {' / '.join(kinds)} field of a struct parameter", node)
        kind, _dtype, count = f
        if (count is None) != (m.group(3) is None) or (count is not None and not int(m.group(3)) < count):
            raise IRError(f"{name}: field {m.group(2)} is {'a scalar' if count is None else f'an array of {count}'}",
                          node)
        return f

    def gm(self, v, st, node):
        if isinstance(v, GmView) and STRUCT_FIELD.match(v.tensor):   # a GM tensor field of a struct parameter
            _k, dtype, _c = self.struct_field(v.tensor, ("gm",), st, node)
            self.expr(v.offset, st, node)
            return GmTensor(v.tensor, st.tmap.get(dtype, dtype))
        if not isinstance(v, GmView) or (v.tensor not in self.gms and v.tensor not in st.gmp):
            raise IRError(f"not a GM view of a declared tensor: {v!r}", node)
        self.expr(v.offset, st, node)
        for s in v.strides:
            self.expr(s, st, node)
        return self.gms.get(v.tensor) or st.gmp[v.tensor]

    def define(self, name, kind, st, node, mutable=False):
        check_name(name, "scalar")
        if name in st.scalars or name in st.tensors or name in self.locals or name in self.gms:
            raise IRError(f"{name} is defined twice", node)
        st.scalars[name] = kind
        if mutable:
            st.mutable.add(name)

    def set_tensor(self, var, t: _Tensor, st, node):
        check_name(var, "tensor")
        if var in st.scalars or var in self.locals or var in self.gms:
            raise IRError(f"{var} is defined twice", node)
        if var in self.member_tensors:
            m = self.member_tensors[var]
            if m.count is not None:
                raise IRError(f"tensor array {var} assigned without a slot", node)
            if m.dtype != t.dtype:
                raise IRError(f"tensor {var} is {m.dtype}, assigned {t.dtype}", node)
        elif var in st.tensors and st.tensors[var].dtype != t.dtype:
            raise IRError(f"tensor {var} is {st.tensors[var].dtype}, assigned {t.dtype}", node)
        st.tensors[var] = t

    def buffer(self, name, st, node, queue: bool) -> Local:
        b = self.locals.get(name)
        if b is None:
            raise IRError(f"buffer {name} is not declared", node)
        if b.queue != queue or b.pool:
            raise IRError(f"buffer {name} is {'a TBufPool' if b.pool else 'a TQue' if b.queue else 'a TBuf'}", node)
        if name not in st.inited:
            raise IRError(f"buffer {name} used before its InitBuffer", node)
        return b

    def block_elems(self, buf, dtype, st):
        nbytes = st.inited[buf][1]
        size = ELEM_BYTES.get(dtype)
        return None if nbytes is None or size is None else nbytes // size

    # -- statements
    def block(self, stmts, st: _State, where: str):
        if not isinstance(stmts, tuple):
            raise IRError(f"the body of {where} is not a tuple of statements")
        self.pool_flags(stmts)
        for s in stmts:
            self.stmt(s, st)

    @staticmethod
    def pool_flags(stmts) -> None:
        """The pool flags of one statement list (SetFlag.pool): a SetFlag declares its var once in the list and its
        WaitFlag names it later in the same list (the C++ local's scope), right after it for "fetch"
        (FetchEventID takes no id: nothing may run between); set and wait agree on event and pool."""
        decl = {}
        for j, s in enumerate(stmts):
            if not isinstance(s, (SetFlag, WaitFlag)) or not s.pool:
                continue
            if s.pool not in FLAG_POOLS:
                raise IRError(f"flag pool {s.pool!r} is none of {FLAG_POOLS}", s)
            if not (isinstance(s.var, str) and s.var.startswith(EVENT_VAR_PREFIX) and _IDENT.match(s.var)):
                raise IRError(f"a pool flag's var {s.var!r} is no identifier starting with {EVENT_VAR_PREFIX!r}", s)
            if isinstance(s, SetFlag):
                if s.var in decl:
                    raise IRError(f"event id var {s.var} declared twice in one statement list", s)
                decl[s.var] = s
                later = [x for x in stmts[j + 1:] if isinstance(x, WaitFlag) and x.pool and x.var == s.var]
                if not later:
                    raise IRError(f"SetFlag {s.event} ({s.pool}, {s.var}) has no WaitFlag later in its list", s)
                if s.pool == "fetch" and later[0] is not (stmts[j + 1] if j + 1 < len(stmts) else None):
                    raise IRError(f"SetFlag {s.event} (fetch, {s.var}): its WaitFlag must follow it at once "
                                  "(FetchEventID takes no id)", s)
            else:
                st = decl.get(s.var)
                if st is None:
                    raise IRError(f"WaitFlag {s.event} ({s.pool}, {s.var}) without a SetFlag of that var before it "
                                  "in its list", s)
                if (st.event, st.pool) != (s.event, s.pool):
                    raise IRError(f"WaitFlag {s.event} ({s.pool}, {s.var}) pairs with SetFlag {st.event} "
                                  f"({st.pool})", s)

    @staticmethod
    def _same(before: _State, after: _State) -> bool:
        """Every queue holds what it held before (a queue initialised inside holds nothing) and the same flags."""
        return after.flags == before.flags and all(v == before.queues.get(q, [0, 0, 0])
                                                   for q, v in after.queues.items())

    def nested(self, body, st: _State, node, what: str) -> _State:
        inner = st.copy()
        self.block(body, inner, what)
        if not self._same(st, inner):
            raise IRError(f"the {what} leaves queues or flags in another state than it found them", node)
        # buffers initialised inside stay initialised (InitBuffer is monotone); scopes of names do not leak
        st.inited.update(inner.inited)
        for q, v in inner.queues.items():
            st.queues.setdefault(q, list(v))
        return inner

    def branches(self, s, st: _State) -> None:
        """An If's two branches from state `st`: they may allocate, hand over or free queue blocks (a buffer's
        lifetime ending or starting inside a branch: opgen.kernel.rowsched `free_after_last_use`) and set or wait
        flags only when both leave the queues and flags in the same state, which `st` then takes; member tensors
        bound in both branches from the same queue stay bound. Names declared inside do not leak."""
        a, b = st.copy(), st.copy()
        self.block(s.then, a, "then-branch")
        self.block(s.orelse, b, "else-branch")
        qa = {q: v for q, v in a.queues.items() if any(v)}
        qb = {q: v for q, v in b.queues.items() if any(v)}
        if a.flags != b.flags or qa != qb:
            raise IRError("the branches of an if leave queues or flags in different states", s)
        if not self._same(st, a):   # a queue's blocks change hands inside: both branches alike
            for q, v in a.queues.items():
                st.queues[q] = list(v)
            for name in self.member_tensors:
                ta, tb = a.tensors.get(name), b.tensors.get(name)
                if ta is not None and ta == tb:
                    st.tensors[name] = ta
        st.inited.update(a.inited)
        for buf, (num, nbytes) in b.inited.items():   # initialised in both with other block counts: the fewer
            st.inited[buf] = (min(num, a.inited[buf][0]), nbytes) if buf in a.inited else (num, nbytes)
        for q, v in list(a.queues.items()) + list(b.queues.items()):
            st.queues.setdefault(q, list(v))

    def stmt(self, s, st: _State):  # noqa: C901 - one case per node type
        if isinstance(s, Let):
            self.expr(s.value, st, s)
            self.define(s.name, "int", st, s, s.mutable)
        elif isinstance(s, Assign):
            self.expr(s.value, st, s)
            guards = {m for m, a in self.k.presence if isinstance(a, TilingCond)}   # bool: nonzero is true
            if st.scalars.get(s.name) not in ("int", "bool" if s.name in guards else "int") or \
                    s.name not in st.mutable:
                raise IRError(f"{s.name} is not a mutable integer scalar", s)
        elif isinstance(s, FLet):
            self.expr(s.value, st, s, "float")
            self.define(s.name, "float", st, s, s.mutable)
        elif isinstance(s, FAssign):
            self.expr(s.value, st, s, "float")
            if st.scalars.get(s.name) != "float" or s.name not in st.mutable:
                raise IRError(f"{s.name} is not a mutable float scalar", s)
        elif isinstance(s, For):
            for e in (s.lo, s.hi) + ((s.step,) if s.step is not None else ()):
                self.expr(e, st, s)
            if s.step is not None and const_value(s.step) is not None and const_value(s.step) <= 0:
                raise IRError("a loop step must be positive", s)
            if s.step is None and (s.tail or not any(isinstance(x, Assign) and x.name == s.var
                                                     for x in walk(s.body))):
                raise IRError(f"a loop without a step advances {s.var} in its body and has no tail", s)
            inner = st.copy()
            if s.var in st.scalars:
                if s.var not in st.mutable or st.scalars[s.var] != "int":
                    raise IRError(f"loop variable {s.var} is not a mutable integer", s)
            else:
                self.define(s.var, "int", inner, s, mutable=s.step is None)
            if s.tail:
                self.define(s.tail, "int", inner, s)
            for n in s.apart:
                if n not in st.tensors and not any(t.startswith(n + "[") for t in st.tensors):
                    raise IRError(f"loop over {s.var}: apart names {n!r}, no tensor variable here", s)
            self.block(s.body, inner, f"loop over {s.var}")
            if not self._same(st, inner):
                raise IRError(f"the loop over {s.var} leaves queues or flags in another state than it found "
                              "them", s)
            st.inited.update(inner.inited)
        elif isinstance(s, If):
            self.cond(s.cond, st, s)
            if s.guard:
                self.guard_cond(s)
            live = self.decided(s.cond) if self.fixed else None
            if live is None:
                self.branches(s, st)
            else:   # a presence guard under the presence being verified: the branch it runs, on both sides
                taken = s.then if live else s.orelse
                self.branches(dataclasses.replace(s, then=taken, orelse=taken), st)
        elif isinstance(s, InitBuffer):
            b = self.locals.get(s.buf)
            if b is None:
                raise IRError(f"buffer {s.buf} is not declared", s)
            self.expr(s.bytes, st, s)
            if s.num < 1 or (not b.queue and s.num != 1):
                raise IRError(f"buffer {s.buf}: {s.num} block(s)", s)
            if s.buf in st.queues and any(st.queues[s.buf]):
                raise IRError(f"queue {s.buf} re-initialised while it holds blocks", s)
            for other, what in ((s.pool, "pool"), (s.share, "shared pool")):
                if other and (other not in self.locals or not self.locals[other].pool or other not in st.inited):
                    raise IRError(f"buffer {s.buf}: {what} {other} is not an initialised TBufPool", s)
            if (s.share and not b.pool) or (b.pool and s.pool):
                raise IRError(f"buffer {s.buf}: a pool shares another pool's bytes; a buffer is carved from one", s)
            st.inited[s.buf] = (s.num, const_value(s.bytes))
            if b.queue:
                st.queues[s.buf] = [0, 0, 0]
        elif isinstance(s, Get):
            self.buffer(s.buf, st, s, queue=False)
            dt = self.dtype(st.tmap.get(s.dtype, s.dtype), s)
            self.expr(s.offset, st, s)
            t = _Tensor(dt, s.buf, const_value(s.offset), self.block_elems(s.buf, dt, st))
            if s.slot is None:
                self.set_tensor(s.var, t, st, s)
            else:
                m = self.member_tensors.get(s.var)
                if m is None or m.count is None or m.dtype != dt:
                    raise IRError(f"{s.var} is not a member tensor array of {s.dtype}", s)
                self.expr(s.slot, st, s)
        elif isinstance(s, View):
            t = self.tensor(s.src, st, s)
            off = const_value(s.src.offset)
            start = None if t.start is None or off is None else t.start + off
            self.set_tensor(s.var, _Tensor(t.dtype, t.buf, start, t.elems), st, s)
        elif isinstance(s, Alloc):
            self.buffer(s.queue, st, s, queue=True)
            dt = self.dtype(st.tmap.get(s.dtype, s.dtype), s)
            q = st.queues[s.queue]
            if sum(q) >= st.inited[s.queue][0]:
                raise IRError(f"AllocTensor of {s.queue} with all {st.inited[s.queue][0]} block(s) in use", s)
            q[0] += 1
            self.set_tensor(s.var, _Tensor(dt, s.queue, 0, self.block_elems(s.queue, dt, st)), st, s)
        elif isinstance(s, EnQue):
            self.buffer(s.queue, st, s, queue=True)
            self.tensor(Ref(s.var), st, s)
            q = st.queues[s.queue]
            if q[0] < 1:
                raise IRError(f"EnQue of {s.queue} without an allocated block", s)
            q[0] -= 1
            q[1] += 1
        elif isinstance(s, DeQue):
            self.buffer(s.queue, st, s, queue=True)
            dt = self.dtype(st.tmap.get(s.dtype, s.dtype), s)
            q = st.queues[s.queue]
            if q[1] < 1:
                raise IRError(f"DeQue of {s.queue} with nothing enqueued", s)
            q[1] -= 1
            q[2] += 1
            self.set_tensor(s.var, _Tensor(dt, s.queue, 0, self.block_elems(s.queue, dt, st)), st, s)
        elif isinstance(s, Free):
            self.buffer(s.queue, st, s, queue=True)
            self.tensor(Ref(s.var), st, s)
            q = st.queues[s.queue]
            if q[2] >= 1:
                q[2] -= 1
            elif q[0] >= 1:
                q[0] -= 1
            else:
                raise IRError(f"FreeTensor of {s.queue} without a dequeued or allocated block", s)
        elif isinstance(s, Copy):
            gm_src = isinstance(s.src, GmView)
            if gm_src == isinstance(s.dst, GmView):
                raise IRError("a Copy moves between GM and UB: exactly one side is a GmView", s)
            ub, gmv = (s.dst, s.src) if gm_src else (s.src, s.dst)
            g = self.gm(gmv, st, s)
            for e in (s.block_count, s.block_len, s.src_stride, s.dst_stride):
                self.expr(e, st, s)
            t = self.tensor(ub, st, s)
            if t.dtype != g.dtype:
                raise IRError(f"Copy between {g.dtype} GM and {t.dtype} UB", s)
            n, ln, sz = const_value(s.block_count), const_value(s.block_len), ELEM_BYTES.get(t.dtype)
            ubgap = const_value(s.dst_stride if gm_src else s.src_stride)
            if n is not None and ln is not None and sz and ubgap is not None and ln % sz == 0:
                per = -(-ln // 32) * 32 + ubgap * 32
                self.region(ub, ((n - 1) * per + ln) // sz if n else 0, st, s)
        elif isinstance(s, Vec):
            self.vec(s, st)
        elif isinstance(s, CUBE_STMTS):
            self.cube(s, st)
        elif isinstance(s, GetValue):
            self.region(s.src, 1, st, s)
            self.define(s.name, "float", st, s)
        elif isinstance(s, SetValue):
            self.region(s.dst, 1, st, s)
            self.expr(s.value, st, s, "int" if isinstance(s.value, DimExpr) else "float")
        elif isinstance(s, TrapUnless):
            self.expr(s.value, st, s, "int" if isinstance(s.value, DimExpr) else "float")
            self.expr(s.bound, st, s)
        elif isinstance(s, Barrier):
            if not isinstance(s.pipe, Pipe):
                raise IRError("a barrier names a Pipe", s)
        elif isinstance(s, (SetFlag, WaitFlag)):
            if s.event not in HARD_EVENTS:
                raise IRError(f"HardEvent {s.event} does not exist", s)
            if not 0 <= s.id < 8:
                raise IRError(f"event id {s.id} outside 0..7", s)
            # a pool flag's var is a local of the function it lies in (the pass numbers them per function), and a
            # method is never on the stack twice (no recursion): (function, var) names one flag of one activation
            key = flag_key(s) + ((self.stack[-1] if self.stack else "",) if s.pool else ())
            if isinstance(s, SetFlag):
                if key in st.flags:
                    raise IRError(f"flag {s.event} #{s.id} set again before it was waited", s)
                st.flags.add(key)
            else:
                if key not in st.flags:
                    raise IRError(f"WaitFlag {s.event} #{s.id} without a SetFlag before it", s)
                st.flags.discard(key)
        elif isinstance(s, SyncAll):
            pass
        elif isinstance(s, (CrossCoreSetFlag, CrossCoreWaitFlag)):
            if st.unit is None:
                raise IRError("a cross-core flag outside a core branch (CoreIf)", s)
            if s.id not in CROSS_FLAG_IDS:
                raise IRError(f"cross-core flag id {s.id} outside 0..10", s)
            if isinstance(s, CrossCoreSetFlag):
                if s.mode not in (0, 1, 2) or (s.mode == 1 and st.unit != "vector"):
                    raise IRError(f"cross-core mode {s.mode} on the {st.unit} core (0, 2; 1 on the AIVs only)", s)
                bad = (Pipe.V,) if st.unit == "cube" else (Pipe.M, Pipe.MTE1, Pipe.FIX)
                if not isinstance(s.pipe, Pipe) or s.pipe in bad + (Pipe.S, Pipe.ALL):
                    raise IRError(f"CrossCoreSetFlag on pipe {getattr(s.pipe, 'name', s.pipe)}, which the {st.unit} "
                                  f"core cannot set from", s)
        elif isinstance(s, StructLet):
            if s.struct not in self.structs:
                raise IRError(f"struct type {s.struct} is not declared (KernelClass.structs)", s)
            self.define(s.name, f"struct:{s.struct}", st, s)
        elif isinstance(s, StructSet):
            kind, dtype, _c = self.struct_field(s.target, ("int", "bool", "gm"), st, s)
            if kind == "gm":
                if not isinstance(s.value, GmView) or STRUCT_FIELD.match(s.value.tensor):
                    raise IRError(f"{s.target} takes a view of a declared GM tensor", s)
                g = self.gm(s.value, st, s)
                if st.tmap.get(g.dtype, g.dtype) != st.tmap.get(dtype, dtype):
                    raise IRError(f"{s.target} holds {dtype}, not {g.dtype} ({g.name})", s)
            else:
                if isinstance(s.value, GmView):
                    raise IRError(f"{s.target} is an integer field", s)
                self.expr(s.value, st, s)
        elif isinstance(s, Call):
            self.call(s, st)
        elif isinstance(s, Return):
            pass   # checked against the method's type in call()
        elif isinstance(s, Comment):
            if not isinstance(s.text, str):
                raise IRError("a comment is text", s)
        elif isinstance(s, CoreIf):
            if s.unit not in ("cube", "vector"):
                raise IRError(f"core kind {s.unit!r} is neither cube nor vector", s)
            if st.unit is not None:
                raise IRError("a core branch inside a core branch", s)
            inner = st.copy()
            inner.unit = s.unit
            self.block(s.body, inner, "core branch")
            st.inited.update(inner.inited)
            st.queues, st.flags = inner.queues, inner.flags
        elif isinstance(s, Scope):
            inner = st.copy()
            self.block(s.body, inner, "scope")
            st.inited.update(inner.inited)
            st.queues, st.flags = inner.queues, inner.flags
        elif isinstance(s, Verbatim):
            if not all(isinstance(x, str) and "\n" not in x for x in s.lines):
                raise IRError("verbatim lines are single lines of text", s)
        else:
            raise IRError(f"unknown statement {type(s).__name__}", s)

    def vec(self, s: Vec, st):
        d = INSTRS.get(s.op)
        if d is None:
            raise IRError(f"no instruction {s.op}", s)
        given = dict(s.args)
        if len(given) != len(s.args):
            raise IRError(f"{d.api}: an operand given twice", s)
        names = {o.name for o in d.operands}
        if set(given) != names:
            miss = sorted(names - set(given)) or sorted(set(given) - names)
            raise IRError(f"{d.api}: operand {miss[0]} missing or unknown", s)
        count = given.get("count")
        for o in d.operands:
            v = given[o.name]
            if o.kind == "ub":
                n = count if o.name not in ("tmp",) else None
                if s.op in (Op.REDUCE_SUM, Op.REDUCE_MAX) and o.name == "dst":
                    n = Lit(1)
                t = self.region(v, n, st, s)
                want = o.dtype if o.dtype not in TYPE_PARAMS else None
                if want and t.dtype != want:
                    raise IRError(f"{d.api}: operand {o.name} is {t.dtype}, the table wants {want}", s)
            elif o.kind == "gm":
                self.gm(v, st, s)
            elif o.kind == "count":
                self.expr(v, st, s)
            elif o.kind == "scalar":
                self.expr(v, st, s, "float")
            elif o.kind == "cmp":
                if v not in CMP_MODES:
                    raise IRError(f"{d.api}: compare mode {v!r} unknown (one of {', '.join(CMP_MODES)})", s)
            elif o.kind == "mode":
                if isinstance(v, Sym) and st.scalars.get(v.name) == "mode":
                    continue
                if v not in ROUND_MODES:
                    raise IRError(f"{d.api}: round mode {v!r} unknown", s)
            elif o.kind == "value":
                for e in (v if isinstance(v, tuple) else (v,)):
                    self.expr(e, st, s)
        if d.pipe is not Pipe.V:
            raise IRError(f"{d.api} is a copy: use a Copy node", s)

    def call(self, s: Call, st):
        m = self.methods.get(s.method)
        if m is None:
            raise IRError(f"call of method {s.method}, which the class does not have", s)
        if len(s.args) != len(m.params):
            raise IRError(f"{s.method} takes {len(m.params)} argument(s), given {len(s.args)}", s)
        if s.method in self.stack:
            raise IRError(f"{s.method} calls itself", s)
        self.reached.add(s.method)
        if len(s.targs) != len(m.tparams):
            raise IRError(f"{s.method} takes {len(m.tparams)} template argument(s), given {len(s.targs)}", s)
        tmap = {t: self.dtype(st.tmap.get(a, a), s) for t, a in zip(m.tparams, s.targs)}
        inner = _State(dict((k, v) for k, v in st.scalars.items() if k in self.k.fields or k in
                            {x.name for x in self.k.scalars} or k in _SPECIAL),
                       {x for x in st.mutable if x in {y.name for y in self.k.scalars}},
                       {k: v for k, v in st.tensors.items() if k in self.member_tensors},
                       st.inited, st.queues, st.flags, {}, tmap)
        inner.unit = st.unit   # a method runs on the cores of its caller's branch
        for p, a in zip(m.params, s.args):
            want = tmap.get(p.dtype, p.dtype)
            if p.kind == "tensor":
                t = self.tensor(a, st, s)
                if want not in self.k.tparams and want != t.dtype:
                    raise IRError(f"{s.method}: argument {p.name} is {t.dtype}, wants {want}", s)
                inner.tensors[check_name(p.name, "parameter")] = _Tensor(t.dtype, t.buf, None, None)
            elif p.kind == "gm":
                g = self.gm(a, st, s)
                if want not in self.k.tparams and want != g.dtype:
                    raise IRError(f"{s.method}: argument {p.name} is {g.dtype} GM, wants {want}", s)
                inner.gmp[check_name(p.name, "parameter")] = GmTensor(p.name, g.dtype)
            elif p.kind == "mode":
                if a not in ROUND_MODES:
                    raise IRError(f"{s.method}: argument {p.name} is not a round mode: {a!r}", s)
                inner.scalars[check_name(p.name, "parameter")] = "mode"
            elif p.kind == "bool" and isinstance(a, bool):
                inner.scalars[check_name(p.name, "parameter")] = "bool"
            elif p.kind == "struct":
                if not (isinstance(a, Sym) and st.scalars.get(a.name) == f"struct:{p.dtype}"):
                    raise IRError(f"{s.method}: argument {p.name} is not a struct parameter of type {p.dtype}: "
                                  f"{a!r}", s)
                inner.scalars[check_name(p.name, "parameter")] = f"struct:{p.dtype}"
            elif p.kind in ("int", "float", "bool"):
                self.expr(a, st, s, "float" if p.kind == "float" else "int")
                inner.scalars[check_name(p.name, "parameter")] = p.kind
            else:
                raise IRError(f"{s.method}: parameter {p.name} has unknown kind {p.kind}", s)
        if m.extern:
            if s.result is not None:
                self.bind_result(s, m, st)
            return
        self.stack.append(s.method)
        self.block(m.body, inner, s.method)
        self.stack.pop()
        rets = [r for r in walk(m.body) if isinstance(r, Return)]
        if m.ret == "void" and rets:
            raise IRError(f"void method {m.name} returns a value", rets[0])
        if m.ret != "void":
            if not rets:
                raise IRError(f"method {m.name} returns {m.ret} and has no Return")
            for r in rets:
                want = "float" if m.ret == "float" else "int"
                if (want == "float") != isinstance(r.value, FExpr):
                    raise IRError(f"method {m.name} returns {m.ret}", r)
        st.flags, st.queues = inner.flags, inner.queues
        if s.result is not None:
            if m.ret == "void":
                raise IRError(f"{s.method} returns nothing to bind to {s.result}", s)
            self.bind_result(s, m, st)

    def bind_result(self, s, m, st) -> None:
        """A call's result: declared, or (Call.assign) assigned to a mutable scalar of the method's type."""
        kind = "float" if m.ret == "float" else "int"
        if not s.assign:
            self.define(s.result, kind, st, s)
        elif st.scalars.get(s.result) != kind or s.result not in st.mutable:
            raise IRError(f"{s.result} is not a mutable {kind} scalar to assign {s.method}'s result to", s)


def presence_literals(cond: tuple) -> dict:
    """{member: True} for each term of If condition `cond` that is a bool symbol (`hasInput0_`), {member: False} for
    each `member == 0`: the presence literals of a guard (opgen.kernel.rowclass.presence_conds)."""
    out: dict = {}
    for c in cond:
        if isinstance(c, Sym):
            out[c.name] = True
        elif isinstance(c, Constraint) and c.op == "==" and isinstance(c.lhs, Sym) and c.rhs == Lit(0):
            out[c.lhs.name] = False
    return out


def presence_split(k: KernelClass) -> tuple:
    """The presence members of `k` (KernelClass.presence) a queue's protocol depends on: those an If condition
    tests whose branches allocate, hand over or free queue blocks (an output written under some presences only:
    opgen.kernel.rowsched `guard`). The verifier walks the class once per assignment of them, an If testing them
    taking the branch that assignment runs, and the dependency pass (opgen.kernel.kir_sync) keeps the paths of
    different values apart: each presence's queues are balanced, which one walk over both branches cannot show.
    Facts: a presence member is set in Init and never changes (KernelClass.presence)."""
    members = {m for m, _a in k.presence}
    if not members:
        return ()
    found: set = set()
    for body in [k.init, k.process] + [m.body for m in k.methods if not m.extern]:
        for s in walk(body):
            if isinstance(s, If) and any(isinstance(x, (Alloc, EnQue, DeQue, Free)) for x in walk(s.then + s.orelse)):
                found |= {m for m in members if m in presence_literals(s.cond)}
    return tuple(sorted(found))


_EXPR_PARTS: dict = {}
"""The verifier's table (_Verifier.expr): id of an integer expression -> (the expression, its symbols, Invokes,
TableAts, GmAts), each a function of the frozen expression alone, kept with it (so the id is not another
object's); shared by every verification, as a placed class (kir_sync) shares its unplaced one's expressions."""


# The classes `verify` found well formed, by identity (an entry goes when its class is collected, so an id is never
# taken for a later object's). A KernelClass and every node in it are frozen dataclasses of tuples, and the verdict
# reads `k` alone, so a class once verified stays well formed: a check verifies the class it launches each time.
_VERIFIED: "weakref.WeakValueDictionary[int, KernelClass]" = weakref.WeakValueDictionary()


def verify(k: KernelClass) -> KernelClass:
    """`k` when it is well formed (module docstring lists the rules); else IRError naming the node. The verdict for
    one class object is computed once (`_VERIFIED`): a class and its nodes are frozen, so it cannot change."""
    if not isinstance(k, KernelClass):
        raise IRError(f"not a KernelClass: {type(k).__name__}")
    if _VERIFIED.get(id(k)) is k:
        return k
    _Verifier(k).run()
    check_event_ids(k)
    _VERIFIED[id(k)] = k
    return k


# ------------------------------------------------------------------------------------------------ text printer
def _t_expr(e) -> str:
    if isinstance(e, bool):
        return "true" if e else "false"
    if isinstance(e, FExpr):
        return _f_text(e)
    if isinstance(e, tuple):
        return "(" + ", ".join(_t_expr(x) for x in e) + ")"
    return str(e)


def _f_text(f) -> str:
    if isinstance(f, FConst):
        return repr(float(f.value))
    if isinstance(f, FRef):
        return f.name
    if isinstance(f, FInt):
        return f"float({f.value})"
    if isinstance(f, FBits):
        return f"bits_to_float({f.value})"
    if isinstance(f, FBin):
        return f"({_f_text(f.a)} {f.op} {_f_text(f.b)})"
    if isinstance(f, FCall):
        return f"{f.fn}({_f_text(f.arg)})"
    if isinstance(f, FNeg):
        return f"-{_f_text(f.x)}"
    if isinstance(f, FMinMax):
        return f"{f.fn}({_f_text(f.a)}, {_f_text(f.b)})"
    if isinstance(f, FCond):
        return f"({_f_text(f.a)} {f.cmp} {_f_text(f.b)} ? {_f_text(f.x)} : {_f_text(f.y)})"
    if isinstance(f, FLoad):
        return f"load {_t_ref(f.src)}"
    raise IRError(f"not a float expression: {f!r}")


def _parts_note(values) -> str:
    """The comment line the printer puts above a statement whose operands claim parts (Ref.part): `(t: part 1 of
    2)` per tensor and part, in operand order -- so a reviewer reading two writes of one buffer with no barrier
    between them sees why (docs/design.md "Parts of an allocation"); "" when there is none."""
    seen: list = []
    for v in values:
        if isinstance(v, Ref) and v.part is not None and (v.tensor, v.part) not in seen:
            seen.append((v.tensor, v.part))
    return " ".join(f"({t}: part {j} of {n})" for t, (j, n) in seen)


def _t_ref(r) -> str:
    if isinstance(r, GmView):
        st = f" strides({', '.join(str(x) for x in r.strides)})" if r.strides else ""
        return f"{r.tensor}[{r.offset}]{st}"
    if isinstance(r, Ref):
        slot = f"<{r.slot}>" if r.slot is not None else ""
        cast = f" as {r.as_dtype}" if r.as_dtype else ""
        part = "" if r.part is None else f" part {r.part[0]}/{r.part[1]}" if len(r.part) == 2 else f" part {r.part}"
        return f"{r.tensor}{slot}[{r.offset}]{cast}{part}"
    return _t_expr(r)


def _t_cond(c) -> str:
    return " && ".join(str(x) for x in c)


def to_text_stmt(s, indent: str = "") -> str:
    """The canonical text of one statement (nested bodies indented by two spaces)."""
    i = indent
    if isinstance(s, Let):
        return f"{i}{'var' if s.mutable else 'let'} {s.name} = {s.value}"
    if isinstance(s, Assign):
        return f"{i}{s.name} := {s.value}"
    if isinstance(s, FLet):
        return f"{i}{'fvar' if s.mutable else 'flet'} {s.name} = {_f_text(s.value)}"
    if isinstance(s, FAssign):
        return f"{i}{s.name} := {_f_text(s.value)}"
    if isinstance(s, For):
        tail = f" tail {s.tail}" if s.tail else ""
        doc = f"  // {s.doc}" if s.doc else ""
        step = f"step {s.step}" if s.step is not None else "step in body"
        tail += " disjoint" if s.disjoint else ""
        tail += " nonempty" if s.nonempty else ""
        tail += " pipelined" if s.pipelined else ""
        tail += f" apart({', '.join(s.apart)})" if s.apart else ""
        return "\n".join([f"{i}for {s.var} in [{s.lo}, {s.hi}{']' if s.inclusive else ')'} {step}{tail} {{{doc}"]
                         + [to_text_stmt(x, i + "  ") for x in s.body] + [f"{i}}}"])
    if isinstance(s, If):
        doc = f"  // {s.doc}" if s.doc else ""
        out = [f"{i}if {_t_cond(s.cond)} {{{doc}"] + [to_text_stmt(x, i + "  ") for x in s.then]
        if s.orelse:
            out += [f"{i}}} else {{"] + [to_text_stmt(x, i + "  ") for x in s.orelse]
        return "\n".join(out + [f"{i}}}"])
    if isinstance(s, InitBuffer):
        src = f" from {s.pool}" if s.pool else ""
        share = f" sharing {s.share}" if s.share else ""
        return f"{i}init_buffer {s.buf} num={s.num} bytes={s.bytes}{src}{share}"
    if isinstance(s, Get):
        slot = f"<{s.slot}>" if s.slot is not None else ""
        return f"{i}{s.var}{slot} = get {s.buf} as {s.dtype} at {s.offset}"
    if isinstance(s, View):
        return f"{i}{s.var} = view {_t_ref(s.src)}"
    if isinstance(s, Alloc):
        return f"{i}{s.var} = alloc {s.queue} as {s.dtype}"
    if isinstance(s, EnQue):
        return f"{i}enque {s.queue} {s.var}"
    if isinstance(s, DeQue):
        return f"{i}{s.var} = deque {s.queue} as {s.dtype}"
    if isinstance(s, Free):
        return f"{i}free {s.queue} {s.var}"
    if isinstance(s, Copy):
        doc = f"  // {s.doc}" if s.doc else ""
        return (f"{i}copy.{s.pipe.name.lower()} {_t_ref(s.dst)} <- {_t_ref(s.src)} blocks={s.block_count} "
                f"len={s.block_len}B src_stride={s.src_stride} dst_stride={s.dst_stride}{doc}")
    if isinstance(s, Vec):
        args = ", ".join(f"{n}={_t_ref(v)}" for n, v in s.args)
        return f"{i}{INSTRS[s.op].pipe.name.lower()}.{INSTRS[s.op].api} {args}"
    if isinstance(s, GetValue):
        return f"{i}flet {s.name} = get_value {_t_ref(s.src)}"
    if isinstance(s, SetValue):
        return f"{i}set_value {_t_ref(s.dst)} = {_t_expr(s.value)}"
    if isinstance(s, TrapUnless):
        v = _t_expr(s.value) if isinstance(s.value, DimExpr) else _f_text(s.value)
        return f"{i}trap_unless 0 <= {v} < {_t_expr(s.bound)}"
    if isinstance(s, Barrier):
        return f"{i}barrier {s.pipe.name}"
    if isinstance(s, SetFlag):
        return f"{i}set_flag {s.src.name}->{s.dst.name} " + (f"{s.pool} {s.var}" if s.pool else f"#{s.id}")
    if isinstance(s, WaitFlag):
        return f"{i}wait_flag {s.src.name}->{s.dst.name} " + (f"{s.pool} {s.var}" if s.pool else f"#{s.id}")
    if isinstance(s, SyncAll):
        return f"{i}sync_all"
    if isinstance(s, CrossCoreSetFlag):
        return f"{i}cross_set mode={s.mode} {s.pipe.name} #{s.id}" + (f"  // {s.doc}" if s.doc else "")
    if isinstance(s, CrossCoreWaitFlag):
        return f"{i}cross_wait #{s.id}" + (f"  // {s.doc}" if s.doc else "")
    if isinstance(s, StructLet):
        return f"{i}struct {s.name}: {s.struct}"
    if isinstance(s, StructSet):
        v = _t_ref(s.value) if isinstance(s.value, GmView) else str(s.value)
        return f"{i}{s.target} := {v}" + (f"  // {s.doc}" if s.doc else "")
    if isinstance(s, Call):
        res = f"{s.result} {':=' if s.assign else '='} " if s.result else ""
        return f"{i}{res}call {s.method}({', '.join(_t_ref(a) for a in s.args)})"
    if isinstance(s, Return):
        return f"{i}return {_t_expr(s.value)}"
    if isinstance(s, Comment):
        return f"{i}// {s.text}"
    if isinstance(s, Scope):
        return "\n".join([f"{i}{{"] + [to_text_stmt(x, i + "  ") for x in s.body] + [f"{i}}}"])
    if isinstance(s, Verbatim):
        return "\n".join(f"{i}cpp {ln.strip()}" for ln in s.lines)
    if isinstance(s, CoreIf):
        doc = f"  // {s.doc}" if s.doc else ""
        return "\n".join([f"{i}on {s.unit} {{{doc}"] + [to_text_stmt(x, i + "  ") for x in s.body] + [f"{i}}}"])
    if isinstance(s, CUBE_STMTS):
        doc = f"  // {s.doc}" if s.doc else ""
        if isinstance(s, Nd2Nz):
            a = f"{_t_ref(s.dst)} <- {_t_ref(s.src)} rows={s.rows} cols={s.cols} pitch={s.src_pitch} pad_rows={s.pad_rows}"
        elif isinstance(s, LoadData):
            a = (f"{_t_ref(s.dst)} <- {_t_ref(s.src)} start={s.start} repeat={s.repeat} src_stride={s.src_stride}"
                 + (" transpose" if s.transpose else "") + (" with_transpose" if s.with_transpose else "")
                 + (f" dst_gap={s.dst_gap} dst_frac_gap={s.dst_frac_gap}"
                    if s.with_transpose and (s.dst_gap, s.dst_frac_gap) != (Lit(1), Lit(0)) else ""))
        elif isinstance(s, Mmad):
            a = (f"{_t_ref(s.dst)} <- {_t_ref(s.a)} x {_t_ref(s.b)} m={s.m} n={s.n} k={s.k} "
                 f"init={_t_cond(s.init) if s.init else 'false'}" + (f" bias={_t_ref(s.bias)}" if s.bias else ""))
        elif isinstance(s, LoadBias):
            a = f"{_t_ref(s.dst)} <- {_t_ref(s.src)} blocks={s.blocks}"
        else:
            a = f"{_t_ref(s.dst)} <- {_t_ref(s.src)} rows={s.rows} cols={s.cols} src_rows={s.src_rows} pitch={s.dst_pitch}"
            a += " atomic_add" if s.atomic else ""
        return f"{i}{s.pipe.name.lower()}.{type(s).__name__} {a}{doc}"
    raise IRError(f"unknown statement {type(s).__name__}")


def to_text(k: KernelClass) -> str:
    """The canonical text of a kernel class: its members, then Init, Process and every method, each statement on
    its own line (nested bodies indented). Two equal programs print the same text."""
    tp = f"<{', '.join(k.tparams)}>" if k.tparams else ""
    out = [f"kernel {k.name}{tp} tiling {k.tiling_struct} args({', '.join(k.args)}) {{"]
    if k.fields:
        out.append(f"  fields {', '.join(k.fields)}")
    for g in k.gms:
        out.append(f"  gm {g.name}: {g.dtype} = {'workspace' if g.workspace else g.arg}")
    for b in k.locals:
        kind = "pool" if b.pool else f"queue depth {b.depth}" if b.queue else "buf"
        out.append(f"  local {b.name}: {b.pos.value} {kind}")
    for t in k.tensors:
        out.append(f"  tensor {t.name}: {t.dtype}" + (f"[{t.count}]" if t.count is not None else ""))
    for s in k.scalars:
        out.append(f"  scalar {s.name}: {s.ctype} = {s.init!r}")
    for n, v, _doc in k.consts:
        out.append(f"  const {n} = {v}")
    for m, a in k.presence:
        out.append(f"  presence {m} = {a.expr} != 0 ({a.text})" if isinstance(a, TilingCond)
                   else f"  presence {m} = {a} != nullptr")
    if k.ws_field:
        out.append(f"  workspace bound when {k.ws_field} > 0")
    for d in k.structs:
        fields = ", ".join(f"{n}: {kind if kind != 'gm' else 'gm<' + dt + '>'}" + (f"[{c}]" if c is not None else "")
                           for n, kind, dt, c in d.fields)
        out.append(f"  struct {d.name} {{ {fields} }}")
    for name, params, body, ret, ext in ([("Init", (), k.init, "void", False),
                                          ("Process", (), k.process, "void", False)]
                                         + [(m.name, m.params, m.body, m.ret, m.extern) for m in k.methods]):
        ps = ", ".join(f"{p.name}: {p.kind if p.kind in ('int', 'float', 'bool') else p.kind + '<' + p.dtype + '>'}"
                       for p in params)
        if ext:
            out.append(f"  extern func {name}({ps}){'' if ret == 'void' else ' -> ' + ret}")
            continue
        out.append(f"  func {name}({ps}){'' if ret == 'void' else ' -> ' + ret} {{")
        out += [to_text_stmt(s, "    ") for s in body]
        out.append("  }")
    out.append("}")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------------ C++ printer
_PREC = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2}


# ------------------------------------------------------------------------------------------- variants of a method
def _declared(s) -> set:
    """The names statement `s` may declare in its own block (a local the printer declares at its first binding)."""
    if isinstance(s, (Let, FLet, GetValue, StructLet)):
        return {s.name}
    if isinstance(s, Get):
        return set() if s.slot is not None else {s.var}
    if isinstance(s, (View, Alloc, DeQue)):
        return {s.var}
    if isinstance(s, Call):
        return {s.result} if s.result and not s.assign else set()
    if isinstance(s, SetFlag):
        return {s.var} if s.pool else set()
    return set()


def _erase_events(s):
    """Statement `s` with every pool flag's local event variable and slot erased (their numbering is per method:
    a method and its variant number the same flag differently when one has a flag more before it)."""
    if isinstance(s, (SetFlag, WaitFlag)) and s.pool:
        return dataclasses.replace(s, var="", id=0)
    return map_children(s, lambda b: tuple(_erase_events(x) for x in b))


def _align(base: tuple, variant: tuple) -> list:
    """difflib's opcodes of `base` against `variant` compared with their pool flags' names erased."""
    a, b = [_erase_events(x) for x in base], [_erase_events(x) for x in variant]
    try:
        return difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    except TypeError:   # an unhashable node: align by printed form
        return difflib.SequenceMatcher(None, [repr(x) for x in a], [repr(x) for x in b], autojunk=False).get_opcodes()


def _same_header(x, y) -> bool:
    """Whether x and y are compound statements of one type that differ only in their nested bodies (`children`)."""
    empty = lambda _body: ()   # noqa: E731
    return type(x) is type(y) and bool(children(x)) and \
        _erase_events(map_children(x, empty)) == _erase_events(map_children(y, empty))


def _event_pairs(base: tuple, variant: tuple, out: dict) -> dict:
    """{variant's (event var, slot): base's} of the pool flags the alignment matches (equal but for their names)."""
    for tag, i1, i2, j1, j2 in _align(base, variant):
        ra, rb = base[i1:i2], variant[j1:j2]
        if tag == "equal":
            for x, y in zip(walk(ra), walk(rb)):
                if isinstance(x, SetFlag) and x.pool:
                    out[(y.var, y.id)] = (x.var, x.id)
        elif len(ra) == len(rb) == 1 and _same_header(ra[0], rb[0]):
            for x, y in zip(children(ra[0]), children(rb[0])):
                _event_pairs(x, y, out)
    return out


def _renamed_events(stmts: tuple, names: dict) -> tuple:
    """`stmts` with each pool flag's (var, id) renamed by `names` (a flag's set and wait alike)."""
    def one(s):
        if isinstance(s, (SetFlag, WaitFlag)) and s.pool and (s.var, s.id) in names:
            var, slot = names[(s.var, s.id)]
            return dataclasses.replace(s, var=var, id=slot)
        return map_children(s, lambda b: _renamed_events(b, names))
    return tuple(one(s) for s in stmts)


def _merge_stmts(base: tuple, variant: tuple, flag: str) -> tuple:
    """`base` and `variant` as one statement list: runs equal in both once, a pair of compound statements that
    differ only in their nested bodies (the same For header, If condition, ...) as one statement with merged
    bodies, every other differing run as IfConst(flag, variant's run, base's run)."""
    out: list = []
    for tag, i1, i2, j1, j2 in _align(base, variant):
        ra, rb = base[i1:i2], variant[j1:j2]
        if tag == "equal" and ra == rb:
            out += ra
            continue
        if len(ra) == len(rb) == 1 and _same_header(ra[0], rb[0]):
            bodies = iter([_merge_stmts(x, y, flag) for x, y in zip(children(ra[0]), children(rb[0]))])
            out.append(map_children(ra[0], lambda _body: next(bodies)))
        else:
            out.append(IfConst(flag, rb, ra))
    return tuple(out)


def resolve_flag(stmts: tuple, flag: str, value: bool) -> tuple:
    """`stmts` with every IfConst of `flag` replaced by its arm for `value` (what the C++ compiler keeps of an
    instantiation), nested bodies included."""
    out: list = []
    for s in stmts:
        if isinstance(s, IfConst) and s.flag == flag:
            out += resolve_flag(s.then if value else s.orelse, flag, value)
        else:
            out.append(map_children(s, lambda b: resolve_flag(b, flag, value)))
    return tuple(out)


def merge_variant(base: tuple, variant: tuple, flag: str, members=frozenset()) -> tuple | None:
    """The body of a member template `<bool flag>` that is statements `base` where `flag` is false and `variant`
    where it is true (Func.variant_of; docs/design.md "Variants of a method"), or None where one body would not
    compile as the two do: a name an `if constexpr` block declares (a local; `members` are assigned, not declared)
    is named outside the block. Each instantiation of the result is checked to resolve to its method's statements
    exactly (resolve_flag), the variant's up to the names of its pool flags' local event variables. Raises
    nothing."""
    base, variant = tuple(base), tuple(variant)
    # the variant's pool flags named as the base's where they match (a local event variable's name means nothing
    # beyond its set and wait: renamed together, the variant's instantiation is the same program), its own flags
    # under names neither method uses
    pairs = _event_pairs(base, variant, {})
    own = [(s.var, s.id) for s in walk(variant) if isinstance(s, SetFlag) and s.pool]
    if len(set(own)) != len(own) or len(set(pairs.values())) != len(pairs):
        return None   # a name set twice in one method: no one-to-one renaming
    used = {s.var for s in walk(base + variant) if isinstance(s, (SetFlag, WaitFlag)) and s.pool}
    fresh = (f"{EVENT_VAR_PREFIX}{n}" for n in itertools.count() if f"{EVENT_VAR_PREFIX}{n}" not in used)
    names = {v: pairs.get(v) or (next(fresh), v[1]) for v in own}
    variant = _renamed_events(variant, names)
    merged = _merge_stmts(base, variant, flag)
    text = repr(merged)

    def scoped(stmts) -> bool:
        for s in stmts:
            if isinstance(s, IfConst):
                inner = repr(s)
                for name in {n for x in s.then + s.orelse for n in _declared(x)} - set(members):
                    if text.count(repr(name)) > inner.count(repr(name)):
                        return False
            elif not all(scoped(b) for b in children(s)):
                return False
        return True

    if not scoped(merged) or resolve_flag(merged, flag, False) != tuple(base) or \
            resolve_flag(merged, flag, True) != tuple(variant):
        return None
    return merged


def printed_methods(k: "KernelClass") -> tuple[list, dict]:
    """The methods the C++ printer prints for class `k` -- (Func, bool template parameters) each, a method and its
    variant joined into one member template where `merge_variant` can, each other as it is -- and the calls it
    renames: {method: (printed method, template argument)}."""
    by_name = {m.name: m for m in k.methods}
    joined: dict = {}
    renames: dict = {}
    for m in k.methods:
        if not m.variant_of:
            continue
        base, flag = m.variant_of
        b = by_name.get(base)
        if b is None or b.variant_of or base in joined or (b.params, b.ret, b.tparams) != (m.params, m.ret, m.tparams):
            continue
        body = merge_variant(b.body, m.body, flag, k.member_names())
        if body is None:
            continue
        doc = "\n".join(x for x in (b.doc, f"{flag}: {m.doc}" if m.doc else "") if x)
        joined[base] = (dataclasses.replace(b, body=body, doc=doc), (flag,))
        joined[m.name] = None
        renames[base], renames[m.name] = (base, "false"), (base, "true")
    out = []
    for m in k.methods:
        j = joined.get(m.name, (m, ()))
        if j is not None:
            out.append(j)
    return out, renames


class CppPrinter:
    """Prints a verified KernelClass as AscendC C++ (docs/reference/ascendc.md §1.5-§1.9). Symbols print as
    td_->field for tiling fields (the struct's spelling, opgen.names.cpp_name: an attribute `aclrtStream`'s field
    aclrtStreamBits is `v_aclrtStreamBits_`), GetBlockIdx() / GetBlockNum() for BLOCK_IDX / BLOCK_NUM, else their
    name."""

    def __init__(self, k: KernelClass, indent: str = "    "):
        self.k = k
        self.ind = indent
        self.fields = set(k.fields)
        self.member_tensors = {t.name: t for t in k.tensors}
        self.local_bufs = {b.name: b for b in k.locals}
        self.gms = {g.name: g for g in k.gms}
        self.member_scalars = {s.name for s in k.scalars}
        self.bool_members = {s.name for s in k.scalars if s.ctype == "bool"}
        self.structs = {d.name: d for d in k.structs}
        self.methods, self.renames = printed_methods(k)

    # -- expressions
    def e(self, x, top: bool = True) -> str:
        """C++ text of an integer expression (int64 arithmetic; // prints as / since values are >= 0)."""
        x = as_dim(x)
        if isinstance(x, Lit):
            return str(x.value)
        if isinstance(x, Sym):
            if x.name in _SPECIAL:
                return _SPECIAL[x.name]
            # a field has the tiling-data struct's spelling (tiling_data.h.j2: cpp_name), `v_<name>_` for a hazard
            return f"td_->{cpp_name(x.name)}" if x.name in self.fields else x.name
        if isinstance(x, SizeOf):
            return f"sizeof({x.ctype})"
        if isinstance(x, Invoke):
            return f"{x.method}({', '.join(self.e(a) for a in x.args)})"
        if isinstance(x, TableAt):
            return x.table + "".join(f"[{self.e(i)}]" for i in x.index)
        if isinstance(x, GmAt):
            return f"static_cast<int64_t>({x.tensor}.GetValue({self.e(x.index)}))"
        if isinstance(x, FIndex):
            return f"static_cast<int64_t>({x.name})"
        if isinstance(x, Select):
            c = " && ".join(f"{self.e(y.lhs, False)} {y.op} {self.e(y.rhs, False)}" for y in x.conds)
            t = f"{c if len(x.conds) == 1 else '(' + c + ')'} ? {self.e(x.a, False)} : {self.e(x.b, False)}"
            return t if top else f"({t})"
        if isinstance(x, Bin):
            def wrap(y, right):
                s = self.e(y, False)
                y = as_dim(y)
                if isinstance(y, Bin) and (_PREC[y.op] < _PREC[x.op] or (right and _PREC[y.op] == _PREC[x.op])):
                    return f"({s})"
                return s
            op = "/" if x.op == "//" else x.op
            return f"{wrap(x.lhs, False)} {op} {wrap(x.rhs, True)}"
        if isinstance(x, Fn):
            a, b = (self.e(y, False) for y in x.args)
            if x.fn in ("min", "max"):
                t = f"{a} {'<' if x.fn == 'min' else '>'} {b} ? {a} : {b}"
                return t if top else f"({t})"
            if x.fn == "align_up":
                return f"AlignUp({a}, {b})"
            return f"({a} + {b} - 1) / {b}" if top else f"(({a} + {b} - 1) / {b})"
        raise IRError(f"cannot print expression {x!r}")

    def cond(self, c) -> str:
        """A conjunction's C++ text (a conditional expression on either side parenthesised; a bool member compared
        with 0 printed as its negation)."""
        def one(x):
            if isinstance(x, Sym):
                return self.e(x)
            if x.op == "==" and x.rhs == Lit(0) and isinstance(x.lhs, Sym) and x.lhs.name in self.bool_members:
                return f"!{x.lhs.name}"
            return f"{self.e(x.lhs, False)} {x.op} {self.e(x.rhs, False)}"
        return " && ".join(one(x) for x in c)

    def f(self, x) -> str:
        """C++ text of a float expression."""
        if isinstance(x, FConst):
            v = float(x.value)
            if v in (float("inf"), float("-inf")):
                return "__builtin_inff()" if v > 0 else "-__builtin_inff()"
            r = repr(v)
            return (r if ("e" in r or "." in r) else r + ".0") + "f"
        if isinstance(x, FRef):
            return x.name
        if isinstance(x, FInt):
            return f"static_cast<float>({self.e(x.value)})"
        if isinstance(x, FBits):
            return f"BitsToFloat({self.e(x.value)})"
        if isinstance(x, FBin):
            t = f"{self.f(x.a)} {x.op} {self.f(x.b)}"
            return f"({t})" if x.paren else t
        if isinstance(x, FNeg):
            return f"-({self.f(x.x)})" if x.paren else f"-{self.f(x.x)}"
        if isinstance(x, FMinMax):
            a, b = self.f(x.a), self.f(x.b)
            return f"({a} {'>' if x.fn == 'max' else '<'} {b} ? {a} : {b})"
        if isinstance(x, FCond):
            return f"({self.f(x.a)} {x.cmp} {self.f(x.b)} ? {self.f(x.x)} : {self.f(x.y)})"
        if isinstance(x, FCall):
            return f"{_FCALLS[x.fn]}({self.f(x.arg)})"
        if isinstance(x, FLoad) and isinstance(x.src, GmView):   # GmScalar: templates/op_kernel/_helpers.h.j2
            return f"GmScalar({x.src.tensor}, {self.e(x.src.offset)})"
        if isinstance(x, FLoad):
            return f"{self.ref(Ref(x.src.tensor, Lit(0), x.src.slot))}.GetValue({self.e(x.src.offset)})"
        raise IRError(f"not a float expression: {x!r}")

    def ref(self, r) -> str:
        """C++ text of a UB region or GM view."""
        if isinstance(r, GmView):
            off = const_value(r.offset)
            return r.tensor if off == 0 else f"{r.tensor}[{self.e(r.offset)}]"
        base = r.tensor if r.slot is None else f"{r.tensor}[{self.e(r.slot)}]"
        text = base if const_value(r.offset) == 0 else f"{base}[{self.e(r.offset)}]"
        return text if r.as_dtype is None else f"{text}.template ReinterpretCast<{r.as_dtype}>()"

    def arg(self, a) -> str:
        if isinstance(a, bool):
            return "true" if a else "false"
        if isinstance(a, str):
            return f"RoundMode::{a}"
        if isinstance(a, (Ref, GmView)):
            return self.ref(a)
        if isinstance(a, FExpr):
            return self.f(a)
        return self.e(a)

    # -- statements
    def body(self, stmts, depth: int, scope: dict) -> list[str]:
        out = []
        for s in stmts:
            out += self.stmt(s, depth, scope)
        return out

    def _tensor_decl(self, var, dtype, rhs, scope) -> str:
        if var in self.member_tensors or var in scope:
            return f"{var} = {rhs};"
        scope[var] = dtype
        return f"LocalTensor<{dtype}> {var} = {rhs};"

    def dtype_of(self, r, scope) -> str:
        m = STRUCT_FIELD.match(r.tensor) if isinstance(r, GmView) else None
        if m and isinstance(scope.get(m.group(1)), tuple):   # a GM tensor field of a struct parameter
            return self.structs[scope[m.group(1)][1]].field(m.group(2))[1]
        if isinstance(r, GmView):
            return self.gms[r.tensor].dtype if r.tensor in self.gms else scope[r.tensor]
        if r.tensor in self.member_tensors:
            return self.member_tensors[r.tensor].dtype
        return scope[r.tensor]

    def stmt(self, s, depth: int, scope: dict) -> list[str]:  # noqa: C901 - one case per node type
        p = self.ind * depth
        if isinstance(s, Let):
            return [f"{p}{'' if s.mutable else 'const '}int64_t {s.name} = {self.e(s.value)};"]
        if isinstance(s, Assign):
            v = as_dim(s.value)
            if isinstance(v, Bin) and v.op in ("+", "-") and v.lhs == Sym(s.name):
                return [f"{p}{s.name} {v.op}= {self.e(v.rhs)};"]
            return [f"{p}{s.name} = {self.e(s.value)};"]
        if isinstance(s, FLet):
            return [f"{p}{'' if s.mutable else 'const '}float {s.name} = {self.f(s.value)};{_doc(s)}"]
        if isinstance(s, FAssign):
            return [f"{p}{s.name} = {self.f(s.value)};{_doc(s)}"]
        if isinstance(s, For):
            decl = "" if s.var in self.member_scalars else "int64_t "
            doc = f"  // {_comment(s.doc)}" if s.doc else ""
            if s.step is None:
                inc = ""
            else:
                inc = " " + (f"++{s.var}" if const_value(s.step) == 1 else f"{s.var} += {self.e(s.step)}")
            lt = "<=" if s.inclusive else "<"
            init = "" if as_dim(s.lo) == Sym(s.var) and not decl else f"{decl}{s.var} = {self.e(s.lo)}"
            out = _doc_above(p, f"for ({init}; {s.var} {lt} {self.e(s.hi, False)};{inc}) {{", doc)   # (no x = x)
            inner = dict(scope)
            if s.tail:
                left = self.e(Bin("-", as_dim(s.hi), Sym(s.var)))
                out.append(f"{p}{self.ind}const int64_t {s.tail} = {left} < {self.e(s.step)} ? {left} : "
                           f"{self.e(s.step)};")
            out += self.body(s.body, depth + 1, inner)
            return out + [f"{p}}}"]
        if isinstance(s, If):
            doc = f"  // {_comment(s.doc)}" if s.doc else ""
            out = _doc_above(p, f"if ({self.cond(s.cond)}) {{", doc) + self.body(s.then, depth + 1, dict(scope))
            if s.orelse:
                out += [f"{p}}} else {{"] + self.body(s.orelse, depth + 1, dict(scope))
            return out + [f"{p}}}"]
        if isinstance(s, InitBuffer):
            if self.local_bufs[s.buf].pool:
                share = f", {s.share}" if s.share else ""
                return [f"{p}pipe_.InitBufPool({s.buf}, {self.e(s.bytes)}{share});"]
            num = f"{s.num}, " if self.local_bufs[s.buf].queue else ""
            return [f"{p}{s.pool or 'pipe_'}.InitBuffer({s.buf}, {num}{self.e(s.bytes)});"]
        if isinstance(s, Get):
            off = "" if const_value(s.offset) == 0 else f"[{self.e(s.offset)}]"
            rhs = f"{s.buf}.template Get<{s.dtype}>(){off}"
            if s.slot is not None:
                return [f"{p}{s.var}[{self.e(s.slot)}] = {rhs};"]
            return [p + self._tensor_decl(s.var, s.dtype, rhs, scope)]
        if isinstance(s, View):
            return [p + self._tensor_decl(s.var, self.dtype_of(s.src, scope), self.ref(s.src), scope)]
        if isinstance(s, Alloc):
            return [p + self._tensor_decl(s.var, s.dtype, f"{s.queue}.template AllocTensor<{s.dtype}>()", scope)]
        if isinstance(s, EnQue):
            return [f"{p}{s.queue}.EnQue({s.var});"]
        if isinstance(s, DeQue):
            return [p + self._tensor_decl(s.var, s.dtype, f"{s.queue}.template DeQue<{s.dtype}>()", scope)]
        if isinstance(s, Free):
            return [f"{p}{s.queue}.FreeTensor({s.var});"]
        if isinstance(s, Copy):
            return self.copy(s, p, scope)
        if isinstance(s, Vec):
            part = _parts_note(v for _, v in s.args)
            return ([f"{p}// {part}"] if part else []) + \
                [p + self.vec(s, scope) + (f"  // {_comment(s.doc)}" if s.doc else "")]
        if isinstance(s, GetValue):
            return [f"{p}const float {s.name} = {self.ref(Ref(s.src.tensor, Lit(0), s.src.slot))}"
                    f".GetValue({self.e(s.src.offset)});{_doc(s)}"]
        if isinstance(s, SetValue):
            v = (f"static_cast<{self.dtype_of(s.dst, scope)}>({self.e(s.value)})" if isinstance(s.value, DimExpr)
                 else self.f(s.value))
            return [f"{p}{self.ref(Ref(s.dst.tensor, Lit(0), s.dst.slot))}.SetValue({self.e(s.dst.offset)}, "
                    f"{v});{_doc(s)}"]
        if isinstance(s, TrapUnless):
            if isinstance(s.value, DimExpr):
                v = self.e(s.value)
                head = f"if (!({v} >= 0 && {v} < {self.e(s.bound)})) {{"
            else:
                v = self.f(s.value)
                head = f"if (!({v} >= 0.0f && {v} < static_cast<float>({self.e(s.bound)}))) {{"
            return _doc_above(p, head, _doc(s)) + [f"{p}    Trap();", f"{p}}}"]
        if isinstance(s, Barrier):
            return [f"{p}PipeBarrier<{s.pipe.value}>();" + (f"  // {_comment(s.doc)}" if s.doc else "")]
        if isinstance(s, SetFlag):
            doc = f"  // {_comment(s.doc)}" if s.doc else ""
            if not s.pool:
                return [f"{p}SetFlag<HardEvent::{s.event}>({s.id});" + doc]
            take = (f"FetchEventID(HardEvent::{s.event})" if s.pool == "fetch"
                    else f"AllocEventID<HardEvent::{s.event}>()")
            return [f"{p}event_t {s.var} = static_cast<event_t>(GetTPipePtr()->{take});",
                    f"{p}SetFlag<HardEvent::{s.event}>({s.var});" + doc]
        if isinstance(s, WaitFlag):
            doc = f"  // {_comment(s.doc)}" if s.doc else ""
            if not s.pool:
                return [f"{p}WaitFlag<HardEvent::{s.event}>({s.id});" + doc]
            return [f"{p}WaitFlag<HardEvent::{s.event}>({s.var});" + doc] + \
                ([f"{p}GetTPipePtr()->ReleaseEventID<HardEvent::{s.event}>({s.var});"] if s.pool == "alloc" else [])
        if isinstance(s, SyncAll):
            return [f"{p}SyncAll();" + (f"  // {_comment(s.doc)}" if s.doc else "")]
        if isinstance(s, CrossCoreSetFlag):
            return [f"{p}CrossCoreSetFlag<{s.mode}, {s.pipe.value}>({s.id});" + (f"  // {_comment(s.doc)}" if s.doc else "")]
        if isinstance(s, CrossCoreWaitFlag):
            return [f"{p}CrossCoreWaitFlag({s.id});" + (f"  // {_comment(s.doc)}" if s.doc else "")]
        if isinstance(s, StructLet):
            scope[s.name] = ("struct", s.struct)
            return [f"{p}{s.struct} {s.name};"]
        if isinstance(s, StructSet):
            v = self.ref(s.value) if isinstance(s.value, GmView) else self.e(s.value)
            return [f"{p}{s.target} = {v};" + (f"  // {_comment(s.doc)}" if s.doc else "")]
        if isinstance(s, Call):
            method, flag = self.renames.get(s.method, (s.method, None))
            targs = tuple(s.targs) + ((flag,) if flag else ())
            ta = f"<{', '.join(targs)}>" if targs else ""
            call = f"{method}{ta}({', '.join(self.arg(a) for a in s.args)})"
            if s.result and s.assign:
                return [f"{p}{s.result} = {call};{_doc(s)}"]
            if s.result:
                m = self.k.method(s.method)
                return [f"{p}const {m.ret} {s.result} = {call};{_doc(s)}"]
            return [f"{p}{call};{_doc(s)}"]
        if isinstance(s, Return):
            if getattr(self, "_ret", None) == "uint32_t":
                return [f"{p}return static_cast<uint32_t>({self.arg(s.value)});"]
            return [f"{p}return {self.arg(s.value)};"]
        if isinstance(s, Comment):
            return [f"{p}// {_comment(s.text)}"]
        if isinstance(s, Scope):
            return [f"{p}{{"] + self.body(s.body, depth + 1, dict(scope)) + [f"{p}}}"]
        if isinstance(s, IfConst):   # a method and its variant printed as one template (printed_methods)
            then, orelse = (s.then, s.orelse) if s.then else (s.orelse, ())
            out = [f"{p}if constexpr ({'' if s.then else '!'}{s.flag}) {{"] + self.body(then, depth + 1, dict(scope))
            if orelse:
                out += [f"{p}}} else {{"] + self.body(orelse, depth + 1, dict(scope))
            return out + [f"{p}}}"]
        if isinstance(s, Verbatim):
            return [f"{p}{ln}" for ln in s.lines]
        if isinstance(s, CoreIf):
            doc = f"  // {_comment(s.doc)}" if s.doc else ""
            test = "ASCEND_IS_AIC" if s.unit == "cube" else "ASCEND_IS_AIV"
            return [f"{p}if {test} {{{doc}"] + self.body(s.body, depth + 1, dict(scope)) + [f"{p}}}"]
        if isinstance(s, Fixpipe) and s.atomic:
            return [f"{p}SetAtomicAdd<float>();", p + self.cube(s, scope) + (f"  // {_comment(s.doc)}" if s.doc else ""),
                    f"{p}SetAtomicNone();"]
        if isinstance(s, CUBE_STMTS):
            return [p + self.cube(s, scope) + (f"  // {_comment(s.doc)}" if s.doc else "")]
        raise IRError(f"unknown statement {type(s).__name__}", s)

    def u16(self, x) -> str:
        """A uint16 parameter: a constant as is, else static_cast<uint16_t>(...)."""
        return self.e(x) if const_value(x) is not None else f"static_cast<uint16_t>({self.e(x)})"

    def cube(self, s, scope) -> str:
        """The AscendC call of a cube statement (docs/reference/ascendc.md §1.10)."""
        u = self.u16
        if isinstance(s, Nd2Nz):
            return (f"DataCopy({self.ref(s.dst)}, {self.ref(s.src)}, Nd2NzParams(1, {u(s.rows)}, {u(s.cols)}, 0, "
                    f"{u(s.src_pitch)}, {u(s.pad_rows)}, 1, 0));")
        if isinstance(s, LoadData):
            rep = self.e(s.repeat) if const_value(s.repeat) is not None else f"static_cast<uint8_t>({self.e(s.repeat)})"
            if s.with_transpose:   # startIndex, repeatTimes, srcStride, dstGap, dstFracGap (addrMode 0)
                return (f"LoadDataWithTranspose({self.ref(s.dst)}, {self.ref(s.src)}, LoadData2dTransposeParams("
                        f"{u(s.start)}, {rep}, {u(s.src_stride)}, {u(s.dst_gap)}, {u(s.dst_frac_gap)}));")
            return (f"LoadData({self.ref(s.dst)}, {self.ref(s.src)}, LoadData2DParams({u(s.start)}, {rep}, "
                    f"{u(s.src_stride)}, 0, 0, {'true' if s.transpose else 'false'}, 0));")
        if isinstance(s, Mmad):
            init = self.cond(s.init) if s.init else "false"
            bias = f"{self.ref(s.bias)}, " if s.bias is not None else ""   # its position sets cmatrixSource
            return (f"Mmad({self.ref(s.dst)}, {self.ref(s.a)}, {self.ref(s.b)}, {bias}MmadParams({u(s.m)}, {u(s.n)}, "
                    f"{u(s.k)}, 0, false, {init}));")
        if isinstance(s, LoadBias):
            return f"DataCopy({self.ref(s.dst)}, {self.ref(s.src)}, DataCopyParams(1, {u(s.blocks)}, 0, 0));"
        dt = self.dtype_of(s.dst, scope)
        quant = _QUANT.get(dt, f"CubeQuantOf<{dt}>()")
        pitch = self.e(s.dst_pitch) if const_value(s.dst_pitch) is not None else \
            f"static_cast<uint32_t>({self.e(s.dst_pitch)})"
        return (f"Fixpipe<{dt}, {self.dtype_of(s.src, scope)}, CFG_ROW_MAJOR>({self.ref(s.dst)}, {self.ref(s.src)}, FixpipeParamsV220("
                f"{u(s.cols)}, {u(s.rows)}, {u(s.src_rows)}, {pitch}, false, {quant}, 0, 1, 0, 0, 0));")

    def copy(self, s: Copy, p: str, scope) -> list[str]:
        gm_src = isinstance(s.src, GmView)
        dt = self.dtype_of(s.src if gm_src else s.dst, scope)
        cnt = self.e(s.block_count)
        if const_value(s.block_count) is None:
            cnt = f"static_cast<uint16_t>({cnt})"
        params = (f"DataCopyExtParams({cnt}, {self.e(s.block_len)}, {self.e(s.src_stride)}, "
                  f"{self.e(s.dst_stride)}, 0)")
        padv = f"{dt}{{}}" if s.pad_value is None else self.f(s.pad_value)
        pad = f", DataCopyPadExtParams<{dt}>(false, 0, 0, {padv})" if gm_src else ""
        part = _parts_note((s.dst, s.src))
        doc = f"  // {_comment(s.doc)}" if s.doc else ""
        return ([f"{p}// {part}"] if part else []) + \
            [f"{p}DataCopyPad({self.ref(s.dst)}, {self.ref(s.src)}, {params}{pad});{doc}"]

    def vec(self, s: Vec, scope=None) -> str:
        d = INSTRS[s.op]
        exprs = {}
        elem = None   # the instruction's element type T when a ub operand of type T has a concrete other than float
        for o in d.operands:
            if o.kind == "ub" and o.dtype == INSTR_T and scope is not None:
                r = s.arg(o.name)
                try:   # a region read as another element type (Ref.as_dtype: halves in an fp32 row) is of that type
                    elem = r.as_dtype if isinstance(r, Ref) and r.as_dtype else self.dtype_of(r, scope)
                except KeyError:
                    elem = None
                break
        for o in d.operands:
            v = s.arg(o.name)
            if o.kind in ("ub", "gm"):
                exprs[o.name] = self.ref(v)
            elif o.kind == "count":
                t = self.e(v)
                plain = const_value(v) is not None or s.op in _HELPERS
                exprs[o.name] = t if plain else f"static_cast<{o.dtype}>({t})"
            elif o.kind == "scalar":   # the scalar is exactly T (§1.9): a literal is, an expression is cast
                if elem in ("half", "bfloat16_t"):
                    exprs[o.name] = f"static_cast<{elem}>({self.f(v)})"
                else:
                    exprs[o.name] = self.f(v) if isinstance(v, FConst) else f"static_cast<float>({self.f(v)})"
            elif o.kind == "mode":
                exprs[o.name] = v.name if isinstance(v, Sym) else f"RoundMode::{v}"
            elif o.kind == "cmp":
                exprs[o.name] = f"CMPMODE::{v}"
            elif isinstance(v, tuple):
                cast = "uint8_t" if _STRUCTS[(s.op, o.name)] == "BinaryRepeatParams" else None
                exprs[o.name] = f"{_STRUCTS[(s.op, o.name)]}({', '.join(self._typed(x, cast) for x in v)})"
            else:
                exprs[o.name] = self._typed(v, o.dtype if s.op in _TYPED_VALUES else None)
        return d.stmt(**exprs)

    def _typed(self, v, ctype: str | None) -> str:
        """A value operand's C++ text, a non-constant one cast to `ctype` (the real parameter's type) when given."""
        t = self.e(v)
        return t if ctype is None or const_value(v) is not None else f"static_cast<{ctype}>({t})"

    def _sets_struct(self, body, name: str, seen: frozenset = frozenset()) -> bool:
        """Whether statements `body` set a field of struct `name` (StructSet), directly or through a method they
        pass it to."""
        for s in walk(body):
            if isinstance(s, StructSet) and s.target.split(".")[0] == name:
                return True
            if isinstance(s, Call) and s.method not in seen:
                m = next((f for f in self.k.methods if f.name == s.method), None)
                for q, a in zip(m.params if m else (), s.args):
                    if q.kind == "struct" and isinstance(a, Sym) and a.name == name and \
                            self._sets_struct(m.body, q.name, seen | {s.method}):
                        return True
        return False

    # -- the class
    def func(self, name, params, body, ret="void", const=False, doc="", depth=1, tparams=(),
             static=False, bparams=()) -> list[str]:
        """The C++ lines of one method (its doc as // lines, the signature, the body at `depth`)."""
        p = self.ind * depth
        self._ret = ret
        ps = []
        scope: dict = {}
        for q in params:
            if q.kind in ("tensor", "gm"):
                ps.append(f"const {'LocalTensor' if q.kind == 'tensor' else 'GlobalTensor'}<{q.dtype}>& {q.name}")
                scope[q.name] = q.dtype
            elif q.kind == "struct":   # by reference; const unless the method (or one it passes it to) sets a field
                ps.append(f"{'' if self._sets_struct(body, q.name) else 'const '}{q.dtype}& {q.name}")
                scope[q.name] = ("struct", q.dtype)
            else:
                ctype = {'int': 'int64_t', 'float': 'float', 'bool': 'bool', 'mode': 'RoundMode'}[q.kind]
                ps.append(f"{ctype} {q.name}")
        lines = self.body(body, depth + 1, scope)
        code = "\n".join(x.split("//")[0] for x in lines)
        # a parameter the body never names (one specialisation's phase that ignores its chunk index) is marked so
        ps = [x if re.search(rf"\b{q.name}\b", code) else f"[[maybe_unused]] {x}" for q, x in zip(params, ps)]
        out = [f"{p}// {_comment(line)}" for line in doc.split("\n")] if doc else []
        if tparams or bparams:
            out.append(f"{p}template <{', '.join(['typename ' + t for t in tparams] + ['bool ' + b for b in bparams])}>")
        out.append(f"{p}{'static ' if static else ''}__aicore__ inline {ret} {name}({', '.join(ps)})"
                   f"{' const' if const else ''}")
        out.append(f"{p}{{")
        out += lines
        out.append(f"{p}}}")
        return out

    def print_class(self) -> str:
        k = self.k
        p = self.ind
        out = [f"// {_comment(k.doc)}"] if k.doc else []
        if k.tparams:
            out.append(f"template <{', '.join('typename ' + t for t in k.tparams)}>")
        out += [f"class {k.name} {{", "public:"]
        for d in k.structs:
            if d.in_class:
                out += self.struct_decl(d) + [""]
        init_params = ", ".join([f"GM_ADDR {a}" for a in k.args] + ["GM_ADDR workspace",
                                                                     f"const {k.tiling_struct}* td"])
        out.append(f"{p}__aicore__ inline void Init({init_params})")
        out.append(f"{p}{{")
        out.append(f"{p * 2}td_ = td;")
        for g in k.gms:
            src = "GetUserWorkspace(workspace)" if g.workspace else g.arg
            bind = f"{g.name}.SetGlobalBuffer(reinterpret_cast<__gm__ {g.dtype}*>({src}));"
            if g.workspace and k.ws_field:   # no user workspace: GetUserWorkspace points past the system one
                out += [f"{p * 2}if (td->{k.ws_field} > 0) {{", f"{p * 3}{bind}", f"{p * 2}}}"]
            else:
                out.append(f"{p * 2}{bind}")
        if not any(g.workspace for g in k.gms):
            out.append(f"{p * 2}(void)workspace;")
        bound = {g.arg for g in k.gms if not g.workspace} | {a for _m, a in k.presence if isinstance(a, str)}
        for m, a in k.presence:   # a runtime guard (TilingCond) is assigned by the Init body
            if isinstance(a, str):
                out.append(f"{p * 2}this->{m} = {a} != nullptr;")
        for a in k.args:
            if a not in bound:
                out.append(f"{p * 2}(void){a};  // not read by this class")
        out += self.body(k.init, 2, {})
        out.append(f"{p}}}")
        out.append("")
        out += self.func("Process", (), k.process)
        out += ["", "private:"]
        for m, flags in self.methods:
            if m.extern:
                continue
            out += self.func(m.name, m.params, m.body, m.ret, m.const, m.doc, tparams=m.tparams, static=m.static,
                             bparams=flags)
            out.append("")
        out.append(f"{p}const {k.tiling_struct}* td_ = nullptr;")
        out += self.members()
        out.append("};")
        return "\n".join(out) + "\n"

    def struct_decl(self, d: StructDecl) -> list[str]:
        """The declaration of struct type `d` inside the class (one field a line, its initialiser and comment)."""
        p = self.ind
        out = [f"{p}// {_comment(line)}" for line in d.doc.split("\n")] if d.doc else []
        out.append(f"{p}struct {d.name} {{")
        docs, defaults = dict(d.field_docs), dict(d.defaults)
        for name, kind, dtype, count in d.fields:
            arr = f"[{count}]" if count is not None else ""
            if kind == "gm":
                line = f"GlobalTensor<{dtype}> {name}{arr};"
            elif kind == "bool":
                line = f"bool {name}{arr}" + (" = {};" if count is not None else " = false;")
            else:
                line = f"int64_t {name}{arr}" + (" = {};" if count is not None else f" = {int(defaults.get(name, 0))};")
            out.append(f"{p * 2}{line}" + (f"  // {_comment(docs[name])}" if name in docs else ""))
        out.append(f"{p}}};")
        return out

    def members(self) -> list[str]:
        """The member declarations after td_: the TPipe, GM tensors, TPipe allocations, tensors and scalars."""
        k, p = self.k, self.ind
        out = [f"{p}TPipe pipe_;"]
        for g in k.gms:
            out.append(f"{p}GlobalTensor<{g.dtype}> {g.name};")
        for b in k.locals:
            if b.pool:
                out.append(f"{p}TBufPool<TPosition::{b.pos.value}, {b.depth}> {b.name};")
            elif b.queue:
                out.append(f"{p}TQue<TPosition::{b.pos.value}, {b.depth}> {b.name};")
            else:
                out.append(f"{p}TBuf<TPosition::{b.pos.value}> {b.name};")
        for t in k.tensors:
            out.append(f"{p}LocalTensor<{t.dtype}> {t.name}" + (f"[{t.count}];" if t.count is not None else ";"))
        for s in k.scalars:
            init = (f"{float(s.init)!r}f" if s.ctype == "float" else
                    ("true" if s.init else "false") if s.ctype == "bool" else str(int(s.init)))
            out.append(f"{p}{s.ctype} {s.name} = {init};")
        return out


_QUANT = {"float": "QuantMode_t::NoQuant", "int32_t": "QuantMode_t::NoQuant", "half": "QuantMode_t::F322F16", "bfloat16_t": "QuantMode_t::F322BF16"}
"""Fixpipe's quantPre by destination element type (a template parameter prints CubeQuantOf<T>(), a helper the
cube family's file skeleton defines)."""
_STRUCTS = {(Op.BRCB, "params"): "BrcbRepeatParams",
            **{(op, "params"): "BinaryRepeatParams" for op in (Op.ADD_REP, Op.SUB_REP, Op.MUL_REP, Op.DIV_REP,
                                                                 Op.MAX_REP, Op.MIN_REP, Op.COMPARE_REP,
                                                                 Op.SELECT_SCALAR_REP)}}
_TYPED_VALUES = frozenset({Op.ADD_REP, Op.SUB_REP, Op.MUL_REP, Op.DIV_REP, Op.MAX_REP, Op.MIN_REP,
                           Op.WHOLE_REDUCE_SUM, Op.WHOLE_REDUCE_MAX, Op.COMPARE_REP, Op.SELECT_SCALAR_REP})
"""Instructions whose non-constant value operands are printed cast to the real parameter's type (the mask / repeat
forms: uint64_t mask, uint8_t repeatTime and strides, int32_t WholeReduce arguments)."""
_HELPERS = frozenset({Op.CAST_FROM, Op.CAST_TO})
"""opgen's device helpers (templates/op_kernel/_helpers.h.j2): their count parameter is int64_t, passed as is."""
"""C++ struct type of each struct-valued ("value" kind given as a tuple) operand."""


def _doc_above(p: str, head: str, doc: str) -> list[str]:
    """A block's opening line `head` at indent `p` with its trailing comment `doc` ("  // ..."), or the comment on its
    own line above it when both would not fit in 120 columns (clang-format would break the head to keep it)."""
    if len(p) + len(head) + len(doc) <= 120:
        return [f"{p}{head}{doc}"]
    return [f"{p}{doc.strip()}", f"{p}{head}"]


def _doc(s) -> str:
    """The trailing C++ comment of statement `s` ("  // doc"), empty without a doc."""
    return f"  // {_comment(s.doc)}" if getattr(s, "doc", "") else ""


def _comment(text: str) -> str:
    """One line of comment text: newlines become spaces and a comment terminator cannot form."""
    return " ".join(str(text).split()).replace("*/", "* /")


def _strings(x, out: set, seen: set) -> None:
    """Every str value reachable from IR node `x` through dataclass fields, tuples, lists and dicts (names of
    members, methods and fields, among other text)."""
    if isinstance(x, str):
        out.add(x)
    elif isinstance(x, (tuple, list)):
        for y in x:
            _strings(y, out, seen)
    elif isinstance(x, dict):
        for y in x.items():
            _strings(y, out, seen)
    elif dataclasses.is_dataclass(x) and not isinstance(x, type) and id(x) not in seen:
        seen.add(id(x))
        for f in dataclasses.fields(x):
            _strings(getattr(x, f.name), out, seen)


def prune_members(k: KernelClass) -> KernelClass:
    """`k` without the member buffers, tensors and scalars that no statement of Init, Process or a method names (a
    schedule declares the members its strategies may use; one class keeps those its own methods read), and without
    the extern methods nothing calls. The names a statement holds are found structurally (every str field of the
    IR nodes, opgen's own names: members are never spec text), so a member a method names in any operand stays."""
    used: set = set()
    seen: set = set()
    for part in (k.init, k.process, k.presence, k.tables, k.structs):
        _strings(part, used, seen)
    for m in k.methods:
        if not m.extern:
            _strings((m.params, m.body), used, seen)
    return dataclasses.replace(
        k, locals=tuple(b for b in k.locals if b.name in used),
        tensors=tuple(t for t in k.tensors if t.name in used),
        scalars=tuple(v for v in k.scalars if v.name in used),
        methods=tuple(m for m in k.methods if not m.extern or m.name in used))


def _braced(vals, shape) -> str:
    """The C++ brace initialiser of the row-major `vals` of an array of `shape` (nested braces per axis)."""
    if len(shape) == 1:
        return "{" + ", ".join(str(v) for v in vals) + "}"
    step = len(vals) // shape[0]
    return "{" + ", ".join(_braced(vals[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])) + "}"


def namespace_cpp(k: KernelClass) -> str:
    """The namespace-scope declarations class `k` reads: its `consts` (constexpr int64_t, with their comments) and
    its ConstTables (constexpr arrays, axes sized by `dim_names` where given, a row's comment beside it when the
    table has `row_docs`). "" when it has neither."""
    out = []
    for name, value, doc in k.consts:
        out.append(f"constexpr int64_t {name} = {int(value)};" + (f"  // {_comment(doc)}" if doc else ""))
    if k.consts and k.tables:
        out.append("")
    for t in k.tables:
        out += [f"// {_comment(line)}" for line in t.doc.split("\n")] if t.doc else []
        dims = "".join(f"[{n}]" for n in (t.dim_names or t.shape))
        if t.row_docs and len(t.shape) >= 1:
            step = len(t.values) // t.shape[0]
            out.append(f"constexpr {t.ctype} {t.name}{dims} = {{")
            for i, doc in enumerate(t.row_docs):
                row = t.values[i * step:(i + 1) * step]
                body = _braced(row, t.shape[1:]) if len(t.shape) > 1 else str(row[0])
                out.append(f"    {body}," + (f"  // {_comment(doc)}" if doc else ""))
            out.append("};")
        else:
            out.append(f"constexpr {t.ctype} {t.name}{dims} = {_braced(t.values, t.shape)};")
    return "\n".join(out) + ("\n" if out else "")


def methods_cpp(k: KernelClass, names, verify_first: bool = True) -> str:
    """The C++ of the methods `names` of `k` only (in that order), for a file skeleton that prints the rest of the
    class itself. Raises IRError for a malformed program or an unknown / extern method."""
    if verify_first:
        verify(k)
    k = spelled_tparams(k)
    pr = CppPrinter(k)
    out: list[str] = []
    printed = {m.name: (m, flags) for m, flags in pr.methods}
    for n in names:
        if k.method(n).extern:
            raise IRError(f"method {n} is printed by the skeleton")
        if n not in printed:   # a variant printed as its base method's template (printed_methods)
            continue
        m, flags = printed[n]
        out += pr.func(m.name, m.params, m.body, m.ret, m.const, m.doc, tparams=m.tparams, static=m.static,
                       bparams=flags) + [""]
    return "\n".join(out[:-1]) + "\n" if out else ""


def members_cpp(k: KernelClass) -> str:
    """The C++ member declarations of `k` (TPipe, GM tensors, TPipe allocations, tensors, scalars; one per line,
    indented one level), for a file skeleton that prints the rest of the class."""
    return "\n".join(CppPrinter(spelled_tparams(k)).members()) + "\n"


def process_cpp(k: KernelClass, verify_first: bool = True) -> str:
    """The C++ of `k`'s public Process() (verified first unless verify_first=False), for a file skeleton."""
    if verify_first:
        verify(k)
    k = spelled_tparams(k)
    return "\n".join(CppPrinter(k).func("Process", (), k.process)) + "\n"


def to_cpp(k: KernelClass, verify_first: bool = True) -> str:
    """The AscendC C++ text of kernel class `k` (verified first unless verify_first=False): the class with public
    Init / Process, private methods and members, its template parameters spelled by spelled_tparams. Needs
    kernel_operator.h, `using namespace AscendC` and opgen's AlignUp helper (templates/op_kernel/_scalar.h.j2) in
    scope. Raises IRError for a malformed program."""
    if verify_first:
        verify(k)
    return CppPrinter(spelled_tparams(k)).print_class()


_TPARAM_MARK = "zzOpgenTparam{}zz"
"""A template parameter's stand-in while spelled_tparams reads a class's identifiers (made longer while the class
holds the text anywhere: a spec name may be anything)."""
_CPP_COMMENT_OR_STRING = re.compile(r'//[^\n]*|"(?:\\.|[^"\\\n])*"|(?:\.|->)\s*(?:template\s+)?[A-Za-z_]\w*')
"""What spelled_tparams does not read: comments, string literals and the member after `.` / `->` (a member of
another class, such as the tiling struct's field td_->rowsPerCore, meets no template parameter of this one)."""
_CPP_WORD = re.compile(r"\b[A-Za-z_]\w*\b")


def spelled_tparams(k: KernelClass) -> KernelClass:
    """`k` with each template parameter that would meet an identifier of the printed class's code -- a method
    (`Compute`), a member, a local or loop variable of a method (`G`, `n`: C++ forbids a local to redeclare a
    template parameter), an AscendC call (`Exp(...)` would construct the type), a type -- spelled `v_<name>_`
    (renamed_arg) in every type field (renamed_types); the others keep the spec's spelling (a dtype variable `T`).
    docs/reference/names.md §1. Found by printing the class once with each parameter as a stand-in that meets
    nothing and reading the identifiers outside comments, string literals and member accesses
    (_CPP_COMMENT_OR_STRING). Every C++ printer of a whole class or its parts prints the result (to_cpp,
    methods_cpp, members_cpp, process_cpp); the entry instantiates the class by position, and the interpreter and
    the sync memo read the Kernel IR's own names, so only the C++ spelling changes. Raises IRError when `v_<name>_`
    is itself an identifier there."""
    if not k.tparams:
        return k
    text = repr(k)
    mark = _TPARAM_MARK
    while any(mark.format(i) in text for i in range(len(k.tparams))):
        mark = "z" + mark
    marks = {t: mark.format(i) for i, t in enumerate(k.tparams)}
    printed = CppPrinter(renamed_types(k, marks)).print_class()
    words = set(_CPP_WORD.findall(_CPP_COMMENT_OR_STRING.sub(" ", printed)))
    ren = {}
    for t in k.tparams:
        if t in words:
            if renamed_arg(t) in words:
                raise IRError(f"class {k.name}: template parameter {t} meets an identifier of its code, and so does "
                              f"{renamed_arg(t)}")
            ren[t] = renamed_arg(t)
    return renamed_types(k, ren) if ren else k
