"""`opgen check` verdicts and messages on hostile values ("opgen check verdicts" and "Messages").

Covered, each with its numbers:
- overflow compared in the output dtype: AdaLayerNormV2 fp16 whose exact outputs exceed 65504 (float64 LayerNorm
  of docs/reference/ada_layer_norm.md §1.1) passes, the overflowed elements counted and named; unwritten elements (the
  driver's 0xFF poison), computed NaN and a stray inf still fail, told apart by their bits;
- conditioning: AdaLayerNormGrad fp32 with rows of two elements (pd_x cancels: each row's pd_x is [v, -v]) fails
  the exact-math criteria in the device-mode interpretation too; the kernel equals it bit for bit and passes as
  "conditioning"; a kernel 0.1 % off fails, and where the device interpretation passes, a kernel fault is named;
- NsaSelectedAttentionGrad fp16 with q, k x30: the exact dq / dk are 0 (float64 torch autograd, tests/oracles.py:
  the softmax is one-hot, dS = P (dP - Dr) = 0); kernel and device interpretation both carry fp32 cancellation
  noise (dP by matmul, Dr by a row sum, ~2e-5) of opposite signs, so they differ by twice the output's magnitude.
  Neither is a bug; the verdict is "conditioning" (not "small-value"), and an error 5x the output fails;
- the aclnn case runner's reader (runtime.cpp) parses doubles whole: nan, inf, -inf, 1e308, subnormals round-trip
  bit for bit, a malformed token is an error instead of a stream that loses its place; `--attr scaleValue=nan`
  passes through the aclnn layer (the reference states no CANN rule on it) and the comparison decides;
- messages: --seed, --dims S=, --dims S=2x3, a dim given twice, NsaSelectedAttentionGrad's own parameter names,
  no warning text on stderr.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from opgen.check import compare_output, run_check  # noqa: E402
from opgen.check.compare import THRESHOLD, mere_mare, small_value_failure  # noqa: E402
from opgen.errors import OpgenError  # noqa: E402

pytestmark = pytest.mark.slow   # builds C++ or runs many processes (the fast tier: -m "not slow")

GXX = shutil.which("g++")
needs_gxx = pytest.mark.skipif(GXX is None, reason="g++ not installed")
TH16, TH32 = 2.0**-10, 2.0**-13


def _cli(*args, timeout=300):
    """`opgen ARGS` run in this process from the repository's root (tests/inproc.py: the exit status and the one
    error line are what these tests read; a child process proves nothing more); (exit status, stdout, stderr).
    `timeout` is kept for the callers and unused."""
    from inproc import cli

    r = cli(*args, cwd=ROOT)
    return r.returncode, r.stdout, r.stderr


# ---- 1. overflow in the output dtype vs unwritten elements ----------------------------------------------------

def _overflow_inputs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 8)).astype(np.float16)
    scale = np.clip(rng.standard_normal((2, 8)) * 20000, -65000, 65000).astype(np.float16)
    shift = rng.standard_normal((2, 8)).astype(np.float16)
    return {"x": x, "scale": scale, "shift": shift}


def _ln_f64(x, scale, shift, eps=1e-5):
    """AdaLayerNormV2's out in float64 (docs/reference/ada_layer_norm.md §1.1)."""
    x = x.astype(np.float64)
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * (1 + scale.astype(np.float64)[:, None, :]) + shift.astype(np.float64)[:, None]


@needs_gxx
def test_fp16_overflow_matching_the_device_interpretation_passes_and_is_named():
    """Two exact outputs exceed fp16's 65504 (115864.5 and 73194.3 with these inputs); the kernel writes ±inf there,
    as the device interpretation does: a match in float16, counted and named, the rest judged by the plain rule."""
    inputs = _overflow_inputs()
    exact = _ln_f64(**inputs)
    over = np.abs(exact) > 65504
    assert over.sum() == 2 and np.isfinite(list(inputs.values())[1].astype(np.float32)).all()
    res = run_check("AdaLayerNormV2", inputs, progress=False)
    out = res.outputs["out"]
    assert res.passed and out.passed and out.rule == "plain", out.reason
    assert out.overflow == 2 and out.unwritten == 0
    assert "2 elements overflow to" in out.note and "in float16, as in the device interpretation" in out.note
    k = res.arrays["out"].astype(np.float64)
    assert np.array_equal(k[over], np.sign(exact[over]) * np.inf)
    assert out.mere < TH16 and out.mare < 10 * TH16    # measured on the 62 finite elements
    np.testing.assert_allclose(k[~over], exact[~over], rtol=4 * TH16, atol=4 * TH16)


