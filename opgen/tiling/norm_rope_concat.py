"""Tiling of NormRopeConcat and NormRopeConcatGrad: one AIV launch each, head rows split over the cores.

A head row is the D elements of one (part, b, s, n); the parts of the kernel's lowering
(opgen.kernel.headrows, in the spec order of their tensors: query, key, value, encoder_query, encoder_key,
encoder_value; for the grad the gradient slices of query, key, encoder_query, encoder_key, value,
encoder_value) are laid end to end in one row space of `rowNum` rows, walked by each core as one
contiguous range (the first `rowsTail` cores take one more row), `rowsPerPass` rows per UB pass. Rows of
a part are ordered (b, s, n): a pass shares the RoPE table row of its position across heads, reads its
BSND rows contiguously and writes BNSD rows with a (S_total - 1) * D gap (the grad the reverse). The UB
budget comes from the counts the lowered part programs need (COUNTS, checked by the kernel emitter;
opgen.tiling.headkernel); D <= 1024 always fits. The grad's LayerNorm weight/bias gradients are summed
per part in fp32 UB rows, written as per-core partials to workspace (8 rows of dAlign per core: weight
and bias of query, key, encoder_query, encoder_key), and summed in core order after SyncAll, the columns
split over the cores (`colsPerReduceCore`): deterministic (reference/norm_rope_concat.md §4.5 describes
CANN's multi-level tree, which we replace by this fixed-order sum).
Reference: reference/norm_rope_concat.md §4 (CANN's split over positions, one part at a time) and §5 (GM).
"""

from __future__ import annotations

from opgen.ir.dims import Sym
from opgen.tiling.headkernel import HeadCounts, head_plan
from opgen.tiling.program import TilingProgram, align_up, ceil_div
from opgen.tiling.rows import row_split

COUNTS = {
    # forward: x in; out; mean, rstd out; 3 fp32 temporaries (x, x*cos, rotated x); sin, cos; weight, bias
    False: HeadCounts(row_in=1, row_out=1, stat_in=0, stat_out=2, temps=3, tables=2, cols=2, accs=0, perms=1,
                      signs=1, conds=1, acc_outputs=0),
    # grad: grad rows and x in; dx out; mean, rstd in; 3 temporaries; sin, cos; weight; weight/bias sums
    True: HeadCounts(row_in=2, row_out=1, stat_in=2, stat_out=0, temps=3, tables=2, cols=1, accs=2, perms=1,
                     signs=1, conds=1, acc_outputs=8),
}
"""What the kernels hold in UB (maxima over every part of every specialisation; the kernel emitter checks
the lowered programs against them)."""
BUFFERS: dict = {}  # grad (bool) -> [Buffer], filled by program() (opgen.tiling.buffers)

DIM_FIELDS = {"B": "batchNum", "N": "headNum", "D": "headDimLen", "Sq": "querySeqLen", "Seq": "encoderQuerySeqLen",
              "Sk": "keySeqLen", "Sek": "encoderKeySeqLen", "R": "ropeRowNum"}
"""The tiling-data field holding each spec dim (the kernel's row addressing is printed over them)."""


