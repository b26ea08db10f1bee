"""CANN's precision criteria, used by `opgen check` and the tests (tests/precision.py re-exports them).

Source: docs/reference/ada_layer_norm.md §5.5 (CANN ecosystem standard): relative error per element
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
  the bound is capped at Th x 10 max|g| (the MARE bound at the output's own scale), so an output whose every
  element is small (an NSA dq that cancels to ~0) cannot hide an error as large as itself behind the absolute
  tolerance;
- floored: the plain rule with each denominator floored at 2^-12 of the output's largest |golden| (where
  fp32 noise at the output's scale reaches the fp32 MARE bound).

A third rule for outputs computed from an intermediate the op itself rounds to T before a matmul (NSA's P and dS,
docs/reference/nsa_selected_attention.md §2.4-§2.5; in the tensor IR a cast to a 16-bit type with a round mode whose
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
the rounded-intermediate rule. All metrics are computed in float64, a chunk at a time (CHUNK elements). Two more
verdicts keep limits of the arithmetic apart from kernel faults:

- overflow (compared in the output dtype): a kernel element that is ±inf where the device-mode interpretation has
  the same infinity and the exact value lies beyond T's largest finite value (to within Th) is a match, counted
  and named in the note ("n elements overflow to ±inf in float16, as in the device interpretation") and left out
  of the metrics. Unwritten elements still fail: the launch driver poisons outputs with 0xFF bytes (a NaN whose
  bits are all ones, opgen/check/cpp/check_driver.h kOutputPoison), which no arithmetic produces; they are told
  apart from computed NaN/inf by that bit pattern.
- conditioning: when the device-mode interpretation (the spec's own rounding points, fp32 compute) itself fails
  every rule against exact math, the exact-math criteria are out of reach of the dtype's arithmetic on these
  inputs (a 2-element LayerNorm gradient, an NSA dq whose exact value cancels to 0). The kernel then passes with
  rule "conditioning" when it is no less accurate than the device interpretation by CANN's commercial
  double-benchmark ratios (docs/reference/ada_layer_norm.md §5.5, the lenient level L0): MERE and RMSE against exact at
  most 2x the device's, MARE at most 10x; the note gives both errors and whether the kernel equals the device
  interpretation bit for bit. A kernel that fails where the device interpretation passes is a kernel fault and the
  reason says so.
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
SMALL_VALUE_CAP = 10.0
"""The small-value rule's absolute bound Th (1 + |g|) is capped at Th x SMALL_VALUE_CAP x the output's max |golden|
(the plain rule's MARE bound at the output's own scale): an output whose every element is small is judged at its
own scale, so an error as large as the output itself cannot pass as "small"."""
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
    need |a - g| <= Th min(1 + |g|, 10 max|g|) (the absolute bound capped at the output's own scale), the others
    the plain rule. Raises ValueError (shape) and KeyError (dtype)."""
    a, g = _pair(actual, golden)
    if not np.isfinite(a).all():
        return "non-finite values"
    small = np.abs(g) < SMALL_VALUE[dtype]
    why = plain_failure(a[~small], g[~small], dtype)
    if why is not None:
        return why
    th = THRESHOLD[dtype]
    err = np.abs(a[small] - g[small])
    scale = float(np.max(np.abs(g))) if g.size else 0.0
    tol = th * np.minimum(1 + np.abs(g[small]), SMALL_VALUE_CAP * scale)
    if (err <= tol).all():
        return None
    k = int(np.argmax(err - tol))
    return (f"small-value abs error {err[k]:.3g} > {tol[k]:.3g} (Th min(1 + |g|, {SMALL_VALUE_CAP:g} max|g|), "
            f"max|g| {scale:.3g})")


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
    with a round mode other than "none" to f16/bf16 or a dtype variable whose result is widened again and consumed
    (like NSA's P and dS before their matmuls, or AddRmsNormDynamicQuant's x = (x1 + x2) rounded to T, an output
    itself, whose rms and scales read the rounded x). The cast's own result, when it is an output, is not one of
    them (it is compared as rounded: its plain rule); what reads it is."""
    uses = graph.uses()
    seeds = set()
    for n in graph.nodes:
        to = n.attr("to")
        if (n.op == "cast" and n.attr("round") not in (None, "none")
                and (isinstance(to, DTypeVar) or dtype_name(to) in ("f16", "bf16"))
                and uses.get(n.result.name)):
            seeds.add(n.result.name)
    tainted, todo = set(), list(seeds)
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
    "device" / "float64" (integer outputs: equal to device mode, or where not, to exact mode; _integer_verdict),
    "" when failed; reason: why it failed
    ("" when passed); device: metrics against the interpreter's device mode (rel_l2, rel_linf, max_abs,
    mismatches = elements that differ, and device_passed = whether the device-mode interpreter itself meets
    the criteria against exact mode); golden_nonfinite: golden elements that are inf/NaN (compared by identity,
    left out of the metrics); when every golden element is, the rule is "special-values"; overflow: elements
    that overflow to ±inf in the output dtype as in the device interpretation (a match, left out of the metrics);
    unwritten: elements still holding the driver's NaN poison; note: what a passing verdict rests on beyond its
    rule (overflowed elements, a conditioning limit: module doc), "" when nothing; rule "conditioning": the
    device-mode interpretation itself fails against exact math and the kernel is as accurate as it."""

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
    overflow: int = 0
    unwritten: int = 0
    note: str = ""

    def to_json(self) -> dict:
        """JSON-safe dict (non-finite floats become None)."""
        def num(v):
            return v if isinstance(v, (int, bool)) or (isinstance(v, float) and math.isfinite(v)) else None

        return {"rel_l2": num(self.rel_l2), "rel_linf": num(self.rel_linf), "mere": num(self.mere),
                "mare": num(self.mare), "passed": self.passed, "rule": self.rule, "reason": self.reason,
                "dtype": self.dtype, "device": {k: num(v) for k, v in self.device.items()},
                "golden_nonfinite": self.golden_nonfinite, "overflow": self.overflow, "unwritten": self.unwritten,
                "note": self.note}


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


