"""Cost constants of Atlas A2 shared by the cost model of the emulated launch (opgen.check.cost) and the tiling
programs that choose a strategy by estimated time (opgen.tiling.rowkernel): one source for both. Each constant's
source, and which are estimates, is named in docs/reference/kernel_cost.md §2; cycles are AI Core clock cycles."""

from __future__ import annotations

CLOCK_HZ = 1.8e9
"""AI Core clock of Atlas A2 (docs/reference/ascendc.md §3)."""
HBM_BYTES_PER_S = 1.6e12
"""HBM bandwidth of Atlas A2 (docs/reference/ascendc.md §3)."""
L2_BYTES = 192 * 1024 * 1024
"""L2 cache of Atlas A2 (192 MB, the commonly published 910B figure and asc-devkit's HardwareInfo<ASCEND_V220>; an
ops-nn UT stub lists 32 MB: unverified, docs/reference/ascendc.md §3)."""
L2_BYTES_PER_S = HBM_BYTES_PER_S * 110 / 32
"""L2 bandwidth: HBM's times 110 / 32, the ratio of the "LocalMemBw" figures of ops-nn's 910B1 UT stub (units not
stated; an estimate, docs/reference/kernel_cost.md §2)."""
BURST_OVERHEAD_BYTES = 256
"""Bytes of HBM time one DMA burst costs beyond its data (an estimate, docs/reference/kernel_cost.md §2)."""
VEC_ISSUE_CYCLES = 8
"""Cycles one vector instruction issue costs beyond its repeats (an estimate, docs/reference/kernel_cost.md §2)."""
BARRIER_CYCLES = 16
"""Cycles one PipeBarrier costs (draining the vector pipeline; an estimate, docs/reference/kernel_cost.md §2)."""
FLAG_WAIT_CYCLES = 32
"""Cycles one SetFlag/WaitFlag hand-off between pipes costs (an estimate, docs/reference/kernel_cost.md §2)."""
SYNC_ALL_CYCLES = 1800
"""Cycles one SyncAll costs (1 µs; an estimate, docs/reference/kernel_cost.md §2)."""
CROSS_WAIT_CYCLES = 900
"""Cycles one CrossCoreWaitFlag hand-off costs (0.5 µs; an estimate, docs/reference/kernel_cost.md §2)."""
VEC_REPEAT_BYTES = 256
"""Bytes one vector repeat covers in one cycle (64 fp32 lanes; docs/reference/ascendc.md §1.9, the emulation's
vector cycle count: docs/reference/kernel_cost.md §1)."""


def pass_cycles(t_in, t_c, t_out, depth: int, a, b, mx=max, scale=None, s=0, prefetch: bool = False,
                fetch: bool = False):
    """Steady-state cycles of one pass of a queue-fed kernel (docs/design.md "Copy/compute overlap"): a pass copies
    in for `t_in` cycles (MTE2), computes for `t_c` (PIPE_V: lanes, issues, barriers) and copies out for `t_out`
    (MTE3), all at this core's share of the bandwidth.
      depth 2 (double buffering): the copy-in of pass i+1 and the copy-out of pass i-1 run beside the compute of
               pass i: max(t_c, s * t_c + t_in, t_out)
      depth 1: the copy-in of pass i+1 waits for the FreeTensor of the buffer it reuses, issued after the fraction
               `a` of the pass's vector instructions; the compute of pass i+1 waits for that copy-in; and its
               AllocTensor of the output, after the fraction `b`, waits for the copy-out of pass i, which starts when
               pass i's compute ends: max(t_c, max(a, s) * t_c + t_in, (1 - b) * t_c + t_out) -- t_c + max(t_in,
               t_out) when the buffers are held throughout (a = 1, b = 0).
    `s`: the fraction of the compute before its last scalar wait for PIPE_V: the next pass's copy-in is issued after
    this pass's Compute in program order, so it starts no earlier whatever the buffers (0: none).
    `prefetch` (depth 2 only: the pass loop issues the copy-in of pass i + 1 before Compute(i), opgen.kernel.rowsched
    pass_loop): the copy-in of pass i + 2 is issued when Compute(i) returns (after its last scalar wait, s) into
    the buffer Compute(i) freed (after a), and Compute(i + 2) needs it; the output buffer Compute(i + 2) allocates
    (after b) is the one the copy-out of pass i, started when Compute(i) ends, empties -- two passes cover each:
    2 pass >= max(a, s) t_c + t_in and 2 pass >= (1 - b) t_c + t_out, which max(t_c, t_in, t_out) always meets
    (a, b, s in [0, 1]), so a pass is max(t_c, t_in, t_out): the slowest stage.
    `fetch` (depth 1 only: Compute issues the next pass's copy-in right after it frees the row inputs,
    opgen.kernel.rowsched ComputeFetch): that copy-in starts after the fraction `a` whatever the scalar waits after
    it: max(t_c, a * t_c + t_in, (1 - b) * t_c + t_out).
    `a`, `b`, `s`: Fractions in [0, 1] (opgen.kernel.rowsched.queue_overlap reads them from the Kernel IR's Compute).
    Works on ints and on tiling expressions: `mx` is the maximum (emax for those), `scale(x, f)` x * f (default
    x * f.numerator // f.denominator, integer cycles)."""
    if scale is None:
        def scale(x, f):
            return x * f.numerator // f.denominator
    if depth >= 2 and prefetch:
        return mx(mx(t_c, t_in), t_out)
    if depth >= 2:
        return mx(mx(t_c, (scale(t_c, s) if s else 0) + t_in), t_out)
    return mx(mx(t_c, scale(t_c, a if fetch else max(a, s)) + t_in), scale(t_c, 1 - b) + t_out)


def pipeline_cycles(passes, t_in, t_c, t_out, depth: int, a, b, mx=max, scale=None, s=0, prefetch: bool = False,
                    fetch: bool = False):
    """Cycles of `passes` passes of a queue-fed kernel on one core: the first copy-in (fill), `passes` steady-state
    passes (`pass_cycles`) and the last copy-out (drain), and at least the copies themselves,
    passes * (t_in + t_out): this core's share of the bandwidth is shared by its copy-in and copy-out
    (docs/design.md "Copy/compute overlap"). Same arguments as `pass_cycles`."""
    steady = pass_cycles(t_in, t_c, t_out, depth, a, b, mx, scale, s, prefetch, fetch)
    return mx(t_in + passes * steady + t_out, passes * (t_in + t_out))
