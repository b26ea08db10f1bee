"""The emitted aclnn APIs are CANN's public ones, parameter for parameter (README "The aclnn API").

The tables below are transcribed from the operator notes (docs/reference/ada_layer_norm.md §2.2-2.3,
docs/reference/norm_rope_concat.md §3.1-3.2, docs/reference/nsa_selected_attention.md §1.1-1.2) and docs/reference/ops_package.md §4 (const output tensors of
the ops-transformer APIs): an independent source, not opgen's output. Every emitted header, the call example and the
case runner must follow them; then the extra parameters (normalizedShape, shift), the casts (rstd/mean in gradOut's
dtype) and optional outputs behave as CANN's do, through the emitted aclnn layer compiled against the emulation.
"""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from opgen.codegen.model import OpModel
from opgen.registry import load_spec

pytestmark = pytest.mark.slow   # builds C++ or runs many processes (the fast tier: -m "not slow")

T_IN, T_OUT, T_COUT, ARR = "const aclTensor*", "aclTensor*", "const aclTensor*", "const aclIntArray*"


def _seq(ctype: str, names: str) -> list[tuple[str, str]]:
    return [(n, ctype) for n in names.split()]


REFERENCE = {
    "AdaLayerNormGrad": (   # docs/reference/ada_layer_norm.md §2.3
        _seq(T_IN, "gradOut input") + _seq(ARR, "normalizedShape") +
        _seq(T_IN, "rstd mean scale shift weightOptional biasOptional") +
        _seq(T_OUT, "gradInputOut gradScaleOut gradShiftOut gradWeightOut gradBiasOut")),
    "AdaLayerNormV2": (     # docs/reference/ada_layer_norm.md §2.2 (C types as §2.1's)
        _seq(T_IN, "x scale shift weightOptional biasOptional") + [("epsilon", "double")] +
        _seq(T_OUT, "out meanOutOptional rstdOutOptional")),
    "NormRopeConcat": (     # docs/reference/norm_rope_concat.md §3.1
        _seq(T_IN, "query key value encoderQuery encoderKey encoderValue normQueryWeight normQueryBias normKeyWeight "
                   "normKeyBias normAddedQueryWeight normAddedQueryBias normAddedKeyWeight normAddedKeyBias ropeSin "
                   "ropeCos") +
        _seq("int64_t", "normType normAddedType ropeType concatOrder") + [("eps", "double"), ("isTraining", "bool")] +
        _seq(T_COUT, "queryOutput keyOutput valueOutput normQueryMean normQueryRstd normKeyMean normKeyRstd "
                     "normAddedQueryMean normAddedQueryRstd normAddedKeyMean normAddedKeyRstd")),
    "NormRopeConcatGrad": (  # docs/reference/norm_rope_concat.md §3.2
        _seq(T_IN, "gradQueryOutput gradKeyOutput gradValueOutput query key encoderQuery encoderKey normQueryWeight "
                   "normQueryMean normQueryRstd normKeyWeight normKeyMean normKeyRstd normAddedQueryWeight "
                   "normAddedQueryMean normAddedQueryRstd normAddedKeyWeight normAddedKeyMean normAddedKeyRstd "
                   "ropeSin ropeCos") +
        _seq("int64_t", "normType normAddedType ropeType concatOrder") +
        _seq(T_COUT, "gradQuery gradKey gradValue gradEncoderQuery gradEncoderKey gradEncoderValue "
                     "gradNormQueryWeight gradNormQueryBias gradNormKeyWeight gradNormKeyBias gradNormAddedQueryWeight "
                     "gradNormAddedQueryBias gradNormAddedKeyWeight gradNormAddedKeyBias")),
    "NsaSelectedAttention": (  # docs/reference/nsa_selected_attention.md §1.1
        _seq(T_IN, "query key value topkIndices attenMaskOptional") +
        _seq(ARR, "actualSeqQLenOptional actualSeqKvLenOptional") + [("scaleValue", "double"), ("headNum", "int64_t"),
                                                                      ("inputLayout", "char*")] +
        _seq("int64_t", "sparseMode selectedBlockSize selectedBlockCount") +
        _seq(T_COUT, "softmaxMaxOut softmaxSumOut attentionOut")),
    "NsaSelectedAttentionGrad": (  # docs/reference/nsa_selected_attention.md §1.2
        _seq(T_IN, "query key value attentionOut attentionOutGrad softmaxMax softmaxSum topkIndices") +
        _seq(ARR, "actualSeqQLenOptional actualSeqKvLenOptional") + _seq(T_IN, "attenMaskOptional") +
        [("scaleValue", "double")] + _seq("int64_t", "selectedBlockSize selectedBlockCount headNum") +
        [("inputLayout", "char*"), ("sparseMode", "int64_t")] + _seq(T_COUT, "dqOut dkOut dvOut")),
}