def compare_output(name: str, actual, exact, device, dtype: str, rounded_intermediate: bool = False, *,
                   chunk: int = None) -> OutputComparison:
    """Compare one kernel output with the interpreter's `exact` (float64 golden) and `device` results.

    actual / exact / device: arrays of the same shape (actual and device in the output's dtype); dtype: the
    output's dtype long name ("float32", "float16", "bfloat16", or an integer/bool name). Float outputs pass
    when finite and within the floored or the small-value rule against `exact`; other dtypes when equal to
    `device`. Golden elements that are themselves non-finite must be matched exactly (same inf, or NaN) and
    are left out of the metrics. rounded_intermediate: the output depends on an intermediate the op rounds to T
    (rounded_intermediate_outputs), so the rounded-intermediate rule may also pass it. Raises ValueError on a shape
    mismatch. chunk: elements per chunk (default CHUNK): the arrays are compared a chunk at a time, in float64, with
    the same verdicts and numbers as whole-array float64 arithmetic up to the order of summation (docs/design.md
    "Comparison in chunks"); memory beyond the arrays is a few chunks' worth."""
    # a device result may be inf where the golden is finite
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        return _compare(name, actual, exact, device, dtype, rounded_intermediate, chunk or CHUNK)


def poison_mask(actual) -> np.ndarray:
    """Elements of `actual` (in its own dtype, as read from the driver's output file) whose bytes are all 0xFF:
    the launch driver's poison for output elements the kernel never wrote (check_driver.h kOutputPoison; a NaN in
    every float format, -1 in integers). Arithmetic never produces this NaN (x86 and the emulation make the
    default NaN 0x7FC00000 / 0xFFC00000, and casts keep a NaN's top bits), so it tells unwritten from computed."""
    a = np.ascontiguousarray(np.asarray(actual))
    if a.dtype.itemsize not in (1, 2, 4, 8) or a.dtype.kind not in "fVc" and a.dtype.name != "bfloat16":
        return np.zeros(a.shape, dtype=bool)
    bits = a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])
    return bits == np.iinfo(bits.dtype).max


FLOAT_MAX = {"float16": 65504.0, "bfloat16": float.fromhex("0x1.fep127"), "float32": float.fromhex("0x1.fffffep127")}
"""Largest finite value per float output dtype."""


