"""Tiling of the cube family's GEMM (opgen.kernel.cube): base tiles, the block split over the AI Cores, the
L1 / L0 plan and its fit.

Units: elements, blocks and bytes as named. Facts: docs/reference/ascendc.md §1.2 (L1 512 KB, L0A / L0B 64 KB,
L0C 128 KB on Atlas A2/A3, from opgen/platforms), §1.3 (blockDim of the cube-only launch counts AIC cores, read
from the platform's GetCoreNumAic), §1.10 (16 x 16 fractals; Nd2Nz counts are uint16: a source row pitch K or N <= 65535; Mmad m / n /
k <= 4095; LoadData repeats <= 255).

Base tiles: baseM = min(128, ceil16(M)), baseN = min(256, ceil16(N)), baseK = min(64, ceil16(K)), baseKL1 =
min(256, ceil16(K)) elements — so two A panels baseM x baseKL1 and two B panels baseKL1 x baseN (T) fit L1, two A
chunks baseM x baseK L0A, two B chunks baseK x baseN L0B, and the fp32 baseM x baseN block
fits L0C (one block: the next block's first Mmad waits for this one's Fixpipe). `fits` states every bound for the
shapes the spec allows, and opgen.tiling.ub_proof evaluates it over the spec's dim domain (the static L1 / L0
proof). A transposed operand's panel and chunk are the same size (Aᵀ: baseKL1 x baseM, Bᵀ: baseN x baseKL1).

A vector epilogue (opgen.kernel.cube.EpiProgram) adds epiRows (rows of an AIV pass: at most half a block, as many
as the AIV's UB holds), its UB bytes to `fits`, and a workspace of two fp32 block slots per AI Core (bytes).

Split: mBlocks = ceil(M / baseM), nBlocks = ceil(N / baseN) output blocks per matrix (times the batch's matrices
when batched: block // mnBlocks is the matrix), numbered row-major; blockDim =
min(AI Cores, blocks); each AI Core takes blocksPerCore contiguous blocks, the first blocksTail one more.
"""

from __future__ import annotations

import functools

from opgen.ir.dims import Lit, Sym
from opgen.kernel import cube as kcube
from opgen.kernel.family import Tiling
from opgen.platforms import PLATFORMS
from opgen.tiling.buffers import Buffer, fixed_bytes
from opgen.tiling.program import TilingProgram, align_up, ceil_div, emax, emin

BASE_M, BASE_N, BASE_K, BASE_K_L1 = 128, 256, 64, 256
"""Largest base tile edges (elements): L0 chunks A 128 x 64 (16 KB in fp16 / bf16) and B 64 x 256 (32 KB), two of
each (double buffered: all 64 KB of L0B); fp32 block 128 x 256 (all 128 KB of L0C: the wider block reads A half as
often); L1 panels A 128 x 256 (64 KB) and B 256 x 256 (128 KB), two of each (384 KB of L1's 512). The panel's
256 columns make each of A's rows one 512-byte GM burst (a 64-column chunk copied alone gives 128 B: four times the
bursts, each paying the per-burst overhead of docs/reference/kernel_cost.md §2)."""
STRATEGY = 1
"""The tiling key's strategy digit of the one GEMM schedule."""
ND2NZ_MAX = 65535
"""Largest Nd2Nz source row pitch (uint16 srcDValue, elements): bounds K (A's pitch) and N (B's pitch)."""


def _sizes() -> dict:
    """L1 / L0 bytes of the cube's SoC family (Atlas A2/A3, arch dav-2201), from opgen/platforms."""
    plats = [p for p in PLATFORMS.values() if p.arch == "dav-2201"]
    sizes = {(p.l1_bytes, p.l0a_bytes, p.l0b_bytes, p.l0c_bytes) for p in plats}
    assert len(sizes) == 1, "Atlas A2/A3 platforms disagree on L1/L0 sizes"
    l1, l0a, l0b, l0c = sizes.pop()
    return {"l1": l1, "l0a": l0a, "l0b": l0b, "l0c": l0c}


CUBE = _sizes()
"""On-chip bytes of the AIC: l1, l0a, l0b, l0c."""


