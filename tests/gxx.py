"""Test helper: the tests' own g++ programs compiled side by side."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor


def compile_all(jobs: dict) -> None:
    """Run the g++ command lines `jobs` ({name: argv}) three at a time; AssertionError naming the first that failed
    with the tail of its diagnostics (test_emu's and test_emu_cube's run_shared builds)."""
    with ThreadPoolExecutor(3) as ex:
        res = dict(zip(jobs, ex.map(lambda c: subprocess.run(c, capture_output=True, text=True), jobs.values())))
    for k, r in res.items():
        assert r.returncode == 0, f"{k} failed to compile:\n{r.stderr[-4000:]}"


def tiling_driver(exe, srcs: list, include: str, opt: str = "-O0"):
    """Compile tests/cpp/tiling_driver.cpp with the emitted TilingFunc sources `srcs` (paths) into executable `exe`,
    against the host emulation (-Wall -Werror; `include`: the directory whose op_host / ../op_kernel headers the
    sources include); AssertionError with g++'s diagnostics when it fails. Returns exe."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    cmd = ["g++", "-std=c++17", opt, "-Wall", "-Werror", "-I", str(root / "opgen/emu/include"), "-I", str(include),
           str(root / "tests/cpp/tiling_driver.cpp"), *map(str, srcs), "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe
