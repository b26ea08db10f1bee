"""The Kernel IR class of a head-row kernel (opgen.kernel.headrows), built when the tiling has planned it: the
tiling (opgen.tiling.headkernel.head_tiling) calls `head_class_ir` once it has the counts and the dims' tiling-data
fields; the dependency pass (`synchronise`, opgen.kernel.kir_sync) places its syncs; the printer
(opgen.codegen.headkernel) prints the finished class.

For every combination of the spec's static attributes the specialisation with all optional inputs present is
lowered to a head program; its parts are matched across combinations to *part slots* (parts whose part-sized
tensors overlap; slot order = spec order of those tensors), which fixes the kernel's row space. The class has:

* a *body* per distinct part computation (`opgen.kernel.headrows.body_text`: query and key with the same norm and
  RoPE share one): Kernel IR (opgen.kernel.headsched, `body_func`) built instruction by instruction from the part's
  row programs as instruction-table nodes, with the row conditions (`s < cond`: RoPE rows) as If / else;
* an *addressing* function per part slot and distinct set of offsets (`SlotBinding`): each slot binds the union
  of the GM tensors its parts touch over all combinations (parts are renumbered to that binding, `bind_slots`),
  says where row (b, s, n) of each is (the RowMaps' dim expressions over the tiling data) and which rows get RoPE;
  only the offsets differ between variants (concat_order);
* tables indexed by attrKey (opgen.dsl.keys.attr_key) selecting each slot's body and addressing, the lane families
  each body needs (Gather offsets, sign rows), and the column outputs summed across cores: Kernel-IR constant
  tables (kir.ConstTable) read by SetupPart, which with the addressing functions (Addr<k>: StructSet of the Part's
  fields) and Init is Kernel IR too, so the whole class runs on the Kernel-IR interpreter (`opgen check --engine
  kir`).

The static attributes are branched on at run time inside one class (compile time stays that of the distinct
bodies, 15 forward and 9 backward, not of 108 attribute combinations x 3 dtypes), while the tiling key (attrKey *
100 + dtypeKey * 10 + 1) keeps naming the combination. Optional-input presence is checked at run time (nullptr): a
part whose own optional tensors are absent is skipped.

Reference facts: docs/reference/ascendc.md §1.5 (TPipe/TQue/TBuf), §1.8 (DataCopyPad), §1.9 (count-form vector
calls, Gather, Cast round modes, ReduceSum), §1.6 (SyncAll); docs/reference/norm_rope_concat.md §4.5 (weight-gradient
reduction, done here in fixed core order).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from opgen.errors import SpecError
from opgen.ir.dims import Bin, Constraint, Lit, Sym, Variadic, as_dim, subst
from opgen.ir.locs import spec_doc
from opgen.kernel import headsched as hs
from opgen.kernel import kir
from opgen.kernel.headlower import Lowered, SlotBinding, _entry, accumulated_outputs, bind_slots, data_dtype
from opgen.kernel.headrows import HeadPart, body_text
from opgen.kernel.rowclass import instr_node

_BUF = {"w": "w_", "tab": "tab_", "col": "col_", "acc": "acc_", "perm": "perm_", "sign": "sign_"}


# ---------------------------------------------------------------- Kernel IR of the bodies
def _slot_index(slot: str) -> str:
    return re.fullmatch(r"[a-z]+(\d+)", slot).group(1)


def _node_operand(x: str) -> kir.Ref:
    """The Kernel-IR region of body operand `x` (w3 -> w_[3], tab0 -> tab_[0], ...). Raises SpecError."""
    m = re.fullmatch(r"(w|tab|col|acc|perm|sign)(\d+)", x)
    if not m:
        raise SpecError(f"head-row kernel: operand {x} has no UB buffer")
    return kir.Ref(_BUF[m.group(1)], slot=Lit(int(m.group(2))))


def instr_nodes(i, locs=None) -> list:
    """The Kernel-IR statements of one row-program instruction inside a body's row loop (`i`: row of the pass,
    headDim_ lanes; opgen.kernel.headsched): a vector instruction as a kir.Vec of its instruction-table entry
    (opgen.kernel.rowclass.instr_node: cast_in reads rowIn<slot>_ at row i, store writes rowOut<slot>_), a
    per-row statistic read / write as GetValue / SetValue of statIn<slot>_ / statStage<slot>_ at row i, RowSum as a
    Call bound to a float, a scalar expression as a float let; each cites `locs` (default: the instruction's own
    location; a body shared by several parts cites the instructions of all of them). Raises SpecError for another
    kind."""
    doc = spec_doc([i.loc] if locs is None else locs)
    k, row = i.kind, Bin("*", Sym("i"), Sym("dAlign_"))
    if k == "sload":
        return [kir.GetValue(i.dst, kir.Ref(f"statIn{_slot_index(i.gm)}_", Sym("i")), doc=doc)]
    if k == "sstore":
        return [kir.SetValue(kir.Ref(f"statStage{_slot_index(i.gm)}_", Sym("i")), kir.FRef(i.srcs[0]), doc=doc)]
    if k == "rsum":
        return [kir.Call("RowSum", (_node_operand(i.srcs[0]), Sym("headDim_")), result=i.dst, doc=doc)]
    row_in = kir.Ref(f"rowIn{_slot_index(i.gm)}_", row) if k == "cast_in" else None
    row_out = kir.Ref(f"rowOut{_slot_index(i.gm)}_", row) if k == "store" else None
    node = instr_node(i, _node_operand, Sym("headDim_"), row_in, row_out, doc=doc)
    if node is None:
        raise SpecError(f"head-row kernel: no Kernel IR for instruction {k}")
    return [node]


def uses_seq(part: HeadPart) -> bool:
    """Whether the body of `part` reads the sequence position of its rows (row conditions, RoPE table rows)."""
    return bool(part.conds) or any(c.startswith("tab") for case in part.cases for c in case.prog.consts)


def body_func(index: int, part: HeadPart, sharing=None) -> kir.Func:
    """The Kernel IR of body `index` serving `part` (opgen.kernel.headsched.body_func): the loop over the pass's
    rows, the row conditions as If / else, each case's table-row loads then its instructions (`instr_nodes`); no
    syncs (the kernel pass `synchronise` places them). `sharing`: every part this body serves (equal body_text;
    default just `part`): each statement cites the spec lines of the corresponding instruction of all of them."""
    members = list(sharing) if sharing else [part]
    member_cases = [{c.truth: c for c in m.cases} for m in members]
    cases = {c.truth: c for c in part.cases}

    def case(truth):
        out: list = []
        for c in cases[truth].prog.consts:
            if c.startswith("tab"):
                out += table_row(int(_slot_index(c)))
        for k, ins in enumerate(cases[truth].prog.instrs):
            out += instr_nodes(ins, [mc[truth].prog.instrs[k].loc for mc in member_cases])
        return out

    return hs.body_func(index, body_doc(part), hs.row_conditions(len(part.conds), case), uses_seq(part))


def table_row(j: int) -> list:
    """Table slot j holds the fp32 row of the row's sequence position seqPos (table row seqPos + p.tabOff[j]),
    reloaded (LoadRow) only when that row changes (tabRow<j>_: the row it holds, -1 at the start of a part)."""
    row = Sym(f"tabRow{j}")
    return [kir.Let(f"tabRow{j}", Bin("+", Sym("seqPos"), Sym(f"p.tabOff[{j}]"))),
            kir.If((Constraint("!=", row, Sym(f"tabRow{j}_")),), (
                kir.Call("LoadRow", (kir.Ref("tab_", slot=Lit(j)),
                                     kir.GmView(f"p.tab[{j}]", Bin("*", row, Sym("headDim_"))), Sym("headDim_")),
                         targs=("T",)),
                kir.Assign(f"tabRow{j}_", row)), doc=f"table slot {j}: the row of this sequence position")]


def body_doc(part: HeadPart) -> str:
    """One line describing a body: its slots, conditions and lane families."""
    ins = [m.slot for m in part.maps if m.role == "in"]
    outs = [m.slot for m in part.maps if m.role == "out"] + list(part.accs)
    lanes = ", ".join(f"{k} {f}" for k, f in part.lanes.values())
    conds = f"{len(part.conds)} row condition(s), " if part.conds else ""
    temps = max(c.prog.row_temps for c in part.cases)
    return (f"reads {', '.join(ins) or '-'}; writes {', '.join(outs) or '-'}; {conds}{temps} fp32 temporaries"
            + (f"; lanes: {lanes}" if lanes else ""))


USE_MASKS = ("in", "out", "sin", "sout", "col", "acc")
"""The slot kinds whose use a body reports to the generic copy/load code (kBodyUse columns)."""


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


def _dim_ir(e, fields: dict):
    """Dim expression `e` over the spec's dims as a Kernel-IR expression over their tiling-data fields (`fields`:
    {dim: field}). Raises SpecError for a dim without a field."""
    if isinstance(e, Variadic):
        raise SpecError(f"head-row kernel: variadic dims *{e.name} are not supported")
    e = as_dim(e)
    missing = sorted(n for n in e.symbols() if n not in fields)
    if missing:
        raise SpecError(f"head-row kernel: dim {missing[0]} has no tiling-data field "
                        "(opgen.tiling.headkernel.dim_fields)")
    return subst(e, {n: Sym(f) for n, f in fields.items()})


def addr_nodes(bd: SlotBinding, variant: dict, acc_index: dict, fields: dict) -> tuple:
    """The addressing of one variant of a slot as Kernel-IR statements on the struct parameter p (StructSet): its
    rows (0 when a free optional input it reads is absent: has_<input> false), the GM tensor of every union slot
    with where row (b, s, n) is, its row conditions and the accumulator outputs of its acc slots. Offsets a variant
    leaves undefined are never used by the bodies that run with it (set to 0)."""
    seq = _dim_ir(bd.seq, fields)
    if bd.presence:
        seq = kir.Select(tuple(Constraint("!=", Sym(f"has_{t}"), Lit(0)) for t in bd.presence), seq, Lit(0))
    out: list = [kir.StructSet("p.seq", seq, doc="no rows when an optional input it reads is absent"
                               if bd.presence else "")]
    for e in bd.entries:
        prefix, t = e
        j = _slot_index(bd.slot(e))
        if prefix == "acc":
            out.append(kir.StructSet(f"p.acc[{j}]", Lit(acc_index[t]), doc=t))
            continue
        role, space, _dt, layout, extent = bd.maps[e]
        off = _dim_ir(variant.get(e) or Lit(0), fields)
        gm = kir.GmView(f"gm_{t}")
        if prefix in ("in", "out"):
            out += [kir.StructSet(f"p.{prefix}[{j}]", gm),
                    kir.StructSet(f"p.{prefix}Extent[{j}]", _dim_ir(extent, fields)),
                    kir.StructSet(f"p.{prefix}Offset[{j}]", off),
                    kir.StructSet(f"p.{prefix}Bnsd[{j}]", Lit(1 if layout == "bnsd" else 0))]
        elif prefix in ("sin", "sout"):
            out.append(kir.StructSet(f"p.{'statIn' if prefix == 'sin' else 'statOut'}[{j}]", gm))
        elif prefix == "tab":
            out += [kir.StructSet(f"p.tab[{j}]", gm), kir.StructSet(f"p.tabOff[{j}]", off)]
        else:
            out.append(kir.StructSet(f"p.col[{j}]", gm))
    for j in range(sum(1 for e in variant if e[0] == "cond")):
        out.append(kir.StructSet(f"p.cond[{j}]", _dim_ir(variant[("cond", j)], fields)))
    return tuple(out)


def setup_part(n_addr: int, counts: dict) -> kir.Func:
    """SetupPart(j, p): the part in slot j for this attribute key (table kAddr: its addressing variant, -1 for no
    part: returns 0), its addressing (Addr<k>(p)), its body (kBody) and the slots the body uses (bit s of kBodyUse's
    column: slot s of in, out, statIn, statOut, col, acc), the lane families it reads (kBodyPerm / kBodySign);
    returns 1."""
    key, j, body = Sym("attrKey_"), Sym("j"), Sym("p.body")
    out: list = [kir.Let("addr", kir.TableAt("kAddr", (key, j))),
                 kir.If((Constraint("<", Sym("addr"), Lit(0)),), (kir.Return(Lit(0)),))]
    out += [kir.If((Constraint("==", Sym("addr"), Lit(k)),), (kir.Call(f"Addr{k}", (Sym("p"),)),))
            for k in range(n_addr)]
    out.append(kir.StructSet("p.body", kir.TableAt("kBody", (key, j))))
    uses: list = []
    for col, (field, count) in enumerate((("useIn", "kIn"), ("useOut", "kOut"), ("useStatIn", "kStatIn"),
                                          ("useStatOut", "kStatOut"), ("useCol", "kCol"), ("useAcc", "kAcc"))):
        mask = kir.TableAt("kBodyUse", (body, Lit(col)))
        uses += [kir.StructSet(f"p.{field}[{b}]", Bin("%", mask if b == 0 else Bin("//", mask, Lit(1 << b)), Lit(2)))
                 for b in range(counts.get(count, 0))]
    if uses:
        out.append(kir.If((Constraint(">=", body, Lit(0)),), tuple(uses), doc="the slots the body uses"))
    for field, table, count in (("permWant", "kBodyPerm", "kPerm"), ("signWant", "kBodySign", "kSign")):
        out += [kir.StructSet(f"p.{field}[{ln}]", kir.Select(Constraint("<", body, Lit(0)), Lit(-1),
                                                             kir.TableAt(table, (body, Lit(ln)))))
                for ln in range(counts.get(count, 0))]
    return kir.Func("SetupPart", (kir.Param("j"), kir.Param("p", "struct", hs.PART)), tuple(out + [kir.Return(Lit(1))]),
                    ret="int64_t", doc="The part in slot j for this attribute key (0: none); its rows, GM tensors "
                                       "and body.")


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


@dataclass
class HeadClass:
    """The head kernel class of a spec and the facts its printer needs (opgen.codegen.headkernel).

    sched: the kir.KernelClass (verified; without syncs until the kernel pass `synchronise` replaces it with the
    placed one). order: the spec's inputs then outputs. acc_outputs / acc_rounds: the column outputs summed across
    cores and their rounding. body_rows / addr_rows: per attribute key ("key: attrs" comment, the body / addressing
    index of each part slot, -1 none). acc_masks: per key, bit g set when accumulated output g is written. gm:
    [(used GM tensor, its element type)], used: the names the kernel reads or writes, has: the optional inputs whose
    presence is checked. part_names: the part slots' names. counts: {kIn ...: how many of each per part}. body_uses
    / body_perms / body_signs: per body, the slots it uses (USE_MASKS bit masks) and the lane family of each lane
    slot (-1 none). float_attrs: the float attributes the bodies read. setup_funcs / body_funcs: the method names of
    the part set-up (SetupPart, Addr<k>) and of the bodies. keys: the attribute keys, in lowering order. dvar: the
    data's dtype variable. needs: the staging buffers it allocates (opgen.tiling.headkernel.head_needs)."""

    sched: kir.KernelClass
    order: list
    acc_outputs: list
    acc_rounds: list
    body_rows: list
    addr_rows: list
    acc_masks: list
    gm: list
    used: set
    has: list
    part_names: list
    counts: dict
    body_uses: list
    nperm: int
    nsign: int
    body_perms: list
    body_signs: list
    float_attrs: list
    setup_funcs: list
    body_funcs: list
    keys: list
    dvar: str
    needs: dict


