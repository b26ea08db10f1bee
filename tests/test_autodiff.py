"""derive_grad (opgen.dsl.grad) and the reverse-mode rules (opgen.ir.autodiff): derived backward specs interpreted
in float64 against torch autograd of the forward (written here in torch, independently of the spec), the derived
AdaLayerNormGrad against the hand-written one, the rules one op at a time, and the errors of bad arguments."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from opgen.errors import SpecError
from opgen.interp import interpret
from opgen.registry import load_spec

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "specs"
DER = EX / "derived"
RNG = np.random.default_rng(25)


def _t(a, grad=False):
    return torch.tensor(np.asarray(a, dtype=np.float64), dtype=torch.float64, requires_grad=grad)


def _autograd(fn, inputs: dict, wrt, dy):
    """{name: d sum(fn(**inputs) * dy) / d name} by torch autograd in float64."""
    ts = {k: _t(v, k in wrt) for k, v in inputs.items()}
    out = fn(**ts)
    out.backward(_t(dy))
    return {k: ts[k].grad.numpy() for k in wrt}


def _close(got, want, saved=False):
    """float64 agreement; `saved`: the inputs include fp32 statistics (rstd, mean: an input declared f32 is
    rounded to fp32 when bound), which perturb the result by a few units of fp32 rounding (2^-24)."""
    rtol, atol = (1e-10, 1e-12) if not saved else (2e-6, 2e-6 * float(np.abs(want).max(initial=1.0)))
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=rtol, atol=atol)


def _f32(a):
    return np.asarray(a, dtype=np.float32)


@pytest.mark.parametrize("shape", [(3, 8), (2, 3, 5), (1, 1)])
def test_rms_norm_grad_against_autograd(shape):
    x, gamma, dy = _f32(RNG.normal(size=shape)), _f32(RNG.normal(size=shape[-1:])), _f32(RNG.normal(size=shape))
    eps = 1e-6

    def fwd(x, gamma):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * gamma

    want = _autograd(fwd, {"x": x, "gamma": gamma}, ["x", "gamma"], dy)
    rstd = 1.0 / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + eps)
    got = interpret(str(DER / "rms_norm_grad.py"), {"dy": dy, "x": x, "gamma": gamma, "rstd": rstd},
                    mode="exact")
    _close(got["dx"], want["x"], saved=True)
    _close(got["dgamma"], want["gamma"], saved=True)


def test_rms_norm_grad_reuses_saved_rstd():
    """The derived graph reads the saved rstd and never recomputes it (no rsqrt, no epsilon)."""
    spec = load_spec(str(DER / "rms_norm_grad.py"))
    assert [i.name for i in spec.inputs] == ["dy", "x", "gamma", "rstd"]
    assert [o.name for o in spec.outputs] == ["dx", "dgamma"]
    assert not spec.attrs
    g = spec.graph(spec.keys()[0])
    assert not any(n.op in ("rsqrt", "sqrt") for n in g.nodes)
    assert any("rstd" in n.inputs for n in g.nodes)


@pytest.mark.parametrize("shape", [(4, 7), (2, 2, 3)])
def test_softmax_grad_against_autograd(shape):
    """The derived SoftmaxGrad (y saved: aclnnSoftmaxBackward's dy and y) against torch autograd of softmax, y given
    as softmax(x) rounded to fp32 (so within fp32 rounding)."""
    x, dy = _f32(RNG.normal(size=shape) * 3), _f32(RNG.normal(size=shape))
    want = _autograd(lambda x: torch.softmax(x, -1), {"x": x}, ["x"], dy)
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    y = _f32(e / e.sum(-1, keepdims=True))
    got = interpret(str(DER / "softmax_grad.py"), {"dy": dy, "y": y}, mode="exact")
    _close(got["dx"], want["x"], saved=True)


@pytest.mark.parametrize("shape", [(3, 6), (2, 2, 5)])
def test_layer_norm_grad_against_autograd(shape):
    h = shape[-1]
    x, dy = _f32(RNG.normal(size=shape)), _f32(RNG.normal(size=shape))
    gamma, beta = _f32(RNG.normal(size=h)), _f32(RNG.normal(size=h))
    eps = 1e-5

    def fwd(x, gamma, beta):
        return torch.nn.functional.layer_norm(x, (h,), gamma, beta, eps)

    want = _autograd(fwd, {"x": x, "gamma": gamma, "beta": beta}, ["x", "gamma", "beta"], dy)
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x64 - mean) ** 2).mean(-1, keepdims=True) + eps)
    got = interpret(str(DER / "layer_norm_grad.py"),
                    {"dy": dy, "x": x, "gamma": gamma, "mean": mean, "rstd": rstd}, mode="exact")
    _close(got["pd_x"], want["x"], saved=True)
    _close(got["pd_gamma"], want["gamma"], saved=True)
    _close(got["pd_beta"], want["beta"], saved=True)


@pytest.mark.parametrize("shape, dim", [((3, 8), -1), ((2, 2, 2), -1), ((6, 4, 3), 0), ((3, 4, 5), 1)])
def test_swiglu_grad_against_autograd(shape, dim):
    """The derived SwiGluGrad halving the last, the first or the second axis (the forward's dim picks x's shape)."""
    half = list(shape)
    half[dim] //= 2
    x, dy = _f32(RNG.normal(size=shape)), _f32(RNG.normal(size=tuple(half)))

    def fwd(x):
        a, g = x.chunk(2, dim)
        return torch.nn.functional.silu(a) * g

    want = _autograd(fwd, {"x": x}, ["x"], dy)
    got = interpret(str(DER / "swiglu_grad.py"), {"dy": dy, "x": x}, {"dim": dim}, mode="exact")
    _close(got["dx"], want["x"])


@pytest.mark.parametrize("shape", [(5,), (2, 3, 4), ()])
def test_gelu_grad_against_autograd(shape):
    x, dy = _f32(RNG.normal(size=shape) * 2), _f32(RNG.normal(size=shape))
    want = _autograd(lambda x: torch.nn.functional.gelu(x, approximate="tanh"), {"x": x}, ["x"], dy)
    got = interpret(str(DER / "gelu_grad.py"), {"grad_output": dy, "self": x}, mode="exact")
    _close(got["grad_input"], want["x"])


# AdaLayerNormGrad: derived from AdaLayerNormV2 vs the hand-written spec, and vs torch autograd ------------------

ADA = [(sf, w, bias) for sf in ("row", "bcast") for w in (True, False) for bias in (True, False)]


@pytest.mark.parametrize("form,weight,bias", ADA)
def test_ada_layer_norm_grad_derived_equals_hand_written(form, weight, bias):
    bd, s, h = (2,), 3, 8
    x, dy = _f32(RNG.normal(size=bd + (s, h))), _f32(RNG.normal(size=bd + (s, h)))
    sshape = bd + (h,) if form == "row" else bd + (1, h)
    scale = _f32(RNG.normal(size=sshape))
    gamma = _f32(RNG.normal(size=h)) if weight else None
    beta = _f32(RNG.normal(size=h)) if bias else None
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x64 - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
    hand = interpret(str(ROOT / "specs" / "ada_layer_norm_grad.py"),
                     {"dy": dy, "x": x, "rstd": rstd, "mean": mean, "scale": scale, "gamma": gamma, "beta": beta},
                     mode="exact")
    shift = _f32(np.zeros(sshape))
    got = interpret(str(DER / "ada_layer_norm_grad.py"),
                    {"dy": dy, "x": x, "scale": scale, "shift": shift, "weight": gamma, "bias": beta, "mean": mean,
                     "rstd": rstd}, mode="exact")

    def fwd(x, scale, shift, weight=None, bias=None):
        y = torch.nn.functional.layer_norm(x, (h,), weight, bias, 1e-5)
        sc = scale.reshape(bd + (1, h)) if form == "row" else scale
        sh = shift.reshape(bd + (1, h)) if form == "row" else shift
        return y * (1 + sc) + sh

    ins = {"x": x, "scale": scale, "shift": shift}
    wrt = ["x", "scale", "shift"]
    if weight:
        ins["weight"], wrt = gamma, wrt + ["weight"]
    if bias:
        ins["bias"], wrt = beta, wrt + ["bias"]
    want = _autograd(fwd, ins, wrt, dy)
    pairs = [("pd_x", "x"), ("pd_scale", "scale"), ("pd_shift", "shift")]
    pairs += [("pd_gamma", "weight")] if weight else []
    pairs += [("pd_beta", "bias")] if bias else []
    for out, name in pairs:
        _close(got[out], want[name], saved=True)
        if out in hand:   # the hand-written formula assumes mean(z) = 0 and mean(z^2) = 1, which fp32 statistics
            _close(got[out], np.asarray(hand[out], dtype=np.float64), saved=True)   # meet to fp32 rounding


# the rules one op at a time: small forwards built here, differentiated, interpreted in float64 ----------------

def _forward(name, inputs: dict, body, out_shape, dims="N M K", idx=()):
    """A forward OpSpec of f32 inputs {name: shape} (i64 for names in idx) with one output y."""
    from opgen.dsl import A2, OpSpec, f32, i64

    spec = OpSpec(name, aclnn=f"aclnn{name}", socs=(A2,))
    syms = dict(zip(dims.split(), spec.dims(dims)))
    for k, shape in inputs.items():
        spec.input(k, i64 if k in idx else f32, [syms[d] for d in shape])
    spec.output("y", f32, [syms[d] for d in out_shape])
    spec.body_fn = body
    spec._body_loc = spec.loc
    return spec.finish(), syms


def _derive(fwd, wrt):
    from opgen.dsl import derive_grad

    return derive_grad(fwd, fwd.name + "Grad", aclnn=f"aclnn{fwd.name}Grad", wrt=wrt, grads={"y": "dy"},
                       names={x: "d_" + x for x in wrt}).finish()


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_rule(ta, tb):
    def body(b, a, c):
        return {"y": b.matmul(a, c, transpose_a=ta, transpose_b=tb)}

    fwd, _ = _forward("Mm", {"a": "KM" if ta else "MK", "c": "NK" if tb else "KN"}, body, "MN")
    a = RNG.normal(size=(3, 4) if ta else (4, 3))
    c = RNG.normal(size=(5, 3) if tb else (3, 5))
    dy = RNG.normal(size=(4, 5))

    def f(a, c):
        return (a.T if ta else a) @ (c.T if tb else c)

    got = interpret(_derive(fwd, ["a", "c"]), {"dy": _f32(dy), "a": _f32(a), "c": _f32(c)}, mode="exact")
    x = {k: np.asarray(v, dtype=np.float32).astype(np.float64) for k, v in (("a", a), ("c", c), ("dy", dy))}
    want = _autograd(f, {"a": x["a"], "c": x["c"]}, ["a", "c"], x["dy"])
    _close(got["d_a"], want["a"])
    _close(got["d_c"], want["c"])


def test_gather_and_scatter_add_rules():
    """gather's adjoint adds repeated indices (scatter_add); scatter_add's adjoint gathers."""
    def body(b, x, idx, s):
        return {"y": b.gather(x, idx, axis=0) * b.gather(b.scatter_add(idx, s, axis=0, size=x.shape[0]), idx, axis=0)}

    fwd, _ = _forward("Gs", {"x": "NM", "idx": "K", "s": "KM"}, body, "KM", idx=("idx",))
    x, s, dy = _f32(RNG.normal(size=(4, 3))), _f32(RNG.normal(size=(6, 3))), _f32(RNG.normal(size=(6, 3)))
    idx = np.array([0, 2, 2, 3, 0, 2])
    it = torch.tensor(idx)

    def f(x, s):
        sc = torch.zeros(4, 3, dtype=torch.float64).index_add(0, it, s)
        return x[it] * sc[it]

    want = _autograd(f, {"x": x, "s": s}, ["x", "s"], dy)
    got = interpret(_derive(fwd, ["x", "s"]), {"dy": dy, "x": x, "idx": idx, "s": s}, mode="exact")
    _close(got["d_x"], want["x"])
    _close(got["d_s"], want["s"])


def test_view_rules_permute_concat_slices():
    """permute, concat, a strided slice and two one-column slices that do not tile the axis."""
    def body(b, x, w):
        t = b.concat([x.permute(1, 0), w], axis=0)          # [M + K, N]
        n = t.shape[1]
        return {"y": t.slice(1, 0, n, step=2) * 2.0 + t.slice(1, 1, 2) - t.slice(1, 0, 1) * t.slice(1, 0, 1)}

    from opgen.dsl import A2, OpSpec, f32

    fwd = OpSpec("Vw", aclnn="aclnnVw", socs=(A2,))
    N, M, K = fwd.dims("N M K", min=2)
    fwd.input("x", f32, [N, M])
    fwd.input("w", f32, [K, N])
    fwd.output("y", f32, [M + K, (N + 1) // 2])
    fwd.body_fn, fwd._body_loc = body, fwd.loc
    fwd.finish()
    x, w, dy = _f32(RNG.normal(size=(5, 3))), _f32(RNG.normal(size=(2, 5))), _f32(RNG.normal(size=(5, 3)))

    def f(x, w):
        t = torch.cat([x.T, w], 0)
        return t[:, 0::2] * 2 + t[:, 1:2] - t[:, 0:1] * t[:, 0:1]

    want = _autograd(f, {"x": x, "w": w}, ["x", "w"], dy)
    got = interpret(_derive(fwd, ["x", "w"]), {"dy": dy, "x": x, "w": w}, mode="exact")
    _close(got["d_x"], want["x"])
    _close(got["d_w"], want["w"])


def test_elementwise_rules_against_autograd():
    def body(b, x, w):
        ax = b.abs(x)
        u = b.where(x > 0.0, b.log(ax + 1.0) * b.sqrt(b.abs(w) + 1.0), b.recip(x * x + 1.0))
        v = b.rsqrt(w * w + 2.0) / (b.exp(-x) + 1.0) - w
        return {"y": b.maximum(u, v) + b.minimum(u, 0.5 * v)}

    fwd, _ = _forward("Ew", {"x": "NM", "w": "M"}, body, "NM")
    x, w, dy = _f32(RNG.normal(size=(5, 4))), _f32(RNG.normal(size=4)), _f32(RNG.normal(size=(5, 4)))

    def f(x, w):
        u = torch.where(x > 0, torch.log(x.abs() + 1) * torch.sqrt(w.abs() + 1), 1 / (x * x + 1))
        v = torch.rsqrt(w * w + 2) / (torch.exp(-x) + 1) - w
        return torch.maximum(u, v) + torch.minimum(u, 0.5 * v)

    want = _autograd(f, {"x": x, "w": w}, ["x", "w"], dy)
    got = interpret(_derive(fwd, ["x", "w"]), {"dy": dy, "x": x, "w": w}, mode="exact")
    _close(got["d_x"], want["x"])
    _close(got["d_w"], want["w"])


def test_maximum_minimum_ties_split_half_as_torch():
    """Ties of maximum/minimum split the adjoint half-half between the operands (torch.maximum / torch.minimum's
    rule), checked against torch autograd; the other elements go to the larger (smaller) operand."""
    def body(b, a, c):
        return {"y": b.maximum(a, c) + 3.0 * b.minimum(a, c)}

    fwd, _ = _forward("Mx", {"a": "N", "c": "N"}, body, "N")
    a = _f32([1.0, 2.0, 3.0, -1.0])
    c = _f32([1.0, 5.0, 3.0, -2.0])
    dy = _f32([1.0, 2.0, 1.0, 1.0])
    got = interpret(_derive(fwd, ["a", "c"]), {"dy": dy, "a": a, "c": c}, mode="exact")
    want = _autograd(lambda a, c: torch.maximum(a, c) + 3.0 * torch.minimum(a, c), {"a": a, "c": c}, ["a", "c"], dy)
    np.testing.assert_array_equal(want["a"], [2.0, 6.0, 2.0, 1.0])     # hand-counted: (1 + 3) / 2 at the ties
    _close(got["d_a"], want["a"])
    _close(got["d_c"], want["c"])


def test_reduce_rules_max_ties_mean_sum_broadcast():
    """max shares the adjoint evenly among ties (torch.amax); mean/sum over several axes; broadcast_to."""
    def body(b, x, w):
        m = x.max(-1)                                          # [N, 1]
        s = (x * w.broadcast_to([x.shape[0], w.shape[0]])).mean((0, 1), keepdims=False)
        return {"y": (m * x).sum(0, keepdims=False) + s}

    fwd, _ = _forward("Rd", {"x": "NM", "w": "M"}, body, "M")
    x = _f32([[1.0, 3.0, 3.0], [2.0, -1.0, 0.5]])
    w, dy = _f32(RNG.normal(size=3)), _f32(RNG.normal(size=3))

    def f(x, w):
        m = x.amax(-1, keepdim=True)
        return (m * x).sum(0) + (x * w).mean()

    want = _autograd(f, {"x": x, "w": w}, ["x", "w"], dy)
    got = interpret(_derive(fwd, ["x", "w"]), {"dy": dy, "x": x, "w": w}, mode="exact")
    _close(got["d_x"], want["x"])
    _close(got["d_w"], want["w"])


# errors ----------------------------------------------------------------------------------------------------

def _rms():
    return load_spec(str(EX / "rms_norm.py"))


@pytest.mark.parametrize("kw,needle", [
    ({"wrt": ["z"]}, "wrt entry 'z' is not an input"),
    ({"wrt": "x"}, "wrt='x' is not a list"),
    ({"names": {"x": "dx"}}, "names= must give one gradient name per wrt entry; missing gamma"),
    ({"grads": {"out": "dy"}}, "'out' is not an output"),
    ({"grads": {}}, "grads= is empty"),
    ({"saved": ["mean"]}, "'mean' is not an output"),
    ({"names": {"x": "dy", "gamma": "dgamma"}}, "name 'dy' is used twice"),
    ({"names": {"x": "d x", "gamma": "dgamma"}}, "name 'd x'"),
    ({"dtypes": {"y": "f32"}}, "dtypes key 'y' is not a gradient output"),
    ({"dim_max": {"Q": 4}}, "dim_max key 'Q' is not a dim"),
    ({"dim_max": {"H": 0}}, "dim_max['H'] = 0 must be an int"),
])
def test_bad_arguments_are_spec_errors(kw, needle):
    from opgen.dsl import derive_grad

    args = dict(aclnn="aclnnRmsNormGrad", wrt=["x", "gamma"], saved=["rstd"], grads={"y": "dy"},
                names={"x": "dx", "gamma": "dgamma"})
    args.update(kw)
    with pytest.raises(SpecError) as e:
        derive_grad(_rms(), "RmsNormGrad", **args)
    assert needle in str(e.value)
    assert "derive_grad" in str(e.value)


def test_op_without_rule_is_refused_at_its_forward_line(monkeypatch):
    from opgen.dsl import derive_grad
    from opgen.ir import autodiff

    monkeypatch.delitem(autodiff.RULES, "rsqrt")
    with pytest.raises(SpecError) as e:
        derive_grad(_rms(), "RmsNormGrad", aclnn="aclnnRmsNormGrad", wrt=["x"], grads={"y": "dy"}, names={"x": "dx"})
    assert "rsqrt has no derivative rule" in str(e.value)
    assert e.value.file.endswith("rms_norm.py")


def test_graph_names_the_forward_line_of_each_gradient_node():
    from opgen.ir.printer import print_graph

    spec = load_spec(str(DER / "rms_norm_grad.py"))
    text = print_graph(spec.graph(spec.keys()[0]), locs=True)
    fwd = (EX / "rms_norm.py").read_text().splitlines()
    line = next(k for k, t in enumerate(fwd, 1) if "b.rsqrt" in t)
    assert f'loc("rms_norm.py":{line})' in text   # the rsqrt's adjoint (-y^3 / 2) is made at the rsqrt's line


def test_derived_spec_digest_covers_the_forward_file(tmp_path):
    """A change of the forward spec changes the derived spec's digest (packages and caches go stale) and is seen
    by the next load."""
    import shutil

    shutil.copy(EX / "rms_norm.py", tmp_path / "rms_norm.py")
    (tmp_path / "derived").mkdir()
    shutil.copy(DER / "rms_norm_grad.py", tmp_path / "derived" / "grad.py")
    first = load_spec(str(tmp_path / "derived" / "grad.py"))
    d1 = first.source_digest
    fwd = tmp_path / "rms_norm.py"
    fwd.write_text(fwd.read_text().replace("x * rstd * gamma", "x * rstd * gamma * 2.0"))
    second = load_spec(str(tmp_path / "derived" / "grad.py"))
    assert second is not first and second.source_digest != d1
    dy, x, g = _f32(np.ones((1, 2))), _f32([[1.0, 2.0]]), _f32([1.0, 1.0])
    r = _f32([[0.5]])
    a = interpret(first, {"dy": dy, "x": x, "gamma": g, "rstd": r}, mode="exact")["dgamma"]
    b = interpret(second, {"dy": dy, "x": x, "gamma": g, "rstd": r}, mode="exact")["dgamma"]
    _close(b, 2 * np.asarray(a, dtype=np.float64))


def test_saved_output_behind_recip_stands_for_its_operand():
    """A forward that divides by std and outputs rstd = recip(std): the derivative takes std as recip(saved rstd),
    never sqrt(var + eps) again, and still equals torch autograd."""
    from opgen.dsl import A2, OpSpec, derive_grad, f32

    def body(b, x, eps):
        mean = x.mean(-1)
        xc = x - mean
        std = b.sqrt((xc * xc).mean(-1) + eps)
        return {"y": xc / std, "mean": mean, "rstd": b.recip(std)}

    fwd = OpSpec("Nd", aclnn="aclnnNd", socs=(A2,))
    N, H = fwd.dims("N H")
    fwd.input("x", f32, [N, H])
    fwd.attr("eps", float, 1e-5)
    fwd.output("y", f32, [N, H])
    fwd.output("mean", f32, [N, 1])
    fwd.output("rstd", f32, [N, 1])
    fwd.body_fn, fwd._body_loc = body, fwd.loc
    fwd.finish()
    spec = derive_grad(fwd, "NdGrad", aclnn="aclnnNdGrad", wrt=["x"], saved=["mean", "rstd"], grads={"y": "dy"},
                       names={"x": "dx"}).finish()
    assert not spec.attrs   # eps is not read
    g = spec.graph(spec.keys()[0])
    assert not any(n.op == "sqrt" for n in g.nodes)
    x, dy = _f32(RNG.normal(size=(3, 6))), _f32(RNG.normal(size=(3, 6)))
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(((x64 - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
    want = _autograd(lambda x: torch.nn.functional.layer_norm(x, (6,), eps=1e-5), {"x": x}, ["x"], dy)
    got = interpret(spec, {"dy": dy, "x": x, "mean": mean, "rstd": rstd}, mode="exact")
    _close(got["dx"], want["x"], saved=True)


@pytest.mark.parametrize("derived,hand", [
    (DER / "rms_norm_grad.py", EX / "rms_norm_grad.py"),
    (DER / "layer_norm_grad.py", EX / "layer_norm_grad.py"),
    (DER / "swiglu_grad.py", EX / "swiglu_grad.py"),
    (DER / "ada_layer_norm_grad.py", ROOT / "specs" / "ada_layer_norm_grad.py"),
])
def test_derived_graph_has_no_more_reductions_or_inputs_than_hand_written(derived, hand):
    """After the pipeline's canonicalize/CSE/DCE the derived graph reduces as often as the hand-written one (the
    reductions set the kernel's passes and GM traffic) and reads no input the hand-written one does without."""
    from opgen.passes.pipeline import optimize

    def reductions(spec):
        g = optimize(spec.graph(spec.keys()[0]))
        return sum(n.op == "reduce" for n in g.nodes), {p.value.name for p in g.params if p.kind == "input"}

    nd, ins_d = reductions(load_spec(str(derived)))
    nh, ins_h = reductions(load_spec(str(hand)))
    assert nd <= nh
    assert len(ins_d) <= len(ins_h) + 1   # + the unread shift of AdaLayerNormGrad's forward (kept for its form)


# NormRopeConcatGrad: derived from NormRopeConcat vs the hand-written spec over the 54 attribute combinations ------

NRC = [(nt, nat, rt, co) for nt in (0, 1, 2) for nat in (0, 1, 2) for rt in (0, 1, 2) for co in (0, 1)]


def _stats(x):
    x = x.astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    return mean, 1.0 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5)


