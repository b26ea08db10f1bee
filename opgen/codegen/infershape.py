"""Emitter of op_host/<op>_infershape.cpp: InferShape and InferDataType (docs/reference/ascendc.md §2.6).

Shapes are derived generically from the spec's symbolic output shapes:
- an output declared `like=<input>` copies that input's shape (`*out = *in`);
- otherwise each entry of the output shape is printed as C++ (opgen.ir.dimprint.dim_cpp) over dim
  variables read from the input shapes (opgen.dsl.dimsource.read_dim). A dim symbol is read from the first
  input that carries it as a plain entry (required inputs first; among them single-form ones first), else as
  an affine entry (2 * H), else in a product whose other dims are read first (H = N1 * D gives D = H / N1); from
  an optional input, or in a form of a form-picked input that lacks it, it falls back to the next source, then
  to the dim's `absent` value (Seq = 0 without encoder_query), then to an attribute bound to the dim (`dim=`).
  A variadic group is copied from an input holding it.
Dtypes: an output typed by a dtype variable takes the dtype of the first input typed by the same variable
(required before optional; an absent optional falls through to the next), else a fixed fallback
(DT_FLOAT when the table allows float32 for the variable); a fixed output dtype is set as is.
"""

from __future__ import annotations


from opgen.ir.dimprint import dim_cpp
from opgen.dsl.dimsource import attr_dim_min, group_location, read_dim, shared_dims
from opgen.dsl.spec import choice_text
from opgen.codegen.env import render
from opgen.codegen.model import OpModel
from opgen.names import c_printf, c_string, upper_camel
from opgen.errors import SpecError
from opgen.ir.dims import Variadic, as_dim, shape_str
from opgen.ir.dtypes import DType, DTypeVar
from opgen.tiling.emit import rank_cond_cpp
from opgen.dsl.keys import LIST_INT


def _shape_var(p) -> str:
    c = p.derived
    return f"{c[0].lower()}{c[1:]}Shape" if not c.endswith("Optional") else f"{c[:-len('Optional')]}Shape"


def _getter(m: OpModel, p, kind: str) -> str:
    """Context accessor of input p: kind "Shape" or "DataType" (§2.6: index = IR index)."""
    if p.optional:
        return f"GetOptionalInput{kind}({p.index})"
    compute_index_ok = all(not q.optional for q in m.inputs[:p.index])
    return f"GetInput{kind}({p.index})" if compute_index_ok else f"GetRequiredInput{kind}({p.index})"


def _positions(shape):
    """(variadic position or None, number of entries after it)."""
    var = [k for k, d in enumerate(shape) if isinstance(d, Variadic)]
    if not var:
        return None, 0
    return var[0], len(shape) - var[0] - 1


def rank_bounds(shapes, variadics: dict) -> tuple[int, int | None]:
    """(minimum, maximum) rank a tensor may have under its spec shape forms `shapes`, dims counted; `variadics`
    {name: VariadicDecl} (spec.variadics): a variadic group adds its [min_rank, max_rank] dims (an undeclared one
    0..unbounded, maximum None). The emitted InferShape and TilingFunc reject a shape outside these bounds before
    they index a dim (GetDim(GetDimNum() - k) would underflow on a lower rank)."""
    los, his = [], []
    for s in shapes:
        vpos, _ = _positions(s)
        fixed = len(s) - (1 if vpos is not None else 0)
        decl = variadics.get(s[vpos].name) if vpos is not None else None
        los.append(fixed + (decl.min_rank if decl is not None else 0))
        his.append(fixed if vpos is None else (fixed + decl.max_rank if decl is not None else None))
    return min(los), (None if None in his else max(his))


def _axis_expr(shape, pos, shp: str) -> str | None:
    """C++ index of entry `pos` of `shape` in a concrete shape `shp` (None if not expressible)."""
    vpos, _ = _positions(shape)
    if vpos is None or pos < vpos:
        return str(pos)
    back = len(shape) - pos
    return f"{shp}->GetDimNum() - {back}"


def _group_source(m: OpModel, name: str, pick):
    loc = group_location(m.spec, name)
    if loc is None:
        raise SpecError(f"{m.spec.file}: variadic dims {name} are not carried by a single-form input or an input "
                        f"whose shape an attribute picks; InferShape cannot copy them")
    begin, after = loc.bounds(pick)
    return m.inputs[loc.index], begin, after


