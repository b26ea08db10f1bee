"""Emitter of tests/golden.py: a NumPy golden in CANN's `__golden__` form (reference/ascendc.md §2.9).

Choice made here: the golden is *printed from the IR* (an IR -> NumPy source printer), not a call into
opgen. Every specialisation whose static attributes are at their defaults (all presence/shape-form
combinations of the optional and multi-form inputs) is traced and printed as one NumPy function whose
statements mirror opgen's interpreter in device mode (opgen/interp/kernels.py): float inputs widened to
float32, float32 compute, casts rounded to the target dtype with their round mode (rint = ties to even,
round = ties away) — so the golden equals `opgen interpret --mode device` bit for bit. The file needs only
NumPy. A call with non-default static attributes is delegated to `opgen.interp.interpret` (imported only
then, so opgen must be installed for those).

The golden takes the inputs in OpDef order (optional ones default to None) and the attributes as
keyword arguments with their defaults, plus CANN's **kwargs (ignored except `dtypes={"T": "bfloat16"}`
to force a dtype variable); it returns the outputs in OpDef order (None for an output the call does not
produce).
"""

from __future__ import annotations

import keyword
import math
import pprint
import textwrap

from opgen.codegen.dims import dim_py
from opgen.codegen.env import render
from opgen.codegen.logic import py_condition, true_cubes
from opgen.codegen.model import OpModel
from opgen.errors import SpecError
from opgen.ir.dims import Lit, Sym, Variadic, as_dim
from opgen.ir.dtypes import DType, DTypeVar

_BINOPS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
           "eq": "==", "ne": "!="}
_NPFN = {"neg": "np.negative", "exp": "np.exp", "log": "np.log", "sqrt": "np.sqrt", "abs": "np.abs",
         "not": "np.logical_not", "maximum": "np.maximum", "minimum": "np.minimum", "and": "np.logical_and",
         "or": "np.logical_or"}


def _default_static(a):
    return a.default if a.default is not None else a.choices[0]


