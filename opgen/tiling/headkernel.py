"""UB buffer plan of a head-row kernel (opgen.kernel.headrows), from what its lowered programs hold.

A head-row kernel's UB needs follow from its lowered part programs, summarised as `HeadCounts` (how many
row/stat inputs and outputs a part reads and writes, fp32 row temporaries, RoPE table rows, LayerNorm
columns, column accumulators, lane tables): the maxima over the parts of every specialisation (`spec_counts`).
The kernel emitter (opgen.codegen.headkernel) checks that every part of every specialisation fits them and
allocates exactly these buffers, so the budget the tiling program proves is the one the kernel uses.

Per UB pass of `rowsPerPass` head rows (double-buffered TQue): the row inputs and outputs in T, per-row
fp32 statistics in and out (staged). Held once: the fp32 temporaries of one row, the table rows of the
current position, the part's columns and accumulators, the Gather offset tables and sign rows, one staging
row each way for column/table loads and accumulator stores, the ReduceSum scratch.

Units: elements unless a name ends in Bytes; rows are `dAlign` elements apart (a multiple of 16, so every
fp32 or 16-bit row starts 32-byte aligned). Facts: docs/reference/ascendc.md §1.5 (TQue/TBuf, double
buffering), §1.8 (32-byte aligned UB), §1.9 (ReduceSum scratch, Gather offsets).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from opgen.ir.dims import Bin, Lit, Sym, as_dim
from opgen.kernel.family import Tiling
from opgen.kernel.headclass import head_class_ir
from opgen.kernel.headsched import row_queue_bufs
from opgen.kernel.headlower import accumulated_outputs, addressing_dims, bind_slots, data_dtype
from opgen.tiling.buffers import Buffer
from opgen.tiling.rowkernel import reduce_tmp_elems, stat_plan


@dataclass(frozen=True)
class HeadCounts:
    """What a head-row kernel holds in UB (maxima over its parts and specialisations).

    row_in/row_out: head-row tensors a part reads/writes (T); stat_in/stat_out: fp32 per-row tensors;
    temps: fp32 row temporaries; tables: RoPE table rows (fp32); cols: column rows (fp32); accs: column
    accumulators of one part (fp32); perms/signs: Gather offset tables (uint32) / ±1 sign rows (fp32);
    conds: row conditions of one part; acc_outputs: column outputs summed across cores (each core's fp32
    partial rows in workspace); rsums: row sums of one part's program (the ReduceSum scratch is held only when a
    part reduces rows)."""

    row_in: int
    row_out: int
    stat_in: int
    stat_out: int
    temps: int
    tables: int
    cols: int
    accs: int
    perms: int
    signs: int
    conds: int
    acc_outputs: int
    rsums: int = 0

    def as_dict(self) -> dict:
        """{field: value}."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def head_plan(c: HeadCounts, d_align, t_bytes) -> list[Buffer]:
    """The buffers of a head-row kernel for counts `c` (d_align: row stride in elements, t_bytes: bytes of
    T; tiling expressions). Per-row buffers scale with rowsPerPass."""
    plan = []
    need = head_needs(c)
    # two buffers per row queue where the TPipe's pool of event ids allows, else one (the kernel's InitBuffers)
    nin, nout = row_queue_bufs(c.row_in, c.row_out, c.stat_in, c.stat_out, need["paramQue"], need["accOutQue"])
    if c.row_in:
        plan.append(Buffer("inQue", "TQue<VECIN>", nin * c.row_in, True, d_align, t_bytes, "head-row inputs (T)"))
    if c.row_out:
        plan.append(Buffer("outQue", "TQue<VECOUT>", nout * c.row_out, True, d_align, t_bytes, "head-row outputs (T)"))
    plan += stat_plan(c, "per-row fp32 outputs")
    plan.append(Buffer("workBuf", "TBuf<VECCALC>", max(c.temps, 2), False, d_align, 4, "fp32 row temporaries"))
    if c.tables:
        plan.append(Buffer("tabBuf", "TBuf<VECCALC>", c.tables, False, d_align, 4, "table rows of the position"))
    if c.cols:
        plan.append(Buffer("colBuf", "TBuf<VECCALC>", c.cols, False, d_align, 4, "the part's column rows (fp32)"))
    if c.accs:
        plan.append(Buffer("accBuf", "TBuf<VECCALC>", c.accs, False, d_align, 4, "the part's column sums (fp32)"))
    if c.perms + c.signs:
        plan.append(Buffer("laneBuf", "TBuf<VECCALC>", c.perms + c.signs, False, d_align, 4,
                           "Gather byte offsets (uint32) and sign rows (fp32)"))
    if need["paramQue"]:
        plan.append(Buffer("paramQue", "TQue<VECIN>", 1, False, d_align, 4,
                           "staging of table/column/partial rows (T or fp32)"))
    if need["accOutQue"]:
        plan.append(Buffer("accOutQue", "TQue<VECOUT>", 1, False, d_align, 4, "staging of column outputs (T or fp32)"))
    if need["reduceBuf"]:
        plan.append(Buffer("reduceBuf", "TBuf<VECCALC>", 1, False, reduce_tmp_elems(d_align), 4,
                           "ReduceSum result and scratch"))
    return plan


