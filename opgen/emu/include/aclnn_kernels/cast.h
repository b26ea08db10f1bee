// opgen host-side emulation: L0 Cast. The host code never reads tensor data, so the cast allocates a tensor of
// the target dtype with the source's shape (owned by the executor) and copies nothing.
#pragma once
#include "opdev/op_executor.h"

namespace l0op {
inline const aclTensor* Cast(const aclTensor* self, op::DataType dstDtype, aclOpExecutor* executor)
{
    return executor->AllocTensor(self->GetViewShape(), dstDtype, op::Format::FORMAT_ND);
}
}  // namespace l0op
