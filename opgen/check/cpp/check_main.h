// opgen check: the declaration every op's generated driver.cpp calls. opgen_check::SharedMain is
// opgen_check::Main of check_driver.h compiled once per build root (check_main.cpp, linked into every op's
// launch driver). Its interface is plain C types only, so an op's driver.cpp includes nothing of the C++ library
// and compiles in a few hundredths of a second (docs/design.md "Build variants"). Our own code.
#pragma once

#include <cstdint>

#ifndef GM_ADDR
#define GM_ADDR uint8_t*
#endif

namespace opgen_check {

// The kernel entry called with its GM_ADDR arguments in ABI order (inputs, outputs, workspace, tiling): args[k]
// is the k-th argument.
using KernelCall = void (*)(uint8_t* const* args);

// inputNames / outputNames: nInputs / nOutputs parameter names (OpDef order) as C strings; launchKind: 0 =
// LaunchKind::AivOnly, 1 = LaunchKind::Mix12, 2 = LaunchKind::AicOnly (check_driver.h); the rest as Main.
// Outputs written in place into an input's buffer (OpSpec.output(ref=)): refs[k] is the index of the input output k
// updates, -1 for an ordinary output. Called by the driver of such an op before SharedMain(ByKey); the kernel then
// gets the input's GM address as that output's, and the output read back is that buffer after the launch.
void SetOutputRefs(const int* refs, int nOutputs);

// Inputs the OpDef declares ValueDepend (host arrays): flags[k] is 1 for such an input k. Called by the driver of an
// op that has one before SharedMain(ByKey); TilingFunc's input tensors then carry those inputs' values.
void SetValueDepend(const int* flags, int nInputs);

int SharedMain(int argc, char** argv, const char* opType, const char* const* inputNames, int nInputs,
               const char* const* outputNames, int nOutputs, KernelCall kernel, int launchKind);

// SharedMain with the launch kinds of some tiling keys (the entry's KERNEL_TASK_TYPE(key, type)): keyKinds[k] is
// the launchKind (as above) of tiling key keys[k], nKeys of them; any other key launches as launchKind.
int SharedMainByKey(int argc, char** argv, const char* opType, const char* const* inputNames, int nInputs,
                    const char* const* outputNames, int nOutputs, KernelCall kernel, int launchKind,
                    const uint64_t* keys, const int* keyKinds, int nKeys);

}  // namespace opgen_check
