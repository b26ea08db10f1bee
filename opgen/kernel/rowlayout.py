"""Axis analysis of the rows family: the anchor domain of a fused vector graph and the GM views of its tensors.

A rows kernel iterates an *anchor domain*: a list of leading axes (outermost first) times a row axis, the
innermost, contiguous axis of the largest values the graph computes. Axes are identified by their extents'
canonical text (`H`, `2 * H`), a variadic group `*Bd` and its product `prod(Bd)` being one axis; size-1 dims
carry no axis. `analyse(graph)` finds the anchor and returns a `RowLayout`; every value of the graph then has a
*space* (`RowLayout.space`), read off which anchor axes its shape spans:

  row     all leading axes and the row axis     one fp32 UB row per anchor row
  stat    all leading axes, no row axis          one fp32 scalar per row (last-axis sum / mean / max);
          or some of them (an input [C] of rows [N, C]: each row reads the element of its coordinates)
  brow    the batch axes (a prefix) + row axis   one UB row per batch, reused by its rows
  col     only the row axis                      one UB row for the whole kernel ([H] weights, their sums)
  scalar  no axis                                constants, runtime attributes

Views (reshape, permute of leading axes, a slice of any axis, concat along the row axis) on the way from an
operator input to its first computation, or from the last computation to an operator output, are not computed:
they become the GM *view* of that tensor (`View`: the element offset of anchor row (a_1..a_k), column c, is
sum_i a_i * strides[i] + col + c). Broadcasts of inputs over leading axes that are not a batch prefix are views
with stride 0. A gather of whole rows along a leading axis of an input by an integer index input (an embedding
lookup) is a view too (`PickedView`, `Chains.picks`): each anchor row's offset adds index * that axis' stride, the
index read from GM by the kernel. A graph whose values are all rows or scalars of one flat, contiguous domain (pure elementwise)
is `flat`: the kernel sees one row of prod(all extents) elements, which any rank and any variadic group allows.

The anchor follows AscendNPU IR's AutoSchedule (an axis analysis of the fused graph against an anchor iteration
domain; its PureElemwise, AnyPB, LastAxisPBR and AnyPBR kinds are the flat, broadcast, last-axis-reduction and
leading-axis-reduction cases here). Facts on the addressing: docs/reference/ascendc.md §1.8 (DataCopyPad: a run of
rows at a constant GM stride is one copy).
Raises `Unsupported` (an IRError naming the value, its spec line and the rule) for graphs outside the family.
"""

from __future__ import annotations

from dataclasses import dataclass

from opgen.errors import IRError
from opgen.ir.core import Graph
from opgen.ir.dtypes import dtype_name
from opgen.ir.dims import Bounds, DimExpr, Lit, Prod, Sym, Variadic, as_dim


class Unsupported(IRError):
    """A graph outside a family: `value` (IR value name), `loc` (spec file:line or "") and the rule. `whole`: the
    rule is about the graph as a whole (how many matmuls or outputs it has), not a construct at `value`: the family
    got nowhere in it (opgen.kernel.family.choose puts such a reason after the others). `foreign`: the graph lacks
    the construct the family is built around (attention: a score matmul reaching a softmax), so it is not of the
    family's kind at all; choose puts such a reason after every other, even one about the graph as a whole."""

    def __init__(self, value: str, loc: str, why: str, whole: bool = False, foreign: bool = False):
        self.value, self.loc, self.why, self.whole, self.foreign = value, loc, why, whole, foreign
        super().__init__(f"%{value}: {why}")


def axis_key(d) -> str | None:
    """Identity of one shape entry as an anchor axis: "*name" for a variadic group or its product, the canonical
    text of any other extent, None for a size-1 dim."""
    if isinstance(d, Variadic):
        return "*" + d.name
    e = as_dim(d)
    if e == Lit(1):
        return None
    if isinstance(e, Prod):
        return "*" + e.name
    return str(e)


def axis_extent(d) -> DimExpr:
    """Extent of one shape entry (a variadic group: the product of its dims)."""
    return Prod(d.name) if isinstance(d, Variadic) else as_dim(d)


def keys_of(shape) -> tuple[str, ...]:
    """Axis keys of a shape, size-1 dims dropped."""
    return tuple(k for k in (axis_key(d) for d in shape) if k is not None)


@dataclass(frozen=True)
class Ax:
    """One axis of a tensor as a GM access sees it: identity key, extent and stride (elements)."""

    key: str
    extent: DimExpr
    stride: DimExpr


