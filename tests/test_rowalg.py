"""Kernel-level algebra on row programs (opgen.kernel.rowalg): each rewrite on hand-made programs, the instruction
count per row before and after on example specs, and the precision bound of the reciprocal rewrite against float64
NumPy arithmetic (docs/reference/kernel_cost.md §4). End-to-end numerics of the rewritten kernels: `opgen check`
(tests/test_kernels.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from opgen.check.compare import THRESHOLD
from opgen.kernel import rowalg
from opgen.kernel.rowlayout import analyse
from opgen.kernel.rowprog import GmTensor, Instr, RowProgram, verify_program
from opgen.kernel.rows import lower
from opgen.passes.pipeline import optimize
from opgen.passes.select import select_key
from opgen.registry import load_spec


def _prog(path, passes=None):
    spec = load_spec(path)
    g = optimize(spec.graph(select_key(spec, {}, tuple(i.name for i in spec.inputs if i.optional))))
    return lower(g, analyse(g), passes)


def _hand(instrs):
    return RowProgram("t", None, gm=[GmTensor("x", "in", "row", "f32"), GmTensor("y", "out", "row", "f32")],
                      instrs=list(instrs))


def _kinds(p):
    return [(i.kind, i.op) for i in p.instrs]


def test_reciprocal_replaces_duplicate_and_div():
    p = _hand([Instr("cast_in", "a", gm="x"), Instr("rsum", "s", ("a",), space="stat"),
               Instr("vdup", "d", arg="s"), Instr("vbin", "r", ("a", "d"), "Div"), Instr("store", srcs=("r",), gm="y")])
    assert rowalg.reciprocal_of_broadcast_divisor(p) == 1
    assert _kinds(p) == [("cast_in", ""), ("rsum", ""), ("sexpr", ""), ("vscalar", "Muls"), ("store", "")]
    rcp, mul = p.instrs[2], p.instrs[3]
    assert rcp.space == "stat" and rcp.arg == "(1.0f / (s))" and mul.srcs == ("a",) and mul.arg == rcp.dst


def test_reciprocal_keeps_a_duplicate_with_other_users_and_a_scalar_numerator():
    base = [Instr("cast_in", "a", gm="x"), Instr("rsum", "s", ("a",), space="stat"), Instr("vdup", "d", arg="s")]
    p = _hand(base + [Instr("vbin", "r", ("a", "d"), "Div"), Instr("vbin", "q", ("r", "d"), "Add"),
                      Instr("store", srcs=("q",), gm="y")])
    assert rowalg.reciprocal_of_broadcast_divisor(p) == 0
    p = _hand(base + [Instr("vbin", "r", ("d", "a"), "Div"), Instr("store", srcs=("r",), gm="y")])   # s / a
    assert rowalg.reciprocal_of_broadcast_divisor(p) == 0


def _softmax_hand(max_of: str = "a", divisor: str = "s"):
    return _hand([Instr("cast_in", "a", gm="x"), Instr("vscalar", "b", ("a",), "Muls", "2.0f"),
                  Instr("rmax", "m", (max_of,), space="stat"), Instr("vscalar", "z", ("a",), "Adds", "-(m)"),
                  Instr("vunary", "e", ("z",), "Exp"), Instr("rsum", "s", ("e",), space="stat"),
                  Instr("rsum", "t", ("a",), space="stat"), Instr("vdup", "d", arg=divisor),
                  Instr("vbin", "r", ("e", "d"), "Div"), Instr("vbin", "q", ("r", "b"), "Add"),
                  Instr("store", srcs=("q",), gm="y")])


def test_reciprocal_of_a_softmax_sum_only():
    """The default pass rewrites a division by sum(exp(v - max v)) (in [1, H]: its reciprocal is a normal fp32) and
    leaves a division by another row sum (its range unproven) or by a sum of exp(v - max of another row)."""
    p = _softmax_hand()
    assert rowalg.reciprocal_of_softmax_sum(p) == 1
    assert ("vbin", "Div") not in _kinds(p) and ("vdup", "") not in _kinds(p)
    assert next(i for i in p.instrs if i.kind == "sexpr").arg == "(1.0f / (s))"
    assert rowalg.reciprocal_of_softmax_sum(_softmax_hand(divisor="t")) == 0   # a plain row sum
    assert rowalg.reciprocal_of_softmax_sum(_softmax_hand(max_of="b")) == 0    # exp(a - max b): unbounded

    def variant(k, instr):   # the softmax program with its k-th instruction replaced
        p = _softmax_hand()
        p.instrs[k] = instr
        return p

    # exp(a + m), exp(a - 3): the exponent is not a difference from the row's maximum (s may be below 1 or overflow)
    assert rowalg.reciprocal_of_softmax_sum(variant(3, Instr("vscalar", "z", ("a",), "Adds", "m"))) == 0
    assert rowalg.reciprocal_of_softmax_sum(variant(3, Instr("vscalar", "z", ("a",), "Adds", "-(3.0f)"))) == 0
    # exp(2 (a - m)) is still <= 1, but the pattern asks for the plain difference: not taken
    assert rowalg.reciprocal_of_softmax_sum(variant(4, Instr("vscalar", "e", ("z",), "Muls", "2.0f"))) == 0
    # the sum over another row than the exponentials
    assert rowalg.reciprocal_of_softmax_sum(variant(5, Instr("rsum", "s", ("b",), space="stat"))) == 0
    # a name defined twice (an allocated program): the link through it is not taken
    p = _softmax_hand()
    p.instrs.insert(1, Instr("vunary", "e", ("a",), "Abs"))   # the last definition is the Exp
    assert rowalg.reciprocal_of_softmax_sum(p) == 0


def test_reciprocal_error_bound_against_float64():
    """RN(x * RN(1/s)) in fp32 against x / s in float64: within 3u (u = 2^-24; the bound the pass states), 2^9
    below CANN's fp32 criterion, over random magnitudes."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(200_000) * 10.0 ** rng.uniform(-20, 20, 200_000)).astype(np.float32)
    s = (rng.uniform(0.5, 2.0, 200_000) * 10.0 ** rng.uniform(-15, 15, 200_000)).astype(np.float32)
    got = (x * (np.float32(1) / s)).astype(np.float32)
    exact = x.astype(np.float64) / s.astype(np.float64)
    rel = np.abs(got.astype(np.float64) - exact) / np.abs(exact)
    u = 2.0 ** -24
    assert rel.max() <= (1 + u) ** 3 - 1
    assert rowalg.RECIPROCAL_REL_BOUND + u <= (1 + u) ** 3 - 1 < THRESHOLD["float32"] / 2 ** 9
    assert rel.max() > u   # the rewrite is not exact (the bound is not vacuous)