def program(grad: bool) -> TilingProgram:
    """The forward (grad=False) or backward (grad=True) tiling program."""
    p = TilingProgram("NormRopeConcatGrad" if grad else "NormRopeConcat")
    B = p.input("batch", "B")
    N = p.input("heads", "N")
    D = p.input("headDim", "D (elements)")
    sq = p.input("querySeq", "Sq")
    seq = p.input("encoderQuerySeq", "Seq (0 without encoder_query)")
    sk = p.input("keySeq", "Sk (= Sv)")
    sek = p.input("encoderKeySeq", "Sek (= Sev; 0 without encoder_key)")
    r = p.input("ropeRows", "R, rows of the RoPE tables")
    tB = p.input("tBytes", "bytes per element of T")
    dk = p.input("dtypeKey", "1..3: fp16, bf16, fp32 (the spec's dtype rows)")
    ak = p.input("attrKey", "mixed-radix index of the static attribute values (opgen.tiling.emit.attr_key)")
    cores = p.input("coreNum", "AIV cores")
    ub = p.input("ubBytes", "UB bytes per AIV core")
    eps = None if grad else p.input("epsAttr", "IEEE-754 bits of the float attribute eps")
    c = COUNTS[grad]
    d_align = p.let("dAlign", align_up(D, 16), "head row stride in UB (elements)", True)
    rows = p.let("rowNum", B * N * (sq + seq + 2 * (sk + sek)), "head rows of all six parts", True)
    plan = head_plan(c, d_align, tB)
    BUFFERS[grad] = plan
    fit, used = row_split(p, rows, cores, ub, plan)
    p.let("blockDim", used, "AIV cores launched", True)
    p.let("fits", fit >= 1, "1 when one head row fits UB (always for D <= 1024)", True)
    p.let("tilingKey", ak * 100 + dk * 10 + 1, "attrKey * 100 + dtypeKey * 10 + 1 (one strategy)", True)
    if grad:
        p.let("colsPerReduceCore", align_up(ceil_div(D, used), 16),
              "columns each core sums in the cross-core weight-gradient reduction", True)
        p.let("workspaceBytes", used * c.acc_outputs * d_align * 4,
              "per-core fp32 partial weight/bias grads (bytes)", True)
    else:
        p.let("workspaceBytes", 0 * rows, "no user workspace (bytes)", True)
    for name, v in (("batchNum", B), ("headNum", N), ("querySeqLen", sq), ("encoderQuerySeqLen", seq),
                    ("keySeqLen", sk), ("encoderKeySeqLen", sek), ("ropeRowNum", r), ("headDimLen", D)):
        p.let(name, v + 0, "", True)
    if eps is not None:
        p.let("epsBits", eps + 0, "IEEE-754 bits of eps (float)", True)
    return p


PROGRAM_FWD = program(False)
PROGRAM_GRAD = program(True)

INPUTS = {
    "batch": Sym("B"), "heads": Sym("N"), "headDim": Sym("D"), "querySeq": Sym("Sq"), "encoderQuerySeq": Sym("Seq"),
    "keySeq": Sym("Sk"), "encoderKeySeq": Sym("Sek"), "ropeRows": Sym("R"), "tBytes": ("bytes", "T"),
    "dtypeKey": ("dtype_key",), "attrKey": ("attr_key",), "coreNum": ("platform", "coreNum"), "ubBytes": ("platform", "ubBytes"),
    "epsAttr": ("attr_bits", "eps"),
}


def gm_bytes(tl: dict, grad: bool, rope: bool, norm_parts: int) -> dict:
    """Model of GM bytes for tiling `tl` next to the minimum (every tensor read once, written once).

    norm_parts: how many of the four query/key streams are normalised (their x and stats are read by the
    grad). RoPE table rows are read once per (core, part, b, s) a core's range touches."""
    B, N, D, t = tl["batchNum"], tl["headNum"], tl["headDimLen"], tl["tBytes"]
    sq, seq, sk, sek, R = (tl[k] for k in ("querySeqLen", "encoderQuerySeqLen", "keySeqLen", "encoderKeySeqLen",
                                            "ropeRowNum"))
    elems = B * N * D * (sq + seq + 2 * (sk + sek))
    d = {"tensors in+out": 2 * elems * t}
    if grad:
        x_rows = [sq, seq, sk, sek][:norm_parts]
        d["x + stats (normalised streams)"] = sum(B * N * s * (D * t + 8) for s in x_rows)
        d["weight grads (partials write+read, outputs)"] = tl["blockDim"] * 8 * D * 4 * 2 + 8 * D * t
    minimum = sum(d.values()) + (2 * R * D * t if rope else 0)
    if rope:
        # one sin and one cos row per run of N head rows sharing a position, plus one per core boundary
        runs = min(tl["rowNum"], tl["blockDim"] + tl["rowNum"] // max(1, N))
        d["rope tables"] = 2 * runs * D * t
    total = sum(d.values())
    return {"bytes": total, "min_bytes": minimum, "ratio": total / minimum, "detail": d}