def gemm_program(name: str, trans_a: bool = False, trans_b: bool = False, batched: bool = False, epi=None,
                 attrs: tuple = ()):
    """(TilingProgram, [Buffer]) of the GEMM kernel `name` (module doc): the fields opgen.kernel.cube.FIELDS,
    blockDim, fits, tilingKey, workspaceBytes; the buffers are the kernel's L1 / L0 allocations. trans_a / trans_b:
    A stored [K, M] / B stored [N, K] (their row pitches, M / K, are what Nd2Nz must fit); batched: a program
    input `batch` (matrices) multiplies the blocks, and the field mnBlocks (blocks per matrix) is written. epi:
    (UB bytes per element of a pass row, UB bytes per element of the column rows) of a vector epilogue
    (opgen.kernel.cube.EpiProgram): then the field epiRows (rows per AIV pass, the most that fit the UB, at most
    half a block) and the workspace of two fp32 block slots per AI Core; attrs: the runtime float attributes it
    reads (inputs <name>Attr, fields <name>Bits: their IEEE-754 bits)."""
    p = TilingProgram(name)
    dm, dk, dn = p.input("dimM", "rows of A and of the output"), p.input("dimK", "A columns = B rows"), \
        p.input("dimN", "columns of B and of the output")
    tb = p.input("tBytes", "bytes per element of the operands")
    key = p.input("dtypeKey", "1-based row of the dtype table")
    ak = p.input("attrKey", "mixed-radix index of the static attribute values")
    aic = p.input("aicNum", "AI Cores (AIC) of the platform (GetCoreNumAic)")
    M = p.let("M", dm + 0, "output rows (elements)", True)
    K = p.let("K", dk + 0, "reduction length (elements)", True)
    N = p.let("N", dn + 0, "output columns (elements)", True)
    bm = p.let("baseM", emin(BASE_M, align_up(M, 16)), "rows of a block (elements, a multiple of 16)", True)
    bn = p.let("baseN", emin(BASE_N, align_up(N, 16)), "columns of a block (elements, a multiple of 16)", True)
    bk = p.let("baseK", emin(BASE_K, align_up(K, 16)), "K chunk of L0A / L0B (elements, a multiple of 16)", True)
    bk1 = p.let("baseKL1", emin(BASE_K_L1, align_up(K, 16)),
                "K panel of L1 (elements, a multiple of 16; baseK chunks of it go to L0)", True)
    mb = p.let("mBlocks", ceil_div(M, bm), "blocks along M (the last a tail)")
    nb = p.let("nBlocks", ceil_div(N, bn), "blocks along N (the last a tail)", True)
    if batched:
        bt = p.input("batch", "matrices (the product of the batch dims)")
        mn = p.let("mnBlocks", mb * nb, "output blocks per matrix", True)
        blocks = p.let("blocks", bt * mn, "output blocks of every matrix")
    else:
        blocks = p.let("blocks", mb * nb, "output blocks")
    bd = p.let("blockDim", emax(1, emin(aic, blocks)), "AI Cores launched", True)
    p.let("blocksPerCore", blocks // bd, "blocks of every AI Core", True)
    p.let("blocksTail", blocks % bd, "the first blocksTail AI Cores take one more block", True)
    plan = [Buffer("l1A", "TQue<A1>", 2, False, bm * bk1, tb, "A panel, NZ (double buffered)"),
            Buffer("l1B", "TQue<B1>", 2, False, bk1 * bn, tb, "B panel, NZ (double buffered)"),
            Buffer("l0A", "TQue<A2>", 2, False, bm * bk, tb, "A chunk, ZZ (double buffered)"),
            Buffer("l0B", "TQue<B2>", 2, False, bk * bn, tb, "B chunk, ZN (double buffered)"),
            Buffer("l0C", "TBuf<CO1>", 1, False, bm * bn, 4, "fp32 block, NZ")]
    l1 = p.let("l1Bytes", fixed_bytes(plan[:2]), "L1 bytes")
    l0a = p.let("l0aBytes", plan[2].bytes(), "L0A bytes")
    l0b = p.let("l0bBytes", plan[3].bytes(), "L0B bytes")
    l0c = p.let("l0cBytes", plan[4].bytes(), "L0C bytes")
    fits = (l1 <= CUBE["l1"]) & (l0a <= CUBE["l0a"]) & (l0b <= CUBE["l0b"]) & (l0c <= CUBE["l0c"]) \
        & ((M if trans_a else K) <= ND2NZ_MAX) & ((K if trans_b else N) <= ND2NZ_MAX)
    if epi is None:
        p.let("fits", fits, "1 when the tiles fit L1 / L0 and the operands' row pitches fit Nd2Nz", True)
        p.let("tilingKey", ak * 100 + key * 10 + STRATEGY, "attrKey * 100 + dtypeKey * 10 + strategy", True)
        p.let("workspaceBytes", dm * 0, "no user workspace (bytes)", True)
        return p, plan
    rb, cb = epi
    ub = p.input("ubBytes", "UB bytes of an AIV (GetCoreMemSize UB)")
    half = p.let("halfRows", (bm + 1) // 2, "rows of a block an AIV takes at most")
    room = p.let("epiRoom", (ub - bn * cb) // (bn * rb), "pass rows the UB holds beside the column rows")
    er = p.let("epiRows", emax(1, emin(half, room)), "rows of an AIV pass (elements of baseN each)", True)
    plan += [Buffer("epiRows", "TBuf<VECCALC>", 1, False, er * bn, rb, "the pass's fp32 / T / output rows"),
             Buffer("epiCols", "TBuf<VECCALC>", 1, False, bn, cb, "the column rows (bias)")]
    ubb = p.let("ubEpiBytes", fixed_bytes(plan[5:]), "UB bytes of the epilogue")
    p.let("fits", fits & (ubb <= ub),
          "1 when the tiles fit L1 / L0, the operands' row pitches fit Nd2Nz and the epilogue's pass fits the UB",
          True)
    p.let("tilingKey", ak * 100 + key * 10 + STRATEGY, "attrKey * 100 + dtypeKey * 10 + strategy", True)
    p.let("workspaceBytes", bd * 2 * bm * bn * 4, "two fp32 block slots per AI Core (bytes)", True)
    for a in attrs:
        v = p.input(f"{a}Attr", f"IEEE-754 bits of the attribute {a}")
        p.let(f"{a}Bits", v + 0, f"IEEE-754 bits of {a} (float)", True)
    return p, plan


def cube_tiling(spec, lowered, counts) -> Tiling:
    """The Tiling of a cube-family lowering: gemm_program, its inputs read from the layout's dims (the A input's
    shape), the dtype variable's size (2 for a fixed f16 / bf16) and key, the platform's cores; the L1 / L0 plan."""
    lay = lowered.layout
    m, k, n = lay.dims
    epi = (counts.epi_row_bytes, counts.epi_col_bytes) if lay.steps else None
    attrs = kcube.epi_attrs(lay)
    prog, plan = gemm_program(spec.name, lay.trans_a, lay.trans_b, bool(lay.batch), epi, attrs)
    inputs = {"dimM": Sym(m), "dimK": Sym(k), "dimN": Sym(n), "tBytes": Lit(2) if lay.fixed else ("bytes", lay.dtype),
              "dtypeKey": ("dtype_key",), "attrKey": ("attr_key",), "aicNum": ("platform", "aicNum")}
    if epi is not None:
        inputs["ubBytes"] = ("platform", "ubBytes")
    inputs.update({f"{a}Attr": ("attr_bits", a) for a in attrs})
    if lay.batch:
        inputs["batch"] = functools.reduce(lambda x, y: x * y, [Sym(d) for d in lay.batch])
    doc = (f"Tiling of {spec.name}: cube family, one cube-only launch (blockDim AIC cores); output blocks of baseM x baseN "
           f"over the AI Cores, K in chunks of baseK, fp32 accumulation in L0C.")
    if epi is not None:
        doc = (f"Tiling of {spec.name}: cube family, one mixed launch (blockDim AI Cores, 1 AIC : 2 AIV); output "
               f"blocks of baseM x baseN over the AI Cores, K in chunks of baseK, fp32 accumulation in L0C, each "
               f"block to one of two fp32 workspace slots; each AIV finishes half of a block's rows in passes of "
               f"epiRows rows.")
    return Tiling(prog, inputs, {STRATEGY: plan}, doc, "no L1/L0 tiling of {op} holds this shape")


kcube.CubeFamily.install(tile=cube_tiling)
