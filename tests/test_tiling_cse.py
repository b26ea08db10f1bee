"""Common-subexpression naming of the TilingFunc's statements (opgen.tiling.program.name_repeats, printed by
TilingProgram.to_cpp) and the folds that go with it (program.fold).

- values: hand-computed for small programs; for random programs with shared sub-expressions, the named program's
  outcome (every variable, or a division error) equals the original tree's on every input tried, zero divisors
  among them: a local never evaluates what a ?: branch or the right side of && / || would have skipped;
- the emitted statements compile (g++ -Werror, every local read) and print the hand-computed values;
- a sub-expression equal to an earlier statement is read from it; names spell short expressions, else name the
  statement of first use; reserved names are never taken;
- a doc too long to sit beside its statement in 120 columns goes on the line above.
"""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from opgen.tiling.program import (Lit, Op, TilingProgram, Var, align_up, ceil_div, emax, emin, fold, name_repeats,
                                  select)


def _program(stmts) -> TilingProgram:
    p = TilingProgram("t")
    for n in ("rows", "rowCores", "ubBytes"):
        p.input(n, "test input")
    for name, expr, doc in stmts:
        p.stmts.append((name, expr, doc))   # as given: no fold, so the trees stay as built
    return p


def _named(p: TilingProgram) -> TilingProgram:
    q = _program(name_repeats(p.stmts, set(p.inputs)))
    return q


ROWS, CORES, UB = Var("rows"), Var("rowCores"), Var("ubBytes")


def test_repeated_ceil_div_is_one_local():
    per = ceil_div(ROWS, CORES)
    p = _program([("passes", per * 3 + per, "passes"), ("tail", emin(per, 255), "tail")])
    out = name_repeats(p.stmts, set(p.inputs))
    assert [n for n, _, _ in out] == ["rowsPerRowCoresCeil", "passes", "tail"]
    assert out[0][1] == per and out[0][2] == "in passes, tail"
    assert out[1][1] == Var("rowsPerRowCoresCeil") * 3 + Var("rowsPerRowCoresCeil")
    # rows 10, rowCores 3: ceil 4 -> passes 4 * 3 + 4 = 16, tail min(4, 255) = 4
    v = _named(p).evaluate({"rows": 10, "rowCores": 3, "ubBytes": 0})
    assert (v["passes"], v["tail"]) == (16, 4)


def test_earlier_statement_is_read_not_recomputed():
    p = _program([("fixed", ROWS * 8 + 64, ""), ("room", select(UB > ROWS * 8 + 64, UB - (ROWS * 8 + 64), 0), "")])
    out = name_repeats(p.stmts, set(p.inputs))
    assert [n for n, _, _ in out] == ["fixed", "room"]
    assert out[1][1] == select(UB > Var("fixed"), UB - Var("fixed"), 0)
    v = _named(p).evaluate({"rows": 4, "rowCores": 1, "ubBytes": 200})   # fixed 96, room 104
    assert (v["fixed"], v["room"]) == (96, 104)


def test_guarded_division_is_not_hoisted():
    q = (ROWS + 1) // CORES
    p = _program([("perCore", select(CORES > 0, q + q * 2, 0), ""), ("again", select(CORES > 0, q, 7), "")])
    out = name_repeats(p.stmts, set(p.inputs))
    assert [n for n, _, _ in out] == ["perCore", "again"]          # only in ?: branches: stays inline
    v = _named(p).evaluate({"rows": 5, "rowCores": 0, "ubBytes": 0})  # no division by zero on this input
    assert (v["perCore"], v["again"]) == (0, 7)


def test_hoisted_where_first_evaluated_on_every_input():
    q = (ROWS + 1) // CORES
    p = _program([("guarded", select(CORES > 0, q, 0), ""), ("plain", q * 2 + q, ""), ("later", emax(q, 1), "")])
    out = name_repeats(p.stmts, set(p.inputs))
    # the local is defined before `plain` (its first use on every input); `guarded` keeps its own copy
    assert [n for n, _, _ in out] == ["guarded", "rowsPlus1PerRowCores", "plain", "later"]
    assert out[0][1] == p.stmts[0][1]
    v = _named(p).evaluate({"rows": 5, "rowCores": 2, "ubBytes": 0})   # q = 3
    assert (v["guarded"], v["plain"], v["later"]) == (3, 9, 3)


def test_long_expression_is_named_after_the_statement_it_is_a_direct_part_of():
    """A repeated expression too long to spell is named after the first statement having it as a direct operand of
    its root (a factor of costB's product), not after a deeper first user (inside costA's select); with no such
    statement, after its first user; a taken name gets a number."""
    big = UB - (ROWS * 12 + CORES * 4 + 256)
    p = _program([("costA", select(big > 0, big, 1) * 3, ""), ("costB", big * 5, "")])
    out = name_repeats(p.stmts, set(p.inputs))
    assert out[0][0] == "costBDiff" and out[0][1] == big and out[0][2] == "in costA, costB"
    p = _program([("costA", select(big > 0, big, 1) * 3, ""), ("costB", select(big > 1, big, 2) + 1, "")])
    out = name_repeats(p.stmts, set(p.inputs))
    assert out[0][0] == "costADiff" and out[0][1] == big
    taken = name_repeats(p.stmts, set(p.inputs) | {"costADiff"})
    assert taken[0][0] == "costADiff2"


