"""New operators written from the README (examples/specs/), each through the whole compiler: interpreted, generated
and its emitted kernel emulated by `opgen check`, against float64 NumPy math or torch autograd of the forward.

Every spec is written with the public DSL only. One case list per operator covers its kind in the rows family
(last-axis reductions, leading-axis sums, broadcasts, row-axis slices, leading-axis permutes and
concats as GM addressing, static attributes): odd sizes, H = 1, rows past UB (the row split over cores: COL_SPLIT, column chunks when nothing
is reduced per row, partial maxima / sums exchanged when something is; COL_STREAM, a core's slice longer than UB
walked in chunks re-read per row-reduction level), tails over cores (row counts that do not
divide the 48 cores), several dtype rows. The kernel's outputs are compared with the oracle evaluated on the
inputs the kernel got (in their declared dtypes, widened to float64), with a bound by output dtype: a few units
of the dtype's rounding (2^-24 fp32, 2^-11 fp16, 2^-8 bf16) relative to the larger of the value and the mean
magnitude of the output (sums and differences cancel), plus fp32 accumulation over the terms one output element
sums (its own reduction length: H for a row statistic, the rows for a column sum; TERMS). A case also
passes opgen's own check (CANN's precision rule against the interpreter) with zero emulation faults.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from opgen.check import run_check

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")]

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "specs"
UNIT = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}


def _f(a):
    return np.asarray(a, dtype=np.float64)


def _gelu_tanh(a):
    return 0.5 * a * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (a + 0.044715 * a**3)))


def _torch_grad(fn, inputs: dict, wrt: list, dy, extra=None):
    """Gradients of sum(fn(**inputs) * dy) w.r.t. `wrt` by torch autograd in float64."""
    import torch

    ts = {k: torch.tensor(_f(v), dtype=torch.float64, requires_grad=k in wrt) for k, v in inputs.items()}
    out = fn(**ts, **(extra or {}))
    out.backward(torch.tensor(_f(dy), dtype=torch.float64))
    return {k: ts[k].grad.numpy() for k in wrt}


# ------------------------------------------------------------------------------------------------ oracles
def rms_norm(i, a):
    x, g = _f(i["x"]), _f(i["gamma"])
    r = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + a.get("epsilon", 1e-6))
    return {"y": x * r * g, "rstd": r}


def rms_norm_grad(i, a):
    """Closed form with the saved rstd (checked against torch autograd in test_backward_closed_forms...)."""
    dy, x, r, g = _f(i["dy"]), _f(i["x"]), _f(i["rstd"]), _f(i["gamma"])
    dx = r * (dy * g) - r**3 * x * (dy * g * x).mean(-1, keepdims=True)
    term = np.abs(r * dy * g)   # dx is a difference of terms of this size
    return {"dx": (dx, term), "dgamma": (dy * x * r).reshape(-1, x.shape[-1]).sum(0)}


def add_rms_norm(i, a):
    x = _f(i["x1"]) + _f(i["x2"])
    r = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + a.get("epsilon", 1e-6))
    return {"y": x * r * _f(i["gamma"]), "rstd": r, "x": x}


def layer_norm_grad(i, a):
    """Closed form with the saved mean and rstd (checked against torch autograd in test_backward_closed_forms...)."""
    dy, x, m, r, g = _f(i["dy"]), _f(i["x"]), _f(i["mean"]), _f(i["rstd"]), _f(i["gamma"])
    h = x.shape[-1]
    xhat = (x - m) * r
    gy = dy * g
    dx = r / h * (h * gy - gy.sum(-1, keepdims=True) - xhat * (gy * xhat).sum(-1, keepdims=True))
    term = np.abs(r * gy)
    rows = (-1, h)
    return {"pd_x": (dx, term), "pd_gamma": ((dy * xhat).reshape(rows).sum(0), (np.abs(dy * xhat)).reshape(rows).sum(0)),
            "pd_beta": (dy.reshape(rows).sum(0), np.abs(dy).reshape(rows).sum(0))}


def softmax(i, a):
    x = _f(i["x"])
    e = np.exp(x - x.max(-1, keepdims=True))
    return {"y": e / e.sum(-1, keepdims=True)}


def swiglu(i, a):
    x = np.moveaxis(_f(i["x"]), a.get("dim", -1), -1)   # the halved axis last
    h = x.shape[-1] // 2
    p, q = x[..., :h], x[..., h:]
    return {"y": np.moveaxis(p / (1.0 + np.exp(-p)) * q, -1, a.get("dim", -1))}


def tanh(i, a):
    """float64 tanh; the kernel's AscendC formula is about 1e-7 off in absolute terms (the terms bound below)."""
    return {"out": (np.tanh(_f(i["self"])), np.ones_like(_f(i["self"])))}


def gelu(i, a):
    return {"out": _gelu_tanh(_f(i["self"]))}


def _gelu_erf(a):
    """Exact GELU, 0.5 a (1 + erf(a / sqrt 2)), with math.erf in float64."""
    return 0.5 * a * (1.0 + np.vectorize(math.erf, otypes=[np.float64])(a / math.sqrt(2.0)))


def gelu_v2(i, a):
    """Exact (approximate = 0) or tanh GELU. Exact: for x < 0 the value is a difference of terms of size |x| / 2, so
    AscendC's Erf (4.3e-7 from erf, docs/reference/ascendc.md §1.9) is bounded against |x|."""
    x = _f(i["x"])
    if a.get("approximate", 0) == 0:
        return {"y": (_gelu_erf(x), np.abs(x))}
    return {"y": _gelu_tanh(x)}


def geglu(i, a):
    x = _f(i["x"])
    h = x.shape[-1] // 2
    left, right = x[..., :h], x[..., h:]
    act, gate = (left, right) if a.get("activateLeft") in (True, "true") else (right, left)
    if a.get("approximate", 1) == 0:
        g = _gelu_erf(act)
        return {"out": (g * gate, np.abs(act * gate)), "outGelu": (g, np.abs(act))}
    return {"out": _gelu_tanh(act) * gate, "outGelu": _gelu_tanh(act)}


def modulate(i, a):
    x = _f(i["x"])
    b, _s, h = x.shape
    return {"out": x * (1.0 + _f(i["scale"]).reshape(b, 1, h)) + _f(i["shift"]).reshape(b, 1, h)}


def modulate_grad(i, a):
    dy, x, sc = _f(i["dy"]), _f(i["x"]), _f(i["scale"])
    return {"dx": dy * (1.0 + sc), "dscale": (dy * x).sum(1, keepdims=True), "dshift": dy.sum(1, keepdims=True)}


def bias_add_grad(i, a):
    dy = _f(i["dy"])
    return {"db": dy.reshape(-1, dy.shape[-1]).sum(0)}


def reduce_mean(i, a):
    return {"out": _f(i["self"]).mean(-2, keepdims=bool(a.get("keepDim", False)))}


def reduce_sum(i, a):
    from opgen.dsl.validate import parse_int_list

    return {"out": _f(i["self"]).sum(parse_int_list(a.get("dim", (-1,))))}


def reduce_max(i, a):
    return {"out": _f(i["self"]).max(-2)}


def reduce_min(i, a):
    return {"out": _f(i["self"]).min(-2)}


def mse_loss(i, a):
    sq = (_f(i["self"]) - _f(i["target"])) ** 2
    return {"out": np.asarray(sq.mean() if int(a.get("reduction", 1)) == 1 else sq.sum())}


def binary_cross_entropy(i, a):
    """torch.nn.functional.binary_cross_entropy in float64 (each log clamped at -100), weighted when a weight is
    given, reduced by the reduction string."""
    import torch

    w = i.get("weight")
    out = torch.nn.functional.binary_cross_entropy(
        torch.from_numpy(_f(i["x"])), torch.from_numpy(_f(i["y"])),
        None if w is None else torch.from_numpy(_f(w)), reduction=str(a.get("reduction", "mean")))
    return {"output": out.numpy()}


def kl_div(i, a):
    """torch.nn.functional.kl_div's pointwise terms (log_target: exp(t) * (t - x), else xlogy(t, t) - t * x), summed
    in float64 and divided by the element count (mean), 1 (sum) or dim 0 (batchmean); the bound's scale is the sum
    of the terms' magnitudes (their signs differ: the total cancels)."""
    x, t = _f(i["self"]), _f(i["target"])
    with np.errstate(all="ignore"):
        if str(a.get("logTarget", False)).lower() in ("true", "1"):
            pw = np.exp(t) * (t - x)
        else:
            pw = np.where(t == 0, 0.0, t * np.log(t)) - t * x
    div = {1: pw.size, 2: 1, 3: x.shape[0]}[int(a.get("reduction", 1))]
    return {"out": (np.asarray(pw.sum() / div), np.asarray(np.abs(pw).sum() / div))}


def batch_norm(i, a):
    """torch.nn.functional.batch_norm's training-mode formula (biased variance around the mean), float64. The
    kernel's variance is mean(x * x) - mean ** 2 (the spec's, as CANN's), which cancels: an fp32 error of a few
    units of mean(x * x) moves invstd by r ** 3 / 2 times it, so the bounds' scale carries that conditioning."""
    x, w, bb = _f(i["input"]), _f(i["weight"]), _f(i["bias"])
    m = x.mean(0)
    r = 1.0 / np.sqrt(((x - m) ** 2).mean(0) + float(a.get("eps", 1e-5)))
    dr = 2.0 * r**3 * (x * x).mean(0)   # invstd's sensitivity to the variance's rounding, with the bound's unit
    scale = (np.abs(x) + np.abs(m)) * (r + dr) * np.abs(w) + np.abs(bb)   # the terms the output is a difference of
    return {"output": ((x - m) * r * w + bb, scale), "saveMean": m, "saveInvstd": (r, r + dr)}


