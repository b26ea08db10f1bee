"""Validation of concrete inputs against a spec: attributes, presence, dtype combination, conversion
to the declared dtypes, shape unification with the symbolic dims, dim domains and relations, and
value checks. The first violation raises a ValidationError naming the parameter and the rule."""

from __future__ import annotations

import numpy as np

from opgen.dsl.keys import LIST_INT, Bound, SpecKey
from opgen.errors import SpecError, ValidationError
from opgen.ir.dims import Bin, Lit, Sym, Variadic, affine_in, as_dim, eval_shape, shape_str, subst
from opgen.ir.dtypes import DType, DTypeVar, dtype_of_array, parse_dtype

_BOOL_TEXT = {"true": True, "1": True, "false": False, "0": False}


def coerce_attr(a, v):
    """Convert an attribute value (possibly CLI text) to the declared type. Raises ValidationError."""
    try:
        if a.type is bool:
            if isinstance(v, str):
                return _BOOL_TEXT[v.strip().lower()]
            if isinstance(v, (bool, np.bool_)) or v in (0, 1):
                return bool(v)
            raise ValueError
        if a.type is int:
            if isinstance(v, str):
                return int(v.strip(), 0)
            if isinstance(v, (bool, np.bool_)) or float(v) != int(v):
                raise ValueError
            return int(v)
        if a.type is float:
            if isinstance(v, (bool, np.bool_)):
                raise ValueError
            return float(v)
        if a.type is str:
            if not isinstance(v, str):
                raise ValueError
            return v
        if a.type is LIST_INT:
            return parse_int_list(v)
    except (ValueError, KeyError, TypeError, OverflowError):
        pass
    if a.type is LIST_INT:
        raise ValidationError(a.name, f"must be a list of ints (written -2,-1; one element -1; empty []), got {v!r}")
    raise ValidationError(a.name, f"must be of type {a.type.__name__}, got {v!r}")


def parse_int_list(v) -> tuple:
    """A list[int] attribute's value as a tuple of ints: a list/tuple of ints, or CLI text `-2,-1` (brackets
    optional: `[-2,-1]`, `(-2,-1)`), `-1` for one element, `[]` or `()` for the empty list. ValueError otherwise
    (a bool, a float, an empty item such as `-2,,-1`, a non-ASCII digit)."""
    if isinstance(v, str):
        t = v.strip()
        if t[:1] + t[-1:] in ("[]", "()"):
            t = t[1:-1].strip()
        if not t:
            return ()
        items = [x.strip() for x in t.split(",")]
        if not all(x and x.lstrip("+-").isascii() and x.lstrip("+-").isdigit() and len(x) - len(x.lstrip("+-")) <= 1
                   for x in items):
            raise ValueError(v)
        return tuple(int(x) for x in items)
    if isinstance(v, (list, tuple, np.ndarray)):
        out = []
        for x in (v.tolist() if isinstance(v, np.ndarray) else v):
            if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
                raise ValueError(v)
            out.append(int(x))
        return tuple(out)
    raise ValueError(v)


def _convert(name, arr, dt: DType) -> np.ndarray:
    """Convert an array to dtype `dt`; values must be representable (no overflow, no fractional ints)."""
    a = np.asarray(arr)
    if a.dtype.names is not None or a.dtype.subdtype is not None:
        raise ValidationError(name, f"array dtype {a.dtype} is structured, not a real numeric dtype")
    if not a.flags.c_contiguous:   # Fortran order or a strided view: the same bits as the C-order array
        a = np.ascontiguousarray(a) if a.ndim else a.copy()
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:  # bf16 saved by np.savez arrives as unstructured 2-byte void
        a = a.view(DType.bf16.np)
        if dt == DType.bf16:
            return a
    if a.dtype.kind not in "biuf" and dtype_of_array(a) is None:
        raise ValidationError(name, f"array dtype {a.dtype} cannot be converted to {dt.long_name}")
    if dt.is_float:
        if a.dtype.kind == "b":
            raise ValidationError(name, f"expected {dt.long_name} values, got bool")
        with np.errstate(over="ignore", invalid="ignore"):
            out = a.astype(dt.np)
            # in the arrays' own dtypes: no float64 copy of a large input (docs/design.md "Comparison in chunks")
            bad = np.isfinite(a) & ~np.isfinite(out)
        if bad.any():
            raise ValidationError(name, f"value {a[bad].flat[0].item()!r} overflows {dt.long_name}")
        return out
    if dt == DType.bool:
        if a.dtype.kind == "b":
            return a
        if a.dtype.kind in "iu" and np.isin(a, (0, 1)).all():
            return a.astype(np.bool_)
        raise ValidationError(name, "expected bool values (0/1)")
    # integer target
    if a.dtype.kind == "f":
        if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
            raise ValidationError(name, f"expected integer values for {dt.long_name}, got fractional or non-finite")
    elif a.dtype.kind == "b":
        raise ValidationError(name, f"expected {dt.long_name} values, got bool")
    info = np.iinfo(dt.np)
    if a.size and (a.min() < info.min or a.max() > info.max):
        raise ValidationError(name, f"values outside the {dt.long_name} range [{info.min}, {info.max}]")
    return a.astype(dt.np)


