"""The instruction table: every vector instruction (and UB<->GM count copy) opgen's kernel printers emit, keyed by an
enum, each with its operands and their roles, its pipe, its AscendC C++ form, its NumPy meaning and its cost.

One table feeds the C++ printer (opgen.kernel.kir's CppPrinter prints `INSTRS[op].stmt(...)` for every family), the dependency analysis of the vector pipe (`InstrDef.reads` / `InstrDef.writes`, the
operand roles), the counts (`InstrDef.pipe`, `InstrDef.cost`) and tests/test_isa.py, which runs every entry's C++
form in the emulation (opgen/emu/include) on random data, tails included, against its NumPy meaning.

Sources of the facts (docs/reference/ascendc.md): §1.9 for the count forms, their operand order and types (a
scalar operand is exactly T; `count` int32 for the arithmetic, uint32 for Cast and Gather), the tail rule (a count
form computes lanes [0, count) and leaves every other destination lane as it was), the repeat geometry (256 B per
repeat, counted on the wider type of a converting instruction) and lanes per cycle, Cast round modes and allowed
conversions, ReduceSum / ReduceMax, Gather (byte offsets), Brcb (block strides); §1.8 for DataCopy (count·sizeof(T)
a multiple of 32 B, rounded down by the hardware); §1.6 for the pipes (PIPE_V for vector instructions, MTE2 for
GM->UB, MTE3 for UB->GM). CastFrom / CastTo are opgen's own device helpers (templates/op_kernel/_helpers.h.j2):
a Cast, or a Muls by 1.0 when both sides are fp32; their entries describe the helper as printed.

NumPy meanings take and return NumPy arrays of the operand's element type (np.float32, np.float16,
ml_dtypes.bfloat16, np.uint32 offsets): `meaning(env)` gets {operand name: array or Python scalar} (the destination
included, whole buffer) and returns {written operand name: new array} (a copy, lanes outside the written range
unchanged). Float arithmetic is fp32 IEEE with round-to-nearest-even, as the vector unit computes fp32
(docs/reference/ascendc.md §1.9); Exp and Ln are float64 results rounded once to fp32 (the device's are not
documented to the ulp: tests allow one ulp against the emulation there, see `InstrDef.ulps`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable

import ml_dtypes
import numpy as np

from opgen.interp.minmax import ieee_max, ieee_min, reduce_max
from opgen.interp.rounding import float_to_int, int_to_float
from opgen.ir.dtypes import DType

FP32_MAX = float(np.finfo(np.float32).max)
"""The largest finite fp32 value (FLT_MAX): the floor of a running maximum that must stay finite (COL_STREAM's
online softmax, opgen.codegen.kernel) and NSA's masked score value (printed as FLT_MAX_VALUE)."""

REPEAT_BYTES = 256
"""Bytes one vector repeat covers: 8 blocks of 32 B (docs/reference/ascendc.md §1.9)."""
BLOCK_BYTES = 32
"""Bytes of one data block (docs/reference/ascendc.md §1.9)."""

NP_DTYPE = {"float": np.dtype(np.float32), "half": np.dtype(np.float16), "bfloat16_t": np.dtype(ml_dtypes.bfloat16),
            "int32_t": np.dtype(np.int32), "uint32_t": np.dtype(np.uint32), "uint8_t": np.dtype(np.uint8),
            "int8_t": np.dtype(np.int8), "uint16_t": np.dtype(np.uint16), "int16_t": np.dtype(np.int16)}
"""NumPy element type of each C++ element type an instruction's operands use."""

ROUND_MODES = ("CAST_NONE", "CAST_RINT", "CAST_FLOOR", "CAST_CEIL", "CAST_ROUND", "CAST_TRUNC", "CAST_ODD")
"""Cast round modes of arch 2201 (docs/reference/ascendc.md §1.9; CAST_HYBRID does not exist there)."""

CAST_MODES = {("half", "float"): ("CAST_NONE",), ("bfloat16_t", "float"): ("CAST_NONE",),
              ("float", "half"): ROUND_MODES,
              ("float", "bfloat16_t"): ("CAST_RINT", "CAST_FLOOR", "CAST_CEIL", "CAST_ROUND", "CAST_TRUNC"),
              ("float", "int32_t"): ("CAST_RINT", "CAST_FLOOR", "CAST_CEIL", "CAST_ROUND", "CAST_TRUNC"),
              ("int32_t", "float"): ("CAST_NONE", "CAST_RINT", "CAST_FLOOR", "CAST_CEIL", "CAST_ROUND", "CAST_TRUNC"),
              ("half", "int8_t"): ("CAST_NONE", "CAST_RINT", "CAST_FLOOR", "CAST_CEIL", "CAST_ROUND", "CAST_TRUNC"),
              ("half", "uint8_t"): ("CAST_NONE", "CAST_RINT", "CAST_FLOOR", "CAST_CEIL", "CAST_ROUND", "CAST_TRUNC"),
              ("uint8_t", "half"): ("CAST_NONE",), ("int8_t", "half"): ("CAST_NONE",)}
"""{(source type, destination type): round modes accepted} of the Cast conversions opgen emits (A2/A3,
docs/reference/ascendc.md §1.9: half/bf16 -> float CAST_NONE only; float -> half every mode; float -> bf16 not
CAST_NONE, and not CAST_ODD as the emulation enforces; float -> int32 a rounding mode, saturating, NaN -> 0,
int32 -> float rounding above 2^24, half -> int8 / uint8 the modes (NONE = RINT) with saturation, uint8 / int8 -> half
exact with CAST_NONE, §1.12)."""


class Pipe(enum.Enum):
    """The pipe an instruction issues on (docs/reference/ascendc.md §1.6): its value is the C++ pipe name."""

    V = "PIPE_V"
    MTE2 = "PIPE_MTE2"
    MTE3 = "PIPE_MTE3"
    S = "PIPE_S"          # the scalar unit (GetValue / SetValue, scalar arithmetic)
    MTE1 = "PIPE_MTE1"    # L1 -> L0A / L0B
    M = "PIPE_M"          # the cube unit
    FIX = "PIPE_FIX"      # L0C -> GM / L1 (fixpipe)
    ALL = "PIPE_ALL"      # every pipe (PipeBarrier<PIPE_ALL> only; no instruction issues on it)


