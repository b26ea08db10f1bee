"""One row program for every presence of a spec's optional inputs (the presence handled in the IR, not one kernel
class per presence).

A spec traces once per presence of its optional inputs (`gamma is None` is Python, decided at trace time), so the
rows family gets one program per presence. `merge_presences` joins those programs, each as lowered and simplified
(opgen.kernel.rows `_Lowering.build`: single-assignment names, before scheduling), into one: an instruction is the
same in two programs when it is the same operation on the same operands (value numbering: its kind, op, scalar
text, GM tensor and space, and the numbers of its operands); the joined program has each distinct instruction once,
with `Instr.when` naming the presences that run it (() when all do), and the union of the GM tensors and
accumulators, and the single-value inputs read in Init (`gm_scalars`; an optional one is read per row and not joined). A value computed only under some presences is guarded by them (`if (hasInput<k>_ ...)` in the class,
opgen.kernel.rowclass); the buffer assignment lets values of presences that never run together share a row
temporary (opgen.kernel.rowprog `_allocate`), so the joined program's UB is about that of its largest presence.

After buffer assignment `join_copies` joins the copies of one instruction that presences run on the same rows
(a chain downstream of a presence-dependent value) into one instruction under the union of their presences.

An output written under some presences only (AddRmsNormQuant's y2, when scales2 is given) is joined when one
cube of presence literals names those presences (`output_guard`): the class allocates, hands over and copies out its
queue under that condition (opgen.kernel.rowsched `GmRows.guard`), as its Compute stores it only there (Instr.when).

An optional input read per row (BinaryCrossEntropy's weight) joins too: its queue's protocol runs under every
presence and only the copy from its GM sits in an If of its presence (`input_guard`); its instructions run under its
presence (Instr.when), so the unfilled buffer of an absent input is never read. An accumulator's finishing
instructions (a mean's division by the count of rows: RowProgram.acc_post) join when every presence finishes it
alike.

A column sum over the rows written under some presences only (the derived AdaLayerNormGrad's pd_beta, when bias is
given) joins too: it accumulates under its presences (its steps' Instr.when; under the others it stays zero, never
read) and only its store to GM after the exchange is guarded (`output_guard`).

What the join does not cover (it returns None with the reason, and the family keeps one class per presence): an
optional input read as a per-row statistic or a segment value, an output written under presences that no one cube
names (or a per-batch accumulated one), programs with a second pass over the rows or per-batch values (their side tables are
not joined), programs on other layouts.

Facts: docs/design.md "Optional inputs: one class for every presence" (what is joined, what it costs); the
presences are the kernel entry's (opgen.kernel.rows `presence_condition`)."""

from __future__ import annotations

import dataclasses
import itertools
import re

from opgen.kernel.rowprog import SCALAR_ARG_KINDS, RowProgram

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def merge_presences(progs: list, optional: tuple) -> tuple[RowProgram | None, str]:
    """(the joined program, "") of `progs` = [(presence, RowProgram as built)] (presence: one bool per name of
    `optional`, the spec's optional inputs in order; every program on one layout), or (None, why) when the join
    does not cover them (module docstring). The joined program is named after the first; its instructions are in
    an order where every operand is defined before its use (the first program's, then each later program's new
    ones), ready for opgen.kernel.rows.finish."""
    why = _unjoinable(progs, optional)
    if why:
        return None, why
    first = progs[0][1]
    merged: dict = {}      # instruction key -> [Instr (joined names), set of program indices]
    names: dict = {}       # value key -> joined name
    taken: set = set()
    gm: dict = {}
    accs: dict = {}
    kinds: dict = {}
    posts: dict = {}       # joined accumulator -> its finishing instructions (over placeholder rows x, t)
    for v, (_pr, p) in enumerate(progs):
        for t in p.gm:
            if gm.setdefault(t.name, t) != t:
                return None, f"GM operand {t.name} is read two ways"
        kmap: dict = {}    # this program's value name -> value key
        ren: dict = {}     # this program's value name -> joined name
        for i in p.instrs:
            arg, arg_keys = i.arg, ()
            if i.kind in SCALAR_ARG_KINDS and i.arg:
                found = [m for m in _NAME.findall(i.arg) if m in kmap]
                arg_keys = tuple(kmap[m] for m in found)
                arg = _NAME.sub(lambda m: "{}" if m.group(0) in kmap else m.group(0), i.arg)
            srcs = tuple(kmap.get(x, ("gm", x)) for x in i.srcs)
            if i.kind == "acc":
                if i.dst not in p.accs:
                    return None, f"accumulator {i.dst} is not stored"
                sp, out, rnd = p.accs[i.dst]
                acc_key = ("acc", out)
                if acc_key not in names:
                    names[acc_key] = _fresh(i.dst, taken)
                name = names[acc_key]
                if accs.setdefault(name, (sp, out, rnd)) != (sp, out, rnd) or \
                        kinds.setdefault(name, p.acc_kinds.get(i.dst)) != p.acc_kinds.get(i.dst) or \
                        posts.setdefault(name, p.acc_post.get(i.dst, ())) != p.acc_post.get(i.dst, ()):
                    return None, f"output {out} accumulates two ways"
                ren[i.dst] = name
                key = ("acc", i.op, acc_key, srcs)
            else:
                key = (i.kind, i.op, arg, arg_keys, i.gm, i.space, srcs)
                if i.dst:
                    kmap[i.dst] = key
                    if key not in names:
                        names[key] = _fresh(i.dst, taken)
                    ren[i.dst] = names[key]
            if key not in merged:
                new_arg = _NAME.sub(lambda m: ren.get(m.group(0), m.group(0)), i.arg) \
                    if i.kind in SCALAR_ARG_KINDS else i.arg
                merged[key] = [dataclasses.replace(i, dst=ren.get(i.dst, i.dst), srcs=tuple(ren.get(x, x) for x in i.srcs),
                                                   arg=new_arg), set()]
            merged[key][1].add(v)
    everyone = set(range(len(progs)))
    instrs = [dataclasses.replace(i, when=() if runs == everyone else tuple(sorted(progs[k][0] for k in runs)))
              for i, runs in merged.values()]
    order = {t.name: k for k, t in enumerate(first.gm)}
    out = RowProgram(first.name, first.layout, gm=sorted(gm.values(), key=lambda t: (t.role != "in", order.get(
                         t.name, len(order)), t.name)),
                     instrs=instrs, accs=accs, acc_kinds={a: k for a, k in kinds.items() if k is not None},
                     acc_post={a: post for a, post in posts.items() if post},
                     int_cast_modes={k: m for _pr, p in progs for k, m in p.int_cast_modes.items()},
                     presence=tuple(optional), served=tuple(pr for pr, _p in progs), bnames={},
                     gm_scalars=list(dict.fromkeys(g for _pr, p in progs for g in p.gm_scalars)))
    return out, ""


