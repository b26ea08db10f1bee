"""The rows family's tiling-stage parts (docs/design.md "Packages flow one way"), installed into
opgen.kernel.rows.RowsFamily when this module is imported (opgen/tiling/__init__.py imports it):

    counts   a parts lowering's HeadCounts (opgen.tiling.headkernel.spec_counts; a rows lowering's RowCounts are
             the kernel stage's, opgen.kernel.rowcounts)
    tile     `rows_tiling` (one anchor domain: opgen.tiling.rowkernel's ROW_SPLIT / COL_SPLIT / COL_STREAM program)
             or opgen.tiling.headkernel.head_tiling (parts)

Building the tiling also builds each variant's Kernel IR class (opgen.kernel.rowclass.class_ir): the class reads
the strategies the tiling program decides. Units: elements unless a name ends in Bytes.
"""

from __future__ import annotations

from opgen.dsl.keys import attr_key, form_key_count
from opgen.ir.dims import Lit
from opgen.kernel import rowprog
from opgen.kernel.family import Tiling
from opgen.kernel.rowclass import DimFields, class_ir
from opgen.kernel.rowguard import GuardName
from opgen.kernel.rowlayout import RowLayout, Unsupported
from opgen.kernel.rowpresence import cover
from opgen.kernel.rows import RowsFamily, variants_of
from opgen.kernel.rowsched import queue_overlap
from opgen.tiling.headkernel import head_tiling, spec_counts
from opgen.tiling.rowkernel import chunk_prefetch, col_prefetch, chunkable, row_pool_bound, program, row_resident, streamable, with_streaming


