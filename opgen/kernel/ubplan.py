"""UB buffer planning by liveness over a kernel class's Kernel IR: buffers whose lifetimes never overlap share UB bytes.

The plan is computed from the statements of one entry method of a `kir.KernelClass` (the AIVs' `VecMain` of an
attention kernel; opgen.kernel.attnclass) with every method it calls inlined, in program order:

  positions  a pre-order numbering of the statements; a loop spans [its first position, its last];
  lifetimes  per UB buffer (VECIN / VECOUT / VECCALC `Local`) a list of position intervals:
             - a queue (TQue): one interval per allocation, from the AllocTensor to its FreeTensor (the block's bytes
               are undefined after AllocTensor on the device, so nothing flows from one allocation to the next);
             - a TBuf: one interval from its first access to its last, widened to every loop that holds an access
               (a value may flow around the loop's back edge);
             an access is any statement naming a tensor taken from the buffer (Get / Alloc / DeQue bind them) -- a
             method call counts for its arguments over the whole of the inlined body;
  conflicts  two buffers conflict when an interval of one meets an interval of the other;
  pools      the buffers are split into the connected components of the conflict graph; the component holding the
             most buffers is pool 0, every other component goes to pool 1. No buffer of pool 1 is live while one of
             pool 0 is, so pool 1 takes the same bytes (AscendC's TBufPool: TPipe::InitBufPool(pool1, len, pool0)).

`plan_ub(cls, entry)` returns a `UbPlan` (empty pools when nothing can share); `apply_plan(cls, plan, sizes)`
rewrites the class: two TBufPool members, `pipe_.InitBufPool` of each (the same length: the larger pool's bytes,
ubPool0Bytes / ubPool1Bytes the sums of their buffers' InitBuffer bytes, each rounded up to 32),
every planned buffer's InitBuffer carved from its pool. The static UB proof charges max(pool 0, pool 1) bytes
(opgen.tiling.attention._finish: the pooled fit over the same plan, `Buffer.pool`); the emulation faults on a read of
bytes the other pool's buffer wrote (opgen/emu/include/emu/core.h OwnedAccess; opgen.kernel.kir_interp the same), so
a wrong plan fails `opgen check`. Facts: docs/reference/ascendc.md §1.5 (TPipe, TQue, TBuf, TBufPool).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from opgen.ir.dims import Fn, Lit, Sym, as_dim
from opgen.kernel import kir as K

UB_POSITIONS = (K.TPos.VECIN, K.TPos.VECOUT, K.TPos.VECCALC)
"""The TPositions whose buffers live in UB (docs/reference/ascendc.md §1.2)."""
POOL_NAMES = ("vecPool0_", "vecPool1_")
"""The TBufPool members of a planned class (opgen's own names, never a user's)."""
QBUFPOOL_MAX_LEN = 16
"""Most buffer handles one TBufPool holds (asc-devkit kernel_macros.h QBUFPOOL_MAX_LEN): a pool is declared
TBufPool<pos, n> with n its handles (a queue's blocks, 1 per TBuf) -- the default n of 4 would be overrun."""


@dataclass
class UbPlan:
    """What the liveness plan decided for one class: `lifetimes` {buffer: [(first, last) positions]}, `pools`
    ([pool 0 buffers, pool 1 buffers]; empty lists when nothing shares), `positions` the number of positions."""

    lifetimes: dict = field(default_factory=dict)
    pools: list = field(default_factory=lambda: [[], []])
    positions: int = 0

    @property
    def shares(self) -> bool:
        """Whether two pools share bytes (pool 1 holds a buffer)."""
        return bool(self.pools[1])

    def text(self, sizes: dict | None = None) -> str:
        """The plan as lines (`opgen graph --stage kernel`): each buffer's lifetimes and pool; `sizes` {buffer:
        bytes expression} adds each pool's bytes and what the sharing saves."""
        out = [f"UB plan by liveness ({self.positions} positions of the AIV program, calls inlined):"]
        pool_of = {b: k for k, bs in enumerate(self.pools) for b in bs}
        for b, ivs in self.lifetimes.items():
            spans = ", ".join(f"[{a}, {z}]" for a, z in ivs)
            where = f"pool {pool_of[b]}" if b in pool_of else "pipe"
            size = f"  {sizes[b]} B" if sizes and b in sizes else ""
            out.append(f"  {b:<14} {where:<6} live {spans}{size}")
        if self.shares:
            out.append(f"  {POOL_NAMES[1]} shares the bytes of {POOL_NAMES[0]}: {', '.join(self.pools[1])} are "
                       f"never live while {', '.join(self.pools[0])} are")
        else:
            out.append("  no two buffers' lifetimes are apart: nothing shares UB")
        return "\n".join(out) + "\n"


class _Walk:
    """Numbers the statements of an entry (calls inlined) and records each UB buffer's accesses."""

    def __init__(self, cls: K.KernelClass):
        self.methods = {m.name: m for m in cls.methods}
        self.ub = {b.name: b for b in cls.locals if b.pos in UB_POSITIONS and not b.pool}
        self.pos = 0
        self.bound: dict = {}          # tensor variable -> buffer
        self.loops: list = []          # (first, last) of every loop
        self.access: dict = {}         # buffer -> [positions]
        self.allocs: dict = {}         # queue -> [[alloc position, free position]]
        self.stack: list = []

    def refs(self, x, out: set, seen: set):
        """Tensor names any K.Ref inside node x names (not descending into nested statement bodies)."""
        if isinstance(x, K.Ref):
            out.add(x.tensor)
        if isinstance(x, (list, tuple)):
            for y in x:
                self.refs(y, out, seen)
        elif dataclasses.is_dataclass(x) and not isinstance(x, type) and id(x) not in seen:
            seen.add(id(x))
            for f in dataclasses.fields(x):
                self.refs(getattr(x, f.name), out, seen)

    def touch(self, names, lo: int, hi: int | None = None):
        for n in names:
            b = self.bound.get(n)
            if b is not None:
                self.access.setdefault(b, []).extend((lo, hi if hi is not None else lo))

    def block(self, stmts):
        for s in stmts:
            self.stmt(s)

    def stmt(self, s):  # noqa: C901 - one case per node type
        self.pos += 1
        here = self.pos
        if isinstance(s, K.For):
            self.touch(self.names_of((s.lo, s.hi, s.step)), here)
            self.block(s.body)
            self.loops.append((here, self.pos))
        elif isinstance(s, K.If):
            self.touch(self.names_of(s.cond), here)
            self.block(s.then)
            self.block(s.orelse)
        elif isinstance(s, (K.Scope, K.CoreIf)):
            self.block(s.body)
        elif isinstance(s, K.Call):
            m = self.methods.get(s.method)
            if m is None or m.extern or s.method in self.stack:
                self.touch(self.names_of(s.args), here)
                return
            self.stack.append(s.method)
            self.block(m.body)
            self.stack.pop()
            self.touch(self.names_of(s.args), here, self.pos)   # the callee may use a tensor argument anywhere
        elif isinstance(s, K.Get):
            if s.buf in self.ub:
                self.bound[s.var] = s.buf
        elif isinstance(s, K.Alloc):
            if s.queue in self.ub:
                self.bound[s.var] = s.queue
                self.allocs.setdefault(s.queue, []).append([here, None])
                self.access.setdefault(s.queue, []).extend((here, here))
        elif isinstance(s, K.DeQue):
            if s.queue in self.ub:
                self.bound[s.var] = s.queue
                self.access.setdefault(s.queue, []).extend((here, here))
        elif isinstance(s, K.Free):
            if s.queue in self.ub:
                open_ = [a for a in self.allocs.get(s.queue, []) if a[1] is None]
                if open_:
                    open_[0][1] = here
                self.access.setdefault(s.queue, []).extend((here, here))
        elif isinstance(s, K.View):
            src = self.bound.get(s.src.tensor)
            if src is not None:
                self.bound[s.var] = src
            self.touch({s.src.tensor}, here)
        elif isinstance(s, K.EnQue):
            self.touch({s.var}, here)
        elif not isinstance(s, K.InitBuffer):
            self.touch(self.names_of(s), here)

    def names_of(self, x) -> set:
        out: set = set()
        self.refs(x, out, set())
        return out


def _overlap(a: list, b: list) -> bool:
    return any(x0 <= y1 and y0 <= x1 for x0, x1 in a for y0, y1 in b)


def plan_ub(cls: K.KernelClass, entry: str) -> UbPlan:
    """The liveness plan of the UB buffers `entry` (a method of `cls`, with the methods it calls) uses (module doc).
    Buffers the entry never touches are left out (no pool)."""
    w = _Walk(cls)
    w.block(w.methods[entry].body)
    life: dict = {}
    for b in w.ub:
        pts = w.access.get(b)
        if not pts:
            continue
        if w.ub[b].queue:
            ivs = [(a, z if z is not None else w.pos) for a, z in w.allocs.get(b, [])]
            if not ivs:
                ivs = [(min(pts), max(pts))]
        else:
            lo, hi = min(pts), max(pts)
            changed = True
            while changed:   # widen to every loop holding an access
                changed = False
                for a, z in w.loops:
                    if lo <= z and a <= hi and (a < lo or z > hi) and any(a <= p <= z for p in pts):
                        lo, hi, changed = min(lo, a), max(hi, z), True
            ivs = [(lo, hi)]
        life[b] = ivs
    names = list(life)
    comp = {b: b for b in names}

    def root(b):
        while comp[b] != b:
            comp[b] = comp[comp[b]]
            b = comp[b]
        return b

    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if _overlap(life[a], life[b]):
                comp[root(a)] = root(b)
    groups: dict = {}
    for b in names:
        groups.setdefault(root(b), []).append(b)
    plan = UbPlan(lifetimes=life, positions=w.pos)
    if len(groups) > 1:
        ordered = sorted(groups.values(), key=lambda g: (-len(g), names.index(g[0])))
        plan.pools = [ordered[0], [b for g in ordered[1:] for b in g]]
    return plan


def buffer_bytes(cls: K.KernelClass) -> dict:
    """{UB buffer: its InitBuffer bytes (blocks x bytes, a DimExpr)} of class `cls` (`UbPlan.text`'s sizes)."""
    out: dict = {}

    def walk(stmts):
        for s in stmts:
            if isinstance(s, K.InitBuffer) and not getattr(s, "share", ""):
                out[s.buf] = Lit(s.num) * as_dim(s.bytes) if s.num != 1 else as_dim(s.bytes)
            for f in ("body", "then", "orelse"):
                if hasattr(s, f) and isinstance(getattr(s, f), tuple):
                    walk(getattr(s, f))

    for m in cls.methods:
        walk(m.body)
    return out


def plan_text(lowered, key) -> str:
    """The UB plan of the attention class serving specialisation `key` of a tiled `lowered` (its
    extra["aclasses"], opgen.kernel.attnclass.AttnClass), with each buffer's bytes; "" for other lowerings."""
    for c in lowered.extra.get("aclasses", ()):
        if key in c.keys and c.ubplan is not None:
            return c.ubplan.text(buffer_bytes(c.kclass))
    return ""


def _count_handles(stmts, pool_of: dict, handles: list):
    """Adds to handles[k] the buffer handles of pool k's InitBuffers in `stmts` (a queue's block count, 1 per TBuf)."""
    for s in stmts:
        if isinstance(s, K.InitBuffer) and s.buf in pool_of:
            handles[pool_of[s.buf]] += s.num
        for f in ("body", "then", "orelse"):
            if hasattr(s, f) and isinstance(getattr(s, f), tuple):
                _count_handles(getattr(s, f), pool_of, handles)


def _align32(e):
    return Fn("align_up", (as_dim(e), Lit(32)))


def apply_plan(cls: K.KernelClass, plan: UbPlan) -> K.KernelClass:
    """`cls` with its planned buffers carved from two TBufPools sharing their bytes (module doc); `cls` itself when
    the plan shares nothing. Each pool's length is the larger pool's bytes (TPipe::InitBufPool(pool1, len, pool0)
    needs len <= pool 0's; every buffer's bytes rounded up to 32 as InitBuffer does)."""
    if not plan.shares:
        return cls
    pool_of = {b: k for k, bs in enumerate(plan.pools) for b in bs}
    sizes: dict = {}

    def collect(stmts):
        for s in stmts:
            if isinstance(s, K.InitBuffer) and s.buf in pool_of:
                sizes[s.buf] = _align32(s.bytes) * s.num
            for f in ("body", "then", "orelse"):
                if hasattr(s, f) and isinstance(getattr(s, f), tuple):
                    collect(getattr(s, f))

    for m in cls.methods:
        collect(m.body)
    total = []
    for bs in plan.pools:
        t = None
        for b in bs:
            t = sizes[b] if t is None else t + sizes[b]
        total.append(t)
    lets = [K.Let(f"ubPool{k}Bytes", as_dim(total[k])) for k in range(2)]
    length = Fn("max", (Sym("ubPool0Bytes"), Sym("ubPool1Bytes")))

    def rewrite(stmts, first: list):
        out = []
        for s in stmts:
            if isinstance(s, K.InitBuffer) and s.buf in pool_of:
                if first[0]:
                    out += [*lets, K.InitBuffer(POOL_NAMES[0], length),
                            K.InitBuffer(POOL_NAMES[1], length, share=POOL_NAMES[0])]
                    first[0] = False
                out.append(dataclasses.replace(s, pool=POOL_NAMES[pool_of[s.buf]]))
                continue
            for f in ("body", "then", "orelse"):
                if hasattr(s, f) and isinstance(getattr(s, f), tuple):
                    s = dataclasses.replace(s, **{f: tuple(rewrite(getattr(s, f), first))})
            out.append(s)
        return out

    handles = [0, 0]
    for m in cls.methods:
        _count_handles(m.body, pool_of, handles)
    if max(handles) > QBUFPOOL_MAX_LEN:   # more buffers than a pool can hold: no sharing
        plan.pools = [[], []]
        return cls
    methods = []
    for m in cls.methods:
        first = [True]
        body = tuple(rewrite(m.body, first))
        methods.append(dataclasses.replace(m, body=body) if body != m.body else m)
    pools = tuple(K.Local(n, K.TPos.VECCALC, depth=max(h, 1), pool=True) for n, h in zip(POOL_NAMES, handles))
    return dataclasses.replace(cls, methods=tuple(methods), locals=pools + tuple(cls.locals))
