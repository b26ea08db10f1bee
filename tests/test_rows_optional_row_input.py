"""An optional input read per row in the one class serving every presence (BinaryCrossEntropy's weight,
examples/specs/binary_cross_entropy.py): its queue runs under every presence, only its copy from GM sits under
`if (hasInput0_)` (opgen.kernel.rowpresence.input_guard); the finishing division of the mean joins too
(RowProgram.acc_post). Values against torch's binary_cross_entropy in float64."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from opgen.check import run_check

EX = Path(__file__).resolve().parent.parent / "examples" / "specs" / "binary_cross_entropy.py"


def _inputs(rows: int, h: int, weight: bool) -> dict:
    rng = np.random.default_rng(rows + h)
    inp = {"x": rng.uniform(0.01, 0.99, (rows, h)).astype(np.float32),
           "y": rng.uniform(0.0, 1.0, (rows, h)).astype(np.float32)}
    if weight:
        inp["weight"] = rng.uniform(0.0, 2.0, (rows, h)).astype(np.float32)
    return inp


@pytest.mark.parametrize("rows, h, red, weight", [
    (37, 1000, "none", True), (37, 1000, "none", False),
    (29, 777, "mean", True), (29, 777, "mean", False),
    (3, 16384, "sum", True), (3, 16384, "sum", False),      # COL_SPLIT: the weight's column chunks guarded
])
def test_binary_cross_entropy_with_and_without_weight_against_torch(rows, h, red, weight):
    """fp32 on the Kernel-IR engine: the loss (elementwise, mean or sum) with weight given and absent, one class per
    reduction, within fp32 rounding of torch's float64 binary_cross_entropy."""
    torch = pytest.importorskip("torch")
    inp = _inputs(rows, h, weight)
    r = run_check(str(EX), inputs=inp, attrs={"reduction": red}, dtypes={"T": "float32"}, engine="kir",
                  progress=False)
    assert not r.faults and r.passed, r.faults[:2]
    w = torch.tensor(inp["weight"], dtype=torch.float64) if weight else None
    ref = torch.nn.functional.binary_cross_entropy(torch.tensor(inp["x"], dtype=torch.float64),
                                                   torch.tensor(inp["y"], dtype=torch.float64), weight=w,
                                                   reduction=red).numpy()
    got = np.asarray(r.arrays["output"], np.float64).reshape(ref.shape)
    np.testing.assert_allclose(got, ref, rtol=2e-5 if red == "none" else 1e-4, atol=1e-6)


def test_one_class_per_reduction_and_the_weight_copied_only_when_given(examples_gen):
    """The emitted header: three classes (none, mean, sum; six, one per presence, before), each setting hasInput0_
    from weight; every DataCopyPad from gm_weight sits inside `if (hasInput0_)` (the nearest If above it)."""
    h = (examples_gen / "binary_cross_entropy" / "op_kernel" / "binary_cross_entropy.h").read_text()
    assert len(re.findall(r"^class BinaryCrossEntropyKernel\d+ \{", h, re.M)) == 3
    assert h.count("this->hasInput0_ = weight != nullptr;") == 3
    lines = h.split("\n")
    copies = [k for k, ln in enumerate(lines) if "gm_weight[" in ln]
    assert copies
    for k in copies:
        above = [ln for ln in lines[max(0, k - 8):k] if re.search(r"\bif \(", ln)]
        assert above and "if (hasInput0_) {" in above[-1], lines[k - 3:k + 1]


def test_the_weight_copied_without_its_guard_faults_when_absent(monkeypatch, tmp_path):
    """Mutation: the input's copy built without its presence guard (opgen.kernel.rowsched.guard made the identity):
    with weight absent the Kernel-IR interpreter faults on the copy from its unbound GM; with it given the kernel
    passes. The spec is a copy at a path of its own (its kernel build is memoised per loaded spec)."""
    import opgen.kernel.rowsched as rowsched

    monkeypatch.setattr(rowsched, "guard", lambda t, stmts: tuple(stmts))
    spec = tmp_path / "binary_cross_entropy.py"
    shutil.copy(EX, spec)
    r = run_check(str(spec), inputs=_inputs(19, 100, False), attrs={"reduction": "none"}, dtypes={"T": "float32"},
                  engine="kir", progress=False)
    assert not r.passed and any("weight" in f or "no registered buffer" in f for f in r.faults), r.faults[:2]
    r = run_check(str(spec), inputs=_inputs(19, 100, True), attrs={"reduction": "none"}, dtypes={"T": "float32"},
                  engine="kir", progress=False)
    assert r.passed and not r.faults, r.faults[:2]