INT_CTYPE_RANGE = {"int32_t": (-2 ** 31, 2 ** 31 - 1), "int8_t": (-128, 127)}
"""The values each narrower C int type of an aclnn header holds (opgen.dsl.aclnn INT_CTYPES): an attribute passed
as one is refused outside it (resolve_attrs)."""


def resolve_attrs(spec, attrs, require: bool = True):
    """Attribute values: given ones coerced to their type, defaults otherwise, checked against choices.

    require=False leaves a missing attribute without default as None (opgen graph picks any value).
    Raises ValidationError naming the attribute."""
    known = {a.name: a for a in spec.attrs}
    for k in attrs:
        if k not in known:
            raise ValidationError(k, f"unknown attribute of {spec.name} (known: {', '.join(known) or 'none'})")
    out = {}
    for a in spec.attrs:
        if a.name in attrs and attrs[a.name] is not None:
            v = coerce_attr(a, attrs[a.name])
        elif require and (a.required or (a.default is None and a.dim is None)) and a.dtype_of is None:
            raise ValidationError(a.name, "required attribute is missing")
        else:
            v = a.default
        if v is not None and a.choices is not None and v not in a.choices and a.dtype_of is None:
            if a.type is LIST_INT:
                show = lambda t: "[" + ",".join(map(str, t)) + "]"   # noqa: E731 - the CLI's own spelling
                raise ValidationError(a.name, f"must be one of {' '.join(map(show, a.choices))}, got {show(v)}")
            raise ValidationError(a.name, f"must be one of {', '.join(map(repr, a.choices))}, got {v!r}")
        if v is not None and a.bounds and a.out_of_bounds(v):
            raise ValidationError(a.name, f"must be {a.bound_text()}, got {v!r}")
        if v is not None and a.api_ctype is not None:
            lo, hi = INT_CTYPE_RANGE[a.api_ctype]
            if not lo <= v <= hi:
                raise ValidationError(a.name, f"must be in {lo}..{hi}: {spec.aclnn} passes it as {a.api_ctype}, "
                                              f"got {v!r}")
        given = a.name in attrs and attrs[a.name] is not None
        if v is not None and a.accepts is not None and v not in a.accepts and (require or given):
            given = "" if given else " (the default)"   # OpSpec.attr(accepts=); graph mode takes any default
            shown = ("true" if v else "false") if isinstance(v, bool) else repr(v)   # spec.choice_text's spelling
            raise ValidationError(a.name, f"{a.accepts_rule()}, got {shown}{given}")
        out[a.name] = v
    return out


def dtype_attr_bindings(spec, attr_vals: dict, dtypes: dict) -> dict:
    """`dtypes` ({variable: dtype or name}) with the variables that given dtype attributes bind (OpSpec.attr(
    dtype_of=): the attribute holds the ge::DataType value of its variable, CANN's `dtype`). Raises
    ValidationError naming the attribute for a value that no row of the dtype table binds the variable to, or one
    that contradicts an explicit binding of the variable (--dtype) or another dtype attribute."""
    out = dict(dtypes)
    for a in spec.attrs:
        v = attr_vals.get(a.name)
        if a.dtype_of is None or v is None:
            continue
        by_code = {r[a.dtype_of].ge_code: r[a.dtype_of] for r in spec.dtype_rows}
        if v not in by_code:
            allowed = ", ".join(f"{c} ({d.long_name})" for c, d in by_code.items())
            raise ValidationError(a.name, f"must be one of {allowed} (the ge::DataType of {a.dtype_of}), got {v}")
        have = out.get(a.dtype_of)
        if have is not None:
            try:
                have_d = parse_dtype(have) if isinstance(have, str) else have
            except KeyError:
                have_d = None
            if have_d is not None and have_d != by_code[v]:
                raise ValidationError(a.name, f"is {v} ({by_code[v].long_name}), but {a.dtype_of} is "
                                              f"{have_d.long_name if isinstance(have_d, DType) else have_d}")
        out[a.dtype_of] = by_code[v]
    return out