def overflows(golden, dtype: str) -> np.ndarray:
    """Elements of the exact `golden` that overflow in `dtype`: |g| >= its largest finite value x (1 - Th), so that
    the value, or the same value computed with T's rounding, lies at or beyond the format's range. Raises KeyError
    for a dtype without a threshold."""
    g = np.asarray(golden, dtype=np.float64)
    return np.isfinite(g) & (np.abs(g) >= FLOAT_MAX[dtype] * (1 - THRESHOLD[dtype]))


DOUBLE_BENCHMARK = {"mere": 2.0, "rmse": 2.0, "mare": 10.0}
"""CANN's commercial double-benchmark ratios at level L0 (docs/reference/ada_layer_norm.md §5.5): the kernel's error
against exact math over the benchmark's (here the device-mode interpretation's) may be at most these."""


def conditioning_failure(actual, device, golden, dtype: str) -> str | None:
    """Why `actual` is less accurate than the device-mode interpretation `device` against the exact `golden`, or
    None: its MERE and RMSE at most 2x the device's, its MARE at most 10x (DOUBLE_BENCHMARK; all finite). Meant for
    outputs the device interpretation itself cannot bring within the criteria (module doc, "conditioning"). Raises
    ValueError (shape) and KeyError (dtype)."""
    THRESHOLD[dtype]
    a, g = _pair(actual, golden)
    d, _ = _pair(device, golden)
    if not (np.isfinite(a).all() and np.isfinite(d).all()):
        return "non-finite values"
    if a.size == 0:
        return None
    ka, kd = mere_mare(a, g), mere_mare(d, g)
    ra, rd = float(np.sqrt(np.mean((a - g) ** 2))), float(np.sqrt(np.mean((d - g) ** 2)))
    bad = []
    for what, k, dv, lim in (("MERE", ka[0], kd[0], DOUBLE_BENCHMARK["mere"]),
                             ("RMSE", ra, rd, DOUBLE_BENCHMARK["rmse"]),
                             ("MARE", ka[1], kd[1], DOUBLE_BENCHMARK["mare"])):
        if k > lim * dv:
            bad.append(f"{what} {k:.3g} > {lim:g} x the device's {dv:.3g}")
    return "; ".join(bad) or None


def _n(k: int, what: str) -> str:
    return f"{k} {what}" if k == 1 else f"{k} {what}s"


CHUNK = 1 << 17
"""Elements per chunk of `compare_output` (docs/design.md "Comparison in chunks"): its float64 temporaries are a few
of this size (about 1 MiB each), never the size of the output."""


def _nanmax1(cur: float, m: float) -> float:
    """max(cur, m) propagating NaN."""
    return m if math.isnan(m) or math.isnan(cur) else max(cur, m)


def _nanmax(cur: float, x: np.ndarray) -> float:
    """max(cur, max(x)) propagating NaN as np.max does (x may be empty)."""
    if not x.size:
        return cur
    m = float(np.max(x))
    return m if math.isnan(m) or math.isnan(cur) else max(cur, m)


