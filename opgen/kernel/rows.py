"""Lowering of the rows family: an optimized vector graph on its anchor domain -> a row program.

`lower(graph, layout)` turns one specialisation into a `RowProgram` (opgen.kernel.rowprog: AscendC-level
instructions on fp32 UB rows) over the layout's spaces (opgen.kernel.rowlayout): operator inputs are loaded
through their GM views where a computation first uses them (`cast_in` for rows, `load` for batch and column
rows, `sload` for per-row statistics), elementwise ops become count-form vector instructions or scalar
expressions, reductions over the row axis become row sums / row maxima (`rsum`, `rmax`: a per-row scalar with a
*level*), sums over the leading axes become per-batch or per-kernel accumulators (`acc`), and every output is
stored through its own view (a permuted output is a strided store, the two halves of a concat along the row axis
two stores at column offsets). What the family cannot express faithfully (rounding an intermediate, a max over
rows, a permute of a computed value) raises `Unsupported` naming the value and its spec line.

Reference facts: docs/reference/ascendc.md §1.9 (count-form vector instructions, in-place operands, Cast round modes,
ReduceSum / ReduceMax), §1.8 (DataCopyPad); the spaces and views: opgen.kernel.rowlayout.
"""

from __future__ import annotations

import dataclasses
import itertools

from opgen.dsl.keys import attr_key, form_key, free_form_inputs
from opgen.errors import IRError
from opgen.ir.core import Graph
from opgen.ir.dims import Lit, as_dim, shape_str
from opgen.ir.dtypes import DType, dtype_name
from opgen.ir.locs import stamp
from opgen.ir.printer import canonical_values
from opgen.kernel import kir, rowalg, rowprog
from opgen.kernel.headlower import full_keys, lower_spec
from opgen.kernel.rowmerge import (SEGMENT_OP, math_as_steps, merge_blocker, merge_trailing, min_as_max, prepare,
                                   regroup_blocker)
from opgen.kernel.rowlayout import (Chains, PickedView, PiecewiseView, RowLayout, SegView, Unsupported, analyse,
                                    keys_of, store_view, view_of)
from opgen.names import cpp_name
from opgen.kernel.rowguard import runtime_guards, specialise
from opgen.kernel.rowpresence import join_copies, merge_presences
from opgen.kernel.rowprog import ROUND_MODES, GmTensor, Instr, RowProgram, lower_elementwise

ELEMENTWISE = set(rowprog.VECTOR_BINARY) | set(rowprog.VECTOR_UNARY) | {"neg"}
_CPP_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
"""The C++ float comparison of each comparison op of the IR (per-row values on the scalar unit: stat_compare)."""
_CONSTRUCT = {"lt": "a comparison `<`", "le": "a comparison `<=`", "gt": "a comparison `>`", "ge": "a comparison `>=`",
              "eq": "a comparison `.eq`", "ne": "a comparison `.ne`", "and": "a mask `&`", "or": "a mask `|`",
              "not": "a mask `~`", "select": "`b.where`", "iota": "`b.iota`",
              "gather": "a gather by index", "scatter_add": "a scatter-add by index", "matmul": "a matmul",
              "dimval": "a dim used as a number"}
"""The spec construct each op the rows family refuses comes from, named in its refusal."""
READS = ("f32", "f16", "bf16", "i32", "i16", "i64", "bool", "u8", "i8")
"""Dtypes the rows kernel reads (Cast to fp32 in UB: exact, int32 / int64 rounded to nearest even; the byte dtypes
through half; opgen.kernel.rowclass.CTYPE)."""
WRITES = ("f32", "f16", "bf16", "i32", "i16", "i64", "i8", "u8")
"""Dtypes the rows kernel writes (Cast from fp32 with the output's round mode; int8 / uint8 through half with CAST_ODD
first, as the interpreter's device mode: docs/reference/ascendc.md §1.12)."""
INDEX_DTYPES = ("i32", "i64")
"""Integer dtypes the rows kernel reads as per-row indices (one per row: a gather or scatter-add along the row, a
comparison with `b.iota`): loaded as int32 / int64 and converted to fp32 on the scalar unit, exact below 2^24; an
index of 2^24 or more converts to a float of at least 2^24 and so still falls outside any row (rows are shorter)."""
SPACE_WORDS = {"row": "rows", "stat": "per-row statistics", "brow": "per-batch rows", "col": "column rows",
               "scalar": "scalars"}