class RecordedDtype(str):
    """A dtype name of a binding recorded elsewhere than the call itself (the `_opgen_dtypes` entry of an --inputs
    .npz, docs/design.md "Command line"): a str as any other binding value, with `origin` the words naming where it
    came from (`recorded in --inputs in.npz`), which resolve_dtypes uses when an array contradicts it."""

    origin: str = "given explicitly"

    def __new__(cls, name: str, origin: str = "given explicitly"):
        s = super().__new__(cls, name)
        s.origin = origin
        return s


def resolve_dtypes(spec, arrays, dtypes, prefer_f32: bool = True):
    """Bind the dtype variables: explicit `dtypes` first, then the arrays of inputs typed by a variable.

    An array's dtype is the tensor's dtype, as CANN's aclnn layer sees it: all arrays of one variable must share
    it and the combination must be a row of the table (CANN: OP_CHECK_DTYPE_NOT_SUPPORT / _NOT_SAME, 161002
    ACLNN_ERR_PARAM_INVALID; docs/reference/names.md §4). Only for a variable bound explicitly (`dtypes`,
    --dtype) are float32 arrays containers, converted to the binding; arrays of a dtype opgen does not model
    (float64) are always containers. The first variable (table column order) whose binding leaves no
    row of the dtype table blames the parameter it came from. A variable that nothing binds takes float32
    where a row allows it (prefer_f32; CANN fills absent weights in fp32), else the first matching row.
    Raises ValidationError."""
    assign, source, origin = {}, {}, {}
    for k, v in dtypes.items():
        if k not in spec.dtype_vars_:
            if not spec.dtype_vars_:
                raise ValidationError(k, f"{spec.name} has no dtype variables (its dtypes are fixed), so --dtype "
                                         f"{k}=... has nothing to set")
            raise ValidationError(k, f"unknown dtype variable of {spec.name} (known: {', '.join(spec.dtype_vars_)})")
        try:
            assign[k] = parse_dtype(v) if isinstance(v, str) else v
        except KeyError:
            allowed = sorted({r[k].long_name for r in spec.dtype_rows if k in r})
            raise ValidationError(k, f"unknown dtype {v!r} (known dtypes: {', '.join(d.long_name for d in DType)}; "
                                     f"{spec.name} takes {k} = {', '.join(allowed)})") from None
        if not isinstance(assign[k], DType):
            raise ValidationError(k, f"expected a dtype name such as float16, got {v!r}")
        source[k] = k
        origin[k] = getattr(v, "origin", "given explicitly")   # --dtype / dtypes=, or a RecordedDtype
        allowed = sorted({r[k] for r in spec.dtype_rows}, key=lambda x: x.value)
        if assign[k] not in allowed:
            raise ValidationError(k, f"dtype {assign[k].long_name} is not supported for {k} "
                                     f"(allowed: {', '.join(a.long_name for a in allowed)})")
    _check_rows(spec, assign, source)
    for i in spec.inputs:
        if not isinstance(i.dtype, DTypeVar) or arrays.get(i.name) is None:
            continue
        var = i.dtype.name
        d = dtype_of_array(np.asarray(arrays[i.name]))
        if d is None:
            continue
        allowed = sorted({r[var] for r in spec.dtype_rows}, key=lambda x: x.value)
        container = d == DType.f32 and source.get(var) == var   # float32 data for an explicit --dtype binding
        if var in assign:
            if d != assign[var] and not container:
                whence = origin[var] if source[var] == var else f"from {source[var]}"
                raise ValidationError(i.name, f"dtype {d.long_name} conflicts with {var}={assign[var].long_name} "
                                              f"({whence})")
        elif d in allowed:
            assign[var], source[var] = d, i.name
            _check_rows(spec, assign, source)
        else:
            raise ValidationError(i.name, f"dtype {d.long_name} is not supported for {var} "
                                          f"(allowed: {', '.join(a.long_name for a in allowed)})")
    rows = _check_rows(spec, assign, source)
    # a variable no present tensor binds (AdaLayerNorm's U without weight/bias) defaults to float32 where a
    # row allows it, as CANN's aclnn layer fills absent weights in fp32 (docs/reference/ada_layer_norm.md §2.3)
    free = [c.name for c in spec.dtype_table if c.name not in assign]
    preferred = [r for r in rows if all(r[v] == DType.f32 for v in free)] if prefer_f32 else []
    return dict((preferred or rows)[0])


