"""Data types of the tensor IR.

Concrete dtypes are the CANN types the specs use (three floats, five integers, bool); `DTypeVar` names a dtype variable
(`T` for the data dtype, `U` for a separate weight dtype) that a dtype-combination row binds.
bfloat16 comes from ml_dtypes (bit-exact with Ascend's bf16).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import ml_dtypes
import numpy as np


class DType(Enum):
    """A concrete element type. `.value` is the IR spelling (f32, f16, bf16, i8, u8, i16, i32, i64, bool)."""

    f32 = "f32"
    f16 = "f16"
    bf16 = "bf16"
    i8 = "i8"
    u8 = "u8"
    i16 = "i16"
    i32 = "i32"
    i64 = "i64"
    bool = "bool"

    @property
    def np(self) -> np.dtype:
        """The NumPy dtype holding values of this type (ml_dtypes.bfloat16 for bf16)."""
        return _NP[self]

    @property
    def is_float(self) -> bool:
        """True for f32, f16, bf16."""
        return self in (DType.f32, DType.f16, DType.bf16)

    @property
    def is_int(self) -> bool:
        """True for the integer types i8, u8, i16, i32, i64 (not bool)."""
        return self in (DType.i8, DType.u8, DType.i16, DType.i32, DType.i64)

    @property
    def int_range(self) -> tuple[int, int]:
        """(min, max) of an integer type (the saturation bounds of a Cast to it). Raises ValueError otherwise."""
        if not self.is_int:
            raise ValueError(f"{self.value} is not an integer type")
        info = np.iinfo(_NP[self])
        return int(info.min), int(info.max)

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return _NP[self].itemsize

    @property
    def cann(self) -> str:
        """CANN's ge::DataType enumerator name (DT_FLOAT, DT_FLOAT16, ...)."""
        return _CANN[self]

    @property
    def ge_code(self) -> int:
        """CANN's ge::DataType value (metadef graph/c_types.h: DT_FLOAT 0, DT_FLOAT16 1, DT_INT8 2, DT_INT32 3,
        DT_UINT8 4, DT_INT16 6, DT_INT64 9, DT_BOOL 12, DT_BF16 27): the int an OpDef `dtype` attribute holds."""
        return _GE_CODE[self]

    @property
    def long_name(self) -> str:
        """The name used on the command line (float32, float16, bfloat16, int8, uint8, int16, int32, int64, bool)."""
        return _LONG[self]

    def __repr__(self) -> str:
        return self.value


_NP = {
    DType.f32: np.dtype(np.float32),
    DType.f16: np.dtype(np.float16),
    DType.bf16: np.dtype(ml_dtypes.bfloat16),
    DType.i8: np.dtype(np.int8),
    DType.u8: np.dtype(np.uint8),
    DType.i16: np.dtype(np.int16),
    DType.i32: np.dtype(np.int32),
    DType.i64: np.dtype(np.int64),
    DType.bool: np.dtype(np.bool_),
}
_CANN = {
    DType.f32: "DT_FLOAT",
    DType.f16: "DT_FLOAT16",
    DType.bf16: "DT_BF16",
    DType.i8: "DT_INT8",
    DType.u8: "DT_UINT8",
    DType.i16: "DT_INT16",
    DType.i32: "DT_INT32",
    DType.i64: "DT_INT64",
    DType.bool: "DT_BOOL",
}
_GE_CODE = {DType.f32: 0, DType.f16: 1, DType.i8: 2, DType.i32: 3, DType.u8: 4, DType.i16: 6, DType.i64: 9,
            DType.bool: 12, DType.bf16: 27}
_LONG = {
    DType.f32: "float32",
    DType.f16: "float16",
    DType.bf16: "bfloat16",
    DType.i8: "int8",
    DType.u8: "uint8",
    DType.i16: "int16",
    DType.i32: "int32",
    DType.i64: "int64",
    DType.bool: "bool",
}
_BY_NAME = {}
for _d in DType:
    _BY_NAME[_d.value] = _d
    _BY_NAME[_LONG[_d]] = _d
_BY_NAME.update({"fp32": DType.f32, "fp16": DType.f16, "half": DType.f16, "float": DType.f32})


def parse_dtype(name: str) -> DType:
    """Return the DType for `name` (f32/float32/fp32, f16/float16, bf16/bfloat16, i8/int8, u8/uint8, i16/int16,
    i32/int32, i64/int64, bool).

    Raises:
        KeyError: unknown name.
    """
    return _BY_NAME[name.strip().lower()]


def dtype_spellings(d: DType) -> list[str]:
    """Every lower-case name parse_dtype reads as DType `d`, sorted (float16: f16, float16, fp16, half); a name is
    read in any case, so `Half` is one too."""
    return sorted(k for k, v in _BY_NAME.items() if v is d)


def dtype_of_array(a: np.ndarray) -> DType | None:
    """The DType matching a NumPy array's dtype, or None (bf16 saved by np.savez arrives as 2-byte void)."""
    if a.dtype == ml_dtypes.bfloat16 or (a.dtype.kind == "V" and a.dtype.itemsize == 2):
        return DType.bf16
    for d, npd in _NP.items():
        if a.dtype == npd:
            return d
    return None


@dataclass(frozen=True)
class DTypeVar:
    """A dtype variable of a spec (`T`, `U`), bound by a row of the dtype-combination table."""

    name: str

    def __repr__(self) -> str:
        return self.name


DTypeLike = DType | DTypeVar


def dtype_name(dt) -> str:
    """The IR name of a dtype ("f32", "i32", ...) or the name of a dtype variable ("T", "U", ...)."""
    return dt.value if isinstance(dt, DType) else getattr(dt, "name", str(dt))
