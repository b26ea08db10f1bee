"""Tracing builder: the body of a spec is ordinary Python over `Tensor` proxies; every operation
appends a typed node to the graph under construction (type rules of `opgen.ir.ops`)."""

from __future__ import annotations

import math
import numbers
import operator
import os
import re
import sys

import numpy as np

from opgen.dsl.diagnostics import caller_loc, spec_error
from opgen.errors import IRError
from opgen.ir.core import Node, TensorType, Value, canonical_attrs, exact_key
from opgen.ir.dims import Bin, DimExpr, Lit, Variadic, as_dim
from opgen.ir.dtypes import DType, DTypeVar
from opgen.ir.ops import INT_ROUND_MODES, OPS

F32 = DType.f32


def _number(x):
    """`x` as a plain Python int or float when it is a NumPy scalar number (np.float32(0.5) -> 0.5, np.int64(3) ->
    3, np.float64 too, though it is a float: NumPy registers its scalar types with `numbers`; np.bool_ is not one);
    anything else, Python numbers and bools included, unchanged."""
    if isinstance(x, bool) or type(x) in (int, float) or not isinstance(x, numbers.Real):
        return x
    return int(x) if isinstance(x, numbers.Integral) else float(x)


def _caller_loc() -> str:
    """file:line of the first stack frame outside opgen/dsl (the spec line that built a node)."""
    here = os.path.dirname(__file__)
    fr = sys._getframe(2)
    while fr is not None:
        if not fr.f_code.co_filename.startswith(here):
            return f"{os.path.basename(fr.f_code.co_filename)}:{fr.f_lineno}"
        fr = fr.f_back
    return ""


# what to change, by the start of the type rule's complaint (opgen.ir.ops messages)
_HINTS = (
    ("operand dtypes differ", "cast one operand (x.f32(), x.cast(i32)) so both have the same dtype"),
    ("cannot broadcast", "reshape or broadcast_to one operand so the shapes broadcast (NumPy rules)"),
    ("must be floating point", "cast the operand to a float dtype first (x.f32())"),
    ("must be bool", "use a comparison (x > 0, x.eq(y)) to get a bool tensor"),
    ("must be numeric", "cast the bool tensor to a number first (m.cast(f32))"),
    ("contraction dims differ", "transpose an operand (transpose_a= / transpose_b=) or fix the shapes so the "
                                "inner dims match"),
    ("batch dims differ", "reshape the operands so their leading dims match"),
    ("axis", "use an axis inside the operand's rank (negative axes count from the end)"),
    ("variadic", "reshape to a fixed rank first (x.reshape([Prod(\"Bd\"), S, H]))"),
    ("does not broadcast", "broadcast only dims of size 1 (or add them with reshape)"),
    ("rounds to an integer", "name the rounding: x.cast(i8, \"rint\") (or round, floor, ceil, trunc); the value "
                             "then saturates to the integer type's range"),
    ("odd exists only", "use round=\"rint\" (ties to even) or round=\"round\" (ties away) for this cast"),
    ("may narrow", "write it x.cast(T, \"rint\") (ties to even) or x.cast(T, \"round\") (ties away)"),
    ("round", "name the rounding of a narrowing cast: round=\"rint\" or round=\"round\""),
)


def _hint(message: str) -> str:
    """What to change for a type rule's complaint `message` (opgen.ir.ops): _HINTS by the complaint's start; a
    float dtype (a variable such as T, or f16 / bf16) meeting f32 gets the fp32-proxy rule (README, the spec example:
    body values compute in fp32, the example body's "fp32 proxies", and x.cast(T) makes a T value, meant for an
    output)."""
    m = re.search(r"operand dtypes differ: \['(\w+)', '(\w+)'\]", message)
    if m and "f32" in m.groups():
        t = next(g for g in m.groups() if g != "f32")
        if not re.fullmatch(r"(i|u)\d+|bool|boolean|f64", t):
            return (f"body values are fp32 (the inputs are fp32 proxies) and x.cast({t}, ...) makes a {t} value, for "
                    f"an output: to round an intermediate to {t} and compute on, write b.quantize(x, {t}, \"rint\") "
                    f"(rounded to {t}, widened back to fp32, as examples/specs/flash_attention_score.py does), or "
                    f"widen the {t} operand with .f32()")
    m = re.search(r"cannot broadcast .* \(dim (.+) vs (.+)\)$", message)
    if m and any("//" in g for g in m.groups()):
        return (f"dims are compared as written, and {m.group(1)} is not known to equal {m.group(2)} (a dim's "
                f"multiple_of is not used to simplify them): declare the even extent as twice a dim of its own "
                f"(spec.input(\"x\", T, [..., 2 * Dh]), then x.slice(-1, 0, Dh) and x.slice(-1, Dh, 2 * Dh))")
    for key, hint in _HINTS:
        if key in message:
            return hint
    return "fix the operands of this operation (the type rules are in opgen/ir/ops.py)"


