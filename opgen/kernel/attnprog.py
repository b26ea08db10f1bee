"""Attention programs: the Kernel IR of the mixed (cube + vector) attention kernels, over a key set.

The key set (`AttentionProgram.keyset`, KEY_FORMS): "selected" — the key blocks an index table selects (NSA, TND) — or
"dense" — every key of the unit's batch and kv head (FlashAttentionScore, BNSD; the batch dim has no letter, the
key / value rows are the key tensor broadcast over the G heads instead of a gather). Both share every rule below;
only the shape keys of each class differ.

A selected-attention kernel works on *units*: one query token t, one kv head n2 and a group of the G query heads
of n2 (the M rows of every matmul; docs/reference/nsa_selected_attention.md §2.1); a dense one on (batch, kv head,
block of query rows, group of heads) (opgen.tiling.attention). Every tensor-IR value of the
optimized graph is classified by its shape (T1, N2, G, L = CNT * BS keys, D, Dv) and its producer:

  gm      an operator input (or a f32/reshaped/permuted view of one): Q / dO / O head rows [T1, N2, G, E], the
          stats [T1, N1, 8], key / value [T2, N2, E] (gather sources)
  idx     integer / bool layout values (token -> batch, in-batch position s, key positions idx * bs + j, the
          gathered rows kv0 + idx * bs + j); the kernel computes them with scalar code (§1.3, §2.2)
  keymask the causal mask `key position > s` (§2.3), [T1, N2, 1, L]
  gather  rows of key / value selected by the topk blocks, [T1, N2, L, E] (gathered straight into L1)
  cube    a matmul result (§2.4, §2.5): on the cube (AIC), fp32 in L0C
  row     a vector row: one (unit, head) row of keys, fp32 in UB (AIV)
  head    a vector head row: one (unit, head) row of E elements, fp32 in UB
  stat    a per-row fp32 scalar (max, sum, Dr)
  quant   a row rounded to T that a matmul reads: stored as T to a GM workspace tile (§2.4 P, §2.5 P and dS)
  scalar  a constant or a float attribute (scale)

`lower(graph)` turns the graph into an `AttentionProgram`:
  cube ops    each matmul with its form (NT: C = A Bᵀ, NN: C = A B, TN: C = Aᵀ B, with A/B stored row-major), its
              operands (head rows of a GM tensor, gathered rows, or a workspace tile written by the vector stage),
              its phase (1: before the vector stage of an item, 2: after it, because it reads a vector result) and
              where its result goes: `tile` (fp32 workspace tile for the vector stage), `out` (accumulated over
              the key chunks in L0C and written to an output by Fixpipe, cast to T), `acc` (accumulated over the key
              chunks, fp32 to a workspace, finished by the post pass) or `scatter` (per selected block, fp32 atomic
              add into a [T2, N2, E] workspace at rows kv0 + idx * bs, finished by the post pass);
  vector      instructions over rows (count = the row's keys), head rows and per-row scalars, in SSA form with
              registers assigned by liveness (an operand that dies is overwritten in place);
  post        per output finished from a workspace: optional scale, cast to T (§2.5 "a post kernel multiplies by
              scale (dq, dk) and casts");
  L1 plan     the L1 buffers of the AIC (head rows of a unit, gathered key chunks, tiles), gathered operands of
              different phases sharing one buffer.
`full_rows`: the vector stage reduces over the keys (the forward's softmax max / sum), so an item is a whole unit
and S is kept for all L keys; otherwise (backward: P from the saved max / sum) an item is one key chunk of a unit.
A dense forward is rewritten into an online softmax over its key chunks (`online_softmax`: `online`, item = one key
chunk, the running max / sum per row, each chunk's P V an fp32 `pv` workspace tile the vector stage accumulates).
A dense backward (FlashAttentionScoreGrad) lowers to the selected backward's phases: its dK = sum_G dSᵀ Q and
dV = sum_G Pᵀ dO are `scatter` destinations added at the key chunk's contiguous rows (the reduction over the G
heads is the TN product's contraction over the unit's rows), its softmax read from the saved max / sum.

`verify_program` checks def-before-use, phases (a phase-1 matmul reads no vector result, every vector-read matmul
result is a tile), registers and the post list; `print_program` is the canonical text (`opgen graph --stage
kernel`). Reference facts: docs/reference/ascendc.md §1.10 (cube path, fractal layouts), §1.6 (cross-core flags),
§1.9 (vector count forms, Cast round modes).
"""

from __future__ import annotations

import math
import re

from dataclasses import dataclass, field, replace

from opgen.errors import IRError
from opgen.ir.core import Graph
from opgen.ir.dims import as_dim
from opgen.ir.dtypes import dtype_name
from opgen.ir.locs import at_suffix, stamp
from opgen.kernel.isa import FP32_MAX
from opgen.kernel.rowlayout import Unsupported
from opgen.kernel.rowprog import ROUND_MODES

FORMS = {(False, True): "NT", (False, False): "NN", (True, False): "TN"}
"""Matmul form by (transpose_a, transpose_b): the layouts the cube path loads (docs/reference/ascendc.md §1.10)."""
VECTOR_KINDS = ("ld_tile", "ld_stat", "ld_head", "mask", "mask_in", "muls", "adds", "exp", "vmul", "vsub", "vadd",
                "rmax", "rsum", "st_tile", "st_stat8", "omax", "osum", "oacc", "st_out")
"""Vector instruction kinds (see `VInstr`)."""
@dataclass(frozen=True)
class Operand:
    """A cube operand as stored in GM: `kind` "heads" (the unit's rows of a head-major tensor [T1, N1, E]),
    "gather" (selected rows of a [T2, N2, E] tensor) or "tile" (a workspace tile [rows, keys] written by the vector
    stage, T); `tensor` the GM tensor or tile name; `cols` the stored row length ("D", "Dv" or "keys")."""

    kind: str
    tensor: str
    cols: str


@dataclass(frozen=True)
class CubeOp:
    """One matmul of an item: C[m, n] = op(A) op(B) (`form` NT / NN / TN), m/n/k symbolic ("rows" = heads of the
    unit, "keys" = keys of the item, "D", "Dv"); `phase` 1 or 2; `dest` tile | out | acc | scatter; `target` the
    tile name (tile) or the output name (out / acc / scatter); `value` the tensor-IR value it computes."""

    value: str
    form: str
    a: Operand
    b: Operand
    m: str
    n: str
    k: str
    phase: int
    dest: str = ""
    target: str = ""
    loc: str = field(default="", compare=False)   # spec file:line of the matmul


@dataclass(frozen=True)
class VInstr:
    """One vector instruction (SSA: dst/srcs are tensor-IR value names; `regs` of the program maps row/head values
    to registers).

    kind      meaning (n = elements of the row)
    ld_tile   row dst <- fp32 workspace tile `arg` (the cube's result), this row
    ld_stat   stat dst <- GM tensor `arg` [T1, N1, 8], column 0 of this row's head
    ld_head   head dst <- GM tensor `arg` [T1, N1, E], this row's head, cast to fp32
    mask      row dst <- srcs[0] with every key whose in-batch position exceeds s set to `arg` (§2.3)
    mask_in   row dst <- srcs[0] with every key the bool mask input `op` [S1, S2] sets (at the row's query row) set
              to `arg` (dense keys: an explicit mask)
    muls      dst <- srcs[0] * scalar C++ expression `arg`          (Muls)
    adds      dst <- srcs[0] + scalar C++ expression `arg`          (Adds)
    exp       dst <- exp(srcs[0])                                   (Exp)
    vmul/vsub/vadd  dst <- srcs[0] op srcs[1]                       (Mul / Sub / Add, count n)
    rmax/rsum stat dst <- max / sum of srcs[0] over the row          (Max tree / ReduceSum)
    st_tile   workspace tile `arg` (T) <- srcs[0] cast with round mode `op` (CAST_ROUND ...)
    st_stat8  GM output `arg` [T1, N1, 8] <- stat srcs[0], 8 copies
    The online softmax of a dense forward (`online_softmax`; docs/design.md "Kernel families", attention):
    omax      stat dst <- the running max m = max(m, srcs[0]) (srcs[0] the chunk's max; -inf before the first chunk),
              and stat `arg` <- alpha = exp(m_before - m) (the rescale of what earlier chunks summed)
    osum      stat dst <- the running sum l = l * srcs[1] + srcs[0] (srcs[0] the chunk's sum, srcs[1] alpha)
    oacc      the fp32 output accumulator O [rows, Dv] (UB) <- O * srcs[0] + the fp32 workspace tile `arg` (the
              chunk's P V; O = that tile at the first chunk)
    st_out    GM output `arg` <- O / srcs[1] cast with round mode `op`, stored as the inputs are (BNSD / BSND)
    `space`: row | head | stat | out (the O accumulator); `scope`: "unit" (once per unit: depends on no key row),
    "item", "pv" (after the item's phase-2 matmul: the O update) or "last" (after the unit's last item); `loc`: the
    spec line of the value it computes (a load: of the cast / view / matmul that made the value it loads)."""

    kind: str
    dst: str = ""
    srcs: tuple[str, ...] = ()
    arg: str = ""
    op: str = ""
    space: str = "row"
    scope: str = "item"
    loc: str = field(default="", compare=False)   # spec file:line of the tensor-IR value it was lowered from


