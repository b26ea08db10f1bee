"""Compile-time proof that an op's UB plan fits for every shape its spec allows.

For each platform of the spec's SoCs and each dtype row, the tiling program is evaluated with every dim at its
minimum (the base case), with every unbounded dim at 2^31 - 1 (it must not break the plan), and with every
bounded dim at its declared maximum and at probe values below it (powers of two and their
neighbours), the other dims at 1. The plans' UB footprints grow monotonically with the bounded dims
(column slices and row strides are non-decreasing in H or D), so the maximum is the worst case; the
probes guard that argument. A row can be a product of dims (merged trailing axes H * W, a group's C / G * L), so
every pair of bounded dims is also probed at its maxima together (the others at their minimum); where the spec's
relations (spec.require) refuse that corner, each of the two is lowered in turn to the largest value they accept,
so a bound on the product is probed where it binds. A failure is a SpecError at the dim's declaration line naming the platform,
the dtype row, the bound and the largest value that fits on every platform and dtype row of the spec (binary
search), so the suggested bound is accepted.
"""

from __future__ import annotations

from opgen.dsl.diagnostics import spec_error
from opgen.errors import OpgenError, SpecError
from opgen.platforms import PLATFORMS


def _probe_values(mx: int) -> list[int]:
    out = {1, mx, max(1, mx - 1)}
    p = 1
    while p <= mx:
        out |= {p, max(1, p - 1), min(mx, p + 1)}
        p *= 2
    return sorted(out)


def _env(spec, bounded: dict) -> dict:
    env = {v: () for v in spec.variadics}
    for n, d in spec.dims_.items():
        env[n] = bounded.get(n, max(1, d.min) if d.multiple_of is None else max(d.multiple_of, d.min))
    return env


def _valid(spec, env) -> bool:
    """Whether the dims of `env` satisfy every relation the spec requires (spec.require): a probe that breaks one
    is a call the aclnn layer refuses before any tiling."""
    for c, *_rest in getattr(spec, "constraints", ()):
        try:
            if not c.holds(env):
                return False
        except (SpecError, KeyError):   # a relation over a variadic group the probe leaves empty: not judged here
            continue
    return True


def _eval(spec, prog, inputs_map, env, dtypes, plat) -> dict:
    """The tiling program's variables without the domain and fit checks of `evaluate` (the proof judges
    `fits` itself and may probe values outside a dim's max). When an input depends on the attrKey (specialisations
    on different row domains), every static attribute combination is evaluated and the first that does not fit is
    returned (else the last)."""
    from opgen.tiling.emit import program_inputs

    combos = [None]
    if any(isinstance(h, tuple) and h[0] == "by_attr_key" for h in inputs_map.values()) or \
            any(a.default is None and len(a.choices) > 1 for a in spec.static_attrs):   # required: no default key
        names = [a.name for a in spec.static_attrs]   # the combinations a specialisation has (checks pass)
        combos = [dict(zip(names, c)) for c in dict.fromkeys(k.static for k in spec.keys())]
    out = {}
    for attrs in combos:
        out = prog.evaluate(program_inputs(spec, prog, inputs_map, env, dtypes, plat, attrs))
        if not out.get("fits", 1):
            return out
    return out


def _largest_fit(spec, prog, inputs_map, plats, name: str, hi: int, multiple_of) -> int:
    """The largest value of dim `name` up to `hi` whose plan fits on every platform of `plats` and every dtype row
    (binary search per combination, each bounded by the previous answer, footprints assumed monotonic), rounded
    down to `multiple_of`: a bound the proof suggests holds for the whole spec. 0 when even 1 does not fit."""
    best = hi
    for plat in plats:
        for row in spec.dtype_rows:
            lo, top = 0, best
            while lo < top:
                mid = (lo + top + 1) // 2
                ok = _eval(spec, prog, inputs_map, _env(spec, {name: mid}), dict(row), plat)["fits"]
                lo, top = (mid, top) if ok else (lo, mid - 1)
            best = lo
    if multiple_of:
        best -= best % multiple_of
    return best