def tensor_axes(shape) -> tuple[Ax, ...]:
    """The axes of a contiguous (row-major) tensor of `shape`, size-1 dims dropped."""
    out, stride = [], Lit(1)
    for d in reversed(tuple(shape)):
        k = axis_key(d)
        if k is not None:
            out.append(Ax(k, axis_extent(d), stride))
        stride = stride * axis_extent(d)
    return tuple(reversed(out))


@dataclass(frozen=True)
class View:
    """Where an operand lives in its GM tensor `tensor`: the element offset of anchor row (a_1, ..., a_k), column c
    is sum_i a_i * strides[i] + col + c (stats: no column). pitch: the tensor's row length, the distance of
    consecutive rows when `flat` (strides are the anchor's row-major strides times pitch: row r at r * pitch + col).
    runs: consecutive rows along the innermost leading axis are at least a row apart, so a run of them is one
    DataCopyPad with a GM gap (otherwise rows are copied one by one)."""

    tensor: str
    strides: tuple[DimExpr, ...]
    col: DimExpr
    pitch: DimExpr
    flat: bool
    runs: bool = True

    def text(self) -> str:
        """Canonical text (`opgen graph --stage kernel`): the element offset of anchor row r (coordinates a<i>)."""
        if self.flat:
            terms = ["r" if str(self.pitch) == "1" else f"r * {self.pitch}"]
        else:
            terms = [f"a{i}" if str(s) == "1" else f"a{i} * {s}" for i, s in enumerate(self.strides) if str(s) != "0"]
        if str(self.col) != "0":
            terms.append(str(self.col))
        return f"{self.tensor}[{' + '.join(terms) or '0'}]"


@dataclass(frozen=True)
class SegView(View):
    """The GM addressing of a per-channel operand of regrouped rows (opgen.kernel.rowmerge.regroup_segments): the
    values of anchor row (a_1..a_k) start at sum_i a_i * strides[i] + col (the row's group coordinate g weighted by
    C // G times the channel stride), one per segment of `seglen` columns of the row, `step` elements apart
    (elements)."""

    seglen: DimExpr = Lit(1)
    step: DimExpr = Lit(1)

    def text(self) -> str:
        """Canonical text: the first value's offset, then per segment j of seglen columns its element."""
        base = super().text()
        seg = str(self.seglen) if isinstance(as_dim(self.seglen), (Sym, Lit)) else f"({self.seglen})"
        return f"{base[:-1]} + (col / {seg}){'' if str(self.step) == '1' else f' * {self.step}'}]"


@dataclass(frozen=True)
class Piece:
    """One input of a concat along a leading axis: the anchor rows whose coordinate on that axis is in
    [start, stop) read `view`, with the coordinate taken relative to start."""

    view: View
    start: DimExpr
    stop: DimExpr


@dataclass(frozen=True)
class PiecewiseView:
    """The rows of a concat of operator inputs along leading anchor axis `axis`: each piece read from its own tensor
    through its own view (GM addressing: the kernel copies each run of rows from the piece it lies in)."""

    axis: int
    pieces: tuple
    flat: bool = False
    runs: bool = True

    @property
    def tensor(self) -> str:
        """The first piece's tensor (for naming)."""
        return self.pieces[0].view.tensor

    @property
    def col(self):
        """Column offset of the rows (0: each piece's own column offset is in its view)."""
        return Lit(0)

    def text(self) -> str:
        """Canonical text: each piece's coordinate range on the axis and its view."""
        return " | ".join(f"a{self.axis} in [{p.start}, {p.stop}): {p.view.text()}" for p in self.pieces)


@dataclass(frozen=True)
class PickedView(View):
    """The rows of a gather along a leading axis of an operator input by an index input (an embedding lookup,
    out[n, :] = weight[idx[n], :]): anchor row (a_1..a_k) of the gathered tensor starts at
    sum_i a_i * strides[i] + col + idx[row's index offset] * step, the index read from GM tensor index.tensor at
    the offset its own view (`index`, a per-row view without a row axis) gives; it must lie in [0, bound) (the
    gathered axis' extent; the kernel checks it on the scalar unit and traps outside). index_dtype: the index's IR
    dtype (i32 / i64). Rows are copied one by one (never flat, never runs). Units: elements."""

    index: View = None
    index_dtype: str = "i64"
    step: DimExpr = Lit(0)
    bound: DimExpr = Lit(1)

    def text(self) -> str:
        """Canonical text: the base offset plus the picked row: w[a0 * 0 + ... + idx[a0] * H]."""
        terms = [f"a{i}" if str(s) == "1" else f"a{i} * {s}" for i, s in enumerate(self.strides) if str(s) != "0"]
        terms.append(f"{self.index.text()}{'' if str(self.step) == '1' else f' * {self.step}'}")
        if str(self.col) != "0":
            terms.append(str(self.col))
        return f"{self.tensor}[{' + '.join(terms)}]"


