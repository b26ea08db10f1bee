"""opgen: an operator compiler for Huawei Ascend NPUs.

Pipeline (see docs/design.md): specs/<op>.py (opgen.dsl) -> tensor IR (opgen.ir)
-> NumPy interpreter (opgen.interp) -> passes / codegen / emulation (later issues).
"""

from opgen.errors import OpgenError, SpecError, ValidationError

__all__ = ["OpgenError", "SpecError", "ValidationError"]
__version__ = "0.1.0"
