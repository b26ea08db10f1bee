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
#define OP_CHECK_NULL_WITH_CONTEXT(context, ptr) \
    do {                                         \
        if ((ptr) == nullptr) {                  \
            (void)(context);                     \
            return ge::GRAPH_FAILED;             \
        }                                        \
    } while (0)