def head_class_ir(spec, low: Lowered, counts, fields: dict, needs: dict) -> HeadClass:
    """The HeadClass of head-row lowering `low` of `spec` for the HeadCounts its tiling planned (`counts`,
    opgen.tiling.headkernel.spec_counts), the tiling-data fields of its dims (`fields`, {dim: field}) and the
    staging buffers it allocates (`needs`, opgen.tiling.headkernel.head_needs). Raises SpecError (a part slot
    over the planned counts, an accumulated output rounded two ways, a dtype the kernel does not take)."""
    loc = "opgen.tiling.headkernel.spec_counts"
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
    masks, mask_ints = [], []
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
        mask_ints.append(mask)
    addr_list = []
    for c, bd in enumerate(bindings):
        for v, variant in enumerate(bd.variants):
            addr_ids[(c, v)] = len(addr_list)
            addr_list.append((addr_doc(bd, variant), addr_nodes(bd, variant, acc_index, fields)))
        for e in bd.entries:
            if e[0] != "acc":
                gm_used[e[1]] = "float" if bd.maps[e][2] == "f32" else "T"
    body_rows, addr_rows = [], []
    for attrs, key, brow, arow in rows_key:
        comment = ", ".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in attrs.items())
        body_rows.append((f"{key}: {comment}", brow))
        addr_rows.append((f"{key}", [-1 if a == -1 else addr_ids[a] for a in arow]))
    nperm, nsign = counts.perms, counts.signs
    body_perms, body_signs = [], []   # per body and lane slot: the family id it reads (-1: none)
    for part in body_parts:
        perms, signs = [-1] * nperm, [-1] * nsign
        for c, (kind, f) in part.lanes.items():
            if kind == "perm":
                perms[int(_slot_index(c))] = perm_fams.index(f)
            else:
                signs[int(_slot_index(c))] = sign_fams.index(f)
        body_perms.append(perms)
        body_signs.append(signs)

    gm = sorted(((n, c) for n, c in gm_used.items()), key=lambda t: order.index(t[0]))
    used = {n for n, _c in gm} | set(acc_outs)
    has = sorted({t for bd in bindings for t in bd.presence}, key=order.index)
    cmap = {"kIn": counts.row_in, "kOut": counts.row_out, "kStatIn": counts.stat_in, "kStatOut": counts.stat_out,
            "kTemps": max(counts.temps, 2), "kTab": counts.tables, "kCol": counts.cols, "kAcc": counts.accs,
            "kPerm": counts.perms, "kSign": counts.signs, "kCond": counts.conds, "kAccOutputs": counts.acc_outputs}
    cls = f"{spec.name}Kernel"
    body_funcs = [body_func(k, p, body_members[k]) for k, p in enumerate(body_parts)]
    # the attribute tables (printed by the skeleton from the same lists) and the part selection reading them
    nk, nb = len(low.programs), len(body_parts)
    radix, r = [], 1
    for a in spec.static_attrs:
        radix.append(f"index({a.name})" + (f" * {r}" if r > 1 else ""))
        r *= len(a.choices)
    keys_doc = "attrKey = " + " + ".join(radix) if radix else "attrKey = 0"
    dims = ("kAttrKeys", "kParts")
    tables = [kir.ConstTable("kBody", "int8_t", (nk, nslots), tuple(x for _c, r in body_rows for x in r),
                             doc=f"Per attribute key ({keys_doc}): the compute body of each part slot (-1: no part).",
                             row_docs=tuple(c for c, _r in body_rows), dim_names=dims),
              kir.ConstTable("kAddr", "int8_t", (nk, nslots), tuple(x for _c, r in addr_rows for x in r),
                             doc="Per attribute key: the row addressing variant of each part slot (-1: no part).",
                             row_docs=tuple(c for c, _r in addr_rows), dim_names=dims),
              kir.ConstTable("kBodyUse", "uint8_t", (nb, len(USE_MASKS)),
                             tuple(x for p in body_parts for x in use_masks(p)),
                             doc="Per body: the slots it uses (bit j: slot j of in, out, statIn, statOut, col, acc).")]
    if acc_outs:
        tables.append(kir.ConstTable("kAccMask", "uint32_t", (nk,), tuple(mask_ints), dim_names=dims[:1],
                                     doc="Per attribute key: the column outputs summed across cores (bit g: "
                                         "accumulator output g)."))
    if nperm:
        tables.append(kir.ConstTable("kBodyPerm", "int8_t", (nb, nperm), tuple(x for r in body_perms for x in r),
                                     doc="Per body and Gather offset table slot: the lane permutation family it "
                                         "reads (-1: none)."))
    if nsign:
        tables.append(kir.ConstTable("kBodySign", "int8_t", (nb, nsign), tuple(x for r in body_signs for x in r),
                                     doc="Per body and sign row slot: the sign family it reads (-1: none)."))
    consts = ((("kParts", nslots, "part slots in row-space order: " + ", ".join(n for n, _g in low.slots)),
               ("kAttrKeys", nk, "attribute keys"))
              + tuple((k, v, hs.COUNT_DOCS[k]) for k, v in cmap.items()))
    part_funcs = [setup_part(len(addr_list), cmap)] + [
        kir.Func(f"Addr{k}", (kir.Param("p", "struct", hs.PART),), body, doc=doc)
        for k, (doc, body) in enumerate(addr_list)]
    hsched = hs.HeadSchedule(
        counts={k: v for k, v in cmap.items() if k in hs.COUNTS}, bodies=tuple(body_funcs),
        body_uses_p=tuple(uses_seq(p) for p in body_parts), accs=tuple((o, acc_round[o]) for o in acc_outs),
        lanes=bool(nperm + nsign), needs=needs,
        float_attrs=tuple(sorted({a for _a, _k, hp in low.programs for a in hp.attrs})), gms=tuple(gm),
        has=tuple(has), args=tuple(order), nparts=nslots,
        body_lanes=tuple(tuple((kind, int(_slot_index(c)), (perm_fams if kind == "perm" else sign_fams).index(f), f)
                               for c, (kind, f) in sorted(p.lanes.items())) for p in body_parts),
        part_funcs=tuple(part_funcs), tables=tuple(tables), dim_fields=tuple(sorted(set(fields.values()))),
        consts=consts, tiling_struct=f"optiling::{spec.name}TilingData")
    sched = kir.verify(hs.head_class(cls, hsched))
    return HeadClass(
        sched=sched, order=order, acc_outputs=acc_outs, acc_rounds=[acc_round[o] for o in acc_outs],
        body_rows=body_rows, addr_rows=addr_rows, acc_masks=masks, gm=gm, used=used, has=has,
        part_names=[n for n, _g in low.slots], counts=cmap, body_uses=[use_masks(p) for p in body_parts],
        nperm=nperm, nsign=nsign, body_perms=body_perms, body_signs=body_signs,
        float_attrs=sorted({a for _a, _k, hp in low.programs for a in hp.attrs}),
        setup_funcs=[f.name for f in part_funcs], body_funcs=[f.name for f in body_funcs],
        keys=[key for _a, key, _h in low.programs], dvar=dvar, needs=dict(needs))


def _check_dtypes(spec, part: HeadPart, dvar: str) -> None:
    """Every per-row statistic of `part` is f32, every other tensor of dtype variable `dvar`."""
    for m in part.maps:
        want = "f32" if m.space == "stat" else dvar
        if m.dtype != want:
            raise SpecError(f"{spec.name}: head-row kernel: {m.space} tensor {m.tensor} has dtype {m.dtype}; the "
                            f"kernel expects {want}")


__all__ = ["HeadClass", "head_class_ir", "instr_nodes", "body_func", "table_row", "addr_nodes", "setup_part",
           "use_masks", "USE_MASKS"]
