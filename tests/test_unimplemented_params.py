"""Parameters of CANN's operator that a kernel does not implement (docs/design.md "Parameters a kernel does not
implement"): an optional input that must be absent (spec.input(accepts="absent")), an attribute limited to the values
the kernel implements (spec.attr(accepts=...)), a dtype attribute that follows a dtype variable (spec.attr(
dtype_of=Y)). They keep CANN's names and places in the OpDef and the aclnn signature; every layer refuses a call
that needs what is not implemented, naming the parameter and the rule.

The reference signature and OpDef are transcribed from ops-nn matmul/quant_batch_matmul_v3 (op_api/
aclnn_quant_matmul_v4.h: aclnnQuantMatmulV4GetWorkspaceSize(x1, x2, scale, offset, pertokenScaleOptional, bias,
transposeX1, transposeX2, out, workspaceSize, executor); op_host/quant_batch_matmul_v3_def.cpp: inputs x1, x2, scale,
offset, bias, pertoken_scale, output y, attributes dtype REQUIRED Int, transpose_x1 / transpose_x2 OPTIONAL
Bool(false), group_size OPTIONAL Int(0)); the ge::DataType values from metadef graph/c_types.h (DT_FLOAT16 1,
DT_BF16 27)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from opgen.codegen.model import OpModel
from opgen.errors import OpgenError, ValidationError
from opgen.registry import load_spec

ROOT = Path(__file__).resolve().parents[1]
QBMM = str(ROOT / "examples" / "specs" / "quant_batch_matmul_v3.py")
T_IN = "const aclTensor*"
V4 = [(n, T_IN) for n in "x1 x2 scale offset pertokenScaleOptional bias".split()] + \
    [("transposeX1", "bool"), ("transposeX2", "bool"), ("out", T_IN)]


def _x(m=5, k=40, n=7, seed=0, **extra):
    rng = np.random.default_rng(seed)
    out = {"x1": rng.integers(-128, 128, (m, k)).astype(np.int8), "x2": rng.integers(-128, 128, (n, k)).astype(np.int8),
           "scale": rng.uniform(1e-4, 2e-3, n).astype(np.float32), "bias": None}
    out.update(extra)
    return out


def test_the_header_and_opdef_are_canns():
    """aclnnQuantMatmulV4's parameters in CANN's order and C types; the OpDef's inputs, output and attributes with
    CANN's names, parameter types and defaults (dtype, transpose_x1, transpose_x2, group_size in CANN's order); the
    header says where dtype comes from, what offset must be, and that transposeX1 and transposeX2 take both values
    (x1 [M, K] or [K, M], x2 [K, N] or [N, K])."""
    from opgen.codegen import generate_cached
    from test_aclnn_api import _header_params

    spec = load_spec(QBMM)
    assert _header_params(spec) == V4
    files = generate_cached(spec)[1]
    opdef = files["op_host/quant_batch_matmul_v3_def.cpp"]
    import re
    assert re.findall(r'this->Input\("(\w+)"\)', opdef) == ["x1", "x2", "scale", "offset", "bias", "pertoken_scale"]
    assert re.findall(r'this->Attr\("(\w+)"\)', opdef) == ["dtype", "transpose_x1", "transpose_x2", "group_size"]
    for line in ('this->Attr("dtype").AttrType(REQUIRED).Int();',
                 'this->Attr("transpose_x1").AttrType(OPTIONAL).Bool(false);',
                 'this->Attr("transpose_x2").AttrType(OPTIONAL).Bool(false);',
                 'this->Attr("group_size").AttrType(OPTIONAL).Int(0);'):
        assert line in opdef
    header = files[f"op_host/op_api/{OpModel(spec).api_snake}.h"]
    assert 'attribute "dtype" is not a parameter: the kernel receives the ge::DataType of out.' in header
    flat = " ".join(" ".join(ln.removeprefix(" * ").split()) for ln in header.splitlines())   # @param lines unwrapped
    for want in ('@param [in] offset: optional input "offset", dtype float32, shape [N] or [1]; must be null: not '
                 'implemented by this kernel (offset of an int8 output).',
                 '@param [in] transposeX1: attribute "transpose_x1" (bool, default false, one of false, true).',
                 '@param [in] transposeX2: attribute "transpose_x2" (bool, default false, one of false, true).'):
        assert want in flat, flat   # the caller reads what a call must pass, not only CANN's default


def test_the_interpreter_refuses_what_is_not_implemented():
    """offset given, group_size 3: one ValidationError naming the parameter and the rule; x2 stored [N, K] under
    CANN's default transpose_x2 false (which wants [K, N]) is refused naming x2's shape."""
    from opgen.interp.run import interpret

    spec = load_spec(QBMM)
    ok = {"transpose_x2": True}
    cases = [
        (_x(offset=np.ones(7, np.float32)), ok, "offset", "must be null: not implemented by this kernel"),
        (_x(), {}, "x2", "[K, N]"),
        (_x(), {**ok, "group_size": 3}, "group_size", "must be 0: other values are not implemented"),
    ]
    for inputs, attrs, param, rule in cases:
        with pytest.raises(ValidationError) as ei:
            interpret(spec, inputs, attrs)
        assert ei.value.param == param and rule in str(ei.value), (param, str(ei.value))


def test_the_dtype_attribute_binds_the_output_dtype():
    """dtype 1 makes a float16 y, 27 a bfloat16 one; no dtype takes the first row's (bfloat16); a value no row binds
    Y to, or one contradicting an explicit Y, is refused naming dtype. The values are float64 (x1 @ x2ᵀ) * scale
    rounded once."""
    from opgen.interp.run import interpret

    spec = load_spec(QBMM)
    x = _x()
    ref = (x["x1"].astype(np.float64) @ x["x2"].astype(np.float64).T) * x["scale"].astype(np.float64)
    for code, name, ulp in ((1, "float16", 2.0 ** -11), (27, "bfloat16", 2.0 ** -8), (None, "bfloat16", 2.0 ** -8)):
        attrs = {"transpose_x2": True} if code is None else {"transpose_x2": True, "dtype": code}
        y = interpret(spec, x, attrs)["y"]
        assert str(y.dtype) in (name, "float32")   # NumPy holds bfloat16 as ml_dtypes' type
        assert np.all(np.abs(y.astype(np.float64) - ref) <= ulp * np.abs(ref) + 1e-30)
    bound = spec.bind(x, {"transpose_x2": True, "dtype": 1})
    assert bound.dtypes["Y"].long_name == "float16" and bound.attrs["dtype"] == 1
    assert spec.bind(x, {"transpose_x2": True}, {"Y": "float16"}).attrs["dtype"] == 1
    with pytest.raises(ValidationError, match=r"dtype: must be one of 27 \(bfloat16\), 1 \(float16\) .* got 0"):
        spec.bind(x, {"transpose_x2": True, "dtype": 0})
    with pytest.raises(ValidationError, match=r"dtype: is 1 \(float16\), but Y is bfloat16"):
        spec.bind(x, {"transpose_x2": True, "dtype": 1}, {"Y": "bfloat16"})


def test_the_cli_refuses_with_one_line(tmp_path):
    """`opgen interpret` of a call passing offset: exit 2, one line naming offset and the rule, no traceback."""
    x = _x(offset=np.ones(7, np.float32))
    np.savez(tmp_path / "in.npz", **{k: v for k, v in x.items() if v is not None})
    r = subprocess.run([sys.executable, "-m", "opgen.cli", "interpret", QBMM, "--inputs", str(tmp_path / "in.npz"),
                        "--out", str(tmp_path / "out.npz"), "--attr", "transpose_x2=true"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "offset: must be null: not implemented by this kernel" in lines[0], r.stderr


def test_graph_mode_takes_the_default_and_refuses_an_absent_only_input():
    """`opgen graph` picks a specialisation without validating defaults, and `--present offset` names the rule."""
    from opgen.passes.select import select_key

    spec = load_spec(QBMM)
    assert select_key(spec, {}, ())
    with pytest.raises(ValidationError, match="offset: must be null"):
        select_key(spec, {}, ("offset",))
    assert all(not p for k in spec.keys() for i, p in zip([i for i in spec.inputs if i.optional], k.present)
               if i.absent_only)


HEAD = '''from opgen.dsl import OpSpec, A2, api, f16, f32
spec = OpSpec("Acc", aclnn="aclnnAcc", socs=(A2,))
H = spec.dim("H")
(T,) = spec.dtype_vars("T")
spec.input("x", f32, [H])
'''


@pytest.mark.parametrize("decl,want", [
    ('spec.input("o", f32, [H], accepts="absent")', 'accepts="absent" is for an optional input'),
    ('spec.input("o", f32, [H], optional=True, accepts="null")', "accepts='null' is not supported"),
    ('spec.input("o", f32, [H], optional=True, unsupported="x")', "is the reason of accepts="),
    ('spec.attr("a", bool, False, accepts=())', "is not a non-empty tuple"),
    ('spec.attr("a", bool, False, accepts=(1,))', "accepted value 1 is not a bool"),
    ('spec.attr("a", int, 0, choices=(0, 1), accepts=(2,))', "accepted value 2 is not one of its choices"),
    ('spec.attr("a", int, 0, static=True, choices=(0, 1), accepts=(0,))', "accepts= is for a runtime"),
    ('spec.attr("a", int, dtype_of="T")', "is not a declared dtype variable"),
    ('spec.attr("a", int, 1, dtype_of=T)', "dtype_of= is an int attribute"),
])
def test_declaration_errors(tmp_path, decl, want):
    """A misused accepts= / unsupported= / dtype_of= is a SpecError located at its line, naming the rule."""
    f = tmp_path / "acc.py"
    f.write_text(HEAD + decl + '\nspec.output("y", T, [H])\nspec.dtypes((T,), [(f16,)])\n\n@spec.body\n'
                 'def _(b, x, **kw):\n    return {"y": x.cast(T, "rint")}\n')
    with pytest.raises(OpgenError) as ei:
        load_spec(str(f))
    assert want in str(ei.value) and "acc.py:6" in str(ei.value), str(ei.value)


@pytest.mark.parametrize("decl,out,want", [
    ('(U,) = spec.dtype_vars("U")\nspec.attr("a", int, dtype_of=U)', 'T, [H])', "dtype_of=U is not a column of "
     "the dtype table"),
    ('spec.input("w", T, [H], optional=True)\nspec.attr("a", int, dtype_of=T)', 'f32, [H])',
     "dtype_of=T, but no required input or output has dtype T"),
])
def test_dtype_attribute_errors_at_its_line(tmp_path, decl, out, want):
    """A dtype attribute whose variable is no column of the table, or types no required tensor (the aclnn layer
    would have no tensor to read the ge::DataType from), is a SpecError at the attribute's line."""
    f = tmp_path / "dt.py"
    f.write_text(HEAD + decl + '\nspec.output("y", ' + out + '\nspec.dtypes((T,), [(f16,)])\n\n@spec.body\n'
                 'def _(b, x, **kw):\n    return {"y": x}\n')
    with pytest.raises(OpgenError) as ei:
        load_spec(str(f))
    assert want in str(ei.value) and "dt.py:7" in str(ei.value), str(ei.value)