def test_unwritten_computed_nan_and_stray_inf_still_fail():
    """The poison (bytes 0xFF) is an unwritten element even where the exact value overflows; a computed NaN
    (0x7E00) and an inf where the exact value is in range and the device finite fail, each named."""
    g = np.array([1.0, -2.0, 70000.0, 0.5, 3.0, -1e5])
    with np.errstate(over="ignore"):
        dev = g.astype(np.float16)                        # [1, -2, inf, 0.5, 3, -inf]
    ok = compare_output("y", dev.copy(), g, dev, "float16")
    assert ok.passed and ok.overflow == 2 and "overflow to ±inf in float16" in ok.note
    for k, bits, why in ((2, 0xFFFF, "unwritten"), (0, 0xFFFF, "unwritten"), (3, 0x7E00, "NaN (computed"),
                         (4, 0x7C00, "±inf where the exact result is finite")):
        a = dev.copy()
        a.view(np.uint16)[k] = bits
        c = compare_output("y", a, g, dev, "float16")
        assert not c.passed and why in c.reason and "non-finite" in c.reason, (k, c.reason)
        assert c.unwritten == (bits == 0xFFFF)
    # +inf where the exact value overflows to -inf is no match
    a = dev.copy()
    a[5] = np.inf
    assert not compare_output("y", a, g, dev, "float16").passed
    # a golden NaN is not matched by the poison
    gn = np.array([np.nan, 1.0])
    a = np.array([0.0, 1.0], np.float16)
    a.view(np.uint16)[0] = 0xFFFF
    c = compare_output("y", a, gn, np.array([np.nan, 1.0], np.float16), "float16")
    assert not c.passed and "unwritten" in c.reason


# ---- 2. conditioning vs kernel fault ----------------------------------------------------------------------------

@needs_gxx
def test_a_pass_by_the_floored_rule_says_why_the_plain_mare_does_not_decide():
    """An fp32 output whose one tiny element (1e-8 beside values near 1) the kernel writes as 0: plain MARE 0.09
    (its relative error, |e| / (|g| + 1e-7)) is over 10 Th, the floored rule passes it, and the note says the worst
    relative errors sit at elements far below the output's scale (a new user read the bare PASS beside MARE 0.73 as a
    contradiction); a pass by the plain rule has no such note."""
    from opgen.check.compare import compare_output

    g = np.array([1.0, 0.5, 1e-8, -2.0])
    a = np.array([1.0, 0.5, 0.0, -2.0], np.float32)
    c = compare_output("y", a, g, a, "float32")
    assert c.passed and c.rule == "floored" and abs(c.mare - 1e-8 / 1.1e-7) < 1e-12
    assert c.note.startswith("plain MARE 0.0909 is over 10 Th (0.00122): the worst relative errors are at elements "
                             "far below the output's largest |golden|")
    c = compare_output("y", g.astype(np.float32), g, a, "float32")
    assert c.passed and c.rule == "plain" and c.note == ""


