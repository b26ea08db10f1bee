"""Turning the spec's opaque mode predicates into conditions the emitted code can test.

A spec states mode rules as Python callables over the static (behaviour-selecting) attributes and the
presence of optional inputs: `spec.check(param, fn)` with `fn(attrs, present) -> rule | None`, and
`spec.input(..., when=fn)` with `fn(attrs, present) -> bool`. Their variables all have finite domains
(static attributes have `choices`; presence is True/False), so a predicate is fully described by its
truth table over the variables it actually reads. `truth_table` finds those variables by recording the
lookups the callable makes (re-running it over every combination of the variables seen so far until no
new lookup appears), and `cover` merges the rows with the same result into cubes (per variable: a set of
allowed values), which `cpp_condition` / `py_condition` print.

No spec code is parsed or rewritten: only evaluated, so any callable over the two mappings works.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from opgen.dsl.keys import LIST_INT
from opgen.errors import SpecError
from opgen.names import c_string

_MAX_VARS = 16


class _Recorder(Mapping):
    """A read-only mapping that records the keys it is asked for (lookups of unknown keys raise KeyError)."""

    def __init__(self, prefix: str, values: dict, seen: list):
        self._prefix = prefix
        self._values = values
        self._seen = seen

    def __getitem__(self, key):
        if key not in self._values:
            raise KeyError(key)
        tag = (self._prefix, key)
        if tag not in self._seen:
            self._seen.append(tag)
        return self._values[key]

    def __iter__(self):
        for k in self._values:
            self[k]  # noqa: B018 - iterating reads every key
        return iter(self._values)

    def __len__(self):
        return len(self._values)


@dataclass(frozen=True)
class Var:
    """A predicate variable: ("attr", name) or ("present", input name) with its finite domain."""

    kind: str
    name: str
    domain: tuple


def spec_domains(spec) -> tuple[dict, dict]:
    """Domains of the predicate variables of `spec`: ({static attr: choices}, {input: (True, False) or (True,)}).

    Required inputs are always present, so their presence has the single value True."""
    attrs = {a.name: tuple(a.choices) for a in spec.static_attrs}
    present = {i.name: ((True, False) if i.optional else (True,)) for i in spec.inputs}
    return attrs, present


def _base(spec) -> tuple[dict, dict]:
    attrs = {}
    for a in spec.static_attrs:
        attrs[a.name] = a.default if a.default is not None else a.choices[0]
    present = {i.name: True for i in spec.inputs}
    return attrs, present


def truth_table(spec, fn: Callable[[Mapping, Mapping], Any], what: str = "predicate") -> tuple[list[Var], dict]:
    """Evaluate `fn(attrs, present)` over every combination of the variables it reads.

    Returns (variables in first-read order, {tuple of values: result}). Raises SpecError when the callable
    fails, reads something that is not a static attribute or an input, or reads more than 16 variables."""
    attr_dom, pres_dom = spec_domains(spec)
    base_a, base_p = _base(spec)
    seen: list = []

    def run(assign: dict):
        a = dict(base_a)
        p = dict(base_p)
        for (kind, name), v in assign.items():
            (a if kind == "attr" else p)[name] = v
        try:
            return fn(_Recorder("attr", a, seen), _Recorder("present", p, seen))
        except KeyError as e:
            raise SpecError(f"{spec.file}: {what} reads {e.args[0]!r}, which is neither a static attribute nor an "
                            f"input of {spec.name}") from None

    table: dict = {}
    while True:
        known = list(seen)
        if len(known) > _MAX_VARS:
            raise SpecError(f"{spec.file}: {what} depends on more than {_MAX_VARS} attributes/inputs")
        doms = [attr_dom[n] if k == "attr" else pres_dom[n] for k, n in known]
        table = {}
        for combo in itertools.product(*doms):
            table[combo] = run(dict(zip(known, combo)))
        if len(seen) == len(known):
            break
    variables = [Var(k, n, tuple(attr_dom[n] if k == "attr" else pres_dom[n])) for k, n in seen]
    return variables, table


def cover(variables: list[Var], rows: list[tuple]) -> list[dict]:
    """Merge minterms (value tuples) into cubes {variable index: frozenset of values}.

    Two cubes merge when they differ in one variable only; a variable whose set covers its domain is
    dropped (don't care). The result covers exactly the given rows. Deterministic order."""
    return _as_dicts(variables, _merge([tuple(frozenset([v]) for v in r) for r in rows]))


def _merge(cubes: list[tuple]) -> list[tuple]:
    """Cubes (tuples of value sets) with any two that differ in one variable replaced by their union, repeated
    until none do; duplicates dropped, first-seen order."""
    changed = True
    while changed:
        changed = False
        out: list = []
        used = [False] * len(cubes)
        for i, a in enumerate(cubes):
            if used[i]:
                continue
            for j in range(i + 1, len(cubes)):
                if used[j]:
                    continue
                b = cubes[j]
                diff = [k for k in range(len(a)) if a[k] != b[k]]
                if len(diff) == 1:
                    k = diff[0]
                    a = a[:k] + (a[k] | b[k],) + a[k + 1:]
                    used[j] = True
                    changed = True
            out.append(a)
            used[i] = True
        cubes = list(dict.fromkeys(out))
    return cubes


def _as_dicts(variables: list[Var], cubes: list[tuple]) -> list[dict]:
    """Cubes as {variable index: frozenset of values}, a variable whose set is its whole domain left out."""
    return [{k: s for k, s in enumerate(c) if set(s) != set(variables[k].domain)} for c in cubes]


def _order(values, var: Var):
    return [v for v in var.domain if v in values]


def cpp_condition(variables: list[Var], cubes: list[dict], attr_expr: Callable[[str], str],
                  input_expr: Callable[[str], str], attr_type: Callable[[str], type]) -> str:
    """C++ boolean expression true exactly on `cubes` ("true" for one empty cube, "false" for none).

    attr_expr(name) / input_expr(name): the C++ expressions of an attribute value / an input pointer;
    attr_type(name): the attribute's Python type (int, bool, str or list[int])."""
    if not cubes:
        return "false"
    terms = []
    for cube in cubes:
        lits = []
        for k, values in cube.items():
            v = variables[k]
            if v.kind == "present":
                (val,) = values
                lits.append(f"{input_expr(v.name)} {'!=' if val else '=='} nullptr")
                continue
            t = attr_type(v.name)
            alts = []
            for val in _order(values, v):
                if t is bool:
                    alts.append(attr_expr(v.name) if val else f"!{attr_expr(v.name)}")
                elif t is str:
                    alts.append(f"std::strcmp({attr_expr(v.name)}, {_cstr(val)}) == 0")
                elif t is LIST_INT:   # an aclIntArray equal to the tuple (the aclnn layer's IntArrayChoice)
                    alts.append(f"IntArrayChoice({attr_expr(v.name)}, {{{{{', '.join(str(int(x)) for x in val)}}}}}) == 0")
                else:
                    alts.append(f"{attr_expr(v.name)} == {val!r}")
            lits.append(alts[0] if len(alts) == 1 else "(" + " || ".join(alts) + ")")
        if not lits:
            return "true"
        terms.append(" && ".join(lits))
    if len(terms) == 1:
        return terms[0]
    return " || ".join(f"({t})" for t in terms)


def py_condition(variables: list[Var], cubes: list[dict], attr_expr: Callable[[str], str],
                 input_expr: Callable[[str], str]) -> str:
    """Python boolean expression true exactly on `cubes` ("True"/"False" for the trivial cases)."""
    if not cubes:
        return "False"
    terms = []
    for cube in cubes:
        lits = []
        for k, values in cube.items():
            v = variables[k]
            if v.kind == "present":
                (val,) = values
                lits.append(f"{input_expr(v.name)} is {'not ' if val else ''}None")
                continue
            vals = _order(values, v)
            if len(vals) == 1:
                lits.append(f"{attr_expr(v.name)} == {vals[0]!r}")
            else:
                lits.append(f"{attr_expr(v.name)} in {tuple(vals)!r}")
        if not lits:
            return "True"
        terms.append(" and ".join(lits))
    if len(terms) == 1:
        return terms[0]
    return " or ".join(f"({t})" for t in terms)


def _cstr(s: str) -> str:

    return c_string(s)


def failing_cubes(spec, fn, what: str) -> tuple[list[Var], list[tuple[str, list[dict]]]]:
    """For a check `fn(attrs, present) -> rule | None`: (variables, [(rule, cubes where fn returns rule)])
    in first-seen rule order."""
    variables, table = truth_table(spec, fn, what)
    by_rule: dict[str, list] = {}
    for combo, rule in table.items():
        if rule:
            by_rule.setdefault(str(rule), []).append(combo)
    return variables, [(rule, cover(variables, rows)) for rule, rows in by_rule.items()]


def true_cubes(spec, fn, what: str) -> tuple[list[Var], list[dict]]:
    """For a predicate `fn(attrs, present) -> bool`: (variables, cubes where it is true)."""
    variables, table = truth_table(spec, fn, what)
    return variables, cover(variables, [c for c, r in table.items() if r])


def written_cubes(spec, output: str) -> tuple[list[Var], list[dict]] | None:
    """Where the body returns `output`: (variables, cubes over the static attributes and the optional inputs'
    presence) covering the specialisations whose traced graph has it, or None when every specialisation does
    (a required output, or an optional one no specialisation leaves out). The rows are the specialisations of
    spec.keys(), so a combination no key has (a failing static check) is never a row. An input with `when=`
    is present in a row only where it is used: given in a mode its when= excludes, the call ignores it
    (opgen.dsl.validate) and its specialisation is the one without it, so the emitted test of its presence must
    include the when= condition (codegen/aclnn: `used`), else the cubes' don't-cares would take such a call.

    Whether an output is written may depend only on what the host knows before the launch (README "Optional
    outputs"): raises SpecError when two keys differing only in shape forms disagree (a form is picked from the
    shapes inside the TilingFunc, which the aclnn layer does not repeat)."""
    opts = [i for i in spec.inputs if i.optional]
    variables = ([Var("attr", a.name, tuple(a.choices)) for a in spec.static_attrs]
                 + [Var("present", i.name, (True, False)) for i in opts])
    seen: dict = {}
    for key in spec.keys():
        row = tuple(key.static) + tuple(key.present)
        has = any(n == output for n, _ in spec.graph(key).outputs)
        if seen.setdefault(row, has) != has:
            raise SpecError(f"{spec.file}: whether output {output!r} is written depends on an input's shape form "
                            f"({spec.key_text(key)}); it may depend only on static attributes and the presence of "
                            f"optional inputs")
    if all(seen.values()):
        return None
    return variables, expand_cover(variables, [r for r, has in seen.items() if has],
                                   [r for r, has in seen.items() if not has])


def expand_cover(variables: list[Var], on: list[tuple], off: list[tuple]) -> list[dict]:
    """Cubes {variable index: frozenset of values} true on every row of `on` and on no row of `off`; a row in
    neither (a combination no specialisation has) is a don't-care, so the cubes may take it. Each `on` row is
    widened one variable at a time, in order, to the variable's whole domain while the cube takes no `off` row;
    cubes another contains are dropped (the expand and irredundant steps of two-level minimisation, greedy).
    Deterministic: the result depends only on the order of the rows and variables.

    A cube here is a row with some variables widened to their whole domain, so it takes an `off` row exactly when
    the two agree on every variable not widened and the off row's values of the widened ones lie in their domains:
    each set of widened variables looks the `off` rows up by their values on the others (`blocked`), once per set."""
    domains = [frozenset(v.domain) for v in variables]
    blocked: dict = {}   # widened variable indices -> {the off rows' values on the rest}

    def takes_some_off(row, wide: frozenset) -> bool:
        keep = tuple(j for j in range(len(variables)) if j not in wide)
        got = blocked.get(wide)
        if got is None:
            got = blocked[wide] = {tuple(o[j] for j in keep) for o in off if all(o[j] in domains[j] for j in wide)}
        return tuple(row[j] for j in keep) in got

    cubes: list = []
    made: set = set()
    order = [k for k, v in enumerate(variables) if v.kind == "present"] + \
        [k for k, v in enumerate(variables) if v.kind != "present"]   # presence first: the attributes stay named
    for r in on:
        wide: frozenset = frozenset()
        for k in order:
            if not takes_some_off(r, wide | {k}):
                wide = wide | {k}
        cube = tuple(domains[j] if j in wide else frozenset([v]) for j, v in enumerate(r))
        if cube not in made:
            made.add(cube)
            cubes.append(cube)
    cubes = _merge(cubes)   # two cubes differing in one variable are their union (normType 1 or 2)
    kept = [c for c in cubes if not any(d != c and all(a <= b for a, b in zip(c, d)) for d in cubes)]
    return _as_dicts(variables, kept)
