"""The kernel classes of the rows family: each class of a rows kernel (`Variant`: the specialisations that lower to
one row program) as Kernel IR, built from its lowered row program (opgen.kernel.rowprog) and the tiling fields its
addressing reads (`DimFields`).

Python decides every statement: the instructions become Kernel-IR vector nodes for the two strategies of
opgen.tiling.rowkernel — ROW_SPLIT (rows over cores, `rowsPerPass` rows per CopyIn/Compute/CopyOut pass) and
COL_SPLIT (the row axis over cores, column chunks, resident row groups and row reductions exchanged through
workspace per level), and for a spec whose rows can outgrow a core's UB slice COL_STREAM (the slice in chunks
re-read per level, `online_pair` for a softmax's maximum and sum) — and every GM access goes through its operand's
view (opgen.kernel.rowlayout.View): contiguous rows as one DataCopyPad per pass, strided rows (a permuted tensor, a
broadcast over leading axes) one DataCopyPad per run along the innermost leading axis, the row-axis slices of a
tensor at a column offset. The dim values the addressing needs travel in the tiling data (`DimFields`). The
schedules are assembled by opgen.kernel.rowsched; `class_ir` returns a class with the syncs the lowering writes,
and the family's `synchronise` pass replaces them with those the dependency pass places (opgen.kernel.kir_sync).
opgen.codegen.kernel prints the finished classes.

Reference facts: docs/reference/ascendc.md §1.5 (TPipe/TQue/TBuf, EnQue/DeQue), §1.8 (DataCopyPad units: blockLen
bytes, UB gaps in 32-byte blocks, GM gaps in bytes), §1.9 (count-form vector calls, Cast round modes, ReduceSum,
ReduceMax), §1.6 (SyncAll), §1.3 (GetBlockIdx/GetBlockNum).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from opgen.names import cpp_name
from opgen.errors import SpecError
from opgen.ir.dims import Bin, Constraint, DimExpr, Fn, Lit, Sym, as_dim
from opgen.ir.locs import spec_comment, spec_doc
from opgen.kernel.rowlayout import PickedView, PiecewiseView
from opgen.kernel import kir
from opgen.kernel.isa import FP32_MAX, REPEAT_FORMS, Op, Pipe, entry
from opgen.kernel.rowprog import (ACC_INIT, MASK_KINDS, MASK_LANES, SELECT_KINDS, Instr, RowProgram, all_instrs,
                                  PER_ROW_SCALAR_KINDS, attr_names, batchable, batched, gathered_stat,
                                  lane_acc, names_in, instr_op, per_row, row_passes, row_scalar_chain)
from opgen.kernel.rowsched import GmRows, RowSchedule, row_split_class
from opgen.kernel.rowprog import (MAX_DIM_VALUES, narrow_rows, online_pair, reduction_slot_counts, reduction_slots,
                                  var_bindings)
from opgen.kernel.rowprog import _rename, seg_value_name, seg_values_in
from opgen.kernel.rowguard import GuardName
from opgen.kernel.rowpresence import cover, input_guard, output_guard
from opgen.kernel.rowsched import mul as _kmul
from opgen.kernel.rowsched import sub as _ksub
from opgen.kernel.rowsched import add as _ksum
from opgen.kernel.rowfexpr import parse as parse_scalar
from opgen.kernel.rowcounts import (COL_SPLIT, ROW_CHUNK, ROW_SPLIT, fixed_needs, program_counts, stage_dtypes,
                                    stage_element)

CTYPE = {"f32": "float", "f16": "half", "bf16": "bfloat16_t", "i32": "int32_t", "bool": "uint8_t", "u8": "uint8_t",
         "i8": "int8_t", "i16": "int16_t", "i64": "int64_t"}
"""C++ element type of each dtype a rows kernel reads or writes (opgen.kernel.rows.READS, WRITES)."""


@dataclass
class Variant:
    """One class of the kernel: the lowered row program, the specialisations it serves ([(attrKey, form key or None
    for every form, presence condition in C++)]: opgen.kernel.rows.variants_of), its class name and a one-line
    description; `also`: the programs of the other specialisations it serves (the same text; the spec lines of
    their instructions are cited too)."""

    cls: str
    doc: str
    prog: RowProgram
    serves: list = field(default_factory=list)
    also: list = field(default_factory=list)
    dims: object = None   # its DimFields when the specialisations of one kernel lower on different row domains
    stream: bool = False  # the class has COL_STREAM (opgen.tiling.rowkernel): the spec's rows can outgrow UB
    chunk: bool = False   # the class has ROW_CHUNK (opgen.kernel.rowcounts.chunkable: ColSplit over this core's rows)
    prefetch: bool = False   # ColSplit prefetches its items (rowcounts.chunk_prefetch: within the event-id pool)
    col_prefetch: bool = False   # ColStream's chunks double-buffered (rowcounts.col_prefetch)
    pool_bound: bool = False   # ROW_SPLIT's row queues take one buffer each (rowcounts.row_pool_bound)
    resident: bool = False   # the class has RowChunk (rowcounts.row_resident: ROW_CHUNK with the row inputs resident)
    ctx: dict | None = None   # the class's facts (class_ir), set once the tiling has decided `stream`
    kclass: object = None     # its Kernel IR class (kir.KernelClass), synchronised by the family's synchronise


class DimFields:
    """The tiling-data fields carrying the dim values a rows kernel's addressing needs: one field `dim<k>` per
    distinct dim expression that is neither a literal nor the row length, plus the leading extents a strided view
    decomposes rows with (`extent<i>`). `cpp(e)` prints a dim expression as C++ over them."""

    def __init__(self, layout, shared: "DimFields | None" = None):
        """`shared`: the DimFields of another row domain of the same kernel, whose fields (one tiling struct) this
        one extends (specialisations on different domains, opgen.kernel.rows.layout_groups)."""
        self.layout = layout
        self.fields: dict[str, tuple[str, object]] = shared.fields if shared is not None else {}
        self.used: set[str] = set()   # the fields this domain's addressing reads

    def cpp(self, e) -> str:
        """C++ int64 expression of dim expression e inside the kernel class."""
        e = as_dim(e)
        if isinstance(e, Lit):
            return str(e.value)
        if e == as_dim(self.layout.hidden_extent()):
            return "hidden_"
        key = str(e)
        if key not in self.fields:
            self.fields[key] = (f"dim{len(self.fields)}", e)
        self.used.add(self.fields[key][0])
        return f"td_->{self.fields[key][0]}"

    def sym(self, e):
        """The Kernel-IR expression of dim expression e (opgen.kernel.kir): a literal, the member hidden_, or the
        symbol of its tiling field (registered as `cpp` does)."""
        e = as_dim(e)
        if isinstance(e, Lit):
            return e
        text = self.cpp(e)
        return Sym(text.removeprefix("td_->"))

    def field_names(self) -> tuple:
        """The field names registered so far."""
        return tuple(n for n, _e in self.fields.values())

    def extent(self, i: int) -> str:
        """The tiling field of leading extent i."""
        return self.cpp(self.layout.extents[i])

    def items(self) -> list[tuple[str, object, str]]:
        """[(field name, dim expression, doc)] in first-use order."""
        return [(n, e, f"dim {k}") for k, (n, e) in self.fields.items()]


def _ctype(dtype: str) -> str:
    return CTYPE.get(dtype, dtype)


def _half_type(op: str) -> str:
    """The C type a vnarrow / vwiden temporary holds: half by default (a byte row's path), else its `op` (f16, bf16
    or a dtype variable bound to them)."""
    return _ctype(op) if op else "half"


def _stage(counts, strategy: int) -> tuple:
    """paramQue's element under `strategy` for the kernel (rowsched.stage_bytes): rowcounts.stage_element of what
    the strategy stages, the dtype variables as C types."""
    top, params = stage_element(stage_dtypes(counts, strategy))
    return top, tuple(_ctype(d) for d in params)


DIM_VALUE_MEMBERS = tuple(f"dimValue{k}_" for k in range(MAX_DIM_VALUES))
"""The int64 members holding the dims a row program reads as numbers (RowProgram.dim_values), set in Init."""
INT_MEMBERS = ("hidden_", "headDim_", "rowNum_", "seqLen_", "c0_") + DIM_VALUE_MEMBERS
"""The int64 members a row program's scalar text reads through static_cast<float> (opgen.kernel.rows)."""


def _operand_ref(name: str, prog: RowProgram) -> kir.Ref:
    """The Kernel-IR region of row-program operand `name` (the node form of `_operand`). Raises SpecError."""
    if name.startswith("w") and name[1:].isdigit():
        return kir.Ref("w_", slot=Lit(int(name[1:])))
    if name in prog.brow:
        return kir.Ref("brow_", slot=Lit(prog.brow.index(name)))
    if name in prog.col:
        return kir.Ref("colv_", slot=Lit(prog.col.index(name)))
    raise SpecError(f"row kernel {prog.name}: operand {name} has no buffer")


def instr_node(i: Instr, operand, n, row_in: kir.Ref | None = None, row_out: kir.Ref | None = None,
               doc: str = ""):
    """The Kernel-IR node of row-program instruction `i` that the instruction table prints (opgen.kernel.isa,
    opgen.kernel.rowprog.instr_op): a kir.Vec of its entry with `operand(name)` -> kir.Ref for UB operands, `n`
    (a DimExpr) the lane count, `row_in` / `row_out` the UB rows a cast_in reads and a store writes, a scalar operand
    as a kir.FExpr (opgen.kernel.rowfexpr); an `sexpr` as a kir.FLet. None for the kinds the printer addresses
    itself (loads, stat loads and stores, row reductions). `doc` is the node's trace comment text."""
    k = i.kind
    if k == "sexpr":
        return kir.FLet(i.dst, parse_scalar(i.arg, INT_MEMBERS), doc=doc)
    op = instr_op(i)
    if op is None:
        return None
    if k == "acc":
        args = {"dst": operand(i.dst), "src0": operand(i.dst), "src1": operand(i.srcs[0]), "count": n}
    elif k == "vaxpy":   # dst += srcs[1] * scalar: the allocator gave dst the addend's buffer (rowprog._allocate)
        if operand(i.dst) != operand(i.srcs[0]):
            raise SpecError(f"row kernel: Axpy {i.dst} is not over its addend {i.srcs[0]}")
        args = {"dst": operand(i.dst), "src0": operand(i.srcs[1]), "scalar": parse_scalar(i.arg, INT_MEMBERS),
                "count": n}
    elif k == "cast_in" and i.op == "half":   # a byte row cast to half into a row temp (rowprog.BYTE_DTYPES)
        args = {"dst": dataclasses.replace(operand(i.dst), as_dtype="half"), "src": row_in, "mode": "CAST_NONE",
                "count": n}
    elif k == "vwiden":   # halves, or the 16-bit type a row value was rounded to (rows._Lowering.round_trip)
        args = {"dst": operand(i.dst), "src": dataclasses.replace(operand(i.srcs[0]), as_dtype=_half_type(i.op)),
                "mode": "CAST_NONE", "count": n}
    elif k == "cast_in":
        args = {"dst": operand(i.dst), "src": row_in, "count": n}
    elif k == "store" and i.op == "half":   # halves to a byte output with its round mode (rowprog.BYTE_DTYPES)
        args = {"dst": row_out, "src": dataclasses.replace(operand(i.srcs[0]), as_dtype="half"), "mode": i.arg,
                "count": n}
    elif k == "vnarrow":
        args = {"dst": dataclasses.replace(operand(i.dst), as_dtype=_half_type(i.op)), "src": operand(i.srcs[0]),
                "mode": i.arg or "CAST_ODD", "count": n}
    elif k == "store":
        args = {"dst": row_out, "src": operand(i.srcs[0]), "mode": i.arg, "count": n}
    elif k == "vgather":
        args = {"dst": operand(i.dst), "src": operand(i.srcs[0]), "offset": operand(i.arg), "base": Lit(0),
                "count": n}
    elif k == "vlogic":   # the masks' bits as uint16 words: 16 lanes a word
        word = lambda x: dataclasses.replace(operand(x), as_dtype="uint16_t")  # noqa: E731
        args = {"dst": word(i.dst), "count": Bin("//", Fn("align_up", (as_dim(n), Lit(MASK_LANES))), Lit(16))}
        for j, x in enumerate(i.srcs):
            args[f"src{j}"] = word(x)
    elif k in MASK_KINDS or k in SELECT_KINDS:
        whole = Fn("align_up", (as_dim(n), Lit(MASK_LANES)))   # whole 256-B repeats (rowprog.MASK_LANES)
        mask = lambda x: dataclasses.replace(operand(x), as_dtype="uint8_t")  # noqa: E731 - the bit mask's bytes
        if k == "vcmpsh":   # halves: whole 256-B repeats of half (128 lanes), the bits of lane j as before
            args = {"dst": mask(i.dst), "src0": dataclasses.replace(operand(i.srcs[0]), as_dtype="half"),
                    "mode": i.op, "count": Fn("align_up", (as_dim(n), Lit(2 * MASK_LANES))),
                    "scalar": parse_scalar(i.arg, INT_MEMBERS)}
        elif k in MASK_KINDS:
            args = {"dst": mask(i.dst), "src0": operand(i.srcs[0]), "mode": i.op, "count": whole}
            if k == "vcmp":
                args["src1"] = operand(i.srcs[1])
            else:
                args["scalar"] = parse_scalar(i.arg, INT_MEMBERS)
        else:
            args = {"dst": operand(i.dst), "mask": mask(i.srcs[0]), "src0": operand(i.srcs[1]), "count": whole}
            if k == "vsel":
                args["src1"] = operand(i.srcs[2])
            else:
                args["scalar"] = parse_scalar(i.arg, INT_MEMBERS)
    else:
        args = {"dst": operand(i.dst), "count": n}
        for j, x in enumerate(i.srcs):
            args[f"src{j}"] = operand(x)
        if k in ("vscalar", "vdup", "viota"):
            args["scalar"] = parse_scalar(i.arg, INT_MEMBERS)
    return kir.vec(op, doc=doc, **args)


class Cites:
    """The spec locations a kernel class cites: those of its program and of every other specialisation's program
    with the same text that the class serves (opgen.kernel.rows.variants_of), instruction by instruction."""

    def __init__(self, progs: list):
        self.progs = list(progs)
        self.index = {id(i): k for k, i in enumerate(self.progs[0].instrs)}

    def instr(self, i: Instr) -> list[str]:
        """The locations of instruction `i` of the first program and of its counterparts in the others."""
        k = self.index.get(id(i))
        return [i.loc] if k is None else [p.instrs[k].loc for p in self.progs]

    def gm(self, gm: str, kinds: tuple) -> list[str]:
        """The locations of the instructions of kinds `kinds` reading or writing GM operand `gm`."""
        return [i.loc for p in self.progs for i in p.instrs if i.kind in kinds and i.gm == gm]

    def acc(self, acc: str) -> list[str]:
        """The locations of the instructions accumulating into accumulator `acc`."""
        return [i.loc for p in self.progs for i in p.instrs if i.kind == "acc" and i.dst == acc]


class _Printer:
    """Prints the instructions of one row program for one strategy.

    mode "row": ROW_SPLIT (rows staged in queues, row reductions in UB);
    mode "col": COL_SPLIT (resident slices; partial row reductions staged, totals read back). With `resident`
    (ROW_CHUNK of a row-reduction program, opgen.kernel.rowsched `_row_chunk`) a row input is read from the group's
    whole rows in UB: row i's chunk at res_<operand>[i * colAlign_ + c0_]."""

    def __init__(self, prog: RowProgram, mode: str, cites: Cites | None = None, addr: "_Addr | None" = None,
                 resident: bool = False):
        self.p, self.mode, self.addr, self.resident = prog, mode, addr, resident
        self.cites = cites or Cites([prog])
        self.level_slot, self.rsum_index = reduction_slots(prog)   # shared by exclusive presences' reductions
        if resident:   # nothing is exchanged: a level's partials combine in their total's slot (tots_ = sums_[nlevel])
            nlevel = max(reduction_slot_counts(prog)[1], 1)
            self.level_slot = {d: nlevel + j for d, j in self.rsum_index.items()}
        self._reduce_all = False   # batch_segments with reduce: the row reductions are in rv_
        self._col_phase = None     # COL_SPLIT's batch_segments: the phase (a level, -1 the final one) printed
        self._base = None          # ... and the first row of the sub-batch within the group (b0), added to the
        #                            group buffers' rows (res_, rowOut_, statIn_, statStage_, sums_, tots_)

    def seg_nodes(self, i: Instr, doc: str) -> kir.Scope:
        """A `vseg` (opgen.kernel.rowprog) in the per-row loop as Kernel-IR statements: for each segment of L columns
        that the row's columns [c0_, c0_ + n_) cover, its value read by the scalar unit from GM (the operand's
        SegView: its row's offset, then one value per segment, GmScalar) and applied with Muls / Adds on the
        segment's 32-byte-aligned interior (a vector instruction's UB operands start on 32-byte boundaries,
        docs/reference/ascendc.md §1.9), then, after the vector work is done (V->S), on the at most 7 + 7 elements
        at the segment's ends by the scalar unit (the same fp32 product or sum), and S->V before the next vector
        instruction. That scalar part runs only where some end is off a 32-byte block (segLen, c0_ or n_ not a
        multiple of 8 fp32 elements): otherwise every segment is whole blocks, and its V->S wait and second GM read of
        each value are skipped (tests/test_rows_segments.py). GM reads: the values of the chunk's segments, once a
        chunk where the ends are whole blocks, twice otherwise."""
        if self.addr is None:
            raise SpecError(f"row kernel {self.p.name}: a per-segment operand needs the addressing")
        v = self.p.tensor(i.gm).view
        dst, src = _operand_ref(i.dst, self.p), _operand_ref(i.srcs[0], self.p)
        row = _ksum(Sym("r0" if self.mode == "row" else "g0"), Sym("i"))
        seglen = self.addr.dims.sym(v.seglen)
        j, seg, c0, n, e = Sym("j"), Sym("segLen"), Sym("c0_"), Sym("n_"), Sym("e")
        lo, hi, a, b = Sym("lo"), Sym("hi"), Sym("a"), Sym("b")
        at = lambda r, x: dataclasses.replace(r, offset=x)  # noqa: E731
        start = _kmul(j, seg)
        reads = seg_values_in(i)   # the seg operands whose values this segment's scalar reads
        for g in reads[1:]:
            w = self.p.tensor(g).view
            if str(w.seglen) != str(v.seglen):
                raise SpecError(f"row kernel {self.p.name}: per-segment operands {i.gm} and {g} of one instruction "
                                f"have different segment lengths")
        loads = []
        for k, g in enumerate(reads):
            st = self.addr.dims.sym(self.p.tensor(g).view.step)
            base = Sym("segBase") if k == 0 else Sym(f"segBase{k}")
            loads.append(kir.FLet("v" if not i.arg else f"segv{k}",
                                  kir.FLoad(kir.GmView(f"gm_{self.p.tensor(g).gm}",
                                                       _ksum(base, j if st == Lit(1) else _kmul(j, st))))))
        if i.arg:   # the scalar: a float expression over the segment values and per-row scalars (fold_affine_chains)
            text = _rename(i.arg, {seg_value_name(g): f"segv{k}" for k, g in enumerate(reads)})
            loads.append(kir.FLet("v", parse_scalar(text, INT_MEMBERS)))
        bounds = [
            *loads,
            kir.Let("lo", kir.Select(Constraint(">", start, c0), _ksub(start, c0), Lit(0))),
            kir.Let("hi", kir.Select(Constraint("<", _kmul(_ksum(j, Lit(1)), seg), _ksum(c0, n)),
                                     _ksub(_kmul(_ksum(j, Lit(1)), seg), c0), n)),
            kir.Let("a", Fn("min", (_kmul(Bin("//", _ksum(lo, Lit(7)), Lit(8)), Lit(8)), hi))),
            kir.Let("b", Fn("max", (_kmul(Bin("//", hi, Lit(8)), Lit(8)), a))),
        ]
        op = {"Muls": Op.MULS, "Adds": Op.ADDS, "Subs": Op.ADDS}[i.op]
        scalar = kir.FNeg(kir.FRef("v")) if i.op == "Subs" else kir.FRef("v")
        sca = {"Muls": "*", "Adds": "+", "Subs": "-"}[i.op]
        ends = kir.SetValue(at(dst, e), kir.FBin(sca, kir.FLoad(at(src, e)), kir.FRef("v"), paren=False))
        first = Bin("//", c0, seg)
        return kir.Scope((
            kir.Comment(f"{i.gm}: one value per segment of {self.addr.dims.cpp(v.seglen)} columns"
                        + (f"; {doc}" if doc else "")),
            kir.Let("segLen", seglen),
            kir.Let("segBase", self.addr.row_expr(i.gm, row)),
            *(kir.Let(f"segBase{k}", self.addr.row_expr(g, row)) for k, g in enumerate(reads) if k),
            kir.Let("jEnd", Bin("//", _ksub(_ksum(c0, n), Lit(1)), seg)),
            kir.For("j", first, Sym("jEnd"), Lit(1), tuple(bounds) + (
                kir.If((Constraint(">", b, a),), (kir.vec(op, dst=at(dst, a), src0=at(src, a), scalar=scalar,
                                                          count=_ksub(b, a)),)),), inclusive=True,
                     disjoint=True),   # each segment's whole blocks [a, b): no 32-B block of two segments
            kir.If((Constraint(">", _ksum(_ksum(Bin("%", seg, Lit(8)), Bin("%", c0, Lit(8))), Bin("%", n, Lit(8))),
                               Lit(0)),),
                   (kir.For("j", first, Sym("jEnd"), Lit(1), tuple(bounds) + (
                       kir.For("e", lo, a, Lit(1), (ends,)), kir.For("e", b, hi, Lit(1), (ends,))), inclusive=True),),
                   doc="a segment end off a 32-byte block: the scalar unit's share (none where the segment length, "
                       "the chunk's start and its length are whole blocks)"),
        ))

    def _at(self, off, stride=None):
        """Offset `off` of a group buffer (one value a row, or `stride` elements a row) moved to the sub-batch's first
        row b0 (`col_batch_segments`); `off` itself elsewhere."""
        if self._base is None:
            return off
        shift = self._base if stride is None else _kmul(self._base, stride)
        return shift if off is None or off == Lit(0) else Bin("+", off, shift)

    def row_nodes(self) -> list:
        """ROW_SPLIT: every per-row instruction (stat/row space) in order as Kernel-IR nodes (`nodes`)."""
        return self.nodes([i for i in self.p.instrs if per_row(i)], None)

    def phase_nodes(self, level: int | None, stream: bool = False) -> list:
        """COL_SPLIT: the instructions of one phase (opgen.kernel.rowprog._assign_phases) as Kernel-IR nodes: for
        level L the ancestors of its row reductions, for the final phase (None) those of every store and
        accumulate. With `stream` (COL_STREAM: the phase runs once per column chunk) a partial row reduction is
        combined with the chunks before it (`nodes`)."""
        want = -1 if level is None else level
        return self.nodes([i for i in self.p.instrs if per_row(i) and want in i.phases], level, stream)

    def online_nodes(self, pair: tuple) -> list:
        """COL_STREAM with an online maximum and sum (`online_pair`: a level-a row maximum m, the level-(a+1) row
        sum s of exp(v - m)): the instructions of phases a and a + 1 in program order (a valid stream: each phase
        holds the ancestors of its reductions) run once per chunk. The chunk's maximum is combined with the running
        one (sums_, slot of m) and the new running maximum stands for m in the sum's phase; the chunk's sum of
        exp(v - running max) is added to the running sum (tots_, slot of s, until the exchange) after that is
        rescaled by exp(old running max - new), computed by a vector Exp on 8 lanes of red_ (the scalar unit has
        no exp). Exact in real arithmetic: exp(v - M) = exp(v - m') * exp(m' - M). The running maximum is kept at
        least -FP32_MAX (-FLT_MAX): a chunk (or a core's slice) whose every value is -inf (a masked stretch of the
        row) then adds exp(-inf) = 0 and rescales by exp(-inf) = 0, where -inf - -inf would make the whole row NaN; a row
        that is -inf throughout still gives NaN, as exp(x - max x) does."""
        m, s = pair
        a = m.level
        instrs = [i for i in self.p.instrs if per_row(i) and (a in i.phases or a + 1 in i.phases)]
        return self.nodes(instrs, a, stream=True, online=pair)

    def online_rescale(self, pair: tuple) -> list:
        """After the exchange of the maximum m: for each of the group's rows, this core's running sum (tots_ slot
        of s) times exp(core's maximum - total maximum) into sums_ (the slot the exchange of s sends)."""
        m, s = pair
        gs, i_ = Sym("groupStride_"), Sym("i")
        at = lambda buf, k: kir.Ref(buf, Bin("+", _kmul(k, gs), i_))  # noqa: E731
        red = kir.Ref("red_")
        return [kir.For("i", Lit(0), Sym("k"), Lit(1), (
            kir.FLet("dm", kir.FBin("-", kir.FLoad(at("sums_", self.level_slot[m.dst])),
                                    kir.FLoad(at("tots_", self.rsum_index[m.dst])))),
            kir.vec(Op.DUPLICATE, dst=red, scalar=kir.FRef("dm"), count=Lit(8)),
            kir.vec(Op.EXP, dst=red, src0=red, count=Lit(8)),
            kir.SetValue(at("sums_", self.level_slot[s.dst]),
                         kir.FBin("*", kir.FLoad(at("tots_", self.rsum_index[s.dst])), kir.FLoad(red))),
        ), doc="this core's sums rescaled to the total maximum")]

    def _online_steps(self, i: Instr, pair: tuple, part: str, doc: str) -> list:
        """The running maximum / sum update after the chunk's partial `part` of reduction `i` (online_nodes)."""
        m, s = pair
        gs, i_ = Sym("groupStride_"), Sym("i")
        later = (Constraint(">", Sym("c0_"), Sym("cBegin")),)
        if i is m:
            at = kir.Ref("sums_", Bin("+", _kmul(self.level_slot[m.dst], gs), i_))
            return [kir.FLet("mOld", kir.FRef(part), mutable=True),
                    kir.If(later, (kir.FAssign("mOld", kir.FLoad(at)),),
                           doc="the running maximum of the chunks before"),
                    kir.FLet(m.dst, kir.FMinMax("max", kir.FMinMax("max", kir.FRef("mOld"), kir.FRef(part)),
                                                kir.FConst(-FP32_MAX)), doc=doc),
                    kir.SetValue(at, kir.FRef(m.dst))]
        at = kir.Ref("tots_", Bin("+", _kmul(self.rsum_index[s.dst], gs), i_))
        red = kir.Ref("red_")
        return [kir.FLet("sOld", kir.FConst(0.0), mutable=True),
                kir.If(later, (
                    kir.vec(Op.DUPLICATE, dst=red, scalar=kir.FBin("-", kir.FRef("mOld"), kir.FRef(m.dst)),
                            count=Lit(8), doc="exp(old running maximum - new) on the vector unit"),
                    kir.vec(Op.EXP, dst=red, src0=red, count=Lit(8)),
                    kir.FAssign("sOld", kir.FBin("*", kir.FLoad(at), kir.FLoad(red)))),
                    doc="the running sum of the chunks before, rescaled to the new maximum (none at the first)"),
                kir.SetValue(at, kir.FBin("+", kir.FRef("sOld"), kir.FRef(part)), doc=doc)]

    def col_batch_segments(self, level: int | None, block: bool = False) -> list:
        """COL_SPLIT of a `batchable` program over a group's k resident rows at once (opgen.kernel.rowsched
        `_col_split`, RowSchedule.col_segments): the instructions of phase `level` (`phase_nodes`; None the final
        phase) as `batch_segments` with the row reductions over all rows (no eight-rows-a-repeat forms): a row
        reduction of this level by RowsSum / RowsMax straight into its sums_ slot (k values, one a row: the partials
        the exchange sends), one of an earlier level read back by each per-row loop from its total in tots_ (slot *
        groupStride_ + i, read after the exchange); the row temporaries hold the group's k rows, rowStride_ apart,
        as the resident slices res_<operand> do. The segments are of the sub-batch of k rows starting at row b0 of the
        group (rowsched `_col_rows`: the group buffers read at row b0 + i, the row temporaries at row i). With
        `block` eight rows a repeat as `batch_segments` does (RowsSumB / RowsMaxB, per-row scalars broadcast by Brcb:
        the totals straight from tots_)."""
        want = -1 if level is None else level
        self._col_phase, self._base = want, Sym("b0")
        try:
            return self.batch_segments([i for i in self.p.instrs if per_row(i) and want in i.phases], reduce=True,
                                       block=block)
        finally:
            self._col_phase, self._base = None, None

    def batch_segments(self, instrs: list, reduce: bool = False, block: bool = False) -> list:
        """ROW_SPLIT of a `batchable` program (opgen.kernel.rowprog): the per-row instructions `instrs` as segments
        ("all", nodes) issued once over the k rows of the pass (count k * rowStride_, the row temporaries
        [rowsPerPass, rowStride_] read from their first row) and ("row", nodes) run in the per-row loop (`i`; a row
        temporary read at row i, w_[j][i * rowStride_]): consecutive instructions that are `batched` form one
        segment, the others another (no syncs: the kernel pass `synchronise` places them). Rows are independent,
        so running one instruction over all rows before the next keeps every row's order of operations. A per-row scalar that a loop can compute again from UB (a statistic
        read from its input queue, a row reduction over all rows (`reduce`: RowsSum / RowsMax into rv_, read after
        one V->S wait), a scalar expression of those) is computed in each loop that reads it; any other (a RowSum
        row by row, an index check) keeps the instructions between its definition and its last use in one loop.
        With `block` (and `reduce`; rowsched.BLOCK_FITS) eight rows go in one repeat (block stride rowStride_ / 8,
        a repeat a 32-byte column block): a binary op with a column row ("bcol", `_block_column_nodes`), a scalar op
        or Duplicate by recomputable per-row scalars ("bsc", `_block_scalar_nodes`: the k values written by one
        scalar loop, broadcast by Brcb), and the row reductions by RowsSumB / RowsMaxB; what is left per row is
        what reads a per-row value no loop can recompute, accumulations into column rows and other ops."""
        instrs = _stores_early(instrs)
        red = ("rsum", "rmax") if reduce else ()
        self._reduce_all = reduce   # the row reductions land in rv_ (`_in_ub`)   # a row reduction over all rows keeps its values in UB (rv_)
        defs = {i.dst: i for i in instrs if i.kind in PER_ROW_SCALAR_KINDS}
        remat: set = set()   # per-row scalars any per-row loop can compute again from UB: no loop has to hold them
        for i in instrs:   # (an index check too: its Trap() is repeated where a loop computes it again)
            if i.kind == "sload" or i.kind in red or (
                    i.kind in ("sexpr", "sunary", "scheck", "sgather") and all(x in remat or x not in defs
                                                                     for x in names_in(i))):
                remat.add(i.dst)
        scal = {i.dst: k for k, i in enumerate(instrs) if i.dst in defs and i.dst not in remat}
        last = {x: k for k, i in enumerate(instrs) for x in names_in(i) if x in scal}
        live = [(scal[x], last[x]) for x in last]   # a per-row scalar lives in one per-row loop
        chain = row_scalar_chain(self.p) or {}   # compares by a per-row scalar and their selects: one way each
        held_in = {c for k, i in enumerate(instrs) if id(i) in chain for c in (chain[id(i)],)
                   if any(a < k < b for a, b in live)}
        segs: list = []
        for k, i in enumerate(instrs):
            if i.dst in remat and i.kind not in red:   # computed where a loop reads it (below)
                continue
            if self._col_phase is not None and i.kind in red and i.level != self._col_phase:
                continue   # COL_SPLIT: an earlier level's total, in tots_ already (read where a loop needs it)
            inside = any(a < k < b for a, b in live)
            kind = "all" if (batched(i, self.p) or i.kind in red) and not inside else "row"
            if id(i) in chain:   # eight rows a repeat with its compare's mask, else row by row with it
                kind = "bmask" if block and chain[id(i)] not in held_in else "row"
            elif kind == "row" and red and not inside and self._column_op(i):
                kind = "bcol" if block else "col"
            elif kind == "row" and block and not inside and self._block_scalar_op(i, remat):
                kind = "bsc"
            elif kind == "row" and block and not inside and i.kind == "acc" and not lane_acc(i) and self._whole(i.dst) \
                    and len(i.srcs) == 1 and i.srcs[0].startswith("w"):
                kind = "bacc"
            if segs and segs[-1][0] == kind and not (kind in ("bsc", "bmask") and len(segs[-1][1]) == BLOCK_SLOTS):
                segs[-1][1].append(i)
            else:
                segs.append((kind, [i]))
        out = []
        for n, (kind, group) in enumerate(segs):
            if kind == "col":
                nodes = self._column_nodes(group)
            elif kind == "bcol":
                nodes = self._block_column_nodes(group)
            elif kind == "bacc":
                end = max(k for k, j in enumerate(instrs) if j is group[-1])
                nodes = self._block_acc_nodes(group, instrs[end + 1:])
            elif kind == "bsc":
                nodes = self._block_scalar_nodes(group, lambda ops: self._again(ops, instrs, remat, red))
            elif kind == "bmask":
                nodes = self._block_mask_nodes(group, lambda ops: self._again(ops, instrs, remat, red))
            else:
                nodes = self.nodes(group, None, batch=kind, blocks=block)
            if kind == "row":   # the per-row values this loop reads that it does not compute: again from UB
                nodes = self._again(group, instrs, remat, red) + nodes
            out.append((kind, nodes))
        return out

    def _again(self, group: list, instrs: list, remat: set, red: tuple) -> list:
        """The statements of a per-row loop (`i`) over `group` that compute again the per-row values it reads and does
        not compute (`remat`: statistics from their input queue, row reductions from rv_, scalars of those)."""
        want = {x for i in group for x in names_in(i) if x in remat} - {i.dst for i in group}
        for i in reversed(instrs):
            if i.dst in want:
                want |= {x for x in names_in(i) if x in remat}
        pre = []
        for i in (i for i in instrs if i.dst in want):
            if i.kind in red and self._col_phase is not None:   # COL_SPLIT: its total, after the exchange
                pre += guarded(i, [kir.GetValue(i.dst, kir.Ref("tots_", self._at(Bin(
                    "+", _kmul(self.rsum_index[i.dst], Sym("groupStride_")), Sym("i")))))], self.p)
            elif i.kind in red:   # written before the V->S wait that ends the segment computing it
                pre += guarded(i, [kir.GetValue(i.dst, kir.Ref("rv_", Sym("i"),
                                                               slot=Lit(self.rsum_index[i.dst])))], self.p)
            else:
                pre += self.nodes([i], None, batch="row")
        return pre

    def _block_scalar_op(self, i: Instr, remat: set) -> bool:
        """Whether `i` is a row temporary's scalar op (BLOCK_SCALAR_OPS) or Duplicate whose scalar reads per-row
        values that every per-row loop can compute again (`remat`) and no other per-row value: eight rows a repeat
        from the Brcb broadcast of its k scalars (`_block_scalar_nodes`)."""
        temp = lambda x: x.startswith("w") and x[1:].isdigit()  # noqa: E731
        if i.space != "row" or not temp(i.dst) or not all(temp(x) for x in i.srcs):
            return False
        if not ((i.kind == "vscalar" and i.op in BLOCK_SCALAR_OPS) or (i.kind == "vdup" and not i.srcs)):
            return False
        per = {j.dst for j in self.p.instrs if j.kind in PER_ROW_SCALAR_KINDS}
        reads = set(names_in(i)) - set(i.srcs)
        return bool(reads & per) and reads & per <= remat

    def _block_rows(self, name: str, g) -> kir.Ref:
        """Row temporary `name`'s rows 8g .. 8g + 7 of the pass (element 8 g rowStride_)."""
        return _row_of(_operand_ref(name, self.p), _kmul(g, Lit(8), Sym("rowStride_")))

    def _block_for(self, body_of, doc: str) -> kir.For:
        """The loop over the pass's groups of eight rows (`g`; disjoint rows of the row temporaries), `body_of(mask,
        repeat)` its statements: mask the lanes of the group's rows (8 per row), repeat a 32-byte column block of
        the row's n_ lanes (ceil(n_ / 8) <= rowStride_ / 8 <= 255 under rowsched.BLOCK_FITS)."""
        g, k = Sym("g"), Sym("k")
        mask = _kmul(Lit(8), Fn("min", (Lit(8), _ksub(k, _kmul(g, Lit(8))))))
        reps = Bin("//", _ksum(Sym("n_"), Lit(7)), Lit(8))
        return kir.For("g", Lit(0), Bin("//", _ksum(k, Lit(7)), Lit(8)), Lit(1), tuple(body_of(mask, reps)),
                       doc=doc, disjoint=True)

    def _block_acc_nodes(self, group: list, after: list = ()) -> list:
        """Accumulations of the pass's rows into column rows (`acc`: a sum, or Max / Min) over all k rows: when the
        row's n_ lanes make fewer 64-lane chunks than 2 k, per chunk (its lanes the mask) one mask / repeat-form
        Add / Max / Min with a repeat a row
        (the row's repeat stride rowStride_ / 8 blocks), the column row both dst and src1 with repeat stride 0 (the
        device's accumulation exception, docs/reference/ascendc.md §1.9 operand rules): ceil(rowStride_ / 64)
        independent instructions where the row-by-row loop issues k dependent ones, each after a barrier. Each lane
        adds (combines) the rows in row order, as the loop does: the same fp32 result. Else, in ROW_SPLIT with at
        least 4 rows an accumulation of the group, sums by halving the rows in a row temporary no later instruction
        reads (`after`: the pass's instructions that follow the group; the source itself where it dies here,
        `_tree_temp`, `_rows_tree_nodes`): about log2(k) + 2 instructions instead of k; otherwise the per-row loop."""
        rs, k, c = Sym("rowStride_"), Sym("k"), Sym("c")
        chunks = Bin("//", _ksum(Sym("n_"), Lit(63)), Lit(64))
        at = _kmul(c, Lit(64))
        R = Bin("//", rs, Lit(8))
        fast: list = []
        for i in group:
            op = REPEAT_FORMS[entry(i.op or "Add").op]
            acc = dataclasses.replace(_operand_ref(i.dst, self.p), offset=at)
            rows = dataclasses.replace(_operand_ref(i.srcs[0], self.p), offset=at)
            fast += guarded(i, [kir.For("c", Lit(0), chunks, Lit(1), (
                kir.vec(op, dst=acc, src0=rows, src1=acc, mask=Fn("min", (Lit(64), _ksub(Sym("n_"), at))),
                        repeat=k, params=(Lit(1), Lit(1), Lit(1), Lit(0), R, Lit(0)),
                        doc=spec_doc(self.cites.instr(i))),),
                doc="a 64-lane chunk of every row into the column row's chunk", disjoint=True)], self.p)
        slow = [kir.For("i", Lit(0), k, Lit(1), tuple(self.nodes(group, None, batch="row")))]
        if self._col_phase is None:
            tree: list = []
            for n, i in enumerate(group):
                tmp = self._tree_temp(i, list(group[n + 1:]) + list(after)) if (i.op or "Add") == "Add" else None
                if tmp is None:
                    tree = None
                    break
                tree += guarded(i, self._rows_tree_nodes(i, tmp), self.p)
            if tree is not None:   # dearer than the row loop's k issues of the group and k barriers below 4 rows an op
                slow = [kir.If((Constraint(">=", k, Lit(4 * len(group))),), tuple(merge_guards(tree)), tuple(slow),
                               doc="at least four rows an accumulation: by halving, else row by row")]
        return [kir.If((Constraint("<", chunks, _kmul(Lit(2), k)),), tuple(merge_guards(fast)), tuple(slow),
                       doc="fewer chunks than twice the rows: the column rows chunk by chunk")]

    def _tree_temp(self, i: Instr, later: list) -> str | None:
        """A row temporary (`w<j>`) that accumulation `i` may overwrite over the pass's rows: its source when no
        instruction of `later` (those that follow it in the pass) reads the source before writing it whole, else
        the first other row temporary of that kind; None when there is none. A write under presences (Instr.when)
        other than i's, or that also reads the temporary, does not end its life."""
        temp = lambda x: x.startswith("w") and x[1:].isdigit()  # noqa: E731

        def dead(x: str) -> bool:
            for j in later:
                if x in names_in(j):
                    return False
                if j.dst == x and j.space == "row" and j.when == i.when:
                    return True
            return True

        src = i.srcs[0]
        if not temp(src):
            return None
        if dead(src):
            return src
        return next((f"w{j}" for j in range(self.p.row_temps) if f"w{j}" != src and dead(f"w{j}")), None)

    def _rows_tree_nodes(self, i: Instr, tmp: str) -> list:
        """Accumulation `i` (column row dst op= row temporary src over the pass's k rows, op Add) by
        halving: with f = k // 2, rows [0, f) of `tmp` = src rows [0, f) op rows [k - f, k) (one instruction over f
        rows); where tmp is not src and k is odd the middle row goes into the column row at once; then rows [0, f')
        op= rows [m - f', m) of tmp while m > 1 rows are left (f' = m // 2), then the column row op= tmp's row 0:
        ceil(log2 k) + 1 dependent instructions (k = 4: 3, k = 6: 4), where tmp is not src and k is odd
        3 + ceil(log2 (k // 2)) with the middle row's (k = 5: 4, k = 7: 5), where the row-by-row loop issues k (k = 1:
        one). The sum adds in
        another order than the row loop (docs/reference/kernel_cost.md §4: a column sum by halving); Max / Min
        accumulations are left to the row loop (their NaN rules need not commute)."""
        rs, k = Sym("rowStride_"), Sym("k")
        op = entry(i.op or "Add").op
        acc = _operand_ref(i.dst, self.p)
        src = _operand_ref(i.srcs[0], self.p)
        t = _operand_ref(tmp, self.p)
        row = lambda r, at: _row_of(r, _kmul(at, rs))  # noqa: E731
        doc = spec_doc(self.cites.instr(i))
        f0, d, m, f = Sym("accHalf0"), Sym("accDone"), Sym("accLeft"), Sym("accHalf")
        body = [kir.Let("accHalf0", Bin("//", k, Lit(2))),
                kir.vec(op, dst=t, src0=src, src1=row(src, _ksub(k, f0)), count=_kmul(f0, rs), doc=doc)]
        if tmp != i.srcs[0]:
            body.append(kir.If((Constraint("==", Bin("%", k, Lit(2)), Lit(1)),), (
                kir.vec(op, dst=acc, src0=acc, src1=row(src, f0), count=Sym("n_"), doc=doc),),
                doc="an odd number of rows: the middle one straight into the column row"))
            lo = _ksub(k, f0)
        else:
            lo = f0
        body.append(kir.For("accDone", lo, _ksub(k, Lit(1)), None, (
            kir.Let("accLeft", _ksub(k, d)),
            kir.Let("accHalf", Bin("//", m, Lit(2))),
            kir.vec(op, dst=t, src0=t, src1=row(t, _ksub(m, f)), count=_kmul(f, rs), doc=doc),
            kir.Assign("accDone", _ksum(d, f))), doc="halve the rows left until one is"))
        body.append(kir.vec(op, dst=acc, src0=acc, src1=t, count=Sym("n_"), doc=doc))
        return [kir.If((Constraint("==", k, Lit(1)),), (
            kir.vec(op, dst=acc, src0=acc, src1=src, count=Sym("n_"), doc=doc),), tuple(body),
            doc="the pass's rows into the column row by halving")]

    def _block_column_nodes(self, group: list) -> list:
        """Column-row instructions (`_column_op`) over the k rows of a pass eight rows a repeat: block j of a repeat
        is row 8g + j (block stride rowStride_ / 8), the repeats walk the row's 32-byte column blocks (repeat stride
        1), the column row's block stride 0 (every row reads the same block; docs/reference/ascendc.md §1.9):
        ceil(k / 8) instructions instead of k (row by row) or ceil(rowStride_ / 64) (`_column_nodes`)."""
        out: list = []
        R = Bin("//", Sym("rowStride_"), Lit(8))
        g = Sym("g")
        for i in group:
            doc = spec_doc(self.cites.instr(i))
            refs = [_operand_ref(x, self.p) if self._whole(x) else self._block_rows(x, g) for x in (i.dst, *i.srcs)]
            blk = [R] + [Lit(0) if self._whole(x) else R for x in i.srcs]
            op = REPEAT_FORMS[entry(i.op).op]
            out += guarded(i, [self._block_for(lambda mask, reps: (kir.vec(
                op, dst=refs[0], src0=refs[1], src1=refs[2], mask=mask, repeat=reps,
                params=(*blk, Lit(1), Lit(1), Lit(1)), doc=doc),),
                "eight rows a repeat, a column block a repeat; the column row's block for each")], self.p)
        return out

    def _in_ub(self, text: str) -> tuple | None:
        """(the UB region holding the k values of scalar text `text` for the pass's rows, negated) when `text` is a
        per-row value already in UB or its negation (`x` / `-(x)`): a statistic read as fp32 into its input queue
        (statIn_<operand>[0 .. k)) or a row reduction over all rows (rv_[slot][0 .. k)); else None."""
        m = re.fullmatch(r"\s*(-?)\(?\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)?\s*", text or "")
        if not m:
            return None
        d = next((j for j in self.p.instrs if j.dst == m.group(2)), None)
        if d is not None and d.kind == "sload" and not (self.mode == "row" and self._base is not None):
            # (a ROW_SPLIT run of one batch starts at any row b0 of the pass: Brcb's source must start a 32-byte block)
            t = self.p.tensor(d.gm)
            if t.dtype == "f32" or gathered_stat(t):
                return (kir.Ref(f"statIn_{d.gm}") if self._base is None else kir.Ref(f"statIn_{d.gm}", self._base),
                        bool(m.group(1)))
        if d is not None and d.kind in ("rsum", "rmax") and self._col_phase is not None:   # COL_SPLIT's total
            return kir.Ref("tots_", self._at(_kmul(self.rsum_index[d.dst], Sym("groupStride_")))), bool(m.group(1))
        if d is not None and d.kind in ("rsum", "rmax") and self._reduce_all:
            return kir.Ref("rv_", slot=Lit(self.rsum_index[d.dst])), bool(m.group(1))
        return None

    def _scalar_slots(self, loose: list, again_of, src: dict, what: str, entry_of) -> list:
        """The scalar loop (`i` over the k rows of a pass, after `again_of(loose)`: the per-row values they read) that
        writes each instruction of `loose` its k per-row scalars into slot j of BLOCK_SLOTS in rowsRed_ (at (8 + j) *
        align8(k)), for `_block_scalar_nodes` and `_block_mask_nodes`; records src[id(instruction)] =
        entry_of(the slot's Ref). Returns [that loop] ([] when `loose` is empty); `what` names the instructions in the
        loop's doc."""
        if not loose:
            return []
        A = Fn("align_up", (Sym("k"), Lit(8)))
        slot = lambda j: _kmul(_ksum(Lit(8), Lit(j)), A)  # noqa: E731
        loop = list(again_of(loose))
        for j, i in enumerate(loose):
            src[id(i)] = entry_of(kir.Ref("rowsRed_", slot(j)))
            loop += guarded(i, [kir.SetValue(kir.Ref("rowsRed_", _ksum(slot(j), Sym("i"))),
                                             parse_scalar(i.arg, INT_MEMBERS), doc=spec_doc(self.cites.instr(i)))],
                            self.p)
        return [kir.For("i", Lit(0), Sym("k"), Lit(1), tuple(merge_guards(loop)),
                        doc=f"the per-row scalars of the {what} below, one slot each")]

    def _block_scalar_nodes(self, group: list, again_of) -> list:
        """Scalar ops by per-row scalars (`_block_scalar_op`) over the k rows of a pass, eight rows a repeat: each op's
        k scalars broadcast by Brcb to one 32-byte block a row (rowsRed_[0, 8 align8(k))), then the op's binary mask
        / repeat form (BLOCK_SCALAR_OPS; a Duplicate: Max of the block with itself) applies them, the block's block
        stride 1 and repeat stride 0. Brcb reads the k values where they already are in UB (`_in_ub`: a statistic's
        input queue, a row reduction's rv_ slot; its negation by Sub instead of Add); the others are written by one
        scalar loop (`i`, after `again_of(those ops)`: the per-row values they read) into a slot of BLOCK_SLOTS in
        rowsRed_ (slot j at (8 + j) * align8(k)). The same fp32 operation on every lane as Adds / Muls / Maxs / Mins /
        Duplicate (x + -(m) is x - m); ceil(k / 8) + 1 vector instructions for k."""
        k, g = Sym("k"), Sym("g")
        R = Bin("//", Sym("rowStride_"), Lit(8))
        src: dict = {}
        for i in group:
            ub = self._in_ub(i.arg)
            if ub is not None and (not ub[1] or (i.kind == "vscalar" and i.op == "Adds")):
                src[id(i)] = ub
        loose = [i for i in group if id(i) not in src]
        out = self._scalar_slots(loose, again_of, src, "ops", lambda ref: (ref, False))
        for i in group:
            doc = spec_doc(self.cites.instr(i))
            bc = kir.Ref("rowsRed_", _kmul(g, Lit(64)))
            dst = self._block_rows(i.dst, g)
            vals, neg = src[id(i)]
            if i.kind == "vdup":
                op, src0, blk0 = Op.MAX_REP, bc, Lit(1)
                rep0 = Lit(0)
            else:
                op = Op.SUB_REP if neg else BLOCK_SCALAR_OPS[i.op]
                src0, blk0, rep0 = self._block_rows(i.srcs[0], g), R, Lit(1)
            body = [kir.vec(Op.BRCB, dst=kir.Ref("rowsRed_"), src=vals,
                            repeat=Bin("//", _ksum(k, Lit(7)), Lit(8)), params=(Lit(1), Lit(8)), doc=doc),
                    self._block_for(lambda mask, reps: (kir.vec(
                        op, dst=dst, src0=src0, src1=bc, mask=mask, repeat=reps,
                        params=(R, blk0, Lit(1), Lit(1), rep0, Lit(0)), doc=doc),),
                        "eight rows a repeat, a column block a repeat; each row's scalar block")]
            out += guarded(i, body, self.p)
        return merge_guards(out)

    def _block_mask_nodes(self, group: list, again_of) -> list:
        """Compares by a per-row scalar and the selects reading their masks (opgen.kernel.rowprog.row_scalar_chain)
        over the k rows of a pass, eight rows a repeat (block j of a repeat is row 8g + j, block stride rowStride_ / 8
        for a row temporary, 0 for a column row: every row reads the same column block; a repeat a 32-byte column
        block of the row's n_ lanes). A compare: its k scalars broadcast by Brcb to one block a row (rowsRed_[0, 8
        align8(k)), read where they are in UB (`_in_ub`) or written by one scalar loop into a slot, as
        `_block_scalar_nodes`), then Compare's mask / repeat form against the block (block stride 1, repeat stride 0)
        with every lane of a repeat (the mask is reserved on A2 / A3: the lanes of rows past k compare too, into
        mask bytes no select reads); its bits land eight bytes a repeat from the group's first mask row (row 8g of
        the mask's row temporary: ceil(n_ / 8) * 8 bytes, within that row's 4 rowStride_). A select: Select's
        tensor-scalar mask / repeat form with the same geometry and the lanes of the group's rows (8 a row), so it
        reads bit 64 r + 8 j + l, the bit the compare wrote for lane l of row 8g + j's column block r. The same fp32
        comparison and choice of each lane as Compares / Select row by row (docs/reference/ascendc.md §1.9);
        ceil(k / 8) + 1 instructions a compare and ceil(k / 8) a select where row by row issues k each."""
        k, g = Sym("k"), Sym("g")
        R = Bin("//", Sym("rowStride_"), Lit(8))
        bits = lambda x: dataclasses.replace(self._block_rows(x, g), as_dtype="uint8_t")  # noqa: E731
        src: dict = {}
        for i in group:
            if i.kind == "vcmps":
                ub = self._in_ub(i.arg)
                if ub is not None and not ub[1]:
                    src[id(i)] = ub[0]
        loose = [i for i in group if i.kind == "vcmps" and id(i) not in src]
        out = self._scalar_slots(loose, again_of, src, "compares", lambda ref: ref)
        for i in group:
            doc = spec_doc(self.cites.instr(i))
            x = i.srcs[0] if i.kind == "vcmps" else i.srcs[1]
            col = x in self.p.col
            data, blk = (_operand_ref(x, self.p), Lit(0)) if col else (self._block_rows(x, g), R)
            if i.kind == "vcmps":
                body = [kir.vec(Op.BRCB, dst=kir.Ref("rowsRed_"), src=src[id(i)],
                                repeat=Bin("//", _ksum(k, Lit(7)), Lit(8)), params=(Lit(1), Lit(8)), doc=doc),
                        self._block_for(lambda mask, reps: (kir.vec(
                            Op.COMPARE_REP, dst=bits(i.dst), src0=data, src1=kir.Ref("rowsRed_", _kmul(g, Lit(64))),
                            mode=i.op, mask=Lit(64), repeat=reps, params=(Lit(1), blk, Lit(1), Lit(8), Lit(1), Lit(0)),
                            doc=doc),), "eight rows a repeat, a column block a repeat; each row's scalar block")]
            else:
                body = [self._block_for(lambda mask, reps: (kir.vec(
                    Op.SELECT_SCALAR_REP, dst=self._block_rows(i.dst, g), mask=bits(i.srcs[0]), src0=data,
                    scalar=parse_scalar(i.arg, INT_MEMBERS), lanes=mask, repeat=reps,
                    params=(R, blk, Lit(1), Lit(1), Lit(1), Lit(1)), doc=doc),),
                    "eight rows a repeat, a column block a repeat; the mask as the compare wrote it")]
            out += guarded(i, body, self.p)
        return merge_guards(out)

    def _column_op(self, i: Instr) -> bool:
        """Whether `i` is a binary row instruction of a row temporary and a column row (one UB row for every row,
        `_whole`) into a row temporary: over all rows by its mask / repeat form (`_column_nodes`)."""
        temp = lambda x: x.startswith("w") and x[1:].isdigit()  # noqa: E731
        return (i.kind == "vbin" and i.space == "row" and temp(i.dst) and len(i.srcs) == 2
                and sum(temp(x) for x in i.srcs) == 1 and sum(self._whole(x) for x in i.srcs) == 1
                and entry(i.op).op in REPEAT_FORMS)

    def _whole(self, x: str) -> bool:
        """Whether operand `x` is one UB row for every row of the rows an instruction covers: a column row
        (`RowProgram.col`) or a batch row (`RowProgram.brow`: ROW_SPLIT runs a pass's rows one batch at a time,
        opgen.kernel.rowsched `_batch_runs`; COL_SPLIT's sub-batches run in groups within one batch, `_col_split`)."""
        return x in self.p.col or x in self.p.brow

    def _column_nodes(self, group: list) -> list:
        """Column-row instructions (`_column_op`) over the k rows of a pass: for each 64-lane chunk c of the row, the
        op's mask / repeat form with a repeat a row (repeat stride rowStride_ / 8 blocks; the column row's repeat
        stride 0, so every row reads the same chunk; docs/reference/ascendc.md §1.9): ceil(rowStride_ / 64)
        instructions instead of k. Chunks touch disjoint lanes (the loop is `disjoint`)."""
        out: list = []
        rs, c = Sym("rowStride_"), Sym("c")
        at = _kmul(c, Lit(64))
        R = Bin("//", rs, Lit(8))
        for i in group:
            doc = spec_doc(self.cites.instr(i))
            refs = [dataclasses.replace(_operand_ref(x, self.p), offset=at) for x in (i.dst, *i.srcs)]
            reps = [R] + [Lit(0) if self._whole(x) else R for x in i.srcs]
            out += guarded(i, [kir.For("c", Lit(0), Bin("//", _ksum(rs, Lit(63)), Lit(64)), Lit(1), (
                kir.vec(REPEAT_FORMS[entry(i.op).op], dst=refs[0], src0=refs[1], src1=refs[2],
                        mask=Fn("min", (Lit(64), _ksub(rs, at))), repeat=Sym("k"),
                        params=(Lit(1), Lit(1), Lit(1), *reps), doc=doc),),
                doc="a 64-lane chunk of every row at once; the column row's chunk for each", disjoint=True)], self.p)
        return out

    def nodes(self, instrs: list, phase: int | None, stream: bool = False, online: tuple | None = None,
              batch: str = "", blocks: bool = False) -> list:
        """Instructions `instrs` inside the per-row loop (`i`, `n_`) as Kernel-IR nodes (`instr_node`; a stat load
        a GetValue, a stat store a SetValue; a row reduction in ROW_SPLIT a Call of RowSum / RowMax with its result,
        in COL_SPLIT's phase of its level that Call with its partial stored to sums_ (slot * groupStride_ + i), in a
        later phase a GetValue of its total from tots_), no syncs (the kernel pass `synchronise`); each node's doc
        is its spec citation. With `stream` the partial of the chunk [c0_, c0_ + n_) is stored at the slice's first
        chunk (c0_ == cBegin) and combined into the stored one at the next (a sum adds, a maximum keeps the larger,
        in chunk order: deterministic). With `blocks` a row reduction over all rows is RowsSumB / RowsMaxB
        (rowsched._rows_reduce_blocks)."""
        op = lambda x: _operand_ref(x, self.p)  # noqa: E731
        n = Sym("n_")
        row = _kmul(Sym("i"), Sym("rowStride_"))
        if batch == "all":   # one instruction over the k rows of the pass (batch_segments)
            n, row = _kmul(Sym("k"), Sym("rowStride_")), Lit(0)
        elif batch == "row":   # a row temporary holds the pass's rows: row i of it
            op = lambda x: _row_of(_operand_ref(x, self.p), row)  # noqa: E731
        gs, i_ = Sym("groupStride_"), Sym("i")
        src = "rowIn_" if self.mode == "row" else "res_"
        out = []
        for i in instrs:
            start = len(out)
            self._node(i, out, op, n, row, gs, i_, src, phase, stream, online, batch, blocks)
            pre = []
            if i.when and i.kind in ("rsum", "rmax") and phase is not None and i.level == phase and \
                    self.mode == "col" and batch != "all" and online is None:
                pre = self._zero_unwritten(i, gs, i_, stream)
            elif i.when and i.kind in ("rsum", "rmax") and batch == "all" and self._col_phase is not None \
                    and i.level == self._col_phase:   # COL_SPLIT over many rows: the sub-batch's k partials at once
                pre = self._zero_unwritten(i, gs, i_, False, rows=True)
            out[start:] = pre + guarded(i, out[start:], self.p)
        return merge_guards(out)

    def _zero_unwritten(self, i: Instr, gs, i_, stream: bool, rows: bool = False) -> list:
        """Before the first guarded row reduction of an exchange slot (rowprog.reduction_slots): its partial set to 0
        under the presences that run none of the reductions sharing the slot, so the exchange never copies an
        unwritten slot ([] when they cover every presence the program serves). With `rows` (COL_SPLIT's sub-batch,
        `col_batch_segments`) the k partials from row b0 by one Duplicate."""
        sharers = [j for j in self.p.rsums(i.level) if self.level_slot[j.dst] == self.level_slot[i.dst]]
        if sharers[0] is not i or any(not j.when for j in sharers):
            return []
        left = tuple(pr for pr in self.p.served if not any(pr in j.when for j in sharers))
        if not left:
            return []
        zero = (kir.vec(Op.DUPLICATE, dst=kir.Ref("sums_", self._at(_kmul(self.level_slot[i.dst], gs))),
                        scalar=kir.FConst(0.0), count=Sym("k")) if rows else
                kir.SetValue(kir.Ref("sums_", Bin("+", _kmul(self.level_slot[i.dst], gs), i_)), kir.FConst(0.0)))
        body = [kir.If((Constraint("==", Sym("c0_"), Sym("cBegin")),), (zero,),
                       doc="the slice's first chunk")] if stream else [zero]
        return guarded(dataclasses.replace(i, when=left, dst=""), body, self.p)

    def _node(self, i: Instr, out: list, op, n, row, gs, i_, src: str, phase, stream: bool, online, batch: str,
              blocks: bool = False):
        """Append instruction `i`'s Kernel-IR nodes to `out` (`nodes`, whose locals the arguments are)."""
        doc = spec_doc(self.cites.instr(i))
        k = i.kind
        if k == "sload":
            out.append(kir.GetValue(i.dst, kir.Ref(f"statIn_{i.gm}", self._at(Sym("i"))), doc=doc))
        elif k == "sstore":
            out.append(kir.SetValue(kir.Ref(f"statStage_{i.gm}", self._at(Sym("i"))),
                                    parse_scalar(i.srcs[0], INT_MEMBERS), doc=doc))
        elif k == "scheck":   # an index into the row: Trap() outside [0, hidden_), then its checked value
            out += [kir.TrapUnless(kir.FRef(i.srcs[0]), Sym("hidden_"), doc=doc),
                    kir.FLet(i.dst, kir.FRef(i.srcs[0]))]
        elif k == "sunary":   # a per-row value through Ln / Exp / ...: the vector instruction on 8 lanes of red_
            red = kir.Ref("red_")
            out += [kir.vec(Op.DUPLICATE, dst=red, scalar=parse_scalar(i.arg, INT_MEMBERS), count=Lit(8), doc=doc),
                    kir.vec(entry(i.op).op, dst=red, src0=red, count=Lit(8)),
                    kir.FLet(i.dst, kir.FLoad(red))]
        elif k == "vlane":   # one lane of a row plus a scalar, by the scalar unit (rowalg.one_lane_updates)
            ref = op(i.srcs[0])
            if op(i.dst) != ref:
                raise SpecError(f"row kernel {self.p.name}: a one-lane update {i.dst} is not over its row {i.srcs[0]}")
            col = kir.FIndex(i.srcs[1])   # the checked column index; the row's lanes hold columns c0_ .. c0_ + n - 1
            at = dataclasses.replace(ref, offset=_ksum(ref.offset, _ksub(col, Sym("c0_"))))
            out.append(kir.If((Constraint("<=", Sym("c0_"), col), Constraint("<", col, _ksum(Sym("c0_"), n))),
                              (kir.SetValue(at, kir.FBin("+", kir.FLoad(at), parse_scalar(i.arg, INT_MEMBERS)),
                                            doc=doc),),
                              doc="the chunk holding the row's indexed column"))
        elif lane_acc(i):   # a per-row scalar added to one lane of a column accumulator by the scalar unit
            ref = op(i.dst)
            col = Lit(int(i.arg))   # the lane's column; the accumulator's lanes hold columns c0_ .. c0_ + n - 1
            at = dataclasses.replace(ref, offset=_ksum(ref.offset, _ksub(col, Sym("c0_"))))
            out.append(kir.If((Constraint("<=", Sym("c0_"), col), Constraint("<", col, _ksum(Sym("c0_"), n))),
                              (kir.SetValue(at, kir.FBin("+", kir.FLoad(at), kir.FRef(i.srcs[0])), doc=doc),),
                              doc="the chunk holding the accumulated column"))
        elif k == "sgather":   # a column row input's element at a checked per-row index: one GM read (scalar unit)
            if self.addr is None:
                raise SpecError(f"row kernel {self.p.name}: a GM element at an index needs the addressing")
            if self.p.tensor(i.gm).space in ("row", "elem"):   # the current row's element (rowalg.gather_through_lanewise)
                row = _ksum(Sym("r0" if self.mode == "row" else "g0"), self._at(Sym("i")))   # b0 + i in a sub-batch
                at = _ksum(self.addr.row_expr(i.gm, row), kir.FIndex(i.srcs[0]))
            else:
                at = self.addr.at(i.gm, None, kir.FIndex(i.srcs[0]))
            out.append(kir.FLet(i.dst, kir.FLoad(kir.GmView(f"gm_{self.p.tensor(i.gm).gm}", at)), doc=doc))
        elif k in ("rsum", "rmax") and batch == "all" and self._whole(i.srcs[0]):   # a column row's: one value
            part = f"part_{i.dst}"                                                      # for every row, set k times
            at = (kir.Ref("sums_", self._at(_kmul(self.level_slot[i.dst], gs))) if self._col_phase is not None
                  else kir.Ref("rv_", slot=Lit(self.rsum_index[i.dst])))
            out += [kir.Call("RowSum" if k == "rsum" else "RowMax", (_operand_ref(i.srcs[0], self.p), Sym("n_")),
                             result=part, doc=doc),
                    kir.vec(Op.DUPLICATE, dst=at, scalar=kir.FRef(part), count=Sym("k"),
                            doc="the column row's reduction, the same for each row")]
        elif k in ("rsum", "rmax") and batch == "all" and self._col_phase is not None:   # COL_SPLIT's partials
            out.append(kir.Call(("RowsSum" if k == "rsum" else "RowsMax") + ("B" if blocks else ""),
                                (op(i.srcs[0]), kir.Ref("sums_", self._at(_kmul(self.level_slot[i.dst], gs))),
                                 Sym("k")),
                                doc=doc))
        elif k in ("rsum", "rmax") and batch == "all":   # all k rows at once (rowsched._rows_reduce)
            out.append(kir.Call(("RowsSum" if k == "rsum" else "RowsMax") + ("B" if blocks else ""),
                                (op(i.srcs[0]), kir.Ref("rv_", slot=Lit(self.rsum_index[i.dst])), Sym("k")),
                                doc=doc))
        elif k in ("rsum", "rmax") and self.mode == "row":
            out.append(kir.Call("RowSum" if k == "rsum" else "RowMax", (op(i.srcs[0]), n), result=i.dst,
                                doc=doc))
        elif online is not None and any(i is x for x in online):
            part = f"part_{i.dst}"
            out.append(kir.Call("RowSum" if k == "rsum" else "RowMax", (op(i.srcs[0]), n), result=part, doc=doc))
            out += self._online_steps(i, online, part, doc)
        elif k in ("rsum", "rmax") and phase is not None and i.level == phase:
            part = f"part_{i.dst}"
            at = kir.Ref("sums_", Bin("+", _kmul(self.level_slot[i.dst], gs), i_))
            out.append(kir.Call("RowSum" if k == "rsum" else "RowMax", (op(i.srcs[0]), n), result=part, doc=doc))
            if stream:
                prev = f"prev_{i.dst}"
                both = (kir.FBin("+", kir.FRef(prev), kir.FRef(part)) if k == "rsum"
                        else kir.FMinMax("max", kir.FRef(prev), kir.FRef(part)))
                out.append(kir.If((Constraint("==", Sym("c0_"), Sym("cBegin")),),
                                  (kir.SetValue(at, kir.FRef(part)),),
                                  (kir.FLet(prev, kir.FLoad(at)), kir.SetValue(at, both)),
                                  doc="the slice's first chunk; a later one combines with the chunks before"))
            else:
                out.append(kir.SetValue(at, kir.FRef(part)))
        elif k in ("rsum", "rmax"):
            out.append(kir.GetValue(i.dst, kir.Ref("tots_", Bin("+", _kmul(self.rsum_index[i.dst], gs), i_)),
                                    doc=doc))
        elif k == "vseg":
            out.append(self.seg_nodes(i, doc))
        else:
            at = _ksum(_kmul(Sym("i"), Sym("colAlign_")), Sym("c0_")) if self.resident else \
                self._at(row, Sym("rowStride_"))
            node = instr_node(i, op, n, kir.Ref(f"{src}{i.gm}", at) if k == "cast_in" else None,
                              kir.Ref(f"rowOut_{i.gm}", self._at(row, Sym("rowStride_"))) if k == "store" else None,
                              doc=doc)
            if node is None:
                raise SpecError(f"row kernel {self.p.name}: no Kernel IR for instruction {k}")
            out.append(node)


