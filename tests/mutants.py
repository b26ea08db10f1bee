"""The mutation harness of the tests that delete one sync of an emitted kernel at a time (tests/test_headsched.py,
tests/test_emu_pipes.py, tests/test_kernels_nsa.py, tests/test_flash_attention.py): GUARD is C++ prepended to a
kernel header after its `#include "kernel_operator.h"`; a sync site rewritten as `if (OpgenKeep(i)) { ... }` runs
unless the environment variable OPGEN_MUTANT is i, and with OPGEN_MUTANT_LOG set each site reached is appended to
that file once. One build serves every mutant: the kernel is compiled once, each run picks the site it skips.
`guard_placed` guards every sync the dependency pass placed in an emitted header (its comment names the buffer and
the dependence)."""

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

GUARD = """#include <cstdio>
#include <cstdlib>
#include <mutex>
// Test harness only (tests/mutants.py): sync site i runs unless OPGEN_MUTANT = i; the sites reached are
// appended to the file OPGEN_MUTANT_LOG names.
static inline bool OpgenKeep(int i)
{
    static const int cut = [] { const char* e = std::getenv("OPGEN_MUTANT"); return e ? std::atoi(e) : -1; }();
    static const char* log = std::getenv("OPGEN_MUTANT_LOG");
    static bool seen[4096] = {};
    static std::mutex mu;
    if (log != nullptr) {
        std::lock_guard<std::mutex> g(mu);
        if (!seen[i]) {
            seen[i] = true;
            if (FILE* f = std::fopen(log, "a")) {
                std::fprintf(f, "%d\\n", i);
                std::fclose(f);
            }
        }
    }
    return i != cut;
}
"""


# A sync the dependency pass placed: its comment names the buffer and the dependence (opgen.kernel.kir_sync._why:
# read-after-write, write-after-read or write-after-write).
_PLACED = re.compile(r"^(\s*)((?:PipeBarrier<PIPE_\w+>\(\);|SetFlag<HardEvent::\w+>\(\w+\);))(\s*// .*: [A-Z0-9]+ "
                     r"(?:has (?:written|read) it before .*|writes after [A-Z0-9]+'s write))$")


def guard_placed(text: str, waw: bool = True) -> tuple[str, list]:
    """`text` (an emitted kernel header) with each sync the dependency pass placed (a barrier, or a SetFlag and
    the WaitFlag after it) guarded by OpgenKeep(i) (tests/mutants.py), and [(i, line, statement)] of the sites.
    waw=False leaves the write-after-write syncs ("V writes after S's write") unguarded: no site."""
    lines, out, sites = text.split("\n"), [], []
    i = 0
    while i < len(lines):
        m = _PLACED.match(lines[i])
        if m and (waw or "'s write" not in m.group(3)):
            stmt = m.group(2)
            if stmt.startswith("SetFlag"):
                assert "WaitFlag" in lines[i + 1], lines[i:i + 2]
                stmt += " " + lines[i + 1].strip()
            sites.append((len(sites), i + 1, stmt))
            out.append(f"{m.group(1)}if (OpgenKeep({len(sites) - 1})) {{ {stmt} }}{m.group(3)}")
            i += 2 if stmt.startswith("SetFlag") else 1
            continue
        out.append(lines[i])
        i += 1
    text = "\n".join(out).replace('#include "kernel_operator.h"\n', '#include "kernel_operator.h"\n' + GUARD, 1)
    return text, sites


def guard_package(src: Path, gen: Path, snake: str, waw: bool = True) -> tuple[str, list]:
    """Copy the emitted package `src` (a directory holding op_kernel/<snake>.h) to `gen`/<snake> and guard its
    kernel header's placed syncs (guard_placed, `waw` too); returns (the header's original text, the sites)."""
    shutil.copytree(src, Path(gen) / snake)
    h = Path(gen) / snake / "op_kernel" / f"{snake}.h"
    orig = h.read_text()
    text, sites = guard_placed(orig, waw)
    h.write_text(text)
    return orig, sites


