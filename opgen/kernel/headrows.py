"""Head-row programs: the Kernel IR of opgen's head-row vector kernels (the NormRopeConcat family).

A head row is the D elements of one (b, s, n) of one *part* of the operator: a [B, S, N, D] region whose
rows share one computation (query, encoder_query, key, ... in NormRopeConcat; the gradient slices of its
backward). `lower_heads(graph)` turns one optimized specialisation into a `HeadProgram`:

* Values are classified by shape (`classify`, dims named by `HeadLayout`): *row* [B, S, N, D] (BSND) or
  [B, N, S, D] (BNSD), *stat* [B, S, N, 1], *lane* [B, ., ., <lane dims>] (a row reshaped or sliced along
  D), *table* [R, D] (a RoPE table, one row per sequence position), *col* [D] (LayerNorm weights and
  weight-gradient sums), *scalar* [] (constants, runtime attributes).
* permute / concat / slice along the sequence axis become *row addressing*. Every output row is traced
  back to the rows it reads (`_Alt`: the interval of the output's sequence coordinate u it holds for, the
  (tensor, shift) rows it reads, the concat branches taken). Bounds that mention a table dim (R) are row
  *conditions* (which rows get RoPE); the others delimit a *part*: s in [0, L) with u = s + lo. Fragments
  of all outputs (rows, stats, and the rows summed into weight gradients) that read or write the same
  part-sized tensors at row s form one `HeadPart`. Each GM tensor a part touches is a `RowMap`: its row of
  (b, s, n) is at sequence index s + offset of a BSND or BNSD tensor of `extent` rows, or table row
  s + offset; so the BSND -> BNSD transpose is a strided store and the concatenation an offset.
* Per part and per truth assignment of its conditions (`s < X`, e.g. X = R - Seq: the row gets RoPE with
  table row s + Seq), the rows are lowered to a rowprog `RowProgram` of AscendC-level instructions
  (opgen.kernel.rowprog: Cast, Add/Sub/Mul/Div, Adds/Muls, ReduceSum, scalar expressions, accumulate,
  store) with fp32 UB temporaries allocated by liveness. Within-row rotations (reshape/slice/neg/concat
  along D, the spec's rotate/rotate_t) are evaluated as lane maps on sample head dims and recognised as a
  permutation family (`PERMS`: pair swap for interleave, half swap) and a sign family (`SIGNS`), lowered to
  `vgather` (AscendC Gather with a per-D byte-offset table built once, docs/reference/ascendc.md §1.9) and a
  multiplication by a ±1 sign row (exact in fp32, like the spec's negation).

Operands of the programs are slots, not tensor names (in0.. row inputs, sin0.. stat inputs, out0.. row
outputs, sout0.. stat outputs, tab0.. table rows, col0.. columns, acc0.. column accumulators, perm0../sign0..
lane tables) and scalars are renamed s0.., so `body_text` is equal for parts that compute alike (query and
key) and an emitter can share their code. `verify_head_program` checks the invariants (every program
verifies, every output slot written once per row, conditions covered, stats contiguous);
`print_head_program` is the canonical text.

Reference facts: docs/reference/norm_rope_concat.md §1.1-§1.3 (pipeline, RoPE positions p < R use table row p),
§2 (backward), §1.4 (fp32 inside, one final cast); docs/reference/ascendc.md §1.9 (Gather: byte offsets,
count form; count-form vector instructions).
"""

from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass, field

import numpy as np

from opgen.errors import IRError
from opgen.ir.core import Graph
from opgen.ir.dims import Bin, Bounds, Constraint, DimExpr, Lit, Sym, as_dim, eval_shape
from opgen.ir.dtypes import DType, dtype_name
from opgen.ir.locs import at_suffix, stamp
from opgen.ir.records import evolve
from opgen.kernel import rowprog
from opgen.kernel.kir import Select
from opgen.kernel.rowprog import ROUND_MODES, GmTensor, Instr, RowProgram, lower_elementwise

SAMPLE_D = (2, 4, 6, 8, 10, 34, 128)
"""Head dims at which lane maps are evaluated to recognise a rotation family (all even; 2 is ambiguous
between the families, the others are not)."""

def _sel(cond, a: int, b: int):
    return Select(cond, Lit(a), Lit(b))


