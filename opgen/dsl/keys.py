"""The key of a specialisation and the result of validating inputs against a spec (docs/design.md "Specs and
the Tensor IR"); below both opgen.dsl.spec and opgen.dsl.validate, which share them, as they share the list-of-int
attribute type and the record of a `require` relation; `attr_key`, the index of a combination of static attribute
values (the attrKey of the tiling key)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

# The list-of-int attribute type (CANN's OpDef ListInt, the aclnn API's `const aclIntArray*`): spelt list[int] (or
# tuple[int, ...]) in a spec; AttrDecl.type holds this one object, so `a.type is LIST_INT` tests for it everywhere.
LIST_INT = list[int]
LIST_INT_SPELLINGS = (list[int], tuple[int, ...])


@dataclass(frozen=True)
class Relation:
    """One `spec.require(constraint, param, rule, when=)` (docs/design.md "Specs and the Tensor IR", checks).

    constraint: the dim relation (opgen.ir.dims.Constraint); param: the input or attribute a violation blames;
    rule: the violation's sentence, a rule text with `{name}` placeholders (opgen.dsl.rules); loc: where it was
    declared (opgen.dsl.diagnostics.Loc); when: None for a relation of every call, else a function
    (static_attrs, present) -> bool naming the modes whose calls must satisfy it (and whose lowering may assume it)."""

    constraint: Any
    param: str
    rule: str
    loc: Any
    when: Callable | None = None


@dataclass(frozen=True)
class SpecKey:
    """Identifies one specialisation: static attribute values, presence of optional inputs, shape forms, and the
    dtypes of the static dtype variables (OpSpec.dtype_vars(static=True), declaration order; () without any)."""

    static: tuple
    present: tuple
    forms: tuple
    dtypes: tuple = ()


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


def attr_key(spec, attrs: dict) -> int:
    """Mixed-radix index of the static (behaviour-selecting) attribute values, first attribute fastest:
    sum_i index(value_i in choices_i) * prod_{j<i} len(choices_j); defaults for absent ones."""
    key, radix = 0, 1
    for a in spec.static_attrs:
        v = attrs.get(a.name, a.default)
        if v is None and len(a.choices) == 1:
            v = a.choices[0]  # a required single-choice attribute (NSA's input_layout "TND")
        key += a.choices.index(v) * radix
        radix *= len(a.choices)
    return key


def free_form_inputs(spec) -> list:
    """The inputs whose shape form the call's shape picks (several forms and no `form_by`; AscendQuantV2's scale
    [H] or [1]), in spec order: the inputs a form key indexes (docs/design.md "Shape forms at run time")."""
    return [i for i in spec.inputs if len(i.shapes) > 1 and i.form_by is None]


def form_key(spec, forms, present=None) -> int:
    """Mixed-radix index of the shape forms the free-form inputs (free_form_inputs) take, first input fastest:
    sum_i form_i * prod_{j<i} len(shapes_j). `forms` is SpecKey.forms (one form index per multi-form input, in spec
    order, form_by inputs included) or None (every form 0); `present` (SpecKey.present: one bool per optional input,
    in spec order) counts an absent input's form as 0, as the TilingFunc does. What the emitted TilingFunc computes
    (opgen.tiling.emit.form_key_cpp) and folds into the tiling key when shape forms lower to different classes
    (opgen.codegen.tilingkey.TilingKey: one key, one class, per form key)."""
    multi = [i for i in spec.inputs if len(i.shapes) > 1]
    picked = dict(zip((i.name for i in multi), forms or ()))
    absent = {i.name for i, p in zip([i for i in spec.inputs if i.optional], present or ()) if not p}
    picked = {n: (0 if n in absent else f) for n, f in picked.items()}
    key, radix = 0, 1
    for i in free_form_inputs(spec):
        key += picked.get(i.name, 0) * radix
        radix *= len(i.shapes)
    return key


def form_key_count(spec) -> int:
    """The number of form keys: the product of the free-form inputs' form counts (form_key's radix; 1 for a spec
    without free-form inputs)."""
    n = 1
    for i in free_form_inputs(spec):
        n *= len(i.shapes)
    return n
