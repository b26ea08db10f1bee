"""Kernel-level algebra on row programs: small named rewrites of a RowProgram's instruction list.

The rows family lowers a specialisation's tensor IR to a row program (opgen.kernel.rowprog) one node at a time, so
the instruction stream can hold what no tensor pass sees: a per-row scalar broadcast with Duplicate only to divide
by it, two Muls by per-row scalars in a row, an instruction computed twice, a scalar copied. `ROW_PASSES` is the
default list of rewrites (the exact ones and two inexact rewrites on proven ranges; `FAST_ROW_PASSES` adds the
inexact, opt-in ones); `optimize` (the pass manager of this level) runs them in order on the program as lowered
(single-assignment names, graph order: before scheduling, phases and buffer allocation) and returns what each
changed. Every rewrite is a function `rewrite(p: RowProgram) -> int` (the number of rewrites made) that keeps the
program's meaning within the precision bound stated in its docstring (docs/reference/kernel_cost.md §4).

Rows are fp32 in UB (docs/reference/ada_layer_norm.md §1.2); CANN's tightest precision criterion on any output is
the fp32 one, MERE and MARE thresholds of 2^-13 (opgen.check.compare.THRESHOLD). A rewrite that adds at most four
fp32 roundings (relative 2^-24 each) per element stays 2^9 below it; a rewrite whose error is not bounded
relatively (reassociating additions: cancellation) is not made.
"""

from __future__ import annotations

import re
from typing import Callable

from opgen.ir.records import evolve
from opgen.ir.dimprint import balanced_parens
from opgen.kernel.rowguard import GuardName
from opgen.kernel.rowprog import (MASK_KINDS, ROW_REDUCE, SCALAR_ARG_KINDS, SEG_VALUE_PREFIX, SELECT_KINDS, RowProgram,
                                 _names_in, _rename, is_vector, lane_acc, seg_value_name)

FP32_UNIT_ROUNDOFF = 2.0 ** -24
"""u: the largest relative error of one fp32 round-to-nearest (docs/reference/kernel_cost.md §4)."""

RECIPROCAL_REL_BOUND = 2 * FP32_UNIT_ROUNDOFF + FP32_UNIT_ROUNDOFF ** 2
"""Bound of |x * RN(1/s) - x/s| / |x/s| before the final rounding of the product: (1 + u)^2 - 1 (two roundings,
docs/reference/kernel_cost.md §4). The rounded product is then within 3u of x/s, i.e. within 2^-22.4 relative:
at most 2 ulp of fp32 from the correctly rounded quotient."""


def _uses(p: RowProgram) -> dict[str, int]:
    """{value name: number of instructions naming it (operand or scalar text)}."""
    n: dict[str, int] = {}
    for i in p.instrs:
        for x in _names_in(i):
            n[x] = n.get(x, 0) + 1
    return n


def _fresh(p: RowProgram, base: str) -> str:
    """A value name not yet defined or used in `p` (base, base_1, ...)."""
    taken = {i.dst for i in p.instrs} | {x for i in p.instrs for x in _names_in(i)} | {t.name for t in p.gm}
    name, k = base, 1
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    return name


def _replace_uses(p: RowProgram, where: dict[str, str]) -> None:
    """Rename every use (operand and scalar text) of the values in `where`; definitions are kept."""
    if not where:
        return
    p.instrs = [evolve(i, srcs=tuple(where.get(x, x) for x in i.srcs),
                       arg=_rename(i.arg, where) if i.kind in SCALAR_ARG_KINDS else i.arg)
                for i in p.instrs]
    p.accs = {where.get(k, k): v for k, v in p.accs.items()}
    p.acc_kinds = {where.get(k, k): v for k, v in p.acc_kinds.items()}
    p.acc_post = {where.get(k, k): v for k, v in p.acc_post.items()}
    p.late_stores = [(where.get(v, v), g, r) for v, g, r in p.late_stores]


def reciprocal_of_softmax_sum(p: RowProgram) -> int:
    """`reciprocal_of_broadcast_divisor` where the divisor's range is proven: a row sum s of exp(v - max v) (the
    denominator of a softmax: s = rsum(Exp(Adds(v, -(m)))) with m = rmax(v) of the same row v). The term at the
    maximum is exp(0) = 1 and every term lies in [0, 1], so 1 <= s <= H (< 2^31): 1 / s is a normal fp32 and
    RN(x * RN(1/s)) is within 3u relative of x / s (u = 2^-24; at most 2 fp32 ulp from the correctly rounded
    quotient, 2^9 below CANN's tightest criterion). A NaN row (a NaN or an all -inf v) gives NaN either way. A
    Duplicate + Div (3 cycles a 64-lane repeat: Div runs at 32 lanes) becomes a Muls (1). Returns the number of
    divisions rewritten. It reads the program as lowered (single-assignment names); a name defined more than once
    (a program already allocated) is never taken for a link of the pattern."""
    defs: dict = {}
    for i in p.instrs:
        if i.dst:
            defs.setdefault(i.dst, []).append(i)
    by = {n: d[0] for n, d in defs.items() if len(d) == 1}
    sums = set()
    for i in p.instrs:
        if i.kind != "rsum" or len(i.srcs) != 1:
            continue
        e = by.get(i.srcs[0])
        if e is None or e.kind != "vunary" or e.op != "Exp" or len(e.srcs) != 1:
            continue
        a = by.get(e.srcs[0])
        if a is None or a.kind != "vscalar" or a.op != "Adds" or len(a.srcs) != 1:
            continue
        m = re.fullmatch(r"-\((\w+)\)", (a.arg or "").replace(" ", ""))
        mx = by.get(m.group(1)) if m else None
        if mx is not None and mx.kind == "rmax" and mx.srcs == a.srcs:
            sums.add(i.dst)
    return reciprocal_of_broadcast_divisor(p, only=sums) if sums else 0


def reciprocal_of_broadcast_divisor(p: RowProgram, only: set | None = None) -> int:
    """x / s with s a per-row or scalar value (lowered as Duplicate of s, then Div) -> x * r with r = 1 / s computed
    once per row on the scalar unit (a C++ float expression) and applied with Muls: one vector instruction
    (Duplicate) less per row and a Div (32 lanes per cycle) becomes a Muls (64; docs/reference/ascendc.md §3).

    Precision: RN(x * RN(1/s)) is within 3u relative of x/s (RECIPROCAL_REL_BOUND plus the final rounding; u =
    2^-24), at most 2 fp32 ulp from the correctly rounded quotient, more than 2^9 below CANN's tightest criterion
    (2^-13): the rows compute in fp32 whatever the tensors' dtypes, so the rewrite is made for every spec. Only
    row-space divisions (once per row) are rewritten; a Duplicate with another user stays. With `only` (scalar
    names), only a Duplicate of exactly one of them is a divisor rewritten. Returns the number of divisions
    rewritten."""
    dups = {i.dst: i for i in p.instrs if i.kind == "vdup" and i.space == "row"
            and (only is None or (i.arg or "").strip() in only)}
    uses = _uses(p)
    divs = {}
    for i in p.instrs:
        if i.kind == "vbin" and i.op == "Div" and i.space == "row" and len(i.srcs) == 2:
            d = i.srcs[1]
            if d in dups and i.srcs[0] != d:
                divs.setdefault(d, []).append(i)
    done = 0
    out = []
    rcp_of: dict[str, str] = {}
    for i in p.instrs:
        if i.kind == "vdup" and i.dst in divs and uses.get(i.dst, 0) == len(divs[i.dst]):
            r = _fresh(p, f"rcp_{i.dst}")
            rcp_of[i.dst] = r
            out.append(evolve(i, kind="sexpr", dst=r, srcs=(), op="", arg=f"(1.0f / ({i.arg}))", space="stat"))
            continue
        if i.kind == "vbin" and i.op == "Div" and i.srcs[1:] and i.srcs[1] in rcp_of:
            out.append(evolve(i, kind="vscalar", srcs=(i.srcs[0],), op="Muls", arg=rcp_of[i.srcs[1]]))
            done += 1
            continue
        out.append(i)
    p.instrs = out
    return done