def batch_norm_v3(i, a):
    """torch.nn.functional.batch_norm's training-mode formula on [N, C, L] (torch BatchNorm1d: per channel C, over N
    and L; biased variance around the mean), float64, with the conditioning of the kernel's mean(x * x) - mean ** 2
    in the bounds' scale as in batch_norm."""
    x, w, bb = _f(i["input"]), _f(i["weight"])[:, None], _f(i["bias"])[:, None]
    m = x.mean((0, 2), keepdims=True)
    r = 1.0 / np.sqrt(((x - m) ** 2).mean((0, 2), keepdims=True) + float(a.get("eps", 1e-5)))
    dr = 2.0 * r**3 * (x * x).mean((0, 2), keepdims=True)
    scale = (np.abs(x) + np.abs(m)) * (r + dr) * np.abs(w) + np.abs(bb)
    return {"output": ((x - m) * r * w + bb, scale), "saveMean": m.reshape(-1),
            "saveInvstd": (r.reshape(-1), (r + dr).reshape(-1))}


def instance_norm(i, a):
    """torch.nn.functional.instance_norm's formula (biased variance around the mean over H, W per (n, c)) with
    per-channel gamma / beta, float64; mean and variance as aclnnInstanceNorm returns them ([N, C, 1, 1])."""
    x, g, bb = _f(i["x"]), _f(i["gamma"])[:, None, None], _f(i["beta"])[:, None, None]
    m = x.mean((2, 3), keepdims=True)
    v = ((x - m) ** 2).mean((2, 3), keepdims=True)
    r = 1.0 / np.sqrt(v + float(a.get("eps", 1e-5)))
    scale = (np.abs(x) + np.abs(m)) * r * np.abs(g) + np.abs(bb)   # the terms y is a difference of
    return {"y": ((x - m) * r * g + bb, scale), "mean": (m, np.abs(x).mean((2, 3), keepdims=True)), "variance": v}


def group_norm(i, a):
    """Group normalisation in float64 written out: self [N, C, L] as [N, G, C / G * L], the biased variance around
    the mean per (n, g), then gamma[c] and beta[c] per channel; meanOut and rstdOut [N, G]. torch's
    functional.group_norm (an independent implementation) must agree to 1e-10."""
    import torch

    x, g, bb = _f(i["self"]), _f(i["gamma"]), _f(i["beta"])
    n, c, ln = x.shape
    grp = int(a["group"])
    eps = float(a.get("eps", 1e-5))
    xg = x.reshape(n, grp, c // grp * ln)
    m = xg.mean(-1, keepdims=True)
    r = 1.0 / np.sqrt(((xg - m) ** 2).mean(-1, keepdims=True) + eps)
    y = ((xg - m) * r).reshape(n, c, ln) * g[:, None] + bb[:, None]
    ref = torch.nn.functional.group_norm(_t(x), grp, _t(g), _t(bb), eps=eps).numpy()
    assert np.allclose(y, ref, rtol=1e-10, atol=1e-10)
    mag = np.broadcast_to(np.abs(xg) + np.abs(m), xg.shape).reshape(n, c, ln)
    scale = mag * np.repeat(r.reshape(n, grp), c // grp, axis=1)[:, :, None] * np.abs(g)[:, None] + np.abs(bb)[:, None]
    return {"out": (y, scale), "meanOut": (m.reshape(n, grp), np.abs(xg).mean(-1)), "rstdOut": r.reshape(n, grp)}


def layer_norm_v4(i, a):
    """torch.nn.functional.layer_norm over the last two axes (normalized_shape [S, H]), float64, with its mean and
    rstd ([*Bd, 1, 1]); an absent gamma / beta is torch's None weight / bias."""
    import torch

    x = _f(i["x"])
    g, bb = (None if i.get(n) is None else _f(i[n]) for n in ("gamma", "beta"))   # optional: absent = None
    eps = float(a.get("epsilon", 1e-5))
    y = torch.nn.functional.layer_norm(_t(x), x.shape[-2:], None if g is None else _t(g),
                                       None if bb is None else _t(bb), eps=eps).numpy()
    m = x.mean((-2, -1), keepdims=True)
    r = 1.0 / np.sqrt(((x - m) ** 2).mean((-2, -1), keepdims=True) + eps)
    scale = (np.abs(x) + np.abs(m)) * r * (1.0 if g is None else np.abs(g)) + (0.0 if bb is None else np.abs(bb))
    return {"y": (y, scale), "mean": (m, np.abs(x).mean((-2, -1), keepdims=True)), "rstd": r}


def scaled_transpose(i, a):
    return {"y": _f(i["x"]).transpose(0, 2, 1, 3) * float(a.get("scale", 1.0))}


def swiglu_grad(i, a):
    import torch

    def fwd(x):
        p, q = x.chunk(2, dim=-1)
        return torch.nn.functional.silu(p) * q

    return {"out": _torch_grad(fwd, {"x": i["self"]}, ["x"], i["gradOut"])["x"]}


def joint_concat(i, a):
    return {"out": np.concatenate([_f(i["txt"]), _f(i["img"])], axis=1) * _f(i["gamma"])}


def mat_mul(i, a):
    return {"out": _f(i["self"]) @ _f(i["mat2"])}


def batch_mat_mul(i, a):
    return {"out": np.matmul(_f(i["self"]), _f(i["mat2"]))}


def matmul_gelu(i, a):
    y = _f(i["x"]) @ _f(i["weight"]) + _f(i["bias"])
    return {"output": 0.5 * y * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (y + 0.044715 * y ** 3)))}


def fused_mat_mul(i, a):
    return {"y": np.matmul(_f(i["x1"]), _f(i["x2"])) + _f(i["bias"]) + _f(i["x3"])}


def _t(a):
    import torch

    return torch.tensor(_f(a), dtype=torch.float64)


def hardtanh_grad(i, a):
    """ops-nn's HardtanhGrad mask: (min < x < max) or x is NaN selects the gradient (torch's CPU kernel is no oracle
    here: its vectorised and scalar paths disagree on NaN)."""
    x, g = _f(i["self"]), _f(i["gradOutput"])
    keep = ((x > a.get("minVal", -1.0)) & (x < a.get("maxVal", 1.0))) | np.isnan(x)
    return {"out": np.where(keep, g, 0.0)}


def masked_fill(i, a):
    import torch

    m = np.asarray(i["mask"]).astype(bool)
    assert m.size < 2 or (m.any() and not m.all()), "the example hook makes masks with both values"
    return {"out": torch.masked_fill(_t(i["self"]), torch.tensor(m), a.get("value", 0.0)).numpy()}


def scaled_masked_softmax(i, a):
    """torch_npu's documented reference: softmax((x * scale).masked_fill(mask, -10000)) (Megatron's fill)."""
    import torch

    z = torch.masked_fill(_t(i["x"]) * a.get("scale", 1.0), torch.tensor(np.asarray(i["mask"]).astype(bool)), -10000.0)
    return {"y": torch.softmax(z, -1).numpy()}


def log_softmax(i, a):
    import torch

    return {"y": torch.log_softmax(_t(i["x"]), -1).numpy()}


def prelu(i, a):
    import torch

    return {"out": torch.prelu(_t(i["self"]), _t(i["weight"])).numpy()}


def leaky_relu(i, a):
    import torch

    return {"out": torch.nn.functional.leaky_relu(_t(i["self"]), a.get("negative_slope", 0.01)).numpy()}


def hard_sigmoid(i, a):
    """torch's hardsigmoid (relu6(x + 3) / 6, CANN's alpha 1/6 and beta 0.5: the values aclnnHardsigmoid fixes)."""
    import torch

    return {"output_y": torch.nn.functional.hardsigmoid(_t(i["input_x"])).numpy()}


def maximum_grad(i, a):
    """ops-math's MaximumGrad formula (ties to x1) as TensorFlow's select; torch splits ties, so NumPy here."""
    g, x1, x2 = _f(i["grads"]), _f(i["x1"]), _f(i["x2"])
    return {"y1": np.where(x1 >= x2, g, 0.0), "y2": np.where(x1 < x2, g, 0.0)}


def threshold_backward(i, a):
    """ATen's threshold_backward in float64 (the cases' thresholds are exact in fp32)."""
    import torch

    return {"out": torch.ops.aten.threshold_backward(_t(i["gradOutput"]), _t(i["self"]),
                                                     a.get("threshold", 0.0)).numpy()}


def smooth_l1_loss(i, a):
    """torch's smooth_l1_loss, reduction none (beta 0: the L1 loss), and the terms the loss is a difference of."""
    import torch

    beta = a.get("beta", 1.0)
    d = _f(i["self"]) - _f(i["target"])
    out = torch.nn.functional.smooth_l1_loss(_t(i["self"]), _t(i["target"]), reduction="none", beta=beta).numpy()
    return {"out": (out, np.maximum(np.abs(d), 0.5 * beta))}


