"""The kernel cost model (opgen.check.cost, docs/reference/kernel_cost.md): the emulation's issue-cost counters on a
hand-made kernel (tests/cpp/emu_cost.cpp) against counts worked out by hand, and the estimate, floor and bound
against arithmetic from the constants of the reference note's §2 table (written out here, not read from the
module)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from opgen.check import cost
from opgen.check.caseio import parse_report

ROOT = Path(__file__).resolve().parents[1]

# docs/reference/kernel_cost.md §2
CLOCK, HBM = 1.8e9, 1.6e12
BURST, ISSUE, BARRIER, FLAG, SYNC_ALL, CROSS = 256, 8, 16, 32, 1800, 900
L2, L2_BW = 192 * 2 ** 20, HBM * 110 / 32


def test_constants_are_those_of_the_reference_note():
    assert (cost.CLOCK_HZ, cost.HBM_BYTES_PER_S) == (CLOCK, HBM)
    assert (cost.BURST_OVERHEAD_BYTES, cost.VEC_ISSUE_CYCLES, cost.BARRIER_CYCLES, cost.FLAG_WAIT_CYCLES,
            cost.SYNC_ALL_CYCLES, cost.CROSS_WAIT_CYCLES) == (BURST, ISSUE, BARRIER, FLAG, SYNC_ALL, CROSS)
    assert (cost.L2_BYTES, cost.L2_BYTES_PER_S) == (L2, L2_BW)


def test_memory_bound_estimate():
    # 48 cores, each 64 bursts of 8 KB and 1 vector pass of 8 KB per burst (32 repeats, 1 issue)
    c = cost.CoreCost(vector_cycles=64 * 32, vec_issues=64, bursts=64, burst_bytes32=64 * 8192)
    r = cost.estimate([c] * 48, 48 * 64 * 8192)
    mem = 48 * 64 * (8192 + BURST) / HBM * 1e6
    assert r["memory_us"] == pytest.approx(mem) and r["bound"] == "memory" and r["estimate_us"] == pytest.approx(mem)
    assert r["floor_us"] == pytest.approx(48 * 64 * 8192 / HBM * 1e6)
    assert r["ratio"] == pytest.approx((8192 + BURST) / 8192)
    assert r["issue_us"] == pytest.approx(64 * ISSUE / CLOCK * 1e6)


def test_another_socs_clock_and_bandwidth_price_its_launch():
    """A launch on Ascend 950 (platforms.json: 1.65 GHz, 1.6 TB/s, 32 AI Cores) converts cycles at its own clock; the
    label names the SoC and says which constants are Atlas A2's."""
    from opgen.platforms import get_platform
    p = get_platform("ascend950")
    c = cost.CoreCost(vector_cycles=33000, vec_issues=100, cube_cycles=1650, bursts=2, burst_bytes32=4096)
    r = cost.estimate([c], 4096, useful_macs=4096 * 1650, aic=32, platform=p)
    assert r["vector_us"] == pytest.approx(33000 / 1.65e9 * 1e6) and r["cube_us"] == pytest.approx(1.0)
    assert r["issue_us"] == pytest.approx(100 * ISSUE / 1.65e9 * 1e6)
    assert r["memory_us"] == pytest.approx((4096 + 2 * BURST) / 1.6e12 * 1e6)
    assert r["cube_floor_us"] == pytest.approx(1650 / 32 / 1.65e9 * 1e6)
    line = cost.format_cost(r)
    assert "Ascend 950" in line and "1.65 GHz" in line and "Atlas A2's latency" in line, line
    a2 = cost.estimate([c], 4096, platform=get_platform("ascend910b1"))
    assert a2["model"] == "Atlas A2 model" and a2["vector_us"] == pytest.approx(33000 / CLOCK * 1e6)
    assert cost.format_cost(a2).startswith("Cost (Atlas A2 model,")