def fold_multiply_chains(p: RowProgram) -> int:
    """Muls(Muls(x, a), b) -> Muls(x, a * b) when the inner product has no other user: the scalar product is one C++
    float multiply per row on the scalar unit, one vector instruction less per row.

    Precision: RN(RN(x a) b) and RN(x RN(a b)) are both within (1 + u)^2 - 1 of x a b (u = 2^-24), so they differ by
    at most about 4u relative: 2^8 below CANN's tightest criterion (2^-13). Chains of Adds are not folded (their
    error is not bounded relatively: x + a + b may cancel). Only row-space instructions (once per row) are folded.
    Returns the number of folds."""
    done = 0
    while True:
        uses = _uses(p)
        defs = {i.dst: k for k, i in enumerate(p.instrs) if i.dst}
        hit = None
        for k, i in enumerate(p.instrs):
            if not (i.kind == "vscalar" and i.op == "Muls" and i.space == "row"):
                continue
            j = defs.get(i.srcs[0])
            if j is None:
                continue
            inner = p.instrs[j]
            if inner.kind == "vscalar" and inner.op == "Muls" and inner.space == "row" and uses.get(inner.dst) == 1:
                hit = (j, k)
                break
        if hit is None:
            return done
        j, k = hit
        inner, outer = p.instrs[j], p.instrs[k]
        s = _fresh(p, f"k_{outer.dst}")
        prod = evolve(outer, kind="sexpr", dst=s, srcs=(), op="", arg=f"(({inner.arg}) * ({outer.arg}))",
                      space="stat")
        new = evolve(outer, srcs=inner.srcs, arg=s)
        p.instrs = p.instrs[:j] + p.instrs[j + 1:k] + [prod, new] + p.instrs[k + 1:]
        done += 1


def propagate_scalar_copies(p: RowProgram) -> int:
    """A per-row scalar that only copies another value (`s2 = s1`) is dropped and its users read the value itself.
    Exact (no arithmetic changes). Returns the number of copies removed."""
    ident = re.compile(r"\(?\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)?")
    where: dict[str, str] = {}
    keep = []
    for i in p.instrs:
        m = ident.fullmatch(i.arg or "") if i.kind == "sexpr" and i.space == "stat" else None
        if m and i.dst not in p.accs:
            src = where.get(m.group(1), m.group(1))
            defined = any(j.dst == src for j in keep) or any(t.name == src for t in p.gm)
            if defined:
                where[i.dst] = src
                continue
        keep.append(i)
    p.instrs = keep
    _replace_uses(p, where)
    return len(where)


_PURE = ("cast_in", "vwiden", "vnarrow", "vbin", "vscalar", "vaxpy", "vunary", "vdup", "viota", "sexpr", "sunary", "sload", "rsum", "rmax", *MASK_KINDS, *SELECT_KINDS)
"""Kinds whose result depends only on their operands (and, for cast_in / sload, the current row of a GM input,
which the kernel does not write): two of them with equal operands compute the same value."""


def reuse_computed_values(p: RowProgram) -> int:
    """Common subexpressions on the instruction stream: an instruction equal to an earlier one (kind, op, operands,
    scalar text, GM tensor, space) is dropped and its users read the earlier result (no Exp, no cast of an input,
    no product computed twice per row). Exact. Loads into brow/col buffers, accumulations and stores are never
    merged. Returns the number of instructions removed."""
    seen: dict[tuple, str] = {}
    where: dict[str, str] = {}
    keep = []
    for i in p.instrs:
        srcs = tuple(where.get(x, x) for x in i.srcs)
        arg = _rename(i.arg, where) if i.kind in SCALAR_ARG_KINDS else i.arg
        i = evolve(i, srcs=srcs, arg=arg)
        if i.kind in _PURE and i.dst and i.dst not in p.accs:
            key = (i.kind, i.op, srcs, arg, i.gm, i.space)
            if key in seen:
                where[i.dst] = seen[key]
                continue
            seen[key] = i.dst
        keep.append(i)
    p.instrs = keep
    _replace_uses(p, where)
    return len(where)


def gather_column_inputs(p: RowProgram) -> int:
    """A gather of a column row loaded from a GM input by a checked per-row index (opgen.kernel.rows `gather`:
    Compares of the lane indices with the index, Select of the hit lane, ReduceSum) -> one GM element read by the
    scalar unit at that index (`sgather`): sum(select(lane == i, col, 0)) = col[i] for 0 <= i < the row length, which
    the index's `scheck` has trapped otherwise. The loaded column row becomes dead where nothing else reads it, and
    its `load` is dropped: ROW_CHUNK then reloads no column chunk for the gather, COL_SPLIT exchanges no partial for
    it, and the row's three vector instructions and their reduction go. Exact (the element is converted to fp32 as
    the column load converts it) up to the sign of a zero element: the sum of -0 and the +0 lanes is +0, the read
    -0. Matched where the lane indices are the program's `viota` of the column row from c0_ (index j at column j),
    the select's other branch is 0, the selected row is read only by the sum and all three share one presence.
    Returns the number of gathers rewritten."""
    defs = {i.dst: i for i in p.instrs if i.dst}
    uses = _uses(p)
    lane = lambda x: _is_lane_index(defs.get(x))  # noqa: E731
    col_input = lambda x: (x in defs and defs[x].kind == "load" and defs[x].space == "col"  # noqa: E731
                           and p.tensor(defs[x].gm).role == "in")
    out, done = [], 0
    for i in p.instrs:
        pick = defs.get(i.srcs[0]) if i.kind == "rsum" and i.srcs else None
        if pick is not None and pick.kind == "vsels" and pick.arg.strip() in ("0.0f", "0.0") \
                and uses.get(pick.dst) == 1 and col_input(pick.srcs[1]) and pick.when == i.when:
            hit = defs.get(pick.srcs[0])
            chk = defs.get((hit.arg or "").strip()) if hit is not None else None
            if hit is not None and hit.kind == "vcmps" and hit.op == "EQ" and lane(hit.srcs[0]) \
                    and chk is not None and chk.kind == "scheck" and hit.when == i.when:
                out.append(evolve(i, kind="sgather", srcs=(chk.dst,), gm=defs[pick.srcs[1]].gm, op="", arg=""))
                done += 1
                continue
        out.append(i)
    if done:
        _after_gathers(p, out)
    return done


def _is_lane_index(d) -> bool:
    """Whether instruction `d` (None: no single definition) is the row of lane indices: a column-space CreateVecIndex
    from the first column of the chunk or slice, lane j holding column c0_ + j as fp32 (`viota` with arg
    static_cast<float>(c0_); exact while columns stay below 2^24). The pattern a gather's or a one-hot's compare
    reads (gather_column_inputs, _gather_through_lanewise, _pick_lane, one_lane_updates)."""
    return d is not None and d.kind == "viota" and d.space == "col" \
        and d.arg.replace(" ", "") == "static_cast<float>(c0_)"


def _after_gathers(p: RowProgram, instrs: list) -> None:
    """p's instructions set to `instrs` (gathers rewritten to scalar reads), then the values nothing reads any more
    removed: the selects and compares of the rewritten gathers (remove_dead_values) and the column rows loaded from
    GM for them alone (their `load`s); a row input whose row no instruction reads any more, only its elements
    (`sgather`), becomes an element-read input (GmTensor space "elem": the schedules copy in no row of it and give
    it no buffer; rowprog.GmTensor). Shared by gather_column_inputs, _gather_through_lanewise and
    one_lane_updates."""
    p.instrs = instrs
    remove_dead_values(p)
    uses = _uses(p)
    p.instrs = [i for i in p.instrs if not (i.kind == "load" and i.space == "col" and not uses.get(i.dst))]
    copied = {i.gm for i in p.instrs if i.kind != "sgather"}
    picked = {i.gm for i in p.instrs if i.kind == "sgather"}
    p.gm = [evolve(t, space="elem") if t.role == "in" and t.space == "row" and t.name in picked
            and t.name not in copied else t for t in p.gm]


