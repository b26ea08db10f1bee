"""Value checks a spec may attach to a host array (`spec.check(name, fn, on="values")`) whose rule the emitted aclnn
layer also enforces: each factory tags the function it returns with its rule (`host_rule`: the factory's name and
arguments), by which opgen.codegen.aclnn's HOST_CHECKS emits the same rule in
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


def host_rule(fn) -> tuple | None:
    """(factory name, its arguments) of a check function a factory of this module built (`cumulative_ends` tags its
    function so; a derived spec's copy keeps the tag: functools.wraps copies it), or None for any other function --
    a user's own check is never taken for one of these rules, whatever its name."""
    rule = getattr(fn, "host_rule", None)
    return rule if isinstance(rule, tuple) and len(rule) == 2 and rule[0] in _FACTORIES else None


_FACTORIES = ("cumulative_ends",)
"""The factories whose functions carry a host_rule."""
