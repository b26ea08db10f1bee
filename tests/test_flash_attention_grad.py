"""FlashAttentionScoreGrad (examples/specs/flash_attention_score_grad.py): the dense attention backward, interpreted
and as its emitted kernel (emulated; its Kernel IR interpreted), against torch autograd of the forward in float64.

The oracle: softmax(mask(scale * Q Kᵀ)) V per (batch, query head, kv head = head // G) written in torch in float64
(leftUpCausal: key j after query row s excluded; rightDownCausal: key j after s + S2 - S1), `.backward(dy)`; dq,
dk, dv are the leaves' gradients. The spec's saved inputs (softmax_max, softmax_sum fp32, attention_in in T) are
made from the same float64 forward, as CANN's forward would hand them over.

Error bounds (derived, not measured; u_T = 2^-11 fp16, 2^-8 bf16, per the spec's rounding):
  * attention_in rounded to T moves D_r = sum_d dy_d o_d by at most u_T R (R = sum_d |dy_d o_d|), so dS_ij by
    P_ij u_T R; dS / scale = P (dP - D_r) rounded to T moves each term by u_T |P (dP - D_r)|;
    with A_ij = |P_ij (dP_ij - D_r)| + P_ij R:  |Δdq_id| <= 2 u_T scale sum_j A_ij |K_jd|,
    |Δdk_jd| <= 2 u_T scale sum_{g,i} A_ij |Q_id|;
  * P rounded to T before Pᵀ dy: |Δdv_jd| <= u_T sum_{g,i} P_ij |dy_id|;
  * the final rounding to T: u_T |value|; fp32 intermediates (statistics, products, D-term and key-term sums) stay
    far below u_T of the same terms at these sizes.
The test takes twice the derived bound plus the final rounding, and asserts the bound is below the gradients' size
and that a backward leaving D_r out (dS = P dP scale) falls outside it (it would not hide a wrong formula).
"""

from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch

from opgen.interp import interpret

ROOT = Path(__file__).resolve().parent
SPEC = ROOT.parent / "examples" / "specs" / "flash_attention_score_grad.py"
UNIT = {"float16": 2.0**-11, "bfloat16": 2.0**-8}
NP_T = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
FLT_MAX = 3.4028234663852886e38


def _future(s1: int, s2: int, sparse_mode: int) -> np.ndarray:
    """[S1, S2] bool: key j is masked for query row s (after s under leftUpCausal, after s + S2 - S1 under
    rightDownCausal, nothing under sparse_mode 0)."""
    if sparse_mode == 0:
        return np.zeros((s1, s2), np.bool_)
    shift = 0 if sparse_mode == 2 else s2 - s1
    return np.arange(s2)[None, :] > np.arange(s1)[:, None] + shift


def _forward_torch(q, k, v, scale, future):
    """float64 BNSD forward: q [B, N1, S1, D], k / v [B, N2, S2, D] -> (out, scores)."""
    g = q.shape[1] // k.shape[1]
    kk, vv = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = (q @ kk.transpose(-1, -2)) * scale
    s = s.masked_fill(torch.from_numpy(future), -FLT_MAX)
    return torch.softmax(s, -1) @ vv, s


def _case(rng, dims, dtype, sparse_mode, scale, layout):
    """Inputs in T (as the layout stores them), the saved forward outputs, and the float64 autograd gradients and
    error bounds in BNSD."""
    B, N1, N2, S1, S2, D = (dims[k] for k in ("B", "N1", "N2", "S1", "S2", "D"))
    t = NP_T[dtype]
    q, k, v, dy = (rng.normal(size=s).astype(t).astype(np.float64)
                   for s in ((B, N1, S1, D), (B, N2, S2, D), (B, N2, S2, D), (B, N1, S1, D)))
    fut = _future(S1, S2, sparse_mode)
    qt, kt, vt = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (q, k, v))
    out, s = _forward_torch(qt, kt, vt, scale, fut)
    out.backward(torch.tensor(dy))
    m = s.amax(-1, keepdim=True).detach().numpy()
    lsum = torch.exp(s - s.amax(-1, keepdim=True)).sum(-1, keepdim=True).detach().numpy()
    o = out.detach().numpy()
    want = {"dq": qt.grad.numpy(), "dk": kt.grad.numpy(), "dv": vt.grad.numpy()}

    # bound helpers, float64 NumPy (module doc)
    g = N1 // N2
    kk, vv = np.repeat(k, g, 1), np.repeat(v, g, 1)
    p = np.exp(s.detach().numpy() - m) / lsum
    dp = dy @ vv.transpose(0, 1, 3, 2)
    o_t = o.astype(t).astype(np.float64)
    dr = (dy * o_t).sum(-1, keepdims=True)
    r = np.abs(dy * o_t).sum(-1, keepdims=True)
    a = np.abs(p * (dp - dr)) + p * r                                            # [B, N1, S1, S2]
    u = UNIT[dtype]
    grp = lambda x: x.reshape(B, N2, g, *x.shape[2:]).sum(2)                     # noqa: E731 (sum over the group)
    bound = {"dq": 2 * u * scale * (a @ np.abs(kk)),
             "dk": 2 * u * scale * grp(a.transpose(0, 1, 3, 2) @ np.abs(q)),
             "dv": u * grp(p.transpose(0, 1, 3, 2) @ np.abs(dy))}
    bound = {n: 2 * b + u * np.abs(want[n]) + 1e-30 for n, b in bound.items()}
    wrong = {"dq": scale * ((p * dp) @ kk), "dk": scale * grp((p * dp).transpose(0, 1, 3, 2) @ q)}   # D_r left out

    def store(x):   # BNSD -> the layout's storage, in T
        return (x.transpose(0, 2, 1, 3) if layout == "BSND" else x).astype(t)

    inputs = {"query": store(q), "key": store(k), "value": store(v), "dy": store(dy),
              "atten_mask": np.ones((S1, S2), np.bool_) if sparse_mode else None,
              "softmax_max": np.repeat(m, 8, -1).astype(np.float32),
              "softmax_sum": np.repeat(lsum, 8, -1).astype(np.float32),
              "attention_in": store(o)}
    return inputs, want, bound, wrong


CASES = [
    # name, dims, dtype, sparse_mode, scale
    ("g1_dense_f16", dict(B=1, N1=1, N2=1, S1=5, S2=7, D=16), "float16", 0, 0.25),
    ("g2_dense_bf16_odd", dict(B=2, N1=4, N2=2, S1=9, S2=33, D=32), "bfloat16", 0, 0.125),
    ("g3_leftup_f16_odd", dict(B=1, N1=3, N2=1, S1=17, S2=23, D=16), "float16", 2, 0.3),
    ("g2_leftup_bf16_square", dict(B=2, N1=2, N2=1, S1=19, S2=19, D=16), "bfloat16", 2, 0.5),
    ("g2_rightdown_f16", dict(B=1, N1=4, N2=2, S1=11, S2=29, D=32), "float16", 3, 0.2),
    ("g4_rightdown_bf16_odd", dict(B=1, N1=4, N2=1, S1=13, S2=13, D=16), "bfloat16", 3, 0.25),
]


@pytest.mark.parametrize("layout", ["BNSD", "BSND"])
@pytest.mark.parametrize("name, dims, dtype, sparse_mode, scale", CASES, ids=[c[0] for c in CASES])
def test_interpreted_gradients_equal_torch_autograd(name, dims, dtype, sparse_mode, scale, layout):
    """dq, dk, dv of the interpreted spec (device mode: P and dS rounded to T, outputs to T) within the module's
    derived bounds of torch autograd in float64: odd S1 / S2, GQA G = 1..4, both layouts, dense and both causal
    modes, fp16 and bf16."""
    rng = np.random.default_rng(abs(hash((name, layout))) % 2**32)
    inputs, want, bound, wrong = _case(rng, dims, dtype, sparse_mode, scale, layout)
    attrs = {"scale_value": scale, "head_num": dims["N1"], "input_layout": layout, "sparse_mode": sparse_mode}
    got = interpret(str(SPEC), inputs, attrs, {"T": dtype, "M": "bool"})
    for n in ("dq", "dk", "dv"):
        x = np.asarray(got[n]).astype(np.float64)
        if layout == "BSND":
            x = x.transpose(0, 2, 1, 3)
        assert x.shape == want[n].shape, (n, x.shape)
        err = np.abs(x - want[n])
        assert (err <= bound[n]).all(), (n, float((err / bound[n]).max()))
        # the bound is no blanket: below the gradient's size, and a backward without D_r falls outside it
        assert np.median(bound[n]) < 0.25 * np.abs(want[n]).mean(), n
        if n in wrong:
            assert (np.abs(wrong[n] - want[n]) > bound[n]).any(), n


