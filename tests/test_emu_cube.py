"""Cube side and mixed kernels of the AscendC emulation: GM->L1 NZ (Nd2Nz), LoadData to L0A/L0B,
Mmad into L0C, Fixpipe to GM, L1/L0 capacities, 1 AIC : 2 AIV launches with cross-core flags.

Drives tests/cpp/emu_cube_mm.cpp (matmul through the low-level cube path; built with ASan + UBSan) and
tests/cpp/emu_cube_scen.cpp (layouts, faults, mixed kernels; built plain and with ThreadSanitizer, and the mix
scenarios run under both), compiled against opgen/emu/include with g++ like tests/test_emu.py.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from gxx import compile_all

ROOT = Path(__file__).resolve().parents[1]
INC = ROOT / "opgen" / "emu" / "include"
CPP = Path(__file__).resolve().parent / "cpp"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")]

BASE = ["g++", "-std=c++17", "-O1", "-pthread", "-Wall", "-Werror", "-Wno-unused-but-set-variable", f"-I{INC}"]
ASAN = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
TSAN = ["-fsanitize=thread"]

BF16 = ml_dtypes.bfloat16
NPT = {"f16": np.float16, "bf16": BF16, "f32": np.float32, "s8": np.int8, "s32": np.int32}


@pytest.fixture(scope="module")
def bins(run_shared, emu_instances, emu_pch):
    """The cube drivers; the -O1 and the ASan ones link the emulation's shared specializations of their flags
    (tests/conftest.py emu_instances; ThreadSanitizer has no shared object: its build compiles its own), the -O1 one
    reads the emulation header precompiled (emu_pch); built once per run (run_shared), whichever worker runs these
    tests."""
    def fill(d):
        quick = emu_instances("quick")
        # -O0 for the sanitizer builds: they compile 2-3x faster and still run every case in well under a second.
        jobs = {
            "mm": BASE + ["-O0"] + ASAN + [str(CPP / "emu_cube_mm.cpp"), *emu_instances("asan"), "-o", str(d / "mm")],
            "scen": BASE + emu_pch(BASE[1:] + quick[:1]) + [str(CPP / "emu_cube_scen.cpp"), *quick,
                                                            "-o", str(d / "scen")],
            "scen_tsan": BASE + ["-O0"] + TSAN + [str(CPP / "emu_cube_scen.cpp"), "-o", str(d / "scen_tsan")],
        }
        compile_all(jobs)
    d = run_shared("emu-cube-bins", fill)
    return {k: d / k for k in ("mm", "scen", "scen_tsan")}


def parse(stdout: str) -> dict:
    out = {"ok": None, "faults": [], "gm": {}, "val": {}, "lines": []}
    for line in stdout.splitlines():
        head, _, rest = line.partition(" ")
        if head == "ok":
            out["ok"] = rest == "1"
        elif head == "fault":
            out["faults"].append(rest)
        elif head == "gm":
            name, rd, wr = rest.split()
            out["gm"][name] = (int(rd), int(wr))
        elif head == "val":
            tag, *vals = rest.split()
            out["val"][tag] = vals
            out["lines"].append((tag, vals))
    return out


def scen(bins, name, *args, build="scen"):
    r = subprocess.run([str(bins[build]), name, *map(str, args)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    if build == "scen_tsan":
        assert "ThreadSanitizer" not in r.stderr, r.stderr[-4000:]
    return parse(r.stdout)


# ------------------------------------------------------------------ matmul through GM -> L1 -> L0 -> L0C -> GM


def run_mm(bins, tmp_path, dt, ot, m, n, k, ta, tb, kt, nt, bd, mm, a=None, b=None, seed=0):
    rng = np.random.default_rng(seed)
    if a is None:
        a = rng.normal(0, 1, (m, k)).astype(NPT[dt])
    if b is None:
        b = rng.normal(0, 1, (k, n)).astype(NPT[dt])
    a_st = a.T.copy() if ta in ("T", "W") else a
    b_st = b if tb in ("N", "X", "W") else b.T.copy()
    fin, fout = tmp_path / f"in_{ot}.bin", tmp_path / f"out_{ot}.bin"
    fin.write_bytes(np.ascontiguousarray(a_st).tobytes() + np.ascontiguousarray(b_st).tobytes())
    args = [dt, ot, m, n, k, ta, tb, kt, nt, bd, mm, fin, fout]
    r = subprocess.run([str(bins["mm"]), *map(str, args)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    rep = parse(r.stdout)
    c = np.frombuffer(fout.read_bytes(), NPT[ot]).reshape(m, n)
    return rep, a, b, c


def fp32_bound(a, b):
    """|C - A@B| bound for fp32 accumulation of exact products in C0 = 16 wide chunks (one rounding per chunk)."""
    aa, bb = np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64))
    chunks = -(-a.shape[1] // 16)
    return (chunks + 1) * 2.0 ** -24 * (aa @ bb) + 1e-30


# (dt, m, n, k, ta, tb, kt, nt, blockDim, mmadM): the NSA shapes — M = G query heads, N/K = selected keys,
# D = 192 / 128 — with m/n/k tails, k accumulation over several Mmads, and 1-2 AIC cores.
MM_CASES = {
    "qk_d192_f16": ("f16", 16, 48, 192, "N", "T", 192, 48, 1, 16),       # S = Q·Kᵀ, one k step
    "qk_d192_bf16_ksteps": ("bf16", 16, 48, 192, "N", "T", 64, 48, 1, 16),  # 3 accumulating Mmads
    "qk_2048_f16": ("f16", 32, 2048, 128, "N", "T", 64, 256, 2, 32),     # N = 2K keys, L0B full (64 KB)
    "qk_2048_bf16": ("bf16", 32, 2048, 128, "N", "T", 128, 256, 2, 32),
    "ds_k_tails_f16": ("f16", 20, 40, 200, "N", "N", 64, 32, 2, 20),     # dS·K: B [k][n], LoadData transpose
    "pt_do_tails_bf16": ("bf16", 20, 40, 200, "T", "N", 64, 32, 2, 20),  # Pᵀ·dO: A stored transposed
    "dv_small_k_bf16": ("bf16", 64, 128, 4, "T", "N", 16, 128, 1, 64),   # dV block: m=64, n=Dv, k=G=4 < 16
    "m1_padded_f16": ("f16", 1, 48, 192, "N", "T", 64, 48, 1, 2),        # G == 1: Mmad m = 2 (NSA basic template)
    "m1_padded_bf16": ("bf16", 1, 2048, 128, "N", "T", 128, 256, 2, 2),
    "m1_gemv_nd_f16": ("f16", 1, 48, 192, "V", "T", 64, 48, 1, 1),       # m = 1 GEMV with A as an ND vector
}


@pytest.mark.parametrize("case", sorted(MM_CASES))
def test_matmul_vs_float64(bins, tmp_path, case):
    dt, m, n, k, ta, tb, kt, nt, bd, mm = MM_CASES[case]
    rep, a, b, c = run_mm(bins, tmp_path, dt, "f32", m, n, k, ta, tb, kt, nt, bd, mm)
    assert rep["ok"], rep["faults"]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = np.abs(c.astype(np.float64) - ref)
    assert np.all(err <= fp32_bound(a, b)), f"max err {err.max()}"
    # every element of A is read once per n tile, B exactly once, C written once
    tiles = -(-n // nt)
    assert rep["gm"]["a"] == (tiles * m * k * 2, 0)
    assert rep["gm"]["b"] == (k * n * 2, 0)
    assert rep["gm"]["c"] == (0, m * n * 4)


@pytest.mark.parametrize("dt,ot", [("f16", "f16"), ("f16", "bf16"), ("bf16", "bf16")])
def test_fixpipe_rounds_fp32_to_nearest_even(bins, tmp_path, dt, ot):
    """Fixpipe F322F16 / F322BF16 output equals the fp32 result rounded to nearest even, bit for bit."""
    args = (dt, 32, 2048, 128, "N", "T", 64, 256, 2, 32)
    rep32, a, b, c32 = run_mm(bins, tmp_path, args[0], "f32", *args[1:])
    rep16, _, _, c16 = run_mm(bins, tmp_path, args[0], ot, *args[1:], a=a, b=b)
    assert rep32["ok"] and rep16["ok"], rep16["faults"]
    np.testing.assert_array_equal(c16.view(np.uint16), c32.astype(NPT[ot]).view(np.uint16))
    assert rep16["gm"]["c"] == (0, 32 * 2048 * 2)


def test_matmul_exact_on_integers(bins, tmp_path):
    rng = np.random.default_rng(7)
    m, n, k = 20, 40, 200
    a = rng.integers(-8, 9, (m, k)).astype(np.float16)
    b = rng.integers(-8, 9, (k, n)).astype(np.float16)
    rep, _, _, c = run_mm(bins, tmp_path, "f16", "f32", m, n, k, "N", "N", 64, 32, 2, m, a=a, b=b)
    assert rep["ok"], rep["faults"]
    np.testing.assert_array_equal(c.astype(np.float64), a.astype(np.float64) @ b.astype(np.float64))


# (m, n, k, kt, nt, blockDim, mmadM): int8 x int8 -> int32 with k tails (k not a multiple of 32, a last k step
# shorter than the others), n tiles over two AICs, m padded to 16 (a tail of one row run as two)
INT8_CASES = {"k_tail": (20, 40, 200, 64, 32, 2, 20), "one_step": (16, 48, 96, 96, 48, 1, 16),
              "m1_padded": (1, 33, 77, 32, 16, 2, 2), "big_k": (5, 17, 4000, 512, 16, 1, 5)}


@pytest.mark.parametrize("case", sorted(INT8_CASES))
def test_int8_matmul_accumulates_exactly_in_int32(bins, tmp_path, case):
    """int8 A [m, k] x B stored [n, k] (plain LoadData: Bᵀ's NZ is B's ZN): fractals 16 x 32 (C0 = 32 int8), k
    padded to 32, Mmad into an int32 L0C, Fixpipe NoQuant to int32 GM -- equal to NumPy's int64 matmul, element for
    element (docs/reference/ascendc.md §1.10; |A @ B| < 2^31 here)."""
    m, n, k, kt, nt, bd, mm = INT8_CASES[case]
    rng = np.random.default_rng(11)
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    b[0, 0], a[0, 0] = -128, -128   # the extreme product (2^14)
    rep, _, _, c = run_mm(bins, tmp_path, "s8", "s32", m, n, k, "N", "T", kt, nt, bd, mm, a=a, b=b)
    assert rep["ok"], rep["faults"]
    np.testing.assert_array_equal(c.astype(np.int64), a.astype(np.int64) @ b.astype(np.int64))
    assert rep["gm"]["b"] == (k * n, 0) and rep["gm"]["c"] == (0, m * n * 4)


# (m, n, k, kt, nt, blockDim, mmadM) for an int8 A stored [k, m]: m tails (m not a multiple of 32), several 32-row
# pieces of m, k tails
INT8_AT_CASES = {"m_tail": (37, 40, 200, 64, 32, 2, 37), "one_piece": (20, 16, 96, 96, 16, 1, 20),
                 "m_pieces_k_tail": (70, 33, 77, 64, 33, 1, 70)}


@pytest.mark.parametrize("ta, tb, case, seed", [("N", "W", c, 12) for c in sorted(INT8_CASES)]
                         + [("W", "T", c, 14) for c in sorted(INT8_AT_CASES)])
def test_int8_operand_stored_transposed_through_load_data_with_transpose(bins, tmp_path, ta, tb, case, seed):
    """An int8 operand whose L0 layout is the transpose of its L1 NZ, moved by LoadDataWithTranspose (32 x 32 int8
    squares, each transposed into two 16 x 32 fractals), against NumPy's int64 matmul, element for element, with
    m, n and k tails:
    - B stored [k, n] (tb W, A [m, k]): B's L1 NZ of ceil32(kt) rows per 32-column piece into L0B ZN (asc-devkit
      load_data_l12l0's int8 B case: repeats along n, srcStride ceil32(k) / 32 squares, dstGap 1, dstFracGap 0),
      Mmad n = ceil32(nt);
    - A stored [k, m] (ta W, B stored [n, k]): each 32-column piece of m's K1 squares into L0A by one load with
      dstGap 0 and dstFracGap K1 - 1 (the Matmul API's int8 transposed A: square k1's two fractals land on ZZ
      fractals (2p, k1) and (2p + 1, k1)); the last piece's rows past m are Nd2Nz's zero fill, never stored."""
    m, n, k, kt, nt, bd, mm = (INT8_CASES if ta == "N" else INT8_AT_CASES)[case]
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    a[-1, -1], b[-1, -1] = -128, -128   # the extreme product (2^14)
    rep, _, _, c = run_mm(bins, tmp_path, "s8", "s32", m, n, k, ta, tb, kt, nt, bd, mm, a=a, b=b)
    assert rep["ok"], rep["faults"]
    np.testing.assert_array_equal(c.astype(np.int64), a.astype(np.int64) @ b.astype(np.int64))


def test_int8_b_stored_k_by_n_faults_through_loaddata_iftranspose(bins, tmp_path):
    """LoadData's ifTranspose moves 2-byte 16 x 16 fractals only (an int8 B [k, n] takes LoadDataWithTranspose,
    above): the emulation faults rather than transposing 1-byte fractals it has no definition for."""
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (16, 64)).astype(np.int8)
    b = rng.integers(-128, 128, (64, 16)).astype(np.int8)
    fin, fout = tmp_path / "in.bin", tmp_path / "out.bin"
    fin.write_bytes(a.tobytes() + b.tobytes())
    r = subprocess.run([str(bins["mm"]), "s8", "s32", "16", "16", "64", "N", "N", "64", "16", "1", "16", str(fin),
                        str(fout)], capture_output=True, text=True, timeout=60)
    assert "ifTranspose needs a 2-byte type" in r.stdout + r.stderr


def test_gemv_mode_reads_l0a_as_a_vector(bins, tmp_path):
    """Mmad m = 1 is GEMV: L0A is read as a plain vector, so an A loaded in ZZ fractals (row 0 of each fractal,
    rows 1-15 never written) feeds unwritten data and Fixpipe faults; padding m to 2 or an ND vector works
    (MM_CASES m1_padded_*, m1_gemv_nd_f16)."""
    rep, *_ = run_mm(bins, tmp_path, "f16", "f32", 1, 48, 192, "N", "T", 64, 48, 1, 1)
    assert rep["ok"] is False
    assert "Fixpipe: reads unwritten (poisoned) L0C element (row 0, column 0)" in rep["faults"][0]


def test_wrong_layout_gives_wrong_numbers(bins, tmp_path):
    """A B stored [k][n] loaded as if it were already ZN (no per-fractal transpose) runs without a fault but
    computes with the wrong layout: the NZ/ZN layouts are real. With a square 2x2 fractal grid the NZ fractal
    (k1, n1) lands on ZN position (n1, k1) with its inside read column-major, i.e. the cube multiplies by Bᵀ."""
    rep, a, b, c = run_mm(bins, tmp_path, "f16", "f32", 16, 32, 32, "N", "X", 32, 32, 1, 16)
    assert rep["ok"], rep["faults"]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(c - ref).max() > 0.5
    assert np.all(np.abs(c - a.astype(np.float64) @ b.astype(np.float64).T) <= fp32_bound(a, b))


# ------------------------------------------------------------------ layouts, bit-exact


def nz_model(nd_num, n_value, d_value, src_nd_stride, src_d, c0_stride, n_stride, mat_stride, size=8192):
    """NumPy model of DataCopy(L1, GM, Nd2NzParams) for 16-bit data whose GM element i holds bits 1 + i;
    -1 = never written."""
    out = np.full(size, -1, np.int64)
    for i in range(nd_num):
        for r in range(n_value):
            for blk in range(-(-d_value // 16)):
                src = i * src_nd_stride + r * src_d + blk * 16
                dst = i * mat_stride + (r * n_stride + blk * c0_stride) * 16
                cnt = min(16, d_value - blk * 16)
                out[dst:dst + 16] = 0
                out[dst:dst + cnt] = 1 + np.arange(src, src + cnt)
    return out


NZ_CASES = {
    "canonical_tails": (1, 20, 40, 0, 50, 32, 1, 0),        # rows padded to 32, d tail 40 = 2.5 blocks
    "cann_doc_example": (2, 2, 24, 144, 48, 11, 2, 96),     # the CANN API page example
    "two_matrices_nstride2": (2, 5, 24, 300, 50, 16, 2, 1024),
}


@pytest.mark.parametrize("case", sorted(NZ_CASES))
def test_nd2nz_l1_bytes(bins, case):
    p = NZ_CASES[case]
    out = scen(bins, "nz_layout", *p)
    assert out["ok"], out["faults"]
    got = np.array(out["val"]["l1"], np.int64)
    np.testing.assert_array_equal(got, nz_model(*p))


def test_nd2nz_is_the_reference_nz_format(bins):
    """Canonical parameters give docs/reference/ascendc.md §1.10's NZ: ND (R x D) padded to 16-row x 16-column fractals,
    fractals column-major, elements row-major inside ([n1][m][n0])."""
    rows, d, pitch = 20, 40, 50
    out = scen(bins, "nz_layout", 1, rows, d, 0, pitch, 32, 1, 0)
    got = np.array(out["val"]["l1"], np.int64)[:32 * 48]
    nd = (1 + np.arange(rows * pitch)).reshape(rows, pitch)[:, :d]
    padded = np.full((32, 48), -1, np.int64)
    padded[:rows, :d] = nd
    padded[:rows, d:] = 0                                    # zero fill of the last 32-B block of each row
    nz = padded.reshape(32, 3, 16).transpose(1, 0, 2).reshape(-1)   # [n1][m][n0]
    np.testing.assert_array_equal(got, nz)


def load_model(dst_pos, start, repeat, src_stride, dst_gap, transpose):
    """NumPy model of LoadData from the L1 NZ of a 32x48 matrix (element bits 1 + i) for repeat fractals."""
    nd = (1 + np.arange(32 * 48)).reshape(32, 48)
    l1 = nd.reshape(2, 16, 3, 16).transpose(2, 0, 1, 3).reshape(6, 16, 16)   # fractal (r1, c1) at c1*2 + r1
    out = np.full(8192, -1, np.int64)
    for r in range(repeat):
        frac = l1[start + r * src_stride]
        if transpose:
            frac = frac.T
        d = r * (1 + dst_gap) * 256
        out[d:d + 256] = frac.reshape(-1)
    return out


LOAD_CASES = {
    "a_zz_row_of_fractals": ("A", 1, 3, 2, 0, 0),    # NZ -> ZZ: fractal row 1 (startIndex m1, srcStride M1)
    "a_gap_transpose": ("A", 0, 2, 2, 2, 1),         # the CANN doc's transposed demo (srcStride 2, dstGap 2)
    "b_zn_transpose": ("B", 2, 3, 1, 1, 1),
    "b_repeat_same": ("B", 4, 3, 0, 0, 0),           # srcStride 0 re-reads one fractal
}


@pytest.mark.parametrize("case", sorted(LOAD_CASES))
def test_loaddata_l0_bytes(bins, case):
    p = LOAD_CASES[case]
    out = scen(bins, "load_layout", *p)
    assert out["ok"], out["faults"]
    np.testing.assert_array_equal(np.array(out["val"]["l0"], np.int64), load_model(*p))


# ------------------------------------------------------------------ fault classes

FAULTS = {
    "l0a_overflow": ["[AIC 0] L0A overflow: InitBuffer(TQue<A2>, num=2, len=40960) needs 81920 bytes",
                     "L0A is 65536 bytes"],
    "l1_overflow": ["L1 overflow: InitBuffer(TBuf<B1>", "at L1 offset 307200", "L1 is 524288 bytes"],
    "l0c_overflow": ["L0C overflow", "needs 131104 bytes", "L0C is 131072 bytes"],
    "bt_overflow": ["BiasTable overflow: InitBuffer(TBuf<C2>", "BiasTable is 1024 bytes"],
    "bias_bf16": ["DataCopy(L1 -> BiasTable): 2-byte source into a 4-byte bias table: arch 2201 copies one type or "
                  "converts half to float"],
    "misaligned_fractal": ["LoadData: L0A destination address 32 in L0A is not 512-byte aligned"],
    "misaligned_mmad": ["Mmad: dst (L0C) address 256 in L0C is not 1024-byte aligned"],
    "mmad_wrong_buffer": ["Mmad: fm (left matrix A) must be in L0A (TPosition A2) but lives in L1"],
    "l0c_unwritten": ["Fixpipe: reads unwritten (poisoned) L0C element (row 0, column 0)", "cmatrixInitVal=false"],
    "l0c_beyond": ["Fixpipe: reads unwritten (poisoned) L0C element (row 0, column 16) at L0C byte address 1024"],
    "nd2nz_overlap": ["DataCopy(Nd2NzParams): two pieces of the conversion write the same 32-B block",
                      "dstNzC0Stride 8"],
    "fixpipe_quant": ["Fixpipe: quantPre NoQuant keeps float but the destination is a 2-byte type"],
    "transpose_float": ["LoadData: ifTranspose needs a 2-byte type"],
    "transpose_square_half": ["LoadDataWithTranspose: 2-byte elements; the emulation models int8_t / uint8_t"],
    "transpose_square_gap0": ["LoadDataWithTranspose: dstGap 0 with dstFracGap 0 writes two fractals of 2 squares to one"],
    "transpose_square_misaligned": ["LoadDataWithTranspose: L0B destination address 32 in L0B is not 512-byte aligned"],
    "aiv_touches_l1": ["[AIV 0] TPipe::InitBuffer(TBuf<A1>): an AIV core has no L1 (TPosition A1)"],
    "aic_touches_ub": ["[AIC 0] TPipe::InitBuffer(TQue<VECIN>): an AIC core has no UB (TPosition VECIN)"],
    "aiv_launch_l0a": ["[core 0] TPipe::InitBuffer(TBuf<A2>): an AIV core has no L0A"],
    "foreign_tensor": ["[AIV 0] GetValue: LocalTensor lives in the L1 of another core (AIC 0)"],
    "deadlock_wait": ["[AIV 0] CrossCoreWaitFlag(3) deadlock", "2 core(s) returned",
                      "[AIV 3] CrossCoreWaitFlag(3)"],
    "deadlock_cycle": ["[AIC 0] CrossCoreWaitFlag(1) deadlock", "every live core is blocked: [AIC 0] "
                       "CrossCoreWaitFlag(1), [AIV 0] CrossCoreWaitFlag(2), [AIV 1] CrossCoreWaitFlag(2)"],
    "deadlock_half_set": ["[AIC 0] CrossCoreWaitFlag(0) deadlock", "when both its AIVs CrossCoreSetFlag<2>(0)"],
    "deadlock_syncall_vs_flag": ["[AIC 0] SyncAll deadlock", "[AIV 1] CrossCoreWaitFlag(1)"],
    "flag_range": ["CrossCoreSetFlag: flag id 11 outside 0..10"],
    "flag_pipe": ["[AIV 0] CrossCoreSetFlag<2, PIPE_FIX> on an AIV core"],
    "flag_overflow": ["the counter of flag 2 on AIV 0 would exceed 15"],
    "mode2_aiv_only": ["mode 2 synchronises an AIC with its AIVs and needs a mix launch"],
    "kernel_type": ["KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2) but the kernel was launched with emu::Launch"],
    "kernel_type_of_key": ["KERNEL_TASK_TYPE(12, KERNEL_TYPE_AIC_ONLY) but the kernel was launched with emu::LaunchMix"],
    "syncall_aic_true": ["SyncAll<true> (isAIVOnly) called on an AIC core"],
}
DEADLOCKS = {"deadlock_wait": 4, "deadlock_cycle": 3, "deadlock_half_set": 1, "deadlock_syncall_vs_flag": 3}


@pytest.mark.parametrize("kind", ["h", "f"])
def test_mmad_starts_at_the_bias_table_row(bins, kind):
    """A fp16 (converted on the L1 -> bias-table copy) or fp32 bias row of 32 through C1 -> C2, then Mmad with the
    bias operand (cmatrixSource, docs/reference/ascendc.md §1.10): C = bias broadcast over the rows + A @ B, against
    float64 over the scenario's inputs (A = x[0:16, 0:32], B stored [n][k] = w[0:32, 0:32] of emu_cube_scen.cpp)."""
    out = scen(bins, "mmad_bias", kind)
    assert out["ok"] is True, out["faults"]
    i = np.arange(64 * 64)
    x = ((i % 7) - 3).astype(np.float64).reshape(64, 64) * 0.25
    w = ((i % 5) - 2).astype(np.float64).reshape(64, 64) * 0.5
    bias = np.array([float(v) for v in out["val"]["bias"]])
    j = np.arange(32)
    assert np.array_equal(bias, (j - 16) * (0.125 if kind == "h" else 0.375))
    ref = x[:16, :32] @ w[:32, :32].T + bias[None, :]
    got = np.array([float(v) for v in out["val"]["c"]]).reshape(16, 32)
    assert np.array_equal(got, ref)   # small integers times quarters: every sum exact in fp32


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_fault_detected(bins, name):
    out = scen(bins, name)
    assert out["ok"] is False
    first = out["faults"][0]
    for piece in FAULTS[name]:
        assert piece in first, first
    if name in DEADLOCKS:   # every blocked core reports the deadlock (none hangs)
        assert len(out["faults"]) == DEADLOCKS[name] and all("deadlock" in f for f in out["faults"])