class Op(enum.Enum):
    """Every instruction of the table (the value is the AscendC / helper function name printed)."""

    ADD = "Add"
    SUB = "Sub"
    MUL = "Mul"
    DIV = "Div"
    MAX = "Max"
    MIN = "Min"
    ADDS = "Adds"
    MULS = "Muls"
    MAXS = "Maxs"
    MINS = "Mins"
    EXP = "Exp"
    LN = "Ln"
    SQRT = "Sqrt"
    RSQRT = "Rsqrt"
    ABS = "Abs"
    RECIPROCAL = "Reciprocal"
    RELU = "Relu"
    AXPY = "Axpy"
    DUPLICATE = "Duplicate"
    CREATE_VEC_INDEX = "CreateVecIndex"
    CAST = "Cast"
    CAST_FROM = "CastFrom"
    CAST_TO = "CastTo"
    REDUCE_SUM = "ReduceSum"
    REDUCE_MAX = "ReduceMax"
    GATHER = "Gather"
    BRCB = "Brcb"
    AND = "And"
    OR = "Or"
    NOT = "Not"
    COMPARE = "Compare"
    COMPARE_SCALAR = "Compares"   # CANN's name (CompareScalar is its deprecated alias)
    SELECT = "Select"
    SELECT_SCALAR = "Select "   # same C++ name, the tensor-scalar form (distinct enum value)
    COMPARE_REP = "Compare "   # the mask / repeat form of Compare (BinaryRepeatParams; distinct enum value)
    SELECT_SCALAR_REP = "Select  "   # the mask / repeat form of Select's tensor-scalar mode (distinct enum value)
    ADD_REP = "Add "       # the mask / repeat forms: same C++ names (distinct enum values), BinaryRepeatParams
    SUB_REP = "Sub "
    MUL_REP = "Mul "
    DIV_REP = "Div "
    MAX_REP = "Max "
    MIN_REP = "Min "
    WHOLE_REDUCE_SUM = "WholeReduceSum"
    WHOLE_REDUCE_MAX = "WholeReduceMax"
    COPY_IN = "DataCopy"
    COPY_OUT = "DataCopy "   # same C++ name, the UB -> GM direction (distinct enum value)


INSTR_T = "T"
"""The table's placeholder for an instruction's one element type (an operand's dtype)."""
TYPE_PARAMS = frozenset({INSTR_T, "D", "S"})
"""Operand element types that are the instruction's own C++ type parameters (T: its one type; D / S: a Cast's
destination and source types), not concrete types: an operand of such a type may hold any element type the
entry allows."""


@dataclass(frozen=True)
class Operand:
    """One operand of an instruction's C++ form.

    name: its placeholder in the form ("dst", "src0", "scalar", "count", ...); kind: "ub" (a LocalTensor in UB),
    "gm" (a GlobalTensor), "scalar" (a C++ value of the element type), "count" (an element count), "mode" (a
    RoundMode), "cmp" (a CMPMODE enumerator: LT GT EQ LE GE NE), "value" (another by-value argument: byte base, repeat time, repeat params); access: "r", "w" or
    "rw" for tensors (a "w" destination keeps the lanes the instruction does not write), "" for values; dtype: the
    C++ element type ("T": the instruction's type parameter)."""

    name: str
    kind: str
    access: str = ""
    dtype: str = "T"


@dataclass(frozen=True)
class Cost:
    """Cost of one instruction: repeats (256-B repeats on the wider type) and cycles (elements / lanes per cycle);
    docs/reference/ascendc.md §1.9."""

    repeats: int
    cycles: int


