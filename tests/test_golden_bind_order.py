"""The emitted golden's _BIND_ORDER (opgen.dsl.validate.binding_order, docs/design.md "Shape forms at run time"):
the declaration order is named, not listed again, when every input binds first; a spec with inputs of several
shape forms lists them after the others (the orders read off the specs' declarations by hand)."""

from __future__ import annotations

import ast

from opgen.codegen.golden import GOLDEN_PATH, emit_golden
from opgen.registry import load_spec


def _assignments(text: str) -> dict:
    """{name: source text of the value} of the golden's module-level assignments."""
    return {t.id: ast.get_source_segment(text, node.value) for node in ast.parse(text).body
            if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}


def test_one_shape_inputs_name_the_declaration_order():
    """NormRopeConcat: every input has one shape, so the order is _INPUTS itself."""
    got = _assignments(emit_golden(load_spec("NormRopeConcat"))[GOLDEN_PATH])
    assert got["_BIND_ORDER"] == "_INPUTS", got["_BIND_ORDER"]


def test_inputs_of_several_forms_bind_last():
    """AdaLayerNormV2 declares x [Bd, S, H], scale / shift [Bd, H] or [Bd, 1, H], weight / bias [H]: the two
    inputs of two forms bind after the three of one."""
    got = _assignments(emit_golden(load_spec("AdaLayerNormV2"))[GOLDEN_PATH])
    assert ast.literal_eval(got["_INPUTS"]) == ["x", "scale", "shift", "weight", "bias"]
    assert ast.literal_eval(got["_BIND_ORDER"]) == ["x", "weight", "bias", "scale", "shift"]
