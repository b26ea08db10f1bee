"""Derived backward kernels through the whole compiler: the derived RmsNormGrad (examples/specs/derived/) generated,
its kernel emulated by `opgen check`, its outputs compared with torch autograd of RmsNorm in float64 on the inputs
the kernel got, and its GM traffic against the minimum (at most 1.10x, the target for derived kernels). One build: the hand-written
kernel's traffic on the same cases was measured equal (README "Backward operators derived from the forward")."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from opgen.check import run_check

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")]

EX = Path(__file__).resolve().parent.parent / "examples" / "specs"


def test_derived_rms_norm_grad_kernel(tmp_path):
    torch = pytest.importorskip("torch")
    from opgen.codegen import write_ops

    derived = EX / "derived" / "rms_norm_grad.py"
    write_ops([str(derived)], tmp_path / "derived")
    dims = {"Bd": (1500,), "H": 64}   # rows enough that the per-core partial column sums are a small share
    r = run_check(str(derived), dims=dims, gen_dir=tmp_path / "derived", seed=3, progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    x = torch.tensor(np.asarray(r.inputs["x"], dtype=np.float64), requires_grad=True)
    g = torch.tensor(np.asarray(r.inputs["gamma"], dtype=np.float64), requires_grad=True)
    dy = torch.tensor(np.asarray(r.inputs["dy"], dtype=np.float64))
    h = x.shape[-1]
    # torch recomputes rstd from x; the kernel reads the fp32 rstd it was given: they differ by fp32 rounding (2^-24
    # relative), well inside the bound below
    (x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * g).backward(dy)
    for name, want in (("dx", x.grad.numpy()), ("dgamma", g.grad.numpy())):
        got = np.asarray(r.arrays[name], dtype=np.float64)
        terms = h if name == "dx" else 1500
        bound = (2.0**-24 * 8 * terms) * (np.abs(want) + np.abs(want).mean())
        assert np.all(np.abs(got - want) <= bound), (name, float(np.abs(got - want).max()))
    assert r.gm_bytes <= 1.10 * r.gm_bytes_min, (r.gm_bytes, r.gm_bytes_min)


@pytest.fixture(scope="module")
def softmax_grad_tree(tmp_path_factory):
    """(spec path, generated tree) of the derived SoftmaxGrad, generated once for the module's cases."""
    from opgen.codegen import write_ops

    derived = EX / "derived" / "softmax_grad.py"
    out = tmp_path_factory.mktemp("derived")
    write_ops([str(derived)], out)
    return derived, out


@pytest.mark.parametrize("dims, strategy", [
    ({"Bd": (5, 3), "H": 77}, 1),
    # two reductions in one exchange level: their workspace slots start on 32-byte blocks, else a total stored by
    # TotalOwnedRows and the next slot's partials share a block (an MTE3 -> MTE2 race for the emulation)
    ({"Bd": (2,), "H": 20000}, 2),
])
def test_derived_softmax_grad_kernel(dims, strategy, softmax_grad_tree):
    """The derived SoftmaxGrad (the max's adjoint is a compare and select: the row's maxima share it) against torch
    autograd of softmax in float64: rows per core pass (ROW_SPLIT) and rows split over the cores (COL_SPLIT, four
    levels of row reductions exchanged through workspace). Both cases check one generated package (one build)."""
    torch = pytest.importorskip("torch")
    derived, out = softmax_grad_tree
    r = run_check(str(derived), dims=dims, dtypes={"T": "float32"}, gen_dir=out, seed=5, progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items()
                                                      if not c.passed})
    assert r.tiling_key % 10 == strategy, r.tiling_key
    x = torch.tensor(np.asarray(r.inputs["x"], dtype=np.float64), requires_grad=True)
    dy = torch.tensor(np.asarray(r.inputs["dy"], dtype=np.float64))
    torch.softmax(x, -1).backward(dy)
    want = x.grad.numpy()
    got = np.asarray(r.arrays["dx"], dtype=np.float64)
    y = torch.softmax(x, -1).detach().numpy()
    scale = y * (np.abs(np.asarray(r.inputs["dy"], np.float64)) + np.abs(want).mean())   # dx = y (dy - <dy, y>)
    assert np.all(np.abs(got - want) <= 2.0**-24 * 16 * dims["H"] * (scale + scale.mean())), \
        float(np.abs(got - want).max())