_PICK_SCALAR_OPS = {"Adds": "+", "Muls": "*"}
_PICK_BINARY_OPS = {"Add": "+", "Sub": "-", "Mul": "*"}
"""Lane-wise instructions a picked lane is carried through on the scalar unit (`gather_through_lanewise`): one fp32
round-to-nearest each on either unit (IEEE 754), so a lane's value is the same number. Div is left (the vector Div
of the instruction table is not held to a correctly rounded quotient), as are Max / Min (a NaN operand) and the
transcendental ones (the scalar unit has none)."""


def _pick_lane(p: RowProgram, by: dict, name: str, chk: str, when: tuple, made: list, memo: dict,
               rows: frozenset = frozenset()) -> str | None:
    """The scalar name holding lane `chk` (a checked per-row index) of row value `name`, its scalar instructions
    appended to `made` (single-assignment names from _fresh; `memo`: values already picked), or None when some
    instruction on the way has no exact scalar form (`gather_through_lanewise`). `by`: name -> its one defining
    instruction (a name defined twice is never followed); `rows`: the row inputs whose element may be read (a leaf
    of another row input fails)."""
    if name in memo:
        return memo[name]
    d = by.get(name)
    if d is None or d.when not in ((), when):
        return None
    out = None
    if d.kind == "vdup" and d.space in ("row", "col"):
        out = _scalar(p, made, d, f"({d.arg})")
    elif _is_lane_index(d):
        out = chk   # lane j holds the column index j
    elif d.kind == "cast_in" and not d.op and d.space == "row" and p.tensor(d.gm).role == "in" \
            and p.tensor(d.gm).dtype not in _INT_DTYPES and d.gm in rows:
        out = _fresh(p, f"pick_{d.dst}")
        made.append(evolve(d, kind="sgather", dst=out, srcs=(chk,), op="", arg="", space="stat"))
    elif d.kind == "load" and d.space == "col" and p.tensor(d.gm).role == "in":
        out = _fresh(p, f"pick_{d.dst}")
        made.append(evolve(d, kind="sgather", dst=out, srcs=(chk,), op="", arg="", space="stat"))
    elif d.kind == "vscalar" and d.op in _PICK_SCALAR_OPS and len(d.srcs) == 1:
        a = _pick_lane(p, by, d.srcs[0], chk, when, made, memo, rows)
        if a is not None:
            out = _scalar(p, made, d, f"({a} {_PICK_SCALAR_OPS[d.op]} ({d.arg}))")
    elif d.kind == "vbin" and d.op in _PICK_BINARY_OPS and len(d.srcs) == 2:
        a = _pick_lane(p, by, d.srcs[0], chk, when, made, memo, rows)
        b = _pick_lane(p, by, d.srcs[1], chk, when, made, memo, rows) if a is not None else None
        if b is not None:
            out = _scalar(p, made, d, f"({a} {_PICK_BINARY_OPS[d.op]} {b})")
    elif d.kind == "vunary" and d.op in _PICK_UNARY and len(d.srcs) == 1:   # the scalar unit has no Ln / Exp:
        a = _pick_lane(p, by, d.srcs[0], chk, when, made, memo, rows)               # the same instruction on 8 lanes
        if a is not None:
            out = _fresh(p, f"pick_{d.dst}")
            while any(m.dst == out for m in made):
                out = f"{out}_"
            made.append(evolve(d, kind="sunary", dst=out, srcs=(), arg=a, space="stat", gm=""))
    elif d.kind == "vaxpy" and len(d.srcs) == 2:   # b + RN(x * s): the product rounded first (fuse_axpy)
        a = _pick_lane(p, by, d.srcs[0], chk, when, made, memo, rows)
        x = _pick_lane(p, by, d.srcs[1], chk, when, made, memo, rows) if a is not None else None
        if x is not None:
            xs = _scalar(p, made, d, f"({x} * ({d.arg}))")
            out = _scalar(p, made, d, f"({a} + {xs})")
    memo[name] = out
    return out


_INT_DTYPES = ("i8", "u8", "i16", "i32", "i64", "bool")
_PICK_UNARY = ("Ln", "Exp", "Sqrt", "Rsqrt", "Abs", "Reciprocal", "Relu")
"""Lane-wise vector instructions a picked lane is carried through as `sunary` (the instruction itself over a few
lanes holding the picked value: the same result as on the row's lane)."""


def _scalar(p: RowProgram, made: list, like, text: str) -> str:
    """A fresh per-row scalar `sexpr` computing C++ float text `text`, appended to `made` (its spec line `like`'s)."""
    name = _fresh(p, f"pick_{like.dst}")
    while any(m.dst == name for m in made):
        name = f"{name}_"
    made.append(evolve(like, kind="sexpr", dst=name, srcs=(), op="", arg=text, space="stat", gm=""))
    return name


def gather_through_lanewise(p: RowProgram) -> int:
    """`_gather_through_lanewise` with every floating row input's element as a leaf. A row input left read by its
    picked elements alone (NLLLoss: one element a row) is then read only from GM at the row's offset plus the index:
    no row of it is copied in (`_after_gathers`: space "elem"). Returns the number of gathers rewritten."""
    return _gather_through_lanewise(p, frozenset(i.gm for i in p.instrs if i.kind == "cast_in"))


def _gather_through_lanewise(p: RowProgram, rows: frozenset) -> int:
    """A gather of a row value by a checked per-row index (opgen.kernel.rows `gather`: Compares of the lane indices
    with the index, Select of the hit lane, ReduceSum) taken through the lane-wise instructions that compute the row
    down to their leaves, on the scalar unit: sum(select(lane == i, f(a, b, ...), 0)) = f(a[i], b[i], ...) for
    lane-wise f. Leaves: a Duplicate (its scalar), the lane indices (i itself), the current row of a floating GM
    input (one GM element read at the row's offset plus i, `sgather`), a column row loaded from a GM input (its
    element i, `sgather`); through Adds / Muls by a scalar, Add / Sub / Mul of two rows and Axpy (its product
    rounded first). The row reduction (a level of its own when the row depends on an earlier reduction: CrossEntropy
    Loss's picked log-probability, the derived gradient's sum of its one-hot row) becomes a few scalar operations;
    the compare and select go where nothing else reads them.

    Exact: every instruction on the way is one fp32 round-to-nearest on either unit (IEEE 754), a widening load is
    exact, and the index's `scheck` has trapped outside [0, row length), so the selected lane is the only nonzero
    term of the sum; up to the sign of a zero element (the sum of -0 and the +0 lanes is +0, the scalar -0). Each
    scalar operation is its own statement (no contraction into a fused multiply-add). Matched where the mask is
    Compares(EQ) of the program's `viota` from c0_ with a `scheck`ed index, the select's other branch is 0 and all
    share one presence; a name defined twice is not followed. Returns the number of gathers rewritten."""
    defs: dict = {}
    for i in p.instrs:
        if i.dst:
            defs.setdefault(i.dst, []).append(i)
    by = {n: d[0] for n, d in defs.items() if len(d) == 1}
    lane = lambda x: _is_lane_index(by.get(x))  # noqa: E731
    out, done = [], 0
    for i in p.instrs:
        pick = by.get(i.srcs[0]) if i.kind == "rsum" and i.srcs and i.dst in by else None
        if pick is not None and pick.kind == "vsels" and pick.arg.strip() in ("0.0f", "0.0") and pick.when == i.when:
            hit = by.get(pick.srcs[0])
            chk = by.get((hit.arg or "").strip()) if hit is not None else None
            if hit is not None and hit.kind == "vcmps" and hit.op == "EQ" and lane(hit.srcs[0]) \
                    and chk is not None and chk.kind == "scheck" and hit.when == i.when:
                made: list = []
                v = _pick_lane(p, by, pick.srcs[1], chk.dst, i.when, made, {}, rows)
                if v is not None:
                    made = [evolve(m, when=i.when, level=i.level) for m in made]
                    out += made
                    out.append(evolve(i, kind="sexpr", srcs=(), op="", arg=f"({v})", space="stat", gm=""))
                    done += 1
                    continue
        out.append(i)
    if done:
        _after_gathers(p, out)
        propagate_scalar_copies(p)   # a pick that is a scalar already (a Duplicate's): its users read that
    return done


