"""FlashAttentionScore (examples/specs/flash_attention_score.py): dense attention forward through the attention
family (a dense key set), against float64 NumPy math written here.

The oracle (`oracle`): S = scale * Q Kᵀ per (batch, query head, kv head = head // G), leftUpCausal masking (key j
after query row s is excluded) under sparse_mode 2, m = max_j S, l = sum_j exp(S - m), O = sum_j exp(S - m) / l V.

Error bounds (derived, not measured): the inputs are T-representable, so a product q_d k_d is exact in fp32 and S
carries only fp32 accumulation over D terms, |dS| <= (D + 2) 2^-24 scale sum_d |q_d k_d| (plus the scale's own
rounding); m inherits that bound. l sums exp(S - m) over S2 keys: a relative error of 2 |dS| (each exponent moves by
at most two |dS|) plus S2 fp32 additions. O: P is rounded to T before P V and O is rounded to T by Fixpipe, each a
relative perturbation <= u_T per term, so |dO| <= 2 u_T sum_j P_j |V_j| (+ fp32 terms); the bound below takes 4 u_T.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import os
import sys

import ml_dtypes
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from opgen.check import run_check  # noqa: E402
from opgen.errors import ValidationError  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "examples" / "specs" / "flash_attention_score.py"
UNIT = {"float16": 2.0**-11, "bfloat16": 2.0**-8}
NP_T = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
U32 = 2.0**-24
FLT_MAX = 3.4028234663852886e38


def oracle(q, k, v, scale: float, causal: bool, offset: int = 0, mask=None) -> dict:
    """float64 forward of BNSD attention with GQA (module doc): {softmax_max, softmax_sum, attention_out, and the
    bound helpers abs_scores [B, N1, S1] (max_j sum_d |q k| scale) and abs_out [B, N1, S1, D] (sum_j P |V|)}.
    causal: key j of query row s is masked when j > s + offset (leftUpCausal offset 0, rightDownCausal S2 - S1),
    filled with -FLT_MAX as the spec does (a row with no visible key then averages every value); `mask` [S1, S2]
    bool: True masks the key for that query row (the same fill)."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    b, n1, s1, _d = q.shape
    n2, s2 = k.shape[1], k.shape[2]
    g = n1 // n2
    kk, vv = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)     # head h reads kv head h // g
    s = scale * q @ kk.transpose(0, 1, 3, 2)
    if causal:
        s = np.where(np.arange(s2)[None, :] > np.arange(s1)[:, None] + offset, -FLT_MAX, s)
    if mask is not None:
        s = np.where(mask, -FLT_MAX, s)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    lsum = e.sum(-1, keepdims=True)
    p = e / lsum
    return {"softmax_max": np.broadcast_to(m, (b, n1, s1, 8)), "softmax_sum": np.broadcast_to(lsum, (b, n1, s1, 8)),
            "attention_out": p @ vv, "abs_scores": (abs(scale) * np.abs(q) @ np.abs(kk).transpose(0, 1, 3, 2)).max(-1),
            "abs_out": p @ np.abs(vv)}


def assert_close(got: dict, want: dict, dtype: str, d: int, s2: int):
    """The module doc's bounds, elementwise."""
    ds = (d + 4) * U32 * want["abs_scores"][..., None] + 1e-30
    checks = {"softmax_max": ds + U32 * np.abs(want["softmax_max"]),
              "softmax_sum": want["softmax_sum"] * (4 * ds + (s2 + 4) * U32),
              "attention_out": 4 * UNIT[dtype] * want["abs_out"] + 1e-6}
    for name, bound in checks.items():
        g, w = np.asarray(got[name], np.float64), want[name]
        assert g.shape == w.shape, (name, g.shape, w.shape)
        err = np.abs(g - w)
        worst = float(np.broadcast_to(bound, err.shape).flat[err.argmax()])
        assert np.all(err <= bound), (name, float(err.max()), worst)


