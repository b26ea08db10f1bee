"""An attribute bound to a dim (`spec.attr("head_num", int, 1, dim=N)`) on the command line (nu13): `--dims` fills
it from the dims, `--inputs` keeps its default unless `--attr` gives it (README "Command line"). The README's own
round trip (`interpret --dims ... --save-inputs in.npz`, then `interpret` / `check --inputs in.npz`) met a bare
`head_num: is 1, must equal N=3 (from x)`; the error now says how to give it, and the run with that --attr gives
the float64 NumPy value."""

from __future__ import annotations

import textwrap

import numpy as np

from inproc import cli as opgen

SPEC = """
from opgen.dsl import A2, OpSpec, f32

spec = OpSpec("DimAttrProbe", aclnn="aclnnDimAttrProbe", socs=(A2,))
N, D = spec.dims("N D")
spec.input("x", f32, [N, D])
spec.attr("heads", int, 1, dim=N)
spec.attr("groups", int, required=True, dim=D)
spec.output("y", f32, [N, D])


@spec.body
def _(b, x, heads, groups):
    return {"y": x * 2.0}
"""


def test_inputs_without_a_dim_bound_attribute_say_to_give_it(tmp_path):
    spec = tmp_path / "dim_attr_probe.py"
    spec.write_text(textwrap.dedent(SPEC))
    saved, out = tmp_path / "in.npz", tmp_path / "out.npz"
    p = opgen("interpret", spec, "--dims", "N=3,D=4", "--save-inputs", saved)
    assert p.returncode == 0, p.stderr
    # a required one (no default): the rule alone
    p = opgen("interpret", spec, "--inputs", saved, "--attr", "heads=3")
    assert p.returncode == 2 and p.stderr.splitlines() == ["opgen: error: groups: required attribute is missing"]
    for cmd in ("interpret", "check"):
        engine = ("--engine", "kir") if cmd == "check" else ()
        p = opgen(cmd, spec, "--inputs", saved, "--attr", "groups=4", *engine)
        assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
        assert p.stderr.startswith("opgen: error: heads: is 1, must equal N=3 (from x)"), p.stderr
        assert "--attr heads=" in p.stderr and "--inputs" in p.stderr, p.stderr
    p = opgen("interpret", spec, "--inputs", saved, "--attr", "heads=3", "--attr", "groups=4", "--mode", "exact",
              "--out", out)
    assert p.returncode == 0, p.stderr
    x = np.load(saved)["x"].astype(np.float64)
    np.testing.assert_array_equal(np.load(out)["y"], 2.0 * x)
    # given on the command line and wrong: the rule alone, nothing about defaults
    p = opgen("interpret", spec, "--inputs", saved, "--attr", "heads=2", "--attr", "groups=4")
    assert p.returncode == 2 and p.stderr.splitlines() == ["opgen: error: heads: is 2, must equal N=3 (from x)"]
