"""Value checks a spec may attach to an input. `index_in_range` builds a device check (`on="device"`: the kernel
checks the data where it reads it, the interpreter runs the function). The others check a host array
(`spec.check(name, fn, on="values")`) whose rule the emitted aclnn
layer also enforces: each such factory tags the function it returns with its rule (`host_rule`: the factory's name
and arguments), by which opgen.codegen.aclnn's HOST_CHECKS emits the same rule in
C++ (CANN's ACLNN_ERR_PARAM_INVALID, 161002), so the kernel never walks a value the interpreter refuses; the emitted
TilingFunc enforces those in opgen.tiling.emit.TILING_HOST_CHECKS as well (GRAPH_FAILED: graph mode has no aclnn layer).
docs/design.md "Value checks on host arrays"."""

from __future__ import annotations

import numpy as np


def cumulative_ends(name: str, total_dim: str):
    """actual_seq arrays: strictly increasing cumulative ends (every batch non-empty) ending at T.

    The check of the int64 host array `name` [Bn] holding the cumulative sequence ends of batches stored
    concatenated (TND: batch b holds tokens name[b - 1] .. name[b] - 1, the first from 0), as CANN's
    actualSeqQLen / actualSeqKvLen: non-empty and 1-D, each end above the previous one (the first above 0), the
    last equal to the token dim `total_dim` (a dim name, "T1"). Returns fn(arrays, env, attrs) -> the broken rule's
    text or None (None too when the array is absent). The aclnn layer emits the same three rules
    (opgen.codegen.aclnn `_cumulative`)."""
    def fn(arrays, env, attrs):
        cu = arrays[name]
        if cu is None:
            return None
        cu = np.asarray(cu)
        if cu.ndim != 1 or cu.size == 0:
            return "must be a non-empty 1-D array of cumulative sequence ends"
        if cu[0] <= 0 or np.any(np.diff(cu) <= 0):
            return f"cumulative ends must be strictly increasing and positive, got {cu.tolist()[:8]}"
        if cu[-1] != env[total_dim]:
            return f"last cumulative end {int(cu[-1])} must equal {total_dim}={env[total_dim]}"
        return None
    fn.host_rule = ("cumulative_ends", {"name": name, "total_dim": total_dim})
    return fn


def index_in_range(name: str, dim: str, ignore: str | None = None):
    """Indices: every element of the integer input `name` (any shape) names a slot of dim `dim`, 0 <= i < dim, or,
    with `ignore` (the name of an integer attribute, CANN's ignore_index), equals that attribute's value.

    For `spec.check(name, index_in_range(name, "C", ignore="ignore_index"), on="device")`: the class index of a loss
    (NLLLoss, CrossEntropyLoss), the row of an Embedding; the data lives on the device, so the aclnn layer cannot
    read it and the kernel checks it where it reads it (Trap). `dim` is a dim name of the spec (its value is the
    call's, env[dim]). Returns fn(arrays, env, attrs) -> "<name>[k] = v is outside [0, D)" (k the first bad element's
    index, "(flat)" after it for an input of several dims; "and is not <ignore> x" appended with `ignore`) or None,
    also when the input is absent (None). A device check: no host_rule (the aclnn layer cannot read the data).
    Raises TypeError at the call for a `name`, `dim` or `ignore` that is not a str; the check raises KeyError
    naming the input, dim or attribute the spec does not have."""
    for what, v in (("name", name), ("dim", dim), ("ignore", ignore)):
        if not isinstance(v, str) and not (what == "ignore" and v is None):
            raise TypeError(f"index_in_range: {what} must be a name (str), not {v!r}")

    def fn(arrays, env, attrs):
        t = arrays[name]   # (a misspelt name raises, never a check silently skipped)
        if t is None:
            return None
        t = np.asarray(t)
        flat, d = t.reshape(-1), int(env[dim])
        bad = (flat < 0) | (flat >= d)
        skip = None
        if ignore is not None:
            skip = int(attrs[ignore])
            bad &= flat != skip
        if not bad.any():
            return None
        k = int(bad.nonzero()[0][0])
        where = f"{name}[{k}]" + (" (flat)" if t.ndim > 1 else "")
        return f"{where} = {int(flat[k])} is outside [0, {d})" + (f" and is not {ignore} {skip}" if ignore else "")
    return fn


def host_rule(fn) -> tuple | None:
    """(factory name, its arguments) of a check function a factory of this module built (`cumulative_ends` tags its
    function so; a derived spec's copy keeps the tag: functools.wraps copies it), or None for any other function --
    a user's own check is never taken for one of these rules, whatever its name."""
    rule = getattr(fn, "host_rule", None)
    return rule if isinstance(rule, tuple) and len(rule) == 2 and rule[0] in _FACTORIES else None


_FACTORIES = ("cumulative_ends",)
"""The factories whose functions carry a host_rule."""