def _header_params(spec) -> list[tuple[str, str]]:
    """(name, C type) of the emitted header's GetWorkspaceSize parameters, workspaceSize/executor excluded."""
    m = OpModel(spec)
    from opgen.codegen import generate_cached

    header = generate_cached(spec)[1][f"op_host/op_api/{m.api_snake}.h"]
    sig = re.search(rf"aclnnStatus {m.api}GetWorkspaceSize\((.*?)\);", header, re.S).group(1)
    out = []
    for p in sig.split(","):
        p = " ".join(p.split())
        mt = re.fullmatch(r"(.*?)\s*(\w+)", p)
        out.append((mt.group(2), mt.group(1).replace(" *", "*").strip()))
    assert out[-2:] == [("workspaceSize", "uint64_t*"), ("executor", "aclOpExecutor**")]
    return out[:-2]


@pytest.mark.parametrize("op", sorted(REFERENCE))
def test_header_is_canns_signature(op):
    """Order, C type and name of every parameter equal the reference table."""
    assert _header_params(load_spec(op)) == REFERENCE[op]


@pytest.mark.parametrize("op", sorted(REFERENCE))
def test_example_and_runner_follow_the_signature(op):
    """The call example passes its tensors in the header's order (each argument is the variable named after the
    parameter, or nullptr), and the case runner reads one token per public parameter in that order."""
    from opgen.check.aclnn import harness_source
    from opgen.codegen import generate_cached

    spec = load_spec(op)
    m = OpModel(spec)
    files = generate_cached(spec)[1]
    example = files[f"examples/test_{m.api_snake}.cpp"]
    call = re.search(rf"{m.api}GetWorkspaceSize\((.*?)\);", example, re.S).group(1)
    args = [a.strip() for a in call.split(",")][:-2]
    names = [n for n, _ in REFERENCE[op]]
    assert len(args) == len(names)
    for a, n in zip(args, names):
        assert a in (n, "nullptr"), (op, a, n)
    reads = re.findall(r"^\s+(.+?) a\d+ = ", harness_source(m), re.M)
    assert [r.replace(" *", "*") for r in reads] == [t for _, t in REFERENCE[op]]


# ---- behaviour of the extra parameters, through the emitted aclnn layer ---------------------------------------

pytestmark_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")


def _call(op, dims, attrs=None, dtypes=None, seed=0, gen_dir=None):
    """(OpModel, runner, base call tokens, inputs) of a valid call of `op` (its package in gen_dir, default
    generated/)."""
    from opgen.check.aclnn import call_attrs, call_outputs, device_dtypes, encode_call
    from opgen.check.run import aclnn_runner
    from opgen.dsl.examples import random_inputs
    from opgen.ir.dtypes import DType

    spec = load_spec(op)
    inputs = random_inputs(spec, dims, attrs or {}, dtypes or {}, seed=seed)
    inputs = {k: v for k, v in inputs.items() if v is not None}
    dev = device_dtypes(spec, inputs, dict(dtypes or {}))
    names = {k: (v.long_name if isinstance(v, DType) else v) for k, v in dev.items()}
    m = OpModel(spec)
    line = encode_call(m, inputs, call_attrs(spec, inputs, dict(attrs or {})),
                       call_outputs(spec, inputs, dict(attrs or {}), dict(dtypes or {}), dev), names)
    _, runner = aclnn_runner(spec, gen_dir=gen_dir)
    return m, runner, line.split(" "), inputs


def _run(runner, lines):
    from opgen.check.aclnn import run_runner

    return run_runner(runner, [" ".join(t) for t in lines])


def _at(m, name):
    return next(k for k, a in enumerate(m.api_params) if a.cpp == name)


def _with_tokens(base: list, at: dict, **tok) -> list:
    """A copy of the call tokens `base` with the token of each public parameter named in `tok` replaced (at: name ->
    its index in the call, _at)."""
    t = list(base)
    for n, v in tok.items():
        t[at[n]] = v
    return t


