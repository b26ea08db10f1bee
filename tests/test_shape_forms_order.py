"""Which shape form a call binds (docs/design.md "Shape forms at run time"): the inputs of one shape bind their
dims first, then an input of several forms takes its first form that agrees with them -- in the interpreter
(opgen.dsl.validate.bind) and in the emitted aclnn layer alike. aclnnAddcmul's self broadcasts against tensor1: a
self [B, 1, H] beside tensor1 [B, S, H] was refused when self's forms listed [B, S, H] first (S bound to 1 by self,
then tensor1's S = 4 conflicted), a valid call the order of the forms decided (new-user finding)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from opgen.registry import load_spec

_ADDCMUL = '''
from opgen.dsl import A2, OpSpec, api, f16, f32

spec = OpSpec("Addcmul", aclnn="aclnnAddcmul", socs=(A2,), round="rint")
B, S, H = spec.dims("B S H")
(T,) = spec.dtype_vars("T")
spec.input("input_data", T, [[B, S, H], [B, 1, H], [H]])
spec.input("x1", T, [B, S, H])
spec.input("x2", T, [[B, S, H], [H], [1]])
spec.attr("value", float, 1.0)
spec.output("y", T, [B, S, H])
spec.dtypes((T,), [(f32,), (f16,)])
spec.aclnn_signature(api.param("self", "input_data"), api.param("tensor1", "x1"), api.param("tensor2", "x2"),
                     api.scalar("value", "value"), api.param("out", "y"))


@spec.body
def _(b, input_data, x1, x2, value):
    return {"y": input_data + value * x1 * x2}
'''

CASES = [((2, 1, 8), (2, 4, 8), (2, 4, 8), 1),     # self [B, 1, H]: form 1, S from tensor1
         ((2, 4, 8), (2, 4, 8), (8,), 0),          # self [B, S, H], tensor2 [H]
         ((8,), (2, 4, 8), (1,), 2),               # self [H], tensor2 [1]
         ((2, 1, 8), (2, 1, 8), (2, 1, 8), 0)]     # S = 1 everywhere: the first form, as before


@pytest.fixture(scope="module")
def addcmul(tmp_path_factory):
    p = tmp_path_factory.mktemp("forms") / "addcmul.py"
    p.write_text(_ADDCMUL)
    return str(p)


def _inputs(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return {n: rng.normal(size=s).astype(np.float32) for n, s in zip(("input_data", "x1", "x2"), shapes)}


@pytest.mark.parametrize("case", CASES, ids=["self-B1H", "self-BSH", "self-H", "all-S1"])
def test_the_interpreter_binds_the_form_the_one_shape_inputs_allow(addcmul, case):
    *shapes, form = case
    spec = load_spec(addcmul)
    inp = _inputs(shapes)
    bound = spec.bind(inp, {"value": 0.5}, {})
    assert bound.key.forms[0] == form
    from opgen.interp import run_graph

    out = run_graph(spec.graph(bound.key), bound, "exact")["y"]
    a, x1, x2 = (inp[n].astype(np.float64) for n in ("input_data", "x1", "x2"))
    np.testing.assert_allclose(np.asarray(out, np.float64), a + 0.5 * x1 * x2, rtol=1e-6, atol=1e-6)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.slow
def test_the_emitted_aclnn_layer_accepts_the_same_calls_and_refuses_a_shape_no_form_fits(addcmul, tmp_path):
    from opgen.check.aclnn import call_attrs, call_outputs, device_dtypes, encode_call, run_runner
    from opgen.check.run import aclnn_runner
    from opgen.codegen import write_ops

    spec = load_spec(addcmul)
    write_ops([addcmul], tmp_path, jobs=1)
    m, runner = aclnn_runner(spec, gen_dir=tmp_path)
    lines = []
    for *shapes, _form in CASES + [((2, 3, 8), (2, 4, 8), (2, 4, 8), None)]:
        inp = _inputs(shapes)
        dev = device_dtypes(spec, inp, {})
        lines.append(encode_call(m, inp, call_attrs(spec, inp, {"value": 0.5}),
                                 call_outputs(spec, inp, {"value": 0.5}, {}, dev),
                                 {n: v.long_name for n, v in dev.items()}))
    got = run_runner(runner, lines)
    assert [rc for rc, *_ in got] == [0, 0, 0, 0, 161002], got
    assert got[-1][1].startswith("self: shape [2, 3, 8] matches none of [B, S, H] or [B, 1, H] or [H]"), got[-1]
    # the package's golden (tests/assets/golden.py) binds the same forms
    import importlib.util

    path = tmp_path / "addcmul" / "tests" / "assets" / "golden.py"
    mod_spec = importlib.util.spec_from_file_location("addcmul_golden", path)
    golden = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(golden)
    for *shapes, form in CASES:
        env, forms = golden._bind(_inputs(shapes), {"value": 0.5})
        assert forms[0] == form and env["S"] == shapes[1][1], (shapes, forms, env)