def one_lane_updates(p: RowProgram) -> int:
    """A lane-wise instruction adding a one-hot row -> the instruction without it and one lane updated by the scalar
    unit. A one-hot row h is select(lane == i, v, 0) (opgen.kernel.rows `scatter_add`, a `b.where` of the lane
    indices compared with a checked per-row index i: Compares EQ, Select with 0), zero but at lane i, where it holds
    v[i]. Taken where h is an addend:
      Add(x, h), Add(h, x) -> x;   Sub(x, h) -> x, lane i minus v[i];   Adds(h, s) -> Duplicate(s);
      Axpy(h, x, s) (h + RN(x * s)) -> Muls(x, s);
    then lane i of the result plus v[i] (`vlane`: one element read, added to and written back by the scalar unit,
    in the column chunk or slice whose lanes hold column i only). v[i] is picked as `gather_through_lanewise` picks
    a lane (a Duplicate's scalar, a GM element, scalar arithmetic); the Compares, the Select and the row v go where
    nothing else reads them: four row passes (Compares, Duplicate, Select, Sub) become a scalar update once per row.

    Exact up to the sign of a zero: lane i gets one fp32 round-to-nearest of the same two operands on either unit
    (x[i] - v[i] as x[i] + (-v[i]), the same IEEE result; Axpy's product is rounded before its sum: Muls's lane),
    and every other lane x + 0 = x (Sub: x - 0 = x; Adds / Axpy: s or RN(x * s) itself where the instruction gives
    0 + s, i.e. +0 for s = -0). The rewritten row (x, or the new Duplicate / Muls) must be a row value read only
    here (it is updated in place), all of one presence; a name defined twice is not followed (docs/design.md
    "Kernel families", one-lane updates; docs/reference/kernel_cost.md §4). Returns the number of instructions
    rewritten."""
    defs: dict = {}
    for i in p.instrs:
        if i.dst:
            defs.setdefault(i.dst, []).append(i)
    by = {n: d[0] for n, d in defs.items() if len(d) == 1}
    uses = _uses(p)
    rows = frozenset(i.gm for i in p.instrs if i.kind == "cast_in")
    lane = lambda x: _is_lane_index(by.get(x))  # noqa: E731

    def one_hot(h: str, when: tuple):
        """(checked index name, v) when h is a one-hot row read only once, of presence `when`; else None."""
        d = by.get(h)
        if d is None or d.kind != "vsels" or d.arg.strip() not in ("0.0f", "0.0") or uses.get(h) != 1 \
                or d.when != when or d.space != "row":
            return None
        hit = by.get(d.srcs[0])
        chk = by.get((hit.arg or "").strip()) if hit is not None else None
        if hit is None or hit.kind != "vcmps" or hit.op != "EQ" or not lane(hit.srcs[0]) or chk is None \
                or chk.kind != "scheck" or hit.when not in ((), when):
            return None
        return chk.dst, d.srcs[1]

    def own_row(x: str, when: tuple) -> bool:   # a row value this instruction may update in place
        d = by.get(x)
        return d is not None and d.space == "row" and d.kind not in MASK_KINDS and uses.get(x) == 1 \
            and x not in p.accs and d.when in ((), when)

    out, done = [], 0
    for i in p.instrs:
        form = None   # (the one-hot's operand, the base row's instruction or name, sign)
        if i.space == "row" and i.kind == "vbin" and i.op in ("Add", "Sub") and len(i.srcs) == 2:
            a, b = i.srcs
            if one_hot(b, i.when) and own_row(a, i.when):
                form = (b, a, "-" if i.op == "Sub" else "+")
            elif i.op == "Add" and one_hot(a, i.when) and own_row(b, i.when):
                form = (a, b, "+")
        elif i.space == "row" and i.kind == "vscalar" and i.op == "Adds" and one_hot(i.srcs[0], i.when):
            form = (i.srcs[0], evolve(i, kind="vdup", srcs=(), op=""), "+")
        elif i.space == "row" and i.kind == "vaxpy" and one_hot(i.srcs[0], i.when):
            form = (i.srcs[0], evolve(i, kind="vscalar", srcs=(i.srcs[1],), op="Muls"), "+")
        if form is not None:
            h, base, sign = form
            chk, v = one_hot(h, i.when)
            made: list = []
            pv = _pick_lane(p, by, v, chk, i.when, made, {}, rows)
            if pv is not None:
                out += [evolve(m, when=i.when, level=i.level) for m in made]
                if not isinstance(base, str):
                    name = _fresh(p, f"base_{i.dst}")
                    out.append(evolve(base, dst=name))
                    base = name
                out.append(evolve(i, kind="vlane", srcs=(base, chk), op="Adds",
                                  arg=f"({pv})" if sign == "+" else f"-({pv})"))
                done += 1
                continue
        out.append(i)
    if done:
        _after_gathers(p, out)
        propagate_scalar_copies(p)
    return done


def _bare(text: str) -> str:
    """Scalar text `text` without spaces and enclosing parentheses (the same value)."""
    t = (text or "").replace(" ", "")
    while t.startswith("(") and t.endswith(")") and balanced_parens(t[1:-1]):
        t = t[1:-1]
    return t


_SCALAR_FORM = {"Add": "Adds", "Sub": "Adds", "Mul": "Muls"}
"""Row-and-broadcast instructions with a tensor-scalar form: x + d, x - d (as x + (-s): negation is exact) and
x * d with d a Duplicate of scalar s (either side for Add and Mul)."""


def reuse_scalar_functions(p: RowProgram) -> int:
    """A lane-wise function of a Duplicated per-row scalar whose value the program already has on the scalar side
    -> a Duplicate of that value, then a row instruction with a Duplicate operand -> its tensor-scalar form:
      u = f(Duplicate(s)) with a `sunary` t = f(s) in the program (the same instruction on 8 lanes; CrossEntropyLoss
          picks its log-probability through Ln(sum), `gather_through_lanewise`) -> u = Duplicate(t);
      Add(x, Duplicate(t)), Add(Duplicate(t), x) -> Adds(x, t);  Sub(x, Duplicate(t)) -> Adds(x, -(t));
      Mul(x, Duplicate(t)), Mul(Duplicate(t), x) -> Muls(x, t).
    A log-softmax's x - log(sum) over the row (Duplicate, Ln at 32 lanes a cycle, Sub: three passes) becomes one
    Adds wherever the program also picks an element through the same Ln. Exact: f is applied lane-wise to the same
    fp32 value on either side (every lane of f(Duplicate(s)) is t's bits), x - t and x + (-t) are the same IEEE
    operation, Add and Mul commute. Only where the Duplicate and the sunary run under the reader's presence (their
    `when` () or the reader's) and the Duplicate is of the reader's space. Returns the number of instructions
    rewritten (docs/reference/kernel_cost.md §4)."""
    defs: dict = {}
    for i in p.instrs:
        if i.dst:
            defs.setdefault(i.dst, []).append(i)
    by = {n: d[0] for n, d in defs.items() if len(d) == 1}
    have = {(i.op, _bare(i.arg)): i for i in p.instrs if i.kind == "sunary" and i.dst in by}
    done = 0
    out: list = []
    moved: set = set()
    for i in p.instrs:   # f(Duplicate(s)) -> Duplicate(f(s)) where f(s) is computed (moved up to here if later)
        if i.kind == "sunary" and i.dst in moved:
            continue
        d = by.get(i.srcs[0]) if i.kind == "vunary" and len(i.srcs) == 1 else None
        t = have.get((i.op, _bare(d.arg))) if d is not None and d.kind == "vdup" and d.space == i.space else None
        if t is not None and d.when in ((), i.when) and t.when in ((), i.when):
            if t.dst not in moved and not any(x is t for x in out):   # defined later: its operand s is defined here
                out.append(t)
                moved.add(t.dst)
            out.append(evolve(i, kind="vdup", srcs=(), op="", arg=t.dst))
            done += 1
            continue
        out.append(i)
    p.instrs = out
    by = {**by, **{i.dst: i for i in out if i.dst in by}}
    dup = lambda x, i: (by.get(x) is not None and by[x].kind == "vdup" and by[x].space == i.space  # noqa: E731
                        and by[x].when in ((), i.when))
    out = []
    for i in p.instrs:   # a row with a Duplicate operand -> the tensor-scalar form
        if i.kind == "vbin" and i.op in _SCALAR_FORM and len(i.srcs) == 2 and i.srcs[0] != i.srcs[1]:
            a, b = i.srcs
            if i.op != "Sub" and dup(a, i) and not dup(b, i):
                a, b = b, a
            if dup(b, i) and not dup(a, i):
                arg = by[b].arg if i.op != "Sub" else f"-({by[b].arg})"
                out.append(evolve(i, kind="vscalar", srcs=(a,), op=_SCALAR_FORM[i.op], arg=arg))
                done += 1
                continue
        out.append(i)
    p.instrs = out
    return done


