"""ApplyAdamWV2 (examples/specs/apply_adam_w_v2.py): one AdamW step updating var, m and v in place, against
torch.optim.AdamW in float64 (the oracle: the optimizer's own step, its state set to the call's m, v and step
count t - 1), on both engines; its public API against CANN's header (ops-nn optim/apply_adam_w_v2
op_host/op_api/aclnn_apply_adam_w_v2.h, written out below)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "examples" / "specs" / "apply_adam_w_v2.py"

CANN_HEADER = """aclTensor* varRef, aclTensor* mRef, aclTensor* vRef, aclTensor* maxGradNormOptionalRef,
const aclTensor* grad, const aclTensor* step, float lr, float beta1, float beta2, float weightDecay, float eps,
bool amsgrad, bool maximize, uint64_t* workspaceSize, aclOpExecutor** executor"""


def test_the_emitted_header_is_canns():
    """aclnnApplyAdamWV2GetWorkspaceSize's parameters, C types and order are CANN's: the tensors updated in place as
    aclTensor* <name>Ref (maxGradNormOptionalRef too, though this kernel refuses it), float coefficients."""
    from opgen.codegen import generate
    from opgen.registry import load_spec

    files = generate(load_spec(str(SPEC)))
    (h,) = [t for p, t in files.items() if p.startswith("op_host/op_api/aclnn_") and p.endswith(".h")]
    got = re.search(r"aclnnStatus aclnnApplyAdamWV2GetWorkspaceSize\((.*?)\);", h, re.S).group(1)
    assert [" ".join(x.split()) for x in got.split(",")] == [" ".join(x.split()) for x in CANN_HEADER.split(",")]


CANN_FILES = """op_host/apply_adam_w_v2_def.cpp op_host/apply_adam_w_v2_infershape.cpp op_host/apply_adam_w_v2_tiling.cpp
op_host/op_api/aclnn_apply_adam_w_v2.h op_host/op_api/aclnn_apply_adam_w_v2.cpp op_host/op_api/apply_adam_w_v2.h
op_host/op_api/apply_adam_w_v2.cpp op_kernel/apply_adam_w_v2.cpp op_graph/apply_adam_w_v2_proto.h
op_host/config/ascend910b/apply_adam_w_v2_binary.json op_host/config/ascend910_93/apply_adam_w_v2_binary.json
examples/test_aclnn_apply_adam_w_v2.cpp docs/aclnnApplyAdamWV2.md""".split()
"""Files of ops-nn's optim/apply_adam_w_v2 (its tree as CANN ships it) that the package emits too."""


def test_the_package_is_named_as_canns(examples_gen):
    """spec.package(stem="apply_adam_w_v2"): the directory, every file, the OpDef's opFile.value, the kernel entry and
    the tiling-key macros are spelt apply_adam_w_v2 as in ops-nn (CANN_FILES; its def sets opFile.value and the
    entry is `apply_adam_w_v2(GM_ADDR var, ...`), never op_snake's apply_adam_wv2; the provenance record carries the
    stem, so the package's directory is found without the spec."""
    import json

    pkg = examples_gen / "apply_adam_w_v2"
    assert pkg.is_dir() and not (examples_gen / "apply_adam_wv2").exists()
    texts = {p.relative_to(pkg).as_posix(): p.read_text() for p in pkg.rglob("*") if p.is_file()}
    assert set(CANN_FILES) <= set(texts), sorted(set(CANN_FILES) - set(texts))
    assert not [(p, t) for p, t in texts.items() if "adam_wv2" in (p + t).lower()]
    assert 'ExtendCfgInfo("opFile.value", "apply_adam_w_v2")' in texts["op_host/apply_adam_w_v2_def.cpp"]
    assert "opInterface" not in texts["op_host/apply_adam_w_v2_def.cpp"]   # the entry is the file stem
    assert re.search(r"__aicore__ void apply_adam_w_v2\(GM_ADDR var,", texts["op_kernel/apply_adam_w_v2.cpp"])
    macros = set(re.findall(r"#define (\w+_TILING_KEY_\w+)", texts["op_kernel/apply_adam_w_v2_tiling_key.h"]))
    assert all(m.startswith("APPLY_ADAM_W_V2_TILING_KEY_") for m in macros), macros   # the guard's too
    assert "APPLY_ADAM_W_V2_TILING_KEY_A0_D1_S1" in macros
    assert json.loads(texts["opgen_package.json"])["stem"] == "apply_adam_w_v2"


def test_generate_diff_and_check_find_the_package(examples_gen, tmp_path):
    """`opgen diff` compares the tree's apply_adam_w_v2/ (exit 0: up to date) and `opgen check --gen-dir` reads it:
    the tree, or the package directory itself, resolve to <tree>/apply_adam_w_v2, whose record is current; the
    package under op_snake's name is refused naming the stem. (The emulated tests above build from it.)"""
    from inproc import cli

    from opgen.check.run import _sources, require_current
    from opgen.cli import _gen_root
    from opgen.codegen.model import OpModel
    from opgen.errors import ValidationError
    from opgen.registry import load_spec

    r = cli("diff", SPEC, "--out", examples_gen)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    spec = load_spec(str(SPEC))
    root = _gen_root(str(examples_gen / "apply_adam_w_v2"), spec)
    assert Path(root) == examples_gen
    src = _sources(OpModel(spec), root)
    assert src.op_dir == (examples_gen / "apply_adam_w_v2").resolve()
    src.require()   # the aclnn, L0, tiling and kernel files under their stems
    require_current(spec, src, root)
    wrong = tmp_path / "apply_adam_wv2"
    shutil.copytree(examples_gen / "apply_adam_w_v2", wrong)
    with pytest.raises(ValidationError, match="after naming the package apply_adam_w_v2"):
        _gen_root(str(wrong), spec)


def torch_adamw(inputs: dict, attrs: dict) -> dict:
    """var, m, v after torch.optim.AdamW's step (float64) from the call's arrays (as the kernel read them) and
    attributes: state step = t - 1, exp_avg = m, exp_avg_sq = v, grad = grad."""
    import torch

    p = torch.tensor(np.asarray(inputs["var"], np.float64), requires_grad=True)
    p.grad = torch.tensor(np.asarray(inputs["grad"], np.float64))
    opt = torch.optim.AdamW([p], lr=attrs["lr"], betas=(attrs["beta1"], attrs["beta2"]), eps=attrs["eps"],
                            weight_decay=attrs["weight_decay"], maximize=attrs["maximize"], foreach=False)
    t = float(np.asarray(inputs["step"]).reshape(-1)[0])
    opt.state[p] = {"step": torch.tensor(t - 1.0, dtype=torch.float64),
                    "exp_avg": torch.tensor(np.asarray(inputs["m"], np.float64)),
                    "exp_avg_sq": torch.tensor(np.asarray(inputs["v"], np.float64))}
    opt.step()
    st = opt.state[p]
    return {"var_ref": p.detach().numpy(), "m_ref": st["exp_avg"].numpy(), "v_ref": st["exp_avg_sq"].numpy()}


ATTRS = {"lr": 0.01, "beta1": 0.9, "beta2": 0.999, "weight_decay": 0.01, "eps": 1e-8}
CASES = [   # (dims, dtypes, maximize)
    ({"Bd": (7, 33)}, {"T": "float32", "U": "float32", "S": "float32"}, False),
    ({"Bd": (3, 1001)}, {"T": "float16", "U": "float16", "S": "int64"}, True),
    ({"Bd": (40003,)}, {"T": "float32", "U": "bfloat16", "S": "float32"}, False),
    ({"Bd": (5, 9)}, {"T": "bfloat16", "U": "bfloat16", "S": "int64"}, False),
]


def _check(case, engine, gen_dir=None):
    from opgen.check import run_check

    dims, dtypes, maximize = case
    attrs = dict(ATTRS, maximize=maximize)
    r = run_check(str(SPEC), dims=dims, dtypes=dtypes, attrs=attrs, seed=3, engine=engine, progress=False,
                  gen_dir=gen_dir)
    assert r.passed and not r.faults, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items()})
    x = {k: np.asarray(v, np.float64) for k, v in r.inputs.items() if v is not None}
    want = torch_adamw(x, attrs)
    # bounds: fp32 arithmetic on the operands' magnitudes (u32 per operation; the coefficients are fp32 attributes,
    # so 1 - beta carries beta's rounding, u32 beta absolute: the bound takes the whole |g|, |g|^2), the bias
    # corrections through fp32 exp / log (1e-4 relative on the step's term), and one rounding of the output
    # to T (half an ulp: u_T relative, plus T's smallest subnormal step)
    u32, b1, b2, g = 2.0**-24, ATTRS["beta1"], ATTRS["beta2"], np.abs(x["grad"])
    u_t, tiny = {"float32": (2.0**-24, 2.0**-149), "float16": (2.0**-11, 2.0**-25),
                 "bfloat16": (2.0**-8, 2.0**-134)}[dtypes["T"]]
    ops = {"m_ref": 3 * u32 * (b1 * np.abs(x["m"]) + g),
           "v_ref": 4 * u32 * (b2 * x["v"] + g * g),
           "var_ref": 4 * u32 * np.abs(x["var"]) + 1e-4 * np.abs(want["var_ref"] - x["var"]) + 1e-4 * ATTRS["lr"]}
    for name, ref in want.items():
        got = np.asarray(r.arrays[name], np.float64)
        bound = ops[name] + u_t * np.abs(ref) * (1 + 2.0**-10) + tiny
        assert np.all(np.abs(got - ref) <= bound), (name, float(np.max(np.abs(got - ref) / bound)))


@pytest.mark.parametrize("case", CASES[:2], ids=["f32", "f16_int64_step_maximize"])
def test_kir_kernel_matches_torch_adamw(case):
    """--engine kir: fp32 and fp16 data, a float32 and an int64 step, maximize, rows over the cores."""
    _check(case, "kir")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("case", CASES[1:], ids=["f16_int64_step_maximize", "f32_var_bf16_grad", "bf16"])
def test_emulated_kernel_matches_torch_adamw(case, examples_gen):
    """The emitted kernel on the emulation (the outputs aliased to var / m / v): fp16 with an int64 step and
    maximize, float32 var with a bfloat16 grad over many cores, bfloat16."""
    _check(case, "emu", examples_gen)


def test_what_the_kernel_does_not_implement_is_refused():
    """amsgrad (its maximum kept in maxGradNormOptionalRef) is refused naming the attribute and the input."""
    from opgen.errors import ValidationError
    from opgen.interp import interpret

    rng = np.random.default_rng(0)
    x = {n: rng.standard_normal((4, 3)).astype(np.float32) for n in ("var", "m", "grad")}
    x.update(v=np.abs(rng.standard_normal((4, 3))).astype(np.float32), step=np.array([3.0], np.float32))
    with pytest.raises(ValidationError, match="amsgrad"):
        interpret(str(SPEC), x, dict(ATTRS, amsgrad=True), {"T": "float32", "U": "float32", "S": "float32"})
    with pytest.raises(ValidationError, match="max_grad_norm: must be null"):
        interpret(str(SPEC), dict(x, max_grad_norm=x["v"]), dict(ATTRS),
                  {"T": "float32", "U": "float32", "S": "float32"})
