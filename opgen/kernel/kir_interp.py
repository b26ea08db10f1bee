"""A NumPy interpreter of the Kernel IR (opgen.kernel.kir): runs a KernelClass on every core of a launch, in program
order, with the emulation's fault rules, so a lowered kernel has an executable meaning without g++.

What it models (the same rules as opgen/emu/include, EMU.md "Pipes and races"; facts from docs/reference/ascendc.md
§1.2 buffers, §1.3 block index, §1.5 TPipe / TQue / TBuf, §1.6 pipes and flags, §1.8 DataCopyPad, §1.9 vector
instructions):

* Memory. Each core has a UB arena of `ub_bytes` (the platform's UB size); InitBuffer allocates blocks rounded up
  to 32 B from a bump pointer (overflow is a fault); a fresh allocation and every AllocTensor are poisoned
  (unwritten). A vector instruction reading an unwritten lane leaves the result lane unwritten; GetValue of an
  unwritten element and a UB -> GM copy of unwritten bytes are faults (where an undefined value becomes
  observable). GM tensors are the caller's NumPy arrays (bytes), bounds-checked per burst.
* Data. `Vec` nodes run the instruction table's NumPy meaning (opgen.kernel.isa.INSTRS[op].meaning); `Copy` nodes
  are DataCopyPad: GM -> UB bursts of block_len bytes land on 32-B blocks (UB gap dst_stride blocks, GM gap
  src_stride bytes), the pad lanes of a block stay unwritten; UB -> GM writes exactly block_len bytes per burst.
* Pipes. Every issued instruction has a pipe (Copy: MTE2 / MTE3; Vec: the table's pipe; GetValue / SetValue: S) and
  a clock; `know[p][q]` is the vector clock (q's instructions up to that clock completed before p's next one). V
  completes out of order (ordered only by PipeBarrier<PIPE_V>), every other pipe in order. PipeBarrier, SetFlag /
  WaitFlag tokens (a wait on S orders every pipe), queue hand-offs (EnQue -> DeQue, FreeTensor -> the next
  AllocTensor of that block; VECIN MTE2 -> V, VECOUT V -> MTE3, VECCALC none) and SyncAll (PIPE_ALL) update it.
  Shadow memory per 32-B block of UB: last writer and each pipe's latest reader (and the one before it, for an
  instruction reading then writing the block); an access unordered with a conflicting earlier one (RAW, WAW, WAR;
  scalar reads never overtaken) is a race fault naming both statements and the synchronisation that would order
  them. The same shadow per 32-B block of each GM buffer a core's copies touch finds GM hazards inside one core
  (an MTE2 reload of bytes MTE3 stored needs MTE3_MTE2). Between cores, GM accesses (per byte: GM writes are
  byte-exact) are ordered by SyncAll and cross-core flags only: each core has a vector clock, a SyncAll joins its
  members', a CrossCoreSetFlag carries the setter's to the waiter (`_Launch.gm_access`); reading or writing a GM
  byte another core wrote, or writing one it last read, with nothing ordering the two is a race fault between cores
  (the emulation checks the same on the workspace, EMU.md "Races between cores"; the device would read stale or
  torn data).
* Faults (KirFault, the message as the emulation words it): UB overflow, GM / UB out of bounds, unaligned UB
  operands, queue misuse (AllocTensor with every block in use, EnQue beyond depth, DeQue of an empty queue,
  FreeTensor of a free block, a tensor not from the queue), a WaitFlag with no SetFlag, a SetFlag still set, a flag
  set at the end, a SetFlag on an event id a queue holds or a queue taking an id a SetFlag holds set (the TPipe's
  event-id pool as the emulation models it, EMU.md "Event ids": queues take the lowest free id at EnQue /
  FreeTensor until DeQue / AllocTensor; a pool flag, kir.SetFlag.pool, fetches or allocates one), races, SyncAll deadlock (a core returned while others wait), operands overlapping against the
  device's address-overlap rules (a repeat form's partial overlap or read of an earlier repeat's write, Brcb's
  aliased src, an in-place Gather: as the emulation's OverlapGuard and checks, emu/vector.h).

* Cube (an AIC core): L1 / L0A / L0B / L0C arenas of the platform's sizes, shadowed like the UB; Nd2Nz (MTE2),
  LoadData (MTE1), Mmad (M) and Fixpipe (FIX) with opgen.kernel.cubesem's layouts and the emulation's operand checks
  and poison rules (emu/cube.h). A CoreIf body runs on the cores of its unit only.
* Launches: AIV only, AIC only, or mixed (1 AIC : 2 AIV per AI Core; GetBlockIdx / GetSubBlockIdx / GetTaskRatio as
  the emulation's, emu/datacopy.h). Cross-core flags keep a counter per core and id; CrossCoreSetFlag modes 0 / 1 /
  2 raise them as emu/mix.h does (ids 0..10, at most 15 pending, no PIPE_S / PIPE_ALL or pipe the core lacks); a
  flag left set at the end is a fault. They order cores, not one core's pipes.

Cores run as generators that yield where they wait (SyncAll; a CrossCoreWaitFlag whose counter is 0); the launch
resumes each in turn, and when no core can go on the wait is a deadlock fault naming every blocked core. Between
waits a core runs alone, as the emulation's threads may. A fault in one core stops the launch (the emulation aborts
the others too).
"""

from __future__ import annotations

import operator
from collections import deque
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from opgen.errors import OpgenError
from opgen.ir.dims import Bin, DimExpr, Fn, Lit, Sym, as_dim
from opgen.kernel import cubesem, kir
from opgen.kernel.isa import INSTRS, REPEAT_FORMS, Op, Pipe, lane_grid

BLOCK = 32
"""Bytes of one UB block: the alignment of tensors and the unit of the race detector's shadow (§1.2)."""

PIPES = (Pipe.S, Pipe.V, Pipe.M, Pipe.MTE1, Pipe.MTE2, Pipe.MTE3, Pipe.FIX)
"""The pipes in the emulation's index order (opgen/emu/include/emu/pipes.h PipeIdx)."""
PIDX = {p: i for i, p in enumerate(PIPES)}
_S, _V = PIDX[Pipe.S], PIDX[Pipe.V]
_NP = len(PIPES)
_ALL_WRITTEN = {2: (np.uint16, 0x0101), 4: (np.uint32, 0x01010101), 8: (np.uint64, 0x0101010101010101)}
"""Element size -> (unsigned type of that size, its value with every byte 1): an element's bytes of the UB's written
map (bool, one byte each) read as one integer equal that value when every byte is written (Interp.read)."""
_GM_PAGE = 32768
"""Bytes of GM one page of a core's GM shadow covers (made on first touch, _Core.touch_gm)."""

NP_TYPES = {"float": np.dtype(np.float32), "half": np.dtype(np.float16), "bfloat16_t": np.dtype(ml_dtypes.bfloat16),
            "int32_t": np.dtype(np.int32), "uint32_t": np.dtype(np.uint32), "int16_t": np.dtype(np.int16),
            "uint16_t": np.dtype(np.uint16), "int8_t": np.dtype(np.int8), "uint8_t": np.dtype(np.uint8),
            "int64_t": np.dtype(np.int64)}
"""NumPy element type of each KIR element type (kir.ELEM_BYTES)."""

_PROD = {pos: PIDX[prod] for pos, (prod, _cons) in kir.QUEUE_HANDOFF.items()}
_CONS = {pos: PIDX[cons] for pos, (_prod, cons) in kir.QUEUE_HANDOFF.items()}
"""Producer / consumer pipe (index) of a queue's hand-off by position (kir.QUEUE_HANDOFF; VECCALC carries none)."""
_MEM_OF = {kir.TPos.VECIN: "UB", kir.TPos.VECOUT: "UB", kir.TPos.VECCALC: "UB", kir.TPos.CO2: "UB",
           kir.TPos.A1: "L1", kir.TPos.B1: "L1", kir.TPos.C1: "L1", kir.TPos.A2: "L0A", kir.TPos.B2: "L0B",
           kir.TPos.CO1: "L0C", kir.TPos.C2: "BiasTable"}
"""The on-chip memory of each TPosition (§1.2, §1.5): UB on an AIV, L1 / L0A / L0B / L0C / the bias table
(BiasTable) on an AIC."""
CUBE_MEM_910B = {"L1": 524288, "L0A": 65536, "L0B": 65536, "L0C": 131072, "BiasTable": 1024}
"""The AIC's buffer sizes of Atlas A2 / A3 in bytes (opgen/platforms/platforms.json, §1.2): `run`'s default."""


_BINOPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv, "%": operator.mod}
_CMPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
         ">=": operator.ge}


class NotKernelIR(OpgenError):
    """A kernel class that cannot be interpreted: part of it is not Kernel IR yet (C++ text or an extern method);
    the message names the part."""


def _overlap_clean(tens: dict, idx: dict, sz: int, rep: int, whole: bool, acc1: bool) -> bool:
    """Whether one repeat-form instruction keeps the overlap rules of Interp.overlap (the same operands: `tens`
    name -> tensor with a byte offset `off`, `idx` name -> element indices repeat-major, `rep` repeats; `whole`: a
    WholeReduce, one destination element a repeat; `acc1`: src1 may read earlier repeats' writes), on whole arrays:
    (1) no source lane of repeat r (but src1 when acc1) reads a byte whose first write by dst is in a repeat before
    r; (2) in each repeat, a source whose lanes are not dst's own lanes (always, for a WholeReduce) shares no byte
    with dst's. True exactly when Interp.overlap's lane-by-lane walk raises nothing (tests/test_kir_interp.py
    compares the two on random strides)."""
    d = (np.asarray(idx["dst"], dtype=np.int64) * sz + tens["dst"].off).reshape(rep, -1)
    d_lo, d_hi = int(d.min()), int(d.max())
    srcs = {n: (np.asarray(idx[n], dtype=np.int64) * sz + t.off).reshape(rep, -1)
            for n, t in tens.items() if n != "dst"}
    if all(int(s.max()) < d_lo or int(s.min()) > d_hi for s in srcs.values()):
        return True   # no source byte in dst's span: neither rule can break (the common case, separate buffers)
    rows = np.repeat(np.arange(rep, dtype=np.int64), d.shape[1])
    uniq, first = np.unique(d.reshape(-1), return_index=True)   # each dst byte's first writer: its lowest repeat
    first_rep = rows[first]
    for n, s in srcs.items():
        if not (n == "src1" and acc1):
            pos = np.minimum(np.searchsorted(uniq, s), uniq.size - 1)
            hit = (uniq[pos] == s) & (first_rep[pos] < np.arange(rep, dtype=np.int64)[:, None])
            if hit.any():
                return False
        keep = np.ones(rep, dtype=bool) if whole else ~(s == d).all(axis=1)
        if keep.any():
            r = np.arange(rep, dtype=np.int64)[keep][:, None]   # (repeat, byte) pairs as one key each
            lo = min(d_lo, int(s.min()))
            span = max(d_hi, int(s.max())) - lo + 1
            if _shares_a_value((r * span + d[keep] - lo).reshape(-1), (r * span + s[keep] - lo).reshape(-1)):
                return False
    return True


