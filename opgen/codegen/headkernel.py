"""Emission of op_kernel/<op>.h and op_kernel/<op>.cpp for head-row kernels (opgen.kernel.headrows).

Python decides every statement. For every combination of the spec's static attributes the
specialisation with all optional inputs present is lowered to a head program; its parts are matched
across combinations to *part slots* (parts whose part-sized tensors overlap; slot order = spec order of
those tensors), which fixes the kernel's row space. The emitted code is one class per dtype, with:

* a *body* per distinct part computation (`opgen.kernel.headrows.body_text`: query and key with the same
  norm and RoPE share one), printed instruction by instruction from the part's row programs, with the
  row conditions (`s < cond`: RoPE rows) as if/else;
* an *addressing* function per part slot and distinct set of offsets (`SlotBinding`): each slot binds the
  union of the GM tensors its parts touch over all combinations (parts are renumbered to that binding,
  `bind_slots`), says where row (b, s, n) of each is (printed from the RowMaps' dim expressions over the
  tiling data) and which rows get RoPE; only the offsets differ between variants (concat_order);
* tables indexed by attrKey (opgen.tiling.emit.attr_key) selecting each slot's body and addressing, the
  lane families each body needs (Gather offsets, sign rows), and the column outputs summed across cores.

So the static attributes are branched on at run time inside one class per dtype (compile time stays
that of the distinct bodies, 15 forward and 9 backward, not of 108 attribute combinations x 3 dtypes), while the tiling key
(attrKey * 100 + dtypeKey * 10 + 1) keeps naming the combination, as CANN's binaries do. Optional-input
presence is checked at run time (nullptr): a part whose own optional tensors are absent is skipped;
`check_presence_variants` proves, by lowering the other presence keys, that each is the all-present
program restricted to its present parts with the absent dims at their absent value (tests run it).

Reference facts: docs/reference/ascendc.md §1.3 (entry point, GM_ADDR), §1.5 (TPipe/TQue/TBuf), §1.8
(DataCopyPad units: blockLen bytes, UB gaps in 32-byte blocks, GM gaps in bytes), §1.9 (count-form vector
calls, Gather, Cast round modes, ReduceSum), §1.6 (SyncAll); docs/reference/norm_rope_concat.md §4.5
(weight-gradient reduction, done here in fixed core order).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

from opgen.ir.dimprint import dim_cpp
from opgen.names import op_snake
from opgen.codegen.tilingkey import TilingKey, emit_tiling_keys
from opgen.errors import SpecError
from opgen.ir.dims import Lit, Sym, as_dim, subst
from opgen.kernel.headrows import PERMS, SIGNS, HeadPart, body_text, lower_heads, part_text
from opgen.kernel.vsync import place_barriers, vstmt
from opgen.passes.pipeline import optimize
from opgen.tiling.emit import attr_key
from opgen.tiling.headkernel import head_needs

CTYPE = {"f32": "float", "f16": "half", "bf16": "bfloat16_t"}
_BUF = {"w": "w_", "tab": "tab_", "col": "col_", "acc": "acc_", "perm": "perm_", "sign": "sign_"}


@dataclass
class Lowered:
    """Every static attribute combination of a spec lowered: [(attrs, attrKey, HeadProgram)] in attrKey
    order, and the part slots [(name, {own tensors})] with each program's part -> slot assignment."""

    spec: object
    programs: list = field(default_factory=list)
    slots: list = field(default_factory=list)
    slot_of: dict = field(default_factory=dict)   # (attrKey, part index) -> slot
    layout: object = None                          # the HeadLayout the programs were lowered on