@pytestmark_gxx
def test_ada_grad_extra_parameters_and_casts():
    """normalizedShape must be [H] (docs/reference/ada_layer_norm.md §2.3 steps 1, 19, 21); shift is required and checked
    like scale (steps 1, 7, 25); rstd/mean take gradOut's dtype (steps 4-5) and are cast to the kernel's fp32."""
    m, runner, base, _ = _call("AdaLayerNormGrad", {"Bd": (2,), "S": 3, "H": 16}, dtypes={"T": "bfloat16",
                                                                                          "U": "float32"})
    ns, sh, rs, me = (_at(m, n) for n in ("normalizedShape", "shift", "rstd", "mean"))
    assert base[ns] == "a:16" and base[sh] == base[_at(m, "scale")] and base[rs].startswith("bfloat16:")

    def with_(**tok):
        t = list(base)
        for k, v in tok.items():
            t[{"ns": ns, "sh": sh, "rs": rs, "me": me}[k]] = v
        return t

    cases = [
        (with_(), 0, ""),
        (with_(ns="null"), 161001,
         "Expected a value of type List[int] for argument normalizedShape but instead found type null."),
        (with_(ns="a:17"), 161002, "normalizedShape: values [17] must be [16] ([H])"),
        (with_(ns="a:2,16"), 161002, "normalizedShape: must hold 1 value [H], got 2"),
        (with_(sh="null"), 161001, "Expected a proper Tensor but got null for argument shift."),
        (with_(sh="float16:2,16"), 161002, "shift: dtype float16 conflicts with T=bfloat16 (from gradOut)"),
        (with_(sh="bfloat16:2,1,1,16"), 161002, "shift: shape [2, 1, 1, 16] matches none of"),
        (with_(sh="bfloat16:3,16"), 161002, "shift: shape [3, 16] matches none of"),
        (with_(sh="bfloat16:2,1,16"), 0, ""),   # its own form, independent of scale's (§1.5)
        (with_(rs="float32:2,3,1"), 161002, "rstd: dtype float32 conflicts with T=bfloat16 (from gradOut)"),
        (with_(me="float16:2,3,1"), 161002, "mean: dtype float16 conflicts with T=bfloat16 (from gradOut)"),
    ]
    got = _run(runner, [c[0] for c in cases])
    for (_, code, msg), (rc, text) in zip(cases, got):
        assert rc == code and text.startswith(msg), (code, msg, rc, text)


@pytestmark_gxx
def test_v2_statistics_outputs_may_be_null():
    """meanOutOptional / rstdOutOptional may be null (docs/reference/ada_layer_norm.md §2.2); when given they are
    checked ([Bd..., S, 1], x's dtype)."""
    m, runner, base, _ = _call("AdaLayerNormV2", {"Bd": (2,), "S": 3, "H": 16}, dtypes={"T": "float16", "U": "float32"})
    mo, ro = _at(m, "meanOutOptional"), _at(m, "rstdOutOptional")
    both_null = list(base)
    both_null[mo] = both_null[ro] = "null"
    bad = list(base)
    bad[mo] = "float16:2,3,2"
    bad_dtype = list(base)
    bad_dtype[ro] = "float32:2,3,1"
    (r0, _), (r1, m1), (r2, m2), (r3, m3) = _run(runner, [base, both_null, bad, bad_dtype])
    assert (r0, r1) == (0, 0), m1
    assert r2 == 161002 and m2.startswith("meanOutOptional: shape [2, 3, 2] must be [2, 3, 1]"), m2
    assert r3 == 161002 and m3.startswith("rstdOutOptional: dtype float32"), m3


@pytestmark_gxx
def test_nsa_grad_block_size_comes_before_count():
    """aclnnNsaSelectedAttentionGrad takes selectedBlockSize, then selectedBlockCount (docs/reference/ascendc.md §1.2): a call in
    CANN's order is accepted; the swapped values (the OpDef order) are rejected, not silently used."""
    dims = {"T1": 4, "T2": 64, "N1": 2, "N2": 1, "D": 16, "Dv": 16, "CNT": 2, "BS": 16, "Bn": 2}
    m, runner, base, _ = _call("NsaSelectedAttentionGrad", dims,
                               attrs={"selectedBlockSize": 16, "selectedBlockCount": 2, "headNum": 2})
    size, count = _at(m, "selectedBlockSize"), _at(m, "selectedBlockCount")
    assert (base[size], base[count]) == ("16", "2")
    swapped = list(base)
    swapped[size], swapped[count] = base[count], base[size]
    (r0, m0), (r1, m1) = _run(runner, [base, swapped])
    assert r0 == 0, m0
    assert r1 == 161002, m1