def test_multiply_chain_folds_but_addition_chain_does_not():
    p = _hand([Instr("cast_in", "a", gm="x"), Instr("sload", "s", gm="x", space="stat"),
               Instr("vscalar", "b", ("a",), "Muls", "s"), Instr("vscalar", "c", ("b",), "Muls", "2.0f"),
               Instr("store", srcs=("c",), gm="y")])
    assert rowalg.fold_multiply_chains(p) == 1
    assert _kinds(p) == [("cast_in", ""), ("sload", ""), ("sexpr", ""), ("vscalar", "Muls"), ("store", "")]
    assert p.instrs[2].arg == "((s) * (2.0f))" and p.instrs[3].srcs == ("a",) and p.instrs[3].arg == p.instrs[2].dst
    p = _hand([Instr("cast_in", "a", gm="x"), Instr("vscalar", "b", ("a",), "Adds", "1.0f"),
               Instr("vscalar", "c", ("b",), "Adds", "2.0f"), Instr("store", srcs=("c",), gm="y")])
    assert rowalg.fold_multiply_chains(p) == 0


def test_reuse_computed_values_and_dead_values():
    p = _hand([Instr("cast_in", "a", gm="x"), Instr("cast_in", "a2", gm="x"), Instr("vunary", "e", ("a",), "Exp"),
               Instr("vunary", "e2", ("a2",), "Exp"), Instr("vbin", "m", ("e", "e2"), "Mul"),
               Instr("vunary", "dead", ("m",), "Abs"), Instr("store", srcs=("m",), gm="y")])
    assert rowalg.reuse_computed_values(p) == 2            # the second cast of x, then the second Exp
    assert [i.dst for i in p.instrs] == ["a", "e", "m", "dead", ""] and p.instrs[2].srcs == ("e", "e")
    assert rowalg.remove_dead_values(p) == 1
    verify_program(p)