def test_oracle_is_softmax_attention():
    """The oracle against a direct per-row transcription (loops), GQA and causal."""
    rng = np.random.default_rng(1)
    q, k, v = rng.standard_normal((1, 4, 3, 8)), rng.standard_normal((1, 2, 5, 8)), rng.standard_normal((1, 2, 5, 8))
    got = oracle(q, k, v, 0.5, True)
    for h in range(4):
        for s in range(3):
            sc = np.array([0.5 * q[0, h, s] @ k[0, h // 2, j] for j in range(s + 1)])
            w = np.exp(sc - sc.max()) / np.exp(sc - sc.max()).sum()
            assert np.allclose(got["attention_out"][0, h, s], w @ v[0, h // 2, : s + 1], rtol=1e-12)
            assert np.isclose(got["softmax_max"][0, h, s, 3], sc.max())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("mode, s1, s2", [(0, 7, 45), (2, 7, 45), (3, 7, 45), (3, 20, 20), (0, 50, 20), (2, 50, 20)])
def test_interpreter_matches_the_oracle(dtype, mode, s1, s2):
    """The spec's interpretation (device mode) is within the bounds of the float64 oracle."""
    from opgen.check.run import make_inputs
    from opgen.interp import run_graph
    from opgen.registry import load_spec

    spec = load_spec(str(SPEC))
    dims = {"B": 2, "N1": 4, "N2": 2, "S1": s1, "S2": s2, "D": 32, "MS1": s1, "MS2": s2}
    attrs = {"sparse_mode": mode, "input_layout": "BNSD", "scale_value": 0.25}
    causal = present = mode in (2, 3)
    inputs, full = make_inputs(spec, dims, dict(attrs), {"T": dtype}, 3)
    if not present:
        inputs["atten_mask"] = None
    bound = spec.bind(inputs, full, {"T": dtype})
    got = run_graph(spec.graph(bound.key), bound)
    a = bound.arrays
    assert_close(got, oracle(a["query"], a["key"], a["value"], 0.25, causal, s2 - s1 if mode == 3 else 0), dtype, 32,
                 s2)


@pytest.mark.parametrize("mode", [0, 2])
def test_interpreter_bsnd_matches_the_oracle(mode):
    """input_layout BSND: the interpreter reads query [B, S1, N1, D], key / value [B, S2, N2, D] and writes
    attention_out [B, S1, N1, D], within the float64 oracle's bounds on the transposed tensors."""
    from opgen.check.run import make_inputs
    from opgen.interp import run_graph
    from opgen.registry import load_spec

    spec = load_spec(str(SPEC))
    s1, s2 = 7, 45
    dims = {"B": 2, "N1": 4, "N2": 2, "S1": s1, "S2": s2, "D": 32, "MS1": s1, "MS2": s2}
    attrs = {"sparse_mode": mode, "input_layout": "BSND", "scale_value": 0.25}
    inputs, full = make_inputs(spec, dims, dict(attrs), {"T": "float16"}, 3)
    if mode == 0:
        inputs["atten_mask"] = None
    assert inputs["query"].shape == (2, s1, 4, 32) and inputs["key"].shape == (2, s2, 2, 32)
    bound = spec.bind(inputs, full, {"T": "float16"})
    got = dict(run_graph(spec.graph(bound.key), bound))
    assert got["attention_out"].shape == (2, s1, 4, 32)
    got["attention_out"] = np.asarray(got["attention_out"], np.float64).transpose(0, 2, 1, 3)
    a = {k: np.asarray(bound.arrays[k], np.float64).transpose(0, 2, 1, 3) for k in ("query", "key", "value")}
    assert_close(got, oracle(a["query"], a["key"], a["value"], 0.25, mode == 2), "float16", 32, s2)


@pytest.mark.parametrize("mode", [0, 3])
def test_interpreter_bsh_matches_the_oracle(mode):
    """input_layout BSH: query [B, S1, N1 * D] and key / value [B, S2, N2 * D] with only head_num given; D = H1 /
    head_num and N2 = H2 / D come from the shapes; attention_out [B, S1, N1 * D] within the float64 oracle's bounds
    on the tensors viewed as [B, N, S, D]."""
    from opgen.interp import interpret

    B, N1, N2, S1, S2, D = 2, 4, 2, 7, 45, 32
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal(sh).astype(np.float16) for sh in
               ((B, S1, N1 * D), (B, S2, N2 * D), (B, S2, N2 * D)))
    mask = np.zeros((S1, S2), bool) if mode else None
    got = dict(interpret(str(SPEC), {"query": q, "key": k, "value": v, "atten_mask": mask},
                         {"sparse_mode": mode, "input_layout": "BSH", "scale_value": 0.25, "head_num": N1},
                         {"T": "float16", "M": "bool"}))
    assert got["attention_out"].shape == (B, S1, N1 * D) and got["softmax_max"].shape == (B, N1, S1, 8)

    def heads(x, n):   # [B, S, n * D] -> [B, n, S, D]
        return np.asarray(x, np.float64).reshape(x.shape[0], x.shape[1], n, D).transpose(0, 2, 1, 3)

    got["attention_out"] = heads(got["attention_out"], N1)
    assert_close(got, oracle(heads(q, N1), heads(k, N2), heads(v, N2), 0.25, mode == 3, S2 - S1 if mode else 0),
                 "float16", D, S2)


@pytest.mark.parametrize("head_num, key_h, msg", [
    (5, 64, r"query: shape \[1, 3, 128\]: dim 2 is 128, not D \* N1 for any whole D with N1=5 \(from head_num\)"),
    (4, 48, r"key: shape \[1, 9, 48\]: dim 2 is 48, not D \* N2 for any whole N2 with D=32 \(from query\)"),
])
def test_bsh_hidden_sizes_the_heads_do_not_divide_are_refused(head_num, key_h, msg):
    """H1 = 128 with head_num 5, or a key H2 = 48 that D = 32 does not divide: one ValidationError naming the
    tensor, the rule and where the known factor came from."""
    from opgen.errors import ValidationError
    from opgen.interp import interpret

    q = np.zeros((1, 3, 128), np.float16)
    kv = np.zeros((1, 9, key_h), np.float16)
    with pytest.raises(ValidationError, match="^" + msg + "$"):
        interpret(str(SPEC), {"query": q, "key": kv, "value": kv, "atten_mask": None},
                  {"input_layout": "BSH", "head_num": head_num}, {"T": "float16"})


def test_each_input_layout_lowers_its_own_form():
    """One package, one kernel program per specialisation: BNSD keys store BNSD, BSND keys BSND, and BSH keys BSND
    too (a [B, S, N * D] tensor has BSND's bytes)."""
    from opgen.tiling.pipeline import compile_unit
    from opgen.registry import load_spec

    spec = load_spec(str(SPEC))
    u = compile_unit(spec)
    layout = {a.name: k for k, a in enumerate(spec.static_attrs)}["input_layout"]
    forms = {k.static[layout]: p.form for k, p in u.lowered.programs.items()}
    assert forms == {"BNSD": "BNSD", "BSND": "BSND", "BSH": "BSND"}


def test_a_bad_input_layout_is_refused_in_one_line():
    """input_layout outside {BNSD, BSND, BSH} (CANN also takes SBH, TND): one line naming the attribute and choices,
    at the interpreter and the CLI (exit 2)."""
    from inproc import cli

    from opgen.errors import ValidationError
    from opgen.interp import interpret

    x = np.zeros((1, 2, 3, 16), np.float32)
    with pytest.raises(ValidationError, match=r"input_layout: must be one of 'BNSD', 'BSND', 'BSH', got 'SBH'"):
        interpret(str(SPEC), {"query": x, "key": x, "value": x, "atten_mask": None},
                  {"input_layout": "SBH", "head_num": 2}, {"T": "float16"})
    r = cli("interpret", str(SPEC), "--dims", "B=1,N1=2,N2=2,S1=3,S2=3,D=16,MS1=3,MS2=3", "--dtype", "T=float16",
            "--attr", "input_layout=SBH")
    assert r.returncode == 2 and "input_layout: must be one of 'BNSD', 'BSND', 'BSH', got 'SBH'" in r.stderr, \
        r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def _kernel_text(spec_path) -> tuple[str, str]:
    """(layout line, program text without spec locations) of `opgen graph --stage kernel` for the causal
    specialisation."""
    import re

    from inproc import cli

    r = cli("graph", str(spec_path), "--stage", "kernel", "--attr", "sparse_mode=2", "--attr", "input_layout=BNSD",
            "--present", "atten_mask")
    assert r.returncode == 0, r.stderr
    first, _, rest = r.stdout.partition("\n")
    return first, re.sub(r"  @ \S+", "", rest)


def test_dense_layout_is_read_off_the_structure(tmp_path):
    """The dense key set is recognised from the graph (matmul of two inputs' rows, a softmax, a matmul with a third
    input), not from names: renaming every dim gives the same program."""
    import re

    renamed = SPEC.read_text()
    for old, new in (("B", "Zb"), ("N2", "Kh"), ("S1", "Qs"), ("S2", "Ks"), ("N1", "Qh"), ("D", "Hd")):
        renamed = re.sub(rf"(?<![\w]){old}(?![\w])", new, renamed)
    p = tmp_path / "renamed_attention.py"
    p.write_text(renamed.replace("FlashAttentionScore", "RenamedAttention"))
    lay1, t1 = _kernel_text(SPEC)
    lay2, t2 = _kernel_text(p)
    assert "dense keys" in lay1 and "S2=S2" in lay1 and "S2=Ks" in lay2 and "D=Hd" in lay2, (lay1, lay2)
    assert t1 == t2.replace("RenamedAttention", "FlashAttentionScore")
    assert "causal, dense keys" in t1 and "mmad.NT(heads:query, gather:key)" in t1


@pytest.mark.parametrize("decl, value, hint", [
    ('spec.dim("D", max=512)', "its minimum", "min=, multiple_of="),
    ('spec.dim("D", max=512, min=16)', "D=17", "no max= of D helps"),
])
def test_a_head_dim_the_cube_cannot_tile_is_refused_at_the_spec_line(tmp_path, decl, value, hint):
    """The cube tiles D and Dv in fractal rows of 16: a spec whose D may be another value is refused by the tiling
    proof when it generates (before, D = 20 generated and faulted in RowsToNz's copy to L1), naming the requirement
    and suggesting a declaration that works, not a bound that cannot (new finding of the dependency-pass work)."""
    from opgen.errors import SpecError
    from opgen.registry import load_spec
    from opgen.tiling.pipeline import kernel_build

    p = tmp_path / "attention_any_d.py"
    text = SPEC.read_text()
    assert text.count('spec.dim("D", max=512, multiple_of=16)') == 1
    p.write_text(text.replace('spec.dim("D", max=512, multiple_of=16)', decl))
    with pytest.raises(SpecError) as e:
        kernel_build(load_spec(str(p)))
    msg = str(e.value)
    assert "D, Dv, BS are multiples of 16" in msg and value in msg and hint in msg and "lower max=" not in msg, msg


@pytest.mark.parametrize("what, attrs, present, msg", [
    ("explicit mask", {"sparse_mode": 0}, True, "explicit mask"),
    ("causal without mask", {"sparse_mode": 2}, False, "need the atten_mask"),
    ("rightDown without mask", {"sparse_mode": 3}, False, "need the atten_mask"),
])
def test_unsupported_modes_are_refused_in_the_users_terms(what, attrs, present, msg):
    """An explicit mask and a causal mode without its mask tensor are refused by the spec's checks, one message."""
    from opgen.errors import ValidationError
    from opgen.interp import interpret

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 3, 16)).astype(np.float32)
    inputs = {"query": x, "key": x, "value": x, "atten_mask": np.zeros((3, 3), np.bool_) if present else None}
    with pytest.raises(ValidationError, match=msg):
        interpret(str(SPEC), inputs, {"input_layout": "BNSD", "head_num": 2, **attrs}, {"T": "float16"})


def test_rightdown_causal_with_more_query_rows_than_keys_is_refused():
    """sparse_mode 3 with S1 > S2 leaves query rows that see no key, which CANN zeroes (softmax_max -FLT_MAX,
    softmax_sum FLT_MAX: its invalid-line mode) and this spec does not model: the interpreter refuses it naming
    sparse_mode and the two lengths; sparse_mode 2 with the same shapes and sparse_mode 3 with S1 = S2 are
    accepted."""
    from opgen.errors import ValidationError
    from opgen.interp import interpret

    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 2, 5, 16)).astype(np.float32)
    kv = rng.standard_normal((1, 2, 3, 16)).astype(np.float32)
    attrs = {"input_layout": "BNSD", "head_num": 2}
    mask = np.zeros((5, 3), np.bool_)
    with pytest.raises(ValidationError, match=r"query: sparse_mode 3 \(rightDownCausal\) needs .*S1 <= S2 with S1=5, S2=3"):
        interpret(str(SPEC), {"query": q, "key": kv, "value": kv, "atten_mask": mask}, {**attrs, "sparse_mode": 3},
                  {"T": "float16"})
    interpret(str(SPEC), {"query": q, "key": kv, "value": kv, "atten_mask": mask}, {**attrs, "sparse_mode": 2},
              {"T": "float16"})
    interpret(str(SPEC), {"query": q[:, :, :3], "key": kv, "value": kv, "atten_mask": np.zeros((3, 3), np.bool_)},
              {**attrs, "sparse_mode": 3}, {"T": "float16"})


