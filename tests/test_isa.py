"""The instruction table (opgen.kernel.isa) against the emulation and against independent truth.

One table drives both sides: for every entry, cases on random data (counts that are not a multiple of the 256-B
repeat, full and in-place operands, fp32 and (binary ops) half, Brcb strides, every Cast round mode of every conversion opgen emits) are printed
through the entry's C++ form into one C++ program, compiled once with g++ against opgen/emu/include, run, and its
destination buffers compared with the entry's NumPy meaning: bit for bit, lanes past the count included (they must
keep their old contents, docs/reference/ascendc.md §1.9), except Exp and Ln within the entry's ulps. The meanings
that claim rounding behaviour are checked against float64 math and a brute-force table of every 16-bit value.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from opgen.codegen.env import template_env
from opgen.kernel.isa import (CAST_MODES, INSTRS, NP_DTYPE, ROUND_MODES, Op, Pipe, entry, pairwise_sum,
                              reduce_max_tmp_elems, round_to_16)

ROOT = Path(__file__).resolve().parents[1]
INC = ROOT / "opgen" / "emu" / "include"
BASE = ["g++", "-std=c++17", "-O1", "-pthread", "-Wall", "-Werror", "-Wno-unused-but-set-variable",
        "-Wno-unused-function", f"-I{INC}"]
N = 320          # elements per operand buffer (a multiple of 32 B for every type, not of the 256-B repeat)
COUNTS = (1, 63, 64, 65, 127, 200, 257, 300, 320)
CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float16): "half", np.dtype(ml_dtypes.bfloat16): "bfloat16_t",
          np.dtype(np.uint32): "uint32_t", np.dtype(np.int32): "int32_t", np.dtype(np.uint8): "uint8_t",
          np.dtype(np.int8): "int8_t", np.dtype(np.uint16): "uint16_t", np.dtype(np.int16): "int16_t"}


def _hexf(v: float) -> str:
    return f"static_cast<float>({float(np.float32(v)).hex()}f)" if np.isfinite(v) else "0.0f"


class Case:
    """One run of one entry: operand arrays (the destination's initial contents included), the C++ expression of
    every non-tensor operand, the env of its NumPy meaning, and which operands alias (in place)."""

    def __init__(self, op: Op, arrays: dict, values: dict, env_values: dict, alias: dict | None = None):
        self.op, self.arrays, self.values, self.env_values = op, arrays, values, env_values
        self.alias = alias or {}   # operand -> the operand whose buffer it uses

    def env(self) -> dict:
        env = dict(self.env_values)
        for name in INSTRS[self.op].operands:
            n = name.name
            if n in self.arrays:
                env[n] = self.arrays[n]
            elif n in self.alias:
                env[n] = self.arrays[self.alias[n]]
        return env


def _floats(rng, n=N, lo=-4.0, hi=4.0):
    return rng.uniform(lo, hi, n).astype(np.float32)


def _cast_inputs(rng, dst: np.dtype) -> np.ndarray:
    """fp32 values exercising every rounding decision to `dst`: exact ties between neighbours, exact values,
    random values in range, negatives, subnormals of the destination."""
    x = rng.uniform(-2, 2, N).astype(np.float32) * np.float32(2.0) ** rng.integers(-14, 14, N).astype(np.float32)
    if dst == np.dtype(np.int32):   # ties n + 1/2, values past the int32 range (saturation) and NaN
        ties = (rng.integers(-3000, 3000, N // 4) + 0.5).astype(np.float32)
        ties[:4] = [3e9, -3e9, np.nan, 2147483520.0]
    elif dst == np.dtype(np.float16):
        pos = np.arange(0x0001, 0x7BFF, dtype=np.uint16)
        pick = rng.choice(pos, N // 4, replace=False)
        a = pick.view(np.float16).astype(np.float64)
        b = (pick + 1).astype(np.uint16).view(np.float16).astype(np.float64)
        ties = ((a + b) / 2).astype(np.float32)
    else:
        bits = (rng.integers(0x0080, 0x7F00, N // 4).astype(np.uint32) << 16) | 0x8000
        ties = bits.view(np.float32)
    x[: N // 4] = ties * np.where(rng.random(N // 4) < 0.5, -1, 1).astype(np.float32)
    x[N // 4: N // 4 + 8] = [0.0, -0.0, 1.0, -1.0, 6e-8, -3e-5, 65504.0 if dst == np.float16 else 3e38, 1.5]
    return x


def build_cases(seed: int = 7) -> list[Case]:
    """Every entry of the table, each with several counts (tails) and, for the elementwise ones, an in-place run."""
    rng = np.random.default_rng(seed)
    cases: list[Case] = []

    def cnt(k):
        return COUNTS[k % len(COUNTS)]

    for k, op in enumerate([Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MAX, Op.MIN]):
        for j in range(3):
            c = cnt(k + 3 * j)
            a, b = _floats(rng), _floats(rng)
            if op is Op.DIV:
                b = np.where(np.abs(b) < 0.25, np.float32(0.5), b).astype(np.float32)
            if j == 2:   # in place: dst is src0
                cases.append(Case(op, {"dst": a, "src1": b}, {"count": str(c)}, {"count": c}, {"src0": "dst"}))
            else:
                cases.append(Case(op, {"dst": _floats(rng), "src0": a, "src1": b}, {"count": str(c)}, {"count": c}))
    for k, op in enumerate([Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MAX, Op.MIN]):   # half: 128 lanes a repeat
        c = (129, 200, 255, 300, 1, 128)[k]
        a, b = _floats(rng).astype(np.float16), _floats(rng, lo=0.5, hi=4.0).astype(np.float16)
        cases.append(Case(op, {"dst": _floats(rng).astype(np.float16), "src0": a, "src1": b}, {"count": str(c)},
                          {"count": c}))
    for k, op in enumerate([Op.ADDS, Op.MULS, Op.MAXS, Op.MINS]):
        for j in range(3):
            c, s = cnt(2 * k + j), float(np.float32(rng.uniform(-3, 3)))
            vals, envv = {"count": str(c), "scalar": _hexf(s)}, {"count": c, "scalar": s}
            if j == 2:
                cases.append(Case(op, {"dst": _floats(rng)}, vals, envv, {"src0": "dst"}))
            else:
                cases.append(Case(op, {"dst": _floats(rng), "src0": _floats(rng)}, vals, envv))
    for k, op in enumerate([Op.EXP, Op.LN, Op.SQRT, Op.RSQRT, Op.ABS, Op.RECIPROCAL, Op.RELU]):
        for j in range(3):
            c = cnt(k + 2 * j)
            src = _floats(rng, lo=-10, hi=10)
            if op in (Op.LN, Op.SQRT, Op.RSQRT):
                src = np.abs(src) + np.float32(1e-3)
            if op is Op.RECIPROCAL:
                src = np.where(np.abs(src) < 0.1, np.float32(0.3), src).astype(np.float32)
            if j == 2:
                cases.append(Case(op, {"dst": src}, {"count": str(c)}, {"count": c}, {"src0": "dst"}))
            else:
                cases.append(Case(op, {"dst": _floats(rng), "src0": src}, {"count": str(c)}, {"count": c}))
    for j in range(3):   # Axpy: dst += src0 * scalar (dst read and written); products and sums that round
        c, s = cnt(j + 1), float(np.float32(rng.uniform(-3, 3)))
        cases.append(Case(Op.AXPY, {"dst": _floats(rng), "src0": _floats(rng) * np.float32(1.0 + 2.0**-20)},
                          {"count": str(c), "scalar": _hexf(s)}, {"count": c, "scalar": s}))
    for j in range(3):
        c, s = cnt(j + 4), float(np.float32(rng.uniform(-3, 3)))
        cases.append(Case(Op.DUPLICATE, {"dst": _floats(rng)}, {"count": str(c), "scalar": _hexf(s)},
                          {"count": c, "scalar": s}))
    for j, (dt, first) in enumerate(((np.float32, 0.0), (np.float32, 37.0), (np.int32, 5), (np.float16, 3.0),
                                     (np.int16, -7))):   # CreateVecIndex: the first value, every element type
        c = cnt(j + 3)
        text = _hexf(first) if dt is np.float32 else f"static_cast<{CTYPES[np.dtype(dt)]}>({first})"
        cases.append(Case(Op.CREATE_VEC_INDEX, {"dst": _floats(rng, lo=-50, hi=50).astype(dt)},
                          {"count": f"static_cast<uint32_t>({c})", "scalar": text}, {"count": c, "scalar": first}))
    for (s, d), modes in CAST_MODES.items():
        sdt, ddt = NP_DTYPE[s], NP_DTYPE[d]
        for j, mode in enumerate(modes):
            c = COUNTS[(j + 5) % len(COUNTS)]
            if s == "float":
                src = _cast_inputs(rng, ddt)
            elif s in ("int8_t", "uint8_t"):   # every byte value
                src = np.arange(N).astype(sdt)
            elif d in ("int8_t", "uint8_t"):   # ties n + 1/2, values past the range (saturation), inf and NaN
                src = np.concatenate([rng.integers(-300, 300, N - 8) + 0.5, [np.inf, -np.inf, np.nan, 127.5, -128.5,
                                                                             255.5, -0.5, 0.0]]).astype(sdt)
            else:
                src = _floats(rng, lo=-100, hi=100).astype(sdt)
            dst = _floats(rng).astype(ddt)
            cases.append(Case(Op.CAST, {"dst": dst, "src": src},
                              {"mode": f"RoundMode::{mode}", "count": f"static_cast<uint32_t>({c})"},
                              {"mode": mode, "count": c}))
    for j, s in enumerate(("half", "bfloat16_t", "float")):
        c = cnt(j + 1)
        src = _floats(rng, lo=-50, hi=50).astype(NP_DTYPE[s])
        cases.append(Case(Op.CAST_FROM, {"dst": _floats(rng), "src": src}, {"count": str(c)}, {"count": c}))
    for j, (d, mode) in enumerate([("half", "CAST_RINT"), ("half", "CAST_ROUND"), ("half", "CAST_NONE"),
                                   ("bfloat16_t", "CAST_RINT"), ("bfloat16_t", "CAST_ROUND"), ("float", "CAST_NONE")]):
        c = cnt(j + 2)
        ddt = NP_DTYPE[d]
        src = _cast_inputs(rng, ddt) if d != "float" else _floats(rng)
        cases.append(Case(Op.CAST_TO, {"dst": _floats(rng).astype(ddt), "src": src},
                          {"mode": f"RoundMode::{mode}", "count": str(c)}, {"mode": mode, "count": c}))
    for op in (Op.REDUCE_SUM, Op.REDUCE_MAX):
        for j in range(4):
            c = cnt(2 * j + 1)
            tmp = max(reduce_max_tmp_elems(N), 64)
            cases.append(Case(op, {"dst": _floats(rng, n=8), "src": _floats(rng, lo=-100, hi=100),
                                   "tmp": _floats(rng, n=tmp)}, {"count": str(c)}, {"count": c}))
    for j in range(3):
        c, base = cnt(j + 3), 4 * j
        src = _floats(rng)
        off = (rng.integers(0, N - base // 4 - 1, N) * 4).astype(np.uint32)
        cases.append(Case(Op.GATHER, {"dst": _floats(rng), "src": src, "offset": off},
                          {"base": str(base), "count": f"static_cast<uint32_t>({c})"},
                          {"base": base, "count": c}))
    for rep, blk, rstride in ((2, 1, 8), (3, 2, 16), (1, 1, 0), (4, 1, 9)):
        cases.append(Case(Op.BRCB, {"dst": _floats(rng, n=640), "src": _floats(rng, n=64)},
                          {"repeat": str(rep), "params": f"BrcbRepeatParams({blk}, {rstride})"},
                          {"repeat": rep, "params": (blk, rstride)}))
    # mask / repeat forms: rows of 40 floats (5 blocks) as the rows family lays them out, a column row read with
    # src1 repeat stride 0, a broadcast block (src1 block stride 0), a partial mask, in place, half
    for k, op in enumerate([Op.ADD_REP, Op.SUB_REP, Op.MUL_REP, Op.DIV_REP, Op.MAX_REP, Op.MIN_REP]):
        for j, (dt, mask, rep, prm) in enumerate([(np.float32, 40, 7, (1, 1, 1, 5, 5, 0)),
                                                  (np.float32, 64, 3, (1, 1, 0, 8, 8, 1)),
                                                  (np.float32, 13, 8, (1, 1, 1, 5, 5, 5)),
                                                  (np.float16, 100, 2, (1, 1, 1, 8, 8, 8))]):
            a, b = _floats(rng, n=640).astype(dt), _floats(rng, n=640, lo=0.5, hi=4.0).astype(dt)
            vals = {"mask": str(mask), "repeat": str(rep), "params": f"BinaryRepeatParams{prm}"}
            envv = {"mask": mask, "repeat": rep, "params": prm}
            if j == 2:   # in place: dst is src0
                cases.append(Case(op, {"dst": a, "src1": b}, vals, envv, {"src0": "dst"}))
            else:
                cases.append(Case(op, {"dst": _floats(rng, n=640).astype(dt), "src0": a, "src1": b}, vals, envv))
    for op in (Op.WHOLE_REDUCE_SUM, Op.WHOLE_REDUCE_MAX):
        for mask, rep, dr, sb, sr in ((45, 9, 1, 1, 6), (64, 4, 1, 1, 8), (1, 5, 2, 1, 1), (33, 3, 8, 2, 16)):
            vals = dict(zip(("mask", "repeat", "dstRep", "srcBlk", "srcRep"), (mask, rep, dr, sb, sr)))
            cases.append(Case(op, {"dst": _floats(rng, n=64), "src": _floats(rng, n=640, lo=-100, hi=100)},
                              {n: str(v) for n, v in vals.items()}, vals))
    for j, (mode, dt, c) in enumerate([("LT", np.float32, 64), ("GT", np.float32, 192), ("EQ", np.float32, 128),
                                       ("LE", np.float16, 128), ("GE", np.float16, 256), ("NE", np.float32, 256),
                                       ("EQ", np.int32, 128)]):
        a = _floats(rng, lo=-3, hi=3).round().astype(dt)   # small integers: equal pairs are common
        b = _floats(rng, lo=-3, hi=3).round().astype(dt)
        vals, envv = {"mode": f"CMPMODE::{mode}", "count": f"static_cast<uint32_t>({c})"}, {"mode": mode, "count": c}
        cases.append(Case(Op.COMPARE, {"dst": rng.integers(0, 256, N // 8).astype(np.uint8), "src0": a, "src1": b},
                          vals, envv))
        if dt == np.float32:
            cases.append(Case(Op.COMPARE_SCALAR, {"dst": rng.integers(0, 256, N // 8).astype(np.uint8), "src0": a},
                              {**vals, "scalar": _hexf(1.0)}, {**envv, "scalar": 1.0}))
    for j, (dt, c) in enumerate([(np.float32, 64), (np.float32, 320), (np.float16, 128), (np.float16, 256)]):
        mask = rng.integers(0, 256, N // 8).astype(np.uint8)
        a, b = _floats(rng).astype(dt), _floats(rng).astype(dt)
        cases.append(Case(Op.SELECT, {"dst": _floats(rng).astype(dt), "mask": mask, "src0": a, "src1": b},
                          {"count": f"static_cast<uint32_t>({c})"}, {"count": c}))
        if dt == np.float32:
            s = float(np.float32(rng.uniform(-3, 3)))
            cases.append(Case(Op.SELECT_SCALAR, {"dst": _floats(rng), "mask": mask, "src0": a},
                              {"count": f"static_cast<uint32_t>({c})", "scalar": _hexf(s)}, {"count": c, "scalar": s}))
    # the repeat forms of Compare / Select (tensor-scalar) as the rows family uses them eight rows a repeat: a
    # column row read with block stride 0 (every block of a repeat the same column block) and repeat stride 1, one
    # Brcb block per row (block stride 1, repeat stride 0); then a repeat a row (64-lane chunk), a plain layout, half
    for mode, dt, rep, prm in (("EQ", np.float32, 9, (1, 0, 1, 8, 1, 0)), ("LT", np.float32, 5, (1, 1, 0, 8, 0, 1)),
                               ("GE", np.float32, 4, (1, 1, 1, 8, 8, 8)), ("NE", np.float16, 2, (1, 1, 1, 8, 8, 8)),
                               ("EQ", np.int32, 3, (1, 2, 0, 8, 16, 1))):
        a = _floats(rng, n=640, lo=-3, hi=3).round().astype(dt)
        b = _floats(rng, n=640, lo=-3, hi=3).round().astype(dt)
        lanes = 256 // np.dtype(dt).itemsize
        cases.append(Case(Op.COMPARE_REP, {"dst": rng.integers(0, 256, 128).astype(np.uint8), "src0": a, "src1": b},
                          {"mode": f"CMPMODE::{mode}", "mask": str(lanes), "repeat": str(rep),
                           "params": f"BinaryRepeatParams{prm}"},
                          {"mode": mode, "mask": lanes, "repeat": rep, "params": prm}))
    for dt, lanes, rep, prm in ((np.float32, 64, 9, (5, 5, 1, 1, 1, 8)), (np.float32, 24, 5, (5, 5, 1, 1, 1, 8)),
                                (np.float32, 40, 3, (1, 1, 1, 5, 5, 8)), (np.float16, 128, 2, (1, 1, 1, 8, 8, 8)),
                                (np.float16, 77, 3, (1, 1, 1, 8, 8, 8))):
        mask = rng.integers(0, 256, 128).astype(np.uint8)
        s = float(np.float32(rng.uniform(-3, 3)).astype(dt))
        cases.append(Case(Op.SELECT_SCALAR_REP, {"dst": _floats(rng, n=640).astype(dt), "mask": mask,
                                                 "src0": _floats(rng, n=640).astype(dt)},
                          {"lanes": str(lanes), "repeat": str(rep), "params": f"BinaryRepeatParams{prm}",
                           "scalar": _hexf(s) if dt == np.float32 else f"static_cast<half>({_hexf(s)})"},
                          {"lanes": lanes, "repeat": rep, "params": prm, "scalar": s}))
    for j, (dt, c) in enumerate([(np.uint16, 4), (np.uint16, 64), (np.int16, 37)]):   # bit masks as 16-bit words
        words = [rng.integers(0, 1 << 16, N).astype(np.uint16).view(dt) for _ in range(3)]
        for op in (Op.AND, Op.OR):
            cases.append(Case(op, {"dst": words[0], "src0": words[1], "src1": words[2]}, {"count": str(c)},
                              {"count": c}))
        cases.append(Case(Op.NOT, {"dst": words[0], "src0": words[1]}, {"count": str(c)}, {"count": c}))
    for op in (Op.COPY_IN, Op.COPY_OUT):
        for c in (8, 64, 312):
            cases.append(Case(op, {"dst": _floats(rng), "src": _floats(rng)},
                              {"count": f"static_cast<uint32_t>({c})"}, {"count": c}))
    cases += _nan_and_zero_cases(np.random.default_rng(seed + 1))
    return cases


NAN, INF = float("nan"), float("inf")
SPECIAL_A = [NAN, 1.0, 0.0, -0.0, INF, NAN, -INF, 0.0, -0.0, 2.0]
SPECIAL_B = [1.0, NAN, -0.0, 0.0, -INF, NAN, -INF, 0.0, -0.0, NAN]
"""Lane pairs of the boundary-value tables (docs/reference/ascendc.md §1.13): NaN first and second, both zeros
in both orders, infinities."""


def _nan_and_zero_cases(rng) -> list[Case]:
    """Max / Min / Maxs / Mins / their repeat forms and the max reductions on NaN, +-0 and +-inf lanes (fp32 and
    half): the meaning (opgen.interp.minmax) and the emulation must agree bit for bit."""
    out = []
    for dt in (np.float32, np.float16):
        a, b = _floats(rng).astype(dt), _floats(rng).astype(dt)
        a[:10], b[:10] = np.array(SPECIAL_A, dt), np.array(SPECIAL_B, dt)
        for op in (Op.MAX, Op.MIN):
            out.append(Case(op, {"dst": _floats(rng).astype(dt), "src0": a, "src1": b}, {"count": "40"},
                            {"count": 40}))
        for op in (Op.MAX_REP, Op.MIN_REP):
            prm = (1, 1, 1, 8, 8, 8)
            out.append(Case(op, {"dst": _floats(rng, n=640).astype(dt), "src0": np.resize(a, 640).astype(dt),
                                 "src1": np.resize(b, 640).astype(dt)},
                            {"mask": "40", "repeat": "2", "params": f"BinaryRepeatParams{prm}"},
                            {"mask": 40, "repeat": 2, "params": prm}))
    for op, scalar in ((Op.MAXS, -0.0), (Op.MAXS, NAN), (Op.MINS, 0.0), (Op.MINS, NAN)):
        src = _floats(rng)
        src[:10] = np.array(SPECIAL_A, np.float32)
        text = '__builtin_nanf("")' if scalar != scalar else _hexf(scalar)
        out.append(Case(op, {"dst": _floats(rng), "src0": src}, {"count": "24", "scalar": text},
                        {"count": 24, "scalar": scalar}))
    for lanes in ([1.0, NAN, 3.0], [-0.0, 0.0, -0.0], [-0.0, -0.0], [-INF, 2.0, INF], [0.0, -0.0]):
        src = _floats(rng, lo=-100, hi=-50)
        src[:len(lanes)] = np.array(lanes, np.float32)
        tmp = max(reduce_max_tmp_elems(N), 64)
        out.append(Case(Op.REDUCE_MAX, {"dst": _floats(rng, n=8), "src": src, "tmp": _floats(rng, n=tmp)},
                        {"count": "37"}, {"count": 37}))
    src = _floats(rng, n=640, lo=-100, hi=-50)
    src[[3, 64 + 5, 64 + 9]] = [NAN, 0.0, -0.0]      # repeat 0: a NaN lane; repeat 1: both zeros above the rest
    src[128 + 7] = -0.0
    vals = {"mask": 64, "repeat": 3, "dstRep": 1, "srcBlk": 1, "srcRep": 8}
    out.append(Case(Op.WHOLE_REDUCE_MAX, {"dst": _floats(rng, n=64), "src": src},
                    {n: str(v) for n, v in vals.items()}, vals))
    return out


def program(cases: list[Case]) -> tuple[str, dict]:
    """The C++ program running every case (one emu::Launch each) over one GM image, and the image layout
    {(case index, operand): (byte offset, array)}. Each UB operand is its own TBuf, filled from GM before the
    instruction and copied back after it when written; GM operands are the image itself."""
    layout: dict = {}
    off = 0
    for k, case in enumerate(cases):
        for name, arr in case.arrays.items():
            layout[(k, name)] = (off, arr)
            off += -(-arr.nbytes // 64) * 64
    helpers = template_env().get_template("op_kernel/_helpers.h.j2").render()
    out = ["#include <cstdio>", "#include <cstring>", "#include <vector>", '#include "kernel_operator.h"',
           '#include "emu/launch.h"', "using namespace AscendC;", helpers, ""]
    for k, case in enumerate(cases):
        d = INSTRS[case.op]
        body, exprs, back = [], {}, []
        for name, arr in case.arrays.items():
            o, ct, n = layout[(k, name)][0], CTYPES[arr.dtype], arr.size
            g = f"g{name}"
            body.append(f"GlobalTensor<{ct}> {g}; {g}.SetGlobalBuffer(reinterpret_cast<{ct}*>(mem + {o}), {n});")
            if d.operand(name).kind == "gm":
                exprs[name] = g
                continue
            body.append(f"TBuf<> b{name}; pipe.InitBuffer(b{name}, {arr.nbytes});")
            body.append(f"LocalTensor<{ct}> t{name} = b{name}.Get<{ct}>();")
            body.append(f"DataCopyPad(t{name}, {g}, DataCopyExtParams(1, {arr.nbytes}, 0, 0, 0), "
                        f"DataCopyPadExtParams<{ct}>(false, 0, 0, {ct}{{}}));")
            exprs[name] = f"t{name}"
            if name in d.writes() and name != "tmp":
                back.append(f"DataCopyPad({g}, t{name}, DataCopyExtParams(1, {arr.nbytes}, 0, 0, 0));")
        for name, target in case.alias.items():
            exprs[name] = exprs[target]
        exprs.update(case.values)
        out.append(f"static emu::LaunchResult Case{k}(uint8_t* mem)")
        out.append("{")
        out.append("    return emu::Launch(1, 196608, [&] {")
        out.append("        TPipe pipe;")
        out += ["        " + ln for ln in body]
        out.append("        PipeBarrier<PIPE_ALL>();")
        out.append("        " + d.stmt(**exprs))
        out.append("        PipeBarrier<PIPE_ALL>();")
        out += ["        " + ln for ln in back]
        out.append("    });")
        out.append("}")
    out.append("int main(int argc, char** argv)")
    out.append("{")
    out.append("    if (argc != 3) return 2;")
    out.append(f"    std::vector<uint8_t> mem({off});")
    out.append("    FILE* f = std::fopen(argv[1], \"rb\");")
    out.append("    if (!f || std::fread(mem.data(), 1, mem.size(), f) != mem.size()) return 3;")
    out.append("    std::fclose(f);")
    out.append("    emu::RegisterGm(mem.data(), mem.size(), \"mem\");")
    for k in range(len(cases)):
        out.append(f"    {{ auto r = Case{k}(mem.data()); std::printf(\"case {k} %d %s\\n\", r.ok ? 1 : 0, "
                   f"r.ok ? \"\" : r.firstFault.c_str()); }}")
    out.append("    f = std::fopen(argv[2], \"wb\");")
    out.append("    std::fwrite(mem.data(), 1, mem.size(), f);")
    out.append("    std::fclose(f);")
    out.append("    return 0;")
    out.append("}")
    return "\n".join(out) + "\n", (layout, off)


@pytest.fixture(scope="module")
def emulated(run_shared, emu_instances, emu_pch):
    """(cases, {case index: {operand: array after the run}}, {case index: fault or ""}): the table's C++ forms run in
    the emulation (one g++ build, reading the emulation header precompiled: tests/conftest.py emu_pch), built and run
    once per run (run_shared), whichever worker runs these tests."""
    if shutil.which("g++") is None:
        pytest.skip("g++ not available")
    cases = build_cases()
    src, (layout, size) = program(cases)

    def fill(d):
        (d / "isa.cpp").write_text(src)
        quick = emu_instances("quick")   # the emulation's shared specializations (tests/conftest.py emu_instances)
        r = subprocess.run(BASE + emu_pch(BASE[1:] + quick[:1]) + [str(d / "isa.cpp"), *quick, "-o", str(d / "isa")],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-4000:]
        image = bytearray(size)
        for (_k, _n), (o, arr) in layout.items():
            image[o:o + arr.nbytes] = np.ascontiguousarray(arr).tobytes()
        (d / "in.bin").write_bytes(bytes(image))
        run = subprocess.run([str(d / "isa"), str(d / "in.bin"), str(d / "out.bin")], capture_output=True, text=True,
                             timeout=120)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        (d / "stdout.txt").write_text(run.stdout)
    d = run_shared("isa-emulated", fill)
    assert (d / "isa.cpp").read_text() == src, "the run's shared isa.cpp is another program"
    faults = {}
    for line in (d / "stdout.txt").read_text().splitlines():
        if line.startswith("case "):
            _c, k, ok, *why = line.split(" ")
            faults[int(k)] = "" if ok == "1" else " ".join(why)
    got = (d / "out.bin").read_bytes()
    results: dict = {}
    for (k, name), (o, arr) in layout.items():
        results.setdefault(k, {})[name] = np.frombuffer(got[o:o + arr.nbytes], dtype=arr.dtype).copy()
    return cases, results, faults


def _ulp_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| in units in the last place of their (same) float type, by ordered bit patterns."""
    ui = {2: np.int16, 4: np.int32}[a.dtype.itemsize]
    ia, ib = a.view(ui).astype(np.int64), b.view(ui).astype(np.int64)
    top = 1 << (8 * a.dtype.itemsize - 1)
    ia = np.where(ia < 0, -top - ia, ia)
    ib = np.where(ib < 0, -top - ib, ib)
    return np.abs(ia - ib)


@pytest.mark.slow   # the `emulated` fixture builds and runs a C++ program
@pytest.mark.parametrize("op", list(Op), ids=lambda o: o.name)
def test_entry_meaning_matches_its_cpp_form_in_the_emulation(emulated, op):
    cases, results, faults = emulated
    mine = [k for k, c in enumerate(cases) if c.op is op]
    assert mine, f"no case for {op.name}"
    d = INSTRS[op]
    for k in mine:
        case = cases[k]
        assert faults[k] == "", f"{op.name} case {k}: the emulation faulted: {faults[k]}"
        want = d.meaning(case.env())
        assert set(want) == {n for n in d.writes() if n != "tmp"} or op in (Op.REDUCE_SUM, Op.REDUCE_MAX)
        for name, arr in want.items():
            if name == "tmp":
                continue
            buf = case.alias.get(name, name)
            got = results[k][buf if buf in results[k] else name]
            assert got.dtype == arr.dtype
            ub = {1: np.uint8, 2: np.uint16, 4: np.uint32}[arr.dtype.itemsize]
            if d.ulps == 0:
                bad = np.nonzero(got.view(ub) != arr.view(ub))[0]
            else:
                bad = np.nonzero(_ulp_diff(got, arr) > d.ulps)[0]
            assert bad.size == 0, (f"{op.name} case {k} ({case.values}): {name}[{bad[0]}] = {got[bad[0]]!r}, "
                                   f"meaning says {arr[bad[0]]!r} (input lanes past count must be untouched)")


def test_every_entry_names_its_pipe_roles_and_form():
    for op, d in INSTRS.items():
        assert d.op is op and d.form.startswith(d.api + "(")
        assert d.writes(), op
        assert d.pipe is (Pipe.V if op not in (Op.COPY_IN, Op.COPY_OUT) else
                          (Pipe.MTE2 if op is Op.COPY_IN else Pipe.MTE3))
        assert "docs/reference/ascendc.md §1." in d.doc
    assert entry("Add").stmt(dst="a", src0="b", src1="c", count="n_") == "Add(a, b, c, n_);"
    with pytest.raises(KeyError):
        entry("Bogus")
    with pytest.raises(KeyError):
        entry("Add").stmt(dst="a", src0="b", count="n")
    with pytest.raises(ValueError):
        entry("Add").stmt(dst="a", src0="b", src1="c", count="n", extra="x")


def test_cost_counts_repeats_on_the_wider_type_and_lanes():
    # 65 floats: 260 B = 2 repeats; Add does 64 lanes a cycle, Div and Exp 32 (docs/reference/ascendc.md §1.9)
    assert INSTRS[Op.ADD].cost(65).repeats == 2 and INSTRS[Op.ADD].cost(65).cycles == 2
    assert INSTRS[Op.DIV].cost(65).cycles == 3 and INSTRS[Op.EXP].cost(64).cycles == 2
    assert INSTRS[Op.ADD].cost(128, 2).repeats == 1 and INSTRS[Op.ADD].cost(129, 2).repeats == 2
    assert INSTRS[Op.ADD].cost(0).repeats == 0
    with pytest.raises(ValueError):
        INSTRS[Op.ADD].cost(-1)


# ------------------------------------------------------------------------------------------------ independent truth
def _table_round(x: np.ndarray, dt, mode: str) -> np.ndarray:
    """Brute force: the two neighbours of |x| among every finite non-negative value of the 16-bit type, chosen by the
    mode's rule in float64 (docs/reference/ascendc.md §1.9), the sign put back."""
    inf = int(np.array([np.inf], dtype=dt).view(np.uint16)[0])
    pos = np.arange(inf, dtype=np.uint16).view(dt).astype(np.float64)
    ax, neg = np.abs(x.astype(np.float64)), np.signbit(x)
    i = np.searchsorted(pos, ax, side="right") - 1
    lo, hi = pos[i], pos[np.minimum(i + 1, len(pos) - 1)]
    out = np.empty(x.shape, dtype=np.int64)
    for j in range(x.size):
        if ax[j] == lo[j]:
            out[j] = i[j]
            continue
        m = mode
        if neg[j] and m in ("CAST_FLOOR", "CAST_CEIL"):
            m = "CAST_CEIL" if m == "CAST_FLOOR" else "CAST_FLOOR"
        dl, dh = ax[j] - lo[j], hi[j] - ax[j]
        up = {"CAST_NONE": dh < dl or (dh == dl and i[j] % 2 == 1), "CAST_RINT": dh < dl or (dh == dl and i[j] % 2 == 1),
              "CAST_FLOOR": False, "CAST_TRUNC": False, "CAST_CEIL": True, "CAST_ROUND": dh <= dl,
              "CAST_ODD": i[j] % 2 == 0}[m]
        out[j] = i[j] + int(up)
    return (out.astype(np.uint16) | np.where(neg, 0x8000, 0).astype(np.uint16)).view(dt)


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16], ids=["half", "bf16"])
@pytest.mark.parametrize("mode", ROUND_MODES)
def test_round_to_16_matches_a_table_of_every_value(dt, mode):
    rng = np.random.default_rng(3)
    x = _cast_inputs(rng, np.dtype(dt))
    x = np.concatenate([x, _cast_inputs(rng, np.dtype(dt))])
    got = round_to_16(x, dt, mode)
    want = _table_round(x, dt, mode)
    bad = np.nonzero(got.view(np.uint16) != want.view(np.uint16))[0]
    assert bad.size == 0, f"{mode}: {x[bad[0]]!r} -> {got[bad[0]]!r}, the table says {want[bad[0]]!r}"
    if mode in ("CAST_RINT", "CAST_NONE"):   # and round to nearest even is what NumPy / ml_dtypes do
        assert np.array_equal(got.view(np.uint16), x.astype(dt).view(np.uint16))


