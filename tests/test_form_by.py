"""Shapes a static attribute picks (`form_by`, docs/design.md "Shapes an attribute picks"): the declaration's rules, the
interpreter against float64 NumPy (a GLU halving dim -1 or dim 0; ReduceMean keeping or dropping its axis), the
aclnn layer / InferShape / TilingFunc reading the picked form, and the rows family's refusal when the forms put the
rows on different axes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from opgen.errors import SpecError, ValidationError
from opgen.interp import interpret
from opgen.registry import load_spec

ROOT = Path(__file__).resolve().parent.parent
HEAD = "from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32\n\n"

GLU = HEAD + '''
spec = OpSpec("GluByDim", aclnn="aclnnGluByDim", socs=(A2, A3), round="rint")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=65536)
(T,) = spec.dtype_vars("T")
spec.attr("dim", int, -1, choices=(-1, 0), static=True, doc="the halved axis")
spec.input("x", T, {-1: [Bd, 2 * H], 0: [2 * H, Bd]}, form_by="dim")
spec.output("y", T, {-1: [Bd, H], 0: [H, Bd]}, form_by="dim")
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, x, dim):
    a = x.slice(dim, 0, H)
    g = x.slice(dim, H, 2 * H)
    return {"y": a / (1.0 + b.exp(-a)) * g}
'''


def _glu(tmp_path):
    path = tmp_path / "glu_by_dim.py"
    path.write_text(GLU)
    return load_spec(str(path))


def _swish_glu(a, g):
    return a / (1.0 + np.exp(-a)) * g


def test_the_attribute_picks_the_shape_the_interpreter_checks_and_computes(tmp_path):
    spec = _glu(tmp_path)
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((6, 4, 5)).astype(np.float32)      # dim 0: H = 3 over [4, 5]
    y0 = interpret(spec, {"x": x0}, {"dim": 0})["y"]
    want0 = _swish_glu(x0[:3].astype(np.float64), x0[3:].astype(np.float64))
    assert y0.shape == (3, 4, 5) and np.allclose(y0, want0, rtol=2e-6, atol=1e-7)
    x1 = rng.standard_normal((4, 5, 6)).astype(np.float32)      # dim -1: H = 3 over [4, 5]
    y1 = interpret(spec, {"x": x1}, {"dim": -1})["y"]
    want1 = _swish_glu(x1[..., :3].astype(np.float64), x1[..., 3:].astype(np.float64))
    assert y1.shape == (4, 5, 3) and np.allclose(y1, want1, rtol=2e-6, atol=1e-7)
    # [5, 6] fits the dim=-1 form only: with dim=0 its first axis (5) is not 2 * H
    with pytest.raises(ValidationError, match=r"x.*the shape for dim=0 is \[2 \* H, \*Bd\]"):
        interpret(spec, {"x": np.zeros((5, 6), np.float32)}, {"dim": 0})
    assert [k.forms for k in spec.keys()] == [(0,), (1,)]      # one specialisation per value, not per product


def test_keepdim_picks_the_output_shape_of_reduce_mean():
    spec = load_spec(str(ROOT / "examples" / "specs" / "reduce_mean.py"))
    x = np.random.default_rng(1).standard_normal((2, 3, 7, 5)).astype(np.float32)
    want = x.astype(np.float64).mean(-2)
    for keep, shape in ((False, (2, 3, 5)), (True, (2, 3, 1, 5))):
        got = interpret(spec, {"self": x}, {"keepDim": keep}, {"T": "float32"})["out"]
        assert got.shape == shape
        assert np.allclose(got.reshape(want.shape), want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("decl, rule", [
    ('spec.input("x", f32, {-1: [S]}, form_by="dim")', "form_by='dim' is not a static attribute declared above"),
    ('spec.attr("dim", int, 0, choices=(0, 1), static=True)\nspec.input("x", f32, {0: [S]}, form_by="dim")',
     r"the shapes by dim have keys \[0\], its choices are \[0, 1\]"),
    ('spec.input("x", f32, {0: [S]})', "a shape per attribute value needs form_by="),
    ('spec.attr("dim", int, 0, choices=(0,), static=True)\nspec.input("x", f32, [S], form_by="dim")',
     "the shape is a dict from each value of dim"),
    ('spec.attr("dim", int, 0, choices=(0,), static=True)\nspec.input("x", f32, [S])\n'
     'spec.output("y", f32, {0: [S]}, like="x", form_by="dim")', "give form_by= with shapes, or like=, not both"),
    ('spec.attr("layout", str, "BH", choices=("BH", "HB"), static=True)\nspec.input("x", f32, {"BH": [S]}, '
     'form_by="layout")', r"the shapes by layout have keys \['BH'\], its choices are \['BH', 'HB'\]"),
    ('spec.attr("axis", int, 0, choices=(0, 1), static=True)\nspec.input("x", f32, {0: [[S], [1]], 1: [S]}, '
     'form_by="axis")', r"the shape for axis=0 is a list of shape forms; with form_by each choice takes one shape"),
    ('spec.attr("axis", int, 0, choices=(0, 1), static=True)\nspec.input("x", f32, {0: [[S], 1], 1: [S]}, '
     'form_by="axis")', r"input x: shape entry \[S\] is a list, not a dim; a shape is one flat list of dims; "
     r"with form_by='axis' give each choice one shape"),
])
def test_bad_declarations_name_the_rule(tmp_path, decl, rule):
    path = tmp_path / "bad.py"
    path.write_text(HEAD + 'spec = OpSpec("Bad", aclnn="aclnnBad", socs=(A2, A3))\nS = spec.dim("S")\n' + decl + "\n")
    with pytest.raises(SpecError, match=rule):
        load_spec(str(path))


def test_host_code_reads_dims_from_the_picked_form(tmp_path):
    """The TilingFunc reads H from x's last axis for dim=-1 and from its first for dim=0 (selected by the
    attribute's choice index); the rows family lowers each value on its own row domain and the tiling's row count
    and row length follow the attrKey."""
    from opgen.ir.dims import Sym
    from opgen.tiling.pipeline import compile_unit
    from opgen.tiling.emit import dim_cpp

    spec = _glu(tmp_path)
    text = dim_cpp(spec, Sym("H"))
    assert text == ("(AttrIndex<int64_t>(context, 0, {-1, 0}) == 0 ? xShape.GetDim(xShape.GetDimNum() - 1) / 2 "
                    ": xShape.GetDim(0) / 2)")
    u = compile_unit(spec)
    layouts = {k.static: lay.text() for k, lay in u.lowered.extra["layouts"].items()}
    assert layouts == {(-1,): "layout rows [*Bd, H]: prod(Bd) rows of H",
                       (0,): "layout rows [H, *Bd]: H rows of prod(Bd)"}
    assert u.tiling.inputs["hidden"][0] == "by_attr_key" and u.tiling.inputs["rows"][0] == "by_attr_key"


def test_one_attrkey_on_two_row_domains_is_refused(tmp_path):
    """Shape forms the tensor picks (not an attribute) that put the rows on different axes cannot be told apart by
    the tiling key: refused, naming both specialisations and their domains."""
    from opgen.kernel.family import NoKernel
    from opgen.tiling.pipeline import compile_unit

    path = tmp_path / "two_forms.py"
    path.write_text(HEAD + """