def test_causal_masking_reaches_the_gradients():
    """Under leftUpCausal a key no query row sees gets dk = dv = 0 exactly (S2 > S1: keys S1 .. S2 - 1), and with
    sparse_mode 0 the same keys do not (the mask is what removes them, not the data)."""
    dims = dict(B=1, N1=2, N2=1, S1=5, S2=9, D=16)
    rng = np.random.default_rng(3)
    for mode in (2, 0):
        inputs, want, _, _ = _case(rng, dims, "float16", mode, 0.5, "BNSD")
        got = interpret(str(SPEC), inputs, {"scale_value": 0.5, "head_num": 2, "input_layout": "BNSD",
                                            "sparse_mode": mode}, {"T": "float16", "M": "bool"})
        tail = [np.abs(np.asarray(got[n], np.float64)[:, :, 5:]).max() for n in ("dk", "dv")]
        assert (max(tail) == 0) == (mode == 2), (mode, tail)


def test_example_inputs_are_the_forward_of_the_random_inputs():
    """The spec's @spec.example makes softmax_max / softmax_sum / attention_in from query, key, value: the
    float64 forward of the inputs (rightDownCausal, BSND, GQA G = 2): the statistics to fp32, attention_in to T."""
    from opgen.dsl.examples import random_inputs
    from opgen.registry import load_spec

    spec = load_spec(str(SPEC))
    dims = dict(B=1, N1=2, N2=1, S1=7, S2=12, D=16)
    attrs = {"scale_value": 0.25, "head_num": 2, "input_layout": "BSND", "sparse_mode": 3}
    inputs = random_inputs(spec, {**dims, "MS1": 2, "MS2": 2}, attrs, {"T": "float16", "M": "bool"}, seed=5)
    q, k, v = (torch.tensor(np.asarray(inputs[n], np.float64).transpose(0, 2, 1, 3)) for n in ("query", "key", "value"))
    out, s = _forward_torch(q, k, v, 0.25, _future(7, 12, 3))
    np.testing.assert_allclose(inputs["softmax_max"][..., 0], s.amax(-1).numpy(), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(inputs["attention_in"], np.float64).transpose(0, 2, 1, 3), out.numpy(),
                               rtol=2.0**-10, atol=2.0**-10 * np.abs(out.numpy()).max())


def _layouts(path) -> dict:
    """{(input_layout, sparse_mode): AttentionLayout} of every specialisation of the spec at `path`."""
    from opgen.kernel.attention import attention_layout
    from opgen.passes.pipeline import optimize
    from opgen.registry import load_spec

    spec = load_spec(str(path))
    return {k.static: attention_layout(optimize(spec.graph(k))) for k in spec.keys()}


def _edited_spec(tmp_path, edits, name="fag_edit.py"):
    src = SPEC.read_text()
    for old, new in edits:
        assert old in src, old
        src = src.replace(old, new)
    p = tmp_path / name
    p.write_text(src)
    return p


