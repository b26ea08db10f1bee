"""Rule texts written in specs name parameters in braces and each layer prints its own names (opgen.dsl.rules;
docs/design.md "Rule texts"): the interpreter the spec's names, the aclnn layer the public names a caller passes.

The expected texts are written out here by hand; the public names come from the spec's declared aclnn signature
(tests/opbase_texts.public_names)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

from opgen.codegen.aclnn import AclnnPlan
from opgen.dsl.rules import keep_names, render_rule
from opgen.errors import SpecError, ValidationError
from opgen.registry import all_specs, load_spec
from opgen.interp.run import interpret
from opbase_texts import public_names

ROOT = Path(__file__).resolve().parent.parent


def test_render_rule_spells_each_name_by_the_layer_and_keeps_doubled_braces():
    names = {"encoder_key", "norm_type"}
    text = "required when {norm_type} == 2 and {encoder_key} is given; one of {{0, 1}}"
    assert render_rule(text, names) == "required when norm_type == 2 and encoder_key is given; one of {0, 1}"
    pub = {"encoder_key": "encoderKey", "norm_type": "normType"}
    assert render_rule(text, names, pub.__getitem__) == ("required when normType == 2 and encoderKey is given; "
                                                         "one of {0, 1}")


@pytest.mark.parametrize("text, says", [
    ("needs {gamma}", "{gamma} is not a declared input, attribute, output or dim"),
    ("needs {x!r}", "{x!r} has a conversion"),
    ("needs {x:>4}", "{x:>4} has a format spec"),
    ("needs {x", "expected '}' before end of string"),
    ("a } alone", "Single '}' encountered"),
])
def test_render_rule_refuses_what_is_not_a_declared_name(text, says):
    with pytest.raises(SpecError) as e:
        render_rule(text, {"x"})
    assert says in str(e.value)


def test_keep_names_spells_out_names_a_derived_spec_lacks():
    assert keep_names("{y} must match {x}; {{literal}}", {"x"}) == "y must match {x}; {{literal}}"
    assert render_rule(keep_names("{y} must match {x}", {"x"}), {"x"}, str.upper) == "y must match X"


def _spec_file(tmp_path, rule_line: str) -> Path:
    src = textwrap.dedent('''\
        from opgen.dsl import A2, OpSpec, f32

        spec = OpSpec("RuleProbe", aclnn="aclnnRuleProbe", socs=(A2,))
        N, H = spec.dims("N H")
        spec.input("x", f32, [N, H])
        spec.input("bias_in", f32, [H], optional=True)
        spec.attr("mode", int, 0, choices=(0, 1), static=True)
        spec.output("y", f32, [N, H])
        RULE_LINE


        @spec.body
        def _(b, x, bias_in, mode):
            return {"y": x if bias_in is None else x + bias_in}
        ''').replace("RULE_LINE", rule_line)
    p = tmp_path / "rule_probe.py"
    p.write_text(src)
    return p


def test_a_relation_text_naming_an_undeclared_parameter_is_refused_at_its_line(tmp_path):
    p = _spec_file(tmp_path, 'spec.require(H <= 4096, "x", "{x} rows must fit {weight}")')
    with pytest.raises(SpecError) as e:
        load_spec(str(p))
    assert e.value.line == 9 and "{weight} is not a declared input" in str(e.value)


def test_a_static_check_names_parameters_in_each_layers_names(tmp_path):
    p = _spec_file(tmp_path, 'spec.check("bias_in", lambda a, pr: "must be absent when {mode} is 1 (with {x})" '
                             'if a["mode"] == 1 and pr["bias_in"] else None)\n'
                             'spec.aclnn_signature(api.param("self", "x"), api.param("biasOptional", "bias_in"), '
                             'api.param("modeKind", "mode"), api.param("out", "y"))')
    p.write_text("from opgen.dsl import api\n" + p.read_text())
    spec = load_spec(str(p))
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValidationError) as e:
        interpret(spec, {"x": x, "bias_in": np.ones(3, np.float32)}, {"mode": 1})
    assert str(e.value) == "bias_in: must be absent when mode is 1 (with x)"
    texts = [c.fmt for c in AclnnPlan(spec)._mode_checks()]
    assert texts == ['"biasOptional: must be absent when modeKind is 1 (with self)"']


def test_a_static_check_naming_an_undeclared_parameter_is_a_spec_error(tmp_path):
    p = _spec_file(tmp_path, 'spec.check("bias_in", lambda a, pr: "conflicts with {scale}" if a["mode"] else None)')
    spec = load_spec(str(p))
    with pytest.raises(SpecError) as e:
        interpret(spec, {"x": np.ones((2, 3), np.float32)}, {"mode": 1})
    assert "{scale} is not a declared input" in str(e.value) and e.value.line == 9
    with pytest.raises(SpecError):
        AclnnPlan(spec)._mode_checks()


@pytest.mark.parametrize("text, said", [
    ('f"mode must be in {set([0, 2])}"', "mode must be in {0, 2}"),            # data in braces: text
    ('"a lone } from data, and {mode}"', "a lone } from data, and {mode}"),   # unclosed: all as written
])
def test_a_static_check_text_with_braces_of_data_is_printed_as_written(tmp_path, text, said):
    """A static check's text is produced on the caller's values and may carry braces of data (review finding: a
    set printed by an f-string became a SpecError about the message): braces around what is not a name are text,
    and an unclosed brace is printed as written, so the bad value gets its ValidationError."""
    p = _spec_file(tmp_path, f'spec.check("mode", lambda a, pr: {text} if a["mode"] else None)')
    with pytest.raises(ValidationError) as e:
        interpret(load_spec(str(p)), {"x": np.ones((2, 3), np.float32)}, {"mode": 1})
    assert str(e.value) == f"mode: {said}", str(e.value)



@pytest.mark.parametrize("on", ["values", "device"])
def test_a_values_check_names_parameters_in_the_interpreters_names(tmp_path, on):
    """A values (or device) check's rule text names other parameters in braces as a static check's does (README
    "Writing a spec": spec.check): the interpreter prints the spec's names, not the braces (new-user finding: a
    values check's "{mode}" was printed literally), and a doubled brace is one."""
    p = _spec_file(tmp_path, 'spec.check("x", lambda arrs, env, a: "must not exceed {mode} + 1, {0} {{H}}" '
                             'if arrs["x"].max() > a["mode"] + 1 else None, on="' + on + '")')
    with pytest.raises(ValidationError) as e:
        interpret(load_spec(str(p)), {"x": np.full((2, 3), 5.0, np.float32)}, {"mode": 1})
    assert str(e.value) == "x: must not exceed mode + 1, {0} {H}", str(e.value)