class _Acc:
    """Running sums of one element subset of x against its reference g (float64 chunks; docs/design.md
    "Comparison in chunks"): count n, max|g|, sum g^2, sum (x-g)^2, max|x-g|, all x finite; with rel also
    sum / max of |x-g| / (|g| + EPS); with small (a dtype name) the small-value split's sums too."""

    def __init__(self, rel: bool = True, small: str | None = None):
        self.rel, self.small = rel, small
        self.n, self.max_g, self.sum_g2, self.sum_e2, self.max_e, self.finite = 0, 0.0, 0.0, 0.0, 0.0, True
        self.sum_rel, self.max_rel = 0.0, 0.0
        self.n_ns, self.sum_rel_ns, self.max_rel_ns = 0, 0.0, 0.0        # elements that are not small
        self.n_small, self.small_ok, self.max_e_small = 0, True, 0.0     # |e| <= Th (1 + |g|) on the small ones

    def add(self, x: np.ndarray, g: np.ndarray, also: "_Acc | None" = None, gs: "_GStats | None" = None,
            finite: bool | None = None) -> float | None:
        """Add one chunk (x, g: float64 arrays of one shape), also to `also` (an accumulator of the same element
        subset, without the small-value split: the sums are computed once for both). gs: g's own terms when the
        caller computed them for another accumulator of the same chunk; finite: whether x is known all finite.
        Returns the chunk's max|x-g| (None when empty)."""
        if not x.size:
            return None
        gs = gs or _GStats(g, self.small)
        e = np.abs(x - g)
        ag = gs.ag
        fin = bool(np.isfinite(x).all()) if finite is None else finite
        mg, me = gs.max_g, float(np.max(e))
        g2, e2 = gs.sum_g2, float(np.square(e).sum())   # not np.dot: BLAS threads cost more here
        rel = e / gs.den if self.rel else None
        srel, mrel = (float(rel.sum()), float(np.max(rel))) if self.rel else (0.0, 0.0)
        for acc in (self, also) if also is not None else (self,):
            acc.n += x.size
            acc.finite = acc.finite and fin
            acc.max_g = _nanmax1(acc.max_g, mg)
            acc.max_e = _nanmax1(acc.max_e, me)
            acc.sum_g2 += g2
            acc.sum_e2 += e2
            acc.sum_rel += srel
            acc.max_rel = _nanmax1(acc.max_rel, mrel)
        if self.small is None:
            return me
        sm, k = gs.small_mask(self.small)
        if k < sm.size:
            ns = rel[~sm] if k else rel
            self.n_ns += ns.size
            self.sum_rel_ns += float(ns.sum())
            self.max_rel_ns = _nanmax(self.max_rel_ns, ns)
        if k:
            es = e[sm]
            self.n_small += k
            self.small_ok = self.small_ok and bool((es <= THRESHOLD[self.small] * (1 + ag[sm])).all())
            self.max_e_small = _nanmax(self.max_e_small, es)
        return me

    def mere_mare(self) -> tuple[float, float]:
        """(MERE, MARE) as mere_mare gives them on the whole subset ((0, 0) when empty)."""
        return (self.sum_rel / self.n, self.max_rel) if self.n else (0.0, 0.0)

    def rel_l2(self) -> float:
        """rel_l2 of the subset."""
        if not self.n:
            return 0.0
        den, num = math.sqrt(self.sum_g2), math.sqrt(self.sum_e2)
        return num / den if den > 0 else num

    def rel_linf(self) -> float:
        """rel_linf of the subset."""
        if not self.n:
            return 0.0
        return self.max_e / self.max_g if self.max_g > 0 else self.max_e

    def rmse(self) -> float:
        """Root mean square of x - g over the subset."""
        return math.sqrt(self.sum_e2 / self.n) if self.n else 0.0


class _GStats:
    """The terms of one chunk of golden values g that every accumulator of it shares: |g|, max|g|, sum g^2,
    |g| + EPS, and the small-value mask per dtype (computed once)."""

    def __init__(self, g: np.ndarray, small: str | None = None):
        self.ag = np.abs(g)
        self.max_g = float(np.max(self.ag)) if g.size else 0.0
        self.sum_g2 = float(np.square(g).sum())
        self.den = self.ag + EPS
        self._small = {}

    def small_mask(self, dtype: str):
        """(|g| < SMALL_VALUE[dtype], its count)."""
        if dtype not in self._small:
            sm = self.ag < SMALL_VALUE[dtype]
            self._small[dtype] = (sm, int(np.count_nonzero(sm)))
        return self._small[dtype]