def head_needs(c: HeadCounts) -> dict[str, bool]:
    """Which staging buffers a head-row kernel with counts `c` allocates: only those its code reads
    (docs/reference/ascendc.md §1.5). paramQue stages LoadRow (table rows, column rows, the partial column sums
    read back from workspace); accOutQue stages StoreRow (column sums to workspace and the reduced outputs);
    reduceBuf is ReduceSum's result and scratch (a part that sums rows)."""
    return {"paramQue": bool(c.tables or c.cols or c.acc_outputs), "accOutQue": bool(c.accs or c.acc_outputs),
            "reduceBuf": bool(c.rsums)}


def part_counts(part) -> dict:
    """What one lowered part (opgen.kernel.headrows.HeadPart) needs, keyed like HeadCounts (acc_outputs
    excepted: that is the op's number of accumulated column outputs)."""
    temps = max([c.prog.row_temps for c in part.cases], default=0)
    lanes = list(part.lanes.values())
    return {"row_in": part.count("in"), "row_out": part.count("out"), "stat_in": part.count("sin"),
            "stat_out": part.count("sout"), "temps": temps, "tables": part.count("tab"), "cols": part.count("col"),
            "accs": len(part.accs), "perms": sum(1 for k, _ in lanes if k == "perm"),
            "signs": sum(1 for k, _ in lanes if k == "sign"), "conds": len(part.conds),
            "rsums": max([len(c.prog.rsums()) for c in part.cases], default=0)}


def spec_counts(low) -> HeadCounts:
    """HeadCounts of a spec's head-row lowering (opgen.kernel.headlower.Lowered): the maxima over every part of
    every attribute combination and over the part slots' bindings (parts are renumbered to their slot's union of
    tensors, so a slot's entries bound the indices too); acc_outputs = the column outputs summed across cores."""

    top: dict = {}
    for _a, _k, hp in low.programs:
        for part in hp.parts:
            for k, v in part_counts(part).items():
                top[k] = max(top.get(k, 0), v)
    bindings, _renamed = bind_slots(low.spec, low)
    limit = {"in": "row_in", "out": "row_out", "sin": "stat_in", "sout": "stat_out", "tab": "tables", "col": "cols",
             "acc": "accs"}
    for bd in bindings:
        for prefix, k in limit.items():
            top[k] = max(top.get(k, 0), sum(1 for e in bd.entries if e[0] == prefix))
    top["acc_outputs"] = len(accumulated_outputs(low.spec, low))
    return HeadCounts(**{f: top.get(f, 0) for f in HeadCounts.__dataclass_fields__})


def dim_fields(layout, dims) -> dict:
    """{dim symbol: tiling-data field} of the dims a head-row kernel's addressing prints: batchNum, headNum and
    headDimLen for the layout's batch, head and row-length dims, dim<Name> for the others."""
    fixed = {layout.batch: "batchNum", layout.heads: "headNum", layout.dim: "headDimLen"}
    return {s: fixed.get(s, f"dim{s}") for s in sorted(set(dims) | set(fixed), key=lambda s: (s not in fixed, s))}