def embedding(i, a):
    """weight[indices]: each output row the table row its index names (a copy: exact)."""
    return {"out": _f(i["weight"])[np.asarray(i["indices"])]}


def inplace_apply_momentum(i, a):
    """torch.optim.SGD's momentum step in float64 (dampening 0, its momentum_buffer state set to accum), the updated
    var and buffer as var_ref / accum_ref; the scale of var_ref is the magnitude of its two terms (a difference)."""
    import torch

    var = _t(i["var"]).clone().requires_grad_(False)
    lr, mom = float(_f(i["lr"]).reshape(-1)[0]), float(_f(i["momentum"]).reshape(-1)[0])
    nesterov = bool(a.get("use_nesterov", False))
    p = torch.nn.Parameter(var)
    p.grad = _t(i["grad"])
    opt = torch.optim.SGD([p], lr=lr, momentum=mom, nesterov=nesterov)
    opt.state[p]["momentum_buffer"] = _t(i["accum"]).clone()
    opt.step()
    buf = opt.state[p]["momentum_buffer"].numpy()
    step = np.abs(lr) * (np.abs(_f(i["grad"])) + np.abs(mom * buf) if nesterov else np.abs(buf))
    return {"var_ref": (p.detach().numpy(), np.abs(_f(i["var"])) + step),
            "accum_ref": (buf, np.abs(mom * _f(i["accum"])) + np.abs(_f(i["grad"])))}


ORACLES = {f.__name__: f for f in (tanh, log_softmax, hardtanh_grad, masked_fill, scaled_masked_softmax, prelu,
                                   leaky_relu, hard_sigmoid, maximum_grad, threshold_backward, smooth_l1_loss, mat_mul,
                                   batch_mat_mul, matmul_gelu, fused_mat_mul, rms_norm, rms_norm_grad, add_rms_norm,
                                   layer_norm_grad, softmax, swiglu, gelu, gelu_v2,
                                   geglu, modulate, modulate_grad, bias_add_grad, scaled_transpose, joint_concat,
                                   swiglu_grad, reduce_mean, reduce_sum, reduce_max, mse_loss, kl_div, batch_norm,
                                   binary_cross_entropy,
                                   batch_norm_v3,
                                   instance_norm, layer_norm_v4, reduce_min, group_norm, embedding,
                                   inplace_apply_momentum)}

TERMS = {   # per output: which of its inputs' extents one element sums over (the fp32 accumulation of the bound)
    "rms_norm": {"y": "row", "rstd": "row"}, "rms_norm_grad": {"dx": "row", "dgamma": "rows"},
    "add_rms_norm": {"y": "row", "rstd": "row"}, "layer_norm_grad": {"pd_x": "row", "pd_gamma": "rows",
                                                                    "pd_beta": "rows"},
    "softmax": {"y": "row"}, "scaled_masked_softmax": {"y": "row"}, "log_softmax": {"y": "row"}, "mat_mul": {"out": "K"}, "batch_mat_mul": {"out": "K"}, "matmul_gelu": {"output": "K"}, "fused_mat_mul": {"y": "K"}, "modulate_grad": {"dscale": "seq", "dshift": "seq"}, "bias_add_grad": {"db": "rows"},
    "reduce_mean": {"out": "M"}, "reduce_sum": {"out": ("M", "H")}, "mse_loss": {"out": "all"}, "kl_div": {"out": "all"},
    "binary_cross_entropy": {"output": "all"},
    "batch_norm": {"output": "N", "saveMean": "N", "saveInvstd": "N"},
    "batch_norm_v3": {"output": ("N", "L"), "saveMean": ("N", "L"), "saveInvstd": ("N", "L")},
    "instance_norm": {"y": ("H", "W"), "mean": ("H", "W"), "variance": ("H", "W")},
    "layer_norm_v4": {"y": ("S", "H"), "mean": ("S", "H"), "rstd": ("S", "H")},
    "group_norm": {"out": ("Cg", "HxW"), "meanOut": ("Cg", "HxW"), "rstdOut": ("Cg", "HxW")},
}
"""K, M, N: the reduction length K of a matrix product, the reduced axis M or N; a tuple of dims: their product (a
reduction over several axes); all: every element; row: the row length H; rows: every row (the product of the other dims); seq: a batch's rows S; other outputs
(elementwise) sum nothing."""


def _terms(op, name, dims) -> int:
    """Terms one element of output `name` of `op` sums over at `dims` (TERMS), 1 when it sums nothing."""
    kind = TERMS.get(op, {}).get(name)
    size = {k: int(np.prod(v)) if isinstance(v, tuple) else v for k, v in dims.items()}
    if "C" in size and "G" in size:
        size["Cg"] = size["C"] // size["G"]   # channels per group
    if isinstance(kind, tuple):
        return int(np.prod([size[k] for k in kind]))
    if kind in ("K", "M", "N"):
        return size[kind]
    if kind == "row":
        return size["H"]
    if kind == "seq":
        return size["S"]
    if kind == "all":
        return int(np.prod(list(size.values())))
    if kind == "rows":
        return int(np.prod([v for k, v in size.items() if k != "H"]))
    return 1


