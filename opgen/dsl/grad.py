"""`derive_grad`: a backward operator's spec derived from its forward spec (docs/design.md "Backward from forward").

    from opgen.dsl import derive_grad
    spec = derive_grad("rms_norm.py", "RmsNormGrad", aclnn="aclnnRmsNormGrad", wrt=["x", "gamma"],
                       saved=["rstd"], grads={"y": "dy"}, names={"x": "dx", "gamma": "dgamma"})

The result is an ordinary OpSpec: the forward's dims, dtype variables, attributes, relations, static checks and
the values checks of the inputs it keeps;
inputs: the incoming gradients (the differentiated outputs' dtypes and shapes), the forward inputs the derivative
reads (plus optional inputs whose gradient is asked for, their presence selects the specialisation), the saved
outputs; outputs: the gradients, each in the dtype of its input unless `dtypes=` says otherwise. Its body traces
the forward specialisation and differentiates it with `opgen.ir.autodiff.differentiate`.
"""

from __future__ import annotations

import copy
import functools
import os

from opgen.dsl.builder import Tensor
from opgen.dsl.diagnostics import caller_loc, spec_error
from opgen.dsl.keys import SpecKey
from opgen.dsl.rules import keep_names
from opgen.dsl.spec import InputDecl, OpSpec, OutputDecl, Requirement, param_name_problem, short_loc, did_you_mean
from opgen.errors import IRError
from opgen.ir.autodiff import NoDerivative, differentiate
from opgen.ir.core import TensorType, Value
from opgen.ir.dtypes import DType, DTypeVar
from opgen.ir.printer import print_graph
from opgen.ir.records import evolve

__all__ = ["derive_grad"]


def _names(v, param: str, loc) -> list:
    if isinstance(v, str) or not isinstance(v, (list, tuple)):
        raise spec_error(loc, f"derive_grad: {param}={v!r} is not a list of names",
                         f'give {param}= as a list of strings, e.g. {param}=["x"]', arg=param)
    for x in v:
        if not isinstance(x, str):
            raise spec_error(loc, f"derive_grad: {param} entry {x!r} is not a name", "use strings", arg=param)
    if len(set(v)) != len(v):
        raise spec_error(loc, f"derive_grad: {param} names an entry twice", "list each name once", arg=param)
    return list(v)


def _mapping(v, param: str, loc) -> dict:
    if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()):
        raise spec_error(loc, f"derive_grad: {param}={v!r} is not a dict of names",
                         f'give {param}= as {{"forward name": "new name"}}', arg=param)
    return dict(v)


def _load_forward(forward, loc) -> OpSpec:
    if isinstance(forward, OpSpec):
        return forward
    if isinstance(forward, (str, os.PathLike)):
        from opgen.registry import load_spec, spec_home   # lazy: start-up time (the registry loads this module)

        path = os.fspath(forward)
        if not os.path.isabs(path):
            path = os.path.join(spec_home(loc.file), path)
        if not os.path.isfile(path):
            raise spec_error(loc, f"derive_grad: forward spec file {os.fspath(forward)!r} does not exist",
                             "name the forward spec file relative to this one (\"rms_norm.py\"), or pass its OpSpec",
                             arg=(0, "forward"))

        return load_spec(path)
    raise spec_error(loc, f"derive_grad: forward={forward!r} is not an OpSpec or a spec file",
                     "pass the forward spec (an OpSpec) or its file name", arg=(0, "forward"))