class Builder:
    """Collects nodes of one graph. Spec bodies call its methods (`b.exp(x)`, `b.matmul(a, c)`, ...)."""

    def __init__(self):
        self.nodes: list[Node] = []
        self._n = 0
        self._cse: dict = {}
        self.types: dict = {}   # value name -> TensorType of every value an emitted node read
        self.bounds = None   # opgen.ir.dims.Bounds of the spec's dims (slice bounds are proven against them)
        self.param_kinds: dict = {}   # parameter value name -> "input" / "attribute" (named in type-rule hints)

    # -- core -------------------------------------------------------------------------------
    def emit(self, op: str, inputs, **attrs) -> "Tensor":
        """Append `op(inputs) {attrs}` after checking it with the op's type rule; returns its result.

        Identical nodes are shared (hash-consing), so specs may repeat sub-expressions freely.
        Raises SpecError (with the spec line) when the type rule fails.
        """
        ins = tuple(self._as_tensor(x) for x in inputs)
        for t in ins:   # the types of the values read (a parameter's too: _index_of looks through its fp32 proxy)
            self.types[t.value.name] = t.value.type
        cattrs = canonical_attrs(attrs)
        key = (op, tuple(t.value.name for t in ins), tuple((k, exact_key(v)) for k, v in cattrs))
        if key in self._cse:
            return self._cse[key]
        try:
            ty = OPS[op].infer([t.value.type for t in ins], dict(cattrs))
        except IRError as e:
            msg = str(e) if str(e).startswith(f"{op}:") else f"{op}: {e}"
            raise spec_error(caller_loc(), msg, self._int_param_hint(ins) or _hint(msg)) from None
        self._n += 1
        v = Value(f"v{self._n}", ty)
        self.nodes.append(Node(op, key[1], v, cattrs, _caller_loc()))
        t = Tensor(self, v)
        self._cse[key] = t
        return t

    def check_slice(self, x: "Tensor", axis: int, start, stop) -> None:
        """Prove 0 <= start <= stop <= dim for a slice of `x` along `axis` (dim: x's extent there) from `bounds`.
        Raises SpecError at the spec line naming the bound that does not follow."""
        if self.bounds is None:
            return
        shape = tuple(x.value.type.shape)
        dim = shape[axis % len(shape)]
        if not isinstance(dim, DimExpr):   # a variadic group: the slice's type rule refuses it
            return
        for e, rule in ((start, f"0 <= {start}"), (stop - start, f"{start} <= {stop}"),
                        (as_dim(dim) - stop, f"{stop} <= {dim}")):
            if not self.bounds.nonneg(e):
                raise spec_error(caller_loc(), f"slice [{start}, {stop}) of axis {axis} (extent {dim}): {rule} does not "
                                 f"follow from the dims' declared ranges",
                                 "slice inside the axis (0 <= start <= stop <= extent), or declare the dims' min=/max= "
                                 "or spec.require(...) the relation")

    def check_reshape(self, shape) -> None:
        """Prove every floor division a // b in a reshape's target `shape` exact (a % b == 0 from the spec's
        `require` relations or the dims' multiple_of): a regrouping such as [N, C, L] -> [N, G, C // G * L] keeps
        the element count only then. Raises SpecError at the spec line naming the relation to declare."""
        if self.bounds is None:
            return
        for d in shape:
            if not isinstance(d, DimExpr):
                continue
            for q in _floordivs(as_dim(d)):
                if not self.bounds.nonneg(Lit(0) - (q.lhs % q.rhs)):
                    raise spec_error(caller_loc(), f"reshape to [{', '.join(str(x) for x in shape)}]: {q} is exact "
                                     f"only when {q.lhs % q.rhs} == 0, which does not follow from the spec",
                                     f"declare it: spec.require(({q.lhs % q.rhs}).eq(0), \"<the attribute or input "
                                     f"that sets {q.rhs}>\"), or multiple_of= on the dim")

    def _int_param_hint(self, ins) -> str:
        """The hint for float and integer operands mixed where one integer operand is a parameter of the spec (an
        int runtime attribute, an i64 scalar in the body; or an integer input): name it and its widening, e.g.
        `lo is an int attribute (an i64 scalar in the body): widen it with lo.f32()`. "" when that is not the case
        (the generic _hint applies)."""
        dts = [t.value.type.dtype for t in ins]
        if not any(isinstance(d, DType) and d.is_float for d in dts) and not any(isinstance(d, DTypeVar) for d in dts):
            return ""
        for t in ins:
            d, name = t.value.type.dtype, t.value.name
            if isinstance(d, DType) and d.is_int and name in self.param_kinds:
                kind = self.param_kinds[name]
                what = "an int attribute (an i64 scalar in the body)" if kind == "attribute" else \
                    f"an {d.name} input"
                return f"{name} is {what}: widen it with {name}.f32() (exact below 2^24) to compute with floats"
        return ""

    def _as_tensor(self, x):
        if isinstance(x, Tensor):
            return x
        raise spec_error(caller_loc(), f"expected a tensor, got {x!r}",
                         "pass a tensor (an input, or b.const(v) for a constant)")

    def const(self, value, dtype=F32) -> "Tensor":
        """Scalar constant (shape [])."""
        if isinstance(dtype, DType) and dtype.is_float:
            value = float(value)
        return self.emit("const", (), value=value, dtype=dtype)

    def _lift(self, x, like: "Tensor | None") -> "Tensor":
        """`x` as a tensor: a number becomes a constant of `like`'s dtype (f32 when `like` is None or its dtype is
        a variable; an integer dtype takes only an int), a dim expression its value in that dtype. Raises
        SpecError for anything else (a bool included). A NumPy scalar number is the number it holds (_number)."""
        if isinstance(x, Tensor):
            return x
        x = _number(x)
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            dt = like.dtype if like is not None else F32
            if isinstance(dt, DType) and dt.is_int:
                if not isinstance(x, int):
                    raise spec_error(caller_loc(), f"float constant {x} used with an integer tensor",
                                     "use an integer constant, or cast the tensor to a float dtype (x.f32())")
                return self.const(int(x), dt)
            return self.const(float(x), dt if isinstance(dt, DType) else F32)
        if isinstance(x, DimExpr):
            dt = like.dtype if like is not None and isinstance(like.dtype, DType) else F32
            return self.emit("dimval", (), n=x, dtype=dt)
        if x is None:   # the body's argument of an optional input absent in this specialisation
            raise spec_error(caller_loc(), "cannot use None as a tensor: an optional input (optional=True) is None "
                             "in the body when the call does not give it", "test it first (`if bias is not None:`), "
                             "or drop optional=True")
        if isinstance(x, np.ndarray):
            raise _array_error()
        if isinstance(x, Variadic):   # x.shape[0] of a [*Bd, H] tensor
            raise spec_error(caller_loc(), f"cannot use the variadic group {x.name} as a number: it stands for any "
                             "number of dims", f'use Prod("{x.name}"), the product of its dims')
        raise spec_error(caller_loc(), f"cannot use {x!r} as a tensor",
                         "use a tensor, a number, or a dim expression")

    # -- elementwise ------------------------------------------------------------------------
    def exp(self, x):
        """Elementwise e**x (float)."""
        return self.emit("exp", (x,))

    def log(self, x):
        """Elementwise natural logarithm (float)."""
        return self.emit("log", (x,))

    def sqrt(self, x):
        """Elementwise square root (float)."""
        return self.emit("sqrt", (x,))

    def rsqrt(self, x):
        """Elementwise 1/sqrt(x) (float)."""
        return self.emit("rsqrt", (x,))

    def recip(self, x):
        """Elementwise 1/x (float)."""
        return self.emit("recip", (x,))

    def abs(self, x):
        """Elementwise |x|."""
        return self.emit("abs", (x,))

    def tanh(self, x):
        """Elementwise tanh (float), an op of its own (`tanh`). Device mode (fp32): as AscendC's Tanh computes it on
        Atlas A2 / A3 (x clipped to [-8.8, 8.8], t = exp(2x), (t - 1) / (t + 1); docs/reference/ascendc.md §1.9),
        which the rows family lowers as those vector steps; exact mode: float64 tanh."""
        return self.emit("tanh", (x,))

    def erf(self, x):
        """Elementwise error function (float), an op of its own (`erf`). The interpreter's exact mode takes math.erf
        in float64; its device mode (fp32) and the kernel families take AscendC's Erf steps (x clipped to ±3.92, a
        rational P / Q in fp32: within 4.3e-7 of erf; docs/reference/ascendc.md §1.9)."""
        return self.emit("erf", (x,))

    def sigmoid(self, x):
        """1 / (1 + exp(-x)), elementwise (float), written with neg, exp, add and recip — ops the rows family
        lowers. Saturates correctly: exp(-x) = inf gives 0, exp(-x) = 0 gives 1."""
        return self.recip(1.0 + self.exp(-x))

    def silu(self, x):
        """x * sigmoid(x) = x / (1 + exp(-x)) (SiLU / Swish), elementwise; written with neg, exp, add and div (lowered
        by the rows family)."""
        return x / (1.0 + self.exp(-x))

    def gelu(self, x, approximate="none"):
        """GELU, elementwise (torch.nn.functional.gelu's two forms).

        approximate="none": 0.5 * x * (1 + erf(x / sqrt(2))), with the `erf` op (lowered as AscendC's Erf steps,
        docs/reference/ascendc.md §1.9);
        approximate="tanh": 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), written as the equal
        x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)) with mul, add, exp and div (lowered by the rows family).
        Raises SpecError for another `approximate`."""
        if approximate == "none":
            return 0.5 * x * (1.0 + self.erf(x * (1.0 / math.sqrt(2.0))))
        if approximate == "tanh":
            k = 2.0 * math.sqrt(2.0 / math.pi)
            return x / (1.0 + self.exp(-k * (x + 0.044715 * (x * x * x))))
        raise spec_error(caller_loc(), f"gelu: approximate must be \"none\" or \"tanh\", got {approximate!r}",
                         'use approximate="none" (erf) or approximate="tanh"')

    def log1p(self, x):
        """log(1 + x), elementwise (float), accurate to a few ulps relative also where |x| is below one ulp of 1
        (where log(1 + x) rounds to 0): with u = 1 + x rounded and v = u - 1 (exact), log1p(x) = x where v == 0, else
        log(u) * x / v — the rounding of 1 + x cancels in log(u) / v (Goldberg, "What every computer scientist should
        know about floating-point arithmetic", Theorem 4). add, sub, log, mul, div, eq and where: ops the rows family
        lowers. NaN for x < -1, -inf at -1, as torch.log1p."""
        u = 1.0 + x
        v = u - 1.0
        return self.where(v.eq(0.0), x, self.log(u) * x / v)

    def softplus(self, x, beta=1.0):
        """log(1 + exp(beta x)) / beta, elementwise (float), in the overflow-free form
        (max(beta x, 0) + log1p(exp(-|beta x|))) / beta with maximum, abs, neg, exp and log1p (Builder.log1p) — ops
        the rows family lowers. Relative accuracy a few ulps everywhere, also far below zero where softplus is tiny
        (exp(beta x) itself). `beta` is a Python number or a scalar tensor (a runtime attribute: then divided by, not
        multiplied with its reciprocal)."""
        beta = _number(beta)
        if isinstance(beta, (int, float)) and not isinstance(beta, bool):
            y = x if beta == 1.0 else x * float(beta)
            r = self.maximum(y, 0.0) + self.log1p(self.exp(-self.abs(y)))
            return r if beta == 1.0 else r * (1.0 / float(beta))
        y = x * beta
        return (self.maximum(y, 0.0) + self.log1p(self.exp(-self.abs(y)))) / beta

    def pow(self, x, p):
        """x ** p for a Python number p, elementwise (float), chosen by p: 0 -> ones; 1 -> x; 2, 3, 4 -> repeated
        mul; 0.5 -> sqrt; -0.5 -> rsqrt; -1 -> recip; -2, -3, -4 -> recip of the product; any other integer p with
        |p| <= 64 -> binary exponentiation (squarings and muls, recip of the product for p < 0: exact in sign, so
        (-2) ** 5 = -32 as torch); otherwise exp(p * log(x)) (NaN for x < 0 — as torch for a non-integer p, but an
        integer |p| > 64 also gives NaN there where torch gives +-|x|^p; relative error about |p log x| ulps).
        Every form uses ops the rows family lowers. Raises SpecError for a non-number p (use exp/log for a tensor)."""
        p = _number(p)
        if isinstance(p, bool) or not isinstance(p, (int, float)):
            raise spec_error(caller_loc(), f"pow: the exponent must be a number, got {p!r}",
                             "for a tensor exponent write b.exp(p * b.log(x))")
        p = float(p)
        if p == 0.0:
            return self.const(1.0, x.dtype if isinstance(x.dtype, DType) else F32).broadcast_to(x.shape)
        if p == 1.0:
            return x
        if p == 0.5:
            return self.sqrt(x)
        if p == -0.5:
            return self.rsqrt(x)
        if p == int(p) and 2 <= abs(p) <= 4:
            r = x
            for _ in range(int(abs(p)) - 1):
                r = r * x
            return r if p > 0 else self.recip(r)
        if p == -1.0:
            return self.recip(x)
        if p == int(p) and abs(p) <= 64:
            n, base, r = int(abs(p)), x, None
            while n:
                if n & 1:
                    r = base if r is None else r * base
                n >>= 1
                if n:
                    base = base * base
            return r if p > 0 else self.recip(r)
        return self.exp(p * self.log(x))

    def clamp(self, x, min=None, max=None):
        """Elementwise clamp to [min, max] (either may be None; numbers or tensors that broadcast): maximum then
        minimum (lowered by the rows family). NaN propagates as in Max/Min. Raises SpecError when both are None."""
        if min is None and max is None:
            raise spec_error(caller_loc(), "clamp: give min=, max= or both", "b.clamp(x, min=0.0, max=6.0)")
        r = x
        if min is not None:
            r = self.maximum(r, min)
        if max is not None:
            r = self.minimum(r, max)
        return r

    def sign(self, x):
        """Elementwise sign: 1 for x > 0, -1 for x < 0, 0 for 0 and NaN, in x's dtype; written (x > 0) - (x < 0)
        with compares and bool casts (the rows family lowers no compare yet)."""
        return (x > 0).cast(x.dtype) - (x < 0).cast(x.dtype)

    def relu(self, x):
        """max(x, 0), elementwise (ReLU; torch.relu): NaN stays NaN (the maximum of AscendC's default INF/NAN mode,
        docs/reference/ascendc.md §1.13); -0.0 gives +0.0 (+0.0 is above -0.0 there; torch.relu keeps -0.0, which
        compares equal). Written as `maximum` with 0 (Maxs on the vector unit)."""
        return self.maximum(x, 0.0)

    def maximum(self, a, c):
        """Elementwise maximum with NumPy broadcasting."""
        a, c = self._pair(a, c)
        return self.emit("maximum", (a, c))

    def minimum(self, a, c):
        """Elementwise minimum with NumPy broadcasting."""
        a, c = self._pair(a, c)
        return self.emit("minimum", (a, c))

    def where(self, cond, a, c):
        """select(cond, a, c) with NumPy broadcasting: a where cond, else c (a / c tensors or numbers; a number takes
        the other branch's dtype, and two numbers are f32 constants, as b.const makes them). cond is bool, or an
        integer mask (uint8 0/1 as torch's older masks) taken as cond != 0."""
        if isinstance(cond, Tensor) and isinstance(cond.dtype, DType) and cond.dtype.is_int:
            cond = cond.ne(0)
        if not isinstance(a, Tensor) and not isinstance(c, Tensor):
            a = self._lift(a, None)   # two numbers: f32 constants, as b.const makes them
        if not isinstance(a, Tensor):
            a = self._lift(a, c)
        if not isinstance(c, Tensor):
            c = self._lift(c, a)
        return self.emit("select", (cond, a, c))

    def cast(self, x, to, round="none"):
        """Convert `x` to dtype `to` as AscendC's Cast does (docs/reference/ascendc.md §1.12; the interpreter's
        meaning is opgen.interp.rounding).

        round: none | rint (nearest, ties to even) | round (nearest, ties away from zero) | floor | ceil | trunc |
        odd (to f16 only). A narrowing float cast and every float -> integer cast must name a mode other than none.
        Float -> integer rounds with the mode and saturates to the target's range (NaN -> 0; to i8/u8 through f16
        as the device does); integer -> integer saturates; -> bool is x != 0.
        Raises SpecError (at the spec line) when the mode does not fit the conversion."""
        return self.emit("cast", (x,), to=to, round=round)

    def quantize(self, x, to, round, scale=None, offset=None):
        """Quantise `x`: v = x * scale + offset (each optional: a tensor broadcasting against x, or a number), then

        - `to` an integer dtype (i8, u8, i16, i32): v rounded with `round` (rint, round, floor, ceil, trunc) and
          saturated to the target's range, as AscendQuant / DynamicQuant do (y = sat(round(x * scale + offset)));
          returns the integer tensor. DynamicQuant's y = round(x / s) is `scale=1.0 / s` only up to the last bit
          of 1/s: write `b.cast(x / s, i8, "rint")` to divide.
        - `to` a float dtype (f16, bf16 or a dtype variable): v rounded to `to` with `round` and widened back to
          v's dtype (the precision loss of storing an fp32 intermediate in `to`); identity in exact mode.
        Raises SpecError for a mode that does not fit (an integer target: one of INT_ROUND_MODES, named as
        quantize's)."""
        if isinstance(to, DType) and to.is_int and round not in INT_ROUND_MODES:
            raise spec_error(caller_loc(), f"quantize: round must be one of {', '.join(INT_ROUND_MODES)} for an "
                             f"integer target, got {round!r}", 'name how x * scale + offset rounds to '
                             f'{to.name}: round="rint" (half to even) or round="round" (half away from zero)')
        v = self._as_tensor(x)
        if scale is not None:
            v = v * scale
        if offset is not None:
            v = v + offset
        if isinstance(to, DType) and to.is_int:
            return self.cast(v, to, round)
        return self.cast(self.cast(v, to, round), v.dtype)

    def _pair(self, a, c):
        if not isinstance(a, Tensor):
            a = self._lift(a, c)
        if not isinstance(c, Tensor):
            c = self._lift(c, a)
        return a, c

    # -- structure --------------------------------------------------------------------------
    def iota(self, n, dtype=DType.i64):
        """[n] integers 0..n-1 (n a dim expression)."""
        return self.emit("iota", (), n=as_dim(n), dtype=dtype)

    def concat(self, xs, axis):
        """Concatenate tensors of equal rank along `axis` (other dims must match)."""
        return self.emit("concat", tuple(xs), axis=axis)

    def _index_of(self, idx, op: str) -> None:
        """Refuse an index that is the fp32 proxy of an input typed by a dtype variable (the body sees a dtype
        variable's values as fp32, README "dtype variables"): a SpecError at the spec line naming the input and the
        fix, instead of the type rule's 'indices must be i32 or i64, got f32'."""
        t = self._as_tensor(idx)
        made = next((n for n in reversed(self.nodes) if n.result is t.value), None)
        if made is None or made.op != "cast" or made.attr("to") != DType.f32:
            return
        src = made.inputs[0]
        var = self.types[src].dtype if src in self.types else None
        if isinstance(var, DTypeVar):
            raise spec_error(caller_loc(), f"{op}: the index is input {src} of dtype variable {var.name}, which the "
                             f"body sees as fp32 (the proxy of every dtype variable); an index has one integer dtype",
                             f"declare input {src} with i32 or i64 (i64 holds every i32 value; a second spec serves "
                             f"the other)")

    def gather(self, x, idx, axis, batch_dims=None):
        """out[*b, i..., rest] = x[*b, idx[*b, i...], rest]; batch_dims defaults to axis."""
        self._index_of(idx, "gather")
        return self.emit("gather", (x, idx), axis=axis, batch_dims=axis if batch_dims is None else batch_dims)

    def scatter_add(self, idx, src, axis, size, batch_dims=None):
        """Inverse of gather: out[*b, idx[*b, i...], rest] += src[*b, i..., rest]; out axis length `size`."""
        self._index_of(idx, "scatter_add")
        return self.emit(
            "scatter_add", (idx, src), axis=axis, batch_dims=axis if batch_dims is None else batch_dims,
            size=as_dim(size))

    def matmul(self, a, c, transpose_a=False, transpose_b=False):
        """Matrix product over the last two axes (optionally transposed), the leading batch dims broadcast as NumPy's
        matmul broadcasts them ([*B, M, K] x [K, N] -> [*B, M, N]); operands of at least two dims (no 1-D form).
        Raises SpecError (at the spec line) when the shapes do not multiply."""
        return self.emit("matmul", (a, c), transpose_a=transpose_a, transpose_b=transpose_b)


