"""NumPy meanings of the Kernel IR cube nodes (opgen.kernel.kir Nd2Nz, LoadData, Mmad, Fixpipe) and a small
interpreter of the cube part of a kernel class, so the layout arithmetic of a cube schedule is checked without g++.

Buffers are flat NumPy arrays of elements (L1 / L0A / L0B in the operand type, L0C float32, GM in the tensor's
type). Layouts (docs/reference/ascendc.md §1.10; C0 = 16 for the 2-byte types this covers, a fractal = 16 x 16
elements): L1 "NZ" — fractals column of fractals after column, `pad_rows` rows per fractal column, row-major
inside; L0A "ZZ" — A(i, k) at ((i // 16) * K1 + k // 16) * 256 + (i % 16) * 16 + k % 16; L0B "ZN" — B(k, j) at
((k // 16) * N1 + j // 16) * 256 + (j % 16) * 16 + k % 16; L0C "NZ" — C(i, j) at ((j // 16) * M1 + i // 16) * 256 +
(i % 16) * 16 + j % 16 (M1, K1, N1 = ceil(m / 16), ceil(k / 16), ceil(n / 16)). Products are summed in float64 and
added once to the float32 accumulator; Fixpipe rounds to the destination type (round to nearest even).
"""

from __future__ import annotations

import numpy as np

from opgen.kernel import kir as K

C0 = 16
FRACTAL = 256


