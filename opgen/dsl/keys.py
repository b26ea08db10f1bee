"""The key of a specialisation and the result of validating inputs against a spec (docs/design.md "Specs and
the Tensor IR"); below both opgen.dsl.spec and opgen.dsl.validate, which share them."""

from __future__ import annotations

from dataclasses import dataclass


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
