"""Empty tensors as CANN's ops-nn aclnn APIs take them (docs/design.md "Empty tensors").

Facts (ops-nn norm/add_rms_norm op_api, norm/rms_norm docs/aclnnRmsNorm.md; ops-transformer
nsa_selected_attention op_api): after the parameter checks, a call whose input is empty returns ACLNN_SUCCESS
with *workspaceSize = 0 and launches nothing; aclnnRmsNorm documents x, y and rstdOut as "supports empty
tensors" and gamma as "does not support empty tensors" (161002) — an empty gamma (H = 0) would leave rstd
([Bd, 1]) with elements. AdaLayerNorm's aclnn rejects a zero B, S or H (docs/reference/ada_layer_norm.md §2.1
row 10, §2.3 row 24), which its spec declares with OpSpec.empty_tensors("reject").
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from opgen.dsl import A2, OpSpec, f32
from opgen.errors import SpecError, ValidationError
from opgen.interp import interpret
from opgen.registry import load_spec

ROOT = Path(__file__).resolve().parent.parent
RMS = str(ROOT / "examples" / "specs" / "rms_norm.py")


def test_empty_rows_give_empty_outputs():
    """Bd holding 0: x, y and rstd are empty; the interpreter returns empty arrays of the declared dtypes."""
    out = interpret(RMS, {"x": np.zeros((0, 3, 8), np.float32), "gamma": np.ones(8, np.float32)})
    assert out["y"].shape == (0, 3, 8) and out["y"].dtype == np.float32
    assert out["rstd"].shape == (0, 3, 1) and out["rstd"].dtype == np.float32
    exact = interpret(RMS, {"x": np.zeros((4, 0, 8), np.float32), "gamma": np.ones(8, np.float32)}, mode="exact")
    assert exact["rstd"].shape == (4, 0, 1) and exact["rstd"].dtype == np.float64


def test_empty_gamma_is_refused_as_aclnn_rms_norm_does():
    """H = 0 leaves rstd [2, 1] with elements: the dim's min applies (aclnnRmsNorm: gamma does not support empty
    tensors, 161002)."""
    with pytest.raises(ValidationError) as e:
        interpret(RMS, {"x": np.zeros((2, 0), np.float32), "gamma": np.ones(0, np.float32)})
    assert str(e.value) == "x: H=0 must be >= 1"


def _spec(policy=None):
    spec = OpSpec("EmptyProbe", aclnn="aclnnEmptyProbe", socs=(A2,))
    rows, cols = spec.dims("R C")
    seg = spec.dim("K", min=0)
    spec.input("x", f32, [rows, cols])
    spec.input("s", f32, [seg])
    spec.output("y", f32, [rows, cols])
    spec.output("t", f32, [rows, 1])
    if policy:
        spec.empty_tensors(policy, "a test of the policy")

    @spec.body
    def _(b, x, s):
        return {"y": x * 2.0, "t": x.sum(-1) + s.sum(-1)}

    return spec.finish()


def test_an_empty_input_with_a_non_empty_output_names_the_input():
    """K has min 0, so no dim rule fires: the empty-call rule names the empty input and the output."""
    spec = _spec()
    with pytest.raises(ValidationError) as e:
        interpret(spec, {"x": np.ones((2, 3), np.float32), "s": np.zeros(0, np.float32)})
    assert str(e.value) == "s: is empty, but output y is not (an empty call needs every output empty)"
    out = interpret(spec, {"x": np.ones((0, 3), np.float32), "s": np.zeros(0, np.float32)})
    assert out["y"].shape == (0, 3) and out["t"].shape == (0, 1)


def test_reject_policy_keeps_the_min():
    spec = _spec("reject")
    with pytest.raises(ValidationError) as e:
        interpret(spec, {"x": np.ones((0, 3), np.float32), "s": np.zeros(1, np.float32)})
    assert str(e.value) == "x: R=0 must be >= 1"


def test_empty_tensors_declaration_errors():
    spec = OpSpec("EmptyDecl", aclnn="aclnnEmptyDecl", socs=(A2,))
    with pytest.raises(SpecError, match="policy 'maybe' is not 'accept' or 'reject'"):
        spec.empty_tensors("maybe", "why")
    with pytest.raises(SpecError, match="reason '' is not a non-empty string"):
        spec.empty_tensors("reject", "")
    spec.empty_tensors("reject", "CANN rejects them")
    with pytest.raises(SpecError, match="called twice"):
        spec.empty_tensors("accept", "again")


def test_ada_layer_norm_specs_reject_empty_tensors():
    """docs/reference/ada_layer_norm.md: CANN's AdaLayerNorm APIs reject a zero B, S or H with 161002."""
    for name in ("AdaLayerNormGrad", "AdaLayerNormV2"):
        assert load_spec(name).empty_policy == "reject"
    for name in ("NsaSelectedAttention", "NsaSelectedAttentionGrad"):   # ops-transformer: IsEmpty -> success
        assert load_spec(name).empty_policy == "accept"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_empty_call_through_the_emitted_aclnn_layer_and_check(examples_gen):
    """The emitted aclnnRmsNorm on the emulated runtime: an empty x returns 0 and launches nothing (workspace 0);
    a valid call launches the kernel once; an empty gamma is 161002 with the interpreter's message. `opgen check`
    on the empty call passes without a launch; its outputs are empty."""
    from opgen.check import run_check
    from opgen.check.aclnn import call_attrs, call_outputs, device_dtypes, encode_call, run_runner
    from opgen.check.run import aclnn_runner

    spec = load_spec(RMS)
    m, runner = aclnn_runner(spec, gen_dir=examples_gen)

    def line(x, gamma):
        inputs = {"x": x, "gamma": gamma}
        dev = device_dtypes(spec, inputs, {})
        names = {k: getattr(v, "long_name", v) for k, v in dev.items()}
        try:
            bound = spec.bind(inputs, {})
        except ValidationError:
            bound = None
        outs = call_outputs(spec, inputs, {}, {}, dev, bound) if bound is not None else {
            "y": ("float32", x.shape), "rstd": ("float32", x.shape[:-1] + (1,))}
        return encode_call(m, inputs, call_attrs(spec, inputs, {}), outs, names)

    f = np.float32
    got = run_runner(runner, [line(np.zeros((0, 3, 8), f), np.ones(8, f)),
                              line(np.ones((2, 8), f), np.ones(8, f)),
                              line(np.zeros((2, 0), f), np.ones(0, f))], launches=True)
    assert got[0] == (0, "", 0, [])   # nothing launched, so no attribute reached a kernel
    assert got[1][:3] == (0, "", 1)
    assert got[2] == (161002, "x: H=0 must be >= 1", 0, [])

    res = run_check(spec, {"x": np.zeros((0, 3, 8), f), "gamma": np.ones(8, f)}, gen_dir=examples_gen, progress=False)
    assert res.passed and not res.launched and not res.faults
    assert res.arrays["y"].shape == (0, 3, 8) and res.arrays["rstd"].shape == (0, 3, 1)


