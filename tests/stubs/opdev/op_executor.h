// Stub: the op executor and kernel-launch macros (reference/ascendc.md §2.8).
#pragma once
#include <cstdint>

#include "aclnn/aclnn_base.h"

struct aclOpExecutor {
    aclTensor* AllocTensor(const op::Shape& shape, op::DataType dtype, op::Format format);
    const aclTensor* ConvertToTensor(const aclIntArray* array, op::DataType dtype);
    uint64_t GetWorkspaceSize();
};

namespace stub {
class UniqueExecutor {
public:
    aclOpExecutor* get();
    aclOpExecutor* operator->();
    void ReleaseTo(aclOpExecutor** executor);
};
struct LaunchArgs {};
template <typename... Args>
LaunchArgs Pack(const Args&...)
{
    return {};
}
template <typename... Args>
aclnnStatus Launch(const char* opType, const Args&...)
{
    (void)opType;
    return ACLNN_SUCCESS;
}
}  // namespace stub

aclnnStatus CommonOpExecutorRun(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream);

#define OP_TYPE_REGISTER(opType) static const char* const g_op_type_##opType = #opType
#define OP_INPUT(...) ::stub::Pack(__VA_ARGS__)
#define OP_OUTPUT(...) ::stub::Pack(__VA_ARGS__)
#define OP_ATTR(...) ::stub::Pack(__VA_ARGS__)
#define ADD_TO_LAUNCHER_LIST_AICORE(opType, ...) ::stub::Launch(#opType, __VA_ARGS__)
