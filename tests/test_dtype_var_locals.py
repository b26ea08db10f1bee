"""A dtype variable spelled like one of the kernel's own names (docs/reference/names.md §1).

The rows kernel class takes the spec's dtype variables as its template parameters (`template <typename G>`) and its
methods declare locals of their own (`G` for a group's rows, `n`, `b`, loop variables), call AscendC functions (`Exp`)
and its own methods (`Compute`), and read tiling fields (`td_->rowsPerCore`). C++ forbids a local or a member to
redeclare a template parameter, and a call spelled like one constructs the type, so such a spec's kernel did not
compile (`declaration of 'G' shadows template parameter`; 88 errors for a softmax whose dtype variable is Exp). The
Kernel IR keeps types and names apart, and its C++ printer spells a template parameter that would meet another
identifier of the class `v_<name>_` (kir.spelled_tparams); a field, printed td_->name, meets nothing."""

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


def test_a_template_parameter_gives_way_to_the_locals(tmp_path):
    """Dtype variables G and n (the rows schedule's group local `G`, a loop's `n`): the printed class spells its
    template parameters v_G_ / v_n_ with every use, and its locals keep their names (one generation for both)."""
    from opgen.codegen import generate

    p = tmp_path / "rms_norm_local_names.py"
    p.write_text(SPEC)
    h = generate(load_spec(str(p)))["op_kernel/rms_norm_local_names.h"]
    m = re.search(r"template <typename v_G_, typename v_n_>\s*class", h)
    assert m, "the template parameters are re-spelled"
    body = h[m.end():]   # the class (file-level helpers before it have their own template parameters)
    for name in ("G", "n"):
        # the bare name is no type anywhere in the class (typename, <G>, sizeof(G), G*), the locals declare it
        assert not re.search(rf"typename {name}\b|<{name}>|sizeof\({name}\)|\b{name}\*", body), name
        assert re.search(rf"\b(int64_t|float|bool|LocalTensor<\w+>)\s+{name}\s*[=;,)]", body), name


def test_verifier_takes_a_local_named_like_a_template_parameter_and_the_printer_respells_it():
    """The Kernel IR keeps types and names apart: a Let G beside a template parameter G verifies, and the printed
    class spells the parameter v_G_ (C++ forbids the local to redeclare it)."""
    k = kir.KernelClass("K", "TD", tparams=("G",), tensors=(kir.TensorVar("x_", "G"),),
                        process=(kir.Let("G", kir.E(1)),))
    kir.verify(k)
    t = kir.to_cpp(k)
    assert "template <typename v_G_>" in t and "LocalTensor<v_G_> x_;" in t and "int64_t G = 1;" in t


OPERATORS = {
    "rms_norm": '''
from opgen.dsl import A2, OpSpec, bf16, f16, f32
spec = OpSpec("{op}", aclnn="aclnn{op}", socs=(A2,), round="rint")
N, H = spec.dims("N H", max=65535)
({var},) = spec.dtype_vars("{var}")
spec.input("x", {var}, [N, H])
spec.input("gamma", {var}, [H])
spec.attr("epsilon", float, 1e-6)
spec.output("y", {var}, [N, H])
spec.dtypes(({var},), [(f16,), (bf16,)])

@spec.body
def _(b, x, gamma, epsilon):
    xf = x.f32()
    return {{"y": (xf * b.rsqrt((xf * xf).mean(-1) + epsilon) * gamma.f32()).cast({var}, "rint")}}
''',
    "softmax": '''
from opgen.dsl import A2, OpSpec, bf16, f16, f32
spec = OpSpec("{op}", aclnn="aclnn{op}", socs=(A2,), round="rint")
N, H = spec.dims("N H", max=65535)
({var},) = spec.dtype_vars("{var}")
spec.input("x", {var}, [N, H])
spec.output("y", {var}, [N, H])
spec.dtypes(({var},), [(f16,), (bf16,)])

@spec.body
def _(b, x):
    xf = x.f32()
    e = b.exp(xf - xf.max(-1))
    return {{"y": (e / e.sum(-1)).cast({var}, "rint")}}
''',
    "mat_mul": '''
from opgen.dsl import A2, OpSpec, bf16, f16, f32
spec = OpSpec("{op}", aclnn="aclnn{op}", socs=(A2,), round="rint")
M, K, N = spec.dims("M K N", max=65535)
({var},) = spec.dtype_vars("{var}")
spec.input("x", {var}, [M, K])
spec.input("w", {var}, [K, N])
spec.input("bias", f32, [N])
spec.output("y", {var}, [M, N])
spec.dtypes(({var},), [(f16,), (bf16,)])

@spec.body
def _(b, x, w, bias):
    return {{"y": (b.matmul(x, w) + bias).cast({var}, "rint")}}
'''}
"""Three operators (a rows RmsNorm and softmax, a cube MatMul + bias) whose one dtype variable `{var}` a test names
like one of the kernel's own names, and whose OpDef name is `{op}`."""