@pytest.mark.parametrize("name", sorted(DEADLOCKS) + ["foreign_tensor"])
def test_deadlock_detection_under_tsan(bins, name):
    out = scen(bins, name, build="scen_tsan")
    assert out["ok"] is False and FAULTS[name][0] in out["faults"][0]


def test_wait_timeout(bins):
    """A wait that is not a provable deadlock (another core is busy) still faults after emu::WaitTimeoutSeconds."""
    out = scen(bins, "wait_timeout")
    assert out["ok"] is False and out["faults"] == [
        "[AIC 0] CrossCoreWaitFlag(1) timed out after 0.3 s (emu::WaitTimeoutSeconds); blocked: [AIC 0] "
        "CrossCoreWaitFlag(1)"]


def test_950_l0c_is_256k(bins):
    out = scen(bins, "l0c_fits_950")
    assert out["ok"] and out["val"]["used"] == ["262144"]


# ------------------------------------------------------------------ mixed kernels


def test_mix_core_indexing(bins):
    """LaunchMix(3): AIC c sees GetBlockIdx c of 3; AIV v sees v of [0, 6), sub-block v % 2, task ratio 2."""
    out = scen(bins, "mix_index")
    assert out["ok"]
    rows = sorted(tuple(v) for tag, v in out["lines"] if tag == "idx")
    want = sorted([("AIC", str(c), "3", "0", "1", "1", "0", "1") for c in range(3)] +
                  [("AIV", str(v), "3", str(v % 2), "2", "2", "1", "0") for v in range(6)])
    assert rows == want


