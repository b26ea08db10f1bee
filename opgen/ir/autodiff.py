"""Reverse-mode differentiation of a tensor-IR graph (docs/design.md "Backward from forward").

`differentiate(g, wrt, grads, saved)` takes one specialisation of a forward operator and returns the graph of
its gradients:

* `grads`: {forward output name: incoming-gradient Value} -- the adjoint seeded at each differentiated output
  (its dtype is the output's; it is widened to fp32 first);
* `saved`: {forward output name: saved Value} -- a forward output the backward receives as an input. The value
  that defines the output (through reshapes, permutes and float casts of it) is replaced by the saved input, so
  a saved statistic is reused, never recomputed (rstd, not 1/sqrt(var + eps) again); whatever only fed it dies;
* `wrt`: {forward input name: gradient output name}.

Gradients are computed in fp32 whatever the forward dtypes are (primal operands of another float dtype are widened
where a rule reads them); the caller casts them to the output dtype. Each rule's nodes carry the `loc` of the
forward node they differentiate, so the printed graph names the forward spec line of every gradient node.

The rules (one per op, in `RULES`) follow the textbook adjoints (Griewank & Walther, "Evaluating Derivatives",
ch. 3) with these conventions, documented in docs/design.md "Backward from forward":

* broadcasting operands: the adjoint is summed over the broadcast axes (leading axes dropped, size-1 axes kept);
* reduce max / min: the adjoint is shared evenly among the elements equal to the maximum / minimum (PyTorch's
  amax / amin, TensorFlow's Max / Min gradient); elementwise maximum/minimum follow PyTorch (derivatives.yaml): the larger (smaller) operand takes the adjoint, and
  at a tie each operand takes half of it (dx1 = g * ((x1 > x2) + (x1 == x2) / 2)), so max(x, 0) + min(x, 0) = x
  has derivative 1 at 0 and a relu written as maximum(x, 0) has 1/2 there (PyTorch's relu'(0) = 0 is a rule of
  its op, which the DSL does not have);
* a select's unselected operand takes a masked zero, and a masked zero stays zero through mul / div / neg / cast
  (_Emitter.emit pushes the mask outward: select(c, g, 0) * f -> select(c, g * f, 0)), so an infinite or NaN local
  derivative in the branch that was not taken (exp overflow, a 0/0) does not turn it into NaN; where the condition
  is one scalar (a runtime guard's: opgen.kernel.rowguard) also through reshape / broadcast, and an adjoint summed
  with it is selected instead (x + select(c, g, 0) -> select(c, x + g, x): the sum with a zero is x, a -0.0 x kept
  as it is), so the branch not taken leaves no work behind once the condition is known;
* casts between float dtypes pass the adjoint through unchanged (a rounding has derivative 1 almost everywhere);
  casts to or from integer/bool types carry no gradient; comparisons, iota, constants carry none;
* slice: the adjoints of slices of one value that tile an axis are joined by one concat (zeros in the gaps);
  a strided slice scatters its adjoint back with scatter_add;
* gather -> scatter_add, scatter_add -> gather; matmul -> two matmuls with the transposes swapped;
* a softmax e / S or log-softmax d - log(S) (e = exp(d), S e's keepdims sum or its broadcast) differentiates by one
  rule straight to d (_norm_rule), with the primal (or saved) y / lp; a shift of d constant along the normalised
  axes, where d is read only by such normalisations, gets no adjoint (_shift_free: its row sums are zero).

* two compositions are differentiated as functions (_Composite, _composite_rule): a / (1 + exp(w)) and
  1 / (1 + exp(w)) (sigmoid, silu, gelu's tanh form) and the builder's compensated log1p, whose node-by-node
  derivatives are inf / inf or 0 / 0 on ordinary inputs.

An op on the path from a differentiated input to a differentiated output without a rule raises `NoDerivative`,
which carries the node (its `loc` is the forward spec line). To add an op: write `_rule(ad, node, g) -> {input
index: adjoint}` and register it in `RULES` (an op with no gradient at all: `_none`).
"""

from __future__ import annotations

from functools import reduce as _fold

from opgen.errors import IRError
from opgen.ir.core import Graph, Node, Param, TensorType, Value, canonical_attrs
from opgen.ir.dims import Lit, Prod, Variadic, as_dim
from opgen.ir.dtypes import DType, DTypeVar
from opgen.ir.ops import OPS, broadcast_shapes

F32 = DType.f32

__all__ = ["NoDerivative", "RULES", "differentiate", "saved_chain"]


class NoDerivative(IRError):
    """An op on the differentiated path has no derivative rule; `.node` is the forward node (its loc: the spec
    line)."""

    def __init__(self, node: Node, why: str):
        super().__init__(why)
        self.node = node


def _is_float(dt) -> bool:
    return isinstance(dt, DTypeVar) or dt.is_float