def reach_then_mutate(sites: list, cases, check, monkeypatch, log, skip=()) -> tuple[list, list]:
    """Run `check(case)` (an opgen.check.run_check of the guarded package) on each case of `cases` unmutated (each
    must pass without a fault) with OPGEN_MUTANT_LOG set to `log`, then each site some case reached with only that
    site skipped (OPGEN_MUTANT), on the cases that reach it in order until one fails with a race fault. Returns (the
    reached site indices, the survivors as [(line, statement, first faults of its last run)]); `sites` as
    guard_placed returns them. `skip`: site indices another run already mutated (reached, never mutated again).

    A mutant runs the launch driver and the case file of its case's unmutated check again (_Launches: the same
    executable, since one build serves every mutant, and the same inputs, attributes, platform and schedule), not
    the whole check: the aclnn layer, the spec's validation and the up-to-date builds around it are the unmutated
    check's and do not depend on the site skipped (~0.1 s of CPU a mutant, a few hundred mutants)."""
    launches = _Launches(monkeypatch, log.parent)
    monkeypatch.setenv("OPGEN_MUTANT_LOG", str(log))
    by_case = {}
    for n, case in enumerate(cases):
        log.write_text("")
        with launches.recording(n):
            r = check(case)
        assert r.passed and not r.faults, (case, r.faults)
        by_case[n] = sorted({int(x) for x in log.read_text().split()})
    monkeypatch.delenv("OPGEN_MUTANT_LOG")
    reached = sorted({k for v in by_case.values() for k in v})
    survivors = []
    for k in (k for k in reached if k not in set(skip)):
        faults: list = []
        for n in (n for n, v in by_case.items() if k in v):
            faults = launches.relaunch(n, k)
            if any("race (" in f for f in faults):
                break
        else:
            survivors.append((sites[k][1], sites[k][2], faults[:1]))
    return reached, survivors


def site_key(text: str, ln: int, stmt: str) -> tuple:
    """A placed sync site of header `text` (its original, unguarded text; `ln` and `stmt` as guard_placed gives
    them) named independently of line numbers: (the method it is in, its comment, the first word of the statement
    after it)."""
    lines = text.split("\n")
    method = next(m.group(1) for x in reversed(lines[:ln]) if (m := re.match(r"\s*__aicore__ inline \w+ (\w+)\(", x)))
    after = next(x for x in lines[ln + ("WaitFlag" in stmt):] if not x.strip().startswith("//"))   # code, not a comment
    return method, lines[ln - 1].split("// ")[-1], after.split()[0].split("(")[0]


class _Launches:
    """The last launch-driver run of each unmutated case (reach_then_mutate): while `recording(n)`,
    opgen.check.run's _run_driver also keeps a copy of the case file it launches (the last one wins: a backward's
    check may first check its forward), the executable's path and the environment (a test's OPGEN_TEST_UB);
    `relaunch(n, k)` runs that executable on that case in that environment with OPGEN_MUTANT=k and returns the
    faults run_check would report (the report's faults, its TilingFunc failure, an abnormal exit)."""

    def __init__(self, monkeypatch, where: Path):
        import opgen.check.run as run_mod

        self.where, self.runs, self.current = Path(where), {}, None
        real = run_mod._run_driver

        def run_driver(exe, case, out_dir, *args, **kw):
            if self.current is not None:
                keep = self.where / f"mutant-case{self.current}.bin"
                shutil.copyfile(case, keep)
                env = {k: v for k, v in os.environ.items() if k != "OPGEN_MUTANT_LOG"}
                self.runs[self.current] = (Path(exe), keep, env)   # the case's environment too (OPGEN_TEST_UB)
            return real(exe, case, out_dir, *args, **kw)

        monkeypatch.setattr(run_mod, "_run_driver", run_driver)

    @contextlib.contextmanager
    def recording(self, n: int):
        self.current = n
        try:
            yield
        finally:
            self.current = None

    def relaunch(self, n: int, k: int) -> list:
        from opgen.check.caseio import parse_report
        from opgen.check.run import DRIVER_TIMEOUT

        exe, case, env = self.runs[n]
        with tempfile.TemporaryDirectory(prefix="opgen-mutant-") as out:
            r = subprocess.run([str(exe), str(case), out], capture_output=True, text=True, timeout=DRIVER_TIMEOUT,
                               env={**env, "OPGEN_MUTANT": str(k)})
            rep = Path(out) / "report.txt"
            rep = parse_report(rep.read_text() if rep.exists() else "")
        faults = list(rep.faults)
        if rep.tiling_error:
            faults.insert(0, f"TilingFunc: {rep.tiling_error}")
        if r.returncode != 0:
            faults.append(f"driver exited with status {r.returncode}: {r.stderr.strip()[-300:]}")
        return faults
