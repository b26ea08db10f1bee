// Stub: DFX (profiling) macros; they only type-check their arguments here.
#pragma once
#include "aclnn/aclnn_base.h"

namespace stub {
template <typename... Args>
void Use(const Args&...)
{
}
}  // namespace stub

#define DFX_IN(...) ::stub::Use(__VA_ARGS__)
#define DFX_OUT(...) ::stub::Use(__VA_ARGS__)
#define L2_DFX_PHASE_1(api, in, out) \
    do {                             \
        (void)&api;                  \
        in;                          \
        out;                         \
    } while (0)
#define L2_DFX_PHASE_2(api) (void)&api
#define L0_DFX(opType, ...) ::stub::Use(__VA_ARGS__)