def full_keys(spec) -> list:
    """One specialisation key per static attribute combination, in attrKey order: every optional input
    present that the combination uses (free ones all, gated ones where their when= holds), first shape
    forms. A combination whose all-present choice fails a static check falls back to the key of
    spec.keys() with the most inputs present. Enumerating spec.keys() for every combination is what this
    avoids (2^14 presence combinations per attribute value for NormRopeConcatGrad)."""
    from opgen.dsl.spec import SpecKey

    names = [a.name for a in spec.static_attrs]
    opts = [i for i in spec.inputs if i.optional]
    multi = [i for i in spec.inputs if len(i.shapes) > 1]
    out, slow = [], []
    for st in itertools.product(*[a.choices for a in spec.static_attrs]):
        attrs = dict(zip(names, st))
        present = {i.name: True for i in spec.inputs if not i.optional or i.when is None}
        for i in opts:
            if i.when is not None:
                present[i.name] = bool(spec._call_user(i.when, i.loc, f"when= of input {i.name}", attrs, present))
        if any(spec._call_user(r.fn, r.loc, f"check of {r.param}", attrs, present)
               for r in spec.requirements if r.kind == "static"):
            slow.append(tuple(st))
            continue
        out.append(SpecKey(tuple(st), tuple(present[i.name] for i in opts), tuple(0 for _ in multi)))
    if slow:
        best: dict = {}
        for k in spec.keys():
            if k.static in slow and (k.static not in best or sum(k.present) > sum(best[k.static].present)):
                best[k.static] = k
        out += list(best.values())
    return sorted(out, key=lambda k: attr_key(spec, dict(zip(names, k.static))))


def lower_spec(spec, graphs: dict, layout) -> Lowered:
    """Lower the optimized graphs of every full key of `spec` ({key: Graph} in full_keys order) on `layout` and
    assign part slots. Raises IRError (no head-row lowering) or SpecError (two parts of one program in one slot)."""
    low = Lowered(spec, layout=layout)
    names = [a.name for a in spec.static_attrs]
    for k in full_keys(spec):
        attrs = dict(zip(names, k.static))
        low.programs.append((attrs, attr_key(spec, attrs), lower_heads(graphs[k], layout)))
    order = {n: j for j, n in enumerate([i.name for i in spec.inputs] + [o.name for o in spec.outputs])}
    groups: list[set] = []
    for _a, _k, hp in low.programs:
        for part in hp.parts:
            own = set(part.own)
            hit = [g for g in groups if g & own]
            merged = own.union(*hit)
            groups = [g for g in groups if g not in hit] + [merged]
    groups.sort(key=lambda g: min(order[t] for t in g))
    low.slots = [(min(g, key=order.get), g) for g in groups]
    for _a, key, hp in low.programs:
        seen = set()
        for j, part in enumerate(hp.parts):
            slot = next(s for s, (_n, g) in enumerate(low.slots) if set(part.own) <= g)
            if slot in seen:
                raise SpecError(f"{spec.name}: attrKey {key}: two parts in slot {low.slots[slot][0]}")
            seen.add(slot)
            low.slot_of[(key, j)] = slot
    return low


def check_presence_variants(spec, low: Lowered) -> int:
    """Prove that every specialisation key is served by the all-present program of its attribute
    combination at run time: lowered, its parts are exactly the all-present parts whose optional tensors
    are present, with the absent dims at their absent value (part text equal, tensor names included), and
    its zero column outputs are the accumulators of the skipped parts. Returns the number of keys checked.
    Raises SpecError naming the key and the first difference."""
    names = [a.name for a in spec.static_attrs]
    opts = [i for i in spec.inputs if i.optional]
    full = {key: hp for _a, key, hp in low.programs}
    optional = {i.name for i in spec.inputs if i.optional} | {o.name for o in spec.outputs if o.optional}
    n = 0
    for k in spec.keys():
        attrs = dict(zip(names, k.static))
        key = attr_key(spec, attrs)
        present = {i.name: p for i, p in zip(opts, k.present)}
        absent = {d: Lit(spec.dims_[d].absent) for d in _absent_dims(spec, present)}
        hp = lower_heads(optimize(spec.graph(k)), low.layout)
        produced = {o for o, _ in spec.graph(k).outputs}
        want, skipped = [], []
        for part in full[key].parts:
            gone = [t for t in part.own if t in optional and not (present.get(t, t in produced))]
            (skipped if gone else want).append(part)
        got = [_part_key(p, {}) for p in hp.parts]
        exp = [_part_key(p, absent) for p in want]
        if sorted(got) != sorted(exp):
            diff = next((g for g in got if g not in exp), None) or next(e for e in exp if e not in got)
            raise SpecError(f"{spec.name}: key {k}: the lowered parts differ from the all-present program's "
                            f"present parts (runtime presence checks would be wrong):\n{diff}")
        zeros = sorted(out for p in skipped for out, _r in p.accs.values() if out in produced)
        if sorted(hp.zero_outputs) != zeros:
            raise SpecError(f"{spec.name}: key {k}: zero outputs {hp.zero_outputs} != accumulators of the skipped "
                            f"parts {zeros}")
        n += 1
    return n


