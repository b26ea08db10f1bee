"""A dtype variable spelled like one of the lowering's own locals (docs/reference/names.md §1).

The rows kernel class takes the spec's dtype variables as its template parameters (`template <typename G>`) and its
methods declare locals of their own (`G` for a group's rows, `n`, `b`, loop variables); C++ forbids a local to
redeclare a template parameter, so such a spec's kernel did not compile (`declaration of 'G' shadows template
parameter`). kir.disjoint_tparams spells the clashing local `v_<name>_`; the verifier refuses a local named like a
template parameter, so a lowering that skipped the rename fails at generation, not in the C++ compiler."""

import re

import pytest

from opgen.kernel import kir
from opgen.registry import load_spec

SPEC = '''
from opgen.dsl import A2, OpSpec, f16, f32

spec = OpSpec("RmsNormLocalNames", aclnn="aclnnRmsNormLocalNames", socs=(A2,), round="rint",
              doc="RmsNorm whose dtype variable is spelled like a local of the lowering")
Bd = spec.variadic("Bd", max_rank=2)
H = spec.dim("H", max=1048576)
(V, W) = spec.dtype_vars("G n")
spec.input("x", V, [Bd, H])
spec.input("gamma", W, [H])
spec.attr("epsilon", float, 1e-6)
spec.output("y", V, [Bd, H])
spec.output("rstd", f32, [Bd, 1])
spec.dtypes((V, W), [(f16, f16)])


@spec.body
def _(b, x, gamma, epsilon):
    rstd = b.rsqrt((x * x).mean(-1) + epsilon)
    return {"y": x * rstd * gamma.f32(), "rstd": rstd}
'''


def test_locals_give_way_to_the_template_parameters(tmp_path):
    """Dtype variables G and n (the rows schedule's group local `G`, a loop's `n`): the class keeps them as its
    template parameters and its locals of those names are spelled v_G_ / v_n_ (one generation for both names)."""
    from opgen.codegen import generate

    p = tmp_path / "rms_norm_local_names.py"
    p.write_text(SPEC)
    h = generate(load_spec(str(p)))["op_kernel/rms_norm_local_names.h"]
    m = re.search(r"template <typename G, typename n>\s*class", h)
    assert m, "the template parameters keep the spec's names"
    body = h[m.end():]   # the class (file-level helpers before it have their own template parameters)
    for name in ("G", "n"):
        # no declaration of the bare name in the class (int64_t G = ..., for (int64_t n = ...), LocalTensor<...> n)
        assert not re.search(rf"\b(int64_t|float|bool|LocalTensor<\w+>)\s+{name}\s*[=;,)]", body), name
        assert f"v_{name}_" in body, name


def test_verifier_refuses_a_local_named_like_a_template_parameter():
    k = kir.KernelClass("K", "TD", tparams=("G",), process=(kir.Let("G", kir.E(1)),))
    with pytest.raises(kir.IRError, match="redeclares the class's template parameter G"):
        kir.verify(k)
    fixed = kir.disjoint_tparams(k)
    assert fixed.process[0].name == "v_G_" and fixed.tparams == ("G",)
    kir.verify(fixed)