@dataclass(frozen=True)
class PostOp:
    """Finish an output from its fp32 workspace: out = cast_T(ws * scale) (`scale` a C++ expression or "")."""

    output: str
    workspace: str
    scale: str
    round: str


@dataclass(frozen=True)
class L1Buffer:
    """An L1 buffer of the AIC plan: `role` heads | gather | tile, `cols` the stored row length, `operands` the GM
    tensors / tiles it holds (gathered operands of different phases share one buffer)."""

    name: str
    role: str
    cols: str
    operands: tuple[str, ...]


@dataclass
class AttentionProgram:
    """A lowered NSA kernel (module doc). gm: {input/output name: role}; tiles: {tile: "f32" or the data's dtype
    variable} in slot order;
    regs: {value: register} for row / head values; nregs: {"row": n, "head": n} registers per row of a pass;
    stats: per-row scalars kept across the items of a unit (unit-scope stats; online: the running max, sum and
    rescale too); online: the dense forward's softmax runs over key chunks (`online_softmax`); tile_cols: {tile:
    "Dv"} for the [rows, Dv] P V tiles of an online program (every other tile is [rows, keys])."""

    name: str
    causal: bool = False
    full_rows: bool = False
    gm: dict = field(default_factory=dict)
    cube: list[CubeOp] = field(default_factory=list)
    vector: list[VInstr] = field(default_factory=list)
    post: list[PostOp] = field(default_factory=list)
    tiles: dict = field(default_factory=dict)
    l1: list[L1Buffer] = field(default_factory=list)
    regs: dict = field(default_factory=dict)
    nregs: dict = field(default_factory=dict)
    stats: list[str] = field(default_factory=list)
    scalars: dict = field(default_factory=dict)   # float attribute the body reads: name -> IR param
    keyset: str = "selected"   # "dense": every key of the unit's batch and kv head; "selected": gathered blocks
    form: str = "TND"          # how the head-row tensors are stored: TND (selected), BNSD or BSND (dense)
    causal_offset: object = None   # dense: the mask `key > query + offset` (a dim expression; None: offset 0)
    online: bool = False
    tile_cols: dict = field(default_factory=dict)
    out_round: str = ""   # dense: the round mode of the output matmul's cast (Fixpipe rint; online: the vector Cast)

    def phase(self, k: int) -> list[CubeOp]:
        """The cube ops of phase k, in program order."""
        return [c for c in self.cube if c.phase == k]

    def l1_of(self, tensor: str) -> L1Buffer:
        """The L1 buffer holding GM tensor / tile `tensor`. Raises KeyError."""
        for b in self.l1:
            if tensor in b.operands:
                return b
        raise KeyError(tensor)


# ------------------------------------------------------------------------------------------------ shapes
def shape_key(shape, tokens: dict) -> str:
    """Letters of a shape's dims (size-1 dims dropped) by role (`tokens`: {dim text: letter}, the attention
    layout's opgen.kernel.attention.AttentionLayout.tokens): t T1, T T2, n N2, g G, h N1, l keys, d D, v Dv, 8, b the
    batches, c CNT, s BS; "?<dim>" for a dim with no role."""
    return "".join(tokens.get(str(d), "?" + str(d)) for d in shape if str(d) != "1")


DENSE_BLOCK = 16
"""Keys per block of a dense key set: the cube's fractal rows (the key row is padded to whole blocks, the pad keys
masked)."""
KEY_FORMS = {
    "selected": {"heads": ("tngd", "tngv"), "major": ("thd", "thv"), "stat": "th", "stat8": "th8", "statg": "tng",
                 "keysrc": ("nTd", "nTv"), "keyrows": ("ntld", "ntlv"), "keypos": "tnl", "qpos": "t",
                 "mask": "tnl"},
    "dense": {"heads": ("ngtd", "ngtv"), "major": ("htd", "htv"), "stat": "ht", "stat8": "ht8", "statg": "ngt",
              "keysrc": ("nTd", "nTv"), "keyrows": ("ngTd", "ngTv"), "keypos": "T", "qpos": "t", "mask": "tT",
              "stored": ("htd", "htv", "nTd", "nTv")},
}
"""The shape keys (shape_key letters) of each value class by key set: `heads` a unit's query-head rows (grouped
by kv head), `major` a head-major tensor, `stat` / `stat8` / `statg` per-row stats (plain, 8 copies, grouped),
`keysrc` a key / value tensor the keys are read from, `keyrows` its rows of the unit's key set (gathered: selected;
broadcast over the G heads: dense), `keypos` / `qpos` the key and query positions the causal mask compares and
`mask` the mask's shape, `stored` the query / key / value / output shapes as the kernel addresses them. Selected:
TND with the token dim first; dense: BNSD, the batch dim dropped (no letter); BSND inputs (`BSND_STORED`) are
permuted to BNSD in the spec and the output permuted back."""
BSND_STORED = {"thd": "htd", "thv": "htv", "Tnd": "nTd", "Tnv": "nTv"}
"""BSND shape keys of the dense query / key / value / output -> their BNSD keys (the permute (0, 2, 1, 3))."""


BATCH_PROBES = (((2, 3, 7), (4, 5, 9)), ((1, 6, 7), (3, 8, 9)))
"""Cumulative (query ends, kv ends) of the probe batches `batch_mask_kind` evaluates a mask on (T1 = 7, T2 = 9, Bn =
3): unequal lengths, a batch of one query token, the longer batch first and last."""


PROBE_CONSTANT_LIMIT = 512
"""The largest constant a TND batch mask may compute with (`_probes_past_constants`): its probes grow with it."""


def _probes_past_constants(order) -> tuple | None:
    """Probe batches longer than every constant the mask's nodes `order` compute with, so a rule that differs from
    the batch / causal mask only beyond some distance (a window `i - j >= 24`, a position cap) differs on a probe:
    (query ends, kv ends) of batches of lengths L + 3, 1, L + 4 against L + 4, 2, L + 5 and the reverse, L the
    largest constant's magnitude. None (the mask is not recognised) when a constant is above PROBE_CONSTANT_LIMIT."""
    import numpy as np

    big = 0
    for n in order:
        if n.op == "const":
            v = np.abs(np.asarray(n.attr("value"), np.float64))
            big = max(big, float(v.max()) if v.size else 0.0)
    if big > PROBE_CONSTANT_LIMIT or big != big:
        return None
    L = int(big)
    q, k = (L + 3, 1, L + 4), (L + 4, 2, L + 5)
    ends = lambda lens: tuple(int(x) for x in np.cumsum(lens))   # noqa: E731
    return ((ends(q), ends(k)), (ends(k), ends(q)))