def derive_grad(forward, name: str, *, aclnn: str, wrt, grads, names, saved=(), dtypes=None, socs=None,
                dim_max=None, doc: str = "") -> OpSpec:
    """The backward OpSpec of `forward` (an OpSpec or a spec file path relative to the calling file).

    wrt: forward input names to differentiate (float inputs); grads: {forward output: incoming-gradient input
    name}; names: {wrt input: gradient output name}, one per wrt entry; saved: forward outputs the backward takes
    as inputs (same name, the output's dtype and shape) whose defining values the derivative reuses; dtypes:
    {gradient output or saved input: dtype or one of the forward's dtype variables}; socs: default the forward's;
    dim_max: {dim: a lower max} where the backward's kernel needs more UB per row than the forward's.
    Raises SpecError naming the parameter and the rule for any bad argument, and at the forward spec line for
    an op on the differentiated path that has no derivative (opgen.ir.autodiff.RULES).
    """
    loc = caller_loc()
    fwd = _load_forward(forward, loc)
    wrt = _names(wrt, "wrt", loc)
    saved = _names(saved, "saved", loc)
    grads = _mapping(grads, "grads", loc)
    names = _mapping(names, "names", loc)
    dtypes = dict(dtypes or {})
    ins = {i.name: i for i in fwd.inputs}
    outs = {o.name: o for o in fwd.outputs}
    if not wrt:
        raise spec_error(loc, "derive_grad: wrt= is empty", "name at least one forward input to differentiate",
                         arg="wrt")
    if fwd.static_dtype_vars:   # the backward's keys would not carry them (SpecKey.dtypes)
        raise spec_error(loc, f"derive_grad: {fwd.name} has static dtype variables "
                         f"({', '.join(fwd.static_dtype_vars)}: dtype_vars(static=True)), whose body form the "
                         f"derived backward does not select", "write the backward spec by hand", arg=0)
    for x in wrt:
        if x not in ins:
            raise spec_error(loc, f"derive_grad: wrt entry {x!r} is not an input of {fwd.name}{did_you_mean(x, ins)}",
                             f"name forward inputs ({', '.join(ins)})", arg="wrt", token=x)
        dt = ins[x].dtype
        if isinstance(dt, DType) and not dt.is_float:
            raise spec_error(loc, f"derive_grad: wrt entry {x!r} has dtype {dt!r}; only float inputs have gradients",
                             "drop it from wrt=", arg="wrt", token=x)
    if not grads:
        raise spec_error(loc, "derive_grad: grads= is empty", 'give the incoming gradient of an output: {"y": "dy"}',
                         arg="grads")
    for o in list(grads) + saved:
        if o not in outs:
            raise spec_error(loc, f"derive_grad: {o!r} is not an output of {fwd.name}{did_you_mean(o, outs)}",
                             f"name forward outputs in grads= and saved= ({', '.join(outs)})", arg="grads" if o in grads else "saved",
                             token=o)
    for o in grads:
        dt = outs[o].dtype
        if isinstance(dt, DType) and not dt.is_float:
            raise spec_error(loc, f"derive_grad: grads entry {o!r} is a {dt!r} output; only float outputs are "
                             "differentiated", "drop it from grads=", arg="grads", token=o)
    if set(names) != set(wrt):
        missing = [x for x in wrt if x not in names]
        extra = [x for x in names if x not in wrt]
        raise spec_error(loc, "derive_grad: names= must give one gradient name per wrt entry"
                         + (f"; missing {', '.join(missing)}" if missing else "")
                         + (f"; {', '.join(extra)} not in wrt" if extra else ""),
                         'map each wrt input to its gradient output: names={"x": "dx"}', arg="names")
    new = list(grads.values()) + list(names.values())
    for n in new:
        if param_name_problem(n):
            raise spec_error(loc, f"derive_grad: name {n!r} {param_name_problem(n)}", "use a C identifier",
                             arg="names" if n in names.values() else "grads", token=n)
    taken = set(ins) | {a.name for a in fwd.attrs} | set(saved)
    for n in new:
        if n in taken or new.count(n) > 1:
            raise spec_error(loc, f"derive_grad: name {n!r} is used twice (a forward input, attribute, saved output "
                             "or another new name)", "give each incoming gradient and gradient its own name",
                             arg="names" if n in names.values() else "grads", token=n)
    for k, dt in dtypes.items():
        if k not in names.values() and k not in saved:
            raise spec_error(loc, f"derive_grad: dtypes key {k!r} is not a gradient output or a saved input",
                             "key dtypes= by the names of gradient outputs (names= values) or saved outputs",
                             arg="dtypes", token=k)
        if not (isinstance(dt, DType) or (isinstance(dt, DTypeVar) and dt.name in fwd.dtype_vars_)):
            raise spec_error(loc, f"derive_grad: dtypes[{k!r}] = {dt!r} is not a dtype or a dtype variable of "
                             f"{fwd.name}", "use f32, f16, bf16 or one of the forward's dtype variables",
                             arg="dtypes", token=k)
    dim_max = dict(dim_max or {})
    for k, v in dim_max.items():
        dd = fwd.dims_.get(k)
        if dd is None:
            raise spec_error(loc, f"derive_grad: dim_max key {k!r} is not a dim of {fwd.name} "
                             f"(dims: {', '.join(fwd.dims_)})", "name a declared dim", arg="dim_max", token=k)
        if isinstance(v, bool) or not isinstance(v, int) or v < dd.min or (dd.max is not None and v > dd.max):
            raise spec_error(loc, f"derive_grad: dim_max[{k!r}] = {v!r} must be an int in [{dd.min}, "
                             f"{dd.max if dd.max is not None else 'inf'}] (the forward's domain)",
                             "give a smaller max within the forward's range", arg="dim_max", token=k)
    d = _Derivation(fwd, wrt, grads, names, saved, dtypes, loc)
    spec = d.build(name, aclnn, socs, doc)
    for k, v in dim_max.items():
        spec.dims_[k].max = v
    return spec


