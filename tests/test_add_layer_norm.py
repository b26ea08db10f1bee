"""AddLayerNorm (examples/specs/add_layer_norm.py): x = x1 + x2 (+ bias), LayerNorm of x over the last axis. Its
optional bias is the case of a presence join whose every later value depends on the optional input (the mean of
x + bias is not the mean of x): one kernel class serves both presences, and only the bias's load and Add sit
under its guard (rowpresence.join_copies joins the two presences' copies of the later steps, their scalars
renamed to one; kirguard.hoist_guards moves what both branches of a guard share out of it). CANN's interface
(ops-nn norm/add_layer_norm docs): a bias of gamma's shape [H] or of x1's, and additional_output (false by
default) saying whether x is written. Values against float64 NumPy."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from opgen.check import run_check

EX = Path(__file__).resolve().parent.parent / "examples" / "specs" / "add_layer_norm.py"


def _inputs(rows: int, h: int, bias, dtype=np.float32) -> dict:
    """x1, x2 standard normal (x2 shifted by 3, so the mean is far from 0), gamma in [0.5, 1.5], beta and bias
    normal; bias: False (none), True or "row" ([h]), "full" ([rows, h], x1's shape)."""
    rng = np.random.default_rng(rows * 7 + h)
    inp = {"x1": rng.standard_normal((rows, h)).astype(dtype),
           "x2": (rng.standard_normal((rows, h)) + 3.0).astype(dtype),
           "gamma": rng.uniform(0.5, 1.5, h).astype(dtype), "beta": rng.standard_normal(h).astype(dtype)}
    if bias:
        inp["bias"] = rng.standard_normal((rows, h) if bias == "full" else h).astype(dtype)
    return inp


def _float64(inp: dict, eps: float = 1e-5) -> dict:
    """y, mean, rstd and x of the spec's formula in float64."""
    x = inp["x1"].astype(np.float64) + inp["x2"].astype(np.float64)
    if "bias" in inp:
        x = x + inp["bias"].astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps)
    y = (x - mean) * rstd * inp["gamma"].astype(np.float64) + inp["beta"].astype(np.float64)
    return {"y": y, "mean": mean, "rstd": rstd, "x": x}


@pytest.mark.parametrize("rows, h, bias", [
    (37, 1000, True), (37, 1000, False), (37, 1000, "full"),     # ROW_SPLIT
    (3, 16384, True), (3, 16384, False), (3, 16384, "full"),     # COL_SPLIT: a row's columns over the cores
])
def test_add_layer_norm_both_presences_against_float64(rows, h, bias):
    """fp32 on the Kernel-IR engine, with additional_output true: without bias, with a bias [h] (one class for
    both) and with a bias of x1's shape: y, mean, rstd and x within fp32 rounding of float64 (relative 1e-5 of the
    values' scale)."""
    inp = _inputs(rows, h, bias)
    r = run_check(str(EX), inputs=inp, attrs={"additional_output": True}, dtypes={"T": "float32"}, engine="kir",
                  progress=False)
    assert not r.faults and r.passed, r.faults[:2]
    want = _float64(inp)
    for name in ("y", "mean", "rstd", "x"):
        got = np.asarray(r.arrays[name], np.float64).reshape(want[name].shape)
        np.testing.assert_allclose(got, want[name], rtol=1e-5, atol=1e-5 * np.abs(want[name]).max(), err_msg=name)


@pytest.mark.parametrize("bias", [True, "full"])
def test_add_layer_norm_additional_output_false_leaves_x(bias):
    """additional_output false (CANN's default): y, mean and rstd against float64 as above, and x is not an output
    of the call (the kernel never writes it)."""
    inp = _inputs(37, 1000, bias)
    r = run_check(str(EX), inputs=inp, attrs={"additional_output": False}, dtypes={"T": "float32"}, engine="kir",
                  progress=False)
    assert not r.faults and r.passed, r.faults[:2]
    want = _float64(inp)
    for name in ("y", "mean", "rstd"):
        got = np.asarray(r.arrays[name], np.float64).reshape(want[name].shape)
        np.testing.assert_allclose(got, want[name], rtol=1e-5, atol=1e-5 * np.abs(want[name]).max(), err_msg=name)
    assert r.arrays.get("x") is None


def test_add_layer_norm_is_one_class_with_only_the_bias_under_its_guard(examples_gen):
    """The emitted header: one kernel class per (additional_output, form of bias), four; the two of a bias [H] serve
    both presences: Init sets hasInput0_ from bias; every `if (hasInput0_)` holds the bias's load (LoadRow from
    gm_bias) or its Add of the bias's column row colv_[2], and no row sum, centring or scaling (those run once for
    both presences); no `if (!hasInput0_)` at all (before join_copies renamed the scalars and hoist_guards joined
    the guards: 176 guards, 81 of them the absent presence's copies; 16 now). The additional_output=False classes
    never store x (gm_x)."""
    h = (examples_gen / "add_layer_norm" / "op_kernel" / "add_layer_norm.h").read_text()
    heads = list(re.finditer(r"^// (.*)\n(?:template <[^>]*>\n)?class AddLayerNormKernel\d+ \{", h, re.M))
    assert sorted(m.group(1) for m in heads) == sorted(
        f"additional_output={a}; {p}" for a in ("False", "True")
        for p in ("every presence of bias (hasInput<k>_); bias [H]", "bias present; bias [*Bd, H]")), \
        [m.group(1) for m in heads]
    bodies = {m.group(1): h[m.start():(heads[i + 1].start() if i + 1 < len(heads) else len(h))]
              for i, m in enumerate(heads)}
    for what, body in bodies.items():
        assert ("gm_x[" in body) == what.startswith("additional_output=True"), what
        if "bias [H]" not in what:
            assert "hasInput0_" not in body, what
            continue
        assert "this->hasInput0_ = bias != nullptr;" in body and "!hasInput0_" not in body \
            and "hasInput0_ == 0" not in body
        lines = body.split("\n")
        guards = [k for k, ln in enumerate(lines) if ln.lstrip().startswith("if (hasInput0_) {")]
        assert guards
        for k in guards:
            ind = len(lines[k]) - len(lines[k].lstrip())
            end = next(j for j in range(k + 1, len(lines)) if lines[j] == " " * ind + "}")
            inner = "\n".join(lines[k + 1:end])
            assert "colv_[2]" in inner or "gm_bias" in inner, inner
            assert not re.search(r"RowsSum|RowSum|ReduceSum|Adds\(|Muls\(|else", inner), inner


@pytest.mark.slow
def test_add_layer_norm_emulated_both_presences(examples_gen):
    """The emitted C++ in the emulation (fp16, ROW_SPLIT, additional_output true), without bias, with a bias [H] and
    with one of x1's shape: passes its check and x = f16(x1 + x2 (+ bias)) within one fp16 rounding of float64."""
    for bias in (True, False, "full"):
        inp = _inputs(29, 520, bias, np.float16)
        r = run_check(str(EX), inputs=inp, attrs={"additional_output": True}, dtypes={"T": "float16"},
                      gen_dir=examples_gen, progress=False)
        assert not r.faults and r.passed, r.faults[:2]
        want = _float64(inp)["x"]
        got = np.asarray(r.arrays["x"], np.float64).reshape(want.shape)
        np.testing.assert_allclose(got, want, rtol=2.0**-10, atol=0)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.slow
def test_x_is_a_required_output_written_only_under_additional_output(examples_gen):
    """CANN's AddLayerNorm declares x REQUIRED (ops-nn norm/add_layer_norm op_host def; aclnnAddLayerNorm.md
    lists xOut among the outputs whose shape must equal x1's): the spec's param_type="REQUIRED" on an optional=True
    output. Through the emitted aclnn layer in the emulation: a null xOut is 161001 with opbase's text whatever
    additional_output says; a given xOut is accepted and the kernel launched for both values. The caller's xOut is
    copied into only where the kernel writes it (additional_output true): the copy-back sits under that test, and
    the OpDef keeps it REQUIRED."""
    from opgen.check.aclnn import call_attrs, call_outputs, device_dtypes, encode_call, run_runner
    from opgen.check.run import aclnn_runner
    from opgen.codegen.model import OpModel
    from opgen.registry import load_spec

    spec = load_spec(str(EX))
    m = OpModel(spec)
    k = next(i for i, a in enumerate(m.api_params) if a.cpp == "xOut")
    _, runner = aclnn_runner(spec, gen_dir=examples_gen)
    lines, want = [], []
    for add in (False, True):
        inputs = _inputs(5, 40, True)
        attrs = {"additional_output": add, "epsilon": 1e-5}
        dev = device_dtypes(spec, inputs, {})
        outs = call_outputs(spec, inputs, attrs, {}, dev)
        assert outs["x"] == ("float32", (5, 40)), outs   # passed though unwritten when add is false
        toks = encode_call(m, inputs, call_attrs(spec, inputs, attrs), outs,
                           {n: v.long_name for n, v in dev.items()}).split(" ")
        lines.append(" ".join(toks))
        want.append((0, "", 1))
        toks[k] = "null"
        lines.append(" ".join(toks))
        want.append((161001, "Expected a proper Tensor but got null for argument xOut.", 0))
    got = [(c, msg, n) for c, msg, n, _ in run_runner(runner, lines, launches=True)]
    assert got == want
    pkg = examples_gen / "add_layer_norm"
    api = (pkg / "op_host" / "op_api" / "aclnn_add_layer_norm.cpp").read_text()
    assert re.search(r"const bool xOutWritten_ = p\.additionalOutput;", api) and \
        re.search(r"if \(xOutWritten_\) \{\s+CHECK_RET\(result\.x != nullptr", api), "copy-back of x"
    assert re.search(r'Output\("x"\)\s+\.ParamType\(REQUIRED\)', (pkg / "op_host" / "add_layer_norm_def.cpp")
                     .read_text())