def rows_tiling(spec, lowered, counts):
    """The Tiling of a rows kernel: opgen.tiling.rowkernel's program for `counts`, its inputs read from the layout's
    extents, the dtype variables, the runtime attributes the programs use (a float attribute's IEEE-754 bits; an int
    attribute's value rounded once to fp32, its bits: the rows kernel reads integers as fp32, exact below 2^24, docs/design.md
    "Rows family: integer attributes") and the dim fields of the views; builds each variant's Kernel IR class into
    lowered.extra["variants"]. Raises Unsupported for a runtime attribute the kernel reads that is neither a float
    nor an int, SpecError when a buffer plan cannot be proven to fit."""
    lay = lowered.layout
    variants = variants_of(spec, lowered)
    dims = DimFields(lay)
    layouts = lowered.extra.get("layouts")
    if layouts:              # specialisations on several row domains: one DimFields per domain, one set of fields
        per = {}
        for v in variants:
            key = next(k for k, p in lowered.programs.items() if p is v.prog)
            v.dims = per.setdefault(id(layouts[key]), DimFields(layouts[key], dims))
    for v in variants:       # its Kernel IR class; registers every dim the addressing reads, in emission order
        v.chunk = chunkable(counts)   # the tiling may pick ROW_CHUNK: ColSplit takes this core's rows, whole rows
        v.prefetch = chunk_prefetch(counts)   # ... and prefetches its items where the event-id pool allows
        v.col_prefetch = col_prefetch(counts)   # a row-reduction program's COL_STREAM chunks too
        v.pool_bound = row_pool_bound(counts)   # ROW_SPLIT: one buffer per row queue where two pass the pool
        v.resident = row_resident(counts)   # ... or, for a row-reduction program, RowChunk with its inputs resident
        v.ctx = class_ir(spec, v, v.dims or dims)
    attrs = sorted({a for v in variants for i in rowprog.all_instrs(v.prog) for a in rowprog.attr_names(i.arg)})
    decl = {a.name: a for a in spec.attrs}
    for a in attrs:
        if decl[a].type not in (float, int):
            raise Unsupported(a, decl[a].loc if hasattr(decl[a], "loc") else "",
                              f"runtime attribute {a} of type {decl[a].type.__name__} inside the kernel; the rows "
                              f"family takes float and int attributes")
    ints = frozenset(a for a in attrs if decl[a].type is int)
    dvars = tuple(c.name for c in spec.dtype_table)
    extra = tuple((n, f"{doc}: {e}") for n, e, doc in dims.items())
    # shape forms lowering to different classes: the form key is a digit of the tiling key (one class per key)
    forms = form_key_count(spec) if lowered.extra.get("form_key") else 1
    doc = f"Tiling of {spec.name}: rows family, {lay.text()}; ROW_SPLIT / COL_SPLIT."
    overlap = _overlap(variants)
    # ROW_CHUNK's per-chunk column rows (a resident program's only): their re-reads priced when their inputs are present
    col_presence = _col_load_presences(spec, lowered) if row_resident(counts) and counts.col else ()
    col_guards = _col_load_guards(lowered) if row_resident(counts) and counts.col else ()
    attrs = sorted(set(attrs) | {g.attr for g, _lit in col_guards})
    prog, plans = program(spec.name, counts, dvars, tuple(attrs), extra, overlap=overlap, forms=forms,
                          col_presence=bool(col_presence), int_attrs=ints, col_guards=col_guards)
    inputs = {"rows": lay.rows_extent(), "seq": lay.seq_extent(), "batch": lay.batch_extent(),
              "hidden": lay.hidden_extent(), "dtypeKey": ("dtype_key",), "attrKey": ("attr_key",),
              "coreNum": ("platform", "coreNum"), "ubBytes": ("platform", "ubBytes")}
    if layouts:   # the domain's extents of the specialisation that runs, chosen by its attrKey
        names = [a.name for a in spec.static_attrs]
        by_ak = {}
        for key, kl in layouts.items():
            by_ak.setdefault(attr_key(spec, dict(zip(names, key.static))), kl)
        doc = (f"Tiling of {spec.name}: rows family, by attrKey: " +
               "; ".join(f"{ak}: {kl.text()}" for ak, kl in sorted(by_ak.items())) + "; ROW_SPLIT / COL_SPLIT.")
        for name, ext in (("rows", RowLayout.rows_extent), ("seq", RowLayout.seq_extent),
                          ("batch", RowLayout.batch_extent), ("hidden", RowLayout.hidden_extent)):
            picks = tuple((ak, ext(kl)) for ak, kl in sorted(by_ak.items()))
            if len({str(e) for _ak, e in picks}) > 1:
                inputs[name] = ("by_attr_key", picks)
    if col_presence:
        inputs["colLoadsAbsent"] = ("presence", col_presence)
    for v in dvars:
        inputs[f"{v}Bytes"] = ("bytes", v)
    for a in attrs:   # an int attribute as its value rounded once to fp32, as the rows kernel reads integers
        inputs[f"{a}Attr"] = ("attr_bits", a) if decl[a].type is float else ("attr_int_bits", a)
    for n, e, _doc in dims.items():
        inputs[f"{n}Dim"] = e
    if forms > 1:
        inputs["formKey"] = ("form_key",)
    if layouts:   # a field only some domains address is read for their attrKeys only (0 for the others)
        users = {}
        for v in variants:
            for ak, _fkey, _cond in v.serves:
                users.setdefault(ak, set()).update(v.dims.used)
        for n, e, _doc in dims.items():
            if not all(n in used for used in users.values()):
                inputs[f"{n}Dim"] = ("by_attr_key", tuple((ak, e if n in used else Lit(0))
                                                          for ak, used in sorted(users.items())))
    if streamable(counts):
        prog, plans, proven = with_streaming(spec, inputs, prog, plans, lambda: program(
            spec.name, counts, dvars, tuple(attrs), extra, stream=True, overlap=overlap, forms=forms,
            col_presence=bool(col_presence), int_attrs=ints, col_guards=col_guards))
        if proven is None:   # the spec's rows can outgrow UB: every class has COL_STREAM
            doc = doc.removesuffix("; ROW_SPLIT / COL_SPLIT.") + "; ROW_SPLIT / COL_SPLIT / COL_STREAM."
            for v in variants:
                v.stream = True
                v.ctx = class_ir(spec, v, v.dims or dims)   # with its ColStream method
    else:
        proven = None
    for v in variants:
        v.kclass = v.ctx["row_split_ir"]
    lowered.extra.update(variants=variants, dims=dims)
    return Tiling(prog, inputs, plans, doc, proven=proven)