def test_correctly_rounded_meanings_match_float64():
    # fp32 +, -, *, /, sqrt of fp32 operands rounded once from float64 are the correctly rounded results
    rng = np.random.default_rng(5)
    a, b = _floats(rng, lo=-1e3, hi=1e3), _floats(rng, lo=0.5, hi=9.0)
    dst = np.zeros(N, np.float32)
    env = {"dst": dst, "src0": a, "src1": b, "count": N}
    for op, f in ((Op.ADD, np.add), (Op.SUB, np.subtract), (Op.MUL, np.multiply), (Op.DIV, np.divide)):
        want = f(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
        assert np.array_equal(INSTRS[op].meaning(env)["dst"], want), op
    s = INSTRS[Op.SQRT].meaning({"dst": dst, "src0": b, "count": N})["dst"]
    assert np.array_equal(s, np.sqrt(b.astype(np.float64)).astype(np.float32))
    x = a / np.float32(100)
    e = INSTRS[Op.EXP].meaning({"dst": dst, "src0": x, "count": N})["dst"]
    assert np.array_equal(e, np.array([math.exp(float(v)) for v in x], dtype=np.float32))
    ln = INSTRS[Op.LN].meaning({"dst": dst, "src0": b, "count": N})["dst"]
    assert np.array_equal(ln, np.array([math.log(float(v)) for v in b], dtype=np.float32))
    # a tail: lanes past the count keep the destination's contents
    t = INSTRS[Op.ADD].meaning({**env, "count": 65})["dst"]
    assert np.array_equal(t[65:], dst[65:]) and np.array_equal(t[:65], (a + b)[:65])


def test_pairwise_sum_within_the_float64_error_bound():
    rng = np.random.default_rng(11)
    for n in (1, 7, 64, 65, 300, 4097):
        v = rng.uniform(-1, 1, n).astype(np.float32)
        exact = float(np.sum(v.astype(np.float64)))
        bound = np.finfo(np.float32).eps * np.ceil(np.log2(n) + 2) * float(np.sum(np.abs(v.astype(np.float64))))
        assert abs(float(pairwise_sum(v)) - exact) <= bound
    assert pairwise_sum(np.array([1.0, 2.0, 3.0], np.float32)) == np.float32(6.0)


def _tree_sum_one_add_at_a_time(v) -> np.float32:
    """The order pairwise_sum's docstring states, written out with one fp32 scalar add at a time (the reference of
    the test below): per 64-lane repeat lane k += lane k + ceil(len / 2) until one lane is left, then the repeats'
    sums the same way."""
    cur = [np.float32(x) for x in np.asarray(v, np.float32)]
    while len(cur) > 1:
        nxt = []
        for r in range(0, len(cur), 64):
            w = cur[r:r + 64]
            while len(w) > 1:
                h = (len(w) + 1) // 2
                w = [np.float32(w[k] + w[k + h]) if k + h < len(w) else w[k] for k in range(h)]
            nxt.append(w[0])
        cur = nxt
    return cur[0] if cur else np.float32(0)


def test_pairwise_sum_adds_in_the_documented_order_bit_for_bit():
    """pairwise_sum (the full repeats of a level summed as rows of one array) gives the bits of the scalar adds in
    the documented order, on sums whose order shows (magnitudes 1e-30 to 1e30, overflow to inf, NaN, inf - inf),
    at lengths around the 64-lane repeat and its square; and WholeReduceSum's per-repeat sum is that order's
    first level."""
    rng = np.random.default_rng(5)
    with np.errstate(all="ignore"):
        for t, n in enumerate((0, 1, 2, 3, 5, 63, 64, 65, 127, 128, 129, 4095, 4096, 4097, 4160, 9000) * 4):
            v = (rng.standard_normal(n) * 10.0 ** rng.integers(-30, 31, n)).astype(np.float32)
            if t % 4 == 1:
                v = (rng.standard_normal(n) * 1e38).astype(np.float32)
            elif t % 4 == 2 and n:
                v[rng.integers(0, n)] = np.nan
            elif t % 4 == 3 and n > 1:
                v[rng.integers(0, n)], v[rng.integers(0, n)] = np.inf, -np.inf
            assert pairwise_sum(v).tobytes() == _tree_sum_one_add_at_a_time(v).tobytes(), (t, n)
        src = (rng.standard_normal(64 * 5) * 1e3).astype(np.float32)
        got = INSTRS[Op.WHOLE_REDUCE_SUM].meaning({"dst": np.zeros(5, np.float32), "src": src, "mask": 64,
                                                   "repeat": 5, "dstRep": 1, "srcBlk": 1, "srcRep": 8})["dst"]
    assert got.tobytes() == np.array([_tree_sum_one_add_at_a_time(src[64 * r:64 * r + 64]) for r in range(5)],
                                     np.float32).tobytes()


def test_row_program_cost_from_the_table():
    from opgen.kernel.rowprog import Instr, instr_op, is_vector, vector_cost

    prog = [Instr("cast_in", "w0", gm="x"), Instr("vbin", "w1", ("w0", "w0"), "Mul"), Instr("rsum", "s", ("w1",)),
            Instr("vscalar", "w0", ("w0",), "Muls", "s"), Instr("sexpr", "t", arg="s * 2.0f", space="stat"),
            Instr("vunary", "w0", ("w0",), "Exp"), Instr("store", srcs=("w0",), gm="y", arg="CAST_RINT")]
    assert [instr_op(i) for i in prog] == [Op.CAST_FROM, Op.MUL, None, Op.MULS, None, Op.EXP, Op.CAST_TO]
    assert [is_vector(i) for i in prog] == [True, True, False, True, False, True, True]
    # 65 fp32 lanes: 2 repeats each; 2 cycles at 64 lanes, 3 for Exp at 32 lanes; ReduceSum adds its second pass
    c = vector_cost(prog, 65)
    assert c.repeats == 2 * 6 + 1 and c.cycles == 2 * 4 + 3 + (2 + 1)


def test_every_vector_call_of_the_emitted_kernels_is_in_the_table():
    """The AscendC vector calls of docs/reference/ascendc.md §1.9 (and opgen's CastFrom / CastTo) that the emitted
    kernels make are all entries of the table."""
    import re

    from opgen.codegen import default_out_dir
    from opgen.kernel.isa import BY_API

    api = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Adds", "Muls", "Maxs", "Mins", "Exp", "Ln", "Sqrt", "Rsqrt",
           "Abs", "Reciprocal", "Relu", "Duplicate", "CreateVecIndex", "Cast", "CastFrom", "CastTo", "ReduceSum", "ReduceMax",
           "WholeReduceSum", "BlockReduceSum", "Brcb", "Gather", "Axpy", "Compare", "Select", "Transpose"}
    seen = set()
    for h in default_out_dir().glob("*/op_kernel/*.h"):
        seen |= {m for m in re.findall(r"^\s*([A-Z][A-Za-z]*)\(", h.read_text(), re.M) if m in api}
    assert seen and seen <= set(BY_API), seen - set(BY_API)


