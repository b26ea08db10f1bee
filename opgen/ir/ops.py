"""The op set of the tensor IR (docs/design.md "Specs and the Tensor IR") and its type rules.

Each `OpDef` declares its arity, its attributes with their kinds (used by the printer/parser
and the verifier) and a type rule `infer(input_types, attrs) -> TensorType` that raises
`IRError` with the rule that is broken. Evaluation is in `opgen.interp.kernels`.

Op set:
  unary       neg exp log sqrt rsqrt recip abs not tanh erf
  binary      add sub mul div maximum minimum and or     (NumPy broadcasting, right-aligned; div: float only, an
                                                         integer division must cast to a float dtype first)
  compare     lt le gt ge eq ne                          -> bool
  select      select(cond, a, b)
  cast        cast(x) {to, round}   round: none | rint | round | floor | ceil | trunc | odd (AscendC's Cast modes,
                                     opgen.interp.rounding); float -> int rounds and saturates
  const       const() {value, dtype}                       -> scalar
  iota        iota() {n, dtype}                            -> [n]: 0..n-1
  dimval      dimval() {n, dtype}                          -> scalar value of a dim expression
  broadcast   broadcast(x) {shape}
  reduce      reduce(x) {kind: sum|max|mean, axes, keepdims}
  reshape     reshape(x) {shape}      permute(x) {perm}
  concat      concat(x...) {axis}     slice(x) {axis, start, stop, step}
  repeat_interleave  repeat_interleave(x) {axis, repeats, size}   out[..., i, ...] = x[..., i // repeats, ...], i < size
  gather      gather(x, idx) {axis, batch_dims}          out = x[*b, idx[*b, ...], ...]
  scatter_add scatter_add(idx, src) {axis, batch_dims, size}   inverse of gather, duplicates add
  matmul      matmul(a, b) {transpose_a, transpose_b}    batch dims broadcast (NumPy matmul; no 1-D)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from opgen.errors import IRError
from opgen.ir.core import TensorType
from opgen.ir.dims import DimExpr, Lit, Variadic, as_dim, shape_str
from opgen.ir.dtypes import DType, DTypeVar

ROUND_MODES = ("none", "rint", "round", "floor", "ceil", "trunc", "odd")
"""Round modes of `cast` (AscendC RoundMode::CAST_<MODE>; meanings in opgen.interp.rounding)."""
INT_ROUND_MODES = ("rint", "round", "floor", "ceil", "trunc")
"""The round modes a float -> integer cast accepts (AscendC: float -> int needs a rounding mode)."""


@dataclass(frozen=True)
class OpDef:
    """Definition of one IR op: arity (-1 = one or more), attribute kinds and the type rule."""

    name: str
    arity: int
    attrs: dict
    infer: Callable


OPS: dict[str, OpDef] = {}


def _register(name, arity, attrs, infer):
    OPS[name] = OpDef(name, arity, attrs, infer)


def _is_float(dt) -> bool:
    return isinstance(dt, DTypeVar) or dt.is_float


def broadcast_shapes(a, b, opname="op"):
    """Right-aligned NumPy broadcasting of two symbolic shapes.

    Dims must be structurally equal or one of them the literal 1. A variadic group broadcasts against a shape
    that only reaches into the fixed dims after it (a scalar, [H] or [1, H] against [*Bd, S, H]), and against a
    shape with the same group at the same place (its leading entries equal, the fixed dims after it broadcast).
    Raises IRError otherwise (which dims of the group a shorter operand would cover is not known)."""
    a, b = tuple(a), tuple(b)
    if a == b:
        return a
    va = [k for k, d in enumerate(a) if isinstance(d, Variadic)]
    vb = [k for k, d in enumerate(b) if isinstance(d, Variadic)]
    if va or vb:
        if va and vb:
            ia, ib = va[-1], vb[-1]
            if a[:ia + 1] != b[:ib + 1] or len(a) - ia != len(b) - ib:
                raise IRError(f"{opname}: cannot broadcast {shape_str(a)} with {shape_str(b)} (variadic dims)")
            return a[:ia + 1] + _broadcast_fixed(a[ia + 1:], b[ib + 1:], a, b, opname)
        long_, short, iv = (a, b, va[-1]) if va else (b, a, vb[-1])
        tail = long_[iv + 1:]
        if len(short) > len(tail):
            raise IRError(f"{opname}: cannot broadcast {shape_str(a)} with {shape_str(b)} (variadic dims: "
                          f"{shape_str(short)} reaches into *{long_[iv].name})")
        return long_[:iv + 1] + _broadcast_fixed(tail, short, a, b, opname)
    return _broadcast_fixed(a, b, a, b, opname)


def _broadcast_fixed(a, b, full_a, full_b, opname):
    """Right-aligned broadcasting of two shapes without variadic groups (full_a / full_b: for the message)."""
    n = max(len(a), len(b))
    a = (Lit(1),) * (n - len(a)) + tuple(a)
    b = (Lit(1),) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x == y or y == Lit(1):
            out.append(x)
        elif x == Lit(1):
            out.append(y)
        else:
            raise IRError(f"{opname}: cannot broadcast {shape_str(full_a)} with {shape_str(full_b)} (dim {x} vs {y})")
    return tuple(out)


def _unify_dtype(ts, opname):
    dts = {t.dtype for t in ts}
    if len(dts) != 1:
        raise IRError(f"{opname}: operand dtypes differ: {sorted(map(repr, dts))}")
    return dts.pop()


def _unary(name, float_only=True):
    def infer(ts, attrs):
        (t,) = ts
        if float_only and not _is_float(t.dtype):
            raise IRError(f"{name}: operand must be floating point, got {t.dtype!r}")
        return t

    _register(name, 1, {}, infer)


def _binary(name, result=None, kinds="num"):
    def infer(ts, attrs):
        dt = _unify_dtype(ts, name)
        if kinds == "bool" and dt != DType.bool:
            raise IRError(f"{name}: operands must be bool, got {dt!r}")
        if kinds == "num" and dt == DType.bool:
            raise IRError(f"{name}: operands must be numeric, got bool")
        if kinds == "float" and not _is_float(dt):
            raise IRError(f"{name}: integer division of {dt!r} operands is not defined; cast to a float dtype first")
        return TensorType(result or dt, broadcast_shapes(ts[0].shape, ts[1].shape, name))

    _register(name, 2, {}, infer)


for _n in ("neg", "exp", "log", "sqrt", "rsqrt", "recip", "tanh", "erf"):
    _unary(_n)
_unary("abs", float_only=False)


def _not(ts, attrs):
    if ts[0].dtype != DType.bool:
        raise IRError(f"not: operand must be bool, got {ts[0].dtype!r}")
    return ts[0]


_register("not", 1, {}, _not)
for _n in ("add", "sub", "mul", "maximum", "minimum"):
    _binary(_n)
_binary("div", kinds="float")   # no integer division: no floor/trunc rule nor divide-by-zero rule is defined
for _n in ("and", "or"):
    _binary(_n, kinds="bool")
for _n in ("lt", "le", "gt", "ge", "eq", "ne"):
    _binary(_n, result=DType.bool, kinds="any")


def _select(ts, attrs):
    c, a, b = ts
    if c.dtype != DType.bool:
        raise IRError(f"select: condition must be bool, got {c.dtype!r}")
    dt = _unify_dtype((a, b), "select")
    return TensorType(dt, broadcast_shapes(broadcast_shapes(c.shape, a.shape, "select"), b.shape, "select"))


_register("select", 3, {}, _select)


def _cast(ts, attrs):
    (t,) = ts
    r = attrs["round"]
    if r not in ROUND_MODES:
        raise IRError(f"cast: round must be one of {', '.join(ROUND_MODES)}, got {r!r}")
    to = attrs["to"]
    src_float = _is_float(t.dtype)
    to_float = isinstance(to, DTypeVar) or to.is_float
    src, dst = repr(t.dtype), repr(to)
    if src_float and not to_float and to != DType.bool and r not in INT_ROUND_MODES:
        raise IRError(f"cast: a cast from {src} to {dst} rounds to an integer; name its rounding "
                      f"(round= one of {', '.join(INT_ROUND_MODES)}), got {r!r}")
    narrowing = src_float and (isinstance(to, DTypeVar) or to in (DType.f16, DType.bf16)) and t.dtype != to
    if narrowing and r == "none":
        raise IRError(f"cast: a float cast from {src} to {dst} may narrow; name its rounding (rint or round)")
    if r == "odd" and not (src_float and to == DType.f16):
        raise IRError(f"cast: round mode odd exists only for a float cast to f16 (AscendC CAST_ODD), not {src} -> {dst}")
    return TensorType(to, t.shape)


_register("cast", 1, {"to": "dtype", "round": "str"}, _cast)


def _const(ts, attrs):
    dt = attrs["dtype"]
    v = attrs["value"]
    if isinstance(dt, DType) and dt.is_int and not isinstance(v, int):
        raise IRError(f"const: integer dtype {dt!r} needs an integer value, got {v!r}")
    return TensorType(dt, ())


_register("const", 0, {"value": "scalar", "dtype": "dtype"}, _const)


def _dimval(ts, attrs):
    as_dim(attrs["n"])
    return TensorType(attrs["dtype"], ())


_register("dimval", 0, {"n": "dim", "dtype": "dtype"}, _dimval)


def _iota(ts, attrs):
    dt = attrs["dtype"]
    if not (isinstance(dt, DType) and dt.is_int):
        raise IRError(f"iota: dtype must be i32 or i64, got {dt!r}")
    return TensorType(dt, (as_dim(attrs["n"]),))


_register("iota", 0, {"n": "dim", "dtype": "dtype"}, _iota)


def _broadcast(ts, attrs):
    (t,) = ts
    shape = tuple(attrs["shape"])
    got = broadcast_shapes(t.shape, shape, "broadcast")
    if got != shape:
        raise IRError(f"broadcast: {shape_str(t.shape)} does not broadcast to {shape_str(shape)}")
    return TensorType(t.dtype, shape)


_register("broadcast", 1, {"shape": "shape"}, _broadcast)


def _norm_axes(axes, shape, opname):
    """Normalise axes against a shape (indices into it); with a variadic group, an axis is a non-negative one
    into the fixed dims before it or a negative one into the fixed dims after it (either names the same axis at
    every rank of the group)."""
    var = [i for i, d in enumerate(shape) if isinstance(d, Variadic)]
    out = []
    for a in axes:
        if var:
            tail = len(shape) - 1 - var[0]
            if 0 <= a < var[0]:
                out.append(a)
                continue
            if not (-tail <= a < 0):
                g = shape[var[0]].name
                ok = ([f"0..{var[0] - 1} (the fixed dims before *{g})"] if var[0] else []) + \
                    ([f"-1..-{tail} (the fixed dims after *{g})"] if tail else [])
                if not ok:   # the group is the whole shape: no axis can be named
                    raise IRError(f"{opname}: axis {a} would name a dim of *{g}, which is the whole shape; name fixed "
                                  f"dims instead (reshape to [Prod(\"{g}\")] first)")
                raise IRError(f"{opname}: axis {a} must be {' or '.join(ok)}: an axis inside *{g} cannot be named")
            out.append(len(shape) + a)
        else:
            if not (-len(shape) <= a < len(shape)):
                raise IRError(f"{opname}: axis {a} out of range for rank {len(shape)}")
            out.append(a % len(shape))
    if len(set(out)) != len(out):
        raise IRError(f"{opname}: repeated axis in {list(axes)}")
    return out


def _reduce(ts, attrs):
    (t,) = ts
    if attrs["kind"] not in ("sum", "max", "min", "mean"):
        raise IRError(f"reduce: kind must be sum, max, min or mean, got {attrs['kind']!r}")
    if t.dtype == DType.bool:
        raise IRError("reduce: operand must be numeric, got bool")
    axes = _norm_axes(attrs["axes"], t.shape, "reduce")
    shape = []
    for i, d in enumerate(t.shape):
        if i in axes:
            if attrs["keepdims"]:
                shape.append(Lit(1))
        else:
            shape.append(d)
    return TensorType(t.dtype, tuple(shape))


_register("reduce", 1, {"kind": "str", "axes": "ints", "keepdims": "bool"}, _reduce)


def _reshape(ts, attrs):
    (t,) = ts
    return TensorType(t.dtype, tuple(attrs["shape"]))


_register("reshape", 1, {"shape": "shape"}, _reshape)


def _permute(ts, attrs):
    (t,) = ts
    perm = list(attrs["perm"])
    if t.rank is None:
        raise IRError("permute: operand has variadic dims; reshape to a fixed rank first")
    if sorted(perm) != list(range(t.rank)):
        raise IRError(f"permute: perm {perm} is not a permutation of 0..{t.rank - 1}")
    return TensorType(t.dtype, tuple(t.shape[p] for p in perm))


_register("permute", 1, {"perm": "ints"}, _permute)


def _concat(ts, attrs):
    dt = _unify_dtype(ts, "concat")
    shapes = [tuple(t.shape) for t in ts]
    n = len(shapes[0])
    if any(len(sh) != n for sh in shapes):
        raise IRError("concat: operands need the same rank")
    var = [k for k, d in enumerate(shapes[0]) if isinstance(d, Variadic)]
    if var:   # a variadic group: a fixed dim before it (from 0) or after it (from the end, negative)
        a = attrs["axis"]
        if isinstance(a, int) and 0 <= a < var[0]:
            ax = a
        elif not isinstance(a, int) or a >= 0 or -a > n - 1 - var[-1]:
            head = f"0..{var[0] - 1} or " if var[0] else ""
            raise IRError(f"concat: axis {a} must be {head}negative and within the {n - 1 - var[-1]} dims after "
                          f"*{shapes[0][var[-1]].name}")
        else:
            ax = n + a
    else:
        ax = _norm_axes([attrs["axis"]], ts[0].shape, "concat")[0]
    total: DimExpr = Lit(0)
    for sh in shapes:
        for i in range(n):
            if i != ax and sh[i] != shapes[0][i]:
                raise IRError(f"concat: dim {i} differs: {shape_str(shapes[0])} vs {shape_str(sh)}")
        total = total + sh[ax]
    shape = list(shapes[0])
    shape[ax] = total
    return TensorType(dt, tuple(shape))


_register("concat", -1, {"axis": "int"}, _concat)


def _slice(ts, attrs):
    (t,) = ts
    ax = _norm_axes([attrs["axis"]], t.shape, "slice")[0]
    start, stop, step = as_dim(attrs["start"]), as_dim(attrs["stop"]), attrs["step"]
    if step < 1:
        raise IRError(f"slice: step must be >= 1, got {step}")
    shape = list(t.shape)
    n = stop - start
    shape[ax] = n if step == 1 else (n + (step - 1)) // step
    return TensorType(t.dtype, tuple(shape))


_register("slice", 1, {"axis": "int", "start": "dim", "stop": "dim", "step": "int"}, _slice)


def repeat_interleave_size_error(d: int, repeats: int, size: int) -> str | None:
    """Why `d` elements repeated `repeats` times cannot give `size` (every element read: (d - 1) * repeats < size <=
    d * repeats), or None when they can. The type rule checks literals with it, the interpreter the bound values."""
    if (d - 1) * repeats < size <= d * repeats:
        return None
    return (f"repeat_interleave: {d} elements repeated {repeats} times cannot give {size} (needs "
            f"{(d - 1) * repeats} < size <= {d * repeats})")


def _repeat_interleave(ts, attrs):
    """Each element along `axis` repeated `repeats` times, the first `size` kept: x's dim D becomes `size`
    (repeat_interleave_size_error's rule; a last partial group: ceil(size / repeats) = D). Checked here when both are
    literals; the spec's shapes relate symbolic ones (the interpreter checks the values)."""
    (t,) = ts
    ax = _norm_axes([attrs["axis"]], t.shape, "repeat_interleave")[0]
    r = attrs["repeats"]
    if not isinstance(r, int) or isinstance(r, bool) or r < 1:
        raise IRError(f"repeat_interleave: repeats must be an int >= 1, got {r!r}")
    shape = list(t.shape)
    size, d = as_dim(attrs["size"]), t.shape[ax]
    if isinstance(size, Lit) and isinstance(d, Lit):
        why = repeat_interleave_size_error(d.value, r, size.value)
        if why:
            raise IRError(why)
    shape[ax] = size
    return TensorType(t.dtype, tuple(shape))


_register("repeat_interleave", 1, {"axis": "int", "repeats": "int", "size": "dim"}, _repeat_interleave)


def _gather(ts, attrs):
    x, idx = ts
    if not (isinstance(idx.dtype, DType) and idx.dtype.is_int):
        raise IRError(f"gather: indices must be i32 or i64, got {idx.dtype!r}")
    nb, ax = attrs["batch_dims"], attrs["axis"]
    if x.rank is None or (idx.rank is None and nb > 0):   # without batch dims any index shape, a variadic one too
        raise IRError("gather: operands need a fixed rank")
    if not (0 <= nb <= ax < x.rank) or (idx.rank is not None and idx.rank < nb):
        raise IRError(f"gather: need 0 <= batch_dims ({nb}) <= axis ({ax}) < rank ({x.rank}) and idx rank >= batch_dims")
    if nb != ax:
        raise IRError("gather: axis must equal batch_dims (gather the first non-batch axis)")
    if x.shape[:nb] != idx.shape[:nb]:
        raise IRError(f"gather: batch dims differ: {shape_str(x.shape[:nb])} vs {shape_str(idx.shape[:nb])}")
    return TensorType(x.dtype, tuple(idx.shape) + tuple(x.shape[ax + 1:]))


_register("gather", 2, {"axis": "int", "batch_dims": "int"}, _gather)


def _scatter_add(ts, attrs):
    idx, src = ts
    if not (isinstance(idx.dtype, DType) and idx.dtype.is_int):
        raise IRError(f"scatter_add: indices must be i32 or i64, got {idx.dtype!r}")
    nb, ax = attrs["batch_dims"], attrs["axis"]
    if idx.rank is None or src.rank is None:
        raise IRError("scatter_add: operands need a fixed rank")
    if nb != ax or idx.rank < nb or tuple(src.shape[: idx.rank]) != tuple(idx.shape):
        raise IRError(
            f"scatter_add: src {shape_str(src.shape)} must start with idx {shape_str(idx.shape)} and axis == batch_dims"
        )
    return TensorType(src.dtype, tuple(idx.shape[:nb]) + (as_dim(attrs["size"]),) + tuple(src.shape[idx.rank:]))


_register("scatter_add", 2, {"axis": "int", "batch_dims": "int", "size": "dim"}, _scatter_add)


def _matmul(ts, attrs):
    """Result type of matmul(a, b): NumPy matmul over the last two dims (each operand transposed there by its
    attribute), the leading batch dims broadcast as NumPy broadcasts them (broadcast_shapes: [*B, M, K] x [K, N],
    [B, 1, M, K] x [C, K, N], ...). 1-D operands are refused (NumPy's vector forms are not supported: reshape the
    vector to [1, K] or [K, 1])."""
    a, b = ts
    dt = _unify_dtype(ts, "matmul")
    for name, t in (("a", a), ("b", b)):
        if sum(1 for d in t.shape if not isinstance(d, Variadic)) < 2:
            raise IRError(f"matmul: operand {name} of shape {shape_str(t.shape)} has fewer than 2 (fixed) dims; 1-D "
                          f"operands (NumPy's vector forms) are not supported: reshape it to [1, K] or [K, 1]")
    if any(isinstance(d, Variadic) for t in ts for d in t.shape[-2:]):
        raise IRError("matmul: the last two dims of an operand are a variadic group; they must be fixed dims")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2], "matmul (batch dims)")
    m, k = (a.shape[-1], a.shape[-2]) if attrs["transpose_a"] else (a.shape[-2], a.shape[-1])
    k2, n = (b.shape[-1], b.shape[-2]) if attrs["transpose_b"] else (b.shape[-2], b.shape[-1])
    if k != k2:
        raise IRError(f"matmul: contraction dims differ: {k} vs {k2}")
    return TensorType(dt, tuple(batch) + (m, n))


_register("matmul", 2, {"transpose_a": "bool", "transpose_b": "bool"}, _matmul)