def test_a_kernel_type_declared_for_its_tiling_key_replaces_the_default(bins):
    """KERNEL_TASK_TYPE(12, KERNEL_TYPE_AIC_ONLY) beside KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2) (CANN's
    per-key kernel type, asc-devkit kernel_utils_macros.h): key 12 launched AIC only and key 11 mixed both pass;
    key 12 launched mixed faults (FAULTS["kernel_type_of_key"])."""
    assert scen(bins, "kernel_type_by_key_ok")["ok"]


def test_single_kind_indexing(bins):
    out = scen(bins, "aiv_index")
    assert out["ok"] and out["val"]["outside"] == ["1", "0"]   # outside a launch: the old AIV-only defaults
    assert sorted(tuple(v) for t, v in out["lines"] if t == "idx") == [
        ("AIV", str(c), "2", "0", "1", "1", "1", "0") for c in range(2)]
    out = scen(bins, "cube_index")
    assert sorted(tuple(v) for t, v in out["lines"] if t == "idx") == [
        ("AIC", str(c), "2", "0", "1", "1", "0", "1") for c in range(2)]


def scen_inputs():
    i = np.arange(64 * 64)
    x = ((i % 7) - 3).astype(np.float64) * 0.25
    w = ((i % 5) - 2).astype(np.float64) * 0.5
    return x, w


