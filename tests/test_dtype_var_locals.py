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


FIELD_SPELLED = {
    "rows": ('''
from opgen.dsl import A2, OpSpec, bf16, f16, f32
spec = OpSpec("RmsNormFieldNames", aclnn="aclnnRmsNormFieldNames", socs=(A2,), round="rint")
N, H = spec.dims("N H", max=65535)
(rowsPerCore,) = spec.dtype_vars("rowsPerCore")
spec.input("x", rowsPerCore, [N, H])
spec.input("gamma", rowsPerCore, [H])
spec.attr("epsilon", float, 1e-6)
spec.output("y", rowsPerCore, [N, H])
spec.dtypes((rowsPerCore,), [(f16,), (bf16,)])

@spec.body
def _(b, x, gamma, epsilon):
    xf = x.f32()
    return {"y": (xf * b.rsqrt((xf * xf).mean(-1) + epsilon) * gamma.f32()).cast(rowsPerCore, "rint")}
''', "rowsPerCore", {"N": 45, "H": 333}),
    "cube": ('''
from opgen.dsl import A2, OpSpec, bf16, f16, f32
spec = OpSpec("MatMulFieldNames", aclnn="aclnnMatMulFieldNames", socs=(A2,), round="rint")
M, K, N = spec.dims("M K N", max=65535)
(baseN,) = spec.dtype_vars("baseN")
spec.input("x", baseN, [M, K])
spec.input("w", baseN, [K, N])
spec.input("bias", f32, [N])
spec.output("y", baseN, [M, N])
spec.dtypes((baseN,), [(f16,), (bf16,)])

@spec.body
def _(b, x, w, bias):
    return {"y": (b.matmul(x, w) + bias).cast(baseN, "rint")}
''', "baseN", {"M": 37, "K": 50, "N": 45})}
"""A spec per family whose one dtype variable is spelled like one of that family's tiling fields, its dims."""


def _field_spelled_ref(family: str, x: dict, eps: float = 1e-6):
    """float64 truth of FIELD_SPELLED's operators."""
    import numpy as np

    f = {k: np.asarray(v, np.float64) for k, v in x.items()}
    if family == "rows":
        return f["x"] / np.sqrt((f["x"] ** 2).mean(-1, keepdims=True) + eps) * f["gamma"]
    return f["x"] @ f["w"] + f["bias"]


@pytest.mark.parametrize("family", sorted(FIELD_SPELLED))
def test_a_dtype_variable_spelled_like_a_tiling_field(tmp_path, family):
    """A tiling field is printed td_->name and a template parameter names a type, so the two may share a spelling:
    the class keeps the dtype variable as its template parameter beside the field of that name (the verifier once
    refused the pair: 'field name rowsPerCore is also a template parameter'); the cube class names its template
    parameter itself (the operands' T), the field baseN beside the dtype variable baseN. Each kernel runs on the
    Kernel IR interpreter against float64 (fp16)."""
    import numpy as np

    from opgen.check import run_check
    from opgen.check.kirengine import kernel_classes

    src, var, dims = FIELD_SPELLED[family]
    p = tmp_path / f"{family}_field_names.py"
    p.write_text(src)
    for k in kernel_classes(load_spec(str(p))):
        # the rows class takes the spec's dtype variables as its template parameters; the cube class its own (T)
        assert var in k.fields and (var in k.tparams) == (family == "rows"), (k.tparams, k.fields)
        kir.verify(k)
    rng = np.random.default_rng(2)
    shapes = {"rows": {"x": (dims.get("N"), dims.get("H")), "gamma": (dims.get("H"),)},
              "cube": {"x": (dims.get("M"), dims.get("K")), "w": (dims.get("K"), dims.get("N")),
                       "bias": (dims.get("N"),)}}[family]
    x = {n: rng.uniform(-1, 1, s).astype(np.float32 if n == "bias" else np.float16) for n, s in shapes.items()}
    r = run_check(str(p), x, {}, dtypes={var: "float16"}, progress=False, engine="kir")
    assert not r.faults and r.passed, r.faults[:1]
    ref = _field_spelled_ref(family, x)
    got = np.asarray(r.arrays["y"], np.float64)
    assert np.all(np.abs(got - ref) <= 2.0 ** -10 * np.abs(ref) + 2.0 ** -14 * (np.abs(ref).max() + 1)), \
        np.abs(got - ref).max()


def test_verifier_takes_a_field_spelled_like_a_template_parameter_and_nothing_else():
    """The one pair of the class's names that may share a spelling: a tiling field and a template parameter (a GM
    tensor or a buffer of that name is still refused)."""
    kir.verify(kir.KernelClass("K", "TD", tparams=("X",), fields=("X",)))
    with pytest.raises(kir.IRError, match="GM tensor name X is also a template parameter"):
        kir.verify(kir.KernelClass("K", "TD", tparams=("X",), args=("a",),
                                   gms=(kir.GmTensor("X", "float", "a"),)))