def presence_member(k: int, name: str | None = None) -> str:
    """The bool member of a kernel class serving several presences that holds whether optional input k (in spec
    order) is present (the class's Init sets it, KernelClass.presence: its pointer is not nullptr); `guard<k>_` when
    presence name k is a runtime guard (`name` a rowguard.GuardName: whether its condition holds, set in Init from
    the attribute's tiling field)."""
    return f"guard{k}_" if isinstance(name, GuardName) else f"hasInput{k}_"


def presence_source(k: int, name: str):
    """The source of presence member k of a joined program (kir.KernelClass.presence): the optional input's Init
    argument, or for a runtime guard (rowguard.GuardName) a kir.TilingCond over its attribute's bits field
    `<attr>Bits` (rowguard.GuardName.bits_conds)."""
    if isinstance(name, GuardName):
        conds, a, b = name.bits_conds(f"{name.attr}Bits")
        return kir.TilingCond(kir.Select(conds, Lit(a), Lit(b)), str(name))
    return cpp_name(name)


def guarded(i: Instr, nodes: list, prog: RowProgram) -> list:
    """`nodes` (what instruction `i` prints as), inside one If per cube of the presences it runs under
    (Instr.when, opgen.kernel.rowpresence.cover: disjoint, so one runs); `nodes` itself when it always runs."""
    if not i.when or not nodes:
        return nodes
    out, body = [], []
    for s in nodes:   # the scalar it defines is declared before the guard, assigned inside (C++ block scope)
        name = s.name if isinstance(s, (kir.FLet, kir.GetValue)) else s.result if isinstance(s, kir.Call) else None
        if name is None or name != i.dst:
            body.append(s)
            continue
        out.append(kir.FLet(name, kir.FConst(0.0), mutable=True))
        if isinstance(s, kir.FLet):
            body.append(kir.FAssign(name, s.value, doc=s.doc))
        elif isinstance(s, kir.Call):
            body.append(dataclasses.replace(s, assign=True))
        else:   # a GetValue: its element read into a local, then assigned
            body += [dataclasses.replace(s, name=f"{name}_when"), kir.FAssign(name, kir.FRef(f"{name}_when"))]
    for cube in cover(i.when, len(prog.presence)):
        out.append(kir.If(presence_conds(cube, prog.presence), tuple(body), doc=f"when {_when_text(cube, prog.presence)}",
                          guard=True))
    return out


