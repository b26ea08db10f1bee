"""Inputs updated in place (`spec.output(name, ref=INPUT)`, docs/design.md "Inputs updated in place"): the rules
the DSL refuses, the interpreter's contract (the updated value under the output's name, the caller's arrays
untouched), the emitted package (OpDef / GE prototype Output of the input's name, aclnn `<name>Ref` parameters with
the L0 op writing the input's tensor and a ViewCopy back when it is not contiguous, the kernel UT and the call
example) and both check engines running the kernel with the output aliased to its input: InplaceApplyMomentum
(examples/specs/inplace_apply_momentum.py) against torch.optim.SGD in float64, and a kernel that reads rows another
core already wrote, caught by the Kernel-IR engine (a race) and by the emulation (wrong values).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from opgen.errors import SpecError
from opgen.registry import load_spec

ROOT = Path(__file__).resolve().parent.parent
MOMENTUM = ROOT / "examples" / "specs" / "inplace_apply_momentum.py"

BASE = '''from opgen.dsl import A2, OpSpec, f16, f32, i64

spec = OpSpec("RefOp", aclnn="aclnnRefOp", socs=(A2,))
N, H = spec.dims("N H")
(T,) = spec.dtype_vars("T")
spec.input("var", T, [N, H])
spec.input("g", T, [N, H])
spec.input("opt", T, [N, H], optional=True)
spec.input("two", T, [[N, H], [H]])
spec.input("idx", i64, [N])
spec.attr("k", bool, False, choices=(False, True), static=True)
{outputs}
spec.dtypes((T,), [(f32,), (f16,)])


@spec.body
def _(b, var, g, opt, two, idx, k):
    {body}
'''


def _spec(tmp_path, outputs, body='return {"var_ref": var - g * 0.5}'):
    p = tmp_path / "ref_op.py"
    p.write_text(BASE.format(outputs=outputs, body=body))
    s = load_spec(str(p))
    for key in s.keys():   # trace every specialisation (the body rules are checked there)
        s.graph(key)
    return s


@pytest.mark.parametrize("outputs, needle", [
    ('spec.output("var_ref", ref="vat")', "ref='vat' is not a declared input (did you mean 'var'"),
    ('spec.output("var_ref", ref="opt")', "ref='opt' is an optional input"),
    ('spec.output("var_ref", ref="two")', "ref='two' has several shape forms"),
    ('spec.output("var_ref", ref="var")\nspec.output("v2", ref="var")', "input 'var' is already updated in place"),
    ('spec.output("var_ref", ref="var", optional=True)', "must be required"),
    ('spec.output("var_ref", f32, ref="var")', "dtype float32 differs from the dtype T of input 'var'"),
    ('spec.output("var_ref", T, [H, N], ref="var")', "shape [H, N] differs from the shape [N, H] of input 'var'"),
    ('spec.output("var_ref", like="g", ref="var")', "like='g' differs from ref='var'"),
    ('spec.output("var_ref", {False: [N, H], True: [N, H]}, form_by="k", ref="var")', "form_by= does not apply"),
    ('spec.output("var_ref")', "output var_ref: no dtype"),
])
def test_ref_declarations_are_refused_with_the_rule(tmp_path, outputs, needle):
    with pytest.raises(SpecError) as e:
        _spec(tmp_path, outputs)
    assert needle in str(e.value), str(e.value)


def test_a_public_signature_lists_the_ref_input_not_its_output(tmp_path):
    """aclnn_signature with an input updated in place (tnd2, for aclnnApplyAdamWV2): the input is listed under its
    public name and its output travels in it; listing the output is refused naming the input to list instead."""
    head = 'spec.output("var_ref", ref="var")\nfrom opgen.dsl import api\nspec.aclnn_signature('
    rest = 'api.param("g"), api.param("opt"), api.param("two"), api.param("idx"), api.param("k")'
    spec = _spec(tmp_path, head + 'api.param("varRef", "var"), ' + rest + ')')
    assert [e.name for e in spec.aclnn_signature_][0] == "varRef"
    with pytest.raises(SpecError) as e:
        _spec(tmp_path, head + 'api.param("var"), ' + rest + ', api.param("varRef", "var_ref"))')
    assert "output 'var_ref' is updated in place in input 'var'" in str(e.value), str(e.value)


@pytest.mark.parametrize("entry, needle", [
    ('api.param("k", ctype="float")', "ctype='float' is for float attributes; 'k' is not one"),
    ('api.param("k", ctype="aclTensor*")', "ctype='aclTensor*' is for a device input"),
])
def test_narrower_c_types_are_checked(tmp_path, entry, needle):
    """ctype="float" (CANN's float lr) only on a float attribute, ctype="aclTensor*" (a writable input) only on a
    device input: otherwise a SpecError naming the rule."""
    rest = 'api.param("g"), api.param("opt"), api.param("two"), api.param("idx"), '
    with pytest.raises(SpecError) as e:
        _spec(tmp_path, 'spec.output("var_ref", ref="var")\nfrom opgen.dsl import api\nspec.aclnn_signature('
              'api.param("varRef", "var"), ' + rest + entry + ')')
    assert needle in str(e.value), str(e.value)


def test_a_ref_output_with_the_inputs_own_dtype_and_shape_is_accepted(tmp_path):
    s = _spec(tmp_path, 'spec.output("var_ref", T, [N, H], like="var", ref="var")')
    o = s.outputs[0]
    assert (o.ref, o.like, o.dtype, o.opdef_name) == ("var", "var", s.inputs[0].dtype, "var")


@pytest.mark.parametrize("body, op", [
    ('return {"var_ref": var - var.mean(0)}', "reduce"),                            # a column statistic
    ('return {"var_ref": b.gather(var, idx, 0)}', "gather"),                        # rows of other rows
    ('return {"var_ref": var * 2.0 + var.sum(-1)}', "reduce"),                      # even a row statistic
    ('return {"var_ref": g + var.reshape([N * H]).reshape([N, H])}', "reshape"),
])
def test_a_body_reading_the_ref_input_other_than_element_by_element_is_refused(tmp_path, body, op):
    with pytest.raises(SpecError) as e:
        _spec(tmp_path, 'spec.output("var_ref", ref="var")', body)
    msg = str(e.value)
    assert "input var is updated in place, but the body reads it through " + op in msg, msg
    assert "ref_op.py:" in msg and "drop ref=" in msg, msg


def _torch_sgd(inputs, nesterov):
    """torch.optim.SGD's momentum step in float64 with its buffer set to accum: (var, buffer) after the step."""
    import torch

    p = torch.nn.Parameter(torch.tensor(np.asarray(inputs["var"], np.float64)))
    p.grad = torch.tensor(np.asarray(inputs["grad"], np.float64))
    opt = torch.optim.SGD([p], lr=float(inputs["lr"][0]), momentum=float(inputs["momentum"][0]), nesterov=nesterov)
    opt.state[p]["momentum_buffer"] = torch.tensor(np.asarray(inputs["accum"], np.float64))
    opt.step()
    return p.detach().numpy(), opt.state[p]["momentum_buffer"].numpy()


@pytest.mark.parametrize("nesterov", [False, True])
def test_interpreter_returns_the_update_under_the_ref_names_and_leaves_the_inputs(nesterov):
    """Exact mode equals torch.optim.SGD (float64); the caller's arrays are not written (the interpreter's contract:
    the updated values are outputs var_ref / accum_ref, the in-place write is the kernel's)."""
    from opgen.interp import run_graph

    spec = load_spec(str(MOMENTUM))
    rng = np.random.default_rng(7)
    inputs = {"var": rng.standard_normal((5, 37)), "accum": rng.standard_normal((5, 37)),
              "lr": np.array([0.03]), "grad": rng.standard_normal((5, 37)), "momentum": np.array([0.9])}
    kept = {k: v.copy() for k, v in inputs.items()}
    bound = spec.bind(inputs, {"use_nesterov": nesterov}, {"T": "float32"})
    got = run_graph(spec.graph(bound.key), bound, mode="exact")
    assert set(got) == {"var_ref", "accum_ref"}
    var, buf = _torch_sgd(bound.arrays, nesterov)
    np.testing.assert_allclose(np.asarray(got["var_ref"], np.float64), var, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.asarray(got["accum_ref"], np.float64), buf, rtol=1e-12, atol=1e-14)
    for k, v in kept.items():
        np.testing.assert_array_equal(inputs[k], v)


@pytest.fixture(scope="module")
def momentum_files():
    from opgen.codegen.generation import generate

    return generate(load_spec(str(MOMENTUM)))


def test_opdef_and_prototype_declare_the_output_by_the_inputs_name(momentum_files):
    """GE's ref convention (ops-nn InplaceApplyMomentum, ApplyAdamW): Input("var") and Output("var")."""
    d = momentum_files["op_host/inplace_apply_momentum_def.cpp"]
    for name in ("var", "accum"):
        assert f'this->Input("{name}")' in d and f'this->Output("{name}")' in d
    assert "var_ref" not in d
    proto = momentum_files["op_graph/inplace_apply_momentum_proto.h"]
    assert ".OUTPUT(var, TensorType(" in proto and ".OUTPUT(accum, TensorType(" in proto
    cfg = json.loads(momentum_files["op_host/config/ascend910b/inplace_apply_momentum_binary.json"])
    outs = [o["name"] for o in cfg["op_list"][0]["outputs"]]
    assert outs == ["var", "accum"], outs


def test_aclnn_takes_ref_tensors_and_writes_them_in_place(momentum_files):
    import re

    h = momentum_files["op_host/op_api/aclnn_opgen_inplace_apply_momentum.h"]
    sig = re.search(r"aclnnOpgenInplaceApplyMomentumGetWorkspaceSize\(([^)]*)\)", h).group(1)
    params = [" ".join(p.split()) for p in sig.split(",")]
    assert params[:3] == ["aclTensor* varRef", "aclTensor* accumRef", "const aclTensor* lr"], params
    assert not any("Out" in p for p in params), params   # no output tensor: the refs hold the results
    l0 = momentum_files["op_host/op_api/inplace_apply_momentum.cpp"]
    assert "AllocTensor" not in l0
    assert re.search(r"OP_OUTPUT\(varRefOutKernel, accumRefOutKernel\)", " ".join(l0.split()))
    assert "const aclTensor* varRefOutKernel = varRef;" in l0
    api = momentum_files["op_host/op_api/aclnn_opgen_inplace_apply_momentum.cpp"]
    assert '#include "opdev/tensor_view_utils.h"' in api
    flat = " ".join(api.split())
    assert ("if (!IsContiguous(p.varRef)) { CHECK_RET(result.var_ref != nullptr, ACLNN_ERR_INNER_NULLPTR); const "
            "aclTensor* copied = l0op::ViewCopy(result.var_ref, p.varRef, uniqueExecutor.get());") in flat
    assert "varRefKernel = l0op::Contiguous(p.varRef" in flat
    doc = momentum_files["docs/aclnnOpgenInplaceApplyMomentum.md"]
    assert "| `varRef` | 输入/输出 |" in doc


def test_kernel_ut_and_example_use_the_inputs_memory(momentum_files):
    ut = momentum_files["tests/ut/op_kernel/test_inplace_apply_momentum.cpp"]
    assert "ICPU_RUN_KF(inplace_apply_momentum, 1, var, accum, lr, grad, momentum, var, accum, workspace" in ut
    assert "GmFree(var_ref)" not in ut and ut.count("AscendC::GmFree(var);") == 1
    ex = momentum_files["examples/test_aclnn_opgen_inplace_apply_momentum.cpp"]
    assert 'PrintOutput<float>("var_ref", varRefDevice, varRefShape' in ex
    entry = momentum_files["op_kernel/inplace_apply_momentum.cpp"]
    assert "GM_ADDR var_ref, GM_ADDR accum_ref" in entry   # the entry keeps CANN's output slots (ApplyFusedEmaAdam)


def test_launch_driver_aliases_the_outputs_to_their_inputs():
    from opgen.check.driver import driver_source
    from opgen.codegen.model import OpModel

    src = driver_source(OpModel(load_spec(str(MOMENTUM))))
    assert "const int kOutputRefs[] = {0, 1};" in src
    assert "opgen_check::SetOutputRefs(kOutputRefs, 2);" in src
    tanh = driver_source(OpModel(load_spec(str(ROOT / "examples" / "specs" / "tanh.py"))))
    assert "kOutputRefs" not in tanh and "SetOutputRefs" not in tanh


def test_kir_engine_updates_the_inputs_array_and_matches_torch():
    """--engine kir: the output is the input's array (an element the kernel did not write keeps its old value, as
    on the device), odd sizes over the cores, every dtype row, both update forms."""
    from opgen.check import run_check

    for dims, dt, nesterov in (({"Bd": (7, 33)}, "float32", False), ({"Bd": (100003,)}, "bfloat16", True),
                               ({"Bd": (3, 1001)}, "float16", True)):
        r = run_check(str(MOMENTUM), dims=dims, dtypes={"T": dt}, attrs={"use_nesterov": nesterov}, seed=5,
                      engine="kir", progress=False)
        assert r.passed and not r.faults, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items()})
        var, buf = _torch_sgd({k: np.asarray(v, np.float64) for k, v in r.inputs.items()}, nesterov)
        unit = {"float32": 2.0**-22, "float16": 2.0**-9, "bfloat16": 2.0**-6}[dt]
        for name, ref in (("var_ref", var), ("accum_ref", buf)):
            got = np.asarray(r.arrays[name], np.float64)
            assert np.all(np.abs(got - ref) <= unit * (np.abs(ref) + np.abs(ref).mean() + 1)), name