def same_dim_places(spec, access, present, keep=lambda index: True) -> list[dict]:
    """Template data of the SameDim checks (templates/op_host/_same_dim.j2): per dim carried at two or more places
    of the kept inputs (opgen.dsl.dimsource.shared_dims; twice in one input: its places named with the axis), {"dim", "places": [{"input", "extent"}]}, each extent the C++ reading the
    dim from input number i's shape through `access(i)` ("xShape->" / "xShape.", then GetDim), an optional input's
    guarded by `present(i)` and -1 when absent (SameDim skips a negative extent). InferShape and the TilingFunc
    print their shapes differently; the places are the same."""
    out = []
    for name, places in shared_dims(spec):
        places = [loc for loc in places if keep(loc.index)]
        if len(places) < 2:
            continue
        items = []
        twice = {loc.index for loc in places if sum(p.index == loc.index for p in places) > 1}
        for loc in places:
            a, i = access(loc.index), spec.inputs[loc.index]
            e = loc.read(lambda where, k: f"{a}GetDim({k})" if where == "front" else
                         f"{a}GetDim({a}GetDimNum() - {k})")
            # an input carrying the dim twice ([N, N]) is told apart by the axis: "x dim 0", "x dim -1"
            label = i.name if loc.index not in twice else f"{i.name} dim {loc.k if loc.where == 'front' else -loc.k}"
            items.append({"input": label, "extent": f"{present(loc.index)} ? {e} : -1" if i.optional else e})
        out.append({"dim": name, "places": items})
    return out


def same_group_places(spec, shape, rank, present, pick, form_cond, keep=lambda index: True) -> list[dict]:
    """Template data of the SameGroup checks (templates/op_host/_same_dim.j2): every kept input whose shape form
    holds a variadic group (Bd in [*Bd, H]) must carry the group's entries equal to the group as it is read
    (opgen.dsl.dimsource.group_location: its source input). One {"group", "input", "cond", "check"} per (input,
    group): `check` the C++ of the SameGroup call(s) filling `dimMismatch` (false: refuse), `cond` the C++ condition
    under which the check applies (None: always). Shapes are printed by `shape(i)` (a gert::Shape expression),
    ranks by `rank(i)`; an optional input (or an optional source) is checked when `present(i)`.
    - a single-form input: always;
    - an input whose form static attribute `attr` picks: the form of choice k when `form_cond(attr, k)`;
    - a free-form input (several forms, no form_by): unless its rank fits a form without the group (left to the
      TilingFunc's form key, opgen.tiling.emit.form_key_cpp), some form holding the group must both fit its rank and
      carry the group equal to the source's; else the first form fitting its rank names the differing dim.
    `pick(attr, [text per form])` selects a form-picked source's bounds. Graph mode reaches InferShape and the
    TilingFunc without the aclnn layer's cross-input checks, and a kernel tiled from the source's group would read
    past a shorter input (docs/design.md "Emission")."""
    out = []
    for name in spec.variadics:
        src = group_location(spec, name)
        if src is None or not keep(src.index):
            continue
        sdecl = spec.inputs[src.index]
        sbegin, safter = src.bounds(pick)
        for j, decl in enumerate(spec.inputs):
            if j == src.index or not keep(j):
                continue

            def call(why, form):
                v = next(p for p, d in enumerate(form) if isinstance(d, Variadic))
                return (f"SameGroup({why}, {c_string(name)}, {c_string(sdecl.name)}, {shape(src.index)}, {sbegin}, "
                        f"{safter}, {c_string(decl.name)}, {shape(j)}, {v}, {len(form) - v - 1})")

            holds = [next((d.name == name for d in form if isinstance(d, Variadic)), False) for form in decl.shapes]
            if not any(holds):
                continue
            base = ([present(src.index)] if sdecl.optional else []) + ([present(j)] if decl.optional else [])
            if len(decl.shapes) == 1:
                out.append({"group": name, "input": decl.name, "cond": " && ".join(base) or None,
                            "check": call("&dimMismatch", decl.shapes[0])})
                continue
            if decl.form_by is not None:
                for k, form in enumerate(decl.shapes):
                    if holds[k]:
                        out.append({"group": name, "input": decl.name,
                                    "cond": " && ".join(base + [form_cond(decl.form_by, k)]),
                                    "check": call("&dimMismatch", form)})
                continue
            fits = [rank_cond_cpp(rank(j), *rank_bounds([form], spec.variadics)) for form in decl.shapes]
            conds = base + [f"!{f}" for f, h in zip(fits, holds) if not h]
            conds.append("!(" + " || ".join(f"({f} && {call('nullptr', form)})"
                                            for f, h, form in zip(fits, holds, decl.shapes) if h) + ")")
            check = "true"
            for f, h, form in reversed(list(zip(fits, holds, decl.shapes))):
                if h:
                    check = f"({f} ? {call('&dimMismatch', form)} : {check})"
            out.append({"group": name, "input": decl.name, "cond": " && ".join(conds), "check": check})
    return out


