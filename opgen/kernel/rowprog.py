"""Row programs: the Kernel IR of opgen's row-wise vector kernels (the AdaLayerNorm family).

A row kernel walks the R = prod(Bd) * S rows of H elements of its row tensors. Every tensor-IR value of a
fused vector kernel lives in one *space*, read off its shape with the layout's dims (size-1 dims dropped):

  row    [Bd, S, H]  one UB row of H fp32 lanes per row             (dy, x, pd_x, every row intermediate)
  stat   [Bd, S]     one fp32 scalar per row                         (mean, rstd, row sums)
  brow   [Bd, H]     one UB row per batch, reused by its S rows      (scale, pd_scale, pd_shift)
  col    [H]         one UB row for the whole kernel                  (gamma, beta, pd_gamma, pd_beta)
  scalar []          a constant or a runtime attribute                (1.0, epsilon)

`lower(graph, layout)` turns the graph into a list of `Instr` (AscendC-level: Cast, Add/Sub/Mul/Div,
Adds/Muls, ReduceSum, accumulate, C++ scalar expressions) and assigns UB buffers: row temporaries are
allocated by liveness (an operand that dies is overwritten in place, which the AscendC count-form vector
instructions allow), brow/col values and accumulators get one buffer each. Reductions over S become
per-batch accumulators, reductions over all rows per-kernel accumulators (summed across cores by the
emitted code), reductions over H row sums; each row sum has a *level* (how many row sums it depends on)
so a kernel that splits H over cores knows how many cross-core exchanges a row needs
(opgen.codegen.kernel, COL_SPLIT).

Reference facts: reference/ascendc.md §1.5 (TQue/TBuf), §1.9 (count-form vector instructions, in-place
operands, Cast round modes); reference/ada_layer_norm.md §1.2-§1.3 (the math, fp32 inside).
`verify_program` checks def-before-use, the temporaries' range and the GM tensors named;
`print_program` is the canonical text (`opgen graph --stage kernel`): per instruction its space, level
and the COL_SPLIT phases that run it (P<level> = the exchange of that level's row sums, F = final).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from opgen.errors import IRError
from opgen.ir.core import Graph

SPACES = ("row", "stat", "brow", "col", "scalar")
VECTOR_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "max": "Max", "min": "Min"}
VECTOR_UNARY = {"exp": "Exp", "log": "Ln", "sqrt": "Sqrt", "rsqrt": "Rsqrt", "abs": "Abs", "relu": "Relu"}
SCALAR_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
SCALAR_UNARY = {"sqrt": "std::sqrt({})", "rsqrt": "1.0f / std::sqrt({})", "neg": "-{}", "exp": "std::exp({})",
                "log": "std::log({})", "abs": "std::fabs({})", "recip": "(1.0f / {})"}
VECTOR_SPACES = ("row", "brow", "col", "table")
"""Spaces whose values are UB rows (vector operands); "table" is a head-row kernel's RoPE table row
(opgen.kernel.headrows)."""
NO_INPLACE = ("vgather",)
"""Instruction kinds whose destination must not be one of their sources (Gather permutes lanes)."""
ROUND_MODES = {"rint": "CAST_RINT", "round": "CAST_ROUND", "none": "CAST_NONE"}
VECTOR_KINDS = ("cast_in", "vbin", "vscalar", "vunary", "vdup", "vgather", "acc", "store")
"""Instruction kinds printed as vector (PIPE_V) instructions. The printers follow each with
PipeBarrier<PIPE_V>(): the vector pipe issues in order but does not complete in order, so a dependent
vector instruction must wait (reference/ascendc.md §1.6); the emitted packages use manual sync."""


@dataclass(frozen=True)
class RowLayout:
    """The dims that make a row kernel: variadic batch dims, the sequence dim, the row length."""

    batch: str = "Bd"
    seq: str = "S"
    hidden: str = "H"


@dataclass(frozen=True)
class GmTensor:
    """One GM tensor of the kernel: an operator input or output (spec name), its space and IR dtype name
    ("T", "U" for dtype variables, "f32", ...)."""

    name: str
    role: str      # "in" | "out"
    space: str
    dtype: str


@dataclass(frozen=True)
class Instr:
    """One Kernel-IR instruction.

    kind        meaning (n = the row's element count, all UB operands fp32)
    load        dst (brow/col buffer) <- GM tensor `gm` (its batch row or the whole row), cast to fp32
    cast_in     dst (row temp) <- the current row of GM tensor `gm`, cast to fp32
    vbin        dst = srcs[0] <op> srcs[1]                   (AscendC Add/Sub/Mul/Div/Max/Min, count n)
    vscalar     dst = srcs[0] <op> scalar arg                (Adds/Muls)
    vunary      dst = op(srcs[0])                            (Exp/Ln/Sqrt/Rsqrt/Abs/Relu)
    vdup        dst = scalar arg broadcast                   (Duplicate)
    vgather     dst = srcs[0] with its lanes permuted by the UB offset table `arg`  (Gather; never in place)
    rsum        scalar dst = sum of srcs[0] over the row     (ReduceSum; partial per core in COL_SPLIT)
    sexpr       scalar dst = C++ float expression arg over scalar names
    sload       scalar dst = GM stat tensor `gm` at this row
    acc         accumulator dst += srcs[0]                   (brow: per batch, col: per kernel)
    store       GM row tensor `gm` <- srcs[0] cast to its dtype with round mode arg
    sstore      GM stat tensor `gm` <- scalar srcs[0] cast with round mode arg
    """

    kind: str
    dst: str = ""
    srcs: tuple[str, ...] = ()
    op: str = ""
    arg: str = ""
    gm: str = ""
    space: str = "row"
    level: int = 0
    phases: tuple = ()   # COL_SPLIT phases that execute it: row-sum levels it feeds, and -1 (the final phase)


@dataclass
class RowProgram:
    """A lowered row kernel: GM tensors, instructions in execution order, and the UB buffers they use.

    row_temps: number of fp32 row temporaries (w0..); brow/col: names of per-batch / per-kernel fp32 UB
    rows (values and accumulators); accs: {accumulator: (space, output name, round mode)}; levels: number
    of row-sum levels (cross-core exchanges per row group when H is split over cores)."""

    name: str
    layout: RowLayout
    gm: list[GmTensor] = field(default_factory=list)
    instrs: list[Instr] = field(default_factory=list)
    row_temps: int = 0
    brow: list[str] = field(default_factory=list)
    col: list[str] = field(default_factory=list)
    accs: dict = field(default_factory=dict)
    levels: int = 0
    consts: list = field(default_factory=list)   # predefined UB operands (head-row kernels: slots, lane tables)

    def tensor(self, name: str) -> GmTensor:
        """The GM tensor `name`. Raises KeyError."""
        for t in self.gm:
            if t.name == name:
                return t
        raise KeyError(name)

    def rsums(self, level: int | None = None) -> list[Instr]:
        """The row-sum instructions (of one level when given)."""
        return [i for i in self.instrs if i.kind == "rsum" and (level is None or i.level == level)]


def space_of(shape, layout: RowLayout) -> str:
    """Space of a value of `shape` (tuple of IR dims) under `layout`. Raises IRError for other shapes."""
    toks = []
    for d in shape:
        s = str(d)
        if s == "1":
            continue
        if s in (f"*{layout.batch}", f"prod({layout.batch})"):
            toks.append("B")
        elif s == layout.seq:
            toks.append("S")
        elif s == layout.hidden:
            toks.append("H")
        else:
            raise IRError(f"row kernel: dim {s} of shape [{', '.join(map(str, shape))}] is not one of "
                          f"{layout.batch}, {layout.seq}, {layout.hidden}")
    key = "".join(toks)
    spaces = {"BSH": "row", "BS": "stat", "BH": "brow", "H": "col", "": "scalar"}
    if key not in spaces:
        raise IRError(f"row kernel: shape [{', '.join(map(str, shape))}] is not a row, stat, batch-row, column or "
                      f"scalar of the layout")
    return spaces[key]


def _reduce_axes_space(src_shape, axes, keepdims, layout) -> str:
    """Which axes of the row space a reduce removes: 'H' (row sum), 'S' (per batch), 'BS' (all rows)."""
    rank = len(src_shape)
    names = []
    for a in axes:
        d = str(src_shape[a % rank])
        if d == layout.hidden:
            names.append("H")
        elif d == layout.seq:
            names.append("S")
        elif d in (f"*{layout.batch}", f"prod({layout.batch})"):
            names.append("B")
        else:
            raise IRError(f"row kernel: reduce over dim {d} is not supported")
    return "".join(sorted(names, key="BSH".index))


class _Lowering:
    def __init__(self, g: Graph, layout: RowLayout):
        self.g, self.layout = g, layout
        self.p = RowProgram(g.name, layout)
        self.alias: dict[str, str] = {}       # IR value -> operand name
        self.space: dict[str, str] = {}
        self.scalar_text: dict[str, str] = {}  # scalar-space IR value -> C++ text
        self.params = {pr.value.name: pr for pr in g.params}
        self.consumers = g.uses()
        self.out_of = {v: k for k, v in g.outputs}
        self.narrow: dict[str, str] = {}     # value -> round mode of the narrowing cast producing an output

    def operand(self, v: str) -> str:
        return self.alias.get(v, v)

    def run(self) -> RowProgram:
        p, lay = self.p, self.layout
        for pr in self.g.params:
            v = pr.value
            sp = space_of(v.type.shape, lay)
            self.space[v.name] = sp
            if pr.kind == "attr":
                self.scalar_text[v.name] = f"attr_{v.name}"
            elif sp in ("row", "brow", "col", "stat"):
                p.gm.append(GmTensor(v.name, "in", sp, _dtype_name(v.type.dtype)))
            if pr.kind != "attr" and sp == "stat":
                p.instrs.append(Instr("sload", f"s_{v.name}", gm=v.name, space="stat"))
                self.alias[v.name] = f"s_{v.name}"
        for n in self.g.nodes:
            self.node(n)
        for out_name, v in self.g.outputs:
            self.output(out_name, v)
        self.finish()
        return p

    # ---------------------------------------------------------------- nodes
    def node(self, n):
        r = n.result.name
        sp = space_of(n.result.type.shape, self.layout)
        self.space[r] = sp
        op, ins = n.op, list(n.inputs)
        emit = self.p.instrs.append
        if op == "reshape":
            self.alias[r] = self.operand(ins[0])
            if ins[0] in self.scalar_text:
                self.scalar_text[r] = self.scalar_text[ins[0]]
            return
        if op == "const":
            if sp != "scalar":
                raise IRError(f"row kernel: %{r}: only scalar constants are supported")
            self.scalar_text[r] = _float_literal(n.attr("value"))
            return
        if op == "cast":
            src = ins[0]
            if src in self.params and self.space[src] in ("row",):
                emit(Instr("cast_in", r, gm=src, space="row"))
                return
            if src in self.params and self.space[src] in ("brow", "col"):
                emit(Instr("load", r, gm=src, space=self.space[src]))
                return
            if n.attr("to") == "f32" and str(self.g.values()[src].type.dtype) == "f32":
                self.alias[r] = self.operand(src)
                return
            # a narrowing cast: only as the last step before an output (output() applies its round mode).
            # Rounding an intermediate has no row-kernel instruction: refuse rather than drop the rounding.
            if self.consumers.get(r) or r not in self.out_of:
                raise IRError(f"row kernel: %{r}: a narrowing cast to {n.attr('to')} feeds a computation, not only "
                              f"an output; the row lowering rounds outputs only")
            self.alias[r] = self.operand(src)
            self.narrow[r] = n.attr("round")
            return
        if op == "reduce":
            src = ins[0]
            kind = n.attr("kind")
            axes = _reduce_axes_space(self.g.values()[src].type.shape, n.attr("axes"), n.attr("keepdims"), self.layout)
            if self.space[src] != "row":
                raise IRError(f"row kernel: %{r}: reduce of a {self.space[src]} value is not supported")
            if axes == "H":
                if kind not in ("sum", "mean"):
                    raise IRError(f"row kernel: %{r}: row {kind} is not supported")
                emit(Instr("rsum", f"sum_{r}", (self.operand(src),), space="stat"))
                if kind == "mean":
                    emit(Instr("sexpr", r, arg=f"sum_{r} / static_cast<float>(hidden_)", space="stat"))
                else:
                    emit(Instr("sexpr", r, arg=f"sum_{r}", space="stat"))
                return
            if kind != "sum":
                raise IRError(f"row kernel: %{r}: {kind} over {axes} is not supported")
            target = {"S": "brow", "BS": "col"}.get(axes)
            if target is None:
                raise IRError(f"row kernel: %{r}: reduce over {axes} is not supported")
            emit(Instr("acc", r, (self.operand(src),), space=target))
            return
        if op in VECTOR_BINARY or op in VECTOR_UNARY or op == "neg":
            self.elementwise(n, r, sp, op, ins)
            return
        raise IRError(f"row kernel: op {op} (%{r}) is not supported by the row lowering")

    def elementwise(self, n, r, sp, op, ins):
        lower_elementwise(self, r, sp, op, ins)

    # ---------------------------------------------------------------- outputs
    def output(self, name, v):
        sp = space_of(self.g.values()[v].type.shape, self.layout)
        dtype = _dtype_name(self.g.values()[v].type.dtype)
        src = self.operand(v)
        round_mode = self.narrow.get(v, "none")
        self.p.gm.append(GmTensor(name, "out", sp, dtype))
        if sp == "row":
            self.p.instrs.append(Instr("store", "", (src,), arg=ROUND_MODES[round_mode], gm=name, space="row"))
        elif sp == "stat":
            self.p.instrs.append(Instr("sstore", "", (src,), arg=ROUND_MODES[round_mode], gm=name, space="stat"))
        elif sp in ("brow", "col"):
            accs = {i.dst for i in self.p.instrs if i.kind == "acc"}
            if src not in accs:
                raise IRError(f"row kernel: output {name} is a {sp} value that is not a sum over rows")
            self.p.accs[src] = (sp, name, ROUND_MODES[round_mode])
        else:
            raise IRError(f"row kernel: output {name} is a scalar")

    # ---------------------------------------------------------------- schedule, levels, buffers
    def finish(self):
        p = self.p
        _assign_levels(p)
        p.instrs = _schedule(p.instrs)
        _assign_phases(p)
        _allocate(p)


def lower_elementwise(ctx, r, sp, op, ins) -> None:
    """Append the instructions of elementwise op `op` with result `r` in space `sp` to ctx.p.instrs.

    ctx provides `space` ({operand: space}), `scalar_text` ({scalar operand: C++ text}), `operand(name)`
    (the buffer-level name of a value) and `p` (the RowProgram being built); `ins` are the operands' names.
    Stat/scalar results become C++ float expressions; vector results AscendC instructions (a scalar operand
    of add/mul/sub folds into Adds/Muls; div/max/min broadcast it with Duplicate first: x / s is not
    x * (1 / s) in IEEE). Raises IRError for an op without a lowering."""
    emit = ctx.p.instrs.append
    if sp in ("stat", "scalar"):
        texts = [ctx.scalar_text.get(i, ctx.operand(i)) for i in ins]
        if op in SCALAR_BINARY:
            expr = f"({texts[0]} {SCALAR_BINARY[op]} {texts[1]})"
        elif op in SCALAR_UNARY:
            expr = SCALAR_UNARY[op].format(texts[0])
        else:
            raise IRError(f"row kernel: scalar {op} (%{r}) is not supported")
        if sp == "scalar":
            ctx.scalar_text[r] = expr
        else:
            emit(Instr("sexpr", r, arg=expr, space="stat"))
        return
    vec = [i for i in ins if ctx.space[i] in VECTOR_SPACES]
    sca = [i for i in ins if ctx.space[i] in ("stat", "scalar")]
    if op in VECTOR_UNARY:
        emit(Instr("vunary", r, (ctx.operand(ins[0]),), VECTOR_UNARY[op], space=sp))
        return
    if op == "neg":
        emit(Instr("vscalar", r, (ctx.operand(ins[0]),), "Muls", "-1.0f", space=sp))
        return
    if op not in VECTOR_BINARY:
        raise IRError(f"row kernel: op {op} (%{r}) has no vector lowering")
    if len(vec) == 2:
        emit(Instr("vbin", r, (ctx.operand(ins[0]), ctx.operand(ins[1])), VECTOR_BINARY[op], space=sp))
        return
    s = ctx.scalar_text.get(sca[0], ctx.operand(sca[0]))
    a = ctx.operand(vec[0])
    vec_first = ins[0] == vec[0]
    if op == "add":
        emit(Instr("vscalar", r, (a,), "Adds", s, space=sp))
    elif op == "mul":
        emit(Instr("vscalar", r, (a,), "Muls", s, space=sp))
    elif op == "sub" and vec_first:
        emit(Instr("vscalar", r, (a,), "Adds", f"-({s})", space=sp))
    elif op == "sub":
        emit(Instr("vscalar", f"neg_{r}", (a,), "Muls", "-1.0f", space=sp))
        emit(Instr("vscalar", r, (f"neg_{r}",), "Adds", s, space=sp))
    else:  # div and max/min with a scalar: broadcast it first (x / s is not x * (1/s) in IEEE)
        emit(Instr("vdup", f"dup_{r}", arg=s, space=sp))
        pair = (a, f"dup_{r}") if vec_first else (f"dup_{r}", a)
        emit(Instr("vbin", r, pair, VECTOR_BINARY[op], space=sp))


def _dtype_name(dt) -> str:
    """IR dtype name ("f32", ...) or dtype variable name ("T", "U")."""
    return getattr(dt, "value", None) if isinstance(getattr(dt, "value", None), str) else getattr(dt, "name", str(dt))


def _float_literal(v) -> str:
    f = float(v)
    r = repr(f)
    if "inf" in r or "nan" in r:
        raise IRError(f"row kernel: non-finite constant {v}")
    if "e" not in r and "." not in r:
        r += ".0"
    return r + "f"


def _schedule(instrs: list[Instr]) -> list[Instr]:
    """Greedy list scheduling: among the ready instructions take the lowest level first (a row sum's
    users wait for it anyway), then the one that frees the most row temporaries and allocates the fewest,
    then graph order. Keeps the number of live fp32 rows (UB) small; any order it returns is topological."""
    defs = {i.dst: k for k, i in enumerate(instrs) if i.dst}
    deps = [{defs[x] for x in _names_in(i) if x in defs and defs[x] != k} for k, i in enumerate(instrs)]
    users: dict[int, set[int]] = {}
    for k, d in enumerate(deps):
        for j in d:
            users.setdefault(j, set()).add(k)
    row_vals = {k for k, i in enumerate(instrs) if i.space == "row" and i.kind not in ("store", "rsum", "acc")}
    done: set[int] = set()
    out: list[Instr] = []
    while len(done) < len(instrs):
        best, best_key = None, None
        for k, i in enumerate(instrs):
            if k in done or not deps[k] <= done:
                continue
            frees = sum(1 for j in deps[k] if j in row_vals and users.get(j, set()) - done == {k})
            allocs = 1 if k in row_vals and not frees else 0
            key = (i.level, allocs - frees, k)
            if best_key is None or key < best_key:
                best, best_key = k, key
        done.add(best)
        out.append(instrs[best])
    return out


def _names_in(i: Instr) -> list[str]:
    import re

    names = list(i.srcs)
    if i.kind in ("sexpr", "vscalar", "vdup"):
        names += re.findall(r"[A-Za-z_][A-Za-z0-9_]*", i.arg)
    return names


def _assign_levels(p: RowProgram) -> None:
    """Level of every instruction: 0 unless it uses a row sum (directly or through scalars/temporaries);
    then 1 + the level of that row sum. p.levels = number of distinct row-sum levels."""
    level: dict[str, int] = {}
    out = []
    for i in p.instrs:
        lv = 0
        for x in _names_in(i):
            if x in level:
                lv = max(lv, level[x])
        if i.kind == "rsum":
            level[i.dst] = lv + 1
        elif i.dst:
            level[i.dst] = lv
        out.append(Instr(i.kind, i.dst, i.srcs, i.op, i.arg, i.gm, i.space, lv))
    p.instrs = out
    p.levels = len({i.level for i in out if i.kind == "rsum"})


def per_row(i: Instr) -> bool:
    """Whether `i` runs once per row (row and stat instructions, and accumulating a row into a sum)."""
    return i.space in ("row", "stat") or i.kind == "acc"


def _assign_phases(p: RowProgram) -> None:
    """Which COL_SPLIT phases execute each row/stat instruction. Phase L (a row-sum level) runs the
    ancestors of the level-L row sums; phase -1 (final) the ancestors of every store and accumulate. A
    row sum of a lower level than the phase is not recomputed: its total is read back instead."""
    instrs = p.instrs
    defs = {i.dst: k for k, i in enumerate(instrs) if i.dst}
    member: dict[int, set[int]] = {k: set() for k in range(len(instrs))}
    levels = sorted({i.level for i in instrs if i.kind == "rsum"})
    for phase in levels + [-1]:
        if phase == -1:
            roots = [k for k, i in enumerate(instrs) if i.kind in ("acc", "store", "sstore")]
        else:
            roots = [k for k, i in enumerate(instrs) if i.kind == "rsum" and i.level == phase]
        stack, seen = list(roots), set()
        while stack:
            k = stack.pop()
            if k in seen or not per_row(instrs[k]):
                continue
            seen.add(k)
            member[k].add(phase)
            i = instrs[k]
            if i.kind == "rsum" and (phase == -1 or i.level < phase):
                continue   # read back as a total
            stack += [defs[x] for x in _names_in(i) if x in defs]
    p.instrs = [Instr(i.kind, i.dst, i.srcs, i.op, i.arg, i.gm, i.space, i.level, tuple(sorted(member[k])))
                for k, i in enumerate(instrs)]


def _allocate(p: RowProgram) -> None:
    """Name every UB operand: row values -> w<k> by liveness (in place when an operand dies at this
    instruction), brow/col values and accumulators -> their own buffers. Rewrites p.instrs."""
    row_kinds = ("cast_in", "vbin", "vscalar", "vunary", "vdup", "vgather")
    last: dict[str, int] = {}
    for k, i in enumerate(p.instrs):
        for x in _names_in(i):
            last[x] = k
    where: dict[str, str] = {}
    holder: dict[str, str] = {}   # buffer -> live value
    nxt = 0
    out = []
    for k, i in enumerate(p.instrs):
        srcs = tuple(where.get(x, x) for x in i.srcs)
        dst = i.dst
        if i.space == "row" and i.kind in row_kinds:
            dying = [x for x in i.srcs if x in where and last.get(x) == k]
            if dying and i.kind not in NO_INPLACE:
                dst = where[dying[0]]
            else:
                free = sorted(int(b[1:]) for b in (f"w{j}" for j in range(nxt)) if b not in holder)
                if free:
                    dst = f"w{free[0]}"
                else:
                    dst, nxt = f"w{nxt}", nxt + 1
            where[i.dst] = dst
            holder[dst] = i.dst
        elif i.space in ("brow", "col") and i.kind in ("load", *row_kinds, "acc"):
            bufs = p.brow if i.space == "brow" else p.col
            if i.dst not in bufs:
                bufs.append(i.dst)
        out.append(Instr(i.kind, dst, srcs, i.op, i.arg, i.gm, i.space, i.level, i.phases))
        for x in _names_in(i):
            b = where.get(x)
            if b and last.get(x) == k and holder.get(b) == x:
                del holder[b]
    p.instrs = out
    p.row_temps = nxt


def _rename(text: str, where: dict) -> str:
    import re

    if not text:
        return text
    return re.sub(r"[A-Za-z_][A-Za-z0-9_]*", lambda m: where.get(m.group(0), m.group(0)), text)


def lower(g: Graph, layout: RowLayout = RowLayout()) -> RowProgram:
    """Lower an optimized tensor-IR graph (one specialisation, opgen.passes.pipeline.optimize) to a row
    program. Raises IRError naming the value when an op or shape has no row lowering."""
    p = _Lowering(g, layout).run()
    verify_program(p)
    return p


def verify_program(p: RowProgram) -> None:
    """Def-before-use of every operand; row temporaries inside 0..row_temps; every accumulator and stored
    tensor known. Raises IRError naming the instruction."""
    defined = {t.name for t in p.gm if t.role == "in"} | set(p.consts)
    for k, i in enumerate(p.instrs):
        for x in i.srcs:
            if x not in defined:
                raise IRError(f"row program {p.name}: instruction {k} ({i.kind} {i.dst}) uses {x} before it is defined")
        if i.dst.startswith("w") and i.dst[1:].isdigit() and int(i.dst[1:]) >= p.row_temps:
            raise IRError(f"row program {p.name}: {i.dst} outside the {p.row_temps} row temporaries")
        if i.kind in NO_INPLACE and i.dst in i.srcs:
            raise IRError(f"row program {p.name}: instruction {k} ({i.kind} {i.dst}) overwrites its own source")
        if i.kind in ("store", "sstore", "load", "cast_in", "sload"):
            p.tensor(i.gm)
        if i.dst:
            defined.add(i.dst)
    for a in p.accs:
        if a not in defined:
            raise IRError(f"row program {p.name}: accumulator {a} is never accumulated")


def print_program(p: RowProgram) -> str:
    """Canonical text of a row program (ends with a newline)."""
    lines = [f"rowprogram {p.name} (row temps {p.row_temps}, levels {p.levels}) {{"]
    for t in p.gm:
        lines.append(f"  gm {t.role} {t.name}: {t.dtype} {t.space}")
    if p.brow:
        lines.append(f"  brow {', '.join(p.brow)}")
    if p.col:
        lines.append(f"  col {', '.join(p.col)}")
    if p.consts:
        lines.append(f"  const {', '.join(p.consts)}")
    for a, (sp, name, rm) in p.accs.items():
        lines.append(f"  acc {a} -> {name} ({sp}, {rm})")
    for i in p.instrs:
        body = _instr_text(i)
        ph = ",".join("F" if x == -1 else f"P{x}" for x in i.phases)
        lines.append(f"  [{i.space} L{i.level}{' ' + ph if ph else ''}] {body}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _instr_text(i: Instr) -> str:
    """One instruction as text (print_program)."""
    a = i.srcs[0] if i.srcs else ""
    if i.kind in ("load", "cast_in", "sload"):
        return f"{i.dst} = {i.kind}({i.gm})"
    if i.kind == "vbin":
        return f"{i.dst} = {i.op}({', '.join(i.srcs)})"
    if i.kind == "vscalar":
        return f"{i.dst} = {i.op}({a}, {i.arg})"
    if i.kind == "vunary":
        return f"{i.dst} = {i.op}({a})"
    if i.kind == "vdup":
        return f"{i.dst} = Duplicate({i.arg})"
    if i.kind == "vgather":
        return f"{i.dst} = Gather({a}, {i.arg})"
    if i.kind == "rsum":
        return f"{i.dst} = ReduceSum({a})"
    if i.kind == "sexpr":
        return f"{i.dst} = {i.arg}"
    if i.kind == "acc":
        return f"{i.dst} += {a}"
    return f"{i.kind} {i.gm} <- {a} ({i.arg})"
