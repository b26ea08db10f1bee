"""CANN's precision criteria, used by `opgen check` and the tests (tests/precision.py re-exports them).

Source: reference/ada_layer_norm.md §5.5 (CANN ecosystem standard): relative error per element
|actual - golden| / (|golden| + 1e-7); MERE = its mean, MARE = its max; an output passes when MERE < Th and
MARE < 10 Th, Th = 2^-13 (fp32), 2^-10 (fp16), 2^-7 (bf16), against a single higher-precision golden
(here: the interpreter's float64 `exact` mode).

Two refinements for outputs whose exact values cancel to near zero (a LayerNorm backward projection, a
RoPE sum, an S-sum landing near 0). The plain rule divides by |golden| + 1e-7, so on such an element the
unavoidable fp32 compute noise of any implementation (~2^-22 of the output's scale) alone exceeds 10 Th
(measurements: the docstrings of tests/test_ada_layer_norm.py `_assert_precision` and
tests/test_norm_rope_concat.py `_cann_check`):

- small values (CANN's commercial standard split): elements with |golden| below 2^-11 (fp16), 2^-8 (bf16),
  2^-14 (fp32) are judged by the mixed-tolerance bound |a - g| <= Th (1 + |g|), all others by the plain rule;
- floored: the plain rule with each denominator floored at 2^-12 of the output's largest |golden| (where
  fp32 noise at the output's scale reaches the fp32 MARE bound).

A third rule for outputs computed from an intermediate the op itself rounds to T before a matmul (NSA's P and dS,
reference/nsa_selected_attention.md §2.4-§2.5; in the tensor IR a cast to a 16-bit type with a round mode whose
result is widened again, not an output): their error is absolute-type, ~u_T x the output's rms (each rounded P or
dS element carries a relative error u_T into a signed sum), while the exact outputs are signed sums with elements
arbitrarily close to 0, so |err| / (|g| + 1e-7) explodes there and even the interpreter's own device mode fails the
plain, floored and small-value rules (measured in the module doc of tests/test_nsa.py: forward O MARE up to 13.7
fp16 / 481 bf16, dq MARE up to 965). The rounded-intermediate rule (the one tests/test_nsa.py applies to the device
mode, `_assert_device_close`): relative L2 error < Th, at least 99 % of the elements within the mixed tolerance
|a - g| <= Th (rms + |g|), and every |a - g| < max(0.1 rms, 32 ulp_T(|g|)), rms = the golden's root mean square.
Measured device-mode values: relative L2 0.30 Th (fp16) / 0.33 Th (bf16). It is applied only to outputs keyed by
`rounded_intermediate_outputs` (opgen check passes `rounded_intermediate=True` for them).

`compare_output` is `opgen check`'s verdict on one output: finite, and within the floored or the
small-value rule (the plain rule implies the floored one), or, for outputs downstream of a rounded intermediate,
the rounded-intermediate rule. All metrics are computed in float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from opgen.ir.dtypes import DTypeVar, dtype_name

THRESHOLD = {"float32": 2.0**-13, "float16": 2.0**-10, "bfloat16": 2.0**-7}
"""Th per output dtype (dtype long name): MERE < Th and MARE < 10 Th."""
SMALL_VALUE = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-14}
"""|golden| below which the small-value rule judges an element by |a - g| <= Th (1 + |g|)."""
CANCEL_FLOOR = 2.0**-12
"""The floored rule's denominator floor, as a fraction of the output's max |golden|."""
EPS = 1e-7
"""Added to every denominator of the relative error (CANN's definition)."""


def _pair(actual, golden) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(actual, dtype=np.float64)
    g = np.asarray(golden, dtype=np.float64)
    if a.shape != g.shape:
        raise ValueError(f"shape {a.shape} != golden shape {g.shape}")
    return a, g


def mere_mare(actual, golden) -> tuple[float, float]:
    """(MERE, MARE) of `actual` against `golden` (same shape, any numeric dtype; converted to float64).

    Per element |a - g| / (|g| + 1e-7); (0, 0) for empty arrays. Raises ValueError on a shape mismatch."""
    a, g = _pair(actual, golden)
    if a.size == 0:
        return 0.0, 0.0
    rel = np.abs(a - g) / (np.abs(g) + EPS)
    return float(rel.mean()), float(rel.max())


def rel_l2(actual, golden) -> float:
    """Relative L2 error ||a - g||_2 / ||g||_2 in float64 (the absolute ||a - g||_2 when ||g||_2 is 0; 0 for
    empty arrays). Raises ValueError on a shape mismatch."""
    a, g = _pair(actual, golden)
    if a.size == 0:
        return 0.0
    den = float(np.linalg.norm(g.ravel()))
    num = float(np.linalg.norm((a - g).ravel()))
    return num / den if den > 0 else num


def rel_linf(actual, golden) -> float:
    """Relative max-norm error max|a - g| / max|g| in float64 (the absolute max|a - g| when max|g| is 0; 0 for
    empty arrays). Raises ValueError on a shape mismatch."""
    a, g = _pair(actual, golden)
    if a.size == 0:
        return 0.0
    den = float(np.max(np.abs(g)))
    num = float(np.max(np.abs(a - g)))
    return num / den if den > 0 else num


def plain_failure(actual, golden, dtype: str) -> str | None:
    """Why `actual` fails the plain rule (MERE < Th, MARE < 10 Th, finite) for dtype "float32" / "float16" /
    "bfloat16", or None when it passes. Raises ValueError (shape) and KeyError (dtype)."""
    th = THRESHOLD[dtype]
    a, g = _pair(actual, golden)
    if not np.isfinite(a).all():
        return "non-finite values"
    mere, mare = mere_mare(a, g)
    if mere < th and mare < 10 * th:
        return None
    return f"MERE {mere:.3g} (< {th:.3g}), MARE {mare:.3g} (< {10 * th:.3g})"


def small_value_failure(actual, golden, dtype: str) -> str | None:
    """Why `actual` fails the small-value split (module doc), or None: elements with |g| < SMALL_VALUE[dtype]
    need |a - g| <= Th (1 + |g|), the others the plain rule. Raises ValueError (shape) and KeyError (dtype)."""
    a, g = _pair(actual, golden)
    if not np.isfinite(a).all():
        return "non-finite values"
    small = np.abs(g) < SMALL_VALUE[dtype]
    why = plain_failure(a[~small], g[~small], dtype)
    if why is not None:
        return why
    th = THRESHOLD[dtype]
    err = np.abs(a[small] - g[small])
    if (err <= th * (1 + np.abs(g[small]))).all():
        return None
    return f"small-value abs error {err.max():.3g} > {th:.3g}"


def floored_failure(actual, golden, dtype: str) -> str | None:
    """Why `actual` fails the floored rule (module doc), or None: per element |a - g| / (max(|g|, 2^-12 max|g|)
    + 1e-7), mean < Th and max < 10 Th. Raises ValueError (shape) and KeyError (dtype)."""
    th = THRESHOLD[dtype]
    a, g = _pair(actual, golden)
    if not np.isfinite(a).all():
        return "non-finite values"
    if a.size == 0:
        return None
    floor = CANCEL_FLOOR * float(np.max(np.abs(g)))
    rel = np.abs(a - g) / (np.maximum(np.abs(g), floor) + EPS)
    mere_f, mare_f = float(rel.mean()), float(rel.max())
    if mere_f < th and mare_f < 10 * th:
        return None
    mere, mare = mere_mare(a, g)
    return (f"floored MERE {mere_f:.3g} (< {th:.3g}), floored MARE {mare_f:.3g} (< {10 * th:.3g}); "
            f"plain MERE {mere:.3g}, MARE {mare:.3g}")


MIXED_FRACTION = 0.99
"""Rounded-intermediate rule: the fraction of elements that must lie within Th (rms + |g|)."""
MAX_RMS, MAX_ULPS = 0.1, 32
"""Rounded-intermediate rule: every |a - g| < max(MAX_RMS rms, MAX_ULPS ulp_T(|g|))."""
_MANTISSA = {"float16": 10, "bfloat16": 7, "float32": 23}
_MIN_EXP = {"float16": -14, "bfloat16": -126, "float32": -126}


def ulp(x, dtype: str) -> np.ndarray:
    """Spacing of dtype ("float16", "bfloat16", "float32") at |x| (the smallest normal's spacing below it)."""
    e = np.floor(np.log2(np.maximum(np.abs(np.asarray(x, np.float64)), 2.0 ** _MIN_EXP[dtype])))
    return 2.0 ** (e - _MANTISSA[dtype])


def rounded_intermediate_failure(actual, golden, dtype: str) -> str | None:
    """Why `actual` fails the rounded-intermediate rule (module doc), or None: finite, relative L2 < Th, >= 99 % of
    the elements with |a - g| <= Th (rms + |g|), max |a - g| < max(0.1 rms, 32 ulp_T(|g|)). Raises ValueError
    (shape) and KeyError (dtype)."""
    th = THRESHOLD[dtype]
    a, g = _pair(actual, golden)
    if not np.isfinite(a).all():
        return "non-finite values"
    if a.size == 0:
        return None
    err = np.abs(a - g)
    rms = float(np.sqrt(np.mean(g * g)))
    l2 = rel_l2(a, g)
    frac = float(np.mean(err <= th * (rms + np.abs(g))))
    bound = np.maximum(MAX_RMS * rms, MAX_ULPS * ulp(g, dtype))
    worst = float(np.max(err / bound))
    if l2 < th and frac >= MIXED_FRACTION and worst < 1.0:
        return None
    return (f"relative L2 {l2:.3g} (< {th:.3g}), {frac:.4f} within Th (rms + |g|) (>= {MIXED_FRACTION}), "
            f"max |a - g| / max(0.1 rms, 32 ulp) {worst:.3g} (< 1)")


def rounded_intermediate_outputs(graph) -> set[str]:
    """Names of the outputs of tensor-IR `graph` that depend on an intermediate rounded to a 16-bit type: a `cast`
    with a round mode other than "none" to f16/bf16 or a dtype variable whose result is not itself an output (it is widened again and
    consumed, like NSA's P and dS before their matmuls)."""
    outputs = {v for _n, v in graph.outputs}
    uses = graph.uses()
    seeds = set()
    for n in graph.nodes:
        to = n.attr("to")
        if (n.op == "cast" and n.attr("round") not in (None, "none")
                and (isinstance(to, DTypeVar) or dtype_name(to) in ("f16", "bf16"))
                and n.result.name not in outputs and uses.get(n.result.name)):
            seeds.add(n.result.name)
    tainted, todo = set(seeds), list(seeds)
    while todo:
        v = todo.pop()
        for u in uses.get(v, []):
            if u.result.name not in tainted:
                tainted.add(u.result.name)
                todo.append(u.result.name)
    return {o for o, v in graph.outputs if v in tainted}


def _assert(why: str | None, what: str) -> None:
    if why is not None:
        raise AssertionError(f"{what}: {why}")


def assert_cann_precision(actual, golden, dtype: str, what: str = "") -> None:
    """Assert the plain rule (MERE < Th and MARE < 10 Th, finite) for `dtype` ("float32", "float16",
    "bfloat16"). Raises AssertionError "<what>: <why>"."""
    _assert(plain_failure(actual, golden, dtype), what)


def assert_cann_precision_small_values(actual, golden, dtype: str, what: str = "") -> None:
    """Assert the small-value split (module doc). Raises AssertionError "<what>: <why>"."""
    _assert(small_value_failure(actual, golden, dtype), what)


def assert_cann_precision_floored(actual, golden, dtype: str, what: str = "") -> None:
    """Assert the floored rule (module doc). Raises AssertionError "<what>: <why>"."""
    _assert(floored_failure(actual, golden, dtype), what)


@dataclass
class OutputComparison:
    """`opgen check`'s verdict on one output.

    name: spec output name; dtype: its dtype long name; rel_l2 / rel_linf / mere / mare: float64 metrics of
    the kernel's output against the interpreter's exact (float64) mode (NaN when the output has non-finite
    values); passed: the verdict; rule: "plain", "floored" or "small-value" (the first rule that holds) or
    "exact" (integer outputs, compared for equality with device mode), "" when failed; reason: why it failed
    ("" when passed); device: metrics against the interpreter's device mode (rel_l2, rel_linf, max_abs,
    mismatches = elements that differ, and device_passed = whether the device-mode interpreter itself meets
    the criteria against exact mode); golden_nonfinite: golden elements that are inf/NaN (compared by identity,
    left out of the metrics); when every golden element is, the rule is "special-values"."""

    name: str
    dtype: str
    rel_l2: float
    rel_linf: float
    mere: float
    mare: float
    passed: bool
    rule: str = ""
    reason: str = ""
    device: dict = field(default_factory=dict)
    golden_nonfinite: int = 0

    def to_json(self) -> dict:
        """JSON-safe dict (non-finite floats become None)."""
        def num(v):
            return v if isinstance(v, (int, bool)) or (isinstance(v, float) and math.isfinite(v)) else None

        return {"rel_l2": num(self.rel_l2), "rel_linf": num(self.rel_linf), "mere": num(self.mere),
                "mare": num(self.mare), "passed": self.passed, "rule": self.rule, "reason": self.reason,
                "dtype": self.dtype, "device": {k: num(v) for k, v in self.device.items()},
                "golden_nonfinite": self.golden_nonfinite}


def _verdict(a: np.ndarray, g: np.ndarray, dtype: str, rounded: bool = False) -> tuple[str, str]:
    """(rule that holds or "", reason of failure or "") for float outputs; `rounded`: the output depends on a
    rounded intermediate (module doc), so the rounded-intermediate rule may judge it."""
    if plain_failure(a, g, dtype) is None:
        return "plain", ""
    why = floored_failure(a, g, dtype)
    if why is None:
        return "floored", ""
    if small_value_failure(a, g, dtype) is None:
        return "small-value", ""
    if rounded:
        why2 = rounded_intermediate_failure(a, g, dtype)
        if why2 is None:
            return "rounded-intermediate", ""
        return "", f"{why}; rounded-intermediate: {why2}"
    return "", why


def compare_output(name: str, actual, exact, device, dtype: str, rounded_intermediate: bool = False) -> OutputComparison:
    """Compare one kernel output with the interpreter's `exact` (float64 golden) and `device` results.

    actual / exact / device: arrays of the same shape (actual and device in the output's dtype); dtype: the
    output's dtype long name ("float32", "float16", "bfloat16", or an integer/bool name). Float outputs pass
    when finite and within the floored or the small-value rule against `exact`; other dtypes when equal to
    `device`. Golden elements that are themselves non-finite must be matched exactly (same inf, or NaN) and
    are left out of the metrics. rounded_intermediate: the output depends on an intermediate the op rounds to T
    (rounded_intermediate_outputs), so the rounded-intermediate rule may also pass it. Raises ValueError on a shape
    mismatch."""
    with np.errstate(invalid="ignore", over="ignore"):   # a device result may be inf where the golden is finite
        return _compare(name, actual, exact, device, dtype, rounded_intermediate)


def _compare(name, actual, exact, device, dtype, rounded_intermediate) -> OutputComparison:
    a, g = _pair(actual, exact)
    d = np.asarray(device, dtype=np.float64)
    if d.shape != a.shape:
        raise ValueError(f"{name}: device shape {d.shape} != {a.shape}")
    bad_g = ~np.isfinite(g)
    special_ok = bool(np.all((a[bad_g] == g[bad_g]) | (np.isnan(a[bad_g]) & np.isnan(g[bad_g]))))
    a_m, g_m = a[~bad_g], g[~bad_g]
    finite = bool(np.isfinite(a_m).all())
    nan = float("nan")
    if finite and a_m.size:
        mere, mare = mere_mare(a_m, g_m)
        l2, linf = rel_l2(a_m, g_m), rel_linf(a_m, g_m)
    else:
        mere = mare = l2 = linf = nan
    d_m = d[~bad_g]
    n_bad = int(bad_g.sum())
    measured = finite and a_m.size
    dev = {"rel_l2": rel_l2(a_m, d_m) if measured else nan, "rel_linf": rel_linf(a_m, d_m) if measured else nan,
           "max_abs": float(np.max(np.abs(a_m - d_m))) if measured else (0.0 if finite else nan),
           "mismatches": int(np.sum(~((a == d) | (np.isnan(a) & np.isnan(d)))))}
    if dtype not in THRESHOLD:
        ok = dev["mismatches"] == 0
        return OutputComparison(name, dtype, l2, linf, mere, mare, ok, "exact" if ok else "",
                                "" if ok else f"{dev['mismatches']} elements differ from device mode", dev)
    dev["device_passed"] = bool(np.isfinite(d_m).all()) and (not g_m.size or
                                                            _verdict(d_m, g_m, dtype, rounded_intermediate)[0] != "")
    if not finite:
        n = int(np.sum(~np.isfinite(a_m)))
        return OutputComparison(name, dtype, l2, linf, mere, mare, False, "",
                                f"{n} non-finite values (unwritten output elements keep the NaN poison)", dev, n_bad)
    if not special_ok:
        return OutputComparison(name, dtype, l2, linf, mere, mare, False, "",
                                f"differs from the golden's non-finite elements ({n_bad} of {g.size})", dev, n_bad)
    if a.size and not a_m.size:   # nothing finite to measure: the special values matched exactly
        return OutputComparison(name, dtype, l2, linf, mere, mare, True, "special-values", "", dev, n_bad)
    rule, why = _verdict(a_m, g_m, dtype, rounded_intermediate)
    return OutputComparison(name, dtype, l2, linf, mere, mare, rule != "", rule, why, dev, n_bad)
