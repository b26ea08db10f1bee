"""An output holding one value broadcast to every row (`b.const(v).broadcast_to([Bd])`, what the interpreter advises
for a constant output; an attribute or a dim's value broadcast alike) in the rows family: written per row as a
per-row statistic is (its stage set per row by the scalar unit, cast and copied out with the rows' batch, tails
included); a value broadcast to the rows' own shape by a Duplicate and the row store. Refused before ('output s is a
scalar') although interpret ran it (a new user's report, /work/notes/nu3-bugs B3). Values against float64 NumPy
written here: the Kernel IR engine (fast) and the emulated kernel (slow)."""

from __future__ import annotations

import shutil

import ml_dtypes
import numpy as np
import pytest

from opgen.check import run_check
from opgen.kernel.family import NoKernel
from opgen.registry import load_spec

SPEC = '''
from opgen.dsl import A2, OpSpec, bf16, f16, f32

spec = OpSpec("ConstOut", aclnn="aclnnConstOut", socs=(A2,), round="rint")
Bd = spec.variadic("Bd", max_rank=3)
H = spec.dim("H", max=8192)
(T,) = spec.dtype_vars("T")
spec.input("x", T, [Bd, H])
spec.attr("eps", float, 0.5)
spec.output("y", T, [Bd, H])
spec.output("s", f32, [Bd])
spec.output("h", T, [Bd])
spec.output("f", T, [Bd, H])
spec.output("m", f32, [Bd])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, x, eps):
    return {"y": x * 2.0, "s": (b.const(1.0) + eps).broadcast_to([Bd]),
            "h": b.cast((b.const(1.0) / 3.0).broadcast_to([Bd]), T, round="rint"),
            "f": b.cast(b.const(-3.0).broadcast_to([Bd, H]), T, round="rint"),
            "m": x.f32().mean(-1).reshape([Bd])}
'''

NP = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("constout") / "const_out.py"
    p.write_text(SPEC)
    return p


def _check(spec_path, shape, dt, eps, **kw):
    """run_check of the spec on random x of `shape` and dtype `dt`; asserts each output against float64 NumPy."""
    rng = np.random.default_rng(sum(shape))
    x = rng.uniform(-2, 2, shape).astype(NP[dt])
    r = run_check(str(spec_path), inputs={"x": x}, attrs={"eps": eps}, dtypes={"T": dt}, progress=False, **kw)
    assert r.passed and not r.faults, r.faults[:2]
    x64 = np.asarray(x, np.float64)
    rows = shape[:-1]
    got = {k: np.asarray(r.arrays[k], np.float64) for k in ("y", "s", "h", "f", "m")}
    assert got["s"].shape == rows and np.all(got["s"] == np.float32(1.0 + eps))   # fp32 1 + eps, every row
    third = np.float64(np.asarray(np.float32(1.0) / np.float32(3.0)).astype(NP[dt]))   # fp32 1/3 rounded to T
    assert got["h"].shape == rows and np.all(got["h"] == third)
    assert got["f"].shape == shape and np.all(got["f"] == -3.0)
    assert np.array_equal(got["y"], 2.0 * x64)   # exact: a doubling
    assert np.allclose(got["m"], x64.mean(-1), rtol=0, atol=2e-6)


@pytest.mark.parametrize("shape, dt", [((7, 33), "float32"), ((3, 5, 1031), "float16"), ((4099, 16), "bfloat16"),
                                       ((1, 8000), "float32")])
def test_a_broadcast_value_output_kernel_ir(spec_path, shape, dt):
    """Rows not a multiple of the cores or of a batch of rows (4099), one row, long rows: each row's values."""
    _check(spec_path, shape, dt, 0.25, engine="kir")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_a_broadcast_value_output_emulated(spec_path, tmp_path):
    from opgen.codegen import write_ops

    write_ops([str(spec_path)], tmp_path)
    _check(spec_path, (2, 1027, 40), "float16", -0.75, gen_dir=tmp_path)


@pytest.mark.parametrize("out, body, words", [
    ('spec.output("c", f32, [H])', 'b.const(1.0).broadcast_to([H])',
     "output c is one value broadcast to [H]; the rows family writes a broadcast value as rows [*Bd, H] or one per "
     "row [*Bd] only"),
    ('spec.output("c", f16, [Bd])', 'b.cast(b.const(1.0), f16, round="rint").broadcast_to([Bd])',
     "a cast to f16 of a scalar that a computation or a broadcast reads; the rows kernel rounds row values only: "
     "for an output, broadcast first and cast the broadcast"),
])
def test_a_broadcast_the_family_does_not_write_is_refused_in_the_users_terms(tmp_path, out, body, words):
    text = (SPEC.replace('spec.output("m", f32, [Bd])', out)
            .replace('"m": x.f32().mean(-1).reshape([Bd])}', f'"c": {body}}}'))
    p = tmp_path / "bad.py"
    p.write_text(text)
    spec = load_spec(str(p))
    from opgen.tiling.pipeline import kernel_build

    with pytest.raises(NoKernel) as ei:
        kernel_build(spec)
    assert words in str(ei.value) and "bad.py:" in str(ei.value), str(ei.value)
