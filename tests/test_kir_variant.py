"""A method and its variant (kir.Func.variant_of) printed as one member template `<bool flag>` whose differing
statements sit in `if constexpr (flag)` blocks (kir.merge_variant, kir.printed_methods; docs/design.md "Variants
of a method"): each instantiation is the statements of its method, a block never hides a name the rest of the body
reads, and the rows family's ComputeFetch prints as Compute<true>."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from opgen.ir.dims import Constraint, Lit, Sym
from opgen.kernel import kir
from opgen.kernel.kir import Call, For, If, IfConst, Let, Scope

ROOT = Path(__file__).resolve().parent.parent


def _arm(stmts: tuple, value: bool) -> tuple:
    """The statements the C++ compiler keeps of `stmts` for the flag's `value` (written here, not kir.resolve_flag)."""
    out: list = []
    for s in stmts:
        if isinstance(s, IfConst):
            out += _arm(s.then if value else s.orelse, value)
        elif isinstance(s, (For, Scope, kir.CoreIf)):
            out.append(dataclasses.replace(s, body=_arm(s.body, value)))
        elif isinstance(s, If):
            out.append(dataclasses.replace(s, then=_arm(s.then, value), orelse=_arm(s.orelse, value)))
        else:
            out.append(s)
    return tuple(out)


def _canon(stmts: tuple) -> tuple:
    """`stmts` with each pool flag's local event variable renamed in order of first appearance (e0, e1, ...): two
    methods equal under _canon differ only in those names, which mean nothing beyond pairing a set with its wait."""
    names: dict = {}

    def one(s):
        if isinstance(s, (kir.SetFlag, kir.WaitFlag)) and s.pool:
            names.setdefault(s.var, f"e{len(names)}")
            return dataclasses.replace(s, var=names[s.var], id=0)
        return kir.map_children(s, lambda b: tuple(one(x) for x in b))
    return tuple(one(s) for s in stmts)


def _c(name: str) -> Call:
    return Call(name)


CASES = {
    # an inserted run at the top, one in a loop's body, one in each branch of an If inside it
    "nested": (
        (_c("a"), For("i", Lit(0), Sym("k"), Lit(1), (_c("b"), If((Constraint("<", Sym("i"), Lit(3)),),
                                                                   (_c("c"),), (_c("d"),)), _c("e"))), _c("f")),
        (_c("x"), _c("a"), For("i", Lit(0), Sym("k"), Lit(1), (
            _c("b"), If((Constraint("<", Sym("i"), Lit(3)),), (_c("c"), _c("y")), (_c("z"), _c("d"))), _c("e"))),
         _c("f"))),
    # a replaced statement and a deleted one
    "replace": ((_c("a"), _c("b"), _c("c"), _c("d")), (_c("a"), _c("q"), _c("c"))),
    # loops of different headers are not merged into one: each stays whole in its arm
    "headers": ((For("i", Lit(0), Sym("k"), Lit(1), (_c("a"),)),),
                (For("i", Lit(0), Sym("k"), Lit(2), (_c("a"),)),)),
    # a name declared in a differing run and read only inside it
    "local": ((_c("a"), _c("b")), (_c("a"), Let("n", Lit(4)), Call("use", (Sym("n"),)), _c("b"))),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_instantiation_is_its_method(case):
    base, variant = CASES[case]
    merged = kir.merge_variant(base, variant, "flag_")
    assert merged is not None
    assert _arm(merged, False) == base and _arm(merged, True) == variant
    # the common statements printed once: the merged body holds fewer statements than the two together
    count = sum(1 for _ in kir.walk(_arm(merged, False))) + sum(1 for _ in kir.walk(_arm(merged, True)))
    if case == "nested":
        assert sum(1 for s in kir.walk(merged) if not isinstance(s, IfConst)) + \
            sum(len(s.then) + len(s.orelse) for s in kir.walk(merged) if isinstance(s, IfConst)) < count
        assert sum(1 for s in kir.walk(merged) if isinstance(s, For)) == 1   # one loop, its body merged


def test_a_name_declared_in_a_block_and_read_after_it_is_not_merged():
    """`const int64_t n = 4;` inside `if constexpr (flag_) { }` is out of scope where the common statements after
    the block read n: the two bodies stay two methods (None), never a template that does not compile."""
    base = (Let("n", Lit(2)), _c("a"), Call("use", (Sym("n"),)))
    variant = (Let("n", Lit(4)), _c("a"), Call("use", (Sym("n"),)))
    assert kir.merge_variant(base, variant, "flag_") is None
    # a member is assigned, not declared: the same shape merges
    assert kir.merge_variant(base, variant, "flag_", members={"n"}) is not None


def test_compute_fetch_prints_as_one_compute_template():
    """LayerNormGradV3's rows kernel (examples/specs/layer_norm_grad.py) has Compute and its variant ComputeFetch
    in the IR (three forms, the next pass's CopyIn after the last row-input free in each): the C++ holds one
    `template <bool fetchNext_> Compute`, the pass loops call Compute<true> / Compute<false>, and each CopyIn of
    the next pass sits in an `if constexpr (fetchNext_)` block."""
    from opgen.check.kirengine import kernel_classes
    from opgen.registry import load_spec

    (k,) = kernel_classes(load_spec(str(ROOT / "examples" / "specs" / "layer_norm_grad.py")))
    assert k.method("ComputeFetch").variant_of == ("Compute", "fetchNext_")
    text = kir.to_cpp(k)
    assert "ComputeFetch" not in text, "printed as two methods"
    assert len(re.findall(r"template <bool fetchNext_>\n\s*__aicore__ inline void Compute\(", text)) == 1
    assert text.count("Compute<true>(r0, k);") == 1 and text.count("Compute<false>(r0, k);") >= 1
    assert len(re.findall(r"if constexpr \(fetchNext_\) \{\n\s*CopyIn\(r0 \+ td_->rowsPerPass", text)) == 3
    (m, flags), = [(m, f) for m, f in kir.printed_methods(k)[0] if m.name == "Compute"]
    assert flags == ("fetchNext_",)
    fetch = kir.resolve_flag(m.body, "fetchNext_", True)
    assert _canon(fetch) == _canon(k.method("ComputeFetch").body)
    assert _arm(m.body, True) == fetch
    assert kir.resolve_flag(m.body, "fetchNext_", False) == k.method("Compute").body


def test_the_flag_is_checked_as_a_name():
    """A variant whose flag is a name of the class (here a method) is refused by the verifier."""
    from opgen.check.kirengine import kernel_classes
    from opgen.registry import load_spec

    (k,) = kernel_classes(load_spec(str(ROOT / "examples" / "specs" / "layer_norm_grad.py")))
    bad = [dataclasses.replace(m, variant_of=("Compute", "CopyIn")) if m.name == "ComputeFetch" else m
           for m in k.methods]
    with pytest.raises(kir.IRError, match="variant of 'Compute' with flag 'CopyIn'"):
        kir.verify(dataclasses.replace(k, methods=tuple(bad)))
