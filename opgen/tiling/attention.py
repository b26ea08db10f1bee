"""Tiling of the attention family's kernels (NsaSelectedAttention and NsaSelectedAttentionGrad: selected key blocks;
FlashAttentionScore and FlashAttentionScoreGrad: a dense key set): one mixed AIC/AIV launch each (1 AIC : 2 AIV).

Dense key set (forward and backward; `_dense_units`): the inputs are read by role (B, S1, S2 as well), T1 = B * S1,
the keys of a unit are CNT = ceil(S2 / 16) blocks of 16 (BS = 16, the last padded). A unit is (batch, kv head, block
of `qRows` query rows, group of `headRows` heads of the kv head): M = headRows * qRows rows within gCap (the fp32 O
accumulator in half of L0C), qRows no larger than what still gives every AI Core a unit. Under causal masking a
unit's keys end at the first 16-multiple past its last row's last visible key (the kernel's Decode).

Units: keys, rows and elements unless a name ends in Bytes. Facts: docs/reference/nsa_selected_attention.md §2.1
(work unit (token, kv head), the G query heads of a kv head are the M dimension), §2.2 (gather of L = cnt * bs
keys in topk order), §4 (CANN's kernels, not copied); docs/reference/ascendc.md §1.2 (L1 512 KB, L0A/L0B 64 KB,
L0C 128 KB, UB 192 KB), §1.3 (blockDim counts AI Cores; AIV index = 2 * AI Core + sub-block), §1.10 (cube
path, 16 x 16 fractals, C0 = 16 for half/bf16), §3 (core counts).

Work split. A *unit* is (token t, kv head n2, group of `gRows` query heads of that kv head): the G = N1 / N2
heads of a kv head are the M dimension of every matmul, in groups of at most `gRows` rows (the cap keeps the
fp32 accumulators of G x D / G x Dv in half of L0C). Units are numbered u = (t * N2 + n2) * gChunks + gc and
split over the AI Cores in contiguous ranges (the first `unitsTail` cores take one more); blockDim = AI Cores
used (= AIV cores / 2 on Atlas A2/A3). The two AIVs of an AI Core split the rows of each unit (sub-block 0 the
first ceil(rows / 2)), `vecRows` rows per UB pass.

Key chunks. The L selected keys are processed in chunks of `chunkKeys` = whole blocks (`blocksPerChunk` of bs
keys), gathered straight from key/value in GM into L1 (one ND -> NZ copy per block, no gather through UB or
GM). The cube tiles of every matmul (TCubeTiling-like: M tile `gTile`, N/K tiles `baseN*`/`baseK*`) are chosen so
the operands fit L0A/L0B and the result tile fits its L0C region; the L1 plan holds the operands of one chunk.

Forward (no workspaced outputs; key attrKey*100 + dtypeKey*10 + 1): item = unit. AIC: S = Qg Kselᵀ chunk by
chunk into a fp32 GM workspace tile [rows, L] (slot u % 2); flag; AIV: mask / scale / softmax over the full row,
P -> T into the workspace, max and sum to the outputs; flag; AIC: O = P Vsel accumulated over the chunks in
L0C, written as T by Fixpipe. The AIC computes S of unit u + 1 before O of unit u (two workspace slots).
Dense forward (an online softmax, opgen.kernel.attnprog.online_softmax): item = (unit, block of `itemChunks` key chunks,
at most ONLINE_ITEM_KEYS keys), one workspace slot of S (fp32), P (T) and P V (fp32 [rows, Dv]) of an item, the UB
rows hold an item; the AIV keeps the fp32 output
accumulator of its rows of the unit (subRows x Dv) and the running max / rescale / sum; nothing depends on S2.

Backward (outputs finished from fp32 workspaces; same key form): item = (unit, key chunk) — no reduction over L, so the
vector stage works chunk by chunk and K/V chunks are gathered once. AIC: S, dP chunks into the workspace;
flag; AIV: P = exp(scale S - m) / l (masked), Dr = rowsum(dO * O) (once per unit), dS = P (dP - Dr), P and dS
-> T into the workspace; flag; AIC: dQ += dS Ksel (L0C, written fp32 to the dq workspace after the last
chunk), dKsel = dSᵀ Qg and dVsel = Pᵀ dOg per block with fp32 atomic adds into the dk/dv workspaces (zeroed
by the AIVs before the AICs start adding). Dense backward: the dense units; the chunk keys also within the L0C tile
region (the fp32 S / dP chunk of gTile rows); dK / dV added at the chunk's contiguous key rows; the dq / dk / dv
workspaces stored as the outputs are (BNSD or BSND: T1 = B * S1, T2 = B * S2 rows of heads). After the last item:
every AIV scales (dq, dk) and casts its slice of the three fp32 workspaces into dq, dk, dv.
Deterministic backward (key digit 2, when the framework asks for deterministic computation,
TilingContext::GetDeterministic()): the fp32 adds into dk/dv happen in a fixed order whatever the timing of the
cores. Every AIC runs the same number of rounds (round r = its r-th item, or none); in each round the AI Cores take
turns in core order for their dKsel / dVsel matmuls and atomic adds, separated by an all-AIC barrier
(CrossCoreSetFlag<0> + CrossCoreWaitFlag). No extra workspace; the turns serialise that part of the backward.
dq is deterministic in both (each unit owns its rows, accumulated in L0C).

The programs are built from the counts of the lowered programs (attention_counts) and read their
inputs by role (`program_inputs`: the attention layout's dims). GM traffic: opgen/check counts it (emulation byte
counters); the reference's estimate of CANN's kernels is declared by the spec (OpSpec.gm_reference).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from opgen.errors import SpecError
from opgen.ir.dims import Lit, Sym
from opgen.kernel.attention import AttentionFamily
from opgen.kernel.attnclass import AttnPlan, attention_classes
from opgen.kernel.attnprog import DENSE_BLOCK, pipelined
from opgen.kernel.family import Tiling
from opgen.platforms import cube_sizes
from opgen.tiling.buffers import Buffer, fixed_bytes, pools, row_bytes
from opgen.tiling.program import TilingProgram, align_up, ceil_div, emax, emin, lit, select
from opgen.tiling.rowkernel import SELECT_SCRATCH_BYTES, reduce_tmp_elems


CUBE = cube_sizes()
"""On-chip bytes of the AIC (docs/reference/ascendc.md §1.2): l1, l0a, l0b, l0c (and bt), the smallest of every SoC
of opgen/platforms' table (opgen.platforms.cube_sizes), so the attention kernels fit whichever SoC a spec lists."""
L0C_ACC = CUBE["l0c"] // 2
"""L0C bytes of the accumulator region (O in the forward, dQ in the backward); the other half holds tiles."""
L0C_TILE = CUBE["l0c"] - L0C_ACC
"""L0C bytes of the per-tile region (S / dP tiles, dKsel / dVsel tiles)."""
CHUNK_KEYS_MAX = 256
"""Most keys of one chunk (the fp32 S tile of 64 rows x 256 keys is L0C_TILE)."""
G_CAP_MAX = 64
"""Most query heads of one unit (M of every matmul, 4 fractal rows)."""
DENSE_ROWS_MAX = 128
"""Most M rows (heads x query rows) of a dense unit: 8 fractal rows; its S chunk then holds L0C_TILE / (128 * 4) =
128 keys (`fwd_program`)."""
ONLINE_ITEM_KEYS = 512
"""Most keys of an online softmax item (a block of whole cube chunks): each item writes and reads one fp32 [rows, Dv]
P V tile, 2 * Dv * 4 / keys workspace bytes per score (2 B at Dv = 128), beside the 12 of S (fp32) and P (T, 2 B)."""
POST_ELEMS = 2048
"""Elements per UB pass of the backward's final scale-and-cast pass (fp32 in, T out)."""
WS_ALIGN = 512
"""Alignment of every GM workspace region (bytes)."""
STRATEGY = 1
"""The tiling key's last digit: the mixed kernel described in the module doc."""
DETERMINISTIC = 2
"""The backward's last key digit when the framework asks for deterministic computation (module doc)."""


