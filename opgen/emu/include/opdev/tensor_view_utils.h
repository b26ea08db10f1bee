// opgen host-side emulation: op::IsContiguous of opdev/tensor_view_utils.h (CANN's opbase). Tensors are always
// contiguous here (aclnn_kernels/contiguous.h), so it is always true: the aclnn layer of an op with inputs updated
// in place skips its ViewCopy back into a non-contiguous caller's tensor (docs/design.md "Inputs updated in place").
#pragma once
#include "opdev/common_types.h"

namespace op {
inline bool IsContiguous(const aclTensor* /*tensor*/) { return true; }
}  // namespace op