@pytestmark_gxx
def test_nsa_forward_layout_comes_before_sparse_mode():
    """aclnnNsaSelectedAttention takes inputLayout (char*) before sparseMode (docs/reference/ascendc.md §1.1)."""
    dims = {"T1": 4, "T2": 64, "N1": 2, "N2": 1, "D": 16, "Dv": 16, "CNT": 2, "BS": 16, "Bn": 2}
    m, runner, base, _ = _call("NsaSelectedAttention", dims, attrs={"input_layout": "TND", "head_num": 2,
                                                                    "selected_block_size": 16,
                                                                    "selected_block_count": 2})
    lay, mode = _at(m, "inputLayout"), _at(m, "sparseMode")
    assert lay + 1 == mode and base[lay] == "TND"
    bad = list(base)
    bad[lay] = "BSND"
    (r0, m0), (r1, m1) = _run(runner, [base, bad])
    assert r0 == 0, m0
    assert r1 == 161002 and m1.startswith("inputLayout: must be one of 'TND'"), m1


def test_signature_declaration_errors(tmp_path):
    """A signature that misses, repeats or mistypes a parameter is a located SpecError naming it."""
    from opgen.errors import OpgenError

    head = '''from opgen.dsl import OpSpec, A2, api, f32
spec = OpSpec("Sig", aclnn="aclnnSig", socs=(A2,))
H = spec.dim("H")
spec.input("x", f32, [H])
spec.attr("alpha", float, 1.0)
spec.output("y", f32, [H])
'''
    tail = '''
@spec.body
def _(b, x, alpha):
    return {"y": x * alpha}
'''
    bad = {
        'spec.aclnn_signature(api.param("self", "x"), api.param("alpha"))': "does not pass y",
        'spec.aclnn_signature(api.param("self", "x"), api.param("alpha"), api.param("out", "x"), api.param("y"))':
            "'x' is already passed as 'self'",
        'spec.aclnn_signature(api.param("self", "z"), api.param("alpha"), api.param("y"))': "'z' is not a declared",
        'spec.aclnn_signature(api.param("p", "x"), api.param("alpha"), api.param("y"))': "'p' is reserved",
        'spec.aclnn_signature(api.param("class", "x"), api.param("alpha"), api.param("y"))': "C++ keyword",
        'spec.aclnn_signature(api.param("x"), api.param("alpha"), api.param("y"), api.int_array("n", [7]))':
            "7 is not a declared dim",
        'spec.aclnn_signature(api.param("x"), api.param("alpha", ctype="char*"), api.param("y"))': "ctype='char*'",
        'spec.aclnn_signature(api.param("x", optional=True), api.param("alpha"), api.param("y"))': "optional=",
        'spec.aclnn_signature(api.param("x"), api.param("alpha"), api.param("y"), api.unused("s", like="q"))':
            "like='q' is not a declared device input",
        'spec.aclnn_signature("x", api.param("alpha"), api.param("y"))': "is not an aclnn parameter",
        'spec.aclnn_signature(api.scalar("x"), api.param("alpha"), api.param("y"))':
            "'x' is not a float, int or bool attribute",
        'spec.aclnn_signature(api.param("x"), api.fixed("alhpa", 1.0), api.param("y"))':
            "api.fixed: 'alhpa' is not a declared attribute",
        'spec.aclnn_signature(api.param("x"), api.param("alpha"), api.fixed("alpha", 1.0), api.param("y"))':
            "attribute 'alpha' is already passed as 'alpha'",
        'spec.aclnn_signature(api.param("x"), api.fixed("alpha", "one"), api.param("y"))':
            "'one' is not a float value for attribute alpha",
        'spec.aclnn_signature(api.param("x"), api.fixed("x", 1.0), api.param("y"))': "'x' is not a declared attribute",
    }
    for k, (line, want) in enumerate(bad.items()):
        f = tmp_path / f"sig{k}.py"
        f.write_text(head + line + "\n" + tail)
        with pytest.raises(OpgenError) as ei:
            load_spec(str(f))
        assert want in str(ei.value), (line, str(ei.value))
        assert f"sig{k}.py" in str(ei.value)