def test_reserved_name_is_not_taken():
    per = ceil_div(ROWS, CORES)
    p = _program([("a", per + 1, ""), ("b", per + 2, "")])
    out = name_repeats(p.stmts, set(p.inputs) | {"rowsPerRowCoresCeil"})
    assert out[0][0] == "aQuotient"


def test_short_repeats_stay_inline():
    p = _program([("a", ROWS * 4 + 1, ""), ("b", ROWS * 4 + 2, "")])    # `rows * 4`: 8 characters
    assert name_repeats(p.stmts, set(p.inputs)) == p.stmts


def test_fold_drops_dead_conditions():
    c = ROWS <= 2040
    assert fold(select(c & 0, 0, 0) * 4) == Lit(0)
    assert fold(select(c, ROWS, ROWS)) == ROWS
    assert fold(c & 1) == c and fold(c | 0) == c and fold(Lit(1) | c) == Lit(1)
    assert fold(ROWS & 1) == Op("&&", (ROWS, Lit(1)))    # an integer's truth is not the integer


def test_docs_go_above_their_statement_whatever_its_length():
    """A doc is a comment line above its statement, short or long: where it goes never depends on the length of
    the names (renaming a dim reorders no line: tests/test_families.py's renaming test)."""
    per = ceil_div(ROWS, CORES)
    long_doc = "x" * 100
    p = _program([("a", per, "short"), ("b", per * 2 + 1, long_doc)])
    lines = p.to_cpp().splitlines()
    assert lines[0] == "    // short" and lines[1] == "    const int64_t a = CeilDiv(rows, rowCores);"
    assert lines[2] == f"    // {long_doc}" and lines[3] == "    const int64_t b = a * 2 + 1;"


def _random_expr(rng, leaves, depth):
    if depth == 0 or rng.random() < 0.2:
        return rng.choice(leaves)
    op = rng.choice(["+", "-", "*", "//", "%", "ceil_div", "align_up", "min", "max", "select", "&&", "||", "<",
                     ">="])
    n = 3 if op == "select" else 2
    return Op(op, tuple(_random_expr(rng, leaves, depth - 1) for _ in range(n)))


def _outcome(p: TilingProgram, inputs, names):
    try:
        v = p.evaluate_tree(inputs)
    except Exception as e:   # noqa: BLE001 - the error kind is compared
        return type(e).__name__
    return {n: v[n] for n in names}


@pytest.mark.parametrize("seed", range(6))
def test_random_programs_keep_their_values(seed):
    rng = random.Random(seed)
    leaves = [ROWS, CORES, UB, Lit(0), Lit(1), Lit(3), Lit(8)]
    shared = [_random_expr(rng, leaves, 3) for _ in range(4)]
    stmts = []
    for k in range(10):
        pool = leaves + shared + [Var(n) for n, _, _ in stmts]
        stmts.append((f"s{k}", _random_expr(rng, pool, 3), ""))
    p = _program(stmts)
    q = _named(p)
    names = [n for n, _, _ in stmts]
    for rows in (0, 1, 7, 40):
        for cores in (0, 1, 3):
            for ub in (0, 5, 1000):
                inputs = {"rows": rows, "rowCores": cores, "ubBytes": ub}
                assert _outcome(q, inputs, names) == _outcome(p, inputs, names), (seed, inputs)


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
@pytest.mark.slow
def test_emitted_statements_compile_and_compute(tmp_path):
    per = ceil_div(ROWS, CORES)
    fixed = ROWS * 8 + 64 + align_up(CORES, 8) * 4
    p = _program([("passes", per * 3 + per, ""), ("room", select(UB > fixed, (UB - fixed) // per, 0), ""),
                  ("left", select(UB > fixed, UB - fixed, 0) + emin(per, 255), "")])
    body = p.to_cpp()
    assert body.count("CeilDiv(rows, rowCores)") == 1
    src = tmp_path / "t.cpp"
    src.write_text("#include <algorithm>\n#include <cstdint>\n#include <cstdio>\n"
                   "inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }\n"
                   "inline int64_t AlignUp(int64_t a, int64_t b) { return CeilDiv(a, b) * b; }\n"
                   "int main(int argc, char**)\n{\n    const int64_t rows = 10 + argc - 1, rowCores = 3, ubBytes = 1000;\n"
                   f"{body}\n"
                   '    std::printf("%lld %lld %lld\\n", (long long)passes, (long long)room, (long long)left);\n}\n')
    exe = tmp_path / "t"
    r = subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr + body
    # rows 10, rowCores 3: ceil 4; fixed 80 + 64 + 8 * 4 = 176; room (1000 - 176) / 4 = 206; left 824 + 4 = 828
    assert subprocess.run([str(exe)], capture_output=True, text=True).stdout.split() == ["16", "206", "828"]
