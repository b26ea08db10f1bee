"""The emitted NormRopeConcat / NormRopeConcatGrad kernels (head-row kernels, opgen.kernel.headrows) run in the
emulation (`opgen check`), and their Kernel IR.

Each emulation case runs the committed generated/<op>/ (TilingFunc + op_kernel) on the simulated cores of
the platform and compares every output with the interpreter (device and exact modes, CANN's precision rule;
the interpreter itself is checked against float64 oracles in tests/test_norm_rope_concat.py). A case passes
only with zero emulation faults (UB poison, bounds, alignment, queue misuse, GM bounds, Gather offsets).

Coverage: every static attribute combination (108 forward, 54 backward) once, the dtype rotating; a pairwise
covering array (tests/covering.py: every pair of values met at least once) over dtype x a representative attribute
set (each value of each attribute, the four rope_type x concat_order pairs, norm types 0/1/2 on both norm
attributes, is_training both ways) x shapes with tails (D = 34, 66,
128, 1024, S = 1, R = 1, R = Sq + Seq, null encoders and one encoder stream absent, N = 3, rows not
divisible by the cores, several UB passes per core); a Flux-like case (B = 1, N = 24, S = 64 + 16, D = 128);
GM traffic (every head-row tensor read or written exactly once); an AddressSanitizer case per op. The Kernel
IR: the lowering's addressing, conditions and rotation families, shared bodies, the verifier, the slot
budget check, and that every presence specialisation is the all-present program restricted to its parts.
"""

from __future__ import annotations

import itertools
import shutil

import numpy as np
import pytest

from covering import pairwise, uncovered
from opgen.check import run_check
from opgen.errors import IRError
from opgen.ir.dims import Lit, Sym
from opgen.kernel.headrows import body_text, lower_heads, parts_layout, print_head_program, verify_head_program
from opgen.passes.pipeline import optimize
from opgen.passes.select import select_key
from opgen.registry import load_spec