def batch_mask_kind(g: Graph, v: str, batches: tuple) -> str:
    """What bool value `v` of graph `g` (its size-1 dims aside, [T1, T2]) is to a dense attention over batches stored
    concatenated (TND), read off its values, not its spelling: "batch" when it is True exactly where the key belongs
    to another batch than the query token, "batchcausal" where the key is another batch's or after the query in its
    batch (local key j > local query i), "keepbatch" / "keepcausal" for their negations (the keys kept), "" otherwise
    or when v depends on anything but the cumulative arrays, iotas, dims and constants. `batches` = (query ends, kv
    ends, T1, T2, Bn): the int64 inputs [Bn] of the cumulative ends and the dim names. The graph's nodes that compute
    v are evaluated with the interpreter's kernels (opgen.interp.kernels) on each of BATCH_PROBES and on probes with
    batches longer than every constant in those nodes (`_probes_past_constants`: a window or cap the small probes
    cannot see); a kind must hold on every probe. docs/design.md "Kernel families", attention (TND)."""
    import numpy as np

    from opgen.interp.kernels import KERNELS, Ctx  # lazy: start-up time

    cu_q, cu_kv, t1, t2, bn = batches
    prod = g.producers()
    need, todo = [], [v]
    while todo:   # the nodes v depends on, each once
        x = todo.pop()
        if x in (cu_q, cu_kv) or any(n.result.name == x for n in need):
            continue
        n = prod.get(x)
        if n is None or dtype_name(n.result.type.dtype) not in ("bool", "i32", "i64"):
            return ""
        need.append(n)
        todo += list(n.inputs)
    order = [n for n in g.nodes if n in need]
    far = _probes_past_constants(order)
    if far is None:
        return ""
    kinds = set()
    for ends_q, ends_kv in BATCH_PROBES + far:
        env = {t1: ends_q[-1], t2: ends_kv[-1], bn: len(ends_q)}
        vals = {cu_q: np.asarray(ends_q, np.int64), cu_kv: np.asarray(ends_kv, np.int64)}
        ctx = Ctx("exact", env, {})
        try:
            for n in order:
                args = [vals[i] for i in n.inputs]
                vals[n.result.name] = (np.concatenate(args, axis=n.attr("axis")) if n.op == "concat" else
                                       np.asarray(KERNELS[n.op](ctx, *args, dict(n.attrs), n.result.type)))
            got = vals[v].astype(bool).reshape(env[t1], env[t2])
        except Exception:   # a dim, op or shape outside the probe: not a batch mask
            return ""
        bq, bk = (np.searchsorted(e, np.arange(e[-1]), side="right") for e in (ends_q, ends_kv))
        iq = np.arange(ends_q[-1]) - np.concatenate([[0], ends_q[:-1]])[bq]
        jk = np.arange(ends_kv[-1]) - np.concatenate([[0], ends_kv[:-1]])[bk]
        cross = bq[:, None] != bk[None, :]
        causal = cross | (jk[None, :] > iq[:, None])
        kinds.add(next((k for k, want in (("batch", cross), ("batchcausal", causal), ("keepbatch", ~cross),
                                          ("keepcausal", ~causal)) if np.array_equal(got, want)), ""))
    return kinds.pop() if len(kinds) == 1 else ""


def _float_literal(v) -> str:
    """C++ text of a float constant: -FLT_MAX_VALUE, NEG_INF_VALUE / -NEG_INF_VALUE (the kernel's constants: C++
    has no -inf literal) or a float literal."""
    f = float(v)
    if f == -FP32_MAX:
        return "-FLT_MAX_VALUE"
    if math.isinf(f):
        return "NEG_INF_VALUE" if f < 0 else "(-NEG_INF_VALUE)"
    return repr(f) + "f"


