"""NumPy meanings of the Kernel IR cube nodes (opgen.kernel.kir Nd2Nz, LoadData, Mmad, Fixpipe): the element
layouts of L1 / L0A / L0B / L0C as index arithmetic and the Mmad accumulation rule. The Kernel IR interpreter
(opgen.kernel.kir_interp) runs the nodes with them on its per-core L1 / L0 arenas, with the same fault rules as the
emulation (opgen/emu/include/emu/cube.h).

Layouts (docs/reference/ascendc.md §1.10; C0 = 32 B / sizeof(T): 16 for the 2-byte types, a fractal 16 x 16 elements
= 512 B; 32 for int8, a fractal 16 x 32 = 512 B; an L0C fractal 16 x 16 floats or int32 = 1 KB; the functions take
`c0`, default 16):
  L1  "NZ" — an R x C matrix in 16-row x C0-column pieces, fractal column after fractal column, `pad_rows` rows per
       fractal column, row-major inside: (r, c) at ((c // C0) * pad_rows + r) * C0 + c % C0;
  L0A "ZZ" — A(i, k) at ((i // 16) * K1 + k // C0) * 16 C0 + (i % 16) * C0 + k % C0;
  L0B "ZN" — B(k, j) at ((k // C0) * N1 + j // 16) * 16 C0 + (j % 16) * C0 + k % C0;
  L0C "NZ" — C(i, j) at ((j // 16) * M1 + i // 16) * 256 + (i % 16) * 16 + j % 16;
with M1, K1, N1 = ceil(m / 16), ceil(k / C0), ceil(n / 16). m = 1 is GEMV mode: A(0, k) at k (the CANN Mmad page).
Mmad: each C0-wide chunk of k is summed in float64 (fp16 / bf16 products are exact in it) and added to the
float32 accumulator with one rounding — the emulation's rule (EMU.md "Accumulation order"; the device's internal
order is not documented, so results agree with a float64 reference to fp32 accuracy, not bit for bit).
int8 x int8 accumulates into int32: the products summed exactly (int64) and the sum wrapped to int32 (the device's
overflow is not documented; |sum| < 2^31 for K < 2^17, exact either way), as the emulation's Mmad
(opgen/emu/include/emu/cube.h; ops-nn quant_batch_matmul_v3's int32_t L0C). LoadData transposes 2-byte fractals
only (`transpose_fractals`); LoadDataWithTranspose int8 squares of 32 x 32 (`transpose_squares`).
Fixpipe converts float32 to the destination type rounding to nearest even (§1.10 step 6); an int32 L0C goes to int32
GM unchanged (NoQuant).
"""

from __future__ import annotations

import numpy as np

C0 = 16
"""Elements of a 2-byte type in one 32-B block: a fractal's width."""
FRACTAL = 256
"""Elements of one 16 x 16 fractal of a 2-byte type (512 B) or of L0C (16 x 16 floats, 1 KB)."""


def c0_of(itemsize: int) -> int:
    """C0, the elements of one 32-B block (a fractal's width), of an operand type of `itemsize` bytes (1, 2 or 4).
    Raises ValueError for another size."""
    if itemsize not in (1, 2, 4):
        raise ValueError(f"cube operand of {itemsize}-byte elements: 1, 2 or 4 (docs/reference/ascendc.md §1.10)")
    return 32 // itemsize


def nz_index(rows: int, cols: int, pad_rows: int, c0: int = C0) -> np.ndarray:
    """Element offsets [rows, cols] of an Nd2Nz destination (L1 NZ, `pad_rows` rows per fractal column, pieces of
    `c0` elements)."""
    r, c = np.arange(rows)[:, None], np.arange(cols)[None, :]
    return ((c // c0) * pad_rows + r) * c0 + c % c0


def zz_index(m: int, k: int, c0: int = C0) -> np.ndarray:
    """Element offsets [m, k] of Mmad's left operand in L0A (ZZ, fractals 16 x c0; GEMV mode when m == 1: offset
    k)."""
    if m == 1:
        return np.arange(k)[None, :]
    k1 = -(-k // c0)
    i, kk = np.arange(m)[:, None], np.arange(k)[None, :]
    return ((i // 16) * k1 + kk // c0) * 16 * c0 + (i % 16) * c0 + kk % c0


def zn_index(k: int, n: int, c0: int = C0) -> np.ndarray:
    """Element offsets [k, n] of Mmad's right operand in L0B (ZN, fractals c0 x 16)."""
    n1 = -(-n // 16)
    kk, j = np.arange(k)[:, None], np.arange(n)[None, :]
    return ((kk // c0) * n1 + j // 16) * 16 * c0 + (j % 16) * c0 + kk % c0


def l0c_index(m: int, n: int, m_rows: int) -> np.ndarray:
    """Float offsets [m, n] of a result in L0C (NZ) whose Mmad had `m_rows` (= 16 * M1) rows."""
    i, j = np.arange(m)[:, None], np.arange(n)[None, :]
    return ((j // 16) * m_rows + i) * 16 + j % 16


def l0a_elems(m: int, k: int, c0: int = C0) -> int:
    """Elements of L0A an Mmad of m x k reads (whole 16 x c0 fractals; k in GEMV mode)."""
    return k if m == 1 else -(-m // 16) * -(-k // c0) * 16 * c0


def l0b_elems(k: int, n: int, c0: int = C0) -> int:
    """Elements of L0B an Mmad of k x n reads (whole c0 x 16 fractals)."""
    return -(-k // c0) * -(-n // 16) * 16 * c0


def l0c_elems(m: int, n: int) -> int:
    """Elements (float or int32) of L0C an Mmad of m x n writes (whole 16 x 16 fractals)."""
    return -(-m // 16) * -(-n // 16) * FRACTAL


def transpose_fractals(x: np.ndarray) -> np.ndarray:
    """Each 256-element fractal of flat `x` (a whole number of them) transposed (LoadData ifTranspose)."""
    return x.reshape(-1, 16, 16).transpose(0, 2, 1).reshape(-1)


SQUARE_B8 = 1024
"""Bytes of one square of LoadDataWithTranspose for a 1-byte type: 32 x 32 int8, two consecutive 16 x 32 fractals
(asc-devkit's load_data_l12l0 example: fractalNum 2 for B8)."""


def transpose_squares(x: np.ndarray) -> np.ndarray:
    """Each 32 x 32 square (1024 elements: two 16 x 32 fractals, rows 0-15 then 16-31) of flat `x` (a whole number
    of them) transposed, element (i, j) to (j, i): LoadDataWithTranspose of int8. Square rows of an int8 B [K, N]
    in L1 NZ (32 k-rows of one 32-column piece) become two ZN fractals of 16 n-rows x 32 k (zn_index)."""
    return x.reshape(-1, 32, 32).transpose(0, 2, 1).reshape(-1)


def square_destinations(rep: int, dst_gap: int, dst_frac_gap: int) -> list[tuple[int, int]]:
    """(first, second) destination fractal (512-B units) of each of the `rep` squares of a LoadDataWithTranspose of
    int8 (kir.LoadData with_transpose): square r's first fractal at r * (1 + dst_gap), its second 1 + dst_frac_gap
    fractals after it (docs/reference/ascendc.md §1.10 "Transposing load of int8 fractals": dstGap and dstFracGap
    in 512-B units). Raises ValueError when two fractals of the instruction land on one destination fractal (a
    square's second fractal overwritten by the next square's first: dstGap 0 with dstFracGap 0)."""
    out = [(r * (1 + dst_gap), r * (1 + dst_gap) + 1 + dst_frac_gap) for r in range(rep)]
    flat = [f for pair in out for f in pair]
    if len(set(flat)) != len(flat):
        raise ValueError(f"dstGap {dst_gap} with dstFracGap {dst_frac_gap} writes two fractals of {rep} squares to "
                         "one destination fractal")
    return out


def mmad_accumulate(a: np.ndarray, b: np.ndarray, prev: np.ndarray | None) -> np.ndarray:
    """float32 [m, n] of A [m, k] x B [k, n] (any float type) added chunk by chunk of C0 k-values to `prev` (float32
    [m, n], None: zeros), each chunk summed in float64 and added with one fp32 rounding. int8 A and B: int32 [m, n],
    prev (int32 or None) plus the exact int64 product, wrapped to int32 (module docstring)."""
    m, k = a.shape
    if a.dtype == np.int8 and b.dtype == np.int8:
        acc = np.zeros((m, b.shape[1]), np.int64) if prev is None else prev.astype(np.int64)
        return (acc + a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)   # astype wraps (two's complement)
    if a.dtype.kind in "iu" or b.dtype.kind in "iu":
        raise ValueError(f"Mmad of {a.dtype} x {b.dtype}: integer operands are int8 x int8 (int32 result)")
    acc = np.zeros((m, b.shape[1]), np.float32) if prev is None else prev.astype(np.float32)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    for k0 in range(0, k, C0):
        acc = (acc.astype(np.float64) + a64[:, k0:k0 + C0] @ b64[k0:k0 + C0, :]).astype(np.float32)
    return acc
