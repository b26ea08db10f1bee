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
from opgen.passes.pipeline import optimize
from opgen.tiling.pipeline import compile_unit
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


def test_one_program_serves_every_presence_and_its_counts_bound_each():
    """The specialisations that differ only in which optional inputs are present share one program
    (opgen.kernel.rowpresence: instructions guarded by the presences that run them), one per shape form; the counts
    the tiling plans for are that program's, and they bound what each presence lowered alone needs: as many row
    temporaries as the fullest presence (liveness per presence: a value only another presence reads is overwritten
    in place); that the emitted kernel allocates exactly the plan built from them is measured by the emulation,
    test_tiling.test_the_kernel_allocates_the_buffer_plan)."""
    for op, opts, nprogs, forms in (("AdaLayerNormGrad", ("gamma", "beta"), 8, 2),
                                    ("AdaLayerNormV2", ("weight", "bias"), 16, 4)):
        u = compile_unit(load_spec(op), until="count")
        assert len(u.lowered.programs) == nprogs                # presence x scale shape forms
        joined = {id(p): p for p in u.lowered.programs.values()}
        assert len(joined) == forms                              # one program per shape form, not per presence
        alone = [_prog(op, tuple(n for n, on in zip(opts, pr) if on))
                 for pr in ((True, True), (True, False), (False, True), (False, False))]
        c = u.counts
        for p in joined.values():
            assert p.presence == opts and any(i.when for i in p.instrs)
            assert p.row_temps <= c.temps and len(p.brow) <= c.brow and len(p.col) <= c.col
        full = alone[0]
        assert max(a.row_temps for a in alone) == full.row_temps == c.temps
        assert (c.brow, c.col) == (len(full.brow), len(full.col))
        assert c.stat_in == sum(1 for i in full.instrs if i.kind == "sload")
        assert c.stat_out == sum(1 for i in full.instrs if i.kind == "sstore")
        assert c.col_acc + c.brow_acc == len(full.accs)
        assert (c.rsums, c.levels) == (len(full.rsums()), full.levels)   # exclusive reductions share slots


def test_exclusive_reductions_of_one_kind_share_an_exchange_slot():
    """rowprog.reduction_slots: a row sum under presence A and one under B share a slot (one of them runs); a sum
    and a maximum never do (the exchange combines a slot one way), nor two that run together."""
    from opgen.kernel.rowprog import reduction_slot_counts, reduction_slots

    A, B = ((True,),), ((False,),)
    p = RowProgram("t", None)
    p.instrs = [Instr("rsum", "a", ("w0",), space="stat", when=A), Instr("rsum", "b", ("w0",), space="stat", when=B),
                Instr("rmax", "c", ("w0",), space="stat", when=B), Instr("rsum", "d", ("w0",), space="stat"),
                Instr("rmax", "e", ("w0",), space="stat", level=1, when=A)]
    level, index = reduction_slots(p)
    assert level["a"] == level["b"] and len({level[x] for x in "abcd"}) == 3 and level["e"] == 0
    assert index["a"] == index["b"] and index["c"] == index["e"] and len(set(index.values())) == 3
    assert reduction_slot_counts(p) == (3, 3)


