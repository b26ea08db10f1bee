"""The cost model's time line (docs/design.md "Copy/compute overlap", emu/core.h PipeState::tm): its constants
against opgen/platforms/cost.py, the emulation's span on a hand-made kernel (tests/cpp/emu_overlap.cpp) against a
schedule written out here, and the overlap term of opgen.check.cost.estimate."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from opgen.platforms import cost

ROOT = Path(__file__).resolve().parents[1]
INC = ROOT / "opgen" / "emu" / "include"

# docs/reference/kernel_cost.md §2
CLOCK, HBM, BURST, ISSUE, BARRIER = 1.8e9, 1.6e12, 256, 8, 16


def test_the_time_lines_constants_are_the_cost_models():
    """emu/core.h's kTl* constants (the time line, in cycles) are opgen/platforms/cost.py's."""
    text = (INC / "emu" / "core.h").read_text()
    assert "constexpr double kTlHbmBytesPerCycle = 1.6e12 / 1.8e9;" in text
    assert (cost.HBM_BYTES_PER_S, cost.CLOCK_HZ) == (1.6e12, 1.8e9)
    assert "kTlL2BytesPerCycle = kTlHbmBytesPerCycle * 110 / 32;" in text
    assert cost.L2_BYTES_PER_S == cost.HBM_BYTES_PER_S * 110 / 32
    found = dict(re.findall(r"kTl(\w+Cycles|BurstOverheadBytes) = (\d+)", text))
    assert found == {"BurstOverheadBytes": str(cost.BURST_OVERHEAD_BYTES), "VecIssueCycles": str(cost.VEC_ISSUE_CYCLES),
                     "BarrierCycles": str(cost.BARRIER_CYCLES), "FlagWaitCycles": str(cost.FLAG_WAIT_CYCLES),
                     "SyncAllCycles": str(cost.SYNC_ALL_CYCLES), "CrossWaitCycles": str(cost.CROSS_WAIT_CYCLES)}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_the_emulated_time_line_of_one_and_two_buffers(emu_program):
    """tests/cpp/emu_overlap.cpp on one core, four passes. By hand: copy-in t = (65536 + 256) / (1.6e12 / 1.8e9)
    = 74.016 cycles; compute c = 16 (barrier) + 9 (Muls) + 136 (Duplicate 128 repeats) + 9 (Muls) = 170, the
    buffer freed at its end. Two buffers: each copy-in runs beside the previous pass's compute, t + 4 c = 754.016;
    one buffer: each copy-in waits for the previous pass's free, 4 (t + c) = 976.064."""
    exe = emu_program(ROOT / "tests" / "cpp" / "emu_overlap.cpp")   # one build for the three tests
    t = (65536 + BURST) / (HBM / CLOCK)
    c = BARRIER + (1 + ISSUE) + (128 + ISSUE) + (1 + ISSUE)
    for num, want in ((2, t + 4 * c), (1, 4 * (t + c))):
        out = subprocess.run([str(exe), str(num)], capture_output=True, text=True, check=True, timeout=60).stdout
        assert out.split() == ["span", str(num), str(round(want))], out


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_the_emulated_time_line_of_a_prefetched_pass_loop(emu_program):
    """tests/cpp/emu_overlap.cpp "wait" / "prefetch": one core, three passes, two buffers, each compute c = 170
    cycles (as above) ending in a scalar wait for PIPE_V (w = 32 cycles on every pipe), copy-in t = 74.016. By hand:
    copied in right before each compute, the scalar wait holds the next copy-in: 3 (t + c + w) = 828.048; the next
    pass copied in before this one's compute (rowsched.pass_loop's order): CopyIn(1) runs beside Compute(0),
    CopyIn(2) starts after Compute(0)'s wait and ends before Compute(1)'s: t + 3 (c + w) = 680.016 -- the cost
    model's prefetched two-buffer price, pipeline_cycles(3, t, c + w, 0, 2, prefetch=True) (fill t, then the slowest
    stage c + w a pass, no copy-out)."""
    exe = emu_program(ROOT / "tests" / "cpp" / "emu_overlap.cpp")   # one build for the three tests
    t = (65536 + BURST) / (HBM / CLOCK)
    c = BARRIER + (1 + ISSUE) + (128 + ISSUE) + (1 + ISSUE)
    w = cost.FLAG_WAIT_CYCLES
    assert w == 32
    model = cost.pipeline_cycles(3, t, c + w, 0, 2, 1, 0, s=1, prefetch=True)
    assert model == pytest.approx(t + 3 * (c + w))
    for mode, want in (("wait", 3 * (t + c + w)), ("prefetch", model)):
        out = subprocess.run([str(exe), "2", mode], capture_output=True, text=True, check=True, timeout=60).stdout
        assert out.split() == ["span", mode, str(round(want))], out


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_an_l2_hit_pays_its_burst_overhead_at_the_l2_rate(emu_program):
    """tests/cpp/emu_overlap.cpp "reread": one core, one buffer, four passes copying the same 128 bursts of 512 B.
    By hand (docs/reference/kernel_cost.md §3, the memory term: an L2 hit's bytes and its share of the bursts'
    overhead at the L2 rate): the first copy-in from HBM, t = 128 (512 + 256) / (1.6e12 / 1.8e9) = 110.59 cycles;
    the other three from the L2, t2 = 128 (512 + 256) / (1.6e12 * 110 / 32 / 1.8e9) = 32.17; compute c = 170 as
    above, each copy-in waiting for the previous pass's free: t + 3 t2 + 4 c = 887.1 (the overhead of a hit at the
    HBM rate, as before, gave t2 = 58.31 and 965.5)."""
    exe = emu_program(ROOT / "tests" / "cpp" / "emu_overlap.cpp")   # one build for the three tests
    t = 128 * (512 + BURST) / (HBM / CLOCK)
    t2 = 128 * (512 + BURST) / (HBM * 110 / 32 / CLOCK)
    c = BARRIER + (1 + ISSUE) + (128 + ISSUE) + (1 + ISSUE)
    out = subprocess.run([str(exe), "1", "reread"], capture_output=True, text=True, check=True, timeout=60).stdout
    assert out.split() == ["span", "reread", str(round(t + 3 * t2 + 4 * c))], out


def test_the_estimate_takes_the_time_line_when_it_is_longest():
    """opgen.check.cost.estimate: the longest core's span over the clock is the overlap term; when it exceeds
    memory, vector + issue and cube, it is the estimate and the bound is "overlap"."""
    from opgen.check.cost import CoreCost, estimate

    c = CoreCost(vector_cycles=1000, vec_issues=10, bursts=1, burst_bytes32=1024, span_cycles=3000)
    r = estimate([c, CoreCost(span_cycles=2000)], 1024)
    assert r["overlap_us"] == pytest.approx(3000 / CLOCK * 1e6) and r["bound"] == "overlap"
    assert r["estimate_us"] == pytest.approx(3000 / CLOCK * 1e6)
    r = estimate([CoreCost(vector_cycles=1000, vec_issues=10, bursts=1, burst_bytes32=1024, span_cycles=900)], 1024)
    assert r["bound"] == "vector" and r["estimate_us"] == pytest.approx((1000 + 10 * ISSUE) / CLOCK * 1e6)