def _level_guards(p: RowProgram) -> tuple:
    """((level, If conditions), ...) of the row-reduction levels of `p` whose reductions all run under one `when`
    covered by a single presence cube (opgen.kernel.rowpresence.cover): a chunked phase of such a level computes
    nothing any instruction reads under the other presences (a reader of a reduction runs only where it does,
    rowpresence), so its loop is skipped there (ROW_CHUNK's `level_guards`)."""
    out = []
    for lv in sorted({i.level for i in p.rsums()}):
        whens = {i.when for i in p.rsums(lv)}
        if len(whens) != 1 or () in whens:
            continue
        cubes = list(cover(next(iter(whens)), len(p.presence)))
        if len(cubes) == 1:
            out.append((lv, presence_conds(cubes[0], p.presence)))
    return tuple(out)


def presence_conds(cube: tuple, names: tuple = ()) -> tuple:
    """The If condition of a cube of presences (opgen.kernel.rowpresence.cover: per optional input True present,
    False absent, None either): hasInput<k>_ for a present one, hasInput<k>_ == 0 for an absent one (guard<k>_ for
    a runtime guard among `names`, the program's presence names: presence_member)."""
    name = lambda k: names[k] if k < len(names) else None   # noqa: E731
    return tuple(Sym(presence_member(k, name(k))) if lit else Constraint("==", Sym(presence_member(k, name(k))), Lit(0))
                 for k, lit in enumerate(cube) if lit is not None)


