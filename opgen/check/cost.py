"""The kernel cost model: an Atlas A2 time estimate of one emulated launch from the emulation's counters.

The emulation counts per core (opgen/emu/include/emu/core.h `IssueCounts`, `CountVector`, `CountCube`; reported by
the check driver as `core_cost` lines): vector cycles (256-byte repeats, slow ops at 32 lanes), cube cycles
(16x16x16 fractals), vector instruction issues (one per 255 repeats), PipeBarrier, WaitFlag, GM bursts and their
bytes in whole 32-byte blocks, SyncAll and CrossCoreWaitFlag calls. `estimate` prices them with the constants of
docs/reference/kernel_cost.md §2 (the sources and which are estimates are named there):

  memory   = (HBM bytes + their bursts' overhead) / HBM bandwidth + (L2 bytes + their overhead) / L2 bandwidth,
             over every core's bursts (bytes rounded up to 32, BURST_OVERHEAD_BYTES a burst, shared out by bytes):
             the bytes of 32-B blocks some core touched before in the launch (retouch) are L2 hits, all of them when
             the launch's footprint (the blocks touched at least once) fits the L2, a share L2 / footprint of them
             otherwise; the rest is HBM traffic
  vector   = the busiest core's vector cycles / clock
  issue    = the busiest core's (issues * VEC_ISSUE + barriers * BARRIER + waits * FLAG_WAIT + SyncAll * SYNC_ALL +
             cross-core waits * CROSS_WAIT) cycles / clock
  cube     = the busiest core's cube cycles / clock
  overlap  = the longest core's span / clock: the emulation's time line of the core's pipes (docs/design.md
             "Copy/compute overlap"), where a copy waits for the buffer its queue hands back and compute for the
             copy that fills it, so the copy/compute overlap a queue's depth allows is priced, fill and drain included
  estimate = max(memory, max over cores of (vector + issue), cube, overlap)     (the vector pipe issues in order:
             issue overhead adds to its lanes)
  floor    = max(minimum GM bytes (each input read once, each output written once) / HBM bandwidth,
               useful MACs / (4096 MACs a cycle x the platform's AI Cores x clock))   (memory or cube roofline;
               an input the kernel reads only at picked elements counts a 32-byte granule per element where that is
               less than the input: opgen.check.run `_min_gm_bytes`)
  bound    = the term that sets the estimate: "memory", "vector", "cube" or "issue" (scalar / issue), or "overlap"
             when the time line is longer than each of them (copies and compute that do not overlap)
  cube utilisation = useful MACs (the spec's matmuls at the call's shapes less the terms a data-independent mask
             removes, `matmul_macs`) / issued MACs (every core's cube cycles * 4096: a 16x16x16 fractal a cycle,
             padded edges included)
"""

from __future__ import annotations

from dataclasses import dataclass

from opgen.check.useful_macs import useful_macs

from opgen.platforms.cost import (BARRIER_CYCLES, BURST_OVERHEAD_BYTES, CLOCK_HZ, CROSS_WAIT_CYCLES,  # noqa: F401
                                  FLAG_WAIT_CYCLES, HBM_BYTES_PER_S, L2_BYTES, L2_BYTES_PER_S, SYNC_ALL_CYCLES,
                                  VEC_ISSUE_CYCLES)

FIELDS = ("vector_cycles", "cube_cycles", "vec_issues", "barriers", "flag_waits", "bursts", "burst_bytes32",
          "sync_alls", "cross_waits", "retouch_bytes32", "span_cycles")
"""The per-core counters in the order of the driver's `core_cost <core> ...` line."""


@dataclass(frozen=True)
class CoreCost:
    """One core's counters (FIELDS; counts, bytes for burst_bytes32 and retouch_bytes32: the part of burst_bytes32
    in 32-B blocks some core had touched before in the launch; span_cycles: the cycle at which the core's time line
    ends, docs/design.md "Copy/compute overlap")."""

    vector_cycles: int = 0
    cube_cycles: int = 0
    vec_issues: int = 0
    barriers: int = 0
    flag_waits: int = 0
    bursts: int = 0
    burst_bytes32: int = 0
    sync_alls: int = 0
    cross_waits: int = 0
    retouch_bytes32: int = 0
    span_cycles: int = 0

    @property
    def issue_cycles(self) -> int:
        """Cycles of issue overhead and synchronisation on this core (module docstring)."""
        return (self.vec_issues * VEC_ISSUE_CYCLES + self.barriers * BARRIER_CYCLES
                + self.flag_waits * FLAG_WAIT_CYCLES + self.sync_alls * SYNC_ALL_CYCLES
                + self.cross_waits * CROSS_WAIT_CYCLES)