def test_issue_vector_and_cube_bounds():
    # one row per instruction of 1 KB rows: 4 repeats, 1 issue + 1 barrier each; 1000 instructions
    c = cost.CoreCost(vector_cycles=4000, vec_issues=1000, barriers=1000, bursts=1, burst_bytes32=1024)
    r = cost.estimate([c], 1024)
    assert r["bound"] == "issue"
    assert r["issue_us"] == pytest.approx(1000 * (ISSUE + BARRIER) / CLOCK * 1e6)
    assert r["estimate_us"] == pytest.approx((4000 + 1000 * (ISSUE + BARRIER)) / CLOCK * 1e6)
    r = cost.estimate([cost.CoreCost(vector_cycles=10 ** 6, vec_issues=10, sync_alls=2, cross_waits=1)], 0)
    assert r["bound"] == "vector" and r["ratio"] is None
    assert r["issue_us"] == pytest.approx((10 * ISSUE + 2 * SYNC_ALL + CROSS) / CLOCK * 1e6)
    r = cost.estimate([cost.CoreCost(cube_cycles=10 ** 6), cost.CoreCost(vector_cycles=10)], 64)
    assert r["bound"] == "cube" and r["cube_us"] == pytest.approx(10 ** 6 / CLOCK * 1e6)
    # the busiest core is the one with the most vector + issue time
    r = cost.estimate([cost.CoreCost(vector_cycles=100), cost.CoreCost(vector_cycles=50, flag_waits=10)], 0)
    assert r["flag_waits"] == 10 and r["vector_us"] == pytest.approx(50 / CLOCK * 1e6)


def test_issues_summed_over_cores_and_rated_per_row_and_element():
    """estimate's vec_issues_total is the sum over the cores (vec_issues stays the busiest core's); the bench rates
    it per row and per element of the case's largest input (last axis a row): 48 cores x 86 issues over a
    [4096, 22016] input and a smaller [22016] one, by hand: 4128 / 4096 a row, 4128 / (4096 * 22016) an element."""
    import numpy as np

    from opgen.bench.emu import _issue_rates

    r = cost.estimate([cost.CoreCost(vector_cycles=1, vec_issues=86)] * 47 + [cost.CoreCost(vector_cycles=2,
                                                                                         vec_issues=90)], 0)
    assert r["vec_issues"] == 90 and r["vec_issues_total"] == 47 * 86 + 90

    class Result:
        cost = {"vec_issues_total": 48 * 86}
        inputs = {"x": np.zeros((4096, 22016), np.float16), "w": np.zeros(22016, np.float16), "none": None}

    got = _issue_rates(Result())
    assert got["issues_per_row"] == pytest.approx(48 * 86 / 4096)
    assert got["issues_per_elem"] == pytest.approx(48 * 86 / (4096 * 22016))
    Result.inputs = {}
    assert _issue_rates(Result()) == {}