class _Lowering:
    """One pass over the optimized graph in node order: `kind[value]` records each value's class (module doc); a
    handler `op_<op>` per tensor-IR op either classifies its result (views, index values, matmuls) or appends
    vector instructions; `output` decides each output's path, `finish` scopes, registers and L1 buffers."""

    def __init__(self, g: Graph, tokens: dict, data: str, keyset: str = "selected", form: str = "TND",
                 batches: tuple = ()):
        self.g, self.tokens, self.data = g, tokens, data
        self.batches = batches
        self.f = dict(KEY_FORMS[keyset])
        if keyset == "dense" and form == "TND":   # token-major stats [T1, N1, 8] (the query's other shapes: BSND's)
            self.f["stat8"] = "th8"
        self.bsnd = dict(BSND_STORED)
        if keyset == "dense" and "h" not in tokens.values():   # no GQA: query heads are kv heads, no group dim
            def one(x):
                return x.replace("g", "").replace("h", "n")

            self.f = {k: (tuple(one(x) for x in v) if isinstance(v, tuple) else one(v)) for k, v in self.f.items()}
            self.bsnd = {one(k): one(v) for k, v in self.bsnd.items()}
        if keyset == "dense" and form == "TND":
            self.bsnd["th"] = "ht"   # a saved statistic's column 0 [T1, N1, 1] read head-major (the backward)
        self.p = AttentionProgram(g.name, keyset=keyset, form=form)
        self.kind: dict[str, tuple] = {}
        self.vals = g.values()
        self.uses = g.uses()
        self.out_of = {v: k for k, v in g.outputs}
        self.heads_loaded: set[str] = set()
        self.aliases: dict[str, str] = {}
        self.prod = g.producers()

    def key(self, v: str) -> str:
        """shape_key of value v."""
        return shape_key(self.vals[v].type.shape, self.tokens)

    def err(self, n, why: str):
        """Unsupported (an IRError) naming node n, its spec line and the rule: the attention family's reason when no
        family lowers the graph (opgen.kernel.family.NoKernel prints `%v28 (my_attn.py:38): select: <why>`)."""
        return Unsupported(n.result.name, n.loc, f"{n.op}: {why}")

    # ---------------------------------------------------------------- driver
    def run(self) -> AttentionProgram:
        """Classify the parameters, lower every node and output, finish and verify the program."""
        uses = self.g.uses()
        for pr in self.g.params:
            v = pr.value
            if pr.kind == "attr":
                self.kind[v.name] = ("scalar", f"attr_{v.name}")
                if v.name not in uses:   # declared, never read by the body: nothing of the kernel's
                    continue
                if dtype_name(v.type.dtype) != "f32":
                    n = uses[v.name][0]
                    raise Unsupported(n.result.name, n.loc, f"{n.op} reads the {dtype_name(v.type.dtype)} attribute "
                                      f"{v.name}; the attention kernel reads one runtime attribute, the float score "
                                      "scale")
                self.p.scalars[v.name] = v.name
            elif dtype_name(v.type.dtype) in ("i32", "i64", "bool", "u8"):
                self.kind[v.name] = ("idx",)
            else:
                self.kind[v.name] = ("gm", v.name, self.key(v.name))
        for n in self.g.nodes:
            nv, nc = len(self.p.vector), len(self.p.cube)
            self.node(n)
            stamp(self.p.vector, nv, n.loc)
            stamp(self.p.cube, nc, n.loc)
        for out, v in self.g.outputs:
            nv = len(self.p.vector)
            self.output(out, v)
            stamp(self.p.vector, nv, self.loc_of(v))   # a stat store: the line producing the output
        self.finish()
        verify_program(self.p)
        return self.p

    # ---------------------------------------------------------------- vector helpers
    def emit(self, kind, dst="", srcs=(), arg="", op="", space="row", loc=""):
        """Append a vector instruction (sources resolved through reshapes); `loc`: its spec line when it is not the
        node's being lowered (a load of another value)."""
        self.p.vector.append(VInstr(kind, dst, tuple(self.res(x) for x in srcs), arg, op, space, loc=loc))

    def loc_of(self, v: str) -> str:
        """The spec line of the node defining value v ("" for a parameter)."""
        n = self.prod.get(v)
        return n.loc if n is not None else ""

    def as_vec(self, v: str) -> tuple:
        """Kind of v as a vector operand: a cube result read by the vector stage becomes a tile load."""
        k = self.kind[v]
        if k[0] == "cube":
            op = k[1]
            if op.n != "keys" or op.m != "rows":
                raise IRError(f"NSA kernel {self.g.name}: %{v}: only [rows, keys] matmul results can go to the vector "
                              f"stage")
            tile = f"ws_{v}"
            self.set_dest(op, "tile", tile)
            self.p.tiles[tile] = "f32"
            self.emit("ld_tile", v, arg=tile, loc=self.loc_of(v))
            self.kind[v] = ("row",)
            return ("row",)
        if k[0] == "gm" and k[2] in self.f["heads"]:
            if v not in self.heads_loaded:   # the GM view stays a cube operand too (dO of dP = dO Vᵀ)
                self.heads_loaded.add(v)
                self.emit("ld_head", v, arg=k[1], space="head", loc=self.loc_of(v))
            return ("head",)
        return k

    def set_dest(self, op: CubeOp, dest: str, target: str):
        """Record where matmul `op`'s result goes (CubeOp is frozen: replaced in the program and the kinds)."""
        i = self.p.cube.index(op)
        new = replace(self.p.cube[i], dest=dest, target=target)
        self.p.cube[i] = new
        for v, k in self.kind.items():
            if k[0] in ("cube", "cubeout") and k[1] is op:
                self.kind[v] = (k[0], new) + k[2:]
        return new

    def scalar_of(self, v: str) -> str:
        """C++ text of a scalar operand: a constant / attribute, or a per-row value st_<value>."""
        k = self.kind[v]
        if k[0] == "scalar":
            return k[1]
        if k[0] == "stat":
            return f"st_{self.res(v)}"
        raise IRError(f"NSA kernel {self.g.name}: %{v} is not a scalar or a per-row value")

    # ---------------------------------------------------------------- nodes
    def node(self, n):
        """Lower one node: index / bool values are classified here, everything else by its op_<op> handler."""
        r, op, ins = n.result.name, n.op, list(n.inputs)
        key = self.key(r)
        ks = [self.kind.get(i, ("?",)) for i in ins]
        dt = dtype_name(n.result.type.dtype)
        if op in ("iota", "dimval") or (dt in ("i32", "i64") and op != "scatter_add"):
            self.kind[r] = ("idx",)
            return
        if op == "const":
            if n.result.type.shape:
                raise self.err(n, "only scalar constants are supported")
            if math.isnan(float(n.attr("value"))) or (math.isinf(float(n.attr("value")))
                                                       and self.p.keyset != "dense"):
                raise self.err(n, f"the constant {n.attr('value')!r} is not finite: the selected-key attention "
                                  "kernel takes a finite fill (write the mask fill as a finite value such as -3.0e38; "
                                  "a dense key set takes -inf)")
            self.kind[r] = ("scalar", _float_literal(n.attr("value")))
            return
        if dt == "bool" and self.batches and key == self.f["mask"] and op != "reshape":
            kind = batch_mask_kind(self.g, r, self.batches)   # TND: the batch mask (and causal within the batch)
            if kind:
                self.kind[r] = ({"batch": "batchmask", "batchcausal": "keymask", "keepbatch": "keepbatch",
                                 "keepcausal": "keepmask"}[kind],)
                return
        if dt == "bool":
            mask = self.causal_compare(op, ins, ks)
            if mask:
                self.kind[r] = (mask,)
                return
            if op == "reshape" and ks[0][0] in ("keymask", "keepmask", "batchmask", "keepbatch") \
                    and key == self.f["mask"]:
                self.kind[r] = ks[0]
                return
            if all(k[0] == "idx" for k in ks):
                self.kind[r] = ("idx",)
                return
            raise self.err(n, "boolean value other than the causal key mask")
        h = getattr(self, "op_" + op, None)
        if h is None:
            raise self.err(n, f"no NSA lowering for {op}")
        h(n, r, ins, ks, key)

    def causal_compare(self, op, ins, ks) -> str:
        """"keymask" when comparison `op` of `ins` is `key position > query position` (gt, or lt with the operands
        swapped), "keepmask" when it is its negation `key position <= query position` (le, or ge swapped), else "".
        Selected keys: the positions are index values of the unit's key and token shapes (§2.3); dense keys: they
        must be iotas over the key and query sequences (through reshapes), so a shifted or scaled position (a
        sliding window) is not taken for the causal mask."""
        if op not in ("gt", "lt", "le", "ge") or not all(k[0] == "idx" for k in ks):
            return ""
        kp, qp = (ins[0], ins[1]) if op in ("gt", "le") else (ins[1], ins[0])
        if self.key(kp) != self.f["keypos"] or self.key(qp) != self.f["qpos"]:
            return ""
        if self.p.keyset == "dense":
            ok_k, off_k = self._iota_of(kp, self.f["keypos"])
            ok_q, off_q = self._iota_of(qp, self.f["qpos"])
            if not (ok_k and ok_q and off_k is None):
                return ""
            if off_q is not None:
                if self.p.causal_offset is not None and str(self.p.causal_offset) != str(off_q):
                    return ""
                self.p.causal_offset = off_q
        return "keymask" if op in ("gt", "lt") else "keepmask"

    def _iota_of(self, v: str, letter: str) -> tuple[bool, object]:
        """(v is (a reshape / cast of) an iota over the dim whose shape_key letter is `letter`, plus at most one
        added dimval: its dim expression or None). The offset's dims must be the two sequences (the kernel has
        them) — else not an iota position."""
        n = self.prod.get(v)
        while n is not None and n.op in ("reshape", "cast"):
            n = self.prod.get(n.inputs[0])
        off = None
        if n is not None and n.op == "add":
            a, b = (self.prod.get(x) for x in n.inputs)
            if a is not None and b is not None and b.op == "iota" and a.op == "dimval":
                a, b = b, a
            if a is None or b is None or b.op != "dimval" or len(b.result.type.shape) != 0:
                return False, None
            off = as_dim(b.attr("n"))
            if not all(self.tokens.get(x) in (self.f["qpos"], self.f["keypos"]) for x in off.symbols()):
                return False, None
            n = a
        return n is not None and n.op == "iota" and self.key(n.result.name) == letter, off

    def op_cast(self, n, r, ins, ks, key):
        k = ks[0]
        to, rnd = dtype_name(n.attr("to")), n.attr("round")
        if k[0] == "gm" and to == "f32":
            self.kind[r] = k[:2] + (key,)
            return
        if k[0] == "cube" and k[1].m == "rows" and k[1].n in ("D", "Dv") and to == self.data:
            self.kind[r] = ("cubeout", k[1], (("cast", rnd),))   # a head-dim result cast on its way out (Fixpipe)
            return
        if k[0] in ("row", "cube") and to == self.data and rnd != "none":
            kk = self.as_vec(ins[0])
            if kk[0] != "row":
                raise self.err(n, "only key rows are rounded to T for the cube")
            self.kind[r] = ("quantT", ins[0], rnd)
            return
        if k[0] == "quantT" and to == "f32":
            tile = f"ws_{r}"
            self.p.tiles[tile] = self.data
            self.emit("st_tile", tile, (k[1],), arg=tile, op=ROUND_MODES[k[2]])
            self.kind[r] = ("quant", tile)
            return
        if k[0] in ("cubeout", "statout") and to in (self.data, "f32"):
            self.kind[r] = k[:-1] + (k[-1] + (("cast", rnd),),)
            return
        raise self.err(n, f"cast of a {k[0]} value to {to} is not supported")

    def op_reshape(self, n, r, ins, ks, key):
        k = ks[0]
        if k[0] == "gm" and k[2] == self.f["stat"] and key == self.f["statg"]:   # stats column 0, grouped (no GQA:
            self.kind[r] = ("gmstat", k[1])                                     # the same letters)
        elif k[0] in ("gm", "cubeout") and key == self.key(n.inputs[0]):   # the same roles in the same order: a view
            self.kind[r] = k                                               # of the same bytes (BSH <-> BSND)
        elif k[0] == "idx":
            self.kind[r] = k
        elif k[0] == "gm":
            if k[2] in self.f["major"] and key in self.f["heads"]:
                self.kind[r] = ("gm", k[1], key)
            elif k[2] in self.f["keysrc"] and key == k[2]:   # a size-1 dim added (before the broadcast over G)
                self.kind[r] = k
            elif k[2] == self.f["stat"] and key == self.f["statg"]:     # stats column 0
                self.kind[r] = ("gmstat", k[1])
            else:
                raise self.err(n, f"reshape of GM tensor {k[1]} from {k[2]} to {key}")
        elif k[0] == "gmstat" and key == self.f["statg"]:
            self.kind[r] = k
        elif k[0] == "cube" and k[1].m == "rows" and key in self.f["major"]:
            self.kind[r] = ("cubeout", k[1], ())
        elif k[0] in ("stat",) and key == self.f["stat"]:
            self.kind[r] = ("statout", ins[0], ())
        elif k[0] in ("row", "stat", "head"):
            self.kind[r] = k
            self.alias(r, ins[0])
        else:
            raise self.err(n, f"reshape of a {k[0]} value to {key}")

    def alias(self, r, src):
        """r is a reshape of vector value src: the same row / head / per-row scalar."""
        self.aliases[r] = self.res(src)

    def res(self, v: str) -> str:
        """The vector value a reshape chain ends at."""
        while v in self.aliases:
            v = self.aliases[v]
        return v

    def op_permute(self, n, r, ins, ks, key):
        k = ks[0]
        if k[0] == "gm" and self.p.keyset == "dense":   # the kernel addresses the inputs as stored
            perm = [0, 2, 1, 3] if self.p.form == "BSND" else [1, 0, 2]   # TND: BSND's bytes without the batch dim
            if not (self.p.form in ("BSND", "TND") and self.bsnd.get(k[2]) == key and list(n.attr("perm")) == perm):
                raise self.err(n, f"a permuted input: the dense attention kernel reads query / key / value as stored "
                               f"({self.p.form}), a BSND input only through the permute (0, 2, 1, 3) to BNSD")
            self.kind[r] = ("gm", k[1], key)
            return
        if k[0] in ("gm", "idx", "gather"):
            self.kind[r] = k if k[0] != "gm" else ("gm", k[1], key)
        elif k[0] == "cube" and (k[1].m == "keys" or (self.p.keyset == "dense" and k[1].n in ("D", "Dv"))):
            self.kind[r] = ("cubeout", k[1], ())   # dense: a head-dim result permuted to its stored layout (output)
        elif k[0] == "cubeout":
            self.kind[r] = k
        elif k[0] == "statout" and self.p.form == "TND" and key == "th" and list(n.attr("perm")) == [1, 0, 2]:
            self.kind[r] = k   # a per-row statistic stored token-major [T1, N1, 8]
        else:
            raise self.err(n, f"permute of a {k[0]} value")

    def op_slice(self, n, r, ins, ks, key):
        k = ks[0]
        if k[0] == "idx":
            self.kind[r] = k
        elif k[0] == "gm" and k[2] == self.f["stat8"] and key in (self.f["stat"], "th") and str(n.attr("start")) == "0":
            self.kind[r] = ("gm", k[1], key)
        else:
            raise self.err(n, f"slice of a {k[0]} value")

    def op_concat(self, n, r, ins, ks, key):
        if all(k[0] == "idx" for k in ks):
            self.kind[r] = ("idx",)
            return
        raise self.err(n, "concat of non-index values")

    def op_broadcast(self, n, r, ins, ks, key):
        k = ks[0]
        if k[0] == "idx":
            self.kind[r] = k
        elif k[0] == "gm" and k[2] in self.f["keysrc"] and key in self.f["keyrows"] and self.p.keyset == "dense":
            self.kind[r] = ("gather", k[1], "D" if key.endswith("d") else "Dv")   # every key row, for each head
        elif k[0] == "statout" and key == self.f["stat8"]:
            self.kind[r] = k[:-1] + (k[-1] + (("x8",),),)
        else:
            raise self.err(n, f"broadcast of a {k[0]} value")

    def op_gather(self, n, r, ins, ks, key):
        src, idx = ks
        if (src[0] == "gm" and idx[0] == "idx" and src[2] in self.f["keysrc"] and key in self.f["keyrows"]
                and self.p.keyset == "selected"):
            self.kind[r] = ("gather", src[1], "D" if key.endswith("d") else "Dv")
            return
        if src[0] == "idx":
            self.kind[r] = ("idx",)
            return
        raise self.err(n, "gather other than selected key/value rows")

    def op_matmul(self, n, r, ins, ks, key):
        ta, tb = bool(n.attr("transpose_a")), bool(n.attr("transpose_b"))
        form = FORMS.get((ta, tb))
        if form is None:
            raise self.err(n, "matmul with both operands transposed")

        def operand(k, v):
            if k[0] == "gm" and k[2] in self.f["heads"]:
                return Operand("heads", k[1], "D" if k[2].endswith("d") else "Dv")
            if k[0] == "gather":
                return Operand("gather", k[1], k[2])
            if k[0] == "gm" and self.p.keyset == "dense" and k[2] in self.f["keyrows"]:   # no GQA: no broadcast
                return Operand("gather", k[1], "D" if k[2].endswith("d") else "Dv")
            if k[0] == "quant":
                return Operand("tile", k[1], "keys")
            raise self.err(n, f"matmul operand %{v} is a {k[0]} value")

        a, b = operand(ks[0], ins[0]), operand(ks[1], ins[1])
        dims = {"heads": "rows", "gather": "keys", "tile": "rows"}
        # rows x cols of the stored operands; the matmul's m/k come from A, k/n from B per form
        a_r, a_c = dims[a.kind], (a.cols if a.kind != "tile" else "keys")
        b_r, b_c = dims[b.kind], (b.cols if b.kind != "tile" else "keys")
        if form == "NT":
            m, k_a, n_, k_b = a_r, a_c, b_r, b_c
        elif form == "NN":
            m, k_a, k_b, n_ = a_r, a_c, b_r, b_c
        else:
            k_a, m, k_b, n_ = a_r, a_c, b_r, b_c
        if k_a != k_b:
            raise self.err(n, f"contracted dims differ ({k_a} vs {k_b})")
        if a.kind == "gather" or (form != "TN" and b.kind == "heads") or (form == "TN" and b.kind != "heads"):
            raise self.err(n, f"operand layout {a.kind} x {b.kind} ({form}) is not a cube form of the kernel")
        phase = 2 if "tile" in (a.kind, b.kind) else 1
        op = CubeOp(r, form, a, b, m, n_, k_a, phase, loc=n.loc)
        self.p.cube.append(op)
        self.kind[r] = ("cube", op)

    def _mask_input(self, v: str) -> str:
        """The bool input [S1, S2] that value v is a view (reshape) of, "" when it is not one (dense keys only)."""
        while v in self.prod and self.prod[v].op == "reshape":
            v = self.prod[v].inputs[0]
        params = {p.value.name: p for p in self.g.params}
        if (self.p.keyset == "dense" and v in params and params[v].kind == "input"
                and dtype_name(self.vals[v].type.dtype) == "bool" and len(self.vals[v].type.shape) == 2
                and self.key(v) == self.f["mask"]):   # exactly [S1, S2]: the kernel reads row s at s * S2
            return v
        return ""

    def op_select(self, n, r, ins, ks, key):
        m = self._mask_input(ins[0])
        if m and ks[1][0] == "scalar":   # where(mask input, fill, scores): an explicit mask
            src = self.as_vec(ins[2])
            if src[0] != "row":
                raise self.err(n, "masking of a non-row value")
            self.emit("mask_in", r, (ins[2],), arg=ks[1][1], op=m)
            self.p.gm[m] = "in"
            self.kind[r] = ("row",)
            return
        if ks[0][0] in ("batchmask", "keepbatch"):   # TND: keys of other batches are never a unit's keys
            fill, kept = (ins[1], ins[2]) if ks[0][0] == "batchmask" else (ins[2], ins[1])
            if self.kind[fill][0] != "scalar" or self.kind[fill][1] not in ("-FLT_MAX_VALUE", "NEG_INF_VALUE"):
                raise self.err(n, "the mask keeping each query token to its batch's keys must fill the other "
                               "batches' scores with -FLT_MAX or -inf (their probabilities 0): the kernel leaves "
                               "those keys out")
            src = self.as_vec(kept)
            if src[0] != "row":
                raise self.err(n, "masking of a non-row value")
            self.kind[r] = src
            self.alias(r, kept)
            return
        if ks[0][0] == "keepmask" and ks[2][0] == "scalar":   # where(key <= query, scores, fill)
            ks, ins = [("keymask",), ks[2], ks[1]], [ins[0], ins[2], ins[1]]   # = where(key > query, fill, scores)
        if ks[0][0] != "keymask" or ks[1][0] != "scalar":
            raise self.err(n, "a mask other than the causal one (key position > query position, built from iotas) "
                           "or a bool input [S1, S2] of dense keys, with a constant fill: a computed mask or another "
                           "mask shape is not supported by the attention kernel yet")
        src = self.as_vec(ins[2])
        if src[0] != "row":
            raise self.err(n, "masking of a non-row value")
        self.p.causal = True
        self.emit("mask", r, (ins[2],), arg=ks[1][1])
        self.kind[r] = ("row",)

    def _binary(self, n, r, ins, ks, key, kind):
        a, b = self.as_vec(ins[0]), self.as_vec(ins[1])
        if a[0] == "cubeout" and b[0] == "scalar" and kind == "vmul":
            self.kind[r] = ("cubeout", a[1], a[2] + (("scale", b[1]),))
            return
        if a[0] in ("row", "head") and b[0] == a[0]:
            self.emit(kind, r, (ins[0], ins[1]), space=a[0])
            self.kind[r] = (a[0],)
            return
        if a[0] in ("row", "head") and b[0] in ("scalar", "stat", "gmstat"):
            s = self.stat_of(ins[1], b)
            if kind == "vmul":
                self.emit("muls", r, (ins[0],), arg=s, space=a[0])
            elif kind == "vsub":
                self.emit("adds", r, (ins[0],), arg=f"-({s})", space=a[0])
            elif kind == "vadd":
                self.emit("adds", r, (ins[0],), arg=s, space=a[0])
            elif kind == "vdiv":
                self.emit("muls", r, (ins[0],), arg=f"1.0f / ({s})", space=a[0])
            self.kind[r] = (a[0],)
            return
        if "gm" in (a[0], b[0]) and "row" in (a[0], b[0]):
            raise self.err(n, f"{n.op} of a tensor input and the scores (a position bias / pse, or a dropout mask): "
                           f"the attention kernel takes a scale (a float attribute or constant) and the causal mask "
                           f"only")
        raise self.err(n, f"{n.op} of {a[0]} and {b[0]} values")

    def stat_of(self, v, k) -> str:
        """C++ text of scalar operand v; a stats column read from GM gets its ld_stat here."""
        if k[0] == "gmstat":
            self.emit("ld_stat", v, arg=k[1], space="stat", loc=self.loc_of(v))
            self.kind[v] = ("stat",)
            return f"st_{v}"
        return self.scalar_of(v)

    def op_mul(self, *a):
        self._binary(*a, "vmul")

    def op_sub(self, *a):
        self._binary(*a, "vsub")

    def op_add(self, *a):
        self._binary(*a, "vadd")

    def op_div(self, *a):
        self._binary(*a, "vdiv")

    def op_exp(self, n, r, ins, ks, key):
        a = self.as_vec(ins[0])
        if a[0] not in ("row", "head"):
            raise self.err(n, f"exp of a {a[0]} value")
        self.emit("exp", r, (ins[0],), space=a[0])
        self.kind[r] = (a[0],)

    def op_reduce(self, n, r, ins, ks, key):
        k = ks[0]
        if (self.p.keyset == "dense" and k[0] == "cube" and k[1].m == "keys" and n.attr("kind") == "sum"
                and self._group_axes(ins[0], n.attr("axes"))):
            # dK = sum_g dSᵀ Q, dV = sum_g Pᵀ dO: the TN matmul contracts the unit's rows (its heads x query rows,
            # head-major), so the sum over the G heads of a kv head is already in the product
            self.kind[r] = ("cubeout", k[1], ())
            return
        a = self.as_vec(ins[0])
        kind = n.attr("kind")
        axes = [x % len(self.vals[ins[0]].type.shape) for x in n.attr("axes")]
        last = len(self.vals[ins[0]].type.shape) - 1
        if a[0] not in ("row", "head") or axes != [last] or kind not in ("max", "sum"):
            raise self.err(n, f"reduce {kind} over {axes} of a {a[0]} value")
        self.emit("rmax" if kind == "max" else "rsum", r, (ins[0],), space="stat")
        self.kind[r] = ("stat",)
        if a[0] == "row":
            self.p.full_rows = True

    def _group_axes(self, v: str, axes) -> bool:
        """Whether `axes` of value v are exactly its group (G) axis, or a size-1 axis where the group has no letter
        (no GQA): a sum over the query heads of a kv head."""
        shape = self.vals[v].type.shape
        ax = [a % len(shape) for a in axes]
        return (len(ax) == 1 and ax[0] < len(shape) - 2   # a batch axis of the product, not its rows / columns
                and self.tokens.get(str(shape[ax[0]]), "?") in ("g", ""))

    def op_scatter_add(self, n, r, ins, ks, key):
        idx, src = ks
        if idx[0] != "idx" or src[0] != "cubeout" or src[1].m != "keys":
            raise self.err(n, "scatter-add other than selected-row gradients from a [keys, E] matmul")
        self.kind[r] = ("cubeout", src[1], src[2] + (("scatter",),))

    # ---------------------------------------------------------------- outputs
    def output(self, out: str, v: str):
        """The path of output `out`: a per-row value stored as 8 copies, or a matmul result written by Fixpipe
        (`out`), accumulated to a workspace (`acc`) or scatter-added (`scatter`) and finished by a post op. A dense
        matmul output must be stored as the inputs are (BNSD or BSND: the kernel's Fixpipe addressing)."""
        k = self.kind.get(v, ("?",))
        self.p.gm[out] = "out"
        if self.p.keyset == "dense" and k[0] == "cubeout":
            okey = self.key(v)
            side = self.f["keysrc"] if k[1].m == "keys" else self.f["major"]   # dK / dV: stored as key / value
            want = side if self.p.form == "BNSD" else tuple(a for a, b in self.bsnd.items() if b in side)
            if okey not in want:
                raise IRError(f"attention kernel {self.g.name}: output {out} is not stored {self.p.form} like the "
                              f"inputs (a permuted output of a {self.p.form} attention is not supported)")
        if k[0] == "statout":
            chain = k[2]
            if ("x8",) not in chain:
                raise IRError(f"NSA kernel {self.g.name}: output {out}: per-row value must be broadcast to 8 copies")
            self.emit("st_stat8", out, (k[1],), arg=out, space="stat")
            return
        if k[0] != "cubeout":
            raise IRError(f"NSA kernel {self.g.name}: output {out} is a {k[0]} value (no kernel path)")
        op, chain = k[1], k[2]
        steps = [s[0] for s in chain]
        rnd = next((s[1] for s in chain if s[0] == "cast"), "none")
        scale = next((s[1] for s in chain if s[0] == "scale"), "")
        if "scatter" in steps or (self.p.keyset == "dense" and op.m == "keys"):
            # selected: per key block, added at its gathered rows; dense: a [keys, E] result of the item's key
            # chunk, added at the chunk's contiguous rows of the [B, N2, S2, E] workspace (over the query units)
            ws = f"ws_{out}"
            self.set_dest(op, "scatter", out)
            self.p.post.append(PostOp(out, ws, scale, ROUND_MODES[rnd]))
        elif op.k == "keys" and not scale:
            if rnd not in ("rint", "none"):   # Fixpipe F322F16 / F322BF16 rounds to nearest even (emu/cube.h)
                raise IRError(f"NSA kernel {self.g.name}: output {out} is written by Fixpipe, which rounds to nearest "
                              f"even, but the spec rounds it with {rnd!r} (cast it with 'rint')")
            self.set_dest(op, "out", out)
            self.p.out_round = ROUND_MODES["rint"]
        else:
            ws = f"ws_{out}"
            self.set_dest(op, "acc", out)
            self.p.post.append(PostOp(out, ws, scale, ROUND_MODES[rnd]))

    # ---------------------------------------------------------------- finishing
    def finish(self):
        """GM roles, instruction scopes, registers and the L1 plan."""
        p = self.p
        if p.keyset == "dense" and p.full_rows:   # a forward: its softmax over the keys; a backward reads it
            online_softmax(p)
        for c in p.cube:
            for o in (c.a, c.b):
                if o.kind in ("heads", "gather"):
                    p.gm.setdefault(o.tensor, "in")
        for i in p.vector:
            if i.kind in ("ld_head", "ld_stat"):
                p.gm.setdefault(i.arg, "in")
        # scope: "unit" when no source (transitively) is a key row
        unit: set[str] = set()
        out = []
        for i in p.vector:
            srcs_unit = all(s in unit for s in i.srcs)
            is_unit = i.kind in ("ld_head", "ld_stat") or (i.space in ("head", "stat") and bool(i.srcs) and srcs_unit
                                                          and i.kind != "st_stat8")
            if is_unit:
                unit.add(i.dst)
            out.append(replace(i, scope="unit" if is_unit else "item"))
        p.vector = [replace(i, scope=ONLINE_SCOPES.get(i.kind, i.scope)) if p.online else i for i in out]
        p.stats = [i.dst for i in p.vector if i.scope == "unit" and i.space == "stat"]
        if p.online:   # the running max, its rescale and the running sum, kept across the items of a unit
            p.stats += [x for i in p.vector if i.kind == "omax" for x in (i.dst, i.arg)]
            p.stats += [i.dst for i in p.vector if i.kind == "osum"]
        self.assign_registers()
        self.assign_l1()

    def assign_registers(self):
        """Row / head registers by liveness: an instruction overwrites a source of its space that dies there (the
        count-form vector instructions allow full overlap), else takes a free register."""
        p = self.p
        last: dict[str, int] = {}
        for k, i in enumerate(p.vector):
            for s in i.srcs:
                last[s] = k
        for space in ("row", "head"):
            free: list[int] = []
            n = 0
            for k, i in enumerate(p.vector):
                defines = i.space == space and i.kind not in ("st_tile", "st_stat8", "rmax", "rsum")
                reg = None
                if defines:
                    for s in i.srcs:
                        if s in p.regs and p.regs[s][0] == space and last.get(s) == k:
                            reg = p.regs[s]
                            break
                    if reg is None:
                        reg = (space, free.pop(0)) if free else (space, n)
                        n = max(n, reg[1] + 1)
                    p.regs[i.dst] = reg
                for s in dict.fromkeys(i.srcs):
                    if s in p.regs and p.regs[s][0] == space and last.get(s) == k and p.regs[s] != reg:
                        if p.regs[s][1] not in free:
                            free.append(p.regs[s][1])
                if defines and i.dst not in last and reg[1] not in free:
                    free.append(reg[1])
            p.nregs[space] = n

    def assign_l1(self):
        """L1 buffers: one per head-row operand, one per tile, gathered operands of disjoint phases share one."""
        p = self.p
        heads, gathers, tiles = {}, {}, {}
        for c in p.cube:
            for o in (c.a, c.b):
                d = {"heads": heads, "gather": gathers, "tile": tiles}[o.kind]
                d.setdefault(o.tensor, (o.cols, set()))[1].add(c.phase)
        for k, (t, (cols, _ph)) in enumerate(heads.items()):
            p.l1.append(L1Buffer(f"headL1_{k}", "heads", cols, (t,)))
        groups: list[list] = []
        for t, (cols, ph) in gathers.items():
            for g in groups:
                if all(not (ph & q) for _t, _c, q in g):
                    g.append((t, cols, ph))
                    break
            else:
                groups.append([(t, cols, ph)])
        for k, g in enumerate(groups):
            cols = "D" if any(c == "D" for _t, c, _q in g) else "Dv"
            p.l1.append(L1Buffer(f"gatherL1_{k}", "gather", cols, tuple(t for t, _c, _q in g)))
        for k, t in enumerate(tiles):
            p.l1.append(L1Buffer(f"tileL1_{k}", "tile", "keys", (t,)))