@dataclass(frozen=True)
class Pick:
    """A gather of a load-chain value along one of its leading axes by an index input (Chains.picks): `index` the
    load-chain value of the index (an integer operator input seen through views), `step` the gathered axis' stride
    in the source tensor (elements), `bound` its extent."""

    index: str
    step: DimExpr
    bound: DimExpr


@dataclass(frozen=True)
class RowLayout:
    """The anchor domain of a rows kernel.

    axes / extents: keys and extents of the leading axes, outermost first; row / row_extent: the row axis;
    split: the leading axes [0, split) are batch axes (batch rows span them; len(axes) when there are none);
    flat: pure elementwise over one contiguous domain, run as a single row of prod(extents) * row_extent
    elements. Units: elements."""

    axes: tuple[str, ...]
    extents: tuple[DimExpr, ...]
    row: str
    row_extent: DimExpr
    split: int
    flat: bool = False

    def space(self, shape, what: str = "value") -> str:
        """Space of a value of `shape` (module docstring). Raises IRError for a shape that is none of them."""
        ks = keys_of(shape)
        full = self.axes + (self.row,)
        if self.flat:
            if ks in ((), full):
                return "scalar" if not ks else "row"
            raise IRError(f"{what} of shape [{_txt(shape)}] is neither the elementwise domain nor a scalar")
        if not ks:
            return "scalar"
        if ks == full:
            return "row"
        if ks == self.axes or _subsequence(ks, self.axes):
            return "stat"   # a value of some leading axes (a per-channel weight): read per row, stride 0 elsewhere
        if ks == (self.row,):
            return "col"
        if 0 < self.split < len(self.axes) and ks == self.axes[:self.split] + (self.row,):
            return "brow"
        raise IRError(f"{what} of shape [{_txt(shape)}] is not a row [{_txt(full)}], a per-row statistic, a "
                      f"batch row, a column [{self.row}] or a scalar of the kernel's domain")

    def rows_extent(self) -> DimExpr:
        """Rows of the kernel (1 when flat)."""
        return Lit(1) if self.flat else _prod(self.extents)

    def hidden_extent(self) -> DimExpr:
        """Elements of a row (the whole domain when flat)."""
        return _prod(self.extents) * self.row_extent if self.flat else self.row_extent

    def seq_extent(self) -> DimExpr:
        """Rows per batch: the product of the leading axes after the batch axes."""
        return Lit(1) if self.flat else _prod(self.extents[self.split:])

    def batch_extent(self) -> DimExpr:
        """Batches: the product of the batch axes."""
        return Lit(1) if self.flat else _prod(self.extents[:self.split])

    def text(self) -> str:
        """One line: the domain and its batch split (`opgen graph --stage kernel`)."""
        if self.flat:
            return f"layout flat [{self.hidden_extent()}] (elementwise over [{', '.join(self.axes + (self.row,))}])"
        lead = ", ".join(self.axes)
        batch = f", batch rows over [{', '.join(self.axes[:self.split])}]" if 0 < self.split < len(self.axes) else ""
        return f"layout rows [{lead}{', ' if lead else ''}{self.row}]: {self.rows_extent()} rows of {self.row_extent}{batch}"


def _subsequence(ks: tuple, axes: tuple) -> bool:
    """Whether the keys ks are some of `axes` in their order."""
    it = iter(axes)
    return bool(ks) and all(k in it for k in ks)


def _prod(es) -> DimExpr:
    out = Lit(1)
    for e in es:
        out = out * e
    return out


def _txt(shape) -> str:
    return ", ".join(str(d) for d in shape)