@pytest.mark.parametrize("decl, words", [
    ('spec.output("s", f32, [H], optional=True)',
     "'s' is an optional output (optional=True), which the API already takes as a pointer the caller may pass as "
     "null; drop api.param's optional="),
    ('spec.output("s", f32, [H], optional=True, param_type="REQUIRED")',
     "'s' is an optional output (optional=True) that param_type=\"REQUIRED\" makes the API require (161001 on "
     "null); drop api.param's optional= (for a nullable API parameter drop the output's "
     "param_type=\"REQUIRED\" too)"),
    ('spec.attr("k", int, 0)', "optional= is for required OpDef outputs the caller may leave null; 'k' is an "
                               "attribute; drop optional="),
])
def test_optional_on_a_parameter_says_what_the_parameter_is(tmp_path, decl, words):
    """api.param(..., optional=True) on an output the spec already declares optional says so, and what the API does
    with it (new-user finding, GeluQuant's outScaleOptional: the error said "'out_scale' is not one" of the
    required outputs, for an output declared param_type="REQUIRED")."""
    from opgen.errors import OpgenError

    name = "s" if "output" in decl else "k"
    f = tmp_path / "sig_opt.py"
    f.write_text(f'''from opgen.dsl import OpSpec, A2, api, f32
spec = OpSpec("Sig", aclnn="aclnnSig", socs=(A2,))
H = spec.dim("H")
spec.input("x", f32, [H])
spec.output("y", f32, [H])
{decl}
spec.aclnn_signature(api.param("x"), api.param("y"), api.param("{name}Opt", "{name}", optional=True))


@spec.body
def _(b, x, **kw):
    return {{"y": x}}
''')
    with pytest.raises(OpgenError) as ei:
        load_spec(str(f))
    assert f"aclnn parameter {name}Opt: " + words in str(ei.value), str(ei.value)

def test_without_a_signature_the_opdef_order_stays(tmp_path):
    """A spec without aclnn_signature keeps the OpDef order with CANN-style derived names; a derived name the
    implementation reserves gets a suffix instead of shadowing it."""
    f = tmp_path / "plain.py"
    f.write_text('''from opgen.dsl import OpSpec, A2, f32
spec = OpSpec("Plain", aclnn="aclnnPlain", socs=(A2,))
H = spec.dim("H")
spec.input("p", f32, [H])
spec.input("bias", f32, [H], optional=True)
spec.attr("alpha", float, 1.0)
spec.output("y", f32, [H])

@spec.body
def _(b, p, bias, alpha):
    return {"y": p * alpha if bias is None else p * alpha + bias}
''')
    spec = load_spec(str(f))
    assert _header_params(spec) == [("pValue", T_IN), ("biasOptional", T_IN), ("alpha", "double"), ("yOut", T_OUT)]
    assert np.array_equal([a.cpp for a in OpModel(spec).api_params], ["pValue", "biasOptional", "alpha", "yOut"])


def _golden_module(op, tmp_path):
    import importlib.util

    from opgen.codegen import generate_cached

    files = generate_cached(load_spec(op))[1]
    src = next(t for p, t in files.items() if p.endswith("golden.py"))
    path = tmp_path / f"golden_{op}.py"
    path.write_text(src)
    sp = importlib.util.spec_from_file_location(f"golden_{op}", path)
    mod = importlib.util.module_from_spec(sp)
    sp.loader.exec_module(mod)
    return mod


def test_golden_aclnn_entry_takes_canns_order(tmp_path):
    """The golden's aclnn entry (`__golden__["aclnn"]`) takes aclnnAdaLayerNormBackward's parameters in the
    header's order — normalizedShape and shift accepted, rstd/mean in gradOut's dtype — and matches the float64
    oracle of the backward at the given statistics (docs/reference/ada_layer_norm.md §1.2, §5.6) within fp32 rounding."""
    from oracles import ada_layer_norm_grad

    mod = _golden_module("AdaLayerNormGrad", tmp_path)
    fn = getattr(mod, mod.__golden__["aclnn"]["aclnnAdaLayerNormBackward"])
    rng = np.random.default_rng(3)
    B, S, H = 2, 5, 24
    dy, x = rng.standard_normal((B, S, H)).astype(np.float32), rng.standard_normal((B, S, H)).astype(np.float32)
    scale, shift = rng.standard_normal((B, 1, H)).astype(np.float32), rng.standard_normal((B, H)).astype(np.float32)
    gamma, beta = rng.standard_normal(H).astype(np.float32), rng.standard_normal(H).astype(np.float32)
    mean = x.mean(-1, keepdims=True)
    rstd = (1 / np.sqrt(x.var(-1, keepdims=True) + 1e-5)).astype(np.float32)
    got = fn(dy, x, [H], rstd, mean, scale, shift, gamma, beta)
    want = ada_layer_norm_grad(dy, x, rstd, mean, scale, gamma, beta)
    for g, name in zip(got, ("pd_x", "pd_scale", "pd_shift", "pd_gamma", "pd_beta")):
        w = want[name]
        assert np.shape(g) == np.shape(w), name
        assert np.max(np.abs(np.asarray(g, np.float64) - w)) <= 1e-4 * (1 + np.max(np.abs(w))), name
    # the header's parameter order (NsaSelectedAttentionGrad: selectedBlockSize before selectedBlockCount)
    nsa = _golden_module("NsaSelectedAttentionGrad", tmp_path)
    import inspect

    params = list(inspect.signature(getattr(nsa, nsa.__golden__["aclnn"]["aclnnNsaSelectedAttentionGrad"])).parameters)
    assert params[:-1] == [n for n, _ in REFERENCE["NsaSelectedAttentionGrad"]][:-3]   # outputs excluded


