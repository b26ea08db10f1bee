"""List-of-int attributes (`spec.attr(name, list[int], ...)`, CANN's OpDef ListInt and the aclnn API's
`const aclIntArray*`) at every level: the value text the CLI reads, the interpreter's tuple, the emitted files
(OpDef, proto, aclnn signature, InferShape, TilingFunc), and the emitted aclnn layer and TilingFunc run against
the emulation. The expected values are hand-written from CANN's conventions (ops-nn's max_pool3_d_def.cpp spells
`.ListInt({...})`, metadef's RuntimeAttrs::GetListInt, opbase's null message for a List[int] argument), not
taken from opgen's earlier output. Spec-line errors are in tests/test_spec_errors.py ("list-attribute-...").
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from opgen.dsl.validate import parse_int_list
from opgen.errors import ValidationError
from opgen.registry import load_spec

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "examples" / "specs" / "reduce_sum.py"


# ---- the value text ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, want", [
    ("-2,-1", (-2, -1)), ("-1", (-1,)), ("[-2, -1]", (-2, -1)), ("(0, 3)", (0, 3)), ("[]", ()), ("()", ()),
    ("", ()), (" 1 , 2 ", (1, 2)), ("+4", (4,)),
])
def test_list_text_is_read_as_a_tuple_of_ints(text, want):
    assert parse_int_list(text) == want


@pytest.mark.parametrize("text", ["-2,,-1", "1.5", "a", "--1", "1,", "٣", "[1", "true"])
def test_malformed_list_text_is_refused(text):
    with pytest.raises(ValueError):
        parse_int_list(text)


@pytest.mark.parametrize("value", [[True], [1.0], "x,y", 3, None])
def test_values_that_are_not_int_lists_are_refused(value):
    with pytest.raises(ValueError):
        parse_int_list(value)


def test_sequences_and_numpy_arrays_are_accepted():
    assert parse_int_list([-2, -1]) == (-2, -1)
    assert parse_int_list(np.array([-2, -1])) == (-2, -1)
    assert parse_int_list(()) == ()


def test_bind_checks_the_choices_and_names_the_parameter():
    spec = load_spec(str(SPEC))
    x = np.ones((2, 3, 4), np.float32)
    assert spec.bind({"self": x}, {"dim": "-2,-1"}, {}).attrs["dim"] == (-2, -1)
    assert spec.bind({"self": x}, {"dim": [-1]}, {}).attrs["dim"] == (-1,)
    with pytest.raises(ValidationError, match=r"dim: must be one of \[-1\] \[-2,-1\], got \[0\]"):
        spec.bind({"self": x}, {"dim": "0"}, {})
    with pytest.raises(ValidationError, match=r"dim: must be a list of ints"):
        spec.bind({"self": x}, {"dim": "-2,,-1"}, {})


def test_the_body_receives_a_tuple(tmp_path):
    """The body's parameter is the tuple itself, so it passes straight to a reduction as its axes."""
    text = SPEC.read_text().replace('return {"out": self.f32()', 'assert type(dim) is tuple, dim\n    return {"out": self.f32()')
    p = tmp_path / "rs.py"
    p.write_text(text)
    spec = load_spec(str(p))
    for k in spec.keys():
        spec.graph(k)


# ---- the CLI -----------------------------------------------------------------------------------------------------