# ------------------------------------------------------------------------------------------------ chains
class Chains:
    """Which values of `g` are on a load chain (an input seen through casts to f32 and views) or a store chain
    (views and casts between the last computation and an output), and the stored value of every output."""

    def __init__(self, g: Graph):
        self.g = g
        self.vals = g.values()
        self.prod = g.producers()
        self.uses = g.uses()
        self.params = {p.value.name: p for p in g.params}
        self.bounds = Bounds.of(g.constraints)   # the dims' declared ranges (strides proven >= a row apart)
        self.load: dict[str, tuple[Ax, ...] | None] = {}
        for p in g.params:
            if p.kind == "input":
                self.load[p.value.name] = tensor_axes(p.value.type.shape)
        self.col: dict[str, DimExpr] = {p: Lit(0) for p in self.load}
        self.root: dict[str, str] = {p: p for p in self.load}
        self.pieces: dict[str, tuple] = {}   # concat of inputs along a leading axis: (key, (_Piece, ...))
        self.picks: dict[str, Pick] = {}     # rows of an input picked along a leading axis by an index input
        for n in g.nodes:
            self._load_step(n)
        self.out_of = {}
        for name, v in g.outputs:
            self.out_of.setdefault(v, []).append(name)
        self.store_only = self._store_only()

    def _load_step(self, n) -> None:
        """Extend the load chains through node n when it is a widening cast or a view of a load-chain value, or a
        concat of load-chain values along a leading axis."""
        if n.op == "concat" and n.inputs and all(x in self.load and x not in self.pieces for x in n.inputs):
            shape = n.result.type.shape
            rank = len(shape)
            ax = n.attr("axis") % rank if rank else 0
            if 0 < rank and ax != rank - 1 and not any(isinstance(d, Variadic) for d in shape):
                off, pieces = Lit(0), []
                for x in n.inputs:
                    xs = self.vals[x].type.shape
                    d = xs[ax]
                    pos = sum(1 for e in xs[:ax] if axis_key(e) is not None)   # the concat axis among x's axes
                    pieces.append(_Piece(x, off, pos, axis_key(d) is not None, axis_extent(d)))
                    off = off + axis_extent(d)
                r = n.result.name
                self.load[r], self.col[r], self.root[r] = tensor_axes(shape), Lit(0), self.root[n.inputs[0]]
                self.pieces[r] = (axis_key(shape[ax]), tuple(pieces))
            return
        if n.op == "gather":
            self._pick_step(n)
            return
        if not n.inputs or n.inputs[0] not in self.load or len(n.inputs) != 1:
            return
        x, r = n.inputs[0], n.result.name
        axes, col = self.load[x], self.col[x]
        if x in self.picks:   # picked rows go on through casts and trivial reshapes only
            if n.op == "cast" and dtype_name(n.attr("to")) == "f32" or n.op == "reshape" and _reshape_axes(
                    axes, n.result.type.shape) is not None:
                self.load[r], self.col[r], self.root[r] = _reshape_axes(axes, n.result.type.shape) or axes, col, \
                    self.root[x]
                self.picks[r] = self.picks[x]
            return
        if x in self.pieces:   # a concat of inputs goes on through casts and trivial reshapes only
            if n.op == "cast" and dtype_name(n.attr("to")) == "f32" or n.op == "reshape" and _reshape_axes(
                    axes, n.result.type.shape) is not None:
                self.load[r], self.col[r], self.root[r] = axes, col, self.root[x]
                self.pieces[r] = self.pieces[x]
            return
        if n.op == "cast":
            if dtype_name(n.attr("to")) != "f32":
                return
            new = axes
        elif n.op == "reshape":
            new = _reshape_axes(axes, n.result.type.shape, self.vals[x].type.shape)
            if new is None:
                return
        elif n.op == "permute":
            perm = tuple(n.attr("perm"))
            src_shape = self.vals[x].type.shape
            if any(isinstance(d, Variadic) for d in src_shape):
                return
            at = _positions(src_shape)   # shape index -> index among the axes (by position: keys may repeat)
            new = tuple(axes[at[p]] for p in perm if at[p] is not None)
        elif n.op == "slice":   # a window of one axis: that axis's extent shrinks, the base offset moves
            shape = self.vals[x].type.shape
            if n.attr("step", 1) != 1 or not shape or not axes:
                return
            ax = n.attr("axis") % len(shape)
            pos = _positions(shape)[ax]
            if pos is None or isinstance(shape[ax], Variadic) or len(axes) != len(keys_of(shape)):
                return
            this = axes[pos]
            if axis_key(shape[ax]) != this.key:
                return
            start, stop = as_dim(n.attr("start")), as_dim(n.attr("stop"))
            ext = stop - start
            key = axis_key(ext)
            if key is None:
                return
            new = axes[:pos] + (Ax(key, ext, this.stride),) + axes[pos + 1:]
            col = col + start * this.stride
        else:
            return
        self.load[r], self.col[r], self.root[r] = new, col, self.root[x]

    def _pick_step(self, n) -> None:
        """Extend the load chains through gather node n when it picks whole rows of a load-chain value x along a
        leading axis (not x's last axis, which stays the row) by an index that is itself a load-chain value of an
        integer operator input (an embedding lookup): the result's axes are x's batch axes, the index's own axes (no
        stride in x: the index picks the address) and x's axes after the gathered one (Chains.picks records the
        index, the gathered axis' stride and extent). Any other gather stays a computation (rows._Lowering.gather)."""
        x, idx = n.inputs
        r = n.result.name
        if x not in self.load or idx not in self.load or x in self.pieces or idx in self.pieces \
                or x in self.picks or idx in self.picks:
            return
        xs, ish = self.vals[x].type.shape, self.vals[idx].type.shape
        ax, nb = n.attr("axis"), n.attr("batch_dims")
        if any(isinstance(d, Variadic) for d in xs) or ax >= len(xs) - 1 or axis_key(xs[-1]) is None:
            return   # a gather along the row (the last axis) picks one element per row: not a row view
        if any(isinstance(d, Variadic) for d in ish[:nb]):
            return
        axes = self.load[x]
        if len(axes) != len(keys_of(xs)):
            return
        at = _positions(xs)
        iaxes = self.load[idx]
        if len(iaxes) != len(keys_of(ish)) or any(a.key != b.key for a, b in zip(
                iaxes, tensor_axes(ish))):
            return   # an index seen through a permute or a window: its axes are not its shape's
        ipos = _positions(ish)
        lead = tuple(axes[at[k]] for k in range(nb) if at[k] is not None)
        own = tuple(Ax(a.key, a.extent, Lit(0)) for k, a in enumerate(tensor_axes(ish))
                    if k >= sum(1 for p in ipos[:nb] if p is not None))
        rest = tuple(axes[at[k]] for k in range(ax + 1, len(xs)) if at[k] is not None)
        step = axes[at[ax]].stride if at[ax] is not None else Lit(0)
        self.load[r], self.col[r], self.root[r] = lead + own + rest, self.col[x], self.root[x]
        self.picks[r] = Pick(idx, step, axis_extent(xs[ax]))

    def _store_only(self) -> set[str]:
        """Values whose every use is a view or narrowing cast on the way to outputs (store chains)."""
        out: set[str] = set()
        for n in reversed(self.g.nodes):
            r = n.result.name
            users = self.uses.get(r, [])
            if not users and r not in self.out_of:
                continue
            ok = all(u.op in ("reshape", "permute", "cast") and u.result.name in out
                     or u.op == "concat" and _fixed_axis(u, self.vals) and u.result.name in out for u in users)
            if ok and n.op in ("reshape", "permute", "cast", "concat"):
                if n.op == "concat" and not _fixed_axis(n, self.vals):
                    continue
                out.add(r)
        return out

    def is_load(self, v: str) -> bool:
        """Whether v is an operator input seen through widening casts and views only."""
        return v in self.load

    def stored_pieces(self, v: str) -> list[str]:
        """The computed (or loaded) values output value v stores: v walked back through its store chain, one per
        piece of a concat along the row axis."""
        if v not in self.store_only or v in self.load:
            return [v]
        n = self.prod[v]
        if n.op == "concat":
            return [s for x in n.inputs for s in self.stored_pieces(x)]
        return self.stored_pieces(n.inputs[0])