@pytest.mark.slow   # the derivation traces 432 forward specialisations (about 7 s) and the sweep interprets 108 calls
def test_norm_rope_concat_grad_derived_equals_hand_written():
    """The derived NormRopeConcatGrad over the 54 attribute combinations equals the hand-written spec and torch
    autograd of the forward (tests/oracles.norm_rope_concat_grad) in float64."""
    from oracles import norm_rope_concat_grad

    derived = load_spec(str(DER / "norm_rope_concat_grad.py"))
    hand = load_spec(str(ROOT / "specs" / "norm_rope_concat_grad.py"))
    B, Sq, Sk, N, D, R, Seq, Sek = 1, 3, 2, 2, 4, 2, 2, 1
    rng = np.random.default_rng(54)
    ins = {"query": (B, Sq, N, D), "key": (B, Sk, N, D), "encoder_query": (B, Seq, N, D),
           "encoder_key": (B, Sek, N, D), "rope_sin": (R, D), "rope_cos": (R, D)}
    ins = {k: _f32(rng.normal(size=v)) for k, v in ins.items()}
    grads = {"grad_query_output": (B, N, Sq + Seq, D), "grad_key_output": (B, N, Sk + Sek, D),
             "grad_value_output": (B, N, Sk + Sek, D)}
    grads = {k: _f32(rng.normal(size=v)) for k, v in grads.items()}
    for nt, nat, rt, co in NRC:
        common = dict(ins, **grads)
        d_in, h_in = dict(common), dict(common)
        d_in["encoder_value"] = _f32(np.zeros((B, Sek, N, D)))
        for prefix, t, part in (("norm_query", nt, "query"), ("norm_key", nt, "key"),
                                ("norm_added_query", nat, "encoder_query"), ("norm_added_key", nat, "encoder_key")):
            if t >= 1:
                m, r = _stats(ins[part])
                d_in[f"{prefix}_mean"] = h_in[f"{prefix}_mean"] = m
                d_in[f"{prefix}_rstd"] = h_in[f"{prefix}_rstd"] = r
            if t == 2:
                w = _f32(rng.normal(size=D))
                d_in[f"{prefix}_weight"] = h_in[f"{prefix}_weight"] = w
                d_in[f"{prefix}_bias"] = _f32(rng.normal(size=D))
        attrs = {"norm_type": nt, "norm_added_type": nat, "rope_type": rt, "concat_order": co}
        got = interpret(derived, d_in, dict(attrs, is_training=True), mode="exact")
        want = interpret(hand, h_in, attrs, mode="exact")
        assert set(got) == set(want), (attrs, sorted(got), sorted(want))
        for name in want:
            _close(got[name], np.asarray(want[name], dtype=np.float64), saved=True)
        # and torch autograd of the forward at the given statistics (tests/oracles.py, independent of opgen)
        auto = norm_rope_concat_grad(**h_in, **attrs)
        for name in want:
            _close(got[name], auto[name], saved=True)