class _Masks:
    """Per-chunk element classes of _compare (module doc: overflow, unwritten, device limits); `fast`: every
    actual and golden element finite, so the measured subsets are the whole chunk (s1 / s2 None = all)."""

    def __init__(self, a, g, d, araw, dtype):
        fa, fg, fd = bool(np.isfinite(a).all()), bool(np.isfinite(g).all()), bool(np.isfinite(d).all())
        self.fast = fa and fg
        self.n_bad = 0 if fg else int(np.count_nonzero(~np.isfinite(g)))
        if self.fast:
            self.mismatches = int(np.count_nonzero(a != d))   # a is never NaN here
            self.neither = int(np.count_nonzero((a != d) & (a != g))) if self.mismatches and dtype not in THRESHOLD \
                else 0   # integer outputs: elements equal to neither interpretation (_integer_verdict)
            self.special_ok, self.over_pos, self.over_neg, self.n_poison = True, 0, 0, 0
            self.n_unwritten, self.n_poison_bad = 0, 0
            self.any_unwritten, self.n_nan, self.n_inf, self.n_lim = False, 0, 0, 0
            self.special_nan, self.special_inf, self.special_ex = 0, 0, None
            self.s1 = None
            if fd or dtype not in THRESHOLD:
                self.s2 = None
            else:
                self.s2 = ~(np.isinf(d) & overflows(g, dtype) & (np.sign(d) == np.sign(g)))
            return
        poison = poison_mask(araw)
        bad_g = ~np.isfinite(g)
        missed = bad_g & ~((a == g) | (np.isnan(a) & np.isnan(g) & ~poison))
        self.special_ok = not bool(missed.any())
        self.special_nan = int(np.count_nonzero(missed & np.isnan(g)))   # golden NaN, kernel a number or poison
        self.special_inf = int(np.count_nonzero(missed & np.isinf(g)))   # golden ±inf, kernel something else
        self.special_ex = (float(g[missed][0]), float(a[missed][0])) if missed.any() else None
        self.mismatches = int(np.count_nonzero(~((a == d) | (np.isnan(a) & np.isnan(d)))))
        self.neither = int(np.count_nonzero(~((a == d) | (a == g) | (np.isnan(a) & np.isnan(d))))) \
            if dtype not in THRESHOLD else 0
        self.n_poison = int(np.count_nonzero(poison))
        self.n_poison_bad = int(np.count_nonzero(poison[bad_g]))
        fin_g = ~bad_g
        if dtype not in THRESHOLD:
            self.s1 = self.s2 = fin_g
            self.over_pos = self.over_neg = self.n_nan = self.n_inf = self.n_lim = 0
            self.any_unwritten, self.n_unwritten = False, 0
            return
        same_as_device = (a == d) | (np.isnan(a) & np.isnan(d) & ~poison)
        beyond = overflows(g, dtype)
        over = fin_g & np.isinf(a) & (a == d) & beyond & (np.sign(a) == np.sign(g))
        dev_over = fin_g & np.isinf(d) & beyond & (np.sign(d) == np.sign(g))
        dev_limit = fin_g & ~np.isfinite(a) & ~over & ~poison & same_as_device
        stray = fin_g & ~np.isfinite(a) & ~over & ~dev_limit & ~poison
        self.n_unwritten = int(np.count_nonzero(fin_g & poison))
        self.any_unwritten = self.n_unwritten > 0
        self.n_nan, self.n_inf = int((stray & np.isnan(a)).sum()), int((stray & np.isinf(a)).sum())
        self.n_lim = int(dev_limit.sum())
        self.over_pos, self.over_neg = int((over & (a > 0)).sum()), int((over & (a < 0)).sum())
        self.s1 = fin_g & np.isfinite(a)
        self.s2 = fin_g & ~dev_over


def _chunks(actual, exact, device, dtype, chunk):
    """Yield (a, g, d, masks) per chunk of at most `chunk` elements: float64 copies of the flat actual, exact and
    device arrays' slices and their _Masks."""
    araw = np.asarray(actual).reshape(-1)
    graw = np.asarray(exact).reshape(-1)
    draw = np.asarray(device).reshape(-1)
    for s in range(0, araw.size, chunk):
        ac = araw[s:s + chunk]
        a = ac.astype(np.float64)
        g = graw[s:s + chunk].astype(np.float64, copy=False)
        d = draw[s:s + chunk].astype(np.float64)
        yield a, g, d, _Masks(a, g, d, ac, dtype)


def _sel(x: np.ndarray, m):
    return x if m is None else x[m]