def _check_rows(spec, assign, source):
    """Rows of the dtype table matching `assign`; the first column (table order) that leaves none blames
    the parameter its binding came from."""
    rows = list(spec.dtype_rows)
    for col in spec.dtype_table:
        if col.name not in assign:
            continue
        narrowed = [r for r in rows if r[col.name] == assign[col.name]]
        if not narrowed:
            combo = ", ".join(f"{k}={assign[k].long_name}" for k in (c.name for c in spec.dtype_table) if k in assign)
            allowed = "; ".join(", ".join(f"{k}={v.long_name}" for k, v in r.items()) for r in spec.dtype_rows)
            raise ValidationError(source[col.name], f"dtype combination ({combo}) is not supported by {spec.name}; "
                                                    f"allowed: {allowed}")
        rows = narrowed
    return rows


def _product(d) -> bool:
    """True when dim expression `d` is a product of dims and integers only (N * D, 2 * N * D): the form whose
    known factors complete it (unify_shape); a sum such as Sq + Seq is not, its parts bind otherwise."""
    if isinstance(d, (Sym, Lit)):
        return True
    return isinstance(d, Bin) and d.op == "*" and _product(d.lhs) and _product(d.rhs)


def unify_shape(spec, name, shape, got, env, binder):
    """Bind the dims of the symbolic shape `shape` (dims, affine dims, variadic groups) of input `name` to the
    concrete shape `got` (a tuple of ints, elements), extending `env` ({dim: int or tuple}) through `binder`; returns
    None on success, else the rule the shape breaks as a sentence (the caller raises it as a ValidationError naming
    `name`). The binding rules are docs/design.md "Specs and the Tensor IR" (shapes; an affine dim `a * D + b`
    binds D when it divides). Never raises for a bad shape."""
    var = [k for k, d in enumerate(shape) if isinstance(d, Variadic)]
    fixed = len(shape) - len(var)
    if var:
        vd = spec.variadics[shape[var[0]].name]
        nv = len(got) - fixed
        if nv < vd.min_rank or nv > vd.max_rank:
            return f"rank {len(got)} outside {fixed + vd.min_rank}..{fixed + vd.max_rank} for shape {shape_str(shape)}"
    elif len(got) != fixed:
        return f"rank {len(got)}, expected {fixed} for shape {shape_str(shape)}"
    pos = 0
    deferred = []
    for d in shape:
        if isinstance(d, Variadic):
            val = tuple(int(x) for x in got[pos:pos + nv])
            pos += nv
            if d.name in env and env[d.name] != val:
                return f"leading dims {list(val)} differ from {d.name}={list(env[d.name])} (from {binder[d.name]})"
            env.setdefault(d.name, val)
            binder.setdefault(d.name, name)
            continue
        val = int(got[pos])
        pos += 1
        d = as_dim(d)
        if isinstance(d, Sym):
            if d.name in env:
                if env[d.name] != val:
                    return f"dim {pos - 1} is {val}, expected {d.name}={env[d.name]} (from {binder[d.name]})"
            else:
                env[d.name] = val
                binder[d.name] = name
        elif isinstance(d, Lit):
            if d.value != val:
                return f"dim {pos - 1} is {val}, expected {d.value} for shape {shape_str(shape)}"
        else:
            deferred.append((pos - 1, d, val))
    todo = list(deferred)
    while todo:   # a dim seen only as scale * dim + offset (the other factors known: N * D with N bound) is bound
        left = []
        for k, d, val in todo:
            known = ({s: Lit(env[s]) for s in d.symbols() if isinstance(env.get(s), int)} if _product(d) else {})
            rest = subst(d, known)
            # the known factors may leave the dim itself (N1 * D with N1 = 1): scale 1, offset 0
            aff = (rest.name, 1, 0) if isinstance(rest, Sym) and known else affine_in(rest)
            if aff is None or aff[0] in env:
                left.append((k, d, val))
                continue
            s, scale, off = aff
            if val < off or (val - off) % scale:
                given = ", ".join(f"{x}={env[x]} (from {binder.get(x, 'an attribute')})" for x in sorted(known))
                return f"dim {k} is {val}, not {d} for any whole {s}" + (f" with {given}" if given else "")
            env[s] = (val - off) // scale
            binder[s] = name
        if len(left) == len(todo):
            break
        todo = left
    for k, d, val in deferred:
        if all(s in env for s in d.symbols()):
            want = d.evaluate(env)
            if want != val:
                return f"dim {k} is {val}, expected {d} = {want}"
    return None


