"""Graph rewrites the rows family runs before its analysis: a minimum as a negated maximum, and a reduction over
several trailing axes as one over a row.

`min_as_max(g)`: a `reduce` of kind min over the last axis (a row minimum, or one over every axis) becomes
-max(-x) over the same axes (negation is exact in IEEE arithmetic, so the values are the minimum's; the kernel runs
it with ReduceMax and, over every axis, the Max combine of partials across cores: two Muls by -1 more). A minimum
over leading axes stays one: its accumulator starts at +inf and takes Min, partials combined with Min in core
order (MinPartials). Only the sign of a zero or a NaN can differ from a direct
minimum, which the comparison of outputs does not see.

InstanceNorm reduces [N, C, H, W] over (H, W), LayerNorm over two normalised axes reduces [B, S, H] over (S, H).
The rows family reduces over one row axis, the innermost and contiguous one. When every reduction of a graph
that spans several axes spans the same run of trailing axes (the *group*, e.g. H, W) and keeps at least one
leading axis (a reduction of every element keeps its rows: per-core partials of any length), and every value of the
graph either carries that whole run at its end or has size 1 on all of it (a value with fewer axes than the run
is kept as it is, unless an elementwise op broadcasts it onto the run: shapes align on the right), the run is one
contiguous block of every tensor that carries it (tensors are row-major): the graph is rewritten with the run
merged into a single axis (extent H * W, or 1) in every shape, every reduction's axes and every reshape /
broadcast target. GM addressing is unchanged: a row of the merged axis is the same run of elements of the tensor.
When no reduction spans several trailing axes, the run of two or more trailing axes after the last reduced axis
is merged the same way if every reduction leaves that same run untouched (`_row_run`: RmsNorm over the channels of
[B, C, H, W] reduces axis 1 and leaves H, W, which become one row; the mean is then one over the rows of a batch).

`kept_first(g)`: a reduction over the last axis and leading axes that are not next to it (BatchNorm's statistics
of [N, C, L] over N and L) keeps some axes K; the graph is reordered so that K comes first (inputs read and outputs
written through permutes, GM views), making the reduction one over the row axis and the rows of each batch
(opgen.kernel.rows `batch_total`).

`merge_trailing(g)` returns the rewritten graph, or `g` itself when there is nothing to merge or the graph does
not keep the run together (a [W] weight, a permute, a slice ...): the rows analysis then refuses it with its own
message, to which the family adds `merge_blocker(g)` (which value kept the axes apart). Facts: row-major
addressing, docs/design.md "Kernel families" (the rows family's anchor domain).
"""

from __future__ import annotations

import dataclasses

from opgen.interp.kernels import ERF_CLIP, ERF_P, ERF_Q
from opgen.ir.core import Graph, Node, Param, TensorType, Value
from opgen.ir.dims import Lit, Prod, Variadic, as_dim

_SHAPE_OPS = {"reduce", "reshape", "broadcast", "cast", "const"}
"""Ops with shape-dependent attributes the rewrite understands (besides elementwise ops, which have none)."""
_AXIS_OPS = {"permute", "slice", "concat", "gather", "scatter_add", "matmul", "iota", "repeat_interleave"}
"""Ops whose attributes name axes or sizes the rewrite does not remap: a graph with one is left as it is."""


def _norm(axes, rank: int) -> tuple[int, ...]:
    return tuple(sorted(a % rank for a in axes))


def _reductions(g: Graph):
    """(operand shape, reduced axes as non-negative indices, those of them not of extent 1) of every reduce of g, in
    graph order (a variadic group is one shape entry; its axes are negative: opgen.ir.ops)."""
    vals = g.values()
    for n in g.nodes:
        if n.op == "reduce":
            shape = vals[n.inputs[0]].type.shape
            axes = _norm(n.attr("axes"), len(shape))
            yield shape, axes, [a for a in axes if isinstance(shape[a], Variadic) or as_dim(shape[a]) != Lit(1)]


def _group_of(g: Graph):
    """(m, extents) of the run of trailing axes every multi-axis reduction of g spans, None when there is none or
    two reductions span different runs. m: the run's length in dims; extents: its dims (each not 1)."""
    found = None
    for shape, axes, real in _reductions(g):
        rank = len(shape)
        if any(isinstance(shape[a], Variadic) for a in axes):
            return None
        if len(real) < 2:
            continue
        k = min(real)
        if any(isinstance(d, Variadic) for d in shape[k:]) or real != [
                i for i in range(k, rank) if as_dim(shape[i]) != Lit(1)]:
            return None   # not a trailing run (a reduction over the middle axes keeps its own refusal)
        if all(not isinstance(d, Variadic) and as_dim(d) == Lit(1) for d in shape[:k]):
            return None   # a reduction of every element keeps the rows (per-core partials of any size)
        run = tuple(as_dim(d) for d in shape[k:])
        if found is not None and found != run:
            return None
        found = run
    if found is None:
        return _row_run(g)
    return len(found), found


