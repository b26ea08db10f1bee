"""What a rows-family kernel holds on chip: the counts of a lowered row program (`program_counts`), their maxima
over a kernel's specialisations (`RowCounts`, `counts_of`) and the fixed UB buffers each strategy allocates
(`fixed_needs`). Kernel-level facts: the family's `counts` (opgen.kernel.family) and its kernel classes
(opgen.kernel.rowclass) read them; the tiling (opgen.tiling.rowkernel) sizes the buffers from them.

The strategies: ROW_SPLIT (1, rows over cores), COL_SPLIT (2, the row axis over cores), COL_STREAM (3, the slice
re-read in chunks) and ROW_CHUNK (4, rows over cores, each row walked in column chunks: `chunkable` programs, and
`row_resident` ones with the row's inputs held in UB across their phases), as docs/design.md "Kernel families" and opgen.tiling.rowkernel describe them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from opgen.ir.dtypes import DType
from opgen.kernel.kir import POOL_IDS, handoff_ids
from opgen.kernel.rowalg import phase_instrs_per_row, vector_instrs_per_row
from opgen.kernel.rowprog import (BYTE_DTYPES, MASK_KINDS, SELECT_KINDS, batchable, narrow_rows, per_row,
                                  reduction_slot_counts)

ROW_SPLIT, COL_SPLIT, COL_STREAM, ROW_CHUNK = 1, 2, 3, 4


@dataclass(frozen=True)
class RowCounts:
    """What a rows kernel holds in UB (maxima over its specialisations).

    row_in/row_out: ((IR dtype name, count), ...) of the row operands read/written, by dtype; stat_in: per-row
    inputs in 4-byte words (an fp32 or int32 input is one, an int64 index two); stat_out: per-row outputs (staged in
    fp32); stat_out_words: their output queues' 4-byte words a row (an int64 output two, any other one); temps: fp32 row temporaries; brow/col: fp32 batch
    rows / column rows (values and accumulators); brow_acc/col_acc: accumulators among them (cross-core partial
    rows in ROW_SPLIT); rsums: row reductions; rsums_per_level: the most of one level (exchanged together in
    COL_SPLIT); levels: row-reduction levels (0: COL_SPLIT chunks the slice, nothing stays resident); loads: batch
    and column rows loaded from GM (staged through paramQue); masks: compares and selects (their counts cover whole
    256-B repeats, so row strides and column slices are multiples of 64 elements: opgen.kernel.rowprog.MASK_LANES);
    selects: Selects (their tensor-scalar / tensor-tensor modes use UB above SELECT_SCRATCH_BYTES as scratch); batch: 1
    when a program runs ROW_SPLIT over the pass's rows at once (opgen.kernel.rowprog.batchable: its row temporaries
    hold rowsPerPass rows each); staged: ((IR dtype name, count), ...) of the batch and column rows loaded from GM
    (their dtypes size paramQue, `stage_dtypes`); vinstrs: vector instructions issued per row
    (opgen.kernel.rowalg.vector_instrs_per_row: the tiling prices a strategy's issue time with it); pinstrs: the
    same when the row's phases run one after the other over column chunks (rowalg.phase_instrs_per_row: what
    COL_STREAM and a row-reduction program's ROW_CHUNK issue per chunk); col_phases: the COL_SPLIT phases (levels
    and the final one) whose instructions read column rows (what ROW_CHUNK reloads per chunk where the column rows
    do not stay whole: opgen.tiling.rowkernel `_resident_or_slice`); narrow: 1 when every program holds no row of
    the row axis in UB (opgen.kernel.rowprog.narrow_rows: ROW_SPLIT's rows are NARROW_LANES long; the one count
    that is the minimum over the programs, not the maximum)."""

    row_in: tuple
    row_out: tuple
    stat_in: int
    stat_out: int
    temps: int
    brow: int
    col: int
    brow_acc: int
    col_acc: int
    rsums: int
    rsums_per_level: int
    levels: int
    loads: int = 0
    masks: int = 0
    selects: int = 0
    total_acc: int = 0
    acc_reads: int = 0
    brow_reads: int = 0
    batch: int = 0
    btotals: int = 0
    staged: tuple = ()
    vinstrs: int = 0
    pinstrs: int = 0
    stat_out_words: int = 0
    col_phases: int = 0
    narrow: int = 0

    def as_dict(self) -> dict:
        """{field: value} (row_in/row_out/staged as {dtype: count})."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return {**out, "row_in": dict(self.row_in), "row_out": dict(self.row_out), "staged": dict(self.staged)}