def _col_load_presences(spec, lowered) -> tuple:
    """The presences (one bool per optional input, spec order: opgen.tiling.emit.presence_cpp) under which no row
    program loads a column row from GM, when every input its column rows load from is optional (a weight): the
    tiling then prices ROW_CHUNK's re-reads of them (opgen.tiling.rowkernel `_resident_or_slice`) except under
    those (a presence not known, as opgen.tiling.emit.evaluate without one, counts them). () when no column row is
    loaded, or one is loaded from a required input (always priced)."""
    from itertools import product

    loaded = {t.name for p in lowered.programs.values() for t in p.gm if t.space == "col" and t.role == "in"}
    opts = [i.name for i in spec.inputs if i.optional]
    if not loaded or not loaded <= set(opts) or len(opts) > 8:
        return ()
    return tuple(pr for pr in product((False, True), repeat=len(opts))
                 if not any(on and n in loaded for n, on in zip(opts, pr)))


def _col_load_guards(lowered) -> tuple:
    """((rowguard.GuardName, literal), ...): the runtime guards (opgen.kernel.rowguard) every program's loads of
    column rows from GM run under, when each program loads them under one cube of its presence literals (the
    presence part is `_col_load_presences`'): the tiling prices ROW_CHUNK's re-reads of them only while those guards
    have those values (CrossEntropyLoss's weight, read per row by the label-smoothing sum only: label_smoothing != 0).
    () when no program has guards, or the programs disagree, or a load runs under every guard value."""
    got = None
    for p in {id(p): p for p in lowered.programs.values()}.values():
        names = tuple(p.presence)
        if not any(isinstance(n, GuardName) for n in names):
            return ()
        col_in = {t.name for t in p.gm if t.space == "col" and t.role == "in"}
        loads = [i for i in p.instrs if i.kind == "load" and i.gm in col_in]
        if not loads or any(not i.when for i in loads):
            return ()
        cubes = cover(tuple(sorted({w for i in loads for w in i.when})), len(names))
        if len(cubes) != 1:
            return ()
        lits = tuple((n, lit) for n, lit in zip(names, cubes[0]) if isinstance(n, GuardName) and lit is not None)
        if got is not None and lits != got:
            return ()
        got = lits
    return got or ()


def _overlap(variants):
    """(a, b, s) of ROW_SPLIT's row queues over the variants' Kernel-IR classes (opgen.kernel.rowsched.queue_overlap):
    the latest input free, the earliest output allocation and the latest scalar wait of any variant; None when no
    class has a Compute."""
    got = []
    for v in variants:
        kc = v.ctx.get("row_split_ir") if isinstance(v.ctx, dict) else None
        comp = next((m for m in kc.methods if m.name == "Compute"), None) if kc is not None else None
        if comp is not None:
            got.append(queue_overlap(comp, kc.methods))
    if not got:
        return None
    return max(g[0] for g in got), min(g[1] for g in got), max(g[2] for g in got)


def _tile(spec, lowered, counts) -> Tiling:
    """RowsFamily.tile: rows_tiling for a RowLayout, head_tiling for a parts layout. Raises Unsupported."""
    if isinstance(lowered.layout, RowLayout):
        return rows_tiling(spec, lowered, counts)
    return head_tiling(spec, lowered, counts)


def _parts_counts(lowered):
    """RowsFamily.counts of a parts lowering: the HeadCounts of its head-row programs."""
    return spec_counts(lowered.extra["heads"])


RowsFamily.install(counts=_parts_counts, tile=_tile)