def _cli(*args):
    return subprocess.run([sys.executable, "-m", "opgen.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


def test_cli_interpret_takes_the_list_and_reports_one_line():
    ok = _cli("interpret", str(SPEC), "--dims", "Bd=2,M=3,H=4", "--attr", "dim=-2,-1")
    assert ok.returncode == 0 and "out: [2] float32" in ok.stdout, ok.stdout + ok.stderr
    one = _cli("interpret", str(SPEC), "--dims", "Bd=2,M=3,H=4", "--attr", "dim=[-1]")
    assert one.returncode == 0 and "out: [2, 3] float32" in one.stdout, one.stdout + one.stderr
    for value, msg in (("0", "must be one of [-1] [-2,-1], got [0]"), ("[]", "must be one of [-1] [-2,-1], got []"),
                       ("-2,,-1", "must be a list of ints")):
        bad = _cli("interpret", str(SPEC), "--dims", "Bd=2,M=3,H=4", "--attr", f"dim={value}")
        lines = bad.stderr.strip().splitlines()
        assert bad.returncode != 0 and len(lines) == 1 and lines[0].startswith("opgen: error: dim: "), bad.stderr
        assert msg in lines[0], lines[0]


# ---- emitted files -----------------------------------------------------------------------------------------------

def _files(spec):
    from opgen.codegen import generate_cached

    return generate_cached(spec)[1]


def test_emitted_files_spell_canns_list_forms():
    spec = load_spec(str(SPEC))
    f = _files(spec)
    assert 'this->Attr("dim").AttrType(OPTIONAL).ListInt({-1});' in f["op_host/reduce_sum_def.cpp"]
    assert ".ATTR(dim, ListInt, {-1})" in f["op_graph/reduce_sum_proto.h"]
    header = f["op_host/op_api/aclnn_reduce_sum.h"]
    assert re.search(r"aclnnReduceSumGetWorkspaceSize\(const aclTensor\* self, const aclIntArray\* dim, bool keepDim,",
                     header), header
    aclnn = f["op_host/op_api/aclnn_reduce_sum.cpp"]
    assert "OP_CHECK_NULL(dim, return ACLNN_ERR_PARAM_NULLPTR);" in aclnn
    assert "IntArrayChoice(p.dim, {{-1}, {-2, -1}}) < 0" in aclnn
    assert "const aclIntArray* dim" in f["op_host/op_api/reduce_sum.h"]
    tiling = f["op_host/reduce_sum_tiling.cpp"]
    assert "attrs->GetListInt(index)" in tiling and "AttrListIndex(context, 0, {{-1}, {-2, -1}})" in tiling
    infer = f["op_host/reduce_sum_infershape.cpp"]
    assert "attrs->GetListInt(0)" in infer and "ListIntChoice(formOfAttr0Ptr, {{-1}, {-2, -1}})" in infer
    example = f["examples/test_aclnn_reduce_sum.cpp"]
    assert "aclCreateIntArray(dimHost.data(), dimHost.size())" in example and "aclDestroyIntArray(dim);" in example
    ut = f["tests/ut/op_host/test_reduce_sum_tiling.cpp"]
    assert 'CreateFrom<std::vector<int64_t>>(std::vector<int64_t>{-1})' in ut
    assert "IntArrayDesc(vector<int64_t>{-1})" in f["tests/ut/op_host/op_api/test_aclnn_reduce_sum.cpp"]
    assert "| `dim` | 输入 |" in f["docs/aclnnReduceSum.md"]


def test_renaming_the_attribute_changes_nothing_but_names(tmp_path):
    """`dim` renamed to `axes`: every emitted file is the same once the name is put back (the package json's
    binary digests hash the attribute name, so they are compared without it)."""
    from opgen.codegen import generate_cached

    text = SPEC.read_text().replace('spec.attr("dim"', 'spec.attr("axes"').replace('form_by="dim"', 'form_by="axes"') \
        .replace("def _(b, self, dim, keepDim):", "def _(b, self, axes, keepDim):").replace("sum(dim,", "sum(axes,")
    p = tmp_path / "reduce_sum.py"
    p.write_text(text)
    a = generate_cached(load_spec(str(SPEC)))[1]
    b = generate_cached(load_spec(str(p)))[1]
    assert set(a) == set(b)
    differ = []
    for path in a:
        if path.endswith(".json"):
            continue
        def norm(text):   # the spec file's path (the banner, the regenerate command) differs; names put back
            text = "\n".join(ln for ln in text.splitlines() if "reduce_sum.py" not in ln)
            return re.sub(r"\b(axes|dim)(Host)?\b", r"NAME\2", text)

        if norm(a[path]) != norm(b[path]):
            differ.append(path)
    assert differ == [], differ


# ---- the emitted aclnn layer and TilingFunc against the emulation --------------------------------------------------

pytestmark_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")


def _call(attrs, gen_dir):
    from opgen.check.aclnn import call_attrs, call_outputs, device_dtypes, encode_call
    from opgen.check.run import aclnn_runner
    from opgen.codegen.model import OpModel
    from opgen.dsl.examples import random_inputs

    spec = load_spec(str(SPEC))
    inputs = random_inputs(spec, {"Bd": (2,), "M": 3, "H": 5}, attrs, {}, seed=0)
    dev = device_dtypes(spec, inputs, {})
    names = {k: getattr(v, "long_name", v) for k, v in dev.items()}
    m = OpModel(spec)
    line = encode_call(m, inputs, call_attrs(spec, inputs, dict(attrs)), call_outputs(spec, inputs, dict(attrs), {}, dev),
                       names)
    _, runner = aclnn_runner(spec, gen_dir=gen_dir)
    return spec, m, runner, line.split(" ")


@pytest.mark.slow
@pytestmark_gxx
def test_aclnn_layer_null_and_values_outside_the_choices(examples_gen):
    """A null dim is 161001 with opbase's text for a List[int] argument; a value outside the choices (another
    axis, the empty list, a longer list) is 161002 naming dim and the allowed values; an allowed value reaches the
    kernel launch as the OpDef attribute (the emulation records OP_ATTR's values)."""
    from opgen.check.aclnn import launched_attr_mismatches, run_runner

    spec, m, runner, base = _call({"dim": (-2, -1)}, examples_gen)
    k = next(i for i, a in enumerate(m.api_params) if a.cpp == "dim")
    assert base[k] == "a:-2,-1"

    def with_dim(tok):
        t = list(base)
        t[k] = tok
        return " ".join(t)

    allowed = "dim: must be one of [-1], [-2, -1], got "
    cases = [("a:-2,-1", 0, ""), ("null", 161001,
                                   "Expected a value of type List[int] for argument dim but instead found type null."),
             ("a:0", 161002, allowed + "[0]"), ("a:", 161002, allowed + "[]"), ("a:-3,-2,-1", 161002, allowed + "[-3, -2, -1]"),
             ("a:-1,-2", 161002, allowed + "[-1, -2]")]
    got = run_runner(runner, [with_dim(c[0]) for c in cases], launches=True)
    for (tok, code, msg), (rc, text, launches, launched) in zip(cases, got):
        assert rc == code and text == msg, (tok, rc, text)
        if code == 0:
            assert launches == 1 and launched == ["-2,-1", "0"], launched
            assert launched_attr_mismatches(spec, {"dim": (-2, -1), "keepDim": False}, launched) == []
            assert launched_attr_mismatches(spec, {"dim": (-1,), "keepDim": False}, launched)
    # dim [-1] with the output shape [Bd] of [-2, -1]: the form the attribute picks is checked
    _, _, _, base1 = _call({"dim": (-1,)}, examples_gen)
    (rc, text, _, _), = run_runner(runner, [with_dim("a:-1")], launches=True)
    assert rc == 161002 and text.startswith("out:"), text
    assert base1[k] == "a:-1"


@pytest.mark.slow
@pytestmark_gxx
def test_tiling_key_follows_the_list_value(examples_gen):
    """The TilingFunc reads dim with GetListInt and puts its position among the choices in the key's attribute
    digit (key = attrKey * 100 + dtypeKey * 10 + strategy): [-1] is choice 0, [-2, -1] choice 1; each runs its own
    kernel branch, checked against the interpreter."""
    from opgen.check.run import run_check

    for value, attr_key in (("-1", 0), ("-2,-1", 1)):
        r = run_check(str(SPEC), dims={"Bd": (3,), "M": 4, "H": 9}, attrs={"dim": value}, gen_dir=examples_gen,
                      progress=False)
        assert r.passed and not r.faults, value
        assert r.tiling_key // 100 == attr_key and r.tiling_key // 10 % 10 == 1, (value, r.tiling_key)


def test_a_static_rule_on_a_list_attribute_compares_the_array(tmp_path):
    """A spec.check on="static" that reads the list: the emitted aclnn layer tests the array against the tuple
    element by element (IntArrayChoice against that one choice), not as a C++ `==` of a pointer."""
    text = SPEC.read_text().replace(
        'spec.dtypes((T,), [(f32,), (f16,), (bf16,)])',
        'spec.dtypes((T,), [(f32,), (f16,), (bf16,)])\nspec.attr("mode", int, 0, choices=(0, 1), static=True)\n'
        'spec.check("mode", lambda a, pr: "mode 1 needs dim [-1]" if a["mode"] == 1 and a["dim"] != (-1,) else None)'
    ).replace("def _(b, self, dim, keepDim):", "def _(b, self, dim, keepDim, mode):")
    p = tmp_path / "reduce_sum.py"
    p.write_text(text)
    aclnn = _files(load_spec(str(p)))["op_host/op_api/aclnn_reduce_sum.cpp"]
    assert 'if (p.mode == 1 && IntArrayChoice(p.dim, {{-2, -1}}) == 0) {' in aclnn
    assert 'OP_LOGE(ACLNN_ERR_PARAM_INVALID, "mode: mode 1 needs dim [-1]");' in aclnn


def test_api_fixed_refuses_a_list_attribute(tmp_path):
    from opgen.errors import SpecError

    text = SPEC.read_text() + ('\nfrom opgen.dsl import api\nspec.aclnn_signature(api.param("self"), api.fixed("dim", (-1,)), '
                               'api.param("keepDim"), api.param("out"))\n')
    p = tmp_path / "reduce_sum.py"
    p.write_text(text)
    with pytest.raises(SpecError, match="attribute 'dim' is a list\\[int\\] attribute, which cannot be fixed"):
        load_spec(str(p))