def tile(xflat, ldx, w, row0):
    """16 x 32 rows row0.. of X (row pitch ldx, first 32 columns) times Wᵀ (W stored [32][32])."""
    xt = xflat.reshape(-1, ldx)[row0:row0 + 16, :32]
    return xt @ w[:32 * 32].reshape(32, 32).T


@pytest.mark.parametrize("build", ["scen", "scen_tsan"])
def test_mix_cube_to_vector(bins, build):
    """AIC writes a cube tile to a GM workspace and signals (mode 2, PIPE_FIX); both AIVs wait, then each moves its
    half through UB (x2) to the output. The AIC starts 30 ms late: a wait that did not block would read -777."""
    out = scen(bins, "mix_c2v", build=build)
    assert out["ok"], out["faults"]
    x, w = scen_inputs()
    got = np.array(out["val"]["out"], np.float64).reshape(2, 16, 32)
    for c in range(2):
        np.testing.assert_array_equal(got[c], 2 * tile(x, 64, w, 16 * c))
    assert out["gm"]["ws"] == (2 * 16 * 32 * 4, 2 * 16 * 32 * 4)


@pytest.mark.parametrize("build", ["scen", "scen_tsan"])
def test_mix_vector_to_cube(bins, build):
    """Both AIVs write their half of a half-precision tile (3*X, through UB and Cast) and signal; the AIC waits for
    both (mode 2 counts the pair), loads the tile with Nd2Nz and multiplies it on the cube."""
    out = scen(bins, "mix_v2c", build=build)
    assert out["ok"], out["faults"]
    x, w = scen_inputs()
    y = (3 * x).astype(np.float16).astype(np.float64)
    got = np.array(out["val"]["out"], np.float64).reshape(2, 16, 32)
    for c in range(2):
        yc = y.reshape(64, 64)[16 * c:16 * c + 16, :32].reshape(-1)
        np.testing.assert_array_equal(got[c], tile(yc, 32, w, 0))