def test_two_element_rows_are_a_conditioning_limit_not_a_kernel_fault():
    """AdaLayerNormGrad fp32, H = 2, seed 0: pd_x against float64 autograd (tests/oracles.py) has MERE 0.0104,
    MARE 0.213 (> Th = 1.22e-4) in the kernel and in the device interpretation alike (kernel == device bit for bit):
    rule "conditioning". A kernel 0.1 % off fails ("less accurate than it")."""
    from oracles import ada_layer_norm_grad

    res = run_check("AdaLayerNormGrad", dims={"Bd": (2,), "S": 16, "H": 2}, dtypes={"T": "float32", "U": "float32"},
                    progress=False)
    i = res.inputs
    ref = ada_layer_norm_grad(i["dy"], i["x"], i["rstd"], i["mean"], i["scale"], i.get("gamma"), i.get("beta"))["pd_x"]
    k = res.arrays["pd_x"]
    mere, mare = mere_mare(k, ref)
    assert mere > TH32 and mare > 10 * TH32 and abs(mere - 0.0104) < 5e-4 and abs(mare - 0.213) < 5e-3
    assert np.all(np.abs(ref.sum(-1)) <= 1e-2 * np.abs(ref).max(-1))   # each row is ~[v, -v]: it cancels
    c = res.outputs["pd_x"]
    assert res.passed and c.passed and c.rule == "conditioning"
    assert "not a kernel fault" in c.note and "bit for bit" in c.note and c.device["mismatches"] == 0
    assert not c.device["device_passed"]
    from opgen.interp import interpret

    dev = interpret("AdaLayerNormGrad", i, {}, {"T": "float32", "U": "float32"}, "device")["pd_x"]
    wrong = compare_output("pd_x", (k * (1 + 1e-3)).astype(np.float32), ref, dev, "float32")
    assert not wrong.passed and "less accurate than it" in wrong.reason and "RMSE" in wrong.reason


def test_a_kernel_that_fails_where_the_device_passes_is_named_a_fault():
    """Well-conditioned values: the device result (fp32 rounding of g) passes, a kernel 0.5 % off fails and the
    reason says it is the kernel's error."""
    g = np.random.default_rng(1).standard_normal(512)
    dev = g.astype(np.float32)
    c = compare_output("y", (g * 1.005).astype(np.float32), g, dev, "float32")
    assert not c.passed and "the device-mode interpretation meets the criteria" in c.reason
    assert "kernel's error" in c.reason and c.device["device_passed"]


# ---- 4. NSA grad, q and k x30: which side is right ----------------------------------------------------------------

NSA_DIMS = {"T1": 4, "T2": 64, "N1": 2, "N2": 1, "D": 16, "Dv": 16, "CNT": 2, "BS": 16, "Bn": 2}


def _nsa_x30_inputs():
    """NsaSelectedAttentionGrad inputs (seed 0) with query and key scaled x30 in fp16, attentionOut and the softmax
    statistics of the scaled forward (device mode, as the spec's example makes them)."""
    from opgen.dsl.examples import random_inputs
    from opgen.interp import interpret
    from opgen.registry import load_spec

    z = random_inputs(load_spec("NsaSelectedAttentionGrad"), NSA_DIMS, {}, {}, 0)
    for k in ("query", "key"):
        z[k] = (z[k].astype(np.float32) * 30).astype(np.float16)
    fwd = interpret("NsaSelectedAttention", {
        "query": z["query"], "key": z["key"], "value": z["value"], "topk_indices": z["topkIndices"],
        "actual_seq_qlen": z["actualSeqQLen"], "actual_seq_kvlen": z["actualSeqKVLlen"]},
        {"scale_value": 1.0, "head_num": 2, "input_layout": "TND", "selected_block_size": 16,
         "selected_block_count": 2}, {"T": "float16"})
    z["attentionOut"], z["softmaxMax"], z["softmaxSum"] = (fwd["attention_out"], fwd["softmax_max"],
                                                           fwd["softmax_sum"])
    return {k: v for k, v in z.items() if v is not None}


