"""Tiling of the cube family's GEMM (opgen.kernel.cube): base tiles, the block split over the AI Cores, the
L1 / L0 plan and its fit.

Units: elements, blocks and bytes as named. Facts: docs/reference/ascendc.md §1.2 (L1 512 KB, L0A / L0B 64 KB,
L0C 128 KB on Atlas A2/A3, from opgen/platforms), §1.3 (blockDim of the cube-only launch counts AIC cores, read
from the platform's GetCoreNumAic), §1.10 (16 x 16 fractals; Nd2Nz counts are uint16: a source row pitch K or N <= 65535; Mmad m / n /
k <= 4095; LoadData repeats <= 255).

Base tiles: baseM = min(128, ceil16(M)), baseN = min(256, ceil16(N)), baseK = min(64, ceil16(K)); L1 panels
baseKL1A (A, K depth) and baseKL1 (B): A 2 * 256 deep with B 256 or 128 where two of each fit L1 (beside a bias
row), else both min(256, ceil16(K)), none deeper than K (docs/design.md "Cube family: A panels deeper than B's") —
so two A panels baseM x baseKL1A and two B panels baseKL1 x baseN (T) fit L1, two A
chunks baseM x baseK L0A, two B chunks baseK x baseN L0B, and the fp32 baseM x baseN block
fits L0C (one block: the next block's first Mmad waits for this one's Fixpipe). `fits` states every bound for the
shapes the spec allows, and opgen.tiling.ub_proof evaluates it over the spec's dim domain (the static L1 / L0
proof). A transposed operand's panel and chunk are the same size (Aᵀ: baseKL1A x baseM, Bᵀ: baseN x baseKL1).

A vector epilogue (opgen.kernel.cube.EpiProgram) adds epiRows (rows of an AIV pass: at most half a block, as many
as the AIV's UB holds), its UB bytes to `fits`, and a workspace of two fp32 block slots per AI Core (bytes).

Split: mBlocks = ceil(M / baseM), nBlocks = ceil(N / baseN) output blocks per matrix (times the batch's matrices
when batched: block // mnBlocks is the matrix), numbered row-major; blockDim =
min(AI Cores, units); each AI Core takes blocksPerCore contiguous blocks, the first blocksTail one more. K split
(`_ksplit`, docs/design.md "Cube family: the K split"): kSplit k ranges of kLen chosen by estimated time; units =
blocks * kSplit, unitsPerCore / unitsTail as the blocks'; the AIVs' reduction in pass items of redRows rows
(passesPerBlock per block, itemsPerAiv / itemsTail per AIV); the workspace one fp32 partial block per unit.
"""

from __future__ import annotations

import functools
import operator
from fractions import Fraction

from opgen.dsl.keys import attr_key, form_key_count
from opgen.ir.dims import Lit, Sym
from opgen.ir.dtypes import DType
from opgen.kernel import cube as kcube
from opgen.kernel.family import Tiling
from opgen.platforms import cube_sizes
from opgen.tiling.buffers import Buffer, fixed_bytes
from opgen.platforms.cost import (BURST_OVERHEAD_BYTES, CLOCK_HZ, CROSS_WAIT_CYCLES, HBM_BYTES_PER_S, L2_BYTES_PER_S, SYNC_ALL_CYCLES,
                                  VEC_REPEAT_BYTES)
from opgen.tiling.program import TilingProgram, align_up, ceil_div, emax, emin, lit, select

BASE_M, BASE_N, BASE_K, BASE_K_L1 = 128, 256, 64, 256
"""Largest base tile edges (elements): L0 chunks A 128 x 64 (16 KB in fp16 / bf16) and B 64 x 256 (32 KB), two of
each (double buffered: all 64 KB of L0B); fp32 block 128 x 256 (all 128 KB of L0C: the wider block reads A half as
often); L1 panels B 256 x 256 (128 KB) and A 128 x 512 (128 KB, twice BASE_K_L1 where it fits), two of each (all
512 KB of L1; with a bias row, B 128 deep: 384 KB). The A panel's 512 columns make each of A's rows one 1 KB GM
burst (a 64-column chunk copied alone gives 128 B: eight times the bursts, each paying the per-burst overhead of
docs/reference/kernel_cost.md §2)."""
STRATEGY = 1
"""The tiling key's strategy digit of the mixed launch (KERNEL_TYPE_MIX_AIC_1_2: a K split or a vector epilogue)."""
STRATEGY_AIC = 2
"""The tiling key's strategy digit of a cube-only launch (KERNEL_TYPE_AIC_ONLY: no K split and no vector epilogue:
the AIVs would have no work); only a spec none of whose layouts has a vector epilogue takes it."""
EPI_CHUNK_ALIGN = 32
"""Elements a band epilogue's column chunk is a multiple of (a row longer than the UB holds): whole 32-B blocks of
every staged type down to a byte output's, 128 B of fp32."""
ND2NZ_MAX = 65535
"""Largest Nd2Nz source row pitch (uint16 srcDValue, elements): bounds K (A's pitch) and N (B's pitch)."""


CUBE = cube_sizes()
"""On-chip bytes of the AIC (l1, l0a, l0b, l0c, bt: the bias table) that fit every SoC of opgen/platforms' table
(opgen.platforms.cube_sizes); a spec's own tiling takes those of its socs (cube_tiling -> gemm_program's `sizes`)."""


