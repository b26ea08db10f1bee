"""`x.repeat_interleave(repeats, axis, size)`: element i of the axis reads element i // repeats, the first `size`
kept (torch.repeat_interleave with a static count, sliced). Checked on the Tensor-IR interpreter against NumPy,
its adjoint against torch autograd in float64, and its type rule's refusals; WeightQuantBatchMatmulV2's last
partial group (tests/test_weight_quant_batch_matmul_v2.py) uses it on the cube."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from opgen.errors import OpgenError
from opgen.interp import interpret
from opgen.registry import load_spec

SPEC = '''
from opgen.dsl import A2, OpSpec, f32
spec = OpSpec("GroupScale", aclnn="aclnnGroupScale", socs=(A2,))
K, N = spec.dims("K N", max=4096)
spec.input("w", f32, [K, N])
spec.input("s", f32, [(K + {gm1}) // {g}, N])
spec.output("y", f32, [K, N])

@spec.body
def _(b, w, s):
    return {{"y": b.exp(w) * s.repeat_interleave({g}, {axis}, K)}}
'''


def _spec(tmp_path, g: int, axis: int = 0) -> str:
    p = tmp_path / f"group_scale_{g}_{axis % 2}.py"
    p.write_text(SPEC.format(g=g, gm1=g - 1, axis=axis))
    return str(p)


@pytest.mark.parametrize("k,g,axis", [(100, 32, 0), (96, 32, 0), (7, 8, -2), (5, 1, 0)])
def test_the_interpreter_repeats_each_row_and_keeps_the_first_size(tmp_path, k, g, axis):
    """K 100 in groups of 32 (a last group of 4 rows), 96 (whole groups), 7 in one group of 8 (axis -2), g 1 (the
    identity): y = exp(w) * s[k // g] in float64 NumPy."""
    rng = np.random.default_rng(k + g)
    w = rng.normal(size=(k, 5)).astype(np.float32)
    s = rng.normal(size=(-(-k // g), 5)).astype(np.float32)
    y = interpret(_spec(tmp_path, g, axis), {"w": w, "s": s}, mode="exact")["y"]
    want = np.exp(w.astype(np.float64)) * s.astype(np.float64)[np.arange(k) // g]
    np.testing.assert_allclose(np.asarray(y, np.float64), want, rtol=1e-12, atol=0)


@pytest.mark.parametrize("k,g", [(100, 32), (64, 32), (3, 4)])
@pytest.mark.parametrize("along", ["rows", "columns"])
def test_the_adjoint_sums_each_groups_rows_as_torch_autograd(tmp_path, k, g, along):
    """d/ds of sum(y * dy) for y = exp(w) * s.repeat_interleave(g, axis, size): element j of ds sums the elements of
    its group (the last one partial), along the rows (s [ceil(K / g), N], axis 0) or the columns (s [K, ceil(N / g)],
    axis -1), ds and dw against torch.repeat_interleave's autograd in float64."""
    fwd = _spec(tmp_path, g)
    shape = lambda n: (n, 3) if along == "rows" else (3, n)   # noqa: E731 - w's and s's shapes for n rows / columns
    if along == "columns":
        text = open(fwd).read()
        text = text.replace(f"spec.input(\"s\", f32, [(K + {g - 1}) // {g}, N])",
                            f"spec.input(\"s\", f32, [K, (N + {g - 1}) // {g}])")
        text = text.replace(f"s.repeat_interleave({g}, 0, K)", f"s.repeat_interleave({g}, -1, N)")
        assert f"[K, (N + {g - 1}) // {g}]" in text and f"repeat_interleave({g}, -1, N)" in text
        open(fwd, "w").write(text)
    (tmp_path / "group_scale_grad.py").write_text(
        "from opgen.dsl import derive_grad\n"
        f"spec = derive_grad({fwd!r}, 'GroupScaleGrad', aclnn='aclnnGroupScaleGrad', wrt=['w', 's'],\n"
        "                   grads={'y': 'dy'}, names={'w': 'dw', 's': 'ds'})\n")
    rng = np.random.default_rng(k)
    w = rng.normal(size=shape(k)).astype(np.float32)
    s = rng.normal(size=shape(-(-k // g))).astype(np.float32)
    dy = rng.normal(size=shape(k)).astype(np.float32)
    got = interpret(str(tmp_path / "group_scale_grad.py"), {"dy": dy, "w": w, "s": s}, mode="exact")
    tw, ts = (torch.tensor(a.astype(np.float64), requires_grad=True) for a in (w, s))
    dim = 0 if along == "rows" else 1
    rep = torch.repeat_interleave(ts, g, dim=dim)
    rep = rep[:k] if along == "rows" else rep[:, :k]
    (torch.exp(tw) * rep).backward(torch.tensor(dy.astype(np.float64)))
    np.testing.assert_allclose(np.asarray(got["ds"], np.float64), ts.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(got["dw"], np.float64), tw.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_a_scale_of_the_wrong_rows_is_refused_naming_the_input(tmp_path):
    """A scale of K // g rows where the spec says ceil(K / g): the input's shape check names it (the interpreter
    never reads past its rows)."""
    w = np.zeros((100, 5), np.float32)
    with pytest.raises(OpgenError, match=r"s: shape \[3, 5\]: dim 0 is 3, expected \(K \+ 31\) // 32 = 4"):
        interpret(_spec(tmp_path, 32), {"w": w, "s": np.zeros((3, 5), np.float32)}, mode="exact")


@pytest.mark.parametrize("call,why", [("s.repeat_interleave(0, 0, K)", "repeats must be an int >= 1"),
                                      ("s.repeat_interleave(2.5, 0, K)", "repeats must be an int >= 1"),
                                      ("s.repeat_interleave(2, 3, K)", "axis")])
def test_a_bad_repeat_is_a_spec_error_at_its_line(tmp_path, call, why):
    """repeats 0, a float repeat, an axis past the rank: refused when the body is traced, naming the rule."""
    p = tmp_path / "bad_repeat.py"
    p.write_text(SPEC.format(g=2, gm1=1, axis=0).replace("s.repeat_interleave(2, 0, K)", call))
    with pytest.raises(OpgenError, match=why):
        interpret(load_spec(str(p)), {"w": np.zeros((4, 3), np.float32), "s": np.zeros((2, 3), np.float32)})


def test_a_literal_size_its_input_cannot_give_is_a_spec_error(tmp_path):
    """[4, N] repeated 3 times gives 10 to 12 rows: a literal size 13 (past the input) or 9 (the last row unread)
    is refused when the body is traced, naming the rule."""
    for size in (13, 9):
        p = tmp_path / f"lit_{size}.py"
        p.write_text(SPEC.format(g=3, gm1=2, axis=0).replace('spec.input("s", f32, [(K + 2) // 3, N])',
                                                             'spec.input("s", f32, [4, N])')
                     .replace("s.repeat_interleave(3, 0, K)", f"s.repeat_interleave(3, 0, {size})"))
        with pytest.raises(OpgenError, match=r"4 elements repeated 3 times cannot give"):
            interpret(load_spec(str(p)), {"w": np.zeros((size, 2), np.float32), "s": np.zeros((4, 2), np.float32)})


def test_the_emitted_golden_reads_row_k_over_g(tmp_path):
    """The package's NumPy golden (tests/assets/golden.py, printed from the IR) at K 100 in groups of 32: y =
    exp(w) * s[k // 32] in float32 as written here (the golden computes in fp32, the interpreter's device mode), bit
    for bit."""
    from opgen.codegen.golden import GOLDEN_PATH, emit_golden

    ns: dict = {}
    exec(compile(emit_golden(load_spec(_spec(tmp_path, 32)))[GOLDEN_PATH], "golden.py", "exec"), ns)
    fn = next(v for k, v in ns.items() if k.endswith("_golden") and callable(v) and k != "__golden__")
    rng = np.random.default_rng(3)
    w = rng.normal(size=(100, 5)).astype(np.float32)
    s = rng.normal(size=(4, 5)).astype(np.float32)
    (y,) = fn(w, s)
    want = np.exp(w) * s[np.arange(100) // 32]
    assert y.dtype == np.float32 and np.array_equal(y, want)


def test_the_rows_family_refuses_a_repeat_naming_the_op(tmp_path):
    """exp(w) * s.repeat_interleave(32, 0, K) outside a matmul: no family lowers it, and the refusal names the op and
    the one form a kernel reads (the cube's computed operand) -- not another rule it happens to break."""
    from opgen.codegen import generate
    from opgen.kernel.family import NoKernel

    with pytest.raises(NoKernel, match=r"repeat_interleave \(one element read by a group of elements of an axis\)"):
        generate(load_spec(_spec(tmp_path, 32)))