@pytest.mark.parametrize("build", ["scen", "scen_tsan"])
def test_mix_ping_pong_pipeline(bins, build):
    """NSA-style pipeline: 4 items, 2 workspace slots per AI Core, both directions of mode-2 flags every item."""
    out = scen(bins, "mix_pingpong", build=build)
    assert out["ok"], out["faults"]
    x, w = scen_inputs()
    got = np.array(out["val"]["out"], np.float64).reshape(2, 4, 16, 32)
    for c in range(2):
        for i in range(4):
            np.testing.assert_array_equal(got[c, i], tile(x, 64, w, 16 * i) + i)


@pytest.mark.parametrize("build", ["scen", "scen_tsan"])
def test_mix_flag_modes_and_syncall(bins, build):
    """Mode 1 (AIV pair), mode 0 (all AIVs, all AICs), SyncAll<true> (AIVs) and SyncAll<false> (everyone)."""
    out = scen(bins, "mix_modes", build=build)
    assert out["ok"], out["faults"]
    g = np.array(out["val"]["g"], np.int64)
    n = 3
    np.testing.assert_array_equal(g[:2 * n], 100 + np.arange(2 * n))
    np.testing.assert_array_equal(g[8:8 + n], 200 + np.arange(n))
    s = sum(100 + v for v in range(2 * n))
    pair = [1000 * (100 + (v ^ 1)) + s for v in range(2 * n)]
    np.testing.assert_array_equal(g[16:16 + 2 * n], pair)
    np.testing.assert_array_equal(g[24:24 + n], [sum(200 + c for c in range(n))] * n)
    np.testing.assert_array_equal(g[32:32 + 2 * n], [sum(pair)] * (2 * n))
    assert g[48] == 2 * n * sum(pair) + n * sum(200 + c for c in range(n))