KSPLIT_CANDIDATES = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32)
"""The k-range counts the tiling prices (at most the AI Cores): divisors of 20, 24 and 32 AI Cores and a few between
(docs/design.md "Cube family: the K split")."""
PRO_ROWS = 64
"""Most rows of B an AIV unit of a computed operand takes (opgen.kernel.cube._prologue_part): 64 x 256 columns is
one 16 KB int8 tile, enough instructions per unit to amortise their issue (docs/reference/kernel_cost.md §2)."""
KSPLIT_GRAIN = 64
"""Elements a k range is a multiple of (BASE_K: whole L0 chunks, so only the last range has a K tail)."""


def _ksplit(p, M, K, N, bm, bn, mb, nb, tb, ob, blocks, bt, aic, mixed: bool, bka=BASE_K_L1, one_block=False):
    """(kSplit, kLen) lets of the K split chosen by estimated time (docs/design.md "Cube family: the K split"; the
    constants of opgen.platforms.cost, docs/reference/kernel_cost.md §2), in AI Core cycles, for each candidate c of
    KSPLIT_CANDIDATES not above the AI Cores: kLen = align_up(ceil(K / c), KSPLIT_GRAIN), ranges ks = ceil(K / kLen),
    units = blocks * ks, and
      cube    = ceil(units / aic) * (baseM / 16) * (baseN / 16) * ceil(kLen / 16)      (fractals of the busiest core)
      memory  = first reads of A and B, the output, the workspace writes and BURST_OVERHEAD_BYTES per burst (a
                panel's source row, a partial's or the output's row) at HBM bandwidth; A's and B's re-reads (A once
                per block column, B once per block row) and the partials' read-back at the L2's
      time    = max(cube, memory of the cube phase) + [ks > 1] (SYNC_ALL + CROSS_WAIT + max(the reduction's reads
                and output write, its adds: units * baseM * baseN / (2 aic AIVs x 64 lanes)))
    The first candidate of least time wins (c = 1 on ties: no split without a gain). `mixed` (a vector epilogue)
    adds its fp32 slot write and read-back to c = 1. one_block (a band kernel): K is split only when nBlocks is 1
    (the reduction's pass items are then whole rows)."""
    r = Fraction(int(CLOCK_HZ), int(HBM_BYTES_PER_S))
    r2 = Fraction(int(CLOCK_HZ), int(L2_BYTES_PER_S))
    mn = bt * M * N
    first = bt * (M * K + K * N) * tb + mn * ob       # HBM: each operand's first read, the output
    again = bt * ((nb - 1) * M * K + (mb - 1) * K * N) * tb   # L2: the re-reads
    ov = BURST_OVERHEAD_BYTES
    # every source row of a panel is one burst (A: each block column's panels, B: each block's), an output row one
    bursts = bt * (nb * M * ceil_div(K, bka) + mb * nb * K) + bt * M * nb
    base = p.let("gemmMemCycles", (first + bursts * ov) * r.numerator // r.denominator
                 + again * r2.numerator // r2.denominator + (mn * 8 * r.numerator // r.denominator if mixed else 0),
                 "estimated memory cycles without a K split (HBM first reads, output and bursts, L2 re-reads)")
    best = best_cost = best_len = None
    for c in KSPLIT_CANDIDATES:
        kl = p.let(f"kLen{c}", align_up(ceil_div(K, c), KSPLIT_GRAIN), f"k range of {c} ranges (elements)")
        ks = p.let(f"kRanges{c}", ceil_div(K, kl), f"k ranges of kLen{c}")
        cube = ceil_div(blocks * ks, aic) * (bm // 16) * (bn // 16) * ceil_div(kl, 16)
        if c == 1:
            cost = p.let("kCost1", emax(cube, base), "estimated cycles without a K split")
            best, best_cost, best_len = lit(1), cost, kl
            continue
        ws = blocks * ks * bm * bn * 4
        # more panels (each range starts its own), the partials' rows written and read back
        extra = (bt * nb * M * (ks * ceil_div(kl, bka) - ceil_div(K, bka)) + blocks * ks * bm) * ov
        red = emax((ws + blocks * ks * bm * ov) * r2.numerator // r2.denominator
                   + mn * ob * r.numerator // r.denominator,
                   ceil_div(blocks * ks * bm * bn, aic * 2 * (VEC_REPEAT_BYTES // 4)))
        cost = p.let(f"kCost{c}", emax(cube, base + (ws + extra) * r.numerator // r.denominator)
                     + (SYNC_ALL_CYCLES + CROSS_WAIT_CYCLES) + red,
                     f"estimated cycles of {c} ranges (cube or memory, then the exchange and the reduction)")
        better = p.let(f"kBetter{c}", (c <= aic) & (ks > 1) & (cost < best_cost),
                       f"1 when {c} ranges are estimated faster than the best before")
        best = p.let(f"kBest{c}", select(better, ks, best), "k ranges of the best so far")
        best_len = p.let(f"kBestLen{c}", select(better, kl, best_len), "its kLen")
        if c != KSPLIT_CANDIDATES[-1]:   # the last candidate's is read by none (-Wall -Werror: unused variable)
            best_cost = p.let(f"kBestCost{c}", select(better, cost, best_cost), "its estimated cycles")
    if one_block:
        best = select(nb > 1, lit(1), best)
    return (p.let("kSplit", best, "k ranges (1: no K split)", True),
            p.let("kLen", best_len, "elements of a k range (the last a tail)", True))


def gemm_program(name: str, trans_a: bool = False, trans_b: bool = False, batched: bool = False, epi=None,
                 attrs: tuple = (), mixed: bool = False, forms: tuple = (),
                 direct: bool = False, bias: bool = False, k_align: int = 16, ksplit: bool = True,
                 n32_keys: tuple | None = None, form_keys: int = 1, m32_keys: tuple | None = None,
                 views: tuple = (), sizes: dict | None = None, band: bool = False, pro: tuple | None = None):
    """(TilingProgram, [Buffer]) of the GEMM kernel `name` (module doc): the fields opgen.kernel.cube.FIELDS,
    EPI_FIELDS, KSPLIT_FIELDS, blockDim, fits, tilingKey, workspaceBytes; the buffers are the kernel's L1 / L0 / UB
    allocations. trans_a / trans_b: A stored [K, M] / B stored [N, K] (their row pitches, M / K, are what Nd2Nz
    must fit); batched: a program input `batch` (matrices) multiplies the blocks, and the field mnBlocks (blocks
    per matrix) is written. epi: (UB bytes per element of a pass row, UB bytes per element of the column rows) of
    the AIVs' program (opgen.kernel.cube.EpiProgram: the vector epilogue, or the cast alone): the field epiRows
    (rows per AIV pass, the most that fit the UB beside the K split's scratch row, at most half a block); mixed:
    the layout has a vector epilogue (the workspace holds two fp32 block slots per AI Core when K is not split;
    the tiling key's strategy is always 1, mixed), else strategy 2 (AIC only) unless K is split;
    the program input oBytes is the bytes per element of the output (4 for fp32 and int32, 1 for int8, 2 for f16 /
    bf16: the output's own dtype, not the operands'); attrs: the runtime float attributes the epilogue reads
    (inputs <name>Attr, fields <name>Bits: their IEEE-754 bits); forms: ((trans_a, trans_b), ...) of every kernel
    class when the static attributes select the transposes (the fit then holds for each; trans_a / trans_b
    ignored); direct (with mixed): some presences of the optional inputs have no vector epilogue (GemmLayout.direct,
    the same in every class): a program input `noEpilogue` (1 for such a call) makes that call's key strategy 2, AIC
    only, and its workspace none, unless K is split. The K split (kSplit, kLen: `_ksplit`) sizes the
    workspace to every unit's fp32 partial block when kSplit > 1. bias: a layout adds a bias row on the cube
    (GemmLayout.bias): its L1 staging row and the bias table each hold align_up(baseN, 32) fp32, and the bias table
    must hold them (sizes["bt"], 1 KB on arch 2201: baseN <= 256). k_align: baseK and baseKL1 are multiples of it (C0 of the
    operands: 16 for f16 / bf16, 32 for int8, whose fractals are 16 x 32); ksplit False: kSplit is 1 (an int8
    product's int32 partials are not split; docs/design.md "Cube family: int8 operands"); n32_keys: the attrKeys
    whose class loads an int8 B [K, N] (LoadDataWithTranspose: its L0B rows hold whole 32 x 32 squares, so nPad =
    align_up(nt, 32) must fit the block): baseN is a multiple of 32 for those keys, of 16 for the others (None:
    16 for every key; a tuple holding None: 32 for every key); m32_keys the same for baseM and the attrKeys whose
    class loads an int8 Aᵀ [K, M] (LoadDataWithTranspose into L0A: pieces of 32 rows of m, mPadA). form_keys: the number of form keys when the shape
    forms of the inputs select the class (opgen.kernel.cube.CubeFamily.lower): a program input formKey folded into
    the tiling key, (attrKey * form_keys + formKey) * 100 + dtypeKey * 10 + strategy (opgen.codegen.tilingkey);
    1: attrKey * 100 + .... views: the GM views' stride fields (opgen.kernel.cube.view_fields, elements), each the
    program input view_input(field) (its value the call's class's: a ("by_attr_key", ...) tiling input where the
    classes differ, _view_inputs); a RowStride field of A or B is the Nd2Nz source pitch `fits` bounds
    (docs/design.md "Cube family: operands and output through permuted GM views"). sizes: the AIC's on-chip bytes
    the buffers must fit (opgen.platforms.cube_sizes of the spec's socs; default CUBE, every SoC's). band: the
    epilogue reduces rows over N (opgen.kernel.cube.row_reduces; docs/design.md "Cube family: row reductions in the
    epilogue"): the units are bands of baseM rows x all of N (`blocks`, blocksPerCore / blocksTail and mnBlocks
    count bands), the AIVs' pass rows are whole rows at the UB pitch epiChunk = epiPitch = align_up(N, 16) when one
    row of N fits the UB, else column chunks of epiChunk (a multiple of EPI_CHUNK_ALIGN, as wide as the UB holds:
    docs/design.md "Cube family: rows longer than UB"), the workspace epiRegions band regions of baseM x epiPitch fp32
    per AI Core (2 when a core takes more than one band and two stay within outBytes = batch * M * N * output bytes,
    else 1: docs/design.md "Cube family: the band workspace budget"), and K is split only when N is one block (nBlocks 1: a band is a block). pro: (UB bytes per element of a pass
    row, of the column rows) of a B computed by the AIVs (opgen.kernel.cube.PRO_FIELDS; docs/design.md "Cube family:
    an operand computed on the vector cores"): proRows = max(1, min(PRO_ROWS, K, rows the half UB holds)), units of
    at most proRows rows of one group (proGroup rows: the program input proGroupRows) x baseN over the 2 * blockDim
    AIVs (proPieces per group, proUnitsPerAiv, proUnitsTail), B's region of K * N * tBytes in the workspace after
    the slots (proOff, elements of T), the epilogue's rows from the UB the prologue leaves; the launch is always mixed
    (strategy 1) and K is not split (pass ksplit False)."""
    cube = CUBE if sizes is None else sizes
    p = TilingProgram(name)
    dm, dk, dn = p.input("dimM", "rows of A and of the output"), p.input("dimK", "A columns = B rows"), \
        p.input("dimN", "columns of B and of the output")
    tb = p.input("tBytes", "bytes per element of the operands")
    tbytes = tb   # (tb is reused below for a transpose flag)
    key = p.input("dtypeKey", "1-based row of the dtype table")
    ak = p.input("attrKey", "mixed-radix index of the static attribute values")
    aic = p.input("aicNum", "AI Cores (AIC) of the platform (GetCoreNumAic)")
    if form_keys > 1:   # shape forms select the class: the form key is a digit of the tiling key
        fk = p.input("formKey", f"index of the shape forms the inputs take (0 .. {form_keys - 1}; one class each)")
        kk, kdoc = ak * form_keys + fk, f"(attrKey * {form_keys} + formKey)"
    else:
        kk, kdoc = ak, "attrKey"
    M = p.let("M", dm + 0, "output rows (elements)", True)
    K = p.let("K", dk + 0, "reduction length (elements)", True)
    N = p.let("N", dn + 0, "output columns (elements)", True)
    bm = _block_edge(p, "baseM", M, BASE_M, ak, m32_keys, "rows", "int8 Aᵀ [K, M] fills L0A by 32 x 32 squares")
    bn = _block_edge(p, "baseN", N, BASE_N, ak, n32_keys, "columns",
                     "int8 B [K, N] fills L0B rows by 32 x 32 squares")
    bk = p.let("baseK", emin(BASE_K, align_up(K, k_align)), f"K chunk of L0A / L0B (elements, a multiple of {k_align})",
               True)
    # L1 panels (docs/design.md "Cube family: A panels deeper than B's"): A's panel 2 * BASE_K_L1 deep where L1
    # holds two of them beside two B panels (A's source rows, one GM burst each, twice as long: half A's bursts),
    # B's BASE_K_L1 deep, or half that when only so do two deep A panels fit (B's bursts are one a K row whatever
    # its depth); else both BASE_K_L1. Never deeper than K.
    kal = align_up(K, k_align)
    extra_l1 = (align_up(bn, 32) * 4) if bias else 0   # the bias row staged in L1 beside the panels

    def l1_fits(ka, kb):
        return 2 * (bm * ka + kb * bn) * tb + extra_l1 <= cube["l1"]

    deep_a, full_b, half_b = emin(2 * BASE_K_L1, kal), emin(BASE_K_L1, kal), emin(BASE_K_L1 // 2, kal)
    fit_full = p.let("l1DeepFull", l1_fits(deep_a, full_b), "1 when two deep A panels fit beside two B panels")
    fit_half = p.let("l1DeepHalf", l1_fits(deep_a, half_b),
                     "1 when two deep A panels fit beside two B panels of half the depth")
    bk1 = p.let("baseKL1", select(fit_full, full_b, select(fit_half, half_b, full_b)),
                f"K depth of a B panel in L1 (elements, a multiple of {k_align}; baseK chunks of it go to L0)", True)
    bka = p.let("baseKL1A", select(fit_full | fit_half, deep_a, full_b),
                "K depth of an A panel in L1 (elements; its B panels of baseKL1 in turn, the last a tail)", True)
    mb = p.let("mBlocks", ceil_div(M, bm), "blocks along M (the last a tail)")
    nb = p.let("nBlocks", ceil_div(N, bn), "blocks along N (the last a tail)", True)
    per = mb if band else mb * nb   # a band kernel's units are bands: baseM rows x all of N
    if batched:
        bt = p.input("batch", "matrices (the product of the batch dims)")
        mn = p.let("mnBlocks", per, "bands (baseM rows x all of N) per matrix" if band else "output blocks per matrix",
                   True)
        blocks = p.let("blocks", bt * mn, "bands of every matrix" if band else "output blocks of every matrix")
    else:
        bt = lit(1)
        blocks = p.let("blocks", per, "bands (baseM rows x all of N)" if band else "output blocks")
    ob = p.input("oBytes", "bytes per element of the output")
    if ksplit:
        ksp, _klen = _ksplit(p, M, K, N, bm, bn, mb, nb, tb, ob, blocks, bt, aic, mixed, bka, one_block=band)
    else:
        ksp = p.let("kSplit", lit(1), "k ranges (1: no K split)", True)
        p.let("kLen", K + 0, "elements of a k range (the whole K)", True)
    units = p.let("units", blocks * ksp, "units of work: (output block, k range)")
    bd = p.let("blockDim", emax(1, emin(aic, units)), "AI Cores launched", True)
    p.let("blocksPerCore", blocks // bd, "blocks of every AI Core (no K split)", True)
    p.let("blocksTail", blocks % bd, "the first blocksTail AI Cores take one more block", True)
    p.let("unitsPerCore", units // bd, "units of every AI Core (K split)", True)
    p.let("unitsTail", units % bd, "the first unitsTail AI Cores take one more unit", True)
    plan = [Buffer("l1A", "TQue<A1>", 2, False, bm * bka, tb, "A panel, NZ (double buffered)"),
            Buffer("l1B", "TQue<B1>", 2, False, bk1 * bn, tb, "B panel, NZ (double buffered)"),
            Buffer("l0A", "TQue<A2>", 2, False, bm * bk, tb, "A chunk, ZZ (double buffered)"),
            Buffer("l0B", "TQue<B2>", 2, False, bk * bn, tb, "B chunk, ZN (double buffered)"),
            Buffer("l0C", "TBuf<CO1>", 1, False, bm * bn, 4, "fp32 block, NZ")]
    l1 = p.let("l1Bytes", fixed_bytes(plan[:2]), "L1 bytes")
    l0a = p.let("l0aBytes", plan[2].bytes(), "L0A bytes")
    l0b = p.let("l0bBytes", plan[3].bytes(), "L0B bytes")
    l0c = p.let("l0cBytes", plan[4].bytes(), "L0C bytes")
    fits = (l1 <= cube["l1"]) & (l0a <= cube["l0a"]) & (l0b <= cube["l0b"]) & (l0c <= cube["l0c"])
    if bias:   # the bias row in L1 beside the panels, and in the bias table
        bplan = [Buffer("l1Bias", "TBuf<C1>", 1, False, align_up(bn, 32), 4, "bias row (staged in its type)"),
                 Buffer("biasTable", "TBuf<C2>", 1, False, align_up(bn, 32), 4, "bias row, fp32")]
        btb = p.let("btBytes", bplan[1].bytes(), "bias-table bytes")
        fits = (l1 + bplan[0].bytes() <= cube["l1"]) & (l0a <= cube["l0a"]) & (l0b <= cube["l0b"]) \
            & (l0c <= cube["l0c"]) & (btb <= cube["bt"])
    strides = {f: p.let(f, p.input(view_input(f), f"{f} of the call's class (elements; by attrKey)") + 0,
                        f"{f} of the class's GM view (elements)", True) for f in views}
    for ta, tb in forms or ((trans_a, trans_b),):   # the Nd2Nz source row pitch of each class's operands
        pa = strides.get("aRowStride", M if ta else K)   # a view's pitch: its own field, the same for every class
        pb = strides.get("bRowStride", K if tb else N)
        fits = fits & (pa <= ND2NZ_MAX) & (pb <= ND2NZ_MAX)
    rb, cb = epi
    rb = rb + 4   # the K split's scratch row (one fp32 partial)
    ub = p.input("ubBytes", "UB bytes of an AIV (GetCoreMemSize UB)")
    half = p.let("halfRows", (bm + 1) // 2, "rows of a block an AIV takes at most")
    base_n = bn   # baseN (a band kernel's pass pitch below is epiChunk)
    if band:   # whole rows of N in UB when one fits, else a row in column chunks: epiChunk columns of a multiple
        # of EPI_CHUNK_ALIGN, as many as one pass row and the column rows of that width hold
        # (docs/design.md "Cube family: rows longer than UB")
        span = p.let("epiPitch", align_up(N, 16), "row pitch of a band's region in the workspace: all of N "
                     "(elements)", True)
        bn = p.let("epiChunk", select(span * (rb + cb) <= ub, span,
                                      ub // (rb + cb) // EPI_CHUNK_ALIGN * EPI_CHUNK_ALIGN),
                   "UB pitch of a pass row: all of N (epiPitch) when a row fits, else the columns of a chunk "
                   "(elements)", True)
    ub_pro = lit(0)
    if pro is not None:   # the computed B's passes (rows of baseN): at most half the UB, the epilogue's from the rest
        prb, pcb = pro
        pr = p.let("proRows", emax(1, emin(emin(PRO_ROWS, K), (ub // 2 - base_n * pcb) // (base_n * prb))),
                   "rows of B per AIV unit of the computed operand (elements of baseN each)", True)
        ub_pro = p.let("ubProBytes", pr * base_n * prb + base_n * pcb, "UB bytes of the computed operand's passes")
    room = p.let("epiRoom", (ub - ub_pro - bn * cb) // (bn * rb), "pass rows the UB holds beside the column rows")
    er = p.let("epiRows", emax(1, emin(half, room)), "rows of an AIV pass (elements of baseN each)" if not band else
               "rows of an AIV pass (elements of epiPitch each)", True)
    aivs = bd * 2
    rr = p.let("redRows", emax(1, emin(er, ceil_div(blocks * bm, aivs))),
               "rows of a reduction pass (K split: at most epiRows, the blocks' rows shared by every AIV)", True)
    ppb = p.let("passesPerBlock", ceil_div(bm, rr), "reduction passes per block (K split)", True)
    items = p.let("redItems", blocks * ppb, "reduction pass items (K split)")
    p.let("itemsPerAiv", items // aivs, "pass items of every AIV (K split)", True)
    p.let("itemsTail", items % aivs, "the first itemsTail AIVs take one more item", True)
    plan += [Buffer("epiRows", "TBuf<VECCALC>", 1, False, er * bn, rb,
                    "the pass's fp32 / T / output rows and the K split's scratch row"),
             Buffer("epiCols", "TBuf<VECCALC>", 1, False, bn, cb, "the column rows (bias)")]
    ubb = p.let("ubEpiBytes", fixed_bytes(plan[5:]), "UB bytes of the AIVs' passes")
    if bias:
        plan += bplan
    if pro is not None:
        grp = p.let("proGroup", p.input("proGroupRows", "rows of B per group of its computation (K per channel)") + 0,
                    "rows of B per group (K: one group)", True)
        pcs = p.let("proPieces", ceil_div(grp, pr), "units of a group per block column", True)
        pu = p.let("proUnits", ceil_div(K, grp) * pcs * nb,
                   "units of the computed B (at most proRows rows of one group x baseN columns)")
        p.let("proUnitsPerAiv", pu // aivs, "units of the computed B of every AIV", True)
        p.let("proUnitsTail", pu % aivs, "the first proUnitsTail AIVs take one more unit", True)
    p.let("fits", fits & (ubb + ub_pro <= ub),
          "1 when the tiles fit L1 / L0, the operands' row pitches fit Nd2Nz and the AIVs' pass fits the UB",
          True)
    if mixed and direct and pro is None:   # the AIVs have work with a K split or when this call's presences take
        # the epilogue (a computed B gives them work in every call: strategy 1 below)
        ne = p.input("noEpilogue", "1 when the call's optional inputs are present as a layout without a vector "
                     "epilogue (Fixpipe's cast alone)")
        p.let("tilingKey", kk * 100 + key * 10 + select((ksp > 1) | (ne < 1), STRATEGY, STRATEGY_AIC),
              f"{kdoc} * 100 + dtypeKey * 10 + strategy (1: mixed, K split or the vector epilogue; 2: AIC only)", True)
    elif mixed or pro is not None:   # a computed B: the AIVs always have work
        p.let("tilingKey", kk * 100 + key * 10 + STRATEGY, f"{kdoc} * 100 + dtypeKey * 10 + strategy", True)
    else:   # the AIVs have work only when K is split: a cube-only launch otherwise
        p.let("tilingKey", kk * 100 + key * 10 + select(ksp > 1, STRATEGY, STRATEGY_AIC),
              f"{kdoc} * 100 + dtypeKey * 10 + strategy (1: mixed, K split; 2: AIC only)", True)
    if band and mixed:   # the band regions (docs/design.md "Cube family: the band workspace budget"): two per AI
        # Core only when a core takes more than one band and two stay within the output's bytes, else one
        out_bytes = p.let("outBytes", bt * M * N * ob, "bytes of the output (every matrix)")
        two = bd * 2 * bm * span * 4
        regions = p.let("epiRegions", select((blocks > bd) & (two <= out_bytes), lit(2), lit(1)),
                        "band regions per AI Core in the workspace (2: the AIC fills one while the AIVs read the "
                        "other; 1 when a core takes one band or two would exceed the output's bytes)", True)
        slots = bd * regions * bm * span * 4
    else:
        slots = bd * 2 * bm * bn * 4 if mixed else lit(0)   # two fp32 block slots per AI Core
    if mixed and direct and pro is None:
        slots = select(ne < 1, slots, lit(0))
    if pro is not None:   # B's region after the slots (32-B aligned: the slots are whole fp32 blocks)
        slots = p.let("slotBytes", slots + 0, "bytes of the epilogue's slots (before B's region)")
        p.let("proOff", slots // tbytes, "element offset of the computed B in the workspace (T)", True)
        slots = slots + align_up(K * N * tbytes, 32)
    p.let("workspaceBytes", select(ksp > 1, units * bm * bn * 4, slots),
          "K split: one fp32 partial block per unit; else " + ("two fp32 block slots per AI Core when the call "
                                                             "takes the vector epilogue, none without it"
                                                             if mixed and direct and pro is None else
                                                             "epiRegions fp32 band regions per AI Core" if band and mixed
                                                             else "two fp32 block slots per AI Core" if mixed else
                                                             "none") + " (bytes)", True)
    for a in attrs:
        v = p.input(f"{a}Attr", f"IEEE-754 bits of the attribute {a}")
        p.let(f"{a}Bits", v + 0, f"IEEE-754 bits of {a} (float)", True)
    return p, plan


def _block_edge(p, name: str, extent, base: int, ak, keys32, what: str, why: str):
    """The tiling field `name` (baseM or baseN, elements): min(base, align_up(extent, 16)), or a multiple of 32
    (whole int8 squares) for the attrKeys `keys32` (() none, a tuple holding None every key: no attrKey test; else
    a select on attrKey); `what` names the edge (rows / columns), `why` the loads that need the 32."""
    e16, e32 = emin(base, align_up(extent, 16)), emin(base, align_up(extent, 32))
    if not keys32:
        return p.let(name, e16, f"{what} of a block (elements, a multiple of 16)", True)
    if None in keys32:
        return p.let(name, e32, f"{what} of a block (elements, a multiple of 32: whole int8 squares)", True)
    k32 = functools.reduce(operator.or_, (ak.eq(k) for k in keys32))
    return p.let(name, select(k32, e32, e16), f"{what} of a block (elements, a multiple of 16; of 32 for the "
                 f"attrKeys {', '.join(map(str, keys32))}, whose {why})", True)


def _pro_groups(spec, lowered):
    """How the TilingFunc reads the rows per group of a computed B (GemmLayout.pro_group): K for a class computing it
    per channel, the group's size (a literal or a dim) else; ("by_attr_key", ...) where the classes of the static
    attributes differ (per channel for antiquant_group_size 0, groups of 64 rows for 64)."""
    names = [a.name for a in spec.static_attrs]
    by_ak: dict = {}
    for key, x in (lowered.extra.get("layouts") or {}).items():
        by_ak.setdefault(attr_key(spec, dict(zip(names, key.static))), x)
    by_ak = by_ak or {attr_key(spec, {}): lowered.layout}

    def rows(x):
        g = x.pro_group[0] if x.pro_group else x.dims[1]
        return Lit(int(g)) if g.isdigit() else Sym(g)
    picks = tuple((ak, rows(x)) for ak, x in sorted(by_ak.items()))
    return picks[0][1] if len({str(e) for _ak, e in picks}) == 1 else ("by_attr_key", picks)


def direct_presences(lays) -> tuple:
    """The presences of the optional inputs (GemmLayout.direct: one bool per optional input) under which no kernel
    class of `lays` has a vector epilogue, when some class has one (a mixed layout): those calls launch AIC only
    unless K is split (gemm_program's `direct`). () when every layout is mixed under every presence or none is."""
    if not any(x.mixed for x in lays):
        return ()
    common = None
    for x in lays:
        mine = set(x.direct) if x.presence else (set() if x.mixed else None)   # None: no epilogue under any
        if mine is not None:
            common = mine if common is None else common & mine
    return tuple(sorted(common or ()))


def _lead_product(dims: tuple, first=None):
    """The product (a dim expression) of `first` (when given) and the layout's leading dims `dims` (names, each read
    by opgen.kernel.cube.lead_dim); `dims` must not be empty without `first`."""
    factors = ([first] if first is not None else []) + [kcube.lead_dim(d) for d in dims]
    return functools.reduce(operator.mul, factors)


def _n32_keys(spec, lowered, pick=lambda x: x.acc == "i32" and not x.trans_b or bool(x.pro)) -> tuple:
    """The attrKeys (sorted) whose class loads an int8 B [K, N] (GemmLayout acc "i32", not trans_b: baseN a multiple
    of 32), or whose layout satisfies `pick` (_m32_keys); (None,) when every key's does (one rule, no attrKey
    test); () when none does."""
    names = [a.name for a in spec.static_attrs]
    lays = lowered.extra.get("layouts") or {}
    keys = {attr_key(spec, dict(zip(names, key.static))): pick(x) for key, x in lays.items()}
    if not keys:   # a lowering without its per-key layouts: the one layout decides
        keys = {0: pick(lowered.layout)}
    n32 = tuple(sorted(k for k, v in keys.items() if v))
    return () if not n32 else (None,) if len(n32) == len(keys) else n32


def _m32_keys(spec, lowered) -> tuple:
    """_n32_keys for baseM: the attrKeys whose class loads an int8 Aᵀ [K, M] (acc "i32", trans_a)."""
    return _n32_keys(spec, lowered, lambda x: x.acc == "i32" and x.trans_a)


def _dim(name: str):
    """The dim expression of one of a layout's dim names (M / K / N, a view stride's factor): a dim's name, or the
    digits of a literal extent (a matrix-vector product's [K, 1])."""
    return Lit(int(name)) if name.isdigit() else Sym(name)


def _dims_product(names: tuple):
    """The dim expression of a GM view's stride (opgen.kernel.cube GemmLayout.views: the names of the dims it is
    the product of; () is 1)."""
    return functools.reduce(operator.mul, [_dim(d) for d in names] or [Lit(1)])


def view_input(field: str) -> str:
    """The tiling-program input a GM-view stride field is read from: view<Field> (aRowStride: viewARowStride)."""
    return "view" + field[0].upper() + field[1:]


def _view_inputs(spec, lowered, lays) -> dict:
    """{field: how the TilingFunc reads it} of every GM-view stride field of the spec's classes
    (opgen.kernel.cube.view_fields): a dim expression when every attrKey's class has the same, else ("by_attr_key",
    ((attrKey, dim expression), ...)) (opgen.tiling.emit: the call's attrKey picks it). A class's value is its
    view's stride, or the contiguous matrices' value where it has no such view (A's row pitch K, or M transposed,
    and batch stride M * K; B's N or K and K * N; the output's N and M * N). {} when no class has a view. Raises
    ValueError when two classes of one attrKey (shape forms) differ in their views."""
    fields = list(dict.fromkeys(f for x in lays for f in kcube.view_fields(x)))
    if not fields:
        return {}
    names = [a.name for a in spec.static_attrs]
    by_ak: dict = {}
    for key, x in (lowered.extra.get("layouts") or {}).items():
        ak = attr_key(spec, dict(zip(names, key.static)))
        if by_ak.setdefault(ak, x).views != x.views:
            raise ValueError(f"{spec.name}: the classes of attrKey {ak} read through different GM views")
    by_ak = by_ak or {attr_key(spec, {}): lowered.layout}
    out = {}
    for f in fields:
        role, what = f[0], f[1:]
        picks = []
        for ak, x in sorted(by_ak.items()):
            m, k, n = x.dims
            natural = {"a": ((m if x.trans_a else k,), (m, k)), "b": ((k if x.trans_b else n,), (k, n)),
                       "c": ((n,), (m, n))}[role]
            v = dict(x.views).get(role, natural)
            picks.append((ak, _dims_product(v[0] if what == "RowStride" else v[1])))
        out[f] = picks[0][1] if len({str(e) for _ak, e in picks}) == 1 else ("by_attr_key", tuple(picks))
    return out


def cube_tiling(spec, lowered, counts) -> Tiling:
    """The Tiling of a cube-family lowering: gemm_program, its inputs read from the layout's dims (the A input's
    shape), the dtype variable's size (2 for a fixed f16 / bf16) and key, the platform's cores; the L1 / L0 plan."""
    lay = lowered.layout
    lays = kcube.CubeFamily().layouts(lowered)   # one per kernel class (transposes the static attributes select)
    m, k, n = lay.dims
    epi = (counts.epi_row_bytes, counts.epi_col_bytes)
    attrs = tuple(dict.fromkeys(a for x in lays for a in kcube.epi_attrs(x)))
    forms = tuple(dict.fromkeys((x.trans_a, x.trans_b) for x in lays))
    direct = direct_presences(lays)
    nforms = form_key_count(spec) if lowered.extra.get("form_key") else 1   # shape forms selecting the class
    views = _view_inputs(spec, lowered, lays)   # the GM views' stride fields, by attrKey
    groups = _pro_groups(spec, lowered) if lay.pro else None
    prog, plan = gemm_program(spec.name, lay.trans_a, lay.trans_b, bool(lay.batch), epi, attrs,
                              any(x.mixed for x in lays), forms if len(forms) > 1 else (),
                              bool(direct), any(x.bias for x in lays), 32 if lay.acc == "i32" else 16,
                              lay.acc == "f32" and not lay.pro, _n32_keys(spec, lowered), nforms,
                              _m32_keys(spec, lowered),
                              tuple(views), cube_sizes(spec.socs), any(kcube.row_reduces(x) for x in lays),
                              (counts.pro_row_bytes, counts.pro_col_bytes) if lay.pro else None)
    dim_m = _lead_product(lay.fold, _dim(m))   # the folded batch dims into M
    inputs = {"dimM": dim_m, "dimK": _dim(k), "dimN": _dim(n),
              "tBytes": Lit(1 if lay.dtype == "i8" else 2) if lay.fixed else ("bytes", lay.dtype),
              # the output's own bytes (an int8 output of fp16 operands: 1; an fp16 output of int8 ones: 2)
              "oBytes": ("bytes", lay.out_dtype) if lay.out_dtype in spec.dtype_vars_ else
              Lit(DType(lay.out_dtype).itemsize),
              "dtypeKey": ("dtype_key",), "attrKey": ("attr_key",), "aicNum": ("platform", "aicNum"),
              "ubBytes": ("platform", "ubBytes")}
    inputs.update({f"{a}Attr": ("attr_bits", a) for a in attrs})
    inputs.update({view_input(f): how for f, how in views.items()})
    if direct and not lay.pro:   # (a computed B launches mixed in every call)
        inputs["noEpilogue"] = ("presence", direct)
    if groups is not None:
        inputs["proGroupRows"] = groups
    if nforms > 1:
        inputs["formKey"] = ("form_key",)
    if lay.batch:
        inputs["batch"] = _lead_product(lay.batch)
    doc = (f"Tiling of {spec.name}: cube family, one mixed launch (blockDim AI Cores, 1 AIC : 2 AIV); output blocks "
           f"of baseM x baseN over the AI Cores, K in chunks of baseK, fp32 accumulation in L0C, Fixpipe's cast to "
           f"the output; or, when the cost model chooses a K split (kSplit > 1), units (block, k range) over the "
           f"AI Cores, fp32 partial blocks to the workspace, summed in k order by the AIVs after a SyncAll.")
    if any(x.mixed for x in lays):
        doc = (f"Tiling of {spec.name}: cube family, one mixed launch (blockDim AI Cores, 1 AIC : 2 AIV); output "
               f"blocks of baseM x baseN over the AI Cores, K in chunks of baseK, fp32 accumulation in L0C, each "
               f"block to one of two fp32 workspace slots; each AIV finishes half of a block's rows in passes of "
               f"epiRows rows; or a K split (kSplit > 1) as above, the AIVs' sum then the epilogue.")
    return Tiling(prog, inputs, {STRATEGY: plan}, doc, "no L1/L0 tiling of {op} holds this shape")


kcube.CubeFamily.install(tile=cube_tiling)