def parse_core_cost(rest: str) -> tuple[int, CoreCost]:
    """The core index and counters of one driver line `core_cost <core> <FIELDS...>` (without its head). Raises
    ValueError for a line of the wrong length."""
    vals = [int(x) for x in rest.split()]
    if len(vals) != 1 + len(FIELDS):
        raise ValueError(f"core_cost line with {len(vals)} numbers, expected {1 + len(FIELDS)}")
    return vals[0], CoreCost(*vals[1:])


FRACTAL_MACS = 16 * 16 * 16
"""Multiply-accumulates of one cube cycle: a 16x16x16 fractal (docs/reference/kernel_cost.md §2, cube rate)."""


def matmul_macs(graph, env, dtypes=None) -> int:
    """Useful multiply-accumulates of the tensor-IR `graph`'s matmuls at the dims of `env` ({dim: int, variadic:
    tuple}, as spec.bind's env; `dtypes` the call's dtype binding, as Bound.dtypes): per matmul node, its result's
    elements (batch dims included) times its contraction length, less the terms a data-independent mask removes
    (a result element the mask replaces or multiplies by a known zero, an operand element known to be zero, e.g.
    a causal or band attention's masked scores and their zero probabilities; a mask that is an input keeps every
    term): opgen.check.useful_macs, docs/reference/kernel_cost.md §3. Raises opgen.errors.SpecError when a dim of
    a matmul is not bound in `env`."""
    return useful_macs(graph, env, dtypes)


def estimate(cores: list[CoreCost], min_bytes: int, useful_macs: int = 0, aic: int = 0, platform=None) -> dict:
    """The cost model over per-core counters `cores` with the minimum GM bytes `min_bytes` (module docstring).
    Returns {"estimate_us", "floor_us", "ratio" (estimate / floor, None when the floor is 0), "bound", "memory_us",
    "vector_us", "issue_us", "cube_us", "overlap_us" (the longest core's time line), "vec_issues", "barriers", "flag_waits", "bursts", "sync_alls",
    "cross_waits", "vec_issues_total", "hbm_bytes" / "l2_bytes" (the burst bytes the memory term reads from HBM /
    from the L2), "cube_macs" (issued: every core's cube cycles * FRACTAL_MACS),
    "useful_macs", "cube_util" (useful / issued, None without cube work)} (times in microseconds; the counts are the
    busiest core's, bursts and vec_issues_total the sums over the cores). `useful_macs`: `matmul_macs` of the call;
    `aic`: the platform's AI Cores (cube units), for the cube floor "cube_floor_us" (0 when either is 0); "floor_us"
    is the larger of it and the memory floor "memory_floor_us". `platform` (an opgen.platforms.Platform, default
    None: Atlas A2's constants): the SoC the launch ran on -- its clock converts cycles to time and its HBM
    bandwidth prices bytes (the L2 bandwidth scaled with it); the per-event latencies and the L2's size stay Atlas
    A2's estimates (docs/reference/kernel_cost.md §2). "model" names the constants used (`model_name`)."""
    us = 1e6
    clock = platform.clock_hz if platform is not None else CLOCK_HZ
    hbm_bw = platform.hbm_bytes_per_s if platform is not None else HBM_BYTES_PER_S
    l2_bw = L2_BYTES_PER_S * hbm_bw / HBM_BYTES_PER_S
    moved = sum(c.burst_bytes32 for c in cores)
    again = sum(c.retouch_bytes32 for c in cores)
    footprint = moved - again   # the blocks touched at least once (each first touch goes to HBM)
    l2 = again * min(1.0, L2_BYTES / footprint) if footprint else float(again)
    hbm = moved - l2
    ov = sum(c.bursts for c in cores) * BURST_OVERHEAD_BYTES   # each burst's overhead where its bytes come from
    ov_l2 = ov * l2 / moved if moved else 0.0
    mem = ((hbm + ov - ov_l2) / hbm_bw + (l2 + ov_l2) / l2_bw) * us
    busiest = max(cores, key=lambda c: c.vector_cycles + c.issue_cycles, default=CoreCost())
    vec = busiest.vector_cycles / clock * us
    issue = busiest.issue_cycles / clock * us
    cube = max((c.cube_cycles for c in cores), default=0) / clock * us
    span = max((c.span_cycles for c in cores), default=0) / clock * us
    issued = sum(c.cube_cycles for c in cores) * FRACTAL_MACS
    est = max(mem, vec + issue, cube, span)
    if span > max(mem, vec + issue, cube):
        bound = "overlap"
    elif est == mem:
        bound = "memory"
    elif est == cube:
        bound = "cube"
    else:
        bound = "vector" if vec >= issue else "issue"
    mem_floor = min_bytes / hbm_bw * us
    cube_floor = useful_macs / (FRACTAL_MACS * aic * clock) * us if aic else 0.0
    floor = max(mem_floor, cube_floor)
    return {"model": model_name(platform), "estimate_us": est, "floor_us": floor, "memory_floor_us": mem_floor, "cube_floor_us": cube_floor,
            "hbm_bytes": hbm, "l2_bytes": l2,
            "ratio": est / floor if floor else None, "bound": bound,
            "memory_us": mem, "vector_us": vec, "issue_us": issue, "cube_us": cube, "overlap_us": span,
            "vec_issues": busiest.vec_issues, "barriers": busiest.barriers, "flag_waits": busiest.flag_waits,
            "bursts": sum(c.bursts for c in cores), "sync_alls": busiest.sync_alls,
            "cross_waits": busiest.cross_waits, "vec_issues_total": sum(c.vec_issues for c in cores),
            "cube_macs": issued, "useful_macs": useful_macs, "cube_util": useful_macs / issued if issued else None}


