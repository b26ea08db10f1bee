// opgen host-side emulation: op logging of the InferShape / tiling layer (docs/reference/ascendc.md §2.6).
// OP_LOGE is printf-checked (a wrong format specifier in an emitted message is a compile error under
// -Werror=format) and prints "[ERROR] <node>: <message>" to stderr.
#pragma once
#include <cstdarg>
#include <cstdio>

#include "graph/types.h"

namespace opgen_host {
__attribute__((format(printf, 2, 3))) inline void HostLogE(const char* node, const char* fmt, ...)
{
    std::fprintf(stderr, "[ERROR] %s: ", node == nullptr ? "?" : node);
    va_list args;
    va_start(args, fmt);
    std::vfprintf(stderr, fmt, args);
    va_end(args);
    std::fputc('\n', stderr);
}
}  // namespace opgen_host

#define OP_LOGE(node, ...) ::opgen_host::HostLogE(node, __VA_ARGS__)
// As CANN's (op_common/log/log.h): logs "<ptr> is nullptr!" under the context's node name and fails.
#define OP_CHECK_NULL_WITH_CONTEXT(context, ptr)                                                           \
    do {                                                                                                   \
        if ((ptr) == nullptr) {                                                                            \
            ::opgen_host::HostLogE((context) == nullptr ? "nil" : (context)->GetNodeName(), "%s is nullptr!", \
                                   #ptr);                                                                  \
            return ge::GRAPH_FAILED;                                                                       \
        }                                                                                                  \
    } while (0)
#define OP_CHECK_IF(condition, log, return_expr) \
    do {                                         \
        if (condition) {                         \
            log;                                 \
            return_expr;                         \
        }                                        \
    } while (0)
