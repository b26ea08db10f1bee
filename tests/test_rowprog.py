"""The row-program Kernel IR (opgen.kernel.rowprog) as the rows family builds it (opgen.kernel.rows): lowering,
allocation, levels, phases, verifier, printer, the counts the tiling is derived from, and `opgen graph --stage
kernel`. End-to-end numerics of the printed kernels are in tests/test_kernels.py (emulation vs interpreter)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from opgen.errors import IRError
from opgen.kernel.rowlayout import Unsupported, analyse
from opgen.kernel.rowprog import Instr, RowProgram, print_program, verify_program
from opgen.kernel.rows import lower
from opgen.passes.pipeline import compile_unit, optimize
from opgen.passes.select import select_key
from opgen.registry import load_spec


def _prog(op, present=(), attrs=None):
    spec = load_spec(op)
    g = optimize(spec.graph(select_key(spec, attrs or {}, present)))
    return lower(g, analyse(g))


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


def test_counts_are_those_of_the_fullest_specialisation():
    """The counts the tiling plans for are what the specialisation with every optional input present needs (the
    others need less), read off its program's buffers and instructions; that the emitted kernel allocates exactly
    the plan built from them is measured by the emulation (test_tiling.test_the_kernel_allocates_the_buffer_plan)."""
    for op, present, temps, nprogs in (("AdaLayerNormGrad", ("gamma", "beta"), 4, 8),
                                       ("AdaLayerNormV2", ("weight", "bias"), 2, 16)):
        u = compile_unit(load_spec(op), until="count")
        assert len(u.lowered.programs) == nprogs                # presence x scale shape forms
        full = _prog(op, present)
        c = u.counts
        assert c.temps == full.row_temps == temps
        assert (c.brow, c.col) == (len(full.brow), len(full.col))
        assert c.stat_in == sum(1 for i in full.instrs if i.kind == "sload")
        assert c.stat_out == sum(1 for i in full.instrs if i.kind == "sstore")
        assert (c.rsums, c.levels) == (len(full.rsums()), full.levels)
        assert c.col_acc + c.brow_acc == len(full.accs)
        for p in u.lowered.programs.values():
            assert p.row_temps <= c.temps and len(p.brow) <= c.brow and len(p.col) <= c.col


def test_verifier_catches_use_before_def_and_bad_temporaries():
    p = RowProgram("t", None)
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
    with pytest.raises(Unsupported, match="%v"):
        analyse(g)


def test_printer_is_canonical_and_shows_phases():
    a = print_program(_prog("AdaLayerNormV2", ("weight",)))
    b = print_program(_prog("AdaLayerNormV2", ("weight",)))
    assert a == b and a.startswith("rowprogram AdaLayerNormV2 (row temps 2, levels 2) {")
    assert "[stat L0 F,P0,P1] s0 = ReduceSum(w0)" in a and " F] store out <- " in a   # level-0 sum: read in P1, F
    assert "gm in x: T row at x[r * H]" in a and "gm in scale: T brow at scale[a0 * H]" in a


@pytest.mark.slow
def test_cli_stage_kernel():
    r = subprocess.run([sys.executable, "-m", "opgen.cli", "graph", "AdaLayerNormGrad", "--stage", "kernel",
                        "--present", "gamma"], capture_output=True, text=True)
    assert r.returncode == 0 and "rowprogram AdaLayerNormGrad" in r.stdout and "load(gamma)" in r.stdout
    assert r.stdout.startswith("family rows: layout rows [*Bd, S, H]")
    r = subprocess.run([sys.executable, "-m", "opgen.cli", "graph", "AdaLayerNormGrad", "--stage", "kernel",
                        "--format", "dot"], capture_output=True, text=True)
    assert r.returncode == 2 and "only --format text" in r.stderr