def _form_selector(m: OpModel, attr: str) -> dict:
    """Template data of the local holding which choice static attribute `attr` has (the index of the shape form
    it picks, InputDecl.form_by / OutputDecl.form_by), checked against the choices; the local is named by the
    attribute's OpDef index, never by its spec name."""
    p = next(p for p in m.attrs if p.decl.name == attr)
    a = p.decl
    if a.type is LIST_INT:   # RuntimeAttrs::GetListInt (CANN's ListInt): compared with each choice in full
        var = f"formOfAttr{p.index}"
        choices = ", ".join("{" + ", ".join(str(int(x)) for x in c) + "}" for c in a.choices)
        shown = ", ".join("[" + ", ".join(str(int(x)) for x in c) + "]" for c in a.choices)
        return {"var": var, "index": p.index, "ctype": "gert::TypedContinuousVector<int64_t>", "list": True, "str": False,
                "expr": f"ListIntChoice({var}Ptr, {{{choices}}})",
                "msg": c_printf(f"{a.name}: a list of ", "%zu", f" values that is not one of {shown}"),
                "value": f"{var}Ptr->GetSize()"}
    if a.type is str:   # RuntimeAttrs::GetStr (CANN's GetAttrPointer<char>): compared with each choice
        var = f"formOfAttr{p.index}"
        expr = " : ".join(f"std::strcmp({var}Ptr, {c_string(c)}) == 0 ? {k}" for k, c in enumerate(a.choices))
        shown = ", ".join(repr(c) for c in a.choices)
        return {"var": var, "index": p.index, "ctype": "char", "expr": expr + " : -1", "list": False, "str": True,
                "msg": c_printf(f"{a.name}: '", "%s", f"' is not one of {shown}"), "value": f"{var}Ptr"}
    ctype = "bool" if a.type is bool else "int64_t"
    lit = [("true" if c else "false") if a.type is bool else str(c) for c in a.choices]
    var = f"formOfAttr{p.index}"
    expr = " : ".join(f"*{var}Ptr == {v} ? {k}" for k, v in enumerate(lit)) + " : -1"
    choices = ", ".join(lit)
    return {"var": var, "index": p.index, "ctype": ctype, "expr": expr, "list": False, "str": False,
            "msg": c_printf(f"{a.name}: ", "%ld", f" is not one of {choices}"),
            "value": f"static_cast<int64_t>(*{var}Ptr)"}