def _row_run(g: Graph):
    """(m, extents) of the run of two or more trailing axes after the last axis any reduction of g reduces, when
    every reduction (at least one) leaves the same run untouched (RmsNorm over the channels of [B, C, H, W]: H, W);
    None otherwise. Merged into one row axis, the reductions become ones over the rows of a batch."""
    found = None
    for shape, _axes, real in _reductions(g):
        if any(isinstance(d, Variadic) for d in shape):
            return None
        if not real:
            continue
        run = tuple(as_dim(d) for d in shape[max(real) + 1:])
        if len(run) < 2 or (found is not None and found != run):
            return None
        found = run
    return None if found is None else (len(found), found)


def _merge_shape(shape, m: int, run):
    """shape with its last m dims merged (None: shape does not keep the run together)."""
    shape = tuple(shape)
    if any(isinstance(d, Variadic) for d in shape[-m:]) if len(shape) >= m else False:
        return None
    if len(shape) < m:
        return shape   # broadcast against the run only if all 1 (merge_trailing checks its uses)
    tail = tuple(as_dim(d) for d in shape[-m:])
    if tail == run:
        prod = Lit(1)
        for d in run:
            prod = prod * d
        return shape[:-m] + (prod,)
    if all(d == Lit(1) for d in tail):
        return shape[:-m] + (Lit(1),)
    return None


def _namer(g: Graph, tag: str):
    """A function giving fresh value names `<base>_<tag><k>` that no value of g (nor an earlier call) has."""
    taken = set(g.values())

    def fresh(base: str) -> str:
        k = 0
        while f"{base}_{tag}{k}" in taken:
            k += 1
        taken.add(f"{base}_{tag}{k}")
        return f"{base}_{tag}{k}"

    return fresh


def min_as_max(g: Graph) -> Graph:
    """g with every `reduce` of kind min rewritten as neg(reduce max(neg(x))) (module docstring); the new values get
    fresh names (<result>_neg<k>), the node keeps its result name, type and spec line. g itself when it has none."""
    vals = g.values()

    def over_last(n) -> bool:   # a row or whole-tensor minimum (leading-axis ones accumulate with Min from +inf)
        if n.op != "reduce" or n.attr("kind") != "min":
            return False
        rank = len(vals[n.inputs[0]].type.shape)
        return (rank - 1) in {a % rank for a in n.attr("axes")}

    if not any(over_last(n) for n in g.nodes):
        return g
    fresh = _namer(g, "neg")

    nodes = []
    for n in g.nodes:
        if not over_last(n):
            nodes.append(n)
            continue
        x = vals[n.inputs[0]]
        a, m = fresh(n.result.name), fresh(n.result.name)
        attrs = dict(n.attrs, kind="max")
        nodes += [Node("neg", (x.name,), Value(a, x.type), (), n.loc),
                  Node("reduce", (a,), Value(m, n.result.type), tuple(sorted(attrs.items())), n.loc),
                  Node("neg", (m,), n.result, (), n.loc)]
    return Graph(g.name, g.params, tuple(nodes), g.outputs, g.constraints)


TANH_CLIP = 8.8
"""AscendC's Tanh on Atlas A2 / A3 clips x to [-8.8, 8.8] before exp(2x) (its INTRINSIC algorithm,
docs/reference/ascendc.md §1.9)."""


def _expand(g: Graph, op: str, tag: str, build) -> Graph:
    """g with every node of `op` replaced by vector steps: `build(x, const, step)` emits them through
    `const(value)` (an fp32-typed scalar of the node's dtype) and `step(op, a, b=None)` (a value of the node's type)
    and returns the last one as (op, a, b), which keeps the node's result name, type and spec line; the others get
    fresh names <result>_<tag><k> and the node's spec line. g itself when it has no `op` node."""
    if not any(n.op == op for n in g.nodes):
        return g
    fresh = _namer(g, tag)
    nodes = []
    for n in g.nodes:
        if n.op != op:
            nodes.append(n)
            continue
        ty, loc = n.result.type, n.loc
        scalar = TensorType(ty.dtype, ())

        def const(v, base=n.result.name):
            c = Value(fresh(base), scalar)
            nodes.append(Node("const", (), c, (("dtype", ty.dtype), ("value", float(v))), loc))
            return c.name

        def step(op_, a, b=None, base=n.result.name):
            v = Value(fresh(base), ty)
            nodes.append(Node(op_, (a,) if b is None else (a, b), v, (), loc))
            return v.name

        last, a, b = build(n.inputs[0], const, step)
        nodes.append(Node(last, (a, b), n.result, (), loc))
    return Graph(g.name, g.params, tuple(nodes), g.outputs, g.constraints)