def _absent_dims(spec, present: dict) -> list[str]:
    """Dims with an absent value whose every carrying optional input (one with the dim as a plain axis,
    where the tiling reads it) is absent in `present`."""
    out = []
    for name, d in spec.dims_.items():
        if d.absent is None:
            continue
        carriers = [i for i in spec.inputs if any(isinstance(x, Sym) and x.name == name for s in i.shapes for x in s)]
        if carriers and all(i.optional and not present.get(i.name) for i in carriers):
            out.append(name)
    return out


def _part_key(part: HeadPart, absent: dict) -> str:
    """part_text of `part` without its header line (own tensors), dims substituted by `absent`."""
    sub = HeadPart(part.own, subst(part.seq, absent) if absent else part.seq)
    sub.maps = [type(m)(m.slot, m.tensor, m.role, m.space, m.dtype, m.layout,
                        None if m.extent is None else subst(m.extent, absent),
                        None if m.offset is None else subst(m.offset, absent)) for m in part.maps]
    sub.conds = [subst(x, absent) for x in part.conds]
    sub.cases, sub.accs, sub.lanes, sub.roots = part.cases, part.accs, part.lanes, part.roots
    return "\n".join(part_text(sub).splitlines()[1:])


# ---------------------------------------------------------------- C++ printing
def _operand(x: str) -> str:
    m = re.fullmatch(r"(w|tab|col|acc|perm|sign)(\d+)", x)
    if not m:
        raise SpecError(f"head-row kernel: operand {x} has no UB buffer")
    return f"{_BUF[m.group(1)]}[{m.group(2)}]"


def _slot_index(slot: str) -> str:
    return re.fullmatch(r"[a-z]+(\d+)", slot).group(1)


def instr_lines(i, locs=None) -> list:
    """Stream statements of one row-program instruction inside a body's row loop (`i`: row of the pass, headDim_
    lanes), ending with the spec comment of `locs` (default: the instruction's own location; a body shared by several
    parts cites the instructions of all of them): a vector instruction as a VStmt with its operands' regions (its
    instruction-table entry, opgen.codegen.kernel.vector_stmt), RowSum as one whose accesses are done after it (the
    scalar unit reads its result), the others as lines; opgen.kernel.vsync.place_barriers places the barriers."""
    from opgen.codegen.kernel import cite, vector_stmt

    lines = cite(_instr_lines(i), [i.loc] if locs is None else locs)
    if i.kind == "rsum":
        return [vstmt(lines, reads=[_operand(i.srcs[0])], writes=["red_", "redTmp_"], after="done")]
    return vector_stmt(i, lines, _operand, "headDim_", _row_in(i) if i.kind == "cast_in" else "",
                       _row_out(i) if i.kind == "store" else "")


def _row_in(i) -> str:
    return f"rowIn_[{_slot_index(i.gm)}][i * dAlign_]"


def _row_out(i) -> str:
    return f"rowOut_[{_slot_index(i.gm)}][i * dAlign_]"


def _instr_lines(i) -> list[str]:
    k, n = i.kind, "headDim_"
    if k == "sload":
        return [f"const float {i.dst} = statIn_[{_slot_index(i.gm)}].GetValue(i);"]
    from opgen.codegen.kernel import compute_line, table_form

    common = compute_line(i, _operand, n)
    if common is not None:
        return [common]
    if k in ("cast_in", "vgather", "store"):
        d, ex = table_form(i, _operand, n, _row_in(i) if k == "cast_in" else "", _row_out(i) if k == "store" else "")
        return [d.stmt(**ex)]
    if k == "rsum":
        return [f"const float {i.dst} = RowSum({_operand(i.srcs[0])}, {n});"]
    if k == "sstore":
        return [f"statStage_[{_slot_index(i.gm)}].SetValue(i, {i.srcs[0]});"]
    raise SpecError(f"head-row kernel: no C++ for instruction {k}")


