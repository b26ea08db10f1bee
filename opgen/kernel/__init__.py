"""Kernel families and their Kernel IR (docs/design.md "Kernel families").

The launch plan the tensor pass `fuse` builds (`KernelPlan`, `Kernel`, `Stage`, `verify_plan`, `print_plan`)
lives in opgen.passes.plan, the stage that makes it; it is re-exported here for the callers of this package.
Importing the package registers the families (opgen.kernel.family.register): attention, cube, then rows.
"""

from opgen.passes.plan import Kernel, KernelPlan, Stage, print_plan, verify_plan
# The families register into opgen.kernel.family.families() when imported, in the order they are tried.
from opgen.kernel import attention, cube, rows  # noqa: E402,F401  isort: skip

__all__ = ["Kernel", "KernelPlan", "Stage", "print_plan", "verify_plan"]
