"""The cube family: a matrix product [M, K] x [K, N] on the cube unit (AIC), lowered to Kernel IR.

`GemmLayout` is read off the fused graph's structure, never off names: the graph's one `matmul` whose operands are
(casts of) two inputs A [M, K] and B [K, N] of one dtype variable (M, K and N distinct dims of the spec, or numbers
>= 1: a matrix-vector product's [K, 1], a constant the tiling's dimN reads), either both with the same leading batch
dims (one product per batch index) or A [*batch, M, K] against a 2-D B (the batch folded into M: one GEMM
[prod(batch) * M, K] x [K, N], as aclnnMatmul runs a 3-D self against a 2-D mat2; GemmLayout.fold), or one 2-D operand against the
other's batch that does not fold (A 2-D, or A transposed against a 2-D B: that operand's one matrix read for every
batch index, GemmLayout.shared), and whose result reaches exactly one output either through at most one cast with round "rint" or "none" (Fixpipe's rounding, once and to nearest even; a chain
of casts or another round mode is refused), or through a vector epilogue (`_epilogue`, EPI_STEPS): elementwise math
on [*batch, M, N] and [N] / [1, N] inputs (and [M, N] / [*batch, 1, N] ones read against the batch by their shape,
GemmLayout.bcast: docs/design.md "Cube family: epilogue inputs broadcast over the batch"), inputs of one value (fp32,
fp16, bf16), per-row inputs ([M, 1], [*batch, M, 1], an fp32 [M] reshaped to [M, 1]: a value per row, read with
GetValue), scalar constants and float
attributes, ending in at most one cast; and row reductions over N (sum, mean, max:
per-row values, `row_reduces`), whose kernel works by bands of baseM rows x all of N (docs/design.md "Cube family:
row reductions in the epilogue"). Anything else (another reduction, another shape, a non-float attribute) is refused
naming the construct (Unsupported).

Schedule (one Kernel IR class, `lower`; facts: docs/reference/ascendc.md §1.10 cube path and layouts, §1.6 pipes
and HardEvent flags, §1.3 block index; docs/design.md "Cube family"): the output is cut into baseM x baseN blocks
(`mBlocks` x `nBlocks`, the last of each edge a tail), numbered row-major and split over the AI Cores in contiguous
ranges (the first `blocksTail` cores take one more). Per block, K in L1 panels of baseKL1 (the last a tail): A's
[mt, kt1] and B's [kt1, nt] panels GM -> L1 NZ (Nd2Nz, MTE2; a source row is one GM burst of up to baseKL1
elements), each panel in L0 chunks of baseK (the last a tail): L1 -> L0A (ZZ: one LoadData per 16-row fractal row
of the chunk) and L0B (ZN: one transposing LoadData per 16-row fractal row of B), Mmad into the fp32 L0C block
(init on the first chunk, accumulate after: fp32 accumulation over all of K), then Fixpipe L0C -> GM with the cast
to the output type. L1 and L0A / L0B are queues of two blocks (TQue<A1 / B1 / A2 / B2, 2>): the next panel's copy
(MTE2) and the next chunk's loads (MTE1) run while the cube multiplies the current one, and their EnQue / DeQue and
FreeTensor / AllocTensor hand-offs order MTE2 -> MTE1 -> M and back. The lowering places no flag or barrier: the
dependency pass (opgen.kernel.kir_sync, the kernel pass `synchronise`) places what the accesses need beyond the
queues (M -> FIX and back for the one L0C block, each hoisted out of the loops that do not hold its first access;
the AIVs' MTE2 / V / MTE3 hand-offs and their PIPE_V barriers). The fractal-row LoadData loops and the epilogue's
per-row loops are marked `disjoint` (each iteration its own rows). The kernel is launched mixed
(KERNEL_TYPE_MIX_AIC_1_2, blockDim AI Cores of 1 AIC : 2 AIV), or AIC only for a tiling key whose call
leaves the AIVs no work (no K split and no vector epilogue in the call's presences; opgen.tiling.cube). Without a
vector epilogue Fixpipe writes the output and the AIVs have no work (unless K is split). With one, Fixpipe writes the fp32 block to one of two workspace slots of the AI Core, handed to its
two AIVs and back by cross-core flags (FLAG_READY, FLAG_FREE), and each AIV runs the epilogue on half of the block's
rows (`_vector_part`; docs/design.md "Cube family"). An epilogue that begins by adding a [N] bias row has that add
on the cube (`_cube_bias`, GemmLayout.bias): the row GM -> L1 (C1) -> bias table (C2, fp32) per block and the
first K chunk's Mmad starting at it (docs/design.md "Cube family: bias on the cube"); a bias alone then needs no
vector epilogue. A Mmad of one row would select GEMV mode on
the device, so a tail of one row runs as two (the second row's result is never read).

K split (`if kSplit > 1`, the tiling's choice by estimated time; docs/design.md "Cube family: the K split"): units
(block, k range of kLen) over the AI Cores; each unit's fp32 partial block by Fixpipe to its own workspace block;
the AIC's FLAG_PART to its AIVs (on FIX); each AIV waits for it, meets every AIV in a SyncAll, then sums its pass
items' partials in k order (a fixed order: deterministic) and runs the epilogue (or the cast alone) and the store.

Specialisations (docs/design.md "Cube family: layouts chosen by attributes, optional inputs by presence"): one class
per layout the static attributes select (operands transposed by an attribute), the entry choosing it by the tiling
key's attrKey (CubeFamily.lower); the presences of the optional inputs of one attrKey joined into one class
(merge_presences: the epilogue's steps guarded by hasInput<k>_, Fixpipe writing the output directly under the
presences without a vector epilogue).

int8 operands (`GemmLayout.acc` "i32"; docs/design.md "Cube family: int8 operands"): a matmul of two int8 inputs
each cast once to i32 (`_int8_product`; A [M, K], B stored [N, K]) runs the same schedule on int8 fractals (16 x 32:
C0 = 32 along K, kPad a multiple of 32) into an int32 L0C; Fixpipe writes the int32 sums to the output, or to the
workspace slot, whose int32 rows the AIVs cast to fp32 (CAST_RINT) before the epilogue (whose first step is the
spec's cast of the int32 result to f32). No K split. An int32 bias added to the int32 result before that cast
(`_int32_bias`: CANN's INT32 bias, before the dequantisation) is the cube's, the bias table holding int32; an fp32
bias after the cast stays on the AIVs. The output may have its own dtype variable (a class template parameter,
input_tparam).

Permuted GM views (`GemmLayout.views`; docs/design.md "Cube family: operands and output through permuted GM
views"): an operand reached from its input through permutes (and casts) whose stored innermost axis is one of the
matrix's axes, its batch axes adjacent and in order (`_operand_view`), and an output written through a permute that
keeps N innermost (`_output_view`), are read / written at the row pitch and batch stride of the tiling fields
<role>RowStride / <role>BatchStride (`view_fields`), nothing copied; other permutations are refused naming the
tensor and the rule. An int8 Aᵀ is refused for a SoC of the spec without an L1 -> L0A transposing load (the
capability l0a_transpose_load of opgen/platforms' table, `_refuse_without_l0a_transpose`).

Provenance: each statement's comment ends in the `// spec: file.py:N` trace of the spec line it comes from (the
matmul's line for the copies, loads, Mmad and Fixpipe; each epilogue step's own line; the output cast's for the
store), as the rows and attention kernels carry (opgen.ir.locs; GemmLayout.mm_loc / out_loc / cites).

The class's own members (GM tensors aGm_ / bGm_ / cGm_, buffers l1A_ ... l0C_) end in '_', which no spec name may
(opgen.dsl.spec), so an input or output of any valid name never collides with them.

The tiling program (opgen.tiling.cube) chooses baseM / baseN / baseK / baseKL1 so the L1, L0A, L0B and L0C buffers fit for
every shape (its `fits`, proven by opgen.tiling.ub_proof); the op_kernel files are the class printed by
opgen.kernel.kir.to_cpp inside a file skeleton (opgen.codegen.kernel_cube). Both install themselves into this
family when their packages are imported (the kernel stage must not import later stages).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from opgen.errors import IRError
from opgen.ir.dims import Constraint, Fn, Lit, Prod, Sym, Variadic, as_dim
from opgen.dsl.keys import attr_key, form_key
from opgen.ir.dtypes import DTypeVar, dtype_name
from opgen.ir.locs import spec_comment, spec_doc, stamp
from opgen.kernel import kir as K
from opgen.kernel.kir_sync import place_syncs_memo
from opgen.kernel.family import Family, Lowered, register
from opgen.kernel.isa import Op, Pipe
from opgen.kernel.rowlayout import Unsupported
from opgen.kernel.rowmerge import math_as_steps
from opgen.kernel.rowclass import merge_guards, presence_member
from opgen.kernel.rowpresence import cover, join_copies
from opgen.kernel.rowfexpr import parse as parse_scalar
from opgen.kernel.rowprog import (BYTE_DTYPES, ROUND_MODES, ROW_REDUCE, VECTOR_BINARY, VECTOR_UNARY, Instr, RowProgram,
                                  _allocate, _float_literal, instr_op, lower_elementwise, lower_row_reduce)
from opgen.names import cpp_name
from opgen.platforms import having, lacking, soc_platforms

CTYPE = {"f32": "float", "f16": "half", "bf16": "bfloat16_t", "i8": "int8_t", "i32": "int32_t"}
"""C++ element type of each dtype the cube kernel reads (f16 / bf16, int8) or writes (also f32, int32)."""

FIELDS = ("M", "K", "N", "baseM", "baseN", "baseK", "baseKL1", "baseKL1A", "nBlocks", "blocksPerCore", "blocksTail")
"""Tiling-data fields the kernel reads (opgen.tiling.cube computes them; elements and block counts)."""
BATCH_FIELDS = ("mnBlocks",)
"""The fields a batched kernel reads too: output blocks per matrix (its batch index is block // mnBlocks)."""


@dataclass(frozen=True)
class GemmLayout:
    """The roles of a plain matrix product: inputs a [M, K] and b [K, N], output `out` [M, N]; dims (M, K, N) as
    spec dim names; `dtype` the dtype variable of a and b (or their fixed dtype's name when `fixed`); `out_dtype`
    the output's dtype variable name or fixed dtype name (the operands' or "f32"; for int8 operands f16 / bf16 / f32 /
    i32 or a dtype variable of such rows); `epilogue` the ops between the matmul and the output (at most one cast,
    round rint / none); `acc` the L0C accumulator ("f32", or "i32" for int8 operands cast to i32)."""

    a: str
    b: str
    out: str
    dims: tuple
    dtype: str
    out_dtype: str
    epilogue: tuple = ()
    fixed: bool = False   # dtype is a fixed dtype name (f16 / bf16), not a dtype variable
    trans_a: bool = False   # a is stored [K, M] (the matmul's transpose_a)
    trans_b: bool = False   # b is stored [N, K] (the matmul's transpose_b)
    batch: tuple = ()       # leading batch dims of a, b and the output (spec dim names; one matrix product each)
    steps: tuple = ()       # the vector epilogue (EPI_STEPS), () when Fixpipe's cast is all of it
    # One layout serving several presences of the spec's optional inputs (merge_presences; all () otherwise):
    presence: tuple = ()    # the spec's optional inputs (names, spec order): what the presences below range over
    served: tuple = ()      # the presences served (each one bool per name of `presence`)
    step_when: tuple = ()   # per step of `steps`, the presences that run it (() = every one served)
    direct: tuple = ()      # the presences with no vector epilogue: Fixpipe writes the output when K is not split
    fold: tuple = ()        # leading dims of a (and the output) folded into M: [*fold, M, K] x [K, N] is one GEMM of
                            # [prod(fold) * M, K] x [K, N] (names; a variadic group as "*Bd")
    # Provenance (spec "file.py:line", not compared: the emitted `// spec:` traces, opgen.ir.locs):
    mm_loc: str = field(default="", compare=False)    # the matmul's line: the cube's copies, loads, Mmad and Fixpipe
    out_loc: str = field(default="", compare=False)   # the output cast's line (Fixpipe's cast or the epilogue's store)
    cites: tuple = field(default=(), compare=False)   # ((step value, its line), ...) of the epilogue's load / op steps
    shared: str = ""        # "a" / "b": that operand has no batch dims, its one matrix read for every batch index
    bias: tuple = ()        # (input, type tag) of a bias row [N] the cube adds (Mmad from the bias table; `_cube_bias`)
    bias_when: tuple = ()   # the presences whose calls have that bias (() = every one served)
    acc: str = "f32"        # the L0C accumulator: "f32" (f16 / bf16 operands) or "i32" (int8 operands cast to i32)
    views: tuple = ()       # ((role, (row stride, batch stride)), ...): role "a" / "b" / "c" (the output) read or
                            # written through a permuted GM view (_operand_view, _output_view); each stride a tuple
                            # of dim names whose product it is (elements)
    bcast: tuple = ()       # ((input, "shared" / "batched"), ...): epilogue inputs read against the batch otherwise
                            # than their space's default: an [M, N] row input or an [M, 1] per-row one without the
                            # batch dims ("shared": the same rows for every batch index), a [*batch, 1, N] column
                            # vector, a [*batch, 1, 1] value or a [*batch, M, 1] per-row input of a batched product
                            # ("batched": its own per batch index); docs/design.md "Cube family: epilogue inputs
                            # broadcast over the batch"
    # B computed on the AIVs from input `b` (docs/design.md "Cube family: an operand computed on the vector cores";
    # `_prologue`): its steps (EPI_STEPS: ("acc", v) the source's fp32 rows, loads of [N] column inputs, ops, the
    # ("store", v, round mode) to the operands' dtype), the presences running each (merge_presences), their lines
    pro: tuple = ()
    pro_when: tuple = ()
    pro_cites: tuple = field(default=(), compare=False)
    pro_src: str = ""       # the C++ type of the source input b (int8_t)
    pro_group: tuple = ()   # (g, inputs): B computed per group of g rows (a literal or a dim name), the inputs [G, N]
                            # read at row k // g; () per channel

    @property
    def mixed(self) -> bool:
        """Whether some call's blocks go through the workspace slots to the AIVs' vector epilogue (K not split)."""
        return bool(self.steps) and set(self.direct) != set(self.served) if self.presence else bool(self.steps)

    def text(self) -> str:
        """One line (`--dump-after select_family`)."""
        m, k, n = self.dims
        epi = " -> ".join(self.epilogue) or "none"
        if self.steps:
            epi = "on the AIVs: " + "; ".join(_step_text(st) for st in self.steps)
        a = f"{self.a}[{k}, {m}]ᵀ" if self.trans_a else f"{self.a}[{m}, {k}]"
        b = f"{self.b}[{n}, {k}]ᵀ" if self.trans_b else f"{self.b}[{k}, {n}]"
        if self.presence:
            epi = "on the AIVs: " + "; ".join(_step_text(st) + (f" when {_presences_text(w, self.presence)}" if w else "")
                                             for st, w in zip(self.steps, self.step_when))
            if self.direct:
                epi += f"; Fixpipe's cast alone when {_presences_text(self.direct, self.presence)}"
        if self.bias:
            when = f" when {_presences_text(self.bias_when, self.presence)}" if self.bias_when else ""
            epi = f"bias {self.bias[0]} on the cube (bias table){when}; " + (
                epi if self.steps else " -> ".join(self.epilogue) or "none")
        bt = f"[{', '.join(self.batch)}] x " if self.batch else ""
        if self.shared:
            bt += f"({self.a if self.shared == 'a' else self.b} shared by the batch) "
        if self.fold:
            bt = f"[{', '.join(self.fold)}] folded into {m}: "
        acc = "int32 accumulate (exact)" if self.acc == "i32" else "fp32 accumulate"
        views = "".join(f"; {({'a': self.a, 'b': self.b, 'c': self.out})[r]} through a GM view (row stride "
                        f"{'*'.join(rs) or '1'}, batch stride {'*'.join(bs) or '1'})" for r, (rs, bs) in self.views)
        spaces = {st[2]: st[3] for st in self.steps if st[0] == "load"}
        views += "".join(f"; {i} " + _BCAST_WORDS.get((spaces.get(i), k), k) for i, k in self.bcast)
        if self.pro:
            views += "; B computed on the AIVs from " + self.b + (
                f" in groups of {self.pro_group[0]} rows" if self.pro_group else "") + ": " + "; ".join(
                (f"{st[1]} = {self.b} as fp32" if st[0] == "acc" else _step_text(st))
                + (f" when {_presences_text(w, self.presence)}" if w else "")
                for st, w in zip(self.pro, self.pro_when or ((),) * len(self.pro)))
        return (f"layout cube: {bt}{self.out}[{m}, {n}] = {a} x {b} in {self.dtype}, "
                f"{acc}, out {self.out_dtype}; epilogue {epi}{views}")


_BCAST_WORDS = {("row", "shared"): "one matrix for every batch index", ("col", "batched"): "a row per batch index",
                ("one", "batched"): "one value per batch index",
                ("stat", "shared"): "the same per-row values for every batch index",
                ("stat", "batched"): "its own per-row values for each batch index"}
"""GemmLayout.text's words for an input read against the batch, by (its space, GemmLayout.bcast's relation)."""


def _presences_text(when: tuple, names: tuple) -> str:
    """Presences (tuples of bools over `names`) in words: "bias present" / "bias absent", several joined by " or "."""
    return " or ".join(", ".join(f"{n} {'present' if p else 'absent'}" for n, p in zip(names, pr)) or "always"
                       for pr in when)


def _row_dtype(row: dict, var: str) -> str:
    """The short dtype name (f16, bf16, f32, ...) a dtype-table row binds variable `var` to; "?" when it binds none."""
    return dtype_name(row[var]) if row.get(var) is not None else "?"


def _refuse_rows(spec, inp: str, why) -> None:
    """Raises Unsupported at input `inp`'s spec line for the first row of the spec's dtype table (1-based) that
    `why(row)` refuses: `why` returns the rest of the message ("<var> to <dtype>: <the rule>") or None."""
    decl = next((i for i in spec.inputs if i.name == inp), None)
    for r, row in enumerate(spec.dtype_rows, start=1):
        msg = why(row)
        if msg:
            raise Unsupported(inp, decl.loc if decl else "", f"dtype row {r} binds {msg}")


def _operand_rule(mm, a, b, prod) -> str:
    """The rule a matmul whose operands are not two distinct inputs (each through casts and permutes) breaks, in the
    spec's terms: which operand, the op that computes it and its spec line (`the left operand is a reshape (%v3,
    my_op.py:20)`), or the one input both read. `a` / `b`: the input each operand is a cast chain of, or None."""
    if a is not None and a == b:
        return f"both matmul operands are input {a}: the cube family multiplies two distinct inputs"
    side, v = ("left", mm.inputs[0]) if a is None else ("right", mm.inputs[1])
    while v in prod and prod[v].op == "cast":
        v = prod[v].inputs[0]
    node = prod.get(v)
    what = (f"a {node.op} (%{v}" + (f", {node.loc}" if node.loc else "") + ")") if node is not None else f"%{v}"
    return (f"the {side} operand is {what}, not an input: the cube family reads each operand from GM as an input "
            f"lays it out (casts aside; its axes permuted by permutes, a strided GM view), so an operand computed "
            f"in the kernel (a reshape, a slice, arithmetic) is not lowered -- except a right operand [K, N] "
            f"computed elementwise from one int8 [K, N] input and rounded once to f16 / bf16 (b.quantize(value, T, "
            f"mode)), which the vector cores compute into the workspace")


def gemm_layout(g, spec=None, unfold: bool = False) -> GemmLayout:
    """The GemmLayout of fused graph `g` (module docstring). With `spec`, every dtype row must bind the operands'
    dtype variable to f16 or bf16 (the cube reads no other type). unfold: never fold the batch into M (A [*batch, M,
    K] against a 2-D B is then batched with B shared), as when an epilogue input is read against the batch (another
    specialisation's, CubeFamily.lower: one tiling program for all). Raises Unsupported naming the value (or the
    input, at its spec line) and the rule."""
    g = math_as_steps(g)   # tanh and erf as AscendC's Tanh and Erf compute them: vector steps the epilogue lowers
    vals, prod = g.values(), g.producers()
    params = {p.value.name: p for p in g.params if p.kind == "input"}
    outs = g.outputs
    mms = [n for n in g.nodes if n.op == "matmul"]
    where = outs[0][1] if outs else g.name
    if len(mms) != 1:
        raise Unsupported(where, "", f"{len(mms)} matmuls; the cube family lowers one matrix product", whole=True)
    mm = mms[0]
    ta, tb = bool(mm.attr("transpose_a")), bool(mm.attr("transpose_b"))
    seen = {mm.result.name}

    perms = {}   # input -> the permutation its operand reads it through (operand axis i = stored axis perm[i])

    def root(v):
        perm = None
        while v not in params and v in prod and prod[v].op in ("cast", "permute"):
            n = prod[v]
            if n.op == "permute":   # operand axis i -> axis cur[i] of n's result = axis q[cur[i]] of n's input
                q = tuple(n.attr("perm"))
                perm = tuple(q[c] for c in (perm if perm is not None else range(len(q))))
            seen.add(v)
            v = n.inputs[0]
        if v in params and perm is not None:
            perms[v] = perm
        return v if v in params else None

    a, b = root(mm.inputs[0]), root(mm.inputs[1])
    # the operands as the matmul reads them (an input's shape, or its permutation's), each transposed by a
    # permutation of its last two axes, or read through a strided GM view (_operand_view)
    sa, sb, sc = (list(vals[x].type.shape) for x in (mm.inputs[0], mm.inputs[1], mm.result.name))
    (dm, dka), (dkb, dn) = (sa[-2:][::-1] if ta else sa[-2:]), (sb[-2:][::-1] if tb else sb[-2:])
    pro, pro_cites, pro_group = (), (), ()
    if a is not None and b is None and not tb and len(sb) == 2 and mm.inputs[1] in prod \
            and prod[mm.inputs[1]].op == "cast":
        # B computed on the AIVs (the dequantised weight of a weight-quantised matmul): the prologue
        b, pro, pro_cites, pro_group = _prologue(g, mm, params, seen, (dm, dka, dn))
    if a is None or b is None or a == b:
        raise Unsupported(mm.result.name, mm.loc, _operand_rule(mm, a, b, prod))
    ta, view_a = _operand_view(a, list(vals[a].type.shape), perms.get(a), ta, mm)
    tb, view_b = _operand_view(b, list(vals[b].type.shape), perms.get(b), tb, mm) if not pro else (tb, ())
    ba, bb = [str(d) for d in sa[:-2]], [str(d) for d in sb[:-2]]
    fold: tuple = ()
    shared = ""
    out_perm = _output_perm(g, mm)
    if ba == bb:   # one matrix product per batch index
        batch = tuple(sa[:-2])
    elif ba and not bb and not ta and not view_a and out_perm is None and not unfold:
        # [*batch, M, K] x [K, N]: the batch folded into M (one GEMM [batch*M, K])
        batch, fold = (), tuple(sa[:-2])
    elif ba and not bb:   # [*batch, K, M]ᵀ x [K, N]: one product per batch index, B's one matrix for each
        batch, shared = tuple(sa[:-2]), "b"
    elif bb and not ba:   # [M, K] x [*batch, K, N]: A's one matrix for each batch index (a broadcast left operand)
        batch, shared = tuple(sb[:-2]), "a"
    else:
        raise Unsupported(mm.result.name, mm.loc, f"operands of shapes {[str(d) for d in sa]} and "
                          f"{[str(d) for d in sb]} (transposed: {ta}, {tb}): the cube family lowers [*batch, M, K] x "
                          f"[*batch, K, N] with the same batch dims, or one operand 2-D against the other's batch "
                          f"(a 2-D right operand folded into M); batch dims broadcast otherwise are not lowered")
    dims = (dm, dka, dn)
    lead = batch + fold
    named = [d for d in dims if not isinstance(d, Lit)]   # a literal extent (a matrix-vector product's 1) is a constant
    if not all(isinstance(d, Sym) for d in named) or not all(isinstance(d, Lit) and d.value >= 1 for d in dims
                                                              if d not in named) \
            or not all(isinstance(d, (Sym, Variadic)) for d in lead) \
            or str(dkb) != str(dka) or len({str(d) for d in named + list(lead)}) != len(named) + len(lead):
        raise Unsupported(mm.result.name, mm.loc, f"the shapes {[str(d) for d in sa]} x {[str(d) for d in sb]} "
                          f"(transposed: {ta}, {tb}) are not [M, K] x [K, N] over three distinct plain dims (or "
                          f"numbers >= 1)")
    dta, dtb = vals[a].type.dtype, vals[b].type.dtype
    if pro:   # the operand's rounding cast names its dtype: the cube's B must be in A's
        dtb = prod[prod[mm.inputs[1]].inputs[0]].attr("to")
        if dtb != dta:
            raise Unsupported(mm.inputs[1], mm.loc, f"the right operand computed in the kernel is rounded to "
                              f"{dtb.name if isinstance(dtb, DTypeVar) else dtype_name(dtb)}, the left operand is "
                              f"{dta.name if isinstance(dta, DTypeVar) else dtype_name(dta)}: the cube multiplies "
                              f"operands of one dtype")
    fixed = not isinstance(dta, DTypeVar)
    acc = _int8_product(mm, vals, prod, a, b, ta, tb) if fixed and dtype_name(dta) == "i8" else "f32"
    if acc == "i32" and ta and spec is not None:   # int8 Aᵀ: LoadDataWithTranspose into L0A on every SoC
        _refuse_without_l0a_transpose(spec, a, list(vals[a].type.shape), mm)
    if dta != dtb or fixed and dtype_name(dta) not in ("f16", "bf16", "i8"):
        raise Unsupported(mm.result.name, mm.loc, "the operands take one dtype (a dtype variable of f16 / bf16 rows, "
                          "or f16 or bf16; or int8 cast to int32: the int8 product)")
    bias, acc_from = (), None
    if acc == "i32":   # an int32 bias row joining the int32 sums: the bias table's, the add taken off the epilogue
        ib = _int32_bias(g, mm, params, dims[2])
        if ib:
            bias, add = ib
            seen.add(add.result.name)
            acc_from = add.result.name
    try:
        od, odt, out, epi, steps, cites, out_loc, bcast = _epilogue(g, mm, seen, params, dims, lead, dta, acc,
                                                                    out_perm, acc_from, folded=bool(fold))
    except _Unfold:   # an input read against the batch: one product per batch index, B's one matrix for each
        batch, fold, shared = fold, (), "b"
        od, odt, out, epi, steps, cites, out_loc, bcast = _epilogue(g, mm, seen, params, dims, lead, dta, acc,
                                                                    out_perm, acc_from)
    view_c = _output_view(out, [d for d in g.values()[g.outputs[0][1]].type.shape], out_perm)
    if acc == "f32":   # an int8 product's fp32 bias stays on the AIVs (after the conversion of its int32 block)
        bias, steps, epi = _cube_bias(steps, epi, spec, dta)
    if acc == "i32" and isinstance(od, DTypeVar):   # the output's own dtype variable: each row binds f16 / bf16 / f32
        if not steps:
            raise Unsupported(out, "", f"output dtype variable {odt} of an int8 product without a vector epilogue: "
                              f"Fixpipe writes the int32 sums (declare the output i32)")
        if spec is not None:
            _refuse_rows(spec, a, lambda row: f"{odt} to {_row_dtype(row, odt)}, but the output of an int8 product's "
                         f"epilogue is f16, bf16 or f32" if _row_dtype(row, odt) not in ("f16", "bf16", "f32")
                         else None)
    elif acc == "i32" and (odt not in ("f16", "bf16", "f32", "i32") or odt == "i32" and steps):
        raise Unsupported(out, "", f"output dtype {odt} of an int8 product: the cube kernel writes f16, bf16 or f32 "
                          f"from its vector epilogue, or the int32 sum itself (Fixpipe)")
    if acc == "f32" and od != dta and odt not in ("f32", "i8") or odt == "i8" and not steps:
        raise Unsupported(out, "", f"output dtype {odt}: the cube kernel writes the operands' dtype or f32 (int8 from "
                          f"a vector epilogue: fp32 through half to int8)")
    name = dtype_name(dta) if fixed else dta.name
    if spec is not None and not fixed:
        _refuse_rows(spec, a, lambda row: f"{name} to {_row_dtype(row, name)}, but the cube family reads f16 or "
                     "bf16 operands" if _row_dtype(row, name) not in ("f16", "bf16") else None)
    for st in steps:   # an epilogue input of its own dtype variable: each row binds it to the operands' type or f32
        if st[0] == "load" and st[4].startswith(_VAR_TAG):
            var = st[4][len(_VAR_TAG):]
            if fixed:
                raise Unsupported(st[2], "", f"epilogue input {st[2]} of dtype variable {var} beside fixed-dtype "
                                  f"operands: declare it f32 or the operands' dtype")
            if spec is not None:
                _refuse_rows(spec, st[2], lambda row, inp=st[2], var=var: (
                    f"{var} to {_row_dtype(row, var)}: the cube epilogue reads {inp} as the operands' type "
                    f"({_row_dtype(row, name)}) or f32")
                    if _row_dtype(row, var) not in (_row_dtype(row, name), "f32") else None)
    # the template parameter of each such variable: its number among the spec's dtype variables (first appearance
    # without a spec), never its name
    order = list(spec.dtype_vars_) if spec is not None else list(dict.fromkeys(
        st[4][len(_VAR_TAG):] for st in steps if st[0] == "load" and st[4].startswith(_VAR_TAG)))
    steps = tuple(st[:4] + (input_tparam(order.index(st[4][len(_VAR_TAG):])),) + st[5:]
                  if st[0] == "load" and st[4].startswith(_VAR_TAG) else st for st in steps)
    if bias and bias[1].startswith(_VAR_TAG):
        bias = (bias[0], input_tparam(order.index(bias[1][len(_VAR_TAG):])))
    if pro:   # the computed operand's column inputs of dtype variables: T's type or f32, as the epilogue's
        for st in pro:
            if st[0] == "load" and st[4].startswith(_VAR_TAG):
                var = st[4][len(_VAR_TAG):]
                if spec is not None:
                    _refuse_rows(spec, st[2], lambda row, inp=st[2], var=var: (
                        f"{var} to {_row_dtype(row, var)}: the vector cores read {inp} as the operands' type "
                        f"({_row_dtype(row, name)}) or f32")
                        if _row_dtype(row, var) not in (_row_dtype(row, name), "f32") else None)
                if var not in order:
                    order.append(var)
        pro = tuple(st[:4] + (OPERAND_T if st[4][len(_VAR_TAG):] == name else input_tparam(
            order.index(st[4][len(_VAR_TAG):])),) if st[0] == "load" and st[4].startswith(_VAR_TAG) else st
            for st in pro)
        if ta or batch or view_a or view_c:
            raise Unsupported(mm.result.name, mm.loc, "a right operand computed on the vector cores beside a "
                              "transposed, batched or viewed left operand or output: not lowered")
    return GemmLayout(a, b, out, tuple(str(d) for d in dims), name, odt, tuple(epi), fixed, ta, tb,
                      tuple(str(d) for d in batch), steps, fold=tuple(str(d) for d in fold), bias=bias,
                      pro=pro, pro_cites=pro_cites, pro_src=PRO_SOURCES[dtype_name(vals[b].type.dtype)] if pro else "",
                      pro_group=pro_group,
                      shared=shared, acc=acc, mm_loc=mm.loc, out_loc=out_loc or mm.loc, cites=cites,
                      views=tuple((r, v) for r, v in (("a", view_a), ("b", view_b), ("c", view_c)) if v),
                      bcast=tuple(sorted(bcast.items())))


def _stride(stored: list, axis: int) -> tuple:
    """The stride (elements) of axis `axis` of a contiguous tensor of shape `stored`: the names of the dims after it
    (their product; () for the innermost axis)."""
    return tuple(str(d) for d in stored[axis + 1:])


def _operand_view(inp: str, stored: list, perm, trans: bool, mm) -> tuple:
    """(transposed, view) of matmul operand input `inp` stored `stored` and read through permutation `perm` (operand
    axis i = stored axis perm[i]; None: read as stored) by a matmul whose own transpose flag for it is `trans`
    (docs/design.md "Cube family: operands and output through permuted GM views"). The matrix's contiguous axis
    is the stored innermost one: the operand's last axis (transposed stays `trans`) or its second last (a
    permutation swapping the matrix axes: `trans` flipped). view (): the matrices are contiguous (perm keeps the batch
    axes first, in order); else (row stride, batch stride), each a tuple of dim names (_stride): the other matrix
    axis's stride (the Nd2Nz source row pitch) and the last batch axis's (one matrix to the next). Raises
    Unsupported naming the input and the rule when the innermost stored axis is a batch axis (the cube copies rows
    of the matrix's contiguous axis) or the batch axes are not adjacent and in order in the stored shape (one
    batch stride steps through them)."""
    r = len(stored)
    if perm is None or perm == tuple(range(r)):
        return trans, ()
    nb = r - 2
    shown = f"input {inp} stored [{', '.join(str(d) for d in stored)}] read through permute {list(perm)}"
    inner = perm.index(r - 1)   # the operand axis stored innermost
    if inner < nb:
        raise Unsupported(mm.result.name, mm.loc, f"{shown}: its innermost stored axis {stored[r - 1]} is a batch "
                          f"axis of the product; the cube copies each matrix from GM as runs of its contiguous "
                          f"axis (K, or M / N transposed), so the stored innermost axis must be one of the "
                          f"matrix's two axes")
    flip = inner == r - 2
    row = r - 1 if flip else r - 2   # the operand axis read at a stride: the copy's source row pitch
    bpos = perm[:nb]
    if any(bpos[t + 1] != bpos[t] + 1 for t in range(nb - 1)):
        raise Unsupported(mm.result.name, mm.loc, f"{shown}: its batch axes are stored at positions "
                          f"{list(bpos)}, not adjacent and in order, so no one batch stride steps from a matrix to "
                          f"the next")
    if bpos == tuple(range(nb)) and perm[row] == r - 2:   # contiguous matrices: at most a transpose
        return trans != flip, ()
    return trans != flip, (_stride(stored, perm[row]), _stride(stored, bpos[-1]) if nb else ())


def _output_perm(g, mm):
    """The permute node through which the matmul's result (after its epilogue) reaches the output: the output
    itself, or the input of the output's one cast; None without one. A permute elsewhere stays in the epilogue
    (refused there as a construct)."""
    prod, uses = g.producers(), g.uses()
    v = g.outputs[0][1] if len(g.outputs) == 1 else None
    if v is None or v not in prod:
        return None
    n = prod[v]
    if n.op == "cast" and n.inputs[0] in prod and len(uses.get(n.inputs[0], [])) == 1:
        n = prod[n.inputs[0]]
    return n if n.op == "permute" else None


def _output_view(out: str, stored: list, node) -> tuple:
    """The output's view (row stride, batch stride) (_operand_view's form) when the product [*batch, M, N] is
    written through permute `node` (_output_perm; stored axis i = the product's axis perm[i]) into the output stored
    `stored`; () without one or when it is the identity. Raises Unsupported naming the output and the rule when N
    is not stored innermost (Fixpipe writes each row of N as one run) or the batch axes are not adjacent and in
    order."""
    if node is None:
        return ()
    q = tuple(node.attr("perm"))
    r = len(q)
    if q == tuple(range(r)):
        return ()
    pos = [q.index(j) for j in range(r)]   # where the product's axis j is stored
    shown = (f"output {out} stored [{', '.join(str(d) for d in stored)}] written through permute {list(q)} "
             f"({node.loc})" if node.loc else f"output {out} written through permute {list(q)}")
    if pos[r - 1] != r - 1:
        raise Unsupported(node.result.name, node.loc, f"{shown}: the product's columns (N) are not its innermost "
                          f"stored axis; Fixpipe and the AIVs write each row of N as one run")
    bpos = pos[:r - 2]
    if any(bpos[t + 1] != bpos[t] + 1 for t in range(len(bpos) - 1)):
        raise Unsupported(node.result.name, node.loc, f"{shown}: its batch axes are stored at positions "
                          f"{bpos}, not adjacent and in order, so no one batch stride steps from a matrix to the next")
    return (_stride(stored, pos[r - 2]), _stride(stored, bpos[-1]) if bpos else ())


def _refuse_without_l0a_transpose(spec, inp: str, stored: list, mm) -> None:
    """Raises Unsupported when a SoC of the spec (spec.socs) lacks the capability l0a_transpose_load in
    opgen/platforms (an L1 -> L0A transposing load, LoadDataWithTranspose into A2: on arch 2201, not on 3510, whose
    asc-devkit form only asserts that the device does not support it; docs/reference/ascendc.md §1.10 "Transposing
    load of int8 fractals"), which the int8 operand `inp` stored [K, M] (shape `stored`) needs: naming the SoC, its
    arch, the capability, the SoCs that have it and what selects the form (the static attribute and value whose shape
    form it is, `form_by`, else the matmul's transpose_a at its spec line)."""
    bad = lacking(spec.socs, "l0a_transpose_load")
    if not bad:
        return
    decl = next((i for i in spec.inputs if i.name == inp), None)
    what = f"transpose_a of the matmul ({mm.loc})" if mm.loc else "transpose_a of the matmul"
    if decl is not None and decl.form_by:
        shapes = [[str(d) for d in sh] for sh in decl.shapes]
        here = [str(d) for d in stored]
        if here in shapes:
            what = f"the attribute {decl.form_by}={decl.choices[shapes.index(here)]!r}"
    soc = bad[0]
    arch = "/".join(dict.fromkeys(p.arch for p in soc_platforms((soc,))))
    have = having("l0a_transpose_load")
    raise Unsupported(mm.result.name, mm.loc, f"int8 {inp} stored [{', '.join(str(d) for d in stored)}] ({what}) "
                      f"is moved into L0A by LoadDataWithTranspose, which SoC {soc} (arch {arch}) does not have "
                      f"(platforms.json: l0a_transpose_load false; the SoCs with an L1 -> L0A transposing load: "
                      f"{', '.join(have) if have else 'none'}): drop {soc} from the spec's socs, or that value of "
                      f"the attribute")


def _int8_product(mm, vals, prod, a, b, ta, tb) -> str:
    """"i32" when matmul `mm` of int8 inputs `a` and `b` is the int8 product with an int32 accumulator, as a spec
    writes it (docs/design.md "Cube family: int8 operands"): each operand one cast of its input to i32 (the matmul's
    result i32: exact for K < 2^17), A [M, K] or stored [K, M] (transpose_a: its 32 x 32 int8 squares transposed
    into L0A's ZZ by LoadDataWithTranspose) and B stored [N, K] (transposed: its L1 NZ is the L0B ZN already) or
    B [K, N] (its squares transposed into ZN the same way; LoadData's ifTranspose moves 2-byte fractals only).
    Raises Unsupported naming the rule."""
    for x, inp in zip(mm.inputs, (a, b)):
        src = prod.get(x)
        if src is None or src.op != "cast" or src.inputs[0] != inp or dtype_name(vals[x].type.dtype) != "i32":
            raise Unsupported(mm.result.name, mm.loc, f"a matmul of int8 {inp}: the cube multiplies int8 into an "
                              f"int32 accumulator, written b.matmul(x1.cast(i32), x2.cast(i32)) (each operand one "
                              f"cast of its int8 input to i32)")
    return "i32"


def _int32_bias(g, mm, params, n) -> tuple:
    """((input, "i32"), add node) when the int32 result of int8 product `mm` has one use, an add of an int32 input
    of shape [N] or [1, N] (`n`: N) that this add alone reads -- the bias that joins the int32 sums before any
    dequantisation, as aclnnQuantMatmulV4 adds an INT32 bias, (x1 @ x2 + bias) * scale (docs/design.md "Cube family:
    an int32 bias"). The cube adds it: the row GM -> L1 -> bias table (int32, the source type) and the first K
    chunk's Mmad starting at it, so the sums leave L0C with it. () otherwise (the add, if any, is then refused by
    the epilogue's rule for an int32 result)."""
    uses, vals = g.uses(), g.values()
    r = mm.result.name
    us = uses.get(r, [])
    if len(us) != 1 or us[0].op != "add" or len(us[0].inputs) != 2 or us[0].inputs[0] == us[0].inputs[1]:
        return ()
    add = us[0]
    x = add.inputs[1] if add.inputs[0] == r else add.inputs[0]
    shp = [str(d) for d in vals[x].type.shape]
    if x not in params or dtype_name(vals[x].type.dtype) != "i32" or shp not in ([str(n)], ["1", str(n)]) \
            or len(uses.get(x, [])) != 1:
        return ()
    return (x, "i32"), add


BIAS_TYPES = ("f16", "f32")
"""The bias types the cube's bias path takes on arch 2201: L1 -> bias table copies fp32 or converts fp16 to fp32
(bf16 only on arch 3510; docs/reference/ascendc.md §1.10 "Bias on the cube")."""


def _cube_bias(steps: tuple, epi, spec, dta) -> tuple:
    """(bias, steps, epilogue): a vector epilogue that starts by adding a column vector [N] to the matmul result
    (("acc", r), ("load", v, input, "col", tag), ("op", x, "add", {r, v}, "row"), each of r and v read by that add
    only, the input loaded once) has that add moved onto the cube: bias = (input, tag), the Mmad of the first K
    chunk starting at the bias row in the bias table (docs/design.md "Cube family: bias on the cube"), the steps
    continuing from ("acc", x). When what is left is the store alone (a cast rounding to nearest even, or an fp32
    output), Fixpipe does it: steps (), epilogue ("cast",) or (). The add stays on the AIVs ((), steps, epi) when
    some dtype row types the bias other than BIAS_TYPES (an fp32 input, the operands' dtype, or a dtype variable
    of the spec's rows); without `spec` only an fp32 bias or fixed fp16 operands qualify."""
    if not steps or steps[0][0] != "acc":
        return (), steps, epi
    r = steps[0][1]
    loads = {st[1]: st for st in steps if st[0] == "load"}
    reads: dict = {}
    for st in steps:
        for x in (st[3] if st[0] == "op" else (st[1],) if st[0] == "store" else ()):
            reads[x] = reads.get(x, 0) + 1
    add = next((st for st in steps if st[0] == "op" and st[2] == "add" and r in st[3] and len(st[3]) == 2
                and st[3][0] != st[3][1]), None)
    if add is None:
        return (), steps, epi
    v = add[3][1] if add[3][0] == r else add[3][0]
    ld = loads.get(v)
    if ld is None or ld[3] != "col" or reads.get(r) != 1 or reads.get(v) != 1 \
            or sum(1 for st in loads.values() if st[2] == ld[2]) != 1:
        return (), steps, epi
    tag = ld[4]

    def types_ok(var):
        if spec is None:
            return False
        return all(row.get(var) is not None and dtype_name(row[var]) in BIAS_TYPES for row in spec.dtype_rows)

    if tag == OPERAND_T:
        ok = dtype_name(dta) == "f16" if not isinstance(dta, DTypeVar) else types_ok(dta.name)
    elif tag.startswith(_VAR_TAG):
        ok = types_ok(tag[len(_VAR_TAG):])
    else:
        ok = tag == "f32"
    if not ok:
        return (), steps, epi
    rest = tuple(st for st in steps[1:] if st is not ld and st is not add)
    rest = (("acc", add[1]),) + rest
    if len(rest) == 2 and rest[1][0] == "store" and rest[1][1] == add[1] \
            and rest[1][2] in ("", ROUND_MODES["rint"], ROUND_MODES["none"]):
        return (ld[2], tag), (), ["cast"] if rest[1][2] else []
    return (ld[2], tag), rest, epi


OPERAND_T = "T"
"""The kernel class's template parameter of the operands' C++ type (a kernel-internal name, whatever the spec calls
its dtype variable); the load steps' tag of an input read in that type."""

_VAR_TAG = "$"
"""Prefix of a load step's tag naming the spec dtype variable of an epilogue input, until gemm_layout replaces it by
the template parameter (input_tparam): never printed."""


def input_tparam(index: int) -> str:
    """The template parameter of an epilogue input whose dtype is the spec's dtype variable number `index` (0-based,
    in declaration order): a kernel-internal name made of OPERAND_T, the number and an underscore (T1_, T2_, ...),
    so no name a spec chooses reaches the C++ and it never equals OPERAND_T or an AscendC type."""
    return f"{OPERAND_T}{index}_"


def tparam_var(spec, tparam: str) -> str:
    """The name of the spec dtype variable behind template parameter `tparam` (input_tparam's inverse over the
    spec's declared dtype variables). Raises KeyError for a name input_tparam did not make."""
    if not (tparam.startswith(OPERAND_T) and tparam.endswith("_") and tparam[len(OPERAND_T):-1].isdigit()):
        raise KeyError(tparam)
    return list(spec.dtype_vars_)[int(tparam[len(OPERAND_T):-1])]


def lead_dim(name: str):
    """The dim expression of a batch or folded dim name of a GemmLayout: Sym(name), or for a variadic group ("*Bd")
    the product of its dims (Prod("Bd"))."""
    return Prod(name[1:]) if name.startswith("*") else Sym(name)


EPI_OPS = frozenset(set(VECTOR_BINARY) | set(VECTOR_UNARY) | {"neg"})
"""Elementwise ops of the vector epilogue: those the rows family's instruction lowering takes
(opgen.kernel.rowprog.lower_elementwise); `tanh` and `erf` are rewritten into them first
(opgen.kernel.rowmerge.math_as_steps)."""
EPI_STEPS = """The vector epilogue as steps (GemmLayout.steps), in graph order: ("acc", value) the matmul's fp32 result,
("load", value, input, space, dtype) an input read as fp32 (space "row": [*batch, M, N], or [M, N] read by every batch
index; "col": [N] or [1, N], or [*batch, 1, N] one row per batch index (GemmLayout.bcast says which); "stat": one
value per row, an [M, 1] input or an fp32 [M] one reshaped to [M, 1] (the same for every batch index), or a
[*batch, M, 1] one; "one": [] / [1], read by the scalar unit),
("const", value, C++ float literal), ("attr", name) a runtime float attribute, ("op", result, op, inputs, space) an elementwise op, ("store", value, round)
the output written from `value` (round: the cast's round mode; "" for an fp32 output), ("sstore", value, output) a
per-row fp32 value written to a second output [*batch, M] / [*batch, M, 1] (docs/design.md "Cube family: a per-row
second output"). A row reduction over N is an
"op" step of op ROW_REDUCE_OPS[kind] ("row_sum", "row_mean", "row_max") with one row input and space "stat" (one
value per row; docs/design.md "Cube family: row reductions in the epilogue")."""
ROW_REDUCE_OPS = {"sum": "row_sum", "mean": "row_mean", "max": "row_max"}
"""The epilogue step op of each row reduction kind over N (lowered by rowprog.lower_row_reduce, the row programs'
one reduction lowering)."""
_CONSTRUCTS = {"reduce": "a reduction", "matmul": "a second matmul", "permute": "a permute",
               "select": "`b.where`", "gather": "a gather by index", "transpose": "a transpose",
               "broadcast": "a broadcast", "reshape": "a reshape", "concat": "a concat"}
"""The user's name of an op the epilogue refuses (else the op's own name)."""


def row_reduces(lay: GemmLayout) -> bool:
    """Whether the layout's vector epilogue reduces rows over N (a ROW_REDUCE_OPS step): its kernel works by bands,
    baseM rows x all N (docs/design.md "Cube family: row reductions in the epilogue")."""
    return any(st[0] == "op" and st[2] in ROW_REDUCE_OPS.values() for st in lay.steps)


def _dim_max(g, dim: str):
    """The largest value the graph's constraints allow dim `dim` (its `dim <= c` constraint), None when unbounded."""
    his = [int(c.rhs.value) for c in getattr(g, "constraints", ()) if getattr(c, "op", "") == "<="
           and str(c.lhs) == dim and isinstance(c.rhs, Lit)]
    return min(his) if his else None


def _step_text(st) -> str:
    if st[0] == "acc":
        return f"{st[1]} = workspace fp32"
    if st[0] == "load":
        return f"{st[1]} = load {st[2]} ({st[3]})"
    if st[0] == "const":
        return f"{st[1]} = {st[2]}"
    if st[0] == "attr":
        return f"{st[1]} = attribute"
    if st[0] == "op":
        return f"{st[1]} = {st[2]}({', '.join(st[3])})"
    if st[0] == "sstore":
        return f"store {st[1]} to {st[2]} (one fp32 value per row)"
    return f"store {st[1]}" + (f" ({st[2]})" if st[2] else "")


class _Unfold(Unsupported):
    """An epilogue input a folded GEMM cannot read (its rows or columns depend on the batch index while a block of
    the folded [batch * M, K] x [K, N] product crosses batch indices): gemm_layout lowers the layout batched instead,
    the 2-D operand shared."""


def _epilogue(g, mm, seen, params, dims, batch, dta, acc: str = "f32", out_perm=None, acc_from=None,
              folded: bool = False) -> tuple:
    """(output dtype, its name, output name, Fixpipe epilogue, vector steps, ((step value, spec line), ...) of the
    load / op steps, the output cast's spec line or "", {input: "shared" / "batched"} the inputs read against the
    batch otherwise than their space says (GemmLayout.bcast)) of the ops after matmul `mm` in `g`:
    a matmul result only cast to the output is Fixpipe's (steps ()); anything else must be elementwise math on
    [*batch, M, N] rows, [N] / [1, N] column inputs, [M] inputs as [M, 1] per-row values and constants ending in at
    most one cast (EPI_STEPS). Raises
    Unsupported naming the value and the construct. acc "i32" (an int8 product): the int32 result either is the
    output itself (Fixpipe writes it) or is first cast to f32 -- that cast is the vector epilogue's ("acc", value),
    the AIVs converting the int32 block (docs/design.md "Cube family: int8 operands"). out_perm: the permute node
    through which the result reaches the output (_output_perm), the output's GM view: its value stands for its
    input (an [M, N] row), the store writing through the view. acc_from: the value the epilogue starts from
    instead of the matmul's result (the add of an int32 bias the cube makes, `_int32_bias`; it is in `seen`).
    folded: `batch` is folded into M (GemmLayout.fold); an input read against the batch then raises _Unfold."""
    vals, uses, outs = g.values(), g.uses(), g.outputs
    r = acc_from or mm.result.name
    dm, dn = str(dims[0]), str(dims[2])
    row_shape = [str(d) for d in batch] + [dm, dn]
    side = ()   # per-row outputs beside the [*batch, M, N] one (docs/design.md "Cube family: a per-row second output")
    if len(outs) > 1:
        rows_out = [o for o in outs if [str(d) for d in vals[o[1]].type.shape] == row_shape]
        if len(rows_out) != 1:
            raise Unsupported(outs[-1][1], "", f"{len(outs)} outputs, {len(rows_out)} of them [{', '.join(row_shape)}]"
                              f": the cube family writes one [M, N] output and per-row values beside it", whole=True)
        side = tuple(o for o in outs if o is not rows_out[0])
        outs = rows_out
    elif len(outs) != 1:
        raise Unsupported(r, "", "no output; the cube family writes one", whole=True)
    out, ov = outs[0]
    down, stack = set(), [r]
    while stack:
        for n in uses.get(stack.pop(), []):
            if n.result.name not in down:
                down.add(n.result.name)
                stack.append(n.result.name)
    rest = [n for n in g.nodes if n.result.name not in seen]
    to_f32 = None   # an int8 product's one cast of its int32 result to f32: where the vector epilogue starts
    if acc == "i32" and rest:
        us = uses.get(r, [])
        if len(us) != 1 or us[0].op != "cast" or dtype_name(us[0].attr("to")) != "f32":
            raise Unsupported(us[0].result.name if us else r, us[0].loc if us else mm.loc,
                              "the int32 result of an int8 product is converted to f32 once (its one use) before "
                              "the epilogue's math")
        to_f32 = us[0]
    alias = {}   # the output permute's value -> its input (written through the output's view)
    if out_perm is not None:
        alias[out_perm.result.name] = out_perm.inputs[0]
    if all((n.op == "cast" or n is out_perm) and n.result.name in down for n in rest) \
            and not (acc == "i32" and [n for n in rest if n is not out_perm]):
        # Fixpipe's cast (or nothing)
        v, epi, cast_loc = r, [], ""
        while True:
            us = uses.get(v, [])
            if v == ov and not us:
                break
            if len(us) != 1 or v == ov:
                raise Unsupported(v, us[0].loc if us else "", f"the matmul result feeds {len(us)} uses; the cube "
                                  f"family reads it once")
            c = us[0]
            if c is out_perm:   # the output's view: Fixpipe writes through it
                v = c.result.name
                continue
            if epi:
                raise Unsupported(c.result.name, c.loc, "a second cast after the matmul: Fixpipe rounds once, "
                                  "straight to the output dtype, so the cube family takes at most one cast of the "
                                  "matmul result")
            mode = c.attr("round") or "none"
            if mode not in ("rint", "none"):
                raise Unsupported(c.result.name, c.loc, f"cast of the matmul result with round={mode!r}: Fixpipe "
                                  f"rounds to nearest even only (round 'rint', or 'none' for an exact cast)")
            v, cast_loc = c.result.name, c.loc
            epi.append("cast")
        od = vals[v].type.dtype
        return od, (od.name if isinstance(od, DTypeVar) else dtype_name(od)), out, epi, (), (), cast_loc, {}
    lead = row_shape[:-2]
    attrs = {p.value.name for p in g.params if p.kind != "input"}
    bcast = {}   # input -> "shared" ([M, N] or [M, 1]: read by every batch index) / "batched" ([*batch, 1, N],
    # [*batch, 1, 1], [*batch, M, 1] of a batched product): GemmLayout.bcast

    def space_of(v, loc):
        shp = [str(d) for d in vals[v].type.shape]
        front = shp[:-2]   # the dims before the matrix's two: the batch dims, or 1s (broadcast over the batch)
        ones = all(d == "1" for d in front)
        if shp[-2:] == [dm, dn] and (front == lead or ones):
            return "row"
        if shp and shp[-1] == dn and (len(shp) == 1 or shp[-2] == "1") and (ones or front == lead):
            return "col"
        if shp[-2:] == [dm, "1"] and (front == lead or ones):
            return "stat"   # one value per row: [M, 1] (the same for every batch index) or [*batch, M, 1]
        if all(d == "1" for d in shp) or lead and front == lead and shp[-2:] == ["1", "1"]:
            return "one"   # [] or [1]: one value (a per-tensor scale), or one per batch index, by the scalar unit
        raise Unsupported(v, loc, f"an operand of shape [{', '.join(shp)}] in the matmul's epilogue: it reads "
                          f"[{', '.join(row_shape)}] tensors" + (f" and [{dm}, {dn}] ones broadcast over the batch"
                                                                 if lead else "")
                          + f", [{dn}] / [1, {dn}] column vectors" + (f" and [{', '.join(lead)}, 1, {dn}] ones per "
                                                                      f"batch index" if lead else "")
                          + f", [{dm}, 1] per-row values" + (f" and [{', '.join(lead)}, {dm}, 1] ones per batch index"
                                                               if lead else "")
                          + ", inputs of one value ([] / [1]"
                          + (f"; [{', '.join(lead)}, 1, 1] one per batch index" if lead else "") + ") and constants")

    def batch_rel(src, sp, loc):
        # how input `src` of space `sp` is read against the batch: an [M, N] input without the batch dims is one
        # matrix for every batch index, a [*batch, 1, N] column vector one row per batch index, a [*batch, 1, 1]
        # input one value per batch index; each needs the batch unfolded (one block of a folded GEMM crosses batch
        # indices). docs/design.md "Cube family: epilogue inputs broadcast over the batch"
        # a [*batch, M, 1] per-row input is "batched" too, but a folded GEMM reads it as it is: its flat rows are
        # the folded product's rows
        front = [str(d) for d in vals[src].type.shape][:-2]
        rel = "shared" if sp in ("row", "stat") and lead and front != lead else \
            "batched" if sp in ("col", "one", "stat") and lead and front == lead else ""
        if rel and folded:
            if not (sp == "stat" and rel == "batched"):
                raise _Unfold(src, loc, "an epilogue input read against the batch")
            return   # a [*batch, M, 1] input of a folded product: read at the product's own (flat) rows
        if rel:
            bcast[src] = rel

    space, steps, stored, cites, out_loc = {r: "row"}, [("acc", r)], False, {}, ""
    salias = {}   # a reshape of a per-row value (a row reduction's [.., M] as [.., M, 1]) -> the value it shows
    reduced = {}  # a row reduction's value -> (its words, its spec line): named when it is the output

    def _stat_shape(v, shared: bool = True):   # one value per row of the [*batch, M, N] rows: [*batch, M, 1] or
        # [*batch, M]; shared: also [M, 1] / [M], the same per-row values for every batch index (an input's)
        shp = [str(d) for d in vals[v].type.shape]
        return shp in (row_shape[:-1] + ["1"], row_shape[:-1]) or shared and shp in ([dm, "1"], [dm])
    if to_f32 is not None:   # the cast of the int32 result to f32 is the fp32 block the epilogue starts from
        rest = [n for n in rest if n is not to_f32]
        space, steps = {to_f32.result.name: "row"}, [("acc", to_f32.result.name)]
    for n in rest:
        v = n.result.name
        cites[v] = n.loc
        if n is out_perm:   # the output's view: its value is its input's rows, written through the view
            if space.get(n.inputs[0]) != "row":
                raise Unsupported(v, n.loc, "the output permute of a value that is not an [M, N] row")
            space[v] = "row"
            continue
        if n.op == "const":
            if list(vals[v].type.shape):
                raise Unsupported(v, n.loc, "a constant tensor in the matmul's epilogue (a scalar constant only)")
            steps.append(("const", v, _float_literal(n.attr("value"))))
            space[v] = "scalar"
            continue
        if n.op == "cast" and v not in down:
            src = n.inputs[0]
            to = n.attr("to")
            if src not in params or dtype_name(to) != "f32":
                raise Unsupported(v, n.loc, "a cast in the matmul's epilogue other than an input's to f32 or the "
                                  "final one to the output")
            sd = vals[src].type.dtype
            fixed16 = not isinstance(sd, DTypeVar) and dtype_name(sd) in ("f16", "bf16")
            if sd == dta and acc == "i32" or sd != dta and not isinstance(sd, DTypeVar) \
                    and dtype_name(sd) != "f32" and not fixed16:
                raise Unsupported(src, n.loc, "an epilogue input of another dtype than the matmul operands' (f16 / "
                                  "bf16), f16, bf16, f32 or a dtype variable bound to one of them")
            space[v] = space_of(src, n.loc)
            batch_rel(src, space[v], n.loc)
            # the operands' type T, fp32, a fixed f16 / bf16 (its C++ type), or another dtype variable (its rows
            # bind it to T's type or f32: gemm_layout)
            steps.append(("load", v, src, space[v], OPERAND_T if sd == dta else _VAR_TAG + sd.name
                          if isinstance(sd, DTypeVar) else CTYPE[dtype_name(sd)] if fixed16 else "f32"))
            continue
        if n.op == "reshape" and n.inputs[0] in params and space_of(v, n.loc) == "stat":
            src = n.inputs[0]   # an fp32 [M] input as [M, 1]: one value per row of the block (a pertoken scale)
            if [str(d) for d in vals[src].type.shape] != [dm] or isinstance(vals[src].type.dtype, DTypeVar) \
                    or dtype_name(vals[src].type.dtype) != "f32":
                raise Unsupported(v, n.loc, f"a per-row value of the matmul's epilogue is an fp32 [{dm}] input "
                                  f"reshaped to [{dm}, 1]")
            space[v] = "stat"
            batch_rel(src, "stat", n.loc)
            steps.append(("load", v, src, "stat", "f32"))
            continue
        if n.op == "cast" and v == ov:
            mode = n.attr("round") or "none"
            src = n.inputs[0]
            if space.get(src) != "row" or mode not in ROUND_MODES:
                raise Unsupported(v, n.loc, f"the output cast (round={mode!r}) of a value that is not an [M, N] row")
            steps.append(("store", alias.get(src, src), ROUND_MODES[mode]))
            stored, out_loc = True, n.loc
            continue
        if n.op == "reshape" and space.get(n.inputs[0]) == "stat" and _stat_shape(v):
            salias[v] = salias.get(n.inputs[0], n.inputs[0])   # a per-row value as [.., M] or [.., M, 1]: itself
            space[v] = "stat"
            continue
        if n.op == "reduce" and space.get(n.inputs[0]) in ("row", "stat", "col", "scalar"):
            x = n.inputs[0]
            kind = n.attr("kind")
            xs = [str(d) for d in vals[x].type.shape]
            axes = sorted({a % len(xs) for a in (n.attr("axes") or ())}) if xs else []
            over = ", ".join(xs[a] for a in axes)
            what = f"a reduction ({kind} over {over}) in the matmul's epilogue"
            if space[x] != "row" or axes != [len(xs) - 1]:
                raise Unsupported(v, n.loc, f"{what}: the epilogue reduces an [M, N] row of the result over N (its "
                                  f"last axis) only")
            if kind not in ROW_REDUCE_OPS:
                raise Unsupported(v, n.loc, f"{what}: the row reductions are the sum, the mean and the maximum (a "
                                  f"minimum is -max(-x))")
            if not _stat_shape(v):
                raise Unsupported(v, n.loc, f"{what} whose result is not one value per row")
            space[v] = "stat"
            reduced[v] = (what, n.loc)
            steps.append(("op", v, ROW_REDUCE_OPS[kind], (salias.get(x, x),), "stat"))
            continue
        if n.op in EPI_OPS:
            for x in n.inputs:
                if x in attrs and x not in space:
                    if list(vals[x].type.shape) or isinstance(vals[x].type.dtype, DTypeVar) \
                            or dtype_name(vals[x].type.dtype) != "f32":
                        raise Unsupported(v, n.loc, f"the attribute {x} in the matmul's epilogue: a float attribute "
                                          f"only")
                    space[x] = "scalar"
                    steps.append(("attr", x))
                if x not in space and x in params:
                    sd = vals[x].type.dtype
                    if isinstance(sd, DTypeVar) or dtype_name(sd) != "f32":
                        raise Unsupported(x, n.loc, "an epilogue input used without a cast to f32")
                    sp = space_of(x, n.loc)
                    batch_rel(x, sp, n.loc)
                    steps.append(("load", x, x, sp, "f32"))
                    space[x] = "scalar" if sp == "one" else sp   # one value: a scalar operand of the math
                    cites[x] = n.loc   # an fp32 input read as it is: the line of the op that reads it
                if x in seen and x not in space:
                    raise Unsupported(v, n.loc, f"a matmul operand (%{x}) read again in the matmul's epilogue, "
                                      f"which reads [M, N] tensors, [N] column vectors and constants")
                if x not in space:
                    raise Unsupported(v, n.loc, f"%{x} in the matmul's epilogue is not an input, a constant or "
                                      f"elementwise math on them")
            sps = {space[x] for x in n.inputs}
            if "stat" in sps and "col" in sps and "row" not in sps:
                raise Unsupported(v, n.loc, "a per-row value of the matmul's epilogue combined with a column vector "
                                  "into a new [M, N] value (it multiplies or offsets the block's rows)")
            space[v] = "row" if "row" in sps else "col" if "col" in sps else "stat" if "stat" in sps else "scalar"
            if space[v] == "stat" and not _stat_shape(v) or space[v] in ("row", "col") \
                    and space_of(v, n.loc) != space[v]:
                raise Unsupported(v, n.loc, "a broadcast in the matmul's epilogue other than a column vector over "
                                  "the rows or a per-row value over the row")
            steps.append(("op", v, n.op, tuple(salias.get(x, x) for x in n.inputs), space[v]))
            continue
        what = _CONSTRUCTS.get(n.op, f"`{n.op}`")
        if n.op == "reduce":
            shp = [str(d) for d in vals[n.inputs[0]].type.shape]
            over = ", ".join(shp[a] for a in (n.attr("axes") or ()) if -len(shp) <= a < len(shp))
            what = f"a reduction ({n.attr('kind')} over {over})"
        raise Unsupported(v, n.loc, f"{what} in the matmul's epilogue: the cube family's vector epilogue is "
                          f"elementwise math on the result ({', '.join(sorted(EPI_OPS))}, casts, [N] / [M, N] "
                          f"inputs, constants, float attributes)")
    if not stored:
        if space.get(ov) == "stat":   # a per-row output ([M] or [M, 1]): the epilogue writes [M, N] rows only
            what, loc = reduced.get(salias.get(ov, ov), ("a per-row value", cites.get(ov, "")))
            raise Unsupported(ov, loc, f"{what} as the output: the cube family's epilogue writes [M, N] rows, not a "
                              f"value per row")
        if space.get(ov) != "row" or dtype_name(vals[ov].type.dtype) != "f32":
            raise Unsupported(ov, "", "the output is not computed from the matmul result")
        steps.append(("store", alias.get(ov, ov), ""))
    for name, sv in side:   # a per-row fp32 value of the epilogue (a dynamic quantisation's scale) to its output
        pv = salias.get(sv, sv)
        sd = vals[sv].type.dtype
        if space.get(sv) != "stat" or not _stat_shape(sv, shared=False):
            raise Unsupported(sv, cites.get(sv, ""), f"output {name} of shape [{', '.join(str(d) for d in vals[sv].type.shape)}]"
                              f": beside the [M, N] output the cube family writes per-row values ([{', '.join(row_shape[:-1])}]"
                              f" or [{', '.join(row_shape[:-1] + ['1'])}]) computed in the epilogue")
        if isinstance(sd, DTypeVar) or dtype_name(sd) != "f32":
            raise Unsupported(sv, cites.get(sv, ""), f"per-row output {name} of dtype {sd}: the epilogue writes its "
                              f"per-row values in fp32 (declare the output f32)")
        steps.append(("sstore", pv, name))
    od = vals[ov].type.dtype
    named = tuple((st[1], cites[st[1]]) for st in steps if st[0] in ("load", "op") and cites.get(st[1]))
    return od, (od.name if isinstance(od, DTypeVar) else dtype_name(od)), out, ["vector"], tuple(steps), named, \
        out_loc, bcast


PRO_SOURCES = {"i8": "int8_t"}
"""Source dtypes of an operand computed on the AIVs (`_prologue`) and their C++ types: the AIVs convert int8 to half
(Cast, exact) and half to fp32 (docs/reference/ascendc.md §1.12: arch 2201 has no int8 -> fp32 Cast)."""


def _prologue(g, mm, params, seen: set, dims) -> tuple:
    """(source input, steps, ((value, spec line), ...), group: () or (g, the inputs read per group)) of the cube's
    right operand when it is computed on the vector cores from one input (docs/design.md "Cube family: an operand
    computed on the vector cores"): the operand is a cast to f32 of a rounding cast (round mode of ROUND_MODES) to
    f16 / bf16 / a dtype variable of a value u computed elementwise (EPI_OPS) from the source -- an int8 input of the
    operand's shape [K, N], cast to f32 (directly or through f16, both exact) -- with [N] / [1, N] column inputs
    (each cast to f32, or fp32) and scalar constants; or per group of g rows (a literal or a plain dim): B's rows
    reshaped to [G, g, N], inputs [G, N] (cast to f32, reshaped to [G, 1, N]) broadcast over each group's rows, the
    result reshaped back to [K, N]. steps in EPI_STEPS form: ("acc", v) the source's fp32 rows, ("load", ...) the
    column inputs, ("const", ...), ("op", ...), ("store", u, round mode). Adds every value of the computation to
    `seen`. Raises Unsupported naming the value, its spec line and the rule (another source dtype or shape, a second
    source, a value of the computation read elsewhere, an op the vector cores do not lower here)."""
    vals, prod, uses = g.values(), g.producers(), g.uses()
    dk, dn = str(dims[1]), str(dims[2])
    chain, v = [], mm.inputs[1]
    while v in prod and prod[v].op == "cast" and v not in params:
        chain.append(prod[v])
        v = prod[v].inputs[0]
    narrow = [c for c in chain if dtype_name(c.attr("to")) != "f32"]
    if len(narrow) != 1 or chain[0] is narrow[0] or len(chain) != 2 \
            or (narrow[0].attr("round") or "none") not in ROUND_MODES \
            or dtype_name(narrow[0].attr("to")) not in ("f16", "bf16") and not isinstance(narrow[0].attr("to"),
                                                                                        DTypeVar):
        node = prod.get(mm.inputs[1])
        raise Unsupported(mm.inputs[1], node.loc if node is not None else mm.loc,
                          "the right operand computed in the kernel is rounded once to f16 / bf16 (a dtype variable "
                          "of them) and widened to f32 (b.quantize(value, T, mode)), the value elementwise math on "
                          "one int8 [K, N] input, [N] column inputs and constants")
    store = narrow[0]
    u = v
    # the computation: every node u depends on, up to the inputs (graph order is topological)
    need, stack = set(), [u]
    while stack:
        x = stack.pop()
        if x in need or x in params or x not in prod:
            continue
        need.add(x)
        stack.extend(prod[x].inputs)
    nodes = [n for n in g.nodes if n.result.name in need]
    inside = need | {c.result.name for c in chain}
    attrs = {p.value.name for p in g.params if p.kind != "input"}
    src, steps, space, cites = None, [], {}, {}
    alias = {}     # a reshape of B's rows into groups ([G, g, N]) or back, or of a group-row input ([G, 1, N]): its input
    group = {}     # "size": the group's rows g (a dim expression's text), "count": G; set by the first grouping
    grouped = []   # the inputs with one row per group ([G, N]: read at row k // g)

    def shape(x):
        return [str(d) for d in vals[x].type.shape]

    def col(x):
        shp = shape(x)
        return bool(shp) and shp[-1] == dn and all(d == "1" for d in shp[:-1])

    def rows3(shp):   # B's rows in groups: [G, g, N] of the one grouping
        return len(shp) == 3 and shp[2] == dn and group and shp[:2] == [group["count"], group["size"]]

    def grow(shp):    # a group-row input as the grouped rows read it: [G, N] or [G, 1, N]
        return group and shp in ([group["count"], dn], [group["count"], "1", dn])

    def repeated(shp):   # a group-row value repeated to B's rows [K, N] (the unit lies within one group)
        return group and group["via"] == "repeat" and shp == [dk, dn]

    for n in nodes:   # the grouping: the first reshape of B's rows to [G, g, N] (g a literal or a plain dim), or
        # the first repeat of a [G, N] input's rows g times to B's K rows (its last group partial when g does not
        # divide K: G = ceil(K / g), the unit's rows clipped at K)
        shp = shape(n.result.name)
        if n.op == "reshape" and shape(n.inputs[0]) == [dk, dn] and len(shp) == 3 and shp[2] == dn \
                and (shp[1].isdigit() or shp[1].isidentifier()):
            group.update(count=shp[0], size=shp[1], via="reshape")
            break
        if n.op == "repeat_interleave" and shp == [dk, dn] and n.attr("axis") in (0, -2) \
                and len(shape(n.inputs[0])) == 2 and shape(n.inputs[0])[1] == dn:
            reps = n.attr("repeats")
            if shape(n.inputs[0])[0] != str((as_dim(dims[1]) + Lit(reps - 1)) // Lit(reps)):
                # the kernel reads group row k // g for every k < K: the input must have ceil(K / g) rows, which the
                # aclnn layer's shape check then guarantees
                raise Unsupported(n.inputs[0], n.loc, f"a group-row input repeated {reps} times to B's {dk} rows has "
                                  f"[{shape(n.inputs[0])[0]}, {dn}] rows: declare it [({dk} + {reps - 1}) // {reps}, "
                                  f"{dn}] (ceil({dk} / {reps}) rows, the last group partial)")
            group.update(count=shape(n.inputs[0])[0], size=str(reps), via="repeat")
            break
    for n in nodes:
        r = n.result.name
        cites[r] = n.loc
        if any(w.result.name not in inside for w in uses.get(r, [])):
            raise Unsupported(r, n.loc, "a value of the right operand's computation is read again outside it: the "
                              "operand computed on the vector cores exists only in the workspace the cube reads")
        if n.op == "reshape" and space.get(n.inputs[0]) == "row":
            shp = shape(r)
            if shp == [dk, dn] or rows3(shp):
                alias[r] = alias.get(n.inputs[0], n.inputs[0])
                space[r] = "row"
                continue
            raise Unsupported(r, n.loc, f"a reshape of the right operand's rows to [{', '.join(shp)}]: it takes B "
                              f"[{dk}, {dn}] in groups of rows ([G, g, {dn}], g a constant or a dim) and back")
        if n.op == "reshape" and space.get(n.inputs[0]) == "grow" and grow(shape(r)):
            alias[r] = alias.get(n.inputs[0], n.inputs[0])
            space[r] = "grow"
            continue
        if n.op == "repeat_interleave":   # a group's row over its rows: the unit (within one group) reads it once
            if not (space.get(n.inputs[0]) == "grow" and group.get("via") == "repeat" and shape(r) == [dk, dn]
                    and n.attr("axis") in (0, -2) and str(n.attr("repeats")) == group["size"]
                    and shape(n.inputs[0]) == [group["count"], dn]):
                raise Unsupported(r, n.loc, f"a repeat in the right operand's computation other than a group-row "
                                  f"input [G, {dn}] (cast to f32) repeated g times along its rows to B's [{dk}, {dn}] "
                                  f"(one g for every input)")
            alias[r] = alias.get(n.inputs[0], n.inputs[0])
            space[r] = "grow"
            continue
        if n.op == "reshape" and n.inputs[0] in params and grow(shape(r)) and grow(shape(n.inputs[0])):
            raise Unsupported(n.inputs[0], n.loc, "a group-row input of the right operand's computation is cast to "
                              "f32 before its reshape")
        if n.op == "cast" and n.inputs[0] in params:
            x = n.inputs[0]
            sd = vals[x].type.dtype
            to = dtype_name(n.attr("to"))
            if grow(shape(x)) and to == "f32":   # one row per group ([G, N]): read at row kb0 / g of the unit
                fixed16 = not isinstance(sd, DTypeVar) and dtype_name(sd) in ("f16", "bf16")
                if not (isinstance(sd, DTypeVar) or fixed16 or dtype_name(sd) == "f32"):
                    raise Unsupported(x, n.loc, "a group-row input of the right operand's computation is f16, bf16, "
                                      "f32 or a dtype variable of them, cast to f32")
                space[r] = "grow"
                grouped.append(x)
                steps.append(("load", r, x, "col", _VAR_TAG + sd.name if isinstance(sd, DTypeVar)
                              else CTYPE[dtype_name(sd)] if fixed16 else "f32"))
                continue
            if shape(x) == [dk, dn]:   # the source
                if isinstance(sd, DTypeVar) or dtype_name(sd) not in PRO_SOURCES:
                    raise Unsupported(x, n.loc, f"the source of the right operand computed in the kernel is "
                                      f"{sd.name if isinstance(sd, DTypeVar) else dtype_name(sd)}: the vector cores "
                                      f"convert an int8 [{dk}, {dn}] input (Cast int8 -> half -> fp32)")
                if src is not None and src != x:
                    raise Unsupported(x, n.loc, f"a second [{dk}, {dn}] input ({src}, {x}) in the right operand's "
                                      "computation: it reads one source")
                if to == "f16" and all(w.op == "cast" and dtype_name(w.attr("to")) == "f32"
                                       for w in uses.get(r, [])):
                    space[r] = "via16"   # int8 -> f16 (exact), then to f32: the source's fp32 rows
                    src = x
                    continue
                if to != "f32":
                    raise Unsupported(r, n.loc, "the int8 source of the right operand is cast to f32 (or to f16, "
                                      "then f32)")
                src = x
                space[r] = "row"
                steps.append(("acc", r))
                continue
            if not col(x) and all(d == "1" for d in shape(x)):
                raise Unsupported(x, n.loc, "an input of one value ([] / [1]: a per-tensor scale or offset) in the "
                                  f"right operand's computation: not lowered (it reads [{dn}] / [1, {dn}] column "
                                  "inputs)")
            if not col(x):
                raise Unsupported(x, n.loc, f"an input of shape [{', '.join(shape(x))}] in the right operand's "
                                  f"computation: it reads the [{dk}, {dn}] source and [{dn}] / [1, {dn}] column "
                                  f"inputs")
            fixed16 = not isinstance(sd, DTypeVar) and dtype_name(sd) in ("f16", "bf16")
            if to != "f32" or not (isinstance(sd, DTypeVar) or fixed16 or dtype_name(sd) == "f32"):
                raise Unsupported(x, n.loc, "a column input of the right operand's computation is f16, bf16, f32 "
                                  "or a dtype variable of them, cast to f32")
            space[r] = "col"
            steps.append(("load", r, x, "col", _VAR_TAG + sd.name if isinstance(sd, DTypeVar)
                          else CTYPE[dtype_name(sd)] if fixed16 else "f32"))
            continue
        if n.op == "cast" and space.get(n.inputs[0]) == "via16" and dtype_name(n.attr("to")) == "f32":
            space[r] = "row"
            steps.append(("acc", r))
            continue
        if n.op == "const" and not shape(r):
            steps.append(("const", r, _float_literal(n.attr("value"))))
            space[r] = "scalar"
            continue
        if n.op in EPI_OPS:
            for x in n.inputs:
                if x in params and x not in space:
                    if all(d == "1" for d in shape(x)):
                        raise Unsupported(x, n.loc, "an input of one value ([] / [1]: a per-tensor scale or "
                                          "offset) in the right operand's computation: not lowered (it reads "
                                          f"[{dn}] / [1, {dn}] column inputs)")
                    if x in attrs or isinstance(vals[x].type.dtype, DTypeVar) \
                            or dtype_name(vals[x].type.dtype) != "f32" or not col(x):
                        raise Unsupported(x, n.loc, "an input read without a cast in the right operand's "
                                          f"computation: an fp32 [{dn}] column input only")
                    steps.append(("load", x, x, "col", "f32"))
                    space[x] = "col"
                if x not in space:
                    raise Unsupported(r, n.loc, f"%{x} in the right operand's computation is not its source, a "
                                      "column input, a constant or elementwise math on them")
            sps = {space[x] for x in n.inputs}
            space[r] = "row" if "row" in sps else "grow" if "grow" in sps else "col" if "col" in sps else "scalar"
            ok = {"row": shape(r) == [dk, dn] or rows3(shape(r)), "grow": grow(shape(r)) or repeated(shape(r)),
                  "col": col(r), "scalar": True}[space[r]]
            if not ok or "grow" in sps and space[r] == "row" and not (rows3(shape(r)) or repeated(shape(r))):
                raise Unsupported(r, n.loc, "a broadcast in the right operand's computation other than a column "
                                  f"vector [{dn}] over the [{dk}, {dn}] rows, or a group's row [G, 1, {dn}] over its "
                                  f"rows [G, g, {dn}] (or repeated to [{dk}, {dn}])")
            steps.append(("op", r, n.op, tuple(alias.get(x, x) for x in n.inputs),
                          "col" if space[r] == "grow" else space[r]))
            continue
        what = _CONSTRUCTS.get(n.op, f"`{n.op}`")
        raise Unsupported(r, n.loc, f"{what} in the right operand's computation: the vector cores compute an "
                          f"operand elementwise ({', '.join(sorted(EPI_OPS))}) from an int8 [{dk}, {dn}] input, "
                          f"[{dn}] column inputs and constants")
    if src is None or space.get(u) != "row" or shape(u) != [dk, dn]:
        raise Unsupported(u, prod[u].loc if u in prod else mm.loc, f"the right operand's computation does not "
                          f"start from an int8 [{dk}, {dn}] input")
    steps.append(("store", alias.get(u, u), ROUND_MODES[store.attr("round") or "none"]))
    cites[alias.get(u, u)] = cites.get(alias.get(u, u), store.loc)
    seen.update(inside)
    if grouped and not group:
        raise Unsupported(grouped[0], "", "a group-row input without B's rows in groups")
    return src, tuple(steps), tuple((x, cites[x]) for x in cites if cites[x]), \
        ((group["size"], tuple(dict.fromkeys(grouped))) if group else ())


def merge_presences(spec, items: list) -> GemmLayout:
    """One GemmLayout serving every presence of the spec's optional inputs in `items` = [(presence, GemmLayout)]
    (presence: one bool per optional input, spec order; the layouts of one attrKey): the layout itself when they are
    all equal, else their vector epilogues joined as the rows family joins its programs (opgen.kernel.rowpresence):
    a step is the same in two presences when it is the same operation on the same operands (value numbering), the
    joined steps keep each once with the presences that run it (`step_when`); a presence whose epilogue is Fixpipe's
    cast alone (no vector steps) contributes the cast as vector steps (its K split's reduction ends in it) and is
    listed in `direct` (its blocks skip the workspace slots when K is not split). Raises Unsupported when the
    layouts differ in anything but their epilogue (operands, dims, transposes, dtypes, batch)."""
    first = items[0][1]
    if all(lay == first for _pr, lay in items):
        return first
    if any(lay.pro for _pr, lay in items) and len({lay.pro for _pr, lay in items}) > 1:
        # a computed B whose steps the presences change (an optional offset): its steps joined the same way, each
        # run under the presences that have it (pro_when)
        if not all(lay.pro for _pr, lay in items):
            raise Unsupported(first.out, "", "the presences of the optional inputs compute the right operand in "
                              "some calls and read it from GM in others: one kernel class serves every presence")
        pro, pro_when, pro_cites = _join_steps([(pr, lay.pro, dict(lay.pro_cites)) for pr, lay in items], set())
        names = tuple(i.name for i in spec.inputs if i.optional)
        sizes = {lay.pro_group[0] if lay.pro_group else "" for _pr, lay in items}
        if len(sizes) > 1:
            raise Unsupported(first.out, "", f"the presences of the optional inputs compute the right operand in "
                              f"groups of different rows ({', '.join(sorted(sizes))}): one kernel class serves "
                              f"every presence")
        grp = (sizes.pop(), tuple(dict.fromkeys(x for _pr, lay in items for x in (lay.pro_group or ((), ()))[1]))) \
            if first.pro_group else ()
        items = [(pr, replace(lay, pro=pro, pro_when=pro_when, pro_cites=pro_cites, pro_group=grp, presence=names,
                              served=tuple(p for p, _l in items))) for pr, lay in items]
        first = items[0][1]
        if all(lay == first for _pr, lay in items):
            return first

    def core(lay):
        return replace(lay, epilogue=(), steps=(), bias=(), bcast=())

    for _pr, lay in items[1:]:
        if core(lay) != core(first):
            raise Unsupported(first.out, "", f"the presences of the optional inputs give other layouts "
                              f"({lay.text()}; {first.text()}): one kernel class serves every presence of an "
                              f"attribute combination, so they may differ in the epilogue only")
    served = tuple(pr for pr, _lay in items)
    names = tuple(i.name for i in spec.inputs if i.optional)
    biases = {lay.bias for _pr, lay in items if lay.bias}
    if len(biases) > 1:
        raise Unsupported(first.out, "", f"the presences of the optional inputs add different bias rows on the cube "
                          f"({', '.join(sorted(b[0] for b in biases))}): one kernel class serves every presence")
    bias = biases.pop() if biases else ()
    with_bias = tuple(pr for pr, lay in items if lay.bias)
    bias_when = () if len(with_bias) == len(items) else with_bias
    first = replace(first, bcast=tuple(sorted({x for _pr, lay in items for x in lay.bcast})))   # every presence's
    if all(replace(lay, bias=(), bcast=()) == replace(first, bias=(), bcast=()) for _pr, lay in items):   # the bias only
        return replace(first, bias=bias, bias_when=bias_when, presence=names, served=served,
                       direct=served if not first.steps else ())
    taken = {st[1] for _pr, lay in items for st in lay.steps if st[0] == "attr"}
    steps, when, cites = _join_steps([(pr, lay.steps or _cast_only(lay).steps, dict(lay.cites)) for pr, lay in items],
                                     taken)
    served = tuple(pr for pr, _lay in items)
    direct = tuple(pr for pr, lay in items if not lay.steps)
    return replace(first, epilogue=("vector",), steps=steps, presence=names, served=served, step_when=when,
                   direct=direct, bias=bias, bias_when=bias_when, cites=cites,
                   out_loc=next((lay.out_loc for _pr, lay in items if lay.steps), first.out_loc))


def _join_steps(items: list, taken: set) -> tuple:
    """(steps, per step the presences that run it (() = every one), ((name, spec line), ...)) of the step lists
    `items` = [(presence, steps, {value: spec line})] joined by value numbering (merge_presences): a step is the same
    in two presences when it is the same operation on the same operands; `taken` the names no new one may take."""
    served = [pr for pr, _st, _l in items]
    joined: dict = {}   # step key -> [step with joined names, presences]
    vname: dict = {}    # value key -> joined name
    cites: dict = {}    # joined name -> spec line (the first presence's that has the step)
    for pr, lay_steps, lines in items:
        kmap: dict = {}
        for st in lay_steps:
            kind = st[0]
            if kind == "acc":
                key = ("acc",)
            elif kind == "load":
                key = ("load",) + tuple(st[2:])
            elif kind == "const":
                key = ("const", st[2])
            elif kind == "attr":
                key = ("attr", st[1])
            elif kind == "op":
                key = ("op", st[2], tuple(kmap[x] for x in st[3]), st[4])
            else:
                key = ("store", kmap[st[1]], st[2])
            if kind == "attr":
                vname[key] = st[1]
            elif kind != "store" and key not in vname:
                nm, k = st[1], 0
                while nm in taken:
                    k += 1
                    nm = f"{st[1]}_{k}"
                taken.add(nm)
                vname[key] = nm
            if kind != "store":
                kmap[st[1]] = key
                if lines.get(st[1]):
                    cites.setdefault(vname[key], lines[st[1]])
            if key not in joined:
                if kind == "op":
                    new = ("op", vname[key], st[2], tuple(vname[kmap[x]] for x in st[3]), st[4])
                elif kind == "store":
                    new = ("store", vname[kmap[st[1]]], st[2])
                else:
                    new = (kind, vname[key], *st[2:])
                joined[key] = [new, set()]
            joined[key][1].add(pr)
    steps = tuple(st for st, _w in joined.values())
    when = tuple(() if w == set(served) else tuple(sorted(w)) for _st, w in joined.values())
    return steps, when, tuple(cites.items())


def lower_gemm(spec, lay: GemmLayout, name: str = "") -> K.KernelClass:
    """The Kernel IR class `name` (default <Op>CubeKernel) of the GEMM (module docstring's schedule) for `spec` with
    layout `lay` (a merged one, merge_presences: with the presence members hasInput<k>_ and its guards): template
    parameter T = the operands' C++ type; the output's type T or float. Raises IRError when it does not verify."""
    S = Sym
    M, Kd, N = S("M"), S("K"), S("N")
    bm, bn, bk = S("baseM"), S("baseN"), S("baseK")
    out_t = "T" if lay.out_dtype == lay.dtype else CTYPE.get(lay.out_dtype, "")   # the operands' type or f32
    if not out_t:   # an int8 product's output of its own dtype variable: a class template parameter (input_tparam)
        out_t = input_tparam(list(spec.dtype_vars_).index(lay.out_dtype))
    # the operands' C++ type: the class's T, or int8_t for an int8 product (whose L0C is int32; T is then int8_t)
    opd = "int8_t" if lay.acc == "i32" else "T"
    # a computed B (lay.pro) is read from its workspace region, where the AIVs wrote it (_prologue_part)
    gms = (K.GmTensor("aGm_", opd, cpp_name(lay.a)), K.GmTensor("bGm_", opd, workspace=True, region="b") if lay.pro
           else K.GmTensor("bGm_", opd, cpp_name(lay.b)), K.GmTensor("cGm_", out_t, cpp_name(lay.out)))
    locs = (K.Local("l1A_", K.TPos.A1, True, 2), K.Local("l1B_", K.TPos.B1, True, 2),
            K.Local("l0A_", K.TPos.A2, True, 2), K.Local("l0B_", K.TPos.B2, True, 2), K.Local("l0C_", K.TPos.CO1))
    sz = K.SizeOf(opd)
    # C0: the operand elements of one 32-B block, a fractal's width along K (16 for f16 / bf16; 32 for int8, whose
    # 512-B fractals are 16 x 32); the L0C accumulator fp32 or int32 (docs/reference/ascendc.md §1.10)
    c0, acc_t = (32, "int32_t") if lay.acc == "i32" else (16, "float")
    frac = 16 * c0   # elements of one L0A / L0B fractal
    bias_t = bias_ctype(lay)
    if lay.bias:   # the bias row: GM -> L1 (C1) -> bias table (C2, fp32), read by the first chunk's Mmad
        gms += (K.GmTensor("biasGm_", bias_t, cpp_name(lay.bias[0])),)
        locs += (K.Local("l1Bias_", K.TPos.C1), K.Local("bt_", K.TPos.C2))
    bias_when = tuple(pr for pr in lay.served if pr not in lay.bias_when) if lay.bias_when else ()

    def mm_cite(text):   # a statement of the matrix product: its comment and the matmul's spec line
        return _cite(text, lay.mm_loc)

    def fn(f, a, b):
        return Fn(f, (a, b))

    # an operand or the output read / written through a permuted GM view (GemmLayout.views): its row pitch and
    # batch stride are the tiling fields <role>RowStride / <role>BatchStride; else its matrices are contiguous
    # (docs/design.md "Cube family: operands and output through permuted GM views")
    views = dict(lay.views)
    pitch_a = S("aRowStride") if "a" in views else M if lay.trans_a else Kd
    pitch_b = S("bRowStride") if "b" in views else Kd if lay.trans_b else N
    pitch_c = S("cRowStride") if "c" in views else N
    if lay.batch:   # block = (batch index, block of that matrix); each operand's matrices are contiguous
        at = (K.Let("bi", S("blk") // S("mnBlocks")), K.Let("bb", S("blk") % S("mnBlocks")))
        offs = (Lit(0) if lay.shared == "a" else S("bi") * S("aBatchStride") if "a" in views else S("bi") * M * Kd,
                Lit(0) if lay.shared == "b" else S("bi") * S("bBatchStride") if "b" in views else S("bi") * Kd * N,
                S("bi") * M * N,   # a shared operand (no batch dims): its one matrix for every batch index
                S("bi") * S("cBatchStride") if "c" in views else S("bi") * M * N)
    else:
        at, offs = (K.Let("bb", S("blk")),), None

    def off(i, e):   # element offset e within operand i's matrix (0: A, 1: B, 2: an [M, N] epilogue input, 3: the
        return e if offs is None else offs[i] + e   # output, through its view) of this batch index

    # K in L1 panels of baseKL1 (kt1 in the tail), each in L0 chunks of baseK (kt): fractal counts along each edge
    m1, n1 = S("mPad") // 16, S("nPad") // 16
    k1, kp1, kf0 = S("kPad") // c0, S("kPad1") // c0, S("kk") // c0   # chunk, B panel, the chunk's first K fractal
    # A's L1 panels are baseKL1A deep (a multiple of baseKL1: each holds whole B panels), so the chunk's first K
    # fractal within the A panel is (k0 - k0a + kk) / c0, and kpa the A panel's fractals along K
    kpa, kfa = S("kPadA") // c0, (S("k0") - S("k0a") + S("kk")) // c0
    if lay.trans_a:   # Aᵀ panel [kt1, mt] in L1: fractal (kf, mf) at mf * kp1 + kf; A's ZZ fractal (mf, kf) is it
        a_in = (K.Nd2Nz(K.Ref("a1"), K.GmView("aGm_", off(0, S("k0a") * pitch_a + S("m0"))), S("ktA"), S("mt"), pitch_a,
                        S("kPadA"), mm_cite("Aᵀ panel [ktA, mt] -> L1 NZ")),)
        if lay.acc == "i32":   # int8: Aᵀ's L1 NZ in 32-column pieces of m, kpa squares of 32 k-rows each (square
            # (kq, p) at p * kpa + kq); one LoadDataWithTranspose per piece moves the chunk's k1 squares, square kq's
            # two transposed fractals to ZZ fractals (2p, kq) and (2p + 1, kq): dstGap 0, dstFracGap k1 - 1
            a_load = (K.For("p", Lit(0), S("mPadA") // 32, Lit(1), (
                K.LoadData(K.Ref("a2", S("p") * 2 * k1 * frac), K.Ref("a1"), S("p") * kpa + kfa, k1, Lit(1),
                           doc=mm_cite("A piece p of the chunk (32 rows of m): Aᵀ's 32 x 32 int8 squares transposed "
                                       "into two ZZ fractal rows"),
                           with_transpose=True, dst_gap=Lit(0), dst_frac_gap=k1 - 1),), disjoint=True),)
        else:
            a_load = (K.For("r", Lit(0), m1, Lit(1), (
                K.LoadData(K.Ref("a2", S("r") * k1 * frac), K.Ref("a1"), S("r") * kpa + kfa, k1, Lit(1), True,
                           mm_cite("A fractal row r of the chunk: Aᵀ's fractals transposed")),), disjoint=True),)
    else:   # A panel [mt, kt1] in L1: fractal (mf, kf) at kf * m1 + mf
        a_in = (K.Nd2Nz(K.Ref("a1"), K.GmView("aGm_", off(0, S("m0") * pitch_a + S("k0a"))), S("mt"), S("ktA"), pitch_a,
                        S("mPad"), mm_cite("A panel [mt, ktA] -> L1 NZ")),)
        a_load = (K.For("r", Lit(0), m1, Lit(1), (
            K.LoadData(K.Ref("a2", S("r") * k1 * frac), K.Ref("a1", kfa * S("mPad") * c0), S("r"), k1, m1, False,
                       mm_cite("A fractal row r of the chunk: NZ -> ZZ")),), disjoint=True),)
    if lay.trans_b:   # Bᵀ panel [nt, kt1] in L1: fractal (nf, kf) at kf * n1 + nf, B's ZN order already
        b_in = (K.Nd2Nz(K.Ref("b1"), K.GmView("bGm_", off(1, S("n0") * pitch_b + S("k0"))), S("nt"), S("kt1"), pitch_b,
                        S("nPad"), mm_cite("Bᵀ panel [nt, kt1] -> L1 NZ")),)
        b_load = (K.LoadData(K.Ref("b2"), K.Ref("b1"), kf0 * n1, k1 * n1, Lit(1), False,
                             mm_cite("the chunk's fractals of Bᵀ NZ = B ZN: one load")),)
    else:   # B panel [kt1, nt] in L1: fractal (kf, nf) at nf * kp1 + kf
        b_off = off(1, S("k0") * pitch_b + S("n0"))
        b_in = (K.Nd2Nz(K.Ref("b1"), K.GmView("bGm_", S("proOff") + b_off if lay.pro else b_off), S("kt1"), S("nt"),
                        pitch_b, S("kPad1"), mm_cite("B panel [kt1, nt] -> L1 NZ" + (
                            f" (B computed from {lay.b} by the AIVs, in the workspace)" if lay.pro else ""))),)
        if lay.acc == "i32":   # int8: 32 x 32 squares (32 K rows of a 32-column piece, square (kf, nb) at nb * kp1 +
            # kf) transposed into ZN by LoadDataWithTranspose, nPad / 32 squares per K fractal row (nPad 32-aligned)
            b_load = (K.For("r", Lit(0), k1, Lit(1), (
                K.LoadData(K.Ref("b2", S("r") * S("nPad") * c0), K.Ref("b1"), kf0 + S("r"), S("nPad") // 32, kp1,
                           doc=mm_cite("B square row r of the chunk: NZ -> ZN (each 32 x 32 int8 square transposed)"),
                           with_transpose=True),), disjoint=True),)
        else:
            b_load = (K.For("r", Lit(0), k1, Lit(1), (
                K.LoadData(K.Ref("b2", S("r") * S("nPad") * 16), K.Ref("b1"), kf0 + S("r"), n1, kp1, True,
                           mm_cite("B fractal row r of the chunk: NZ -> ZN (each fractal transposed)")),),
                disjoint=True),)
    # an int8 B [K, N]'s L0B rows hold whole squares: nPad 32-aligned, and Mmad reads all nPad / 16 fractals of each
    # (n = nPad: the columns past nt come from Nd2Nz's zero fill and are never stored; asc-devkit load_data_l12l0)
    n_pad, mm_n = (32, S("nPad")) if lay.acc == "i32" and not lay.trans_b else (16, S("nt"))
    chunk = (   # one L0 chunk of the panel: L1 -> L0A / L0B (double buffered), then Mmad
        K.Let("kPad", fn("align_up", S("kt"), Lit(c0))),
        K.Alloc("a2", "l0A_", opd), K.Alloc("b2", "l0B_", opd),
        *a_load, *b_load,
        K.EnQue("l0A_", "a2"), K.EnQue("l0B_", "b2"),
        K.DeQue("a2", "l0A_", opd), K.DeQue("b2", "l0B_", opd),
        *_bias_mmad(lay, K.Mmad(K.Ref("c1"), K.Ref("a2"), K.Ref("b2"), S("mm"), mm_n, S("kt"),
                                (Constraint("==", S("k0") + S("kk"), S("kb")),),
                                mm_cite("fp32 accumulate over K (this range's)")), bias_when),
        K.Free("l0A_", "a2"), K.Free("l0B_", "b2"),
    )
    bloop = (   # one B panel in L1: GM -> L1 (double buffered: the next panel's copy overlaps this one's chunks)
        K.Let("kPad1", fn("align_up", S("kt1"), Lit(c0))),
        K.Alloc("b1", "l1B_", opd),
        *b_in,
        K.EnQue("l1B_", "b1"),
        K.DeQue("b1", "l1B_", opd),
        K.For("kk", Lit(0), S("kt1"), bk, chunk, tail="kt", doc="L0 chunks of the panel (the last a tail)"),
        K.Free("l1B_", "b1"),
    )

    def kloop_of(first, end, doc):   # A panels of baseKL1A over [first, end), each over its B panels of baseKL1
        return K.For("k0a", first, end, S("baseKL1A"), (
            K.Let("kPadA", fn("align_up", S("ktA"), Lit(c0))),
            K.Alloc("a1", "l1A_", opd),
            *a_in,
            K.EnQue("l1A_", "a1"),
            K.DeQue("a1", "l1A_", opd),
            K.For("k0", S("k0a"), S("k0a") + S("ktA"), S("baseKL1"), bloop, tail="kt1",
                  doc="B panels of this A panel (the last a tail)"),
            K.Free("l1A_", "a1"),
        ), tail="ktA", doc=doc)
    lets = (
        *at,
        K.Let("mi", S("bb") // S("nBlocks")),
        K.Let("ni", S("bb") % S("nBlocks")),
        K.Let("m0", S("mi") * bm),
        K.Let("n0", S("ni") * bn),
        K.Let("mt", fn("min", bm, M - S("m0"))),
        K.Let("nt", fn("min", bn, N - S("n0"))),
    )
    # a band kernel's unit (row_reduces): band blk = baseM rows of one matrix x all of N (batched: the matrix
    # blk // mnBlocks, mnBlocks then the bands of a matrix; with one block column a band is a block)
    band_lets = (
        *at,
        K.Let("m0", S("bb") * bm),
        K.Let("mt", fn("min", bm, M - S("m0"))),
    )
    pads = (
        K.Let("mPad", fn("align_up", S("mt"), Lit(16))),
        K.Let("nPad", fn("align_up", S("nt"), Lit(n_pad))),
        K.Let("mm", fn("max", S("mt"), Lit(2))),
    )
    if lay.acc == "i32" and lay.trans_a:   # an int8 Aᵀ fills L0A by whole 32 x 32 squares: pieces of 32 rows of m
        pads += (K.Let("mPadA", fn("align_up", S("mt"), Lit(32))),)
    init = (
        K.InitBuffer("l1A_", bm * S("baseKL1A") * sz, 2), K.InitBuffer("l1B_", S("baseKL1") * bn * sz, 2),
        K.InitBuffer("l0A_", bm * bk * sz, 2), K.InitBuffer("l0B_", bk * bn * sz, 2),
        K.InitBuffer("l0C_", bm * bn * 4),
        K.Get("c1", "l0C_", acc_t),
    )
    bias_in = ()
    if lay.bias:   # baseN rounded to 32 fp32 (the fp16 row's 64-B blocks convert to whole 128-B blocks)
        init += (K.InitBuffer("l1Bias_", fn("align_up", bn, Lit(32)) * 4), K.InitBuffer("bt_", fn("align_up", bn, Lit(32)) * 4),
                 K.Get("lb", "l1Bias_", bias_t),
                 K.Get("bt", "bt_", "int32_t" if bias_t == "int32_t" else "float"))
        bias_in = _guarded((
            K.Nd2Nz(K.Ref("lb"), K.GmView("biasGm_", S("n0")), Lit(1), S("nt"), S("nt"), Lit(1),
                    f"the block's columns of {lay.bias[0]} -> L1 (one row, contiguous)"),
            K.LoadBias(K.Ref("bt"), K.Ref("lb"), (S("nt") * K.SizeOf(bias_t) + 63) // 64,
                       "L1 -> bias table, " + ("int32" if bias_t == "int32_t" else "fp32")
                       + " (64-B blocks of the row)")),
            lay.bias_when, lay.presence)

    band = row_reduces(lay)

    def band_of() -> tuple:   # the AIC's bands (K not split): each band's blocks into one band region of the slots
        # (docs/design.md "Cube family: row reductions in the epilogue"): region s = j mod epiRegions (1 or 2) of
        # this AI Core holds baseM rows x N fp32 (dense rows of N); READY+s after the band's last block, FREE+s
        # awaited before the first Fixpipe of band j >= epiRegions
        fix = K.Fixpipe(K.GmView("wsGm_", S("wsOff") + S("n0")), K.Ref("c1"), S("mt"), S("nt"), S("mPad"), N,
                        mm_cite("L0C -> columns n0 .. of the band's region s, fp32"))
        free = K.If((Constraint(">=", S("j"), S("epiRegions")), Constraint("==", S("ni"), Lit(0))), (_by_slot(
            lambda i: K.CrossCoreWaitFlag(FLAG_FREE + i, "the AIVs have read this region's previous band")),))
        blk_body = (
            K.Let("n0", S("ni") * bn),
            K.Let("nt", fn("min", bn, N - S("n0"))),
            *pads,
            *bias_in,
            K.Let("kb", Lit(0)),
            kloop_of(Lit(0), Kd, "A panels of K (the last a tail)"),
            free,
            fix,
        )
        body = (
            *band_lets,
            K.Let("j", S("blk") - S("first")), K.Let("s", S("j") % S("epiRegions")),
            K.Let("wsOff", (S("core") * S("epiRegions") + S("s")) * bm * S("epiPitch")),
            K.For("ni", Lit(0), S("nBlocks"), Lit(1), blk_body, doc="the band's blocks, left to right"),
            _by_slot(lambda i: K.CrossCoreSetFlag(2, Pipe.FIX, FLAG_READY + i, "region s holds the band")),
        )
        return (
            *_range(K.BLOCK_IDX),
            K.For("blk", S("first"), S("last"), Lit(1), body, doc="this AI Core's bands (baseM rows x all of N)"),
            K.For("j", fn("max", S("last") - S("first") - S("epiRegions"), Lit(0)), S("last") - S("first"), Lit(1), (
                K.Let("s", S("j") % S("epiRegions")),
                _by_slot(lambda i: K.CrossCoreWaitFlag(FLAG_FREE + i, "the AIVs' last reads of the regions")),),
                doc="consume the last regions' free flags (one per region in use)"),
        )

    def plain_of(mixed: bool) -> tuple:   # the AIC's blocks when K is not split: to the slots (mixed) or the output
        if mixed and band:
            return band_of()
        if mixed:   # the fp32 block to this AI Core's workspace slot s (the AIVs finish it), dense rows of nt
            slot = (K.Let("j", S("blk") - S("first")), K.Let("s", S("j") % 2),
                    K.Let("wsOff", (S("core") * 2 + S("s")) * bm * bn))
            free = (K.If((Constraint(">=", S("j"), Lit(2)),), (_by_slot(lambda i: K.CrossCoreWaitFlag(
                FLAG_FREE + i, "the AIVs have read this slot's previous block")),)),)
            fix = K.Fixpipe(K.GmView("wsGm_", S("wsOff")), K.Ref("c1"), S("mt"), S("nt"), S("mPad"), S("nt"),
                            mm_cite("L0C -> workspace slot s, " + ("int32" if lay.acc == "i32" else "fp32")))
            ready = (_by_slot(lambda i: K.CrossCoreSetFlag(2, Pipe.FIX, FLAG_READY + i, "slot s holds the block")),)
        else:
            slot, free, ready = (), (), ()
            fix = K.Fixpipe(K.GmView("cGm_", off(3, S("m0") * pitch_c + S("n0"))), K.Ref("c1"), S("mt"), S("nt"),
                            S("mPad"), pitch_c, _cite("L0C -> GM with the cast to the output type", lay.mm_loc, lay.out_loc))
        block = (
            *lets,
            *pads,
            *slot,
            *bias_in,
            K.Let("kb", Lit(0)),
            kloop_of(Lit(0), Kd, "A panels of K (the last a tail)"),
            *free,   # only the Fixpipe writes the slot: the loads and Mmads of this block overlap the AIVs' work
            fix,
            *ready,
        )
        plain = (
            *_range(K.BLOCK_IDX),
            K.For("blk", S("first"), S("last"), Lit(1), block, doc="this AI Core's output blocks"),
        )
        if mixed:
            plain += (K.For("j", fn("max", S("last") - S("first") - 2, Lit(0)), S("last") - S("first"), Lit(1), (
                K.Let("s", S("j") % 2),
                _by_slot(lambda i: K.CrossCoreWaitFlag(FLAG_FREE + i, "the AIVs' last reads of the slots")),),
                doc="consume the last two slots' free flags"),)
        return plain

    mixed = lay.mixed
    # presences with no vector epilogue (merge_presences): Fixpipe writes their output, the AIVs have no block
    via_slots = tuple(pr for pr in lay.served if pr not in lay.direct) if lay.direct else ()
    if via_slots:
        plain = _guarded(plain_of(True), via_slots, lay.presence) + _guarded(plain_of(False), lay.direct,
                                                                              lay.presence)
    else:
        plain = plain_of(mixed)
    # the K split (docs/design.md "Cube family: the K split"): units (block, k range) over the AI Cores, each
    # unit's fp32 partial block to its own workspace block (pitch baseN), then FLAG_PART to this AI Core's AIVs
    unit = (
        K.Let("blk", S("u") // S("kSplit")),
        K.Let("kr", S("u") % S("kSplit")),
        *lets,
        *pads,
        # only the first k range's unit reads the bias row (its first chunk's Mmad starts at it: _bias_mmad)
        *((K.If((Constraint("==", S("kr"), Lit(0)),), bias_in, doc="the first k range adds the bias"),)
          if bias_in else ()),
        K.Let("kb", S("kr") * S("kLen")),
        kloop_of(S("kb"), fn("min", Kd, S("kb") + S("kLen")), "A panels of this unit's range (the last a tail)"),
        K.Fixpipe(K.GmView("wsGm_", (S("blk") * S("kSplit") + S("kr")) * bm * bn), K.Ref("c1"), S("mt"), S("nt"),
                  S("mPad"), bn, mm_cite("L0C -> the unit's partial block in the workspace, fp32")),
    )
    split = (
        K.Let("uFirst", K.BLOCK_IDX * S("unitsPerCore") + Fn("min", (K.BLOCK_IDX, S("unitsTail")))),
        K.Let("uLast", S("uFirst") + S("unitsPerCore")
              + K.Select((Constraint("<", K.BLOCK_IDX, S("unitsTail")),), Lit(1), Lit(0))),
        K.For("u", S("uFirst"), S("uLast"), Lit(1), unit, doc="this AI Core's units (block, k range)"),
        K.CrossCoreSetFlag(2, Pipe.FIX, FLAG_PART, "this AI Core's partial blocks are written"),
    )
    ks = (Constraint(">", S("kSplit"), Lit(1)),)
    # an int8 product never splits K (the tiling's kSplit is 1): its partials would be int32 sums to add exactly
    cube = (*init, K.If(ks, split, plain)) if lay.acc == "f32" and not lay.pro else (*init, *plain)
    pro_parts = ((), (), (), ())
    if lay.pro:   # B computed by the AIVs first (no K split): the AIC waits for it before its first panel
        cube = (*init, K.CrossCoreWaitFlag(FLAG_PRO, "every AIV has written its units of B to the workspace"),
                *plain)
        pro_parts = _prologue_part(lay, pro_program(lay))
    if mixed:
        prog = epilogue_program(lay)
        doc_plain = "the two AIVs: half of each block's rows each, the epilogue, the output"
        if via_slots:
            doc_plain += f" (when {_presences_text(via_slots, lay.presence)}; else Fixpipe wrote it)"
    else:   # the reduction's own epilogue: the cast Fixpipe does when K is not split
        prog = epilogue_program(_cast_only(lay))
        doc_plain = "Fixpipe writes the output" if lay.pro else "the AIVs have no work: Fixpipe wrote the output"
    # (an int8 product has no K split: its buffers are the plain part's, no reduction scratch row)
    if band:   # the AIVs' unit is a band: its rows of all of N (n0 0, nt N), UB rows of epiPitch
        lets = band_lets + (K.Let("n0", Lit(0)), K.Let("nt", N))
    if lay.pro:   # no K split: the slot path's buffers only (none without a vector epilogue)
        vec_locs, vec_gms, gets, vector_ks = _vector_part(lay, prog, lets, out_t, off, out_pitch=pitch_c) \
            if mixed else ((), (), (), ())
    else:
        vec_locs, vec_gms, gets, vector_ks = _vector_part(lay, prog, lets, out_t, off, ksplit=lay.acc == "f32",
                                                            out_pitch=pitch_c)
    if via_slots:   # the slot path's epilogue only under the presences that take it (their steps, unguarded if one)
        rl, rg, rgets, vector_plain = _vector_part(lay, epilogue_program(_restrict(lay, via_slots)), lets, out_t, off,
                                                   out_pitch=pitch_c)
        if not (set(rl) <= set(vec_locs) and set(rg) <= set(vec_gms) and set(rgets) <= set(gets)):
            vector_plain = _vector_part(lay, prog, lets, out_t, off, out_pitch=pitch_c)[3]   # its buffers are not the class's: all steps
        vector_plain = _guarded(vector_plain, via_slots, lay.presence)
    else:
        vector_plain = _vector_part(lay, prog, lets, out_t, off, out_pitch=pitch_c)[3] if mixed else ()
    process = (K.CoreIf("cube", (K.Let("core", K.BLOCK_IDX), *cube),
                        "the AIC: the fp32 blocks of this AI Core (to the output, the two workspace slots in turn, "
                        "or the K split's partial blocks)"),
               K.CoreIf("vector", (*pro_parts[2], *gets, *pro_parts[3], *vector_plain) if lay.pro else
                        (*gets, K.If(ks, vector_ks, vector_plain)) if lay.acc == "f32" else
                        (*gets, *vector_plain),
                        f"the AIVs: the units of B computed from {lay.b}, then {doc_plain}" if lay.pro else
                        f"the AIVs: the K split's reduction, else {doc_plain}"))
    fields = FIELDS + (BATCH_FIELDS if lay.batch else ()) + EPI_FIELDS + (BAND_FIELDS if band else ()) + KSPLIT_FIELDS \
        + tuple(f"{a}Bits" for a in epi_attrs(lay)) + view_fields(lay) + (PRO_FIELDS if lay.pro else ())
    members = tuple((presence_member(k), cpp_name(n)) for k, n in enumerate(lay.presence)) if lay.presence else ()
    a_txt = f"{lay.a}ᵀ [K, M]" if lay.trans_a else f"{lay.a} [M, K]"
    b_txt = f"{lay.b}ᵀ [N, K]" if lay.trans_b else f"{lay.b} [K, N]"
    cls = K.KernelClass(name or f"{spec.name}CubeKernel", f"optiling::{spec.name}TilingData", args=tuple(
        cpp_name(t.name) for t in [*spec.inputs, *spec.outputs]),
        gms=gms + (K.GmTensor("wsGm_", acc_t, workspace=True),) + vec_gms + pro_parts[1],
        locals=locs + vec_locs + pro_parts[0],
        scalars=tuple(K.ScalarVar(m, "bool") for m, _a in members), presence=members,
        fields=fields, process=process, ws_field="workspaceBytes", methods=_reduce_methods(prog),
        tparams=(OPERAND_T,) + tuple(dict.fromkeys(prog.tparams() + (pro_program(lay).tparams() if lay.pro else ()) + (
            (bias_t,) if bias_t not in ("", OPERAND_T, "float", "int32_t") else ()) + (
            (out_t,) if out_t not in (OPERAND_T,) and out_t not in CTYPE.values() else ()))),
        doc=(f"{spec.name}: [M, K] x [K, N] on the cube" if not (lay.trans_a or lay.trans_b) else
             f"{spec.name}: {a_txt} x {b_txt} on the cube") + (
            (", int8 operands, int32 accumulation (" + ("int32 blocks to a two-slot workspace, the AIVs' conversion "
             "to fp32 and epilogue" if mixed else "Fixpipe writes the int32 sums") + "; no K split)")
            if lay.acc == "i32" else
            (", fp32 accumulation (" + ("fp32 blocks to a two-slot workspace, the epilogue on the AIVs" if mixed else
                                        "Fixpipe's cast") + (f"; B computed from {lay.b} by the AIVs into the "
                                                             "workspace first, no K split)" if lay.pro else
                                                             "; K split over the AI Cores when the tiling chooses "
                                                             "it)")))
        + f", output {out_t}" + (f"; every presence of {', '.join(lay.presence)} (hasInput<k>_)" if members else ""))
    return K.verify(cls)


def bias_ctype(lay: GemmLayout) -> str:
    """The C++ type the bias row of `lay` is staged in (L1): float for an fp32 input, the operands' T, or the class
    template parameter of its dtype variable (input_tparam), int32_t for an int8 product's int32 bias (the bias
    table then int32 too); "" without a cube bias."""
    if not lay.bias:
        return ""
    return {"f32": "float", "i32": "int32_t"}.get(lay.bias[1], lay.bias[1])


def _bias_mmad(lay: GemmLayout, mm: K.Mmad, without: tuple) -> tuple:
    """The chunk's Mmad `mm` with the layout's cube bias: the first chunk of K (k0 + kk == 0, in the K split the
    first range's) starts C at the bias-table row instead of 0, under the presences with the bias (`lay.bias_when`);
    `mm` itself under the others (`without`) and for every later chunk. When one cube of presences has the bias
    (rowpresence.cover), its literals join the chunk test: one If, `mm` printed once
    (`if (hasInput0_ && k0 + kk == 0) {bias Mmad} else {mm}`)."""
    if not lay.bias:
        return (mm,)
    first = (Constraint("==", Sym("k0") + Sym("kk"), Lit(0)),)
    biased = replace(mm, init=(), bias=K.Ref("bt"), doc="the first chunk: C starts at the bias row; " + mm.doc)
    cubes = cover(lay.bias_when, len(lay.presence)) if lay.bias_when else ()
    if len(cubes) <= 1:
        conds = tuple(Sym(presence_member(k)) if lit else Constraint("==", Sym(presence_member(k)), Lit(0))
                      for k, lit in enumerate(cubes[0]) if lit is not None) if cubes else ()
        return (K.If(conds + first, (biased,), (mm,)),)
    seeded = K.If(first, (biased,), (mm,))
    return _guarded((seeded,), lay.bias_when, lay.presence) + _guarded((mm,), without, lay.presence)


def _restrict(lay: GemmLayout, prs: tuple) -> GemmLayout:
    """Merged layout `lay` (merge_presences) serving only the presences `prs`: the steps none of them runs dropped,
    each other step's presences narrowed to them (() when it runs under all of them)."""
    steps, whens = [], []
    for st, w in zip(lay.steps, lay.step_when):
        keep = set(prs) if not w else set(w) & set(prs)
        if keep:
            steps.append(st)
            whens.append(() if keep == set(prs) else tuple(sorted(keep)))
    return replace(lay, steps=tuple(steps), step_when=tuple(whens), served=tuple(prs),
                   direct=tuple(p for p in lay.direct if p in prs))


def _cast_only(lay: GemmLayout) -> GemmLayout:
    """`lay` with the vector steps of its Fixpipe epilogue (the AIVs' part of a K split when there is no vector
    epilogue): the fp32 sum cast to the output type rounding to nearest even (Fixpipe's rounding, §1.10), or
    stored as it is for an fp32 output."""
    rnd = "" if lay.out_dtype == "f32" else ROUND_MODES["rint"]
    return replace(lay, steps=(("acc", "acc_"), ("store", "acc_", rnd)))


FLAG_READY, FLAG_FREE = 0, 2
"""Cross-core flag ids: FLAG_READY + s (AIC -> its AIVs: workspace slot s holds a block), FLAG_FREE + s (both AIVs
-> the AIC: slot s is read and may be overwritten); s = 0, 1."""
EPI_FIELDS = ("epiRows",)
"""The tiling-data field the AIVs read: rows of a block half per AIV pass (the UB's rows of the epilogue)."""
BAND_FIELDS = ("epiPitch", "epiChunk", "epiRegions")
"""The fields a band kernel (row_reduces) reads too: the row pitch of a band's region in the workspace
(align_up(N, 16) elements; baseN when N is one block), the UB pitch of a pass row (epiPitch when a whole row fits
the UB, else the columns of a chunk: docs/design.md "Cube family: rows longer than UB") and the regions per AI Core
(1 or 2; band j in region j mod epiRegions: docs/design.md "Cube family: the band workspace budget")."""
FLAG_PART = 4
"""Cross-core flag id of the K split: AIC -> its AIVs, this AI Core's partial blocks are in the workspace."""
KSPLIT_FIELDS = ("kSplit", "kLen", "unitsPerCore", "unitsTail", "redRows", "passesPerBlock", "itemsPerAiv",
                 "itemsTail")
"""The K split's tiling fields (opgen.tiling.cube): k ranges, elements per range, the units (block, range) of each
AI Core, the reduction's rows per pass, its passes per block and pass items per AIV."""


VIEW_ROLES = {"a": "A", "b": "B", "c": "the output"}
"""The roles a GM view may have (GemmLayout.views): its tiling fields are <role>RowStride and <role>BatchStride."""


def view_fields(lay: GemmLayout) -> tuple:
    """The tiling fields of the layout's GM views (elements): <role>RowStride (the row pitch of the strided matrix
    axis: the Nd2Nz source's or Fixpipe's / the AIVs' destination's) and <role>BatchStride (one matrix to the next),
    per role of GemmLayout.views in the order a, b, c; () without views."""
    views = dict(lay.views)
    return tuple(f"{r}{f}" for r in VIEW_ROLES if r in views for f in ("RowStride", "BatchStride"))


def epi_attrs(lay: GemmLayout) -> tuple:
    """The runtime float attributes the vector epilogue reads (their tiling fields are <name>Bits)."""
    return tuple(st[1] for st in lay.steps if st[0] == "attr")


def _cite(text: str, *locs: str) -> str:
    """A statement's comment `text` followed by the `// spec:` trace of the spec lines `locs` it comes from
    (opgen.ir.locs.spec_comment: "A panel -> L1 NZ  // spec: mm.py:15"; `text` alone when no line is known)."""
    return text + spec_comment(locs)


def _by_slot(make) -> K.If:
    """make(0) when the slot s (a Let) is 0, else make(1): the flag of each slot has its own constant id."""
    return K.If((Constraint("==", Sym("s"), Lit(0)),), (make(0),), (make(1),))


def _range(core) -> tuple:
    """Lets `first` / `last`: the output blocks of AI Core `core` (contiguous ranges, the first blocksTail cores
    one more)."""
    return (K.Let("first", core * Sym("blocksPerCore") + Fn("min", (core, Sym("blocksTail")))),
            K.Let("last", Sym("first") + Sym("blocksPerCore")
                  + K.Select((Constraint("<", core, Sym("blocksTail")),), Lit(1), Lit(0))))


class _EpiCtx:
    """The context rowprog.lower_elementwise lowers into (its protocol): spaces, scalar texts, the program."""

    def __init__(self, name: str):
        self.p = RowProgram(name, None)
        self.space: dict = {}
        self.scalar_text: dict = {}

    def operand(self, v: str) -> str:
        """Values are their own operand names until the buffer assignment (rowprog._allocate)."""
        return v


@dataclass(frozen=True)
class EpiProgram:
    """The vector epilogue as a row program (opgen.kernel.rowprog, on fp32 UB rows of a block's columns): `instrs`
    after the buffer assignment (row temporaries w<k>, column values `col`), `pre` {value: (space, input)} the
    fp32 values read straight from GM (the matmul's block: input ""), `loads` ((value, input, space, type), ...) the
    inputs read in their type (the operands' T, or a dtype variable whose rows bind it to T's type or f32: a class
    template parameter) and converted to fp32, `store` (value, round mode or "")."""

    instrs: tuple
    row_temps: int
    col: tuple
    pre: tuple
    loads: tuple
    store: tuple
    guard: tuple = ()    # ((pre or load value, presences), ...): an input read only under those presences
    stores: tuple = ()   # ((value, round mode or "", presences), ...): every store (one per presence group)
    presence: tuple = ()  # the optional inputs the presences range over (GemmLayout.presence)
    acc_i32: bool = False  # the block is int32 (an int8 product): staged as int32 rows, then cast to the fp32 rows
    runs: tuple = ()     # per instruction, the passes it runs in when a band's row streams in chunks (chunk_passes)
    passes: int = 1      # the chunk passes over a row (chunk_passes)

    def row_bytes(self) -> int:
        """UB bytes per element of one row of a pass (fp32 temporaries and staged rows, T staging, the output
        staging), T taken as 2 bytes (f16 / bf16), another dtype variable's staging as 4 (it may be f32), a cast
        output as at most 4, an int32 block's staging row (acc_i32) as 4, a per-row input's or output's stage (rows + 8
        fp32) as 4, a per-row input's staging in its type (rows + 16 elements) as its type's bytes."""
        nf = self.row_temps + sum(1 for _v, (sp, _i) in self.pre if sp in ("row", "stat")) \
            + len({i.gm for i in self.instrs if i.kind == "sstore"}) \
            + sum(1 for _v, _i, sp, _t in self.loads if sp == "stat")   # stat in and out (rows + 8 fp32): a bound
        # (a per-row input staged in its type: rows + 16 elements, within a row's baseN >= 16 beside the fp32 bound)
        nt = sum(_load_bytes(t) for _v, _i, sp, t in self.loads if sp in ("row", "stat"))
        return 4 * nf + nt + (4 if any(r for _v, r, _w in self.stores) or self.store[1] else 0) \
            + (4 if self.acc_i32 else 0)

    def col_bytes(self) -> int:
        """UB bytes per element of the column rows (kept for a pass: fp32 column values and staged inputs), and with
        a row reduction its result block and scratch (`epiRed_`: 2 * baseN fp32, which holds
        opgen.tiling.rowkernel.row_reduce_elems(baseN) for every baseN >= 16)."""
        nf = len(self.col) + sum(1 for _v, (sp, _i) in self.pre if sp == "col") + (2 if self.reduces else 0)
        nt = sum(_load_bytes(t) for _v, _i, sp, t in self.loads if sp == "col")
        return 4 * nf + nt

    @property
    def reduces(self) -> bool:
        """Whether the epilogue reduces rows over N (rsum / rmax instructions: the RowSum / RowMax methods)."""
        return any(i.kind in ROW_REDUCE for i in self.instrs)

    @property
    def per_row(self) -> bool:
        """Whether the epilogue computes per-row values (row reductions, scalar arithmetic on them): its row
        instructions then run row by row, all of a row in one loop iteration (the values live in scalars)."""
        return any(i.space == "stat" for i in self.instrs)

    def tparams(self) -> tuple:
        """The dtype variables other than T whose inputs the program stages (template parameters of the class)."""
        return tuple(dict.fromkeys(t for _v, _i, _sp, t in self.loads if t not in (OPERAND_T,) + FIXED16))


FIXED16 = ("half", "bfloat16_t")
"""Load tags of epilogue inputs of a fixed 2-byte float dtype (their C++ types): staged as they are, Cast to fp32."""


def _load_bytes(t: str) -> int:
    """UB bytes per element of an input staged in type `t`: 2 for the operands' T (f16 / bf16) or a fixed f16 /
    bf16 input, 4 for another dtype variable (its rows may bind it to f32)."""
    return 2 if t in (OPERAND_T,) + FIXED16 else 4


def epilogue_program(lay: GemmLayout) -> EpiProgram:
    """The EpiProgram of the layout's vector steps: each op through the rows family's instruction lowering
    (rowprog.lower_elementwise), the rows' buffers by its liveness assignment (rowprog._allocate)."""
    ctx = _EpiCtx(lay.out)
    pre, loads = {}, []
    guard = {}
    lines = dict(lay.cites)
    whens = lay.step_when or ((),) * len(lay.steps)
    for st, when in zip(lay.steps, whens):
        n0 = len(ctx.p.instrs)
        if when and st[0] == "load":
            guard[st[1]] = when
        if st[0] == "acc":
            ctx.space[st[1]] = "row"
            pre[st[1]] = ("row", "")
        elif st[0] == "load":
            _k, v, inp, sp, dt = st
            ctx.space[v] = sp
            if sp == "stat":   # read per row by the scalar unit (GetValue) into the scalar st_<value>
                ctx.scalar_text[v] = f"st_{v}"
            if sp == "one":   # one value, read once per AIV by the scalar unit into the scalar one_<value>_
                ctx.space[v] = "scalar"
                ctx.scalar_text[v] = f"one_{v}_"
            if dt == "f32":
                pre[v] = (sp, inp)
            else:   # read in its type (T, or a dtype variable of f16 / bf16 / f32 rows): one value converted by the
                # scalar unit (GmScalar), per-row values Cast to fp32 with their copy in (_vector_part), rows and
                # columns staged, then converted by a cast_in instruction
                loads.append((v, inp, sp, dt))
                if sp not in ("one", "stat"):
                    ctx.p.instrs.append(Instr("cast_in", v, gm=inp, space=sp))
        elif st[0] == "const":
            ctx.space[st[1]] = "scalar"
            ctx.scalar_text[st[1]] = st[2]
        elif st[0] == "attr":
            ctx.space[st[1]] = "scalar"
            ctx.scalar_text[st[1]] = f"attr_{st[1]}"
        elif st[0] == "op":
            _k, v, op, ins, sp = st
            ctx.space[v] = sp
            try:
                if op in ROW_REDUCE_OPS.values():   # a row reduction over N: the row programs' own lowering
                    lower_row_reduce(ctx, v, ctx.operand(ins[0]), op.removeprefix("row_"), "N")
                else:
                    lower_elementwise(ctx, v, sp, op, ins)
            except Unsupported:
                raise
            except IRError as e:   # an op the vector lowering refuses (a scalar exp): named at its spec line
                raise Unsupported(v, lines.get(v, ""), str(e).removeprefix("row kernel: ")) from None
        elif st[0] == "sstore":   # a per-row value to its own output, written per row by the scalar unit
            ctx.p.instrs.append(Instr("sstore", "", (st[1],), arg=ctx.scalar_text.get(st[1], st[1]), gm=st[2],
                                      space="stat"))
        elif lay.out_dtype in BYTE_DTYPES:   # fp32 -> half (CAST_ODD: one correct rounding after) -> the byte type
            ctx.p.instrs.append(Instr("vnarrow", f"h_{lay.out}", (st[1],), space="row"))
            ctx.p.instrs.append(Instr("store", "", (f"h_{lay.out}",), arg=st[2], gm=lay.out, space="row", op="half"))
        else:
            ctx.p.instrs.append(Instr("store", "", (st[1],), arg=st[2], gm=lay.out, space="row"))
        stamp(ctx.p.instrs, n0, lay.out_loc if st[0] == "store" else lines.get(st[1], ""))   # the `// spec:` traces
        if when:   # the instructions of a step some presences run only (merge_presences)
            ctx.p.instrs[n0:] = [replace(i, when=when) for i in ctx.p.instrs[n0:]]
    p = ctx.p
    p.presence, p.served = tuple(lay.presence), tuple(lay.served)
    runs, npass = chunk_passes(p.instrs, [f"st_{v}" for v, sp in ctx.space.items() if sp == "stat"
                                          and ctx.scalar_text.get(v) == f"st_{v}"])
    _allocate(p)
    if lay.presence:
        join_copies(p)
    stores = tuple((i.srcs[0], i.arg, i.when) for i in p.instrs if i.kind == "store")
    return EpiProgram(tuple(p.instrs), p.row_temps, tuple(p.col), tuple(pre.items()), tuple(loads),
                      stores[0][:2], tuple(guard.items()), stores, tuple(lay.presence), lay.acc == "i32", runs, npass)


def chunk_passes(instrs: list, inputs: list) -> tuple:
    """(runs, passes) of a band epilogue run over a row in column chunks (docs/design.md "Cube family: rows longer
    than UB"): `instrs` the program's instructions before the buffer assignment (values by name), `inputs` the
    per-row scalars read from GM (st_<value>: ready before the first pass). Pass p streams the row's chunks once;
    a row reduction runs in the pass of its operand's level and its result is ready from the next pass; a row or
    column instruction runs in every pass that needs it (its reductions', or the last pass's stores': recomputed
    from the chunk, the workspace's fp32 row read again); a per-row let is placed before the chunk loop of the
    pass its operands are ready in (`passes`: after the last loop). runs[k]: the passes instruction k runs in
    (a let's one pass; a per-row output's store: `passes`). passes: 1 + the last pass any reduction or store
    needs."""
    avail = {x: 0 for x in inputs}   # per-row scalar -> the first pass that may read it
    lvl, def_of = {}, {}   # row / column value -> the least pass it can be computed in, its instruction
    level = []             # each instruction's least pass

    def scalars(i):
        return [x for x in avail if i.arg and re.search(rf"\b{re.escape(x)}\b", str(i.arg))] + \
            [x for x in i.srcs if x in avail]
    for k, i in enumerate(instrs):
        at = max([lvl[x] for x in i.srcs if x in lvl] + [avail[x] for x in scalars(i)] + [0])
        if i.kind in ROW_REDUCE:
            avail[i.dst] = at + 1
        elif i.kind == "sexpr":
            avail[i.dst] = at
        elif i.kind not in ("store", "sstore") and i.dst:
            lvl[i.dst], def_of[i.dst] = at, k
        level.append(at)
    ends = [level[k] for k, i in enumerate(instrs) if i.kind in ROW_REDUCE or i.kind == "store"]
    npass = max(ends + [0]) + 1
    runs = [set() for _ in instrs]
    for p in range(npass):
        todo = [k for k, i in enumerate(instrs) if i.kind in ROW_REDUCE and level[k] == p
                or i.kind == "store" and p == npass - 1]
        while todo:
            k = todo.pop()
            if p in runs[k]:
                continue
            runs[k].add(p)
            todo += [def_of[x] for x in instrs[k].srcs if x in def_of]
    for k, i in enumerate(instrs):
        if i.kind == "sexpr":
            runs[k] = {level[k]}
        elif i.kind == "sstore":
            runs[k] = {npass}
    return tuple(tuple(sorted(r)) for r in runs), npass



def _reduce_methods(prog: EpiProgram) -> tuple:
    """The AIVs' row reduction methods the epilogue calls (none without a row reduction): RowSum / RowMax(src, red,
    n) = the sum / maximum of n fp32 lanes of `src` (ReduceSum / ReduceMax into red[0], scratch from red[8]), read
    back by the scalar unit (docs/reference/ascendc.md §1.9; the attention family's methods of the same names)."""
    out = []
    for kind, name, op, what in (("rsum", "RowSum", Op.REDUCE_SUM, "Sum"), ("rmax", "RowMax", Op.REDUCE_MAX, "Max")):
        if any(i.kind == kind for i in prog.instrs):
            out.append(K.Func(name, (K.Param("src", "tensor", "float"), K.Param("red", "tensor", "float"),
                                     K.Param("n")), (
                K.vec(op, dst=K.Ref("red"), src=K.Ref("src"), tmp=K.Ref("red", Lit(8)), count=Sym("n")),
                K.GetValue("v", K.Ref("red")),
                K.Return(K.FRef("v"))), ret="float",
                doc=f"{what} of n fp32 lanes of src (the result in red[0], the scratch after it; read back by the "
                    f"scalar unit)."))
    return tuple(out)


def _guarded(nodes, when: tuple, presence: tuple) -> tuple:
    """`nodes` inside one If per cube of the presences `when` (Instr.when; opgen.kernel.rowpresence.cover:
    disjoint cubes, so at most one runs), each testing the class's presence members (hasInput<k>_,
    opgen.kernel.rowclass.presence_member), each marked a presence guard (kir.If.guard); `nodes` itself when `when`
    is () (every presence runs them)."""
    nodes = tuple(nodes)
    if not when or not nodes:
        return nodes
    out = []
    for c in cover(when, len(presence)):
        conds = tuple(Sym(presence_member(k)) if lit else Constraint("==", Sym(presence_member(k)), Lit(0))
                      for k, lit in enumerate(c) if lit is not None)
        words = ", ".join(f"{n} {'present' if lit else 'absent'}" for n, lit in zip(presence, c) if lit is not None)
        out.append(K.If(conds, nodes, doc=f"when {words}", guard=True))
    return tuple(out)


def _gap(n, sz, pitch) -> object:
    """UB gap (32-B blocks) between bursts of n elements of sz bytes landing at a row pitch of `pitch` elements
    (DataCopyPad rounds each burst up to 32 B, docs/reference/ascendc.md §1.8)."""
    return (pitch * sz - Fn("align_up", (n * sz, Lit(32)))) // 32


def _vector_part(lay: GemmLayout, prog: EpiProgram, lets: tuple, out_t: str, off, ksplit: bool = False,
                 out_pitch=None) -> tuple:
    """(UB locals, GM tensors of the epilogue's inputs, the AIV statements) of the vector epilogue (module
    docstring): per block of this AI Core, wait for its slot, the column rows (a bias) in and finished, then passes
    of up to epiRows rows of this AIV's half
    (rows h * sub .. of h = ceil(mt / 2)): copy the fp32 rows and the inputs in, run each instruction over the
    pass's rows (instruction-major, each per-row loop `disjoint`; one instruction over all rows of the pass when they
    touch, nt = baseN, and it reads no column row), cast, copy out; free the slot. No sync: the dependency pass
    places the flags and barriers.

    ksplit: the K split's reduction instead (docs/design.md "Cube family: the K split"): after its AIC's FLAG_PART
    and a SyncAll of every AIV (every AIC's partial blocks are then written), this AIV's contiguous range of pass
    items (itemsPerAiv, the first itemsTail one more; item i is rows pi * redRows .. of block i // passesPerBlock,
    pi = i % passesPerBlock): the fp32 rows of partial 0 copied in, then partial 1 .. kSplit - 1 each copied to a
    scratch row buffer and added in that order (a fixed order: the sum does not depend on which core finished
    first), then the epilogue, cast and store as above."""
    S = Sym
    band = row_reduces(lay)
    # a band's UB rows are epiChunk wide (all of N when a row fits: epiChunk == epiPitch; else a column chunk), its
    # region's rows epiPitch apart in the workspace (docs/design.md "Cube family: rows longer than UB")
    bn, N, R = S("epiChunk" if band else "baseN"), S("N"), S("epiRows")
    span = S("epiPitch") if band else bn
    out_pitch = N if out_pitch is None else out_pitch
    lines = dict(lay.cites)

    def mm_cite(text):   # the matmul's fp32 block or partial: its comment and the matmul's spec line
        return _cite(text, lay.mm_loc)
    row = S("r") * bn    # element offset of row r of a pass in every row buffer (pitch baseN)
    locs, gms, gets, copies_in = [], [], [], []
    col_in = []
    inputs = sorted({i for _v, (_sp, i) in prog.pre if i} | {i for _v, i, _sp, _t in prog.loads})
    gm_of = {i: f"eGm{k}_" for k, i in enumerate(inputs)}   # member names of the inputs (never a spec name)
    load_t = {i: t for _v, i, _sp, t in prog.loads}
    for i in inputs:
        dt = "float" if any(inp == i for _v, (_sp, inp) in prog.pre) else load_t[i]
        gms.append(K.GmTensor(gm_of[i], dt, cpp_name(i)))

    def buf(name, var, dtype, elems, esz):
        locs.append(K.Local(name, K.TPos.VECCALC))
        gets.extend((K.InitBuffer(name, elems * esz), K.Get(var, name, dtype)))

    if prog.row_temps:   # the row temporaries (none when the epilogue is the cast alone)
        buf("epiW_", "ew", "float", Lit(prog.row_temps) * R * bn, 4)
    if prog.col:
        buf("epiC_", "ec", "float", Lit(len(prog.col)) * bn, 4)
    ref = {}   # value or staged input -> (tensor var, is a row buffer)
    guard = dict(prog.guard)
    to_f32 = []   # an int8 product: the int32 rows converted into the block's fp32 rows, before the epilogue
    if prog.acc_i32:
        buf("epiI_", "ei", "int32_t", R * bn, 4)

    def when(v, nodes):   # the copy of an input read only under some presences, guarded by them
        return _guarded(nodes, guard.get(v, ()), prog.presence)

    cin = {}     # value (a staged input: ("in", input)) -> the statements that copy it in (a chunked row's passes)
    stats = {}   # per-row value -> its UB buffer (the pass's rows of an [M] input, read with GetValue)
    ones = []    # inputs of one value: read once per AIV from GM by the scalar unit, before the blocks
    one_b = []   # inputs of one value per batch index: read per block (its batch index bi), after the block's lets
    bcast = dict(lay.bcast)

    def row_at(inp):   # element offset of the pass's first row of an [M, N] input in this block's columns
        e = (S("m0") + S("c0")) * N + S("n0")
        return e if bcast.get(inp) == "shared" else off(2, e)   # shared: the same matrix for every batch index

    def col_at(inp):   # element offset of the block's columns of a column vector (one row per batch index, or one)
        return S("bi") * N + S("n0") if bcast.get(inp) == "batched" else S("n0")

    def stat_at(inp):   # element offset of the pass's first row of a per-row input: [*batch, M, 1] steps by the
        # batch index of a batched product (a folded one's rows are the input's flat rows), [M, 1] / [M] does not
        e = S("m0") + S("c0")
        return S("bi") * S("M") + e if bcast.get(inp) == "batched" and lay.batch else e

    def stat_in(k, v, inp, lt=None):   # the pass's rows of a per-row input into an fp32 stage of rows + 8 values the
        # scalar unit reads row by row (GetValue reads fp32): an fp32 input copied in straight (pre); one in type lt
        # (T, f16 / bf16, a dtype variable) staged in it first -- rows + 16 elements: DataCopyPad pads the burst to
        # 32 B -- and Cast to the stage (CastFrom for a variable that may be fp32), both with the copy in
        n_in = len(copies_in)
        cite = _cite(f"the pass's rows of {inp}", lines.get(v, ""))
        if lt is None:
            fvar = f"ep{k}"
            buf(f"epiP{k}_", fvar, "float", R + Lit(8), 4)
            copies_in.append(K.Copy(K.Ref(fvar), K.GmView(gm_of[inp], stat_at(inp)), Lit(1), S("rows") * 4, Lit(0),
                                    Lit(0), cite))
        else:
            tvar, fvar, tsz = f"et{k}", f"ef{k}", K.SizeOf(lt)
            buf(f"epiT{k}_", tvar, lt, R + Lit(16), tsz)
            buf(f"epiF{k}_", fvar, "float", R + Lit(8), 4)
            copies_in.append(K.Copy(K.Ref(tvar), K.GmView(gm_of[inp], stat_at(inp)), Lit(1), S("rows") * tsz, Lit(0),
                                    Lit(0), cite))
            copies_in.append(K.vec(Op.CAST_FROM, dst=K.Ref(fvar), src=K.Ref(tvar), count=S("rows"),
                                   doc=_cite(f"{inp}'s rows to fp32 (a copy when it is fp32)", lines.get(v, "")))
                             if lt not in (OPERAND_T,) + FIXED16 else
                             K.vec(Op.CAST, dst=K.Ref(fvar), src=K.Ref(tvar), mode="CAST_NONE", count=S("rows"),
                                   doc=_cite(f"{inp}'s rows to fp32", lines.get(v, ""))))
        stats[v] = fvar
        copies_in[n_in:] = when(v, copies_in[n_in:])
        cin[v] = tuple(copies_in[n_in:])

    def one_of(v, inp):   # the one value (fp32, or f16 / bf16 converted exactly by the scalar unit's GmScalar)
        per_batch = bcast.get(inp) == "batched"   # [*batch, 1, 1]: this batch index's value, read per block
        read = K.FLoad(K.GmView(gm_of[inp], S("bi") if per_batch else Lit(0)))
        doc = _cite(f"the value of {inp} for this batch index" if per_batch else f"the one value of {inp}",
                    lines.get(v, ""))
        if per_batch:   # after the block's lets (bi), in one_b
            one_b.extend(one_read(v, read, doc))
            return []
        return one_read(v, read, doc)

    def one_read(v, read, doc):
        if guard.get(v):   # an absent optional input reads nothing: the scalar stays 0 (its steps do not run)
            return [K.FLet(f"one_{v}_", K.FConst(0.0), mutable=True, doc=doc),
                    *_guarded((K.FAssign(f"one_{v}_", read, doc=doc),), guard[v], prog.presence)]
        return [K.FLet(f"one_{v}_", read, doc=doc)]

    for k, (v, (sp, inp)) in enumerate(prog.pre):
        var = f"ep{k}"
        n_in, n_col = len(copies_in), len(col_in)
        if sp == "one":
            ones += one_of(v, inp)
            continue
        if sp == "stat":
            stat_in(k, v, inp)
            continue
        buf(f"epiP{k}_", var, "float", (R if sp == "row" else Lit(1)) * bn, 4)
        ref[v] = (var, sp == "row")
        if not inp and ksplit:   # partial 0, then the others added in order k = 1 .. kSplit - 1
            acc_var = var
            part = S("pOff") + S("c0") * bn
            copies_in.append(K.Copy(K.Ref(var), K.GmView("wsGm_", part), S("rows"), S("nt") * 4, (bn - S("nt")) * 4,
                                    _gap(S("nt"), 4, bn), mm_cite("fp32 rows of partial 0 of the block")))
        elif not inp and prog.acc_i32:   # int32 rows (rounded to fp32 to nearest even: exact below 2^24)
            src = K.GmView("wsGm_", S("wsOff") + (S("c0") * N + S("n0") if band else S("c0") * S("nt")))
            copies_in.append(K.Copy(K.Ref("ei"), src, S("rows"), S("nt") * 4, (N - S("nt")) * 4 if band else Lit(0),
                                    _gap(S("nt"), 4, bn),
                                    mm_cite("int32 rows of the block from the workspace slot")))
            to_f32.append(K.For("r", Lit(0), S("iters"), Lit(1), (
                K.vec(Op.CAST, dst=K.Ref(var, row), src=K.Ref("ei", row), mode="CAST_RINT", count=S("cnt"),
                      doc=mm_cite("the int32 sums to fp32")),), disjoint=True))
        elif not inp:
            # a band's region: rows of N (a chunk's columns n0 .. of row c0); a block's slot: dense rows of nt
            src = K.GmView("wsGm_", S("wsOff") + (S("c0") * N + S("n0") if band else S("c0") * S("nt")))
            copies_in.append(K.Copy(K.Ref(var), src, S("rows"), S("nt") * 4, (N - S("nt")) * 4 if band else Lit(0),
                                    _gap(S("nt"), 4, bn),
                                    mm_cite("fp32 rows of the block from the workspace slot")))
        elif sp == "row":
            copies_in.append(K.Copy(K.Ref(var), K.GmView(gm_of[inp], row_at(inp)),
                                    S("rows"), S("nt") * 4, (N - S("nt")) * 4, _gap(S("nt"), 4, bn), _cite(f"rows of {inp}", lines.get(v, ""))))
        else:
            col_in.append(K.Copy(K.Ref(var), K.GmView(gm_of[inp], col_at(inp)), Lit(1), S("nt") * 4, Lit(0), Lit(0),
                                 _cite(f"columns of {inp}", lines.get(v, ""))))
        copies_in[n_in:] = when(v, copies_in[n_in:])
        col_in[n_col:] = when(v, col_in[n_col:])
        cin[v] = tuple(copies_in[n_in:]) + tuple(col_in[n_col:]) + (tuple(to_f32) if not inp else ())
    for k, (v, inp, sp, lt) in enumerate(prog.loads):
        var = f"et{k}"
        tsz = K.SizeOf(lt)
        n_in, n_col = len(copies_in), len(col_in)
        if sp == "one":   # not staged: the scalar unit reads the element in its type (GmScalar converts it)
            ones += one_of(v, inp)
            continue
        if sp == "stat":
            stat_in(k, v, inp, lt)
            continue
        buf(f"epiT{k}_", var, lt, (R if sp == "row" else Lit(1)) * bn, tsz)
        ref[("in", inp)] = (var, sp == "row")
        if sp == "row":
            copies_in.append(K.Copy(K.Ref(var), K.GmView(gm_of[inp], row_at(inp)),
                                    S("rows"), S("nt") * tsz, (N - S("nt")) * tsz, _gap(S("nt"), tsz, bn),
                                    _cite(f"rows of {inp}", lines.get(v, ""))))
        else:
            col_in.append(K.Copy(K.Ref(var), K.GmView(gm_of[inp], col_at(inp)), Lit(1), S("nt") * tsz, Lit(0),
                                 Lit(0), _cite(f"columns of {inp}", lines.get(v, ""))))
        copies_in[n_in:] = when(v, copies_in[n_in:])
        col_in[n_col:] = when(v, col_in[n_col:])
        cin[("in", inp)] = tuple(copies_in[n_in:]) + tuple(col_in[n_col:])
    souts = {}   # per-row output -> its stage of the pass's rows (fp32, SetValue per row, one copy out per pass)
    for k, o in enumerate(dict.fromkeys(i.gm for i in prog.instrs if i.kind == "sstore")):
        souts[o] = f"eq{k}"
        gms.append(K.GmTensor(f"sGm{k}_", "float", cpp_name(o)))
        buf(f"epiQ{k}_", f"eq{k}", "float", R + Lit(8), 4)
    stores = prog.stores or ((*prog.store, ()),)
    osz = K.SizeOf(out_t)
    # a byte output's staged rows: a pitch of whole 32-B blocks (the Cast's destination and the copy's source rows
    # start on blocks), the halves before it and the store always row by row
    byte_out = lay.out_dtype in BYTE_DTYPES
    opitch = Fn("align_up", (bn, Lit(32))) if byte_out else bn
    if any(r for _v, r, _w in stores):
        buf("epiO_", "eo", out_t, R * opitch, osz)

    operand, is_col = _operand_refs(prog, ref, R, bn, "ew", "ec")

    col_ops, row_ops = [], []
    # an epilogue computing per-row values (row reductions over N, scalar arithmetic on them) runs row-major: all of
    # a row's instructions in one iteration of one loop over the pass's rows, its per-row values float scalars
    # (the rsum / rmax results by the RowSum / RowMax methods, `_reduce_methods`; sexpr as float lets)
    row_major = prog.per_row
    row_body, got = [], set()
    if prog.reduces:   # the reductions' result block and scratch (EpiProgram.col_bytes counts it)
        buf("epiRed_", "ered", "float", Lit(2) * bn, 4)

    def mk(i, r, rix, nt):   # the node of instruction i: its rows at element offset r (row index rix), count nt
        if i.kind == "cast_in" and load_t[i.gm] not in (OPERAND_T,) + FIXED16:   # a variable that may be f32
            var, _ = ref[("in", i.gm)]
            return K.vec(Op.CAST_FROM, dst=operand(i.dst, r), src=K.Ref(var, r), count=nt,
                         doc=_cite(f"{i.gm} to fp32 (a copy when it is fp32)", i.loc))
        if i.kind == "cast_in":
            var, _ = ref[("in", i.gm)]
            return K.vec(Op.CAST, dst=operand(i.dst, r), src=K.Ref(var, r), mode="CAST_NONE", count=nt,
                         doc=_cite(f"{i.gm} to fp32", i.loc))
        if i.kind == "vnarrow":   # fp32 -> half rounded to odd (a byte output's first step: BYTE_DTYPES)
            return K.vec(Op.CAST, dst=replace(operand(i.dst, r), as_dtype="half"),
                         src=operand(i.srcs[0], r), mode="CAST_ODD", count=nt,
                         doc=_cite("to half, rounded to odd (the byte output's one rounding follows)", i.loc))
        if i.kind == "store":
            if not i.arg:
                return None
            src = operand(i.srcs[0], r)
            if i.op == "half":   # the halves to the byte output type with the output's round mode
                src = replace(src, as_dtype="half")
            return K.vec(Op.CAST, dst=K.Ref("eo", rix * opitch), src=src, mode=i.arg, count=nt,
                         doc=_cite(f"to the output type ({i.arg})", i.loc))
        if i.kind == "sstore":   # the row's value into the pass's stage of its output (copied out after the rows)
            return K.SetValue(K.Ref(souts[i.gm], rix), parse_scalar(i.arg, ("N",)),
                              doc=_cite(f"row r's value of {i.gm}", i.loc))
        if i.kind in ROW_REDUCE:   # the row's sum / maximum over its nt columns, a float scalar
            return K.Call("RowSum" if i.kind == "rsum" else "RowMax", (operand(i.srcs[0], r), K.Ref("ered"), nt),
                          i.dst, doc=spec_doc(i.loc))
        if i.kind == "sexpr":   # per-row scalar arithmetic (a mean's division by N, + epsilon, rsqrt)
            return K.FLet(i.dst, parse_scalar(i.arg, ("N",)), doc=spec_doc(i.loc))
        args = {"dst": operand(i.dst, r), "count": nt}
        for j, x in enumerate(i.srcs):
            args[f"src{j}"] = operand(x, r)
        if i.kind in ("vscalar", "vdup"):
            args["scalar"] = parse_scalar(i.arg, ("N",))
        return K.vec(instr_op(i), doc=spec_doc(i.loc), **args)

    for i in prog.instrs:
        is_row = i.space == "row" or row_major and i.space == "stat"
        r = row if is_row else Lit(0)
        # an instruction reading no column row runs over the whole pass at once when its rows touch (nt = baseN)
        # the per-row scalars it reads: st_<name> as a whole word (st_v6 is not read by an argument naming st_v60)
        reads = [x for x in stats if i.arg and re.search(rf"\bst_{re.escape(x)}\b", str(i.arg))]
        flat = is_row and not row_major and not any(is_col(x) for x in i.srcs) and not reads \
            and not (byte_out and i.kind in ("vnarrow", "store"))
        node = mk(i, r, S("r") if is_row else Lit(0), S("cnt") if flat else S("nt"))
        if node is None:
            continue
        if is_row and row_major:   # one iteration holds all of the row: each GM per-row value read once
            fresh = [x for x in reads if x not in got]
            if not i.when:
                got.update(fresh)
            row_body.extend(_guarded(tuple(K.GetValue(f"st_{x}", K.Ref(stats[x], S("r")), _cite(
                f"row r's value of {x}", lines.get(x, ""))) for x in fresh) + (node,), i.when, prog.presence))
        elif is_row:   # each iteration its own row of every row operand: no dependence between iterations
            body = tuple(K.GetValue(f"st_{x}", K.Ref(stats[x], S("r")), _cite(f"row r's value of {x}", lines.get(x, "")))
                         for x in reads) + (node,)
            row_ops.extend(_guarded((K.For("r", Lit(0), S("iters") if flat else S("rows"), Lit(1), body,
                                           disjoint=True),), i.when, prog.presence))
        else:
            col_ops.extend(_guarded((node,), i.when, prog.presence))
    if row_body:   # not `disjoint`: the rows share the reductions' scratch (epiRed_)
        row_ops.append(K.For("r", Lit(0), S("rows"), Lit(1), tuple(row_body),
                             doc="the pass's rows one by one: each row's values and its per-row scalars"))

    def out_copy(src_out):
        return K.Copy(K.GmView("cGm_", off(3, (S("m0") + S("c0")) * out_pitch + S("n0"))), src_out, S("rows"),
                      S("nt") * osz, _gap(S("nt"), osz, opitch), (out_pitch - S("nt")) * osz, _cite("the pass's output rows", lay.out_loc))

    if all(r for _v, r, _w in stores):   # every presence's store cast into eo: one copy out
        store = (out_copy(K.Ref("eo")),)
    else:   # an fp32 output copied from the stored value itself, each presence's from its own
        store = tuple(x for sv, r, w in stores
                      for x in _guarded((out_copy(K.Ref("eo") if r else operand(sv, Lit(0))),), w, prog.presence))
    stat_store = ()
    for k, o in enumerate(souts):   # the pass's rows of each per-row output: one burst of rows fp32 values
        row0 = S("m0") + S("c0") if not lay.batch else S("bi") * S("M") + S("m0") + S("c0")
        stat_store += (K.Copy(K.GmView(f"sGm{k}_", row0), K.Ref(souts[o]), Lit(1), S("rows") * 4, Lit(0), Lit(0),
                         _cite(f"the pass's rows of {o}", lay.out_loc)),)
    whole = (Constraint("==", S("nt"), bn),)
    reduce_ = ()
    if ksplit:   # partials 1 .. kSplit - 1 of these rows, each added to the running sum in k order
        buf("epiS_", "es", "float", R * bn, 4)
        add = K.vec(Op.ADD, dst=K.Ref(acc_var, row), src0=K.Ref(acc_var, row), src1=K.Ref("es", row),
                    count=S("cnt"), doc="the running sum plus partial kr")
        reduce_ = (K.For("kr", Lit(1), S("kSplit"), Lit(1), (
            K.Copy(K.Ref("es"), K.GmView("wsGm_", S("pOff") + (S("kr") * S("baseM") + S("c0")) * bn), S("rows"),
                   S("nt") * 4, (bn - S("nt")) * 4, _gap(S("nt"), 4, bn), mm_cite("fp32 rows of partial kr")),
            K.For("r", Lit(0), S("iters"), Lit(1), (add,), disjoint=True),
        ), doc="the other partials in k order (deterministic: independent of the cores' timing)", nonempty=True),)
    chunk = (
        K.Let("iters", K.Select(whole, Lit(1), S("rows"))),
        K.Let("cnt", K.Select(whole, S("rows") * S("nt"), S("nt"))),
        *merge_guards([*copies_in, *reduce_, *to_f32, *row_ops, *store, *stat_store]),
    )
    # the column rows (a bias) once per block: loaded and finished before the passes, free after them
    cols = tuple(merge_guards([*col_in, *col_ops]))
    passes = K.For("c0", S("r0"), S("r1"), R, chunk, tail="rows", doc="passes over this AIV's rows of the block")
    head, band_cols = lets, cols
    if band:   # whole rows when one fits the UB (epiChunk == epiPitch), else each row in column chunks
        head = tuple(x for x in lets if not (isinstance(x, K.Let) and x.name in ("n0", "nt")))
        whole_rows = tuple(x for x in lets if x not in head) + cols + (passes,)
        chunked = _chunked_rows(prog, mk, cin, stats, [*store], stat_store)
        passes = K.If((Constraint("==", bn, span),), whole_rows, chunked,
                      doc="whole rows in UB; else each row streamed in column chunks, once per pass")
        band_cols = ()   # read per chunk, or once per band inside the whole-row branch
    block = (
        *head,
        *one_b,
        K.Let("j", S("blk") - S("first")), K.Let("s", S("j") % (S("epiRegions") if band else Lit(2))),
        K.Let("wsOff", (S("core") * (S("epiRegions") if band else Lit(2)) + S("s")) * S("baseM") * span),
        K.Let("halfRows", (S("mt") + 1) // 2),
        K.Let("r0", K.SUB_BLOCK_IDX * S("halfRows")),
        K.Let("r1", Fn("min", (S("mt"), S("r0") + S("halfRows")))),
        _by_slot(lambda i: K.CrossCoreWaitFlag(FLAG_READY + i, "the AIC has written slot s")),
        *band_cols,
        passes,
        _by_slot(lambda i: K.CrossCoreSetFlag(2, Pipe.MTE2, FLAG_FREE + i, "this AIV is done reading slot s")),
    )
    attrs = tuple(K.FLet(f"attr_{a}", K.FBits(S(f"{a}Bits")), doc=f"the attribute {a}") for a in epi_attrs(lay))
    if ksplit:
        rr = S("redRows")
        item = (
            K.Let("blk", S("it") // S("passesPerBlock")),
            K.Let("pi", S("it") % S("passesPerBlock")),
            *lets,
            *one_b,
            K.Let("pOff", S("blk") * S("kSplit") * S("baseM") * bn),
            *cols,
            K.For("c0", S("pi") * rr, Fn("min", (S("mt"), S("pi") * rr + rr)), rr, chunk, tail="rows",
                  doc="this item's rows of the block (none when the block has fewer)"),
        )
        vector = (*attrs, *ones,
                  K.CrossCoreWaitFlag(FLAG_PART, "the AIC of this AI Core has written its partial blocks"),
                  K.SyncAll("every AIV past its wait: every AIC's partial blocks are written"),
                  K.Let("iFirst", K.BLOCK_IDX * S("itemsPerAiv") + Fn("min", (K.BLOCK_IDX, S("itemsTail")))),
                  K.Let("iLast", S("iFirst") + S("itemsPerAiv")
                        + K.Select((Constraint("<", K.BLOCK_IDX, S("itemsTail")),), Lit(1), Lit(0))),
                  K.For("it", S("iFirst"), S("iLast"), Lit(1), item, doc="this AIV's pass items"))
        return tuple(locs), tuple(gms), tuple(gets), vector
    vector = (*attrs, *ones, K.Let("core", K.BLOCK_IDX // K.TASK_RATIO), *_range(S("core")),
              K.For("blk", S("first"), S("last"), Lit(1), block, doc="this AI Core's output blocks"))
    return tuple(locs), tuple(gms), tuple(gets), vector


FLAG_PRO = 5
"""Cross-core flag id of a computed B: the AIVs -> their AIC, every AIV's part of B is in the workspace."""
PRO_FIELDS = ("proRows", "proGroup", "proPieces", "proUnitsPerAiv", "proUnitsTail", "proOff")
"""The tiling fields of a computed B (opgen.tiling.cube): rows of a unit (a pass), rows of a group (K per channel)
and units per group and block column, units (at most proRows rows of one group x baseN columns of B) of every AIV and
the first proUnitsTail AIVs' one more, B's element offset in the workspace (past the epilogue's slots)."""


def pro_layout(lay: GemmLayout) -> GemmLayout:
    """The computed B's steps as a vector program's layout (its rows are B's [K, N] rows; epilogue_program lowers
    it): steps, presences, lines and the store to `b`."""
    return replace(lay, steps=lay.pro, step_when=lay.pro_when, cites=lay.pro_cites, out=lay.b, acc="f32",
                   out_loc=dict(lay.pro_cites).get(next(st[1] for st in lay.pro if st[0] == "store"), lay.mm_loc))


def pro_program(lay: GemmLayout) -> EpiProgram:
    """The EpiProgram of the computed B (pro_layout); its `pre` value of input "" is the source's fp32 rows."""
    return epilogue_program(pro_layout(lay))


def pro_row_bytes(prog: EpiProgram) -> int:
    """UB bytes per element of a prologue pass row: the program's (EpiProgram.row_bytes) and the source's int8 and
    half staging rows (1 + 2)."""
    return prog.row_bytes() + 3


def _operand_refs(prog, ref: dict, rows, pitch, work: str, cols: str):
    """(operand, is_col) of a vector pass over an EpiProgram's rows (the epilogue's and the computed B's):
    operand(x, r) is the UB Ref of value x at pass row r -- work row `w<k>` of the `work` buffer (rows x pitch
    elements a row), column value x of the `cols` buffer (one pitch each), else the buffer `ref` maps it to ((var,
    is_row): row r of a row buffer, element 0 of a column one); is_col(x) whether x is one value for every row."""
    def operand(x, r):
        if x.startswith("w") and x[1:].isdigit():
            return K.Ref(work, Lit(int(x[1:])) * rows * pitch + r)
        if x in prog.col:
            return K.Ref(cols, Lit(prog.col.index(x)) * pitch)
        var, is_row = ref[x]
        return K.Ref(var, r if is_row else Lit(0))

    def is_col(x):
        return x in prog.col or (x in ref and not ref[x][1])
    return operand, is_col


def _prologue_part(lay: GemmLayout, prog: EpiProgram) -> tuple:
    """(UB locals, GM tensors, buffer statements, the AIV statements) of a computed B (docs/design.md "Cube family:
    an operand computed on the vector cores"): units of at most proRows rows of one group x baseN columns of B [K, N]
    (u % nBlocks the block column; t = u // nBlocks: group t // proPieces, its piece t % proPieces; a per-channel B is
    one group of K rows; the inputs read per group (GemmLayout.pro_group) at row kb0 / proGroup) in contiguous ranges over the 2 * blockDim AIVs (proUnitsPerAiv, the first
    proUnitsTail one more); per unit the column inputs' columns in and finished, the int8 rows in (DataCopyPad, UB
    pitch baseN bytes: baseN a multiple of 32), Cast int8 -> half -> fp32 (exact), the program's instructions, the
    Cast to T and the rows out to B's workspace region (pitch N); then a SyncAll of every AIV (every part of B
    written) and CrossCoreSetFlag<2, PIPE_MTE3>(FLAG_PRO) to this AI Core's AIC. No other sync: the dependency pass
    places them."""
    S = Sym
    bn, N, R = S("baseN"), S("N"), S("proRows")
    lines = dict(lay.pro_cites)
    row = S("r") * bn
    locs, gms, gets = [], [K.GmTensor("proGm_", lay.pro_src, cpp_name(lay.b))], []
    copies_in, col_in = [], []
    inputs = sorted({i for _v, (_sp, i) in prog.pre if i} | {i for _v, i, _sp, _t in prog.loads})
    gm_of = {i: f"pGm{k}_" for k, i in enumerate(inputs)}
    load_t = {i: t for _v, i, _sp, t in prog.loads}
    for i in inputs:
        dt = "float" if any(inp == i for _v, (_sp, inp) in prog.pre) else load_t[i]
        gms.append(K.GmTensor(gm_of[i], dt, cpp_name(i)))

    def buf(name, var, dtype, elems, esz):
        locs.append(K.Local(name, K.TPos.VECCALC))
        gets.extend((K.InitBuffer(name, elems * esz), K.Get(var, name, dtype)))

    def cite(text, v):
        return _cite(text, lines.get(v, ""))

    guard = dict(prog.guard)
    per_group = set(lay.pro_group[1]) if lay.pro_group else set()

    def col_at(inp):   # an input's columns of the unit: of its group's row when it has one per group
        return S("grp") * N + S("n0") if inp in per_group else S("n0")

    def when(v, nodes):
        return _guarded(nodes, guard.get(v, ()), prog.presence)

    if prog.row_temps:
        buf("proW_", "pw", "float", Lit(prog.row_temps) * R * bn, 4)
    if prog.col:
        buf("proC_", "pc", "float", Lit(len(prog.col)) * bn, 4)
    buf("proI_", "pi8", lay.pro_src, R * bn, 1)
    buf("proH_", "ph", "half", R * bn, 2)
    ref, widen = {}, []
    for k, (v, (sp, inp)) in enumerate(prog.pre):
        var = f"pp{k}"
        if sp not in ("row", "col"):
            raise Unsupported(v, lines.get(v, ""), "an input of one value in the right operand's computation: not "
                              "lowered")
        buf(f"proP{k}_", var, "float", (R if sp == "row" else Lit(1)) * bn, 4)
        ref[v] = (var, sp == "row")
        if not inp:   # the source's rows: int8 -> half -> fp32, exact
            copies_in.append(K.Copy(K.Ref("pi8"), K.GmView("proGm_", S("kb0") * N + S("n0")), S("rows"), S("nt"),
                                    N - S("nt"), _gap(S("nt"), 1, bn), cite(f"int8 rows of {lay.b}", v)))
            widen.append(K.For("r", Lit(0), S("iters"), Lit(1), (
                K.vec(Op.CAST, dst=K.Ref("ph", row), src=K.Ref("pi8", row), mode="CAST_NONE", count=S("cnt"),
                      doc=cite(f"{lay.b} int8 -> half (exact)", v)),), disjoint=True))
            widen.append(K.For("r", Lit(0), S("iters"), Lit(1), (
                K.vec(Op.CAST, dst=K.Ref(var, row), src=K.Ref("ph", row), mode="CAST_NONE", count=S("cnt"),
                      doc=cite(f"{lay.b} half -> fp32 (exact)", v)),), disjoint=True))
            continue
        n_col = len(col_in)
        col_in.append(K.Copy(K.Ref(var), K.GmView(gm_of[inp], col_at(inp)), Lit(1), S("nt") * 4, Lit(0), Lit(0),
                             cite(f"columns of {inp}" + (" (the unit's group row)" if inp in per_group else ""), v)))
        col_in[n_col:] = when(v, col_in[n_col:])
    for k, (v, inp, sp, lt) in enumerate(prog.loads):
        var = f"pt{k}"
        tsz = K.SizeOf(lt)
        buf(f"proT{k}_", var, lt, bn, tsz)
        ref[("in", inp)] = (var, False)
        n_col = len(col_in)
        col_in.append(K.Copy(K.Ref(var), K.GmView(gm_of[inp], col_at(inp)), Lit(1), S("nt") * tsz, Lit(0), Lit(0),
                             cite(f"columns of {inp}" + (" (the unit's group row)" if inp in per_group else ""), v)))
        col_in[n_col:] = when(v, col_in[n_col:])
    buf("proO_", "po", "T", R * bn, 2)

    operand, is_col = _operand_refs(prog, ref, R, bn, "pw", "pc")

    col_ops, row_ops = [], []
    for i in prog.instrs:
        is_row = i.space == "row"
        r = row if is_row else Lit(0)
        flat = is_row and not any(is_col(x) for x in i.srcs)
        nt = S("cnt") if flat else S("nt")
        if i.kind == "cast_in" and load_t[i.gm] not in (OPERAND_T,) + FIXED16:
            var, _ = ref[("in", i.gm)]
            node = K.vec(Op.CAST_FROM, dst=operand(i.dst, r), src=K.Ref(var, r), count=nt,
                         doc=_cite(f"{i.gm} to fp32 (a copy when it is fp32)", i.loc))
        elif i.kind == "cast_in":
            var, _ = ref[("in", i.gm)]
            node = K.vec(Op.CAST, dst=operand(i.dst, r), src=K.Ref(var, r), mode="CAST_NONE", count=nt,
                         doc=_cite(f"{i.gm} to fp32", i.loc))
        elif i.kind == "store":
            node = K.vec(Op.CAST, dst=K.Ref("po", r), src=operand(i.srcs[0], r), mode=i.arg, count=nt,
                         doc=_cite(f"B to the operands' type ({i.arg})", i.loc))
        elif i.space not in ("row", "col", "scalar") or i.kind in ROW_REDUCE or i.kind == "sexpr":
            raise Unsupported(i.dst, i.loc, "an instruction of the right operand's computation the vector cores do "
                              "not lower here")
        else:
            args = {"dst": operand(i.dst, r), "count": nt}
            for j, x in enumerate(i.srcs):
                args[f"src{j}"] = operand(x, r)
            if i.kind in ("vscalar", "vdup"):
                args["scalar"] = parse_scalar(i.arg, ("N",))
            node = K.vec(instr_op(i), doc=spec_doc(i.loc), **args)
        if is_row:
            row_ops.extend(_guarded((K.For("r", Lit(0), S("iters") if flat else S("rows"), Lit(1), (node,),
                                           disjoint=True),), i.when, prog.presence))
        else:
            col_ops.extend(_guarded((node,), i.when, prog.presence))
    out = K.Copy(K.GmView("bGm_", S("proOff") + S("kb0") * N + S("n0")), K.Ref("po"), S("rows"), S("nt") * 2,
                 _gap(S("nt"), 2, bn), (N - S("nt")) * 2, _cite(f"the unit's rows of B (from {lay.b}) to the "
                                                                 "workspace", lay.mm_loc))
    whole = (Constraint("==", S("nt"), bn),)
    unit = (
        K.Let("grp", (S("pu") // S("nBlocks")) // S("proPieces")),
        K.Let("piece", (S("pu") // S("nBlocks")) % S("proPieces")),
        K.Let("kb0", S("grp") * S("proGroup") + S("piece") * R),
        K.Let("n0", (S("pu") % S("nBlocks")) * bn),
        # the piece's rows of its group, clipped at K: a last partial group (ceil(K / g) groups) has fewer rows
        # than its pieces cover, and a piece past its end none
        K.Let("rows", Fn("min", (Fn("min", (R, S("proGroup") - S("piece") * R)), S("K") - S("kb0")))),
        K.Let("nt", Fn("min", (bn, N - S("n0")))),
        K.Let("iters", K.Select(whole, Lit(1), S("rows"))),
        K.Let("cnt", K.Select(whole, S("rows") * S("nt"), S("nt"))),
        K.If((Constraint(">", S("rows"), Lit(0)),), (
            *merge_guards([*col_in, *col_ops]),
            *merge_guards([*copies_in, *widen, *row_ops, out]),
        ), doc="a piece with rows (one past the end of a last partial group has none)"),
    )
    stmts = (
        K.Let("pFirst", K.BLOCK_IDX * S("proUnitsPerAiv") + Fn("min", (K.BLOCK_IDX, S("proUnitsTail")))),
        K.Let("pLast", S("pFirst") + S("proUnitsPerAiv")
              + K.Select((Constraint("<", K.BLOCK_IDX, S("proUnitsTail")),), Lit(1), Lit(0))),
        K.For("pu", S("pFirst"), S("pLast"), Lit(1), unit,
              doc=f"this AIV's units of B (at most proRows rows of one group x baseN columns, computed from "
                  f"{lay.b})"),
        K.SyncAll("every AIV's units of B are in the workspace"),
        K.CrossCoreSetFlag(2, Pipe.MTE3, FLAG_PRO, "B is in the workspace: this AI Core's AIC may read it"),
    )
    return tuple(locs), tuple(gms), tuple(gets), stmts


def _chunked_rows(prog: EpiProgram, mk, cin: dict, stats: dict, store: list, stat_store: tuple) -> tuple:
    """The AIV statements of a band's rows when one row of N does not fit the UB (docs/design.md "Cube family: rows
    longer than UB"): this AIV's rows one at a time (c0 over [r0, r1), `rows` 1), each in prog.passes passes over its
    columns in chunks of epiChunk (n0 .. n0 + nt: the copies and instructions of the whole-row schedule with its
    n0 / nt, row 0 of every buffer). Pass p copies in the chunk's inputs its instructions read (the fp32 row from
    the band's region again, a row or column input), runs the instructions EpiProgram.runs puts in it, adds each
    chunk's RowSum to the running sum (RowMax: the running maximum) of its reductions, and in the last pass casts
    and stores the chunk; a per-row let runs between the passes, the per-row outputs after them. `mk(i, r, rix, nt)`
    is _vector_part's node of instruction i, `cin` its copy statements per value, `stats` the per-row inputs'
    stages, `store` / `stat_store` its output copies."""
    S = Sym
    zero = Lit(0)
    row = []
    for v, var in stats.items():   # the row's per-row inputs: copied (rows 1) and read once
        row += [*cin[v], K.GetValue(f"st_{v}", K.Ref(var, zero), f"the row's value of {v}")]
    pre = {v for v, _x in prog.pre} | {("in", i) for _v, i, _sp, _t in prog.loads}
    for p in range(prog.passes + 1):
        row += [x for k, i in enumerate(prog.instrs) if i.kind == "sexpr" and prog.runs[k] == (p,)
                for x in _guarded((mk(i, zero, zero, S("nt")),), i.when, prog.presence)]
        if p == prog.passes:
            break
        body, needs = [], []
        for k, i in enumerate(prog.instrs):
            if p not in prog.runs[k] or i.kind in ("sexpr", "sstore"):
                continue
            for x in i.srcs + ((("in", i.gm),) if i.kind == "cast_in" else ()):
                if x in pre and x not in needs:
                    needs.append(x)
            node = mk(i, zero, zero, S("nt"))
            if i.kind in ROW_REDUCE:   # the chunk's sum / maximum into the row's running one
                acc = K.FConst(0.0) if i.kind == "rsum" else K.FConst(float("-inf"))
                row.extend(_guarded((K.FLet(i.dst, acc, mutable=True, doc="the row's running "
                                            + ("sum" if i.kind == "rsum" else "maximum") + " over its chunks"),),
                                    i.when, prog.presence))
                node = (replace(node, result=f"{i.dst}_c"), K.FAssign(i.dst, K.FBin("+", K.FRef(i.dst), K.FRef(f"{i.dst}_c"))
                        if i.kind == "rsum" else K.FMinMax("max", K.FRef(f"{i.dst}_c"), K.FRef(i.dst))))
            elif node is None:
                continue
            else:
                node = (node,)
            body.extend(_guarded(node, i.when, prog.presence))
        copies = [x for v in needs for x in cin.get(v, ())]
        last = p == prog.passes - 1
        i32 = (K.Let("iters", Lit(1)), K.Let("cnt", S("nt"))) if prog.acc_i32 else ()   # to_f32's one row
        row.append(K.For("n0", zero, S("N"), S("epiChunk"), i32 + tuple(merge_guards(
            [*copies, *body, *(store if last else ())])), tail="nt",
            doc=f"pass {p + 1} of {prog.passes} over the row's column chunks"
                + (": the output's columns" if last else "")))
    row += [x for k, i in enumerate(prog.instrs) if i.kind == "sstore"
            for x in _guarded((mk(i, zero, zero, S("nt")),), i.when, prog.presence)]
    row += list(stat_store)
    return (K.For("c0", S("r0"), S("r1"), Lit(1), tuple(row), tail="rows",
                  doc="this AIV's rows of the band one by one, each longer than the UB holds"),)


@dataclass(frozen=True)
class CubeCounts:
    """What a GEMM kernel holds on chip: its L1 / L0 buffers are the base tiles (opgen.tiling.cube), one of each
    (no double buffering yet)."""

    buffers: int = 5
    epi_row_bytes: int = 0   # UB bytes per element of an epilogue pass row (EpiProgram.row_bytes), 0: no epilogue
    epi_col_bytes: int = 0   # UB bytes per element of its column rows (EpiProgram.col_bytes)
    pro_row_bytes: int = 0   # UB bytes per element of a computed B's pass row (pro_row_bytes), 0: none
    pro_col_bytes: int = 0   # UB bytes per element of its column rows (EpiProgram.col_bytes)

    def as_dict(self) -> dict:
        """{field: value} for `--dump-after count`."""
        d = {"buffers": self.buffers}
        if self.epi_row_bytes:
            d.update(epi_row_bytes=self.epi_row_bytes, epi_col_bytes=self.epi_col_bytes)
        if self.pro_row_bytes:
            d.update(pro_row_bytes=self.pro_row_bytes, pro_col_bytes=self.pro_col_bytes)
        return d


@register
class CubeFamily(Family):
    """A matrix product on the cube with Fixpipe's cast as its epilogue (module docstring)."""

    name = "cube"
    kernel_type = "KERNEL_TYPE_MIX_AIC_1_2"   # 1 AIC : 2 AIV (templates/op_kernel/cube_kernel.cpp.j2)
    static_dtype_keys = True   # classes per static dtype too (SpecKey.dtypes; the entry picks by the dtype row)
    doc = "one matmul [M, K] x [K, N] on the cube (GM -> L1 NZ -> L0A/L0B -> Mmad -> L0C -> Fixpipe)"

    def entry_kernel_type(self, lowered) -> str:
        """KERNEL_TYPE_MIX_AIC_1_2: the AIVs finish the blocks (a vector epilogue) or reduce the K split's partial
        blocks (which the tiling may choose for any call); without either they return at once."""
        return "KERNEL_TYPE_MIX_AIC_1_2"

    def launch_kind(self, lowered, tiling_key: int) -> str:
        """The launch of tiling key `tiling_key`: KERNEL_TYPE_AIC_ONLY for strategy 2 (opgen.tiling.cube
        STRATEGY_AIC: no K split, no vector epilogue; the entry declares it with KERNEL_TASK_TYPE), else the
        entry's default (entry_kernel_type)."""
        return "KERNEL_TYPE_AIC_ONLY" if tiling_key % 10 == 2 else self.entry_kernel_type(lowered)

    def claims(self, plan) -> bool:
        """Plans whose launch has a cube stage."""
        return any(s.unit == "cube" for k in plan.kernels for s in k.stages)

    def match(self, spec, g, plan):
        """The GemmLayout of `g` (gemm_layout). Raises Unsupported."""
        return gemm_layout(g, spec)

    def keys(self, spec, layout) -> list:
        """Every specialisation of the spec."""
        return list(spec.keys())

    def lower(self, spec, layout, graphs: dict, only=None) -> Lowered:
        """{key: KernelClass}: the specialisations of one static-attribute combination (one attrKey of the tiling
        key) share one layout, their optional inputs' presences joined into it (merge_presences: the class tests
        hasInput<k>_); equal layouts share one class. Different layouts (operands transposed by a static attribute,
        an epilogue an attribute selects) each get a class of their own, `<Op>CubeKernel<n>` (one class:
        `<Op>CubeKernel`), which the kernel entry selects by the tiling key's attrKey. Where the shape forms the
        inputs take at run time give one presence other layouts (a per-channel [N] or per-tensor [1] scale), each
        (attrKey, form key) has its class and `extra["form_key"]` is True: the TilingFunc folds the form key into the
        tiling key (docs/design.md "Shape forms at run time"). `extra["layouts"]`: {key: the layout its class
        serves}. Raises Unsupported when the specialisations of one attrKey differ in more than
        their epilogue, or their layouts disagree in dims, dtypes, batch or output (one tiling program). The static
        dtype variables' values (SpecKey.dtypes: docs/design.md "Dtype variables that select the body") select the
        class like an attrKey does: the specialisations of one (attrKey, dtypes) are joined, and the entry
        instantiates, for each dtype row, the class of that row's static dtypes."""

        names = [a.name for a in spec.static_attrs]
        by_ak: dict = {}
        lays0 = {key: gemm_layout(g, spec) for key, g in graphs.items()}
        if len({bool(x.fold) for x in lays0.values()}) > 1:   # some specialisation reads an epilogue input against
            # the batch (gemm_layout's _Unfold): every one batched, one tiling program (its M not folded) for all
            lays0 = {key: gemm_layout(g, spec, unfold=True) for key, g in graphs.items()}
        for key, g in graphs.items():
            ak = (attr_key(spec, dict(zip(names, key.static))), key.dtypes)
            by_ak.setdefault(ak, []).append((key, lays0[key]))
        if only is not None:
            ak0 = (attr_key(spec, dict(zip(names, only.static))), only.dtypes)
            by_ak = {ak0: by_ak[ak0]}
        # shape forms the tensors pick at run time (a per-channel [N] or per-tensor [1] scale) lowering to other
        # layouts: the form key is a digit of the tiling key, one class per (attrKey, form key); else one class
        # per attrKey serves every form (docs/design.md "Shape forms at run time")
        split = any(len({lay for k, lay in items if k.present == pr}) > 1
                    for items in by_ak.values() for pr in {k.present for k, _lay in items})
        progs, lays, classes = {}, {}, {}
        for _ak, items in sorted(by_ak.items(), key=lambda kv: (kv[0][0], [d.value for d in kv[0][1]])):
            groups: dict = {}
            for key, lay in items:
                groups.setdefault(form_key(spec, key.forms, key.present) if split else None, []).append((key, lay))
            for _fk, members in sorted(groups.items(), key=lambda kv: -1 if kv[0] is None else kv[0]):
                seen: dict = {}
                for key, lay in members:   # one form key and presence: one combination of forms, one layout
                    if seen.setdefault(key.present, lay) != lay:   # not reached: a guard
                        raise Unsupported(lay.out, "", f"the specialisation {spec.key_text(key)} has another "
                                          f"layout ({lay.text()}) than another of its form key and presence "
                                          f"({seen[key.present].text()})")
                merged = merge_presences(spec, list(seen.items()))
                for key, _lay in members:
                    lays[key] = merged
                classes.setdefault(merged, None)
        core = {replace(x, epilogue=(), steps=(), trans_a=False, trans_b=False, presence=(), served=(), step_when=(),
                        direct=(), bias=(), bias_when=(), views=(), bcast=(), pro=bool(x.pro), pro_when=(), pro_group=())
                for x in classes}   # a computed B's steps and groups are the class's (the tiling reads proGroupRows)
        outs = {x.out_dtype for x in classes}
        if len(core) > 1 or len(outs) > 1:
            a, b = list(classes)[:2]
            raise Unsupported(a.out, "", f"the static attributes select layouts that differ beyond transposes and "
                              f"epilogue ({a.text()}; {b.text()}): one tiling program serves every key")
        for n, x in enumerate(classes):
            classes[x] = lower_gemm(spec, x, f"{spec.name}CubeKernel" + (str(n) if len(classes) > 1 else ""))
        for key, x in lays.items():
            if only is None or key == only:
                progs[key] = classes[x]
        first = lays.get(only) if only is not None else next(iter(classes))
        return Lowered(self.name, first, progs, {"layouts": lays, "form_key": split})

    def synchronise(self, lowered) -> Lowered:
        """Every key's class through the dependency pass (opgen.kernel.kir_sync.place_syncs): the lowering places
        no flag or barrier; a class serving several keys is synchronised once."""
        done: dict = {}
        progs = {}
        for key, c in lowered.programs.items():
            if id(c) not in done:
                done[id(c)] = place_syncs_memo(c)[0]
            progs[key] = done[id(c)]
        return Lowered(lowered.family, lowered.layout, progs, lowered.extra)   # what the tiling stored stays

    def counts(self, lowered):
        """CubeCounts of the lowered classes: the largest epilogue's UB bytes per row and column element."""
        lays = list(dict.fromkeys(lowered.extra.get("layouts", {}).values())) or [lowered.layout]
        eps = [epilogue_program(x if x.steps else _cast_only(x)) for x in lays]
        pros = [pro_program(x) for x in lays if x.pro]
        return CubeCounts(epi_row_bytes=max(e.row_bytes() for e in eps),
                          epi_col_bytes=max(e.col_bytes() for e in eps),
                          pro_row_bytes=max((pro_row_bytes(e) for e in pros), default=0),
                          pro_col_bytes=max((e.col_bytes() for e in pros), default=0))

    def layouts(self, lowered) -> list:
        """The distinct layouts of a lowering, one per kernel class, in class order."""
        return list(dict.fromkeys(lowered.extra.get("layouts", {}).values())) or [lowered.layout]

    def program_text(self, lowered, key) -> str:
        """The Kernel IR text of the class."""
        return K.to_text(lowered.programs[key])