@pytestmark_gxx
def test_signature_on_an_example_spec(examples_gen):
    """The mechanism on a spec written for it (examples/specs/layer_norm_grad.py): mean before rstd although the
    OpDef takes rstd first, normalizedShape checked against H, an optional unused bias validated like gamma."""
    from pathlib import Path

    path = str(Path(__file__).resolve().parent.parent / "examples" / "specs" / "layer_norm_grad.py")
    spec = load_spec(path)
    assert [i.name for i in spec.inputs][2:4] == ["rstd", "mean"]
    assert _header_params(spec) == (_seq(T_IN, "gradOut input") + _seq(ARR, "normalizedShape") +
                                    _seq(T_IN, "mean rstd weight biasOptional") +
                                    _seq(T_OUT, "gradInputOut gradWeightOut gradBiasOut"))
    m, runner, base, _ = _call(path, {"Bd": (3,), "H": 32}, dtypes={"T": "float16", "U": "float32"},
                               gen_dir=examples_gen)
    k = {n: _at(m, n) for n in ("normalizedShape", "mean", "rstd", "biasOptional")}
    assert base[k["biasOptional"]] == "float32:32"

    def with_(**tok):
        return _with_tokens(base, k, **tok)

    cases = [
        (with_(), 0, ""),
        (with_(biasOptional="null"), 0, ""),
        (with_(biasOptional="float32:31"), 161002, "biasOptional: shape [31]"),
        (with_(biasOptional="float16:32"), 161002, "biasOptional: dtype float16 conflicts with U=float32"),
        (with_(normalizedShape="a:31"), 161002, "normalizedShape: values [31] must be [32] ([H])"),
        (with_(mean="float32:3,2"), 161002, "mean: shape [3, 2]"),
    ]
    got = _run(runner, [c[0] for c in cases])
    for (_, code, msg), (rc, text) in zip(cases, got):
        assert rc == code and text.startswith(msg), (code, msg, rc, text)


# ---- scalar operands (api.scalar: const aclScalar*) -------------------------------------------------------------

def test_scalar_operands_follow_canns_signature():
    """HardtanhGrad declares CANN's aclnnHardtanhBackward(gradOutput, self, const aclScalar* min, const aclScalar*
    max, out) (ops-nn activation/hardtanh_grad/op_api/aclnn_hardtanh_backward.h); the header, the call example
    (aclCreateScalar / aclDestroyScalar) and the case runner (ReadScalar) follow it."""
    from pathlib import Path

    from opgen.check.aclnn import harness_source
    from opgen.codegen import generate_cached

    spec = load_spec(str(Path(__file__).resolve().parent.parent / "examples" / "specs" / "hardtanh_grad.py"))
    assert _header_params(spec) == (_seq(T_IN, "gradOutput self") + _seq("const aclScalar*", "min max") +
                                    [("out", "aclTensor*")])
    m = OpModel(spec)
    example = generate_cached(spec)[1][f"examples/test_{m.api_snake}.cpp"]
    for name, value in (("min", "-1.0f"), ("max", "1.0f")):
        assert f"float {name}Value = {value};" in example
        assert f"aclScalar* {name} = aclCreateScalar(&{name}Value, aclDataType::ACL_FLOAT);" in example
        assert f"aclDestroyScalar({name});" in example
    assert re.findall(r"^\s+(.+?) a(\d+) = ReadScalar\(in\);", harness_source(m), re.M) == \
        [("const aclScalar*", "2"), ("const aclScalar*", "3")]