class _Printer:
    """Prints one IR graph as the body of a Python function (see module docstring)."""

    def __init__(self, graph):
        self.g = graph
        self.names: dict[str, str] = {}
        for p in graph.params:
            prefix = "in_" if p.kind == "input" else "at_"
            self.names[p.value.name] = prefix + p.value.name

    def dim(self, e) -> str:
        """Python expression of dim expression `e` over the golden's `env`."""
        return dim_py(e, lambda n: f"env[{n!r}]", lambda n: f"_prod(env[{n!r}])")

    def shape(self, shape) -> str:
        """Python tuple expression of a symbolic shape (variadic groups splatted)."""
        parts = []
        for d in shape:
            if isinstance(d, Variadic):
                parts.append(f"*env[{d.name!r}]")
            else:
                parts.append(self.dim(d))
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"

    @staticmethod
    def dtype(dt) -> str:
        """Python expression of a dtype name (a dtype variable reads the call's binding `dt`)."""
        if isinstance(dt, DTypeVar):
            return f"dt[{dt.name!r}]"
        return repr(dt.long_name)

    @staticmethod
    def value(v) -> str:
        """Python literal of a constant (non-finite floats spelled float('inf'))."""
        if isinstance(v, bool):
            return repr(v)
        if isinstance(v, float) and not math.isfinite(v):
            return f"float({str(v)!r})"
        return repr(v)

    def node(self, n) -> str:
        """Python expression computing IR node `n` as opgen/interp/kernels.py does in device mode.
        Raises SpecError for an op it cannot print."""
        a = n.attr_dict
        x = [self.names[i] for i in n.inputs]
        op = n.op
        if op in _BINOPS:
            return f"{x[0]} {_BINOPS[op]} {x[1]}"
        if op in _NPFN:
            return f"{_NPFN[op]}({', '.join(x)})"
        if op == "rsqrt":
            return f"1.0 / np.sqrt({x[0]})"
        if op == "recip":
            return f"1.0 / {x[0]}"
        if op == "select":
            return f"np.where({x[0]}, {x[1]}, {x[2]})"
        if op == "cast":
            to = a["to"]
            if isinstance(to, DTypeVar) or to.is_float:
                return f"_cast_float({x[0]}, {self.dtype(to)}, {a['round']!r})"
            if to == DType.bool:
                return f"np.asarray({x[0]}) != 0"
            return f"_cast_int({x[0]})"
        if op == "const":
            dt = a["dtype"]
            if isinstance(dt, DTypeVar) or dt.is_float:
                return f"np.asarray({self.value(float(a['value']))}, dtype=np.float32)"
            if dt == DType.bool:
                return f"np.asarray({bool(a['value'])!r})"
            return f"np.asarray({int(a['value'])!r}, dtype=np.int64)"
        if op == "dimval":
            dt = a["dtype"]
            kind = "np.float32" if (isinstance(dt, DTypeVar) or dt.is_float) else "np.int64"
            return f"np.asarray({self.dim(a['n'])}, dtype={kind})"
        if op == "iota":
            return f"np.arange({self.dim(a['n'])}, dtype=np.int64)"
        if op == "broadcast":
            return f"np.broadcast_to({x[0]}, {self.shape(a['shape'])})"
        if op == "reduce":
            fn = {"sum": "np.sum", "max": "np.max", "mean": "np.mean"}[a["kind"]]
            return f"{fn}({x[0]}, axis={tuple(a['axes'])!r}, keepdims={a['keepdims']!r})"
        if op == "reshape":
            return f"np.reshape({x[0]}, {self.shape(a['shape'])})"
        if op == "permute":
            return f"np.transpose({x[0]}, {tuple(a['perm'])!r})"
        if op == "concat":
            return f"np.concatenate([{', '.join(x)}], axis={a['axis']})"
        if op == "slice":
            ax = a["axis"]
            step = "" if a["step"] == 1 else f":{a['step']}"
            sl = f"{self.dim(a['start'])}:{self.dim(a['stop'])}{step}"
            if ax >= 0:
                return f"{x[0]}[{':, ' * ax}{sl}]"
            return f"{x[0]}[..., {sl}{', :' * (-ax - 1)}]"
        if op == "gather":
            return f"_gather({x[0]}, {x[1]}, {a['batch_dims']})"
        if op == "scatter_add":
            return f"_scatter_add({x[0]}, {x[1]}, {a['batch_dims']}, {self.dim(a['size'])})"
        if op == "matmul":
            return f"_matmul({x[0]}, {x[1]}, {a['transpose_a']!r}, {a['transpose_b']!r})"
        raise SpecError(f"golden printer: unsupported IR op {op!r}")

    def lines(self) -> list[str]:
        """The statements of the function body: parameters, one assignment per node, the return."""
        out = []
        for p in self.g.params:
            n = p.value.name
            if p.kind == "input":
                dt = p.value.type.dtype
                if isinstance(dt, DType) and dt.is_int:
                    out.append(f"{self.names[n]} = np.asarray(inputs[{n!r}]).astype(np.int64)")
                else:
                    out.append(f"{self.names[n]} = np.asarray(inputs[{n!r}])")
            else:
                kind = "np.float32" if p.value.type.dtype == DType.f32 else "np.int64"
                out.append(f"{self.names[n]} = np.asarray(attrs[{n!r}], dtype={kind})")
        for k, node in enumerate(self.g.nodes):
            name = f"v{k + 1}"
            out.append(f"{name} = {self.node(node)}")
            self.names[node.result.name] = name
        outs = ", ".join(f"{o!r}: {self.names[v]}" for o, v in self.g.outputs)
        out.append(f"return {{{outs}}}")
        return out


def _pattern(shape, spec) -> list:
    out = []
    for d in shape:
        if isinstance(d, Variadic):
            vd = spec.variadics[d.name]
            out.append(("var", d.name, vd.min_rank, vd.max_rank))
            continue
        d = as_dim(d)
        if isinstance(d, Sym):
            out.append(("sym", d.name))
        elif isinstance(d, Lit):
            out.append(("lit", d.value))
        else:
            out.append(("expr", str(d)))
    return out


def _pformat(value) -> str:
    """Deterministic Python literal of `value`, wrapped at 110 columns (dict insertion order kept)."""
    return pprint.pformat(value, width=110, sort_dicts=False)