F32, F16, BF16 = ({"T": "float32"}, {"T": "float16"}, {"T": "bfloat16"})
# (op, dims, dtypes, attrs, strategies the case must take: 1 ROW_SPLIT, 2 COL_SPLIT, 3 COL_STREAM, 4 ROW_CHUNK,
# None either)
CASES = [
    ("rms_norm", {"Bd": (3, 5), "H": 33}, F32, {}, 1),
    ("rms_norm", {"Bd": (2,), "H": 1}, F16, {}, None),
    ("rms_norm", {"Bd": (7,), "H": 20000}, F32, {"epsilon": 0.01}, 2),      # rows past UB: the row over cores
    ("rms_norm", {"Bd": (97,), "H": 130}, BF16, {}, 1),                     # 97 rows: a tail over 48 cores
    ("rms_norm", {"Bd": (50,), "H": 20001}, BF16, {}, 4),      # ROW_CHUNK: rows resident, a chunk tail, gamma whole
    ("rms_norm", {"Bd": (3,), "H": 524289}, F16, {}, 3),       # COL_STREAM: gamma per chunk, rstd written once
    ("rms_norm_grad", {"Bd": (5, 11), "H": 33}, F32, {}, 1),
    ("rms_norm_grad", {"Bd": (3,), "H": 9000}, BF16, {}, 2),
    ("rms_norm_grad", {"Bd": (1,), "H": 1}, F16, {}, None),
    ("add_rms_norm", {"Bd": (7,), "H": 100}, F16, {}, 1),
    ("add_rms_norm", {"Bd": (2, 2), "H": 12001}, BF16, {"epsilon": 1e-5}, 4),   # ROW_CHUNK: rows resident
    ("add_rms_norm", {"Bd": (1,), "H": 30001}, F32, {}, 2),                    # one long row: over the cores
    ("add_rms_norm", {"Bd": (49,), "H": 3}, F32, {}, 1),
    ("layer_norm_grad", {"Bd": (9,), "H": 48}, {"T": "float16", "U": "float32"}, {}, 1),
    ("layer_norm_grad", {"Bd": (50,), "H": 1152}, {"T": "bfloat16", "U": "bfloat16"}, {}, 1),
    ("layer_norm_grad", {"Bd": (4,), "H": 8192}, {"T": "float32", "U": "float32"}, {}, 2),
    ("layer_norm_grad", {"Bd": (3,), "H": 1}, {"T": "bfloat16", "U": "float32"}, {}, None),
    ("layer_norm_grad", {"Bd": (2, 49), "H": 77}, {"T": "float16", "U": "float16"}, {}, 1),
    ("softmax", {"Bd": (5,), "H": 77}, F32, {}, 1),
    ("softmax", {"Bd": (2,), "H": 65536}, F16, {}, 2),                        # partial maxima and sums exchanged
    ("softmax", {"Bd": (3, 17), "H": 1}, BF16, {}, None),
    ("softmax", {"Bd": (53,), "H": 1000}, BF16, {}, 1),
    ("softmax", {"Bd": (2,), "H": 262144}, F16, {}, 2),                       # SoftmaxV2 over 262144 columns
    ("softmax", {"Bd": (60,), "H": 40000}, F16, {}, 4),        # ROW_CHUNK: the online maximum and sum over chunks
    ("softmax", {"Bd": (3,), "H": 786433}, F32, {}, 3),        # COL_STREAM: a core's slice in chunks, a tail chunk
    ("softmax", {"Bd": (2,), "H": 500001}, BF16, {}, 2),       # a bf16 slice fits since the exchange stages nothing
    ("log_softmax", {"Bd": (3, 5), "H": 45}, F16, {}, 1),                     # the per-row sum's log: a Duplicate
    ("log_softmax", {"Bd": (2,), "H": 20000}, BF16, {}, 4),                     # ROW_CHUNK, 2 cores
    ("log_softmax", {"Bd": (1,), "H": 100001}, F32, {}, 2),
    ("log_softmax", {"Bd": (7,), "H": 1}, F32, {}, None),
    ("log_softmax", {"Bd": (3,), "H": 786433}, F32, {}, 3),    # COL_STREAM: rows of 786432 + 1
    ("log_softmax", {"Bd": (2,), "H": 500001}, F16, {}, 2),    # an fp16 slice fits since the exchange stages nothing
    ("swiglu", {"Bd": (3,), "H": 21}, F32, {}, 1),
    ("swiglu", {"Bd": (2,), "H": 11008}, BF16, {}, 2),                        # column chunks of both halves
    ("swiglu", {"Bd": (61,), "H": 1}, F16, {}, None),
    ("swiglu", {"Bd": (5, 7), "H": 37}, F32, {"dim": 0}, 1),                 # halves of the first axis
    ("swiglu", {"Bd": (30000,), "H": 2}, BF16, {"dim": 0}, 2),               # rows of prod(Bd) over the cores
    ("swiglu", {"A": 3, "Bd": (4, 3), "H": 5}, F16, {"dim": 1}, 1),         # each of the A blocks halved
    ("swiglu", {"A": 1, "Bd": (), "H": 1}, F32, {"dim": 1}, None),
    ("tanh", {"Bd": (7, 33)}, F32, {}, None),
    ("tanh", {"Bd": (100003,)}, BF16, {}, 2),                                  # one run split over the cores
    ("tanh", {"Bd": ()}, F16, {}, None),                                        # a 0-d tensor
    ("gelu", {"Bd": (3, 4, 5)}, F32, {}, None),
    ("gelu", {"Bd": ()}, F16, {}, None),                                       # a 0-d tensor
    ("gelu", {"Bd": (100003,)}, BF16, {}, 2),                                  # one run split over the cores
    ("gelu", {"Bd": (2, 3, 4, 5, 6, 7, 2, 3)}, F32, {}, None),                 # rank 8
    ("geglu", {"Bd": (4,), "H": 19}, F32, {"activateLeft": "true"}, 1),
    ("geglu", {"Bd": (4,), "H": 19}, F16, {"activateLeft": "false"}, 1),
    ("geglu", {"Bd": (2,), "H": 9001}, BF16, {"activateLeft": "true"}, 2),
    ("geglu", {"Bd": (3,), "H": 40}, F32, {"activateLeft": "true", "approximate": 0}, 1),   # exact GELU (erf)
    ("gelu_v2", {"Bd": (7, 33)}, F32, {"approximate": 0}, None),              # erf as AscendC's Erf steps
    ("gelu_v2", {"Bd": (100003,)}, BF16, {"approximate": 0}, 2),              # one run split over the cores
    ("gelu_v2", {"Bd": ()}, F16, {"approximate": 0}, None),                   # a 0-d tensor
    ("gelu_v2", {"Bd": (5, 9)}, F16, {"approximate": 1}, None),               # the tanh form
    ("modulate", {"B": 2, "S": 9, "H": 40}, F32, {}, 1),
    ("modulate", {"B": 3, "S": 50, "H": 1}, BF16, {}, None),
    ("modulate", {"B": 2, "S": 3, "H": 40000}, F16, {}, 2),
    ("modulate_grad", {"B": 3, "S": 17, "H": 24}, F32, {}, 1),                 # batches split across cores
    ("modulate_grad", {"B": 2, "S": 5, "H": 12000}, BF16, {}, 2),
    ("modulate_grad", {"B": 1, "S": 1, "H": 1}, F16, {}, None),
    ("bias_add_grad", {"Bd": (50, 3), "H": 70}, BF16, {}, 1),
    ("bias_add_grad", {"Bd": (3,), "H": 40000}, F32, {}, 2),
    ("bias_add_grad", {"Bd": (), "H": 5}, F16, {}, None),
    ("reduce_mean", {"Bd": (3,), "M": 37, "H": 33}, F16, {}, 1),                # batches split across cores
    ("reduce_mean", {"Bd": (2, 3), "M": 1, "H": 1}, F32, {"keepDim": True}, None),   # M = 1, H = 1, out [Bd, 1, H]
    ("reduce_mean", {"Bd": (), "M": 5, "H": 20000}, BF16, {}, 2),               # few rows: the row over cores
    ("reduce_sum", {"Bd": (3,), "M": 37, "H": 33}, F16, {}, 1),                 # dim [-1]: each row of H
    ("reduce_sum", {"Bd": (2,), "M": 3, "H": 30001}, BF16, {"dim": (-1,)}, None),   # long rows
    ("reduce_sum", {"Bd": (50,), "M": 1, "H": 30001}, BF16, {"dim": (-1,)}, 4),    # long rows, many: ROW_CHUNK
    ("reduce_sum", {"Bd": (2, 3), "M": 7, "H": 20}, F32, {"dim": (-2, -1)}, 1),  # dim [-2, -1]: a batch to one
    ("reduce_sum", {"Bd": (), "M": 50, "H": 41}, BF16, {"dim": "-2,-1"}, None),  # CLI text; out is 0-d
    ("reduce_sum", {"Bd": (4,), "M": 1, "H": 1}, F16, {"dim": [-2, -1]}, None),
    ("reduce_max", {"Bd": (5,), "M": 29, "H": 17}, BF16, {}, 1),
    ("reduce_max", {"Bd": (1,), "M": 3, "H": 9001}, F16, {}, 2),
    ("reduce_max", {"Bd": (97,), "M": 1, "H": 2}, F32, {}, 1),                  # a tail over 48 cores
    ("reduce_min", {"Bd": (5,), "M": 29, "H": 17}, BF16, {}, 1),               # -max(-x): batches across cores
    ("reduce_min", {"Bd": (1,), "M": 3, "H": 9001}, F16, {}, 2),
    ("reduce_min", {"Bd": (97,), "M": 1, "H": 2}, F32, {}, 1),                  # M = 1, a tail over 48 cores
    ("mse_loss", {"Bd": (3, 5), "H": 33}, F16, {}, 1),                        # a mean of every element
    ("mse_loss", {"Bd": (2,), "H": 20000}, F32, {}, 2),                         # partial totals per column slice
    ("mse_loss", {"Bd": (), "H": 1}, BF16, {"reduction": 2}, None),             # one element
    ("mse_loss", {"Bd": (97,), "H": 3}, BF16, {"reduction": 2}, 1),             # a sum, rows with a tail over cores
    # the reduction a string attribute (CANN's OpDef), the aclnn API's int64_t index (api.enum) in the call
    ("binary_cross_entropy", {"Bd": (7,), "H": 1031}, F16, {"reduction": "none"}, None),
    ("binary_cross_entropy", {"Bd": (3, 5), "H": 33}, BF16, {"reduction": "mean"}, None, ()),   # no weight
    ("binary_cross_entropy", {"Bd": (97,), "H": 3}, F32, {"reduction": "sum"}, None),
    # batchmean's N is no extent of the kernel (its rows are N x Prod(Bd)): a tiling field of its own
    ("kl_div", {"N": 3, "Bd": (5,), "H": 37}, F32, {"reduction": 3, "logTarget": True}, 1),
    ("kl_div", {"N": 2, "Bd": (3, 2), "H": 20000}, F32, {"reduction": 3, "logTarget": True}, 2),
    ("kl_div", {"N": 5, "Bd": (2,), "H": 301}, F16, {"reduction": 1, "logTarget": True}, 1),
    ("kl_div", {"N": 7, "Bd": (), "H": 33}, BF16, {"reduction": 1, "logTarget": True}, 1),
    ("kl_div", {"N": 97, "Bd": (1,), "H": 3}, F32, {"reduction": 2, "logTarget": True}, 1),
    ("batch_norm", {"N": 111, "C": 33}, F16, {}, 1),                            # two passes, rows over 48 cores
    ("batch_norm", {"N": 3, "C": 2000}, F32, {"eps": 0.01}, 1),                 # few long rows: still ROW_SPLIT
    ("batch_norm", {"N": 1, "C": 1}, BF16, {}, 1),
    # [N, C, L] over N and L: rows (c, n) of L, each channel's rows one batch (split across cores: exchanged)
    ("batch_norm_v3", {"N": 7, "C": 5, "L": 37}, F32, {}, 1),                    # 35 rows: channels split over cores
    ("batch_norm_v3", {"N": 33, "C": 3, "L": 129}, F16, {"eps": 0.01}, 1),       # 99 rows over 48 cores: tails
    ("batch_norm_v3", {"N": 1, "C": 130, "L": 1}, BF16, {}, 1),                  # L = 1, N = 1: one element a channel
    ("batch_norm_v3", {"N": 50, "C": 1, "L": 3}, F16, {}, 1),                    # one channel over every core
    ("batch_norm_v3", {"N": 2, "C": 9, "L": 1000}, BF16, {}, 1),
    ("instance_norm", {"N": 3, "C": 5, "H": 7, "W": 9}, F16, {}, 1),            # per-channel gamma: 15 rows
    ("instance_norm", {"N": 2, "C": 3, "H": 150, "W": 301}, F32, {"eps": 0.01}, 2),   # rows of H * W over cores
    ("instance_norm", {"N": 10, "C": 5, "H": 100, "W": 201}, F16, {}, 4),       # ROW_CHUNK: two levels over chunks
    ("instance_norm", {"N": 7, "C": 11, "H": 1, "W": 1}, F16, {}, 1),           # H = W = 1; 77 rows: a tail
    ("instance_norm", {"N": 1, "C": 97, "H": 3, "W": 1}, F32, {}, 1),           # the channel wraps within a core
    ("instance_norm", {"N": 1, "C": 2, "H": 501, "W": 1001}, F16, {}, 2),       # rows of 501501: COL_SPLIT (the slice fits)
    ("layer_norm_v4", {"Bd": (2,), "S": 63, "H": 8001}, {"T": "bfloat16", "U": "float32"}, {}, 3),   # streamed
    ("layer_norm_v4", {"Bd": (3,), "S": 5, "H": 7}, {"T": "float16", "U": "float32"}, {}, 1),
    ("layer_norm_v4", {"Bd": (3,), "S": 5, "H": 7}, {"T": "float16", "U": "float32"}, {}, 1, ["beta"]),
    ("layer_norm_v4", {"Bd": (2,), "S": 100, "H": 301}, {"T": "bfloat16", "U": "bfloat16"}, {}, 2),
    ("layer_norm_v4", {"Bd": (2,), "S": 100, "H": 301}, {"T": "bfloat16", "U": "bfloat16"}, {}, 2, ["gamma"]),
    ("layer_norm_v4", {"Bd": (5,), "S": 3, "H": 11}, {"T": "float32", "U": "float32"}, {}, 1, []),
    ("layer_norm_v4", {"Bd": (7, 7), "S": 1, "H": 1}, {"T": "float32", "U": "float32"}, {}, 1),
    ("layer_norm_v4", {"Bd": (), "S": 33, "H": 1}, {"T": "float16", "U": "float16"}, {"epsilon": 0.1}, None),
    ("layer_norm_v4", {"Bd": (97,), "S": 3, "H": 17}, {"T": "bfloat16", "U": "float32"}, {}, 1),
    ("scaled_transpose", {"B": 2, "S": 7, "N": 3, "D": 20}, F32, {"scale": 0.5}, 1),
    ("scaled_transpose", {"B": 1, "S": 33, "N": 5, "D": 1}, F16, {"scale": -2.0}, None),
    ("scaled_transpose", {"B": 2, "S": 3, "N": 2, "D": 9000}, BF16, {"scale": 0.125}, 4),   # 12 long rows: ROW_CHUNK
    ("scaled_transpose", {"B": 1, "S": 1, "N": 2, "D": 9000}, BF16, {"scale": 0.125}, 2),   # 2 long rows: COL_SPLIT
    ("joint_concat", {"B": 2, "St": 5, "Si": 9, "H": 33}, F16, {}, 1),          # passes cross the two streams
    ("joint_concat", {"B": 3, "St": 1, "Si": 40, "H": 20000}, F32, {}, 4),   # 123 long rows over the cores
    ("joint_concat", {"B": 1, "St": 1, "Si": 2, "H": 20000}, F32, {}, 2),    # 3 long rows: COL_SPLIT
    ("joint_concat", {"B": 5, "St": 20, "Si": 31, "H": 1}, BF16, {}, None),
    ("swiglu_grad", {"Bd": (3, 7), "H": 21}, F32, {}, 1),                      # dx written as two column windows
    ("swiglu_grad", {"Bd": (2,), "H": 9000}, BF16, {}, 2),
    ("swiglu_grad", {"Bd": (53,), "H": 1}, F16, {}, None),
    ("leaky_relu", {"Bd": (3, 77)}, F16, {"negative_slope": 0.2}, None),     # compare / select: whole repeats
    ("leaky_relu", {"Bd": (1,)}, F32, {}, None),                              # one element: one repeat of 64 lanes
    ("leaky_relu", {"Bd": (5, 30001)}, BF16, {}, 2),
    ("hard_sigmoid", {"Bd": (6, 513)}, F16, {}, None),                        # attributes fixed by the API
    ("hard_sigmoid", {"Bd": (3,)}, BF16, {}, None),
    ("hard_sigmoid", {"Bd": (2, 3, 41)}, F32, {}, None),
    ("maximum_grad", {"Bd": (7, 65)}, F32, {}, None),                         # two tensors compared, masks as numbers
    ("maximum_grad", {"Bd": (2, 50001)}, F16, {}, 2),
    ("maximum_grad", {"Bd": (1,)}, BF16, {}, None),
    ("threshold_backward", {"Bd": (4, 3, 5)}, BF16, {"threshold": 0.25}, None),
    ("threshold_backward", {"Bd": (100003,)}, F32, {}, 2),                   # one run split over the cores
    ("threshold_backward", {"Bd": (2, 1)}, F16, {"threshold": -1.0}, None),
    ("smooth_l1_loss", {"Bd": (9,), "H": 33}, F32, {"beta": 0.5}, None),
    ("hardtanh_grad", {"Bd": (5, 13)}, F32, {"minVal": -0.5, "maxVal": 0.75}, None),   # masks combined: & ~
    ("hardtanh_grad", {"Bd": (3, 30001)}, F16, {}, 2),
    ("hardtanh_grad", {"Bd": (1,)}, BF16, {"minVal": 0.0, "maxVal": 0.25}, None),
    ("masked_fill", {"N": 3, "H": 77}, F16, {"value": -2.5}, None),             # a bool mask read through half
    ("masked_fill", {"N": 5, "H": 30001}, BF16, {}, 2),
    ("masked_fill", {"N": 1, "H": 1}, F32, {"value": 1e30}, None),
    ("scaled_masked_softmax", {"Bd": (2, 3), "H": 77}, F32, {"scale": 0.125}, 1),   # a fused masked fill
    ("scaled_masked_softmax", {"Bd": (2,), "H": 40000}, BF16, {"scale": 2.0}, 2),
    ("scaled_masked_softmax", {"Bd": (97,), "H": 12000}, F16, {"scale": 2.0}, 4),    # ROW_CHUNK: masks per chunk
    ("scaled_masked_softmax", {"Bd": (49,), "H": 1}, F16, {}, None),
    ("scaled_masked_softmax", {"Bd": (3,), "H": 524289}, F32, {"scale": 0.5}, 3),   # streamed: masks per chunk
    ("prelu", {"N": 97, "C": 33}, F32, {}, 1),                                  # rows of 33 in 64-lane strides, tails
    ("prelu", {"N": 3, "C": 1}, BF16, {}, None),
    ("prelu", {"N": 2, "C": 30000}, F16, {}, 2),
    ("smooth_l1_loss", {"Bd": (97,), "H": 1}, F16, {"beta": 0.0}, None),    # beta 0: the L1 loss; H = 1
    ("smooth_l1_loss", {"Bd": (3,), "H": 40000}, BF16, {"beta": 2.0}, 2),
    ("group_norm", {"N": 3, "C": 6, "HxW": 7, "G": 3}, F16, {"group": 3}, 1),     # segments of 7: unaligned ends
    ("group_norm", {"N": 2, "C": 4, "HxW": 30001, "G": 2}, F32, {"group": 2, "eps": 0.01}, 2),   # rows over cores
    ("group_norm", {"N": 24, "C": 4, "HxW": 10001, "G": 2}, F16, {"group": 2}, 4),   # ROW_CHUNK: segments per chunk
    ("group_norm", {"N": 2, "C": 4, "HxW": 250001, "G": 1}, F32, {"group": 1}, 3),   # streamed: segments per chunk
    ("group_norm", {"N": 5, "C": 12, "HxW": 1, "G": 4}, BF16, {"group": 4}, 1),   # HxW = 1: one column a channel
    ("group_norm", {"N": 97, "C": 5, "HxW": 9, "G": 1}, F32, {"group": 1}, 1),    # one group: LayerNorm over C * HxW
    ("group_norm", {"N": 2, "C": 7, "HxW": 33, "G": 7}, BF16, {"group": 7}, 1),   # a group a channel: InstanceNorm
    ("group_norm", {"N": 1, "C": 320, "HxW": 64, "G": 32}, BF16, {"group": 32}, 1),   # aligned segments of 64
    ("embedding", {"Bd": (3, 5), "V": 7, "H": 33}, F32, {}, 1),              # rows picked by an index input
    ("embedding", {"Bd": (97,), "V": 50, "H": 1}, BF16, {}, None),            # H = 1; 97 indices: a tail over cores
    ("embedding", {"Bd": (3,), "V": 5, "H": 40000}, F16, {}, 2),              # rows past UB: column chunks
    ("embedding", {"Bd": (), "V": 3, "H": 17}, F16, {}, None),                # a 0-d index: one row
    ("embedding", {"Bd": (2,), "V": 2, "H": 400001}, BF16, {}, 2),            # 800 KB rows over the cores
    # outputs written in place into their inputs (ref=): the emulation aliases var_ref to var, accum_ref to accum
    ("inplace_apply_momentum", {"Bd": (7, 33)}, F32, {}, None),
    ("inplace_apply_momentum", {"Bd": (100003,)}, BF16, {"use_nesterov": True}, None),   # a tail over the cores
    ("inplace_apply_momentum", {"Bd": (3, 1001)}, F16, {}, None),
    ("inplace_apply_momentum", {"Bd": (1,)}, F32, {"use_nesterov": True}, None),
    # strategy 2: AIC only (no K split, no epilogue: KERNEL_TASK_TYPE(key, KERNEL_TYPE_AIC_ONLY)); 1: mixed
    ("mat_mul", {"M": 37, "K": 50, "N": 45}, F16, {}, 2),                     # one block, every edge a tail
    ("mat_mul", {"M": 1000, "K": 333, "N": 500}, BF16, {}, 2),                # 8 x 4 blocks over 24 AI Cores
    ("mat_mul", {"M": 129, "K": 17, "N": 1}, F16, {}, 2),                     # a one-row tail block (not GEMV)
    ("mat_mul", {"M": 130, "K": 8000, "N": 70}, F16, {}, 1),                  # K split (4 ranges): mixed launch
    ("batch_mat_mul", {"B": 3, "M": 37, "K": 50, "N": 45}, F16, {}, 2),
    ("batch_mat_mul", {"B": 7, "M": 200, "K": 40, "N": 130}, BF16, {}, 2),    # 28 blocks: core ranges cross matrices
    ("matmul_gelu", {"M": 37, "K": 50, "N": 45}, F16, {}, 1),                 # the epilogue on the AIVs
    ("matmul_gelu", {"M": 130, "K": 19, "N": 300}, BF16, {}, 1),              # 2 x 2 blocks, tails of 2 rows / 44 cols
    ("fused_mat_mul", {"B": 3, "M": 37, "K": 50, "N": 45}, F16, {}, 1),       # + bias + a residual, batched
    ("fused_mat_mul", {"B": 2, "M": 17, "K": 9, "N": 300}, BF16, {}, 1),
]