def body_lines(part: HeadPart, sharing=None) -> list[str]:
    """The body of a part: the loop over the pass's rows, the row conditions as if/else, each case's
    table-row loads then its instructions, barriers by dependency (opgen.kernel.vsync.place_barriers: each branch
    and the loop body a stream of its own). `sharing`: every part this body serves (equal body_text; default just
    `part`): each statement cites the spec lines of the corresponding instruction of all of them."""
    members = list(sharing) if sharing else [part]
    member_cases = [{c.truth: c for c in m.cases} for m in members]
    uses_tab = any(c.startswith("tab") for case in part.cases for c in case.prog.consts)
    uses_p = bool(part.conds) or uses_tab
    out = [] if uses_p else ["(void)p;"]
    out.append("for (int64_t i = 0; i < k; ++i) {")
    if uses_p:
        out.append("const int64_t seqPos = (r0 + i) / heads_ % p.seq;")
    else:
        out.append("(void)r0;")
    cases = {c.truth: c for c in part.cases}

    def emit(j, prefix):
        if j == len(part.conds):
            case = cases[prefix]
            lines = [vstmt(f"TableRow({_slot_index(c)}, p, seqPos);", writes=[_operand(c)], after="done")
                     for c in case.prog.consts if c.startswith("tab")]   # LoadRow when the row changes: own barrier
            for k, ins in enumerate(case.prog.instrs):
                lines += instr_lines(ins, [mc[prefix].prog.instrs[k].loc for mc in member_cases])
            return lines
        return ([f"if (seqPos < p.cond[{j}]) {{"] + emit(j + 1, prefix + (True,)) + ["} else {"]
                + emit(j + 1, prefix + (False,)) + ["}"])

    out += emit(0, ())
    out.append("}")
    return place_barriers(out)


def body_doc(part: HeadPart) -> str:
    """One line describing a body: its slots, conditions and lane families."""
    ins = [m.slot for m in part.maps if m.role == "in"]
    outs = [m.slot for m in part.maps if m.role == "out"] + list(part.accs)
    lanes = ", ".join(f"{k} {f}" for k, f in part.lanes.values())
    conds = f"{len(part.conds)} row condition(s), " if part.conds else ""
    temps = max(c.prog.row_temps for c in part.cases)
    return (f"reads {', '.join(ins) or '-'}; writes {', '.join(outs) or '-'}; {conds}{temps} fp32 temporaries"
            + (f"; lanes: {lanes}" if lanes else ""))


def _dim(e, fields: dict) -> str:
    def sym(n):
        if n not in fields:
            raise SpecError(f"head-row kernel: dim {n} has no tiling-data field (opgen.tiling.headkernel.dim_fields)")
        return f"td_->{fields[n]}"

    def prod(n):
        raise SpecError(f"head-row kernel: variadic dims *{n} are not supported")

    return dim_cpp(e, sym, prod)


PREFIXES = ("in", "sin", "tab", "col", "out", "sout", "acc")
"""Slot prefixes in binding order (opgen.kernel.headrows.ROLE_PREFIX)."""
USE_MASKS = ("in", "out", "sin", "sout", "col", "acc")
"""The slot kinds whose use a body reports to the generic copy/load code (kBodyUse columns)."""


@dataclass
class SlotBinding:
    """A part slot of the kernel: its name, the union of the tensors its parts touch over every attribute
    combination ([(prefix, tensor)], slot = prefix + index within the prefix), each entry's RowMap template
    (layout, extent, dtype), its rows per (b, n), the free optional inputs whose absence skips it, and its
    addressing variants: [{entry or ("cond", j): DimExpr}] (offsets that differ between combinations,
    e.g. with concat_order)."""

    name: str
    entries: list
    maps: dict
    seq: object
    presence: list
    variants: list = field(default_factory=list)

    def slot(self, entry) -> str:
        """The slot name of union entry (prefix, tensor)."""
        prefix = entry[0]
        return f"{prefix}{[e for e in self.entries if e[0] == prefix].index(entry)}"


def _entry(slot: str, tensor: str) -> tuple:
    return (re.fullmatch(r"([a-z]+)\d+", slot).group(1), tensor)


