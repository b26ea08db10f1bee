// Burst counting of the cube path's ND -> NZ copy (docs/reference/kernel_cost.md §1: a contiguous GM run is one
// burst), for tests/test_cost.py: 1 AIC copies a [20, 40] half tile out of a row-major [20, 64] GM matrix into L1
// NZ (Nd2Nz), twice. Each of its 20 source rows is one contiguous run of 40 halves (80 B): 20 bursts, 96 B each in
// 32-B blocks, a copy; the second copy's blocks were all touched by the first (L2 hits). Prints "cost <core>
// <bursts> <burst bytes> <retouched bytes>".
#include <cstdio>
#include <vector>

#include "kernel_operator.h"
#include "emu/launch.h"

using namespace AscendC;

int main()
{
    std::vector<half> x(20 * 64, half(1.0f));
    emu::RegisterGm(x.data(), x.size() * sizeof(half), "x");
    emu::LaunchResult r = emu::LaunchCube(1, emu::CoreMem::Ascend910B(), [&] {
        TPipe pipe; TBuf<TPosition::A1> l1;
        pipe.InitBuffer(l1, 32 * 48 * sizeof(half));   // NZ: 3 fractal columns of 32 (ceil16(20)) rows
        LocalTensor<half> a = l1.Get<half>();
        GlobalTensor<half> gx;
        gx.SetGlobalBuffer(x.data(), 20 * 64);
        DataCopy(a, gx, Nd2NzParams(1, 20, 40, 0, 64, 32, 1, 0));
        SetFlag<HardEvent::MTE2_MTE1>(EVENT_ID0);   // nothing reads the first copy; order the rewrite anyway
        WaitFlag<HardEvent::MTE2_MTE1>(EVENT_ID0);
        DataCopy(a, gx, Nd2NzParams(1, 20, 40, 0, 64, 32, 1, 0));   // the same rows again: every block retouched
    });
    emu::PrintReport(r);
    for (size_t i = 0; i < r.issue.size(); ++i)
        std::printf("cost %zu %llu %llu %llu\n", i, (unsigned long long)r.issue[i].bursts,
                    (unsigned long long)r.issue[i].burstBytes32, (unsigned long long)r.issue[i].retouchBytes32);
    return 0;
}