def remove_dead_values(p: RowProgram) -> int:
    """Drop pure instructions (see reuse_computed_values) whose result nothing reads, repeatedly. Exact. Returns the
    number removed."""
    done = 0
    while True:
        uses = _uses(p)
        stored = {v for v, _g, _r in p.late_stores}   # column values written after the exchange
        keep = [i for i in p.instrs if not (i.kind in _PURE and i.dst and i.dst not in p.accs and not uses.get(i.dst)
                                            and i.dst not in stored)]
        if len(keep) == len(p.instrs):
            return done
        done += len(p.instrs) - len(keep)
        p.instrs = keep


_NEGATED_CMP = {"EQ": "NE", "NE": "EQ"}
"""Compare modes whose negation is a mode too for every input, NaN included (x != y is exactly not x == y; LT and GE
differ on NaN, so they are not negations of each other)."""


def select_with_scalar(p: RowProgram) -> int:
    """A select between a row and a Duplicate of a scalar -> Select's tensor-scalar form (vsels: the scalar is its
    false branch), the Duplicate (a vector pass over the row) gone: Select(m, x, Duplicate(c)) -> Selects(m, x, c);
    Select(m, Duplicate(c), x) -> Selects(not m, x, c) when m is a Compare / Compares of mode EQ or NE read only
    there (its mode negated: NE <-> EQ, exact for every input, NaN included). The Duplicate must be read by the
    select only, and both in one space and presence. Exact: every lane takes the same value. Returns the number of
    selects rewritten."""
    uses = _uses(p)
    defs = {i.dst: i for i in p.instrs if i.dst}
    dup = lambda x, i: (x in defs and defs[x].kind == "vdup" and uses.get(x) == 1  # noqa: E731
                        and defs[x].space == i.space and defs[x].when == i.when)
    swap: dict[str, str] = {}   # compare dst -> its negated mode
    out = []
    done = 0
    for i in p.instrs:
        if i.kind == "vsel" and len(i.srcs) == 3:
            m, a, b = i.srcs
            if dup(b, i):
                out.append(evolve(i, kind="vsels", srcs=(m, a), arg=defs[b].arg))
                done += 1
                continue
            c = defs.get(m)
            if dup(a, i) and c is not None and c.kind in ("vcmp", "vcmps", "vcmpsh") and c.op in _NEGATED_CMP \
                    and uses.get(m) == 1 and c.when == i.when:
                swap[m] = _NEGATED_CMP[c.op]
                out.append(evolve(i, kind="vsels", srcs=(m, b), arg=defs[a].arg))
                done += 1
                continue
        out.append(i)
    p.instrs = [evolve(i, op=swap[i.dst]) if i.dst in swap and i.kind in ("vcmp", "vcmps", "vcmpsh") else i
                for i in out]
    return done


_LITERAL = re.compile(r"\(?\s*(-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)f?\s*\)?")


def _half_exact(text: str) -> bool:
    """Whether scalar text `text` is a float literal whose value is a half (fp16) value exactly."""
    import numpy as np

    m = _LITERAL.fullmatch(text.strip())
    if not m:
        return False
    v = float(m.group(1))
    if not abs(v) <= 65504.0:   # past the largest half (and the float32 rounding of the literal is the value)
        return False
    return float(np.float16(v)) == float(np.float32(v)) == v


def compare_before_widening(p: RowProgram) -> int:
    """Compares(Cast(h to fp32), c) -> Compares on the halves h themselves (`vcmpsh`) when c is a literal that is a half
    value exactly: the widening is exact, so fp32(h) <op> c and h <op> half(c) agree on every lane (NaN included);
    the Cast (a vector pass over fp32 lanes) goes when nothing else reads it, and the compare covers 128 half lanes
    a repeat instead of 64 (a byte row's bool mask: read through half, compared with 0). Exact. Returns the number of
    compares rewritten."""
    defs = {i.dst: i for i in p.instrs if i.dst}
    done = 0
    out = []
    for i in p.instrs:
        w = defs.get(i.srcs[0]) if i.kind == "vcmps" and i.srcs else None
        if w is not None and w.kind == "vwiden" and not w.op and w.space == i.space and w.when == i.when \
                and _half_exact(i.arg):
            out.append(evolve(i, kind="vcmpsh", srcs=(w.srcs[0],)))
            done += 1
            continue
        out.append(i)
    p.instrs = out
    return done


def fuse_axpy(p: RowProgram) -> int:
    """b + x * s and b - x * s, the product a Muls read only by the sum (Add, either order) or difference (Sub, b
    first) -> Axpy(b, x, s) / Axpy(b, x, -(s)) (`vaxpy`: b's row updated in place by Axpy, docs/reference/ascendc.md
    §1.9): one vector pass and one instruction fewer. b must be a row value read only by the sum (its row is the
    destination: it dies there), all in one space and presence.

    Precision: the table's and the emulation's Axpy round the product to fp32 before the sum
    (docs/reference/kernel_cost.md §4), so RN(b + RN(x s)) is Muls then Add bit for bit, and RN(x (-s)) = -RN(x s)
    makes the difference RN(b - RN(x s)) too: exact. Returns the number of sums rewritten."""
    uses = _uses(p)
    defs = {i.dst: i for i in p.instrs if i.dst}
    row = lambda x, i: (x in defs and defs[x].space == "row" and defs[x].when == i.when  # noqa: E731
                        and defs[x].kind not in ("vnarrow", "vcmp", "vcmps", "vlogic", "viota")
                        and not (defs[x].kind == "cast_in" and defs[x].op == "half"))
    gone: set = set()
    out = []
    done = 0
    for i in p.instrs:
        if i.kind == "vbin" and i.op in ("Add", "Sub") and i.space == "row" and len(i.srcs) == 2:
            pairs = [(0, 1), (1, 0)] if i.op == "Add" else [(1, 0)]   # (product, addend)
            for t, b in pairs:
                m, add = defs.get(i.srcs[t]), i.srcs[b]
                if (m is not None and m.kind == "vscalar" and m.op == "Muls" and m.space == "row"
                        and uses.get(m.dst) == 1 and m.when == i.when and m.dst not in gone
                        and row(add, i) and uses.get(add) == 1 and add != m.srcs[0] and row(m.srcs[0], i)):
                    s = m.arg if i.op == "Add" else f"-({m.arg})"
                    out.append(evolve(i, kind="vaxpy", srcs=(add, m.srcs[0]), op="", arg=s))
                    gone.add(m.dst)
                    done += 1
                    break
            else:
                out.append(i)
            continue
        out.append(i)
    p.instrs = [i for i in out if i.dst not in gone or i.kind != "vscalar"]
    return done