class _Lowering:
    """One pass over the graph in node order (see module docstring); `run` returns the unverified program."""

    def __init__(self, g: Graph, layout: RowLayout, half_vars: dict | None = None):
        self.g, self.lay = g, layout
        self.half_vars = half_vars or {}   # dtype variables binding fp16 / bf16 only -> bindings (half_variables)
        self.ch = Chains(g)
        self.vals = g.values()
        self.prod = g.producers()
        self.p = RowProgram(g.name, layout)
        self.alias: dict[str, str] = {}
        self.space: dict[str, str] = {}
        self.scalar_text: dict[str, str] = {}
        self.loaded: dict[str, str] = {}
        self.by_view: dict[tuple, str] = {}      # (tensor, view, space) -> the load-chain value loaded for it
        self.taken = {pr.value.name for pr in g.params} | {o for o, _ in g.outputs}
        self.used_ops: set[str] = set()
        self.sums: dict[str, str] = {}           # value -> the sum over rows (acc) it is (or is a view of)
        self.masks: set[str] = set()             # values that are bit masks of a comparison (rowprog.MASK_KINDS)
        self.stat_bools: set[str] = set()        # per-row comparisons as 0 / 1 numbers on the scalar unit
        self.post: dict[str, tuple] = {}         # value -> the finishing instructions turning its acc into it
        self.kind: dict[str, str] = {}           # acc -> the reduce kind it accumulates (sum, mean, max)
        self.totals: set[str] = set()            # accs reduced over their columns too (to one element)
        self.iotas: set[str] = set()             # column values that are `b.iota` of the row axis (exact in fp32)
        self.whole: set[str] = set()             # per-row integer values (indices, their 0 / 1 comparisons)
        self.iota_col: str | None = None         # the one column row of lane indices a gather / scatter compares
        self.segs: dict[str, str] = {}           # per-channel operands of regrouped rows -> their GM operand (seg)
        self.btext: set[str] = set()             # per-batch values: scalar texts over complete batch totals
        self.bnames: dict[str, tuple] = {}       # per-batch float member -> (the IR value, its spec line)
        self.passes = None                       # kernel-level algebra run by `run` (lower)

    def err(self, v: str, why: str) -> Unsupported:
        """Unsupported naming value v and its spec line."""
        n = self.prod.get(v)
        return Unsupported(v, n.loc if n is not None else "", why)

    def operand(self, v: str) -> str:
        """The buffer-level name of value v (rowprog.lower_elementwise protocol)."""
        return self.alias.get(v, v)

    def _gm_name(self, tensor: str) -> str:
        """A GM operand name for a new view of `tensor`: the tensor's own name first, then tensor_view<k>."""
        if tensor not in self.used_ops:
            self.used_ops.add(tensor)
            return tensor
        k = 1
        while f"{tensor}_view{k}" in self.used_ops or f"{tensor}_view{k}" in self.taken:
            k += 1
        name = f"{tensor}_view{k}"
        self.used_ops.add(name)
        return name

    # ---------------------------------------------------------------- driver
    def run(self) -> RowProgram:
        return finish(self.build())

    def build(self) -> RowProgram:
        """The program as lowered and simplified by the kernel-level algebra: single-assignment names, graph order, no
        levels, schedule or buffers yet (`finish` gives them)."""
        for pr in self.g.params:
            v = pr.value
            if pr.kind == "attr":
                self.space[v.name] = "scalar"
                self.scalar_text[v.name] = f"attr_{v.name}"
        self._int_attrs_compared_only()
        for n in self.g.nodes:
            r = n.result.name
            if self.ch.is_load(r) or r in self.ch.store_only:
                continue
            start = len(self.p.instrs)
            self.node(n)
            stamp(self.p.instrs, start, n.loc)   # what this node's lowering appended (loads keep their own line)
        for name, v in self.g.outputs:
            start = len(self.p.instrs)
            self.output(name, v)
            n = self.prod.get(v)
            stamp(self.p.instrs, start, n.loc if n is not None else "")   # stores: the line producing the output
        p = self.p
        order = {n: k for k, n in enumerate([pr.value.name for pr in self.g.params] + [o for o, _ in self.g.outputs])}
        p.gm.sort(key=lambda t: (t.role != "in", order.get(t.gm, len(order)), t.name))
        rowalg.optimize(p, self.passes)   # kernel-level algebra (opgen.kernel.rowalg.ROW_PASSES)
        defined = {i.dst for i in p.instrs}
        p.late = [v for v in p.late if v in defined]   # merged or dropped by the algebra
        p.bnames = self.bnames
        return p

    # ---------------------------------------------------------------- operands
    def use(self, x: str, by: str | None = None) -> str:
        """Value x as an operand of the computation of value `by` (None: a store of x, or a view of x): loads a
        load-chain value on first use. A computation reading a column reduction over rows (complete only after the
        last row) makes the kernel run two passes over the rows (RowProgram.acc_reads: the reduction is finished,
        exchanged and read back between them). Raises Unsupported for any other reduction over rows read by a
        computation (per-batch, over every axis, or finished two ways)."""
        if self.ch.is_load(x):
            try:
                return self.load(x)
            except Unsupported as e:   # a bare input has no spec line of its own: cite the line reading it
                if e.loc or by is None or self.prod.get(by) is None:
                    raise
                raise self.err(by, f"{e.why}") from None
        if x not in self.space:
            raise self.err(x, "is used before the rows lowering defined it")
        if by is not None and x in self.sums and self._second_pass(x, by):
            return self.operand(x)
        if by is not None and x in self.sums:
            s = self.sums[x]
            n = self.prod.get(s)
            where = f" ({n.loc.rsplit('/', 1)[-1]})" if n is not None and n.loc else ""
            kind = self.kind.get(s, "sum")
            if s in self.totals:
                rule = (f"the rows family reads back only reductions over all leading axes (to [{self.lay.row}]) or "
                        f"over a batch's rows in a second pass over the rows, not a reduction over every axis")
            else:
                rule = (f"the rows family reads it back in a second pass over the rows into per-row arithmetic only, "
                        f"not into a {'per-batch row' if self.space.get(s) == 'brow' else 'column'} value (apply it to the rows first: "
                        f"x * s * g, not x * (s * g))")
            raise self.err(by, f"reads the {kind} over rows %{s}{where} while the rows are still being reduced; "
                           f"{rule}")
        return self.operand(x)

    def load(self, x: str) -> str:
        """Materialise load-chain value x (an operator input seen through casts and views) in UB."""
        if x in self.loaded:
            return self.loaded[x]
        shape = self.vals[x].type.shape
        root = self.ch.root[x]
        try:
            sp = self.lay.space(shape, f"input {root}")
        except IRError as e:
            full = self.lay.axes + (self.lay.row,)
            ks = keys_of(shape)
            if self.lay.row in ks and _subsequence(ks, full):
                sp = "row"    # broadcast over leading axes that are not a batch prefix: a row view with stride 0
            else:
                raise self.err(x, str(e)) from None
        if sp == "scalar":   # one value for every row: read once per core by the scalar unit into a member
            return self._load_one(x, root)
        dt = dtype_name(self.vals[root].type.dtype)
        index = sp == "stat" and dt in INDEX_DTYPES   # a per-row index (INDEX_DTYPES)
        if isinstance(self.vals[root].type.dtype, DType) and dt not in READS and not index:   # variables: _check_dtype_rows
            raise self.err(x, f"input {root} has dtype {dt}; the rows family reads {', '.join(READS)} inputs")
        try:
            view = view_of(self.ch, x, self.lay, self.vals)
        except IRError as e:
            raise self.err(x, f"input {root}: {e}") from None
        if isinstance(view, PickedView):   # whole rows picked along a leading axis by an index input
            if sp != "row":
                raise self.err(x, f"rows of input {root} picked by the index {view.index.tensor} read as "
                               f"{SPACE_WORDS[sp]}; the rows family reads picked rows as rows of its domain "
                               f"[{', '.join(self.lay.axes + (self.lay.row,))}] (one index per row)")
            if view.index_dtype not in INDEX_DTYPES:
                raise self.err(x, f"the index {view.index.tensor} has dtype {view.index_dtype}; the rows family "
                               f"picks rows by {' or '.join(INDEX_DTYPES)} indices")
        if isinstance(view, PiecewiseView):
            names = [pc.view.tensor for pc in view.pieces]
            if sp != "row":
                raise self.err(x, f"a concat of inputs {', '.join(names)} read as {SPACE_WORDS[sp]}; the rows family "
                               f"concatenates inputs only as rows of its domain")
            dts = [dtype_name(self.vals[t].type.dtype) for t in names]
            if len(set(dts)) > 1:
                raise self.err(x, f"a concat of inputs of different dtypes ("
                               f"{', '.join(f'{t}: {d}' for t, d in zip(names, dts))}); the rows family reads the "
                               f"rows of a concat with one dtype (cast them in a separate operator)")
        if sp == "stat" and dt not in ("f32", "f16", "bf16") and isinstance(self.vals[root].type.dtype, DType) \
                and not index:
            raise self.err(x, f"per-row statistic input {root} has dtype {dt}; the rows family reads per-row "
                           f"statistics as f32, f16 or bf16 and per-row indices as {' or '.join(INDEX_DTYPES)}")
        made = self.prod.get(x)
        while made is not None:   # the chain back to the input: a cast with a mode other than rint
            mode = made.attr("round") if made.op == "cast" else None
            if mode not in (None, "none", "rint"):   # refused for integer rows by _check_dtype_rows
                self.p.int_cast_modes[root] = (mode, made.loc)
            made = self.prod.get(made.inputs[0]) if made.inputs else None
        same = self.by_view.get((root, view, sp))
        if same is not None:   # another chain to the same rows of the same tensor (a reshape of it): one load
            self.space[x] = sp
            self.loaded[x] = self.loaded[same]
            if same in self.alias:
                self.alias[x] = self.alias[same]
            else:
                self.alias[x] = self.loaded[same]
            return self.loaded[x]
        self.by_view[(root, view, sp)] = x
        start = len(self.p.instrs)
        got = self._load_new(x, root, view, sp, dt)
        n = self.prod.get(x)   # the cast / view that made the load-chain value (none for a bare input: its user's)
        stamp(self.p.instrs, start, n.loc if n is not None else "")
        return got

    def _load_one(self, x: str, root: str) -> str:
        """Load-chain value x of an input holding one value (0-d or [1]: a loss gradient's dout, a per-tensor scale):
        a float member `one_<operand>_` that Init sets from GM element 0 on the scalar unit (kir.FLoad: fp32 exactly
        from f32, f16, bf16, i8, u8 and i16, from i32 exactly below 2^24), used as the scalar operand of Muls / Adds
        like a float attribute (RowProgram.gm_scalars). Raises Unsupported for i64 and bool."""
        dt = dtype_name(self.vals[root].type.dtype)
        if isinstance(self.vals[root].type.dtype, DType) and dt not in ("f32", "f16", "bf16", "i8", "u8", "i16",
                                                                       "i32"):
            raise self.err(x, f"input {root} holds one value of dtype {dt}; the rows family reads a single-value "
                              f"input of f32, f16, bf16, i8, u8, i16 or i32")
        key = ("one", root)
        if key not in self.by_view:
            name = self._gm_name(root)
            self.p.gm.append(GmTensor(name, "in", "one", dt, None, root))
            self.p.gm_scalars.append((f"one_{name}_", name))
            self.by_view[key] = f"one_{name}_"
        self.space[x] = "scalar"
        self.scalar_text[x] = self.by_view[key]
        self.loaded[x] = x
        return x

    def _load_new(self, x: str, root: str, view, sp: str, dt: str) -> str:
        """Append the load of load-chain value x (first read of `view` of input `root` in space sp)."""
        name = self._gm_name(root)
        self.p.gm.append(GmTensor(name, "in", sp, dt, view, root))
        self.space[x] = sp
        if sp == "row" and dt in rowprog.BYTE_DTYPES:   # no byte -> float Cast: through a half temporary
            self.p.instrs.append(Instr("cast_in", f"h_{x}", gm=name, space="row", op="half"))
            self.p.instrs.append(Instr("vwiden", x, (f"h_{x}",), space="row"))
            self.loaded[x] = x
        elif sp == "row":
            self.p.instrs.append(Instr("cast_in", x, gm=name, space="row"))
            self.loaded[x] = x
        elif dt in rowprog.BYTE_DTYPES and sp not in ("brow", "col"):
            raise self.err(x, f"input {root} of dtype {dt} read as {SPACE_WORDS[sp]}; the rows family reads byte "
                           f"tensors as rows, column rows or batch rows")
        elif sp in ("brow", "col"):
            if sp == "brow" and not _batch_flat(view, self.lay):
                raise self.err(x, f"input {root}: its batch rows are not laid out in batch order")
            if dt in rowprog.BYTE_DTYPES:   # no byte -> float Cast: the bytes to halves, then halves to fp32
                self.p.instrs.append(Instr("load", f"h_{x}", gm=name, space=sp, op="half"))
                self.p.instrs.append(Instr("vwiden", x, (f"h_{x}",), space=sp))
            else:
                self.p.instrs.append(Instr("load", x, gm=name, space=sp))
            self.loaded[x] = x
        else:   # stat: contiguous f32 statistics are copied in a block, others read row by row (gathered_stat)
            self.p.instrs.append(Instr("sload", f"s_{name}", gm=name, space="stat"))
            self.loaded[x] = f"s_{name}"
            self.alias[x] = f"s_{name}"
            if dt in INDEX_DTYPES:
                self.whole.add(x)
        return self.loaded[x]

    # ---------------------------------------------------------------- nodes
    def node(self, n) -> None:
        r, op = n.result.name, n.op
        if op == "const":
            if keys_of(n.result.type.shape):
                raise self.err(r, "a constant tensor inside a row; use a Python scalar")
            self.space[r] = "scalar"
            self.scalar_text[r] = rowprog._float_literal(n.attr("value"))
            return
        if op == "dimval":   # a dim's value as a float (a mean's adjoint, `x.sum(1) / M`): tiling data
            self.space[r] = "scalar"
            self.scalar_text[r] = self.dimval(r, as_dim(n.attr("n")), n.attr("dtype"))
            return
        if op in ("reshape", "broadcast"):
            x = n.inputs[0]
            src = self.use(x)
            if x in self.sums:
                self.sums[r], self.post[r] = self.sums[x], self.post[x]
            if op == "reshape" and self.space.get(x) != "scalar":   # one value broadcast: the same in any shape
                try:
                    sp = self.lay.space(n.result.type.shape)
                except IRError as e:
                    raise self.err(r, str(e)) from None
                if keys_of(n.result.type.shape) != keys_of(self.vals[x].type.shape):
                    raise self.err(r, "a reshape that regroups the axes of a computed value")
                if sp != self.space[x] and self.sums.get(x) not in self.totals and x not in self.btext:
                    raise self.err(r, f"a reshape from a {self.space[x]} to a {sp} value")   # a total: any 1s
            self.space[r] = self.space[x]
            self.alias[r] = src
            if x in self.scalar_text:
                self.scalar_text[r] = self.scalar_text[x]
            if x in self.btext:
                self.btext.add(r)
            if x in self.masks:
                self.masks.add(r)
            if x in self.iotas:
                self.iotas.add(r)
            return
        if op == SEGMENT_OP:
            self.segment(n)
            return
        if op in ELEMENTWISE and any(x in self.segs for x in n.inputs):
            self.seg_apply(n)
            return
        if op == "iota":
            self.iota(n)
            return
        if op == "gather":
            self.gather(n)
            return
        if op == "scatter_add":
            self.scatter_add(n)
            return
        if op == "cast" and n.inputs[0] in self.whole:   # a per-row integer as a number or another integer
            x = n.inputs[0]
            self.use(x, r)
            self.space[r], self.alias[r] = self.space[x], self.operand(x)
            if x in self.scalar_text:
                self.scalar_text[r] = self.scalar_text[x]
            self.whole.add(r)
            return
        if op == "cast" and n.inputs[0] in self.masks:
            self.mask_to_number(n)
            return
        if op == "cast":
            x = n.inputs[0]
            src = self.use(x)
            if x in self.sums:
                self.sums[r], self.post[r] = self.sums[x], self.post[x]
            to = dtype_name(n.attr("to"))
            if to in INDEX_DTYPES and self.space.get(x) == "stat" and x in self.whole:
                self.whole.add(r)   # an integer-valued per-row value (an index, a 0 / 1 comparison) stays exact
            elif to != "f32":
                self.round_trip(n, x, src, to)
                return
            self.space[r] = self.space[x]
            self.alias[r] = src
            if x in self.scalar_text:
                self.scalar_text[r] = self.scalar_text[x]
            if x in self.btext:
                self.btext.add(r)
            if x in self.iotas:
                self.iotas.add(r)
            return
        if op == "reduce":
            self.reduce(n)
            return
        if op in rowprog.CMP_OPS:
            self.compare(n)
            return
        if op == "select":
            self.select(n)
            return
        if op in ("and", "or", "not"):
            self.logic(n)
            return
        if op in ELEMENTWISE and any(x in self.sums for x in n.inputs) and self._finishing(n):
            self.finish(n)
            return
        if op in ELEMENTWISE:
            bins = {x: self._batch_input(x) for x in n.inputs if x not in self.btext and self.ch.is_load(x)}
            bins = {x: t for x, t in bins.items() if t is not None}
            per_batch = any(x in self.btext for x in n.inputs) and all(
                x in bins or x in self.btext or self.space.get(x) == "scalar" for x in n.inputs)
            for x in n.inputs:   # loads the operands an input chain ends in (lower_elementwise reads their names)
                if not (per_batch and x in bins):
                    self.use(x, r)
            try:
                sp = self.lay.space(n.result.type.shape)
            except IRError as e:
                raise self.err(r, str(e)) from None
            if per_batch:
                sp = "scalar"   # arithmetic on per-batch totals alone: a per-batch value (RowProgram.btotals)
            elif sp == "stat" and op in rowprog.VECTOR_ONLY:
                sp = self._broadcast_space(r) or sp   # a per-row exp / log only read broadcast: taken on the row
            self.space[r] = sp
            saved = {x: (self.space.get(x), self.scalar_text.get(x)) for x in n.inputs if per_batch and x in bins}
            for x in saved:   # a per-batch input read once per batch: its member, for this computation only
                self.space[x], self.scalar_text[x] = "scalar", self._batch_input(x, load=True)
            try:
                lower_elementwise(self, r, sp, op, list(n.inputs))
            except IRError as e:
                raise self.err(r, str(e).removeprefix("row kernel: ")) from None
            finally:
                for x, (sp0, tx0) in saved.items():
                    for d, v in ((self.space, sp0), (self.scalar_text, tx0)):
                        if v is None:
                            d.pop(x, None)
                        else:
                            d[x] = v
            if per_batch:
                self.scalar_text[r] = self._batch_value(self.scalar_text[r], "expr")
                self.btext.add(r)
                self.bnames[self.scalar_text[r]] = (r, n.loc)
            if sp == "col" and any(x in self.sums or x in self.p.late for x in n.inputs):
                self.p.late.append(r)   # a column value of complete reductions: computed after the exchange
            if op in ("mul", "add", "sub", "neg") and sp == "stat" and all(x in self.whole or self._int_const(x)
                                                                          for x in n.inputs):
                self.whole.add(r)   # integer arithmetic on indices (exact in fp32 below 2^24)
            return
        what = _CONSTRUCT.get(op, f"op {op}")
        raise self.err(r, f"{what}: the rows family does not lower it yet (`opgen interpret` runs it)")

    def _broadcast_space(self, r: str) -> str | None:
        """The vector space (rowprog.VECTOR_SPACES) into which every reader of per-row value r broadcasts it -- each
        reader, through reshapes and broadcasts, an elementwise op whose result is a vector value of that one space
        -- or None (r is an output, a reader keeps it per row, or the readers' spaces differ). A per-row exp or log,
        which the scalar unit has no form of (rowprog.VECTOR_ONLY), is then taken on the value broadcast to the
        row (a Duplicate and the vector instruction: the same lanes, docs/design.md "Per-row values the scalar unit
        cannot compute"), as a spec that broadcasts it first would be lowered."""
        spaces: set = set()
        todo = [r]
        while todo:
            x = todo.pop()
            readers = [m for m in self.g.nodes if x in m.inputs]
            if not readers or any(v == x for _, v in self.g.outputs):
                return None
            for m in readers:
                if m.op in ("reshape", "broadcast"):
                    todo.append(m.result.name)
                    continue
                if m.op not in ELEMENTWISE:
                    return None
                try:
                    sp = self.lay.space(m.result.type.shape)
                except IRError:
                    return None
                if sp not in rowprog.VECTOR_SPACES:
                    return None
                spaces.add(sp)
        return spaces.pop() if len(spaces) == 1 else None

    def segment(self, n) -> None:
        """A per-channel operand [..., C, 1] of a regrouped row (rowmerge.SEGMENT_OP): not loaded; a GM operand of
        space "seg" whose SegView gives, for anchor row (a_1..a_k), where its C // G values for that row start (the
        row's group coordinate g times C // G channels) and their stride; `vseg` reads them one per segment of L
        columns. Raises Unsupported when the operand is computed (only an operator input, seen through casts and
        views, is read per segment)."""
        r, x = n.result.name, n.inputs[0]
        c, grp, ln = n.attr("channels"), n.attr("groups"), n.attr("seglen")
        if not self.ch.is_load(x):
            raise self.err(r, f"a per-channel value %{x} of [{', '.join(str(d) for d in self.vals[x].type.shape)}] "
                           f"computed in the kernel, applied to rows regrouped as {grp} groups of {c} // {grp} "
                           f"channels; the rows family reads per-channel operands from operator inputs only")
        root = self.ch.root[x]
        dt = dtype_name(self.vals[root].type.dtype)
        if isinstance(self.vals[root].type.dtype, DType) and dt not in ("f32", "f16", "bf16"):
            raise self.err(r, f"per-channel input {root} has dtype {dt}; the rows family reads per-channel operands "
                           f"as f32, f16 or bf16")
        if x in self.ch.pieces or x in self.ch.picks:
            raise self.err(r, "a per-channel operand that is a concat of inputs or rows picked by an index; read it "
                           "from one input as it is")
        axes = self.ch.load[x]
        by = {a.key: a for a in axes}
        ckey = keys_of([c])[0]
        if ckey not in by:
            raise self.err(r, f"per-channel input {root} has no channel axis {c}")
        gkey = keys_of([grp])[0]
        strides = []
        for k in self.lay.axes:
            if k == gkey:
                strides.append(as_dim(c) // as_dim(grp) * by[ckey].stride)
            elif k in by:
                strides.append(by[k].stride)
            else:
                strides.append(Lit(0))
        if gkey not in self.lay.axes or any(a.key not in self.lay.axes and a.key != ckey for a in axes):
            raise self.err(r, f"per-channel input {root}: its axes [{', '.join(a.key for a in axes)}] are not the "
                           f"kernel's rows [{', '.join(self.lay.axes)}] with channel axis {c}")
        view = SegView(root, tuple(strides), self.ch.col[x], Lit(1), False, False, as_dim(ln), by[ckey].stride)
        name = self._gm_name(root)
        self.p.gm.append(GmTensor(name, "in", "seg", dt, view, root))
        self.space[r] = "seg"
        self.segs[r] = name

    def seg_apply(self, n) -> None:
        """row * seg, seg * row, row + seg, seg + row, row - seg: `vseg` (per segment of L columns, the row's
        elements times / plus / minus that segment's value: Muls / Adds on the 32-byte-aligned part of the segment,
        the scalar unit on the few elements at its ends; opgen.codegen.kernel). Raises Unsupported for any other
        use of a per-channel operand."""
        r, op = n.result.name, n.op
        a, b = n.inputs if len(n.inputs) == 2 else (n.inputs[0], None)
        seg = a if a in self.segs else b
        other = b if seg == a else a
        if op not in ("mul", "add", "sub") or other is None or other in self.segs or (op == "sub" and seg == a):
            src = self.prod[seg].inputs[0] if seg in self.prod else seg
            raise self.err(r, f"op {op} with the per-channel operand %{src} of regrouped rows; the rows family "
                           f"multiplies, adds or subtracts a per-channel operand (x * w, x + b, x - b) only")
        self.use(other, r)
        try:
            sp = self.lay.space(n.result.type.shape)
        except IRError as e:
            raise self.err(r, str(e)) from None
        if sp != "row" or self.space.get(other) != "row":
            raise self.err(r, f"op {op} of a per-channel operand with a {SPACE_WORDS.get(self.space.get(other), 'value')}"
                           f"; the rows family applies per-channel operands to whole rows")
        kind = {"mul": "Muls", "add": "Adds", "sub": "Subs"}[op]
        self.p.instrs.append(Instr("vseg", r, (self.operand(other),), kind, gm=self.segs[seg], space="row"))
        self.space[r] = "row"

    def _vector_space(self, n, what: str) -> str:
        """The space of node n's result, which must be a vector space (a row of the domain, a batch or column row).
        Raises Unsupported naming `what` otherwise."""
        r = n.result.name
        try:
            sp = self.lay.space(n.result.type.shape)
        except IRError as e:
            raise self.err(r, str(e)) from None
        if sp not in rowprog.VECTOR_SPACES:
            raise self.err(r, f"{what} of {SPACE_WORDS[sp]}: the rows family compares and selects whole rows (a "
                           f"comparison of per-row statistics or scalars has no vector form; compare the row "
                           f"itself)")
        return sp

    def _scalar_of(self, x: str) -> str | None:
        """The C++ float text of operand x when it is a per-row or scalar value, None when it is a row."""
        if self.space[x] in ("stat", "scalar"):
            return self.scalar_text.get(x, self.operand(x))
        return None

    def compare(self, n) -> None:
        """A comparison (< <= > >= .eq .ne) of rows, or of a row and a scalar: a bit mask (Compare / Compares,
        rowprog.MASK_KINDS) that only a select (or a cast to a number) may read."""
        r, (a, b) = n.result.name, n.inputs
        what = _CONSTRUCT[n.op]
        for x in (a, b):
            self.use(x, r)
        if n.op in ("eq", "ne") and self.space[a] in ("stat", "scalar") and self.space[b] in ("stat", "scalar") \
                and all(x in self.whole or self.space[x] == "scalar" for x in (a, b)) \
                and any(x in self.whole for x in (a, b)):
            self.index_compare(n)
            return
        for x in (a, b):
            if x in self.masks:
                raise self.err(r, f"{what} of a mask; compare numbers (a mask as a number: b.where(m, 1.0, 0.0))")
        if {self.space[a], self.space[b]} <= {"stat", "scalar"} and "stat" in (self.space[a], self.space[b]):
            self.stat_compare(n)
            return
        sp = self._vector_space(n, what)
        lanes = a in self.iotas or b in self.iotas   # lane indices are exact: an integer compares exactly with them
        for x in (a, b):   # operands are fp32 in UB: exact for floats and bytes, not for wider integers
            dt = self.vals[x].type.dtype
            if isinstance(dt, DType) and not dt.is_float and dtype_name(dt) not in rowprog.BYTE_DTYPES and not lanes:
                raise self.err(r, f"{what} of a {dtype_name(dt)} value; the rows family compares in fp32, where "
                               f"{dtype_name(dt)} values above 2^24 round (cast the operands to f32 first)")
        mode = rowprog.CMP_OPS[n.op]
        sa, sb = self._scalar_of(a), self._scalar_of(b)
        emit = self.p.instrs.append
        if sa is None and sb is None:
            emit(Instr("vcmp", r, (self.operand(a), self.operand(b)), mode, space=sp))
        elif sb is not None:
            emit(Instr("vcmps", r, (self.operand(a),), mode, sb, space=sp))
        else:
            emit(Instr("vcmps", r, (self.operand(b),), rowprog.CMP_SWAP[mode], sa, space=sp))
        self.space[r] = sp
        self.masks.add(r)

    def stat_compare(self, n) -> None:
        """A comparison of per-row values (or a per-row value and a scalar) on the scalar unit: a 0 / 1 number
        `(a <op> b ? 1.0f : 0.0f)` (C++'s float comparison is IEEE's: false with a NaN operand, as NumPy's), read by
        a per-row `b.where` (select) or as a number (a cast). Operands are fp32 on the scalar unit: an integer
        operand wider than a byte is refused as for rows (values above 2^24 round)."""
        r, (a, b) = n.result.name, n.inputs
        what = _CONSTRUCT[n.op]
        for x in (a, b):
            dt = self.vals[x].type.dtype
            if isinstance(dt, DType) and not dt.is_float and dtype_name(dt) not in rowprog.BYTE_DTYPES \
                    and x not in self.whole:
                raise self.err(r, f"{what} of a {dtype_name(dt)} value; the rows family compares in fp32, where "
                               f"{dtype_name(dt)} values above 2^24 round (cast the operands to f32 first)")
        ta, tb = (self.scalar_text.get(x, self.operand(x)) for x in (a, b))
        self.p.instrs.append(Instr("sexpr", r, arg=f"({ta} {_CPP_CMP[n.op]} {tb} ? 1.0f : 0.0f)", space="stat"))
        self.space[r] = "stat"
        self.whole.add(r)
        self.stat_bools.add(r)

    def _int_attrs_compared_only(self) -> None:
        """Raise Unsupported (the consuming node's value and spec line) when a runtime integer attribute feeds anything
        but `.eq` / `.ne`: the kernel reads it as its value rounded once to fp32, which docs/design.md "Rows family:
        integer attributes" proves exact for those comparisons with a per-row index below 2^24 only; in arithmetic
        (`target + k`) or a cast an int64 attribute at or above 2^24 would be computed otherwise than the
        interpreter's int64."""
        ints = {pr.value.name for pr in self.g.params if pr.kind == "attr"
                and isinstance(pr.value.type.dtype, DType) and dtype_name(pr.value.type.dtype) in INDEX_DTYPES}
        for n in self.g.nodes:
            used = [x for x in n.inputs if x in ints]
            if used and n.op not in ("eq", "ne"):
                raise self.err(n.result.name, f"the int attribute {used[0]} in `{n.op}`: the rows family reads it "
                               f"as fp32, exact only in .eq / .ne with a per-row index (an ignored index); other "
                               f"uses of an int64 attribute are not lowered")

    def _int_const(self, x: str) -> bool:
        """Whether value x is a scalar constant or attribute of an integer dtype."""
        dt = self.vals[x].type.dtype
        return self.space.get(x) == "scalar" and isinstance(dt, DType) and dtype_name(dt) in INDEX_DTYPES

    def index_compare(self, n) -> None:
        """`.eq` / `.ne` of a per-row integer (an index read as fp32, exact below 2^24) and a per-row or scalar value
        (an ignored index): a 0 / 1 number on the scalar unit, ne = min(min(|a - b| * 2^100, 1) * 2^49, 1) and
        eq = 1 - ne. Exact for any fp32 operands: a nonzero difference is at least 2^-149, scaled by powers of two
        (exact) it reaches 1; an infinite or NaN difference gives 1 (the conditional picks 1). It is a number, not a
        mask: `x * m` or a cast of it uses it."""
        r, (a, b) = n.result.name, n.inputs
        ta, tb = (self.scalar_text.get(x, self.operand(x)) for x in (a, b))
        d = f"Std::abs({ta} - {tb}) * 1.2676506002282294e30f"    # 2^100
        m = f"({d} < 1.0f ? {d} : 1.0f) * 562949953421312.0f"     # 2^49
        ne = f"({m} < 1.0f ? {m} : 1.0f)"
        self.p.instrs.append(Instr("sexpr", r, arg=ne if n.op == "ne" else f"1.0f - {ne}", space="stat"))
        self.space[r] = "stat"
        self.whole.add(r)

    def iota(self, n) -> None:
        """`b.iota(n)` along the row axis: a column row of lane indices (CreateVecIndex from the chunk's first column
        c0_, 0 in ROW_SPLIT), fp32, exact below 2^24. Raises Unsupported for an iota of another length."""
        r = n.result.name
        try:
            sp = self.lay.space(n.result.type.shape)
        except IRError:
            sp = None
        if sp != "col":
            raise self.err(r, f"`b.iota({n.attr('n')})`: the rows family numbers the columns of its row axis "
                           f"{self.lay.row} only (`b.iota({self.lay.row})`)")
        self.p.instrs.append(Instr("viota", r, arg="static_cast<float>(c0_)", space="col"))
        self.space[r] = "col"
        self.iotas.add(r)

    def _lane_index(self) -> str:
        """The column row of lane indices shared by the gathers and scatters of the program (made once)."""
        if self.iota_col is None:
            self.iota_col = "lane_index_"
            self.p.instrs.append(Instr("viota", self.iota_col, arg="static_cast<float>(c0_)", space="col"))
            self.space[self.iota_col] = "col"
        return self.iota_col

    def _row_index(self, n, idx: str, what: str) -> str:
        """The checked per-row index of a gather or scatter (node n, index value idx): a `scheck` (Trap() unless
        0 <= index < the row length) whose result the comparison reads. Raises Unsupported unless idx is one
        integer per row."""
        r = n.result.name
        self.use(idx, r)
        dt = self.vals[idx].type.dtype
        if self.space.get(idx) != "stat" or not (isinstance(dt, DType) and dtype_name(dt) in INDEX_DTYPES):
            raise self.err(r, f"{what} by %{idx}: the rows family {what.split()[1]}s along the row axis "
                           f"{self.lay.row} by one {' or '.join(INDEX_DTYPES)} index per row (an index tensor "
                           f"shaped like the rows, [{', '.join(self.lay.axes)}])")
        chk = f"ix_{r}"
        self.p.instrs.append(Instr("scheck", chk, (self.operand(idx),), space="stat"))
        self.space[chk] = "stat"
        return chk

    def gather(self, n) -> None:
        """x[..., idx[...]] along the row axis, one index per row: Trap() unless 0 <= idx < the row length, then the
        row's lanes compared with the index (Compares EQ against the lane indices), the hit lane selected (others
        0) and the row summed (one nonzero lane: exact). x a row or a column row ([row axis] tensor); the result is
        per row. Raises Unsupported for another axis or index shape."""
        r, (x, idx) = n.result.name, n.inputs
        xs = keys_of(self.vals[x].type.shape)
        if n.attr("axis") != len(self.vals[x].type.shape) - 1 or xs[-1:] != (self.lay.row,):
            raise self.err(r, f"a gather along axis {n.attr('axis')} of %{x}: the rows family gathers along its row "
                           f"axis {self.lay.row} (the last axis) only")
        self.use(x, r)
        if self.space[x] not in ("row", "col"):
            raise self.err(r, f"a gather from the {SPACE_WORDS.get(self.space[x], self.space[x])} %{x}; the rows "
                           f"family gathers from rows or column rows")
        chk = self._row_index(n, idx, "a gather")
        emit = self.p.instrs.append
        emit(Instr("vcmps", f"hit_{r}", (self._lane_index(),), "EQ", chk, space="row"))
        emit(Instr("vsels", f"pick_{r}", (f"hit_{r}", self.operand(x)), arg="0.0f", space="row"))
        emit(Instr("rsum", r, (f"pick_{r}",), space="stat"))
        self.space[r] = "stat"

    def scatter_add(self, n) -> None:
        """out[..., idx[...]] += src[...] along the row axis, one index and one value per row (the gradient of a
        gather): Trap() unless 0 <= idx < the row length, then b.where(lane == idx, src, 0) (Compares, Select).
        Raises Unsupported for another axis or index shape."""
        r, (idx, src) = n.result.name, n.inputs
        ks = keys_of(n.result.type.shape)
        if n.attr("axis") != len(n.result.type.shape) - 1 or ks[-1:] != (self.lay.row,):
            raise self.err(r, f"a scatter-add along axis {n.attr('axis')}: the rows family scatters along its row "
                           f"axis {self.lay.row} (the last axis) only")
        chk = self._row_index(n, idx, "a scatter-add")
        self.use(src, r)
        if self.space[src] not in ("stat", "scalar"):
            raise self.err(r, f"a scatter-add of %{src}: the rows family scatters one value per row")
        sp = self._vector_space(n, "a scatter-add")
        emit = self.p.instrs.append
        emit(Instr("vcmps", f"hit_{r}", (self._lane_index(),), "EQ", chk, space=sp))
        self._select_into(r, sp, f"hit_{r}", None, None, self._scalar_of(src), "0.0f")

    def select(self, n) -> None:
        """b.where(mask, a, b) on rows: Select with the mask of a comparison; a scalar second branch is Select's
        scalar form (mask ? row : scalar), a scalar first branch a Duplicate of it."""
        r, (c, a, b) = n.result.name, n.inputs
        for x in (c, a, b):
            self.use(x, r)
        if c in self.stat_bools and {self.space[a], self.space[b]} <= {"stat", "scalar"}:
            # a per-row choice between per-row values: the scalar unit's conditional on the 0 / 1 number
            ta, tb = self._scalar_of(a), self._scalar_of(b)
            tc = self.scalar_text.get(c, self.operand(c))
            self.p.instrs.append(Instr("sexpr", r, arg=f"({tc} != 0.0f ? {ta} : {tb})", space="stat"))
            self.space[r] = "stat"
            return
        mask = self._mask(c, r, self._vector_space(n, "`b.where`"), "`b.where`")
        for x in (a, b):
            if x in self.masks:
                raise self.err(r, "`b.where` choosing between masks; choose between numbers")
        sp = self._vector_space(n, "`b.where`")
        self._select_into(r, sp, mask, a, b)

    def _mask(self, c: str, r: str, sp: str, what: str) -> str:
        """The bit-mask operand of bool value c read by the computation of r: a comparison's (or mask logic's) mask,
        or a bool / integer mask input's rows (read as 0 / 1 numbers) compared with 0 once. Raises Unsupported."""
        if c in self.masks:
            return self.operand(c)
        if c in self.stat_bools:   # a per-row comparison's 0 / 1 number choosing between rows: its row, compared once
            m = f"m_{self.operand(c)}_{sp}"
            if m not in self.masks:
                d = f"dup_{m}"
                self.p.instrs.append(Instr("vdup", d, arg=self.scalar_text.get(c, self.operand(c)), space=sp))
                self.p.instrs.append(Instr("vcmps", m, (d,), "NE", "0.0f", space=sp))
                self.masks.add(m)
            return m
        if self.ch.is_load(c):
            m = f"m_{self.operand(c)}"
            if m not in self.masks:
                self.p.instrs.append(Instr("vcmps", m, (self.operand(c),), "NE", "0.0f", space=sp))
                self.masks.add(m)
            return m
        raise self.err(r, f"{what} over a condition that is not a comparison of rows or a mask input")

    def logic(self, n) -> None:
        """`&`, `|` and `~` of masks: AscendC And / Or / Not on the bit masks as uint16 words (rowprog MASK_KINDS)."""
        r = n.result.name
        what = _CONSTRUCT[n.op]
        for x in n.inputs:
            self.use(x, r)
        sp = self._vector_space(n, what)
        ms = tuple(self._mask(x, r, sp, what) for x in n.inputs)
        self.p.instrs.append(Instr("vlogic", r, ms, {"and": "And", "or": "Or", "not": "Not"}[n.op], space=sp))
        self.space[r] = sp
        self.masks.add(r)

    def _select_into(self, r: str, sp: str, mask: str, a: str | None, b: str | None, sa: str | None = None,
                     sb: str | None = None) -> None:
        """Value r = mask ? a : b, each branch a value name or (a None name) the scalar text sa / sb."""
        emit = self.p.instrs.append
        ta = sa if a is None else self._scalar_of(a)
        tb = sb if b is None else self._scalar_of(b)
        if ta is not None:   # Select's scalar form takes the scalar second: a scalar first branch is broadcast
            emit(Instr("vdup", f"dup_{r}", arg=ta, space=sp))
            va = f"dup_{r}"
        else:
            va = self.operand(a)
        if tb is None:
            emit(Instr("vsel", r, (mask, va, self.operand(b)), space=sp))
        else:
            emit(Instr("vsels", r, (mask, va), arg=tb, space=sp))
        self.space[r] = sp

    def mask_to_number(self, n) -> None:
        """A cast of a comparison's mask to a number: 1.0 where set, 0.0 elsewhere (a Select of a row of ones)."""
        r, x = n.result.name, n.inputs[0]
        self.use(x, r)
        to = dtype_name(n.attr("to"))
        if to != "f32":
            raise self.err(r, f"a cast of a mask to {to}; the rows family computes in fp32 (cast the mask to f32)")
        self._select_into(r, self.space[x], self.operand(x), None, None, "1.0f", "0.0f")

    def dimval(self, r: str, e, dtype) -> str:
        """The C++ fp32 text of dim expression `e` used as a number (value r): a literal, or the extent it is of the
        layout read from tiling data -- the row length (hidden_), the rows (rowNum_), the rows of a batch (seqLen_),
        or one of these times the row length (a product of two fp32 values each exact below 2^24 is rounded once,
        as the interpreter's fp32 of the exact product); any other dim expression is the member dimValue<k>_
        (RowProgram.dim_values: a tiling field of its own, its value converted to fp32 once, as the interpreter's
        fp32 of the dim). Raises Unsupported for a non-f32 dtype or more than rowprog.MAX_DIM_VALUES of them."""
        if dtype != DType.f32:
            raise self.err(r, f"the value of dim {e} as {dtype_name(dtype)}; the rows family reads dims as f32 "
                           f"scalars")
        if isinstance(e, Lit):
            return rowprog._float_literal(e.value)
        lay = self.lay
        h = "static_cast<float>(hidden_)"
        known = [(lay.hidden_extent(), h)]
        if not lay.flat:
            known += [(lay.rows_extent(), "static_cast<float>(rowNum_)"),
                      (lay.rows_extent() * lay.row_extent, f"(static_cast<float>(rowNum_) * {h})")]
            if 0 < lay.split < len(lay.axes):
                known += [(lay.seq_extent(), "static_cast<float>(seqLen_)"),
                          (lay.seq_extent() * lay.row_extent, f"(static_cast<float>(seqLen_) * {h})")]
        for ext, text in known:
            if as_dim(ext) == e:
                return text
        # another dim expression (a leading dim of the rows, a dim of no axis): a tiling field of its own, read into
        # the member dimValue<k>_ (the value the TilingFunc computes from the shapes)
        keys = [str(d) for d in self.p.dim_values]
        if str(e) not in keys:
            if len(keys) >= rowprog.MAX_DIM_VALUES:
                raise self.err(r, f"the value of dim {e}: more than {rowprog.MAX_DIM_VALUES} distinct dim values read as "
                               f"numbers in one kernel")
            self.p.dim_values.append(e)
            keys.append(str(e))
        return f"static_cast<float>(dimValue{keys.index(str(e))}_)"

    def reduce(self, n) -> None:
        r, x = n.result.name, n.inputs[0]
        src = self.use(x, r)
        kind = n.attr("kind")
        if self.space[x] == "stat" and not keys_of(n.result.type.shape) and self.lay.axes and kind in ("sum", "mean"):
            self.stat_total(n, x, kind)
            return
        over_row = keys_of(n.result.type.shape) == self.lay.axes
        if self.space[x] != "row" and not (self.space[x] == "col" and over_row and kind in ("sum", "mean", "max")):
            raise self.err(r, f"a {n.attr('kind')} of the {SPACE_WORDS.get(self.space[x], self.space[x])} %{x}; the "
                           f"rows family reduces row values (a reduction over every axis at once, "
                           f"x.sum((0, 1)) for x.sum(1).sum(0), lowers)")
        ks, res = keys_of(self.vals[x].type.shape), keys_of(n.result.type.shape)
        lay = self.lay
        if res and res == lay.axes[:lay.split] and lay.split < len(lay.axes) and self.space[x] == "row":
            self.batch_total(n, src, kind)
            return
        if res == lay.axes:   # over the row axis (rowprog.lower_row_reduce: the row programs' one lowering of it)
            if kind not in ("sum", "mean", "max"):
                raise self.err(r, f"a row {kind}")
            rowprog.lower_row_reduce(self, r, src, kind, "hidden_")
            return
        if not res and lay.axes:   # over every axis: a column accumulator reduced over its columns once complete
            self.total(n, src, kind)
            return
        if kind not in rowprog.ACC_KINDS:
            raise self.err(r, f"a {kind} over the axes [{', '.join(k for k in ks if k not in res)}]; the rows "
                           f"family takes the {', '.join(rowprog.ACC_KINDS)} over leading axes")
        if res == (lay.row,):
            target = "col"
        elif 0 < lay.split < len(lay.axes) and res == lay.axes[:lay.split] + (lay.row,):
            target = "brow"
        else:
            hint = (f" (permuting the input so that the reduced axes come right before {lay.row} makes them the rows "
                    f"of a batch)" if lay.row in res else "")
            if lay.row not in res and lay.split < len(lay.axes):
                hint = (f" (a reduction over {lay.row} and the rows of each batch keeps the leading axes "
                        f"[{', '.join(lay.axes[:lay.split])}] here; reductions over {lay.row} and some leading axes "
                        f"must all keep the same ones)")
            raise self.err(r, f"a {kind} of [{', '.join(ks)}] over the axes [{', '.join(k for k in ks if k not in res)}]"
                           f"; the rows family reduces over the row axis [{lay.row}], over all leading axes "
                           f"[{', '.join(lay.axes)}] or over the rows of a batch{hint}")
        self.space[r] = target
        self.sums[r] = r
        self.post[r] = ()
        self.kind[r] = kind
        if kind == "mean":   # the sum, divided once complete by the count of rows it summed (tiling data)
            cnt = f"static_cast<float>({'seqLen_' if target == 'brow' else 'rowNum_'})"
            self.post[r] = (Instr("vdup", "t", arg=cnt, space=target), Instr("vbin", "x", ("x", "t"), "Div",
                                                                             space=target))
        elif kind != "sum":
            self.p.acc_kinds[r] = kind
        self.p.instrs.append(Instr("acc", r, (src,), op=rowprog.ACC_OPS[kind], space=target))

    def batch_total(self, n, src: str, kind: str) -> None:
        """Reduction node n of the row value `src` over the row axis and the rows of each batch (the leading axes
        after the batch axes), keeping the batch axes: BatchNorm's statistics of [C, N, L] per channel C (the rows
        family's per-batch totals, docs/design.md "Kernel families"). Two levels: the batch's rows accumulated into
        a per-batch fp32 row (`acc`, space brow: the columns summed over the rows in row order; partial batches
        combined across cores in core order through workspace), which the second pass over the rows reads back
        complete at each new batch and reduces over its columns (ReduceSum / ReduceMax) into a float member
        (RowProgram.btotals). The value is that member's scalar text (a mean divides it by rows of a batch x row
        length from tiling data); arithmetic on such values alone stays a scalar text (`_Lowering.btext`), and an
        output of one is written once per batch by the core holding the batch's first row
        (RowProgram.batch_stores). Raises Unsupported for a kind other than sum, mean or max (a minimum arrives as
        -max(-x))."""
        r = n.result.name
        if kind not in ("sum", "mean", "max"):
            raise self.err(r, f"a {kind} over the rows of a batch and the row axis; the rows family takes the sum, "
                           f"mean or max")
        acc = f"bacc_{r}"
        self.p.instrs.append(Instr("acc", acc, (src,), op=rowprog.ACC_OPS[kind], space="brow"))
        if kind == "max":
            self.p.acc_kinds[acc] = "max"
        self.p.acc_reads.append(acc)
        name = self._batch_value(acc, "max" if kind == "max" else "sum")
        if kind == "mean":
            name = self._batch_value(f"({name} / (static_cast<float>(seqLen_) * static_cast<float>(hidden_)))",
                                     "expr")
        self.space[r] = "scalar"
        self.scalar_text[r] = name
        self.btext.add(r)
        self.bnames[name] = (r, n.loc)

    def _batch_input(self, x: str, load: bool = False) -> str | None:
        """For load-chain value x, an operator input over exactly the batch axes (BatchNorm's weight [C] of rows
        [C, N]; f32 or f16, contiguous in batch order, no column offset) read by a per-batch computation: its
        per-batch float member (with `load`, made on first use: the scalar unit reads the batch's element from GM
        at each new batch of the second pass, RowProgram.btotals) -- "" when not made yet without `load`; None for
        any other value (read per row instead)."""
        lay = self.lay
        if x in self.ch.pieces or x in self.ch.picks or not 0 < lay.split < len(lay.axes) \
                or keys_of(self.vals[x].type.shape) != lay.axes[:lay.split]:
            return None
        root = self.ch.root[x]
        dt = self.vals[root].type.dtype
        if not isinstance(dt, DType) or dtype_name(dt) not in ("f32", "f16"):
            return None
        try:
            view = view_of(self.ch, x, lay, self.vals)
        except IRError:
            return None
        if not _batch_flat(view, lay) or as_dim(view.col) != Lit(0) or as_dim(view.pitch) != Lit(1):
            return None
        key = ("batch", root, view)
        if key in self.by_view:
            return self.by_view[key]
        if not load:
            return ""
        name = self._gm_name(root)
        self.p.gm.append(GmTensor(name, "in", "bstat", dtype_name(dt), view, root))
        self.by_view[key] = self._batch_value(f"static_cast<float>(gm_{root}.GetValue(b))", "expr")
        return self.by_view[key]

    def _batch_value(self, src: str, kind: str) -> str:
        """A new per-batch float member bt<k>_ (RowProgram.btotals): the total of accumulator `src` (kind "sum" or
        "max"), or the C++ float text `src` over earlier ones, constants and attributes (kind "expr")."""
        name = f"bt{len(self.p.btotals)}_"
        self.p.btotals.append((name, src, kind))
        return name

    def _second_pass(self, x: str, by: str) -> bool:
        """Whether value x, a reduction over rows (or a finishing step of one), can be read by the computation of
        `by` in a second pass over the rows: a column or per-batch accumulator (not one over every axis) whose
        finishing steps are those of any output storing it, read by a row or per-row value, or (a column one) by a
        column value, then computed once after the exchange (RowProgram.late). Records the read
        (RowProgram.acc_reads, acc_post). Raises Unsupported when the accumulator is finished two ways."""
        a = self.sums[x]
        if self.space.get(a) not in ("col", "brow") or a in self.totals:
            return False
        try:   # a batch value computed from it would run before the first pass (LoadBatch)
            sp = self.lay.space(self.vals[by].type.shape)
        except IRError:
            return False
        if sp not in ("row", "stat") and (sp, self.space.get(a)) != ("col", "col"):
            return False
        post = self.post.get(x, ())
        if self.p.acc_post.get(a, post) != post or (post and a in self.p.accs and a not in self.p.acc_post):
            raise self.err(by, f"reads the {self.kind[a]} over rows %{a} finished another way than where it is "
                           f"stored or read elsewhere; the rows family finishes a reduction over rows one way")
        if post:
            self.p.acc_post[a] = post
        if a not in self.p.acc_reads:
            self.p.acc_reads.append(a)
        return True

    def total(self, n, src: str, kind: str, lane: str = "") -> None:
        """Reduction node n over every axis of the row value `src` (a 0-d result, or size-1 dims only): an
        accumulator over rows in a column row (space "col"; its kind's op, from its identity), reduced over its
        columns (ReduceSum / ReduceMax) once the rows are done, the cores' partial results combined with the same
        op in core order, then finished and stored as one element (RowProgram.accs space "total"; a mean divides
        by the element count rows x row length read from tiling data). With `lane` (a column index, integer text)
        src is a per-row scalar added to that one lane of the accumulator by the scalar unit (rowprog.lane_acc)."""
        r = n.result.name
        if kind not in rowprog.ACC_KINDS or kind == "min":   # a minimum over every axis arrives as -max(-x)
            raise self.err(r, f"a {kind} over every axis; the rows family takes the sum, mean or max")
        self.space[r] = "col"
        self.sums[r] = r
        self.kind[r] = kind
        self.totals.add(r)
        self.post[r] = ()
        if kind == "mean":
            cnt = "static_cast<float>(rowNum_) * static_cast<float>(hidden_)"
            self.post[r] = (Instr("vdup", "t", arg=cnt, space="col"), Instr("vbin", "x", ("x", "t"), "Div",
                                                                          space="col"))
        elif kind != "sum":
            self.p.acc_kinds[r] = kind
        self.p.instrs.append(Instr("acc", r, (src,), op=rowprog.ACC_OPS[kind], arg=lane, space="col"))

    def stat_total(self, n, x: str, kind: str) -> None:
        """A sum (or mean) of the per-row value x over every row, to one element (a loss summed over its rows): x
        added to lane 0 of a column accumulator by the scalar unit, once per row (rowprog.lane_acc: in COL_SPLIT
        only the chunk holding column 0 does it; no vector instruction per row), then the reduction over every
        axis of that accumulator (`total`: its other lanes hold 0, so the same fp32 sums of the rows in row order,
        then of the cores' partials in core order); a mean divides by the rows (tiling data)."""
        r = n.result.name
        v = f"lane0_{r}"
        self.p.instrs.append(Instr("sexpr", v, arg=f"({self._scalar_of(x)})", space="stat"))
        self.space[v] = "stat"
        self.total(n, v, "sum", lane="0")
        if kind == "mean":
            self.kind[r] = "mean"
            self.post[r] = (Instr("vdup", "t", arg="static_cast<float>(rowNum_)", space="col"),
                            Instr("vbin", "x", ("x", "t"), "Div", space="col"))

    def _finishing(self, n) -> bool:
        """Whether elementwise node n, which reads a reduction over rows, is a finishing step (module `finish`):
        its other operands are scalars, or the reduction cannot be read in a second pass (finish refuses it)."""
        others = [x for x in n.inputs if x not in self.sums]
        if len({self.sums[x] for x in n.inputs if x in self.sums}) > 1:   # two reductions: read in a second pass
            return not all(self.space.get(self.sums[x]) in ("col", "brow") and self.sums[x] not in self.totals
                           for x in n.inputs if x in self.sums)
        a = self.sums[next(x for x in n.inputs if x in self.sums)]
        readable = self.space.get(a) in ("col", "brow") and a not in self.totals
        if not others and len(n.inputs) > 1:   # m * m: read in a second pass when it can be
            return not readable
        if all(not self.ch.is_load(x) and self.space.get(x) == "scalar" for x in others):
            return True
        return not readable

    def finish(self, n) -> None:
        """Elementwise node n reads a reduction over rows (an accumulator, complete only after the last row): when
        its other operands are scalars (constants, attributes, dims) it is a *finishing* step, applied once to the
        complete accumulator before it is stored (`x.sum(1) / M`, `x.mean(0) * scale`): appended to the value's
        finishing instructions, over the accumulator's row `x` and a scratch row `t` (RowProgram.acc_post).
        Raises Unsupported when it reads two reductions or a row, batch or column value."""
        r, op, ins = n.result.name, n.op, list(n.inputs)
        accs = {self.sums[x] for x in ins if x in self.sums}
        a = next(x for x in ins if x in self.sums)
        kind = self.kind[self.sums[a]]
        if len(accs) > 1:
            raise self.err(r, f"combines the reductions over rows {', '.join('%' + x for x in sorted(accs))}; the "
                           f"rows family finishes one reduction over rows at a time")
        for x in ins:
            if x in self.sums:
                continue
            if self.ch.is_load(x):
                try:
                    sp = self.lay.space(self.vals[x].type.shape)
                except IRError:
                    sp = "row"
            else:
                self.use(x, r)   # raises for a value not lowered yet
                sp = self.space[x]
            if sp != "scalar":
                raise self.err(r, f"reads the {kind} over rows %{self.sums[a]} with the {SPACE_WORDS.get(sp, sp)} "
                               f"value %{x} while the rows are still being reduced; the rows family reads back only "
                               f"reductions over all leading axes (to [{self.lay.row}]) or over a batch's rows in a "
                               f"second pass over the rows, not a reduction over every axis")
        if keys_of(n.result.type.shape) != keys_of(self.vals[a].type.shape):
            raise self.err(r, f"broadcasts the {kind} over rows %{self.sums[a]} while the rows are still being "
                           f"reduced")
        target = self.space[a]
        ctx = _FinishCtx(self, {x for x in ins if x in self.sums}, target)
        try:
            lower_elementwise(ctx, "x", target, op, ins)
        except IRError as e:
            raise self.err(r, str(e).removeprefix("row kernel: ")) from None
        ren = {"dup_x": "t", "neg_x": "x"}
        steps = tuple(dataclasses.replace(i, dst=ren.get(i.dst, i.dst), srcs=tuple(ren.get(x, x) for x in i.srcs))
                      for i in ctx.p.instrs)
        self.space[r] = target
        self.sums[r] = self.sums[a]
        self.post[r] = self.post[a] + steps
        self.alias[r] = self.operand(a)

    def round_trip(self, n, x: str, src: str, to: str) -> None:
        """A cast of row value x (UB operand `src`) to a 16-bit float type `to` (f16, bf16 or a dtype variable of
        them) that a computation reads: the value rounded to `to` with the cast's mode and widened back, as CANN's
        kernels round a residual sum or a normalised row to T before using it (add_rms_norm: Cast to T with
        CAST_RINT, then Cast to float). Two Casts through a temporary of halves (`vnarrow` with the type and
        mode, `vwiden`); docs/design.md "Rounding inside a row". Raises Unsupported for another target type,
        a value that is not a row, or a mode the conversion lacks (fp32 -> bf16 has no CAST_ODD)."""
        r = n.result.name
        mode = n.attr("round") or "rint"
        if to not in ("f16", "bf16") and not self._half_variable(to):
            raise self.err(r, f"a cast to {to} that feeds a computation; the rows kernel rounds inside a row to "
                              f"fp16 / bf16 only (other types at outputs)")
        if self.space.get(x) == "scalar" and x not in self.btext:
            raise self.err(r, f"a cast to {to} of a scalar that a computation or a broadcast reads; the rows kernel "
                              f"rounds row values only: for an output, broadcast first and cast the broadcast "
                              f"(b.cast(v.broadcast_to([...]), {to}, round=...))")
        if self.space.get(x) != "row":
            raise self.err(r, f"a cast to {to} of {SPACE_WORDS.get(self.space.get(x), 'a value')} that feeds a "
                              f"computation; the rows kernel rounds row values only")
        if mode in ("none", "odd") and (to == "bf16" or to in self.half_vars and "bf16" in self.half_vars[to]):
            mode = "rint" if mode == "none" else mode   # CAST_NONE narrows to nearest even; bf16 has no CAST_NONE
            if mode == "odd":
                raise self.err(r, f"cast to {to} with round mode odd: fp32 -> bf16 has no CAST_ODD")
        tmp = f"h_{r}"
        self.p.instrs.append(Instr("vnarrow", tmp, (src,), op=to, arg=ROUND_MODES[mode], space="row"))
        self.p.instrs.append(Instr("vwiden", r, (tmp,), op=to, space="row"))
        self.space[r] = "row"

    def _half_variable(self, to: str) -> bool:
        """Whether dtype variable `to` binds only fp16 / bf16 in the spec's dtype table (half_variables)."""
        return to in self.half_vars

    # ---------------------------------------------------------------- outputs
    def output(self, name: str, v: str) -> None:
        """Store output `name` (value v) through its view(s): rows, per-row statistics, or sums over rows (an
        accumulator written once complete). One value broadcast to the rows' shape (a constant, an attribute) is
        duplicated into the row and stored; broadcast to the per-row shape, it is set per row into the statistics
        stage and copied out as a statistic is. Raises Unsupported for anything else (a value broadcast to a column
        [H], a byte-dtype statistic, ...), naming the output and what the family writes."""
        dtype = dtype_name(self.vals[v].type.dtype)
        if isinstance(self.vals[v].type.dtype, DType) and dtype not in WRITES:   # variables: _check_dtype_rows
            raise self.err(v, f"output {name} has dtype {dtype}; the rows family writes {', '.join(WRITES)} outputs")
        mode = self._round_of(v)
        if mode == "none" and isinstance(self.vals[v].type.dtype, DType) and not self.vals[v].type.dtype.is_float:
            raise self.err(v, f"output {name} of dtype {dtype} is not a cast of a computed float value; the rows "
                           f"kernel computes in fp32 (integers above 2^24 round): write b.cast(value, {dtype}, mode)")
        rnd = ROUND_MODES[mode]
        try:
            pieces = store_view(self.ch, v, self.lay, self.vals, name)
        except IRError as e:
            raise self.err(v, f"output {name}: {e}") from None
        for s, view in pieces:
            src = self.use(s)
            sp = self.space[s]
            ks = keys_of(self.vals[s].type.shape)
            full = self.lay.axes + (self.lay.row,)
            gm = self._gm_name(name)
            if ks == full:
                if s in self.sums:
                    raise self.err(v, f"output {name} broadcasts the sum over rows %{self.sums[s]} to every row "
                                   f"while the rows are still being summed; the rows family only stores sums over "
                                   f"rows")
                if sp in ("stat", "scalar"):
                    arg = self.scalar_text.get(s, src)
                    self.p.instrs.append(Instr("vdup", f"bc_{s}", arg=arg, space="row"))
                    src = f"bc_{s}"
                elif sp in ("brow", "col"):
                    self.p.instrs.append(Instr("vscalar", f"bc_{s}", (src,), "Adds", "0.0f", space="row"))
                    src = f"bc_{s}"
                self.p.gm.append(GmTensor(gm, "out", "row", dtype, view, name))
                if dtype in rowprog.BYTE_DTYPES:   # fp32 -> half (CAST_ODD) -> the byte dtype with the mode
                    self.p.instrs.append(Instr("vnarrow", f"h_{gm}", (src,), space="row"))
                    self.p.instrs.append(Instr("store", "", (f"h_{gm}",), arg=rnd, gm=gm, space="row", op="half"))
                else:
                    self.p.instrs.append(Instr("store", "", (src,), arg=rnd, gm=gm, space="row"))
            elif sp == "scalar" and s not in self.btext and ks and self._space_of(s) == "stat":
                # one value for every row (a constant, an attribute, a dim's value broadcast to the rows' shape):
                # written per row as a statistic is (its stage set per row, copied out with the rows, tails too)
                if dtype in rowprog.BYTE_DTYPES:
                    raise self.err(v, f"output {name} of dtype {dtype} is a value broadcast to every row; the rows "
                                   f"family writes byte outputs as rows only")
                if not view.flat:
                    raise self.err(v, f"output {name}: per-row statistics must be written in row order")
                self.p.gm.append(GmTensor(gm, "out", "stat", dtype, view, name))
                self.p.instrs.append(Instr("sexpr", f"st_{gm}", arg=self.scalar_text.get(s, src), space="stat"))
                self.p.instrs.append(Instr("sstore", "", (f"st_{gm}",), arg=rnd, gm=gm, space="stat"))
            elif dtype in rowprog.BYTE_DTYPES:
                raise self.err(v, f"output {name} of dtype {dtype} is {SPACE_WORDS[sp]}; the rows family writes byte "
                               f"outputs as rows only")
            elif sp == "stat":
                if not view.flat:
                    raise self.err(v, f"output {name}: per-row statistics must be written in row order")
                self.p.gm.append(GmTensor(gm, "out", "stat", dtype, view, name))
                self.p.instrs.append(Instr("sstore", "", (src,), arg=rnd, gm=gm, space="stat"))
            elif sp == "col" and src in self.p.late:   # written once computed, after the exchange
                if not all(as_dim(x) == Lit(0) for x in view.strides):
                    raise self.err(v, f"output {name}: a column value written along a leading axis")
                self.p.gm.append(GmTensor(gm, "out", "col", dtype, view, name))
                self.p.late_stores.append((src, gm, rnd))
            elif sp in ("brow", "col"):
                if not any(i.kind == "acc" and i.dst == src for i in self.p.instrs):
                    raise self.err(v, f"output {name} is a {sp} value that is not a sum over rows")
                if src in self.p.accs:
                    raise self.err(v, f"output {name} stores the reduction over rows %{self.sums.get(s, s)} that "
                                   f"output {self.p.accs[src][1]} stores too; the rows family stores each reduction "
                                   f"over rows once (compute it twice, or cast one output from the other)")
                if src in self.p.acc_reads and self.p.acc_post.get(src, ()) != self.post.get(s, ()):
                    raise self.err(v, f"output {name} stores the reduction over rows %{self.sums.get(s, s)} finished "
                                   f"another way than the per-row arithmetic reads it; the rows family finishes a "
                                   f"reduction over rows one way")
                if self.post.get(s):
                    self.p.acc_post[src] = self.post[s]
                if self.sums.get(s) in self.totals:
                    if ks:
                        raise self.err(v, f"output {name} broadcasts the reduction over every axis %{self.sums[s]}; "
                                       f"the rows family stores it as one element")
                    sp = "total"
                if sp == "brow" and not _batch_flat(view, self.lay):
                    raise self.err(v, f"output {name}: its rows are not laid out in batch order")
                if sp == "col" and not all(as_dim(x) == Lit(0) for x in view.strides):
                    raise self.err(v, f"output {name}: a column sum written along a leading axis")
                self.p.gm.append(GmTensor(gm, "out", sp, dtype, view, name))
                self.p.accs[src] = (sp, gm, rnd)
            elif s in self.btext:   # a per-batch value: written once per batch (RowProgram.batch_stores)
                if ks != self.lay.axes[:self.lay.split] or not _batch_flat(view, self.lay):
                    raise self.err(v, f"output {name}: a per-batch value written other than one element per batch "
                                   f"in batch order")
                self.p.gm.append(GmTensor(gm, "out", "bstat", dtype, view, name))
                self.p.batch_stores.append(Instr("bstore", "", (), arg=self.scalar_text[s], gm=gm, op=rnd,
                                                 space="bstat"))
            elif sp == "scalar" and ks:
                per_row = ", ".join(self.lay.axes)
                raise self.err(v, f"output {name} is one value broadcast to {shape_str(self.vals[s].type.shape)}; "
                               f"the rows family writes a broadcast value as rows [{', '.join(full)}] or one per row "
                               f"[{per_row}] only")
            else:
                raise self.err(v, f"output {name} is a scalar; the rows family writes rows, statistics and sums")

    def _space_of(self, v: str) -> str | None:
        """The space a value of v's shape has in the layout (RowLayout.space), None for a shape of none."""
        try:
            return self.lay.space(self.vals[v].type.shape)
        except IRError:
            return None

    def _round_of(self, v: str) -> str:
        """Round mode of the narrowing cast on output value v's store chain ("none" when there is none); v itself
        may be such a cast that a computation reads too (round_trip: a common cast of a rounded residual)."""
        n = self.prod.get(v)
        if n is not None and n.op == "cast" and dtype_name(n.attr("to")) != "f32":
            return n.attr("round") or "none"
        seen, stack = set(), [v]
        while stack:
            x = stack.pop()
            if x in seen or x not in self.ch.store_only or self.ch.is_load(x):
                continue
            seen.add(x)
            n = self.prod[x]
            if n.op == "cast" and dtype_name(n.attr("to")) != "f32":
                return n.attr("round") or "none"
            stack += list(n.inputs)
        return "none"


class _FinishCtx:
    """The lower_elementwise context of a finishing step (_Lowering.finish): the reduction's operands are the
    accumulator row `x`, the others the lowering's scalars; the instructions go to a list of their own."""

    def __init__(self, low: _Lowering, acc_vals: set, target: str):
        self.low, self.acc_vals = low, acc_vals
        self.space = {**low.space, **{x: target for x in acc_vals}}
        self.scalar_text = low.scalar_text
        self.p = RowProgram(low.p.name, low.lay)

    def operand(self, v: str) -> str:
        """`x` for the reduction, the lowering's own name otherwise."""
        return "x" if v in self.acc_vals else self.low.operand(v)


def finish(p: RowProgram) -> RowProgram:
    """Row program `p` as `_Lowering.build` (or opgen.kernel.rowpresence.merge_presences) left it, with its levels,
    schedule, COL_SPLIT phases, passes over the rows, buffers and canonical names. Raises Unsupported when a second
    pass over the rows cannot be formed."""
    rowprog._assign_levels(p)
    p.instrs = rowprog._schedule(p.instrs)
    rowprog._assign_phases(p)
    try:
        rowprog.assign_row_passes(p)
    except IRError as e:
        why = str(e)
        for name, (v, loc) in p.bnames.items():   # a per-batch total: the spec's value and line
            where = f" ({loc.rsplit('/', 1)[-1]})" if loc else ""
            why = why.replace(f"%{name} ", f"%{v}{where} ")
        raise Unsupported(getattr(e, "value", p.acc_reads[0]), getattr(e, "loc", ""), why) from None
    rowprog._allocate(p)
    _canonical_names(p)
    if join_copies(p):   # a joined scalar keeps the first copy's name: number them again in order
        _canonical_names(p)
    return p


def _lower_joined(spec, graphs: dict, lay: RowLayout, keys: list, orig: dict | None = None) -> dict:
    """{key: RowProgram} of the specialisations `keys` on layout `lay`: those that differ only in which optional
    inputs are present share one program serving every presence (opgen.kernel.rowpresence.merge_presences: the
    presence handled in the IR, one kernel class), where the join covers them and keeps every presence's online
    maximum and sum (rowprog.online_pair, COL_STREAM's one pass); the others one program each. A graph of `orig`
    (the tensor graphs before `prepare`) with runtime guards (opgen.kernel.rowguard) is lowered once per value of
    its guards, each a presence literal more of the join (the guard's name last, after the optional inputs). Raises
    Unsupported as `lower`."""
    optional = tuple(i.name for i in spec.inputs if i.optional)
    by_rest: dict = {}
    for key in keys:
        by_rest.setdefault((key.static, key.forms), []).append(key)
    out = {}
    for same in by_rest.values():
        joined = None
        found = {key: runtime_guards(orig[key]) for key in same} if orig else {}
        names = tuple(dict.fromkeys(n for gs in found.values() for _v, n in gs))   # guards by their text
        if (optional and len(same) > 1) or names:
            built = []
            for key in same:
                for bits in itertools.product((True, False), repeat=len(names)):
                    g = graphs[key]
                    if names:
                        g = prepare(specialise(orig[key], {v: bits[names.index(n)] for v, n in found[key]}))
                    low = _Lowering(g, lay, half_variables(spec))
                    low.passes = None
                    built.append((tuple(key.present) + bits, low.build()))
            joined, _why = merge_presences(built, optional + names)
        if joined is not None:
            p = finish(joined)
            rowprog.verify_program(p)
            if rowprog.online_pair(p) is None:   # a join must not lose a presence's online softmax (COL_STREAM)
                try:
                    alone = {key: lower(graphs[key], lay, half_vars=half_variables(spec)) for key in same}
                except Unsupported:
                    if not names:
                        raise
                    alone = {}   # a runtime guard's select lowers only specialised (rowguard): keep the join
                if any(rowprog.online_pair(q) for q in alone.values()):
                    out.update(alone)
                    continue
            out.update({key: p for key in same})
        else:
            out.update({key: lower(graphs[key], lay, half_vars=half_variables(spec)) for key in same})
    return out


def _canonical_names(p: RowProgram) -> None:
    """Rename the program's values by role and first definition (batch rows b<k>, column rows c<k>, per-row and
    scalar values s<k>), so programs that compute alike print alike whatever the tensor IR's value names (two
    shape forms of an input, a reshape the passes removed)."""
    where: dict[str, str] = {}
    n = {"brow": 0, "col": 0, "stat": 0}
    for i in p.instrs:
        d = i.dst
        if not d or d in where or (d.startswith("w") and d[1:].isdigit()) or d.startswith("s_"):
            continue
        sp = i.space if i.space in n else "stat"
        where[d] = f"{'bcs'[list(n).index(sp)]}{n[sp]}"
        n[sp] += 1
    ren = lambda x: where.get(x, x)  # noqa: E731
    p.instrs = [dataclasses.replace(i, dst=ren(i.dst), srcs=tuple(ren(x) for x in i.srcs),
                                    arg=rowprog._rename(i.arg, where)) for i in p.instrs]
    p.brow = [ren(x) for x in p.brow]
    p.col = [ren(x) for x in p.col]
    p.accs = {ren(k): v for k, v in p.accs.items()}
    p.acc_kinds = {ren(k): v for k, v in p.acc_kinds.items()}
    p.acc_post = {ren(k): v for k, v in p.acc_post.items()}
    p.acc_reads = [ren(k) for k in p.acc_reads]
    p.late = [ren(k) for k in p.late]
    p.late_stores = [(ren(k), g, r) for k, g, r in p.late_stores]
    p.btotals = [(n, rowprog._rename(a, where) if k == "expr" else ren(a), k) for n, a, k in p.btotals]
    p.batch_stores = [dataclasses.replace(i, arg=rowprog._rename(i.arg, where)) for i in p.batch_stores]


def _subsequence(ks, full) -> bool:
    """Whether keys `ks` appear in `full` in order."""
    it = iter(full)
    return all(k in it for k in ks)


def _batch_flat(view, lay: RowLayout) -> bool:
    """The batch axes of `view` are row-major with the view's pitch (batch row b at b * pitch + col)."""
    want = as_dim(view.pitch)
    for s, e in reversed(list(zip(view.strides[:lay.split], lay.extents[:lay.split]))):
        if as_dim(s) != want:
            return False
        want = want * e
    return all(as_dim(s) == Lit(0) for s in view.strides[lay.split:])


def half_variables(spec) -> dict:
    """{dtype variable: the set of its bindings} for the variables of `spec` that every row of its dtype table binds
    to fp16 or bf16: a cast to one of them inside a row rounds through a 16-bit temporary (_Lowering.round_trip)."""
    return {v: b for v, b in rowprog.var_bindings(spec, dtype_name).items() if b <= {"f16", "bf16"}}


def lower(g: Graph, layout: RowLayout, passes=None, half_vars: dict | None = None) -> RowProgram:
    """Lower optimized graph `g` (one specialisation) on `layout` to a verified row program, running the kernel-level
    algebra `passes` on it (None: opgen.kernel.rowalg.ROW_PASSES; [] for none); `half_vars`: half_variables of the
    spec. Raises Unsupported."""
    low = _Lowering(g, layout, half_vars)
    low.passes = passes
    p = low.run()
    rowprog.verify_program(p)
    return p


# ------------------------------------------------------------------------------------------------ the family
from opgen.kernel.family import Family, register  # noqa: E402
from opgen.kernel.kir_sync import Hoist, place_syncs_memo, strip_syncs  # noqa: E402
from opgen.kernel.kirguard import hoist_guards  # noqa: E402
from opgen.kernel.rowclass import Variant  # noqa: E402
from opgen.kernel.rowcounts import counts_of  # noqa: E402


@register
class RowsFamily(Family):
    """The rows family (docs/design.md "Kernel families"): vector graphs over an anchor domain of rows x a row axis.

    Two schedules, chosen by the analysis: *rows* (one anchor domain, opgen.kernel.rowlayout: ROW_SPLIT /
    COL_SPLIT kernels of opgen.tiling.rowkernel, emitted by opgen.codegen.kernel) and *parts* (several row
    domains laid end to end with per-part addressing, RoPE tables and lane maps: opgen.kernel.headrows, tiled
    by opgen.tiling.headkernel, emitted by opgen.codegen.headkernel), tried when no single anchor domain holds
    the graph."""

    name = "rows"
    doc = "vector kernels over rows of an anchor domain"

    def claims(self, plan) -> bool:
        """Plans of AIV-only launches (no cube stage)."""
        return all(k.kernel_type == "KERNEL_TYPE_AIV_ONLY" for k in plan.kernels)

    def match(self, spec, g, plan):
        """A RowLayout, else a parts layout (opgen.kernel.headrows.parts_layout). Raises the rows analysis'
        Unsupported when neither holds (a gather or scatter other than one index per row along the row axis is
        refused by the lowering)."""
        try:
            return analyse(prepare(g))
        except Unsupported as first:
            from opgen.kernel.headrows import HeadLayout, parts_attempt

            lay = parts_attempt(g)
            if not isinstance(lay, HeadLayout):
                _refuse_index_ops(g)
                why = regroup_blocker(merge_trailing(min_as_max(math_as_steps(g))))
                if why:   # say what kept a regrouping of the channels from the groups' rows
                    raise Unsupported(first.value, first.loc, f"{first.why} ({why})") from None
                if lay:   # head-shaped tensors: say why the parts schedule (RoPE lane maps, parts) does not take them
                    raise Unsupported(first.value, first.loc,
                                      f"{first.why} (nor does the head-row parts schedule: {lay})") from None
                raise first from None
            return lay

    def _parts(self, layout) -> bool:
        return not isinstance(layout, RowLayout)

    def keys(self, spec, layout) -> list:
        """Rows: every specialisation (static attributes, presence, shape forms); parts: one per static attribute
        combination, all optional inputs present (presence is checked at run time: opgen.codegen.headkernel)."""
        if self._parts(layout):

            return full_keys(spec)
        return list(spec.keys())

    def lower(self, spec, layout, graphs: dict, only=None):
        """{key: RowProgram} on `layout` (rows), or the head-row lowering of the spec (parts). Raises Unsupported
        when a specialisation has another layout or no lowering."""
        from opgen.kernel.family import Lowered

        if self._parts(layout):
            from opgen.kernel.headrows import lower_heads

            if only is not None:
                return Lowered(self.name, layout, {only: lower_heads(graphs[only], layout)})
            low = lower_spec(spec, graphs, layout)
            return Lowered(self.name, layout, {k: hp for k, (_a, _ak, hp) in zip(graphs, low.programs)},
                           {"heads": low})
        orig, graphs = graphs, {key: prepare(g) for key, g in graphs.items()}   # min as -max(-x); axes merged
        try:
            groups = layout_groups(spec, {key: analyse(g) for key, g in graphs.items()}, graphs)
            progs, layouts = {}, {}
            for lay, keys in groups:
                for key in keys:
                    layouts[key] = lay
                progs.update(_lower_joined(spec, graphs, lay, keys, orig))
        except Unsupported as e:   # say why a reduction over several trailing axes kept them apart
            why = next((w for w in (merge_blocker(min_as_max(g)) for g in orig.values()) if w), "")
            if not why:
                raise
            raise Unsupported(e.value, e.loc, f"{e.why} ({why})") from None
        for p in progs.values():
            _check_dtype_rows(spec, p)
        return Lowered(self.name, groups[0][0], progs, {"layouts": layouts} if len(groups) > 1 else {})

    def counts(self, lowered):
        """RowCounts (rows; opgen.kernel.rowcounts) or, for parts, the HeadCounts the tiling stage installs
        (opgen.tiling.rowfamily): the maxima over the lowered programs."""
        if self._parts(lowered.layout):
            return self._stage("counts")(lowered)
        return counts_of(lowered.programs.values())

    # tile (rows_tiling / head_tiling) is installed by opgen.tiling.rowfamily, emit by opgen.codegen.kernel

    def synchronise(self, lowered):
        """Each kernel class of a rows lowering, and the head kernel class of a parts lowering, with the syncs the
        dependency pass places (opgen.kernel.kir_sync: the lowering's own flags and barriers stripped, then what
        the accesses need placed, redundant ones pruned; SetFlags stay beside their WaitFlags but in loop bodies,
        where they move up as far as the analysis allows: a software-pipelined pass loop's MTE2 -> S wait then
        waits for this pass's copy-in, not the next one's, rowsched.pass_loop). The classes exist
        once the tiling has decided their strategies (rows_tiling) or planned the parts' counts (head_tiling)."""
        for v in lowered.extra.get("variants", ()):
            if v.kclass is not None:
                v.kclass = place_syncs_memo(hoist_guards(strip_syncs(v.kclass)), hoist=Hoist.LOOPS)[0]
        hc = lowered.extra.get("hclass")
        if hc is not None:
            hc.sched = place_syncs_memo(strip_syncs(hc.sched), hoist=Hoist.NONE)[0]
        return lowered

    def synchronised_text(self, lowered, key) -> str:
        """The synchronised Kernel IR class serving `key` (kir.to_text: a rows class, the parts' one head class),
        else the program text."""
        if lowered.extra.get("hclass") is not None:
            return kir.to_text(lowered.extra["hclass"].sched)
        prog = lowered.programs.get(key)
        for v in lowered.extra.get("variants", ()):
            if v.kclass is not None and (v.prog is prog or any(p is prog for p in v.also)):
                return kir.to_text(v.kclass)
        return self.program_text(lowered, key)

    def program_text(self, lowered, key) -> str:
        """The lowered program of `key` as canonical text, each instruction with its spec location."""
        if self._parts(lowered.layout):
            from opgen.kernel.headrows import print_head_program

            return print_head_program(lowered.programs[key], locs=True)
        return rowprog.print_program(lowered.programs[key], locs=True)


def layout_groups(spec, lays: dict, graphs: dict) -> list[tuple[RowLayout, list]]:
    """[(RowLayout, its keys)]: the specialisations grouped by anchor domain, each group on one common_layout. Keys
    whose static attribute values differ may lower on different domains (a GLU halving dim -1 or dim 0: rows of H
    or of the trailing dims), since the tiling key's attrKey tells them apart at run time; keys with the same values
    (presence, shape forms) share one domain. Raises Unsupported naming two specialisations of one attrKey whose
    domains differ."""
    def domain(lay):
        return (lay.axes, tuple(str(e) for e in lay.extents), lay.row, str(lay.row_extent))

    by_dom: dict = {}
    static_dom: dict = {}
    for key, lay in lays.items():
        d = domain(lay)
        first = static_dom.setdefault(key.static, (d, key))
        if first[0] != d:
            common_layout(spec, {first[1]: lays[first[1]], key: lay}, graphs)   # raises, naming both
        by_dom.setdefault(d, {})[key] = lay
    return [(common_layout(spec, group, graphs), list(group)) for group in by_dom.values()]


def _refuse_index_ops(g: Graph) -> None:
    """When no layout holds graph g: a gather or scatter-add in neither form the rows family lowers is named as the
    reason -- one index per row along the row axis (`_Lowering.gather`, `_Lowering.scatter_add`), or whole rows of
    an operator input picked along a leading axis by an index input (opgen.kernel.rowlayout.Chains.picks: a row
    input read through a PickedView). Raises Unsupported; returns otherwise."""
    vals = g.values()
    ch = Chains(g)
    for n in g.nodes:
        if n.op not in ("gather", "scatter_add"):
            continue
        idx, other = (n.inputs[1], n.inputs[0]) if n.op == "gather" else n.inputs
        shape = vals[other].type.shape if n.op == "gather" else n.result.type.shape
        lead = keys_of(shape)[:-1]
        along_row = n.attr("axis") % max(len(shape), 1) == len(shape) - 1
        if n.op == "gather" and not along_row and n.result.name not in ch.picks:
            what = (f"the index %{idx} is computed in the kernel" if not ch.is_load(idx) else
                    f"the table %{other} is computed in the kernel" if not ch.is_load(other) else
                    f"%{other} is read through a concat, or %{idx} through a permute or a window")
            raise Unsupported(n.result.name, n.loc, f"a gather of whole rows of %{other} along its axis "
                              f"{n.attr('axis')} by %{idx}: the rows family picks whole rows along a leading axis "
                              f"(an embedding lookup) of an operator input by an i32 or i64 index input, each read as "
                              f"it is (through casts and reshapes only); {what} (compute it in a separate operator, "
                              f"or gather first and compute on the picked rows)")
        if keys_of(vals[idx].type.shape) != lead and along_row:
            what = "a gather" if n.op == "gather" else "a scatter-add"
            raise Unsupported(n.result.name, n.loc, f"{what} by %{idx} of shape "
                              f"[{', '.join(keys_of(vals[idx].type.shape))}]: the rows family {what.split()[1]}s "
                              f"within each row of the tensor it reads, by one i32 or i64 index per row (an index "
                              f"shaped [{', '.join(lead)}], one entry per row)")
        if n.op == "scatter_add" and not along_row:
            raise Unsupported(n.result.name, n.loc, f"a scatter-add by %{idx} along axis {n.attr('axis')}: the rows "
                              f"family scatters within each row along its row axis (the last axis), by one i32 or "
                              f"i64 index per row; adding whole rows into a leading axis (an embedding's gradient) "
                              f"is not lowered")


def common_layout(spec, lays: dict, graphs: dict) -> RowLayout:
    """The one RowLayout every specialisation is lowered on, from {key: its own layout}: the same anchor domain
    for all; flat only when every specialisation is flat (a flat one lowers on the rows domain as well); the batch
    split of the specialisations with batch rows (one without batch rows lowers on any split). Raises Unsupported
    naming the specialisations whose domains differ."""
    import dataclasses

    items = list(lays.items())
    k0, l0 = items[0]
    for key, lay in items[1:]:
        if (lay.axes, lay.extents, lay.row, lay.row_extent) != (l0.axes, l0.extents, l0.row, l0.row_extent):
            g = graphs[key]
            raise Unsupported(g.outputs[0][1], "", f"the specialisation {spec.key_text(key)} has another anchor "
                              f"domain ({lay.text()}) than {spec.key_text(k0)} ({l0.text()}); one kernel serves "
                              f"every specialisation")
    if all(lay.flat for _k, lay in items):
        return l0
    splits = {lay.split: key for key, lay in items if not lay.flat and lay.split < len(lay.axes)}
    if len(splits) > 1:
        (s1, a), (s2, b) = list(splits.items())[:2]
        raise Unsupported(graphs[b].outputs[0][1], "", f"batch rows over [{', '.join(l0.axes[:s2])}] in "
                          f"{spec.key_text(b)} and over [{', '.join(l0.axes[:s1])}] in {spec.key_text(a)}")
    split = next(iter(splits), len(l0.axes))
    return dataclasses.replace(l0, split=split, flat=False)


def _check_dtype_rows(spec, p) -> None:
    """Every dtype a row program's GM operands take (each row of the dtype table for a variable) is one the rows
    kernel reads (inputs) or writes (outputs). Raises Unsupported naming the tensor and its declaration."""
    decl = {d.name: d for d in list(spec.inputs) + list(spec.outputs)}
    dvars = {c.name for c in spec.dtype_table}
    for t in p.gm:
        ok = (READS + INDEX_DTYPES if t.space == "stat" else READS) if t.role == "in" else WRITES
        if rowprog.gathered_stat(t):
            ok = ("f32", "f16")   # read by the scalar unit, converted to float (no bf16 scalar conversion)
        byte_note = ""
        if t.dtype in dvars:   # one class templated on the variable: a byte dtype's route through half is per tensor
            ok = tuple(d for d in ok if d not in rowprog.BYTE_DTYPES)
            byte_note = (" through a dtype variable (a byte dtype goes through half, which one kernel class for every "
                         "row of the variable cannot do: declare that tensor's dtype as the byte dtype itself)")
        got = sorted({dtype_name(r[t.dtype]) for r in spec.dtype_rows if t.dtype in r} or {t.dtype})
        mode, at = p.int_cast_modes.get(t.gm, (None, ""))
        ints = [d for d in got if d in ("i32", "i64")]
        if t.role == "in" and mode is not None and ints:
            via = f"dtype variable {t.dtype}, bound to {', '.join(ints)} by a row" if t.dtype in dvars else ints[0]
            raise Unsupported(t.gm, at, f"input {t.gm} ({via}) is cast to f32 with round mode {mode!r}; the rows "
                              f"kernel converts integers to fp32 rounding to nearest even (cast with 'rint')")
        bad = [d for d in got if d not in ok]
        if bad:
            what = "input" if t.role == "in" else "output"
            via = f" (dtype variable {t.dtype})" if bad != [t.dtype] else ""
            kind = " (read as a per-row value)" if rowprog.gathered_stat(t) else ""
            raise Unsupported(t.gm, getattr(decl.get(t.gm), "loc", ""), f"{what} {t.gm}{kind} has dtype {bad[0]}"
                              f"{via}; the rows family {'reads' if t.role == 'in' else 'writes'} {', '.join(ok)} "
                              f"{what}s{' that way' if kind else ''}"
                              f"{byte_note if any(d in rowprog.BYTE_DTYPES for d in bad) else ''}")


def presence_condition(spec, present) -> str:
    """The C++ condition on the optional inputs' pointers under which a rows class serves a call whose optional
    inputs are present as `present` (one bool per optional input, in spec order): what the kernel entry tests and
    Variant.serves holds; "true" when the spec has none."""
    opts = [i.name for i in spec.inputs if i.optional]
    return " && ".join(f"{cpp_name(n)} {'!=' if p else '=='} nullptr" for n, p in zip(opts, present)) or "true"


def serves_call(v, ak: int, present: tuple, fkey: int, spec) -> bool:
    """Whether class `v` (a Variant of variants_of) serves a call of attrKey `ak`, optional inputs present as
    `present` and form key `fkey` (opgen.dsl.keys.form_key): the tiling key's branch and the presence condition
    the kernel entry tests, as the Kernel-IR engine picks a class."""
    cond = presence_condition(spec, present)
    return any((ak, f, cond) in v.serves for f in (fkey, None))


def variants_of(spec, lowered) -> list:
    """The kernel classes of a rows lowering: equal programs share a class; each serves the (attrKey, form key,
    C++ condition) triples of its specialisations, the condition on the optional inputs' pointers
    (presence_condition) and the form key None (every form). When the shape forms of one attrKey (AscendQuantV2's
    scale [H] or [1]) lower to different programs, each of its classes serves its form keys (opgen.dsl.keys.form_key)
    instead, and lowered.extra["form_key"] is set True: the TilingFunc computes the form key from the input shapes
    (opgen.tiling.emit.form_key_cpp) and folds it into the tiling key, so one tiling key runs one class
    (opgen.codegen.tilingkey.TilingKey; docs/design.md "Shape forms at run time"). Raises Unsupported when two
    specialisations of one attrKey, form key and presence lower to different programs (not reached: one form key is
    one combination of forms)."""
    names = [a.name for a in spec.static_attrs]
    opts = [i for i in spec.inputs if i.optional]
    by_text: dict[str, Variant] = {}
    out: list[Variant] = []
    groups: dict[tuple, list] = {}
    for key, prog in lowered.programs.items():
        attrs = dict(zip(names, key.static))
        ak = attr_key(spec, attrs)
        cond = presence_condition(spec, key.present)
        text = canonical_values(rowprog.print_program(prog))   # equal up to the traced values' names: one class
        groups.setdefault((ak, cond), []).append((key, prog, text))
    split = {ak for (ak, _c), members in groups.items() if len({t for _k, _p, t in members}) > 1}
    lowered.extra["form_key"] = bool(split)   # a form key any presence splits: every presence of its attrKey too
    for (ak, cond), members in groups.items():
        served: dict[tuple, str] = {}   # (attrKey, form key, condition) -> its program's text
        for key, prog, text in members:
            serve = (ak, form_key(spec, key.forms, key.present) if ak in split else None, cond)
            if serve in served:   # forms lowering alike: one condition, one class
                if served[serve] != text:
                    raise Unsupported(prog.gm[0].name if prog.gm else spec.name, "",
                                      f"the shape forms of the specialisation {spec.key_text(key)} lower to "
                                      f"different kernels")
                by_text[text].also.append(prog)
                continue
            served[serve] = text
            if text not in by_text:
                attrs = dict(zip(names, key.static))
                pres = dict(zip([i.name for i in opts], key.present))
                doc = ", ".join(f"{n}={v}" for n, v in attrs.items())
                doc += ("; " if doc and pres else "") + (
                    f"every presence of {', '.join(prog.presence)} (hasInput<k>_)" if prog.presence else
                    ", ".join(f"{n} {'present' if p else 'absent'}" for n, p in pres.items()))
                if ak in split:
                    free = {i.name for i in free_form_inputs(spec)}
                    multi = [i for i in spec.inputs if len(i.shapes) > 1]
                    doc += ("; " if doc else "") + ", ".join(
                        f"{i.name} {shape_str(i.shapes[f])}" for i, f in zip(multi, key.forms) if i.name in free)
                v = Variant(f"{spec.name}Kernel{len(out)}", doc or "all inputs", prog)
                by_text[text] = v
                out.append(v)
            elif prog is not by_text[text].prog:
                by_text[text].also.append(prog)   # its spec lines are cited beside the first program's
            by_text[text].serves.append(serve)
    return out