def test_create_vec_index_meaning_is_first_plus_lane():
    """CreateVecIndex (docs/reference/ascendc.md §1.9): lanes [0, count) hold first + i, the others keep their value;
    fp32 integers stay exact up to 2^24."""
    dst = np.full(300, -1.0, np.float32)
    out = INSTRS[Op.CREATE_VEC_INDEX].meaning({"dst": dst, "scalar": 100.0, "count": 257})["dst"]
    assert out[:257].tolist() == [100.0 + i for i in range(257)] and (out[257:] == -1.0).all()
    big = INSTRS[Op.CREATE_VEC_INDEX].meaning({"dst": np.zeros(64, np.float32), "scalar": 2.0 ** 24 - 64,
                                               "count": 64})["dst"]
    assert big[-1] == 2.0 ** 24 - 1


def test_compare_and_select_refuse_a_partial_repeat():
    """Compare's count covers whole 256-B repeats (docs/reference/ascendc.md §1.9: a partial repeat is ignored on
    the device), and int32 compares only for EQ: the meanings raise instead of computing what the device skips."""
    a = np.zeros(128, np.float32)
    mask = np.zeros(16, np.uint8)
    with pytest.raises(ValueError, match="256-B"):
        INSTRS[Op.COMPARE].meaning({"dst": mask, "src0": a, "src1": a, "mode": "CMPMODE::LT", "count": 65})
    with pytest.raises(ValueError, match="256-B"):
        INSTRS[Op.SELECT].meaning({"dst": a, "mask": mask, "src0": a, "src1": a, "count": 100})
    with pytest.raises(ValueError, match="only EQ"):
        INSTRS[Op.COMPARE].meaning({"dst": mask, "src0": a.astype(np.int32), "src1": a.astype(np.int32),
                                    "mode": "LT", "count": 64})
    got = INSTRS[Op.COMPARE_SCALAR].meaning({"dst": mask, "src0": np.arange(128, dtype=np.float32) % 3,
                                             "scalar": 1.0, "mode": "EQ", "count": 64})["dst"]
    assert got[0] == 0b10010010   # elements 1, 4, 7 of the first eight equal 1