@needs_gxx
def test_nsa_grad_q_k_x30_dq_is_noise_around_an_exact_zero():
    """The exact dq is 0 (|dq| < 1e-90, float64 autograd); kernel and device both hold ~2e-5 of noise, differing by
    about twice the output's magnitude. Verdict: conditioning. An error of 1e-4 (5x the output, but below the old
    absolute small-value bound Th (1 + |g|) ~ 9.8e-4) fails: the bound is capped at the output's own scale."""
    from oracles import nsa_selected_attention_grad

    from opgen.interp import interpret

    z = _nsa_x30_inputs()
    attrs = {"selectedBlockSize": 16, "selectedBlockCount": 2, "headNum": 2}
    ref = nsa_selected_attention_grad(z["query"], z["key"], z["value"], z["attentionOut"], z["attentionOutGrad"],
                                      z["softmaxMax"], z["softmaxSum"], z["topkIndices"], z["actualSeqQLen"],
                                      z["actualSeqKVLlen"], scale_value=1.0, selected_block_size=16)
    res = run_check("NsaSelectedAttentionGrad", z, attrs, progress=False)
    dev = interpret("NsaSelectedAttentionGrad", z, attrs, {}, "device")
    for name in ("dq", "dk"):
        k, d, g = res.arrays[name].astype(np.float64), dev[name].astype(np.float64), ref[name]
        assert np.abs(g).max() < 1e-90                     # exact: a one-hot softmax has no gradient
        assert 5e-6 < np.abs(k).max() < 5e-5 and 5e-6 < np.abs(d).max() < 5e-5
        assert np.abs(k - d).max() > 1.5 * np.abs(k).max()  # opposite-signed noise: neither side is right
        c = res.outputs[name]
        assert c.passed and c.rule == "conditioning", (name, c.rule, c.reason)
        assert small_value_failure(k, g, "float16") is not None   # no longer passes as small-value
    assert res.outputs["dv"].passed and res.outputs["dv"].rule == "plain"
    # a wrong kernel: the true dq plus 1e-4 of alternating sign
    d, g = dev["dq"], ref["dq"]
    err = 1e-4 * np.where(np.arange(g.size).reshape(g.shape) % 2 == 0, 1.0, -1.0)
    wrong = (g + err).astype(np.float16)
    assert np.all(np.abs(wrong - g) <= THRESHOLD["float16"] * (1 + np.abs(g)))   # the old bound would pass it
    c = compare_output("dq", wrong, g, d, "float16", rounded_intermediate=True)
    assert not c.passed and "less accurate than it" in c.reason


# ---- 3. doubles in the aclnn case runner ------------------------------------------------------------------------

READER_MAIN = r"""
#include <cstdint>
#include <cstdio>
#include <cstring>
#include "runtime.h"
int main()
{
    while (CaseLine* line = NextCaseLine()) {
        CaseLine& in = *line;
        const double a = ReadDouble(in);
        const int64_t b = ReadInt(in);
        if (ReadFailed(in)) {
            ReportReadError();
            continue;
        }
        uint64_t bits;
        std::memcpy(&bits, &a, 8);
        std::printf("%016llx %lld\n", static_cast<unsigned long long>(bits), static_cast<long long>(b));
    }
}
"""

DOUBLES = [float("nan"), float("inf"), float("-inf"), 1e308, -1.7976931348623157e308, 5e-324, 2.2250738585072014e-308,
           1e-310, -0.0, 0.1, 1.0 / 3.0, 1e-5]