def _is_guard(s) -> bool:
    """Whether statement `s` is a presence guard (kir.If.guard) without an else-branch, as `guarded` makes."""
    return isinstance(s, kir.If) and s.guard and not s.orelse


def merge_guards(stmts: list) -> list:
    """`stmts` with consecutive guards of the same presences (`guarded`) joined into one If, the scalar
    declarations between them moved before the run of guards (a declaration only sets 0.0f: it may move up)."""
    out: list = []
    for s in stmts:
        if isinstance(s, kir.FLet) and s.mutable and s.value == kir.FConst(0.0) and out and _is_guard(out[-1]):
            j = len(out)
            while j > 0 and _is_guard(out[j - 1]):
                j -= 1
            out.insert(j, s)
            continue
        if _is_guard(s) and out and _is_guard(out[-1]) and out[-1].cond == s.cond:
            out[-1] = dataclasses.replace(out[-1], then=out[-1].then + s.then)
            continue
        out.append(s)
    return out


def _when_text(cube: tuple, names: tuple) -> str:
    """A cube of presences as words ("gamma present, beta absent"; a runtime guard's literal its condition or its
    negation: "label_smoothing != 0")."""
    return ", ".join(n.words(lit) if isinstance(n, GuardName) else f"{n} {'present' if lit else 'absent'}"
                     for n, lit in zip(names, cube) if lit is not None)


def _exchange_slots(pr: "_Printer", rsums: list, combine: dict) -> list:
    """[(partial slot, total slot, combine op)] of one level's row reductions, each pair of slots once (reductions of
    presences that never run together share them, rowprog.reduction_slots)."""
    out = []
    for i in rsums:
        t = (pr.level_slot[i.dst], pr.rsum_index[i.dst], combine[i.dst])
        if t not in out:
            out.append(t)
    return out


def _with_rows_reduce(segs: list) -> list:
    """`segs` (_Printer.batch_segments with reduce) when a row reduction runs over all rows in them -- RowsSum /
    RowsMax, or a column row's reduction set once for every row of the pass (a Duplicate into rv_) --, else []
    (every one of them reads a per-row value another per-row loop holds: the plain segments serve)."""
    nodes = [s for _k, ns in segs for s in kir.walk(ns)]
    rows = any(isinstance(c, kir.Call) and c.method in ("RowsSum", "RowsMax", "RowsSumB", "RowsMaxB") for c in nodes)
    col = any(isinstance(v, kir.Vec) and v.op == Op.DUPLICATE and getattr(_vec_dst(v), "tensor", None) == "rv_"
              for v in nodes)
    return segs if rows or col else []


def _vec_dst(v: kir.Vec):
    """The dst operand of Vec `v` (None without one)."""
    try:
        return v.arg("dst")
    except KeyError:
        return None


BLOCK_SCALAR_OPS = {"Adds": Op.ADD_REP, "Muls": Op.MUL_REP, "Maxs": Op.MAX_REP, "Mins": Op.MIN_REP}
"""The binary mask / repeat form applying a scalar op's per-row scalars from their Brcb blocks (the same fp32
operation lane by lane; docs/reference/ascendc.md §1.9)."""
BLOCK_SLOTS = 8
"""Per-row scalar slots of one scalar loop (`_Printer._block_scalar_nodes`): rowsRed_ holds 64 floats a row of the
pass, and 8 align8(k) (the Brcb blocks) + 8 align8(k) <= 64 rowsPerPass for rowsPerPass >= 2 (rowsched.BLOCK_FITS)."""


def _run_segments(pr: "_Printer", instrs: list, reduce: bool = False, block: bool = False) -> list:
    """ROW_SPLIT's `_Printer.batch_segments` of `instrs` (printer `pr`, mode "row"). For a program with per-batch
    rows they cover one run of a pass's rows of one batch (opgen.kernel.rowsched `_batch_runs`): its k rows from row
    b0 of the pass's queue buffers (rowIn_, rowOut_, statIn_), the row temporaries from their row 0."""
    pr._base = Sym("b0") if pr.p.brow else None
    try:
        return pr.batch_segments(instrs, reduce=reduce, block=block)
    finally:
        pr._base = None


def _col_batchable(p: RowProgram, v) -> bool:
    """Whether COL_SPLIT runs row program `p` (of kernel class `v`) over a group's resident rows at once
    (_Printer.col_batch_segments): a `batchable` program with row reductions (a presence-guarded one's exchange
    slot set to 0 first where no reduction sharing it runs, `_Printer._zero_unwritten`), no two-pass reductions
    (ColSplit runs ROW_SPLIT), and a class without ROW_CHUNK in ColSplit; with per-batch rows its groups then lie
    within one batch (opgen.kernel.rowsched `_col_split`: the batch bookkeeping once a group, the batch rows read as
    column rows). The tiling sizes COL_SPLIT's row temporaries a group's rows each for every such program
    (opgen.tiling.rowkernel.col_batch)."""
    return batchable(p) and bool(p.rsums()) and not p.acc_reads and not v.chunk


def _packed_lanes(p: RowProgram) -> int:
    """The lanes a row of batched program `p` must fill whole for its packed values (rowprog.packed) to be issued over
    all rows of a pass: 16 with mask logic (uint16 words of 16 lanes), 8 with a compare or select (a mask byte holds 8
    lanes), else 0 (halves are lane by lane). A row's lanes past its end (the padding DataCopyPad leaves unwritten) then share no mask byte or
    word with its own lanes: the emulation and the Kernel-IR interpreter poison a mask byte with any unwritten source
    lane, where the device computes each lane's bit alone (docs/reference/ascendc.md §1.9)."""
    if any(i.kind == "vlogic" for i in p.instrs):
        return 16
    chain = row_scalar_chain(p) or {}   # a compare by a per-row scalar reads column rows and Brcb blocks, never the
    #                                     padding, and its selects take lane by lane (`_Printer._block_mask_nodes`)
    return 8 if any((i.kind in MASK_KINDS or i.kind in SELECT_KINDS) and id(i) not in chain for i in p.instrs) else 0


def _stores_early(instrs: list) -> list:
    """`instrs` with each per-row statistic store (sstore) moved to just after the instruction defining the value it
    stores (it reads nothing else), so that value's per-row loop ends sooner (_Printer.batch_segments)."""
    out: list = []
    for i in instrs:
        if i.kind == "sstore":
            at = max((k for k, j in enumerate(out) if j.dst in i.srcs), default=len(out) - 1)
            out.insert(at + 1, i)
        else:
            out.append(i)
    return out


def _row_of(r: kir.Ref, row) -> kir.Ref:
    """Row temporary `r` (w_[j]) at element offset `row` (a batched pass's row i); other regions unchanged."""
    return dataclasses.replace(r, offset=row) if r.tensor == "w_" else r


# ------------------------------------------------------------------------------------------------ addressing
class _Addr:
    """GM offsets of one program's operands, printed over the kernel's tiling fields."""

    def __init__(self, prog: RowProgram, dims: DimFields):
        self.p, self.dims = prog, dims

    def view(self, name: str):
        return self.p.tensor(name).view

    def row(self, name: str, r: str) -> str:
        """Element offset of anchor row `r` of row/stat operand `name` (column 0 of the row)."""
        v = self.view(name)
        if v.flat:
            return _sum([_mul(r, self.dims.cpp(v.pitch)), self.dims.cpp(v.col)])
        return f"Off_{name}({r})"

    def row_expr(self, name: str, r):
        """`row` as a Kernel-IR expression (the same terms, in the same order); r a name or a DimExpr."""
        v = self.view(name)
        r = Sym(r) if isinstance(r, str) else r
        if not v.flat:
            return kir.Invoke(f"Off_{name}", (r,))
        return self.at(name, r)

    def at(self, name: str, b=None, *more) -> DimExpr:
        """Element offset (a Kernel-IR expression) of operand `name`'s row `b` (a DimExpr: a batch or anchor row
        of a flat view; None: its column operand's place) plus `more`: b * pitch + col + more..., written in that
        order with zero terms dropped and a pitch of 1 not multiplied."""
        v = self.view(name)
        lead = () if b is None else (_scaled(b, self.dims.sym(v.pitch)),)
        return _offset(*lead, self.dims.sym(v.col), *more)

    def inner_stride(self, name: str) -> str:
        """GM elements between consecutive rows of a run (the innermost leading axis' stride)."""
        v = self.view(name)
        return self.dims.cpp(v.pitch) if v.flat else self.dims.cpp(v.strides[-1])

    def _decompose_nodes(self, name: str, v, shift: tuple | None = None) -> kir.Func:
        """Off_<name>(r) of strided view `v` as a Kernel-IR method: r decomposed into the leading coordinates
        (innermost first), each weighted by its stride, plus the view's column offset; `shift` = (axis, start): that
        coordinate taken relative to start (a piece of a concat). int64 arithmetic, values >= 0."""
        q, off = Sym("q"), Sym("off")
        body: list = [kir.Let("q", Sym("r"), mutable=True), kir.Let("off", self.dims.sym(v.col), mutable=True)]
        k = len(v.strides)
        for i in range(k - 1, -1, -1):
            st = self.dims.sym(v.strides[i])
            ext = None if i == 0 else self.dims.sym(self.dims.layout.extents[i])   # (a field only where read)
            coord = q if i == 0 else Bin("%", q, ext)
            if shift is not None and shift[0] == i and self.dims.sym(shift[1]) != Lit(0):
                coord = _ksub(coord, self.dims.sym(shift[1]))
            if st != Lit(0):
                body.append(kir.Assign("off", _ksum(off, coord if st == Lit(1) else _kmul(coord, st))))
            if i == 0:
                break
            body.append(kir.Assign("q", Bin("//", q, ext)))
        body.append(kir.Return(off))
        return kir.Func(f"Off_{name}", (kir.Param("r"),), tuple(body), ret="int64_t", const=True,
                        doc=f"Element offset in GM of anchor row r of {name} (a strided view or a piece of a concat).")

    def _picked_nodes(self, name: str, v: PickedView) -> kir.Func:
        """Off_<name>(r) of rows picked by an index (PickedView) as a Kernel-IR method: the index of anchor row r
        read by the scalar unit from GM (GlobalTensor::GetValue at the index view's offset of r, an int32 / int64
        element as int64), Trap() unless 0 <= index < the gathered axis' extent (device data: the aclnn layer cannot
        read it; docs/reference/ascendc.md §1.9, Trap), then the source view's offset of r (its stride-0 terms
        dropped) plus index * the gathered axis' stride. int64 arithmetic."""
        body: list = []
        if v.index.flat:
            at = _offset(_scaled(Sym("r"), self.dims.sym(v.index.pitch)), self.dims.sym(v.index.col))
        else:
            at = self._decomposed(v.index, body, "q", "off")
        base = self._decomposed(v, body, "p", "base") if any(as_dim(st) != Lit(0) for st in v.strides) \
            else self.dims.sym(v.col)
        body += [kir.Let("pick", kir.GmAt(f"gm_{v.index.tensor}", at)),
                 kir.TrapUnless(Sym("pick"), self.dims.sym(v.bound),
                                doc=f"{v.index.tensor}: an index into {v.tensor} outside [0, {v.bound}) stops the "
                                    f"kernel"),
                 kir.Return(_offset(base, _scaled(Sym("pick"), self.dims.sym(v.step))))]
        return kir.Func(f"Off_{name}", (kir.Param("r"),), tuple(body), ret="int64_t", const=True,
                        doc=f"Element offset in GM of anchor row r of {name}: the row of {v.tensor} its index "
                            f"{v.index.tensor} picks.")

    def _decomposed(self, v, body: list, q: str, off: str) -> DimExpr:
        """Append to `body` the statements computing view v's element offset of anchor row r into int64 `off` (r
        decomposed into the leading coordinates through `q`, innermost first, each weighted by its stride, plus
        the view's column offset, as `_decompose_nodes`); returns Sym(off)."""
        qs, offs = Sym(q), Sym(off)
        body += [kir.Let(q, Sym("r"), mutable=True), kir.Let(off, self.dims.sym(v.col), mutable=True)]
        k = len(v.strides)
        for i in range(k - 1, -1, -1):
            st = self.dims.sym(v.strides[i])
            ext = None if i == 0 else self.dims.sym(self.dims.layout.extents[i])
            coord = qs if i == 0 else Bin("%", qs, ext)
            if st != Lit(0):
                body.append(kir.Assign(off, _ksum(offs, coord if st == Lit(1) else _kmul(coord, st))))
            if i == 0:
                break
            body.append(kir.Assign(q, Bin("//", qs, ext)))
        return offs

    def off_nodes(self) -> list[kir.Func]:
        """The Off_<operand>(r) methods of every strided row / statistic / segment operand, and Off_<operand>_<k>(r) for
        each piece k of a concat of inputs (the pieces' copies call them), as Kernel-IR methods; rows picked by an
        index read the index in theirs (`_picked_nodes`)."""
        out = []
        for t in self.p.gm:
            v = t.view
            if isinstance(v, PickedView):
                out.append(self._picked_nodes(t.name, v))
                continue
            if isinstance(v, PiecewiseView):
                out += [self._decompose_nodes(f"{t.name}_{k}", pc.view, (v.axis, pc.start))
                        for k, pc in enumerate(v.pieces)]
                continue
            if v is None or v.flat or t.space not in ("row", "elem", "stat", "seg"):
                continue
            out.append(self._decompose_nodes(t.name, v))
        return out

    def coord(self, axis: int, r) -> DimExpr:
        """Anchor row r's (a DimExpr) coordinate on leading axis `axis`: r over the product of the inner extents,
        modulo the axis' extent."""
        n = len(self.dims.layout.extents)
        inner = [self.dims.sym(self.dims.layout.extents[j]) for j in range(axis + 1, n)]
        q = Bin("//", r, _kmul(*inner)) if inner else r
        return q if axis == 0 else Bin("%", q, self.dims.sym(self.dims.layout.extents[axis]))

    def piece_copy(self, t, mode: str, doc: str) -> tuple:
        """The copy-in of concat operand `t` (a PiecewiseView) as Kernel-IR statements: each run of rows from the
        piece it lies in (a run never crosses a piece when the concat axis is the innermost), read at that piece's
        Off_<operand>_<k>(r). mode "row": ROW_SPLIT, rows [r0, r0 + k) of hidden_ elements into LocalTensor t;
        "col": COL_SPLIT, rows [g0, g0 + k) of the column chunk [c0_, c0_ + n_) into res_<operand>. `doc`: the
        copies' citation."""
        v, ct = t.view, _ctype(t.dtype)
        inner = v.axis == len(self.dims.layout.extents) - 1
        dst, stride, n, base = ("t", Sym("colAlign_"), Sym("hidden_"), Sym("r0")) if mode == "row" else \
            (f"res_{t.name}", Sym("rowStride_"), Sym("n_"), Sym("g0"))
        r, a, m, j, sz = Sym("r"), Sym("a"), Sym("m"), Sym("j"), kir.SizeOf(ct)
        head = [kir.Let("r", _ksum(base, j)), kir.Let("a", self.coord(v.axis, r)),
                kir.Let("m", kir.Invoke("RunRows", (r, _ksub(Sym("k"), j))), mutable=True)]
        arms = []
        for k, pc in enumerate(v.pieces):
            stop = self.dims.sym(pc.stop)
            body: list = []
            if inner:
                body.append(kir.Assign("m", Fn("min", (m, _ksub(stop, a)))))
            rs = self.dims.sym(pc.view.strides[-1])
            if pc.view.runs:
                gap = _kmul(_ksub(rs, n), sz)
            else:
                body.append(kir.Assign("m", Lit(1)))
                gap = Lit(0)
            off = kir.Invoke(f"Off_{t.name}_{k}", (r,))
            body.append(kir.Copy(kir.Ref(dst, _kmul(j, stride)),
                                 kir.GmView(f"gm_{pc.view.tensor}", off if mode == "row" else _ksum(off, Sym("c0_"))),
                                 m, _kmul(n, sz), gap, kir.Invoke("GapBlocks", (stride, n, sz)), doc=doc))
            arms.append((Constraint("<", a, stop), body))
        chain = tuple(arms[-1][1])
        for cond, body in reversed(arms[:-1]):
            chain = (kir.If((cond,), tuple(body), chain),)
        return (kir.For("j", Lit(0), Sym("k"), None, tuple(head) + chain + (kir.Assign("j", _ksum(j, m)),),
                        doc="one copy per run of rows at one GM stride, in one piece"),)


