"""Spec DSL: declare an operator as CANN does (OpSpec) and write its body over Tensor proxies."""

from opgen.dsl import aclnn as api
from opgen.dsl.builder import Builder, Tensor
from opgen.dsl.spec import Bound, OpSpec, SpecKey
from opgen.dsl.grad import derive_grad
from opgen.dsl.checks import cumulative_ends
from opgen.ir.dims import Lit, Prod, Sym, Variadic
from opgen.ir.dtypes import DType, DTypeVar

f32, f16, bf16 = DType.f32, DType.f16, DType.bf16
i8, u8, i16, i32, i64 = DType.i8, DType.u8, DType.i16, DType.i32, DType.i64
boolean = DType.bool
A2 = "ascend910b"
A3 = "ascend910_93"
A5 = "ascend950"

__all__ = ["api", "derive_grad", "cumulative_ends", "Builder", "Tensor", "Bound", "OpSpec", "SpecKey", "Lit", "Prod", "Sym", "Variadic", "DType", "DTypeVar",
           "f32", "f16", "bf16", "i8", "u8", "i16", "i32", "i64", "boolean", "A2", "A3", "A5"]