@needs_gxx
def test_case_reader_round_trips_every_double_and_rejects_malformed_tokens(tmp_path):
    """encode_call writes float.hex(); ReadDouble (strtod over the whole token) gets the same 64 bits back for
    nan, ±inf, the largest doubles, subnormals, -0.0; a decimal literal parses too; a malformed double, an
    out-of-range int64, a missing or an extra token is reported (status -1), not read as 0."""
    import struct

    cpp = ROOT / "opgen" / "check" / "cpp"
    (tmp_path / "main.cpp").write_text(READER_MAIN)
    exe = tmp_path / "reader"
    r = subprocess.run([GXX, "-std=c++17", "-O0", f"-I{ROOT / 'opgen' / 'emu' / 'include'}", f"-I{cpp}", str(cpp / "runtime.cpp"),
                        str(tmp_path / "main.cpp"), "-o", str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    good = [f"{v.hex()} 7" for v in DOUBLES] + ["1e308 -9223372036854775808", "2.5 0"]
    bad = ["abc 1", "1.5x 1", "nan", "1.0 99999999999999999999", "1.0 2 3", "0x1p+1 1.5"]
    out = subprocess.run([str(exe)], input="\n".join(good + bad) + "\n", capture_output=True, text=True,
                         timeout=30).stdout.splitlines()
    assert len(out) == len(good) + len(bad)
    for v, line in zip(DOUBLES, out):
        want = struct.unpack("<Q", struct.pack("<d", v))[0]
        bits, n = line.split()
        assert (int(bits, 16) == want or (v != v and (int(bits, 16) >> 52) & 0x7FF == 0x7FF)) and n == "7", (v, line)
    assert out[len(DOUBLES)] == f"{struct.unpack('<Q', struct.pack('<d', 1e308))[0]:016x} -9223372036854775808"
    assert out[len(DOUBLES) + 1].startswith("4004000000000000 0")
    msgs = out[len(good):]
    assert all(m.startswith("-1\tcase runner: ") for m in msgs), msgs
    assert "'abc' is not a double" in msgs[0] and "'1.5x' is not a double" in msgs[1]
    assert "missing integer token" in msgs[2] and "'99999999999999999999' is not a 64-bit integer" in msgs[3]
    assert "unexpected token '3'" in msgs[4] and "'1.5' is not a 64-bit integer" in msgs[5]


@needs_gxx
def test_scale_value_nan_inf_huge_reach_the_kernel_and_the_comparison_decides():
    """Every hostile scaleValue passes the emitted aclnn layer (no CANN rule on it in the reference) with the
    other parameters read in place (no "inputLayout ... got ''"); a runner line with a malformed double raises."""
    from opgen.check.run import aclnn_runner, aclnn_verdicts
    from opgen.check.aclnn import run_runner
    from opgen.check.aclnn import call_attrs, encode_call
    from opgen.dsl.examples import implied_attrs, random_inputs
    from opgen.registry import load_spec

    spec = load_spec("NsaSelectedAttentionGrad")
    z = random_inputs(spec, NSA_DIMS, {}, {}, 0)
    attrs = implied_attrs(spec, NSA_DIMS, {})
    calls = [(z, {**attrs, "scaleValue": v}, {}) for v in DOUBLES]
    assert aclnn_verdicts(spec, calls) == [(0, "")] * len(DOUBLES)
    assert aclnn_verdicts(spec, [(z, {**attrs, "inputLayout": "BSH"}, {})])[0][0] == 161002
    m, runner = aclnn_runner(spec)
    line = encode_call(m, z, call_attrs(spec, z, attrs), {"dq": ("float16", (4, 2, 16)), "dk": ("float16", (64, 1, 16)),
                                                      "dv": ("float16", (64, 1, 16))})
    toks = line.split(" ")
    toks[11] = "0x1p+0garbage"                     # scaleValue (public parameter 11)
    with pytest.raises(OpgenError, match="could not read the call .*'0x1p\\+0garbage' is not a double"):
        run_runner(runner, [" ".join(toks)])
    # nan goes through to the kernel: every dq/dk element NaN in exact math, matched as special values
    res = run_check(spec, dims=NSA_DIMS, attrs={"scaleValue": "nan"}, progress=False)
    assert res.passed and res.outputs["dq"].rule == "special-values"
    assert np.isnan(res.arrays["dq"].astype(np.float32)).all()


# ---- 5. messages ------------------------------------------------------------------------------------------------

def _one_error_line(rc, err):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("opgen: error: "), err
    assert "Warning" not in err and "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("args, want", [
    (["--dims", "Bd=2,S=4,H=8", "--seed", "-1"], "--seed: must be a non-negative integer (a NumPy random seed), got -1"),
    (["--dims", "Bd=2,S=,H=8"], "--dims: S: no value (a dim takes one integer, e.g. S=4)"),
    (["--dims", "Bd=2,S=2x3,H=8"], "--dims: S is one dim, not a group: give one integer, got 2x3"),
    (["--dims", "Bd=2,S=-1,H=8"], "--dims: S: -1 is negative (dims are sizes, >= 0)"),
    (["--dims", "Bd=2,S=4,H=8,S=5"], "--dims: S is given twice"),
])
def test_dims_and_seed_messages_name_the_option_and_rule(args, want, tmp_path):
    """One line naming the option and the rule (interpret; check shares random_inputs)."""
    line = _one_error_line(*_cli("interpret", "AdaLayerNormV2", *args, "--out", str(tmp_path / "o.npz"))[::2])
    assert line == f"opgen: error: {want}"