@pytestmark_gxx
def test_scalar_operands_through_the_emitted_aclnn_layer(examples_gen):
    """A null scalar is 161001 with opbase's text for a scalar, before any other check; a scalar of any numeric
    dtype is read with the attribute's accessor (ToFloat, as CANN's op_api code reads these) and its value reaches
    the kernel launch as the OpDef attribute (the emulation records OP_ATTR), in the OpDef's order although the
    public names differ."""
    from pathlib import Path

    from opgen.check.aclnn import launched_attr_mismatches, run_runner

    path = str(Path(__file__).resolve().parent.parent / "examples" / "specs" / "hardtanh_grad.py")
    spec = load_spec(path)
    m, runner, base, _ = _call(path, {"Bd": (3, 5)}, attrs={"minVal": -0.5, "maxVal": 0.75}, gen_dir=examples_gen)
    k = {n: _at(m, n) for n in ("min", "max", "self")}
    assert base[k["min"]] == f"float32:{(-0.5).hex()}" and base[k["max"]] == f"float32:{0.75.hex()}"

    def with_(**tok):
        return _with_tokens(base, k, **tok)

    cases = [
        (with_(), 0, "", {"minVal": -0.5, "maxVal": 0.75}),
        (with_(min="float32:-0.3", max="int64:2"), 0, "", {"minVal": -0.3, "maxVal": 2.0}),   # -0.3 inexact in fp32
        (with_(min="float64:-0.3"), 0, "", {"minVal": -0.3, "maxVal": 0.75}),
        (with_(max="bool:1"), 0, "", {"minVal": -0.5, "maxVal": 1.0}),
        (with_(min="null"), 161001,
         "Expected a value of type number for argument min but instead found type null.", None),
        (with_(min="null", self="null"), 161001, "Expected a proper Tensor but got null for argument self.", None),
    ]
    got = run_runner(runner, [" ".join(c[0]) for c in cases], launches=True)
    for (_, code, msg, attrs), (rc, text, launches, launched) in zip(cases, got):
        assert rc == code and text == msg, (code, msg, rc, text)
        if attrs is not None:   # the launch's OpDef attributes, minVal then maxVal, as the fp32 the L0 op takes
            assert launches == 1 and [float.fromhex(t) for t in launched] == \
                [float(np.float32(attrs["minVal"])), float(np.float32(attrs["maxVal"]))], launched
            assert launched_attr_mismatches(spec, attrs, launched) == []
            assert launched_attr_mismatches(spec, {"minVal": attrs["maxVal"], "maxVal": attrs["minVal"]}, launched)


# ---- attributes the public API leaves out (api.fixed) ------------------------------------------------------------

def test_fixed_attributes_are_not_public(tmp_path):
    """HardSigmoid declares CANN's aclnnHardsigmoid(self, out) (ops-nn activation/hard_sigmoid/op_api/
    aclnn_hardsigmoid.h) while its OpDef keeps alpha (1/6) and beta (0.5): the header, call example and case runner
    take two parameters, the header says what the kernel receives, the golden's aclnn entry passes the fixed values,
    and check refuses another value for them before anything is built."""
    from pathlib import Path

    from opgen.check.aclnn import harness_source
    from opgen.check.run import run_check
    from opgen.codegen import generate_cached
    from opgen.errors import ValidationError

    path = str(Path(__file__).resolve().parent.parent / "examples" / "specs" / "hard_sigmoid.py")
    spec = load_spec(path)
    assert [a.name for a in spec.attrs] == ["alpha", "beta"]
    assert _header_params(spec) == [("self", T_IN), ("out", T_OUT)]
    m = OpModel(spec)
    files = generate_cached(spec)[1]
    header = files[f"op_host/op_api/{m.api_snake}.h"]
    assert 'attribute "alpha" is not a parameter: the kernel always receives 0.16666666666666666.' in header
    assert "ReadDouble" not in harness_source(m) and harness_source(m).count("ReadTensor(in)") == 2
    assert re.search(r"aclnnHardsigmoidGetWorkspaceSize\(self, out, &workspaceSize", files[
        f"examples/test_{m.api_snake}.cpp"])
    ns = {}
    exec(compile(files["tests/assets/golden.py"], "golden.py", "exec"), ns)
    x = np.array([-4.0, -1.5, 0.0, 0.75, 2.9, 3.5], np.float32)
    y = ns[ns["__golden__"]["aclnn"]["aclnnHardsigmoid"]](x)
    y = y[0] if isinstance(y, (list, tuple)) else y
    np.testing.assert_allclose(np.asarray(y, np.float64), np.clip(x.astype(np.float64) / 6 + 0.5, 0, 1), rtol=1e-6)
    with pytest.raises(ValidationError, match="alpha: is fixed at 0.16666666666666666 by aclnnHardsigmoid"):
        run_check(spec, dims={"Bd": (3,)}, attrs={"alpha": "0.3"}, gen_dir=tmp_path, progress=False)