def program_counts(p) -> dict:
    """What one lowered row program (opgen.kernel.rowprog.RowProgram) needs, keyed like RowCounts."""
    nsums, per_level = reduction_slot_counts(p)   # exclusive presences' reductions share exchange slots
    rin: dict[str, int] = {}
    rout: dict[str, int] = {}
    for t in p.gm:
        if t.space == "row":
            d = rin if t.role == "in" else rout
            d[t.dtype] = d.get(t.dtype, 0) + 1
    by_gm = {t.name: t.dtype for t in p.gm}
    staged: dict[str, int] = {}
    for i in p.instrs:
        if i.kind == "load":
            staged[by_gm.get(i.gm, "f32")] = staged.get(by_gm.get(i.gm, "f32"), 0) + 1
    return {
        "row_in": rin, "row_out": rout, "staged": staged,
        "stat_in": sum(2 if t.dtype == "i64" else 1 for t in p.gm if t.role == "in" and t.space == "stat"),
        "stat_out": sum(1 for t in p.gm if t.role == "out" and t.space == "stat"),
        "stat_out_words": sum(2 if t.dtype == "i64" else 1 for t in p.gm if t.role == "out" and t.space == "stat"),
        "temps": p.row_temps, "brow": len(p.brow), "col": len(p.col),
        "col_acc": sum(1 for v in p.accs.values() if v[0] == "col")
        + sum(1 for a in p.acc_reads if a not in p.accs and a not in p.brow),
        "brow_acc": sum(1 for v in p.accs.values() if v[0] == "brow")
        + sum(1 for a in p.acc_reads if a not in p.accs and a in p.brow),
        "rsums": nsums, "rsums_per_level": per_level, "levels": p.levels,
        "loads": sum(1 for i in p.instrs if i.kind == "load"),
        "masks": sum(1 for i in p.instrs if i.kind in MASK_KINDS or i.kind in SELECT_KINDS)
        + sum(1 for t in p.gm if t.space == "row" and t.dtype in BYTE_DTYPES),   # byte rows: 32-B aligned UB rows
        "selects": sum(1 for i in p.instrs if i.kind in SELECT_KINDS),
        "total_acc": sum(1 for v in p.accs.values() if v[0] == "total"),
        "acc_reads": len(p.acc_reads),
        "brow_reads": sum(1 for a in p.acc_reads if a in p.brow),
        "batch": int(batchable(p)),
        "btotals": sum(1 for _n, _s, k in p.btotals if k != "expr"),
        "vinstrs": vector_instrs_per_row(p),
        "pinstrs": phase_instrs_per_row(p),
        "col_phases": len({ph for i in p.instrs if per_row(i) and set(i.srcs) & set(p.col) for ph in i.phases}),
        "narrow": int(narrow_rows(p)),
        "sunary": sum(1 for i in p.instrs if i.kind == "sunary"),   # on 8 lanes of the reduction buffer
    }


def counts_of(progs) -> RowCounts:
    """The maximum of every count over the lowered row programs `progs` (per dtype for rows in/out)."""
    top: dict = {}
    narrow = 1
    for p in progs:
        for k, v in program_counts(p).items():
            if k == "narrow":   # narrow only when every program is
                narrow = min(narrow, v)
            elif isinstance(v, dict):
                cur = top.setdefault(k, {})
                for d, n in v.items():
                    cur[d] = max(cur.get(d, 0), n)
            else:
                top[k] = max(top.get(k, 0), v)
    for k in ("row_in", "row_out"):
        top[k] = tuple(sorted(top.get(k, {}).items()))
    top["staged"] = tuple(top.get("staged", {}).items())   # in load order: renaming a dtype variable keeps it
    top["narrow"] = narrow if progs else 0
    return RowCounts(**{k: top.get(k, 0) for k in RowCounts.__dataclass_fields__})