def test_signature_errors_of_dtype_and_accepted_attributes(tmp_path):
    """A dtype attribute is not a public parameter (CANN derives it from the tensor); api.fixed of an accepts=
    attribute must fix it at an accepted value."""
    tail = '\n@spec.body\ndef _(b, x, **kw):\n    return {"y": x.cast(T, "rint")}\n'
    decl = ('spec.attr("dt", int, dtype_of=T)\nspec.attr("g", int, 0, accepts=(0,))\nspec.output("y", T, [H])\n'
            'spec.dtypes((T,), [(f16,)])\n')
    bad = {'spec.aclnn_signature(api.param("x"), api.param("dt"), api.fixed("g", 0), api.param("y"))':
           "attribute 'dt' holds the dtype of T",
           'spec.aclnn_signature(api.param("x"), api.fixed("g", 1), api.param("y"))':
           "api.fixed: 1 is not a value the kernel accepts for g"}
    for k, (line, want) in enumerate(bad.items()):
        f = tmp_path / f"s{k}.py"
        f.write_text(HEAD + decl + line + "\n" + tail)
        with pytest.raises(OpgenError) as ei:
            load_spec(str(f))
        assert want in str(ei.value), str(ei.value)
    f = tmp_path / "ok.py"
    f.write_text(HEAD + decl + 'spec.aclnn_signature(api.param("self", "x"), api.fixed("g", 0), api.param("out", '
                 '"y"))\n' + tail)
    from test_aclnn_api import _header_params
    assert _header_params(load_spec(str(f))) == [("self", T_IN), ("out", "aclTensor*")]


