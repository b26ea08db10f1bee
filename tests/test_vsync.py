"""The vector-pipe barrier pass (opgen.kernel.vsync): a PipeBarrier<PIPE_V>() exactly where a later vector statement
reads or writes a region an earlier one since the last barrier wrote, or writes one it read (docs/reference/ascendc.md
§1.6); none between independent statements; a barrier at a stream's end and at block edges while work is pending.
Random streams are checked pair by pair against that definition (soundness) and barrier by barrier (each one is
needed by some pair it separates)."""

from __future__ import annotations

import random

import pytest

from opgen.kernel.isa import INSTRS, Op
from opgen.kernel.vsync import BARRIER, instr_stmt, place_barriers, region, vstmt


def _add(dst, a, b):
    ex = {"dst": dst, "src0": a, "src1": b, "count": "n"}
    return instr_stmt(INSTRS[Op.ADD], INSTRS[Op.ADD].stmt(**ex), ex)


def test_regions_of_operand_expressions():
    assert region("w_[3]") == "w_[3]" and region("Reg(2)[i * keys]") == "Reg(2)" and region("Head(1)") == "Head(1)"
    assert region("rowIn_x[i * rowStride_]") == "rowIn_x" and region("tileQue0T[i * 8]") == "tileQue0T"
    assert region("red_") == "red_"
    assert region("foo_[2]") == "foo_"   # not a slot array: a view of the whole tensor


def test_raw_war_waw_get_a_barrier_independent_ones_do_not():
    raw = place_barriers([_add("w_[0]", "w_[1]", "w_[1]"), _add("w_[2]", "w_[0]", "w_[0]")], tail=False)
    assert raw == ["Add(w_[0], w_[1], w_[1], n);", BARRIER, "Add(w_[2], w_[0], w_[0], n);"]
    war = place_barriers([_add("w_[0]", "w_[1]", "w_[1]"), _add("w_[1]", "w_[2]", "w_[2]")], tail=False)
    assert BARRIER in war
    waw = place_barriers([_add("w_[0]", "w_[1]", "w_[1]"), _add("w_[0]", "w_[2]", "w_[2]")], tail=False)
    assert BARRIER in waw
    rar = place_barriers([_add("w_[0]", "w_[1]", "w_[1]"), _add("w_[2]", "w_[1]", "w_[1]")], tail=False)
    assert BARRIER not in rar
    # views of one tensor at run-time offsets overlap
    views = place_barriers([_add("t[i]", "w_[1]", "w_[1]"), _add("w_[2]", "t[j]", "t[j]")], tail=False)
    assert BARRIER in views


def test_tail_edges_redundant_and_full_barriers():
    s = [_add("w_[0]", "w_[1]", "w_[1]")]
    assert place_barriers(s) == [s[0].lines[0], BARRIER]
    assert place_barriers([BARRIER, BARRIER]) == []   # nothing pending: redundant
    out = place_barriers([_add("w_[0]", "w_[1]", "w_[1]"), "if (c) {", _add("w_[3]", "w_[4]", "w_[4]"), "}"])
    assert out == ["Add(w_[0], w_[1], w_[1], n);", BARRIER, "if (c) {", "Add(w_[3], w_[4], w_[4], n);", BARRIER, "}"]
    full = place_barriers([_add("w_[0]", "w_[1]", "w_[1]"), "PipeBarrier<PIPE_ALL>();", _add("w_[1]", "w_[0]", "w_[0]")],
                          tail=False)
    assert BARRIER not in full
    done = vstmt("const float s = RowSum(w_[0], n);", reads=["w_[0]"], writes=["red_"], after="done")
    assert place_barriers([done, _add("w_[0]", "w_[1]", "w_[1]")], tail=False) == [done.lines[0], "Add(w_[0], w_[1], w_[1], n);"]
    own = vstmt("LoadRow<T>(w_[0], g, n);", writes=["w_[0]"], after="barrier")
    assert place_barriers([_add("w_[1]", "w_[2]", "w_[2]"), own, _add("w_[2]", "w_[0]", "w_[0]")], tail=False) == \
        ["Add(w_[1], w_[2], w_[2], n);", "LoadRow<T>(w_[0], g, n);", "Add(w_[2], w_[0], w_[0], n);"]
    with pytest.raises(ValueError):
        vstmt("x;", after="later")


@pytest.mark.parametrize("seed", range(20))
def test_random_streams_against_the_definition(seed):
    rng = random.Random(seed)
    bufs = [f"w_[{k}]" for k in range(4)] + ["rowIn_x[i]", "rowIn_x[i + 8]"]
    stream = []
    for _ in range(30):
        d, a, b = rng.choice(bufs), rng.choice(bufs), rng.choice(bufs)
        stream.append(_add(d, a, b) if rng.random() < 0.9 else rng.choice(["x = 1;", BARRIER]))
    out = place_barriers(stream, tail=True)
    # the vector statements in order, with the barriers placed before each
    seq, bars = [], 0
    for line in out:
        if line == BARRIER:
            bars += 1
        elif line.startswith("Add("):
            seq.append((line, bars))
    stmts = [s for s in stream if not isinstance(s, str)]
    assert [x for x, _ in seq] == [s.lines[0] for s in stmts]
    conflict = [[(a.reads & b.writes) or (a.writes & b.writes) or (a.writes & b.reads) for a in stmts] for b in stmts]
    for j in range(len(stmts)):
        for i in range(j):
            if conflict[j][i]:
                assert seq[i][1] < seq[j][1], f"{stmts[j].lines[0]} after {stmts[i].lines[0]} without a barrier"
    # every barrier placed before statement j is needed: some statement since the previous barrier conflicts with j
    for j in range(len(stmts)):
        if j and seq[j][1] > seq[j - 1][1]:
            since = [i for i in range(j) if seq[i][1] == seq[j - 1][1]]
            assert any(conflict[j][i] for i in since)
    assert out[-1] == BARRIER