def _case(tmp_path, kind: str, op: str, var: str):
    """(spec path, fp16 inputs, float64 reference) of OPERATORS[kind] as op `op` with dtype variable `var`: RmsNorm
    and softmax at N 45, H 333, MatMul + bias at M 37, K 50, N 45."""
    import numpy as np

    p = tmp_path / f"{kind}_{var}.py"
    p.write_text(OPERATORS[kind].format(op=op, var=var))
    rng = np.random.default_rng(5)
    if kind == "mat_mul":
        x = {"x": rng.uniform(-1, 1, (37, 50)).astype(np.float16), "w": rng.uniform(-1, 1, (50, 45)).astype(np.float16),
             "bias": rng.uniform(-1, 1, (45,)).astype(np.float32)}
        f = {k: np.asarray(v, np.float64) for k, v in x.items()}
        return p, x, f["x"] @ f["w"] + f["bias"]
    x = {"x": rng.uniform(-2, 2, (45, 333)).astype(np.float16)}
    f = np.asarray(x["x"], np.float64)
    if kind == "softmax":
        e = np.exp(f - f.max(-1, keepdims=True))
        return p, x, e / e.sum(-1, keepdims=True)
    x["gamma"] = rng.uniform(-1, 1, (333,)).astype(np.float16)
    return p, x, f / np.sqrt((f * f).mean(-1, keepdims=True) + 1e-6) * np.asarray(x["gamma"], np.float64)


def _close16(got, ref) -> bool:
    """Within an fp16 output's rounding plus fp32 noise at the output's scale."""
    import numpy as np

    got = np.asarray(got, np.float64)
    return bool(np.all(np.abs(got - ref) <= 2.0 ** -10 * np.abs(ref) + 2.0 ** -14 * (np.abs(ref).max() + 1e-30)))


def _run_kir(p, x, var, ref):
    """Run the spec at `p` on the Kernel IR interpreter in fp16 and assert it within _close16 of `ref`."""
    from opgen.check import run_check

    r = run_check(str(p), x, {}, dtypes={var: "float16"}, progress=False, engine="kir")
    assert not r.faults and r.passed, r.faults[:1]
    assert _close16(r.arrays["y"], ref)


@pytest.mark.parametrize("kind, var", [("rms_norm", "rowsPerCore"), ("mat_mul", "baseN")])
def test_a_dtype_variable_spelled_like_a_tiling_field(tmp_path, kind, var):
    """A tiling field is printed td_->name and a template parameter names a type, so the two may share a spelling:
    the rows class keeps the dtype variable rowsPerCore as its template parameter beside the field of that name
    (the verifier once refused the pair: 'field name rowsPerCore is also a template parameter'); the cube class
    names its template parameter itself (the operands' T), the field baseN beside the dtype variable baseN. Each
    kernel runs on the Kernel IR interpreter against float64 (fp16)."""
    from opgen.check.kirengine import kernel_classes

    p, x, ref = _case(tmp_path, kind, "FieldNames", var)
    for k in kernel_classes(load_spec(str(p))):
        # the rows class takes the spec's dtype variables as its template parameters; the cube class its own (T)
        assert var in k.fields and (var in k.tparams) == (kind == "rms_norm"), (k.tparams, k.fields)
        kir.verify(k)
    _run_kir(p, x, var, ref)


def test_a_template_parameter_may_share_its_spelling_with_a_field_or_a_member():
    """The Kernel IR keeps types and names apart, so the verifier takes a template parameter spelled like a tiling
    field or a member; the printer spells the parameter v_<name>_ only where its C++ would meet the member (a field
    is printed td_->X, which meets nothing), with every use."""
    k = kir.KernelClass("K", "TD", tparams=("X",), fields=("X",))
    kir.verify(k)
    assert "template <typename X>" in kir.to_cpp(k)
    k = kir.KernelClass("K", "TD", tparams=("X",), args=("a",), gms=(kir.GmTensor("X", "X", "a"),))
    kir.verify(k)
    t = kir.to_cpp(k)
    assert "template <typename v_X_>" in t and "reinterpret_cast<__gm__ v_X_*>(a)" in t and "GlobalTensor<v_X_> X;" in t


RESPELLED = {"Exp": "softmax", "Compute": "rms_norm"}
"""Dtype variables spelled like an AscendC call of their rows kernel (Exp: a softmax's Exp) or a method of the rows
class (Compute), and the operator of OPERATORS each is tried on."""