SOFT_MARGIN = '''
from opgen.dsl import A2, A3, OpSpec, Prod, f16, f32

spec = OpSpec("SoftMarginLoss", aclnn="aclnnSoftMarginLoss", socs=(A2, A3), round="rint")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H")
(T,) = spec.dtype_vars("T")
spec.input("self", T, [Bd, H])
spec.input("target", T, [Bd, H])
spec.attr("reduction", int, 1, choices=(0, 1, 2), static=True, doc="0 none, 1 mean, 2 sum")
spec.output("out", T, {0: [Bd, H], 1: [], 2: []}, form_by="reduction")
spec.dtypes((T,), [(f32,), (f16,)])


@spec.body
def _(b, self, target, reduction):
    l = b.softplus(-(self.f32() * target.f32()))
    if reduction == 0:
        out = l
    elif reduction == 2:
        out = l.reshape([Prod("Bd"), H]).sum((0, 1), keepdims=False)
    else:
        out = l.reshape([Prod("Bd"), H]).mean((0, 1), keepdims=False)
    return {"out": out.cast(T, "rint")}
'''
"""SoftMarginLoss as trial 9 wrote it (finding 10): the output's shape picked by an int attribute (form_by)."""


@pytest.mark.parametrize("text, shape", [("1", ()), ("2", ()), ("0", (0, 5))])
def test_the_check_harness_picks_a_form_by_output_shape_by_the_parsed_attribute(tmp_path, text, shape):
    """An empty call the interpreter refuses: the harness allocates the output by the attribute as --attr gives it
    (text "1"), parsed to the int the form_by table is keyed by; before, "1" matched no form and out became [1],
    so the aclnn layer blamed the output's shape instead of the empty input."""
    from opgen.check.aclnn import call_outputs, device_dtypes

    p = tmp_path / "soft_margin_loss.py"
    p.write_text(SOFT_MARGIN)
    spec = load_spec(str(p))
    x = {"self": np.zeros((0, 5), np.float32), "target": np.zeros((0, 5), np.float32)}
    got = call_outputs(spec, x, {"reduction": text}, {}, device_dtypes(spec, x, {}), None)
    assert got == {"out": ("float32", shape)}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_check_of_an_empty_mean_loss_is_refused_for_the_empty_input(tmp_path):
    """`opgen check ... --dims Bd=0,H=5 --attr reduction=1`: the emitted aclnn layer answers with its empty-input
    rule (161002 naming self and out), as `opgen interpret` does, not with a wrong out shape."""
    from inproc import cli

    from opgen.codegen import write_ops

    p = tmp_path / "soft_margin_loss.py"
    p.write_text(SOFT_MARGIN)
    write_ops([str(p)], tmp_path / "gen")
    r = cli("check", str(p), "--dims", "Bd=0,H=5", "--attr", "reduction=1", "--gen-dir", str(tmp_path / "gen"))
    assert r.returncode == 2, (r.stdout, r.stderr)
    # the last line: a build slower than the progress threshold (a loaded machine) reports its steps above it
    assert r.stderr.strip().splitlines()[-1] == (
        "opgen: aclnnSoftMarginLoss: 161002 self: is empty, but output out is not (an empty call needs every output "
        "empty)"), r.stderr
    r = cli("interpret", str(p), "--dims", "Bd=0,H=5", "--attr", "reduction=1")
    assert r.returncode == 2 and "self: is empty, but output out is not" in r.stderr, r.stderr