def test_the_dense_backward_layout_and_roles_are_read_off_the_structure(tmp_path):
    """Every specialisation (BNSD / BSND x sparse_mode 0 / 2 / 3) is read as a dense attention backward: the
    query / key / value, dO (the input dP = dO Vᵀ multiplies by the value, though it is transposed B like the
    score matmul), the saved max (subtracted before exp) and sum (divided after), GQA roles N1 / N2 apart, the
    form from the input_layout. Renaming every dim and input gives the same roles in the new names (they are read
    off the matmuls' operands, not names)."""
    import re

    lays = _layouts(SPEC)
    assert sorted(lays) == [("BNSD", 0), ("BNSD", 2), ("BNSD", 3), ("BSND", 0), ("BSND", 2), ("BSND", 3)]
    for (form, _), lay in lays.items():
        assert lay.keyset == "dense" and lay.form == form
        assert (lay.query, lay.key, lay.value) == ("query", "key", "value")
        assert dict(lay.grad) == {"dO": "dy", "max": "softmax_max", "sum": "softmax_sum"}
        assert dict(lay.dims) == {"B": "B", "N1": "N1", "S1": "S1", "D": "D", "N2": "N2", "S2": "S2", "Dv": "D"}
        assert "dense keys backward" in lay.text() and "dO dy, max softmax_max, sum softmax_sum" in lay.text()
    src = SPEC.read_text()
    for old, new in (("B", "Zb"), ("N2", "Kh"), ("S1", "Qs"), ("S2", "Ks"), ("N1", "Qh"), ("D", "Hd"),
                     ("dy", "grad_out"), ("softmax_max", "row_max"), ("softmax_sum", "row_sum"),
                     ("query", "qq"), ("key", "kk"), ("value", "vv")):
        src = re.sub(rf"(?<![\w]){old}(?![\w])", new, src)
    p = tmp_path / "renamed_grad.py"
    p.write_text(src.replace("FlashAttentionScoreGrad", "RenamedAttentionGrad"))
    for lay in _layouts(p).values():
        assert (lay.query, lay.key, lay.value) == ("qq", "kk", "vv")
        assert dict(lay.grad) == {"dO": "grad_out", "max": "row_max", "sum": "row_sum"}
        assert dict(lay.dims) == {"B": "Zb", "N1": "Qh", "S1": "Qs", "D": "Hd", "N2": "Kh", "S2": "Ks", "Dv": "Hd"}


def test_the_forward_layout_has_no_backward_roles():
    """The forward FlashAttentionScore keeps its layout: no backward roles, its text unchanged."""
    lays = _layouts(ROOT.parent / "examples" / "specs" / "flash_attention_score.py")
    assert lays and all(lay.grad == () and "backward" not in lay.text() for lay in lays.values())


@pytest.mark.parametrize("what, edits, msg", [
    ("the softmax recomputed", [("m = softmax_max.slice(-1, 0, 1).reshape([B, N2, G, S1, 1])",
                                 "m = scores.max(-1)")],
     "P must be recomputed from the forward's saved statistics as exp(scores - softmax_max) / softmax_sum"),
    ("dQ against the value", [("dq = b.matmul(ds, kg)", "dq = b.matmul(ds, vg)")],
     "dQ = dS K must read the key as its B operand"),
    ("dV against the query", [("dv = b.matmul(p, dyg, transpose_a=True)", "dv = b.matmul(p, qg, transpose_a=True)")],
     "dK = dSᵀ Q and dV = Pᵀ dO must read the query and the output gradient dy as their B operands"),
    ("dP against the key", [("dp = b.matmul(dyg, vg, transpose_b=True)", "dp = b.matmul(dyg, kg, transpose_b=True)")],
     "dP = dO Vᵀ must multiply an output-gradient input by a value input"),
    ("no dV", [("dv = b.matmul(p, dyg, transpose_a=True).sum(2, keepdims=False)", "dv = value.cast(f32)")],
     "has 4 matmuls: its forward has two (the scores, P V), its backward five"),
])
def test_a_dense_backward_in_another_shape_is_refused_in_the_users_terms(what, edits, msg, tmp_path):
    """A backward that recomputes the softmax instead of reading the saved max, or whose matmuls read other
    operands than FlashAttention-2's dP = dO Vᵀ, dQ = dS K, dK = dSᵀ Q, dV = Pᵀ dO, or that has another number of
    matmuls, is refused by the layout naming the product that differs."""
    from opgen.kernel.rowlayout import Unsupported

    p = _edited_spec(tmp_path, edits)
    with pytest.raises(Unsupported, match=r"dense attention (backward: )?" + re.escape(msg)):
        _layouts(p)


def _programs(path) -> dict:
    """{(input_layout, sparse_mode): AttentionProgram} of every specialisation of the spec at `path`."""
    from opgen.kernel.attention import attention_layout
    from opgen.kernel.attnprog import lower
    from opgen.passes.pipeline import optimize
    from opgen.registry import load_spec

    spec = load_spec(str(path))
    out = {}
    for k in spec.keys():
        g = optimize(spec.graph(k))
        lay = attention_layout(g)
        out[k.static] = lower(g, lay.tokens, lay.dtype, lay.keyset, lay.form)
    return out


BWD_VECTOR = ["ld_tile", "muls", "ld_stat", "adds", "exp", "ld_stat", "muls", "ld_head", "ld_head", "vmul", "rsum",
              "ld_tile", "adds", "vmul", "st_tile", "st_tile"]