def test_scalar_copy_propagation():
    p = _hand([Instr("cast_in", "a", gm="x"), Instr("rsum", "s1", ("a",), space="stat"),
               Instr("sexpr", "s2", arg="s1", space="stat"), Instr("vscalar", "r", ("a",), "Muls", "s2"),
               Instr("store", srcs=("r",), gm="y")])
    assert rowalg.propagate_scalar_copies(p) == 1
    assert [i.dst for i in p.instrs] == ["a", "s1", "r", ""] and p.instrs[2].arg == "s1"


def test_a_select_of_a_duplicated_scalar_becomes_selects():
    """Select(m, x, Duplicate(c)) -> Selects(m, x, c); Select(m, Duplicate(c), x) -> Selects(not m, x, c) with m a
    Compares of mode NE read only there (EQ: the exact negation, NaN included); LT is not negated (NaN)."""
    def prog(mode, dup_first, extra=()):
        sel = ("m", "d", "a") if dup_first else ("m", "a", "d")
        return _hand([Instr("cast_in", "a", gm="x"), Instr("vcmps", "m", ("a",), mode, "0.0f"),
                      Instr("vdup", "d", arg="-10000.0f"), Instr("vsel", "r", sel), *extra,
                      Instr("store", srcs=("r",), gm="y")])

    p = prog("LT", False)
    assert rowalg.select_with_scalar(p) == 1 and rowalg.remove_dead_values(p) == 1
    assert [(i.kind, i.op, i.srcs, i.arg) for i in p.instrs[1:3]] == [("vcmps", "LT", ("a",), "0.0f"),
                                                                      ("vsels", "", ("m", "a"), "-10000.0f")]
    p = prog("NE", True)
    assert rowalg.select_with_scalar(p) == 1
    assert [(i.kind, i.op, i.srcs, i.arg) for i in (p.instrs[1], p.instrs[3])] == [
        ("vcmps", "EQ", ("a",), "0.0f"), ("vsels", "", ("m", "a"), "-10000.0f")]
    assert rowalg.select_with_scalar(prog("LT", True)) == 0      # not m is not GE where a is NaN
    other = Instr("vsel", "q", ("m", "a", "a"))                  # the mask read twice: its mode stays
    assert rowalg.select_with_scalar(prog("NE", True, (other,))) == 0
    x = np.array([0.0, -0.0, 1.0, np.nan, np.inf], np.float32)
    assert np.array_equal(~(x != 0), x == 0)