def bind_slots(spec, low: Lowered) -> tuple[list, dict]:
    """The SlotBindings of `low` and every part renamed to its slot's union numbering
    ({(attrKey, part index): HeadPart}). Raises SpecError when one tensor is addressed two ways."""
    from opgen.kernel.headrows import rename_slots

    order = {n: j for j, n in enumerate([i.name for i in spec.inputs] + [o.name for o in spec.outputs])}
    free = {i.name for i in spec.inputs if i.optional and i.when is None}
    ents: dict = {}
    for _a, key, hp in low.programs:
        for j, part in enumerate(hp.parts):
            c = low.slot_of[(key, j)]
            b = ents.setdefault(c, {"entries": set(), "maps": {}, "seq": set(), "presence": set()})
            for m in part.maps:
                e = _entry(m.slot, m.tensor)
                b["entries"].add(e)
                tmpl = (m.role, m.space, m.dtype, m.layout, m.extent)
                if b["maps"].setdefault(e, tmpl) != tmpl:
                    raise SpecError(f"{spec.name}: {m.tensor} is addressed as {tmpl} and {b['maps'][e]}")
            for out, _rm in part.accs.values():
                b["entries"].add(("acc", out))
            b["seq"].add(part.seq)
            b["presence"] |= {t for t in part.own if t in free}
    bindings = []
    for c, (name, _g) in enumerate(low.slots):
        b = ents[c]
        if len(b["seq"]) != 1:
            raise SpecError(f"{spec.name}: part slot {name} has rows {sorted(map(str, b['seq']))} in different "
                            f"attribute combinations")
        entries = sorted(b["entries"], key=lambda e: (PREFIXES.index(e[0]), order[e[1]]))
        bindings.append(SlotBinding(name, entries, b["maps"], next(iter(b["seq"])),
                                    sorted(b["presence"], key=order.get)))
    renamed = {}
    for _a, key, hp in low.programs:
        for j, part in enumerate(hp.parts):
            bd = bindings[low.slot_of[(key, j)]]
            mapping = {m.slot: bd.slot(_entry(m.slot, m.tensor)) for m in part.maps}
            mapping.update({a: bd.slot(("acc", out)) for a, (out, _rm) in part.accs.items()})
            renamed[(key, j)] = rename_slots(part, mapping)
    return bindings, renamed


def _offsets(bd: SlotBinding, part: HeadPart) -> dict:
    """The key-dependent addressing of a (renamed) part: {entry: seq offset} of its row/table maps,
    {("cond", j): bound} of its row conditions."""
    out = {}
    for m in part.maps:
        if m.space in ("row", "table"):
            out[_entry(m.slot, m.tensor)] = m.offset
    for j, x in enumerate(part.conds):
        out[("cond", j)] = x
    return out


def addr_variant(bd: SlotBinding, offs: dict) -> int:
    """Index of the addressing variant of `bd` that agrees with `offs` on every entry both define (merging
    `offs` into it), or of a new one."""
    for k, v in enumerate(bd.variants):
        if all(v[e] == x for e, x in offs.items() if e in v):
            v.update(offs)
            return k
    bd.variants.append(dict(offs))
    return len(bd.variants) - 1


def addr_lines(bd: SlotBinding, variant: dict, acc_index: dict, fields: dict) -> list[str]:
    """The addressing function of one variant of a slot: its rows (0 when a free optional input it reads is
    absent), the GM tensor of every union slot with where row (b, s, n) is, its row conditions and the
    accumulator outputs of its acc slots. Offsets a variant leaves undefined are never used by the bodies
    that run with it (written as 0)."""
    lines = [f"p.seq = {_dim(bd.seq, fields)};"]
    if bd.presence:
        cond = " || ".join(f"!has_{t}" for t in bd.presence)
        lines += [f"if ({cond}) {{", "p.seq = 0;  // absent: no rows", "}"]
    for e in bd.entries:
        prefix, t = e
        j = _slot_index(bd.slot(e))
        if prefix == "acc":
            lines.append(f"p.acc[{j}] = {acc_index[t]};  // {t}")
            continue
        role, space, _dt, layout, extent = bd.maps[e]
        off = _dim(variant.get(e) or Lit(0), fields)
        if prefix in ("in", "out"):
            lines.append(f"p.{prefix}[{j}] = gm_{t};")
            lines.append(f"p.{prefix}Map[{j}] = HeadMap{{{_dim(extent, fields)}, {off}, "
                         f"{'true' if layout == 'bnsd' else 'false'}}};")
        elif prefix in ("sin", "sout"):
            lines.append(f"p.{'statIn' if prefix == 'sin' else 'statOut'}[{j}] = gm_{t};")
        elif prefix == "tab":
            lines.append(f"p.tab[{j}] = gm_{t};")
            lines.append(f"p.tabOff[{j}] = {off};")
        else:
            lines.append(f"p.col[{j}] = gm_{t};")
    for j in range(sum(1 for e in variant if e[0] == "cond")):
        lines.append(f"p.cond[{j}] = {_dim(variant[('cond', j)], fields)};")
    return lines