class _Second:
    """Sums that need the whole subset's max|g| or rms first (the floored and rounded-intermediate rules), taken
    on a second pass over the chunks of subset `which` ("a": the kernel on the measured elements, "d": the device
    interpretation on its own)."""

    def __init__(self, acc: _Acc, dtype: str):
        self.floor = CANCEL_FLOOR * acc.max_g
        self.rms = math.sqrt(acc.sum_g2 / acc.n) if acc.n else 0.0
        self.th = THRESHOLD[dtype]
        self.dtype = dtype
        self.sum_relf, self.max_relf, self.n_within, self.worst = 0.0, 0.0, 0, 0.0

    def add(self, x: np.ndarray, g: np.ndarray) -> None:
        """Add one chunk of the subset (float64 arrays)."""
        if not x.size:
            return
        e = np.abs(x - g)
        ag = np.abs(g)
        relf = e / (np.maximum(ag, self.floor) + EPS)
        self.sum_relf += float(relf.sum())
        self.max_relf = _nanmax(self.max_relf, relf)
        self.n_within += int(np.count_nonzero(e <= self.th * (self.rms + ag)))
        bound = np.maximum(MAX_RMS * self.rms, MAX_ULPS * ulp(g, self.dtype))
        self.worst = _nanmax(self.worst, e / bound)


def _chunked_verdict(acc: _Acc, second, dtype: str, rounded: bool) -> tuple[str, str]:
    """_verdict of the subset summed in `acc` (x finite); second(): its _Second, computed on demand."""
    th = THRESHOLD[dtype]
    mere, mare = acc.mere_mare()
    if mere < th and mare < 10 * th:
        return "plain", ""
    if not acc.n:
        return "floored", ""
    s = second()
    mere_f, mare_f = s.sum_relf / acc.n, s.max_relf
    if mere_f < th and mare_f < 10 * th:
        return "floored", ""
    why = (f"floored MERE {mere_f:.3g} (< {th:.3g}), floored MARE {mare_f:.3g} (< {10 * th:.3g}); "
           f"plain MERE {mere:.3g}, MARE {mare:.3g}")
    ns_ok = not acc.n_ns or (acc.sum_rel_ns / acc.n_ns < th and acc.max_rel_ns < 10 * th)
    if ns_ok and acc.small_ok and (not acc.n_small or acc.max_e_small <= th * (SMALL_VALUE_CAP * acc.max_g)):
        return "small-value", ""
    if rounded:
        l2, frac, worst = acc.rel_l2(), s.n_within / acc.n, s.worst
        if l2 < th and frac >= MIXED_FRACTION and worst < 1.0:
            return "rounded-intermediate", ""
        return "", (f"{why}; rounded-intermediate: relative L2 {l2:.3g} (< {th:.3g}), {frac:.4f} within Th (rms + "
                    f"|g|) (>= {MIXED_FRACTION}), max |a - g| / max(0.1 rms, 32 ulp) {worst:.3g} (< 1)")
    return "", why


def _integer_verdict(name, dtype, l2, linf, mere, mare, mismatches: int, neither: int, dev: dict) -> OutputComparison:
    """The verdict on an integer output: "device" when every element equals the device-mode interpretation's;
    "float64" when each element that differs from it equals the exact (float64) interpretation's instead -- the
    value before the final cast lies at a rounding boundary where the fp32 sums of the kernel and of the device
    mode, taken in different orders, fall on different sides (a quantised norm's int8 off by one), and the kernel
    agrees with the spec's math there; failed when an element equals neither (docs/design.md "Integer outputs")."""
    if mismatches == 0:
        return OutputComparison(name, dtype, l2, linf, mere, mare, True, "device", "", dev)
    if neither == 0:
        return OutputComparison(name, dtype, l2, linf, mere, mare, True, "float64", "", dev)
    return OutputComparison(name, dtype, l2, linf, mere, mare, False, "",
                            f"{neither} elements differ from both device mode and exact mode "
                            f"({mismatches} from device mode)", dev)


