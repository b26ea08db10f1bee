"""`opgen check`: compile an operator's emitted C++ (TilingFunc + kernel) against opgen's AscendC emulation,
run it on blockDim simulated cores (emu::Launch for AIV-only kernels, emu::LaunchMix with 1 AIC : 2 AIV per AI
Core for the kernels that declare KERNEL_TYPE_MIX_AIC_1_2) and compare its outputs with the interpreter
(docs/design.md "CPU emulation of the emitted code", "Command line"). Outputs computed from an intermediate the op
rounds to T (NSA's P and dS) may pass the rounded-intermediate rule (compare.py); ops with a GM model of CANN's
kernels (declared with OpSpec.gm_reference) get it reported next to the counted bytes.

Modules: compare (CANN precision metrics and the per-output verdict), aclnn (the aclnn case runner that
judges bad inputs first), driver (per-op launch driver source), caseio (case file, report, outputs),
build (ninja build directory per op), run (run_check, CheckResult), report (human output).
C++ support files: cpp/check_driver.h (launch driver; cpp/check_main.cpp/.h compile its Main once for every op),
cpp/runtime.cpp/.h (aclnn case reader).

Python API: `run_check(op, inputs, attrs, dtypes, dims=..., soc=..., asan=..., gen_dir=...) -> CheckResult`.
"""

from __future__ import annotations

from opgen.check.aclnn import AclnnRejected
from opgen.check.build import BuildError
from opgen.check.compare import OutputComparison, compare_output
from opgen.check.report import format_text
from opgen.check.run import CheckResult, KernelTrapped, run_check

__all__ = ["AclnnRejected", "KernelTrapped", "BuildError", "CheckResult", "OutputComparison", "compare_output", "format_text",
           "run_check"]