@dataclass(frozen=True)
class _Piece:
    """One input of a concat of inputs along a leading axis (Chains.pieces): load-chain value `value`, its first
    coordinate `start` on the concat axis, the index `pos` of that axis among the value's axes, whether the value
    has an axis there (`keyed`: False for an extent-1 dim, which carries no axis) and its `extent`."""

    value: str
    start: DimExpr
    pos: int
    keyed: bool
    extent: DimExpr


def _positions(shape) -> list:
    """For each entry of `shape`: its index among the shape's axes (tensor_axes order), None for a size-1 dim."""
    out, k = [], 0
    for d in shape:
        if axis_key(d) is None:
            out.append(None)
        else:
            out.append(k)
            k += 1
    return out


def _fixed_axis(n, vals) -> bool:
    """A concat whose axis is a fixed dim of its result (not a variadic group): its pieces are stored side by side
    along that axis (the row axis: column windows; a leading axis: row offsets)."""
    shape = vals[n.result.name].type.shape
    return bool(shape) and not isinstance(shape[n.attr("axis") % len(shape)], Variadic)


def _reshape_axes(axes: tuple[Ax, ...], new_shape, old_shape=None) -> tuple[Ax, ...] | None:
    """The axes after a reshape that only adds or drops size-1 dims or renames a variadic group as its product, or
    (given `old_shape`, the shape before it) regroups the axes of a compact tensor: when `axes` are exactly the
    row-major axes of old_shape (no permute or window before it), the elements keep their order and the new shape's
    row-major axes address them (GroupNorm's [N, C, L] read as [N, G, C // G * L]); None for any other reshape."""
    ks = keys_of(new_shape)
    if ks == tuple(a.key for a in axes):
        return axes
    if old_shape is not None and not any(isinstance(d, Variadic) for d in (*old_shape, *new_shape)) \
            and tuple(axes) == tensor_axes(old_shape):
        return tensor_axes(new_shape)
    return None


