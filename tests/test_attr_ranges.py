"""Declared ranges of numeric attributes (`spec.attr(..., gt= / ge= / lt= / le=)`): the interpreter refuses a value
outside the range (NaN included) naming the attribute and the rule; the emitted aclnn layer refuses it with CANN's
161002 ACLNN_ERR_PARAM_INVALID and the same words (slow: it builds the layer); a spec whose default or choices break
its own range, or that gives a range to a non-numeric attribute, is a spec error at its line."""

from __future__ import annotations

import math
import shutil
import textwrap

import numpy as np
import pytest

from opgen.errors import SpecError, ValidationError
from opgen.interp import interpret
from opgen.registry import load_spec

SPEC = '''
from opgen.dsl import A2, A3, OpSpec, f32
spec = OpSpec("RangedScale", aclnn="aclnnRangedScale", socs=(A2, A3))
H = spec.dim("H")
spec.input("x", f32, [H])
spec.attr("alpha", float, {default}, {bounds})
spec.attr("k", int, 2, ge=1, le=8)
spec.output("y", f32, [H])


@spec.body
def _(b, x, alpha, k):
    return {{"y": x * alpha}}   # k: validated, not used by the math
'''


def _spec(tmp_path, default="0.5", bounds="gt=0.0, le=1.0"):
    p = tmp_path / "ranged.py"
    p.write_text(textwrap.dedent(SPEC.format(default=default, bounds=bounds)))
    return str(p)


@pytest.mark.parametrize("attrs, rule", [({"alpha": -1.0}, "alpha: must be > 0.0 and <= 1.0, got -1.0"),
                                         ({"alpha": 0.0}, "alpha: must be > 0.0 and <= 1.0, got 0.0"),
                                         ({"alpha": 1.5}, "alpha: must be > 0.0 and <= 1.0, got 1.5"),
                                         ({"alpha": math.nan}, "alpha: must be > 0.0 and <= 1.0, got nan"),
                                         # compared in fp32, as the kernel gets it: 1e-50 is 0 there
                                         ({"alpha": 1e-50}, "alpha: must be > 0.0 and <= 1.0, got 1e-50"),
                                         ({"k": 0}, "k: must be >= 1 and <= 8, got 0"),
                                         ({"k": 9}, "k: must be >= 1 and <= 8, got 9")])
def test_the_interpreter_refuses_a_value_outside_the_range(tmp_path, attrs, rule):
    x = np.ones(4, np.float32)
    with pytest.raises(ValidationError) as e:
        interpret(_spec(tmp_path), {"x": x}, attrs)
    assert str(e.value) == rule
    y = interpret(_spec(tmp_path), {"x": x}, {"alpha": 1.0, "k": 8})["y"]   # the bounds themselves are inside
    assert np.array_equal(y, x)
    interpret(_spec(tmp_path), {"x": x}, {"alpha": 1.00000001})   # 1.0 in fp32: inside


@pytest.mark.parametrize("default, bounds, words", [
    ("0.0", "gt=0.0", "default 0.0 is outside its range (> 0.0)"),
    ("0.5", "gt=0.0, ge=0.0", "both gt= and ge="),
    ("0.5", "ge='0'", "bound '0' is not a number"),
    ("0.5", "lt=3.4e39", "bound 3.4e+39 is outside the fp32 values the attribute can take"),
])
def test_a_range_the_spec_breaks_itself_is_a_spec_error(tmp_path, default, bounds, words):
    with pytest.raises(SpecError) as e:
        load_spec(_spec(tmp_path, default, bounds))
    assert words in str(e.value) and "ranged.py:" in str(e.value)


def test_a_range_on_a_string_attribute_is_a_spec_error(tmp_path):
    p = tmp_path / "s.py"
    p.write_text(SPEC.format(default="0.5", bounds="gt=0.0").replace('spec.attr("k", int, 2, ge=1, le=8)',
                                                                    'spec.attr("k", str, "a", ge=1)'))
    with pytest.raises(SpecError) as e:
        load_spec(str(p))
    assert "a range (gt= / ge= / lt= / le=) needs an int or float attribute" in str(e.value)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_the_emitted_aclnn_layer_refuses_it_with_161002_and_the_same_rule(tmp_path):
    from opgen.check.run import aclnn_verdicts
    from opgen.codegen import write_ops

    path = _spec(tmp_path)
    write_ops([path], str(tmp_path / "gen"))
    x = np.ones(4, np.float32)
    calls = [({"x": x}, {"alpha": a}, {}) for a in (0.5, 1.0, -1.0, 0.0, math.nan, 1e-50, 1.00000001)] + \
        [({"x": x}, {"k": 0}, {})]
    got = aclnn_verdicts(path, calls, gen_dir=tmp_path / "gen")
    assert [c for c, _m in got] == [0, 0, 161002, 161002, 161002, 161002, 0, 161002], got   # as the interpreter
    assert got[2][1] == "alpha: must be > 0.0 and <= 1.0, got -1" and got[7][1] == "k: must be >= 1 and <= 8, got 0"
    assert got[4][1] == "alpha: must be > 0.0 and <= 1.0, got nan", got[4]
