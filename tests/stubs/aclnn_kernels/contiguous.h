// Stub: L0 Contiguous / ViewCopy.
#pragma once
#include "opdev/op_executor.h"

namespace l0op {
const aclTensor* Contiguous(const aclTensor* x, aclOpExecutor* executor);
const aclTensor* ViewCopy(const aclTensor* x, const aclTensor* y, aclOpExecutor* executor);
}  // namespace l0op