PERMS = {
    "identity": (lambda j, d: j, lambda j, d: j),
    "pair_swap": (lambda j, d: Bin("-", Bin("+", j, Lit(1)), Bin("*", Lit(2), Bin("%", j, Lit(2)))),
                  lambda j, d: j ^ 1),
    "half_swap": (lambda j, d: Bin("%", Bin("+", j, Bin("//", d, Lit(2))), d), lambda j, d: (j + d // 2) % d),
}
"""Lane permutation families: name -> (the source lane of lane j in a row of d lanes as a dim expression of the
expressions j and d (the kernel's, opgen.kernel.headsched.PrepareLanes; j ^ 1 written j + 1 - 2 * (j % 2) for
j >= 0), the same in Python on ints). pair_swap is the interleave rotation, half_swap the half rotation."""

SIGNS = {
    "none": (lambda j, d: Lit(1), lambda j, d: 1),
    "all": (lambda j, d: Lit(-1), lambda j, d: -1),
    "even": (lambda j, d: _sel(Constraint("==", Bin("%", j, Lit(2)), Lit(0)), -1, 1),
             lambda j, d: -1 if j % 2 == 0 else 1),
    "odd": (lambda j, d: _sel(Constraint("==", Bin("%", j, Lit(2)), Lit(1)), -1, 1),
            lambda j, d: -1 if j % 2 == 1 else 1),
    "low_half": (lambda j, d: _sel(Constraint("<", j, Bin("//", d, Lit(2))), -1, 1),
                 lambda j, d: -1 if j < d // 2 else 1),
    "high_half": (lambda j, d: _sel(Constraint(">=", j, Bin("//", d, Lit(2))), -1, 1),
                  lambda j, d: -1 if j >= d // 2 else 1),
}
"""Lane sign families: name -> (lane j's sign (+-1) in a row of d lanes as a dim expression of j and d, the same
in Python on ints)."""

ROLE_PREFIX = {("in", "row"): "in", ("in", "stat"): "sin", ("in", "table"): "tab", ("in", "col"): "col",
               ("out", "row"): "out", ("out", "stat"): "sout", ("out", "col"): "acc"}
"""Slot name prefix per (role, space)."""


@dataclass(frozen=True)
class HeadLayout:
    """Dim names of the head-row layout: batch, heads, head dim (the row length), read off the graph by
    `parts_layout`."""

    batch: str
    heads: str
    dim: str

    def text(self) -> str:
        """One line (`opgen graph --dump-after select_family`)."""
        return (f"layout parts: head rows [{self.batch}, S, {self.heads}, {self.dim}] / [{self.batch}, {self.heads}, S, "
                f"{self.dim}] of {self.dim} elements, one part per sequence region")


def parts_layout(g: Graph) -> HeadLayout | None:
    """The head-row layout of optimized graph `g` when its 4-D input and output tensors share a batch dim (axis 0),
    a head dim (axis 1 or 2, the other being each tensor's own sequence axis) and a row length (axis 3), and the
    graph lowers on it; None otherwise. Structural: no dim is known by its name."""
    lay = parts_attempt(g)
    return lay if isinstance(lay, HeadLayout) else None


def parts_attempt(g: Graph) -> HeadLayout | str | None:
    """parts_layout's answer, or why graph `g` has none although two or more of its operator tensors are 4-D with
    a batch dim and a row length other than 1 (the tensors the parts schedule is for): one line for the rows
    family's refusal (docs/design.md "Kernel families"); None for a graph of other tensors."""
    vals = g.values()
    gm = [p.value for p in g.params] + [vals[v] for _o, v in g.outputs]   # the operator's tensors
    shapes = [tuple(str(d) for d in v.type.shape) for v in gm if len(v.type.shape) == 4]
    shapes = [s for s in shapes if "1" not in (s[0], s[3])]
    if len(shapes) < 2:
        return None
    batch = {s[0] for s in shapes}
    rowlen = {s[3] for s in shapes}
    if len(batch) != 1 or len(rowlen) != 1:
        return (f"its 4-D tensors differ in batch dim ({', '.join(sorted(batch))}) or row length "
                f"({', '.join(sorted(rowlen))})")
    for s in shapes:   # a part's rows are read at (b, s + offset, n): an extent-1 axis would be read past its end
        if "1" in (s[1], s[2]):
            return (f"a 4-D tensor [{', '.join(s)}] broadcasts over axis {1 + (s[2] == '1')}, which no part addresses "
                    f"(its rows are read at each sequence and head index)")
    heads = set.intersection(*({s[1], s[2]} for s in shapes))
    seqs = {x for s in shapes for x in (s[1], s[2])} - heads
    if len(heads) != 1:
        return (f"its 4-D tensors share no one head dim at axis 1 or 2 "
                f"({'; '.join('[' + ', '.join(s) + ']' for s in dict.fromkeys(shapes))})")
    if len(seqs) < 2:   # one sequence axis for all is a single anchor domain (rows schedule)
        return f"it needs two sequence axes or more beside head dim {next(iter(heads))}; this graph has one"
    lay = HeadLayout(batch.pop(), heads.pop(), rowlen.pop())
    try:
        lower_heads(g, lay)
    except IRError as e:
        return str(e)
    return lay


def classify(shape, layout: HeadLayout) -> tuple[str, int | None]:
    """(space, sequence axis) of a value of `shape` (tuple of IR dims): row / stat / lane with the sequence
    axis 1 (BSND) or 2 (BNSD), table (axis 0), col, scalar (None). Raises IRError for other shapes."""
    dims = [str(d) for d in shape]
    if not dims:
        return "scalar", None
    if dims == [layout.dim]:
        return "col", None
    if len(dims) == 2 and dims[1] == layout.dim and dims[0] not in (layout.batch, layout.heads):
        return "table", 0
    if len(dims) >= 4 and dims[0] == layout.batch and layout.heads in dims[1:3] and dims[1] != dims[2]:
        seq = 2 if dims[1] == layout.heads else 1
        tail = dims[3:]
        if tail == [layout.dim]:
            return "row", seq
        if tail == ["1"]:
            return "stat", seq
        return "lane", seq
    raise IRError(f"head-row kernel: shape [{', '.join(dims)}] is not a head row [{layout.batch}, S, {layout.heads}, "
                  f"{layout.dim}] / [{layout.batch}, {layout.heads}, S, {layout.dim}], a statistic, a table row "
                  f"[R, {layout.dim}], a column [{layout.dim}] or a scalar")


NONNEG = Bounds(floor=0)
"""The head-row analysis' knowledge of the dims: each is >= 0 (opgen.ir.dims.Bounds)."""


@functools.lru_cache(maxsize=65536)
def ge(a, b) -> bool:
    """a >= b for every non-negative value of the dims (NONNEG; cached: the lowering asks often)."""
    return NONNEG.nonneg(as_dim(a) - as_dim(b))


@dataclass(frozen=True)
class RowMap:
    """Where row (b, s, n), s in [0, part seq), of a part lives in one GM tensor.

    slot: the program operand (in0, sin0, tab0, col0, out0, sout0); tensor: spec input/output name; role
    "in" | "out"; space row | stat | table | col; dtype: IR dtype name ("T", "f32"); layout "bsnd" (the
    tensor is [B, extent, N, E]), "bnsd" ([B, N, extent, E]), "table" ([R, D]: the row is table row
    s + offset) or "col" ([D], the same for every row); extent: the tensor's sequence length; offset: the
    tensor's sequence index is s + offset (DimExprs; None for col)."""

    slot: str
    tensor: str
    role: str
    space: str
    dtype: str
    layout: str
    extent: DimExpr | None
    offset: DimExpr | None


@dataclass
class HeadCase:
    """The rows of a part for one truth assignment of its conditions (truth[j]: s < conds[j])."""

    truth: tuple
    prog: RowProgram


@dataclass
class HeadPart:
    """One part: `seq` rows per (b, n) (rows ordered (b, s, n)), the GM tensors it touches, its row
    conditions, one program per truth assignment, the column accumulators it feeds ({acc slot: (output,
    round mode)}), its lane tables ({const: (kind "perm" | "sign", family)}), the tensors that identify it
    (`own`: part-sized, read or written at row s) and its roots ((output, u offset lo) it writes)."""

    own: tuple
    seq: DimExpr
    maps: list = field(default_factory=list)
    conds: list = field(default_factory=list)
    cases: list = field(default_factory=list)
    accs: dict = field(default_factory=dict)
    lanes: dict = field(default_factory=dict)
    roots: list = field(default_factory=list)

    def map(self, slot: str) -> RowMap:
        """The RowMap of `slot`. Raises KeyError."""
        for m in self.maps:
            if m.slot == slot:
                return m
        raise KeyError(slot)

    def count(self, prefix: str) -> int:
        """Number of slots whose name starts with `prefix` followed by a digit."""
        return sum(1 for m in self.maps if re.fullmatch(prefix + r"\d+", m.slot)) if prefix != "acc" else len(self.accs)


@dataclass
class HeadProgram:
    """A lowered head-row kernel specialisation: its parts in row-space order, the column outputs that are
    constant zeros (an absent part's weight gradients), the runtime float attributes used (C++ attr_<name>)."""

    name: str
    layout: HeadLayout
    parts: list = field(default_factory=list)
    zero_outputs: list = field(default_factory=list)
    attrs: list = field(default_factory=list)


@dataclass(frozen=True)
class _Alt:
    """One way an output row is computed: the interval constraints on the root coordinate u ({(lo, hi)}:
    lo <= u < hi, None = unbounded), the rows read ({(tensor, c)}: sequence index u + c; None for columns),
    and the sequence-axis concat branches taken ({(value, c, k)})."""

    bounds: frozenset = frozenset()
    leaves: frozenset = frozenset()
    choices: frozenset = frozenset()


@dataclass
class _Fragment:
    root: str            # output name
    kind: str            # store | sstore | acc | zero
    src: str             # the value stored / accumulated
    round: str
    lo: DimExpr
    hi: DimExpr
    conds: dict          # X -> bool (s < X)
    leaves: frozenset    # {(tensor, k)}: sequence index s + k (k None for columns)
    own: frozenset       # part-sized tensors read or written at row s
    rows: frozenset      # {(tensor, k)} of the row/stat rows it touches: fragments sharing one are one part


class _HeadLowering:
    """Pass 1 (discovery: alternatives, fragments, parts) and pass 2 (per part and truth assignment,
    `_PartEmit`) over one graph."""

    def __init__(self, g: Graph, layout: HeadLayout):
        self.g, self.lay = g, layout
        self.vals = g.values()
        self.prod = g.producers()
        self.params = {p.value.name: p for p in g.params}
        names = [p.value.name for p in g.params] + [o for o, _ in g.outputs]
        self.order = {n: k for k, n in enumerate(names)}
        self.out_vals = dict(g.outputs)
        self.kinds: dict = {}
        self.memo: dict = {}
        self.table_dims = set()
        for p in g.params:
            sp, _ = self.kind(p.value.name)
            if sp == "table":
                self.table_dims |= as_dim(p.value.type.shape[0]).symbols()

    # ---------------------------------------------------------------- shapes
    def kind(self, v: str) -> tuple:
        """(space, sequence axis) of value v (classify, cached)."""
        if v not in self.kinds:
            self.kinds[v] = classify(self.vals[v].type.shape, self.lay)
        return self.kinds[v]

    def shape(self, v: str) -> tuple:
        """The symbolic shape of value v."""
        return self.vals[v].type.shape

    def extent(self, v: str) -> DimExpr:
        """The sequence length of value v (its dim on the sequence axis; a table's row count)."""
        sp, ax = self.kind(v)
        return as_dim(self.shape(v)[ax])

    def axis(self, n, v_rank: int) -> int:
        """Node n's `axis` attribute, non-negative for a result of rank v_rank."""
        a = n.attr("axis")
        return a % v_rank

    def dtype(self, v: str) -> str:
        """IR dtype name of value v ("T", "f32", ...)."""
        return dtype_name(self.vals[v].type.dtype)

    def check_align(self, n, v: str, x: str) -> None:
        """Operand x of node n (result v) must index the same (b, s, n) as v (tables: their row = v's
        sequence position)."""
        sp, ax = self.kind(v)
        xs, xax = self.kind(x)
        if xs in ("col", "scalar") or (xs == "table" and sp == "table"):
            return
        r, rx = len(self.shape(v)), len(self.shape(x))
        if xs == "table":
            if sp not in ("row", "lane") or rx != 2 or r - 2 != ax:
                raise IRError(f"head-row kernel: %{v} = {n.op}(...): table %{x} does not broadcast along the "
                              f"sequence axis of a head row")
            return
        if xax != ax or rx < 4 or r < 4:
            raise IRError(f"head-row kernel: %{v} = {n.op}(...): operand %{x} is not aligned with the result's "
                          f"(batch, sequence, head) axes")

    # ---------------------------------------------------------------- pass 1: alternatives
    def _merge(self, a: _Alt, b: _Alt):
        ch = {}
        for node, c, k in a.choices | b.choices:
            if ch.setdefault((node, c), k) != k:
                return None
        bounds = a.bounds | b.bounds
        lows = [lo for lo, _ in bounds if lo is not None]
        highs = [hi for _, hi in bounds if hi is not None]
        if any(ge(lo, hi) for lo in lows for hi in highs):
            return None
        return _Alt(bounds, a.leaves | b.leaves, a.choices | b.choices)

    def _product(self, lists) -> list:
        out = [_Alt()]
        for lst in lists:
            nxt = []
            for a in out:
                for b in lst:
                    m = self._merge(a, b)
                    if m is not None and m not in nxt:
                        nxt.append(m)
            out = nxt
        return out

    def alts(self, v: str, c) -> list:
        """The alternatives of row u + c of value v (c None for columns and scalars)."""
        key = (v, c)
        if key in self.memo:
            return self.memo[key]
        sp, ax = self.kind(v)
        if v in self.params:
            pr = self.params[v]
            if pr.kind == "attr" or sp == "scalar":
                res = [_Alt()]
            elif sp == "col":
                res = [_Alt(leaves=frozenset({(v, None)}))]
            else:
                res = [_Alt(leaves=frozenset({(v, c)}))]
        else:
            res = self._alts_node(self.prod[v], v, sp, ax, c)
        self.memo[key] = res
        return res

    def _alts_node(self, n, v, sp, ax, c) -> list:
        op = n.op
        rank = len(self.shape(v))
        if op in ("concat", "slice") and sp in ("row", "stat", "lane") and self.axis(n, rank) == ax:
            if op == "slice":
                start, stop = as_dim(n.attr("start")), as_dim(n.attr("stop"))
                if n.attr("step", 1) != 1:
                    raise IRError(f"head-row kernel: %{v}: strided slice along the sequence axis")
                bound = _Alt(bounds=frozenset({(Lit(0) - c, stop - start - c)}))
                return [m for a in self.alts(n.inputs[0], c + start) if (m := self._merge(a, bound))]
            out, off = [], Lit(0)
            for k, x in enumerate(n.inputs):
                ln = self.extent(x)
                piece = _Alt(bounds=frozenset({(off - c, off + ln - c)}), choices=frozenset({(v, c, k)}))
                out += [m for a in self.alts(x, c - off) if (m := self._merge(a, piece)) and m not in out]
                off = off + ln
            return out
        if op == "reduce":
            axes = {a % len(self.shape(n.inputs[0])) for a in n.attr("axes")}
            if axes & {0, 1, 2}:
                raise IRError(f"head-row kernel: %{v}: a sum over rows is only supported as an output (a column "
                              f"accumulator)")
        if op in ("const", "iota") and sp != "scalar":
            raise IRError(f"head-row kernel: %{v}: {op} of shape {list(map(str, self.shape(v)))} inside a row")
        if op == "permute":
            perm = tuple(n.attr("perm"))
            if perm[:3] not in ((0, 2, 1), (0, 1, 2)) or perm[3:] != tuple(range(3, rank)):
                raise IRError(f"head-row kernel: %{v}: permute {perm} is not a BSND <-> BNSD transpose")
            return self.alts(n.inputs[0], c)
        if op == "reshape":
            x = n.inputs[0]
            if [str(d) for d in self.shape(x)[:3]] != [str(d) for d in self.shape(v)[:3]]:
                raise IRError(f"head-row kernel: %{v}: reshape changes the (batch, sequence, head) axes")
            return self.alts(x, c)
        lists = []
        for x in n.inputs:
            xs, _ = self.kind(x)
            if xs in ("col", "scalar"):
                lists.append(self.alts(x, None))
            else:
                if op not in ("concat", "slice"):
                    self.check_align(n, v, x)
                lists.append(self.alts(x, c))
        return self._product(lists)

    # ---------------------------------------------------------------- pass 1: roots, fragments, parts
    def _root(self, out: str, v: str):
        """(kind, source value, round mode, extent) of output `out` = value v."""
        src, rnd = v, "none"
        n = self.prod.get(v)
        if n is not None and n.op == "cast" and dtype_name(n.attr("to")) != "f32":
            src, rnd = n.inputs[0], n.attr("round") or "none"
        sp, _ = self.kind(src)
        if sp == "row":
            return "store", src, rnd, self.extent(src)
        if sp == "stat":
            return "sstore", src, rnd, self.extent(src)
        if sp == "col":
            m = self.prod.get(src)
            if m is not None and m.op == "reduce" and m.attr("kind") == "sum":
                x = m.inputs[0]
                xs, _ = self.kind(x)
                axes = {a % len(self.shape(x)) for a in m.attr("axes")}
                if xs == "row" and axes == {0, 1, 2}:
                    return "acc", x, rnd, self.extent(x)
            if self._is_zero(src):
                return "zero", src, rnd, None
        raise IRError(f"head-row kernel: output {out} (%{v}) is not a head row, a statistic, a sum over rows or "
                      f"a zero column")

    def _is_zero(self, v: str) -> bool:
        n = self.prod.get(v)
        while n is not None and n.op in ("broadcast", "cast", "reshape"):
            n = self.prod.get(n.inputs[0])
        return n is not None and n.op == "const" and float(n.attr("value")) == 0.0

    def _max(self, xs, what):
        for x in xs:
            if all(ge(x, y) for y in xs):
                return x
        raise IRError(f"head-row kernel: cannot order the {what} bounds {', '.join(map(str, xs))}")

    def _min(self, xs, what):
        for x in xs:
            if all(ge(y, x) for y in xs):
                return x
        raise IRError(f"head-row kernel: cannot order the {what} bounds {', '.join(map(str, xs))}")

    def _fragment(self, out, kind, src, rnd, extent, alt: _Alt):
        lows, highs, cb = [], [], []
        for lo, hi in alt.bounds | {(Lit(0), extent)}:
            for b, is_lo in ((lo, True), (hi, False)):
                if b is None:
                    continue
                if b.symbols() & self.table_dims:
                    cb.append((b, is_lo))
                else:
                    (lows if is_lo else highs).append(b)
        lo, hi = self._max(lows, "lower"), self._min(highs, "upper")
        conds = {}
        for b, is_lo in cb:
            x = b - lo
            if conds.setdefault(x, not is_lo) != (not is_lo):
                return None
        leaves = frozenset((t, None if c is None else lo + c) for t, c in alt.leaves)
        L = hi - lo
        own = {t for t, k in leaves if k == Lit(0) and self.kind(t)[0] in ("row", "stat") and self.extent(t) == L}
        rows = {(t, k) for t, k in leaves if self.kind(t)[0] in ("row", "stat")}
        if kind in ("store", "sstore"):
            rows.add((out, lo))
            if lo == Lit(0) and extent == L:
                own.add(out)
        return _Fragment(out, kind, src, rnd, lo, hi, conds, leaves, frozenset(own), frozenset(rows))

    def run(self) -> HeadProgram:
        """Pass 1 over every output, then pass 2 per part: the head program (not yet verified)."""
        hp = HeadProgram(self.g.name, self.lay)
        frags = []
        for out, v in self.g.outputs:
            kind, src, rnd, extent = self._root(out, v)
            if kind == "zero":
                hp.zero_outputs.append(out)
                continue
            got = [f for a in self.alts(src, Lit(0)) if (f := self._fragment(out, kind, src, rnd, extent, a))]
            if not got:
                raise IRError(f"head-row kernel: output {out} has no rows")
            frags += got
        # parts: fragments that touch the same GM rows
        groups: list[list] = []
        for f in frags:
            hit = [gr for gr in groups if any(f.rows & h.rows for h in gr)]
            merged = [h for gr in hit for h in gr] + [f]
            groups = [gr for gr in groups if gr not in hit] + [merged]
        for gr in groups:
            if not any(f.own for f in gr):
                f = gr[0]
                raise IRError(f"head-row kernel: rows [{f.lo}, {f.hi}) of output {f.root} read or write no "
                              f"part-sized tensor at their own row; cannot identify their part")
        groups.sort(key=lambda gr: min(self.order[t] for f in gr for t in f.own))
        for gr in groups:
            hp.parts.append(self._part(gr))
        hp.attrs = sorted({a for p in hp.parts for c in p.cases for i in c.prog.instrs
                           for a in rowprog.attr_names(i.arg)})
        return hp

    def _part(self, frags) -> HeadPart:
        L = frags[0].hi - frags[0].lo
        for f in frags:
            if f.hi - f.lo != L:
                raise IRError(f"head-row kernel: part of {sorted(f.own)} has rows of different lengths "
                              f"({L} and {f.hi - f.lo})")
        own = sorted({t for f in frags for t in f.own}, key=self.order.get)
        part = HeadPart(tuple(own), L)
        part.conds = sorted({x for f in frags for x in f.conds}, key=str)
        slots: dict = {}
        leaves = sorted({lf for f in frags for lf in f.leaves}, key=lambda t: (self.order[t[0]], str(t[1])))
        for t, k in leaves:
            sp, _ = self.kind(t)
            self._add_map(part, slots, ("in", t, k), t, "in", sp, k)
        roots = sorted({(f.root, f.kind, f.lo) for f in frags}, key=lambda r: self.order[r[0]])
        for out, kind, lo in roots:
            v = self.out_vals[out]
            if kind == "acc":
                slot = f"acc{len(part.accs)}"
                rnd = next(f.round for f in frags if f.root == out)
                part.accs[slot] = (out, ROUND_MODES[rnd])
                slots[("out", out, None)] = slot
            else:
                self._add_map(part, slots, ("out", out, lo), out, "out", "row" if kind == "store" else "stat", lo, v)
            part.roots.append((out, lo))
        for truth in itertools.product((True, False), repeat=len(part.conds)):
            tv = dict(zip(part.conds, truth))
            emit = _PartEmit(self, part, slots, tv)
            for out, kind, lo in roots:
                fs = [f for f in frags if f.root == out and f.lo == lo and all(tv[x] == b for x, b in f.conds.items())]
                if len(fs) != 1:
                    raise IRError(f"head-row kernel: output {out}: {len(fs)} computations for the rows of part "
                                  f"{own[0]} where {_truth_text(part.conds, truth)}")
                emit.root(fs[0], slots)
            part.cases.append(HeadCase(truth, emit.finish()))
        return part

    def _add_map(self, part, slots, key, t, role, sp, k, value=None):
        if key in slots:
            return
        prefix = ROLE_PREFIX[(role, sp)]
        slot = f"{prefix}{sum(1 for m in part.maps if m.slot.startswith(prefix) and m.slot[len(prefix):].isdigit())}"
        slots[key] = slot
        v = value or t
        if sp == "col":
            layout, extent, off = "col", None, None
        elif sp == "table":
            layout, extent, off = "table", as_dim(self.shape(v)[0]), k
        else:
            _, ax = self.kind(v)
            layout, extent, off = ("bsnd" if ax == 1 else "bnsd"), self.extent(v), k
        part.maps.append(RowMap(slot, t, role, sp, self.dtype(v), layout, extent, off))


def _truth_text(conds, truth) -> str:
    return " and ".join(f"s {'<' if b else '>='} {x}" for x, b in zip(conds, truth)) or "always"


class _PartEmit:
    """Pass 2: the rows of one part under one truth assignment -> RowProgram (instructions on slots)."""

    def __init__(self, low: _HeadLowering, part: HeadPart, slots: dict, truth: dict):
        self.low, self.part, self.slots, self.truth = low, part, slots, truth
        self.p = RowProgram(low.g.name, low.lay)
        self.space: dict = {}
        self.scalar_text: dict = {}
        self.alias: dict = {}
        self.lanes: dict = {}    # lane operand -> (source row operand, {d: signed 1-based source lanes})
        self.memo: dict = {}
        self.names: set = set()

    def operand(self, name: str) -> str:
        """The buffer-level name of operand `name` (rowprog.lower_elementwise protocol)."""
        return self.alias.get(name, name)

    def fresh(self, v: str, sp: str) -> str:
        """A new operand name for value v (v, v_1, ...) in space sp."""
        name, k = v, 1
        while name in self.names:
            name, k = f"{v}_{k}", k + 1
        self.names.add(name)
        self.space[name] = sp
        return name

    # ---------------------------------------------------------------- decisions on the part's rows
    def always_lt(self, k, e):
        """For every row s of the part (under the truth assignment): is s + k < e? True/False, None if it
        depends on s."""
        e = as_dim(e)
        L = self.part.seq
        if e.symbols() & self.low.table_dims:
            return self.truth.get(e - k)
        if ge(e, k + L):
            return True
        if ge(k, e):
            return False
        return None

    # ---------------------------------------------------------------- roots
    def root(self, f: _Fragment, slots: dict) -> None:
        """The instructions of fragment f: its value, then the store / stat store / accumulate (at the spec line of
        the node producing the output)."""
        emit = self.p.instrs.append
        name = self.value(f.src, f.lo)
        start = len(self.p.instrs)
        if f.kind == "store":
            emit(Instr("store", "", (self.operand(name),), arg=ROUND_MODES[f.round], gm=slots[("out", f.root, f.lo)],
                       space="row"))
        elif f.kind == "sstore":
            src = self.scalar_text.get(name, self.operand(name))
            if self.space[name] == "scalar":
                emit(Instr("sexpr", f"st_{name}", arg=src, space="stat"))
                src = f"st_{name}"
            emit(Instr("sstore", "", (src,), arg=ROUND_MODES[f.round], gm=slots[("out", f.root, f.lo)], space="stat"))
        else:
            emit(Instr("acc", slots[("out", f.root, None)], (self.operand(name),), space="col"))
        n = self.low.prod.get(self.low.out_vals[f.root])
        stamp(self.p.instrs, start, n.loc if n is not None else "")

    # ---------------------------------------------------------------- values
    def value(self, v: str, k) -> str:
        """Operand name of row s + k of value v (k None for columns and scalars), lowering it once."""
        key = (v, k)
        if key not in self.memo:
            sp, ax = self.low.kind(v)
            if v in self.low.params:
                self.memo[key] = self.leaf(v, k, sp)   # a load: stamped by the cast / view (or user) asking for it
            else:
                n = self.low.prod[v]
                start = len(self.p.instrs)
                self.memo[key] = self.node(n, v, sp, ax, k)
                stamp(self.p.instrs, start, n.loc)   # operands lowered inside node() were stamped by their own
        return self.memo[key]

    def leaf(self, v: str, k, sp: str) -> str:
        """A graph parameter at row s + k: attribute -> scalar text, row -> cast_in, stat -> sload, table or
        column -> its slot (a predefined UB row)."""
        pr = self.low.params[v]
        if pr.kind == "attr":
            name = self.fresh(v, "scalar")
            self.scalar_text[name] = f"attr_{v}"
            return name
        slot = self.slots.get(("in", v, k))
        if slot is None:
            raise IRError(f"head-row kernel: row {k} of %{v} was not found by the part discovery")
        if sp in ("table", "col"):
            self.space[slot] = sp
            if slot not in self.p.consts:
                self.p.consts.append(slot)
            return slot
        self._gm(slot)
        name = self.fresh(v, sp)
        if sp == "row":
            self.p.instrs.append(Instr("cast_in", name, gm=slot, space="row"))
        elif sp == "stat":
            self.p.instrs.append(Instr("sload", name, gm=slot, space="stat"))
        else:
            raise IRError(f"head-row kernel: input %{v} of space {sp}")
        return name

    def _gm(self, slot: str) -> None:
        m = self.part.map(slot)
        if all(t.name != slot for t in self.p.gm):
            self.p.gm.append(GmTensor(slot, m.role, m.space, m.dtype))

    def node(self, n, v: str, sp: str, ax, k) -> str:
        """Node n (result v, space sp, sequence axis ax) at row s + k: addressing ops resolve to the row they
        read, reductions over D become ReduceSum, lane ops go to lane_op, the rest to lower_elementwise."""
        op, ins = n.op, list(n.inputs)
        rank = len(self.low.shape(v))
        if op == "cast":
            if dtype_name(n.attr("to")) != "f32":
                raise IRError(f"head-row kernel: %{v}: a narrowing cast is only supported right before an output")
            return self.value(ins[0], k)
        if op == "permute":
            return self.value(ins[0], k)
        if op in ("slice", "concat") and sp in ("row", "stat", "lane") and self.low.axis(n, rank) == ax:
            if op == "slice":
                return self.value(ins[0], k + as_dim(n.attr("start")))
            off = Lit(0)
            for x in ins:
                ln = self.low.extent(x)
                lo, hi = self.always_lt(k, off), self.always_lt(k, off + ln)
                if lo is False and hi is True:
                    return self.value(x, k - off)
                if not (lo is True or hi is False):
                    raise IRError(f"head-row kernel: %{v}: the part's rows straddle a piece boundary of the "
                                  f"sequence concat (rows s + {k}, piece [{off}, {off + ln}))")
                off = off + ln
            raise IRError(f"head-row kernel: %{v}: no piece of the sequence concat holds rows s + {k}")
        if op == "const":
            if sp != "scalar":
                raise IRError(f"head-row kernel: %{v}: non-scalar constant inside a row")
            name = self.fresh(v, "scalar")
            self.scalar_text[name] = rowprog._float_literal(n.attr("value"))
            return name
        if op == "dimval":   # the head dim as a float (a mean's adjoint divides by it): the tiling's headDim_
            if sp != "scalar" or as_dim(n.attr("n")) != Sym(self.low.lay.dim) or n.attr("dtype") != DType.f32:
                raise IRError(f"head-row kernel: %{v}: the value of dim {n.attr('n')}; only the head dim "
                              f"{self.low.lay.dim} is read, as an f32 scalar")
            name = self.fresh(v, "scalar")
            self.scalar_text[name] = "static_cast<float>(headDim_)"
            return name
        if op == "reduce":
            x = ins[0]
            axes = {a % len(self.low.shape(x)) for a in n.attr("axes")}
            kind = n.attr("kind")
            if self.low.kind(x)[0] != "row" or axes != {len(self.low.shape(x)) - 1} or kind not in ("sum", "mean"):
                raise IRError(f"head-row kernel: %{v}: only a row sum/mean over {self.low.lay.dim} is supported")
            src = self.operand(self.value(x, k))
            name = self.fresh(v, "stat")
            self.p.instrs.append(Instr("rsum", f"sum_{name}", (src,), space="stat"))
            div = " / static_cast<float>(headDim_)" if kind == "mean" else ""
            self.p.instrs.append(Instr("sexpr", name, arg=f"sum_{name}{div}", space="stat"))
            return name
        lane_in = any(self.low.kind(x)[0] == "lane" for x in ins)
        if op in ("reshape", "slice", "concat") or lane_in:
            return self.lane_op(n, v, sp, k)
        names = [self.value(x, None if self.low.kind(x)[0] in ("col", "scalar") else k) for x in ins]
        r = self.fresh(v, sp)
        lower_elementwise(self, r, sp, op, names)
        return r

    # ---------------------------------------------------------------- lanes
    def _lane_dims(self, v: str, d: int) -> tuple:

        tail = self.low.shape(v)[3:]
        extra = set().union(*[as_dim(t).symbols() for t in tail]) - {self.low.lay.dim}
        if extra:
            raise IRError(f"head-row kernel: %{v}: lane dims depend on {sorted(extra)}")
        return eval_shape(tail, {self.low.lay.dim: d})

    def as_lane(self, x: str, k) -> tuple:
        """(source row operand, {d: lane map}) of value x at row s + k (a head row is the identity map)."""
        name = self.value(x, k)
        if name in self.lanes:
            return self.lanes[name]
        if self.space.get(name) != "row":
            raise IRError(f"head-row kernel: %{x}: lane operations apply to head rows only")
        return self.operand(name), {d: np.arange(1, d + 1) for d in SAMPLE_D}

    def lane_op(self, n, v: str, sp: str, k) -> str:
        """reshape / slice / concat / neg along D: the lane maps of the result; a result back in row space
        becomes instructions (finish_lanes)."""
        op, ins = n.op, list(n.inputs)
        rank = len(self.low.shape(v))
        if op == "reshape":
            src, maps = self.as_lane(ins[0], k)
            maps = {d: m.reshape(self._lane_dims(v, d)) for d, m in maps.items()}
        elif op == "slice":
            a = self.low.axis(n, rank)
            if a < 3:
                raise IRError(f"head-row kernel: %{v}: slice along a batch/head axis")
            src, maps = self.as_lane(ins[0], k)
            step = int(n.attr("step", 1))
            out = {}
            for d, m in maps.items():
                env = {self.low.lay.dim: d}
                start, stop = as_dim(n.attr("start")).evaluate(env), as_dim(n.attr("stop")).evaluate(env)
                out[d] = np.take(m, range(start, stop, step), axis=a - 3)
            maps = out
        elif op == "concat":
            a = self.low.axis(n, rank)
            if a < 3:
                raise IRError(f"head-row kernel: %{v}: concat along a batch/head axis of lane values")
            pieces = [self.as_lane(x, k) for x in ins]
            src = pieces[0][0]
            if any(p[0] != src for p in pieces):
                raise IRError(f"head-row kernel: %{v}: a lane concat of different rows")
            maps = {d: np.concatenate([p[1][d] for p in pieces], axis=a - 3) for d in SAMPLE_D}
        elif op == "neg":
            src, maps = self.as_lane(ins[0], k)
            maps = {d: -m for d, m in maps.items()}
        else:
            raise IRError(f"head-row kernel: %{v}: {op} of lane values (only reshape, slice, concat and neg along "
                          f"{self.low.lay.dim} are)")
        if sp == "row":
            return self.finish_lanes(v, src, maps)
        name = self.fresh(v, "lane")
        self.lanes[name] = (src, maps)
        return name

    def finish_lanes(self, v: str, src: str, maps: dict) -> str:
        """Recognise the permutation and sign families of a full-row lane map and emit vgather / the sign
        multiplication (nothing for the identity). Raises IRError for an unknown family."""
        flat = {d: m.reshape(-1) for d, m in maps.items()}
        for d, m in flat.items():
            if len(m) != d:
                raise IRError(f"head-row kernel: %{v}: lane map of {len(m)} lanes for D={d}")
        perm = _family(PERMS, flat, lambda m, j: abs(int(m[j])) - 1, v, "permutation")
        sign = _family(SIGNS, flat, lambda m, j: 1 if m[j] > 0 else -1, v, "sign pattern")
        emit = self.p.instrs.append
        cur = src
        if perm != "identity":
            r = self.fresh(f"{v}_g", "row")
            emit(Instr("vgather", r, (cur,), "Gather", self.lane_const("perm", perm), space="row"))
            cur = r
        if sign == "all":
            r = self.fresh(v, "row")
            emit(Instr("vscalar", r, (cur,), "Muls", "-1.0f", space="row"))
            cur = r
        elif sign != "none":
            r = self.fresh(v, "row")
            emit(Instr("vbin", r, (cur, self.lane_const("sign", sign)), "Mul", space="row"))
            cur = r
        if cur == src:
            r = self.fresh(v, "row")
            self.alias[r] = src
            return r
        return cur

    def lane_const(self, kind: str, family: str) -> str:
        """The part's lane table (perm<j> / sign<j>) of `family`, created on first use."""
        for name, (k, f) in self.part.lanes.items():
            if k == kind and f == family:
                break
        else:
            name = f"{kind}{sum(1 for k2, _ in self.part.lanes.values() if k2 == kind)}"
            self.part.lanes[name] = (kind, family)
        if name not in self.p.consts:
            self.p.consts.append(name)
        self.space[name] = "lane"
        return name

    # ---------------------------------------------------------------- finish
    def finish(self) -> RowProgram:
        """Schedule, allocate UB temporaries, canonical scalar names, verify: the case program."""
        p = self.p
        for m in self.part.maps:
            if m.role == "out" and m.space in ("row", "stat"):
                self._gm(m.slot)
        p.consts += [a for a in self.part.accs if a not in p.consts]
        p.gm.sort(key=lambda t: _slot_key(t.name))
        p.consts.sort(key=_slot_key)
        rowprog._assign_levels(p)
        p.instrs = rowprog._schedule(p.instrs)
        rowprog._allocate(p)
        _canonical_scalars(p)
        rowprog.verify_program(p)
        return p


def _slot_key(name: str):
    m = re.fullmatch(r"([a-z]+)(\d+)", name)
    return (m.group(1), int(m.group(2))) if m else (name, 0)


def _family(table: dict, flat: dict, fn, v: str, what: str) -> str:
    for name, (_expr, py) in table.items():
        if all(all(fn(m, j) == py(j, d) for j in range(d)) for d, m in flat.items()):
            return name
    raise IRError(f"head-row kernel: %{v}: the lane {what} along D is not one of {', '.join(table)}")


def _canonical_scalars(p: RowProgram) -> None:
    """Rename the scalar (stat-space) names of `p` to s0, s1, ... in definition order, so that programs of
    parts that compute alike print alike."""
    where: dict = {}
    for i in p.instrs:
        if i.space == "stat" and i.dst and i.dst not in where:
            where[i.dst] = f"s{len(where)}"
    p.instrs = [evolve(i, dst=where.get(i.dst, i.dst), srcs=tuple(where.get(x, x) for x in i.srcs),
                                    arg=rowprog._rename(i.arg, where)) for i in p.instrs]


def rename_slots(part: HeadPart, mapping: dict) -> HeadPart:
    """A copy of `part` with its slots renamed by `mapping` ({old slot: new slot}, every map and accumulator
    slot of the part; lane tables keep their names): maps (sorted by new slot), accumulators and every
    case program's operands. Used to number a part's slots by a larger binding (an emitter's union over
    specialisations). Raises IRError when the renamed programs do not verify."""
    def ren(x):
        return mapping.get(x, x)

    out = HeadPart(part.own, part.seq, conds=list(part.conds), lanes=dict(part.lanes), roots=list(part.roots))
    out.maps = sorted((RowMap(ren(m.slot), m.tensor, m.role, m.space, m.dtype, m.layout, m.extent, m.offset)
                       for m in part.maps), key=lambda m: _slot_key(m.slot))
    out.accs = {ren(a): v for a, v in sorted(part.accs.items(), key=lambda kv: _slot_key(ren(kv[0])))}
    for case in part.cases:
        p = case.prog
        q = RowProgram(p.name, p.layout, row_temps=p.row_temps, levels=p.levels)
        q.gm = sorted((GmTensor(ren(t.name), t.role, t.space, t.dtype) for t in p.gm), key=lambda t: _slot_key(t.name))
        q.consts = sorted((ren(c) for c in p.consts), key=_slot_key)
        q.instrs = [evolve(i, dst=ren(i.dst), srcs=tuple(ren(x) for x in i.srcs),
                                        gm=ren(i.gm) if i.gm else "") for i in p.instrs]
        rowprog.verify_program(q)
        out.cases.append(HeadCase(case.truth, q))
    return out


def lower_heads(g: Graph, layout: HeadLayout) -> HeadProgram:
    """Lower an optimized tensor-IR graph (one specialisation, opgen.passes.pipeline.optimize) to a head
    program (module docstring) and verify it. Raises IRError naming the value when a shape, an op or an
    addressing pattern has no head-row lowering."""
    hp = _HeadLowering(g, layout).run()
    verify_head_program(hp)
    return hp


def verify_head_program(hp: HeadProgram) -> None:
    """Every case program verifies (opgen.kernel.rowprog.verify_program) and uses only its part's slots and
    lane tables; every truth assignment of the part's conditions has exactly one case; every output slot
    is written exactly once per row in every case; stat tensors are read and written contiguously (a
    part-sized BSND tensor at offset 0). Raises IRError naming the part and the rule."""
    for part in hp.parts:
        name = part.own[0] if part.own else "?"
        want = set(itertools.product((True, False), repeat=len(part.conds)))
        got = [c.truth for c in part.cases]
        if set(got) != want or len(got) != len(want):
            raise IRError(f"head program {hp.name}: part {name}: cases {got} do not cover the conditions once")
        slots = {m.slot for m in part.maps} | set(part.accs) | set(part.lanes)
        outs = {m.slot for m in part.maps if m.role == "out"} | set(part.accs)
        for m in part.maps:
            if m.space == "stat" and (m.layout != "bsnd" or m.offset != Lit(0) or m.extent != part.seq):
                raise IRError(f"head program {hp.name}: part {name}: stat tensor {m.tensor} is not part-sized at "
                              f"offset 0 (its rows would not be contiguous)")
        for case in part.cases:
            p = case.prog
            rowprog.verify_program(p)
            used = {i.gm for i in p.instrs if i.gm} | set(p.consts)
            if not used <= slots:
                raise IRError(f"head program {hp.name}: part {name}: unknown slots {sorted(used - slots)}")
            written = [i.gm for i in p.instrs if i.kind in ("store", "sstore")] + \
                      [i.dst for i in p.instrs if i.kind == "acc"]
            if sorted(written) != sorted(outs):
                raise IRError(f"head program {hp.name}: part {name}: case {case.truth} writes {sorted(written)}, "
                              f"not each of {sorted(outs)} once")


def _expr(e) -> str:
    return "-" if e is None else str(e)


def part_text(part: HeadPart, names: bool = True, locs: bool = False) -> str:
    """Canonical text of one part. names=False leaves out tensor names and addressing (what `body_text`
    compares); locs=True ends each instruction with its spec location (`  @ file.py:line`)."""
    lines = [f"part {part.own[0] if names else '_'} [rows s < {part.seq if names else 'S'}] {{"]
    for m in part.maps:
        where = f" {m.tensor} {m.layout} extent {_expr(m.extent)} offset {_expr(m.offset)}" if names else ""
        lines.append(f"  map {m.slot} {m.role} {m.space} {m.dtype}{where}")
    for j, x in enumerate(part.conds):
        lines.append(f"  cond c{j}: s < {x if names else '_'}")
    for a, (out, rm) in part.accs.items():
        lines.append(f"  acc {a} -> {out if names else '_'} ({rm})")
    for c, (kind, fam) in part.lanes.items():
        lines.append(f"  lane {c} = {kind} {fam}")
    for case in part.cases:
        lines.append(f"  case {_truth_text([f'c{j}' for j in range(len(part.conds))], case.truth)} "
                     f"(row temps {case.prog.row_temps}) {{")
        for i in case.prog.instrs:
            lines.append(f"    [{i.space}] {rowprog._instr_text(i)}{at_suffix(i.loc) if locs else ''}")
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines)


def body_text(part: HeadPart) -> str:
    """The part's computation without tensor names or addressing: equal for parts an emitter can share one
    body for (e.g. query and key with the same norm and RoPE)."""
    return part_text(part, names=False)


def print_head_program(hp: HeadProgram, locs: bool = False) -> str:
    """Canonical text of a head program (ends with a newline); locs=True: with each instruction's spec location
    (`opgen graph --stage kernel`)."""
    lines = [f"headprogram {hp.name} {{"]
    if hp.attrs:
        lines.append(f"  attrs {', '.join(hp.attrs)}")
    if hp.zero_outputs:
        lines.append(f"  zero {', '.join(hp.zero_outputs)}")
    for part in hp.parts:
        lines += ["  " + ln for ln in part_text(part, locs=locs).splitlines()]
    lines.append("}")
    return "\n".join(lines) + "\n"