@pytest.mark.parametrize("op,torch_fn", [("tanh", torch.tanh), ("erf", torch.erf)])
def test_rules_of_math_functions(op, torch_fn):
    """tanh and erf (ops of opgen.ir.ops): differentiated, interpreted, compared with torch autograd."""
    def body(b, x):
        return {"y": b.emit(op, (x * 1.5,)) * x}

    fwd, _ = _forward("Mf" + op.capitalize(), {"x": "N"}, body, "N")
    x, dy = _f32(RNG.normal(size=7)), _f32(RNG.normal(size=7))
    want = _autograd(lambda x: torch_fn(x * 1.5) * x, {"x": x}, ["x"], dy)
    got = interpret(_derive(fwd, ["x"]), {"dy": dy, "x": x}, mode="exact")
    _close(got["d_x"], want["x"])


# -- normalisations: softmax and log-softmax by one rule, the row max's shift without a gradient -----------------

def test_derived_softmax_grad_has_no_adjoint_of_the_row_max(tmp_path):
    """The max subtracted before the softmax carries no gradient (each row of the softmax's adjoint sums to zero):
    SoftmaxV2 differentiated without y saved recomputes y with the forward's two row reductions (max, sum) and adds
    one (sum of dy y), with no compare against the max; with y saved (the example) only the sum of dy y is left."""
    (tmp_path / "softmax.py").write_text((EX / "softmax.py").read_text())
    p = tmp_path / "softmax_grad_x.py"
    p.write_text('from opgen.dsl import derive_grad\n\nspec = derive_grad("softmax.py", "SoftmaxGrad", '
                 'aclnn="aclnnSoftmaxGrad", wrt=["x"], grads={"y": "dy"}, names={"x": "dx"})\n')
    for path, want in ((p, ["max", "sum", "sum"]), (DER / "softmax_grad.py", ["sum"])):
        spec = load_spec(str(path))
        g = spec.graph(spec.keys()[0])
        kinds = sorted(n.attr("kind") for n in g.nodes if n.op == "reduce")
        assert kinds == want, (path.name, kinds)
        assert not any(n.op == "eq" for n in g.nodes)
    x, dy = _f32(RNG.normal(size=(4, 9)) * 3), _f32(RNG.normal(size=(4, 9)))
    got = interpret(load_spec(str(p)), {"dy": dy, "x": x}, mode="exact")["dx"]
    _close(got, _autograd(lambda x: torch.softmax(x, -1), {"x": x}, ["x"], dy)["x"])