# ---- through the emitted aclnn layer (aclnnQuantMatmulV4 compiled against the emulation) --------------------------

@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_the_aclnn_layer_refuses_with_canns_code(examples_gen):
    """A valid call succeeds and the kernel receives dtype = the ge::DataType of out (27 for bf16, 1 for fp16); both
    transposeX2 values are taken (x2 [N, K] with true, [K, N] with CANN's default false: a [N, K] x2 under false is
    a shape error), so are both transposeX1 values (x1 [M, K] or [K, M]); each violated rule is 161002 ACLNN_ERR_PARAM_INVALID with the
    interpreter's message under the public names; a null x1 is still 161001 first."""
    from opgen.check.aclnn import run_runner
    from test_aclnn_api import _at, _call, _with_tokens

    m, runner, base, _ = _call(QBMM, {"M": 5, "K": 40, "N": 7}, attrs={"transpose_x2": True}, gen_dir=examples_gen)
    k = {n: _at(m, n) for n in ("x1", "x2", "offset", "pertokenScaleOptional", "transposeX1", "transposeX2", "out")}
    assert base[k["transposeX2"]] == "1" and base[k["offset"]] == "null" and "7,40" in base[k["x2"]]

    def with_(**tok):
        return _with_tokens(base, k, **tok)

    cases = [
        (with_(), 0, "", "27"),
        (with_(out="float16:5,7"), 0, "", "1"),
        (with_(offset="float32:7"), 161002, "offset: must be null: not implemented by this kernel "
                                            "(offset of an int8 output)", None),
        (with_(pertokenScaleOptional="float32:5"), 0, "", "27"),   # implemented: a per-row scale [M]
        (with_(pertokenScaleOptional="float32:7"), 161002, "pertokenScaleOptional: shape [7]", None),
        (with_(transposeX1="1", x1=base[k["x1"]].replace("5,40", "40,5")), 0, "", "27"),   # x1 stored [K, M]
        (with_(transposeX1="1"), 161002, "x", None),   # x1 [5, 40] read as [K, M]: K 5 against x2's 40
        (with_(transposeX2="0"), 161002, "x2: shape [7, 40] (the shape for transposeX2=false)", None),
        (with_(transposeX2="0", x2=base[k["x2"]].replace("7,40", "40,7")), 0, "", "27"),   # CANN's default: [K, N]
        (with_(out="float32:5,7"), 161002, "Tensor out not implemented for DT_FLOAT", None),   # opbase's text
        (with_(x1="null", offset="float32:7"), 161001, "", None),
    ]
    got = run_runner(runner, [" ".join(c[0]) for c in cases], launches=True)
    for (tok, code, msg, dtype), (rc, text, launches, launched) in zip(cases, got):
        assert rc == code and text.startswith(msg), (code, msg, rc, text)
        if dtype is not None:   # OpDef order: dtype, transpose_x1, transpose_x2, group_size
            assert launches == 1 and launched == [dtype, tok[k["transposeX1"]], tok[k["transposeX2"]], "0"], launched