def _tanh_steps(x, const, step):
    lo = step("maximum", step("minimum", x, const(TANH_CLIP)), const(-TANH_CLIP))
    t = step("exp", step("mul", lo, const(2.0)))
    return "div", step("add", t, const(-1.0)), step("add", t, const(1.0))


def tanh_as_exp(g: Graph) -> Graph:
    """g with every `tanh` written as AscendC's Tanh computes it on Atlas A2 / A3 (docs/reference/ascendc.md §1.9):
    c = max(min(x, 8.8), -8.8), t = exp(2 c), (t - 1) / (t + 1), in fp32 — vector instructions the rows family
    lowers (Mins, Maxs, Muls, Exp, Adds, Div), the same steps the interpreter's device mode takes. New values get
    fresh names (<result>_th<k>); the last node keeps the result's name, type and spec line."""
    return _expand(g, "tanh", "th", _tanh_steps)


def _erf_steps(x, const, step):
    c = step("maximum", step("minimum", x, const(ERF_CLIP)), const(-ERF_CLIP))
    s = step("mul", c, c)
    p = step("add", step("mul", s, const(ERF_P[5])), const(ERF_P[4]))
    for k in (3, 2, 1, 0):
        p = step("add", step("mul", s, p), const(ERF_P[k]))
    p = step("mul", c, p)
    q = step("add", s, const(ERF_Q[4]))
    for k in (3, 2, 1, 0):
        q = step("add", step("mul", s, q), const(ERF_Q[k]))
    return "div", p, q


def erf_as_rational(g: Graph) -> Graph:
    """g with every `erf` written as AscendC's Erf computes it on Atlas A2 / A3 (docs/reference/ascendc.md §1.9):
    c = max(min(x, 3.92), -3.92), s = c², P = c·(((((p5 s + p4) s + p3) s + p2) s + p1) s + p0),
    Q = ((((s + q4) s + q3) s + q2) s + q1) s + q0, erf = P / Q, each step in fp32 — vector instructions the rows
    family lowers (Mins, Maxs, Mul, Muls, Adds, Div), the same steps, in the same order, as the interpreter's device
    mode (opgen.interp.kernels._erf). New values get fresh names (<result>_ef<k>); the last node keeps the result's
    name, type and spec line."""
    return _expand(g, "erf", "ef", _erf_steps)


def math_as_steps(g: Graph) -> Graph:
    """g with the math functions AscendC computes by vector steps written as those steps: tanh (tanh_as_exp) and
    erf (erf_as_rational)."""
    return erf_as_rational(tanh_as_exp(g))


def _merged_lead(xs, rs) -> int | None:
    """How many leading entries of shape xs (k >= 2) a reshape to rs merges into its first dim, the rest kept
    (rs[0] is the product of their extents, a variadic group counting as its product); None otherwise."""
    if not rs or len(xs) < 2 or isinstance(rs[0], Variadic):
        return None
    for k in range(2, len(xs) + 1):
        ext = Lit(1)
        for d in xs[:k]:
            ext = ext * (Prod(d.name) if isinstance(d, Variadic) else as_dim(d))
        if ext == as_dim(rs[0]) and keys_of_shape(xs[k:]) == keys_of_shape(rs[1:]):
            return k
    return None


def split_merged_leading(g: Graph) -> Graph:
    """g with every reshape that merges leading axes of a value into one (`x.reshape([N * Prod("Bd"), H])` of an
    [N, *Bd, H] value: the same elements in the same order) and feeds only reductions over that merged axis
    rewritten to keep the axes apart ([N, Prod("Bd"), H]), each reduction then over all of them: the rows family
    takes the leading axes as its rows (opgen.kernel.rowlayout), and a sum, mean, max or min over their product is
    the one over the axes. A keepdims reduction is reshaped back to its own shape (size-1 dims only). g itself when
    there is no such reshape."""
    vals = g.values()
    users: dict = {}
    for n in g.nodes:
        for x in n.inputs:
            users.setdefault(x, []).append(n)
    outs = {v for _o, v in g.outputs}
    split = {}
    for n in g.nodes:
        if n.op != "reshape":
            continue
        xs, rs = vals[n.inputs[0]].type.shape, n.result.type.shape
        k = _merged_lead(xs, rs)
        us = users.get(n.result.name, [])
        if k is None or not us or n.result.name in outs or any(
                u.op != "reduce" or 0 not in _norm(u.attr("axes"), len(rs)) for u in us):
            continue
        split[n.result.name] = (k, tuple(Prod(d.name) if isinstance(d, Variadic) else d for d in xs[:k]) + tuple(rs[1:]))
    if not split:
        return g
    fresh = _namer(g, "kd")
    nodes = []
    for n in g.nodes:
        r = n.result.name
        if r in split:
            shape = split[r][1]
            nodes.append(Node("reshape", n.inputs, Value(r, TensorType(n.result.type.dtype, shape)),
                              tuple(sorted(dict(n.attrs, shape=shape).items())), n.loc))
        elif n.op == "reduce" and n.inputs[0] in split:
            k, shape = split[n.inputs[0]]
            axes = tuple(range(k)) + tuple(a + k - 1 for a in _norm(n.attr("axes"), len(shape) - k + 1) if a)
            attrs = tuple(sorted(dict(n.attrs, axes=axes).items()))
            if not n.attr("keepdims"):
                nodes.append(Node("reduce", n.inputs, n.result, attrs, n.loc))
                continue
            kept = tuple(Lit(1) if i in axes else d for i, d in enumerate(shape))
            t = fresh(r)
            nodes += [Node("reduce", n.inputs, Value(t, TensorType(n.result.type.dtype, kept)), attrs, n.loc),
                      Node("reshape", (t,), n.result, (("shape", tuple(n.result.type.shape)),), n.loc)]
        else:
            nodes.append(n)
    return Graph(g.name, g.params, tuple(nodes), g.outputs, g.constraints)


def prepare(g: Graph) -> Graph:
    """The graph the rows family analyses and lowers: math_as_steps, min_as_max, split_merged_leading, kept_first,
    merge_trailing, then regroup_segments."""
    return regroup_segments(merge_trailing(kept_first(split_merged_leading(min_as_max(math_as_steps(g))))))


def merge_trailing(g: Graph) -> Graph:
    """g with the trailing run of axes its reductions span merged into one axis (module docstring); g itself when
    nothing is merged. Never raises: a graph the rewrite does not hold is returned unchanged."""
    out, _why = _merge(g)
    return out


def merge_blocker(g: Graph) -> str:
    """Why the reductions of g over a run of trailing axes could not be merged into one row, in the spec's terms
    (the value carrying part of the run, or the op that names axes); "" when they were or there are none."""
    return _merge(g)[1]


def _merge(g: Graph) -> tuple[Graph, str]:
    grp = _group_of(g)
    if grp is None:
        return g, ""
    return _merge_run(g, *grp)