def test_bundled_entries_call_one_class_whatever_the_presence():
    """The emitted AdaLayerNormGrad / AdaLayerNormV2 packages (generated/) have one kernel class, which the entry
    calls for every tiling key without testing an optional input's pointer; the class tests hasInput<k>_ (set in
    Init from the pointer) around the instructions of the presences that need them."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "generated"
    for snake, opts in (("ada_layer_norm_grad", ("gamma", "beta")), ("ada_layer_norm_v2", ("weight", "bias"))):
        h = (root / snake / "op_kernel" / f"{snake}.h").read_text()
        cpp = (root / snake / "op_kernel" / f"{snake}.cpp").read_text()
        assert len(re.findall(r"^class \w+Kernel\d+ \{", h, re.M)) == 1
        assert "nullptr" not in cpp
        for k, name in enumerate(opts):
            assert f"this->hasInput{k}_ = {name} != nullptr;" in h and f"if (hasInput{k}_" in h


def test_presence_cover_is_exact_and_disjoint():
    """rowpresence.cover: for every set of presences of up to three optional inputs, the cubes it returns cover
    exactly that set, no presence twice (checked by enumerating the presences each cube stands for)."""
    import itertools

    from opgen.kernel.rowpresence import cover

    for n in (1, 2, 3):
        points = list(itertools.product((True, False), repeat=n))
        for r in range(1, len(points) + 1):
            for when in itertools.combinations(points, r):
                got = [p for c in cover(when, n) for p in points
                       if all(x is None or x == y for x, y in zip(c, p))]
                assert sorted(got) == sorted(when)               # exact, and disjoint (no point twice)
    assert cover(((True, True), (True, False)), 2) == [(True, None)]


def test_guarded_values_share_rows_only_where_no_presence_reads_them():
    """Allocation under guards (rowprog._allocate): an instruction running under presence A overwrites in place
    a value that only presence B reads later (B never runs it), but never a value A still reads."""
    from opgen.kernel.rowprog import _allocate

    A, B = ((True,),), ((False,),)
    p = RowProgram("t", None)
    p.instrs = [Instr("vdup", "x", arg="1.0f"),
                Instr("vscalar", "a", ("x",), "Muls", arg="2.0f", when=A),      # x dead for A after this
                Instr("vscalar", "b", ("x",), "Muls", arg="3.0f", when=B),      # x read by B
                Instr("vbin", "c", ("a", "x"), "Add", when=A)]                  # ... and by A: not in place above
    _allocate(p)
    assert p.instrs[1].dst != p.instrs[0].dst                    # A still reads x at the last instruction
    p.instrs = [Instr("vdup", "x", arg="1.0f"),
                Instr("vscalar", "a", ("x",), "Muls", arg="2.0f", when=A),
                Instr("vscalar", "b", ("x",), "Muls", arg="3.0f", when=B),
                Instr("vscalar", "c", ("a",), "Muls", arg="4.0f", when=A)]
    _allocate(p)
    assert p.instrs[1].dst == p.instrs[0].dst == "w0"            # only B reads x later: A's Muls in place
    assert p.row_temps == 1


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


def test_copies_of_an_instruction_under_other_presences_are_joined_only_where_order_allows():
    """rowpresence.join_copies, on programs written by hand: (1) the same Add under presences A and B with only
    instructions of other presences between becomes one Add under both (the later copy moves up when nothing
    between runs under its presences, the earlier one down when nothing between runs under its); joined over every
    served presence it runs unguarded; (2) an instruction every presence runs between the copies keeps them apart;
    (3) copies that differ in an operand are never joined."""
    from opgen.kernel.rowpresence import join_copies

    A, B, C = (True, True), (True, False), (False, True)

    def prog(*instrs, served=(A, B, C)):
        return RowProgram("P", None, instrs=list(instrs), presence=("g", "b"), served=served)

    add = lambda when, src="w1": Instr("vbin", "w0", ("w0", src), "Add", when=when)  # noqa: E731
    mul_b = Instr("vbin", "w0", ("w0", "c1"), "Mul", when=(B,))
    mul_a = Instr("vbin", "w0", ("w0", "c0"), "Mul", when=(A,))
    both = tuple(sorted((A, B)))
    p = prog(add((A,)), mul_b, add((B,)))    # mul_b runs under B: B's copy cannot move up; A's moves down
    assert join_copies(p) == 1 and p.instrs == [mul_b, add(both)]
    p = prog(add((A,)), mul_a, add((B,)))    # mul_a runs under A: A's copy cannot move down; B's moves up
    assert join_copies(p) == 1 and p.instrs == [add(both), mul_a]
    p = prog(add((A,)), mul_b, add((C,)), served=(A, C))   # joined over every served presence: unguarded
    assert join_copies(p) == 1 and [i.when for i in p.instrs if i.op == "Add"] == [()]
    shared = Instr("vbin", "w0", ("w0", "c2"), "Mul")
    p = prog(add((A,)), shared, add((B,)))
    assert join_copies(p) == 0 and p.instrs == [add((A,)), shared, add((B,))]
    p = prog(add((A,)), add((B,), "w2"))
    assert join_copies(p) == 0


def test_scalar_copies_under_other_presences_join_under_one_name():
    """rowpresence.join_copies renames a scalar: AddLayerNorm's row sum of x + bias (bias present) and of x (absent)
    read the same row buffer after allocation, so the two ReduceSums are one instruction under one name, and the
    chain below them (the mean, the centring Adds) follows, the readers of the renamed scalar reading the kept one:
    one unguarded instruction per step, as a kernel written by hand without the bias. Sums of different rows stay
    apart, and so do two definitions of one name (no single definition to rename)."""
    from opgen.kernel.rowpresence import join_copies

    P, Q = (True,), (False,)

    def prog(*instrs):
        return RowProgram("P", None, instrs=list(instrs), presence=("bias",), served=(P, Q))

    def chain(when, s, m):
        return [Instr("sexpr", m, (), "", f"{s} / 4.0f", space="stat", when=when),
                Instr("vscalar", "w0", ("w0",), "Adds", f"-({m})", when=when)]

    rsum = lambda when, dst, src="w0": Instr("rsum", dst, (src,), space="stat", when=when)  # noqa: E731
    p = prog(rsum((P,), "s0"), rsum((Q,), "s1"), *chain((Q,), "s1", "s2"), *chain((P,), "s0", "s3"))
    assert join_copies(p) == 3
    assert p.instrs == [rsum((), "s0"), *chain((), "s0", "s2")]
    p = prog(rsum((P,), "s0"), rsum((Q,), "s1", "w1"))
    assert join_copies(p) == 0
    twice = Instr("sexpr", "s0", (), "", "s0 * 2.0f", space="stat", when=(P,))
    p = prog(rsum((P,), "s0"), twice, rsum((Q,), "s1"))
    assert join_copies(p) == 0


def test_layer_norm_v4_runs_each_optional_step_under_its_own_input_and_the_rest_once():
    """LayerNormV4 (examples/specs/layer_norm_v4.py: y = (x - mean) * rstd [* gamma] [+ beta]), one class for the
    four presences of gamma / beta: after the join of copies the product by gamma runs when gamma is present (two
    presences: the cube `gamma present`), the sum with beta when beta is present, and the output's cast in every
    presence (once, unguarded) -- by hand from the spec, as a hand-written kernel would guard them."""
    import pathlib

    spec = load_spec(str(pathlib.Path(__file__).resolve().parents[1] / "examples" / "specs" / "layer_norm_v4.py"))
    unit = compile_unit(spec)
    progs = [p for p in unit.lowered.programs.values() if getattr(p, "presence", ())]
    assert progs, "LayerNormV4 lowers one program serving the presences"
    for p in progs:
        pres = p.presence
        assert pres == ("gamma", "beta")
        row_ops = [i for i in p.instrs if i.kind == "vbin" and any(s.startswith("c") for s in i.srcs)]
        by_when = sorted((i.op, tuple(sorted(i.when))) for i in row_ops)
        g_on = tuple(sorted(w for w in p.served if w[0]))
        b_on = tuple(sorted(w for w in p.served if w[1]))
        assert by_when == sorted([("Mul", g_on), ("Add", b_on)]), by_when
        stores = [i for i in p.instrs if i.kind == "store"]
        assert len(stores) == 1 and stores[0].when == (), stores