_MINUS_ONE = re.compile(r"\(?\s*-1(?:\.0*)?f?\s*\)?")


def sum_of_negation(p: RowProgram) -> int:
    """ReduceSum(Muls(x, -1)) -> -(ReduceSum(x)), the Muls read only by the sum: a vector pass less a row, the
    negation one scalar operation. Exact: negation is exact and RN(-a - b) = -RN(a + b), so every partial sum of the
    reduction's order is the negated one (signed zeros and NaN included, as -(x) is). Returns the number of sums
    rewritten."""
    uses = _uses(p)
    defs = {i.dst: i for i in p.instrs if i.dst}
    done = 0
    out = []
    for i in p.instrs:
        m = defs.get(i.srcs[0]) if i.kind == "rsum" and i.srcs else None
        if m is not None and m.kind == "vscalar" and m.op == "Muls" and _MINUS_ONE.fullmatch(m.arg or "") \
                and uses.get(m.dst) == 1 and m.when == i.when and m.space == "row":
            part = _fresh(p, f"neg_{i.dst}")
            out.append(evolve(i, dst=part, srcs=m.srcs))
            out.append(evolve(i, kind="sexpr", dst=i.dst, srcs=(), op="", arg=f"(-({part}))", space="stat"))
            done += 1
            continue
        out.append(i)
    p.instrs = out
    return done


def fold_negation(p: RowProgram) -> int:
    """A negation (Muls(x, -1), the lowering of neg) read by one instruction is taken into that instruction, a vector
    pass less a row: Muls(-x, c) -> Muls(x, -(c)); -x + b and b + -x -> Sub(b, x); b - -x -> Add(b, x);
    Axpy(b, -x, s) -> Axpy(b, x, -(s)); and a Muls(x, c) read only by a negation -> Muls(x, -(c)). The negation must
    be a row value read by that instruction only, both in one space and presence (the Axpy's addend, whose row is
    its destination, is never the negation).

    Exact: negation flips the sign bit only and round-to-nearest is symmetric, so RN(-x c) = RN(x (-c)) =
    -RN(x c), RN(b + (-x)) = RN(b - x) and RN(b - (-x)) = RN(b + x) (IEEE 754 defines x - y as x + (-y)), for
    every input (signed zeros, infinities and NaN included; docs/reference/kernel_cost.md §4). Returns the number of
    negations taken."""
    done = 0
    while True:
        uses = _uses(p)
        defs = {i.dst: k for k, i in enumerate(p.instrs) if i.dst}
        hit = None
        for k, i in enumerate(p.instrs):
            if i.space != "row" or not i.srcs:
                continue
            if i.kind == "vscalar" and i.op == "Muls" and _MINUS_ONE.fullmatch(i.arg or ""):
                j = defs.get(i.srcs[0])   # Muls(Muls(x, c), -1), the inner product read only here
                inner = p.instrs[j] if j is not None else None
                if inner is not None and inner.kind == "vscalar" and inner.op == "Muls" and inner.space == "row" \
                        and inner.when == i.when and uses.get(inner.dst) == 1:
                    hit = (j, k, evolve(i, srcs=inner.srcs, arg=f"-({inner.arg})"))
                    break
            for t, x in enumerate(i.srcs):
                j = defs.get(x)
                m = p.instrs[j] if j is not None else None
                if m is None or not (m.kind == "vscalar" and m.op == "Muls" and m.space == "row"
                                     and m.when == i.when and _MINUS_ONE.fullmatch(m.arg or "")
                                     and uses.get(m.dst) == 1):
                    continue
                y = m.srcs[0]
                if i.kind == "vscalar" and i.op == "Muls":
                    new = evolve(i, srcs=(y,), arg=f"-({i.arg})")
                elif i.kind == "vbin" and i.op == "Add" and len(i.srcs) == 2:
                    new = evolve(i, op="Sub", srcs=(i.srcs[1 - t], y))
                elif i.kind == "vbin" and i.op == "Sub" and t == 1:
                    new = evolve(i, op="Add", srcs=(i.srcs[0], y))
                elif i.kind == "vaxpy" and t == 1:
                    new = evolve(i, srcs=(i.srcs[0], y), arg=f"-({i.arg})")
                else:
                    continue
                hit = (j, k, new)
                break
            if hit:
                break
        if hit is None:
            return done
        j, k, new = hit
        p.instrs = p.instrs[:j] + p.instrs[j + 1:k] + [new] + p.instrs[k + 1:]
        done += 1


def _literal(text: str | None) -> float | None:
    """The value of scalar text `text` when it is a float literal (1.0f, (-1.702f)), else None."""
    m = _LITERAL.fullmatch((text or "").strip())
    return float(m.group(1)) if m else None


def _sign(defs: dict, name: str, depth: int = 0) -> int:
    """-1 when every non-NaN value of row value `name` is <= 0, 1 when every one is >= 0, else 0, from its defining
    instructions (`defs`: name -> Instr of a single-assignment program): |x| and Exp are >= 0; x * x, and a sum of
    two values of one sign, keep it (round-to-nearest keeps signs: RN(a) <= 0 for a <= 0); a Muls by a literal
    gives or flips it; x - |x| <= 0 <= |x| - x, and a difference of values of opposite signs has the first one's;
    Mins by a literal <= 0 and Maxs by one >= 0 set it. Anything else (or a chain deeper than 16): 0."""
    i = defs.get(name)
    if i is None or depth > 16 or i.space != "row":
        return 0
    sub = lambda x: _sign(defs, x, depth + 1)  # noqa: E731
    if i.kind == "vunary" and i.op in ("Abs", "Exp", "Relu", "Sqrt"):
        return 1
    if i.kind == "vscalar" and i.op in ("Muls", "Mins", "Maxs"):
        c = _literal(i.arg)
        if c is None:
            return 0
        if i.op == "Mins":
            return -1 if c <= 0 else 0
        if i.op == "Maxs":
            return 1 if c >= 0 else 0
        return sub(i.srcs[0]) * (1 if c > 0 else -1 if c < 0 else 0) if c != 0 else 0
    if i.kind == "vbin" and len(i.srcs) == 2:
        a, b = i.srcs
        if i.op == "Mul":
            return 1 if a == b else sub(a) * sub(b)
        if i.op == "Add":
            sa = sub(a)
            return sa if sa != 0 and sa == sub(b) else 0
        if i.op == "Sub":
            abs_of = lambda v, x: (defs.get(v) is not None and defs[v].kind == "vunary"  # noqa: E731
                                   and defs[v].op == "Abs" and defs[v].srcs == (x,))
            if abs_of(b, a):
                return -1
            if abs_of(a, b):
                return 1
            sa, sb = sub(a), sub(b)
            return sa if sa != 0 and sa == -sb else 0
    return 0


