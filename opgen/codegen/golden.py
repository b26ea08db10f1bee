"""Emitter of tests/assets/golden.py: a self-contained NumPy golden in CANN's `__golden__` form
(docs/reference/ascendc.md §2.9; ops-nn keeps its goldens at `tests/assets/golden.py`, docs/reference/ops_package.md §2.5).

Choice made here: the golden is *printed from the IR* (an IR -> NumPy source printer), not a call into
opgen. Every specialisation of the spec (every static attribute value x the presence of the optional inputs x the
shape forms, `spec.keys()`) is traced, and the graphs are merged into one NumPy function: a statement computing
the same expression in several specialisations is printed once (hash-consed on its printed text), and a
statement needed by only some of them sits under an `if` over the key (`attrs[...]`, `present[...]`,
`forms[...]`), so 432 specialisations of NormRopeConcat print about 1100 statements rather than one function
each (`merged_program`). Statements mirror opgen's interpreter in device mode (opgen/interp/kernels.py): float
inputs widened to float32, float32 compute, casts rounded to the target dtype with their round mode (rint = ties
to even, round = ties away) — so the golden equals `opgen interpret --mode device` bit for bit. The file imports
only NumPy; a call whose static attributes or optional inputs select no specialisation of the spec raises
ValueError.

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
from dataclasses import dataclass, field

from opgen.ir.dimprint import dim_py
from opgen.codegen.env import render
from opgen.codegen.logic import py_condition, true_cubes
from opgen.codegen.model import OpModel
from opgen.errors import SpecError
from opgen.interp.kernels import ERF_CLIP, ERF_P, ERF_Q
from opgen.ir.dims import Lit, Sym, Variadic, affine_in, as_dim, product_in
from opgen.ir.dtypes import DType, DTypeVar
from opgen.dsl.keys import LIST_INT
from opgen.dsl.validate import binding_order

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
        if op == "tanh":   # as opgen/interp/kernels.py: AscendC's Tanh on A2 / A3, clipped, exp(2x), in float32
            return (f"(lambda _t: (_t - np.float32(1.0)) / (_t + np.float32(1.0)))(np.exp(np.maximum(np.minimum("
                    f"{x[0]}, np.float32(8.8)), np.float32(-8.8)) * np.float32(2.0)))")
        if op == "erf":   # as opgen/interp/kernels.py: AscendC's Erf on A2 / A3, clipped, P(x) / Q(x), in float32
            return _erf_expr(x[0])
        if op == "recip":
            return f"1.0 / {x[0]}"
        if op == "select":
            return f"np.where({x[0]}, {x[1]}, {x[2]})"
        if op == "cast":
            to = a["to"]
            if isinstance(to, DTypeVar) or to.is_float:
                if a["round"] == "odd":
                    raise SpecError("the golden prints float casts rounded with rint, round, floor, ceil or trunc, "
                                    "not 'odd'")
                return f"_cast_float({x[0]}, {self.dtype(to)}, {a['round']!r})"
            if to == DType.bool:
                return f"np.asarray({x[0]}) != 0"
            lo, hi = to.int_range
            return f"_cast_int({x[0]}, {a['round']!r}, {lo}, {hi})"
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
            fn = {"sum": "np.sum", "max": "np.max", "min": "np.min", "mean": "np.mean"}[a["kind"]]
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
        if op == "repeat_interleave":
            return f"np.take({x[0]}, np.arange({self.dim(a['size'])}) // {a['repeats']!r}, axis={a['axis']!r})"
        if op == "gather":
            return f"_gather({x[0]}, {x[1]}, {a['batch_dims']})"
        if op == "scatter_add":
            return f"_scatter_add({x[0]}, {x[1]}, {a['batch_dims']}, {self.dim(a['size'])})"
        if op == "matmul":
            return f"_matmul({x[0]}, {x[1]}, {a['transpose_a']!r}, {a['transpose_b']!r})"
        raise SpecError(f"golden printer: unsupported IR op {op!r}")

    def params(self) -> list[tuple[str, str, str | None]]:
        """(name, expression, input read or None) of the graph's parameters: inputs as arrays (integers widened
        to int64), numeric runtime attributes as 0-d float32 / int64 arrays."""
        out = []
        for p in self.g.params:
            n = p.value.name
            if p.kind == "input":
                dt = p.value.type.dtype
                cast = ".astype(np.int64)" if isinstance(dt, DType) and dt.is_int else ""
                out.append((self.names[n], f"np.asarray(inputs[{n!r}]){cast}", n))
            else:
                kind = "np.float32" if p.value.type.dtype == DType.f32 else "np.int64"
                out.append((self.names[n], f"np.asarray(attrs[{n!r}], dtype={kind})", None))
        return out


@dataclass
class Statement:
    """One line of the merged golden function: `name = text`, needed by the specialisation keys `keys`, reading
    the statements named in `deps`. Output assignments (`out_<output>`) have no dependents."""

    name: str
    text: str
    deps: frozenset
    keys: set = field(default_factory=set)


@dataclass
class MergedProgram:
    """Every specialisation of a spec as one straight-line program with guarded blocks.

    variables: the key's variables in key order, (expression, domain) — `attrs['x']` for a static attribute,
    `present['x']` for an optional input, `forms[k]` for a multi-form input, `dt['V']` for a static dtype variable
    (its dtype's name); keys: the valid keys as value tuples
    over the variables; blocks: [(condition or None, [Statement])] in dependency order (condition None: every key);
    outputs: the output names (each returned from `out_<name>`, None when a key does not produce it)."""

    variables: list
    keys: list
    blocks: list
    outputs: list


def _key_values(key) -> tuple:
    """A key's variables in the golden's order: static attributes, presences, shape forms, then the static dtype
    variables' dtypes by name (OpSpec.dtype_vars(static=True): `dt[var]` in the golden)."""
    return tuple(key.static) + tuple(key.present) + tuple(key.forms) + tuple(d.long_name for d in key.dtypes)


def _in_cube(values, cube) -> bool:
    return all(v in allowed for v, allowed in zip(values, cube))


def key_codes(valid: list, domains: list):
    """The valid keys as an int64 array [keys, variables]: per variable the index of the key's value in its
    domain (the form key_cover works on; built once per spec, not once per block)."""
    import numpy as np

    index = [{v: k for k, v in enumerate(dom)} for dom in domains]
    return np.array([[index[i][v] for i, v in enumerate(k)] for k in valid], dtype=np.int64).reshape(
        len(valid), len(domains))


def key_cover(members: set, valid: list, domains: list, codes=None) -> list[list]:
    """Cubes (per variable: the allowed values) covering exactly the valid keys in `members` among `valid`, keys
    outside `valid` being don't-cares (no call reaches them: the golden rejects an unknown key first). Greedy: each
    uncovered member grows variable by variable (first to the whole domain, else value by value) while no valid
    non-member falls inside. Deterministic (members in `valid` order). Vectorised over the non-members: per
    variable, whether each non-member's value is allowed; a non-member falls inside when all are. codes: the
    key_codes of `valid` and `domains`, when the caller covers several key sets of one spec."""
    import numpy as np

    index = [{v: k for k, v in enumerate(dom)} for dom in domains]
    if codes is None:
        codes = key_codes(valid, domains)
    member = np.array([k in members for k in valid], dtype=bool)
    out_codes = codes[~member]
    cubes, left = [], [k for k, m in zip(valid, member) if m]
    while left:
        seed = [index[i][v] for i, v in enumerate(left[0])]
        allowed = [np.zeros(len(dom), dtype=bool) for dom in domains]
        for i, c in enumerate(seed):
            allowed[i][c] = True
        inside = np.stack([allowed[i][out_codes[:, i]] for i in range(len(domains))], axis=1) \
            if len(domains) else np.ones((len(out_codes), 0), dtype=bool)
        misses = (~inside).sum(axis=1)
        for i, dom in enumerate(domains):
            others = misses - (~inside[:, i]) == 0   # non-members matching the cube on every other variable
            for grow in [None] + [c for c in range(len(dom)) if not allowed[i][c]]:
                trial = np.ones(len(dom), dtype=bool) if grow is None else allowed[i].copy()
                if grow is not None:
                    trial[grow] = True
                if not np.any(others & trial[out_codes[:, i]]):
                    allowed[i] = trial
                    col = trial[out_codes[:, i]]
                    misses = misses - (~inside[:, i]) + (~col)
                    inside[:, i] = col
                    if grow is None:
                        break
        cube = [{dom[c] for c in range(len(dom)) if allowed[i][c]} for i, dom in enumerate(domains)]
        cubes.append(cube)
        left = [k for k in left if not _in_cube(k, cube)]
    return cubes


def _literal(expr: str, allowed: set, dom: tuple) -> str | None:
    vals = [v for v in dom if v in allowed]
    if len(vals) == len(dom):
        return None
    if all(isinstance(v, bool) for v in dom):
        return expr if vals == [True] else f"not {expr}"
    if len(vals) == 1:
        return f"{expr} == {vals[0]!r}"
    return f"{expr} in {tuple(vals)!r}"


def cover_condition(cubes: list, variables: list) -> str:
    """Python condition true on `cubes` (key_cover) over `variables` [(expression, domain)]; "True" when a cube
    allows every value."""
    terms = []
    for cube in cubes:
        lits = [x for (expr, dom), allowed in zip(variables, cube) if (x := _literal(expr, allowed, dom))]
        if not lits:
            return "True"
        terms.append(" and ".join(lits))
    return terms[0] if len(terms) == 1 else " or ".join(f"({t})" for t in terms)


def _split_outside_quotes(text: str, sep: str) -> list[str]:
    """`text` split at `sep` where `sep` is not inside a quoted literal or parentheses."""
    parts, depth, quote, start, k = [], 0, None, 0, 0
    while k < len(text):
        c = text[k]
        if quote:
            if c == "\\":
                k += 1
            elif c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and text.startswith(sep, k):
            parts.append(text[start:k])
            start = k + len(sep)
            k = start
            continue
        k += 1
    parts.append(text[start:])
    return parts


def _if_lines(cond: str, width: int = 100) -> list[str]:
    """`if <cond>:` as one line, or, when longer than `width`, parenthesised with one ` or ` / ` and ` term per
    line (breaks only between terms, never inside a literal)."""
    if len(cond) + 4 <= width:
        return [f"if {cond}:"]
    sep = " or " if len(_split_outside_quotes(cond, " or ")) > 1 else " and "
    terms = _split_outside_quotes(cond, sep)
    lines = ["if (" + terms[0]]
    lines += [f"    {sep.strip()} {t}" for t in terms[1:]]
    lines[-1] += "):"
    return lines


def merged_program(spec) -> MergedProgram:
    """Trace every specialisation of `spec` and merge the printed graphs (module doc): statements are hash-consed
    on their text (names of their inputs already canonical), each remembers the keys needing it; statements are
    then ordered topologically, preferring to continue a run of the same key set, and every run is one block
    guarded by the cover of its key set. Raises SpecError as the printer."""
    opts = [i for i in spec.inputs if i.optional]
    multi = [i for i in spec.inputs if len(i.shapes) > 1]
    variables = [(f"attrs[{a.name!r}]", tuple(a.choices)) for a in spec.static_attrs]
    variables += [(f"present[{i.name!r}]", (True, False)) for i in opts]
    variables += [(f"forms[{k}]", tuple(range(len(i.shapes)))) for k, i in enumerate(multi)]
    choices = spec.static_dtype_choices()
    variables += [(f"dt[{n!r}]", tuple(dict.fromkeys(c[k].long_name for c in choices)))
                  for k, n in enumerate(spec.static_dtype_vars)]
    keys = spec.keys()
    valid = [_key_values(k) for k in keys]
    stmts: dict[str, Statement] = {}
    by_text: dict[str, str] = {}
    order: list[str] = []

    def add(name, text, deps, key):
        st = stmts.get(name)
        if st is None:
            st = stmts[name] = Statement(name, text, frozenset(deps))
            order.append(name)
        else:   # the same text under another key may read another definition of an input (`alias` below)
            st.deps = st.deps | frozenset(deps)
        st.keys.add(key)

    outputs = [o.name for o in spec.outputs]
    for key, kv in zip(keys, valid):
        g = spec.graph(key)
        pr = _Printer(g)
        alias: dict = {}   # an input whose conversion differs by key (a static dtype variable's input) -> its statement
        for name, text, _read in pr.params():
            at, k = name, 2
            while at in stmts and stmts[at].text != text:   # printed `name = text` (the part before <-) per key
                at, k = f"{name}<-{k}", k + 1
            alias[name] = at
            add(at, text, (), kv)
        for node in g.nodes:
            text = pr.node(node)
            name = by_text.get(text)
            if name is None:
                name = by_text[text] = f"v{len(by_text) + 1}"
            add(name, text, [alias.get(pr.names[i], pr.names[i]) for i in node.inputs], kv)
            pr.names[node.result.name] = name
        for o, v in g.outputs:
            add(f"out_{o}<-{pr.names[v]}", pr.names[v], [alias.get(pr.names[v], pr.names[v])], kv)
    # topological order, continuing the current key set while one is ready
    users: dict[str, list] = {}
    indeg = {}
    for n in order:
        st = stmts[n]
        indeg[n] = len(st.deps)
        for d in sorted(st.deps):
            users.setdefault(d, []).append(n)
    rank = {n: k for k, n in enumerate(order)}
    ready = sorted((n for n in order if indeg[n] == 0), key=rank.get)
    runs: list[tuple[frozenset, list]] = []
    while ready:
        cur = runs[-1][0] if runs else None
        pick = next((n for n in ready if frozenset(stmts[n].keys) == cur), ready[0])
        ready.remove(pick)
        ks = frozenset(stmts[pick].keys)
        if not runs or runs[-1][0] != ks:
            runs.append((ks, []))
        runs[-1][1].append(stmts[pick])
        for u in users.get(pick, []):
            indeg[u] -= 1
            if indeg[u] == 0:
                ready.append(u)
        ready.sort(key=rank.get)
    domains = [dom for _e, dom in variables]
    codes = key_codes(valid, domains)
    blocks = []
    for ks, body in runs:
        cond = None if len(ks) == len(valid) else cover_condition(key_cover(set(ks), valid, domains, codes),
                                                                   variables)
        blocks.append((cond, body))
    return MergedProgram(variables, valid, blocks, outputs)


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
        elif affine_in(d) is not None:
            out.append(("affine", *affine_in(d)))
        elif (q := next((product_in(d, n) + (n,) for n in sorted(d.symbols()) if product_in(d, n)), None)):
            out.append(("prod", q[0], (q[2],) + q[1]))
        else:
            out.append(("expr", str(d)))
    return out


def _pformat(value) -> str:
    """Deterministic Python literal of `value`, wrapped at 110 columns (dict insertion order kept)."""
    return pprint.pformat(value, width=110, sort_dicts=False)


def golden_context(spec) -> dict:
    """Template data of tests/assets/golden.py. Raises SpecError for names that are Python keywords."""
    m = OpModel(spec)
    for p in m.params:
        if keyword.iskeyword(p.name) or p.name in ("kwargs", "np"):
            raise SpecError(f"{spec.file}: parameter name {p.name!r} cannot be a Python argument of the golden")
    defaults = tuple(_default_static(a) for a in spec.static_attrs)
    opts = [i for i in spec.inputs if i.optional]
    bind_names = [i.name for i in binding_order(spec.inputs)]
    multi = [i for i in spec.inputs if len(i.shapes) > 1]
    prog = merged_program(spec)
    body = []
    for cond, stmts in prog.blocks:
        lines = [f"{st.name.split('<-')[0]} = {st.text}" for st in stmts]
        if cond is None:
            body += lines
        else:
            body += _if_lines(cond)
            body += ["    " + ln for ln in lines]
    keys = [repr(k) for k in prog.keys]
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
        attrs.append({"name": a.name, "default": dflt, "list": a.type is LIST_INT})
    # every input from the first optional one on defaults to None (Python has no default before a non-default; a
    # required input left None is refused by _run), so a call may leave out an absent optional input by keyword
    first_opt = next((k for k, i in enumerate(spec.inputs) if i.optional), len(spec.inputs))
    inputs = [{"name": i.name, "default_none": k >= first_opt,
               "dtype": i.dtype.name if isinstance(i.dtype, DTypeVar) else None} for k, i in enumerate(spec.inputs)]
    outputs = [o.name for o in spec.outputs]
    shapes = {i.name: [_pattern(s, spec) for s in i.shapes] for i in spec.inputs}
    in_vars = {i.dtype.name for i in spec.inputs if isinstance(i.dtype, DTypeVar)}
    bf16_held = [o.name for o in spec.outputs   # bf16 outputs no input's array can lend the bfloat16 dtype to
                 if (isinstance(o.dtype, DTypeVar) and o.dtype.name not in in_vars
                     and "bfloat16" in (d.long_name for d in m.allowed(o.dtype.name)))
                 or (isinstance(o.dtype, DType) and o.dtype.long_name == "bfloat16")]
    held = (f" A bfloat16 {', '.join(bf16_held)} comes back as float32 arrays holding the bfloat16 values: no input "
            "carries the bfloat16 dtype (ml_dtypes) to return it in." if bf16_held else "")
    return {
        "banner": m.banner("#"), "op": m.op, "op_snake": m.snake, "api": m.api, "round": spec.round,
        "api_golden": _api_golden(spec, m),
        "inputs": inputs, "attrs": attrs, "outputs": outputs, "body": body, "keys": keys, "gated": gated,
        "static_dtype_vars": list(spec.static_dtype_vars),
        "late_required": [i.name for k, i in enumerate(spec.inputs) if k > first_opt and not i.optional],
        "nkeys": len(prog.keys), "nstatements": sum(len(b) for _c, b in prog.blocks),
        "intro": textwrap.wrap(
            "Printed by opgen from the tensor IR of the spec (an IR -> NumPy source printer): every specialisation "
            f"({len(prog.keys)} here: the static attribute values x the optional inputs present x the shape forms) "
            f"merged into one function of {sum(len(b) for _c, b in prog.blocks)} statements, each printed once and "
            "guarded by the specialisations that need it (over "
            f"{', '.join(e for e, _d in prog.variables) or 'nothing: there is one'}). The math is the device mode "
            "of opgen's interpreter, bit for bit: float inputs widened to float32, float32 compute, outputs (and "
            f"intermediates the spec rounds) rounded to their dtype with round mode {spec.round!r}. Needs only NumPy "
            f"(no opgen).{held}", width=110, break_on_hyphens=False),
        "static": [a.name for a in spec.static_attrs], "optional": [i.name for i in opts],
        "multi": [i.name for i in multi], "shapes": _pformat(shapes),
        "form_by": _pformat({i.name: (i.form_by, list(i.choices)) for i in spec.inputs if i.form_by is not None}),
        "attr_dims": _pformat({a.name: a.dim.name for a in spec.attrs if a.dim is not None}),
        "absent": _pformat({d.name: d.absent for d in spec.dims_.values() if d.absent is not None}),
        "vars": [v.name for v in spec.dtype_table], "defaults": repr(defaults),
        "input_names": _pformat([i.name for i in spec.inputs]),
        # the declaration order when every input binds first (most ops): the name, not the list again
        "bind_order": ("_INPUTS" if bind_names == [i.name for i in spec.inputs] else _pformat(bind_names)),
        "output_names": _pformat([o.name for o in spec.outputs]),
        "output_doc": textwrap.wrap(", ".join(o.name for o in spec.outputs), width=100),
        "optional_names": _pformat([i.name for i in opts]),
        "input_vars": _pformat({i.name: i.dtype.name for i in spec.inputs if isinstance(i.dtype, DTypeVar)}),
        "output_vars": _pformat({o.name: o.dtype.name for o in spec.outputs if isinstance(o.dtype, DTypeVar)}),
        "int_outputs": _pformat({o.name: o.dtype.np.name for o in spec.outputs
                                 if isinstance(o.dtype, DType) and not o.dtype.is_float}),
        "allowed": _pformat({v.name: [d.long_name for d in m.allowed(v.name)] for v in spec.dtype_table}),
        "rows": "[\n" + "".join(f"    {dict((k, d.long_name) for k, d in r.items())!r},\n"
                                 for r in spec.dtype_rows) + "]",
    }


def _api_golden(spec, m) -> dict:
    """Template data of the golden's aclnn entry: its public parameters (OpModel.api_params up to the outputs, in
    order) and how each reaches the kernel golden (an OpDef input, possibly cast to its fixed OpDef dtype; an
    attribute by keyword, an api.enum index as its string; an extra parameter, dropped), and the outputs' positions in public order. Raises
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
        elif a.enum is not None:   # the index CANN's API takes (api.enum): its string; KeyError for another
            attrs.append({"name": a.name, "value": f"{dict(a.enum)!r}[int({a.cpp})]"})
        elif a.kind == "attr":
            attrs.append({"name": a.name, "value": a.cpp})
    for name, value in m.fixed_attrs.items():   # not public (api.fixed): the value the aclnn layer always passes
        attrs.append({"name": name, "value": repr(value)})
    return {"name": f"{m.api_snake}_golden", "args": args, "inputs": [ins[i.name] for i in spec.inputs],
            "attrs": attrs, "outputs": outs}


GOLDEN_PATH = "tests/assets/golden.py"
"""Where the golden goes in the package (ops-nn's convention, docs/reference/ops_package.md §2.5)."""


def emit_golden(spec) -> dict[str, str]:
    """{"tests/assets/golden.py": text} for `spec`. Raises SpecError for parameter names the golden cannot take
    and IR ops the printer cannot print."""
    return {GOLDEN_PATH: render("tests/golden.py.j2", **golden_context(spec))}


def _erf_expr(x: str) -> str:
    """A Python expression of AscendC's Erf steps on `x` in float32 (opgen.kernel.rowmerge.erf_as_rational: the
    clip, P and Q by Horner's rule in s = x², P / Q), for the emitted golden script."""
    f = lambda v: f"np.float32({v!r})"   # noqa: E731
    p = f"_s * {f(ERF_P[5])} + {f(ERF_P[4])}"
    for k in (3, 2, 1, 0):
        p = f"_s * ({p}) + {f(ERF_P[k])}"
    q = f"_s + {f(ERF_Q[4])}"
    for k in (3, 2, 1, 0):
        q = f"_s * ({q}) + {f(ERF_Q[k])}"
    return (f"(lambda _c: (lambda _s: (_c * ({p})) / ({q}))(_c * _c))(np.maximum(np.minimum({x}, {f(ERF_CLIP)}), "
            f"{f(-ERF_CLIP)}))")
