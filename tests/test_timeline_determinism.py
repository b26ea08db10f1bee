"""The emulation's time line across cores does not depend on the order the core threads run in (emu/core.h
LaunchState::xtokTime, emu/mix.h CrossCoreWait): each CrossCoreWaitFlag joins the time of the set it consumes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INC = ROOT / "opgen" / "emu" / "include"
CROSS_WAIT, ISSUE = 900, 8   # docs/reference/kernel_cost.md §2 (cycles)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_a_cross_core_wait_joins_the_set_it_consumes(tmp_path):
    """tests/cpp/emu_xflag_time.cpp: the AIVs set flag 1 at t1 = 32 + 8 = 40 cycles (one Duplicate of 2048 fp32:
    32 repeats and an issue) and at t2 = 21 * 40 = 840; the AIC waits twice. By hand: the first wait ends at
    t1 + 900 = 940, the second at max(940, t2) + 900 = 1840 — whether both sets were pending at the first wait
    ("late") or one ("early"). (A single latest-set time per flag gave 2640 when late: t2 + 900 twice.)"""
    exe = tmp_path / "xft"
    subprocess.run(["g++", "-std=c++17", "-O1", "-pthread", "-Wall", "-Werror", f"-I{INC}",
                    str(ROOT / "tests" / "cpp" / "emu_xflag_time.cpp"), "-o", str(exe)], check=True)
    t1, t2 = 32 + ISSUE, 21 * (32 + ISSUE)
    want = max(t1 + CROSS_WAIT, t2) + CROSS_WAIT
    for order in ("late", "early"):
        out = subprocess.run([str(exe), order], capture_output=True, text=True, check=True, timeout=60).stdout
        assert out.split() == ["span", order, str(want), str(t2), str(t2)], out