class _Emitter:
    """Builds the nodes of the derived graph: hash-consed (an identical node is shared), typed by the ops' type
    rules, each with the loc of the forward node being copied or differentiated (`self.loc`)."""

    def __init__(self, types: dict):
        self.types = dict(types)      # value name -> TensorType (params, then every emitted value)
        self.nodes: list[Node] = []
        self._cse: dict = {}
        self._n = 0
        self.loc = ""
        self.masked: dict = {}        # select(c, x, 0) / select(c, 0, x) result -> (c, x, zero is first)
        self._copying = False
        self._zero = None
        self._zero = self.const(0.0)

    def emit(self, op: str, ins, **attrs) -> str:
        """Append `op(ins) {attrs}` (ins: value names) and return its result's name. Raises IRError if the type
        rule refuses it (a bug in a rule)."""
        ins = tuple(ins)
        cattrs = canonical_attrs(attrs)
        pushed = self._push_mask(op, ins, cattrs)
        if pushed is not None:
            return pushed
        key = (op, ins, cattrs)
        hit = self._cse.get(key)
        if hit is not None:
            return hit
        ty = OPS[op].infer([self.types[i] for i in ins], dict(cattrs))
        self._n += 1
        name = f"d{self._n}"
        self.types[name] = ty
        self.nodes.append(Node(op, ins, Value(name, ty), cattrs, self.loc))
        self._cse[key] = name
        if op == "select" and not self._copying and self._zero in (ins[1], ins[2]) and ins[1] != ins[2]:
            self.masked[name] = (ins[0], ins[2] if ins[1] == self._zero else ins[1], ins[1] == self._zero)
        return name

    def _push_mask(self, op, ins, cattrs):
        """A masked zero is a strong zero: for mul / div (as numerator) / neg / cast of `m = select(c, x, 0)`
        (or select(c, 0, x)) emit select(c, op(x, ...), 0) instead, so 0 * inf and 0 / 0 in the masked lanes
        stay 0 (docs/design.md "Backward from forward"). Where c is one scalar (a launch-wide condition) also
        reshape / broadcast (select(c, op(x), 0)), and add of an operand `o` of the sum's full type and the masked
        zero: select(c, o + x, o) (o + 0 is o; a -0.0 o stays -0.0). None when `op(ins)` is no such case."""
        if self._copying or not ins:
            return None
        scalar = lambda m: tuple(self.types[self.masked[m][0]].shape) == ()   # noqa: E731 - one condition
        if op in ("reshape", "broadcast") and ins[0] in self.masked and scalar(ins[0]):
            c, x, zero_first = self.masked[ins[0]]   # a launch-wide condition broadcasts to any shape
            inner = self.emit(op, (x,), **dict(cattrs))
            return self.emit("select", (c, self._zero, inner) if zero_first else (c, inner, self._zero))
        if op == "add" and len(ins) == 2:   # an adjoint summed with a masked zero of a launch-wide condition
            k = 0 if ins[0] in self.masked and scalar(ins[0]) else 1 if ins[1] in self.masked and scalar(ins[1]) \
                else None
            if k is None:
                return None
            other = ins[1 - k]
            full = OPS["add"].infer([self.types[i] for i in ins], {})
            if self.types[other] != full:
                return None
            c, x, zero_first = self.masked[ins[k]]
            both = self.emit("add", (x, other) if k == 0 else (other, x))
            return self.emit("select", (c, other, both) if zero_first else (c, both, other))
        if op not in ("mul", "div", "neg", "cast"):
            return None
        k = 0 if ins[0] in self.masked else 1 if op == "mul" and ins[1] in self.masked else None
        if k is None:
            return None
        c, x, zero_first = self.masked[ins[k]]
        inner = self.emit(op, ins[:k] + (x,) + ins[k + 1:], **dict(cattrs))
        if op == "cast":
            z = self.emit("cast", (self._zero,), **dict(cattrs))
        else:
            z = self._zero
        return self.emit("select", (c, z, inner) if zero_first else (c, inner, z))

    def copy(self, n: Node, ins) -> str:
        """Re-emit forward node `n` with operands renamed to `ins`."""
        self.loc = n.loc
        self._copying = True          # the primal keeps its own arithmetic: no mask pushing, no masks recorded
        try:
            return self.emit(n.op, ins, **dict(n.attrs))
        finally:
            self._copying = False

    def type(self, v: str) -> TensorType:
        """The type of value `v`."""
        return self.types[v]

    # small helpers used by the rules
    def const(self, x: float) -> str:
        """fp32 scalar constant."""
        return self.emit("const", (), value=float(x), dtype=F32)

    def zeros(self, shape) -> str:
        """fp32 zeros of `shape`."""
        return self.emit("broadcast", (self.const(0.0),), shape=tuple(shape))

    def f32(self, v: str) -> str:
        """`v` widened to fp32 when it is another float dtype (exact); integer/bool values unchanged."""
        dt = self.types[v].dtype
        if dt != F32 and _is_float(dt):
            return self.emit("cast", (v,), to=F32, round="none")
        return v


def _axes_of(shape, axes) -> list[int]:
    """Reduce/concat axes as indices into `shape` (a variadic group counts as one entry; axes into a shape with a
    group are negative, counted from the end)."""
    return [a % len(shape) if a >= 0 else len(shape) + a for a in axes]


def _unbroadcast(ad: _Emitter, g: str, target) -> str:
    """Sum adjoint `g` over the axes along which a value of shape `target` was broadcast (opgen.ir.ops
    broadcast_shapes), giving shape `target`: leading axes are summed away, size-1 axes summed and kept."""
    target = tuple(target)
    shape = tuple(ad.type(g).shape)
    if shape == target:
        return g
    try:
        if broadcast_shapes(shape, target) == target:   # a lazily broadcast adjoint (_takes_lazy): already fits
            return g
    except IRError:
        pass
    var = [k for k, d in enumerate(shape) if isinstance(d, Variadic)]
    if var and not any(isinstance(d, Variadic) for d in target):
        iv = var[0]   # the target only reaches into the fixed dims after the group: fold the group to one dim
        shape = shape[:iv] + (Prod(shape[iv].name),) + shape[iv + 1:]
        g = ad.emit("reshape", (g,), shape=shape)
    lead = len(shape) - len(target)
    if lead > 0:
        g = ad.emit("reduce", (g,), kind="sum", axes=tuple(range(lead)), keepdims=False)
        shape = shape[lead:]
    ones = [k - len(shape) for k, (d, t) in enumerate(zip(shape, target)) if t == Lit(1) and d != Lit(1)]
    if ones:
        g = ad.emit("reduce", (g,), kind="sum", axes=tuple(ones), keepdims=True)
    if tuple(ad.type(g).shape) != target:
        g = ad.emit("reshape", (g,), shape=target)
    return g


def _count(ad: _Emitter, shape, axes) -> str:
    """fp32 scalar: the number of elements over `axes` of `shape`."""
    n = _fold(lambda a, b: a * b, [as_dim(shape[k]) for k in axes], Lit(1))
    return ad.emit("dimval", (), n=n, dtype=F32)


def _kept(ad: _Emitter, g: str, xshape, axes, keepdims) -> str:
    """A reduction's adjoint in the keepdims shape (size 1 on the reduced axes)."""
    if keepdims:
        return g
    shape = tuple(Lit(1) if k in axes else d for k, d in enumerate(xshape))
    return ad.emit("reshape", (g,), shape=shape)


# -- the rules: rule(ad, node, g, p) -> {input index: adjoint value}; p(name) is the primal value (renamed) ------

def _none(ad, n, g, p):
    return {}


def _binary_rule(fn):
    def rule(ad, n, g, p):
        a, b = (ad.f32(p(i)) for i in n.inputs)
        out = fn(ad, g, a, b, p(n.result.name))
        return {k: _unbroadcast(ad, v, ad.type(p(n.inputs[k])).shape) for k, v in out.items() if v is not None}
    return rule


def _add(ad, g, a, b, y):
    return {0: g, 1: g}


def _sub(ad, g, a, b, y):
    return {0: g, 1: ad.emit("neg", (g,))}


def _mul(ad, g, a, b, y):
    return {0: ad.emit("mul", (g, b)), 1: ad.emit("mul", (g, a))}


def _div(ad, g, a, b, y):
    ga = ad.emit("div", (g, b))
    return {0: ga, 1: ad.emit("neg", (ad.emit("mul", (ga, ad.f32(y))),))}


def _pick(win):
    """maximum/minimum: the first operand takes the adjoint where `win(a, b)` holds (a > b for maximum, a < b for
    minimum), the second where `win(b, a)`, and each takes half of it at a tie a == b (PyTorch's rule for
    torch.maximum / torch.minimum, derivatives.yaml; docs/design.md "Backward from forward": it keeps
    max(x, 0) + min(x, 0) = x and softplus's max(x, 0) + log1p(exp(-|x|)) exact at x = 0)."""
    def fn(ad, g, a, b, y):
        z = ad.const(0.0)
        half = ad.emit("mul", (g, ad.const(0.5)))
        wa, wb = ad.emit(win, (a, b)), ad.emit(win, (b, a))
        # the loser's adjoint is a masked zero (select(other wins, 0, ...)): it stays 0 through an infinite factor
        return {0: ad.emit("select", (wb, z, ad.emit("select", (wa, g, half)))),
                1: ad.emit("select", (wa, z, ad.emit("select", (wb, g, half))))}
    return fn


def _unary(fn):
    def rule(ad, n, g, p):
        return {0: fn(ad, g, ad.f32(p(n.inputs[0])), ad.f32(p(n.result.name)))}
    return rule


def _neg(ad, g, x, y):
    return ad.emit("neg", (g,))


def _exp(ad, g, x, y):
    return ad.emit("mul", (g, y))


def _log(ad, g, x, y):
    return ad.emit("div", (g, x))


def _sqrt(ad, g, x, y):           # d sqrt(x) = 1 / (2 sqrt(x))
    return ad.emit("div", (ad.emit("mul", (g, ad.const(0.5))), y))


def _rsqrt(ad, g, x, y):          # d x^-1/2 = -1/2 x^-3/2 = -1/2 y^3
    y3 = ad.emit("mul", (ad.emit("mul", (y, y)), y))
    return ad.emit("mul", (g, ad.emit("mul", (y3, ad.const(-0.5)))))


def _recip(ad, g, x, y):          # d 1/x = -1/x^2 = -y^2
    return ad.emit("neg", (ad.emit("mul", (g, ad.emit("mul", (y, y)))),))


def _abs(ad, g, x, y):            # sign(x) * g, 0 at x == 0 (PyTorch's convention)
    z = ad.const(0.0)
    neg = ad.emit("select", (ad.emit("lt", (x, z)), ad.emit("neg", (g,)), z))
    return ad.emit("select", (ad.emit("gt", (x, z)), g, neg))


def _tanh(ad, g, x, y):           # 1 - tanh^2
    return ad.emit("mul", (g, ad.emit("sub", (ad.const(1.0), ad.emit("mul", (y, y))))))


def _erf(ad, g, x, y):            # 2 / sqrt(pi) exp(-x^2)
    e = ad.emit("exp", (ad.emit("neg", (ad.emit("mul", (x, x)),)),))
    return ad.emit("mul", (g, ad.emit("mul", (e, ad.const(1.1283791670955126)))))


def _select(ad, n, g, p):
    c = p(n.inputs[0])
    z = ad.const(0.0)
    out = {1: ad.emit("select", (c, g, z)), 2: ad.emit("select", (c, z, g))}
    return {k: _unbroadcast(ad, v, ad.type(p(n.inputs[k])).shape) for k, v in out.items()}


def _cast(ad, n, g, p):
    src = ad.type(p(n.inputs[0])).dtype
    if _is_float(src) and _is_float(n.attr("to")):
        return {0: g}
    return {}


def _broadcast(ad, n, g, p):
    return {0: _unbroadcast(ad, g, ad.type(p(n.inputs[0])).shape)}


def _reduce(ad, n, g, p):
    x = ad.f32(p(n.inputs[0]))
    xshape = tuple(ad.type(x).shape)
    axes = _axes_of(xshape, n.attr("axes"))
    gk = _kept(ad, g, xshape, axes, n.attr("keepdims"))
    kind = n.attr("kind")
    if kind == "mean":
        gk = ad.emit("div", (gk, _count(ad, xshape, axes)))
    if kind in ("sum", "mean"):   # left in the keepdims shape: it broadcasts where it is added or used (an
        return {0: gk}              # explicit broadcast is made only when nothing else gives the full shape)
    # max / min: the adjoint is shared evenly among the elements equal to the maximum (minimum)
    y = _kept(ad, ad.f32(p(n.result.name)), xshape, axes, n.attr("keepdims"))
    m = ad.emit("cast", (ad.emit("eq", (x, y)),), to=F32, round="none")
    cnt = ad.emit("reduce", (m,), kind="sum", axes=tuple(n.attr("axes")), keepdims=True)
    return {0: ad.emit("mul", (m, ad.emit("div", (gk, cnt))))}


def _reshape(ad, n, g, p):
    return {0: ad.emit("reshape", (g,), shape=tuple(ad.type(p(n.inputs[0])).shape))}


def _permute(ad, n, g, p):
    perm = list(n.attr("perm"))
    inv = [perm.index(k) for k in range(len(perm))]
    return {0: ad.emit("permute", (g,), perm=tuple(inv))}


def _concat(ad, n, g, p):
    axis = n.attr("axis")
    out, start = {}, Lit(0)
    for k, i in enumerate(n.inputs):
        shape = ad.type(p(i)).shape
        size = as_dim(shape[_axes_of(shape, [axis])[0]])
        out[k] = ad.emit("slice", (g,), axis=axis, start=start, stop=start + size, step=1)
        start = start + size
    return out


def _repeat_interleave(ad, n, g, p):
    """The adjoint of x repeated r times along an axis to `size` elements: element i of x gathers the adjoint of its
    r copies i*r .. i*r + r - 1 (fewer in a last partial group): g padded with zeros to D * r elements along the axis
    (concat), reshaped to [..., D, r, ...] and summed over the r axis. x needs a fixed rank."""
    shape = tuple(ad.type(p(n.inputs[0])).shape)
    if any(isinstance(d, Variadic) for d in shape):
        raise IRError("the adjoint of repeat_interleave needs a fixed rank (reshape the value first)")
    ax = _axes_of(shape, [n.attr("axis")])[0]
    r, d = n.attr("repeats"), as_dim(shape[ax])
    full = d * Lit(r)
    size = as_dim(n.attr("size"))
    if full != size:   # the copies a last partial group lacks: zeros
        gap = list(ad.type(g).shape)
        gap[ax] = full - size
        g = ad.emit("concat", (g, ad.zeros(gap)), axis=ax)
    grouped = shape[:ax] + (d, Lit(r)) + shape[ax + 1:]
    return {0: ad.emit("reduce", (ad.emit("reshape", (g,), shape=grouped),), kind="sum", axes=(ax + 1,),
                       keepdims=False)}


class _SlicePiece:
    """The adjoint of one slice of a value: `g` holds elements start..stop (step) of `axis`."""

    def __init__(self, axis, start, stop, step, g):
        self.axis, self.start, self.stop, self.step, self.g = axis, as_dim(start), as_dim(stop), step, g


def _slice(ad, n, g, p):
    return {0: _SlicePiece(n.attr("axis"), n.attr("start"), n.attr("stop"), n.attr("step"), g)}


def _place_slices(ad: _Emitter, pieces: list, xshape) -> list:
    """Adjoints of slices placed back into the sliced value's shape: pieces of one axis that tile it in order are
    joined by one concat (zeros in the gaps); any others are padded with zeros (step 1) or scattered (strided)."""
    out = []
    by_axis: dict = {}
    for pc in pieces:
        by_axis.setdefault(pc.axis, []).append(pc)
    for axis, group in by_axis.items():
        ax = _axes_of(xshape, [axis])[0]
        extent = as_dim(xshape[ax])
        plain = [pc for pc in group if pc.step == 1]
        for pc in group:
            if pc.step != 1:
                out.append(_scatter_strided(ad, pc, xshape, ax))
        chain = _order(plain)
        runs = [chain] if chain is not None else [[pc] for pc in plain]
        for run in runs:
            parts, at = [], Lit(0)
            for pc in run:
                if pc.start != at:
                    parts.append(_zeros_like_axis(ad, xshape, ax, pc.start - at))
                parts.append(pc.g)
                at = pc.stop
            if at != extent:
                parts.append(_zeros_like_axis(ad, xshape, ax, extent - at))
            out.append(parts[0] if len(parts) == 1 else ad.emit("concat", tuple(parts), axis=axis))
    return out


def _order(pieces):
    """The pieces in axis order when they follow each other (each starts where another stops, once), else None."""
    if not pieces:
        return []
    stops = {pc.stop for pc in pieces}
    firsts = [pc for pc in pieces if pc.start not in stops]
    if len(firsts) != 1:
        return None
    run, left = [firsts[0]], [pc for pc in pieces if pc is not firsts[0]]
    while left:
        nxt = [pc for pc in left if pc.start == run[-1].stop]
        if len(nxt) != 1:
            return None
        run.append(nxt[0])
        left.remove(nxt[0])
    return run


def _zeros_like_axis(ad, xshape, ax, size):
    shape = list(xshape)
    shape[ax] = size
    return ad.zeros(shape)


def _scatter_strided(ad, pc, xshape, ax):
    """A strided slice's adjoint scattered back: index start + step * i along the axis."""
    if any(isinstance(d, Variadic) for d in xshape):
        raise IRError("the adjoint of a strided slice needs a fixed rank (reshape the value first)")
    gshape = ad.type(pc.g).shape
    n = as_dim(gshape[ax])
    idx = ad.emit("iota", (), n=n, dtype=DType.i64)
    idx = ad.emit("add", (ad.emit("mul", (idx, ad.emit("const", (), value=pc.step, dtype=DType.i64))),
                          ad.emit("dimval", (), n=pc.start, dtype=DType.i64)))
    idx = ad.emit("broadcast", (idx,), shape=tuple(gshape[:ax + 1]))
    return ad.emit("scatter_add", (idx, pc.g), axis=ax, batch_dims=ax, size=as_dim(xshape[ax]))


def _gather(ad, n, g, p):
    x = p(n.inputs[0])
    ax = n.attr("axis")
    return {0: ad.emit("scatter_add", (p(n.inputs[1]), g), axis=ax, batch_dims=n.attr("batch_dims"),
                       size=as_dim(ad.type(x).shape[ax]))}


def _scatter_add(ad, n, g, p):
    return {1: ad.emit("gather", (g, p(n.inputs[0])), axis=n.attr("axis"), batch_dims=n.attr("batch_dims"))}


def _matmul(ad, n, g, p):
    a, b = (ad.f32(p(i)) for i in n.inputs)
    ta, tb = n.attr("transpose_a"), n.attr("transpose_b")
    # C = op(A) op(B): dA = g op(B)^T (transposed back when ta), dB = op(A)^T g (transposed back when tb)
    da = (ad.emit("matmul", (b, g), transpose_a=tb, transpose_b=True) if ta else
          ad.emit("matmul", (g, b), transpose_a=False, transpose_b=not tb))
    db = (ad.emit("matmul", (g, a), transpose_a=True, transpose_b=ta) if tb else
          ad.emit("matmul", (a, g), transpose_a=not ta, transpose_b=False))
    # a broadcast batch dim (a 2-D weight against [*B, M, K]) sums its adjoint over the batch
    return {k: _unbroadcast(ad, v, ad.type(p(n.inputs[k])).shape) for k, v in ((0, da), (1, db))}


RULES = {
    "neg": _unary(_neg), "exp": _unary(_exp), "log": _unary(_log), "sqrt": _unary(_sqrt),
    "rsqrt": _unary(_rsqrt), "recip": _unary(_recip), "abs": _unary(_abs),
    # (sigmoid is no op: the builder composes it from exp, add and recip, whose rules differentiate it)
    "tanh": _unary(_tanh), "erf": _unary(_erf),
    "add": _binary_rule(_add), "sub": _binary_rule(_sub), "mul": _binary_rule(_mul), "div": _binary_rule(_div),
    "maximum": _binary_rule(_pick("gt")), "minimum": _binary_rule(_pick("lt")),
    "select": _select, "cast": _cast, "broadcast": _broadcast, "reduce": _reduce,
    "reshape": _reshape, "permute": _permute, "concat": _concat, "slice": _slice,
    "repeat_interleave": _repeat_interleave,
    "gather": _gather, "scatter_add": _scatter_add, "matmul": _matmul,
    # no gradient: boolean results, integer sources, leaves
    "lt": _none, "le": _none, "gt": _none, "ge": _none, "eq": _none, "ne": _none,
    "not": _none, "and": _none, "or": _none, "const": _none, "iota": _none, "dimval": _none,
}
"""op name -> rule(ad, node, g, primal) -> {input index: adjoint}. The adjoint `g` has the node's result shape
in fp32; a returned adjoint has its input's shape, a shape that broadcasts to it (a reduction's, summed with the
others by broadcasting adds) or is a _SlicePiece."""


# -- normalisations by a row's exp-sum: softmax and log-softmax as one rule each --------------------------------

class _Norm:
    """A softmax y = e / S or a log-softmax lp = d - log(S) recognised in the forward graph: e = exp(d), s = the sum
    of e over `axes` (keepdims), S = s or a broadcast of it (the log may also come before the broadcast). `inner`:
    the values between d and the result (e, s, the broadcast and the log), which the rule differentiates through."""

    __slots__ = ("kind", "result", "d", "axes", "inner")

    def __init__(self, kind, result, d, axes, inner):
        self.kind, self.result, self.d, self.axes, self.inner = kind, result, d, axes, inner


def _exp_sum(prod, v):
    """(d, e, s, axes, values passed) when value v is s or broadcast(s) to e's own shape, with s = reduce(sum, axes,
    keepdims) of e = exp(d); else None (a broadcast to another shape, e.g. a larger rank, is no normalisation of e:
    the ordinary rules take it)."""
    passed = [v]
    n = prod.get(v)
    target = None
    if n is not None and n.op == "broadcast":
        target = tuple(n.result.type.shape)
        v = n.inputs[0]
        passed.append(v)
        n = prod.get(v)
    if n is None or n.op != "reduce" or n.attr("kind") != "sum" or not n.attr("keepdims"):
        return None
    e = n.inputs[0]
    en = prod.get(e)
    if en is None or en.op != "exp":
        return None
    shape = en.result.type.shape
    if target is not None and target != tuple(shape):
        return None
    return en.inputs[0], e, v, tuple(_axes_of(shape, n.attr("axes"))), passed + [e]


def _norms(g: Graph) -> dict:
    """{result value: _Norm} for every softmax (div(e, S)) and log-softmax (sub(d, log S) or sub(d, broadcast(log
    s))) of g whose exp-sum runs over the same d (docs/design.md "Backward from forward": normalisations)."""
    prod, vals = g.producers(), g.values()
    out = {}
    for n in g.nodes:
        shape = tuple(n.result.type.shape)
        if n.op == "div":
            hit = _exp_sum(prod, n.inputs[1])
            if hit and hit[1] == n.inputs[0] and shape == tuple(vals[hit[1]].type.shape):
                out[n.result.name] = _Norm("softmax", n.result.name, hit[0], hit[3], tuple(hit[4]))
        elif n.op == "sub":
            if shape != tuple(vals[n.inputs[0]].type.shape):
                continue   # the normalised value d must keep its shape (a log-sum broadcast wider is no log-softmax)
            v, passed = n.inputs[1], []
            m = prod.get(v)
            if m is not None and m.op == "broadcast":
                if tuple(m.result.type.shape) != shape:
                    continue
                passed.append(v)
                v = m.inputs[0]
                m = prod.get(v)
            if m is None or m.op != "log":
                continue
            passed.append(v)
            hit = _exp_sum(prod, m.inputs[0])
            if hit and hit[0] == n.inputs[0]:
                out[n.result.name] = _Norm("log_softmax", n.result.name, hit[0], hit[3], tuple(passed + hit[4]))
    return out


def _norm_rule(ad: _Emitter, nm: _Norm, g: str, p) -> str:
    """The adjoint a normalisation gives its d: softmax y (g - sum(g y)), log-softmax g - exp(lp) sum(g), each
    sum over the normalised axes (keepdims), with the primal y / lp (a saved output when the caller saved it)."""
    axes = tuple(a - len(ad.type(g).shape) for a in nm.axes)
    y = ad.f32(p(nm.result))
    if nm.kind == "softmax":
        t = ad.emit("reduce", (ad.emit("mul", (g, y)),), kind="sum", axes=axes, keepdims=True)
        return ad.emit("mul", (y, ad.emit("sub", (g, t))))
    t = ad.emit("reduce", (g,), kind="sum", axes=axes, keepdims=True)
    return ad.emit("sub", (g, ad.emit("mul", (ad.emit("exp", (y,)), t))))


class _Composite:
    """A function recognised in the forward graph and differentiated as a whole, not through its decomposition
    (docs/design.md "Backward from forward": function-level rules), whose node-by-node derivative is 0 * inf, 0 / 0
    or inf / inf on ordinary inputs:

    * "sigmoid": y = a / (1 + exp(w)) or y = 1 / (1 + exp(w)) (`a` None; the builder's sigmoid, silu, gelu tanh
      form): dy/da = 1 / (1 + exp(w)), dy/dw = -y / (1 + exp(-w)) -- each factor in [0, 1], finite for every
      float w (exp overflow gives 0 or 1, never inf / inf);
    * "log1p": the builder's compensated log1p(x) = where(v == 0, x, log(u) * x / v), u = 1 + x, v = u - 1:
      d/dx = 1 / (1 + x) (1 / u), where the decomposition divides 0 / 0 in the unselected branch and cancels in
      the other.

    `leaves`: the values the rule gives adjoints to; `den`: the 1 + exp(w) (sigmoid) or u (log1p) value."""

    __slots__ = ("kind", "result", "leaves", "den")

    def __init__(self, kind, result, leaves, den):
        self.kind, self.result, self.leaves, self.den = kind, result, leaves, den


def _const_value(prod, v):
    """The value of a scalar constant `v` (through broadcasts and float casts), else None."""
    n = prod.get(v)
    while n is not None and n.op in ("broadcast", "cast"):
        n = prod.get(n.inputs[0])
    if n is None or n.op != "const":
        return None
    return float(n.attr("value"))


def _other(prod, n, value):
    """The operand of binary node n that is not the scalar constant `value` (the other one is), else None."""
    a, b = n.inputs
    if _const_value(prod, a) == value:
        return b
    if _const_value(prod, b) == value:
        return a
    return None


def _composites(g: Graph) -> dict:
    """{result value: _Composite} for every sigmoid-form division and compensated log1p of g (_Composite)."""
    prod = g.producers()
    out = {}
    for n in g.nodes:
        r = n.result.name
        if n.op in ("recip", "div"):
            den = n.inputs[-1]
            dn = prod.get(den)
            if dn is None or dn.op != "add":
                continue
            e = _other(prod, dn, 1.0)
            en = prod.get(e) if e is not None else None
            if en is None or en.op != "exp":
                continue
            leaves = (en.inputs[0],) if n.op == "recip" else (en.inputs[0], n.inputs[0])
            out[r] = _Composite("sigmoid", r, leaves, den)
        elif n.op == "select":
            c, x, q = n.inputs
            cn, qn = prod.get(c), prod.get(q)
            if cn is None or cn.op != "eq" or qn is None or qn.op != "div":
                continue
            v = cn.inputs[0] if _const_value(prod, cn.inputs[1]) == 0.0 else None
            vn = prod.get(v) if v is not None else None
            if vn is None or vn.op != "sub" or _const_value(prod, vn.inputs[1]) != 1.0 or qn.inputs[1] != v:
                continue
            u = vn.inputs[0]
            un, mn = prod.get(u), prod.get(qn.inputs[0])
            if un is None or un.op != "add" or _other(prod, un, 1.0) != x or mn is None or mn.op != "mul":
                continue
            lg = [i for i in mn.inputs if i != x]
            if set(mn.inputs) != {x, lg[0] if lg else x} or not lg:
                continue
            ln = prod.get(lg[0])
            if ln is None or ln.op != "log" or ln.inputs[0] != u:
                continue
            out[r] = _Composite("log1p", r, (x,), u)
    return out


def _composite_rule(ad: _Emitter, cp: _Composite, g: str, p) -> dict:
    """{leaf value: adjoint} of a _Composite (its docstring has the formulas), each summed to the leaf's shape."""
    den = ad.f32(p(cp.den))
    out = {}
    if cp.kind == "log1p":
        out[cp.leaves[0]] = ad.emit("div", (g, den))
        return out
    w = ad.f32(p(cp.leaves[0]))
    y = ad.f32(p(cp.result))
    one = ad.const(1.0)
    t = ad.emit("recip", (ad.emit("add", (one, ad.emit("exp", (ad.emit("neg", (w,)),)))),))   # 1 / (1 + exp(-w))
    out[cp.leaves[0]] = ad.emit("neg", (ad.emit("mul", (ad.emit("mul", (g, y)), t)),))
    if len(cp.leaves) == 2:
        out[cp.leaves[1]] = ad.emit("div", (g, den))
    return {k: _unbroadcast(ad, v, ad.type(p(k)).shape) for k, v in out.items()}


def _shift_free(g: Graph, norms: dict, seeded: set, live: set) -> set:
    """The values d = x - m (or x + m) whose shift m carries no adjoint: m is constant along the normalised axes
    and d is read only by normalisations over those axes (each row of their adjoint of d sums to zero, so m's,
    minus that row sum, is zero in exact arithmetic; a row max taken before a softmax costs no gradient). Only
    readers in `live` (on a path to a differentiated output) count: an output no gradient is asked of, such as a
    saved softmax sum, passes no adjoint back."""
    users: dict = {}
    for n in g.nodes:
        if n.result.name not in live:
            continue
        for i in n.inputs:
            users.setdefault(i, set()).add(n.result.name)
    prod, vals = g.producers(), g.values()
    by_d: dict = {}
    for nm in norms.values():
        by_d.setdefault(nm.d, []).append(nm)
    out = set()
    for d, group in by_d.items():
        n = prod.get(d)
        if n is None or n.op not in ("sub", "add") or len({nm.axes for nm in group}) != 1:
            continue
        shape = n.result.type.shape
        mshape = vals[n.inputs[1]].type.shape
        if len(mshape) != len(shape) or any(mshape[a] != Lit(1) for a in group[0].axes):
            continue
        inner = {v for nm in group for v in nm.inner}
        allowed = inner | {nm.result for nm in group}
        if d in seeded or inner & seeded:
            continue
        if all(users.get(v, set()) <= allowed for v in inner | {d}):
            out.add(d)
    return out


# -- saved outputs ---------------------------------------------------------------------------------------------

_VIEWS = ("reshape", "permute", "cast", "recip", "neg", "broadcast")


def saved_chain(g: Graph, out_value: str) -> list[Node]:
    """The invertible nodes (reshape, permute, float-to-float cast, recip, neg, and a broadcast, which one element
    of each broadcast axis undoes) from a forward output back to the value that defines it, outermost first: a saved
    output stands for every value of the chain (a saved rstd = recip(std) gives std as recip(rstd), not
    sqrt(var + eps) again; FlashAttention's softmax_max, the row max broadcast to 8 lanes, gives the row max)."""
    prod = g.producers()
    types = g.values()
    chain, v = [], out_value
    while v in prod and prod[v].op in _VIEWS:
        n = prod[v]
        if n.op == "cast":
            t = types[n.inputs[0]].type
            if not (_is_float(t.dtype) and _is_float(n.attr("to"))):
                break
        if n.op == "broadcast" and any(isinstance(d, Variadic) for d in n.result.type.shape):
            break
        chain.append(n)
        v = n.inputs[0]
    return chain


def _unbroadcast_view(ad: _Emitter, v: str, src) -> str:
    """The value of shape `src` that broadcasts to `v` (opgen.ir.ops broadcast_shapes: aligned on the right): the
    first element of every axis the broadcast added or widened from 1, then a reshape to `src`."""
    shape = tuple(ad.type(v).shape)
    lead = len(shape) - len(src)
    for ax, d in enumerate(shape):
        s = src[ax - lead] if ax >= lead else Lit(1)
        if as_dim(d) != as_dim(s) and as_dim(s) == Lit(1):
            v = ad.emit("slice", (v,), axis=ax, start=Lit(0), stop=Lit(1), step=1)
    if tuple(ad.type(v).shape) != tuple(src):
        v = ad.emit("reshape", (v,), shape=tuple(src))
    return v


def _replacements(ad: _Emitter, chain: list[Node], saved: str, types: dict, outv: str) -> dict:
    """{forward value: its value from the saved input} for the output and every value of `chain`, each brought
    back through the inverse of the nodes above it."""
    v = ad.f32(saved) if chain and chain[0].op in ("recip", "neg") else saved
    out = {outv: saved}
    for n in chain:
        src = types[n.inputs[0]]
        if n.op == "reshape":
            v = ad.emit("reshape", (v,), shape=tuple(src.shape))
        elif n.op == "permute":
            perm = list(n.attr("perm"))
            v = ad.emit("permute", (v,), perm=tuple(perm.index(k) for k in range(len(perm))))
        elif n.op in ("recip", "neg"):
            v = ad.emit(n.op, (ad.f32(v),))
        elif n.op == "broadcast":
            v = _unbroadcast_view(ad, v, tuple(src.shape))
        else:
            have = ad.type(v).dtype
            if have != src.dtype:
                narrowing = src.dtype in (DType.f16, DType.bf16) or isinstance(src.dtype, DTypeVar)
                v = ad.emit("cast", (v,), to=src.dtype, round="rint" if narrowing and have == F32 else "none")
        out[n.inputs[0]] = v
    return out


# -- the transformation ----------------------------------------------------------------------------------------

def differentiate(g: Graph, wrt: dict, grads: dict, saved: dict | None = None) -> Graph:
    """The gradient graph of forward graph `g` (one specialisation); see the module docstring.

    wrt: {forward input name: gradient output name}; grads: {forward output name: incoming-gradient Value};
    saved: {forward output name: saved-input Value}. The result's params are g's params followed by the grads'
    and saved values (params no node reads are kept; the caller decides), its outputs the gradients in fp32
    ({gradient name: value}, in `wrt` order). Raises NoDerivative for an op on the path without a rule, IRError
    for an unknown name.
    """
    saved = saved or {}
    outs = dict(g.outputs)
    pnames = {p.value.name for p in g.params}
    for n in list(wrt) :
        if n not in pnames:
            raise IRError(f"wrt: {n!r} is not an input of {g.name}")
    for n in list(grads) + list(saved):
        if n not in outs:
            raise IRError(f"{n!r} is not an output of {g.name}")
    extra = [Param(v, "input") for v in list(grads.values()) + list(saved.values())]
    params = tuple(g.params) + tuple(extra)
    types = {p.value.name: p.value.type for p in params}
    fwd_types = {p.value.name: p.value.type for p in g.params}
    for n in g.nodes:
        fwd_types[n.result.name] = n.result.type
    ad = _Emitter(types)

    # primal copy, with each saved output's defining value replaced by the saved input
    replace = {}
    for out, sv in saved.items():
        ad.loc = ""
        for v, r in _replacements(ad, saved_chain(g, outs[out]), sv.name, fwd_types, outs[out]).items():
            if v not in pnames and (ad.type(r) == fwd_types[v] or v == outs[out]):   # (an output's dtype may
                replace[v] = r                                                         # differ: dtypes=)
    ren = {p.value.name: p.value.name for p in g.params}
    for n in g.nodes:
        name = n.result.name
        ren[name] = replace[name] if name in replace else ad.copy(n, [ren[i] for i in n.inputs])

    def primal(v):
        return ren[v]

    # the nodes on a path from a differentiated input to a differentiated output
    reach = set(wrt)
    for n in g.nodes:
        if any(i in reach for i in n.inputs):
            reach.add(n.result.name)
    live = {outs[o] for o in grads}
    for n in reversed(g.nodes):
        if n.result.name in live:
            live.update(n.inputs)
    active = reach & live

    adj: dict[str, list] = {}
    for out, gv in grads.items():
        ad.loc = ""
        adj.setdefault(outs[out], []).append(ad.f32(gv.name))

    def total(v, shape, exact=True):
        parts = adj.get(v, [])
        pieces = [x for x in parts if isinstance(x, _SlicePiece)]
        vals = [x for x in parts if not isinstance(x, _SlicePiece)]
        if pieces:
            vals += _place_slices(ad, pieces, shape)
        if not vals:
            return None
        uniq = list(dict.fromkeys(vals))    # a value used twice by one node (x * x) adds its adjoint twice: 2 * g
        vals = [u if vals.count(u) == 1 else ad.emit("mul", (u, ad.const(vals.count(u)))) for u in uniq]
        shape = tuple(shape)
        vals.sort(key=lambda u: tuple(ad.type(u).shape) != shape)   # full-shaped first: the adds broadcast the rest
        out = _fold(lambda a, b: ad.emit("add", (a, b)), vals)
        if exact and tuple(ad.type(out).shape) != shape:
            out = ad.emit("broadcast", (out,), shape=shape)
        return out

    norms = _norms(g)
    comps = _composites(g)
    shift_free = _shift_free(g, norms, {outs[o] for o in grads}, live)
    for n in reversed(g.nodes):
        r = n.result.name
        if r not in active or r not in adj:
            continue
        ad.loc = n.loc
        nm = norms.get(r)
        if nm is not None:   # a softmax / log-softmax: one rule straight to its d (_norm_rule)
            if nm.d in active:
                adj.setdefault(nm.d, []).append(_norm_rule(ad, nm, total(r, fwd_types[r].shape), primal))
            continue
        cp = comps.get(r)
        if cp is not None:   # a sigmoid-form division or a log1p: one rule for the whole function (_Composite)
            for leaf, contrib in _composite_rule(ad, cp, total(r, fwd_types[r].shape), primal).items():
                if leaf in active and _is_float(fwd_types[leaf].dtype):
                    adj.setdefault(leaf, []).append(contrib)
            continue
        gsum = total(r, fwd_types[r].shape, exact=not _takes_lazy(n, fwd_types))
        rule = RULES.get(n.op)
        if rule is None:
            raise NoDerivative(n, f"{n.op} has no derivative rule (opgen.ir.autodiff.RULES)")
        for k, contrib in rule(ad, n, gsum, primal).items():
            i = n.inputs[k]
            if k == 1 and r in shift_free:   # the shift of a normalised value: no adjoint (_shift_free)
                continue
            if i in active and _is_float(fwd_types[i].dtype):
                adj.setdefault(i, []).append(contrib)

    outputs = []
    for x, name in wrt.items():
        ad.loc = ""
        gx = total(x, fwd_types[x].shape)
        if gx is None:
            gx = ad.zeros(fwd_types[x].shape)
        outputs.append((name, gx))
    nodes = _dce(ad.nodes, {v for _, v in outputs})
    return Graph(g.name, params, tuple(nodes), tuple(outputs), g.constraints)


_ELEMENTWISE = {"neg", "exp", "log", "sqrt", "rsqrt", "recip", "abs", "tanh", "erf", "cast", "add", "sub",
                "mul", "div", "maximum", "minimum", "select"}


def _takes_lazy(n: Node, types: dict) -> bool:
    """Whether node n's rule may take its adjoint in a shape that only broadcasts to its result (a reduction's
    keepdims adjoint): an elementwise op whose operands all have the result's shape (no operand is summed over
    broadcast axes, where a lazily broadcast adjoint would be counted once instead of once per element)."""
    return n.op in _ELEMENTWISE and all(types[i].shape == n.result.type.shape for i in n.inputs)


def _dce(nodes, roots) -> list[Node]:
    """The nodes `roots` depend on, in order."""
    need = set(roots)
    keep = []
    for n in reversed(nodes):
        if n.result.name in need:
            keep.append(n)
            need.update(n.inputs)
    return keep[::-1]