# ------------------------------------------------------------------------------------------------ analysis
def analyse(g: Graph) -> RowLayout:
    """The anchor domain of optimized graph `g` (module docstring). Raises Unsupported."""
    ch = Chains(g)
    vals = g.values()
    cands: list[tuple[tuple[str, ...], tuple, str]] = []

    def add(v: str):
        shape = vals[v].type.shape
        cands.append((keys_of(shape), shape, v))

    for n in g.nodes:
        r = n.result.name
        if ch.is_load(r) or r in ch.store_only or n.op in ("const", "broadcast", "reshape"):
            continue
        if n.op in ("permute", "slice", "concat", "repeat_interleave"):
            raise Unsupported(r, n.loc, _view_rule(n.op))
        add(r)
        for x in n.inputs:
            add(x)
    for _name, v in g.outputs:
        for s in ch.stored_pieces(v):
            add(s)
    if not cands:
        raise Unsupported(g.outputs[0][1] if g.outputs else g.name, "", "the graph computes nothing")
    best = max(len(k) for k, _s, _v in cands)
    tops = {}
    for k, shape, v in cands:
        if len(k) == best:
            tops.setdefault(k, (shape, v))
    if len(tops) > 1:
        (k1, (_s1, v1)), (k2, (_s2, v2)) = list(tops.items())[:2]
        regroup = _regrouping_reshape(g, set(k for k, _s, _v in cands))
        if regroup is not None:
            n, src, dst = regroup
            raise Unsupported(n.result.name, n.loc, f"a reshape regroups the axes [{', '.join(src)}] as "
                              f"[{', '.join(dst)}] between computations that use both groupings (a reduction over "
                              f"part of an axis, such as a group of channels, read back per element of the other "
                              f"grouping, such as a per-channel weight); the rows family computes in one axis "
                              f"order: reshape only operator inputs or outputs, or merge whole trailing axes")
        raise Unsupported(v2, _loc(g, v2), f"values in two axis orders, [{', '.join(k1)}] (%{v1}) and "
                          f"[{', '.join(k2)}]; permute only operator inputs or outputs")
    keys, (shape, _v) = next(iter(tops.items()))
    if not keys:
        raise Unsupported(_v, _loc(g, _v), "every value is a scalar")
    if len(set(keys)) != len(keys):
        raise Unsupported(_v, _loc(g, _v), f"axis {next(k for k in keys if keys.count(k) > 1)} appears twice in "
                          f"[{', '.join(keys)}]")
    ext = {axis_key(d): axis_extent(d) for d in shape if axis_key(d) is not None}
    axes, row = keys[:-1], keys[-1]
    split = len(axes)
    for k, _s, v in cands:   # batch rows: the batch axes (a prefix of the leading axes) and the row axis
        j = len(k) - 1
        if j >= 1 and k[-1] == row and j < len(axes) and k[:-1] == axes[:j]:
            if split != len(axes) and split != j:
                raise Unsupported(v, _loc(g, v), f"batch rows over two different batch prefixes "
                                  f"[{', '.join(axes[:split])}] and [{', '.join(axes[:j])}]")
            split = j
    for n in g.nodes:   # a total per batch: a reduction of the rows over the row axis and the rows of each batch
        k = keys_of(n.result.type.shape)
        if n.op == "reduce" and keys_of(vals[n.inputs[0]].type.shape) == keys and k and len(k) < len(axes) \
                and k == axes[:len(k)]:
            if split != len(axes) and split != len(k):
                raise Unsupported(n.result.name, n.loc, f"batch rows over two different batch prefixes "
                                  f"[{', '.join(axes[:split])}] and [{', '.join(k)}]")
            split = len(k)
    lay = RowLayout(tuple(axes), tuple(ext[a] for a in axes), row, ext[row], split)
    if _is_flat(g, ch, lay):
        return RowLayout(lay.axes, lay.extents, lay.row, lay.row_extent, len(lay.axes), True)
    return lay


