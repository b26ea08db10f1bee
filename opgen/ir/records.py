"""Copy-with-changes of the frozen dataclass records the IR levels are made of (Node, Instr, ...).

`dataclasses.replace` re-runs the generated `__init__` with every field; the lowering passes make such copies
by the hundred thousand while generating all specialisations of an operator (renaming slots and scalars,
stamping spec locations, assigning levels), where that call is the largest single cost. `evolve` makes the same
copy by copying the instance dictionary. It is only taken for classes whose construction has no side
conditions (no `__post_init__`, no `__slots__` in the class or a base); anything else goes through `dataclasses.replace`, so the
result is always what `dataclasses.replace` would give.
"""

from __future__ import annotations

import dataclasses

_FIELDS: dict = {}


def _plain_fields(cls) -> frozenset | None:
    """The init field names of a plain dataclass (one `evolve` may copy by dictionary), else None."""
    got = _FIELDS.get(cls, False)
    if got is False:
        plain = (dataclasses.is_dataclass(cls) and not hasattr(cls, "__post_init__")
                 and not any("__slots__" in c.__dict__ for c in cls.__mro__)
                 and all(f.init for f in dataclasses.fields(cls)))
        got = _FIELDS[cls] = frozenset(f.name for f in dataclasses.fields(cls)) if plain else None
    return got


def evolve(obj, **changes):
    """A copy of the dataclass instance `obj` with `changes` ({field: new value}) applied: the same result as
    `dataclasses.replace(obj, **changes)`, without calling `__init__` when the class has no `__post_init__`.
    Raises TypeError for a name that is not a field (as `dataclasses.replace` does)."""
    cls = type(obj)
    names = _plain_fields(cls)
    if names is None:
        return dataclasses.replace(obj, **changes)
    bad = [k for k in changes if k not in names]
    if bad:
        raise TypeError(f"{cls.__name__} has no field {bad[0]!r}")
    new = object.__new__(cls)
    d = new.__dict__
    d.update(obj.__dict__)
    d.update(changes)
    return new