def _mul(a: str, b: str) -> str:
    if b == "0" or a == "0":
        return "0"
    if b == "1":
        return a
    return f"{a} * {b}"


def _sum(terms: list[str]) -> str:
    ts = [t for t in terms if t != "0"]
    return " + ".join(ts) if ts else "0"


def _operand_ctx(prog: RowProgram, addr: _Addr, role: str, space: str, cites: Cites) -> list[dict]:
    """The template context of the GM operands of `role` and `space` (their CopyIn / CopyOut statements); "spec" is
    the trailing comment citing the spec lines of the instructions that load or store the operand."""
    out = []
    kinds = {("in", "row"): ("cast_in",), ("in", "stat"): ("sload",), ("out", "row"): ("store",),
             ("out", "stat"): ("sstore",)}.get((role, space), ())
    for t in prog.gm:
        if t.role != role or t.space != space:
            continue
        v = t.view
        ct = _ctype(t.dtype)
        spec = spec_comment(cites.gm(t.name, kinds))
        if isinstance(v, PiecewiseView):
            doc = spec_doc(cites.gm(t.name, kinds))
            out.append({"op": t.name, "gm": t.gm, "ct": ct, "flat": False, "pieces": True, "spec": spec,
                        "copy_row": addr.piece_copy(t, "row", doc), "copy_col": addr.piece_copy(t, "col", doc)})
            continue
        stride = addr.inner_stride(t.name)
        runs = v.flat or v.runs
        out.append({"op": t.name, "gm": t.gm, "ct": ct, "flat": v.flat, "pieces": False, "spec": spec,
                    "qt": "float" if gathered_stat(t) else ct,   # a gathered per-row value: converted
                    "run": "k" if v.flat else ("RunRows(r, k - j)" if runs else "1"),
                    "off_r0": addr.row(t.name, "r0"), "off_g0": addr.row(t.name, "g0"), "off_r": addr.row(t.name, "r"),
                    "gap_row": "0" if stride == "hidden_" or not runs else f"({stride} - hidden_) * sizeof({ct})",
                    "gap_col": f"({stride} - n_) * sizeof({ct})" if runs else "0"})
    return out


# ------------------------------------------------------------------------------------------------ setup / flush
def _setup_nodes(prog: RowProgram, space: str, addr: "_Addr", cites: Cites) -> list:
    """LoadColumns (`space` "col") or LoadBatch(b) ("brow") as Kernel-IR statements: each operand of the space loaded into its fp32 row by LoadRow<S> from GM at its column offset
    (a batch row: batch b's row) + c0_, n_ elements; the space's instructions (instr_node); for the columns, the
    column accumulators set to their kind's identity (rowprog.ACC_INIT). No syncs: the kernel pass `synchronise`
    places them.
    Raises SpecError for an instruction with no Kernel-IR node."""
    op = lambda x: _operand_ref(x, prog)  # noqa: E731
    n = Sym("n_")
    out: list = []
    for i in prog.instrs:
        if i.space != space or i.dst in prog.late:   # late: after the exchange (_cross_core_lines)
            continue
        doc = spec_doc(cites.instr(i))
        if i.kind == "load":
            t = prog.tensor(i.gm)
            at = addr.at(i.gm, Sym("b") if space == "brow" else None, Sym("c0_"))
            half = i.op == "half"   # a byte row: its halves into the buffer, widened by the vwiden after it
            dst = dataclasses.replace(op(i.dst), as_dtype="half") if half else op(i.dst)
            out += guarded(i, [kir.Call("LoadByteRow" if half else "LoadRow", (dst, kir.GmView(f"gm_{t.gm}", at), n),
                                        targs=(_ctype(t.dtype),), doc=doc)], prog)
            continue
        if i.kind == "acc":
            continue
        node = instr_node(i, op, n, doc=doc)
        if node is None:
            raise SpecError(f"row kernel {prog.name}: no Kernel IR for {space} instruction {i.kind}")
        out += guarded(i, [node], prog)
    if space == "col":
        out += _zero_nodes(prog, "col", cites)
    return merge_guards(out)


def _read_at_expr(prog: RowProgram, a: str, b) -> DimExpr:
    """`_read_at` as a Kernel-IR offset into ws_ (elements): read accumulator `a`'s complete row for the second pass,
    batch `b`'s row (a DimExpr) of a per-batch one."""
    cols = [x for x in prog.acc_reads if x not in prog.brow]
    brows = [x for x in prog.acc_reads if x in prog.brow]
    row = _kmul(kir.BLOCK_NUM, Sym("wsRowsPerCore_"))
    if a in cols:
        return _kmul(_ksum(row, Lit(cols.index(a))), Sym("colAlign_"))
    per = Bin("//", Sym("rowNum_"), Sym("seqLen_"))
    j = brows.index(a)
    terms = [row] + ([Lit(len(cols))] if cols else []) + ([per if j == 1 else _kmul(Lit(j), per)] if j else []) + [b]
    return _kmul(_ksum(*terms), Sym("colAlign_"))


def _finish_nodes(prog: RowProgram, a: str, buf: kir.Ref, tmp: kir.Ref, n, cites: Cites) -> list:
    """What completes accumulator `a` (held in UB row `buf`, `n` lanes) before it is stored: its finishing
    instructions (RowProgram.acc_post: a mean's division by the count of rows it summed, read from tiling data -- a
    true division, as the interpreter's sum / count --, or the scalar arithmetic of the spec after the reduction)
    with the row `x` as `buf` and the scratch row `t` as `tmp`. Raises SpecError for one with no Kernel-IR node."""
    doc = spec_doc(cites.acc(a))
    out = []
    for i in prog.acc_post.get(a, ()):
        node = instr_node(i, lambda name: buf if name == "x" else tmp, n, doc=doc)
        if node is None:
            raise SpecError(f"row kernel {prog.name}: no Kernel IR for the finishing instruction {i.kind} of {a}")
        out.append(node)
    return out


def _flush_nodes(prog: RowProgram, mode: str, addr: "_Addr", cites: Cites) -> list:
    """FlushRow (`mode` "row") / FlushCol ("col") as Kernel-IR statements: each
    batch accumulator of batch curBatch_ finished and stored to its output (and, when a second pass reads it, to its
    workspace row) when this core saw the whole batch or owns its columns; in ROW_SPLIT a batch split across cores
    stores this core's fp32 partial row to the workspace instead (slot 0: the core's first batch, 1: its last)."""
    accs = [(a, v) for a, v in _acc_items(prog) if v[0] == "brow"]
    if not accs:
        return []
    ncol = sum(1 for _a, v in _acc_items(prog) if v[0] == "col")
    n, w0 = Sym("n_"), kir.Ref("w_", slot=Lit(0))
    direct: list = []
    for a, (_sp, name, rm) in accs:
        ref = _operand_ref(a, prog)
        doc = spec_doc(cites.acc(a))
        direct += _finish_nodes(prog, a, ref, w0, n, cites)
        if name is not None:
            t = prog.tensor(name)
            at = addr.at(name, Sym("curBatch_"), Sym("c0_"))
            direct.append(kir.Call("StoreRow", (kir.GmView(f"gm_{t.gm}", at), ref, rm, n), targs=(_ctype(t.dtype),),
                                   doc=doc))
        if a in prog.acc_reads:   # the complete batch row, for the second pass over the rows
            direct.append(kir.Call("StoreRow", (kir.GmView("ws_", _read_at_expr(prog, a, Sym("curBatch_"))), ref,
                                                "CAST_NONE", n), targs=("float",), doc=doc))
    if mode == "col":
        return direct
    whole = (Constraint(">=", _kmul(Sym("curBatch_"), Sym("seqLen_")), Sym("rowStart_")),
             Constraint("<=", _kmul(_ksum(Sym("curBatch_"), Lit(1)), Sym("seqLen_")), Sym("rowEnd_")))
    partial: list = [kir.Let("slot", kir.Select((Constraint("==", Sym("curBatch_"),
                                                           Bin("//", Sym("rowStart_"), Sym("seqLen_"))),),
                                                Lit(0), Lit(1)))]
    for j, (a, _v) in enumerate(accs):
        at = _kmul(_ksum(_kmul(kir.BLOCK_IDX, Sym("wsRowsPerCore_")), Lit(ncol), _kmul(Sym("slot"), Lit(len(accs))),
                         Lit(j)), Sym("colAlign_"))
        partial.append(kir.Call("StoreRow", (kir.GmView("ws_", at), _operand_ref(a, prog), "CAST_NONE", n),
                                targs=("float",), doc=spec_doc(cites.acc(a))))
    return [kir.Comment("the whole batch in this core's rows: finished and stored; else its partial row to the "
                        "workspace"),
            kir.If(whole, tuple(direct), tuple(partial))]


def _zero_nodes(prog: RowProgram, space: str, cites: Cites) -> list:
    """The accumulators of `space` (brow: at each new batch; col, with the totals:
    once per column chunk) set to the identity of their kind (rowprog.ACC_INIT), Duplicate over n_ lanes."""
    return [kir.vec(Op.DUPLICATE, dst=_operand_ref(a, prog),
                    scalar=parse_scalar(ACC_INIT[prog.acc_kinds.get(a, "sum")], ()), count=Sym("n_"),
                    doc=spec_doc(cites.acc(a)))
            for a, (sp, _n, _r) in _acc_items(prog) if sp == space or (sp, space) == ("total", "col")]


def _acc_items(prog: RowProgram) -> list:
    """[(accumulator, (space, output or None, round mode or None))]: the stored accumulators (RowProgram.accs), then
    the column accumulators only read by a second pass over the rows (RowProgram.acc_reads)."""
    return list(prog.accs.items()) + [(a, ("brow" if a in prog.brow else "col", None, None))
                                      for a in prog.acc_reads if a not in prog.accs]


def _totals(prog: RowProgram) -> list:
    """[(accumulator, (space, output, round mode))] of the reductions over every axis (space "total"), in order."""
    return [(a, v) for a, v in prog.accs.items() if v[0] == "total"]


def _total_red(prog: RowProgram, a: str) -> str:
    """The helper reducing total `a`'s column row to one value: RowMax for a maximum, RowSum for a sum or mean.
    Raises SpecError for a minimum over every axis (no RowMin helper; the rows family does not lower one)."""
    kind = prog.acc_kinds.get(a, "sum")
    if kind == "min":
        raise SpecError(f"row kernel {prog.name}: a minimum over every axis ({a}) has no row helper in the rows family")
    return "RowMax" if kind == "max" else "RowSum"


def _partials(prog: RowProgram, a: str) -> str:
    """The cross-core combining helper of accumulator `a` (opgen.kernel.rowsched: SumPartials for a sum or mean,
    MaxPartials / MinPartials for a maximum / minimum): the exchange applies the accumulator's own operation, in
    core order."""
    return {"max": "MaxPartials", "min": "MinPartials"}.get(prog.acc_kinds.get(a), "SumPartials")


def _gm_at(addr: "_Addr", name: str, *terms) -> kir.GmView:
    """Output `name`'s GM tensor at its column offset plus `terms` (DimExprs; Lit(0) terms dropped)."""
    return kir.GmView(f"gm_{addr.p.tensor(name).gm}", addr.at(name, None, *terms))


def _offset(*terms) -> DimExpr:
    """terms summed as written, Lit(0) ones dropped (Lit(0) when none is left)."""
    ts = [as_dim(x) for x in terms if as_dim(x) != Lit(0)]
    return _ksum(*ts) if ts else Lit(0)


def _scaled(x, k) -> DimExpr:
    """x * k as written; Lit(0) for k = 0, x itself for k = 1."""
    k = as_dim(k)
    return Lit(0) if k == Lit(0) else x if k == Lit(1) else _kmul(x, k)


def _store(prog: RowProgram, dst: kir.GmView, name: str | None, src: kir.Ref, rm: str, n, doc: str):
    """StoreRow<T>(dst, src, rm, n): fp32 row `src` cast to output `name`'s type (fp32 to workspace when `name` is
    None) and written to GM; inside If(the output's presence cube) when the class writes `name` under some
    presences only (opgen.kernel.rowpresence.output_guard: an accumulated column output)."""
    ct = "float" if name is None else _ctype(prog.tensor(name).dtype)
    call = kir.Call("StoreRow", (dst, src, rm if name is not None else "CAST_NONE", n), targs=(ct,), doc=doc)
    cube = output_guard(prog, name) if name is not None else ()
    if not cube:
        return call
    return kir.If(presence_conds(cube, prog.presence), (call,), doc=f"when {_when_text(cube, prog.presence)}",
                  guard=True)


def _ws_row(j) -> DimExpr:
    """The element offset of this core's workspace row j of the ROW_SPLIT exchange ((core * wsRowsPerCore_ + j)
    rows of colAlign_)."""
    return _kmul(_ksum(_kmul(kir.BLOCK_IDX, Sym("wsRowsPerCore_")), Lit(j)), Sym("colAlign_"))