def _getter(c):
    """A count of `c` (a RowCounts or the dict of `program_counts`) by name; 0 for one it does not have."""
    return (lambda k: c.get(k, 0)) if isinstance(c, dict) else (lambda k: getattr(c, k, 0))


def _exchange(c, strategy: int) -> tuple[int, int, int]:
    """(sums over every axis, accumulators exchanged across cores, what `strategy` stages through paramQue /
    accOutQue from and to workspace: the accumulators' partial rows in ROW_SPLIT, the totals over every axis in
    COL_SPLIT (its row-reduction levels' partials come straight into the exchange tile and their totals go straight
    out of it, opgen.kernel.rowsched `_total_owned_rows`); nothing in ROW_CHUNK, whose core owns its rows whole)."""
    get = _getter(c)
    tot = get("total_acc")
    accs = get("brow_acc") + get("col_acc") + tot
    if strategy == ROW_CHUNK:
        return tot, accs, 0
    return tot, accs, accs if strategy == ROW_SPLIT else tot


def stage_element(dtypes) -> tuple[int | None, tuple[str, ...]]:
    """The element of paramQue for the staged IR dtype names `dtypes` (`stage_dtypes`), as (the largest size of
    the fixed dtypes in bytes, or None; the dtype variables, whose sizes are known at run time): the element is the
    largest of all, and 2 bytes when only 1-byte dtypes or none are staged (a row stride of 16 elements stays a
    whole 32-B block). One rule for the tiling's plan (opgen.tiling.rowkernel) and the kernel's InitBuffer
    (opgen.kernel.rowsched.stage_bytes)."""
    fixed = {d.value: d.itemsize for d in DType}
    sizes = [fixed[d] for d in dtypes if d in fixed]
    params = tuple(d for d in dtypes if d not in fixed)
    top = max(sizes) if sizes else None
    if not params and (top is None or top < 2):
        top = 2
    return top, params


def fixed_needs(c, strategy: int) -> dict[str, int]:
    """{buffer: fp32 rows of the pass's columns} of the fixed UB buffers a rows kernel allocates under `strategy`
    (ROW_SPLIT, COL_SPLIT or ROW_CHUNK) for counts `c` (a RowCounts, or the dict of `program_counts` for one kernel
    class);
    0 = not allocated. A buffer is allocated only when that strategy's code reads it (docs/reference/ascendc.md
    §1.5: every TBuf/TQue is carved out of UB by InitBuffer whether read or not):

    workBuf   the fp32 row temporaries, at least two where cross-core sums read w_[0] and w_[1] (ROW_SPLIT's
              SumPartials / MaxPartials, COL_SPLIT's CombineTotals of sums over every axis), at least one in
              ROW_CHUNK, none beyond the temporaries in another COL_SPLIT (its row-reduction exchange uses its own
              tile);
    browBuf   the batch rows and per-batch sums, when the program has any;
    colBuf    the column rows and column sums, when the program has any;
    paramQue  staging of LoadRow: batch/column loads, and the partial rows read back from workspace (ROW_SPLIT
              with sums over rows, COL_SPLIT with sums over every axis; COL_SPLIT's row-reduction levels copy
              their partials straight into the exchange tile, opgen.kernel.rowsched `_total_owned_rows`);
    accOutQue staging of StoreRow: sums over rows written out (or to workspace);
    reduceBuf ReduceSum / ReduceMax result and scratch, when the program reduces rows or takes a per-row value
              through a vector instruction on 8 lanes (`sunary`).

    Raises ValueError for another strategy."""
    if strategy not in (ROW_SPLIT, COL_SPLIT, ROW_CHUNK):
        raise ValueError(f"rows kernel strategy {strategy}: 1 (ROW_SPLIT), 2 (COL_SPLIT) or 4 (ROW_CHUNK)")
    get = _getter(c)
    tot, accs, exchange = _exchange(c, strategy)
    floor = {ROW_SPLIT: 2, ROW_CHUNK: 1, COL_SPLIT: 2 if tot else 0}[strategy]
    return {"workBuf": max(get("temps"), floor), "browBuf": get("brow"),
            "colBuf": get("col"),
            "paramQue": int(bool(get("loads") or exchange)), "accOutQue": int(bool(accs or exchange)),
            "reduceBuf": int(bool(get("rsums") or tot or get("btotals") or get("sunary")))}