def extent_dims(spec) -> set:
    """Names of the dims and variadic groups that size a device tensor (a non-host input or an output): a 0 there
    makes an empty tensor, which the call accepts whatever the dim's declared min (docs/design.md "Empty
    tensors"); dims only an attribute or a host array binds keep their min."""
    names = set()
    if spec.empty_policy != "accept":
        return names
    for i in spec.inputs:
        if not i.host:
            for shape in i.shapes:
                for d in shape:
                    names |= as_dim(d).symbols() if not isinstance(d, Variadic) else {d.name}
    for o in spec.outputs:
        for shape in o.all_shapes():
            for d in shape:
                names |= as_dim(d).symbols() if not isinstance(d, Variadic) else {d.name}
    return names


def output_shapes(spec, arrays, env, static=None) -> dict:
    """{output name: concrete shape} for the outputs whose shape the bound dims (and, for a shape picked by an
    attribute, the static attribute values `static`) determine (elements per axis)."""
    out = {}
    for o in spec.outputs:
        if o.like:
            if arrays.get(o.like) is not None:
                out[o.name] = tuple(np.shape(arrays[o.like]))
            continue
        try:
            out[o.name] = eval_shape(o.shape_for(static or {}), env)
        except (SpecError, KeyError, TypeError):
            continue
    return out


def empty_call_rule(spec, arrays, env, static=None) -> tuple[str | None, str | None]:
    """(name of an empty tensor, name of a non-empty output) of a call, each None when there is none.

    A call with an empty input tensor (a present device input with a 0 extent) is accepted when every output is
    empty too: nothing is computed and nothing is written, as ops-nn's aclnn APIs return success with workspace
    0. An output that would still hold elements would need the value of a reduction over an empty extent; that
    case is refused (docs/design.md "Empty tensors"). An output that is empty while every input holds elements
    (its dims come from absent inputs or attributes) does not make the call empty."""
    empty = next((i.name for i in spec.inputs if not i.host and arrays.get(i.name) is not None
                  and np.size(arrays[i.name]) == 0), None)
    if empty is None:
        return None, None
    shapes = output_shapes(spec, arrays, env, static)
    return empty, next((n for n, s in shapes.items() if 0 not in s), None)


def _empty_call_ok(spec, arrays, env, static=None) -> bool:
    """True when the call is an empty call the spec accepts: an empty input and every output empty (the dims bound
    so far; absent dims take their `absent` value)."""
    full_env = dict(env)
    for d in spec.dims_.values():
        if d.name not in full_env and d.absent is not None:
            full_env[d.name] = d.absent
    empty, full = empty_call_rule(spec, arrays, full_env, static)
    return empty is not None and full is None


def _check_empty_call(spec, arrays, env, static=None) -> None:
    """Raises ValidationError naming the output that an empty call would leave non-empty (empty_call_rule);
    nothing under the spec's "reject" policy (OpSpec.empty_tensors), whose dims keep their min."""
    if spec.empty_policy != "accept":
        return
    empty, full = empty_call_rule(spec, arrays, env, static)
    if full is not None:
        raise ValidationError(empty, f"is empty, but output {full} is not (an empty call needs every output empty)")