def addr_doc(bd: SlotBinding, variant: dict) -> str:
    """One line describing an addressing variant."""
    where = []
    for e in bd.entries:
        if e in variant and variant[e] != Lit(0):
            where.append(f"{e[1]} {'row s' if e[0] == 'tab' else 'at s'} + {variant[e]}")
    conds = [f"s < {variant[c]}" for c in sorted(k for k in variant if k[0] == "cond")]
    tail = "; ".join(x for x in (", ".join(where), ", ".join(f"RoPE rows {c}" for c in conds)) if x)
    return f"{bd.name}: rows [B, {bd.seq}, N]" + (f"; {tail}" if tail else "")


def use_masks(part: HeadPart) -> list[int]:
    """Bit j of column k: the part uses slot USE_MASKS[k] + j."""
    names = [m.slot for m in part.maps] + list(part.accs)
    out = []
    for prefix in USE_MASKS:
        mask = 0
        for n in names:
            m = re.fullmatch(prefix + r"(\d+)", n)
            if m:
                mask |= 1 << int(m.group(1))
        out.append(mask)
    return out


def accumulated_outputs(spec, low: Lowered) -> list[str]:
    """The column outputs some part accumulates (summed across cores), in spec order."""
    return [o.name for o in spec.outputs
            if any(o.name == out for _a, _k, hp in low.programs for p in hp.parts for out, _r in p.accs.values())]


def addressing_dims(bindings, renamed: dict) -> list[str]:
    """The dim symbols the addressing of the part slots prints: rows per slot, tensor extents, sequence offsets
    and row conditions of every part (opgen.tiling.headkernel.head_tiling adds the layout's)."""
    out: set = set()
    for bd in bindings:
        out |= as_dim(bd.seq).symbols()
        for _role, _space, _dt, _layout, extent in bd.maps.values():
            if extent is not None:
                out |= as_dim(extent).symbols()
    for part in renamed.values():
        for m in part.maps:
            if m.offset is not None:
                out |= as_dim(m.offset).symbols()
        for x in part.conds:
            out |= as_dim(x).symbols()
    return sorted(out)


