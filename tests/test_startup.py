"""Start-up work of the command line: a command loads only the spec it names, and the specialisation keys are
enumerated with pruning, giving exactly the keys (in the same order) as walking every combination."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from opgen.dsl.spec import SpecKey
from opgen.registry import _load_file, declared_names, spec_files

ROOT = Path(__file__).resolve().parent.parent


def _brute_force_keys(spec) -> list:
    """Every combination of static attributes x presence x shape forms (an absent input's first form only; an
    accepts="absent" input never present) x the static dtype variables' values (OpSpec.dtype_vars(static=True)), in
    keys()' documented order, kept when no static check fails: the definition of keys(), walked exhaustively."""
    opts = [i for i in spec.inputs if i.optional]
    free = [i for i in opts if i.when is None and not i.absent_only]
    gated = [i for i in opts if i.when is not None or i.absent_only]   # accepts="absent": never present
    multi = [i for i in spec.inputs if len(i.shapes) > 1]
    # the static dtype variables' value tuples, each once, in dtype-row order (innermost: one key per tuple)
    dts = []
    for r in spec.dtype_rows:
        d = tuple(r[n] for n in spec.static_dtype_vars)
        if d not in dts:
            dts.append(d)
    out = []
    for st in itertools.product(*[a.choices for a in spec.static_attrs]):
        attrs = {a.name: v for a, v in zip(spec.static_attrs, st)}
        for pres in itertools.product((True, False), repeat=len(free)):
            base = {i.name: True for i in spec.inputs if not i.optional}
            base.update({i.name: p for i, p in zip(free, pres)})
            used = [not i.absent_only and i.when(attrs, base) for i in gated]
            for gp in itertools.product(*[(True, False) if u else (False,) for u in used]):
                present = {**base, **{i.name: p for i, p in zip(gated, gp)}}
                if any(r.fn(attrs, present) for r in spec.requirements if r.kind == "static"):
                    continue
                for forms in itertools.product(*[(0,) if not present[i.name] else (i.form_of(attrs),)
                                                 if i.form_by is not None else range(len(i.shapes)) for i in multi]):
                    for d in dts or [()]:
                        out.append(SpecKey(tuple(st), tuple(present[i.name] for i in opts), tuple(forms), d))
    return out


SMALL = sorted([*spec_files(),
                *(ROOT / "examples" / "specs").glob("*.py")])


@pytest.mark.parametrize("path", SMALL, ids=lambda p: p.stem)
def test_pruned_keys_equal_the_exhaustive_walk(path):
    spec = _load_file(path)
    assert spec.keys() == _brute_force_keys(spec)


def test_pruning_handles_checks_that_read_every_input(tmp_path):
    """Checks that iterate over `present`, use `in`, .get, or read inputs in a data-dependent order: still the
    exhaustive answer."""
    p = tmp_path / "many_optionals.py"
    p.write_text('''
from opgen.dsl import A2, OpSpec, f32

spec = OpSpec("ManyOptionals", aclnn="aclnnManyOptionals", socs=(A2,))
H = spec.dim("H", max=64)
spec.input("x", f32, [H])
for k in range(6):
    spec.input(f"o{k}", f32, [H], optional=True)
spec.input("g", f32, [H], optional=True, when=lambda a, p: p["o0"] and a["mode"] > 0)
spec.attr("mode", int, 0, choices=(0, 1, 2), static=True)
spec.output("y", f32, [H])
spec.check("o1", lambda a, p: "must come with o2" if p["o1"] and not p.get("o2") else None)
spec.check("o3", lambda a, p: "at most two of o3..o5" if sum(p[f"o{k}"] for k in (3, 4, 5)) > 2 else None)
spec.check("o0", lambda a, p: "needs every other" if p["o0"] and not all(v for k, v in p.items() if k != "g") else None)
spec.check("g", lambda a, p: "mode 2 needs g" if a["mode"] == 2 and p["o0"] and "g" in p and not p["g"] else None)


@spec.body
def _(b, x, o0, o1, o2, o3, o4, o5, g, mode):
    return {"y": x}
''')
    spec = _load_file(p)
    want = _brute_force_keys(spec)
    assert spec.keys() == want and 0 < len(want) < 3 * 2 ** 7


def test_declared_names_read_without_running(tmp_path):
    p = tmp_path / "x.py"
    p.write_text('raise SystemExit("executed")\nspec = OpSpec("Xy", aclnn="aclnnXy")\n')
    assert declared_names(p) == {"Xy"} == declared_names(p, top_level_only=True)
    nested = tmp_path / "nested.py"
    nested.write_text('def make():\n    return OpSpec("Deep", aclnn="aclnnDeep")\nspec = make()\n')
    assert declared_names(nested) == {"Deep"} and declared_names(nested, top_level_only=True) == frozenset()
    (tmp_path / "broken.py").write_text("spec = OpSpec(\n")
    assert declared_names(tmp_path / "broken.py") == frozenset()


@pytest.mark.slow
def test_interpreting_one_op_never_executes_another_spec(tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "rms_norm.py").write_text((ROOT / "examples" / "specs" / "rms_norm.py").read_text())
    marker = tmp_path / "executed"
    (specs / "other.py").write_text(f'open({str(marker)!r}, "w").close()\n'
                                    + (ROOT / "examples" / "specs" / "softmax.py").read_text())
    env = {**os.environ, "OPGEN_SPECS": str(specs)}
    r = subprocess.run([sys.executable, "-m", "opgen.cli", "interpret", "RmsNorm", "--dims", "Bd=2,H=8",
                        "--out", str(tmp_path / "o.npz"), "-q"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert not marker.exists()
    # a name no file declares literally still loads every spec (names built at run time are allowed)
    r = subprocess.run([sys.executable, "-m", "opgen.cli", "interpret", "NoSuchOp", "--dims", "H=8",
                        "--out", str(tmp_path / "o.npz")], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "unknown op 'NoSuchOp'" in r.stderr and marker.exists()