# NumPy's ufuncs that are a Python operator of a tensor: a NumPy scalar on the left (np.float32(2) * x) reaches the
# tensor as np.multiply(np.float32(2), x) (Tensor.__array_ufunc__)
_UFUNC_OPERATORS = {"add": operator.add, "subtract": operator.sub, "multiply": operator.mul,
                    "divide": operator.truediv, "true_divide": operator.truediv, "power": operator.pow,
                    "negative": operator.neg, "matmul": operator.matmul, "less": operator.lt,
                    "less_equal": operator.le, "greater": operator.gt, "greater_equal": operator.ge,
                    "bitwise_and": operator.and_, "bitwise_or": operator.or_, "invert": operator.invert}

# the DSL's spelling of a NumPy function a body applied to a tensor (the name NumPy gives the ufunc or function)
_NUMPY_SPELLINGS = {
    "exp": "b.exp(x)", "log": "b.log(x)", "log1p": "b.log1p(x)", "sqrt": "b.sqrt(x)", "tanh": "b.tanh(x)",
    "absolute": "b.abs(x)", "abs": "b.abs(x)", "sign": "b.sign(x)", "reciprocal": "b.recip(x)",
    "maximum": "b.maximum(a, c)", "minimum": "b.minimum(a, c)", "fmax": "b.maximum(a, c)", "fmin": "b.minimum(a, c)",
    "clip": "b.clamp(x, min, max)", "where": "b.where(cond, a, c)", "expm1": "b.exp(x) - 1 (there is no expm1)",
    "float_power": "x ** p", "square": "x * x", "equal": "x.eq(y)", "not_equal": "x.ne(y)",
    "sum": "x.sum(axes, keepdims=True)", "mean": "x.mean(axes, keepdims=True)", "max": "x.max(axes, keepdims=True)",
    "amax": "x.max(axes, keepdims=True)", "min": "x.min(axes, keepdims=True)", "amin": "x.min(axes, keepdims=True)",
    "reshape": "x.reshape(shape)", "transpose": "x.permute(*perm)", "permute_dims": "x.permute(*perm)",
    "broadcast_to": "x.broadcast_to(shape)", "concatenate": "b.concat(xs, axis)", "concat": "b.concat(xs, axis)",
    "matmul": "x @ y or b.matmul(x, y)", "dot": "x @ y or b.matmul(x, y)"}