def _ce_case(n, c, seed):
    rng = np.random.default_rng(seed)
    x = _f32(rng.normal(size=(n, c)) * 2)
    t = rng.integers(0, c, n).astype(np.int64)
    t[1] = -100                                       # an ignored row
    w = _f32(rng.uniform(0.5, 2.0, c))
    g = _f32(rng.normal(size=n))
    x64 = x.astype(np.float64)
    lp = x64 - x64.max(-1, keepdims=True)
    lp = lp - np.log(np.exp(lp).sum(-1, keepdims=True))
    return x, t, w, g, lp


@pytest.mark.parametrize("weighted, eps", [(False, 0.0), (True, 0.0), (True, 0.2)])
def test_derived_cross_entropy_grad_reads_the_saved_log_prob(weighted, eps):
    """derive_grad of CrossEntropyLoss with the saved log_prob (examples/specs/derived/cross_entropy_loss_grad.py)
    takes CANN's inputs (gradLoss, target, weight, log_prob — not the logits) and equals torch autograd of
    cross_entropy and the hand-written CrossEntropyLossGrad in float64 (weights, label smoothing, an ignored row)."""
    spec = load_spec(str(DER / "cross_entropy_loss_grad.py"))
    assert [i.name for i in spec.inputs] == ["gradLoss", "target", "weight", "log_prob"]
    assert [a.name for a in spec.attrs] == ["ignore_index", "label_smoothing"]   # reduction, z-loss: one value each
    x, t, w, g, lp = _ce_case(6, 9, 4)
    inputs = {"gradLoss": g, "target": t, "log_prob": lp, **({"weight": w} if weighted else {})}
    got = interpret(spec, inputs, {"label_smoothing": eps}, mode="exact")["xGrad"]
    want = _autograd(lambda input, weight: torch.nn.functional.cross_entropy(
        input, torch.tensor(t), weight=weight if weighted else None, reduction="none", ignore_index=-100,
        label_smoothing=eps), {"input": x, "weight": w}, ["input"], g)["input"]
    _close(got, want, saved=True)
    inputs["logProb"] = inputs.pop("log_prob")   # the hand-written grad keeps its own names
    hand = interpret(str(EX / "cross_entropy_loss_grad.py"), inputs, {"labelSmoothing": eps}, mode="exact")["xGrad"]
    np.testing.assert_allclose(got, hand, rtol=1e-12, atol=1e-14)


