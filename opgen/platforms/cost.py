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