# ------------------------------------------------------------------ cross-core ordering (docs/reference/ascendc.md §1.6)


def scen_line(marker: str) -> int:
    """1-based line of the first line of tests/cpp/emu_cube_scen.cpp containing `marker`."""
    lines = (CPP / "emu_cube_scen.cpp").read_text().splitlines()
    return next(i + 1 for i, t in enumerate(lines) if marker in t)


# mode -> (the read's marker, the second store's marker): the m2c AIC stores by CubeTile's Fixpipe
XSYNC = {"m0": ("@xsync-r", "@xsync-w2"), "m1": ("@xsync-r", "@xsync-w2"), "m2v": ("@xsync-r2v", "@xsync-w2"),
         "m2c": ("@xsync-r", "Fixpipe<float, float, CFG_ROW_MAJOR>(c, l0c")}


@pytest.mark.parametrize("mode", sorted(XSYNC))
def test_one_wait_acquires_one_set(bins, mode):
    """Two CrossCoreSetFlag of one flag, d2 stored between them; the consumer waits once and reads d2: on the device
    the one wait proves only that the first set arrived, so the read races the second store. The emulation hands
    each wait exactly its set's knowledge (a FIFO of tokens per core and flag) and faults naming both statements,
    whichever of the two the threads run second. Mode 0 (four AIVs), mode 1 (the AIV pair), mode 2 both ways."""
    read, store = (scen_line(m) for m in XSYNC[mode])
    out = scen(bins, "xsync", mode, 1)
    assert out["ok"] is False
    first = out["faults"][0]
    assert "between cores on GM tensor 'workspace' bytes [2048, 2080)" in first, first
    assert re.search(r"race \((read-after-write|write-after-read)\)", first), first
    assert f"emu_cube_scen.cpp:{read}," in first and f"emu_cube_scen.cpp:{store}," in first, (read, store, first)


