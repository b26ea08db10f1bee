// Issue-cost counters of the emulation (docs/reference/kernel_cost.md §1) on one small hand-made kernel, for
// tests/test_cost.py: 2 cores, each loads 2048 floats in one burst, runs Muls, Exp and a 16384-float Duplicate,
// stores 4 strided bursts of 100 bytes and meets the other core at a SyncAll. Prints "cost <core> <counters>".
#include <cstdio>
#include <vector>

#include "kernel_operator.h"
#include "emu/launch.h"

using namespace AscendC;

int main()
{
    std::vector<float> x(4096, 0.5f), y(4096, 0.0f);
    emu::RegisterGm(x.data(), x.size() * 4, "x");
    emu::RegisterGm(y.data(), y.size() * 4, "y");
    emu::LaunchResult r = emu::Launch(2, 196608, [&] {
        TPipe pipe; TBuf<> ba, bb, bc;
        pipe.InitBuffer(ba, 8192); pipe.InitBuffer(bb, 8192); pipe.InitBuffer(bc, 65536);
        LocalTensor<float> a = ba.Get<float>(), b = bb.Get<float>(), c = bc.Get<float>();
        GlobalTensor<float> gx, gy;
        gx.SetGlobalBuffer(x.data() + 2048 * GetBlockIdx(), 2048);
        gy.SetGlobalBuffer(y.data() + 2048 * GetBlockIdx(), 2048);
        DataCopy(a, gx, 2048);                       // 1 burst of 8192 B
        SetFlag<HardEvent::MTE2_V>(EVENT_ID0);
        WaitFlag<HardEvent::MTE2_V>(EVENT_ID0);      // flag wait 1
        Muls(a, a, 2.0f, 2048);                      // 32 repeats, 1 issue
        PipeBarrier<PIPE_V>();                       // barrier 1
        Exp(b, a, 2048);                             // 32 repeats at 32 lanes: 64 cycles, 1 issue
        Duplicate(c, 1.0f, 16384);                   // 256 repeats: 256 cycles, 2 issues (255 + 1)
        SetFlag<HardEvent::V_MTE3>(EVENT_ID0);
        WaitFlag<HardEvent::V_MTE3>(EVENT_ID0);      // flag wait 2
        DataCopyPad(gy, b, DataCopyExtParams(4, 100, 0, 28, 0));   // 4 bursts of 100 B (128 B in 32-B blocks)
        SyncAll();
    });
    emu::PrintReport(r);
    for (size_t i = 0; i < r.issue.size(); ++i) {
        const emu::IssueCounts& n = r.issue[i];
        std::printf("cost %zu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu\n", i, (unsigned long long)r.vecCycles[i],
                    (unsigned long long)r.cubeCycles[i], (unsigned long long)n.vecIssues,
                    (unsigned long long)n.barriers, (unsigned long long)n.flagWaits, (unsigned long long)n.bursts,
                    (unsigned long long)n.burstBytes32, (unsigned long long)n.syncAlls,
                    (unsigned long long)n.crossWaits, (unsigned long long)n.retouchBytes32);
    }
    return 0;
}
