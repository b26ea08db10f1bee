"""Tiling of NormRopeConcat and NormRopeConcatGrad: one AIV launch each, head rows split over the cores.

A head row is the D elements of one (part, b, s, n); the parts (query, encoder_query, key,
encoder_key, value, encoder_value; for the grad the same six gradient slices) are laid end to end in
one row space of `rowNum` rows, walked by each core as one contiguous range (the first `rowsTail`
cores take one more row), `rowsPerPass` rows per UB pass. Rows of a part are ordered (b, s, n): a
pass shares the RoPE table row of its position across heads, reads its input rows contiguously (BSND)
and writes them with a (S_total - 1) * D stride (BNSD), or the reverse for the grad. D <= 1024 always
fits. The grad's LayerNorm weight/bias gradients are accumulated per core in fp32 (8 rows of D: weight
and bias of query, encoder_query, key, encoder_key), written as per-core partials to workspace, and
summed in core order by the first cores after SyncAll (deterministic; reference/norm_rope_concat.md §4.5
describes CANN's multi-level tree, which we replace by this fixed-order sum).
Reference: reference/norm_rope_concat.md §4 (CANN's split over positions, one part at a time) and §5 (GM).
"""

from __future__ import annotations

from opgen.ir.dims import Sym
from opgen.tiling.buffers import Buffer
from opgen.tiling.program import TilingProgram, align_up, ceil_div, emin
from opgen.tiling.rows import row_split

REDUCE_TMP_BYTES = 1024
BUFFERS: dict = {}  # grad (bool) -> [Buffer], filled by program() (opgen.tiling.buffers)


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
    d_align = p.let("dAlign", align_up(D, 16), "head row stride in UB (elements)", True)
    rows = p.let("rowNum", B * N * (sq + seq + 2 * (sk + sek)), "head rows of all six parts", True)
    plan = [
        Buffer("inQue", "TQue<VECIN>", 2, True, d_align, tB, "input head rows"),
        Buffer("outQue", "TQue<VECOUT>", 2, True, d_align, tB, "output head rows"),
        Buffer("workBuf", "TBuf<VECCALC>", 3, True, d_align, 4, "fp32 x, rotated x, product"),
        Buffer("statBuf", "TBuf<VECCALC>", 2, True, 8, 4, "mean and rstd of the row, one 32-byte block each"),
        Buffer("paramBuf", "TBuf<VECCALC>", 4 if grad else 8, False, d_align, 4,
               "LayerNorm weights" + ("" if grad else " and biases") + " of the 4 streams in fp32"),
        Buffer("ropeBuf", "TBuf<VECCALC>", 4, False, d_align, 4, "sin, cos, gather offsets, sign mask"),
        Buffer("inQueTable", "TQue<VECIN>", 2, False, d_align, tB, "sin/cos table rows"),
        Buffer("reduceBuf", "TBuf<VECCALC>", 1, False, REDUCE_TMP_BYTES // 4, 4, "reduction scratch"),
    ] + ([Buffer("accBuf", "TBuf<VECCALC>", 8, False, d_align, 4, "weight/bias-grad sums of the 4 streams")]
         if grad else [])
    BUFFERS[grad] = plan
    fit, used = row_split(p, rows, cores, ub, plan)
    p.let("blockDim", used, "AIV cores launched", True)
    p.let("fits", fit >= 1, "1 when one head row fits UB (always for D <= 1024)", True)
    p.let("tilingKey", ak * 100 + dk * 10 + 1, "attrKey * 100 + dtypeKey * 10 + 1 (one strategy)", True)
    if grad:
        p.let("reduceCores", emin(used, ceil_div(d_align, 16)), "cores summing the weight-grad partials", True)
        p.let("workspaceBytes", used * 8 * d_align * 4, "per-core fp32 partial weight/bias grads (bytes)", True)
    else:
        p.let("workspaceBytes", 0 * rows, "no user workspace (bytes)", True)
    for name, v in (("batchNum", B), ("headNum", N), ("querySeqLen", sq), ("encoderQuerySeqLen", seq),
                    ("keySeqLen", sk), ("encoderKeySeqLen", sek), ("ropeRowNum", r), ("headDimLen", D)):
        p.let(name, v + 0, "", True)
    return p


PROGRAM_FWD = program(False)
PROGRAM_GRAD = program(True)

INPUTS = {
    "batch": Sym("B"), "heads": Sym("N"), "headDim": Sym("D"), "querySeq": Sym("Sq"), "encoderQuerySeq": Sym("Seq"),
    "keySeq": Sym("Sk"), "encoderKeySeq": Sym("Sek"), "ropeRows": Sym("R"), "tBytes": ("bytes", "T"),
    "dtypeKey": ("dtype_key",), "attrKey": ("attr_key",), "coreNum": ("platform", "coreNum"), "ubBytes": ("platform", "ubBytes"),
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
