// opgen host-side emulation: DFX (profiling) macros; they only type-check their arguments.
#pragma once
#include "aclnn/aclnn_base.h"

namespace opgen_host {
template <typename... Args>
void Use(const Args&...)
{
}
}  // namespace opgen_host

#define DFX_IN(...) ::opgen_host::Use(__VA_ARGS__)
#define DFX_OUT(...) ::opgen_host::Use(__VA_ARGS__)
#define L2_DFX_PHASE_1(api, in, out) \
    do {                             \
        (void)&api;                  \
        in;                          \
        out;                         \
    } while (0)
#define L2_DFX_PHASE_2(api) (void)&api
#define L0_DFX(opType, ...) ::opgen_host::Use(__VA_ARGS__)