def _bound(ref, dtype, terms=1, scale=None):
    """The error bound of the module docstring for an output summing `terms` values per element (_terms); `scale`:
    the magnitude of the terms an output is a difference of (default: the output itself)."""
    unit = UNIT[dtype] * 4 + 2.0**-24 * 4 * terms
    mag = np.abs(ref) if scale is None else np.maximum(np.abs(ref), scale)
    return unit * (mag + mag.mean())


STREAM_READS = {"softmax": 2, "log_softmax": 2, "rms_norm": 2}
"""Reads of each row input by COL_STREAM, by hand: a softmax's row maximum and sum of exponentials share one pass
(an online softmax), then the output pass; RMSNorm's one sum of squares, then the output pass."""


def _case_id(c) -> str:
    tail = "" if len(c) < 6 else "-with-" + ("+".join(c[5]) or "none")   # the optional inputs present
    return f"{c[0]}-{'x'.join(map(str, c[1].values()))}-{c[2]['T']}{tail}"


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_kernel_matches_the_float64_oracle(case, examples_gen):
    """A case is (op, dims, dtypes, attrs, the strategy expected or None[, the optional inputs present: all when
    not given])."""
    op, dims, dtypes, attrs, strategy = case[:5]
    r = run_check(str(EX / f"{op}.py"), dims=dims, dtypes=dtypes, attrs=attrs, gen_dir=examples_gen, seed=sum(
        x if isinstance(x, int) else sum(x) for x in dims.values()), present=case[5] if len(case) > 5 else None,
        progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    if strategy is not None:
        assert r.tiling_key % 10 == strategy, r.tiling_key
    if strategy == 3:   # COL_STREAM re-reads its row inputs: check states the plan, and the emulation counts it
        assert r.gm_plan and r.gm_plan["reads"] >= 2, r.gm_plan
        if op in STREAM_READS:
            assert r.gm_plan["reads"] == STREAM_READS[op], r.gm_plan
        for name, size in r.gm_plan["inputs"].items():
            assert r.gm[name].read == r.gm_plan["reads"] * size, (name, r.gm[name].read, size)
    want = ORACLES[op](r.inputs, attrs)
    for name, ref in want.items():
        ref, scale = ref if isinstance(ref, tuple) else (ref, None)
        got = _f(r.arrays[name])
        assert got.shape == ref.shape, (name, got.shape, ref.shape)
        dt = str(r.arrays[name].dtype)
        err = np.abs(got - ref)
        bound = _bound(ref, dt, _terms(op, name, dims), scale)
        assert np.all(err <= bound), (name, float(err.max()), float(bound[np.unravel_index(err.argmax(), err.shape)]))


@pytest.mark.parametrize("engine", ["emu", "kir"])
def test_layer_norm_grad_tree_exchange_matches_the_float64_oracle(engine, examples_gen):
    """LayerNormGradV3 on 97 rows of 1152 (bf16, fp32 gamma) over 48 cores: ROW_SPLIT's pd_gamma / pd_beta partial
    rows are combined by one strided copy and a pairwise tree (opgen.kernel.rowsched `_tree_partials`: 48 rows of
    AlignUp(24, 8) fit in w_[0..1]); both engines equal the float64 closed form within the rounding bound."""
    dims, dtypes = {"Bd": (97,), "H": 1152}, {"T": "bfloat16", "U": "float32"}
    r = run_check(str(EX / "layer_norm_grad.py"), dims=dims, dtypes=dtypes, gen_dir=examples_gen if engine == "emu"
                  else None, seed=3, progress=False, engine=engine)
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    assert r.tiling_key % 10 == 1, r.tiling_key
    for name, (ref, scale) in ORACLES["layer_norm_grad"](r.inputs, {}).items():
        got = _f(r.arrays[name])
        err = np.abs(got - ref)
        bound = _bound(ref, str(r.arrays[name].dtype), _terms("layer_norm_grad", name, dims), scale)
        assert np.all(err <= bound), (name, float(err.max()))


def test_backward_closed_forms_equal_torch_autograd():
    """The closed forms the backward oracles use (saved statistics as inputs) equal torch autograd of the forward
    when the statistics are the forward's own (float64)."""
    import torch

    rng = np.random.default_rng(5)
    x, dy = rng.standard_normal((6, 37)), rng.standard_normal((6, 37))
    gamma = rng.standard_normal(37)

    def rms(x, gamma):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * gamma

    want = _torch_grad(rms, {"x": x, "gamma": gamma}, ["x", "gamma"], dy)
    rstd = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    got = rms_norm_grad({"dy": dy, "x": x, "rstd": rstd, "gamma": gamma}, {})
    assert np.allclose(got["dx"][0], want["x"], rtol=1e-10) and np.allclose(got["dgamma"], want["gamma"], rtol=1e-10)

    def ln(x, gamma, beta):
        return torch.nn.functional.layer_norm(x, x.shape[-1:], gamma, beta, eps=1e-5)

    want = _torch_grad(ln, {"x": x, "gamma": gamma, "beta": np.zeros(37)}, ["x", "gamma", "beta"], dy)
    mean = x.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
    got = layer_norm_grad({"dy": dy, "x": x, "mean": mean, "rstd": rstd, "gamma": gamma}, {})
    for name, key in (("pd_x", "x"), ("pd_gamma", "gamma"), ("pd_beta", "beta")):
        assert np.allclose(got[name][0], want[key], rtol=1e-10, atol=1e-12), name


def test_every_dtype_row_of_every_example_is_exercised():
    """The case list runs every dtype combination of every example's table."""
    from opgen.registry import load_spec

    for op in ORACLES:
        spec = load_spec(str(EX / f"{op}.py"))
        rows = {tuple(sorted((k, v.long_name) for k, v in r.items())) for r in spec.dtype_rows}
        seen = set()
        for o, _d, dt, *_rest in CASES:
            if o == op:
                seen.add(tuple(sorted(dt.items())) if len(dt) == len(spec.dtype_table) else
                         tuple(sorted({**{c.name: dt["T"] for c in spec.dtype_table}, **dt}.items())))
        assert rows <= seen, (op, rows - seen)


def test_interpreter_exact_mode_matches_the_oracles():
    """`opgen interpret --mode exact` (float64 throughout) equals the oracles on every example."""
    from opgen.check.run import make_inputs
    from opgen.interp import run_graph
    from opgen.registry import load_spec

    seen = set()
    for op, dims, dtypes, attrs, *_rest in CASES:
        if op in seen or max((np.prod(v) if isinstance(v, tuple) else v) for v in dims.values()) > 5000:
            continue
        seen.add(op)
        spec = load_spec(str(EX / f"{op}.py"))
        inputs, full = make_inputs(spec, dims, dict(attrs), dict(dtypes), 3)
        bound = spec.bind(inputs, full, dtypes)
        got = run_graph(spec.graph(bound.key), bound, mode="exact")
        for name, ref in ORACLES[op](bound.arrays, attrs).items():
            ref, scale = ref if isinstance(ref, tuple) else (ref, None)
            g = _f(got[name])
            assert g.shape == ref.shape, (op, name, g.shape, ref.shape)
            mag = np.abs(ref) if scale is None else np.maximum(np.abs(ref), scale)
            assert np.all(np.abs(g - ref) <= 1e-12 * (mag + mag.mean())), (op, name)
    assert seen == set(ORACLES)


def test_every_reduction_length_names_a_summing_output():
    """TERMS names outputs of the examples, and every output that sums over something is in it (the bound of a
    sum uses its own reduction length, not the whole domain's)."""
    from opgen.registry import load_spec

    for op in ORACLES:
        spec = load_spec(str(EX / f"{op}.py"))
        sums = set()
        for g in (spec.graph(k) for k in spec.keys()):   # an output that sums in some specialisation
            _summing_outputs(g, sums)
        assert set(TERMS.get(op, {})) == sums, (op, sorted(sums), sorted(TERMS.get(op, {})))


def _summing_outputs(g, sums: set) -> None:
    """Add to `sums` the outputs of graph `g` computed through a sum / mean reduction or a matmul."""
    prod, outs = g.producers(), dict(g.outputs)
    for name, v in outs.items():
        stack, seen = [v], set()
        while stack:
            x = stack.pop()
            n = prod.get(x)
            if n is None or x in seen:
                continue
            seen.add(x)
            if n.op == "reduce" and n.attr("kind") in ("sum", "mean") or n.op == "matmul":
                sums.add(name)
            stack += list(n.inputs)


@pytest.mark.parametrize("dims, dtypes, strategy", [
    ({"Bd": (3,), "H": 77}, F16, 1),
    ({"Bd": (2,), "H": 40000}, BF16, 2),     # the row's maximum exchanged between cores
    ({"Bd": (50,), "H": 20000}, F16, 4),     # ROW_CHUNK: the row's maximum over its chunks, int8 chunks written
    ({"Bd": (97,), "H": 1}, F16, 1),
])
def test_dynamic_quant_kernel_writes_int8_against_float64(dims, dtypes, strategy, examples_gen):
    """DynamicQuant's emulated kernel (an int8 output written from fp32 through half with CAST_ODD, then int8 with
    the mode): against float64 math, scale = max|x| / 127 within one fp32 rounding and y = rint(x / scale) saturated
    to int8 off by one only where the quotient straddles a tie; against the same steps in NumPy fp32 (the fp32
    scale, the fp32 quotient, then rint: round-to-odd to half then rint is exact for |q| < 256, §1.12) exactly."""
    r = run_check(str(EX / "dynamic_quant.py"), dims=dims, dtypes=dtypes, gen_dir=examples_gen, seed=7, progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    assert r.tiling_key % 10 == strategy, r.tiling_key
    x = _f(r.inputs["x"])
    s_ref = np.abs(x).max(-1) / 127.0
    with np.errstate(invalid="ignore", divide="ignore"):
        q = x / s_ref[..., None]
    y_ref = np.clip(np.where(np.isnan(q), 0.0, np.rint(q)), -128, 127)
    y, s = np.asarray(r.arrays["y"]), _f(r.arrays["scale"])
    assert y.dtype == np.int8
    np.testing.assert_allclose(s, s_ref, rtol=2.0**-23, atol=0)
    diff = y.astype(np.int64) - y_ref.astype(np.int64)
    near_tie = np.abs(np.abs(q - np.floor(q)) - 0.5) < 1e-5 * np.maximum(np.abs(q), 1.0)
    assert np.all(np.abs(diff) <= 1) and np.all((diff == 0) | near_tie)
    assert np.abs(y).max() == 127 or dims["H"] == 1   # the row's maximum maps to +-127
    x32 = np.asarray(r.inputs["x"], np.float64).astype(np.float32)
    s32 = np.abs(x32).max(-1) / np.float32(127.0)
    np.testing.assert_array_equal(np.asarray(r.arrays["scale"]), s32)
    with np.errstate(invalid="ignore", divide="ignore"):
        q32 = (x32 / s32[..., None]).astype(np.float64)
    np.testing.assert_array_equal(y, np.clip(np.where(np.isnan(q32), 0.0, np.rint(q32)), -128, 127))


def _ce_inputs(n, c, seed):
    """Logits (spread so some rows are near one-hot), class targets with every fifth row ignored (-100), and
    positive class weights."""
    rng = np.random.default_rng(seed)
    t = rng.integers(0, c, n).astype(np.int64)
    t[::5] = -100
    return (rng.normal(0.0, 3.0, (n, c)).astype(np.float32), t, rng.uniform(0.25, 2.0, c).astype(np.float32))


@pytest.mark.parametrize("n, c, dtype, strategy, weighted, eps", [
    (97, 33, "float32", 1, True, 0.0),        # a tail over 48 cores, ignored rows, rows shorter than 64 lanes
    (5, 1, "bfloat16", None, False, 0.2),     # C = 1: the only class, or ignored; weight absent
    (3, 12001, "float16", 4, True, 0.1),      # ROW_CHUNK: each target lane lies in one chunk of the row
    (1, 120001, "float32", 2, True, 0.1),     # COL_SPLIT: each target lane lies in one core's column slice
    (40, 30001, "float16", 2, True, 0.1),     # COL_SPLIT over 47 cores, many rows a group, a shorter last slice
    (49, 1000, "bfloat16", 1, False, 0.05),
])
def test_cross_entropy_loss_and_its_grad_match_torch(n, c, dtype, strategy, weighted, eps, examples_gen):
    """CrossEntropyLoss (reduction none, label smoothing) against torch.nn.functional.cross_entropy / log_softmax in
    float64 on the kernel's own inputs; CrossEntropyLossGrad from the forward kernel's log_prob against the closed form
    g * w[t] * (exp(log_prob) - onehot(t)) (0 on ignored rows), which equals torch autograd of the forward (checked
    here in float64)."""
    import torch

    x, t, w = _ce_inputs(n, c, n + c)
    if not weighted:
        w = np.ones_like(w)   # the oracle's weights; the kernels get none
    r = run_check(str(EX / "cross_entropy_loss.py"), {"input": x, "target": t, "weight": w if weighted else None},
                  {"reduction": "none", "label_smoothing": eps}, dtypes={"T": dtype}, gen_dir=examples_gen,
                  progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: v.to_json() for k, v in r.outputs.items() if not v.passed})
    if strategy is not None:
        assert r.tiling_key % 10 == strategy, r.tiling_key
    x64, w64, tt = _t(r.inputs["input"]), _t(w), torch.tensor(t)
    want = {"loss": torch.nn.functional.cross_entropy(x64, tt, weight=w64, reduction="none", ignore_index=-100,
                                                      label_smoothing=eps).numpy(),
            "log_prob": torch.log_softmax(x64, -1).numpy()}
    for name, ref in want.items():
        got = _f(r.arrays[name])
        bound = _bound(ref, dtype, c, np.abs(want["log_prob"]).max(-1) if name == "loss" else None)
        assert np.all(np.abs(got - ref) <= bound), (name, float(np.abs(got - ref).max()))
    assert np.all(_f(r.arrays["loss"])[t == -100] == 0.0)

    g = np.random.default_rng(c).normal(0.0, 1.0, n).astype(np.float32)
    lp = np.asarray(r.arrays["log_prob"], np.float32)
    rg = run_check(str(EX / "cross_entropy_loss_grad.py"), {"gradLoss": g, "logProb": lp, "target": t,
                                                             "weight": w if weighted else None},
                   {"labelSmoothing": eps}, dtypes={"T": dtype}, gen_dir=examples_gen, progress=False)
    assert not rg.faults and rg.passed, (rg.faults[:3], {k: v.to_json() for k, v in rg.outputs.items()})
    keep = t != -100
    tk = np.where(keep, t, 0)
    onehot = (np.arange(c)[None, :] == tk[:, None]) & keep[:, None]

    def closed(gl, lps):   # g * [(1 - eps) w_t (p - onehot) + eps / C (p sum(w) - w)], 0 on ignored rows
        p, w64 = np.exp(lps), _f(w)
        gk = (_f(gl) * keep)[:, None]
        return gk * ((1 - eps) * w64[tk][:, None] * (p - onehot) + eps / c * (p * w64.sum() - w64[None, :]))

    ref = closed(rg.inputs["gradLoss"], _f(rg.inputs["logProb"]))
    got = _f(rg.arrays["xGrad"])
    mag = np.abs(_f(g) * keep)[:, None] * (_f(w).max() + eps * _f(w).sum() / c)
    assert np.all(np.abs(got - ref) <= _bound(ref, dtype, 1, mag)), float(np.abs(got - ref).max())
    # the closed form is torch autograd of the forward (float64, logits x: logProb = log_softmax(x))
    xa = torch.tensor(_f(x), dtype=torch.float64, requires_grad=True)
    torch.nn.functional.cross_entropy(xa, tt, weight=torch.tensor(_f(w)), reduction="none", ignore_index=-100,
                                      label_smoothing=eps).backward(torch.tensor(_f(g)))
    lp64 = torch.log_softmax(torch.tensor(_f(x)), -1).numpy()
    np.testing.assert_allclose(closed(g, lp64), xa.grad.numpy(), rtol=1e-10, atol=1e-13)


def test_cross_entropy_targets_out_of_range_stop_the_kernel(examples_gen):
    """A target outside [0, C) that is not ignore_index (device data, which the aclnn layer cannot read): both
    kernels stop themselves with AscendC::Trap() on the core holding that row (run_check raises KernelTrapped
    naming the rule); -100 and C - 1 are legal."""
    from opgen.check import KernelTrapped

    x, t, w = _ce_inputs(30, 40, 1)
    for bad in (40, -1):
        t2 = t.copy()
        t2[7] = bad
        with pytest.raises(KernelTrapped) as e:
            run_check(str(EX / "cross_entropy_loss.py"), {"input": x, "target": t2, "weight": w},
                      {"reduction": "none"}, dtypes={"T": "float32"}, gen_dir=examples_gen, progress=False)
        assert e.value.traps and "target[7]" in str(e.value), e.value
    lp = x - np.log(np.exp(x).sum(-1, keepdims=True))
    t2 = t.copy()
    t2[3] = 40
    with pytest.raises(KernelTrapped):
        run_check(str(EX / "cross_entropy_loss_grad.py"), {"gradLoss": x[:, 0].copy(), "logProb": lp, "target": t2,
                                                            "weight": w}, dtypes={"T": "float32"}, gen_dir=examples_gen,
                  progress=False)
    t2[3] = 39
    r = run_check(str(EX / "cross_entropy_loss.py"), {"input": x, "target": t2, "weight": w}, {"reduction": "none"},
                  dtypes={"T": "float32"}, gen_dir=examples_gen, progress=False)
    assert r.passed and not r.faults
    # ignore_index is int64: 2^24 + 1 rounds to 2^24 in fp32 and matches no target (C <= 2^24 keeps the targets
    # exact), so every row counts; a valid class as ignore_index drops exactly its rows (torch, float64); the C++
    # TilingFunc (emu) and its Python twin (kir) round the attribute alike
    import torch

    t3 = np.where(t2 < 0, 0, t2)
    for skip, engine in ((2 ** 24 + 1, "emu"), (2 ** 24 + 1, "kir"), (-2 ** 63, "emu"), (int(t3[0]), "emu"),
                         (int(t3[0]), "kir")):
        r = run_check(str(EX / "cross_entropy_loss.py"), {"input": x, "target": t3, "weight": w},
                      {"reduction": "none", "ignore_index": skip}, dtypes={"T": "float32"}, gen_dir=examples_gen,
                      progress=False, engine=engine)
        want = torch.nn.functional.cross_entropy(torch.tensor(x, dtype=torch.float64), torch.tensor(t3),
                                                 weight=torch.tensor(w, dtype=torch.float64), reduction="none",
                                                 ignore_index=skip).numpy()
        assert r.passed and not r.faults, skip
        np.testing.assert_allclose(_f(r.arrays["loss"]), want, rtol=1e-5, atol=1e-6)
        assert np.all((_f(r.arrays["loss"]) == 0) == (t3 == skip)), skip


@pytest.mark.parametrize("n, c, dtype, strategy", [
    (97, 33, "float32", 1),      # 97 rows over 48 cores: partial sums in core order
    (3, 20000, "bfloat16", 1),   # ROW_SPLIT on narrow rows: the picked elements only, no row in UB (rowprog.narrow_rows)
    (1, 1, "float16", None),
])
def test_nll_loss_sums_match_torch(n, c, dtype, strategy, examples_gen):
    """NLLLoss (reduction sum): per-row gathers by the target summed over the rows to 0-d outputs, against
    torch.nn.functional.nll_loss (float64, the kernel's inputs) and sum of weight[target] over kept rows."""
    import torch

    rng = np.random.default_rng(n + c)
    x = rng.normal(-3.0, 1.0, (n, c)).astype(np.float32)
    t = rng.integers(0, c, n).astype(np.int64)
    t[1::4] = -100
    w = rng.uniform(0.5, 2.0, c).astype(np.float32)
    r = run_check(str(EX / "nll_loss.py"), {"self": x, "target": t, "weight": w}, dtypes={"T": dtype}, gen_dir=examples_gen,
                  progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: v.to_json() for k, v in r.outputs.items() if not v.passed})
    if strategy is not None:
        assert r.tiling_key % 10 == strategy, r.tiling_key
    x64, w64 = _f(r.inputs["self"]), _f(r.inputs["weight"])
    out = torch.nn.functional.nll_loss(torch.tensor(x64), torch.tensor(t), weight=torch.tensor(w64), reduction="sum",
                                       ignore_index=-100).item()
    keep = t != -100
    total = w64[t[keep]].sum()
    scale = np.abs(x64[keep, t[keep]] * w64[t[keep]]).sum()
    for name, ref, mag in (("out", out, scale), ("totalWeight", total, total)):
        got = float(_f(r.arrays[name]))
        assert np.asarray(r.arrays[name]).shape == ()
        assert abs(got - ref) <= UNIT[dtype] * 4 * mag + 2.0**-24 * 4 * n * mag, (name, got, ref)


