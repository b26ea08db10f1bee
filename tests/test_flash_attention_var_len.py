"""FlashAttentionVarLenScore (examples/specs/flash_attention_var_len_score.py): dense attention over batches stored
concatenated (TND, cumulative actual_seq_qlen / actual_seq_kvlen) through the attention family, against float64
NumPy math per batch written here.

The oracle runs each batch b on its own: query rows cu_q[b - 1] .. cu_q[b] - 1 against key rows cu_kv[b - 1] ..
cu_kv[b] - 1 as one BNSD attention of B = 1 (tests/test_flash_attention.oracle: S = scale Q Kᵀ, leftUpCausal within
the batch, max / sum / P V in float64); its error bounds are that module's (test_flash_attention.assert_close), the
sum's taking the longest batch's key count.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_flash_attention import assert_close, oracle  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "examples" / "specs" / "flash_attention_var_len_score.py"
NP_T = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def per_batch_oracle(q, k, v, cu_q, cu_kv, scale: float, causal: bool) -> dict:
    """float64 outputs [T1, N1, 8] / [T1, N1, D] and the bound helpers of every batch's own BNSD attention (module
    doc), stitched back into the token-major TND layout."""
    t1, n1, d = q.shape
    want = {"softmax_max": np.zeros((t1, n1, 8)), "softmax_sum": np.zeros((t1, n1, 8)),
            "attention_out": np.zeros((t1, n1, d)), "abs_scores": np.zeros((t1, n1)), "abs_out": np.zeros((t1, n1, d))}
    bq, bk = np.concatenate([[0], cu_q]), np.concatenate([[0], cu_kv])
    for b in range(len(cu_q)):
        qs, ks = slice(bq[b], bq[b + 1]), slice(bk[b], bk[b + 1])
        o = oracle(q[None, qs].transpose(0, 2, 1, 3), k[None, ks].transpose(0, 2, 1, 3),
                   v[None, ks].transpose(0, 2, 1, 3), scale, causal)
        for name in ("softmax_max", "softmax_sum", "attention_out", "abs_out"):
            want[name][qs] = o[name][0].transpose(1, 0, 2)
        want["abs_scores"][qs] = o["abs_scores"][0].T
    return want


def make_inputs(rng, lens_q, lens_kv, n1, n2, d, dtype) -> dict:
    """T-representable query / key / value (as float32) and the cumulative ends of the given batch lengths."""
    t1, t2 = sum(lens_q), sum(lens_kv)

    def data(*shape):
        return rng.standard_normal(shape).astype(NP_T[dtype]).astype(np.float32)

    return {"query": data(t1, n1, d), "key": data(t2, n2, d), "value": data(t2, n2, d),
            "actual_seq_qlen": np.cumsum(lens_q).astype(np.int64), "actual_seq_kvlen": np.cumsum(lens_kv).astype(np.int64)}


# ---------------------------------------------------------------------------------------------- the spec, the oracle
def test_the_spec_interprets_as_per_batch_attention():
    """The spec's exact interpretation equals the per-batch float64 oracle (batches of 1, 16, 37 query tokens, GQA,
    causal and not): the mask keeps each token to its own batch's keys."""
    from opgen.interp import interpret

    rng = np.random.default_rng(3)
    a = make_inputs(rng, [1, 16, 37], [5, 16, 40], 4, 2, 16, "float16")
    for causal in (False, True):
        x = dict(a, atten_mask=np.zeros((4, 4), bool) if causal else None)
        got = interpret(str(SPEC), x, {"input_layout": "TND", "sparse_mode": 2 if causal else 0, "scale_value": 0.4,
                                  "head_num": 4},
                        {"T": "float16", "M": "bool"}, mode="exact")
        want = per_batch_oracle(a["query"], a["key"], a["value"], a["actual_seq_qlen"], a["actual_seq_kvlen"], 0.4,
                                causal)
        for name in ("softmax_max", "softmax_sum", "attention_out"):
            np.testing.assert_allclose(np.asarray(got[name], np.float64), want[name], rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------------- recognition
def _graph(src: str, tmp_path, attrs: dict, present=()):
    """The kernel-stage text of spec text `src` (opgen graph --stage kernel), and the CompletedProcess."""
    from inproc import cli

    p = tmp_path / "varlen.py"
    p.write_text(src)
    args = ["graph", str(p), "--stage", "kernel"]
    for k, val in attrs.items():
        args += ["--attr", f"{k}={val}"]
    for name in present:
        args += ["--present", name]
    return cli(*args)


def test_the_batch_mask_is_read_off_its_values():
    """attnprog.batch_mask_kind on the spec's graph: the `ne` of the two tokens' batches is the batch mask, its `or`
    with the in-batch future keys the causal batch mask, the in-batch comparison alone neither (a causal mask over
    the concatenated tokens would leak into other batches); with the cumulative arrays swapped nothing matches."""
    from opgen.kernel.attnprog import batch_mask_kind
    from opgen.passes.pipeline import optimize
    from opgen.registry import load_spec

    spec = load_spec(str(SPEC))
    key = next(k for k in spec.keys() if 2 in k.static and any(k.present))   # sparse_mode 2, atten_mask present
    #                                   (the one optional input a key can have: the others accept "absent")
    g = optimize(spec.graph(key))
    bools = {n.op: n.result.name for n in g.nodes if n.op in ("ne", "gt", "or")}
    cu = ("actual_seq_qlen", "actual_seq_kvlen", "T1", "T2", "Bn")
    assert batch_mask_kind(g, bools["ne"], cu) == "batch"
    assert batch_mask_kind(g, bools["or"], cu) == "batchcausal"
    assert batch_mask_kind(g, bools["gt"], cu) == ""
    assert batch_mask_kind(g, bools["or"], (cu[1], cu[0], *cu[2:])) == ""


NSA_STYLE = '''
    tok1, tok2 = b.iota(T1), b.iota(T2)
    zero = b.const(0, i64).broadcast_to([1])
    starts_q = b.concat([zero, actual_seq_qlen.slice(0, 0, Bn - 1)], 0)
    starts_kv = b.concat([zero, actual_seq_kvlen.slice(0, 0, Bn - 1)], 0)
    bq = (actual_seq_qlen.reshape([1, Bn]) <= tok1.reshape([T1, 1])).cast(i64).sum(-1, keepdims=False)
    bk = (actual_seq_kvlen.reshape([1, Bn]) <= tok2.reshape([T2, 1])).cast(i64).sum(-1, keepdims=False)
    il = tok1 - b.gather(starts_q, bq, 0)
    jl = tok2 - b.gather(starts_kv, bk, 0)
    keep = bq.reshape([T1, 1]).eq(bk.reshape([1, T2])) & (jl.reshape([1, T2]) <= il.reshape([T1, 1]))
'''


def test_a_batch_mask_written_another_way_lowers_the_same(tmp_path):
    """The keep form written as NSA's token layout does (batch starts gathered, where(kept, scores, fill)) lowers to
    the same program as the spec's (the causal mask within the batch, no other mask)."""
    src = SPEC.read_text()
    body_start = src.index("    bq, q0 = token_batches")
    body_end = src.index("    qg = query.permute")
    edited = (src[:body_start] + NSA_STYLE + src[body_end:]).replace(
        "scores = b.where(masked.reshape([1, 1, T1, T2]), -FLT_MAX, scores)",
        "scores = b.where(keep.reshape([1, 1, T1, T2]), scores, -FLT_MAX)")
    attrs = {"input_layout": "TND", "sparse_mode": 2}
    mine = _graph(edited, tmp_path, attrs, ["atten_mask"])
    assert mine.returncode == 0, mine.stderr
    base = _graph(src, tmp_path, attrs, ["atten_mask"])
    def masks(text):   # the mask lines without value names and spec lines
        return [re.sub(r"%\w+|@.*", "", ln) for ln in text.splitlines() if "mask(" in ln or "causal" in ln]

    assert len(masks(mine.stdout)) == 2 and masks(mine.stdout) == masks(base.stdout)
    assert "dense keys TND" in mine.stdout


@pytest.mark.parametrize("what, old, new, msg", [
    ("no batch mask", "scores = b.where(masked.reshape([1, 1, T1, T2]), -FLT_MAX, scores)", "",
     "needs the mask that keeps each query token to its own batch's keys"),
    ("a zero fill", "scores = b.where(masked.reshape([1, 1, T1, T2]), -FLT_MAX, scores)",
     "scores = b.where(masked.reshape([1, 1, T1, T2]), 0.0, scores)", "must fill the other batches' scores"),
])
def test_a_tnd_attention_without_the_batch_mask_is_refused(what, old, new, msg, tmp_path):
    """Without the mask that keeps a token to its batch, or with one whose fill leaves the other batches' keys a
    probability, the kernel (which visits only the batch's keys) would compute another function: refused in one
    line naming the rule."""
    src = SPEC.read_text()
    assert old in src
    r = _graph(src.replace(old, new), tmp_path, {"input_layout": "TND"})
    assert r.returncode != 0 and msg in r.stderr, r.stderr


def test_a_window_beyond_the_small_probes_is_not_the_causal_batch_mask(tmp_path):
    """A mask that also drops keys more than 24 positions back (a sliding window) equals the causal batch mask on
    batches shorter than 25, so the probes grow past every constant the mask computes with
    (attnprog._probes_past_constants): the window is seen and the spec refused rather than lowered as plain causal
    (rev8 reproduced the wrong lowering at T1 = T2 = 128); without the window the same spelling lowers."""
    src = SPEC.read_text()
    body_start = src.index("    bq, q0 = token_batches")
    body_end = src.index("    qg = query.permute")
    window = NSA_STYLE + "    keep = keep & ((il.reshape([T1, 1]) - jl.reshape([1, T2])) < 24)\n"
    edited = (src[:body_start] + window + src[body_end:]).replace(
        "scores = b.where(masked.reshape([1, 1, T1, T2]), -FLT_MAX, scores)",
        "scores = b.where(keep.reshape([1, 1, T1, T2]), scores, -FLT_MAX)")
    r = _graph(edited, tmp_path, {"input_layout": "TND", "sparse_mode": 2}, ["atten_mask"])
    assert r.returncode != 0 and "needs the mask that keeps each query token to its own batch's keys" in r.stderr, \
        (r.returncode, r.stderr)


# ---------------------------------------------------------------------------------------------- kernels
CASES = [   # (id, batch query lengths, batch key lengths, N1, N2, D, dtype, causal, scale)
    ("g2_f16_len1_tail", [1, 16, 37], [5, 16, 40], 4, 2, 16, "float16", False, 0.3),
    ("g2_causal_f16_len1_tail", [1, 16, 37], [5, 16, 40], 4, 2, 16, "float16", True, 0.3),
    ("mha_causal_f16_an_idle_core", [2, 3], [3, 20], 1, 1, 16, "float16", True, 0.5),
    ("mha_causal_bf16_qblocks", [3, 150, 1, 53], [3, 150, 17, 60], 2, 2, 32, "bfloat16", True, 0.125),
    ("g4_bf16_keys_over_items", [40, 1, 7], [700, 9, 33], 4, 1, 16, "bfloat16", False, 0.1),
]


@pytest.fixture(scope="module")
def gen(run_shared):
    """The spec's package generated once per run into a tree the xdist workers share."""
    from opgen.codegen import write_ops

    return run_shared("flash-attention-var-len", lambda out: write_ops([str(SPEC)], out))


def _check(case, gen, engine):
    from opgen.check import run_check

    _id, lq, lk, n1, n2, d, dtype, causal, scale = case
    a = make_inputs(np.random.default_rng(len(lq) + sum(lk)), lq, lk, n1, n2, d, dtype)
    if causal:
        a["atten_mask"] = np.zeros((4, 4), bool)
    r = run_check(str(SPEC), a, {"input_layout": "TND", "sparse_mode": 2 if causal else 0, "scale_value": scale,
                                 "head_num": n1},
                  {"T": dtype, "M": "bool"}, gen_dir=gen, progress=False, engine=engine)
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    want = per_batch_oracle(a["query"], a["key"], a["value"], a["actual_seq_qlen"], a["actual_seq_kvlen"], scale,
                            causal)
    assert_close(r.arrays, want, dtype, d, max(lk))


@pytest.mark.parametrize("case", CASES[:3], ids=[c[0] for c in CASES[:3]])
def test_kir_kernel_matches_the_per_batch_oracle(case, gen):
    """The kernel's Kernel IR (--engine kir) within the per-batch float64 bounds: batches of 1, 16 and 37 query tokens
    (a batch of one token, a batch not a multiple of the 16-key block), GQA, causal and not; 5 units on the 6 AI
    Cores the tiling launches (it bounds the units without reading the batches' lengths: one core has none)."""
    _check(case, gen, "kir")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_emulated_kernel_matches_the_per_batch_oracle(case, gen):
    """The emitted C++ on the emulation (zero faults, opgen's comparison) within the per-batch float64 bounds: the
    batches above; query blocks of several rows with tails at each batch's end and units over the AI Cores (T1 207,
    no GQA, bf16, causal); a batch of 700 keys over several online softmax items beside batches of 9 and 33 (G 4)."""
    if shutil.which("g++") is None:
        pytest.skip("g++ not available")
    _check(case, gen, "emu")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES[3:], ids=[c[0] for c in CASES[3:]])