def _merge_run(g: Graph, m: int, run: tuple) -> tuple[Graph, str]:
    """g with the run of trailing axes `run` (m dims) merged into one axis in every shape, reduction, reshape and
    broadcast (module docstring), and "" ; or g itself and why the run cannot be merged."""
    names = ", ".join(str(d) for d in run)
    vals0 = g.values()

    def takes_run(n) -> bool:   # a reduction over a non-1 axis of the run
        shape = vals0[n.inputs[0]].type.shape
        return any(a >= len(shape) - m and as_dim(shape[a]) != Lit(1) for a in _norm(n.attr("axes"), len(shape)))

    reduced = any(n.op == "reduce" and takes_run(n) for n in g.nodes)
    what_axes = f"the reduced axes [{names}]" if reduced else f"the axes [{names}] after the reduced ones"
    odd = next((n for n in g.nodes if n.op in _AXIS_OPS), None)
    if odd is not None:
        return g, (f"{what_axes} are not merged into one row: the graph has a {odd.op} "
                   f"(%{odd.result.name})")

    inputs = {p.value.name for p in g.params}

    def part(v: Value) -> str:
        what = f"input {v.name}" if v.name in inputs else f"%{v.name}"
        return (f"{what_axes} are not merged into one row: {what} of shape "
                f"[{', '.join(str(d) for d in v.type.shape)}] carries part of them")

    def ty(v: Value):
        s = _merge_shape(v.type.shape, m, run)
        return None if s is None else Value(v.name, TensorType(v.type.dtype, s))

    params = []
    for p in g.params:
        v = ty(p.value)
        if v is None:
            return g, part(p.value)
        params.append(Param(v, p.kind))
    vals = g.values()
    nodes = []
    for n in g.nodes:
        r = ty(n.result)
        if r is None:
            return g, part(n.result)
        attrs = dict(n.attrs)
        short = next((x for x in n.inputs if len(vals[x].type.shape) < m and any(
            isinstance(d, Variadic) or as_dim(d) != Lit(1) for d in vals[x].type.shape)), None)
        if n.op not in ("reshape", "cast", "reduce") and len(n.result.type.shape) >= m and short is not None:
            return g, part(vals[short])   # a short operand broadcast onto the run's axes (aligned on the right)
        if n.op == "reduce":
            rank = len(vals[n.inputs[0]].type.shape)
            if rank < m:
                return g, part(vals[n.inputs[0]])
            axes = _norm(n.attr("axes"), rank)
            inner = [a for a in axes if a < rank - m]
            shape = vals[n.inputs[0]].type.shape
            big = [a for a in range(rank - m, rank) if as_dim(shape[a]) != Lit(1)]
            took = [a for a in big if a in axes]
            if took and took != big:
                return g, part(n.result)   # part of the run reduced, part kept
            # the merged axis is reduced when the run's axes are (a size-1 axis of the run reduced alone is a no-op:
            # it must not reduce the merged axis); a run of 1s reduced stays a reduction over an extent of 1
            new = inner + ([rank - m] if took or (not big and any(a >= rank - m for a in axes)) else [])
            if any(isinstance(d, Variadic) for d in shape):   # axes after a variadic group count from the end
                new = [a - (rank - m + 1) for a in new]
            attrs["axes"] = tuple(new)
        elif n.op in ("reshape", "broadcast"):
            s = _merge_shape(attrs["shape"], m, run)
            if s is None:
                return g, part(n.result)
            attrs["shape"] = tuple(s)
        elif n.op not in _SHAPE_OPS and any(isinstance(v, (list, tuple)) for v in attrs.values()):
            return g, f"{what_axes} are not merged into one row: %{n.result.name} ({n.op})"
        nodes.append(dataclasses.replace(n, result=r, attrs=tuple(sorted(attrs.items()))))
    return Graph(g.name, tuple(params), tuple(nodes), g.outputs, g.constraints), ""


# ------------------------------------------------------------------------------------------------ kept axes first
def _kept_perm(g: Graph):
    """(rank R, permutation, the reduced operand's dims, the reduced axes) putting first the axes kept by the
    reductions of g over the last axis and some leading ones (BatchNorm's mean of [N, C, L] over N and L keeps C:
    (1, 0, 2)); None when there is none, the kept axes are already leading, a shape has a variadic group, or two
    such reductions keep different axes."""
    vals = g.values()
    found = None
    for n in g.nodes:
        if n.op != "reduce":
            continue
        shape = vals[n.inputs[0]].type.shape
        if any(isinstance(d, Variadic) for d in shape):
            return None
        rank = len(shape)
        axes = set(_norm(n.attr("axes"), rank))
        if rank - 1 not in axes:
            continue   # a reduction over leading axes only: its rows keep their order
        kept = [i for i in range(rank) if i not in axes]
        if all(as_dim(shape[i]) == Lit(1) for i in kept) or all(as_dim(shape[i]) == Lit(1) for i in axes
                                                                  if i != rank - 1):
            continue   # one over every axis, or a row reduction (nothing but the last axis): any order
        perm = tuple(kept + sorted(axes))
        if found is not None and found[:2] != (rank, perm):
            return None   # two reductions keep different axes (the rows analysis names one)
        found = (rank, perm, tuple(as_dim(d) for d in shape), frozenset(axes))
    return None if found is None or found[1] == tuple(range(found[0])) else found