def test_derived_cross_entropy_grad_scatters_along_the_row(tmp_path):
    """derive_grad of CrossEntropyLoss: the gather's adjoint is a scatter-add along the row (opgen.ir.autodiff),
    which the rows family lowers as where(lane == target, g, 0); the kernel's Kernel IR on the interpreter (the
    emulation's fault rules; the rows family's C++ of the same lowering is built by the derived_gen tests) equals
    torch autograd of cross_entropy (float64, weights, ignored rows) on a tail over the cores."""
    import torch

    (tmp_path / "derived").mkdir()
    (tmp_path / "cross_entropy_loss.py").write_text((EX / "cross_entropy_loss.py").read_text())
    path = tmp_path / "derived" / "ce_grad.py"
    path.write_text('from opgen.dsl import derive_grad\n\nspec = derive_grad("../cross_entropy_loss.py", '
                    '"CrossEntropyLossGradDerived", aclnn="aclnnCrossEntropyLossGradDerived", wrt=["input"], '
                    'grads={"loss": "gradLoss"}, names={"input": "xGrad"})\n')
    x, t, w = _ce_inputs(53, 70, 3)
    g = np.random.default_rng(5).normal(0.0, 1.0, 53).astype(np.float32)
    r = run_check(str(path), {"input": x, "target": t, "weight": w, "gradLoss": g}, dtypes={"T": "float32"},
                  progress=False, engine="kir")
    assert not r.faults and r.passed, (r.faults[:3], {k: v.to_json() for k, v in r.outputs.items()})
    want = _torch_grad(lambda input, weight: torch.nn.functional.cross_entropy(
        input, torch.tensor(t), weight=weight, reduction="none", ignore_index=-100),
        {"input": x, "weight": w}, ["input"], g)["input"]
    got = _f(r.arrays["xGrad"])
    assert np.all(np.abs(got - want) <= _bound(want, "float32", 70, np.abs(g * 2.0)[:, None])), \
        float(np.abs(got - want).max())


