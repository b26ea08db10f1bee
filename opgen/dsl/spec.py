"""Spec declarations: what an operator is, exactly as CANN declares it.

A spec file in `specs/` builds one `OpSpec` at module level:

    spec = OpSpec("AdaLayerNormGrad", aclnn="aclnnAdaLayerNormBackward", socs=A2_A3, round="rint")
    Bd = spec.variadic("Bd", max_rank=6); S, H = spec.dims("S H")
    T, U = spec.dtype_vars("T U")
    spec.input("dy", T, [Bd, S, H]) ...
    spec.dtypes((T, U), [(f32, f32), (f16, f16), ...])

    @spec.body
    def _(b, dy, x, ...): ... return {"pd_x": ..., ...}

`spec.bind(...)` validates concrete inputs (the interpreter's first step, DESIGN.md "The
interpreter") and `spec.graph(key)` traces the body into the IR for one specialisation: the
values of the static (behaviour-selecting) attributes, which optional inputs are present and which
shape form each multi-form input uses. Every declaration remembers its spec file line.
"""

from __future__ import annotations

import inspect
import itertools
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from opgen.errors import SpecError, ValidationError
from opgen.ir.core import Graph, Param, TensorType, Value
from opgen.ir.dims import Constraint, DimExpr, Lit, Sym, Variadic, as_dim, shape_str, subst
from opgen.ir.dtypes import DType, DTypeVar, dtype_of_array, parse_dtype
from opgen.ir.verify import verify

F32 = DType.f32
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _loc(depth=2) -> str:
    """file:line of the spec statement `depth` frames up (declarations remember where they were made)."""
    fr = sys._getframe(depth)
    return f"{fr.f_code.co_filename}:{fr.f_lineno}"


@dataclass
class DimDecl:
    """A named dim with its domain: min..max, multiple_of, `absent` value when no present input binds it."""

    name: str
    min: int = 1
    max: int | None = None
    multiple_of: int | None = None
    absent: int | None = None
    loc: str = ""


@dataclass
class VariadicDecl:
    """A group of 0..max_rank leading dims (`*Bd`)."""

    name: str
    min_rank: int = 0
    max_rank: int = 6
    loc: str = ""


@dataclass
class InputDecl:
    """An operator input: OpDef name, dtype (concrete or variable), shape form(s), optional, host array."""

    name: str
    dtype: Any
    shapes: list
    optional: bool = False
    host: bool = False
    doc: str = ""
    loc: str = ""
    when: Callable | None = None


@dataclass
class OutputDecl:
    """An operator output: name, dtype, shape (or `like` another input's shape), optional."""

    name: str
    dtype: Any
    shape: tuple | None = None
    like: str | None = None
    optional: bool = False
    doc: str = ""
    loc: str = ""


@dataclass
class AttrDecl:
    """An attribute: type, default, allowed values, static (selects behaviour) and an optional dim it binds."""

    name: str
    type: type
    default: Any = None
    choices: tuple | None = None
    static: bool = False
    dim: Sym | None = None
    required: bool = False
    doc: str = ""
    loc: str = ""


@dataclass
class Requirement:
    """A check on a specialisation or on concrete inputs; `fn` returns None when it holds else a rule."""

    param: str
    fn: Callable
    kind: str  # "static" | "values"
    loc: str = ""


@dataclass(frozen=True)
class SpecKey:
    """Identifies one specialisation: static attribute values, presence of optional inputs, shape forms."""

    static: tuple
    present: tuple
    forms: tuple


@dataclass
class Bound:
    """Result of validating concrete inputs against a spec.

    arrays: converted inputs (declared dtype; None for absent optionals); attrs: all attribute values;
    dtypes: binding of dtype variables; env: dim values (variadic groups as tuples); key: specialisation.
    """

    key: SpecKey
    arrays: dict
    attrs: dict
    dtypes: dict
    env: dict


def _norm_shape(shape) -> tuple:
    return tuple(d if isinstance(d, Variadic) else as_dim(d) for d in shape)