def _align_down16(x):
    return (x // 16) * 16


def _common(p: TilingProgram, dense: bool = False, tnd: bool = False):
    """Inputs and the unit split shared by both directions; returns a dict of variables. `dense`: a dense key set
    (BNSD; T1 = B * S1 tokens, CNT = ceil(S2 / 16) blocks of 16 keys, the last padded), which reads S1 and S2
    too. `tnd`: a dense key set over batches stored concatenated (TND): S1 / S2 are the longest batch's query / key
    counts, which the TilingFunc reads off the host arrays of cumulative ends (program_inputs: T1 / T2 without
    them, and in the UB / L1 proof, which bounds them so); the kernel reads every batch's own lengths from the
    cumulative ends (`_dense_units`)."""
    v = {}
    v["T1"] = p.input("T1", "query tokens (query dim 0)")
    v["N1"] = p.input("N1", "query heads (query dim 1)")
    v["D"] = p.input("D", "query/key head dim (elements)")
    v["T2"] = p.input("T2", "key/value tokens (key dim 0)")
    v["N2"] = p.input("N2", "kv heads (key dim 1)")
    v["Dv"] = p.input("Dv", "value head dim (elements)")
    if dense:   # the whole key set in blocks of DENSE_BLOCK keys (no topk input, no block-size attribute)
        v["CNT"] = p.input("CNT", "key blocks per (batch, kv head): the longest key sequence in blocks of "
                           f"{DENSE_BLOCK}")
    else:
        v["CNT"] = p.input("CNT", "selected blocks per (token, kv head) (topk dim 2)")
    v["Bn"] = p.input("Bn", "batches (length of the cumulative sequence arrays)")
    v["BS"] = p.input("BS", f"keys per block ({DENSE_BLOCK})" if dense else "selected block size (keys; the attribute)")
    v["tB"] = p.input("tBytes", "bytes per element of T")
    v["dk"] = p.input("dtypeKey", "1-based row of the dtype table")
    v["ak"] = p.input("attrKey", "mixed-radix index of the static attribute values (first attribute fastest)")
    v["cores"] = p.input("coreNum", "AIV cores of the platform")
    v["ub"] = p.input("ubBytes", "UB bytes per AIV core")
    v["scale"] = p.input("scaleAttr", "IEEE-754 bits of the float attribute scale")
    if dense:   # BNSD: tokens are (batch, query row) pairs, T1 = B * S1; the kernel reads the sequence lengths
        v["S1"] = p.let("qSeq", p.input("S1", "query sequence (query dim 2)") + 0, "S1 query rows per (batch, head)",
                        True)
        p.let("kvSeq", p.input("S2", "kv sequence (key dim 2)") + 0, "S2 keys per (batch, kv head)", True)
    v["dense"] = dense
    T1, N1, N2, D, Dv, CNT, BS = (v[k] for k in ("T1", "N1", "N2", "D", "Dv", "CNT", "BS"))
    p.let("tokens", T1 + 0, "T1", True)
    p.let("qHeads", N1 + 0, "N1", True)
    p.let("kvHeads", N2 + 0, "N2", True)
    p.let("kvTokens", v["T2"] + 0, "T2", True)
    p.let("headDim", D + 0, "D", True)
    p.let("valueDim", Dv + 0, "Dv", True)
    p.let("blockCount", CNT + 0, "key blocks per unit" if dense else "selected blocks per unit", True)
    p.let("blockSize", BS + 0, "keys per block" if dense else "keys per selected block", True)
    p.let("batches", v["Bn"] + 0, "batches (cumulative sequence arrays' length)", True)
    v["G"] = p.let("groupSize", N1 // N2, "G = N1 / N2 query heads per kv head", True)
    v["L"] = p.let("selKeys", CNT * BS, "L = CNT * BS " + ("keys" if dense else "selected keys") + " per unit", True)
    v["aic"] = p.let("aicNum", emax(1, v["cores"] // 2), "AI Cores (1 AIC : 2 AIV on Atlas A2/A3)")
    if dense:
        v["gCap"] = p.let("gCap", emax(16, emin(DENSE_ROWS_MAX, _align_down16(lit(L0C_ACC) // (D * 4)))),
                          "most M rows per unit: fp32 gTile x D accumulator in half of L0C")
    else:
        v["gCap"] = p.let("gCap", emax(16, emin(G_CAP_MAX, _align_down16(lit(L0C_ACC) // (D * 4)))),
                          "most heads per unit: fp32 gTile x D accumulator in half of L0C")
    if dense:
        _dense_units(p, v, tnd)
    else:
        v["gRows"] = p.let("gRows", emax(1, emin(v["G"], v["gCap"])), "query heads (M rows) per unit", True)
        v["gTile"] = p.let("gTile", align_up(v["gRows"], 16), "M tile rows (16-row fractals)", True)
        v["gChunks"] = p.let("gChunks", ceil_div(v["G"], v["gRows"]), "head groups per (token, kv head)", True)
        v["units"] = p.let("units", T1 * N2 * v["gChunks"], "work units (token, kv head, head group)", True)
    v["blockDim"] = p.let("blockDim", emax(1, emin(v["aic"], v["units"])), "AI Cores launched", True)
    p.let("unitsPerCore", v["units"] // v["blockDim"], "units of every AI Core", True)
    p.let("unitsTail", v["units"] % v["blockDim"], "the first unitsTail AI Cores take one more unit", True)
    p.let("subRows", ceil_div(v["gRows"], 2), "rows of a unit the AIV sub-block 0 takes (sub-block 1: the rest)", True)
    p.let("scaleBits", v["scale"] + 0, "IEEE-754 bits of the score scale (float)", True)
    return v


def _dense_units(p: TilingProgram, v: dict, tnd: bool = False):
    """The units of a dense key set: (batch, kv head, block of `qRows` query rows, group of `headRows` heads); M =
    headRows * qRows rows (head-major: row r is head h0 + r / qr, query row s0 + r % qr) within gCap; qRows as large
    as the cap allows while the units still cover the AI Cores (the K / V rows a unit reads serve all its rows).
    `tnd`: S1 is the longest batch's query count (qRows at most that: a unit's block never spans more rows than a
    batch has), qRows spreads the T1 query tokens, and `units` bounds the units (every batch's last block may be partial: at most Bn - 1 blocks more than T1 / qRows
    has), which the kernel counts exactly and splits over the blockDim AI Cores (opgen.kernel.attnclass
    unit_range)."""
    G, S1 = v["G"], v["S1"]
    hr = p.let("headRows", emax(1, emin(G, v["gCap"])), "query heads per unit", True)
    v["gChunks"] = p.let("gChunks", ceil_div(G, hr), "head groups per (batch, kv head)", True)
    units_rows = v["N2"] * v["gChunks"] * v["T1"] if tnd else v["Bn"] * v["N2"] * v["gChunks"] * S1
    spread = p.let("qRowsSpread", emax(1, units_rows // v["aic"]),
                   "query rows per unit that still give every AI Core a unit")
    qr = p.let("qRows", emax(1, emin(emin(v["gCap"] // hr, S1), spread)), "query rows per unit (an S1 block)", True)
    v["gRows"] = p.let("gRows", hr * qr, "M rows per unit (headRows x qRows)", True)
    v["gTile"] = p.let("gTile", align_up(v["gRows"], 16), "M tile rows (16-row fractals)", True)
    qb = p.let("qBlocks", ceil_div(S1, qr), "S1 blocks per (batch, head)", True)
    if tnd:
        v["units"] = p.let("units", v["N2"] * (ceil_div(v["T1"], qr) + v["Bn"] - 1) * v["gChunks"],
                           "at most this many work units (batch, kv head, query block, head group)", True)
        return
    v["units"] = p.let("units", v["Bn"] * v["N2"] * qb * v["gChunks"],
                       "work units (batch, kv head, S1 block, head group)", True)


def _chunking(p: TilingProgram, v: dict, keys_fit):
    """Key chunk of whole blocks: at most CHUNK_KEYS_MAX keys and `keys_fit` (from the L1 plan)."""
    bpc = p.let("blocksPerChunk", emax(1, emin(v["CNT"], emin(CHUNK_KEYS_MAX, keys_fit) // v["BS"])),
                "key blocks per key chunk" if v["dense"] else "selected blocks per key chunk", True)
    v["Lc"] = p.let("chunkKeys", bpc * v["BS"], "keys per chunk", True)
    v["chunks"] = p.let("chunks", ceil_div(v["CNT"], bpc), "key chunks per unit", True)
    return v


def _k_tile(p, name, total, other, doc):
    """Largest 16-multiple k (or n) tile <= total whose `other` x tile T operand fits a whole L0B (or L0A)."""
    return p.let(name, emax(16, emin(total, _align_down16(lit(CUBE["l0b"]) // (other * 2)))), doc, True)


def _n_tile(p, name, total, rows, doc):
    """Largest 16-multiple n tile <= total whose fp32 rows x tile result fits the L0C tile region."""
    return p.let(name, emax(16, emin(total, _align_down16(lit(L0C_TILE) // (rows * 4)))), doc, True)


def _finish(p: TilingProgram, v: dict, ub_plan, l1_plan, l0a, l0b, l0c, ws_bytes, strategy=STRATEGY,
            ub_reserve: int = 0):
    """vecRows from the UB plan; fits (UB, L1, L0A/B/C, block size, D and Dv multiples of 16); key and workspace.
    ub_reserve: UB bytes kept free at the top (Select's scratch, SELECT_SCRATCH_BYTES). A plan with a pool 1 (buffers
    sharing pool 0's bytes, opgen.buffers.pools) takes the larger pool: the rows fit pool 0, pool 1 (fixed buffers)
    fits UB by itself."""
    main, shared = pools(ub_plan)
    if any(b.per_row for b in shared):
        raise ValueError("a shared UB pool of per-row buffers: the attention tiling charges pool 1 as fixed bytes")
    rb = p.let("vecRowBytes", row_bytes(main), "UB bytes per resident row (AIV)")
    fb = p.let("vecFixedBytes", fixed_bytes(main), "UB bytes held once (AIV)")
    ub = v["ub"]
    if ub_reserve:
        ub = p.let("ubUsable", ub - ub_reserve, "UB bytes the plan may take (Select's scratch kept free)")
    fit = p.let("vecRowsFit", select(ub > fb, (ub - fb) // rb, 0), "rows per UB pass that fit")
    if shared:
        sb = p.let("vecSharedBytes", fixed_bytes(shared), "UB bytes of the buffers that share pool 0's bytes (AIV)")
        fit = p.let("vecRowsFitShared", select(sb <= ub, fit, 0), "rows per UB pass that fit, the shared pool too")
    p.let("vecRows", emax(1, emin(fit, ceil_div(v["gRows"], 2))), "rows per UB pass of an AIV", True)
    l1 = p.let("l1Bytes", fixed_bytes(l1_plan), "L1 bytes of the AIC plan")
    p.let("fits", (fit >= 1) & (l1 <= CUBE["l1"]) & (l0a <= CUBE["l0a"]) & (l0b <= CUBE["l0b"])
          & (l0c <= CUBE["l0c"]) & (v["BS"] % 16).eq(0) & (v["D"] % 16).eq(0) & (v["Dv"] % 16).eq(0),
          "1 when every plan fits and D, Dv, BS are multiples of 16", True)
    p.let("tilingKey", v["ak"] * 100 + v["dk"] * 10 + strategy, "attrKey * 100 + dtypeKey * 10 + strategy", True)
    p.let("workspaceBytes", ws_bytes, "user workspace (bytes)", True)


def _ws(x):
    return align_up(x, WS_ALIGN)


@dataclass(frozen=True)
class AttentionCounts:
    """What an attention kernel holds (the maxima over its specialisations; opgen.kernel.attnclass allocates the buffers
    of each lowered program within them, so the buffers proven here bound the ones the kernel allocates).

    AIV (per row of a UB pass): row_regs fp32 key rows, tile_stores T key rows (to workspace tiles), stat8 rows of 8
    floats (softmax max / sum outputs); held once: scratch fp32 key rows (the max tree), head_regs fp32 head rows
    (E <= D) with one T staging row, unit_stats per-row scalars kept across a unit's items, post (the backward's
    zero-init and final pass buffers). Workspace: f32_tiles and t_tiles [rows, keys] tiles per slot, `slots` slots
    per AI Core (2 when the AIC pipelines two units). AIC L1: l1_heads / l1_gathers (the stored row length of each,
    "D" or "Dv") and l1_tiles."""

    row_regs: int
    tile_stores: int
    stat8: int
    scratch: int
    head_regs: int
    unit_stats: int
    post: bool
    f32_tiles: int
    t_tiles: int
    slots: int
    l1_heads: tuple
    l1_gathers: tuple
    l1_tiles: int
    dense: bool = False   # a dense key set (opgen.kernel.attnprog.AttentionProgram.keyset)
    online: int = 0       # 1: the dense forward's online softmax (opgen.kernel.attnprog.online_softmax): an fp32 O
    #                       accumulator of the AIV's rows, a P V tile staging row, a T output staging row
    pv_tiles: int = 0     # fp32 [rows, Dv] P V workspace tiles per slot (online)
    mask_in: int = 0      # 1: an explicit bool mask row is read per key row (u8 staging, half, bits, an fp32 row;
    #                       Select keeps its scratch at 184 KB of UB: SELECT_SCRATCH_BYTES left free)
    tnd: int = 0          # 1: a dense key set over batches stored concatenated (AttentionProgram.form "TND")


def attention_counts(programs, pipelined) -> AttentionCounts:
    """AttentionCounts of lowered programs (opgen.kernel.attnprog.AttentionProgram): the maxima over them of
    registers, queues, workspace tiles and L1 buffers; slots = 2 when `pipelined(program)` (the AIC pipelines two
    units); post when an output is finished from a workspace."""
    top: dict = {}
    heads, gathers = [], []
    for p in programs:
        pv = len(p.tile_cols)   # the [rows, Dv] fp32 P V tiles of an online softmax
        f32 = sum(1 for t in p.tiles.values() if t == "f32") - pv
        need = {
            "row_regs": p.nregs.get("row", 0), "head_regs": p.nregs.get("head", 0),
            "tile_stores": sum(1 for i in p.vector if i.kind == "st_tile"),
            "stat8": sum(1 for i in p.vector if i.kind == "st_stat8"),
            "scratch": int(any(i.kind == "rmax" for i in p.vector)),
            "unit_stats": len(p.stats),
            "f32_tiles": f32, "t_tiles": len(p.tiles) - f32 - pv, "pv_tiles": pv, "online": int(p.online),
            "l1_tiles": sum(1 for b in p.l1 if b.role == "tile"),
            "slots": 2 if pipelined(p) else 1, "post": int(bool(p.post)),
        }
        for k, v in need.items():
            top[k] = max(top.get(k, 0), v)
        for role, acc in (("heads", heads), ("gather", gathers)):   # a D buffer holds a Dv row too (Dv <= D)
            got = [b.cols for b in p.l1 if b.role == role]
            for j, c in enumerate(got):
                if j == len(acc):
                    acc.append(c)
                elif c == "D":
                    acc[j] = "D"
    top["post"] = bool(top.get("post"))
    top["dense"] = any(p.keyset == "dense" for p in programs)
    top["mask_in"] = int(any(i.kind == "mask_in" for p in programs for i in p.vector))
    top["tnd"] = int(any(p.keyset == "dense" and p.form == "TND" for p in programs))
    return AttentionCounts(l1_heads=tuple(heads), l1_gathers=tuple(gathers),
                     **{k: top.get(k, 0) for k in AttentionCounts.__dataclass_fields__ if k not in ("l1_heads", "l1_gathers")})


def ub_plan(c: AttentionCounts, row_cap, head_cap, sub_rows, t_bytes, shared=frozenset()) -> list[Buffer]:
    """The AIV buffers, in the order the kernel allocates them (names are the kernel's members); those named in
    `shared` are pool 1 (they share pool 0's bytes: the kernels' liveness plan, opgen.kernel.ubplan)."""
    plan = _ub_plan(c, row_cap, head_cap, sub_rows, t_bytes)
    return [replace(b, pool=1) if b.name in shared else b for b in plan]


def _ub_plan(c: AttentionCounts, row_cap, head_cap, sub_rows, t_bytes) -> list[Buffer]:
    plan = [Buffer("rowBuf", "TBuf<VECCALC>", c.row_regs, True, row_cap, 4, "fp32 key-row registers")]
    for k in range(c.tile_stores):
        plan.append(Buffer(f"tileQue{k}", "TQue<VECOUT>", 1, True, row_cap, t_bytes, "T key rows to a workspace tile"))
    for k in range(c.stat8):
        plan.append(Buffer(f"statQue{k}", "TQue<VECOUT>", 1, True, 8, 4, "8 fp32 copies of a per-row output"))
    if c.scratch:
        plan.append(Buffer("scratchBuf", "TBuf<VECCALC>", c.scratch, False, row_cap, 4, "fp32 row of the max tree"))
    if c.head_regs:
        plan.append(Buffer("headQue", "TQue<VECIN>", 1, False, head_cap, t_bytes, "a head row (T) being loaded"))
        plan.append(Buffer("headBuf", "TBuf<VECCALC>", c.head_regs, False, head_cap, 4, "fp32 head-row registers"))
    if c.unit_stats:
        plan.append(Buffer("unitStatBuf", "TBuf<VECCALC>", c.unit_stats, False, align_up(sub_rows, 8), 4,
                           "per-row scalars kept across the items of a unit"))
    if c.online:
        plan.append(Buffer("oAccBuf", "TBuf<VECCALC>", 1, False, align_up(sub_rows, 8) * head_cap, 4,
                           "the fp32 output accumulator O of the AIV's rows of a unit"))
        plan.append(Buffer("pvBuf", "TBuf<VECCALC>", 1, True, head_cap, 4, "fp32 P V rows of a chunk"))
        plan.append(Buffer("outQue", "TQue<VECOUT>", 1, True, head_cap, t_bytes, "T output rows"))
        plan.append(Buffer("expBuf", "TBuf<VECCALC>", 1, False, 8, 4, "the rescale exp(m - m') (8 lanes)"))
    plan.append(Buffer("reduceBuf", "TBuf<VECCALC>", 1, False, reduce_tmp_elems(emax(row_cap, head_cap)) + 8, 4,
                       "ReduceSum result block and scratch"))
    if c.mask_in:
        plan.append(Buffer("maskQue", "TQue<VECIN>", 1, False, align_up(row_cap, 32), 1, "a mask row (bool bytes)"))
        plan.append(Buffer("maskHalfBuf", "TBuf<VECCALC>", 1, False, align_up(row_cap, 128), 2,
                           "the mask row as half (whole 256-byte repeats)"))
        plan.append(Buffer("maskBitsBuf", "TBuf<VECCALC>", 1, False, align_up(row_cap, 128) // 8, 1,
                           "the kept-key bit mask (Compares)"))
        plan.append(Buffer("maskBuf", "TBuf<VECCALC>", 1, False, align_up(row_cap, 64), 4,
                           "the row as fp32 for Select (whole 256-byte repeats)"))
    if c.post:
        plan.append(Buffer("postInQue", "TQue<VECIN>", 1, False, POST_ELEMS, 4, "final pass: fp32 workspace slice"))
        plan.append(Buffer("postOutQue", "TQue<VECOUT>", 1, False, POST_ELEMS, t_bytes, "final pass: T slice / zeros"))
    return plan


def l1_plan(c: AttentionCounts, dims: dict, g_tile, keys, t_bytes) -> list[Buffer]:
    """The AIC's L1 buffers: head rows of a unit, gathered key chunks, vector tiles (all NZ, T)."""
    plan = [Buffer(f"headL1_{k}", "TBuf<A1>", 1, False, g_tile * dims[e], t_bytes, f"the unit's head rows (x {e})")
            for k, e in enumerate(c.l1_heads)]
    plan += [Buffer(f"gatherL1_{k}", "TBuf<B1>", 1, False, keys * dims[e], t_bytes, f"a gathered key chunk (x {e})")
             for k, e in enumerate(c.l1_gathers)]
    plan += [Buffer(f"tileL1_{k}", "TBuf<A1>", 1, False, g_tile * keys, t_bytes, "a vector tile chunk")
             for k in range(c.l1_tiles)]
    return plan


def _slot_bytes(c: AttentionCounts, rows, keys, t_bytes, dv=None):
    b = c.f32_tiles * _ws(rows * keys * 4) + c.t_tiles * _ws(rows * keys * t_bytes)
    return b + c.pv_tiles * _ws(rows * dv * 4) if c.pv_tiles else b


def fwd_program(name: str, c: AttentionCounts, shared=frozenset()):
    """(TilingProgram, {"ub": [Buffer], "l1": [Buffer]}) of the forward kernel `name` for counts `c` (module doc);
    `shared` the UB buffers of pool 1 (ub_plan)."""
    p = TilingProgram(name)
    v = _common(p, c.dense, bool(c.tnd))
    D, Dv, tB, gTile, L = v["D"], v["Dv"], v["tB"], v["gTile"], v["L"]
    keys_fit = p.let("l1KeysFit", select(gTile * D * tB < CUBE["l1"],
                                         (lit(CUBE["l1"]) - gTile * D * tB) // (D * tB + gTile * tB), 0),
                     "keys of one chunk the L1 plan holds")
    if c.dense:   # up to DENSE_ROWS_MAX rows: the S chunk (fp32 gTile x keys) must fit the L0C tile region too
        keys_fit = p.let("l0cKeysFit", emin(keys_fit, lit(L0C_TILE) // (gTile * 4)),
                         "keys of one chunk the L1 plan and the L0C tile region hold")
    _chunking(p, v, keys_fit)
    Lc = v["Lc"]
    k1 = _k_tile(p, "baseKs", D, Lc, "k tile of S = Q Kselᵀ (head dim)")
    k2 = _k_tile(p, "baseKo", Lc, Dv, "k tile of O = P Vsel (keys)")
    l1 = l1_plan(c, {"D": D, "Dv": Dv}, gTile, Lc, tB)
    l0a = p.let("l0aBytes", emax(gTile * k1, gTile * k2) * tB, "L0A bytes (A tiles)")
    l0b = p.let("l0bBytes", emax(Lc * k1, k2 * Dv) * tB, "L0B bytes (B tiles)")
    l0c = p.let("l0cBytes", lit(L0C_ACC) + gTile * Lc * 4, "L0C bytes: O accumulator region + S tile")
    if c.online:   # item = a block of key chunks: the UB rows and the workspace tiles hold it, not the whole row
        ic = p.let("itemChunks", emax(1, emin(v["chunks"], lit(ONLINE_ITEM_KEYS) // Lc)),
                   "cube chunks per online softmax item", True)
        Li = p.let("itemKeys", ic * Lc, "keys per online softmax item", True)
        ub = ub_plan(c, Li, D, ceil_div(v["gRows"], 2), tB, shared)
        slot = p.let("wsSlotBytes", _slot_bytes(c, v["gRows"], Li, tB, Dv),
                     "one workspace slot: S (fp32), P (T) and P V (fp32) of an item", True)
    else:
        ub = ub_plan(c, L, D, ceil_div(v["gRows"], 2), tB, shared)
        slot = p.let("wsSlotBytes", _slot_bytes(c, v["gRows"], L, tB), "one workspace slot: S (fp32) and P (T) of a "
                     "unit", True)
    _finish(p, v, ub, l1, l0a, l0b, l0c, v["blockDim"] * c.slots * slot,
            ub_reserve=SELECT_SCRATCH_BYTES if c.mask_in else 0)
    return p, {"ub": ub, "l1": l1}


def bwd_program(name: str, c: AttentionCounts, shared=frozenset()):
    """(TilingProgram, {"ub": [Buffer], "l1": [Buffer]}) of the backward kernel `name` for counts `c` (module doc);
    `shared` the UB buffers of pool 1 (ub_plan)."""
    p = TilingProgram(name)
    v = _common(p, c.dense, bool(c.tnd))
    D, Dv, tB, gTile = v["D"], v["Dv"], v["tB"], v["gTile"]
    fixed = gTile * (D + Dv) * tB
    keys_fit = p.let("l1KeysFit", select(fixed < CUBE["l1"],
                                         (lit(CUBE["l1"]) - fixed) // ((D + Dv) * tB + 2 * gTile * tB), 0),
                     "keys of one chunk the L1 plan holds")
    if c.dense:   # up to DENSE_ROWS_MAX rows: the S / dP chunk tiles (fp32 gTile x keys) must fit the L0C tile region
        keys_fit = p.let("l0cKeysFit", emin(keys_fit, lit(L0C_TILE) // (gTile * 4)),
                         "keys of one chunk the L1 plan and the L0C tile region hold")
    _chunking(p, v, keys_fit)
    Lc = v["Lc"]
    ks = _k_tile(p, "baseKs", D, Lc, "k tile of S = Q Kselᵀ (head dim)")
    kp = _k_tile(p, "baseKp", Dv, Lc, "k tile of dP = dO Vselᵀ (value dim)")
    kq = _k_tile(p, "baseKq", Lc, D, "k tile of dQ = dS Ksel (keys)")
    nk = _n_tile(p, "baseNk", D, Lc, "n tile of dKsel = dSᵀ Q (head dim)")
    nv = _n_tile(p, "baseNv", Dv, Lc, "n tile of dVsel = Pᵀ dO (value dim)")
    l1 = l1_plan(c, {"D": D, "Dv": Dv}, gTile, Lc, tB)
    l0a = p.let("l0aBytes", emax(emax(gTile * ks, gTile * kp), emax(gTile * kq, Lc * gTile)) * tB,
                "L0A bytes (A tiles)")
    l0b = p.let("l0bBytes", emax(emax(Lc * ks, Lc * kp), emax(kq * D, emax(gTile * nk, gTile * nv))) * tB,
                "L0B bytes (B tiles)")
    l0c = p.let("l0cBytes", lit(L0C_ACC) + emax(gTile * Lc * 4, emax(Lc * nk * 4, Lc * nv * 4)),
                "L0C bytes: dQ accumulator region + the largest tile")
    ub = ub_plan(c, Lc, D, ceil_div(v["gRows"], 2), tB, shared)
    T1, N1, T2, N2 = v["T1"], v["N1"], v["T2"], v["N2"]
    slot = p.let("wsSlotBytes", _slot_bytes(c, v["gRows"], Lc, tB),
                 "the workspace slot of an AI Core: S, dP (fp32), dS, P (T) of a chunk", True)
    wq = p.let("wsDqOffset", v["blockDim"] * c.slots * slot, "byte offset of the fp32 dq workspace [T1, N1, D]", True)
    wk = p.let("wsDkOffset", wq + _ws(T1 * N1 * D * 4), "byte offset of the fp32 dk workspace [T2, N2, D]", True)
    wv = p.let("wsDvOffset", wk + _ws(T2 * N2 * D * 4), "byte offset of the fp32 dv workspace [T2, N2, Dv]", True)
    aivs = 2 * v["blockDim"]
    p.let("postPerCore", align_up(ceil_div(T1 * N1 * D + T2 * N2 * (D + Dv), aivs), 16),
          "elements of the concatenated dq|dk|dv workspaces each AIV zeroes / finishes", True)
    p.let("postElems", lit(POST_ELEMS), "elements per UB pass of the final pass", True)
    det = p.input("deterministic", "1: the framework asks for deterministic computation (GetDeterministic())")
    strategy = p.let("strategy", select(det, DETERMINISTIC, STRATEGY),
                     "1: atomic dK/dV adds as the AI Cores go; 2: in a fixed order (rounds, then AI Core order)", True)
    _finish(p, v, ub, l1, l0a, l0b, l0c, wv + _ws(T2 * N2 * Dv * 4), strategy)
    return p, {"ub": ub, "l1": l1}


def program_inputs(layout, spec, deterministic: bool = False, read=()) -> dict:
    """How the emitted TilingFunc reads each program input (opgen.tiling.emit): the role dims of the attention
    layout (opgen.kernel.attention.AttentionLayout), the block size through the integer attribute that binds it,
    the dtype, key, platform and scale inputs; `deterministic`: the framework's flag (the backward). The scale is
    the runtime float attribute of `read` (the ones the lowered programs read, AttentionProgram.scalars), else the
    spec's one runtime float attribute; attributes the body never reads (a keep_prob declared for the API) are not
    program inputs. Raises SpecError unless that names exactly one."""
    floats = [a.name for a in spec.runtime_attrs if a.type is float]
    scale = [n for n in floats if n in read] or floats
    dvar = layout.dtype
    out = {"deterministic": ("deterministic",)} if deterministic else {}
    if layout.keyset == "dense":
        r = {k: Sym(layout.dim(k)) for k in ("B", "N1", "S1", "D", "N2", "S2", "Dv")}
        blk = DENSE_BLOCK
        tnd = layout.form == "TND"   # the role dims S1 / S2 are T1 / T2, B is Bn
        out.update({"T1": r["S1"] if tnd else r["B"] * r["S1"], "N1": r["N1"], "D": r["D"],
                    "T2": r["S2"] if tnd else r["B"] * r["S2"], "N2": r["N2"],
                    "Dv": r["Dv"], "CNT": (r["S2"] + (blk - 1)) // blk, "Bn": r["B"], "BS": Lit(blk),
                    "S1": r["S1"], "S2": r["S2"]})
        if tnd:   # S1 / S2 / CNT of the longest batch, read off the host arrays of cumulative ends (T1 / T2 without)
            cq, ckv = layout.cumulative
            out.update({"S1": ("longest_batch", cq, r["S1"], 1), "S2": ("longest_batch", ckv, r["S2"], 1),
                        "CNT": ("longest_batch", ckv, r["S2"], blk)})
    else:
        out.update({r: Sym(layout.dim(r)) for r in ("T1", "N1", "D", "T2", "N2", "Dv", "CNT", "Bn")})
        out["BS"] = ("attr_dim", layout.block_attr, layout.dim("BS")) if layout.block_attr else Sym(layout.dim("BS"))
    out.update({"tBytes": ("bytes", dvar), "dtypeKey": ("dtype_key",), "attrKey": ("attr_key",),
                "coreNum": ("platform", "coreNum"), "ubBytes": ("platform", "ubBytes")})
    if len(scale) != 1:
        raise SpecError(f"{spec.name}: the attention kernel takes one float attribute (the score scale), got "
                        f"{', '.join(scale) or 'none'}")
    out["scaleAttr"] = ("attr_bits", scale[0])
    return out


POST_REGIONS = {"query": ("wsDqOffset", ("tokens", "qHeads", "headDim")),
                "key": ("wsDkOffset", ("kvTokens", "kvHeads", "headDim")),
                "value": ("wsDvOffset", ("kvTokens", "kvHeads", "valueDim"))}
"""The fp32 workspaces of a backward's post outputs by the role of the output (`post_role`): query-shaped [T1, N1, D]
(dq), key-shaped [T2, N2, D] (dk), value-shaped [T2, N2, Dv] (dv): the tiling field of the region's byte offset
(bwd_program) and the tiling fields whose product is its element count (a dense layout's tokens are B * S1 and
B * S2, program_inputs)."""


def post_role(op, layout) -> str:
    """The role of the output a backward's matmul `op` (opgen.kernel.attnprog.CubeOp) finishes through a workspace,
    read off the product, not off the output's declared shape (a dense spec's shapes depend on its layout
    attribute, and its key / value dims may be one dim): an accumulated [rows, E] result is query-shaped (dQ = dS K);
    a [keys, E] result scatter-added at the key rows is key-shaped when it contracts the unit's rows with the query
    (dK = dSᵀ Q), value-shaped otherwise (dV = Pᵀ dO)."""
    if op.dest == "acc":
        return "query"
    return "key" if op.b.tensor == layout.query else "value"


def attn_plan(spec, lowered, counts: AttentionCounts, inputs: dict):
    """What the attention classes read of this tiling (opgen.kernel.attnclass.AttnPlan): the workspace slots, the
    deterministic schedule when the TilingFunc reads the framework's flag (`inputs`, program_inputs), the region
    alignment, each post output's workspace offset field and size fields (by its role, post_role), the L0 buffers.
    Raises SpecError when two post outputs take one workspace region."""
    lay = lowered.layout
    offs, sizes, taken = {}, {}, {}
    for p in lowered.programs.values():
        for po in p.post:
            op = next(c for c in p.cube if c.target == po.output and c.dest in ("acc", "scatter"))
            role = post_role(op, lay)
            if taken.setdefault(role, po.output) != po.output:
                raise SpecError(f"{spec.name}: outputs {taken[role]} and {po.output} are both {role}-shaped results "
                                f"finished through a workspace: the tiling has one such workspace")
            offs[po.output], sizes[po.output] = POST_REGIONS[role]
    return AttnPlan(slots=counts.slots, det="deterministic" in inputs, det_strategy=DETERMINISTIC, ws_align=WS_ALIGN,
                    post_offsets=tuple(offs.items()), post_sizes=tuple(sizes.items()), l0c_acc=L0C_ACC,
                    l0a=CUBE["l0a"], l0b=CUBE["l0b"], l0c=CUBE["l0c"])


def _counts(lowered) -> AttentionCounts:
    """AttentionFamily.counts (installed): attention_counts of the lowered programs, with the AIC schedule of
    each (opgen.kernel.attnprog.pipelined)."""
    return attention_counts(lowered.programs.values(), pipelined)


def _tile(spec, lowered, counts: AttentionCounts) -> Tiling:
    """AttentionFamily.tile (installed): the forward or backward tiling program (backward: outputs finished from a
    workspace by a final pass), its inputs read by role from the layout, the UB + L1 plan; builds the kernel
    classes (opgen.kernel.attnclass.attention_classes) from the plan, into lowered.extra["aclasses"]."""
    backward = counts.post
    read = {a for p in lowered.programs.values() for a in p.scalars}
    inputs = program_inputs(lowered.layout, spec, deterministic=backward, read=read)
    classes = attention_classes(spec, lowered, attn_plan(spec, lowered, counts, inputs))
    lowered.extra["aclasses"] = classes
    prog, plans = (bwd_program if backward else fwd_program)(spec.name, counts, shared_buffers(classes))
    doc = (f"Tiling of {spec.name}: attention family, {'backward' if backward else 'forward'} mixed AIC/AIV "
           f"kernel (1 AIC : 2 AIV), units of (token, kv head, head group).")
    return Tiling(prog, inputs, {1: plans["ub"] + plans["l1"]}, doc)


def shared_buffers(classes) -> frozenset:
    """The tiling plan's names (ub_plan) of the UB buffers every class of the kernel carves from pool 1 (they share
    pool 0's bytes: opgen.kernel.ubplan); a buffer pooled in one class is pooled in all of them, which the kernels'
    one tiling needs -- RuntimeError otherwise."""
    sets = {frozenset(n.rstrip("_") for n in c.ubplan.pools[1]) for c in classes if c.ubplan is not None}
    if len(sets) > 1:
        raise RuntimeError(f"the attention classes plan UB differently ({sorted(map(sorted, sets))}): one tiling "
                           "cannot prove them all")
    return next(iter(sets), frozenset())


AttentionFamily.install(counts=_counts, tile=_tile)