def check_input_names(spec, inputs) -> None:
    """Every key of `inputs` names an input of `spec` (a misspelt or renamed array is refused, never taken for an
    absent input). Raises ValidationError naming the first unknown one and the inputs."""
    known = {i.name for i in spec.inputs}
    for k in inputs:
        if k not in known:
            raise ValidationError(k, f"unknown input of {spec.name} (inputs: {', '.join(i.name for i in spec.inputs)})")


def binding_order(items, decl=lambda x: x) -> list:
    """`items` (inputs, or anything `decl` maps to its InputDecl) in the order their shapes bind dims: those that
    bind first (`InputDecl.binds_first`: one shape, or a form a static attribute picks), then those of several
    forms, each group in the given (declaration) order. Each of the latter then takes its first form agreeing with
    the dims bound so far -- the form a dim's own source allows. The one rule of the interpreter
    (`bind` here), the emitted aclnn CheckShapes (opgen.codegen.aclnn) and the package's golden
    (`_BIND_ORDER`, opgen.codegen.golden): docs/design.md "Shape forms at run time"."""
    items = list(items)
    return [x for x in items if decl(x).binds_first] + [x for x in items if not decl(x).binds_first]


def bind(spec, inputs, attrs, dtypes, skip=()):
    """See OpSpec.bind."""
    check_input_names(spec, inputs)
    attr_vals = resolve_attrs(spec, attrs)
    present = {i.name: inputs.get(i.name) is not None for i in spec.inputs}
    for i in spec.inputs:
        if not i.optional and not present[i.name]:
            raise ValidationError(i.name, "required input is missing (null)")
    for i in spec.inputs:   # OpSpec.input(accepts="absent"): an input this kernel does not implement
        if i.absent_only and present[i.name]:
            raise ValidationError(i.name, i.absent_rule())
    static_vals = {a.name: attr_vals[a.name] for a in spec.static_attrs}
    for r in spec.requirements:
        if r.kind == "static":
            rule = r.evaluate(static_vals, present)
            if rule:
                raise ValidationError(r.param, spec.rule_text(rule, loc=r.loc))
    dtypes = dtype_attr_bindings(spec, attr_vals, dtypes)
    dt = resolve_dtypes(spec, inputs, dtypes)
    for a in spec.attrs:   # a dtype attribute not given: the code of its variable as bound
        if a.dtype_of is not None and attr_vals[a.name] is None:
            attr_vals[a.name] = dt[a.dtype_of].ge_code
    arrays = {}
    for i in spec.inputs:
        a = inputs.get(i.name)
        if a is None:
            arrays[i.name] = None
            continue
        target = dt[i.dtype.name] if isinstance(i.dtype, DTypeVar) else i.dtype
        arrays[i.name] = _convert(i.name, a, target)
    env, binder = {}, {}
    forms = {}
    # inputs of one shape (or of the shape a static attribute picks) bind their dims first, then the inputs of
    # several forms in their order, each taking its first form that agrees with the dims bound so far: the form a
    # dim's own source (a one-shape input) allows, as the TilingFunc reads it, not whichever form an earlier input
    # happened to bind the dim by (docs/design.md "Shape forms at run time"). A call accepted in declaration order
    # binds the same forms (the dims an input sees only grow, and its old form agrees with all of them).
    for i in binding_order(spec.inputs):
        a = arrays[i.name]
        if a is None:
            continue
        errors = []
        picked = i.form_of(static_vals)
        for k, shape in enumerate(i.shapes):
            if picked is not None and k != picked:
                continue
            trial, tb = dict(env), dict(binder)
            err = unify_shape(spec, i.name, shape, a.shape, trial, tb)
            if err is None:
                env, binder = trial, tb
                forms[i.name] = k
                break
            errors.append(err)
        else:
            if picked is not None:
                raise ValidationError(i.name, f"shape {list(a.shape)}: {errors[0]} (the shape for "
                                              f"{i.form_by}={static_vals[i.form_by]!r} is {shape_str(i.shapes[picked])})")
            if len(i.shapes) == 1:
                raise ValidationError(i.name, f"shape {list(a.shape)}: {errors[0]}")
            alts = " or ".join(shape_str(s) for s in i.shapes)
            raise ValidationError(i.name, f"shape {list(a.shape)} matches none of {alts} ({errors[0]})")
    for a in spec.attrs:
        if a.dim is None:
            continue
        v = attr_vals[a.name]
        if a.dim.name in env:
            if v is not None and v != env[a.dim.name]:
                raise ValidationError(a.name, f"is {v}, must equal {a.dim.name}={env[a.dim.name]} "
                                              f"(from {binder[a.dim.name]})")
            attr_vals[a.name] = env[a.dim.name]
        elif v is None:
            raise ValidationError(a.name, "required attribute is missing")
        else:
            env[a.dim.name] = v
            binder[a.dim.name] = a.name
    for i in spec.inputs:   # a product an attribute completes (query [B, S, N * D], N from head_num): D now
        a = arrays[i.name]
        shape = i.shapes[forms.get(i.name, 0)] if a is not None else ()
        if a is not None and any(s not in env for d in shape if not isinstance(d, Variadic)
                                 for s in as_dim(d).symbols()):
            err = unify_shape(spec, i.name, shape, a.shape, env, binder)
            if err is not None:
                raise ValidationError(i.name, f"shape {list(a.shape)}: {err}")
    extents = extent_dims(spec)
    empty_ok = bool(extents) and _empty_call_ok(spec, arrays, env, static_vals)
    for d in spec.dims_.values():
        if d.name not in env:
            if d.absent is None:
                continue
            env[d.name] = d.absent
            binder[d.name] = "absent inputs"
            continue
        v = env[d.name]
        who = binder[d.name]
        if d.name in env and binder[d.name] != "absent inputs":
            if v < d.min and not (v == 0 and d.name in extents and empty_ok):   # 0: an empty call (empty_call_rule)
                raise ValidationError(who, f"{d.name}={v} must be >= {d.min}")
            if d.max is not None and v > d.max:
                raise ValidationError(who, f"{d.name}={v} must be <= {d.max}")
            if d.multiple_of and v % d.multiple_of:
                raise ValidationError(who, f"{d.name}={v} must be a multiple of {d.multiple_of}")
    if spec.empty_policy != "accept":   # OpSpec.empty_tensors("reject"): no 0 in a variadic group either
        for name, val in env.items():
            if name in spec.variadics and any(v < 1 for v in val):
                raise ValidationError(binder[name], f"leading dims {name}={list(val)}: every dim must be >= 1 "
                                                    f"(empty tensors are not supported)")
    for i in spec.inputs:  # dims written as expressions (Sq + Seq) once every symbol is bound
        a = arrays[i.name]
        if a is None:
            continue
        want = eval_shape(i.shapes[forms.get(i.name, 0)], env)
        if tuple(a.shape) != want:
            raise ValidationError(i.name, f"shape {list(a.shape)} must be {list(want)} "
                                          f"({shape_str(i.shapes[forms.get(i.name, 0)])})")
    # the relations, then those of some modes only (require(when=)) where the call is in that mode
    for r in sorted(spec.relations, key=lambda r: r.when is not None):
        c = r.constraint
        if not all(s in env for s in c.symbols()) or (r.when is not None and not r.when(static_vals, present)):
            continue
        if not c.holds(env):
            raise ValidationError(r.param, f"{spec.rule_text(r.rule, loc=r.loc)} ({c.explain(env)})")
    for r in spec.requirements:
        if r.kind == "values" and not any(r is s for s in skip):
            rule = r.evaluate(arrays, env, attr_vals)
            if rule:   # its {name} placeholders spelled as a static check's are (docs/design.md "Rule texts")
                err = ValidationError(r.param, spec.rule_text(rule, loc=r.loc))
                err.requirement = r
                raise err
    _check_empty_call(spec, arrays, env, static_vals)
    opts = [i for i in spec.inputs if i.optional]
    used = {i.name: i.when is None or i.when(static_vals, present) for i in opts}
    for i in opts:  # inputs unused in this mode: validated above, then ignored
        if present[i.name] and not used[i.name]:
            present[i.name] = False
            arrays[i.name] = None
    key = SpecKey(tuple(static_vals[a.name] for a in spec.static_attrs), tuple(present[i.name] for i in opts),
                  tuple(forms.get(i.name, 0) for i in spec.inputs if len(i.shapes) > 1),
                  tuple(dt[n] for n in spec.static_dtype_vars))
    return Bound(key, arrays, attr_vals, dt, env)
