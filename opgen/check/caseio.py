"""The files exchanged with the launch driver (opgen/check/cpp/check_driver.h): the binary case file it
reads, the text report and the raw output files it writes.

Case file (little-endian, x86-64; read by opgen_check::ReadCase):

    char[8]  "OPGCASE4"
    int64    aivNum, aicNum, ubBytes (bytes of UB per core), sysWorkspaceBytes (bytes; GetUserWorkspace offset),
             deterministic (0/1: TilingContext::GetDeterministic(), the framework's deterministic flag)
    uint32   nInputs; per input (OpDef order):
             uint8 present, int32 ge::DataType, uint32 rank, int64 dims[rank], uint64 nbytes, byte data[nbytes]
    uint32   nAttrs; double value[nAttrs] (OpDef order; bool 0/1, int, float; strings, lists and absent values 0)
    uint32   nLists; per list attribute: uint32 index (OpDef order), uint32 length, int64 values[length]
    uint32   nStrs; per string attribute: uint32 index (OpDef order), uint32 length, char text[length] (no NUL;
             the driver puts it in RuntimeAttrs, read by the TilingFunc with GetStr as in CANN)
    uint32   nOutputs; per output: uint8 present, int32 ge::DataType, uint32 rank, int64 dims[rank]

The magic names the version (OPGCASE1 lacked `deterministic`, OPGCASE2 the lists, OPGCASE3 the
strings); the driver rejects any other magic.
Absent tensors: present 0, DT_UNDEFINED (28), rank 0, no data. Report (one fact per line, see
parse_report); outputs: `<out dir>/out<k>.bin`, k = output index in OpDef order, raw element bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from opgen.check.cost import parse_core_cost
from opgen.errors import OpgenError
from opgen.ir.dtypes import DType

MAGIC = b"OPGCASE4"
GE_DTYPE = {DType.f32: 0, DType.f16: 1, DType.i8: 2, DType.i32: 3, DType.u8: 4, DType.i16: 6, DType.i64: 9, DType.bool: 12,
            DType.bf16: 27}
"""ge::DataType numbering (opgen/emu/include/graph/types.h, CANN's values) per IR dtype."""
DT_UNDEFINED = 28


@dataclass
class CaseTensor:
    """One tensor slot of a case: dtype None = absent; shape: dims; data: the array in `dtype` (inputs only;
    its raw bytes are written C-contiguous)."""

    dtype: DType | None
    shape: tuple = ()
    data: np.ndarray | None = None


def write_case(path, aiv: int, aic: int, ub_bytes: int, sys_ws: int, inputs: list[CaseTensor],
               attrs: list, outputs: list[CaseTensor], deterministic: bool = False) -> None:
    """Write a case file (format: module doc). aiv/aic: core counts; ub_bytes, sys_ws: bytes;
    deterministic: what the TilingFunc's GetDeterministic() returns (1 / 0).

    Raises OpgenError when an input's data does not match its dtype and shape."""
    out = [MAGIC, struct.pack("<qqqqq", aiv, aic, ub_bytes, sys_ws, int(bool(deterministic))),
           struct.pack("<I", len(inputs))]
    for t in inputs:
        out.append(_tensor_head(t))
        if t.dtype is None:
            out.append(struct.pack("<Q", 0))
            continue
        a = np.asarray(t.data, order="C")   # (ascontiguousarray would make a 0-d tensor 1-d)
        if a.dtype != t.dtype.np or tuple(a.shape) != tuple(t.shape):
            raise OpgenError(f"case file: input data {a.dtype}{list(a.shape)} does not match "
                             f"{t.dtype.long_name}{list(t.shape)}")
        raw = a.tobytes()
        out += [struct.pack("<Q", len(raw)), raw]
    lists = [(k, v) for k, v in enumerate(attrs) if isinstance(v, tuple)]
    out.append(struct.pack("<I", len(attrs)))
    out.append(struct.pack(f"<{len(attrs)}d", *[0.0 if isinstance(v, (tuple, str)) else float(v) for v in attrs]))
    out.append(struct.pack("<I", len(lists)))
    for k, v in lists:
        out.append(struct.pack(f"<II{len(v)}q", k, len(v), *[int(x) for x in v]))
    strs = [(k, v.encode()) for k, v in enumerate(attrs) if isinstance(v, str)]
    out.append(struct.pack("<I", len(strs)))
    for k, b in strs:
        out.append(struct.pack("<II", k, len(b)) + b)
    out.append(struct.pack("<I", len(outputs)))
    out += [_tensor_head(t) for t in outputs]
    Path(path).write_bytes(b"".join(out))


def _tensor_head(t: CaseTensor) -> bytes:
    if t.dtype is None:
        return struct.pack("<BiI", 0, DT_UNDEFINED, 0)
    dims = [int(d) for d in t.shape]
    return struct.pack("<BiI", 1, GE_DTYPE[t.dtype], len(dims)) + struct.pack(f"<{len(dims)}q", *dims)


def attr_value(v) -> float | tuple | str:
    """An attribute value as the case file holds it: bool 0/1, int, float as a double; None as 0; a list
    attribute's tuple of ints and a string attribute's str as they are (write_case puts them in the lists and
    strings sections; their double is 0)."""
    if isinstance(v, (tuple, list)):
        return tuple(int(x) for x in v)
    if isinstance(v, str):
        return v
    if v is None:
        return 0.0
    return float(v)


@dataclass
class GmStat:
    """GM traffic of one registered buffer during the launch: size, bytes read, bytes written (bytes)."""

    bytes: int
    read: int
    written: int


@dataclass
class DriverReport:
    """What the driver reported. tiling_ok: the TilingFunc succeeded (tiling_error says why not);
    block_dim, tiling_key, workspace_bytes (whole workspace incl. the system part, bytes), tiling_bytes;
    launched: the kernel ran; faults: emulation faults (one per faulting core) and driver problems;
    gm: {buffer name: GmStat}; complete: the report ended normally (False: the driver crashed)."""

    tiling_ok: bool = False
    tiling_error: str = ""
    block_dim: int = 0
    tiling_key: int = 0
    workspace_bytes: int = 0
    tiling_bytes: int = 0
    launched: bool = False
    faults: list = field(default_factory=list)
    traps: list = field(default_factory=list)   # cores that stopped themselves with AscendC::Trap()
    gm: dict = field(default_factory=dict)
    complete: bool = False
    launch_seconds: float = 0.0   # wall seconds of the emu::Launch call alone (no process start, no case I/O)
    vec_cycles: int = 0           # max over cores of the vector cost counter (emu/core.h CountVector)
    cube_cycles: int = 0          # max over cores of the cube cost counter (16x16x16 fractals)
    ub_peak: int = 0              # max over AIV cores of the UB bytes the kernel's TPipe held at once (emu/tensor.h)
    core_costs: list = field(default_factory=list)   # per core (launch order): opgen.check.cost.CoreCost


def parse_report(text: str) -> DriverReport:
    """Parse the driver's report. Lines: `tiling ok` | `tiling fail <why>`, `block_dim N`, `tiling_key K`,
    `workspace_bytes W`, `tiling_bytes T`, `launch 0|1`, `ok 0|1`, `fault <message>` and `trap <core>` (repeatable),
    `gm <name> <bytes> <read> <written>` (repeatable), `seconds S` (launch wall time), `cycles VEC CUBE` (cost
    counters, max over cores), `ub_peak B` (UB bytes allocated at once, max over AIV cores), `core_cost <core>
    <counters>` (per core, opgen.check.cost.FIELDS), `end`. Unknown lines are ignored."""
    r = DriverReport()
    for line in text.splitlines():
        head, _, rest = line.partition(" ")
        if head == "tiling":
            r.tiling_ok = rest == "ok"
            r.tiling_error = "" if r.tiling_ok else rest.partition(" ")[2]
        elif head in ("block_dim", "tiling_key", "workspace_bytes", "tiling_bytes"):
            setattr(r, head, int(rest))
        elif head == "launch":
            r.launched = rest == "1"
        elif head == "fault":
            r.faults.append(rest)
        elif head == "trap":
            r.traps.append(rest)
        elif head == "gm":
            name, size, rd, wr = rest.rsplit(" ", 3)
            r.gm[name] = GmStat(int(size), int(rd), int(wr))
        elif head == "seconds":
            r.launch_seconds = float(rest)
        elif head == "cycles":
            vec, cube = rest.split()
            r.vec_cycles, r.cube_cycles = int(vec), int(cube)
        elif head == "ub_peak":
            r.ub_peak = int(rest)
        elif head == "core_cost":
            k, c = parse_core_cost(rest)
            r.core_costs += [None] * (k + 1 - len(r.core_costs))
            r.core_costs[k] = c
        elif head == "end":
            r.complete = True
    return r


def read_output(path, dtype: DType, shape) -> np.ndarray:
    """A raw output file as an array of `dtype` and `shape`. Raises OpgenError when its size is wrong."""
    raw = Path(path).read_bytes()
    n = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    if len(raw) != n * dtype.itemsize:
        raise OpgenError(f"driver output {path}: {len(raw)} bytes, expected {n * dtype.itemsize}")
    return np.frombuffer(raw, dtype=dtype.np).reshape(tuple(shape)).copy()