def test_the_aclnn_layer_checks_the_rightdown_relation_only_under_sparse_mode_3():
    """The emitted aclnn relation check of S1 <= S2 is guarded by sparseMode == 3 and prints the public name."""
    from opgen.codegen.aclnn import AclnnPlan
    from opgen.registry import load_spec

    checks = [c for c in AclnnPlan(load_spec(str(SPEC)))._constraints() if "S1 <= S2" in c.fmt]
    assert len(checks) == 1, [c.fmt for c in AclnnPlan(load_spec(str(SPEC)))._constraints()]
    assert "== 3" in checks[0].cond and "sparseMode 3 (rightDownCausal)" in checks[0].fmt, (checks[0].cond,
                                                                                          checks[0].fmt)


def test_attention_over_unsplit_hidden_rows_is_refused_naming_the_layouts(tmp_path):
    """A dense attention written over [B, S, H] tensors with no head axis (no reshape into [B, S, N, D], as a BSH
    spec makes) is refused by the attention family naming the layouts it supports."""
    from opgen.errors import OpgenError
    from opgen.kernel.attention import attention_layout
    from opgen.kernel.rowlayout import Unsupported
    from opgen.registry import load_spec

    src = '''
from opgen.dsl import A2, OpSpec, bf16, f16, f32
spec = OpSpec("BshAttention", aclnn="aclnnBshAttention", socs=(A2,), doc="x")
B, S, H = spec.dims("B S H")
(T,) = spec.dtype_vars("T")
spec.input("q", T, [B, S, H])
spec.input("k", T, [B, S, H])
spec.input("v", T, [B, S, H])
spec.output("o", T, [B, S, H])
spec.dtypes((T,), [(f16,), (bf16,)])
@spec.body
def _(b, q, k, v):
    s = b.matmul(q, k, transpose_b=True)
    e = b.exp(s - s.max(-1))
    p = (e / e.sum(-1)).cast(T, "round").cast(f32)
    return {"o": b.matmul(p, v).cast(T, "rint")}
'''
    p = tmp_path / "bsh_attention.py"
    p.write_text(src)
    spec = load_spec(str(p))
    with pytest.raises((Unsupported, OpgenError), match="BNSD"):
        attention_layout(spec.graph(spec.keys()[0]))


