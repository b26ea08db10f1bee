"""NumPy in a spec body, as a new user writes it (nu13): NumPy scalars (np.float32(0.5), np.int64(3), the float32
a NumPy computation of a constant returns) are numbers like Python's, on either side of a tensor and as pow's
exponent or softplus' beta; a NumPy function applied to a traced tensor (np.exp(x), np.maximum(x, 0),
np.where(...), np.sum(x)) is a one-line SpecError at the spec line naming the builder's or the tensor's spelling
(np.maximum was "a tensor has no truth value ... instead of if/and/or", np.exp a bare ufunc TypeError), and a
variadic group used as a number (x.shape[0] of [*Bd, H]) names Prod. Values against float64 NumPy."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from opgen.errors import SpecError
from opgen.interp.run import interpret
from opgen.registry import load_spec

HEAD = """
import numpy as np
from opgen.dsl import A2, OpSpec, f32

spec = OpSpec("NpProbe", aclnn="aclnnNpProbe", socs=(A2,))
Bd = spec.variadic("Bd", max_rank=3)
N = spec.dim("N")
spec.input("x", f32, [Bd, N])
spec.output("y", f32, [Bd, N])


@spec.body
def _(b, x):
    return {{"y": {expr}}}
"""


def _spec(tmp_path, expr):
    p = tmp_path / "np_probe.py"
    p.write_text(textwrap.dedent(HEAD.format(expr=expr)))
    return load_spec(str(p))


def _x():
    return np.random.default_rng(13).uniform(0.25, 3.0, (2, 7)).astype(np.float32)


@pytest.mark.parametrize("expr, ref", [
    ("np.float32(0.5) * x", lambda x: 0.5 * x),
    ("x * np.float32(0.5)", lambda x: 0.5 * x),
    ("np.int64(3) - x", lambda x: 3 - x),
    ("x + np.float16(1)", lambda x: x + 1),
    ("np.int32(2) / x", lambda x: 2 / x),
    ("x ** np.float32(2)", lambda x: x * x),
    ("b.softplus(x, np.float32(2))", lambda x: np.log1p(np.exp(2 * x)) / 2),
    ("b.clamp(x, np.float32(0.5), np.float32(2))", lambda x: np.clip(x, 0.5, 2)),
    ("np.sqrt(np.float32(2)) * x", lambda x: float(np.sqrt(np.float32(2))) * x),
    # np.float64 is a float: it worked before, and must not recurse through NumPy's operator ufuncs now
    ("np.sqrt(2 / np.pi) * x", lambda x: np.sqrt(2 / np.pi) * x),
    ("np.float64(1) - x", lambda x: 1 - x),
    ("np.float64(2) / x + x * np.float64(3)", lambda x: 2 / x + 3 * x),
])
def test_numpy_scalars_are_numbers(tmp_path, expr, ref):
    """A NumPy scalar in the body is the number it holds (it was `cannot use np.float32(0.5) as a tensor`)."""
    x = _x()
    got = interpret(_spec(tmp_path, expr), {"x": x}, mode="exact")["y"]
    np.testing.assert_allclose(got, ref(x.astype(np.float64)), rtol=1e-12)


@pytest.mark.parametrize("expr, hint", [
    ("np.exp(x)", "b.exp(x)"),
    ("np.maximum(x, 0.0)", "b.maximum"),
    ("np.abs(x)", "b.abs(x)"),
    ("np.where(x > 1.0, x, 0.0)", "b.where"),
    ("np.sum(x, axis=-1, keepdims=True) + x", "x.sum(axes"),
    ("np.tanh(x) + 0 * np.ones(3)", "b.tanh(x)"),
    ("x * np.ones(7, np.float32)", "declare it as an input"),
])
def test_numpy_functions_on_a_tensor_name_the_dsl_spelling(tmp_path, expr, hint):
    """np.<function>(tensor) and a NumPy array beside a tensor: a SpecError at the body's line, one line, naming
    the spelling to use."""
    spec = _spec(tmp_path, expr)
    with pytest.raises(SpecError) as e:
        spec.graph(spec.keys()[0])
    assert "np_probe.py:14" in str(e.value), str(e.value)
    assert "\n" not in e.value.message
    assert "traced tensor" in str(e.value) or "NumPy array" in str(e.value), str(e.value)
    assert hint in str(e.value), str(e.value)


def test_a_variadic_group_used_as_a_number_names_prod(tmp_path):
    """x.shape[0] of [*Bd, N] is the group Bd, not a number: the error says so and names Prod("Bd")."""
    spec = _spec(tmp_path, "x.shape[0] * x")
    with pytest.raises(SpecError) as e:
        spec.graph(spec.keys()[0])
    assert "np_probe.py:14" in str(e.value)
    assert "variadic group Bd" in str(e.value) and 'Prod("Bd")' in str(e.value), str(e.value)