@pytest.mark.parametrize("build", ["scen", "scen_tsan"])
@pytest.mark.parametrize("mode", sorted(XSYNC))
def test_two_waits_acquire_both_sets(bins, mode, build):
    """The same kernels waiting twice before the read: the second wait carries the second set, so they pass."""
    out = scen(bins, "xsync", mode, 2, build=build)
    assert out["ok"] and not out["faults"], out["faults"]


def test_unordered_float_adds_fault_in_a_deterministic_launch(bins):
    """emu::DeterministicAdds() (the framework asked for deterministic computation): two cores' float atomic adds to
    the same workspace bytes with nothing ordering them fault (add-after-add), naming both cores' statement."""
    line = scen_line("@det-add")
    out = scen(bins, "det_adds", 1, 0, "f")
    assert out["ok"] is False
    first = out["faults"][0]
    m = re.match(r"\[core (\d)\] race \(add-after-add\) between cores on GM tensor 'workspace' bytes \[0, 32\): "
                 rf"DataCopy UB->GM \(emu_cube_scen.cpp:{line}, PIPE_MTE3\) adds to what core (\d)'s DataCopy UB->GM "
                 rf"\(emu_cube_scen.cpp:{line}, PIPE_MTE3\) added", first)
    assert m and {m.group(1), m.group(2)} == {"0", "1"}, first
    assert "the launch is deterministic" in first


