"""Runtime guards (opgen.kernel.rowguard, docs/design.md "Runtime guards"): a select on `attr != c` / `attr == c` of a
runtime float attribute is lowered once per value of the condition and joined like the presences of optional
inputs; the kernel tests a member its Init sets from the attribute's bits, and the tiling prices the schedule
without the skipped term's column loads while the guard is off.

CrossEntropyLoss and CrossEntropyLossGrad write their label-smoothing terms under `label_smoothing != 0` (torch and
CANN compute them only then): with a weight and label_smoothing 0 the weight row is no longer read per row, so
[1024, 32000] bf16 runs ROW_CHUNK instead of COL_SPLIT; with label_smoothing > 0 the same kernel (one tiling key
digit apart: the strategy) still runs COL_SPLIT. Numerics against float64 NumPy written from torch's formulas, on
the emulation and the Kernel-IR interpreter: both label_smoothing values on the same kernel, weight present and
absent, odd C, rows over cores with tails, ignored rows, bf16 and fp32."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from opgen.check import run_check
from opgen.ir.dtypes import DType
from opgen.kernel.rowguard import GuardName, runtime_guards, specialise
from opgen.platforms import PLATFORMS
from opgen.registry import _load_file
from opgen.tiling.emit import program_inputs

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "specs"
CE, CEG = EX / "cross_entropy_loss.py", EX / "cross_entropy_loss_grad.py"
B1 = PLATFORMS["ascend910b1"]
NP_DT = {"bfloat16": ml_dtypes.bfloat16, "float32": np.float32}
NO_GXX = shutil.which("g++") is None


def _bits(v: float) -> int:
    return struct.unpack("<I", struct.pack("<f", v))[0]


def test_guard_name_holds_on_the_attribute_bits():
    """`ne 0` is false for both zeros and true for anything else (NaN included), `eq` its negation; the constant is
    the fp32 it rounds to; the words name the condition and its negation."""
    ne = GuardName("eps", "ne", 0.0)
    assert str(ne) == "eps != 0" and ne.words(False) == "eps == 0"
    assert not ne.holds(0) and not ne.holds(0x80000000)
    assert ne.holds(_bits(0.1)) and ne.holds(_bits(-1e-30)) and ne.holds(0x7FC00000)
    eq = GuardName("eps", "eq", 0.5)
    assert eq.holds(_bits(0.5)) and not eq.holds(_bits(0.25)) and not eq.holds(0)
    with pytest.raises(ValueError):
        GuardName("eps", "lt", 0.0)


def _graph(path, present):
    from opgen.passes.pipeline import optimize

    spec = _load_file(path)
    key = next(k for k in spec.keys() if tuple(k.present) == present)
    return optimize(spec.graph(key))


def test_the_cross_entropy_graph_has_one_guard_and_its_off_branch_drops_the_class_sum():
    """CrossEntropyLoss with a weight: one guard, label_smoothing != 0; specialised off, no reduction multiplies the
    weight row (the smoothing sum) and no select is left; on, the sum stays."""
    g = _graph(CE, (True,))
    ((cond, name),) = runtime_guards(g)
    assert isinstance(name, GuardName) and str(name) == "label_smoothing != 0"
    sums = lambda h: sum(1 for n in h.nodes if n.op == "reduce" and n.attr("kind") == "sum")   # noqa: E731
    off, on = specialise(g, {cond: False}), specialise(g, {cond: True})
    assert not any(n.op == "select" for n in off.nodes + on.nodes)
    assert sums(off) == sums(g) - 1 and sums(on) == sums(g)
    assert not any(n.op == "mul" and "weight" in n.inputs for n in off.nodes)


def test_the_joined_program_runs_the_weight_row_only_under_the_guard():
    """The kernel class serves both presences of weight and both values of the guard (its presence names: weight,
    then the guard); every load of the weight's column row runs only where label_smoothing != 0."""
    from opgen.tiling.pipeline import kernel_build

    (v,) = kernel_build(_load_file(CE)).lowered.extra["variants"]
    p = v.prog
    assert tuple(p.presence) == ("weight", "label_smoothing != 0") and isinstance(p.presence[1], GuardName)
    col_in = {t.name for t in p.gm if t.space == "col" and t.role == "in"}
    loads = [i for i in p.instrs if i.kind == "load" and i.gm in col_in]
    assert loads and all(i.when and all(w[1] for w in i.when) for i in loads), [i.when for i in loads]


def _tiling(path, n, c, dtype, weight, eps):
    from opgen.tiling.pipeline import kernel_build

    spec = _load_file(path)
    t = kernel_build(spec).tiling
    names = {a.name for a in spec.attrs}
    attrs = {"reduction": "none", "label_smoothing": eps} if "reduction" in names else {"labelSmoothing": eps}
    return t.program.evaluate(program_inputs(spec, t.program, t.inputs, {"N": n, "C": c}, {"T": dtype}, B1, attrs,
                                             present=(weight,)))


