"""Compile-time proof that an op's UB plan fits for every shape its spec allows.

For each platform of the spec's SoCs and each dtype row, the tiling program is evaluated with every dim at its
minimum (the base case), with every unbounded dim at 2^31 - 1 (it must not break the plan), and with every
bounded dim at its declared maximum and at probe values below it (powers of two and their
neighbours), the other dims at 1. The plans' UB footprints grow monotonically with the bounded dims
(column slices and row strides are non-decreasing in H or D), so the maximum is the worst case; the
probes guard that argument. A row can be a product of dims (merged trailing axes H * W, a group's C / G * L), so
every pair of bounded dims is also probed at its maxima together (the others at their minimum); where the spec's
relations (spec.require) refuse that corner, each of the two is lowered in turn to the largest value they accept,
with the other at each of its probe values, so a bound on the product is probed along its edge. A pair that does
not fit is refused with the largest N for which spec.require(a * b <= N) makes those corners fit. A failure is a
SpecError at the dim's declaration line naming the platform, the dtype row, the bound and the largest value that
fits on every platform and dtype row of the spec (binary search), so the suggested bound is accepted.
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
    is a call the aclnn layer refuses before any tiling. A relation of some modes only (require(when=)) is not
    assumed: the proof covers every mode."""
    for c in (r.constraint for r in getattr(spec, "relations", ()) if r.when is None):
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
    returned (else the last). A combination whose relations of some modes (require(when=), _mode_valid) refuse
    `env` is not evaluated: no call of that mode has those dims ({} when no combination admits them)."""
    from opgen.tiling.emit import program_inputs

    combos = [None]
    moded = [r for r in getattr(spec, "relations", ()) if r.when is not None]
    if any(isinstance(h, tuple) and h[0] == "by_attr_key" for h in inputs_map.values()) or moded or \
            any(a.default is None and len(a.choices) > 1 for a in spec.static_attrs):   # required: no default key
        names = [a.name for a in spec.static_attrs]   # the combinations a specialisation has (checks pass)
        combos = [dict(zip(names, c)) for c in dict.fromkeys(k.static for k in spec.keys())]
    out = {}
    for attrs in combos:
        if attrs is not None and not _mode_valid(spec, moded, attrs, env):
            continue
        out = prog.evaluate(program_inputs(spec, prog, inputs_map, env, dtypes, plat, attrs))
        if not out.get("fits", 1):
            return out
    return out


def _mode_valid(spec, moded, attrs: dict, env: dict) -> bool:
    """Whether `env` satisfies the relations of some modes (`moded`: spec.require(when=)) that apply to a call with
    the static attributes `attrs` and any presence of the optional inputs (a relation applies when its `when` holds
    for every presence the spec's keys have with those attributes: one presence it does not bind may still make the
    call)."""
    statics = tuple(attrs.values())
    presences = list(dict.fromkeys(k.present for k in spec.keys() if k.static == statics)) or [()]
    opts = [i.name for i in spec.inputs if i.optional]

    def present(pr):   # validate's form: every input's name, a required one present
        return {**{i.name: True for i in spec.inputs}, **dict(zip(opts, pr))}

    for r in moded:
        if not all(r.when(attrs, present(pr)) for pr in presences):
            continue
        try:
            if not r.constraint.holds(env):
                return False
        except (SpecError, KeyError):   # a relation over a variadic group the probe leaves empty: not judged here
            continue
    return True


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


def _limit(prog, plat) -> str:
    """How a failed proof names the limit: "UB overflow: on <soc> (<n> B UB)" for a plan that only has to fit the UB
    (the rows families), else the plan's own statement of what `fits` checks (the cube family: L1 / L0 sizes and
    Nd2Nz's 16-bit row pitch), so the message does not blame the UB for another limit."""
    why = next((doc for name, _e, doc in prog.stmts if name == "fits"), "")
    why = why.removeprefix("1 when ").strip()
    if not why or ("UB" in why and "L1" not in why and "Nd2Nz" not in why):
        return f"UB overflow: on {plat.name} ({plat.ub_bytes} B UB)"
    return f"tiling limit: on {plat.name}, where the plan requires that {why},"