def _fresh(name: str, taken: set) -> str:
    """`name`, or name_<k> when another value took it (two traces number their values alike)."""
    out = name
    for k in itertools.count(1):
        if out not in taken:
            break
        out = f"{name}_{k}"
    taken.add(out)
    return out


def _unjoinable(progs: list, optional: tuple) -> str:
    """Why the programs cannot be joined ("" when they can)."""
    if len(progs) < 2:
        return "one presence"
    lay = progs[0][1].layout
    for _pr, p in progs:
        if p.layout is not lay and p.layout != lay:
            return "the presences lower on different layouts"
        if p.late or p.late_stores or p.btotals or p.batch_stores or p.acc_reads or p.consts or p.dim_values:
            return "a program with values after the exchange, per-batch values or finishing instructions"
        for t in p.gm:
            if t.gm in optional and t.space not in ("col", "brow", "row", "elem"):
                return f"optional input {t.gm} is read per row as a statistic or segment value"
    outs = [{t.name for t in p.gm if t.role == "out"} for _pr, p in progs]
    for name in sorted(set.union(*outs) - set.intersection(*outs)):   # written under some presences only
        where = [pr for (pr, p), o in zip(progs, outs) if name in o]
        if len(cover(tuple(where), len(optional))) != 1:
            return f"output {name} is written under presences no one condition names"
        for pr, p in progs:
            col_acc = name in {o for sp, o, _r in p.accs.values() if sp == "col"}
            if name in {o for sp, o, _r in p.accs.values() if sp != "col"} or \
                    any(t.name == name and t.space not in ("row", "stat") and not col_acc for t in p.gm):
                return f"output {name}, written under some presences only, is not a row, per-row or column-sum " \
                       f"output"
    return ""


def output_guard(p: RowProgram, name: str) -> tuple:
    """The presences under which joined program `p` writes output operand `name`: () when every presence it serves
    does (or `p` serves one), else one cube of presence literals (opgen.kernel.rowpresence.cover: True present,
    False absent, None either; merge_presences admits only outputs whose presences one cube names). The union of
    the `when` of the instructions storing it (of an accumulated column output: of its accumulating steps): its
    queue's allocation, hand-off and CopyOut run under that condition (opgen.kernel.rowsched `GmRows.guard`), and
    so does an accumulated output's store after the exchange (opgen.kernel.rowclass `_store`), so an absent output
    is never touched."""
    if not p.presence:
        return ()
    runs: set = set()
    stores = {a for a, (_sp, out, _r) in p.accs.items() if out == name}   # an accumulated output: its acc steps
    for i in p.instrs:
        if (i.kind in ("store", "sstore") and i.gm == name) or (i.kind == "acc" and i.dst in stores):
            if not i.when:
                return ()
            runs |= set(i.when)
    if not runs or runs >= set(p.served):
        return ()
    cubes = cover(tuple(sorted(runs)), len(p.presence))
    if len(cubes) != 1:
        raise ValueError(f"output {name} of {p.name}: presences {sorted(runs)} are not one cube")
    return cubes[0]


