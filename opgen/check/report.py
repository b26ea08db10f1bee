"""Human-readable form of a CheckResult (what `opgen check` prints without --json)."""

from __future__ import annotations

from opgen.check.compare import THRESHOLD
from opgen.check.cost import format_cost


def _num(v) -> str:
    return "nan" if v is None or v != v else f"{v:.3g}"


def format_text(res) -> str:
    """Lines: header (op, SoC, variant — the emulation's build or the Kernel IR interpreter —, blockDim, tilingKey,
    workspace bytes), the dtype binding, one line per output (rel_l2,
    rel_linf, MERE, MARE against exact mode, max |diff| against device mode, PASS/FAIL and the rule or the
    reason, then the verdict's note: overflowed elements, a conditioning limit), GM bytes moved vs the minimum
    (with the schedule's plan when it re-reads inputs: CheckResult.gm_plan; and vs the reference's estimate for
    CANN's kernel where one exists), per-buffer GM traffic, the cost model's
    estimate, floor and bound (opgen.check.cost), faults, and the verdict PASS / FAIL. An empty call (nothing
    launched, every output empty) says so in place of the outputs."""
    how = "Kernel IR interpreter" if res.variant == "kir" else f"{res.variant} build"
    out = [f"{res.op} on {res.soc} ({how}): blockDim {res.block_dim}, tilingKey {res.tiling_key}, "
           f"workspace {res.workspace_bytes} B"]
    if getattr(res, "dtypes", None):
        unused = getattr(res, "dtypes_unused", ())
        out.append("  dtypes: " + ", ".join(f"{k}={v}" + (" (no tensor of it given: the binding selects nothing, "
                                                          "the TilingFunc picks the dtype row)" if k in unused else "")
                                            for k, v in res.dtypes.items()))
    if res.tiling_ok and not res.launched and res.arrays and all(getattr(a, "size", 1) == 0
                                                                   for a in res.arrays.values()):
        out.append("  empty tensors: the aclnn layer returned success with workspace 0 and launched nothing; "
                   "every output is empty" if res.variant != "kir" else
                   "  empty tensors: an empty call launches nothing (the aclnn layer returns success with workspace "
                   "0); every output is empty")
    if not res.tiling_ok:
        out.append(f"  TilingFunc failed: {res.tiling_error or 'no report'}; nothing launched")
    width = max([len(k) for k in list(res.outputs) + list(res.gm)] + [4])
    for name, c in res.outputs.items():
        verdict = f"PASS ({c.rule})" if c.passed else f"FAIL: {c.reason}"
        if c.note:
            verdict += f": {c.note}"
        if c.golden_nonfinite:
            verdict += f" [{c.golden_nonfinite} non-finite golden elements compared exactly, not in the metrics]"
        if c.dtype not in THRESHOLD:
            # an integer output is judged element by element (compare._integer_verdict): relative errors of
            # int8 codes against the float64 values say nothing, the count of elements that differ does
            out.append(f"  {name:<{width}}  {c.dtype}: {int(c.device.get('mismatches') or 0)} elements differ from "
                       f"device mode, max|diff| {_num(c.device.get('max_abs'))}  {verdict}")
            continue
        out.append(f"  {name:<{width}}  rel_l2 {_num(c.rel_l2):>8}  rel_linf {_num(c.rel_linf):>8}  "
                   f"mere {_num(c.mere):>8}  mare {_num(c.mare):>8}  "
                   f"vs device max|diff| {_num(c.device.get('max_abs')):>8}  {verdict}")
    if res.gm:
        ratio = "n/a" if res.gm_ratio is None else f"{res.gm_ratio:.2f}x"
        out.append(f"GM bytes: {res.gm_bytes} moved, minimum {res.gm_bytes_min} (each input read once, each output "
                   f"written once): {ratio}")
        plan = getattr(res, "gm_plan", None)
        if plan:
            each = ", ".join(f"{n}: {plan['reads']} x {b} = {plan['reads'] * b} bytes planned, "
                             f"{res.gm[n].read if n in res.gm else 0} read" for n, b in plan["inputs"].items())
            out.append(f"GM plan: {plan['why']}: each row input is read {plan['reads']} times ({each}); column "
                       f"inputs are read by every core or chunk and the workspace exchange comes on top")
        if getattr(res, "gm_reference", None):
            out.append(f"GM bytes of CANN's kernel, the reference's estimate ({res.gm_reference_source}): "
                       f"{res.gm_reference} ({res.gm_bytes / res.gm_reference:.2f}x of it moved here)")
        for name, g in res.gm.items():
            out.append(f"  {name:<{width}}  read {g.read:>12}  written {g.written:>12}  (buffer {g.bytes} B)")
    if getattr(res, "cost", None):
        out.append(format_cost(res.cost))
    for f in res.faults:
        out.append(f"FAULT {f}")
    for t in res.traps:
        out.append(f"TRAP {t}")
    out.append("PASS" if res.passed else "FAIL" + (f": {', '.join(res.failed_outputs())}" if res.failed_outputs()
                                                    else ""))
    return "\n".join(out) + "\n"
