"""The straightforward float64 form of `opgen check`'s comparison (opgen/check/compare.py before it was chunked):
full-array float64 temporaries, one numpy expression per rule. tests/test_compare_chunked.py asserts that the
chunked `compare_output` gives the same verdicts and report numbers as this on small arrays and on arrays spanning
several chunks (docs/design.md "Comparison in chunks")."""

import numpy as np

from opgen.check.compare import (OutputComparison, THRESHOLD, _n, _pair, _verdict, conditioning_failure, mere_mare,
                                 overflows, poison_mask, rel_l2, rel_linf)


def reference_compare(name, actual, exact, device, dtype, rounded_intermediate=False):
    """compare_output's verdict computed on whole float64 arrays (the pre-chunking code)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return _compare(name, actual, exact, device, dtype, rounded_intermediate)


def _compare(name, actual, exact, device, dtype, rounded_intermediate) -> OutputComparison:
    a, g = _pair(actual, exact)
    d = np.asarray(device, dtype=np.float64)
    if d.shape != a.shape:
        raise ValueError(f"{name}: device shape {d.shape} != {a.shape}")
    poison = poison_mask(actual)
    bad_g = ~np.isfinite(g)
    # a golden NaN is matched by a computed NaN, never by the poison of an element the kernel did not write
    special_ok = bool(np.all((a[bad_g] == g[bad_g]) | (np.isnan(a[bad_g]) & np.isnan(g[bad_g]) & ~poison[bad_g])))
    n_bad = int(bad_g.sum())
    nan = float("nan")
    same_as_device = (a == d) | (np.isnan(a) & np.isnan(d) & ~poison)
    dev = {"mismatches": int(np.sum(~((a == d) | (np.isnan(a) & np.isnan(d)))))}
    if dtype not in THRESHOLD:
        a_m, g_m, d_m = a[~bad_g], g[~bad_g], d[~bad_g]
        measured = a_m.size and np.isfinite(a_m).all()
        mere, mare = mere_mare(a_m, g_m) if measured else (nan, nan)
        l2, linf = (rel_l2(a_m, g_m), rel_linf(a_m, g_m)) if measured else (nan, nan)
        dev.update(rel_l2=rel_l2(a_m, d_m) if measured else nan, rel_linf=rel_linf(a_m, d_m) if measured else nan,
                   max_abs=float(np.max(np.abs(a_m - d_m))) if measured else 0.0)
        neither = int(np.sum(~((a == d) | (a == g) | (np.isnan(a) & np.isnan(d)))))
        if dev["mismatches"] == 0 or neither == 0:
            return OutputComparison(name, dtype, l2, linf, mere, mare, True,
                                    "device" if dev["mismatches"] == 0 else "float64", "", dev)
        return OutputComparison(name, dtype, l2, linf, mere, mare, False, "",
                                f"{neither} elements differ from both device mode and exact mode "
                                f"({dev['mismatches']} from device mode)", dev)
    fin_g = ~bad_g
    beyond = overflows(g, dtype)
    # compared in the output dtype: an overflow the device interpretation also produces is a match
    over = fin_g & np.isinf(a) & (a == d) & beyond & (np.sign(a) == np.sign(g))
    dev_over = fin_g & np.isinf(d) & beyond & (np.sign(d) == np.sign(g))
    # non-finite where the exact value is finite and in range, exactly as in the device interpretation
    dev_limit = fin_g & ~np.isfinite(a) & ~over & ~poison & same_as_device
    unwritten = fin_g & poison
    n_unwritten = int(poison.sum())
    stray = fin_g & ~np.isfinite(a) & ~over & ~dev_limit & ~poison
    meas = fin_g & np.isfinite(a)
    a_m, g_m, d_m = a[meas], g[meas], d[meas]
    finite = not (unwritten.any() or stray.any() or dev_limit.any())
    if a_m.size and finite:
        mere, mare = mere_mare(a_m, g_m)
        l2, linf = rel_l2(a_m, g_m), rel_linf(a_m, g_m)
    else:
        mere = mare = l2 = linf = nan
    d_ok = np.isfinite(d_m)
    dev.update(rel_l2=rel_l2(a_m[d_ok], d_m[d_ok]) if finite and a_m.size else nan,
               rel_linf=rel_linf(a_m[d_ok], d_m[d_ok]) if finite and a_m.size else nan,
               max_abs=(float(np.max(np.abs(a_m - d_m), initial=0.0)) if finite else nan))
    dev_meas = fin_g & ~dev_over
    dev_finite = bool(np.isfinite(d[dev_meas]).all())
    dev["device_passed"] = dev_finite and (not dev_meas.any() or
                                           _verdict(d[dev_meas], g[dev_meas], dtype, rounded_intermediate)[0] != "")
    n_over = int(over.sum())
    res = dict(golden_nonfinite=n_bad, overflow=n_over, unwritten=n_unwritten)

    def out(passed, rule="", reason="", note=""):
        return OutputComparison(name, dtype, l2, linf, mere, mare, passed, rule, reason, dev, note=note, **res)

    if not finite:
        why = []
        if unwritten.any():
            why.append(f"{_n(int(unwritten.sum()), 'non-finite value')} that are unwritten output elements "
                       f"(they keep the driver's NaN poison, bytes 0xFF)")
        n_nan, n_inf = int((stray & np.isnan(a)).sum()), int((stray & np.isinf(a)).sum())
        if n_nan:
            why.append(f"{_n(n_nan, 'non-finite value')} NaN (computed, not the poison) where the exact result is "
                       f"finite and the device interpretation is not NaN")
        if n_inf:
            why.append(f"{_n(n_inf, 'non-finite value')} ±inf where the exact result is finite and the device "
                       f"interpretation differs")
        n_lim = int(dev_limit.sum())
        if n_lim:
            why.append(f"{_n(n_lim, 'non-finite value')} (NaN or ±inf) where the exact result is finite and within "
                       f"float range, exactly as in the device interpretation (the range of the spec's arithmetic "
                       f"on these inputs, e.g. an attribute that overflows float32, not a kernel fault)")
        return out(False, reason="; ".join(why))
    if not special_ok:
        k = int(poison[bad_g].sum())
        missed = bad_g & ~((a == g) | (np.isnan(a) & np.isnan(g) & ~poison))
        n_gnan, n_ginf = int((missed & np.isnan(g)).sum()), int((missed & np.isinf(g)).sum())
        what = ([f"{n_gnan} where the golden is NaN"] if n_gnan else []) + (
            [f"{n_ginf} where it is ±inf"] if n_ginf else [])
        first = np.flatnonzero(missed)[0]
        return out(False, reason=f"misses {n_gnan + n_ginf} of the golden's {n_bad} non-finite elements "
                                 f"(of {g.size}): {' and '.join(what)}; e.g. golden {g.flat[first]:g}, kernel "
                                 f"{a.flat[first]:g}" +
                   (f"; {_n(k, 'element')} there unwritten (the driver's NaN poison)" if k else ""))
    notes = []
    if n_over:
        signs = "±inf" if (a[over] > 0).any() and (a[over] < 0).any() else ("+inf" if (a[over] > 0).any() else "-inf")
        notes.append(f"{_n(n_over, 'element')} overflow to {signs} in {dtype}, as in the device interpretation")
    if a.size and not a_m.size:   # nothing finite to measure: every element matched exactly
        return out(True, "special-values" if n_bad else "overflow", note="; ".join(notes))
    rule, why = _verdict(a_m, g_m, dtype, rounded_intermediate)
    if rule in ("floored", "small-value") and not mare < 10 * THRESHOLD[dtype]:
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
    d_fin = bool(np.isfinite(d_m).all())
    cond = conditioning_failure(a_m, d_m, g_m, dtype) if d_fin else "the device interpretation is not finite there"
    if cond is None:
        dmere, dmare = mere_mare(d_m, g_m)
        if dev["mismatches"] == 0:
            how = "equals the device interpretation bit for bit"
        else:
            how = (f"is within CANN's double-benchmark ratios of it (max |kernel - device| "
                   f"{float(np.max(np.abs(a_m - d_m))):.3g})")
        notes.append(f"conditioning limit, not a kernel fault: the device-mode interpretation fails against exact "
                     f"math too (device MERE {dmere:.3g}, MARE {dmare:.3g}; kernel MERE {mere:.3g}, MARE {mare:.3g}); "
                     f"the kernel {how}")
        return out(True, "conditioning", note="; ".join(notes))
    return out(False, reason=f"{why}; the device-mode interpretation fails too, but the kernel is less accurate "
                             f"than it: {cond}")