def golden_context(spec) -> dict:
    """Template data of tests/golden.py. Raises SpecError for names that are Python keywords."""
    m = OpModel(spec)
    for p in m.params:
        if keyword.iskeyword(p.name) or p.name in ("kwargs", "np"):
            raise SpecError(f"{spec.file}: parameter name {p.name!r} cannot be a Python argument of the golden")
    defaults = tuple(_default_static(a) for a in spec.static_attrs)
    opts = [i for i in spec.inputs if i.optional]
    multi = [i for i in spec.inputs if len(i.shapes) > 1]
    specs = []
    for k, key in enumerate(k for k in spec.keys() if k.static == defaults):
        g = spec.graph(key)
        present = [i.name for i, p in zip(opts, key.present) if p]
        forms = ", ".join(f"{i.name}={f}" for i, f in zip(multi, key.forms))
        doc = f"present: {', '.join(present) or 'none of the optional inputs'}" + (f"; forms: {forms}" if forms else "")
        specs.append({"name": f"_spec{k}", "key": repr((key.static, key.present, key.forms)), "doc": doc,
                      "lines": _Printer(g).lines()})
    gated = []
    for i in opts:
        if i.when is None:
            continue
        variables, cubes = true_cubes(spec, i.when, f"when= of {i.name}")
        cond = py_condition(variables, cubes, lambda n: f"attrs[{n!r}]", lambda n: f"inputs[{n!r}]")
        gated.append({"name": i.name, "cond": cond})
    attrs = []
    for a in spec.attrs:
        if a.default is not None:
            dflt = repr(a.default)
        elif a.choices:
            dflt = repr(a.choices[0])
        else:
            dflt = "None"
        attrs.append({"name": a.name, "default": dflt})
    inputs = [{"name": i.name, "optional": i.optional,
               "dtype": i.dtype.name if isinstance(i.dtype, DTypeVar) else None} for i in spec.inputs]
    outputs = [o.name for o in spec.outputs]
    shapes = {i.name: [_pattern(s, spec) for s in i.shapes] for i in spec.inputs}
    return {
        "banner": m.banner("#"), "op": m.op, "op_snake": m.snake, "api": m.api, "round": spec.round,
        "api_golden": _api_golden(spec, m),
        "inputs": inputs, "attrs": attrs, "outputs": outputs, "specs": specs, "gated": gated,
        "static": [a.name for a in spec.static_attrs], "optional": [i.name for i in opts],
        "multi": [i.name for i in multi], "shapes": _pformat(shapes),
        "attr_dims": _pformat({a.name: a.dim.name for a in spec.attrs if a.dim is not None}),
        "absent": _pformat({d.name: d.absent for d in spec.dims_.values() if d.absent is not None}),
        "vars": [v.name for v in spec.dtype_table], "defaults": repr(defaults),
        "input_names": _pformat([i.name for i in spec.inputs]),
        "output_names": _pformat([o.name for o in spec.outputs]),
        "output_doc": textwrap.wrap(", ".join(o.name for o in spec.outputs), width=100),
        "optional_names": _pformat([i.name for i in opts]),
        "input_vars": _pformat({i.name: i.dtype.name for i in spec.inputs if isinstance(i.dtype, DTypeVar)}),
        "output_vars": _pformat({o.name: o.dtype.name for o in spec.outputs if isinstance(o.dtype, DTypeVar)}),
        "allowed": _pformat({v.name: [d.long_name for d in m.allowed(v.name)] for v in spec.dtype_table}),
        "rows": "[\n" + "".join(f"    {dict((k, d.long_name) for k, d in r.items())!r},\n"
                                 for r in spec.dtype_rows) + "]",
    }


def _api_golden(spec, m) -> dict:
    """Template data of the golden's aclnn entry: its public parameters (OpModel.api_params up to the outputs, in
    order) and how each reaches the kernel golden (an OpDef input, possibly cast to its fixed OpDef dtype; an
    attribute by keyword; an extra parameter, dropped), and the outputs' positions in public order. Raises
    SpecError for a public name that cannot be a Python argument, or a cast to a dtype variable."""
    args, ins, attrs, outs = [], {}, [], []
    for a in m.api_params:
        if a.kind == "output":
            outs.append(next(k for k, o in enumerate(spec.outputs) if o.name == a.name))
            continue
        if keyword.iskeyword(a.cpp) or a.cpp in ("kwargs", "np") or a.cpp.startswith("_"):
            raise SpecError(f"{spec.file}: aclnn parameter name {a.cpp!r} cannot be a Python argument of the golden")
        args.append(a.cpp)
        if a.kind in ("input", "optional"):
            expr = a.cpp
            if a.cast:
                dt = a.param.decl.dtype
                if isinstance(dt, DTypeVar):
                    raise SpecError(f"{spec.file}: aclnn parameter {a.cpp}: the golden casts only to a fixed dtype")
                conv = f"_cast_float({a.cpp}, {dt.long_name!r}, {spec.round!r})" if dt.is_float else \
                    f"np.asarray({a.cpp}).astype(np.{dt.np.__name__})"
                expr = f"None if {a.cpp} is None else {conv}"
            ins[a.name] = expr
        elif a.kind == "attr":
            attrs.append({"name": a.name, "value": a.cpp})
    return {"name": f"{m.api_snake}_golden", "args": args, "inputs": [ins[i.name] for i in spec.inputs],
            "attrs": attrs, "outputs": outs}


def emit_golden(spec) -> dict[str, str]:
    """{"tests/golden.py": text} for `spec`."""
    return {"tests/golden.py": render("tests/golden.py.j2", **golden_context(spec))}
