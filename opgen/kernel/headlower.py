"""Head-row lowering of a whole spec (docs/design.md "Kernel families", head rows): every static attribute
combination lowered to a HeadProgram (opgen.kernel.headrows), the part slots the programs share, the proof that
the all-present program serves every presence combination, and the binding of slots to GM tensors. The kernel
printer (opgen.codegen.headkernel) and the tiling (opgen.tiling.headkernel) read what this builds.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

from opgen.dsl.spec import CHECK_CONTRACT
from opgen.dsl.keys import SpecKey, attr_key
from opgen.errors import SpecError
from opgen.ir.dims import Lit, Sym, as_dim, subst
from opgen.kernel.headrows import HeadPart, lower_heads, part_text, rename_slots
from opgen.passes.pipeline import optimize


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
    names = [a.name for a in spec.static_attrs]
    opts = [i for i in spec.inputs if i.optional]
    multi = [i for i in spec.inputs if len(i.shapes) > 1]
    out, slow = [], []
    for st in itertools.product(*[a.choices for a in spec.static_attrs]):
        attrs = dict(zip(names, st))
        present = {i.name: True for i in spec.inputs if not i.optional or i.when is None}
        for i in opts:
            if i.when is not None:
                present[i.name] = bool(spec._call_user(i.when, i.loc, f"when= of input {i.name}", attrs, present,
                                                           contract=CHECK_CONTRACT["when"]))
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


PREFIXES = ("in", "sin", "tab", "col", "out", "sout", "acc")
"""Slot prefixes in binding order (opgen.kernel.headrows.ROLE_PREFIX)."""
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
