// opgen's own CPU emulation of the AscendC device API subset emitted by opgen (docs/design.md "CPU
// emulation of the emitted code"; docs/reference/ascendc.md §1). Not CANN's header: an independent, header-only
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
//  * Gather (emu/vector.h): an unaligned, out-of-range or unwritten byte offset, or a source lane inside the
//    destination (in-place gather), is a fault (hardware leaves the result unspecified).
//  * Cube side (emu/cube.h: Nd2Nz DataCopy, LoadData, Mmad, Fixpipe with real NZ/ZZ/ZN layouts, L1/L0
//    capacities) and mixed kernels (emu/mix.h: emu::LaunchMix 1 AIC : 2 AIV, CrossCoreSetFlag/WaitFlag with
//    blocking semantics; every-core-blocked and timeout deadlocks fault). See EMU.md.
//  * Pipes (emu/pipes.h): instructions run synchronously, but an on-chip buffer access that no PipeBarrier,
//    SetFlag/WaitFlag, queue hand-off or SyncAll orders after another pipe's conflicting access (or a dependent
//    vector instruction without PipeBarrier<PIPE_V>) is a race fault naming both statements; unpaired event flags
//    fault. Every device call takes a hidden trailing emu::Site (the call site) that nothing converts to.
#pragma once
#include <cstdint>
#include <cstring>

#include "emu/core.h"
#include "emu/types.h"
#include "emu/tensor.h"
#include "emu/datacopy.h"
#include "emu/vector.h"
#include "emu/cube.h"
#include "emu/mix.h"
#include "emu/scalar.h"

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

// Per simulated core (emu/mix.h): true on the AIV / AIC cores of the launch; emu::Launch runs AIV
// cores only. As in the real device compile, where the macros expand to `constexpr(g_coreType == ...)`, they are
// valid only as the condition of an if written without parentheses, `if ASCEND_IS_AIV { ... }`: here they expand
// to an if-init-statement, so `x = ASCEND_IS_AIC ? a : b` or `if (ASCEND_IS_AIC)` does not compile either.
#define ASCEND_IS_AIV (const bool emuCoreIsAiv_ = ::emu::IsAivCore(); emuCoreIsAiv_)
#define ASCEND_IS_AIC (const bool emuCoreIsAic_ = ::emu::IsAicCore(); emuCoreIsAic_)
// Checks the declared kernel type against the launch (emu/mix.h).
#define KERNEL_TASK_TYPE_DEFAULT(x) ::emu::CheckKernelType((x), #x)
// The kernel type of one tiling key (emu/mix.h): checked when it is the launch's key; the default then does not apply.
#define KERNEL_TASK_TYPE(key, x) ::emu::CheckKernelTypeOfKey(static_cast<uint64_t>(key), (x), #x)

// Tiling data: the host wrote the struct's bytes to the tiling buffer.
#define GET_TILING_DATA_WITH_STRUCT(Struct, var, tiling) \
    Struct var;                                          \
    std::memcpy(&(var), (tiling), sizeof(Struct))
// The tiling struct the kernel build records for the kernel (the op compiler and the UT header generator read it
// off the entry). As the real macro: a declaration `static const uint64_t <unique> = sizeof(Struct)` the caller
// ends with ';' (so the struct must be complete here), valid at namespace or block scope, nothing else.
#define EMU_TILING_CONCAT2_(a, b) a##b
#define EMU_TILING_CONCAT_(a, b) EMU_TILING_CONCAT2_(a, b)
#define REGISTER_TILING_DEFAULT(Struct) \
    [[maybe_unused]] static const uint64_t EMU_TILING_CONCAT_(emuTilingStruct_, __COUNTER__) = sizeof(Struct)
// On the NPU each tiling key selects a kernel binary compiled with TILING_KEY_IS(key) true; a key no branch
// handles has no binary. Emulated at run time: the launch faults when a core tested keys and matched none.
#define TILING_KEY_IS(k) (::emu::TilingKeyIs(static_cast<uint64_t>(k)))

namespace AscendC {
// The user part of the workspace: past the emu::SysWorkspaceBytes() of system workspace.
inline GM_ADDR GetUserWorkspace(GM_ADDR workspace)
{
    return workspace == nullptr ? nullptr : workspace + ::emu::SysWorkspaceBytes();
}
}  // namespace AscendC

// The -O0 launch drivers of opgen check (opgen/check/build.py SHARED_INSTANCES) define EMU_SHARED_INSTANCES: the
// emulation's common template specializations (emu/instances.h) are then declared `extern template` here and
// defined once, in a shared object every such driver links, instead of in every kernel's object.
#ifdef EMU_SHARED_INSTANCES
#define EMU_SHARED_FN(...) extern template __VA_ARGS__;
#define EMU_SHARED_CLASS(...) extern template class __VA_ARGS__;
#include "emu/instances.h"
#undef EMU_SHARED_FN
#undef EMU_SHARED_CLASS
#endif
