"""Choosing one specialisation of a spec for display (`opgen graph`): static attribute values (given or
default) and the set of present optional inputs select the first matching key of `spec.keys()`."""

from __future__ import annotations

from opgen.dsl.validate import resolve_attrs
from opgen.errors import ValidationError


def select_key(spec, attrs: dict | None = None, present=()):
    """The first key of `spec.keys()` whose static attribute values and input presence match.

    Args:
        spec: an OpSpec.
        attrs: {attribute name: value or CLI text}; static attributes not given take their default
            (one without a default matches any value); runtime attributes are checked for type and
            allowed values but do not select anything (they are graph parameters).
        present: names of the optional inputs that are present (required inputs always are; the
            other optional inputs are absent).

    Returns:
        The SpecKey (shape forms: the first that exists, i.e. the first declared form of each input).

    Raises:
        ValidationError: unknown attribute or input name, a value of the wrong type or not allowed,
            a static check of the spec that fails for this choice (naming its parameter and rule), or
            no specialisation matching (e.g. an input that this mode never uses).
    """
    values = resolve_attrs(spec, dict(attrs or {}), require=False)
    optional = [i.name for i in spec.inputs if i.optional]
    present = list(present)
    for p in present:
        if p not in {i.name for i in spec.inputs}:
            raise ValidationError("--present", f"{p} is not an input of {spec.name} "
                                               f"(optional inputs: {', '.join(optional) or 'none'})")
        if p not in optional:
            raise ValidationError("--present", f"{p} is a required input (always present)")
        decl = next(i for i in spec.inputs if i.name == p)
        if decl.absent_only:   # OpSpec.input(accepts="absent")
            raise ValidationError(p, decl.absent_rule())
    pres = {i.name: (not i.optional) or i.name in present for i in spec.inputs}
    static = spec.static_attrs
    want_static = [values[a.name] for a in static]
    want_present = tuple(pres[n] for n in optional)
    if all(v is not None for v in want_static):
        svals = {a.name: v for a, v in zip(static, want_static)}
        for r in spec.requirements:
            if r.kind == "static":
                rule = r.evaluate(svals, pres)
                if rule:
                    hint = " (name it in --present)" if r.param in optional and not pres[r.param] else ""
                    raise ValidationError(r.param, spec.rule_text(rule, loc=r.loc) + hint)
    for key in spec.keys():
        if key.present == want_present and all(w is None or w == k for w, k in zip(want_static, key.static)):
            return key
    chosen = ", ".join(f"{a.name}={v!r}" for a, v in zip(static, want_static) if v is not None)
    raise ValidationError("--present", f"no specialisation of {spec.name} has exactly the inputs "
                                       f"{', '.join(n for n, p in pres.items() if p)}"
                                       + (f" with {chosen}" if chosen else "")
                                       + " (an optional input this mode does not use cannot be present)")