def input_guard(p: RowProgram, gm: str) -> tuple:
    """The presence cube under which joined program `p` copies GM input `gm` in: its own literal (present) when it
    is one of the optional inputs `p` serves several presences of, else () (always). Its queue's protocol (Alloc,
    EnQue, DeQue, Free) runs under every presence, only the copy from its GM sits in the If (opgen.kernel.rowsched
    `_copy_rows_in`, `_col_copy_in`): an absent input's GM is never read, and its instructions run under its
    presence only (Instr.when), so the unfilled buffer is never read either."""
    if gm not in p.presence or len(p.served) < 2:
        return ()
    return tuple(True if n == gm else None for n in p.presence)


def cover(when: tuple, n: int) -> list[tuple]:
    """Disjoint cubes exactly covering the presences `when` (each a tuple of n bools): [(literal per input: True
    present, False absent, None either)], the fewest-literal cubes first (a greedy cover: exact and disjoint, not
    always minimal). One If per cube guards an instruction (opgen.kernel.rowclass)."""
    left = set(when)
    out = []
    cubes = sorted(itertools.product((None, True, False), repeat=n), key=lambda c: sum(x is not None for x in c))
    for c in cubes:
        pts = {p for p in itertools.product((True, False), repeat=n)
               if all(x is None or x == y for x, y in zip(c, p))}
        if pts <= left:
            out.append(c)
            left -= pts
        if not left:
            break
    return out


def join_copies(p: RowProgram) -> int:
    """Join the copies of one instruction that a joined program runs under different presences (after buffer
    assignment, where the values of presences that never run together often share their rows): two instructions
    equal in everything but `Instr.when` (disjoint presences) become one running under the union (() when that is
    every presence the program serves), so a chain after a presence-dependent value (`if (hasBeta) Add(...)`
    followed by the cast of every presence) is printed once instead of once per presence under guards.

    Two copies defining scalars (a row sum, a scalar expression: SCALAR_KINDS) join too when they differ only in the
    scalar's name: the later one's name is then the earlier one's everywhere (its readers run under its presences
    only, where the earlier one's scalar is never defined: each scalar has one definition), so the chain downstream
    (AddLayerNorm's mean and rstd of x with or without the bias) joins step by step.

    Sound by construction: the later copy j moves up to the earlier copy i only when no instruction between them
    runs under j's presences (for those presences the buffers at i are those at j), or i moves down to j when none
    between runs under i's presences; for every other presence nothing moves. Returns how many copies were joined
    (p.instrs rewritten in place). Facts: docs/design.md "Optional inputs: one class for every presence"."""
    if not p.presence:
        return 0
    served = set(p.served)
    instrs = list(p.instrs)
    joined = 0
    changed = True
    while changed:
        changed = False
        defs: dict = {}
        for x in instrs:
            if x.dst:
                defs[x.dst] = defs.get(x.dst, 0) + 1
        for a in range(len(instrs)):
            i = instrs[a]
            if not i.when:
                continue
            for b in range(a + 1, len(instrs)):
                j = instrs[b]
                if not j.when or set(i.when) & set(j.when):
                    continue
                rename = i.kind in SCALAR_KINDS and j.dst != i.dst and defs.get(i.dst) == 1 and defs.get(j.dst) == 1
                if dataclasses.replace(j, when=i.when, dst=i.dst if rename else j.dst) != i:
                    continue
                between = instrs[a + 1:b]
                up = all(x.when and not set(x.when) & set(j.when) for x in between)
                down = all(x.when and not set(x.when) & set(i.when) for x in between)
                if not (up or down):
                    continue
                when = set(i.when) | set(j.when)
                merged = dataclasses.replace(i, when=() if when >= served else tuple(sorted(when)))
                if up:
                    instrs[a] = merged
                    del instrs[b]
                else:
                    instrs[b] = merged
                    del instrs[a]
                if rename:
                    instrs = [_renamed(x, j.dst, i.dst) for x in instrs]
                joined += 1
                changed = True
                break
            if changed:
                break
    p.instrs = instrs
    return joined


SCALAR_KINDS = ("rsum", "rmax", "sexpr")
"""Kinds defining one scalar per row (a named float on the scalar unit) that join_copies may rename."""


def _renamed(i, old: str, new: str):
    """Instruction `i` reading scalar `new` where it read `old` (its operands and its scalar text)."""
    srcs = tuple(new if x == old else x for x in i.srcs)
    arg = _NAME.sub(lambda m: new if m.group(0) == old else m.group(0), i.arg) \
        if i.kind in SCALAR_ARG_KINDS and i.arg else i.arg
    return i if (srcs, arg) == (i.srcs, i.arg) else dataclasses.replace(i, srcs=srcs, arg=arg)
