"""A matmul operand computed on the vector cores (docs/design.md "Cube family: an operand computed on the vector
cores"): WeightQuantBatchMatmulV2 (examples/specs/weight_quant_batch_matmul_v2.py) dequantises its int8 weight on
the AIVs, (weight + antiquant_offset) * antiquant_scale rounded to x's dtype, into the workspace the cube reads as
B. Every value is checked against NumPy written here: the dequantised weight as AscendC computes it (int8 -> half ->
fp32 exactly, the add and the multiply in fp32, one round-to-nearest-even to x's dtype by ml_dtypes / NumPy), then
the product and the bias in float64."""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

import numpy as np
import pytest

from opgen.kernel.family import NoKernel
from opgen.registry import load_spec
from opgen.tiling.pipeline import kernel_build

from test_cube import _drop

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "specs" / "weight_quant_batch_matmul_v2.py"
ULP = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}


def _as(a, dt: str) -> np.ndarray:
    """float32 values `a` rounded to nearest even in dtype `dt` (NumPy's float16, ml_dtypes' bfloat16)."""
    import ml_dtypes

    return np.asarray(a, np.float32).astype(np.float16 if dt == "float16" else ml_dtypes.bfloat16)


def _inputs(m: int, k: int, n: int, dt: str, seed: int, offset: bool = True, bias: bool = True, g: int = 0) -> dict:
    """x [m, k] in [-1, 1], an int8 weight [k, n] over the whole range (-128 included), a scale of magnitude
    2^-9 .. 2^-5 with both signs and an offset in [-8, 8] in x's dtype `dt`, each [n] (g 0: per channel) or
    [ceil(k / g), n] (per group of g rows, the last one partial when g does not divide k); the bias [n] fp16
    beside fp16 x, fp32 beside bf16 x (CANN's rule); offset / bias None
    when absent."""
    rng = np.random.default_rng(seed)
    w = rng.integers(-128, 128, (k, n)).astype(np.int8)
    w.flat[0] = -128
    sh = (-(-k // g), n) if g else (n,)
    s = rng.uniform(2.0 ** -9, 2.0 ** -5, sh) * rng.choice([-1.0, 1.0], sh)
    return {"x": _as(rng.uniform(-1, 1, (m, k)), dt), "weight": w, "antiquant_scale": _as(s, dt),
            "antiquant_offset": _as(rng.uniform(-8, 8, sh), dt) if offset else None,
            "bias": (_as(rng.uniform(-1, 1, n), "float16") if dt == "float16" else
                     rng.uniform(-1, 1, n).astype(np.float32)) if bias else None}


def _rows(t, k: int, g: int) -> np.ndarray:
    """A scale or offset as the weight's [k, n] rows read it: [n] broadcast over every row (g 0), [ceil(k / g), n]
    row r // g for weight row r (aclnnWeightQuantBatchMatmulV2's pergroup mode)."""
    t = np.asarray(t, np.float32)
    return t if not g else np.repeat(t, g, axis=0)[:k]


def _ref(x: dict, dt: str | None, g: int = 0) -> np.ndarray:
    """y = x @ ANTIQUANT(weight) + bias (aclnnWeightQuantBatchMatmulV2's formula, ops-nn
    docs/aclnnWeightQuantBatchMatmulV2.md): ANTIQUANT(weight) = (weight + antiquantOffset) * antiquantScale computed
    in fp32 (int8 -> fp32 exact, one fp32 rounding after the add and one after the multiply), rounded to x's dtype
    (the cube's operand type); the product and the bias in float64. dt None: all of it in float64, no rounding."""
    k = np.asarray(x["weight"]).shape[0]
    ft = np.float32 if dt else np.float64
    w = np.asarray(x["weight"], ft)
    if x.get("antiquant_offset") is not None:
        w = w + _rows(x["antiquant_offset"], k, g).astype(ft)
    w = w * _rows(x["antiquant_scale"], k, g).astype(ft)
    w = _as(w, dt).astype(np.float64) if dt else w
    y = np.asarray(x["x"], np.float64) @ w
    if x.get("bias") is not None:
        y = y + np.asarray(x["bias"], np.float64)
    return y


def _close(got, x: dict, dt: str, g: int = 0) -> bool:
    """Within one rounding of the output type of the float64 value, plus the cube's fp32 accumulation (a few 2^-24
    of the sum of |products|)."""
    ref = _ref(x, dt, g)
    got = np.asarray(got, np.float64)
    s = np.abs(_rows(x["antiquant_scale"], np.asarray(x["weight"]).shape[0], g).astype(np.float64))
    mag = np.abs(np.asarray(x["x"], np.float64)) @ ((np.abs(np.asarray(x["weight"], np.float64)) + 8) * s)
    return got.shape == ref.shape and bool(np.all(np.isfinite(got)) and np.all(
        np.abs(got - ref) <= ULP[dt] * np.abs(ref) + 2.0 ** -20 * (mag + 1e-30)))


def _class(u, g: int):
    """The kernel class serving antiquant_group_size `g` (its layout too)."""
    key = next(k for k in u.lowered.programs if dict(zip(("antiquant_group_size",), k.static))["antiquant_group_size"]
               == g)
    return u.lowered.programs[key], u.lowered.extra["layouts"][key]


def test_the_example_computes_its_weight_on_the_vector_cores():
    """The layout reads B as computed from the int8 weight (GemmLayout.pro: the source's fp32 rows, the scale's and
    the offset's columns, their add and multiply, the store rounded to nearest even), guarded by the offset's
    presence; one class per antiquant_group_size, the per-group ones reading the scale's and offset's row of the
    unit's group (pro_group); the AIVs write B to the workspace region "b" and meet in a SyncAll before FLAG_PRO,
    which the AIC waits for before its first panel; the tiling takes baseN a multiple of 32 (int8 rows of baseN bytes
    in UB), never splits K, and cuts B into units of one group each."""
    from opgen.ir.dtypes import parse_dtype
    from opgen.kernel import kir as K
    from opgen.kernel.cube import FLAG_PRO
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import program_inputs

    spec = load_spec(str(SPEC))
    u = kernel_build(spec)
    assert len({id(c) for c in u.lowered.programs.values()}) == 4
    c, lay = _class(u, 0)
    assert lay.b == "weight" and lay.pro_src == "int8_t" and not lay.trans_b and not lay.pro_group
    kinds = [st[0] for st in lay.pro]
    assert kinds[-1] == "store" and lay.pro[-1][2] == "CAST_RINT" and "acc" in kinds
    ops = [st for st in lay.pro if st[0] == "op"]
    # (weight + offset) * scale, CANN's order, when the offset is present (the add's presences only); weight * scale
    # without it: the two presences' steps joined, each guarded
    assert [st[2] for st in ops] == ["add", "mul", "mul"] and ops[1][3][0] == ops[0][1]
    when = dict(zip((st[1] for st in lay.pro), lay.pro_when))
    off = lay.presence.index("antiquant_offset")
    assert when[ops[0][1]] and all(pr[off] for pr in when[ops[0][1]])
    assert when[ops[2][1]] and not any(pr[off] for pr in when[ops[2][1]])
    assert any(g.name == "bGm_" and g.workspace and g.region == "b" for g in c.gms)
    vec = next(s for s in c.process if isinstance(s, K.CoreIf) and s.unit == "vector")
    cube = next(s for s in c.process if isinstance(s, K.CoreIf) and s.unit == "cube")
    body = list(K.walk(vec.body))
    sync = next(i for i, s in enumerate(body) if isinstance(s, K.SyncAll))
    sets = [i for i, s in enumerate(body) if isinstance(s, K.CrossCoreSetFlag) and s.id == FLAG_PRO]
    assert sets and sets[0] > sync and body[sets[0]].mode == 2
    waits = [s for s in K.walk(cube.body) if isinstance(s, K.CrossCoreWaitFlag) and s.id == FLAG_PRO]
    assert len(waits) == 1
    text = K.to_cpp(c)
    assert "Cast(ph" in text and "LocalTensor<int8_t> pi8" in text
    reads = [s for s in K.walk(c.process) if isinstance(s, K.Copy) and isinstance(s.src, K.GmView)
             and s.src.tensor.startswith("pGm")]
    assert reads and not any("grp" in str(s.src.offset) for s in reads)   # per channel: the columns n0 ..
    for g in (32, 64, 128):
        cg, lg = _class(u, g)
        assert lg.pro_group == (str(g), ("antiquant_scale", "antiquant_offset"))
        reads = [s for s in K.walk(cg.process) if isinstance(s, K.Copy) and isinstance(s.src, K.GmView)
                 and s.src.tensor.startswith("pGm")]
        assert reads and all("grp" in str(s.src.offset) for s in reads)   # the unit's group row
    plat = next(p for p in PLATFORMS.values() if p.arch == "dav-2201")
    for (m, k, n), dt, g in itertools.product(((37, 256, 45), (1, 65408, 16), (300, 384, 301)),
                                              ("float16", "bfloat16"), (0, 32, 64, 128)):
        dts = {"X": parse_dtype(dt), "BIAS": parse_dtype("float16" if dt == "float16" else "float32")}
        v = u.tiling.program.evaluate(program_inputs(spec, u.tiling.program, u.tiling.inputs,
                                                     {"M": m, "K": k, "N": n}, dts, plat,
                                                     {"antiquant_group_size": g}))
        assert v["kSplit"] == 1 and v["baseN"] % 32 == 0 and v["fits"] == 1 and v["tilingKey"] % 10 == 1
        assert v["proOff"] * 2 + k * n * 2 <= v["workspaceBytes"]
        assert v["proGroup"] == (g or k) and v["proRows"] >= 1
        # every unit of B once: groups x pieces of at most proRows rows x block columns over the AIVs
        units = (k // v["proGroup"]) * -(-v["proGroup"] // v["proRows"]) * v["nBlocks"]
        assert v["proPieces"] == -(-v["proGroup"] // v["proRows"])
        assert v["proUnitsPerAiv"] * 2 * v["blockDim"] + v["proUnitsTail"] == units


@pytest.mark.parametrize("g", [0, 64])
def test_the_interpreter_equals_the_formula_in_float64(g):
    """`opgen interpret --mode exact` (quantize is the identity there): x @ ((weight + offset) * scale) + bias in
    float64, the scale's and offset's row k // g for weight row k per group."""
    from opgen.interp.run import interpret

    x = _inputs(5, 128, 7, "float16", 9, g=g)
    y = interpret(str(SPEC), {k: v for k, v in x.items() if v is not None}, mode="exact",
                  attrs={"antiquant_group_size": g})["y"]
    ref = _ref(x, None, g)
    assert np.allclose(np.asarray(y, np.float64), ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("offset,bias,g,dims", [(True, True, 0, (37, 50, 45)), (False, False, 0, (37, 50, 45)),
                                                (True, False, 32, (37, 96, 45)), (False, True, 64, (37, 192, 45))])
def test_the_example_on_the_kernel_ir_equals_float64(dt, offset, bias, g, dims):
    """Odd M 37, N 45, K 50 per channel (tails in every unit and block), K 96 / 192 in groups of 32 / 64 rows, the
    offset and the bias present and absent, fp16 and bf16 x, on the Kernel IR interpreter (its race detector checks
    the AIVs' writes of B against the AIC's reads)."""
    from opgen.check import run_check

    x = _inputs(*dims, dt, 5, offset, bias, g)
    r = run_check(str(SPEC), x, {"antiquant_group_size": g}, dtypes={"X": dt}, progress=False, engine="kir")
    assert not r.faults and r.passed
    assert str(r.arrays["y"].dtype) == dt
    assert _close(r.arrays["y"], x, dt, g)


@pytest.mark.parametrize("g,dims", [(0, (300, 333, 301)), (128, (300, 384, 301))])
def test_more_units_than_aivs_on_the_kernel_ir_equals_float64(g, dims):
    """M 300, N 301: 3 x 2 blocks, B in units of several pieces per group (K 333 per channel, 384 in groups of 128),
    tails on both edges, over the AIVs, bf16."""
    from opgen.check import run_check

    x = _inputs(*dims, "bfloat16", 6, g=g)
    r = run_check(str(SPEC), x, {"antiquant_group_size": g}, dtypes={"X": "bfloat16"}, progress=False, engine="kir")
    assert not r.faults and r.passed
    assert _close(r.arrays["y"], x, "bfloat16", g)


@pytest.mark.parametrize("dims,dt,offset,g", [((37, 50, 45), "float16", True, 0),
                                              ((37, 100, 45), "float16", True, 32),
                                              ((1700, 384, 301), "bfloat16", True, 64)])
@pytest.mark.slow
def test_the_example_emulated_equals_float64(examples_gen, dims, dt, offset, g):
    """The emitted C++ on the g++ emulation: odd M / K / N per channel, K 100 in groups of 32 (a last partial group
    of 4 rows), and more blocks than AI Cores (M 1700, N 301:
    14 x 2 blocks on 24 AICs, tails on both edges; B's units over 48 AIVs, K 384 in two L1 panels and six groups of
    64 rows), fp16 and bf16."""
    from opgen.check import run_check

    x = _inputs(*dims, dt, 3, offset, True, g)
    r = run_check(str(SPEC), x, {"antiquant_group_size": g}, dtypes={"X": dt}, gen_dir=examples_gen, progress=False)
    assert not r.faults and r.passed
    assert _close(r.arrays["y"], x, dt, g)
    if dims[0] == 1700:
        assert r.block_dim == 24


@pytest.mark.parametrize("g,k", [(32, 100), (128, 200)])
def test_the_interpreter_takes_a_last_partial_group(g, k):
    """K 100 in groups of 32 (four scale rows, the last one for 4 weight rows) or K 200 in groups of 128 (two rows,
    the second for 72): `opgen interpret --mode exact` equals the float64 formula with row k // g of the scale and
    the offset ([ceil(K / g), N], aclnnWeightQuantBatchMatmulV2's pergroup shape)."""
    from opgen.interp.run import interpret

    x = _inputs(5, k, 7, "float16", 4, g=g)
    assert x["antiquant_scale"].shape == (-(-k // g), 7)
    y = interpret(str(SPEC), {k: v for k, v in x.items() if v is not None}, mode="exact",
                  attrs={"antiquant_group_size": g})["y"]
    ref = _ref(x, None, g)
    assert np.allclose(np.asarray(y, np.float64), ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())


@pytest.mark.parametrize("g,k", [(128, 100), (128, 128), (64, 64), (32, 32)])
def test_a_group_size_of_k_or_more_is_refused(g, k):
    """CANN takes a per-group antiquantGroupSize in [32, K - 1] (aclnnWeightQuantBatchMatmulV2's parameter
    description): a group of all K rows or more is refused naming the attribute and the rule, by the interpreter and
    by the Kernel-IR check (which validates as the aclnn layer does); K = g + 1 is taken."""
    from opgen.check import run_check
    from opgen.dsl.validate import ValidationError
    from opgen.interp.run import interpret

    x = {n: v for n, v in _inputs(5, k, 7, "float16", 4, g=g).items() if v is not None}
    rule = (rf"antiquant_group_size: antiquant_group_size {g} needs more than {g} rows of K: CANN takes a group "
            rf"size in \[32, K - 1\] \(K > {g} with K={k}\)")
    with pytest.raises(ValidationError, match=rule):
        interpret(str(SPEC), x, attrs={"antiquant_group_size": g})
    with pytest.raises(ValidationError, match=rule):
        run_check(str(SPEC), x, {"antiquant_group_size": g}, dtypes={"X": "float16"}, progress=False, engine="kir")
    ok = {n: v for n, v in _inputs(5, g + 1, 7, "float16", 4, g=g).items() if v is not None}
    assert interpret(str(SPEC), ok, attrs={"antiquant_group_size": g})["y"].shape == (5, 7)


@pytest.mark.parametrize("g,dims,dt", [(32, (37, 100, 45), "float16"), (64, (37, 70, 45), "bfloat16"),
                                       (128, (300, 333, 301), "bfloat16")])
def test_a_last_partial_group_on_the_kernel_ir_equals_float64(g, dims, dt):
    """A last group of fewer rows than g: K 100 in groups of 32 (the fourth of 4 rows), K 70 in groups of 64 (6
    rows), K 333 in groups of 128 (77 rows, over 3 x 2 blocks and the AIVs, pieces of a group past its end with no
    rows), the offset and the bias present, on the Kernel IR interpreter against float64; a scale of K // g rows
    (the floor) is refused at the aclnn layer's shape check."""
    from opgen.check import run_check
    from opgen.errors import OpgenError

    x = _inputs(*dims, dt, 7, g=g)
    r = run_check(str(SPEC), x, {"antiquant_group_size": g}, dtypes={"X": dt}, progress=False, engine="kir")
    assert not r.faults and r.passed
    assert _close(r.arrays["y"], x, dt, g)
    short = {**x, "antiquant_scale": x["antiquant_scale"][:dims[1] // g]}
    with pytest.raises(OpgenError, match="antiquant_scale"):
        run_check(str(SPEC), short, {"antiquant_group_size": g}, dtypes={"X": dt}, progress=False, engine="kir")


def test_the_exchange_of_b_is_needed():
    """The class on the Kernel IR interpreter at M 300, K 300, N 70 on 3 AI Cores (3 blocks; B in units over 6 AIVs, fp16,
    offset and bias present) equals float64; deleting the AIVs' SyncAll makes the AIC's read of B a race with
    another AI Core's AIV's write, and deleting the FLAG_PRO set or the AIC's wait faults (a race, a deadlock or a
    set never consumed): the exchange is what orders the computed operand before the cube."""
    import dataclasses

    from opgen.ir.dtypes import parse_dtype
    from opgen.kernel import kir as K
    from opgen.kernel import kir_interp
    from opgen.kernel.cube import FLAG_PRO
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import program_inputs

    spec = load_spec(str(SPEC))
    u = kernel_build(spec)
    cls, _lay = _class(u, 0)
    plat = dataclasses.replace(next(p for p in PLATFORMS.values() if p.aiv == 48 and p.arch == "dav-2201"), aic=3,
                               aiv=6)
    m, k, n = 300, 300, 70
    v = u.tiling.program.evaluate(program_inputs(spec, u.tiling.program, u.tiling.inputs, {"M": m, "K": k, "N": n},
                                                 {"X": parse_dtype("float16"), "BIAS": parse_dtype("float16")},
                                                 plat, None, present=(True, False, False, True)))
    x = _inputs(m, k, n, "float16", 2)

    def launch(c):
        out = np.full(m * n, np.nan, np.float16)
        gm = dict(x, y=out, quant_scale=None, quant_offset=None)
        r = kir_interp.run(c, {f: v[f] for f in c.fields}, gm, v["blockDim"],
                           workspace=np.zeros(v["workspaceBytes"] // 4, np.float32),
                           types={"T": "half", "T1_": "half"}, verify_first=False)
        return r, out.reshape(m, n)

    r, out = launch(cls)
    assert v["blockDim"] == 3 and r.ok, r.faults[:1]
    assert _close(out, x, "float16")
    r, _ = launch(dataclasses.replace(cls, process=_drop(cls.process, lambda s: not isinstance(s, K.SyncAll))))
    assert not r.ok and "race (read-after-write) between cores on GM tensor 'bGm_'" in r.faults[0], r.faults[:1]
    for kind in (K.CrossCoreSetFlag, K.CrossCoreWaitFlag):
        r, _ = launch(dataclasses.replace(cls, process=_drop(cls.process, lambda s: not (
            isinstance(s, kind) and s.id == FLAG_PRO))))
        assert not r.ok and any(w in r.faults[0] for w in ("race (", "deadlock", "never consumed")), r.faults[:1]


def _user_spec(tmp_path, body: str, extra: str = "") -> str:
    """A spec of x f16 [M, K], an int8 weight [K, N], a scale f16 [N], w2 int8 [K, N], s1 f32 [1] whose body returns
    `body` (all of them in scope)."""
    p = tmp_path / "wq.py"
    p.write_text(textwrap.dedent(f'''
        from opgen.dsl import A2, A3, OpSpec, f16, f32, i8
        spec = OpSpec("Wq", aclnn="aclnnWq", socs=(A2, A3), round="rint")
        M = spec.dim("M", max=65535)
        K = spec.dim("K", max=65535)
        N = spec.dim("N", max=65535)
        spec.input("x", f16, [M, K])
        spec.input("weight", i8, [K, N])
        spec.input("scale", f16, [N])
        spec.input("w2", i8, [K, N])
        spec.input("s1", f32, [1])
        spec.output("y", f16, [M, N])
        spec.example_call({{"M": 5, "K": 40, "N": 7}})
        {extra}

        @spec.body
        def _(b, x, weight, scale, w2, s1):
            return {{"y": {body}}}
    '''))
    return str(p)


@pytest.mark.parametrize("body,why", [
    ("b.matmul(x.f32(), b.quantize((weight.f32() + w2.f32()) * scale.f32(), f16, 'rint')).cast(f16, 'rint')",
     "a second [K, N] input"),
    ("b.matmul(x.f32(), b.quantize(weight.f32() * s1, f16, 'rint')).cast(f16, 'rint')",
     "an input of one value ([] / [1]: a per-tensor scale or offset)"),
    ("b.matmul(x.f32(), (weight.f32() * scale.f32())).cast(f16, 'rint')",
     "rounded once to f16 / bf16"),
    ("b.matmul(b.quantize(x.f32() * 2.0, f16, 'rint'), weight.f32() * scale.f32()).cast(f16, 'rint')",
     "the left operand is a mul"),
])
def test_computed_operands_the_kernel_does_not_lower_are_refused_naming_the_rule(tmp_path, body, why):
    """A second source, an input of one value, an operand not rounded to the operands' dtype and a computed left
    operand: one NoKernel line naming the rule, never a kernel."""
    with pytest.raises(NoKernel) as e:
        kernel_build(load_spec(_user_spec(tmp_path, body)))
    assert why in str(e.value), str(e.value)


@pytest.mark.parametrize("rows,extra", [
    ("K // 32", "spec.require((K % 32).eq(0), 'weight', 'K must be a multiple of 32')"), ("(K + 63) // 64", "")])
def test_a_repeated_group_row_input_of_other_than_ceil_k_over_g_rows_is_refused(tmp_path, rows, extra):
    """The kernel reads group row k // g for every k < K, so a repeated input must be declared with ceil(K / g) rows
    ((K + g - 1) // g, which the aclnn layer's shape check guarantees): K // 32 rows (even under a multiple-of
    relation) or the rows of another group size are refused naming the shape to declare."""
    text = open(_user_spec(tmp_path, "b.matmul(x.f32(), b.quantize(weight.f32() * gs.cast(f32).repeat_interleave("
                                      "32, 0, K), f16, 'rint')).cast(f16, 'rint')", extra)).read()
    p = tmp_path / "wqr.py"
    text = text.replace('spec.input("s1", f32, [1])', f'spec.input("s1", f32, [1])\nspec.input("gs", f16, [{rows}, N])')
    text = text.replace("def _(b, x, weight, scale, w2, s1):", "def _(b, x, weight, scale, w2, s1, gs):")
    p.write_text(text)
    with pytest.raises(NoKernel) as e:
        kernel_build(load_spec(str(p)))
    assert "declare it [(K + 31) // 32, N]" in str(e.value), str(e.value)


def _grouped_spec(tmp_path, always: bool) -> str:
    """A spec whose static attribute g (0 or 64) regroups x [K, N] into [K // 64, 64, N] under `(K % 64).eq(0)` required
    when g is 64 only; `always`: the body regroups in both modes."""
    p = tmp_path / "grouped.py"
    p.write_text(textwrap.dedent(f'''
        from opgen.dsl import A2, OpSpec, f32
        spec = OpSpec("Grouped", aclnn="aclnnGrouped", socs=(A2,), round="rint")
        K = spec.dim("K", max=65535)
        N = spec.dim("N", max=65535)
        spec.attr("g", int, 0, choices=(0, 64), static=True)
        spec.input("x", f32, [K, N])
        spec.output("y", f32, [K, N])
        spec.require((K % 64).eq(0), "g", "K must be a multiple of 64", when=lambda a, pr: a["g"] == 64)


        @spec.body
        def _(b, x, g):
            if g or {always}:
                return {{"y": (x.reshape([K // 64, 64, N]) * 2.0).reshape([K, N])}}
            return {{"y": x * 2.0}}
    '''))
    return str(p)


def test_a_relation_of_one_mode_is_assumed_by_that_modes_body_only(tmp_path):
    """require(when=) (docs/design.md "Cube family: an operand computed on the vector cores", the DSL pieces): the
    relation `(K % 64).eq(0)` is not refused as one that cannot hold (K's corner values 1, 2, 3, 65534, 65535 are no
    multiples of 64: the check tries K = 64 too), the reshape [K // 64, 64, N] traces where g is 64 (the relation
    holds there), and a body regrouping also where g is 0 is refused naming the relation to declare."""
    from opgen.errors import SpecError

    spec = load_spec(_grouped_spec(tmp_path, False))
    assert len([spec.graph(k) for k in spec.keys()]) == 2
    spec = load_spec(_grouped_spec(tmp_path, True))
    with pytest.raises(SpecError, match=r"K // 64 is exact only when K % 64 == 0"):
        [spec.graph(k) for k in spec.keys()]


def test_a_computed_operand_rounded_to_another_dtype_than_the_left_operand_is_refused(tmp_path):
    """B rounded to bf16 beside an f16 x: refused naming both dtypes (the cube multiplies one dtype)."""
    body = "b.matmul(x.f32(), b.quantize(weight.f32() * scale.f32(), bf16, 'rint')).cast(f16, 'rint')"
    p = _user_spec(tmp_path, body)
    text = Path(p).read_text().replace("import A2, A3, OpSpec, f16", "import A2, A3, OpSpec, bf16, f16")
    Path(p).write_text(text)
    with pytest.raises(NoKernel, match="rounded to bf16, the left operand is f16"):
        kernel_build(load_spec(p))


def test_a_batched_x_folds_into_m_beside_a_computed_b_on_the_kernel_ir(tmp_path):
    """x [B, M, K] against the computed weight [K, N]: the batch folds into M (one GEMM of [B * M, K]) as it does
    beside an input B; B 3, M 70, K 90, N 45 on the Kernel IR interpreter against float64."""
    from opgen.check import run_check

    p = tmp_path / "wq_fold.py"
    p.write_text(textwrap.dedent('''
        from opgen.dsl import A2, A3, OpSpec, f16, f32, i8
        spec = OpSpec("WqFold", aclnn="aclnnWqFold", socs=(A2, A3), round="rint")
        B = spec.dim("B", max=64)
        M = spec.dim("M", max=65535)
        K = spec.dim("K", max=65535)
        N = spec.dim("N", max=65535)
        spec.input("x", f16, [B, M, K])
        spec.input("weight", i8, [K, N])
        spec.input("antiquant_scale", f16, [N])
        spec.output("y", f16, [B, M, N])
        spec.example_call({"B": 2, "M": 5, "K": 40, "N": 7})


        @spec.body
        def _(b, x, weight, antiquant_scale):
            w = b.quantize(weight.f32() * antiquant_scale.f32(), f16, "rint")
            return {"y": b.matmul(x.f32(), w).cast(f16, "rint")}
    '''))
    u = kernel_build(load_spec(str(p)))
    assert u.lowered.layout.fold == ("B",) and u.lowered.layout.pro
    x = _inputs(3 * 70, 90, 45, "float16", 8, offset=False, bias=False)
    x["x"] = x["x"].reshape(3, 70, 90)
    r = run_check(str(p), {k: x[k] for k in ("x", "weight", "antiquant_scale")}, progress=False, engine="kir")
    assert not r.faults and r.passed
    flat = dict(x, x=x["x"].reshape(210, 90))
    assert _close(np.asarray(r.arrays["y"]).reshape(210, 45), flat, "float16")


@pytest.mark.parametrize("res", [True, False])
def test_an_optional_epilogue_input_beside_a_computed_b_on_the_kernel_ir(tmp_path, res):
    """A computed B with an optional residual [M, N] added on the AIVs after the product: the call without it has no
    vector epilogue (Fixpipe writes y) but still launches mixed (tiling key strategy 1: the AIVs compute B in every
    call), with it the slots' epilogue runs after B's units; M 70, K 90, N 45 fp16 on the Kernel IR against float64."""
    from opgen.check import run_check

    p = tmp_path / "wq_res.py"
    p.write_text(textwrap.dedent('''
        from opgen.dsl import A2, A3, OpSpec, f16, f32, i8
        spec = OpSpec("WqRes", aclnn="aclnnWqRes", socs=(A2, A3), round="rint")
        M = spec.dim("M", max=65535)
        K = spec.dim("K", max=65535)
        N = spec.dim("N", max=65535)
        spec.input("x", f16, [M, K])
        spec.input("weight", i8, [K, N])
        spec.input("antiquant_scale", f16, [N])
        spec.input("residual", f16, [M, N], optional=True)
        spec.output("y", f16, [M, N])
        spec.example_call({"M": 5, "K": 40, "N": 7})


        @spec.body
        def _(b, x, weight, antiquant_scale, residual):
            y = b.matmul(x.f32(), b.quantize(weight.f32() * antiquant_scale.f32(), f16, "rint"))
            if residual is not None:
                y = y + residual.f32()
            return {"y": y.cast(f16, "rint")}
    '''))
    x = _inputs(70, 90, 45, "float16", 12, offset=False, bias=False)
    ins = {k: x[k] for k in ("x", "weight", "antiquant_scale")}
    if res:
        ins["residual"] = _as(np.random.default_rng(1).uniform(-1, 1, (70, 45)), "float16")
    r = run_check(str(p), ins, progress=False, engine="kir")
    assert not r.faults and r.passed and r.tiling_key % 10 == 1
    ref = dict(x, bias=None)
    want = _ref(ref, "float16") + (np.asarray(ins["residual"], np.float64) if res else 0)
    got = np.asarray(r.arrays["y"], np.float64)
    assert np.all(np.abs(got - want) <= 2.0 ** -11 * (np.abs(want) + 1) + 2.0 ** -20 * 90 * 128 * 2.0 ** -5)