spec = OpSpec("TwoForms", aclnn="aclnnTwoForms", socs=(A2, A3))
S, H = spec.dims("S H")
spec.input("x", f32, [[S, H], [H, 3, S]])
spec.output("y", f32, like="x")


@spec.body
def _(b, x):
    return {"y": x - x.max(-1)}
""")
    with pytest.raises(NoKernel, match=r"x \[H, 3, S\] has another anchor domain .* than x \[S, H\]"):
        compile_unit(load_spec(str(path)))


PICKS = HEAD + """
spec = OpSpec("Picks", aclnn="aclnnPicks", socs=(A2, A3), round="rint")
Bd = spec.variadic("Bd", max_rank=4)
H = spec.dim("H", max=4096)
A = spec.dim("A", max=4096)
(T,) = spec.dtype_vars("T")
spec.attr("act", int, 0, choices=(0, 1), static=True)
spec.attr("dim", int, -1, choices=(-1, 1), static=True)
spec.input("x", T, {-1: [Bd, 2 * H], 1: [A, 2 * H, Bd]}, form_by="dim")
spec.input("s", T, [A, H])
spec.output("y", T, {-1: [A, H], 1: [A, H, Bd]}, form_by="dim")
spec.dtypes((T,), [(f32,), (f16,)])
spec.check("act", lambda a, pr: "act 1 only with dim -1" if a["act"] == 1 and a["dim"] != -1 else None)


@spec.body
def _(b, x, s, act, dim):
    if dim == -1:
        return {"y": s * 2.0 if act == 0 else s}
    return {"y": x.slice(dim, 0, H) * x.slice(dim, H, 2 * H)}