def sigmoid_from_exp(p: RowProgram) -> int:
    """1 / (1 + exp(-w)) -> e / d where e = Exp(w) and d = e + 1 are computed already (the derived gradient of a
    sigmoid form a / (1 + exp(w)) multiplies by 1 / (1 + exp(-w)), opgen.ir.autodiff._composite_rule, next to the
    forward's exp(w)): Muls(w, -1), Exp, Adds(1) and Reciprocal become one Div, a transcendental less a row. Taken
    only where w <= 0 is proven from the program (_sign: FastGelu's -1.702 |x|, a -x^2), so e lies in [0, 1] and
    d in [1, 2]: no overflow, no inf / inf.

    Precision (docs/reference/kernel_cost.md §4): with e = exp(w)(1 + ε) (the table's Exp: one rounding, 1 device
    ulp), e / (1 + e) has relative sensitivity 1 / (1 + e) <= 1 to ε, so RN(e / RN(1 + e)) is within |ε| + 2u of
    the exact sigmoid; 1 / RN(1 + exp(-w)(1 + ε')) within |ε'| + 2u: the two differ by at most 8u (2^-21) with
    1-ulp exponentials, 2^8 below CANN's tightest criterion (2^-13). w = -inf gives 0 both ways, NaN gives NaN.
    Returns the number of reciprocals rewritten."""
    defs = {i.dst: i for i in p.instrs if i.dst}
    exp_of = {i.srcs[0]: i.dst for i in p.instrs if i.kind == "vunary" and i.op == "Exp" and i.space == "row"}
    plus_one = {i.srcs[0]: i.dst for i in p.instrs
                if i.kind == "vscalar" and i.op == "Adds" and i.space == "row" and _literal(i.arg) == 1.0}
    first = {}
    for k, i in enumerate(p.instrs):
        if i.dst:
            first.setdefault(i.dst, k)
    done = 0
    out = []
    for k, i in enumerate(p.instrs):
        if i.kind == "vunary" and i.op == "Reciprocal" and i.space == "row":
            a = defs.get(i.srcs[0])
            e2 = defs.get(a.srcs[0]) if a is not None and a.kind == "vscalar" and a.op == "Adds" \
                and _literal(a.arg) == 1.0 else None
            n = defs.get(e2.srcs[0]) if e2 is not None and e2.kind == "vunary" and e2.op == "Exp" else None
            if n is not None and n.kind == "vscalar" and n.op == "Muls" and _MINUS_ONE.fullmatch(n.arg or ""):
                w = n.srcs[0]
                e = exp_of.get(w)
                d = plus_one.get(e) if e is not None else None
                if d is not None and first[d] < k and defs[d].when == i.when and defs[e].when == i.when \
                        and _sign(defs, w) < 0:
                    out.append(evolve(i, kind="vbin", op="Div", srcs=(e, d)))
                    done += 1
                    continue
        out.append(i)
    p.instrs = out
    return done


def _affine_step(i, x: str):
    """(S, T) of lane-wise instruction `i` applied to row value `x` as y = x * S + T (scalar texts, None for S = 1 /
    T = 0), or None when `i` is not a per-row or per-segment Muls / Adds / Subs of x: a row-space `vscalar` Muls or
    Adds of x by its scalar, or a `vseg` of x (its scalar: its arg, else the segment's value of its GM operand)."""
    if i.space != "row" or i.srcs[:1] != (x,) or len(i.srcs) != 1:
        return None
    if i.kind == "vscalar" and i.op in ("Muls", "Adds"):
        a = i.arg
    elif i.kind == "vseg" and i.op in ("Muls", "Adds", "Subs"):
        a = i.arg or seg_value_name(i.gm)
    else:
        return None
    return (f"({a})", None) if i.op == "Muls" else (None, f"({a})" if i.op == "Adds" else f"(-({a}))")


def _then(st: tuple, step: tuple) -> tuple:
    """The affine map `step` after `st` (both (S, T) as in _affine_step): x -> (x S + T) S2 + T2."""
    (s, t), (s2, t2) = st, step
    if s2 is not None:
        s = s2 if s is None else f"({s} * {s2})"
        t = None if t is None else f"({t} * {s2})"
    if t2 is not None:
        t = t2 if t is None else f"({t} + {t2})"
    return s, t


def fold_affine_chains(p: RowProgram) -> int:
    """`_fold_affine` without folding through a shared first step (in ROW_PASSES): ((x - m) r) g + b ->
    (x - m) S + T with S = r g, T = b; the difference is kept, so no addition is reassociated with a cancelling
    term: adds before the chain's first multiply stay as they are (BatchNormV3's x - mean, an Adds of a per-batch
    scalar, is not folded into T), and a chain with an add before a multiply is not taken. Precision: RN(d S') against RN(RN(d r) g) within about 4u relative of d r g, then the same add of b:
    the chain's own error order (docs/reference/kernel_cost.md §4). Returns the number of chains folded."""
    return _fold_affine(p, through=False)


def fold_affine_through_shared(p: RowProgram) -> int:
    """`_fold_affine` folding through a shared first step too (opt-in, FAST_ROW_PASSES): ((x - m) r) g + b ->
    x S + T with T = b - m S, reading x, so a phased row's final phase no longer computes x - m. It reassociates
    the cancelling add: an absolute error of about 8u (|x| + |m|) |S| (docs/reference/kernel_cost.md §4), which
    fails CANN's fp32 MARE criterion on InstanceNorm rows whose |mean| / std is about 10 (measured: floored MARE
    0.00198 > 2^-13 * 10, where the unfolded kernel passes); 16-bit outputs round far coarser. Returns the number
    of chains folded."""
    return _fold_affine(p, through=True)


