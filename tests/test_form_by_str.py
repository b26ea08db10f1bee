"""A string static attribute picks the shapes (`form_by`, docs/design.md "Shapes an attribute picks"): a small op
whose x and y are [B, S, H] or [B, H, S] by a `layout` string attribute (more than one input_layout, as in
FlashAttentionScore).
The interpreter, the emitted aclnn layer (a strcmp over the choices; CANN's 161002 on another string), InferShape
(RuntimeAttrs::GetStr), the tiling key and the TilingFunc's dim reads (AttrStrIndex), and the emulated kernel in
both layouts against float64; renaming the attribute changes nothing but its name."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from opgen.errors import ValidationError
from opgen.interp import interpret
from opgen.registry import load_spec

LAYOUT = '''from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("LayoutSilu", aclnn="aclnnLayoutSilu", socs=(A2, A3), round="rint")
B = spec.dim("B", max=4096)
S = spec.dim("S", max=65536)
H = spec.dim("H", max=8192)
(T,) = spec.dtype_vars("T")
spec.attr("layout", str, "BSH", choices=("BSH", "BHS"), static=True, doc="axis order of x and y")
spec.input("x", T, {"BSH": [B, S, H], "BHS": [B, H, S]}, form_by="layout")
spec.output("y", T, {"BSH": [B, S, H], "BHS": [B, H, S]}, form_by="layout")
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, x, layout):
    return {"y": x / (1.0 + b.exp(-x))}
'''

GXX = shutil.which("g++")


def _spec(tmp_path, name="layout"):
    (tmp_path / name).mkdir(exist_ok=True)
    path = tmp_path / name / "layout_silu.py"
    path.write_text(LAYOUT.replace('"layout"', f'"{name}"').replace(", layout)", f", {name})"))
    return load_spec(str(path)), str(path)


def _silu64(x):
    x = np.asarray(x, np.float64)
    return x / (1.0 + np.exp(-x))


def test_the_string_picks_the_form_in_the_interpreter(tmp_path):
    spec, _ = _spec(tmp_path)
    x = np.random.default_rng(0).standard_normal((2, 3, 5)).astype(np.float32)
    for layout in ("BSH", "BHS"):
        y = interpret(spec, {"x": x}, {"layout": layout})["y"]
        assert y.shape == (2, 3, 5) and np.allclose(y, _silu64(x), rtol=2e-6, atol=1e-7)
    assert [k.forms for k in spec.keys()] == [(0,), (1,)]
    with pytest.raises(ValidationError, match=r"layout: must be one of 'BSH', 'BHS', got 'BNSD'"):
        interpret(spec, {"x": x}, {"layout": "BNSD"})


def test_host_code_reads_the_string(tmp_path):
    """The TilingFunc reads S from axis 1 for BSH and axis 2 for BHS, by the string's index among the choices."""
    from opgen.ir.dims import Sym
    from opgen.tiling.emit import attr_key_cpp, dim_cpp

    spec, _ = _spec(tmp_path)
    assert dim_cpp(spec, Sym("S")) == ('(AttrStrIndex(context, 0, {"BSH", "BHS"}) == 0 ? xShape.GetDim(1) '
                                       ': xShape.GetDim(2))')
    assert attr_key_cpp(spec) == 'AttrStrIndex(context, 0, {"BSH", "BHS"}) * 1'


def test_renaming_the_attribute_changes_only_its_name(tmp_path):
    from opgen.codegen import generate_cached

    a = generate_cached(_spec(tmp_path, "layout")[0])[1]
    b = generate_cached(_spec(tmp_path, "ordAxs")[0])[1]   # as long as "layout", so formatting is the same
    assert sorted(a) == sorted(b)
    digest = re.compile(r"[0-9a-f]{32,64}")   # the spec text's digests (opgen_package.json, binary names)
    differ = [f for f in a if digest.sub("#", a[f]) != digest.sub("#", b[f].replace("ordAxs", "layout"))]
    assert differ == [], differ


@pytest.fixture(scope="module")
def layout_gen(run_shared):
    """(spec, spec path, generated tree) of LAYOUT, generated once per run for the aclnn-layer and kernel tests below
    (one aclnn runner build; tests/conftest.py run_shared)."""
    from opgen.codegen import write_ops

    d = run_shared("layout-silu", lambda d: write_ops([_spec(d)[1]], str(d / "gen")))
    path = d / "layout" / "layout_silu.py"
    return load_spec(str(path)), str(path), d / "gen"


@pytest.mark.skipif(GXX is None, reason="g++ not available")
@pytest.mark.slow
def test_aclnn_layer_refuses_another_string(layout_gen):
    """CANN's ACLNN_ERR_PARAM_INVALID (161002) and one line naming the attribute and its choices; either layout
    string is accepted."""
    from opgen.check.aclnn import call_attrs, call_outputs, device_dtypes, encode_call, run_runner
    from opgen.check.run import aclnn_runner
    from opgen.codegen.model import OpModel
    from opgen.dsl.examples import random_inputs

    spec, _path, gen = layout_gen
    dims, attrs = {"B": 2, "S": 3, "H": 5}, {"layout": "BSH"}
    inputs = {k: v for k, v in random_inputs(spec, dims, attrs, {"T": "float32"}, seed=0).items() if v is not None}
    dev = device_dtypes(spec, inputs, {"T": "float32"})
    names = {k: getattr(v, "long_name", v) for k, v in dev.items()}
    m = OpModel(spec)
    base = encode_call(m, inputs, call_attrs(spec, inputs, attrs),
                       call_outputs(spec, inputs, attrs, {"T": "float32"}, dev), names).split(" ")
    at = next(k for k, a in enumerate(m.api_params) if a.cpp == "layout")
    assert base[at] == "BSH"
    _, runner = aclnn_runner(spec, gen_dir=gen)
    lines = [list(base), base[:at] + ["BNSD"] + base[at + 1:], base[:at] + ["BHS"] + base[at + 1:]]
    got = run_runner(runner, [" ".join(t) for t in lines])
    assert got[0][0] == 0, got[0]
    assert got[1][0] == 161002 and got[1][1].startswith("layout: must be one of 'BSH', 'BHS', got 'BNSD'"), got[1]
    assert got[2][0] == 0, got[2]   # [2, 3, 5] read as [B, H, S]: H 3, S 5, y the same shape


@pytest.mark.slow
@pytest.mark.skipif(GXX is None, reason="g++ not available")
def test_emulated_kernel_in_both_layouts(layout_gen):
    """The string reaches the TilingFunc (case file -> RuntimeAttrs::GetStr): each layout's key, and y within
    2^-20 of float64 silu."""
    from opgen.check import run_check

    _, path, gen = layout_gen
    keys = {}
    for layout in ("BSH", "BHS"):
        r = run_check(path, dims={"B": 2, "S": 33, "H": 40}, attrs={"layout": layout}, dtypes={"T": "float32"},
                      gen_dir=gen, seed=1, progress=False)
        assert not r.faults and r.passed, (layout, r.faults[:3], r.failed_outputs())
        want = _silu64(r.inputs["x"])
        got = np.asarray(r.arrays["y"], np.float64)
        assert got.shape == want.shape == ((2, 33, 40) if layout == "BSH" else (2, 40, 33))
        assert np.all(np.abs(got - want) <= 2.0**-20 * (np.abs(want) + 1e-30) + 1e-38), layout
        keys[layout] = r.tiling_key
    assert keys["BSH"] != keys["BHS"]