def _exchanged_acc_nodes(prog: RowProgram, a: str, name, rm: str, combine: kir.Call, out_at, read_at,
                         cites: Cites) -> list:
    """ROW_SPLIT's cross-core step for accumulator `a` over columns [r0, r0 + rn): the cores' partials combined into
    w_[0] (the call `combine`), finished (_finish_nodes), stored to its output `name` (when it has one) at
    `out_at` + r0, and, when a second pass reads it, to its read-back region at `read_at` + r0 (DimExprs)."""
    w0, w1, rn, r0 = kir.Ref("w_", slot=Lit(0)), kir.Ref("w_", slot=Lit(1)), Sym("rn"), Sym("r0")
    doc = spec_doc(cites.acc(a))
    out = [combine] + _finish_nodes(prog, a, w0, w1, rn, cites)
    if name is not None:
        t = prog.tensor(name)
        out.append(_store(prog, kir.GmView(f"gm_{t.gm}", _offset(out_at, r0)), name,
                          w0, rm, rn, doc))
    if a in prog.acc_reads:   # the complete slice, for every core's second pass (after the exchange region)
        out.append(_store(prog, kir.GmView("ws_", _ksum(read_at, r0)), None, w0, rm, rn, doc))
    return out


def _cross_core_nodes(prog: RowProgram, addr: _Addr, cites: Cites) -> list:
    """ROW_SPLIT epilogue as Kernel-IR statements: this core's partial column rows, per-batch partial rows (FlushRow
    wrote them) and partial totals to workspace, SyncAll; each core combines its column slice [r0, r0 + rn) over the
    cores in core order (SumPartials / MaxPartials / MinPartials), finishes and stores it; per-batch ones for each
    batch split across cores (its cores CoreOfRow(first row) .. CoreOfRow(last row)) in (batch, column slice) items
    dealt out over all the cores (`_split_batch_nodes`); core 0 combines the totals;
    with a second pass, the complete rows read back by every core and the column values computed from them
    (RowProgram.late, stored by core 0). The slices' sizes come from tiling field colsPerReduceCore."""
    cols = [(a, v) for a, v in _acc_items(prog) if v[0] == "col"]
    brows = [(a, v) for a, v in _acc_items(prog) if v[0] == "brow"]
    tots = _totals(prog)
    if not cols and not brows and not tots:
        return []
    w0, n, hid = kir.Ref("w_", slot=Lit(0)), Sym("n_"), Sym("hidden_")
    pre: list = []
    for j, (a, _v) in enumerate(cols):
        pre.append(_store(prog, kir.GmView("ws_", _ws_row(j)), None, _operand_ref(a, prog), "CAST_NONE", n,
                          spec_doc(cites.acc(a))))
    base = len(cols) + 2 * len(brows)   # the workspace rows of the totals: after the column and batch partials
    for j, (a, _v) in enumerate(tots):   # this core's partial total: its column row reduced, one element
        pre += [kir.Call(_total_red(prog, a), (_operand_ref(a, prog), n), result=f"part{j}"),
                kir.vec(Op.DUPLICATE, dst=w0, scalar=kir.FRef(f"part{j}"), count=Lit(1)),
                _store(prog, kir.GmView("ws_", _ws_row(base + j)), None, w0, "CAST_NONE", Lit(1),
                       spec_doc(cites.acc(a)))]
    out = list(pre) + [
        kir.Barrier(Pipe.ALL, doc="the partial rows are in GM before any core reads them"), kir.SyncAll()]
    per, r0, rn = Sym("colsPerReduceCore"), Sym("r0"), Sym("rn")
    last_core = _ksub(kir.BLOCK_NUM, Lit(1))
    body: list = []
    for j, (a, (_sp, name, rm)) in enumerate(cols):
        body += _exchanged_acc_nodes(
            prog, a, name, rm, kir.Call(_partials(prog, a), (Lit(j), Lit(0), r0, rn, Lit(0), last_core, Lit(-1))),
            addr.at(name) if name is not None else Lit(0),
            _read_at_expr(prog, a, None) if a in prog.acc_reads else Lit(0), cites)
    if body:   # this core's column slice [r0, r0 + rn) of the column reductions
        out.append(kir.Scope((kir.Let("r0", _kmul(kir.BLOCK_IDX, per)),
                              kir.Let("rn", kir.Select(Constraint("<", r0, hid), Fn("min", (_ksub(hid, r0), per)),
                                                       Lit(0))),
                              kir.If((Constraint(">", rn, Lit(0)),), tuple(body)))))
    if brows:
        out.append(kir.Scope(tuple(_split_batch_nodes(prog, addr, brows, len(cols), cites))))
    if tots:   # core 0 combines the cores' partial totals in core order and writes each total
        t_body: list = []
        for j, (a, (_sp, name, rm)) in enumerate(tots):
            t_body += [kir.Call(_partials(prog, a), (Lit(base + j), Lit(0), Lit(0), Lit(1), Lit(0), last_core,
                                                     Lit(-1)))]
            t_body += _total_store_nodes(prog, a, name, rm, cites)
        out.append(kir.If((Constraint("==", kir.BLOCK_IDX, Lit(0)),), tuple(t_body)))
    if prog.acc_reads:   # every core reads the complete column reductions back for the second pass over its rows
        out += [kir.Barrier(Pipe.ALL, doc="the complete slices are in GM before any core reads them"), kir.SyncAll()]
        late: list = []
        for a in prog.acc_reads:
            if a not in prog.brow:   # per-batch ones: at each batch of the second pass (_reload_nodes)
                late.append(kir.Call("LoadRow", (_operand_ref(a, prog), kir.GmView("ws_", _read_at_expr(prog, a, None)),
                                                 hid), targs=("float",), doc=spec_doc(cites.acc(a))))
        op = lambda x: _operand_ref(x, prog)  # noqa: E731
        for i in prog.instrs:   # the column values of complete reductions, every core the whole row
            if i.space == "col" and i.dst in prog.late:
                node = instr_node(i, op, n, doc=spec_doc(cites.instr(i)))
                if node is None:
                    raise SpecError(f"row kernel {prog.name}: no Kernel IR for late column instruction {i.kind}")
                late.append(node)
        out += late
        if prog.late_stores:
            out.append(kir.If((Constraint("==", kir.BLOCK_IDX, Lit(0)),), tuple([
                _store(prog, _gm_at(addr, g), g, _operand_ref(v, prog), rm, hid, "")
                for v, g, rm in prog.late_stores])))
    return [kir.Scope((kir.Comment("the cross-core exchange: the reductions over rows completed through workspace"),
                       *out))]


def _split_batch_nodes(prog: RowProgram, addr: _Addr, brows: list, first: int, cites: Cites) -> list:
    """ROW_SPLIT's exchange of the per-batch reductions `brows` ([(accumulator, ("brow", output, round mode))], their
    workspace rows from `first` on): each batch split across cores (a core's first row inside it) is combined once,
    over the cores that hold its rows (CoreOfRow(first row) .. CoreOfRow(last row)), in items of (batch, column slice)
    dealt out over all the cores in turn: item t * bSlices + s (the t-th split batch, columns [s * bCols, ...)) goes
    to core (t * bSlices + s) % GetBlockNum(). A first scalar pass counts the split batches (splitN); each batch
    is cut into bSlices = ceil(GetBlockNum() / splitN) slices of bCols = AlignUp(ceil(hidden_ / bSlices), 16)
    columns (whole 32-byte blocks of a 2-byte output: no two cores write one block), so that every core has an item
    where there are enough of them and few batches still spread over the cores, each item as wide as that allows:
    per item the same instructions (a load and an Add per holding core, the finish, a store) cover many columns.
    Every column of every batch is combined by exactly one core in the cores' order, as before: the same values."""
    b, seq, start, last = Sym("b"), Sym("seqLen_"), Sym("start"), Sym("last")
    hid, r0, rn, t, s = Sym("hidden_"), Sym("r0"), Sym("rn"), Sym("t"), Sym("s")
    slices, cols = Sym("bSlices"), Sym("bCols")
    split = (Constraint("!=", Bin("%", start, seq), Lit(0)), Constraint("!=", Bin("//", start, seq),
                                                                        Sym("lastBatch")))
    step: list = [kir.Let("b", Bin("//", start, seq)), kir.Assign("lastBatch", b),
                  kir.Let("last", kir.Select(Constraint("<", _kmul(_ksum(b, Lit(1)), seq), Sym("rowNum_")),
                                             _ksub(_kmul(_ksum(b, Lit(1)), seq), Lit(1)),
                                             _ksub(Sym("rowNum_"), Lit(1))))]
    item: list = [kir.Let("r0", _kmul(s, cols)), kir.Let("rn", Fn("min", (_ksub(hid, r0), cols)))]
    for j, (a, (_sp, name, rm)) in enumerate(brows):
        out_at = addr.at(name, b) if name is not None else Lit(0)
        item += _exchanged_acc_nodes(
            prog, a, name, rm, kir.Call(_partials(prog, a), (
                Lit(first + j), Lit(len(brows)), r0, rn, kir.Invoke("CoreOfRow", (_kmul(b, seq),)),
                kir.Invoke("CoreOfRow", (last,)), b)),
            out_at, _read_at_expr(prog, a, b) if a in prog.acc_reads else Lit(0), cites)
    mine = Constraint("==", Bin("%", _ksum(_kmul(t, slices), s), kir.BLOCK_NUM), kir.BLOCK_IDX)
    step += [kir.For("s", Lit(0), Bin("//", _ksum(hid, _ksub(cols, Lit(1))), cols), Lit(1), (
                 kir.If((mine,), tuple(item)),)),
             kir.Assign("t", _ksum(t, Lit(1)))]
    split_n = Sym("splitN")
    return [
        kir.Comment("each batch split across cores (a core's first row inside it), combined once: (batch, column "
                    "slice) items dealt out over the cores"),
        kir.Let("splitN", Lit(0), mutable=True),
        kir.Let("lastBatch", Lit(-1), mutable=True),
        kir.For("c", Lit(1), kir.BLOCK_NUM, Lit(1), (
            kir.Let("start", kir.Invoke("RowStartOf", (Sym("c"),))),
            kir.If(split, (kir.Assign("lastBatch", Bin("//", start, seq)), kir.Assign("splitN", _ksum(split_n, Lit(1))))),
        )),
        kir.Let("bSlices", Bin("//", _ksum(kir.BLOCK_NUM, _ksub(Fn("max", (split_n, Lit(1))), Lit(1))),
                               Fn("max", (split_n, Lit(1))))),
        kir.Let("bCols", _kmul(Bin("//", _ksum(Bin("//", _ksum(hid, _ksub(slices, Lit(1))), slices), Lit(15)),
                                   Lit(16)), Lit(16))),
        kir.Assign("lastBatch", Lit(-1)),
        kir.Let("t", Lit(0), mutable=True),
        kir.For("c", Lit(1), kir.BLOCK_NUM, Lit(1), (
            kir.Let("start", kir.Invoke("RowStartOf", (Sym("c"),))),
            kir.If(split, tuple(step)),
        )),
    ]


def _total_store_nodes(prog: RowProgram, a: str, name: str, rm: str, cites: Cites) -> list:
    """The combined total in w_[0] (lane 0): finished (w_[1] scratch) and written as output `name`'s one element."""
    t = prog.tensor(name)
    w0, w1 = kir.Ref("w_", slot=Lit(0)), kir.Ref("w_", slot=Lit(1))
    return _finish_nodes(prog, a, w0, w1, Lit(1), cites) + [
        _store(prog, kir.GmView(f"gm_{t.gm}", Lit(0)), name, w0, rm, Lit(1), spec_doc(cites.acc(a)))]


def _reload_nodes(prog: RowProgram, cites: Cites, addr: "_Addr | None" = None) -> list:
    """The second pass's reads of the complete per-batch reductions at a new batch `b` (RowSchedule.reload_batch),
    as Kernel-IR statements: the rows read back, then the per-batch values (RowProgram.btotals: each total a
    RowSum / RowMax of its read-back row, then the scalar arithmetic on them, into float members) and, by the core
    holding the batch's first row, the per-batch outputs (RowProgram.batch_stores: the value duplicated into lane 0
    of red_, StoreRow of one element)."""
    b, hid = Sym("b"), Sym("hidden_")
    out: list = [kir.Call("LoadRow", (_operand_ref(a, prog), kir.GmView("ws_", _read_at_expr(prog, a, b)), hid),
                          targs=("float",), doc=spec_doc(cites.acc(a))) for a in prog.acc_reads if a in prog.brow]
    for name, src, kind in prog.btotals:
        if kind == "expr":
            out.append(kir.FAssign(name, parse_scalar(src, INT_MEMBERS)))
        else:
            out.append(kir.Call("RowMax" if kind == "max" else "RowSum", (_operand_ref(src, prog), hid),
                                result=f"{name}v", doc=spec_doc(cites.acc(src))))
            out.append(kir.FAssign(name, kir.FRef(f"{name}v")))
    if prog.batch_stores and addr is not None:
        red = kir.Ref("red_")
        stores: list = []
        for i in prog.batch_stores:
            at = addr.at(i.gm, b)
            stores += [kir.vec(Op.DUPLICATE, dst=red, scalar=parse_scalar(i.arg, INT_MEMBERS), count=Lit(1),
                               doc=spec_doc(i.loc)),
                       _store(prog, kir.GmView(f"gm_{prog.tensor(i.gm).gm}", at), i.gm, red, i.op, Lit(1),
                              spec_doc(i.loc))]
        out.append(kir.If((Constraint(">=", _kmul(b, Sym("seqLen_")), Sym("rowStart_")),), tuple(stores),
                          doc="this core holds the batch's first row: it writes the batch's values"))
    return out


def _col_total_nodes(prog: RowProgram, cites: Cites) -> tuple[list, list]:
    """COL_SPLIT's totals (reductions over every axis) as Kernel-IR statements: (before the column chunks, this
    core's partial tot<j>_ declared at its kind's identity; after them, each partial to its own 32-byte workspace
    slot after the row-reduction exchange's region, SyncAll, core 0 combines the cores' partials in core order with
    the accumulator's op (CombineTotals), finishes and writes each total). The per-chunk step: _col_final_nodes."""
    tots = _totals(prog)
    if not tots:
        return [], []
    init = [kir.FLet(f"tot{j}_", parse_scalar(ACC_INIT[prog.acc_kinds.get(a, "sum")], ()), mutable=True)
            for j, (a, _v) in enumerate(tots)]
    nsums, nlevel = reduction_slot_counts(prog)
    # after the level partials and totals: 32-byte slots of groupStride_ = AlignUp(G, 8) floats (tiling: wsColBytes)
    at = _kmul(_ksum(_kmul(Sym("cores"), Lit(max(nlevel, 1))), Lit(max(nsums, 1))), Sym("groupStride_"))
    w0 = kir.Ref("w_", slot=Lit(0))
    end: list = [kir.Let("totAt", at)]
    for j, (a, _v) in enumerate(tots):
        end += [kir.vec(Op.DUPLICATE, dst=w0, scalar=kir.FRef(f"tot{j}_"), count=Lit(1)),
                _store(prog, kir.GmView("ws_", _ksum(Sym("totAt"), _kmul(_ksum(_kmul(Sym("core"), Lit(len(tots))),
                                                                                Lit(j)), Lit(8)))),
                       None, w0, "CAST_NONE", Lit(1), spec_doc(cites.acc(a)))]
    end += [kir.Barrier(Pipe.ALL, doc="the partial totals are in GM before core 0 reads them"), kir.SyncAll()]
    body: list = []
    for j, (a, (_sp, name, rm)) in enumerate(tots):
        body.append(kir.Call("CombineTotals", (Sym("totAt"), Lit(j), Lit(len(tots)), _ksub(Sym("cores"), Lit(1)),
                                               _total_red(prog, a) == "RowMax")))
        body += _total_store_nodes(prog, a, name, rm, cites)
    end.append(kir.If((Constraint("==", Sym("core"), Lit(0)),), tuple(body)))
    return init, end


def _col_final_nodes(prog: RowProgram, addr: _Addr, cites: Cites) -> list:
    """COL_SPLIT epilogue of a column chunk as Kernel-IR statements: the core owns its columns, so column sums are
    finished and written directly; a total's column row is reduced over the chunk's columns into this core's partial
    tot<j>_ (_col_total_nodes)."""
    out: list = []
    for j, (a, _v) in enumerate(_totals(prog)):
        red = _total_red(prog, a)
        part, tot = kir.FRef(f"part{j}"), kir.FRef(f"tot{j}_")
        out += [kir.Call(red, (_operand_ref(a, prog), Sym("n_")), result=f"part{j}"),
                kir.FAssign(f"tot{j}_", kir.FMinMax("max", part, tot) if red == "RowMax"
                            else kir.FBin("+", tot, part, paren=False))]
    for a, (sp, name, rm) in prog.accs.items():
        if sp == "col":
            ref = _operand_ref(a, prog)
            out += _finish_nodes(prog, a, ref, kir.Ref("w_", slot=Lit(0)), Sym("n_"), cites)
            out.append(_store(prog, _gm_at(addr, name, Sym("c0_")), name, ref, rm, Sym("n_"), spec_doc(cites.acc(a))))
    return out


