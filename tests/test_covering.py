"""tests/covering.py: the pairwise covering arrays the interpreter matrices run (tests/test_norm_rope_concat.py)."""

from __future__ import annotations

import itertools

from covering import all_pairs, pairwise, uncovered

FACTORS = {"dtype": ["float16", "bfloat16", "float32"], "a": [0, 1, 2], "b": [0, 1, 2], "c": [0, 1, 2], "d": [0, 1],
           "e": [False, True]}


def test_every_pair_of_values_is_in_some_row_and_the_array_is_small():
    rows = pairwise(FACTORS)
    assert uncovered(rows, FACTORS) == set()
    for (a, x), (b, y) in all_pairs(FACTORS):      # checked directly too, not only through uncovered()
        assert any(r[a] == x and r[b] == y for r in rows), (a, x, b, y)
    assert all(set(r) == set(FACTORS) and all(r[k] in FACTORS[k] for k in r) for r in rows)
    full = len(list(itertools.product(*FACTORS.values())))
    assert 9 <= len(rows) <= 16 < full == 324


def test_a_missing_pair_is_reported():
    rows = pairwise(FACTORS)
    pair = (("dtype", "float32"), ("e", True))
    cut = [r for r in rows if not (r["dtype"] == "float32" and r["e"] is True)]
    assert pair in uncovered(cut, FACTORS)


def test_must_rows_are_kept_first_and_completed():
    must = [{"dtype": "bfloat16", "a": 2, "b": 2, "c": 2, "d": 1, "e": True}, {"dtype": "float32", "a": 0}]
    rows = pairwise(FACTORS, must=must)
    assert rows[0] == must[0]
    assert rows[1]["dtype"] == "float32" and rows[1]["a"] == 0 and set(rows[1]) == set(FACTORS)
    assert uncovered(rows, FACTORS) == set()
    assert pairwise(FACTORS, must=must) == rows     # deterministic


def test_two_factors_give_their_full_product():
    f = {"x": [1, 2, 3], "y": ["p", "q"]}
    assert sorted((r["x"], r["y"]) for r in pairwise(f)) == sorted(itertools.product(f["x"], f["y"]))
