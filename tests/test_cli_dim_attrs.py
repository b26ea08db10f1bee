"""An attribute bound to a dim (`spec.attr("head_num", int, 1, dim=N)`) on the command line (nu13): `--dims` fills
it from the dims, `--inputs` keeps its default unless `--attr` gives it (README "Command line"). The README's own
round trip (`interpret --dims ... --save-inputs in.npz`, then `interpret` / `check --inputs in.npz`) met a bare
`head_num: is 1, must equal N=3 (from x)`; the error now says how to give it, and the run with that --attr gives
the float64 NumPy value."""

from __future__ import annotations

import textwrap
from pathlib import Path

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


def test_a_dim_only_an_attribute_gives_must_agree_with_dims():
    """GroupNorm's G is carried by no input (only by the attribute `group`, dim=G, and the [N, G] outputs): `--dims
    G=4 --attr group=2` ran with group 2 and ignored G=4 (a new user's trial); now both spellings must agree, in
    `interpret` and `check` alike, and a required one given by neither names both ways to give it. Equal values, or
    either one alone, run: the statistics are [N, G] as given."""
    spec = Path(__file__).resolve().parent.parent / "examples" / "specs" / "group_norm.py"
    dims = "N=2,C=8,HxW=7"
    for cmd in ("interpret", "check"):
        engine = ("--engine", "kir") if cmd == "check" else ()
        p = opgen(cmd, spec, "--dims", dims + ",G=4", "--attr", "group=2", *engine)
        assert p.returncode == 2 and p.stderr.splitlines() == [
            "opgen: error: group: is 2, must equal G=4 (from --dims: group gives the dim G; give one of the two, or "
            "the same value)"], p.stderr
        p = opgen(cmd, spec, "--dims", dims, *engine)
        assert p.returncode == 2 and p.stderr.splitlines() == [
            "opgen: error: group: required attribute is missing: give it (--attr group=<value>) or its dim G in "
            "--dims (G=<value>)"], p.stderr
    for args in (("--dims", dims + ",G=4", "--attr", "group=4"), ("--dims", dims + ",G=4"),
                 ("--dims", dims, "--attr", "group=4")):
        p = opgen("interpret", spec, *args)
        assert p.returncode == 0, p.stderr
        assert "meanOut: [2, 4]" in p.stdout, p.stdout