def _regrouping_reshape(g: Graph, used: set):
    """(node, source keys, result keys) of the first reshape of g between two axis groupings that computed values
    use (`used`: their axis keys), neither a renaming nor size-1 dims added or dropped (the keys differ as sets:
    not a permute); None when there is none."""
    vals = g.values()
    for n in g.nodes:
        if n.op != "reshape":
            continue
        src, dst = keys_of(vals[n.inputs[0]].type.shape), keys_of(n.result.type.shape)
        if set(src) != set(dst) and src in used and dst in used:
            return n, src, dst
    return None


def _is_flat(g: Graph, ch: Chains, lay: RowLayout) -> bool:
    """Pure elementwise over one contiguous domain: no reduction, every value a row or a scalar, every GM access
    contiguous in anchor order with the row's own length (so the domain is one run of elements)."""
    vals = g.values()
    full = lay.axes + (lay.row,)
    for n in g.nodes:
        if n.op in ("reduce", "concat", "slice", "permute", "gather", "scatter_add", "matmul", "iota",
                    "repeat_interleave"):
            return False
        if keys_of(n.result.type.shape) not in ((), full):
            return False
    for p in g.params:
        if p.kind == "input" and keys_of(p.value.type.shape) not in ((), full):
            return False
        if p.kind == "input" and keys_of(p.value.type.shape) == full:
            if not _contiguous(view_of(ch, p.value.name, lay, vals), lay):
                return False
    for name, v in g.outputs:
        if keys_of(vals[v].type.shape) != full:
            return False
        if not all(_contiguous(w, lay) for _s, w in store_view(ch, v, lay, vals, name)):
            return False
    return True


def _contiguous(v: View, lay: RowLayout) -> bool:
    return v.flat and as_dim(v.col) == Lit(0) and as_dim(v.pitch) == as_dim(lay.row_extent)


def view_of(ch: Chains, v: str, lay: RowLayout, vals):
    """The View of load-chain value v in anchor order (a PiecewiseView for a concat of inputs along a leading axis).
    Raises IRError when the concat axis is not an anchor axis."""
    if v in ch.picks:   # rows picked by an index: the source's view with the index's term added
        pk = ch.picks[v]
        base = _view(ch.root[v], ch.load[v], ch.col[v], lay, vals[ch.root[v]].type.shape, ch.bounds)
        index = view_of(ch, pk.index, lay, vals)
        outside = [k for k in keys_of(vals[pk.index].type.shape) if k not in lay.axes]
        if outside:
            raise IRError(f"the index {ch.root[pk.index]} has axes [{', '.join(outside)}] that are not leading axes "
                          f"of the kernel's rows")
        return PickedView(base.tensor, base.strides, base.col, base.pitch, False, False, index,
                          dtype_name(vals[ch.root[pk.index]].type.dtype), pk.step, pk.bound)
    if v in ch.pieces:
        key, pieces = ch.pieces[v]
        if key not in lay.axes:
            raise IRError(f"the concat axis {key} is not a leading axis of the kernel's domain")
        out = []
        for pc in pieces:   # the piece's concat axis (by position) takes the concat's key
            axes = list(ch.load[pc.value])
            if pc.keyed:
                axes[pc.pos] = Ax(key, axes[pc.pos].extent, axes[pc.pos].stride)
            else:           # an extent-1 piece: its coordinate relative to start is 0, any stride
                axes.insert(pc.pos, Ax(key, Lit(1), Lit(0)))
            root = ch.root[pc.value]
            view = _view(root, tuple(axes), ch.col[pc.value], lay, vals[root].type.shape, ch.bounds)
            out.append(Piece(View(view.tensor, view.strides, view.col, view.pitch, False, view.runs), pc.start,
                             as_dim(pc.start) + pc.extent))
        return PiecewiseView(lay.axes.index(key), tuple(out))
    return _view(ch.root[v], ch.load[v], ch.col[v], lay, vals[ch.root[v]].type.shape, ch.bounds)