def kept_first(g: Graph) -> Graph:
    """g with its axes reordered so that the axes a reduction over the last axis and some leading axes keeps come
    first (docs/design.md "Kernel families", the rows family's per-batch totals): BatchNorm's statistics of
    [N, C, L] over N and L are computed on [C, N, L], where the C rows-of-a-batch are contiguous in row order and
    the reduction is one over the row axis and the rows of a batch. Every value of the largest rank R is permuted
    (an operator input through a `permute` right after it -- a GM view --, each output through the inverse permute
    before it -- a strided store); a lower-rank operand of a rank-R computation (a per-channel weight [C, 1]) is
    first reshaped to its right-aligned rank-R shape in the new order (only size-1 dims move); reductions' axes,
    reshape and broadcast targets follow. Only the order of the axes changes, so the values are the same. Returns g
    itself when there is no such reduction or the graph holds anything the rewrite does not remap (an op naming
    axes: permute, slice, concat, gather, matmul, iota; a reshape that would reorder axes); the rows analysis then
    refuses it with its own message. Two or more trailing axes the reduction reduces (BatchNorm2d's H, W of
    [N, C, H, W]) are first merged into one (`merge_trailing`'s rewrite for that run, when every value carries it
    whole or as 1s), so the rows are H * W long."""
    found = _kept_perm(g)
    if found is None or any(n.op in _AXIS_OPS for n in g.nodes):
        return g
    rank, perm, shape, reduced = found
    k = rank
    while k - 1 in reduced:
        k -= 1   # [k, rank): the trailing axes such a reduction reduces (BatchNorm2d's H, W of [N, C, H, W])
    if rank - k >= 2:
        merged, why = _merge_run(g, rank - k, shape[k:])
        again = None if why else _kept_perm(merged)
        if again is not None:   # one row of H * W: the same elements, longer rows
            g, (rank, perm, shape, reduced) = merged, again
    inv = {p: j for j, p in enumerate(perm)}
    fresh = _namer(g, "kf")
    vals = g.values()

    def moved(shape) -> tuple:
        return tuple(tuple(shape)[p] for p in perm)

    def padded(shape) -> tuple:
        return (Lit(1),) * (rank - len(shape)) + tuple(shape)

    def full(v: Value) -> bool:
        return len(v.type.shape) == rank

    nodes: list[Node] = []
    ren: dict[str, str] = {}
    for prm in g.params:
        v = prm.value
        if prm.kind == "input" and full(v):
            ren[v.name] = fresh(v.name)
            nodes.append(Node("permute", (v.name,), Value(ren[v.name], TensorType(v.type.dtype, moved(v.type.shape))),
                              (("perm", perm),), ""))
    lifted: dict[str, str] = {}
    for n in g.nodes:
        ins = []
        for x in n.inputs:
            ins.append(ren.get(x, x))
        attrs = dict(n.attrs)
        if full(n.result):
            if n.op not in _SHAPE_OPS and any(isinstance(a, (list, tuple)) for a in attrs.values()):
                return g   # an attribute naming axes the rewrite does not know
            if n.op != "reshape":   # operands of lower rank, broadcast right-aligned: reshaped to rank R first
                for k, x in enumerate(n.inputs):
                    xv = vals[x]
                    if full(xv) or not keys_of_shape(xv.type.shape):
                        continue
                    target = moved(padded(xv.type.shape))
                    if keys_of_shape(target) != keys_of_shape(xv.type.shape):
                        return g
                    if x not in lifted:
                        lifted[x] = fresh(x)
                        nodes.append(Node("reshape", (ren.get(x, x),), Value(lifted[x], TensorType(xv.type.dtype,
                                                                                                     target)),
                                          (("shape", target),), n.loc))
                    ins[k] = lifted[x]
            if n.op == "reduce":
                attrs["axes"] = tuple(sorted(inv[a] for a in _norm(n.attr("axes"), rank)))
            elif n.op in ("reshape", "broadcast"):
                attrs["shape"] = moved(attrs["shape"])
                src = vals[n.inputs[0]]
                have = moved(src.type.shape) if full(src) else tuple(src.type.shape)
                if n.op == "reshape" and keys_of_shape(attrs["shape"]) != keys_of_shape(have):
                    return g
            result = Value(n.result.name, TensorType(n.result.type.dtype, moved(n.result.type.shape)))
        else:
            result = n.result
            if any(full(vals[x]) for x in n.inputs):
                if n.op == "reduce":
                    axes = _norm(n.attr("axes"), rank)
                    attrs["axes"] = tuple(sorted(inv[a] for a in axes))
                elif n.op == "reshape":
                    if keys_of_shape(attrs["shape"]) != keys_of_shape(moved(vals[n.inputs[0]].type.shape)):
                        return g
                else:
                    return g
        nodes.append(dataclasses.replace(n, inputs=tuple(ins), result=result, attrs=tuple(sorted(attrs.items()))))
    back = tuple(inv[j] for j in range(rank))
    outputs = []
    done: dict[str, str] = {}
    for name, v in g.outputs:
        if full(vals[v]):
            if v not in done:
                done[v] = fresh(v)
                nodes.append(Node("permute", (ren.get(v, v),), Value(done[v], vals[v].type), (("perm", back),),
                                  g.producers()[v].loc if v in g.producers() else ""))
            outputs.append((name, done[v]))
        else:
            outputs.append((name, v))
    return Graph(g.name, g.params, tuple(nodes), tuple(outputs), g.constraints)