def test_derived_cross_entropy_grad_with_smoothing_off_ignores_an_infinite_weight_of_an_untargeted_class():
    """The smoothing branch's adjoint under label_smoothing 0 is a masked zero of a scalar condition: it passes
    through the broadcast and the sum with the target's adjoint becomes a select (x + select(c, g, 0) -> select(c,
    x + g, x); docs/design.md "Backward from forward", masked zeros), so an infinite weight of a class no row
    targets meets no 0 * inf: the gradient is finite and torch autograd's (which skips the smoothing term at 0);
    at label_smoothing 0.2 the weight enters the smoothing sum: neither gradient is finite."""
    spec = load_spec(str(DER / "cross_entropy_loss_grad.py"))
    x, t, w, g, lp = _ce_case(6, 9, 4)
    free = sorted(set(range(1, 9)) - set(t.tolist()))   # class 0 is the ignored row's gathered weight
    w = w.copy()
    w[free[-1]] = np.inf
    inputs = {"gradLoss": g, "target": t, "log_prob": lp, "weight": w}
    got = interpret(spec, inputs, {"label_smoothing": 0.0}, mode="exact")["xGrad"]
    want = _autograd(lambda input, weight: torch.nn.functional.cross_entropy(
        input, torch.tensor(t), weight=weight, reduction="none", ignore_index=-100, label_smoothing=0.0),
        {"input": x, "weight": w}, ["input"], g)["input"]
    assert np.isfinite(want).all()
    _close(got, want, saved=True)
    smoothed = interpret(spec, inputs, {"label_smoothing": 0.2}, mode="exact")["xGrad"]
    torch_smoothed = _autograd(lambda input, weight: torch.nn.functional.cross_entropy(
        input, torch.tensor(t), weight=weight, reduction="none", ignore_index=-100, label_smoothing=0.2),
        {"input": x, "weight": w}, ["input"], g)["input"]
    assert not np.isfinite(smoothed).all() and not np.isfinite(torch_smoothed).all()