def test_a_muls_read_by_a_sum_or_difference_becomes_axpy_bit_for_bit():
    """b + x * s, x * s + b and b - x * s -> Axpy(b, x, s / -(s)) over b's row; not x * s - b, nor when b is read
    again (its row is the destination) or the product is. The table's Axpy (the emulation's model) gives the bits of
    Muls then Add / Sub on random fp32 rows, signed zeros, infinities and NaN included."""
    def prog(op, order, extra=()):
        return _hand([Instr("cast_in", "a", gm="x"), Instr("cast_in", "b", gm="x"),
                      Instr("vscalar", "t", ("a",), "Muls", "s"), Instr("vbin", "r", order, op), *extra,
                      Instr("store", srcs=("r",), gm="y")])

    for op, order, arg in (("Add", ("b", "t"), "s"), ("Add", ("t", "b"), "s"), ("Sub", ("b", "t"), "-(s)")):
        p = prog(op, order)
        assert rowalg.fuse_axpy(p) == 1
        assert [(i.kind, i.srcs, i.arg) for i in p.instrs[2:3]] == [("vaxpy", ("b", "a"), arg)]
    assert rowalg.fuse_axpy(prog("Sub", ("t", "b"))) == 0
    assert rowalg.fuse_axpy(prog("Add", ("b", "t"), (Instr("vbin", "q", ("b", "b"), "Add"),))) == 0
    assert rowalg.fuse_axpy(prog("Add", ("b", "t"), (Instr("vbin", "q", ("t", "t"), "Add"),))) == 0
    from opgen.kernel.isa import INSTRS, Op

    rng = np.random.default_rng(5)
    x, b = (rng.standard_normal(4096) * 2.0 ** rng.integers(-20, 20, 4096)).astype(np.float32), \
        (rng.standard_normal(4096) * 2.0 ** rng.integers(-20, 20, 4096)).astype(np.float32)
    x[:6], b[:6] = [0.0, -0.0, np.inf, 1.0, np.nan, 3e38], [-0.0, 0.0, 1.0, -np.inf, 2.0, 3e38]
    for s in (np.float32(1.7), np.float32(-0.3), np.float32(-0.0)):
        t = INSTRS[Op.MULS].meaning({"dst": np.zeros_like(x), "src0": x, "scalar": s, "count": 4096})["dst"]
        for op, arg in ((Op.ADD, s), (Op.SUB, -s)):
            ref = INSTRS[op].meaning({"dst": np.zeros_like(x), "src0": b, "src1": t, "count": 4096})["dst"]
            got = INSTRS[Op.AXPY].meaning({"dst": b.copy(), "src0": x, "scalar": arg, "count": 4096})["dst"]
            assert np.array_equal(got.view(np.uint32), ref.view(np.uint32)) or \
                np.array_equal(np.isnan(got), np.isnan(ref)) and np.array_equal(got[~np.isnan(got)], ref[~np.isnan(ref)])


def test_a_compare_of_widened_halves_compares_the_halves():
    """Compares(Cast(h to fp32), c) -> Compares on h (vcmpsh) when c is a literal half value exactly; the widening is
    then dead. 0.1 is no half (fp32(h) == 0.1 is never true, h == half(0.1) may be): left as it is, as is a compare
    with a per-row scalar."""
    def prog(c):
        return _hand([Instr("cast_in", "h", gm="x", op="half"), Instr("vwiden", "v", ("h",)),
                      Instr("vcmps", "m", ("v",), "NE", c), Instr("vsels", "r", ("m", "v"), arg="0.0f"),
                      Instr("store", srcs=("r",), gm="y")])

    for c in ("0.0f", "-2.5f", "(65504.0f)", "0.5f"):
        p = prog(c)
        assert rowalg.compare_before_widening(p) == 1 and (p.instrs[2].kind, p.instrs[2].srcs) == ("vcmpsh", ("h",))
    for c in ("0.1f", "70000.0f", "s0", "attr_eps"):
        assert rowalg.compare_before_widening(prog(c)) == 0
    assert rowalg._half_exact("1.0f") and not rowalg._half_exact("1e-9f")


def test_a_sum_of_a_negated_row_is_the_negated_sum():
    """ReduceSum(Muls(x, -1)) -> -(ReduceSum(x)) when only the sum reads the product; not for another factor, nor
    when the product is read again. The pairwise fp32 sum (isa.pairwise_sum: the emulation's order) of -x is the
    negated sum of x bit for bit."""
    def prog(c, extra=()):
        return _hand([Instr("cast_in", "a", gm="x"), Instr("vscalar", "t", ("a",), "Muls", c),
                      Instr("rsum", "s", ("t",), space="stat"), *extra, Instr("vscalar", "r", ("a",), "Adds", "s"),
                      Instr("store", srcs=("r",), gm="y")])

    p = prog("-1.0f")
    assert rowalg.sum_of_negation(p) == 1 and rowalg.remove_dead_values(p) == 1
    assert [(i.kind, i.srcs, i.arg) for i in p.instrs[1:3]] == [("rsum", ("a",), ""), ("sexpr", (), "(-(neg_s))")]
    assert rowalg.sum_of_negation(prog("2.0f")) == 0
    assert rowalg.sum_of_negation(prog("-1.0f", (Instr("vbin", "q", ("t", "a"), "Add"),))) == 0
    from opgen.kernel.isa import pairwise_sum

    rng = np.random.default_rng(2)
    for n in (1, 63, 64, 1000, 4099):
        x = (rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n)).astype(np.float32)
        assert np.float32(-pairwise_sum(x)).tobytes() == np.float32(pairwise_sum(-x)).tobytes()


def test_instructions_per_row_before_and_after_on_example_specs():
    """Vector instructions per row without any pass, with the default ROW_PASSES and with the opt-in
    FAST_ROW_PASSES (counted by hand from the programs `opgen graph --stage kernel` prints): the default passes make
    SoftmaxV2 drop the Duplicate (its division by the sum of exponentials, proven in [1, H], becomes a Muls by the
    reciprocal); the fast ones also make RmsNormGrad fold x * rstd^2 * mean(...) into one Muls; LayerNormGradV3's
    g - mean(g) - z * mean(g z) takes z * mean(g z) and the difference as one Axpy (fuse_axpy, in both lists)."""
    for spec, before, exact, fast in (("examples/specs/softmax.py", 8, 7, 7),
                                      ("examples/specs/rms_norm_grad.py", 13, 13, 12),
                                      ("examples/specs/layer_norm_grad.py", 16, 15, 15)):
        counts = tuple(rowalg.vector_instrs_per_row(_prog(spec, ps)) for ps in ([], None, rowalg.FAST_ROW_PASSES))
        assert counts == (before, exact, fast), spec
    soft = _prog("examples/specs/softmax.py", rowalg.FAST_ROW_PASSES)
    assert [i.op for i in soft.instrs if i.kind in ("vbin", "vscalar", "vunary", "vdup")] == ["Adds", "Exp", "Muls"]
    assert soft.row_temps == 1


def test_a_negation_read_once_is_taken_into_its_reader():
    """Muls(-x, c) -> Muls(x, -(c)), -x + b and b + -x -> Sub(b, x), b - -x -> Add(b, x), Axpy(b, -x, s) -> Axpy(b, x,
    -(s)), Muls(Muls(x, c), -1) -> Muls(x, -(c)); not -x - b, nor a negation read twice. Each pair gives the same
    fp32 bits on random rows with signed zeros, infinities and NaN (the IEEE identities the rewrite rests on)."""
    def prog(reader, extra=()):
        return _hand([Instr("cast_in", "a", gm="x"), Instr("cast_in", "b", gm="x"),
                      Instr("vscalar", "n", ("a",), "Muls", "-1.0f"), reader, *extra,
                      Instr("store", srcs=("r",), gm="y")])

    cases = [(Instr("vscalar", "r", ("n",), "Muls", "2.5f"), ("vscalar", "Muls", ("a",), "-(2.5f)")),
             (Instr("vbin", "r", ("n", "b"), "Add"), ("vbin", "Sub", ("b", "a"), "")),
             (Instr("vbin", "r", ("b", "n"), "Add"), ("vbin", "Sub", ("b", "a"), "")),
             (Instr("vbin", "r", ("b", "n"), "Sub"), ("vbin", "Add", ("b", "a"), "")),
             (Instr("vaxpy", "r", ("b", "n"), arg="s"), ("vaxpy", "", ("b", "a"), "-(s)"))]
    for reader, want in cases:
        p = prog(reader)
        assert rowalg.fold_negation(p) == 1, reader
        assert [(i.kind, i.op, i.srcs, i.arg) for i in p.instrs[2:3]] == [want] and len(p.instrs) == 4
    assert rowalg.fold_negation(prog(Instr("vbin", "r", ("n", "b"), "Sub"))) == 0
    assert rowalg.fold_negation(prog(Instr("vbin", "r", ("n", "n"), "Add"))) == 0   # read twice by one instruction
    assert rowalg.fold_negation(prog(Instr("vbin", "r", ("n", "b"), "Add"), (Instr("vbin", "q", ("n", "n"), "Add"),))) == 0
    p = _hand([Instr("cast_in", "a", gm="x"), Instr("vscalar", "t", ("a",), "Muls", "0.851f"),
               Instr("vscalar", "r", ("t",), "Muls", "(-1.0f)"), Instr("store", srcs=("r",), gm="y")])
    assert rowalg.fold_negation(p) == 1 and [(i.srcs, i.arg) for i in p.instrs[1:2]] == [(("a",), "-(0.851f)")]
    verify_program(p)

    rng = np.random.default_rng(11)
    x, b = ((rng.standard_normal(4096) * 2.0 ** rng.integers(-60, 60, 4096)).astype(np.float32) for _ in range(2))
    x[:6], b[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 3e38], [-0.0, 0.0, np.inf, 1.0, 2.0, 3e38]
    c = np.float32(-1.702)
    def same(u, v):   # the same bits, NaN where NaN (a NaN's sign is no value)
        nan = np.isnan(u)
        return np.array_equal(nan, np.isnan(v)) and np.array_equal(u[~nan].view(np.uint32), v[~nan].view(np.uint32))

    with np.errstate(all="ignore"):
        assert same((-x) * c, x * -c) and same(-(x * c), x * -c)
        assert same((-x) + b, b - x) and same(b - (-x), b + x)
        assert same(b + ((-x) * c), b + (x * -c))


def test_sign_of_row_values():
    """_sign from the defining instructions: |x|, exp, x * x, Muls by literals, x - |x|; unknown otherwise."""
    p = _hand([Instr("cast_in", "a", gm="x"), Instr("vunary", "m", ("a",), "Abs"),
               Instr("vscalar", "w", ("m",), "Muls", "-1.702f"), Instr("vbin", "q", ("a", "a"), "Mul"),
               Instr("vscalar", "v", ("q",), "Muls", "(-0.5f)"), Instr("vbin", "d", ("a", "m"), "Sub"),
               Instr("vbin", "s", ("w", "d"), "Add"), Instr("vscalar", "z", ("a",), "Muls", "-2.0f"),
               Instr("vscalar", "k", ("m",), "Muls", "s0")])
    defs = {i.dst: i for i in p.instrs}
    assert [rowalg._sign(defs, n) for n in ("a", "m", "w", "q", "v", "d", "s", "z", "k")] == [0, 1, -1, 1, -1, -1, -1,
                                                                                          0, 0]


def _sigmoid_hand(w_def):
    return _hand([Instr("cast_in", "a", gm="x"), Instr("vunary", "m", ("a",), "Abs"), w_def,
                  Instr("vunary", "e", ("w",), "Exp"), Instr("vscalar", "d", ("e",), "Adds", "1.0f"),
                  Instr("vbin", "y", ("a", "d"), "Div"),
                  Instr("vscalar", "n", ("w",), "Muls", "-1.0f"), Instr("vunary", "e2", ("n",), "Exp"),
                  Instr("vscalar", "d2", ("e2",), "Adds", "1.0f"), Instr("vunary", "t", ("d2",), "Reciprocal"),
                  Instr("vbin", "r", ("y", "t"), "Mul"), Instr("store", srcs=("r",), gm="y")])


def test_sigmoid_from_the_forward_exp_where_its_exponent_is_not_positive():
    """1 / (1 + exp(-w)) -> exp(w) / (1 + exp(w)) from the values the forward computed, when w <= 0 is proven
    (-1.702 |x|); not for w = -1.702 x (its exp may overflow: inf / inf). The fp32 quotient is within 8u of the
    float64 sigmoid, as is the fp32 1 / (1 + exp(-w)) (docs/reference/kernel_cost.md §4), over w in [-87.3, 0];
    below, both are within 2^-126 of it (subnormal or 0)."""
    p = _sigmoid_hand(Instr("vscalar", "w", ("m",), "Muls", "-1.702f"))
    before = rowalg.vector_instrs_per_row(p)
    assert rowalg.sigmoid_from_exp(p) == 1 and rowalg.remove_dead_values(p) == 3
    assert (p.instrs[-3].kind, p.instrs[-3].op, p.instrs[-3].srcs) == ("vbin", "Div", ("e", "d"))
    verify_program(p)
    assert rowalg.vector_instrs_per_row(p) == before - 3   # Muls, Exp, Adds, Reciprocal -> Div
    assert rowalg.sigmoid_from_exp(_sigmoid_hand(Instr("vscalar", "w", ("a",), "Muls", "-1.702f"))) == 0

    u = 2.0 ** -24
    w = np.concatenate([-np.geomspace(1e-30, 104.0, 200000), [0.0, -0.0, -np.inf]]).astype(np.float32)
    with np.errstate(all="ignore"):
        exact = np.exp(w.astype(np.float64)) / (1.0 + np.exp(w.astype(np.float64)))
        e = np.exp(w)                                                   # fp32, one rounding (the table's Exp)
        new = e / (e + np.float32(1.0))
        old = np.float32(1.0) / (np.exp(-w) + np.float32(1.0))
    normal = exact >= 2.0 ** -126   # below, both are under the normal range (the device flushes them to 0)
    for got in (new, old):
        assert np.all(np.abs(got[normal] - exact[normal]) <= 8 * u * exact[normal])
        assert np.all(np.abs(got[~normal] - exact[~normal]) <= 2.0 ** -126)
    assert new[-1] == old[-1] == 0.0


def _norm_tail(seg: bool):
    """((x - m) * r) * g + b: the normalisations' tail on a row x, with m, r per-row scalars and g, b per-row
    scalars (InstanceNorm) or per-segment operands (GroupNorm: vseg of GM seg tensors g, b)."""
    gm = [GmTensor("x", "in", "row", "f32"), GmTensor("y", "out", "row", "f32")]
    if seg:
        gm += [GmTensor("g", "in", "seg", "f32"), GmTensor("b", "in", "seg", "f32")]
        tail = [Instr("vseg", "e", ("c",), "Muls", gm="g"), Instr("vseg", "f", ("e",), "Adds", gm="b")]
    else:
        tail = [Instr("vscalar", "e", ("c",), "Muls", "g"), Instr("vscalar", "f", ("e",), "Adds", "b")]
    pre = [Instr("cast_in", "a", gm="x"), Instr("rsum", "m", ("a",), space="stat"),
           Instr("vscalar", "d", ("a",), "Adds", "-(m)"), Instr("vbin", "q", ("d", "d"), "Mul"),
           Instr("rsum", "r", ("q",), space="stat"), Instr("vscalar", "c", ("d",), "Muls", "r")]
    if not seg:
        pre[:0] = [Instr("sload", "g", gm="x", space="stat"), Instr("sload", "b", gm="x", space="stat")]
    return RowProgram("t", None, gm=gm, instrs=pre + tail + [Instr("store", srcs=("f",), gm="y")])


def _eval_text(text: str, env: dict) -> np.float32:
    """A folded scalar text (C++ float arithmetic in brackets) evaluated in fp32, one rounding an operation."""
    env32 = {k: np.float32(v) for k, v in env.items()}
    return np.float32(eval(re.sub(r"(\d+\.\d*)f", r"np.float32(\1)", text), {"np": np}, env32))  # noqa: S307


@pytest.mark.parametrize("through", [False, True])
@pytest.mark.parametrize("seg", [False, True])
def test_a_normalisation_tail_folds_to_one_multiply_and_one_add(seg, through):
    """((x - m) r) g + b (the difference also read by the variance): fold_affine_chains -> (x - m) S + b, S = r g
    per row / per segment; fold_affine_through_shared -> x S + T, T = -m S + b, reading x (the difference stays for
    the variance). S and T evaluated in fp32 from the folded texts give, on rows whose mean is far from 0 (|m| /
    std up to 5000), outputs within each pass's stated bound of float64's (x - m) r g + b (docs/reference/
    kernel_cost.md §4): 4u |x - m| |S| + 2u |y| kept difference, 8u (|x| + |m|) |S| + 2u |y| folded through."""
    p = _norm_tail(seg)
    fold = rowalg.fold_affine_through_shared if through else rowalg.fold_affine_chains
    assert fold(p) == 1
    verify_program(p)
    src = "a" if through else "d"
    mul = next(i for i in p.instrs if i.op == "Muls" and i.srcs == (src,))
    add = next(i for i in p.instrs if i.dst == "f")
    kind = "vseg" if seg else "vscalar"
    assert (mul.kind, add.kind, add.op, add.srcs) == (kind, kind, "Adds", (mul.dst,))
    assert [i.kind for i in p.instrs if i.kind in ("vscalar", "vseg", "vbin")] == ["vscalar", "vbin", kind, kind]
    texts = {i.dst: i.arg for i in p.instrs if i.kind == "sexpr"}
    s_text = (mul.arg or f"segv_{mul.gm}") if seg else texts.get(mul.arg, mul.arg)
    t_text = (add.arg or f"segv_{add.gm}") if seg else texts.get(add.arg, add.arg)
    rng = np.random.default_rng(5)
    u, worst = 2.0 ** -24, 0.0
    for _ in range(200):
        mu, sd = rng.uniform(-50, 50), 10.0 ** rng.uniform(-2, 1)
        x = (mu + sd * rng.standard_normal(4096)).astype(np.float32)
        m, r = np.float32(x.astype(np.float64).mean()), np.float32(1 / x.astype(np.float64).std())
        g, b = np.float32(rng.uniform(0.5, 2)), np.float32(rng.standard_normal())
        env = {"m": m, "r": r, "g": g, "b": b, "segv_g": g, "segv_b": b}
        s, t = _eval_text(s_text, env), _eval_text(t_text, env)
        got = ((x if through else x - m) * s + t).astype(np.float64)   # numpy float32: one rounding each
        want = (x.astype(np.float64) - m) * r * g + b
        scale = np.abs(x) + abs(m) if through else np.abs(x.astype(np.float64) - m)
        bound = (8 if through else 4) * u * scale * abs(float(r) * float(g)) + 2 * u * np.abs(want)
        assert np.all(np.abs(got - want) <= bound)
        worst = max(worst, float(np.max(np.abs(got - want) / bound)))
    assert worst > 0.01   # the rewrite is not exact: the bound is not vacuous


def test_affine_chains_of_one_kind_or_two_links_are_left():
    """Muls then Muls, Adds then Adds (fold_multiply_chains' opt-in business) and a two-link chain (one multiply and
    one add already) are not rewritten."""
    for ops in (("Muls", "Muls", "Muls"), ("Adds", "Adds", "Adds"), ("Adds", "Muls")):
        ins = [Instr("cast_in", "a", gm="x"), Instr("sload", "s", gm="x", space="stat")]
        prev = "a"
        for k, op in enumerate(ops):
            ins.append(Instr("vscalar", f"v{k}", (prev,), op, "s"))
            prev = f"v{k}"
        p = _hand(ins + [Instr("store", srcs=(prev,), gm="y")])
        assert rowalg.fold_affine_chains(p) == 0, ops


def _groups_prog(path, passes=None):
    from opgen.kernel.rows import prepare

    spec = load_spec(path)
    g = prepare(optimize(spec.graph(select_key(spec, {}, ()))))
    return lower(g, analyse(g), passes)


def test_normalisations_per_element_passes_before_and_after():
    """GroupNorm and InstanceNorm: the final phase's (x - mean) * rstd * gamma + beta (Adds, Muls, Muls, Adds a
    row element) becomes (x - mean) * S + beta (Adds, Muls, Adds) with the default passes: per row and per phased
    row (ROW_CHUNK / COL_STREAM run each phase over the row's chunks, phase_instrs_per_row) one vector instruction
    less; with the opt-in FAST_ROW_PASSES x * S + T (Muls, Adds): the final phase no longer computes the difference
    (the variance's phase still does), so per phased row two less."""
    no_fold = [f for f in rowalg.ROW_PASSES if f is not rowalg.fold_affine_chains]
    for path in ("examples/specs/group_norm.py", "examples/specs/instance_norm.py"):
        before, after = _groups_prog(path, no_fold), _groups_prog(path)
        fast = _groups_prog(path, rowalg.FAST_ROW_PASSES)
        assert rowalg.vector_instrs_per_row(before) - rowalg.vector_instrs_per_row(after) == 1, path
        assert rowalg.phase_instrs_per_row(before) - rowalg.phase_instrs_per_row(after) == 1, path
        assert rowalg.phase_instrs_per_row(before) - rowalg.phase_instrs_per_row(fast) == 2, path
        final = lambda q: [i.op for i in q.instrs if -1 in i.phases and i.space == "row" and i.kind != "cast_in"]  # noqa: E731
        assert final(after) == ["Adds", "Muls", "Adds", ""], (path, final(after))   # the store last
        assert final(fast) == ["Muls", "Adds", ""], (path, final(fast))