@pytest.mark.parametrize("path", [CE, CEG], ids=["loss", "grad"])
def test_label_smoothing_zero_takes_row_chunk_with_a_weight(path):
    """[1024, 32000] bf16 with a weight: at label_smoothing 0 (-0.0 alike) the weight's per-chunk loads are not priced
    (the guard is off), so ROW_CHUNK (4) with the column rows per chunk over every core; at 0.1 they are re-read per
    row beyond GM_REREAD_SHARE and COL_SPLIT (2) stays. Without a weight ROW_CHUNK either way."""
    for eps in (0.0, -0.0):
        off = _tiling(path, 1024, 32000, DType.bf16, True, eps)
        assert off["strategy"] == 4 and off["colChunkLoads"] == 1 and off["blockDim"] == B1.aiv, off["strategy"]
        assert off["colReloadBytes"] == 0 and off["workspaceBytes"] == 0
    on = _tiling(path, 1024, 32000, DType.bf16, True, 0.1)
    assert on["strategy"] == 2 and on["colReloadBytes"] * 10 > 1024 * 32000 * 4, on["strategy"]
    for eps in (0.0, 0.1):
        assert _tiling(path, 1024, 32000, DType.bf16, False, eps)["strategy"] == 4


def _inputs(n, c, dtype, seed, ignore=-100):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, c)) * 3.0).astype(NP_DT[dtype])
    t = rng.integers(0, c, n).astype(np.int64)
    t[::5] = ignore   # ignored rows
    t[1] = c - 1      # the last class (the last chunk)
    return x, t


def _loss64(x, t, w, eps, ignore=-100):
    """torch's cross_entropy (reduction none, class-index targets) in float64: (1 - eps) * nll + eps / C * sum_c
    -w_c log p_c, the smoothing term only when eps != 0; 0 on ignored rows. (loss, log_prob)."""
    x = np.asarray(x, np.float64)
    n, c = x.shape
    m = x.max(-1, keepdims=True)
    lp = x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))
    w = np.ones(c) if w is None else np.asarray(w, np.float64)
    keep = t != ignore
    tt = np.where(keep, t, 0)
    loss = -(1.0 - eps) * lp[np.arange(n), tt] * w[tt]
    if eps != 0:
        loss = loss - eps / c * (lp * w).sum(-1)
    return loss * keep, lp


def _grad64(g, lp, t, w, eps, ignore=-100):
    """The gradient of _loss64 with respect to the logits, from the saved log_prob, in float64: p * s - onehot(t) *
    s + g * eps / C * (p * sum_c w_c - w), s = (1 - eps) * g * w[t]; 0 on ignored rows."""
    lp = np.asarray(lp, np.float64)
    n, c = lp.shape
    w = np.ones(c) if w is None else np.asarray(w, np.float64)
    keep = t != ignore
    tt = np.where(keep, t, 0)
    g = np.asarray(g, np.float64) * keep
    p = np.exp(lp)
    s = (1.0 - eps) * g * w[tt]
    dx = p * s[:, None]
    dx[np.arange(n), tt] -= s
    if eps != 0:
        dx += (g * eps / c)[:, None] * (p * w.sum() - w[None, :])
    return dx


def _close(got, want, dtype):
    got = np.asarray(got, np.float64)
    rel = {"bfloat16": 2.0**-8, "float32": 2.0**-20}[dtype]
    err = np.abs(got - want)
    assert np.all(err <= 4 * rel * np.abs(want) + 2.0**-18 * np.abs(want).max() + 1e-30), float(err.max())


CASES = [   # (n, c, dtype, engine): the strategy each label_smoothing takes with a weight
    (37, 1001, "bfloat16", "kir"),   # ROW_SPLIT for both: odd C, every 5th row ignored
    (7, 12001, "float32", "kir"),    # 0: ROW_CHUNK on 7 cores; 0.1: COL_SPLIT
    (130, 12001, "float32", "emu"),  # 0: ROW_CHUNK, 130 rows on 48 cores (34 take a third); 0.1: COL_SPLIT
    (100, 20001, "bfloat16", "emu"),
    (50, 20001, "float32", "emu"),   # COL_SPLIT for both values (few rows): the skipped sum's exchange slot unwritten
    (9, 15001, "bfloat16", "kir"),   # 0: the loss ROW_CHUNK, the gradient COL_SPLIT
]


