"""Row programs' scalar C++ texts as Kernel-IR float expressions (opgen.kernel.rowfexpr): each form the row
programs write (opgen.kernel.rowprog SCALAR_* tables, _float_literal, rows.py's mean) parses to the tree it means
and prints back as the same C++; its value in the Kernel-IR interpreter is the fp32 NumPy value of the C++; a text
outside the grammar is one clear error."""

from __future__ import annotations

import numpy as np
import pytest

from opgen.ir.dims import Lit, Sym
from opgen.kernel import kir_interp as ki
from opgen.kernel import kir_sync as ks
from opgen.kernel.kir import (Copy, CppPrinter, FBin, FCall, FConst, FInt, FLet, FMinMax, FNeg, FRef, Get, GetValue,
                              GmTensor, GmView, InitBuffer, KernelClass, Local, Ref, SetValue, TensorVar)
from opgen.kernel.rowfexpr import FExprError, parse

_K = KernelClass("K", "T", args=(), gms=(), locals=(), tensors=(), fields=(), process=())


@pytest.mark.parametrize("text, tree", [
    ("s0 / static_cast<float>(hidden_)", FBin("/", FRef("s0"), FInt(Sym("hidden_")))),
    ("(s3 + attr_epsilon)", FBin("+", FRef("s3"), FRef("attr_epsilon"))),
    ("1.0f / Std::sqrt(s4)", FBin("/", FConst(1.0), FCall("sqrt", FRef("s4")))),
    ("Std::abs(s4)", FCall("abs", FRef("s4"))),
    ("(1.0f / s5)", FBin("/", FConst(1.0), FRef("s5"))),
    ("-(s1)", FNeg(FRef("s1"))),
    ("-s1", FNeg(FRef("s1"))),
    ("1e-05f", FConst(1e-05)),
    ("(s1 > s2 ? s1 : s2)", FMinMax("max", FRef("s1"), FRef("s2"))),
    ("(s1 < (s2 * s3) ? s1 : (s2 * s3))", FMinMax("min", FRef("s1"), FBin("*", FRef("s2"), FRef("s3")))),
    ("(a - b - c)", FBin("-", FBin("-", FRef("a"), FRef("b")), FRef("c"))),
    ("static_cast<float>(-(s1))", FNeg(FRef("s1"))),
])
def test_each_form_parses_to_its_meaning_and_prints_as_written(text, tree):
    e = parse(text, ("hidden_",))
    assert e == tree
    # a no-op cast of an fp32 value is dropped (a vector scalar operand gets it back from the printer)
    want = "-(s1)" if text == "static_cast<float>(-(s1))" else text
    assert CppPrinter(_K).f(e) == want


@pytest.mark.parametrize("text", ["exp(s0)", "(s1 > s2 ? s2)", "s1 > s2", "s0 +", "s0 s1", "std::sqrt(s0)", "s0 % 2"])
def test_a_text_outside_the_grammar_is_one_error_quoting_it(text):
    with pytest.raises(FExprError, match="row kernel scalar"):
        parse(text)


def _eval_kernel(text: str) -> KernelClass:
    """GM x[0..3] -> UB; a, b, c = GetValue; y[0] = the parsed text over a, b, c and the int field h."""
    body = (InitBuffer("ub", Lit(32)), Get("t", "ub", "float"),
            Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(32)),
            GetValue("a", Ref("t", Lit(0))), GetValue("b", Ref("t", Lit(1))), GetValue("c", Ref("t", Lit(2))),
            FLet("r", parse(text, ("h",))),
            SetValue(Ref("t", Lit(0)), FRef("r")),
            Copy(GmView("gmY"), Ref("t"), Lit(1), Lit(4)))
    k = KernelClass("E", "ET", args=("x", "y"), gms=(GmTensor("gmX", "float", "x"), GmTensor("gmY", "float", "y")),
                    locals=(Local("ub"),), tensors=(TensorVar("t", "float"),), fields=("h",),
                    process=body)
    return ks.place_syncs(k)[0]


@pytest.mark.parametrize("text, fn", [
    ("(a + b) / static_cast<float>(h)", lambda a, b, c, h: (a + b) / np.float32(h)),
    ("1.0f / Std::sqrt((c + 1e-05f))", lambda a, b, c, h: np.float32(1) / np.sqrt(c + np.float32(1e-5))),
    ("(a > b ? a : b) - -(c)", lambda a, b, c, h: max(a, b) + c),
    ("(a < b ? a : b) * Std::abs(b)", lambda a, b, c, h: min(a, b) * abs(b)),
])
def test_the_interpreter_computes_the_parsed_expression_in_fp32(text, fn):
    x = np.array([1.75, -3.5, 2.25, 0, 0, 0, 0, 0], np.float32)
    y = np.zeros(8, np.float32)
    k = _eval_kernel(text)
    r = ki.run(k, {"h": 3}, {"x": x, "y": y}, 1)
    assert r.ok, r.first_fault
    a, b, c = (np.float32(v) for v in x[:3])
    assert y[0] == np.float32(fn(a, b, c, 3))


def test_a_conditional_other_than_a_max_or_min_is_an_fcond_printed_as_written():
    """(s1 > s2 ? s2 : s1) is a min written the other way round: an FCond (docs/design.md "Per-row comparisons and
    choices"), printed back as the same C++ text."""
    from opgen.kernel.kir import FCond

    for text in ("(s1 > s2 ? s2 : s1)", "(s0 != 0.0f ? s9 : s11)", "(s0 <= 1.0f ? 1.0f : 0.0f)"):
        e = parse(text)
        assert isinstance(e, FCond)
        assert CppPrinter(_K).f(e) == text