def prove_ub(spec, prog, inputs_map) -> list[str]:
    """Check the plan for every platform/dtype row/probe; returns the checked cases (for reports).

    Raises SpecError (spec file:line of the dim, the bound and the largest value that fits)."""
    socs = set(spec.socs)
    plats = [p for p in PLATFORMS.values() if p.soc_key in socs]
    bounded = {n: d for n, d in spec.dims_.items() if d.max is not None}
    checked = []
    for plat in plats:  # the base case, every dim at its minimum (the only one of a spec without dims)
        for row in spec.dtype_rows:
            tl = _eval(spec, prog, inputs_map, _env(spec, {}), dict(row), plat)
            if not tl.get("fits", 1):
                raise spec_error(spec.loc, f"UB overflow: on {plat.name} ({plat.ub_bytes} B UB) the tiling plan does "
                                 f"not fit even with every dim at its minimum",
                                 "the kernel holds more than UB for one row: fewer outputs or temporaries per kernel")
            checked.append(f"{plat.name} {row} smallest")
    for plat in plats:  # a dim without max= must not be able to break the plan
        for row in spec.dtype_rows:
            for name, d in spec.dims_.items():
                if d.max is not None:
                    continue
                env = _env(spec, {name: 2**31 - 1})
                try:
                    tl = _eval(spec, prog, inputs_map, env, dict(row), plat)
                except OpgenError:
                    tl = {"fits": 0}
                checked.append(f"{plat.name} {row} {name}={2**31 - 1}")
                if not tl.get("fits", 1):
                    raise spec_error(d.loc, f"UB overflow: {name} has no max= and the tiling plan does not fit for "
                                            f"{name}={2**31 - 1} on {plat.name}",
                                     f"declare max= for {name} (the UB proof needs a bound)")
    for plat in plats:
        for row in spec.dtype_rows:
            for name, d in bounded.items():
                for v in _probe_values(d.max):
                    if d.multiple_of and v % d.multiple_of:
                        continue
                    if not _valid(spec, _env(spec, {name: v})):
                        continue   # a call the spec's relations refuse (C % G == 0 with G > C) has no plan
                    tl = _eval(spec, prog, inputs_map, _env(spec, {name: v}), dict(row), plat)
                    if not tl.get("fits", 1):
                        lo = _largest_fit(spec, prog, inputs_map, plats, name, v - 1, d.multiple_of)
                        combo = ", ".join(f"{k}={t.long_name}" for k, t in row.items())
                        raise spec_error(
                            d.loc, f"UB overflow: on {plat.name} ({plat.ub_bytes} B UB) with {combo} the tiling "
                                   f"plan does not fit for {name}={v} (declared max={d.max})",
                            f"lower max= of {name} to {lo} or give the tiling a plan for longer rows", arg="max")
                    checked.append(f"{plat.name} {row} {name}={v}")
    for a, b, env in _pair_corners(spec, bounded):
        for plat in plats:
            for row in spec.dtype_rows:
                tl = _eval(spec, prog, inputs_map, env, dict(row), plat)
                if not tl.get("fits", 1):
                    combo = ", ".join(f"{k}={t.long_name}" for k, t in row.items())
                    raise spec_error(
                        bounded[b].loc, f"UB overflow: on {plat.name} ({plat.ub_bytes} B UB) with {combo} the tiling "
                                        f"plan does not fit for {a}={env[a]} and {b}={env[b]} together (each fits "
                                        f"alone at its max)",
                        f"bound what they make together, e.g. spec.require({a} * {b} <= N, ...) with the largest N "
                        f"that fits, or lower max= of {a} or {b}")
                checked.append(f"{plat.name} {row} {a}={env[a]},{b}={env[b]}")
    return checked


def _pair_corners(spec, bounded: dict) -> list[tuple[str, str, dict]]:
    """(a, b, env) for every pair of bounded dims: both at their max, the others at their minimum; when the spec's
    relations refuse that, each of the two lowered in turn (binary search, relations assumed monotonic in it) to
    the largest value they accept with the other at its max. Deduplicated."""
    out, seen = [], set()
    names = sorted(bounded)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            top = {a: bounded[a].max, b: bounded[b].max}
            envs = [_env(spec, top)]
            if not _valid(spec, envs[0]):
                envs = []
                for low, high in ((a, b), (b, a)):
                    lo, hi = 0, bounded[low].max
                    while lo < hi:
                        mid = (lo + hi + 1) // 2
                        lo, hi = (mid, hi) if _valid(spec, _env(spec, {**top, low: mid})) else (lo, mid - 1)
                    if lo >= 1:
                        envs.append(_env(spec, {**top, low: lo}))
            for env in envs:
                key = tuple(sorted(env.items(), key=str))
                if key not in seen:
                    seen.add(key)
                    out.append((a, b, env))
    return out
