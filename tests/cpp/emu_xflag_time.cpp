// The time line across cores (emu/core.h LaunchState::xtokTime) on one hand-made mix kernel, for
// tests/test_timeline_determinism.py: LaunchMix(1), each AIV runs one Duplicate of 2048 floats (32 repeats + 8
// issue = 40 cycles on PIPE_V), CrossCoreSetFlag<2, PIPE_V>(1), twenty more such Duplicates (each into its own 8 KB
// of UB, so nothing orders them), a second set; the AIC
// waits for flag 1 twice. argv[1] = "late": the AIC sleeps 200 ms before its first wait (both sets pending when it
// waits), "early": the AIVs sleep 200 ms before their second set (the first wait finds one set). Each wait must
// join the time of the set it consumes, so both orders give the same AIC span. Prints "span <order> <AIC spanCycles>".
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "kernel_operator.h"
#include "emu/launch.h"

using namespace AscendC;

int main(int argc, char** argv)
{
    const std::string order = argc > 1 ? argv[1] : "late";
    auto sleep = [] { std::this_thread::sleep_for(std::chrono::milliseconds(200)); };
    emu::LaunchResult r = emu::LaunchMix(1, emu::CoreMem{}, [&] {
        if ASCEND_IS_AIV {
            TPipe pipe;
            TBuf<> b;
            pipe.InitBuffer(b, 21 * 8192);
            LocalTensor<float> t = b.Get<float>();
            Duplicate(t, 1.0f, 2048);
            CrossCoreSetFlag<2, PIPE_V>(1);
            for (int i = 1; i <= 20; ++i) Duplicate(t[i * 2048], 2.0f, 2048);
            if (order == "early") sleep();
            CrossCoreSetFlag<2, PIPE_V>(1);
        } else {
            if (order == "late") sleep();
            CrossCoreWaitFlag(1);
            CrossCoreWaitFlag(1);
        }
    });
    if (!r.ok) {
        std::printf("fault %s\n", r.firstFault.c_str());
        return 1;
    }
    std::printf("span %s", order.c_str());
    for (auto& c : r.issue) std::printf(" %llu", (unsigned long long)c.spanCycles);
    std::printf("\n");
    return 0;
}