def test_seed_message_from_check_too():
    """`opgen check --seed -1` names --seed (it used to be reported as a --dims error)."""
    rc, _, err = _cli("check", "AdaLayerNormV2", "--dims", "Bd=2,S=4,H=8", "--seed", "-1")
    assert _one_error_line(rc, err) == ("opgen: error: --seed: must be a non-negative integer (a NumPy random seed), "
                                        "got -1")


@pytest.mark.parametrize("dims, param, rule", [
    ("CNT=2,BS=24", "selectedBlockSize", "BS=24 must be a multiple of 16"),
    ("CNT=64,BS=16,T2=2048", "topkIndices", "CNT=64 must be <= 32"),
])
def test_nsa_grad_dims_errors_name_the_grad_parameters(dims, param, rule, tmp_path):
    """The grad's example runs the forward; its errors are renamed to the grad's parameters (selectedBlockSize,
    topkIndices, not selected_block_size / topk_indices) and say the rule is the forward's."""
    base = dict(x.split("=") for x in "T1=4,T2=64,N1=2,N2=1,D=16,Dv=16,Bn=2".split(","))
    base.update(dict(x.split("=") for x in dims.split(",")))
    text = ",".join(f"{k}={v}" for k, v in base.items())
    line = _one_error_line(*_cli("interpret", "NsaSelectedAttentionGrad", "--dims", text, "--out",
                                 str(tmp_path / "o.npz"))[::2])
    assert line.startswith(f"opgen: error: {param}: {rule}") and "_" not in line.split(":")[2]
    assert "a rule of NsaSelectedAttention" in line


def test_no_warning_text_for_hostile_values(tmp_path):
    """A scale beyond float32 (the device cast overflows) and a complex npz print no RuntimeWarning /
    ComplexWarning: the first runs (its outputs carry the infs), the second is one clean error."""
    d = "T1=4,T2=64,N1=2,N2=1,D=16,Dv=16,CNT=2,BS=16,Bn=2"
    rc, _, err = _cli("interpret", "NsaSelectedAttentionGrad", "--dims", d, "--attr", "scaleValue=1e39", "--out",
                      str(tmp_path / "o.npz"), "-q")
    assert rc == 0 and err == ""
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "c.npz", x=rng.standard_normal((2, 4, 8)).astype(np.complex64),
             scale=np.ones((2, 8), np.float32), shift=np.zeros((2, 8), np.float32))
    rc, _, err = _cli("interpret", "AdaLayerNormV2", "--inputs", str(tmp_path / "c.npz"), "--out",
                      str(tmp_path / "o.npz"))
    assert _one_error_line(rc, err) == ("opgen: error: --inputs: x: array dtype complex64 is not a real numeric dtype "
                                        "(bool, int, uint, float or bfloat16)")   # refused when the npz is read


@needs_gxx
def test_no_complex_warning_from_check(tmp_path):
    """`opgen check` with a complex input: one clean refusal when the npz is read (no ComplexWarning first)."""
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "c.npz", x=rng.standard_normal((2, 4, 8)).astype(np.complex128),
             scale=np.ones((2, 8)), shift=np.zeros((2, 8)))
    rc, _, err = _cli("check", "AdaLayerNormV2", "--inputs", str(tmp_path / "c.npz"))
    lines = [ln for ln in err.splitlines() if ln.startswith("opgen: ") and "building" not in ln]
    assert rc == 2 and "Warning" not in err and len(lines) == 1
    assert lines[-1].startswith("opgen: error: --inputs: x: array dtype complex128 is not a real numeric dtype")


