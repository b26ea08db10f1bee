"""Random inputs from --dims (docs/design.md "Random inputs"): bool inputs take both values, integer inputs a
range the spec's own value checks accept, so an index, a label or quantised data exercises the operator instead
of being all zeros. Expected ranges follow from the rule in the docs, written out here by hand."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from opgen.dsl.examples import random_inputs
from opgen.errors import OpgenError
from opgen.registry import load_spec

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples" / "specs"



def _spec(tmp_path, name, text):
    p = tmp_path / f"{name}.py"
    p.write_text(text)
    return load_spec(str(p))


PICK = '''
from opgen.dsl import A2, OpSpec, boolean, f32, i64, i8, u8
spec = OpSpec("{name}", aclnn="aclnn{name}", socs=(A2,))
N = spec.dim("N")
C = spec.dim("C")
spec.input("x", f32, [N, C])
spec.input("t", i64, [N])
spec.input("q", i8, [N, C])
spec.input("u", u8, [N, C])
spec.input("m", boolean, [N, C])
spec.output("y", f32, [N])
spec.dtypes((), [()])
{check}
@spec.body
def _(b, x, t, q, u, m):
    return {{"y": b.gather(b.where(m, x, q.f32() + u.f32()), t, axis=1)}}
'''

CHECK = '''
def _in_classes(arrays, env, attrs):
    t = arrays["t"]
    return None if ((t >= 0) & (t < env["C"])).all() else "t must lie in [0, C)"
spec.check("t", _in_classes, on="device")
'''


def test_checked_index_takes_the_range_its_check_accepts_and_data_types_their_whole_range(tmp_path):
    spec = _spec(tmp_path, "PickChecked", PICK.format(name="PickChecked", check=CHECK))
    got = random_inputs(spec, {"N": 4000, "C": 7}, seed=3)
    t = got["t"]
    assert t.dtype == np.int64 and t.min() == 0 and t.max() == 6      # [0, C): 4000 draws reach both ends
    assert len(np.unique(t)) == 7
    q, u = got["q"], got["u"]
    assert q.dtype == np.int8 and q.min() == -128 and q.max() == 127  # 28000 draws over 256 values
    assert u.dtype == np.uint8 and u.min() == 0 and u.max() == 255
    m = got["m"]
    assert m.dtype == np.bool_ and 0.4 < m.mean() < 0.6


def test_an_unchecked_index_takes_the_widest_range_and_the_interpreter_says_how_to_bound_it(tmp_path):
    from opgen.interp import interpret

    spec = _spec(tmp_path, "PickOpen", PICK.format(name="PickOpen", check=""))
    got = random_inputs(spec, {"N": 50, "C": 7}, seed=0)
    assert got["t"].min() < 0 and got["t"].max() >= 7                 # [-50, 50): the largest size, signed
    with pytest.raises(OpgenError, match=r'outside \[0, 7\).*spec.check\(name, fn, on="device"\)'):
        interpret(spec, got)


def test_cross_entropy_targets_come_out_as_class_indices():
    spec = load_spec(str(EX / "cross_entropy_loss.py"))
    t = random_inputs(spec, {"N": 300, "C": 5}, {"reduction": "none"}, seed=1)["target"]
    assert set(np.unique(t).tolist()) == {0, 1, 2, 3, 4}


def test_a_check_that_fails_every_range_leaves_zeros(tmp_path):
    never = CHECK.replace('None if ((t >= 0) & (t < env["C"])).all() else "t must lie in [0, C)"',
                          '"never" if t.size else None')
    spec = _spec(tmp_path, "PickNever", PICK.format(name="PickNever", check=never))
    assert not random_inputs(spec, {"N": 5, "C": 3})["t"].any()
