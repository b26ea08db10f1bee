"""A column sum over the rows written under some presences only, in the one class serving every presence: the
derived AdaLayerNormGrad (examples/specs/derived/ada_layer_norm_grad.py) writes pd_gamma when weight is given and
pd_beta when bias is; each accumulates under its presences and only its store after the exchange sits in the
presence's If (opgen.kernel.rowpresence.output_guard, opgen.kernel.rowclass `_store`). Values against torch
autograd of AdaLayerNormV2's forward in float64."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from opgen.check import run_check
from opgen.kernel import kir
from opgen.registry import load_spec
from opgen.tiling.pipeline import kernel_build

SPEC = Path(__file__).resolve().parent.parent / "examples" / "specs" / "derived" / "ada_layer_norm_grad.py"


def _case(bd: int, s: int, h: int, weight: bool, bias: bool) -> tuple[dict, dict]:
    """(inputs, {output: torch autograd float64 gradient}) of a row-form scale / shift case."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(bd * 100 + h + 2 * weight + bias)
    f32 = lambda a: np.asarray(a, np.float32)  # noqa: E731
    x, dy = f32(rng.normal(size=(bd, s, h))), f32(rng.normal(size=(bd, s, h)))
    scale, shift = f32(rng.normal(size=(bd, h)) * 0.1), f32(rng.normal(size=(bd, h)))
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x64 - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
    inp = {"dy": dy, "x": x, "scale": scale, "shift": shift, "mean": f32(mean), "rstd": f32(rstd)}
    ts = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in
          {"x": x, "scale": scale, "shift": shift}.items()}
    extra = {}
    if weight:
        inp["weight"] = f32(rng.normal(size=h))
        extra["weight"] = torch.tensor(inp["weight"], dtype=torch.float64, requires_grad=True)
    if bias:
        inp["bias"] = f32(rng.normal(size=h))
        extra["bias"] = torch.tensor(inp["bias"], dtype=torch.float64, requires_grad=True)
    y = torch.nn.functional.layer_norm(ts["x"], (h,), extra.get("weight"), extra.get("bias"), 1e-5)
    out = y * (1 + ts["scale"].reshape(bd, 1, h)) + ts["shift"].reshape(bd, 1, h)
    out.backward(torch.tensor(dy, dtype=torch.float64))
    want = {"pd_x": ts["x"].grad, "pd_scale": ts["scale"].grad, "pd_shift": ts["shift"].grad}
    want.update({"pd_gamma": extra["weight"].grad} if weight else {})
    want.update({"pd_beta": extra["bias"].grad} if bias else {})
    return inp, {k: v.numpy() for k, v in want.items()}


@pytest.mark.parametrize("bd, s, h", [(2, 7, 200), (2, 2, 20000)])   # ROW_SPLIT; COL_SPLIT (a row over cores)
@pytest.mark.parametrize("weight, bias", [(True, True), (True, False), (False, True), (False, False)])
def test_derived_ada_layer_norm_grad_every_presence_against_autograd(bd, s, h, weight, bias):
    """fp32 on the Kernel-IR engine, the one class, each presence of weight and bias: every gradient within fp32
    rounding of torch's float64 (relative 1e-4 of its scale: sums over up to 14 rows and 20000 columns); an
    absent input's gradient is not written (its GM unbound: a store would fault)."""
    inp, want = _case(bd, s, h, weight, bias)
    r = run_check(str(SPEC), inputs=inp, dtypes={"T": "float32", "U": "float32"}, engine="kir", progress=False)
    assert not r.faults and r.passed, r.faults[:2]
    assert r.tiling_key % 10 == (2 if h > 10000 else 1)   # the strategy digit: COL_SPLIT 2, ROW_SPLIT 1
    assert ("pd_gamma" in r.arrays and r.arrays["pd_gamma"] is not None) == weight
    assert ("pd_beta" in r.arrays and r.arrays["pd_beta"] is not None) == bias
    for name, w in want.items():
        got = np.asarray(r.arrays[name], np.float64).reshape(w.shape)
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-4 * np.abs(w).max(), err_msg=name)


def test_derived_ada_layer_norm_grad_is_one_class_with_guarded_column_stores():
    """Its four presences of weight and bias lower to one program per shape form and one kernel class (four classes
    before, one per presence); every StoreRow to pd_gamma / pd_beta in the class's Kernel IR sits under the If of
    its input's presence (hasInput0_ weight, hasInput1_ bias)."""
    unit = kernel_build(load_spec(str(SPEC)))
    variants = [v for v in unit.lowered.extra.get("variants", ()) if v.kclass is not None]
    assert len(variants) == 1
    k = variants[0].kclass
    found = {"pd_gamma": 0, "pd_beta": 0}

    def visit(stmts, conds):
        for st in stmts:
            if isinstance(st, kir.Call) and st.method == "StoreRow":
                gm = st.args[0].tensor if isinstance(st.args[0], kir.GmView) else ""
                for name, member in (("pd_gamma", "hasInput0_"), ("pd_beta", "hasInput1_")):
                    if gm == f"gm_{name}":
                        assert any(member in [getattr(c, "name", None) for c in cs] for cs in conds), (name, conds)
                        found[name] += 1
            if isinstance(st, kir.If):
                visit(st.then, conds + [st.cond])
                visit(st.orelse, conds + [()])
            elif isinstance(st, (kir.For, kir.Scope)):
                visit(st.body, conds)

    for body in [k.init, k.process] + [m.body for m in k.methods]:
        visit(body, [])
    assert found["pd_gamma"] and found["pd_beta"], found