def _fold_affine(p: RowProgram, through: bool) -> int:
    """(fold_affine_chains, fold_affine_through_shared) A chain of per-row / per-segment scalar Muls and Adds on a
    row (each link's result read only by the next, all of one presence), at least three links holding both a
    multiply and an add -> one multiply and one add: y = x * S + T, S the product of the multipliers and T the adds
    carried through the later multipliers, computed once per row by the scalar unit (`sexpr`), or once per segment
    inside the segment loop when they read per-segment operands (a vseg with a scalar text over `segv_<gm>` values,
    opgen.kernel.rowclass.seg_nodes). ((x - mean) * rstd) * gamma + beta -> (x - mean) * (rstd gamma) + beta: one
    vector pass a row fewer (InstanceNorm's per-row gamma / beta, GroupNorm's per-channel segments of a group's
    row). With `through`, when the chain's first link reads a row-space Muls / Adds step of x0 that other
    instructions read too (x - mean, which the variance also reads), that step is folded in as well and the chain
    reads x0: x * S + (beta - mean S); the step stays for its other readers, and where the row's phases run over
    column chunks (ROW_CHUNK, COL_STREAM) the final phase no longer computes it (a whole row in UB computes it once
    either way).

    Precision (docs/reference/kernel_cost.md §4; u = 2^-24): without `through` no addition is reassociated:
    RN(d RN(r g)) is within about 4u relative of d r g as RN(RN(d r) g) is, then the same add: the chain's own
    error order. With `through` the cancelling add is reassociated: RN(RN(x S') + T') differs from the exact result
    by about (k + 4) u (|x| + |m|) |S| (k links), relative to the output |x - m| |S| amplified by (|x| + |m|) /
    |x - m| near the mean; measured, InstanceNorm fp32 rows with |mean| / std about 10 then fail CANN's floored
    MARE (0.00198 > 0.00122) where the unfolded kernel passes, so that form is opt-in. Range: S' = RN(r g)
    overflows only where |r g| > 2^128, where d S overflows too for |d| >= 1; a subnormal S' is flushed as d S
    would be. Chains of multiplies only or adds only are left to the opt-in fold_multiply_chains. Per-segment
    operands of one chain must share one segment length. Returns the number of chains folded."""
    done = 0
    while True:
        uses = _uses(p)
        defs: dict = {}
        for k, i in enumerate(p.instrs):
            if i.dst:
                defs.setdefault(i.dst, []).append(k)
        readers: dict = {}
        for k, i in enumerate(p.instrs):
            for x in i.srcs:
                readers.setdefault(x, []).append(k)
        hit = None
        for k0, i0 in enumerate(p.instrs):
            if not i0.srcs or _affine_step(i0, i0.srcs[0]) is None:
                continue
            x = i0.srcs[0]
            prev = defs.get(x, [])
            if len(prev) == 1 and uses.get(x) == 1 and _affine_step(p.instrs[prev[0]], p.instrs[prev[0]].srcs[0]
                                                                     if p.instrs[prev[0]].srcs else "") is not None \
                    and p.instrs[prev[0]].when == i0.when:
                continue   # not the chain's first link
            chain, st, cur = [k0], _affine_step(i0, x), i0
            segs = {i0.gm} if i0.kind == "vseg" else set()
            while len(defs.get(cur.dst, [])) == 1 and uses.get(cur.dst) == 1 and cur.dst not in p.accs \
                    and len(readers.get(cur.dst, [])) == 1:
                nk = readers[cur.dst][0]
                nxt = p.instrs[nk]
                step = _affine_step(nxt, cur.dst)
                if step is None or nxt.when != i0.when:
                    break
                chain.append(nk)
                st = _then(st, step)
                if nxt.kind == "vseg":
                    segs.add(nxt.gm)
                cur = nxt
            if not through:   # no addition reassociated: leading adds stay, and no add may precede a multiply
                kinds = ["mul" if p.instrs[k].op == "Muls" else "add" for k in chain]
                if "mul" not in kinds:
                    continue
                first = kinds.index("mul")
                if first:
                    chain, kinds = chain[first:], kinds[first:]
                    x = p.instrs[chain[0]].srcs[0]
                    st = _affine_step(p.instrs[chain[0]], x)
                    for k in chain[1:]:
                        st = _then(st, _affine_step(p.instrs[k], p.instrs[k].srcs[0]))
                if "add" in kinds and "mul" in kinds[kinds.index("add"):]:
                    continue
            ops = {p.instrs[k].op for k in chain}
            if through and len(prev) == 1 and p.instrs[prev[0]].kind == "vscalar" and uses.get(x, 0) > 1 \
                    and p.instrs[prev[0]].when == i0.when:
                head = p.instrs[prev[0]]   # x = a step of x0 that other instructions read too: it stays for them
                step = _affine_step(head, head.srcs[0]) if head.srcs else None
                if step is not None and len(chain) >= 2:
                    st, x = _then(step, st), head.srcs[0]
                    ops.add(head.op)
                    chain_len = len(chain) + 1
                else:
                    chain_len = len(chain)
            else:
                chain_len = len(chain)
            if chain_len < 3 or "Muls" not in ops or not ops & {"Adds", "Subs"}:
                continue   # two links are one multiply and one add already; a chain of one kind is not taken
            if segs and len({str(getattr(p.tensor(g).view, "seglen", None)) for g in segs}) != 1:
                continue
            hit = (chain, st, x)
            break
        if hit is None:
            return done
        chain, (s, t), x = hit
        last = p.instrs[chain[-1]]
        made: list = []
        src = x

        def emit(op: str, text: str, dst: str) -> None:
            segs_in = [g for g in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text) if g.startswith(SEG_VALUE_PREFIX)]
            one = re.fullmatch(r"\(*\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)*", text)   # a name alone: no expression
            if segs_in:
                g = segs_in[0][len(SEG_VALUE_PREFIX):]
                made.append(evolve(last, kind="vseg", dst=dst, srcs=(src,), op=op, gm=g,
                                   arg="" if one else text))
            elif one:
                made.append(evolve(last, kind="vscalar", dst=dst, srcs=(src,), op=op, arg=one.group(1)))
            else:
                name = _fresh(p, f"k_{dst}")
                made.append(evolve(last, kind="sexpr", dst=name, srcs=(), op="", arg=text, space="stat"))
                made.append(evolve(last, kind="vscalar", dst=dst, srcs=(src,), op=op, arg=name))

        if s is not None and t is not None:
            mid = _fresh(p, f"ax_{last.dst}")
            emit("Muls", s, mid)
            src = mid
            emit("Adds", t, last.dst)
        else:
            emit("Muls" if s is not None else "Adds", s if s is not None else t, last.dst)
        keep = [i for k, i in enumerate(p.instrs) if k not in set(chain[:-1])]
        at = keep.index(last)
        p.instrs = keep[:at] + made + keep[at + 1:]
        done += 1


RowPass = Callable[[RowProgram], int]

ROW_PASSES: list[RowPass] = [propagate_scalar_copies, reuse_computed_values, gather_column_inputs,
                             gather_through_lanewise, reuse_scalar_functions, select_with_scalar, compare_before_widening, sum_of_negation, fold_negation, reciprocal_of_softmax_sum,
                             sigmoid_from_exp, fold_affine_chains, fuse_axpy, one_lane_updates, remove_dead_values]
"""The kernel-level algebra run on every row program of the rows family, in order (module docstring): the exact
rewrites, and the two inexact rewrites whose operands' ranges are proven (reciprocal_of_softmax_sum: within 2 fp32
ulp of the interpreter's device-mode quotient; sigmoid_from_exp: within 8u relative of its sigmoid); every other
rewrite keeps the interpreter's device-mode values."""

FAST_ROW_PASSES: list[RowPass] = [propagate_scalar_copies, reuse_computed_values, gather_column_inputs,
                                  gather_through_lanewise, reuse_scalar_functions, select_with_scalar, compare_before_widening, sum_of_negation, fold_negation, reciprocal_of_broadcast_divisor,
                                  sigmoid_from_exp, fold_affine_through_shared, fold_multiply_chains,
                                  reuse_computed_values,
                                  fuse_axpy, one_lane_updates, remove_dead_values]
"""Opt-in (pass as `passes`): ROW_PASSES plus the inexact rewrites reciprocal_of_broadcast_divisor and
fold_multiply_chains. Their relative bounds hold only while 1/s and a*b stay normal fp32: for |s| > 2^126 the
reciprocal is subnormal (flushed to 0 by the device), for |s| < 2^-128 it overflows to inf, and a product of two
scalars may overflow or underflow where x*a*b does not, so nothing proves the divisor's range from the program and
they are not run by default."""


def optimize(p: RowProgram, passes: list[RowPass] | None = None) -> list[tuple[str, int]]:
    """Run `passes` (default ROW_PASSES) in order on row program `p` (as lowered: single-assignment names, before
    scheduling and allocation), in place. Returns [(pass name, rewrites made)] in order."""
    return [(f.__name__, f(p)) for f in (ROW_PASSES if passes is None else passes)]


def vector_instrs_per_row(p: RowProgram) -> int:
    """Vector (PIPE_V) instructions a row program issues once per row: its row-space vector instructions, row
    reductions and accumulations (one row's work; brow/col instructions run per batch or per kernel); of a program
    joined over runtime guards, those of the guard values that issue the most (`_per_guard_value`)."""
    return _per_guard_value(p, lambda i: 1 if (i.space == "row" and is_vector(i)) or i.kind in ROW_REDUCE
                            or (i.kind == "acc" and not lane_acc(i)) else 0)


def phase_instrs_per_row(p: RowProgram) -> int:
    """Vector instructions a row costs when its phases run one after the other over column chunks (COL_STREAM and
    a row-reduction program's ROW_CHUNK, opgen.tiling.rowkernel): each per-row vector instruction once per COL_SPLIT
    phase that executes it (opgen.kernel.rowprog._assign_phases: a cast of the row input feeding two levels and the
    output runs three times), per chunk of the row; of a program joined over runtime guards, the guard values that
    issue the most (`_per_guard_value`)."""
    return _per_guard_value(p, lambda i: max(len(i.phases), 1) if (i.space == "row" and is_vector(i))
                            or i.kind in ROW_REDUCE or (i.kind == "acc" and not lane_acc(i)) else 0)


def _per_guard_value(p: RowProgram, count) -> int:
    """The sum of count(i) over the instructions of `p`, the largest over the values of its runtime guards
    (opgen.kernel.rowguard: presence names that are GuardNames; a call runs the instructions of one value only);
    over every instruction when it has none (the presences of optional inputs still summed, as the tiling has
    always priced them)."""
    ks = [k for k, n in enumerate(p.presence) if isinstance(n, GuardName)]
    if not ks:
        return sum(count(i) for i in p.instrs)
    best = 0
    for vals in {tuple(pt[k] for k in ks) for pt in p.served}:
        best = max(best, sum(count(i) for i in p.instrs
                             if not i.when or any(tuple(pt[k] for k in ks) == vals for pt in i.when)))
    return best