def _compare(name, actual, exact, device, dtype, rounded_intermediate, chunk=CHUNK) -> OutputComparison:
    shape = np.shape(actual)
    if shape != np.shape(exact):
        raise ValueError(f"shape {shape} != golden shape {np.shape(exact)}")
    if np.shape(device) != shape:
        raise ValueError(f"{name}: device shape {np.shape(device)} != {shape}")
    size = int(np.prod(shape, dtype=np.int64))
    floating = dtype in THRESHOLD
    a1 = _Acc(small=dtype if floating else None)       # kernel vs exact on the measured elements
    d1 = _Acc(small=None)                               # device vs exact on the same elements (conditioning)
    d2 = _Acc(small=dtype if floating else None)       # device vs exact on its own measured elements
    ad = _Acc(rel=False)                                # kernel vs device where the device is finite
    max_abs = 0.0
    n_bad = mismatches = neither = n_poison = n_poison_fin = n_poison_bad = over_pos = over_neg = n_nan = n_inf = 0
    n_lim = 0
    special_ok, any_unwritten = True, False
    special_nan = special_inf = 0
    special_ex = None
    for a, g, d, m in _chunks(actual, exact, device, dtype, chunk):
        n_bad += m.n_bad
        mismatches += m.mismatches
        neither += m.neither
        n_poison += m.n_poison
        n_poison_fin += m.n_unwritten
        n_poison_bad += m.n_poison_bad
        over_pos += m.over_pos
        over_neg += m.over_neg
        n_nan += m.n_nan
        n_inf += m.n_inf
        n_lim += m.n_lim
        special_ok = special_ok and m.special_ok
        special_nan += m.special_nan
        special_inf += m.special_inf
        special_ex = special_ex or m.special_ex
        any_unwritten = any_unwritten or m.any_unwritten
        a_m, g_m, d_m = _sel(a, m.s1), _sel(g, m.s1), _sel(d, m.s1)
        gs = _GStats(g_m) if a_m.size else None
        a1.add(a_m, g_m, gs=gs, finite=True if m.fast else None)
        if floating:
            if m.s1 is None and m.s2 is None:   # one subset: the device's sums (and g's terms) serve both
                d2.add(d_m, g_m, also=d1, gs=gs)
            else:
                d1.add(d_m, g_m)
                d2.add(_sel(d, m.s2), _sel(g, m.s2))
            if np.isfinite(d_m).all():
                me = ad.add(a_m, d_m)
                max_abs = max_abs if me is None else _nanmax1(max_abs, me)
            else:
                ok = np.isfinite(d_m)
                ad.add(a_m[ok], d_m[ok])
                max_abs = _nanmax(max_abs, np.abs(a_m - d_m))
        else:
            me = ad.add(a_m, d_m)
            max_abs = max_abs if me is None else _nanmax1(max_abs, me)
    nan = float("nan")
    dev = {"mismatches": mismatches}
    if not floating:
        measured = a1.n and a1.finite
        mere, mare = a1.mere_mare() if measured else (nan, nan)
        l2, linf = (a1.rel_l2(), a1.rel_linf()) if measured else (nan, nan)
        dev.update(rel_l2=ad.rel_l2() if measured else nan, rel_linf=ad.rel_linf() if measured else nan,
                   max_abs=max_abs if measured else 0.0)
        return _integer_verdict(name, dtype, l2, linf, mere, mare, mismatches, neither, dev)

    def second(which):
        acc = a1 if which == "a" else d2
        cache = {}

        def get():
            if "s" not in cache:
                s = _Second(acc, dtype)
                for a, g, d, m in _chunks(actual, exact, device, dtype, chunk):
                    if which == "a":
                        s.add(_sel(a, m.s1), _sel(g, m.s1))
                    else:
                        s.add(_sel(d, m.s2), _sel(g, m.s2))
                cache["s"] = s
            return cache["s"]
        return get

    finite = not (any_unwritten or n_nan or n_inf or n_lim)
    if a1.n and finite:
        mere, mare = a1.mere_mare()
        l2, linf = a1.rel_l2(), a1.rel_linf()
    else:
        mere = mare = l2 = linf = nan
    dev.update(rel_l2=ad.rel_l2() if finite and a1.n else nan,
               rel_linf=ad.rel_linf() if finite and a1.n else nan,
               max_abs=max_abs if finite else nan)
    dev["device_passed"] = d2.finite and (not d2.n or
                                          _chunked_verdict(d2, second("d"), dtype, rounded_intermediate)[0] != "")
    n_over = over_pos + over_neg
    res = dict(golden_nonfinite=n_bad, overflow=n_over, unwritten=n_poison)

    def out(passed, rule="", reason="", note=""):
        return OutputComparison(name, dtype, l2, linf, mere, mare, passed, rule, reason, dev, note=note, **res)

    if not finite:
        why = []
        if any_unwritten:
            why.append(f"{_n(n_poison_fin, 'non-finite value')} that are unwritten output elements "
                       f"(they keep the driver's NaN poison, bytes 0xFF)")
        if n_nan:
            why.append(f"{_n(n_nan, 'non-finite value')} NaN (computed, not the poison) where the exact result is "
                       f"finite and the device interpretation is not NaN")
        if n_inf:
            why.append(f"{_n(n_inf, 'non-finite value')} ±inf where the exact result is finite and the device "
                       f"interpretation differs")
        if n_lim:
            why.append(f"{_n(n_lim, 'non-finite value')} (NaN or ±inf) where the exact result is finite and within "
                       f"float range, exactly as in the device interpretation (the range of the spec's arithmetic "
                       f"on these inputs, e.g. an attribute that overflows float32, not a kernel fault)")
        return out(False, reason="; ".join(why))
    if not special_ok:
        k = n_poison_bad
        what = []
        if special_nan:
            what.append(f"{special_nan} where the golden is NaN")
        if special_inf:
            what.append(f"{special_inf} where it is ±inf")
        g0, a0 = special_ex
        return out(False, reason=f"misses {special_nan + special_inf} of the golden's {n_bad} non-finite elements "
                                 f"(of {size}): {' and '.join(what)}; e.g. golden {g0:g}, kernel {a0:g}" +
                   (f"; {_n(k, 'element')} there unwritten (the driver's NaN poison)" if k else ""))
    notes = []
    if n_over:
        signs = "±inf" if over_pos and over_neg else ("+inf" if over_pos else "-inf")
        notes.append(f"{_n(n_over, 'element')} overflow to {signs} in {dtype}, as in the device interpretation")
    if size and not a1.n:   # nothing finite to measure: every element matched exactly
        return out(True, "special-values" if n_bad else "overflow", note="; ".join(notes))
    rule, why = _chunked_verdict(a1, second("a"), dtype, rounded_intermediate)
    if rule in ("floored", "small-value") and not mare < 10 * THRESHOLD[dtype]:
        # the plain rule's MARE is printed beside the verdict: say why it does not decide (a new user read a PASS
        # with MARE 0.73 as a contradiction)
        notes.append(f"plain MARE {mare:.3g} is over 10 Th ({10 * THRESHOLD[dtype]:.3g}): the worst relative errors "
                     f"are at elements far below the output's largest |golden|, which the {rule} rule judges "
                     f"against the output's scale (module doc of opgen.check.compare); relative accuracy there is "
                     f"not checked")
    if rule:
        return out(True, rule, note="; ".join(notes))
    # the kernel misses the criteria: a conditioning limit when the device interpretation misses them too
    if dev["device_passed"]:
        return out(False, reason=f"{why}; the device-mode interpretation meets the criteria on these inputs, so "
                                 f"this is the kernel's error, not the inputs' conditioning")
    if d1.finite:
        (dmere, dmare), ra, rd = d1.mere_mare(), a1.rmse(), d1.rmse()
        bad = []
        for what, k, dv, lim in (("MERE", mere, dmere, DOUBLE_BENCHMARK["mere"]),
                                 ("RMSE", ra, rd, DOUBLE_BENCHMARK["rmse"]),
                                 ("MARE", mare, dmare, DOUBLE_BENCHMARK["mare"])):
            if k > lim * dv:
                bad.append(f"{what} {k:.3g} > {lim:g} x the device's {dv:.3g}")
        cond = "; ".join(bad) or None
    else:
        cond = "the device interpretation is not finite there"
    if cond is None:
        if mismatches == 0:
            how = "equals the device interpretation bit for bit"
        else:
            how = (f"is within CANN's double-benchmark ratios of it (max |kernel - device| "
                   f"{max_abs:.3g})")
        notes.append(f"conditioning limit, not a kernel fault: the device-mode interpretation fails against exact "
                     f"math too (device MERE {dmere:.3g}, MARE {dmare:.3g}; kernel MERE {mere:.3g}, MARE {mare:.3g}); "
                     f"the kernel {how}")
        return out(True, "conditioning", note="; ".join(notes))
    return out(False, reason=f"{why}; the device-mode interpretation fails too, but the kernel is less accurate "
                             f"than it: {cond}")