def _numpy_error(name: str):
    """The SpecError (at the spec line) for NumPy's function `name` given a traced tensor."""
    alt = _NUMPY_SPELLINGS.get(name)
    return spec_error(caller_loc(), f"NumPy's np.{name} cannot take a traced tensor: the body builds the operator's "
                      "graph, NumPy would compute on the proxy", f"use {alt}" if alt else
                      "write it with the tensor's operators and methods and the builder's functions (b.exp, "
                      "b.maximum, b.where, ...: README \"Writing a spec\")")


def _array_error():
    """The SpecError (at the spec line) for a NumPy array used beside a traced tensor."""
    return spec_error(caller_loc(), "a NumPy array cannot be combined with a traced tensor: the body builds the "
                      "operator's graph, an array's values are no part of it",
                      "declare it as an input (spec.input) or write its values as Python numbers")


class Tensor:
    """Proxy of an IR value inside a spec body. Arithmetic operators build nodes.

    Comparisons (`<`, `<=`, `>`, `>=`) build bool tensors; use `.eq()` / `.ne()` for equality.
    """

    DIM_REFLECTED = True   # `N * x`: a dim's operators leave a tensor operand to this class (opgen.ir.dims)

    __array_priority__ = 1000

    def __init__(self, b: Builder, value: Value):
        self.b = b
        self.value = value

    @property
    def type(self) -> TensorType:
        """The value's TensorType (dtype and symbolic shape)."""
        return self.value.type

    @property
    def dtype(self):
        """The value's dtype (a DType or dtype variable)."""
        return self.value.type.dtype

    @property
    def shape(self):
        """The value's symbolic shape (tuple of dim expressions / one variadic group)."""
        return self.value.type.shape

    def __repr__(self):
        return f"Tensor(%{self.value.name}: {self.value.type})"

    def __bool__(self):
        where = caller_loc()  # code positions of implicit truth tests are unreliable: blame the statement
        raise spec_error(f"{where.file}:{where.line}", "a tensor has no truth value at trace time",
                         "use b.where(cond, a, c) instead of if/and/or on tensors")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy's ufunc protocol. A NumPy operator ufunc called plainly with this tensor and numbers (NumPy
        scalars as the numbers they hold) is the tensor's operator (np.float32(2) * x is 2.0 * x); a NumPy array
        beside a tensor, or any other ufunc (np.exp(x), np.maximum(x, 0)), raises SpecError at the spec line
        naming the DSL's spelling."""
        vals = [v.item() if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "iuf" else _number(v)
                for v in inputs]
        if any(isinstance(v, np.ndarray) for v in vals):
            raise _array_error()
        op = _UFUNC_OPERATORS.get(ufunc.__name__)
        if method != "__call__" or kwargs or op is None:
            raise _numpy_error(ufunc.__name__)
        return op(*vals)

    def __array_function__(self, func, types, args, kwargs):
        """NumPy's function protocol: a NumPy function given a tensor (np.where, np.sum, np.concatenate) raises
        SpecError at the spec line naming the DSL's spelling."""
        raise _numpy_error(func.__name__)

    def _bin(self, op, other, reverse=False):
        o = self.b._lift(other, self)
        a, c = (o, self) if reverse else (self, o)
        return self.b.emit(op, (a, c))

    def __add__(self, o):
        return self._bin("add", o)

    def __radd__(self, o):
        return self._bin("add", o, True)

    def __sub__(self, o):
        return self._bin("sub", o)

    def __rsub__(self, o):
        return self._bin("sub", o, True)

    def __mul__(self, o):
        return self._bin("mul", o)

    def __rmul__(self, o):
        return self._bin("mul", o, True)

    def __truediv__(self, o):
        return self._bin("div", o)

    def __rtruediv__(self, o):
        return self._bin("div", o, True)

    def __neg__(self):
        return self.b.emit("neg", (self,))

    def __pow__(self, p):
        """x ** p for a Python number p (Builder.pow)."""
        return self.b.pow(self, p)

    def __matmul__(self, o):
        """x @ y: the matrix product b.matmul(x, y) of two tensors, neither transposed (Builder.matmul: shapes,
        batch broadcasting and its SpecError); another right operand is Python's TypeError at the spec line."""
        if not isinstance(o, Tensor):
            return NotImplemented
        return self.b.matmul(self, o)

    def __lt__(self, o):
        return self._bin("lt", o)

    def __le__(self, o):
        return self._bin("le", o)

    def __gt__(self, o):
        return self._bin("gt", o)

    def __ge__(self, o):
        return self._bin("ge", o)

    def eq(self, o):
        """Elementwise == as a bool tensor."""
        return self._bin("eq", o)

    def ne(self, o):
        """Elementwise != as a bool tensor."""
        return self._bin("ne", o)

    def __and__(self, o):
        return self._bin("and", o)

    def __or__(self, o):
        return self._bin("or", o)

    def __invert__(self):
        return self.b.emit("not", (self,))

    __hash__ = object.__hash__

    # reductions over axes (negative axes count from the end)
    def sum(self, axes, keepdims=True):
        """Sum over `axes` (negative axes count from the end); keeps reduced axes as 1 by default."""
        return self.b.emit("reduce", (self,), kind="sum", axes=tuple(_axes(axes)), keepdims=keepdims)

    def max(self, axes, keepdims=True):
        """Maximum over `axes`; keeps reduced axes as 1 by default."""
        return self.b.emit("reduce", (self,), kind="max", axes=tuple(_axes(axes)), keepdims=keepdims)

    def min(self, axes, keepdims=True):
        """Minimum over `axes`; keeps reduced axes as 1 by default."""
        return self.b.emit("reduce", (self,), kind="min", axes=tuple(_axes(axes)), keepdims=keepdims)

    def mean(self, axes, keepdims=True):
        """Mean over `axes` (sum / count); keeps reduced axes as 1 by default."""
        return self.b.emit("reduce", (self,), kind="mean", axes=tuple(_axes(axes)), keepdims=keepdims)

    def reshape(self, shape):
        """Same elements in a new symbolic shape (row-major). A floor division in the shape (C // G) must be exact
        by the spec's relations (Builder.check_reshape: SpecError otherwise)."""
        out = self.b.emit("reshape", (self,), shape=tuple(_shape(shape)))
        self.b.check_reshape(tuple(_shape(shape)))
        return out

    def permute(self, *perm):
        """Transpose axes: result axis i is input axis perm[i]."""
        return self.b.emit("permute", (self,), perm=tuple(perm))

    def broadcast_to(self, shape):
        """NumPy broadcast to `shape`."""
        return self.b.emit("broadcast", (self,), shape=tuple(_shape(shape)))

    def slice(self, axis, start, stop, step=1):
        """Elements start..stop (step) of `axis`; start/stop may be dim expressions. 0 <= start <= stop <= the
        axis' dim must follow from the dims' declared ranges and the spec's `require` relations (SpecError at the
        spec line otherwise)."""
        out = self.b.emit("slice", (self,), axis=axis, start=as_dim(start), stop=as_dim(stop), step=step)
        self.b.check_slice(self, axis, as_dim(start), as_dim(stop))
        return out

    def repeat_interleave(self, repeats: int, axis: int, size=None):
        """Each element along `axis` repeated `repeats` times (torch.repeat_interleave with a static count), the
        first `size` kept (default: the axis' dim times repeats): element i reads element i // repeats. A per-group
        scale [ceil(K / g), N] becomes per-row [K, N] with `scale.repeat_interleave(g, 0, K)`, the last group
        partial when g does not divide K. repeats: an int >= 1; size: an int or a dim expression with
        (D - 1) * repeats < size <= D * repeats for the axis' dim D (every element read)."""
        if size is None:
            size = self.shape[axis] * repeats
        return self.b.emit("repeat_interleave", (self,), axis=axis, repeats=repeats, size=as_dim(size))

    def cast(self, to, round="none"):
        """Convert to dtype `to` with round mode `round` (none|rint|round)."""
        return self.b.cast(self, to, round)

    def f32(self):
        """Widen to float32 (exact)."""
        return self.b.cast(self, F32)