class _Derivation:
    """The derivation of one backward spec: the forward, the arguments, and the derived graph per forward key."""

    def __init__(self, fwd, wrt, grads, names, saved, dtypes, loc):
        self.fwd, self.wrt, self.grads, self.names, self.saved, self.dtypes = fwd, wrt, grads, names, saved, dtypes
        self.loc = loc
        self._cache: dict = {}

    def out_type(self, o, key: SpecKey, dtype=None) -> TensorType:
        """The type of forward output `o` in specialisation `key` (from the traced forward graph)."""
        g = self.fwd.graph(key)
        v = dict(g.outputs)[o]
        t = next(n.result.type for n in reversed(g.nodes) if n.result.name == v) if v not in {
            p.value.name for p in g.params} else next(p.value.type for p in g.params if p.value.name == v)
        return TensorType(dtype if dtype is not None else t.dtype, t.shape)

    def derived(self, key: SpecKey, absent: frozenset = frozenset()):
        """The gradient graph of forward specialisation `key` (cached); `absent`: saved outputs not given (their
        values are recomputed)."""
        hit = self._cache.get((key, absent))
        if hit is not None:
            return hit
        g = self.fwd.graph(key)
        outs = dict(g.outputs)
        od = {o.name: o for o in self.fwd.outputs}
        gv = {o: Value(n, self.out_type(o, key)) for o, n in self.grads.items() if o in outs}
        sv = {o: Value(o, self.out_type(o, key, self.dtypes.get(o, od[o].dtype))) for o in self.saved
              if o in outs and o not in absent}
        pnames = {p.value.name for p in g.params}
        wrt = {x: self.names[x] for x in self.wrt if x in pnames}
        try:
            dg = differentiate(g, wrt, gv, sv)
        except NoDerivative as e:
            raise spec_error(self._forward_loc(e.node.loc), f"{self.fwd.name}: {e}",
                             "this op has no derivative: rewrite the forward with differentiable ops, or write the "
                             "backward by hand") from None
        except IRError as e:
            raise spec_error(self.loc, f"derive_grad: {e}", "check wrt=, grads= and saved=") from None
        self._cache[(key, absent)] = dg
        return dg

    def _forward_loc(self, short):
        file, _, line = str(short).rpartition(":")
        full = os.path.join(os.path.dirname(self.fwd.file), file)
        return f"{full}:{line}" if file and os.path.isfile(full) else self.loc

    def read(self) -> set:
        """Names of forward params (inputs, runtime attributes) some specialisation's derivative reads."""
        used = set()
        for key in self.fwd.keys():
            dg = self.derived(key)
            for n in dg.nodes:
                used.update(n.inputs)
        return used

    def build(self, name, aclnn, socs, doc) -> OpSpec:
        """The backward OpSpec."""
        fwd = self.fwd
        read = self.read()
        keep_in = [i for i in fwd.inputs if i.name in read or (i.name in self.wrt and (i.optional or len(i.shapes) > 1))]
        keep_in += [i for i in fwd.inputs if i not in keep_in and i.optional and self._presence_matters(i)]
        keep_in = [i for i in fwd.inputs if i in keep_in]   # forward order
        spec = OpSpec(name, aclnn=aclnn, socs=tuple(socs) if socs is not None else fwd.socs, round=fwd.round,
                      doc=doc or f"Gradients of {fwd.name} with respect to {', '.join(self.wrt)}.",
                      source=fwd.source)
        spec.dims_ = copy.deepcopy(fwd.dims_)
        spec.variadics = copy.deepcopy(fwd.variadics)
        spec.dtype_vars_ = dict(fwd.dtype_vars_)
        spec._dtype_var_locs = dict(fwd._dtype_var_locs)
        spec.repository, spec.category = fwd.repository, fwd.category
        spec.example_call_ = copy.deepcopy(fwd.example_call_)
        first = fwd.keys()[0]
        for o, n in self.grads.items():
            od = next(x for x in fwd.outputs if x.name == o)
            spec.inputs.append(InputDecl(n, od.dtype, self._out_shapes(od), False, False,
                                         f"gradient of {fwd.name}'s output {o}", str(self.loc), None,
                                         *self._picked_by(od)))
        for i in keep_in:
            spec.inputs.append(copy.copy(i))
        for o in self.saved:
            od = next(x for x in fwd.outputs if x.name == o)
            when = self._produced(o, keep_in) if od.optional else None
            spec.inputs.append(InputDecl(o, self.dtypes.get(o, od.dtype), self._out_shapes(od), od.optional, False,
                                         f"{fwd.name}'s output {o}, saved by the forward", str(self.loc), when,
                                         *self._picked_by(od)))
            if when is not None:
                spec.requirements.append(Requirement(
                    o, lambda a, pr, o=o, when=when: f"required where {self.fwd.name} outputs it" if
                    when(a, pr) and not pr[o] else None, "static", str(self.loc)))
        kept_names = {i.name for i in spec.inputs}
        for x in self.wrt:
            i = fwd.input_decl(x)
            dt = self.dtypes.get(self.names[x], i.dtype)
            if i.form_by is not None:   # the gradient has x's shape in each form the attribute picks
                od = OutputDecl(self.names[x], dt, None, None, i.optional, f"gradient of {x}", str(self.loc),
                                i.form_by, list(i.shapes), i.choices)
            elif len(i.shapes) > 1:
                od = OutputDecl(self.names[x], dt, None, x, i.optional, f"gradient of {x}", str(self.loc))
            else:
                od = OutputDecl(self.names[x], dt, i.shapes[0], None, i.optional, f"gradient of {x}", str(self.loc))
            spec.outputs.append(od)
        spec.attrs = [copy.copy(a) for a in fwd.attrs if a.static or a.dim is not None or a.name in read]
        if spec.example_call_:   # the forward's call example, less the attributes this operator does not declare
            spec.example_call_["attrs"] = {k: v for k, v in spec.example_call_["attrs"].items()
                                           if any(a.name == k for a in spec.attrs)}
        names = kept_names | {a.name for a in spec.attrs}
        blame = next(iter(self.grads.values()))   # a relation whose blamed input is gone blames the gradient
        ruled = spec.rule_names()   # a copied rule text keeps {name} of this spec's names, spells out the rest
        spec.relations = [evolve(r, param=r.param if r.param in names else blame, rule=keep_names(r.rule, ruled))
                          for r in fwd.relations]   # a mode's relation (require(when=)) keeps its when
        kept = [r for r in fwd.requirements if r.param in names]
        spec.requirements = [_keeping(r, ruled) if r.kind == "static" else _keeping_values(r, ruled, fwd.name, spec.name)
                             for r in kept] + [r for r in spec.requirements if r.param in self.saved]
        used_vars = []
        for p in spec.inputs + spec.outputs:
            if isinstance(p.dtype, DTypeVar) and p.dtype not in used_vars:
                used_vars.append(p.dtype)
        cols = tuple(c for c in fwd.dtype_table if c in used_vars)
        rows = []
        for r in fwd.dtype_rows:
            row = {c.name: r[c.name] for c in cols}
            if row not in rows:
                rows.append(row)
        spec.dtype_table, spec.dtype_rows = cols, rows
        spec._dtypes_loc = str(self.loc) if cols else None
        spec.dtype_vars_ = {n: v for n, v in spec.dtype_vars_.items() if v in cols}
        spec.derived_from = fwd
        self._install_body(spec, keep_in, first)
        return spec

    def _produced(self, o, keep_in):
        """when= of the saved input of optional forward output `o`: whether the forward specialisation of the
        backward's static attributes and (free) optional inputs outputs it. It reads only the attributes and
        presences that decide it (the emitted host checks are built from what a check reads)."""
        fwd = self.fwd
        opts = [i.name for i in fwd.inputs if i.optional]
        kept = {i.name for i in keep_in if i.when is None}
        rows = []
        for key in fwd.keys():
            row = {("a", x.name): v for x, v in zip(fwd.static_attrs, key.static)}
            row.update({("p", n): p for n, p in zip(opts, key.present) if n in kept})
            rows.append((row, o in dict(fwd.graph(key).outputs)))
        names = list(rows[0][0]) if rows else []
        seen: dict = {}
        for row, v in rows:
            seen.setdefault(tuple(row[n] for n in names), set()).add(v)

        def decides(n):
            k = names.index(n)
            groups: dict = {}
            for vals, vs in seen.items():
                groups.setdefault(vals[:k] + vals[k + 1:], set()).update((vals[k], v) for v in vs)
            return any(len({v for _x, v in g}) > 1 for g in groups.values())

        deciding = [n for n in names if decides(n)]
        table: dict = {}
        for row, v in rows:
            table.setdefault(tuple(row[n] for n in deciding), set()).add(v)

        def when(a, pr):
            vals = tuple(a[n] if kind == "a" else pr[n] for kind, n in deciding)
            return True in table.get(vals, ())
        return when

    def _out_shapes(self, od) -> list:
        if od.form_by is not None:
            return [tuple(s) for s in od.shapes]
        if od.shape is not None:
            return [tuple(od.shape)]
        return list(self.fwd.input_decl(od.like).shapes)

    def _picked_by(self, od) -> tuple:
        """(form_by, choices) of an input made from forward output `od`: an output whose shape an attribute picks
        stays picked by it; the shapes of a `like=` output follow its input's."""
        if od.form_by is not None:
            return od.form_by, od.choices
        if od.like is not None:
            i = self.fwd.input_decl(od.like)
            return i.form_by, i.choices
        return None, ()

    def _presence_matters(self, i) -> bool:
        """Whether an optional forward input the derivative never reads still changes the derived graph."""
        opts = [x.name for x in self.fwd.inputs if x.optional]
        k = opts.index(i.name)
        texts: dict = {}
        for key in self.fwd.keys():
            other = key.present[:k] + key.present[k + 1:]
            texts.setdefault((key.static, other, key.forms), set()).add(print_graph(self.derived(key)))
        return any(len(t) > 1 for t in texts.values())

    def _install_body(self, spec, keep_in, first):
        fwd = self.fwd
        kept = {i.name for i in keep_in}
        opts = [i for i in fwd.inputs if i.optional]
        multi = [i for i in fwd.inputs if len(i.shapes) > 1]
        keys = set(fwd.keys())

        def body(b, **kw):
            static = tuple(kw[a.name] for a in fwd.static_attrs)
            present = tuple((kw[i.name] is not None) if i.name in kept else False for i in opts)
            picked = {a.name: v for a, v in zip(fwd.static_attrs, static)}
            forms = tuple(i.form_of(picked) if i.form_by is not None else
                          i.shapes.index(tuple(kw[i.name].shape)) if i.name in kept and kw[i.name] is not None
                          and tuple(kw[i.name].shape) in i.shapes else 0 for i in multi)
            key = SpecKey(static, present, forms)
            if key not in keys:   # an unread optional input: take the presence the forward allows
                key = next(k for k in fwd.keys() if k.static == static and k.forms == forms and all(
                    p == q for i, p, q in zip(opts, k.present, present) if i.name in kept))
            absent = frozenset(o for o in self.saved if kw.get(o, 0) is None)
            dg = self.derived(key, absent)
            return _replay(b, dg, kw, short_loc(self.loc))

        spec.body_fn = body
        spec._body_loc = self.loc