# ------------------------------------------------------------------------------------------------ emulated kernels
CASES = [   # (id, dims, dtype, sparse_mode, scale)
    ("g2_causal_f16_s1odd_s2tail", dict(B=2, N1=4, N2=2, S1=5, S2=37, D=32), "float16", 2, 0.3),
    ("g2_dense_bf16_s2tail", dict(B=3, N1=6, N2=3, S1=9, S2=131, D=48), "bfloat16", 0, 0.125),
    ("g2_causal_bf16_core_tails", dict(B=1, N1=2, N2=1, S1=67, S2=300, D=64), "bfloat16", 2, 0.125),
    ("g1_dense_f16_aligned", dict(B=2, N1=2, N2=2, S1=3, S2=16, D=16), "float16", 0, 1.5),
    ("g2_causal_f16_s1_blocks", dict(B=1, N1=4, N2=2, S1=301, S2=250, D=32), "float16", 2, 0.2),
    ("g2_causal_bf16_128_rows", dict(B=1, N1=2, N2=1, S1=2600, S2=300, D=64), "bfloat16", 2, 0.125),
    ("g2_rightdown_f16", dict(B=2, N1=4, N2=2, S1=40, S2=101, D=32), "float16", 3, 0.25),
    ("g2_rightdown_bf16_square", dict(B=1, N1=2, N2=1, S1=37, S2=37, D=16), "bfloat16", 3, 0.5),
    ("g40_two_head_groups_f16_d512", dict(B=1, N1=40, N2=1, S1=3, S2=20, D=512), "float16", 2, 0.05),
    ("g2_rightdown_f16_online_items", dict(B=1, N1=2, N2=1, S1=300, S2=1300, D=32), "float16", 3, 0.25),
]


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    """The spec's package generated into a fresh tree."""
    from opgen.codegen import write_ops

    out = tmp_path_factory.mktemp("fas")
    write_ops([str(SPEC)], out)
    return out


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_kernel_matches_the_float64_oracle(case, gen):
    """The emitted mixed kernel (emulated, zero faults, opgen's own CANN-rule comparison) within the float64
    oracle's bounds: odd S1, S2 not a multiple of the 16-key block, GQA G = 2, causal and not, fp16 and bf16, units
    that do not divide the AI Cores, S1 blocks of several query rows with a tail block, causal rows past S2, units
    of 128 M rows (2 heads x 64 query rows) over 128-key chunks, rightDownCausal (sparse_mode 3) with S1 < S2 and
    S1 = S2, G = 40 > the 32 rows D = 512 allows (two head
    groups per kv head), rightDownCausal over several online softmax items (blocks of key chunks) per unit with a
    partial last item and units whose visible keys end inside an item."""
    _id, dims, dtype, mode, scale = case
    causal = mode in (2, 3)
    attrs = {"sparse_mode": mode, "input_layout": "BNSD", "scale_value": scale}
    full = {**dims, "MS1": dims["S1"], "MS2": dims["S2"]}
    r = run_check(str(SPEC), dims=full, dtypes={"T": dtype}, attrs=attrs, gen_dir=gen, seed=sum(dims.values()),
                  present=["atten_mask"] if causal else [], progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    a = r.inputs
    offset = dims["S2"] - dims["S1"] if mode == 3 else 0
    assert_close(r.arrays, oracle(a["query"], a["key"], a["value"], scale, causal, offset), dtype, dims["D"],
                 dims["S2"])


BSND_CASES = [   # (id, dims, dtype, sparse_mode, scale): input_layout BSND, the same spec and package as BNSD
    ("bsnd_g2_causal_f16_s1odd_s2tail", dict(B=2, N1=4, N2=2, S1=5, S2=37, D=32), "float16", 2, 0.3),
    ("bsnd_g2_dense_bf16_s2tail", dict(B=3, N1=6, N2=3, S1=9, S2=131, D=48), "bfloat16", 0, 0.125),
    ("bsnd_g2_rightdown_f16_online_items", dict(B=1, N1=2, N2=1, S1=300, S2=1300, D=32), "float16", 3, 0.25),
]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("case", BSND_CASES, ids=[c[0] for c in BSND_CASES])
def test_bsnd_input_layout_matches_the_float64_oracle(case, gen):
    """input_layout "BSND" (a string attribute picking the shapes, form_by): query [B, S1, N1, D], key / value
    [B, S2, N2, D], attention_out [B, S1, N1, D], from the package that also serves BNSD; the emulated kernel within
    the float64 oracle's bounds, the oracle fed the inputs transposed to BNSD and its output transposed back."""
    _id, dims, dtype, mode, scale = case
    causal = mode in (2, 3)
    attrs = {"sparse_mode": mode, "input_layout": "BSND", "scale_value": scale}
    full = {**dims, "MS1": dims["S1"], "MS2": dims["S2"]}
    r = run_check(str(SPEC), dims=full, dtypes={"T": dtype}, attrs=attrs, gen_dir=gen, seed=sum(dims.values()),
                  present=["atten_mask"] if causal else [], progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    assert r.inputs["query"].shape == (dims["B"], dims["S1"], dims["N1"], dims["D"])
    a = {k: np.asarray(r.inputs[k], np.float64).transpose(0, 2, 1, 3) for k in ("query", "key", "value")}
    offset = dims["S2"] - dims["S1"] if mode == 3 else 0
    got = dict(r.arrays)
    got["attention_out"] = np.asarray(got["attention_out"], np.float64).transpose(0, 2, 1, 3)
    assert_close(got, oracle(a["query"], a["key"], a["value"], scale, causal, offset), dtype, dims["D"], dims["S2"])


BSH_CASES = [   # (id, dims, dtype, sparse_mode, scale): input_layout BSH, the same spec and package
    ("bsh_g2_causal_bf16_s1odd_s2tail", dict(B=2, N1=4, N2=2, S1=37, S2=70, D=32), "bfloat16", 3, 0.3),
    ("bsh_g1_dense_f16_s2tail", dict(B=1, N1=3, N2=3, S1=9, S2=131, D=48), "float16", 0, 0.125),
]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("case", BSH_CASES, ids=[c[0] for c in BSH_CASES])
def test_bsh_input_layout_matches_the_float64_oracle(case, gen):
    """input_layout "BSH": query [B, S1, N1 * D], key / value [B, S2, N2 * D], attention_out [B, S1, N1 * D], the
    TilingFunc reading D = H1 / head_num and N2 = H2 / D; the emulated kernel (zero faults) within the float64
    oracle's bounds, the oracle fed the tensors viewed as [B, N, S, D]."""
    _id, dims, dtype, mode, scale = case
    causal = mode in (2, 3)
    attrs = {"sparse_mode": mode, "input_layout": "BSH", "scale_value": scale, "head_num": dims["N1"]}
    full = {**dims, "MS1": dims["S1"], "MS2": dims["S2"]}
    r = run_check(str(SPEC), dims=full, dtypes={"T": dtype}, attrs=attrs, gen_dir=gen, seed=sum(dims.values()),
                  present=["atten_mask"] if causal else [], progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    D = dims["D"]
    assert r.inputs["query"].shape == (dims["B"], dims["S1"], dims["N1"] * D)

    def heads(x):   # [B, S, N * D] -> [B, N, S, D]
        x = np.asarray(x, np.float64)
        return x.reshape(x.shape[0], x.shape[1], -1, D).transpose(0, 2, 1, 3)

    a = {k: heads(r.inputs[k]) for k in ("query", "key", "value")}
    offset = dims["S2"] - dims["S1"] if mode == 3 else 0
    got = dict(r.arrays)
    got["attention_out"] = heads(got["attention_out"])
    assert_close(got, oracle(a["query"], a["key"], a["value"], scale, causal, offset), dtype, D, dims["S2"])


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_emitted_infershape_derives_the_bsh_head_dim(gen, tmp_path):
    """The emitted InferShape, compiled against the emulation's registry and run (graph mode: no aclnn layer in
    front): for BSH query [2, 37, 128] and key / value [2, 70, 64], head_num 4 gives D = 32, softmax_max
    [2, 4, 37, 8] and attention_out [2, 37, 128]; head_num 8 gives D = 16 and 8 heads; BNSD reads N1 from the
    query whatever head_num says; head_num 3, which does not divide 128, fails naming the rule (graph mode has no
    aclnn layer in front to refuse it)."""
    import subprocess

    src = gen / "flash_attention_score" / "op_host" / "flash_attention_score_infershape.cpp"
    main = tmp_path / "main.cpp"
    main.write_text(
        '#include <cstdio>\n#include "register/op_impl_registry.h"\n'
        'static int Run(const char* layout, gert::Shape q, gert::Shape kv, long heads)\n{\n'
        '    gert::Shape smax, ssum, out;\n    gert::InferShapeContext ctx;\n'
        '    ctx.inputShapes = {&q, &kv, &kv, nullptr};\n    ctx.outputShapes = {&smax, &ssum, &out};\n'
        '    ctx.attrs.SetStr(0, layout);\n    ctx.attrs.Set(1, 0.5);\n    ctx.attrs.Set(2, heads);\n'
        '    ctx.attrs.Set(3, 0);\n'
        '    if (gert::InferShapeRegistry().at("FlashAttentionScore")(&ctx) != ge::GRAPH_SUCCESS) {\n'
        '        std::printf("failed\\n");\n        return 0;\n    }\n'
        '    for (gert::Shape* s : {&smax, &out}) {\n'
        '        for (size_t i = 0; i < s->GetDimNum(); ++i) std::printf("%ld ", (long)s->GetDim(i));\n'
        '        std::printf("| ");\n    }\n    std::printf("\\n");\n    return 0;\n}\n'
        'int main()\n{\n'
        '    return Run("BSH", gert::Shape({2, 37, 128}), gert::Shape({2, 70, 64}), 4) |\n'
        '           Run("BSH", gert::Shape({2, 37, 128}), gert::Shape({2, 70, 64}), 8) |\n'
        '           Run("BNSD", gert::Shape({2, 4, 37, 32}), gert::Shape({2, 2, 70, 32}), 7) |\n'
        '           Run("BSH", gert::Shape({2, 37, 128}), gert::Shape({2, 70, 64}), 3);\n}\n')
    inc = ROOT / "opgen" / "emu" / "include"
    exe = tmp_path / "infer"
    r = subprocess.run([shutil.which("g++"), "-std=c++17", "-O0", f"-I{inc}", str(src), str(main), "-o", str(exe)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[:3000]
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.splitlines() == [
        "2 4 37 8 | 2 37 128 | ", "2 8 37 8 | 2 37 128 | ", "2 4 37 8 | 2 4 37 32 | ", "failed"], out.stdout
    assert "query: dim 2 is 128, not D * N1 for any whole D with N1=3" in out.stdout + out.stderr, out.stderr


MHA_SPEC = '''
from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("MhaForward", aclnn="aclnnMhaForward", socs=(A2, A3), round="round", doc="Plain multi-head attention.")
B, N, S1 = spec.dims("B N S1")
S2 = spec.dim("S2", max=8192)
D = spec.dim("D", max=256, multiple_of=16)
(T,) = spec.dtype_vars("T")
spec.input("q", T, [B, N, S1, D])
spec.input("k", T, [B, N, S2, D])
spec.input("v", T, [B, N, S2, D])
spec.attr("scale", float, 1.0)
spec.output("o", T, [B, N, S1, D])
spec.dtypes((T,), [(f16,), (bf16,)])


@spec.body
def _(b, q, k, v, scale):
    s = b.matmul(q, k, transpose_b=True) * scale
    e = b.exp(s - s.max(-1))
    p = b.quantize(e / e.sum(-1), T, "round")
    return {"o": b.matmul(p, v).cast(T, "rint")}
'''
"""Multi-head attention as a user writes it without GQA: one head dim for query and key (no reshape, no
broadcast), the matmul result cast straight to the output."""


def test_plain_multi_head_attention_is_a_dense_key_set(tmp_path):
    """softmax(Q Kᵀ scale) V over [B, N, S, D] tensors with one head dim lowers as a dense key set: Q's rows against
    K's rows (no broadcast), an online softmax over key chunks (each chunk's P V an fp32 workspace tile, O
    accumulated and stored by the vector stage)."""
    p = tmp_path / "mha.py"
    p.write_text(MHA_SPEC)
    from inproc import cli

    r = cli("graph", str(p), "--stage", "kernel")
    assert r.returncode == 0, r.stderr
    assert "dense keys" in r.stdout and "N1=N" in r.stdout and "N2=N" in r.stdout
    assert "mmad.NT(heads:q, gather:k)" in r.stdout and "mmad.NN(tile:" in r.stdout and "-> pv:ws_" in r.stdout
    assert "online softmax" in r.stdout and "= omax(" in r.stdout and "%o = st_out(%oacc" in r.stdout, r.stdout


@pytest.mark.parametrize("what, edits, msg", [
    ("pse", [('spec.input("v", T, [B, N, S2, D])',
              'spec.input("v", T, [B, N, S2, D])\nspec.input("pse", T, [B, N, S1, S2])'),
             ("def _(b, q, k, v, scale):", "def _(b, q, k, v, pse, scale):"),
             ("s = b.matmul(q, k, transpose_b=True) * scale",
              "s = (b.matmul(q, k, transpose_b=True) + pse.cast(f32)) * scale")], "position bias / pse"),
    ("a per-batch mask", [('spec.input("v", T, [B, N, S2, D])',
                           'spec.input("v", T, [B, N, S2, D])\nspec.input("mask", boolean, [B, 1, S1, S2])'),
                          ("def _(b, q, k, v, scale):", "def _(b, q, k, v, mask, scale):"),
                          ("bf16, f16, f32", "bf16, boolean, f16, f32"),
                          ("s = b.matmul(q, k, transpose_b=True) * scale",
                           "s = b.where(mask, -3.0e38, b.matmul(q, k, transpose_b=True) * scale)")],
     "another mask shape is not supported"),
])
def test_unsupported_attention_constructs_are_refused_naming_them(what, edits, msg, tmp_path):
    """A spec adding a tensor to the scores (pse) or masking them with a mask input of another shape than [S1, S2]
    gets one line naming the construct (exit 2), not a traceback."""
    src = MHA_SPEC
    for old, new in edits:
        assert old in src
        src = src.replace(old, new)
    p = tmp_path / "attn.py"
    p.write_text(src)
    from inproc import cli

    r = cli("graph", str(p), "--stage", "kernel")
    assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


BSND_EDITS = (('spec.input("q", T, [B, N, S1, D])', 'spec.input("q", T, [B, S1, N, D])'),
              ('spec.input("k", T, [B, N, S2, D])', 'spec.input("k", T, [B, S2, N, D])'),
              ('spec.input("v", T, [B, N, S2, D])', 'spec.input("v", T, [B, S2, N, D])'),
              ('spec.output("o", T, [B, N, S1, D])', 'spec.output("o", T, [B, S1, N, D])'),
              ("    s = b.matmul(q, k, transpose_b=True) * scale",
               "    q, k, v = q.permute(0, 2, 1, 3), k.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3)\n"
               "    s = b.matmul(q, k, transpose_b=True) * scale"),
              ('return {"o": b.matmul(p, v).cast(T, "rint")}',
               'return {"o": b.matmul(p, v).permute(0, 2, 1, 3).cast(T, "rint")}'))
"""The MHA spec with query / key / value / output stored [B, S, N, D] (BSND), permuted to BNSD in the body."""


def _edited(edits, tmp_path, name="attn.py"):
    src = MHA_SPEC
    for old, new in edits:
        assert old in src
        src = src.replace(old, new)
    p = tmp_path / name
    p.write_text(src)
    return p


def test_bsnd_inputs_are_read_as_stored(tmp_path):
    """BSND query / key / value permuted to BNSD in the body lower as a dense key set of form BSND: the roles are read
    off the score matmul (S would be taken for the heads by a positional reading)."""
    from inproc import cli

    r = cli("graph", str(_edited(BSND_EDITS, tmp_path)), "--stage", "kernel")
    assert r.returncode == 0, r.stderr
    assert "dense keys, BSND" in r.stdout and "N1=N" in r.stdout and "S1=S1" in r.stdout


@pytest.mark.parametrize("what, edits, msg", [
    ("a BNSD attention with a permuted output", [('spec.output("o", T, [B, N, S1, D])',
                                                  'spec.output("o", T, [B, S1, N, D])'),
                                                 ('return {"o": b.matmul(p, v).cast(T, "rint")}',
                                                  'return {"o": b.matmul(p, v).permute(0, 2, 1, 3).cast(T, "rint")}')],
     "not stored BNSD like the inputs"),
    ("a BSND attention with a BNSD output", BSND_EDITS[:3] + BSND_EDITS[4:5], "not stored BSND like the inputs"),
])
def test_mixed_layouts_are_refused(what, edits, msg, tmp_path):
    """An output stored otherwise than the inputs is refused naming the layout (the kernel's Fixpipe addressing)."""
    from inproc import cli

    r = cli("graph", str(_edited(edits, tmp_path)), "--stage", "kernel")
    assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr, r.stderr


MASK_EDITS = (('spec.attr("scale", float, 1.0)',
               'spec.input("mask", boolean, [S1, S2])\nspec.attr("scale", float, 1.0)'),
              ("def _(b, q, k, v, scale):", "def _(b, q, k, v, mask, scale):"),
              ("bf16, f16, f32", "bf16, boolean, f16, f32"),
              ("s = b.matmul(q, k, transpose_b=True) * scale",
               "s = b.where(mask.reshape([1, 1, S1, S2]), -3.4028234663852886e38,\n"
               "                b.matmul(q, k, transpose_b=True) * scale)"))
"""The MHA spec with an explicit bool mask input [S1, S2] (True: the key is masked for that query row)."""


def test_explicit_mask_input_lowers_to_a_masked_row(tmp_path):
    """where(mask input [S1, S2], fill, scores) lowers to one mask_in instruction reading the input."""
    from inproc import cli

    r = cli("graph", str(_edited(MASK_EDITS, tmp_path)), "--stage", "kernel")
    assert r.returncode == 0, r.stderr
    assert "= mask_in(" in r.stdout and "mask:in" in r.stdout, r.stdout


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_bsnd_kernel_with_an_explicit_mask_matches_the_oracle(tmp_path):
    """A BSND spec with an explicit mask input: its emitted kernel (emulated) within the float64 oracle's bounds, the
    oracle fed the inputs permuted to BNSD, the mask applied as the fill, its output permuted back. One build for
    both (the BSND addressing and the mask rows); the mask masks about half of the keys, a whole row of it once."""
    from opgen.codegen import write_ops

    p = _edited(BSND_EDITS + MASK_EDITS, tmp_path)
    write_ops([str(p)], tmp_path / "gen")
    rng = np.random.default_rng(11)
    b, n, s1, s2, d = 2, 3, 33, 70, 64
    mk = rng.random((s1, s2)) < 0.5
    mk[4] = True   # a row with no visible key averages every value
    x = {k: rng.standard_normal(sh).astype(np.float16).astype(np.float32)
         for k, sh in (("q", (b, s1, n, d)), ("k", (b, s2, n, d)), ("v", (b, s2, n, d)))}
    r = run_check(str(p), {**x, "mask": mk}, {"scale": 0.125}, {"T": "float16"}, gen_dir=tmp_path / "gen",
                  progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    a = {k: np.asarray(r.inputs[k], np.float64).transpose(0, 2, 1, 3) for k in ("q", "k", "v")}
    want = oracle(a["q"], a["k"], a["v"], 0.125, False, mask=mk)
    got = np.asarray(r.arrays["o"], np.float64).transpose(0, 2, 1, 3)
    assert_close({"attention_out": got, "softmax_max": want["softmax_max"], "softmax_sum": want["softmax_sum"]},
                 want, "float16", 64, 70)


FUTURE = "future = b.iota(S2).reshape([1, S2]) > row.reshape([S1, 1])"
WHERE = "scores = b.where(future.reshape([1, 1, 1, S1, S2]), -FLT_MAX, scores)"


@pytest.mark.parametrize("what, edits", [
    ("lt swapped", [(FUTURE, "future = row.reshape([S1, 1]) < b.iota(S2).reshape([1, S2])")]),
    ("keep mask", [(FUTURE, "keep = b.iota(S2).reshape([1, S2]) <= row.reshape([S1, 1])"),
                   (WHERE, "scores = b.where(keep.reshape([1, 1, 1, S1, S2]), scores, -FLT_MAX)")]),
])
def test_causal_mask_written_other_ways_lowers_the_same(what, edits, tmp_path):
    """`iota(S1) < iota(S2)` and `where(iota(S2) <= iota(S1), scores, fill)` are the same causal mask: the same
    program as the spec's `iota(S2) > iota(S1)`."""
    src = SPEC.read_text()
    for old, new in edits:
        assert old in src
        src = src.replace(old, new)
    p = tmp_path / "fas_variant.py"
    p.write_text(src)
    _lay, want = _kernel_text(SPEC)
    _lay, got = _kernel_text(p)
    assert got == want


def test_a_shifted_position_is_not_taken_for_the_causal_mask(tmp_path):
    """A sliding-window-like mask (`iota(S2) > iota(S1) + 4`) is not the causal mask: refused, not lowered as one."""
    assert FUTURE in SPEC.read_text()
    src = SPEC.read_text().replace(FUTURE, "future = b.iota(S2).reshape([1, S2]) > row.reshape([S1, 1]) + 4")
    p = tmp_path / "fas_window.py"
    p.write_text(src)
    from inproc import cli

    r = cli("graph", str(p), "--stage", "kernel", "--attr", "sparse_mode=2", "--attr", "input_layout=BNSD",
            "--present", "atten_mask")
    assert r.returncode == 2 and "a mask other than the causal one" in r.stderr, r.stderr
    assert "(fas_window.py:" in r.stderr.split("a mask other")[0], r.stderr   # the select's spec line


UNREAD_ATTRS = (('spec.attr("scale", float, 1.0)',
                 'spec.attr("scale", float, 1.0)\nspec.attr("keep_prob", float, 1.0)\n'
                 'spec.attr("num_key_value_heads", int, 0)'),
                ("def _(b, q, k, v, scale):", "def _(b, q, k, v, scale, keep_prob, num_key_value_heads):"))
"""The MHA spec with two attributes of CANN's API its body does not read (a float and an int)."""


def test_attributes_the_body_does_not_read_leave_the_scale_to_the_one_it_reads(tmp_path):
    """Declared attributes the body never reads (PromptFlashAttention's num_key_value_heads, a keep_prob) are no
    part of the kernel: the tiling reads the score scale from the float attribute the body reads (trial 29: they
    stopped generate with "takes one float attribute (the scale), got scale, num_key_value_heads"). An int
    attribute the body does read is refused on one line naming it and its spec line."""
    from inproc import cli

    r = cli("graph", str(_edited(UNREAD_ATTRS, tmp_path)), "--stage", "tiled")
    assert r.returncode == 0, r.stderr
    assert "input scaleAttr = attr_bits scale\n" in r.stdout, r.stdout
    reads = UNREAD_ATTRS + (("s = b.matmul(q, k, transpose_b=True) * scale",
                             "s = b.matmul(q, k, transpose_b=True) * (scale * num_key_value_heads.f32())"),)
    r = cli("graph", str(_edited(reads, tmp_path, "reads.py")), "--stage", "tiled")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "(reads.py:" in r.stderr and "the i64 attribute num_key_value_heads" in r.stderr, r.stderr


def test_the_attention_reason_leads_when_the_cube_family_refuses_the_whole_graph(tmp_path):
    """Self-attention written with one sequence dim (S for query and key): the attention family gets to the score
    matmul and says why it stops there; the cube family's "2 matmuls" is a rule about the whole graph and comes
    after it (opgen.kernel.family.choose orders the reasons by how far each family got)."""
    from opgen.kernel.family import NoKernel
    from opgen.registry import load_spec
    from opgen.codegen.generation import generate

    src = MHA_SPEC.replace('B, N, S1 = spec.dims("B N S1")\nS2 = spec.dim("S2", max=8192)',
                           'B, N = spec.dims("B N")\nS1 = S2 = spec.dim("S", max=8192)')
    assert src != MHA_SPEC
    p = tmp_path / "self_attn.py"
    p.write_text(src)
    with pytest.raises(NoKernel) as e:
        generate(load_spec(str(p)))
    msg = str(e.value)
    assert msg.index("[attention family]") < msg.index("2 matmuls"), msg
    assert msg.endswith("[cube family]") and "\n" not in msg, msg


INF_MASK_EDITS = tuple((a, b.replace("-3.4028234663852886e38", 'float("-inf")')) for a, b in MASK_EDITS)
"""The MHA spec with an explicit bool mask input whose fill is -inf."""


def test_a_minus_inf_mask_fill_lowers_to_a_masked_row(tmp_path):
    """where(mask, -inf, scores): the kernel applies the mask by compare + Select (no arithmetic blend, which made
    NaN of -inf on the kept lanes), so a -inf fill lowers like a finite one (it was refused)."""
    from inproc import cli

    assert INF_MASK_EDITS != MASK_EDITS
    r = cli("graph", str(_edited(INF_MASK_EDITS, tmp_path)), "--stage", "kernel")
    assert r.returncode == 0, r.stderr
    assert "= mask_in(" in r.stdout and "NEG_INF_VALUE mask" in r.stdout, r.stdout


@pytest.fixture(scope="module")
def inf_mask_gen(run_shared):
    """(spec path, generated tree) of the MHA spec with a -inf mask fill (INF_MASK_EDITS), generated once per run for
    the two kernel tests below (one build; tests/conftest.py run_shared)."""
    from opgen.codegen import write_ops

    def fill(d):
        write_ops([str(_edited(INF_MASK_EDITS, d))], d / "gen")
    d = run_shared("inf-mask-attention", fill)
    return d / "attn.py", d / "gen"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_kernel_with_a_minus_inf_mask_fill_matches_the_oracle(inf_mask_gen):
    """BNSD, bf16, an explicit mask with a -inf fill, S2 = 83 (not a multiple of the 64 lanes of a float repeat nor
    of the 128 of a half one: the compare / Select tails), every row keeping at least one key: the emulated kernel
    (zero faults) within the float64 oracle's bounds, no NaN."""
    p, gen = inf_mask_gen
    rng = np.random.default_rng(12)
    b, n, s1, s2, d = 1, 2, 21, 83, 32
    mk = rng.random((s1, s2)) < 0.6
    mk[:, 5] = False   # every row sees key 5
    mk[3, :] = True
    mk[3, 82] = False  # row 3 sees only the last key
    x = {k: rng.standard_normal(sh).astype(ml_dtypes.bfloat16).astype(np.float32)
         for k, sh in (("q", (b, n, s1, d)), ("k", (b, n, s2, d)), ("v", (b, n, s2, d)))}
    r = run_check(str(p), {**x, "mask": mk}, {"scale": 0.2}, {"T": "bfloat16"}, gen_dir=gen, progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    a = {k: np.asarray(r.inputs[k], np.float64) for k in ("q", "k", "v")}
    want = oracle(a["q"], a["k"], a["v"], 0.2, False, mask=mk)
    got = np.asarray(r.arrays["o"], np.float64)
    assert np.isfinite(got).all()
    assert_close({"attention_out": got, "softmax_max": want["softmax_max"], "softmax_sum": want["softmax_sum"]},
                 want, "bfloat16", d, s2)


def test_a_value_head_dim_other_than_the_keys_is_refused(tmp_path):
    """A value [B, N, S2, Dv] with its own head dim: the plans size a value row by D, so a Dv above D overflowed L1
    in the emulation while the proof passed (review finding): refused in one line naming both dims."""
    from inproc import cli

    edits = [('D = spec.dim("D", max=256, multiple_of=16)',
              'D = spec.dim("D", max=256, multiple_of=16)\nDv = spec.dim("Dv", max=512, multiple_of=16)'),
             ('spec.input("v", T, [B, N, S2, D])', 'spec.input("v", T, [B, N, S2, Dv])'),
             ('spec.output("o", T, [B, N, S1, D])', 'spec.output("o", T, [B, N, S1, Dv])')]
    r = cli("generate", str(_edited(edits, tmp_path)), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "value head dim Dv" in r.stderr and "\n" not in r.stderr.strip(), r.stderr
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ online softmax over key blocks
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_kernel_with_16384_keys_matches_the_float64_oracle(gen):
    """S2 = 16384 (refused while a whole score row was kept in UB): with the online softmax over key chunks the
    emulated kernel is within the float64 oracle's bounds, softmax_max / softmax_sum as CANN defines them (the row's max of
    the scaled scores and its sum of exp(score - max) over every key)."""
    dims = dict(B=1, N1=2, N2=1, S1=20, S2=16384, D=16)
    full = {**dims, "MS1": dims["S1"], "MS2": dims["S2"]}
    r = run_check(str(SPEC), dims=full, dtypes={"T": "bfloat16"}, attrs={"sparse_mode": 0, "input_layout": "BNSD",
                  "scale_value": 0.25}, gen_dir=gen, seed=7, present=[], progress=False)
    assert not r.faults and r.passed, (r.faults[:3], getattr(r, "rejected", None))
    a = r.inputs
    assert_close(r.arrays, oracle(a["query"], a["key"], a["value"], 0.25, False), "bfloat16", 16, dims["S2"])


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_workspace_does_not_grow_with_the_keys(gen):
    """The GM workspace holds key-chunk tiles, not whole score rows: the same at S2 = 2048 as at S2 = 512 (it grew
    with S2 before the online softmax: one fp32 score row and one T probability row per query row of a unit, per
    core and slot: 16973824 B at S2 = 512, 17563648 B at S2 = 2048)."""
    ws = []
    for s2 in (512, 2048):
        dims = dict(B=1, N1=2, N2=1, S1=16, S2=s2, D=16, MS1=16, MS2=s2)
        r = run_check(str(SPEC), dims=dims, dtypes={"T": "float16"}, attrs={"sparse_mode": 0, "input_layout": "BNSD"},
                      gen_dir=gen, seed=3, present=[], progress=False)
        assert r.passed, r.faults[:3]
        ws.append(r.workspace_bytes)
    assert ws[0] == ws[1], ws


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_online_softmax_with_minus_inf_chunks_matches_the_oracle(inf_mask_gen):
    """The online softmax when whole key chunks of a row are -inf (an explicit -inf mask): a row whose first 600
    keys are masked (its first chunks, at most 256 keys each, are all -inf: the running max stays -inf there and
    must not turn exp(-inf - max) into NaN), a row that sees only key 0 (every later chunk -inf), a row that sees
    only its last key; S2 = 1000 over several chunks. The emulated kernel (zero faults) within the float64
    oracle's bounds, no NaN."""
    p, gen = inf_mask_gen
    rng = np.random.default_rng(13)
    b, n, s1, s2, d = 1, 2, 9, 1000, 16
    mk = rng.random((s1, s2)) < 0.3
    mk[:, 700] = False   # every row sees key 700 ...
    mk[2, :600] = True   # ... row 2 none of the first 600
    mk[5, :] = True
    mk[5, 0] = False     # row 5 sees key 0 alone
    mk[7, :] = True
    mk[7, s2 - 1] = False   # row 7 sees the last key alone
    x = {k: rng.standard_normal(sh).astype(np.float16).astype(np.float32)
         for k, sh in (("q", (b, n, s1, d)), ("k", (b, n, s2, d)), ("v", (b, n, s2, d)))}
    r = run_check(str(p), {**x, "mask": mk}, {"scale": 0.25}, {"T": "float16"}, gen_dir=gen, progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    a = {k: np.asarray(r.inputs[k], np.float64) for k in ("q", "k", "v")}
    want = oracle(a["q"], a["k"], a["v"], 0.25, False, mask=mk)
    got = np.asarray(r.arrays["o"], np.float64)
    assert np.isfinite(got).all()
    assert_close({"attention_out": got, "softmax_max": want["softmax_max"], "softmax_sum": want["softmax_sum"]},
                 want, "float16", d, s2)


def test_a_softmax_the_online_rewrite_does_not_know_is_refused_in_one_line(tmp_path):
    """The dense forward's online softmax rewrites exactly max, exp(x - max), sum, division, P to T, P V: a
    probability scaled after the division (another computation on P) is refused naming the online softmax, one
    line, no traceback."""
    from inproc import cli

    edits = [('p = b.quantize(e / e.sum(-1), T, "round")', 'p = b.quantize(e / e.sum(-1) * 2.0, T, "round")')]
    r = cli("graph", str(_edited(edits, tmp_path)), "--stage", "kernel")
    assert r.returncode == 2 and "online softmax" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


ONE_S_EDITS = (("B, N, S1 = spec.dims(\"B N S1\")\nS2 = spec.dim(\"S2\", max=8192)",
                "B, N = spec.dims(\"B N\")\nS = spec.dim(\"S\", max=8192)"),
               ('spec.input("q", T, [B, N, S1, D])', 'spec.input("q", T, [B, N, S, D])'),
               ('spec.input("k", T, [B, N, S2, D])', 'spec.input("k", T, [B, N, S, D])'),
               ('spec.input("v", T, [B, N, S2, D])', 'spec.input("v", T, [B, N, S, D])'),
               ('spec.output("o", T, [B, N, S1, D])', 'spec.output("o", T, [B, N, S, D])'))
"""The MHA spec as self-attention is first written (trial 9, finding 8): one S for the query and the key rows."""


@pytest.mark.slow
def test_self_attention_with_one_s_is_refused_with_the_fix_that_works(tmp_path):
    """One dim S for both sequences is refused on one line that names the shared roles and says what to declare;
    the spec written so (S1, S2 and spec.require(S1 <= S2)) generates and its emulated kernel matches the float64
    oracle on a self-attention call (S1 = S2)."""
    from inproc import cli

    from opgen.codegen import write_ops

    r = cli("graph", str(_edited(ONE_S_EDITS, tmp_path, "self_attn.py")), "--stage", "kernel")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert ("the attention roles need distinct plain dims, got B=B, N1=N, S1=S, D=D, N2=N, S2=S, Dv=D (S1 and S2 "
            'are both S): declare one dim per role (S1 = spec.dim("S1"), S2 = spec.dim("S2"); the query with S1; the '
            "key and value with S2) and relate them with spec.require where the op needs it (e.g. "
            'spec.require(S1 <= S2, "query", ...) for a causal mask), as examples/specs/flash_attention_score.py '
            "does") in r.stderr, r.stderr
    p = _edited([('spec.attr("scale", float, 1.0)',
                  'spec.attr("scale", float, 1.0)\nspec.require(S1 <= S2, "q", "S1 <= S2")')], tmp_path, "fixed.py")
    write_ops([str(p)], tmp_path / "gen")
    rng = np.random.default_rng(5)
    b, n, s, d = 1, 2, 40, 32
    x = {k: rng.standard_normal((b, n, s, d)).astype(np.float16).astype(np.float32) for k in ("q", "k", "v")}
    r = run_check(str(p), x, {"scale": 0.125}, {"T": "float16"}, gen_dir=tmp_path / "gen", progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    want = oracle(x["q"], x["k"], x["v"], 0.125, False)
    assert_close({"attention_out": r.arrays["o"], "softmax_max": want["softmax_max"],
                  "softmax_sum": want["softmax_sum"]}, want, "float16", d, s)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.slow
def test_the_aclnn_layer_refuses_another_input_layout(gen):
    """The emitted aclnnFlashAttentionScoreGetWorkspaceSize returns CANN's ACLNN_ERR_PARAM_INVALID (161002) with one
    line naming inputLayout and its choices for "BSH"; the valid call with "BNSD" returns 0."""
    from opgen.check.aclnn import call_attrs, call_outputs, device_dtypes, encode_call, run_runner
    from opgen.check.run import aclnn_runner
    from opgen.codegen.model import OpModel
    from opgen.dsl.examples import random_inputs
    from opgen.registry import load_spec

    spec = load_spec(str(SPEC))
    dims = {"B": 1, "N1": 2, "N2": 2, "S1": 3, "S2": 3, "D": 16, "MS1": 3, "MS2": 3}
    attrs, dt = {"input_layout": "BNSD", "sparse_mode": 0, "head_num": 2}, {"T": "float16", "M": "bool"}
    inputs = {k: v for k, v in random_inputs(spec, dims, attrs, dt, seed=0).items() if v is not None}
    inputs.pop("atten_mask", None)
    dev = device_dtypes(spec, inputs, dict(dt))
    names = {k: getattr(v, "long_name", v) for k, v in dev.items()}
    m = OpModel(spec)
    base = encode_call(m, inputs, call_attrs(spec, inputs, attrs), call_outputs(spec, inputs, attrs, dict(dt), dev),
                       names).split(" ")
    at = next(k for k, a in enumerate(m.api_params) if a.cpp == "inputLayout")
    assert base[at] == "BNSD"
    _, runner = aclnn_runner(spec, gen_dir=gen)
    got = run_runner(runner, [" ".join(base[:at] + [v] + base[at + 1:]) for v in ("BNSD", "SBH")])
    assert got[0][0] == 0, got[0]
    assert got[1][0] == 161002 and "inputLayout: must be one of 'BNSD', 'BSND', 'BSH', got 'SBH'" in got[1][1], got[1]

    # BSH: D = H1 / headNum, N2 = H2 / D bound in the layer; a headNum that does not divide H1 is refused
    attrs = {"input_layout": "BSH", "sparse_mode": 0, "head_num": 2}
    inputs = {k: v for k, v in random_inputs(spec, dims, attrs, dt, seed=0).items() if v is not None}
    inputs.pop("atten_mask", None)
    assert inputs["query"].shape == (1, 3, 32)
    base = encode_call(m, inputs, call_attrs(spec, inputs, attrs), call_outputs(spec, inputs, attrs, dict(dt), dev),
                       names).split(" ")
    hn = next(k for k, a in enumerate(m.api_params) if a.cpp == "headNum")
    assert base[hn] == "2"
    got = run_runner(runner, [" ".join(base[:hn] + [v] + base[hn + 1:]) for v in ("2", "3", "1")])
    assert got[0][0] == 0, got[0]
    assert got[1] == (161002, "query: shape [1, 3, 32]: dim 2 is 32, not D * N1 for any whole D with N1=3 "
                              "(from headNum)"), got[1]
    # headNum 1 reads D = 32 and N2 = 1: the outputs made for two heads no longer fit
    assert got[2] == (161002, "softmaxMaxOut: shape [1, 2, 3, 8] must be [1, 1, 3, 8] ([B, N1, S1, 8])"), got[2]


# ------------------------------------------------------------------ every placed sync is needed (a mutation test)
MUTANT_CASES = (   # (dims, dtype, sparse_mode, UB bytes the TilingFunc plans with: None = the platform's)
    # one unit of one row (one AIV), two online softmax items (512 keys in two 256-key chunks, then 32)
    (dict(B=1, N1=1, N2=1, S1=1, S2=541, D=16), "bfloat16", 0, None),
    (dict(B=1, N1=1, N2=1, S1=1, S2=533, D=16), "bfloat16", 3, None),
    # G = 16, one query row a unit: 28 units over 24 AI Cores, 8 rows an AIV in UB passes of 2 or 3 rows (2 KiB)
    (dict(B=1, N1=16, N2=1, S1=28, S2=37, D=16), "float16", 0, 2048),
    (dict(B=1, N1=16, N2=1, S1=28, S2=20, D=16), "bfloat16", 2, 2048),
    (dict(B=1, N1=16, N2=1, S1=28, S2=45, D=16), "float16", 3, 2048),
    # causal rows past 512 keys: 25 units of 22 rows, the last a 1-row tail (S1 = 24 * 22 + 1)
    (dict(B=1, N1=1, N2=1, S1=529, S2=529, D=16), "float16", 2, None),
)

REDUNDANT = {   # (method, comment, the statement after the sync) -> in how many of the three classes it survives
    # MaskAfter's scalar lanes end on the 32-byte block where its Duplicate starts; only a later call's Duplicate
    # over them races: sparse_mode 2 (a causal edge past the key-length edge), not 0 (one call) nor 3 (S1 <= S2)
    ("MaskAfter", "rowBuf_: V writes after S's write", "Duplicate"): 2,
}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_deleting_any_one_placed_sync_of_the_kernel_is_a_race(gen, tmp_path, monkeypatch, session_build_root):
    """The emitted mixed kernel (every in-core flag and barrier placed by the dependency pass, opgen.kernel.kir_sync),
    built once with each placed sync guarded (tests/mutants.py): the BNSD classes of sparse_mode 0, 2 and 3 run the
    cases unmutated with no fault (launch only), then, for each site they reach (every one of the three classes),
    the same binary with only that site skipped fails `check` with a race fault (the emulation's race detector) in
    a case that reaches it, except the named syncs no execution needs (REDUNDANT, findings on the pass): exactly
    those survive. The cases put mask edges inside and at the end of 8-lane groups (both masks in one row under
    sparse_mode 2 with S1 > S2), several units an AI Core, items of several key chunks, and one row an AIV; the
    TilingFunc plans the G = 16 cases with 2 KiB of UB (a test edit of the copy: on A2 / A3, 192 KiB, an AIV holds at
    most 64 rows and a UB pass at least 41, so no shape gives a second full pass, which the V_MTE2 at the head of
    VecItem's passes orders against the last row's Cast)."""
    import collections
    import re

    from mutants import guard_package, reach_then_mutate, site_key

    snake = "flash_attention_score"
    orig, sites = guard_package(gen / snake, tmp_path / "gen", snake)
    tiling = tmp_path / "gen" / snake / "op_host" / f"{snake}_tiling.cpp"
    ub = "    platform.GetCoreMemSize(platform_ascendc::CoreMemType::UB, info.ubSize);\n"
    src = tiling.read_text()
    assert src.count(ub) == 1
    getenv = '    if (const char* e = std::getenv("OPGEN_TEST_UB")) info.ubSize = std::strtoull(e, nullptr, 10);\n'
    tiling.write_text("#include <cstdlib>\n" + src.replace(ub, ub + getenv))   # a test edit of the copy

    def check(case):
        dims, dtype, mode, ub_bytes = case
        if ub_bytes:
            monkeypatch.setenv("OPGEN_TEST_UB", str(ub_bytes))
        else:
            monkeypatch.delenv("OPGEN_TEST_UB", raising=False)
        return run_check(str(SPEC), dims={**dims, "MS1": dims["S1"], "MS2": dims["S2"]}, dtypes={"T": dtype},
                         attrs={"sparse_mode": mode, "input_layout": "BNSD"}, gen_dir=tmp_path / "gen", seed=1,
                         present=["atten_mask"] if mode else [], build_root=session_build_root, progress=False,
                         golden=False)   # a race is a fault: no golden needed

    reached, survivors = reach_then_mutate(sites, MUTANT_CASES, check, monkeypatch, tmp_path / "reached.txt")
    flags = {re.search(r"HardEvent::(\w+)", sites[k][2]).group(1) for k in reached if "SetFlag" in sites[k][2]}
    assert len(reached) >= 86 and {"MTE2_MTE1", "MTE1_M", "M_MTE1", "M_FIX", "FIX_M", "MTE1_MTE2", "MTE2_V", "V_MTE2",
                                   "V_S", "S_V"} <= flags, (len(reached), flags)
    assert collections.Counter(site_key(orig, ln, stmt) for ln, stmt, _f in survivors) == REDUNDANT, survivors


def test_the_check_harness_sizes_outputs_by_a_dimension_bound_attribute_when_the_call_does_not_validate():
    """`opgen check` allocates the outputs before the spec's validation (the emitted aclnn layer judges the call
    first). For a call that does not validate (rightDownCausal with more query rows than keys), the best effort
    binds the dim a dimension-bound attribute gives (N1 = head_num, which the BSH shapes do not hold alone) as the
    interpreter's validation does: softmax_max is [B, N1, S1, 8], not [1] (trial 29: a PromptFlashAttention mask
    of 0 / 2 values was reported by the aclnn layer as `attentionOut: shape [1] must be [2, 33, 128]` instead of
    the interpreter's `expected bool values (0/1)`)."""
    from opgen.check.aclnn import call_outputs, device_dtypes
    from opgen.registry import load_spec

    spec = load_spec(str(SPEC))
    rng = np.random.default_rng(0)
    inputs = {"query": rng.standard_normal((1, 9, 64)).astype(np.float16),
              "key": rng.standard_normal((1, 7, 32)).astype(np.float16),
              "value": rng.standard_normal((1, 7, 32)).astype(np.float16),
              "atten_mask": np.zeros((9, 7), np.uint8)}
    attrs = {"head_num": "2", "input_layout": "BSH", "sparse_mode": "3"}
    with pytest.raises(ValidationError, match="S1 <= S2"):
        spec.bind(inputs, attrs, {})
    got = call_outputs(spec, inputs, attrs, {}, device_dtypes(spec, inputs, {}), None)
    assert got == {"softmax_max": ("float32", (1, 2, 9, 8)), "softmax_sum": ("float32", (1, 2, 9, 8)),
                   "attention_out": ("float16", (1, 9, 64))}