def _floordivs(e) -> list:
    """The floor divisions (Bin "//") inside dim expression e, outermost first."""
    if not isinstance(e, Bin):
        return []
    here = [e] if e.op == "//" and as_dim(e.rhs) != Lit(1) else []
    return here + _floordivs(e.lhs) + _floordivs(e.rhs)


def _axes(axes):
    """The axes of a reduction as a list: an int or a sequence of ints. Raises a spec error at the caller's line
    for anything else (None: every axis must be listed, there is no 'all axes' shorthand)."""
    if isinstance(axes, bool) or not (isinstance(axes, int) or (isinstance(axes, (list, tuple)) and all(
            isinstance(a, int) and not isinstance(a, bool) for a in axes))):
        raise spec_error(caller_loc(), f"reduction axes must be an int or a tuple of ints, got {axes!r}",
                         "list every axis, e.g. x.sum((0, 1, 2)); with a variadic group, reshape to fixed dims first: "
                         "x.reshape([N, Prod(\"Bd\"), H]).sum((0, 1, 2))")
    return [axes] if isinstance(axes, int) else list(axes)


def _shape(shape):

    return [d if isinstance(d, Variadic) else as_dim(d) for d in shape]


__all__ = ["Builder", "Tensor", "Lit", "DTypeVar"]