def test_report_lines_parse():
    rep = parse_report("ok 1\ncore_cost 1 5 0 2 1 0 3 96 0 0 64 90\ncore_cost 0 7 0 1 0 0 1 32 0 0 0 40\nend\n")
    assert rep.core_costs == [cost.CoreCost(7, 0, 1, 0, 0, 1, 32, 0, 0, 0, 40),
                              cost.CoreCost(5, 0, 2, 1, 0, 3, 96, 0, 0, 64, 90)]
    with pytest.raises(ValueError, match="core_cost line with 3 numbers"):
        cost.parse_core_cost("0 1 2")
    line = cost.format_cost(cost.estimate(rep.core_costs, 64))
    assert "bound " in line and "floor" in line


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_emulation_counters_on_a_hand_made_kernel(emu_program):
    exe = emu_program(ROOT / "tests" / "cpp" / "emu_cost.cpp")
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True, timeout=60).stdout
    assert "ok 1" in out
    rows = [line.split()[1:] for line in out.splitlines() if line.startswith("cost ")]
    # per core, by hand: Muls 2048 fp32 = 32 repeats; Exp 32 repeats at 32 lanes = 64 cycles; Duplicate 16384 fp32
    # = 256 repeats = 256 cycles in 2 issues (255 + 1); 1 PipeBarrier; 2 WaitFlag; bursts: one of 8192 B in, four
    # of 100 B (128 B in 32-B blocks) out; 1 SyncAll; nothing touched twice (each core its own half of x and y)
    per_core = [32 + 64 + 256, 0, 1 + 1 + 2, 1, 2, 1 + 4, 8192 + 4 * 128, 1, 0, 0]
    assert [[int(v) for v in r] for r in rows] == [[0] + per_core, [1] + per_core]
    r = cost.estimate([cost.CoreCost(*per_core)] * 2, 2 * 2048 * 4 + 2 * 400)
    assert r["memory_us"] == pytest.approx(2 * (8192 + BURST + 4 * (128 + BURST)) / HBM * 1e6)
    issue = 4 * ISSUE + BARRIER + 2 * FLAG + SYNC_ALL
    assert r["issue_us"] == pytest.approx(issue / CLOCK * 1e6) and r["bound"] == "issue"
    assert r["estimate_us"] == pytest.approx((352 + issue) / CLOCK * 1e6)
    assert r["floor_us"] == pytest.approx((2 * 8192 + 800) / HBM * 1e6)