def test_lossless_conversion_rule_of_the_case_runner():
    """opgen.check.aclnn._lossless decides whether an array keeps its values in the declared dtype (then the device
    tensor gets that dtype): integral floats into int32 yes, 0.5 or 2**40 no, a complex array never and without a
    ComplexWarning (the CLI refuses complex npz earlier, so this path is only reached from the Python API)."""
    import warnings

    from opgen.check.aclnn import _lossless
    from opgen.ir.dtypes import DType

    assert _lossless(np.array([1.0, -3.0, 7.0]), DType.i32)
    assert not _lossless(np.array([0.5]), DType.i32)
    assert not _lossless(np.array([2.0 ** 40]), DType.i32)
    assert _lossless(np.array([0.5, np.nan], np.float32), DType.f16)       # both exact in fp16
    assert not _lossless(np.array([1.0 + 2 ** -12], np.float32), DType.f16)  # needs 12 mantissa bits
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not _lossless(np.array([1 + 0j, 2 + 0j]), DType.f32)


def test_an_integer_output_is_reported_by_the_elements_that_differ():
    """An int8 output (a quantised code) is judged element by element (compare._integer_verdict); `opgen check`'s
    line says how many elements differ from device mode instead of relative errors of codes against float64 values
    (nu13: "mere 178, mare 1e+07" beside a PASS). Float outputs keep their metrics."""
    from types import SimpleNamespace

    from opgen.check.report import format_text

    exact = np.array([1.4, -2.6, 3.5, 127.0, 0.2], np.float64)
    device = np.array([1, -3, 4, 127, 0], np.int8)
    kernel = np.array([1, -3, 3, 127, 0], np.int8)   # one element off device mode (4) and exact mode (3.5)
    c = compare_output("y", kernel, exact, device, "int8")
    f = compare_output("s", np.float32([1.0, 2.0]), np.float64([1.0, 2.0]), np.float32([1.0, 2.0]), "float32")
    res = SimpleNamespace(op="Q", soc="ascend910b1", variant="quick", block_dim=1, tiling_key=1, workspace_bytes=0,
                          tiling_ok=True, launched=True, arrays={}, outputs={"y": c, "s": f}, gm={}, faults=[],
                          traps=[], passed=c.passed and f.passed, failed_outputs=lambda: [])
    text = format_text(res)
    line = next(x for x in text.splitlines() if x.strip().startswith("y "))
    assert "int8: 1 elements differ from device mode" in line and "mere" not in line, line
    assert "mere" in next(x for x in text.splitlines() if x.strip().startswith("s ")), text


ROUNDED_OUTPUT_SPEC = '''
from opgen.dsl import A2, OpSpec, bf16, f32
spec = OpSpec("AddRmsLike", aclnn="aclnnAddRmsLike", socs=(A2,))
R, H = spec.dim("R"), spec.dim("H")
(T,) = spec.dtype_vars("T")
spec.input("x1", T, [R, H])
spec.input("x2", T, [R, H])
spec.output("x", T, [R, H])
spec.output("rms", f32, [R, 1])
spec.output("rms_of_sum", f32, [R, 1])
spec.dtypes((T,), [(bf16,)])
@spec.body
def _(b, x1, x2):
    s = x1.f32() + x2.f32()
    x = s.cast(T, "rint")
    xf = x.f32()
    return {"x": x, "rms": (xf * xf).mean(-1, keepdims=True), "rms_of_sum": (s * s).mean(-1, keepdims=True)}
'''


def test_an_output_rounded_by_the_op_taints_what_reads_it(tmp_path):
    """A cast rounding to T whose result is an output AND read again (AddRmsNormDynamicQuant's x = x1 + x2 in T, its
    rms and scales computed from the rounded x; nu13 saw "conditioning limit" instead): what reads it is judged by
    the rounded-intermediate rule, the output itself (compared as rounded) and a value computed before the cast
    are not."""
    from opgen.check.compare import rounded_intermediate_outputs
    from opgen.registry import load_spec

    p = tmp_path / "add_rms_like.py"
    p.write_text(ROUNDED_OUTPUT_SPEC)
    spec = load_spec(str(p))
    assert rounded_intermediate_outputs(spec.graph(spec.keys()[0])) == {"rms"}