def test_kir_kernel_matches_the_per_batch_oracle_at_more_tokens(case, gen):
    """--engine kir on the larger cases (query blocks with tails, keys over several items)."""
    _check(case, gen, "kir")


# ---------------------------------------------------------------------------------------------- the backward
GRAD_SPEC = ROOT / "examples" / "specs" / "flash_attention_unpadding_score_grad.py"


def tnd_grad_case(lens_q, lens_kv, n1, n2, d, dtype, causal, scale, seed=0):
    """(inputs, want, bound) of the TND backward: each batch a B = 1 BSND case of tests/test_flash_attention_grad
    (_case: the float64 torch autograd gradients, the saved statistics of its float64 forward and its derived error
    bounds), stitched into the concatenated TND layout."""
    from test_flash_attention_grad import _case

    rng = np.random.default_rng(seed)
    parts = [_case(rng, dict(B=1, N1=n1, N2=n2, S1=a, S2=b, D=d), dtype, 2 if causal else 0, scale, "BSND")
             for a, b in zip(lens_q, lens_kv)]
    inputs = {n: np.concatenate([p[0][n][0] for p in parts]) for n in ("query", "key", "value", "dy", "attention_in")}
    for n in ("softmax_max", "softmax_sum"):   # [1, N1, S1, 8] -> [S1, N1, 8]
        inputs[n] = np.concatenate([p[0][n][0].transpose(1, 0, 2) for p in parts])
    inputs = {k: x.astype(np.float32) if x.dtype == ml_dtypes.bfloat16 else x for k, x in inputs.items()}
    inputs["actual_seq_qlen"] = np.cumsum(lens_q).astype(np.int64)
    inputs["actual_seq_kvlen"] = np.cumsum(lens_kv).astype(np.int64)
    if causal:
        inputs["atten_mask"] = np.zeros((4, 4), bool)
    want, bound = ({n: np.concatenate([p[j][n][0].transpose(1, 0, 2) for p in parts]) for n in ("dq", "dk", "dv")}
                   for j in (1, 2))
    return inputs, want, bound


