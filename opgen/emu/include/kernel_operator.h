// opgen's own CPU emulation of the AscendC device API subset emitted by opgen (issue 4; DESIGN.md "CPU
// emulation of the emitted code"; reference/ascendc.md §1). Not CANN's header: an independent, header-only
// C++17 implementation for running emitted kernels on x86 with fidelity checks.
//
// Deliberate deviations from hardware (stricter, to catch bugs):
//  * DataCopy count form: count*sizeof(T) not a multiple of 32 B is a fault (hardware rounds down silently).
//  * UB is poisoned at InitBuffer and at every TQue::AllocTensor; GetValue of an unwritten element and a
//    copy of unwritten UB bytes to GM are faults. Vector ops propagate poison lane by lane instead of
//    faulting (computing on pad lanes is legal; only observing them is a bug).
//  * GM accesses are checked against the whole registered buffer (emu::RegisterGm), not the SetGlobalBuffer count.
//  * AllocTensor with every buffer in use, DeQue on an empty queue, EnQue beyond depth: faults (hardware hangs).
//  * A core returning while others wait in SyncAll: fault (hardware deadlocks).
#pragma once
#include <cstdint>
#include <cstring>

#include "emu/core.h"
#include "emu/types.h"
#include "emu/tensor.h"
#include "emu/datacopy.h"
#include "emu/vector.h"

#ifndef __aicore__
#define __aicore__
#endif
#ifndef __global__
#define __global__
#endif
#ifndef __gm__
#define __gm__
#endif
#ifndef GM_ADDR
#define GM_ADDR uint8_t*
#endif

#define ASCEND_IS_AIV (true)
#define ASCEND_IS_AIC (false)
#define KERNEL_TASK_TYPE_DEFAULT(x)

// Tiling data: the host wrote the struct's bytes to the tiling buffer.
#define GET_TILING_DATA_WITH_STRUCT(Struct, var, tiling) \
    Struct var;                                          \
    std::memcpy(&(var), (tiling), sizeof(Struct))
#define TILING_KEY_IS(k) (::emu::Core().tilingKey == static_cast<uint64_t>(k))

namespace AscendC {
inline GM_ADDR GetUserWorkspace(GM_ADDR workspace) { return workspace; }
}  // namespace AscendC