def emit_head_kernel(spec, low: Lowered, counts, fields: dict, doc: str) -> dict[str, str]:
    """{path: text} of op_kernel/<op>.h and .cpp of the head-row lowering `low` of `spec`, for the HeadCounts its
    tiling planned (opgen.tiling.headkernel.spec_counts) and the tiling-data fields of its dims (`fields`,
    opgen.tiling.headkernel.dim_fields); `doc`: the tiling's one-line description. Raises SpecError (unsupported
    dims or dtypes)."""
    from opgen.codegen.env import template_env
    from opgen.names import spec_path

    loc = "opgen.tiling.headkernel.spec_counts"
    snake = op_snake(spec.name)
    order = [i.name for i in spec.inputs] + [o.name for o in spec.outputs]
    acc_outs = accumulated_outputs(spec, low)
    acc_index = {o: g for g, o in enumerate(acc_outs)}
    acc_round = {}
    for _a, _k, hp in low.programs:
        for p in hp.parts:
            for out, rm in p.accs.values():
                if acc_round.setdefault(out, rm) != rm:
                    raise SpecError(f"{spec.name}: output {out} is rounded with {acc_round[out]} and {rm}")

    bindings, renamed = bind_slots(spec, low)
    limit = {"in": counts.row_in, "out": counts.row_out, "sin": counts.stat_in, "sout": counts.stat_out,
             "tab": counts.tables, "col": counts.cols, "acc": counts.accs}
    for bd in bindings:   # parts are renumbered to their slot's binding: its slot indices must fit too
        for prefix, cap in limit.items():
            n = sum(1 for e in bd.entries if e[0] == prefix)
            if n > cap:
                raise SpecError(f"{loc}: part slot {bd.name} of {spec.name} binds {n} {prefix} tensors over its "
                                f"attribute combinations but the tiling plans for {cap} (raise it in COUNTS)")
    bodies: dict[str, int] = {}
    body_parts: list = []
    body_members: list = []   # every part each body serves (their spec lines are cited together)
    addr_ids: dict = {}
    perm_fams, sign_fams = [], []
    nslots = len(low.slots)
    rows_key: list = []
    masks = []
    gm_used: dict[str, str] = {}
    dvar = data_dtype(spec, low)
    for attrs, key, hp in low.programs:
        brow, arow, mask = [-1] * nslots, [-1] * nslots, 0
        for j, part0 in enumerate(hp.parts):
            _check_dtypes(spec, part0, dvar)
            slot = low.slot_of[(key, j)]
            part = renamed[(key, j)]
            bt = body_text(part)
            if bt not in bodies:
                bodies[bt] = len(body_parts)
                body_parts.append(part)
                body_members.append([])
            body_members[bodies[bt]].append(part)
            brow[slot] = bodies[bt]
            arow[slot] = (slot, addr_variant(bindings[slot], _offsets(bindings[slot], part)))
            for out, _rm in part.accs.values():
                mask |= 1 << acc_index[out]
            for kind, fam in part.lanes.values():
                fams = perm_fams if kind == "perm" else sign_fams
                if fam not in fams:
                    fams.append(fam)
        rows_key.append((attrs, key, brow, arow))
        masks.append(f"0x{mask:X}U")
    addr_list = []
    for c, bd in enumerate(bindings):
        for v, variant in enumerate(bd.variants):
            addr_ids[(c, v)] = len(addr_list)
            addr_list.append((addr_doc(bd, variant), addr_lines(bd, variant, acc_index, fields)))
        for e in bd.entries:
            if e[0] != "acc":
                gm_used[e[1]] = "float" if bd.maps[e][2] == "f32" else "T"
    body_rows, addr_rows = [], []
    for attrs, key, brow, arow in rows_key:
        comment = ", ".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in attrs.items())
        body_rows.append((f"{key}: {comment}", brow))
        addr_rows.append((f"{key}", [-1 if a == -1 else addr_ids[a] for a in arow]))
    nperm, nsign = counts.perms, counts.signs
    body_perms, body_signs = [], []
    for part in body_parts:
        perms = [perm_fams.index(f) for k, f in part.lanes.values() if k == "perm"]
        signs = [sign_fams.index(f) for k, f in part.lanes.values() if k == "sign"]
        body_perms.append(perms + [-1] * (nperm - len(perms)))
        body_signs.append(signs + [-1] * (nsign - len(signs)))

    gm = sorted(((n, c) for n, c in gm_used.items()), key=lambda t: order.index(t[0]))
    used = {n for n, _c in gm} | set(acc_outs)
    has = sorted({t for bd in bindings for t in bd.presence}, key=order.index)
    cmap = {"kIn": counts.row_in, "kOut": counts.row_out, "kStatIn": counts.stat_in, "kStatOut": counts.stat_out,
            "kTemps": max(counts.temps, 2), "kTab": counts.tables, "kCol": counts.cols, "kAcc": counts.accs,
            "kPerm": counts.perms, "kSign": counts.signs, "kCond": counts.conds, "kAccOutputs": counts.acc_outputs}
    docs = {"kIn": "head-row inputs of a part (T)", "kOut": "head-row outputs of a part (T)",
            "kStatIn": "fp32 per-row inputs", "kStatOut": "fp32 per-row outputs", "kTemps": "fp32 row temporaries",
            "kTab": "RoPE table rows", "kCol": "column rows of a part", "kAcc": "column accumulators of a part",
            "kPerm": "Gather offset tables", "kSign": "sign rows", "kCond": "row conditions of a part",
            "kAccOutputs": "column outputs summed across cores"}
    dvar = data_dtype(spec, low)
    dtype_keys, declared = [], []
    keys = [key for _a, key, _h in low.programs]
    for r, row in enumerate(spec.dtype_rows, start=1):
        dt = row[dvar]
        tks = [TilingKey(k, r, 1, "HEAD_ROWS") for k in keys]
        declared += tks
        dtype_keys.append((CTYPE[str(getattr(dt, "value", dt))], [tk.macro(spec) for tk in tks]))
    cls = f"{spec.name}Kernel"
    ctx = {
        "op": spec.name, "op_snake": snake, "spec_file": spec_path(spec), "cls": cls,
        "doc": doc, "struct": f"optiling::{spec.name}TilingData",
        "inputs": [i.name for i in spec.inputs], "outputs": [o.name for o in spec.outputs],
        "unused": [n for n in order if n not in used], "gm": gm, "has": has,
        "nparts": nslots, "part_names": [n for n, _g in low.slots], "nkeys": len(low.programs),
        "counts": [(k, v, docs[k]) for k, v in cmap.items()], "counts_map": cmap, "needs": head_needs(counts),
        "arr": {k: max(v, 1) for k, v in cmap.items()},
        "attr_doc": "attrKey = " + " + ".join(
            f"index({a.name})" + (f" * {r}" if r > 1 else "") for a, r in _radices(spec)),
        "body_rows": body_rows, "addr_rows": addr_rows, "acc_masks": masks,
        "acc_outputs": list(enumerate(acc_outs)), "acc_rounds": [acc_round[o] for o in acc_outs],
        "nbodies": len(body_parts), "nperm": nperm, "nsign": nsign, "body_perms": body_perms,
        "body_signs": body_signs, "body_uses": [use_masks(p) for p in body_parts],
        "perm_families": [(k, f, PERMS[f][0]) for k, f in enumerate(perm_fams)],
        "sign_families": [(k, f, SIGNS[f][0]) for k, f in enumerate(sign_fams)],
        "addr_funcs": [(k, doc, lines) for k, (doc, lines) in enumerate(addr_list)],
        "bodies": [(k, body_doc(p), body_lines(p, body_members[k])) for k, p in enumerate(body_parts)],
        "float_attrs": sorted({a for _a, _k, hp in low.programs for a in hp.attrs}),
        "dtype_keys": dtype_keys,
    }
    env = template_env()
    return {
        f"op_kernel/{snake}.h": env.get_template("op_kernel/head_kernel.h.j2").render(**ctx),
        f"op_kernel/{snake}.cpp": env.get_template("op_kernel/head_kernel.cpp.j2").render(**ctx),
        **emit_tiling_keys(spec, declared),
    }