def prove_ub(spec, prog, inputs_map, suggest: bool = True) -> list[str]:
    """Check the plan for every platform/dtype row/probe; returns the checked cases (for reports).

    Raises SpecError (spec file:line of the dim, the bound and the largest value that fits). `suggest`: False for a
    caller that only asks whether the plan fits and discards the error (opgen.tiling.rowkernel.with_streaming): the
    failure is the same SpecError at the same line with the same first sentence, but without the searches for the
    largest bound that fits (_largest_fit, _largest_product: most of a failing proof's time), so its fix names no
    number."""
    socs = set(spec.socs)
    plats = [p for p in PLATFORMS.values() if p.soc_key in socs]
    bounded = {n: d for n, d in spec.dims_.items() if d.max is not None}
    checked = []
    for plat in plats:  # the base case, every dim at its minimum (the only one of a spec without dims)
        for row in spec.dtype_rows:
            tl = _eval(spec, prog, inputs_map, _env(spec, {}), dict(row), plat)
            if not tl.get("fits", 1):
                limit = _limit(prog, plat)
                raise spec_error(spec.loc, f"{limit} the tiling plan does not fit even with every dim at its minimum",
                                 "the kernel holds more than UB for one row: fewer outputs or temporaries per kernel"
                                 if limit.startswith("UB overflow") else
                                 "declare each dim the requirement names so that its smallest value meets it "
                                 "(spec.dim(..., min=, multiple_of=))")
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
                    if (d.multiple_of and v % d.multiple_of) or v < d.min:
                        continue
                    if not _valid(spec, _env(spec, {name: v})):
                        continue   # a call the spec's relations refuse (C % G == 0 with G > C) has no plan
                    tl = _eval(spec, prog, inputs_map, _env(spec, {name: v}), dict(row), plat)
                    if not tl.get("fits", 1):
                        lo = _largest_fit(spec, prog, inputs_map, plats, name, v - 1, d.multiple_of) if suggest else 0
                        combo = "".join(f" with {k}={t.long_name}" if not i else f", {k}={t.long_name}"
                                        for i, (k, t) in enumerate(row.items()))
                        raise spec_error(
                            d.loc, f"{_limit(prog, plat)}{combo} the tiling "
                                   f"plan does not fit for {name}={v} (declared max={d.max})",
                            f"lower max= of {name} to {lo} or give the tiling a plan for longer rows"
                            if lo >= max(1, d.min) else
                            f"lower max= of {name} or give the tiling a plan for longer rows" if not suggest else
                            f"no max= of {name} helps (its smallest values do not fit either): declare {name} so that "
                            f"the requirement holds (multiple_of=, min=)", arg="max")
                    checked.append(f"{plat.name} {row} {name}={v}")
    for a, b, env in _pair_corners(spec, bounded):
        for plat in plats:
            for row in spec.dtype_rows:
                tl = _eval(spec, prog, inputs_map, env, dict(row), plat)
                if not tl.get("fits", 1):
                    combo = "".join(f" with {k}={t.long_name}" if not i else f", {k}={t.long_name}"
                                        for i, (k, t) in enumerate(row.items()))
                    n = _largest_product(spec, prog, inputs_map, plats, bounded, a, b) if suggest else 0
                    rel = (f"spec.require({a} * {b} <= {n}, \"{_param_of(spec, a, b)}\", "
                           f"\"{a} * {b} must be at most {n}\")")
                    fix = (f"bound what they make together: {rel} (the largest that fits), or lower max= of {a} or {b}"
                           if n >= 1 else
                           f"lower max= of {a} or {b}")
                    raise spec_error(
                        bounded[b].loc, f"{_limit(prog, plat)}{combo} the tiling "
                                        f"plan does not fit for {a}={env[a]} and {b}={env[b]} together", fix)
                checked.append(f"{plat.name} {row} {a}={env[a]},{b}={env[b]}")
    return checked


def _pair_corners(spec, bounded: dict) -> list[tuple[str, str, dict]]:
    """(a, b, env) for every pair of bounded dims: both at their max, the others at their minimum; when the spec's
    relations refuse that, each of the two lowered in turn (binary search, relations assumed monotonic in it) to
    the largest value they accept with the other at each of its probe values (_corner_envs). Deduplicated."""
    out, seen = [], set()
    names = sorted(bounded)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            for env in _corner_envs(spec, bounded, a, b):
                key = tuple(sorted(env.items(), key=str))
                if key not in seen:
                    seen.add(key)
                    out.append((a, b, env))
    return out


def _corner_envs(spec, bounded: dict, a: str, b: str, cap: int | None = None) -> list[dict]:
    """The corners the proof probes for the pair (a, b) (see _pair_corners): both at their max, or, when the
    relations refuse that, for each probe value of one (powers of two, their neighbours, its max) the other at the
    largest value they accept, so a bound on a * b is probed near its edge (H=65, W=126 under H * W <= 8191), not
    only at H=max, W=1. With `cap`, as if the spec also required a * b <= cap (the relation the pair's overflow
    message suggests)."""
    def valid(env):
        return _valid(spec, env) and (cap is None or env[a] * env[b] <= cap)

    top = {a: bounded[a].max, b: bounded[b].max}
    if valid(_env(spec, top)):
        return [_env(spec, top)]
    envs = []
    for low, high in ((a, b), (b, a)):
        for v in _allowed(bounded[high], _probe_values(bounded[high].max)):   # a product bound binds inside
            m = bounded[low].multiple_of or 1   # the low dim's values: multiples of m in [its min, its max]
            lo, hi = (max(1, bounded[low].min) + m - 1) // m - 1, bounded[low].max // m
            first = lo + 1
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if valid(_env(spec, {**top, high: v, low: mid * m})) else (lo, mid - 1)
            if lo >= first:
                envs.append(_env(spec, {**top, high: v, low: lo * m}))
    return envs


def _allowed(d, values) -> list[int]:
    """The values a dim declaration allows (at least its min, a multiple of its multiple_of)."""
    return [v for v in values if v >= max(1, d.min) and not (d.multiple_of and v % d.multiple_of)]


def _param_of(spec, a: str, b: str) -> str:
    """The input a relation between dims a and b blames: the first whose shape holds both, else either, else the
    first input ("x" for a spec without inputs)."""
    names = [(i.name, {str(d) for s in i.shapes for d in s}) for i in spec.inputs]
    for want in ({a, b}, {a}, {b}):
        for n, ds in names:
            if want <= ds:
                return n
    return names[0][0] if names else "x"


def _largest_product(spec, prog, inputs_map, plats, bounded: dict, a: str, b: str) -> int:
    """The largest N such that, were the spec to require a * b <= N, every corner the proof probes for the pair
    fits on every platform and dtype row (binary search over N, footprints assumed monotonic in it): the bound the
    pair's overflow message suggests, so writing it makes the proof pass for this pair. 0 when none does."""
    def fits(cap):
        return all(_eval(spec, prog, inputs_map, env, dict(row), plat).get("fits", 1)
                   for env in _corner_envs(spec, bounded, a, b, cap) for plat in plats for row in spec.dtype_rows)

    lo, hi = 0, bounded[a].max * bounded[b].max
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo
