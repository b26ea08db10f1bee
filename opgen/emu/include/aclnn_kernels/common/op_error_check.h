// opgen host-side emulation: the aclnn parameter-check macros of CANN's op repositories
// (aclnn_kernels/common/op_error_check.h: OP_CHECK_NULL, OP_CHECK_DTYPE_NOT_SUPPORT, OP_CHECK_DTYPE_NOT_MATCH,
// OP_CHECK_COMM_INPUT) with their status codes and messages. Our own code, not CANN's header; `#param` prints
// the argument as written, as CANN's does.
#pragma once
#include <initializer_list>

#include "aclnn/aclnn_base.h"
#include "opdev/common_types.h"
#include "opdev/data_type_utils.h"
#include "opdev/op_log.h"

inline bool IsNullptr(const aclTensor* tensor, const char* name)
{
    if (tensor == nullptr) {
        OP_LOGE(ACLNN_ERR_PARAM_NULLPTR, "Expected a proper Tensor but got null for argument %s.", name);
        return true;
    }
    return false;
}

inline bool IsNullptr(const aclScalar* scalar, const char* name)
{
    if (scalar == nullptr) {
        OP_LOGE(ACLNN_ERR_PARAM_NULLPTR, "Expected a value of type number for argument %s but instead found type null.",
                name);
        return true;
    }
    return false;
}

inline bool IsNullptr(const aclIntArray* array, const char* name)
{
    if (array == nullptr) {
        OP_LOGE(ACLNN_ERR_PARAM_NULLPTR, "Expected a value of type List[int] for argument %s but instead found type null.",
                name);
        return true;
    }
    return false;
}

inline bool CheckType(op::DataType dtype, const std::initializer_list<op::DataType>& supported)
{
    for (op::DataType d : supported) {
        if (d == dtype) {
            return true;
        }
    }
    return false;
}

#define OP_CHECK_NULL(param, retExpr) \
    if (IsNullptr(param, #param)) {   \
        retExpr;                      \
    }

#define OP_CHECK_DTYPE_NOT_SUPPORT(tensor, supportList, retExpr)                                                  \
    if (!CheckType(tensor->GetDataType(), supportList)) {                                                         \
        OP_LOGE(ACLNN_ERR_PARAM_INVALID, "Tensor %s not implemented for %s, should be in dtype support list %s.", \
                #tensor, op::ToString(tensor->GetDataType()).GetString(), op::ToString(supportList).GetString()); \
        retExpr;                                                                                                  \
    }

#define OP_CHECK_DTYPE_NOT_MATCH(tensor, expectedDtype, retExpr)                                           \
    if (tensor->GetDataType() != expectedDtype) {                                                          \
        OP_LOGE(ACLNN_ERR_PARAM_INVALID, "Tensor %s expected dtype is %s but found %s.", #tensor,          \
                op::ToString(expectedDtype).GetString(), op::ToString(tensor->GetDataType()).GetString()); \
        retExpr;                                                                                           \
    }

#define OP_CHECK_COMM_INPUT(workspaceSize, executor)                                   \
    if (workspaceSize == nullptr || executor == nullptr) {                             \
        OP_LOGE(ACLNN_ERR_PARAM_NULLPTR, "The workspaceSize or executor is nullptr."); \
        return ACLNN_ERR_PARAM_NULLPTR;                                                \
    }
