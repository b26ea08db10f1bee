"""Rule texts written in a spec, rendered in each layer's names.

A rule text is the sentence a spec gives for a violated relation (`OpSpec.require(c, param, rule)`) or returns from
a static check (`OpSpec.check(param, fn)`). It may name another parameter of the spec in braces, `{encoder_key}`:
each layer that prints the rule writes the name as its caller knows it (docs/design.md "Rule texts"):
- the interpreter, graph mode (OpDef) and the API document: the spec's name (`encoder_key`);
- the emitted aclnn layer: the public C++ name the caller passed (`encoderKey`, opgen.codegen.aclnn).

A placeholder is a name in braces; braces around anything that is not a Python identifier (`{0, 1}`, `{'BNSD'}`:
data a check's f-string printed) are text, printed as written. A literal brace next to a name is written doubled
(`{{`, `}}`), as in Python's str.format. A name in braces that the spec does not declare (input, attribute, output,
dim or variadic dim), a format spec (`{x:>4}`) or a conversion (`{x!r}`) is a SpecError at the rule's spec line: the
rule text is data, never code or a format string. An unclosed brace is a SpecError in a relation's rule
(`OpSpec.require`, checked when the spec is finished); in a static check's text, which is only known when the check
runs on the caller's values, it is printed as written (render_rule's strict=False), so a bad value still gets its
ValidationError.
"""

from __future__ import annotations

import string
from typing import Callable, Collection

from opgen.dsl.diagnostics import spec_error


def render_rule(text: str, names: Collection[str], say: Callable[[str], str] | None = None, loc=None,
                strict: bool = True) -> str:
    """`text` with every `{name}` replaced by `say(name)` (the spec's name when say is None) and `{{` / `}}` by one
    brace. names: the spec names a placeholder may use; loc: the rule's spec line ("file:line" or a Loc) for errors.
    Raises SpecError (located at loc) for a text that is not a string, an unknown name, a format spec or a
    conversion, and, when strict, an unclosed brace (not strict: the text is printed as written). Braces around
    what is not an identifier are text (module docstring)."""
    if not isinstance(text, str):
        raise spec_error(loc, f"a rule text must be a string, got {text!r}",
                         "return None when the check holds, else the rule as a sentence")
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError as e:
        if not strict:
            return text
        raise spec_error(loc, f"rule text {text!r}: {e}",
                         "name a parameter in braces, {x}; write a literal brace doubled, {{ or }}") from None
    out = []
    for literal, field, fmt, conv in parts:
        out.append(literal)
        if field is None:
            continue
        if not field.isidentifier():   # data in braces ({0, 1}), not a placeholder
            out.append("{" + field + ("!" + conv if conv else "") + (":" + fmt if fmt else "") + "}")
            continue
        if field not in names or fmt or conv:
            what = (f"{{{field}}} is not a declared input, attribute, output or dim" if field not in names else
                    f"{{{field}{'!' + conv if conv else ''}{':' + fmt if fmt else ''}}} has a "
                    f"{'conversion' if conv else 'format spec'}")
            raise spec_error(loc, f"rule text {text!r}: {what}",
                             "put only a declared name in braces, e.g. {" + (sorted(names)[0] if names else "x") +
                             "}; write a literal brace doubled, {{ or }}", token=field or None)
        out.append(say(field) if say is not None else field)
    return "".join(out)


def keep_names(text: str, names: Collection[str]) -> str:
    """`text` with the placeholders of names outside `names` written out as plain text (`{y}` → `y`, braces of the
    others and doubled braces kept): a rule copied into a spec that lacks some of the names it refers to (a derived
    backward spec, opgen.dsl.grad) keeps its meaning and stays renderable. Malformed texts are returned unchanged
    (render_rule reports them where the rule is used)."""
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError:
        return text
    out = []
    for literal, field, fmt, conv in parts:
        out.append(literal.replace("{", "{{").replace("}", "}}"))
        if field is None:
            continue
        if field in names or fmt or conv:
            out.append("{" + field + ("!" + conv if conv else "") + (":" + fmt if fmt else "") + "}")
        else:
            out.append(field)
    return "".join(out)
