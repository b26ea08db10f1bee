// opgen host-side emulation: aclnn logging and CHECK_RET (docs/reference/ascendc.md §2.8). Our own minimal
// declarations, not CANN's headers. OP_LOGE is printf-checked (a wrong format specifier in an emitted
// message fails -Werror=format); the first error since the last ClearAclnnError() is kept with its code,
// so a caller of an emulated aclnn API can report CANN's code and message.
#pragma once
#include <cstdarg>
#include <cstdio>
#include <string>

#include "aclnn/aclnn_base.h"

namespace opgen_host {
struct AclnnError {
    aclnnStatus code = ACLNN_SUCCESS;
    std::string message;
};
inline AclnnError& LastAclnnError()
{
    static thread_local AclnnError error;
    return error;
}
inline void ClearAclnnError() { LastAclnnError() = AclnnError(); }

__attribute__((format(printf, 2, 3))) inline void AclnnLogE(aclnnStatus code, const char* fmt, ...)
{
    AclnnError& error = LastAclnnError();
    if (!error.message.empty()) {
        return;
    }
    char buf[2048];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(buf, sizeof(buf), fmt, args);
    va_end(args);
    error.code = code;
    error.message = buf;
}
}  // namespace opgen_host

#define OP_LOGE(code, ...) ::opgen_host::AclnnLogE(code, __VA_ARGS__)
namespace opgen_host {
// A warning: format-checked like OP_LOGE, not kept (CANN's OP_LOGW(fmt, ...) takes no code).
__attribute__((format(printf, 1, 2))) inline void AclnnLogW(const char* /*fmt*/, ...) {}
}  // namespace opgen_host
#define OP_LOGW(...) ::opgen_host::AclnnLogW(__VA_ARGS__)
#define CHECK_RET(cond, ret) \
    do {                     \
        if (!(cond)) {       \
            return ret;      \
        }                    \
    } while (0)