def keys_of_shape(shape) -> tuple:
    """The dims of `shape` that are not 1, in order (a variadic group kept as it is)."""
    return tuple(d if isinstance(d, Variadic) else as_dim(d) for d in shape
                 if isinstance(d, Variadic) or as_dim(d) != Lit(1))


# ------------------------------------------------------------------------------------------------ segments
SEGMENT_OP = "segment"
"""The rows family's own op (never in a spec's graph; made by `regroup_segments`): its one operand is a per-channel
value v of shape [..., C, 1]; its result, of the rows' shape [..., G, M], reads v[g * (C // G) + col // L] at row
coordinate g and column col (attributes `channels` C, `groups` G, `seglen` L). The row program applies it segment
by segment (opgen.kernel.rows: instruction `vseg`)."""
_EW = {"add", "sub", "mul", "div", "maximum", "minimum", "exp", "log", "sqrt", "rsqrt", "abs", "recip", "neg", "cast"}
"""Elementwise ops a regrouped value may flow through before it is stored (no attribute names an axis)."""


def _regroup_of(g: Graph, n: Node):
    """(prefix, (G, M), (C, tail)) when node n reshapes a value of shape [*prefix, G, M] to [*prefix, C, *tail] with
    C % G == 0 a relation of the spec and M == C // G * prod(tail) as dim polynomials (opgen.ir.dims keeps + - *
    canonical, C // G an atom: any order of the factors): a regrouping of the channels into G groups of C // G
    channels of L = prod(tail) elements (HxW, or H, W), the same elements in the same order; None otherwise."""
    if n.op != "reshape":
        return None
    src = tuple(g.values()[n.inputs[0]].type.shape)
    dst = tuple(n.result.type.shape)
    if len(src) < 2 or len(dst) < len(src) or any(isinstance(d, Variadic) for d in src + dst):
        return None
    k = len(src) - 2
    if tuple(as_dim(d) for d in src[:k]) != tuple(as_dim(d) for d in dst[:k]):
        return None
    gg, m = as_dim(src[-2]), as_dim(src[-1])
    c, tail = as_dim(dst[k]), tuple(as_dim(d) for d in dst[k + 1:])
    ln = Lit(1)
    for d in tail:
        ln = ln * d
    if (gg, m) == (c, ln) or Lit(1) in (gg, m, c, ln):
        return None
    if not any(k_.op == "==" and as_dim(k_.rhs) == Lit(0) and as_dim(k_.lhs) == c % gg for k_ in g.constraints):
        return None
    if m != c // gg * ln:   # canonical polynomials
        return None
    return src[:k], (gg, m), (c, tail)


def regroup_segments(g: Graph) -> Graph:
    """g with the per-channel affine of a group normalisation computed on the groups' rows (docs/design.md
    "Kernel families", the rows family's segments): when a computed value of shape [*P, G, M] is reshaped to
    [*P, C, L] (`_regroup_of`: C = G groups of C // G channels, M = C // G * L) and the reshaped value only flows
    through elementwise ops into outputs, those ops are rewritten on the rows' shape [*P, G, M] (the same elements
    in the same order), an operand of shape [..., C, 1] (a per-channel weight) becomes a `segment` of it
    (SEGMENT_OP; it must be an operator input seen through casts and reshapes), and each output is stored through a
    reshape back to [*P, C, L] (a view of the same memory). Returns g itself when there is no such reshape, a use of
    the regrouped values is anything else or a per-channel operand is computed (the rows analysis then refuses the
    graph naming the reshape, with `regroup_blocker`'s reason)."""
    return _regroup(g)[0]


def regroup_blocker(g: Graph) -> str:
    """Why `regroup_segments` left a regrouping of g as it is, in the spec's terms (the op or operand in the way,
    with its spec line); "" when it rewrote it or there is none."""
    return _regroup(g)[1]


_WHAT = {"reduce": "a reduction", "reshape": "a reshape", "permute": "a permute", "slice": "a slice",
         "concat": "a concat", "broadcast": "a broadcast", "select": "`b.where`", "gather": "a gather by index"}
"""The spec construct of an op that keeps a regrouping apart, named in regroup_blocker's reason."""


def _where(n) -> str:
    return f" at {n.loc.rsplit('/', 1)[-1]}" if n is not None and n.loc else ""