HAZARD = '''"""var_ref[r] = 2 var[idx[r]]: reads rows of var other cores write (a gather of the input updated in place)."""
from opgen.dsl import A2, OpSpec, f32, i64

spec = OpSpec("RefHazard", aclnn="aclnnRefHazard", socs=(A2,))
N, H = spec.dims("N H")
spec.input("var", f32, [N, H])
spec.input("idx", i64, [N])
spec.output("var_ref", {out})


@spec.example
def _(rng, inputs, env, attrs):
    """idx reverses the rows."""
    import numpy as np
    inputs["idx"] = np.arange(inputs["idx"].shape[0])[::-1].copy()


@spec.body
def _(b, var, idx):
    return {{"var_ref": b.gather(var, idx, 0) * 2.0}}
'''


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_both_engines_catch_a_kernel_reading_what_it_already_wrote(tmp_path, monkeypatch):
    """With OpSpec._check_ref_reads switched off, a gather of the ref input lowers (rows picked by an index): each
    core writes its rows of var while others still read them. The Kernel-IR engine reports the read-after-write
    race between cores; the emulation's aliased buffer gives values the float64 interpreter refutes. The same body
    with an ordinary output passes on both: the aliasing, not the kernel, is what fails."""
    from opgen.check import run_check
    from opgen.codegen import write_ops
    from opgen.dsl.spec import OpSpec

    monkeypatch.setattr(OpSpec, "_check_ref_reads", lambda self, g: None)
    for out, ok in (('ref="var"', False), ("f32, like=\"var\"", True)):
        d = tmp_path / ("hazard" if not ok else "plain")
        d.mkdir()
        p = d / "ref_hazard.py"
        p.write_text(HAZARD.format(out=out))
        write_ops([str(p)], d / "gen")
        for engine in ("kir", "emu"):
            r = run_check(str(p), dims={"N": 64, "H": 40}, gen_dir=d / "gen", engine=engine, seed=1, progress=False)
            assert r.passed is ok, (out, engine, r.faults[:2])
            if not ok and engine == "kir":
                assert any("race (read-after-write) between cores on GM tensor 'gm_var'" in f for f in r.faults)
            if not ok and engine == "emu":
                assert not r.outputs["var_ref"].passed


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_emulation_writes_the_inputs_buffer(examples_gen):
    """The emulated launch gives var_ref the GM buffer of var: var is read and written, no var_ref buffer exists."""
    from opgen.check import run_check

    r = run_check(str(MOMENTUM), dims={"Bd": (5, 999)}, dtypes={"T": "float32"}, gen_dir=examples_gen, seed=2,
                  progress=False)
    assert r.passed and not r.faults
    n = 5 * 999 * 4
    assert r.gm["var"].read == n and r.gm["var"].written == n, r.gm["var"]
    assert r.gm["accum"].written == n and "var_ref" not in r.gm and "accum_ref" not in r.gm
    assert r.gm_bytes_min == 5 * n + 2 * 4, r.gm_bytes_min   # var, accum, grad read; var, accum written; lr, momentum


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_emitted_aclnn_layer_checks_the_ref_tensors_by_their_public_names(examples_gen):
    """The emitted aclnn layer (run by `opgen check` before the launch) checks varRef / accumRef as the inputs they
    are, naming them as the caller passed them; the interpreter names the OpDef input."""
    from opgen.check import run_check
    from opgen.check.aclnn import AclnnRejected
    from opgen.errors import ValidationError

    rng = np.random.default_rng(0)
    inputs = {"var": rng.standard_normal((4, 9)).astype(np.float32),
              "accum": rng.standard_normal((4, 8)).astype(np.float32), "lr": np.array([0.1], np.float32),
              "grad": rng.standard_normal((4, 9)).astype(np.float32), "momentum": np.array([0.9], np.float32)}
    with pytest.raises(AclnnRejected) as e:
        run_check(str(MOMENTUM), inputs, gen_dir=examples_gen, progress=False)
    assert e.value.code == 161002
    assert e.value.message == "accumRef: shape [4, 8]: leading dims [4, 8] differ from Bd=[4, 9] (from varRef)"
    with pytest.raises(ValidationError) as v:
        load_spec(str(MOMENTUM)).bind(inputs, {}, None)
    assert "accum: shape [4, 8]: leading dims [4, 8] differ from Bd=[4, 9] (from var)" in str(v.value)


