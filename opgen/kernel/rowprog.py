"""Row programs: the instruction-level Kernel IR of opgen's row-wise vector kernels.

A row program is what one kernel does per row of its anchor domain, on fp32 UB rows: AscendC-level
instructions (Cast, Add/Sub/Mul/Div/Max/Min, Adds/Muls/Maxs/Mins, Exp/Ln/Sqrt/Rsqrt/Abs/Reciprocal, Duplicate,
ReduceSum / ReduceMax, accumulate, C++ scalar expressions) over operands in five *spaces* (row: one fp32 UB row
per row; stat: one fp32 scalar per row; brow: one UB row per batch; col: one UB row for the whole kernel;
scalar: constants and runtime attributes; the head-row kernels add table rows). The rows family builds them
(opgen.kernel.rows, on the layouts of opgen.kernel.rowlayout), the head-row kernels per part
(opgen.kernel.headrows); both share the scheduling and the buffer assignment here: greedy list scheduling,
row temporaries allocated by liveness (an operand that dies is overwritten in place, which the count-form
vector instructions allow), brow/col values and accumulators one buffer each. Every row reduction (a row sum
or row max) has a *level* (how many row reductions it depends on), so a kernel that splits the row over cores
knows how many cross-core exchanges a row needs and which instructions each exchange phase runs.

Reference facts: docs/reference/ascendc.md §1.5 (TQue/TBuf), §1.9 (count-form vector instructions, in-place
operands, Cast round modes); docs/reference/ada_layer_norm.md §1.2-§1.3 (fp32 inside).
`verify_program` checks def-before-use, the temporaries' range and the GM operands named;
`print_program` is the canonical text (`opgen graph --stage kernel`): per instruction its space, level
and the COL_SPLIT phases that run it (P<level> = the exchange of that level's row reductions, F = final), and
with locs=True the spec line it was lowered from (`Instr.loc`, kept by every pass here: copies of instructions
are made with opgen.ir.records.evolve; opgen.ir.locs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from opgen.errors import IRError
from opgen.ir.locs import at_suffix
from opgen.ir.records import evolve
from opgen.kernel.isa import INSTRS, Cost, Op, Pipe, entry

SPACES = ("row", "stat", "brow", "col", "scalar", "seg")
VECTOR_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "maximum": "Max", "minimum": "Min"}
VECTOR_UNARY = {"exp": "Exp", "log": "Ln", "sqrt": "Sqrt", "rsqrt": "Rsqrt", "abs": "Abs", "recip": "Reciprocal"}
SCALAR_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
SCALAR_MINMAX = {"maximum": ">", "minimum": "<"}
SCALAR_UNARY = {"sqrt": "Std::sqrt({})", "rsqrt": "1.0f / Std::sqrt({})", "neg": "-{}", "abs": "Std::abs({})",
                "recip": "(1.0f / {})"}
"""Per-row and scalar unary ops as C++ on the AIV scalar unit: AscendC::Std::sqrt / Std::abs (device code has no
std::, docs/reference/ascendc.md §1.4). The scalar unit has no exp or log: those are vector instructions on rows
only (lower_elementwise raises IRError for a per-row or scalar exp / log)."""
VECTOR_ONLY = tuple(op for op in VECTOR_UNARY if op not in SCALAR_UNARY)
"""Unary ops the scalar unit has no form of (exp, log): a per-row one is taken on its value broadcast to the row
when only row values read it (opgen.kernel.rows), else by the vector instruction on 8 lanes holding the value
(`sunary`, docs/design.md "Per-row values the scalar unit cannot compute"); a scalar one (of attributes only) is
refused."""
ROW_REDUCE = ("rsum", "rmax")
"""Instruction kinds that reduce a row to a per-row scalar (their results have a level, module docstring)."""
VECTOR_SPACES = ("row", "brow", "col", "table")
"""Spaces whose values are UB rows (vector operands); "table" is a head-row kernel's RoPE table row
(opgen.kernel.headrows)."""
NO_INPLACE = ("vgather", "vcmp", "vcmps", "vcmpsh", "vwiden", "vnarrow")
"""Instruction kinds whose destination must not be one of their sources (Gather permutes lanes; a compare writes a
bit mask of another element size over the row it reads; a widening Cast writes wider lanes over the narrow ones it
reads)."""
BYTE_DTYPES = ("bool", "u8", "i8")
"""IR dtypes of one byte per element (a bool tensor is 0 / 1 bytes, read as uint8_t): their rows reach fp32 through a
half temporary (there is no uint8 / int8 -> float Cast, docs/reference/ascendc.md §1.12): `cast_in` with op "half"
then `vwiden`. A byte output is stored from fp32 through half the same way back: `vnarrow` (fp32 -> half with CAST_ODD)
then `store` with op "half" (half -> int8 / uint8 with the output's round mode, saturating, §1.12)."""
MASK_KINDS = ("vcmp", "vcmps", "vcmpsh", "vlogic")
"""Kinds whose result is a bit mask (bit i of byte i / 8 for lane i, in an fp32 row temporary's bytes; AscendC
Compare / Compares; And / Or / Not of masks as uint16 words, docs/reference/ascendc.md §1.9): only a select or
mask logic reads it."""
SELECT_KINDS = ("vsel", "vsels")
"""Kinds that read a bit mask (srcs[0]) and choose per lane between srcs[1] and srcs[2] or the scalar arg."""
CMP_OPS = {"lt": "LT", "le": "LE", "gt": "GT", "ge": "GE", "eq": "EQ", "ne": "NE"}
"""AscendC's CMPMODE of each comparison op of the IR (opgen.ir.ops)."""
CMP_SWAP = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE", "EQ": "EQ", "NE": "NE"}
"""The mode of the comparison with its operands swapped (s < x is x > s), for Compares' scalar-second form."""
SCALAR_ARG_KINDS = ("sexpr", "sunary", "vscalar", "vaxpy", "vlane", "vdup", "viota", "vcmps", "vcmpsh", "vsels", "vseg")
"""Kinds whose `arg` is a C++ float expression over scalar names (renamed and scanned for uses with the operands)."""
MASK_LANES = 64
"""Lanes a compare or select covers per 256-B repeat of fp32: their counts are rounded up to a multiple of it (whole
repeats, docs/reference/ascendc.md §1.9), and a kernel using them zero-fills its row temporaries once so the lanes
past the row are written (opgen.kernel.rowsched)."""
ROUND_MODES = {m: f"CAST_{m.upper()}" for m in ("none", "rint", "round", "floor", "ceil", "trunc", "odd")}
"""AscendC's RoundMode enumerator of each round mode of the IR's cast (opgen.ir.ops.ROUND_MODES)."""
KIND_OPS = {"cast_in": Op.CAST_FROM, "vaxpy": Op.AXPY, "vdup": Op.DUPLICATE, "viota": Op.CREATE_VEC_INDEX, "vgather": Op.GATHER, "acc": Op.ADD, "store": Op.CAST_TO,
            "vcmp": Op.COMPARE, "vcmps": Op.COMPARE_SCALAR, "vcmpsh": Op.COMPARE_SCALAR, "vsel": Op.SELECT, "vsels": Op.SELECT_SCALAR,
            "vwiden": Op.CAST, "vnarrow": Op.CAST}
LOGIC_OPS = {"And": Op.AND, "Or": Op.OR, "Not": Op.NOT}
"""The table entry of each `vlogic` op."""
"""The instruction-table entry (opgen.kernel.isa) of each kind printed as one table instruction; vbin, vscalar and
vunary name theirs in `Instr.op` (the AscendC name: "Add", "Muls", "Exp", ...)."""
TABLE_KINDS = ("vbin", "vscalar", "vunary")
"""Kinds whose table entry is `Instr.op`."""
ACC_KINDS = ("sum", "mean", "max", "min")
"""What a reduction over rows computes (the IR reduce kinds of opgen.ir.ops): a sum, a mean (an accumulated sum
divided by the count of rows it summed once it is complete: RowProgram.acc_post), a maximum or a minimum
(RowProgram.acc_kinds)."""
ACC_OPS = {"sum": "", "mean": "", "max": "Max", "min": "Min"}
"""The combining instruction of each accumulator kind (`Instr.op` of its `acc`: "" is Add), also used to combine
the cross-core partials, so every core and the exchange apply the same operation."""
ACC_INIT = {"sum": "0.0f", "mean": "0.0f", "max": "-__builtin_inff()", "min": "__builtin_inff()"}
"""The C++ fp32 value an accumulator of each kind starts from: the identity of its combining op (-inf for a
maximum, +inf for a minimum: `__builtin_inff` is the compiler built-in both g++ and the device compiler (Clang-based)
provide; device code has no std::numeric_limits, docs/reference/ascendc.md §1.4)."""


def var_bindings(spec, of=lambda d: d) -> dict:
    """{dtype variable: the set of of(its binding) over the rows of `spec`'s dtype table} ({} without a table):
    what opgen.kernel.rows.half_variables (of = dtype_name) and a class's byte-size-fixed template parameters
    (opgen.kernel.rowclass, of = itemsize) read."""
    return {c.name: {of(r[c.name]) for r in spec.dtype_rows} for c in spec.dtype_table if spec.dtype_rows}


def lane_acc(i) -> bool:
    """Whether instruction `i` is a one-lane accumulate (an `acc` with a column index as `arg`): one element of the
    accumulator updated by the scalar unit, no vector instruction (docs/design.md "Kernel families", one-lane
    updates)."""
    return i.kind == "acc" and bool(i.arg)


def instr_op(i) -> Op | None:
    """The instruction-table entry printed for row-program instruction `i` (opgen.kernel.isa), None for the kinds
    printed otherwise (GM loads and stores of stats, row reductions, scalar expressions, a one-lane accumulate).
    Raises KeyError for an `op` the table does not hold."""
    if lane_acc(i):
        return None
    if i.kind in ("cast_in", "store") and i.op == "half":
        return Op.CAST
    if i.kind == "vlogic":
        return LOGIC_OPS[i.op]
    if i.kind in TABLE_KINDS or i.kind == "acc" and i.op:
        return entry(i.op).op
    return KIND_OPS.get(i.kind)


def is_vector(i) -> bool:
    """Whether instruction `i` is printed as a vector (PIPE_V) instruction: its table entry's pipe
    (docs/reference/ascendc.md §1.6)."""
    op = instr_op(i)
    return op is not None and INSTRS[op].pipe is Pipe.V


def vector_cost(instrs, n: int) -> Cost:
    """Cost of one pass of row-program instructions `instrs` over rows of `n` elements: the sum of their instruction-
    table costs (opgen.kernel.isa.InstrDef.cost; fp32 operands, a row reduction as ReduceSum / ReduceMax;
    docs/reference/ascendc.md §1.9). Instructions off the vector pipe cost nothing here. Raises ValueError for a
    negative n."""
    rep = cyc = 0
    for i in instrs:
        op = {"rsum": Op.REDUCE_SUM, "rmax": Op.REDUCE_MAX}.get(i.kind) or instr_op(i)
        if op is None or INSTRS[op].pipe is not Pipe.V:
            continue
        c = INSTRS[op].cost(n, 4)
        rep, cyc = rep + c.repeats, cyc + c.cycles
    return Cost(rep, cyc)


VECTOR_KINDS = tuple(k for k in ("cast_in", "vwiden", "vnarrow", *TABLE_KINDS, "vdup", "viota", "vgather", *MASK_KINDS, *SELECT_KINDS, "acc",
                                  "store")
                     if k in TABLE_KINDS or k == "vlogic" or INSTRS[KIND_OPS[k]].pipe is Pipe.V)
"""Instruction kinds printed as vector (PIPE_V) instructions (their table entries' pipe). The vector pipe issues in
order but does not complete in order, so a dependent vector instruction must wait (docs/reference/ascendc.md §1.6):
the dependency pass (opgen.kernel.kir_sync) puts PipeBarrier<PIPE_V>() before one only where an operand depends; the
emitted packages use manual sync."""


@dataclass(frozen=True)
class GmTensor:
    """One GM operand of the kernel: an operator input or output seen through one view. name: the operand (the
    tensor's name, or <tensor>_view<k> for a further view of it); role "in" | "out"; space (the layout's, or "elem":
    a row input of which only elements are read, by `sgather` at the current row's offset plus an index, so no row
    of it is copied in; opgen.kernel.rowalg._after_gathers); IR dtype name ("T",
    "U" for dtype variables, "f32", ...); view: its addressing (opgen.kernel.rowlayout.View; None in head-row
    programs, whose row maps address it); tensor: the spec input/output name ("" = name)."""

    name: str
    role: str      # "in" | "out"
    space: str
    dtype: str
    view: object = None
    tensor: str = ""

    @property
    def gm(self) -> str:
        """The spec input/output this operand reads or writes."""
        return self.tensor or self.name


def gathered_stat(t: GmTensor) -> bool:
    """Whether per-row input `t` is read row by row (the scalar unit reads GM at each row's view offset and converts
    to float) rather than copied as one block in row order (in its own type: fp32, f16 / bf16 values, int32 / int64
    indices): an input over some of the leading axes (a per-channel weight [C] of rows [N, C]: stride 0 along N)."""
    if t.role != "in" or t.space != "stat" or t.view is None:
        return False
    return not getattr(t.view, "flat", True)


@dataclass(frozen=True)
class Instr:
    """One Kernel-IR instruction.

    kind        meaning (n = the row's element count, all UB operands fp32)
    load        dst (brow/col buffer) <- GM tensor `gm` (its batch row or the whole row), cast to fp32 (op "half": a
                byte tensor's row cast to half, the buffer holding halves, widened by a vwiden; BYTE_DTYPES)
    cast_in     dst (row temp) <- the current row of GM tensor `gm`, cast to fp32 (op "half": a byte tensor's row
                cast to half, the row temp holding halves; BYTE_DTYPES)
    vwiden      dst = srcs[0]'s halves cast to fp32           (Cast; never in place; op "bf16" / a dtype variable:
                                                             srcs[0] holds that 16-bit type)
    vnarrow     dst (halves) = srcs[0] cast to half with CAST_ODD  (Cast; never in place; a byte output's first step;
                op a 16-bit type and arg its round mode: a row value rounded inside the row, rows._Lowering.round_trip)
    vbin        dst = srcs[0] <op> srcs[1]                   (AscendC Add/Sub/Mul/Div/Max/Min, count n)
    vscalar     dst = srcs[0] <op> scalar arg                (Adds/Muls)
    vaxpy       dst = srcs[0] + srcs[1] * scalar arg         (Axpy: dst is srcs[0]'s buffer, srcs[0] dies here;
                                                              rowalg.fuse_axpy)
    vseg        dst = srcs[0] <op> the value of each segment of the row (op Muls / Adds / Subs; GM operand `gm`
                of space "seg": one value per segment of seglen columns, rowlayout.SegView; printed as a loop
                over the segments the row or chunk covers, opgen.codegen.kernel); with a non-empty arg, the
                scalar applied to a segment is that C++ float text, over per-row scalars and `segv_<name>`, the
                segment's value of seg GM operand <name> (seg_value_name; rowalg.fold_affine_chains)
    vlane       dst = srcs[0] with one lane changed: lane srcs[1] - c0_ (srcs[1] a checked per-row index, the row's
                lanes holding columns c0_ ..) plus scalar arg, read, added and written back by the scalar unit where
                the row's lanes hold that column (dst is srcs[0]'s buffer, srcs[0] dies here;
                rowalg.one_lane_updates)
    vunary      dst = op(srcs[0])                            (Exp/Ln/Sqrt/Rsqrt/Abs/Relu)
    vdup        dst = scalar arg broadcast                   (Duplicate)
    viota       dst lane j = scalar arg + j                  (CreateVecIndex; arg the first column's index)
    vgather     dst = srcs[0] with its lanes permuted by the UB offset table `arg`  (Gather; never in place)
    vcmp        mask dst = srcs[0] <op> srcs[1]               (Compare, op a CMPMODE "GT"...; never in place)
    vcmps       mask dst = srcs[0] <op> scalar arg            (Compares)
    vcmpsh      mask dst = srcs[0] <op> scalar arg, srcs[0] holding halves (Compares on half, 128 lanes a repeat;
                rowalg.compare_before_widening)
    vlogic      mask dst = And / Or of masks srcs, Not of srcs[0]  (op; on the masks as uint16 words)
    vsel        dst = mask srcs[0] ? srcs[1] : srcs[2]       (Select, VSEL_TENSOR_TENSOR_MODE)
    vsels       dst = mask srcs[0] ? srcs[1] : scalar arg    (Select, VSEL_TENSOR_SCALAR_MODE)
    rsum        scalar dst = sum of srcs[0] over the row     (ReduceSum; partial per core in COL_SPLIT)
    rmax        scalar dst = max of srcs[0] over the row     (ReduceMax; partial per core in COL_SPLIT)
    sexpr       scalar dst = C++ float expression arg over scalar names
    sunary      scalar dst = op(scalar arg) on the vector unit (the value Duplicated over 8 lanes, op in place, lane 0
                read by the scalar unit: Ln / Exp / ..., which the scalar unit has not;
                opgen.kernel.rowalg.gather_through_lanewise)
    sload       scalar dst = GM stat tensor `gm` at this row (an int32 / int64 index converted to fp32)
    scheck      Trap() unless 0 <= scalar srcs[0] < the row length (an index into the row, checked on the scalar unit)
    sgather     scalar dst = element srcs[0] of the column row of GM input `gm` (space "col": the element at the
                column index a checked per-row index holds, read by the scalar unit and converted to fp32;
                opgen.kernel.rowalg.gather_column_inputs), or of the current row of GM input `gm` (space "row":
                the row's offset plus the index; opgen.kernel.rowalg.gather_through_lanewise)
    acc         accumulator dst += srcs[0]                   (brow: per batch, col: per kernel; op "Max" / "Min":
                                                             dst = Max / Min(dst, srcs[0]), RowProgram.acc_kinds)
                with arg a column index (integer text, `lane_acc`): lane arg - c0_ of column accumulator dst += the
                per-row scalar srcs[0], read, added and written back by the scalar unit where the accumulator's
                lanes hold that column (a per-row value summed over the rows: rows._Lowering.stat_total)
    store       GM row tensor `gm` <- srcs[0] cast to its dtype with round mode arg (op "half": srcs[0] holds halves,
                cast to the byte dtype; BYTE_DTYPES)
    sstore      GM stat tensor `gm` <- scalar srcs[0] cast with round mode arg

    `when` (a program serving several presences of the spec's optional inputs, opgen.kernel.rowpresence) is the
    tuple of presences (one bool per optional input, in spec order) under which the instruction runs; () = always.
    `loc` ("file.py:28", not compared) is the spec line of the tensor-IR node it was lowered from: a load's is the
    cast / view that made the loaded value, a store's the node producing the output.
    """

    kind: str
    dst: str = ""
    srcs: tuple[str, ...] = ()
    op: str = ""
    arg: str = ""
    gm: str = ""
    space: str = "row"
    level: int = 0
    phases: tuple = ()   # COL_SPLIT phases that execute it: row-sum levels it feeds, and -1 (the final phase)
    passes: tuple = ()   # a two-pass kernel's passes over the rows that execute it (1, 2; assign_row_passes)
    when: tuple = ()     # the presences of the optional inputs it runs under (opgen.kernel.rowpresence); () = always
    loc: str = field(default="", compare=False)   # spec file:line of the tensor-IR value it was lowered from


MAX_DIM_VALUES = 8
"""Distinct dim expressions a rows kernel may read as numbers besides its layout's extents (RowProgram.dim_values;
members dimValue0_ .., opgen.kernel.rowclass.DIM_VALUE_MEMBERS)."""


@dataclass
class RowProgram:
    """A lowered row kernel: GM tensors, instructions in execution order, and the UB buffers they use.

    row_temps: number of fp32 row temporaries (w0..); brow/col: names of per-batch / per-kernel fp32 UB
    rows (values and accumulators); accs: {accumulator: (space, output name, round mode)}; acc_kinds:
    {accumulator: "max"} for those that are not sums (ACC_KINDS); acc_post: {accumulator: finishing
    instructions} run once on the complete accumulator before it is stored (a mean's division by the count of rows,
    `x.sum(0) / M`): vector instructions over its row `x` and a scratch row `t`; acc_reads: the column
    accumulators per-row arithmetic reads (complete only after the last row: the kernel then runs two passes over
    the rows, `row_passes`); late: the column values computed from those once complete (after the exchange,
    before the second pass); late_stores: [(late value, output operand, round mode)]; btotals: [(float member, source, kind)] the
    per-batch values, computed in order at each new batch of the second pass: kind "sum" / "max" a total (the
    per-batch accumulator `source` read back complete and reduced over its columns, opgen.kernel.rows
    `batch_total`), kind "expr" the C++ float text `source` over earlier ones; batch_stores: `bstore` instructions (arg: the C++ float
    text of a per-batch value, op: round mode, gm: the output) run at each new batch by the core holding its first
    row; levels: number
    of row-sum levels (cross-core exchanges per row group when H is split over cores); dim_values: the dim
    expressions that are not an extent of the layout but are read as numbers (KL's batchmean `s / N`): k-th is the
    int64 member `dimValue<k>_` of the kernel, set in Init from its tiling field (opgen.kernel.rowclass.DimFields);
    gm_scalars: [(float member, GM operand)] of the inputs holding one value (space "one": a loss gradient's dout),
    each read once in Init by the scalar unit and used as a scalar operand (opgen.kernel.rows `_load_one`)."""

    name: str
    layout: object   # opgen.kernel.rowlayout.RowLayout (head-row programs: their HeadLayout)
    gm: list[GmTensor] = field(default_factory=list)
    instrs: list[Instr] = field(default_factory=list)
    row_temps: int = 0
    brow: list[str] = field(default_factory=list)
    col: list[str] = field(default_factory=list)
    accs: dict = field(default_factory=dict)
    acc_kinds: dict = field(default_factory=dict)
    acc_post: dict = field(default_factory=dict)
    acc_reads: list = field(default_factory=list)
    late: list = field(default_factory=list)
    late_stores: list = field(default_factory=list)
    levels: int = 0
    consts: list = field(default_factory=list)   # predefined UB operands (head-row kernels: slots, lane tables)
    btotals: list = field(default_factory=list)   # [(float member, accumulator or C++ text, kind)]: per-batch values
    batch_stores: list = field(default_factory=list)   # Instr("bstore"): per-batch values written once per batch
    dim_values: list = field(default_factory=list)   # dim expressions read as numbers: member dimValue<k>_ each
    int_cast_modes: dict = field(default_factory=dict)   # input -> (non-rint mode of a cast on its load chain, loc)
    presence: tuple = ()   # the optional inputs whose presence Instr.when tests (opgen.kernel.rowpresence)
    served: tuple = ()     # the presences (one bool per `presence` name) the joined program serves
    bnames: dict = field(default_factory=dict)   # per-batch float member -> (its tensor-IR value, spec line): messages
    gm_scalars: list = field(default_factory=list)   # [(float member, GM operand)]: single-value inputs set in Init

    def tensor(self, name: str) -> GmTensor:
        """The GM tensor `name`. Raises KeyError."""
        for t in self.gm:
            if t.name == name:
                return t
        raise KeyError(name)

    def rsums(self, level: int | None = None) -> list[Instr]:
        """The row reductions (row sums and row maxima; of one level when given), in program order."""
        return [i for i in self.instrs if i.kind in ROW_REDUCE and (level is None or i.level == level)]


def _scalar_expr(ctx, op: str, ins: list) -> str | None:
    """C++ text of elementwise `op` of per-row or single values `ins` on the AIV scalar unit (SCALAR_BINARY,
    SCALAR_MINMAX, SCALAR_UNARY), or None when the scalar unit has no form of it."""
    texts = [ctx.scalar_text.get(i, ctx.operand(i)) for i in ins]
    if op in SCALAR_BINARY:
        return f"({texts[0]} {SCALAR_BINARY[op]} {texts[1]})"
    if op in SCALAR_MINMAX:
        return f"({texts[0]} {SCALAR_MINMAX[op]} {texts[1]} ? {texts[0]} : {texts[1]})"
    if op in SCALAR_UNARY:
        return SCALAR_UNARY[op].format(texts[0])
    return None


def lower_elementwise(ctx, r, sp, op, ins) -> None:
    """Append the instructions of elementwise op `op` with result `r` in space `sp` to ctx.p.instrs.

    ctx provides `space` ({operand: space}), `scalar_text` ({scalar operand: C++ text}), `operand(name)`
    (the buffer-level name of a value) and `p` (the RowProgram being built); `ins` are the operands' names.
    Stat/scalar results become C++ float expressions; vector results AscendC instructions (a scalar operand
    of add/mul/sub folds into Adds/Muls; div/max/min broadcast it with Duplicate first: x / s is not
    x * (1 / s) in IEEE). Raises IRError for an op without a lowering."""
    emit = ctx.p.instrs.append
    if sp in ("stat", "scalar"):
        expr = _scalar_expr(ctx, op, ins)
        if expr is None and op in VECTOR_ONLY and sp == "stat":   # the vector instruction on 8 lanes (sunary)
            emit(Instr("sunary", r, op=VECTOR_UNARY[op], arg=ctx.scalar_text.get(ins[0], ctx.operand(ins[0])),
                       space="stat"))
            return
        if expr is None and op in ("exp", "log"):
            raise IRError(f"row kernel: a {'per-row' if sp == 'stat' else 'scalar'} {op} (%{r}): the AIV scalar unit "
                          f"has no {op} (docs/reference/ascendc.md §1.4); take the {op} of a row instead (broadcast the value to "
                          f"the row's shape first: v.broadcast_to(shape), a Duplicate)")
        if expr is None:
            raise IRError(f"row kernel: scalar {op} (%{r}) is not supported")
        if sp == "scalar":
            ctx.scalar_text[r] = expr
        else:
            emit(Instr("sexpr", r, arg=expr, space="stat"))
        return
    vec = [i for i in ins if ctx.space[i] in VECTOR_SPACES]
    sca = [i for i in ins if ctx.space[i] in ("stat", "scalar")]
    if op in VECTOR_UNARY:
        src = ctx.operand(ins[0])
        if ctx.space[ins[0]] in ("stat", "scalar"):   # a per-row value broadcast to the row: Duplicate it first
            emit(Instr("vdup", f"dup_{r}", arg=ctx.scalar_text.get(ins[0], src), space=sp))
            src = f"dup_{r}"
        emit(Instr("vunary", r, (src,), VECTOR_UNARY[op], space=sp))
        return
    if op == "neg":
        if ctx.space[ins[0]] in ("stat", "scalar"):   # a per-row or single value broadcast to the row, negated
            emit(Instr("vdup", r, arg=f"-({ctx.scalar_text.get(ins[0], ctx.operand(ins[0]))})", space=sp))
            return
        emit(Instr("vscalar", r, (ctx.operand(ins[0]),), "Muls", "-1.0f", space=sp))
        return
    if op not in VECTOR_BINARY:
        raise IRError(f"row kernel: op {op} (%{r}) has no vector lowering")
    if len(vec) == 2:
        emit(Instr("vbin", r, (ctx.operand(ins[0]), ctx.operand(ins[1])), VECTOR_BINARY[op], space=sp))
        return
    if not vec:   # two per-row or single values into a row (a broadcast scalar times a constant): the scalar unit's
        expr = _scalar_expr(ctx, op, ins)   # value, Duplicated over the row
        if expr is None:
            raise IRError(f"row kernel: {op} of two scalars into a row (%{r}) is not supported")
        emit(Instr("vdup", r, arg=expr, space=sp))
        return
    s = ctx.scalar_text.get(sca[0], ctx.operand(sca[0]))
    a = ctx.operand(vec[0])
    vec_first = ins[0] == vec[0]
    if op == "add":
        emit(Instr("vscalar", r, (a,), "Adds", s, space=sp))
    elif op == "mul":
        emit(Instr("vscalar", r, (a,), "Muls", s, space=sp))
    elif op in ("maximum", "minimum"):
        emit(Instr("vscalar", r, (a,), "Maxs" if op == "maximum" else "Mins", s, space=sp))
    elif op == "sub" and vec_first:
        emit(Instr("vscalar", r, (a,), "Adds", f"-({s})", space=sp))
    elif op == "sub":
        emit(Instr("vscalar", f"neg_{r}", (a,), "Muls", "-1.0f", space=sp))
        emit(Instr("vscalar", r, (f"neg_{r}",), "Adds", s, space=sp))
    else:  # div and max/min with a scalar: broadcast it first (x / s is not x * (1/s) in IEEE)
        emit(Instr("vdup", f"dup_{r}", arg=s, space=sp))
        pair = (a, f"dup_{r}") if vec_first else (f"dup_{r}", a)
        emit(Instr("vbin", r, pair, VECTOR_BINARY[op], space=sp))


def lower_row_reduce(ctx, r: str, src: str, kind: str, count: str) -> None:
    """Append the instructions of a reduction of row operand `src` over the row (its `count` elements: C++ int64 text
    of the row's length, a member or tiling field) with per-row result `r` to ctx.p.instrs (ctx: lower_elementwise's
    protocol): kind "max" one `rmax` (ReduceMax); "sum" / "mean" one `rsum` (ReduceSum) into sum_<r> and the `sexpr`
    r = sum_<r> (/ count for a mean: the fp32 sum divided by the row's length, as CANN's reductions divide). Sets
    ctx.space[r] = "stat". The one reduction lowering of the row programs: the rows family's row reductions
    (opgen.kernel.rows) and the cube family's epilogue (opgen.kernel.cube) both call it. Raises IRError for another
    kind (a row minimum is rewritten as -max(-x) before: opgen.kernel.rowmerge.min_as_max)."""
    ctx.space[r] = "stat"
    if kind == "max":
        ctx.p.instrs.append(Instr("rmax", r, (src,), space="stat"))
        return
    if kind not in ("sum", "mean"):
        raise IRError(f"row kernel: a row {kind} (%{r}): the row reductions are the sum, the mean and the maximum")
    ctx.p.instrs.append(Instr("rsum", f"sum_{r}", (src,), space="stat"))
    arg = f"sum_{r} / static_cast<float>({count})" if kind == "mean" else f"sum_{r}"
    ctx.p.instrs.append(Instr("sexpr", r, arg=arg, space="stat"))


BATCH_KINDS = ("cast_in", "vbin", "vscalar", "vaxpy", "vunary", "vdup", "store", "vwiden", "vnarrow", *MASK_KINDS,
               *SELECT_KINDS)
"""Kinds ROW_SPLIT may issue once over all rows of a pass (`batched`): elementwise over the rows' lanes (fp32, or
halves and bit masks packed densely: lane j of the pass's row i is lane i * colAlign + j of the packed value too)."""
NO_BATCH_KINDS = ("viota", "vgather", "vseg")
"""Kinds whose lanes depend on the column or on a per-row layout (an index per column, a permutation, a per-segment
value): a program holding one runs row by row (a viota of a column row excepted: computed once per column chunk,
read as a column row, `batchable`)."""
PER_ROW_SCALAR_KINDS = ("sexpr", "sunary", "sload", "scheck", "sgather", "rsum", "rmax")
"""Kinds whose result is a per-row scalar (one value for each row: read on the scalar unit row by row)."""


def packed(i: Instr) -> bool:
    """Whether instruction `i` writes or reads a value packed densely in another element size than fp32 (a bit mask:
    MASK_KINDS, SELECT_KINDS; halves: vwiden, vnarrow, a byte row's cast_in / store through half, BYTE_DTYPES). Lane j
    of a packed value over n lanes lies at bit / half j of the buffer: a value packed over all rows of a pass and one
    packed row by row place a row's lanes differently, so producer and reader run in the same mode (`batchable`)."""
    return i.kind in MASK_KINDS or i.kind in SELECT_KINDS or i.kind in ("vwiden", "vnarrow") or i.op == "half"


def batchable(p: RowProgram) -> bool:
    """Whether ROW_SPLIT runs row program `p` with its row temporaries [rowsPerPass, colAlign] (one fp32 UB row per
    row of the pass, rows colAlign elements apart as the queues hold them) so that its elementwise row instructions
    (`batched`) cover every row of the pass with one instruction of count k * colAlign (docs/design.md, the rows
    family: many rows per instruction). Not for a program with a kind of NO_BATCH_KINDS, nor for one with per-batch
    rows (`brow`) that also reads reductions over rows in a second pass or keeps per-batch values (acc_reads,
    btotals: their bookkeeping runs once per row); a one-pass program with per-batch rows runs a pass's rows of one
    batch at a time (opgen.kernel.rowsched `_batch_runs`: the batch bookkeeping once a run, the batch rows read as
    column rows are). A program with packed values (`packed`: masks, halves) is batchable when
    every packed instruction is issued over all rows: each is `batched` and none lies inside the live range of a
    per-row scalar that a per-row loop holds (a row reduction read row by row, an index check, a scalar of those:
    opgen.kernel.rowclass._Printer.batch_segments keeps the instructions between its definition and its last use in
    one per-row loop), so no packed value is written in one mode and read in the other; a compare of a column row by
    a per-row scalar and the selects reading its mask (`row_scalar_chain`) are exempt, the printer issuing them
    together eight rows a repeat or row by row (a compare of a row temporary by one is not: `row_scalar_chain`). A byte row is read with a 32-byte-aligned row stride (colAlign a multiple of
    MASK_LANES, opgen.kernel.rowcounts `masks`)."""
    if any(i.kind in NO_BATCH_KINDS and not (i.kind == "viota" and i.space == "col") for i in p.instrs):
        return False
    if p.brow and (p.acc_reads or p.btotals or p.batch_stores):
        return False
    rows = [i for i in p.instrs if per_row(i)]
    if not any(packed(i) for i in rows):
        return True
    chain = row_scalar_chain(p)
    if chain is None:
        return False
    if any(packed(i) and not batched(i, p) and id(i) not in chain for i in rows):
        return False
    remat = _remat_scalars(rows)
    held = {i.dst: k for k, i in enumerate(rows) if i.kind in PER_ROW_SCALAR_KINDS and i.dst not in remat}
    last = {x: k for k, i in enumerate(rows) for x in _names_in(i) if x in held}
    return not any(packed(i) and id(i) not in chain and any(held[x] < k < last[x] for x in last)
                   for k, i in enumerate(rows))


def _remat_scalars(rows: list) -> set:
    """The per-row scalars of `rows` every per-row loop can compute again from UB: a statistic, and a scalar
    expression, an index check (scheck: its Trap() repeated) or a GM element at an index (sgather: GM read again) of
    those and of non-per-row values."""
    defs = _scalar_defs(rows)
    remat: set = set()
    for i in rows:
        if i.kind == "sload" or (i.kind in ("sexpr", "sunary", "scheck", "sgather") and all(x in remat or x not in defs
                                                                       for x in _names_in(i))):
            remat.add(i.dst)
    return remat


def row_scalar_chain(p: RowProgram) -> dict | None:
    """The compares by a per-row scalar of program `p` and the selects reading their masks: {id(instruction): id of
    its compare} (a compare maps to itself); None when such a mask cannot be issued over many rows. A row-scalar
    compare is a Compares (`vcmps`) of a column row whose scalar reads a per-row value (a lane index against each
    row's target: opgen.kernel.rows gather / scatter_add); its mask must be read by tensor-scalar selects (`vsels`)
    only, each of a row temporary or a column row and a scalar reading no per-row value. Over many rows the chain
    runs eight rows a repeat (opgen.kernel.rowclass._Printer `_block_mask_nodes`: the per-row scalars broadcast by
    Brcb, Compare and Select in their mask / repeat forms, the mask laid out by repeat as the compare writes it and
    the select consumes it) or row by row; its compare and selects always run the same way, so the mask is read as
    it was written.

    A compare of a row temporary by a per-row scalar (ArgMax's x >= max_x) gives None: Compare reads every lane of
    a repeat (its mask is reserved on A2 / A3), so row by row over the packed rows it reads the row's padding lanes
    [n, align8(n)) that share a mask byte with its last lanes (DataCopyPad leaves them unwritten: garbage on the
    device, poison in the emulation, tests/test_rows_rowscalar.py's ArgMax at N 1000 x H 33 and 3 x 1), and eight
    rows a repeat it reads all 8 rows of the last group, past the k rows of the pass (past the buffer, or into
    another operand's region). A column row is one UB row for every row, whose lanes past n are written once
    (`zero_fill`), so neither form reads an unwritten lane. Such programs run row by row (their row in a scratch
    row of AlignUp(n, 64) lanes written whole), as before the chain."""
    per = {j.dst for j in p.instrs if j.kind in PER_ROW_SCALAR_KINDS}
    plain = lambda x: (x.startswith("w") and x[1:].isdigit()) or x in p.col  # noqa: E731
    rows = [i for i in p.instrs if per_row(i)]
    out: dict = {}
    writer: dict = {}   # buffer name -> the instruction last writing it (names are buffers after allocation)
    for i in rows:
        for x in i.srcs:
            w = writer.get(x)
            if w is None or out.get(id(w)) != id(w):   # not a row-scalar compare's mask
                continue
            if i.kind != "vsels" or i.srcs[0] != x or len(i.srcs) != 2 or not plain(i.srcs[1]) \
                    or set(_names_in(i)[2:]) & per:
                return None
            out[id(i)] = id(w)
        if i.kind == "vcmps" and i.space == "row" and len(i.srcs) == 1 and set(_names_in(i)[1:]) & per:
            if i.srcs[0] not in p.col:   # a row temporary: its padding and rows past k would be read (above)
                return None
            out[id(i)] = id(i)
        if i.dst:
            writer[i.dst] = i
    return out


def _scalar_defs(rows: list) -> set:
    """The per-row scalars (PER_ROW_SCALAR_KINDS) instructions `rows` define."""
    return {i.dst for i in rows if i.kind in PER_ROW_SCALAR_KINDS}


def batched(i: Instr, p: RowProgram) -> bool:
    """Whether instruction `i` of a `batchable` program is issued once over all rows of a ROW_SPLIT pass: an
    elementwise row instruction (BATCH_KINDS, space "row") whose vector operands are all row temporaries and whose
    scalar reads no per-row value (PER_ROW_SCALAR_KINDS). The lanes between a row's end and colAlign are computed too
    (from whatever they hold) and read by nothing else: row reductions count the row's own lanes, the output copy
    moves the row's own bytes."""
    if i.kind not in BATCH_KINDS or i.space != "row":
        return False
    if any(not (x.startswith("w") and x[1:].isdigit()) for x in i.srcs):
        return False
    per_row_values = {j.dst for j in p.instrs if j.kind in PER_ROW_SCALAR_KINDS}
    return not (i.kind in SCALAR_ARG_KINDS and set(_names_in(i)) & per_row_values)


def all_instrs(p: RowProgram) -> list[Instr]:
    """The program's instructions followed by its accumulators' finishing instructions (RowProgram.acc_post), its
    per-batch stores and per-batch values (RowProgram.batch_stores, btotals): every instruction whose scalar text
    the kernel evaluates (the attributes it reads)."""
    return (list(p.instrs) + [i for steps in p.acc_post.values() for i in steps] + list(p.batch_stores)
            + [Instr("sexpr", n, arg=src, space="bstat") for n, src, k in p.btotals if k == "expr"])


def assign_row_passes(p: RowProgram) -> None:
    """Mark the per-row instructions of the two passes over the rows of a program whose per-row arithmetic reads
    column accumulators (RowProgram.acc_reads; run on value names, before buffer assignment): `Instr.passes` holds 1
    for the ancestors of every accumulate (the first pass), 2 for the ancestors of every store (the second,
    reading those accumulators complete; each accumulate left out). An instruction both need (a load) runs in
    both. A subsequence closed under its operands keeps the buffer assignment valid (no instruction in it writes a
    buffer between a value's definition and its last use). Raises IRError when an accumulate itself depends on a
    read accumulator (a third pass)."""
    if not p.acc_reads:
        return
    instrs = p.instrs
    defs = {i.dst: k for k, i in enumerate(instrs) if i.dst and i.kind != "acc" and per_row(i)}

    def closure(roots: list[int]) -> set[int]:
        seen, stack = set(), list(roots)
        while stack:
            k = stack.pop()
            if k in seen:
                continue
            seen.add(k)
            stack += [defs[x] for x in _names_in(instrs[k]) if x in defs]
        return seen

    first = closure([k for k, i in enumerate(instrs) if i.kind == "acc"])
    second = closure([k for k, i in enumerate(instrs) if i.kind in ("store", "sstore")])
    reads = set(p.acc_reads) | set(p.late) | {n for n, _a, _k in p.btotals}
    for k in first:
        bad = next((x for x in _names_in(instrs[k]) if x in reads), None)
        if bad is not None:
            e = IRError(f"a reduction over rows of a value that reads the reduction over rows %{bad} while it is still "
                        f"being reduced (a third pass over the rows: write a variance as mean(x * x) - mean(x) ** 2)")
            e.value, e.loc = instrs[k].dst, instrs[k].loc   # where: the accumulate (rows.lower names it)
            raise e
    p.instrs = [evolve(i, passes=tuple(n for n, s in ((1, first), (2, second)) if k in s))
                for k, i in enumerate(instrs)]


def row_passes(p: RowProgram) -> tuple[list[Instr], list[Instr]]:
    """(the first pass's per-row instructions, the second's) of a two-pass program (assign_row_passes), in order."""
    rows = [i for i in p.instrs if per_row(i)]
    return [i for i in rows if 1 in i.passes], [i for i in rows if 2 in i.passes]


def attr_names(text: str) -> list[str]:
    """The runtime attributes a scalar C++ text of a row program reads (written attr_<name>), in order."""
    import re

    return re.findall(r"attr_([A-Za-z0-9_]+)", text or "")


def _float_literal(v) -> str:
    f = float(v)
    r = repr(f)
    if "inf" in r or "nan" in r:
        raise IRError(f"row kernel: non-finite constant {v}")
    if "e" not in r and "." not in r:
        r += ".0"
    return r + "f"


def _schedule(instrs: list[Instr]) -> list[Instr]:
    """Greedy list scheduling: among the ready instructions take the lowest level first (a row sum's
    users wait for it anyway), then the one that frees the most row temporaries and allocates the fewest (a
    value dies where no instruction running under the taker's presences reads it again, Instr.when), then one every
    presence runs (shared work before the guarded), then one running under the presences of the last one taken
    (one guard around a run), then graph order. Keeps the number of live fp32 rows (UB) small; any order it returns is topological."""
    defs = {i.dst: k for k, i in enumerate(instrs) if i.dst}
    deps = [{defs[x] for x in _names_in(i) if x in defs and defs[x] != k} for k, i in enumerate(instrs)]
    users: dict[int, set[int]] = {}
    for k, d in enumerate(deps):
        for j in d:
            users.setdefault(j, set()).add(k)
    row_vals = {k for k, i in enumerate(instrs) if i.space == "row" and i.kind not in ("store", "rsum", "acc")}
    done: set[int] = set()
    out: list[Instr] = []
    while len(done) < len(instrs):
        best, best_key = None, None
        for k, i in enumerate(instrs):
            if k in done or not deps[k] <= done:
                continue
            frees = sum(1 for j in deps[k] if j in row_vals   # its value dies here under i's presences
                        and all(u == k or _exclusive(instrs[u].when, i.when) for u in users.get(j, set()) - done))
            allocs = 1 if k in row_vals and not frees else 0
            key = (i.level, allocs - frees, bool(i.when), bool(out) and i.when != out[-1].when, k)
            if best_key is None or key < best_key:
                best, best_key = k, key
        done.add(best)
        out.append(instrs[best])
    return out


def names_in(i: Instr) -> list[str]:
    """The value names instruction `i` reads: its sources and the names in its scalar text (SCALAR_ARG_KINDS)."""
    return _names_in(i)


SEG_VALUE_PREFIX = "segv_"
"""A vseg's scalar text names the segment's value of seg GM operand g as SEG_VALUE_PREFIX + g (seg_value_name)."""


def seg_value_name(gm: str) -> str:
    """The name a vseg's scalar text gives the current segment's value of seg GM operand `gm`."""
    return SEG_VALUE_PREFIX + gm


def seg_values_in(i: Instr) -> list[str]:
    """The seg GM operands whose segment values vseg `i` reads, the scalar's own `i.gm` first (its arg's
    `segv_<name>` names, in order of first use; just i.gm for an empty arg)."""
    out = [i.gm]
    for x in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", i.arg or ""):
        if x.startswith(SEG_VALUE_PREFIX) and x[len(SEG_VALUE_PREFIX):] not in out:
            out.append(x[len(SEG_VALUE_PREFIX):])
    return out


def _names_in(i: Instr) -> list[str]:
    import re

    names = list(i.srcs)
    if i.kind in SCALAR_ARG_KINDS:
        names += [x for x in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", i.arg)
                  if not (i.kind == "vseg" and x.startswith(SEG_VALUE_PREFIX))]
    return names


def _assign_levels(p: RowProgram) -> None:
    """Level of every instruction: 0 unless it uses a row sum (directly or through scalars/temporaries);
    then 1 + the level of that row sum. p.levels = number of distinct row-sum levels."""
    level: dict[str, int] = {}
    out = []
    for i in p.instrs:
        lv = 0
        for x in _names_in(i):
            if x in level:
                lv = max(lv, level[x])
        if i.kind in ROW_REDUCE:
            level[i.dst] = lv + 1
        elif i.dst:
            level[i.dst] = lv
        out.append(evolve(i, level=lv, phases=()))
    p.instrs = out
    p.levels = len({i.level for i in out if i.kind in ROW_REDUCE})


def per_row(i: Instr) -> bool:
    """Whether `i` runs once per row (row and stat instructions, and accumulating a row into a sum)."""
    return i.space in ("row", "stat") or i.kind == "acc"


def _assign_phases(p: RowProgram) -> None:
    """Which COL_SPLIT phases execute each row/stat instruction. Phase L (a row-sum level) runs the
    ancestors of the level-L row sums; phase -1 (final) the ancestors of every store and accumulate. A
    row sum of a lower level than the phase is not recomputed: its total is read back instead."""
    instrs = p.instrs
    defs = {i.dst: k for k, i in enumerate(instrs) if i.dst}
    member: dict[int, set[int]] = {k: set() for k in range(len(instrs))}
    levels = sorted({i.level for i in instrs if i.kind in ROW_REDUCE})
    for phase in levels + [-1]:
        if phase == -1:
            roots = [k for k, i in enumerate(instrs) if i.kind in ("acc", "store", "sstore")]
        else:
            roots = [k for k, i in enumerate(instrs) if i.kind in ROW_REDUCE and i.level == phase]
        stack, seen = list(roots), set()
        while stack:
            k = stack.pop()
            if k in seen or not per_row(instrs[k]):
                continue
            seen.add(k)
            member[k].add(phase)
            i = instrs[k]
            if i.kind in ROW_REDUCE and (phase == -1 or i.level < phase):
                continue   # read back as a total
            stack += [defs[x] for x in _names_in(i) if x in defs]
    p.instrs = [evolve(i, phases=tuple(sorted(member[k]))) for k, i in enumerate(instrs)]


def _exclusive(a: tuple, b: tuple) -> bool:
    """Whether instructions guarded by presences `a` and `b` (Instr.when) never both run: both guarded, no presence
    in common."""
    return bool(a) and bool(b) and not set(a) & set(b)


def _allocate(p: RowProgram) -> None:
    """Name every UB operand: row values -> w<k> by liveness (in place when an operand dies at this
    instruction), brow/col values and accumulators -> their own buffers. Rewrites p.instrs. Under guards
    (Instr.when) liveness is per presence: an instruction may take the row of a value that no instruction running
    under its presences reads again (a value of presences that never run with it, or one only such presences still
    read)."""
    row_kinds = ("cast_in", "vwiden", "vnarrow", "vbin", "vscalar", "vaxpy", "vlane", "vseg", "vunary", "vdup", "viota", "vgather", *MASK_KINDS,
                 *SELECT_KINDS)
    last: dict[str, int] = {}
    uses: dict[str, list] = {}   # value -> [(instruction index, its presences)]
    for k, i in enumerate(p.instrs):
        for x in _names_in(i):
            last[x] = k
            uses.setdefault(x, []).append((k, i.when))

    def dead_for(x: str, k: int, when: tuple) -> bool:
        # x is not read after instruction k under any presence that runs an instruction guarded by `when`
        return all(j <= k or _exclusive(w, when) for j, w in uses.get(x, ()))

    where: dict[str, str] = {}
    holder: dict[str, dict] = {}   # buffer -> {live value: its presences}
    nxt = 0
    out = []
    for k, i in enumerate(p.instrs):
        srcs = tuple(where.get(x, x) for x in i.srcs)
        dst = i.dst
        if i.space == "row" and i.kind in row_kinds:
            data = i.srcs[1:] if i.kind in SELECT_KINDS else i.srcs   # a select never overwrites its mask
            dying = [x for x in data if x in where and dead_for(x, k, i.when)]
            if i.kind in ("vaxpy", "vlane") and (not dying or dying[0] != i.srcs[0]):
                what = "Axpy" if i.kind == "vaxpy" else "a one-lane update"
                raise IRError(f"row program {p.name}: {what} {i.dst} needs its row {i.srcs[0]} to die there")
            if dying and i.kind not in NO_INPLACE:
                dst = where[dying[0]]
            else:
                own = set(_names_in(i))   # never over one of its own operands here (NO_INPLACE, or none dies)
                free = [j for j in range(nxt) if all(v not in own and (_exclusive(w, i.when) or dead_for(v, k, i.when))
                                                     for v, w in holder.get(f"w{j}", {}).items())]
                if free:
                    dst = f"w{free[0]}"
                else:
                    dst, nxt = f"w{nxt}", nxt + 1
            where[i.dst] = dst
            holder.setdefault(dst, {})[i.dst] = i.when
        elif i.space in ("brow", "col") and i.kind in ("load", *row_kinds, "acc"):
            bufs = p.brow if i.space == "brow" else p.col
            if i.dst not in bufs:
                bufs.append(i.dst)
        out.append(evolve(i, dst=dst, srcs=srcs))
        for x in _names_in(i):
            b = where.get(x)
            if b and last.get(x) == k:
                holder.get(b, {}).pop(x, None)
    p.instrs = out
    p.row_temps = nxt


def reduction_slots(p: RowProgram) -> tuple[dict, dict]:
    """({row reduction: its slot among those of its level}, {row reduction: its slot among all}): the COL_SPLIT
    exchange's partial and total slots (opgen.kernel.rowclass). Reductions of presences that never run together
    (Instr.when) and of one kind share a slot; otherwise each has its own, in program order. Both are dense (0..n)."""
    def colour(group: list) -> dict:
        slot: dict = {}
        for i in group:
            k = 0
            while any(slot[j.dst] == k and not (_exclusive(i.when, j.when) and i.kind == j.kind)
                      for j in group if j.dst in slot):
                k += 1
            slot[i.dst] = k
        return slot
    level: dict = {}
    for lv in sorted({i.level for i in p.rsums()}):
        level.update(colour(p.rsums(lv)))
    return level, colour(p.rsums())


def reduction_slot_counts(p: RowProgram) -> tuple[int, int]:
    """(slots of all row reductions, the most slots of one level) of `reduction_slots`: what the exchange holds."""
    level, index = reduction_slots(p)
    per = {}
    for i in p.rsums():
        per.setdefault(i.level, set()).add(level[i.dst])
    return len(set(index.values())), max((len(v) for v in per.values()), default=0)


def _rename(text: str, where: dict) -> str:
    import re

    if not text:
        return text
    return re.sub(r"[A-Za-z_][A-Za-z0-9_]*", lambda m: where.get(m.group(0), m.group(0)), text)


def verify_program(p: RowProgram) -> None:
    """Def-before-use of every operand; row temporaries inside 0..row_temps; every accumulator and stored
    tensor known. Raises IRError naming the instruction."""
    defined = {t.name for t in p.gm if t.role == "in"} | set(p.consts)
    for k, i in enumerate(p.instrs):
        for x in i.srcs:
            if x not in defined:
                raise IRError(f"row program {p.name}: instruction {k} ({i.kind} {i.dst}) uses {x} before it is defined")
        if i.dst.startswith("w") and i.dst[1:].isdigit() and int(i.dst[1:]) >= p.row_temps:
            raise IRError(f"row program {p.name}: {i.dst} outside the {p.row_temps} row temporaries")
        if i.kind in NO_INPLACE and i.dst in i.srcs:
            raise IRError(f"row program {p.name}: instruction {k} ({i.kind} {i.dst}) overwrites its own source")
        if i.kind in ("store", "sstore", "load", "cast_in", "sload"):
            p.tensor(i.gm)
        if i.kind == "vseg":
            for g in seg_values_in(i):
                if p.tensor(g).space != "seg":
                    raise IRError(f"row program {p.name}: instruction {k} (vseg {i.dst}) reads {g}, not a per-segment "
                                  f"operand")
        if i.dst:
            defined.add(i.dst)
    for a in p.accs:
        if a not in defined:
            raise IRError(f"row program {p.name}: accumulator {a} is never accumulated")


def print_program(p: RowProgram, locs: bool = False) -> str:
    """Canonical text of a row program (ends with a newline). locs=True ends each instruction with the spec
    location it was lowered from (`  @ rms_norm.py:28`, what `opgen graph --stage kernel` shows); the default text
    has none (what comparisons of programs use)."""
    lines = [f"rowprogram {p.name} (row temps {p.row_temps}, levels {p.levels}) {{"]
    if hasattr(p.layout, "text"):
        lines.append(f"  {p.layout.text()}")
    for t in p.gm:
        at = f" at {t.view.text()}" if t.view is not None else ""
        lines.append(f"  gm {t.role} {t.name}: {t.dtype} {t.space}{at}")
    if p.brow:
        lines.append(f"  brow {', '.join(p.brow)}")
    if p.col:
        lines.append(f"  col {', '.join(p.col)}")
    if p.consts:
        lines.append(f"  const {', '.join(p.consts)}")
    if p.presence:
        lines.append(f"  serves every presence of {', '.join(p.presence)} (when: 1 present, 0 absent, in that order)")
    for k, e in enumerate(p.dim_values):   # part of the program: two programs reading other dims are other kernels
        lines.append(f"  dimValue{k}_ = {e}")
    for a, (sp, name, rm) in p.accs.items():
        kind = f", {p.acc_kinds[a]}" if a in p.acc_kinds else ""
        then = "".join(f"; {_instr_text(i)}" for i in p.acc_post.get(a, ()))
        lines.append(f"  acc {a} -> {name} ({sp}, {rm}{kind}){' then' + then[1:] if then else ''}")
    for a in p.acc_reads:
        if a not in p.accs:
            then = "".join(f"; {_instr_text(i)}" for i in p.acc_post.get(a, ()))
            lines.append(f"  acc {a} ({'brow' if a in p.brow else 'col'}, read){' then' + then[1:] if then else ''}")
    if p.acc_reads:
        lines.append(f"  second pass over the rows reads {', '.join(p.acc_reads)} complete")
    if p.late:
        lines.append(f"  after the exchange: {', '.join(p.late)}")
    for v, g, rm in p.late_stores:
        lines.append(f"  store {g} <- {v} ({rm}) after the exchange")
    for name, a, k in p.btotals:
        what = a if k == "expr" else f"{'ReduceMax' if k == 'max' else 'ReduceSum'}({a})"
        lines.append(f"  at each batch of the second pass: {name} = {what}")
    for i in p.batch_stores:
        lines.append(f"  store {i.gm} <- {i.arg} ({i.op}) once per batch")
    for i in p.instrs:
        body = _instr_text(i)
        ph = ",".join("F" if x == -1 else f"P{x}" for x in i.phases)
        ps = f" pass {','.join(map(str, i.passes))}" if i.passes else ""
        wh = " when " + " | ".join("".join("1" if x else "0" for x in w) for w in i.when) if i.when else ""
        lines.append(f"  [{i.space} L{i.level}{' ' + ph if ph else ''}{ps}{wh}] {body}"
                     f"{at_suffix(i.loc) if locs else ''}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _instr_text(i: Instr) -> str:
    """One instruction as text (print_program)."""
    a = i.srcs[0] if i.srcs else ""
    if i.kind in ("load", "cast_in", "sload"):
        via = " as half" if i.op == "half" else ""
        return f"{i.dst} = {i.kind}({i.gm}){via}"
    if i.kind == "vwiden":
        return f"{i.dst} = Cast({a} as {i.op or 'half'})"
    if i.kind == "vnarrow":
        return f"{i.dst} = Cast({a} to {i.op or 'half'}, {i.arg or 'CAST_ODD'})"
    if i.kind == "vbin":
        return f"{i.dst} = {i.op}({', '.join(i.srcs)})"
    if i.kind == "vscalar":
        return f"{i.dst} = {i.op}({a}, {i.arg})"
    if i.kind == "vaxpy":
        return f"{i.dst} = Axpy({a}, {i.srcs[1]}, {i.arg})"
    if i.kind == "vlane":
        return f"{i.dst} = {a} with lane {i.srcs[1]} + {i.arg}"
    if i.kind == "vunary":
        return f"{i.dst} = {i.op}({a})"
    if i.kind == "vseg":   # a scalar text's segment values printed as <operand>[seg]
        arg = re.sub(rf"\b{SEG_VALUE_PREFIX}([A-Za-z0-9_]+)", r"\1[seg]", i.arg)
        return f"{i.dst} = {i.op}({a}, {arg or i.gm} per segment)"
    if i.kind == "vdup":
        return f"{i.dst} = Duplicate({i.arg})"
    if i.kind == "vgather":
        return f"{i.dst} = Gather({a}, {i.arg})"
    if i.kind == "viota":
        return f"{i.dst} = CreateVecIndex({i.arg})"
    if i.kind == "scheck":
        return f"check 0 <= {a} < row length"
    if i.kind == "sgather":
        return f"{i.dst} = {i.gm}[{a}]"
    if i.kind == "vcmp":
        return f"{i.dst} = Compare({', '.join(i.srcs)}, {i.op})"
    if i.kind == "vcmps":
        return f"{i.dst} = Compares({a}, {i.arg}, {i.op})"
    if i.kind == "vcmpsh":
        return f"{i.dst} = Compares({a} as half, {i.arg}, {i.op})"
    if i.kind == "vlogic":
        return f"{i.dst} = {i.op}({', '.join(i.srcs)})"
    if i.kind == "vsel":
        return f"{i.dst} = Select({', '.join(i.srcs)})"
    if i.kind == "vsels":
        return f"{i.dst} = Select({', '.join(i.srcs)}, {i.arg})"
    if i.kind == "rsum":
        return f"{i.dst} = ReduceSum({a})"
    if i.kind == "rmax":
        return f"{i.dst} = ReduceMax({a})"
    if i.kind == "sexpr":
        return f"{i.dst} = {i.arg}"
    if i.kind == "sunary":
        return f"{i.dst} = {i.op}({i.arg}) on 8 lanes"
    if lane_acc(i):
        return f"{i.dst} lane {i.arg} += {a}"
    if i.kind == "acc":
        return f"{i.dst} = {i.op}({i.dst}, {a})" if i.op else f"{i.dst} += {a}"
    via = " as half" if i.op == "half" else ""
    return f"{i.kind} {i.gm} <- {a}{via} ({i.arg})"


def online_pair(p: RowProgram) -> tuple | None:
    """(m, s) when row program `p`'s reductions allow COL_STREAM's online maximum and sum: m the only row reduction
    of its level a, a maximum; s the only one of level a + 1, a sum whose phase reads m only as s's operand
    exp(v - m) — one `Adds(v, -(m))` read only by one Exp read only by s (a softmax's denominator). Then
    sum(exp(v - M)) over chunks with running maxima m' is sum(exp(v - m')) * exp(m' - M), and the two levels share
    one pass over the chunks. None otherwise."""
    for m in p.rsums():
        nxt = p.rsums(m.level + 1)
        if m.kind != "rmax" or len(p.rsums(m.level)) != 1 or len(nxt) != 1 or nxt[0].kind != "rsum":
            continue
        s = nxt[0]
        phase = [i for i in p.instrs if per_row(i) and m.level + 1 in i.phases]
        uses: dict = {}   # instruction index -> the instructions reading the value it defines
        last: dict = {}
        for k, i in enumerate(phase):
            for x in i.srcs:
                if x in last:
                    uses.setdefault(last[x], []).append(i)
            if i.dst:
                last[i.dst] = k
        token = re.compile(rf"\b{re.escape(m.dst)}\b")
        readers = [i for i in phase if m.dst in i.srcs or token.search(i.arg or "")]
        if len(readers) != 1:
            continue
        r = readers[0]
        if not (r.kind == "vscalar" and r.op == "Adds" and r.arg.replace(" ", "") == f"-({m.dst})"):
            continue
        ku = phase.index(r)
        e = uses.get(ku, [])
        if len(e) != 1 or not (e[0].kind == "vunary" and e[0].op == "Exp" and e[0].srcs == (r.dst,)):
            continue
        after = uses.get(phase.index(e[0]), [])
        if len(after) != 1 or after[0] is not s or s.srcs != (e[0].dst,):
            continue
        return m, s
    return None


def row_input_reads(p: RowProgram, strategy: int) -> tuple[int, str]:
    """(reads, why): how many times a rows kernel running program `p` with tiling strategy `strategy` (1 ROW_SPLIT,
    2 COL_SPLIT, 3 COL_STREAM, 4 ROW_CHUNK; opgen.tiling.rowkernel) reads each of its row inputs (GM operands of space "row")
    from GM, and the schedule's reason when more than once ("" for one read). COL_STREAM walks a core's column chunks
    once per row-reduction level, a row maximum and the next level's sum of exponentials of the row minus it sharing
    one pass (`online_pair`), then once more for the outputs (opgen.kernel.rowsched._col_stream); ROW_SPLIT with
    reductions over rows that later per-row arithmetic reads (RowProgram.acc_reads) and row or per-row outputs runs
    two passes over its rows (rowsched._row_split); COL_SPLIT keeps a group's slices resident, ROW_CHUNK (4) a
    group's whole rows (a row-reduction program, rowsched._row_chunk) or computes each chunk on its own: one read."""
    if strategy == 3:
        levels = len({i.level for i in p.rsums()})
        online = online_pair(p) is not None
        share = ", the row maximum and the sum of exponentials sharing one (an online softmax)" if online else ""
        return levels + 1 - int(online), (f"COL_STREAM walks its column chunks once per row-reduction level "
                                           f"({levels}{share}), then once for the outputs")
    outs = any(t.role == "out" and t.space in ("row", "stat") for t in p.gm)
    if strategy == 1 and p.acc_reads and outs:
        return 2, ("ROW_SPLIT in two passes: the reductions over rows first (completed across the cores), then the "
                   "per-row arithmetic that reads them")
    return 1, ""


def picked_reads(p: RowProgram, known: dict | None = None) -> dict[str, int]:
    """{operator input: elements read a row} of each input of program `p` that the kernel reads only at picked
    elements: every GM operand of it is of space "elem" (a row input of which no row is copied in) or "col" (a
    column input no `load` stages), and every instruction that names it is an `sgather` (one element at a checked
    per-row index, read by the scalar unit: docs/design.md "Kernel families"). The count is the distinct indices it
    is read at in a row (one sgather per index). `known`: {`p.presence` name: bool} for the names whose value the
    caller knows (the call's optional inputs; a runtime guard's is not known): an instruction whose `when` has no
    presence agreeing with all of them is not counted (None: every instruction is). Inputs with any
    other read (a row or column copy, a per-row read, a segment) are not in the result. What `opgen check`'s minimum
    GM bytes count for such an input: one DMA granule (32 bytes) per picked element (opgen.check.run
    `_min_gm_bytes`, docs/reference/kernel_cost.md §3)."""
    spaces: dict[str, set] = {}
    for t in p.gm:
        if t.role == "in":
            spaces.setdefault(t.gm, set()).add(t.space)
    by_name = {t.name: t.gm for t in p.gm if t.role == "in"}
    picks: dict[str, set] = {}
    other: set = set()
    for i in p.instrs:
        if not i.gm or i.gm not in by_name:
            continue
        if known and i.when and not any(all(w[k] == known[n] for k, n in enumerate(p.presence) if n in known)
                                        for w in i.when):
            continue
        if i.kind == "sgather":
            picks.setdefault(by_name[i.gm], set()).add(i.srcs[0])
        else:
            other.add(by_name[i.gm])
    return {g: len(ix) for g, ix in picks.items() if g not in other and spaces[g] <= {"elem", "col"}}


NARROW_LANES = 256
"""Lanes of ROW_SPLIT's UB rows in a `narrow_rows` program (the column accumulators' lanes, and the length the
fixed buffers are sized by): a multiple of 64 (whole 256-byte repeats), holding the accumulated columns, and two
rows of it hold the one-copy pairwise tree of SumPartials over up to 64 cores' 8-float partial totals."""

SCALAR_KINDS = ("sload", "sexpr", "scheck", "sgather", "sunary", "sstore")
"""Instruction kinds that work on per-row scalars only (the scalar unit; `sunary` on 8 lanes of the reduction
buffer)."""


def narrow_rows(p: RowProgram) -> bool:
    """Whether program `p` holds no row of the row axis in UB: every instruction is per-row scalar work
    (SCALAR_KINDS) or a one-lane accumulate (`lane_acc`) into a total accumulator (a reduction over every axis) at
    a column below NARROW_LANES, and no GM operand is copied in or out by rows (no row, batch-row or segment
    operand; element-read and statistic ones, column ones read only by `sgather`). Its column accumulators are
    then nonzero in those lanes only and ROW_SPLIT sizes its UB rows by min(colAlign_, NARROW_LANES) instead of the
    row (opgen.kernel.rowsched `_row_split`, opgen.tiling.rowkernel): NLLLoss's per-row gathers summed over the rows
    (docs/design.md "Kernel families", narrow rows)."""
    if p.row_temps or p.brow or p.acc_reads or p.levels or p.late or p.btotals or p.batch_stores or not p.accs:
        return False
    if any(t.space in ("row", "brow", "seg") for t in p.gm):
        return False
    if set(p.col) != set(p.accs) or any(v[0] != "total" for v in p.accs.values()):
        return False
    return all(i.kind in SCALAR_KINDS or (lane_acc(i) and int(i.arg) < NARROW_LANES) for i in p.instrs)
