"""What the emitted aclnn layer prints for a rule the interpreter words as "<name>: <rule>": the same text, except
where the emitted check is one of opbase's check macros (aclnn_kernels/common/op_error_check.h), which print CANN's
own text. Shared by the tests that compare the two."""

from __future__ import annotations

import re

from opgen.codegen.model import OpModel
from opgen.ir.dtypes import parse_dtype

# where the interpreter's rules name a second parameter (validate.py's texts): "(from x)", "(the shape of x)",
# "output y is", "(the shape for mode="
_NAMED = re.compile(r"(\(from |\(the shape of |output |\(the shape for )(\w+)")


def public_names(spec) -> dict:
    """{spec parameter name: the public C++ name the aclnn layer's messages give it} (OpModel.api_params)."""
    return {a.param.name: a.cpp for a in OpModel(spec).api_params if a.param is not None}


def as_opbase_prints(verdict: str, spec) -> str:
    """The aclnn layer's message for the interpreter's `verdict`: the same text with each parameter named as the
    caller passed it (its public name), except where the emitted check is one of opbase's macros, which print
    CANN's own text (OP_CHECK_NULL: a null tensor or host array; OP_CHECK_DTYPE_NOT_SUPPORT: a dtype outside its
    variable's column, the list in DType order)."""
    said = public_names(spec)
    name, _, rule = verdict.partition(": ")
    decl = next((i for i in spec.inputs if i.name == name), None)
    pub = said.get(name, name)
    if rule == "required input is missing (null)":
        if getattr(decl, "host", False):
            return f"Expected a value of type List[int] for argument {pub} but instead found type null."
        return f"Expected a proper Tensor but got null for argument {pub}."
    m = re.fullmatch(r"dtype (\w+) is not supported for (\w+) \(allowed: .*\)", rule)
    if m and decl is not None:
        allowed = sorted({r[m.group(2)] for r in spec.dtype_rows}, key=lambda d: d.value)
        return (f"Tensor {pub} not implemented for {parse_dtype(m.group(1)).cann}, should be in dtype "
                f"support list [{''.join(a.cann + ',' for a in allowed)}].")
    rule = _NAMED.sub(lambda mm: mm.group(1) + said.get(mm.group(2), mm.group(2)), rule)
    # a rule text written in the spec names parameters in braces ({norm_type}); the interpreter prints the spec's
    # name there and the aclnn layer the public one (docs/design.md "Rule texts"). The spec's raw texts say which
    # words are placeholders: map those words only.
    placeholders = _placeholders(spec)
    for n in sorted(placeholders - set(spec.dims_), key=len, reverse=True):
        rule = re.sub(rf"\b{re.escape(n)}\b", said.get(n, n), rule)
    return f"{pub}: {rule}" if rule or verdict.endswith(": ") else verdict


_PLACEHOLDERS: dict = {}


def _placeholders(spec) -> set:
    """The names a spec's rule texts put in braces (computed once per spec)."""
    key = (spec.file, spec.name)
    if key not in _PLACEHOLDERS:
        _PLACEHOLDERS[key] = {n for t in set(spec_rule_texts(spec)) for n in re.findall(r"(?<!\{)\{(\w+)\}", t)}
    return _PLACEHOLDERS[key]


def spec_rule_texts(spec) -> list[str]:
    """The raw rule texts of a spec: its relations' and every text its static checks return over their inputs'
    presence and static attributes' choices (at most a few hundred calls)."""
    import itertools

    texts = [r.rule for r in spec.relations if r.when is None]
    static = [a for a in spec.attrs if a.static]
    opts = [i.name for i in spec.inputs if i.optional]
    for vals in itertools.product(*(a.choices or (a.default,) for a in static)):
        attrs = {a.name: v for a, v in zip(static, vals)}
        cases = [dict(zip(opts, pres)) for pres in itertools.product((False, True), repeat=min(len(opts), 6))]
        cases += [{n: k != j for k, n in enumerate(opts)} for j in range(len(opts))]     # one absent
        cases += [{n: k == j for k, n in enumerate(opts)} for j in range(len(opts))]     # one present
        for case in cases:
            present = {i.name: True for i in spec.inputs} | case
            for r in spec.requirements:
                if r.kind == "static":
                    try:
                        t = r.fn(attrs, present)
                    except (KeyError, TypeError):
                        continue
                    if isinstance(t, str):
                        texts.append(t)
    return texts