GEMM_ACC = '''"""c += a @ b + bias, in place (GemmV2's c): the cube family's epilogue reads c and writes it."""
from opgen.dsl import A2, OpSpec, f16, f32

spec = OpSpec("GemmAcc", aclnn="aclnnInplaceGemmAcc", socs=(A2,), round="rint")
B, M, K, N = (spec.dim(n, max=65535) for n in "BMKN")
spec.input("a", f16, [B, M, K])
spec.input("b", f16, [B, K, N])
spec.input("bias", f16, [N])
spec.input("c", f16, [B, M, N])
spec.output("c_ref", ref="c")


@spec.body
def _(g, a, b, bias, c):
    return {"c_ref": (g.matmul(a, b) + bias.cast(f32) + c.cast(f32)).cast(f16, "rint")}
'''


def test_a_cube_epilogue_accumulates_into_its_ref_input_on_the_kir_engine(tmp_path):
    """The cube family: each AIV reads its block of c in the epilogue and writes the same block, so aliasing c_ref to c
    is safe; the Kernel-IR engine (output bound to c's array) equals float64 NumPy within fp16 rounding."""
    from opgen.check import run_check

    p = tmp_path / "gemm_acc.py"
    p.write_text(GEMM_ACC)
    r = run_check(str(p), dims={"B": 2, "M": 130, "K": 19, "N": 300}, engine="kir", seed=3, progress=False)
    assert r.passed and not r.faults, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items()})
    x = {k: np.asarray(v, np.float64) for k, v in r.inputs.items()}
    ref = x["a"] @ x["b"] + x["bias"] + x["c"]
    got = np.asarray(r.arrays["c_ref"], np.float64)
    mag = np.abs(x["a"]) @ np.abs(x["b"]) + np.abs(x["bias"]) + np.abs(x["c"])
    assert np.all(np.abs(got - ref) <= 2.0**-10 * mag + 2.0**-24 * 19 * mag)
