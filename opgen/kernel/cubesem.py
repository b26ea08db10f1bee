"""NumPy meanings of the Kernel IR cube nodes (opgen.kernel.kir Nd2Nz, LoadData, Mmad, Fixpipe): the element
layouts of L1 / L0A / L0B / L0C as index arithmetic and the Mmad accumulation rule. The Kernel IR interpreter
(opgen.kernel.kir_interp) runs the nodes with them on its per-core L1 / L0 arenas, with the same fault rules as the
emulation (opgen/emu/include/emu/cube.h).

Layouts (docs/reference/ascendc.md §1.10; the 2-byte operand types this covers: C0 = 32 B / 2 = 16 elements, a
fractal is 16 x 16 elements = 512 B, an L0C fractal 16 x 16 floats = 1 KB):
  L1  "NZ" — an R x C matrix in 16-row x C0-column pieces, fractal column after fractal column, `pad_rows` rows per
       fractal column, row-major inside: (r, c) at ((c // C0) * pad_rows + r) * C0 + c % C0;
  L0A "ZZ" — A(i, k) at ((i // 16) * K1 + k // C0) * 256 + (i % 16) * C0 + k % C0;
  L0B "ZN" — B(k, j) at ((k // C0) * N1 + j // 16) * 256 + (j % 16) * C0 + k % C0;
  L0C "NZ" — C(i, j) at ((j // 16) * M1 + i // 16) * 256 + (i % 16) * 16 + j % 16;
with M1, K1, N1 = ceil(m / 16), ceil(k / C0), ceil(n / 16). m = 1 is GEMV mode: A(0, k) at k (the CANN Mmad page).
Mmad: each C0-wide chunk of k is summed in float64 (fp16 / bf16 products are exact in it) and added to the
float32 accumulator with one rounding — the emulation's rule (EMU.md "Accumulation order"; the device's internal
order is not documented, so results agree with a float64 reference to fp32 accuracy, not bit for bit).
Fixpipe converts float32 to the destination type rounding to nearest even (§1.10 step 6).
"""

from __future__ import annotations

import numpy as np

C0 = 16
"""Elements of a 2-byte type in one 32-B block: a fractal's width."""
FRACTAL = 256
"""Elements of one 16 x 16 fractal of a 2-byte type (512 B) or of L0C (16 x 16 floats, 1 KB)."""


def nz_index(rows: int, cols: int, pad_rows: int) -> np.ndarray:
    """Element offsets [rows, cols] of an Nd2Nz destination (L1 NZ, `pad_rows` rows per fractal column)."""
    r, c = np.arange(rows)[:, None], np.arange(cols)[None, :]
    return ((c // C0) * pad_rows + r) * C0 + c % C0


def zz_index(m: int, k: int) -> np.ndarray:
    """Element offsets [m, k] of Mmad's left operand in L0A (ZZ; GEMV mode when m == 1: offset k)."""
    if m == 1:
        return np.arange(k)[None, :]
    k1 = -(-k // C0)
    i, kk = np.arange(m)[:, None], np.arange(k)[None, :]
    return ((i // 16) * k1 + kk // C0) * FRACTAL + (i % 16) * C0 + kk % C0


def zn_index(k: int, n: int) -> np.ndarray:
    """Element offsets [k, n] of Mmad's right operand in L0B (ZN)."""
    n1 = -(-n // 16)
    kk, j = np.arange(k)[:, None], np.arange(n)[None, :]
    return ((kk // C0) * n1 + j // 16) * FRACTAL + (j % 16) * C0 + kk % C0


def l0c_index(m: int, n: int, m_rows: int) -> np.ndarray:
    """Float offsets [m, n] of a result in L0C (NZ) whose Mmad had `m_rows` (= 16 * M1) rows."""
    i, j = np.arange(m)[:, None], np.arange(n)[None, :]
    return ((j // 16) * m_rows + i) * 16 + j % 16


def l0a_elems(m: int, k: int) -> int:
    """Elements of L0A an Mmad of m x k reads (whole fractals; k in GEMV mode)."""
    return k if m == 1 else -(-m // 16) * -(-k // C0) * FRACTAL


def l0b_elems(k: int, n: int) -> int:
    """Elements of L0B an Mmad of k x n reads (whole fractals)."""
    return -(-k // C0) * -(-n // 16) * FRACTAL


def l0c_elems(m: int, n: int) -> int:
    """Floats of L0C an Mmad of m x n writes (whole fractals)."""
    return -(-m // 16) * -(-n // 16) * FRACTAL


def transpose_fractals(x: np.ndarray) -> np.ndarray:
    """Each 256-element fractal of flat `x` (a whole number of them) transposed (LoadData ifTranspose)."""
    return x.reshape(-1, 16, 16).transpose(0, 2, 1).reshape(-1)


def mmad_accumulate(a: np.ndarray, b: np.ndarray, prev: np.ndarray | None) -> np.ndarray:
    """float32 [m, n] of A [m, k] x B [k, n] (any float type) added chunk by chunk of C0 k-values to `prev` (float32
    [m, n], None: zeros), each chunk summed in float64 and added with one fp32 rounding."""
    m, k = a.shape
    acc = np.zeros((m, b.shape[1]), np.float32) if prev is None else prev.astype(np.float32)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    for k0 in range(0, k, C0):
        acc = (acc.astype(np.float64) + a64[:, k0:k0 + C0] @ b64[k0:k0 + C0, :]).astype(np.float32)
    return acc
