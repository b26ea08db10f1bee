"""The attention family's kernel class in Kernel IR: one `kir.KernelClass` per distinct AttentionProgram.

The mixed kernel (KERNEL_TYPE_MIX_AIC_1_2) of an AttentionProgram (opgen.kernel.attnprog) as IR nodes: the AIC
(`CubeMain`) runs each unit's matmuls (GM -> L1 NZ by Nd2Nz, L1 -> L0A / L0B by LoadData, Mmad into L0C, Fixpipe to
the GM workspace or an output); its two AIVs (`VecMain`) run the vector stage on half of each unit's rows each; the
two sides hand each item over with cross-core flags (mode 2: FLAG_C2V, FLAG_V2C), an online softmax's P V tile with
a second C2V. A backward's scatter-adds go to fp32 workspaces by atomic Fixpipes; its outputs are zeroed before and
finished after (ZeroTargets / Finish, separated from the AIC by SyncAll and FLAG_ZERO / FLAG_DONE); its deterministic
schedule (tiling strategy `AttnPlan.det_strategy`) lets the AI Cores scatter in turn (FLAG_TURN, mode 0).

The schedule is the IR: the unit loops, the per-unit decode (`Decode`: the unit's coordinates, a selected key set's
batch found from the cumulative sequence arrays and its topk indices checked with Trap), the L1 loads, the matmul
tiling over K (MmadNT / MmadNN / MmadTN), the UB passes of vecRows rows and the per-row instruction streams. It holds
no in-core synchronisation: the dependency pass (opgen.kernel.kir_sync) places every barrier and flag between the
MTE2 / MTE1 / M / FIX / V / S / MTE3 pipes. The cross-core flags and SyncAll are the schedule's own.

Everything the kernel reads from the tiling is a tiling-data field symbol (printed td_->field; opgen.tiling.attention
names them); nothing from the spec becomes an identifier except the GM_ADDR arguments (the spec's input and output
names, as CANN's entry takes them) and the compiler's value names of the program (st_v<n>, ws_v<n>).

Reference facts: docs/reference/ascendc.md §1.3 (mix kernel indexing), §1.6 (cross-core flags, SyncAll), §1.7 (atomic
add), §1.9 (vector instructions), §1.10 (Nd2Nz, LoadData, Mmad, Fixpipe); docs/reference/nsa_selected_attention.md
§2 (the math).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from opgen.errors import SpecError
from opgen.ir.dims import Constraint, Fn, Lit, Sym, as_dim, subst
from opgen.ir.dtypes import dtype_name
from opgen.ir.locs import spec_doc
from opgen.ir.printer import canonical_values
from opgen.names import cpp_name
from opgen.kernel import kir as K
from opgen.kernel.isa import FP32_MAX, Op, Pipe
from opgen.kernel.rowfexpr import FExprError
from opgen.kernel.rowfexpr import parse as parse_fexpr
from opgen.kernel.ubplan import apply_plan, plan_ub

FLAG_C2V, FLAG_V2C, FLAG_ZERO, FLAG_DONE, FLAG_TURN = 1, 2, 3, 4, 5
"""Cross-core flag ids (docs/reference/ascendc.md §1.6: 0..10 on Atlas A2 / A3): C2V the AIC -> its AIVs (the item's
cube results are in the workspace), V2C the AIVs -> their AIC (the vector results are), ZERO the AIVs -> their AIC
(the atomic targets are zero everywhere), DONE the AIC -> its AIVs (all its atomic adds are done), TURN every AIC
(mode 0: the deterministic schedule's turn barrier)."""

CTYPE = {"f32": "float", "f16": "half", "bf16": "bfloat16_t", "i32": "int32_t", "i64": "int64_t", "bool": "uint8_t",
         "u8": "uint8_t"}
"""C++ element type of a GM tensor by dtype (bool tensors are read as their bytes)."""


@dataclass(frozen=True)
class AttnPlan:
    """What the tiling decides that the class reads: `slots` workspace slots per AI Core; `det` the deterministic
    schedule exists (strategy `det_strategy` of the tiling key); `ws_align` the byte alignment of each workspace
    region; `post_offsets` {output: tiling field of its fp32 workspace's byte offset}; `post_sizes` {output: the
    tiling fields whose product is its element count}; `l0c_acc` the bytes of L0C's accumulator region (the tile
    region follows); `l0a` / `l0b` / `l0c` the buffers' bytes."""

    slots: int
    det: bool
    det_strategy: int
    ws_align: int
    post_offsets: tuple
    post_sizes: tuple
    l0c_acc: int
    l0a: int
    l0b: int
    l0c: int


TP = "T"
"""The class's template parameter: the C++ type of the data's dtype variable (the entry instantiates it per dtype
row)."""
S = Sym
C = Constraint


def _min(a, b):
    return Fn("min", (as_dim(a), as_dim(b)))


def _max(a, b):
    return Fn("max", (as_dim(a), as_dim(b)))


def _align(a, b):
    return Fn("align_up", (as_dim(a), as_dim(b)))


def _cdiv(a, b):
    return Fn("ceil_div", (as_dim(a), as_dim(b)))


N1, N2, G, D, DV = S("qHeads"), S("kvHeads"), S("groupSize"), S("headDim"), S("valueDim")
CNT, BS, L, LC, LI, IC = S("blockCount"), S("blockSize"), S("selKeys"), S("chunkKeys"), S("itemKeys"), S("itemChunks")
S1, S2 = S("qSeq"), S("kvSeq")
GTILE, VROWS = S("gTile"), S("vecRows")
X = "x"   # the unit struct parameter


def xf(name: str) -> Sym:
    """Field `name` of the unit struct parameter x."""
    return S(f"{X}.{name}")


UNIT_DENSE = ("b", "n2", "h0", "nh", "s", "qr", "rows", "keys", "chunks", "items", "mPad")
UNIT_SELECTED = ("t", "n2", "h0", "rows", "s", "kv0", "mPad")
UNIT_TND = ("q0", "k0", "qLen", "kvLen")
"""A dense TND unit's batch: its first query and key tokens and its query and key lengths (from the cumulative
ends)."""
UNIT_TND_DOC = " Dense keys stored TND: the batch's first query and key tokens q0, k0 and its lengths qLen, kvLen."
"""UNIT_DOC's sentence of a dense TND unit."""
UNIT_DOC = ("One work unit (Decode): dense keys: batch b, kv head n2, query heads h0 .. h0 + nh - 1 (GQA: the G query "
            "heads of a kv head share its keys), query rows s .. s + qr - 1 (an S1 block), rows = nh * qr head-major, its "
            "first `keys` keys in `chunks` cube chunks and `items` items; selected keys: token t, its in-batch position s, "
            "the first key row kv0 of its batch, heads h0 .. h0 + rows - 1; mPad = the Mmad's rows padded to 16.")
"""The fields of the unit struct (int64): dense (batch b, kv head n2, heads h0 .. h0 + nh - 1, query rows s .. s + qr
- 1, rows = nh * qr, its keys in chunks and items, mPad the Mmad's padded rows); selected (token t, its in-batch
position s, first key row kv0 of its batch)."""


_FLT_MAX = f"{FP32_MAX!r}f"
_ATTN_WORDS = ((re.compile(r"\bFinite0\((st_\w+)\)"), rf"(\1 > -{_FLT_MAX} ? \1 : -{_FLT_MAX})"),
               (re.compile(r"\bFLT_MAX_VALUE\b"), _FLT_MAX),
               (re.compile(r"\bNEG_INF_VALUE\b"), "(-__builtin_inff())"))
"""The attention programs' own words in their scalar texts (opgen.kernel.attnprog) in the row programs' scalar
grammar: Finite0(m) (m, or 0 when -inf: as max(m, -FLT_MAX), which gives the same difference x - m for every m the
online softmax meets), the kernel constants FLT_MAX_VALUE and NEG_INF_VALUE."""


def scalar_expr(text: str, attrs: dict) -> K.FExpr:
    """The FExpr of a scalar operand of the attention program: its text (constants, the float attribute
    `attr_<name>` -> the member attrs[name], per-row values `st_<v>`, `-(a)`, `1.0f / (a)`, Finite0(a)) read by the
    row programs' scalar parser (opgen.kernel.rowfexpr.parse) once the attention words are spelled in its grammar
    (_ATTN_WORDS). Raises SpecError for a text outside it."""
    t = text
    for pat, repl in _ATTN_WORDS:
        t = pat.sub(repl, t)
    t = re.sub(r"\battr_(\w+)\b", lambda m: attrs.get(m.group(1), m.group(0)), t)
    try:
        return parse_fexpr(t)
    except FExprError as e:
        raise SpecError(f"the attention kernel cannot print the scalar operand {text!r}: {e}") from None


def _copy(doc="", *, dst, src, count, esize) -> K.Copy:
    """One contiguous DataCopyPad of `count` elements of `esize` bytes between UB and GM (a Copy of one burst)."""
    return K.Copy(dst, src, Lit(1), as_dim(count) * esize, Lit(0), Lit(0), doc)


def _let_if_used(name: str, value, stmts) -> tuple:
    """(Let name = value,) when statements `stmts` read `name`, else () (no unused variable in the C++)."""
    text = "\n".join(ln.split("//")[0] for x in stmts for ln in K.to_text_stmt(x).split("\n"))
    return (K.Let(name, value),) if re.search(rf"\b{re.escape(name)}\b", text) else ()


def _reached(methods: list, roots: tuple) -> list:
    """The methods the statements `roots` call, directly or through others, in their order in `methods` (the
    helpers a specialisation does not use are not printed)."""
    by = {m.name: m for m in methods}
    seen: set = set()
    todo = [s.method for s in K.walk(roots) if isinstance(s, K.Call)]
    while todo:
        n = todo.pop()
        if n in seen or n not in by:
            continue
        seen.add(n)
        todo += [s.method for s in K.walk(by[n].body) if isinstance(s, K.Call)]
    return [m for m in methods if m.name in seen]


class AttnBuilder:
    """Builds the KernelClass of one AttentionProgram (module docstring). `io` is ((spec name, C++ argument name,
    C++ element type or None when the class reads it not), ...) of the operator's inputs then outputs (the Init
    arguments), `plan` the tiling's decisions, `data` the data's dtype variable (its C++ type is the class's template
    parameter T), `tokens` the layout's role letters of the dim texts, `offset` the dense causal offset as an
    integer expression over qSeq / kvSeq (None: 0). `build` returns the verified class; it raises SpecError for a
    program the kernel cannot run and IRError for a class that does not verify."""

    def __init__(self, name: str, p, io: tuple, plan: AttnPlan, tokens: dict, data: str, offset=None,
                 spec_name: str = ""):
        self.name, self.p, self.io, self.plan, self.tokens, self.data = name, p, io, plan, tokens, data
        self.tiling_struct, self.doc = f"optiling::{spec_name or name}TilingData", ""
        self.offset = offset
        self.spec_name = spec_name or name
        self.dense = p.keyset == "dense"
        # TND (dense): batches stored concatenated, each unit with its batch's first query / key token q0 / k0 and
        # lengths qLen / kvLen (Decode, from the cumulative ends); BSND's addressing with those for b * S and S
        self.tnd = self.dense and p.form == "TND"
        self.seq1, self.seq2 = (xf("qLen"), xf("kvLen")) if self.tnd else (S1, S2)
        self.q_first, self.k_first = (xf("q0"), xf("k0")) if self.tnd else (xf("b") * S1, xf("b") * S2)
        self.token_major = p.form in ("BSND", "TND")
        self.multi = p.full_rows or p.online
        self.row_cap = L if p.full_rows else (LI if p.online else LC)
        self.span = LI if p.online else LC   # keys per item of a dense key set (item c starts at key c * span)
        self.fields: set = set()
        self.methods: list = []
        self.locals: list = []
        self.tensors: list = []
        self.attrs = {a: "scale_" for a in p.scalars}
        if len(p.scalars) > 1:
            raise SpecError(f"{self.spec_name}: the attention kernel takes one float attribute (the scale), got "
                            f"{', '.join(p.scalars)}")
        self.tile_que = {}
        self.stat_que = {}
        for i in p.vector:
            if i.kind == "st_tile":
                self.tile_que[i.arg] = f"tileQue{len(self.tile_que)}"
            elif i.kind == "st_stat8":
                self.stat_que[i.arg] = f"statQue{len(self.stat_que)}"
        self.unit_stats = list(p.stats)
        self.gm_name = {n: f"gm_{arg}" for n, arg, _ct in io}
        self.ws_types = {}

    # ------------------------------------------------------------------ helpers
    def f(self, name: str) -> Sym:
        """Tiling field `name` (recorded as read)."""
        self.fields.add(name)
        return S(name)

    def tile_ctype(self, tile: str) -> str:
        """C++ element type of workspace tile `tile`: float, or T for the data's dtype variable. Raises SpecError."""
        dt = self.p.tiles[tile]
        if dt == "f32":
            return "float"
        if dt != self.data:
            raise SpecError(f"{self.spec_name}: workspace tile {tile} has dtype {dt}, not the data's {self.data}")
        return TP

    def ws(self, ctype: str, region: str) -> str:
        """The workspace GlobalTensor member of workspace region `region` (a tile: `tile<k>`, an output's fp32
        accumulation: `out<k>`), of element type ctype: one member per region, so that the dependency pass sees
        the regions apart (kir.GmTensor.region)."""
        name = f"ws{region[0].upper()}{region[1:]}_"
        self.ws_types[name] = (ctype, region)
        return name

    def size(self, ctype: str):
        """Bytes of an element of ctype (sizeof(T) for the template parameter)."""
        return K.SizeOf(ctype) if ctype == TP else Lit({"float": 4, "half": 2, "bfloat16_t": 2}[ctype])

    def region(self, tile: str):
        """(workspace member, element offset of tile `tile`'s slot 0 for AI Core `core`) of a workspace tile, or of
        a post workspace (an output's fp32 accumulation)."""
        p, pl = self.p, self.plan
        post = {po.workspace: po for po in p.post} | {po.output: po for po in p.post}
        if tile in post:
            off = dict(pl.post_offsets)[post[tile].output]
            return self.ws("float", f"out{p.post.index(post[tile])}"), self.f(off) // 4
        rows = self.f("gRows")
        keys = self.f("selKeys") if p.full_rows else (self.f("itemKeys") if p.online else self.f("chunkKeys"))
        base = S("core_") * pl.slots * self.f("wsSlotBytes")
        for j, t in enumerate(p.tiles):
            ct = self.tile_ctype(t)
            if t == tile:
                return self.ws(ct, f"tile{j}"), base // self.size(ct)
            cols = self.f("valueDim") if p.tile_cols.get(t) == "Dv" else keys
            base = base + _align(rows * cols * self.size(ct), pl.ws_align)
        raise SpecError(f"{self.spec_name}: no workspace region {tile}")

    def slot_view(self, tile: str, extra=Lit(0)) -> K.GmView:
        """Workspace tile `tile` in slot `slot`, from element `extra`."""
        ws, base = self.region(tile)
        ct = self.tile_ctype(tile)
        return K.GmView(ws, base + S("slot") * (self.f("wsSlotBytes") // self.size(ct)) + extra)

    def gm(self, name: str) -> str:
        """The GlobalTensor member of spec input / output `name`."""
        return self.gm_name[name]

    def member_dim(self, role: str):
        """Tiling field of a head dim by role name or shape-key letter (D / d: headDim, Dv / v: valueDim)."""
        return self.f({"D": "headDim", "Dv": "valueDim", "d": "headDim", "v": "valueDim"}[role])

    def buf(self, name: str, pos=K.TPos.VECCALC, queue=False):
        """Declare a TPipe allocation (a TBuf, or a TQue of depth 1 when queue)."""
        self.locals.append(K.Local(name, pos, queue))

    def tensor(self, name: str, dtype: str):
        """Declare a member LocalTensor."""
        self.tensors.append(K.TensorVar(name, dtype))

    def method(self, name, params=(), body=(), ret="void", doc=""):
        """Add a method to the class."""
        self.methods.append(K.Func(name, tuple(params), tuple(body), ret, doc=doc))

    # ------------------------------------------------------------------ unit
    def decode(self):
        """Decode(u, x): the unit's coordinates (UNIT_DENSE / UNIT_SELECTED)."""
        p = self.p
        u = S("u")
        body = [K.Let("gc", u % self.f("gChunks"))]
        if self.dense:
            qb, hr, qr = self.f("qBlocks"), self.f("headRows"), self.f("qRows")
            self.f("qSeq")
            self.f("kvSeq")
            self.f("groupSize")
            self.f("kvHeads")
            if self.tnd:
                body += self.decode_batch(u, qr)
                qb = S("qb")
            body += [
                K.Let("rest", (u - S("unitBase_")) // self.f("gChunks") if self.tnd else u // self.f("gChunks")),
                K.StructSet("x.s", (S("rest") % qb) * qr),
                K.StructSet("x.n2", S("rest") // qb if self.tnd else (S("rest") // qb) % N2),
                *(() if self.tnd else (K.StructSet("x.b", S("rest") // (qb * N2)),)),
                K.StructSet("x.h0", xf("n2") * G + S("gc") * hr),
                K.StructSet("x.nh", _min(hr, G - S("gc") * hr)),
                K.StructSet("x.qr", _min(qr, self.seq1 - xf("s"))),
                K.StructSet("x.rows", xf("nh") * xf("qr")),
            ]
            self.f("selKeys")
            self.f("blockSize")
            if p.causal and self.offset is not None:
                off = self.offset
                body.append(K.StructSet("x.keys", K.Select((C("<", xf("s") + off, Lit(0)),), L,
                                                            _align(_min(S2, xf("s") + xf("qr") + off), BS)),
                                        "a row with no visible key averages every key: such a unit keeps them all"))
            elif p.causal:
                body.append(K.StructSet("x.keys", _align(_min(self.seq2, xf("s") + xf("qr")), BS),
                                        "keys after the block's last row are masked for every row"))
            elif self.tnd:
                body.append(K.StructSet("x.keys", _align(self.seq2, BS), "the batch's keys, in whole blocks"))
            else:
                body.append(K.StructSet("x.keys", L))
            body.append(K.StructSet("x.chunks", _cdiv(xf("keys"), self.f("chunkKeys"))))
            body.append(K.StructSet("x.items", _cdiv(xf("keys"), self.f("itemKeys")) if p.online else xf("chunks")))
        else:
            gr = self.f("gRows")
            cuq, cukv, topk = (self.gm(self.layout_role[r]) for r in ("cuq", "cukv", "topk"))
            nb = self.f("batches")
            self.f("blockCount")
            self.f("blockSize")
            body += [
                K.StructSet("x.t", u // (N2 * self.f("gChunks"))),
                K.StructSet("x.n2", (u // self.f("gChunks")) % N2),
                K.StructSet("x.h0", xf("n2") * G + S("gc") * gr),
                K.StructSet("x.rows", _min(gr, G - S("gc") * gr)),
                K.For("batch_", S("batch_"), K.Select((C(">=", xf("t"), K.GmAt(cuq, S("batch_"))),), nb - 1,
                                                       S("batch_")), None,
                      (K.Assign("batch_", S("batch_") + 1),),
                      doc="the token's batch: the cumulative query lengths are increasing and the tokens of a core "
                          "too"),
                K.StructSet("x.s", xf("t") - K.Select((C(">", S("batch_"), Lit(0)),), K.GmAt(cuq, S("batch_") - 1),
                                                      Lit(0))),
                K.StructSet("x.kv0", K.Select((C(">", S("batch_"), Lit(0)),), K.GmAt(cukv, S("batch_") - 1), Lit(0))),
                K.Let("kvLen", K.GmAt(cukv, S("batch_")) - xf("kv0")),
            ]
            check = [K.Let("blk", K.GmAt(topk, (xf("t") * N2 + xf("n2")) * CNT + S("i"))),
                     K.TrapUnless(S("blk"), S("kvLen") // BS,
                                  "a selected block lies inside its batch: 0 <= idx, (idx + 1) * bs <= S2 of the batch")]
            if p.causal:
                body.append(K.Let("first", S("kvLen"), mutable=True))
                check.append(K.Assign("first", _min(S("first"), S("blk"))))
            body.append(K.For("i", Lit(0), CNT, Lit(1), tuple(check),
                              doc="the topk rules the aclnn layer cannot check (device data): a violation stops the "
                                  "AI Core (Trap) and the launch fails"))
            if p.causal:
                body.append(K.TrapUnless(S("first"), xf("s") // BS + 1,
                                         "under causal masking a token selects a key at or before it"))
        body.append(K.StructSet("x.mPad", _align(_max(xf("rows"), Lit(2)), Lit(16)),
                                "Mmad rows: m = 1 would select GEMV mode"))
        self.method("Decode", (K.Param("u"), K.Param(X, "struct", "Unit")), body,
                    doc="The coordinates of work unit u (the Unit struct's fields).")

    def units_of(self, b, qr):
        """The units of batch b (TND): kv heads x head groups x query blocks of its query tokens."""
        cuq = self.gm(self.layout_role["cuq"])
        first = K.Select((C(">", b, Lit(0)),), K.GmAt(cuq, b - 1), Lit(0))
        return N2 * self.f("gChunks") * _cdiv(K.GmAt(cuq, b) - first, qr)

    def decode_batch(self, u, qr) -> list:
        """Decode's batch of unit u (TND): batch_ and unitBase_ (its first unit) advance past the batches whose units
        end at or before u (a core's units increase), then the batch's first tokens and lengths (x.b, x.q0, x.k0,
        x.qLen, x.kvLen) and its query blocks qb."""
        cuq, cukv = (self.gm(self.layout_role[r]) for r in ("cuq", "cukv"))
        nb = self.f("batches")
        b = S("batch_")
        first = (lambda cu: K.Select((C(">", b, Lit(0)),), K.GmAt(cu, b - 1), Lit(0)))
        return [
            K.For("batch_", b, K.Select((C(">=", u, S("unitBase_") + self.units_of(b, qr)),), nb - 1, b), None,
                  (K.Assign("unitBase_", S("unitBase_") + self.units_of(b, qr)), K.Assign("batch_", b + 1)),
                  doc="the unit's batch: the cumulative query ends increase and the units of a core too"),
            K.StructSet("x.b", b),
            K.StructSet("x.q0", first(cuq)),
            K.StructSet("x.k0", first(cukv)),
            K.StructSet("x.qLen", K.GmAt(cuq, b) - xf("q0")),
            K.StructSet("x.kvLen", K.GmAt(cukv, b) - xf("k0")),
            K.Let("qb", _cdiv(xf("qLen"), qr)),
        ]

    def chunk_keys(self, c):
        """Keys of cube chunk c of the unit."""
        if self.dense:
            return _min(LC, xf("keys") - c * LC)
        return _min(self.f("blocksPerChunk"), CNT - c * self.f("blocksPerChunk")) * BS

    def item_keys(self, c):
        """Keys of online item c of the unit (a block of itemKeys keys, the last one shorter)."""
        return _min(LI, xf("keys") - c * LI)

    # ------------------------------------------------------------------ cube helpers
    def cube_helpers(self):
        """The AIC's helper methods (RowsToNz, MmadNT / MmadNN / MmadTN, Heads, Gather, TileIn, ScatterAdd; module
        docstring)."""
        T = TP
        tp = K.Param

        def rows_to_nz():
            body = (K.If((C("<=", S("pitch"), Lit(65535)),),
                         (K.Nd2Nz(K.Ref("dst"), K.GmView("src"), S("rows"), S("cols"), S("pitch"), S("padRows")),),
                         (K.For("r", Lit(0), S("rows"), Lit(1), (
                             K.Nd2Nz(K.Ref("dst", S("r") * 16), K.GmView("src", S("r") * S("pitch")), Lit(1),
                                     S("cols"), S("cols"), S("padRows")),)),),
                         "one ND -> NZ copy when the pitch fits the 16-bit srcDValue, else one per row"),)
            self.method("RowsToNz", (tp("dst", "tensor", T), tp("src", "gm", T), tp("rows"), tp("cols"),
                                     tp("pitch"), tp("padRows")), body,
                        doc="`rows` GM rows of `cols` elements, `pitch` elements apart, into an L1 NZ matrix of "
                            "`padRows` rows (its C0 stride).")

        rows_to_nz()
        m1 = _align(S("mm"), 16) // 16

        def kloop(load_b):
            return K.For("k0", Lit(0), S("k"), S("kt"), (
                K.Let("k1", S("kk") // 16),
                K.For("mb", Lit(0), m1, Lit(1), (
                    K.LoadData(K.Ref("l0a_", S("mb") * S("k1") * 256), K.Ref("a"),
                               S("k0") // 16 * (S("aPad") // 16) + S("mb"), S("k1"), S("aPad") // 16),),
                      disjoint=True),
                *load_b,
                K.Mmad(K.Ref("c"), K.Ref("l0a_"), K.Ref("l0b_"), S("mm"), S("n"), S("k1") * 16,
                       (S("init"), C("==", S("k0"), Lit(0)))),
            ), tail="kk", doc="K in tiles of kt")

        nt = kloop((K.LoadData(K.Ref("l0b_"), K.Ref("b"), S("k0") // 16 * (S("n") // 16), S("k1") * (S("n") // 16),
                               Lit(1)),))
        self.method("MmadNT", (tp("c", "tensor", "float"), tp("a", "tensor", T), tp("b", "tensor", T), tp("mm"),
                               tp("aPad"), tp("n"), tp("k"), tp("kt"), tp("init")), (nt,),
                    doc="C (L0C) [+]= A Bᵀ: A stored [m, k] in L1 NZ (C0 stride aPad rows), B stored [n, k] (C0 "
                        "stride n rows, n a multiple of 16); k in tiles of kt; mm (>= 2) Mmad rows.")
        nn = kloop((K.For("kb", Lit(0), S("k1"), Lit(1), (
            K.LoadData(K.Ref("l0b_", S("kb") * (S("n") // 16) * 256), K.Ref("b"), S("k0") // 16 + S("kb"),
                       S("n") // 16, S("bPad") // 16, True),), disjoint=True),))
        self.method("MmadNN", (tp("c", "tensor", "float"), tp("a", "tensor", T), tp("b", "tensor", T), tp("mm"),
                               tp("aPad"), tp("n"), tp("k"), tp("bPad"), tp("kt"), tp("init")), (nn,),
                    doc="C (L0C) [+]= A B: A stored [m, k] (C0 stride aPad), B stored [k, n] (C0 stride bPad rows); "
                        "k tiles of kt (fractal transposes turn B's NZ into L0B's ZN layout).")
        k1 = _align(S("k"), 16) // 16
        tn = (
            K.For("mb", Lit(0), S("m") // 16, Lit(1), (
                K.LoadData(K.Ref("l0a_", S("mb") * k1 * 256), K.Ref("a"), S("mb") * (S("aPad") // 16), k1, Lit(1),
                           True),), disjoint=True),
            K.For("kb", Lit(0), k1, Lit(1), (
                K.LoadData(K.Ref("l0b_", S("kb") * (S("nn") // 16) * 256), K.Ref("b"),
                           S("n0") // 16 * (S("bPad") // 16) + S("kb"), S("nn") // 16, S("bPad") // 16, True),),
                  disjoint=True),
            K.Mmad(K.Ref("c"), K.Ref("l0a_"), K.Ref("l0b_"), S("m"), S("nn"), S("k"), (C("==", Lit(0), Lit(0)),)),
        )
        self.method("MmadTN", (tp("c", "tensor", "float"), tp("a", "tensor", T), tp("b", "tensor", T), tp("m"),
                               tp("aPad"), tp("n0"), tp("nn"), tp("k"), tp("bPad")), tn,
                    doc="C (L0C) = Aᵀ B[:, n0 : n0 + nn]: A stored [k, m] (C0 stride aPad rows, m a multiple of 16), "
                        "B stored [k, n] (C0 stride bPad rows); k = the unit's rows (one k tile).")

        x = K.Param(X, "struct", "Unit")
        if self.dense:
            real = _min(S("keys"), self.seq2 - S("c") * LC)
            if self.token_major:
                first = K.GmView("src", ((self.k_first + S("c") * LC) * N2 + xf("n2")) * S("e"))
                last = K.GmView("src", ((self.k_first + self.seq2 - 1) * N2 + xf("n2")) * S("e"))
                pitch = N2 * S("e")
            else:
                base = (xf("b") * N2 + xf("n2")) * S2
                first = K.GmView("src", (base + S("c") * LC) * S("e"))
                last = K.GmView("src", (base + S2 - 1) * S("e"))
                pitch = S("e")
            gather = (
                K.Let("real", real),
                K.Call("RowsToNz", (K.Ref("dst"), first, S("real"), S("e"), pitch, S("keys"))),
                K.For("r", S("real"), S("keys"), Lit(1), (
                    K.Call("RowsToNz", (K.Ref("dst", S("r") * 16), last, Lit(1), S("e"), S("e"), S("keys"))),),
                      doc="the pad rows after S2 repeat row S2 - 1 (finite data: a pad key's probability is 0)"),
            )
            gdoc = ("Key chunk c of unit x: its rows of a [B, N2, S2, E] ([B, S2, N2, E] in BSND) tensor into L1 NZ "
                    "(C0 stride = the chunk's keys).")
            if self.token_major:
                hsrc = K.GmView("src", ((self.q_first + xf("s")) * N1 + xf("h0") + S("i")) * S("e"))
                hpitch = N1 * S("e")
            else:
                hsrc = K.GmView("src", ((xf("b") * N1 + xf("h0") + S("i")) * S1 + xf("s")) * S("e"))
                hpitch = S("e")
            heads = (K.For("i", Lit(0), xf("nh"), Lit(1), (
                K.Call("RowsToNz", (K.Ref("dst", S("i") * xf("qr") * 16), hsrc, xf("qr"), S("e"), hpitch, GTILE)),),
                disjoint=True),)
            hdoc = ("The unit's rows of a [B, N1, S1, E] ([B, S1, N1, E] in BSND) tensor (per head h0 .., its query "
                    "rows s ..) into L1 NZ (head-major rows, C0 stride gTile rows).")
        else:
            topk = self.gm(self.layout_role["topk"])
            gather = (K.For("b", Lit(0), S("keys") // BS, Lit(1), (
                K.Let("row", xf("kv0") + K.GmAt(topk, (xf("t") * N2 + xf("n2")) * CNT + S("c") * self.f(
                    "blocksPerChunk") + S("b")) * BS),
                K.Call("RowsToNz", (K.Ref("dst", S("b") * BS * 16), K.GmView("src", (S("row") * N2 + xf("n2")) * S("e")),
                                    BS, S("e"), N2 * S("e"), S("keys")))), disjoint=True),)
            gdoc = ("The selected rows of a [T2, N2, E] tensor for key chunk c of unit x, gathered into L1 NZ (one ND "
                    "-> NZ copy per selected block; C0 stride = the chunk's keys).")
            heads = (K.Call("RowsToNz", (K.Ref("dst"), K.GmView("src", (xf("t") * N1 + xf("h0")) * S("e")),
                                         xf("rows"), S("e"), S("e"), GTILE)),)
            hdoc = "The unit's rows of a head-major [T1, N1, E] tensor into L1 NZ (C0 stride gTile rows)."
        self.f("gTile")
        self.method("Gather", (tp("dst", "tensor", T), tp("src", "gm", T), tp("e"), x, tp("c"), tp("keys")), gather,
                    doc=gdoc)
        self.method("Heads", (tp("dst", "tensor", T), tp("src", "gm", T), tp("e"), x), heads, doc=hdoc)
        self.method("TileIn", (tp("dst", "tensor", T), tp("src", "gm", T), x, tp("keys"), tp("pitch")),
                    (K.Call("RowsToNz", (K.Ref("dst"), K.GmView("src"), xf("rows"), S("keys"), S("pitch"), GTILE)),),
                    doc="`keys` columns of the unit's rows of a workspace tile (row pitch `pitch`) into L1 NZ (C0 "
                        "stride gTile rows).")
        if any(c.dest == "scatter" for c in self.p.cube) and self.dense:
            if self.token_major:
                first, pitch = ((self.k_first + S("c") * LC) * N2 + xf("n2")) * S("e"), N2 * S("e")
            else:
                first, pitch = ((xf("b") * N2 + xf("n2")) * S2 + S("c") * LC) * S("e"), S("e")
            self.method("ScatterAdd", (tp("dst", "gm", "float"), tp("src", "tensor", "float"), tp("e"), x, tp("c"),
                                       tp("keys"), tp("n0"), tp("nn")), (
                K.Fixpipe(K.GmView("dst", first + S("n0")), K.Ref("src"), _min(S("keys"), self.seq2 - S("c") * LC), S("nn"),
                          S("keys"), pitch, atomic=True),),
                        doc="Atomic fp32 add of an L0C [keys, nn] result (C0 stride keys) into the [B, N2, S2, E] "
                            "([B, S2, N2, E] in BSND) workspace at key chunk c's rows, columns n0 .. n0 + nn (the pad "
                            "keys after S2 are not added).")
        elif any(c.dest == "scatter" for c in self.p.cube):
            topk = self.gm(self.layout_role["topk"])
            scat = (K.For("b", Lit(0), S("keys") // BS, Lit(1), (
                K.Let("row", xf("kv0") + K.GmAt(topk, (xf("t") * N2 + xf("n2")) * CNT + S("c") * self.f(
                    "blocksPerChunk") + S("b")) * BS),
                K.Fixpipe(K.GmView("dst", (S("row") * N2 + xf("n2")) * S("e") + S("n0")), K.Ref("src", S("b") * BS * 16),
                          BS, S("nn"), S("keys"), N2 * S("e"), atomic=True)),),)
            self.method("ScatterAdd", (tp("dst", "gm", "float"), tp("src", "tensor", "float"), tp("e"), x, tp("c"),
                                       tp("keys"), tp("n0"), tp("nn")), scat,
                        doc="Atomic fp32 add of the per-block rows of an L0C [keys, nn] result (C0 stride keys) into "
                            "the [T2, N2, E] workspace at the selected rows, columns n0 .. n0 + nn (duplicate indices "
                            "accumulate).")

    # ------------------------------------------------------------------ cube phases
    def l1(self, tensor: str) -> str:
        """The L1 tensor member holding GM tensor / tile `tensor` (the program's L1 plan)."""
        return self.p.l1_of(tensor).name + "_"

    def col(self, c):
        """The column of cube chunk c in a whole-row (multi-chunk) workspace tile."""
        if self.p.online:
            return (c - S("item") * IC) * LC
        return c * LC

    def loads(self, phase: int, loaded: set, c):
        """(per-unit loads, per-chunk loads) of the L1 operands phase `phase` needs and `loaded` does not hold."""
        unit, chunk = [], []
        for op in self.p.phase(phase):
            for o in (op.a, op.b):
                if o.tensor in loaded:
                    continue
                loaded.add(o.tensor)
                buf = K.Ref(self.l1(o.tensor))
                if o.kind == "heads":
                    unit.append(K.Call("Heads", (buf, K.GmView(self.gm(o.tensor)), self.member_dim(o.cols), S(X)),
                                       doc=spec_doc(op.loc)))
                elif o.kind == "gather":
                    chunk.append(K.Call("Gather", (buf, K.GmView(self.gm(o.tensor)), self.member_dim(o.cols), S(X),
                                                   c, S("keys")), doc=spec_doc(op.loc)))
                else:
                    src = self.slot_view(o.tensor, self.col(c) if self.multi else Lit(0))
                    chunk.append(K.Call("TileIn", (buf, src, S(X), S("keys"), self.pitch() if self.multi
                                                   else S("keys")), doc=spec_doc(op.loc)))
        return unit, chunk

    def pitch(self):
        """Row pitch of a whole-row workspace tile."""
        if self.p.online:
            return S("bkeys")
        return xf("keys") if self.dense else L

    def tile_field(self, op) -> str:
        """The tiling field holding the k (NT, NN) or n (TN) tile of matmul op."""
        if op.form == "NN":
            return "baseKo" if self.p.full_rows or self.p.online else "baseKq"
        key = (op.form, op.k if op.form != "TN" else op.n)
        fields = {("NT", "D"): "baseKs", ("NT", "Dv"): "baseKp", ("TN", "D"): "baseNk", ("TN", "Dv"): "baseNv"}
        if key not in fields:
            raise SpecError(f"{self.spec_name}: no cube tile for matmul %{op.value} ({op.form}, {key[1]})")
        return fields[key]

    def mmad(self, op, c) -> list:
        """The statements of matmul `op` on cube chunk `c`: its Mmad call and where its result goes (a workspace tile
        by Fixpipe, the L0C accumulator, or scatter-adds per n tile)."""
        a, b = K.Ref(self.l1(op.a.tensor)), K.Ref(self.l1(op.b.tensor))
        base = self.f(self.tile_field(op))
        if op.form == "NT":
            out = [K.Call("MmadNT", (K.Ref("tile_"), a, b, xf("mPad"), GTILE, S("keys"), self.member_dim(op.k), base,
                                     Lit(1)), doc=spec_doc(op.loc))]
            pitch = self.pitch() if self.multi else S("keys")
            col = self.col(c) if self.multi else Lit(0)
            ws, _ = self.region(op.target)
            out.append(K.Fixpipe(self.slot_view(op.target, col), K.Ref("tile_"), xf("rows"), S("keys"), xf("mPad"),
                                 pitch, spec_doc(op.loc)))
            return out
        if op.form == "NN":
            n = self.member_dim(op.n)
            first = C("==", c, S("item") * IC) if op.dest == "pv" else C("==", c, Lit(0))
            init = K.Select((first,), Lit(1), Lit(0))   # accumulate after the first chunk
            return [K.Call("MmadNN", (K.Ref("acc_"), a, b, xf("mPad"), GTILE, n, S("keys"), S("keys"), base, init),
                           doc=spec_doc(op.loc))]
        n = self.member_dim(op.n)
        ws, off = self.region(op.target)
        return [K.For("n0", Lit(0), n, base, (
            K.Call("MmadTN", (K.Ref("tile_"), a, b, S("keys"), GTILE, S("n0"), S("nn"), xf("rows"), GTILE),
                   doc=spec_doc(op.loc)),
            K.Call("ScatterAdd", (K.GmView(ws, off), K.Ref("tile_"), n, S(X), c, S("keys"), S("n0"), S("nn")),
                   doc=spec_doc(op.loc))), tail="nn")]

    def acc_out(self, op) -> list:
        """The Fixpipe(s) of an accumulated matmul's result: to the output (dense: one per head, its query rows) or
        to its fp32 workspace."""
        n = self.member_dim(op.n)
        if self.dense:   # one Fixpipe per head: its query rows, stored as the query (the workspace as the output)
            if self.token_major:
                dst, pitch = ((self.q_first + xf("s")) * N1 + xf("h0") + S("i")) * n, N1 * n
            else:
                dst, pitch = ((xf("b") * N1 + xf("h0") + S("i")) * S1 + xf("s")) * n, n
            if op.dest == "out":
                view = K.GmView(self.gm(op.target), dst)
            else:
                ws, off = self.region(op.target)
                view = K.GmView(ws, off + dst)
            return [K.For("i", Lit(0), xf("nh"), Lit(1), (
                K.Fixpipe(view, K.Ref("acc_", S("i") * xf("qr") * 16), xf("qr"), n, xf("mPad"), pitch,
                          spec_doc(op.loc)),))]
        if op.dest == "out":
            return [K.Fixpipe(K.GmView(self.gm(op.target), (xf("t") * N1 + xf("h0")) * n), K.Ref("acc_"), xf("rows"),
                              n, xf("mPad"), n, spec_doc(op.loc))]
        ws, off = self.region(op.target)
        return [K.Fixpipe(K.GmView(ws, off + (xf("t") * N1 + xf("h0")) * n), K.Ref("acc_"), xf("rows"), n,
                          xf("mPad"), n, spec_doc(op.loc))]

    def cube_phase(self, phase: int, loaded: set) -> tuple:
        """The body of CubePhase<phase>(x, c, slot) (module docstring)."""
        p = self.p
        c = S("c")
        ops = [op for op in p.phase(phase) if op.dest != "scatter"]
        accs = [op for op in ops if op.form == "NN" and op.dest != "pv"]
        if p.online:   # item c: the cube chunks item * ic .. of its block of keys (bkeys, the tiles' pitch)
            cc = S("cc")
            unit, chunk = self.loads(phase, loaded, cc)
            body = [m for op in ops for m in self.mmad(op, cc)]
            out = [K.If((C("==", c, Lit(0)),), tuple(unit))] if unit else []
            out += [K.Let("item", c), K.Let("bkeys", self.item_keys(S("item"))),
                    K.For("cc", S("item") * IC, _min((S("item") + 1) * IC, xf("chunks")), Lit(1),
                          (K.Let("keys", self.chunk_keys(cc)), *chunk, *body), doc="the item's cube chunks",
                          nonempty=True)]   # item c < items = CeilDiv(chunks, IC): item * IC < chunks
            for op in ops:
                if op.dest == "pv":
                    n = self.member_dim(op.n)
                    out.append(K.Fixpipe(self.slot_view(op.target), K.Ref("acc_"), xf("rows"), n, xf("mPad"), n,
                                         spec_doc(op.loc)))
            return tuple(out)
        if p.full_rows:
            cc = S("cc")
            unit, chunk = self.loads(phase, loaded, cc)
            body = [m for op in ops for m in self.mmad(op, cc)]
            hi = xf("chunks") if self.dense else self.f("chunks")
            out = unit + [K.For("cc", Lit(0), hi, Lit(1), (K.Let("keys", self.chunk_keys(cc)), *chunk, *body),
                                doc="the unit's key chunks")]
            for op in accs:
                out += self.acc_out(op)
            return tuple(out)
        unit, chunk = self.loads(phase, loaded, c)
        body = [m for op in ops for m in self.mmad(op, c)]
        out = [K.Let("keys", self.chunk_keys(c))]
        if unit:
            out.append(K.If((C("==", c, Lit(0)),), tuple(unit)))
        out += chunk + body
        last = (xf("chunks") if self.dense else self.f("chunks")) - 1
        for op in accs:
            out.append(K.If((C("==", c, last),), tuple(self.acc_out(op))))
        return tuple(out)

    def cube_scatter(self) -> tuple:
        """The body of CubeScatter(x, c, slot): the phase-2 matmuls whose results are scatter-added."""
        ops = [op for op in self.p.phase(2) if op.dest == "scatter"]
        if self.p.full_rows:
            raise SpecError(f"{self.spec_name}: scatter-adds of a whole-row item are not supported")
        out = [K.Let("keys", self.chunk_keys(S("c")))]
        for op in ops:
            out += self.mmad(op, S("c"))
        return tuple(out)

    def cube_main(self, pipe: bool, scatter: bool) -> tuple:
        """The AIC's statements (CubeMain)."""
        p, pl = self.p, self.plan
        x = K.Param(X, "struct", "Unit")
        tp = K.Param
        loaded: set = set()
        ph1 = self.cube_phase(1, loaded)
        ph2 = self.cube_phase(2, loaded if not pipe else set())
        params = (x, tp("c"), tp("slot"))
        self.method("CubePhase1", params, ph1, doc="The matmuls of an item before its vector stage.")
        self.method("CubePhase2", params, ph2, doc="The matmuls of an item after its vector stage.")
        if scatter:
            self.method("CubeScatter", params, self.cube_scatter(),
                        doc="The scatter-adds of an item (matmuls whose result goes to the selected rows of an fp32 "
                            "workspace).")
        sz = K.SizeOf(TP)
        init = []
        for b in p.l1:
            pos = K.TPos.A1 if b.role != "gather" else K.TPos.B1
            cols = {"D": D, "Dv": DV, "keys": LC}[b.cols]
            rows = {"heads": GTILE, "gather": LC, "tile": GTILE}[b.role]
            self.buf(f"{b.name}Buf_", pos)
            self.tensor(f"{b.name}_", TP)
            init += [K.InitBuffer(f"{b.name}Buf_", rows * cols * sz), K.Get(f"{b.name}_", f"{b.name}Buf_", TP)]
        # L0C in two allocations (the TPipe places them one after the other): the accumulator (an item's O / dQ over
        # its chunks) and the tile region (each score / gradient tile): so their accesses are seen apart
        for name, pos, n in (("l0aBuf_", K.TPos.A2, pl.l0a), ("l0bBuf_", K.TPos.B2, pl.l0b),
                             ("l0cAccBuf_", K.TPos.CO1, pl.l0c_acc), ("l0cTileBuf_", K.TPos.CO1, pl.l0c - pl.l0c_acc)):
            self.buf(name, pos)
            init.append(K.InitBuffer(name, Lit(n)))
        self.tensor("l0a_", TP)
        self.tensor("l0b_", TP)
        self.tensor("acc_", "float")
        self.tensor("tile_", "float")
        init += [K.Get("l0a_", "l0aBuf_", TP), K.Get("l0b_", "l0bBuf_", TP), K.Get("acc_", "l0cAccBuf_", "float"),
                 K.Get("tile_", "l0cTileBuf_", "float")]
        init += [K.Assign("core_", K.BLOCK_IDX), *self.unit_range(), K.StructLet(X, "Unit")]
        if p.post and scatter:
            init.append(K.CrossCoreWaitFlag(FLAG_ZERO, "every AIV has zeroed its slice of the atomic targets"))
        u = S("u")
        if pipe:
            copy = tuple(K.StructSet(f"prev.{fld}", xf(fld)) for fld in self.unit_fields())
            loop = (
                K.StructLet("prev", "Unit"),
                K.Let("prevSlot", Lit(0), mutable=True),
                K.For("u", S("unitBegin"), S("unitEnd"), Lit(1), (
                    K.Call("Decode", (u, S(X))),
                    K.Let("slot", (u - S("unitBegin")) % pl.slots),
                    K.Call("CubePhase1", (S(X), Lit(0), S("slot"))),
                    K.CrossCoreSetFlag(2, Pipe.FIX, FLAG_C2V, "the unit's scores are in its workspace slot"),
                    K.If((C(">", u, S("unitBegin")),), (
                        K.CrossCoreWaitFlag(FLAG_V2C, "the previous unit's probabilities are in its slot"),
                        K.Call("CubePhase2", (S("prev"), Lit(0), S("prevSlot"))))),
                    *copy,
                    K.Assign("prevSlot", S("slot")),
                ), doc="phase 1 of unit u before phase 2 of unit u - 1: the cube works while the AIVs do"),
                K.If((C(">", S("unitEnd"), S("unitBegin")),), (
                    K.CrossCoreWaitFlag(FLAG_V2C), K.Call("CubePhase2", (S("prev"), Lit(0), S("prevSlot"))))),
            )
        else:
            items = Lit(1) if p.full_rows else (xf("items") if self.dense else self.f("chunks"))
            item = [K.Call("CubePhase1", (S(X), S("c"), Lit(0))),
                    K.CrossCoreSetFlag(2, Pipe.FIX, FLAG_C2V, "the item's cube results are in the workspace"),
                    K.CrossCoreWaitFlag(FLAG_V2C, "the item's vector results are"),
                    K.Call("CubePhase2", (S(X), S("c"), Lit(0)))]
            if p.online:
                item.append(K.CrossCoreSetFlag(2, Pipe.FIX, FLAG_C2V, "the item's P V tile is in the workspace"))
            if scatter:
                item.append(K.Call("CubeScatter", (S(X), S("c"), Lit(0))))
            serial = (K.For("u", S("unitBegin"), S("unitEnd"), Lit(1), (
                K.Call("Decode", (u, S(X))),
                *_items_loop(items, item)), doc="this AI Core's units"),)
            if pl.det and scatter:
                self.cube_ordered()
                loop = (K.If((C("==", self.f("strategy"), Lit(pl.det_strategy)),),
                             (K.Call("CubeMainOrdered", (S(X), S("unitBegin"), S("unitEnd"))),), serial,
                             "the deterministic schedule when the framework asks for it"),)
            else:
                loop = serial
        tail = (K.CrossCoreSetFlag(2, Pipe.FIX, FLAG_DONE, "the atomic targets are complete for this AI Core"),) \
            if p.post else ()
        return tuple(init) + loop + tail

    def cube_ordered(self):
        """Adds CubeMainOrdered (module docstring: the deterministic backward's rounds and turns)."""
        x = K.Param(X, "struct", "Unit")
        mine = C("<", S("u"), S("unitEnd"))
        work = (mine,)
        if self.dense:   # a unit's chunks end at its last visible key: every AIC still takes every turn
            work = (mine, C("<", S("c"), xf("chunks")))
        body = (
            K.Let("rounds", self.f("unitsPerCore") + K.Select((C(">", self.f("unitsTail"), Lit(0)),), Lit(1), Lit(0))),
            K.For("r", Lit(0), S("rounds"), Lit(1), (
                K.Let("u", S("unitBegin") + S("r")),
                K.If((mine,), (K.Call("Decode", (S("u"), S(X))),)),
                K.For("c", Lit(0), self.f("chunks"), Lit(1), (
                    K.If(work, (
                        K.Call("CubePhase1", (S(X), S("c"), Lit(0))),
                        K.CrossCoreSetFlag(2, Pipe.FIX, FLAG_C2V),
                        K.CrossCoreWaitFlag(FLAG_V2C),
                        K.Call("CubePhase2", (S(X), S("c"), Lit(0))))),
                    K.For("turn", Lit(0), K.BLOCK_NUM, Lit(1), (
                        K.If((*work, C("==", S("turn"), S("core_"))), (K.Call("CubeScatter", (S(X), S("c"),
                                                                                               Lit(0))),)),
                        K.CrossCoreSetFlag(0, Pipe.FIX, FLAG_TURN, "every AIC waits for this turn's scatter-adds"),
                        K.CrossCoreWaitFlag(FLAG_TURN)), doc="the AI Cores scatter in turn, in core order"))),
            ), doc="round r: every AIC its r-th unit (or none)"),)
        self.method("CubeMainOrdered", (x, K.Param("unitBegin"), K.Param("unitEnd")), body,
                    doc="The deterministic schedule: every AIC runs the same number of rounds; after each item the "
                        "AI Cores take turns in core order for their scatter-adds (all-AIC barriers, mode 0), so every "
                        "fp32 add into the dk / dv workspaces happens in a fixed order.")

    def unit_fields(self):
        """The Unit struct's fields of this key set."""
        return (UNIT_DENSE + UNIT_TND if self.tnd else UNIT_DENSE) if self.dense else UNIT_SELECTED

    def unit_range(self) -> list:
        """Lets unitBegin / unitEnd: this AI Core's units (the first unitsTail cores one more); core_ set. TND: the
        units are counted here from the cumulative query ends (the host's tiling does not read them; units_of) and
        split over the blockDim AI Cores the same way."""
        per, tail = self.f("unitsPerCore"), self.f("unitsTail")
        pre = []
        if self.tnd:
            bd = self.f("blockDim")
            pre = [K.Let("units", Lit(0), mutable=True),
                   K.For("bi", Lit(0), self.f("batches"), Lit(1),
                         (K.Assign("units", S("units") + self.units_of(S("bi"), self.f("qRows"))),),
                         doc="the units of every batch"),
                   K.Let("perCore", S("units") // bd), K.Let("coreTail", S("units") % bd)]
            per, tail = S("perCore"), S("coreTail")
        return [*pre, K.Let("unitBegin", S("core_") * per + _min(S("core_"), tail)),
                K.Let("unitEnd", S("unitBegin") + per + K.Select((C("<", S("core_"), tail),), Lit(1), Lit(0)))]

    # ------------------------------------------------------------------ vector
    def reg(self, v: str, i=S("i")) -> K.Ref:
        """The UB region of row / head register value v (row i of the pass)."""
        space, j = self.p.regs[v]
        if space == "head":
            return K.Ref("head_", Lit(0), Lit(j))
        return K.Ref("rows_", i * S("keys"), Lit(j))

    def scalar(self, text: str) -> K.FExpr:
        """The FExpr of a scalar operand of the program (scalar_expr with the class's attribute members)."""
        return scalar_expr(text, self.attrs)

    def stat_slot(self, v: str):
        """Element of per-row stat v of the current row in unitStat_ (one row of AlignUp(subRows, 8) per stat)."""
        return Lit(self.unit_stats.index(v)) * _align(self.f("subRows"), 8) + S("row") - S("rBegin")

    def head_len(self, v: str):
        """Element count of head value v: the last dim of the GM tensor its chain loads."""
        srcs = {i.dst: i for i in self.p.vector}
        i = srcs[v]
        while i.kind != "ld_head":
            i = srcs[i.srcs[0]]
        return self.member_dim(self.tokens[str(self.in_shape[i.arg][-1])])

    def vec_helpers(self):
        """The AIVs' helper methods (RowSum, RowMax, the masks, ExpOf, LoadHead; module docstring)."""
        tp = K.Param
        self.method("RowSum", (tp("src", "tensor", "float"), tp("n")), (
            K.vec(Op.REDUCE_SUM, dst=K.Ref("reduce_"), src=K.Ref("src"), tmp=K.Ref("reduce_", Lit(8)), count=S("n")),
            K.GetValue("r", K.Ref("reduce_")),
            K.Return(K.FRef("r"))), ret="float", doc="Sum of n fp32 lanes (read back by the scalar unit).")
        if any(i.kind == "rmax" for i in self.p.vector):
            self.method("RowMax", (tp("src", "tensor", "float"), tp("n")), (
                K.vec(Op.REDUCE_MAX, dst=K.Ref("reduce_"), src=K.Ref("src"), tmp=K.Ref("scratch_"), count=S("n")),
                K.GetValue("r", K.Ref("reduce_")),
                K.Return(K.FRef("r"))), ret="float",
                doc="Max of n fp32 lanes (read back by the scalar unit; the scratch row holds ReduceMax's (value, "
                    "index) pairs of its first round).")
        if self.dense:
            fill = tp("fill", "float")
            self.method("MaskAfter", (tp("dst", "tensor", "float"), tp("n"), tp("last"), fill), (
                K.Let("j0", _max(S("last") + 1, Lit(0))),
                K.If((C("<", S("j0"), S("n")),), (
                    K.Let("ja", _min(_align(S("j0"), 8), S("n"))),
                    K.For("j", S("j0"), S("ja"), Lit(1), (K.SetValue(K.Ref("dst", S("j")), K.FRef("fill")),),
                          doc="scalar lanes up to a 32-byte boundary"),
                    K.If((C("<", S("ja"), S("n")),), (
                        K.vec(Op.DUPLICATE, dst=K.Ref("dst", S("ja")), scalar=K.FRef("fill"), count=S("n") - S("ja")),
                    )))),
            ), doc="Lanes last + 1 .. n - 1 of a key row get `fill`.")
            if self.p.causal:
                self.method("MaskFuture", (tp("dst", "tensor", "float"), tp("keys"), K.Param(X, "struct", "Unit"),
                                           tp("row"), tp("c"), fill), (
                    K.Call("MaskAfter", (K.Ref("dst"), S("keys"), self.future_last(), K.FRef("fill"))),),
                    doc="Keys of item c after the query row of the unit's row `row` get `fill` (query row s sees "
                        "keys 0 .. s + offset).")
        elif self.p.causal:
            topk = self.gm(self.layout_role["topk"])
            fill = K.FRef("fill")
            blk = (
                K.Let("p0", K.GmAt(topk, (xf("t") * N2 + xf("n2")) * CNT + S("c") * self.f("blocksPerChunk")
                                   + S("b")) * BS),
                K.If((C(">", S("p0"), xf("s")),), (K.vec(Op.DUPLICATE, dst=K.Ref("dst", S("b") * BS), scalar=fill,
                                                         count=BS),),
                     (K.If((C(">", S("p0") + BS - 1, xf("s")),), (
                         K.Let("j0", xf("s") - S("p0") + 1),
                         K.Let("ja", _min(_align(S("j0"), 8), BS)),
                         K.For("j", S("j0"), S("ja"), Lit(1), (K.SetValue(K.Ref("dst", S("b") * BS + S("j")), fill),)),
                         K.If((C("<", S("ja"), BS),), (K.vec(Op.DUPLICATE, dst=K.Ref("dst", S("b") * BS + S("ja")),
                                                             scalar=fill, count=BS - S("ja")),)))),)),
            )
            self.method("MaskFuture", (tp("dst", "tensor", "float"), tp("keys"), K.Param(X, "struct", "Unit"),
                                       tp("c"), tp("fill", "float")),
                        (K.For("b", Lit(0), S("keys") // BS, Lit(1), blk, disjoint=True,
                               doc="block b's lanes only (disjoint)"),),
                        doc="Keys of chunk c whose in-batch position exceeds the token's position s get `fill` "
                            "(whole future blocks by Duplicate; the diagonal block by scalar lanes up to a 32-byte "
                            "boundary, then Duplicate).")
        mask_in = next((i.op for i in self.p.vector if i.kind == "mask_in"), "")
        if mask_in:
            self.mask_in = mask_in
            for name, pos, q in (("maskQue_", K.TPos.VECIN, True), ("maskHalfBuf_", K.TPos.VECCALC, False),
                                 ("maskBitsBuf_", K.TPos.VECCALC, False), ("maskBuf_", K.TPos.VECCALC, False)):
                self.buf(name, pos, q)
            n = S("n")
            body = (
                K.Let("n", _min(S("keys"), S2 - S("c") * self.span)),
                K.Let("nh", _align(n, 128)),
                K.Let("nf", _align(n, 64)),
                K.Alloc("m8", "maskQue_", "uint8_t"),
                K.Copy(K.Ref("m8"), K.GmView(self.gm(mask_in),
                                               (xf("s") + S("row") % xf("qr")) * S2 + S("c") * self.span),
                       Lit(1), n, Lit(0), Lit(0), "the mask row's keys (bool bytes)"),
                K.EnQue("maskQue_", "m8"),
                K.DeQue("m8", "maskQue_", "uint8_t"),
                K.Get("mh", "maskHalfBuf_", "half"),
                K.Get("kept", "maskBitsBuf_", "uint8_t"),
                K.Get("mt", "maskBuf_", "float"),
                K.vec(Op.DUPLICATE, dst=K.Ref("mh"), scalar=K.FConst(1.0), count=S("nh")),
                K.vec(Op.DUPLICATE, dst=K.Ref("mt"), scalar=K.FConst(0.0), count=S("nf")),
                K.vec(Op.CAST, dst=K.Ref("mh"), src=K.Ref("m8"), mode="CAST_NONE", count=n),
                K.vec(Op.ADDS, dst=K.Ref("mt"), src0=K.Ref("dst"), scalar=K.FConst(0.0), count=n),
                K.Free("maskQue_", "m8"),
                K.vec(Op.COMPARE_SCALAR, dst=K.Ref("kept"), src0=K.Ref("mh"), scalar=K.FConst(0.0), mode="EQ",
                      count=S("nh")),
                K.vec(Op.SELECT_SCALAR, dst=K.Ref("mt"), mask=K.Ref("kept"), src0=K.Ref("mt"), scalar=K.FRef("fill"),
                      count=S("nf")),
                K.vec(Op.ADDS, dst=K.Ref("dst"), src0=K.Ref("mt"), scalar=K.FConst(0.0), count=n),
            )
            self.method("MaskIn", (tp("dst", "tensor", "float"), tp("keys"), K.Param(X, "struct", "Unit"), tp("row"),
                                   tp("c"), tp("fill", "float")), body,
                        doc="Keys of item c the bool mask input sets at the query row of the unit's row `row` get "
                            "`fill`: the mask bytes widened to half, a bit mask of the kept keys by Compares over "
                            "whole 256-byte repeats (the lanes past the row set to 1, masked), Select(kept ? score : "
                            "fill) in an fp32 row of whole repeats, copied back.")
        if self.p.online:
            self.method("ExpOf", (tp("v", "float"),), (
                K.vec(Op.DUPLICATE, dst=K.Ref("exp_"), scalar=K.FRef("v"), count=Lit(8)),
                K.vec(Op.EXP, dst=K.Ref("exp_"), src0=K.Ref("exp_"), count=Lit(8)),
                K.GetValue("r", K.Ref("exp_")),
                K.Return(K.FRef("r"))), ret="float", doc="exp(v) on the vector unit (8 lanes of one value).")
        if self.p.nregs.get("head", 0):
            self.buf("headQue_", K.TPos.VECIN, True)
            self.method("LoadHead", (tp("dst", "tensor", "float"), tp("src", "gm", TP), tp("e")), (
                K.Alloc("ht", "headQue_", TP),
                _copy(dst=K.Ref("ht"), src=K.GmView("src"), count=S("e"), esize=K.SizeOf(TP)),
                K.EnQue("headQue_", "ht"),
                K.DeQue("ht", "headQue_", TP),
                K.vec(Op.CAST, dst=K.Ref("dst"), src=K.Ref("ht"), mode="CAST_NONE", count=S("e")),
                K.Free("headQue_", "ht")), doc="One head row (T, e elements) of a [T1, N1, e] tensor, widened to fp32.")

    def future_last(self):
        """The last key of item c (relative to the item's first key) that the unit's row `row` sees under a dense
        causal mask: its query row s + row % qr plus the mask's offset, less c * span (negative: none; at least the
        item's keys: all)."""
        off = S("row") % xf("qr") + xf("s") + (self.offset if self.offset is not None else Lit(0))
        return off - S("c") * self.span

    def head_row(self, e):
        """Element offset of the current row's head row (`e` elements) in a query-shaped tensor: selected keys
        [T1, N1, e] at (token t, head h); dense keys (head h, query row q of batch b) [B, N1, S1, e] (BNSD) or
        [B, S1, N1, e] (BSND)."""
        if not self.dense:
            return (xf("t") * N1 + S("h")) * e
        if self.token_major:
            return ((self.q_first + S("q")) * N1 + S("h")) * e
        return ((xf("b") * N1 + S("h")) * S1 + S("q")) * e

    def row_lets(self, stmts) -> tuple:
        """The Lets of the current row's head h (and dense: its query row q) that statements `stmts` read: the unit's
        row `row` is head h0 + row (selected) or head h0 + row / qr, query row s + row % qr (dense, head-major)."""
        if not self.dense:
            return _let_if_used("h", xf("h0") + S("row"), stmts)
        return (*_let_if_used("h", xf("h0") + S("row") // xf("qr"), stmts),
                *_let_if_used("q", xf("s") + S("row") % xf("qr"), stmts))

    def vec_unit(self) -> tuple:
        """The per-row statements of VecUnit (scope "unit": once per unit, kept in UB / unitStat)."""
        out = []
        for i in self.p.vector:
            if i.scope != "unit":
                continue
            if i.kind == "ld_head":
                e = self.head_len(i.dst)
                out.append(K.Call("LoadHead", (self.reg(i.dst), K.GmView(self.gm(i.arg), self.head_row(e)), e),
                                  doc=spec_doc(i.loc)))
            elif i.kind == "ld_stat":
                at = (((self.q_first + S("q")) * N1 + S("h")) * 8 if self.tnd else
                      ((xf("b") * N1 + S("h")) * S1 + S("q")) * 8 if self.dense else (xf("t") * N1 + S("h")) * 8)
                out.append(K.FLet(f"st_{i.dst}", K.FLoad(K.GmView(self.gm(i.arg), at)), doc=spec_doc(i.loc)))
            elif i.kind in ("vmul", "vsub", "vadd"):
                op = {"vmul": Op.MUL, "vsub": Op.SUB, "vadd": Op.ADD}[i.kind]
                out.append(K.vec(op, spec_doc(i.loc), dst=self.reg(i.dst), src0=self.reg(i.srcs[0]), src1=self.reg(i.srcs[1]),
                                 count=self.head_len(i.dst)))
            elif i.kind == "rsum":
                out.append(K.Call("RowSum", (self.reg(i.srcs[0]), self.head_len(i.srcs[0])), f"st_{i.dst}",
                                  doc=spec_doc(i.loc)))
            else:
                raise SpecError(f"{self.spec_name}: no unit-scope statement for {i.kind}")
            if i.space == "stat":
                out.append(K.SetValue(K.Ref("unitStat_", self.stat_slot(i.dst)), K.FRef(f"st_{i.dst}")))
        return tuple(out)

    def vec_item(self, scope: str = "item") -> tuple:
        """(pass prologue, per-row body, pass epilogue) of VecItem (`scope` "item"; an online softmax's VecPv: "pv",
        VecLast: "last")."""
        p = self.p
        pre, body, post = [], [], []
        used_unit = []
        here = {i.dst for i in p.vector if i.scope == scope} | {i.arg for i in p.vector
                                                                   if i.scope == scope and i.kind == "omax"}
        for i in p.vector:
            if i.scope != scope:
                continue
            for s_ in list(i.srcs) + re.findall(r"st_(v\w+)", i.arg):
                if s_ in self.unit_stats and s_ not in used_unit and s_ not in here:
                    used_unit.append(s_)
        defs = {i.dst: i for i in p.vector}
        defs.update({i.arg: i for i in p.vector if i.kind == "omax"})
        for s_ in used_unit:
            body.append(K.GetValue(f"st_{s_}", K.Ref("unitStat_", self.stat_slot(s_)), spec_doc(defs[s_].loc)))
        self.padded = False
        for i in p.vector:
            if i.scope == scope:
                self.item_instr(i, pre, body, post)
        return tuple(pre), tuple(body), tuple(post)

    def item_instr(self, i, pre: list, body: list, post: list) -> None:  # noqa: C901 - one case per kind
        """The statements of item-scope vector instruction i: the pass prologue, the per-row body, the epilogue."""
        p = self.p
        k = i.kind
        n = S("keys")
        at = spec_doc(i.loc)
        if k == "ld_tile":
            j = p.regs[i.dst][1]
            pre.append(_copy(at, esize=4, dst=K.Ref("rows_", Lit(0), Lit(j)),
                             src=self.slot_view(i.arg, S("p0") * S("keys")), count=S("k") * S("keys")))
        elif k in ("mask", "mask_in"):
            if p.regs[i.dst] != p.regs[i.srcs[0]]:
                body.append(K.vec(Op.ADDS, at, dst=self.reg(i.dst), src0=self.reg(i.srcs[0]), scalar=K.FConst(0.0),
                                  count=n))
            fill = self.scalar(i.arg)
            if k == "mask_in":
                body.append(K.Call("MaskIn", (self.reg(i.dst), n, S(X), S("row"), S("c"), fill), doc=at))
            elif self.dense:   # only a row the mask reaches (the diagonal item): its lanes are scalar writes
                body.append(K.If((C("<", self.future_last() + 1, n),),
                                 (K.Call("MaskFuture", (self.reg(i.dst), n, S(X), S("row"), S("c"), fill), doc=at),),
                                 doc="the row's keys of this item reach past its query row"))
            else:
                body.append(K.Call("MaskFuture", (self.reg(i.dst), n, S(X), S("c"), fill), doc=at))
        elif k in ("muls", "adds"):
            body.append(K.vec(Op.MULS if k == "muls" else Op.ADDS, at, dst=self.reg(i.dst), src0=self.reg(i.srcs[0]),
                              scalar=self.scalar(i.arg), count=n))
        elif k == "exp":
            body.append(K.vec(Op.EXP, at, dst=self.reg(i.dst), src0=self.reg(i.srcs[0]), count=n))
            if self.dense and not (p.full_rows or p.online):   # no softmax max here (P from the saved max / sum):
                # the pad keys after S2 (copies of key S2 - 1) get probability 0, so dS is 0 there too
                body.append(K.If((C("<", self.seq2 - S("c") * self.span, n),),
                                 (K.Call("MaskAfter", (self.reg(i.dst), n, self.seq2 - 1 - S("c") * self.span,
                                                       K.FConst(0.0)), doc=at),),
                                 doc="only the last item has pad keys after S2"))
        elif k in ("vmul", "vsub", "vadd"):
            op = {"vmul": Op.MUL, "vsub": Op.SUB, "vadd": Op.ADD}[k]
            body.append(K.vec(op, at, dst=self.reg(i.dst), src0=self.reg(i.srcs[0]), src1=self.reg(i.srcs[1]),
                              count=n))
        elif k == "rmax":
            if self.dense and not self.padded:   # the pad keys after S2 leave the softmax: -inf before its max
                self.padded = True
                body.append(K.If((C("<", self.seq2 - S("c") * self.span, n),),
                                 (K.Call("MaskAfter", (self.reg(i.srcs[0]), n, self.seq2 - 1 - S("c") * self.span,
                                                       K.FConst(float("-inf"))), doc=at),),
                                 doc="only the last item has pad keys after S2"))
            body.append(K.Call("RowMax", (self.reg(i.srcs[0]), n), f"st_{i.dst}", doc=at))
        elif k == "rsum":
            body.append(K.Call("RowSum", (self.reg(i.srcs[0]), n), f"st_{i.dst}", doc=at))
        elif k == "omax":   # the running max (-inf before the first chunk) and the rescale of the earlier sums
            old, m, a = f"old_{i.dst}", f"st_{i.dst}", f"st_{i.arg}"
            body += [K.FLet(old, K.FConst(float("-inf")), mutable=True),
                     K.If((C("!=", S("c"), Lit(0)),), (K.GetValue(f"{old}g", K.Ref("unitStat_", self.stat_slot(i.dst))),
                                                        K.FAssign(old, K.FRef(f"{old}g")))),
                     K.FLet(m, K.FMinMax("max", K.FRef(f"st_{i.srcs[0]}"), K.FRef(old)), doc=at),
                     # alpha = exp(old - m): 0 at the first item (old = -inf), where nothing reads it (l and O start
                     # there), so the vector unit's exp and its wait are spent from the second item on only
                     K.FLet(a, K.FConst(0.0), mutable=True),
                     K.If((C("!=", S("c"), Lit(0)),), (
                         K.Call("ExpOf", (K.FBin("-", K.FRef(old), K.FMinMax("max", K.FRef(m),
                                                                              K.FConst(-FP32_MAX))),), f"{a}e", doc=at),
                         K.FAssign(a, K.FRef(f"{a}e")))),
                     K.SetValue(K.Ref("unitStat_", self.stat_slot(i.dst)), K.FRef(m)),
                     K.SetValue(K.Ref("unitStat_", self.stat_slot(i.arg)), K.FRef(a))]
        elif k == "osum":   # l = l * alpha + the chunk's sum
            l_ = f"st_{i.dst}"
            body += [K.FLet(f"{l_}p", K.FConst(0.0), mutable=True),
                     K.If((C("!=", S("c"), Lit(0)),), (
                         K.GetValue(f"{l_}g", K.Ref("unitStat_", self.stat_slot(i.dst))),
                         K.FAssign(f"{l_}p", K.FBin("*", K.FRef(f"{l_}g"), K.FRef(f"st_{i.srcs[1]}"))))),
                     K.FLet(l_, K.FBin("+", K.FRef(f"{l_}p"), K.FRef(f"st_{i.srcs[0]}")), doc=at),
                     K.SetValue(K.Ref("unitStat_", self.stat_slot(i.dst)), K.FRef(l_))]
        elif k == "oacc":   # O = O * alpha + P V (O = P V at the first chunk)
            pre.append(_copy(at, esize=4, dst=K.Ref("pvIn_"), src=self.slot_view(i.arg, S("p0") * DV),
                             count=S("k") * DV))
            o, pv = K.Ref("oAcc_", (S("row") - S("rBegin")) * DV), K.Ref("pvIn_", S("i") * DV)
            body.append(K.If((C("==", S("c"), Lit(0)),),
                             (K.vec(Op.ADDS, at, dst=o, src0=pv, scalar=K.FConst(0.0), count=DV),),
                             (K.vec(Op.MULS, at, dst=o, src0=o, scalar=K.FRef(f"st_{i.srcs[0]}"), count=DV),
                              K.vec(Op.ADD, at, dst=o, src0=o, src1=pv, count=DV))))
        elif k == "st_out":   # O / l cast to T, stored as the inputs are
            o = K.Ref("oAcc_", (S("row") - S("rBegin")) * DV)
            pre.append(K.Alloc("outT", "outQue_", TP))
            body += [K.vec(Op.MULS, at, dst=o, src0=o, scalar=K.FBin("/", K.FConst(1.0), K.FRef(f"st_{i.srcs[1]}"),
                                                                      True), count=DV),
                     K.vec(Op.CAST, at, dst=K.Ref("outT", S("i") * DV), src=o, mode=i.op, count=DV)]
            post += [K.EnQue("outQue_", "outT"), K.DeQue("outT", "outQue_", TP),
                     *self.head_rows_out(self.gm(i.arg), "outT", DV, not self.token_major, K.SizeOf(TP)),
                     K.Free("outQue_", "outT")]
        elif k == "st_tile":
            q = self.tile_que[i.arg]
            pre.append(K.Alloc(f"{q}T", q, TP))
            body.append(K.vec(Op.CAST, at, dst=K.Ref(f"{q}T", S("i") * S("keys")), src=self.reg(i.srcs[0]), mode=i.op,
                              count=S("keys")))
            post += [K.EnQue(q, f"{q}T"), K.DeQue(f"{q}T", q, TP),
                     _copy(at, esize=K.SizeOf(TP), dst=self.slot_view(i.arg, S("p0") * S("keys")), src=K.Ref(f"{q}T"),
                           count=S("k") * S("keys")),
                     K.Free(q, f"{q}T")]
        elif k == "st_stat8":
            q = self.stat_que[i.arg]
            pre.append(K.Alloc(f"{q}T", q, "float"))
            body.append(K.vec(Op.DUPLICATE, at, dst=K.Ref(f"{q}T", S("i") * 8), scalar=K.FRef(f"st_{i.srcs[0]}"),
                              count=Lit(8)))
            if self.dense:
                copy = self.head_rows_out(self.gm(i.arg), f"{q}T", Lit(8), not self.tnd, 4)   # TND: [T1, N1, 8]
            else:
                copy = [_copy(at, esize=4, dst=K.GmView(self.gm(i.arg), (xf("t") * N1 + xf("h0") + S("p0")) * 8),
                              src=K.Ref(f"{q}T"), count=S("k") * 8)]
            post += [K.EnQue(q, f"{q}T"), K.DeQue(f"{q}T", q, "float"), *copy, K.Free(q, f"{q}T")]
        else:
            raise SpecError(f"{self.spec_name}: no item-scope statement for {k}")

    def head_rows_out(self, gm: str, src: str, e, per_head: bool, esize) -> list:
        """Rows p0 .. p0 + k - 1 of the unit (row r: head h0 + r / qr, query row s + r % qr), `e` elements each,
        from UB `src` to GM `gm` stored BNSD (per_head: one copy per run of rows of one head) or BSND (one per row)."""
        if per_head:
            at_row = ((xf("b") * N1 + xf("h0") + (S("p0") + S("i")) // xf("qr")) * S1 + xf("s")
                      + (S("p0") + S("i")) % xf("qr")) * e
            return [K.For("i", Lit(0), S("k"), None, (
                K.Let("n", _min(S("k") - S("i"), xf("qr") - (S("p0") + S("i")) % xf("qr"))),
                _copy(dst=K.GmView(gm, at_row), src=K.Ref(src, S("i") * e), count=S("n") * e, esize=esize),
                K.Assign("i", S("i") + S("n"))), doc="one copy per run of rows of one head")]
        at_row = ((self.q_first + xf("s") + (S("p0") + S("i")) % xf("qr")) * N1 + xf("h0")
                  + (S("p0") + S("i")) // xf("qr")) * e
        return [K.For("i", Lit(0), S("k"), Lit(1), (
            _copy(dst=K.GmView(gm, at_row), src=K.Ref(src, S("i") * e), count=e, esize=esize),),
            doc="BSND: a head's query rows are N1 rows apart")]

    def row_tensors(self, body) -> tuple:
        """The tensors of a pass's per-row body each row of which touches only its own row (For.apart): the key-row
        registers and the T / stat rows staged for their copies out (row i at i * keys or i * 8 elements: `keys` a
        multiple of 16 keys (whole 16-key blocks; the tiling refuses another block size), so every row is whole
        32-B blocks), and the online softmax's output accumulator (row r at r * Dv fp32; the tiling refuses a Dv
        that is not a multiple of 16)."""
        text = "\n".join(ln.split("//")[0] for x in body for ln in K.to_text_stmt(x).split("\n"))
        names = ["rows_", "oAcc_"] + [f"{q}T" for q in list(self.tile_que.values()) + list(self.stat_que.values())]
        return tuple(n for n in names if re.search(rf"\b{re.escape(n)}\b", text))

    def vec_pass(self, name: str, scope: str, doc: str):
        """Method `name`(x, c, slot, rBegin, rEnd): passes of vecRows rows over this AIV's rows, the instructions of
        `scope`."""
        pre, body, post = self.vec_item(scope)
        p = self.p
        keys = Lit(0)   # a VecPv / VecLast pass reads no key row
        if scope == "item":
            keys = xf("keys") if p.full_rows and self.dense else (L if p.full_rows else (
                self.item_keys(S("c")) if p.online else self.chunk_keys(S("c"))))
        loop = K.For("p0", S("rBegin"), S("rEnd"), VROWS, (
            *pre,
            K.For("i", Lit(0), S("k"), Lit(1), (*_let_if_used("row", S("p0") + S("i"), body), *body),
                  doc="the pass's rows", apart=self.row_tensors(body)),
            *post), tail="k", doc="UB passes of vecRows rows")
        tp = K.Param
        self.method(name, (K.Param(X, "struct", "Unit"), tp("c"), tp("slot"), tp("rBegin"), tp("rEnd")),
                    (*_let_if_used("keys", keys, (loop,)), loop), doc=doc)

    def vec_main(self, pipe: bool, scatter: bool) -> tuple:
        """The AIVs' statements (VecMain): UB buffers, then per unit and item: wait for the cube, the vector stage on
        this AIV's half of the unit's rows, hand back."""
        p, pl = self.p, self.plan
        sz = K.SizeOf(TP)
        cap = self.row_cap
        init = []

        def tbuf(name, var, dtype, nbytes):
            self.buf(name)
            self.tensor(var, dtype)
            init.extend((K.InitBuffer(name, nbytes), K.Get(var, name, dtype)))

        def slots(name, var, n, stride, what):
            """A TBuf of n registers of `stride` fp32 elements, a member tensor array `var` (register j: slot j, its
            own region to the dependency pass: every access to it stays inside its stride)."""
            self.buf(name)
            self.tensors.append(K.TensorVar(var, "float", n))
            init.append(K.InitBuffer(name, Lit(n) * stride * 4))
            init.extend(K.Get(var, name, "float", Lit(j) * stride, Lit(j)) for j in range(n))

        slots("rowBuf_", "rows_", max(p.nregs.get("row", 0), 1), VROWS * cap, "key-row registers")
        for q in self.tile_que.values():
            self.buf(q, K.TPos.VECOUT, True)
            init.append(K.InitBuffer(q, VROWS * cap * sz))
        for q in self.stat_que.values():
            self.buf(q, K.TPos.VECOUT, True)
            init.append(K.InitBuffer(q, VROWS * 8 * 4))
        if any(i.kind == "rmax" for i in p.vector):
            tbuf("scratchBuf_", "scratch_", "float", cap * 4)
        if p.nregs.get("head", 0):
            init.append(K.InitBuffer("headQue_", D * sz))
            slots("headBuf_", "head_", p.nregs["head"], D, "head-row registers")
        if self.unit_stats:
            tbuf("unitStatBuf_", "unitStat_", "float", Lit(len(self.unit_stats)) * _align(self.f("subRows"), 8) * 4)
        if p.online:
            tbuf("oAccBuf_", "oAcc_", "float", _align(self.f("subRows"), 8) * DV * 4)
            tbuf("pvBuf_", "pvIn_", "float", VROWS * DV * 4)
            self.buf("outQue_", K.TPos.VECOUT, True)
            init.append(K.InitBuffer("outQue_", VROWS * DV * sz))
            tbuf("expBuf_", "exp_", "float", Lit(8 * 4))
        tbuf("reduceBuf_", "reduce_", "float", (_align(_cdiv(_max(cap, D), 64), 8) + 16) * 4)
        if getattr(self, "mask_in", ""):
            init += [K.InitBuffer("maskQue_", _align(cap, 32)), K.InitBuffer("maskHalfBuf_", _align(cap, 128) * 2),
                     K.InitBuffer("maskBitsBuf_", _align(cap, 128) // 8), K.InitBuffer("maskBuf_", _align(cap, 64) * 4)]
        if p.post:
            self.buf("postInQue_", K.TPos.VECIN, True)
            self.buf("postOutQue_", K.TPos.VECOUT, True)
            init += [K.InitBuffer("postInQue_", self.f("postElems") * 4),
                     K.InitBuffer("postOutQue_", self.f("postElems") * sz)]
        self.f("scaleBits")
        init += [K.FAssign("scale_", K.FBits(S("scaleBits"))),
                 K.Assign("core_", K.BLOCK_IDX // K.TASK_RATIO), *self.unit_range()]
        if p.post:
            self.post_methods()
            if scatter:
                init += [K.Call("ZeroTargets", ()), K.SyncAll("every slice of the atomic targets is zero"),
                         K.CrossCoreSetFlag(2, Pipe.MTE3, FLAG_ZERO, "this AI Core's AIC may start adding")]
        init.append(K.StructLet(X, "Unit"))
        items = Lit(1) if p.full_rows else (xf("items") if self.dense else self.f("chunks"))
        slot = (S("u") - S("unitBegin")) % pl.slots if pipe else Lit(0)
        args = (S(X), S("c"), S("slot"), S("rBegin"), S("rEnd"))
        item = [K.CrossCoreWaitFlag(FLAG_C2V, "the item's cube results are in the workspace")]
        if any(i.scope == "unit" for i in p.vector):
            unit = self.vec_unit()
            self.method("VecUnit", (K.Param(X, "struct", "Unit"), K.Param("rBegin"), K.Param("rEnd")),
                        (K.For("row", S("rBegin"), S("rEnd"), Lit(1), (*self.row_lets(unit), *unit)),),
                        doc="Per-unit values of this AIV's rows (scope unit of the program): computed once, kept in "
                            "UB.")
            item.append(K.If((C("==", S("c"), Lit(0)),), (K.Call("VecUnit", (S(X), S("rBegin"), S("rEnd"))),)))
        self.vec_pass("VecItem", "item", "One item on this AIV's rows, vecRows rows per UB pass.")
        item += [K.Call("VecItem", args),
                 K.CrossCoreSetFlag(2, Pipe.MTE3, FLAG_V2C, "the item's vector results are in the workspace")]
        if p.online:
            self.vec_pass("VecPv", "pv", "The online softmax's O update after item c's P V tile is in the workspace: "
                          "O = O * alpha + P V.")
            item += [K.CrossCoreWaitFlag(FLAG_C2V, "the item's P V tile"), K.Call("VecPv", args)]
        last = ()
        if p.online:
            self.vec_pass("VecLast", "last", "After the unit's last item: the output O / l and the final max and sum.")
            last = (K.Call("VecLast", (S(X), Lit(0), S("slot"), S("rBegin"), S("rEnd"))),)
        loop = K.For("u", S("unitBegin"), S("unitEnd"), Lit(1), (
            K.Call("Decode", (S("u"), S(X))),
            K.Let("halfRows", (xf("rows") + 1) // 2),
            K.Let("rBegin", K.Select((C("==", K.SUB_BLOCK_IDX, Lit(0)),), Lit(0), S("halfRows"))),
            K.Let("rEnd", K.Select((C("==", K.SUB_BLOCK_IDX, Lit(0)),), S("halfRows"), xf("rows"))),
            K.Let("slot", slot),
            *_items_loop(items, item),
            *last), doc="this AI Core's units; this AIV's half of each unit's rows")
        tail = ()
        if p.post:
            tail = (K.CrossCoreWaitFlag(FLAG_DONE, "this AI Core's AIC has added everything"),
                    K.SyncAll("... and so has every other AI Core's"), K.Call("Finish", ()))
        return tuple(init) + (loop,) + tail

    def post_ranges(self):
        """[(workspace, output, base, n, scale, round, zeroed)] over the concatenation of the post workspaces."""
        out = []
        base = Lit(0)
        scatter = {c.target for c in self.p.cube if c.dest == "scatter"}
        sizes = dict(self.plan.post_sizes)
        for po in self.p.post:
            n = Lit(1)
            for fld in sizes[po.output]:
                n = n * self.f(fld)
            out.append((po.workspace, po.output, base, n, po.scale, po.round, po.output in scatter))
            base = base + n
        return out

    def post_methods(self):
        """Adds ZeroTargets and Finish: the backward's zeroing of its atomic targets and its final pass (out =
        T(ws * scale)), each AIV over its slice of the concatenated post workspaces."""
        per, pe = self.f("postPerCore"), self.f("postElems")
        zero = [K.Let("e0", K.BLOCK_IDX * per), K.Alloc("z", "postInQue_", "float"),
                K.vec(Op.DUPLICATE, dst=K.Ref("z"), scalar=K.FConst(0.0), count=pe)]
        fin = [K.Let("e0", K.BLOCK_IDX * per)]
        for j, (ws_name, out, base_e, n, scale, rnd, zeroed) in enumerate(self.post_ranges()):
            ws, off = self.region(ws_name)
            # this output's elements in the concatenation: [b<j>, b<j> + n); this AIV's part of them ends at end<j>
            lets = (K.Let(f"b{j}", base_e), K.Let(f"end{j}", _min(S("e0") + per, S(f"b{j}") + n)))
            base, hi = S(f"b{j}"), S(f"end{j}")
            fin.extend(lets)
            if zeroed:
                zero.extend(lets)
                zero.append(K.For("a", _max(S("e0"), base), hi, pe, (
                    _copy(dst=K.GmView(ws, off + S("a") - base), src=K.Ref("z"), count=S("cnt"), esize=4),),
                    tail="cnt", doc=f"this AIV's slice of {ws_name}"))
            body = [K.Alloc("pin", "postInQue_", "float"),
                    _copy(dst=K.Ref("pin"), src=K.GmView(ws, off + S("a") - base), count=S("cnt"), esize=4),
                    K.EnQue("postInQue_", "pin"), K.DeQue("pin", "postInQue_", "float"),
                    K.Alloc("pout", "postOutQue_", TP)]
            if scale:
                body.append(K.vec(Op.MULS, dst=K.Ref("pin"), src0=K.Ref("pin"), scalar=self.scalar(scale),
                                  count=S("cnt")))
            body += [K.vec(Op.CAST, dst=K.Ref("pout"), src=K.Ref("pin"), mode=rnd, count=S("cnt")),
                     K.Free("postInQue_", "pin"), K.EnQue("postOutQue_", "pout"),
                     K.DeQue("pout", "postOutQue_", TP),
                     _copy(dst=K.GmView(self.gm(out), S("a") - base), src=K.Ref("pout"), count=S("cnt"), esize=K.SizeOf(TP)),
                     K.Free("postOutQue_", "pout")]
            fin.append(K.For("a", _max(S("e0"), base), hi, pe, tuple(body), tail="cnt",
                             doc=f"{out} = T({ws_name}{' * scale' if scale else ''}) over this AIV's slice"))
        zero.append(K.Free("postInQue_", "z"))
        self.method("ZeroTargets", (), zero, doc="Zero this AIV's slice of the atomic targets.")
        self.method("Finish", (), fin, doc="The final pass over this AIV's slice: out = T(ws * scale).")

    # ------------------------------------------------------------------ the class
    def build(self, layout_role: dict, in_shape: dict) -> K.KernelClass:
        """The verified KernelClass. `layout_role` {"topk" / "cuq" / "cukv": input name} of a selected key set;
        `in_shape` {input name: its first shape}. Raises IRError when it does not verify, SpecError for a program
        the kernel cannot run."""
        from opgen.kernel.attnprog import pipelined

        self.layout_role, self.in_shape = layout_role, in_shape
        p = self.p
        pipe = pipelined(p)
        scatter = any(c.dest == "scatter" for c in p.cube)
        if scatter and (pipe or any(c.dest == "scatter" for c in p.phase(1))):
            raise SpecError(f"{self.spec_name}: scatter-adds need the serial schedule and phase 2")
        self.decode()
        self.cube_helpers()
        self.vec_helpers()
        cube = self.cube_main(pipe, scatter)
        vector = self.vec_main(pipe, scatter)
        self.method("CubeMain", (), cube, doc="The AIC: the matmuls of this AI Core's units.")
        self.method("VecMain", (), vector, doc="An AIV: the vector stage on half of each unit's rows.")
        process = (K.CoreIf("cube", (K.Call("CubeMain", ()),)), K.CoreIf("vector", (K.Call("VecMain", ()),)))
        self.methods = _reached(self.methods, process)
        gms = [K.GmTensor(self.gm(n), ct, arg) for n, arg, ct in self.io if ct is not None]
        gms += [K.GmTensor(w, ct, workspace=True, region=r) for w, (ct, r) in sorted(self.ws_types.items())]
        fields = ("qHeads", "kvHeads", "groupSize", "headDim", "valueDim", "selKeys", "gChunks", "gTile", "vecRows",
                  "chunkKeys", "unitsPerCore", "unitsTail", "wsSlotBytes", "scaleBits", "blockCount", "blockSize")
        fields += ("qSeq", "kvSeq") if self.dense else ()
        fields += ("itemKeys", "itemChunks") if self.p.online else ()
        for fld in fields:
            self.f(fld)
        structs = (K.StructDecl("Unit", tuple((f, "int", "int64_t", None) for f in self.unit_fields())),)
        scalars = (K.ScalarVar("core_"), K.ScalarVar("scale_", "float", 1.0)) + \
            ((K.ScalarVar("batch_"), K.ScalarVar("unitBase_")) if self.tnd else () if self.dense else
             (K.ScalarVar("batch_"),))
        cls = K.KernelClass(self.name, self.tiling_struct, args=tuple(arg for _n, arg, _ct in self.io), gms=tuple(gms),
                            locals=tuple(self.locals), tensors=tuple(self.tensors), scalars=scalars,
                            fields=tuple(sorted(self.fields)), process=process, methods=tuple(self.methods),
                            tparams=(TP,), doc=self.doc, structs=structs)
        self.ubplan = plan_ub(cls, "VecMain")   # UB buffers whose lifetimes never overlap share bytes
        return K.verify(apply_plan(cls, self.ubplan))


# ---------------------------------------------------------------------------------------------- the kernel's classes
@dataclass
class AttnClass:
    """One kernel class of an attention kernel: its name, the Kernel IR (`kclass`, synchronised by the family's
    synchronise), whether it has the deterministic schedule (`det`) and the specialisation keys it serves."""

    name: str
    kclass: K.KernelClass
    det: bool
    keys: list
    ubplan: object = None   # the UB plan by liveness of its AIVs (opgen.kernel.ubplan.UbPlan), applied to kclass


def _items_loop(items, body) -> tuple:
    """The loop over a unit's items c (statements `body`); a unit of one item (whole key rows) runs `body` once with
    c = 0, no loop."""
    if as_dim(items) == Lit(1):
        return (K.Let("c", Lit(0)), *body)
    return (K.For("c", Lit(0), items, Lit(1), tuple(body), doc="the unit's items"),)


def gm_ctype(spec, name: str, data: str) -> str:
    """The GlobalTensor element type of input / output `name` of `spec`: the class's template parameter T for the
    data's dtype variable `data`, a concrete type otherwise (a bool mask read as its bytes, uint8_t). Raises
    SpecError for another dtype variable."""
    for q in list(spec.inputs) + list(spec.outputs):
        if q.name == name:
            d = dtype_name(q.dtype)
            if d == data:
                return TP
            if d not in CTYPE:
                raise SpecError(f"{spec.name}: the attention kernel reads {name} of dtype variable {d}; it takes one "
                                f"dtype variable, the data's ({data})")
            return CTYPE[d]
    raise SpecError(f"{spec.name}: no parameter {name}")


def class_doc(p) -> str:
    """One line saying what a class of program p does (its C++ comment)."""
    from opgen.kernel.attnprog import pipelined

    parts = ["causal" if p.causal else "no masking"] + (["online softmax over the key chunks"] if p.online else [])
    parts.append("item = unit (whole key rows), AIC pipelines two units" if p.full_rows and pipelined(p)
                 else ("item = unit" if p.full_rows else "item = unit x key chunk"))
    if p.post:
        parts.append("outputs " + ", ".join(po.output for po in p.post) + " through fp32 workspaces and a final pass")
    return "; ".join(parts)


def offset_expr(p, tokens: dict):
    """A dense program's causal offset (`key > query + offset`) as an integer expression over the tiling fields qSeq
    / kvSeq; None without one."""
    if p.causal_offset is None:
        return None
    field = {"t": "qSeq", "T": "kvSeq"}
    off = as_dim(p.causal_offset)
    return subst(off, {n: Sym(field[tokens[n]]) for n in off.symbols()})


def attention_classes(spec, lowered, plan: AttnPlan) -> list:
    """[AttnClass]: one class per distinct program of `lowered` (the attention family's Lowered: layout and {key:
    AttentionProgram}), named <Op>Kernel<i> in program order, each serving the keys whose program prints the same.
    Raises SpecError for a program the kernel cannot run, IRError for a class that does not verify."""
    from opgen.kernel.attnprog import print_program

    lay = lowered.layout
    topk, (cuq, cukv) = (lay.topk, lay.cumulative) if lay.cumulative else ("", ("", ""))
    names = [i.name for i in spec.inputs] + [o.name for o in spec.outputs]
    roles = {"topk": topk, "cuq": cuq, "cukv": cukv}
    shapes = {i.name: i.shapes[0] for i in spec.inputs}
    out, by_text = [], {}
    for key, p in lowered.programs.items():
        text = canonical_values(print_program(p))   # equal up to the traced values' names: one class
        if text in by_text:
            by_text[text].keys.append(key)
            continue
        name = f"{spec.name}Kernel{len(out)}"
        used = set(p.gm) | ({topk, cuq, cukv} - {""} if lay.cumulative else set())
        io = tuple((n, cpp_name(n), gm_ctype(spec, n, lay.dtype) if n in used else None) for n in names)
        b = AttnBuilder(name, p, io, plan, lay.tokens, lay.dtype, offset_expr(p, lay.tokens), spec.name)
        b.tiling_struct = f"optiling::{spec.name}TilingData"
        b.doc = class_doc(p)
        c = AttnClass(name, b.build(roles, shapes), plan.det and any(op.dest == "scatter" for op in p.cube), [key],
                      b.ubplan)
        by_text[text] = c
        out.append(c)
    return out