def chunkable(c) -> bool:
    """Whether a rows kernel of counts `c` can run ROW_CHUNK: nothing of a row is combined across its columns or
    across rows (no row reductions, no sums over rows or over every axis, no two-pass reductions) and no per-row
    output -- each column chunk of a row is then computed and written on its own, by the core that owns the row
    (COL_SPLIT's chunk loop over this core's rows and the whole row instead of every row and a column slice)."""
    get = _getter(c)
    return not any(get(k) for k in ("levels", "rsums", "col_acc", "brow_acc", "total_acc", "acc_reads", "stat_out",
                                    "btotals"))


def two_buffer_ids(c, strategy: int) -> dict:
    """{HardEvent: ids} the queues of `strategy` (ROW_SPLIT, COL_SPLIT or ROW_CHUNK) may hold at once for counts `c`
    with two buffers per row queue, counted from below (kir.queue_event_buffers counts the class itself): V_MTE2,
    two a row input, two for the statistic inputs (one queue per element type, opgen.kernel.rowsched.StatGroup;
    counted as one type) and paramQue's one where `strategy` allocates it; MTE3_V, two a row output, two for the
    statistic outputs (StatOutGroup, counted as one type) and accOutQue's one (docs/design.md "Event ids of the
    queues")."""
    get = _getter(c)

    def total(x) -> int:
        return sum(x.values()) if isinstance(x, dict) else sum(n for _d, n in x) if x else 0

    fixed = fixed_needs(c, strategy)
    return {"V_MTE2": handoff_ids(total(get("row_in")), bool(get("stat_in")), fixed["paramQue"]),
            "MTE3_V": handoff_ids(total(get("row_out")), bool(get("stat_out")), fixed["accOutQue"])}


def _within_pool(c, *strategies) -> bool:
    return all(n <= POOL_IDS for st in strategies for n in two_buffer_ids(c, st).values())


def row_queue_ids(c) -> dict:
    """ROW_SPLIT's two_buffer_ids."""
    return two_buffer_ids(c, ROW_SPLIT)


def row_pool_bound(c) -> bool:
    """Whether two buffers per ROW_SPLIT row queue would hold more ids of a HardEvent than the TPipe's pool
    (row_queue_ids > POOL_IDS): the kernel then allocates one buffer per row queue only (opgen.kernel.rowsched
    `_row_split`) and the tiling's rowQueBufs is 1 (opgen.tiling.rows.row_split's pool_bound)."""
    return any(n > POOL_IDS for n in row_queue_ids(c).values())


def fetches_next_pass(row_inputs: bool, two_pass: bool, pool_bound: bool) -> bool:
    """Whether ROW_SPLIT's one-buffer pass loop (rowQueBufs 1) has Compute issue the next pass's copy-in right after
    it frees this pass's row inputs (opgen.kernel.rowsched `_compute` with fetch, printed Compute<true>): a kernel
    with row inputs (`row_inputs`) that runs one pass over its rows (a two-pass kernel's Accumulate holds its inputs
    to its end: `two_pass`) and whose row queues the event-id pool does not hold to one buffer (`pool_bound`,
    row_pool_bound). The one rule the kernel (rowsched.fetch_loop) and the tiling's price (opgen.tiling.rows
    .row_split's `fetch`) both read (docs/design.md "Copy/compute overlap")."""
    return row_inputs and not two_pass and not pool_bound