def _regroup(g: Graph) -> tuple[Graph, str]:
    vals = g.values()
    for r in g.nodes:
        grp = _regroup_of(g, r)
        if grp is not None:
            break
    else:
        return g, ""
    prefix, (gg, m), (c, tail) = grp
    ln = Lit(1)
    for d in tail:
        ln = ln * d
    fine = tuple(r.result.type.shape)
    coarse = tuple(vals[r.inputs[0]].type.shape)
    rank, k = len(fine), len(prefix)

    def operand_kind(v: Value) -> str | None:
        """"seg" for a per-channel operand [..., C, 1, ...], "plain" for one constant over (C, *tail), None
        otherwise (shapes align on the right, as elementwise ops broadcast)."""
        s = tuple(v.type.shape)
        if len(s) > rank:
            return None
        pad = (Lit(1),) * (rank - len(s)) + tuple(as_dim(d) if not isinstance(d, Variadic) else d for d in s)
        if any(isinstance(d, Variadic) for d in pad):
            return None
        if any(d != Lit(1) for d in pad[k + 1:]):
            return None
        if any(d != Lit(1) and d != as_dim(f) for d, f in zip(pad[:k], fine[:k])):
            return None
        if pad[k] == Lit(1):
            return "plain"
        return "seg" if pad[k] == c else None

    prod = g.producers()
    inputs = {p.value.name for p in g.params if p.kind == "input"}

    def from_input(v: str) -> bool:   # an operator input seen through casts and reshapes (read from GM per segment)
        while v not in inputs:
            n = prod.get(v)
            if n is None or n.op not in ("cast", "reshape") or len(n.inputs) != 1:
                return False
            v = n.inputs[0]
        return True

    grouped = f"[{', '.join(str(d) for d in fine)}]"
    per_channel = f"[{c}{', 1' * len(tail)}]"
    rule = (f"the rows family applies only elementwise ops with per-channel operator inputs {per_channel} to values "
            f"regrouped as {grouped} (the per-channel affine of a group normalisation) on their way to the outputs")
    moved = {r.result.name}
    for n in g.nodes:
        if n.result.name in moved or not any(x in moved for x in n.inputs):
            continue
        if n.op not in _EW or _dims(n.result.type.shape) != _dims(fine):
            what = _WHAT.get(n.op, f"op {n.op}")
            return g, f"{what} (%{n.result.name}{_where(n)}) of the values regrouped as {grouped}; {rule}"
        for x in n.inputs:
            if x in moved:
                continue
            kind = operand_kind(vals[x])
            if kind is None:
                shape = ", ".join(str(d) for d in vals[x].type.shape)
                return g, (f"operand %{x} [{shape}] of %{n.result.name}{_where(n)} is neither per channel "
                           f"{per_channel} nor constant over [{', '.join(str(d) for d in (c, *tail))}]; {rule}")
            if kind == "seg" and not from_input(x):
                return g, (f"the per-channel operand %{x}{_where(prod.get(x))} is computed in the kernel; {rule}")
        moved.add(n.result.name)
    fresh = _namer(g, "seg")
    segs: dict[str, str] = {}
    nodes = []
    for n in g.nodes:
        if n is r:
            nodes.append(dataclasses.replace(n, result=Value(n.result.name, TensorType(n.result.type.dtype, coarse)),
                                             attrs=tuple(sorted(dict(n.attrs, shape=coarse).items()))))
            continue
        if n.result.name not in moved:
            nodes.append(n)
            continue
        ins = []
        for x in n.inputs:
            if x not in moved and operand_kind(vals[x]) == "seg":
                if x not in segs:
                    segs[x] = fresh(x)
                    attrs = (("channels", c), ("groups", gg), ("seglen", ln))
                    nodes.append(Node(SEGMENT_OP, (x,), Value(segs[x], TensorType(vals[x].type.dtype, coarse)),
                                      attrs, n.loc))
                ins.append(segs[x])
            else:
                ins.append(x)
        nodes.append(dataclasses.replace(n, inputs=tuple(ins),
                                         result=Value(n.result.name, TensorType(n.result.type.dtype, coarse))))
    outputs = []
    back: dict[str, str] = {}
    for name, v in g.outputs:
        if v in moved:
            if v not in back:
                back[v] = fresh(v)
                nodes.append(Node("reshape", (v,), Value(back[v], TensorType(vals[v].type.dtype, fine)),
                                  (("shape", fine),), g.producers()[v].loc))
            outputs.append((name, back[v]))
        else:
            outputs.append((name, v))
    return Graph(g.name, g.params, tuple(nodes), tuple(outputs), g.constraints), ""


def _dims(shape) -> tuple:
    return tuple(d if isinstance(d, Variadic) else as_dim(d) for d in shape)