"""The backward's vector phase, read off the spec by hand: S tile * scale, - max, exp, * 1 / sum (P); dO * O summed
over the head dim (D_r, once per unit); dP tile - D_r, * P (dS / scale); dS and P stored as T for the cube (a causal
mask goes after the scale)."""
BWD_CUBE = [("NT", 1, "tile", "heads", "gather"), ("NT", 1, "tile", "heads", "gather"),
            ("NN", 2, "acc", "tile", "gather"), ("TN", 2, "scatter", "tile", "heads"),
            ("TN", 2, "scatter", "tile", "heads")]
"""The backward's matmuls (form, phase, destination, A, B): S = Q Kᵀ and dP = dO Vᵀ to fp32 tiles before the vector
phase; after it dQ = dS K accumulated over the key chunks, dK = dSᵀ Q and dV = Pᵀ dO added at the chunk's key rows
of an fp32 workspace (the sum over the unit's query rows and its G heads is the TN product's contraction)."""


def test_the_dense_backward_lowers_to_the_selected_backwards_phases():
    """Every specialisation lowers to the phases NsaSelectedAttentionGrad's program has (BWD_CUBE, BWD_VECTOR, the
    mask added under sparse_mode 2 / 3): P recomputed from the saved max / sum (no online softmax, no reduction over
    the keys), max / sum / D_r per unit, dq / dk scaled and every gradient cast to T with rint after the sum."""
    progs = _programs(SPEC)
    assert len(progs) == 6
    for (form, mode), p in progs.items():
        vec = [i.kind for i in p.vector]
        want = BWD_VECTOR if mode == 0 else BWD_VECTOR[:2] + ["mask"] + BWD_VECTOR[2:]
        assert vec == want, (form, mode, vec)
        assert [(c.form, c.phase, c.dest, c.a.kind, c.b.kind) for c in p.cube] == BWD_CUBE
        assert [(c.a.tensor, c.b.tensor) for c in p.cube][:2] == [("query", "key"), ("dy", "value")]
        assert [(c.target, c.b.tensor) for c in p.cube][2:] == [("dq", "key"), ("dk", "query"), ("dv", "dy")]
        assert p.keyset == "dense" and p.form == form and not p.online and not p.full_rows
        assert p.causal == (mode != 0) and (p.causal_offset is not None) == (mode == 3)
        assert sorted(p.tiles.values()) == ["T", "T", "f32", "f32"] and len(p.stats) == 3
        assert [(o.output, o.scale, o.round) for o in p.post] == [("dq", "attr_scale_value", "CAST_RINT"),
                                                                   ("dk", "attr_scale_value", "CAST_RINT"),
                                                                   ("dv", "", "CAST_RINT")]
        assert [i.arg for i in p.vector if i.kind == "ld_stat"] == ["softmax_max", "softmax_sum"]
        assert [i.arg for i in p.vector if i.kind == "ld_head"] == ["dy", "attention_in"]


def test_the_dense_backward_without_gqa_lowers_the_same(tmp_path):
    """Query heads equal to the kv heads (no group dim: the sum over G is over one head) give the same program."""
    src = SPEC.read_text().replace('N1 = spec.dim("N1")\n', "").replace("N2", "N1")
    p = tmp_path / "fag_mha.py"
    p.write_text(src)
    lays = _layouts(p)
    assert all(dict(lay.dims)["N2"] == dict(lay.dims)["N1"] == "N1" for lay in lays.values())
    for (form, mode), prog in _programs(p).items():
        assert [(c.form, c.phase, c.dest, c.a.kind, c.b.kind) for c in prog.cube] == BWD_CUBE
        assert [i.kind for i in prog.vector if i.kind != "mask"] == BWD_VECTOR


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    """The spec's package generated into a fresh tree."""
    from opgen.codegen import write_ops

    out = tmp_path_factory.mktemp("fag")
    write_ops([str(SPEC)], out)
    return out


