// Stub: host-side op logging (printf-checked).
#pragma once

namespace stub {
__attribute__((format(printf, 2, 3))) void HostLogE(const char* node, const char* fmt, ...);
}

#define OP_LOGE(node, ...) ::stub::HostLogE(node, __VA_ARGS__)
#define OP_CHECK_NULL_WITH_CONTEXT(context, ptr) \
    do {                                         \
        if ((ptr) == nullptr) {                  \
            (void)(context);                     \
            return ge::GRAPH_FAILED;             \
        }                                        \
    } while (0)