def _gm_rows(prog: RowProgram, addr: _Addr, role: str, space: str, ctx: list[dict]) -> tuple:
    """The GM operands of `role` and `space` as the ROW_SPLIT schedule's GmRows (opgen.kernel.rowsched), from their
    template context `ctx` (_operand_ctx: the same operands in the same order) for the citation and concat lines."""
    out = []
    by_op = {c["op"]: c for c in ctx}
    for t in prog.gm:
        if t.role != role or t.space != space:
            continue
        c, v, ct = by_op[t.name], t.view, _ctype(t.dtype)
        cube = output_guard(prog, t.name) if role == "out" else input_guard(prog, t.gm)   # not under every presence
        when = {"guard": presence_conds(cube, prog.presence), "guard_doc": f"when {_when_text(cube, prog.presence)}"} \
            if cube else {}
        if c["pieces"]:
            out.append(GmRows(t.name, t.gm, ct, "pieces", spec=c["spec"], pieces=tuple(c["copy_row"]),
                              pieces_col=tuple(c["copy_col"]), **when))
            continue
        if gathered_stat(t):   # read row by row by the scalar unit at each row's offset
            out.append(GmRows(t.name, t.gm, ct, "gather", spec=c["spec"],
                              at=addr.row_expr(t.name, _ksum(Sym("r0"), Sym("j"))),
                              at_g0=addr.row_expr(t.name, _ksum(Sym("g0"), Sym("j"))), **when))
            continue
        runs = v.flat or v.runs
        stride = addr.dims.sym(v.pitch if v.flat else v.strides[-1])
        gap = Lit(0) if stride == Sym("hidden_") or not runs else _kmul(_ksub(stride, Sym("hidden_")),
                                                                         kir.SizeOf(ct))
        gap_col = _kmul(_ksub(stride, Sym("n_")), kir.SizeOf(ct)) if runs else Lit(0)
        layout = "flat" if v.flat else ("runs" if runs else "single")
        out.append(GmRows(t.name, t.gm, ct, layout, addr.row_expr(t.name, "r0"), addr.row_expr(t.name, "r"), gap,
                          c["spec"], rm=c.get("rm", ""), off_g0=addr.row_expr(t.name, "g0"), gap_col=gap_col,
                          **when))
    return tuple(out)


def row_split_ir(spec, v: Variant, dims: DimFields, ctx: dict) -> kir.KernelClass:
    """The Kernel IR of class `v`'s ROW_SPLIT schedule (opgen.kernel.rowsched) from its template context `ctx`
    (class_context): the operands' addresses as dim expressions over the tiling fields of `dims`."""
    p = v.prog
    addr = _Addr(p, dims)
    run_extent = dims.sym(dims.layout.extents[-1]) if ctx["strided"] else Lit(1)   # a field before `fields`
    sched = RowSchedule(
        row_in=_gm_rows(p, addr, "in", "row", ctx["row_in"]), row_out=_gm_rows(p, addr, "out", "row", ctx["row_out"]),
        stat_in=_gm_rows(p, addr, "in", "stat", ctx["stat_in"]),
        stat_out=_gm_rows(p, addr, "out", "stat", ctx["stat_out"]),
        temps=ctx["temps"], narrow=narrow_rows(p), nbrow=ctx["nbrow"], ncol=ctx["ncol"], bufs=dict(ctx["bufs"]["row"]),
        stage=ctx["stage"]["row"], stage_col=ctx["stage"]["col"], chunk=ctx["chunk"],
        prefetch=ctx["prefetch"], col_prefetch=ctx["col_prefetch"], pool_bound=ctx["pool_bound"],
        ws_rows_per_core=ctx["ws_rows_per_core"] if ctx["cross_core"] else None,
        load_cols=bool(ctx["load_cols"]), load_cols_body=tuple(ctx["load_cols"]),
        gm_all=tuple(ctx["tensors"]),
        load_batch=bool(ctx["load_batch"]), flush_row=bool(ctx["flush_row"]),
        flush_row_body=tuple(ctx["flush_row"]), flush_col_body=tuple(ctx["flush_col"]),
        load_batch_body=tuple(ctx["load_batch"]),
        zero_batch=bool(ctx["zero_batch"]),
        zero_batch_body=tuple(ctx["zero_batch"]), batch_index=ctx["batch_index"], row_body=tuple(ctx["row_nodes"]),
        row_segments=tuple((kind, tuple(nodes)) for kind, nodes in ctx["row_segments"]),
        reduce_segments=tuple((kind, tuple(nodes)) for kind, nodes in ctx["reduce_segments"]),
        block_segments=(tuple((kind, tuple(nodes)) for kind, nodes in ctx["block_segments"])
                        if ctx["reduce_segments"] else ()),
        acc_body=tuple(ctx["acc_nodes"]), reload_batch=tuple(ctx["reload_batch"]),
        float_scalars=tuple(f"attr_{a}" for a in ctx["float_attrs"]) + tuple(ctx["batch_vals"]),
        gm_scalars=tuple(p.gm_scalars),
        batch_stores=bool(p.batch_stores),
        cross_core=tuple(ctx["cross_core"]), strided=tuple(ctx["off_nodes"]),
        fields=dims.field_names(), tparams=tuple(c.name for c in spec.dtype_table),
        tparam_bytes=tuple((v, *b) for v, b in var_bindings(spec, lambda d: d.itemsize).items() if len(b) == 1),
        bufs_col=dict(ctx["bufs"]["col"]), levels=tuple((lv, tuple(b), tuple(sl)) for lv, b, sl in ctx["levels"]),
        nlevel=ctx["nlevel"], nsums=ctx["nsums"], final_body=tuple(ctx["final_nodes"]),
        col_segments=tuple((lv, tuple((kind, tuple(nodes)) for kind, nodes in segs))
                           for lv, segs in ctx["col_segments"]),
        col_block_segments=tuple((lv, tuple((kind, tuple(nodes)) for kind, nodes in segs))
                                 for lv, segs in ctx["col_block_segments"]),
        stream_levels=tuple((lv, tuple(b), tuple(sl)) for lv, b, sl in ctx["stream_levels"]),
        col_phases=tuple(ctx["col_phases"]), online=ctx["online"],
        res_levels=tuple((lv, tuple(b), tuple(sl)) for lv, b, sl in ctx["res_levels"]),
        res_online=ctx["res_online"], res_final=tuple(ctx["res_final"]), bufs_res=dict(ctx["bufs_res"]),
        level_guards=_level_guards(p) if ctx["res_levels"] else (),
        stage_res=ctx["stage_res"],
        col_final=tuple(ctx["col_final"]), flush_col=bool(ctx["flush_col"]),
        col_total_init=tuple(ctx["col_total"][0]), col_total_end=tuple(ctx["col_total"][1]),
        helpers=tuple(n for n, on in (("SumPartials", ctx["cross_core"] and ctx["sum_accs"]),
                                      ("MaxPartials", ctx["cross_core"] and ctx["max_accs"]),
                                      ("MinPartials", ctx["cross_core"] and ctx["min_accs"]),
                                      ("CombineTotals", bool(ctx["col_total"][1])), ("TotalOwnedRows", ctx["levels"]),
                                      ("TotalAllRows", ctx["levels"]),
                                      ("LoadRow", ctx["any_buf"]["paramQue"]),
                                      ("LoadByteRow", any(i.kind == "load" and i.op == "half" for i in p.instrs)),
                                      ("StoreRow", ctx["any_buf"]["accOutQue"]), ("RowSum", ctx["uses_sum"]),
                                      ("RowMax", ctx["uses_max"]), ("RowStartOf", True),
                                      ("CoreOfRow", bool(ctx["cross_core"]) and ctx["brow_accs"]),
                                      ("RunRows", ctx["strided"]), ("GapBlocks", True)) if on),
        run_extent=run_extent,
        zero_fill=any(i.kind in MASK_KINDS or i.kind in SELECT_KINDS for i in p.instrs),
        packed_lanes=_packed_lanes(p) if ctx["row_segments"] or ctx["col_segments"] else 0,
        tiling_struct=f"optiling::{spec.name}TilingData", dim_values=tuple(ctx["dim_values"]),
        presence=tuple(ctx["presence"]), args=tuple(cpp_name(t.name) for t in [*spec.inputs, *spec.outputs]))
    return kir.prune_members(row_split_class(v.cls, sched))


def class_ir(spec, v: Variant, dims: DimFields) -> dict:
    """The facts of kernel class `v` (its buffers, operands, methods present) from which its Kernel IR is built,
    under "row_split_ir" (kir.KernelClass: every method, Init, Process and the members they name; printed whole by
    kir's C++ printer once the family's synchronise pass has placed its syncs). Registers every
    dim its addressing reads in `dims`. Raises SpecError for an operand without a buffer."""
    p = v.prog
    addr = _Addr(p, dims)
    cites = Cites([p, *v.also])
    row_pr, col_pr = _Printer(p, "row", cites, addr), _Printer(p, "col", cites, addr)
    res_pr = _Printer(p, "col", cites, addr, resident=True)
    levels = sorted({i.level for i in p.rsums()})
    tensors = []
    for t in p.gm:
        names = [pc.view.tensor for pc in t.view.pieces] if isinstance(t.view, PiecewiseView) else [t.gm]
        for gm in names:
            if gm not in [n for n, _c in tensors]:
                tensors.append((gm, _ctype(t.dtype)))
        if isinstance(t.view, PickedView) and t.view.index.tensor not in [n for n, _c in tensors]:
            tensors.append((t.view.index.tensor, _ctype(t.view.index_dtype)))   # read by Off_<operand>(r)
    used = {n for n, _c in tensors}
    kinds = {i.dst: i.kind for i in p.rsums()}
    combine = {}
    for lv in levels:
        for i in p.rsums(lv):
            combine[i.dst] = "Max" if kinds[i.dst] == "rmax" else "Add"
    counts = program_counts(p)
    bufs = {"row": fixed_needs(counts, ROW_SPLIT), "col": fixed_needs(counts, COL_SPLIT)}
    load_batch = _setup_nodes(p, "brow", addr, cites)
    tots = _totals(p)
    col_total = _col_total_nodes(p, cites)
    passes = row_passes(p) if p.acc_reads else ([], [])
    flush_row = _flush_nodes(p, "row", addr, cites)
    flush_col = _flush_nodes(p, "col", addr, cites)
    # in this order: the tiling fields are numbered in first-use order (DimFields)
    row_in, row_out = _operand_ctx(p, addr, "in", "row", cites), _operand_ctx(p, addr, "out", "row", cites)
    stat_in = _operand_ctx(p, addr, "in", "stat", cites)
    stat_out = [dict(o, rm=next(i.arg for i in p.instrs if i.kind == "sstore" and i.gm == o["op"]))
                for o in _operand_ctx(p, addr, "out", "stat", cites)]
    offs = addr.off_nodes()
    dim_values = [(m, dims.sym(e)) for m, e in zip(DIM_VALUE_MEMBERS, p.dim_values)]   # fields after the addressing's
    ctx = {
        "name": v.cls, "doc": v.doc, "dim_values": dim_values,
        "presence": [(presence_member(k, n), presence_source(k, n)) for k, n in enumerate(p.presence)],
        "tensors": tensors,
        "unused": [cpp_name(n) for n in [i.name for i in spec.inputs] + [o.name for o in spec.outputs] if n not in used],
        "row_in": row_in, "row_out": row_out, "stat_in": stat_in, "stat_out": stat_out, "off_nodes": offs,
        "temps": max(p.row_temps, 2), "nbrow": len(p.brow), "ncol": len(p.col),
        "bufs": bufs, "any_buf": {k: any(b[k] for b in bufs.values()) for k in bufs["row"]},
        "stage": {"row": _stage(counts, ROW_SPLIT), "col": _stage(counts, COL_SPLIT)},
        "batch_index": bool(load_batch or flush_row or _reload_nodes(p, cites)),
        "batch_vals": [n for n, _s, _k in p.btotals],
        "brow_accs": any(v[0] == "brow" for _a, v in _acc_items(p)),
        "sum_accs": any(_partials(p, a) == "SumPartials" for a, _v in _acc_items(p)),
        "max_accs": any(_partials(p, a) == "MaxPartials" for a, _v in _acc_items(p)),
        "min_accs": any(_partials(p, a) == "MinPartials" for a, _v in _acc_items(p)),
        "ws_rows_per_core": sum(1 for _a, x in _acc_items(p) if x[0] == "col")
        + 2 * sum(1 for _a, x in _acc_items(p) if x[0] == "brow") + len(tots),
        # the bookkeeping methods as Kernel-IR statements ([]: the class has no such method)
        "load_batch": load_batch, "zero_batch": list(_zero_nodes(p, "brow", cites)),
        "load_cols": _setup_nodes(p, "col", addr, cites),
        "flush_row": flush_row, "flush_col": flush_col,
        "row_nodes": row_pr.nodes(passes[1], None) if p.acc_reads else row_pr.row_nodes(),
        "row_segments": (_run_segments(row_pr, passes[1] if p.acc_reads else [i for i in p.instrs if per_row(i)])
                         if batchable(p) else []),
        "reduce_segments": (_with_rows_reduce(_run_segments(
            row_pr, passes[1] if p.acc_reads else [i for i in p.instrs if per_row(i)], reduce=True))
            if batchable(p) and p.rsums() else []),
        "block_segments": (_with_rows_reduce(_run_segments(
            row_pr, passes[1] if p.acc_reads else [i for i in p.instrs if per_row(i)], reduce=True, block=True))
            if batchable(p) and p.rsums() else []),
        "acc_nodes": row_pr.nodes(passes[0], None) if p.acc_reads else [],
        "reload_batch": _reload_nodes(p, cites, addr), "cross_core": _cross_core_nodes(p, addr, cites),
        "levels": [(lv, col_pr.phase_nodes(lv), _exchange_slots(col_pr, p.rsums(lv), combine)) for lv in levels],
        "stream": v.stream, "chunk": v.chunk, "prefetch": v.prefetch, "col_prefetch": v.col_prefetch,
        "pool_bound": v.pool_bound,
        "online": ((pair[0].level, col_pr.online_nodes(pair), col_pr.online_rescale(pair))
                   if v.stream and (pair := online_pair(p)) else ()),
        "col_phases": sorted({ph for i in p.instrs if per_row(i) and set(i.srcs) & set(p.col) for ph in i.phases}),
        "stream_levels": [(lv, col_pr.phase_nodes(lv, stream=True), _exchange_slots(col_pr, p.rsums(lv), combine))
                          for lv in levels] if v.stream else [],
        # ROW_CHUNK with the row inputs resident: the streamed phases reading the group's whole rows
        "res_levels": [(lv, res_pr.phase_nodes(lv, stream=True), _exchange_slots(res_pr, p.rsums(lv), combine))
                       for lv in levels] if v.resident else [],
        "res_online": ((pair[0].level, res_pr.online_nodes(pair))
                       if v.resident and (pair := online_pair(p)) else ()),
        "res_final": res_pr.phase_nodes(None) if v.resident else [],
        "bufs_res": fixed_needs(counts, ROW_CHUNK) if v.resident else {},
        "stage_res": _stage(counts, ROW_CHUNK) if v.resident else (4, ()),
        # COL_SPLIT over a group's rows at once: each level's phase, then the final one (rowsched `_col_split`)
        "col_segments": [(lv, col_pr.col_batch_segments(lv)) for lv in levels] + [(-1, col_pr.col_batch_segments(None))]
        if _col_batchable(p, v) else [],
        "col_block_segments": [(lv, col_pr.col_batch_segments(lv, True)) for lv in levels]
        + [(-1, col_pr.col_batch_segments(None, True))] if _col_batchable(p, v) else [],
        "final_nodes": col_pr.phase_nodes(None), "col_final": _col_final_nodes(p, addr, cites),
        "col_total": col_total,
        "nsums": max(reduction_slot_counts(p)[0], 1), "nlevel": max(reduction_slot_counts(p)[1], 1),
        "float_attrs": sorted({x for i in all_instrs(p) for x in attr_names(i.arg)}
                              | {n.attr for n in p.presence if isinstance(n, GuardName)}),
        "uses_max": any(i.kind == "rmax" for i in p.instrs) or any(p.acc_kinds.get(a) == "max" for a, _v in tots)
        or any(k == "max" for _n, _s, k in p.btotals),
        "uses_sum": any(i.kind == "rsum" for i in p.instrs) or any(p.acc_kinds.get(a) != "max" for a, _v in tots)
        or any(k == "sum" for _n, _s, k in p.btotals),
        "strided": bool(offs),
    }
    ctx["row_split_ir"] = row_split_ir(spec, v, dims, ctx)
    return ctx