def _kernel_case(name, dims, dtype, sparse_mode, scale, layout, gen, engine="emu", deterministic=False):
    """The emitted kernel run on a case of `_case` (emulated, or its Kernel IR interpreted): the CheckResult and
    each gradient's error over its derived bound (module doc), in BNSD."""
    from opgen.check import run_check

    rng = np.random.default_rng(sum(dims.values()) + sparse_mode)
    inputs, want, bound, _wrong = _case(rng, dims, dtype, sparse_mode, scale, layout)
    if dtype == "bfloat16":   # bf16 arrays go in as float32 with the dtype binding (run_check, as `interpret`)
        inputs = {k: (v.astype(np.float32) if v is not None and v.dtype == ml_dtypes.bfloat16 else v)
                  for k, v in inputs.items()}
    attrs = {"scale_value": scale, "head_num": dims["N1"], "input_layout": layout, "sparse_mode": sparse_mode}
    r = run_check(str(SPEC), inputs, attrs, {"T": dtype, "M": "bool"}, gen_dir=gen, progress=False,
                  present=["atten_mask"] if sparse_mode else [], engine=engine, deterministic=deterministic)
    assert not r.faults and not r.traps and r.passed, (name, r.faults[:3], r.traps[:3],
                                                       {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    ratio = {}
    for n in ("dq", "dk", "dv"):
        x = np.asarray(r.arrays[n], np.float64)
        x = x.transpose(0, 2, 1, 3) if layout == "BSND" else x
        assert x.shape == want[n].shape, (n, x.shape)
        ratio[n] = float((np.abs(x - want[n]) / bound[n]).max())
    return r, ratio


KERNEL_CASES = [
    # name, dims, dtype, sparse_mode, scale, layout
    ("g1_dense_f16_s2tail", dict(B=1, N1=1, N2=1, S1=5, S2=7, D=16), "float16", 0, 0.25, "BNSD"),
    ("g2_dense_bf16_core_tail", dict(B=2, N1=4, N2=2, S1=9, S2=33, D=32), "bfloat16", 0, 0.125, "BNSD"),
    ("g3_leftup_f16_odd", dict(B=1, N1=3, N2=1, S1=17, S2=23, D=16), "float16", 2, 0.3, "BNSD"),
    ("g2_leftup_bf16_rows_chunks", dict(B=2, N1=2, N2=1, S1=130, S2=270, D=32), "bfloat16", 2, 0.2, "BNSD"),
    ("g4_rightdown_f16_d128", dict(B=1, N1=8, N2=2, S1=77, S2=300, D=128), "float16", 3, 0.09, "BNSD"),
    ("bsnd_g2_rightdown_f16", dict(B=1, N1=4, N2=2, S1=11, S2=29, D=32), "float16", 3, 0.2, "BSND"),
    ("bsnd_g2_dense_bf16_rows_chunks", dict(B=1, N1=4, N2=2, S1=300, S2=301, D=64), "bfloat16", 0, 0.125, "BSND"),
    ("bsnd_g1_leftup_bf16", dict(B=2, N1=3, N2=3, S1=19, S2=19, D=48), "bfloat16", 2, 0.5, "BSND"),
    ("g40_two_head_groups_f16_d512", dict(B=1, N1=40, N2=1, S1=3, S2=20, D=512), "float16", 2, 0.05, "BNSD"),
    ("g2_leftup_f16_s1_above_s2", dict(B=1, N1=2, N2=1, S1=40, S2=20, D=16), "float16", 2, 0.3, "BNSD"),
]


@pytest.mark.slow
@pytest.mark.parametrize("case", KERNEL_CASES, ids=[c[0] for c in KERNEL_CASES])
def test_the_emitted_kernel_is_within_the_bounds_of_torch_autograd(case, gen):
    """The emitted mixed kernel (emulated: zero faults, opgen's CANN-rule comparison with the interpreter passed)
    within the module's derived bounds of torch autograd in float64: S1 / S2 not multiples of the 16-key block, GQA
    G = 1..4, both layouts, no mask and both causal modes, fp16 and bf16, units that do not divide the AI Cores
    (24 AI Cores; 36 units), units of several query rows over several key chunks (the dQ accumulator written
    after the unit's last chunk, dK / dV added at each chunk's rows, the pad keys after S2 left out), G = 40 above
    the 32 rows D = 512 allows (two head groups per kv head), leftUpCausal with more query rows than keys."""
    _r, ratio = _kernel_case(*case, gen)
    assert max(ratio.values()) <= 1, ratio


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["emu", "kir"])
def test_the_deterministic_schedule_is_within_the_bounds(engine, gen):
    """When the framework asks for deterministic computation the tiling picks strategy 2 (the AI Cores add dK / dV
    in turn, every AIC taking every turn though its causal units have fewer key chunks): emulated and on the
    Kernel IR interpreter, within the bounds."""
    case = ("det_leftup_bsnd", dict(B=2, N1=2, N2=1, S1=40, S2=70, D=32), "bfloat16", 2, 0.2, "BSND")
    r, ratio = _kernel_case(*case, gen, engine=engine, deterministic=True)
    assert max(ratio.values()) <= 1, ratio
    if engine == "emu":
        assert r.tiling_key % 10 == 2, r.tiling_key


def test_the_kernel_ir_engine_runs_the_backward(gen):
    """The kernel's Kernel IR on the NumPy interpreter (no build): GQA, rightDownCausal, the pad keys after S2."""
    case = ("kir_rightdown", dict(B=1, N1=4, N2=2, S1=11, S2=29, D=32), "float16", 3, 0.2, "BNSD")
    _r, ratio = _kernel_case(*case, gen, engine="kir")
    assert max(ratio.values()) <= 1, ratio


DET_CASE = ("det_turns", dict(B=1, N1=1, N2=1, S1=3, S2=20, D=16), "float16", 0, 0.25, "BNSD")
"""The smallest deterministic case where AI Cores contend: one query row per unit (S1 = 3 rows spread over the AI
Cores), so three AICs, each adding its dK / dV of the same 20 keys into the fp32 workspaces in its turn."""
TURN_BARRIER = re.compile(r"^(\s*)(CrossCoreSetFlag<0, PIPE_FIX>\((\d+)\);)[^\n]*\n\s*(CrossCoreWaitFlag\(\3\);)", re.M)
"""The deterministic schedule's turn barrier (opgen.kernel.attnclass FLAG_TURN): an all-AIC set and its wait."""


def _det_check(gen, golden=True, engine="emu"):
    """run_check of DET_CASE with the framework's deterministic flag on the package in `gen` (`engine`: run_check's)."""
    from opgen.check import run_check

    _name, dims, dtype, sparse_mode, scale, layout = DET_CASE
    rng = np.random.default_rng(sum(dims.values()) + sparse_mode)
    inputs = _case(rng, dims, dtype, sparse_mode, scale, layout)[0]
    attrs = {"scale_value": scale, "head_num": dims["N1"], "input_layout": layout, "sparse_mode": sparse_mode}
    return run_check(str(SPEC), inputs, attrs, {"T": dtype, "M": "bool"}, gen_dir=gen, progress=False,
                     deterministic=True, golden=golden, engine=engine)


@pytest.mark.slow
def test_deleting_a_turn_barrier_of_the_deterministic_schedule_is_an_add_order_fault(gen, tmp_path, monkeypatch):
    """The deterministic backward orders the AI Cores' fp32 atomic adds into the dk / dv workspaces by an all-AIC
    barrier after every turn. With the framework's deterministic flag the emulation faults on two float atomic adds
    of different cores to the same bytes that nothing orders (emu::DeterministicAdds, opgen/emu/include/EMU.md).
    The kernel built once with each turn's barrier guarded (tests/mutants.py: OPGEN_MUTANT = the turn skipped):
    unmutated it passes within the bounds; without the barrier of turn k < 2 the adds of AIC k and AIC k + 1 are
    unordered and `check` faults naming both cores' Fixpipe; the last turn's barrier orders no two adds (one round of
    one key chunk: nothing is added after it) and skipping it passes."""
    import shutil

    from mutants import GUARD

    shutil.copytree(gen, tmp_path / "gen")
    h = tmp_path / "gen" / "flash_attention_score_grad" / "op_kernel" / "flash_attention_score_grad.h"
    orig = h.read_text()
    text, n = TURN_BARRIER.subn(r"\1if (OpgenKeep(turn)) { \2 \4 }", orig)
    assert n >= 1 and n == orig.count("for (int64_t turn = 0; turn < GetBlockNum(); ++turn) {"), n
    text = text.replace('#include "kernel_operator.h"\n', '#include "kernel_operator.h"\n' + GUARD, 1)
    h.write_text(text)
    fixpipes = {i + 1 for i, t in enumerate(text.split("\n")) if "Fixpipe" in t}
    r = _det_check(tmp_path / "gen")
    assert r.passed and not r.faults and r.tiling_key % 10 == 2 and r.block_dim == 3, (r.faults[:1], r.block_dim)
    for turn in range(r.block_dim):
        monkeypatch.setenv("OPGEN_MUTANT", str(turn))
        m = _det_check(tmp_path / "gen", golden=False)   # judged by its faults: no float64 interpretation
        if turn == r.block_dim - 1:
            assert m.passed and not m.faults, m.faults[:1]
            continue
        assert not m.passed and m.faults, turn
        f = re.match(r"\[AIC (\d+)\] race \(add-after-add\) between cores on GM tensor 'workspace' bytes \[\d+, \d+\): "
                     r"Fixpipe \(flash_attention_score_grad\.h:(\d+), PIPE_FIX\) adds to what AIC (\d+)'s Fixpipe "
                     r"\(flash_attention_score_grad\.h:(\d+), PIPE_FIX\) added", m.faults[0])
        assert f, m.faults[0]
        assert {int(f.group(1)), int(f.group(3))} == {turn, turn + 1}, m.faults[0]
        assert {int(f.group(2)), int(f.group(4))} <= fixpipes, m.faults[0]   # Fixpipe lines of the built header


@pytest.mark.slow
def test_the_deterministic_schedule_is_bit_identical_across_interleavings(gen, monkeypatch):
    """DET_CASE run under two schedule seeds (OPGEN_EMU_SCHED_SEED: the cores sleep pseudo-random times at every
    cross-core point and atomic add, emu/core.h SchedJitter; tests/test_emu_cube.py shows it reorders unordered
    adds): both pass the deterministic-order check and their dq, dk, dv bytes are identical."""
    runs = []
    for seed in (1, 2):
        monkeypatch.setenv("OPGEN_EMU_SCHED_SEED", str(seed))
        r = _det_check(gen, golden=False)
        assert r.passed and not r.faults and r.block_dim == 3, r.faults[:1]
        runs.append({k: np.ascontiguousarray(r.arrays[k]).tobytes() for k in ("dq", "dk", "dv")})
    assert runs[0] == runs[1]


@pytest.mark.slow
def test_the_kernel_ir_engine_faults_on_the_turns_unordered_adds_too(gen, monkeypatch):
    """The Kernel IR interpreter applies the same deterministic-order rule (kir_interp._Launch.gm_access): DET_CASE
    on `--engine kir` passes; with every turn barrier (the all-AIC CrossCoreSetFlag<0>(FLAG_TURN) and its wait)
    dropped from the class, the three AICs' fp32 adds into the dk / dv workspaces are unordered: add-after-add."""
    from dataclasses import replace

    from opgen.kernel import kir as K
    from opgen.kernel import kir_interp
    from opgen.kernel.attnclass import FLAG_TURN

    r = _det_check(gen, engine="kir")
    assert r.passed and not r.faults, r.faults[:1]

    def turn(s):
        return ((isinstance(s, K.CrossCoreSetFlag) and s.mode == 0 and s.id == FLAG_TURN)
                or (isinstance(s, K.CrossCoreWaitFlag) and s.id == FLAG_TURN))

    def drop(stmts):
        out = []
        for s in stmts:
            if turn(s):
                continue
            for f in ("body", "then", "orelse"):
                if isinstance(getattr(s, f, None), tuple):
                    s = replace(s, **{f: drop(getattr(s, f))})
            out.append(s)
        return tuple(out)

    real, dropped = kir_interp.run, []

    def run_without_turns(k, *a, **kw):
        cut = replace(k, process=drop(k.process), methods=tuple(replace(m, body=drop(m.body)) for m in k.methods))
        dropped.append(cut != k)
        return real(cut, *a, **dict(kw, verify_first=False))

    monkeypatch.setattr(kir_interp, "run", run_without_turns)
    m = _det_check(gen, golden=False, engine="kir")
    assert dropped == [True]
    assert not m.passed and m.faults, m.faults
    assert re.match(r"\[AIC \d\] race \(add-after-add\) between cores on GM tensor '\w+' byte \d+: .*Fixpipe.* adds to "
                    r"what AIC \d added with no SyncAll or cross-core flag ordering them", m.faults[0]), m.faults[0]