def test_compare_repeat_form_refuses_what_a2_does_not_do():
    """Compare's mask / repeat form: the mask is reserved on A2 / A3 (every lane of a repeat compared), so a partial
    mask is refused, and so are destination strides other than the defaults (the bit mask's layout under them is not
    documented); its bits land contiguously, eight bytes a repeat of fp32 (asc-devkit Compare page, count form)."""
    a = np.arange(640, dtype=np.float32) % 7
    b = np.full(640, 3.0, np.float32)
    env = {"dst": np.zeros(64, np.uint8), "src0": a, "src1": b, "mode": "EQ", "repeat": 2,
           "params": (1, 1, 1, 8, 8, 8)}
    with pytest.raises(ValueError, match="mask 40"):
        INSTRS[Op.COMPARE_REP].meaning({**env, "mask": 40})
    with pytest.raises(ValueError, match="dst strides"):
        INSTRS[Op.COMPARE_REP].meaning({**env, "mask": 64, "params": (1, 1, 1, 16, 8, 8)})
    got = INSTRS[Op.COMPARE_REP].meaning({**env, "mask": 64})["dst"]
    want = np.packbits(a[:128] == 3.0, bitorder="little")
    assert (got[:16] == want).all() and (got[16:] == 0).all()
    sel = INSTRS[Op.SELECT_SCALAR_REP].meaning({"dst": np.full(640, 9.0, np.float32), "mask": got, "src0": a,
                                                "scalar": -1.0, "lanes": 10, "repeat": 2,
                                                "params": (1, 1, 1, 8, 8, 8)})["dst"]
    lanes = np.r_[0:10, 64:74]
    assert (sel[lanes] == np.where(a[lanes] == 3.0, a[lanes], -1.0)).all()
    assert (np.delete(sel, lanes) == 9.0).all()


