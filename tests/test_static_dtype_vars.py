"""Dtype variables that select the body (docs/design.md "Dtype variables that select the body"): a spec whose bias
enters before or after the dequantisation scale by its dtype, as aclnnQuantMatmulV4's formula list states (INT32:
(x1 @ x2 + bias) * scale; FLOAT32: x1 @ x2 * scale + bias), interpreted against float64."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from opgen.errors import SpecError
from opgen.interp.run import interpret
from opgen.kernel.family import NoKernel
from opgen.registry import load_spec
from opgen.tiling.pipeline import kernel_build

HEAD = '''\
from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32, i8, i32

spec = OpSpec("QbmBias", aclnn="aclnnQbmBias", socs=(A2, A3), round="rint", doc="int8 product, bias by dtype")
M = spec.dim("M", max=65535)
K = spec.dim("K", max=65535)
N = spec.dim("N", max=65535)
(Y,) = spec.dtype_vars("Y")
(BIAS,) = spec.dtype_vars("BIAS", static=True)
spec.input("x1", i8, [M, K])
spec.input("x2", i8, [K, N])
spec.input("scale", f32, [N])
spec.input("bias", BIAS, [N], optional=True)
'''
BODY = '''\
spec.output("y", Y, [M, N])
spec.dtypes((Y, BIAS), [(bf16, i32), (bf16, f32), (f16, i32), (f16, f32)])


@spec.body
def _(b, x1, x2, scale, bias):
    acc = b.matmul(x1.cast(i32), x2.cast(i32))
    if bias is not None and bias.dtype == i32:   # CANN: an INT32 bias joins the int32 sums before the scale
        acc = acc + bias
    y = acc.cast(f32) * scale
    if bias is not None and bias.dtype != i32:   # a FLOAT32 bias after it
        y = y + bias
    return {"y": y.cast(Y, "rint")}
'''


def _spec(tmp_path, text=HEAD + BODY, name="qbm_bias.py"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return load_spec(str(p))


def _inputs(rng, M, K, N, bias_dtype):
    x1 = rng.integers(-128, 128, (M, K)).astype(np.int8)
    x2 = rng.integers(-128, 128, (K, N)).astype(np.int8)
    scale = (rng.random(N) * 2e-3 + 1e-4).astype(np.float32)
    if bias_dtype == "int32":
        bias = rng.integers(-40000, 40000, N).astype(np.int32)
    elif bias_dtype == "float32":
        bias = (rng.standard_normal(N) * 4).astype(np.float32)
    else:
        bias = None
    return {"x1": x1, "x2": x2, "scale": scale, "bias": bias}


@pytest.mark.parametrize("bias_dtype", ["int32", "float32", None])
def test_the_bias_enters_where_its_dtype_says(tmp_path, bias_dtype):
    """float64 of CANN's formula per bias dtype; the other order is far from it (the test tells them apart)."""
    spec = _spec(tmp_path)
    rng = np.random.default_rng(7)
    M, K, N = 37, 50, 45
    x = _inputs(rng, M, K, N, bias_dtype)
    prod = x["x1"].astype(np.float64) @ x["x2"].astype(np.float64)
    s = x["scale"].astype(np.float64)
    if bias_dtype == "int32":
        ref = (prod + x["bias"].astype(np.float64)) * s
        other = prod * s + x["bias"].astype(np.float64)
    elif bias_dtype == "float32":
        ref = prod * s + x["bias"].astype(np.float64)
        other = (prod + x["bias"].astype(np.float64)) * s
    else:
        ref = other = prod * s
    got = interpret(spec, x, dtypes={"Y": "float16"})["y"].astype(np.float64)
    np.testing.assert_allclose(got, ref, rtol=2 ** -10, atol=1e-3)
    if bias_dtype is not None:
        assert np.max(np.abs(other - ref)) > 1.0


