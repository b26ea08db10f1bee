// Stub: aclnn logging (printf-checked) and CHECK_RET.
#pragma once
#include "aclnn/aclnn_base.h"

namespace stub {
__attribute__((format(printf, 2, 3))) void AclnnLogE(aclnnStatus code, const char* fmt, ...);
}

#define OP_LOGE(code, ...) ::stub::AclnnLogE(code, __VA_ARGS__)
#define CHECK_RET(cond, ret) \
    do {                     \
        if (!(cond)) {       \
            return ret;      \
        }                    \
    } while (0)