ONLINE_SCOPES = {"oacc": "pv", "st_out": "last", "st_stat8": "last"}
"""The scope of an online program's instructions that do not run in the item's vector stage (VInstr)."""


def online_softmax(p: AttentionProgram) -> None:
    """Rewrite a dense forward program's whole-row softmax into an online softmax over its key chunks (in place;
    docs/design.md "Kernel families", attention). The program must hold the spec's softmax exactly:
    m = rmax(x), e = exp(x - m), l = rsum(e), P = e * (1 / l) stored as T for the matmul P V, whose result is the
    output (Fixpipe, cast), and m / l at most stored as outputs. Per chunk c (an item) it becomes
        m' = max(m, rowmax x_c), alpha = exp(m - m'), P_c = exp(x_c - m') (unnormalised, stored as T),
        l = l alpha + rowsum P_c, cube phase 2: PV_c = P_c V_c as an fp32 [rows, Dv] tile, O = O alpha + PV_c,
    and after the last chunk the output is O / l (cast with the spec's round mode) and the stats the final m and l:
    CANN's softmax_max / softmax_sum. A row whose scores so far are all -inf (an explicit -inf mask) subtracts 0
    instead of its max (`Finite0`), so its P is 0, not NaN. The item becomes one block of keys (full_rows off;
    the tiling's `itemKeys`, whole cube chunks), so the vector stage and the workspace no longer hold a whole score
    row. Raises IRError naming what is not the softmax."""
    def fail(why):
        return IRError(f"attention kernel {p.name}: the dense forward's online softmax needs the softmax over the "
                       f"keys written as max, exp(x - max), sum, division: {why}")

    vec = p.vector
    rmax = [i for i in vec if i.kind == "rmax"]
    if len(rmax) != 1:
        raise fail(f"{len(rmax)} maxima over the keys")
    R = rmax[0]
    m, x = R.dst, R.srcs[0]

    def one(pred, what):
        got = [i for i in vec if pred(i)]
        if len(got) != 1:
            raise fail(f"no single {what}")
        return got[0]

    A = one(lambda i: i.kind == "adds" and i.srcs == (x,) and i.arg == f"-(st_{m})", "x - max")
    E = one(lambda i: i.kind == "exp" and i.srcs == (A.dst,), "exp(x - max)")
    U = one(lambda i: i.kind == "rsum" and i.srcs == (E.dst,), "sum of exp(x - max)")
    lsum = U.dst
    M = one(lambda i: i.kind == "muls" and i.srcs == (E.dst,) and i.arg == f"1.0f / (st_{lsum})", "division by the sum")
    S = one(lambda i: i.kind == "st_tile" and i.srcs == (M.dst,), "probabilities stored for the cube")
    C = [c for c in p.cube if c.phase == 2 and c.a.kind == "tile" and c.a.tensor == S.arg]
    if len(C) != 1 or C[0].form != "NN" or C[0].dest != "out" or len(p.cube) != 2:
        raise fail("the probabilities' matmul P V is not the output")
    allowed = {m: {A, R}, lsum: {M, U}, E.dst: {U, M, E}, M.dst: {S, M}}
    for i in vec:
        used = set(i.srcs) | set(re.findall(r"st_(v\w+)", i.arg))
        for v, ok in allowed.items():
            if v in used and i not in ok and not (i.kind == "st_stat8" and v in (m, lsum)):
                raise fail(f"%{v} is also read by {i.kind} %{i.dst}")
    cm, alpha, cl, o = f"c{m}", f"a{m}", f"c{lsum}", "oacc"
    out = []
    for i in vec:
        if i is R:
            out += [replace(i, dst=cm), VInstr("omax", m, (cm,), arg=alpha, space="stat", loc=i.loc)]
        elif i is A:
            out.append(replace(i, arg=f"-(Finite0(st_{m}))"))
        elif i is U:
            out += [replace(i, dst=cl), VInstr("osum", lsum, (cl, alpha), space="stat", loc=i.loc)]
        elif i is M:
            continue
        elif i is S:
            out.append(replace(i, srcs=(E.dst,)))
        else:
            out.append(i)
    c = C[0]
    tile = f"ws_{c.value}"
    k = p.cube.index(c)
    p.cube[k] = replace(c, dest="pv", target=tile)
    p.tiles[tile] = "f32"
    p.tile_cols[tile] = c.n
    stats = [i for i in out if i.kind == "st_stat8"]
    out = [i for i in out if i.kind != "st_stat8"]
    out.append(VInstr("oacc", o, (alpha,), arg=tile, space="out", loc=c.loc))
    out.append(VInstr("st_out", c.target, (o, lsum), arg=c.target, op=p.out_round or ROUND_MODES["rint"],
                      space="out", loc=c.loc))
    p.vector = out + stats
    p.full_rows = False
    p.online = True