def _radices(spec):
    out, r = [], 1
    for a in spec.static_attrs:
        out.append((a, r))
        r *= len(a.choices)
    return out


def data_dtype(spec, low) -> str:
    """The dtype variable of a head-row kernel's data (the C++ template parameter T of the kernel class): the dtype
    of the part tensors that are not per-row statistics, read off the lowered parts, which must be one dtype
    variable of the spec's table. Raises SpecError otherwise."""
    seen = sorted({m.dtype for _a, _k, hp in low.programs for part in hp.parts for m in part.maps
                   if m.space != "stat"})
    dvars = [c.name for c in spec.dtype_table]
    if len(seen) != 1 or seen[0] not in dvars:
        raise SpecError(f"{spec.name}: head-row kernel: its head rows, tables and columns have dtypes "
                        f"{', '.join(seen) or 'none'}; the kernel takes them in one dtype variable of the dtype table "
                        f"({', '.join(dvars) or 'none declared'})")
    return seen[0]


def _check_dtypes(spec, part: HeadPart, dvar: str) -> None:
    """Every per-row statistic of `part` is f32, every other tensor of dtype variable `dvar`."""
    for m in part.maps:
        want = "f32" if m.space == "stat" else dvar
        if m.dtype != want:
            raise SpecError(f"{spec.name}: head-row kernel: {m.space} tensor {m.tensor} has dtype {m.dtype}; the "
                            f"kernel expects {want}")


__all__ = ["Lowered", "data_dtype", "full_keys", "lower_spec", "check_presence_variants", "emit_head_kernel", "instr_lines",
           "body_lines", "addr_lines", "accumulated_outputs", "addressing_dims"]
