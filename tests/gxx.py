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