GRAD_CASES = [   # (id, batch query lengths, batch key lengths, N1, N2, D, dtype, causal, scale)
    ("g2_f16_len1_tail", [1, 16, 37], [5, 16, 40], 4, 2, 16, "float16", False, 0.3),
    ("g2_causal_f16_len1_tail", [1, 16, 37], [5, 16, 40], 4, 2, 16, "float16", True, 0.3),
    ("mha_causal_bf16_qblocks", [3, 150, 1, 53], [3, 150, 17, 60], 2, 2, 32, "bfloat16", True, 0.125),
]


@pytest.fixture(scope="module")
def grad_gen(run_shared):
    """The backward spec's package generated once per run."""
    from opgen.codegen import write_ops

    return run_shared("flash-attention-unpadding-grad", lambda out: write_ops([str(GRAD_SPEC)], out))


def _grad_check(case, gen, engine, deterministic=False):
    from opgen.check import run_check

    _id, lq, lk, n1, n2, d, dtype, causal, scale = case
    inputs, want, bound = tnd_grad_case(lq, lk, n1, n2, d, dtype, causal, scale, seed=len(lq) + sum(lk))
    r = run_check(str(GRAD_SPEC), inputs, {"scale_value": scale, "head_num": n1, "input_layout": "TND",
                                           "sparse_mode": 2 if causal else 0},
                  {"T": dtype, "M": "bool"}, gen_dir=gen, progress=False, engine=engine, deterministic=deterministic)
    assert not r.faults and not r.traps and r.passed, (r.faults[:3], r.traps[:3],
                                                       {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    for n in ("dq", "dk", "dv"):
        err = np.abs(np.asarray(r.arrays[n], np.float64) - want[n])
        assert np.all(err <= bound[n]), (n, float((err / bound[n]).max()))


@pytest.mark.parametrize("case", GRAD_CASES[:2], ids=[c[0] for c in GRAD_CASES[:2]])
def test_kir_backward_matches_torch_autograd_per_batch(case, grad_gen):
    """The TND backward's Kernel IR (--engine kir) within the per-batch bounds of tests/test_flash_attention_grad
    against float64 torch autograd: batches of 1, 16, 37 tokens, GQA, causal and not."""
    _grad_check(case, grad_gen, "kir")


@pytest.mark.slow
@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("case", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_emulated_backward_matches_torch_autograd_per_batch(case, deterministic, grad_gen):
    """The emitted backward on the emulation, both schedules (the deterministic one: the AI Cores' dK / dV adds in
    turns, rounds from the tiling's bound on the units), within the per-batch bounds; query blocks with tails
    (T1 207, bf16, causal)."""
    if shutil.which("g++") is None:
        pytest.skip("g++ not available")
    _grad_check(case, grad_gen, "emu", deterministic)


def test_the_cumulative_ends_are_checked_by_the_interpreter_and_the_aclnn_layer():
    """The ends the kernel walks to find each batch (opgen.dsl.checks.cumulative_ends, rev8: the examples' rule was a
    local function the aclnn layer only listed as a comment, so bad ends reached the kernel): the interpreter refuses
    a decreasing array and a last end other than T1 / T2 naming the array; both emitted aclnn layers (forward and
    backward) carry the three rules for both arrays as 161002 checks."""
    from opgen.codegen import generate
    from opgen.errors import ValidationError
    from opgen.interp import interpret
    from opgen.registry import load_spec

    a = make_inputs(np.random.default_rng(5), [3, 4], [5, 2], 2, 1, 16, "float16")
    attrs = {"input_layout": "TND", "sparse_mode": 0, "scale_value": 0.5, "head_num": 2}
    for name, bad, rule in (("actual_seq_qlen", [4, 3], "strictly increasing"),
                            ("actual_seq_kvlen", [5, 6], "must equal T2=7")):
        with pytest.raises(ValidationError, match=rf"{name}.*{rule}"):
            interpret(str(SPEC), dict(a, atten_mask=None, **{name: np.asarray(bad, np.int64)}), attrs,
                      {"T": "float16", "M": "bool"}, mode="exact")
    for path in (SPEC, SPEC.parent / "flash_attention_unpadding_score_grad.py"):
        spec = load_spec(str(path))
        (api,) = [t for p, t in generate(spec).items() if p.startswith("op_host/op_api/aclnn_") and p.endswith(".cpp")]
        for arr in ("actualSeqQLenOptional", "actualSeqKvLenOptional"):
            assert f"{arr}: cumulative ends must be strictly increasing and positive, got %s" in api, (path, arr)
            assert f"IsIncreasingPositive(p.{arr})" in api, (path, arr)


# ---------------------------------------------------------------------------------------------- CANN's signatures
# The public parameters of CANN's documents (ops-transformer attention/flash_attention_score/docs/
# aclnnFlashAttentionVarLenScore.md, attention/flash_attention_score_grad/docs/aclnnFlashAttentionUnpaddingScoreGrad.md),
# (C type, name) in order, written out here from those documents.
CANN_FWD = """const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* realShiftOptional,
const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional, const aclTensor* attenMaskOptional,
const aclIntArray* prefixOptional, const aclIntArray* actualSeqQLenOptional, const aclIntArray* actualSeqKvLenOptional,
double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens, int64_t headNum, char* inputLayout,
int64_t innerPrecise, int64_t sparseMode, const aclTensor* softmaxMaxOut, const aclTensor* softmaxSumOut,
const aclTensor* softmaxOutOut, const aclTensor* attentionOutOut, uint64_t* workspaceSize, aclOpExecutor** executor"""
CANN_BWD = """const aclTensor* query, const aclTensor* keyIn, const aclTensor* value, const aclTensor* dy,
const aclTensor* pseShiftOptional, const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional,
const aclTensor* attenMaskOptional, const aclTensor* softmaxMaxOptional, const aclTensor* softmaxSumOptional,
const aclTensor* softmaxInOptional, const aclTensor* attentionInOptional, const aclIntArray* prefixOptional,
const aclIntArray* actualSeqQLenOptional, const aclIntArray* actualSeqKvLenOptional, double scaleValue,
double keepProb, int64_t preTokens, int64_t nextTokens, int64_t headNum, char* inputLayout, int64_t innerPrecise,
int64_t sparseMode, const aclTensor* dqOut, const aclTensor* dkOut, const aclTensor* dvOut, const aclTensor* dpseOut,
uint64_t* workspaceSize, aclOpExecutor** executor"""


@pytest.mark.parametrize("path, api, want", [(SPEC, "aclnnFlashAttentionVarLenScore", CANN_FWD),
                                             (GRAD_SPEC, "aclnnFlashAttentionUnpaddingScoreGrad", CANN_BWD)])
def test_the_emitted_headers_declare_canns_signatures(path, api, want):
    """Both emitted aclnn headers declare <api>GetWorkspaceSize with CANN's parameters: names, C types, order,
    the optional tensors / host arrays opgen does not implement included (tnd2: the API was snake_case OpDef names)."""
    from opgen.codegen import generate
    from opgen.registry import load_spec

    files = generate(load_spec(str(path)))
    (h,) = [t for p, t in files.items() if p.startswith("op_host/op_api/aclnn_") and p.endswith(".h")]
    got = re.search(rf"aclnnStatus {api}GetWorkspaceSize\((.*?)\);", h, re.S).group(1)

    def norm(text):
        return [" ".join(x.split()) for x in text.split(",")]

    assert norm(got) == norm(want)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_the_aclnn_layer_refuses_what_the_kernel_does_not_implement(gen):
    """Through the emitted aclnnFlashAttentionVarLenScore (compiled against the emulation): a valid call launches;
    preTokens / nextTokens / innerPrecise take any value (no effect in sparse modes 0 without a mask and 2, CANN's
    document); a non-null pse / drop mask / padding mask / prefix and a
    keepProb other than 1 are 161002 ACLNN_ERR_PARAM_INVALID naming the public parameter; a null actualSeqQLenOptional
    is 161001; softmaxOutOut may be null or a tensor."""
    from opgen.check.aclnn import run_runner
    from test_aclnn_api import _at, _call, _with_tokens

    m, runner, base, _ = _call(str(SPEC), {"T1": 9, "T2": 21, "N1": 2, "N2": 1, "D": 16, "Bn": 2},
                               attrs={"input_layout": "TND", "head_num": 2}, gen_dir=gen)
    names = ("query", "realShiftOptional", "dropMaskOptional", "paddingMaskOptional", "prefixOptional", "keepProb",
             "preTokens", "nextTokens", "innerPrecise", "softmaxOutOut", "softmaxMaxOut", "actualSeqQLenOptional")
    k = {n: _at(m, n) for n in names}
    q = base[k["query"]]
    assert q == "float16:9,2,16" and base[k["realShiftOptional"]] == "null" and base[k["preTokens"]] == "2147483647"

    def with_(**tok):
        return _with_tokens(base, k, **tok)

    refused = "must be null: not implemented by this kernel"
    cases = [
        (with_(), 0, ""),
        (with_(preTokens="3", nextTokens="0", innerPrecise="2"), 0, ""),
        (with_(softmaxOutOut="float16:9,2,8"), 0, ""),
        (with_(realShiftOptional="float16:9,2,21"), 161002, f"realShiftOptional: {refused} (pse)"),
        (with_(dropMaskOptional="uint8:9,2,21"), 161002, f"dropMaskOptional: {refused} (dropout)"),
        (with_(paddingMaskOptional="float16:9,21"), 161002, f"paddingMaskOptional: {refused} (a padding mask)"),
        (with_(prefixOptional="a:3,4"), 161002, f"prefixOptional: {refused} (the prefix of sparse_mode 6)"),
        (with_(keepProb="0.9"), 161002, "keepProb: must be 1.0"),
        (with_(actualSeqQLenOptional="null"), 161001, ""),
    ]
    got = run_runner(runner, [" ".join(c[0]) for c in cases], launches=True)
    for (tok, code, msg), (rc, text, launches, launched) in zip(cases, got):
        assert rc == code and text.startswith(msg), (code, msg, rc, text)
        assert launches == (1 if code == 0 else 0), (tok, launches)


# ---------------------------------------------------------------------------------------------- tiling by the longest batch
@pytest.mark.parametrize("engine", ["kir", pytest.param("emu", marks=pytest.mark.slow)])
def test_the_tiling_sizes_by_the_longest_batch_not_the_token_count(engine, gen):
    """The TilingFunc reads the host arrays of cumulative ends (ValueDepend, as CANN's does) and sizes query blocks,
    key chunks and items by the longest batch, not by T1 / T2 (tnd2): kv batches of 5, 16, 40 keys (T2 61) and of 40,
    40, 40 (T2 120) share their longest batch, so the same query batches get the same workspace (sized by the item
    keys) and the same AI Cores; with the ends withheld the Python twin sizes by T2 and the first call's workspace
    would be smaller than the second's -- as it was before."""
    from opgen.check import run_check
    from opgen.ir.dtypes import DType
    from opgen.platforms import get_platform
    from opgen.registry import load_spec
    from opgen.tiling.emit import evaluate
    from opgen.tiling.pipeline import kernel_build

    runs = []
    for lk in ([5, 16, 40], [40, 40, 40]):
        a = make_inputs(np.random.default_rng(7), [9, 2, 30], lk, 2, 1, 16, "float16")
        r = run_check(str(SPEC), a, {"input_layout": "TND", "sparse_mode": 0, "scale_value": 0.25, "head_num": 2},
                      {"T": "float16", "M": "bool"}, gen_dir=gen, progress=False, engine=engine)
        assert not r.faults and r.passed, r.faults[:3]
        assert_close(r.arrays, per_batch_oracle(a["query"], a["key"], a["value"], a["actual_seq_qlen"],
                                                a["actual_seq_kvlen"], 0.25, False), "float16", 16, max(lk))
        runs.append(r)
    assert (runs[0].workspace_bytes, runs[0].block_dim) == (runs[1].workspace_bytes, runs[1].block_dim)
    spec = load_spec(str(SPEC))
    t = kernel_build(spec).tiling
    env = {"T1": 41, "T2": 61, "N1": 2, "N2": 1, "D": 16, "Bn": 3, "MS1": 1, "MS2": 1}
    kw = dict(attrs={"input_layout": "TND", "sparse_mode": 0})
    ends = {"actual_seq_qlen": np.cumsum([9, 2, 30]), "actual_seq_kvlen": np.cumsum([5, 16, 40])}
    plat = get_platform("ascend910b1")
    by_ends = evaluate(spec, t.program, t.inputs, env, {"T": DType.f16}, plat, host=ends, **kw)
    by_t = evaluate(spec, t.program, t.inputs, env, {"T": DType.f16}, plat, **kw)
    assert (by_ends["qSeq"], by_ends["kvSeq"], by_ends["blockCount"]) == (30, 40, 3)   # max(lens), ceil(40 / 16)
    assert (by_t["qSeq"], by_t["kvSeq"], by_t["blockCount"]) == (41, 61, 4)


def test_the_tiling_comments_describe_the_dense_key_blocks(gen):
    """The TND forward's key set is dense (every key of the batch in blocks of 16, docs/design.md "Kernel families",
    attention): its TilingFunc and tiling struct describe CNT / BS as key blocks, not NSA's selected blocks of a topk
    input and a block-size attribute, which this op has neither of (the spec: no topk input, no block attribute)."""
    op = next(p for p in Path(gen).iterdir() if (p / "op_host").is_dir() and "var_len" in p.name)
    text = "".join(f.read_text() for f in [*op.glob("op_host/*_tiling.cpp"), *op.glob("op_kernel/*_tiling_data.h")])
    assert "key blocks per (batch, kv head)" in text and "key blocks per unit" in text
    assert "topk" not in text and "selected" not in text


# ---------------------------------------------------------------------------------------------- graph mode: ends checked in the tiling
BAD_ENDS = [   # (query ends, kv ends, the rule broken, by hand from cumulative_ends' rules; T1 = 41, T2 = 61)
    ([9, 5, 41], [5, 21, 61], "actual_seq_qlen: cumulative ends must be strictly increasing and positive"),
    ([9, 9, 41], [5, 21, 61], "actual_seq_qlen: cumulative ends must be strictly increasing and positive"),
    ([9, 11, 40], [5, 21, 61], "actual_seq_qlen: last cumulative end 40 must equal T1=41"),
    ([9, 11, 41], [5, 70, 61], "actual_seq_kvlen: cumulative ends must be strictly increasing and positive"),
    ([9, 11, 41], [5, 21, 100], "actual_seq_kvlen: last cumulative end 100 must equal T2=61"),
]
GOOD_ENDS = ([9, 11, 41], [5, 21, 61])


def test_the_tiling_twin_refuses_bad_cumulative_ends():
    """Graph mode reaches the TilingFunc without the aclnn layer (tnd3): the tiling's Python twin enforces the spec's
    cumulative_ends rules on the host arrays it reads (decreasing, repeated, last != T, past T: refused naming the
    input), sizes good ones by their longest batch (30 queries, 40 keys: by hand), and LongestBatch's own twin gives 0
    (refused by the domain check S1 >= 1) for ends it cannot size from, whatever checks a spec declares."""
    from opgen.errors import OpgenError
    from opgen.ir.dtypes import DType
    from opgen.platforms import get_platform
    from opgen.registry import load_spec
    from opgen.tiling.emit import evaluate, longest_batch
    from opgen.tiling.pipeline import kernel_build

    assert [longest_batch([100], 40), longest_batch([9, 5, 41], 41), longest_batch([-1, 41], 41)] == [0, 0, 0]
    assert [longest_batch([9, 11, 41], 41), longest_batch([5, 21, 61], 61, 16), longest_batch(None, 61)] == [30, 3, 61]
    spec = load_spec(str(SPEC))
    t = kernel_build(spec).tiling
    env = {"T1": 41, "T2": 61, "N1": 2, "N2": 1, "D": 16, "Bn": 3, "MS1": 1, "MS2": 1}

    def run(q, kv):
        return evaluate(spec, t.program, t.inputs, env, {"T": DType.f16}, get_platform("ascend910b1"),
                        attrs={"input_layout": "TND", "sparse_mode": 0},
                        host={"actual_seq_qlen": np.array(q, np.int64), "actual_seq_kvlen": np.array(kv, np.int64)})

    for q, kv, rule in BAD_ENDS:
        with pytest.raises(OpgenError, match=re.escape(rule)):
            run(q, kv)
    got = run(*GOOD_ENDS)
    assert (got["qSeq"], got["kvSeq"]) == (30, 40)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is needed to compile the emitted TilingFunc")
def test_the_emitted_tiling_func_refuses_bad_cumulative_ends(gen, tmp_path):
    """The emitted TilingFunc, compiled with tests/cpp/tiling_driver.cpp (-Wall -Werror against the host emulation)
    and given the host arrays' values (ValueDepend), fails each of BAD_ENDS with GRAPH_FAILED and a log line naming the
    input and the rule (under GE it is the only host code that sees them, tnd3); good ends and ends without values
    (a graph without them) tile."""
    import subprocess

    from opgen.platforms import PLATFORMS

    from gxx import tiling_driver

    op = Path(gen) / "flash_attention_var_len_score"
    exe = tiling_driver(tmp_path / "driver", [op / "op_host" / "flash_attention_var_len_score_tiling.cpp"],
                        op / "op_host")
    plat = PLATFORMS["ascend910b1"]

    def line(q, kv, values=True):
        """Driver input: query [41, 2, 16], key / value [61, 1, 16] f16 (ge::DT_FLOAT16 1), the optional tensors
        absent, the two int64 (ge::DT_INT64 9) host arrays of 3 ends; attributes in OpDef order (scale 0.25,
        keep_prob 1, pre / next 2147483647, head_num 2, "TND", inner_precise 0, sparse_mode 0); outputs f32, f32,
        f16, f16."""
        parts = ["FlashAttentionVarLenScore", str(plat.aiv), str(plat.ub_bytes), "10",
                 "1 1 3 41 2 16", "1 1 3 61 1 16", "1 1 3 61 1 16"] + ["0 0 0"] * 5
        for ends in (q, kv):
            parts.append(f"{2 if values else 1} 9 1 3" + "".join(f" {e}" for e in ends) * values)
        parts += ["8 0.25 1 2147483647 2147483647 2 s:TND 0 0", "4 0 0 1 1"]
        return " ".join(parts)

    lines = [line(q, kv) for q, kv, _rule in BAD_ENDS] + [line(*GOOD_ENDS), line([50, 9, 1], [0, 0, 0], False)]
    out = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    got = out.stdout.splitlines()
    assert got[:len(BAD_ENDS)] == ["fail"] * len(BAD_ENDS) and all(g.startswith("ok ") for g in got[-2:]), got
    for _q, _kv, rule in BAD_ENDS:
        assert rule in out.stderr, (rule, out.stderr)


def test_a_users_own_check_named_like_the_factory_is_not_taken_for_it():
    """The host rules are told by the tag the factory puts on its function (opgen.dsl.checks.host_rule), not by the
    function's name: a user's `cumulative_ends` of their own (here: any positive ends) stays the user's rule -- no
    C++ of opgen's rule is emitted for it -- while the factory's function and a derived spec's wrapped copy of it
    keep the tag."""
    import functools

    from opgen.dsl import checks
    from opgen.tiling.emit import tiling_host_checks

    user = {"np": np}   # the user's own rule at a spec file's top level, spelled like the factory
    exec("def cumulative_ends(name, total_dim):\n"
         "    def fn(arrays, env, attrs):\n"
         "        return None if (np.asarray(arrays[name]) > 0).all() else 'ends must be positive'\n"
         "    return fn\n", user)
    mine = user["cumulative_ends"]("actual_seq_qlen", "T1")
    assert mine.__qualname__ == checks.cumulative_ends("x", "T1").__qualname__   # the same qualified name
    assert checks.host_rule(mine) is None
    theirs = checks.cumulative_ends("actual_seq_qlen", "T1")
    assert checks.host_rule(theirs) == ("cumulative_ends", {"name": "actual_seq_qlen", "total_dim": "T1"})
    assert checks.host_rule(functools.wraps(theirs)(lambda a, e, t: None)) == checks.host_rule(theirs)

    from types import SimpleNamespace

    spec = SimpleNamespace(requirements=[SimpleNamespace(kind="values", kernel=False, fn=f) for f in (mine, theirs)])
    assert [r.fn for r in tiling_host_checks(spec)] == [theirs]   # the user's rule is not the TilingFunc's