def test_a_derived_operator_keeps_the_call_examples_attributes_it_declares():
    """The forward's call example (CrossEntropyLoss: N 7, C 37, reduction "none") carries over to the derived
    operator without the attributes it does not declare (reduction: one accepted value, read by no derivative), so
    the derived package's aclnn example binds."""
    fwd = load_spec(str(EX / "cross_entropy_loss.py"))
    assert fwd.example_call_ == {"dims": {"N": 7, "C": 37}, "attrs": {"reduction": "none"}}
    spec = load_spec(str(DER / "cross_entropy_loss_grad.py"))
    assert spec.example_call_ == {"dims": {"N": 7, "C": 37}, "attrs": {}}


def test_derived_grad_of_a_saved_softmax_reads_only_dy_and_y():
    """SoftmaxV2 differentiated with y saved (examples/specs/derived/softmax_grad.py): the derived operator is
    aclnnSoftmaxBackward's (gradOutput, output), dx = y (dy - sum(dy y)), and equals torch autograd of softmax in
    float64 (y given as softmax(x) rounded to fp32, so within fp32 rounding)."""
    spec = load_spec(str(DER / "softmax_grad.py"))
    assert [i.name for i in spec.inputs] == ["dy", "y"]
    x, dy = _f32(RNG.normal(size=(5, 13)) * 3), _f32(RNG.normal(size=(5, 13)))
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    y = _f32(e / e.sum(-1, keepdims=True))
    got = interpret(spec, {"dy": dy, "y": y}, mode="exact")["dx"]
    want = _autograd(lambda x: torch.softmax(x, -1), {"x": x}, ["x"], dy)["x"]
    _close(got, want, saved=True)