@pytestmark_gxx
def test_a_float_scalar_with_choices_is_compared_in_fp32(tmp_path):
    """A float attribute with choices passed as a scalar: the caller's ACL_FLOAT 0.1f (not 0.1 in double) is the
    choice 0.1, another value is 161002 (CANN's callers create float scalars; the check compares in fp32)."""
    from opgen.check.aclnn import run_runner
    from opgen.codegen import write_ops

    src = '''from opgen.dsl import A2, OpSpec, api, f32
spec = OpSpec("LeakyReluC", aclnn="aclnnLeakyReluC", socs=(A2,))
H = spec.dim("H")
spec.input("self", f32, [H])
spec.attr("negative_slope", float, 0.1, choices=(0.1, 0.2))
spec.output("out", f32, [H])
spec.aclnn_signature(api.param("self"), api.scalar("negativeSlope", "negative_slope"), api.param("out"))


@spec.body
def _(b, self, negative_slope):
    return {"out": b.where(self > 0.0, self, self * negative_slope)}
'''
    path = tmp_path / "lrc.py"
    path.write_text(src)
    write_ops([str(path)], tmp_path / "gen")
    m, runner, base, _ = _call(str(path), {"H": 5}, attrs={"negative_slope": 0.2}, gen_dir=tmp_path / "gen")
    k = _at(m, "negativeSlope")
    assert base[k] == f"float32:{float(np.float32(0.2)).hex()}"
    lines = [base, base[:k] + ["float32:0.1"] + base[k + 1:], base[:k] + ["float64:0.1"] + base[k + 1:],
             base[:k] + ["float32:0.3"] + base[k + 1:]]
    got = [rc for rc, _ in run_runner(runner, [" ".join(t) for t in lines])]
    assert got == [0, 0, 0, 161002], got


def test_example_locals_never_collide(tmp_path):
    """The call example declares xShape / xHost / alphaValue beside each parameter: a spec whose public names
    would make two of them one identifier (a tensor alphaValue beside a scalar alpha; a tensor outShape beside the
    output out) is refused naming both, not emitted as C++ that does not compile."""
    from opgen.codegen import write_ops
    from opgen.errors import OpgenError

    head = '''from opgen.dsl import A2, OpSpec, api, f32
spec = OpSpec("Coll", aclnn="aclnnColl", socs=(A2,))
H = spec.dim("H")
spec.input("a", f32, [H])
spec.attr("alpha", float, 0.5)
spec.output("out", f32, [H])


@spec.body
def _(b, a, alpha):
    return {"out": a * alpha}
'''
    cases = {'spec.aclnn_signature(api.param("alphaValue", "a"), api.scalar("alpha"), api.param("out"))':
             "'alphaValue' for parameter alpha and for parameter alphaValue",
             'spec.aclnn_signature(api.param("outShape", "a"), api.param("alpha"), api.param("out"))':
             "'outShape' for parameter out and for parameter outShape"}
    for k, (line, clash) in enumerate(cases.items()):
        f = tmp_path / f"coll{k}.py"
        f.write_text(head.replace("\n\n@spec.body", "\n" + line + "\n\n\n@spec.body"))
        with pytest.raises(OpgenError, match=clash):
            write_ops([str(f)], tmp_path / "gen")


def test_check_refuses_a_misnamed_input_before_the_aclnn_layer(tmp_path):
    """An array saved under another name (self for LeakyRelu's self is right; `x` is not an input) is refused as
    the interpreter refuses it, naming it and the inputs, instead of reaching the aclnn layer as a null tensor
    (a new user's trial: "Expected a proper Tensor but got null for argument self")."""
    from pathlib import Path

    from opgen.check.run import run_check
    from opgen.errors import ValidationError

    path = str(Path(__file__).resolve().parent.parent / "examples" / "specs" / "leaky_relu.py")
    with pytest.raises(ValidationError, match=r"x: unknown input of LeakyRelu \(inputs: self\)"):
        run_check(path, inputs={"x": np.ones((2, 3), np.float32)}, gen_dir=tmp_path, progress=False)
