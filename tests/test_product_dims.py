"""A dim written only inside a product with dims an attribute or another input binds (CANN's BSH layout: query
[B, S, H] with H = N * D and N = head_num) is bound once the others are known (docs/design.md "Specs and the Tensor
IR": an affine dim binds when it divides). Values are checked against NumPy written here."""
from __future__ import annotations

import numpy as np
import pytest

from opgen.errors import ValidationError
from opgen.interp import interpret

SPEC = '''
from opgen.dsl import A2, OpSpec, f32
spec = OpSpec("HeadMix", aclnn="aclnnHeadMix", socs=(A2,))
B, S1, S2, N1 = spec.dims("B S1 S2 N1")
N2 = spec.dim("N2")
D = spec.dim("D")
spec.input("query", f32, [B, S1, N1 * D])
spec.input("key", f32, [B, S2, N2 * D])
spec.attr("head_num", int, 1, dim=N1)
spec.output("y", f32, [B, N1, S1, N2 * S2])
spec.dtypes((), [()])
@spec.body
def _(b, query, key, head_num):
    q = query.reshape([B, S1, N1, D]).permute(0, 2, 1, 3)          # [B, N1, S1, D]
    k = key.reshape([B, S2 * N2, D])                                # every (key, kv head) row
    s = b.matmul(q.reshape([B, N1 * S1, D]), k, transpose_b=True)  # [B, N1 * S1, S2 * N2]
    return {"y": s.reshape([B, N1, S1, N2 * S2])}
'''


@pytest.fixture
def spec_path(tmp_path):
    p = tmp_path / "head_mix.py"
    p.write_text(SPEC)
    return str(p)


def test_head_dim_comes_from_the_hidden_size_and_head_num_then_binds_the_kv_heads(spec_path):
    rng = np.random.default_rng(0)
    B, S1, S2, N1, N2, D = 2, 3, 5, 4, 2, 6
    q = rng.standard_normal((B, S1, N1 * D)).astype(np.float32)
    k = rng.standard_normal((B, S2, N2 * D)).astype(np.float32)
    y = interpret(spec_path, {"query": q, "key": k}, {"head_num": N1}, mode="exact")["y"]
    qh = q.astype(np.float64).reshape(B, S1, N1, D).transpose(0, 2, 1, 3)
    kh = k.astype(np.float64).reshape(B, S2 * N2, D)
    want = np.einsum("bnsd,bkd->bnsk", qh, kh)
    assert y.shape == (B, N1, S1, N2 * S2)
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)


def test_a_hidden_size_the_heads_do_not_divide_names_the_attribute(spec_path):
    q = np.zeros((1, 2, 12), np.float32)
    k = np.zeros((1, 3, 12), np.float32)
    with pytest.raises(ValidationError) as e:
        interpret(spec_path, {"query": q, "key": k}, {"head_num": 5})
    assert str(e.value) == "query: shape [1, 2, 12]: dim 2 is 12, not D * N1 for any whole D with N1=5 (from head_num)"


def test_a_kv_hidden_size_the_head_dim_does_not_divide_is_refused(spec_path):
    q = np.zeros((1, 2, 12), np.float32)     # D = 3 with head_num 4
    k = np.zeros((1, 3, 10), np.float32)
    with pytest.raises(ValidationError, match=r"^key: shape \[1, 3, 10\]: dim 2 is 10, not D \* N2 for any whole N2 "
                                              r"with D=3 \(from query\)$"):
        interpret(spec_path, {"query": q, "key": k}, {"head_num": 4})


def test_host_code_reads_a_product_dim_through_its_known_factors(spec_path):
    """The TilingFunc reads D = H1 / head_num (N1 only from the attribute: the query holds it in the product
    alone) and N2 = H2 / D, each guarded against a zero divisor (host code never divides by zero)."""
    from opgen.ir.dims import Sym
    from opgen.registry import load_spec
    from opgen.tiling.emit import dim_cpp

    spec = load_spec(spec_path)
    n1 = "AttrInt(context, 0, 1)"
    d = f"({n1} != 0 ? queryShape.GetDim(2) / {n1} : 0)"
    assert dim_cpp(spec, Sym("N1")) == n1
    assert dim_cpp(spec, Sym("D")) == d
    assert dim_cpp(spec, Sym("N2")) == f"({d} != 0 ? keyShape.GetDim(2) / {d} : 0)"