def needs_gxx(test):
    """The test builds and runs the emitted C++: skipped without g++, and in the slow tier."""
    return pytest.mark.slow(pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")(test))

FWD, GRAD = "NormRopeConcat", "NormRopeConcatGrad"
DTYPES = ["float32", "float16", "bfloat16"]
DTYPE_KEY = {"float16": 1, "bfloat16": 2, "float32": 3}   # the specs' dtype rows
ALL_ENC = ("encoder_query", "encoder_key", "encoder_value")

# (norm_type, norm_added_type, rope_type, concat_order, is_training): every value of each attribute, the four
# (rope 1/2) x (order 0/1) pairs, norm types 0/1/2 on both norm attributes.
FWD_ATTRS = [(0, 0, 0, 0, False), (1, 2, 1, 0, True), (2, 1, 2, 1, True), (2, 0, 1, 1, False), (1, 1, 2, 0, False),
             (0, 2, 1, 1, True), (2, 2, 0, 1, True)]
GRAD_ATTRS = [a[:4] for a in FWD_ATTRS]
# shapes with tails: D = 34 / 66 (not a multiple of 16), S = 1, R = 1, R = Sq + Seq, null encoders, one
# encoder stream only, N = 3, rows not divisible by the 48 cores, several UB passes per core (D = 1024)
SHAPES = [
    dict(B=2, Sq=5, Sk=4, N=3, D=34, Seq=3, Sek=2, R=6),
    dict(B=1, Sq=1, Sk=1, N=3, D=128, R=1),                      # encoders null, S = 1, R = 1
    dict(B=3, Sq=4, Sk=6, N=3, D=66, Seq=2, R=6),                # encoder_query only, R = Sq + Seq
    dict(B=2, Sq=2, Sk=3, N=2, D=64, Sek=3, R=2),                # encoder_key / encoder_value only
    dict(B=2, Sq=20, Sk=10, N=8, D=1024, Seq=4, Sek=3, R=13),    # 800 rows: ~17 per core, 9 per UB pass (fp32)
]
FLUX = dict(B=1, N=24, Sq=64, Sk=64, Seq=16, Sek=16, D=128, R=80)


def _attrs(op, t):
    names = ["norm_type", "norm_added_type", "rope_type", "concat_order", "is_training"]
    return dict(zip(names, t)) if op == FWD else dict(zip(names[:4], t))


def _head_tensors(op):
    if op == FWD:
        return ["query", "key", "value", *ALL_ENC, "query_output", "key_output", "value_output"]
    return ["grad_query_output", "grad_key_output", "grad_value_output", "grad_query", "grad_key", "grad_value",
            "grad_encoder_query", "grad_encoder_key", "grad_encoder_value"]


def _check(r, what, exact_cancel=False):
    """Zero faults and every output within CANN's rule. exact_cancel: outputs whose device-mode interpreter
    itself misses the rule (LayerNorm backward at D = 2 cancels to noise) must equal device mode bit for bit."""
    assert not r.faults, f"{what}: emulation faults {r.faults[:3]}"
    assert r.tiling_ok and r.launched, what
    bad = []
    for k, c in r.outputs.items():
        if c.passed:
            continue
        if exact_cancel and not c.device.get("device_passed", True) and c.device["max_abs"] == 0:
            continue
        bad.append(f"{k}: {c.to_json()}")
    assert not bad, f"{what}: " + "; ".join(bad)


# ---------------------------------------------------------------- Kernel IR (no compiler needed)
def _lower(op, attrs, present):
    spec = load_spec(op)
    g = optimize(spec.graph(select_key(spec, attrs, present)))
    return lower_heads(g, parts_layout(g))


FWD_PRESENT = ["encoder_query", "encoder_key", "encoder_value", "norm_query_weight", "norm_query_bias",
               "norm_key_weight", "norm_key_bias", "rope_sin", "rope_cos"]


def test_forward_lowering_addressing_conditions_and_rotation():
    """NormRopeConcat, concat_order 1, interleave RoPE: the query part reads query (BSND, row s) and writes
    query_output (BNSD) at sequence index s + Seq, gets RoPE where s < R - Seq with table row s + Seq; the
    rotation is a Gather with the pair-swap offsets and the even-lanes sign row; stats are contiguous."""
    hp = _lower(FWD, dict(norm_type=2, norm_added_type=1, rope_type=1, concat_order=1, is_training=True),
                FWD_PRESENT)
    names = [p.own[0] for p in hp.parts]
    assert names == ["query", "key", "value", "encoder_query", "encoder_key", "encoder_value"]
    q = hp.parts[0]
    maps = {m.tensor: m for m in q.maps}
    assert (maps["query"].layout, maps["query"].offset) == ("bsnd", Lit(0))
    out = maps["query_output"]
    assert (out.layout, out.offset, out.extent) == ("bnsd", Sym("Seq"), Sym("Seq") + Sym("Sq"))
    assert maps["rope_sin"].offset == Sym("Seq") and maps["norm_query_mean"].layout == "bsnd"
    assert q.conds == [Sym("R") - Sym("Seq")]
    assert set(q.lanes.values()) == {("perm", "pair_swap"), ("sign", "even")}
    rope_case = next(c for c in q.cases if c.truth == (True,))
    kinds = [i.kind for i in rope_case.prog.instrs]
    assert "vgather" in kinds and kinds.count("rsum") == 2 and kinds.count("sstore") == 2
    plain = next(c for c in q.cases if c.truth == (False,))
    assert "vgather" not in [i.kind for i in plain.prog.instrs]
    eq = hp.parts[3]
    assert eq.conds == [Sym("R")] and {m.tensor: m for m in eq.maps}["query_output"].offset == Lit(0)
    v = hp.parts[2]
    assert not v.conds and [i.kind for i in v.cases[0].prog.instrs] == ["cast_in", "store"]
    # query and key compute alike: one body; the encoder parts (norm type 1, no weights) another
    assert body_text(hp.parts[0]) == body_text(hp.parts[1]) != body_text(hp.parts[3])
    text = print_head_program(hp)
    assert "Gather(" in text and "cond c0: s < R - Seq" in text


def test_grad_lowering_half_rotation_and_weight_grads():
    """NormRopeConcatGrad, half RoPE: the adjoint rotation is the half swap with the high half negated; the
    LayerNorm weight/bias gradients are column accumulators of the query part (both conditions)."""
    present = ["encoder_query", "encoder_key", "norm_query_weight", "norm_query_mean", "norm_query_rstd",
               "norm_key_weight", "norm_key_mean", "norm_key_rstd", "norm_added_query_mean",
               "norm_added_query_rstd", "norm_added_key_mean", "norm_added_key_rstd", "rope_sin", "rope_cos"]
    hp = _lower(GRAD, dict(norm_type=2, norm_added_type=1, rope_type=2, concat_order=0), present)
    q = hp.parts[0]
    assert set(q.lanes.values()) == {("perm", "half_swap"), ("sign", "high_half")}
    assert sorted(out for out, _ in q.accs.values()) == ["grad_norm_query_bias", "grad_norm_query_weight"]
    for case in q.cases:
        assert sum(i.kind == "acc" for i in case.prog.instrs) == 2
    maps = {m.tensor: m for m in q.maps}
    assert maps["grad_query_output"].layout == "bnsd" and maps["grad_query"].layout == "bsnd"
    ek = next(p for p in hp.parts if "encoder_key" in p.own)
    assert {m.tensor: m for m in ek.maps}["grad_key_output"].offset == Sym("Sk") and not ek.accs


def test_verifier_rejects_a_case_that_skips_an_output():
    hp = _lower(FWD, dict(rope_type=2), ["rope_sin", "rope_cos"])
    part = hp.parts[0]
    case = part.cases[0]
    case.prog.instrs = [i for i in case.prog.instrs if i.kind != "store"]
    with pytest.raises(IRError, match="not each of"):
        verify_head_program(hp)


def test_unsupported_layout_is_an_ir_error():
    """A head row broadcast against a table along the wrong axis has no head-row lowering."""
    from opgen.kernel.headrows import HeadLayout, classify

    with pytest.raises(IRError, match="is not a head row"):
        classify((Sym("B"), Sym("X"), Sym("Y"), Sym("D")), HeadLayout("B", "N", "D"))


@pytest.mark.slow
def test_counts_are_the_parts_needs():
    """The tiling's HeadCounts: the forward holds 3 fp32 temporaries, 2 table rows (sin, cos), 2 stat outputs (mean,
    rstd); the backward 2 column accumulators per part and 8 accumulated outputs (weight and bias grads of four
    normalised streams). That the emitted kernel allocates exactly the plan built from them is measured by the
    emulation (test_tiling.test_the_kernel_allocates_the_buffer_plan)."""
    from kbuild import build

    for op, want in ((FWD, dict(temps=3, tables=2, stat_out=2, accs=0, acc_outputs=0)),
                     (GRAD, dict(temps=3, tables=2, stat_in=2, accs=2, acc_outputs=8))):
        got = build(op).counts.as_dict()
        assert {k: got[k] for k in want} == want, op


@pytest.mark.slow
def test_every_presence_specialisation_is_the_all_present_program():
    """The kernel runs the all-present program of each attribute combination and skips parts whose optional
    inputs are null: lowering every other presence key gives exactly those parts with the absent dims at 0."""
    from opgen.kernel.headlower import check_presence_variants

    from kbuild import build

    assert check_presence_variants(load_spec(FWD), build(FWD).lowered.extra["heads"]) == 432
    assert check_presence_variants(load_spec(GRAD), build(GRAD).lowered.extra["heads"]) == 216


def test_row_space_of_the_parts_is_the_tiling_row_space():
    """Sum over the part slots of B * N * seq equals the tiling program's rowNum for every attribute key."""
    from kbuild import build

    env = dict(B=3, N=5, D=34, Sq=7, Seq=2, Sk=4, Sek=6, R=5)
    for op in (FWD, GRAD):
        t = build(op).tiling
        prog = t.program
        inputs = {k: (env[v.name] if isinstance(v, Sym) else 2) for k, v in t.inputs.items() if k in prog.inputs}
        inputs.update(dtypeKey=1, attrKey=0, coreNum=48, ubBytes=196608)
        rows = prog.evaluate(inputs)["rowNum"]
        # query rows (Sq + Seq) and key and value rows (Sk + Sek each) of every (batch, head): docs/reference/ascendc.md §2
        assert rows == env["B"] * env["N"] * (env["Sq"] + env["Seq"] + 2 * (env["Sk"] + env["Sek"])) == 435
        for _attrs, _key, hp in build(op).lowered.extra["heads"].programs:
            assert sum(env["B"] * env["N"] * p.seq.evaluate(env) for p in hp.parts) == rows


# ---------------------------------------------------------------- emulation
@needs_gxx
@pytest.mark.parametrize("op", [FWD, GRAD])
def test_every_attribute_combination(op):
    """Each of the 108 / 54 static attribute combinations once (dtype rotating), with both encoder streams."""
    spec = load_spec(op)
    combos = list(itertools.product(*[a.choices for a in spec.static_attrs]))
    assert len(combos) == (108 if op == FWD else 54)
    keys = set()
    for n, t in enumerate(combos):
        dt = DTYPES[n % 3]
        r = run_check(op, dims=SHAPES[0], attrs=_attrs(op, t), dtypes={"T": dt}, seed=n, progress=False)
        _check(r, f"{op} {dt} {t}")
        keys.add(r.tiling_key // 100)
    assert len(keys) == len(combos)   # every combination is its own tiling key


def _dtype_shape_attr_cases(op):
    """(dtype, shape index, attribute set) rows covering every pair of the three factors (3 x 5 x 7 = 105 become
    35: each shape meets each attribute set, and each dtype each shape and each attribute set)."""
    factors = {"dt": DTYPES, "shape": list(range(len(SHAPES))),
               "attrs": list(FWD_ATTRS if op == FWD else GRAD_ATTRS)}
    rows = pairwise(factors)
    assert not uncovered(rows, factors)
    return rows


def test_the_dtype_shape_attribute_array_is_pairwise_and_smaller_than_the_product():
    """Independent of covering.py's own check: every pair of (dtype, shape, attribute set) values is in a row."""
    for op in (FWD, GRAD):
        rows = _dtype_shape_attr_cases(op)
        attrs = FWD_ATTRS if op == FWD else GRAD_ATTRS
        seen = {(r["dt"], r["shape"]) for r in rows}, {(r["dt"], r["attrs"]) for r in rows}, \
            {(r["shape"], r["attrs"]) for r in rows}
        assert seen[0] == set(itertools.product(DTYPES, range(len(SHAPES))))
        assert seen[1] == set(itertools.product(DTYPES, attrs))
        assert seen[2] == set(itertools.product(range(len(SHAPES)), attrs))
        assert len(rows) < len(DTYPES) * len(SHAPES) * len(attrs)


@needs_gxx
@pytest.mark.parametrize("op", [FWD, GRAD])
def test_every_dtype_attribute_set_and_shape_pair(op):
    for row in _dtype_shape_attr_cases(op):
        k, dt, t = row["shape"], row["dt"], row["attrs"]
        r = run_check(op, dims=SHAPES[k], attrs=_attrs(op, t), dtypes={"T": dt}, seed=k, progress=False)
        _check(r, f"{op} {dt} {SHAPES[k]} {t}")
        assert r.tiling_key % 100 == DTYPE_KEY[dt] * 10 + 1


@needs_gxx
@pytest.mark.parametrize("op", [FWD, GRAD])
def test_head_dim_2(op):
    """D = 2 (the smallest head): interleave and half rotation coincide. The LayerNorm backward of a 2-lane
    row cancels to rounding noise in fp32, so there the kernel must equal the device-mode interpreter."""
    for n, t in enumerate(FWD_ATTRS if op == FWD else GRAD_ATTRS):
        r = run_check(op, dims=dict(B=1, Sq=1, Sk=1, N=1, D=2, R=1), attrs=_attrs(op, t), dtypes={"T": DTYPES[n % 3]},
                      seed=n, progress=False)
        _check(r, f"{op} D=2 {t}", exact_cancel=True)


@needs_gxx
@pytest.mark.parametrize("op", [FWD, GRAD])
def test_flux_like_case_and_gm_traffic(op):
    """B = 1, N = 24, S = 64 + 16, D = 128, bf16: every head-row tensor is read or written exactly once."""
    t = (2, 2, 2, 1, True) if op == FWD else (2, 2, 1, 0)
    r = run_check(op, dims=FLUX, attrs=_attrs(op, t), dtypes={"T": "bfloat16"}, progress=False)
    _check(r, f"{op} flux")
    assert r.block_dim == 48
    for name in _head_tensors(op):
        g = r.gm[name]
        assert (g.read if name in r.inputs else g.written) == g.bytes, (name, g)
    assert r.gm_ratio < (1.05 if op == FWD else 1.15), r.gm_ratio


@needs_gxx
def test_null_encoders_write_zero_added_weight_grads():
    """No encoder streams with norm_added_type 2: the added weight/bias gradients are written as zeros
    (docs/reference/norm_rope_concat.md §2.3)."""
    r = run_check(GRAD, dims=dict(B=2, Sq=3, Sk=2, N=2, D=16, R=2), attrs=dict(norm_type=1, norm_added_type=2,
                                                                                 rope_type=1), dtypes={"T": "float16"},
                  progress=False)
    _check(r, "null encoders")
    for name in ("grad_norm_added_query_weight", "grad_norm_added_key_bias"):
        np.testing.assert_array_equal(r.arrays[name], 0)


@needs_gxx
@pytest.mark.parametrize("op", [FWD, GRAD])
def test_asan(op):
    t = (2, 1, 2, 1, True) if op == FWD else (2, 1, 2, 1)
    r = run_check(op, dims=SHAPES[2], attrs=_attrs(op, t), dtypes={"T": "bfloat16"}, asan=True, progress=False)
    _check(r, f"asan {op}")
    assert r.variant == "asan"