def _replay(b, dg, kw, loc: str) -> dict:
    """Emit the derived graph's nodes into the backward's builder; {gradient name: tensor}. A node the forward gives
    no line (a saved input brought back through its views) takes `loc`, the derive_grad call's."""
    vals = {}
    for p in dg.params:
        vals[p.value.name] = Tensor(b, p.value)
    for n in dg.nodes:
        before = len(b.nodes)
        t = b.emit(n.op, [vals[i] for i in n.inputs], **dict(n.attrs))
        if len(b.nodes) > before:
            b.nodes[-1] = evolve(b.nodes[-1], loc=n.loc or loc)
        vals[n.result.name] = t
    return {name: vals[v] for name, v in dg.outputs}


class _KeptArrays(dict):
    """The arrays of a derived call as a forward's values check sees them: reading an input the derived spec does not
    take is a SpecError at the check's line, never a KeyError or a check silently skipped."""

    def __init__(self, arrays, r: Requirement, fwd: str, name: str):
        super().__init__(arrays)
        self._why = (r.loc, fwd, name)

    def __missing__(self, key):
        loc, fwd, name = self._why
        raise spec_error(loc, f"derive_grad: this check of {fwd} reads input {key!r}, which {name} does not take",
                         "read what the check needs from env (a dim: env[\"C\"]) or from an input the backward "
                         "takes, so that the derived operator keeps the check")


def _keeping_values(r: Requirement, names, fwd: str, name: str) -> Requirement:
    """A forward's values check (on="values" or on="device": an index range...) copied into a derived spec whose
    inputs include the input it blames: run on the derived call's arrays (_KeptArrays), its rule text's placeholders
    of missing names spelled out. A derived operator that reads the same index tensor keeps its bounds check and
    the kernel's Trap()."""
    @functools.wraps(r.fn)   # keeps the host_rule tag (copied with __dict__): opgen.dsl.checks.host_rule
    def fn(arrays, env, attrs, _f=r.fn):
        rule = _f(_KeptArrays(arrays, r, fwd, name), env, attrs)
        return keep_names(rule, names) if isinstance(rule, str) else rule
    return Requirement(r.param, fn, r.kind, r.loc, r.kernel)


def _keeping(r: Requirement, names) -> Requirement:
    """A forward's static check copied into a derived spec: the same check, its rule text's placeholders of names
    the derived spec lacks spelled out (opgen.dsl.rules.keep_names)."""
    def fn(attrs, present, _f=r.fn):
        rule = _f(attrs, present)
        return keep_names(rule, names) if isinstance(rule, str) else rule
    return Requirement(r.param, fn, r.kind, r.loc, r.kernel)