class OpSpec:
    """An operator declared as CANN declares it (see module docstring)."""

    def __init__(self, name: str, *, aclnn: str, socs, round: str = "rint", doc: str = "", source: str = ""):
        if round not in ("rint", "round"):
            raise SpecError(f"{_loc()}: round must be 'rint' or 'round', got {round!r}")
        if not _IDENT.match(name):
            raise SpecError(f"{_loc()}: op name {name!r} is not a valid C identifier")
        self.name = name
        self.aclnn = aclnn
        self.socs = tuple(socs)
        self.round = round
        self.doc = doc
        self.source = source
        self.file = sys._getframe(1).f_code.co_filename
        self.dims_: dict[str, DimDecl] = {}
        self.variadics: dict[str, VariadicDecl] = {}
        self.dtype_vars_: dict[str, DTypeVar] = {}
        self.inputs: list[InputDecl] = []
        self.outputs: list[OutputDecl] = []
        self.attrs: list[AttrDecl] = []
        self.dtype_table: tuple = ()
        self.dtype_rows: list[dict] = []
        self.constraints: list[tuple[Constraint, str, str]] = []
        self.requirements: list[Requirement] = []
        self.body_fn: Callable | None = None
        self.example_fn: Callable | None = None
        self._graphs: dict[SpecKey, Graph] = {}

    # -- declarations -----------------------------------------------------------------------
    def dim(self, name, *, min=1, max=None, multiple_of=None, absent=None) -> Sym:
        """Declare a symbolic dim (elements). Raises SpecError on a bad name or duplicate."""
        self._new_name(name)
        self.dims_[name] = DimDecl(name, min, max, multiple_of, absent, _loc())
        return Sym(name)

    def dims(self, names: str, *, min=1, max=None, multiple_of=None, absent=None) -> tuple:
        """Declare several dims with the same domain: `S, H = spec.dims("S H")`."""
        out = []
        for n in names.split():
            out.append(self.dim(n, min=min, max=max, multiple_of=multiple_of, absent=absent))
            self.dims_[n].loc = _loc()
        return tuple(out)

    def variadic(self, name, *, min_rank=0, max_rank=6) -> Variadic:
        """Declare a variadic group of leading dims (`*Bd`)."""
        self._new_name(name)
        self.variadics[name] = VariadicDecl(name, min_rank, max_rank, _loc())
        return Variadic(name)

    def dtype_vars(self, names: str) -> tuple:
        """Declare dtype variables (`T`, `U`)."""
        out = []
        for n in names.split():
            if n in self.dtype_vars_:
                raise SpecError(f"{_loc()}: dtype variable {n} declared twice")
            try:
                parse_dtype(n)
                raise SpecError(f"{_loc()}: dtype variable {n!r} clashes with a dtype name")
            except KeyError:
                pass
            self.dtype_vars_[n] = DTypeVar(n)
            out.append(DTypeVar(n))
        return tuple(out)

    def input(self, name, dtype, shape, *, optional=False, host=False, when=None, doc="") -> None:
        """Declare an input (OpDef spelling). `shape` is one shape or a list of alternative forms.

        `when(static_attrs, present) -> bool` marks an optional input used only in some modes (LayerNorm
        weights only for normType 2); elsewhere a given tensor is validated, then ignored."""
        loc = _loc()
        self._check_param_name(name, loc)
        self._check_dtype(dtype, loc)
        shapes = [tuple(s) for s in shape] if shape and isinstance(shape[0], (list, tuple)) else [tuple(shape)]
        for s in shapes:
            self._check_shape(s, loc)
        shapes = [_norm_shape(s) for s in shapes]
        if when is not None and not optional:
            raise SpecError(f"{loc}: input {name}: when= needs optional=True")
        self.inputs.append(InputDecl(name, dtype, shapes, optional, host, doc, loc, when))

    def output(self, name, dtype, shape=None, *, like=None, optional=False, doc="") -> None:
        """Declare an output with a shape, or `like=` an input whose (chosen form of the) shape it takes."""
        loc = _loc()
        self._check_param_name(name, loc)
        self._check_dtype(dtype, loc)
        if (shape is None) == (like is None):
            raise SpecError(f"{loc}: output {name}: give exactly one of shape= or like=")
        if like is not None and like not in {i.name for i in self.inputs}:
            raise SpecError(f"{loc}: output {name}: like={like!r} is not a declared input")
        if shape is not None:
            shape = tuple(shape)
            self._check_shape(shape, loc)
            shape = _norm_shape(shape)
        self.outputs.append(OutputDecl(name, dtype, shape, like, optional, doc, loc))

    def attr(self, name, type_, default=None, *, choices=None, static=False, dim=None, required=False, doc=""):
        """Declare an attribute. Static attributes (behaviour selectors) need `choices`."""
        loc = _loc()
        self._check_param_name(name, loc)
        if type_ not in (int, float, bool, str):
            raise SpecError(f"{loc}: attribute {name}: type must be int, float, bool or str")
        if static and not choices and type_ is not bool:
            raise SpecError(f"{loc}: static attribute {name} needs its allowed values (choices=)")
        if type_ is bool and static and not choices:
            choices = (False, True)
        if choices is not None and default is not None and default not in choices:
            raise SpecError(f"{loc}: attribute {name}: default {default!r} is not one of {choices}")
        if dim is not None and not isinstance(dim, Sym):
            raise SpecError(f"{loc}: attribute {name}: dim= must be a declared dim")
        self.attrs.append(AttrDecl(name, type_, default, tuple(choices) if choices else None, static, dim, required,
                                   doc, loc))

    def dtypes(self, columns, rows) -> None:
        """The dtype-combination table: one column per dtype variable, one row per supported binary."""
        loc = _loc()
        cols = tuple(columns)
        for c in cols:
            if not isinstance(c, DTypeVar) or c.name not in self.dtype_vars_:
                raise SpecError(f"{loc}: dtype table column {c!r} is not a declared dtype variable")
        used = {i.dtype for i in self.inputs + self.outputs if isinstance(i.dtype, DTypeVar)}
        if set(cols) != used:
            raise SpecError(f"{loc}: dtype table columns {sorted(map(repr, cols))} must be exactly the variables "
                            f"used by inputs/outputs {sorted(map(repr, used))}")
        out = []
        for r in rows:
            if len(r) != len(cols):
                raise SpecError(f"{loc}: dtype table row {r} has {len(r)} entries, expected {len(cols)}")
            for d in r:
                if not isinstance(d, DType):
                    raise SpecError(f"{loc}: dtype table row {r}: {d!r} is not a dtype")
            row = dict(zip((c.name for c in cols), r))
            if row in out:
                raise SpecError(f"{loc}: dtype table row {r} is listed twice")
            out.append(row)
        self.dtype_table = cols
        self.dtype_rows = out

    def require(self, constraint: Constraint, param: str, rule: str | None = None) -> None:
        """A dim relation that every valid call satisfies; a violation blames `param`."""
        loc = _loc()
        if not isinstance(constraint, Constraint):
            raise SpecError(f"{loc}: require() needs a dim relation such as `(N1 % N2).eq(0)` or `R <= Sq + Seq`, got {constraint!r}")
        for s in constraint.symbols():
            if s not in self.dims_ and s not in self.variadics:
                raise SpecError(f"{loc}: constraint {constraint} uses undeclared dim {s}")
        self.constraints.append((constraint, param, rule or f"must satisfy {constraint}", loc))

    def check(self, param: str, fn: Callable, *, on: str = "static") -> None:
        """A custom check. on="static": fn(attrs, present) -> rule|None, run before shapes;
        on="values": fn(arrays, env, attrs) -> rule|None, run on converted inputs (index ranges...)."""
        if on not in ("static", "values"):
            raise SpecError(f"{_loc()}: check(on=) must be 'static' or 'values'")
        self.requirements.append(Requirement(param, fn, on, _loc()))

    def body(self, fn: Callable) -> Callable:
        """Decorator registering the computation: fn(b, **inputs, **attrs) -> {output name: tensor}."""
        self.body_fn = fn
        return fn

    def example(self, fn: Callable) -> Callable:
        """Decorator for a valid-input maker: fn(rng, inputs, env, attrs) fills/overrides `inputs`
        (e.g. statistics computed from x, legal topk indices); used by `opgen interpret --dims`."""
        self.example_fn = fn
        return fn

    # -- helpers ----------------------------------------------------------------------------
    def _new_name(self, name):
        if not _IDENT.match(name):
            raise SpecError(f"{_loc(3)}: dim name {name!r} is not an identifier")
        if name in self.dims_ or name in self.variadics:
            raise SpecError(f"{_loc(3)}: dim {name} declared twice")
        try:
            parse_dtype(name)
            raise SpecError(f"{_loc(3)}: dim name {name!r} clashes with a dtype name")
        except KeyError:
            pass

    def _check_param_name(self, name, loc):
        if not _IDENT.match(name):
            raise SpecError(f"{loc}: {name!r} is not a valid C identifier")
        if name in {p.name for p in self.inputs + self.outputs + self.attrs}:
            raise SpecError(f"{loc}: parameter {name!r} declared twice")

    def _check_dtype(self, dt, loc):
        if isinstance(dt, DTypeVar):
            if dt.name not in self.dtype_vars_:
                raise SpecError(f"{loc}: dtype variable {dt.name} is not declared (spec.dtype_vars)")
        elif not isinstance(dt, DType):
            raise SpecError(f"{loc}: {dt!r} is not a dtype")

    def _check_shape(self, shape, loc):
        nvar = 0
        for d in shape:
            if isinstance(d, Variadic):
                nvar += 1
                if d.name not in self.variadics:
                    raise SpecError(f"{loc}: variadic *{d.name} is not declared")
            else:
                d = as_dim(d)
                for s in d.symbols():
                    if s not in self.dims_ and s not in self.variadics:
                        raise SpecError(f"{loc}: dim {s} is not declared")
        if nvar > 1:
            raise SpecError(f"{loc}: a shape may hold at most one variadic group")

    def input_decl(self, name) -> InputDecl:
        """The InputDecl called `name`. Raises KeyError."""
        for i in self.inputs:
            if i.name == name:
                return i
        raise KeyError(name)

    @property
    def static_attrs(self):
        """Attributes whose values select behaviour (one specialisation per value)."""
        return [a for a in self.attrs if a.static]

    @property
    def runtime_attrs(self):
        """Attributes passed to the graph as values (eps, scale) or bound to dims."""
        return [a for a in self.attrs if not a.static]

    # -- specialisations ----------------------------------------------------------------------
    def keys(self):
        """Every specialisation key: static attribute values x presence of optional inputs x shape forms.

        Keys whose static checks fail (e.g. weights absent for normType 2) are skipped."""
        opts = [i for i in self.inputs if i.optional]
        free = [i for i in opts if i.when is None]
        gated = [i for i in opts if i.when is not None]
        multi = [i for i in self.inputs if len(i.shapes) > 1]
        out = []
        for st in itertools.product(*[a.choices for a in self.static_attrs]):
            attrs = {a.name: v for a, v in zip(self.static_attrs, st)}
            for pres in itertools.product((True, False), repeat=len(free)):
                base = {i.name: True for i in self.inputs if not i.optional}
                base.update({i.name: p for i, p in zip(free, pres)})
                used = [i.when(attrs, base) for i in gated]
                for gp in itertools.product(*[(True, False) if u else (False,) for u in used]):
                    present = dict(base)
                    present.update({i.name: p for i, p in zip(gated, gp)})
                    if any(r.fn(attrs, present) for r in self.requirements if r.kind == "static"):
                        continue
                    for forms in itertools.product(*[range(len(i.shapes)) for i in multi]):
                        out.append(SpecKey(tuple(st), tuple(present[i.name] for i in opts), tuple(forms)))
        return out

    def graph(self, key: SpecKey) -> Graph:
        """The verified IR graph of one specialisation (traced once, then cached)."""
        g = self._graphs.get(key)
        if g is None:
            g = self._trace(key)
            verify(g)
            self._graphs[key] = g
        return g

    def _trace(self, key: SpecKey) -> Graph:
        from opgen.dsl.builder import Builder, Tensor

        if self.body_fn is None:
            raise SpecError(f"{self.file}: spec {self.name} has no @spec.body")
        b = Builder()
        opts = [i for i in self.inputs if i.optional]
        present = dict(zip((i.name for i in opts), key.present))
        multi = [i.name for i in self.inputs if len(i.shapes) > 1]
        forms = dict(zip(multi, key.forms))
        params, kwargs, shapes = [], {}, {}
        bound_syms = set()
        for i in self.inputs:
            if not i.optional or present[i.name]:
                for d in i.shapes[forms.get(i.name, 0)]:
                    if isinstance(d, Sym):
                        bound_syms.add(d.name)
        absent = {n: Lit(d.absent) for n, d in self.dims_.items() if d.absent is not None and n not in bound_syms}
        for i in self.inputs:
            if i.optional and not present[i.name]:
                kwargs[i.name] = None
                continue
            shape = tuple(subst(d, absent) for d in i.shapes[forms.get(i.name, 0)])
            shapes[i.name] = shape
            v = Value(i.name, TensorType(i.dtype, tuple(d if isinstance(d, Variadic) else as_dim(d) for d in shape)))
            params.append(Param(v, "input"))
            t = Tensor(b, v)
            if isinstance(i.dtype, DTypeVar) or (i.dtype.is_float and i.dtype != F32):
                t = b.cast(t, F32)
            kwargs[i.name] = t
        for a, v in zip(self.static_attrs, key.static):
            kwargs[a.name] = v
        for a in self.runtime_attrs:
            if a.type in (int, float) and a.dim is None:
                dt = F32 if a.type is float else DType.i64
                v = Value(a.name, TensorType(dt, ()))
                params.append(Param(v, "attr"))
                kwargs[a.name] = Tensor(b, v)
            elif a.dim is not None:
                kwargs[a.name] = a.dim
        try:
            inspect.signature(self.body_fn).bind(b, **kwargs)
        except TypeError as e:
            raise SpecError(f"{self.file}: body of {self.name} must take b and every input and attribute: {e}") from None
        result = self.body_fn(b, **kwargs)
        if not isinstance(result, dict):
            raise SpecError(f"{self.file}: body of {self.name} must return a dict of outputs")
        declared = {o.name: o for o in self.outputs}
        outputs = []
        for name, t in result.items():
            o = declared.get(name)
            if o is None:
                raise SpecError(f"{self.file}: body of {self.name} returns undeclared output {name!r}")
            want = shapes[o.like] if o.like else o.shape
            want = tuple(d if isinstance(d, Variadic) else subst(as_dim(d), absent) for d in want)
            if not isinstance(t, Tensor) or t.shape != want:
                got = shape_str(t.shape) if isinstance(t, Tensor) else repr(t)
                raise SpecError(f"{o.loc}: output {name}: body gives shape {got}, declared {shape_str(want)}")
            if o.dtype != t.dtype:
                if not (isinstance(o.dtype, DTypeVar) or o.dtype.is_float):
                    t = b.cast(t, o.dtype)
                else:
                    t = b.cast(t, o.dtype, self.round)
            outputs.append((name, t.value.name))
        for o in self.outputs:
            if not o.optional and o.name not in result:
                raise SpecError(f"{o.loc}: required output {o.name} is not produced by the body")
        order = {o.name: k for k, o in enumerate(self.outputs)}
        outputs.sort(key=lambda kv: order[kv[0]])
        return Graph(self.name, tuple(params), tuple(b.nodes), tuple(outputs))

    # -- validation of concrete inputs --------------------------------------------------------
    def bind(self, inputs: dict, attrs: dict | None = None, dtypes: dict | None = None) -> Bound:
        """Validate concrete inputs and attributes (DESIGN.md "The interpreter").

        inputs: {input name: array or None}; attrs: {name: value or string}; dtypes: {"T": "bfloat16", ...}.
        Returns a `Bound`. Raises ValidationError naming the parameter and the rule.
        """
        from opgen.dsl.validate import bind

        return bind(self, inputs, attrs or {}, dtypes or {})