@pytest.mark.parametrize("name", sorted(RESPELLED))
def test_a_dtype_variable_spelled_like_a_call_or_a_method_is_respelled_in_the_cpp(tmp_path, name):
    """The class's template parameter meets an identifier of its code (a softmax's `Exp(...)` call would construct
    the type; a method `Compute` may not redeclare it): the printed class spells it v_<name>_ (kir.to_cpp), where
    the previous print gave C++ that did not compile (g++ against CANN's headers: 88 errors for the softmax, `no
    matching function for call to half::half(LocalTensor<float>&, ...)`). The Kernel IR keeps the spec's name (the
    interpreter binds it), and the kernel runs on it against float64."""
    from opgen.codegen import generate

    p, x, ref = _case(tmp_path, RESPELLED[name], "TypeNames", name)
    h = generate(load_spec(str(p)))["op_kernel/type_names.h"]
    assert re.search(rf"template <typename v_{name}_>\s*class", h)
    assert not re.search(rf"typename {name}\b|<{name}>|sizeof\({name}\)|{name}\*", h)
    _run_kir(p, x, name, ref)


@pytest.mark.slow
def test_a_respelled_template_parameter_compiles_and_runs_emulated(tmp_path):
    """The softmax whose dtype variable is Exp, its emitted C++ compiled with g++ on the emulation and run at N 45,
    H 333 (fp16) against float64."""
    from opgen.check import run_check
    from opgen.codegen import write_ops

    p, x, ref = _case(tmp_path, "softmax", "TypeNames", "Exp")
    write_ops([str(p)], tmp_path / "gen")
    r = run_check(str(p), x, {}, dtypes={"Exp": "float16"}, progress=False, engine="emu", gen_dir=tmp_path / "gen")
    assert not r.faults and r.passed, r.faults[:1]
    assert _close16(r.arrays["y"], ref)


def test_the_printer_keeps_a_template_parameter_that_meets_nothing():
    """A template parameter spelled like a method of its class is printed v_<name>_ with every use; one that meets
    no identifier keeps its spelling (the bundled kernels' T, U)."""
    m = kir.Func("Exp", (), ())
    t = kir.to_cpp(kir.KernelClass("K", "TD", tparams=("Exp", "U"), locals=(kir.Local("b_", kir.TPos.VECCALC),),
                                   tensors=(kir.TensorVar("x_", "Exp"), kir.TensorVar("y_", "U")), methods=(m,)))
    assert "template <typename v_Exp_, typename U>" in t and "LocalTensor<v_Exp_> x_;" in t
    assert "LocalTensor<U> y_;" in t and "void Exp()" in t


def test_a_name_spelled_like_the_printers_stand_in_is_kept_and_two_equal_parameters_are_refused():
    """The stand-in that finds a template parameter's clashes is made longer while the class holds its text (a spec
    name may be anything: a member named zzOpgenTparam0zz prints as itself, T as T); two template parameters of one
    name are still refused (no C++ compiler takes them)."""
    k = kir.KernelClass("K", "TD", tparams=("T",), tensors=(kir.TensorVar("zzOpgenTparam0zz", "T"),
                                                           kir.TensorVar("y_", "float")))
    t = kir.to_cpp(k)
    assert "template <typename T>" in t and "LocalTensor<T> zzOpgenTparam0zz;" in t
    with pytest.raises(kir.IRError, match="template parameter name T is also a template parameter"):
        kir.verify(kir.KernelClass("K", "TD", tparams=("T", "T")))


@pytest.mark.parametrize("name", ["bfloat16_t", "int8_t", "uint32_t"])
def test_a_dtype_variable_named_like_a_type_the_kernel_writes_is_refused_at_its_line(tmp_path, name):
    """A dtype variable spelled like a C++ type the Kernel IR writes by name (bfloat16_t, int8_t, ...) would be that
    type as the rows class's template parameter: refused where it is declared, naming the line (it failed only at
    generation, 'kernel IR: template parameter name ... would shadow it')."""
    from opgen.errors import SpecError
    from opgen.names import KERNEL_TYPE_NAMES

    assert set(kir.ELEM_BYTES) | set(kir.SCALAR_CTYPES) | {"void"} <= KERNEL_TYPE_NAMES
    p = tmp_path / "rms.py"
    p.write_text(SPEC.replace('spec.dtype_vars("G n")', f'spec.dtype_vars("{name} n")'))
    with pytest.raises(SpecError, match=rf"rms\.py:\d+: error: dtype variable '{name}' is a C\+\+ type the kernel "
                                        r"writes by name"):
        load_spec(str(p))
