"""The row-program Kernel IR (opgen.kernel.rowprog): lowering, allocation, levels, phases, verifier, printer,
the tiling-count check of the emitter, and `opgen graph --stage kernel`. End-to-end numerics of the
printed kernels are in tests/test_kernels.py (emulation vs interpreter)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from opgen.codegen.kernel import check_counts, variants
from opgen.errors import IRError, SpecError
from opgen.kernel.rowprog import Instr, RowLayout, RowProgram, lower, print_program, verify_program
from opgen.passes.pipeline import optimize
from opgen.passes.select import select_key
from opgen.registry import load_spec
from opgen.tiling import ada_layer_norm_grad, ada_layer_norm_v2


def _prog(op, present=(), attrs=None):
    spec = load_spec(op)
    return lower(optimize(spec.graph(select_key(spec, attrs or {}, present))), RowLayout())


def test_ada_layer_norm_grad_lowering():
    p = _prog("AdaLayerNormGrad", ("gamma", "beta"))
    assert p.levels == 1 and len(p.rsums()) == 2           # mean(g) and mean(g * z), one exchange
    assert p.row_temps == 4
    assert {v[1] for v in p.accs.values()} == {"pd_scale", "pd_shift", "pd_gamma", "pd_beta"}
    assert {v[0] for k, v in p.accs.items() if v[1] in ("pd_scale", "pd_shift")} == {"brow"}
    kinds = [i.kind for i in p.instrs]
    assert kinds.count("cast_in") == 2 and kinds.count("store") == 1 and kinds.count("sload") == 2
    # the store of pd_x runs only in the final phase; the row sums' inputs run in phase 0 and again in F
    store = next(i for i in p.instrs if i.kind == "store")
    assert store.phases == (-1,) and store.arg == "CAST_RINT"
    assert all(i.phases == (-1, 0) for i in p.rsums())    # computed in P0, read back as totals in F


def test_fewer_temporaries_without_gamma():
    assert _prog("AdaLayerNormGrad").row_temps == 3


def test_v2_has_two_levels():
    p = _prog("AdaLayerNormV2", ("weight", "bias"))
    assert p.levels == 2 and [i.level for i in p.rsums()] == [0, 1]   # variance needs the mean first
    assert [i.gm for i in p.instrs if i.kind == "sstore"] == ["mean", "rstd"]
    assert any("attr_epsilon" in i.arg for i in p.instrs)


def test_every_specialisation_fits_the_tiling_counts():
    for op, mod in (("AdaLayerNormGrad", ada_layer_norm_grad), ("AdaLayerNormV2", ada_layer_norm_v2)):
        spec = load_spec(op)
        vs = variants(spec, RowLayout())
        assert len(vs) == 4                                   # presence of the two optional inputs
        check_counts(spec, [v.prog for v in vs], mod.COUNTS, "x")


def test_counts_too_small_is_a_spec_error():
    spec = load_spec("AdaLayerNormGrad")
    small = dataclasses.replace(ada_layer_norm_grad.COUNTS, temps=3)
    with pytest.raises(SpecError, match="temps = 4 but the tiling plans for 3"):
        check_counts(spec, [v.prog for v in variants(spec, RowLayout())], small, "opgen/tiling/x.py")


def test_verifier_catches_use_before_def_and_bad_temporaries():
    p = RowProgram("t", RowLayout())
    p.instrs = [Instr("vbin", "w0", ("w1", "w1"), "Add")]
    p.row_temps = 2
    with pytest.raises(IRError, match="uses w1 before it is defined"):
        verify_program(p)
    p.instrs = [Instr("vdup", "w5", arg="0.0f")]
    with pytest.raises(IRError, match="outside the 2 row temporaries"):
        verify_program(p)


def test_unsupported_graph_names_the_op():
    spec = load_spec("NsaSelectedAttentionGrad")
    g = optimize(spec.graph(spec.keys()[0]))
    with pytest.raises(IRError, match="row kernel"):
        lower(g, RowLayout())


def test_printer_is_canonical_and_shows_phases():
    a = print_program(_prog("AdaLayerNormV2", ("weight",)))
    b = print_program(_prog("AdaLayerNormV2", ("weight",)))
    assert a == b and a.startswith("rowprogram AdaLayerNormV2 (row temps 2, levels 2) {")
    assert "[stat L0 F,P0,P1] sum_" in a and " F] store out <- " in a   # level-0 sum: read back in P1 and F


def test_cli_stage_kernel():
    r = subprocess.run([sys.executable, "-m", "opgen.cli", "graph", "AdaLayerNormGrad", "--stage", "kernel",
                        "--present", "gamma"], capture_output=True, text=True)
    assert r.returncode == 0 and "rowprogram AdaLayerNormGrad" in r.stdout and "load(gamma)" in r.stdout
    r = subprocess.run([sys.executable, "-m", "opgen.cli", "graph", "AdaLayerNormGrad", "--stage", "kernel",
                        "--format", "dot"], capture_output=True, text=True)
    assert r.returncode == 2 and "only --format text" in r.stderr