def test_one_hot_kernel_gives_zero_rows_for_indices_outside_the_classes(examples_gen):
    """OneHot (examples/specs/one_hot.py) generated and its emulated kernel against NumPy: out[n, c] = on_value
    where self[n] == c, else off_value; indices -1 and num_classes (and one far past it) match no class, so their
    rows are all off_value (zero with the defaults). The values are exact (a select of two fp32 constants)."""
    idx = np.array([0, 3, -1, 9, 10, 5, 10, 2, -1, 1000, 7], np.int64)
    for attrs in ({"num_classes": 10}, {"num_classes": 10, "on_value": 2.5, "off_value": -0.75}):
        r = run_check(str(EX / "one_hot.py"), {"self": idx}, attrs, gen_dir=examples_gen, progress=False)
        assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items()})
        on, off = attrs.get("on_value", 1.0), attrs.get("off_value", 0.0)
        want = np.where(np.arange(10)[None, :] == idx[:, None], on, off).astype(np.float32)
        got = np.asarray(r.arrays["out"])
        assert got.dtype == np.float32 and got.shape == (11, 10)
        np.testing.assert_array_equal(got, want)
        assert np.all(got[[2, 4, 6, 8, 9]] == off)


def test_where_of_two_numbers_kernel_matches_numpy(tmp_path):
    """b.where(cond, 1.0, 0.0) and b.where(cond, 2, -1) (tests/test_examples_interp.py WHERE_NUMBERS): the generated
    kernel, emulated, gives NumPy's one-hot of the indices (exact), -1 and depth rows all the else value."""
    from test_examples_interp import WHERE_NUMBERS

    from opgen.codegen import write_ops

    p = tmp_path / "one_hot_d.py"
    p.write_text(WHERE_NUMBERS)
    write_ops([str(p)], tmp_path / "gen")
    idx = np.array([0, 4, -1, 2, 5, 1, 3, -1, 9], np.int32)
    r = run_check(str(p), {"self": idx}, {"depth": 5}, gen_dir=tmp_path / "gen", progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items()})
    hit = np.arange(5)[None, :] == idx[:, None]
    np.testing.assert_array_equal(np.asarray(r.arrays["out"]), np.where(hit, 1.0, 0.0).astype(np.float32))
    np.testing.assert_array_equal(np.asarray(r.arrays["sign"]), np.where(hit, 2.0, -1.0).astype(np.float32))