SHIFTS = '''
from opgen.dsl import A2, OpSpec, f32

spec = OpSpec("ShiftProbe", aclnn="aclnnShiftProbe", socs=(A2,))
N = spec.dim("N")
C = spec.dim("C")
spec.input("x", f32, [N, C])
spec.output("y", f32, [N, C])
spec.output("s", f32, [N, 1])


@spec.body
def _(b, x):
    z = x - {shift}
    e = b.exp(z)
    s = e.sum(-1)
    return {{"y": z - b.log(s){tail}, "s": s}}
'''


@pytest.mark.parametrize("shift, seed_s, tail, free", [
    ("x.max(-1)", False, "", True),             # a per-row shift under a log-softmax only: no adjoint
    ("x.max(0)", False, "", False),             # constant along the other axis: the shift's adjoint stays
    ("x.max(-1)", True, "", False),             # the exp-sum is an output with its own gradient: stays
    ("x.max(-1)", False, " + 0.5 * z", False),  # the shifted value read outside the normalisation: stays
])
def test_the_shift_rule_only_applies_where_it_is_exact(tmp_path, shift, seed_s, tail, free):
    """The row shift loses its adjoint only when it is constant along the normalised axis and the shifted value is
    read by nothing but the normalisation; otherwise the ordinary rules run. Each against torch autograd."""
    (tmp_path / "shift_probe.py").write_text(SHIFTS.format(shift=shift, tail=tail))
    grads = '{"y": "dy", "s": "ds"}' if seed_s else '{"y": "dy"}'
    p = tmp_path / "shift_probe_grad.py"
    p.write_text(f'from opgen.dsl import derive_grad\n\nspec = derive_grad("shift_probe.py", "ShiftProbeGrad", '
                 f'aclnn="aclnnShiftProbeGrad", wrt=["x"], grads={grads}, names={{"x": "dx"}})\n')
    spec = load_spec(str(p))
    g = spec.graph(spec.keys()[0])
    assert any(n.op == "eq" for n in g.nodes) == (not free)   # the max's adjoint: a compare against the max
    x, dy, ds = _f32(RNG.normal(size=(4, 6))), _f32(RNG.normal(size=(4, 6))), _f32(RNG.normal(size=(4, 1)))
    axis = -1 if shift == "x.max(-1)" else 0

    def fwd(x):
        z = x - x.amax(axis, keepdim=True)
        s = torch.exp(z).sum(-1, keepdim=True)
        return z - torch.log(s) + (0.5 * z if tail else 0), s

    xt = _t(x, True)
    y, s = fwd(xt)
    ((y * _t(dy)).sum() + ((s * _t(ds)).sum() if seed_s else 0)).backward()
    inputs = {"dy": dy, "x": x, **({"ds": ds} if seed_s else {})}
    _close(interpret(spec, inputs, mode="exact")["dx"], xt.grad.numpy())