def test_the_repeat_forms_of_compare_and_select_are_their_lane_by_lane_order():
    """Compare's and Select's (tensor-scalar) mask / repeat forms, computed on whole lane grids, against their
    definition run one lane at a time in the documented order (repeat by repeat, lane by lane, each lane at lane_at;
    docs/reference/ascendc.md §1.9): the same bytes on 600 random shapes -- block and repeat strides 0-9 (overlapping
    and repeated lanes: the later lane's value stays), partial Select masks, 0-12 repeats, every compare mode of fp32
    and half, int32 EQ."""
    from opgen.kernel.isa import BLOCK_BYTES, CMP_MODES, REPEAT_BYTES, lane_at

    def compare_ref(a, b, dst, rep, p, mode):
        sz, lanes = a.dtype.itemsize, REPEAT_BYTES // a.dtype.itemsize
        out = dst.copy()
        for r in range(rep):
            x = np.array([a[lane_at(r, k, p[1], p[4], sz)] for k in range(lanes)])
            y = np.array([b[lane_at(r, k, p[2], p[5], sz)] for k in range(lanes)])
            if a.dtype != np.int32:
                x, y = x.astype(np.float64), y.astype(np.float64)
            out[r * lanes // 8:(r + 1) * lanes // 8] = np.packbits(CMP_MODES[mode](x, y), bitorder="little")
        return out

    def select_ref(a, mask, dst, s, rep, lanes, p):
        sz, full = a.dtype.itemsize, REPEAT_BYTES // a.dtype.itemsize
        bits = np.unpackbits(mask, bitorder="little")
        out = dst.copy()
        for r in range(rep):
            for k in range(lanes):
                out[lane_at(r, k, p[0], p[3], sz)] = a[lane_at(r, k, p[1], p[4], sz)] if bits[r * full + k] else s
        return out

    rng = np.random.default_rng(7)
    for case in range(600):
        dt = (np.float32, np.float16, np.int32)[case % 3]
        sz = np.dtype(dt).itemsize
        lanes, per = REPEAT_BYTES // sz, BLOCK_BYTES // sz
        rep = int(rng.integers(0, 13))
        strides = [int(x) for x in rng.integers(0, 10, 6)]
        strides[0] = max(strides[0], 1)
        span = ((rep + 1) * 9 + 8 * 9 + 1) * per
        a = rng.integers(-3, 4, span).astype(dt)
        b = rng.integers(-3, 4, span).astype(dt)
        if dt != np.int32:
            a[rng.integers(0, span, 5)] = np.nan
        mode = "EQ" if dt == np.int32 else str(rng.choice(sorted(CMP_MODES)))
        cmp_p = (1, strides[1], strides[2], 8, strides[4], strides[5])
        dst = rng.integers(0, 256, max(rep, 1) * lanes // 8).astype(np.uint8)
        env = {"dst": dst, "src0": a, "src1": b, "mode": mode, "repeat": rep, "mask": lanes, "params": cmp_p}
        got = INSTRS[Op.COMPARE_REP].meaning(env)["dst"]
        assert np.array_equal(got, compare_ref(a, b, dst, rep, cmp_p, mode)), (case, rep, cmp_p, mode)
        if dt == np.int32:
            continue
        mask = rng.integers(0, 256, 13 * lanes // 8).astype(np.uint8)
        n = int(rng.integers(1, lanes + 1))
        sdst = rng.integers(-9, 9, span).astype(dt)
        s = dt(2.5)
        env = {"dst": sdst, "mask": mask, "src0": a, "scalar": s, "lanes": n, "repeat": rep,
               "params": tuple(strides)}
        got = INSTRS[Op.SELECT_SCALAR_REP].meaning(env)["dst"]
        want = select_ref(a, mask, sdst, s, rep, n, strides)
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (case, rep, n, strides)