@pytest.mark.parametrize("det, ordered, typ", [(0, 0, "f"), (1, 1, "f"), (1, 0, "i"), (0, 1, "i")])
def test_ordered_or_exact_adds_pass(bins, det, ordered, typ):
    """Float adds ordered by a mode-0 flag barrier pass in a deterministic launch, integer adds (exact in any order)
    pass unordered, and without the deterministic setting unordered float adds commute as before. 1 + 1 = 2."""
    out = scen(bins, "det_adds", det, ordered, typ)
    assert out["ok"] and not out["faults"], out["faults"]
    assert out["val"]["sum"] == ["2"]


def test_the_schedule_seed_reorders_unordered_adds(bins):
    """OPGEN_EMU_SCHED_SEED (emu/core.h SchedJitter) perturbs the cores' interleaving: GM holds 1.0, core 0 adds
    -1.0 and core 1 adds 2^-30 with nothing ordering them (a launch that is not deterministic: no fault); core 0
    first gives 2^-30, core 1 first gives 0 (1 + 2^-30 rounds to 1 in fp32). Over 16 seeds both orders occur (the
    knob the FlashAttentionScoreGrad bit-identity test relies on)."""
    got = set()
    for seed in range(1, 17):
        r = subprocess.run([str(bins["scen"]), "add_order"], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "OPGEN_EMU_SCHED_SEED": str(seed)})
        out = parse(r.stdout)
        assert out["ok"] and not out["faults"], out["faults"]
        got.add(float(np.float32(out["val"]["sum"][0])))   # printed with 9 digits: exact in fp32
    assert got == {2.0**-30, 0.0}, got