def head_tiling(spec, lowered, counts):
    """The Tiling of a head-row kernel: the row split of `rowNum` = sum over the part slots of batch * heads *
    (the slot's rows), the buffer plan of `counts`, and the dims the addressing uses as inputs read from the
    shapes (lowered.extra["fields"]), and the head kernel class (opgen.kernel.headclass: lowered.extra["hclass"],
    its syncs placed by the kernel pass `synchronise` next)."""
    from opgen.tiling.program import TilingProgram, align_up, ceil_div
    from opgen.tiling.rows import row_split

    low, lay = lowered.extra["heads"], lowered.layout
    bindings, renamed = bind_slots(spec, low)
    fields = dim_fields(lay, addressing_dims(bindings, renamed))
    dvar = data_dtype(spec, low)
    attrs = sorted({a for _a, _k, hp in low.programs for a in hp.attrs})
    p = TilingProgram(spec.name)
    env = {s: p.input(f"{s}Dim", f"dim {s}") for s in fields}
    tB = p.input(f"{dvar}Bytes", f"bytes per element of dtype variable {dvar}")
    dk = p.input("dtypeKey", "1-based row of the dtype table")
    ak = p.input("attrKey", "mixed-radix index of the static attribute values (first attribute fastest)")
    cores = p.input("coreNum", "AIV cores")
    ub = p.input("ubBytes", "UB bytes per AIV core")
    bits = [p.input(f"{a}Attr", f"IEEE-754 bits of the float attribute {a}") for a in attrs]
    B, N, D = env[lay.batch], env[lay.heads], env[lay.dim]
    d_align = p.let("dAlign", align_up(D, 16), "head row stride in UB (elements)", True)
    seq = None
    for bd in bindings:
        term = dim_expr(bd.seq, env)
        seq = term if seq is None else seq + term
    rows = p.let("rowNum", B * N * seq, "head rows of every part slot: batch * heads * (the slots' rows)", True)
    plan = head_plan(counts, d_align, tB)
    fit, used = row_split(p, rows, cores, ub, plan)
    p.let("blockDim", used, "AIV cores launched", True)
    p.let("fits", fit >= 1, "1 when one head row fits UB", True)
    p.let("tilingKey", ak * 100 + dk * 10 + 1, "attrKey * 100 + dtypeKey * 10 + 1 (one strategy)", True)
    if counts.acc_outputs:
        p.let("colsPerReduceCore", align_up(ceil_div(D, used), 16),
              "columns each core sums in the cross-core column-sum reduction", True)
        p.let("workspaceBytes", used * counts.acc_outputs * d_align * 4,
              "per-core fp32 partial column sums (bytes)", True)
    else:
        p.let("workspaceBytes", 0 * rows, "no user workspace (bytes)", True)
    for s, f in fields.items():
        p.let(f, env[s] + 0, f"dim {s}", True)
    for a, v in zip(attrs, bits):
        p.let(f"{a}Bits", v + 0, f"IEEE-754 bits of {a} (float)", True)
    inputs = {f"{s}Dim": Sym(s) for s in fields}
    inputs.update({f"{dvar}Bytes": ("bytes", dvar), "dtypeKey": ("dtype_key",), "attrKey": ("attr_key",),
                   "coreNum": ("platform", "coreNum"), "ubBytes": ("platform", "ubBytes")})
    inputs.update({f"{a}Attr": ("attr_bits", a) for a in attrs})
    lowered.extra.update(counts=counts, fields=fields,
                         hclass=head_class_ir(spec, low, counts, fields, head_needs(counts)))
    doc = (f"Tiling of {spec.name}: rows family, parts schedule: the head rows of {len(bindings)} part slots laid end "
           f"to end and split over the AIV cores.")
    return Tiling(p, inputs, {1: plan}, doc)


def dim_expr(e, env: dict):
    """A dim expression (opgen.ir.dims) as a tiling-program expression over `env` ({symbol: program variable})."""
    from opgen.tiling.program import lit

    e = as_dim(e)
    if isinstance(e, Lit):
        return lit(e.value)
    if isinstance(e, Sym):
        return env[e.name]
    if isinstance(e, Bin):
        a, b = dim_expr(e.lhs, env), dim_expr(e.rhs, env)
        return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "//": lambda: a // b,
                "%": lambda: a % b}[e.op]()
    raise ValueError(f"dim expression {e} has no tiling-program form")