def test_the_keys_carry_the_static_dtype(tmp_path):
    """One specialisation per (presence, BIAS) and the call's binding picks its key."""
    spec = _spec(tmp_path)
    texts = [spec.key_text(k) for k in spec.keys()]
    assert texts == ["bias present, BIAS=i32", "bias present, BIAS=f32", "bias absent, BIAS=i32",
                     "bias absent, BIAS=f32"]
    rng = np.random.default_rng(1)
    for dt, want in (("int32", "i32"), ("float32", "f32")):
        key = spec.bind(_inputs(rng, 3, 4, 5, dt), {}, {"Y": "float16"}).key
        assert [d.value for d in key.dtypes] == [want] and key in spec.keys()
    g = spec.graph(spec.keys()[0])
    assert any(n.op == "add" and str(g.values()[n.result.name].type.dtype).endswith("i32") for n in g.nodes)


ROWS = '''\
from opgen.dsl import A2, A3, OpSpec, f32, i32

spec = OpSpec("AddByDtype", aclnn="aclnnAddByDtype", socs=(A2, A3), round="rint", doc="x plus b")
N = spec.dim("N", max=65535)
(B,) = spec.dtype_vars("B", static=True)
spec.input("x", f32, [N])
spec.input("w", B, [N])
spec.output("y", f32, [N])
spec.dtypes((B,), [(i32,), (f32,)])


@spec.body
def _(b, x, w):
    return {"y": x + (w.cast(f32) if w.dtype == i32 else w)}
'''


def test_a_family_without_dtype_keys_refuses_it(tmp_path):
    """A family whose classes are not keyed by a dtype (the rows family) refuses the spec naming the input, the
    variable and the family."""
    spec = _spec(tmp_path, ROWS, "rows.py")
    with pytest.raises(NoKernel) as e:
        kernel_build(spec)
    msg = str(e.value)
    assert "%w" in msg and "B, a static dtype variable" in msg and "rows.py:7" in msg and "family" in msg, msg


def test_the_cube_family_keys_its_classes_by_the_static_dtype(tmp_path):
    """The cube family lowers one class per (attrKey, BIAS): the int32 bias on the cube (bias table), the fp32 bias
    an epilogue add after the scale; each key's class is its dtype's."""
    spec = _spec(tmp_path)
    u = kernel_build(spec)
    lays = u.lowered.extra["layouts"]
    for k in spec.keys():
        want = ("bias", "i32") if spec.static_dtypes(k)["BIAS"].value == "i32" else ()
        assert lays[k].bias == want, spec.key_text(k)
    assert len({id(c) for c in u.lowered.programs.values()}) == 2


def test_static_dtype_variables_type_inputs_only(tmp_path):
    """On an output (its dtype is what the body's cast makes) or typing nothing, it is refused at its line."""
    with pytest.raises(SpecError, match="output y is typed by BIAS, a static dtype variable"):
        _spec(tmp_path, HEAD.replace('spec.input("bias", BIAS, [N], optional=True)\n',
                                     'spec.input("bias", Y, [N], optional=True)\n') + BODY.replace(
            'spec.output("y", Y, [M, N])', 'spec.output("y", BIAS, [M, N])').replace(
            "bias.dtype == i32", "False").replace("bias.dtype != i32", "True").replace(
            "y.cast(Y", "y.cast(BIAS").replace("[(bf16, i32), (bf16, f32), (f16, i32), (f16, f32)]",
                                                 "[(bf16, f32), (f16, f32)]"), "out.py")
    with pytest.raises(SpecError, match="static dtype variable BIAS types no input"):
        _spec(tmp_path, HEAD.replace('spec.input("bias", BIAS, [N], optional=True)\n',
                                     'spec.input("bias", f32, [N], optional=True)\n').replace(
            '(BIAS,) = spec.dtype_vars("BIAS", static=True)', '(BIAS,) = spec.dtype_vars("BIAS", static=True)\n'
            '(Z,) = spec.dtype_vars("Z")\nspec.input("z", Z, [N])') + BODY.replace(
            "(Y, BIAS)", "(Y, Z)").replace("def _(b, x1, x2, scale, bias)", "def _(b, x1, x2, scale, bias, z)"),
            "none.py")