@pytest.mark.parametrize("sparse_mode", [0, 2])
def test_derived_flash_attention_grad_is_the_flash_attention_backward(tmp_path, sparse_mode):
    """FlashAttentionScore (examples/specs/flash_attention_score.py) differentiated with its softmax_max,
    softmax_sum (the row max and sum broadcast to 8 lanes: one lane undoes the broadcast) and attention_out saved:
    P is recomputed from the saved statistics (no row max, no exp-sum), dS = P (dP - rowsum(dP P)) with no adjoint
    of the max (the statistics are outputs no gradient is asked of), dK / dV summed over each GQA group; dq, dk, dv
    equal torch autograd of softmax(Q K^T scale + causal mask) V in float64."""
    (tmp_path / "flash_attention_score.py").write_text((EX / "flash_attention_score.py").read_text())
    p = tmp_path / "fa_grad.py"
    p.write_text('from opgen.dsl import derive_grad\n\nspec = derive_grad("flash_attention_score.py", '
                 '"FlashAttentionScoreGrad", aclnn="aclnnFlashAttentionScoreGrad", wrt=["query", "key", "value"], '
                 'saved=["softmax_max", "softmax_sum", "attention_out"], grads={"attention_out": "dy"}, '
                 'names={"query": "dq", "key": "dk", "value": "dv"})\n')
    spec = load_spec(str(p))
    B, N1, N2, S1, S2, D, scale = 2, 4, 2, 5, 7, 16, 0.3
    attrs = {"scale_value": scale, "head_num": N1, "input_layout": "BNSD", "sparse_mode": sparse_mode}
    key = next(k for k in spec.keys() if k.static == tuple(attrs[a.name] for a in spec.static_attrs))
    g = spec.graph(key)
    reds = [(n.attr("kind"), n.attr("axes")) for n in g.nodes if n.op == "reduce"]
    assert ("max", (-1,)) not in reds and reds.count(("sum", (-1,))) == 1, reds
    assert not any(n.op == "eq" for n in g.nodes)   # the max's adjoint would compare against the max
    assert [i.name for i in spec.inputs] == ["dy", "query", "key", "value", "softmax_max", "softmax_sum",
                                             "attention_out"]   # the mask only selects the forward's specialisation
    rng = np.random.default_rng(21)
    f16 = lambda a: _f32(np.asarray(a, np.float16))   # noqa: E731  (T = float16: values the binding keeps)
    q, k, v = (f16(rng.normal(size=s)) for s in ((B, N1, S1, D), (B, N2, S2, D), (B, N2, S2, D)))
    dy = f16(rng.normal(size=(B, N1, S1, D)))
    kk, vv = (np.repeat(t.astype(np.float64), N1 // N2, axis=1) for t in (k, v))
    s = q.astype(np.float64) @ kk.transpose(0, 1, 3, 2) * scale
    if sparse_mode == 2:
        s = np.where(np.arange(S2)[None, :] > np.arange(S1)[:, None], -np.finfo(np.float32).max, s)
    m = s.max(-1, keepdims=True)
    lsum = np.exp(s - m).sum(-1, keepdims=True)
    out = (np.exp(s - m) / lsum) @ vv
    inputs = {"dy": dy, "query": q, "key": k, "value": v, "softmax_max": np.repeat(m, 8, -1),
              "softmax_sum": np.repeat(lsum, 8, -1), "attention_out": out.astype(np.float32)}
    got = interpret(spec, inputs, attrs, {"T": "float16"}, mode="exact")
    causal = torch.tensor(np.arange(S2)[None, :] > np.arange(S1)[:, None])

    def fwd(query, key, value):
        sc = query @ key.repeat_interleave(N1 // N2, 1).transpose(-1, -2) * scale
        if sparse_mode == 2:
            sc = sc.masked_fill(causal, -float(np.finfo(np.float32).max))
        return torch.softmax(sc, -1) @ value.repeat_interleave(N1 // N2, 1)

    want = _autograd(fwd, {"query": q, "key": k, "value": v}, ["query", "key", "value"], dy)
    for name, w in (("dq", "query"), ("dk", "key"), ("dv", "value")):
        _close(got[name], want[w], saved=True)


WIDER = '''
from opgen.dsl import A2, OpSpec, f32

spec = OpSpec("WideNorm", aclnn="aclnnWideNorm", socs=(A2,))
K, N, C = spec.dims("K N C")
spec.input("x", f32, [N, C])
spec.output("y", f32, [K, N, C])


@spec.body
def _(b, x):
    e = b.exp(x)
    return {{"y": {expr}}}
'''


@pytest.mark.parametrize("expr, torch_fn", [
    ("e / e.sum(-1).broadcast_to([K, N, C])", lambda x: torch.softmax(x, -1).expand(2, *x.shape)),
    ("x - b.log(e.sum(-1)).broadcast_to([K, N, C])", lambda x: torch.log_softmax(x, -1).expand(2, *x.shape)),
])
def test_an_exp_sum_broadcast_wider_takes_the_ordinary_rules(tmp_path, expr, torch_fn):
    """A softmax / log-softmax whose exp-sum is broadcast to a larger rank than e is no normalisation of e in place:
    the ordinary rules differentiate it (review finding: the fused rule gave the adjoint the wrong shape); against
    torch autograd."""
    (tmp_path / "wide_norm.py").write_text(WIDER.format(expr=expr))
    p = tmp_path / "wide_norm_grad.py"
    p.write_text('from opgen.dsl import derive_grad\n\nspec = derive_grad("wide_norm.py", "WideNormGrad", '
                 'aclnn="aclnnWideNormGrad", wrt=["x"], grads={"y": "dy"}, names={"x": "dx"})\n')
    x, dy = _f32(RNG.normal(size=(3, 4))), _f32(RNG.normal(size=(2, 3, 4)))
    got = interpret(load_spec(str(p)), {"dy": dy, "x": x}, mode="exact")["dx"]
    _close(got, _autograd(torch_fn, {"x": x}, ["x"], dy)["x"])


def test_a_derived_operator_keeps_the_forwards_device_check_of_an_input_it_takes():
    """The derived CrossEntropyLossGrad takes the forward's target: the forward's device check (0 <= t < C or
    ignore_index) comes with it, blaming target; the ignored index passes."""
    from opgen.errors import ValidationError

    spec = load_spec(str(DER / "cross_entropy_loss_grad.py"))
    assert [(r.param, r.kind, r.kernel) for r in spec.requirements] == [("target", "values", True)]
    _x, t, _w, g, lp = _ce_case(5, 7, 2)
    t[0] = 7
    with pytest.raises(ValidationError) as e:
        interpret(spec, {"gradLoss": g, "target": t, "log_prob": lp}, mode="exact")
    assert str(e.value) == "target: target[0] = 7 is outside [0, 7) and is not ignore_index -100", str(e.value)
    t[0] = -100
    interpret(spec, {"gradLoss": g, "target": t, "log_prob": lp}, mode="exact")


def test_a_kept_check_that_reads_an_input_the_backward_lacks_is_a_spec_error(tmp_path):
    """A forward values check that reads an input the derived operator does not take is a SpecError at the check's
    line (saying to read a dim from env), not a KeyError and not a check silently dropped."""
    (tmp_path / "fwd.py").write_text('''from opgen.dsl import A2, OpSpec, f32, i64

spec = OpSpec("Pick", aclnn="aclnnPick", socs=(A2,))
N, C = spec.dims("N C")
spec.input("x", f32, [N, C])
spec.input("t", i64, [N])
spec.output("y", f32, [N])
spec.check("t", lambda arrays, env, attrs: "out of range" if (arrays["t"] >= arrays["x"].shape[-1]).any() else None,
           on="device")


@spec.body
def _(b, x, t):
    return {"y": b.gather(b.exp(x), t, axis=1)}
''')
    p = tmp_path / "pick_grad.py"
    p.write_text('from opgen.dsl import derive_grad\n\nspec = derive_grad("fwd.py", "PickGrad", aclnn="aclnnPickGrad", '
                 'wrt=["x"], grads={"y": "dy"}, names={"x": "dx"})\n')
    spec = load_spec(str(p))
    assert "x" in [i.name for i in spec.inputs]   # exp's derivative reads x: the check keeps working
    (tmp_path / "fwd.py").write_text((tmp_path / "fwd.py").read_text().replace("b.exp(x)", "x * 2.0"))
    spec = load_spec(str(p))
    assert "x" not in [i.name for i in spec.inputs]
    with pytest.raises(SpecError) as e:
        interpret(spec, {"dy": _f32(np.ones(2)), "t": np.zeros(2, np.int64)}, {}, {}, mode="exact")
    assert "reads input 'x', which PickGrad does not take" in str(e.value) and e.value.line == 8, str(e.value)