"""


def test_dims_come_from_a_form_that_has_them_and_the_proof_skips_refused_combinations(tmp_path):
    """A is in x's dim=1 form only but in s always: the TilingFunc and InferShape read it from s. The UB proof
    evaluates the attribute combinations a specialisation has (act=1 with dim=1 is refused by a check) and the
    tiling's twin runs for both domains."""
    from opgen.codegen.infershape import emit_infershape
    from opgen.ir.dims import Sym
    from opgen.tiling.pipeline import compile_unit
    from opgen.tiling.emit import dim_cpp, evaluate
    from opgen.platforms import PLATFORMS
    from opgen.ir.dtypes import DType

    path = tmp_path / "picks.py"
    path.write_text(PICKS)
    spec = load_spec(str(path))
    assert dim_cpp(spec, Sym("A")) == "sShape.GetDim(0)"
    text = next(iter(emit_infershape(spec).values()))
    assert "const int64_t dimA = sShape->GetDim(0);" in text
    u = compile_unit(spec)   # raised KeyError when the proof tried act=1 with dim=1
    plat = next(iter(PLATFORMS.values()))
    for attrs, env, rows, hidden in (({"act": 0, "dim": -1}, {"Bd": (3,), "H": 5, "A": 4}, 4, 5),
                                     ({"act": 0, "dim": 1}, {"Bd": (3, 2), "H": 5, "A": 4}, 20, 6)):
        got = evaluate(spec, u.tiling.program, u.tiling.inputs, env, {"T": DType.f32}, plat, attrs)
        assert (got["rows"], got["hidden"]) == (rows, hidden), attrs


GXX = shutil.which("g++")


@pytest.mark.slow
@pytest.mark.skipif(GXX is None, reason="g++ not available")
def test_emitted_infershape_follows_keepdim(tmp_path):
    """ReduceMean's emitted InferShape, compiled against the emulation's registry and run: out is [2, 3, 5] for
    keepDim false and [2, 3, 1, 5] for keepDim true from self [2, 3, 7, 5]."""
    from opgen.codegen import write_ops

    write_ops([str(ROOT / "examples" / "specs" / "reduce_mean.py")], str(tmp_path / "gen"))
    src = tmp_path / "gen" / "reduce_mean" / "op_host" / "reduce_mean_infershape.cpp"
    main = tmp_path / "main.cpp"
    main.write_text('#include <cstdio>\n#include "register/op_impl_registry.h"\nint main()\n{\n'
                    '    for (int keep = 0; keep < 2; ++keep) {\n'
                    '        gert::Shape self({2, 3, 7, 5});\n        gert::Shape out;\n'
                    '        gert::InferShapeContext ctx;\n        ctx.inputShapes = {&self};\n'
                    '        ctx.outputShapes = {&out};\n        ctx.attrs.Set(0, -2);\n        ctx.attrs.Set(1, keep);\n'
                    '        auto& fn = gert::InferShapeRegistry().at("ReduceMean");\n'
                    '        if (fn(&ctx) != ge::GRAPH_SUCCESS) return 1;\n'
                    '        for (size_t i = 0; i < out.GetDimNum(); ++i) std::printf("%ld ", (long)out.GetDim(i));\n'
                    '        std::printf("\\n");\n    }\n}\n')
    inc = ROOT / "opgen" / "emu" / "include"
    exe = tmp_path / "infer"
    r = subprocess.run([GXX, "-std=c++17", "-O0", f"-I{inc}", str(src), str(main), "-o", str(exe)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[:3000]
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.split("\n")[:2] == ["2 3 5 ", "2 3 1 5 "], out.stdout


@pytest.mark.slow
@pytest.mark.skipif(GXX is None, reason="g++ not available")
def test_derived_swiglu_grad_kernel_on_every_dim(derived_gen):
    """SwiGluGrad derived from SwiGlu: one package, three row domains (dim -1: rows of H; dim 0 and 1: rows of
    prod(Bd), the two halves of dx stored at their row offsets); the emulated kernel against torch autograd, in
    ROW_SPLIT and COL_SPLIT."""
    import torch

    from opgen.check import run_check

    spec = str(ROOT / "examples" / "specs" / "derived" / "swiglu_grad.py")   # generated in derived_gen
    for dim, dims, strategy in ((0, {"H": 7, "Bd": (5, 3)}, 1), (1, {"A": 2, "H": 3, "Bd": (33,)}, 1),
                                (0, {"H": 2, "Bd": (20000,)}, 2), (-1, {"H": 9, "Bd": (4,)}, 1)):
        r = run_check(spec, dims=dims, attrs={"dim": dim}, dtypes={"T": "float32"}, gen_dir=derived_gen,
                      seed=dims["H"], progress=False)
        assert not r.faults and r.passed, (dim, dims, r.faults[:3], r.failed_outputs())
        assert r.tiling_key % 10 == strategy, (dim, r.tiling_key)
        x = torch.tensor(np.asarray(r.inputs["x"], dtype=np.float64), requires_grad=True)
        a, g = x.chunk(2, dim)
        (torch.nn.functional.silu(a) * g).backward(torch.tensor(np.asarray(r.inputs["dy"], dtype=np.float64)))
        want = x.grad.numpy()
        got = np.asarray(r.arrays["dx"], dtype=np.float64)
        assert got.shape == want.shape
        assert np.all(np.abs(got - want) <= 2.0**-20 * (np.abs(want) + np.abs(want).mean())), (dim, dims)