def _view(tensor: str, axes: tuple[Ax, ...], col: DimExpr, lay: RowLayout, tensor_shape, bounds: Bounds) -> View:
    """The View of an access to GM tensor `tensor` (of `tensor_shape`) whose axes are `axes` (keys of the anchor),
    with column offset `col`; `bounds` (the dims' declared ranges) decides whether rows along the innermost leading
    axis are at least a row apart (`runs`). Raises IRError when the row axis is not the tensor's innermost axis or
    two of its axes have one key (which anchor axis each follows is ambiguous)."""
    keys = [a.key for a in axes]
    dup = next((k for k in keys if keys.count(k) > 1), None)
    if dup is not None:
        raise IRError(f"axis {dup} appears twice in the axes [{', '.join(keys)}] of {tensor}; which anchor axis each "
                      f"follows is ambiguous")
    by = {a.key: a for a in axes}
    has_row = lay.row in by
    if has_row and as_dim(by[lay.row].stride) != Lit(1):
        raise IRError(f"the row axis {lay.row} is not the innermost axis of {tensor}")
    strides = tuple(by[k].stride if k in by else Lit(0) for k in lay.axes)
    pitch = axis_extent(tuple(tensor_shape)[-1]) if has_row and tensor_shape else Lit(1)
    want, flat = pitch, True
    for s, e in reversed(list(zip(strides, lay.extents))):
        if as_dim(s) != as_dim(want):
            flat = False
        want = want * e
    inner = as_dim(strides[-1]) if strides else Lit(0)
    length = lay.row_extent if has_row else Lit(1)
    runs = bool(strides) and inner != Lit(0) and bounds.nonneg(inner - as_dim(length))
    return View(tensor, strides, col, pitch, flat, runs)


def store_view(ch: Chains, out_value: str, lay: RowLayout, vals, tensor: str) -> list[tuple[str, View]]:
    """[(stored value, View)] of output `tensor` whose value is out_value: one entry, or one per piece of a
    concat along the row axis. Raises IRError for a store chain the family cannot address."""
    shape = vals[out_value].type.shape
    return _store_walk(ch, out_value, tensor_axes(shape), Lit(0), lay, vals, (tensor, shape))


def _store_walk(ch, v, axes, col, lay, vals, tensor):
    """store_view of value v, whose axes in the output tensor are `axes` at column offset `col`."""
    if v not in ch.store_only or v in ch.load:
        return [(v, _view(tensor[0], axes, col, lay, tensor[1], ch.bounds))]
    n = ch.prod[v]
    if n.op == "cast":
        return _store_walk(ch, n.inputs[0], axes, col, lay, vals, tensor)
    if n.op == "reshape":
        src = n.inputs[0]
        new = _reshape_axes(axes, vals[src].type.shape, vals[v].type.shape)
        if new is None:
            raise IRError(f"%{v}: reshape [{_txt(vals[src].type.shape)}] -> [{_txt(vals[v].type.shape)}] changes "
                          f"the rows of an output")
        return _store_walk(ch, src, new, col, lay, vals, tensor)
    if n.op == "permute":
        src = n.inputs[0]
        perm = tuple(n.attr("perm"))
        at = _positions(vals[v].type.shape)   # result axis j is source axis perm[j]; by position (keys may repeat)
        src_of = {p: j for j, p in enumerate(perm)}
        new = tuple(axes[at[src_of[p]]] for p in range(len(perm)) if at[src_of[p]] is not None)
        return _store_walk(ch, src, new, col, lay, vals, tensor)
    if n.op == "concat":   # the pieces side by side along the concat axis: each at its offset times its stride
        shape = vals[v].type.shape
        ax = n.attr("axis") % len(shape)
        pos = _positions(shape)[ax]
        out, off = [], Lit(0)
        for x in n.inputs:
            e = axis_extent(vals[x].type.shape[ax])
            if pos is None:   # a concat of extent-1 pieces along a size-1 dim: nothing to address
                raise IRError(f"%{v}: a concat along a dim of size 1")
            here = axes[pos]
            piece = axes[:pos] + (Ax(axis_key(e) or "1", e, here.stride),) + axes[pos + 1:]
            out += _store_walk(ch, x, piece, col + off * here.stride, lay, vals, tensor)
            off = off + e
        return out
    return [(v, _view(tensor[0], axes, col, lay, tensor[1], ch.bounds))]


def _view_rule(op: str) -> str:
    return {
        "permute": "permute of a computed value; the rows family permutes only operator inputs and outputs "
                   "(as GM addressing)",
        "slice": "slice of a computed value or with a step; the rows family slices operator inputs only, by a "
                 "step of 1 (as GM addressing)",
        "concat": "concat of computed values other than into an output (along a fixed axis)",
        "repeat_interleave": "repeat_interleave (one element read by a group of elements of an axis): the rows "
                             "family reads each input element at its own index; the cube family's computed "
                             "operand reads a repeated [G, N] group-row input",
    }[op]


def _loc(g: Graph, v: str) -> str:
    n = g.producers().get(v)
    return n.loc if n is not None else ""