def _shares_a_value(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether some element of int64 array `a` equals some element of `b` (np.isin(a, b).any(), by one sort of b
    and a binary search of each element of a: NumPy 2's isin made both arrays unique by hashing first, most of
    _overlap_clean's time on the in-place instructions of a rows kernel)."""
    if a.size == 0 or b.size == 0:
        return False
    b = np.sort(b)
    pos = np.minimum(np.searchsorted(b, a), b.size - 1)
    return bool((b[pos] == a).any())


def _overlap_walk(what: str, tens: dict, idx: dict, sz: int, mask: int, rep: int, whole: bool, acc1: bool) -> None:
    """Interp.overlap's rules lane by lane (the arguments as _overlap_clean's; `mask` lanes a repeat; `what` the
    instruction's API name): raises KirFault for the first broken rule in repeat, operand and lane order."""
    idx = {n: np.asarray(ix, dtype=np.int64).tolist() for n, ix in idx.items()}   # Python ints, lane by lane
    dst = tens["dst"]
    lane = lambda n, r: [tens[n].off + i * sz for i in idx[n][r * mask:(r + 1) * mask]]  # noqa: E731
    dlane = (lambda r: [dst.off + idx["dst"][r] * sz]) if whole else (lambda r: lane("dst", r))  # noqa: E731
    written: dict = {}
    for r in range(rep):
        ld = dlane(r)
        for n in [x for x in tens if x != "dst"]:
            ls = lane(n, r)
            if not (n == "src1" and acc1):
                for a in ls:
                    if a in written:
                        raise KirFault(f"{what}: repeat {r} of {n} (byte {a}) reads what repeat {written[a]} of "
                                       "the same instruction wrote (undefined on the device: "
                                       "docs/reference/ascendc.md §1.9 operand rules)")
            if not whole and ls == ld:
                continue
            lanes = set(ls)
            for a in ld:
                if a in lanes:
                    raise KirFault(f"{what}: in repeat {r} dst "
                                   f"{'overlaps the lanes of ' if whole else 'partly overlaps '}{n} at byte {a} "
                                   "(only a 100 % overlap of a repeat's lanes is allowed)")
        for a in ld:
            written.setdefault(a, r)


class KirFault(OpgenError):
    """A fault of an interpreted kernel: the device would hang, race or read garbage. `core` is the core index."""

    def __init__(self, message: str, core: int | None = None):
        self.core = core
        self.bare = message
        super().__init__(f"[core {core}] {message}" if core is not None else message)


class _Return(Exception):
    def __init__(self, value):
        self.value = value


def needed_sync(earlier: int, later: int) -> str:
    """The synchronisation that orders an access of pipe index `earlier` before one of `later` (§1.6), worded as the
    emulation's race faults word it."""
    if earlier == later:
        return f"PipeBarrier<{PIPES[later].value}>"
    ev = f"{PIPES[earlier].name}_{PIPES[later].name}"
    if ev in kir.HARD_EVENTS:
        return f"SetFlag/WaitFlag<HardEvent::{ev}>"
    return "PipeBarrier<PIPE_ALL>"


# ------------------------------------------------------------------------------------------------ memory
class Shadow:
    """The race detector's shadow of `nbytes` bytes of memory (a UB, or one GM buffer as one core sees it), per
    32-B block: the last writer (pipe, clock, statement), each pipe's latest reader since and PIPE_V's reader
    before its latest (`p_*`: what an in-place vector instruction, reading then writing the block, is checked
    against, _Core.touch). `name` names the memory in a race fault ("UB", "GM tensor 'gmY'"). A statement entry
    (`*_stmt`) is read only where its clock is > 0 (the earlier access a race names, set with that clock); elsewhere
    it holds whatever an earlier access left. Every array starts zero, so NumPy takes it from calloc: a core's UB
    shadow of which a kernel touches a few KB costs no page of the rest (np.full of the statement arrays wrote
    every page: about half of an Arena's 0.29 ms, a launch makes one a core). Clocks and statements are int32 (a
    pipe's instruction count and a statement's index: far below 2**31 in any launch the interpreter can run), the
    pipe int8: a launch keeps a shadow page per GM page a core touches, and PairGuardNorm at 64 x 16384 fp32 on
    COL_SPLIT (every core a slice of every row) kept 18 859 of them, 1.7 GB at int64."""

    def __init__(self, nbytes: int, name: str):
        self.name = name
        nb = -(-nbytes // BLOCK)
        self.w_clock = np.zeros(nb, dtype=np.int32)
        self.w_pipe = np.zeros(nb, dtype=np.int8)
        self.w_stmt = np.zeros(nb, dtype=np.int32)
        self.r_clock = np.zeros((nb, _NP), dtype=np.int32)
        self.r_stmt = np.zeros((nb, _NP), dtype=np.int32)
        self.p_clock = np.zeros(nb, dtype=np.int32)
        self.p_stmt = np.zeros(nb, dtype=np.int32)
        self.origin = 0           # byte of the memory where this shadow starts (a GM page's)


class Arena(Shadow):
    """A core's UB: `size` bytes, a written map per byte and the race shadow per 32-B block (Shadow)."""

    def __init__(self, size: int, name: str = "UB"):
        super().__init__(size, name)
        self.data = np.zeros(size, dtype=np.uint8)
        self.written = np.zeros(size, dtype=bool)
        self.owner = np.zeros(size, dtype=np.uint8)   # per byte: the TBufPool (1-based) that last wrote it, 0 none
        self.used = 0

    @property
    def size(self) -> int:
        """Bytes of the arena."""
        return self.data.size


@dataclass
class LT:
    """A LocalTensor: `size` elements of `dtype` from byte `off` of on-chip memory `mem` ("UB", or on an AIC "L1",
    "L0A", "L0B", "L0C"); `queue` / `tag` name the queue block it was allocated or dequeued as (tag -1: none)."""

    off: int
    size: int
    dtype: str
    queue: str | None = None
    tag: int = -1
    mem: str = "UB"
    pool: int = 0   # 1-based id of the TBufPool its buffer was carved from (0: the pipe's own)
    part: tuple | None = None   # (j, n): the view ends where part j of its allocation's cut ends (kir.Ref.part)

    def at(self, i: int) -> "LT":
        """tensor[i] (the view from element i to the end of the allocation); a fault past the end."""
        if i < 0 or i > self.size:
            raise KirFault(f"LocalTensor operator[{i}] past the end of a {self.size}-element tensor")
        return LT(self.off + i * NP_TYPES[self.dtype].itemsize, self.size - i, self.dtype, self.queue, self.tag,
                  self.mem, self.pool)


@dataclass
class _Queue:
    local: kir.Local
    offs: list = field(default_factory=list)
    length: int = 0
    in_use: list = field(default_factory=list)
    queued: deque = field(default_factory=deque)
    nxt: int = 0
    enq_tok: list = field(default_factory=list)
    free_tok: list = field(default_factory=list)
    mem: str = "UB"
    pool: int = 0
    enq_id: list = field(default_factory=list)    # per block: the event id its EnQue holds (None: none)
    free_id: list = field(default_factory=list)   # per block: the event id its FreeTensor holds


@dataclass
class _Gm:
    name: str
    data: np.ndarray | None    # uint8 view of the caller's array (None: unbound)
    dtype: str
    workspace: bool = False


@dataclass
class RunResult:
    """The outcome of a launch: ok, the fault messages (`[core k] ...`; the first stops the launch), and per-core
    peak UB bytes used."""

    ok: bool
    faults: list
    ub_peak: list

    @property
    def first_fault(self) -> str:
        """The first fault's message ("" when ok)."""
        return self.faults[0] if self.faults else ""


# ------------------------------------------------------------------------------------------------ the launch
class _Launch:
    """The cross-core state of a launch (EMU.md "Cross-core synchronisation", opgen/emu/include/emu/mix.h): a counter
    per core and flag id, the sets of mode 0 / 1 / 2 still waiting for their group. `mix`: a 1 AIC : 2 AIV launch,
    AI Core c = AIC slot c and AIVs slots n + 2c, n + 2c + 1 (`n` AI Cores). `deterministic`: the framework asked for
    deterministic computation, so the fp32 atomic adds of different cores must be ordered (gm_access)."""

    MAX_COUNT = 15

    def __init__(self, cores: list, mix: bool, deterministic: bool = False):
        self.cores = cores
        self.mix = mix
        self.deterministic = deterministic
        self.count = np.zeros((0, len(kir.CROSS_FLAG_IDS)), dtype=np.int64)   # sized once the cores exist
        self.pending: dict = {}    # (slot, mode, flag) -> [clock snapshot of each set not matched yet]
        self.snaps: dict = {}      # (slot, flag) -> deque of the clock snapshots its raised counter carries
        self.K = np.zeros((0, 0, _NP), dtype=np.int64)
        self.gm: dict = {}         # GM buffer address -> per byte: writer core, pipe, clock; last reader core, pipe, clock

    def start(self):
        """Sizes the counters and the cross-core knowledge once the cores exist: K[j][i][q] is the clock of core i's
        pipe q that core j knows complete (0: nothing)."""
        n = len(self.cores)
        self.count = np.zeros((n, len(kir.CROSS_FLAG_IDS)), dtype=np.int64)
        self.K = np.zeros((n, n, _NP), dtype=np.int64)

    # -- cross-core happens-before (SyncAll, cross-core flags) and the GM race check it feeds
    def snapshot(self, me, pipe: Pipe) -> np.ndarray:
        """What core `me` releases by a CrossCoreSetFlag issued on `pipe`: what it knows of the others, and of its own
        pipes what `pipe` is ordered after (the set runs on that pipe after its earlier work, §1.6)."""
        snap = self.K[me.slot].copy()
        snap[me.slot] = np.maximum(snap[me.slot], me.token(PIDX[pipe]))
        return snap

    def acquire(self, slot: int, snap: np.ndarray):
        np.maximum(self.K[slot], snap, out=self.K[slot])

    def meet(self, group: list):
        """SyncAll of `group` (a PIPE_ALL barrier in each core first): every member knows every member's work."""
        for i in group:
            self.K[i][i] = self.cores[i].clk
        m = self.K[group].max(axis=0)
        for i in group:
            np.maximum(self.K[i], m, out=self.K[i])

    def gm_access(self, me, ins, g, off: int, n: int, write: bool, atomic: bool = False):
        """Core `me`'s instruction `ins` (pipe index, clock, statement) reads or writes bytes [off, off + n) of GM
        tensor g's buffer: a fault when another core wrote them (read-after-write, write-after-write) or last read
        them (write-after-read) and no SyncAll or cross-core flag orders that access before this one -- a race
        between cores. Per byte (GM writes are byte-exact: two cores writing neighbouring bytes of one 32-B block do
        not conflict); the last writer and one reader of each byte are kept (pipe and clock of the access): the
        latest, unless an earlier read by another core is not ordered before it (then that one, which a later write
        must still be ordered after). One reader only: with three or more unordered readers a write-after-read can
        go unseen (a full read vector per byte would cost a core count of clocks per byte). An atomic add (`atomic`)
        is kept apart from the last plain writer, one adder per byte the same way: adds of several cores need no
        order among them, but each must follow the plain write before it, and a read or a plain write must follow
        them -- except in a deterministic launch (`self.deterministic`), where an add must be ordered after another
        core's kept add too (add-after-add: the fp32 sum would depend on the order; EMU.md "Races between cores")."""
        key = g.data.__array_interface__["data"][0]
        sh = self.gm.get(key)
        if sh is None:
            if not write and not g.workspace:
                return            # never written in this launch: an input (the workspace's reads are kept)
            size = g.data.size
            # (core, pipe, clock) per byte of: the last plain writer, the kept reader, the kept atomic adder
            sh = self.gm[key] = [a for _k in range(3)
                                 for a in (np.full(size, -1, np.int32), np.zeros(size, np.int8), np.zeros(size, np.int32))]
        wc, wp, wt, rc, rp, rt, ac, ap, at = (a[off:off + n] for a in sh)
        me_i = me.slot
        known = self.K[me_i]

        def unordered(core, pipe, clock):
            bad = (core >= 0) & (core != me_i)
            if bad.any():
                c = np.where(bad, core, 0)
                bad &= known[c, pipe.astype(np.int64)] < clock
            return bad

        # the last plain writer, then the kept atomic adder (atomic adds of several cores accumulate in any order:
        # no race among them, but a read or a plain write must be ordered after every add, and an add after the
        # plain write it adds to), then the kept reader
        checks = [("read-after-write" if not write else "write-after-write", wc, wp, wt)]
        if not atomic:
            checks.append(("read-after-write" if not write else "write-after-write", ac, ap, at))
        elif self.deterministic:
            checks.append(("add-after-add", ac, ap, at))
        if write:
            checks.append(("write-after-read", rc, rp, rt))
        for kind, who, pipe, clock in checks:
            bad = unordered(who, pipe, clock)
            if bad.any():
                j = int(np.argmax(bad))
                other = self.cores[int(who[j])].label
                adds = kind == "add-after-add"
                did = "read" if kind == "write-after-read" else "added" if adds else "wrote"
                verb = "adds to" if adds else "writes" if write else "reads"
                raise KirFault(f"race ({kind}) between cores on GM tensor '{g.name}' byte {off + j}: "
                               f"{me.stext(ins[2], ins[0])} {verb} what {other} {did} with "
                               "no SyncAll or cross-core flag ordering them (a CrossCoreSetFlag orders what its pipe "
                               "has completed; docs/reference/ascendc.md §1.6)" +
                               ("; the launch is deterministic (the framework asked for deterministic computation) "
                                "and fp32 atomic adds in an order the timing picks round to different bits "
                                "(docs/reference/ascendc.md §1.7)" if adds else ""))

        def keep_one(core, pipe, clock):
            """One access kept per byte: another core's this one is not ordered after stays (a later access must be
            checked against it); one ordered before this one gives way."""
            keep = unordered(core, pipe, clock)
            core[:], pipe[:], clock[:] = (np.where(keep, core, me_i), np.where(keep, pipe, ins[0]),
                                          np.where(keep, clock, ins[1]))

        if atomic:
            keep_one(ac, ap, at)
            rc[:] = -1
        elif write:
            wc[:], wp[:], wt[:] = me_i, ins[0], ins[1]
            rc[:] = -1
            ac[:] = -1
        else:
            keep_one(rc, rp, rt)

    def check_id(self, flag: int, what: str):
        if flag not in kir.CROSS_FLAG_IDS:
            raise KirFault(f"{what}: flag id {flag} outside 0..{kir.CROSS_FLAG_IDS[-1]} (SyncAll uses 11-14; "
                           "docs/reference/ascendc.md §1.6)")

    def raise_(self, slot: int, flag: int):
        self.count[slot][flag] += 1
        if self.count[slot][flag] > self.MAX_COUNT:
            raise KirFault(f"CrossCoreSetFlag: the counter of flag {flag} of {self.cores[slot].label} would pass "
                           f"{self.MAX_COUNT} sets without a CrossCoreWaitFlag (docs/reference/ascendc.md §1.6)")

    def raise_with(self, slot: int, flag: int, snap: np.ndarray):
        self.raise_(slot, flag)
        self.snaps.setdefault((slot, flag), deque()).append(snap)

    def group_set(self, me, pipe: Pipe, mode: int, flag: int, group: list, targets: list):
        key = (me.slot, mode, flag)
        self.pending.setdefault(key, []).append(self.snapshot(me, pipe))
        if len(self.pending[key]) > self.MAX_COUNT:
            raise KirFault(f"CrossCoreSetFlag<{mode}>({flag}): more than {self.MAX_COUNT} sets not matched by the "
                           "rest of the group")
        while all(self.pending.get((g, mode, flag)) for g in group):
            snap = np.max([self.pending[(g, mode, flag)].pop(0) for g in group], axis=0)
            for t in targets:
                self.raise_with(t, flag, snap)

    def cross_wait(self, me, flag: int):
        """The wait's counter was positive: consume one set and what its setters released."""
        self.count[me.slot][flag] -= 1
        self.acquire(me.slot, self.snaps[(me.slot, flag)].popleft())

    def cross_set(self, me, s: kir.CrossCoreSetFlag):
        what = f"CrossCoreSetFlag<{s.mode}, {s.pipe.value}>({s.id}) in {me.where}"
        self.check_id(s.id, what)
        if s.pipe in (Pipe.S, Pipe.ALL):
            raise KirFault(f"{what}: PIPE_S and PIPE_ALL are not allowed")
        if me.kind == "AIV" and s.pipe in (Pipe.M, Pipe.MTE1, Pipe.FIX) or me.kind == "AIC" and s.pipe is Pipe.V:
            raise KirFault(f"{what}: an {me.kind} core has no {s.pipe.value}")
        me.issue(PIDX[s.pipe], s)
        n = len(self.cores) // 3 if self.mix else len(self.cores)
        if s.mode == 0:
            group = [c.slot for c in self.cores if c.kind == me.kind]
            self.group_set(me, s.pipe, 0, s.id, group, group)
        elif s.mode in (1, 2) and not self.mix:
            raise KirFault(f"{what}: mode {s.mode} needs a mixed launch (KERNEL_TYPE_MIX_AIC_1_2)")
        elif s.mode == 1:
            if me.kind != "AIV":
                raise KirFault(f"{what}: mode 1 synchronises the two AIVs of one AI Core (an AIV core only)")
            core = (me.slot - n) // 2
            pair = [n + 2 * core, n + 2 * core + 1]
            self.group_set(me, s.pipe, 1, s.id, pair, pair)
        elif s.mode == 2:
            if me.kind == "AIC":
                snap = self.snapshot(me, s.pipe)
                self.raise_with(n + 2 * me.slot, s.id, snap)
                self.raise_with(n + 2 * me.slot + 1, s.id, snap)
            else:
                core = (me.slot - n) // 2
                self.group_set(me, s.pipe, 2, s.id, [n + 2 * core, n + 2 * core + 1], [core])
        else:
            raise KirFault(f"{what}: mode {s.mode} (valid: 0, 1, 2; mode 4 is Ascend 950's)")

    def leftovers(self) -> list:
        """Faults for flags set but never waited for at the end of the launch (sets and waits pair, §1.6)."""
        out = []
        for slot, flag in zip(*np.nonzero(self.count)):
            out.append(f"[{self.cores[slot].label}] CrossCore flag {flag}: {self.count[slot][flag]} set(s) never "
                       "consumed by a CrossCoreWaitFlag when the kernel returns (every CrossCoreSetFlag needs its "
                       "CrossCoreWaitFlag)")
        for (slot, mode, flag), v in sorted(self.pending.items()):
            if v:
                out.append(f"[{self.cores[slot].label}] CrossCore flag {flag} (mode {mode}): {len(v)} set(s) the rest "
                           "of the group never matched")
        return out


# ------------------------------------------------------------------------------------------------ one core
class _Core:
    """One core of the launch: an AIV (kind "AIV": UB, the vector unit, MTE2 / MTE3) or an AIC (kind "AIC": L1, L0A,
    L0B, L0C, MTE1 / M / FIX, MTE2). `slot` is its index in the launch, `label` its name in faults, `idx` its
    GetBlockIdx(), `sub` its GetSubBlockIdx(), `ratio` its GetTaskRatio() (§1.3)."""

    def __init__(self, k: kir.KernelClass, idx: int, num: int, tiling: dict, gms: dict, mem: dict,
                 types: dict, kind: str = "AIV", slot: int | None = None, label: str | None = None, sub: int = 0,
                 ratio: int = 1, launch: "_Launch | None" = None):
        self.k = k
        self.idx = idx
        self.kind = kind
        self.slot = idx if slot is None else slot
        self.label = label or f"core {idx}"
        self.launch = launch
        names = ("UB",) if kind == "AIV" else ("L1", "L0A", "L0B", "L0C", "BiasTable")
        self.mem = {n: Arena(mem[n], n) for n in names}
        self.ub = self.mem.get("UB")
        self.types = types
        self.methods = {m.name: m for m in k.methods}
        self.locals = {b.name: b for b in k.locals}
        self.gms = gms
        self.tables = {t.name: t for t in getattr(k, "tables", ())}
        self.struct_keys = {d.name: [(f[0] if f[3] is None else f"{f[0]}[{j}]", f[1],
                                      dict(getattr(d, "defaults", ())).get(f[0], 0))
                                     for f in d.fields for j in ([None] if f[3] is None else range(f[3]))]
                            for d in k.structs}   # (field key, kind, initial value) per struct type
        self.members: dict = {f: int(tiling[f]) for f in k.fields}
        self.members.update({"blockIdx": idx, "blockNum": num, "subBlockIdx": sub, "taskRatio": ratio})
        for t in k.tparams:
            self.members[f"sizeof({t})"] = NP_TYPES[types[t]].itemsize
        for s in k.scalars:
            self.members[s.name] = (np.float32(s.init) if s.ctype == "float" else
                                    bool(s.init) if s.ctype == "bool" else int(s.init))
        self.mtensors: dict = {t.name: ([None] * t.count if t.count is not None else None) for t in k.tensors}
        self.mdtypes = {t.name: t.dtype for t in k.tensors}
        self.queues: dict = {}
        self.tbufs: dict = {}
        self.pools: dict = {}          # TBufPool -> [start, end, next free byte, id, handles, bufIDSize] (init_buffer)
        self.clk = np.zeros(_NP, dtype=np.int64)
        self.know = np.zeros((_NP, _NP), dtype=np.int64)
        self.flags: dict = {}
        self.held: dict = {}           # the TPipe's event-id pool: (event, id) -> who holds it (a queue, AllocEventID)
        self.gm_shadow: dict = {}      # (GM buffer address, page) -> Shadow (this core's GM accesses)
        self.stmts: list = []
        self.stmt_ids: dict = {}
        self.where = "Init"
        self.tmaps: list = [{}]        # template arguments of the template methods being run (innermost last)
        self.cur = None                # the statement being run (FLoad's scalar read names it)

    # -- names and values
    def dt(self, t: str) -> str:
        t = self.tmaps[-1].get(t, t)
        return self.types.get(t, t)

    def env(self, frame) -> "_Env":
        """The names an integer expression of `frame` may read (ev), looked up when read: a struct's int field
        (`var.field`: its initialiser until set) over the frame's ints (inner scopes first) over a template method's
        own type sizes (`sizeof(S)` of LoadRow<S>) over the class's members; `_FLOATS`: the frame's float scalars'
        scope, which FIndex reads."""
        return _Env(self, frame)

    def ival(self, e, frame) -> int:
        if isinstance(e, bool):
            return int(e)
        # a literal or a plain name needs no environment (env builds one of every name: a quarter of a launch's
        # time when every index paid for it); what env would give: a frame's int (inner scopes first) over a member
        if isinstance(e, int):
            return e
        if isinstance(e, Lit):
            return int(e.value)
        if isinstance(e, Sym) and "." not in e.name and "(" not in e.name:
            ints = frame["ints"]
            if e.name in ints:
                return int(ints[e.name])
            if e.name in self.members:
                return int(self.members[e.name])
        env = self.env(frame)
        try:
            return int(self.ev(as_dim(e), env))
        except KirFault:
            raise
        except OpgenError as ex:
            raise KirFault(f"{self.where}: integer expression {e}: {ex}") from None

    def ev(self, e, env) -> int:
        """An integer expression's value (C++ int64 semantics for values >= 0); Invoke runs the method."""
        if isinstance(e, Lit):
            return e.value
        if isinstance(e, Sym):
            try:
                return int(env[e.name])
            except KeyError:
                raise KirFault(f"{self.where}: symbol {e.name} is not bound") from None
        if isinstance(e, Bin):
            a, b = self.ev(as_dim(e.lhs), env), self.ev(as_dim(e.rhs), env)
            if e.op in ("//", "%") and b == 0:
                raise KirFault(f"{self.where}: division by zero in {e}")
            return _BINOPS[e.op](a, b)
        if isinstance(e, Fn):
            v = [self.ev(as_dim(a), env) for a in e.args]
            if e.fn in ("ceil_div", "align_up") and v[1] <= 0:
                raise KirFault(f"{self.where}: {e.fn} by {v[1]} in {e}")
            return {"min": min, "max": max, "ceil_div": lambda a, b: -(-a // b),
                    "align_up": lambda a, b: -(-a // b) * b}[e.fn](*v)
        if isinstance(e, kir.Select):
            conds = e.cond if isinstance(e.cond, tuple) else (e.cond,)
            return self.ev(as_dim(e.a), env) if all(self.holds(c, env) for c in conds) else self.ev(as_dim(e.b), env)
        if isinstance(e, kir.Invoke):
            return self.invoke(e.method, [self.ev(as_dim(a), env) for a in e.args])
        if isinstance(e, kir.FIndex):   # the integer a float scalar holds (a checked index)
            fl = env[_FLOATS] if _FLOATS in env else None
            v = None if fl is None else fl[e.name] if e.name in fl else self.members.get(e.name)
            if v is None:
                raise KirFault(f"{self.where}: {e}: float scalar {e.name} is not bound")
            if not (np.isfinite(v) and v >= 0 and float(v) == int(v)):
                raise KirFault(f"{self.where}: {e}: {e.name} = {v} is not a non-negative integer")
            return int(v)
        if isinstance(e, kir.GmAt):   # an int GM element read by the scalar unit (a member tensor: inputs only)
            g = self.gms.get(e.tensor)
            i = self.ev(as_dim(e.index), env)
            if g is None or g.data is None:
                raise KirFault(f"{self.where}: {e}: GM tensor {e.tensor} has no buffer")
            dt = NP_TYPES[self.dt(g.dtype)]
            if not 0 <= i < g.data.size // dt.itemsize:
                raise KirFault(f"{self.where}: {e}: GetValue({i}) outside the {g.data.size // dt.itemsize} elements of "
                               f"'{g.name}'")
            self.touch_gm(self.issue(_S, self.cur), g, i * dt.itemsize, dt.itemsize, False)
            return int(g.data[i * dt.itemsize:(i + 1) * dt.itemsize].view(dt)[0])
        if isinstance(e, kir.TableAt):
            idx = [self.ev(as_dim(a), env) for a in e.index]
            try:
                return self.tables[e.table].at(idx)
            except (KeyError, IndexError) as ex:
                raise KirFault(f"{self.where}: {e} with index {idx}: {ex}") from None
        return int(e.evaluate(env))

    def holds(self, c, env) -> bool:
        if isinstance(c, Sym):          # a bool scalar
            return bool(self.ev(c, env))
        return _CMPS[c.op](self.ev(as_dim(c.lhs), env), self.ev(as_dim(c.rhs), env))

    def invoke(self, method: str, values: list) -> int:
        """The int64 result of method(values...) inside an expression (runs its body; no SyncAll inside)."""
        m = self.methods[method]
        frame = {"ints": {p.name: v for p, v in zip(m.params, values)}, "floats": {}, "tensors": {}, "gms": {},
                 "modes": {}, "structs": {}}
        outer, self.where = self.where, method
        value = None
        try:
            for _ in self.block(m.body, frame):
                raise KirFault(f"{method}: SyncAll inside a method called from an expression")
        except _Return as r:
            value = self.ival(r.value, frame)
        self.where = outer
        if value is None:
            raise KirFault(f"{method} returned no value")
        return value
    def fval(self, f, frame) -> np.float32:
        if isinstance(f, kir.FConst):
            return np.float32(f.value)
        if isinstance(f, kir.FRef):
            if f.name in frame["floats"]:
                return frame["floats"][f.name]
            return np.float32(self.members[f.name])
        if isinstance(f, kir.FInt):
            return np.float32(self.ival(f.value, frame))
        if isinstance(f, kir.FBits):
            return np.array([self.ival(f.value, frame) & 0xFFFFFFFF], dtype=np.uint32).view(np.float32)[0]
        if isinstance(f, kir.FBin):
            a, b = self.fval(f.a, frame), self.fval(f.b, frame)
            with np.errstate(all="ignore"):
                return np.float32({"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}[f.op](a, b))
        if isinstance(f, kir.FLoad) and isinstance(f.src, kir.GmView):
            return self.load_gm(f.src, frame, self.cur)
        if isinstance(f, kir.FLoad):
            return self.load(f.src, frame, self.cur)
        if isinstance(f, kir.FNeg):
            return np.float32(-self.fval(f.x, frame))
        if isinstance(f, kir.FMinMax):
            a, b = self.fval(f.a, frame), self.fval(f.b, frame)
            return a if (a > b if f.fn == "max" else a < b) else b
        if isinstance(f, kir.FCond):   # IEEE comparisons (NumPy's, C++'s): only the chosen branch is evaluated
            a, b = self.fval(f.a, frame), self.fval(f.b, frame)
            holds = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[f.cmp]
            return self.fval(f.x if holds else f.y, frame)
        if isinstance(f, kir.FCall):
            a = self.fval(f.arg, frame)
            with np.errstate(all="ignore"):
                return np.float32(np.sqrt(a) if f.fn == "sqrt" else np.abs(a))
        raise KirFault(f"not a float expression: {f!r}")

    def tensor(self, r: kir.Ref, frame) -> LT:
        if r.tensor in frame["tensors"]:
            t = frame["tensors"][r.tensor]
        else:
            t = self.mtensors.get(r.tensor)
            if r.slot is not None:
                t = t[self.ival(r.slot, frame)]
        if t is None:
            raise KirFault(f"{self.where}: tensor {r.tensor} is not allocated")
        if r.part is not None:     # the lowering's claim (kir.Ref.part): inside part j of n equal parts
            return self._in_part(t, r, self.ival(r.offset, frame))
        t = t.at(self.ival(r.offset, frame))
        if r.as_dtype is not None:   # ReinterpretCast: the same bytes as another element type
            nb = t.size * NP_TYPES[self.dt(t.dtype)].itemsize
            t = LT(t.off, nb // NP_TYPES[self.dt(r.as_dtype)].itemsize, r.as_dtype, t.queue, t.tag, t.mem, t.pool)
        return t

    def _in_part(self, t: LT, r: kir.Ref, i: int) -> LT:
        """t[i] as far as the end of part j of t's allocation cut into n equal parts (r.part = (j, n)): a fault when
        element i lies outside the part, so an access past the part's end faults as one past a tensor's end does
        (the dependency pass took the parts apart, kir.Ref.part)."""
        j, n = r.part
        if t.size % n:
            raise KirFault(f"{self.where}: {r.tensor} of {t.size} elements cannot be cut into {n} equal parts "
                           f"(the operand's part claim {j} of {n})")
        size = t.size // n
        if not j * size <= i <= (j + 1) * size:
            raise KirFault(f"{self.where}: {r.tensor}[{i}] lies outside part {j} of {n} (elements "
                           f"[{j * size}, {(j + 1) * size})) that the lowering claims for it")
        t = t.at(i)
        return LT(t.off, (j + 1) * size - i, t.dtype, t.queue, t.tag, t.mem, t.pool, r.part)

    def bind(self, var: str, t: LT, frame):
        if var in frame["tensors"] or var not in self.mtensors:
            frame["tensors"][var] = t
        else:
            self.mtensors[var] = t

    def gm(self, v: kir.GmView, frame) -> tuple[_Gm, int]:
        """The GM tensor of a view and its start in bytes."""
        base = 0
        name = v.tensor
        m = kir.STRUCT_FIELD.match(name)
        if m and m.group(1) in frame.get("structs", {}):   # a GM tensor field of a struct (inner scopes first)
            key = m.group(2) + (f"[{m.group(3)}]" if m.group(3) is not None else "")
            got = frame["structs"][m.group(1)].get(key)
            if got is None:
                raise KirFault(f"{self.where}: GM tensor field {name} is read before it is set")
            name, base = got
        elif name in frame["gms"]:
            name, base = frame["gms"][name]
        g = self.gms[name]
        return g, (base + self.ival(v.offset, frame)) * NP_TYPES[self.dt(g.dtype)].itemsize

    # -- the pipes
    def sid(self, s) -> int:
        key = (self.where, id(s))
        i = self.stmt_ids.get(key)
        if i is None:
            i = len(self.stmts)
            self.stmts.append((kir.to_text_stmt(s).splitlines()[0].strip(), self.where))
            self.stmt_ids[key] = i
        return i

    def stext(self, sid: int, pipe: int) -> str:
        text, where = self.stmts[sid]
        return f"{text} ({where}, {PIPES[pipe].value})"

    def issue(self, pipe: int, s) -> tuple[int, int, int]:
        self.clk[pipe] += 1
        return pipe, int(self.clk[pipe]), self.sid(s)

    def ordered(self, later: int, pipes: np.ndarray, clocks: np.ndarray) -> np.ndarray:
        """Per access: whether pipe `pipes[i]`'s instruction at `clocks[i]` completed before `later`'s next one."""
        known = self.know[later][pipes] >= clocks
        return np.where(pipes == later, (later != _V) | known, known)

    def touch_elems(self, ins, off: int, idx, sz: int, write: bool, pool: int | None = None):
        """`touch` of the UB elements `idx` (element indices from byte `off`, `sz` bytes each) of one instruction:
        the same bytes as one touch an element, touched one contiguous run of elements at a time (a block touched
        twice by one instruction is checked and recorded as once, so the verdicts are those of per-element
        touches, at a run's cost instead of an element's)."""
        u = np.asarray(idx, dtype=np.int64)
        if u.size == 0:
            return
        step = np.diff(u)
        if not (step > 0).all():   # else already strictly increasing (most lane grids): unique as it is
            u = np.sort(u)        # np.unique's values (sorted, each once) by a sort and a neighbour compare: NumPy 2's
            u = u[np.concatenate(([True], u[1:] != u[:-1]))]   # hashing unique took 2-3x as long on these grids
            step = np.diff(u)
        cut = np.flatnonzero(step != 1) + 1
        first, last = u[np.concatenate(([0], cut))], u[np.concatenate((cut, [u.size])) - 1]
        for lo, n in zip((off + first * sz).tolist(), ((last - first + 1) * sz).tolist()):
            self.touch(ins, lo, n, write, pool=pool)

    def touch(self, ins, off: int, n: int, write: bool, a: Shadow | None = None, pool: int | None = None):
        """Instruction `ins` reads or writes bytes [off, off + n) of the memory shadowed by `a` (default: the UB):
        checks the shadow, then records the access. A read checks the last writer (RAW), a write the last writer
        (WAW) and each pipe's latest reader since (WAR); exact with one reader per pipe because `ordered` is
        monotone in the earlier clock, except for the writer's own read of the block (in place), where the pipe's
        read before it is checked instead (the emulation's TouchBlock, opgen/emu/include/emu/pipes.h)."""
        if n <= 0:
            return
        a = self.ub if a is None else a
        pipe, clock, sid = ins
        if pool is not None and a is self.ub:   # through a UB tensor: the TBufPool owner of the bytes (owned_read)
            if write:
                a.owner[off:off + n] = pool
            else:
                self.owned_read(off, n, pool, self.stmts[sid][0] if 0 <= sid < len(self.stmts) else "an instruction")
        b0, b1 = off // BLOCK, min((off + n - 1) // BLOCK, a.w_clock.size - 1)
        if b0 == b1 >= 0:   # one block (a scalar access, one run of a strided lane grid): the same rules on Python ints
            self.touch_block(a, b0, ins, write)
        else:
            self.touch_blocks(a, b0, b1, ins, write)

    def touch_blocks(self, a: Shadow, b0: int, b1: int, ins, write: bool):
        """`touch`'s rules for blocks b0..b1 of shadow `a`, on arrays: the first block (and pipe) breaking one
        raises the race fault; else the access is recorded."""
        pipe, clock, sid = ins
        sl = slice(b0, b1 + 1)
        wc, wp = a.w_clock[sl], a.w_pipe[sl]
        # the last writer unless `ordered`: a write at clock > 0 that `pipe` does not know completed, not an in-order
        # pipe's own earlier write, not V's own instruction's
        bad = wc > np.maximum(self.know[pipe][wp], 0)
        bad &= (wp != pipe) if pipe != _V else ~((wp == pipe) & (wc == clock))
        if bad.any():
            j = int(np.argmax(bad))
            self.race(a, b0 + j, ins, write, int(wp[j]), int(a.w_stmt[b0 + j]), True)
        if write:
            rc, rs = a.r_clock[sl], a.r_stmt[sl]
            # each pipe q's latest reads since the last write, all pipes at once (`ordered`): a read at clock > 0 is
            # unordered unless `pipe` knows q's clock reached it; S's reads (q = 0) are synchronous, never
            # overtaken, and an in-order pipe's own reads are ordered before its write; V's own read of the block
            # (in place) is checked by V's read before it
            over = rc > np.maximum(self.know[pipe], 0)
            over[:, 0] = False
            if pipe == _V:
                own = rc[:, _V] == clock
                over[:, _V] = np.where(own, a.p_clock[sl], rc[:, _V]) > max(int(self.know[_V, _V]), 0)
            else:
                over[:, pipe] = False
            if over.any():   # the first pipe, then the first block, with an unordered read
                q = int(np.argmax(over.any(axis=0)))
                j = int(np.argmax(over[:, q]))
                st = np.where(own, a.p_stmt[sl], rs[:, _V]) if q == _V == pipe else rs[:, q]
                self.race(a, b0 + j, ins, write, q, int(st[j]), False)
            a.w_clock[sl] = clock
            a.w_stmt[sl] = sid
            a.w_pipe[sl] = pipe
            for arr in (a.r_clock, a.p_clock):   # the statements stay: read only where a clock is > 0 (Shadow)
                arr[sl] = 0
        else:
            rc, rs = a.r_clock[sl, pipe], a.r_stmt[sl, pipe]
            if pipe == _V:        # a second touch by the same instruction keeps the read before it
                new = rc != clock
                a.p_clock[sl] = np.where(new, rc, a.p_clock[sl])
                a.p_stmt[sl] = np.where(new, rs, a.p_stmt[sl])
            a.r_clock[sl, pipe] = clock
            a.r_stmt[sl, pipe] = sid

    def touch_block(self, a: Shadow, j: int, ins, write: bool):
        """`touch` of the one block j of shadow `a`: the same checks, fault and record as touch's array form for a
        one-block slice, on Python ints (most touches of a strided instruction are one block each, where the array
        form's dozen NumPy calls cost more than the rules)."""
        pipe, clock, sid = ins
        know = self.know[pipe].tolist()
        wc, wp = int(a.w_clock[j]), int(a.w_pipe[j])
        if wc > max(know[wp], 0) and ((wp != pipe) if pipe != _V else not (wp == pipe and wc == clock)):
            self.race(a, j, ins, write, wp, int(a.w_stmt[j]), True)
        if write:
            rc = a.r_clock[j].tolist()
            own = pipe == _V and rc[_V] == clock
            for q in range(_NP):
                if q == 0 or (q == pipe and pipe != _V):
                    continue
                if q == _V == pipe:
                    if (int(a.p_clock[j]) if own else rc[_V]) > max(know[_V], 0):
                        self.race(a, j, ins, write, q, int(a.p_stmt[j]) if own else int(a.r_stmt[j, _V]), False)
                elif rc[q] > max(know[q], 0):
                    self.race(a, j, ins, write, q, int(a.r_stmt[j, q]), False)
            a.w_clock[j] = clock
            a.w_stmt[j] = sid
            a.w_pipe[j] = pipe
            a.r_clock[j] = 0
            a.p_clock[j] = 0
        else:
            if pipe == _V:        # a second touch by the same instruction keeps the read before it
                rc = int(a.r_clock[j, pipe])
                if rc != clock:
                    a.p_clock[j] = rc
                    a.p_stmt[j] = a.r_stmt[j, pipe]
            a.r_clock[j, pipe] = clock
            a.r_stmt[j, pipe] = sid

    def touch_gm(self, ins, g: "_Gm", off: int, n: int, write: bool, atomic: bool = False):
        """Instruction `ins` (an MTE2 load or MTE3 store) reads or writes bytes [off, off + n) of GM tensor g's
        buffer (off from the buffer's start): this core's GM shadow of that buffer, in pages of _GM_PAGE bytes
        made on first touch (keyed by the underlying array, so GM tensors sharing the workspace share it). Other
        cores' accesses are not checked (SyncAll orders them), as in the emulation (opgen/emu/include/emu/pipes.h
        TouchGm)."""
        if n <= 0:
            return
        if self.launch is not None:   # other cores' accesses: ordered by SyncAll and cross-core flags only
            self.launch.gm_access(self, ins, g, off, n, write, atomic)
        key = g.data.__array_interface__["data"][0]
        end = off + n
        while off < end:
            page = off // _GM_PAGE
            sh = self.gm_shadow.get((key, page))
            if sh is None:
                sh = self.gm_shadow[(key, page)] = Shadow(_GM_PAGE, f"GM tensor '{g.name}'")
                sh.origin = page * _GM_PAGE
            stop = min(end, (page + 1) * _GM_PAGE)
            self.touch(ins, off - sh.origin, stop - off, write, sh)
            off = stop

    def race(self, a: Shadow, block, ins, now_write, epipe, esid, ewrite):
        kind = ("write-after-write" if ewrite else "write-after-read") if now_write else "read-after-write"
        lo = a.origin + block * BLOCK
        raise KirFault(f"race ({kind}) on {a.name} bytes [{lo}, {lo + BLOCK}): "
                       f"{self.stext(ins[2], ins[0])} {'writes' if now_write else 'reads'} what "
                       f"{self.stext(esid, epipe)} {'wrote' if ewrite else 'read'} with nothing ordering them: "
                       f"needs {needed_sync(epipe, ins[0])} between them (docs/reference/ascendc.md §1.6)")

    def token(self, src: int) -> np.ndarray:
        t = self.know[src].copy()
        t[src] = self.clk[src]
        return t

    def join(self, dst: int, tok):
        if tok is None:
            return
        rows = range(_NP) if dst == _S else (dst,)
        for p in rows:
            np.maximum(self.know[p], tok, out=self.know[p])

    def barrier(self, pipe: Pipe):
        if pipe is Pipe.ALL:
            self.know[:, :] = self.clk[None, :]
        else:
            p = PIDX[pipe]
            self.know[p, p] = self.clk[p]

    # -- UB data
    def bounds(self, t: LT, n: int) -> int:
        """Fault unless elements [0, n) of t lie inside t and the UB; their element size in bytes."""
        sz = NP_TYPES[self.dt(t.dtype)].itemsize
        if n > t.size or t.off + n * sz > self.ub.size:
            if t.part:
                raise KirFault(f"{self.where}: UB access of elements [0, {n}) past the end of part {t.part[0]} of "
                               f"{t.part[1]} that the lowering claims for the operand (kir.Ref.part; {t.size} elements "
                               f"of it left at UB byte address {t.off})")
            raise KirFault(f"{self.where}: UB access of elements [0, {n}) past the end of a {t.size}-element tensor "
                           f"at UB byte address {t.off}")
        return sz

    def read(self, t: LT, n: int) -> tuple[np.ndarray, np.ndarray]:
        """n elements of t and their per-element written flags (bounds checked as `bounds`). An element is written
        when each of its bytes is: the written map's bytes (0 or 1) of an element of 2, 4 or 8 bytes compared as one
        unsigned integer with 0x01 in every byte (what reshape(n, sz).all(axis=1) gives, without the per-row
        reduction)."""
        sz = self.bounds(t, n)
        raw = self.ub.data[t.off:t.off + n * sz]
        w = self.ub.written[t.off:t.off + n * sz]
        if n > 0 and sz == 1:
            ok = w.copy()
        elif n > 0 and sz in _ALL_WRITTEN:
            ok = w.view(_ALL_WRITTEN[sz][0]) == _ALL_WRITTEN[sz][1]
        else:
            ok = w.reshape(n, sz).all(axis=1) if n else np.zeros(0, bool)
        return raw.view(NP_TYPES[self.dt(t.dtype)]).copy(), ok

    def owned_read(self, off: int, n: int, pool: int, what: str):
        """A read of UB bytes [off, off + n) through a buffer of pool `pool` (0: none): a fault when a buffer of
        another TBufPool sharing these bytes wrote them last (the data is that buffer's: poison to this one)."""
        if not n:
            return
        own = self.ub.owner[off:off + n]
        bad = np.flatnonzero(self.ub.written[off:off + n] & (own != 0) & (own != pool))
        if bad.size:
            a = off + int(bad[0])
            raise KirFault(f"{self.where}: {what} reads UB byte {a} through a buffer of "
                           f"{'TBufPool ' + str(pool) if pool else 'no TBufPool'}, last written through TBufPool "
                           f"{int(self.ub.owner[a])} that shares it (poisoned: reused UB read after another buffer "
                           "sharing it was written)")

    def write(self, t: LT, vals: np.ndarray, ok):
        sz = NP_TYPES[self.dt(t.dtype)].itemsize
        n = vals.size
        self.ub.data[t.off:t.off + n * sz] = np.ascontiguousarray(vals.astype(NP_TYPES[self.dt(t.dtype)])).view(
            np.uint8)
        self.ub.written[t.off:t.off + n * sz] = np.repeat(np.broadcast_to(np.asarray(ok, bool), (n,)), sz)

    def aligned(self, t: LT, what: str):
        if t.off % BLOCK:
            raise KirFault(f"{what}: UB address {t.off} is not 32-byte aligned")

    # -- statements
    def block(self, stmts, frame):
        """Runs a statement list: a statement that never waits (_PLAIN, looked up by its exact node class) by its
        handler directly, any other through the generator `stmt` (the one per statement that yields where a core
        waits; a generator per plain statement was most of the dispatch's cost)."""
        plain = _PLAIN
        for s in stmts:
            h = plain.get(s.__class__)
            if h is None:
                yield from self.stmt(s, frame)
            else:
                self.cur = s
                h(self, s, frame)

    def let(self, s, frame):
        """kir.Let: declares the int scalar in the innermost scope."""
        _define(frame["ints"], s.name, self.ival(s.value, frame))

    def assign(self, s, frame):
        """kir.Assign: a frame's int scalar (inner scopes first), else the class member."""
        v = self.ival(s.value, frame)
        if s.name in frame["ints"]:
            frame["ints"][s.name] = v
        else:
            self.members[s.name] = v

    def flet(self, s, frame):
        """kir.FLet: declares the float scalar in the innermost scope."""
        _define(frame["floats"], s.name, self.fval(s.value, frame))

    def fassign(self, s, frame):
        """kir.FAssign: a frame's float scalar (inner scopes first), else the class member."""
        v = self.fval(s.value, frame)
        if s.name in frame["floats"]:
            frame["floats"][s.name] = v
        else:
            self.members[s.name] = v

    def no_aic(self, s):
        """KirFault for a UB or vector statement on a cube core (AIC)."""
        if self.kind == "AIC":
            raise KirFault(f"{self.where}: {kir.to_text_stmt(s).strip()} on an AIC: the cube core has no UB and no "
                           "vector unit (docs/reference/ascendc.md §1.1)")

    def copy_stmt(self, s, frame):
        """kir.Copy as a statement: refused on an AIC (no_aic), else `copy`."""
        self.no_aic(s)
        self.copy(s, frame)

    def vec_stmt(self, s, frame):
        """kir.Vec as a statement: refused on an AIC (no_aic), else `vec`."""
        self.no_aic(s)
        self.vec(s, frame)

    def stmt(self, s, frame):  # noqa: C901 - one case per node type
        self.cur = s
        if isinstance(s, (kir.Copy, kir.Vec, kir.GetValue, kir.SetValue)):
            self.no_aic(s)
        if isinstance(s, kir.Let):   # (block runs the _PLAIN classes themselves; a subclass of one comes here)
            self.let(s, frame)
        elif isinstance(s, kir.Assign):
            self.assign(s, frame)
        elif isinstance(s, kir.FLet):
            self.flet(s, frame)
        elif isinstance(s, kir.FAssign):
            self.fassign(s, frame)
        elif isinstance(s, kir.For):
            member = s.var in self.members and s.var not in frame["ints"]
            store = self.members if member else frame["ints"]
            if member:
                store[s.var] = self.ival(s.lo, frame)
            else:
                _define(frame["ints"], s.var, self.ival(s.lo, frame))
            inclusive = getattr(s, "inclusive", False)
            if s.nonempty and not store[s.var] < self.ival(s.hi, frame) + (1 if inclusive else 0):
                raise KirFault(f"{self.where}: the loop over {s.var} claimed to run at least once (For.nonempty) runs "
                               f"no iteration ({s.var} = {store[s.var]}, bound {self.ival(s.hi, frame)}): the syncs "
                               f"the dependency pass left out for it are missing")
            while store[s.var] < self.ival(s.hi, frame) + (1 if inclusive else 0):
                inner = _sub(frame)
                if s.tail:
                    _define(inner["ints"], s.tail, min(self.ival(s.step, frame),
                                                       self.ival(s.hi, frame) - store[s.var]))
                before = store[s.var]
                yield from self.block(s.body, inner)
                if s.step is not None:
                    store[s.var] += self.ival(s.step, frame)
                elif store[s.var] <= before:
                    raise KirFault(f"{self.where}: the loop over {s.var} did not advance (the device would hang)")
        elif isinstance(s, kir.If):
            env = self.env(frame)
            take = all(self.holds(c, env) for c in s.cond)
            yield from self.block(s.then if take else s.orelse, _sub(frame))
        elif isinstance(s, kir.InitBuffer):
            self.init_buffer(s, frame)
        elif isinstance(s, kir.Get):
            base, length, mem, pool = self.tbufs.get(s.buf, (None, 0, None, 0))
            if base is None:
                raise KirFault(f"TBuf::Get on a buffer that was not InitBuffer'ed ({s.buf})")
            sz = NP_TYPES[self.dt(s.dtype)].itemsize
            t = LT(base, length // sz, self.dt(s.dtype), mem=mem, pool=pool).at(self.ival(s.offset, frame))
            if s.slot is not None:
                self.mtensors[s.var][self.ival(s.slot, frame)] = t
            else:
                self.bind(s.var, t, frame)
        elif isinstance(s, kir.View):
            self.bind(s.var, self.tensor(s.src, frame), frame)
        elif isinstance(s, kir.Alloc):
            self.alloc(s, frame)
        elif isinstance(s, kir.EnQue):
            q = self.queue(s.queue)
            t = self.tensor(kir.Ref(s.var), frame)
            self.owned(q, t, "EnQue")
            if len(q.queued) >= q.local.depth:
                raise KirFault(f"TQue::EnQue: more than depth={q.local.depth} tensors enqueued without DeQue")
            q.queued.append(t.tag)
            prod = _PROD.get(q.local.pos)
            if prod is not None:
                q.enq_tok[t.tag] = self.token(prod)
            q.enq_id[t.tag] = self.queue_take(q, _PROD, _CONS, "EnQue")
        elif isinstance(s, kir.DeQue):
            q = self.queue(s.queue)
            if not q.queued:
                raise KirFault(f"TQue::DeQue on an empty queue {s.queue} (hardware would hang)")
            b = q.queued.popleft()
            cons = _CONS.get(q.local.pos)
            if cons is not None:
                self.join(cons, q.enq_tok[b])
            self.queue_give(q, _PROD, _CONS, q.enq_id[b])
            q.enq_id[b] = None
            sz = NP_TYPES[self.dt(s.dtype)].itemsize
            self.bind(s.var, LT(q.offs[b], q.length // sz, self.dt(s.dtype), s.queue, b, q.mem, q.pool), frame)
        elif isinstance(s, kir.Free):
            q = self.queue(s.queue)
            t = self.tensor(kir.Ref(s.var), frame)
            self.owned(q, t, "FreeTensor")
            if not q.in_use[t.tag]:
                raise KirFault("TQue::FreeTensor of a buffer that is not allocated (double free)")
            q.in_use[t.tag] = False
            cons = _CONS.get(q.local.pos)
            if cons is not None:
                q.free_tok[t.tag] = self.token(cons)
            q.free_id[t.tag] = self.queue_take(q, _CONS, _PROD, "FreeTensor")
        elif isinstance(s, kir.Copy):
            self.copy(s, frame)
        elif isinstance(s, kir.Vec):
            self.vec(s, frame)
        elif isinstance(s, kir.GetValue):
            _define(frame["floats"], s.name, self.load(s.src, frame, s))
        elif isinstance(s, kir.SetValue):
            t = self.tensor(s.dst, frame)
            if isinstance(s.value, kir.FExpr):
                v = np.asarray([self.fval(s.value, frame)], dtype=np.float32)
            else:   # an integer converted to the element type
                v = np.asarray([self.ival(s.value, frame)]).astype(NP_TYPES[self.dt(t.dtype)])
            self.bounds(t, 1)   # bounds
            self.touch(self.issue(_S, s), t.off, NP_TYPES[self.dt(t.dtype)].itemsize, True, pool=t.pool)
            self.write(t, v, True)
        elif isinstance(s, kir.TrapUnless):
            v = self.ival(s.value, frame) if isinstance(s.value, DimExpr) else float(self.fval(s.value, frame))
            hi = self.ival(s.bound, frame)
            if not (0.0 <= v < hi):
                raise KirFault(f"Trap() in {self.where}: index {v:g} outside [0, {hi}) ({s.doc or 'index check'})")
        elif isinstance(s, kir.Barrier):
            self.barrier(s.pipe)
        elif isinstance(s, kir.SetFlag):
            i = s.id
            if s.pool:
                i = self.pool_free(s.event, "TPipe::FetchEventID" if s.pool == "fetch" else "TPipe::AllocEventID")
                if s.pool == "alloc":
                    self.held[(s.event, i)] = f"AllocEventID ({s.var}) in {self.where}"
                _define(frame["ints"], s.var, i)
            key = (s.event, i)
            who = self.held.get(key)
            if who is not None and who.startswith("TQue"):
                raise KirFault(f"SetFlag<HardEvent::{s.event}>({i}) in {self.where}: {who} holds event id {i} (a "
                               "TQue takes the TPipe pool's lowest free id until its DeQue / next AllocTensor, "
                               "docs/reference/ascendc.md §1.5): the set is lost and a wait would hang")
            if key in self.flags:
                raise KirFault(f"SetFlag<HardEvent::{s.event}>({i}) in {self.where}: the flag is still set by the "
                               f"SetFlag in {self.flags[key][1]} (no WaitFlag consumed it); an event flag is one bit "
                               "(docs/reference/ascendc.md §1.6)")
            self.flags[key] = (self.token(PIDX[s.src]), self.where)
        elif isinstance(s, kir.WaitFlag):
            i = frame["ints"][s.var] if s.pool else s.id
            key = (s.event, i)
            if key not in self.flags:
                raise KirFault(f"WaitFlag<HardEvent::{s.event}>({i}) in {self.where} has no earlier "
                               f"SetFlag<HardEvent::{s.event}>({i}) to consume: {s.dst.value} would wait forever "
                               "on the device (docs/reference/ascendc.md §1.6)")
            self.join(PIDX[s.dst], self.flags.pop(key)[0])
            if s.pool == "alloc":
                self.held.pop(key, None)
        elif isinstance(s, kir.SyncAll):
            if self.kind == "AIC" and self.launch is not None and self.launch.mix:
                raise KirFault(f"SyncAll() in {self.where} on an AIC of a mixed launch: SyncAll<true> meets the AIVs "
                               "only (docs/reference/ascendc.md §1.6)")
            self.barrier(Pipe.ALL)
            yield "sync"
        elif isinstance(s, kir.CoreIf):
            if (s.unit == "cube") == (self.kind == "AIC"):
                yield from self.block(s.body, _sub(frame))
        elif isinstance(s, kir.Nd2Nz):
            self.nd2nz(s, frame)
        elif isinstance(s, kir.LoadData):
            self.load_data(s, frame)
        elif isinstance(s, kir.Mmad):
            self.mmad(s, frame)
        elif isinstance(s, kir.LoadBias):
            self.load_bias(s, frame)
        elif isinstance(s, kir.Fixpipe):
            self.fixpipe(s, frame)
        elif isinstance(s, kir.CrossCoreSetFlag):
            self.launch.cross_set(self, s)
        elif isinstance(s, kir.CrossCoreWaitFlag):
            self.launch.check_id(s.id, "CrossCoreWaitFlag")
            while self.launch.count[self.slot][s.id] == 0:
                yield ("cross", s.id)
            self.launch.cross_wait(self, s.id)
        elif isinstance(s, kir.Call):
            yield from self.call(s, frame)
        elif isinstance(s, kir.Return):
            raise _Return(s.value)
        elif isinstance(s, kir.Comment):
            pass
        elif isinstance(s, kir.StructLet):   # int fields at their initialisers (StructDecl.defaults, else 0), GM unbound
            _define(frame["structs"], s.name, {"__struct__": s.struct})
        elif isinstance(s, kir.StructSet):
            m = kir.STRUCT_FIELD.match(s.target)
            st = frame["structs"][m.group(1)]
            key = m.group(2) + (f"[{m.group(3)}]" if m.group(3) is not None else "")
            if isinstance(s.value, kir.GmView):
                g, off = self.gm(s.value, frame)
                st[key] = (g.name, off // NP_TYPES[self.dt(g.dtype)].itemsize)
            else:
                st[key] = self.ival(s.value, frame)
        elif isinstance(s, kir.Scope):
            yield from self.block(s.body, _sub(frame))
        elif isinstance(s, kir.Verbatim):
            raise NotKernelIR(f"{self.where}: C++ text, not Kernel IR: {s.lines[0].strip() if s.lines else ''}")
        else:
            raise KirFault(f"unknown statement {type(s).__name__}")

    def load(self, src: kir.Ref, frame, s) -> np.float32:
        """A scalar read of one UB element on PIPE_S (GetValue, FLoad): the shadow, then the poison check."""
        t = self.tensor(kir.Ref(src.tensor, slot=src.slot), frame)
        i = self.ival(src.offset, frame)
        v, ok = self.read(t.at(i), 1)
        sz = v.itemsize
        self.touch(self.issue(_S, s), t.off + i * sz, sz, False, pool=t.pool)
        if not ok[0]:
            raise KirFault(f"GetValue: read of unwritten (poisoned) UB at byte address {t.off + i * sz} "
                           f"(element {i}) ({self.where}: {kir.to_text_stmt(s).strip()})")
        return np.float32(v[0])

    def load_gm(self, src: kir.GmView, frame, s) -> np.float32:
        """A scalar read of one GM element on PIPE_S (GlobalTensor::GetValue in an FLoad), converted to fp32: inside
        the tensor's bytes, checked against this core's GM shadow (an MTE3 write of it not yet waited for races)."""
        g, off = self.gm(src, frame)
        dt = NP_TYPES[self.dt(g.dtype)]
        sz = dt.itemsize
        if g.data is None or off < 0 or off + sz > g.data.size:
            raise KirFault(f"GetValue: read of GM tensor '{g.name}' at byte {off} outside its "
                           f"{0 if g.data is None else g.data.size} bytes ({self.where}: "
                           f"{kir.to_text_stmt(s).strip()})")
        self.touch_gm(self.issue(_S, s), g, off, sz, False)
        return np.float32(g.data[off:off + sz].view(dt)[0])

    def call(self, s: kir.Call, frame):
        m = self.methods[s.method]
        if m.extern:
            raise NotKernelIR(f"{self.where}: calls {s.method}, a method that is C++ text, not Kernel IR")
        inner = {"ints": {}, "floats": {}, "tensors": {}, "gms": {}, "modes": {}, "structs": {}}
        tmap = {t: self.dt(a) for t, a in zip(getattr(m, "tparams", ()), getattr(s, "targs", ()))}
        for p, a in zip(m.params, s.args):
            if p.kind == "mode":
                inner["modes"][p.name] = frame["modes"].get(a.name, a.name) if isinstance(a, Sym) else a
            elif p.kind == "tensor":
                inner["tensors"][p.name] = self.tensor(a, frame)
            elif p.kind == "gm":
                g, off = self.gm(a, frame)
                inner["gms"][p.name] = (g.name, off // NP_TYPES[self.dt(g.dtype)].itemsize)
            elif p.kind == "struct":   # passed by reference (Part& p)
                inner["structs"][p.name] = frame["structs"][a.name]
            elif p.kind == "float":
                inner["floats"][p.name] = self.fval(a, frame)
            elif isinstance(a, bool):
                inner["ints"][p.name] = int(a)
            else:
                inner["ints"][p.name] = self.ival(a, frame)
        outer, self.where = self.where, s.method
        self.tmaps.append(tmap)
        value = None
        try:
            yield from self.block(m.body, inner)
        except _Return as r:
            value = r.value if not isinstance(r.value, (DimExpr, kir.FExpr)) else (
                self.fval(r.value, inner) if isinstance(r.value, kir.FExpr) else self.ival(r.value, inner))
        self.tmaps.pop()
        self.where = outer
        if s.result is not None and s.assign:   # a mutable scalar declared before (or a member)
            scope = frame["floats"] if m.ret == "float" else frame["ints"]
            if s.result in scope:
                scope[s.result] = value
            else:
                self.members[s.result] = value
        elif s.result is not None:
            _define(frame["floats"] if m.ret == "float" else frame["ints"], s.result, value)

    # -- buffers and queues
    def init_buffer(self, s: kir.InitBuffer, frame):
        """pipe_.InitBuffer / pool.InitBuffer / pipe_.InitBufPool (as the emulation's TBufPool, emu/tensor.h: a pool
        sharing another starts at its start; each pool carves its buffers from its own start; a pool's id marks
        the bytes its buffers write, and a read through another pool's buffer of bytes it wrote is a fault)."""
        b = self.locals[s.buf]
        name = _MEM_OF.get(b.pos)
        a = self.mem.get(name)
        if a is None:
            raise KirFault(f"TPipe::InitBuffer({s.buf}<{b.pos.value}>): an {self.kind} core has no {name or b.pos.value}"
                           " (docs/reference/ascendc.md §1.1, §1.2)")
        length = self.ival(s.bytes, frame)
        rounded = -(-length // BLOCK) * BLOCK
        need = rounded * s.num
        if b.pool:   # [start, end, next free byte, id, handles taken, bufIDSize]
            if s.share:
                base = self.pools[s.share]
                if rounded > base[1] - base[0]:
                    raise KirFault(f"TPipe::InitBufPool({s.buf}, {length}, {s.share}): longer than the shared pool's "
                                   f"{base[1] - base[0]} bytes")
                self.pools[s.buf] = [base[0], base[1], base[0], len(self.pools) + 1, 0, b.depth]
                return
            if a.used + rounded > a.size:
                raise KirFault(f"{name} overflow: InitBufPool({s.buf}, {length}) needs {rounded} bytes at {name} offset "
                               f"{a.used} but the core's {name} is {a.size} bytes")
            self.pools[s.buf] = [a.used, a.used + rounded, a.used, len(self.pools) + 1, 0, b.depth]
            a.written[a.used:a.used + rounded] = False
            a.used += rounded
            return
        pool = 0
        if s.pool:
            pl = self.pools.get(s.pool)
            if pl is None:
                raise KirFault(f"{s.pool}.InitBuffer({s.buf}): the pool was not InitBufPool'ed")
            if pl[2] + need > pl[1]:
                raise KirFault(f"{s.pool}.InitBuffer({s.buf}, num={s.num}, len={length}): {need} bytes exceed the "
                               f"pool's {pl[1] - pl[0]} (Buffer Init length exceeds limit of BufPool)")
            if pl[4] + s.num > min(pl[5], 16):
                raise KirFault(f"{s.pool}.InitBuffer({s.buf}): {pl[4] + s.num} buffer handles, more than the pool's "
                               f"bufIDSize {pl[5]} (at most QBUFPOOL_MAX_LEN = 16): the device writes past them")
            start, pool = pl[2], pl[3]
            pl[2] += need
            pl[4] += s.num
        else:
            if a.used + need > a.size:
                raise KirFault(f"{name} overflow: InitBuffer({s.buf}, num={s.num}, len={length}) needs {need} bytes at "
                               f"{name} offset {a.used} but the core's {name} is {a.size} bytes")
            start = a.used
            a.used += need
        offs = [start + i * rounded for i in range(s.num)]
        a.written[start:start + need] = False
        if b.queue:
            self.queues[s.buf] = _Queue(b, offs, rounded, [False] * s.num, deque(), 0, [None] * s.num,
                                        [None] * s.num, name, pool, [None] * s.num, [None] * s.num)
        else:
            self.tbufs[s.buf] = (offs[0], rounded, name, pool)

    def queue(self, name: str) -> _Queue:
        q = self.queues.get(name)
        if q is None:
            raise KirFault(f"TQue {name} used before its InitBuffer")
        return q

    def owned(self, q: _Queue, t: LT, what: str):
        if t.queue != q.local.name or t.tag < 0 or t.off != q.offs[t.tag]:
            raise KirFault(f"TQue::{what}: tensor was not allocated from this queue (or is an offset view)")

    # -- the TPipe's event-id pool (docs/reference/ascendc.md §1.5-§1.6; emu/pipes.h PoolFree)
    def pool_free(self, event: str, what: str) -> int:
        """The lowest id of HardEvent `event` no queue and no AllocEventID holds (FetchEventID; AllocEventID then
        takes it). `what` names the caller: TPipe::FetchEventID, TPipe::AllocEventID, TQue::EnQue or
        TQue::FreeTensor. KirFault when all 8 are held, with the emulation's text (emu/pipes.h PoolFree: the
        device's AllocEventID checks it by a debug assertion only; a release build hands out an id past 7)."""
        for i in range(8):
            if (event, i) not in self.held:
                return i
        queues = sum(1 << i for i in range(8) if self.held[(event, i)].startswith("TQue"))
        raise KirFault(f"{what}: all 8 ids of HardEvent::{event} are held (queues: mask {queues}, AllocEventID: "
                       f"mask {255 & ~queues}): the device's pool has no id to give (a release build hands out one "
                       "past EVENT_ID7; docs/reference/ascendc.md §1.5)")

    def queue_take(self, q: _Queue, src: dict, dst: dict, what: str):
        """A queue's EnQue / FreeTensor: it takes the pool's lowest free id of its hand-off's HardEvent (src pipe of
        its position -> dst pipe) and sets that flag; None when the hand-off has no event. KirFault when all 8 ids
        are held (pool_free) or a SetFlag of the program holds that flag set (the queue's set would be lost)."""
        a, b = src.get(q.local.pos), dst.get(q.local.pos)
        if a is None or b is None:
            return None
        ev = f"{PIPES[a].name}_{PIPES[b].name}"
        if ev not in kir.HARD_EVENTS:
            return None
        i = self.pool_free(ev, f"TQue::{what}")
        if (ev, i) in self.flags:
            raise KirFault(f"TQue {q.local.name}::{what} in {self.where} takes HardEvent::{ev} id {i} (the pool's "
                           f"lowest free id) while the SetFlag in {self.flags[(ev, i)][1]} holds that flag set: the "
                           "queue's set is lost and its wait would hang")
        self.held[(ev, i)] = f"TQue {q.local.name}::{what}"
        return i

    def queue_give(self, q: _Queue, src: dict, dst: dict, i) -> None:
        """The matching DeQue / AllocTensor: the queue's id back to the pool."""
        if i is None:
            return
        a, b = src.get(q.local.pos), dst.get(q.local.pos)
        self.held.pop((f"{PIPES[a].name}_{PIPES[b].name}", i), None)

    def alloc(self, s: kir.Alloc, frame):
        q = self.queue(s.queue)
        n = len(q.offs)
        for k in range(n):
            b = (q.nxt + k) % n
            if not q.in_use[b]:
                q.in_use[b] = True
                q.nxt = (b + 1) % n
                prod = _PROD.get(q.local.pos)
                if prod is not None:
                    self.join(prod, q.free_tok[b])
                self.queue_give(q, _CONS, _PROD, q.free_id[b])
                q.free_id[b] = None
                self.mem[q.mem].written[q.offs[b]:q.offs[b] + q.length] = False
                sz = NP_TYPES[self.dt(s.dtype)].itemsize
                self.bind(s.var, LT(q.offs[b], q.length // sz, self.dt(s.dtype), s.queue, b, q.mem, q.pool), frame)
                return
        raise KirFault(f"TQue::AllocTensor: all {n} buffers of {s.queue} are in use (missing FreeTensor; hardware "
                       "would hang)")

    # -- copies
    def copy(self, s: kir.Copy, frame):
        gm_src = isinstance(s.src, kir.GmView)
        what = "DataCopyPad GM->UB" if gm_src else "DataCopyPad UB->GM"
        g, gbyte = self.gm(s.src if gm_src else s.dst, frame)
        t = self.tensor(s.dst if gm_src else s.src, frame)
        ins = self.issue(PIDX[s.pipe], s)
        self.aligned(t, what)
        cnt, ln = self.ival(s.block_count, frame), self.ival(s.block_len, frame)
        sstr, dstr = self.ival(s.src_stride, frame), self.ival(s.dst_stride, frame)
        if not 0 <= cnt <= 65535:
            raise KirFault(f"{what}: blockCount {cnt} outside the uint16 range")
        if cnt == 0 or ln == 0:
            return
        sz = NP_TYPES[self.dt(t.dtype)].itemsize
        if ln % sz:
            raise KirFault(f"{what}: blockLen {ln} bytes is not a multiple of sizeof(T)")
        if ln > 2097151:
            raise KirFault(f"{what}: blockLen {ln} exceeds 2097151")
        if g.data is None:
            raise KirFault(f"{what}: GM tensor {g.name} has no registered buffer")
        blk = -(-ln // BLOCK) * BLOCK
        tbytes = t.size * sz
        gm, ub = gbyte, 0
        for _ in range(cnt):
            if gm < 0 or gm + ln > g.data.size:
                raise KirFault(f"{what}: GM out of range on tensor '{g.name}': bytes [{gm}, {gm + ln}) of "
                               f"{g.data.size}")
            if gm_src:
                if ub + blk > tbytes:
                    raise KirFault(f"{what}: UB span of {ub + blk} bytes exceeds the {tbytes}-byte local tensor at "
                                   f"UB address {t.off}")
                a = t.off + ub
                self.touch(ins, a, blk, True, pool=t.pool)
                self.touch_gm(ins, g, gm, ln, False)
                self.ub.data[a:a + ln] = g.data[gm:gm + ln]
                self.ub.written[a:a + ln] = True
                gm += ln + sstr
                ub += blk + dstr * BLOCK
            else:
                if ub + ln > tbytes:
                    raise KirFault(f"{what}: UB span of {ub + ln} bytes exceeds the {tbytes}-byte local tensor at "
                                   f"UB address {t.off}")
                a = t.off + ub
                self.touch(ins, a, ln, False, pool=t.pool)
                if not self.ub.written[a:a + ln].all():
                    bad = a + int(np.argmin(self.ub.written[a:a + ln]))
                    raise KirFault(f"{what}: copies unwritten (poisoned) UB byte at address {bad} to GM tensor "
                                   f"'{g.name}' byte {gm + bad - a} ({self.where}: {kir.to_text_stmt(s).strip()})")
                self.touch_gm(ins, g, gm, ln, True)
                g.data[gm:gm + ln] = self.ub.data[a:a + ln]
                gm += ln + dstr
                ub += blk + sstr * BLOCK

    # -- cube instructions (docs/reference/ascendc.md §1.10; opgen.kernel.cubesem the layouts)
    def cube_operand(self, r: kir.Ref, frame, mems: tuple, align: int, what: str, role: str) -> tuple[LT, Arena]:
        """The tensor of cube operand `r`, checked to lie in one of `mems` at an `align`-byte address."""
        t = self.tensor(r, frame)
        if t.mem not in mems:
            raise KirFault(f"{what} in {self.where}: the {role} must be in {' or '.join(mems)}, not {t.mem}")
        if t.off % align:
            raise KirFault(f"{what} in {self.where}: the {role} address {t.off} in {t.mem} is not {align}-byte "
                           "aligned (docs/reference/ascendc.md §1.10)")
        return t, self.mem[t.mem]

    def span(self, t: LT, nbytes: int, what: str, role: str):
        sz = NP_TYPES[self.dt(t.dtype)].itemsize
        if nbytes > t.size * sz:
            raise KirFault(f"{what} in {self.where}: the {role} access of {nbytes} bytes passes the end of the "
                           f"{t.size * sz}-byte tensor at {t.mem} address {t.off}")

    def elems(self, a: Arena, t: LT, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The first n elements of t (a view of arena a) and whether each is written."""
        dt = NP_TYPES[self.dt(t.dtype)]
        raw = a.data[t.off:t.off + n * dt.itemsize]
        ok = a.written[t.off:t.off + n * dt.itemsize].reshape(n, dt.itemsize).all(axis=1)
        return raw.view(dt), ok

    def gm_tile(self, ins, what: str, g: "_Gm", gbyte: int, rows: int, cols: int, pitch: int, dt, write: bool,
                atomic: bool = False):
        """The element indices [rows, cols] of a tile of GM tensor g from byte `gbyte`, row pitch `pitch` elements of
        type dt (the GM side of Nd2Nz and Fixpipe): bounds checked, each row's bytes recorded as read or written by
        instruction `ins` (touch_gm)."""
        if g.data is None:
            raise KirFault(f"{what}: GM tensor {g.name} has no registered buffer")
        sz = dt.itemsize
        last = gbyte + ((rows - 1) * pitch + cols) * sz
        if gbyte < 0 or last > g.data.size:
            raise KirFault(f"{what}: GM out of range on tensor '{g.name}': bytes [{gbyte}, {last}) of {g.data.size}")
        for r in range(rows):
            self.touch_gm(ins, g, gbyte + r * pitch * sz, cols * sz, write, atomic)
        return gbyte // sz + np.arange(rows)[:, None] * pitch + np.arange(cols)[None, :]

    def nd2nz(self, s: kir.Nd2Nz, frame):
        """DataCopy(Nd2NzParams) GM -> L1 on MTE2: pieces of C0 elements, zero-filled to 32 B, written blocks."""
        what = "DataCopy(Nd2NzParams)"
        t, a = self.cube_operand(s.dst, frame, ("L1",), BLOCK, what, "destination")
        g, gbyte = self.gm(s.src, frame)
        rows, cols, pitch, pad = (self.ival(x, frame) for x in (s.rows, s.cols, s.src_pitch, s.pad_rows))
        ins = self.issue(PIDX[Pipe.MTE2], s)
        if rows == 0 or cols == 0:
            return
        if not 0 < rows <= 16384 or not 1 <= pitch <= 65535 or not 1 <= pad <= 16384 or cols > 65535:
            raise KirFault(f"{what} in {self.where}: nValue {rows} / dValue {cols} / srcDValue {pitch} / "
                           f"dstNzC0Stride {pad} outside [1, 16384] / [1, 65535] / [1, 65535] / [1, 16384] (the "
                           "device's uint16 fields)")
        dt = NP_TYPES[self.dt(t.dtype)]
        c0 = BLOCK // dt.itemsize
        pieces = -(-cols // c0)
        if pad < rows and pieces > 1:
            raise KirFault(f"{what} in {self.where}: two pieces of the conversion write the same 32-B block: "
                           f"dstNzC0Stride {pad} < nValue {rows} (it is normally the padded row count)")
        self.span(t, ((pieces - 1) * pad + rows) * BLOCK, what, "destination")
        at = self.gm_tile(ins, what, g, gbyte, rows, cols, pitch, dt, False)
        for b in range(pieces):
            self.touch(ins, t.off + b * pad * BLOCK, rows * BLOCK, True, a)
        src = g.data.view(dt)[at]
        tile = np.zeros((rows, pieces * c0), dt)
        tile[:, :cols] = src
        tile = tile.reshape(rows, pieces, c0).transpose(1, 0, 2)
        for b in range(pieces):
            o = t.off + b * pad * BLOCK
            a.data[o:o + rows * BLOCK] = np.ascontiguousarray(tile[b]).view(np.uint8).reshape(-1)
            a.written[o:o + rows * BLOCK] = True

    def load_data(self, s: kir.LoadData, frame):
        """LoadData L1 -> L0A / L0B on MTE1: whole 512-B fractals (transposed when asked), written map along."""
        what = "LoadDataWithTranspose" if s.with_transpose else "LoadData"
        d, da = self.cube_operand(s.dst, frame, ("L0A", "L0B"), 512, what, "destination")
        t, sa = self.cube_operand(s.src, frame, ("L1",), BLOCK, what, "source")
        start, rep, stride = (self.ival(x, frame) for x in (s.start, s.repeat, s.src_stride))
        ins = self.issue(PIDX[Pipe.MTE1], s)
        if not 0 <= rep <= 255 or not 0 <= start <= 65535 or not 0 <= stride <= 65535:
            raise KirFault(f"{what} in {self.where}: repeatTimes {rep} / startIndex {start} / srcStride {stride} "
                           "outside [0, 255] / [0, 65535] / [0, 65535] (the device's fields)")
        sz = NP_TYPES[self.dt(t.dtype)].itemsize
        if s.transpose and sz != 2:
            raise KirFault(f"LoadData in {self.where}: ifTranspose needs a 2-byte type, got {self.dt(t.dtype)}")
        if s.with_transpose:
            self.load_squares(s, frame, d, da, t, sa, start, rep, stride, ins)
            return
        if rep == 0:
            return
        self.span(d, rep * 512, what, "destination")
        srcs = [(start + r * stride) * 512 for r in range(rep)]
        if min(srcs) < 0:
            raise KirFault(f"LoadData in {self.where}: source fractal {start} before the tensor")
        self.span(t, max(srcs) + 512, what, "source")
        for r, sb in enumerate(srcs):
            self.touch(ins, t.off + sb, 512, False, sa)
            self.touch(ins, d.off + r * 512, 512, True, da)
        idx = (t.off + np.asarray(srcs)[:, None] + np.arange(512)[None, :]).reshape(-1)
        raw, ok = sa.data[idx], sa.written[idx]
        if s.transpose:
            e = cubesem.transpose_fractals(np.arange(rep * 256))
            raw = raw.reshape(-1, 2)[e].reshape(-1)
            ok = ok.reshape(-1, 2)[e].reshape(-1)
        da.data[d.off:d.off + rep * 512] = raw
        da.written[d.off:d.off + rep * 512] = ok

    def load_squares(self, s: kir.LoadData, frame, d, da, t, sa, start, rep, stride, ins):
        """LoadDataWithTranspose (LoadData2dTransposeParams) on MTE1: `rep` int8 squares of 32 x 32 (1024 B, two
        16 x 32 fractals), square r from source square start + r * stride, each transposed
        (cubesem.transpose_squares), its two fractals to the destination fractals cubesem.square_destinations gives
        for dstGap / dstFracGap; the written map along; a fault where two fractals land on one. Faults as the emulation:
        a type other than int8_t / uint8_t (the other widths' squares are not modelled)."""
        what = "LoadDataWithTranspose"
        if self.dt(t.dtype) not in ("int8_t", "uint8_t") or self.dt(d.dtype) != self.dt(t.dtype):
            raise KirFault(f"{what} in {self.where}: {self.dt(t.dtype)} -> {self.dt(d.dtype)}; the interpreter models "
                           "int8_t / uint8_t squares of 32 x 32 only")
        gap, fgap = self.ival(s.dst_gap, frame), self.ival(s.dst_frac_gap, frame)
        if not 0 <= gap <= 65535 or not 0 <= fgap <= 65535:
            raise KirFault(f"{what} in {self.where}: dstGap {gap} / dstFracGap {fgap} outside [0, 65535]")
        if rep == 0:
            return
        try:
            dests = cubesem.square_destinations(rep, gap, fgap)
        except ValueError as e:
            raise KirFault(f"{what} in {self.where}: {e}") from None
        sq, fr = cubesem.SQUARE_B8, cubesem.SQUARE_B8 // 2
        self.span(d, max(b for _a, b in dests) * fr + fr, what, "destination")
        srcs = [(start + r * stride) * sq for r in range(rep)]
        self.span(t, max(srcs) + sq, what, "source")
        for r, sb in enumerate(srcs):
            self.touch(ins, t.off + sb, sq, False, sa)
            for f in dests[r]:
                self.touch(ins, d.off + f * fr, fr, True, da)
        idx = (t.off + np.asarray(srcs)[:, None] + np.arange(sq)[None, :]).reshape(-1)
        e = cubesem.transpose_squares(np.arange(rep * sq))
        data, ok = sa.data[idx][e].reshape(rep, 2, fr), sa.written[idx][e].reshape(rep, 2, fr)
        for r, pair in enumerate(dests):
            for h, f in enumerate(pair):
                da.data[d.off + f * fr:d.off + f * fr + fr] = data[r, h]
                da.written[d.off + f * fr:d.off + f * fr + fr] = ok[r, h]

    def mmad(self, s: kir.Mmad, frame):
        """Mmad on M: C (L0C NZ) = A (L0A ZZ) x B (L0B ZN) [+ C]; an element is written only from written rows and
        columns (and a written C when accumulating)."""
        what = "Mmad"
        c, ca = self.cube_operand(s.dst, frame, ("L0C",), 1024, what, "dst (L0C)")
        a, aa = self.cube_operand(s.a, frame, ("L0A",), 512, what, "fm (L0A)")
        b, ba = self.cube_operand(s.b, frame, ("L0B",), 512, what, "filter (L0B)")
        m, n, k = (self.ival(x, frame) for x in (s.m, s.n, s.k))
        env = self.env(frame)
        accumulate = s.bias is None and not all(self.holds(x, env) for x in s.init)
        if s.bias is not None:
            bt, bta = self.cube_operand(s.bias, frame, ("BiasTable",), 64, what, "bias (bias table)")
        ins = self.issue(PIDX[Pipe.M], s)
        if not (0 <= m <= 4095 and 0 <= n <= 4095 and 0 <= k <= 4095):
            raise KirFault(f"Mmad in {self.where}: m/n/k = {m}/{n}/{k} outside [0, 4095]")
        ta, tb, tc = self.dt(a.dtype), self.dt(b.dtype), self.dt(c.dtype)
        if ta != tb or ta not in ("half", "bfloat16_t", "int8_t") \
                or tc != ("int32_t" if ta == "int8_t" else "float"):
            raise KirFault(f"Mmad in {self.where}: operands {ta} x {tb} into {tc} L0C; the interpreter models half / "
                           "bfloat16_t into float and int8_t into int32_t (docs/reference/ascendc.md §1.10)")
        if m == 0 or n == 0 or k == 0:
            return
        isz = NP_TYPES[ta].itemsize
        c0 = cubesem.c0_of(isz)   # 16 for the 2-byte types, 32 for int8: fractals 16 x c0 of 512 B
        if s.bias is not None and self.dt(bt.dtype) != tc:
            raise KirFault(f"Mmad in {self.where}: a {self.dt(bt.dtype)} bias-table row into {tc} L0C (the bias "
                           f"table holds the result's type: float, or int32_t for int8 operands)")
        ae, be, ce = cubesem.l0a_elems(m, k, c0), cubesem.l0b_elems(k, n, c0), cubesem.l0c_elems(m, n)
        self.span(a, ae * isz, what, "fm (L0A)")
        self.span(b, be * isz, what, "filter (L0B)")
        self.span(c, ce * 4, what, "dst (L0C)")
        self.touch(ins, a.off, ae * isz, False, aa)
        self.touch(ins, b.off, be * isz, False, ba)
        if accumulate:
            self.touch(ins, c.off, ce * 4, False, ca)
        if s.bias is not None:   # cmatrixSource: C starts at the bias row, broadcast over the m rows
            self.span(bt, n * 4, what, "bias (bias table)")
            self.touch(ins, bt.off, n * 4, False, bta)
        self.touch(ins, c.off, ce * 4, True, ca)
        av, aok = self.elems(aa, a, ae)
        bv, bok = self.elems(ba, b, be)
        ia, ib = cubesem.zz_index(m, k, c0), cubesem.zn_index(k, n, c0)
        ic = cubesem.l0c_index(m, n, 16 * -(-m // 16))
        cv, cok = self.elems(ca, c, ce)
        prev = cv[ic] if accumulate else None
        ok = aok[ia].all(axis=1)[:, None] & bok[ib].all(axis=0)[None, :]
        if accumulate:
            ok = ok & cok[ic]
        if s.bias is not None:
            rv, rok = self.elems(bta, bt, n)
            prev = np.broadcast_to(rv, (m, n)).astype(NP_TYPES[tc])
            ok = ok & rok[None, :]
        with np.errstate(all="ignore"):
            res = cubesem.mmad_accumulate(av[ia], bv[ib], prev)
        out = cv.copy()
        out[ic] = res
        ca.data[c.off:c.off + ce * 4] = out.view(np.uint8)
        w = cok.copy()
        w[ic] = ok
        ca.written[c.off:c.off + ce * 4] = np.repeat(w, 4)

    def load_bias(self, s: kir.LoadBias, frame):
        """DataCopy L1 (C1) -> bias table (C2) on MTE1: `blocks` 64-B blocks of the source, half converted to float,
        int32 copied as int32 (docs/reference/ascendc.md §1.10 "Bias on the cube": source = destination type, or
        half -> float); the written map along, per element."""
        what = "DataCopy(L1 -> BiasTable)"
        d, da = self.cube_operand(s.dst, frame, ("BiasTable",), 64, what, "destination (bias table)")
        t, sa = self.cube_operand(s.src, frame, ("L1",), BLOCK, what, "source (L1)")
        blocks = self.ival(s.blocks, frame)
        ins = self.issue(PIDX[Pipe.MTE1], s)
        st, dtn = self.dt(t.dtype), self.dt(d.dtype)
        if not (dtn == "float" and st in ("half", "float") or dtn == st == "int32_t"):
            raise KirFault(f"{what} in {self.where}: {st} into {dtn}; arch 2201 copies float or int32_t or converts "
                           "half to float (bfloat16_t only on arch 3510)")
        if not 0 <= blocks <= 65535:
            raise KirFault(f"{what} in {self.where}: blockLen {blocks} outside [0, 65535]")
        if blocks == 0:
            return
        n = blocks * 64 // NP_TYPES[st].itemsize
        self.span(t, blocks * 64, what, "source (L1)")
        self.span(d, n * 4, what, "destination (bias table)")
        self.touch(ins, t.off, blocks * 64, False, sa)
        self.touch(ins, d.off, n * 4, True, da)
        v, ok = self.elems(sa, t, n)
        da.data[d.off:d.off + n * 4] = v.astype(NP_TYPES[dtn]).view(np.uint8)
        da.written[d.off:d.off + n * 4] = np.repeat(ok, 4)

    def fixpipe(self, s: kir.Fixpipe, frame):
        """Fixpipe L0C -> GM on FIX (row-major): rows x cols floats converted to the GM type (round to nearest
        even), or int32 into int32 GM unchanged (NoQuant); reading an unwritten L0C element faults."""
        what = "Fixpipe"
        c, ca = self.cube_operand(s.src, frame, ("L0C",), 64, what, "source (L0C)")
        g, gbyte = self.gm(s.dst, frame)
        rows, cols, src_rows, pitch = (self.ival(x, frame) for x in (s.rows, s.cols, s.src_rows, s.dst_pitch))
        ins = self.issue(PIDX[Pipe.FIX], s)
        if not 1 <= cols <= 4095 or not 1 <= rows <= 8192:
            raise KirFault(f"Fixpipe in {self.where}: nSize {cols} / mSize {rows} outside [1, 4095] / [1, 8192]")
        if pitch < cols:
            raise KirFault(f"Fixpipe in {self.where}: dstStride {pitch} (destination row pitch, elements) < nSize "
                           f"{cols}")
        if src_rows < rows or src_rows % 16:
            raise KirFault(f"Fixpipe in {self.where}: the L0C result has {src_rows} rows (a multiple of 16 >= mSize "
                           f"{rows} expected)")
        ic = cubesem.l0c_index(rows, cols, src_rows)
        n = int(ic.max()) + 1
        self.span(c, n * 4, what, "source (L0C)")
        self.touch(ins, c.off, n * 4, False, ca)
        cv, cok = self.elems(ca, c, n)
        if not cok[ic].all():
            i, j = np.argwhere(~cok[ic])[0]
            raise KirFault(f"Fixpipe in {self.where}: reads unwritten (poisoned) L0C element (row {i}, column {j}) at "
                           f"L0C byte address {c.off + int(ic[i, j]) * 4}: no Mmad produced it from fully written "
                           "operands")
        dt = NP_TYPES[self.dt(g.dtype)]
        if (self.dt(c.dtype) == "int32_t") != (self.dt(g.dtype) == "int32_t") or s.atomic and dt != np.float32:
            raise KirFault(f"Fixpipe in {self.where}: {self.dt(c.dtype)} L0C into {self.dt(g.dtype)} GM"
                           f"{' (atomic)' if s.atomic else ''}: float L0C into float / half / bfloat16_t, int32_t "
                           "into int32_t (NoQuant; the dequantising modes are not modelled), atomic adds fp32 only")
        at = self.gm_tile(ins, what, g, gbyte, rows, cols, pitch, dt, True, s.atomic)
        if s.atomic:   # SetAtomicAdd<float>: every element added to what GM holds (fp32)
            g.data.view(dt)[at] += cv[ic].astype(dt)
        else:
            g.data.view(dt)[at] = cv[ic].astype(dt)

    # -- vector instructions
    def vec(self, s: kir.Vec, frame):
        d = INSTRS[s.op]
        args = dict(s.args)
        if s.op in (Op.CAST_TO, Op.CAST_FROM):
            src_t = self.tensor(args["src"], frame)
            dst_t = self.tensor(args["dst"], frame)
            if self.dt(src_t.dtype) == "float" and self.dt(dst_t.dtype) == "float":
                count = self.ival(args["count"], frame)   # the helper's Muls by 1.0, then its own PipeBarrier<PIPE_V>
                if count > 0:
                    self.lanes(s, frame, {"dst": dst_t, "src0": src_t}, count, lambda e: INSTRS[Op.MULS].meaning(
                        {**e, "scalar": np.float32(1.0)}), ("src0",))
                self.barrier(Pipe.V)
                return
        tens = {o.name: self.tensor(args[o.name], frame) for o in d.operands if o.kind == "ub"}
        count = self.ival(args["count"], frame) if "count" in args else None
        if s.op in (Op.REDUCE_SUM, Op.REDUCE_MAX):
            self.reduce(s, frame, tens, count)
        elif s.op is Op.GATHER:
            self.gather(s, frame, tens, count)
        elif s.op is Op.BRCB:
            self.brcb(s, frame, tens)
        elif s.op in REPEAT_FORMS.values() or s.op in (Op.WHOLE_REDUCE_SUM, Op.WHOLE_REDUCE_MAX):
            self.strided(s, frame, tens)
        elif s.op in (Op.COMPARE, Op.COMPARE_SCALAR, Op.SELECT, Op.SELECT_SCALAR):
            self.masked(s, frame, tens, count, args)
        elif s.op in (Op.COMPARE_REP, Op.SELECT_SCALAR_REP):
            self.masked_repeat(s, frame, tens, args)
        else:
            extra = {}
            for o in d.operands:
                if o.kind == "scalar":
                    dtype = NP_TYPES[self.dt(tens["dst"].dtype)]
                    extra[o.name] = np.float32(np.asarray(self.fval(args[o.name], frame)).astype(dtype))
                elif o.kind == "mode":
                    v = args[o.name]
                    extra[o.name] = frame["modes"][v.name] if isinstance(v, Sym) else v
            if count is None or count <= 0:
                return
            if d.scalar_head:   # the device writes the first 32-B block with SetValue on the scalar unit, syncs
                dst = tens["dst"]   # S -> V itself, then fills the rest on PIPE_V (as emu; CreateVecIndex)
                first = min(count, BLOCK // NP_TYPES[self.dt(dst.dtype)].itemsize)
                ins = self.issue(_S, s)
                self.touch(ins, dst.off, first * NP_TYPES[self.dt(dst.dtype)].itemsize, True, pool=dst.pool)
                self.join(_V, self.token(_S))
            srcs = tuple(n for n in tens if n != "dst")
            if any(o.name == "dst" and "r" in o.access for o in d.operands):   # Axpy: dst is a source too
                srcs += ("dst",)
            self.lanes(s, frame, tens, count, lambda e: d.meaning({**e, **extra}), srcs)

    def lanes(self, s, frame, tens: dict, count: int, meaning, srcs):
        """A count-form lane-wise instruction: bounds, alignment, the shadow, then the meaning; a result lane is
        written when every source lane is."""
        what = INSTRS[s.op].api
        for n, t in tens.items():
            self.aligned(t, what)
            self.bounds(t, count)
        ins = self.issue(_V, s)
        env, ok = {}, np.ones(count, dtype=bool)
        for n in srcs:
            t = tens[n]
            self.touch(ins, t.off, count * NP_TYPES[self.dt(t.dtype)].itemsize, False, pool=t.pool)
            env[n], w = self.read(t, count)
            ok &= w
        dst = tens["dst"]
        dsz = NP_TYPES[self.dt(dst.dtype)].itemsize
        self.touch(ins, dst.off, count * dsz, True, pool=dst.pool)
        if any(not self.same_or_disjoint(dst, tens[n], count) for n in srcs):
            # a partial overlap: lane by lane in order, as the emulation's per-lane loop (emu/vector.h: "overlapping
            # operands keep their sequential semantics"), so a lane reads what an earlier lane of dst wrote
            def lane(t: LT, i: int) -> LT:
                return LT(t.off + i * NP_TYPES[self.dt(t.dtype)].itemsize, t.size - i, t.dtype, t.queue, t.tag, t.mem,
                          t.pool)

            for i in range(count):
                e, good = {"count": 1}, True
                for n in srcs:
                    e[n], w = self.read(lane(tens[n], i), 1)
                    good = good and bool(w[0])
                e["dst"], _ = self.read(lane(dst, i), 1)
                self.write(lane(dst, i), meaning(e)["dst"][:1], good)
            return
        env["dst"], _ = self.read(dst, count)
        env["count"] = count
        out = meaning(env)["dst"]
        self.write(dst, out[:count], ok)

    def same_or_disjoint(self, d: LT, s: LT, n: int) -> bool:
        """Whether n lanes of s are dst's own lanes (same address, same element size) or share no byte with d's."""
        dz, sz = NP_TYPES[self.dt(d.dtype)].itemsize, NP_TYPES[self.dt(s.dtype)].itemsize
        return (d.off == s.off and dz == sz) or d.off + n * dz <= s.off or s.off + n * sz <= d.off

    def masked(self, s, frame, tens, count, args):
        """Compare / Compares (bit i of a uint8 mask = src0[i] op src1[i]) and Select (dst[i] = bit i ? src0[i]
        : src1[i]): whole 256-B repeats (the table's meaning raises otherwise); a mask byte is written when its 8
        source lanes are, a selected lane when its sources and its mask byte are (EMU.md "Poison")."""
        d = INSTRS[s.op]
        if count is None or count <= 0:
            return
        mask_name = "dst" if s.op in (Op.COMPARE, Op.COMPARE_SCALAR) else "mask"
        for n, t in tens.items():
            self.aligned(t, d.api)
            self.bounds(t, count // 8 if n == mask_name else count)
        ins = self.issue(_V, s)
        env, ok = {}, np.ones(count, dtype=bool)
        for n, t in tens.items():
            k = count // 8 if n == mask_name else count
            self.touch(ins, t.off, k * NP_TYPES[self.dt(t.dtype)].itemsize, n == "dst", pool=t.pool)
            env[n], w = self.read(t, k)
            if n != "dst":
                ok &= np.repeat(w, 8)[:count] if n == mask_name else w
        for o in d.operands:
            if o.kind == "scalar":
                env[o.name] = np.asarray(self.fval(args[o.name], frame)).astype(
                    NP_TYPES[self.dt(tens["src0"].dtype)])
            elif o.kind == "cmp":
                env[o.name] = args[o.name]
        env["count"] = count
        try:
            out = d.meaning(env)["dst"]
        except ValueError as e:
            raise KirFault(f"{self.where}: {e}") from None
        if mask_name == "dst":
            self.write(tens["dst"], out[:count // 8], ok.reshape(-1, 8).all(axis=1))
        else:
            self.write(tens["dst"], out[:count], ok)

    def masked_repeat(self, s, frame, tens, args):
        """The mask / repeat forms of Compare (every lane of a repeat, its bits at dst bytes r * L / 8..) and of
        Select's tensor-scalar mode (lanes < `lanes`, L mask bits a repeat), L = 256 / sizeof(T) (opgen.kernel.isa
        `_compare_repeat`, `_select_scalar_repeat`): operands 32-byte aligned, the elements each repeat addresses
        (isa.lane_at) bounds-checked and touched, then the table's meaning. A mask byte is written when its 8 source
        lanes are, a selected element when its source lane and its mask byte are (EMU.md "Poison"). The bit mask
        and the other operands must not overlap (a KirFault, as the emulation's)."""
        d = INSTRS[s.op]
        cmp = s.op is Op.COMPARE_REP
        rep = self.ival(args["repeat"], frame)
        p = tuple(self.ival(x, frame) for x in args["params"])
        data = tens["src0"]
        sz = NP_TYPES[self.dt(data.dtype)].itemsize
        L = 256 // sz
        mask_name = "dst" if cmp else "mask"
        for t in tens.values():
            self.aligned(t, d.api)
        env = {"repeat": rep, "params": p}
        if cmp:
            env["mask"], env["mode"] = self.ival(args["mask"], frame), args["mode"]
            lanes = L
            idx = {"src0": lane_grid(rep, L, p[1], p[4], sz), "src1": lane_grid(rep, L, p[2], p[5], sz)}
        else:
            lanes = self.ival(args["lanes"], frame)
            env["lanes"] = lanes
            env["scalar"] = np.asarray(self.fval(args["scalar"], frame)).astype(NP_TYPES[self.dt(data.dtype)])
            idx = {"dst": lane_grid(rep, lanes, p[0], p[3], sz), "src0": lane_grid(rep, lanes, p[1], p[4], sz)}
        if rep == 0:
            return
        nbytes = rep * L // 8
        tops = {n: int(ix.max()) + 1 for n, ix in idx.items()}
        tops[mask_name] = nbytes
        mt = tens[mask_name]
        for n, ix in idx.items():
            t = tens[n]
            at = t.off + ix * sz
            if t.mem == mt.mem and ((mt.off <= at) & (at < mt.off + nbytes)).any():
                raise KirFault(f"{d.api}: the bit mask overlaps {n} ({self.where})")
        for n, t in tens.items():
            self.bounds(t, tops[n])
        ins = self.issue(_V, s)
        for n, ix in idx.items():
            self.touch_elems(ins, tens[n].off, ix, sz, n == "dst", pool=tens[n].pool)
        self.touch(ins, mt.off, nbytes, cmp, pool=mt.pool)
        for n, t in tens.items():
            env[n], _w = self.read(t, tops[n])
        try:
            out = d.meaning(env)["dst"]
        except ValueError as e:
            raise KirFault(f"{self.where}: {e}") from None
        if cmp:
            ok = np.ones(rep * L, dtype=bool)
            for n in ("src0", "src1"):
                ok &= self.read(tens[n], tops[n])[1][idx[n]]
            self.write(tens["dst"], out[:nbytes], ok.reshape(-1, 8).all(axis=1))
            return
        mok = self.read(mt, nbytes)[1]
        sok = self.read(data, tops["src0"])[1][idx["src0"]]
        bit = (np.arange(rep, dtype=np.int64)[:, None] * L + np.arange(lanes, dtype=np.int64)[None, :]).reshape(-1)
        dst = tens["dst"]
        _v, dok = self.read(dst, tops["dst"])
        dok = np.array(dok, copy=True)
        dok[idx["dst"]] = sok & mok[bit // 8]
        self.write(dst, out[:tops["dst"]], dok)

    def reduce(self, s, frame, tens, count):
        if count is None or count <= 0:
            return
        src, dst, tmp = tens["src"], tens["dst"], tens["tmp"]
        sz = NP_TYPES[self.dt(src.dtype)].itemsize
        self.aligned(src, INSTRS[s.op].api)
        per_rep, per_blk = 256 // sz, BLOCK // sz
        reps = -(-count // per_rep) * (2 if s.op is Op.REDUCE_MAX else 1)
        need = -(-reps // per_blk) * per_blk
        self.bounds(src, count)
        self.bounds(tmp, need)
        self.bounds(dst, 1)
        ins = self.issue(_V, s)
        self.touch(ins, src.off, count * sz, False, pool=src.pool)
        self.touch(ins, tmp.off, need * sz, True, pool=tmp.pool)
        self.touch(ins, dst.off, sz, True, pool=dst.pool)
        v, ok = self.read(src, count)
        d0, _ = self.read(dst, 1)
        out = INSTRS[s.op].meaning({"dst": d0, "src": v, "count": count})["dst"]
        self.write(dst, out[:1], bool(ok.all()))
        self.ub.written[tmp.off:tmp.off + need * sz] = True

    def gather(self, s, frame, tens, count):
        if count is None or count <= 0:
            return
        dst, src, off = tens["dst"], tens["src"], tens["offset"]
        base = self.ival(dict(s.args)["base"], frame)
        for t in (dst, off):
            self.aligned(t, "Gather")
            self.bounds(t, count)
        ins = self.issue(_V, s)
        self.touch(ins, off.off, count * 4, False, pool=off.pool)
        offs, ok_off = self.read(off, count)
        if not ok_off.all():
            raise KirFault(f"Gather: srcOffset[{int(np.argmin(ok_off))}] is unwritten (poisoned) UB")
        sz = NP_TYPES[self.dt(src.dtype)].itemsize
        srcv, ok_src = self.read(src, src.size)
        for b in (offs.astype(np.int64) + base):
            if b % sz or b // sz >= src.size:
                raise KirFault("Gather: a byte offset is misaligned or past the source")
            at = src.off + int(b)
            if at + sz > dst.off and at < dst.off + count * sz:
                raise KirFault(f"Gather: a lane reads UB byte {at} inside the destination [{dst.off}, "
                               f"{dst.off + count * sz}) (in-place gather)")
            self.touch(ins, src.off + int(b), sz, False, pool=src.pool)
        self.touch(ins, dst.off, count * sz, True, pool=dst.pool)
        d0, _ = self.read(dst, count)
        out = INSTRS[Op.GATHER].meaning({"dst": d0, "src": srcv, "offset": offs, "base": base, "count": count})
        idx = (offs.astype(np.int64) + base) // sz
        self.write(dst, out["dst"][:count], ok_src[idx])

    def strided(self, s, frame, tens):
        """A mask / repeat form (binary ops with BinaryRepeatParams, WholeReduceSum / WholeReduceMax): the elements
        each operand's repeats address (isa.lane_grid), bounds and alignment checked, each element touched, then the
        table's meaning; a destination element is written when every source lane it is computed from is (lane by
        lane; a WholeReduce's element when every lane of its repeat is), so a padded row's unwritten pad lanes poison
        only the pad lanes of the result, as on the device they hold garbage only there."""
        d, args = INSTRS[s.op], dict(s.args)
        whole = s.op in (Op.WHOLE_REDUCE_SUM, Op.WHOLE_REDUCE_MAX)
        vals = {o.name: self.ival(args[o.name], frame) for o in d.operands
                if o.kind == "value" and o.name != "params"}
        sz = NP_TYPES[self.dt(tens["dst"].dtype)].itemsize
        mask, rep = vals["mask"], vals["repeat"]
        if not 1 <= mask <= 256 // sz or not 0 <= rep <= 255:
            raise KirFault(f"{d.api}: mask {mask} or repeatTime {rep} outside one repeat ({self.where})")
        if whole:
            idx = {"src": lane_grid(rep, mask, vals["srcBlk"], vals["srcRep"], sz),
                   "dst": np.arange(rep, dtype=np.int64) * vals["dstRep"]}
        else:
            p = tuple(self.ival(x, frame) for x in args["params"])
            vals["params"] = p
            idx = {n: lane_grid(rep, mask, p[j], p[3 + j], sz) for j, n in enumerate(("dst", "src0", "src1"))}
        for n, t in tens.items():
            if not (whole and n == "dst"):   # a WholeReduce destination needs element alignment only
                self.aligned(t, d.api)
        if rep == 0:
            return
        tops = {n: int(ix.max()) + 1 for n, ix in idx.items()}
        for n, t in tens.items():
            self.bounds(t, tops[n])
        self.overlap(s.op, d.api, tens, idx, sz, mask, rep, whole, vals.get("params"))
        ins = self.issue(_V, s)
        env = dict(vals)
        ok = np.ones(len(idx["dst"]), dtype=bool)   # per destination element: every source lane it reads written
        for n, t in tens.items():
            if n == "dst":
                continue
            self.touch_elems(ins, t.off, idx[n], sz, False, pool=t.pool)
            env[n], w = self.read(t, tops[n])
            lanes = np.asarray(w, dtype=bool)[idx[n]]
            ok &= lanes.reshape(rep, mask).all(axis=1) if whole else lanes
        dst = tens["dst"]
        self.touch_elems(ins, dst.off, idx["dst"], sz, True, pool=dst.pool)
        env["dst"], dok = self.read(dst, tops["dst"])
        if not whole and (tens["src1"].off, tens["src1"].mem) == (dst.off, dst.mem) and \
                (vals["params"][3] == 0 or vals["params"][5] == 0):   # accumulation: src1 reads the earlier repeats'
            env["src1_is_dst"] = True                                 # writes (overlap checks the other cases)
        try:
            out = d.meaning(env)["dst"]
        except ValueError as e:
            raise KirFault(f"{self.where}: {e}") from None
        dok = np.array(dok, copy=True)
        dok[idx["dst"]] = ok
        self.write(dst, out, dok)

    def overlap(self, op, what: str, tens: dict, idx: dict, sz: int, mask: int, rep: int, whole: bool, params):
        """The device's address-overlap rules for one repeat-form instruction, as the emulation's OverlapGuard
        (emu/vector.h; docs/reference/ascendc.md §1.9 operand rules): within a repeat a source and dst overlap
        100 % (the same byte for every lane; never for a WholeReduce) or not at all; no repeat reads a byte an
        earlier repeat of the same instruction wrote, except src1 of Add / Sub / Mul / Max / Min with dst's or
        src1's repeat stride 0 (accumulation). KirFault otherwise, worded as the emulation's fault. The rules are
        first checked on whole arrays (_overlap_clean); only an instruction that breaks one is walked lane by lane,
        for the first broken rule in repeat, operand and lane order (the fault's wording)."""
        acc1 = (not whole and op in (Op.ADD_REP, Op.SUB_REP, Op.MUL_REP, Op.MAX_REP, Op.MIN_REP)
                and (params[3] == 0 or params[5] == 0))
        if not _overlap_clean(tens, idx, sz, rep, whole, acc1):
            _overlap_walk(what, tens, idx, sz, mask, rep, whole, acc1)

    def brcb(self, s, frame, tens):
        args = dict(s.args)
        rep = self.ival(args["repeat"], frame)
        blk, rst = (self.ival(x, frame) for x in args["params"])
        dst, src = tens["dst"], tens["src"]
        sz = NP_TYPES[self.dt(dst.dtype)].itemsize
        per = BLOCK // sz
        top = max(((r * rst + j * blk) * per + per for r in range(rep) for j in range(8)), default=0)
        self.aligned(dst, "Brcb")
        if dst.off == src.off:
            raise KirFault("Brcb: src must not alias dst")
        self.bounds(src, rep * 8)
        self.bounds(dst, top)
        ins = self.issue(_V, s)
        self.touch(ins, src.off, rep * 8 * sz, False, pool=src.pool)
        for r in range(rep):
            for j in range(8):
                self.touch(ins, dst.off + (r * rst + j * blk) * BLOCK, BLOCK, True, pool=dst.pool)
        sv, ok = self.read(src, rep * 8)
        d0, dok = self.read(dst, top)
        out = INSTRS[Op.BRCB].meaning({"dst": d0, "src": sv, "repeat": rep, "params": (blk, rst)})["dst"]
        for r in range(rep):
            for j in range(8):
                b = (r * rst + j * blk) * per
                dok[b:b + per] = ok[r * 8 + j]
        self.write(dst, out, dok)

    # -- the whole core
    def run(self):
        frame = {"ints": {}, "floats": {}, "tensors": {}, "gms": {}, "modes": {}, "structs": {}}
        self.where = "Init"
        yield from self.block(self.k.init, frame)
        self.where = "Process"
        yield from self.block(self.k.process, frame)
        if self.flags:
            ev, i = sorted(self.flags)[0]
            raise KirFault(f"SetFlag<HardEvent::{ev}>({i}) is never consumed by a WaitFlag before the kernel "
                           "returns: SetFlag and WaitFlag must pair (docs/reference/ascendc.md §1.6)")


_PLAIN = {kir.Let: _Core.let, kir.Assign: _Core.assign, kir.FLet: _Core.flet, kir.FAssign: _Core.fassign,
          kir.Copy: _Core.copy_stmt, kir.Vec: _Core.vec_stmt, kir.InitBuffer: _Core.init_buffer, kir.Alloc: _Core.alloc,
          kir.Barrier: lambda self, s, frame: self.barrier(s.pipe), kir.Comment: lambda self, s, frame: None,
          kir.Nd2Nz: _Core.nd2nz, kir.LoadData: _Core.load_data, kir.Mmad: _Core.mmad, kir.LoadBias: _Core.load_bias,
          kir.Fixpipe: _Core.fixpipe}
"""Node class -> handler(core, statement, frame) of the statements that never wait (no SyncAll, flag wait or
body inside): _Core.block runs them without a generator; `stmt` runs the rest (and a subclass of one of these)."""


def _sub(frame) -> dict:
    """A nested scope: names defined inside do not leak out; assignments to outer names go to the outer scope's
    dict when the name lives there (the dicts are shared through ChainMap-like copying of references)."""
    return {"ints": _Scope(frame["ints"]), "floats": _Scope(frame["floats"]),
            "tensors": _Scope(frame["tensors"]), "gms": frame["gms"], "modes": frame["modes"],
            "structs": _Scope(frame.get("structs", {}))}


class _Scope(dict):
    """A dict layered over a parent: reads fall through, writes to a parent's name go to the parent."""

    def __init__(self, parent):
        super().__init__()
        self.parent = parent

    def __missing__(self, key):
        return self.parent[key]

    def __contains__(self, key):
        return dict.__contains__(self, key) or key in self.parent

    def __setitem__(self, key, value):
        if not dict.__contains__(self, key) and key in self.parent:
            self.parent[key] = value
        else:
            dict.__setitem__(self, key, value)

    def get(self, key, default=None):
        return self[key] if key in self else default


_FLOATS = ("floats",)
"""The key of an integer env (Interp.env) holding the frame's float scalars' scope, which FIndex reads."""


class _Env:
    """An integer expression's names in one frame of a core (_Core.env), each looked up when `ev` reads it instead of
    a dictionary of every name built per expression (a fifth of a launch's time went to building them): `in` and
    `[]` only, with _Core.env's order of precedence."""

    __slots__ = ("core", "frame")

    def __init__(self, core, frame):
        self.core, self.frame = core, frame

    def _find(self, name) -> tuple:
        frame, core = self.frame, self.core
        if name == _FLOATS:
            return True, frame["floats"]
        if type(name) is not str:
            return False, None
        if "." in name:   # a struct's int field: the innermost struct of that name, its value or initialiser
            var, _, field = name.partition(".")
            structs = frame.get("structs", {})
            if var in structs:
                st = structs[var]
                got = None
                for key, kind, init in core.struct_keys[st["__struct__"]]:
                    if kind != "gm" and key == field:
                        got = (True, st.get(key, init))
                if got is not None:
                    return got
        ints = frame["ints"]
        if name in ints:
            return True, ints[name]
        if name.startswith("sizeof(") and name.endswith(")"):
            t = name[len("sizeof("):-1]
            if t in core.tmaps[-1] and core.tmaps[-1][t] in NP_TYPES:
                return True, NP_TYPES[core.tmaps[-1][t]].itemsize
        if name in core.members:
            return True, core.members[name]
        return False, None

    def __contains__(self, name) -> bool:
        return self._find(name)[0]

    def __getitem__(self, name):
        found, v = self._find(name)
        if not found:
            raise KeyError(name)
        return v

    def get(self, name, default=None):
        found, v = self._find(name)
        return v if found else default


def _define(scope, name, value):
    """Declares `name` in the innermost scope (a C++ declaration; it shadows an outer one)."""
    dict.__setitem__(scope, name, value)


def opaque(k: kir.KernelClass) -> str | None:
    """Why kernel class `k` cannot be interpreted (the first Verbatim statement or call of an extern method
    reachable from Init / Process, named with its method), or None when all of it is Kernel IR."""
    methods = {m.name: m for m in k.methods}
    seen: set = set()

    def exprs(s):
        for v in vars(s).values() if hasattr(s, "__dataclass_fields__") else ():
            for x in (v if isinstance(v, tuple) else (v,)):
                if isinstance(x, DimExpr):
                    yield x
                elif isinstance(x, (kir.Ref, kir.GmView)):
                    yield from (y for y in vars(x).values() if isinstance(y, DimExpr))
                elif isinstance(x, tuple):
                    yield from (y for y in x if isinstance(y, DimExpr))

    def body(where, stmts):
        for s in kir.walk(stmts):
            if isinstance(s, kir.Verbatim):
                return f"{where} holds C++ text ({len(s.lines)} line(s), e.g. {s.lines[0].strip()[:60]!r})" \
                    if s.lines else f"{where} holds C++ text"
            names = [s.method] if isinstance(s, kir.Call) else []
            for e in exprs(s):
                names += [i.method for i in kir.invokes(e)]
            for n in names:
                m = methods.get(n)
                if m is not None and m.extern:
                    return f"{where} calls {n}, which is C++ text"
                if m is not None and n not in seen:
                    seen.add(n)
                    why = body(n, m.body)
                    if why:
                        return why
        return None

    return body("Init", k.init) or body("Process", k.process)


KERNEL_TYPES = ("KERNEL_TYPE_AIV_ONLY", "KERNEL_TYPE_AIC_ONLY", "KERNEL_TYPE_MIX_AIC_1_2")
"""The launch kinds the interpreter runs (docs/reference/ascendc.md §1.3; the emulation's emu::Launch / LaunchCube /
LaunchMix)."""


def kernel_type(k: kir.KernelClass) -> str:
    """The launch kind class `k` needs: a cube statement and a vector branch -> KERNEL_TYPE_MIX_AIC_1_2; cube
    statements only -> KERNEL_TYPE_AIC_ONLY; else KERNEL_TYPE_AIV_ONLY."""
    stmts = [s for m in (k.init, k.process, *(m.body for m in k.methods)) for s in kir.walk(m)]
    cube = any(isinstance(s, kir.CUBE_STMTS) for s in stmts)
    vector = any(isinstance(s, kir.CoreIf) and s.unit == "vector" for s in stmts)
    return ("KERNEL_TYPE_MIX_AIC_1_2" if vector else "KERNEL_TYPE_AIC_ONLY") if cube else "KERNEL_TYPE_AIV_ONLY"


def run(k: kir.KernelClass, tiling: dict, gm: dict, block_dim: int, ub_bytes: int = 196608,
        workspace: np.ndarray | None = None, types: dict | None = None, verify_first: bool = True,
        members: dict | None = None, launch: str | None = None, cube_bytes: dict | None = None,
        deterministic: bool = False) -> RunResult:
    """Run kernel class `k` on `block_dim` cores (core i has GetBlockIdx() = i, GetBlockNum() = block_dim).

    tiling: {field name: int} for every k.fields entry; gm: {Init argument name (k.args): NumPy array} (modified in
    place by UB -> GM copies; its bytes are the GM tensor, any dtype); workspace: the user workspace array (for
    GmTensors with workspace=True; an argument given as None is a nullptr: its tensor is unbound, any access to it
    faults); members: {scalar member: value} the file skeleton's Init sets from the arguments (a head-rows kernel's
    has_<input>: the pointer is not nullptr); types: {template parameter: element type} ("T" -> "half"); ub_bytes: the
    UB of each AIV in bytes (the platform's, opgen.platforms); launch: one of KERNEL_TYPES (default `kernel_type(k)`):
    AIV_ONLY runs block_dim AIVs, AIC_ONLY block_dim AICs, MIX_AIC_1_2 block_dim AI Cores of one AIC (GetBlockIdx() =
    c) and two AIVs (GetBlockIdx() = 2c + GetSubBlockIdx(), GetTaskRatio() = 2), as the emulation's launches do
    (EMU.md "Launch"); cube_bytes: {"L1", "L0A", "L0B", "L0C", "BiasTable": bytes} of each AIC (default
    CUBE_MEM_910B);
    deterministic: the framework asked for deterministic computation: fp32 atomic adds of different cores to the same
    bytes with nothing ordering them are a fault (as emu::DeterministicAdds in the emulation).

    Cores run as generators in turn: one runs until it waits (SyncAll, a CrossCoreWaitFlag whose counter is 0) or
    returns; a wait no core can satisfy any more is a deadlock fault. Returns a RunResult (faults as `[core k]
    message` -- `[AIC c]` / `[AIV v]` in a mixed launch -- the first one stops the launch, as the emulation's launch
    does). Raises kir.IRError for a malformed program (the verifier), NotKernelIR for a class with C++ text left in it
    (`opaque`) and OpgenError for a missing tiling field or GM argument, or a bad block_dim / ub_bytes / launch."""
    if verify_first:
        kir.verify(k)
    why = opaque(k)
    if why:
        raise NotKernelIR(f"kernel {k.name} is not Kernel IR throughout: {why}")
    if not isinstance(block_dim, int) or block_dim < 1:
        raise OpgenError(f"kernel IR interpreter: block_dim must be a positive integer, not {block_dim!r}")
    if not isinstance(ub_bytes, int) or ub_bytes < BLOCK:
        raise OpgenError(f"kernel IR interpreter: ub_bytes must be an integer of at least {BLOCK}, not {ub_bytes!r}")
    launch = launch or kernel_type(k)
    if launch not in KERNEL_TYPES:
        raise OpgenError(f"kernel IR interpreter: launch must be one of {', '.join(KERNEL_TYPES)}, not {launch!r}")
    types = dict(types or {})
    for t in k.tparams:
        if types.get(t) not in NP_TYPES:
            raise OpgenError(f"kernel IR interpreter: template parameter {t} needs an element type (types={types})")
    missing = [f for f in k.fields if f not in tiling]
    if missing:
        raise OpgenError(f"kernel IR interpreter: tiling field {missing[0]} not given")
    gms = {}
    for g in k.gms:
        arr = workspace if g.workspace else gm.get(g.arg)
        if arr is None and not g.workspace and g.arg not in gm:
            raise OpgenError(f"kernel IR interpreter: GM argument {g.arg} not given")
        data = None if arr is None else np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
        if arr is not None and np.size(arr) and not np.shares_memory(data, arr):
            raise OpgenError(f"kernel IR interpreter: GM argument {g.arg or 'workspace'} must be a contiguous array")
        gms[g.name] = _Gm(g.name, data, g.dtype, bool(g.workspace))
    mem = {"UB": ub_bytes, **CUBE_MEM_910B, **(cube_bytes or {})}
    n = block_dim
    if launch == "KERNEL_TYPE_MIX_AIC_1_2":
        specs = [dict(kind="AIC", idx=c, label=f"AIC {c}") for c in range(n)] + \
                [dict(kind="AIV", idx=v, label=f"AIV {v}", sub=v % 2, ratio=2) for v in range(2 * n)]
    else:
        kind = "AIC" if launch == "KERNEL_TYPE_AIC_ONLY" else "AIV"
        specs = [dict(kind=kind, idx=i) for i in range(n)]
    cores: list = []
    state = _Launch(cores, launch == "KERNEL_TYPE_MIX_AIC_1_2", deterministic)
    try:
        for slot, cs in enumerate(specs):
            cores.append(_Core(k, cs.pop("idx"), n, tiling, gms, mem, types, slot=slot, launch=state, **cs))
        for c in cores:
            for name, arg in k.presence:   # Init: the member is whether the argument is not nullptr
                if isinstance(arg, str):       # (a runtime guard, kir.TilingCond: Init's Assign sets it)
                    c.members[name] = gm.get(arg) is not None
            for name, v in (members or {}).items():
                if name not in c.members:
                    raise OpgenError(f"kernel IR interpreter: {name} is not a scalar member of {k.name}")
                c.members[name] = v
        state.start()
        faults = _schedule(cores, state)
        if not faults:
            faults = state.leftovers()
        return RunResult(not faults, faults, [c.ub.used for c in cores if c.ub is not None])
    finally:
        # the launch state and its cores refer to each other: without this they (each core's UB and GM race shadows,
        # 0.9 GB for PairGuardNorm at 64 x 16384 fp32) stay until the collector's next full collection, and a loop
        # of launches holds several at once; also when a core's set-up raises (a bad member name)
        cores.clear()


def _schedule(cores: list, state: _Launch) -> list:
    """Run every core's generator in turn until all return (the faults: [] then), one faults, or a wait can never be
    satisfied (a deadlock fault per blocked core, worded as the emulation's)."""
    gens = [c.run() for c in cores]
    at = ["run"] * len(cores)          # "run", "sync", ("cross", id) or "done"
    group = [c.slot for c in cores if c.kind == "AIV"] if state.mix else [c.slot for c in cores]
    while True:
        progress = False
        for i, g in enumerate(gens):
            w = at[i]
            if w in ("done", "sync") or (w != "run" and state.count[i][w[1]] == 0):
                continue
            try:
                at[i] = next(g)
            except StopIteration:
                at[i] = "done"
            except KirFault as f:
                return [f"[{cores[i].label}] {f.bare}"]
            progress = True
        if all(w == "done" for w in at):
            return []
        syncing = [i for i in group if at[i] == "sync"]
        if syncing:
            gone = [i for i in group if at[i] == "done"]
            if gone:
                def names(ids):   # [1, 2] in a single-kind launch, [AIV 1, AIV 2] in a mixed one
                    return "[" + ", ".join(cores[i].label.removeprefix("core ") for i in ids) + "]"

                return [f"[{cores[syncing[0]].label}] SyncAll deadlock: core(s) {names(gone)} returned while "
                        f"{names(syncing)} wait"]
            if len(syncing) == len(group):
                state.meet(syncing)
                for i in syncing:
                    at[i] = "run"
                progress = True
        if not progress:
            blocked = [(i, w) for i, w in enumerate(at) if w != "done"]
            what = ", ".join(f"[{cores[i].label}] " + ("SyncAll" if w == "sync" else f"CrossCoreWaitFlag({w[1]})")
                             for i, w in blocked)
            i, w = blocked[0]
            return [f"[{cores[i].label}] {'SyncAll' if w == 'sync' else f'CrossCoreWaitFlag({w[1]})'} deadlock: no "
                    f"core can satisfy the wait any more; every live core is blocked: {what}"]