def lower(g: Graph, tokens: dict, data: str, keyset: str = "selected", form: str = "TND",
          batches: tuple = ()) -> AttentionProgram:
    """Lower the optimized graph of a selected-attention specialisation to its AttentionProgram (module doc); `tokens`
    names each dim's role (opgen.kernel.attention.AttentionLayout.tokens), `data` is the dtype variable of the data
    (AttentionLayout.dtype: what rounded key rows and outputs are cast to). Raises IRError naming the value when a
    node has no lowering (the kernel does not support that spec shape). `keyset`: "selected" (keys gathered by an
    index table, TND) or "dense" (every key of the unit's batch and kv head; KEY_FORMS) with `form` BNSD or BSND
    (how the inputs and the output are stored; TND: batches stored concatenated, `batches` = (query ends, kv ends,
    T1, T2, Bn) names the cumulative arrays and dims, batch_mask_kind)."""
    return _Lowering(g, tokens, data, keyset, form, batches).run()


def verify_program(p: AttentionProgram) -> None:
    """Check def-before-use of vector values (a matmul result reaches the vector stage only through ld_tile of its
    tile), the phase rules (phase-1 matmuls read no vector result; every phase-2 matmul reads a tile a vector
    instruction stores), that
    every output has exactly one producer and every post op a matmul writing its workspace. Raises IRError."""
    defined: set[str] = set()
    tiles_written = set()
    for c in p.cube:
        if c.phase == 1 and "tile" in (c.a.kind, c.b.kind):
            raise IRError(f"NSA program {p.name}: phase-1 matmul %{c.value} reads a vector result")
        if c.dest not in ("tile", "out", "acc", "scatter", "pv"):
            raise IRError(f"NSA program {p.name}: matmul %{c.value} has no destination")
    for i in p.vector:
        if i.kind not in VECTOR_KINDS:
            raise IRError(f"NSA program {p.name}: unknown vector instruction {i.kind}")
        for s in i.srcs:
            if s not in defined:
                raise IRError(f"NSA program {p.name}: %{s} used before it is defined ({i.kind} %{i.dst})")
        if i.kind == "ld_tile" and i.arg not in {f"ws_{c.value}" for c in p.cube if c.dest == "tile"}:
            raise IRError(f"NSA program {p.name}: ld_tile of {i.arg}, which no matmul writes")
        if i.kind == "oacc" and i.arg not in {c.target for c in p.cube if c.dest == "pv"}:
            raise IRError(f"NSA program {p.name}: oacc of {i.arg}, which no matmul writes")
        if i.kind == "st_tile":
            tiles_written.add(i.arg)
        if i.scope == "unit" and any(s not in defined for s in i.srcs):
            raise IRError(f"NSA program {p.name}: unit-scope %{i.dst} reads an item value")
        defined.add(i.dst)
        if i.kind == "omax":   # its second result, alpha
            defined.add(i.arg)
    for c in p.phase(2):
        for o in (c.a, c.b):
            if o.kind == "tile" and o.tensor not in tiles_written:
                raise IRError(f"NSA program {p.name}: matmul %{c.value} reads tile {o.tensor} nobody stores")
    producers: dict[str, int] = {}
    for c in p.cube:
        if c.dest in ("out", "acc", "scatter"):
            producers[c.target] = producers.get(c.target, 0) + 1
    for i in p.vector:
        if i.kind in ("st_stat8", "st_out"):
            producers[i.arg] = producers.get(i.arg, 0) + 1
    for o, role in p.gm.items():
        if role == "out" and producers.get(o) != 1:
            raise IRError(f"NSA program {p.name}: output {o} has {producers.get(o, 0)} producers")
    for po in p.post:
        if not any(c.target == po.output and c.dest in ("acc", "scatter") for c in p.cube):
            raise IRError(f"NSA program {p.name}: post op of {po.output} without a workspace producer")