def test_every_tiling_key_macro_a_ut_names_is_defined_by_its_tiling_key_header(examples_gen):
    """The emitted UTs (tests/ut/op_host/*_tiling.cpp, tests/ut/op_kernel/*.cpp) name the tiling key their case runs
    by its macro; every such macro is one op_kernel/<op>_tiling_key.h defines. A spec whose shape forms select the
    class (AscendQuantV2's and QuantBatchMatmulV3's scale [N] / [1]) has a form digit in its macros
    (`_A<a>_F<f>_D<d>_S<s>`): its UTs once named `_A<a>_D<d>_S<s>`, which no header defines (a compile error the CPU
    emulation does not see: the UT sources compile only against CANN's UT frameworks)."""
    import re

    named = 0
    for pkg in sorted(p for p in Path(examples_gen).iterdir() if (p / "op_kernel").is_dir()):
        defined = set()
        for h in (pkg / "op_kernel").glob("*_tiling_key.h"):
            defined |= set(re.findall(r"#define\s+(\w+_TILING_KEY_\w+)\s", h.read_text()))
        for src in sorted((pkg / "tests" / "ut").rglob("*.cpp")):
            for m in set(re.findall(r"\b(\w+_TILING_KEY_A\w+)\b", src.read_text())):
                named += 1
                assert m in defined, (pkg.name, src.name, m)
    assert named > 50
