"""Synchronisation by a dependency pass over the Kernel IR (opgen.kernel.kir): per buffer region and per pipe,
read-after-write, write-after-read and write-after-write between unordered accesses become PipeBarrier<PIPE_V>
(within the vector pipe), SetFlag / WaitFlag pairs (between pipes) or nothing (a queue hand-off already orders
them); a sync the analysis proves redundant is removed.

The ordering model is the emulation's and the interpreter's (opgen/emu/include/EMU.md "Pipes and races",
docs/reference/ascendc.md §1.5, §1.6): PIPE_V completes out of order (a barrier orders it), every other pipe in
order; a SetFlag<Q_P> / WaitFlag<Q_P> pair orders everything pipe Q issued or knew before the set before P's later
work (a wait on S orders every pipe); EnQue -> DeQue and FreeTensor -> the next AllocTensor of a block hand the
producer's / consumer's knowledge over (VECIN MTE2 -> V, VECOUT V -> MTE3, A1 / B1 MTE2 -> MTE1, A2 / B2 MTE1 -> M,
CO1 M -> FIX); SyncAll and PipeBarrier<PIPE_ALL> order
everything; a scalar read (GetValue) is synchronous, so it never needs a write-after-read sync.

The analysis is an abstract interpretation of the program (Init, then Process, method calls inlined):

* An access is (statement, pipe, read or write, region). A region is (base, first byte, end byte) on 32-B blocks
  (the detector's granularity): the base is a TBuf or one block of a queue (the queue allocator is simulated:
  round-robin over its InitBuffer blocks, so double buffering is exact), offsets are constants when the IR's
  expressions are, else the region runs from its start to the end of the base (or covers the whole base):
  regions not proven disjoint overlap (sound). A slot of a member tensor array got at a run-time offset (`w_[k]`,
  `perm_[j]`: Get with a slot) is a base of its own, relative offsets inside it: the planner lays the slots of every
  array of a TBuf out apart and every instruction on a slot covers at most its stride (the lowerings' claim, the
  planned buffers of opgen.tiling; slot 0 too); it overlaps its TBuf seen whole, never another slot. A copy's GM side is a
  region too: its whole GM buffer (so an MTE2 reload of a buffer MTE3 stored to on the core gets MTE3_MTE2, as the
  detector's per-core GM shadow requires); a method's GM parameter is its argument's buffer, a struct's GM field
  (the head kernel's Part: `p.in[j]`, `p.out[j]`) one buffer per field (inputs and outputs never alias); every
  workspace tensor is one buffer, so the cross-core exchange's store of one slot and a later load of another are
  a conflict to the analysis (an MTE3_MTE2 more than needed, never one less).
* A loop with constant bounds and at most UNROLL iterations is analysed iteration by iteration with its variable
  known (the slots of a per-slot Get loop, a zero fill per slot).
* The state holds every access not yet ordered before every pipe, each with the set of pipes it is ordered
  before, plus the tokens of pending flags and queue blocks. A new access conflicting with an unordered one gets a
  sync placed before it (Barrier(V) for V after V, else SetFlag(Q, P) + WaitFlag(Q, P); PIPE_ALL for a pair no
  HardEvent names), whose effect the analysis applies at once; not a second time when the same sync already ends
  the list there.
* Branches are analysed separately and joined (an access ordered on one path only is unordered; a flag or queue
  token keeps an access the other path never made; a tensor bound on one path keeps that binding); a loop body is
  analysed until the state at its head is a fixed point of entry ⊔ end-of-body, so a dependency carried from one
  iteration to the next is found (and a sync placed only where one is), without a barrier at every loop edge.
  After a loop that provably runs (constant bounds, lo < hi, or the lowering's For.nonempty claim, which the
  interpreter checks) the state is the body's output at the fixed point; otherwise the join with the loop's entry
  (zero iterations) too.
  The state is a set of disjuncts keyed by the queues' allocator states, so the blocks of a double-buffered
  queue stay apart across iterations. An If testing presence members a queue's protocol depends on
  (kir.presence_split: an output written under some presences only) runs per disjunct only the branches the
  disjunct's presence facts allow, the branch taken adding its literals to the facts (part of the key): the paths
  of different presences never join, as the members never change after Init.
* Where a sync goes (_Analysis.where): in the function where the call paths of the two accesses part (the calls
  that led to each), before the later one's statement there (the access, or the call leading to it), and before
  the outermost loop there that holds the later access but not the earlier one: issued once, not per iteration.
* A loop marked `disjoint` (kir.For: the lowering's claim that iterations touch disjoint bytes where one writes)
  is analysed for one iteration: no dependence is carried between its iterations.
* A CoreIf body runs on one core kind: it is analysed like an If with an empty else, and its accesses never conflict
  with those of a CoreIf of the other kind (other cores, ordered by cross-core flags, which order no pipe here).
  Cube statements: Nd2Nz on MTE2 (GM -> L1), LoadData on MTE1 (L1 -> L0A / L0B), LoadBias on MTE1 (L1 -> bias table), Mmad on M (reads C unless it
  provably initialises it), Fixpipe on FIX (L0C -> GM); MTE1, M and FIX complete in order like MTE2.
* After placement, each placed sync is removed in turn and kept removed when the analysis then finds no conflict.
  Each such trial stops at its first conflict and reuses the base program's walk (the program the trials change,
  conflict-free; _Trials.states: per statement list, entered in a given state, the state before each statement
  and after the list, recorded by the check that ends the placement and by the trials): a list starts from the base's
  state before the first statement holding or calling the trial's change (its prefix is the base's code), and
  past the last such statement, as soon as the trial's state equals the base's there, it ends with the base's
  state after the list (the rest is the base's code from the base's state: the same deterministic walk, which met
  no conflict). So a trial walks from its change until its state rejoins the program's, in its own list, in each
  enclosing one and in each fixed-point iteration of a loop holding it; a method body entered in a state the base
  met costs a lookup. Over the 135 classes the suite places (the examples, derived specs and bundled operators),
  place_syncs took 109.7 s of CPU before and 59.4 s after (back to back), with the same placements; the
  prefix-only version of this memo had halved BatchMatMulV3's placement (17.1 -> 8.3 s).
* Then each placed barrier or flag pair that follows an If (past statements issuing no work) moves to the end of
  the branch holding every access it orders, when the analysis finds no conflict (_sink; a position's index
  len(list) is the end of that list): it runs only where the branch is taken (GroupNorm's guarded segment fix-up),
  and an access after the loop it also ordered gets its own syncs outside the loop (_placed_outside).
* Then each flag pair's SetFlag moves up its statement list, one statement at a time, while the analysis still
  finds no conflict (so it follows the last access it must cover), under an event id of its own: the waiting pipe
  no longer waits for the producing pipe's later, unrelated work (a prefetch, another operand's copy).

What the pass spends (the same placements with or without each of these; tests/test_kir_sync.py runs the pass with
the copy, the early stop and the class's tables disabled): what every analysis of a class reads of it and the tables
its analyses share (interned accesses, expressions, FLoads, a vector statement's operands, whether two accesses
conflict unless ordered, call reach) are made once per class (_class_facts; a KernelClass and its nodes are frozen,
so each entry is a function of them alone). A copied disjunct (_D.copy, made before every statement a trial or the
check ending the placement records) copies its records and shares its queues, tokens and bindings until a statement
changes one of them (_D.own, called by every statement that does: the queue operations, Get, View, a call's tensor
parameters, a SetFlag / WaitFlag), so neither side sees the other's change. _placed_outside's placement stops at the
first sync it would place inside the loop: its rounds only append to the lists, so that sync would be in its result,
which is None then; and before any round, a trial's walk of the moved program (_first_put_inside: from the base
program's states, _Trials) runs to its first conflict, which is the first round's first (the round puts nothing
before it, so the two walks agree up to there, in equal states): when every disjunct with a conflict there, its
first conflicting access and each record that access conflicts with would put the sync inside the loop
(_Analysis.all_inside: whatever order the round's dictionaries hold them in, its first put is one of those), the
answer is None with no round (an earlier access in a method's body, whose call path only a walk from the start
knows, leaves it to the rounds). Accepting a change scans only the lists holding or calling it (the others keep
every state). From the second round on, the placement first checks the program (_clean, recording the states for the
trials): a round placing nothing meets no conflict, and the check's walk, unlike a placing one (which records each
access's call path for `where`), skips a list entered again in a state it met in the same walk; the placing round
runs only when the check meets a conflict, so the rounds are the same. A loop's fixed point ends when the join of its
head and the body's end would equal the head: _covers decides that item by item as _D.join would change it, and that
last join, which the loop then drops, is not built (one per loop analysed; 2-3 % of place_syncs over the 129 classes of
`opgen generate -j 1 examples/specs/*.py` at main c0ad222, same placements). Over the 117 classes `opgen generate -j 1
examples/specs/*.py` places (their inputs pickled from that run, /tmp/sync5/rec, kept out of the repository),
place_syncs took 34.8 s of CPU before these and 24.0 s after (1.45x; both versions in one process, class by class
interleaved, load 13-20), with the same placements. Since the cube classes' A-panel loop holds the B-panel loop (commit
"mm2"), their 51 _placed_outside calls took 6.7 s, each a walk of the nest from the start; _first_put_inside answers all
51 (None) from a trial's walk (0.02 s), and the check that ends the placement saves a third of that round: over the 117
classes of that run (re-recorded, /tmp/sync6-rec), place_syncs took 36.8 s of CPU before and 27.9 s after (1.32x,
interleaved as above, load 13), the 9 cube classes 14.7 -> 7.0 s (2.1x), with the same placements.

Public: `strip_syncs` (a program without Barrier / SetFlag / WaitFlag), `conflicts` (the unordered conflicting
pairs of a program: empty when it is synchronised), `place_syncs` (the pass), `place_syncs_memo` (the pass
memoised on disk, `memo_dir`, keyed by the class up to docs, comment texts and a one-to-one renaming of its names),
`placed` (the syncs a placed program gained, by position) and `without` (a placed program less one of them: the
mutation of a test).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import gc
import hashlib
import itertools
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

from opgen.errors import OpgenError
from opgen.ir.dims import as_dim
from opgen.kernel import kir
from opgen.kernel.isa import INSTRS, Op, Pipe
from opgen.paths import cache_root

BLOCK = 32
"""Bytes of the race detector's block (EMU.md "Pipes and races")."""
UNROLL = 32
"""A loop with constant bounds and at most this many iterations is analysed iteration by iteration, its variable a
known constant in each (the slots of a per-slot Get loop, a zero fill per slot): exact, where the fixed point of a
loop body would take every iteration's regions as one."""

PIPES = (Pipe.S, Pipe.V, Pipe.M, Pipe.MTE1, Pipe.MTE2, Pipe.MTE3, Pipe.FIX)
"""The pipes the analysis orders (PIPE_ALL is no pipe of its own)."""
_BIT = {p: 1 << i for i, p in enumerate(PIPES)}
"""A pipe's bit in the analysis's pipe sets (ints: set operations without hashing)."""
_ALL = (1 << len(PIPES)) - 1
_PROD = {pos: prod for pos, (prod, _cons) in kir.QUEUE_HANDOFF.items()}
_CONS = {pos: cons for pos, (_prod, cons) in kir.QUEUE_HANDOFF.items()}
"""The pipes a queue's EnQue -> DeQue hands over (producer -> consumer) by TPosition, as the emulation's TQue
(opgen/emu/include/emu/tensor.h ProducerPipe / ConsumerPipe) and the interpreter (opgen.kernel.kir_interp): L1
MTE2 -> MTE1, L0A / L0B MTE1 -> M, L0C M -> FIX; FreeTensor -> the next AllocTensor of the block the reverse."""
_SYNC_TYPES = (kir.Barrier, kir.SetFlag, kir.WaitFlag)
_UNKNOWN = ("?",)
"""The base of a region whose buffer the analysis cannot name: it overlaps every region."""
_GM_UNKNOWN = ("gm", "?")
"""The base of a GM region whose buffer the analysis cannot name (a method's GM parameter): it overlaps every GM
region."""