def _example_specs():
    files = sorted((ROOT / "examples" / "specs").glob("*.py")) + sorted(
        (ROOT / "examples" / "specs" / "derived").glob("*.py"))
    return [load_spec(str(f)) for f in files if not f.name.startswith("_")]


def test_no_aclnn_rule_text_speaks_a_spec_name_the_caller_does_not_pass():
    """Sweep: in every bundled and example spec, a mode rule or relation the aclnn layer prints names no parameter
    by a spec name that differs from the public name the caller passes (`norm_type` where the API says
    `normType`)."""
    offenders = []
    for spec in all_specs() + _example_specs():
        # a name that is also a dim's is printed as the dim (GroupNorm's attribute C equals dim C)
        said = {n: p for n, p in public_names(spec).items() if n != p and n not in spec.dims_}
        if not said:
            continue
        word = re.compile(r"\b(" + "|".join(map(re.escape, sorted(said, key=len, reverse=True))) + r")\b")
        plan = AclnnPlan(spec)
        for c in plan._mode_checks() + plan._constraints():
            text = c.fmt.partition(": ")[2]
            offenders += [f"{spec.name}: {c.fmt}" for _ in word.findall(text)[:1]]
    assert not offenders, "\n".join(offenders)


def test_a_relation_of_some_modes_binds_only_there_and_is_kept_by_a_derived_grad(tmp_path):
    """spec.require(relation, param, rule, when=...): checked only in the modes `when` selects (mode 1 here, by the
    interpreter); a gradient derived from the spec keeps it, with its mode."""
    from opgen.interp import interpret

    p = _spec_file(tmp_path, 'spec.require(N <= H, "x", "{mode} 1 needs N <= H", when=lambda a, pr: a["mode"] == 1)')
    x = np.ones((5, 3), np.float32)
    interpret(str(p), {"x": x}, {"mode": 0})
    with pytest.raises(ValidationError, match=r"x: mode 1 needs N <= H \(N <= H"):
        interpret(str(p), {"x": x}, {"mode": 1})
    interpret(str(p), {"x": x[:3]}, {"mode": 1})
    (tmp_path / "rule_probe_grad.py").write_text(
        'from opgen.dsl import derive_grad\n'
        'spec = derive_grad("rule_probe.py", "RuleProbeGrad", aclnn="aclnnRuleProbeGrad", wrt=["x"], '
        'grads={"y": "dy"}, names={"x": "dx"})\n')
    g = load_spec(str(tmp_path / "rule_probe_grad.py"))
    assert [(str(r.constraint), r.rule) for r in g.relations if r.when is not None] == [("N <= H", "{mode} 1 needs N <= H")]
