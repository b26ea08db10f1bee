"""The emitted NumPy golden (tests/assets/golden.py) is self-contained and covers every specialisation: it runs in a Python that has only NumPy and ml_dtypes on its path (`python -I -S`, the two packages symlinked
into a temporary directory; `import opgen` is asserted to fail there), and for every specialisation of every spec
(all static attribute values x optional inputs present x shape forms):

- it equals opgen's interpreter in device mode bit for bit (the merged, guarded program computes what each
  specialisation's own graph computes);
- for NormRopeConcat (five static attributes: 432 specialisations) and the examples GeGluV3 (a static attribute)
  and Modulate (shape forms) its float32 outputs match the independent float64 oracles of tests/oracles.py and
  tests/test_examples.py.

The cases are made here (opgen's valid-input maker), the golden runs in the isolated subprocess, and the
comparisons happen back here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from opgen.codegen.golden import GOLDEN_PATH, emit_golden, merged_program
from opgen.dsl.examples import random_inputs
from opgen.interp import interpret
from opgen.ir.dims import Sym, Variadic, as_dim, eval_shape
from opgen.registry import all_specs, load_spec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from oracles import norm_rope_concat_fwd  # noqa: E402

pytestmark = pytest.mark.slow   # builds C++ or runs many processes (the fast tier: -m "not slow")

EXAMPLES = ROOT / "examples" / "specs"

DRIVER = textwrap.dedent('''
    import importlib.util, json, sys
    sys.path.insert(0, SITE)
    try:
        import opgen  # noqa: F401
    except ImportError:
        pass
    else:
        raise SystemExit("opgen is importable in the isolated interpreter")
    import numpy as np
    import ml_dtypes

    jobs = json.load(open(JOBS))
    out = {}
    for j, job in enumerate(jobs):
        spec = importlib.util.spec_from_file_location(f"golden{j}", job["golden"])
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        fn = getattr(mod, mod.__golden__["kernel"][job["snake"]])
        data = np.load(job["inputs"])
        for c, case in enumerate(job["cases"]):
            kw = {}
            for name, bf16 in case["inputs"].items():
                a = data[f"c{c}/{name}"]
                kw[name] = a.view(ml_dtypes.bfloat16) if bf16 else a
            got = fn(**kw, **case["attrs"], dtypes=case["dtypes"])
            for name, value in zip(job["outputs"], got):
                if value is not None:
                    value = np.asarray(value)
                    out[f"{j}/{c}/{name}"] = value.view(np.uint16) if value.dtype.name == "bfloat16" else value
    np.savez(OUT, **out)
''')


def site_dir(tmp: Path) -> Path:
    """A directory holding only numpy (and its bundled libraries) and ml_dtypes, as symlinks."""
    import ml_dtypes

    site = tmp / "site"
    site.mkdir()
    for mod in (np, ml_dtypes):
        pkg = Path(mod.__file__).resolve().parent
        (site / pkg.name).symlink_to(pkg)
        libs = pkg.parent / f"{pkg.name}.libs"
        if libs.is_dir():
            (site / libs.name).symlink_to(libs)
    return site


def key_cases(spec, dtypes: dict, seed: int = 1, keys=None):
    """[(key, inputs, attrs)] for every specialisation key of `spec` (or of `keys`) at its example dims: static
    attributes set to the key's values, optional inputs the key leaves out set to None. Asserts every key is
    reachable (a key's static dtypes, SpecKey.dtypes, are the ones `dtypes` binds: `_rows_by_static_dtypes`)."""
    from opgen.codegen.example import _default_dims

    dims = {**_default_dims(spec), **((spec.example_call_ or {}).get("dims") or {})}
    opts = [i.name for i in spec.inputs if i.optional]
    multi = [i for i in spec.inputs if len(i.shapes) > 1]
    out = []
    for key in (spec.keys() if keys is None else keys):
        attrs = dict((spec.example_call_ or {}).get("attrs", {}))
        attrs.update(zip([a.name for a in spec.static_attrs], key.static))
        for a in spec.attrs:
            if a.dim is not None and a.dim.name in dims:
                attrs[a.name] = dims[a.dim.name]
        present = dict(zip(opts, key.present))
        bound_by = {True: set(), False: set()}   # dims bound (as a plain dim) by present / absent inputs
        for i in spec.inputs:
            for d in i.shapes[0]:
                if isinstance(d, Variadic) or isinstance(as_dim(d), Sym):
                    bound_by[present.get(i.name, True)].add(d.name)
        drop = bound_by[False] - bound_by[True]   # dims only absent inputs bind take their `absent` value
        inputs = random_inputs(spec, {k: v for k, v in dims.items() if k not in drop}, attrs, dtypes, seed=seed)
        for name, present in zip(opts, key.present):
            if not present:
                inputs[name] = None
        env = spec.bind(inputs, attrs, dtypes).env
        for i, form in zip(multi, key.forms):   # another shape form: the same elements reshaped (the first ones of
            if inputs.get(i.name) is not None:  # a smaller form, repeated for a larger one: AddLayerNorm's bias)
                shape = eval_shape(i.shapes[form], env)
                inputs[i.name] = np.resize(np.ravel(inputs[i.name]), shape).astype(inputs[i.name].dtype)
        bound = spec.bind(inputs, attrs, dtypes)
        assert bound.key == key, (spec.name, key, bound.key)
        out.append((key, inputs, bound.attrs))
    return out


BLAS_ENV = ("OPENBLAS_", "OMP_", "MKL_")
"""Prefixes of the environment passed to the isolated interpreter: OpenBLAS picks its float32 matmul kernel by
OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (set on this kind of machine) and splits it by its thread count, so without
them the golden's BatchMatMul sums in another order than the interpreter in this process (seen: 5.7e-6 apart)."""


def run_isolated(tmp: Path, jobs: list) -> dict:
    """Run the goldens of `jobs` [(spec, golden text, dtypes, cases)] in `python -I -S` with only numpy and
    ml_dtypes importable (and this process's BLAS settings); returns {(job, case, output): array}."""
    site = site_dir(tmp)
    desc = []
    for j, (spec, text, dtypes, cases) in enumerate(jobs):
        golden = tmp / f"golden{j}.py"
        golden.write_text(text)
        arrays, meta = {}, []
        for c, (_key, inputs, attrs) in enumerate(cases):
            names = {}
            for name, a in inputs.items():
                if a is None:
                    continue
                a = np.asarray(a)
                bf16 = a.dtype.name == "bfloat16"
                arrays[f"c{c}/{name}"] = a.view(np.uint16) if bf16 else a
                names[name] = bf16
            meta.append({"inputs": names, "attrs": {k: (v.item() if hasattr(v, "item") else v)
                                                    for k, v in attrs.items()}, "dtypes": dtypes})
        np.savez(tmp / f"inputs{j}.npz", **arrays)
        desc.append({"golden": str(golden), "snake": spec.stem, "inputs": str(tmp / f"inputs{j}.npz"),
                     "outputs": [o.name for o in spec.outputs], "cases": meta})
    (tmp / "jobs.json").write_text(json.dumps(desc))
    driver = tmp / "driver.py"
    driver.write_text(f"SITE = {str(site)!r}\nJOBS = {str(tmp / 'jobs.json')!r}\nOUT = {str(tmp / 'out.npz')!r}\n"
                      + DRIVER)
    r = subprocess.run([sys.executable, "-I", "-S", str(driver)], capture_output=True, text=True, timeout=600,
                       cwd=tmp, env={"PATH": "/usr/bin:/bin", **{k: v for k, v in os.environ.items() if k.startswith(BLAS_ENV)}})
    assert r.returncode == 0, r.stdout + r.stderr
    got = np.load(tmp / "out.npz")
    out = {}
    for k in got.files:
        j, c, name = k.split("/")
        out[int(j), int(c), name] = got[k]
    return out


def _specs():
    return list(all_specs()) + [load_spec(str(p)) for p in sorted(EXAMPLES.glob("*.py"))]


def _dtype_row(spec, prefer="float32"):
    rows = [{k: v.long_name for k, v in r.items()} for r in spec.dtype_rows]
    return next((r for r in rows if all(v == prefer for v in r.values())), rows[0] if rows else {})


def _rows_by_static_dtypes(spec, prefer="float32") -> list:
    """[(dtype row, the keys it reaches)]: one row per choice of the static dtype variables (OpSpec.dtype_vars(
    static=True): the dtype selects the body, so each choice is its own specialisations), the `prefer` one among
    those rows where there is; a spec without any: [(_dtype_row, every key)]."""
    if not spec.static_dtype_vars:
        return [(_dtype_row(spec, prefer), spec.keys())]
    out = []
    for choice in spec.static_dtype_choices():
        want = {n: d.long_name for n, d in zip(spec.static_dtype_vars, choice)}
        rows = [{k: v.long_name for k, v in r.items()} for r in spec.dtype_rows]
        rows = [r for r in rows if all(r[n] == v for n, v in want.items())]
        row = next((r for r in rows if all(v == prefer for n, v in r.items() if n not in want)), rows[0])
        out.append((row, [k for k in spec.keys() if k.dtypes == choice]))
    return out


def test_isolated_golden_equals_the_interpreter_on_every_specialisation(tmp_path):
    jobs = []
    for spec in _specs():
        for dtypes, keys in _rows_by_static_dtypes(spec):
            jobs.append((spec, emit_golden(spec)[GOLDEN_PATH], dtypes, key_cases(spec, dtypes, keys=keys)))
    bf16 = load_spec(str(EXAMPLES / "geglu.py"))   # bfloat16 arrays (ml_dtypes on the caller's side): 4 cases
    jobs.append((bf16, emit_golden(bf16)[GOLDEN_PATH], {"T": "bfloat16"}, key_cases(bf16, {"T": "bfloat16"})))
    got = run_isolated(tmp_path, jobs)
    checked = 0
    for j, (spec, text, dtypes, cases) in enumerate(jobs):
        for c, (key, inputs, attrs) in enumerate(cases):
            ref = interpret(spec, inputs, attrs, dtypes, "device")
            for o in spec.outputs:
                r, g = ref.get(o.name), got.get((j, c, o.name))
                assert (r is None) == (g is None), (spec.name, key, o.name)
                if r is None:
                    continue
                r = np.asarray(r)
                if r.dtype.name == "bfloat16" and g.dtype == np.float32:   # as the golden's docstring says
                    assert f"A bfloat16 {o.name} comes back as float32" in " ".join(text.split()), (spec.name, o.name)
                    r = r.astype(np.float32)   # no bfloat16 input to take the dtype from: bf16 values in float32
                elif r.dtype.name == "bfloat16":
                    r = r.view(np.uint16)
                assert g.shape == r.shape and np.array_equal(g, r, equal_nan=True), (spec.name, key, o.name)
                checked += 1
    # the bundled and example specs' specialisations, pinned so none is skipped (QuantBatchMatmulV3: bias x
    # pertoken_scale presence x transpose_x1 x transpose_x2 x scale form [N] / [1] x the bias dtype BIAS i32 / f32
    # (a static dtype variable: each its own body) = 64; its offset, accepted only absent, adds none;
    # MatmulRmsNorm 1, MatmulSoftmax 1, InplaceApplyMomentum 2 (use_nesterov), FlashAttentionVarLenScore and
    # FlashAttentionUnpaddingScoreGrad 2 each (this session's examples: 914 -> 922); MatmulDynamicQuant 1 (923);
    # ApplyAdamWV2 2 (maximize; its amsgrad and max_grad_norm accepted only false / absent): 925;
    # WeightQuantBatchMatmulV2 16 (antiquant_group_size 0 / 32 / 64 / 128 x antiquant_offset x bias presence;
    # quant_scale and quant_offset accepted only absent: 925 -> 941); Baddbmm 9 (self's nine shape forms): 950;
    # TransposeBatchMatMul: perm_x1 x perm_x2 = 4, its bias and scale accepted only absent); Quantize 2
    # (zero_points presence): 952
    assert sum(len(cases) for *_x, cases in jobs) == sum(len(s.keys()) for s in _specs()) + 4 == 952
    assert checked > 1500


def test_isolated_golden_matches_the_float64_oracles_on_every_specialisation(tmp_path):
    from test_examples import ORACLES

    nrc = load_spec("NormRopeConcat")
    examples = {name: load_spec(str(EXAMPLES / f"{name}.py")) for name in ("geglu", "modulate")}
    f32 = {"T": "float32"}
    jobs = [(nrc, emit_golden(nrc)[GOLDEN_PATH], f32, key_cases(nrc, f32))]
    jobs += [(s, emit_golden(s)[GOLDEN_PATH], f32, key_cases(s, f32)) for s in examples.values()]
    assert len(jobs[0][3]) == 432 and len(jobs[1][3]) == 4 and len(jobs[2][3]) == 4
    got = run_isolated(tmp_path, jobs)
    seen = set()
    for j, (spec, _text, _dt, cases) in enumerate(jobs):
        for c, (key, inputs, attrs) in enumerate(cases):
            if spec is nrc:
                kw = {k: v for k, v in attrs.items() if k != "is_training"}
                want = norm_rope_concat_fwd(**inputs, **kw)
                if not attrs["is_training"]:   # the statistics are outputs only in training mode
                    want = {k: v for k, v in want.items() if k.endswith("_output")}
            else:
                name = next(n for n, s in examples.items() if s is spec)
                want = ORACLES[name](inputs, attrs)
            produced = {o.name for o in spec.outputs if (j, c, o.name) in got}
            assert produced == set(want), (spec.name, key, produced, set(want))
            for name, w in want.items():
                w = w[0] if isinstance(w, tuple) else w   # (value, the size of the terms it is a difference of)
                g = got[j, c, name].astype(np.float64)
                np.testing.assert_allclose(g, np.asarray(w, np.float64), rtol=2e-5, atol=2e-5,
                                           err_msg=f"{spec.name} {key} {name}")
            seen.add((spec.name, key))
    assert len(seen) == 440


def test_golden_file_size_grows_with_distinct_statements_not_specialisations():
    """NormRopeConcat's 432 specialisations print ~1100 statements (hash-consed), not one function each."""
    spec = load_spec("NormRopeConcat")
    prog = merged_program(spec)
    per_key = sum(len(spec.graph(k).nodes) for k in spec.keys())
    statements = sum(len(b) for _c, b in prog.blocks)
    assert len(prog.keys) == 432 and statements < per_key / 10
    text = emit_golden(spec)[GOLDEN_PATH]
    assert len(text.splitlines()) < 4000


@pytest.mark.parametrize("name", ["NormRopeConcat", "AdaLayerNormV2"])
def test_golden_rejects_a_combination_no_specialisation_covers(name, tmp_path):
    """A call the spec's static checks rule out has no specialisation: ValueError naming the op, not a guess."""
    spec = load_spec(name)
    path = tmp_path / "golden.py"
    path.write_text(emit_golden(spec)[GOLDEN_PATH])
    import importlib.util

    mspec = importlib.util.spec_from_file_location("golden_reject", path)
    mod = importlib.util.module_from_spec(mspec)
    mspec.loader.exec_module(mod)
    fn = getattr(mod, mod.__golden__["kernel"][spec.stem])
    (_key, inputs, attrs), *_ = key_cases(spec, _dtype_row(spec))
    if name == "NormRopeConcat":   # rope_type 1 without its tables is rejected by the spec's mode rule
        attrs = {**attrs, "rope_type": 1}
        inputs = {**inputs, "rope_sin": None, "rope_cos": None}
        with pytest.raises(ValueError, match="NormRopeConcat: no specialisation"):
            fn(**inputs, **attrs)
    else:   # every presence combination is valid: the golden runs
        assert fn(**inputs, **attrs)[0] is not None