def test_cube_utilisation_counts_the_specs_matmuls_over_the_issued_fractals():
    """cube utilisation = the spec's matmul MACs at the call's shapes over every core's cube cycles x 4096 (one
    16x16x16 fractal a cycle, docs/reference/kernel_cost.md §2-3). Useful MACs by hand: MatMul M x K x N; BatchMatMul
    B x M x K x N; FlashAttentionScore Q Kᵀ and P V, 2 x B x N1 x S1 x S2 x D; a transposed operand takes its
    contraction from the other axis."""
    from opgen.registry import load_spec

    ex = ROOT / "examples" / "specs"

    def macs(name, env):
        spec = load_spec(str(ex / name))
        return cost.matmul_macs(spec.graph(spec.keys()[0]), env)

    assert macs("mat_mul.py", {"M": 1000, "K": 37, "N": 3}) == 1000 * 37 * 3
    assert macs("batch_mat_mul.py", {"B": 5, "M": 7, "K": 11, "N": 13}) == 5 * 7 * 11 * 13
    fa = macs("flash_attention_score.py", {"B": 2, "N1": 4, "N2": 2, "S1": 33, "S2": 70, "D": 16, "MS1": 33,
                                           "MS2": 70})
    assert fa == 2 * (2 * 4 * 33 * 70 * 16)
    # 1000^3 on fractals of 16: 63^3 cycles issued
    r = cost.estimate([cost.CoreCost(cube_cycles=63 ** 3 // 2), cost.CoreCost(cube_cycles=63 ** 3 - 63 ** 3 // 2)],
                      10 ** 6, 1000 ** 3)
    assert r["cube_macs"] == 63 ** 3 * 4096 and r["cube_util"] == pytest.approx(1000 ** 3 / (1008 ** 3))
    assert cost.estimate([cost.CoreCost(vector_cycles=5)], 64)["cube_util"] is None
    assert "utilisation 97.6%" in cost.format_cost(r)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.slow
def test_nd2nz_counts_a_burst_per_source_row(emu_program):
    """A [20, 40] half tile out of a [20, 64] row-major matrix into L1 NZ: each source row is one contiguous GM run
    of 80 B (docs/reference/kernel_cost.md §1), so 20 bursts of 96 B in 32-B blocks -- not one per 16-element
    piece of the NZ layout (60 bursts of 32 B). Copied twice: the second copy's 20 x 96 B were touched by the first
    (retouched: L2 hits, §3)."""
    exe = emu_program(ROOT / "tests" / "cpp" / "emu_cost_nd2nz.cpp")
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True, timeout=60).stdout
    assert "ok 1" in out, out
    rows = [[int(v) for v in line.split()[1:]] for line in out.splitlines() if line.startswith("cost ")]
    assert rows == [[0, 2 * 20, 2 * 20 * 96, 20 * 96]]


def test_the_floor_of_a_matmul_is_its_cube_time_when_that_is_larger():
    """floor = max(memory floor, useful MACs / (4096 MAC a cycle x AI Cores x 1.8 GHz)) (docs/reference/kernel_cost.md
    §3): 4096^3 MACs on 24 AI Cores are 4096^3 / (4096 * 24 * 1.8e9) s = 388.4 us, above 100 MB / 1.6 TB/s."""
    macs = 4096 ** 3
    r = cost.estimate([cost.CoreCost(cube_cycles=macs // 4096 // 24)] * 24, 3 * 4096 * 4096 * 2, macs, 24)
    assert r["cube_floor_us"] == pytest.approx(macs / (4096 * 24 * CLOCK) * 1e6)
    assert r["memory_floor_us"] == pytest.approx(3 * 4096 * 4096 * 2 / HBM * 1e6)
    assert r["floor_us"] == r["cube_floor_us"] and r["ratio"] == pytest.approx(1.0) and r["bound"] == "cube"
    assert "(cube)" in cost.format_cost(r)
    r = cost.estimate([cost.CoreCost(cube_cycles=10)], 10 ** 9, 4096, 24)   # a small product: the memory floor
    assert r["floor_us"] == r["memory_floor_us"] and "(cube)" not in cost.format_cost(r)


def test_retouched_bytes_are_read_from_the_l2_when_the_footprint_fits():
    """memory = (HBM bytes + their bursts x 256) / 1.6 TB/s + (L2 bytes + their bursts x 256) / (1.6 TB/s x 110 / 32)
    (docs/reference/kernel_cost.md §3; the bursts shared out by bytes): bytes some core touched before in the launch are L2 hits, all of them when the footprint (bytes touched at
    least once) fits the 192 MB L2, a share L2 / footprint otherwise."""
    # 2 cores each read the same 8 MB twice in 1024 bursts: footprint 8 MB, 24 MB of it again
    c = cost.CoreCost(bursts=1024, burst_bytes32=16 * 2 ** 20)
    r = cost.estimate([replace(c, retouch_bytes32=8 * 2 ** 20), replace(c, retouch_bytes32=16 * 2 ** 20)], 8 * 2 ** 20)
    assert (r["hbm_bytes"], r["l2_bytes"]) == (8 * 2 ** 20, 24 * 2 ** 20)
    # the 2048 bursts' overhead shared out by bytes: a quarter with the HBM bytes, three quarters with the L2's
    assert r["memory_us"] == pytest.approx(((8 * 2 ** 20 + 512 * BURST) / HBM + (24 * 2 ** 20 + 1536 * BURST) / L2_BW)
                                           * 1e6)
    assert "25.2 MB from the L2" in cost.format_cost(r)
    # a 384 MB footprint re-read once: half of the re-read fits the L2's share
    c = cost.CoreCost(bursts=1, burst_bytes32=768 * 2 ** 20, retouch_bytes32=384 * 2 ** 20)
    r = cost.estimate([c], 384 * 2 ** 20)
    assert r["l2_bytes"] == pytest.approx(192 * 2 ** 20) and r["hbm_bytes"] == pytest.approx(576 * 2 ** 20)
    # nothing retouched: the HBM-only figure of before
    r = cost.estimate([cost.CoreCost(bursts=2, burst_bytes32=4096)], 4096)
    assert r["l2_bytes"] == 0 and r["memory_us"] == pytest.approx((4096 + 2 * BURST) / HBM * 1e6)
    assert "from the L2" not in cost.format_cost(r)
