"""UB buffer plan of a head-row kernel (opgen.kernel.headrows), from what its lowered programs hold.

A head-row kernel's UB needs follow from its lowered part programs, summarised as `HeadCounts` (how many
row/stat inputs and outputs a part reads and writes, fp32 row temporaries, RoPE table rows, LayerNorm
columns, column accumulators, lane tables). The op's tiling module declares the counts it plans for; the
kernel emitter (opgen.codegen.headkernel) checks that every part of every specialisation fits them and
allocates exactly these buffers, so the budget the tiling program proves is the one the kernel uses.

Per UB pass of `rowsPerPass` head rows (double-buffered TQue): the row inputs and outputs in T, per-row
fp32 statistics in and out (staged). Held once: the fp32 temporaries of one row, the table rows of the
current position, the part's columns and accumulators, the Gather offset tables and sign rows, one staging
row each way for column/table loads and accumulator stores, the ReduceSum scratch.

Units: elements unless a name ends in Bytes; rows are `dAlign` elements apart (a multiple of 16, so every
fp32 or 16-bit row starts 32-byte aligned). Facts: reference/ascendc.md §1.5 (TQue/TBuf, double
buffering), §1.8 (32-byte aligned UB), §1.9 (ReduceSum scratch, Gather offsets).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from opgen.tiling.buffers import Buffer
from opgen.tiling.rowkernel import reduce_tmp_elems, stat_plan


@dataclass(frozen=True)
class HeadCounts:
    """What a head-row kernel holds in UB (maxima over its parts and specialisations).

    row_in/row_out: head-row tensors a part reads/writes (T); stat_in/stat_out: fp32 per-row tensors;
    temps: fp32 row temporaries; tables: RoPE table rows (fp32); cols: column rows (fp32); accs: column
    accumulators of one part (fp32); perms/signs: Gather offset tables (uint32) / ±1 sign rows (fp32);
    conds: row conditions of one part; acc_outputs: column outputs summed across cores (each core's fp32
    partial rows in workspace)."""

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

    def as_dict(self) -> dict:
        """{field: value}."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def head_plan(c: HeadCounts, d_align, t_bytes) -> list[Buffer]:
    """The buffers of a head-row kernel for counts `c` (d_align: row stride in elements, t_bytes: bytes of
    T; tiling expressions). Per-row buffers scale with rowsPerPass."""
    plan = []
    if c.row_in:
        plan.append(Buffer("inQue", "TQue<VECIN>", 2 * c.row_in, True, d_align, t_bytes, "head-row inputs (T)"))
    if c.row_out:
        plan.append(Buffer("outQue", "TQue<VECOUT>", 2 * c.row_out, True, d_align, t_bytes, "head-row outputs (T)"))
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
    plan += [
        Buffer("paramQue", "TQue<VECIN>", 1, False, d_align, 4, "staging of table/column/partial rows (T or fp32)"),
        Buffer("accOutQue", "TQue<VECOUT>", 1, False, d_align, 4, "staging of column outputs (T or fp32)"),
        Buffer("reduceBuf", "TBuf<VECCALC>", 1, False, reduce_tmp_elems(d_align), 4, "ReduceSum result and scratch"),
    ]
    return plan


def part_counts(part) -> dict:
    """What one lowered part (opgen.kernel.headrows.HeadPart) needs, keyed like HeadCounts (acc_outputs
    excepted: that is the op's number of accumulated column outputs)."""
    temps = max([c.prog.row_temps for c in part.cases], default=0)
    lanes = list(part.lanes.values())
    return {"row_in": part.count("in"), "row_out": part.count("out"), "stat_in": part.count("sin"),
            "stat_out": part.count("sout"), "temps": temps, "tables": part.count("tab"), "cols": part.count("col"),
            "accs": len(part.accs), "perms": sum(1 for k, _ in lanes if k == "perm"),
            "signs": sum(1 for k, _ in lanes if k == "sign"), "conds": len(part.conds)}