@dataclass(frozen=True)
class Region:
    """Bytes [lo, hi) of base (hi None: to the end of the base; lo None: the whole base), on 32-B blocks. `mark`: the
    position of a loop whose `apart` claim covers the base, on a record an earlier iteration of that loop made
    (_Analysis.loop): no access of the current iteration to that base touches its bytes."""

    base: tuple
    lo: int | None
    hi: int | None
    mark: tuple = ()

    def overlaps(self, o: "Region") -> bool:
        """Whether the two regions may share a 32-B block (unknown bases and bounds overlap)."""
        if (self.base[0] == "gm") != (o.base[0] == "gm"):
            return False          # GM and on-chip memory never share a block
        if self.base == _UNKNOWN or o.base == _UNKNOWN:
            return True
        if _GM_UNKNOWN in (self.base, o.base) and self.base[0] == o.base[0] == "gm":
            return True
        if self.base != o.base:
            return _sub_overlap(self.base, o.base)
        if self.lo is None or o.lo is None:
            return True
        a0, b0 = self.lo // BLOCK, o.lo // BLOCK
        a1 = None if self.hi is None else -(-self.hi // BLOCK)
        b1 = None if o.hi is None else -(-o.hi // BLOCK)
        return (a1 is None or b0 < a1) and (b1 is None or a0 < b1)


def _sub_overlap(a: tuple, b: tuple) -> bool:
    """Whether two different bases may share bytes: a TBuf ("b", buf) or a queue block ("q", queue, block), each
    seen whole or as a sub-base -- a slot of a member tensor array ("slot", var, k: laid apart from the other slots
    by the planner, module docstring) or a part of a cut of the allocation into equal parts ("part", n, j:
    kir.Ref.part). Sub-bases of one buffer overlap the buffer seen whole and each other unless both are slots or
    both parts of the same cut; different buffers, blocks and GM buffers never do."""
    ra = a[:3] if a[0] == "q" else a[:2]
    rb = b[:3] if b[0] == "q" else b[:2]
    if ra != rb:
        return False
    sa, sb = a[len(ra):], b[len(rb):]
    if not sa or not sb:
        return True
    if sa[0] == sb[0] == "slot":
        return False
    return not (sa[0] == sb[0] == "part" and sa[1] == sb[1])


@dataclass(frozen=True, eq=False)
class Access:
    """One access of the analysis: statement position `pos`, pipe, write (else read), region; `unit` the core kind
    of the CoreIf it lies in ("cube" / "vector", None outside one): accesses of different kinds are on different
    cores, ordered by cross-core flags, never by this pass. One analysis makes one object per distinct access
    (_Analysis.intern), so identity is equality and the state's dictionaries hash no fields."""

    pos: tuple
    pipe: Pipe
    write: bool
    region: Region
    unit: str | None = None
    bit: int = 0          # _BIT[pipe]


@dataclass(frozen=True)
class Conflict:
    """An unordered conflicting pair: `later` (at pos) needs `sync` after `earlier`."""

    earlier: Access
    later: Access
    sync: tuple

    def __str__(self):
        kind = ("write-after-write" if self.earlier.write else "write-after-read") if self.later.write else \
            "read-after-write"
        return (f"{kind} {self.earlier.pipe.name} {_pos_text(self.earlier.pos)} -> {self.later.pipe.name} "
                f"{_pos_text(self.later.pos)} on {self.later.region.base}")


def _conflicting(rec: Access, a: Access) -> bool:
    """Whether access `a` conflicts with the earlier record `rec` unless an order between them is known: one of them
    a write, not both on one in-order pipe (a pipe other than V completes its own work in order), not an earlier
    iteration's record of its own bytes of a base its loop keeps apart (For.apart, Region.mark), the same core kind
    (another kind's access is the other side of a mixed kernel: no conflict here) and the regions overlapping."""
    if not (a.write or rec.write) or (a.pipe is not Pipe.V and rec.pipe is a.pipe):
        return False
    if rec.region.mark and rec.region.base == a.region.base:
        return False
    return (rec.unit is None or a.unit is None or rec.unit == a.unit) and rec.region.overlaps(a.region)


def _why(earlier: Access, later: Access) -> str:
    """The comment of the sync ordering `later` after `earlier`: what it protects, in the kernel's own names."""
    b = later.region.base
    what = f"GM {b[1]}" if b[0] == "gm" else b[1] if b[0] in ("b", "q") else "a buffer"
    if later.write and earlier.write:
        return f"{what}: {later.pipe.name} writes after {earlier.pipe.name}'s write"
    if later.write:
        return f"{what}: {earlier.pipe.name} has read it before {later.pipe.name} overwrites it"
    return f"{what}: {earlier.pipe.name} has written it before {later.pipe.name} reads it"


def _pos_text(pos) -> str:
    return f"{pos[0]}@{'.'.join(str(i) for i in pos[1:])}"


# ------------------------------------------------------------------------------------------------ abstract state
class _D:
    """One disjunct: records {Access: bit set (_BIT) of the pipes it is ordered before}; queues {name: (in_use, nxt,
    queued)}; tokens {("enq"|"free", queue, block) or ("flag", event, id): frozenset of Accesses}; binds {tensor
    var: (base, byte start or None, dtype)}; facts: frozenset of (presence member, bool) the path took (a presence
    guard of a queue's protocol, _Analysis.split): part of the key, so each presence's queues stay apart."""

    __slots__ = ("records", "queues", "tokens", "binds", "facts", "shared")

    def __init__(self, records=None, queues=None, tokens=None, binds=None, facts=frozenset()):
        self.records = dict(records or {})
        self.queues = dict(queues or {})
        self.tokens = dict(tokens or {})
        self.binds = dict(binds or {})
        self.facts = facts
        self.shared = False

    def copy(self) -> "_D":
        """An equal disjunct: its own records; queues, tokens and bindings shared with self until either changes
        them (`own`: every statement that does calls it first; most change only records)."""
        d = _D.__new__(_D)
        d.records, d.queues, d.tokens, d.binds, d.facts = \
            self.records.copy(), self.queues, self.tokens, self.binds, self.facts
        d.shared = self.shared = True
        return d

    def own(self):
        """Makes the queues, tokens and bindings self's own (copied when `copy` shared them) before a change."""
        if self.shared:
            self.queues, self.tokens, self.binds = self.queues.copy(), self.tokens.copy(), self.binds.copy()
            self.shared = False

    def sig(self):
        return tuple(sorted(self.queues.items())) + ((("?facts", tuple(sorted(self.facts))),) if self.facts else ())

    def join(self, o: "_D") -> "_D":
        # keys in first-seen order (self's, then o's new ones): what a conflict search meets first is fixed; equal
        # sides (the common case: a branch that touched none of them) are copied as they are
        recs = self.records.copy()
        if o.records != recs:
            for a, s2 in o.records.items():   # ordered before a pipe on both paths only
                s1 = recs.get(a)
                if s1 is None:
                    recs[a] = s2
                elif s1 != s2:
                    recs[a] = s1 & s2
        toks = self.tokens.copy()
        if o.tokens != toks:
            for t, t2 in o.tokens.items():   # a token on one side only: the other never used that block
                t1 = toks.get(t)
                if t1 is None:
                    toks[t] = t2
                elif t1 != t2:   # an access the other path never made (or has ordered before every pipe) stays
                    toks[t] = (t1 & t2) | t1.difference(o.records) | t2.difference(self.records)   # carried
        binds = self.binds.copy()
        if o.binds != binds:
            for v, b2 in o.binds.items():   # bound on one path only: a use after lies on that path
                b1 = binds.get(v)
                if b1 is None:
                    binds[v] = b2
                elif b1 != b2:
                    binds[v] = (_UNKNOWN, None, b1[2])
        d = _D.__new__(_D)
        d.records, d.queues, d.tokens, d.binds, d.facts = recs, self.queues.copy(), toks, binds, self.facts
        d.shared = False
        return d

    # -- ordering
    def known(self, pipe: Pipe) -> frozenset:
        """The accesses pipe `pipe` issued or is ordered after (what a SetFlag / EnQue / FreeTensor from it
        carries)."""
        b = _BIT[pipe]
        return frozenset([a for a, s in self.records.items() if (s | a.bit) & b])

    def grant(self, accesses, pipe: Pipe):
        """`pipe` (every pipe when it is S: the scalar unit stops) is now ordered after `accesses`."""
        add = _ALL if pipe is Pipe.S else _BIT[pipe]
        recs = self.records
        for a in accesses:
            s = recs.get(a)
            if s is not None:
                s |= add
                if s == _ALL:
                    del recs[a]
                else:
                    recs[a] = s

    def barrier(self, pipe: Pipe):
        if pipe is Pipe.ALL:
            self.records.clear()
        else:
            b = _BIT[pipe]
            self.grant([a for a in self.records if a.bit == b], pipe)


_CUBE_PIPES = {kir.Nd2Nz: Pipe.MTE2, kir.LoadData: Pipe.MTE1, kir.Mmad: Pipe.M, kir.Fixpipe: Pipe.FIX,
               kir.LoadBias: Pipe.MTE1}


def _absent_pipes(k: kir.KernelClass) -> int:
    """The bits of the cube-side pipes (MTE1, M, FIX) no statement of k issues work on or syncs: an access need not
    be ordered before them, so a record ordered before every other pipe leaves the state (a vector kernel's records
    would otherwise stay until a PIPE_ALL barrier, and every search and join would walk them)."""
    used = {Pipe.S, Pipe.V, Pipe.MTE2, Pipe.MTE3}
    for body in [k.init, k.process] + [m.body for m in k.methods]:
        for x in kir.walk(body):
            if isinstance(x, kir.Barrier):
                used.add(x.pipe)
            elif isinstance(x, (kir.SetFlag, kir.WaitFlag)):
                used |= {x.src, x.dst}
            elif type(x) in _CUBE_PIPES:
                used.add(_CUBE_PIPES[type(x)])
    return sum(_BIT[p] for p in PIPES if p not in used)


_FACTS: dict = {}
"""id of a class -> (the class, its _class_facts): the last few classes analysed (the class is kept, so its id is
not another object's)."""


def _class_facts(k: kir.KernelClass) -> tuple:
    """What every analysis of class k reads of it, computed once per class (a KernelClass is frozen): its buffers and
    methods by name, its member tensors' element types, its GM tensors' bases (gm_region), the pipes no statement
    uses (_absent_pipes) and the presence members a queue's protocol depends on (kir.presence_split); and the
    tables every analysis of k shares (_Trials: interned accesses, expressions, FLoads, vector operands, conflicting
    pairs, the functions each calls, each list's call sets), each entry a function of k's frozen nodes alone."""
    got = _FACTS.get(id(k))
    if got is not None and got[0] is k:
        return got[1]
    calls = {f: {s.method for s in kir.walk(body) if isinstance(s, kir.Call)}
             for f, body in [("Init", k.init), ("Process", k.process)] + [(m.name, m.body) for m in k.methods]}
    reach: dict = {}
    for f in calls:
        seen, todo = {f}, [f]
        while todo:
            for g in calls.get(todo.pop(), ()):
                if g not in seen:
                    seen.add(g)
                    todo.append(g)
        reach[f] = frozenset(seen)
    facts = ({b.name: b for b in k.locals}, {m.name: m for m in k.methods}, {t.name: t.dtype for t in k.tensors},
             {g.name: ("gm", (f"<workspace {g.region}>" if g.region else "<workspace>") if g.workspace else g.arg)
              for g in k.gms}, _absent_pipes(k), kir.presence_split(k), ({}, {}, {}, {}, {}, reach, {}))
    if len(_FACTS) >= 8:
        _FACTS.clear()
    _FACTS[id(k)] = (k, facts)
    return facts


_SIMPLE_CLASSES = (kir.Scope, kir.CoreIf, kir.Nd2Nz, kir.LoadData, kir.LoadBias, kir.Mmad, kir.Fixpipe,
                   kir.CrossCoreSetFlag, kir.CrossCoreWaitFlag, kir.Verbatim, kir.If, kir.InitBuffer, kir.Get,
                   kir.View, kir.Alloc, kir.EnQue, kir.DeQue, kir.Free, kir.Copy, kir.Vec, kir.GetValue,
                   kir.SetValue, kir.TrapUnless, *_SYNC_TYPES, kir.SyncAll, kir.Call)
"""The node classes _Analysis.simple tells apart, in the order of its cases."""
_NODE_CLASS: dict = {}
"""A statement's type -> the first of _SIMPLE_CLASSES it is a subclass of (None: none)."""


def _node_class(t: type):
    """The first class of _SIMPLE_CLASSES that type t is (a subclass of): what isinstance tests in simple's order
    find, once per type."""
    c = _NODE_CLASS[t] = next((c for c in _SIMPLE_CLASSES if issubclass(t, c)), None)
    return c


def _vec_operands(s: kir.Vec) -> tuple:
    """(the instruction's INSTRS entry, its arguments by name, its count argument or None, reads, writes) of vector
    statement s: reads / writes the (Ref, elements or None) of its UB operands (a reduction's dst one element; a tmp
    operand, Brcb's and Gather's src the whole rest of their buffer)."""
    d0 = INSTRS[s.op]
    args = dict(s.args)
    count = args.get("count")
    reads, writes = [], []
    for o in d0.operands:
        if o.kind != "ub":
            continue
        n = count
        if s.op in (Op.REDUCE_SUM, Op.REDUCE_MAX) and o.name == "dst":
            n = 1
        elif o.name == "tmp" or s.op in (Op.BRCB,) or (s.op is Op.GATHER and o.name == "src"):
            n = None
        if "r" in o.access:
            reads.append((args[o.name], n))
        if "w" in o.access:
            writes.append((args[o.name], n))
    return d0, args, count, reads, writes


# ------------------------------------------------------------------------------------------------ the analysis
class _Trials:
    """What the prune's and the hoist's trial analyses of one class share: the interned accesses (so states of
    different trials compare), the integer expressions' symbols, and the states of the base program (`base`: the
    placed program the trials change, conflict-free) per statement list (`states`), which also stand for a method
    call's output (the body's list entered in the call's state: a lookup where the base met that state; `reach`: the
    functions a function calls, so a list calling a changed one is not the base's code); an accepted change
    (`accept`) drops the states it can touch.

    `states`: (statement list's position, its entry's types, GM scope, loop variables, core kind and the shape of
    its state: `_shape`) -> tables, each {i: (state, loop variables) before the syncs placed at i and statement i, for i a multiple of
    STATE_EVERY;
    i = len(list): before the syncs placed at the list's end; len(list) + 1: after the list} of the list entered in the state of its entry 0 (found by _same_states), each a fact about the base
    program: that list, entered in that state, reaches that state there (every analysis is deterministic). A trial
    differs from the base at a few positions (`diffs`, _diff_positions); in a list whose statements before i hold
    none of them and call no function holding one, the state before i is the base's (recorded there, and a walk
    starts from the latest one recorded); from a statement i on which the list holds none and calls none, the
    rest of the list is the base's code, so when the trial's state before i equals the base's there (_same_states,
    the loop variables too) the rest of the walk is the base's: no conflict (the base has none on any path it
    walked to the list's end) and the base's state after the list (_Analysis.block). Equal states give equal
    walks whatever their dictionaries' order: a trial's verdict is whether a conflict exists, which no order
    changes. The other states a trial meets are the trial program's (`pending`); accepting the program the last
    clean trial analysed keeps them (a rejected trial's are dropped)."""

    def __init__(self, k: kir.KernelClass):
        self.k = k
        self.accesses, self.exprs, self.floads, self.vecs, self.overlap, self.reach, self.callsets = \
            _class_facts(k)[-1]   # the class's (_class_facts): every analysis of k shares them
        self.states: dict = {}
        self.pending: dict = {}         # the current trial's states of its own program: id(table) -> (table, {i: ..})
        self.bodies: dict = {}          # statement list's position -> (the list, its span's memo)
        self.clean: tuple = (None, {})  # (program, pending) of the last trial that found no conflict
        self.base: dict | None = None   # the program the entries describe (position -> placed syncs)
        # callsets: statement list's position -> per statement, the functions its calls reach; reach: function ->
        # the functions it calls (itself included)

    def span(self, pos: tuple, stmts, diffs, changed) -> tuple:
        """(first, last): the lowest and highest index of a statement of list `stmts` (at `pos`) that holds a
        position of `diffs` (a sync placed before it or inside it) or calls a function reaching one of `changed`;
        (len(stmts) + 1, -1) when none does."""
        first, last, n = len(stmts) + 1, -1, len(pos)
        for d in diffs:
            if len(d) > n and d[:n] == pos:
                first, last = min(first, d[n]), max(last, d[n])
        if changed:
            cs = self.callsets.get(pos)
            if cs is None:
                cs = self.callsets[pos] = tuple(
                    frozenset().union(*(self.reach[x.method] for x in kir.walk((s,)) if isinstance(x, kir.Call)))
                    for s in stmts)
            for j, r in enumerate(cs):
                if r & changed:
                    first, last = min(first, j), max(last, j)
        return first, last

    def start(self, prog: dict, types: dict, used: set):
        """Make `prog` (conflict-free) the base program: one analysis records its states. Raises kir.IRError when
        prog has a conflict."""
        self.base, self.states, self.pending, self.clean, self.bodies = None, {}, {}, (None, {}), {}
        self.base = prog
        if not _clean(self.k, prog, types, used, self):
            raise kir.IRError("the dependency pass placed syncs that leave a conflict")

    def accept(self, prog: dict):
        """The base program is now `prog`: each list keeps its states before the first statement holding or calling
        a change (`span`: what comes after may differ), and the states of the last clean trial join when it
        analysed `prog` (the new base's own)."""
        diffs = _diff_positions(self.base, prog)
        changed = frozenset(d[0] for d in diffs)
        firsts: dict = {}
        for key, tables in self.states.items():
            lp = key[0]
            first = firsts.get(lp, firsts)
            if first is firsts:
                body = _body_at(self.k, lp)
                first = firsts[lp] = self.span(lp, body, diffs, changed)[0]
                if first > len(body):   # no change in or under the list: every state stays (no index is past it)
                    firsts[lp] = first = None
            if first is None:
                continue
            for v in tables:
                if v and max(v) > first:
                    for i in [i for i in v if i > first]:
                        del v[i]
        got, pend = self.clean
        if got is not None and got == prog:
            for v, more in pend.values():
                v.update(more)
        self.clean, self.pending, self.base = (None, {}), {}, prog


def _diff_positions(a: dict, b: dict) -> tuple:
    """The positions where programs a and b (position -> placed syncs) place different syncs."""
    return tuple(p for p in {**a, **b} if list(a.get(p, ())) != list(b.get(p, ())))


class _Analysis:
    def __init__(self, k: kir.KernelClass, inserted: dict, place: bool, types: dict, used_flags: set,
                 trials: _Trials | None = None, diffs: tuple | None = None):
        self.k = k
        self.inserted = inserted          # position -> list of sync statements placed before it
        self.place = place
        self.types = types
        self.used_flags = used_flags
        self.conflicts: list = []
        self.new = 0
        self.dup = 0                      # conflicts whose sync was already placed (put)
        (self.locals, self.methods, self.member_dtypes, self.gm_bases, self.absent,
         self.split, _tables) = _class_facts(k)
        self.unit: str | None = None      # the CoreIf being analysed
        self.env: dict = {}               # loop variables of unrolled loops (UNROLL) and their current values
        self.gm_scope: dict = {}          # a called method's GM parameters: their arguments' GM bases
        self.trials = trials              # a trial of the prune or the hoist: the memo of method calls
        self.diffs = diffs                # a trial: the positions where it differs from trials.base (None: not
        #                                   known, the states table unused)
        self.changed = frozenset(d[0] for d in diffs or ())   # the functions holding them
        shared = trials or _Trials(k)     # the tables; a lone analysis has its own
        self.accesses: dict = shared.accesses   # intern's table
        self.exprs: dict = shared.exprs         # id of an expression of k -> (it, DimExpr, symbols, constant value)
        self.floads: dict = shared.floads       # id of a statement of k -> its FLoads (_floads_of)
        self.vecs: dict = shared.vecs           # id of a Vec of k -> (it, *_vec_operands)
        self.overlap: dict = shared.overlap     # access -> {record: whether they conflict unless ordered} (find)
        self.first_only = False           # stop at the first conflict (_clean)
        self.stack: tuple = ()            # the positions of the calls being analysed, outermost first
        self.sites: dict = {}             # placing: Access -> the call positions it was last made under
        self.forbid: tuple | None = None  # placing (_placed_outside): a new sync in this statement list ends the run
        self.probe: tuple | None = None   # checking (_first_put_inside): the loop body whose first sync is asked
        self.inside: bool | None = None   # its answer, set at the first conflict (_first_put_inside)

    def intern(self, pos, pipe: Pipe, bit: int, write: bool, rk: tuple) -> Access:
        """The one Access object of these fields (bit: _BIT[pipe]; rk: its region's (base, lo, hi), unmarked) and the
        current core kind in this analysis (keyed by plain tuples: a Region is made once per access)."""
        key = (pos, bit, write, rk, (), self.unit)
        a = self.accesses.get(key)
        if a is None:
            a = self.accesses[key] = Access(pos, pipe, write, Region(*rk), self.unit, bit)
        return a

    def cv(self, e) -> int | None:
        """The value of integer expression e with the unrolled loops' variables known (None: not constant)."""
        if e is None:
            return None
        if type(e) is int:
            return e
        x = self.exprs.get(id(e))
        if x is None:
            try:
                d = as_dim(e)
                syms = frozenset(d.symbols())
                x = (e, d, syms, None)
                if not syms:     # no symbol: its value, once
                    try:
                        x = (e, None, syms, d.evaluate({}))
                    except (OpgenError, KeyError):
                        x = (e, None, syms, None)
            except (OpgenError, KeyError, TypeError, AttributeError):
                x = (e, None, frozenset(), None)
            self.exprs[id(e)] = x
        if x[1] is None:
            return x[3]          # a constant, or None: not an integer expression the analysis reads
        if not x[2] <= self.env.keys():
            return None          # a name no unrolled loop binds: not constant here
        try:
            return x[1].evaluate(self.env)
        except (OpgenError, KeyError):
            return None

    # -- helpers
    def size(self, dtype: str) -> int | None:
        dtype = self.types.get(dtype, dtype)
        return kir.ELEM_BYTES.get(dtype)

    def bind_of(self, d: _D, r: kir.Ref, scope: dict):
        name = scope.get(r.tensor, r.tensor)
        if r.slot is not None:
            slot = self.cv(r.slot)
            name = f"{name}[{slot}]" if slot is not None else None
        b = d.binds.get(name) if name is not None else None
        dtype = b[2] if b else self.member_dtypes.get(r.tensor, "float")
        if b is None:
            return (_UNKNOWN, None, r.as_dtype or dtype)
        base, start, dt = b
        if r.as_dtype is not None:   # a ReinterpretCast view: the offset counts the source's elements
            off, sz = self.cv(r.offset), self.size(dt)
            return (base, None if start is None or off is None or sz is None else start + off * sz, r.as_dtype)
        off, sz = self.cv(r.offset), self.size(dt)
        if start is None or off is None or sz is None:
            return (base, None, dt)
        return (base, start + off * sz, dt)

    def gm_region(self, v: kir.GmView) -> Region:
        """The GM a copy touches, as the whole GM buffer of its view (the GM arguments by name, every workspace
        tensor as one buffer, a method's GM parameter as its argument's buffer, a struct's GM field as one buffer
        per field, anything else as any GM buffer): coarse, so sound. The detector checks GM per core (EMU.md
        "Pipes and races": an MTE2 reload of bytes MTE3 stored needs MTE3_MTE2)."""
        base = self.gm_scope.get(v.tensor) or self.gm_bases.get(v.tensor)
        if base is None and "." in v.tensor:   # a struct's GM field (the head kernel's Part: p.in[j], p.out[j])
            base = ("gm", "field " + v.tensor.split("[")[0])
        return Region(base or _GM_UNKNOWN, None, None)

    def region(self, d: _D, r, scope: dict, elems) -> tuple:
        """The (base, lo, hi) of the Region that `r` (a Ref, or a GmView: gm_region) covering `elems` elements
        touches in disjunct d."""
        if type(r) is kir.GmView:
            return (self.gm_region(r).base, None, None)
        if r.part is not None:   # kir.Ref.part: apart from the other parts of a whole allocation's cut
            b = d.binds.get(scope.get(r.tensor, r.tensor)) if r.slot is None else None
            if b is not None and b[1] == 0 and b[0][0] in ("q", "b") and len(b[0]) == (3 if b[0][0] == "q" else 2):
                return (b[0] + ("part", r.part[1], r.part[0]), None, None)
        base, start, dt = self.bind_of(d, r, scope)
        if start is None:
            return (base, None, None)
        n = self.cv(elems) if elems is not None else None
        sz = kir.ELEM_BYTES.get(self.types.get(dt, dt))
        return (base, start, None if n is None or sz is None else start + max(n, 1) * sz)

    # -- accesses
    def access(self, ds: dict, pos, pipe: Pipe, reads, writes, scope):
        """Checks then records the accesses of one statement in every disjunct (reads / writes: lists of
        (Ref, elements or None))."""
        bit = _BIT[pipe]
        intern, region = self.intern, self.region
        items = list(ds.values())
        for di, d in enumerate(items):
            acc = [intern(pos, pipe, bit, False, region(d, r, scope, n)) for r, n in reads] + \
                  [intern(pos, pipe, bit, True, region(d, r, scope, n)) for r, n in writes]
            for a in acc:          # every access is checked before any is recorded: in place is no self-race
                while True:
                    c = self.find(d, a)
                    if c is None:
                        break
                    if not self.place:
                        if self.probe is not None:
                            self.inside = self.all_inside(items[di:], pos, pipe, reads, writes, scope)
                            raise _Found
                        self.conflicts.append(c)
                        if self.first_only:
                            raise _Found
                        break
                    self.put(self.where(c.earlier, pos), c.sync)
                    for x in c.sync:
                        self.effect(d, x)
            for a in acc:
                if self.place:
                    self.sites[a] = self.stack
                if a.pipe is Pipe.S and not a.write:
                    continue          # a scalar read is synchronous: nothing can overtake it
                for v in d.tokens.values():
                    if a in v:   # a later run of the same access: no earlier set or hand-off covers it
                        d.tokens = {t: (v - {a}) if a in v else v for t, v in d.tokens.items()}
                        break
                seen = (0 if pipe is Pipe.V else bit) | self.absent
                old = d.records.get(a)
                d.records[a] = seen = seen if old is None else old & seen

    def all_inside(self, ds: list, pos, pipe: Pipe, reads, writes, scope) -> bool:
        """At the first conflict of a walk (_first_put_inside), met in disjunct ds[0] (ds: it and the disjuncts after
        it, not yet checked: the ones before have no conflict here, in any order): whether the placement, meeting it
        in an equal state
        whatever the order of its dictionaries, would put its first sync in the statement list `probe` (its put
        raises: inside `probe`, not a sync the list holds there already, _holds). The placement handles the disjuncts, a
        statement's accesses and a disjunct's records in their order and places the first conflicting record's sync
        of the first conflicting access of the first disjunct holding one: so every disjunct with a conflict, its
        first conflicting access (that order is the statement's) and every record it conflicts with must put inside.
        False also where an earlier access lies in a method's body (its call path, `sites`, is the full walk's
        alone: a trial skips walks)."""
        bit = _BIT[pipe]
        n = len(self.probe)
        for d in ds:
            for r, w in [(r, False) for r in reads] + [(r, True) for r in writes]:
                a = self.intern(pos, pipe, bit, w, self.region(d, r[0], scope, r[1]))
                recs = [rec for rec, seen in d.records.items() if not seen & a.bit and _conflicting(rec, a)]
                if not recs:
                    continue
                for rec in recs:
                    if rec.pos[0] not in ("Init", "Process"):
                        return False
                    at = self.where(rec, pos)
                    if at[:n] != self.probe:
                        return False
                    sync = self.sync_for(rec.pipe, a.pipe)
                    if _holds(self.inserted.get(at, ()), sync):
                        return False
                break
        return True

    def where(self, earlier: Access, pos: tuple) -> tuple:
        """Where the sync ordering `earlier` before the access at `pos` (in the current call) goes: in the function
        where the call paths that led to the two accesses part, before the later one's statement there (the access
        itself, or the call leading to it: a method called from several places makes only this path pay), and
        before the outermost loop there holding it but not the earlier one's (_outside_loops: issued once, not per
        iteration)."""
        sites = self.sites.get(earlier)
        if sites is None and earlier.region.mark:   # an earlier iteration's record: its unmarked twin's call path
            sites = self.sites.get(self._with_mark(earlier, ()))
        e = (sites or ()) + (earlier.pos,)
        later = self.stack + (pos,)
        n = 0
        while n < min(len(e), len(later)) - 1 and e[n] == later[n]:
            n += 1
        if e[n][0] != later[n][0]:   # Init and Process: Init has run, any loop of Process holding the later one
            return _outside_loops((later[n][0], -1), later[n], self.k)
        return _outside_loops(e[n], later[n], self.k)

    def find(self, d: _D, a: Access):
        """The first record of d that a conflicts with (unordered, one of them a write, the same core kind, their
        regions overlapping), as a Conflict; None. Whether a record and a conflict unless ordered reads the two
        accesses alone: it is computed once per pair (`overlap`, shared by a class's analyses)."""
        abit = a.bit
        ova = self.overlap.get(a)
        if ova is None:
            ova = self.overlap[a] = {}
        for rec, seen in d.records.items():
            if seen & abit:
                continue
            o = ova.get(rec)
            if o is None:
                o = ova[rec] = _conflicting(rec, a)
            if o:
                return Conflict(rec, a, self.sync_for(rec.pipe, a.pipe, _why(rec, a)))
        return None

    def sync_for(self, q: Pipe, p: Pipe, doc: str = "") -> tuple:
        if q is p:
            return (kir.Barrier(p, doc),)
        ev = f"{q.name}_{p.name}"
        if ev not in kir.HARD_EVENTS:
            return (kir.Barrier(Pipe.ALL, doc),)
        i = 0
        while (ev, i) in self.used_flags:
            i += 1
        return (kir.SetFlag(q, p, i, doc), kir.WaitFlag(q, p, i))

    def put(self, pos, sync: tuple):
        """Place `sync` before position `pos`, unless the same sync is among the syncs placed there already
        (_holds): a loop's fixed-point iteration meets a conflict again whose sync went before the loop in this run
        (its entry state predates the sync), or another disjunct meets the conflict one disjunct's sync there
        orders (its effect was applied to that disjunct alone); a second copy orders nothing more."""
        lst = self.inserted.setdefault(pos, [])
        if _holds(lst, sync):
            self.dup += 1
            return
        if self.forbid is not None and pos[:len(self.forbid)] == self.forbid:
            raise _Found   # _placed_outside's answer is None already (its syncs only grow)
        for s in sync:
            lst.append(s)
        self.new += 1

    def effect(self, d: _D, s):
        if isinstance(s, kir.Barrier):
            d.barrier(s.pipe)
        elif isinstance(s, kir.SetFlag):
            d.own()
            d.tokens[("flag",) + kir.flag_key(s)] = d.known(s.src)
        elif isinstance(s, kir.WaitFlag):
            d.own()
            d.grant(d.tokens.pop(("flag",) + kir.flag_key(s), frozenset()), s.dst)

    # -- statements
    def block(self, ds: dict, stmts, pos: tuple, scope: dict) -> dict:
        """The state after statement list `stmts` (at position `pos`) from state ds. In a trial (`diffs`), with the
        base program's states of this list entered in this state (_Trials.states): the walk starts from the latest
        one recorded before the first statement holding or calling a change (`_Trials.span`: the prefix is the
        base's code), and from a statement after the last such one, where the state equals the base's there, it
        ends with the base's state after the list (the rest is the base's code from the base's state: the same walk,
        conflict-free). Exact: each state used is one the same code reaches from the same state. The syncs placed at
        position pos + (len(stmts),), the end of the list (a sync sunk into a branch, _sink), take effect after its
        last statement: a trial's table holds the state before them at index len(stmts) and the state after the
        list at len(stmts) + 1."""
        t = self.trials
        n = len(stmts)
        if t is None or self.diffs is None:
            for i in range(n):
                ds = self.step(ds, stmts[i], pos, i, scope)
            return self.tail(ds, pos + (n,))
        first, last = t.span(pos, stmts, self.diffs, self.changed)
        key = (pos, frozenset(self.types.items()), frozenset(self.gm_scope.items()), frozenset(self.env.items()),
               self.unit, _shape(ds))
        tables = t.states.setdefault(key, [])
        base = next((v for v in tables if _same_states(ds, v[0][0])), None)
        if base is None:
            base = {}
            tables.append(base)
        pend = t.pending.setdefault(id(base), (base, {}))[1] if last >= 0 else None
        # placing (self.place): every walk from its first statement, so each call site's accesses record their
        # own call path (self.sites, where a sync goes); the states are still recorded for the trials
        start = None if self.place else max((i for i in base if i <= first), default=None)
        if start is None:
            start = 0
        else:
            st, env = base[start]
            ds = {k: d.copy() for k, d in st.items()}
            self.env.clear()
            self.env.update(env)
        for i in range(start, n + 2):
            if i % STATE_EVERY and i < n:
                pass   # no state kept here (STATE_EVERY)
            elif i <= first:
                if i not in base:
                    base[i] = ({k: d.copy() for k, d in ds.items()}, dict(self.env))
            else:
                got = base.get(i) if i > last and n + 1 in base else None
                if got is not None and got[1] == self.env and _same_states(ds, got[0]):
                    # the rest is the base's walk: its states, its end (module docstring, _Trials)
                    pend.update((j, x) for j, x in base.items() if j >= i)
                    st, env = base[n + 1]
                    self.env.clear()
                    self.env.update(env)
                    return {k: d.copy() for k, d in st.items()}
                pend[i] = ({k: d.copy() for k, d in ds.items()}, dict(self.env))
            if i < n:
                ds = self.step(ds, stmts[i], pos, i, scope)
            elif i == n:
                ds = self.tail(ds, pos + (n,))
        return ds

    def tail(self, ds: dict, end: tuple) -> dict:
        """ds with the syncs placed at `end`, the end of a statement list (after its last statement), applied."""
        for sync in self.inserted.get(end, ()):
            for d in ds.values():
                self.effect(d, sync)
        return ds

    def step(self, ds: dict, s, pos: tuple, i: int, scope: dict) -> dict:
        """The state after statement s, the i-th of the list at `pos`, and the syncs placed before it."""
        p = pos + (i,)
        for sync in self.inserted.get(p, ()):
            for d in ds.values():
                self.effect(d, sync)
        loads = self.floads.get(id(s))
        if loads is None:
            loads = self.floads[id(s)] = _floads_of(s)
        if loads:            # FLoad: scalar reads of UB inside the statement's float expressions
            self.access(ds, p, Pipe.S, [(r, 1) for r in loads], [], scope)
        return self.stmt(ds, s, p, scope)

    def stmt(self, ds: dict, s, pos, scope) -> dict:  # noqa: C901 - one case per node type
        if type(s) is kir.Vec:       # the commonest statement first
            self.vec(ds, s, pos, scope)
            return ds
        if isinstance(s, kir.For):   # its variable: a known constant per unrolled iteration, else unknown
            hidden = self.env.pop(s.var, None)
            try:
                return self.loop(ds, s, pos, scope)
            finally:
                if hidden is not None:
                    self.env[s.var] = hidden
                else:
                    self.env.pop(s.var, None)
        if isinstance(s, (kir.Let, kir.Assign)):   # a name (re)bound at run time is no unrolled loop's value here
            self.env.pop(s.name, None)
            return ds
        return self.simple(ds, s, pos, scope)

    def loop(self, ds: dict, s: kir.For, pos, scope) -> dict:
        """A For statement: unrolled (UNROLL, its body never assigns its variable), one pass (disjoint) or to the
        fixed point of its head state."""
        lo, hi, step = self.cv(s.lo), self.cv(s.hi), self.cv(s.step)
        if None not in (lo, hi, step) and step > 0 and len(range(lo, hi + int(s.inclusive), step)) <= UNROLL \
                and not any(isinstance(x, kir.Assign) and x.name == s.var for x in kir.walk(s.body)):
            for v in range(lo, hi + int(s.inclusive), step):
                self.env[s.var] = v
                ds = self.block(ds, s.body, pos + ("b",), dict(scope))
            return ds
        runs = s.nonempty or (lo is not None and hi is not None and (lo <= hi if s.inclusive else lo < hi))
        if s.disjoint:   # no dependence between iterations: one pass over the body
            out = self.block({k: d.copy() for k, d in ds.items()}, s.body, pos + ("b",), dict(scope))
            if runs:
                return out
            return _join(out, ds)
        head = ds
        for _ in range(64):
            out = self.block({k: d.copy() for k, d in head.items()}, s.body, pos + ("b",), dict(scope))
            end = self.mark(out, s, pos) if s.apart else out
            if _covers(head, end):   # the join would equal the head: the fixed point (its join is not built)
                break
            head = _join(head, end)
        else:
            raise kir.IRError("the dependency analysis found no fixed point for a loop", s)
        if runs:
            head = out        # runs at least once: the state after an iteration from the fixed point
        return self.unmark(head, pos) if s.apart else head

    def _remap(self, ds: dict, fn) -> dict:
        """ds with every record and token access a replaced by fn(a) (or kept when fn gives None); a record met
        twice keeps the pipes it is ordered before on both."""
        out = {}
        for key, d in ds.items():
            recs: dict = {}
            for a, bits in d.records.items():
                b = fn(a) or a
                recs[b] = bits if b not in recs else recs[b] & bits
            nd = _D(recs, d.queues, {t: frozenset(fn(a) or a for a in v) for t, v in d.tokens.items()}, d.binds,
                    d.facts)
            out[key] = nd
        return out

    def _with_mark(self, a: Access, mark: tuple) -> Access:
        r = a.region
        key = (a.pos, a.bit, a.write, (r.base, r.lo, r.hi), mark, a.unit)   # intern's key when mark is ()
        got = self.accesses.get(key)
        if got is None:
            got = self.accesses[key] = Access(a.pos, a.pipe, a.write, replace(r, mark=mark), a.unit, a.bit)
        return got

    def mark(self, ds: dict, s: kir.For, pos: tuple) -> dict:
        """The state an iteration of loop s (at pos) leaves to the next: each record on a base of the loop's `apart`
        tensors marked as an earlier iteration's (Region.mark), the lowering's claim being that every iteration
        touches its own bytes of those bases. A record from before the loop is marked too, soundly: the state
        entering the loop stays in the loop head's join unmarked, so every iteration's accesses are checked against
        it, and an access of an iteration to such a base covers the base to the analysis (its offset is the
        iteration's row, not a constant)."""
        out = {}
        for key, d in ds.items():
            named = {b[0] for v, b in d.binds.items() if v.split("[")[0] in s.apart}
            # a buffer another variable of the loop's function also views is not the named tensors' alone: its records
            # stay unmarked (a called method's tensor parameter, `method.param`, is the view its caller passed)
            bases = named - {b[0] for v, b in d.binds.items() if v.split("[")[0] not in s.apart and "." not in v}
            out.update(self._remap({key: d}, lambda a: self._with_mark(a, pos) if (
                not a.region.mark and a.region.base in bases) else None))
        return out

    def unmark(self, ds: dict, pos: tuple) -> dict:
        """ds with the marks of the loop at pos removed (after the loop every access may meet those bytes)."""
        return self._remap(ds, lambda a: self._with_mark(a, ()) if a.region.mark == pos else None)

    def simple(self, ds: dict, s, pos, scope) -> dict:  # noqa: C901 - one case per node type
        """Every statement but a For, a Let and an Assign (stmt). `c`: the node class s is an instance of
        (_node_class: the cases test it by identity, in their order of isinstance tests)."""
        c = _NODE_CLASS.get(type(s)) or _node_class(type(s))
        if c is kir.Scope:
            return self.block(ds, s.body, pos + ("s",), dict(scope))
        if c is kir.CoreIf:   # runs on one core kind only: an If whose other branch is empty
            outer, self.unit = self.unit, s.unit
            body = self.block({k: d.copy() for k, d in ds.items()}, s.body, pos + ("c",), dict(scope))
            self.unit = outer
            return _join(body, ds)
        if c is kir.Nd2Nz:
            self.access(ds, pos, Pipe.MTE2, [(s.src, None)], [(s.dst, None)], scope)
            return ds
        if (c is kir.LoadData or c is kir.LoadBias):
            self.access(ds, pos, Pipe.MTE1, [(s.src, None)], [(s.dst, None)], scope)
            return ds
        if c is kir.Mmad:   # reads C too unless provably initialising it; the bias-table row
            acc = [] if not s.init else [(s.dst, None)]
            acc += [(s.bias, None)] if s.bias is not None else []
            self.access(ds, pos, Pipe.M, [(s.a, None), (s.b, None)] + acc, [(s.dst, None)], scope)
            return ds
        if c is kir.Fixpipe:
            self.access(ds, pos, Pipe.FIX, [(s.src, None)], [(s.dst, None)], scope)
            return ds
        if (c is kir.CrossCoreSetFlag or c is kir.CrossCoreWaitFlag):
            return ds                   # they order cores, not this core's pipes (EMU.md)
        if c is kir.Verbatim:
            raise kir.IRError("the dependency pass needs Kernel IR throughout; C++ text is opaque", s)
        if c is kir.If:
            lits = {m: v for m, v in kir.presence_literals(s.cond).items() if m in self.split}
            if lits:   # a presence guard of a queue's protocol: each disjunct runs the branches its facts allow
                return self.presence_if(ds, s, pos, scope, lits)
            a = self.block({k: d.copy() for k, d in ds.items()}, s.then, pos + ("t",), dict(scope))
            b = self.block({k: d.copy() for k, d in ds.items()}, s.orelse, pos + ("e",), dict(scope))
            return _join(a, b)
        if c is kir.InitBuffer:
            b = self.locals[s.buf]
            out = {}
            for d in ds.values():
                d.own()
                if b.queue:
                    d.queues[s.buf] = ((False,) * s.num, 0, ())
                out.setdefault(d.sig(), []).append(d)
            return _merge(out)
        if c is kir.Get:
            sz = self.size(s.dtype)
            off = self.cv(s.offset)
            name = scope.get(s.var, s.var)
            slot = self.cv(s.slot) if s.slot is not None else None
            if s.slot is not None:
                name = f"{name}[{slot if slot is not None else '?'}]"
            for d in ds.values():
                d.own()
                if slot is not None:   # slot k of a member tensor array: bytes of its own (docstring), slot 0 too
                    d.binds[name] = (("b", s.buf, "slot", s.var, slot), 0, s.dtype)
                else:
                    d.binds[name] = (("b", s.buf), None if off is None or sz is None else off * sz, s.dtype)
            return ds
        if c is kir.View:
            for d in ds.values():
                d.own()
                base, start, dt = self.bind_of(d, s.src, scope)
                if s.src.part is not None:   # a view of a part: a base of its own (region), offsets inside unknown
                    pb = self.region(d, s.src, scope, None)[0]
                    if pb[-3:-2] == ("part",):
                        base, start = pb, None
                d.binds[scope.get(s.var, s.var)] = (base, start, dt)
            return ds
        if c is kir.Alloc:
            q = self.locals[s.queue]
            out = {}
            for d in ds.values():
                d.own()
                in_use, nxt, queued = d.queues[s.queue]
                n = len(in_use)
                blk = next(((nxt + j) % n for j in range(n) if not in_use[(nxt + j) % n]), None)
                if blk is None:
                    raise kir.IRError(f"AllocTensor of {s.queue} with every block in use", s)
                d.queues[s.queue] = (in_use[:blk] + (True,) + in_use[blk + 1:], (blk + 1) % n, queued)
                if q.pos in _PROD:
                    d.grant(d.tokens.get(("free", s.queue, blk), frozenset()), _PROD[q.pos])
                d.binds[scope.get(s.var, s.var)] = (("q", s.queue, blk), 0, s.dtype)
                out.setdefault(d.sig(), []).append(d)
            return _merge(out)
        if c is kir.EnQue:
            q = self.locals[s.queue]
            out = {}
            for d in ds.values():
                d.own()
                base = d.binds.get(scope.get(s.var, s.var), (_UNKNOWN,))[0]
                blk = base[2] if base[0] == "q" else None
                in_use, nxt, queued = d.queues[s.queue]
                d.queues[s.queue] = (in_use, nxt, queued + (blk,))
                if q.pos in _PROD:
                    d.tokens[("enq", s.queue, blk)] = d.known(_PROD[q.pos])
                out.setdefault(d.sig(), []).append(d)
            return _merge(out)
        if c is kir.DeQue:
            q = self.locals[s.queue]
            out = {}
            for d in ds.values():
                d.own()
                in_use, nxt, queued = d.queues[s.queue]
                blk, rest = (queued[0], queued[1:]) if queued else (None, ())
                d.queues[s.queue] = (in_use, nxt, rest)
                if q.pos in _CONS:
                    d.grant(d.tokens.pop(("enq", s.queue, blk), frozenset()), _CONS[q.pos])
                d.binds[scope.get(s.var, s.var)] = (("q", s.queue, blk) if blk is not None else _UNKNOWN, 0,
                                                    s.dtype)
                out.setdefault(d.sig(), []).append(d)
            return _merge(out)
        if c is kir.Free:
            q = self.locals[s.queue]
            out = {}
            for d in ds.values():
                d.own()
                base = d.binds.get(scope.get(s.var, s.var), (_UNKNOWN,))[0]
                in_use, nxt, queued = d.queues[s.queue]
                if base[0] == "q":
                    blk = base[2]
                    d.queues[s.queue] = (in_use[:blk] + (False,) + in_use[blk + 1:], nxt, queued)
                    if q.pos in _CONS:
                        d.tokens[("free", s.queue, blk)] = d.known(_CONS[q.pos])
                out.setdefault(d.sig(), []).append(d)
            return _merge(out)
        if c is kir.Copy:
            if isinstance(s.src, kir.GmView):
                self.access(ds, pos, Pipe.MTE2, [(s.src, None)], [(s.dst, self.copy_elems(s, ds, scope))], scope)
            else:
                self.access(ds, pos, Pipe.MTE3, [(s.src, self.copy_elems(s, ds, scope))], [(s.dst, None)], scope)
            return ds
        if c is kir.Vec:
            self.vec(ds, s, pos, scope)
            return ds
        if c is kir.GetValue:
            self.access(ds, pos, Pipe.S, [(s.src, 1)], [], scope)
            return ds
        if c is kir.SetValue:
            self.access(ds, pos, Pipe.S, [], [(s.dst, 1)], scope)
            return ds
        if c is kir.TrapUnless:   # scalar values only
            return ds
        if c in _SYNC_TYPES:
            for d in ds.values():
                self.effect(d, s)
            return ds
        if c is kir.SyncAll:
            for d in ds.values():
                d.barrier(Pipe.ALL)
            return ds
        if c is kir.Call:
            m = self.methods[s.method]
            if m.extern:
                raise kir.IRError(f"the dependency pass needs Kernel IR throughout; {s.method} is C++ text", s)
            inner, gms = {}, {}
            for p, a in zip(m.params, s.args):
                if p.kind == "tensor":
                    for d in ds.values():
                        d.own()
                        d.binds[f"{s.method}.{p.name}"] = self.bind_of(d, a, scope)
                    inner[p.name] = f"{s.method}.{p.name}"
                elif p.kind == "gm" and isinstance(a, kir.GmView):
                    gms[p.name] = self.gm_region(a).base
            env = {p.name: self.cv(a) for p, a in zip(m.params, s.args) if p.kind == "int"}
            outer_gm, self.gm_scope = self.gm_scope, gms
            outer_env, self.env = self.env, {k: v for k, v in env.items() if v is not None}   # the callee's names
            outer_stack, self.stack = self.stack, self.stack + (pos,)
            outer_types = self.types   # a template method's type parameters: its call's arguments
            self.types = {**self.types, **{p: self.types.get(a, a) for p, a in zip(m.tparams, s.targs)}}
            try:
                # a trial: the body's list, entered in a state the base's walk met, ends as it did (_Trials)
                return self.block(ds, m.body, (s.method,), inner)
            finally:
                self.gm_scope, self.env, self.stack, self.types = outer_gm, outer_env, outer_stack, outer_types
        return ds

    def copy_elems(self, s: kir.Copy, ds, scope):
        """Elements of the UB side a copy touches when constant (padded bursts for GM -> UB), else None."""
        n, ln = self.cv(s.block_count), self.cv(s.block_len)
        gap = self.cv(s.dst_stride if isinstance(s.src, kir.GmView) else s.src_stride)
        ub = s.dst if isinstance(s.src, kir.GmView) else s.src
        dt = None
        for d in ds.values():
            dt = self.bind_of(d, ub, scope)[2]
        sz = self.size(dt) if dt else None
        if None in (n, ln, gap, sz) or n == 0:
            return None
        per = -(-ln // BLOCK) * BLOCK + gap * BLOCK
        span = (n - 1) * per + (-(-ln // BLOCK) * BLOCK if isinstance(s.src, kir.GmView) else ln)
        return -(-span // sz)

    def vec(self, ds, s: kir.Vec, pos, scope):
        got = self.vecs.get(id(s))
        if got is None:   # what the instruction reads and writes: a statement is frozen, so once per class
            got = self.vecs[id(s)] = (s, *_vec_operands(s))
        _s, d0, args, count, reads, writes = got
        if self.cv(count) == 0 if count is not None else False:
            return
        if d0.scalar_head:   # dst's first 32-B block written by the scalar unit, then the instruction's own S -> V
            sz = self.size(self._dtypes(ds, args, scope, ("dst",))[0])
            self.access(ds, pos, Pipe.S, [], [(args["dst"], BLOCK // sz if sz else None)], scope)
            for d in ds.values():
                d.grant(d.known(Pipe.S), Pipe.V)
        self.access(ds, pos, Pipe.V, reads, writes, scope)
        if s.op in (Op.CAST_TO, Op.CAST_FROM):   # the helper's own barrier when both sides are fp32
            both = all(self.types.get(t, t) == "float" for t in self._dtypes(ds, args, scope))
            if both:
                for d in ds.values():
                    d.barrier(Pipe.V)

    def _dtypes(self, ds, args, scope, names=("dst", "src")):
        out = []
        for d in ds.values():
            out += [self.bind_of(d, args[n], scope)[2] for n in names]
        return out

    def presence_if(self, ds: dict, s: kir.If, pos, scope, lits: dict) -> dict:
        """If `s` testing presence literals `lits` (of self.split members) on each disjunct: only the then-branch
        where the disjunct's facts make every literal true and the condition has no other term, only the
        else-branch where a fact contradicts one; else both, the then-branch's disjuncts learning `lits`, the
        else-branch's one disjunct per assignment of the literals' unknown members that makes one of them false
        (when the condition has no other term; a presence is fixed from Init on: paths of different presences never
        meet). Disjuncts that come to one key (a path that learns the literals here and one that knew them) enter
        the branch joined, as every statement's output is (_merge): neither path's unordered accesses are lost."""
        only = len(lits) == len(s.cond)
        then_g, else_g = {}, {}
        then_add = lambda d: then_g.setdefault(d.sig(), []).append(d)   # noqa: E731
        else_add = lambda d: else_g.setdefault(d.sig(), []).append(d)   # noqa: E731
        for d in ds.values():
            facts = dict(d.facts)
            if any(m in facts and facts[m] != v for m, v in lits.items()):
                else_add(d.copy())
                continue
            if only and all(facts.get(m) == v for m, v in lits.items()):
                then_add(d.copy())
                continue
            t = d.copy()
            t.facts = frozenset({**facts, **lits}.items())
            then_add(t)
            if not only:   # another term may make the condition false: the else-branch learns nothing
                else_add(d.copy())
                continue
            # the else-branch: one disjunct per assignment of the unknown members that makes a literal false
            unknown = [m for m in lits if m not in facts]
            for vals in itertools.product((True, False), repeat=len(unknown)):
                got = {**facts, **dict(zip(unknown, vals))}
                if all(got[m] == v for m, v in lits.items()):
                    continue
                e = d.copy()
                e.facts = frozenset(got.items())
                else_add(e)
        then_in, else_in = _merge(then_g), _merge(else_g)
        a = self.block(then_in, s.then, pos + ("t",), dict(scope)) if then_in else {}
        b = self.block(else_in, s.orelse, pos + ("e",), dict(scope)) if else_in else {}
        return _join(a, b)

    def run(self):
        ds = {(): _D()}
        ds = self.block(ds, self.k.init, ("Init",), {})
        self.block(ds, self.k.process, ("Process",), {})


def _same(a, b) -> bool:
    """Whether sync statements a and b do the same: a barrier of one pipe, or a flag of one event and id."""
    if isinstance(a, kir.Barrier) or isinstance(b, kir.Barrier):
        return type(a) is type(b) and a.pipe is b.pipe
    return type(a) is type(b) and (a.event, a.id) == (b.event, b.id)


def _holds(lst: list, sync: tuple) -> bool:
    """Whether the syncs `lst` placed before one position hold `sync` (a barrier, or a SetFlag with its WaitFlag
    right after it) already, anywhere in the list. A sync the analysis places orders the earlier access's own pipe
    Q before the later one's P (_Analysis.sync_for): a PipeBarrier<Q> or a SetFlag<Q_P> / WaitFlag<Q_P> pair
    orders every access Q issued before the position, whichever syncs stand beside it (none of them issues work on
    Q), so a second copy in the same list orders nothing the first does not. The syncs of the same position placed
    for different disjuncts of one statement come interleaved (V_S, MTE2_S for one disjunct, then the same two
    for the next): a test of the list's end alone placed both twice, and the prune's trials removed the copies,
    each a walk of the program to its end (docs/design.md "Kernel IR interpreter and synchronisation by
    dependency")."""
    n = len(sync)
    return any(all(_same(x, y) for x, y in zip(lst[j:j + n], sync)) for j in range(len(lst) - n + 1))


def _outside_loops(earlier: tuple, later: tuple, k: kir.KernelClass) -> tuple:
    """Where the sync ordering `earlier` before `later` goes: before the outermost loop that holds `later` but not
    `earlier` (it is issued once, not every iteration; it still precedes every access of the loop in program
    order), else right before `later`. Positions of different functions: right before `later`."""
    if earlier[0] != later[0]:
        return later
    n = 0
    while n < min(len(earlier), len(later)) and earlier[n] == later[n]:
        n += 1
    # later[:n] is the common prefix; later[n] the index, in the common list, of the statement holding `later`; the
    # outermost loop holding `later` may also lie inside an If or a Scope holding it there (a branch's loop): the
    # sync goes before that loop, in the branch (every path to `later` passes it, still after `earlier`)
    j = n
    while j < len(later) - 1:
        if isinstance(later[j], int):
            holder = _body_at(k, later[:j])[later[j]]
            if isinstance(holder, kir.For):
                return later[:j + 1]
            if not isinstance(holder, (kir.If, kir.Scope)):
                return later
        elif later[j] not in ("t", "e", "s"):
            return later
        j += 1
    return later


def _floads_of(s) -> list:
    """The UB elements the float expressions of a simple statement read on the scalar unit (kir.FLoad)."""
    fload = getattr(kir, "FLoad", None)
    if fload is None or isinstance(s, (kir.For, kir.If, kir.Scope)):
        return []
    out: list = []

    def f(x):
        if isinstance(x, fload):
            if isinstance(x.src, kir.Ref):   # a GM element read (GmView) is not a UB access
                out.append(x.src)
        elif isinstance(x, kir.FExpr):
            for c in kir.fexpr_children(x):
                f(c)
        elif isinstance(x, tuple):
            for y in x:
                f(y)

    for v in vars(s).values():
        f(v)
    return out


def _shape(ds: dict) -> frozenset:
    """What a state's equal states share, cheap to hash: each disjunct's key and its numbers of records, tokens and
    bindings."""
    return frozenset((k, len(d.records), len(d.tokens), len(d.binds)) for k, d in ds.items())


def _same_states(a: dict, b: dict) -> bool:
    """Whether states a and b are equal: the same disjunct keys, each disjunct's records, queues,
    tokens, bindings and facts equal (dictionaries compare regardless of order)."""
    if a.keys() != b.keys():
        return False
    for key, d in a.items():
        e = b[key]
        if d.records != e.records or d.queues != e.queues or d.tokens != e.tokens or d.binds != e.binds \
                or d.facts != e.facts:
            return False
    return True


def _covers(a: dict, b: dict) -> bool:
    """Whether _same_states(_join(a, b), a), decided without building the join: b's disjunct keys are a's, and in
    each of b's disjuncts every record, token and binding of b leaves a's unchanged in _D.join (a record a has with
    the pipes of its intersection, a token a has with the value join computes, a binding a has or the unknown base
    a has already); queues and facts are a's in the join."""
    if not b.keys() <= a.keys():
        return False
    for key, o in b.items():
        d = a[key]
        recs = d.records
        if o.records != recs:
            for x, s2 in o.records.items():
                s1 = recs.get(x)
                if s1 is None or s1 & s2 != s1:
                    return False
        toks = d.tokens
        if o.tokens != toks:
            for t, t2 in o.tokens.items():
                t1 = toks.get(t)
                if t1 is None:
                    return False
                if t1 != t2 and (t1 & t2) | t1.difference(o.records) | t2.difference(recs) != t1:
                    return False
        binds = d.binds
        if o.binds != binds:
            for v, b2 in o.binds.items():
                b1 = binds.get(v)
                if b1 is None or (b1 != b2 and b1 != (_UNKNOWN, None, b1[2])):
                    return False
    return True


def _join(a: dict, b: dict) -> dict:
    out = {k: d.join(b[k]) if k in b else d.copy() for k, d in a.items()}
    for k, d in b.items():
        if k not in out:
            out[k] = d.copy()
    return out


def _merge(groups: dict) -> dict:
    out = {}
    for k, lst in groups.items():
        d = lst[0]
        for o in lst[1:]:
            d = d.join(o)
        out[k] = d
    return out


# ------------------------------------------------------------------------------------------------ public
def _map_bodies(k: kir.KernelClass, fn) -> kir.KernelClass:
    """k with every body rewritten by fn(stmts, pos) -> stmts (pos as the analysis numbers statements)."""
    def walk(stmts, pos):
        stmts = fn(stmts, pos)
        res = []
        for i, s in stmts:
            p = pos + (i,) if i is not None else None
            if isinstance(s, kir.For) and p is not None:
                s = replace(s, body=walk(s.body, p + ("b",)))
            elif isinstance(s, kir.If) and p is not None:
                s = replace(s, then=walk(s.then, p + ("t",)), orelse=walk(s.orelse, p + ("e",)))
            elif isinstance(s, kir.Scope) and p is not None:
                s = replace(s, body=walk(s.body, p + ("s",)))
            elif isinstance(s, kir.CoreIf) and p is not None:
                s = replace(s, body=walk(s.body, p + ("c",)))
            res.append(s)
        return tuple(res)

    return replace(k, init=walk(k.init, ("Init",)), process=walk(k.process, ("Process",)),
                   methods=tuple(replace(m, body=walk(m.body, (m.name,))) if not m.extern else m
                                 for m in k.methods))


def strip_syncs(k: kir.KernelClass) -> kir.KernelClass:
    """k without any Barrier, SetFlag or WaitFlag (queue hand-offs and SyncAll stay): the input of the pass. A
    PipeBarrier<PIPE_ALL> right before a SyncAll stays too: it is the cross-core exchange's drain (this core's GM
    writes complete before any other core passes the SyncAll), a dependency between cores this in-core analysis
    does not see."""
    def fn(stmts, pos):
        keep = [x for j, x in enumerate(stmts) if not isinstance(x, _SYNC_TYPES) or
                (isinstance(x, kir.Barrier) and x.pipe is Pipe.ALL and j + 1 < len(stmts)
                 and isinstance(stmts[j + 1], kir.SyncAll))]
        return list(enumerate(keep))
    return _map_bodies(k, fn)


def _with(k: kir.KernelClass, inserted: dict, pooled: bool = False) -> kir.KernelClass:
    """k with the syncs of `inserted` placed; `pooled`: each placed flag pair whose set and wait lie in one statement
    list takes its event id from the TPipe's pool at run time (`_pool_ids`)."""
    count: dict = {}
    fixed = {e for e, _ in _used_flags(k)} if pooled else set()

    def fn(stmts, pos):
        out = []
        for i, s in enumerate(stmts):
            out += [(None, x) for x in inserted.get(pos + (i,), ())]
            out.append((i, s))
        out += [(None, x) for x in inserted.get(pos + (len(stmts),), ())]   # the list's end (_sink)
        return _pool_ids(out, pos[0], count, fixed) if pooled else out
    return _map_bodies(k, fn)


def _pool_ids(out: list, func: str, count: dict, fixed: set = frozenset()) -> list:
    """The (index, statement) list `out` of one statement list with each placed flag pair (index None) given a run
    time event id (kir.SetFlag.pool): "fetch" (GetTPipePtr()->FetchEventID) when the wait follows the set at once,
    "alloc" (AllocEventID before the set, ReleaseEventID after the wait) when work lies between. A fixed id may be
    one a TQue holds at that point (its EnQue / FreeTensor took the pool's lowest free id, docs/reference/ascendc.md
    §1.5), and the set would be lost; the pool hands out only free ones. The pass's ids stay as slots (the
    analysis pairs by them); each pair's var is numbered in its function (`count`: function -> next number). The
    events in `fixed` (ones the input's own flags use with fixed ids, which the pool does not know of) keep the
    pass's fixed ids, which avoid the input's."""
    out = list(out)
    for j, (i, x) in enumerate(out):
        if i is not None or not isinstance(x, kir.SetFlag) or x.pool or x.event in fixed:
            continue
        m = next((m for m in range(j + 1, len(out)) if out[m][0] is None and isinstance(out[m][1], kir.WaitFlag)
                  and not out[m][1].pool and (out[m][1].event, out[m][1].id) == (x.event, x.id)), None)
        if m is None:
            continue
        n = count.get(func, 0)
        count[func] = n + 1
        var = f"{kir.EVENT_VAR_PREFIX}{n}"   # short: the pair's line keeps its comment (the printer's width)
        pool = "fetch" if m == j + 1 else "alloc"
        out[j] = (None, replace(x, pool=pool, var=var))
        out[m] = (None, replace(out[m][1], pool=pool, var=var))
    return out


def _used_flags(k: kir.KernelClass) -> set:
    used = set()
    for body in [k.init, k.process] + [m.body for m in k.methods]:
        for s in kir.walk(body):
            if isinstance(s, (kir.SetFlag, kir.WaitFlag)) and not s.pool:
                used.add((s.event, s.id))
    return used


def conflicts(k: kir.KernelClass, types: dict | None = None) -> list:
    """The unordered conflicting access pairs of k under the ordering model (module docstring): empty when every
    dependency is synchronised. types: {template parameter: element type} (unknown sizes make regions
    conservative)."""
    a = _Analysis(k, {}, False, dict(types or {}), _used_flags(k))
    a.run()
    seen, out = set(), []
    for c in a.conflicts:
        key = (c.earlier.pos, c.earlier.write, c.later.pos, c.later.write, c.later.region.base)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


STATE_EVERY = 8
"""A trial's tables (_Trials.states) hold the state before every STATE_EVERY-th statement of a list and before and
after its end only: a trial starts from the latest one at or before its first change and ends at the first one
after its last change where its state is the base's (_Analysis.block), walking up to STATE_EVERY - 1 statements more
than with a state before every statement, against a copy of every disjunct per statement saved (the 165 classes of
the examples and derived specs: 149.1 -> 133.0 s of placement, every placement identical; on five of them, each
run against a state before every statement in the same process, 8 took 0.83 of its time, 4 0.86, 1000 0.87)."""
PLACE_ROUNDS = 100
"""Rounds of the placement's analysis before `place_syncs` gives up (each round adds the syncs its conflicts need;
a fixed point comes in a few)."""
OUTSIDE_ROUNDS = 20
"""Rounds of the analysis `_placed_outside` runs for the syncs a hoisted SetFlag leaves outside its loop."""
CALL_DEPTH = 4
"""How deep `_issues_on` follows method calls into their bodies."""
EVENT_IDS = 8
"""Event ids of one HardEvent a hoisted pair may take (0..7; docs/reference/ascendc.md §1.5)."""


class Hoist(enum.Enum):
    """Which flag pairs `place_syncs` moves up (its SetFlag as early in its list as the analysis allows, `_hoist`):
    NONE none, ALL every pair, LOOPS only the pairs inside the body of a software-pipelined loop (kir.For.pipelined)
    right after work of the SetFlag's pipe (the prefetch the wait would otherwise cover)."""
    NONE = "none"
    ALL = "all"
    LOOPS = "loops"


def place_syncs(k: kir.KernelClass, types: dict | None = None, prune: bool = True, hoist: Hoist = Hoist.ALL,
                sink: bool = True) -> tuple:
    """The pass: (k with syncs placed, {position: [sync statements placed before it]}). Existing syncs and queue
    hand-offs of k are honoured (give `strip_syncs(k)` to place all). A position is (function name, index, ...)
    with "b" / "t" / "e" / "s" / "c" stepping into a loop body / then / else / scope / core branch; the index
    len(list) is the list's end, after its last statement. prune removes each placed sync the analysis shows
    redundant; sink moves a sync that follows an If into the branch holding every access it orders (_sink); hoist (`Hoist`) moves each flag pair's SetFlag as early in its list as
    the analysis allows (Hoist.LOOPS: only the pairs inside a software-pipelined loop's body, kir.For.pipelined,
    right after work of the SetFlag's pipe, which the wait would otherwise cover: one analysis per step is too slow
    for every pair of the rows classes at generation). Raises kir.IRError when k is malformed (the verifier) or a loop has no fixed point, TypeError when hoist is not a Hoist."""
    if not isinstance(hoist, Hoist):   # a bool or string of the old signature would read as "hoist every pair"
        raise TypeError(f"place_syncs: hoist must be a kir_sync.Hoist, not {hoist!r}")
    kir.verify(k)
    with _collector_paused():
        return _place(k, types, prune, hoist, sink)


@contextlib.contextmanager
def _collector_paused():
    """Python's cyclic garbage collector off for the block (on again after it, when it was on). The analysis makes
    millions of dictionaries and tuples that live until the placement ends (the trials' states) and no reference
    cycle: with the collector on, each full collection walks every one of them again -- on five classes of the
    examples (GroupNorm, AddRmsNormQuant, CrossEntropyLoss and four QuantBatchMatmulV3 cube classes, run
    interleaved in one process) 24.3 s of place_syncs with the default thresholds, 13.3 s with the collector off.
    What a block frees by reference counting is freed at once either way."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _place(k: kir.KernelClass, types, prune: bool, hoist: "Hoist", sink: bool) -> tuple:
    """place_syncs on a verified class, the collector paused (place_syncs)."""
    types = dict(types or {})
    used = _used_flags(k)
    inserted: dict = {}
    for r in range(PLACE_ROUNDS):
        # from the second round on (the first one places what most classes need), the program is checked first,
        # recording its states for the trials (_Trials.start); a round follows only when it has a conflict
        trials = _Trials(k)
        if r:
            # a round that places nothing is a walk that meets no conflict: _clean's walk says whether there is one,
            # skipping a list entered again in a state it met (_Trials.states) where a placing walk, which records
            # each access's call path, goes through it again; the placing round follows only when there is one
            trials.base = inserted
            if _clean(k, inserted, types, used, trials):
                break
            trials = _Trials(k)
            trials.base = inserted
        a = _Analysis(k, inserted, True, types, used, trials, () if r else None)
        a.run()
        if a.new == 0:
            if a.dup:   # every sync was there from the start of this run and a conflict remains
                raise kir.IRError("the dependency pass placed a sync that does not order its conflict")
            break
    else:
        raise kir.IRError("the dependency pass did not converge")
    if not r:
        trials = _Trials(k)
    if prune:
        inserted = _prune(k, inserted, types, used, trials)
    if sink:
        inserted = _sink(k, inserted, types, used, trials)
    if hoist is not Hoist.NONE:
        inserted = _hoist(k, inserted, types, used, trials, only_loops=hoist is Hoist.LOOPS)
    out = _with(k, inserted, pooled=True)
    kir.verify(out)
    return out, inserted


_SOURCES = ("kernel/kir_sync.py", "kernel/kir.py", "kernel/isa.py", "ir/dims.py")
"""The modules the placement's result depends on (the analysis, the nodes and their text, the instruction table,
the integer expressions): the memo's key covers their bytes."""


@functools.lru_cache(maxsize=None)
def _code_digest() -> str:
    h = hashlib.sha256()
    root = Path(__file__).resolve().parent.parent
    for rel in _SOURCES:
        h.update(rel.encode())
        try:
            h.update((root / rel).read_bytes())
        except OSError:   # no source beside the module (a bytecode-only install): its name and opgen's version
            from importlib.metadata import PackageNotFoundError, version
            try:
                h.update(version("opgen").encode())
            except PackageNotFoundError:
                h.update(b"?")
    return h.hexdigest()


def _nsyncs(k: kir.KernelClass) -> int:
    return sum(isinstance(s, _SYNC_TYPES) for body in [k.init, k.process] + [m.body for m in k.methods]
               for s in kir.walk(body))


def memo_dir() -> Path:
    """Where `place_syncs_memo` keeps its entries: $OPGEN_SYNC_DIR, else `syncs/` of the cache root
    (opgen.paths.cache_root)."""
    env = os.environ.get("OPGEN_SYNC_DIR")
    return Path(env) if env else cache_root() / "syncs"


# -- the memo's key: the class up to docs, comments and a consistent renaming
_NAME_FIELDS = kir.NAME_FIELDS
"""The fields that hold a name the class defines or refers to (a str, None, or a tuple of strs): the class, its
tiling struct, GM_ADDR arguments, tiling fields, methods, parameters, GM tensors, buffers, tensor variables, member
scalars, tables, Let / FLet / loop / result variables, struct variables. The analysis reads a name only as an
identity (a dictionary key, an equality), except the function names' order (_prune and _hoist visit positions in
text order, the function name first), which the key holds apart, and a struct field `p.f[N]`, whose variable `p`
alone is renamed (the analysis tells a struct's GM field by its dot). Template parameters are numbered apart
(kir.TYPE_FIELDS); every other string stays in the key as it is: element types, operand names, modes, struct
declarations and field names, Verbatim lines, the special symbols (blockIdx, ...)."""




class _Name:
    """A canonical name in the key: the i-th name (kind "n") or template parameter (kind "t") of the class in order
    of first appearance, plus the field path of a struct field (`.f[N]`). Its repr is no Python literal, so it
    equals no string kept as it is."""

    __slots__ = ("kind", "i", "rest")

    def __init__(self, kind: str, i: int, rest: str = ""):
        self.kind, self.i, self.rest = kind, i, rest

    def __repr__(self):
        return f"§{self.kind}{self.i}{self.rest}"


class _Canon:
    """The canonical form of class k (`tree`): docs (every `doc` field), comment texts and the comments of the
    namespace constants (KernelClass.consts: they may name the spec's inputs) dropped (a Comment stays
    as a placeholder: the memo stores positions, which count it); every name (_NAME_FIELDS) replaced by its number
    in order of first appearance, the same name by the same number throughout the class (`num`; `names` maps a
    number back to the class's own name); the template parameters the class and its methods declare likewise, in
    every type field (kir.TYPE_FIELDS) and in `types`, apart from the names (the analysis binds them to element types:
    `types`, a call's template arguments) -- a concrete element type stays itself wherever it is. So two classes
    get one tree exactly when one is the other with its names and template parameters renamed one-to-one, which
    the analysis cannot tell apart but for the functions' order (_memo_key)."""

    _CONCRETE = frozenset(kir.ELEM_BYTES) | frozenset(kir.SCALAR_CTYPES) | {"void"}

    def __init__(self, k: kir.KernelClass):
        self.num: dict = {}
        self.names: list = []
        self.tparams = ({*k.tparams, *(p for m in k.methods for p in m.tparams)}) - self._CONCRETE
        self.tnum: dict = {}

    def name(self, s):
        """The canonical form of name `s` (a str; None stays None)."""
        if not isinstance(s, str):
            return self.tree(s)
        head, dot, rest = s.partition(".")
        if head in kir._SPECIAL:
            return s
        i = self.num.get(head)
        if i is None:
            i = self.num[head] = len(self.names)
            self.names.append(head)
        return _Name("n", i, dot + rest)

    def type(self, s):
        """The canonical form of type `s` (a declared template parameter by number, anything else as it is)."""
        if not isinstance(s, str) or s not in self.tparams:
            return self.tree(s)
        return _Name("t", self.tnum.setdefault(s, len(self.tnum)))

    def tree(self, x):
        """Node `x` as nested tuples (its type's name, then its fields but docs, in declaration order)."""
        if isinstance(x, (str, int, float, enum.Enum)) or x is None:   # bool is an int
            return x
        if isinstance(x, (tuple, list)):
            return tuple(self.tree(a) for a in x)
        if isinstance(x, kir.Comment):
            return ("Comment",)
        if not dataclasses.is_dataclass(x) or isinstance(x, type):
            return ("?", type(x).__name__, repr(x))   # not a node type of the IR: as it prints
        names = _NAME_FIELDS.get(type(x), ())
        out: list = [type(x).__name__]
        for f in dataclasses.fields(x):
            if f.name == "doc":
                continue
            v = getattr(x, f.name)
            if f.name == "consts" and isinstance(x, kir.KernelClass):
                out.append(tuple((n, val) for n, val, _comment in v))   # a constant's comment may name inputs
                continue
            if f.name in names:
                fn = self.name
            elif f.name in kir.TYPE_FIELDS and not (isinstance(x, kir.Param) and x.kind == "struct"):
                fn = self.type
            else:
                out.append(self.tree(v))
                continue
            out.append(tuple(fn(a) for a in v) if isinstance(v, tuple) else fn(v))
        return tuple(out)


_FUNCS = ("Init", "Process")
"""The functions positions name that are no method (their names are the printer's, not the class's)."""


def _memo_key(k: kir.KernelClass, types: dict | None, prune, hoist) -> tuple:
    """(the memo key of placing k, its _Canon). The key covers the canonical class, the order of its functions'
    names (what _prune and _hoist visit first), the types, the options and the bytes of _SOURCES."""
    c = _Canon(k)
    tree = c.tree(k)
    funcs = sorted([*_FUNCS, *(m.name for m in k.methods)])
    order = [f if f in _FUNCS else c.name(f) for f in funcs]
    binds = sorted(repr((c.type(t), c.type(v))) for t, v in (types or {}).items())
    key = hashlib.sha256(json.dumps([_code_digest(), repr((tree, order)), binds, str(prune),
                                     hoist.value]).encode()).hexdigest()
    return key, c


_DOC_NAMED = ("GM field ", "GM ", "")
"""The shapes of a placed sync's doc (_why: "<what>: <why>", what = "GM <arg>", "GM field <p>.<f>", "<buffer>" or
"a buffer"): the prefix before the name it carries."""


def _doc_json(doc: str, c: _Canon):
    """A placed sync's doc for the memo: [prefix, name number, rest] when it names a name of the class (stored by
    number: a renamed class's hit prints its own name), else the text. Raises KeyError when the doc names something
    that is no name of the class (such an entry is not written: a hit would print it)."""
    what, sep, why = doc.partition(": ")
    if not sep or what in ("a buffer", f"GM {_GM_UNKNOWN[1]}") or what.startswith("GM <workspace"):
        return doc   # no name of the class (a workspace region's tag is the lowering's own word, kir.GmTensor)
    for pre in _DOC_NAMED:
        head, dot, rest = what[len(pre):].partition(".")
        if what.startswith(pre) and kir._IDENT.match(head) and (pre == "GM field ") == bool(dot):
            return [pre, c.num[head], dot + rest + sep + why]
    raise KeyError(doc)


def _nth(names: list, i) -> str:
    """Name number i of the class. Raises IndexError when it has none (a damaged entry)."""
    if not 0 <= int(i) < len(names):
        raise IndexError(i)
    return names[int(i)]


def _doc_of(v, names: list) -> str:
    if isinstance(v, str):
        return v
    pre, i, rest = v
    return f"{pre}{_nth(names, i)}{rest}"


def _sync_json(x, c: _Canon) -> list:
    if isinstance(x, kir.Barrier):
        return ["Barrier", x.pipe.name, _doc_json(x.doc, c)]
    return [type(x).__name__, x.src.name, x.dst.name, x.id, _doc_json(x.doc, c)]


def _sync_of(v: list, names: list):
    if v[0] == "Barrier":
        return kir.Barrier(Pipe[v[1]], _doc_of(v[2], names))
    cls = {"SetFlag": kir.SetFlag, "WaitFlag": kir.WaitFlag}[v[0]]
    return cls(Pipe[v[1]], Pipe[v[2]], int(v[3]), _doc_of(v[4], names))


def _pos_json(pos: tuple, c: _Canon) -> list:
    """A position for the memo: a method's name as its number (an int), Init / Process as they are."""
    return [pos[0] if pos[0] in _FUNCS else c.num[pos[0]], *pos[1:]]


def _pos_of(v, k: kir.KernelClass, names: list) -> tuple:
    """The position of k that memo position v names. Raises KeyError / IndexError when its method is none of
    k's."""
    f = v[0] if v[0] in _FUNCS else _nth(names, v[0])
    if f not in {m.name for m in k.methods if not m.extern} | set(_FUNCS):
        raise KeyError(f)
    return (f,) + tuple(x if isinstance(x, str) else int(x) for x in v[1:])


def place_syncs_memo(k: kir.KernelClass, types: dict | None = None, prune: bool | str = True,
                     hoist: Hoist = Hoist.ALL) -> tuple:
    """`place_syncs` memoised on disk (memo_dir(), one JSON file per key), so one kernel class is placed once
    however many processes build it (the test suite's workers, a regeneration). The key (_memo_key) is the sha256
    of the class up to docs, comment texts and a consistent renaming of its names (_Canon: a spec's edited comment
    or renamed inputs or operator place nothing again; the statements, their order and positions, every constant,
    element type and template argument count), the order of its functions' names, the types, the options and the
    bytes of the modules the result depends on (_SOURCES). An entry stores positions and the placed syncs' docs
    with the class's names by number, and a hit maps them to the names of the class at hand: its program is the
    one place_syncs gives that class, printed docs included. An entry is used only when it is a JSON object that
    names its key, every position is a function of the class, every sync lands on a statement and the program
    verifies; anything else is recomputed and rewritten. Like the generate cache (opgen.codegen.cache), it guards
    against damage, not against someone who rewrites an entry on purpose (a placement is not re-proved on reading:
    that costs an analysis in every process that builds the kernel). A miss takes the key's lock (_memo_lock) and
    reads again before placing, so processes that miss one key at once place it once. Raises as place_syncs."""
    key, c = _memo_key(k, types, prune, hoist)
    path = memo_dir() / f"{key}.json"
    got = _memo_read(path, key, k, c)
    if got is not None:
        return got
    with _memo_lock(path):   # another process placing this class: wait for it and read its entry
        got = _memo_read(path, key, k, c)
        if got is not None:
            return got
        out, inserted = place_syncs(k, types, prune, hoist)
        _memo_write(path, key, c, inserted)
    return out, inserted


def _memo_read(path: Path, key: str, k: kir.KernelClass, c: "_Canon") -> tuple | None:
    """place_syncs_memo's entry `path` (of `key`) for class k (`c`: its _Canon) as (program, inserted); None when
    there is none or it fails a check (place_syncs_memo's docstring)."""
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(entry, dict) and entry.get("key") == key:
            inserted = {_pos_of(p, k, c.names): [_sync_of(x, c.names) for x in v] for p, v in entry["inserted"]}
            out = _with(k, inserted, pooled=True)
            kir.verify(out)
            if _nsyncs(out) == _nsyncs(k) + sum(len(v) for v in inserted.values()):   # every position exists
                return out, inserted
    except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError, kir.IRError):
        pass
    return None


@contextlib.contextmanager
def _memo_lock(path: Path):
    """An exclusive lock on `path`'s lock file (`<key>.lock` beside it) for the block: processes that miss one
    entry at once (the test suite's two workers, a generation's render processes) place the class once, the others
    waiting and reading the entry it wrote. A process holds one such lock at a time (a placement places one class),
    so none waits on another in a cycle; the system drops the lock of a process that dies. No lock (the directory
    cannot be written, or no fcntl) is no error: the placement runs unlocked."""
    try:
        import fcntl

        path.parent.mkdir(parents=True, exist_ok=True)
        f = open(path.with_suffix(".lock"), "a")
    except (ImportError, OSError):
        yield
        return
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX)
        except OSError:
            pass
        yield


def _memo_write(path: Path, key: str, c: "_Canon", inserted: dict) -> None:
    """Store place_syncs_memo's entry for `key` (class canon `c`, placed syncs `inserted`) at `path`: written to a
    file of this process and renamed, so a reader meets a whole entry; an unwritable directory or a doc naming no
    name of the class (kept out of the memo) is no error."""
    try:
        text = json.dumps({"key": key, "inserted": [[_pos_json(p, c), [_sync_json(x, c) for x in v]]
                                                    for p, v in inserted.items()]})
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except KeyError:
        pass   # a doc or position names no name of the class: kept out of the memo, the result stands
    except OSError:
        pass   # a read-only cache is no error: the result stands


class _Found(Exception):
    """The first conflict of an analysis that needs only whether there is one (_clean)."""


def _clean(k, inserted, types, used, trials: _Trials | None = None, found: list | None = None) -> bool:
    """Whether k with `inserted` has no conflict: the analysis stops at the first one (a needed sync's trial
    ends where its dependence is, not at the end of the kernel), appended to `found` when given. trials: what the
    trials of one class share (_Trials): the memo of calls, and the base program's states, from which a walk starts
    and with which it ends where this program's code and state are the base's (_Analysis.block)."""
    diffs = None if trials is None or trials.base is None else _diff_positions(trials.base, inserted)
    t = _Analysis(k, inserted, False, types, used, trials, diffs)
    t.first_only = True
    if trials is not None:
        trials.pending = {}
    try:
        t.run()
    except _Found:
        if found is not None:
            found.extend(t.conflicts[:1])
        return False
    if trials is not None:
        trials.clean = (inserted, trials.pending)
    return True


def _prune(k, inserted: dict, types, used, trials: _Trials, lists=None) -> dict:
    """`inserted` less each sync (a barrier, a flag pair) whose removal leaves k with no conflict, tried one by
    one from the last position (in text order) to the first, each trial on the program the earlier ones left. A
    flag pair whose removal leaves a conflict that a PipeBarrier orders (the pair's wait stood for a barrier: a V ->
    S wait placed for a scalar read that an earlier wait already covers, kept because it also orders V before the
    V work after it) is replaced by that barrier when the program then has no conflict: a barrier drains one pipe,
    a flag wait stalls the waiting pipe too (docs/reference/kernel_cost.md: 16 cycles against 32). `lists`: only the
    syncs placed in these statement lists (positions less their last index) are tried (None: all)."""
    inserted = dict(inserted)
    if trials.base is None:
        trials.start(inserted, types, used)
    for pos in sorted(inserted, key=str, reverse=True):
        if lists is not None and pos[:-1] not in lists:
            continue
        lst = inserted[pos]
        j = len(lst)
        while j > 0:
            n = 2 if isinstance(lst[j - 1], kir.WaitFlag) else 1
            trial = {**inserted, pos: lst[:j - n] + lst[j:]}
            found: list = []
            if _clean(k, trial, types, used, trials, found if n == 2 else None):
                inserted = trial
                lst = inserted[pos]
                trials.accept(inserted)
            elif found and len(found[0].sync) == 1 and isinstance(found[0].sync[0], kir.Barrier) \
                    and found[0].sync[0].pipe is lst[j - 2].src:
                trial = {**inserted, pos: lst[:j - n] + [found[0].sync[0]] + lst[j:]}
                if _clean(k, trial, types, used, trials):
                    inserted = trial
                    lst = inserted[pos]
                    trials.accept(inserted)
            j -= n
    return {p: v for p, v in inserted.items() if v}


_NO_WORK = (kir.Let, kir.Assign, kir.FLet, kir.FAssign, kir.Comment, kir.Get, kir.View, kir.StructLet, kir.StructSet,
            kir.TrapUnless)
"""Statements that issue no pipe work and touch no buffer (names, scalar arithmetic, bindings of tensor variables;
an FLet's scalar reads of UB are the analysis's to check): a sync moving up past them waits for nothing earlier."""


def _branch_ends(k: kir.KernelClass, pos: tuple) -> list:
    """The ends of the branches of the If a sync placed before position `pos` follows: the position of the end of its
    then-branch and of its else-branch (each when not empty), found walking back from `pos` over statements that
    issue no work (_NO_WORK), into a Scope that ends there and out of a Scope whose body it starts; [] when the walk
    meets anything else first (work, a loop, a list's start outside a Scope)."""
    base, i = pos[:-1], pos[-1]
    body = _body_at(k, base)
    while True:
        j = i - 1
        while j >= 0 and isinstance(body[j], _NO_WORK):
            j -= 1
        if j >= 0:
            s = body[j]
            if isinstance(s, kir.Scope):
                base, body = base + (j, "s"), s.body
                i = len(body)
                continue
            if isinstance(s, kir.If):
                return [base + (j, b, len(lst)) for b, lst in (("t", s.then), ("e", s.orelse)) if lst]
            return []
        if len(base) >= 3 and base[-1] == "s":
            base, i = base[:-2], base[-2]
            body = _body_at(k, base)
            continue
        return []


def _units(lst: list) -> list:
    """The placed syncs of one position's list as (index, count): a barrier, or a SetFlag with its WaitFlag right
    after it (a lone SetFlag or WaitFlag, one half of a hoisted pair, is none)."""
    out, j = [], 0
    while j < len(lst):
        x = lst[j]
        if isinstance(x, kir.Barrier):
            out.append((j, 1))
        elif isinstance(x, kir.SetFlag) and j + 1 < len(lst) and isinstance(lst[j + 1], kir.WaitFlag) \
                and (lst[j + 1].event, lst[j + 1].id) == (x.event, x.id):
            out.append((j, 2))
            j += 1
        j += 1
    return out


def _sink(k, inserted: dict, types, used, trials: _Trials) -> dict:
    """`inserted` with each placed barrier or flag pair that follows an If (past statements issuing no work,
    _branch_ends) moved to the end of one of its branches, the then-branch tried first, when k then has no conflict:
    every access the sync orders is inside that branch and the other branch needs none. It then runs only on the
    paths that take that branch (a guarded fix-up's scalar work: a wait where the branch is taken, not on every
    pass), and it sinks again into an If ending that branch. Where the sync, in a loop body, also ordered an access
    after the loop, the move is taken when the syncs the placement then adds for it all lie outside that loop
    (_placed_outside: issued once, not per iteration), as _hoist does; the syncs of the lists they go to are then
    pruned again (_prune: the new sync may stand for one placed beside it). Positions in text order; each trial on the program the
    earlier ones left (docs/design.md "Syncs at the end of a branch")."""
    inserted = {p: list(v) for p, v in inserted.items()}
    if trials.base is None:
        trials.start(inserted, types, used)
    todo = sorted(inserted, key=str)
    added: set = set()   # the statement lists where a move added syncs outside its loop
    while todo:
        pos = todo.pop(0)
        ends = _branch_ends(k, pos) if inserted.get(pos) and isinstance(pos[-1], int) else []
        if not ends:
            continue
        loop = _loop_body_of(k, pos[:-1])
        for j, n in reversed(_units(inserted[pos])):
            lst = inserted[pos]
            unit = lst[j:j + n]
            for end in ends:
                trial = {**inserted, pos: lst[:j] + lst[j + n:], end: list(inserted.get(end, ())) + unit}
                found: list = []
                if not _clean(k, trial, types, used, trials, found):
                    # the sync also ordered an access after the loop holding it: that one's syncs outside the loop,
                    # tried only when the first conflict's later access is there (same function, out of the loop
                    # body; one inside would get its sync inside: _placed_outside's rounds cost whole analyses)
                    later = found[0].later.pos if found else None
                    if loop is None or later is None or later[0] != loop[0] or later[:len(loop)] == loop:
                        continue
                    extra = _placed_outside(k, trial, types, used, loop, trials)
                    if extra is None:
                        continue
                    trial = {**trial, **{p: list(trial.get(p, ())) + v for p, v in extra.items()}}
                    if not _clean(k, trial, types, used, None):
                        continue
                    added.update(p[:-1] for p in extra)
                inserted = trial
                trials.accept(inserted)
                if end not in todo:
                    todo.append(end)
                break
    inserted = {p: v for p, v in inserted.items() if v}
    if added:   # a sync the move added may make one placed beside it redundant
        inserted = _prune(k, inserted, types, used, trials, added)
    return inserted


def _body_at(k: kir.KernelClass, base: tuple) -> tuple:
    """The statement list at position prefix `base` (function name, then index / "b" / "t" / "e" / "s" steps)."""
    funcs = {"Init": k.init, "Process": k.process, **{m.name: m.body for m in k.methods}}
    body, s = funcs[base[0]], None
    for x in base[1:]:
        if isinstance(x, int):
            s = body[x]
        else:
            body = {"b": lambda: s.body, "t": lambda: s.then, "e": lambda: s.orelse, "s": lambda: s.body,
                    "c": lambda: s.body}[x]()
    return body


def _loop_body_of(k: kir.KernelClass, base: tuple) -> tuple | None:
    """The position prefix of the body of the innermost loop holding statement list `base` (ending in "b"); None
    outside every loop."""
    for n in range(len(base) - 1, 1, -1):
        if base[n] == "b" and isinstance(base[n - 1], int) \
                and isinstance(_body_at(k, base[:n - 1])[base[n - 1]], kir.For):
            return base[:n + 1]
    return None


def _issues_on(k: kir.KernelClass, stmt, pipe, depth: int = 0) -> bool:
    """Whether statement `stmt` (the methods it calls followed, a few levels) issues a copy or vector instruction on
    `pipe`: only then can a SetFlag of that pipe gain by moving above it (the flag fires in the pipe's order)."""
    for x in kir.walk((stmt,)):
        if isinstance(x, kir.Copy) and x.pipe is pipe:
            return True
        if isinstance(x, kir.Vec) and INSTRS[x.op].pipe is pipe:
            return True
        if isinstance(x, kir.Call) and depth < CALL_DEPTH:
            m = next((m for m in k.methods if m.name == x.method), None)
            if m is not None and any(_issues_on(k, y, pipe, depth + 1) for y in m.body):
                return True
    return False


def _first_put_inside(k, trial: dict, types, used, loop: tuple, trials: _Trials) -> bool:
    """Whether the placement's first round on `trial` (a program with a conflict) puts its first sync inside the
    statement list `loop`, decided without that round: a trial's walk (from the base program's states, _clean)
    meets the first conflict a walk from the start meets, in an equal state (the placement puts nothing before
    it: the walks agree up to there), and _Analysis.all_inside answers for every order the placement could meet
    its disjuncts and records in. False: not known so (the round decides)."""
    if trials.base is None:
        return False
    t = _Analysis(k, trial, False, types, used, trials, _diff_positions(trials.base, trial))
    t.probe = loop
    trials.pending = {}
    try:
        t.run()
    except _Found:
        return bool(t.inside)
    return False


def _placed_outside(k, trial: dict, types, used, loop: tuple, trials: _Trials | None = None) -> dict | None:
    """The syncs the placement adds to `trial` (position -> statements appended) for the conflicts it leaves, when
    every one of them lies outside the loop body `loop` (issued once, not per iteration); else None. A round stops
    at the first sync it would place inside `loop` (_Analysis.forbid): the rounds only append to the lists, so that
    sync would be in the result, which is None then (exact; over the suite's classes every call so far ends so).
    trials: the class's _Trials, whose base `trial` changes: when _first_put_inside shows that the first round's first
    sync lies inside `loop`, None at once (its rounds walked the whole nest from the start)."""
    if trials is not None and _first_put_inside(k, trial, types, used, loop, trials):
        return None
    t = {p: list(v) for p, v in trial.items()}
    for _ in range(OUTSIDE_ROUNDS):
        a = _Analysis(k, t, True, types, used)
        a.forbid = loop
        try:
            a.run()
        except _Found:   # a sync placed inside the loop body: it stays in `extra` whatever the later rounds do
            return None
        if a.new == 0:
            if a.dup:
                return None
            break
    else:
        return None
    extra = {p: v[len(trial.get(p, ())):] for p, v in t.items() if len(v) > len(trial.get(p, ()))}
    if not extra or any(p[:len(loop)] == loop for p in extra):
        return None
    return extra


def _moved(prog: dict, pos: tuple, j: int, lst: list, at: tuple, nid: int) -> dict:
    """`prog` (position -> placed syncs) with the flag pair lst[j], lst[j + 1] placed before `pos` given event id
    `nid` and its SetFlag moved to the end of the syncs placed before position `at` (its WaitFlag stays)."""
    out = {**prog, pos: lst[:j] + [replace(lst[j + 1], id=nid)] + lst[j + 2:]}
    out[at] = list(out.get(at, [])) + [replace(lst[j], id=nid)]
    return out


def _highest_move(k, inserted: dict, pos: tuple, j: int, lst: list, body, idx: int, nid: int, types, used,
                  trials) -> tuple:
    """The lowest index i of the statement list `body` (up to a Return) such that the flag pair lst[j], lst[j + 1]
    placed before statement idx (at `pos`) has its SetFlag moved before statement i with no conflict, searched
    galloping (i = idx - 1, idx - 2, idx - 4, ...) then by bisection; idx when even idx - 1 conflicts. A SetFlag
    moved earlier carries a subset of what it carried later (the accesses its pipe issued or is ordered after only
    grow along a list, and a join keeps an order both paths have), so the clean indices are the ones from the result
    up: the one-step walk of _hoist would reach the same index, in idx - i analyses where this takes about 2 log2 of
    that (BatchMatMulV3's pairs move 13 and 15 statements). Returns (that index, the program with the SetFlag
    there, _moved; None when the index is idx)."""
    base = pos[:-1]
    lo = idx
    while lo > 0 and not any(isinstance(x, kir.Return) for x in kir.walk(body[lo - 1:idx])):
        lo -= 1

    def clean(i: int) -> bool:
        return _clean(k, _moved(inserted, pos, j, lst, base + (i,), nid), types, used, trials)

    good, bad, step = idx, lo - 1, 1
    while idx - step > bad:
        i = max(idx - step, lo)
        if not clean(i):
            bad = i
            break
        good = i
        if i == lo:
            break
        step *= 2
    while good - bad > 1:
        mid = (good + bad) // 2
        if clean(mid):
            good = mid
        else:
            bad = mid
    return good, (_moved(inserted, pos, j, lst, base + (good,), nid) if good < idx else None)


def _hoist(k, inserted: dict, types, used, trials: _Trials | None = None, only_loops: bool = False) -> dict:
    """Each adjacent SetFlag / WaitFlag pair gets its SetFlag moved as early in its statement list as the analysis
    allows (right after the last access it must cover), with an event id of its own, so the waiting pipe does not
    also wait for the producing pipe's later, unrelated work. A window holding a Return is not crossed. In a loop
    body, where the pair also covers an access after the loop (a software-pipelined loop's prefetch of the pass its
    epilogue computes), the SetFlag may move up anyway once: the placement then adds the syncs that access needs
    outside the loop (issued once), and the move is taken when all of them lie there. `only_loops`: the pairs
    inside the body of a software-pipelined loop (kir.For.pipelined) right after a statement that issues work on
    the SetFlag's pipe (the prefetch) only."""
    if trials is not None and trials.base is None:
        trials.start(inserted, types, used)
    taken = set(used) | {(x.event, x.id) for v in inserted.values() for x in v if isinstance(x, kir.SetFlag)}
    for pos in sorted(inserted, key=str):
        j = 0
        while j < len(inserted.get(pos, ())):
            lst = inserted[pos]
            s = lst[j]
            if not (isinstance(s, kir.SetFlag) and j + 1 < len(lst) and isinstance(lst[j + 1], kir.WaitFlag)
                    and lst[j + 1].event == s.event and lst[j + 1].id == s.id):
                j += 1
                continue
            free = [i for i in range(EVENT_IDS) if (s.event, i) not in taken]
            base, idx = pos[:-1], pos[-1]
            if not free or not isinstance(idx, int) or idx == 0:
                j += 2
                continue
            loop = _loop_body_of(k, base)
            body = _body_at(k, base)
            if only_loops and (loop is None or not _body_at(k, loop[:-2])[loop[-2]].pipelined
                               or not _issues_on(k, body[idx - 1], s.src)):
                j += 2
                continue
            nid = free[-1]
            cur = inserted
            # the search's lowest clean index; the one-step walk goes on from the first failing one
            good, best = _highest_move(k, inserted, pos, j, lst, body, idx, nid, types, used, trials)
            for i in range(good - 1, -1, -1):
                if any(isinstance(x, kir.Return) for x in kir.walk(body[i:idx])):
                    break
                at = base + (i,)
                trial = _moved(cur, pos, j, lst, at, nid)
                if not _clean(k, trial, types, used, trials):
                    extra = None if loop is None or cur is not inserted else \
                        _placed_outside(k, trial, types, used, loop, trials)
                    if extra is None:
                        break
                    cur = {**inserted, **{p: list(inserted.get(p, ())) + v for p, v in extra.items()}}
                    trial = _moved(cur, pos, j, lst, at, nid)
                    if not _clean(k, trial, types, used, None):
                        break
                best = trial
            if best is None:
                j += 2
                continue
            if trials is not None:
                trials.accept(best)
            taken.add((s.event, nid))
            inserted = best
            j += 1
    return inserted


def placed(inserted: dict) -> list:
    """The placed syncs one by one, each as a tuple of its statements' locations (position, index in its list):
    one for a barrier, two for a flag pair (adjacent, or a SetFlag hoisted to an earlier position)."""
    out, lone = [], {}
    for pos, lst in inserted.items():
        j = 0
        while j < len(lst):
            x = lst[j]
            nxt = lst[j + 1] if j + 1 < len(lst) else None
            if isinstance(x, kir.SetFlag) and isinstance(nxt, kir.WaitFlag) and (nxt.event, nxt.id) == (x.event, x.id):
                out.append(((pos, j), (pos, j + 1)))
                j += 2
                continue
            if isinstance(x, (kir.SetFlag, kir.WaitFlag)):
                lone.setdefault((x.event, x.id), []).append((pos, j))
            else:
                out.append(((pos, j),))
            j += 1
    out += [tuple(v) for v in lone.values()]
    return out


def without(k: kir.KernelClass, inserted: dict, which: tuple) -> kir.KernelClass:
    """k (the pass's input) with every placed sync but `which` (an entry of `placed`): the mutation of a test."""
    drop = set(which)
    return _with(k, {p: [x for j, x in enumerate(v) if (p, j) not in drop] for p, v in inserted.items()}, pooled=True)
