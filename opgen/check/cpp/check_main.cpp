// opgen check: opgen_check::Main compiled once for every op's launch driver (check_main.h). Our own code.
// The registries behind IMPL_OP_OPTILING are defined here, once for every launch driver: the TilingFunc objects
// opgen check links are compiled with EMU_SHARED_REGISTRY, which only declares them (register/op_impl_registry.h).
#define EMU_SHARED_REGISTRY_DEFINE
#include "check_driver.h"
#include "check_main.h"

void opgen_check::SetOutputRefs(const int* refs, int nOutputs)
{
    OutputRefs().assign(refs, refs + nOutputs);
}

void opgen_check::SetValueDepend(const int* flags, int nInputs)
{
    ValueDepend().assign(flags, flags + nInputs);
}

int opgen_check::SharedMain(int argc, char** argv, const char* opType, const char* const* inputNames, int nInputs,
                            const char* const* outputNames, int nOutputs, KernelCall kernel, int launchKind)
{
    const std::vector<std::string> ins(inputNames, inputNames + nInputs);
    const std::vector<std::string> outs(outputNames, outputNames + nOutputs);
    const Kernel call = [kernel](const std::vector<uint8_t*>& args) { kernel(args.data()); };
    return Main(argc, argv, opType, ins, outs, call,
                launchKind == 1 ? LaunchKind::Mix12 : launchKind == 2 ? LaunchKind::AicOnly : LaunchKind::AivOnly);
}

static opgen_check::LaunchKind KindOf(int launchKind)
{
    using opgen_check::LaunchKind;
    return launchKind == 1 ? LaunchKind::Mix12 : launchKind == 2 ? LaunchKind::AicOnly : LaunchKind::AivOnly;
}

int opgen_check::SharedMainByKey(int argc, char** argv, const char* opType, const char* const* inputNames,
                                 int nInputs, const char* const* outputNames, int nOutputs, KernelCall kernel,
                                 int launchKind, const uint64_t* keys, const int* keyKinds, int nKeys)
{
    const std::vector<std::string> ins(inputNames, inputNames + nInputs);
    const std::vector<std::string> outs(outputNames, outputNames + nOutputs);
    const Kernel call = [kernel](const std::vector<uint8_t*>& args) { kernel(args.data()); };
    std::vector<std::pair<uint64_t, LaunchKind>> byKey;
    for (int k = 0; k < nKeys; ++k) byKey.emplace_back(keys[k], KindOf(keyKinds[k]));
    return Main(argc, argv, opType, ins, outs, call, KindOf(launchKind), byKey);
}