def model_name(platform=None) -> str:
    """The constants `estimate` prices with, as `opgen check` names them: "Atlas A2 model" for Atlas A2 or no
    platform; for another SoC its product with its own clock and HBM bandwidth and Atlas A2's latency estimates
    (docs/reference/kernel_cost.md §2: no other SoC's latencies are documented)."""
    if platform is None or (platform.clock_hz == CLOCK_HZ and platform.hbm_bytes_per_s == HBM_BYTES_PER_S
                            and platform.product == "Atlas A2"):
        return "Atlas A2 model"
    return (f"{platform.product} ({platform.name}): its clock {platform.clock_hz / 1e9:g} GHz and HBM "
            f"{platform.hbm_bytes_per_s / 1e12:g} TB/s, Atlas A2's latency estimates and L2")


def _l2_text(c: dict) -> str:
    """', N MB from the L2' when the memory term reads any burst bytes from the L2 (else '')."""
    return f", {c['l2_bytes'] / 1e6:.3g} MB from the L2" if c.get("l2_bytes") else ""


def format_cost(c: dict) -> str:
    """One line of text for `estimate`'s result (what `opgen check` prints)."""
    ratio = "n/a" if c["ratio"] is None else f"{c['ratio']:.2f}x"
    floor = f"floor {c['floor_us']:.3g} us"
    if c.get("cube_floor_us", 0) > c.get("memory_floor_us", c["floor_us"]):
        floor += " (cube)"
    return (f"Cost ({c.get('model', 'Atlas A2 model')}, docs/reference/kernel_cost.md): estimate {c['estimate_us']:.3g} us, {floor} "
            f"({ratio}), bound {c['bound']}; memory {c['memory_us']:.3g} us ({c['bursts']} "
            f"bursts{_l2_text(c)}), busiest core: vector {c['vector_us']:.3g} us, issue {c['issue_us']:.3g} us "
            f"({c['vec_issues']} vector issues, {c['barriers']} barriers, {c['flag_waits']} flag waits, "
            f"{c['sync_alls']} SyncAll, {c['cross_waits']} cross-core waits), cube {c['cube_us']:.3g} us, "
            f"time line {c.get('overlap_us', 0):.3g} us"
            + ("" if c.get("cube_util") is None else f" (utilisation {c['cube_util']:.1%}: {c['useful_macs']} useful "
                                                     f"of {c['cube_macs']} issued MACs)"))