def nd2nz(dst: np.ndarray, dst_off: int, src: np.ndarray, src_off: int, rows: int, cols: int, pitch: int,
          pad_rows: int) -> None:
    """Nd2Nz: rows x cols of src (row pitch `pitch` elements) into dst from element dst_off as NZ with pad_rows rows
    per fractal column; each row's last C0 piece is zero-filled past cols."""
    for b in range(-(-cols // C0)):
        n = min(C0, cols - b * C0)
        for r in range(rows):
            d = dst_off + (b * pad_rows + r) * C0
            dst[d:d + C0] = 0
            dst[d:d + n] = src[src_off + r * pitch + b * C0:src_off + r * pitch + b * C0 + n]


def load_data(dst: np.ndarray, dst_off: int, src: np.ndarray, src_off: int, start: int, repeat: int, stride: int,
              transpose: bool) -> None:
    """LoadData: fractal r (< repeat) of dst from src fractal start + r * stride, transposed when asked."""
    for r in range(repeat):
        s = src_off + (start + r * stride) * FRACTAL
        f = src[s:s + FRACTAL].reshape(16, 16)
        dst[dst_off + r * FRACTAL:dst_off + (r + 1) * FRACTAL] = (f.T if transpose else f).ravel()


def mmad(c: np.ndarray, c_off: int, a: np.ndarray, a_off: int, b: np.ndarray, b_off: int, m: int, n: int, k: int,
         init: bool) -> None:
    """Mmad: C (L0C NZ) = A (L0A ZZ) x B (L0B ZN) [+ C], float32 result of float64 products."""
    m1, k1, n1 = -(-m // 16), -(-k // 16), -(-n // 16)
    i, kk, j = np.arange(m)[:, None], np.arange(k)[None, :], np.arange(n)[None, :]
    av = a[a_off + ((i // 16) * k1 + kk // 16) * FRACTAL + (i % 16) * 16 + kk % 16].astype(np.float64)
    kc = np.arange(k)[:, None]
    bv = b[b_off + ((kc // 16) * n1 + j // 16) * FRACTAL + (j % 16) * 16 + kc % 16].astype(np.float64)
    ci = c_off + ((j // 16) * m1 + i // 16) * FRACTAL + (i % 16) * 16 + j % 16
    prev = np.zeros((m, n)) if init else c[ci].astype(np.float64)
    c[ci] = (prev + av @ bv).astype(np.float32)


def fixpipe(dst: np.ndarray, dst_off: int, c: np.ndarray, c_off: int, rows: int, cols: int, src_rows: int,
            pitch: int) -> None:
    """Fixpipe (row-major): rows x cols of L0C (Mmad rows padded to src_rows) into dst (row pitch `pitch`), cast to
    dst's type."""
    i, j = np.arange(rows)[:, None], np.arange(cols)[None, :]
    vals = c[c_off + ((j // 16) * src_rows + i) * 16 + j % 16]
    dst[dst_off + i * pitch + j] = vals.astype(dst.dtype)


def run_cube(k: K.KernelClass, fields: dict, gm: dict, block_num: int, elem=np.float16) -> None:
    """Run the cube statements of kernel class `k` on every AI Core 0 .. block_num - 1 in turn: `fields` are the
    tiling-data values, `gm` {GmTensor name: flat array} (written in place). Scalar statements (Let, For, If,
    CoreIf, Get, InitBuffer) are evaluated, flags and barriers are no-ops (this runs in program order), anything
    else raises IRError. Buffer sizes come from the InitBuffer byte counts (2-byte operands, 4-byte L0C)."""
    for core in range(block_num):
        env = dict(fields, blockIdx=core, blockNum=block_num)
        env["sizeof(T)"] = 2
        bufs, views = {}, {}
        _run(k, k.process, env, bufs, views, gm, elem)


def _ev(e, env) -> int:
    return int(K.as_dim(e).evaluate(env)) if not isinstance(e, int) else e


def _run(k, stmts, env, bufs, views, gm, elem) -> None:  # noqa: C901 - one case per node type
    locals_ = {b.name: b for b in k.locals}
    for s in stmts:
        if isinstance(s, K.CoreIf):
            if s.unit == "cube":
                _run(k, s.body, env, bufs, views, gm, elem)
        elif isinstance(s, K.InitBuffer):
            f32 = locals_[s.buf].pos is K.TPos.CO1
            n = _ev(s.bytes, env) // (4 if f32 else 2)
            bufs[s.buf] = np.full(n, np.nan, dtype=np.float32 if f32 else elem)
        elif isinstance(s, K.Get):
            views[s.var] = (s.buf, _ev(s.offset, env))
        elif isinstance(s, K.Let):
            env[s.name] = _ev(s.value, env)
        elif isinstance(s, K.For):
            v, hi, step = _ev(s.lo, env), _ev(s.hi, env), _ev(s.step, env)
            while v < hi:
                inner = dict(env, **{s.var: v})
                if s.tail:
                    inner[s.tail] = min(step, hi - v)
                _run(k, s.body, inner, bufs, views, gm, elem)
                v += step
        elif isinstance(s, (K.SetFlag, K.WaitFlag, K.Barrier, K.Comment)):
            pass
        elif isinstance(s, K.Nd2Nz):
            buf, off = views[s.dst.tensor]
            nd2nz(bufs[buf], off + _ev(s.dst.offset, env), gm[s.src.tensor], _ev(s.src.offset, env),
                  _ev(s.rows, env), _ev(s.cols, env), _ev(s.src_pitch, env), _ev(s.pad_rows, env))
        elif isinstance(s, K.LoadData):
            db, do = views[s.dst.tensor]
            sb, so = views[s.src.tensor]
            load_data(bufs[db], do + _ev(s.dst.offset, env), bufs[sb], so + _ev(s.src.offset, env),
                      _ev(s.start, env), _ev(s.repeat, env), _ev(s.src_stride, env), s.transpose)
        elif isinstance(s, K.Mmad):
            (cb, co), (ab, ao), (bb, bo) = views[s.dst.tensor], views[s.a.tensor], views[s.b.tensor]
            init = all(c.holds(env) for c in s.init)
            mmad(bufs[cb], co + _ev(s.dst.offset, env), bufs[ab], ao + _ev(s.a.offset, env), bufs[bb],
                 bo + _ev(s.b.offset, env), _ev(s.m, env), _ev(s.n, env), _ev(s.k, env), init)
        elif isinstance(s, K.Fixpipe):
            cb, co = views[s.src.tensor]
            fixpipe(gm[s.dst.tensor], _ev(s.dst.offset, env), bufs[cb], co + _ev(s.src.offset, env),
                    _ev(s.rows, env), _ev(s.cols, env), _ev(s.src_rows, env), _ev(s.dst_pitch, env))
        else:
            raise K.IRError(f"the cube interpreter does not run {type(s).__name__}", s)