@dataclass(frozen=True)
class InstrDef:
    """One entry of the table (module docstring).

    op: its key; operands: in C++ argument order; pipe; form: the C++ call with `{name}` placeholders per operand
    (printed by `call` / `stmt`); meaning: the NumPy meaning (module docstring); lanes: elements per cycle by
    element bytes ({4: 64, 2: 128}; docs/reference/ascendc.md §1.9); ulps: the tolerance, in units in the last
    place of the destination type, of the meaning against the device / emulation (0 = exact); doc: one line with
    the section the facts come from; scalar_head: the device writes dst's first 32-B block on the scalar unit
    (SetValue) and hands S over to V itself before the vector part (CreateVecIndex): a vector access of that block
    before it needs a V -> S wait (the emulation, the interpreter and the dependency pass follow this field)."""

    op: Op
    operands: tuple[Operand, ...]
    pipe: Pipe
    form: str
    meaning: Callable[[dict], dict]
    lanes: dict = field(default_factory=lambda: {4: 64, 2: 128})
    ulps: int = 0
    doc: str = ""
    scalar_head: bool = False

    @property
    def api(self) -> str:
        """The C++ function name printed."""
        return self.op.value.strip()

    def operand(self, name: str) -> Operand:
        """The operand `name`. Raises KeyError."""
        for o in self.operands:
            if o.name == name:
                return o
        raise KeyError(name)

    def reads(self) -> tuple[str, ...]:
        """Names of the tensor operands the instruction reads (access r or rw)."""
        return tuple(o.name for o in self.operands if "r" in o.access)

    def writes(self) -> tuple[str, ...]:
        """Names of the tensor operands the instruction writes (access w or rw)."""
        return tuple(o.name for o in self.operands if "w" in o.access)

    def call(self, **exprs: str) -> str:
        """The C++ call expression with every operand placeholder replaced by its C++ expression (`exprs`: {operand
        name: C++ text}; a scalar is a C++ expression of the element type, docs/reference/ascendc.md §1.9).
        Raises KeyError naming a missing operand, ValueError for an unknown one."""
        names = {o.name for o in self.operands}
        extra = set(exprs) - names
        if extra:
            raise ValueError(f"{self.api}: no operand {sorted(extra)[0]}")
        missing = [o.name for o in self.operands if o.name not in exprs and "{" + o.name + "}" in self.form]
        if missing:
            raise KeyError(f"{self.api}: operand {missing[0]} not given")
        return self.form.format(**exprs)

    def stmt(self, **exprs: str) -> str:
        """`call(**exprs)` as a C++ statement (ends with ';')."""
        return self.call(**exprs) + ";"

    def cost(self, count: int, elem_bytes: int = 4) -> Cost:
        """Cost of `count` elements of `elem_bytes` bytes (the wider type of a converting instruction):
        ceil(count·bytes / 256) repeats and ceil(count / lanes) cycles (docs/reference/ascendc.md §1.9). A
        reduction also pays a second pass over its per-repeat partials. Raises ValueError for a negative count."""
        if count < 0:
            raise ValueError(f"{self.api}: negative count {count}")
        rep = -(-count * elem_bytes // REPEAT_BYTES)
        lanes = self.lanes.get(elem_bytes, REPEAT_BYTES // elem_bytes)
        cyc = -(-count // lanes)
        if self.op in (Op.REDUCE_SUM, Op.REDUCE_MAX) and rep > 1:
            cyc += -(-rep // lanes)
            rep += -(-rep * elem_bytes // REPEAT_BYTES)
        return Cost(rep, cyc)


# ------------------------------------------------------------------------------------------------ NumPy meanings
def _count(env, n: int) -> int:
    c = int(env["count"])
    if c < 0 or c > n:
        raise ValueError(f"count {c} outside 0..{n}")
    return c


def _lanewise(f, nsrc: int, scalar: bool = False):
    """Meaning of a count-form elementwise instruction: dst[:count] = f(src...[:count] (, scalar)) computed in fp32 and
    rounded to dst's type (for half operands: the fp32 result rounded to nearest even, the emulation's model of the
    half datapath); lanes >= count keep their values (docs/reference/ascendc.md §1.9)."""

    def meaning(env):
        dst = np.array(env["dst"], copy=True)
        c = _count(env, dst.size)
        args = [np.asarray(env[f"src{k}"])[:c].astype(np.float32) for k in range(nsrc)]
        if scalar:
            args.append(np.float32(env["scalar"]))
        with np.errstate(all="ignore"):
            dst[:c] = np.asarray(f(*args), dtype=np.float32).astype(dst.dtype)
        return {"dst": dst}

    return meaning


def _bitwise(f, nsrc: int):
    """Meaning of And / Or / Not (count form, int16 / uint16 operands): dst[:count] = f(src...[:count]) bit by bit
    (docs/reference/ascendc.md §1.9)."""

    def meaning(env):
        dst = np.array(env["dst"], copy=True)
        c = _count(env, dst.size)
        args = [np.asarray(env[f"src{k}"])[:c] for k in range(nsrc)]
        if dst.dtype not in (np.int16, np.uint16):
            raise ValueError(f"bitwise instruction on {dst.dtype}: int16 or uint16 operands only")
        dst[:c] = np.asarray(f(*args)).astype(dst.dtype)
        return {"dst": dst}

    return meaning


def _dup(env):
    dst = np.array(env["dst"], copy=True)
    dst[:_count(env, dst.size)] = np.asarray(env["scalar"]).astype(dst.dtype)
    return {"dst": dst}


def _vec_index(env):
    """CreateVecIndex: dst[i] = firstValue + i for i < count, computed in the element type (fp32 / half: the sum
    rounded once, exact for integers below 2^24 / 2^11; int16 / int32 exact)."""
    dst = np.array(env["dst"], copy=True)
    c = _count(env, dst.size)
    if dst.dtype.kind == "f":
        vals = np.float64(env["scalar"]) + np.arange(c, dtype=np.float64)
    else:
        vals = int(env["scalar"]) + np.arange(c, dtype=np.int64)
    dst[:c] = vals.astype(dst.dtype)
    return {"dst": dst}


def _bits16(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(np.uint16)


def round_to_16(x: np.ndarray, dtype, mode: str) -> np.ndarray:
    """fp32 array `x` rounded to the 16-bit float type `dtype` (np.float16 or ml_dtypes.bfloat16) with Cast round mode
    `mode` (ROUND_MODES; docs/reference/ascendc.md §1.9: NONE and RINT to nearest, ties to even; FLOOR / CEIL / TRUNC
    toward -inf / +inf / 0; ROUND to nearest, ties away from zero; ODD: an inexact result takes the neighbour whose
    last mantissa bit is 1). Works on magnitudes: the two representable neighbours of |x| are found from the
    round-to-nearest-even result and its bit-pattern successor / predecessor, compared in float64. A magnitude above
    the largest finite value rounds to it under TRUNC and toward zero, else to infinity; NaN stays NaN.
    Raises ValueError for an unknown mode."""
    if mode not in ROUND_MODES:
        raise ValueError(f"unknown round mode {mode}")
    x = np.asarray(x, dtype=np.float32)
    dt = np.dtype(dtype)
    neg = np.signbit(x)
    ax = np.abs(x).astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        near = np.abs(x).astype(dt)
    nb = _bits16(near).astype(np.int64)
    inf_bits = int(_bits16(np.array([np.inf], dtype=dt))[0])
    nv = near.astype(np.float64)
    lo_b = np.where(nv > ax, nb - 1, nb)
    hi_b = np.where(nv < ax, nb + 1, nb)
    lo_b = np.clip(lo_b, 0, inf_bits)
    hi_b = np.clip(hi_b, 0, inf_bits)
    lo = lo_b.astype(np.uint16).view(dt).astype(np.float64)
    hi = hi_b.astype(np.uint16).view(dt).astype(np.float64)
    exact = lo == ax
    if mode in ("CAST_NONE", "CAST_RINT"):
        pick = nb
    else:
        m = np.full(x.shape, mode, dtype=object)
        if mode in ("CAST_FLOOR", "CAST_CEIL"):   # toward -inf on a negative value = away from zero on its magnitude
            m = np.where(neg, "CAST_CEIL" if mode == "CAST_FLOOR" else "CAST_FLOOR", mode)
        with np.errstate(invalid="ignore"):
            d_lo, d_hi = ax - lo, hi - ax
        up = np.zeros(x.shape, dtype=bool)
        up |= m == "CAST_CEIL"
        up |= (m == "CAST_ROUND") & (d_hi <= d_lo)
        up |= (m == "CAST_ODD") & (lo_b % 2 == 0)
        pick = np.where(exact, lo_b, np.where(up, hi_b, lo_b))
        if mode == "CAST_ODD":   # beyond the largest finite value: stays at it (odd) rather than infinity
            pick = np.where(hi_b >= inf_bits, np.where(exact, lo_b, inf_bits - 1), pick)
    pick = np.where(np.isnan(x), int(_bits16(np.array([np.nan], dtype=dt))[0]), pick)
    pick = np.where(np.isinf(x), inf_bits, pick)
    bits = pick.astype(np.uint16) | np.where(neg, 0x8000, 0).astype(np.uint16)
    return bits.view(dt)


def _cast(env):
    """Cast count form: dst[:count] = src[:count] converted with round mode env["mode"] ("CAST_RINT" or
    "RoundMode::CAST_RINT"); widening conversions are exact, float <-> int32 as the interpreter's cast
    (opgen.interp.rounding: rounded with the mode, saturated, NaN -> 0; docs/reference/ascendc.md §1.9, §1.12)."""
    dst = np.array(env["dst"], copy=True)
    src = np.asarray(env["src"])
    c = _count(env, min(dst.size, src.size))
    mode = str(env["mode"]).split("::")[-1]
    ir_mode = mode.split("CAST_")[-1].lower()   # the interpreter's spelling (opgen.interp.rounding)
    rounding = mode not in ("CAST_NONE", "CAST_ODD")
    if (src.dtype == np.int64 and dst.dtype == np.float32 or src.dtype == np.float32
            and dst.dtype in (np.int16, np.int64)) and not rounding:
        raise ValueError(f"Cast {src.dtype} -> {dst.dtype} needs CAST_RINT / FLOOR / CEIL / ROUND / TRUNC, not {mode}")
    if src.dtype == np.int16 and dst.dtype == np.float32 and mode != "CAST_NONE":
        raise ValueError(f"Cast int16 -> float32 takes CAST_NONE only, not {mode}")
    if src.dtype in (np.int32, np.int64) and dst.dtype == np.float32:
        dst[:c] = int_to_float(src[:c], DType.f32, ir_mode)
    elif src.dtype == np.float32 and dst.dtype in (np.int32, np.int16, np.int64):
        to = {np.dtype(np.int32): DType.i32, np.dtype(np.int16): DType.i16, np.dtype(np.int64): DType.i64}[dst.dtype]
        dst[:c] = float_to_int(src[:c], DType.f32, to, ir_mode).astype(dst.dtype)
    elif src.dtype == np.float16 and dst.dtype in (np.int8, np.uint8):
        to = DType.i8 if dst.dtype == np.int8 else DType.u8
        dst[:c] = float_to_int(src[:c], DType.f16, to, ir_mode).astype(dst.dtype)
    elif src.dtype in (np.int8, np.uint8) and dst.dtype == np.float16:
        dst[:c] = src[:c].astype(np.float16)   # exact: every int8 / uint8 value is a half
    elif dst.dtype == np.float32:
        dst[:c] = src[:c].astype(np.float32)
    elif src.dtype == np.float32 and dst.dtype in (np.float16, ml_dtypes.bfloat16):
        dst[:c] = round_to_16(src[:c], dst.dtype, mode)
    else:
        raise ValueError(f"Cast {src.dtype} -> {dst.dtype} has no meaning in the table")
    return {"dst": dst}


def _cast_to(env):
    """CastTo (templates/op_kernel/_helpers.h.j2): a copy (Muls by 1.0) into an fp32 destination, else Cast."""
    dst = np.asarray(env["dst"])
    if dst.dtype == np.float32:
        return _lanewise(lambda a: a * np.float32(1.0), 1)({"dst": dst, "src0": env["src"], "count": env["count"]})
    return _cast(env)


def _cast_from(env):
    """CastFrom (templates/op_kernel/_helpers.h.j2): src to fp32, CAST_NONE (exact), or CAST_RINT for int64 (the
    only source A2 / A3 convert with a rounding mode: no CAST_NONE there, docs/reference/ascendc.md §1.9)."""
    wide = np.asarray(env["src"]).dtype == np.int64
    return _cast({**env, "mode": "CAST_RINT" if wide else "CAST_NONE"})


def _halving(w: np.ndarray) -> np.ndarray:
    """Per row of `w` (float32 [rows, lanes], lanes >= 1) the fp32 sum of its lanes in the emulation's order within
    one repeat: while more than one lane is left, lane k += lane k + ceil(len / 2) for every k with a partner, every
    add rounded to fp32 (NumPy's float32 add of two float32 arrays, lane by lane: the same roundings as one scalar add
    each). Returns float32 [rows]."""
    while w.shape[1] > 1:
        n = w.shape[1]
        h = (n + 1) // 2
        head = w[:, :h].copy()
        head[:, :n - h] += w[:, h:]
        w = head
    return w[:, 0]


def pairwise_sum(v: np.ndarray) -> np.float32:
    """fp32 sum of `v` (any shape, read flat) in the order the emulation's ReduceSum uses (opgen/emu/include/emu/
    vector.h): per 256-B repeat a halving tree (lane k += lane k + ceil(len/2)), then the per-repeat sums reduced the
    same way until one is left, every add rounded to fp32; 0 for an empty `v`. docs/reference/ascendc.md §1.9 leaves
    the order across repeats to the implementation, so this is the emulation's documented assumption, checked against
    float64 within the error bound in tests. The full repeats of a level are summed as the rows of one array
    (_halving), the shorter last one on its own."""
    cur = np.asarray(v, dtype=np.float32).reshape(-1)
    lanes = REPEAT_BYTES // 4
    while cur.size > 1:
        full = cur.size // lanes
        parts = []
        if full:
            parts.append(_halving(cur[:full * lanes].reshape(full, lanes)))
        if cur.size > full * lanes:
            parts.append(_halving(cur[full * lanes:].reshape(1, -1)))
        cur = np.concatenate(parts) if len(parts) > 1 else parts[0]
    return np.float32(cur[0]) if cur.size else np.float32(0)


def reduce_max_tmp_elems(count: int, elem_bytes: int = 4) -> int:
    """Elements of ReduceMax's shared temporary buffer without the index: one (value, index) pair per 256-B repeat,
    rounded up to a 32-B block (CANN API "ReduceMax", as docs/reference/ascendc.md §1.9 and the emulation)."""
    per_rep, per_blk = REPEAT_BYTES // elem_bytes, BLOCK_BYTES // elem_bytes
    return -(-(-(-count // per_rep) * 2) // per_blk) * per_blk


def _reduce(fn):
    def meaning(env):
        dst = np.array(env["dst"], copy=True)
        src = np.asarray(env["src"])
        c = _count(env, src.size)
        if c > 0:
            dst[0] = fn(src[:c])
        return {"dst": dst}

    return meaning


def _gather(env):
    """dst[i] = src[(base + offset[i]) / sizeof(T)] for i < count; offsets are bytes (docs/reference/ascendc.md §1.9).
    Raises ValueError for an offset that is not a multiple of sizeof(T) or lies past src."""
    dst = np.array(env["dst"], copy=True)
    src = np.asarray(env["src"])
    off = np.asarray(env["offset"], dtype=np.uint64)
    c = _count(env, dst.size)
    byte = off[:c] + np.uint64(int(env["base"]))
    size = src.dtype.itemsize
    if np.any(byte % size) or np.any(byte // size >= src.size):
        raise ValueError("Gather: a byte offset is misaligned or past the source")
    dst[:c] = src[(byte // size).astype(np.int64)]
    return {"dst": dst}


def _axpy(env):
    """dst[:count] = dst + src0 * scalar in fp32, the product rounded to fp32 before the sum (the emulation's model,
    docs/reference/kernel_cost.md §4: the same bits as Muls then Add); lanes >= count keep their values
    (docs/reference/ascendc.md §1.9, Axpy)."""
    dst = np.array(env["dst"], copy=True)
    c = _count(env, dst.size)
    x = np.asarray(env["src0"])[:c].astype(np.float32)
    with np.errstate(all="ignore"):
        prod = (x * np.float32(env["scalar"])).astype(np.float32)
        dst[:c] = (dst[:c].astype(np.float32) + prod).astype(np.float32).astype(dst.dtype)
    return {"dst": dst}


def _brcb(env):
    """Repeat r takes src[r*8 .. r*8+8) and fills the 32-B block of dst at (r·dstRepStride + j·dstBlkStride) blocks
    with element j (docs/reference/ascendc.md §1.9, BrcbRepeatParams{dstBlkStride, dstRepStride})."""
    dst = np.array(env["dst"], copy=True)
    src = np.asarray(env["src"])
    per = BLOCK_BYTES // dst.dtype.itemsize
    blk, rep = (int(x) for x in env["params"])
    for r in range(int(env["repeat"])):
        for j in range(8):
            b = (r * rep + j * blk) * per
            dst[b:b + per] = src[r * 8 + j]
    return {"dst": dst}


def lane_at(r: int, lane: int, blk: int, rep: int, elem_bytes: int) -> int:
    """Element index of lane `lane` of repeat `r` of a mask / repeat form: (r·rep + (lane // perBlock)·blk)·perBlock
    + lane % perBlock, strides in 32-byte blocks (docs/reference/ascendc.md §1.9)."""
    per = BLOCK_BYTES // elem_bytes
    return (r * rep + (lane // per) * blk) * per + lane % per


def lane_grid(rep: int, mask: int, blk: int, rep_stride: int, elem_bytes: int) -> np.ndarray:
    """`lane_at` of every lane of repeats 0..rep-1 (lanes 0..mask-1), repeat-major: int64 element indices, shape
    [rep * mask] (docs/reference/ascendc.md §1.9)."""
    per = BLOCK_BYTES // elem_bytes
    r = np.arange(rep, dtype=np.int64)[:, None]
    k = np.arange(mask, dtype=np.int64)[None, :]
    return ((r * rep_stride + (k // per) * blk) * per + k % per).reshape(-1)


def _check_mask(mask: int, elem_bytes: int, what: str) -> None:
    if not 1 <= mask <= REPEAT_BYTES // elem_bytes:
        raise ValueError(f"{what}: mask {mask} outside 1..{REPEAT_BYTES // elem_bytes}")


def _binary_repeat(f):
    """Meaning of a binary mask / repeat form (BinaryRepeatParams: dst, src0, src1 block strides, then their repeat
    strides): for repeat r < repeat and lane l < mask, dst at lane_at(r, l, dstBlk, dstRep) = f(src0 at its lane,
    src1 at its lane) in fp32, rounded to dst's type; the other elements keep their values; a repeat reads its
    sources before it writes (docs/reference/ascendc.md §1.9). With env["src1_is_dst"] (src1 is dst's own region:
    the device's accumulation form, dst's or src1's repeat stride 0) src1 is read from dst as the earlier repeats
    left it. Raises ValueError for a mask outside one repeat or a destination block stride 0."""

    def meaning(env):
        dst = np.array(env["dst"], copy=True)
        a, b = np.asarray(env["src0"]), np.asarray(env["src1"])
        mask, rep = int(env["mask"]), int(env["repeat"])
        db, ab, bb, dr, ar, br = (int(x) for x in env["params"])
        sz = dst.dtype.itemsize
        _check_mask(mask, sz, "binary repeat form")
        if db == 0:
            raise ValueError("binary repeat form: dstBlkStride 0 (a destination block stride must not be 0)")
        ia, ib, idst = (lane_grid(rep, mask, x, y, sz) for x, y in ((ab, ar), (bb, br), (db, dr)))
        if not env.get("src1_is_dst"):   # no repeat reads another's writes: all repeats at once
            with np.errstate(all="ignore"):
                out = np.asarray(f(a[ia].astype(np.float32), b[ib].astype(np.float32)), dtype=np.float32)
            dst[idst] = out.astype(dst.dtype)
            return {"dst": dst}
        for r in range(rep):             # accumulation: src1 is dst as the earlier repeats left it
            sl = slice(r * mask, (r + 1) * mask)
            with np.errstate(all="ignore"):
                out = np.asarray(f(a[ia[sl]].astype(np.float32), dst[ib[sl]].astype(np.float32)), dtype=np.float32)
            dst[idst[sl]] = out.astype(dst.dtype)
        return {"dst": dst}

    return meaning


def _halving_sum(v) -> np.float32:
    """fp32 sum of one repeat's lanes `v` (non-empty, 1-D) in the emulation's order (lane k += lane k + ceil(len / 2),
    every add rounded; pairwise_sum's step inside a repeat, _halving)."""
    return np.float32(_halving(np.asarray(v, dtype=np.float32).reshape(1, -1))[0])


def _first_max(v):
    """The largest of the lanes `v` (a non-empty 1-D array) as ReduceMax / WholeReduceMax give it (reduce_max: NaN if
    any lane is NaN, +0.0 above -0.0)."""
    return reduce_max(v)[()]


def _whole_reduce(fn):
    """Meaning of WholeReduceSum / WholeReduceMax (ORDER_ONLY_VALUE): for repeat r < repeat, dst[r·dstRep] = fn of
    the lanes l < mask of src at lane_at(r, l, srcBlk, srcRep); dstRep counted in elements (docs/reference/ascendc.md
    §1.9 table). Raises ValueError for a mask outside one repeat or a repeat outside 0..255."""

    def meaning(env):
        dst = np.array(env["dst"], copy=True)
        src = np.asarray(env["src"])
        mask, rep = int(env["mask"]), int(env["repeat"])
        dr, sb, sr = int(env["dstRep"]), int(env["srcBlk"]), int(env["srcRep"])
        _check_mask(mask, src.dtype.itemsize, "WholeReduce")
        if not 0 <= rep <= 255:
            raise ValueError(f"WholeReduce: repeatTime {rep} outside 0..255")
        for r in range(rep):
            v = src[[lane_at(r, k, sb, sr, src.dtype.itemsize) for k in range(mask)]].astype(np.float32)
            dst[r * dr] = np.float32(fn(v)).astype(dst.dtype)
        return {"dst": dst}

    return meaning


CMP_MODES = {"LT": np.less, "GT": np.greater, "EQ": np.equal, "LE": np.less_equal, "GE": np.greater_equal,
             "NE": np.not_equal}
"""AscendC's CMPMODE enumerators and their NumPy comparisons (docs/reference/ascendc.md §1.9)."""


def _whole_repeats(c: int, elem: np.dtype, what: str) -> None:
    if (c * elem.itemsize) % REPEAT_BYTES:
        raise ValueError(f"{what}: count {c} x {elem.itemsize} B is not a whole number of 256-B repeats")


def _compare(scalar: bool):
    """Compare / Compares count form: bit i of the uint8 dst (bit i % 8 of byte i / 8) = src0[i] op src1[i]
    (or op scalar) for i < count; count·sizeof(T) a multiple of 256 B (docs/reference/ascendc.md §1.9). int32
    operands: EQ only. Raises ValueError for a partial repeat or int32 with another mode."""

    def meaning(env):
        dst = np.array(env["dst"], copy=True)
        a = np.asarray(env["src0"])
        c = _count(env, a.size)
        _whole_repeats(c, a.dtype, "Compare")
        mode = str(env["mode"]).split("::")[-1]
        if a.dtype == np.int32 and mode != "EQ":
            raise ValueError("Compare int32: only EQ")
        b = np.asarray(a.dtype.type(env["scalar"])) if scalar else np.asarray(env["src1"])[:c]
        bits = CMP_MODES[mode](a[:c].astype(np.float64) if a.dtype != np.int32 else a[:c],
                               b.astype(np.float64) if a.dtype != np.int32 else b)
        dst[:c // 8] = np.packbits(bits, bitorder="little")
        return {"dst": dst}

    return meaning


def _select(scalar: bool):
    """Select count form (VSEL_TENSOR_TENSOR_MODE / VSEL_TENSOR_SCALAR_MODE): dst[i] = bit i of mask ? src0[i] :
    src1[i] (or the scalar) for i < count, the mask laid out as Compare writes it; count·sizeof(T) a multiple of
    256 B (docs/reference/ascendc.md §1.9, the compare's rule taken for the select). Raises ValueError otherwise."""

    def meaning(env):
        dst = np.array(env["dst"], copy=True)
        a = np.asarray(env["src0"])
        c = _count(env, a.size)
        _whole_repeats(c, a.dtype, "Select")
        bits = np.unpackbits(np.asarray(env["mask"], dtype=np.uint8), bitorder="little")[:c].astype(bool)
        other = np.full(c, a.dtype.type(env["scalar"])) if scalar else np.asarray(env["src1"])[:c]
        dst[:c] = np.where(bits, a[:c], other)
        return {"dst": dst}

    return meaning


def _compare_repeat(env):
    """Compare mask / repeat form (BinaryRepeatParams), as A2 / A3 run it: the mask argument is reserved there (the
    asc-devkit Compare page: "保留参数，设置无效"), so every lane of each of the repeatTime repeats is compared and the
    form takes mask = 256 / sizeof(T) only; lane l of repeat r of src0 / src1 at lane_at(r, l, blk, rep) (block and
    repeat strides in 32-B blocks); the 256 / sizeof(T) bits of repeat r go to dst bytes [r * L / 8, (r + 1) * L / 8)
    in lane order, bit l % 8 of byte l / 8 (the layout the count form writes, which calls this form with the default
    strides, asc-devkit kernel_operator_vec_cmp_impl.h CompareCompute). What the destination strides do to the bit
    mask is not documented: dstBlkStride must be 1 and dstRepStride 8 (the defaults). half / float every CMPMODE,
    int32 EQ only (docs/reference/ascendc.md §1.9). Raises ValueError otherwise or for a repeat outside 0..255."""
    dst = np.array(env["dst"], copy=True)
    a, b = np.asarray(env["src0"]), np.asarray(env["src1"])
    mask, rep = int(env["mask"]), int(env["repeat"])
    db, ab, bb, dr, ar, br = (int(x) for x in env["params"])
    sz = a.dtype.itemsize
    lanes = REPEAT_BYTES // sz
    mode = str(env["mode"]).split("::")[-1]
    if mask != lanes:
        raise ValueError(f"Compare repeat form: mask {mask}; A2 / A3 compare every lane of a repeat (mask {lanes})")
    if not 0 <= rep <= 255:
        raise ValueError(f"Compare repeat form: repeatTime {rep} outside 0..255")
    if (db, dr) != (1, 8):
        raise ValueError(f"Compare repeat form: dst strides ({db}, {dr}); the bit mask is written contiguously with "
                         "the default strides (1, 8) only")
    if a.dtype == np.int32 and mode != "EQ":
        raise ValueError("Compare int32: only EQ")
    per = lanes // 8
    if rep == 0:
        return {"dst": dst}
    # every repeat at once (lane_grid is lane_at of each lane, repeat-major): the same elements compared, the same
    # bits in the same bytes as repeat by repeat
    x = a[lane_grid(rep, lanes, ab, ar, sz)]
    y = b[lane_grid(rep, lanes, bb, br, sz)]
    if a.dtype != np.int32:
        x, y = x.astype(np.float64), y.astype(np.float64)
    bits = np.packbits(CMP_MODES[mode](x, y).reshape(rep, lanes), axis=1, bitorder="little").reshape(-1)
    if dst.size < rep * per:
        raise ValueError(f"Compare repeat form: {rep} repeats write {rep * per} mask bytes, dst holds {dst.size}")
    dst[:rep * per] = bits
    return {"dst": dst}


def _select_scalar_repeat(env):
    """Select mask / repeat form, VSEL_TENSOR_SCALAR_MODE (BinaryRepeatParams; src1's strides unused): for repeat r
    < repeatTime and lane l < `lanes` (the form's continuous mask argument; `mask` is the bit-mask tensor), dst at lane_at(r, l, dstBlk, dstRep) = bit r * L + l of the uint8 mask (L = 256 /
    sizeof(T): mode 1 consumes L bits a repeat, asc-devkit Select page) ? src0 at lane_at(r, l, src0Blk, src0Rep) :
    the scalar; other elements keep their values (docs/reference/ascendc.md §1.9). half / float. Raises ValueError for
    a mask outside one repeat, a repeat outside 0..255 or a destination block stride 0."""
    dst = np.array(env["dst"], copy=True)
    a = np.asarray(env["src0"])
    mask, rep = int(env["lanes"]), int(env["repeat"])
    db, ab, _bb, dr, ar, _br = (int(x) for x in env["params"])
    sz = dst.dtype.itemsize
    lanes = REPEAT_BYTES // sz
    _check_mask(mask, sz, "Select repeat form")
    if not 0 <= rep <= 255:
        raise ValueError(f"Select repeat form: repeatTime {rep} outside 0..255")
    if db == 0:
        raise ValueError("Select repeat form: dstBlkStride 0 (a destination block stride must not be 0)")
    bits = np.unpackbits(np.asarray(env["mask"], dtype=np.uint8), bitorder="little").astype(bool)
    s = a.dtype.type(env["scalar"])
    if rep == 0:
        return {"dst": dst}
    # every lane of every repeat at once, in the order of the repeat-by-repeat, lane-by-lane form: the bit of lane k
    # of repeat r is bit r * L + k; src0 is read only where that bit is set; a destination element two lanes write
    # (overlapping repeats) takes the later lane's value, as the sequential form leaves it
    di = lane_grid(rep, mask, db, dr, sz)
    on = bits[(np.arange(rep, dtype=np.int64)[:, None] * lanes + np.arange(mask, dtype=np.int64)[None, :]).reshape(-1)]
    vals = np.full(di.size, s, dtype=a.dtype)
    vals[on] = a[lane_grid(rep, mask, ab, ar, sz)[on]]
    di = np.where(di < 0, di + dst.size, di)   # NumPy's reading of a negative index, as dst[i] = v takes it
    if di.size and (di.min() < 0 or di.max() >= dst.size):
        raise IndexError(f"Select repeat form: a destination lane outside the {dst.size} elements of dst")
    if di.size > 1 and not (di[1:] > di[:-1]).all():   # a destination lane written twice: keep its last writer
        keep = di.size - 1 - np.unique(di[::-1], return_index=True)[1]
        di, vals = di[keep], vals[keep]
    dst[di] = vals
    return {"dst": dst}


def _copy(env):
    """dst[:n] = src[:n] with n = count rounded down to a multiple of 32 B (docs/reference/ascendc.md §1.8)."""
    dst = np.array(env["dst"], copy=True)
    src = np.asarray(env["src"])
    c = _count(env, min(dst.size, src.size))
    per = BLOCK_BYTES // dst.dtype.itemsize
    c = c // per * per
    dst[:c] = src[:c]
    return {"dst": dst}


# ------------------------------------------------------------------------------------------------ the table
_DST = Operand("dst", "ub", "w")
_S0 = Operand("src0", "ub", "r")
_S1 = Operand("src1", "ub", "r")
_SRC = Operand("src", "ub", "r")
_CNT = Operand("count", "count", dtype="int32_t")
_SC = Operand("scalar", "scalar")
_BIN = (_DST, _S0, _S1, _CNT)
_SCA = (_DST, _S0, _SC, _CNT)
_UN = (_DST, _S0, _CNT)
_BIN_FORM = "{api}({dst}, {src0}, {src1}, {count})"
_SCA_FORM = "{api}({dst}, {src0}, {scalar}, {count})"
_UN_FORM = "{api}({dst}, {src0}, {count})"
_F32 = np.float32
_BIN_REP = (_DST, _S0, _S1, Operand("mask", "value", dtype="uint64_t"), Operand("repeat", "value", dtype="uint8_t"),
            Operand("params", "value"))
_BIN_REP_FORM = "{api}({dst}, {src0}, {src1}, {mask}, {repeat}, {params})"
_WHOLE = (_DST, _SRC, *(Operand(n, "value", dtype="int32_t") for n in ("mask", "repeat", "dstRep", "srcBlk", "srcRep")))
REPEAT_FORMS = {}
"""{count-form Op: its mask / repeat form} (filled below)."""


def _def(op, operands, form, meaning, pipe=Pipe.V, **kw) -> InstrDef:
    return InstrDef(op, operands, pipe, form.replace("{api}", op.value.strip()), meaning, **kw)


def _exp(a):
    """exp in float64, rounded once to fp32 (the correctly rounded result but for rare double-rounding cases)."""
    return np.exp(a.astype(np.float64)).astype(np.float32)


def _ln(a):
    """ln in float64, rounded once to fp32."""
    return np.log(a.astype(np.float64)).astype(np.float32)


def _sqrt(a):
    return np.sqrt(a)


def _rsqrt(a):
    return _F32(1.0) / np.sqrt(a)


_SEC = "docs/reference/ascendc.md §1.9"
INSTRS: dict[Op, InstrDef] = {d.op: d for d in [
    _def(Op.ADD, _BIN, _BIN_FORM, _lanewise(np.add, 2), doc=f"dst = src0 + src1 ({_SEC})"),
    _def(Op.SUB, _BIN, _BIN_FORM, _lanewise(np.subtract, 2), doc=f"dst = src0 - src1 ({_SEC})"),
    _def(Op.MUL, _BIN, _BIN_FORM, _lanewise(np.multiply, 2), doc=f"dst = src0 * src1 ({_SEC})"),
    _def(Op.DIV, _BIN, _BIN_FORM, _lanewise(np.divide, 2), lanes={4: 32, 2: 32},
         doc=f"dst = src0 / src1, 32 lanes per cycle ({_SEC})"),
    _def(Op.MAX, _BIN, _BIN_FORM, _lanewise(ieee_max, 2),
         doc=f"dst = max(src0, src1), NaN if either is, +0 above -0 ({_SEC})"),
    _def(Op.MIN, _BIN, _BIN_FORM, _lanewise(ieee_min, 2),
         doc=f"dst = min(src0, src1), NaN if either is, -0 below +0 ({_SEC})"),
    _def(Op.ADDS, _SCA, _SCA_FORM, _lanewise(np.add, 1, scalar=True), doc=f"dst = src0 + scalar ({_SEC})"),
    _def(Op.MULS, _SCA, _SCA_FORM, _lanewise(np.multiply, 1, scalar=True), doc=f"dst = src0 * scalar ({_SEC})"),
    _def(Op.MAXS, _SCA, _SCA_FORM, _lanewise(ieee_max, 1, scalar=True),
         doc=f"dst = max(src0, scalar), as Max ({_SEC})"),
    _def(Op.MINS, _SCA, _SCA_FORM, _lanewise(ieee_min, 1, scalar=True),
         doc=f"dst = min(src0, scalar), as Min ({_SEC})"),
    _def(Op.EXP, _UN, _UN_FORM, _lanewise(_exp, 1), lanes={4: 32, 2: 32}, ulps=1,
         doc=f"dst = exp(src0), 32 lanes per cycle ({_SEC})"),
    _def(Op.LN, _UN, _UN_FORM, _lanewise(_ln, 1), lanes={4: 32, 2: 32}, ulps=1,
         doc=f"dst = ln(src0), 32 lanes per cycle ({_SEC})"),
    _def(Op.SQRT, _UN, _UN_FORM, _lanewise(_sqrt, 1), lanes={4: 32, 2: 32},
         doc=f"dst = sqrt(src0) correctly rounded, 32 lanes per cycle ({_SEC})"),
    _def(Op.RSQRT, _UN, _UN_FORM, _lanewise(_rsqrt, 1), doc=f"dst = 1 / sqrt(src0), two fp32 roundings ({_SEC})"),
    _def(Op.ABS, _UN, _UN_FORM, _lanewise(np.abs, 1), doc=f"dst = |src0| ({_SEC})"),
    _def(Op.RECIPROCAL, _UN, _UN_FORM, _lanewise(lambda a: _F32(1.0) / a, 1), doc=f"dst = 1 / src0 ({_SEC})"),
    _def(Op.RELU, _UN, _UN_FORM, _lanewise(lambda a: np.where(a > 0, a, _F32(0.0)), 1),
         doc=f"dst = src0 > 0 ? src0 : 0 ({_SEC})"),
    _def(Op.AXPY, (Operand("dst", "ub", "rw"), _S0, _SC, _CNT), "Axpy({dst}, {src0}, {scalar}, {count})", _axpy,
         doc=f"dst = dst + src0 * scalar, the product rounded first (the emulation's model; {_SEC})"),
    _def(Op.DUPLICATE, (_DST, _SC, _CNT), "Duplicate({dst}, {scalar}, {count})", _dup,
         doc=f"dst[:count] = scalar ({_SEC})"),
    _def(Op.CREATE_VEC_INDEX, (_DST, _SC, Operand("count", "count", dtype="uint32_t")),
         "CreateVecIndex({dst}, {scalar}, {count})", _vec_index,
         doc=f"dst[i] = scalar + i for i < count; half / int16 / float / int32 ({_SEC}, CreateVecIndex)",
         scalar_head=True),
    _def(Op.CAST, (Operand("dst", "ub", "w", "D"), Operand("src", "ub", "r", "S"), Operand("mode", "mode"),
                   Operand("count", "count", dtype="uint32_t")),
         "Cast({dst}, {src}, {mode}, {count})", _cast,
         doc=f"dst = src converted with a round mode (CAST_MODES), 256 B per repeat on the wider type ({_SEC})"),
    _def(Op.CAST_FROM, (Operand("dst", "ub", "w", "float"), Operand("src", "ub", "r", "S"), _CNT),
         "CastFrom({dst}, {src}, {count})", _cast_from,
         doc=f"opgen helper: S -> fp32, a Cast CAST_NONE (or Muls by 1.0 from fp32) ({_SEC})"),
    _def(Op.CAST_TO, (Operand("dst", "ub", "w", "D"), Operand("src", "ub", "r", "float"), Operand("mode", "mode"), _CNT),
         "CastTo({dst}, {src}, {mode}, {count})", _cast_to,
         doc=f"opgen helper: fp32 -> D with a round mode, a Cast (or Muls by 1.0 to fp32) ({_SEC})"),
    _def(Op.REDUCE_SUM, (_DST, _SRC, Operand("tmp", "ub", "w"), _CNT), "ReduceSum({dst}, {src}, {tmp}, {count})",
         _reduce(pairwise_sum), doc=f"dst[0] = sum of src[:count], tmp a work buffer ({_SEC})"),
    _def(Op.REDUCE_MAX, (_DST, _SRC, Operand("tmp", "ub", "w"), _CNT),
         "ReduceMax({dst}, {src}, {tmp}, {count}, false)", _reduce(_first_max),
         doc=f"dst[0] = max of src[:count], tmp a work buffer of reduce_max_tmp_elems ({_SEC})"),
    _def(Op.GATHER, (_DST, _SRC, Operand("offset", "ub", "r", "uint32_t"), Operand("base", "value", dtype="uint32_t"),
                     Operand("count", "count", dtype="uint32_t")),
         "Gather({dst}, {src}, {offset}, {base}, {count})", _gather,
         doc=f"dst[i] = src[(base + offset[i]) / sizeof(T)], byte offsets ({_SEC})"),
    _def(Op.BRCB, (_DST, _SRC, Operand("repeat", "value", dtype="uint8_t"), Operand("params", "value")),
         "Brcb({dst}, {src}, {repeat}, {params})", _brcb,
         doc=f"each repeat broadcasts 8 source elements to 8 blocks ({_SEC})"),
    *[_def(op, _BIN_REP, _BIN_REP_FORM, _binary_repeat(f), lanes=lanes,
           doc=f"{doc}, mask / repeat form: lanes < mask of each repeat, strides in 32-B blocks "
               f"(BinaryRepeatParams; {_SEC})")
      for op, f, lanes, doc in (
          (Op.ADD_REP, np.add, {4: 64, 2: 128}, "dst = src0 + src1"),
          (Op.SUB_REP, np.subtract, {4: 64, 2: 128}, "dst = src0 - src1"),
          (Op.MUL_REP, np.multiply, {4: 64, 2: 128}, "dst = src0 * src1"),
          (Op.DIV_REP, np.divide, {4: 32, 2: 32}, "dst = src0 / src1"),
          (Op.MAX_REP, ieee_max, {4: 64, 2: 128}, "dst = max(src0, src1) as Max"),
          (Op.MIN_REP, ieee_min, {4: 64, 2: 128}, "dst = min(src0, src1) as Min"))],
    _def(Op.WHOLE_REDUCE_SUM, _WHOLE, "WholeReduceSum({dst}, {src}, {mask}, {repeat}, {dstRep}, {srcBlk}, {srcRep})",
         _whole_reduce(_halving_sum),
         doc=f"dst[r * dstRep] = sum of repeat r's lanes < mask (one value per repeat; {_SEC})"),
    _def(Op.WHOLE_REDUCE_MAX, _WHOLE,
         "WholeReduceMax({dst}, {src}, {mask}, {repeat}, {dstRep}, {srcBlk}, {srcRep}, ReduceOrder::ORDER_ONLY_VALUE)",
         _whole_reduce(_first_max),
         doc=f"dst[r * dstRep] = max of repeat r's lanes < mask, value only (ORDER_ONLY_VALUE; {_SEC})"),
    _def(Op.AND, _BIN, _BIN_FORM, _bitwise(np.bitwise_and, 2), doc=f"dst = src0 & src1, int16 / uint16 ({_SEC})"),
    _def(Op.OR, _BIN, _BIN_FORM, _bitwise(np.bitwise_or, 2), doc=f"dst = src0 | src1, int16 / uint16 ({_SEC})"),
    _def(Op.NOT, _UN, _UN_FORM, _bitwise(np.invert, 1), doc=f"dst = ~src0, int16 / uint16 ({_SEC})"),
    _def(Op.COMPARE, (Operand("dst", "ub", "w", "uint8_t"), _S0, _S1, Operand("mode", "cmp"),
                      Operand("count", "count", dtype="uint32_t")),
         "Compare({dst}, {src0}, {src1}, {mode}, {count})", _compare(False),
         doc=f"bit i of dst = src0[i] CMPMODE src1[i], whole 256-B repeats ({_SEC})"),
    _def(Op.COMPARE_SCALAR, (Operand("dst", "ub", "w", "uint8_t"), _S0, _SC, Operand("mode", "cmp"),
                             Operand("count", "count", dtype="uint32_t")),
         "Compares({dst}, {src0}, {scalar}, {mode}, {count})", _compare(True),
         doc=f"bit i of dst = src0[i] CMPMODE scalar, whole 256-B repeats ({_SEC})"),
    _def(Op.SELECT, (_DST, Operand("mask", "ub", "r", "uint8_t"), _S0, _S1, Operand("count", "count",
                                                                                   dtype="uint32_t")),
         "Select({dst}, {mask}, {src0}, {src1}, SELMODE::VSEL_TENSOR_TENSOR_MODE, {count})", _select(False),
         doc=f"dst[i] = bit i of mask ? src0[i] : src1[i] ({_SEC})"),
    _def(Op.SELECT_SCALAR, (_DST, Operand("mask", "ub", "r", "uint8_t"), _S0, _SC,
                            Operand("count", "count", dtype="uint32_t")),
         "Select({dst}, {mask}, {src0}, {scalar}, SELMODE::VSEL_TENSOR_SCALAR_MODE, {count})", _select(True),
         doc=f"dst[i] = bit i of mask ? src0[i] : scalar ({_SEC})"),
    _def(Op.COMPARE_REP, (Operand("dst", "ub", "w", "uint8_t"), _S0, _S1, Operand("mode", "cmp"),
                          Operand("mask", "value", dtype="uint64_t"), Operand("repeat", "value", dtype="uint8_t"),
                          Operand("params", "value")),
         "Compare({dst}, {src0}, {src1}, {mode}, {mask}, {repeat}, {params})", _compare_repeat,
         doc=f"mask / repeat form: repeat r's bits (every lane: the mask is reserved on A2 / A3) at dst bytes "
             f"r * L / 8.. (BinaryRepeatParams; {_SEC})"),
    _def(Op.SELECT_SCALAR_REP, (_DST, Operand("mask", "ub", "r", "uint8_t"), _S0, _SC,
                                Operand("lanes", "value", dtype="uint64_t"), Operand("repeat", "value", dtype="uint8_t"),
                                Operand("params", "value")),
         "Select({dst}, {mask}, {src0}, {scalar}, SELMODE::VSEL_TENSOR_SCALAR_MODE, {lanes}, {repeat}, {params})",
         _select_scalar_repeat,
         doc=f"mask / repeat form of the tensor-scalar mode: lanes < `lanes` of each repeat, the bit mask consumed "
             f"256 / sizeof(T) bits a repeat (BinaryRepeatParams; {_SEC})"),
    _def(Op.COPY_IN, (Operand("dst", "ub", "w"), Operand("src", "gm", "r"), Operand("count", "count", dtype="uint32_t")),
         "DataCopy({dst}, {src}, {count})", _copy, pipe=Pipe.MTE2,
         doc="GM -> UB, count·sizeof(T) a multiple of 32 B (docs/reference/ascendc.md §1.8)"),
    _def(Op.COPY_OUT, (Operand("dst", "gm", "w"), Operand("src", "ub", "r"), Operand("count", "count", dtype="uint32_t")),
         "DataCopy({dst}, {src}, {count})", _copy, pipe=Pipe.MTE3,
         doc="UB -> GM, count·sizeof(T) a multiple of 32 B (docs/reference/ascendc.md §1.8)"),
]}
"""The instruction table, keyed by Op (module docstring)."""

REPEAT_FORMS.update({Op.ADD: Op.ADD_REP, Op.SUB: Op.SUB_REP, Op.MUL: Op.MUL_REP, Op.DIV: Op.DIV_REP,
                     Op.MAX: Op.MAX_REP, Op.MIN: Op.MIN_REP})

MASK_REPEAT_FORMS = {Op.COMPARE: Op.COMPARE_REP, Op.SELECT_SCALAR: Op.SELECT_SCALAR_REP}
"""{count-form Op: its mask / repeat form} of the compare and select (a bit-mask operand: not REPEAT_FORMS, whose
entries the binary-op paths share)."""

BY_API = {d.api: d for d in INSTRS.values() if d.pipe is Pipe.V and d.op not in REPEAT_FORMS.values()
          and d.op not in MASK_REPEAT_FORMS.values()}
"""The vector entries by the C++ name printed ("Add", "Muls", ...)."""

assert set(INSTRS) == set(Op), "every Op has an entry"


def entry(api: str) -> InstrDef:
    """The vector entry printed as `api` ("Add", "Exp", ...). Raises KeyError naming it."""
    try:
        return BY_API[api]
    except KeyError:
        raise KeyError(f"no vector instruction {api} in the table (opgen.kernel.isa)") from None


def float_scalar(text: str) -> str:
    """A C++ float expression as an fp32 scalar operand (docs/reference/ascendc.md §1.9: the scalar is exactly T)."""
    return f"static_cast<float>({text})"