def infershape_context(m: OpModel) -> dict:
    """Template data of the infershape file (see module docstring). Raises SpecError when an output
    dim cannot be derived from the inputs."""
    spec = m.spec
    used_inputs: dict[str, object] = {}
    dims: list[dict] = []
    dim_var: dict[str, str] = {}
    groups: dict[str, dict] = {}

    def tail(name):   # the dim's absent value, else the attribute bound to it (null- and range-checked first)
        decl = spec.dims_.get(name)
        if decl is not None and decl.absent is not None:
            return str(decl.absent)
        attr = next((a for a in m.attrs if a.decl.dim is not None and a.decl.dim.name == name), None)
        if attr is None:
            return None
        if attr not in attrs_needed:
            attrs_needed.append(attr)
        lo = attr_dim_min(spec, attr.decl)
        dim_attrs[attr.index] = {
            "var": f"attrValue{attr.index}", "index": attr.index, "min": lo,
            "msg": c_printf(f"{attr.decl.name}: ", "%lld", f" is not a valid {name} (at least {lo})")}
        return f"*attrValue{attr.index}"

    def entry(index, where, k):
        p = m.inputs[index]
        used_inputs[p.name] = p
        shp = _shape_var(p)
        return f"{shp}->GetDim({k})" if where == "front" else f"{shp}->GetDim({shp}->GetDimNum() - {k})"

    def need_sym(name: str) -> str:
        if name in dim_var:
            return dim_var[name]
        expr = read_dim(spec, name, entry, pick, lambda i: f"{_shape_var(m.inputs[i])} != nullptr", tail,
                        dim_var.get, zero_ok=False, divides=divides)
        if expr is None:
            raise SpecError(f"{spec.file}: output dim {name} is carried by no required input and has no "
                            f"absent value or attribute; InferShape cannot derive it")
        var = f"dim{name}"
        dim_var[name] = var
        dims.append({"var": var, "name": name, "expr": expr})
        return var

    def need_group(name: str) -> dict:
        if name in groups:
            return groups[name]
        p, begin, after = _group_source(m, name, pick)
        used_inputs[p.name] = p
        shp = _shape_var(p)
        g = {"name": name, "src": shp, "begin": begin, "end": f"{shp}->GetDimNum() - {after}"}
        groups[name] = g
        return g

    selectors: dict[str, dict] = {}

    def pick(attr: str, exprs: list[str]) -> str:
        if len(set(exprs)) == 1:
            return exprs[0]
        sel = selectors.get(attr)
        if sel is None:
            sel = selectors[attr] = _form_selector(m, attr)
            attrs_needed.append(attr)
        out = exprs[-1]
        for k in range(len(exprs) - 2, -1, -1):
            out = f"({sel['var']} == {k} ? {exprs[k]} : {out})"
        return out

    attrs_needed: list = []
    dim_attrs: dict = {}   # integer attributes a dim is read from: null-checked and range-checked before use
    divides: list = []     # product places a dim is read from (dimsource.Divides): the division must be exact
    outputs = []
    for p in m.outputs:
        o = p.decl
        var = f"{p.derived[0].lower()}{p.derived[1:]}Shape"
        if o.like is not None:
            src = m.param(o.like)
            used_inputs[src.name] = src
            outputs.append({"index": p.index, "name": p.name, "var": var, "optional": p.optional, "like": True,
                            "src": _shape_var(src), "src_optional": src.optional, "src_name": src.name,
                            "shape": f"like {src.name}"})
            continue
        forms = []
        for k, shape in enumerate(o.all_shapes()):
            entries = []
            for d in shape:
                if isinstance(d, Variadic):
                    g = need_group(d.name)
                    entries.append({"group": True, "src": g["src"], "begin": g["begin"], "end": g["end"]})
                else:
                    e = as_dim(d)
                    for s in sorted(e.symbols()):
                        if s in spec.variadics:
                            need_group(s)
                        else:
                            need_sym(s)
                    expr = dim_cpp(e, lambda n: dim_var[n], lambda n: f"ProdDims({groups[n]['src']}, "
                                   f"{groups[n]['begin']}, {groups[n]['end']})")
                    entries.append({"group": False, "expr": expr})
            fixed = sum(1 for e in entries if not e["group"])
            group_sizes = [f"({e['end']})" if e["begin"] in (0, "0") else f"({e['end']} - {e['begin']})"
                           for e in entries if e["group"]]
            rank = " + ".join(group_sizes + [str(fixed)]) if group_sizes else str(fixed)
            cond = None
            if o.form_by is not None:
                pick(o.form_by, ["0", "1"])   # declares the selector
                cond = f"{selectors[o.form_by]['var']} == {k}"
            forms.append({"cond": cond, "entries": entries, "rank": rank,
                          "shape": shape_str(shape) + (f" when {o.form_by}={choice_text(o.choices[k])}" if cond
                                                       else "")})
        outputs.append({"index": p.index, "name": p.name, "var": var, "optional": p.optional, "like": False,
                        "forms": forms, "shape": "; ".join(f["shape"] for f in forms)})
    # a dim two of the inputs InferShape reads carries agrees in all of them (shared_dims; SameDim skips a negative,
    # unknown extent). Inputs it does not read stay unread (their ranks unchecked, as CANN's InferShapes leave them):
    # the TilingFunc compares every input.
    equal_dims = same_dim_places(spec, lambda i: f"{_shape_var(m.inputs[i])}->",
                                 lambda i: f"{_shape_var(m.inputs[i])} != nullptr",
                                 keep=lambda i: m.inputs[i].name in used_inputs)
    inputs, form_ranks = [], []
    for p in m.inputs:
        if p.name not in used_inputs:
            continue
        shapes = p.decl.shapes   # (a shape picked by an attribute: the bounds over its forms, then per form below)
        min_rank, max_rank = rank_bounds(shapes, m.spec.variadics)
        exact = min_rank == max_rank
        shape_text = p.decl.shape_text()
        msg = c_printf(f"{p.name}: rank ", "%zu", f", expected {'' if exact else 'at least '}{min_rank} for {shape_text}")
        inputs.append({"name": p.name, "var": _shape_var(p), "getter": _getter(m, p, "Shape"), "optional": p.optional,
                       "min_rank": min_rank, "exact": exact, "shape": shape_text, "msg": msg})
        if p.decl.form_by is not None:   # the rank of the form the attribute picks, before any GetDim of it
            pick(p.decl.form_by, ["0", "1"])
            sel = selectors[p.decl.form_by]["var"]
            for k, (c, shape) in enumerate(zip(p.decl.choices, shapes)):
                lo, hi = rank_bounds([shape], m.spec.variadics)
                rank = f"{_shape_var(p)}->GetDimNum()"
                bad = f"{rank} != {lo}" if lo == hi else (f"{rank} < {lo}" if hi is None else
                                                           f"{rank} < {lo} || {rank} > {hi}")
                rule = f"{lo}" if lo == hi else (f"at least {lo}" if hi is None else f"{lo} to {hi}")
                form_ranks.append({"cond": f"{sel} == {k} && ({bad})", "var": _shape_var(p),
                                   "optional": p.optional,
                                   "msg": c_printf(f"{p.name}: rank ", "%zu", f", expected {rule} for {shape_str(shape)} "
                                                   f"when {p.decl.form_by}={choice_text(c)}")})
    def form_cond(attr, k):
        pick(attr, ["0", "1"])   # declares the selector
        return f"{selectors[attr]['var']} == {k}"

    # so does a variadic group (Bd) an input it reads carries beside the group's source (same_group_places)
    equal_groups = same_group_places(spec, lambda i: f"*{_shape_var(m.inputs[i])}",
                                     lambda i: f"{_shape_var(m.inputs[i])}->GetDimNum()",
                                     lambda i: f"{_shape_var(m.inputs[i])} != nullptr", pick, form_cond,
                                     keep=lambda i: m.inputs[i].name in used_inputs)
    # graph mode meets no aclnn layer: a size the known factors do not divide fails here
    exact = [d.check(m.inputs[d.index].name, form_cond) for d in divides]
    dtypes = []
    for p in m.outputs:
        dt = p.decl.dtype
        if isinstance(dt, DTypeVar):
            srcs = [q for q in m.var_binders(dt.name) if q.role != "output"]
            allowed = m.allowed(dt.name)
            fallback = DType.f32 if DType.f32 in allowed else spec.dtype_rows[0][dt.name]
            chain = [{"expr": f"context->{_getter(m, q, 'DataType')}", "optional": q.optional, "name": q.name}
                     for q in srcs]
            dtypes.append({"index": p.index, "name": p.name, "var": dt.name, "chain": chain,
                           "fallback": f"ge::{fallback.cann}",
                           "needs_fallback": not chain or all(c["optional"] for c in chain)})
        else:
            dtypes.append({"index": p.index, "name": p.name, "var": None, "chain": [],
                           "fallback": f"ge::{dt.cann}", "needs_fallback": True})
    for d in dtypes:  # stop the chain at the first required source
        cut = []
        for c in d["chain"]:
            cut.append(c)
            if not c["optional"]:
                break
        d["chain"] = cut
    needs_prod = any("ProdDims(" in d["expr"] for d in dims) or any(
        "ProdDims(" in e["expr"] for o in outputs if not o["like"] for f in o["forms"] for e in f["entries"]
        if not e["group"])
    return {"banner": m.banner(), "op": m.op, "inputs": inputs, "dims": dims, "outputs": outputs, "dtypes": dtypes,
            "attrs_needed": bool(attrs_needed), "fn_suffix": upper_camel(m.op), "needs_prod": needs_prod,
            "selectors": list(selectors.values()), "form_ranks": form_ranks, "equal_dims": equal_dims,
            "equal_groups": equal_groups, "same_group": bool(equal_groups),
            "dim_attrs": [dim_attrs[k] for k in sorted(dim_attrs)], "exact_products": exact}


def emit_infershape(spec) -> dict[str, str]:
    """{"op_host/<op>_infershape.cpp": text} for `spec` (unformatted)."""
    m = OpModel(spec)
    return {f"op_host/{m.snake}_infershape.cpp": render("op_host/infershape.cpp.j2", **infershape_context(m))}