@pytest.mark.skipif(NO_GXX, reason="g++ not available")
@pytest.mark.parametrize("n, c, dtype, engine", CASES)
@pytest.mark.parametrize("weight", [True, False], ids=["weight", "bare"])
def test_cross_entropy_both_label_smoothings_against_float64(n, c, dtype, engine, weight, examples_gen):
    """CrossEntropyLoss at label_smoothing 0 and 0.2 on one generated kernel: loss and log_prob against float64,
    ignored rows 0; with a weight at 0 the emulation reads the weight at the gathered elements only (no [C] row)."""
    x, t = _inputs(n, c, dtype, seed=c + n)
    w = np.random.default_rng(c).uniform(0.25, 2.0, c).astype(np.float32) if weight else None
    for eps in (0.0, 0.2):
        inputs = {"input": x, "target": t} | ({"weight": w} if weight else {})
        r = run_check(str(CE), inputs=inputs, attrs={"reduction": "none", "label_smoothing": eps},
                      dtypes={"T": dtype}, gen_dir=examples_gen if engine == "emu" else None, progress=False,
                      engine=engine)
        assert not r.faults and r.passed, (eps, r.faults[:3])
        loss, lp = _loss64(x, t, w, eps)
        _close(r.arrays["log_prob"], lp, dtype)
        _close(r.arrays["loss"], loss, dtype)
        assert np.all(np.asarray(r.arrays["loss"])[t == -100] == 0)
        if engine == "emu" and weight and eps == 0:   # whatever the strategy, the weight's [C] row is not loaded:
            # ROW_CHUNK reads one element a row; COL_SPLIT (its cores' gathers) well under the row's bytes, which
            # its slices would sum to were the smoothing term's weight row read
            bound = n * 64 if r.tiling_key % 10 == 4 else r.gm["weight"].bytes // 4
            assert r.gm["weight"].read < bound, (r.tiling_key, r.gm["weight"].read)


@pytest.mark.skipif(NO_GXX, reason="g++ not available")
@pytest.mark.parametrize("n, c, dtype, engine", CASES)
def test_cross_entropy_grad_both_label_smoothings_against_float64(n, c, dtype, engine, examples_gen):
    """CrossEntropyLossGrad with a weight at labelSmoothing 0 and 0.2 on one generated kernel against float64."""
    rng = np.random.default_rng(n * c)
    x, t = _inputs(n, c, dtype, seed=n + c)
    _loss, lp64 = _loss64(x, t, None, 0.0)
    lp = lp64.astype(NP_DT[dtype])
    g = rng.uniform(0.5, 2.0, n).astype(NP_DT[dtype])
    w = rng.uniform(0.25, 2.0, c).astype(np.float32)
    for eps in (0.0, 0.2):
        r = run_check(str(CEG), inputs={"gradLoss": g, "logProb": lp, "target": t, "weight": w},
                      attrs={"labelSmoothing": eps}, dtypes={"T": dtype},
                      gen_dir=examples_gen if engine == "emu" else None, progress=False, engine=engine)
        assert not r.faults and r.passed, (eps, r.faults[:3])
        _close(r.arrays["xGrad"], _grad64(g, lp, t, w, eps), dtype)


def test_the_class_assigns_its_guard_member_in_init():
    """The joined CrossEntropyLoss class: guard1_ is a presence member from a kir.TilingCond over the attribute's
    bits field, assigned by Init (the C++ prints it there); a class whose Init does not assign it is refused."""
    import dataclasses

    from opgen.kernel import kir
    from opgen.tiling.pipeline import kernel_build

    (v,) = kernel_build(_load_file(CE)).lowered.extra["variants"]
    k = v.kclass
    ((m, cond),) = [(m, a) for m, a in k.presence if isinstance(a, kir.TilingCond)]
    assert m == "guard1_" and cond.text == "label_smoothing != 0" and "label_smoothingBits" in str(cond.expr)
    assert any(isinstance(s, kir.Assign) and s.name == m for s in k.init)
    kir.verify(k)
    bad = dataclasses.replace(k, init=tuple(s for s in k.init if not (isinstance(s, kir.Assign) and s.name == m)))
    with pytest.raises(kir.IRError, match="runtime guard"):
        kir.verify(bad)


DERIVED = EX / "derived" / "cross_entropy_loss_grad.py"


@pytest.mark.parametrize("n, c, dtype", [(37, 1001, "bfloat16"), (9, 15001, "bfloat16")])
@pytest.mark.parametrize("weight", [True, False], ids=["weight", "bare"])
def test_the_derived_gradient_against_float64(n, c, dtype, weight):
    """The derived CrossEntropyLossGrad (autodiff through the forward's guarded select: its class joins both guard
    values, the smoothing branch's adjoint a masked zero under the off value) on the Kernel-IR interpreter at
    label_smoothing 0 and 0.2 (one kernel) against the float64 gradient of torch's formula (_grad64, from the saved
    log_prob)."""
    rng = np.random.default_rng(n + c)
    x, t = _inputs(n, c, dtype, seed=n * c)
    _loss, lp64 = _loss64(x, t, None, 0.0)
    lp = lp64.astype(NP_DT[dtype])
    g = rng.uniform(0.5, 2.0, n).astype(NP_DT[dtype])
    w = rng.uniform(0.25, 2.0, c).astype(np.float32) if weight else None
    for eps in (0.0, 0.2):
        inputs = {"gradLoss": g, "log_prob": lp, "target": t} | ({"weight": w} if weight else {})
        r = run_check(str(DERIVED), inputs=inputs, attrs={"label_smoothing": eps}, dtypes={"T": dtype},
                      progress=False, engine="kir")
        assert not r.faults and r.passed, (eps, r.faults[:3])
        _close(r.arrays["xGrad"], _grad64(g, lp, t, w, eps), dtype)