def test_infershape_reads_the_product_dims_from_declared_factors(spec_path):
    """InferShape reads N1 from the attribute (null- and range-checked), then N2 from the key's product with D, D
    printed from the query's product with the declared dimN1 (no output holds D alone, so it has no variable)."""
    from opgen.codegen.infershape import emit_infershape
    from opgen.registry import load_spec

    text = next(iter(emit_infershape(load_spec(spec_path)).values()))
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("const int64_t dim")]
    d = "(dimN1 != 0 ? queryShape->GetDim(2) / dimN1 : 0)"
    assert lines == ["const int64_t dimB = queryShape->GetDim(0);",
                     "const int64_t dimN1 = *attrValue0;",
                     "const int64_t dimS1 = queryShape->GetDim(1);",
                     f"const int64_t dimN2 = ({d} != 0 ? keyShape->GetDim(2) / {d} : 0);",
                     "const int64_t dimS2 = keyShape->GetDim(1);"], lines
    assert "OP_CHECK_NULL_WITH_CONTEXT(context, attrValue0);" in text and "if (*attrValue0 < 1) {" in text


def test_factors_known_only_through_each_other_are_refused(tmp_path):
    """query [B, S, N * D] with neither N nor D given elsewhere: no host code can split the product, and generation
    says which dim it cannot read instead of dividing by a guess."""
    from opgen.errors import SpecError
    from opgen.ir.dims import Sym
    from opgen.registry import load_spec
    from opgen.tiling.emit import dim_cpp

    p = tmp_path / "head_mix.py"
    p.write_text(SPEC.replace('spec.attr("head_num", int, 1, dim=N1)\n', "").replace(", head_num):", "):"))
    spec = load_spec(str(p))
    with pytest.raises(SpecError, match=r"dim D is not carried by any input; the tiling cannot read it"):
        dim_cpp(spec, Sym("D"))


def test_infershape_refuses_a_size_the_known_factors_do_not_divide(spec_path):
    """Graph mode has no aclnn layer in front of InferShape: it checks each product it divides is exact, in the
    interpreter's words (the query's H1 by head_num, the key's H2 by the D that gives)."""
    from opgen.codegen.infershape import emit_infershape
    from opgen.registry import load_spec

    text = next(iter(emit_infershape(load_spec(spec_path)).values()))
    assert "if (dimN1 != 0 && queryShape->GetDim(2) % dimN1 != 0) {" in text
    assert '"query: dim 2 is %lld, not D * N1 for any whole D with N1=%lld"' in text
    assert '"key: dim 2 is %lld, not D * N2 for any whole N2 with D=%lld"' in text


def test_tiling_func_refuses_a_size_the_known_factors_do_not_divide(spec_path):
    """The TilingFunc, which graph mode also reaches without the aclnn layer, checks the same exactness before it
    tiles: the query's H1 by head_num (read from the attribute), the key's H2 by the D that gives."""
    from opgen.registry import load_spec
    from opgen.tiling.emit import exact_products

    checks = exact_products(load_spec(spec_path))
    n1 = "AttrInt(context, 0, 1)"
    d = f"({n1} != 0 ? queryShape.GetDim(2) / {n1} : 0)"
    assert [c["cond"] for c in checks] == [f"{n1} != 0 && queryShape.GetDim(2) % {n1} != 0",
                                           f"{d} != 0 && keyShape.GetDim(2) % {d} != 0"]
    assert [c["msg"] for c in checks] == ['"query: dim 2 is %lld, not D * N1 for any whole D with N1=%lld"',
                                          '"key: dim 2 is %lld, not D * N2 for any whole N2 with D=%lld"']


def test_a_factor_of_one_leaves_the_dim_itself(spec_path):
    """head_num 1: N1 * D with N1 = 1 is D itself, bound from the hidden size (a new user's trial found BSH with one
    head refused with 'dim D is not bound')."""
    rng = np.random.default_rng(1)
    B, S1, S2, N2, D = 1, 3, 4, 2, 8
    q = rng.standard_normal((B, S1, D)).astype(np.float32)
    k = rng.standard_normal((B, S2, N2 * D)).astype(np.float32)
    y = interpret(spec_path, {"query": q, "key": k}, {"head_num": 1}, mode="exact")["y"]
    want = np.einsum("bsd,bkd->bsk", q.astype(np.float64), k.astype(np.float64).reshape(B, S2 * N2, D))
    assert y.shape == (B, 1, S1, N2 * S2)
    np.testing.assert_allclose(y.reshape(B, S1, S2 * N2), want, rtol=1e-12, atol=1e-12)
