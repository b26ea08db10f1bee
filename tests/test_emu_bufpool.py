"""The emulation's TBufPool (opgen/emu/include/emu/tensor.h; docs/reference/ascendc.md §1.5 "TBufPool"): two pools
sharing UB bytes (TPipe::InitBufPool(b, len, a)), and the fault that makes the sharing safe to check -- every UB byte
remembers the pool whose buffer wrote it last, and a read through a buffer of the other pool is a fault (emu/core.h
OwnedAccess), never a silent read of the other buffer's data. Scenarios: tests/cpp/emu_bufpool.cpp, built once.

Expected values are hand counts: the scenario copies x in and adds 1, so y[1] = x[1] + 1 = 2; the
pipe's own buffer after a 1024-byte pool starts at UB byte 1024 and 7 + 1 = 8."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from test_emu_pipes import run   # the scenario runner: (launch ok, fault lines, stdout)

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "tests" / "cpp" / "emu_bufpool.cpp"
pytestmark = [pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available"),
              pytest.mark.slow]   # every test runs the compiled program (exe)

POISON = re.compile(r"(\w[\w >-]*) \(emu_bufpool\.cpp:(\d+), PIPE_(\w+)\): reads UB byte (\d+) through a buffer of "
                    r"TBufPool (\d), last written through a buffer of TBufPool (\d) sharing it \(poisoned")


@pytest.fixture(scope="module")
def exe(emu_program):
    """emu_bufpool.cpp at -O1, linking the emulation's shared specializations, built once for the run
    (tests/conftest.py emu_program)."""
    return emu_program(SRC)




def test_two_phases_sharing_bytes_pass(exe):
    """Pool a's TBuf, then pool b's queue over the same bytes (each written before it is read): no fault, the
    result is b's (y = x + 1), and UB holds one pool's bytes (1 KB), not two."""
    ok, faults, out = run(exe, "phases")
    assert ok and not faults, out
    assert "val y1 2" in out and "ub_peak 1024" in out


@pytest.mark.parametrize("name, stmt, pipe", [("reuse_read", "Adds", "V"), ("copy_out_stale", "DataCopy UB->GM", "MTE3")])
def test_reading_a_reused_region_is_a_fault(exe, name, stmt, pipe):
    """A vector read (reuse_read) or a copy to GM (copy_out_stale) through pool a's buffer of bytes pool b's buffer
    wrote last: one fault naming the reading statement (its source line: the scenario's only such statement), both
    pools and the first such byte (0)."""
    ok, faults, out = run(exe, name)
    assert not ok and len(faults) == 1, out
    m = POISON.search(faults[0])
    assert m, faults
    line = int(m.group(2))
    src = SRC.read_text().splitlines()[line - 1]
    assert m.group(1) == stmt and m.group(3) == pipe and src.strip().startswith(stmt.split()[0] + "("), (faults, src)
    assert m.groups()[3:] == ("0", "1", "2"), faults


def test_pool_limits(exe):
    """A sharing pool longer than the pool it shares, and buffers past a pool's length, are faults (as the real
    header's debug asserts); the pipe's own buffers come after the pools' bytes."""
    ok, faults, _ = run(exe, "share_longer")
    assert not ok and "no longer than length of shareBuf" in faults[0]
    ok, faults, _ = run(exe, "pool_overflow")
    assert not ok and "exceeds limit of BufPool" in faults[0]
    ok, faults, out = run(exe, "pipe_after_pools")
    assert ok and not faults and "addr 0 1024" in out and "val y0 8" in out, out