def print_program(p: AttentionProgram, locs: bool = False) -> str:
    """Canonical text of an NSA program; locs=True ends each matmul and vector instruction with its spec location
    (`  @ file.py:line`, `opgen graph --stage kernel`), the default text (what comparisons use) has none."""
    lines = [f"attention_kernel {p.name} KERNEL_TYPE_MIX_AIC_1_2 {{",
             f"  item {'unit (whole key rows)' if p.full_rows else 'unit x key chunk'}"
             f"{', online softmax' if p.online else ''}"
             f"{', causal' if p.causal else ''}"
             f"{' (key > query + ' + str(p.causal_offset) + ')' if p.causal_offset is not None else ''}"
             f"{', dense keys ' + p.form if p.keyset == 'dense' else ''}",
             "  gm " + ", ".join(f"{k}:{v}" for k, v in p.gm.items()),
             "  workspace tiles " + ", ".join(f"{k}:{v}" for k, v in p.tiles.items()),
             "  l1 " + ", ".join(f"{b.name}[{b.role} x {b.cols}]={'|'.join(b.operands)}" for b in p.l1)]
    for ph in (1, 2):
        lines.append(f"  cube phase {ph} {{")
        for c in p.phase(ph):
            lines.append(f"    %{c.value} = mmad.{c.form}({c.a.kind}:{c.a.tensor}, {c.b.kind}:{c.b.tensor}) "
                         f"[{c.m} x {c.n} x {c.k}] -> {c.dest}:{c.target}{at_suffix(c.loc) if locs else ''}")
        lines.append("  }")
        if ph == 1:
            lines.append("  flag cube->vector")
            lines.append("  vector {")
            lines += _vector_lines(p, ("unit", "item"), locs)
            lines.append("  }")
            lines.append("  flag vector->cube")
        elif p.online:
            lines.append("  flag cube->vector")
            lines.append("  vector {")
            lines += _vector_lines(p, ("pv", "last"), locs)
            lines.append("  }")
    for po in p.post:
        lines.append(f"  post {po.output} = cast_{po.round}({po.workspace}{' * ' + po.scale if po.scale else ''})")
    lines.append(f"  registers row {p.nregs.get('row', 0)}, head {p.nregs.get('head', 0)}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _vector_lines(p: AttentionProgram, scopes, locs: bool) -> list[str]:
    """print_program's lines of the vector instructions of `scopes`."""
    lines = []
    for i in p.vector:
        if i.scope not in scopes:
            continue
        reg = p.regs.get(i.dst)
        rtxt = f" @{reg[0]}{reg[1]}" if reg else ""
        extra = " ".join(x for x in (i.arg, i.op) if x)
        srcs = ", ".join(f"%{s}" for s in i.srcs)
        lines.append(f"    [{i.scope}] %{i.dst}{rtxt} = {i.kind}({srcs}){' ' + extra if extra else ''}"
                     f"{at_suffix(i.loc) if locs else ''}")
    return lines


def pipelined(p: AttentionProgram) -> bool:
    """True when the AIC may run phase 1 of the next unit before phase 2 of this one: a whole unit is one item and
    no operand is read by both phases (each phase loads its own; a buffer shared by operands of different phases
    is reloaded)."""
    if not p.full_rows:
        return False
    for c1 in p.phase(1):
        for c2 in p.phase(2):
            if {c1.a.tensor, c1.b.tensor} & {c2.a.tensor, c2.b.tensor}:
                return False
    return True
