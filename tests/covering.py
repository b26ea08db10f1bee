"""Test helper: covering arrays of strength 2 (pairwise) over named factors, made by a deterministic greedy.

`pairwise(factors, must=())` returns rows (dicts {factor: value}) such that every pair of values of any two
factors appears together in at least one row — hence every single value too — starting from the rows in
`must` (the specific cases a test has to keep, completed greedily when they name only some factors). A full
product of n factors of k values has k^n rows; a pairwise array about k^2 log n. `uncovered(rows, factors)`
lists the pairs a row set misses (what tests/test_covering.py asserts to be empty).
"""

from __future__ import annotations

import itertools


def _pairs_of(row: dict, names: list) -> set:
    return {((a, row[a]), (b, row[b])) for a, b in itertools.combinations(names, 2)}


def all_pairs(factors: dict) -> set:
    """Every ((factor a, value), (factor b, value)) pair of two distinct factors (a before b in `factors`)."""
    names = list(factors)
    return {((a, x), (b, y)) for a, b in itertools.combinations(names, 2) for x in factors[a] for y in factors[b]}


def uncovered(rows: list, factors: dict) -> set:
    """The pairs of `factors` that no row of `rows` holds (empty for a covering array of strength 2)."""
    names = list(factors)
    todo = all_pairs(factors)
    for r in rows:
        todo -= _pairs_of(r, names)
    return todo


def pairwise(factors: dict, must=()) -> list:
    """A covering array of strength 2 over `factors` ({name: [values]}, at least one value each), deterministic.

    must: rows (dicts naming some or all factors) that are kept first, each completed with the values covering
    the most uncovered pairs. Then, while a pair is uncovered, a row is built around the first uncovered pair
    (in factor and value order): the other factors, in order, take the value that covers the most uncovered
    pairs with the values already chosen (ties: the value covered least so far, then the first)."""
    names = list(factors)
    todo = all_pairs(factors)
    used = {(n, v): 0 for n in names for v in factors[n]}
    rows: list[dict] = []

    def complete(row: dict) -> dict:
        for n in names:
            if n in row:
                continue
            best = None
            for k, v in enumerate(factors[n]):
                gain = sum(1 for m, w in row.items()
                           if (((m, w), (n, v)) if names.index(m) < names.index(n) else ((n, v), (m, w))) in todo)
                score = (gain, -used[(n, v)], -k)
                if best is None or score > best[0]:
                    best = (score, v)
            row[n] = best[1]
        return row

    def add(row: dict) -> None:
        rows.append(row)
        todo.difference_update(_pairs_of(row, names))
        for n in names:
            used[(n, row[n])] += 1

    for m in must:
        unknown = set(m) - set(names)
        if unknown:
            raise KeyError(f"must row names unknown factors {sorted(unknown)}")
        add(complete(dict(m)))
    order = {p: k for k, p in enumerate(sorted(all_pairs(factors), key=lambda p: (
        names.index(p[0][0]), names.index(p[1][0]), factors[p[0][0]].index(p[0][1]), factors[p[1][0]].index(p[1][1]))))}
    while todo:
        (a, x), (b, y) = min(todo, key=order.__getitem__)
        add(complete({a: x, b: y}))
    return rows
