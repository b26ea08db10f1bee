"""Every bad-input item of the reference notes (the cases of tests/test_bad_inputs.py) through the EMITTED
aclnn layer (generated/<op>/op_host/op_api, compiled against the host emulation and called as
`opgen check` calls it): the layer returns CANN's code — 161001 for a null required tensor, 161002 for an
invalid one (docs/reference/ascendc.md §2.8, the ops' reference notes §2/§3) — with the interpreter's message,
and nothing is launched.

Not every item is an aclnn call: an unknown input or attribute name, an attribute value of the wrong
Python type, a float overflow or a fractional value in an integer array are properties of the npz/CLI
container that the interpreter rejects before any call exists; value checks that need device data
(topk indices inside their batch, fully masked rows) are listed in the emitted file as the kernel's
business (tests/test_codegen.py::test_host_and_device_value_checks). Those are counted and reported,
and the rest must be rejected with the interpreter's exact rule.
"""

from __future__ import annotations

import re
import shutil
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from opgen.check.run import aclnn_verdicts
from opgen.errors import ValidationError
from opgen.interp import interpret
from opgen.registry import load_spec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from opbase_texts import as_opbase_prints, public_names  # noqa: E402


pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")]

from test_bad_inputs import CASES, Ctx, build  # noqa: E402  (tests/ is on sys.path under pytest)

CONTAINER_ONLY = ("unknown", "overflow", "fractional", "-attr-", "int32-range")


def _mutated(case):
    op, inputs, attrs, dt = build(case.base)
    c = Ctx(case.base, op, dict(inputs), dict(attrs), dt)
    case.mutate(c)
    return c


def _named(msg: str) -> str:
    """The parameter a message of the aclnn layer names: "<name>: ..." of opgen's rules, or the argument of
    opbase's OP_CHECK_NULL / OP_CHECK_DTYPE_NOT_SUPPORT / OP_CHECK_DTYPE_NOT_MATCH texts."""
    m = re.match(r"Expected a .* for argument (\w+)|Tensor (\w+) (?:not implemented|expected dtype is)", msg)
    return (m.group(1) or m.group(2)) if m else msg.split(":")[0]


def test_reference_bad_inputs_return_canns_codes():
    by_op = defaultdict(list)
    for case in CASES:
        by_op[_mutated(case).op].append(case)
    judged = not_a_call = device_data = exact = 0
    for op, cases in sorted(by_op.items()):
        spec = load_spec(op)
        device_checks = {r.param for r in spec.requirements if r.kind == "values"} - {
            i.name for i in spec.inputs if i.host}
        ctxs = [_mutated(c) for c in cases]
        verdicts = aclnn_verdicts(op, [(c.inputs, c.attrs, c.dtypes or {}) for c in ctxs])
        for case, c, (code, msg) in zip(cases, ctxs, verdicts):
            with pytest.raises(ValidationError) as ei:
                interpret(c.op, c.inputs, c.attrs, c.dtypes)
            rule = str(ei.value)
            if code == -1 or any(k in case.id for k in CONTAINER_ONLY):
                not_a_call += 1
                continue
            if code == 0 and ei.value.param in device_checks:
                device_data += 1
                continue
            want = 161001 if re.search(r"required (input|attribute) is missing", rule) else 161002   # null
            assert code == want, f"{case.id}: aclnn returned {code} {msg!r}; the interpreter says {rule!r}"
            names = {ei.value.param} | {i.name for i in spec.inputs if getattr(i.dtype, "name", None) == ei.value.param}
            said = public_names(spec)
            names = {said.get(n, n) for n in names}   # the layer names each parameter as the caller passed it
            assert _named(msg) in names, f"{case.id}: {msg!r} vs {rule!r}"   # a dtype variable: its tensors
            if _named(msg) == said.get(ei.value.param, ei.value.param):
                exact += msg == as_opbase_prints(rule, spec)
            judged += 1
    print(f"aclnn-level: {judged} rejected with CANN's code ({exact} with the interpreter's exact message), "
          f"{not_a_call} container-only, {device_data} need device data")
    assert judged >= 200
    assert exact >= 190   # the emitted message is the interpreter's rule, word for word