def chunk_prefetch(c) -> bool:
    """Whether a `chunkable` program's ColSplit (COL_SPLIT and ROW_CHUNK) prefetches its items: each row input
    through a queue of two buffers (resQue_<operand>, the next item's copy issued while this one computes:
    opgen.kernel.rowsched `_chunk_in`) and each row output through two. Only while the queues stay within the TPipe's
    pool of POOL_IDS event ids (docs/design.md "Event ids of the queues": after the loop every buffer is freed and
    holds one; `two_buffer_ids` of COL_SPLIT and ROW_CHUNK). Else
    each row input is one buffer copied into per item and each output one buffer (COL_SPLIT's plain form): five
    [B, H] inputs of an elementwise program held 10 V_MTE2 ids prefetched. The tiling's plan (opgen.tiling.rowkernel
    col_plan) counts the buffers the same way."""
    return chunkable(c) and _within_pool(c, COL_SPLIT, ROW_CHUNK)


def col_prefetch(c) -> bool:
    """Whether a program with row reductions double-buffers its COL_STREAM chunks (opgen.kernel.rowsched
    `_col_stream`, `_stream_chunks`): each row input through a queue of two buffers (resQue_<operand>, the next
    column chunk of the phase copied while this one computes) and each row output through two. For programs that
    combine nothing across rows or batches (no sums over rows, over every axis or per batch, no batch rows, no
    two-pass reductions) whose queues stay within the TPipe's pool of event ids (`two_buffer_ids` of COL_SPLIT, whose
    queues COL_STREAM's are). COL_SPLIT's groups stay single-buffered: each exchange's SyncAll joins every pipe of
    the core (docs/reference/kernel_cost.md §1, span), so a copy issued before it cannot run beside the next level's
    work. The tiling's plan (opgen.tiling.rowkernel `_stream_program`, `col_plan`) counts the buffers the same way."""
    get = _getter(c)
    return (bool(get("levels")) and not any(get(k) for k in ("acc_reads", "col_acc", "brow_acc", "total_acc", "brow"))
            and _within_pool(c, COL_SPLIT))


def row_resident(c) -> bool:
    """Whether a rows kernel of counts `c` can run ROW_CHUNK with its rows resident (opgen.tiling.rowkernel): it
    reduces rows (levels; a program without is `chunkable`) and combines nothing across rows (no sums over rows or
    over every axis, no two-pass reductions) -- the core that owns a row then holds the row's inputs in UB as they
    are stored in GM and runs each level, then the outputs, over the row's column chunks, its row reductions
    complete without any exchange. Column rows are then held whole too (loaded once per core), or one chunk of them
    loaded per chunk where whole ones do not fit (the tiling field colChunkLoads); batch rows, which
    would be reloaded for every group, are not served. The same programs can stream (COL_STREAM). Not where its
    queues (two buffers a row input and output, the next group's copy prefetched: opgen.kernel.rowsched
    `_row_chunk`) would hold more event ids than the TPipe's pool (`two_buffer_ids` of ROW_CHUNK; docs/design.md
    "Event ids of the queues"): four [B, H] inputs beside a column input's paramQue held 9 V_MTE2 ids; COL_SPLIT
    serves such a program."""
    get = _getter(c)
    return (bool(get("levels")) and not any(get(k) for k in ("acc_reads", "col_acc", "brow_acc", "total_acc", "brow"))
            and _within_pool(c, ROW_CHUNK))


def stage_dtypes(c, strategy: int) -> tuple[str, ...]:
    """The IR dtype names of what `strategy` stages through paramQue (LoadRow<S>: a GM row copied in as it is
    stored, then cast to fp32): the batch / column rows loaded from GM (RowCounts.staged) and, where the strategy
    reads partial rows back from workspace (the exchange of `fixed_needs`), "f32". The queue's element is the
    largest of them (`stage_element`): a kernel that
    loads only bf16 / fp16 columns stages them in half the bytes of an fp32 row (RmsNorm at H = 8192 fits ROW_SPLIT
    by that). In load order (renaming a dtype variable keeps it), fp32 last; () when paramQue is not allocated. Raises
    ValueError for another strategy."""
    if not fixed_needs(c, strategy)["paramQue"]:
        return ()
    staged = _getter(c)("staged")
    exchange = _exchange(c, strategy)[2]
    names = list(staged) if isinstance(staged, dict) else [d for d, _n in staged]
    if exchange and "f32" not in names:
        names.append("f32")
    return tuple(names)
